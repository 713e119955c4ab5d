//! Runs over a directory of shaders, every vertex and fragment entry point of every file on all
//! cores, through the pipeline: lowering (with the front end's verdicts), allocation and
//! compilation with their shader-db-style summaries.

use crate::cache::Cache;
use crate::pipeline::{self, EntryPoint, Options};
use indicatif::{ProgressBar, ProgressStyle};
use kiln_front::corpus::{Checked, Verdict};
use kiln_front::interface::Stage;
use kiln_regalloc::RaStats;
use kiln_vc4::compile::Stats;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The shader files under `dir`, or why there are none.
pub fn files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let files = kiln_front::corpus::shader_files(dir);
    if files.is_empty() {
        return Err(format!("no shaders under {}", dir.display()));
    }
    Ok(files)
}

/// Runs `f` on every file on `jobs` threads (all cores when `None`), each with the compiler's
/// stack, in file order; panics inside `f` are `f`'s to catch. With `progress`, a bar on
/// standard error.
fn each_file<T: Send>(
    files: &[PathBuf],
    jobs: Option<usize>,
    progress: bool,
    f: impl Fn(&Path) -> Vec<T> + Sync,
) -> Result<Vec<T>, String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.unwrap_or(0))
        .stack_size(pipeline::STACK)
        .build()
        .map_err(|e| e.to_string())?;
    let bar = if progress {
        ProgressBar::new(files.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} files {elapsed}")
            .expect("valid template"),
    );
    // naga and the lowering run under catch_unwind; keep their panic messages off the bar.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let out = pool.install(|| {
        files
            .par_iter()
            .flat_map_iter(|p| {
                let v = f(p);
                bar.inc(1);
                v
            })
            .collect()
    });
    std::panic::set_hook(hook);
    bar.finish_and_clear();
    Ok(out)
}

/// `f(entry)` for every entry point of the shader at `path`; `Err` when it does not parse.
fn each_entry<T>(
    path: &Path,
    f: impl Fn(&pipeline::Shader, EntryPoint, &str) -> T,
) -> Result<Vec<T>, pipeline::Error> {
    let shader = pipeline::read_shader(path)?;
    Ok(shader
        .entry_points()
        .into_iter()
        .map(|(name, stage)| {
            let entry = EntryPoint {
                stage: Some(stage),
                name: Some(name.clone()),
            };
            f(&shader, entry, &name)
        })
        .collect())
}

/// `path:entry` and what the front end and the middle end made of it.
pub type FrontResult = (String, Result<pipeline::Front, pipeline::Error>);

/// Every entry point of the first `limit` files under `dir` (all with `None`) through the front
/// end and the middle end, in corpus order: `path:entry` and the result. A file that does not
/// parse gives one `Err` under its path.
pub fn fronts(
    dir: &Path,
    limit: Option<usize>,
    options: &Options,
) -> Result<Vec<FrontResult>, String> {
    let mut files = files(dir)?;
    files.truncate(limit.unwrap_or(files.len()));
    each_file(&files, None, false, |path| {
        let one = |shader: &pipeline::Shader, entry: EntryPoint, name: &str| {
            let f = pipeline::front(shader, &entry, options, &mut pipeline::Kept::default());
            (format!("{}:{name}", path.display()), f)
        };
        each_entry(path, one).unwrap_or_else(|e| vec![(path.display().to_string(), Err(e))])
    })
}

// ---- lowering --------------------------------------------------------------------------------

