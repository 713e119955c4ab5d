//! kiln's middle end (DESIGN.md §1): a dataflow framework and the passes that clean up what the
//! front end hands over, one module per pass, each run through a `kiln_analysis::Context`.

pub mod algebraic;
pub mod blocks;
pub mod cfg_clean;
pub mod copy_prop;
pub mod dataflow;
pub mod dce;
pub mod fold;
pub mod gvn;
pub mod if_convert;
pub mod loop_cse;
pub mod one_trip_loops;
pub mod stats;
pub mod uniformize;
pub mod unroll;
pub mod util;

pub use algebraic::Precision;

use kiln_analysis::{Changed, Context, DebugFlags, PassError};
use kiln_ir::{Demand, Function};

/// A pass: changes the context's function and says what it changed.
pub type Pass = fn(&mut Context) -> Result<Changed, PassError>;

/// Every pass by name, in the order the default pipeline runs them.
pub const PASSES: &[(&str, Pass)] = &[
    ("fold", fold::fold),
    ("algebraic", algebraic::algebraic),
    ("algebraic_exact", algebraic::algebraic_exact),
    ("copy_prop", copy_prop::copy_prop),
    ("gvn", gvn::gvn),
    ("gvn_keep_uniform_loads", gvn::gvn_keep_uniform_loads),
    ("loop_cse", loop_cse::loop_cse),
    ("uniformize", uniformize::uniformize),
    ("cfg_clean", cfg_clean::cfg_clean),
    ("one_trip_loops", one_trip_loops::one_trip_loops),
    ("unroll", unroll::unroll),
    ("if_convert", if_convert::if_convert),
    ("dce", dce::dce),
];

/// The default pipeline, pass by pass; dead code first, so that no pass works on what the
/// front end left unread.
pub const DEFAULT_PIPELINE: &[&str] = &[
    "dce",
    "fold",
    "copy_prop",
    "algebraic",
    "uniformize",
    "gvn",
    "loop_cse",
    "fold",
    "cfg_clean",
    "one_trip_loops",
    "unroll",
    "if_convert",
    "fold",
    "algebraic",
    "cfg_clean",
    "one_trip_loops",
    "cfg_clean",
    "copy_prop",
    "gvn",
    "loop_cse",
    "fold",
    "dce",
    "cfg_clean",
];

/// The passes run again after the default pipeline, in order, while one of them changes the
/// function — what one exposes the others take (NIR's `do { … } while (progress)` in
/// `vc4_optimize_nir`): copies propagated or values numbered late leave a sum and its
/// cancellation side by side, a folded constant leaves a select of constants or an `if` that
/// if-conversion can now flatten. (Repeating `uniformize`, `loop_cse` and `unroll` as well
/// changed nothing on the corpus.)
pub const REPEATED: &[&str] = &[
    "algebraic",
    "copy_prop",
    "gvn",
    "fold",
    "dce",
    "cfg_clean",
    "one_trip_loops",
    "if_convert",
    "cfg_clean",
];
/// Most times [`REPEATED`] runs (a fixed point is usually reached in one or two).
pub const MAX_REPEATS: usize = 8;

/// Whether `demand` stays within `limit` in every register file. (Moving a value from a
/// per-lane register to a uniform one could be allowed to raise the uniform file on a target
/// where both share physical registers, as on vc4; the generic target's files are separate, so
/// the middle end promises no file's demand rises.)
pub fn demand_within(demand: Demand, limit: Demand) -> bool {
    !demand.exceeds(limit)
}

/// The pass to run for `name` at `precision`: the exact rules only for `algebraic` at
/// [`Precision::Exact`].
fn at_precision(name: &'static str, precision: Precision) -> &'static str {
    match (name, precision) {
        ("algebraic", Precision::Exact) => "algebraic_exact",
        _ => name,
    }
}

/// A pass to try in place of one that raises the register demand.
fn gentler(name: &str) -> Option<&'static str> {
    match name {
        "gvn" => Some("gvn_keep_uniform_loads"),
        _ => None,
    }
}

/// The default pipeline with each pass replaced by its [`gentler`] variant (uniform loads left
/// unnumbered: a reused load keeps a uniform register live): the second pipeline tried under
/// pressure.
pub fn gentler_pipeline() -> Vec<&'static str> {
    DEFAULT_PIPELINE
        .iter()
        .map(|&p| gentler(p).unwrap_or(p))
        .collect()
}

