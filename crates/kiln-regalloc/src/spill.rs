//! The spiller of the SSA register allocator: after it, seed 000's register demand is at most the
//! budget in every register file at every instruction. Braun & Hack 2009 as ACO's
//! `aco_spill.cpp` applies it to a GPU IR, with spill and reload placement for SIMT and SSA
//! reconstruction. The design is in `docs/regalloc.md` ("Spilling").

use kiln_analysis::{InstDemand, Interference, LiveSet, Liveness, compute_liveness};
use kiln_ir::{Block, Cfg, Def, Demand, FileId, Function, Inst, Opcode, Operand, Temp};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::fmt;

/// What the spiller did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpillStats {
    pub spills: u32,
    pub reloads: u32,
    pub remats: u32,
    pub slots: u32,
}

/// Why the function cannot be brought within the budget: the instruction (block, index in the
/// input function) whose own operands and definitions need more than the budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpillError {
    pub block: Block,
    pub inst: usize,
    pub message: String,
}

impl fmt::Display for SpillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.block, self.inst, self.message)
    }
}

impl std::error::Error for SpillError {}

fn err(block: Block, inst: usize, message: impl Into<String>) -> SpillError {
    SpillError {
        block,
        inst,
        message: message.into(),
    }
}

/// Distance added per loop left on an edge: uses after a loop count as farther than any use
/// inside it (Braun & Hack 2009, §4.2).
const LOOP_EXIT: u32 = 1 << 24;
/// No next use.
const INF: u32 = u32::MAX;
/// Runs with a larger entry reserve before keeping nothing in registers at block entries.
const ATTEMPTS: usize = 6;
/// Open slots of its file a spilled value is checked against before it opens its own.
const SLOT_SEARCH: usize = 64;

/// A value and the store of it into a memory phi's slot.
type SlotCopy = (Temp, Inst);

/// The stores at a block's end of memory-phi operands that are themselves memory phis stored
/// there (`(operand, store into the phi's slot)`): a parallel copy between slots. A copy into
/// the slot it reads (a phi that is its own operand on the back edge) is dropped; the rest are
/// ordered so that each slot is written after every read of it — each copy reloaded and
/// stored at once, one register at a time — and what remains (cycles) is returned apart, to be
/// reloaded whole before it is stored.
fn slot_copies(
    chained: Vec<SlotCopy>,
    slot: &[u32],
    remat: &[bool],
    stats: &mut SpillStats,
) -> (Vec<SlotCopy>, Vec<SlotCopy>) {
    // The slot a copy reads (none for a recomputed value) and the slot it writes.
    let source = |o: Temp| (!remat[o.index()]).then(|| slot[o.index()]);
    let mut pending: Vec<SlotCopy> = Vec::with_capacity(chained.len());
    for (o, store) in chained {
        if source(o) == Some(store.imms[0]) {
            stats.spills -= 1;
        } else {
            pending.push((o, store));
        }
    }
    // Quadratic in the copies at one block's end, which are the memory phis of one block.
    let mut sequence = Vec::with_capacity(pending.len());
    while let Some(i) = (0..pending.len()).find(|&i| {
        let written = pending[i].1.imms[0];
        pending
            .iter()
            .enumerate()
            .all(|(j, (o, _))| j == i || source(*o) != Some(written))
    }) {
        sequence.push(pending.remove(i));
    }
    (sequence, pending)
}

/// Inserts spills, reloads and rematerialisations into the SSA function `func` so that seed
/// 000's register demand (kiln_analysis liveness: `Liveness::register_demand`, `max`) is at most
/// `budget[f]` units in every register file `f` at every instruction. The result is still SSA
/// and verifies. Errors name the instruction (block and index) whose own operands and
/// definitions exceed the budget.
pub fn spill(func: &mut Function, budget: &[u32]) -> Result<SpillStats, SpillError> {
    spill_with_versions(func, budget).map(|(stats, _)| stats)
}

/// [`spill`], also returning for every temp of the result the input temp it is a copy of
/// (reloads, rematerialisations and the phis joining them name their input value; the input's
/// own temps name themselves). The checker, given the input as the SSA function, proves an
/// allocation of the result once its temps are renamed this way; an allocator can use it for
/// affinities.
pub fn spill_with_versions(
    func: &mut Function,
    budget: &[u32],
) -> Result<(SpillStats, Vec<Temp>), SpillError> {
    let cfg = Cfg::compute(func).map_err(|e| err(e.block, 0, e.message))?;
    spill_analysed(func, budget, &cfg, None).map(|(stats, versions, _)| (stats, versions))
}

/// [`spill_with_versions`] on `func` with its CFG, and its liveness where the caller has it
/// (computed on `func` as it is, so that its kill flags are set): not computed again. Also,
/// where it spilled, the liveness of the spilled function, which the spiller computes to
/// check its demand, and the function it replaced (`None` where nothing was spilled: `func`
/// is unchanged, as it is on an error).
#[allow(clippy::type_complexity)]
pub(crate) fn spill_analysed(
    func: &mut Function,
    budget: &[u32],
    cfg: &Cfg,
    given: Option<&Liveness>,
) -> Result<(SpillStats, Vec<Temp>, Option<(Liveness, Function)>), SpillError> {
    let files = func.target.files();
    if budget.len() < files.len() {
        return Err(err(
            Block(0),
            0,
            format!(
                "the budget names {} register files, the target has {}",
                budget.len(),
                files.len()
            ),
        ));
    }
    let mut limit = Demand::ZERO;
    for (f, l) in limit.0.iter_mut().enumerate().take(files.len()) {
        *l = budget[f].min(i32::MAX as u32) as i32;
    }
    // The function the spiller reads: `func` itself where its liveness is given (its kill
    // flags are set), else a copy whose kill flags the liveness computed here sets.
    let (copy, computed);
    let (orig, lv): (&Function, &Liveness) = match given {
        Some(lv) => {
            debug_assert!(
                kiln_analysis::is_liveness_of(lv, func, cfg),
                "the liveness given is the function's"
            );
            debug_assert!(
                Cfg::compute(func).is_ok_and(|c| c == *cfg),
                "the CFG given is the function's"
            );
            (func, lv)
        }
        None => {
            let mut f = func.clone();
            computed = compute_liveness(&mut f, cfg);
            copy = f;
            (&copy, &computed)
        }
    };
    if !lv.max.exceeds(limit) {
        return Ok((SpillStats::default(), identity(func.temps.len()), None));
    }
    let next = NextUses::compute(orig, cfg, lv);
    let mut reserve = Demand::ZERO;
    for attempt in 0..=ATTEMPTS {
        if attempt == ATTEMPTS {
            reserve = limit;
        }
        let mut s = Spiller::new(orig, cfg, lv, &next, limit, reserve);
        for b in orig.block_ids() {
            s.block(b)?;
        }
        // (The materialization builds every block of `out` anew.)
        let mut out = orig.with_empty_blocks();
        let (stats, versions) = s.materialize(&mut out)?;
        let lv2 = compute_liveness(&mut out, cfg);
        if !lv2.max.exceeds(limit) {
            let before = std::mem::replace(func, out);
            return Ok((stats, versions, Some((lv2, before))));
        }
        if attempt == ATTEMPTS {
            if kiln_analysis::DebugFlags::from_env().ra {
                eprintln!(
                    "; spilled program still over the budget\n{}",
                    kiln_ir::print_function(&out)
                );
            }
            let (b, k) = first_over(&lv2, limit).unwrap_or((Block(0), 0));
            return Err(err(
                b,
                k,
                "the demand stays above the budget at this instruction of the spilled program \
                 even with no value kept in registers across block boundaries",
            ));
        }
        for f in 0..files.len() {
            let over = lv2.max.0[f] - limit.0[f];
            if over > 0 {
                reserve.0[f] = (reserve.0[f] + over).min(limit.0[f]);
            }
        }
    }
    unreachable!("the last attempt returns")
}

