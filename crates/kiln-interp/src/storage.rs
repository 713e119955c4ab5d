//! Where values live: per temp and lane in SSA mode, per register unit and lane in SIMT mode.

use kiln_ir::{Function, PhysReg, Temp};

/// Value storage of one run. `None` is an undefined value (SSA mode only).
pub trait Storage {
    /// Unit `unit` of temp `t` (read from `reg` in SIMT mode) in `lane`.
    fn read(
        &self,
        t: Temp,
        reg: Option<PhysReg>,
        lane: usize,
        unit: usize,
    ) -> Result<Option<u32>, String>;
    fn write(
        &mut self,
        t: Temp,
        reg: Option<PhysReg>,
        lane: usize,
        unit: usize,
        v: Option<u32>,
    ) -> Result<(), String>;
    /// Called before each instruction (phis included) runs, with the lanes active for it; its
    /// writes follow. Observers (the divergence soundness test) record dynamic instances here.
    fn executed(&mut self, _inst: &kiln_ir::Inst, _active: u64) {}
}

/// SSA mode: every temp has its own slot per lane.
pub struct SsaStorage {
    lanes: usize,
    values: Vec<Vec<Option<u32>>>,
    sizes: Vec<usize>,
}

impl SsaStorage {
    pub fn new(func: &Function, lanes: usize) -> Self {
        SsaStorage {
            lanes,
            values: vec![Vec::new(); func.temps.len()],
            sizes: func.temps.iter().map(|c| c.size as usize).collect(),
        }
    }
}

impl Storage for SsaStorage {
    fn read(
        &self,
        t: Temp,
        _: Option<PhysReg>,
        lane: usize,
        unit: usize,
    ) -> Result<Option<u32>, String> {
        Ok(self.values[t.index()]
            .get(unit * self.lanes + lane)
            .copied()
            .flatten())
    }
    fn write(
        &mut self,
        t: Temp,
        _: Option<PhysReg>,
        lane: usize,
        unit: usize,
        v: Option<u32>,
    ) -> Result<(), String> {
        let slot = &mut self.values[t.index()];
        if slot.is_empty() {
            slot.resize(self.sizes[t.index()] * self.lanes, None);
        }
        slot[unit * self.lanes + lane] = v;
        Ok(())
    }
}

/// SIMT mode: physical register files shared by all lanes; units hold the values, so vectors
/// and overlaps behave as on hardware. Registers never written read a poison pattern.
pub struct RegStorage {
    lanes: usize,
    files: Vec<Vec<u32>>,
    poison: u32,
}

/// Units a register file may grow to (the reference assignment uses unbounded files).
const MAX_UNITS: u32 = 1 << 20;

impl RegStorage {
    pub fn new(func: &Function, lanes: usize, poison: u32) -> Self {
        RegStorage {
            lanes,
            files: vec![Vec::new(); func.target.files().len()],
            poison,
        }
    }

    fn index(
        &self,
        reg: Option<PhysReg>,
        lane: usize,
        unit: usize,
    ) -> Result<(usize, usize), String> {
        let reg = reg.ok_or("a temp has no register in an allocated program")?;
        let u = reg.unit() as usize + unit;
        if u >= MAX_UNITS as usize || reg.file().index() >= self.files.len() {
            return Err(format!("register unit {u} is out of range"));
        }
        Ok((reg.file().index(), u * self.lanes + lane))
    }

    fn poison(&self, i: usize) -> u32 {
        poison_pattern(self.poison, i)
    }
}

/// What storage unit `i` (unit-major: unit × lanes + lane) holds where nothing defined it, for
/// the pattern `poison` ([`crate::Env::poison`]): the pattern with the index mixed in, so that
/// no two units look alike.
pub fn poison_pattern(poison: u32, i: usize) -> u32 {
    poison ^ (i as u32).wrapping_mul(0x9e37_79b9)
}

impl Storage for RegStorage {
    fn read(
        &self,
        _: Temp,
        reg: Option<PhysReg>,
        lane: usize,
        unit: usize,
    ) -> Result<Option<u32>, String> {
        let (f, i) = self.index(reg, lane, unit)?;
        Ok(Some(
            self.files[f]
                .get(i)
                .copied()
                .unwrap_or_else(|| self.poison(i)),
        ))
    }
    fn write(
        &mut self,
        _: Temp,
        reg: Option<PhysReg>,
        lane: usize,
        unit: usize,
        v: Option<u32>,
    ) -> Result<(), String> {
        let (f, i) = self.index(reg, lane, unit)?;
        let seed = self.poison;
        let file = &mut self.files[f];
        if file.len() <= i {
            let old = file.len();
            file.extend((old..=i).map(|k| poison_pattern(seed, k)));
        }
        file[i] = v.unwrap_or_else(|| poison_pattern(seed, i));
        Ok(())
    }
}
