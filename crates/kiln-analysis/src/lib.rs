//! kiln analyses: liveness with seed 000's kill flags and seed 003's leaving sets, register
//! demand, interference, and divergence (uniform values and branches), behind a pass context.
//! The CFGs, loops and dominance that the verifier also needs live in `kiln-ir`
//! (`kiln_ir::cfg`, `kiln_ir::dominance`) and are re-exported here.

pub mod context;
pub mod demand;
pub mod divergence;
pub mod interference;
pub mod live_set;
pub mod liveness;

pub use context::{Changed, Context, DebugFlags, DefSites, PassError};
pub use demand::InstDemand;
pub use divergence::Divergence;
pub use interference::{Interference, wide_liveness};
pub use kiln_ir::cfg::{Cfg, Edges, IfInfo, LoopInfo};
pub use kiln_ir::dominance::DomTree;
pub use live_set::LiveSet;
pub use liveness::{LiveSets, Liveness, compute_liveness, is_liveness_of, live_sets};
