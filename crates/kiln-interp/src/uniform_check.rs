//! Checks a claim that temps are uniform against a run: every dynamic instance of every
//! definition is recorded (the lanes active when it ran and the values they wrote, through
//! [`Storage::executed`]), and each temp the claim calls uniform must have one value across
//! those lanes in every instance. Used to test the divergence analysis and the front end's
//! uniform-file values.

use crate::exec::Machine;
use crate::storage::{SsaStorage, Storage};
use crate::{Env, InterpError};
use kiln_ir::{Function, Inst, PhysReg, Temp};

/// What a checked run found.
#[derive(Clone, Debug, Default)]
pub struct UniformReport {
    /// One message per instance where lanes disagree on a temp claimed uniform.
    pub violations: Vec<String>,
    /// Instances of claimed-uniform temps where two or more lanes wrote a value.
    pub checked: usize,
    /// Instances of other temps where lanes disagreed (evidence that the inputs vary).
    pub disagreeing: usize,
}

/// Runs `func` in SSA mode and checks `claims` instance by instance.
pub fn check_uniform(
    func: &Function,
    env: &Env,
    claims: &dyn Fn(Temp) -> bool,
) -> Result<UniformReport, InterpError> {
    let mut checker = Checker::new(func, env.lanes, claims);
    Machine::new(func, None, env, &mut checker)?.run()?;
    checker.finish();
    Ok(UniformReport {
        violations: checker.violations,
        checked: checker.checked,
        disagreeing: checker.disagreeing,
    })
}

/// An SSA storage that checks claimed-uniform temps instance by instance.
struct Checker<'c> {
    inner: SsaStorage,
    lanes: usize,
    claims: &'c dyn Fn(Temp) -> bool,
    sizes: Vec<usize>,
    /// Per temp: lanes active in its current instance, and their values.
    mask: Vec<u64>,
    values: Vec<Vec<Option<u32>>>,
    violations: Vec<String>,
    /// Instances of claimed-uniform temps where two or more lanes wrote a value.
    checked: usize,
    /// Instances of other temps where lanes disagreed (the inputs do vary).
    disagreeing: usize,
}

impl<'c> Checker<'c> {
    fn new(func: &Function, lanes: usize, claims: &'c dyn Fn(Temp) -> bool) -> Self {
        Checker {
            inner: SsaStorage::new(func, lanes),
            lanes,
            claims,
            sizes: func.temps.iter().map(|c| c.size as usize).collect(),
            mask: vec![0; func.temps.len()],
            values: vec![Vec::new(); func.temps.len()],
            violations: Vec::new(),
            checked: 0,
            disagreeing: 0,
        }
    }

    /// Checks the finished instance of `t`.
    fn flush(&mut self, t: Temp) {
        let vals = std::mem::take(&mut self.values[t.index()]);
        if vals.is_empty() {
            return;
        }
        let mut differ = false;
        let mut multi = false;
        for u in 0..self.sizes[t.index()] {
            let seen: Vec<u32> = (0..self.lanes)
                .filter(|&l| self.mask[t.index()] & (1 << l) != 0)
                .filter_map(|l| vals[u * self.lanes + l])
                .collect();
            multi |= seen.len() > 1;
            differ |= seen.iter().any(|v| *v != seen[0]);
        }
        if (self.claims)(t) {
            if multi {
                self.checked += 1;
            }
            if differ {
                self.violations.push(format!(
                    "{t} is claimed uniform but its lanes differ: {vals:x?}"
                ));
            }
        } else if differ {
            self.disagreeing += 1;
        }
    }

    fn finish(&mut self) {
        for t in 0..self.values.len() {
            self.flush(Temp::new(t));
        }
    }
}

impl Storage for Checker<'_> {
    fn read(
        &self,
        t: Temp,
        reg: Option<PhysReg>,
        lane: usize,
        unit: usize,
    ) -> Result<Option<u32>, String> {
        self.inner.read(t, reg, lane, unit)
    }

    fn write(
        &mut self,
        t: Temp,
        reg: Option<PhysReg>,
        lane: usize,
        unit: usize,
        v: Option<u32>,
    ) -> Result<(), String> {
        if self.mask[t.index()] & (1 << lane) != 0 {
            let slot = &mut self.values[t.index()];
            if slot.is_empty() {
                slot.resize(self.sizes[t.index()] * self.lanes, None);
            }
            slot[unit * self.lanes + lane] = v;
        }
        self.inner.write(t, reg, lane, unit, v)
    }

    fn executed(&mut self, inst: &Inst, active: u64) {
        for d in &inst.defs {
            self.flush(d.temp);
            self.mask[d.temp.index()] = active;
        }
    }
}

impl Storage for &mut Checker<'_> {
    fn read(&self, t: Temp, r: Option<PhysReg>, l: usize, u: usize) -> Result<Option<u32>, String> {
        (**self).read(t, r, l, u)
    }
    fn write(
        &mut self,
        t: Temp,
        r: Option<PhysReg>,
        l: usize,
        u: usize,
        v: Option<u32>,
    ) -> Result<(), String> {
        (**self).write(t, r, l, u, v)
    }
    fn executed(&mut self, inst: &Inst, active: u64) {
        (**self).executed(inst, active)
    }
}
