//! The vc4 back end's stages, each a step of the driver's pipeline (`kiln::pipeline`, which
//! lists them in order): [`select`] (vertex outputs in Mesa's VPM layout, instruction
//! selection), [`thread_modes`] (2 then 1 for a threaded fragment shader, as Mesa's
//! `vc4_get_compiled_shader` tries them), [`lower_interface`], [`allocate`] (checked; the QPU
//! cannot spill) and [`emit`] (validated by both validators), with [`Stats`] in Mesa's
//! shader-db terms. The design is in `docs/vc4.md` ("The back end").

use crate::emit::{Emitted, OutputMode};
use crate::interface::{ShaderInfo, Stage};
use kiln_ir::Function;
use kiln_qpu::isa::{Instr, validate, validate_mesa};
use kiln_regalloc::{Allocator, RaError, RaOptions, RaStats};
use std::fmt;

/// Why a shader did not compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileError {
    /// It needs what the back end does not do: each feature, as `unsupported: …` names it.
    Unsupported(Vec<String>),
    /// Allocation or emission failed, or the emitted program broke a hardware rule.
    Failed(String),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Unsupported(reasons) => write!(f, "unsupported: {}", reasons.join(", ")),
            CompileError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CompileError {}

impl From<crate::isel::Unsupported> for CompileError {
    fn from(u: crate::isel::Unsupported) -> CompileError {
        CompileError::Unsupported(u.0)
    }
}

/// How many threads a fragment shader runs with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threads {
    /// 2 when the shader can be threaded and compiles so, else 1 (Mesa's choice).
    #[default]
    Auto,
    One,
    /// 2 or an error saying why not.
    Two,
}

impl std::str::FromStr for Threads {
    type Err = String;
    fn from_str(s: &str) -> Result<Threads, String> {
        match s {
            "auto" => Ok(Threads::Auto),
            "1" => Ok(Threads::One),
            "2" => Ok(Threads::Two),
            _ => Err(format!("`{s}`: threads are `auto`, `1` or `2`")),
        }
    }
}

/// A function selected for vc4, with the interface the rest of the back end sees (a vertex
/// shader's outputs are its VPM rows) and where it writes its outputs.
#[derive(Clone, Debug)]
pub struct Selected {
    pub func: Function,
    pub info: ShaderInfo,
    pub output: OutputMode,
}

/// Selection: a vertex shader's outputs in Mesa's VPM layout (`crate::vertex`), a fragment
/// shader's colour read through the clamps its pack makes (`crate::colour_clamp`), then vc4
/// operations for the generic ones (`crate::isel`), then each comparison again at the selects
/// and branches that read it (`crate::compare_at_use`), the temps numbered without gaps
/// after, and before where gaps are many (`Function::compact_temps`). `output` is where a
/// fragment shader writes.
pub fn select(
    func: &Function,
    info: &ShaderInfo,
    output: OutputMode,
) -> Result<Selected, CompileError> {
    let mut func = func.clone();
    // Selection keeps tables per temp: where the middle end left more numbers than twice its
    // instructions (a small function keeps up to 64 more, `Context::compact_temps`), one per
    // value first.
    if func.temps.len() > 2 * func.inst_count() {
        func.compact_temps();
    }
    let (info, output) = match info.stage {
        Stage::Vertex => (
            crate::vertex::lower_vertex_outputs(&mut func, info)?,
            OutputMode::Vpm,
        ),
        Stage::Fragment => (info.clone(), output),
    };
    if output == OutputMode::Tlb {
        crate::colour_clamp::drop_colour_clamps(&mut func, &info);
    }
    crate::isel::select(&mut func)?;
    crate::compare_at_use::compare_at_use(&mut func);
    // One number per value selection left (the rest of the back end keeps tables per temp),
    // in their old order.
    func.compact_temps();
    Ok(Selected { func, info, output })
}

/// The thread modes to try, in order: 2 then 1 (`Auto`, when the shader can be threaded:
/// [`crate::threads::threading`]), 2 alone (`Two`), or 1.
pub fn thread_modes(selected: &Selected, threads: Threads) -> Result<Vec<u32>, CompileError> {
    match (
        threads,
        crate::threads::threading(&selected.func, &selected.info),
    ) {
        (Threads::One, _) | (Threads::Auto, Err(_)) => Ok(vec![1]),
        (Threads::Two, Err(why)) => {
            Err(CompileError::Unsupported(vec![format!("2 threads: {why}")]))
        }
        (Threads::Two, Ok(())) => Ok(vec![2]),
        (Threads::Auto, Ok(())) => Ok(vec![2, 1]),
    }
}

