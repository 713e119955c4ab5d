//! Interpreted instructions per second in SSA mode and in SIMT mode, on generated programs and
//! the same inputs; the SIMT/SSA ratio is measured in the same run.
//! Run with `cargo bench -p kiln-interp --bench interp`.

use kiln_interp::out_of_ssa::reference_assignment;
use kiln_interp::{Env, run_simt, run_ssa};
use kiln_ir::generate::{GenConfig, generate};
use std::time::Instant;

fn main() {
    let mut programs = Vec::new();
    for seed in 0..40 {
        let func = generate(&GenConfig {
            size: 400,
            ..GenConfig::new(seed)
        });
        let alloc = reference_assignment(&func).expect("reference assignment");
        let env = Env::for_function(&func, 16, seed);
        programs.push((func, alloc, env));
    }
    // Instructions executed by the wave, counted once.
    let steps: u64 = programs.iter().map(|(f, _, env)| count_steps(f, env)).sum();
    let time = |simt: bool| {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for (f, a, env) in &programs {
                let r = if simt {
                    run_simt(a, env)
                } else {
                    run_ssa(f, env)
                };
                std::hint::black_box(r.ok());
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        best
    };
    let (ssa, simt) = (time(false), time(true));
    println!("wave instructions executed per pass: {steps} (16 lanes)");
    println!(
        "SSA mode:  {:>8.2} M wave instructions/s",
        steps as f64 / ssa / 1e6
    );
    println!(
        "SIMT mode: {:>8.2} M wave instructions/s",
        steps as f64 / simt / 1e6
    );
    println!("SIMT/SSA time ratio: {:.2}", simt / ssa);
}

/// Wave instructions one SSA run executes (the step limit is reached exactly at that count).
fn count_steps(func: &kiln_ir::Function, env: &Env) -> u64 {
    let (mut lo, mut hi) = (0u64, 1_000_000u64);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let e = Env {
            step_limit: mid,
            ..env.clone()
        };
        if run_ssa(func, &e).is_ok() {
            hi = mid
        } else {
            lo = mid + 1
        }
    }
    lo
}
