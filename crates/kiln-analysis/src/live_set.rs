//! A sorted set of temp indices: the sparse live sets of liveness (like ACO's `IDSet`), whose
//! size follows the number of live values, not the number of temps.

use kiln_ir::Temp;

#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct LiveSet(Vec<u32>);

impl LiveSet {
    pub fn new() -> Self {
        LiveSet(Vec::new())
    }

    /// An empty set with room for `n` temps.
    pub fn with_capacity(n: usize) -> Self {
        LiveSet(Vec::with_capacity(n))
    }

    /// From indices in any order, with repeats.
    pub fn from_unsorted(mut v: Vec<u32>) -> Self {
        v.sort_unstable();
        v.dedup();
        LiveSet(v)
    }

    pub fn contains(&self, t: Temp) -> bool {
        self.0.binary_search(&t.0).is_ok()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = Temp> + '_ {
        self.0.iter().map(|&i| Temp(i))
    }

    /// Adds `t`; whether it was not in the set.
    pub fn insert(&mut self, t: Temp) -> bool {
        match self.0.binary_search(&t.0) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, t.0);
                true
            }
        }
    }

    /// Takes `t` out; whether it was in the set.
    pub fn remove(&mut self, t: Temp) -> bool {
        match self.0.binary_search(&t.0) {
            Ok(at) => {
                self.0.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// `self ∪= {x ∈ other | keep(x)}`, merging through `scratch` so that a warm buffer makes
    /// the update allocation-free.
    pub fn union_with(
        &mut self,
        other: &LiveSet,
        keep: impl Fn(u32) -> bool,
        scratch: &mut Vec<u32>,
    ) {
        if other.0.is_empty() {
            return;
        }
        scratch.clear();
        let (a, b) = (&self.0, &other.0);
        // The merge's size at most: one allocation, not one per doubling (the buffer is the
        // set swapped out last time, whose capacity is that set's).
        scratch.reserve(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            if j == b.len() || (i < a.len() && a[i] < b[j]) {
                scratch.push(a[i]);
                i += 1;
            } else if i == a.len() || b[j] < a[i] {
                if keep(b[j]) {
                    scratch.push(b[j]);
                }
                j += 1;
            } else {
                scratch.push(a[i]);
                i += 1;
                j += 1;
            }
        }
        std::mem::swap(&mut self.0, scratch);
    }

    /// Writes `gen ∪ (out \ defs)` into `self`; returns whether `self` changed.
    pub fn assign_transfer(
        &mut self,
        gen_: &LiveSet,
        out: &LiveSet,
        defs: &LiveSet,
        scratch: &mut Vec<u32>,
    ) -> bool {
        scratch.clear();
        let (g, o, d) = (&gen_.0, &out.0, &defs.0);
        scratch.reserve(g.len() + o.len());
        let (mut i, mut j, mut k) = (0, 0, 0);
        while i < g.len() || j < o.len() {
            // Next candidate from `out`, skipping definitions.
            let from_out = loop {
                if j == o.len() {
                    break None;
                }
                while k < d.len() && d[k] < o[j] {
                    k += 1;
                }
                if k < d.len() && d[k] == o[j] {
                    j += 1;
                    continue;
                }
                break Some(o[j]);
            };
            match (g.get(i).copied(), from_out) {
                (Some(x), Some(y)) if x == y => {
                    scratch.push(x);
                    i += 1;
                    j += 1;
                }
                (Some(x), Some(y)) if x < y => {
                    scratch.push(x);
                    i += 1;
                }
                (Some(x), None) => {
                    scratch.push(x);
                    i += 1;
                }
                (_, Some(y)) => {
                    scratch.push(y);
                    j += 1;
                }
                (None, None) => break,
            }
        }
        if *scratch == self.0 {
            return false;
        }
        std::mem::swap(&mut self.0, scratch);
        true
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &LiveSet) -> LiveSet {
        let mut out = self.clone();
        out.union_with(other, |_| true, &mut Vec::new());
        out
    }

    /// `self \ other`.
    pub fn difference(&self, other: &LiveSet) -> LiveSet {
        let mut j = 0;
        let b = &other.0;
        LiveSet(
            self.0
                .iter()
                .copied()
                .filter(|&x| {
                    while j < b.len() && b[j] < x {
                        j += 1;
                    }
                    !(j < b.len() && b[j] == x)
                })
                .collect(),
        )
    }
}

/// What is live while a block is walked backwards: the values in a list, each with its place in
/// it and the step of the walk at which it became live, so that a value leaves in O(1) and the
/// steps it was live are known when it leaves (graph colouring's live-range lengths).
#[derive(Clone, Debug)]
pub struct LiveList {
    list: Vec<u32>,
    place: Vec<u32>,
    entered: Vec<i64>,
}

impl LiveList {
    const ABSENT: u32 = u32::MAX;

    /// An empty list for temps numbered below `n`.
    pub fn new(n: usize) -> LiveList {
        LiveList {
            list: Vec::new(),
            place: vec![Self::ABSENT; n],
            entered: vec![0; n],
        }
    }

    /// The live values, in no particular order.
    pub fn list(&self) -> &[u32] {
        &self.list
    }

    /// `t` becomes live at `step` (nothing if it is).
    pub fn enter(&mut self, t: u32, step: i64) {
        if self.place[t as usize] == Self::ABSENT {
            self.place[t as usize] = self.list.len() as u32;
            self.list.push(t);
            self.entered[t as usize] = step;
        }
    }

    /// `t` leaves at `step`: the steps it was live, after the one it entered at up to and
    /// including this one (`None` if it was not live).
    pub fn leave(&mut self, t: u32, step: i64) -> Option<u32> {
        let k = self.place[t as usize];
        if k == Self::ABSENT {
            return None;
        }
        self.list.swap_remove(k as usize);
        if let Some(&moved) = self.list.get(k as usize) {
            self.place[moved as usize] = k;
        }
        self.place[t as usize] = Self::ABSENT;
        Some((step - self.entered[t as usize]) as u32)
    }

    /// Everything leaves.
    pub fn clear(&mut self) {
        for &t in &self.list {
            self.place[t as usize] = Self::ABSENT;
        }
        self.list.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Inserting and removing gives the set (and the answers) of std's ordered set, in
        /// its order.
        #[test]
        fn insert_and_remove_agree_with_btreeset(ops in prop::collection::vec((any::<bool>(), 0u32..40), 0..200)) {
            let (mut set, mut oracle) = (LiveSet::new(), BTreeSet::new());
            for (insert, t) in ops {
                let (got, want) = if insert {
                    (set.insert(Temp(t)), oracle.insert(t))
                } else {
                    (set.remove(Temp(t)), oracle.remove(&t))
                };
                prop_assert_eq!(got, want);
                prop_assert_eq!(set.contains(Temp(t)), oracle.contains(&t));
            }
            prop_assert_eq!(set.iter().map(|t| t.0).collect::<Vec<_>>(), oracle.into_iter().collect::<Vec<_>>());
        }
    }
}
