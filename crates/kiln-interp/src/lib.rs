//! kiln's reference interpreter (DESIGN.md §8), the oracle every transformation is checked
//! against. Two modes share one wave executor ([`exec`]):
//!
//! - **SSA mode** ([`run_ssa`]) says what a program means: values per temp and lane, an error
//!   when an active lane computes with an undefined value.
//! - **SIMT mode** ([`run_simt`]) runs an allocated program as a GPU would: one set of physical
//!   register files shared by all lanes, per-lane writes limited to the active lanes, all-lanes
//!   writes changing every lane — so an allocation that is wrong only on real hardware (seed
//!   003's loop case) shows up as a wrong output.
//!
//! [`out_of_ssa::reference_assignment`] gives every temp its own registers so SIMT mode can be
//! checked against SSA mode without a real allocator; [`diff`] compares two programs.

pub mod diff;
pub mod exec;
pub mod out_of_ssa;
pub mod storage;
pub mod texture;
pub mod uniform_check;

pub use diff::{Mismatch, compare, run};
pub use texture::Texture;

use kiln_ir::generate::Rng;
use kiln_ir::{Block, Function, Opcode};
use std::collections::BTreeMap;
use std::fmt;

/// The default [`Env::poison`].
pub const POISON: u32 = 0xdead_0000;

/// What a run starts from.
#[derive(Clone, Debug)]
pub struct Env {
    /// Lanes of the wave (1..=64; default 16, a vc4 QPU's width).
    pub lanes: usize,
    /// Per-lane values of each input slot.
    pub inputs: BTreeMap<u32, Vec<u32>>,
    /// Uniform words by slot.
    pub uniforms: BTreeMap<u32, u32>,
    /// Textures by unit; a unit without one samples [`Texture::procedural`].
    pub textures: BTreeMap<u32, Texture>,
    /// Executed instructions after which the run fails (an endless loop becomes an error).
    pub step_limit: u64,
    /// SIMT mode: the pattern registers hold where nothing defined them (never written, or
    /// written with an undefined value): no correct program depends on it, so runs with two
    /// patterns must agree ([`diff::compare`] checks it).
    pub poison: u32,
}

impl Env {
    pub fn new(lanes: usize) -> Env {
        Env {
            lanes,
            inputs: BTreeMap::new(),
            uniforms: BTreeMap::new(),
            textures: BTreeMap::new(),
            step_limit: 1_000_000,
            poison: POISON,
        }
    }

    /// Deterministic pseudo-random values for every input and uniform slot `func` reads: small
    /// integers and ordinary floats, so that comparisons, shifts and loop limits vary by lane.
    pub fn for_function(func: &Function, lanes: usize, seed: u64) -> Env {
        let mut rng = Rng::new(seed);
        Env::from_slots(func, lanes, |_| match rng.below(3) {
            0 => rng.below(16) as u32,
            1 => (rng.below(2000) as f32 / 16.0 - 60.0).to_bits(),
            _ => rng.next_u64() as u32,
        })
    }

    /// Values for every input and uniform slot `func` reads, from `value`, asked once per
    /// input slot and lane and once per uniform word, in the order the function reads them.
    pub fn from_slots(func: &Function, lanes: usize, mut value: impl FnMut(Slot) -> u32) -> Env {
        let mut env = Env::new(lanes);
        for inst in func.blocks.iter().flat_map(|b| &b.insts) {
            match inst.op {
                Opcode::Input => {
                    let slot = inst.imms[0];
                    env.inputs.entry(slot).or_insert_with(|| {
                        (0..lanes)
                            .map(|lane| value(Slot::Input { slot, lane }))
                            .collect()
                    });
                }
                Opcode::Uniform => {
                    let slot = inst.imms[0];
                    env.uniforms
                        .entry(slot)
                        .or_insert_with(|| value(Slot::Uniform(slot)));
                }
                _ => {}
            }
        }
        env
    }
}

/// A value [`Env::from_slots`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Input { slot: u32, lane: usize },
    Uniform(u32),
}

impl Env {
    /// Ordinary values for every input and uniform slot `func` reads — floats a little above 0,
    /// different per lane and slot — for comparing programs whose float results would explode
    /// on random bit patterns.
    pub fn with_ordinary_values(func: &Function, lanes: usize) -> Env {
        Env::from_slots(func, lanes, |s| match s {
            Slot::Input { slot, lane } => {
                (0.1 + 0.05 * lane as f32 + 0.03 * (slot % 7) as f32).to_bits()
            }
            Slot::Uniform(slot) => (0.2 + 0.1 * (slot % 5) as f32).to_bits(),
        })
    }

