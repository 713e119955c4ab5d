//! A target with its register files resized: cut to a budget (graph colouring's register
//! model), or made as large as a function needs with the subsets ignored (the interpreter's
//! reference assignment). Everything else is the wrapped target's.

use crate::regs::{FileId, PhysReg, RegClass, RegFile, RegSubset, Target};
use crate::target_op::TargetOpInfo;
use std::sync::Arc;

/// See the module comment.
#[derive(Debug)]
pub struct ResizedTarget {
    inner: Arc<dyn Target>,
    files: Vec<RegFile>,
    /// Unbounded: every register holds every class of its file (no subsets), and the `target`
    /// line names the file sizes.
    unbounded: bool,
}

impl ResizedTarget {
    /// `inner` with file `f` cut to `units[f]` units (never grown; files past `units` keep
    /// their size).
    pub fn budget(inner: Arc<dyn Target>, units: &[u32]) -> ResizedTarget {
        let files = inner
            .files()
            .iter()
            .enumerate()
            .map(|(f, file)| RegFile {
                units: units.get(f).copied().unwrap_or(file.units).min(file.units),
                ..file.clone()
            })
            .collect();
        ResizedTarget {
            inner,
            files,
            unbounded: false,
        }
    }

    /// `inner` with `units` units in every file and no subsets: room for every value in
    /// registers of its own.
    pub fn unbounded(inner: Arc<dyn Target>, units: u32) -> ResizedTarget {
        let files = inner
            .files()
            .iter()
            .map(|f| RegFile { units, ..f.clone() })
            .collect();
        ResizedTarget {
            inner,
            files,
            unbounded: true,
        }
    }
}

impl Target for ResizedTarget {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn params(&self) -> Vec<(String, u32)> {
        if self.unbounded {
            self.files
                .iter()
                .map(|f| (f.name.clone(), f.units))
                .collect()
        } else {
            self.inner.params()
        }
    }
    fn files(&self) -> &[RegFile] {
        &self.files
    }
    fn subsets(&self) -> &[RegSubset] {
        self.inner.subsets()
    }
    fn opcodes(&self) -> &'static [TargetOpInfo] {
        self.inner.opcodes()
    }
    fn max_size(&self, file: FileId) -> u8 {
        self.inner.max_size(file)
    }
    fn default_align(&self, file: FileId, size: u8) -> u8 {
        self.inner.default_align(file, size)
    }
    fn select_register(&self, class: RegClass, free: &[u64], cursor: &mut [u32; 2]) -> u32 {
        self.inner.select_register(class, free, cursor)
    }
    fn read_port(&self, file: FileId, unit: u32) -> Option<u8> {
        self.inner.read_port(file, unit)
    }
    fn constant_read_port(&self, value: u32) -> Option<u8> {
        self.inner.constant_read_port(value)
    }
    fn short_ranges_first(&self) -> bool {
        self.inner.short_ranges_first()
    }
    fn reg_name(&self, reg: PhysReg) -> Option<String> {
        (!self.unbounded).then(|| self.inner.reg_name(reg))?
    }
    fn reg_by_name(&self, name: &str) -> Option<PhysReg> {
        (!self.unbounded).then(|| self.inner.reg_by_name(name))?
    }
    fn check_reg(&self, reg: PhysReg, class: RegClass) -> Result<(), String> {
        // Subsets describe the real file; the unbounded one ignores them.
        match crate::regs::reg_mismatch(self, reg, class, !self.unbounded) {
            None => Ok(()),
            Some(m) => Err(m.message(self, reg, class)),
        }
    }
    fn reg_fits(&self, reg: PhysReg, class: RegClass) -> bool {
        crate::regs::reg_mismatch(self, reg, class, !self.unbounded).is_none()
    }
}
