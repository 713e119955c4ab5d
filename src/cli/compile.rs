//! `kiln compile` and `kiln corpus compile`: shaders to VideoCore IV QPU code through the
//! pipeline, with the disassembly, the IR after any stage, statistics and the check.

use crate::cli::EntryArgs;
use crate::cli::print;
use crate::pipeline::{self, Options, Stage};
use clap::Args;
use kiln_regalloc::Allocator;
use kiln_vc4::compile::Threads;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CompileArgs {
    /// A `.wgsl`, `.spv`, `.vert` or `.frag` file.
    pub shader: PathBuf,
    #[command(flatten)]
    pub entry: EntryArgs,
    /// Write the program (little-endian 64-bit words) to this file (`-`: standard output).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Write what the driver must give the program to this file as JSON: the uniform stream's
    /// table (what each word holds, in read order) and the input slots in read order.
    #[arg(long, value_name = "OUT.json")]
    pub uniforms: Option<PathBuf>,
    /// Print the Mesa-style disassembly, the uniform table and the varyings.
    #[arg(long)]
    pub disasm: bool,
    /// Print shader-db-style statistics.
    #[arg(long)]
    pub stats: bool,
    /// Statistics as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The register allocator: `graph` (seed 002's graph colouring) or `ssa` (SSA-based assignment).
    #[arg(long, default_value = "graph")]
    pub allocator: Allocator,
    /// Also run the program in the simulator against the interpreter (16 pixels).
    #[arg(long)]
    pub check: bool,
    /// Print the IR after these stages (lowered, optimized, selected, interface, allocated;
    /// alone: allocated), allocated IR with the QPU's register names.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_missing_value = "allocated")]
    pub ir: Option<Vec<Stage>>,
    /// Threads of a fragment shader: `auto` (2 when it has a texture lookup at the top level
    /// and fits the lower half of the register files, else 1, as Mesa's vc4 chooses), `1` or
    /// `2` (an error when it cannot be threaded).
    #[arg(long, default_value = "auto")]
    pub threads: Threads,
    /// Leave the QPU code unscheduled: the emitter's order, one operation per instruction.
    #[arg(long)]
    pub no_sched: bool,
    /// Leave each block in the middle end's order before allocation (no pre-RA scheduler).
    #[arg(long)]
    pub no_pre_sched: bool,
    /// Search steps per scheduling region for a schedule shorter than the list scheduler's
    /// (a region of at most 64 instructions; 0: none, a driver's compile).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub search_steps: u32,
    /// A fragment shader discards where one of this many user clip distances (varyings after
    /// its own, written by the vertex shader's `gl_ClipDistance`) is negative (at most 8).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub clip_distances: u32,
    #[command(flatten)]
    pub cache: crate::cli::cache::CacheArgs,
}

/// `kiln compile SHADER`.
pub fn compile(args: CompileArgs) -> miette::Result<()> {
    let text = pipeline::with_stack(move || compile_on_this_thread(args))
        .map_err(|e| miette::miette!("{e}"))??;
    print(&text);
    Ok(())
}

