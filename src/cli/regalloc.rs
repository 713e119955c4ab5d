//! `kiln regalloc` and `kiln corpus regalloc`: register allocation of a `.kir` file and of a
//! directory of shaders, every allocation checked, with shader-db-style totals.

use crate::cli::ir::{parse_source, read_input};
use clap::Args;
use kiln_analysis::{Context, DebugFlags};
use kiln_front::corpus::shader_files;
use kiln_front::{entry_points, lower_entry_point};
use kiln_ir::Function;
use kiln_regalloc::{Allocator, RaOptions, RaStats, allocate};
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Args)]
pub struct RegallocArgs {
    /// A `.kir` file in SSA form; `-` reads standard input.
    pub file: PathBuf,
    /// The allocator.
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

fn options(
    func: &Function,
    allocator: Allocator,
    budget: Option<&str>,
) -> Result<RaOptions, String> {
    let budget = match budget {
        Some(b) => RaOptions::parse_budget(&*func.target, b)?,
        None => Vec::new(),
    };
    Ok(RaOptions {
        allocator,
        budget,
        check: true,
    })
}

/// `kiln regalloc FILE`: the allocated function on stdout, checked.
pub fn regalloc(args: RegallocArgs) -> miette::Result<()> {
    let (name, text) = read_input(&args.file)?;
    let mut func = parse_source(&name, &text)?;
    kiln_ir::verify(&func).map_err(|e| miette::miette!("{name}: {}", e[0]))?;
    if func.allocated {
        return Err(miette::miette!("{name}: the function is already allocated"));
    }
    let opts = options(&func, args.allocator, args.budget.as_deref())
        .map_err(|e| miette::miette!("--budget: {e}"))?;
    let debug = DebugFlags::from_env();
    let stats = allocate(&mut func, &opts).map_err(|e| miette::miette!("{name}: {e}"))?;
    if debug.verify {
        kiln_ir::verify(&func).map_err(|e| miette::miette!("{name}: allocated: {}", e[0]))?;
    }
    print!("{}", kiln_ir::print_function(&func));
    let files: Vec<String> = func.target.files().iter().map(|f| f.name.clone()).collect();
    if args.json {
        eprintln!("{}", stats_json(&stats, &files));
    } else if args.stats {
        eprint!("{}", stats_text(&stats, &files));
    }
    Ok(())
}

fn per_file(values: &[u32], files: &[String]) -> serde_json::Value {
    files
        .iter()
        .zip(values)
        .map(|(f, v)| (f.clone(), serde_json::Value::from(*v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn stats_json(s: &RaStats, files: &[String]) -> serde_json::Value {
    serde_json::json!({
        "instructions_before": s.insts_before,
        "instructions_after": s.insts_after,
        "parallel_copies": s.parallel_copies,
        "copied_units": s.copied_units,
        "spills": s.spills,
        "reloads": s.reloads,
        "remats": s.remats,
        "spill_slots": s.spill_slots,
        "split_edges": s.split_edges,
        "graph_nodes": s.graph_nodes,
        "graph_edges": s.graph_edges,
        "coalesced": s.coalesced,
        "uncoloured": s.uncoloured,
        "spill_rounds": s.spill_rounds,
        "graph_fallback": s.graph_fallback,
        "registers_used": per_file(&s.registers_used, files),
        "max_demand": per_file(&s.max_demand, files),
        "time_spill_us": s.time_spill.as_micros() as u64,
        "time_assign_us": s.time_assign.as_micros() as u64,
        "time_check_us": s.time_check.as_micros() as u64,
    })
}

fn stats_text(s: &RaStats, files: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "instructions   {} -> {}",
        s.insts_before, s.insts_after
    );
    let _ = writeln!(
        out,
        "copies         {} parallel copies moving {} units",
        s.parallel_copies, s.copied_units
    );
    let _ = writeln!(
        out,
        "spilling       {} spills, {} reloads, {} rematerialised, {} slots",
        s.spills, s.reloads, s.remats, s.spill_slots
    );
    for (f, name) in files.iter().enumerate() {
        let _ = writeln!(
            out,
            "file {name:<9} {} registers used, maximum demand {}",
            s.registers_used.get(f).copied().unwrap_or(0),
            s.max_demand.get(f).copied().unwrap_or(0)
        );
    }
    if s.graph_nodes > 0 {
        let _ = writeln!(
            out,
            "colouring      {} nodes, {} edges, {} copies coalesced, {} uncoloured, {} rounds of spilling{}",
            s.graph_nodes,
            s.graph_edges,
            s.coalesced,
            s.uncoloured,
            s.spill_rounds,
            if s.graph_fallback {
                " (then the SSA spiller)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        out,
        "time           spill {:?}, assign {:?}, check {:?}",
        s.time_spill, s.time_assign, s.time_check
    );
    out
}

#[derive(Debug, Args)]
pub struct CorpusRegallocArgs {
    pub dir: PathBuf,
    /// The allocator.
    #[arg(long, default_value = "ssa")]
    pub allocator: Allocator,
    /// Units per register file of the generic target, e.g. `v=24,s=8` (default: whole files).
    #[arg(long)]
    pub budget: Option<String>,
    /// Allocate the raw lowering, without the middle end.
    #[arg(long)]
    pub no_opt: bool,
    /// Also run every entry point in the interpreter before and after allocation (16 lanes)
    /// and count disagreements as failures.
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

/// One entry point's allocation.
struct Allocated {
    name: String,
    stats: RaStats,
}

fn allocate_file(path: &Path, args: &CorpusRegallocArgs) -> Vec<Result<Allocated, String>> {
    let parsed = match crate::cli::opt::parse_shader_file(path) {
        Ok(p) => p,
        Err(e) => return vec![Err(e)],
    };
    entry_points(&parsed.module)
        .into_iter()
        .map(|(entry, stage)| {
            let name = format!("{}:{entry}", path.display());
            let lowered = lower_entry_point(&parsed, Some(stage), Some(&entry))
                .map_err(|e| format!("lower: {e}"))?;
            let mut cx = Context::new(lowered.function);
            if !args.no_opt {
                kiln_opt::optimize(&mut cx).map_err(|e| format!("{name}: opt: {e}"))?;
            }
            let ssa = cx.into_func();
            let opts = options(&ssa, args.allocator, args.budget.as_deref())?;
            let mut func = ssa.clone();
            let stats = allocate(&mut func, &opts).map_err(|e| format!("{name}: {e}"))?;
            if args.run {
                let mut env = kiln_interp::Env::with_ordinary_values(&ssa, 16);
                env.step_limit = 2_000_000;
                match kiln_interp::run_ssa(&ssa, &env) {
                    Ok(want) => {
                        let got = kiln_interp::run_simt(&func, &env)
                            .map_err(|e| format!("{name}: allocated: {e}"))?;
                        kiln_interp::diff::compare_outputs(&want, &got)
                            .map_err(|m| format!("{name}: {m}"))?;
                    }
                    Err(kiln_interp::InterpError::StepLimit { .. }) => {}
                    Err(e) => return Err(format!("{name}: the SSA program fails: {e}")),
                }
            }
            Ok(Allocated { name, stats })
        })
        .collect()
}

/// `kiln corpus regalloc DIR`.
pub fn corpus_regalloc(args: CorpusRegallocArgs) -> miette::Result<()> {
    let files = shader_files(&args.dir);
    if files.is_empty() {
        return Err(miette::miette!("no shaders under {}", args.dir.display()));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .stack_size(256 << 20)
        .build()
        .map_err(|e| miette::miette!("{e}"))?;
    let results: Vec<Result<Allocated, String>> = pool.install(|| {
        files
            .par_iter()
            .flat_map_iter(|f| allocate_file(f, &args))
            .collect()
    });
    let mut ok: Vec<&Allocated> = Vec::new();
    let (mut unsupported, mut failed) = (0, Vec::new());
    for r in &results {
        match r {
            Ok(a) => ok.push(a),
            Err(e) if e.starts_with("lower:") || e == "does not parse" => unsupported += 1,
            Err(e) => failed.push(e.clone()),
        }
    }
    let sum = |f: &dyn Fn(&RaStats) -> u64| ok.iter().map(|a| f(&a.stats)).sum::<u64>();
    let before = sum(&|s| s.insts_before as u64);
    let after = sum(&|s| s.insts_after as u64);
    let copied = sum(&|s| s.copied_units as u64);
    let time: Duration = ok
        .iter()
        .map(|a| a.stats.time_spill + a.stats.time_assign)
        .sum();
    println!(
        "entry points     {} allocated, {} failed, {} not lowered",
        ok.len(),
        failed.len(),
        unsupported
    );
    println!("instructions     {before} -> {after}");
    println!(
        "copies           {} parallel copies, {copied} units ({:.2} moves per 100 instructions)",
        sum(&|s| s.parallel_copies as u64),
        100.0 * copied as f64 / after.max(1) as f64
    );
    println!(
        "spilling         {} spills, {} reloads, {} rematerialised, {} shaders spill",
        sum(&|s| s.spills as u64),
        sum(&|s| s.reloads as u64),
        sum(&|s| s.remats as u64),
        ok.iter()
            .filter(|a| a.stats.spills + a.stats.remats > 0)
            .count()
    );
    let nfiles = ok.first().map_or(0, |a| a.stats.registers_used.len());
    for f in 0..nfiles {
        let used = sum(&|s| s.registers_used.get(f).copied().unwrap_or(0) as u64);
        let demand = sum(&|s| s.max_demand.get(f).copied().unwrap_or(0) as u64);
        let above = ok
            .iter()
            .filter(|a| a.stats.registers_used.get(f) > a.stats.max_demand.get(f))
            .count();
        println!(
            "file {f}           {used} registers used in total, maximum demand {demand}; {above} shaders use more than their demand"
        );
    }
    if args.allocator == Allocator::Graph {
        println!(
            "colouring        {} nodes, {} edges, {} copies coalesced; {} nodes uncoloured, {} colours refused by the assignment",
            sum(&|s| s.graph_nodes as u64),
            sum(&|s| s.graph_edges as u64),
            sum(&|s| s.coalesced as u64),
            sum(&|s| s.uncoloured as u64),
            sum(&|s| s.preferred_refused as u64)
        );
        println!(
            "graph spilling   {} shaders spilled by colouring ({} rounds), {} fell back to the SSA spiller",
            ok.iter()
                .filter(|a| a.stats.spill_rounds > 0 && !a.stats.graph_fallback)
                .count(),
            sum(&|s| s.spill_rounds as u64),
            ok.iter().filter(|a| a.stats.graph_fallback).count()
        );
    }
    println!("time             {time:?} (spill + assign)");
    if let Some(path) = &args.tsv {
        let mut tsv = String::from(
            "entry\tinsts_before\tinsts_after\tcopied_units\tspills\treloads\tregisters_used\tmax_demand\n",
        );
        for a in &ok {
            let s = &a.stats;
            let _ = writeln!(
                tsv,
                "{}\t{}\t{}\t{}\t{}\t{}\t{:?}\t{:?}",
                a.name,
                s.insts_before,
                s.insts_after,
                s.copied_units,
                s.spills,
                s.reloads,
                s.registers_used,
                s.max_demand
            );
        }
        std::fs::write(path, tsv).map_err(|e| miette::miette!("{}: {e}", path.display()))?;
    }
    if args.verbose {
        for e in &failed {
            println!("FAILED {e}");
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(miette::miette!("{} entry points failed", failed.len()))
    }
}
