//! Interference between temps, answered in near-constant time per query: the SSA criterion, plus
//! the SIMT rules for values written in all lanes and for values leaving divergent loops
//! ([`Liveness::loop_leaving`]). The design is in `docs/ir.md` ("Interference").

use crate::live_set::{LiveList, LiveSet};
use crate::liveness::{BlockSets, Liveness, phi_preds, solve};
use kiln_ir::{Block, Cfg, Function, Lanes, Opcode, Temp};

/// No definition (a temp number nothing defines).
const NONE: u32 = u32::MAX;

/// Interference queries over one function and its liveness.
#[derive(Clone, Copy, Debug)]
pub struct Interference<'l> {
    liveness: &'l Liveness,
    data: &'l InterferenceData,
}

/// What the queries read, computed once per liveness result and kept in it
/// (`Liveness::interference`): the allocators that ask about one function share it.
#[derive(Clone, Debug, Default)]
pub struct InterferenceData {
    /// (block, index) of each temp's definition.
    def_site: Vec<(u32, u32)>,
    /// Per temp, `uses[use_start[t]..use_start[t + 1]]`: (block, index of the last non-phi use in
    /// that block), sorted by block.
    use_start: Vec<u32>,
    uses: Vec<(u32, u32)>,
    /// Defined by an all-lanes write into a per-lane file.
    all_lanes: Vec<bool>,
    /// Per-lane temps: their file holds a value per lane.
    per_lane: Vec<bool>,
    /// Live-out along the linear CFG for every temp, when some temp is written in all lanes.
    wide_live_out: Option<Vec<LiveSet>>,
    /// Loops of each block, innermost first, as indices into `cfg.loops`.
    loops_of: Vec<Vec<u32>>,
    /// [`Interference::all_lanes_candidates`], once asked.
    candidates: std::sync::OnceLock<Vec<Vec<u32>>>,
}

impl<'l> Interference<'l> {
    /// The queries on `func` with `liveness`, its liveness on `cfg`: definition sites, last uses
    /// per block and, when the function writes some per-lane temp in all lanes, liveness along
    /// the linear CFG, computed on the first call for this liveness result and kept in it.
    /// Cost: linear in the instructions and the uses (bucketed by temp), plus one
    /// dataflow when needed.
    pub fn new(func: &Function, cfg: &Cfg, liveness: &'l Liveness) -> Interference<'l> {
        let data = liveness
            .interference
            .get_or_init(|| InterferenceData::compute(func, cfg, liveness));
        Interference { liveness, data }
    }
}

impl InterferenceData {
    fn compute(func: &Function, cfg: &Cfg, liveness: &Liveness) -> InterferenceData {
        let n = func.temps.len();
        let files = func.target.files();
        let per_lane: Vec<bool> = func
            .temps
            .iter()
            .map(|c| {
                !c.is_none()
                    && files
                        .get(c.file.index())
                        .is_some_and(|f| f.lanes == Lanes::PerLane)
            })
            .collect();
        let mut def_site = vec![(NONE, NONE); n];
        // Uses bucketed by temp (a counting sort: the walk meets them in block order, which
        // each bucket keeps); the last use per (temp, block) wins.
        let mut count = vec![0u32; n + 1];
        for b in func.block_ids() {
            for (k, inst) in func.block(b).insts.iter().enumerate() {
                for d in &inst.defs {
                    def_site[d.temp.index()] = (b.0, k as u32);
                }
                if !inst.op.is_phi() {
                    for t in inst.used_temps() {
                        count[t.index() + 1] += 1;
                    }
                }
            }
        }
        for t in 0..n {
            count[t + 1] += count[t];
        }
        let mut slots = vec![(0u32, 0u32); count[n] as usize];
        let mut fill = count.clone();
        for b in func.block_ids() {
            for (k, inst) in func.block(b).insts.iter().enumerate() {
                if !inst.op.is_phi() {
                    for t in inst.used_temps() {
                        slots[fill[t.index()] as usize] = (b.0, k as u32);
                        fill[t.index()] += 1;
                    }
                }
            }
        }
        let mut use_start = Vec::with_capacity(n + 1);
        let mut uses: Vec<(u32, u32)> = Vec::with_capacity(slots.len());
        for t in 0..n {
            use_start.push(uses.len() as u32);
            for &(b, k) in &slots[count[t] as usize..count[t + 1] as usize] {
                let own = uses.len() > use_start[t] as usize;
                match uses.last_mut() {
                    Some(last) if own && last.0 == b => last.1 = k,
                    _ => uses.push((b, k)),
                }
            }
        }
        use_start.push(uses.len() as u32);
        let all_lanes: Vec<bool> = (0..n)
            .map(|t| liveness.linear.get(t).copied().unwrap_or(false) && per_lane[t])
            .collect();
        let wide_live_out = all_lanes
            .iter()
            .any(|&w| w)
            .then(|| wide_liveness(func, cfg));
        let loops_of = func
            .block_ids()
            .map(|b| cfg.enclosing_loops(b).map(|l| l as u32).collect())
            .collect();
        InterferenceData {
            def_site,
            use_start,
            uses,
            all_lanes,
            per_lane,
            wide_live_out,
            loops_of,
            candidates: Default::default(),
        }
    }
}

impl<'l> Interference<'l> {
    /// The block and index of `t`'s definition.
    pub fn def_site(&self, t: Temp) -> Option<(Block, usize)> {
        let (b, k) = *self.data.def_site.get(t.index())?;
        (b != NONE).then_some((Block(b), k as usize))
    }

