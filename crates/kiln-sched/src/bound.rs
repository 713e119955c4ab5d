//! Lower bounds on a schedule's length from time windows (Rim and Jain, "Lower-bound performance
//! estimation for the high-level synthesis scheduling problem", IEEE TCAD 1994): a node with
//! head h (it issues in cycle h or later) and tail t (at least t cycles from its issue to the
//! end, its own included) issues in `[h, length − t]`, so the nodes whose heads are all h or
//! later and whose tails are all t or longer share `length − h − t + 1` cycles, which must hold
//! what they need of a resource.
//!
//! [`densest_window`] finds, for each resource, the window whose nodes need the most beyond its
//! width: each window is a corner (h, t) of the head–tail plane and its nodes the points above
//! and to the right of it. Heads from the latest, the nodes come into an array over the tail
//! thresholds that holds, per threshold, what the window needs; a node adds its need to every
//! threshold at or below its tail, and each head reads the array's maximum. Any set of corners
//! gives a bound: past [`THRESHOLDS`] distinct tails (or heads) only that many, evenly spread,
//! are corners, so that a node costs at most `THRESHOLDS` additions — O(n) for n nodes (the
//! sorts aside), exact for the regions most programs have.

/// The most tail thresholds, and heads, taken as corners.
pub const THRESHOLDS: usize = 64;

/// Per resource k, the largest `alpha[k] · (h + t) + Σ need[v][k]` over the windows (h, t)
/// that hold a node, the sum over the nodes v with `head[v] ≥ h` and `tail[v] ≥ t` — every
/// corner h a head and t a tail of some node where there are at most [`THRESHOLDS`] of each
/// (there the sum is largest for its set), else a spread of them. `None` for no nodes.
pub fn densest_window<const K: usize>(
    head: &[u32],
    tail: &[u32],
    need: &[[u32; K]],
    alpha: [u32; K],
) -> Option<[u64; K]> {
    let n = head.len();
    assert!(tail.len() == n && need.len() == n);
    if n == 0 {
        return None;
    }
    // The tail thresholds, ascending (the shortest tail always among them, so that every node
    // is in some window); a node's tail as the index of the last threshold at or below it.
    let tails = spread(tail);
    let mut window: Vec<[i64; K]> = tails
        .iter()
        .map(|&t| std::array::from_fn(|k| alpha[k] as i64 * t as i64))
        .collect();
    let heads = spread(head);
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_unstable_by_key(|&v| std::cmp::Reverse(head[v as usize]));
    let mut best = [i64::MIN; K];
    // The thresholds at or below the longest tail among the nodes in: those hold a node.
    let mut reach = 0;
    let mut i = 0;
    for &h in heads.iter().rev() {
        while i < n && head[order[i] as usize] >= h {
            let v = order[i] as usize;
            let r = tails.partition_point(|&x| x <= tail[v]) - 1;
            for w in &mut window[..=r] {
                for k in 0..K {
                    w[k] += need[v][k] as i64;
                }
            }
            reach = reach.max(r + 1);
            i += 1;
        }
        for w in &window[..reach] {
            for k in 0..K {
                best[k] = best[k].max(alpha[k] as i64 * h as i64 + w[k]);
            }
        }
    }
    Some(best.map(|b| b as u64))
}

/// The distinct values of `x`, ascending: all of them up to [`THRESHOLDS`], else that many
/// evenly spread from the smallest.
fn spread(x: &[u32]) -> Vec<u32> {
    let mut v = x.to_vec();
    v.sort_unstable();
    v.dedup();
    if v.len() > THRESHOLDS {
        let step = v.len().div_ceil(THRESHOLDS);
        v = v.iter().copied().step_by(step).collect();
    }
    v
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
        /// Up to `THRESHOLDS` heads and tails: every corner.
        #[test]
        fn the_densest_window_is_the_one_a_search_of_every_corner_finds(
            nodes in prop::collection::vec((0u32..40, 1u32..40, 0u32..3, 0u32..2), 0..60),
            alpha in 1u32..3,
        ) {
            let head: Vec<u32> = nodes.iter().map(|n| n.0).collect();
            let tail: Vec<u32> = nodes.iter().map(|n| n.1).collect();
            let need: Vec<[u32; 2]> = nodes.iter().map(|n| [n.2, n.3]).collect();
            let lane = |k: usize| need.iter().map(|x| x[k]).collect::<Vec<u32>>();
            let want = brute(&head, &tail, &lane(0), alpha)
                .zip(brute(&head, &tail, &lane(1), 1))
                .map(|(a, b)| [a, b]);
            prop_assert_eq!(densest_window(&head, &tail, &need, [alpha, 1]), want);
        }

        /// Past `THRESHOLDS`: no more than the best corner (a bound still), no less than the
        /// window of every node.
        #[test]
        fn a_spread_of_corners_is_between_the_whole_and_the_best(
            nodes in prop::collection::vec((0u32..300, 1u32..300, 0u32..3), 1..150),
        ) {
            let head: Vec<u32> = nodes.iter().map(|n| n.0).collect();
            let tail: Vec<u32> = nodes.iter().map(|n| n.1).collect();
            let need: Vec<[u32; 1]> = nodes.iter().map(|n| [n.2]).collect();
            let got = densest_window(&head, &tail, &need, [1]).unwrap()[0];
            let lane: Vec<u32> = need.iter().map(|x| x[0]).collect();
            prop_assert!(got <= brute(&head, &tail, &lane, 1).unwrap());
            let whole = (head.iter().min().unwrap() + tail.iter().min().unwrap()) as u64
                + lane.iter().map(|&x| x as u64).sum::<u64>();
            prop_assert!(got >= whole);
        }
    }

    /// Three independent nodes that each need a cycle, heads 0 and tails 1: 0 + 1 + 3. A late
    /// node that needs three: the window at its head, 5 + 1 + 3, not the one of both nodes,
    /// 0 + 1 + 4.
    #[test]
    fn a_window_of_late_nodes_binds() {
        assert_eq!(
            densest_window(&[0, 0, 0], &[1, 1, 1], &[[1], [1], [1]], [1]),
            Some([4])
        );
        assert_eq!(
            densest_window(&[0, 5], &[1, 1], &[[1], [3]], [1]),
            Some([9])
        );
        assert_eq!(densest_window::<1>(&[], &[], &[], [1]), None);
    }
}
