//! kiln: the driver library — the one compile pipeline ([`pipeline`]), `.kir` reading and
//! reports ([`kir`]), corpus runs ([`corpus`]), the allocators' campaign ([`fuzz`]), the comparison with Mesa ([`mesa`]), `kiln run`'s
//! set-up ([`run`]), pictures of a function ([`draw`]), statistics in words ([`report`]) and the QPU tools' input and output ([`qpu`]) — behind the `kiln` command,
//! whose `cli` module only parses arguments and prints.

pub mod bench;
pub mod cache;
pub mod cli;
pub mod corpus;
pub mod draw;
pub mod fuzz;
pub mod kir;
pub mod mesa;
pub mod pipeline;
pub mod qpu;
pub mod report;
pub mod run;
pub mod shader_db;

/// The targets `.kir` text may name: the generic test target and `vc4(threads=1|2)`.
pub fn targets() -> kiln_ir::TargetRegistry {
    let mut registry = kiln_ir::TargetRegistry::new();
    registry.register("vc4", kiln_vc4::target::Vc4Target::from_params);
    registry
}