/// Runs the middle end at `precision`: the default pipeline, whatever it does to the register
/// demand (NIR runs its CSE unconditionally; pressure is the allocator's to answer).
pub fn optimize(cx: &mut Context, precision: Precision) -> Result<(), PassError> {
    run_to_fixed_point(cx, &pipeline_at(precision), precision, false)
}

/// [`optimize`] of a copy of `func`, for a caller that keeps `func`: the default pipeline's
/// first pass, dead code elimination, makes the copy ([`dce::live_copy`]), so that the dead
/// code is neither copied nor removed. The same function as `optimize` of `func.clone()`
/// (without the first pass's `KILN_DEBUG` lines).
pub fn optimize_copy(
    func: &Function,
    precision: Precision,
    debug: DebugFlags,
) -> Result<Function, PassError> {
    let pipeline = pipeline_at(precision);
    debug_assert_eq!(
        pipeline[0], "dce",
        "the pipeline starts with dead code elimination"
    );
    let sites = kiln_analysis::DefSites::compute(func);
    let (copy, changed) = dce::live_copy(func, &sites);
    let mut cx = Context::with_debug(copy, debug);
    if changed == Changed::Nothing {
        // (The copy is the whole function: its definitions are where they were.)
        cx = cx.with_def_sites(sites);
    } else if debug.verify || cfg!(debug_assertions) {
        cx.verify("dce")?;
    }
    let mut idle = Idle::default();
    idle.ran(&mut cx, DCE, changed);
    run_from(&mut cx, idle, &pipeline[1..], precision, false)?;
    Ok(cx.into_func())
}

/// The passes that find nothing in what they leave: dead code elimination marks everything
/// that stays live (a second sweep removes nothing), if-conversion flattens until no
/// candidate is left.
const IDEMPOTENT: &[&str] = &["dce", "if_convert"];

/// The passes that find nothing in what dead code elimination leaves of a function they found
/// nothing in: removing instructions nothing reads makes no copy, no constant operation and no
/// redundancy among the instructions that stay. (Algebraic rules count a value's readers, and
/// their count leaves out fewer dead ones than the pass removes, so it wakes.)
const UNWOKEN_BY_DCE: &[&str] = &["copy_prop", "gvn", "gvn_keep_uniform_loads", "fold"];

/// The passes that would find nothing to do: a pass that changed nothing on the function as it
/// is changes nothing on it again, so it is not run before the function changes; nor after a
/// change that cannot give it work ([`UNWOKEN_BY_DCE`]). A bit per pass of [`PASSES`].
#[derive(Default)]
struct Idle {
    idle: u64,
}

// (Every pass has a bit of `Idle::idle`.)
const _: () = assert!(PASSES.len() <= 64);

/// The bits of [`Idle::idle`] for the passes `names` (none for a name that is no pass), found
/// when the crate is built.
const fn pass_bits(names: &[&str]) -> u64 {
    let mut bits = 0;
    let mut i = 0;
    while i < names.len() {
        if let Some(k) = pass_index(names[i]) {
            bits |= 1 << k;
        }
        i += 1;
    }
    bits
}

/// [`UNWOKEN_BY_DCE`] and [`IDEMPOTENT`] as bits, and dead code elimination's position.
const UNWOKEN_BITS: u64 = pass_bits(UNWOKEN_BY_DCE);
const IDEMPOTENT_BITS: u64 = pass_bits(IDEMPOTENT);
const DCE: usize = pass_index("dce").expect("a pass");

impl Idle {
    /// Runs pass `name` unless it found nothing in the function as it is; whether it changed
    /// anything.
    fn run(&mut self, cx: &mut Context, name: &'static str) -> Result<bool, PassError> {
        let k = pass_index(name).ok_or_else(|| PassError::Failed {
            pass: name.to_string(),
            message: "no such pass".into(),
        })?;
        if self.idle & (1 << k) != 0 {
            return Ok(false);
        }
        let changed = cx.run(name, PASSES[k].1)?;
        Ok(self.ran(cx, k, changed))
    }

