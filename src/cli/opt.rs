//! `kiln opt`: the middle end (or the named passes) on a `.kir` file.

use crate::cli::{eprint, print};
use crate::kir::{check, load_verified};
use crate::pipeline::{self, Options};
use clap::Args;
use kiln_analysis::Context;
use kiln_opt::stats::{Comparison, Stats};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct OptArgs {
    /// A `.kir` file; `-` reads standard input.
    pub file: PathBuf,
    /// Comma-separated passes to run in order (default: the whole middle end). Passes:
    /// fold, algebraic, algebraic_exact, copy_prop, gvn, gvn_keep_uniform_loads, loop_cse,
    /// uniformize, cfg_clean, one_trip_loops, unroll, if_convert, dce.
    #[arg(long, value_delimiter = ',')]
    pub passes: Option<Vec<String>>,
    /// Print statistics (instructions, phis, blocks, max demand) before and after on stderr.
    #[arg(long)]
    pub stats: bool,
}

pub fn opt(args: OptArgs) -> miette::Result<()> {
    let func = load_verified(&args.file)?;
    let options = Options {
        passes: args.passes,
        ..Options::default()
    };
    // Statistics on a copy: liveness writes kill flags, which the printed result should not
    // carry over from before the passes.
    let before = if args.stats {
        Some(Stats::of(&mut Context::new(func.clone())).map_err(|e| miette::miette!("{e}"))?)
    } else {
        None
    };
    let func = pipeline::optimize(func, &options).map_err(|e| miette::miette!("{e}"))?;
    check(&args.file.display().to_string(), &func)?;
    print(&kiln_ir::print_function(&func));
    if let Some(before) = before {
        let files: Vec<String> = func.target.files().iter().map(|f| f.name.clone()).collect();
        let after = Stats::of(&mut Context::new(func)).map_err(|e| miette::miette!("{e}"))?;
        let mut c = Comparison::default();
        c.add(&before, &after);
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        eprint(&c.report(&files));
    }
    Ok(())
}
