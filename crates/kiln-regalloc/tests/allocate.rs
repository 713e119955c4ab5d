//! The SSA allocator on generated programs: every allocation passes the checker, and the
//! allocated program run in SIMT mode gives the SSA program's outputs bit for bit.

use kiln_interp::{Env, compare};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Function, print_function, verify};
use kiln_regalloc::{RaOptions, allocate};

fn allocate_and_run(seed: u64, func: &Function, options: &RaOptions) -> Result<(), String> {
    let mut alloc = func.clone();
    let stats = allocate(&mut alloc, options).map_err(|e| {
        // The unchecked allocation, to see what the checker rejected.
        let mut unchecked = func.clone();
        let shown = match allocate(
            &mut unchecked,
            &RaOptions {
                check: false,
                ..options.clone()
            },
        ) {
            Ok(_) => print_function(&unchecked),
            Err(_) => String::new(),
        };
        format!(
            "seed {seed}: {e}\n{}\n--- allocated\n{shown}",
            print_function(func)
        )
    })?;
    if let Err(errs) = verify(&alloc) {
        return Err(format!(
            "seed {seed}: allocated form does not verify: {}\n{}",
            errs[0],
            print_function(&alloc)
        ));
    }
    let env = Env::for_function(func, 16, seed ^ 0x5eed);
    compare(func, &alloc, &env).map_err(|m| {
        format!(
            "seed {seed}: {m}\n{}\n--- allocated\n{}",
            print_function(func),
            print_function(&alloc)
        )
    })?;
    let _ = stats;
    Ok(())
}

/// The failures, each in full when one seed is examined (`KILN_SEED`), else its first lines.
fn report(failures: &[String], only: Option<u64>) -> String {
    let lines: Vec<String> = failures
        .iter()
        .map(|f| {
            if only.is_some() {
                f.clone()
            } else {
                f.lines().take(3).collect::<Vec<_>>().join(" | ")
            }
        })
        .collect();
    format!("{} failed:\n{}", failures.len(), lines.join("\n"))
}

#[test]
fn generated_programs_allocate_and_agree() {
    let options = RaOptions {
        check: true,
        ..RaOptions::default()
    };
    let mut failures = Vec::new();
    let only: Option<u64> = std::env::var("KILN_SEED").ok().and_then(|s| s.parse().ok());
    for seed in (0..300u64).filter(|s| only.is_none_or(|o| o == *s)) {
        let cfg = if seed % 4 == 0 {
            GenConfig::high_pressure(seed)
        } else {
            GenConfig {
                size: 20 + (seed % 150) as usize,
                ..GenConfig::new(seed)
            }
        };
        let func = generate(&cfg);
        if let Err(e) = allocate_and_run(seed, &func, &options) {
            failures.push(e);
        }
    }
    if !failures.is_empty() {
        let heads: Vec<String> = failures
            .iter()
            .map(|f| f.lines().take(3).collect::<Vec<_>>().join(" | "))
            .collect();
        panic!(
            "{} of 300 failed:\n{}\nfirst:\n{}",
            failures.len(),
            heads.join("\n"),
            if only.is_some() { &failures[0] } else { "" }
        );
    }
}

