//! kiln's front end: real shaders (WGSL, GLSL 450, SPIR-V) parsed and validated by naga, then
//! lowered into kiln's generic SSA IR — the role NIR plays before vc4's QIR.
//!
//! Lowering (module [`lower`]) walks the entry point's structured body once: calls are inlined
//! with pointer arguments substituted; local and private variables become SSA values built
//! while walking (Braun et al., "Simple and efficient construction of static single assignment
//! form", 2013, on structured control flow: phis at merges, loop-header phis sealed after the
//! back edges are known, trivial phis removed); composites are split into 32-bit scalars;
//! naga's control flow becomes kiln's structured if/loop/break/continue.

pub mod clip;
pub mod corpus;
pub mod glsl_globals;
pub mod interface;
pub mod lower;
pub mod nesting;
pub mod parse;

pub use interface::Interface;
pub use lower::{LowerOptions, Lowered, lower_entry_point, lower_entry_point_with};
pub use parse::{Language, Parsed, Source, catch_quietly, install_quiet_panic_hook, parse};

use std::ops::Range;

/// Why a shader could not be lowered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrontError {
    #[error("{0}")]
    Input(String),
    #[error("parse error: {0}")]
    Parse(String),
    #[error("validation error: {0}")]
    Validate(String),
    /// A construct kiln does not support, with its source span when naga kept one.
    #[error("unsupported: {what}")]
    Unsupported {
        what: String,
        span: Option<Range<usize>>,
    },
    #[error("internal error: {0}")]
    Internal(String),
}

impl FrontError {
    pub fn unsupported(what: impl Into<String>) -> FrontError {
        FrontError::Unsupported {
            what: what.into(),
            span: None,
        }
    }

    /// A short category for summaries: `unsupported: <what>` without details after a colon.
    pub fn reason(&self) -> String {
        match self {
            FrontError::Unsupported { what, .. } => format!(
                "unsupported: {}",
                what.split(':').next().unwrap_or(what).trim()
            ),
            FrontError::Parse(_) => "parse error".into(),
            FrontError::Validate(_) => "validation error".into(),
            FrontError::Input(_) => "input error".into(),
            FrontError::Internal(m) => {
                format!("internal error: {}", m.chars().take(60).collect::<String>())
            }
        }
    }
}

/// The vertex and fragment entry points of a module: (name, stage).
pub fn entry_points(module: &naga::Module) -> Vec<(String, naga::ShaderStage)> {
    module
        .entry_points
        .iter()
        .filter(|e| {
            matches!(
                e.stage,
                naga::ShaderStage::Vertex | naga::ShaderStage::Fragment
            )
        })
        .map(|e| (e.name.clone(), e.stage))
        .collect()
}
