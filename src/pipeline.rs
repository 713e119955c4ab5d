//! The one compile pipeline: a shader to VideoCore IV code, every stage in order, as NAK's
//! `api.rs` lists its passes and Cranelift's `Context` runs them. Every command and test that
//! compiles goes through here; the stages are also callable one by one (`kiln opt`,
//! `kiln regalloc` on `.kir` text). The design is in `docs/pipeline.md`.
//!
//! ```text
//! read → parse (naga) → lower (front end) → optimize (middle end)
//!      → select (vc4) → for each thread mode: interface → allocate → emit (+ validate)
//! ```

use crate::cache::{Cache, Key};
use kiln_analysis::{Context, DebugFlags, PassError};
use kiln_front::interface::{Interface, SlotKind};
use kiln_front::{FrontError, Lowered, Parsed, Source};
use kiln_ir::Function;
use kiln_regalloc::{Allocator, RaError, RaOptions, RaStats};
use kiln_vc4::compile::{CompileError, Compiled, Selected, Stats, Threads};
use kiln_vc4::emit::OutputMode;
use kiln_vc4::interface::{InputKind, OutputKind, ShaderInfo};
use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};
use std::fmt;
use std::path::Path;

/// A stage whose IR can be kept and printed (`kiln compile --ir STAGE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// The front end's generic SSA IR.
    Lowered,
    /// After the middle end.
    Optimized,
    /// After vc4 instruction selection: vc4 operations, generic compares, selects and
    /// interface instructions.
    Selected,
    /// After the interface pass, before allocation (what Mesa's `VC4_DEBUG=qir` shows).
    Interface,
    /// Allocated, out of SSA: what the program is emitted from.
    Allocated,
}

impl Stage {
    pub const ALL: [Stage; 5] = [
        Stage::Lowered,
        Stage::Optimized,
        Stage::Selected,
        Stage::Interface,
        Stage::Allocated,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Lowered => "lowered",
            Stage::Optimized => "optimized",
            Stage::Selected => "selected",
            Stage::Interface => "interface",
            Stage::Allocated => "allocated",
        }
    }
}

impl std::str::FromStr for Stage {
    type Err = String;
    fn from_str(s: &str) -> Result<Stage, String> {
        Stage::ALL
            .into_iter()
            .find(|st| st.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
                format!("`{s}`: the stages are {}", names.join(", "))
            })
    }
}

/// How to compile: one struct for every stage.
#[derive(Clone, Debug)]
pub struct Options {
    pub allocator: Allocator,
    pub threads: Threads,
    /// Where a fragment shader writes: the tile buffer, or raw values to the VPM (the debug
    /// build the checks compare bit for bit).
    pub output: OutputMode,
    /// Check what each stage made: the verifier after the interface pass, the allocation
    /// checker, the QPU validators (kiln's rules and Mesa's). On in debug builds (every test),
    /// with `--check` and with `KILN_DEBUG=verify`; a release compile, like Mesa's, does not.
    pub check: bool,
    /// The middle-end passes, by name (`None`: the default pipeline; empty: none).
    pub passes: Option<Vec<String>>,
    /// What the middle end may change of floating-point results: nothing (`Exact`), or what
    /// GLSL's relaxed precision allows (`Relaxed`, the default).
    pub precision: kiln_opt::Precision,
    /// Units per register file for allocation (`None`: whole files).
    pub budget: Vec<Option<u32>>,
    /// What `KILN_DEBUG` asks for.
    pub debug: DebugFlags,
    /// The stages whose IR the result keeps.
    pub keep: Vec<Stage>,
    /// Schedule the QPU code (off: the emitter's order, one operation per instruction).
    pub schedule: bool,
    /// Count the scheduler's lower bound (`Stats::bound`) over every time window of a region
    /// (off: over the whole region, a weaker bound, at no cost: the code is the same). A
    /// measurement, as `check` is a test: a driver's compile, which `kiln bench compile-cost`
    /// measures, leaves it off.
    pub bound_windows: bool,
    /// Search steps per scheduling region of the QPU code for a schedule shorter than the
    /// list scheduler's (`kiln_vc4::schedule::Effort`; 0: none).
    pub search_steps: u32,
    /// Schedule each block before allocation (`kiln_sched::pressure`; off: the middle end's
    /// order).
    pub pre_schedule: bool,
    /// User clip distances a fragment shader discards on (Mesa's `ucp_enables` key,
    /// `kiln_front::clip`): it reads that many `gl_ClipDistance` varyings after its own and
    /// discards where one is negative. 0 for none; vertex shaders ignore it (they write what
    /// they write).
    pub clip_distances: u32,
    /// Give up on a compile that has run this long, at the next stage it finishes (the middle
    /// end, a thread mode's allocation, the retry): `Error::TimeLimit`. `None`: no limit.
    pub time_limit: Option<std::time::Duration>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            allocator: Allocator::Graph,
            threads: Threads::Auto,
            output: OutputMode::Tlb,
            check: cfg!(debug_assertions) || DebugFlags::from_env().verify,
            passes: None,
            precision: kiln_opt::Precision::Relaxed,
            budget: Vec::new(),
            debug: DebugFlags::from_env(),
            keep: Vec::new(),
            schedule: true,
            bound_windows: true,
            search_steps: 0,
            clip_distances: 0,
            time_limit: None,
            pre_schedule: true,
        }
    }
}