/// With the budget at exactly the maximum demand nothing needs spilling, and the allocation
/// never fails; for scalar programs without constraints it uses exactly the maximum demand
/// (Hack et al. 2006: dominance-order colouring of a chordal graph).
#[test]
fn budget_at_max_demand_suffices() {
    let mut failures = Vec::new();
    let mut unplaced = Vec::new();
    let mut exact = 0;
    let only: Option<u64> = std::env::var("KILN_SEED").ok().and_then(|s| s.parse().ok());
    for seed in (0..200u64).filter(|s| only.is_none_or(|o| o == *s)) {
        let scalar = seed % 2 == 0;
        let cfg = GenConfig {
            size: 30 + (seed % 120) as usize,
            pressure: 8 + (seed % 40) as usize,
            vectors: !scalar,
            constraints: !scalar,
            all_lanes: !scalar,
            ..GenConfig::new(seed)
        };
        let func = generate(&cfg);
        let mut probe = func.clone();
        let Ok(stats) = allocate(&mut probe, &RaOptions::default()) else {
            failures.push(format!("seed {seed}: fails with the whole file"));
            continue;
        };
        let options = RaOptions {
            budget: stats.max_demand.iter().map(|&d| Some(d.max(1))).collect(),
            check: true,
            ..RaOptions::default()
        };
        match allocate_and_run(seed, &func, &options) {
            // Vectors at a budget of exactly the demand can find every aligned block broken up
            // by values living across blocks, which the assignment splits only inside a block
            // (docs/regalloc.md): counted, none expected.
            Err(e) if !scalar && e.contains("over budget") => unplaced.push(e),
            Err(e) => failures.push(e),
            Ok(()) if scalar => {
                let mut f = func.clone();
                let s = allocate(&mut f, &options).expect("allocated above");
                let used: Vec<u32> = s.registers_used.clone();
                if used != s.max_demand {
                    failures.push(format!(
                        "seed {seed}: scalar program uses {used:?} registers, its maximum demand is {:?}",
                        s.max_demand
                    ));
                } else {
                    exact += 1;
                }
            }
            Ok(()) => {}
        }
    }
    assert!(failures.is_empty(), "{}", report(&failures, only));
    assert!(only.is_some() || exact == 100, "{exact} exact");
    eprintln!(
        "{} of 100 vector programs unplaced at their demand",
        unplaced.len()
    );
    assert!(unplaced.is_empty(), "{unplaced:?}");
}

