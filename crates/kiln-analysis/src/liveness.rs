//! Live variables, kill flags and register demand (seed 000; ACO's `aco_live_var_analysis.cpp`):
//! per-lane temps live along the logical CFG, linear temps along the linear CFG, and seed 003's
//! values leaving divergent loops kept apart ([`Liveness::loop_leaving`]) as an interference
//! fact. The design is in `docs/ir.md` ("Liveness rules").

use crate::demand::InstDemand;
use crate::live_set::LiveSet;
use kiln_ir::{Block, Cfg, Demand, Function, OperandFlags, Temp};

/// The result of liveness analysis.
#[derive(Clone, Debug)]
pub struct Liveness {
    pub live_in: Vec<LiveSet>,
    pub live_out: Vec<LiveSet>,
    /// Whether each temp lives along the linear CFG.
    pub linear: Vec<bool>,
    /// Seed 003, per loop of `cfg.loops`: the per-lane temps defined in a divergent loop that
    /// leave it (empty for loops without divergent breaks). Such a temp must keep its register
    /// in every lane from the loop header to the exit against all-lanes writes.
    pub loop_leaving: Vec<LiveSet>,
    /// `max(stage1, stage3)` per block, per instruction (as ACO keeps `register_demand` on
    /// every instruction); [`Liveness::inst_demands`] gives all quantities of seed 000.
    pub register_demand: Vec<Vec<Demand>>,
    /// Maximum register demand per block.
    pub block_max: Vec<Demand>,
    /// Maximum register demand of the function.
    pub max: Demand,
    /// The interference queries' data, computed on the first query (`Interference::new`).
    pub(crate) interference: std::sync::OnceLock<crate::interference::InterferenceData>,
    /// `Interference::all_lanes_neighbours`, computed on the first call.
    pub(crate) all_lanes_neighbours: std::sync::OnceLock<Vec<Vec<u32>>>,
}

/// Two results are equal where their sets and demands are: the caches of queries made on one
/// are not part of what it says.
impl PartialEq for Liveness {
    fn eq(&self, other: &Liveness) -> bool {
        self.live_in == other.live_in
            && self.live_out == other.live_out
            && self.linear == other.linear
            && self.loop_leaving == other.loop_leaving
            && self.register_demand == other.register_demand
            && self.block_max == other.block_max
            && self.max == other.max
    }
}

impl Liveness {
    /// Demand of the live-in set of a block (its first instruction's stage 0).
    pub fn live_in_demand(&self, func: &Function, b: Block) -> Demand {
        sum(func, &self.live_in[b.index()])
    }

    /// Walks `blocks` again after their instructions were reordered (which changes neither
    /// what is live into a block nor out of it): their flags, demands and the maximum, in time
    /// linear in those blocks (plus one scratch mark per temp).
    pub fn rewalk(&mut self, func: &mut Function, cfg: &Cfg, blocks: &[Block]) {
        let mut live = vec![false; func.temps.len()];
        for &b in blocks {
            let (dem, max) = walk_block(func, cfg, self, b, &mut live);
            self.register_demand[b.index()] = dem;
            self.block_max[b.index()] = max;
        }
        self.max = self.block_max.iter().fold(Demand::ZERO, |m, &d| m.max(d));
    }

    /// Every quantity of seed 000 for each instruction of `b`, from the flags liveness wrote.
    pub fn inst_demands(&self, func: &Function, b: Block) -> Vec<InstDemand> {
        block_demands(
            &func.temps,
            &func.block(b).insts,
            sum(func, &self.live_out[b.index()]),
        )
    }
}

fn sum(func: &Function, set: &LiveSet) -> Demand {
    set.iter()
        .fold(Demand::ZERO, |d, t| d + Demand::of(func.class(t)))
}

/// Upward-exposed uses, definitions and phi operands of every block: the inputs of the
/// liveness dataflow.
pub(crate) struct BlockSets {
    pub gen_: Vec<LiveSet>,
    pub defs: Vec<LiveSet>,
    /// Phi operands read at the end of each predecessor, over the phi's own CFG.
    pub phi_uses: Vec<LiveSet>,
    /// Block of each temp's definition (`u32::MAX` when none).
    pub def_block: Vec<u32>,
}

