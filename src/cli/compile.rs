//! `kiln compile` and `kiln corpus compile`: shaders to VideoCore IV QPU code (front end,
//! middle end, vc4 selection, interface lowering, allocation, emission, validation), and the
//! corpus run that checks every compiled entry point in the simulator against the interpreter.

use crate::cli::front::Stage;
use clap::Args;
use kiln_analysis::Context;
use kiln_front::corpus::shader_files;
use kiln_front::interface::{Interface, SlotKind};
use kiln_front::{entry_points, lower_entry_point};
use kiln_regalloc::Allocator;
use kiln_vc4::compile::{CompileError, CompileOptions, Compiled, Stats, Threads, compile};
use kiln_vc4::emit::OutputMode;
use kiln_vc4::harness;
use kiln_vc4::interface::{InputKind, OutputKind, ShaderInfo};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Stack for lowering deep shaders (as the corpus workers have).
const STACK: usize = 256 << 20;

#[derive(Debug, Args)]
pub struct CompileArgs {
    /// A `.wgsl`, `.spv`, `.vert` or `.frag` file.
    pub shader: PathBuf,
    #[arg(long, value_enum)]
    pub stage: Option<Stage>,
    /// Entry point name (needed when several match).
    #[arg(long)]
    pub entry: Option<String>,
    /// Write the program (little-endian 64-bit words) to this file.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Print the Mesa-style disassembly, the uniform table and the varyings.
    #[arg(long)]
    pub disasm: bool,
    /// Print shader-db-style statistics.
    #[arg(long)]
    pub stats: bool,
    /// Statistics as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The register allocator.
    #[arg(long, default_value = "graph")]
    pub allocator: Allocator,
    /// Also run the program in the simulator against the interpreter (16 pixels).
    #[arg(long)]
    pub check: bool,
    /// Print the allocated function the program was emitted from.
    #[arg(long)]
    pub ir: bool,
    /// Threads of a fragment shader: `auto` (2 when it has a texture lookup at the top level
    /// and fits the lower half of the register files, else 1, as Mesa's vc4 chooses), `1` or
    /// `2` (an error when it cannot be threaded).
    #[arg(long, default_value = "auto")]
    pub threads: Threads,
}

/// The back end's view of a front-end interface.
pub fn shader_info(iface: &Interface) -> ShaderInfo {
    use kiln_vc4::interface::Stage as S;
    let stage = if iface.stage == "vertex" {
        S::Vertex
    } else {
        S::Fragment
    };
    let vertex = stage == S::Vertex;
    let inputs = iface
        .inputs
        .iter()
        .map(|s| {
            let kind = match &s.kind {
                SlotKind::Location { .. } if vertex => InputKind::Attribute,
                SlotKind::Location { .. } => InputKind::Varying,
                SlotKind::BuiltIn { name, .. } if vertex && name == "vertex_index" => {
                    InputKind::IndexAttribute { instance: false }
                }
                SlotKind::BuiltIn { name, .. } if vertex && name == "instance_index" => {
                    InputKind::IndexAttribute { instance: true }
                }
                SlotKind::BuiltIn { name, component } if vertex => {
                    InputKind::Unsupported(format!("built-in {name}.{component}"))
                }
                SlotKind::BuiltIn { name, component } if name == "position" && *component < 4 => {
                    InputKind::FragCoord(*component)
                }
                SlotKind::BuiltIn { name, component } => {
                    InputKind::Unsupported(format!("built-in {name}.{component}"))
                }
            };
            (s.slot, kind)
        })
        .collect();
    let outputs = iface
        .outputs
        .iter()
        .map(|s| {
            let kind = match &s.kind {
                SlotKind::Location {
                    location,
                    component,
                } if vertex => OutputKind::Varying(*location, *component),
                SlotKind::BuiltIn { name, component } if vertex && name == "position" => {
                    OutputKind::Position(*component)
                }
                SlotKind::BuiltIn { name, .. } if vertex && name == "point_size" => {
                    OutputKind::PointSize
                }
                SlotKind::Location {
                    location: 0,
                    component,
                } => OutputKind::Color(*component),
                SlotKind::Location { location, .. } => {
                    OutputKind::Unsupported(format!("colour attachment {location}"))
                }
                SlotKind::BuiltIn { name, .. } => {
                    OutputKind::Unsupported(format!("built-in {name}"))
                }
            };
            (s.slot, kind)
        })
        .collect();
    ShaderInfo {
        stage,
        inputs,
        outputs,
    }
}

