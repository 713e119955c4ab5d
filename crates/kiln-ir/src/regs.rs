//! The register model: files, classes, physical registers, per-file demand, and the `Target`
//! description every target provides (DESIGN.md §3).

use crate::opcode::{Arity, OpInfo};
use crate::target_op::{ClassReq, TargetOpInfo};
use fixedbitset::FixedBitSet;
use std::fmt;
use std::num::{NonZeroU16, NonZeroU32};
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::sync::Arc;

/// Most register files a target may declare (the width of [`Demand`]).
pub const MAX_FILES: usize = 4;

/// Index of a register file in its target's [`Target::files`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct FileId(pub u8);

impl FileId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Whether a file holds one value per lane or one value for the whole wave.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lanes {
    /// A value per lane; a normal write changes only the active lanes (logical liveness).
    PerLane,
    /// One value shared by all lanes; every write changes it (linear liveness).
    Uniform,
}

/// A register file: `units` 32-bit registers.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RegFile {
    pub name: String,
    pub units: u32,
    pub lanes: Lanes,
}

/// Index of a subset in its target's [`Target::subsets`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct SubsetId(NonZeroU16);

impl SubsetId {
    /// The subset at `index` (panics past `u16::MAX - 1`: targets declare a handful).
    pub fn new(index: usize) -> SubsetId {
        let raw = u16::try_from(index + 1).expect("subset index fits in 16 bits");
        SubsetId(NonZeroU16::new(raw).expect("index + 1 is not zero"))
    }

    pub fn index(self) -> usize {
        self.0.get() as usize - 1
    }
}

/// A set of units of one register file, as a bit mask.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct UnitMask(FixedBitSet);

impl UnitMask {
    /// The units of `units` (each below `file_units`).
    pub fn from_units(file_units: u32, units: impl IntoIterator<Item = u32>) -> UnitMask {
        let mut bits = FixedBitSet::with_capacity(file_units as usize);
        for u in units {
            bits.insert(u as usize);
        }
        UnitMask(bits)
    }

    /// The units `range` (word at a time).
    pub fn range(file_units: u32, range: std::ops::Range<u32>) -> UnitMask {
        let mut bits = FixedBitSet::with_capacity(file_units as usize);
        bits.insert_range(range.start as usize..range.end as usize);
        UnitMask(bits)
    }

    /// Every `step`-th unit from 0 (`step` ≤ 64 and dividing 64; word at a time).
    pub fn every(file_units: u32, step: u32) -> UnitMask {
        let pattern = (0..64).step_by(step as usize).fold(0u64, |w, b| w | 1 << b);
        let words = (file_units as usize).div_ceil(64);
        let mut bits = FixedBitSet::with_capacity_and_blocks(
            words * 64,
            std::iter::repeat_n(pattern as usize, words * 64 / usize::BITS as usize),
        );
        // Nothing past the file.
        bits.set_range(file_units as usize.., false);
        UnitMask(bits)
    }

    pub fn contains(&self, unit: u32) -> bool {
        self.0.contains(unit as usize)
    }

    pub fn intersection(&self, other: &UnitMask) -> UnitMask {
        let mut bits = self.0.clone();
        bits.intersect_with(&other.0);
        UnitMask(bits)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_clear()
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.ones().map(|u| u as u32)
    }

    pub fn count(&self) -> usize {
        self.0.count_ones(..)
    }

    /// Same units, whatever the capacity each was built with (word by word).
    pub fn same_units(&self, other: &UnitMask) -> bool {
        let (a, b) = (self.0.as_slice(), other.0.as_slice());
        let n = a.len().min(b.len());
        a[..n] == b[..n] && a[n..].iter().chain(&b[n..]).all(|&w| w == 0)
    }
}

/// A subset of the positions of one file where a class may start (vc4's "a_or_b"...), as a bit
/// mask over the file's units.
///
/// A target's subsets are closed under intersection ([`close_under_intersection`]), so narrowing
/// a class by the constraints of every use (seed 002) always names a subset. A generated
/// intersection is named by its members joined with `.`, which is how the text format writes a
/// class with several subset attributes (`r1.a_or_b.r4_or_a`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RegSubset {
    pub name: String,
    pub file: FileId,
    /// Allowed start units.
    pub units: UnitMask,
}

