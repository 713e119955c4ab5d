//! Cycle-by-cycle list scheduling of a [`Dag`] for a machine that issues one instruction per
//! cycle, each with up to two operations (the QPU's add and mul units): at each cycle the ready
//! node with the longest path to the block's end is issued, together with the best ready node
//! the target can pair with it; a cycle where nothing may issue is a `nop`. After Mesa's
//! `schedule_instructions` and `choose_instruction_to_schedule` (`vc4_qpu_schedule.c`).
//!
//! Cost: each node enters and leaves the ready and waiting heaps once, and each cycle looks at
//! no more than [`PARTNERS`] candidates for a pair, so a block of n nodes and e edges takes
//! O((n + e) log n).

use crate::dag::Dag;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How many ready nodes, best first, a cycle tries as the partner of the node it issues.
pub const PARTNERS: usize = 16;

/// One issue cycle: no node (a `nop`), one, or a pair.
pub type Slot = [Option<u32>; 2];

/// Schedules `dag`. `earliest[n]` is the first cycle node n may issue in (what the code
/// before the block still holds up); among ready nodes, a higher `class` goes first, then a
/// higher `prio` (usually [`Dag::critical_path`]: the longer path to the block's end), then
/// the original order (Mesa's `get_instruction_priority`, then its latency); `pairs(a, b)`
/// says whether a and b can issue in one instruction. Returns the cycles in order.
pub fn schedule(
    dag: &Dag,
    earliest: &[u32],
    class: &[u8],
    prio: &[u32],
    mut pairs: impl FnMut(u32, u32) -> bool,
) -> Vec<Slot> {
    let n = dag.len();
    let mut at: Vec<u32> = earliest.to_vec();
    let mut preds = dag.preds.clone();
    let key = |v: u32| (class[v as usize], prio[v as usize], Reverse(v));
    let mut ready: BinaryHeap<(u8, u32, Reverse<u32>)> = BinaryHeap::new();
    let mut waiting: BinaryHeap<Reverse<(u32, u32)>> = BinaryHeap::new();
    for v in 0..n as u32 {
        if preds[v as usize] == 0 {
            waiting.push(Reverse((at[v as usize], v)));
        }
    }
    let mut slots = Vec::with_capacity(n);
    let mut done = 0;
    let mut tried = Vec::with_capacity(PARTNERS);
    while done < n {
        let cycle = slots.len() as u32;
        while let Some(&Reverse((t, v))) = waiting.peek() {
            if t > cycle {
                break;
            }
            waiting.pop();
            ready.push(key(v));
        }
        let Some((_, _, Reverse(first))) = ready.pop() else {
            slots.push([None, None]);
            continue;
        };
        // What waits on `first` by no cycle at all (a write after its read) may join it.
        let mut release = |v: u32, same_cycle: bool, waiting: &mut BinaryHeap<_>| {
            for e in &dag.succs[v as usize] {
                let s = e.to as usize;
                let latency = if same_cycle {
                    e.latency
                } else {
                    e.latency.max(1)
                };
                at[s] = at[s].max(cycle + latency as u32);
                preds[s] -= 1;
                if preds[s] == 0 {
                    waiting.push(Reverse((at[s], e.to)));
                }
            }
        };
        release(first, true, &mut waiting);
        while let Some(&Reverse((t, v))) = waiting.peek() {
            if t > cycle {
                break;
            }
            waiting.pop();
            ready.push(key(v));
        }
        let mut partner = None;
        while tried.len() < PARTNERS
            && let Some((_, _, Reverse(b))) = ready.pop()
        {
            if pairs(first, b) {
                partner = Some(b);
                break;
            }
            tried.push(b);
        }
        for b in tried.drain(..) {
            ready.push(key(b));
        }
        slots.push([Some(first), partner]);
        done += 1;
        if let Some(p) = partner {
            done += 1;
            release(p, false, &mut waiting);
        }
    }
    slots
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::Access;
    use proptest::prelude::*;

    /// A random block: each node reads and writes a few of 6 resources with latencies 1–3.
    fn block() -> impl Strategy<Value = Vec<Vec<Access>>> {
        prop::collection::vec(
            prop::collection::vec((0u32..6, any::<bool>(), 1u8..4, 0u8..2), 0..4).prop_map(|v| {
                let mut reads: Vec<Access> = Vec::new();
                let mut writes: Vec<Access> = Vec::new();
                for (resource, write, latency, war) in v {
                    if write {
                        if !writes.iter().any(
                            |a| matches!(a, Access::Write { resource: r, .. } if *r == resource),
                        ) {
                            writes.push(Access::Write {
                                resource,
                                latency,
                                waw: 1,
                                war,
                                delay: 0,
                            });
                        }
                    } else {
                        reads.push(Access::Read { resource, after: 0 });
                    }
                }
                reads.extend(writes);
                reads
            }),
            0..40,
        )
    }

    proptest! {
        /// Every node issues once, after each of its predecessors by at least the edge's
        /// latency (checked against the accesses themselves, not the DAG), and pairs are
        /// only those the target allows.
        #[test]
        fn order_respects_every_access(nodes in block(), even_pairs in any::<bool>()) {
            let dag = Dag::build(nodes.iter().map(Vec::as_slice), 6);
            let pairs = |a: u32, b: u32| even_pairs && (a + b) % 2 == 1;
            let slots = schedule(&dag, &vec![0; nodes.len()], &vec![0; nodes.len()], &dag.critical_path(), pairs);
            let mut cycle_of = vec![None; nodes.len()];
            for (c, s) in slots.iter().enumerate() {
                if let [Some(a), Some(b)] = *s {
                    prop_assert!(pairs(a, b));
                }
                for v in s.iter().flatten() {
                    prop_assert!(cycle_of[*v as usize].is_none());
                    cycle_of[*v as usize] = Some(c as u32);
                }
            }
            let cycle: Vec<u32> = cycle_of.iter().map(|c| c.expect("every node issues")).collect();
            // The oracle: for every pair i < j touching a resource, the distance the
            // accesses ask for.
            for j in 0..nodes.len() {
                for i in 0..j {
                    for a in &nodes[i] {
                        for b in &nodes[j] {
                            let need = match (*a, *b) {
                                (Access::Write { resource: r, latency, .. }, Access::Read { resource: s, .. }) if r == s => {
                                    // Only the last write before j counts.
                                    let later = (i + 1..j).any(|k| nodes[k].iter().any(|x| matches!(x, Access::Write { resource, .. } if *resource == r)));
                                    if later { None } else { Some(latency as i64) }
                                }
                                (Access::Read { resource: r, .. }, Access::Write { resource: s, war, .. }) if r == s => Some(war as i64),
                                (Access::Write { resource: r, .. }, Access::Write { resource: s, .. }) if r == s => Some(1),
                                _ => None,
                            };
                            if let Some(d) = need {
                                prop_assert!(cycle[j] as i64 - cycle[i] as i64 >= d,
                                    "node {j} at {} is less than {d} after node {i} at {}", cycle[j], cycle[i]);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn independent_operations_pair_and_latency_is_filled() {
        // 0 → 1 with latency 3, 2 and 3 independent: 0 and 2 pair, 3 fills a wait.
        let w = |resource, latency| Access::Write {
            resource,
            latency,
            waw: 1,
            war: 0,
            delay: 0,
        };
        let nodes = [
            vec![w(0, 3)],
            vec![Access::Read {
                resource: 0,
                after: 0,
            }],
            vec![w(1, 1)],
            vec![w(2, 1)],
        ];
        let dag = Dag::build(nodes.iter().map(Vec::as_slice), 3);
        let slots = schedule(&dag, &[0; 4], &[0; 4], &dag.critical_path(), |_, _| true);
        assert_eq!(
            slots,
            vec![
                [Some(0), Some(2)],
                [Some(3), None],
                [None, None],
                [Some(1), None]
            ]
        );
    }
}
