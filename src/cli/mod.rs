//! Command-line interface: one module per group of subcommands.

pub mod interp;
pub mod ir;

use clap::{Parser, Subcommand};

/// kiln — a GPU shader compiler back end.
#[derive(Debug, Parser)]
#[command(name = "kiln", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Parse, verify and print a `.kir` file.
    Print(ir::FileArg),
    /// Parse and verify a `.kir` file.
    Verify(ir::FileArg),
    /// Liveness: kill flags, live-in/live-out per block, and with --demand the register demand
    /// stages of every instruction.
    Liveness(ir::LivenessArgs),
    /// Run a `.kir` function in the reference interpreter and print its outputs per lane.
    Interp(interp::InterpArgs),
}

impl Cli {
    pub fn run(self) -> miette::Result<()> {
        match self.command {
            Command::Print(a) => ir::print(a),
            Command::Verify(a) => ir::verify_cmd(a),
            Command::Liveness(a) => ir::liveness(a),
            Command::Interp(a) => interp::run(a),
        }
    }
}
