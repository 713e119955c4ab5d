//! `kiln lower` and `kiln corpus lower`: shaders through the front end.

use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use kiln_front::corpus::{Checked, Outcome, lower_file, shader_files, summarize};

use kiln_front::{FrontError, Source, lower_entry_point, parse};
use miette::{Diagnostic, NamedSource, SourceSpan};
use rayon::prelude::*;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Stage {
    Vertex,
    Fragment,
}

#[derive(Debug, Args)]
pub struct LowerArgs {
    /// A `.wgsl`, `.spv`, `.vert` or `.frag` file.
    pub shader: PathBuf,
    #[arg(long, value_enum)]
    pub stage: Option<Stage>,
    /// Entry point name (needed when several match).
    #[arg(long)]
    pub entry: Option<String>,
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

/// Stack of each corpus worker thread.
const WORKER_STACK: usize = 256 << 20;

/// Runs a lowered function on ordinary per-lane inputs and uniform words.
fn run_check(f: &kiln_ir::Function) -> Result<Checked, String> {
    let mut env = kiln_interp::Env::with_ordinary_values(f, 16);
    env.step_limit = 2_000_000;
    match kiln_interp::run_ssa(f, &env) {
        Ok(_) => Ok(Checked::Passed),
        Err(kiln_interp::InterpError::StepLimit { .. }) => Ok(Checked::StepLimit),
        Err(e) => Err(format!("interpreter: {e}")),
    }
}

/// An unsupported construct, pointing into the shader source.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(kiln::front))]
struct FrontDiagnostic {
    message: String,
    #[source_code]
    src: NamedSource<String>,
    #[label("here")]
    span: SourceSpan,
}

fn diagnostic(source: &Source, e: FrontError) -> miette::Report {
    if let (FrontError::Unsupported { span: Some(r), .. }, Some(text)) = (&e, source.text()) {
        let r = r.start.min(text.len())..r.end.min(text.len());
        return FrontDiagnostic {
            message: format!("{}: {e}", source.name),
            src: NamedSource::new(&source.name, text.to_string()),
            span: r.into(),
        }
        .into();
    }
    miette::miette!("{}: {e}", source.name)
}

pub fn lower(args: LowerArgs) -> miette::Result<()> {
    // The same stack as a corpus worker, so that whatever the corpus lowers, this lowers too.
    std::thread::Builder::new()
        .stack_size(WORKER_STACK)
        .spawn(move || lower_on_this_thread(args))
        .map_err(|e| miette::miette!("cannot start the lowering thread: {e}"))?
        .join()
        .unwrap_or_else(|_| {
            Err(miette::miette!(
                "internal error: the lowering thread panicked"
            ))
        })
}

fn lower_on_this_thread(args: LowerArgs) -> miette::Result<()> {
    let bytes = std::fs::read(&args.shader)
        .map_err(|e| miette::miette!("cannot read {}: {e}", args.shader.display()))?;
    let source = Source::from_path(&args.shader, bytes).map_err(|e| miette::miette!("{e}"))?;
    let parsed = parse(&source).map_err(|e| diagnostic(&source, e))?;
    let stage = args.stage.map(|s| match s {
        Stage::Vertex => naga::ShaderStage::Vertex,
        Stage::Fragment => naga::ShaderStage::Fragment,
    });
    let lowered = lower_entry_point(&parsed, stage, args.entry.as_deref())
        .map_err(|e| diagnostic(&source, e))?;
    if std::env::var("KILN_DEBUG").is_ok_and(|v| v.split(',').any(|x| x == "print")) {
        eprint!("{}", kiln_ir::print_function(&lowered.function));
    }
    kiln_ir::verify(&lowered.function).map_err(|errs| {
        miette::miette!(
            "internal error: the lowered function does not verify: {}",
            errs[0]
        )
    })?;
    print!("{}", kiln_ir::print_function(&lowered.function));
    if args.interface {
        println!(
            "{}",
            serde_json::to_string_pretty(&lowered.interface).expect("serializable")
        );
    }
    Ok(())
}

pub fn corpus(cmd: CorpusCommand) -> miette::Result<()> {
    let args = match cmd {
        CorpusCommand::Lower(args) => args,
        CorpusCommand::Regalloc(args) => return crate::cli::regalloc::corpus_regalloc(args),
        CorpusCommand::Compile(args) => return crate::cli::compile::corpus_compile(args),
    };
    if args.stats || args.opt {
        return crate::cli::opt::corpus_stats(&args);
    }
    let files = shader_files(&args.dir);
    if files.is_empty() {
        return Err(miette::miette!("no shaders under {}", args.dir.display()));
    }
    // naga and the lowering recurse per nesting level; both bound it (`nesting`), and large
    // worker stacks leave room for the deepest accepted shader (rayon's default is 2 MiB).
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .stack_size(WORKER_STACK)
        .build()
        .map_err(|e| miette::miette!("{e}"))?;
    let bar = ProgressBar::new(files.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} files {elapsed}")
            .expect("valid template"),
    );
    // naga and the lowering run under catch_unwind; keep their panic messages off the bar.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let verdicts: Vec<_> = pool.install(|| {
        files
            .par_iter()
            .flat_map_iter(|f| {
                let v = if args.run {
                    kiln_front::corpus::lower_file_then(f, run_check)
                } else {
                    lower_file(f)
                };
                bar.inc(1);
                v
            })
            .collect()
    });
    std::panic::set_hook(hook);
    bar.finish_and_clear();
    if args.verbose {
        for v in &verdicts {
            if v.outcome != Outcome::Lowered {
                println!(
                    "{} [{}]: {:?}",
                    v.file.display(),
                    v.entry.as_deref().unwrap_or("-"),
                    v.outcome
                );
            }
        }
    }
    print!("{}", summarize(&verdicts));
    let mut times: Vec<f64> = verdicts
        .iter()
        .filter(|v| matches!(v.outcome, Outcome::Lowered | Outcome::StepLimit))
        .map(|v| v.seconds)
        .collect();
    times.sort_by(f64::total_cmp);
    if !times.is_empty() {
        let insts: usize = verdicts.iter().map(|v| v.instructions).sum();
        let total: f64 = times.iter().sum();
        println!(
            "lowering time per entry point: median {:.3} ms, p90 {:.3} ms; {:.0} instructions/s",
            times[times.len() / 2] * 1e3,
            times[times.len() * 9 / 10] * 1e3,
            insts as f64 / total
        );
    }
    Ok(())
}