    /// Index of the last non-phi use of `t` in `block`.
    pub fn last_use_in(&self, t: Temp, block: Block) -> Option<usize> {
        let range =
            self.data.use_start[t.index()] as usize..self.data.use_start[t.index() + 1] as usize;
        let uses = &self.data.uses[range];
        let i = uses.binary_search_by_key(&block.0, |u| u.0).ok()?;
        Some(uses[i].1 as usize)
    }

    /// Whether `t` is live right after instruction `index` of `block` (exact liveness).
    pub fn live_after(&self, t: Temp, block: Block, index: usize) -> bool {
        self.live_after_in(&self.liveness.live_out, t, block, index)
    }

    fn live_after_in(&self, live_out: &[LiveSet], t: Temp, block: Block, index: usize) -> bool {
        let (db, dk) = self.data.def_site[t.index()];
        if db == block.0 && dk as usize > index {
            return false;
        }
        live_out[block.index()].contains(t) || self.last_use_in(t, block).is_some_and(|k| k > index)
    }

    /// Whether `a` and `b` may not share register units.
    pub fn interferes(&self, func: &Function, a: Temp, b: Temp) -> bool {
        if a == b || func.class(a).file != func.class(b).file {
            return false;
        }
        let (Some(da), Some(db)) = (self.def_site(a), self.def_site(b)) else {
            return false;
        };
        if da == db {
            return true;
        }
        self.live_after(a, db.0, db.1)
            || self.live_after(b, da.0, da.1)
            || self.all_lanes_hits(a, da, b)
            || self.all_lanes_hits(b, db, a)
    }

    /// For every temp, the temps it may interfere with where one of the two is written in all
    /// lanes of a per-lane file beyond the SSA criterion (one live where the other is
    /// defined, which an allocator sees already): a symmetric superset of the pairs
    /// [`Self::interferes`] says yes to and the SSA criterion does not, so a caller asks the
    /// query of these candidates only rather than of every pair. Found in one backward walk of
    /// each block: what is live along the linear CFG after an all-lanes definition (and leaves
    /// a loop around it, and is defined beside it) — skipping blocks where the linear CFG keeps
    /// no per-lane value live that the logical one does not, in no loop values leave at
    /// different iterations. (A value defined while an all-lanes one is live is live where it
    /// is defined: the SSA criterion, no candidate.) Cost: the instructions of the blocks with
    /// an all-lanes definition, plus the live sets met at those definitions.
    pub fn all_lanes_candidates(&self, func: &Function) -> &'l [Vec<u32>] {
        let data: &'l InterferenceData = self.data;
        data.candidates
            .get_or_init(|| self.find_candidates(func, false))
    }

