//! Scheduling time against block size: a generated block of n operations (each reads two of 40
//! registers written by recent operations and writes one, a tenth of them also through a FIFO
//! that orders them, pairs allowed between even and odd nodes), its DAG built and list-scheduled,
//! at n = 1k, 10k and 100k. Prints nanoseconds per node and the ratio of each size's cost per
//! node to the 1k block's, measured in the same run (1.0 = linear; the heaps make it
//! O(n log n), a few tenths above). Then the same blocks within a register limit
//! (`schedule_within`: each operation's result a value, the limit what the original order
//! needs), greedy and safe — the safe check is linear per node up to a budget that keeps the
//! block linear. Run with `cargo bench -p kiln-sched`.

use kiln_sched::{Access, Dag, Registers, schedule, schedule_within};
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

/// The block's values: each operation's write starts one, used by the operations that read
/// it before the register is written again; the limit is what the original order needs.
fn registers(nodes: &[Vec<Access>]) -> Registers {
    let mut regs = Registers::default();
    let mut current: Vec<Option<u32>> = vec![None; 41];
    let mut uses: Vec<Vec<u32>> = Vec::with_capacity(nodes.len());
    let mut value_count = 0u32;
    for list in nodes {
        let mut used = Vec::new();
        let mut starts = 0;
        for a in list {
            match *a {
                Access::Read { resource, .. } => {
                    if let Some(v) = current[resource as usize]
                        && !used.contains(&v)
                    {
                        used.push(v);
                    }
                }
                Access::Write { resource, .. } if resource < 40 => {
                    current[resource as usize] = Some(value_count);
                    used.push(value_count);
                    value_count += 1;
                    starts += 1;
                }
                Access::Write { .. } => {}
            }
        }
        regs.starts.push(starts);
        uses.push(used);
    }
    regs.users = vec![0; value_count as usize];
    for u in &uses {
        regs.use_at.push(regs.uses.len() as u32);
        for &v in u {
            regs.users[v as usize] += 1;
            regs.uses.push(v);
        }
    }
    regs.use_at.push(regs.uses.len() as u32);
    // The original order's peak.
    let mut left = regs.users.clone();
    let (mut live, mut peak) = (0u32, 0u32);
    for (n, u) in uses.iter().enumerate() {
        live += regs.starts[n] as u32;
        for &v in u {
            left[v as usize] -= 1;
            if left[v as usize] == 0 {
                live -= 1;
            }
        }
        peak = peak.max(live);
    }
    regs.limit = peak;
    regs
}

/// Best of `reps` runs of [`schedule_within`] on the block's DAG (built once): seconds, and the
/// cycles (0 where no order was found).
fn measure_within(
    nodes: &[Vec<Access>],
    regs: &Registers,
    safe: bool,
    reps: usize,
) -> (f64, usize) {
    let dag = Dag::build(nodes.iter().map(Vec::as_slice), 41);
    let n = dag.len();
    let prio = dag.critical_path();
    let mut best = f64::INFINITY;
    let mut cycles = 0;
    for _ in 0..reps {
        let t = Instant::now();
        let slots = schedule_within(
            &dag,
            &vec![0; n],
            &vec![0; n],
            &prio,
            |a, b| (a + b) % 2 == 1,
            regs,
            safe,
        );
        best = best.min(t.elapsed().as_secs_f64());
        cycles = slots.map_or(0, |s| s.len());
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
    for safe in [false, true] {
        let mut base = None;
        for n in [1_000usize, 10_000, 100_000] {
            let nodes = block(n, 0x5eed + n as u64);
            let regs = registers(&nodes);
            let (t, cycles) = measure_within(&nodes, &regs, safe, if n > 10_000 { 3 } else { 10 });
            let per_node = t * 1e9 / n as f64;
            let b = *base.get_or_insert(per_node);
            println!(
                "{n:>7} nodes  within {} registers, {}  {cycles:>7} cycles  {per_node:8.1} ns/node  ratio to 1k {:.2}",
                regs.limit,
                if safe { "safe" } else { "greedy" },
                per_node / b
            );
        }
    }
}