fn compile_on_this_thread(args: CompileArgs) -> miette::Result<String> {
    for path in [&args.output, &args.uniforms].into_iter().flatten() {
        crate::cli::check_output(path, &[&args.shader])?;
    }
    let source = pipeline::read(&args.shader)?;
    let options = Options {
        allocator: args.allocator,
        threads: args.threads,
        keep: args.ir.clone().unwrap_or_default(),
        schedule: !args.no_sched,
        pre_schedule: !args.no_pre_sched,
        search_steps: args.search_steps,
        check: args.check || Options::default().check,
        clip_distances: args.clip_distances,
        ..Options::default()
    };
    let entry = args.entry.entry_point();
    let mut out = String::new();
    // What needs the IR (its stages, the check) compiles; the rest may come from the cache.
    let (program, compilation) = if args.check || !options.cacheable() {
        let c = pipeline::compile(&pipeline::parse(source.clone())?, &entry, &options)?;
        for (stage, func) in &c.stages {
            let _ = writeln!(out, "; after {}", stage.name());
            out.push_str(&kiln_ir::print_function(func));
        }
        (pipeline::Program::of(&c), Some(c))
    } else {
        let cache = args.cache.open()?;
        let compiled = pipeline::compile_program(&source, &entry, &options, &cache);
        crate::cli::cache::warn(&cache);
        (compiled?.0, None)
    };
    if let Some(path) = &args.output {
        let bytes = kiln_qpu::words::to_binary(&program.words);
        crate::cli::write_output(path, &[&args.shader], &bytes)?;
    }
    if let Some(path) = &args.uniforms {
        let table = serde_json::json!({
            "entry_point": program.entry_point,
            "stage": program.stage,
            "uniforms": program.uniforms,
            "inputs_in_read_order": program.varyings,
        });
        let text = serde_json::to_string_pretty(&table).expect("JSON") + "\n";
        crate::cli::write_output(path, &[&args.shader], text.as_bytes())?;
    }
    if args.disasm
        || (args.output.is_none()
            && args.uniforms.is_none()
            && !args.stats
            && !args.json
            && !args.check
            && args.ir.is_none())
    {
        out.push_str(&program.disasm());
        for (k, u) in program.uniforms.iter().enumerate() {
            let _ = writeln!(out, "# uniform stream [{k}]: {u}");
        }
        if !program.varyings.is_empty() {
            let slots: Vec<String> = program.varyings.iter().map(u32::to_string).collect();
            let _ = writeln!(
                out,
                "# varyings (input slots, in read order): {}",
                slots.join(", ")
            );
        }
    }
    if args.json {
        let mut stats = serde_json::to_value(&program.stats).expect("statistics serialize");
        if let Some(map) = stats.as_object_mut() {
            map.insert("shader".into(), source.name.clone().into());
            map.insert("entry_point".into(), program.entry_point.clone().into());
            map.insert(
                "stage".into(),
                serde_json::to_value(program.stage).expect("a stage"),
            );
        }
        let _ = writeln!(out, "{stats}");
    } else if args.stats {
        let _ = writeln!(out, "{}", program.stats);
    }
    if let Some(c) = &compilation
        && args.check
    {
        print(&out);
        out.clear();
        pipeline::check(c, &options).map_err(|m| match m.strip_prefix("interpreter: ") {
            // Not a mismatch: the reference could not be computed.
            Some(why) => miette::miette!(
                "{}: not checked: the interpreter stopped: {why}",
                source.name
            ),
            None => miette::miette!("{}: mismatch: {m}", source.name),
        })?;
        out.push_str("check: the simulator agrees with the interpreter (16 pixels)\n");
    }
    Ok(out)
}

#[derive(Debug, Args)]
pub struct CorpusCompileArgs {
    pub dir: PathBuf,
    /// Run every compiled entry point in the simulator against the interpreter.
    #[arg(long)]
    pub check: bool,
    /// The register allocator: `graph` (seed 002's graph colouring) or `ssa` (SSA-based assignment).
    #[arg(long, default_value = "graph")]
    pub allocator: Allocator,
    /// Worker threads (default: all cores).
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// List every failure and mismatch.
    #[arg(long)]
    pub verbose: bool,
    /// Write one line per compiled entry point (TSV: entry and every statistic) to this file.
    #[arg(long)]
    pub tsv: Option<PathBuf>,
    /// Write every entry point's status and figures (instructions, operations, nops, threads,
    /// uniforms, max-temps, estimated cycles, registers, copies, spills, compile time) as JSON
    /// to this file, for `kiln report`.
    #[arg(long, value_name = "OUT.json")]
    pub json: Option<PathBuf>,
    /// Compare with Mesa's vc4 figures (`mesa-vc4/stats.tsv` of the shared corpus; its paths
    /// are relative to DIR) on the entry points both compile.
    #[arg(long)]
    pub mesa: Option<PathBuf>,
    /// With --mesa: also count kiln's and Mesa's code (`mesa-vc4/qpu/`) the same way —
    /// instructions, operations, nops, paired instructions — in total, per category and by
    /// kind of operation, and list the largest operation excess.
    #[arg(long, requires = "mesa")]
    pub mesa_qpu: Option<PathBuf>,
    /// Also print the operations of all compiled programs by what made them (IR opcode,
    /// block start, prologue, end).
    #[arg(long)]
    pub breakdown: bool,
    /// Leave the QPU code unscheduled.
    #[arg(long)]
    pub no_sched: bool,
    /// No pre-RA scheduler.
    #[arg(long)]
    pub no_pre_sched: bool,
    /// Search steps per scheduling region for a shorter schedule (0: none).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub search_steps: u32,
    /// Seconds an entry point may take: a compile past it fails (`over the time limit`) when
    /// its current stage ends, and the run goes on; 0: no limit.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub time_limit: f64,
    #[command(flatten)]
    pub cache: crate::cli::cache::CacheArgs,
}