/// Why a shader did not compile.
#[derive(Debug)]
pub enum Error {
    /// The input could not be read.
    Read { path: String, reason: String },
    /// The front end: naga's parse or validation error, or what lowering refuses.
    Front {
        name: String,
        error: Box<FrontError>,
        /// The source text and the span the error points at, when there is one.
        source: Option<Box<(NamedSource<String>, std::ops::Range<usize>)>>,
    },
    /// The middle end failed.
    Middle { name: String, error: PassError },
    /// The back end refused or failed.
    Back { name: String, error: CompileError },
    /// The compile ran past `Options::time_limit`; `after`: the stage it had finished.
    TimeLimit {
        name: String,
        limit: std::time::Duration,
        after: &'static str,
    },
}

impl Error {
    /// The features an `unsupported` refusal names (one per line of a corpus summary).
    pub fn unsupported(&self) -> Option<Vec<String>> {
        match self {
            Error::Back {
                error: CompileError::Unsupported(r),
                ..
            } => Some(r.clone()),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Read { path, reason } => write!(f, "cannot read {path}: {reason}"),
            Error::Front { name, error, .. } => write!(f, "{name}: {error}"),
            Error::Middle { name, error } => write!(f, "{name}: middle end: {error}"),
            Error::Back {
                name,
                error: e @ CompileError::Unsupported(_),
            } => write!(f, "{name}: {e}"),
            Error::Back { name, error } => write!(f, "{name}: the vc4 back end failed: {error}"),
            Error::TimeLimit { name, limit, after } => {
                write!(
                    f,
                    "{name}: over the time limit of {limit:?} (after {after})"
                )
            }
        }
    }
}

impl std::error::Error for Error {}

impl Diagnostic for Error {
    fn source_code(&self) -> Option<&dyn SourceCode> {
        match self {
            Error::Front {
                source: Some(s), ..
            } => Some(&s.0),
            _ => None,
        }
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        match self {
            Error::Front {
                source: Some(s), ..
            } => Some(Box::new(std::iter::once(LabeledSpan::new_with_span(
                Some("here".into()),
                s.1.clone(),
            )))),
            _ => None,
        }
    }
}

/// A shader read and parsed.
pub struct Shader {
    pub source: Source,
    pub parsed: Parsed,
}

impl Shader {
    pub fn name(&self) -> &str {
        &self.source.name
    }

    /// The vertex and fragment entry points: (name, stage).
    pub fn entry_points(&self) -> Vec<(String, kiln_front::interface::Stage)> {
        kiln_front::entry_points(&self.parsed.module)
            .into_iter()
            .map(|(n, s)| (n, stage_of(s)))
            .collect()
    }
}

fn stage_of(s: naga::ShaderStage) -> kiln_front::interface::Stage {
    match s {
        naga::ShaderStage::Vertex => kiln_front::interface::Stage::Vertex,
        _ => kiln_front::interface::Stage::Fragment,
    }
}

/// Which entry point of a shader: by stage, by name, or the only one.
#[derive(Clone, Debug, Default)]
pub struct EntryPoint {
    pub stage: Option<kiln_front::interface::Stage>,
    pub name: Option<String>,
}

