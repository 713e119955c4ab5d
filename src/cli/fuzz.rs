//! `kiln fuzz regalloc`: the allocators' differential campaign ([`crate::fuzz`]).

use crate::cli::{eprint, print};
use crate::fuzz::{self, Target};
use clap::{Args, Subcommand};
use kiln_regalloc::Allocator;

#[derive(Debug, Subcommand)]
pub enum FuzzCommand {
    /// Generated programs through both allocators at budgets down to a few registers, on the
    /// generic target and on vc4: every allocation checked and run in SIMT mode against the SSA
    /// program. Prints each failing seed with its configuration, then the counts.
    Regalloc(RegallocArgs),
}

#[derive(Debug, Args)]
pub struct RegallocArgs {
    /// The allocator (default: both).
    #[arg(long)]
    pub allocator: Option<Allocator>,
    /// The target (default: both).
    #[arg(long)]
    pub target: Option<Target>,
    /// Run for this many seconds (default 60 when --count is not given).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Run this many seeds.
    #[arg(long)]
    pub count: Option<u64>,
    /// The first seed.
    #[arg(long, default_value_t = 1_000_000)]
    pub from: u64,
    /// Worker threads (default: all cores).
    #[arg(short = 'j', long, default_value_t = 0)]
    pub jobs: usize,
}

pub fn run(command: FuzzCommand) -> miette::Result<()> {
    match command {
        FuzzCommand::Regalloc(a) => regalloc(a),
    }
}

fn regalloc(args: RegallocArgs) -> miette::Result<()> {
    let options = fuzz::Options {
        allocators: args
            .allocator
            .map_or(vec![Allocator::Ssa, Allocator::Graph], |a| vec![a]),
        targets: args
            .target
            .map_or(vec![Target::Generic, Target::Vc4], |t| vec![t]),
        from: args.from,
        count: args.count,
        seconds: args.seconds,
        jobs: args.jobs,
    };
    let report = fuzz::campaign(&options, |f| eprint(&format!("{f}\n")));
    print(&report.to_string());
    match report.failures() {
        0 => Ok(()),
        n => Err(miette::miette!("{n} allocations failed")),
    }
}
