//! Command-line interface: one module per group of subcommands.

pub mod bench;
pub mod cache;
pub mod compile;
pub mod draw;
pub mod front;
pub mod fuzz;
pub mod interp;
pub mod ir;
pub mod opt;
pub mod regalloc;
pub mod report;
pub mod run;
pub mod vc4;

use crate::pipeline::EntryPoint;
use clap::{Args, Parser, Subcommand, ValueEnum};

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
    /// Disassemble VideoCore IV QPU code.
    Disasm(vc4::DisasmArgs),
    /// Assemble VideoCore IV QPU code.
    Asm(vc4::AsmArgs),
    /// Run VideoCore IV QPU code on the simulator.
    Sim(vc4::SimArgs),
    /// Lower a shader (WGSL, GLSL 450, SPIR-V) to kiln IR and print it.
    Lower(front::LowerArgs),
    /// Run middle-end passes on a `.kir` file and print the result.
    Opt(opt::OptArgs),
    /// Allocate registers for a `.kir` function and print the allocated form (checked).
    Regalloc(regalloc::RegallocArgs),
    /// Compile a shader to VideoCore IV QPU code (binary, disassembly, statistics).
    Compile(compile::CompileArgs),
    /// Render a fragment shader to a PNG in the simulator (checked against the interpreter), or
    /// run a vertex shader on given attributes.
    Run(run::RunArgs),
    /// Pictures of a function: its CFG, its interference graph, its register demand.
    #[command(subcommand)]
    Draw(draw::DrawCommand),
    /// Work on a directory of shaders.
    #[command(subcommand)]
    Corpus(front::CorpusCommand),
    /// Differential campaigns on generated programs.
    #[command(subcommand)]
    Fuzz(fuzz::FuzzCommand),
    /// Benchmarks against Mesa's vc4.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Compare two corpus runs (`corpus compile --json`, or Mesa's stats.tsv) as shader-db's
    /// report.py does: totals, helped and hurt, the most changed programs, status changes.
    Report(report::ReportArgs),
    /// The shader cache: its size, clearing it, verifying its entries.
    #[command(subcommand)]
    Cache(cache::CacheCommand),
}

/// Writes `text` to standard output; a reader that stopped reading (`| head`) is not an error.
pub fn print(text: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
}

/// Refuses an output path that is one of `inputs` or lies inside one of them (an input
/// directory), after resolving symbolic links: nothing the user gave is overwritten. `-` is
/// standard output and always allowed.
pub fn check_output(path: &std::path::Path, inputs: &[&std::path::Path]) -> miette::Result<()> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let resolved = path.canonicalize().or_else(|_| {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        parent
            .unwrap_or(std::path::Path::new("."))
            .canonicalize()
            .map(|dir| dir.join(path.file_name().unwrap_or_default()))
    });
    let Ok(out) = resolved else {
        return Ok(()); // The write reports a missing directory.
    };
    for input in inputs {
        if let Ok(input) = input.canonicalize()
            && out.starts_with(&input)
        {
            let how = if out == input { "is" } else { "is inside" };
            return Err(miette::miette!(
                "{}: refusing to write the output there: it {how} the input {}",
                path.display(),
                input.display()
            ));
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` (`-`: standard output) after [`check_output`].
pub fn write_output(
    path: &std::path::Path,
    inputs: &[&std::path::Path],
    bytes: &[u8],
) -> miette::Result<()> {
    check_output(path, inputs)?;
    if path.as_os_str() == "-" {
        let _ = std::io::Write::write_all(&mut std::io::stdout(), bytes);
        return Ok(());
    }
    std::fs::write(path, bytes).map_err(|e| miette::miette!("{}: {e}", path.display()))
}

/// Writes `text` to standard error.
pub fn eprint(text: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
}

impl Cli {
    pub fn run(self) -> miette::Result<()> {
        match self.command {
            Command::Print(a) => ir::print(a),
            Command::Verify(a) => ir::verify_cmd(a),
            Command::Liveness(a) => ir::liveness(a),
            Command::Interp(a) => interp::run(a),
            Command::Disasm(a) => vc4::run_disasm(a),
            Command::Asm(a) => vc4::run_asm(a),
            Command::Sim(a) => vc4::run_sim(a),
            Command::Lower(a) => front::lower(a),
            Command::Opt(a) => opt::opt(a),
            Command::Regalloc(a) => regalloc::regalloc(a),
            Command::Compile(a) => compile::compile(a),
            Command::Run(a) => run::run(a),
            Command::Draw(c) => draw::run(c),
            Command::Corpus(c) => front::corpus(c),
            Command::Fuzz(c) => fuzz::run(c),
            Command::Bench(c) => bench::run(c),
            Command::Cache(c) => cache::run(c),
            Command::Report(a) => report::report(a),
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StageArg {
    Vertex,
    Fragment,
}

/// Which entry point of a shader.
#[derive(Debug, Args)]
pub struct EntryArgs {
    #[arg(long, value_enum)]
    pub stage: Option<StageArg>,
    /// Entry point name (needed when several match).
    #[arg(long)]
    pub entry: Option<String>,
}

impl EntryArgs {
    pub fn entry_point(&self) -> EntryPoint {
        use kiln_front::interface::Stage;
        EntryPoint {
            stage: self.stage.map(|s| match s {
                StageArg::Vertex => Stage::Vertex,
                StageArg::Fragment => Stage::Fragment,
            }),
            name: self.entry.clone(),
        }
    }
}