/// Adds the non-empty intersections of every pair of subsets of a file, to a fixpoint, skipping
/// masks already present; the result is closed under intersection. Targets call this once when
/// they are built (the number of distinct intersections of a real target's classes is small).
pub fn close_under_intersection(mut subsets: Vec<RegSubset>) -> Vec<RegSubset> {
    let mut i = 0;
    while i < subsets.len() {
        for j in 0..i {
            if subsets[i].file != subsets[j].file {
                continue;
            }
            let units = subsets[i].units.intersection(&subsets[j].units);
            if units.is_empty()
                || subsets
                    .iter()
                    .any(|s| s.file == subsets[i].file && s.units.same_units(&units))
            {
                continue;
            }
            subsets.push(RegSubset {
                name: format!("{}.{}", subsets[j].name, subsets[i].name),
                file: subsets[i].file,
                units,
            });
        }
        i += 1;
    }
    subsets
}

/// A register class: a file, a size in units, an alignment of the first unit, and optionally a
/// target subset of allowed start positions.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct RegClass {
    pub file: FileId,
    pub size: u8,
    pub align: u8,
    pub subset: Option<SubsetId>,
}

impl RegClass {
    /// The class of a temp number that no instruction defines (never valid in a function).
    pub const NONE: RegClass = RegClass {
        file: FileId(0),
        size: 0,
        align: 0,
        subset: None,
    };

    pub fn is_none(self) -> bool {
        self.size == 0
    }
}

/// A physical register: the first unit of a value in a file, packed in 32 bits (file in the top
/// 8 bits, unit + 1 in the low 24), so that `Option<PhysReg>` is 4 bytes too.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PhysReg(NonZeroU32);

impl PhysReg {
    /// Highest unit a physical register may name.
    pub const MAX_UNIT: u32 = (1 << 24) - 2;

    /// The register at `unit` of `file`, if `unit` is at most [`PhysReg::MAX_UNIT`].
    pub fn try_new(file: FileId, unit: u32) -> Option<PhysReg> {
        if unit > Self::MAX_UNIT {
            return None;
        }
        NonZeroU32::new(((file.0 as u32) << 24) | (unit + 1)).map(PhysReg)
    }

    /// The register at `unit` of `file` (panics past [`PhysReg::MAX_UNIT`]).
    pub fn new(file: FileId, unit: u32) -> PhysReg {
        Self::try_new(file, unit).expect("register unit within PhysReg::MAX_UNIT")
    }

    pub fn file(self) -> FileId {
        FileId((self.0.get() >> 24) as u8)
    }

    pub fn unit(self) -> u32 {
        (self.0.get() & 0xff_ffff) - 1
    }

    /// Units `[unit, unit + size)`, or `None` when they run past `file_units`.
    pub fn units(self, size: u8, file_units: u32) -> Option<std::ops::Range<u32>> {
        let end = self.unit().checked_add(size as u32)?;
        (end <= file_units).then_some(self.unit()..end)
    }
}

impl fmt::Debug for PhysReg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PhysReg({}, {})", self.file().0, self.unit())
    }
}

/// Register demand per file, in units (seed 000).
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug, Hash)]
pub struct Demand(pub [i32; MAX_FILES]);

impl Demand {
    pub const ZERO: Demand = Demand([0; MAX_FILES]);

    /// The demand of one value of class `class`.
    pub fn of(class: RegClass) -> Demand {
        let mut d = Demand::ZERO;
        d.0[class.file.index()] = class.size as i32;
        d
    }

    pub fn get(self, file: FileId) -> i32 {
        self.0[file.index()]
    }

    /// Element-wise maximum.
    pub fn max(self, other: Demand) -> Demand {
        let mut d = self;
        for (a, b) in d.0.iter_mut().zip(other.0) {
            *a = (*a).max(b);
        }
        d
    }

    /// True when some file exceeds `budget`'s value for it.
    pub fn exceeds(self, budget: Demand) -> bool {
        self.0.iter().zip(budget.0).any(|(a, b)| *a > b)
    }
}

impl Add for Demand {
    type Output = Demand;
    fn add(mut self, rhs: Demand) -> Demand {
        self += rhs;
        self
    }
}