/// One entry point through the whole back end.
pub struct Entry {
    pub info: ShaderInfo,
    pub compiled: Compiled,
}

/// Why an entry point did not compile.
pub enum EntryError {
    /// It did not lower or optimise (front end or middle end).
    Front(String),
    Back(CompileError),
}

fn compile_lowered(
    func: kiln_ir::Function,
    iface: &Interface,
    opts: &CompileOptions,
) -> Result<Entry, EntryError> {
    let mut cx = Context::new(func);
    kiln_opt::optimize(&mut cx).map_err(|e| EntryError::Front(format!("opt: {e}")))?;
    let ssa = cx.into_func();
    let info = shader_info(iface);
    let compiled = compile(&ssa, &info, opts).map_err(EntryError::Back)?;
    Ok(Entry { info, compiled })
}

fn stats_text(s: &Stats) -> String {
    format!(
        "{} inst, {} threads, {} uniforms, {} max-temps, {} estimated-cycles; {} registers used, {} parallel copies ({} units), {} spills, {} nops, {} branches\n",
        s.instructions,
        s.threads,
        s.uniforms,
        s.max_temps,
        s.estimated_cycles,
        s.registers_used,
        s.parallel_copies,
        s.copied_units,
        s.spills,
        s.nops,
        s.branches
    )
}

/// `kiln compile SHADER`.
pub fn compile_cmd(args: CompileArgs) -> miette::Result<()> {
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || compile_on_this_thread(args))
        .map_err(|e| miette::miette!("cannot start the compiler thread: {e}"))?
        .join()
        .unwrap_or_else(|_| Err(miette::miette!("internal error: the compiler panicked")))
}

fn compile_on_this_thread(args: CompileArgs) -> miette::Result<()> {
    let name = args.shader.display().to_string();
    let parsed = crate::cli::opt::parse_shader_file(&args.shader)
        .map_err(|e| miette::miette!("{name}: {e}"))?;
    let stage = args.stage.map(|s| match s {
        Stage::Vertex => naga::ShaderStage::Vertex,
        Stage::Fragment => naga::ShaderStage::Fragment,
    });
    let lowered = lower_entry_point(&parsed, stage, args.entry.as_deref())
        .map_err(|e| miette::miette!("{name}: {e}"))?;
    let opts = CompileOptions {
        allocator: args.allocator,
        output: OutputMode::Tlb,
        check: true,
        threads: args.threads,
    };
    let entry = match compile_lowered(lowered.function.clone(), &lowered.interface, &opts) {
        Ok(e) => e,
        Err(EntryError::Front(m)) => return Err(miette::miette!("{name}: {m}")),
        Err(EntryError::Back(e)) => return Err(miette::miette!("{name}: {e}")),
    };
    let c = &entry.compiled;
    if let Some(path) = &args.output {
        let bytes: Vec<u8> = c.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        std::fs::write(path, bytes).map_err(|e| miette::miette!("{}: {e}", path.display()))?;
    }
    let mut out = String::new();
    if args.ir {
        out.push_str(&kiln_ir::print_function(&c.allocated));
    }
    if args.disasm || (args.output.is_none() && !args.stats && !args.json && !args.check) {
        out.push_str(&c.disasm());
        for (k, u) in c.emitted.uniforms.iter().enumerate() {
            let _ = writeln!(out, "# uniform stream [{k}]: {u}");
        }
        if !c.emitted.varyings.is_empty() {
            let _ = writeln!(
                out,
                "# varyings (input slots, in read order): {:?}",
                c.emitted.varyings
            );
        }
    }
    if args.json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({
                "shader": name,
                "entry_point": lowered.interface.entry_point,
                "stage": lowered.interface.stage,
                "instructions": c.stats.instructions,
                "threads": c.stats.threads,
                "uniforms": c.stats.uniforms,
                "max_temps": c.stats.max_temps,
                "estimated_cycles": c.stats.estimated_cycles,
                "registers_used": c.stats.registers_used,
                "parallel_copies": c.stats.parallel_copies,
                "copied_units": c.stats.copied_units,
                "spills": c.stats.spills,
                "nops": c.stats.nops,
                "branches": c.stats.branches,
            })
        );
    } else if args.stats {
        out.push_str(&stats_text(&c.stats));
    }
    // A closed pipe (`| head`) is not an error of the compiler.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    if args.check {
        check_entry(
            &lowered.function,
            &lowered.interface,
            &entry,
            args.allocator,
        )
        .map_err(|m| miette::miette!("{name}: mismatch: {m}"))?;
        let _ = std::io::Write::write_all(
            &mut std::io::stdout(),
            b"check: the simulator agrees with the interpreter (16 pixels)\n",
        );
    }
    Ok(())
}