/// Reads a shader file (its language from its name).
pub fn read(path: &Path) -> Result<Source, Error> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| Error::Read {
        path: name.clone(),
        reason: e.to_string(),
    })?;
    Source::from_path(path, bytes).map_err(|error| Error::Front {
        name,
        error: Box::new(error),
        source: None,
    })
}

fn front_error(source: &Source, error: FrontError) -> Error {
    let span = match &error {
        FrontError::Unsupported { span: Some(r), .. } => Some(r.clone()),
        _ => None,
    };
    let source_text = match (span, source.text()) {
        (Some(r), Some(text)) => {
            let r = r.start.min(text.len())..r.end.min(text.len());
            Some(Box::new((
                NamedSource::new(&source.name, text.to_string()),
                r,
            )))
        }
        _ => None,
    };
    Error::Front {
        name: source.name.clone(),
        error: Box::new(error),
        source: source_text,
    }
}

/// Parse and validate (naga).
pub fn parse(source: Source) -> Result<Shader, Error> {
    match kiln_front::parse(&source) {
        Ok(parsed) => Ok(Shader { source, parsed }),
        Err(e) => Err(front_error(&source, e)),
    }
}

/// [`read`] then [`parse`].
pub fn read_shader(path: &Path) -> Result<Shader, Error> {
    parse(read(path)?)
}

/// The front end: one entry point to kiln's generic SSA IR and its interface.
pub fn lower(shader: &Shader, entry: &EntryPoint) -> Result<Lowered, Error> {
    kiln_front::lower_entry_point(
        &shader.parsed,
        entry.stage.map(|s| s.naga()),
        entry.name.as_deref(),
    )
    .map_err(|e| front_error(&shader.source, e))
}

/// The middle end: the default pipeline, or the passes `options.passes` names.
pub fn optimize(func: Function, options: &Options) -> Result<Function, PassError> {
    let mut cx = Context::with_debug(func, options.debug);
    match &options.passes {
        None => kiln_opt::optimize(&mut cx, options.precision)?,
        Some(names) => {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            kiln_opt::run_passes(&mut cx, &names)?;
        }
    }
    Ok(cx.into_func())
}

/// Register allocation of an SSA function on its own target (`kiln regalloc`, the corpus'
/// allocation runs), checked when `options.check` or `KILN_DEBUG=verify` says so.
pub fn allocate(func: &mut Function, options: &Options) -> Result<RaStats, RaError> {
    let opts = RaOptions {
        allocator: options.allocator,
        budget: options.budget.clone(),
        check: options.check || options.debug.verify,
        refuse_spilling: false,
    };
    kiln_regalloc::allocate(func, &opts)
}