fn identity(n: usize) -> Vec<Temp> {
    (0..n).map(Temp::new).collect()
}

fn first_over(lv: &Liveness, limit: Demand) -> Option<(Block, usize)> {
    lv.register_demand.iter().enumerate().find_map(|(b, d)| {
        d.iter()
            .position(|d| d.exceeds(limit))
            .map(|k| (Block::new(b), k))
    })
}

/// The CFG a temp lives along: linear for linear temps, else logical.
fn preds_of(cfg: &Cfg, linear: bool, b: Block) -> &[Block] {
    if linear {
        &cfg.linear.preds[b.index()]
    } else {
        &cfg.logical.preds[b.index()]
    }
}

/// The blocks of `blocks` in order, each once (a block's neighbours in both CFGs: a few).
fn blocks_once(blocks: impl Iterator<Item = Block>) -> SmallVec<[Block; 4]> {
    let mut v: SmallVec<[Block; 4]> = blocks.collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn succs_of(cfg: &Cfg, linear: bool, b: Block) -> &[Block] {
    if linear {
        &cfg.linear.succs[b.index()]
    } else {
        &cfg.logical.succs[b.index()]
    }
}

/// Next-use distances (in instructions) at the start and end of every block, for the temps live
/// there (ACO's `next_use_distances_start/end`).
struct NextUses {
    start: Vec<Distances>,
    end: Vec<Distances>,
}

/// A successor's start distances as [`NextUses::compute`] reads them: the list, where it has
/// read to, and the distance added for the loops the edge leaves.
type Cursor<'a> = (&'a [(Temp, u32)], usize, u32);

/// Distances of the temps live at a block boundary, ascending by temp (the live set's order).
#[derive(Clone, Default, PartialEq, Eq)]
struct Distances(Vec<(Temp, u32)>);

impl Distances {
    fn get(&self, t: &Temp) -> Option<&u32> {
        let i = self.0.binary_search_by_key(t, |e| e.0).ok()?;
        Some(&self.0[i].1)
    }
}

impl NextUses {
    /// Backward dataflow of minimum distances from the last block; a block is visited again
    /// when a successor's start distances fell, and they only fall, so the walk ends at the
    /// fixpoint (after about the loop nesting depth's visits of a loop's blocks).
    fn compute(func: &Function, cfg: &Cfg, lv: &Liveness) -> NextUses {
        let n = func.blocks.len();
        // Per block, the first read of each temp it reads (ascending by temp), and the temps
        // its successors' phis read from it (ascending).
        let mut first_use: Vec<Distances> = vec![Distances::default(); n];
        let mut phi_ops: Vec<Vec<Temp>> = vec![Vec::new(); n];
        let mut seen: Vec<u32> = vec![u32::MAX; func.temps.len()];
        for b in func.block_ids() {
            let firsts = &mut first_use[b.index()].0;
            for (k, inst) in func.block(b).insts.iter().enumerate() {
                if inst.op.is_phi() {
                    let preds = preds_of(cfg, inst.op == Opcode::LinearPhi, b);
                    for (op, p) in inst.operands.iter().zip(preds) {
                        if let Some(t) = op.temp_id() {
                            phi_ops[p.index()].push(t);
                        }
                    }
                } else {
                    for t in inst.used_temps() {
                        if seen[t.index()] != b.0 {
                            seen[t.index()] = b.0;
                            firsts.push((t, k as u32));
                        }
                    }
                }
            }
            firsts.sort_unstable();
        }
        for ops in &mut phi_ops {
            ops.sort_unstable();
            ops.dedup();
        }
        let exits = |b: Block, s: Block| {
            cfg.enclosing_loops(b)
                .filter(|&l| !cfg.loops[l].contains(s))
                .count() as u32
        };
        let mut start: Vec<Distances> = vec![Distances::default(); n];
        let mut end: Vec<Distances> = vec![Distances::default(); n];
        // Blocks from the last, each again only when a successor's start distances changed
        // (the single integer worklist of liveness): the fixpoint is the passes' own.
        let mut dirty = vec![true; n];
        let mut i = n;
        while i > 0 {
            i -= 1;
            if !std::mem::take(&mut dirty[i]) {
                continue;
            }
            let b = Block::new(i);
            let bi = i;
            // The live sets are ascending, and so are the distances made from them: each
            // list is read by a cursor that only moves forward (a merge, no searches).
            let e = {
                // Per successor in each CFG: its start distances, a cursor into them and
                // the distance added for the loops the edge leaves.
                let cursors = |succs: &[Block]| -> SmallVec<[Cursor; 2]> {
                    succs
                        .iter()
                        .map(|&s| {
                            let extra = LOOP_EXIT.saturating_mul(exits(b, s));
                            (&start[s.index()].0[..], 0, extra)
                        })
                        .collect()
                };
                let mut logical = cursors(&cfg.logical.succs[bi]);
                let mut linear = cursors(&cfg.linear.succs[bi]);
                let phis = &phi_ops[bi];
                let mut phi_at = 0;
                let mut e = Distances(Vec::with_capacity(lv.live_out[bi].len()));
                for t in lv.live_out[bi].iter() {
                    while phi_at < phis.len() && phis[phi_at] < t {
                        phi_at += 1;
                    }
                    let mut d = if phis.get(phi_at) == Some(&t) { 0 } else { INF };
                    let succs = if lv.linear[t.index()] {
                        &mut linear
                    } else {
                        &mut logical
                    };
                    for (list, at, extra) in succs.iter_mut() {
                        while *at < list.len() && list[*at].0 < t {
                            *at += 1;
                        }
                        if let Some(&(u, x)) = list.get(*at)
                            && u == t
                        {
                            d = d.min(x.saturating_add(*extra));
                        }
                    }
                    e.0.push((t, d));
                }
                e
            };
            let len = func.block(b).insts.len() as u32;
            let firsts = &first_use[bi].0;
            let (mut f, mut g) = (0, 0);
            let st = Distances(
                lv.live_in[bi]
                    .iter()
                    .map(|t| {
                        while f < firsts.len() && firsts[f].0 < t {
                            f += 1;
                        }
                        let d = match firsts.get(f) {
                            Some(&(u, k)) if u == t => k,
                            _ => {
                                while g < e.0.len() && e.0[g].0 < t {
                                    g += 1;
                                }
                                match e.0.get(g) {
                                    Some(&(u, x)) if u == t => x.saturating_add(len),
                                    _ => INF,
                                }
                            }
                        };
                        (t, d)
                    })
                    .collect(),
            );
            end[bi] = e;
            if st != start[bi] {
                start[bi] = st;
                for p in cfg.logical.preds[bi].iter().chain(&cfg.linear.preds[bi]) {
                    dirty[p.index()] = true;
                    i = i.max(p.index() + 1);
                }
            }
        }
        NextUses { start, end }
    }
}

