//! The pre-RA scheduler: pressure-aware list scheduling of each block of an SSA function,
//! after Mesa's `vc4_qir_schedule.c` (reorder to consume values as soon as they are made)
//! with ACO's rule that scheduling never takes the register demand over the budget
//! (`aco_scheduler.cpp`). The design is in `docs/sched.md` ("The pre-RA scheduler").
//!
//! Instructions that an operation's emission reads together stay together: an instruction
//! whose results the next instruction reads, and nothing after its node, is glued to it (a
//! uniform read folded into its operation, a comparison into its select, an operation into
//! its output), and so is what the target glues ([`PreRaTarget::glued`]). The nodes are then scheduled top-down; at each step
//! the ready node chosen is, in order:
//!
//! 1. a reader of the last transient result ([`PreRaTarget::transient`]: on vc4 a texel or an
//!    SFU result in r4, which a reader before the next r4 write takes without a move) — but
//!    for [`Order::Latency`], while that result is not ready, first the first ready node that
//!    writes no transient result and keeps the demand within the block's before scheduling
//!    (the SFU's wait filled with independent work; the instruction that makes a transient
//!    result is then not glued to its reader);
//! 2. when the live values would go past the budget, the node that adds the fewest;
//! 3. a node whose operands are ready (their producers' latency has passed);
//! 4. the first in the original order — the front end's, which is mostly good, and which
//!    the emitter's look-aheads were written for. (Freeing registers first whenever a node
//!    can, as Mesa does, was measured on the corpus: 0.4 % more instructions, as the values
//!    it shortens were accumulators anyway.)
//!
//! The one demand function (`kiln_analysis::Liveness`) then checks every block: one whose
//! maximum demand went up past the budget keeps its original order.

use kiln_analysis::{Cfg, LiveSet, Liveness, compute_liveness};
use kiln_ir::{Block, Demand, Function, Inst, Opcode, Temp};
use smallvec::SmallVec;

/// What the scheduler needs to know of a target's instructions.
pub trait PreRaTarget {
    /// Whether `inst` keeps its order with respect to the other instructions that do (side
    /// effects, FIFOs, the order of a stream).
    fn keeps_order(&self, inst: &Inst) -> bool;
    /// Whether `inst` stays at the start of its block, before everything scheduled (vc4: the
    /// inputs of the prologue).
    fn leads(&self, inst: &Inst) -> bool;
    /// Whether `inst` and everything after it stay at the end of their block, in their order
    /// (vc4: the outputs, which the interface pass placed).
    fn ends(&self, inst: &Inst) -> bool;
    /// Cycles from `inst` to the first instruction that may read its results.
    fn latency(&self, inst: &Inst) -> u32;
    /// Whether `inst` leaves its results where a reader scheduled before the next transient
    /// instruction reads them directly.
    fn transient(&self, inst: &Inst) -> bool;
    /// Whether `insts[k]` must stay directly before `insts[k + 1]` (the target emits them as
    /// one).
    fn glued(&self, insts: &[Inst], k: usize) -> bool;
}

/// The generic target's facts (`kiln_ir::GenericTarget`), for the scheduler's own tests and
/// benchmark: side effects keep their order, a texture sample's result is transient and is
/// read four cycles after it.
pub struct GenericPreRa;

impl PreRaTarget for GenericPreRa {
    fn keeps_order(&self, inst: &Inst) -> bool {
        inst.op.info().side_effects
    }
    fn leads(&self, _: &Inst) -> bool {
        false
    }
    fn ends(&self, _: &Inst) -> bool {
        false
    }
    fn latency(&self, inst: &Inst) -> u32 {
        if inst.op == Opcode::TextureSample {
            4
        } else {
            1
        }
    }
    fn transient(&self, inst: &Inst) -> bool {
        inst.op == Opcode::TextureSample
    }
    fn glued(&self, _: &[Inst], _: usize) -> bool {
        false
    }
}

/// What the order is for, beside keeping the demand within the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Values consumed soon after they are made, as Mesa's `vc4_qir_schedule.c` orders them:
    /// an instruction waiting on a transient result stays glued to it.
    Pressure,
    /// Also the wait for a transient result filled with independent work, within the demand
    /// the block had (fewer instructions, sometimes more registers).
    Latency,
}

/// What scheduling did to a function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Blocks whose order changed.
    pub reordered: usize,
    /// Blocks that kept their original order because the new one needed more registers than
    /// the budget and than the original.
    pub kept: usize,
}

/// Schedules every block of `func` (an SSA function before allocation) within `budget`, for
/// `order`; kill flags are recomputed. A function whose blocks do not form a CFG is left as
/// it is.
pub fn schedule(
    func: &mut Function,
    target: &dyn PreRaTarget,
    budget: Demand,
    order: Order,
) -> Outcome {
    match Cfg::compute(func) {
        Ok(cfg) => schedule_live(func, cfg, target, budget, order).0,
        Err(_) => Outcome::default(),
    }
}

