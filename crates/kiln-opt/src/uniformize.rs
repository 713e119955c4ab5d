//! Uniform values kept in per-lane registers become uniform (the front end's loop counters and
//! what is computed from them), by a greatest fixpoint in the manner of NIR's divergence
//! analysis, restricted to what is certain from the IR alone. The design is in `docs/middle.md`
//! ("Uniform values in per-lane registers").

use crate::util::is_free_operand;
use kiln_analysis::{Changed, Context, PassError};
use kiln_ir::semantics::eval_scalar;
use kiln_ir::{Function, Inst, Lanes, Opcode, Value};

fn pure_scalar(inst: &Inst) -> bool {
    inst.defs.len() == 1
        && !inst.op.info().side_effects
        && !matches!(
            inst.op,
            Opcode::Fddx | Opcode::Fddy | Opcode::Input | Opcode::Reload | Opcode::Uniform
        )
        && (matches!(inst.op, Opcode::Mov | Opcode::Sel)
            || eval_scalar(inst.op, &[0, 0, 0, 0]).is_some())
}

/// Moves uniform values computed in per-lane registers to the uniform file.
pub fn uniformize(cx: &mut Context) -> Result<Changed, PassError> {
    let cfg = cx.cfg()?;
    let facts = cx.def_sites();
    let target = cx.func().target.clone();
    let func = cx.func();
    let files = target.files();
    let Some(ufile) = files.iter().position(|f| f.lanes == Lanes::Uniform) else {
        return Ok(Changed::Nothing);
    };
    let uclass = target.class(kiln_ir::FileId(ufile as u8), 1);
    let linear = &facts.linear;
    let is_uniform_file = |func: &Function, t: kiln_ir::Temp| {
        let c = func.class(t);
        files
            .get(c.file.index())
            .is_some_and(|f| f.lanes == Lanes::Uniform)
    };
    let n = func.temps.len();
    let mut cand = vec![false; n];
    for b in func.block_ids() {
        let same_preds = cfg.logical.preds[b.index()] == cfg.linear.preds[b.index()];
        for inst in &func.block(b).insts {
            let Some(d) = inst.defs.first() else { continue };
            let t = d.temp;
            let ok = !linear[t.index()]
                && !is_uniform_file(func, t)
                && func.class(t).size == 1
                && d.fixed.is_none()
                && d.tied.is_none()
                && !inst.flags.all_lanes
                && ((inst.op == Opcode::Phi && same_preds) || pure_scalar(inst));
            cand[t.index()] = ok;
        }
    }
    if !cand.iter().any(|&c| c) {
        return Ok(Changed::Nothing);
    }
    let dom = cx.dominance()?;
    let func = cx.func_mut();
    let sites = &facts.sites;
    // Greatest fixpoint: drop candidates until every remaining one is justified.
    loop {
        let mut dropped = false;
        for b in func.block_ids() {
            for (i, inst) in func.block(b).insts.iter().enumerate() {
                let def = inst.defs.first().map(|d| d.temp);
                let def_cand = def.is_some_and(|t| cand[t.index()]);
                for (k, op) in inst.operands.iter().enumerate() {
                    match op.value {
                        Value::Const(_) => {}
                        Value::Undef(_) => {
                            if let Some(t) = def.filter(|_| def_cand) {
                                cand[t.index()] = false;
                                dropped = true;
                            }
                        }
                        Value::Temp(s) => {
                            // The definition's operands must be uniform: in the uniform
                            // file, or for a phi, linear (an operation may not define a
                            // uniform-file value from a per-lane register).
                            let s_uniform =
                                is_uniform_file(func, s) || (linear[s.index()] && inst.op.is_phi());
                            if def_cand && !s_uniform && !cand[s.index()] {
                                cand[def.expect("candidate").index()] = false;
                                dropped = true;
                            }
                            if !cand[s.index()] {
                                continue;
                            }
                            // The read of candidate `s` must allow a uniform value here.
                            let reader_ok = if inst.op.is_phi() {
                                def_cand
                            } else {
                                (def_cand
                                    || matches!(inst.op, Opcode::If | Opcode::Output)
                                    || pure_scalar(inst))
                                    && is_free_operand(inst, k)
                            };
                            let at = if inst.op.is_phi() {
                                cfg.logical.preds[b.index()][k]
                            } else {
                                b
                            };
                            let Some((db, di)) = sites[s.index()] else {
                                continue;
                            };
                            let dominated =
                                dom.1.dominates(db, at) && (db != at || di < i || inst.op.is_phi());
                            let leaves = cfg
                                .enclosing_loops(db)
                                .any(|l| cfg.loops[l].divergent && !cfg.loops[l].contains(at));
                            if !reader_ok || !dominated || leaves {
                                cand[s.index()] = false;
                                dropped = true;
                            }
                        }
                    }
                }
            }
        }
        if !dropped {
            break;
        }
    }
    if !cand.iter().any(|&c| c) {
        return Ok(Changed::Nothing);
    }
    // The rules between instructions hold by the fixpoint: definitions dominate their reads in
    // the linear CFG, none leaves a divergent loop, phis become linear only where the logical
    // and linear predecessors agree. Those of each instruction alone (a target's constraints on
    // an operation's classes) are the verifier's: where an instruction that defines or reads a
    // candidate breaks one, nothing moves.
    let old = func.temps[..n].to_vec();
    for (t, c) in cand.iter().enumerate() {
        if *c {
            func.temps[t] = uclass;
        }
    }
    for block in &mut func.blocks {
        for inst in &mut block.insts {
            if inst.op == Opcode::Phi && cand[inst.defs[0].temp.index()] {
                inst.op = Opcode::LinearPhi;
            }
        }
    }
    let touches = |inst: &Inst| {
        inst.defs.iter().any(|d| cand[d.temp.index()])
            || inst
                .operands
                .iter()
                .any(|o| o.temp_id().is_some_and(|t| cand[t.index()]))
    };
    let broken = func.block_ids().any(|b| {
        let insts = &func.block(b).insts;
        (0..insts.len()).any(|i| touches(&insts[i]) && kiln_ir::verify_inst(func, b, i).is_err())
    });
    if broken {
        func.temps[..n].copy_from_slice(&old);
        for block in &mut func.blocks {
            for inst in &mut block.insts {
                if inst.op == Opcode::LinearPhi && cand[inst.defs[0].temp.index()] {
                    inst.op = Opcode::Phi;
                }
            }
        }
        return Ok(Changed::Nothing);
    }
    Ok(Changed::Instructions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_interp::{Env, compare};
    use kiln_ir::{parse_function, print_function};

    #[test]
    fn a_uniform_loop_counter_becomes_uniform() {
        let src = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:v1 = mov %1
    loop bb1, bb4
bb1:
    %3:v1 = phi 0, %5
    %4:v1 = phi %0, %6
    %7:v1 = ilt %3, 4
    if.uniform %7, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    %5:v1 = iadd %3, %2
    %6:v1 = fadd %4, 1.0
    continue bb1
bb4:
    output 0, %4
    output 1, %3
    return
}
";
        let before = parse_function(src).unwrap();
        kiln_ir::verify(&before).unwrap();
        let mut cx = Context::new(before.clone());
        assert_eq!(
            cx.run("uniformize", uniformize).unwrap(),
            Changed::Instructions
        );
        let after = cx.into_func();
        let text = print_function(&after);
        // The counter, its increment and the copy of the uniform go uniform; the per-lane
        // accumulator stays.
        for want in [
            "%3:s1 = linear_phi 0, %5",
            "%5:s1 = iadd",
            "%2:s1 = mov %1",
            "%7:s1 = ilt",
            "%4:v1 = phi",
        ] {
            assert!(text.contains(want), "{want}: {text}");
        }
        for seed in 0..3 {
            let mut env = Env::for_function(&before, 16, seed);
            env.uniforms.insert(0, 1 + seed as u32);
            compare(&before, &after, &env).unwrap();
        }
        // In a divergent loop lanes leave at different iterations: the counter read after the
        // loop differs per lane and stays per-lane (and so does what it is computed from).
        let div = src.replace("if.uniform %7", "if.divergent %7");
        let mut cx = Context::new(parse_function(&div).unwrap());
        cx.run("uniformize", uniformize).unwrap();
        let text = print_function(cx.func());
        assert!(text.contains("%3:v1 = phi 0, %5"), "{text}");
        assert!(text.contains("%5:v1 = iadd"), "{text}");
    }

    #[test]
    fn a_target_constraint_on_a_candidate_moves_nothing() {
        // `sfu_rcp` defines a per-lane value only: the chain to it may not move, and the
        // copy before it would be read per-lane, so the function stays as it is.
        let src = "target generic(v=16, s=8)
function @f {
bb0:
    %0:s1 = uniform 0
    %1:v1 = mov %0
    %2:v1 = sfu_rcp %1
    %3:v1 = fadd %1, 1.0
    output 0, %2
    output 1, %3
    return
}
";
        let before = parse_function(src).unwrap();
        kiln_ir::verify(&before).unwrap();
        let mut cx = Context::new(before.clone());
        assert_eq!(cx.run("uniformize", uniformize).unwrap(), Changed::Nothing);
        assert_eq!(cx.func().temps, before.temps);
        assert_eq!(print_function(cx.func()), print_function(&before));
        kiln_ir::verify(cx.func()).unwrap();
        // Without the constrained read the copy and the sum move.
        let free = src.replace("sfu_rcp %1", "fadd %1, 2.0");
        let mut cx = Context::new(parse_function(&free).unwrap());
        assert_eq!(
            cx.run("uniformize", uniformize).unwrap(),
            Changed::Instructions
        );
        let text = print_function(cx.func());
        assert!(text.contains("%1:s1 = mov %0"), "{text}");
    }
}