/// The interface pass for `threads` threads (`crate::interface::lower`) on `func`, the
/// function of `selected` (or a copy of it, for a mode tried before another), with the pre-RA
/// scheduler for the order `pre_schedule` names, and the verifier after it when `check` does;
/// with the CFG and liveness of the function it leaves ([`allocate`] takes them).
pub fn lower_interface(
    selected: &Selected,
    mut func: Function,
    threads: u32,
    pre_schedule: Option<kiln_sched::pressure::Order>,
    check: bool,
) -> Result<(Function, Analysed), CompileError> {
    let analysed = crate::interface::lower(
        &mut func,
        &selected.info,
        selected.output,
        threads,
        pre_schedule,
    )?;
    if check {
        kiln_ir::verify(&func).map_err(|e| {
            CompileError::Failed(format!("the interface pass broke the function: {}", e[0]))
        })?;
    }
    Ok((func, analysed))
}

/// The CFG and liveness of a function (kill flags written).
pub type Analysed = (kiln_ir::Cfg, kiln_analysis::Liveness);

/// Register allocation with `allocator`, checked when `check` says so. The QPU has no spill
/// path: the allocator refuses as soon as the register demand exceeds the files
/// (`RaOptions::refuse_spilling`), and graph colouring that cannot colour gives way to the SSA
/// allocator's assignment; where colouring refuses at a lowered budget, the SSA allocator is
/// tried on the same function — it needs no more than the demand, which colouring may not reach.
/// On success `func` is the allocated function, and the result holds the SSA function it is an
/// allocation of (the input, with its critical edges split and in the assignment's form where
/// the allocation needed either: the same program); on failure `func` is that SSA function.
/// `analysed`: the CFG and liveness of `func`, where known.
pub fn allocate(
    func: &mut Function,
    allocator: Allocator,
    check: bool,
    analysed: Option<Analysed>,
) -> Result<(RaStats, Function), CompileError> {
    let options = |allocator: Allocator| RaOptions {
        allocator,
        budget: Vec::new(),
        check,
        refuse_spilling: true,
    };
    let refused = |e: RaError| match e {
        RaError::WouldSpill { .. } => CompileError::Unsupported(vec!["spilling".into()]),
        e => CompileError::Failed(format!("allocation: {e}")),
    };
    let full = RaOptions::default().limits(&*func.target);
    match kiln_regalloc::allocate_analysed(func, &options(allocator), analysed) {
        Err(RaError::WouldSpill { budget, .. })
            if allocator == Allocator::Graph && budget != full =>
        {
            kiln_regalloc::allocate_with_input(func, &options(Allocator::Ssa)).map_err(refused)
        }
        result => result.map_err(refused),
    }
}

/// How [`emit`] finishes the code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finish {
    /// Schedule the emitted code (`crate::schedule`).
    pub schedule: bool,
    /// How hard the scheduler works beyond its list schedules.
    pub effort: crate::schedule::Effort,
    /// Print the code as emitted and as scheduled on standard error (`KILN_DEBUG=print`).
    pub print: bool,
    /// Run both validators on the program.
    pub check: bool,
}

/// Emission (`crate::emit`), scheduling when asked (`crate::schedule`) and, when `finish.check`
/// says so, both validators: kiln's rules and Mesa's `vc4_qpu_validate`.
pub fn emit(
    allocated: &Function,
    info: &ShaderInfo,
    output: OutputMode,
    finish: Finish,
) -> Result<Emitted, CompileError> {
    let failed = |e: crate::emit::EmitError| match e {
        crate::emit::EmitError::Unsupported(m) => CompileError::Unsupported(vec![m]),
        crate::emit::EmitError::Internal(_) => CompileError::Failed(e.to_string()),
    };
    let listing =
        |e: &Emitted| kiln_qpu::isa::disasm_program(&e.words(), kiln_qpu::isa::Style::Mesa);
    let mut emitted = crate::emit::emit(allocated, info, output).map_err(failed)?;
    if finish.print {
        eprintln!("# QPU code as emitted\n{}", listing(&emitted));
    }
    if finish.schedule {
        emitted = crate::schedule::schedule_bounded(&emitted, 0, finish.effort).map_err(failed)?;
        if finish.print {
            eprintln!("# QPU code as scheduled\n{}", listing(&emitted));
        }
    }
    if !finish.check {
        return Ok(emitted);
    }
    let words = emitted.words();
    if let Some(v) = validate(&words).first() {
        return Err(CompileError::Failed(format!(
            "emitted code breaks a rule: {v:?}"
        )));
    }
    if let Err(m) = validate_mesa(&words) {
        return Err(CompileError::Failed(format!(
            "emitted code fails Mesa's validator: {m:?}"
        )));
    }
    Ok(emitted)
}

