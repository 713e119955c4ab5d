//! A sorted set of temp indices: the sparse live sets of liveness (like ACO's `IDSet`), whose
//! size follows the number of live values, not the number of temps.

use kiln_ir::Temp;

#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct LiveSet(Vec<u32>);

impl LiveSet {
    pub fn new() -> Self {
        LiveSet(Vec::new())
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

    pub fn insert(&mut self, t: Temp) {
        if let Err(at) = self.0.binary_search(&t.0) {
            self.0.insert(at, t.0);
        }
    }

    /// `self ∪ {x ∈ other | keep(x)}` by merging.
    pub fn union_filtered(&self, other: &LiveSet, keep: impl Fn(u32) -> bool) -> LiveSet {
        let (a, b) = (&self.0, &other.0);
        let mut out = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            if j == b.len() || (i < a.len() && a[i] < b[j]) {
                out.push(a[i]);
                i += 1;
            } else if i == a.len() || b[j] < a[i] {
                if keep(b[j]) {
                    out.push(b[j]);
                }
                j += 1;
            } else {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
        LiveSet(out)
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &LiveSet) -> LiveSet {
        self.union_filtered(other, |_| true)
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
