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
pub mod util;

use kiln_analysis::{Changed, Context, PassError};

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
    "if_convert",
    "fold",
    "cfg_clean",
    "copy_prop",
    "gvn",
    "fold",
    "dce",
];

/// The first pipeline tried when the default one raises the maximum register demand: uniform
/// loads are not numbered (a reused load keeps a uniform register live).
pub const NO_UNIFORM_CSE_PIPELINE: &[&str] = &[
    "fold",
    "copy_prop",
    "uniformize",
    "gvn_keep_uniform_loads",
    "fold",
    "cfg_clean",
    "if_convert",
    "fold",
    "cfg_clean",
    "copy_prop",
    "gvn_keep_uniform_loads",
    "fold",
    "dce",
];

/// The pipeline tried next: no value
/// numbering and no copy propagation across register files, the passes that lengthen live
/// ranges.
pub const CONSERVATIVE_PIPELINE: &[&str] = &[
    "fold",
    "cfg_clean",
    "if_convert",
    "fold",
    "cfg_clean",
    "dce",
];

/// The last resort under pressure: only passes that shorten or remove live ranges.
pub const MINIMAL_PIPELINE: &[&str] = &["fold", "dce"];

/// Runs the middle end under the register-demand constraint of `docs/middle.md`: the default
/// pipeline, and if it raises the maximum demand of some register file, the one without
/// uniform-load numbering, the conservative one, then the minimal one, from the original
/// function each time; if every one raises it, the
/// function stays as it was. Returns the pipeline kept (`None`: the original).
pub fn optimize(cx: &mut Context) -> Result<Option<&'static [&'static str]>, PassError> {
    let original = cx.func().clone();
    let limit = cx.liveness()?.max;
    for (k, pipeline) in [
        DEFAULT_PIPELINE,
        NO_UNIFORM_CSE_PIPELINE,
        CONSERVATIVE_PIPELINE,
        MINIMAL_PIPELINE,
    ]
    .into_iter()
    .enumerate()
    {
        if k > 0 {
            *cx.func_mut() = original.clone();
            cx.invalidate(Changed::Cfg);
        }
        run_passes(cx, pipeline)?;
        let demand = cx.liveness()?.max;
        if !demand.exceeds(limit) {
            return Ok(Some(pipeline));
        }
    }
    *cx.func_mut() = original;
    cx.invalidate(Changed::Cfg);
    Ok(None)
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
