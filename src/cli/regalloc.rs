//! `kiln regalloc` and `kiln corpus regalloc`: register allocation of a `.kir` file and of a
//! directory of shaders, every allocation checked, with shader-db-style totals.

use crate::cli::{eprint, print};
use crate::kir::load_verified;
use crate::pipeline::{self, Options};
use clap::Args;
use kiln_regalloc::{Allocator, RaOptions};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct RegallocArgs {
    /// A `.kir` file in SSA form; `-` reads standard input.
    pub file: PathBuf,
    /// The register allocator: `graph` (seed 002's graph colouring) or `ssa` (SSA-based assignment).
    #[arg(long, default_value = "ssa")]
    pub allocator: Allocator,
    /// Units per register file, e.g. `v=24,s=8` (default: whole files).
    #[arg(long)]
    pub budget: Option<String>,
    /// Print the allocation's statistics on stderr.
    #[arg(long)]
    pub stats: bool,
    /// Print the statistics as JSON on stderr.
    #[arg(long)]
    pub json: bool,
}

/// `kiln regalloc FILE`: the allocated function on stdout, checked.
pub fn regalloc(args: RegallocArgs) -> miette::Result<()> {
    let name = args.file.display().to_string();
    let mut func = load_verified(&args.file)?;
    if func.allocated {
        return Err(miette::miette!("{name}: the function is already allocated"));
    }
    let budget = match &args.budget {
        Some(b) => RaOptions::parse_budget(&*func.target, b)
            .map_err(|e| miette::miette!("--budget: {e}"))?,
        None => Vec::new(),
    };
    let options = Options {
        allocator: args.allocator,
        budget,
        check: true,
        ..Options::default()
    };
    let stats =
        pipeline::allocate(&mut func, &options).map_err(|e| miette::miette!("{name}: {e}"))?;
    if options.debug.verify {
        crate::kir::check(&format!("{name} (allocated)"), &func)?;
    }
    print(&kiln_ir::print_function(&func));
    let files: Vec<String> = func.target.files().iter().map(|f| f.name.clone()).collect();
    if args.json {
        eprint(&format!(
            "{}\n",
            crate::report::allocation_json(&stats, &files)
        ));
    } else if args.stats {
        eprint(&crate::report::allocation_text(&stats, &files));
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct CorpusRegallocArgs {
    pub dir: PathBuf,
    /// The register allocator: `graph` (seed 002's graph colouring) or `ssa` (SSA-based assignment).
    #[arg(long, default_value = "ssa")]
    pub allocator: Allocator,
    /// Units per register file of the generic target, e.g. `v=24,s=8` (default: whole files).
    #[arg(long)]
    pub budget: Option<String>,
    /// Allocate the raw lowering, without the middle end.
    #[arg(long)]
    pub no_opt: bool,
    /// Also read every allocated function back from its text and run it in the interpreter
    /// against the SSA program (16 lanes); count disagreements as failures.
    #[arg(long)]
    pub run: bool,
    /// Write one line per entry point (TSV) to this file.
    #[arg(long)]
    pub tsv: Option<PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// List every failure.
    #[arg(long)]
    pub verbose: bool,
}

/// `kiln corpus regalloc DIR`.
pub fn corpus_regalloc(args: CorpusRegallocArgs) -> miette::Result<()> {
    let options = Options {
        allocator: args.allocator,
        check: true,
        ..Options::default()
    };
    if let Some(path) = &args.tsv {
        crate::cli::check_output(path, &[&args.dir])?;
    }
    let run = crate::corpus::regalloc(
        &args.dir,
        args.jobs,
        &options,
        args.budget.as_deref(),
        !args.no_opt,
        args.run,
    )
    .map_err(|e| miette::miette!("{e}"))?;
    print(&run.summary(args.allocator == Allocator::Graph));
    if let Some(path) = &args.tsv {
        crate::cli::write_output(path, &[&args.dir], run.tsv().as_bytes())?;
    }
    if args.verbose {
        for e in &run.failed {
            print(&format!("FAILED {e}\n"));
        }
    }
    if run.failed.is_empty() {
        Ok(())
    } else {
        Err(miette::miette!("{} entry points failed", run.failed.len()))
    }
}
