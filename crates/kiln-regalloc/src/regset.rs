//! The register model of seed 002: Runeson and Nyström's ⟨Regs, Conflict, Classes⟩, as Mesa's
//! `util/register_allocate.c` builds it, derived from any kiln [`Target`], with the p and q
//! values of the pq test. The design is in `docs/regalloc.md` ("Seed 002's register model").

use kiln_ir::{FileId, PhysReg, RegClass, Target};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// Index of an interned class in a [`RegModel`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct ClassId(pub u32);

/// ⟨Regs, Conflict, Classes⟩ for one target, with the p and q values of its classes. A compile
/// takes a copy of the model its target's cache holds: the classes' tables are shared between
/// copies (copied only where a copy interns a class of its own).
#[derive(Clone, Debug)]
pub struct RegModel {
    target: Arc<dyn Target>,
    classes: Arc<Classes>,
    /// `p(B)` of each class.
    p: Vec<u32>,
    /// Per file, per read port (`Target::read_port`), the port's units as bits, 64 to a word.
    ports: Arc<Vec<Vec<Vec<u64>>>>,
}

/// The interned classes and their registers.
#[derive(Clone, Debug, Default)]
struct Classes {
    list: Vec<RegClass>,
    ids: HashMap<RegClass, ClassId>,
    /// Allowed start units of each class, ascending.
    starts: Vec<Vec<u32>>,
    /// The same starts as bits, 64 units to a word.
    start_bits: Vec<Vec<u64>>,
    /// `below[c][u]`: how many starts of class c are below unit u (u up to the file's size).
    below: Vec<Vec<u32>>,
    /// `q(B, C)` at `b × classes + c`, every pair's: a class's row and column are found when it
    /// is interned, so that the colouring's loops read q with no check.
    q: Vec<u32>,
    /// The same at `c × classes + b`: the q of every class against one.
    q_against: Vec<u32>,
}

impl Classes {
    /// `q(B, C)`, the most registers of B one register of C blocks: for each register y of C
    /// the blocked starts of B lie in `[y − size(B) + 1, y + size(C))`, counted from the
    /// prefix table `below`. O(p(C)).
    fn compute_q(&self, b: usize, c: usize) -> u32 {
        let (cb, cc) = (self.list[b], self.list[c]);
        if cb.file != cc.file {
            return 0;
        }
        let below = &self.below[b];
        let top = below.len() as u32 - 1;
        self.starts[c]
            .iter()
            .map(|&y| {
                let lo = (y + 1).saturating_sub(cb.size as u32).min(top);
                let hi = (y + cc.size as u32).min(top);
                below[hi as usize] - below[lo as usize]
            })
            .max()
            .unwrap_or(0)
    }
}

impl RegModel {
    pub fn new(target: Arc<dyn Target>) -> RegModel {
        let ports = target
            .files()
            .iter()
            .enumerate()
            .map(|(f, file)| {
                let mut bits: Vec<Vec<u64>> = Vec::new();
                for u in 0..file.units {
                    if let Some(p) = target.read_port(FileId(f as u8), u) {
                        if bits.len() <= p as usize {
                            bits.resize(
                                p as usize + 1,
                                vec![0; (file.units as usize).div_ceil(64)],
                            );
                        }
                        bits[p as usize][u as usize / 64] |= 1 << (u % 64);
                    }
                }
                bits
            })
            .collect();
        RegModel {
            target,
            classes: Arc::default(),
            p: Vec::new(),
            ports: Arc::new(ports),
        }
    }

    /// The read ports of `file` (`Target::read_port`): per port, its units as bits, 64 units
    /// to a word.
    pub fn port_bits(&self, file: FileId) -> &[Vec<u64>] {
        self.ports.get(file.index()).map_or(&[], |p| p)
    }

    /// The id of `class`, interning it (its registers enumerated once: O(file units)).
    pub fn class_id(&mut self, class: RegClass) -> ClassId {
        if let Some(&id) = self.classes.ids.get(&class) {
            return id;
        }
        self.intern(class)
    }