    /// Records that pass `k` of [`PASSES`] ran with `changed`: where it changed the function
    /// (its temps made one per value again if gaps have grown), the passes it leaves idle;
    /// whether it changed anything.
    fn ran(&mut self, cx: &mut Context, k: usize, changed: Changed) -> bool {
        if changed == Changed::Nothing {
            self.idle |= 1 << k;
            return false;
        }
        // What removed instructions defined leaves gaps in the temps, and every pass keeps
        // tables per temp: where the numbers are more than twice the instructions, they are
        // made one per value again (a walk of the function, so not after every change).
        let func = cx.func();
        if func.temps.len() > 2 * func.inst_count() + 64 {
            cx.compact_temps();
        }
        self.idle = if k == DCE {
            self.idle & UNWOKEN_BITS
        } else {
            0
        };
        // A pass that runs to its own fixed point finds nothing in what it left.
        self.idle |= IDEMPOTENT_BITS & (1 << k);
        true
    }
}

/// `pipeline`, then [`REPEATED`] until none of its passes changes the function, at most
/// [`MAX_REPEATS`] times (a pass that found nothing since the last change is not run again);
/// `gentle`: each repeated pass replaced by its [`gentler`] variant.
pub fn run_to_fixed_point(
    cx: &mut Context,
    pipeline: &[&'static str],
    precision: Precision,
    gentle: bool,
) -> Result<(), PassError> {
    run_from(cx, Idle::default(), pipeline, precision, gentle)
}

/// [`run_to_fixed_point`] from `idle` (what earlier passes left).
fn run_from(
    cx: &mut Context,
    mut idle: Idle,
    pipeline: &[&'static str],
    precision: Precision,
    gentle: bool,
) -> Result<(), PassError> {
    for &name in pipeline {
        idle.run(cx, name)?;
    }
    for _ in 0..MAX_REPEATS {
        let mut changed = false;
        for &n in REPEATED {
            let n = at_precision(n, precision);
            let n = if gentle { gentler(n).unwrap_or(n) } else { n };
            changed |= idle.run(cx, n)?;
        }
        if !changed {
            break;
        }
    }
    Ok(())
}

/// The default pipeline at `precision`.
pub fn pipeline_at(precision: Precision) -> Vec<&'static str> {
    DEFAULT_PIPELINE
        .iter()
        .map(|&n| at_precision(n, precision))
        .collect()
}

/// The middle end at `precision` under the register-demand constraint of `docs/middle.md`, for
/// a target that cannot spill a function the default pipeline made too large: the default
/// pipeline, then the one without uniform-load numbering; if both raise the maximum register
/// demand of some register file above the original function's, it starts again from the
/// original and runs the default passes one by one, keeping each only if the demand stays
/// within the original's — a pass that would raise it is replaced by its gentler variant (`gvn`
/// by `gvn_keep_uniform_loads`) or undone, and the pipeline goes on. Returns 0 for the default
/// pipeline, 1 for the second, 2 + the pass runs undone or replaced. `default_raised`: the
/// caller has run [`optimize`] on this function and seen it raise the demand, so the default
/// pipeline is not run again.
pub fn optimize_within_demand(
    cx: &mut Context,
    precision: Precision,
    default_raised: bool,
) -> Result<usize, PassError> {
    let original = cx.func().clone();
    let limit = cx.liveness()?.max;
    let at = |p: Vec<&'static str>| -> Vec<&'static str> {
        p.into_iter().map(|n| at_precision(n, precision)).collect()
    };
    for (k, pipeline) in [at(DEFAULT_PIPELINE.to_vec()), at(gentler_pipeline())]
        .into_iter()
        .enumerate()
        .skip(default_raised as usize)
    {
        run_to_fixed_point(cx, &pipeline, precision, k == 1)?;
        let demand = cx.liveness()?.max;
        if demand_within(demand, limit) {
            return Ok(k);
        }
        *cx.func_mut() = original.clone();
        cx.invalidate(Changed::Cfg);
    }
    let mut undone = 2;
    for name in at(DEFAULT_PIPELINE.to_vec()) {
        let mut candidate = Some(name);
        while let Some(n) = candidate {
            let pass = pass_by_name(n).expect("the pipeline names registered passes");
            let saved = cx.func().clone();
            if cx.run(n, pass)? == Changed::Nothing {
                break;
            }
            let demand = cx.liveness()?.max;
            if demand_within(demand, limit) {
                break;
            }
            *cx.func_mut() = saved;
            cx.invalidate(Changed::Cfg);
            undone += 1;
            candidate = gentler(n);
        }
    }
    Ok(undone)
}

/// The pass called `name`.
pub fn pass_by_name(name: &str) -> Option<Pass> {
    pass_index(name).map(|k| PASSES[k].1)
}

/// The position of the pass called `name` in [`PASSES`] (a `const fn`, so that the constant
/// names' positions are found when the crate is built).
const fn pass_index(name: &str) -> Option<usize> {
    let name = name.as_bytes();
    let mut k = 0;
    'passes: while k < PASSES.len() {
        let n = PASSES[k].0.as_bytes();
        k += 1;
        if n.len() != name.len() {
            continue;
        }
        let mut i = 0;
        while i < n.len() {
            if n[i] != name[i] {
                continue 'passes;
            }
            i += 1;
        }
        return Some(k - 1);
    }
    None
}

