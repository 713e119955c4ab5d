//! Class narrowing for the QPU (seed 002; Mesa's `vc4_register_allocate.c`, where every temp
//! starts with the class bits A, B, r0–r3 and r4 and each instruction takes away what it cannot
//! live with): after instruction selection, every value of the `q` file gets the subset of the
//! registers its definition and the instructions it lives across allow.
//!
//! - Only an r4 writer's own result (SFU ops: `crate::ops`, resource `r4`) may sit in r4: r4 is
//!   not a write address, the emitter reads the result from it.
//! - An r4 writer takes r4 from every value live across it.
//!
//! The bits name one of the target's subsets (`crate::target`): `any` (r4 allowed) or
//! `a_or_b_or_acc`, within the subset a target opcode requires of the value (the derivatives'
//! scratch accumulator: `r0_r3`). Packs, unpacks and thread switches narrow further once
//! selection emits them (file A, A or r4, no accumulators).
//!
//! Cost: one backward walk per block; at an r4 writer, the values live across it.

use crate::target::Q;
use kiln_analysis::{Cfg, compute_liveness};
use kiln_ir::{Access, Function, Inst, Opcode, RegClass, Temp};

const R4: u8 = 1;

/// Whether `inst` writes r4.
pub fn writes_r4(inst: &Inst) -> bool {
    matches!(inst.op, Opcode::Target(t)
        if t.info().resources.iter().any(|r| r.name == "r4" && r.access != Access::Read))
}

/// Narrows the class of every value of `func` (a vc4 function, after selection). A function
/// whose blocks do not form a CFG is left as it is (the verifier says why).
pub fn narrow_classes(func: &mut Function) {
    let Ok(cfg) = Cfg::compute(func) else { return };
    let lv = compute_liveness(func, &cfg);
    let n = func.temps.len();
    // Bit R4: the value may sit in r4.
    let mut bits = vec![R4; n];
    let mut live = vec![false; n];
    let mut list: Vec<Temp> = Vec::new();
    for b in func.block_ids() {
        list.clear();
        for t in lv.live_out[b.index()].iter() {
            live[t.index()] = true;
            list.push(t);
        }
        for inst in func.block(b).insts.iter().rev() {
            let r4 = writes_r4(inst);
            for d in &inst.defs {
                live[d.temp.index()] = false;
                if !r4 {
                    bits[d.temp.index()] &= !R4;
                }
            }
            if r4 {
                list.retain(|t| live[t.index()]);
                for &t in &list {
                    bits[t.index()] &= !R4;
                }
            }
            for t in inst.used_temps() {
                if !live[t.index()] {
                    live[t.index()] = true;
                    list.push(t);
                }
            }
        }
        for &t in &list {
            live[t.index()] = false;
        }
    }
    let target = func.target.clone();
    let class = |name: &str| RegClass {
        subset: target.subset_by_name(name),
        ..target.class(Q, 1)
    };
    let (any, no_r4) = (class("any"), class("a_or_b_or_acc"));
    let required = required_subsets(func);
    for (t, c) in func.temps.iter_mut().enumerate() {
        if !c.is_none() && c.file == Q {
            let base = if bits[t] & R4 != 0 { any } else { no_r4 };
            *c = match required.get(t).copied().flatten() {
                Some(name) => target.intersect_classes(base, class(name)).unwrap_or(base),
                None => base,
            };
        }
    }
}

/// Per temp, the subset a target opcode requires of it as an operand or definition (the
/// derivatives' scratch accumulator: `r0_r3`).
pub fn required_subsets(func: &Function) -> Vec<Option<&'static str>> {
    let mut req = vec![None; func.temps.len()];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        let Opcode::Target(t) = inst.op else { continue };
        let info = t.info();
        let defs = inst.defs.iter().map(|d| d.temp);
        let ops = inst.operands.iter().map(|o| o.temp_id());
        for (temp, c) in defs
            .map(Some)
            .zip(info.def_classes.unwrap_or(&[]))
            .chain(ops.zip(info.operand_classes.unwrap_or(&[])))
        {
            if let (Some(temp), Some(name)) = (temp, c.subset)
                && let Some(slot) = req.get_mut(temp.index())
            {
                *slot = Some(name);
            }
        }
    }
    req
}