    #[cold]
    fn intern(&mut self, class: RegClass) -> ClassId {
        let units = self
            .target
            .files()
            .get(class.file.index())
            .map_or(0, |f| f.units);
        let starts: Vec<u32> = (0..units)
            .filter(|&u| {
                PhysReg::try_new(class.file, u).is_some_and(|r| self.target.reg_fits(r, class))
            })
            .collect();
        let mut below = Vec::with_capacity(units as usize + 1);
        let mut n = 0;
        let mut next = starts.iter().peekable();
        for u in 0..=units {
            below.push(n);
            if next.peek() == Some(&&u) {
                next.next();
                n += 1;
            }
        }
        let mut bits = vec![0u64; (units as usize).div_ceil(64)];
        for &u in &starts {
            bits[u as usize / 64] |= 1 << (u % 64);
        }
        let old = self.p.len();
        self.p.push(starts.len() as u32);
        let classes = Arc::make_mut(&mut self.classes);
        let id = ClassId(classes.list.len() as u32);
        classes.list.push(class);
        classes.ids.insert(class, id);
        classes.starts.push(starts);
        classes.start_bits.push(bits);
        classes.below.push(below);
        // The q table one row and one column wider: the old entries, then the new class's
        // column and row (O(classes × units)).
        let k = old + 1;
        let mut q = vec![0; k * k];
        for b in 0..old {
            q[b * k..b * k + old].copy_from_slice(&classes.q[b * old..(b + 1) * old]);
        }
        for b in 0..k {
            q[b * k + old] = classes.compute_q(b, old);
            q[old * k + b] = classes.compute_q(old, b);
        }
        let mut against = vec![0; k * k];
        for b in 0..k {
            for c in 0..k {
                against[c * k + b] = q[b * k + c];
            }
        }
        classes.q = q;
        classes.q_against = against;
        id
    }

    pub fn class(&self, id: ClassId) -> RegClass {
        self.classes.list[id.0 as usize]
    }

    /// The registers of a class: its allowed start units.
    pub fn regs(&self, id: ClassId) -> &[u32] {
        &self.classes.starts[id.0 as usize]
    }

    /// `p(B)`: how many registers class B has.
    /// The target the model describes.
    pub fn target(&self) -> &dyn Target {
        &*self.target
    }

    /// The allowed start units of a class, ascending.
    pub fn starts(&self, c: ClassId) -> &[u32] {
        &self.classes.starts[c.0 as usize]
    }

    /// [`RegModel::starts`] as bits, 64 units to a word (as many words as the file needs).
    pub fn start_bits(&self, c: ClassId) -> &[u64] {
        &self.classes.start_bits[c.0 as usize]
    }

    #[inline]
    pub fn p(&self, b: ClassId) -> u32 {
        self.p[b.0 as usize]
    }

    /// Whether register `x` of class `a` and register `y` of class `b` share a unit.
    pub fn conflicts(&self, a: ClassId, x: u32, b: ClassId, y: u32) -> bool {
        let (ca, cb) = (self.class(a), self.class(b));
        ca.file == cb.file && x < y + cb.size as u32 && y < x + ca.size as u32
    }

    /// `q(B, C)`: the most registers of B one register of C blocks ([`Classes::compute_q`]).
    #[inline]
    pub fn q(&self, b: ClassId, c: ClassId) -> u32 {
        self.q_row(b)[c.0 as usize]
    }

    /// `q(B, C)` of every class C, indexed by C's id: for a loop over one class's neighbours.
    #[inline]
    pub fn q_row(&self, b: ClassId) -> &[u32] {
        let k = self.p.len();
        &self.classes.q[b.0 as usize * k..(b.0 as usize + 1) * k]
    }

    /// `q(B, C)` of every class B, indexed by B's id: for a loop over the neighbours of one
    /// class C.
    #[inline]
    pub fn q_against(&self, c: ClassId) -> &[u32] {
        let k = self.p.len();
        &self.classes.q_against[c.0 as usize * k..(c.0 as usize + 1) * k]
    }

