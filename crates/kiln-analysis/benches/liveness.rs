//! Liveness + register demand on generated programs of about 1k, 10k and 100k instructions:
//! time per instruction, and the 100k/10k per-instruction ratio (linear growth gives ~1.0).
//! Run with `cargo bench -p kiln-analysis --bench liveness`.

use kiln_analysis::{Cfg, compute_liveness};
use kiln_ir::Function;
use kiln_ir::generate::{GenConfig, generate};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Writes a buffer larger than the last-level cache, so every timed run starts from cold caches
/// whatever the program size (otherwise a small program's clone is still in L2 when timed).
fn evict(buffer: &mut [u64]) {
    for (i, x) in buffer.iter_mut().enumerate() {
        *x = x.wrapping_add(i as u64);
    }
    black_box(&buffer);
}

/// The benchmark program of about `size` instructions, and its CFG.
fn program(size: usize) -> (Function, Cfg) {
    let func = generate(&GenConfig {
        size,
        pressure: 24,
        max_depth: 4,
        ..GenConfig::new(42)
    });
    let cfg = Cfg::compute(&func).expect("generated programs are structured");
    (func, cfg)
}

/// Best of several cold-cache runs, in nanoseconds per instruction.
fn measure(size: usize, buffer: &mut [u64]) -> (usize, f64) {
    let (func, cfg) = program(size);
    let n = func.inst_count();
    let mut best = Duration::MAX;
    let start = Instant::now();
    let mut runs = 0;
    while runs < 3 || (start.elapsed() < Duration::from_secs(3) && runs < 100) {
        let mut f = func.clone();
        evict(buffer);
        let t = Instant::now();
        black_box(compute_liveness(&mut f, &cfg));
        best = best.min(t.elapsed());
        runs += 1;
    }
    (n, best.as_nanos() as f64 / n as f64)
}

fn main() {
    let mut per_inst = Vec::new();
    println!(
        "{:>12} {:>14} {:>12}",
        "instructions", "ns/instruction", "total ms"
    );
    // KILN_BENCH_SIZE=N measures one size once (for `valgrind --tool=callgrind`).
    if let Some(size) = std::env::var("KILN_BENCH_SIZE")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        let (func, cfg) = program(size);
        let mut f = func.clone();
        black_box(compute_liveness(&mut f, &cfg));
        println!("{} instructions", func.inst_count());
        return;
    }
    let mut buffer = vec![0u64; 8 << 20];
    for size in [1_000, 10_000, 100_000] {
        let (n, ns) = measure(size, &mut buffer);
        println!("{n:>12} {ns:>14.1} {:>12.2}", ns * n as f64 / 1e6);
        per_inst.push(ns);
    }
    println!(
        "ratio 100k/10k per instruction: {:.2} (goal <= 1.2)",
        per_inst[2] / per_inst[1]
    );
    println!(
        "ratio 10k/1k per instruction:   {:.2}",
        per_inst[1] / per_inst[0]
    );
}