/// `kiln corpus lower`: every entry point lowered and verified (and with `run`, run in the
/// interpreter): the front end's summary by reason and the lowering time.
pub fn lower(dir: &Path, jobs: Option<usize>, run: bool, verbose: bool) -> Result<String, String> {
    let files = files(dir)?;
    let verdicts: Vec<Verdict> = each_file(&files, jobs, true, |f| {
        if run {
            kiln_front::corpus::lower_file_then(f, run_check)
        } else {
            kiln_front::corpus::lower_file(f)
        }
    })?;
    let mut out = String::new();
    if verbose {
        for v in &verdicts {
            if v.outcome != kiln_front::corpus::Outcome::Lowered {
                let _ = writeln!(
                    out,
                    "{} [{}]: {:?}",
                    v.file.display(),
                    v.entry.as_deref().unwrap_or("-"),
                    v.outcome
                );
            }
        }
    }
    out.push_str(&kiln_front::corpus::summarize(&verdicts));
    let mut times: Vec<f64> = verdicts
        .iter()
        .filter(|v| {
            matches!(
                v.outcome,
                kiln_front::corpus::Outcome::Lowered | kiln_front::corpus::Outcome::StepLimit
            )
        })
        .map(|v| v.seconds)
        .collect();
    times.sort_by(f64::total_cmp);
    if !times.is_empty() {
        let insts: usize = verdicts.iter().map(|v| v.instructions).sum();
        let total: f64 = times.iter().sum();
        let _ = writeln!(
            out,
            "lowering time per entry point: median {:.3} ms, p90 {:.3} ms; {:.0} instructions/s",
            times[times.len() / 2] * 1e3,
            times[times.len() * 9 / 10] * 1e3,
            insts as f64 / total
        );
    }
    Ok(out)
}

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

/// `kiln corpus lower --stats [--opt]`: shader-db-style totals of the lowered functions, before
/// and after the middle end with `optimize`.
pub fn lower_stats(
    dir: &Path,
    jobs: Option<usize>,
    optimize: bool,
    verbose: bool,
) -> Result<String, String> {
    use kiln_opt::stats::{Comparison, Stats as IrStats};
    struct Entry {
        before: IrStats,
        after: IrStats,
        files: Vec<String>,
    }
    let options = Options::default();
    let files = files(dir)?;
    let results: Vec<Result<Entry, String>> = each_file(&files, jobs, false, |path| {
        let run = |shader: &pipeline::Shader, entry: EntryPoint, _: &str| {
            let lowered = pipeline::lower(shader, &entry).map_err(|e| e.to_string())?;
            let func = lowered.function;
            kiln_ir::verify(&func).map_err(|e| format!("verifier: {}", e[0]))?;
            let files: Vec<String> = func.target.files().iter().map(|f| f.name.clone()).collect();
            let mut cx = kiln_analysis::Context::with_debug(func.clone(), options.debug);
            let before = IrStats::of(&mut cx).map_err(|e| e.to_string())?;
            let after = if optimize {
                let opt = pipeline::optimize(func, &options)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                IrStats::of(&mut kiln_analysis::Context::with_debug(opt, options.debug))
                    .map_err(|e| e.to_string())?
            } else {
                before
            };
            Ok(Entry {
                before,
                after,
                files,
            })
        };
        each_entry(path, run).unwrap_or_else(|e| vec![Err(e.to_string())])
    })?;
    let mut c = Comparison::default();
    let mut names: Vec<String> = Vec::new();
    let mut errors = 0;
    let mut out = String::new();
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
                if verbose {
                    let _ = writeln!(out, "skipped: {m}");
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "{} entry points measured, {errors} not lowered{}",
        c.shaders,
        if optimize {
            ", before -> after the middle end"
        } else {
            " (raw lowering)"
        }
    );
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    out.push_str(&c.report(&names));
    Ok(out)
}

// ---- allocation ------------------------------------------------------------------------------

/// One entry point's allocation.
pub struct Allocated {
    pub name: String,
    pub stats: RaStats,
}

/// The allocation run: what went through and what failed (or did not lower).
pub struct AllocationRun {
    pub allocated: Vec<Allocated>,
    pub failed: Vec<String>,
    pub not_lowered: usize,
}