/// The values held in registers, with their demand.
#[derive(Clone, Default)]
struct Resident {
    set: LiveSet,
    demand: Demand,
}

impl Resident {
    fn insert(&mut self, func: &Function, t: Temp) {
        if self.set.insert(t) {
            self.demand += Demand::of(func.class(t));
        }
    }
    fn remove(&mut self, func: &Function, t: Temp) {
        if self.set.remove(t) {
            self.demand -= Demand::of(func.class(t));
        }
    }
}

/// The decisions of one run: which values are in registers where, and where reloads go.
struct Spiller<'a> {
    func: &'a Function,
    cfg: &'a Cfg,
    lv: &'a Liveness,
    next: &'a NextUses,
    budget: Demand,
    /// Budget for the values kept in registers at block entries.
    entry_limit: Demand,
    remat: Vec<bool>,
    /// Left the registers somewhere while live: stored after its definition if reloaded.
    spilled: Vec<bool>,
    /// Phis kept in memory (Braun & Hack 2009, §4.1): their operands are stored into their slot
    /// at the ends of the predecessors, and every use reloads them. Dead phis are dropped the
    /// same way (never reloaded, so never stored).
    memory_phi: Vec<bool>,
    w_entry: Vec<LiveSet>,
    w_exit: Vec<LiveSet>,
    processed: Vec<bool>,
    /// Per file, the number of blocks before each block index that write a value of that
    /// per-lane file in all lanes, or where spilling may (prefix counts, for
    /// [`Spiller::clobbered_across`]).
    all_lanes_blocks: Vec<Vec<u32>>,
    /// Reloads before instructions, as (block, instruction, value) in the walk's order: by
    /// block, then instruction (one list, not a vector per instruction).
    before: Vec<(Block, u32, Temp)>,
    /// Reloads after the phis of a block, and before the terminator of a block.
    start_reloads: Vec<Vec<Temp>>,
    end_reloads: Vec<Vec<Temp>>,
}

/// Whether `inst` can be recomputed anywhere its value is live: no temp operands, no side
/// effects, one unconstrained definition, an operation that reads nothing but its immediates
/// and constants (ACO rematerialises constants the same way).
pub fn rematerializable(inst: &Inst) -> bool {
    let info = inst.op.info();
    inst.defs.len() == 1
        && inst.defs[0].fixed.is_none()
        && inst.defs[0].tied.is_none()
        && inst.used_temps().next().is_none()
        && !info.side_effects
        && !info.terminator
        && !inst.op.is_phi()
        && !matches!(
            inst.op,
            Opcode::Reload
                | Opcode::Input
                | Opcode::TextureSample
                | Opcode::TextureFetch
                | Opcode::ParallelCopy
                | Opcode::Target(_)
        )
}