/// The real program (tile buffer, RGBA8) and the debug build (raw outputs to the VPM) against
/// the interpreter on the selected SSA function.
fn check_entry(
    lowered: &kiln_ir::Function,
    iface: &Interface,
    entry: &Entry,
    allocator: Allocator,
) -> Result<(), String> {
    let c = &entry.compiled;
    harness::check_compiled(c)?;
    if c.output == OutputMode::Vpm {
        return Ok(());
    }
    // The debug build runs with as many threads as the real one, when it can.
    let opts = CompileOptions {
        allocator,
        output: OutputMode::Vpm,
        check: false,
        threads: if c.stats.threads == 2 {
            Threads::Auto
        } else {
            Threads::One
        },
    };
    let debug = match compile_lowered(lowered.clone(), iface, &opts) {
        Ok(e) => e,
        Err(EntryError::Front(m)) => return Err(m),
        Err(EntryError::Back(e)) => return Err(format!("debug build: {e}")),
    };
    harness::check(
        &debug.compiled.ssa,
        &debug.compiled.emitted,
        OutputMode::Vpm,
        &entry.info,
    )
}

#[derive(Debug, Args)]
pub struct CorpusCompileArgs {
    pub dir: PathBuf,
    /// Run every compiled entry point in the simulator against the interpreter.
    #[arg(long)]
    pub check: bool,
    /// The register allocator.
    #[arg(long, default_value = "graph")]
    pub allocator: Allocator,
    /// Worker threads (default: all cores).
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// List every failure and mismatch.
    #[arg(long)]
    pub verbose: bool,
    /// Write one line per compiled entry point (TSV: entry and the statistics) to this file.
    #[arg(long)]
    pub tsv: Option<PathBuf>,
    /// Compare with Mesa's vc4 figures (`mesa-vc4/stats.tsv` of the shared corpus; its paths
    /// are relative to DIR) on the entry points both compile.
    #[arg(long)]
    pub mesa: Option<PathBuf>,
}

enum Outcome {
    Compiled {
        name: String,
        /// (path relative to the corpus directory, `vert`/`frag`, entry point): the key of
        /// Mesa's `stats.tsv`.
        key: (String, String, String),
        stats: Stats,
        /// None: agreed or not checked; Some: the mismatch.
        mismatch: Option<String>,
        /// The interpreter could not run the reference (e.g. its step limit).
        unchecked: bool,
    },
    NotLowered,
    Unsupported(Vec<String>),
    Failed(String),
}

fn corpus_file(path: &Path, args: &CorpusCompileArgs) -> Vec<Outcome> {
    let parsed = match crate::cli::opt::parse_shader_file(path) {
        Ok(p) => p,
        Err(_) => return vec![Outcome::NotLowered],
    };
    entry_points(&parsed.module)
        .into_iter()
        .map(|(entry, stage)| {
            let name = format!("{}:{entry}", path.display());
            let run = || -> Outcome {
                let Ok(lowered) = lower_entry_point(&parsed, Some(stage), Some(&entry)) else {
                    return Outcome::NotLowered;
                };
                let opts = CompileOptions {
                    allocator: args.allocator,
                    output: OutputMode::Tlb,
                    check: true,
                    threads: Threads::Auto,
                };
                match compile_lowered(lowered.function.clone(), &lowered.interface, &opts) {
                    Err(EntryError::Front(_)) => Outcome::NotLowered,
                    Err(EntryError::Back(e @ CompileError::Unsupported(_))) => {
                        Outcome::Unsupported(e.reasons())
                    }
                    Err(EntryError::Back(e)) => Outcome::Failed(format!("{name}: {e}")),
                    Ok(e) => {
                        let (mismatch, unchecked) = if args.check {
                            match check_entry(
                                &lowered.function,
                                &lowered.interface,
                                &e,
                                args.allocator,
                            ) {
                                Ok(()) => (None, false),
                                Err(m) if m.starts_with("interpreter: ") => (None, true),
                                Err(m) => (Some(m), false),
                            }
                        } else {
                            (None, false)
                        };
                        let rel = path
                            .strip_prefix(&args.dir)
                            .unwrap_or(path)
                            .to_string_lossy()
                            .into_owned();
                        let st = match stage {
                            naga::ShaderStage::Vertex => "vert",
                            _ => "frag",
                        };
                        Outcome::Compiled {
                            name: name.clone(),
                            key: (rel, st.to_string(), entry.clone()),
                            stats: e.compiled.stats,
                            mismatch,
                            unchecked,
                        }
                    }
                }
            };
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
                .unwrap_or_else(|_| Outcome::Failed(format!("{name}: panic")))
        })
        .collect()
}