impl BlockSets {
    pub fn compute(func: &Function, cfg: &Cfg) -> BlockSets {
        let n = func.blocks.len();
        let mut gen_ = Vec::with_capacity(n);
        let mut defs = Vec::with_capacity(n);
        let mut phi_uses: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut def_block = vec![u32::MAX; func.temps.len()];
        for b in func.block_ids() {
            let insts = func.block(b).insts.len();
            let mut g = Vec::with_capacity(insts);
            let mut d = Vec::with_capacity(insts);
            for inst in &func.block(b).insts {
                if inst.op.is_phi() {
                    for (op, p) in inst.operands.iter().zip(phi_preds(cfg, inst.op, b)) {
                        if let Some(t) = op.temp_id() {
                            phi_uses[p.index()].push(t.0);
                        }
                    }
                } else {
                    // A use not preceded by its definition in the block (SSA: a def follows no
                    // use).
                    g.extend(
                        inst.used_temps()
                            .filter(|t| def_block[t.index()] != b.0)
                            .map(|t| t.0),
                    );
                }
                for def in &inst.defs {
                    def_block[def.temp.index()] = b.0;
                    d.push(def.temp.0);
                }
            }
            gen_.push(LiveSet::from_unsorted(g));
            defs.push(LiveSet::from_unsorted(d));
        }
        BlockSets {
            gen_,
            defs,
            phi_uses: phi_uses.into_iter().map(LiveSet::from_unsorted).collect(),
            def_block,
        }
    }
}

/// The predecessors a phi's operands follow: logical for `phi`, linear for `linear_phi`.
pub(crate) fn phi_preds(cfg: &Cfg, op: kiln_ir::Opcode, b: Block) -> &[Block] {
    if op == kiln_ir::Opcode::Phi {
        &cfg.logical.preds[b.index()]
    } else {
        &cfg.linear.preds[b.index()]
    }
}

/// Backward dataflow to a fixpoint: a temp flows along the linear CFG when `linear` says so,
/// else along the logical one. Blocks are visited from the highest index down and revisited when
/// a successor's live-in grows (ACO's single integer worklist). Returns (live-in, live-out).
pub(crate) fn solve(
    cfg: &Cfg,
    sets: &BlockSets,
    linear: impl Fn(u32) -> bool,
) -> (Vec<LiveSet>, Vec<LiveSet>) {
    let n = sets.gen_.len();
    let mut live_in = vec![LiveSet::new(); n];
    let mut live_out = vec![LiveSet::new(); n];
    let mut dirty = vec![true; n];
    let mut scratch = Vec::new();
    let mut i = n;
    while i > 0 {
        i -= 1;
        if !std::mem::take(&mut dirty[i]) {
            continue;
        }
        let mut out = std::mem::take(&mut live_out[i]);
        out.clone_from(&sets.phi_uses[i]);
        let (logical, linear_succs) = (&cfg.logical.succs[i], &cfg.linear.succs[i]);
        if logical == linear_succs {
            // The same successors in both CFGs (uniform control flow): every temp of theirs.
            for s in logical {
                out.union_with(&live_in[s.index()], |_| true, &mut scratch);
            }
        } else {
            for s in logical {
                out.union_with(&live_in[s.index()], |t| !linear(t), &mut scratch);
            }
            for s in linear_succs {
                out.union_with(&live_in[s.index()], &linear, &mut scratch);
            }
        }
        let changed = live_in[i].assign_transfer(&sets.gen_[i], &out, &sets.defs[i], &mut scratch);
        live_out[i] = out;
        if changed {
            for p in cfg.logical.preds[i].iter().chain(&cfg.linear.preds[i]) {
                dirty[p.index()] = true;
                i = i.max(p.index() + 1);
            }
        }
    }
    (live_in, live_out)
}

/// What is live into and out of every block, the linear temps and the values leaving
/// divergent loops: [`compute_liveness`] without walking the instructions (no flags, no
/// demand), for a pass that needs the sets alone.
#[derive(Clone, Debug)]
pub struct LiveSets {
    pub live_in: Vec<LiveSet>,
    pub live_out: Vec<LiveSet>,
    pub linear: Vec<bool>,
    pub loop_leaving: Vec<LiveSet>,
}