/// Runs the passes named in `names` once each, in order.
pub fn run_passes(cx: &mut Context, names: &[&str]) -> Result<(), PassError> {
    for name in names {
        let &(name, pass) =
            PASSES
                .iter()
                .find(|(n, _)| n == name)
                .ok_or_else(|| PassError::Failed {
                    pass: (*name).to_string(),
                    message: "no such pass".into(),
                })?;
        cx.run(name, pass)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::generate::{GenConfig, generate};

    /// [`UNWOKEN_BY_DCE`]: on generated programs part-way through the pipeline, each of those
    /// passes that finds nothing finds nothing after dead code elimination either — checked by
    /// running it, not by the rule.
    #[test]
    fn dead_code_elimination_gives_the_unwoken_passes_no_work() {
        let mut checked = 0;
        for seed in 0..200 {
            let mut c = GenConfig::new(seed);
            c.size = 30 + (seed % 4) as usize * 25;
            let mut cx = Context::new(generate(&c));
            run_passes(&mut cx, &["fold", "algebraic", "if_convert"]).unwrap();
            for &pass in UNWOKEN_BY_DCE {
                let mut found = Context::new(cx.func().clone());
                if found.run(pass, pass_by_name(pass).unwrap()).unwrap() != Changed::Nothing {
                    continue;
                }
                if found.run("dce", dce::dce).unwrap() == Changed::Nothing {
                    continue;
                }
                let again = found.run(pass, pass_by_name(pass).unwrap()).unwrap();
                assert_eq!(again, Changed::Nothing, "seed {seed}: {pass} after dce");
                checked += 1;
            }
        }
        assert!(checked > 50, "only {checked} checked");
    }

    /// The middle end from a copy made by dead code elimination gives the function the middle
    /// end gives from a whole copy, compared as structures, on generated programs (with and
    /// without dead code) at both precisions.
    #[test]
    fn the_middle_end_from_a_live_copy_is_the_middle_end_from_a_whole_copy() {
        let mut dead = 0;
        for seed in 0..120 {
            let mut c = GenConfig::new(seed);
            c.size = 20 + (seed % 5) as usize * 20;
            let mut f = generate(&c);
            if seed % 3 == 0 {
                // Enough dead values that the temps are made one per value again after the
                // first pass.
                let class = f.temps[0];
                for k in 0..100 {
                    let t = f.new_temp(class);
                    let mut dead = kiln_ir::Inst::new(kiln_ir::Opcode::Mov);
                    dead.defs.push(kiln_ir::Def::new(t));
                    dead.operands.push(kiln_ir::Operand::constant(k));
                    f.blocks[0].insts.insert(0, dead);
                }
            }
            let sites = kiln_analysis::DefSites::compute(&f);
            dead += (dce::live_copy(&f, &sites).1 != Changed::Nothing) as usize;
            for precision in [Precision::Relaxed, Precision::Exact] {
                let mut whole = Context::new(f.clone());
                optimize(&mut whole, precision).unwrap();
                let copied = optimize_copy(&f, precision, DebugFlags::default()).unwrap();
                assert!(copied == *whole.func(), "seed {seed}, {precision:?}");
            }
        }
        assert!((10..120).contains(&dead), "{dead} of 120 with dead code");
    }
}
