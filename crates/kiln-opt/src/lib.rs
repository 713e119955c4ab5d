//! kiln's middle end (DESIGN.md §1): a dataflow framework and the passes that clean up what the
//! front end hands over, one module per pass, each run through a `kiln_analysis::Context`.

pub mod blocks;
pub mod cfg_clean;
pub mod copy_prop;
pub mod dataflow;
pub mod dce;
pub mod fold;
pub mod gvn;
pub mod if_convert;
pub mod stats;
pub mod uniformize;
pub mod unroll;
pub mod util;

use kiln_analysis::{Changed, Context, PassError};
use kiln_ir::Demand;

/// A pass: changes the context's function and says what it changed.
pub type Pass = fn(&mut Context) -> Result<Changed, PassError>;

/// Every pass by name, in the order the default pipeline runs them.
pub const PASSES: &[(&str, Pass)] = &[
    ("fold", fold::fold),
    ("copy_prop", copy_prop::copy_prop),
    ("gvn", gvn::gvn),
    ("gvn_keep_uniform_loads", gvn::gvn_keep_uniform_loads),
    ("uniformize", uniformize::uniformize),
    ("cfg_clean", cfg_clean::cfg_clean),
    ("unroll", unroll::unroll),
    ("if_convert", if_convert::if_convert),
    ("dce", dce::dce),
];

/// The default pipeline, pass by pass.
pub const DEFAULT_PIPELINE: &[&str] = &[
    "fold",
    "copy_prop",
    "uniformize",
    "gvn",
    "fold",
    "cfg_clean",
    "unroll",
    "if_convert",
    "fold",
    "cfg_clean",
    "copy_prop",
    "gvn",
    "fold",
    "dce",
];

/// Whether `demand` stays within `limit`: no per-lane register file above its limit, and no
/// more units over all files together (a value moved from a per-lane register to a uniform
/// one may raise the uniform file's demand; on vc4 both live in the same physical registers).
pub fn demand_within(func: &kiln_ir::Function, demand: Demand, limit: Demand) -> bool {
    let files = func.target.files();
    let per_lane_ok = files
        .iter()
        .enumerate()
        .all(|(k, f)| f.lanes == kiln_ir::Lanes::Uniform || demand.0[k] <= limit.0[k]);
    per_lane_ok && demand.0.iter().sum::<i32>() <= limit.0.iter().sum::<i32>()
}

/// A pass to try in place of one that raises the register demand.
fn gentler(name: &str) -> Option<&'static str> {
    match name {
        "gvn" => Some("gvn_keep_uniform_loads"),
        _ => None,
    }
}

/// The default pipeline with uniform loads left unnumbered (a reused load keeps a uniform
/// register live): the second pipeline tried under pressure.
pub const NO_UNIFORM_CSE_PIPELINE: &[&str] = &[
    "fold",
    "copy_prop",
    "uniformize",
    "gvn_keep_uniform_loads",
    "fold",
    "cfg_clean",
    "unroll",
    "if_convert",
    "fold",
    "cfg_clean",
    "copy_prop",
    "gvn_keep_uniform_loads",
    "fold",
    "dce",
];

/// Runs the middle end under the register-demand constraint of `docs/middle.md`: the default
/// pipeline, then the one without uniform-load numbering; if both raise the maximum register
/// demand of some register file above the original function's, it starts again from the
/// original and runs the default passes one by one, keeping each
/// only if the demand stays within the original's — a pass that would raise it is replaced by
/// its gentler variant (`gvn` by `gvn_keep_uniform_loads`) or undone, and the pipeline goes on.
/// Returns 0 for the default pipeline, 1 for the second, 2 + the pass runs undone or replaced.
pub fn optimize(cx: &mut Context) -> Result<usize, PassError> {
    let original = cx.func().clone();
    let limit = cx.liveness()?.max;
    for (k, pipeline) in [DEFAULT_PIPELINE, NO_UNIFORM_CSE_PIPELINE]
        .into_iter()
        .enumerate()
    {
        run_passes(cx, pipeline)?;
        let demand = cx.liveness()?.max;
        if demand_within(cx.func(), demand, limit) {
            return Ok(k);
        }
        *cx.func_mut() = original.clone();
        cx.invalidate(Changed::Cfg);
    }
    let mut undone = 2;
    for &name in DEFAULT_PIPELINE {
        let mut candidate = Some(name);
        while let Some(n) = candidate {
            let pass = pass_by_name(n).expect("the pipeline names registered passes");
            let saved = cx.func().clone();
            if cx.run(n, pass)? == Changed::Nothing {
                break;
            }
            let demand = cx.liveness()?.max;
            if demand_within(cx.func(), demand, limit) {
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
    PASSES.iter().find(|(n, _)| *n == name).map(|&(_, p)| p)
}

/// Runs the passes named in `names` once each, in order.
pub fn run_passes(cx: &mut Context, names: &[&str]) -> Result<(), PassError> {
    for name in names {
        let pass = pass_by_name(name).ok_or_else(|| PassError::Failed {
            pass: (*name).to_string(),
            message: "no such pass".into(),
        })?;
        cx.run(name, pass)?;
    }
    Ok(())
}