/// [`schedule`] of `func`, whose CFG `cfg` is, and the CFG and liveness of the function it
/// leaves (for the passes after it that would compute them again).
pub fn schedule_live(
    func: &mut Function,
    cfg: Cfg,
    target: &dyn PreRaTarget,
    budget: Demand,
    order: Order,
) -> (Outcome, Cfg, Liveness) {
    let mut outcome = Outcome::default();
    let mut lv = compute_liveness(func, &cfg);
    // The blocks reordered, and the order each took (instruction k of the new order was
    // instruction order[k]).
    let mut reordered: Vec<(Block, Vec<usize>)> = Vec::new();
    let mut scratch = Scratch::new(func.temps.len());
    for b in (0..func.blocks.len()).map(Block::new) {
        let insts = &func.block(b).insts;
        // Work that fills a wait stays within the demand the block had (its order is free to
        // change, not its registers).
        let mut fill = budget;
        for (f, had) in fill.0.iter_mut().zip(lv.block_max[b.index()].0) {
            *f = (*f).min(had);
        }
        let fill = (order == Order::Latency).then_some(fill);
        let Some(order) = schedule_block(
            func,
            insts,
            &lv.live_out[b.index()],
            target,
            budget,
            fill,
            &mut scratch,
        ) else {
            continue;
        };
        let block = func.block_mut(b);
        block.insts = permute(std::mem::take(&mut block.insts), &order, false);
        reordered.push((b, order));
    }
    if reordered.is_empty() {
        return (outcome, cfg, lv);
    }
    // A block's order changes neither its live-in nor its live-out: only the reordered blocks
    // are walked again. A block whose demand rose past the budget gets its order back (and is
    // walked once more).
    let before: Vec<Demand> = reordered
        .iter()
        .map(|(b, _)| lv.block_max[b.index()])
        .collect();
    let blocks: Vec<Block> = reordered.iter().map(|(b, _)| *b).collect();
    lv.rewalk(func, &cfg, &blocks);
    let mut back = Vec::new();
    for ((b, order), old) in reordered.into_iter().zip(before) {
        let new = lv.block_max[b.index()];
        if new.exceeds(budget) && new.exceeds(old) {
            let block = func.block_mut(b);
            block.insts = permute(std::mem::take(&mut block.insts), &order, true);
            back.push(b);
            outcome.kept += 1;
        } else {
            outcome.reordered += 1;
        }
    }
    if !back.is_empty() {
        lv.rewalk(func, &cfg, &back);
    }
    (outcome, cfg, lv)
}

/// `insts` in the order `order` gives (instruction k of the result is `insts[order[k]]`), or
/// back from it (`inverse`): moved, not copied.
fn permute(insts: Vec<Inst>, order: &[usize], inverse: bool) -> Vec<Inst> {
    let mut slots: Vec<Option<Inst>> = (0..insts.len()).map(|_| None).collect();
    if inverse {
        for (inst, &k) in insts.into_iter().zip(order) {
            slots[k] = Some(inst);
        }
    } else {
        let mut from: Vec<Option<Inst>> = insts.into_iter().map(Some).collect();
        for (slot, &k) in slots.iter_mut().zip(order) {
            *slot = from[k].take();
        }
    }
    slots
        .into_iter()
        .map(|i| i.expect("an order is a permutation of the block"))
        .collect()
}

/// One node: instructions `first..=last` of the block, emitted together.
struct Node {
    first: usize,
    last: usize,
    keeps_order: bool,
    transient: bool,
    latency: u32,
    /// Results read after the node, or live out: their demand.
    defines: Demand,
    /// Temps read by the node and made before it, each once.
    reads: SmallVec<[Temp; 4]>,
    succs: SmallVec<[usize; 4]>,
    preds: u32,
}

/// No instruction of the block.
const NONE: u32 = u32::MAX;

/// Per temp of the function, what [`schedule_block`] finds of it in one block: set for the
/// temps the block names and cleared after it, so that a function's blocks share one
/// allocation and each costs its own instructions.
pub struct Scratch {
    def_at: Vec<u32>,
    first_use: Vec<u32>,
    last_use: Vec<u32>,
    /// Nodes left to read the temp.
    left: Vec<u32>,
    /// The temps set.
    seen: Vec<Temp>,
}

impl Scratch {
    pub fn new(temps: usize) -> Scratch {
        Scratch {
            def_at: vec![NONE; temps],
            first_use: vec![NONE; temps],
            last_use: vec![NONE; temps],
            left: vec![0; temps],
            seen: Vec::new(),
        }
    }