/// `--time-limit SECONDS` as a limit (0: none).
fn time_limit(seconds: f64) -> miette::Result<Option<std::time::Duration>> {
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(miette::miette!(
            "--time-limit {seconds}: expected a number of seconds, 0 for none"
        ));
    }
    Ok((seconds > 0.0).then(|| std::time::Duration::from_secs_f64(seconds)))
}

/// `kiln corpus compile DIR`.
pub fn corpus_compile(args: CorpusCompileArgs) -> miette::Result<()> {
    let mesa = match &args.mesa {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| miette::miette!("{}: {e}", path.display()))?;
            let figures = crate::mesa::read_stats(&text)
                .map_err(|e| miette::miette!("{}: {e}", path.display()))?;
            let prefix =
                crate::mesa::dir_in_corpus(path, &args.dir).map_err(|e| miette::miette!("{e}"))?;
            Some((figures, prefix))
        }
        None => None,
    };
    let options = Options {
        allocator: args.allocator,
        schedule: !args.no_sched,
        pre_schedule: !args.no_pre_sched,
        search_steps: args.search_steps,
        check: args.check || Options::default().check,
        time_limit: time_limit(args.time_limit)?,
        ..Options::default()
    };
    // Outputs are checked before the corpus runs, not after.
    for path in [&args.tsv, &args.json].into_iter().flatten() {
        crate::cli::check_output(path, &[&args.dir])?;
    }
    let cache = args.cache.open()?;
    let run = crate::corpus::compile(&args.dir, args.jobs, &options, args.check, &cache)
        .map_err(|e| miette::miette!("{e}"))?;
    print(&run.summary(args.check));
    if cache.is_enabled() {
        let c = cache.counts();
        print(&format!(
            "cache            {} hits ({} from memory), {} misses, {} written, {} damaged entries removed\n",
            c.memory_hits + c.disk_hits,
            c.memory_hits,
            c.misses,
            c.writes,
            c.damaged
        ));
    }
    crate::cli::cache::warn(&cache);
    if let Some(path) = &args.json {
        let json = run.json(&args.dir, &options);
        crate::cli::write_output(path, &[&args.dir], json.as_bytes())?;
    }
    if args.breakdown {
        print(&run.breakdown());
    }
    if let Some(path) = &args.tsv {
        crate::cli::write_output(path, &[&args.dir], run.tsv().as_bytes())?;
    }
    if let Some((mesa, prefix)) = &mesa {
        let key = |k: &crate::mesa::Key| crate::mesa::in_corpus(prefix, k.clone());
        let kiln: Vec<_> = run
            .compiled()
            .map(|(_, k, s)| (key(k), s.clone()))
            .collect();
        print(&crate::mesa::compare(mesa, &kiln));
        if let Some(dir) = &args.mesa_qpu {
            let censuses: Vec<_> = run
                .censuses()
                .into_iter()
                .map(|(k, c)| (key(&k), c))
                .collect();
            let code = crate::mesa::compare_code(mesa, dir, &censuses)
                .map_err(|e| miette::miette!("{e}"))?;
            print(&code);
        }
    }
    if args.verbose {
        for m in run.problems() {
            print(&format!("FAILED {m}\n"));
        }
    }
    match run.failures() {
        (0, 0) => Ok(()),
        (f, m) => Err(miette::miette!("{f} entry points failed, {m} mismatched")),
    }
}