/// `kiln corpus compile DIR`.
pub fn corpus_compile(args: CorpusCompileArgs) -> miette::Result<()> {
    let files = shader_files(&args.dir);
    if files.is_empty() {
        return Err(miette::miette!("no shaders under {}", args.dir.display()));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .stack_size(STACK)
        .build()
        .map_err(|e| miette::miette!("{e}"))?;
    let start = std::time::Instant::now();
    let results: Vec<Outcome> = pool.install(|| {
        files
            .par_iter()
            .flat_map_iter(|f| corpus_file(f, &args))
            .collect()
    });
    let mut compiled = Vec::new();
    let mut keyed = Vec::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let (mut not_lowered, mut unsupported, mut failed, mut mismatched) =
        (0, 0, Vec::new(), Vec::new());
    let mut unchecked = 0;
    for r in &results {
        match r {
            Outcome::Compiled {
                name,
                key,
                stats,
                mismatch,
                unchecked: u,
            } => {
                compiled.push((name, stats));
                keyed.push((key, stats));
                if let Some(m) = mismatch {
                    mismatched.push(format!("{name}: {m}"));
                }
                unchecked += *u as usize;
            }
            Outcome::NotLowered => not_lowered += 1,
            Outcome::Unsupported(rs) => {
                unsupported += 1;
                for reason in rs {
                    *reasons.entry(reason.clone()).or_default() += 1;
                }
            }
            Outcome::Failed(m) => failed.push(m.clone()),
        }
    }
    let total = results.len();
    println!(
        "entry points     {total}: {} compiled, {unsupported} unsupported, {} failed, {not_lowered} not lowered",
        compiled.len(),
        failed.len()
    );
    if args.check {
        println!(
            "check            {} agree, {} mismatched, {unchecked} not checked (the interpreter stops)",
            compiled.len() - mismatched.len() - unchecked,
            mismatched.len()
        );
    }
    let sum = |f: &dyn Fn(&Stats) -> u32| compiled.iter().map(|(_, s)| f(s) as u64).sum::<u64>();
    println!(
        "totals           {} instructions, {} uniforms, {} max-temps, {} estimated cycles, {} nops, {} branches",
        sum(&|s| s.instructions),
        sum(&|s| s.uniforms),
        sum(&|s| s.max_temps),
        sum(&|s| s.estimated_cycles),
        sum(&|s| s.nops),
        sum(&|s| s.branches)
    );
    println!(
        "allocation       {} registers used in total, {} parallel copies ({} units), {} spills",
        sum(&|s| s.registers_used),
        sum(&|s| s.parallel_copies),
        sum(&|s| s.copied_units),
        sum(&|s| s.spills)
    );
    let mut by_count: Vec<(&String, &usize)> = reasons.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    println!("unsupported, by reason (an entry point may have several):");
    for (r, n) in by_count {
        println!("  {n:>6}  {r}");
    }
    println!("time             {:?}", start.elapsed());
    if let Some(path) = &args.tsv {
        let mut tsv = String::from(
            "entry\tinstructions\tthreads\tuniforms\tmax_temps\testimated_cycles\tregisters_used\tcopied_units\n",
        );
        let mut rows = compiled.clone();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        for (name, s) in rows {
            let _ = writeln!(
                tsv,
                "{name}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                s.instructions,
                s.threads,
                s.uniforms,
                s.max_temps,
                s.estimated_cycles,
                s.registers_used,
                s.copied_units
            );
        }
        std::fs::write(path, tsv).map_err(|e| miette::miette!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &args.mesa {
        let text = std::fs::read_to_string(path)
            .map_err(|e| miette::miette!("{}: {e}", path.display()))?;
        print!("{}", mesa_comparison(&text, &keyed));
    }
    if args.verbose {
        for m in failed.iter().chain(&mismatched) {
            println!("FAILED {m}");
        }
    }
    if failed.is_empty() && mismatched.is_empty() {
        Ok(())
    } else {
        Err(miette::miette!(
            "{} entry points failed, {} mismatched",
            failed.len(),
            mismatched.len()
        ))
    }
}

/// kiln against Mesa's vc4 (`stats.tsv`) on the entry points both compile: totals, wins, ties
/// and losses on instructions and threads, and the biggest losses.
fn mesa_comparison(tsv: &str, kiln: &[(&(String, String, String), &Stats)]) -> String {
    let mut lines = tsv.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (Some(p), Some(st), Some(en)) = (col("path"), col("stage"), col("entry")) else {
        return "mesa: no path/stage/entry columns\n".into();
    };
    // (inst, threads, uniforms) per key.
    let mut mesa: BTreeMap<(String, String, String), (u64, u64, u64)> = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        let get = |name: &str| {
            col(name)
                .and_then(|i| f.get(i))
                .and_then(|v| v.parse::<u64>().ok())
        };
        let fig = if f.get(st) == Some(&"frag") {
            get("fs_inst")
                .zip(get("fs_threads"))
                .zip(get("fs_uniforms"))
                .map(|((i, t), u)| (i, t, u))
        } else {
            get("vs_inst")
                .zip(get("vs_uniforms"))
                .map(|(i, u)| (i, 1, u))
        };
        if let (Some(fig), Some(path), Some(stage), Some(entry)) =
            (fig, f.get(p), f.get(st), f.get(en))
        {
            mesa.insert(
                (path.to_string(), stage.to_string(), entry.to_string()),
                fig,
            );
        }
    }
    let mut both = Vec::new();
    for (key, s) in kiln {
        if let Some(&m) = mesa.get(*key) {
            both.push((*key, *s, m));
        }
    }
    let mut out = String::new();
    let n = both.len();
    let ki: u64 = both.iter().map(|(_, s, _)| s.instructions as u64).sum();
    let mi: u64 = both.iter().map(|(_, _, m)| m.0).sum();
    let ku: u64 = both.iter().map(|(_, s, _)| s.uniforms as u64).sum();
    let mu: u64 = both.iter().map(|(_, _, m)| m.2).sum();
    let kt: u64 = both.iter().map(|(_, s, _)| s.threads as u64).sum();
    let mt: u64 = both.iter().map(|(_, _, m)| m.1).sum();
    let (mut win, mut tie, mut loss) = (0, 0, 0);
    for (_, s, m) in &both {
        match (s.instructions as u64).cmp(&m.0) {
            std::cmp::Ordering::Less => win += 1,
            std::cmp::Ordering::Equal => tie += 1,
            std::cmp::Ordering::Greater => loss += 1,
        }
    }
    let (mut twin, mut ttie, mut tloss) = (0, 0, 0);
    for (_, s, m) in &both {
        match (s.threads as u64).cmp(&m.1) {
            std::cmp::Ordering::Greater => twin += 1,
            std::cmp::Ordering::Equal => ttie += 1,
            std::cmp::Ordering::Less => tloss += 1,
        }
    }
    let _ = writeln!(out, "beside Mesa      {n} entry points both compile");
    let _ = writeln!(
        out,
        "  instructions   kiln {ki}, Mesa {mi} ({:+.1} %); kiln wins {win}, ties {tie}, loses {loss}",
        100.0 * (ki as f64 - mi as f64) / mi.max(1) as f64
    );
    let _ = writeln!(
        out,
        "  threads        kiln {kt}, Mesa {mt}; kiln wins {twin}, ties {ttie}, loses {tloss}"
    );
    let _ = writeln!(out, "  uniforms       kiln {ku}, Mesa {mu}");
    both.sort_by_key(|(_, s, m)| std::cmp::Reverse(s.instructions as i64 - m.0 as i64));
    let _ = writeln!(
        out,
        "  biggest losses on instructions (kiln, Mesa, kiln nops):"
    );
    for (k, s, m) in both.iter().take(10) {
        let _ = writeln!(
            out,
            "    {}:{}:{}  {} vs {}  ({} nops)",
            k.0, k.1, k.2, s.instructions, m.0, s.nops
        );
    }
    out
}
