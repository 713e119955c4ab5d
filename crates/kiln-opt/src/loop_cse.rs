//! Identical loops computed once: value numbering lifted from instructions to whole loops. Two
//! loops of the same enclosing loop, the first ending before the second begins, whose blocks
//! hold the same instructions on the same values from before them, compute the same values; the
//! second's results are read from the first, and `cfg_clean` removes it as a dead loop.
//! Inlining makes such loops: a pure function called several times with the same arguments
//! (Perlin noise per colour channel). NIR reaches the same code by unrolling and `nir_opt_cse`
//! where the loop is small enough to unroll; this needs no unrolling. Design: docs/middle.md.

use crate::util::{Avail, reads_other_lanes, substitute};
use kiln_analysis::{Changed, Context, PassError};
use kiln_ir::{Block, Cfg, Function, LoopInfo, OperandFlags, Temp, Value};

/// Reads the results of every loop that repeats an earlier one from that earlier loop.
pub fn loop_cse(cx: &mut Context) -> Result<Changed, PassError> {
    let cfg = cx.cfg()?;
    // A loop repeats an earlier one: it takes two.
    if cfg.loops.len() < 2 {
        return Ok(Changed::Nothing);
    }
    let dom = cx.dominance()?;
    let facts = cx.def_sites();
    let func = cx.func_mut();
    let avail = Avail::with(facts.clone(), &cfg, &dom);
    let sites = &facts.sites;
    let size = |l: &LoopInfo| {
        let insts: usize = (l.header.0..l.exit.0)
            .map(|b| func.block(Block(b)).insts.len())
            .sum();
        (l.parent, l.exit.0 - l.header.0, insts)
    };
    let sizes: Vec<_> = cfg.loops.iter().map(size).collect();
    let mut subst: Vec<Option<Value>> = vec![None; func.temps.len()];
    // The region of the loop whose results a temp's uses stop reading.
    let mut replaced_in: Vec<Option<std::ops::Range<u32>>> = vec![None; func.temps.len()];
    let mut repeats = vec![false; cfg.loops.len()];
    // Each loop is compared with the earlier loops of its size and parent: a mismatch shows
    // within the first instructions, and a shader has few loops of one size. A loop that
    // repeats one that repeats another reads the first's values (`substitute` follows chains).
    for j in 0..cfg.loops.len() {
        for i in (0..j).filter(|&i| sizes[i] == sizes[j]) {
            let Some(map) = same_loop(func, &cfg, &dom, &avail, sites, i, j) else {
                continue;
            };
            let lj = &cfg.loops[j];
            for (d, x) in map {
                subst[d.index()] = Some(Value::Temp(x));
                replaced_in[d.index()] = Some(lj.header.0..lj.exit.0);
            }
            repeats[j] = true;
            break;
        }
    }
    if !repeats.contains(&true) {
        return Ok(Changed::Nothing);
    }
    // Uses inside the repeating loop keep its own values (it goes as a whole).
    let changed = substitute(func, &subst, |f, b, i, k, _| {
        let old = f.block(b).insts[i].operands[k].value;
        let Value::Temp(t) = old else { return false };
        replaced_in[t.index()]
            .as_ref()
            .is_some_and(|r| !r.contains(&b.0))
    });
    Ok(if changed > 0 {
        Changed::Instructions
    } else {
        Changed::Nothing
    })
}

