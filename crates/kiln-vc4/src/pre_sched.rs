//! The pre-RA scheduler's facts of vc4 operations (`kiln_sched::pressure`, after Mesa's
//! `vc4_qir_schedule.c`): texels and SFU results arrive in r4, where their reader takes them
//! without a move when it comes before the next r4 write (the emitter's in-place reads), so
//! the scheduler brings that reader next; the components of one sample stay together (one
//! TMU request), and so do the patterns the emitter reads together; inputs, outputs, lookups and everything of a FIFO, the VPM or the tile
//! buffer keep their order. The budget is the file registers of the thread mode: a value
//! live across a thread switch cannot be in an accumulator. The design is in
//! `docs/sched.md` ("The pre-RA scheduler").

use crate::ops::{Op, Resource};
use kiln_analysis::{Cfg, Liveness};
use kiln_ir::{Demand, Function, Inst, Opcode};
pub use kiln_sched::pressure::Order;
use kiln_sched::pressure::{Outcome, PreRaTarget, schedule_live};

struct Vc4PreRa;

impl PreRaTarget for Vc4PreRa {
    fn keeps_order(&self, inst: &Inst) -> bool {
        inst.op.info().side_effects
            || matches!(inst.op, Opcode::Input | Opcode::Output | Opcode::Discard)
            || Op::of_opcode(inst.op).is_some_and(|op| {
                op.facts()
                    .resources
                    .iter()
                    .any(|u| !matches!(u.0, Resource::R4 | Resource::Flags))
            })
    }

    fn leads(&self, inst: &Inst) -> bool {
        inst.op == Opcode::Input
    }

    fn ends(&self, inst: &Inst) -> bool {
        inst.op == Opcode::Output
    }

    fn latency(&self, inst: &Inst) -> u32 {
        // An ALU result is read from an accumulator the next instruction, mostly; a texel is
        // waited for by the load itself.
        match Op::of_opcode(inst.op) {
            Some(op) if crate::narrow::writes_r4(inst) && !crate::texture::is_lookup(inst) => {
                op.facts().latency as u32
            }
            _ => 1,
        }
    }

    fn transient(&self, inst: &Inst) -> bool {
        crate::narrow::writes_r4(inst)
    }

    fn glued(&self, insts: &[Inst], k: usize) -> bool {
        // One sample's components; an operation the select after its comparison writes
        // itself (the emitter's deferred operation).
        let (inst, next) = (&insts[k], &insts[k + 1]);
        crate::texture::same_texel(inst, next)
            || (crate::interface::is_comparison(next.op)
                && insts.get(k + 2).is_some_and(|sel| {
                    sel.op == Opcode::Sel
                        && sel.operands.first().and_then(|o| o.temp_id())
                            == next.defs.first().map(|d| d.temp)
                        && inst.defs.len() == 1
                        && sel.operands[1..]
                            .iter()
                            .any(|o| o.temp_id() == Some(inst.defs[0].temp))
                }))
    }
}

/// Schedules every block of `func` (selected for vc4, interface lowered, not allocated)
/// within the file registers its target leaves to values; with the CFG and liveness of the
/// result ([`kiln_sched::pressure::schedule_live`]).
pub fn pre_schedule(func: &mut Function, cfg: Cfg, order: Order) -> (Outcome, Cfg, Liveness) {
    let registers = func
        .target
        .subsets()
        .iter()
        .find(|s| s.name == "a_or_b")
        .map_or(0, |s| s.units.count() as i32);
    let mut budget = Demand::ZERO;
    budget.0[crate::target::Q.index()] = registers;
    schedule_live(func, cfg, &Vc4PreRa, budget, order)
}
