//! Interference queries against the path oracle: two temps of one file interfere exactly when
//! both are live (or one is being defined) at some point after an instruction, by the path
//! definition of liveness (`oracle/mod.rs`). All-lanes definitions only add interference, and
//! every pair they make beyond that criterion is among `Interference::all_lanes_candidates` and
//! `Interference::all_lanes_neighbours`, which are candidates that interfere.

mod oracle;

use kiln_analysis::interference::all_lanes_neighbours;
use kiln_analysis::{Cfg, Interference, compute_liveness};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Lanes, Temp};
use proptest::prelude::*;
use std::collections::BTreeSet;

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    #[test]
    fn queries_match_the_path_oracle(seed in any::<u64>(), size in 10usize..250) {
        let mut func = generate(&GenConfig { size, ..GenConfig::new(seed) });
        let cfg = Cfg::compute(&func).unwrap();
        let (_, want_out, _) = oracle::oracle(&func, &cfg);
        let lv = compute_liveness(&mut func, &cfg);
        let n = func.temps.len();
        let mut want: BTreeSet<(u32, u32)> = BTreeSet::new();
        for (b, out) in want_out.iter().enumerate() {
            let after = oracle::live_after_each(&func, b, out);
            for (k, inst) in func.blocks[b].insts.iter().enumerate() {
                let mut point: Vec<u32> = after[k].iter().copied().collect();
                point.extend(inst.defs.iter().map(|d| d.temp.0));
                point.sort_unstable();
                point.dedup();
                for (i, &x) in point.iter().enumerate() {
                    for &y in &point[i + 1..] {
                        if func.class(Temp(x)).file == func.class(Temp(y)).file {
                            want.insert((x, y));
                        }
                    }
                }
            }
        }
        let files = func.target.files();
        let all_lanes = |t: usize| lv.linear[t] && files[func.temps[t].file.index()].lanes == Lanes::PerLane;
        let inter = Interference::new(&func, &cfg, &lv);
        let candidates = inter.all_lanes_candidates(&func);
        let neighbours = inter.all_lanes_neighbours(&func);
        for x in 0..n {
            if func.temps[x].is_none() { continue; }
            for y in x + 1..n {
                if func.temps[y].is_none() { continue; }
                let got = inter.interferes(&func, Temp(x as u32), Temp(y as u32));
                prop_assert_eq!(got, inter.interferes(&func, Temp(y as u32), Temp(x as u32)), "symmetric");
                let expect = want.contains(&(x as u32, y as u32));
                let candidate = candidates[x].binary_search(&(y as u32)).is_ok();
                let neighbour = neighbours[x].binary_search(&(y as u32)).is_ok();
                prop_assert!(!neighbour || (candidate && got), "%{} %{}: a neighbour is a candidate that interferes", x, y);
                prop_assert_eq!(neighbours[y].binary_search(&(x as u32)).is_ok(), neighbour, "%{} %{}: neighbours are symmetric", y, x);
                if all_lanes(x) || all_lanes(y) {
                    prop_assert!(got || !expect, "%{} %{}: all-lanes interference must include the SSA one", x, y);
                    let beyond = got && !expect;
                    prop_assert!(!beyond || candidates[x].binary_search(&(y as u32)).is_ok(), "%{} %{}: interfere, not a candidate", x, y);
                    prop_assert!(!beyond || candidates[y].binary_search(&(x as u32)).is_ok(), "%{} %{}: interfere, not a candidate", y, x);
                    prop_assert!(!beyond || neighbour, "%{} %{}: interfere beyond the SSA criterion, not a neighbour", x, y);
                } else {
                    prop_assert_eq!(got, expect, "%{} and %{}", x, y);
                }
            }
        }
    }
}

/// `all_lanes_neighbours` answers without the queries where the two CFGs are one and nothing
/// leaves a divergent loop; elsewhere and there, it gives what the queries confirm of the
/// candidates (each from a liveness of its own, so neither reads the other's cache). Programs
/// with uniform control flow and all-lanes writes take the shortcut; so do some of these.
#[test]
fn all_lanes_neighbours_match_the_confirmed_candidates() {
    let (mut shortcut, mut full) = (0, 0);
    for seed in 0..300u64 {
        let config = GenConfig {
            size: 40 + (seed as usize % 5) * 30,
            ..GenConfig::new(seed)
        };
        let mut func = generate(&config);
        let cfg = Cfg::compute(&func).unwrap();
        let lv = compute_liveness(&mut func, &cfg);
        let own = compute_liveness(&mut func.clone(), &cfg);
        let confirmed = Interference::new(&func, &cfg, &own).all_lanes_neighbours(&func);
        assert_eq!(
            all_lanes_neighbours(&func, &cfg, &lv),
            confirmed,
            "seed {seed}"
        );
        let files = func.target.files();
        let all_lanes = (0..func.temps.len())
            .any(|t| lv.linear[t] && files[func.temps[t].file.index()].lanes == Lanes::PerLane);
        if cfg.logical.succs == cfg.linear.succs {
            shortcut += all_lanes as usize;
        } else {
            full += confirmed.iter().any(|n| !n.is_empty()) as usize;
        }
    }
    assert!(
        shortcut > 0 && full > 0,
        "{shortcut} by the shortcut, {full} found by the queries"
    );
}

/// docs/ir.md's note: a per-lane value flowing into the endif from the then side is not live in
/// the else region, but an all-lanes write there would overwrite the then lanes' copy.
#[test]
fn all_lanes_write_in_else_interferes_with_then_value() {
    let mut func = kiln_ir::parse_function(
        "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:v1 = flt %1, %0
    if.divergent %2, bb1, bb2, bb3
bb1:
    %3:v1 = fadd %0, 1.0
    jump bb3
bb2:
    %4:v1 = mov.all_lanes %1
    %5:v1 = fadd %4, %0
    jump bb3
bb3:
    %6:v1 = phi %3, %5
    output 0, %6
    return
}
",
    )
    .unwrap();
    let cfg = Cfg::compute(&func).unwrap();
    let lv = compute_liveness(&mut func, &cfg);
    let inter = Interference::new(&func, &cfg, &lv);
    // Not by liveness: %3 is not live in the else region.
    assert!(!lv.live_in[2].contains(Temp(3)));
    assert!(inter.interferes(&func, Temp(3), Temp(4)));
    // Masked writes do not clobber the then lanes.
    assert!(!inter.interferes(&func, Temp(3), Temp(5)));
}
