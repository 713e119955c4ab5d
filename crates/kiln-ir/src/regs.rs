//! The register model: files, classes, physical registers, per-file demand, and the `Target`
//! description every target provides (DESIGN.md §3).

use std::fmt;
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

/// A named subset of the positions of one file where a class may start (vc4's "a_or_b"...).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RegSubset {
    pub name: String,
    pub file: FileId,
    /// Allowed start units, sorted.
    pub units: Vec<u32>,
}

/// A register class: a file, a size in units, an alignment of the first unit, and optionally a
/// target subset of allowed start positions.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct RegClass {
    pub file: FileId,
    pub size: u8,
    pub align: u8,
    pub subset: Option<u16>,
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

/// A physical register: the first unit of a value in a file.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct PhysReg {
    pub file: FileId,
    pub unit: u32,
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
    /// Register files; at most [`MAX_FILES`].
    fn files(&self) -> &[RegFile];
    /// Named subsets of start positions.
    fn subsets(&self) -> &[RegSubset] {
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

    /// Looks a file up by name.
    fn file_by_name(&self, name: &str) -> Option<FileId> {
        self.files()
            .iter()
            .position(|f| f.name == name)
            .map(|i| FileId(i as u8))
    }

    /// Looks a subset up by name.
    fn subset_by_name(&self, name: &str) -> Option<u16> {
        self.subsets()
            .iter()
            .position(|s| s.name == name)
            .map(|i| i as u16)
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
            match self.subsets().get(s as usize) {
                Some(sub) if sub.file == class.file => {}
                Some(sub) => {
                    return Err(format!("subset {} is not in file {}", sub.name, file.name));
                }
                None => return Err(format!("subset {s} does not exist")),
            }
        }
        Ok(())
    }

    /// Why `reg` cannot hold a value of `class`, if it cannot.
    fn check_reg(&self, reg: PhysReg, class: RegClass) -> Result<(), String> {
        let Some(file) = self.files().get(reg.file.index()) else {
            return Err(format!("register file {} does not exist", reg.file.0));
        };
        if reg.file != class.file {
            return Err(format!(
                "register is in file {}, the value's class is not",
                file.name
            ));
        }
        if reg.unit + class.size as u32 > file.units {
            return Err(format!(
                "{}[{}] with {} units runs past the end of file {} ({} units)",
                file.name, reg.unit, class.size, file.name, file.units
            ));
        }
        if class.align > 1 && reg.unit % class.align as u32 != 0 {
            return Err(format!(
                "{}[{}] is not aligned to {}",
                file.name, reg.unit, class.align
            ));
        }
        if let Some(s) = class.subset
            && let Some(sub) = self.subsets().get(s as usize)
            && sub.units.binary_search(&reg.unit).is_err()
        {
            return Err(format!(
                "{}[{}] is not in subset {}",
                file.name, reg.unit, sub.name
            ));
        }
        Ok(())
    }
}

/// The configurable test target: a per-lane file `v` and a uniform file `s`, with vectors of
/// 1–4 units aligned to their power-of-two size (a GCN-like model, as in ACO).
#[derive(Clone, Debug)]
pub struct GenericTarget {
    files: [RegFile; 2],
}

impl GenericTarget {
    pub const V: FileId = FileId(0);
    pub const S: FileId = FileId(1);

    pub fn new(v_units: u32, s_units: u32) -> Self {
        GenericTarget {
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
}

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
        if *val == 0 || *val > 1 << 16 {
            return Err(format!("parameter `{k}` must be in 1..=65536"));
        }
    }
    Ok(GenericTarget::arc(v, s))
}