/// Budgets below the maximum demand: the spiller brings the demand down, the assignment and
/// the checker go on, and the SIMT run agrees; at the tightest budgets nearly everything is
/// spilled.
#[test]
fn spilling_budgets_allocate_and_agree() {
    let only: Option<u64> = std::env::var("KILN_SEED").ok().and_then(|s| s.parse().ok());
    let mut failures = Vec::new();
    let (mut spilled, mut spills) = (0, 0);
    for seed in (0..240u64).filter(|s| only.is_none_or(|o| o == *s)) {
        let cfg = if seed % 3 == 0 {
            GenConfig::high_pressure(seed)
        } else {
            GenConfig {
                size: 30 + (seed % 120) as usize,
                ..GenConfig::new(seed)
            }
        };
        let func = generate(&cfg);
        let mut probe = func.clone();
        let Ok(stats) = allocate(&mut probe, &RaOptions::default()) else {
            failures.push(format!("seed {seed}: fails with the whole file"));
            continue;
        };
        // From half the demand down to a few units (at least what one instruction reads
        // and writes: vectors of four, texture coordinates, an all-lanes copy).
        let budget: Vec<Option<u32>> = stats
            .max_demand
            .iter()
            .map(|&d| {
                Some(match seed % 4 {
                    0 => (d / 2).max(12),
                    1 => (d * 3 / 4).max(12),
                    2 => 12,
                    _ => (d.saturating_sub(2)).max(12),
                })
            })
            .collect();
        let options = RaOptions {
            budget,
            check: true,
            ..RaOptions::default()
        };
        let mut alloc = func.clone();
        match allocate(&mut alloc, &options) {
            Ok(s) => {
                if s.spills + s.remats > 0 {
                    spilled += 1;
                    spills += s.spills;
                }
                for (f, (&used, b)) in s.registers_used.iter().zip(&options.budget).enumerate() {
                    if used > b.unwrap_or(u32::MAX) {
                        failures.push(format!("seed {seed}: file {f} uses {used} registers"));
                    }
                }
                if let Err(e) = allocate_and_run(seed, &func, &options) {
                    failures.push(e);
                }
            }
            Err(kiln_regalloc::RaError::Budget { .. }) => {}
            Err(e) => failures.push(format!("seed {seed}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", report(&failures, only));
    eprintln!("{spilled} programs spilled, {spills} spills");
    assert!(
        only.is_some() || spilled > 100,
        "only {spilled} programs spilled"
    );
}

/// Many small programs, every feature on, at budgets from roomy to tight (several lane counts):
/// with the other tests of this file, over 5,000 allocations checked and run per CI run.
#[test]
fn many_small_programs() {
    let mut failures = Vec::new();
    for seed in 1000..5400u64 {
        let cfg = GenConfig {
            size: 10 + (seed % 50) as usize,
            pressure: 4 + (seed % 24) as usize,
            ..GenConfig::new(seed)
        };
        let func = generate(&cfg);
        let v = [256, 32, 16, 12][(seed % 4) as usize];
        let options = RaOptions {
            budget: vec![Some(v), Some(v / 2)],
            check: true,
            ..RaOptions::default()
        };
        let mut alloc = func.clone();
        match allocate(&mut alloc, &options) {
            Ok(_) => {
                let env = Env::for_function(&func, [1, 4, 16, 32][(seed / 4 % 4) as usize], seed);
                if let Err(m) = compare(&func, &alloc, &env) {
                    failures.push(format!("seed {seed}: {m}"));
                }
            }
            Err(kiln_regalloc::RaError::Budget { .. }) => {}
            Err(e) => failures.push(format!("seed {seed}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The graph-colouring allocator behind the same interface on `count` generated programs from
/// `first`: every allocation checked and run against the SSA program, at a full budget and at
/// budgets that force its own spilling (spill everywhere, colour again). Returns the programs
/// that spilled by colouring and those that fell back to the SSA spiller.
fn graph_programs_agree(first: u64, count: u64) -> (u32, u32) {
    let mut failures = Vec::new();
    let (mut spilled, mut fallback) = (0, 0);
    for seed in first..first + count {
        let cfg = if seed % 4 == 0 {
            GenConfig::high_pressure(seed)
        } else {
            GenConfig {
                size: 20 + (seed % 60) as usize,
                ..GenConfig::new(seed)
            }
        };
        let func = generate(&cfg);
        let v = [256, 16, 12, 8][(seed % 4) as usize];
        let options = RaOptions {
            allocator: kiln_regalloc::Allocator::Graph,
            budget: vec![Some(v), Some(v / 2)],
            check: true,
            refuse_spilling: false,
        };
        let mut alloc = func.clone();
        match allocate(&mut alloc, &options) {
            Ok(stats) => {
                spilled += (stats.spill_rounds > 0 && !stats.graph_fallback) as u32;
                fallback += stats.graph_fallback as u32;
                let env = Env::for_function(&func, 16, seed);
                if let Err(m) = compare(&func, &alloc, &env) {
                    failures.push(format!("seed {seed}: {m}"));
                }
            }
            Err(kiln_regalloc::RaError::Budget { .. }) => {}
            Err(e) => failures.push(format!("seed {seed}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", report(&failures, None));
    eprintln!("{count} programs: {spilled} spilled by colouring, {fallback} fell back");
    (spilled, fallback)
}

/// 5,000 programs in two halves (the test harness runs them side by side). At the spilling
/// budgets, most programs spill by colouring alone.
#[test]
fn graph_allocator_programs_agree() {
    let (spilled, fallback) = graph_programs_agree(0, 2500);
    assert!(
        spilled > 400 && fallback < spilled / 4,
        "{spilled} / {fallback}"
    );
}

#[test]
fn graph_allocator_programs_agree_more() {
    let (spilled, fallback) = graph_programs_agree(2500, 2500);
    assert!(
        spilled > 400 && fallback < spilled / 4,
        "{spilled} / {fallback}"
    );
}

/// Scalar programs without constraints (the form vc4's back end gives the allocators), both
/// allocators: a phi of a block after a divergent break reads a linear value that only its
/// logical predecessor defines (generated seeds 722, 1247 and 1439 found it).
#[test]
fn scalar_programs_allocate_and_agree() {
    let mut failures = Vec::new();
    for seed in 0..1500u64 {
        let cfg = GenConfig {
            vectors: false,
            constraints: false,
            size: 50 + (seed as usize % 4) * 20,
            ..GenConfig::new(seed)
        };
        let func = generate(&cfg);
        for allocator in [
            kiln_regalloc::Allocator::Ssa,
            kiln_regalloc::Allocator::Graph,
        ] {
            let options = RaOptions {
                allocator,
                check: true,
                ..RaOptions::default()
            };
            let mut alloc = func.clone();
            match allocate(&mut alloc, &options) {
                Ok(_) => {
                    let env = Env::for_function(&func, 16, seed);
                    if let Err(m) = compare(&func, &alloc, &env) {
                        failures.push(format!("seed {seed} {allocator:?}: {m}"));
                    }
                }
                Err(e) => failures.push(format!("seed {seed} {allocator:?}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", report(&failures, None));
}

/// The colouring alone, against `kiln_analysis::Interference` (tested against the path
/// oracle): no two interfering temps get overlapping colours, and with a roomy budget every
/// node gets one.
#[test]
fn colouring_respects_interference() {
    let (mut at_offset, mut george) = (0, 0);
    for seed in 0..150u64 {
        let mut func = generate(&GenConfig {
            size: 20 + (seed % 100) as usize,
            ..GenConfig::new(seed)
        });
        let cfg = kiln_ir::Cfg::compute(&func).unwrap();
        let lv = kiln_analysis::compute_liveness(&mut func, &cfg);
        // A roomy budget colours every node; a tight one (odd seeds) leaves some uncoloured
        // and needs George's test where Briggs's refuses.
        let budget: &[u32] = if seed % 2 == 0 { &[256, 104] } else { &[10, 5] };
        let kiln_regalloc::graph::Colouring { homes, stats, .. } =
            kiln_regalloc::graph::colour(&func, &cfg, &lv, budget, &[]);
        assert!(seed % 2 == 1 || stats.uncoloured == 0, "seed {seed}");
        at_offset += stats.coalesced_at_offset;
        george += stats.coalesced_george;
        let inter = kiln_analysis::Interference::new(&func, &cfg, &lv);
        let temps: Vec<kiln_ir::Temp> = (0..func.temps.len())
            .map(kiln_ir::Temp::new)
            .filter(|t| homes[t.index()].is_some())
            .collect();
        for (i, &a) in temps.iter().enumerate() {
            for &b in &temps[i + 1..] {
                if !inter.interferes(&func, a, b) {
                    continue;
                }
                let (ha, hb) = (homes[a.index()].unwrap(), homes[b.index()].unwrap());
                let (sa, sb) = (func.class(a).size as u32, func.class(b).size as u32);
                assert!(
                    ha.file() != hb.file()
                        || ha.unit() + sa <= hb.unit()
                        || hb.unit() + sb <= ha.unit(),
                    "seed {seed}: {a} and {b} interfere but share {ha:?}/{hb:?}"
                );
            }
        }
    }
    // Vector parts merged at their offsets (seed 001's compound values), and merges only
    // George's test allowed, are among what this checks.
    assert!(
        at_offset > 100 && george > 0,
        "{at_offset} at offsets, {george} by George"
    );
}

/// The assignment alone (no colouring's homes as preferences) on a spilled loop at eight units
/// of `v`: the texture sample's coordinate, a loop phi, is moved to an aligned pair whose home
/// lies in the only block of four left for the sample's result. It stays where the sample reads
/// it and goes home later (`make_room_staying`); the assignment found no register before. (The
/// checker takes the program before spilling; the SIMT runs compare with the spilled one.)
#[test]
fn a_vector_operand_stays_away_from_home() {
    let text = include_str!("data/operand_stays.kir");
    let mut func = kiln_ir::parse_function(text).expect("parses");
    let cfg = kiln_ir::Cfg::compute(&func).expect("structured");
    let lv = kiln_analysis::compute_liveness(&mut func, &cfg);
    let (allocated, _) = kiln_regalloc::assign::assign(&func, &cfg, &lv, &[8, 4], None)
        .map_err(|(e, _)| e)
        .expect("assigned at eight units");
    for lanes in [1, 16] {
        let env = Env::for_function(&func, lanes, 7);
        compare(&func, &allocated, &env).expect("agrees in SIMT mode");
    }
}