/// The back end's view of a front-end interface: what each input and output slot is on vc4.
pub fn shader_info(iface: &Interface) -> ShaderInfo {
    use kiln_front::interface::Stage as S;
    let vertex = iface.stage == S::Vertex;
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
                SlotKind::BuiltIn { name, component }
                    if !vertex && name == "position" && *component < 4 =>
                {
                    InputKind::FragCoord(*component)
                }
                SlotKind::BuiltIn { name, .. } if !vertex && name == "front_facing" => {
                    InputKind::FrontFacing
                }
                // Interpolated like the varyings, after them (their slots are above).
                SlotKind::BuiltIn { name, .. } if !vertex && name == "clip_distance" => {
                    InputKind::Varying
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
                SlotKind::BuiltIn { name, component } if vertex && name == "clip_distance" => {
                    OutputKind::ClipDistance(*component)
                }
                SlotKind::Location { location: 0, .. }
                    if s.scalar
                        .is_some_and(|k| k != kiln_front::interface::Scalar::Float) =>
                {
                    OutputKind::Unsupported(
                        "of integer type (the tile buffer holds 8-bit normalized colour)".into(),
                    )
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
        stage: if vertex {
            kiln_vc4::interface::Stage::Vertex
        } else {
            kiln_vc4::interface::Stage::Fragment
        },
        inputs,
        outputs,
    }
}

/// The IR after the stages `keep` names.
#[derive(Clone, Debug, Default)]
pub struct Kept {
    keep: Vec<Stage>,
    pub stages: Vec<(Stage, Function)>,
}

impl Kept {
    pub fn new(keep: &[Stage]) -> Kept {
        Kept {
            keep: keep.to_vec(),
            stages: Vec::new(),
        }
    }

    fn record(&mut self, stage: Stage, func: &Function) {
        if self.keep.contains(&stage) {
            self.stages.retain(|(s, _)| *s != stage);
            self.stages.push((stage, func.clone()));
        }
    }
}

/// The size of an optimised function (its instructions) from which the back end keeps a copy
/// of the selected function for the thread modes after the first, rather than selecting again
/// where the first fails: over the corpus's compiles that try two threads first, that mode
/// fails for 3 of 1,862 below 400 instructions, where a copy would mostly go unused, and for 59
/// of 193 from 400 on, where selecting again costs more than the copies.
const KEEP_SELECTED: usize = 400;

/// The vc4 back end on an optimised generic function: selection, then for each thread mode
/// (2 then 1, as Mesa tries them) the interface pass, allocation and emission. A thread mode
/// that fails to allocate or emit gives way to the next; what the interface pass refuses, it
/// refuses for every mode.
pub fn back_end(
    generic: &Function,
    info: &ShaderInfo,
    options: &Options,
    kept: &mut Kept,
) -> Result<Compiled, CompileError> {
    use kiln_vc4::compile as vc4;
    let mut selected: Selected = vc4::select(generic, info, options.output)?;
    kept.record(Stage::Selected, &selected.func);
    let modes = vc4::thread_modes(&selected, options.threads)?;
    // Where the pre-RA scheduler's order that hides latency does not fit two threads, the
    // order for pressure alone is tried before one thread (a second thread hides more).
    use kiln_vc4::pre_sched::Order;
    let orders: &[Option<Order>] = if !options.pre_schedule {
        &[None]
    } else {
        &[Some(Order::Latency), Some(Order::Pressure)]
    };
    let attempts: Vec<(u32, Option<Order>)> = modes
        .iter()
        .flat_map(|&threads| {
            let tries = if threads == 2 { orders.len() } else { 1 };
            orders[..tries].iter().map(move |&order| (threads, order))
        })
        .collect();
    let mut result = Err(CompileError::Failed("no thread mode to try".into()));
    // The register demand of the last order that failed two threads: the pressure order is
    // allocated only where it needs fewer registers (a hopeless retry costs an allocation).
    let mut failed_demand: Option<kiln_ir::Demand> = None;
    let keep = attempts.len() > 1 && generic.inst_count() >= KEEP_SELECTED;
    for (k, &(threads, pre_schedule)) in attempts.iter().enumerate() {
        // A small function: the first mode takes the selected function itself, and a mode
        // after one that failed selects again (selection is deterministic); a large one: each
        // mode but the last takes a copy ([`KEEP_SELECTED`]).
        let input = if keep && k + 1 < attempts.len() {
            selected.func.clone()
        } else if keep || k == 0 {
            let target = selected.func.target.clone();
            std::mem::replace(&mut selected.func, Function::new(String::new(), target))
        } else {
            vc4::select(generic, info, options.output)?.func
        };
        let (func, analysed) =
            vc4::lower_interface(&selected, input, threads, pre_schedule, options.check)?;
        let demand = analysed.1.max;
        let retry = threads == 2 && pre_schedule == Some(Order::Pressure);
        if retry
            && failed_demand.is_some_and(|failed| !failed.exceeds(analysed.1.max))
            && k + 1 < attempts.len()
        {
            continue;
        }
        kept.record(Stage::Interface, &func);
        // The interface pass's function becomes the allocated one; the allocator gives back
        // the SSA form it allocated (the interface pass's, with its critical edges split and
        // in the assignment's form where allocation needed either), what the interpreter runs.
        let mut allocated = func;
        let attempt = vc4::allocate(
            &mut allocated,
            options.allocator,
            options.check,
            Some(analysed),
        )
        .and_then(|(ra, ssa)| {
            kept.record(Stage::Allocated, &allocated);
            let finish = vc4::Finish {
                schedule: options.schedule,
                effort: kiln_vc4::schedule::Effort {
                    bound_windows: options.bound_windows,
                    search_steps: options.search_steps,
                },
                print: options.debug.print,
                check: options.check,
            };
            let emitted = vc4::emit(&allocated, &selected.info, selected.output, finish)?;
            Ok((ra, ssa, emitted))
        });
        match attempt {
            Ok((ra, ssa, emitted)) => {
                let stats = Stats::of(&emitted, &ra, threads);
                return Ok(Compiled {
                    ssa,
                    allocated,
                    words: emitted.words(),
                    emitted,
                    ra,
                    stats,
                    info: selected.info,
                    output: selected.output,
                });
            }
            Err(e) => {
                if threads == 2 && !retry {
                    failed_demand = Some(demand);
                }
                result = Err(e);
            }
        }
        if k + 1 == attempts.len() {
            break;
        }
    }
    result
}

/// The most registers `func` needs at once, by the one demand function (`None`: its blocks
/// form no CFG).
fn demand(func: &Function) -> Option<kiln_ir::Demand> {
    let mut func = func.clone();
    let cfg = kiln_analysis::Cfg::compute(&func).ok()?;
    Some(kiln_analysis::compute_liveness(&mut func, &cfg).max)
}

/// One entry point through the front end and the middle end.
#[derive(Clone, Debug)]
pub struct Front {
    pub interface: Interface,
    /// The front end's function.
    pub lowered: Function,
    /// After the middle end: what the back end starts from.
    pub generic: Function,
}

/// The front end and the middle end on one entry point of a parsed shader.
pub fn front(
    shader: &Shader,
    entry: &EntryPoint,
    options: &Options,
    kept: &mut Kept,
) -> Result<Front, Error> {
    middle(shader.name(), lower(shader, entry)?, options, kept)
}

/// The middle end on a lowered entry point (`name` for errors).
fn middle(
    name: &str,
    lowered: Lowered,
    options: &Options,
    kept: &mut Kept,
) -> Result<Front, Error> {
    kept.record(Stage::Lowered, &lowered.function);
    // (The default pipeline copies the function as its first pass runs; a list of passes, or
    // the debug output of every pass, starts from a whole copy.)
    let optimized = if options.passes.is_none() && !options.debug.print && !options.debug.time {
        kiln_opt::optimize_copy(&lowered.function, options.precision, options.debug)
    } else {
        optimize(lowered.function.clone(), options)
    };
    let generic = optimized.map_err(|error| Error::Middle {
        name: name.to_string(),
        error,
    })?;
    kept.record(Stage::Optimized, &generic);
    Ok(Front {
        interface: lowered.interface,
        lowered: lowered.function,
        generic,
    })
}

/// One entry point compiled: its interface, the IR it went through and the program.
#[derive(Clone, Debug)]
pub struct Compilation {
    pub interface: Interface,
    /// The front end's function.
    pub lowered: Function,
    /// After the middle end: what the back end starts from, and what the exact-math reference
    /// of `kiln run` interprets.
    pub generic: Function,
    pub compiled: Compiled,
    /// The IR after each stage `Options::keep` names, in order.
    pub stages: Vec<(Stage, Function)>,
}

/// The whole pipeline on one entry point of a parsed shader.
pub fn compile(
    shader: &Shader,
    entry: &EntryPoint,
    options: &Options,
) -> Result<Compilation, Error> {
    compile_lowered(shader.name(), lower(shader, entry)?, options)
}

/// The pipeline after the front end: the middle end and the back end on a lowered entry point
/// (`name` for errors). What a driver's compile costs; `kiln bench compile-cost` measures it.
pub fn compile_lowered(
    name: &str,
    lowered: Lowered,
    options: &Options,
) -> Result<Compilation, Error> {
    let started = std::time::Instant::now();
    let in_time = |after: &'static str| match options.time_limit {
        Some(limit) if started.elapsed() > limit => Err(Error::TimeLimit {
            name: name.to_string(),
            limit,
            after,
        }),
        _ => Ok(()),
    };
    let mut lowered = lowered;
    if options.clip_distances > 0
        && lowered.interface.stage == kiln_front::interface::Stage::Fragment
    {
        kiln_front::clip::discard_clipped(&mut lowered, options.clip_distances).map_err(|e| {
            Error::Front {
                name: name.to_string(),
                error: Box::new(FrontError::unsupported(e)),
                source: None,
            }
        })?;
    }
    let mut kept = Kept::new(&options.keep);
    let mut f = middle(name, lowered, options, &mut kept)?;
    in_time("the middle end")?;
    let info = shader_info(&f.interface);
    let name = || name.to_string();
    let first = back_end(&f.generic, &info, options, &mut kept);
    in_time("the back end")?;
    // The QPU cannot spill, and a threaded shader has half the registers: where the middle
    // end raised the register demand past what the files hold (the allocation spills, or a
    // shader that could run two threads runs one), it runs again under the demand of the
    // function it was given.
    let over = match &first {
        Err(CompileError::Unsupported(r)) => r == &["spilling"],
        Ok(c) => {
            c.stats.threads == 1
                && options.threads == Threads::Auto
                && kiln_vc4::threads::threading(&c.ssa, &c.info).is_ok()
        }
        Err(_) => false,
    };
    // The retry's middle end keeps the demand within the lowered function's; when the default
    // pipeline already did, it would give the same function again (bounded work: the
    // largest shaders that run one thread are not compiled twice for nothing).
    let raised = || match (demand(&f.lowered), demand(&f.generic)) {
        (Some(limit), Some(now)) => !kiln_opt::demand_within(now, limit),
        _ => true,
    };
    let compiled = if over && options.passes.is_none() && raised() {
        let mut cx = Context::with_debug(f.lowered.clone(), options.debug);
        // `raised` says the default pipeline (what `f.generic` is) raised the demand.
        kiln_opt::optimize_within_demand(&mut cx, options.precision, true).map_err(|error| {
            Error::Middle {
                name: name(),
                error,
            }
        })?;
        let generic = cx.into_func();
        let mut again = Kept::new(&options.keep);
        // Where the first compile ran one thread, only two threads are worth a second: one
        // thread again would be discarded.
        let retry = Options {
            threads: if first.is_ok() {
                Threads::Two
            } else {
                options.threads
            },
            ..options.clone()
        };
        match back_end(&generic, &info, &retry, &mut again) {
            Ok(c)
                if first
                    .as_ref()
                    .is_ok_and(|old| old.stats.threads >= c.stats.threads) =>
            {
                first
            }
            Err(_) if first.is_ok() => first,
            second => {
                f.generic = generic;
                kept.record(Stage::Optimized, &f.generic);
                kept.stages.retain(|(s, _)| *s <= Stage::Optimized);
                kept.stages.extend(again.stages);
                second
            }
        }
    } else {
        first
    }
    .map_err(|error| Error::Back {
        name: name(),
        error,
    })?;
    Ok(Compilation {
        interface: f.interface,
        lowered: f.lowered,
        generic: f.generic,
        compiled,
        stages: kept.stages,
    })
}