    fn clear(&mut self) {
        for t in self.seen.drain(..) {
            let i = t.index();
            self.def_at[i] = NONE;
            self.first_use[i] = NONE;
            self.last_use[i] = NONE;
            self.left[i] = 0;
        }
    }
}

/// How many ready nodes, in their original order, a step compares (Mesa's scheduler compares
/// them all, quadratic in a wide block; a transient result's readers are found directly).
const WINDOW: usize = 48;

/// The new order of `insts` (indices into it), or `None` when it stays as it is. With `fill`,
/// the wait for a transient result is filled ([`Order::Latency`]) by nodes that keep the
/// demand within it.
pub fn schedule_block(
    func: &Function,
    insts: &[Inst],
    live_out: &LiveSet,
    target: &dyn PreRaTarget,
    budget: Demand,
    fill: Option<Demand>,
    scratch: &mut Scratch,
) -> Option<Vec<usize>> {
    let n = insts.len();
    let mut start = 0;
    while start < n && (insts[start].op.is_phi() || target.leads(&insts[start])) {
        start += 1;
    }
    let end = start
        + insts[start..]
            .iter()
            .position(|i| i.op.is_terminator() || target.ends(i))
            .unwrap_or(n - start);
    if end <= start + 1 {
        return None;
    }
    let body = &insts[start..end];
    let m = body.len();
    // Where each temp is defined in the body, and the first and last instructions reading it.
    let seen = &mut scratch.seen;
    let (def_at, first_use, last_use) = (
        &mut scratch.def_at,
        &mut scratch.first_use,
        &mut scratch.last_use,
    );
    for (k, inst) in body.iter().enumerate() {
        for t in inst.used_temps() {
            let i = t.index();
            if first_use[i] == NONE {
                first_use[i] = k as u32;
                seen.push(t);
            }
            last_use[i] = k as u32;
        }
        for d in &inst.defs {
            def_at[d.temp.index()] = k as u32;
            seen.push(d.temp);
        }
    }
    let (def_at, first_use, last_use) = (&*def_at, &*first_use, &*last_use);
    let known = |v: u32| (v != NONE).then_some(v as usize);
    let defined = |t: Temp| known(def_at[t.index()]);
    let last_read = |t: Temp| known(last_use[t.index()]);
    let first_read = |t: Temp| known(first_use[t.index()]);
    // Glue, from the end: an instruction whose every result is read, only by the node after
    // it, goes with that node; so does what the target glues.
    let mut node_last = vec![0usize; m];
    let mut cur_last = m - 1;
    for k in (0..m).rev() {
        let inst = &body[k];
        let glue = k + 1 < m
            && (target.glued(body, k)
                || (!inst.defs.is_empty()
                    && !target.keeps_order(inst)
                    && (fill.is_none() || target.latency(inst) <= 1)
                    && inst.defs.iter().all(|d| {
                        !live_out.contains(d.temp)
                            && first_read(d.temp) == Some(k + 1)
                            && last_read(d.temp).is_some_and(|u| u <= cur_last)
                    })));
        if !glue {
            cur_last = k;
        }
        node_last[k] = cur_last;
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut node_of = vec![0usize; m];
    let mut k = 0;
    while k < m {
        let last = node_last[k];
        let members = &body[k..=last];
        let mut defines = Demand::ZERO;
        let mut reads: SmallVec<[Temp; 4]> = SmallVec::new();
        for inst in members {
            for d in &inst.defs {
                if live_out.contains(d.temp) || last_read(d.temp).is_some_and(|u| u > last) {
                    defines += Demand::of(func.class(d.temp));
                }
            }
            for t in inst.used_temps() {
                let inside = defined(t).is_some_and(|at| at >= k && at <= last);
                if !inside && !reads.contains(&t) {
                    reads.push(t);
                }
            }
        }
        node_of[k..=last].fill(nodes.len());
        nodes.push(Node {
            first: k,
            last,
            keeps_order: members.iter().any(|i| target.keeps_order(i)),
            transient: members.iter().any(|i| target.transient(i)),
            latency: members.last().map_or(1, |i| target.latency(i)),
            defines,
            reads,
            succs: SmallVec::new(),
            preds: 0,
        });
        k = last + 1;
    }
    if nodes.len() < 2 {
        scratch.clear();
        return None;
    }
    // Edges: each read from its producer's node, and the kept order.
    let mut last_kept: Option<usize> = None;
    let mut preds: Vec<usize> = Vec::new();
    for id in 0..nodes.len() {
        preds.clear();
        preds.extend(
            nodes[id]
                .reads
                .iter()
                .filter_map(|&t| defined(t).map(|at| node_of[at])),
        );
        if nodes[id].keeps_order {
            preds.extend(last_kept);
            last_kept = Some(id);
        }
        preds.sort_unstable();
        preds.dedup();
        nodes[id].preds = preds.len() as u32;
        for &p in &preds {
            nodes[p].succs.push(id);
        }
    }
    // Nodes left to read each temp, and the pressure at the start: what lives through the
    // body or is read in it and made before it.
    let left = &mut scratch.left;
    let mut pressure = Demand::ZERO;
    for t in nodes.iter().flat_map(|n| n.reads.iter().copied()) {
        left[t.index()] += 1;
        if left[t.index()] == 1 && defined(t).is_none() {
            pressure += Demand::of(func.class(t));
        }
    }
    for t in live_out.iter() {
        if defined(t).is_none() && left[t.index()] == 0 {
            pressure += Demand::of(func.class(t));
        }
    }
    let frees = |node: &Node, left: &[u32]| -> Demand {
        let mut d = Demand::ZERO;
        for &t in &node.reads {
            if left[t.index()] == 1 && !live_out.contains(t) {
                d += Demand::of(func.class(t));
            }
        }
        d
    };

    let mut ready: std::collections::BTreeSet<usize> =
        (0..nodes.len()).filter(|&i| nodes[i].preds == 0).collect();
    let mut ready_at = vec![0u32; nodes.len()];
    let mut preds_left: Vec<u32> = nodes.iter().map(|n| n.preds).collect();
    let mut transient: Option<usize> = None;
    let mut now = 0u32;
    let mut order: Vec<usize> = (0..start).collect();
    while !ready.is_empty() {
        // A reader of the transient result, first; else the best of the first ready nodes:
        // (over the budget → fewest added, ready in time, original order).
        let reader = transient.and_then(|t| {
            nodes[t]
                .succs
                .iter()
                .copied()
                .filter(|&s| {
                    ready.contains(&s)
                        && nodes[s]
                            .reads
                            .iter()
                            .any(|&r| defined(r).is_some_and(|at| node_of[at] == t))
                })
                .min()
        });
        // While the transient result is not ready, a node that leaves it in place (writes no
        // transient result) and is ready, within the budget, fills the wait.
        let filler = fill
            .filter(|_| reader.is_some_and(|r| ready_at[r] > now))
            .and_then(|fill| {
                ready.iter().take(WINDOW).copied().find(|&id| {
                    !nodes[id].transient
                        && ready_at[id] <= now
                        && !(pressure + nodes[id].defines - frees(&nodes[id], left)).exceeds(fill)
                })
            });
        let id = filler.or(reader).unwrap_or_else(|| {
            // The least key (over the budget → fewest added, ready in time, original order);
            // what a node adds is counted only when it goes over the budget, and the first
            // node in order that neither goes over nor waits has the least key there is.
            let mut best: Option<(i32, bool, usize)> = None;
            for id in ready.iter().take(WINDOW).copied() {
                let node = &nodes[id];
                let over = (pressure + node.defines).exceeds(budget);
                let late = ready_at[id] > now;
                if !over && !late {
                    return id;
                }
                let added = if over {
                    sum(node.defines) - sum(frees(node, left))
                } else {
                    i32::MIN
                };
                let key = (added, late, id);
                if best.is_none_or(|b| key < b) {
                    best = Some(key);
                }
            }
            best.expect("a ready node").2
        });
        ready.remove(&id);
        let node = &nodes[id];
        pressure = pressure + node.defines - frees(node, left);
        for &t in &node.reads {
            left[t.index()] -= 1;
        }
        if node.transient {
            transient = Some(id);
        }
        now = now.max(ready_at[id]) + (node.last - node.first + 1) as u32;
        order.extend((node.first..=node.last).map(|k| start + k));
        for &s in &node.succs {
            ready_at[s] = ready_at[s].max(now - 1 + node.latency);
            preds_left[s] -= 1;
            if preds_left[s] == 0 {
                ready.insert(s);
            }
        }
    }
    debug_assert_eq!(order.len(), end, "every node scheduled");
    order.extend(end..n);
    scratch.clear();
    order
        .iter()
        .enumerate()
        .any(|(k, &i)| k != i)
        .then_some(order)
}

fn sum(d: Demand) -> i32 {
    d.0.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::permute;
    use kiln_ir::{Inst, Opcode};

    /// Instruction k of the permuted block is `order[k]` of the original, and the inverse
    /// gives the original back.
    #[test]
    fn permute_moves_by_the_order_and_back() {
        let insts: Vec<Inst> = (0..7u32)
            .map(|k| {
                let mut i = Inst::new(Opcode::Output);
                i.imms.push(k);
                i
            })
            .collect();
        let order = [3usize, 0, 6, 1, 5, 2, 4];
        let moved = permute(insts.clone(), &order, false);
        let tags: Vec<u32> = moved.iter().map(|i| i.imms[0]).collect();
        assert_eq!(tags, order.map(|k| k as u32));
        assert_eq!(permute(moved, &order, true), insts);
    }
}