/// `kiln corpus regalloc`: every entry point lowered, optimised (unless `optimize` is false)
/// and allocated on the generic target with `options`' allocator and budget, checked; with
/// `run`, the allocation run in SIMT mode against the SSA function.
pub fn regalloc(
    dir: &Path,
    jobs: Option<usize>,
    options: &Options,
    budget: Option<&str>,
    optimize: bool,
    run: bool,
) -> Result<AllocationRun, String> {
    let files = files(dir)?;
    let results: Vec<Result<Allocated, (bool, String)>> = each_file(&files, jobs, false, |path| {
        let one = |shader: &pipeline::Shader, entry: EntryPoint, entry_name: &str| {
            let name = format!("{}:{entry_name}", path.display());
            let lowered = pipeline::lower(shader, &entry).map_err(|e| (true, e.to_string()))?;
            let ssa = if optimize {
                pipeline::optimize(lowered.function, options)
                    .map_err(|e| (false, format!("{name}: opt: {e}")))?
            } else {
                lowered.function
            };
            let mut options = options.clone();
            if let Some(b) = budget {
                options.budget = kiln_regalloc::RaOptions::parse_budget(&*ssa.target, b)
                    .map_err(|e| (false, e))?;
            }
            let mut func = ssa.clone();
            let stats = pipeline::allocate(&mut func, &options)
                .map_err(|e| (false, format!("{name}: {e}")))?;
            if run {
                // The allocated text reads back, verifies, prints the same, and is what runs.
                let text = kiln_ir::print_function(&func);
                let func = kiln_ir::parse_function(&text).map_err(|e| {
                    (
                        false,
                        format!("{name}: the allocated text does not read back: {e}"),
                    )
                })?;
                kiln_ir::verify(&func).map_err(|errs| {
                    let first = errs.first().map(|e| e.to_string()).unwrap_or_default();
                    (
                        false,
                        format!("{name}: the allocated text does not verify: {first}"),
                    )
                })?;
                if kiln_ir::print_function(&func) != text {
                    return Err((
                        false,
                        format!("{name}: the allocated text does not print back the same"),
                    ));
                }
                let mut env = kiln_interp::Env::with_ordinary_values(&ssa, 16);
                env.step_limit = 2_000_000;
                match kiln_interp::run_ssa(&ssa, &env) {
                    Ok(want) => {
                        // Twice, registers nothing defined holding two patterns.
                        for poison in [env.poison, !env.poison] {
                            let env = kiln_interp::Env {
                                poison,
                                ..env.clone()
                            };
                            let got = kiln_interp::run_simt(&func, &env)
                                .map_err(|e| (false, format!("{name}: allocated: {e}")))?;
                            kiln_interp::diff::compare_outputs(&want, &got).map_err(|m| {
                                (false, format!("{name}: (poison {poison:#x}) {m}"))
                            })?;
                        }
                    }
                    Err(kiln_interp::InterpError::StepLimit { .. }) => {}
                    Err(e) => return Err((false, format!("{name}: the SSA program fails: {e}"))),
                }
            }
            Ok(Allocated { name, stats })
        };
        each_entry(path, one).unwrap_or_else(|e| vec![Err((true, e.to_string()))])
    })?;
    let mut out = AllocationRun {
        allocated: Vec::new(),
        failed: Vec::new(),
        not_lowered: 0,
    };
    for r in results {
        match r {
            Ok(a) => out.allocated.push(a),
            Err((true, _)) => out.not_lowered += 1,
            Err((false, e)) => out.failed.push(e),
        }
    }
    Ok(out)
}