impl AddAssign for Demand {
    fn add_assign(&mut self, rhs: Demand) {
        for (a, b) in self.0.iter_mut().zip(rhs.0) {
            *a += b;
        }
    }
}

impl Sub for Demand {
    type Output = Demand;
    fn sub(mut self, rhs: Demand) -> Demand {
        self -= rhs;
        self
    }
}

impl SubAssign for Demand {
    fn sub_assign(&mut self, rhs: Demand) {
        for (a, b) in self.0.iter_mut().zip(rhs.0) {
            *a -= b;
        }
    }
}

/// What a target tells the IR about itself: its register files, subsets, and class rules.
pub trait Target: fmt::Debug + Send + Sync {
    /// Name as written in `target NAME(...)`.
    fn name(&self) -> &str;
    /// Parameters as written inside the parentheses of the `target` line, `key=value` pairs.
    fn params(&self) -> Vec<(String, u32)>;
    /// The value of parameter `name`, if the target has it: [`Target::params`] without
    /// building the list (a target overrides it where it knows its parameters).
    fn param(&self, name: &str) -> Option<u32> {
        self.params()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }
    /// Register files; at most [`MAX_FILES`].
    fn files(&self) -> &[RegFile];
    /// Named subsets of start positions.
    fn subsets(&self) -> &[RegSubset] {
        &[]
    }
    /// The target's own opcodes (`crate::target_op`), named apart from the shared ones.
    fn opcodes(&self) -> &'static [crate::target_op::TargetOpInfo] {
        &[]
    }
    /// Largest value size in units a file allows.
    fn max_size(&self, _file: FileId) -> u8 {
        4
    }
    /// Alignment a class of `size` units gets unless it says otherwise.
    fn default_align(&self, _file: FileId, size: u8) -> u8 {
        // Sizes past 128 are invalid anyway (`check_class` says why); do not overflow on them.
        size.checked_next_power_of_two().unwrap_or(1)
    }

    /// Graph colouring's pick among `free`, the starts a value of `class` may take that no
    /// neighbour blocks — Mesa's `ra_set_select_reg_callback` — as bits, 64 units to a word
    /// (never all clear; [`unit_in`] tests one). `cursor` is state the target keeps across one
    /// allocation's picks (round-robin positions), zero at first. The default takes the lowest
    /// start.
    fn select_register(&self, _class: RegClass, free: &[u64], _cursor: &mut [u32; 2]) -> u32 {
        lowest_unit(free)
    }

    /// The read port through which an instruction reads register `unit` of `file`, for
    /// registers that share one address field per port (vc4's files A and B: one A and one B
    /// address per instruction). Graph colouring keeps the operands of one instruction on
    /// different ports where it can, which saves the emitter a copy. None: no port limit.
    fn read_port(&self, _file: FileId, _unit: u32) -> Option<u8> {
        None
    }

    /// The read port an instruction spends on constant operand `value` (vc4: a small
    /// immediate takes the B port), or None.
    fn constant_read_port(&self, _value: u32) -> Option<u8> {
        None
    }

    /// Whether graph colouring colours short live ranges first (seed 002, Mesa vc4's temp
    /// order: short-lived values then take the registers the pick prefers, the accumulators).
    /// Otherwise values colour in the order of their definitions (a dominance order, which
    /// colours an SSA program's chordal interference graph with the fewest registers).
    fn short_ranges_first(&self) -> bool {
        false
    }

    /// The target's own name of a register (vc4: `ra5`, `rb3`, `r4`), which the `.kir` text
    /// prints instead of `file[unit]`; `None` for the plain form.
    fn reg_name(&self, _reg: PhysReg) -> Option<String> {
        None
    }

    /// The register [`Target::reg_name`] calls `name`.
    fn reg_by_name(&self, _name: &str) -> Option<PhysReg> {
        None
    }

    /// Looks a file up by name.
    fn file_by_name(&self, name: &str) -> Option<FileId> {
        self.files()
            .iter()
            .position(|f| f.name == name)
            .map(|i| FileId(i as u8))
    }

    /// Looks a subset up by name.
    fn subset_by_name(&self, name: &str) -> Option<SubsetId> {
        self.subsets()
            .iter()
            .position(|s| s.name == name)
            .map(SubsetId::new)
    }

    /// The subset `id` names, if the target has it.
    fn subset(&self, id: SubsetId) -> Option<&RegSubset> {
        self.subsets().get(id.index())
    }

    /// The subset of `file` with exactly the units of `units`, if the target has one.
    fn subset_with_units(&self, file: FileId, units: &UnitMask) -> Option<SubsetId> {
        self.subsets()
            .iter()
            .position(|s| s.file == file && s.units.same_units(units))
            .map(SubsetId::new)
    }

    /// The class whose registers satisfy both `a` and `b` (class narrowing, seed 002): same file
    /// and size, the larger alignment, the intersection of the subsets. `None` when no register
    /// satisfies both (the value needs a copy) or when the target lacks the intersection (its
    /// subsets are not closed: see [`close_under_intersection`]).
    fn intersect_classes(&self, a: RegClass, b: RegClass) -> Option<RegClass> {
        if a.file != b.file || a.size != b.size {
            return None;
        }
        let subset = match (a.subset, b.subset) {
            (None, s) | (s, None) => s,
            (Some(x), Some(y)) if x == y => Some(x),
            (Some(x), Some(y)) => {
                let units = self.subset(x)?.units.intersection(&self.subset(y)?.units);
                if units.is_empty() {
                    return None;
                }
                Some(self.subset_with_units(a.file, &units)?)
            }
        };
        let class = RegClass {
            file: a.file,
            size: a.size,
            align: a.align.max(b.align),
            subset,
        };
        // A subset whose every start is misaligned for the class leaves no register either.
        let file_units = self.files().get(a.file.index())?.units;
        let any = match subset {
            Some(s) => self
                .subset(s)?
                .units
                .iter()
                .any(|u| PhysReg::try_new(a.file, u).is_some_and(|r| self.reg_fits(r, class))),
            None => file_units >= a.size as u32,
        };
        any.then_some(class)
    }

    /// The class of `size` units in `file` with the default alignment and no subset.
    fn class(&self, file: FileId, size: u8) -> RegClass {
        RegClass {
            file,
            size,
            align: self.default_align(file, size),
            subset: None,
        }
    }

    /// Why `class` is not a valid class of this target, if it is not.
    fn check_class(&self, class: RegClass) -> Result<(), String> {
        let Some(file) = self.files().get(class.file.index()) else {
            return Err(format!("register file {} does not exist", class.file.0));
        };
        if class.size == 0 || class.size > self.max_size(class.file) {
            return Err(format!(
                "size {} is outside 1..={} for file {}",
                class.size,
                self.max_size(class.file),
                file.name
            ));
        }
        if !class.align.is_power_of_two() {
            return Err(format!("alignment {} is not a power of two", class.align));
        }
        if let Some(s) = class.subset {
            match self.subset(s) {
                Some(sub) if sub.file == class.file => {}
                Some(sub) => {
                    return Err(format!("subset {} is not in file {}", sub.name, file.name));
                }
                None => return Err(format!("subset {} does not exist", s.index())),
            }
        }
        Ok(())
    }

    /// Why `reg` cannot hold a value of `class`, if it cannot.
    fn check_reg(&self, reg: PhysReg, class: RegClass) -> Result<(), String> {
        check_reg_in(self, reg, class)
    }

    /// Whether `reg` can hold a value of `class`: [`Target::check_reg`] without the message.
    fn reg_fits(&self, reg: PhysReg, class: RegClass) -> bool {
        reg_mismatch(self, reg, class, true).is_none()
    }
}

