//! Lower bounds on a schedule's length from time windows (Rim and Jain, "Lower-bound performance
//! estimation for the high-level synthesis scheduling problem", IEEE TCAD 1994): a node with
//! head h (it issues in cycle h or later) and tail t (at least t cycles from its issue to the
//! end, its own included) issues in `[h, length − t]`, so the nodes whose heads are all h or
//! later and whose tails are all t or longer share `length − h − t + 1` cycles, which must hold
//! what they need of a resource.
//!
//! [`densest_window`] finds, for one resource, the window whose nodes need the most beyond its
//! width: each window is a corner (h, t) of the head–tail plane and its nodes the points above
//! and to the right of it. Heads from the latest, the nodes come into a tree over the tails
//! that holds, per tail threshold, what the window needs; a node adds its need to every
//! threshold at or below its tail. O(n log n) for n nodes.

/// The largest `alpha · (h + t) + Σ need[v]` over the windows (h, t) that hold a node, the sum
/// over the nodes v with `head[v] ≥ h` and `tail[v] ≥ t` (h a head and t a tail of some node:
/// there the sum is largest for its set). `None` for no nodes.
pub fn densest_window(head: &[u32], tail: &[u32], need: &[u32], alpha: u32) -> Option<u64> {
    let n = head.len();
    assert!(tail.len() == n && need.len() == n);
    if n == 0 {
        return None;
    }
    // The tail thresholds, ascending; a node's tail as its index among them.
    let mut tails: Vec<u32> = tail.to_vec();
    tails.sort_unstable();
    tails.dedup();
    let rank = |t: u32| tails.partition_point(|&x| x < t);
    let mut tree = MaxTree::new(
        &tails
            .iter()
            .map(|&t| alpha as i64 * t as i64)
            .collect::<Vec<_>>(),
    );
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_unstable_by_key(|&v| std::cmp::Reverse(head[v as usize]));
    let mut best = i64::MIN;
    // The thresholds at or below the longest tail among the nodes in: those hold a node.
    let mut reach = 0;
    let mut k = 0;
    while k < n {
        let h = head[order[k] as usize];
        while k < n && head[order[k] as usize] == h {
            let v = order[k] as usize;
            let r = rank(tail[v]);
            tree.add(r, need[v] as i64);
            reach = reach.max(r + 1);
            k += 1;
        }
        best = best.max(alpha as i64 * h as i64 + tree.max_below(reach));
    }
    Some(best as u64)
}

/// A maximum over positions `0..len`, with adding to every position up to one: a segment tree
/// with pending additions kept at the nodes.
struct MaxTree {
    len: usize,
    /// Per node, the largest value in its range, its own pending addition included.
    max: Vec<i64>,
    /// Per node, what was added to its whole range.
    added: Vec<i64>,
}

impl MaxTree {
    fn new(values: &[i64]) -> MaxTree {
        let len = values.len();
        let mut t = MaxTree {
            len,
            max: vec![i64::MIN; 4 * len],
            added: vec![0; 4 * len],
        };
        t.build(1, 0, len, values);
        t
    }

    fn build(&mut self, node: usize, lo: usize, hi: usize, values: &[i64]) {
        if hi - lo == 1 {
            self.max[node] = values[lo];
            return;
        }
        let mid = (lo + hi) / 2;
        self.build(2 * node, lo, mid, values);
        self.build(2 * node + 1, mid, hi, values);
        self.max[node] = self.max[2 * node].max(self.max[2 * node + 1]);
    }

    /// Adds `x` at positions `0..=at`.
    fn add(&mut self, at: usize, x: i64) {
        self.add_in(1, 0, self.len, at + 1, x);
    }

    fn add_in(&mut self, node: usize, lo: usize, hi: usize, end: usize, x: i64) {
        if end <= lo {
            return;
        }
        if hi <= end {
            self.max[node] += x;
            self.added[node] += x;
            return;
        }
        let mid = (lo + hi) / 2;
        self.add_in(2 * node, lo, mid, end, x);
        self.add_in(2 * node + 1, mid, hi, end, x);
        self.max[node] = self.max[2 * node].max(self.max[2 * node + 1]) + self.added[node];
    }

    /// The largest value at positions `0..end`.
    fn max_below(&self, end: usize) -> i64 {
        self.max_in(1, 0, self.len, end)
    }

    fn max_in(&self, node: usize, lo: usize, hi: usize, end: usize) -> i64 {
        if end <= lo {
            return i64::MIN;
        }
        if hi <= end {
            return self.max[node];
        }
        let mid = (lo + hi) / 2;
        let below =
            self.max_in(2 * node, lo, mid, end)
                .max(self.max_in(2 * node + 1, mid, hi, end));
        below.saturating_add(self.added[node])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every corner (h, t) with a node above and to the right of it, summed directly.
    fn brute(head: &[u32], tail: &[u32], need: &[u32], alpha: u32) -> Option<u64> {
        let mut best = None;
        for &h in head {
            for &t in tail {
                let inside: Vec<usize> = (0..head.len())
                    .filter(|&v| head[v] >= h && tail[v] >= t)
                    .collect();
                if inside.is_empty() {
                    continue;
                }
                let sum: u64 = inside.iter().map(|&v| need[v] as u64).sum();
                let f = alpha as u64 * (h + t) as u64 + sum;
                best = best.max(Some(f));
            }
        }
        best
    }

    proptest! {
        #[test]
        fn the_densest_window_is_the_one_a_search_of_every_corner_finds(
            nodes in prop::collection::vec((0u32..12, 1u32..12, 0u32..3), 0..40),
            alpha in 1u32..3,
        ) {
            let head: Vec<u32> = nodes.iter().map(|n| n.0).collect();
            let tail: Vec<u32> = nodes.iter().map(|n| n.1).collect();
            let need: Vec<u32> = nodes.iter().map(|n| n.2).collect();
            prop_assert_eq!(
                densest_window(&head, &tail, &need, alpha),
                brute(&head, &tail, &need, alpha)
            );
        }
    }

    /// Three independent nodes that each need a cycle, heads 0 and tails 1: 0 + 1 + 3. A late
    /// node that needs three: the window at its head, 5 + 1 + 3, not the one of both nodes,
    /// 0 + 1 + 4.
    #[test]
    fn a_window_of_late_nodes_binds() {
        assert_eq!(
            densest_window(&[0, 0, 0], &[1, 1, 1], &[1, 1, 1], 1),
            Some(4)
        );
        assert_eq!(densest_window(&[0, 5], &[1, 1], &[1, 3], 1), Some(9));
        assert_eq!(densest_window(&[], &[], &[], 1), None);
    }
}
