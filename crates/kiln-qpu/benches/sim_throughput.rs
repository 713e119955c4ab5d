//! Simulator throughput: simulated QPU instructions per second on a long loop program, and
//! the ratio against a straight-line program of the same body run in the same process (so the
//! figure is comparable on a noisy machine). Run with `cargo bench -p kiln-vc4`.

use kiln_qpu::isa::assemble;
use kiln_qpu::sim::{Machine, Program};
use std::time::Instant;

const BODY: &str = "\
    fadd r1, r1, r2 ; fmul r2, r2, r3\n\
    add r0, r0, r3 ; v8adds r3, r3, r0\n\
    fsub ra1, r1, r2 ; mov rb1, r0\n\
    sig_small_imm shl r2, r0, 3 ; nop nop, r0, r0\n\
    mov.sf r3, ra1 ; fmul r1, r1, rb1\n\
    mov.zc r0, r3 ; mul24 r2, r0, r3\n";

fn loop_program(iterations: u32) -> String {
    format!(
        "load_imm r1, nop, 0x3f800000\nload_imm r2, nop, 0x3f000000\nload_imm r3, nop, 3\n\
         load_imm ra10, nop, {iterations}\n\
         loop:\n{BODY}{BODY}\
         sig_small_imm sub.sf ra10, ra10, 1 ; nop nop, r0, r0\n\
         nop\n\
         mov.sf nop, ra10 ; nop nop, r0, r0\n\
         branch.any_zc.rel loop\n\
         nop\nnop\nnop\n\
         sig_end nop\nnop\nnop\n"
    )
}

fn straight_program(copies: usize) -> String {
    let mut s = String::from("load_imm r1, nop, 0x3f800000\nload_imm r2, nop, 0x3f000000\n");
    for _ in 0..copies {
        s.push_str(BODY);
    }
    s.push_str("sig_end nop\nnop\nnop\n");
    s
}

/// Best of `reps` runs: (instructions executed, seconds).
fn measure(code: &[u64], reps: usize) -> (u64, f64) {
    let mut best = f64::INFINITY;
    let mut n = 0;
    for _ in 0..reps {
        let mut m = Machine::new(1 << 20, Program::new(0x10000, code));
        m.add_qpu(0x80000);
        let t = Instant::now();
        m.run(u64::MAX).expect("benchmark program runs");
        let dt = t.elapsed().as_secs_f64();
        n = m.qpus[0].instructions;
        best = best.min(dt);
    }
    (n, best)
}

fn main() {
    let loop_code = assemble(&loop_program(100_000)).unwrap();
    let straight_code = assemble(&straight_program(20_000)).unwrap();
    let (ln, lt) = measure(&loop_code, 3);
    let (sn, st) = measure(&straight_code, 3);
    let lrate = ln as f64 / lt;
    let srate = sn as f64 / st;
    println!(
        "loop program:     {ln:>9} instructions in {lt:.3} s = {:.2} M instructions/s",
        lrate / 1e6
    );
    println!(
        "straight program: {sn:>9} instructions in {st:.3} s = {:.2} M instructions/s",
        srate / 1e6
    );
    println!(
        "loop / straight-line throughput ratio: {:.3}",
        lrate / srate
    );
}