/// A compiled program as a driver keeps it, and as the shader cache stores it: the QPU code,
/// its uniform table and input slots, its statistics and its operations by origin.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Program {
    pub entry_point: String,
    pub stage: kiln_front::interface::Stage,
    pub words: Vec<u64>,
    pub uniforms: Vec<kiln_vc4::uniforms::Uniform>,
    pub varyings: Vec<u32>,
    pub stats: Stats,
    /// Operations per origin (`Emitted::operations_by_origin`).
    pub origins: Vec<(String, u64)>,
}

impl Program {
    pub fn of(c: &Compilation) -> Program {
        let compiled = &c.compiled;
        Program {
            entry_point: c.interface.entry_point.clone(),
            stage: c.interface.stage,
            words: compiled.words.clone(),
            uniforms: compiled.emitted.uniforms.clone(),
            varyings: compiled.emitted.varyings.clone(),
            stats: compiled.stats.clone(),
            origins: compiled.emitted.operations_by_origin(&compiled.allocated),
        }
    }

    /// Mesa-style disassembly.
    pub fn disasm(&self) -> String {
        kiln_qpu::isa::disasm_program(&self.words, kiln_qpu::isa::Style::Mesa)
    }
}

impl Options {
    /// Whether a compile with these options may be answered from the shader cache: not when
    /// it must keep the IR of its stages or trace them (`KILN_DEBUG=print,time,ra`).
    pub fn cacheable(&self) -> bool {
        self.keep.is_empty() && !self.debug.print && !self.debug.time && !self.debug.ra
    }