    /// The [`Self::all_lanes_candidates`] an all-lanes write makes interfere: for every temp,
    /// the temps it interferes with beyond the SSA criterion (and some the criterion also
    /// gives), symmetric and sorted. Asked once for the allocators that share this liveness
    /// (the colouring's graph and the assignment's rules ask of the same pairs).
    pub fn all_lanes_neighbours(&self, func: &Function) -> &'l [Vec<u32>] {
        let liveness: &'l Liveness = self.liveness;
        liveness
            .all_lanes_neighbours
            .get_or_init(|| self.find_candidates(func, true))
    }

    /// The candidates, or with `confirmed` those [`Self::interferes`] says yes to. A candidate
    /// `u` found at all-lanes definition `w` is live along the linear CFG after it or leaves
    /// a loop around it, which is what `all_lanes_hits(w, …, u)` asks of a per-lane `u` not
    /// itself linear; the other way never hits (`w` is linear), and one instruction defining
    /// both is the SSA criterion's.
    fn find_candidates(&self, func: &Function, confirmed: bool) -> Vec<Vec<u32>> {
        let n = func.temps.len();
        let keep = |w: u32, u: u32| {
            let (w, u) = (w as usize, u as usize);
            !confirmed
                || (u != w
                    && self.data.per_lane[u]
                    && !self.liveness.linear.get(u).copied().unwrap_or(false)
                    && func.temps[u].file == func.temps[w].file
                    && self.data.def_site[u].0 != NONE
                    && self.data.def_site[u] != self.data.def_site[w])
        };
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); n];
        let Some(wide) = &self.data.wide_live_out else {
            return out;
        };
        let wide_def = |inst: &kiln_ir::Inst| {
            inst.defs
                .iter()
                .any(|d| self.data.all_lanes[d.temp.index()])
        };
        // A block where every per-lane value live along the linear CFG is live logically, in no
        // loop that values leave at different iterations: an all-lanes write there overwrites
        // only what is live after it, which the SSA criterion already says — no candidates.
        let plain: Vec<bool> = func
            .block_ids()
            .map(|b| {
                self.data.loops_of[b.index()]
                    .iter()
                    .all(|&l| self.liveness.loop_leaving[l as usize].is_empty())
                    && wide[b.index()].iter().all(|t| {
                        !self.data.per_lane[t.index()]
                            || self.liveness.linear[t.index()]
                            || self.liveness.live_out[b.index()].contains(t)
                    })
            })
            .collect();
        let mut live = LiveList::new(n);
        let mut leaving: Vec<u32> = Vec::new();
        for b in func.block_ids() {
            let insts = &func.block(b).insts;
            if plain[b.index()] || !insts.iter().any(wide_def) {
                continue;
            }
            for t in wide[b.index()].iter() {
                live.enter(t.0, 0);
            }
            leaving.clear();
            for &l in &self.data.loops_of[b.index()] {
                leaving.extend(self.liveness.loop_leaving[l as usize].iter().map(|t| t.0));
            }
            for inst in insts.iter().rev() {
                for d in inst
                    .defs
                    .iter()
                    .filter(|d| self.data.all_lanes[d.temp.index()])
                {
                    let others = inst.defs.iter().map(|e| e.temp.0);
                    for u in live.list().iter().chain(&leaving).copied().chain(others) {
                        if !keep(d.temp.0, u) {
                            continue;
                        }
                        out[d.temp.index()].push(u);
                        out[u as usize].push(d.temp.0);
                    }
                }
                for d in &inst.defs {
                    live.leave(d.temp.0, 0);
                }
                if !inst.op.is_phi() {
                    for t in inst.used_temps() {
                        live.enter(t.0, 0);
                    }
                }
            }
            live.clear();
        }
        // Symmetric (each pair entered both ways above), sorted, without repeats or the temp
        // itself.
        for (a, us) in out.iter_mut().enumerate() {
            us.sort_unstable();
            us.dedup();
            us.retain(|&u| u as usize != a);
        }
        out
    }

    /// Whether an all-lanes definition of `w` at `site` overwrites per-lane `t` in a lane where
    /// `t` is still needed.
    fn all_lanes_hits(&self, w: Temp, site: (Block, usize), t: Temp) -> bool {
        if !self.data.all_lanes[w.index()]
            || !self.data.per_lane[t.index()]
            || self.liveness.linear[t.index()]
        {
            return false;
        }
        let wide = self
            .data
            .wide_live_out
            .as_ref()
            .expect("computed whenever a temp is written in all lanes");
        self.live_after_in(wide, t, site.0, site.1)
            || self.data.loops_of[site.0.index()]
                .iter()
                .any(|&l| self.liveness.loop_leaving[l as usize].contains(t))
    }
}

/// [`Interference::all_lanes_neighbours`] of `func` (liveness `liveness` on `cfg`), without
/// building the queries' data where there can be none: where the linear CFG is the logical one
/// and no value leaves a divergent loop, what is live along the linear CFG is what is live
/// (the same dataflow over the same edges), so every block is one where an all-lanes write
/// overwrites only what the SSA criterion already sees — no candidates.
pub fn all_lanes_neighbours<'l>(
    func: &Function,
    cfg: &Cfg,
    liveness: &'l Liveness,
) -> &'l [Vec<u32>] {
    let trivial = cfg.logical.succs == cfg.linear.succs
        && cfg.logical.preds == cfg.linear.preds
        && liveness.loop_leaving.iter().all(|l| l.is_empty());
    if trivial {
        return liveness
            .all_lanes_neighbours
            .get_or_init(|| vec![Vec::new(); func.temps.len()]);
    }
    Interference::new(func, cfg, liveness).all_lanes_neighbours(func)
}

/// Live-out of every block with every temp flowing along the linear CFG, and each logical phi
/// operand whose edge is not a linear edge kept live out of the phi block's later linear
/// predecessors, so that it survives the linear path from its predecessor to the phi. A
/// superset of the lanes that can still need a value, which is what an all-lanes write must
/// respect (and a target event that clobbers registers in every lane, such as a thread switch).
pub fn wide_liveness(func: &Function, cfg: &Cfg) -> Vec<LiveSet> {
    let mut sets = BlockSets::compute(func, cfg);
    let mut extra: Vec<Vec<u32>> = vec![Vec::new(); func.blocks.len()];
    for m in func.block_ids() {
        for inst in func.block(m).insts.iter().filter(|i| i.op == Opcode::Phi) {
            for (op, &p) in inst.operands.iter().zip(phi_preds(cfg, inst.op, m)) {
                let Some(t) = op.temp_id() else { continue };
                let linear_preds = &cfg.linear.preds[m.index()];
                if linear_preds.contains(&p) {
                    continue;
                }
                for &q in linear_preds.iter().filter(|&&q| q > p) {
                    extra[q.index()].push(t.0);
                }
            }
        }
    }
    for (b, e) in extra.into_iter().enumerate() {
        if !e.is_empty() {
            sets.phi_uses[b] = sets.phi_uses[b].union(&LiveSet::from_unsorted(e));
        }
    }
    solve(cfg, &sets, |_| true).1
}
