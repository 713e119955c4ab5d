//! Command-line interface: one module per group of subcommands.

use clap::{Parser, Subcommand};

/// kiln — a GPU shader compiler back end.
#[derive(Debug, Parser)]
#[command(name = "kiln", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {}

impl Cli {
    pub fn run(self) -> miette::Result<()> {
        match self.command {}
    }
}
