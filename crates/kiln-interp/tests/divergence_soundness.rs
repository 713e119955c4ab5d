//! Soundness of the divergence analysis against the interpreter: run a program in SSA mode with
//! different values per lane and record every dynamic instance of every definition (the lanes
//! active when it ran and the values they wrote). Every temp the analysis calls uniform must
//! have one value across those lanes in each instance. A deliberate mutation (claiming a
//! temporally divergent value uniform) shows that the check fails when the claim is wrong.

use kiln_analysis::Divergence;
use kiln_interp::Env;
use kiln_interp::exec::Machine;
use kiln_interp::storage::{SsaStorage, Storage};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Cfg, Function, Inst, PhysReg, Temp};

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

/// Outcome of checking one run: violations, checked instances, disagreeing instances; `None`
/// when the run itself failed.
fn check_run(
    func: &Function,
    env: &Env,
    claims: &dyn Fn(Temp) -> bool,
) -> Option<(Vec<String>, usize, usize)> {
    let mut checker = Checker::new(func, env.lanes, claims);
    let machine = Machine::new(func, env, &mut checker).ok()?;
    machine.run().ok()?;
    checker.finish();
    Some((checker.violations, checker.checked, checker.disagreeing))
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

#[test]
fn uniform_temps_agree_across_lanes_on_generated_programs() {
    let (mut checked, mut disagreeing, mut runs) = (0, 0, 0);
    for seed in 0..400u64 {
        let func = generate(&GenConfig {
            size: 80,
            ..GenConfig::new(seed)
        });
        let cfg = Cfg::compute(&func).expect("generated programs are structured");
        let dv = Divergence::compute(&func, &cfg);
        let claims = |t: Temp| dv.is_uniform(t);
        for k in 0..3 {
            let env = Env::for_function(&func, 16, seed * 7 + k);
            let Some((violations, c, d)) = check_run(&func, &env, &claims) else {
                continue;
            };
            runs += 1;
            assert!(
                violations.is_empty(),
                "seed {seed}, env {k}: {}\n{}",
                violations[0],
                kiln_ir::print_function(&func)
            );
            checked += c;
            disagreeing += d;
        }
    }
    // The check is not vacuous: many runs, many multi-lane instances of uniform temps, and
    // per-lane values that do differ.
    assert!(runs > 800, "{runs} runs");
    assert!(checked > 10_000, "{checked} checked instances");
    assert!(disagreeing > 1_000, "{disagreeing} disagreeing instances");
}

/// A loop left at a per-lane iteration: the counter is uniform inside, `%8` reads it after the
/// loop without an exit phi (temporal divergence) and `%7` is the exit phi.
const TEMPORAL: &str = "target generic(v=16, s=8)
function @main {
bb0:
    %0:v1 = input 0
    %2:v1 = iand %0, 3
    loop bb1, bb5
bb1:
    %1:v1 = phi 0, %3
    %4:v1 = ule %2, %1
    if.divergent %4, bb2, bb3, bb3
bb2:
    break bb5
bb3:
    %3:v1 = iadd %1, 1
    jump bb4
bb4:
    continue bb1
bb5:
    %7:v1 = phi %1
    %8:v1 = iadd %1, 10
    output 0, %7
    output 1, %8
    return
}
";

#[test]
fn mutations_are_caught() {
    let func = kiln_ir::parse_function(TEMPORAL).expect("valid text");
    let cfg = Cfg::compute(&func).expect("structured");
    let dv = Divergence::compute(&func, &cfg);
    let mut env = Env::new(16);
    env.inputs.insert(0, (0..16).collect());
    let right = |t: Temp| dv.is_uniform(t);
    let (violations, checked, _) = check_run(&func, &env, &right).expect("runs");
    assert!(violations.is_empty(), "{violations:?}");
    assert!(
        dv.is_uniform(Temp(1)) && checked > 0,
        "the counter is checked"
    );
    // Forgetting temporal divergence (an operand read after the loop) or the exit-phi rule is
    // caught; so is calling an input uniform.
    for wrong in [8u32, 7, 0] {
        assert!(!dv.is_uniform(Temp(wrong)));
        let mutated = |t: Temp| dv.is_uniform(t) || t == Temp(wrong);
        let (violations, _, _) = check_run(&func, &env, &mutated).expect("runs");
        assert!(
            !violations.is_empty(),
            "claiming %{wrong} uniform is not caught"
        );
    }
}
