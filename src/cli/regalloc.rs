//! `kiln regalloc` and `kiln corpus regalloc`: register allocation of a `.kir` file and of a
//! directory of shaders, every allocation checked, with shader-db-style totals.

use crate::cli::{eprint, print};
use crate::kir::load_verified;
use crate::pipeline::{self, Options};
use clap::Args;
use kiln_regalloc::{Allocator, RaOptions, RaStats};
use std::fmt::Write as _;
use std::path::PathBuf;

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
        eprint(&format!("{}\n", stats_json(&stats, &files)));
    } else if args.stats {
        eprint(&stats_text(&stats, &files));
    }
    Ok(())
}

fn stats_json(s: &RaStats, files: &[String]) -> serde_json::Value {
    let per_file = |values: &[u32]| -> serde_json::Value {
        files
            .iter()
            .zip(values)
            .map(|(f, v)| (f.clone(), serde_json::Value::from(*v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
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
        "registers_used": per_file(&s.registers_used),
        "max_demand": per_file(&s.max_demand),
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

/// `kiln corpus regalloc DIR`.
pub fn corpus_regalloc(args: CorpusRegallocArgs) -> miette::Result<()> {
    let options = Options {
        allocator: args.allocator,
        ..Options::default()
    };
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
        std::fs::write(path, run.tsv()).map_err(|e| miette::miette!("{}: {e}", path.display()))?;
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