    /// Adds values for the slots of `other` that this environment lacks.
    pub fn merge_missing(&mut self, other: Env) {
        for (k, v) in other.inputs {
            self.inputs.entry(k).or_insert(v);
        }
        for (k, v) in other.uniforms {
            self.uniforms.entry(k).or_insert(v);
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outputs {
    pub lanes: usize,
    /// Per output slot, per lane: the units last written (`None` units are undefined), or
    /// `None` when the lane never wrote the slot or was discarded.
    pub slots: BTreeMap<u32, Vec<Option<Vec<Option<u32>>>>>,
    /// Lanes ended by `discard`.
    pub discarded: Vec<bool>,
}

impl fmt::Display for Outputs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (slot, lanes) in &self.slots {
            writeln!(f, "output {slot}:")?;
            for (l, v) in lanes.iter().enumerate() {
                let text = match v {
                    None if self.discarded[l] => "discarded".to_string(),
                    None => "-".to_string(),
                    Some(units) => units
                        .iter()
                        .map(|u| fmt_value(*u))
                        .collect::<Vec<_>>()
                        .join(", "),
                };
                writeln!(f, "  lane {l:2}: {text}")?;
            }
        }
        Ok(())
    }
}

/// A value as `0x… (float)`, or `undef`.
pub fn fmt_value(v: Option<u32>) -> String {
    match v {
        None => "undef".into(),
        Some(x) => format!("{x:#010x} ({})", f32::from_bits(x)),
    }
}

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    #[error("cannot run: {0}")]
    Setup(String),
    #[error("step limit of {steps} instructions reached (an endless loop?)")]
    StepLimit { steps: u64, trace: Vec<String> },
    #[error("{block}:{inst}: {message}")]
    At {
        block: Block,
        inst: usize,
        message: String,
        trace: Vec<String>,
    },
}

impl InterpError {
    /// The last instructions executed before the error.
    pub fn trace(&self) -> &[String] {
        match self {
            InterpError::Setup(_) => &[],
            InterpError::StepLimit { trace, .. } | InterpError::At { trace, .. } => trace,
        }
    }
}

/// Runs an SSA function: what it means.
pub fn run_ssa(func: &Function, env: &Env) -> Result<Outputs, InterpError> {
    run_ssa_with_cfg(func, None, env)
}

/// [`run_ssa`] with the function's CFG at hand (`Cfg::compute(func)`, e.g. from a pass context).
pub fn run_ssa_with_cfg(
    func: &Function,
    cfg: Option<&kiln_ir::Cfg>,
    env: &Env,
) -> Result<Outputs, InterpError> {
    if func.allocated {
        return Err(InterpError::Setup(
            "SSA mode runs SSA functions; this one is allocated (use SIMT mode)".into(),
        ));
    }
    exec::Machine::new(func, cfg, env, storage::SsaStorage::new(func, env.lanes))?.run()
}

/// Runs an allocated function on physical registers shared by all lanes.
pub fn run_simt(func: &Function, env: &Env) -> Result<Outputs, InterpError> {
    run_simt_with_cfg(func, None, env)
}

/// [`run_simt`] with the function's CFG at hand.
pub fn run_simt_with_cfg(
    func: &Function,
    cfg: Option<&kiln_ir::Cfg>,
    env: &Env,
) -> Result<Outputs, InterpError> {
    if !func.allocated {
        return Err(InterpError::Setup(
            "SIMT mode runs allocated functions; this one is SSA (assign registers first)".into(),
        ));
    }
    exec::Machine::new(
        func,
        cfg,
        env,
        storage::RegStorage::new(func, env.lanes, env.poison),
    )?
    .run()
}

/// The last instructions of a complete run (for reports).
pub(crate) fn exec_trace(func: &Function, env: &Env) -> Vec<String> {
    let result = if func.allocated {
        exec::Machine::new(
            func,
            None,
            env,
            storage::RegStorage::new(func, env.lanes, env.poison),
        )
        .and_then(exec::Machine::run_with_trace)
    } else {
        exec::Machine::new(func, None, env, storage::SsaStorage::new(func, env.lanes))
            .and_then(exec::Machine::run_with_trace)
    };
    result.unwrap_or_else(|e| e.trace().to_vec())
}
