//! The differential test can catch interference bugs: on the reference assignment, give one temp
//! the register of another and run in SIMT mode.
//!
//! - Merging two temps that interfere (by `kiln_analysis::Interference`) must change the output
//!   in most cases: the interpreter sees the clobber. (Not always: the two values may agree, or
//!   the clobbered one may not reach an output.)
//! - Merging two temps that do not interfere must never change it: what interference calls safe
//!   is safe on the SIMT machine, masked writes, all-lanes writes and seed 003 included.

use kiln_analysis::{Cfg, Interference, compute_liveness};
use kiln_interp::out_of_ssa::reference_assignment;
use kiln_interp::{Env, compare, run_ssa};
use kiln_ir::generate::{GenConfig, Rng, generate};
use kiln_ir::{Function, PhysReg, Temp, print_function};

/// `alloc` with every definition and read of `victim` moved to `into`'s register.
fn merge(alloc: &Function, victim: Temp, into: Temp) -> Function {
    let reg_of = |t: Temp| -> Option<PhysReg> {
        alloc
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .flat_map(|i| &i.defs)
            .find(|d| d.temp == t)
            .and_then(|d| d.reg)
    };
    let reg = reg_of(into);
    let mut out = alloc.clone();
    for inst in out.blocks.iter_mut().flat_map(|b| &mut b.insts) {
        for d in inst.defs.iter_mut().filter(|d| d.temp == victim) {
            d.reg = reg;
        }
        for op in inst
            .operands
            .iter_mut()
            .filter(|o| o.temp_id() == Some(victim))
        {
            op.reg = reg;
        }
    }
    out
}

/// Temps whose value reaches an output, a branch or a side effect (a backward slice): a clobber
/// of anything else cannot show.
fn observable(func: &Function) -> Vec<bool> {
    let mut def_of = vec![None; func.temps.len()];
    let mut work = Vec::new();
    for (b, block) in func.blocks.iter().enumerate() {
        for (k, inst) in block.insts.iter().enumerate() {
            for d in &inst.defs {
                def_of[d.temp.index()] = Some((b, k));
            }
            if inst.op.info().side_effects || inst.op.is_terminator() {
                work.extend(inst.used_temps());
            }
        }
    }
    let mut seen = vec![false; func.temps.len()];
    while let Some(t) = work.pop() {
        if std::mem::replace(&mut seen[t.index()], true) {
            continue;
        }
        if let Some((b, k)) = def_of[t.index()] {
            work.extend(func.blocks[b].insts[k].used_temps());
        }
    }
    seen
}

/// Candidate temps: defined, one unit, no fixed register (the merge keeps constraints valid),
/// observable.
fn candidates(func: &Function) -> Vec<Temp> {
    let seen = observable(func);
    let mut fixed = vec![false; func.temps.len()];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        for d in inst.defs.iter().filter(|d| d.fixed.is_some()) {
            fixed[d.temp.index()] = true;
        }
        for op in inst.operands.iter().filter(|o| o.fixed.is_some()) {
            if let Some(t) = op.temp_id() {
                fixed[t.index()] = true;
            }
        }
    }
    (0..func.temps.len())
        .filter(|&t| !func.temps[t].is_none() && func.temps[t].size == 1 && !fixed[t] && seen[t])
        .map(|t| Temp(t as u32))
        .collect()
}

#[test]
fn interfering_merges_are_caught_and_safe_ones_agree() {
    let (mut interfering, mut caught, mut safe) = (0, 0, 0);
    for seed in 0..60u64 {
        let mut func = generate(&GenConfig {
            size: 40 + (seed % 120) as usize,
            ..GenConfig::new(seed)
        });
        // A clobbered loop counter would spin to the step limit: keep it low.
        let env = Env {
            step_limit: 20_000,
            ..Env::for_function(&func, 16, seed)
        };
        if run_ssa(&func, &env).is_err() {
            continue;
        }
        let cfg = Cfg::compute(&func).unwrap();
        let lv = compute_liveness(&mut func, &cfg);
        let inter = Interference::new(&func, &cfg, &lv);
        let alloc = reference_assignment(&func).unwrap();
        let temps = candidates(&func);
        let mut rng = Rng::new(seed ^ 0x3e7);
        let (mut want_hit, mut want_safe) = (3, 3);
        for _ in 0..400 {
            if want_hit == 0 && want_safe == 0 || temps.len() < 2 {
                break;
            }
            let a = temps[rng.below(temps.len())];
            let b = temps[rng.below(temps.len())];
            if a == b || func.class(a) != func.class(b) {
                continue;
            }
            let hit = inter.interferes(&func, a, b);
            if hit && want_hit > 0 {
                want_hit -= 1;
                interfering += 1;
                caught += compare(&func, &merge(&alloc, b, a), &env).is_err() as usize;
            } else if !hit && want_safe > 0 {
                want_safe -= 1;
                safe += 1;
                if let Err(m) = compare(&func, &merge(&alloc, b, a), &env) {
                    panic!(
                        "seed {seed}: %{} and %{} do not interfere, yet sharing a register changes the output: {m}\n{}",
                        a.0,
                        b.0,
                        print_function(&func)
                    );
                }
            }
        }
    }
    assert!(safe >= 120, "{safe} non-interfering merges tried");
    assert!(interfering >= 120, "{interfering} interfering merges tried");
    // Measured: about two in three interfering merges change an output (the rest clobber a
    // value with an equal one, or one whose only effect is masked off).
    eprintln!("{caught} of {interfering} interfering merges caught; {safe} safe merges agree");
    assert!(
        caught * 2 >= interfering,
        "only {caught} of {interfering} interfering merges were caught"
    );
}
