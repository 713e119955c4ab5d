//! The shortest schedule of a small block by branch and bound, within a budget of search
//! steps: for each length from a lower bound up, a depth-first search cycle by cycle for a
//! schedule that long (Shobaki and Wilken, "Optimal superblock scheduling using enumeration",
//! MICRO 2004, and the enumeration of van Beek's and Wilken's basic-block schedulers). A length
//! the search rules out entirely is a lower bound for every schedule the DAG and the pair rule
//! allow — what the list scheduler is measured against, and where it falls short, a shorter
//! schedule.
//!
//! The search only tries what some shortest schedule does. A cycle with a ready node issues
//! one (any node of a schedule that waits could move into the idle cycle: it is ready, and
//! issuing earlier only frees its successors), and a node goes alone only when no ready node
//! pairs with it (that node could move up beside it). A branch ends where a node's path to the
//! end, or a resource's remaining need, no longer fits the length, and where the same state (the
//! nodes issued, the cycles the others still wait) already failed with as many cycles left.

use crate::dag::Dag;
use crate::list::Slot;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

/// The most nodes a block may have for [`shortest`].
pub const MOST_NODES: usize = 64;

/// What [`shortest`] found: a schedule shorter than `upper`, if any, and the first length not
/// ruled out (from `lower` on: a bound on every schedule's length where `lower` is one, and
/// then a found schedule is a shortest one, that long).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub schedule: Option<Vec<Slot>>,
    pub bound: usize,
}

/// The search for a schedule of `dag` shorter than `upper` cycles: node v issues no sooner than
/// `earliest[v]`, and a cycle's nodes need of each resource k `need[v][k]`, at most `alpha[k]` a
/// cycle; `pairs(a, b)` says whether a and b issue together with `a` first in the slot (a pair
/// either way round is tried, in the order `pairs` allows). Lengths from `lower` (a lower bound, or where the search is to start) up, each searched
/// to the end or until `budget` search steps are spent: the bound is the first length not ruled
/// out (`upper` where every shorter one is). A state that fails with some cycles left fails
/// with fewer too, so what failed at one length prunes the next. `None` for a block of more
/// than [`MOST_NODES`] nodes.
pub fn shortest<const K: usize>(
    dag: &Dag,
    earliest: &[u32],
    need: &[[u32; K]],
    alpha: [u32; K],
    pairs: impl FnMut(u32, u32) -> bool,
    (lower, upper): (usize, usize),
    budget: &mut u64,
) -> Option<Found> {
    let n = dag.len();
    if n > MOST_NODES {
        return None;
    }
    let mut s = Search::new(dag, earliest, need, alpha, pairs);
    let mut bound = lower;
    while bound < upper {
        match s.dfs(0, bound as u32, 0, budget) {
            Some(true) => {
                return Some(Found {
                    schedule: Some(std::mem::take(&mut s.slots)),
                    bound,
                });
            }
            Some(false) => bound += 1,
            None => break,
        }
    }
    Some(Found {
        schedule: None,
        bound,
    })
}

struct Search<'a, P, const K: usize> {
    need: &'a [[u32; K]],
    alpha: [u32; K],
    pairs: P,
    /// Per node, its successors with the latency of each edge.
    succs: Vec<SmallVec<[(u32, u8); 4]>>,
    pred_mask: Vec<u64>,
    /// Per node, the first cycle it may issue in after the nodes issued (the others not
    /// counted), and the values it replaced, to undo.
    at: Vec<u32>,
    undo: Vec<(u32, u32)>,
    /// Per node, the successors whose every edge from it has no latency: they may issue in its
    /// cycle.
    same_cycle: Vec<u64>,
    /// Per node, the cycles from its issue to the end, its own included.
    tail: Vec<u32>,
    /// Per pair of nodes, whether they pair: 0 not asked yet, 1 no, 2 with the first node first,
    /// 3 with the second first.
    paired: Vec<u8>,
    remaining: [u64; K],
    slots: Vec<Slot>,
    /// States that failed, with the most cycles they had left.
    memo: FxHashMap<(u64, SmallVec<[u8; 16]>), u32>,
}