    /// Everything in the options that changes the code or its statistics (not `check`,
    /// `keep`, `debug`).
    pub fn code_key(&self) -> String {
        format!(
            "{:?} {:?} {:?} {:?} {:?} {:?} {} {} {} {} {}",
            self.allocator,
            self.threads,
            self.output,
            self.passes,
            self.precision,
            self.budget,
            self.schedule,
            self.pre_schedule,
            self.clip_distances,
            self.bound_windows,
            self.search_steps
        )
    }
}

/// The cache key of a compile: the build, the target, the options that change the code, the
/// shader's language and bytes, and the entry point as asked for.
pub fn program_key(cache: &Cache, source: &Source, entry: &EntryPoint, options: &Options) -> Key {
    cache
        .key("program")
        .field(b"vc4")
        .field(options.code_key().as_bytes())
        .field(format!("{:?}", source.language).as_bytes())
        .field(&source.bytes)
        .field(format!("{:?}", entry.stage).as_bytes())
        .field(entry.name.as_deref().unwrap_or("\0").as_bytes())
        .finish()
}

/// A shader's vertex and fragment entry points: (name, stage).
pub type EntryPoints = Vec<(String, kiln_front::interface::Stage)>;

/// A shader's vertex and fragment entry points, from the cache when it has them; on a miss,
/// also the parsed shader, for the compiles that follow.
pub fn entry_points(
    source: &Source,
    cache: &Cache,
) -> Result<(EntryPoints, Option<Shader>), Error> {
    let key = cache
        .key("entry points")
        .field(format!("{:?}", source.language).as_bytes())
        .field(&source.bytes)
        .finish();
    if let Some(list) = cache.get_json(&key) {
        return Ok((list, None));
    }
    let shader = parse(source.clone())?;
    let list = shader.entry_points();
    cache.put_json(&key, &list);
    Ok((list, Some(shader)))
}