/// [`Target::check_reg`]'s rules on `target`'s files and subsets: the file, the units inside it,
/// the alignment, the subset.
/// Whether `unit` is in `bits` (64 units to a word).
#[inline]
pub fn unit_in(bits: &[u64], unit: u32) -> bool {
    bits.get(unit as usize / 64)
        .is_some_and(|w| w >> (unit % 64) & 1 != 0)
}

/// The lowest unit in `bits` (64 units to a word), or 0 where there is none.
pub fn lowest_unit(bits: &[u64]) -> u32 {
    bits.iter()
        .enumerate()
        .find(|(_, w)| **w != 0)
        .map_or(0, |(k, w)| k as u32 * 64 + w.trailing_zeros())
}

pub fn check_reg_in<T: Target + ?Sized>(
    target: &T,
    reg: PhysReg,
    class: RegClass,
) -> Result<(), String> {
    match reg_mismatch(target, reg, class, true) {
        None => Ok(()),
        Some(m) => Err(m.message(target, reg, class)),
    }
}

/// Why `reg` cannot hold `class` on `target` (subsets checked when `subsets` says so), found
/// without formatting anything: a query answered millions of times whose message is rarely
/// needed ([`Mismatch::message`]).
pub fn reg_mismatch<T: Target + ?Sized>(
    target: &T,
    reg: PhysReg,
    class: RegClass,
    subsets: bool,
) -> Option<Mismatch> {
    let Some(file) = target.files().get(reg.file().index()) else {
        return Some(Mismatch::NoFile);
    };
    if reg.file() != class.file {
        return Some(Mismatch::File);
    }
    if reg.units(class.size, file.units).is_none() {
        return Some(Mismatch::PastEnd);
    }
    if class.align > 1 && reg.unit() % class.align as u32 != 0 {
        return Some(Mismatch::Unaligned);
    }
    if subsets
        && let Some(s) = class.subset
        && let Some(sub) = target.subset(s)
        && !sub.units.contains(reg.unit())
    {
        return Some(Mismatch::Subset);
    }
    None
}

