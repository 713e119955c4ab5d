//! Class narrowing and register choice on vc4, on corpus shaders lowered, optimised,
//! selected and narrowed (`narrow_classes`, r4 allowed): the r4 rules hold against liveness by definition
//! (and `kiln_analysis::Interference`, tested against a path oracle, agrees), and the graph-colouring
//! allocator with the vc4 pick (r4 first, accumulators, A/B interleaved) allocates them
//! within the narrowed classes, checked.

use kiln::pipeline::Options;
use kiln_analysis::{Interference, compute_liveness};
use kiln_ir::{Cfg, Function, Temp};
use kiln_regalloc::{Allocator, RaOptions, allocate};
use kiln_vc4::isel::select;
use kiln_vc4::narrow::{narrow_classes, writes_r4};
use kiln_vc4::target::{A0, B0, R4};
use std::path::Path;

/// Selected vc4 functions of the first `files` corpus files that select.
fn selected(files: usize) -> Vec<(String, Function)> {
    let fronts = kiln::corpus::fronts(
        Path::new("../shared/corpus"),
        Some(files),
        &Options::default(),
    )
    .unwrap();
    let mut out = Vec::new();
    for (name, front) in fronts {
        let Ok(front) = front else { continue };
        let mut func = front.generic;
        if select(&mut func).is_ok() {
            narrow_classes(&mut func);
            out.push((name, func));
        }
    }
    out
}

fn may_use_r4(func: &Function, t: Temp) -> bool {
    let target = func.target.clone();
    target
        .check_reg(
            kiln_ir::PhysReg::new(kiln_vc4::target::Q, R4),
            func.class(t),
        )
        .is_ok()
}

#[test]
fn r4_only_for_r4_writers_not_live_across_another() {
    let funcs = selected(400);
    assert!(funcs.len() > 50, "{} functions selected", funcs.len());
    let (mut r4_values, mut sfu) = (0, 0);
    for (name, mut func) in funcs {
        let cfg = Cfg::compute(&func).unwrap();
        let lv = compute_liveness(&mut func, &cfg);
        let inter = Interference::new(&func, &cfg, &lv);
        let dom = kiln_analysis::DomTree::compute(&cfg.logical);
        let mut def_at = vec![(kiln_ir::Block(0), 0); func.temps.len()];
        for b in func.block_ids() {
            for (k, inst) in func.block(b).insts.iter().enumerate() {
                for d in &inst.defs {
                    def_at[d.temp.index()] = (b, k);
                }
            }
        }
        // In SSA, of two interfering values the one defined first lives across the other's
        // definition.
        let before = |t: Temp, w: Temp| {
            let ((bt, kt), (bw, kw)) = (def_at[t.index()], def_at[w.index()]);
            if bt == bw {
                kt < kw
            } else {
                dom.dominates(bt, bw)
            }
        };
        let mut writers = Vec::new();
        for inst in func.blocks.iter().flat_map(|b| &b.insts) {
            for d in &inst.defs {
                let allowed = may_use_r4(&func, d.temp);
                assert!(
                    !allowed || writes_r4(inst),
                    "{name}: {} may sit in r4 but `{}` does not write r4",
                    d.temp,
                    inst.op
                );
                r4_values += allowed as usize;
            }
            if writes_r4(inst) {
                writers.push(inst.defs[0].temp);
            }
        }
        sfu += writers.len();
        // Live right after w's instruction: live out of its block, or read later in it. (Of two
        // interfering values the one defined first is not always live there: seed 003 extends a
        // value leaving a loop over the whole loop, before its definition.)
        let live_after = |t: Temp, w: Temp| {
            let (bw, kw) = def_at[w.index()];
            lv.live_out[bw.index()].contains(t)
                || func.block(bw).insts[kw + 1..]
                    .iter()
                    .any(|i| i.used_temps().any(|u| u == t))
        };
        for t in (0..func.temps.len()).map(Temp::new) {
            if func.class(t).is_none() || !may_use_r4(&func, t) {
                continue;
            }
            for &w in writers.iter().filter(|&&w| w != t) {
                let across = before(t, w) && live_after(t, w);
                assert!(
                    !across || inter.interferes(&func, t, w),
                    "{name}: {t} lives across {w} but the interference misses it"
                );
                assert!(
                    !across,
                    "{name}: {t} may sit in r4 but lives across the r4 write of {w}"
                );
            }
        }
    }
    assert!(
        sfu > 0 && r4_values > 0,
        "{sfu} r4 writers, {r4_values} r4 values"
    );
}

#[test]
fn graph_allocation_takes_r4_accumulators_and_both_files() {
    let (mut in_r4, mut acc, mut a, mut b) = (0, 0, 0, 0);
    for (name, func) in selected(200) {
        for allocator in [Allocator::Graph, Allocator::Ssa] {
            let mut alloc = func.clone();
            let options = RaOptions {
                allocator,
                check: true,
                ..RaOptions::default()
            };
            allocate(&mut alloc, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
            if allocator == Allocator::Ssa {
                continue;
            }
            for inst in alloc.blocks.iter().flat_map(|b| &b.insts) {
                for r in inst.defs.iter().filter_map(|d| d.reg) {
                    match r.unit() {
                        R4 => in_r4 += 1,
                        0..R4 => acc += 1,
                        u if (A0..B0).contains(&u) => a += 1,
                        _ => b += 1,
                    }
                }
            }
        }
    }
    // Mesa's pick: every SFU result that may stay in r4 does; short values use accumulators;
    // the rest spread over both files.
    assert!(
        in_r4 > 0 && acc > 0 && a > 0 && b > 0,
        "{in_r4} {acc} {a} {b}"
    );
}