impl<'a, P: FnMut(u32, u32) -> bool, const K: usize> Search<'a, P, K> {
    fn new(
        dag: &Dag,
        earliest: &'a [u32],
        need: &'a [[u32; K]],
        alpha: [u32; K],
        pairs: P,
    ) -> Self {
        let n = dag.len();
        let mut succs: Vec<SmallVec<[(u32, u8); 4]>> = vec![SmallVec::new(); n];
        let mut pred_mask = vec![0u64; n];
        let mut timed = vec![0u64; n];
        for (v, out) in dag.succs.iter().enumerate() {
            for e in out {
                succs[v].push((e.to, e.latency));
                pred_mask[e.to as usize] |= 1 << v;
                if e.latency > 0 {
                    timed[v] |= 1 << e.to;
                }
            }
        }
        let mut same_cycle = vec![0u64; n];
        for v in 0..n {
            for e in &dag.succs[v] {
                if timed[v] & 1 << e.to == 0 {
                    same_cycle[v] |= 1 << e.to;
                }
            }
        }
        let mut tail = vec![1u32; n];
        for v in (0..n).rev() {
            for e in &dag.succs[v] {
                tail[v] = tail[v].max(tail[e.to as usize] + e.latency as u32);
            }
        }
        let mut remaining = [0u64; K];
        for x in need {
            for k in 0..K {
                remaining[k] += x[k] as u64;
            }
        }
        Search {
            need,
            alpha,
            pairs,
            succs,
            pred_mask,
            at: earliest.to_vec(),
            undo: Vec::new(),
            same_cycle,
            tail,
            paired: vec![0; n * n],
            remaining,
            slots: Vec::with_capacity(n),
            memo: FxHashMap::default(),
        }
    }

    /// Issues `v` in `cycle`: its successors wait for it.
    fn issue(&mut self, v: u32, cycle: u32) {
        for &(s, lat) in &self.succs[v as usize] {
            let at = &mut self.at[s as usize];
            self.undo.push((s, *at));
            *at = (*at).max(cycle + lat as u32);
        }
        for k in 0..K {
            self.remaining[k] -= self.need[v as usize][k] as u64;
        }
    }

    /// Takes back [`Search::issue`] of `v`.
    fn take_back(&mut self, v: u32) {
        for _ in 0..self.succs[v as usize].len() {
            let (s, at) = self.undo.pop().expect("an issue to take back");
            self.at[s as usize] = at;
        }
        for k in 0..K {
            self.remaining[k] += self.need[v as usize][k] as u64;
        }
    }

    /// Whether `a` and `b` pair, and which goes first in the slot.
    fn pair(&mut self, a: u32, b: u32) -> Option<Slot> {
        let n = self.at.len();
        let (lo, hi) = (a.min(b), a.max(b));
        let at = lo as usize * n + hi as usize;
        if self.paired[at] == 0 {
            self.paired[at] = if (self.pairs)(lo, hi) {
                2
            } else if (self.pairs)(hi, lo) {
                3
            } else {
                1
            };
        }
        match self.paired[at] {
            2 => Some([Some(lo), Some(hi)]),
            3 => Some([Some(hi), Some(lo)]),
            _ => None,
        }
    }

