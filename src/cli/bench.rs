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
    /// Generated programs grown ×10 at a time (sequential ifs, values live at once, diamonds,
    /// chains), each through the stage it stresses in a process of its own: time per IR
    /// instruction, its growth from the size before, peak memory.
    Scaling(ScalingArgs),
    /// `kiln corpus compile` over the corpus without the shader cache, with an empty one and
    /// with the one that filled: wall times, each run a process of its own.
    Cache(CacheArgs),
    /// One family at one size (what `scaling` runs in a child process).
    #[command(hide = true)]
    ScalingOne(ScalingOneArgs),
}

#[derive(Debug, Args)]
pub struct ScalingArgs {
    /// The sizes, each the family's parameter (ifs, live values, diamonds, operations).
    #[arg(long, value_delimiter = ',', default_values_t = [1000usize, 10000])]
    pub sizes: Vec<usize>,
    /// Only these families (seqif, live, diamonds-ssa, wide-ssa, wide-graph, chain-opt).
    #[arg(long, value_delimiter = ',')]
    pub families: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CacheArgs {
    /// The corpus directory.
    #[arg(long, default_value = "../shared/corpus")]
    pub corpus: PathBuf,
    /// Worker threads of each run.
    #[arg(short = 'j', long, default_value_t = 2)]
    pub jobs: usize,
    /// Runs of each kind (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
}

#[derive(Debug, Args)]
pub struct ScalingOneArgs {
    pub family: String,
    pub n: usize,
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
        BenchCommand::Cache(a) => {
            let exe = std::env::current_exe().map_err(|e| miette::miette!("{e}"))?;
            let times = bench::cache_times(&exe, &a.corpus, a.jobs, a.runs)
                .map_err(|e| miette::miette!("{e}"))?;
            print(&times.to_string());
            Ok(())
        }
        BenchCommand::Scaling(a) => {
            let families = if a.families.is_empty() {
                bench::Family::ALL.to_vec()
            } else {
                a.families
                    .iter()
                    .map(|n| family(n))
                    .collect::<miette::Result<Vec<_>>>()?
            };
            let exe = std::env::current_exe().map_err(|e| miette::miette!("{e}"))?;
            let rows =
                bench::scaling(&exe, &families, &a.sizes).map_err(|e| miette::miette!("{e}"))?;
            print(&bench::scaling_report(&rows));
            Ok(())
        }
        BenchCommand::ScalingOne(a) => {
            let f = family(&a.family)?;
            let (insts, outcome, seconds) =
                crate::pipeline::with_stack(move || bench::scaling_one(f, a.n))
                    .and_then(|r| r)
                    .map_err(|e| miette::miette!("{e}"))?;
            let peak = bench::peak_kib().map_or("-".to_string(), |k| k.to_string());
            print(&format!("{insts}\t{seconds}\t{peak}\t{outcome}\n"));
            Ok(())
        }
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

fn family(name: &str) -> miette::Result<bench::Family> {
    bench::Family::by_name(name).ok_or_else(|| {
        let names: Vec<&str> = bench::Family::ALL.iter().map(|f| f.name()).collect();
        miette::miette!("`{name}`: the families are {}", names.join(", "))
    })
}