/// Whether loop `j` repeats loop `i`: `i`'s exit dominates `j`'s preheader in both CFGs (and is
/// that preheader when `j` reads other lanes), both are left only for their exits (no phis
/// there), nothing in `j` has a side effect, and block by
/// block their instructions are the same — operation, flags, immediates, classes and
/// constraints, targets at the same place in the loop, operands the same constants or the same
/// values from before the loops or values defined at the same place in each. Returns, for every
/// value of `j` read after it, the value of `i` to read instead (each reaches `i`'s exit, so it
/// reaches every reader of `j`'s).
fn same_loop(
    func: &Function,
    cfg: &Cfg,
    dom: &(kiln_ir::DomTree, kiln_ir::DomTree),
    avail: &Avail,
    sites: &[Option<(Block, usize)>],
    i: usize,
    j: usize,
) -> Option<Vec<(Temp, Temp)>> {
    let (li, lj) = (&cfg.loops[i], &cfg.loops[j]);
    if !(dom.0.dominates(li.exit, lj.preheader) && dom.1.dominates(li.exit, lj.preheader))
        || func.block(li.exit).phi_count() > 0
        || func.block(lj.exit).phi_count() > 0
    {
        return None;
    }
    // What reads other lanes gives the same only where the same lanes run: `j` starts in the
    // block `i` leaves for, which nothing in it stops (a `discard`).
    let body = |l: &LoopInfo| (l.header.0..l.exit.0).flat_map(|b| &func.block(Block(b)).insts);
    if body(lj).any(reads_other_lanes)
        && (li.exit != lj.preheader
            || func
                .block(li.exit)
                .insts
                .iter()
                .any(|i| !i.op.is_terminator() && i.op.info().side_effects))
    {
        return None;
    }
    let inside = |l: &LoopInfo, t: Temp| {
        sites
            .get(t.index())
            .copied()
            .flatten()
            .is_some_and(|(b, _)| l.contains(b))
    };
    // The block of `j` at the place of `i`'s block `t`, or `j`'s exit for `i`'s.
    let place = |t: Block| {
        if li.contains(t) {
            Some(Block(t.0 - li.header.0 + lj.header.0))
        } else if t == li.exit {
            Some(lj.exit)
        } else {
            None
        }
    };
    let mut map: Vec<(Temp, Temp)> = Vec::new();
    let pairs = (li.header.0..li.exit.0).map(|b| {
        let (bi, bj) = (Block(b), Block(b - li.header.0 + lj.header.0));
        (func.block(bi), func.block(bj))
    });
    // Definitions first (a header's phis read values defined later in the loop).
    for (bi, bj) in pairs.clone() {
        if bi.insts.len() != bj.insts.len() {
            return None;
        }
        for (x, y) in bi.insts.iter().zip(&bj.insts) {
            let info = y.op.info();
            let effect = if info.terminator {
                y.op == kiln_ir::Opcode::Return
            } else {
                info.side_effects
            };
            if effect
                || x.op != y.op
                || x.flags != y.flags
                || x.imms != y.imms
                || x.defs.len() != y.defs.len()
                || x.operands.len() != y.operands.len()
                || x.targets.len() != y.targets.len()
                || x.targets
                    .iter()
                    .zip(&y.targets)
                    .any(|(&a, &b)| place(a) != Some(b))
            {
                return None;
            }
            for (dx, dy) in x.defs.iter().zip(&y.defs) {
                if func.class(dx.temp) != func.class(dy.temp)
                    || dx.fixed != dy.fixed
                    || dx.tied != dy.tied
                {
                    return None;
                }
                map.push((dy.temp, dx.temp));
            }
        }
    }
    map.sort_unstable();
    let image = |t: Temp| {
        map.binary_search_by_key(&t, |&(d, _)| d)
            .ok()
            .map(|k| map[k].1)
    };
    let liveness_flags = OperandFlags::KILL | OperandFlags::FIRST_KILL | OperandFlags::COPY_KILL;
    let structural = |f: OperandFlags| {
        let mut f = f;
        f.set(liveness_flags, false);
        f
    };
    for (bi, bj) in pairs {
        for (x, y) in bi.insts.iter().zip(&bj.insts) {
            for (ox, oy) in x.operands.iter().zip(&y.operands) {
                if ox.fixed != oy.fixed || structural(ox.flags) != structural(oy.flags) {
                    return None;
                }
                let same = match (ox.value, oy.value) {
                    (Value::Temp(a), Value::Temp(b)) if inside(lj, b) => image(b) == Some(a),
                    (Value::Temp(a), Value::Temp(b)) => a == b && !inside(li, a),
                    (a, b) => a == b,
                };
                if !same {
                    return None;
                }
            }
        }
    }
    // The values of `j` read after it, each with a value of `i` that reaches them.
    let mut read_after = vec![false; func.temps.len()];
    for b in (0..func.blocks.len() as u32).filter(|&b| !lj.contains(Block(b))) {
        for t in func
            .block(Block(b))
            .insts
            .iter()
            .flat_map(|i| i.used_temps())
        {
            read_after[t.index()] = true;
        }
    }
    let mut results = Vec::new();
    for &(d, x) in &map {
        if read_after[d.index()] {
            if !avail.reaches(x, li.exit) {
                return None;
            }
            results.push((d, x));
        }
    }
    Some(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::testing::agrees_on_16_lanes;
    use kiln_ir::{parse_function, print_function};

    /// Two loops of one shape on the same values, read after both, with a derivative in each
    /// when `deriv`; lanes 0–15 run 1–4 iterations.
    fn two_loops(deriv: bool) -> String {
        let d = |t: &str, x: &str| {
            if deriv {
                format!("    {t}:v1 = fddx {x}\n")
            } else {
                String::new()
            }
        };
        format!(
            "target generic(v=16, s=8)
function @f {{
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %9:v1 = f2i %0
    loop bb1, bb4
bb1:
    %2:v1 = phi 0, %5
    %3:v1 = phi %0, %6
    %5:v1 = iadd %2, 1
{}    %6:v1 = fmul %3, %1
    %7:v1 = ult %9, %5
    if.divergent %7, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    continue bb1
bb4:
    loop bb5, bb8
bb5:
    %12:v1 = phi 0, %15
    %13:v1 = phi %0, %16
    %15:v1 = iadd %12, 1
{}    %16:v1 = fmul %13, %1
    %17:v1 = ult %9, %15
    if.divergent %17, bb6, bb7, bb7
bb6:
    break bb8
bb7:
    continue bb5
bb8:
    %20:v1 = fadd %3, %13
    output 0, %20
    output 1, %12
    return
}}
",
            d("%10", "%3"),
            d("%18", "%13")
        )
    }

    fn run(src: &str) -> (kiln_ir::Function, kiln_ir::Function) {
        let before = parse_function(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let mut cx = Context::new(before.clone());
        cx.run("loop_cse", loop_cse).unwrap();
        crate::run_passes(&mut cx, &["cfg_clean"]).unwrap();
        (before, cx.into_func())
    }

    fn loops(f: &kiln_ir::Function) -> usize {
        print_function(f).matches("    loop ").count()
    }

    #[test]
    fn a_repeated_loop_goes() {
        for deriv in [false, true] {
            let (before, after) = run(&two_loops(deriv));
            let text = print_function(&after);
            assert_eq!(loops(&after), 1, "{text}");
            assert!(text.contains("fadd %3, %3"), "{text}");
            assert!(text.contains("output 1, %2"), "{text}");
            agrees_on_16_lanes(&before, &after, 0.25, 4);
        }
    }

    /// A different constant, a different value from before the loops, or a side effect in the
    /// second loop keeps it.
    #[test]
    fn different_loops_stay() {
        let base = two_loops(false);
        for (from, to) in [
            ("%15:v1 = iadd %12, 1", "%15:v1 = iadd %12, 2"),
            ("%16:v1 = fmul %13, %1", "%16:v1 = fmul %13, %9"),
            (
                "bb7:\n    continue",
                "bb7:\n    output 2, %16\n    continue",
            ),
            ("%13:v1 = phi %0, %16", "%13:v1 = phi %9, %16"),
        ] {
            assert!(base.contains(from), "{from}");
            let (before, after) = run(&base.replace(from, to));
            assert_eq!(
                loops(&after),
                2,
                "{from} → {to}\n{}",
                print_function(&after)
            );
            agrees_on_16_lanes(&before, &after, 0.25, 4);
        }
    }

    /// A loop that reads other lanes and runs in fewer lanes than the first (the then side of
    /// a divergent if) stays; without the derivatives it goes.
    #[test]
    fn other_lanes_only_where_the_same_lanes_run() {
        for deriv in [false, true] {
            let src = two_loops(deriv)
                .replace(
                    "bb4:\n    loop bb5, bb8",
                    "bb4:\n    %30:v1 = flt %0, 2.0\n    if.divergent %30, bb9, bb14, bb14\nbb9:\n    loop bb5, bb8",
                )
                .replace(
                    "bb8:\n    %20:v1 = fadd %3, %13\n    output 0, %20\n    output 1, %12\n    return",
                    "bb8:\n    %20:v1 = fadd %3, %13\n    output 0, %20\n    output 1, %12\n    jump bb14\nbb14:\n    return",
                );
            // Blocks are numbered in layout order: renumber the inserted ones.
            let src = src
                .replace("bb5", "bb10")
                .replace("bb6", "bb11")
                .replace("bb7", "bb12")
                .replace("bb8", "bb13")
                .replace("bb9", "bb5")
                .replace("bb10", "bb6")
                .replace("bb11", "bb7")
                .replace("bb12", "bb8")
                .replace("bb13", "bb9")
                .replace("bb14", "bb10");
            let (before, after) = run(&src);
            assert_eq!(
                loops(&after),
                if deriv { 2 } else { 1 },
                "{}",
                print_function(&after)
            );
            agrees_on_16_lanes(&before, &after, 0.25, 4);
        }
    }
}