    /// Whether the nodes not `issued` can all issue from cycle `cycle` on within `length`
    /// cycles (`None`: the budget ran out first). On success `slots` holds the schedule.
    fn dfs(&mut self, cycle: u32, length: u32, issued: u64, budget: &mut u64) -> Option<bool> {
        let n = self.at.len();
        if issued.count_ones() as usize == n {
            return Some(true);
        }
        *budget = budget.checked_sub(1)?;
        for k in 0..K {
            let cycles = self.remaining[k].div_ceil(self.alpha[k] as u64);
            if cycle as u64 + cycles > length as u64 {
                return Some(false);
            }
        }
        let mut ready = 0u64;
        let mut next = u32::MAX;
        let mut key: SmallVec<[u8; 16]> = SmallVec::new();
        // (A wait past a byte leaves the state out of the memo.)
        let mut keyed = true;
        let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        for v in bits(all & !issued) {
            let v = v as usize;
            let at = self.at[v];
            if at.max(cycle) + self.tail[v] > length {
                return Some(false);
            }
            if at > cycle {
                key.push(v as u8);
                key.push((at - cycle).min(255) as u8);
                keyed &= at - cycle < 255;
            }
            if self.pred_mask[v] & !issued == 0 {
                if at <= cycle {
                    ready |= 1 << v;
                } else {
                    next = next.min(at);
                }
            }
        }
        let left = length - cycle;
        let key = (issued, key);
        if keyed && self.memo.get(&key).is_some_and(|&l| l >= left) {
            return Some(false);
        }
        let found = if ready == 0 {
            // Nothing ready: the cycles until the first node is are `nop`s.
            let depth = self.slots.len();
            self.slots
                .extend(std::iter::repeat_n([None, None], (next - cycle) as usize));
            let r = self.dfs(next, length, issued, budget)?;
            if !r {
                self.slots.truncate(depth);
            }
            r
        } else {
            self.branch(cycle, length, issued, ready, budget)?
        };
        if !found && keyed {
            let e = self.memo.entry(key).or_insert(0);
            *e = (*e).max(left);
        }
        Some(found)
    }

    /// Tries each way the `ready` nodes may issue in `cycle`: the pairs, then each node that
    /// pairs with none alone, the longest paths first.
    fn branch(
        &mut self,
        cycle: u32,
        length: u32,
        issued: u64,
        ready: u64,
        budget: &mut u64,
    ) -> Option<bool> {
        let mut nodes: SmallVec<[u32; 16]> = bits(ready).collect();
        nodes.sort_by_key(|&v| std::cmp::Reverse(self.tail[v as usize]));
        let mut options: SmallVec<[(u32, Slot); 32]> = SmallVec::new();
        for (i, &x) in nodes.iter().enumerate() {
            let mut alone = true;
            for &y in &nodes[i + 1..] {
                if let Some(slot) = self.pair(x, y) {
                    options.push((self.tail[x as usize] + self.tail[y as usize], slot));
                    alone = false;
                }
            }
            // A successor that may issue in x's cycle, ready once x issues.
            for y in bits(self.same_cycle[x as usize]) {
                let with_x = issued | 1 << x;
                if self.pred_mask[y as usize] & !with_x == 0
                    && self.at[y as usize] <= cycle
                    && let Some(slot) = self.pair(x, y)
                {
                    options.push((self.tail[x as usize] + self.tail[y as usize], slot));
                    alone = false;
                }
            }
            let paired_with_earlier = nodes[..i].iter().any(|&w| self.pair(w, x).is_some());
            if alone && !paired_with_earlier {
                options.push((self.tail[x as usize], [Some(x), None]));
            }
        }
        options.sort_by_key(|o| std::cmp::Reverse(o.0));
        for (_, slot) in options {
            let mut now = issued;
            for &v in slot.iter().flatten() {
                self.issue(v, cycle);
                now |= 1 << v;
            }
            self.slots.push(slot);
            let r = self.dfs(cycle + 1, length, now, budget);
            for &v in slot.iter().flatten().rev() {
                self.take_back(v);
            }
            match r {
                Some(true) => return Some(true),
                Some(false) => {
                    self.slots.pop();
                }
                None => return None,
            }
        }
        Some(false)
    }
}

