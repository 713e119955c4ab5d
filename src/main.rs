//! The `kiln` command.

use clap::Parser;

fn main() -> miette::Result<()> {
    kiln::cli::Cli::parse().run()
}
