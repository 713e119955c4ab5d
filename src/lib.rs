//! kiln: the driver library (pipeline, reports) behind the `kiln` command.

pub mod cli;

/// The targets `.kir` text may name: the generic test target and `vc4(threads=1|2)`.
pub fn targets() -> kiln_ir::TargetRegistry {
    let mut registry = kiln_ir::TargetRegistry::new();
    registry.register("vc4", kiln_vc4::target::Vc4Target::from_params);
    registry
}
