//! `kiln opt` and `kiln corpus lower --stats [--opt]`: the middle end on a `.kir` file and on a
//! directory of shaders, with shader-db-style totals.

use crate::cli::front::CorpusLowerArgs;
use crate::cli::ir::{parse_source, read_input};
use clap::Args;
use kiln_analysis::{Context, DebugFlags};
use kiln_front::corpus::shader_files;
use kiln_front::{Source, entry_points, lower_entry_point, parse};
use kiln_opt::stats::{Comparison, Stats};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct OptArgs {
    /// A `.kir` file; `-` reads standard input.
    pub file: PathBuf,
    /// Comma-separated passes to run in order (default: the whole middle end). Passes: fold,
    /// copy_prop, gvn, dce, ….
    #[arg(long, value_delimiter = ',')]
    pub passes: Option<Vec<String>>,
    /// Print statistics (instructions, phis, blocks, max demand) before and after on stderr.
    #[arg(long)]
    pub stats: bool,
}

fn run_pipeline(
    cx: &mut Context,
    passes: Option<&[String]>,
) -> Result<(), kiln_analysis::PassError> {
    match passes {
        Some(p) => {
            let names: Vec<&str> = p.iter().map(String::as_str).collect();
            kiln_opt::run_passes(cx, &names)
        }
        None => kiln_opt::optimize(cx).map(|_| ()),
    }
}

pub fn opt(args: OptArgs) -> miette::Result<()> {
    let (name, text) = read_input(&args.file)?;
    let func = parse_source(&name, &text)?;
    kiln_ir::verify(&func).map_err(|e| miette::miette!("{name}: {}", e[0]))?;
    // Statistics on a copy: liveness writes kill flags, which the printed result should not
    // carry over from before the passes.
    let before = if args.stats {
        Stats::of(&mut Context::new(func.clone())).map_err(|e| miette::miette!("{e}"))?
    } else {
        Stats::default()
    };
    let mut cx = Context::new(func);
    run_pipeline(&mut cx, args.passes.as_deref()).map_err(|e| miette::miette!("{e}"))?;
    // Printed before the statistics' liveness writes kill flags into it.
    print!("{}", kiln_ir::print_function(cx.func()));
    if args.stats {
        let after = Stats::of(&mut cx).map_err(|e| miette::miette!("{e}"))?;
        let mut c = Comparison::default();
        c.add(&before, &after);
        let files: Vec<String> = cx
            .func()
            .target
            .files()
            .iter()
            .map(|f| f.name.clone())
            .collect();
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        eprint!("{}", c.report(&files));
    }
    Ok(())
}

/// One entry point's statistics before and after the middle end (`after` is `before` without
/// `--opt`), or why it has none.
struct Entry {
    before: Stats,
    after: Stats,
    files: Vec<String>,
}

/// A corpus file read and parsed, or why not (`cannot read`, `unknown kind`, `does not parse`).
pub(crate) fn parse_shader_file(path: &Path) -> Result<kiln_front::Parsed, String> {
    let bytes = std::fs::read(path).map_err(|_| "cannot read".to_string())?;
    let source = Source::from_path(path, bytes).map_err(|_| "unknown kind".to_string())?;
    parse(&source).map_err(|_| "does not parse".to_string())
}

fn entry_stats(path: &Path, optimize: bool) -> Vec<Result<Entry, String>> {
    let parsed = match parse_shader_file(path) {
        Ok(p) => p,
        Err(e) => return vec![Err(e)],
    };
    entry_points(&parsed.module)
        .into_iter()
        .map(|(name, stage)| {
            let lowered =
                lower_entry_point(&parsed, Some(stage), Some(&name)).map_err(|e| e.to_string())?;
            let func = lowered.function;
            kiln_ir::verify(&func).map_err(|e| format!("verifier: {}", e[0]))?;
            let files: Vec<String> = func.target.files().iter().map(|f| f.name.clone()).collect();
            let mut cx = Context::with_debug(func, DebugFlags::from_env());
            let before = Stats::of(&mut cx).map_err(|e| e.to_string())?;
            let after = if optimize {
                kiln_opt::optimize(&mut cx).map_err(|e| format!("{}: {e}", path.display()))?;
                Stats::of(&mut cx).map_err(|e| e.to_string())?
            } else {
                before
            };
            Ok(Entry {
                before,
                after,
                files,
            })
        })
        .collect()
}

/// `kiln corpus lower DIR --stats [--opt]`.
pub fn corpus_stats(args: &CorpusLowerArgs) -> miette::Result<()> {
    let files = shader_files(&args.dir);
    if files.is_empty() {
        return Err(miette::miette!("no shaders under {}", args.dir.display()));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .build()
        .map_err(|e| miette::miette!("{e}"))?;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let results: Vec<Result<Entry, String>> = pool.install(|| {
        files
            .par_iter()
            .flat_map_iter(|f| entry_stats(f, args.opt))
            .collect()
    });
    std::panic::set_hook(hook);
    let mut c = Comparison::default();
    let mut names: Vec<String> = Vec::new();
    let mut errors = 0;
    for r in &results {
        match r {
            Ok(e) => {
                c.add(&e.before, &e.after);
                if names.is_empty() {
                    names = e.files.clone();
                }
            }
            Err(m) => {
                errors += 1;
                if args.verbose {
                    println!("skipped: {m}");
                }
            }
        }
    }
    println!(
        "{} entry points measured, {errors} not lowered{}",
        c.shaders,
        if args.opt {
            ", before -> after the middle end"
        } else {
            " (raw lowering)"
        }
    );
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    print!("{}", c.report(&names));
    Ok(())
}
