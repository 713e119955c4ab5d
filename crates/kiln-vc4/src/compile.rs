//! The vc4 back end as one call: instruction selection, interface lowering, register
//! allocation (checked), emission, and both validators. Statistics in Mesa's shader-db terms
//! (`vc4_qpu_emit.c`'s `shaderdb` line) plus kiln's own.

use crate::emit::{Emitted, OutputMode, emit};
use crate::interface::{ShaderInfo, Stage, prepare};
use crate::isa::{disasm_program, validate, validate_mesa};
use kiln_ir::Function;
use kiln_regalloc::{Allocator, RaOptions, RaStats, allocate};
use serde::Serialize;
use std::fmt;

/// Why a shader did not compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileError {
    /// It needs what the back end does not do; the message starts with `unsupported: `.
    Unsupported(String),
    /// Allocation or emission failed, or the emitted program broke a hardware rule.
    Failed(String),
}

impl CompileError {
    /// The reason without the `unsupported: ` prefix, one feature per line of a summary.
    pub fn reasons(&self) -> Vec<String> {
        match self {
            CompileError::Unsupported(m) => m
                .strip_prefix("unsupported: ")
                .unwrap_or(m)
                .split(", ")
                .map(str::to_string)
                .collect(),
            CompileError::Failed(m) => vec![m.clone()],
        }
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Unsupported(m) | CompileError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CompileError {}

/// How to compile.
#[derive(Clone, Copy, Debug)]
pub struct CompileOptions {
    pub allocator: Allocator,
    pub output: OutputMode,
    /// Run the allocation checker.
    pub check: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            allocator: Allocator::Graph,
            output: OutputMode::Tlb,
            check: true,
        }
    }
}

/// Statistics of one compiled shader: Mesa's shader-db figures first, then kiln's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// QPU instructions, including the program end and its two delay slots.
    pub instructions: u32,
    pub threads: u32,
    /// Entries of the uniform stream.
    pub uniforms: u32,
    /// Most values live at once (the allocator's maximum demand).
    pub max_temps: u32,
    /// One cycle per instruction plus the SFU and branch delays already in the code as `nop`s
    /// (no scheduler yet, so this is the instruction count).
    pub estimated_cycles: u32,
    /// Registers used: highest unit + 1 of the `q` file (r0–r4 = 0–4, ra = 5–36, rb = 37–68).
    pub registers_used: u32,
    pub parallel_copies: u32,
    pub copied_units: u32,
    pub spills: u32,
    pub nops: u32,
    pub branches: u32,
}

/// A compiled shader.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The selected, interface-lowered SSA function (what the interpreter compares against).
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
        disasm_program(&self.words, crate::isa::Style::Mesa)
    }
}

/// Compiles a generic SSA function (front end + middle end) for vc4.
pub fn compile(
    func: &Function,
    info: &ShaderInfo,
    opts: &CompileOptions,
) -> Result<Compiled, CompileError> {
    let mut f = func.clone();
    let mut info = info.clone();
    let mut output = opts.output;
    if info.stage == Stage::Vertex {
        // Mesa's VPM layout, in IR; the program writes it to the VPM.
        info = crate::vertex::lower_vertex_outputs(&mut f, &info)
            .map_err(|e| CompileError::Unsupported(e.to_string()))?;
        output = OutputMode::Vpm;
    }
    let info = &info;
    let hidden =
        crate::texture::hide(&mut f).map_err(|e| CompileError::Unsupported(e.to_string()))?;
    crate::isel::select(&mut f).map_err(|e| CompileError::Unsupported(e.to_string()))?;
    crate::texture::reveal(&mut f, &hidden).map_err(|e| CompileError::Failed(e.to_string()))?;
    prepare(&mut f, info).map_err(|e| CompileError::Unsupported(e.to_string()))?;
    let ssa = f.clone();
    let ra = allocate(
        &mut f,
        &RaOptions {
            allocator: opts.allocator,
            budget: Vec::new(),
            check: opts.check,
        },
    )
    .map_err(|e| CompileError::Failed(format!("allocation: {e}")))?;
    if ra.spills > 0 {
        return Err(CompileError::Unsupported("unsupported: spilling".into()));
    }
    let emitted = emit(&f, info, output).map_err(|e| match e {
        crate::emit::EmitError::Unsupported(_) => CompileError::Unsupported(e.to_string()),
        crate::emit::EmitError::Internal(_) => CompileError::Failed(e.to_string()),
    })?;
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
    let nops = emitted
        .instrs
        .iter()
        .filter(|i| **i == crate::isa::Instr::nop())
        .count() as u32;
    let branches = emitted
        .instrs
        .iter()
        .filter(|i| matches!(i, crate::isa::Instr::Branch(_)))
        .count() as u32;
    let stats = Stats {
        instructions: words.len() as u32,
        threads: 1,
        uniforms: emitted.uniforms.len() as u32,
        max_temps: ra.max_demand.first().copied().unwrap_or(0),
        estimated_cycles: words.len() as u32,
        registers_used: ra.registers_used.first().copied().unwrap_or(0),
        parallel_copies: ra.parallel_copies,
        copied_units: ra.copied_units,
        spills: ra.spills,
        nops,
        branches,
    };
    Ok(Compiled {
        ssa,
        allocated: f,
        emitted,
        words,
        ra,
        stats,
        info: info.clone(),
        output,
    })
}