/// The block sets of liveness (see [`LiveSets`]).
pub fn live_sets(func: &Function, cfg: &Cfg) -> LiveSets {
    let linear = func.linear_temps();
    let sets = BlockSets::compute(func, cfg);
    let (live_in, live_out) = solve(cfg, &sets, |t| linear[t as usize]);
    let loop_leaving = loop_leaving(func, cfg, &linear, &sets.def_block, &live_in);
    LiveSets {
        live_in,
        live_out,
        linear,
        loop_leaving,
    }
}

/// Whether `lv` is what [`compute_liveness`] gives for `func` on `cfg`, its kill and dead
/// flags already written in `func`: the debug check of a pass handed a liveness it did not
/// compute (on a copy: `func` is left as it is).
pub fn is_liveness_of(lv: &Liveness, func: &Function, cfg: &Cfg) -> bool {
    let mut fresh = func.clone();
    *lv == compute_liveness(&mut fresh, cfg) && fresh.blocks == func.blocks
}

/// Runs liveness on `func`, writing kill flags and dead flags into it.
pub fn compute_liveness(func: &mut Function, cfg: &Cfg) -> Liveness {
    let n = func.blocks.len();
    let LiveSets {
        live_in,
        live_out,
        linear,
        loop_leaving,
    } = live_sets(func, cfg);
    let mut liveness = Liveness {
        live_in,
        live_out,
        linear,
        loop_leaving,
        register_demand: Vec::with_capacity(n),
        block_max: Vec::with_capacity(n),
        max: Demand::ZERO,
        interference: Default::default(),
        all_lanes_neighbours: Default::default(),
    };
    let mut live = vec![false; func.temps.len()];
    for b in (0..n).map(Block::new) {
        let (dem, max) = walk_block(func, cfg, &liveness, b, &mut live);
        liveness.register_demand.push(dem);
        liveness.block_max.push(max);
        liveness.max = liveness.max.max(max);
    }
    liveness
}

/// Seed 003: per loop, the per-lane temps defined in it that leave it, when lanes leave it at
/// different iterations (a divergent break); empty for the other loops.
fn loop_leaving(
    func: &Function,
    cfg: &Cfg,
    linear: &[bool],
    def_block: &[u32],
    live_in: &[LiveSet],
) -> Vec<LiveSet> {
    cfg.loops
        .iter()
        .map(|lp| {
            if !lp.divergent {
                return LiveSet::new();
            }
            let inside = |t: Temp| {
                !linear[t.index()]
                    && def_block[t.index()] != u32::MAX
                    && lp.contains(Block(def_block[t.index()]))
            };
            let mut leaving: Vec<u32> = live_in[lp.exit.index()]
                .iter()
                .filter(|&t| inside(t))
                .map(|t| t.0)
                .collect();
            for inst in func
                .block(lp.exit)
                .insts
                .iter()
                .filter(|i| i.op == kiln_ir::Opcode::Phi)
            {
                for (op, p) in inst
                    .operands
                    .iter()
                    .zip(&cfg.logical.preds[lp.exit.index()])
                {
                    if let Some(t) = op.temp_id()
                        && lp.contains(*p)
                        && inside(t)
                    {
                        leaving.push(t.0);
                    }
                }
            }
            LiveSet::from_unsorted(leaving)
        })
        .collect()
}

/// Walks a block backwards once: per instruction its dead definitions and operand flags, then
/// its demand from those flags and the demand live after it.
fn walk_block(
    func: &mut Function,
    cfg: &Cfg,
    lv: &Liveness,
    b: Block,
    live: &mut [bool],
) -> (Vec<Demand>, Demand) {
    let bi = b.index();
    // Temps marked in `live`: every one is cleared before the next block.
    let mut marked = 0usize;
    for t in lv.live_out[bi].iter() {
        live[t.index()] = true;
        marked += 1;
    }
    let mut cur = sum(func, &lv.live_out[bi]);
    let Function { temps, blocks, .. } = func;
    let insts = &mut blocks[bi].insts;
    let mut dems = vec![Demand::ZERO; insts.len()];
    let mut max = Demand::ZERO;
    for (k, inst) in insts.iter_mut().enumerate().rev() {
        // Definitions: dead when not live after; they leave the live set.
        for d in inst.defs.iter_mut() {
            let l = &mut live[d.temp.index()];
            d.dead = !*l;
            marked -= *l as usize;
            *l = false;
        }
        if inst.op.is_phi() {
            set_phi_flags(cfg, lv, b, inst);
        } else {
            set_operand_flags(inst, live);
            for op in &inst.operands {
                if let Some(t) = op.temp_id() {
                    marked += !live[t.index()] as usize;
                    live[t.index()] = true;
                }
            }
        }
        let d = InstDemand::compute(temps, inst, cur);
        cur = d.live_in();
        dems[k] = d.register_demand();
        max = max.max(dems[k]);
    }
    for t in lv.live_in[bi].iter() {
        marked -= live[t.index()] as usize;
        live[t.index()] = false;
    }
    // Anything still marked is a temp used before its definition, which the verifier rejects;
    // clear it so the next block starts clean.
    if marked > 0 {
        for inst in insts.iter() {
            for t in inst.used_temps() {
                live[t.index()] = false;
            }
        }
    }
    (dems, max)
}