    /// Interns every class of `classes` now (Mesa's `ra_set_finalize`).
    pub fn finalize(&mut self, classes: &[RegClass]) {
        for &c in classes {
            self.class_id(c);
        }
    }

    /// The pq test: a node of class `b` whose neighbours have the classes `neighbours` can be
    /// coloured whatever registers they take.
    pub fn trivially_colourable(
        &self,
        b: ClassId,
        neighbours: impl IntoIterator<Item = ClassId>,
    ) -> bool {
        let p = self.p(b);
        let mut sum = 0;
        for c in neighbours {
            sum += self.q(b, c);
            if sum >= p {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::generate::Rng;
    use kiln_ir::{GenericTarget, Target};

    /// Every class the generic target can name: both files, sizes 1–4, each subset of `v`.
    fn classes(t: &dyn Target) -> Vec<RegClass> {
        let mut out = Vec::new();
        for size in 1..=4 {
            for file in [GenericTarget::V, GenericTarget::S] {
                out.push(t.class(file, size));
            }
            for s in 0..t.subsets().len() {
                out.push(RegClass {
                    subset: Some(kiln_ir::SubsetId::new(s)),
                    ..t.class(GenericTarget::V, size)
                });
            }
        }
        out.retain(|&c| t.check_class(c).is_ok());
        out
    }

    /// q by its definition, two nested loops over the registers.
    fn q_brute(m: &RegModel, b: ClassId, c: ClassId) -> u32 {
        m.regs(c)
            .iter()
            .map(|&y| {
                m.regs(b)
                    .iter()
                    .filter(|&&x| m.conflicts(b, x, c, y))
                    .count() as u32
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn q_matches_its_definition() {
        for (v, s) in [(16, 8), (13, 5), (32, 7)] {
            let t = GenericTarget::arc(v, s);
            let all = classes(&*t);
            let mut m = RegModel::new(t);
            m.finalize(&all);
            let ids: Vec<ClassId> = all.iter().map(|&c| m.class_id(c)).collect();
            for &b in &ids {
                for &c in &ids {
                    assert_eq!(
                        m.q(b, c),
                        q_brute(&m, b, c),
                        "{:?} {:?}",
                        m.class(b),
                        m.class(c)
                    );
                }
            }
            // Same-size aligned classes: one register blocks exactly one; a vec4 blocks four
            // scalars; scalars of `low` and `high` never meet.
            let v1 = m.class_id(GenericTarget::new(v, s).class(GenericTarget::V, 1));
            let v4 = m.class_id(GenericTarget::new(v, s).class(GenericTarget::V, 4));
            assert_eq!(m.q(v1, v1), 1);
            assert_eq!(m.q(v1, v4), 4);
            assert_eq!(m.q(v4, v1), 1);
        }
    }

    /// The pq test's promise: whatever registers the neighbours take, a register is left.
    #[test]
    fn pq_test_is_sound() {
        let t = GenericTarget::arc(16, 8);
        let all = classes(&*t);
        let mut m = RegModel::new(t);
        let ids: Vec<ClassId> = all.iter().map(|&c| m.class_id(c)).collect();
        let mut rng = Rng::new(0x9e);
        let mut checked = 0;
        for _ in 0..20_000 {
            let b = ids[rng.below(ids.len())];
            let n = rng.below(8);
            let neighbours: Vec<ClassId> = (0..n).map(|_| ids[rng.below(ids.len())]).collect();
            if !m.trivially_colourable(b, neighbours.iter().copied()) {
                continue;
            }
            checked += 1;
            for _ in 0..4 {
                let taken: Vec<(ClassId, u32)> = neighbours
                    .iter()
                    .filter(|&&c| m.p(c) > 0)
                    .map(|&c| (c, m.regs(c)[rng.below(m.regs(c).len())]))
                    .collect();
                let free = m
                    .regs(b)
                    .iter()
                    .any(|&x| taken.iter().all(|&(c, y)| !m.conflicts(b, x, c, y)));
                assert!(free, "{:?} with {:?}", m.class(b), taken);
            }
        }
        assert!(checked > 5_000, "{checked}");
    }
}
