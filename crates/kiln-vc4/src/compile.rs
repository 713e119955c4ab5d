//! The vc4 back end as one call: instruction selection, interface lowering, register
//! allocation (checked), emission, and both validators. Statistics in Mesa's shader-db terms
//! (`vc4_qpu_emit.c`'s `shaderdb` line) plus kiln's own.
//!
//! Threads, as Mesa's `vc4_get_compiled_shader` / `vc4_shader_ntq` (`vc4_program.c`) choose
//! them: a fragment shader is compiled for 2 threads first (the lower half of files A and B, a
//! thread switch at each texture lookup) and, when that fails — allocation needs more
//! registers or would spill, or anything later fails — for 1 thread. A shader with no lookup
//! is not tried threaded: Mesa gives such shaders up right after translation (its shader-db
//! reports them as 1 thread), and so does [`threading`]. Mesa gives up as well when its last
//! lookup is inside control flow (the last switch, `lthrsw`, must run exactly once); kiln then
//! ends the program with a switch of its own (`crate::emit`).
//!
//! The QPU has no spill path: an allocation that spills is refused. Where the graph allocator's
//! colouring spills, the SSA allocator is tried on the same function first — it spills only
//! where the register demand exceeds the file, which colouring may not reach.

use crate::emit::{Emitted, OutputMode, emit};
use crate::interface::{ShaderInfo, Stage, prepare_threads};
use kiln_ir::Function;
use kiln_qpu::isa::{disasm_program, validate, validate_mesa};
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

/// How to compile.
#[derive(Clone, Copy, Debug)]
pub struct CompileOptions {
    pub allocator: Allocator,
    pub output: OutputMode,
    /// Run the allocation checker.
    pub check: bool,
    pub threads: Threads,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            allocator: Allocator::Graph,
            output: OutputMode::Tlb,
            check: true,
            threads: Threads::Auto,
        }
    }
}

/// Whether a selected function (`info` its interface) can run as a threaded fragment shader,
/// or why not: it must be a fragment shader with a texture lookup (each request is a thread
/// switch; Mesa's threaded attempt of a shader without one gives up, `no-tmu-access` in
/// `mesa-vc4/README.md`).
pub fn threading(func: &Function, info: &ShaderInfo) -> Result<(), String> {
    if info.stage != Stage::Fragment {
        return Err("only fragment shaders run threaded".into());
    }
    if func
        .blocks
        .iter()
        .any(|b| b.insts.iter().any(crate::texture::is_lookup))
    {
        Ok(())
    } else {
        Err("the shader has no texture lookup to switch threads at".into())
    }
}

/// The blocks the emitted program runs exactly once (where the last lookup's switch can be the
/// last switch, Mesa's `last_thrsw_at_top_level`): those outside every if, in no loop that
/// may run them again or skip them. A loop none of whose reachable blocks has a `continue` of
/// it runs once (the front end wraps a body with early returns in such a loop); then only a
/// reachable `break` of it before a block may skip that block. Reachability follows the
/// linear CFG the emitter lays out, and only the taken side of a uniform `if` on a constant.
pub fn runs_once(func: &Function, cfg: &kiln_ir::Cfg) -> Vec<bool> {
    use kiln_ir::{Block, Opcode, Value};
    let n = func.blocks.len();
    let term = |b: usize| func.blocks[b].insts.last();
    let mut reach = vec![false; n];
    let mut stack = vec![0];
    reach[0] = true;
    while let Some(b) = stack.pop() {
        let taken: Vec<Block> = match term(b) {
            Some(i) if i.op == Opcode::If && !i.flags.divergent => match i.operands[0].value {
                Value::Const(c) => vec![i.targets[if c != 0 { 0 } else { 1 }]],
                _ => cfg.linear.succs[b].to_vec(),
            },
            _ => cfg.linear.succs[b].to_vec(),
        };
        for s in taken {
            if !reach[s.index()] {
                reach[s.index()] = true;
                stack.push(s.index());
            }
        }
    }
    let mut once = reach.clone();
    for i in &cfg.ifs {
        once[i.then_start.index()..i.endif.index()].fill(false);
    }
    for (l, lp) in cfg.loops.iter().enumerate() {
        let body = lp.header.index()..lp.exit.index();
        let ends = |op: Opcode| {
            body.clone().find(|&b| {
                reach[b] && cfg.loop_of[b] == Some(l) && term(b).is_some_and(|i| i.op == op)
            })
        };
        if ends(Opcode::Continue).is_some() {
            once[body].fill(false);
        } else if let Some(k) = ends(Opcode::Break) {
            once[k + 1..lp.exit.index()].fill(false);
        }
    }
    once
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
        disasm_program(&self.words, kiln_qpu::isa::Style::Mesa)
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
    crate::isel::select(&mut f).map_err(|e| CompileError::Unsupported(e.to_string()))?;
    let threadable = threading(&f, info);
    let threads = match (opts.threads, &threadable) {
        (Threads::One, _) | (Threads::Auto, Err(_)) => 1,
        (Threads::Two, Err(why)) => {
            return Err(CompileError::Unsupported(format!(
                "unsupported: 2 threads: {why}"
            )));
        }
        (_, Ok(())) => 2,
    };
    if threads == 2 {
        let mut g = f.clone();
        // What the interface pass refuses it refuses for 1 thread too.
        prepare_threads(&mut g, info, 2).map_err(|e| CompileError::Unsupported(e.to_string()))?;
        match finish(g, info, output, opts, 2) {
            Err(_) if opts.threads == Threads::Auto => {}
            r => return r,
        }
    }
    prepare_threads(&mut f, info, 1).map_err(|e| CompileError::Unsupported(e.to_string()))?;
    finish(f, info, output, opts, 1)
}

/// Allocation, emission and validation of an interface-lowered function for `threads` threads.
fn finish(
    mut f: Function,
    info: &ShaderInfo,
    output: OutputMode,
    opts: &CompileOptions,
    threads: u32,
) -> Result<Compiled, CompileError> {
    let ssa = f.clone();
    let run = |f: &mut Function, allocator: Allocator| {
        allocate(
            f,
            &RaOptions {
                allocator,
                budget: Vec::new(),
                check: opts.check,
            },
        )
        .map_err(|e| CompileError::Failed(format!("allocation: {e}")))
    };
    let mut ra = run(&mut f, opts.allocator)?;
    if ra.spills > 0 && opts.allocator == Allocator::Graph {
        // The QPU has no spilling; where colouring spills, the SSA allocator may still fit
        // (it spills only where the register demand exceeds the file).
        let mut g = ssa.clone();
        let r = run(&mut g, Allocator::Ssa)?;
        if r.spills == 0 {
            (f, ra) = (g, r);
        }
    }
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
        .filter(|i| **i == kiln_qpu::isa::Instr::nop())
        .count() as u32;
    let branches = emitted
        .instrs
        .iter()
        .filter(|i| matches!(i, kiln_qpu::isa::Instr::Branch(_)))
        .count() as u32;
    let stats = Stats {
        instructions: words.len() as u32,
        threads,
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