/// The demand quantities of a block's instructions, walking back from its live-out demand.
fn block_demands(
    classes: &[kiln_ir::RegClass],
    insts: &[kiln_ir::Inst],
    live_out: Demand,
) -> Vec<InstDemand> {
    let mut dems = vec![InstDemand::default(); insts.len()];
    let mut cur = live_out;
    for (k, inst) in insts.iter().enumerate().rev() {
        let d = InstDemand::compute(classes, inst, cur);
        cur = d.live_in();
        dems[k] = d;
    }
    dems
}

/// Whether operand `k` belongs to a vector of operands (seed 000's `isVectorAligned` runs).
fn in_vector(ops: &[kiln_ir::Operand], k: usize) -> bool {
    ops[k].is_vector_aligned() || (k > 0 && ops[k - 1].is_vector_aligned())
}

/// Seed 000's operand flags of a non-phi instruction, given what is live after it.
fn set_operand_flags(inst: &mut kiln_ir::Inst, live: &[bool]) {
    for k in 0..inst.operands.len() {
        let tied = inst.tied_def(k).is_some();
        let vector = in_vector(&inst.operands, k);
        let op = &mut inst.operands[k];
        // Constraints given by instruction selection stay; the rest is recomputed.
        let user = op.flags;
        op.flags = OperandFlags::empty();
        for f in [OperandFlags::LATE_KILL, OperandFlags::VECTOR_ALIGNED] {
            op.flags.set(f, user.contains(f));
        }
        op.flags.set(OperandFlags::CLOBBERED, tied);
        if vector && !tied {
            op.flags.set(OperandFlags::LATE_KILL, true);
        }
    }
    for k in 0..inst.operands.len() {
        let Some(t) = inst.operands[k].temp_id() else {
            continue;
        };
        let killed = !live[t.index()];
        let earlier = &inst.operands[..k];
        let first = !earlier.iter().any(|o| o.temp_id() == Some(t));
        let tied_k = inst.tied_def(k).is_some();
        let vector = in_vector(&inst.operands, k);
        // A second instance tied to another definition, or in a second vector, is copied.
        let copy = !first
            && earlier.iter().enumerate().any(|(j, o)| {
                o.temp_id() == Some(t)
                    && ((tied_k && inst.tied_def(j).is_some())
                        || (vector && in_vector(&inst.operands, j)))
            });
        let op = &mut inst.operands[k];
        op.flags.set(OperandFlags::KILL, killed || copy);
        op.flags.set(OperandFlags::COPY_KILL, copy);
        op.flags.set(OperandFlags::FIRST_KILL, killed && first);
    }
}

/// Phi operands are read at the end of the predecessors: killed when not live out of the
/// predecessor through its successors.
fn set_phi_flags(cfg: &Cfg, lv: &Liveness, b: Block, inst: &mut kiln_ir::Inst) {
    let preds = phi_preds(cfg, inst.op, b);
    for (k, op) in inst.operands.iter_mut().enumerate() {
        op.flags = OperandFlags::empty();
        let (Some(t), Some(p)) = (op.temp_id(), preds.get(k)) else {
            continue;
        };
        let succs = if lv.linear[t.index()] {
            &cfg.linear.succs[p.index()]
        } else {
            &cfg.logical.succs[p.index()]
        };
        let live_after = succs.iter().any(|s| lv.live_in[s.index()].contains(t));
        op.flags.set(OperandFlags::KILL, !live_after);
        op.flags.set(OperandFlags::FIRST_KILL, !live_after);
    }
}
