//! `kiln bench`: compile cost beside Mesa's ([`crate::bench`]).

use crate::bench;
use crate::cli::print;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Instructions executed (callgrind) by the middle end and the back end for Mesa's sample of
    /// corpus shaders and the ten largest, warm, beside Mesa vc4's figure for the same shader;
    /// the per-process set-up apart. Needs valgrind.
    CompileCost(CompileCostArgs),
    /// One entry point lowered, then compiled twice (what `compile-cost` runs under callgrind).
    #[command(hide = true)]
    CompileOne(CompileOneArgs),
}

#[derive(Debug, Args)]
pub struct CompileCostArgs {
    /// The corpus directory.
    #[arg(long, default_value = "../shared/corpus")]
    pub corpus: PathBuf,
    /// Mesa's figures (default: CORPUS/mesa-vc4/compile-cost.tsv).
    #[arg(long)]
    pub mesa: Option<PathBuf>,
    /// Only the shaders whose `path:entry` contains this.
    #[arg(long)]
    pub only: Option<String>,
    /// The valgrind to run.
    #[arg(long, default_value = "valgrind")]
    pub valgrind: String,
    /// Shaders measured at once.
    #[arg(short = 'j', long, default_value_t = 2)]
    pub jobs: usize,
}

#[derive(Debug, Args)]
pub struct CompileOneArgs {
    pub shader: PathBuf,
    #[arg(long)]
    pub entry: String,
}

pub fn run(command: BenchCommand) -> miette::Result<()> {
    match command {
        BenchCommand::CompileCost(a) => compile_cost(a),
        BenchCommand::CompileOne(a) => {
            let result =
                crate::pipeline::with_stack(move || bench::compile_one(&a.shader, &a.entry))
                    .and_then(|r| r)
                    .map_err(|e| miette::miette!("{e}"))?;
            print(&format!("{result}\n"));
            Ok(())
        }
    }
}

fn compile_cost(args: CompileCostArgs) -> miette::Result<()> {
    let mesa = args
        .mesa
        .unwrap_or_else(|| args.corpus.join("mesa-vc4/compile-cost.tsv"));
    let mut samples = bench::samples(&mesa).map_err(|e| miette::miette!("{e}"))?;
    if let Some(only) = &args.only {
        samples.retain(|s| format!("{}:{}", s.path, s.entry).contains(only.as_str()));
    }
    let exe = std::env::current_exe().map_err(|e| miette::miette!("{e}"))?;
    let measured = bench::measure_all(&exe, &args.valgrind, &args.corpus, &samples, args.jobs)
        .map_err(|e| miette::miette!("{e}"))?;
    print(&bench::report(&measured));
    Ok(())
}
