//! Copy propagation as seed 004 describes i965's (`brw_fs_copy_propagation.cpp`): the copies
//! available at the start of every block come from a forward must-problem on the logical CFG
//! ([`crate::dataflow`]), and operands that read a copy's destination are rewritten to read its
//! source where the lane rules allow. The design is in `docs/middle.md` ("Copy propagation").

use crate::dataflow::{Direction, GenKill, Graph, Meet, solve};
use crate::util::{Avail, is_free_operand, set_value};
use kiln_analysis::{Changed, Context, PassError};
use kiln_ir::{Block, Opcode, Value};

/// One entry of the available-copy set: `dst = mov src` (found by its destination through
/// `copy_of`).
#[derive(Clone, Copy, Debug)]
struct Copy {
    src: Value,
    block: Block,
}

/// Propagates copies; the copies themselves are left to dead code elimination.
pub fn copy_prop(cx: &mut Context) -> Result<Changed, PassError> {
    let cfg = cx.cfg()?;
    let dom = cx.dominance()?;
    let facts = cx.def_sites();
    let func = cx.func_mut();
    let is_copy = |inst: &kiln_ir::Inst| {
        inst.op == Opcode::Mov
            && inst.defs.len() == 1
            && !matches!(inst.operands[0].value, Value::Undef(_))
    };
    if !func.blocks.iter().flat_map(|b| &b.insts).any(is_copy) {
        return Ok(Changed::Nothing);
    }
    let avail = Avail::with(facts, &cfg, &dom);
    // The ACP entries and, per temp, the copy that defines it.
    let mut copies: Vec<Copy> = Vec::new();
    let mut copy_of: Vec<Option<usize>> = vec![None; func.temps.len()];
    for b in func.block_ids() {
        for inst in &func.block(b).insts {
            if is_copy(inst) {
                copy_of[inst.defs[0].temp.index()] = Some(copies.len());
                copies.push(Copy {
                    src: inst.operands[0].value,
                    block: b,
                });
            }
        }
    }
    if copies.is_empty() {
        return Ok(Changed::Nothing);
    }
    let n = func.blocks.len();
    let mut problem = GenKill::new(Direction::Forward, Meet::Intersection, copies.len(), n);
    for (k, c) in copies.iter().enumerate() {
        problem.gen_sets[c.block.index()].insert(k);
        if let Value::Temp(s) = c.src
            && avail.linear()[s.index()]
        {
            for l in cfg.enclosing_loops(c.block) {
                if cfg.loops[l].divergent {
                    problem.kill_sets[cfg.loops[l].exit.index()].insert(k);
                }
            }
        }
    }
    let solution = solve(&problem, &cfg, Graph::Logical).map_err(|e| PassError::Failed {
        pass: "copy_prop".into(),
        message: e.to_string(),
    })?;
    let mut rewrites = 0;
    for b in cfg.rpo() {
        let mut acp = solution.block_start[b.index()].clone();
        for i in 0..func.block(b).insts.len() {
            let inst = &func.block(b).insts[i];
            let is_phi = inst.op.is_phi();
            for k in 0..inst.operands.len() {
                let inst = &func.block(b).insts[i];
                let Some(d) = inst.operands[k].temp_id() else {
                    continue;
                };
                let Some(c) = copy_of[d.index()] else {
                    continue;
                };
                let src = copies[c].src;
                let ok = if is_phi {
                    // Read at the end of the predecessor the operand belongs to.
                    let preds = if inst.op == Opcode::Phi {
                        &cfg.logical.preds[b.index()]
                    } else {
                        &cfg.linear.preds[b.index()]
                    };
                    let pred = preds[k];
                    solution.block_end[pred.index()].contains(c)
                        && match src {
                            Value::Temp(s) => {
                                func.class(s) == func.class(d)
                                    && avail.linear()[s.index()] == avail.linear()[d.index()]
                                    && avail.reaches(s, pred)
                            }
                            _ => true,
                        }
                } else {
                    acp.contains(c)
                        && match src {
                            Value::Temp(s) => {
                                avail.reaches(s, b)
                                    && (is_free_operand(inst, k) || func.class(s) == func.class(d))
                            }
                            _ => true,
                        }
                };
                if ok {
                    set_value(&mut func.block_mut(b).insts[i].operands[k], src);
                    rewrites += 1;
                }
            }
            if let Some(d) = func.block(b).insts[i].defs.first()
                && let Some(c) = copy_of[d.temp.index()]
            {
                acp.insert(c);
            }
        }
    }
    Ok(if rewrites > 0 {
        Changed::Instructions
    } else {
        Changed::Nothing
    })
}
