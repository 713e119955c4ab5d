//! Differential tests of every pass: generated programs run in the interpreter before and after
//! the pass, bit for bit (`kiln_interp::compare_outputs`), with the verifier after every pass
//! (the context verifies in debug builds, and these tests ask for it explicitly).

use kiln_analysis::{Context, DebugFlags};
use kiln_interp::diff::compare_outputs;
use kiln_interp::{Env, run};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::print_function;

/// Programs per pass: a few hundred, kept quick in debug builds.
const PROGRAMS: u64 = 300;

fn config(seed: u64) -> GenConfig {
    let mut c = GenConfig::new(seed);
    c.size = 40 + (seed % 5) as usize * 20;
    c
}

/// Runs every pass list of `pipelines` on generated programs and compares each result with the
/// original on two inputs (the original runs once per input).
fn differential(pipelines: &[Vec<&str>], programs: u64) {
    let mut compared = vec![0usize; pipelines.len()];
    for seed in 0..programs {
        let before = generate(&config(seed));
        let envs: Vec<(Env, _)> = (0..2)
            .map(|k| Env::for_function(&before, 16, seed * 31 + k))
            .filter_map(|env| run(&before, &env).ok().map(|out| (env, out)))
            .collect();
        for (p, passes) in pipelines.iter().enumerate() {
            let mut cx = Context::with_debug(
                before.clone(),
                DebugFlags {
                    verify: true,
                    ..DebugFlags::default()
                },
            );
            let limit = cx.liveness().unwrap().max;
            let result = if passes.is_empty() {
                // The whole middle end under its demand constraint.
                kiln_opt::optimize_within_demand(&mut cx, kiln_opt::Precision::Exact, false)
                    .map(|_| ())
            } else {
                kiln_opt::run_passes(&mut cx, passes)
            };
            if let Err(e) = result {
                panic!("seed {seed} {passes:?}: {e}\n{}", print_function(&before));
            }
            if passes.is_empty() {
                let demand = cx.liveness().unwrap().max;
                assert!(
                    kiln_opt::demand_within(demand, limit),
                    "seed {seed}: demand {demand:?} > {limit:?}"
                );
            }
            let after = cx.into_func();
            for (env, want) in &envs {
                let got = run(&after, env).unwrap_or_else(|e| {
                    panic!(
                        "seed {seed} after {passes:?}: {e}\nbefore:\n{}\nafter:\n{}",
                        print_function(&before),
                        print_function(&after)
                    )
                });
                if let Err(m) = compare_outputs(want, &got) {
                    panic!(
                        "seed {seed} after {passes:?}: {m}\nbefore:\n{}\nafter:\n{}",
                        print_function(&before),
                        print_function(&after)
                    );
                }
                compared[p] += 1;
            }
        }
    }
    for (p, n) in compared.iter().enumerate() {
        assert!(
            *n > programs as usize,
            "{:?}: only {n} runs compared: the generated programs fail too often",
            pipelines[p]
        );
    }
}

/// Every pass alone, half of them per test (the tests run in parallel); `algebraic`, whose
/// relaxed rules hold within a tolerance, is tested rule by rule in its module.
fn passes_alone(half: usize) {
    let n = kiln_opt::PASSES.len();
    let pipelines: Vec<Vec<&str>> = kiln_opt::PASSES
        .iter()
        .enumerate()
        .filter(|(_, (name, _))| *name != "algebraic")
        .filter(|(k, _)| (*k < n / 2) == (half == 0))
        .map(|(_, (name, _))| vec![*name])
        .collect();
    differential(&pipelines, PROGRAMS);
}

#[test]
fn passes_alone_first_half() {
    passes_alone(0);
}

#[test]
fn passes_alone_second_half() {
    passes_alone(1);
}

/// The default pipeline (exact), and `optimize_within_demand` (the empty list), which never
/// raises the demand.
#[test]
fn pipelines() {
    differential(
        &[kiln_opt::pipeline_at(kiln_opt::Precision::Exact), vec![]],
        150,
    );
}

/// The fixed point after the pipeline skips only passes that would change nothing: the same
/// function (up to the numbering of its temps) as running every repeated pass again until a
/// whole round changes nothing.
#[test]
fn fixed_point_skips_only_idle_passes() {
    let exact = |n: &'static str| {
        if n == "algebraic" {
            "algebraic_exact"
        } else {
            n
        }
    };
    let pipeline = kiln_opt::pipeline_at(kiln_opt::Precision::Exact);
    let mut repeated_rounds = 0;
    for seed in 0..60 {
        let before = generate(&config(seed));
        let mut skipping = Context::new(before.clone());
        kiln_opt::run_to_fixed_point(&mut skipping, &pipeline, kiln_opt::Precision::Exact, false)
            .unwrap();
        let mut plain = Context::new(before);
        kiln_opt::run_passes(&mut plain, &pipeline).unwrap();
        for _ in 0..kiln_opt::MAX_REPEATS {
            let was = print_function(plain.func());
            let names: Vec<&str> = kiln_opt::REPEATED.iter().map(|&n| exact(n)).collect();
            kiln_opt::run_passes(&mut plain, &names).unwrap();
            if print_function(plain.func()) == was {
                break;
            }
            repeated_rounds += 1;
        }
        // (The fixed point numbers the temps anew where many went: compared with the gaps
        // closed in both.)
        let (mut got, mut want) = (skipping.into_func(), plain.into_func());
        got.compact_temps();
        want.compact_temps();
        assert_eq!(print_function(&got), print_function(&want), "seed {seed}");
    }
    eprintln!("{repeated_rounds} rounds changed something");
}
