//! Scheduling time against block size: a generated block of n operations (each reads two of 40
//! registers written by recent operations and writes one, a tenth of them also through a FIFO
//! that orders them, pairs allowed between even and odd nodes), its DAG built and list-scheduled,
//! at n = 1k, 10k and 100k. Prints nanoseconds per node and the ratio of each size's cost per
//! node to the 1k block's, measured in the same run (1.0 = linear; the heaps make it
//! O(n log n), a few tenths above). Run with `cargo bench -p kiln-sched`.

use kiln_sched::{Access, Dag, schedule};
use std::time::Instant;

fn block(n: usize, seed: u64) -> Vec<Vec<Access>> {
    let mut s = seed | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n)
        .map(|_| {
            let mut a = vec![
                Access::Read {
                    resource: (next() % 40) as u32,
                    after: 0,
                },
                Access::Read {
                    resource: (next() % 40) as u32,
                    after: 0,
                },
                Access::Write {
                    resource: (next() % 40) as u32,
                    latency: 1 + (next() % 3) as u8,
                    waw: 1,
                    war: 0,
                    delay: 0,
                },
            ];
            if next() % 10 == 0 {
                a.push(Access::Write {
                    resource: 40,
                    latency: 1,
                    waw: 1,
                    war: 1,
                    delay: 100,
                });
            }
            a
        })
        .collect()
}

/// Best of `reps` runs: seconds to build the DAG and schedule it, and the cycles.
fn measure(nodes: &[Vec<Access>], reps: usize) -> (f64, usize) {
    let mut best = f64::INFINITY;
    let mut cycles = 0;
    for _ in 0..reps {
        let t = Instant::now();
        let dag = Dag::build(nodes.iter().map(Vec::as_slice), 41);
        let n = dag.len();
        let slots = schedule(
            &dag,
            &vec![0; n],
            &vec![0; n],
            &dag.critical_path(),
            |a, b| (a + b) % 2 == 1,
        );
        best = best.min(t.elapsed().as_secs_f64());
        cycles = slots.len();
    }
    (best, cycles)
}

fn main() {
    let mut base = None;
    for n in [1_000usize, 10_000, 100_000] {
        let nodes = block(n, 0x5eed + n as u64);
        let (t, cycles) = measure(&nodes, if n > 10_000 { 3 } else { 10 });
        let per_node = t * 1e9 / n as f64;
        let b = *base.get_or_insert(per_node);
        println!(
            "{n:>7} nodes  {cycles:>7} cycles  {per_node:8.1} ns/node  ratio to 1k {:.2}",
            per_node / b
        );
    }
}