impl<'a> Spiller<'a> {
    fn new(
        func: &'a Function,
        cfg: &'a Cfg,
        lv: &'a Liveness,
        next: &'a NextUses,
        budget: Demand,
        reserve: Demand,
    ) -> Spiller<'a> {
        let n = func.blocks.len();
        let mut remat = vec![false; func.temps.len()];
        for inst in func.blocks.iter().flat_map(|b| &b.insts) {
            if rematerializable(inst) {
                remat[inst.defs[0].temp.index()] = true;
            }
        }
        let files = func.target.files();
        let mut all_lanes_blocks = vec![vec![0u32; n + 1]; files.len()];
        // A linear value's reload or recomputation writes every lane too, and the spiller
        // places it before a use or at the end of a block the value lives out of — known only
        // after the blocks a decision depends on, so every such place counts (ACO's linear
        // VGPRs take their registers from all lanes alike, `aco_spill.cpp`).
        let linear_of = |t: Temp, f: usize| lv.linear[t.index()] && func.class(t).file.index() == f;
        for (b, block) in func.blocks.iter().enumerate() {
            for (f, counts) in all_lanes_blocks.iter_mut().enumerate() {
                let writes = files[f].lanes == kiln_ir::Lanes::PerLane
                    && (block.insts.iter().any(|i| {
                        i.defs.iter().any(|d| {
                            func.class(d.temp).file.index() == f
                                && (i.writes_all_lanes() || lv.linear[d.temp.index()])
                        }) || i.used_temps().any(|t| linear_of(t, f))
                    }) || lv.live_out[b].iter().any(|t| linear_of(t, f)));
                counts[b + 1] = counts[b] + writes as u32;
            }
        }
        Spiller {
            func,
            cfg,
            all_lanes_blocks,
            lv,
            next,
            budget,
            entry_limit: budget - reserve,
            remat,
            spilled: vec![false; func.temps.len()],
            memory_phi: vec![false; func.temps.len()],
            w_entry: vec![LiveSet::new(); n],
            w_exit: vec![LiveSet::new(); n],
            processed: vec![false; n],
            before: Vec::new(),
            start_reloads: vec![Vec::new(); n],
            end_reloads: vec![Vec::new(); n],
        }
    }

    fn linear(&self, t: Temp) -> bool {
        self.lv.linear[t.index()]
    }

    fn fits(&self, dem: Demand, limit: Demand) -> bool {
        !dem.exceeds(limit)
    }

    /// Whether a per-lane value held in a register along the logical edge `p → b` may be
    /// overwritten in the lanes that take it: the wave runs other blocks first (`skipped`) and
    /// one of them writes a value of its file in all lanes. Such a value is not kept in
    /// registers across the edge (the assignment could need more registers than the demand to
    /// keep it apart from those writes): it is reloaded after it.
    fn clobbered_across(&self, p: Block, b: Block, t: Temp) -> bool {
        !self.linear(t) && self.clobbered_files(p, b) >> self.func.class(t).file.index() & 1 != 0
    }

    /// The files (a mask, bit per file: at most [`kiln_ir::MAX_FILES`]) whose per-lane values
    /// the logical edge `p → b` clobbers ([`Spiller::clobbered_across`], which depends on the
    /// value only by its file).
    fn clobbered_files(&self, p: Block, b: Block) -> u32 {
        let gap = crate::skipped(self.cfg, p, b);
        if gap.is_empty() {
            return 0;
        }
        self.all_lanes_blocks
            .iter()
            .enumerate()
            .filter(|(_, counts)| counts[gap.end] > counts[gap.start])
            .fold(0, |m, (f, _)| m | 1 << f)
    }

    /// Chooses the values in registers at the entry of `b` (Braun & Hack's `initUsual` and
    /// `initLoopHeader`); the others live into `b` count as spilled.
    fn choose_entry(&mut self, b: Block, phi_demand: Demand) -> LiveSet {
        let func = self.func;
        let cfg = self.cfg;
        let limit = self.entry_limit - phi_demand;
        let live_in = &self.lv.live_in[b.index()];
        let start = &self.next.start[b.index()];
        // Per logical predecessor, the files its edge clobbers, found once per edge rather
        // than per value. A linear value is never clobbered (and takes the linear predecessors).
        let clobbers: SmallVec<[u32; 4]> = cfg.logical.preds[b.index()]
            .iter()
            .map(|&p| self.clobbered_files(p, b))
            .collect();
        // Whether the edge from predecessor `j` of `t`'s CFG clobbers `t` (`clobbered_across`).
        let clobbered_from = |j: usize, t: Temp| {
            !self.linear(t) && clobbers[j] >> func.class(t).file.index() & 1 != 0
        };
        // (Every value chosen takes a unit of the limit: room for as many as it has.)
        let room: usize = limit.0.iter().map(|&u| u.max(0) as usize).sum();
        let mut chosen = Resident {
            set: LiveSet::with_capacity(room.min(live_in.len())),
            demand: Demand::ZERO,
        };
        let header = cfg.loops.iter().find(|l| l.header == b);
        if let Some(lp) = header {
            // Values used in the loop first, by next use; values only live through it when
            // the whole loop fits the budget (otherwise they would be reloaded inside it).
            let fits_whole = (lp.header.index()..lp.exit.index())
                .all(|k| !self.lv.block_max[k].exceeds(self.budget));
            let pre = &self.w_exit[lp.preheader.index()];
            // (The start distances are ascending by temp, as the live set is: one walk.)
            let mut at = 0;
            let mut cands: Vec<(u32, bool, Temp)> = live_in
                .iter()
                .map(|t| {
                    while at < start.0.len() && start.0[at].0 < t {
                        at += 1;
                    }
                    let d = start.0.get(at).filter(|e| e.0 == t).map_or(INF, |e| e.1);
                    (d, !pre.contains(t), t)
                })
                .collect();
            cands.sort_unstable();
            // A value a `continue` edge would carry in a register past blocks that write its
            // file in all lanes starts the loop in memory (as on any other edge: `has` below).
            let clobbered =
                |t: Temp| (0..preds_of(cfg, self.linear(t), b).len()).any(|j| clobbered_from(j, t));
            for (d, _, t) in cands {
                if (d >= LOOP_EXIT && !fits_whole) || clobbered(t) {
                    continue;
                }
                let size = Demand::of(func.class(t));
                if self.fits(chosen.demand + size, limit) {
                    chosen.insert(func, t);
                }
            }
        } else {
            // In registers at the end of every predecessor first, then of some when the
            // missing edges can take a reload. Only a value in a register at the end of some
            // predecessor is either: the predecessors' registers are the candidates (a budget
            // each), not every value live in.
            let mut candidates: SmallVec<[Temp; 32]> = blocks_once(
                cfg.logical.preds[b.index()]
                    .iter()
                    .chain(&cfg.linear.preds[b.index()])
                    .copied(),
            )
            .iter()
            .flat_map(|p| self.w_exit[p.index()].iter())
            .filter(|&t| live_in.contains(t))
            .collect();
            candidates.sort_unstable();
            candidates.dedup();
            let mut all = Vec::with_capacity(candidates.len());
            let mut some = Vec::with_capacity(candidates.len());
            for t in candidates {
                let lin = self.linear(t);
                let preds = preds_of(cfg, lin, b);
                // (A block has a few predecessors: no allocation per value.)
                let has: SmallVec<[bool; 4]> = preds
                    .iter()
                    .enumerate()
                    .map(|(j, &p)| self.w_exit[p.index()].contains(t) && !clobbered_from(j, t))
                    .collect();
                let d = || start.get(&t).copied().unwrap_or(INF);
                if !preds.is_empty() && has.iter().all(|&h| h) {
                    all.push((d(), t));
                } else if has.iter().any(|&h| h) {
                    let placeable = preds.len() == 1
                        || preds.iter().zip(&has).enumerate().all(|(j, (&p, &h))| {
                            h || (succs_of(cfg, lin, p).len() == 1 && !clobbered_from(j, t))
                        });
                    if placeable {
                        some.push((d(), t));
                    }
                }
            }
            all.sort_unstable();
            some.sort_unstable();
            for (_, t) in all.into_iter().chain(some) {
                let size = Demand::of(func.class(t));
                if self.fits(chosen.demand + size, limit) {
                    chosen.insert(func, t);
                }
            }
        }
        // The values live in and not chosen are spilled (both sets ascending: one walk).
        {
            let mut kept = chosen.set.iter().peekable();
            for t in live_in.iter() {
                if kept.next_if_eq(&t).is_none() {
                    self.spilled[t.index()] = true;
                }
            }
        }
        chosen.set
    }

    /// The phis of `b` that stay in registers must fit the budget (those copied at the end of a
    /// predecessor with several successors, beside what lives into the others): while they do
    /// not, the one whose next use is farthest becomes a memory phi (Braun & Hack 2009, §4.1: a phi whose
    /// value is not in a register at the block's entry is spilled — its operands go to its slot
    /// in the predecessors — and reloaded where it is used). Returns what the phis take of the
    /// budget at the block's entry: those left in registers, and the room their slot copies
    /// need (`slot_copy_room`).
    fn memory_phis(&mut self, b: Block) -> Demand {
        let func = self.func;
        let cfg = self.cfg;
        let insts = &func.block(b).insts;
        let nphi = func.block(b).phi_count();
        // A dead phi goes: its operands need not be anywhere (out of SSA copies none). A phi
        // whose copy is made where the wave then runs blocks that write its file in all lanes
        // stays in memory, like a value kept across such an edge (`clobbered_across`).
        for phi in &insts[..nphi] {
            let d = &phi.defs[0];
            let preds = preds_of(cfg, phi.op == Opcode::LinearPhi, b);
            if d.dead || preds.iter().any(|&p| self.clobbered_across(p, b, d.temp)) {
                self.memory_phi[d.temp.index()] = true;
                self.spilled[d.temp.index()] = !d.dead;
            }
        }
        // Phis copied at the end of a predecessor with several successors (a divergent loop's
        // back-edge block, which also flows to the exit) must miss what lives into the other
        // successors and their phis (`assign`): those take part of the budget there.
        let mut reserved = Demand::ZERO;
        let mut shared = vec![false; nphi];
        for (k, phi) in insts[..nphi].iter().enumerate() {
            for &p in preds_of(cfg, phi.op == Opcode::LinearPhi, b) {
                let succs = blocks_once(
                    cfg.linear.succs[p.index()]
                        .iter()
                        .chain(&cfg.logical.succs[p.index()])
                        .copied()
                        .filter(|&s| s != b),
                );
                if succs.is_empty() {
                    continue;
                }
                shared[k] = true;
                let mut there = Demand::ZERO;
                for s in succs.into_iter().filter(|s| self.processed[s.index()]) {
                    for t in self.w_entry[s.index()].iter() {
                        there += Demand::of(func.class(t));
                    }
                    let phis = func.block(s).insts.iter().take_while(|i| i.op.is_phi());
                    for d in phis.flat_map(|i| &i.defs) {
                        if !self.memory_phi[d.temp.index()] {
                            there += Demand::of(func.class(d.temp));
                        }
                    }
                }
                for f in 0..func.target.files().len() {
                    reserved.0[f] = reserved.0[f].max(there.0[f]);
                }
            }
        }
        let live: Vec<(Temp, bool)> = insts[..nphi]
            .iter()
            .zip(&shared)
            .map(|(i, &sh)| (i.defs[0].temp, sh))
            .filter(|(t, _)| !self.memory_phi[t.index()])
            .collect();
        let (mut demand, mut shared_demand) = (Demand::ZERO, Demand::ZERO);
        for &(t, sh) in &live {
            demand += Demand::of(func.class(t));
            if sh {
                shared_demand += Demand::of(func.class(t));
            }
        }
        let shared_limit = self.budget - reserved;
        // The phis in registers leave room for storing a memory phi's operand reloaded at a
        // predecessor's end (`slot_copy_room`), where they are all live.
        let mut room = self.slot_copy_room(b);
        if !(demand + room).exceeds(self.budget) && !shared_demand.exceeds(shared_limit) {
            return demand + room;
        }
        // Distance to the first use after the phis.
        let len = insts.len() as u32;
        let dist = |t: Temp| {
            insts[nphi..]
                .iter()
                .position(|i| i.used_temps().any(|u| u == t))
                .map(|k| k as u32)
                .unwrap_or_else(|| {
                    self.next.end[b.index()]
                        .get(&t)
                        .map_or(INF, |&d| d.saturating_add(len))
                })
        };
        let mut by_distance: Vec<(u32, Temp, bool)> =
            live.iter().map(|&(t, sh)| (dist(t), t, sh)).collect();
        by_distance.sort_unstable_by(|a, b| b.cmp(a));
        for (_, t, sh) in by_distance {
            let f = func.class(t).file.index();
            if demand.0[f] + room.0[f] > self.budget.0[f]
                || (sh && shared_demand.0[f] > shared_limit.0[f])
            {
                self.memory_phi[t.index()] = true;
                self.spilled[t.index()] = true;
                demand -= Demand::of(func.class(t));
                room = room.max(Demand::of(func.class(t)));
                if sh {
                    shared_demand -= Demand::of(func.class(t));
                }
            }
        }
        demand + room
    }

    /// Room for storing a memory phi's operand that is not in a register at a predecessor's end
    /// (a reload into a temp, then the store into the phi's slot, `materialize`): in each file,
    /// the widest memory phi of `b`. Kept free of what lives into `b` in registers, so the ends
    /// of its predecessors (where those values are live) have it.
    fn slot_copy_room(&self, b: Block) -> Demand {
        let func = self.func;
        func.block(b)
            .insts
            .iter()
            .take_while(|i| i.op.is_phi())
            .map(|i| &i.defs[0])
            .filter(|d| !d.dead && self.memory_phi[d.temp.index()])
            .fold(Demand::ZERO, |room, d| {
                room.max(Demand::of(func.class(d.temp)))
            })
    }

    /// Reloads on the edge `p → b` for the values `b` keeps in registers and the operands of its
    /// phis that `p` does not hold.
    fn reconcile(&mut self, p: Block, b: Block) {
        let cfg = self.cfg;
        let entry: Vec<Temp> = self.w_entry[b.index()].iter().collect();
        for t in entry {
            let lin = self.linear(t);
            let preds = preds_of(cfg, lin, b);
            if !preds.contains(&p) || self.w_exit[p.index()].contains(t) {
                continue;
            }
            self.spilled[t.index()] = true;
            if preds.len() == 1 {
                if !self.start_reloads[b.index()].contains(&t) {
                    self.start_reloads[b.index()].push(t);
                }
            } else {
                self.end_reloads[p.index()].push(t);
                self.w_exit[p.index()].insert(t);
            }
        }
        for inst in self.func.block(b).insts.iter().filter(|i| i.op.is_phi()) {
            if self.memory_phi[inst.defs[0].temp.index()] {
                // Stored from where it is (`materialize`).
                continue;
            }
            let preds = preds_of(cfg, inst.op == Opcode::LinearPhi, b);
            for (op, &q) in inst.operands.iter().zip(preds) {
                if q != p {
                    continue;
                }
                if let Some(t) = op.temp_id()
                    && !self.w_exit[p.index()].contains(t)
                {
                    self.spilled[t.index()] = true;
                    self.end_reloads[p.index()].push(t);
                    self.w_exit[p.index()].insert(t);
                }
            }
        }
    }

    /// Demand of `inst` with `w` in registers before it (reloads done): seed 000's stages with
    /// the values of `w` that outlive it as its live-out.
    fn demand(&self, inst: &Inst, w: &Resident) -> Demand {
        let func = self.func;
        let mut live_out = w.demand;
        // (An instruction reads a few temps: a list, not a set.)
        let mut seen: SmallVec<[Temp; 4]> = SmallVec::new();
        for op in &inst.operands {
            if let Some(t) = op.temp_id()
                && op.is_first_kill()
                && w.set.contains(t)
                && !seen.contains(&t)
            {
                seen.push(t);
                live_out -= Demand::of(func.class(t));
            }
        }
        for d in inst.defs.iter().filter(|d| !d.dead) {
            live_out += Demand::of(func.class(d.temp));
        }
        InstDemand::compute(&func.temps, inst, live_out).register_demand()
    }

    /// Distance from instruction `k` of `b` to the next use of `t` after it.
    /// `uses`: the block's reads as (temp, instruction), ascending.
    fn distance(&self, uses: &[(Temp, u32)], b: Block, k: usize, t: Temp) -> u32 {
        let next = uses.partition_point(|&(u, j)| (u, j as usize) <= (t, k));
        if let Some(&(u, j)) = uses.get(next)
            && u == t
        {
            return j - k as u32;
        }
        let len = self.func.block(b).insts.len() as u32;
        self.next.end[b.index()]
            .get(&t)
            .map_or(INF, |&d| d.saturating_add(len - k as u32))
    }

    /// Walks one block (Braun & Hack's MIN algorithm).
    fn block(&mut self, b: Block) -> Result<(), SpillError> {
        let func = self.func;
        let insts = &func.block(b).insts;
        let nphi = func.block(b).phi_count();
        let phi_demand = self.memory_phis(b);
        let entry = self.choose_entry(b, phi_demand);
        self.w_entry[b.index()] = entry.clone();
        let preds = blocks_once(
            self.cfg.logical.preds[b.index()]
                .iter()
                .chain(&self.cfg.linear.preds[b.index()])
                .copied()
                .filter(|p| self.processed[p.index()]),
        );
        for p in preds {
            self.reconcile(p, b);
        }
        // (The entry's set itself, not rebuilt by inserts.)
        let mut w = Resident {
            demand: entry
                .iter()
                .fold(Demand::ZERO, |d, t| d + Demand::of(func.class(t))),
            set: entry,
        };
        for inst in &insts[..nphi] {
            for d in inst.defs.iter().filter(|d| !d.dead) {
                if !self.memory_phi[d.temp.index()] {
                    w.insert(func, d.temp);
                }
            }
        }
        // The block's reads as (temp, instruction), ascending: one vector, searched by halving.
        let reads = insts[nphi..].iter().map(|i| i.operands.len()).sum();
        let mut uses: Vec<(Temp, u32)> = Vec::with_capacity(reads);
        uses.extend(
            insts
                .iter()
                .enumerate()
                .skip(nphi)
                .flat_map(|(k, inst)| inst.used_temps().map(move |t| (t, k as u32))),
        );
        uses.sort_unstable();
        for (k, inst) in insts.iter().enumerate().skip(nphi) {
            // The instruction's operands, each once, ascending.
            let mut ops: SmallVec<[Temp; 4]> = inst.used_temps().collect();
            ops.sort_unstable();
            ops.dedup();
            for &t in &ops {
                if !w.set.contains(t) {
                    self.spilled[t.index()] = true;
                    self.before.push((b, k as u32, t));
                    w.insert(func, t);
                }
            }
            loop {
                let dem = self.demand(inst, &w);
                let Some(f) = (0..func.target.files().len())
                    .find(|&f| dem.0[f] > self.budget.0[f])
                    .map(|f| FileId(f as u8))
                else {
                    break;
                };
                let victim = w
                    .set
                    .iter()
                    .filter(|t| func.class(*t).file == f && !ops.contains(t))
                    .max_by_key(|&t| (self.distance(&uses, b, k, t), t));
                let Some(victim) = victim else {
                    let mut own = Resident::default();
                    for &t in &ops {
                        own.insert(func, t);
                    }
                    let need = self.demand(inst, &own);
                    return Err(err(
                        b,
                        k,
                        format!(
                            "`{}` needs {} units of file {} for its own operands and \
                             definitions; the budget is {}",
                            inst.op,
                            need.0[f.index()],
                            func.target.files()[f.index()].name,
                            self.budget.0[f.index()]
                        ),
                    ));
                };
                self.spilled[victim.index()] = true;
                w.remove(func, victim);
            }
            for op in &inst.operands {
                if let Some(t) = op.temp_id()
                    && op.is_first_kill()
                {
                    w.remove(func, t);
                }
            }
            for d in inst.defs.iter().filter(|d| !d.dead) {
                w.insert(func, d.temp);
            }
        }
        self.w_exit[b.index()] = w.set;
        self.processed[b.index()] = true;
        // Back edges: the loop header already chose its registers.
        let succs = blocks_once(
            self.cfg.logical.succs[b.index()]
                .iter()
                .chain(&self.cfg.linear.succs[b.index()])
                .copied()
                .filter(|s| *s <= b),
        );
        for s in succs {
            self.reconcile(b, s);
        }
        Ok(())
    }

    /// Writes the decisions into `out` (the input's temps, its blocks empty: each is built
    /// anew): spills after definitions, reloads and rematerialisations, slots, then SSA
    /// reconstruction.
    fn materialize(&self, out: &mut Function) -> Result<(SpillStats, Vec<Temp>), SpillError> {
        let func = self.func;
        let mut stats = SpillStats::default();
        // Values reloaded somewhere (not recomputed) need a slot and a spill.
        let mut reloaded = vec![false; func.temps.len()];
        let all_reloads = self
            .before
            .iter()
            .map(|(_, _, t)| t)
            .chain(self.start_reloads.iter().flatten())
            .chain(self.end_reloads.iter().flatten());
        for &t in all_reloads {
            if !self.remat[t.index()] {
                reloaded[t.index()] = true;
            }
        }
        // Operands of memory phis stored from a reload (below).
        for b in func.block_ids() {
            for phi in func.block(b).insts.iter().take_while(|i| i.op.is_phi()) {
                if !self.memory_phi[phi.defs[0].temp.index()] {
                    continue;
                }
                let preds = preds_of(self.cfg, phi.op == Opcode::LinearPhi, b);
                for (o, p) in phi.operands.iter().zip(preds) {
                    if let Some(o) = o.temp_id()
                        && !self.w_exit[p.index()].contains(o)
                        && !self.remat[o.index()]
                    {
                        reloaded[o.index()] = true;
                    }
                }
            }
        }
        let slot = self.assign_slots(&reloaded, &mut stats);
        let mut def_inst: Vec<Option<(Block, usize)>> = vec![None; func.temps.len()];
        for b in func.block_ids() {
            for (k, inst) in func.block(b).insts.iter().enumerate() {
                for d in &inst.defs {
                    def_inst[d.temp.index()] = Some((b, k));
                }
            }
        }
        // New temp → the input temp it is a copy of.
        let mut version_of: Vec<Option<Temp>> = vec![None; func.temps.len()];
        let mut versioned = vec![false; func.temps.len()];
        let mut make =
            |out: &mut Function, t: Temp, stats: &mut SpillStats| -> Result<Inst, SpillError> {
                let new = out.new_temp(func.class(t));
                version_of.push(Some(t));
                versioned[t.index()] = true;
                if self.remat[t.index()] {
                    let (b, k) = def_inst[t.index()]
                        .ok_or_else(|| err(Block(0), 0, format!("{t} has no definition")))?;
                    let mut inst = func.block(b).insts[k].clone();
                    inst.defs[0] = Def::new(new);
                    for op in inst.operands.iter_mut() {
                        op.flags = kiln_ir::OperandFlags::empty();
                    }
                    stats.remats += 1;
                    Ok(inst)
                } else {
                    let mut inst = Inst::new(Opcode::Reload);
                    inst.imms.push(slot[t.index()]);
                    inst.defs.push(Def::new(new));
                    inst.flags.all_lanes = self.lv.linear[t.index()];
                    stats.reloads += 1;
                    Ok(inst)
                }
            };
        let spill_of = |t: Temp| {
            let mut inst = Inst::new(Opcode::Spill);
            inst.imms.push(slot[t.index()]);
            inst.operands.push(Operand::temp(t));
            inst.flags.all_lanes = self.lv.linear[t.index()];
            inst
        };
        // A memory phi's operands are stored into its slot at the ends of its predecessors (a
        // masked store for a `phi`: the lanes taking the edge): first the reloads of operands
        // that are memory phis stored there too (read before any store: the copies are
        // parallel), then the stores of operands in registers, then those reloaded (or
        // recomputed) into a temp that dies at its store, then, after the block's reloads,
        // those reloaded there anyway — so that few values are added to those in registers.
        let mut end_spills: Vec<Vec<Inst>> = vec![Vec::new(); func.blocks.len()];
        let mut end_pairs: Vec<Vec<(Temp, Inst)>> = vec![Vec::new(); func.blocks.len()];
        let mut early_spills: Vec<Vec<Inst>> = vec![Vec::new(); func.blocks.len()];
        // The memory phis whose slots each block's end writes.
        let mut stored_here: Vec<LiveSet> = vec![LiveSet::new(); func.blocks.len()];
        for b in func.block_ids() {
            for phi in func.block(b).insts.iter().take_while(|i| i.op.is_phi()) {
                let t = phi.defs[0].temp;
                if !self.memory_phi[t.index()] || !reloaded[t.index()] {
                    continue;
                }
                let preds = preds_of(self.cfg, phi.op == Opcode::LinearPhi, b);
                // An `undef` operand is stored too (no register read): the slot is written on
                // every edge.
                for (op, p) in phi.operands.iter().zip(preds) {
                    let mut inst = Inst::new(Opcode::Spill);
                    inst.imms.push(slot[t.index()]);
                    let mut op = *op;
                    op.flags = kiln_ir::OperandFlags::empty();
                    inst.operands.push(op);
                    inst.flags.all_lanes = self.lv.linear[t.index()];
                    stats.spills += 1;
                    stored_here[p.index()].insert(t);
                    match op.temp_id() {
                        Some(o) if !self.w_exit[p.index()].contains(o) => {
                            end_pairs[p.index()].push((o, inst));
                        }
                        Some(o) if self.end_reloads[p.index()].contains(&o) => {
                            end_spills[p.index()].push(inst)
                        }
                        _ => early_spills[p.index()].push(inst),
                    }
                }
            }
        }
        debug_assert!(self.before.is_sorted_by_key(|&(b, k, _)| (b, k)));
        let mut before = self.before.iter().peekable();
        for b in func.block_ids() {
            let insts = &func.block(b).insts;
            let nphi = func.block(b).phi_count();
            let mut new: Vec<Inst> = Vec::with_capacity(insts.len() + 4);
            let in_registers = |i: &&Inst| !self.memory_phi[i.defs[0].temp.index()];
            new.extend(insts[..nphi].iter().filter(in_registers).cloned());
            for inst in insts[..nphi].iter().filter(in_registers) {
                for d in inst.defs.iter().filter(|d| reloaded[d.temp.index()]) {
                    new.push(spill_of(d.temp));
                    stats.spills += 1;
                }
            }
            for &t in &self.start_reloads[b.index()] {
                new.push(make(out, t, &mut stats)?);
            }
            // The stores into memory phis' slots and the end's reloads go before the
            // terminator (at the end of a block that has none).
            let end_at = insts
                .iter()
                .position(|i| i.op.is_terminator())
                .unwrap_or(insts.len());
            for k in nphi..=insts.len() {
                if k == end_at {
                    // A value a successor wants in a register whose slot is written here (a
                    // memory phi that is a register phi's operand on this edge) is reloaded
                    // before the stores.
                    let (early_reloads, end_reloads): (Vec<Temp>, Vec<Temp>) = self.end_reloads
                        [b.index()]
                    .iter()
                    .partition(|t| stored_here[b.index()].contains(**t));
                    for t in early_reloads {
                        new.push(make(out, t, &mut stats)?);
                    }
                    // Operands that are memory phis stored here are read before their slots
                    // are written: a parallel copy between slots, in sequence.
                    let (chained, pairs): (Vec<_>, Vec<_>) =
                        std::mem::take(&mut end_pairs[b.index()])
                            .into_iter()
                            .partition(|(o, _)| stored_here[b.index()].contains(*o));
                    let (sequence, cycles) = slot_copies(chained, &slot, &self.remat, &mut stats);
                    for (o, mut store) in sequence {
                        let reload = make(out, o, &mut stats)?;
                        store.operands[0] = Operand::temp(reload.defs[0].temp);
                        new.push(reload);
                        new.push(store);
                    }
                    let mut stores = Vec::new();
                    for (o, mut store) in cycles {
                        let reload = make(out, o, &mut stats)?;
                        store.operands[0] = Operand::temp(reload.defs[0].temp);
                        new.push(reload);
                        stores.push(store);
                    }
                    new.append(&mut stores);
                    new.append(&mut early_spills[b.index()]);
                    for (o, mut store) in pairs {
                        let reload = make(out, o, &mut stats)?;
                        store.operands[0] = Operand::temp(reload.defs[0].temp);
                        new.push(reload);
                        new.push(store);
                    }
                    for t in end_reloads {
                        new.push(make(out, t, &mut stats)?);
                    }
                    new.append(&mut end_spills[b.index()]);
                }
                let Some(inst) = insts.get(k) else { break };
                while let Some(&(_, _, t)) =
                    before.next_if(|&&(rb, rk, _)| (rb, rk as usize) == (b, k))
                {
                    new.push(make(out, t, &mut stats)?);
                }
                new.push(inst.clone());
                for d in inst.defs.iter().filter(|d| reloaded[d.temp.index()]) {
                    new.push(spill_of(d.temp));
                    stats.spills += 1;
                }
            }
            out.block_mut(b).insts = new;
        }
        debug_assert!(before.next().is_none(), "every reload is placed");
        let version_of = {
            let mut v = version_of;
            for (t, &x) in versioned.iter().enumerate() {
                if x {
                    v[t] = Some(Temp::new(t));
                }
            }
            v
        };
        let version_of = Reconstruct::new(out, self.cfg, &self.lv.linear, version_of).run(out)?;
        let versions = version_of
            .iter()
            .enumerate()
            .map(|(t, v)| v.unwrap_or(Temp::new(t)))
            .collect();
        Ok((stats, versions))
    }

    /// Slots for the reloaded values: a value joins the first slot of its file whose values it
    /// does not interfere with, among the first [`SLOT_SEARCH`] open slots of its file it is
    /// checked against; past them it opens a slot of its own. Bounded: each value is checked
    /// against the members of at most that many slots, so thousands of values live at once
    /// (each in a slot of its own) cost linear work, not a query per pair.
    fn assign_slots(&self, reloaded: &[bool], stats: &mut SpillStats) -> Vec<u32> {
        let func = self.func;
        let interference = Interference::new(func, self.cfg, self.lv);
        let mut slot = vec![u32::MAX; func.temps.len()];
        // (file, members, shared): a memory phi's slot is its own (it is written at the ends
        // of predecessors, where the phi's live range does not say so).
        let mut slots: Vec<(FileId, Vec<Temp>, bool)> = Vec::new();
        for t in (0..func.temps.len())
            .filter(|&t| reloaded[t])
            .map(Temp::new)
        {
            let file = func.class(t).file;
            let shared = !self.memory_phi[t.index()];
            let k = slots
                .iter()
                .enumerate()
                .filter(|(_, (f, _, open))| shared && *open && *f == file)
                .take(SLOT_SEARCH)
                .find(|(_, (_, members, _))| {
                    // The latest member first: the nearest to `t` in the walk, the likeliest
                    // to interfere.
                    members
                        .iter()
                        .rev()
                        .all(|&m| !interference.interferes(func, t, m))
                })
                .map(|(k, _)| k)
                .unwrap_or_else(|| {
                    slots.push((file, Vec::new(), shared));
                    slots.len() - 1
                });
            slots[k].1.push(t);
            slot[t.index()] = k as u32;
        }
        stats.slots = slots.len() as u32;
        slot
    }
}

