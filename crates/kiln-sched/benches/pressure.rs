//! Pre-RA scheduling time against block size: one generated block of n operations (each reads
//! two of the 40 values made last, a tenth of them texture samples whose results are
//! transient, outputs at the end), scheduled under a budget of 16 registers — both liveness
//! runs of the demand check included — at n = 1k, 10k and 100k. Prints nanoseconds per
//! instruction and the ratio of each size's cost per instruction to the 1k block's, measured
//! in the same run (1.0 = linear). Run with `cargo bench -p kiln-sched --bench pressure`.

use kiln_ir::{Demand, Function, parse_function};
use kiln_sched::pressure::{GenericPreRa, Order, schedule};
use std::fmt::Write;
use std::time::Instant;

fn block(n: usize, seed: u64) -> Function {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut text = String::from("target generic(v=256, s=104)\nfunction @main {\nbb0:\n");
    for k in 0..4 {
        writeln!(text, "    %{k}:v1 = input {k}").unwrap();
    }
    let mut made = 4usize;
    let mut values: Vec<usize> = (0..4).collect();
    while made < n {
        let mut pick = || values[values.len() - 1 - (next() as usize % values.len().min(40))];
        let (a, b) = (pick(), pick());
        if next() % 10 == 0 {
            writeln!(
                text,
                "    %{made}:v4 = texture_sample 0, 0, %{a}, %{b}\n    %{}:v1, %{}:v1, %{}:v1, %{}:v1 = split_vector %{made}",
                made + 1,
                made + 2,
                made + 3,
                made + 4
            )
            .unwrap();
            values.extend(made + 1..made + 5);
            made += 5;
        } else {
            let op = ["fadd", "fmul", "fsub", "fmax"][next() as usize % 4];
            writeln!(text, "    %{made}:v1 = {op} %{a}, %{b}").unwrap();
            values.push(made);
            made += 1;
        }
    }
    for (k, v) in values.iter().rev().take(4).enumerate() {
        writeln!(text, "    output {k}, %{v}").unwrap();
    }
    text.push_str("    return\n}\n");
    parse_function(&text).expect("a generated block parses")
}

fn main() {
    let mut budget = Demand::ZERO;
    budget.0[0] = 16;
    budget.0[1] = 8;
    let mut base = None;
    for n in [1_000usize, 10_000, 100_000] {
        let func = block(n, 7);
        let reps = if n >= 100_000 { 2 } else { 5 };
        let mut best = f64::INFINITY;
        for _ in 0..reps {
            let mut f = func.clone();
            let t = Instant::now();
            schedule(&mut f, &GenericPreRa, budget, Order::Latency);
            best = best.min(t.elapsed().as_secs_f64());
        }
        let per = best * 1e9 / n as f64;
        let ratio = per / *base.get_or_insert(per);
        println!("{n:>7} instructions: {per:8.1} ns per instruction, ratio to 1k {ratio:.2}");
    }
}