/// Defines [`Stats`] from one list of fields, with the word shader-db prints after each.
macro_rules! stats {
    ($($(#[$doc:meta])* $field:ident $label:literal,)*) => {
        /// Statistics of one compiled shader: Mesa's shader-db figures first (`vc4_qpu_emit.c`'s
        /// `shaderdb` line), then kiln's.
        #[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        pub struct Stats {
            $($(#[$doc])* pub $field: u32,)*
        }

        impl Stats {
            /// The fields' names, in order (JSON keys, TSV columns).
            pub const NAMES: &[&str] = &[$(stringify!($field),)*];
            /// The word each figure is printed with.
            pub const LABELS: &[&str] = &[$($label,)*];

            /// The fields' values, in [`Stats::NAMES`]' order.
            pub fn values(&self) -> Vec<u32> {
                vec![$(self.$field,)*]
            }
        }
    };
}

stats! {
    /// QPU instructions, including the program end and its two delay slots.
    instructions "inst",
    threads "threads",
    /// Entries of the uniform stream.
    uniforms "uniforms",
    /// Most values live at once (the allocator's maximum demand).
    max_temps "max-temps",
    /// Mesa's estimate (`kiln_qpu::isa::census::estimated_cycles`): one cycle per
    /// instruction, and texture results waited for in their block.
    estimated_cycles "estimated-cycles",
    /// Registers used: highest unit + 1 of the `q` file (r0–r4 = 0–4, ra = 5–36, rb = 37–68).
    registers_used "registers",
    parallel_copies "parallel-copies",
    copied_units "copied-units",
    spills "spills",
    nops "nops",
    branches "branches",
    /// A lower bound on the scheduled code's instructions (`Emitted::bound`; 0 unscheduled).
    bound "bound",
}

impl Stats {
    /// The statistics of an emitted program and its allocation.
    pub fn of(emitted: &Emitted, ra: &RaStats, threads: u32) -> Stats {
        let count = |f: &dyn Fn(&Instr) -> bool| emitted.instrs.iter().filter(|i| f(i)).count();
        let instructions = emitted.instrs.len() as u32;
        Stats {
            instructions,
            threads,
            uniforms: emitted.uniforms.len() as u32,
            max_temps: ra.max_demand.first().copied().unwrap_or(0),
            estimated_cycles: kiln_qpu::isa::census::estimated_cycles(&emitted.instrs) as u32,
            registers_used: ra.registers_used.first().copied().unwrap_or(0),
            parallel_copies: ra.parallel_copies,
            copied_units: ra.copied_units,
            spills: ra.spills,
            nops: count(&|i| i.is_nop()) as u32,
            branches: count(&|i| matches!(i, Instr::Branch(_))) as u32,
            bound: emitted.bound,
        }
    }
}

impl fmt::Display for Stats {
    /// Mesa's shader-db style: `146 inst, 2 threads, …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, (v, label)) in self.values().iter().zip(Stats::LABELS).enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{v} {label}")?;
        }
        Ok(())
    }
}

/// A compiled shader.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The selected, interface-lowered SSA function (what the interpreter compares against),
    /// with its critical edges split and in the assignment's form where the allocation needed
    /// either (`allocate`).
    pub ssa: Function,
    pub allocated: Function,
    pub emitted: Emitted,
    pub words: Vec<u64>,
    pub ra: RaStats,
    pub stats: Stats,
    /// The interface of `ssa` (a vertex shader's outputs are its VPM rows).
    pub info: ShaderInfo,
    /// Where the program writes its outputs.
    pub output: OutputMode,
}

impl Compiled {
    /// Mesa-style disassembly.
    pub fn disasm(&self) -> String {
        kiln_qpu::isa::disasm_program(&self.words, kiln_qpu::isa::Style::Mesa)
    }
}