/// SSA reconstruction after Braun et al. 2013: the reaching definition of a value at a use is
/// the last copy in the block, else the value at the block's entry — the value at the end of
/// its single predecessor, or a phi over its predecessors (created on demand, trivial ones
/// removed afterwards).
struct Reconstruct<'c> {
    cfg: &'c Cfg,
    linear: Vec<bool>,
    /// For every temp of the output: the input temp it is a version of, for the input temps
    /// that have copies (and those temps themselves).
    version_of: Vec<Option<Temp>>,
    /// Per block: the last definition of each versioned value in it.
    last_def: Vec<FxHashMap<Temp, Temp>>,
    /// The version of a value found at a block's entry, once per block and value.
    entry: FxHashMap<(Block, Temp), Temp>,
    phis: Vec<NewPhi>,
    /// Exits of divergent loops: a linear value entering one always passes a phi.
    divergent_exit: Vec<bool>,
}

struct NewPhi {
    block: Block,
    value: Temp,
    temp: Temp,
    operands: Vec<Temp>,
    removed: bool,
}

impl<'c> Reconstruct<'c> {
    fn new(
        out: &Function,
        cfg: &'c Cfg,
        linear: &[bool],
        version_of: Vec<Option<Temp>>,
    ) -> Reconstruct<'c> {
        let mut last_def = vec![FxHashMap::default(); out.blocks.len()];
        for b in out.block_ids() {
            for d in out.block(b).insts.iter().flat_map(|i| &i.defs) {
                if let Some(Some(v)) = version_of.get(d.temp.index()) {
                    last_def[b.index()].insert(*v, d.temp);
                }
            }
        }
        let mut divergent_exit = vec![false; out.blocks.len()];
        for lp in cfg.loops.iter().filter(|l| l.divergent) {
            if let Some(x) = divergent_exit.get_mut(lp.exit.index()) {
                *x = true;
            }
        }
        Reconstruct {
            cfg,
            linear: linear.to_vec(),
            version_of,
            last_def,
            entry: FxHashMap::default(),
            phis: Vec::new(),
            divergent_exit,
        }
    }

    fn is_linear(&self, v: Temp) -> bool {
        self.linear[v.index()]
    }

    fn forced(&self, b: Block, v: Temp) -> bool {
        self.is_linear(v) && self.divergent_exit[b.index()]
    }

    fn at_exit(&mut self, out: &mut Function, b: Block, v: Temp) -> Result<Temp, SpillError> {
        match self.last_def[b.index()].get(&v) {
            Some(&d) => Ok(d),
            None => self.at_entry(out, b, v),
        }
    }

    /// The definition of `v` reaching the entry of `b`; walks single-predecessor chains without
    /// recursion.
    fn at_entry(&mut self, out: &mut Function, b: Block, v: Temp) -> Result<Temp, SpillError> {
        let lin = self.is_linear(v);
        // The blocks walked up to the definition found (most walks are short).
        let mut chain: SmallVec<[Block; 8]> = SmallVec::new();
        let mut cur = b;
        let found = loop {
            if let Some(&d) = self.entry.get(&(cur, v)) {
                break d;
            }
            let preds = preds_of(self.cfg, lin, cur);
            if preds.is_empty() || chain.len() > out.blocks.len() {
                return Err(err(
                    b,
                    0,
                    format!("{v} is used where no definition reaches"),
                ));
            }
            chain.push(cur);
            if preds.len() == 1 && !self.forced(cur, v) {
                let p = preds[0];
                if let Some(&d) = self.last_def[p.index()].get(&v) {
                    break d;
                }
                cur = p;
            } else {
                let temp = out.new_temp(out.class(v));
                self.version_of.push(Some(v));
                self.phis.push(NewPhi {
                    block: cur,
                    value: v,
                    temp,
                    operands: Vec::new(),
                    removed: false,
                });
                break temp;
            }
        };
        for c in chain {
            self.entry.insert((c, v), found);
        }
        Ok(found)
    }

    /// Renames every use, inserts the phis; returns the version map with the phis' temps.
    fn run(mut self, out: &mut Function) -> Result<Vec<Option<Temp>>, SpillError> {
        let cfg = self.cfg;
        // Uses in instruction order, with the current definition per value (one map, emptied
        // per block).
        let mut current: FxHashMap<Temp, Temp> = FxHashMap::default();
        for b in (0..out.blocks.len()).map(Block::new) {
            current.clear();
            for k in 0..out.block(b).insts.len() {
                let op = out.block(b).insts[k].op;
                let nops = out.block(b).insts[k].operands.len();
                for j in 0..nops {
                    let Some(t) = out.block(b).insts[k].operands[j].temp_id() else {
                        continue;
                    };
                    let Some(Some(v)) = self.version_of.get(t.index()).copied() else {
                        continue;
                    };
                    let d = if op.is_phi() {
                        let preds = preds_of(cfg, op == Opcode::LinearPhi, b);
                        let p = *preds
                            .get(j)
                            .ok_or_else(|| err(b, k, "phi operand without predecessor"))?;
                        self.at_exit(out, p, v)?
                    } else {
                        match current.get(&v) {
                            Some(&d) => d,
                            None => self.at_entry(out, b, v)?,
                        }
                    };
                    out.block_mut(b).insts[k].operands[j].value = kiln_ir::Value::Temp(d);
                }
                for d in &out.block(b).insts[k].defs {
                    if let Some(Some(v)) = self.version_of.get(d.temp.index()) {
                        current.insert(*v, d.temp);
                    }
                }
            }
        }
        // Operands of the new phis; this may create more.
        let mut i = 0;
        while i < self.phis.len() {
            let (b, v) = (self.phis[i].block, self.phis[i].value);
            let preds = preds_of(cfg, self.is_linear(v), b).to_vec();
            let mut ops = Vec::with_capacity(preds.len());
            for p in preds {
                ops.push(self.at_exit(out, p, v)?);
            }
            self.phis[i].operands = ops;
            i += 1;
        }
        // Trivial phis (one value besides themselves) are replaced by that value, to a
        // fixpoint: each round is linear in the phis, and a round removes at least one.
        let mut replace: FxHashMap<Temp, Temp> = FxHashMap::default();
        let resolve = |replace: &FxHashMap<Temp, Temp>, mut t: Temp| {
            while let Some(&r) = replace.get(&t) {
                t = r;
            }
            t
        };
        let mut changed = true;
        while changed {
            changed = false;
            for k in 0..self.phis.len() {
                if self.phis[k].removed || self.forced(self.phis[k].block, self.phis[k].value) {
                    continue;
                }
                let me = self.phis[k].temp;
                let mut same = None;
                let mut trivial = true;
                for &o in &self.phis[k].operands {
                    let o = resolve(&replace, o);
                    if o == me || Some(o) == same {
                        continue;
                    }
                    if same.is_some() {
                        trivial = false;
                        break;
                    }
                    same = Some(o);
                }
                if trivial && let Some(s) = same {
                    replace.insert(me, s);
                    self.phis[k].removed = true;
                    changed = true;
                }
            }
        }
        // Apply: resolve every operand (where a phi was replaced), insert the remaining phis.
        for block in out.blocks.iter_mut().filter(|_| !replace.is_empty()) {
            for inst in block.insts.iter_mut() {
                for op in inst.operands.iter_mut() {
                    if let Some(t) = op.temp_id() {
                        op.value = kiln_ir::Value::Temp(resolve(&replace, t));
                    }
                }
            }
        }
        let mut by_block: BTreeMap<Block, Vec<Inst>> = BTreeMap::new();
        for p in self.phis.iter().filter(|p| !p.removed) {
            let op = if self.is_linear(p.value) {
                Opcode::LinearPhi
            } else {
                Opcode::Phi
            };
            let mut inst = Inst::new(op);
            inst.defs.push(Def::new(p.temp));
            inst.operands = p
                .operands
                .iter()
                .map(|&o| Operand::temp(resolve(&replace, o)))
                .collect();
            by_block.entry(p.block).or_default().push(inst);
        }
        for (b, phis) in by_block {
            out.block_mut(b).insts.splice(0..0, phis);
        }
        Ok(self.version_of)
    }
}