impl AllocationRun {
    /// Shader-db-style totals.
    pub fn summary(&self, graph: bool) -> String {
        let ok = &self.allocated;
        let mut out = String::new();
        let sum = |f: &dyn Fn(&RaStats) -> u64| ok.iter().map(|a| f(&a.stats)).sum::<u64>();
        let before = sum(&|s| s.insts_before as u64);
        let after = sum(&|s| s.insts_after as u64);
        let copied = sum(&|s| s.copied_units as u64);
        let time: Duration = ok
            .iter()
            .map(|a| a.stats.time_spill + a.stats.time_assign)
            .sum();
        let _ = writeln!(
            out,
            "entry points     {} allocated, {} failed, {} not lowered",
            ok.len(),
            self.failed.len(),
            self.not_lowered
        );
        let _ = writeln!(out, "instructions     {before} -> {after}");
        let _ = writeln!(
            out,
            "copies           {} parallel copies, {copied} units ({:.2} moves per 100 instructions)",
            sum(&|s| s.parallel_copies as u64),
            100.0 * copied as f64 / after.max(1) as f64
        );
        let _ = writeln!(
            out,
            "spilling         {} spills, {} reloads, {} rematerialised, {} shaders spill",
            sum(&|s| s.spills as u64),
            sum(&|s| s.reloads as u64),
            sum(&|s| s.remats as u64),
            ok.iter()
                .filter(|a| a.stats.spills + a.stats.remats > 0)
                .count()
        );
        let _ = writeln!(
            out,
            "no register      {} shaders assigned again with other preferences, {} spilled again at a lower budget",
            ok.iter().filter(|a| a.stats.preferences_swapped).count(),
            ok.iter().filter(|a| a.stats.retries > 0).count()
        );
        let nfiles = ok.first().map_or(0, |a| a.stats.registers_used.len());
        for f in 0..nfiles {
            let used = sum(&|s| s.registers_used.get(f).copied().unwrap_or(0) as u64);
            let demand = sum(&|s| s.max_demand.get(f).copied().unwrap_or(0) as u64);
            let above = ok
                .iter()
                .filter(|a| a.stats.registers_used.get(f) > a.stats.max_demand.get(f))
                .count();
            let _ = writeln!(
                out,
                "file {f}           {used} registers used in total, maximum demand {demand}; {above} shaders use more than their demand"
            );
        }
        if graph {
            let _ = writeln!(
                out,
                "colouring        {} nodes, {} edges, {} copies coalesced; {} nodes uncoloured, {} colours refused by the assignment",
                sum(&|s| s.graph_nodes as u64),
                sum(&|s| s.graph_edges as u64),
                sum(&|s| s.coalesced as u64),
                sum(&|s| s.uncoloured as u64),
                sum(&|s| s.preferred_refused as u64)
            );
            let _ = writeln!(
                out,
                "graph spilling   {} shaders spilled by colouring ({} rounds), {} fell back to the SSA spiller",
                ok.iter()
                    .filter(|a| a.stats.spill_rounds > 0 && !a.stats.graph_fallback)
                    .count(),
                sum(&|s| s.spill_rounds as u64),
                ok.iter().filter(|a| a.stats.graph_fallback).count()
            );
        }
        let _ = writeln!(out, "time             {time:?} (spill + assign)");
        out
    }

    /// One line per allocated entry point.
    pub fn tsv(&self) -> String {
        let mut tsv = String::from(
            "entry\tinsts_before\tinsts_after\tcopied_units\tspills\treloads\tregisters_used\tmax_demand\n",
        );
        for a in &self.allocated {
            let s = &a.stats;
            let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            let _ = writeln!(
                tsv,
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                a.name,
                s.insts_before,
                s.insts_after,
                s.copied_units,
                s.spills,
                s.reloads,
                list(&s.registers_used),
                list(&s.max_demand)
            );
        }
        tsv
    }
}

// ---- compilation -----------------------------------------------------------------------------

/// What became of one entry point.
pub enum Outcome {
    Compiled {
        program: Box<pipeline::Program>,
        /// What the program is made of.
        census: Box<kiln_qpu::isa::census::Census>,
        /// The check's first difference, if it found one.
        mismatch: Option<String>,
        /// The interpreter could not run the reference (e.g. its step limit).
        unchecked: bool,
        /// The program came from the shader cache.
        cached: bool,
    },
    NotLowered,
    Unsupported(Vec<String>),
    Failed(String),
}

/// One entry point of a corpus run: `path:entry`, its key in Mesa's `stats.tsv` (a file that
/// does not parse has an empty stage and entry), the time it took and what became of it.
pub struct EntryOutcome {
    pub name: String,
    pub key: crate::mesa::Key,
    pub time: Duration,
    pub outcome: Outcome,
}

/// The `format` of `kiln corpus compile --json`'s document.
pub const REPORT_FORMAT: &str = "kiln corpus compile 1";

/// A compile run over a corpus.
pub struct CompileRun {
    pub outcomes: Vec<EntryOutcome>,
    pub elapsed: Duration,
}