/// The pipeline through the shader cache: the program of `entry`, and whether the cache had
/// it. A miss parses and compiles `source` and stores the program.
pub fn compile_program(
    source: &Source,
    entry: &EntryPoint,
    options: &Options,
    cache: &Cache,
) -> Result<(Program, bool), Error> {
    let cached = options.cacheable() && cache.is_enabled();
    let key = cached.then(|| program_key(cache, source, entry, options));
    if let Some(p) = key.as_ref().and_then(|k| cache.get_json(k)) {
        return Ok((p, true));
    }
    let shader = parse(source.clone())?;
    let program = Program::of(&compile(&shader, entry, options)?);
    if let Some(k) = &key {
        cache.put_json(k, &program);
    }
    Ok((program, false))
}

/// The differential check of a compilation: the program against the interpreter on the
/// selected function, and the debug build (every output raw to the VPM, as many threads as
/// the program) bit for bit. `Err` names the first difference; an interpreter error starts
/// with `interpreter: `.
pub fn check(c: &Compilation, options: &Options) -> Result<(), String> {
    let compiled = &c.compiled;
    // Integer and boolean uniforms read 3 and true: a loop a uniform bounds runs a few times
    // (float uniforms keep the harness's ordinary values).
    let uniforms: Vec<(u32, u32)> = c
        .interface
        .uniforms
        .iter()
        .flat_map(|b| &b.members)
        .filter(|m| m.scalar != kiln_front::interface::Scalar::Float)
        .flat_map(|m| {
            let bits = if m.scalar == kiln_front::interface::Scalar::Bool {
                1
            } else {
                3
            };
            m.slots.iter().map(move |&s| (s, bits))
        })
        .collect();
    kiln_vc4::harness::check_with(
        &compiled.ssa,
        &compiled.emitted,
        compiled.output,
        &compiled.info,
        &uniforms,
    )?;
    if compiled.output == OutputMode::Vpm {
        return Ok(());
    }
    let debug_options = Options {
        output: OutputMode::Vpm,
        check: false,
        threads: if compiled.stats.threads == 2 {
            Threads::Auto
        } else {
            Threads::One
        },
        keep: Vec::new(),
        ..options.clone()
    };
    let info = shader_info(&c.interface);
    let debug = back_end(&c.generic, &info, &debug_options, &mut Kept::default())
        .map_err(|e| format!("debug build: {e}"))?;
    kiln_vc4::harness::check_with(
        &debug.ssa,
        &debug.emitted,
        OutputMode::Vpm,
        &compiled.info,
        &uniforms,
    )
}

/// Runs `f` on a thread with a stack deep enough for the deepest shader naga and the front end
/// accept (both bound their recursion, `kiln_front::nesting`); a panic becomes an error.
pub fn with_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(f)
        .map_err(|e| format!("cannot start the compiler thread: {e}"))?
        .join()
        .map_err(|_| "internal error: the compiler panicked".into())
}

/// Stack of the compiler's threads (rayon's default of 2 MiB is too little for deep shaders).
pub const STACK: usize = 256 << 20;