/// The set bits of `x`, lowest first.
fn bits(mut x: u64) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        (x != 0).then(|| {
            let b = x.trailing_zeros();
            x &= x - 1;
            b
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::Access;
    use proptest::prelude::*;
    use std::collections::HashSet;

    /// A random block of up to `most` nodes: each reads and writes a few of 5 resources,
    /// latencies 0–3 (0: a write after a read in one instruction), one need of two kinds, with
    /// the first kind's nodes issuing at most two to a cycle and the second's one.
    fn block(most: usize) -> impl Strategy<Value = (Vec<Vec<Access>>, Vec<[u32; 2]>, Vec<u32>)> {
        prop::collection::vec(
            (crate::dag::random_node(5), 0u32..2, 0u32..2, 0u32..3),
            1..most,
        )
        .prop_map(|nodes| {
            let mut accesses = Vec::new();
            let mut need = Vec::new();
            let mut earliest = Vec::new();
            for (node, ops, uniform, first) in nodes {
                accesses.push(node);
                need.push([1 + ops, uniform]);
                earliest.push(first);
            }
            (accesses, need, earliest)
        })
    }

    const ALPHA: [u32; 2] = [2, 1];

    /// The pair rule of the random blocks: within the needs' limits, and not every pair, nor
    /// every pair either way round.
    fn pairs_of(need: &[[u32; 2]]) -> impl Fn(u32, u32) -> bool + '_ {
        move |a: u32, b: u32| {
            let (x, y) = (need[a as usize], need[b as usize]);
            x[0] + y[0] <= 2 && x[1] + y[1] <= 1 && (a + 2 * b) % 5 != 0
        }
    }

    /// Every schedule's shortest length, by trying everything a cycle may do — nothing, any
    /// ready node, any two that pair, a node's successor with it where their edge has no
    /// latency — breadth first over the states (the nodes issued, each node's earliest cycle
    /// after them, relative to now).
    fn brute_force(dag: &Dag, earliest: &[u32], pairs: &dyn Fn(u32, u32) -> bool) -> usize {
        let n = dag.len();
        let mut preds: Vec<Vec<(usize, u32)>> = vec![Vec::new(); n];
        for (v, s) in dag.succs.iter().enumerate() {
            for e in s {
                preds[e.to as usize].push((v, e.latency as u32));
            }
        }
        // A state: per node, its cycle (None: not yet); the cycle now.
        let mut states: HashSet<Vec<Option<u32>>> = HashSet::from([vec![None; n]]);
        for cycle in 0u32.. {
            let mut next = HashSet::new();
            for s in &states {
                if s.iter().all(Option::is_some) {
                    return cycle as usize;
                }
                // May v issue now, with `with` issuing in this cycle too?
                let may = |v: usize, with: Option<usize>| {
                    s[v].is_none()
                        && earliest[v] <= cycle
                        && preds[v].iter().all(|&(p, lat)| match s[p] {
                            Some(t) => t + lat <= cycle,
                            None => {
                                with == Some(p)
                                    && lat == 0
                                    && preds[v].iter().all(|&(q, l)| q != p || l == 0)
                            }
                        })
                };
                let mut choices: Vec<Vec<usize>> = vec![vec![]];
                for a in 0..n {
                    if may(a, None) {
                        choices.push(vec![a]);
                    }
                    for b in 0..n {
                        if a != b
                            && may(a, None)
                            && (may(b, None) || may(b, Some(a)))
                            && (pairs(a as u32, b as u32) || pairs(b as u32, a as u32))
                        {
                            choices.push(vec![a, b]);
                        }
                    }
                }
                for c in choices {
                    let mut t = s.clone();
                    for v in c {
                        t[v] = Some(cycle);
                    }
                    next.insert(t);
                }
            }
            states = next;
        }
        unreachable!()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// The search's bound is every schedule's shortest length where the search finishes
        /// (the list schedule's where that is shortest), and its schedule keeps every edge's
        /// latency, every earliest cycle and the pair rule.
        #[test]
        fn the_shortest_schedule_is_the_shortest((nodes, need, earliest) in block(7)) {
            let dag = Dag::build(nodes.iter().map(Vec::as_slice), 5);
            let pairs = pairs_of(&need);
            let classes = vec![0; dag.len()];
            let list = crate::schedule(&dag, &earliest, &classes, &dag.critical_path(), &pairs);
            let shortest_of_all = brute_force(&dag, &earliest, &pairs);
            prop_assert!(shortest_of_all <= list.len());
            let mut budget = 1 << 20;
            let found = shortest(&dag, &earliest, &need, ALPHA, &pairs, (0, list.len()), &mut budget).unwrap();
            prop_assert!(budget > 0, "the search finishes on a small block");
            prop_assert_eq!(found.bound, shortest_of_all);
            match &found.schedule {
                None => prop_assert_eq!(shortest_of_all, list.len()),
                Some(s) => {
                    prop_assert_eq!(s.len(), shortest_of_all);
                    let mut cycle = vec![None; dag.len()];
                    for (c, slot) in s.iter().enumerate() {
                        if let [Some(a), Some(b)] = *slot {
                            prop_assert!(pairs(a, b), "{a} before {b}");
                        }
                        for &v in slot.iter().flatten() {
                            prop_assert!(cycle[v as usize].is_none());
                            cycle[v as usize] = Some(c as u32);
                            prop_assert!(earliest[v as usize] <= c as u32);
                        }
                    }
                    for (v, succs) in dag.succs.iter().enumerate() {
                        for e in succs {
                            let (a, b) = (cycle[v].unwrap(), cycle[e.to as usize].unwrap());
                            prop_assert!(b >= a + e.latency as u32, "edge {v} → {} of latency {}: cycles {a}, {b}", e.to, e.latency);
                        }
                    }
                }
            }
        }

        /// With too small a budget the bound is still a bound, and a schedule found is no
        /// longer than the list schedule.
        #[test]
        fn a_spent_budget_leaves_a_bound((nodes, need, earliest) in block(24), steps in 0u64..200) {
            let dag = Dag::build(nodes.iter().map(Vec::as_slice), 5);
            let pairs = pairs_of(&need);
            let classes = vec![0; dag.len()];
            let list = crate::schedule(&dag, &earliest, &classes, &dag.critical_path(), &pairs);
            let mut budget = steps;
            let found = shortest(&dag, &earliest, &need, ALPHA, &pairs, (0, list.len()), &mut budget).unwrap();
            let mut full = 1 << 22;
            let best = shortest(&dag, &earliest, &need, ALPHA, &pairs, (0, list.len()), &mut full).unwrap();
            prop_assert!(found.bound <= best.bound);
            prop_assert!(found.schedule.as_ref().is_none_or(|s| s.len() < list.len()));
        }
    }

    /// A write after a read may issue in the read's cycle; the slot has the two in the order
    /// the pair rule allows, here the writer first.
    #[test]
    fn a_pair_across_an_edge_of_no_latency_keeps_the_rule_s_order() {
        let read = vec![Access::Read {
            resource: 0,
            after: 0,
        }];
        let write = vec![Access::Write {
            resource: 0,
            latency: 1,
            waw: 1,
            war: 0,
            delay: 0,
        }];
        let dag = Dag::build([read.as_slice(), write.as_slice()], 1);
        let pairs = |a: u32, b: u32| a == 1 && b == 0;
        let mut budget = 100;
        let found = shortest(&dag, &[0, 0], &[[1u32]; 2], [2], pairs, (0, 2), &mut budget);
        let found = found.unwrap();
        assert_eq!(found.bound, 1);
        assert_eq!(found.schedule, Some(vec![[Some(1), Some(0)]]));
    }

    #[test]
    fn a_block_past_the_limit_is_not_searched() {
        let nodes = vec![vec![]; MOST_NODES + 1];
        let dag = Dag::build(nodes.iter().map(Vec::as_slice), 1);
        let need = vec![[1u32]; MOST_NODES + 1];
        let mut budget = 100;
        let found = shortest(
            &dag,
            &vec![0; MOST_NODES + 1],
            &need,
            [2],
            |_, _| true,
            (0, 40),
            &mut budget,
        );
        assert_eq!(found, None);
    }
}
