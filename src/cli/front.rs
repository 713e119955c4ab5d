//! `kiln lower` and the `kiln corpus` commands.

use crate::cli::EntryArgs;
use crate::cli::print;
use crate::pipeline;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct LowerArgs {
    /// A `.wgsl`, `.spv`, `.vert` or `.frag` file.
    pub shader: PathBuf,
    #[command(flatten)]
    pub entry: EntryArgs,
    /// Print the interface description (JSON) after the IR.
    #[arg(long)]
    pub interface: bool,
}

#[derive(Debug, Subcommand)]
pub enum CorpusCommand {
    /// Lower and verify every vertex and fragment entry point under a directory.
    Lower(CorpusLowerArgs),
    /// Lower, optimise and allocate every entry point, checking every allocation; print
    /// shader-db-style totals.
    Regalloc(crate::cli::regalloc::CorpusRegallocArgs),
    /// Compile every entry point for vc4 and, with --check, run each compiled one in the
    /// simulator against the interpreter; report compiled / unsupported (by reason) /
    /// mismatched / failed.
    Compile(crate::cli::compile::CorpusCompileArgs),
}

#[derive(Debug, Args)]
pub struct CorpusLowerArgs {
    pub dir: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// Also list every failed or unsupported entry point.
    #[arg(long)]
    pub verbose: bool,
    /// Also run every lowered entry point in the interpreter (16 lanes, ordinary inputs); an
    /// interpreter error counts as a failure.
    #[arg(long)]
    pub run: bool,
    /// Print shader-db-style totals (instructions, phis, blocks, max register demand).
    #[arg(long)]
    pub stats: bool,
    /// With --stats: before and after the middle end, with helped and hurt counts.
    #[arg(long)]
    pub opt: bool,
}

/// `kiln lower SHADER`.
pub fn lower(args: LowerArgs) -> miette::Result<()> {
    let text = pipeline::with_stack(move || lower_on_this_thread(args))
        .map_err(|e| miette::miette!("{e}"))??;
    print(&text);
    Ok(())
}

fn lower_on_this_thread(args: LowerArgs) -> miette::Result<String> {
    let shader = pipeline::read_shader(&args.shader)?;
    let lowered = pipeline::lower(&shader, &args.entry.entry_point())?;
    if kiln_analysis::DebugFlags::from_env().print {
        crate::cli::eprint(&kiln_ir::print_function(&lowered.function));
    }
    kiln_ir::verify(&lowered.function).map_err(|errs| {
        miette::miette!(
            "internal error: the lowered function does not verify: {}",
            errs[0]
        )
    })?;
    let mut text = kiln_ir::print_function(&lowered.function);
    if args.interface {
        text.push_str(&serde_json::to_string_pretty(&lowered.interface).expect("serializable"));
        text.push('\n');
    }
    Ok(text)
}

/// `kiln corpus …`.
pub fn corpus(cmd: CorpusCommand) -> miette::Result<()> {
    let args = match cmd {
        CorpusCommand::Lower(args) => args,
        CorpusCommand::Regalloc(args) => return crate::cli::regalloc::corpus_regalloc(args),
        CorpusCommand::Compile(args) => return crate::cli::compile::corpus_compile(args),
    };
    let text = if args.stats || args.opt {
        crate::corpus::lower_stats(&args.dir, args.jobs, args.opt, args.verbose)
    } else {
        crate::corpus::lower(&args.dir, args.jobs, args.run, args.verbose)
    };
    print(&text.map_err(|e| miette::miette!("{e}"))?);
    Ok(())
}
