//! Command-line interface: one module per group of subcommands.

use clap::{Parser, Subcommand};

pub mod vc4;

/// kiln — a GPU shader compiler back end.
#[derive(Debug, Parser)]
#[command(name = "kiln", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Disassemble VideoCore IV QPU code.
    Disasm(vc4::DisasmArgs),
    /// Assemble VideoCore IV QPU code.
    Asm(vc4::AsmArgs),
    /// Run VideoCore IV QPU code on the simulator.
    Sim(vc4::SimArgs),
}

impl Cli {
    pub fn run(self) -> miette::Result<()> {
        match self.command {
            Command::Disasm(a) => vc4::run_disasm(a),
            Command::Asm(a) => vc4::run_asm(a),
            Command::Sim(a) => vc4::run_sim(a),
        }
    }
}