/// `kiln corpus compile`: every entry point compiled with `options` and, with `check`, run
/// against the interpreter; programs (and each file's entry points) come from `cache` when it
/// has them, and what is compiled is stored there.
pub fn compile(
    dir: &Path,
    jobs: Option<usize>,
    options: &Options,
    check: bool,
    cache: &Cache,
) -> Result<CompileRun, String> {
    let files = files(dir)?;
    let start = Instant::now();
    let outcomes = each_file(&files, jobs, true, |path| {
        compile_file(dir, path, options, check, cache)
    })?;
    Ok(CompileRun {
        outcomes,
        elapsed: start.elapsed(),
    })
}

/// Every entry point of one file; the file is parsed once, and only when the cache lacks one
/// of its programs.
fn compile_file(
    dir: &Path,
    path: &Path,
    options: &Options,
    check: bool,
    cache: &Cache,
) -> Vec<EntryOutcome> {
    let start = Instant::now();
    let rel = path
        .strip_prefix(dir)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned();
    let entries = pipeline::read(path).and_then(|source| {
        let (entries, parsed) = pipeline::entry_points(&source, cache)?;
        Ok((source, entries, parsed))
    });
    let (source, entries, parsed) = match entries {
        Ok(found) => found,
        Err(_) => {
            return vec![EntryOutcome {
                name: path.display().to_string(),
                key: (rel, String::new(), String::new()),
                time: start.elapsed(),
                outcome: Outcome::NotLowered,
            }];
        }
    };
    // Parsed once, and only when a program is not in the cache.
    let parsed = match parsed {
        Some(shader) => std::cell::OnceCell::from(Ok(shader)),
        None => std::cell::OnceCell::new(),
    };
    let shader = || {
        parsed
            .get_or_init(|| pipeline::parse(source.clone()))
            .as_ref()
            .ok()
    };
    let mut out = Vec::with_capacity(entries.len());
    for (entry_name, stage) in entries {
        let start = Instant::now();
        let name = format!("{}:{entry_name}", path.display());
        let entry = EntryPoint {
            stage: Some(stage),
            name: Some(entry_name.clone()),
        };
        let run = || {
            let key = (options.cacheable() && cache.is_enabled())
                .then(|| pipeline::program_key(cache, &source, &entry, options));
            if !check && let Some(program) = key.as_ref().and_then(|k| cache.get_json(k)) {
                return compiled(program, None, false, true);
            }
            let Some(shader) = shader() else {
                return Outcome::NotLowered;
            };
            match pipeline::compile(shader, &entry, options) {
                Err(e @ pipeline::Error::Back { .. }) => match e.unsupported() {
                    Some(reasons) => Outcome::Unsupported(reasons),
                    None => Outcome::Failed(format!("{name}: {e}")),
                },
                Err(e @ pipeline::Error::TimeLimit { .. }) => Outcome::Failed(e.to_string()),
                Err(_) => Outcome::NotLowered,
                Ok(c) => {
                    let (mismatch, unchecked) = if check {
                        match pipeline::check(&c, options) {
                            Ok(()) => (None, false),
                            Err(m) if m.starts_with("interpreter: ") => (None, true),
                            Err(m) => (Some(m), false),
                        }
                    } else {
                        (None, false)
                    };
                    let program = pipeline::Program::of(&c);
                    if let Some(k) = &key
                        && mismatch.is_none()
                    {
                        cache.put_json(k, &program);
                    }
                    compiled(program, mismatch, unchecked, false)
                }
            }
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
            .unwrap_or_else(|_| Outcome::Failed(format!("{name}: panic")));
        let stage = match stage {
            Stage::Vertex => "vert",
            _ => "frag",
        };
        out.push(EntryOutcome {
            name,
            key: (rel.clone(), stage.to_string(), entry_name),
            time: start.elapsed(),
            outcome,
        });
    }
    out
}

fn compiled(
    program: pipeline::Program,
    mismatch: Option<String>,
    unchecked: bool,
    cached: bool,
) -> Outcome {
    Outcome::Compiled {
        census: Box::new(kiln_qpu::isa::census::Census::of(&program.words)),
        program: Box::new(program),
        mismatch,
        unchecked,
        cached,
    }
}

impl CompileRun {
    /// The compiled entry points' names and statistics, in corpus order.
    pub fn compiled(&self) -> impl Iterator<Item = (&String, &crate::mesa::Key, &Stats)> {
        self.outcomes.iter().filter_map(|o| match &o.outcome {
            Outcome::Compiled { program, .. } => Some((&o.name, &o.key, &program.stats)),
            _ => None,
        })
    }

    /// The compiled entry points' keys and censuses, in corpus order.
    pub fn censuses(&self) -> Vec<(crate::mesa::Key, kiln_qpu::isa::census::Census)> {
        self.outcomes
            .iter()
            .filter_map(|o| match &o.outcome {
                Outcome::Compiled { census, .. } => Some((o.key.clone(), **census)),
                _ => None,
            })
            .collect()
    }

    /// Operations of every compiled program by what made them (an IR opcode, a block start,
    /// the prologue, the end), most first, with their share.
    pub fn breakdown(&self) -> String {
        let mut by: BTreeMap<&str, u64> = BTreeMap::new();
        for o in &self.outcomes {
            if let Outcome::Compiled { program, .. } = &o.outcome {
                for (name, n) in &program.origins {
                    *by.entry(name).or_default() += n;
                }
            }
        }
        let total: u64 = by.values().sum();
        let mut rows: Vec<(&str, u64)> = by.into_iter().collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut out = format!("operations by origin ({total} in all)\n");
        for (name, n) in rows {
            let _ = writeln!(
                out,
                "  {n:>9}  {:5.1} %  {name}",
                100.0 * n as f64 / total.max(1) as f64
            );
        }
        out
    }

    /// Failures and mismatches, one line each.
    pub fn problems(&self) -> Vec<String> {
        let mut failed = Vec::new();
        let mut mismatched = Vec::new();
        for o in &self.outcomes {
            match &o.outcome {
                Outcome::Failed(m) => failed.push(m.clone()),
                Outcome::Compiled {
                    mismatch: Some(m), ..
                } => mismatched.push(format!("{}: {m}", o.name)),
                _ => {}
            }
        }
        failed.extend(mismatched);
        failed
    }

    /// (failed, mismatched) counts.
    pub fn failures(&self) -> (usize, usize) {
        let failed = self
            .outcomes
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Failed(_)))
            .count();
        let mismatched = self
            .outcomes
            .iter()
            .filter(|o| {
                matches!(
                    o.outcome,
                    Outcome::Compiled {
                        mismatch: Some(_),
                        ..
                    }
                )
            })
            .count();
        (failed, mismatched)
    }

    /// Counts by outcome, the check's verdicts, shader-db totals and the refusals by reason.
    pub fn summary(&self, check: bool) -> String {
        let mut out = String::new();
        let compiled: Vec<&Stats> = self.compiled().map(|(_, _, s)| s).collect();
        let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
        let (mut not_lowered, mut unsupported, mut unchecked) = (0, 0, 0);
        for o in &self.outcomes {
            match &o.outcome {
                Outcome::NotLowered => not_lowered += 1,
                Outcome::Unsupported(rs) => {
                    unsupported += 1;
                    for r in rs {
                        *reasons.entry(r).or_default() += 1;
                    }
                }
                Outcome::Compiled { unchecked: u, .. } => unchecked += *u as usize,
                Outcome::Failed(_) => {}
            }
        }
        let (failed, mismatched) = self.failures();
        let _ = writeln!(
            out,
            "entry points     {}: {} compiled, {unsupported} unsupported, {failed} failed, {not_lowered} not lowered",
            self.outcomes.len(),
            compiled.len(),
        );
        if check {
            let _ = writeln!(
                out,
                "check            {} agree, {mismatched} mismatched, {unchecked} not checked (the interpreter stops)",
                compiled.len() - mismatched - unchecked,
            );
        }
        let sum = |f: &dyn Fn(&Stats) -> u32| compiled.iter().map(|s| f(s) as u64).sum::<u64>();
        let _ = writeln!(
            out,
            "totals           {} instructions, {} uniforms, {} max-temps, {} estimated cycles, {} nops, {} branches",
            sum(&|s| s.instructions),
            sum(&|s| s.uniforms),
            sum(&|s| s.max_temps),
            sum(&|s| s.estimated_cycles),
            sum(&|s| s.nops),
            sum(&|s| s.branches)
        );
        let _ = writeln!(
            out,
            "allocation       {} registers used in total, {} parallel copies ({} units), {} spills",
            sum(&|s| s.registers_used),
            sum(&|s| s.parallel_copies),
            sum(&|s| s.copied_units),
            sum(&|s| s.spills)
        );
        let mut ratios: Vec<f64> = compiled
            .iter()
            .filter(|s| s.bound > 0)
            .map(|s| s.instructions as f64 / s.bound as f64)
            .collect();
        if !ratios.is_empty() {
            ratios.sort_by(f64::total_cmp);
            let _ = writeln!(
                out,
                "schedule         instructions / lower bound: median {:.3}, total {:.3}",
                ratios[ratios.len() / 2],
                sum(&|s| s.instructions) as f64 / sum(&|s| s.bound).max(1) as f64
            );
        }
        let mut by_count: Vec<(&&str, &usize)> = reasons.iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let _ = writeln!(
            out,
            "unsupported, by reason (an entry point may have several):"
        );
        for (r, n) in by_count {
            let _ = writeln!(out, "  {n:>6}  {r}");
        }
        let _ = writeln!(out, "time             {:?}", self.elapsed);
        out
    }

    /// Every entry point's status and figures as JSON (`kiln report` reads it): the
    /// directory, the options, and one object per entry point in corpus order.
    pub fn json(&self, dir: &Path, options: &Options) -> String {
        let entries: Vec<serde_json::Value> = self
            .outcomes
            .iter()
            .map(|o| {
                let mut e = serde_json::json!({
                    "name": o.name,
                    "path": o.key.0,
                    "stage": o.key.1,
                    "entry": o.key.2,
                    "compile_time_us": o.time.as_micros() as u64,
                });
                let (status, more) = match &o.outcome {
                    Outcome::Compiled {
                        program,
                        census,
                        mismatch,
                        cached,
                        ..
                    } => {
                        let s = &program.stats;
                        let figures = serde_json::json!({
                            "instructions": s.instructions,
                            "operations": census.operations,
                            "nops": s.nops,
                            "threads": s.threads,
                            "uniforms": s.uniforms,
                            "max_temps": s.max_temps,
                            "estimated_cycles": s.estimated_cycles,
                            "registers": s.registers_used,
                            "copies": s.parallel_copies,
                            "spills": s.spills,
                            "cached": cached,
                            "mismatch": mismatch,
                        });
                        ("compiled", figures)
                    }
                    Outcome::Unsupported(reasons) => (
                        "unsupported",
                        serde_json::json!({ "reason": reasons.join("; ") }),
                    ),
                    Outcome::Failed(m) => ("failed", serde_json::json!({ "reason": m })),
                    Outcome::NotLowered => ("not lowered", serde_json::json!({})),
                };
                if let (Some(map), Some(more)) = (e.as_object_mut(), more.as_object()) {
                    map.insert("status".into(), status.into());
                    map.extend(more.clone());
                }
                e
            })
            .collect();
        let doc = serde_json::json!({
            "format": REPORT_FORMAT,
            "kiln": env!("CARGO_PKG_VERSION"),
            "dir": dir.display().to_string(),
            "options": options.code_key(),
            "entries": entries,
        });
        serde_json::to_string_pretty(&doc).expect("JSON") + "\n"
    }

    /// One line per compiled entry point, sorted by name: every statistic.
    pub fn tsv(&self) -> String {
        let mut tsv = String::from("entry");
        for n in Stats::NAMES {
            tsv.push('\t');
            tsv.push_str(n);
        }
        tsv.push('\n');
        let mut rows: Vec<(&String, &Stats)> = self.compiled().map(|(n, _, s)| (n, s)).collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        for (name, s) in rows {
            tsv.push_str(name);
            for v in s.values() {
                let _ = write!(tsv, "\t{v}");
            }
            tsv.push('\n');
        }
        tsv
    }
}