/// Which of [`check_reg_in`]'s rules a register breaks for a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mismatch {
    NoFile,
    File,
    PastEnd,
    Unaligned,
    Subset,
}

impl Mismatch {
    /// The rule in words, naming `reg` and `class` on `target`.
    pub fn message<T: Target + ?Sized>(self, target: &T, reg: PhysReg, class: RegClass) -> String {
        let unit = reg.unit();
        let Some(file) = target.files().get(reg.file().index()) else {
            return format!("register file {} does not exist", reg.file().0);
        };
        match self {
            Mismatch::NoFile => format!("register file {} does not exist", reg.file().0),
            Mismatch::File => {
                format!(
                    "register is in file {}, the value's class is not",
                    file.name
                )
            }
            Mismatch::PastEnd => format!(
                "{}[{unit}] with {} units runs past the end of file {} ({} units)",
                file.name, class.size, file.name, file.units
            ),
            Mismatch::Unaligned => {
                format!("{}[{unit}] is not aligned to {}", file.name, class.align)
            }
            Mismatch::Subset => {
                let name = class
                    .subset
                    .and_then(|s| target.subset(s))
                    .map_or("?", |sub| sub.name.as_str());
                format!("{}[{unit}] is not in subset {name}", file.name)
            }
        }
    }
}

/// The configurable test target: a per-lane file `v` and a uniform file `s`, with vectors of
/// 1–4 units aligned to their power-of-two size (a GCN-like model, as in ACO). Three subsets of
/// `v` exercise irregular classes: `low` (the lower half, like vc4's threaded mode), `high` (the
/// upper half) and `even` (even units), closed under intersection (`low.even`, `high.even`).
#[derive(Clone, Debug)]
pub struct GenericTarget {
    files: [RegFile; 2],
    subsets: Vec<RegSubset>,
}

impl GenericTarget {
    pub const V: FileId = FileId(0);
    pub const S: FileId = FileId(1);

    pub fn new(v_units: u32, s_units: u32) -> Self {
        let half = v_units / 2;
        let subset = |name: &str, units: UnitMask| RegSubset {
            name: name.into(),
            file: Self::V,
            units,
        };
        let subsets = close_under_intersection(vec![
            subset("low", UnitMask::range(v_units, 0..half)),
            subset("high", UnitMask::range(v_units, half..v_units)),
            subset("even", UnitMask::every(v_units, 2)),
        ]);
        GenericTarget {
            subsets,
            files: [
                RegFile {
                    name: "v".into(),
                    units: v_units,
                    lanes: Lanes::PerLane,
                },
                RegFile {
                    name: "s".into(),
                    units: s_units,
                    lanes: Lanes::Uniform,
                },
            ],
        }
    }

    pub fn arc(v_units: u32, s_units: u32) -> Arc<dyn Target> {
        Arc::new(Self::new(v_units, s_units))
    }
}

impl Target for GenericTarget {
    fn name(&self) -> &str {
        "generic"
    }
    fn params(&self) -> Vec<(String, u32)> {
        vec![
            ("v".into(), self.files[0].units),
            ("s".into(), self.files[1].units),
        ]
    }
    fn files(&self) -> &[RegFile] {
        &self.files
    }
    fn subsets(&self) -> &[RegSubset] {
        &self.subsets
    }
    fn opcodes(&self) -> &'static [TargetOpInfo] {
        &GENERIC_OPS
    }
}

/// The generic target's own opcodes, one of each kind of fact, for tests of target
/// instructions: a 24-bit multiply, a reciprocal with a latency and classes, and an add whose
/// operands and result must lie in subset `low`.
static GENERIC_OPS: [TargetOpInfo; 3] = [
    TargetOpInfo {
        info: OpInfo {
            commutative: true,
            ..OpInfo::target("umul24", Arity::Fixed(1), Arity::Fixed(2), 0)
        },
        code: 0,
        latency: 1,
        operand_classes: None,
        def_classes: None,
        eval: Some(|a| (a[0] & 0xff_ffff).wrapping_mul(a[1] & 0xff_ffff)),
        cross_lane: None,
    },
    TargetOpInfo {
        info: OpInfo::target("sfu_rcp", Arity::Fixed(1), Arity::Fixed(1), 0),
        code: 1,
        latency: 3,
        operand_classes: Some(&[ClassReq {
            file: "v",
            size: 1,
            subset: None,
        }]),
        def_classes: Some(&[ClassReq {
            file: "v",
            size: 1,
            subset: None,
        }]),
        eval: Some(|a| (1.0 / f32::from_bits(a[0])).to_bits()),
        cross_lane: None,
    },
    TargetOpInfo {
        info: OpInfo {
            commutative: true,
            ..OpInfo::target("iadd_low", Arity::Fixed(1), Arity::Fixed(2), 0)
        },
        code: 2,
        latency: 1,
        operand_classes: Some(&[LOW, LOW]),
        def_classes: Some(&[LOW]),
        eval: Some(|a| a[0].wrapping_add(a[1])),
        cross_lane: None,
    },
];

const LOW: ClassReq = ClassReq {
    file: "v",
    size: 1,
    subset: Some("low"),
};

/// Builds a target from the parameters of a `target` line.
pub type TargetConstructor = fn(&[(String, u32)]) -> Result<Arc<dyn Target>, String>;

/// The targets a reader knows by name.
#[derive(Clone)]
pub struct TargetRegistry {
    entries: Vec<(&'static str, TargetConstructor)>,
}

impl TargetRegistry {
    /// A registry holding the generic test target.
    pub fn new() -> Self {
        TargetRegistry {
            entries: vec![("generic", generic_from_params)],
        }
    }

    pub fn register(&mut self, name: &'static str, ctor: TargetConstructor) {
        self.entries.push((name, ctor));
    }

    pub fn make(&self, name: &str, params: &[(String, u32)]) -> Result<Arc<dyn Target>, String> {
        match self.entries.iter().find(|(n, _)| *n == name) {
            Some((_, ctor)) => ctor(params),
            None => {
                let known: Vec<&str> = self.entries.iter().map(|(n, _)| *n).collect();
                Err(format!(
                    "unknown target `{name}` (known: {})",
                    known.join(", ")
                ))
            }
        }
    }
}

impl Default for TargetRegistry {
    fn default() -> Self {
        Self::new()
    }
}

/// Largest file of the generic target the reader accepts.
pub const MAX_GENERIC_UNITS: u32 = 1 << 20;

fn generic_from_params(params: &[(String, u32)]) -> Result<Arc<dyn Target>, String> {
    let (mut v, mut s) = (256, 104);
    for (k, val) in params {
        match k.as_str() {
            "v" => v = *val,
            "s" => s = *val,
            _ => {
                return Err(format!(
                    "unknown parameter `{k}` of target generic (known: v, s)"
                ));
            }
        }
        // Up to the size of the reference assignment's unbounded files, so its output reads back.
        if *val == 0 || *val > MAX_GENERIC_UNITS {
            return Err(format!(
                "parameter `{k}` must be in 1..={MAX_GENERIC_UNITS}"
            ));
        }
    }
    Ok(GenericTarget::arc(v, s))
}
