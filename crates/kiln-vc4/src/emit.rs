//! The QPU emitter: an allocated vc4 shader (after instruction selection, the interface pass and
//! register allocation) to QPU instructions, a uniform table and the varying order, after Mesa's
//! `vc4_qpu_emit.c` and `vc4_program.c`. The design is in `docs/vc4.md` ("The emitter").

use crate::interface::{InputKind, OutputKind, ShaderInfo};
use crate::ops::{Axis, Hw, Op};
use crate::target::{EXEC_REG, QpuReg};
use crate::texture::Layout;
use crate::uniforms::Uniform;
use kiln_ir::{Block, Cfg, Function, Inst, Opcode, Operand, Value};
use kiln_qpu::isa::builder::{self, Reg};
use kiln_qpu::isa::effects;
use kiln_qpu::isa::{
    AddOp, AluInstr, BranchCond, Cond, Instr, MulOp, Signal, Unpack, raddr, small_imm_code, waddr,
};
use std::fmt;

/// Why emission failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EmitError {
    /// The function uses what the emitter does not do (`unsupported: …`).
    Unsupported(String),
    /// The input broke an assumption of the emitter (a bug before or in it).
    Internal(String),
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmitError::Unsupported(m) => write!(f, "unsupported: {m}"),
            EmitError::Internal(m) => write!(f, "internal emitter error: {m}"),
        }
    }
}

impl std::error::Error for EmitError {}

fn internal(m: impl Into<String>) -> EmitError {
    EmitError::Internal(m.into())
}

impl From<builder::BuildError> for EmitError {
    fn from(e: builder::BuildError) -> EmitError {
        EmitError::Internal(format!("builder: {e}"))
    }
}

/// Where the outputs go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMode {
    /// Colour to the tile buffer, RGBA8 packed (byte 0 = r … byte 3 = a), after a scoreboard
    /// wait, as Mesa's `emit_frag_end` does for an RGBA8 target without blending.
    Tlb,
    /// Debug path: each output value, raw 32 bits, to one VPM row (generic 32-bit horizontal
    /// writes from row 0), in the order of [`Emitted::output_rows`].
    Vpm,
}

/// What made an emitted instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Instruction `k` of a block of the allocated function.
    Inst(Block, u32),
    /// A block's entry: the uniform-stream reset, the wake of waiting lanes, the branch over a
    /// side no lane runs.
    BlockStart(Block),
    /// The program's start: W for the varyings, the execute mask.
    Prologue,
    /// The program's end: the last thread switch, the tile-buffer write, the thread end.
    End,
}

/// An emitted program.
#[derive(Clone, Debug)]
pub struct Emitted {
    pub instrs: Vec<Instr>,
    /// What made each instruction: its add-unit operation (or the whole instruction) and its
    /// mul-unit operation.
    pub origins: Vec<[Origin; 2]>,
    /// The uniform stream's table, one entry per read in program order.
    pub uniforms: Vec<Uniform>,
    /// Input slots read from a FIFO, in order: varyings (fragment shaders) or VPM rows
    /// (vertex attributes, row k = `varyings[k]`).
    pub varyings: Vec<u32>,
    /// Output slots in the order they were written ([`OutputMode::Vpm`]: VPM row k holds
    /// `output_rows[k]`).
    pub output_rows: Vec<u32>,
    /// Scheduled code: a lower bound on its length (`crate::schedule`); 0 when unscheduled.
    pub bound: u32,
}

impl Emitted {
    pub fn words(&self) -> Vec<u64> {
        self.instrs.iter().map(Instr::encode).collect()
    }

    /// Operations (`kiln_qpu::isa::census`) per origin: per IR opcode of `allocated` (the
    /// function this program was emitted from; a comparison folded into the select after it
    /// counts as the select's), and `block start`, `prologue`, `end`.
    pub fn operations_by_origin(&self, allocated: &Function) -> Vec<(String, u64)> {
        let mut by: std::collections::BTreeMap<String, u64> = Default::default();
        let name = |o: Origin| match o {
            Origin::Inst(b, k) => allocated
                .blocks
                .get(b.index())
                .and_then(|blk| blk.insts.get(k as usize))
                .map_or("?".to_string(), |inst| inst.op.name().to_string()),
            Origin::BlockStart(_) => "block start".into(),
            Origin::Prologue => "prologue".into(),
            Origin::End => "end".into(),
        };
        for (i, o) in self.instrs.iter().zip(&self.origins) {
            let ops = kiln_qpu::isa::census::Census::of(&[i.encode()]).operations;
            // A pair: one operation of each origin.
            let paired =
                matches!(i, Instr::Alu(a) if a.op_add != AddOp::Nop && a.op_mul != MulOp::Nop);
            if paired {
                *by.entry(name(o[0])).or_default() += 1;
                *by.entry(name(o[1])).or_default() += 1;
            } else {
                *by.entry(name(o[0])).or_default() += ops;
            }
        }
        by.into_iter().collect()
    }
}

/// An operand as the emitter sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    Acc(u8),
    A(u8),
    B(u8),
    /// A small-immediate code.
    Imm(u8),
    /// A 32-bit constant no small immediate encodes.
    Big(u32),
    /// The next word of the uniform stream: an IR uniform read folded into its use, or a
    /// 32-bit constant (Mesa's `qir_uniform_f`).
    Stream(Uniform),
}

/// The operands of one instruction (inline: an instruction reads a few).
type Placed<T> = smallvec::SmallVec<[T; 4]>;

/// `srcs` with one 32-bit constant read from the uniform stream instead of `load_imm`: when no
/// other operand reads the stream and the registers leave a read port free for it.
fn stream_constant(srcs: &[Src]) -> Placed<Src> {
    let mut out = Placed::from_slice(srcs);
    let stream = srcs.iter().any(|s| matches!(s, Src::Stream(_)));
    let port_a = srcs.iter().any(|s| matches!(s, Src::A(_)));
    let port_b = srcs.iter().any(|s| matches!(s, Src::B(_) | Src::Imm(_)));
    if let Some(&Src::Big(c)) = srcs.iter().find(|s| matches!(s, Src::Big(_)))
        && !stream
        && !(port_a && port_b)
    {
        for s in out.iter_mut().filter(|s| **s == Src::Big(c)) {
            *s = Src::Stream(Uniform::Constant(c));
        }
    }
    out
}

/// Per block, the value ra13 holds in the lanes waiting for it, and whether the values are
/// ordered (see below).
///
/// Where at most [`ORDERED_WAITS`] blocks are waited for — the else sides and endifs of
/// divergent ifs, the exits and headers of divergent loops — they are numbered 1, 2, … in the
/// order their lanes wake: a block where it starts, a loop header at its latch (after the
/// loop's body, before its exit), and a discarded lane holds [`ORDERED_DISCARDED`], after
/// them all. A lane waits for a block that wakes later than where it began to wait (a
/// header's `continue` comes before the latch), so where block `k` wakes its lanes no lane
/// waits for one numbered below `k`: the lanes that run from there are those with ra13 ≤ k —
/// one comparison (`sub.sf nop, ra13, k + 1`, N set) both wakes them and says which run
/// ([`Flags::Running`]), with no test of ra13 right after its write.
///
/// Elsewhere a small immediate (1–15, then −16…−2; −1 is a discarded lane's) for the first 29
/// blocks lanes wait for, in layout order, so that waking them compares with an immediate
/// instead of a `load_imm`; 16 + the block's index for the others. Lanes are then woken by
/// equality and tested for zero only, so any distinct non-zero values do.
fn wait_ids(cfg: &Cfg, wakes: &[bool]) -> (Vec<u32>, bool) {
    let mut waited = wakes.to_vec();
    // Where each block wakes its lanes, in layout order: a loop header just before its exit.
    let mut wakes_at: Vec<(usize, usize, usize)> = Vec::new();
    for l in cfg
        .loops
        .iter()
        .filter(|l| l.divergent || l.divergent_continue)
    {
        waited[l.header.index()] = true;
        wakes_at.push((l.exit.index(), 0, l.header.index()));
    }
    for (b, _) in wakes.iter().enumerate().filter(|(_, w)| **w) {
        if !wakes_at.iter().any(|&(_, _, h)| h == b) {
            wakes_at.push((b, 1, b));
        }
    }
    if wakes_at.len() <= ORDERED_WAITS {
        wakes_at.sort_unstable();
        let mut ids = vec![0; waited.len()];
        for (k, &(_, _, b)) in wakes_at.iter().enumerate() {
            ids[b] = k as u32 + 1;
        }
        return (ids, true);
    }
    let mut small = (1..=15u32).chain((-16i32..=-2).map(|v| v as u32));
    let ids = waited
        .iter()
        .enumerate()
        .map(|(b, &w)| w.then(|| small.next()).flatten().unwrap_or(16 + b as u32))
        .collect();
    (ids, false)
}

/// The most blocks ordered wait ids number (see [`wait_ids`]): each and the one after it are
/// small immediates, and so is the discarded lanes' value after them.
const ORDERED_WAITS: usize = 14;
/// What the execute mask holds in a discarded lane when the wait ids are ordered.
const ORDERED_DISCARDED: u32 = ORDERED_WAITS as u32 + 1;

/// The flags condition under which a `sel` takes its first value: the folded comparison's, or
/// Z clear after `mov.sf c` (c is true).
fn sel_true_cond(compare: Option<&Inst>) -> Result<Cond, EmitError> {
    match compare {
        Some(cmp) => Ok(compare_encoding(cmp.op)
            .ok_or_else(|| internal("a folded comparison is no comparison"))?
            .2),
        None => Ok(Cond::Zc),
    }
}

/// Whether `i` writes r5: a write to its address or a varying read (which loads the varying's
/// C coefficient there).
fn writes_r5(i: &Instr) -> bool {
    effects::writes_addr(i, waddr::R5) || effects::reads_io(i, raddr::VARYING)
}

fn src_of_const(c: u32) -> Src {
    small_imm_code(c).map_or(Src::Big(c), Src::Imm)
}

fn reg_of(unit: u32) -> Result<Src, EmitError> {
    match QpuReg::from_unit(unit) {
        Some(QpuReg::Acc(4)) => Err(internal("a value allocated to r4")),
        Some(QpuReg::Acc(n)) => Ok(Src::Acc(n)),
        Some(QpuReg::A(n)) => Ok(Src::A(n)),
        Some(QpuReg::B(n)) => Ok(Src::B(n)),
        None => Err(internal(format!("unit {unit} is no QPU register"))),
    }
}

fn dst_reg(unit: u32) -> Result<Reg, EmitError> {
    Ok(match reg_of(unit)? {
        Src::Acc(n) => Reg::Acc(n),
        Src::A(n) => Reg::A(n),
        Src::B(n) => Reg::B(n),
        _ => unreachable!("reg_of gives registers"),
    })
}

const SCRATCH_A: u8 = 14;
const SCRATCH_B: u8 = 14;
const EXEC: Reg = Reg::A(EXEC_REG);
/// What the execute mask holds in a discarded lane: no block has this index.
const DISCARDED: u32 = 0xffff_ffff;
/// `gl_FragCoord.z` = the 24-bit payload depth × this (1 / 0xffffff as an f32).
pub const FRAG_Z_SCALE: u32 = 0x3380_0001;
/// Small-immediate codes.
const IMM_0: u8 = 0;
const IMM_MINUS_1: u8 = 31;
const IMM_HALF: u8 = 47;

/// What the flags hold.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Flags {
    Unknown,
    /// Z set exactly in the lanes that run (`ra13 == 0`), N and C clear (`mov.sf nop, ra13`:
    /// ra13 holds 0 or a small wait id).
    Exec,
    /// Set in every lane by this comparison of these values.
    Compared(Opcode, Same, Same),
    /// In the lanes that run, this comparison of these values; in the others what an
    /// execute-mask test leaves — Z, N and C clear, or C set when the flag is `true`
    /// ([`Emitter::masked_sel`]).
    MaskedCompared(Opcode, Same, Same, bool),
    /// The lanes that run are those where this condition holds, and ra13 is 0 in exactly
    /// those: after a divergent `if` in a block every lane ran, the flags its condition was
    /// tested on (masked writes take the condition; what needs Z takes [`Flags::Exec`]).
    /// With `true`, Z, N and C are clear in the lanes that do not run, as the execute flags
    /// leave them.
    Running(Cond, bool),
}

/// A comparison operand, as far as two comparisons of one value are the same: a constant, a
/// temp, or a uniform word (every read of a slot gives the same value).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Same {
    Const(u32),
    Temp(kiln_ir::Temp),
    Uniform(u32),
    Undef,
}

struct Emitter<'a> {
    func: &'a Function,
    info: &'a ShaderInfo,
    cfg: Cfg,
    linear: Vec<bool>,
    /// Blocks inside divergent control flow (writes there are masked).
    masked: Vec<bool>,
    /// Per block, the `q` units live at its end ([`register_live_out`]).
    live_out: Vec<u128>,
    /// Blocks whose start wakes the lanes waiting for them.
    wakes: Vec<bool>,
    /// Per block, the value ra13 holds in the lanes waiting for it, and whether those are
    /// ordered by when the lanes wake (see `wait_ids`).
    wait_ids: Vec<u32>,
    ordered_waits: bool,
    /// Blocks entered only by falling through from the previous block, which goes nowhere
    /// else: the uniform stream needs no reset there.
    falls_through: Vec<bool>,
    /// Blocks entered only by falling through from the previous block, which may also branch
    /// elsewhere: the flags are as that block left them, and the stream's position is known
    /// if it was there ([`Emitter::skip_stream_address`]).
    entered_by_falling: Vec<bool>,
    /// The uniform stream is at the next entry of the table (no reset needed before a read).
    stream_known: bool,
    /// No uniform may be read before this instruction index (a uniforms-address write).
    uniform_fence: usize,
    /// A uniform read folded into the next operation: its temp and slot.
    folded: Option<(kiln_ir::Temp, u32)>,
    /// The 32-bit constant r5 holds since its last load, in straight-line code with no thread
    /// switch between: a second operand of that value reads it without another `load_imm`.
    r5_const: Option<u32>,
    /// A comparison whose only use is the next `sel`'s condition: the `sel` sets the flags.
    pending_compare: Option<&'a Inst>,
    /// An ALU operation whose only use is a value of the `sel` after it (with only that
    /// select's comparison between): the `sel` makes it write its destination conditionally.
    deferred: Option<&'a Inst>,
    /// The lookup or SFU operation being emitted leaves its result in r4 for the operation
    /// that reads it.
    channel_in_place: bool,
    /// Results left in r4 for the later operations of the block that read them: a texel
    /// channel with the r4 unpack of its byte (Mesa's `r4.8a` operands, `vc4_qpu_emit.c`), an
    /// SFU result as it is (`Unpack::None`, Mesa's `fmul r0, r4, …`), and the reads left.
    in_r4: Vec<(kiln_ir::Temp, Unpack, u32)>,
    /// The unpack of the r4 result the operation being emitted reads.
    unpack_now: Option<Unpack>,
    /// Operations left to the output that reads them, which writes their result to the VPM
    /// or packs it into its byte of the colour itself (Mesa's `fadd vpm, …`, `fmul r3.8a, …`).
    written_by_output: Vec<&'a Inst>,
    /// Per temp, whether a lookup defines it.
    lookup_defined: Vec<bool>,
    /// Per temp, whether an operation that leaves its result in r4 (a lookup, an SFU
    /// operation) defines it.
    r4_defined: Vec<bool>,
    /// Per temp, whether an output reads it (so that only those operations look ahead for
    /// their output: [`Emitter::written_by_output`]).
    output_read: Vec<bool>,
    /// Uses of each temp.
    uses: Vec<u32>,
    /// The uniform slot each temp a `uniform` instruction defines reads.
    uniform_slot: Vec<Option<u32>>,
    /// Uniform reads left to their one reader, a select's or a copy's move later in the
    /// block, which reads the stream itself (Mesa's `QFILE_UNIF` move sources).
    read_at_use: Vec<bool>,
    exec: bool,
    out: Vec<Instr>,
    /// What made each instruction of `out`, and what makes the next ones.
    origins: Vec<[Origin; 2]>,
    origin: Origin,
    labels: Vec<Option<usize>>,
    branches: Vec<(usize, Block)>,
    flags: Flags,
    uniforms: Vec<Uniform>,
    varyings: Vec<u32>,
    outputs: Vec<(u32, Operand)>,
    /// Where W is for the varying reads of the prologue: ra15, where the payload leaves it, or
    /// rb14 when an input is written to ra15 before the last read of W.
    w: Option<Reg>,
    /// Where outputs go.
    mode: OutputMode,
    /// ra14 holds the colour being packed (no fix-up may use it).
    packing: bool,
    /// Every colour component the shader writes is a constant: the packed word, written whole
    /// at the end (Mesa packs a constant colour at compile time, `vc4_nir_lower_blend`).
    constant_colour: Option<u32>,
    /// The VPM write setup is done.
    vpm_setup: bool,
    /// The function discards lanes (seen a `discard`).
    discards: bool,
    /// The lookup whose texel r4 holds, valid until the next instruction other than a lookup
    /// or a copy ([`crate::texture::requests`]).
    tex_in_r4: Option<Inst>,
    /// The function is a threaded fragment shader: lookups switch threads.
    threaded: bool,
    /// The next lookup of the block whose TMU request the lookup being emitted sends after
    /// its own, before its load ([`Emitter::prefetch`]).
    prefetch: Option<&'a Inst>,
    /// The lookup whose request was sent before the previous load.
    sent: Option<&'a Inst>,
    /// The last thread switch so far: its instruction and block.
    last_thrsw: Option<(usize, Block)>,
    /// VPM attribute reads: done so far, and in all.
    attributes: u32,
    attribute_count: u32,
}

/// Emits an allocated, interface-lowered vc4 fragment shader.
pub fn emit(func: &Function, info: &ShaderInfo, mode: OutputMode) -> Result<Emitted, EmitError> {
    if !func.allocated || func.target.name() != "vc4" {
        return Err(internal("the function is not an allocated vc4 function"));
    }
    let cfg = Cfg::compute(func).map_err(|e| internal(e.message))?;
    let n = func.blocks.len();
    let masked = crate::interface::masked_blocks(func, &cfg);
    let live_out = register_live_out(func, &cfg);
    let mut wakes = vec![false; n];
    for i in cfg.ifs.iter().filter(|i| i.divergent) {
        if i.else_start < i.endif {
            wakes[i.else_start.index()] = true;
        }
        wakes[i.endif.index()] = true;
    }
    for l in cfg.loops.iter().filter(|l| l.divergent) {
        wakes[l.exit.index()] = true;
    }
    let (wait_ids, ordered_waits) = wait_ids(&cfg, &wakes);
    let mut entered_by_falling: Vec<bool> = (0..n)
        .map(|b| {
            b > 0
                && [&cfg.logical, &cfg.linear]
                    .iter()
                    .all(|edges| edges.preds[b].iter().all(|p| p.index() == b - 1))
        })
        .collect();
    // The branches over a divergent if's sides that no lane runs.
    for i in cfg.ifs.iter().filter(|i| i.divergent) {
        entered_by_falling[i.else_start.index()] = false;
        entered_by_falling[i.endif.index()] = false;
    }
    // A uniform if in a masked block also branches to its then side when some lane runs.
    for b in func.block_ids() {
        if let Some(t) = func.block(b).insts.last()
            && t.op == Opcode::If
            && !t.flags.divergent
            && masked[b.index()]
        {
            entered_by_falling[t.targets[0].index()] = false;
        }
    }
    let falls_through: Vec<bool> = (0..n)
        .map(|b| {
            entered_by_falling[b]
                && [&cfg.logical, &cfg.linear]
                    .iter()
                    .all(|edges| edges.succs[b - 1].iter().all(|s| s.index() == b))
        })
        .collect();
    let exec = crate::interface::needs_exec(func, &cfg);
    let target_exec = func.target.param("exec") == Some(1);
    if exec && !target_exec {
        return Err(internal(
            "divergent control flow on a target without the execute-mask register (run the interface pass)",
        ));
    }
    let mut e = Emitter {
        func,
        info,
        linear: func.linear_temps(),
        cfg,
        live_out,
        masked,
        wakes,
        wait_ids,
        ordered_waits,
        falls_through,
        entered_by_falling,
        stream_known: true,
        uniform_fence: 0,
        folded: None,
        r5_const: None,
        pending_compare: None,
        deferred: None,
        uses: crate::interface::use_counts(func),
        read_at_use: vec![false; func.temps.len()],
        channel_in_place: false,
        lookup_defined: {
            let mut l = vec![false; func.temps.len()];
            for i in func.blocks.iter().flat_map(|b| &b.insts) {
                if crate::texture::is_lookup(i) {
                    for d in &i.defs {
                        l[d.temp.index()] = true;
                    }
                }
            }
            l
        },
        r4_defined: {
            let mut l = vec![false; func.temps.len()];
            for i in func.blocks.iter().flat_map(|b| &b.insts) {
                if crate::narrow::writes_r4(i) {
                    for d in &i.defs {
                        l[d.temp.index()] = true;
                    }
                }
            }
            l
        },
        output_read: {
            let mut r = vec![false; func.temps.len()];
            for i in func.blocks.iter().flat_map(|b| &b.insts) {
                if i.op == Opcode::Output {
                    for t in i.used_temps() {
                        r[t.index()] = true;
                    }
                }
            }
            r
        },
        in_r4: Vec::new(),
        unpack_now: None,
        written_by_output: Vec::new(),
        uniform_slot: {
            let mut slots = vec![None; func.temps.len()];
            for i in func.blocks.iter().flat_map(|b| &b.insts) {
                if i.op == Opcode::Uniform {
                    slots[i.defs[0].temp.index()] = Some(i.imms[0]);
                }
            }
            slots
        },
        exec,
        // Room for two instructions per IR instruction before the first growth.
        out: Vec::with_capacity(func.blocks.iter().map(|b| 2 * b.insts.len()).sum()),
        origins: Vec::with_capacity(func.blocks.iter().map(|b| 2 * b.insts.len()).sum()),
        origin: Origin::Prologue,
        labels: vec![None; n],
        branches: Vec::new(),
        flags: Flags::Unknown,
        uniforms: Vec::new(),
        varyings: Vec::new(),
        outputs: Vec::new(),
        w: None,
        mode,
        tex_in_r4: None,
        prefetch: None,
        sent: None,
        threaded: func.target.param("threads") == Some(2),
        last_thrsw: None,
        discards: false,
        packing: false,
        constant_colour: (mode == OutputMode::Tlb)
            .then(|| constant_colour(func, info))
            .flatten(),
        vpm_setup: false,
        attributes: 0,
        attribute_count: func.blocks[0]
            .insts
            .iter()
            .filter(|i| {
                i.op == Opcode::Input
                    && matches!(
                        info.inputs.get(&i.imms[0]),
                        Some(InputKind::Attribute | InputKind::IndexAttribute { .. })
                    )
            })
            .count() as u32,
    };
    e.run(mode)?;
    let output_rows = e.outputs.iter().map(|(s, _)| *s).collect();
    Ok(Emitted {
        instrs: e.out,
        origins: e.origins,
        uniforms: e.uniforms,
        varyings: e.varyings,
        output_rows,
        bound: 0,
    })
}

impl<'a> Emitter<'a> {
    // ---- instruction stream -------------------------------------------------------------

    /// Appends `i`, with a `nop` first when it reads a file register the previous instruction
    /// wrote.
    fn push(&mut self, i: Instr) {
        if effects::takes_uniform(&i) {
            while self.out.len() < self.uniform_fence {
                self.append(Instr::nop());
            }
        }
        if let Some(prev) = self.out.last() {
            let (ra, rb) = effects::regfile_reads(&i);
            let read = |w: &effects::Write| {
                w.waddr < 32 && Some(w.waddr) == if w.file_a { ra } else { rb }
            };
            if effects::writes(prev).iter().any(read) {
                self.append(Instr::nop());
            }
        }
        if let Instr::Alu(a) = &i
            && a.w.sf
        {
            self.flags = Flags::Unknown;
        }
        if let Instr::LoadImm(l) = &i
            && l.w.sf
        {
            self.flags = Flags::Unknown;
        }
        self.append(i);
    }

    /// Appends `i` as it is, made by the current origin.
    fn append(&mut self, i: Instr) {
        let switches = matches!(
            i.signal(),
            Some(Signal::ThreadSwitch | Signal::LastThreadSwitch)
        );
        if switches || matches!(i, Instr::Branch(_)) || writes_r5(&i) {
            self.r5_const = None;
        }
        self.out.push(i);
        self.origins.push([self.origin; 2]);
    }

    fn push_alu(&mut self, a: AluInstr) {
        self.push(Instr::Alu(a));
    }

    fn nop(&mut self) {
        self.append(Instr::nop());
    }

    fn branch(&mut self, cond: BranchCond, target: Block) {
        self.branches.push((self.out.len(), target));
        self.append(builder::branch(cond, true, 0));
        for _ in 0..3 {
            self.append(Instr::nop());
        }
    }

    // ---- operands -----------------------------------------------------------------------

    fn src(&self, op: &Operand) -> Result<Src, EmitError> {
        match op.value {
            Value::Const(c) => Ok(src_of_const(c)),
            Value::Undef(_) => Ok(Src::Imm(IMM_0)),
            Value::Temp(t) if self.folded.is_some_and(|(f, _)| f == t) => Ok(Src::Stream(
                Uniform::of_slot(self.folded.expect("folded").1),
            )),
            Value::Temp(t) if self.in_r4.iter().any(|&(c, ..)| c == t) => Ok(Src::Acc(4)),
            Value::Temp(t) if self.read_at_use[t.index()] => Ok(Src::Stream(Uniform::of_slot(
                self.uniform_slot[t.index()]
                    .ok_or_else(|| internal("a uniform read at its use that is none"))?,
            ))),
            Value::Temp(t) => {
                let r = op
                    .reg
                    .ok_or_else(|| internal(format!("operand {t} has no register")))?;
                reg_of(r.unit())
            }
        }
    }

    fn def_reg(&self, inst: &Inst, k: usize) -> Result<Reg, EmitError> {
        let d = inst
            .defs
            .get(k)
            .ok_or_else(|| internal(format!("`{}` lacks definition {k}", inst.op)))?;
        let r = d
            .reg
            .ok_or_else(|| internal(format!("definition {} has no register", d.temp)))?;
        dst_reg(r.unit())
    }

    /// [`Emitter::place`] for the operands of an ALU or SFU operation, which may read the
    /// uniform stream: a 32-bit constant is read from the stream where a port is free (Mesa's
    /// `qir_uniform_f`: no instruction, one stream word) instead of loaded into r5 — where the
    /// stream's position is known (else the read would cost a reset).
    fn place_operation(&mut self, srcs: &[Src]) -> Result<Placed<Reg>, EmitError> {
        if self.stream_known {
            self.place(&stream_constant(srcs))
        } else {
            self.place(srcs)
        }
    }

    /// Makes `srcs` readable by one instruction: at most one A and one B address (small
    /// immediates take B) and one uniform-stream read; 32-bit constants go through r5, other
    /// registers a port cannot serve are first copied to ra14/rb14.
    fn place(&mut self, srcs: &[Src]) -> Result<Placed<Reg>, EmitError> {
        let mut a: Option<u8> = None;
        let mut b: Option<Src> = None;
        let mut regs: Placed<Option<Reg>> = smallvec::smallvec![None; srcs.len()];
        let mut later: Placed<usize> = Placed::new();
        if srcs.iter().any(|s| matches!(s, Src::Stream(_))) {
            // Read once, here.
            self.folded = None;
            // A reset of the stream first: it writes r5.
            if !self.stream_known {
                self.reset_uniform_stream()?;
            }
        }
        // r5 holds values that are the same in every lane (its writes replicate one lane per
        // quad): a 32-bit constant, or a uniform when both read ports are taken.
        let mut r5: Option<Src> = None;
        // Registers first, then what may take either port (stream reads, constants).
        let order = (0..srcs.len())
            .filter(|&k| !matches!(srcs[k], Src::Stream(_) | Src::Big(_)))
            .chain((0..srcs.len()).filter(|&k| matches!(srcs[k], Src::Stream(_) | Src::Big(_))));
        for k in order {
            let s = srcs[k];
            match s {
                Src::Acc(n) => regs[k] = Some(Reg::Acc(n)),
                Src::Stream(u) if a.is_none() || a == Some(raddr::UNIFORM) => {
                    if a.is_none() {
                        self.take_uniform(u)?;
                    }
                    a = Some(raddr::UNIFORM);
                    regs[k] = Some(Reg::ReadA(raddr::UNIFORM));
                }
                Src::Stream(u) if b.is_none() || b == Some(s) => {
                    if b.is_none() {
                        self.take_uniform(u)?;
                    }
                    b = Some(s);
                    regs[k] = Some(Reg::ReadB(raddr::UNIFORM));
                }
                Src::Big(c) if r5.is_none() || r5 == Some(s) => {
                    if r5.is_none() && self.r5_const != Some(c) {
                        self.push(builder::load_imm(Reg::Acc(5), c)?);
                        self.r5_const = Some(c);
                    }
                    r5 = Some(s);
                    regs[k] = Some(Reg::Acc(5));
                }
                Src::A(n) if a.is_none() || a == Some(n) => {
                    a = Some(n);
                    regs[k] = Some(Reg::A(n));
                }
                Src::B(_) | Src::Imm(_) if b.is_none() || b == Some(s) => {
                    b = Some(s);
                    regs[k] = Some(match s {
                        Src::B(n) => Reg::B(n),
                        Src::Imm(c) => Reg::SmallImm(c),
                        _ => unreachable!(),
                    });
                }
                _ => later.push(k),
            }
        }
        let mut moved: Placed<(Src, Reg)> = Placed::new();
        for k in later {
            let s = srcs[k];
            if let Some(&(_, r)) = moved.iter().find(|(x, _)| *x == s) {
                regs[k] = Some(r);
                continue;
            }
            if let Src::Stream(u) = s {
                if r5.is_some() {
                    return Err(internal("no register for a second uniform or constant"));
                }
                self.take_uniform(u)?;
                self.push_alu(builder::mov(Reg::Acc(5), Reg::ReadA(raddr::UNIFORM))?);
                r5 = Some(s);
                moved.push((s, Reg::Acc(5)));
                regs[k] = Some(Reg::Acc(5));
                continue;
            }
            let to = if a.is_none() && !self.packing {
                a = Some(SCRATCH_A);
                Reg::A(SCRATCH_A)
            } else if b.is_none() && self.w != Some(Reg::B(SCRATCH_B)) {
                b = Some(Src::B(SCRATCH_B));
                Reg::B(SCRATCH_B)
            } else {
                return Err(internal(
                    "no scratch register for a read-file fix-up (ra14 holds the colour)",
                ));
            };
            self.copy_to(to, s, Cond::Always)?;
            moved.push((s, to));
            regs[k] = Some(to);
        }
        Ok(regs.into_iter().map(|r| r.expect("placed")).collect())
    }

    /// `to ← s` under `cond`.
    fn copy_to(&mut self, to: Reg, s: Src, cond: Cond) -> Result<(), EmitError> {
        match s {
            Src::Big(c) => {
                let mut i = builder::load_imm(to, c)?;
                if let Instr::LoadImm(l) = &mut i {
                    l.w.cond_add = cond;
                }
                self.push(i);
            }
            _ => {
                let r = self.place(&[s])?[0];
                self.push_alu(builder::mov(to, r)?.cond_add(cond));
            }
        }
        Ok(())
    }

    // ---- masks and flags ----------------------------------------------------------------

    /// Whether `inst` writes only the lanes that run (and so needs the mask here).
    fn needs_mask(&self, b: Block, inst: &Inst) -> bool {
        self.masked[b.index()]
            && !(inst.writes_all_lanes()
                || inst.op == Opcode::LinearPhi
                || inst.defs.iter().any(|d| self.linear[d.temp.index()]))
    }

    /// Sets Z in exactly the lanes that run.
    fn exec_flags(&mut self) -> Result<(), EmitError> {
        if self.flags != Flags::Exec {
            self.push_alu(builder::mov(Reg::Nop, EXEC)?.sf());
            self.flags = Flags::Exec;
        }
        Ok(())
    }

    /// The condition a write of `inst` takes: [`Emitter::running_cond`] when masked.
    fn write_cond(&mut self, b: Block, inst: &Inst) -> Result<Cond, EmitError> {
        if self.needs_mask(b, inst) {
            self.running_cond()
        } else {
            Ok(Cond::Always)
        }
    }

    /// The condition that holds in exactly the lanes that run: the one the flags hold for
    /// them ([`Flags::Running`]), else Z after the execute flags.
    fn running_cond(&mut self) -> Result<Cond, EmitError> {
        match self.flags {
            Flags::Running(c, _) => Ok(c),
            _ => {
                self.exec_flags()?;
                Ok(Cond::Zs)
            }
        }
    }

    /// `ra13 ← value` in the lanes that run (Z from [`exec_flags`]).
    fn set_exec_waiting(&mut self, value: u32) -> Result<(), EmitError> {
        let running = self.running_cond()?;
        // A small wait id is a small immediate: a move, which pairs, not a load immediate.
        self.copy_to(EXEC, src_of_const(value), running)?;
        self.flags = Flags::Unknown;
        Ok(())
    }

    /// Lanes waiting for `b` run again.
    fn wake(&mut self, b: Block) -> Result<(), EmitError> {
        let id = self.wait_ids[b.index()];
        if self.ordered_waits {
            // The lanes that run from here hold ra13 ≤ id (see `wait_ids`): N set there.
            let idx = self.place(&[Src::A(EXEC_REG), src_of_const(id + 1)])?;
            self.push_alu(builder::qpu_a(AddOp::Sub, Reg::Nop, idx[0], idx[1])?.sf());
            self.push_alu(builder::mov(EXEC, Reg::SmallImm(IMM_0))?.cond_add(Cond::Ns));
            self.flags = Flags::Running(Cond::Ns, false);
            return Ok(());
        }
        let idx = self.place(&[Src::A(EXEC_REG), src_of_const(id)])?;
        self.push_alu(builder::qpu_a(AddOp::Sub, Reg::Nop, idx[0], idx[1])?.sf());
        self.push_alu(builder::mov(EXEC, Reg::SmallImm(IMM_0))?.cond_add(Cond::Zs));
        self.flags = Flags::Unknown;
        Ok(())
    }

    /// Whether the blocks `[from, to)` are worth branching over when no lane runs them: they
    /// hold at least [`SKIP_MIN`] instructions, and write nothing in all lanes, so that running
    /// them with no lane active changes nothing (the interpreter runs them).
    fn skippable(&self, from: Block, to: Block) -> bool {
        let insts = || {
            self.func.blocks[from.index()..to.index()]
                .iter()
                .flat_map(|blk| &blk.insts)
        };
        insts()
            .filter(|i| !i.op.is_terminator())
            .nth(SKIP_MIN - 1)
            .is_some()
            && insts().all(|i| {
                !(i.writes_all_lanes()
                    || i.op == Opcode::LinearPhi
                    || i.defs.iter().any(|d| self.linear[d.temp.index()]))
            })
    }

    /// Branches to `target` when no lane runs.
    /// Whether the blocks from `start` to `end` (the sides of an `if`, in layout order) hold
    /// no loop and no jump out (`break`, `continue`, `return`): run by no lane, they write
    /// nothing and reach `end`.
    fn straight(&self, start: Block, end: Block) -> bool {
        (start.0..end.0).all(|k| {
            self.func.blocks[k as usize].insts.last().is_none_or(|i| {
                !matches!(
                    i.op,
                    Opcode::Loop | Opcode::Break | Opcode::Continue | Opcode::Return
                )
            })
        })
    }

    fn skip_if_none_run(&mut self, target: Block) -> Result<(), EmitError> {
        let none_run = match self.flags {
            Flags::Running(c, _) => all_lanes(invert(c)),
            _ => None,
        };
        match none_run {
            Some(none_run) => self.branch(none_run, target),
            None => {
                self.exec_flags()?;
                self.branch(BranchCond::AllZc, target);
            }
        }
        Ok(())
    }

    // ---- the program --------------------------------------------------------------------

    fn run(&mut self, mode: OutputMode) -> Result<(), EmitError> {
        let func = self.func;
        // Mesa reads W from ra15 with the varying on file B; kiln does so unless an input is
        // written to ra15 while W is still to be read, and then copies W to rb14 first.
        let prologue = &func.blocks[0].insts;
        let last_w = prologue.iter().rposition(|i| {
            i.op == Opcode::Input
                && matches!(
                    self.info.inputs.get(&i.imms[0]),
                    Some(InputKind::Varying | InputKind::FragCoord(3))
                )
        });
        if let Some(last) = last_w {
            let clobbered = prologue[..last]
                .iter()
                .any(|i| i.op == Opcode::Input && self.def_reg(i, 0).ok() == Some(Reg::A(15)));
            if clobbered {
                self.push_alu(builder::mov(Reg::B(SCRATCH_B), Reg::A(15))?);
                self.w = Some(Reg::B(SCRATCH_B));
            } else {
                self.w = Some(Reg::A(15));
            }
        }
        if self.exec {
            self.copy_to(EXEC, Src::Imm(IMM_0), Cond::Always)?;
        }
        for b in func.block_ids() {
            self.origin = Origin::BlockStart(b);
            self.labels[b.index()] = Some(self.out.len());
            self.r5_const = None;
            if !self.entered_by_falling[b.index()] {
                self.flags = Flags::Unknown;
            }
            self.tex_in_r4 = None;
            let block = func.block(b);
            let nphi = block.phi_count();
            // Where the previous block may also branch elsewhere, the stream stays known only
            // past the entry its branch target's reset reads.
            let skip_entry = self.entered_by_falling[b.index()]
                && !self.falls_through[b.index()]
                && self.stream_known;
            if !self.falls_through[b.index()] && b.index() > 0 {
                self.stream_known = false;
            }
            // The branch over a divergent else side no lane runs.
            let skip = self
                .cfg
                .ifs
                .iter()
                .find(|i| i.divergent && i.else_start == b && i.else_start < i.endif)
                .map(|i| i.endif)
                .filter(|&endif| self.skippable(b, endif));
            // A reset comes after any branch out of the block's start, which must leave the
            // stream at the end of the reads that ran; else first, so that the wake covers the
            // two instructions after it.
            let reads = block
                .insts
                .iter()
                .any(|i| i.op == Opcode::Uniform || crate::texture::is_lookup(i));
            if skip_entry && reads && skip.is_none() {
                self.skip_stream_address()?;
            }
            if !self.stream_known && reads && skip.is_none() {
                self.reset_uniform_stream()?;
            }
            if self.wakes[b.index()] {
                self.wake(b)?;
            }
            if let Some(endif) = skip {
                self.skip_if_none_run(endif)?;
            }
            if !self.stream_known && reads {
                self.reset_uniform_stream()?;
            }
            let insts = &block.insts[nphi..];
            let requests = crate::texture::requests(insts);
            self.sent = None;
            for (k, inst) in insts.iter().enumerate() {
                self.origin = Origin::Inst(b, (nphi + k) as u32);
                if inst.op != Opcode::Input {
                    self.w = None;
                }
                if inst.op == Opcode::Uniform && self.folds_into(inst, insts.get(k + 1)) {
                    // Read by the next operation itself.
                    self.folded = Some((inst.defs[0].temp, inst.imms[0]));
                    continue;
                }
                if inst.op == Opcode::Uniform && self.read_by_move(inst, &insts[k + 1..]) {
                    self.read_at_use[inst.defs[0].temp.index()] = true;
                    continue;
                }
                if crate::interface::is_comparison(inst.op)
                    && let Some(next) = insts.get(k + 1)
                    && (next.op == Opcode::Sel
                        || (next.op == Opcode::If
                            && (!self.masked[b.index()]
                                || (next.flags.divergent && masked_if_takes(inst.op)))))
                    && next.operands[0].temp_id() == Some(inst.defs[0].temp)
                    && next.operands[1..]
                        .iter()
                        .all(|o| o.temp_id() != Some(inst.defs[0].temp))
                    && self.only_use(inst.defs[0].temp, next)
                {
                    // The select or branch sets the flags itself (Mesa's `ntq_emit_bcsel` and
                    // `ntq_emit_if` on a comparison).
                    self.pending_compare = Some(inst);
                    continue;
                }
                if self.defers(b, inst, &insts[k + 1..]) {
                    self.deferred = Some(inst);
                    continue;
                }
                if self.written_by_output(b, inst, &insts[k + 1..], mode) {
                    self.written_by_output.push(inst);
                    continue;
                }
                self.channel_in_place = crate::narrow::writes_r4(inst)
                    && self.reads_channel_in_place(b, inst, &insts[k + 1..]);
                if requests[k] {
                    self.prefetch = self.prefetch(insts, &requests, k);
                }
                if inst.op.is_terminator() {
                    self.terminator(b, inst, mode)?;
                } else {
                    self.inst(b, inst)?;
                }
                if self.pending_compare.take().is_some() {
                    return Err(internal("a comparison folded into no select"));
                }
                if self.deferred.take().is_some() {
                    return Err(internal("an operation deferred to no select"));
                }
                if self.folded.take().is_some() {
                    return Err(internal(format!(
                        "`{}` did not read its folded uniform",
                        inst.op
                    )));
                }
            }
            if !self.in_r4.is_empty() {
                return Err(internal("a texel channel left in r4 that nothing read"));
            }
            if !self.written_by_output.is_empty() {
                return Err(internal(
                    "an operation left to an output that did not write it",
                ));
            }
        }
        // A reset reads the entry after the last reads that ran: one more for the last reads.
        if self.uniforms.contains(&Uniform::StreamAddress) {
            self.uniforms.push(Uniform::StreamAddress);
        }
        // Relocate: relative branches count from the branch + 4 instructions.
        for &(at, target) in &self.branches {
            if self.entered_by_falling[target.index()] {
                let from = self.labels.iter().rposition(|l| l.is_some_and(|l| l <= at));
                return Err(internal(format!(
                    "a branch from bb{} to {target}, which was laid out as entered only by falling through",
                    from.unwrap_or(0)
                )));
            }
            let to = self.labels[target.index()].ok_or_else(|| internal("unplaced block"))?;
            let imm = 8 * (to as i64 - (at as i64 + 4));
            if let Instr::Branch(br) = &mut self.out[at] {
                br.imm = imm as i32;
            }
        }
        Ok(())
    }

    /// Points the uniform stream at the next entry of the table (Mesa's `QOP_UNIFORMS_RESET`):
    /// `uniforms_address = 4 × (k + 1) + unif`, the uniform at k being the stream's address.
    fn reset_uniform_stream(&mut self) -> Result<(), EmitError> {
        let next = 4 * (self.uniforms.len() as u32 + 1);
        self.uniforms.push(Uniform::StreamAddress);
        self.push(builder::load_imm(Reg::Acc(5), next)?);
        self.push_alu(builder::qpu_a(
            AddOp::Add,
            Reg::Io(waddr::UNIFORMS_ADDRESS),
            Reg::Acc(5),
            Reg::ReadA(raddr::UNIFORM),
        )?);
        self.uniform_fence = self.out.len() + 2;
        self.stream_known = true;
        Ok(())
    }

    /// Takes the stream's next entry, the one a reset where the previous block branches to
    /// reads ([`Uniform::StreamAddress`]), so that the stream goes on here without a reset of
    /// its own: a read of the uniform address alone, which the scheduler puts on an
    /// instruction with a free read port.
    fn skip_stream_address(&mut self) -> Result<(), EmitError> {
        self.uniforms.push(Uniform::StreamAddress);
        let mut skip = AluInstr::nop();
        skip.raddr_a = raddr::UNIFORM;
        self.push_alu(skip);
        self.stream_known = true;
        Ok(())
    }

    /// Records that the next instruction takes uniform `u`, resetting the stream first when
    /// its position is not known here.
    fn take_uniform(&mut self, u: Uniform) -> Result<(), EmitError> {
        if !self.stream_known {
            self.reset_uniform_stream()?;
        }
        self.uniforms.push(u);
        Ok(())
    }

    /// Whether uniform read `u` can be folded into `next`, its only use
    /// ([`crate::interface::folds_uniform`]).
    fn folds_into(&self, u: &Inst, next: Option<&Inst>) -> bool {
        let t = u.defs[0].temp;
        next.is_some_and(|n| crate::interface::folds_uniform(n.op) && self.only_use(t, n))
    }

    /// Whether uniform read `u` is left to its one reader in `rest` (the same block, so the
    /// stream runs on unreset): a value of a `sel` or the source of a `mov`, which move it
    /// where they write.
    fn read_by_move(&self, u: &Inst, rest: &[Inst]) -> bool {
        let t = u.defs[0].temp;
        rest.iter()
            .find(|i| i.used_temps().any(|x| x == t))
            .is_some_and(|user| {
                let value = match user.op {
                    Opcode::Sel => user.operands[0].temp_id() != Some(t),
                    Opcode::Mov => true,
                    _ => false,
                };
                value && self.only_use(t, user)
            })
    }

    /// Whether `user` is the only reader of `t` and `t` dies there: its register is read
    /// nowhere else, a phi's identity copy out of SSA left out included (the kill flag says so),
    /// so an instruction that leaves the register unwritten loses nothing.
    fn only_use(&self, t: kiln_ir::Temp, user: &Inst) -> bool {
        self.uses[t.index()] == 1
            && user
                .operands
                .iter()
                .any(|o| o.temp_id() == Some(t) && o.is_kill())
    }

    fn inst(&mut self, b: Block, inst: &Inst) -> Result<(), EmitError> {
        if !crate::texture::is_lookup(inst) && !crate::texture::keeps_r4(inst) {
            self.tex_in_r4 = None;
        }
        match inst.op {
            Opcode::Input => self.input(inst),
            Opcode::Uniform => {
                let d = self.def_reg(inst, 0)?;
                self.take_uniform(Uniform::of_slot(inst.imms[0]))?;
                let cond = self.write_cond(b, inst)?;
                self.push_alu(builder::mov(d, Reg::ReadA(raddr::UNIFORM))?.cond_add(cond));
                Ok(())
            }
            Opcode::Output => self.output(b, inst, self.mode),
            Opcode::Discard => {
                // The running lanes stop for good: they wait for a block that never comes.
                self.discards = true;
                self.set_exec_waiting(if self.ordered_waits {
                    ORDERED_DISCARDED
                } else {
                    DISCARDED
                })
            }
            Opcode::Mov => {
                let d = self.def_reg(inst, 0)?;
                let s = self.src(&inst.operands[0])?;
                if d_src_opt(d) == Some(s) {
                    // A copy within one register: nothing to do, masked or not.
                    return Ok(());
                }
                let cond = self.write_cond(b, inst)?;
                self.copy_to(d, s, cond)
            }
            Opcode::ParallelCopy => self.parallel_copy(b, inst),
            Opcode::Sel => self.sel(b, inst),
            op if crate::interface::is_comparison(op) => self.compare(b, inst),
            Opcode::Target(t) => match Op::of(t) {
                Some(op) => self.target_op(b, inst, op),
                None => Err(internal(format!("`{}` is no vc4 operation", inst.op))),
            },
            op => Err(EmitError::Unsupported(format!("`{op}` in the emitter"))),
        }
    }

    fn input(&mut self, inst: &Inst) -> Result<(), EmitError> {
        let d = self.def_reg(inst, 0)?;
        let slot = inst.imms[0];
        match self.info.inputs.get(&slot) {
            Some(InputKind::Varying) => {
                let w = self
                    .w
                    .ok_or_else(|| internal("a varying read after the prologue"))?;
                self.varyings.push(slot);
                // d = vary × W, the varying read on the file W is not in; then d += r5 (the C
                // coefficient).
                let vary = if w == Reg::A(15) {
                    Reg::ReadB(raddr::VARYING)
                } else {
                    Reg::ReadA(raddr::VARYING)
                };
                self.push_alu(builder::qpu_m(MulOp::Fmul, d, vary, w)?);
                self.push_alu(builder::qpu_a(AddOp::Fadd, d, d, Reg::Acc(5))?);
                Ok(())
            }
            Some(InputKind::Attribute | InputKind::IndexAttribute { .. }) => {
                // Generic VPM reads (32-bit, horizontal, stride 1), 16 per setup.
                let k = self.attributes;
                if k % 16 == 0 {
                    let num = (self.attribute_count - k).min(16) & 15;
                    let setup = (num << 20) | (1 << 12) | (1 << 11) | (2 << 8) | k;
                    self.push(builder::load_imm(Reg::IoA(waddr::VPM_SETUP), setup)?);
                }
                self.attributes += 1;
                self.varyings.push(slot);
                self.push_alu(builder::mov(d, Reg::ReadA(raddr::VPM))?);
                Ok(())
            }
            Some(InputKind::FragCoord(c @ (0 | 1))) => {
                let xy = if *c == 0 {
                    Reg::ReadA(raddr::XY_COORD)
                } else {
                    Reg::ReadB(raddr::XY_COORD)
                };
                self.push_alu(builder::qpu_a(AddOp::Itof, d, xy, xy)?);
                let ds = d_src_opt(d).ok_or_else(|| internal("input to a non-register"))?;
                let r = self.place(&[ds, Src::Imm(IMM_HALF)])?;
                self.push_alu(builder::qpu_a(AddOp::Fadd, d, r[0], r[1])?);
                Ok(())
            }
            Some(InputKind::FragCoord(2)) => {
                // rb15 is read before any input is written (the interface pass orders them).
                // The scale goes through r5 (rb14 may hold W; no varying has been read yet, and the
                // value is the same in every lane, so r5's per-quad write is exact).
                self.push_alu(builder::qpu_a(AddOp::Itof, d, Reg::B(15), Reg::B(15))?);
                self.push(builder::load_imm(Reg::Acc(5), FRAG_Z_SCALE)?);
                self.push_alu(builder::qpu_m(MulOp::Fmul, d, d, Reg::Acc(5))?);
                Ok(())
            }
            Some(InputKind::FrontFacing) => {
                // rev_flag takes the B port a small immediate would: two instructions.
                self.push_alu(builder::mov(d, Reg::ReadB(raddr::MS_REV))?);
                let ds = d_src_opt(d).ok_or_else(|| internal("input to a non-register"))?;
                let r = self.place(&[ds, Src::Imm(IMM_MINUS_1)])?;
                self.push_alu(builder::qpu_a(AddOp::Add, d, r[0], r[1])?);
                Ok(())
            }
            Some(InputKind::FragCoord(3)) => {
                let w = self
                    .w
                    .ok_or_else(|| internal("gl_FragCoord.w after the prologue"))?;
                self.push_alu(builder::mov(Reg::Io(waddr::SFU_RECIP), w)?);
                self.nop();
                self.nop();
                self.push_alu(builder::mov(d, Reg::Acc(4))?);
                Ok(())
            }
            other => Err(EmitError::Unsupported(format!(
                "input slot {slot} ({other:?})"
            ))),
        }
    }

    fn target_op(&mut self, b: Block, inst: &Inst, op: Op) -> Result<(), EmitError> {
        let srcs: Vec<Src> = inst
            .operands
            .iter()
            .map(|o| self.src(o))
            .collect::<Result<_, _>>()?;
        let facts = op.facts();
        let (x, y) = match (facts.hw, srcs.as_slice()) {
            (Hw::Tmu { .. }, _) => return self.texture(b, inst, &srcs),
            (Hw::Derivative(axis), [v]) => return self.derivative(b, inst, axis, *v),
            (_, [x]) => (*x, *x),
            (_, [x, y]) => (*x, *y),
            _ => {
                return Err(internal(format!(
                    "`{}` with {} operands",
                    op.name(),
                    srcs.len()
                )));
            }
        };
        let d = self.def_reg(inst, 0)?;
        match facts.hw {
            Hw::Add(_) | Hw::Either(..) | Hw::Mul(_) => {
                let cond = self.write_cond(b, inst)?;
                if let Some(k) = self
                    .in_r4
                    .iter()
                    .position(|&(c, ..)| inst.used_temps().any(|u| u == c))
                {
                    let (c, unpack, left) = &mut self.in_r4[k];
                    let c = *c;
                    *left -= inst.used_temps().filter(|&u| u == c).count() as u32;
                    self.unpack_now = Some(*unpack);
                    if *left == 0 {
                        self.in_r4.swap_remove(k);
                    }
                }
                self.alu(facts.hw, d, x, y, cond)?;
            }
            Hw::Sfu(address) => {
                let r = self.place_operation(&[x])?;
                self.push_alu(builder::mov(Reg::Io(address), r[0])?);
                // r4 holds the result `latency` instructions after the write.
                for _ in 1..facts.latency {
                    self.nop();
                }
                if std::mem::take(&mut self.channel_in_place) {
                    let t = inst.defs[0].temp;
                    self.in_r4.push((t, Unpack::None, self.uses[t.index()]));
                } else {
                    let cond = self.write_cond(b, inst)?;
                    self.push_alu(builder::mov(d, Reg::Acc(4))?.cond_add(cond));
                }
            }
            Hw::Halves(add) => {
                let Reg::A(a) = d else {
                    return Err(internal(format!("`{}` into {d:?}, not file A", op.name())));
                };
                if matches!(y, Src::A(r) if r == a) {
                    return Err(internal(format!(
                        "`{}`: the high half read from the register the low half wrote",
                        op.name()
                    )));
                }
                let cond = self.write_cond(b, inst)?;
                // pm = 0 packs 16a and 16b: each write keeps the other half.
                for (src, pack) in [(x, 1), (y, 2)] {
                    let r = self.place_operation(&[src])?;
                    self.push_alu(
                        builder::qpu_a(add, d, r[0], r[0])?
                            .cond_add(cond)
                            .pack(false, pack),
                    );
                }
            }
            Hw::Tmu { .. } | Hw::Derivative(_) => unreachable!("handled above"),
        }
        Ok(())
    }

    /// One add-unit or mul-unit operation: `d ← op(x, y)` where `cond` holds (an operation
    /// both units have goes on the add unit).
    fn alu(&mut self, hw: Hw, d: Reg, x: Src, y: Src, cond: Cond) -> Result<(), EmitError> {
        let r = self.place_operation(&[x, y])?;
        let mut a = match hw {
            Hw::Add(add) | Hw::Either(add, _) => builder::qpu_a(add, d, r[0], r[1])?.cond_add(cond),
            Hw::Mul(mul) => builder::qpu_m(mul, d, r[0], r[1])?.cond_mul(cond),
            _ => return Err(internal("an ALU operation that is none")),
        };
        if let Some(unpack) = self.unpack_now.take().filter(|&u| u != Unpack::None) {
            // Every read of r4 in this instruction is the channel's (no value lives in r4).
            a = a.pack(true, 0).unpack(unpack);
        }
        self.push_alu(a);
        Ok(())
    }

    /// Whether lookup or SFU operation `inst` leaves its result in r4 for the operations of
    /// `rest` that read it, instead of moving (a texel channel: unpacking) it into its
    /// register first (Mesa's r4 class for a value no r4 write outlives): every read is in
    /// `rest` before the next r4 write (lookups of the same texel load the same bytes again),
    /// by an add- or mul-unit operation of no other resource, emitted on its own (not deferred
    /// into a select), reading no other r4 result. The result's register is then never written.
    fn reads_channel_in_place(&self, b: Block, inst: &Inst, rest: &[Inst]) -> bool {
        if inst.defs.len() != 1 {
            return false;
        }
        let t = inst.defs[0].temp;
        let mut reads = 0;
        for (k, user) in rest.iter().enumerate() {
            let n = user.used_temps().filter(|&u| u == t).count() as u32;
            if n > 0 {
                let alu = Op::of_opcode(user.op).is_some_and(|op| {
                    matches!(op.facts().hw, Hw::Add(_) | Hw::Mul(_) | Hw::Either(..))
                        && op.facts().resources.is_empty()
                });
                let other = user.operands.iter().any(|o| {
                    o.temp_id()
                        .is_some_and(|u| u != t && self.r4_defined[u.index()])
                });
                if !alu || other || user.defs.len() != 1 || self.defers(b, user, &rest[k + 1..]) {
                    return false;
                }
                reads += n;
                if reads == self.uses[t.index()] {
                    return self.dead_after(b, &inst.defs[0], &rest[k + 1..]);
                }
            }
            if crate::narrow::writes_r4(user) && !crate::texture::same_texel(inst, user) {
                return false;
            }
        }
        false
    }

    /// Whether the register of `def` (read last before `rest`) holds nothing read later: a
    /// write replaces it in `rest` before any read, or it is dead at the block's end. (An
    /// identity copy out of SSA reads nothing, so a use count cannot say.) A search longer
    /// than [`DEAD_SEARCH`] instructions says no.
    fn dead_after(&self, b: Block, def: &kiln_ir::Def, rest: &[Inst]) -> bool {
        let Some(r) = def.reg else { return false };
        let mask = units(r, self.func.class(def.temp).size);
        for inst in rest.iter().take(DEAD_SEARCH) {
            if inst.operands.iter().any(|o| {
                o.reg.is_some_and(|q| {
                    units(q, o.temp_id().map_or(1, |u| self.func.class(u).size)) & mask != 0
                })
            }) {
                return false;
            }
            if inst.defs.iter().any(|d| {
                d.reg
                    .is_some_and(|q| units(q, self.func.class(d.temp).size) & mask == mask)
            }) {
                return true;
            }
        }
        rest.len() <= DEAD_SEARCH && self.live_out[b.index()] & mask == 0
    }

    /// The operation left to the output that reads `op`, if one is.
    fn take_written_by_output(&mut self, op: &Operand) -> Option<&'a Inst> {
        let k = self
            .written_by_output
            .iter()
            .position(|i| op.temp_id() == Some(i.defs[0].temp))?;
        Some(self.written_by_output.swap_remove(k))
    }

    /// Whether ALU operation `inst` is left to the output of `rest` that is its only use, which
    /// then writes the result itself instead of a copy: to the VPM (any add- or mul-unit
    /// operation), or packed into its byte of the colour (an `fmul`: the mul unit packs). In a
    /// block every lane runs, reading registers or small immediates (no texel channel), none of
    /// which an instruction before the output writes, or its folded uniform read where the
    /// output comes next (the stream's order stays; the interface pass puts each output after
    /// its operation).
    fn written_by_output(&self, b: Block, inst: &Inst, rest: &[Inst], mode: OutputMode) -> bool {
        let Some(hw) = Op::of_opcode(inst.op)
            .filter(|op| op.facts().resources.is_empty())
            .map(|op| op.facts().hw)
        else {
            return false;
        };
        let fits = match mode {
            OutputMode::Tlb => hw == Hw::Mul(MulOp::Fmul),
            OutputMode::Vpm => matches!(hw, Hw::Add(_) | Hw::Mul(_) | Hw::Either(..)),
        };
        if !fits || self.masked[b.index()] || inst.defs.len() != 1 {
            return false;
        }
        let t = inst.defs[0].temp;
        if !self.output_read[t.index()] || self.uses[t.index()] != 1 {
            return false;
        }
        let Some(at) = rest.iter().position(|i| i.used_temps().any(|u| u == t)) else {
            return false;
        };
        // A uniform read folded into the operation stays in stream order only where the output
        // comes next.
        let folded = self.folded.map(|(u, _)| u);
        if folded.is_some() && at > 0 {
            return false;
        }
        let user = &rest[at];
        let output = user.op == Opcode::Output
            && (mode == OutputMode::Vpm
                || matches!(
                    self.info.outputs.get(&user.imms[0]),
                    Some(OutputKind::Color(0..4))
                ));
        let regs: Vec<u32> = inst
            .operands
            .iter()
            .filter_map(|o| o.reg.map(|r| r.unit()))
            .collect();
        let plain = inst.operands.iter().all(|o| match o.value {
            Value::Const(c) => small_imm_code(c).is_some(),
            Value::Temp(u) if Some(u) == folded => true,
            Value::Temp(u) => {
                o.reg.is_some()
                    && self.uniform_slot[u.index()].is_none()
                    && !self.read_at_use[u.index()]
                    && !self.lookup_defined[u.index()]
                    && !self.in_r4.iter().any(|&(c, ..)| c == u)
            }
            Value::Undef(_) => false,
        });
        // Nothing between writes the registers it reads, and a thread switch between (a
        // lookup of a threaded shader) leaves it no accumulator.
        let switch = self.threaded && rest[..at].iter().any(crate::texture::is_lookup);
        let kept = rest[..at].iter().flat_map(|i| &i.defs).all(|d| {
            d.reg.is_none_or(|r| {
                let size = self.func.class(d.temp).size as u32;
                (r.unit()..r.unit() + size.max(1)).all(|u| !regs.contains(&u))
            })
        }) && !(switch
            && regs
                .iter()
                .any(|&u| matches!(QpuReg::from_unit(u), Some(QpuReg::Acc(_)))));
        // Readable by the one instruction as they are: ra14, the scratch of a fix-up, holds
        // the colour.
        let srcs: Vec<Src> = inst
            .operands
            .iter()
            .filter_map(|o| self.src(o).ok())
            .collect();
        let distinct = |file: fn(&Src) -> bool| {
            let mut seen: Vec<Src> = srcs.iter().copied().filter(file).collect();
            seen.dedup();
            seen.len() <= 1
        };
        let ports = distinct(|s| matches!(s, Src::A(_)))
            && distinct(|s| matches!(s, Src::B(_) | Src::Imm(_)));
        output && plain && kept && ports && self.only_use(t, user)
    }

    /// Whether ALU operation `inst` is left for the `sel` at the start of `rest` (or after that
    /// select's folded comparison) to do: its only use is one of that select's values, in a
    /// block every lane runs, reading no folded uniform. The select then writes the operation's
    /// result into its destination where the operation's side is chosen (Mesa's conditional
    /// writes in `ntq_ffract`, `ntq_ffloor`): one move fewer.
    fn defers(&self, b: Block, inst: &Inst, rest: &[Inst]) -> bool {
        let alu = Op::of_opcode(inst.op).is_some_and(|op| {
            matches!(op.facts().hw, Hw::Add(_) | Hw::Mul(_) | Hw::Either(..))
                && op.facts().resources.is_empty()
        });
        if !alu || self.masked[b.index()] || self.folded.is_some() || inst.defs.len() != 1 {
            return false;
        }
        let t = inst.defs[0].temp;
        let sel = match rest {
            [cmp, sel, ..]
                if crate::interface::is_comparison(cmp.op)
                    && sel.operands.first().and_then(|o| o.temp_id()) == Some(cmp.defs[0].temp)
                    && self.only_use(cmp.defs[0].temp, sel) =>
            {
                sel
            }
            [sel, ..] => sel,
            [] => return false,
        };
        sel.op == Opcode::Sel
            && self.only_use(t, sel)
            && sel.operands[0].temp_id() != Some(t)
            && (sel.operands[1].temp_id() == Some(t)) != (sel.operands[2].temp_id() == Some(t))
            && !self.needs_mask(b, sel)
    }

    /// `qpu_fddx`/`qpu_fddy` (Mesa's `ntq_fddx`/`ntq_fddy`): the value in an accumulator (the
    /// scratch definition, written in every lane, unless it is in one already), Z from the
    /// element number's axis bit, the value rotated into rb14 (the neighbour with the bit set,
    /// for the lanes without it) and ra14 (the other way round), then `right − v` in the lanes
    /// without the bit and `v − left` in the others; under a mask through rb14.
    fn derivative(&mut self, b: Block, inst: &Inst, axis: Axis, v: Src) -> Result<(), EmitError> {
        if self.packing || self.w == Some(Reg::B(SCRATCH_B)) {
            return Err(internal("a derivative while ra14/rb14 are in use"));
        }
        let d = self.def_reg(inst, 1)?;
        let acc = match v {
            Src::Acc(n) if n <= 3 => n,
            _ => {
                let Reg::Acc(n @ 0..=3) = self.def_reg(inst, 0)? else {
                    return Err(internal("a derivative's scratch is not in r0–r3"));
                };
                self.copy_to(Reg::Acc(n), v, Cond::Always)?;
                n
            }
        };
        // Between the write of the accumulator and its rotation (validator rule 7).
        self.push_alu(
            builder::qpu_a(
                AddOp::And,
                Reg::Nop,
                Reg::ReadA(raddr::ELEMENT_QPU),
                Reg::SmallImm(axis.bit() as u8),
            )?
            .sf(),
        );
        let (to_low, to_high) = axis.rotations();
        for (dst, n) in [(Reg::B(SCRATCH_B), to_low), (Reg::A(SCRATCH_A), to_high)] {
            let mut rot = builder::qpu_m(MulOp::V8min, dst, Reg::Acc(acc), Reg::Acc(acc))?;
            rot.sig = Signal::SmallImm;
            rot.raddr_b = 48 + n;
            self.push_alu(rot);
        }
        let masked = self.needs_mask(b, inst);
        let out = if masked { Reg::B(SCRATCH_B) } else { d };
        self.push_alu(
            builder::qpu_a(AddOp::Fsub, out, Reg::B(SCRATCH_B), Reg::Acc(acc))?.cond_add(Cond::Zs),
        );
        self.push_alu(
            builder::qpu_a(AddOp::Fsub, out, Reg::Acc(acc), Reg::A(SCRATCH_A))?.cond_add(Cond::Zc),
        );
        if masked {
            let cond = self.write_cond(b, inst)?;
            self.push_alu(builder::mov(d, Reg::B(SCRATCH_B))?.cond_add(cond));
        }
        Ok(())
    }

    /// A TMU request for a lookup ([`crate::texture::Layout`]): r for a cube map, t, b for a
    /// bias or level, then s, which sends it. Each write takes a configuration uniform, in
    /// Mesa's order (`ntq_emit_tex`): P0, P1, then P2 when a cube map or an explicit level needs
    /// it (the cube-map stride, `BSLOD`) or a zero, then a zero.
    fn request(
        &mut self,
        unit: u32,
        layout: Layout,
        mode: Option<u32>,
        srcs: &[Src],
    ) -> Result<(), EmitError> {
        let explicit_level = mode == Some(2);
        let third = if layout.cube || explicit_level {
            Uniform::TextureP2 {
                unit,
                explicit_level,
            }
        } else {
            Uniform::Constant(0)
        };
        let mut params = [
            Uniform::TextureP0 {
                unit,
                cube: layout.cube,
            },
            Uniform::TextureP1(unit),
            third,
            Uniform::Constant(0),
        ]
        .into_iter();
        let mut writes = Vec::with_capacity(4);
        if let Some(r) = layout.r() {
            writes.push((waddr::TMU0_R, srcs[r]));
        }
        writes.push((waddr::TMU0_T, srcs[3]));
        if let Some(b) = layout.lod() {
            writes.push((waddr::TMU0_B, srcs[b]));
        }
        writes.push((waddr::TMU0_S, srcs[2]));
        for (k, (reg, src)) in writes.into_iter().enumerate() {
            let param = params
                .next()
                .expect("four parameters for at most four writes");
            if k == 0 {
                self.take_uniform(param)?;
            } else {
                self.uniforms.push(param);
            }
            let v = self.place(&[src])?[0];
            self.push_alu(builder::mov(Reg::Io(reg), v)?);
        }
        Ok(())
    }

    fn texture(&mut self, b: Block, inst: &Inst, srcs: &[Src]) -> Result<(), EmitError> {
        let (Some(unit), Some(k)) = (
            crate::texture::constant(&inst.operands[0].value),
            crate::texture::constant(&inst.operands[1].value),
        ) else {
            return Err(internal(
                "qpu_tex with a unit or component that is not constant",
            ));
        };
        let d = self.def_reg(inst, 0)?;
        let (_, layout, mode) = lookup_fields(inst)?;
        // The texel of the previous lookup is still in r4 when the previous instruction (but
        // copies) was a lookup at the same coordinates (another component of one sample).
        if !self
            .tex_in_r4
            .as_ref()
            .is_some_and(|p| crate::texture::same_texel(p, inst))
        {
            let sent = match self.sent.take() {
                Some(s) if std::ptr::eq(s, inst) => true,
                Some(_) => return Err(internal("a request sent early for another lookup")),
                None => false,
            };
            if !sent {
                self.request(unit, layout, mode, srcs)?;
            }
            if self.threaded {
                // Switch threads while the TMU works: on the request itself when its signal is
                // free, two delay slots, then `ldtmu0` takes what was requested before.
                let mut at = self.out.len() - 1;
                self.r5_const = None;
                match &mut self.out[at] {
                    Instr::Alu(a) if !sent && a.sig == Signal::None => a.sig = Signal::ThreadSwitch,
                    _ => {
                        let mut sw = AluInstr::nop();
                        sw.sig = Signal::ThreadSwitch;
                        self.push_alu(sw);
                        at = self.out.len() - 1;
                    }
                }
                self.nop();
                self.nop();
                self.last_thrsw = Some((at, b));
                self.flags = Flags::Unknown;
            }
            if let Some(next) = self.prefetch.take() {
                let srcs: Vec<Src> = next
                    .operands
                    .iter()
                    .map(|o| self.src(o))
                    .collect::<Result<_, _>>()?;
                let (Some(unit), layout, mode) = lookup_fields(next)? else {
                    return Err(internal("a prefetched lookup whose unit is not constant"));
                };
                self.request(unit, layout, mode, &srcs)?;
                self.sent = Some(next);
            }
            let mut ld = AluInstr::nop();
            ld.sig = Signal::LoadTmu0;
            self.push_alu(ld);
        }
        let unpack = match k {
            0..=3 => [Unpack::U8a, Unpack::U8b, Unpack::U8c, Unpack::U8d][k as usize],
            _ => Unpack::None,
        };
        if std::mem::take(&mut self.channel_in_place) {
            let t = inst.defs[0].temp;
            self.in_r4.push((t, unpack, self.uses[t.index()]));
        } else if unpack == Unpack::None {
            // The whole word (a depth texel).
            let cond = self.write_cond(b, inst)?;
            self.push_alu(builder::mov(d, Reg::Acc(4))?.cond_add(cond));
        } else {
            let cond = self.write_cond(b, inst)?;
            self.push_alu(
                builder::qpu_a(AddOp::Fmax, d, Reg::Acc(4), Reg::Acc(4))?
                    .pack(true, 0)
                    .unpack(unpack)
                    .cond_add(cond),
            );
        }
        self.tex_in_r4 = Some(inst.clone());
        Ok(())
    }

    /// The next lookup after lookup `k` of `insts` that makes a TMU request, when that request
    /// can go out after `k`'s own, before `k`'s load (Mesa's `vc4_qir_schedule.c` keeps one
    /// more request in the FIFO the same way): its coordinates are registers nothing writes
    /// from `k` to it, or constants; the FIFO holds both requests (a threaded shader has half:
    /// four coordinate writes, so two 2D requests without bias, level or r). With a thread switch before each load, the
    /// request goes after `k`'s switch, so that every request is collected after the next
    /// switch (the rule of `vc4_qir_schedule.c` and kiln's validator).
    fn prefetch(&self, insts: &'a [Inst], requests: &[bool], k: usize) -> Option<&'a Inst> {
        let j = k + 1 + requests[k + 1..].iter().position(|&r| r)?;
        let next = &insts[j];
        let writes = |i: &Inst| Layout::of(i).map_or(usize::MAX / 2, Layout::writes);
        if self.threaded && writes(&insts[k]) + writes(next) > 4 {
            return None;
        }
        let between = &insts[k..j];
        next.operands[2..]
            .iter()
            .all(|o| match o.value {
                Value::Const(_) => true,
                Value::Undef(_) => false,
                Value::Temp(t) => {
                    let Some(r) = o.reg else { return false };
                    let mask = units(r, self.func.class(t).size);
                    !self.r4_defined[t.index()]
                        && !self.read_at_use[t.index()]
                        && self.uniform_slot[t.index()].is_none()
                        && between.iter().flat_map(|i| &i.defs).all(|d| {
                            d.temp != t
                                && d.reg.is_none_or(|q| {
                                    units(q, self.func.class(d.temp).size) & mask == 0
                                })
                        })
                }
            })
            .then_some(next)
    }

    /// Sets flags so that `cond` holds where the comparison is true.
    fn compare_flags(&mut self, inst: &Inst) -> Result<Cond, EmitError> {
        let key = Flags::Compared(
            inst.op,
            self.same(&inst.operands[0]),
            self.same(&inst.operands[1]),
        );
        if self.flags == key {
            // The flags hold this comparison already (a select before it took them): its
            // operands are not read again, a folded uniform among them.
            self.folded = None;
            return Ok(compare_encoding(inst.op)
                .ok_or_else(|| internal(format!("`{}` is no comparison", inst.op)))?
                .2);
        }
        let cond = self.compare_flags_where(inst, Cond::Always)?;
        self.flags = key;
        Ok(cond)
    }

    /// What operand `o` is, as far as two comparisons of it are the same.
    fn same(&self, o: &Operand) -> Same {
        match o.value {
            Value::Const(c) => Same::Const(c),
            Value::Undef(_) => Same::Undef,
            Value::Temp(t) => match self.uniform_slot[t.index()] {
                Some(slot) => Same::Uniform(slot),
                None => Same::Temp(t),
            },
        }
    }

    /// [`Emitter::compare_flags`] in the lanes where `cond` holds (others keep their flags).
    fn compare_flags_where(&mut self, inst: &Inst, cond: Cond) -> Result<Cond, EmitError> {
        let a = self.src(&inst.operands[0])?;
        let c = self.src(&inst.operands[1])?;
        let (op, swap, true_cond) = compare_encoding(inst.op)
            .ok_or_else(|| internal(format!("`{}` is no comparison", inst.op)))?;
        let (x, y) = if swap { (c, a) } else { (a, c) };
        let r = self.place_operation(&[x, y])?;
        self.push_alu(
            builder::qpu_a(op, Reg::Nop, r[0], r[1])?
                .sf()
                .cond_add(cond),
        );
        Ok(true_cond)
    }

    fn compare(&mut self, b: Block, inst: &Inst) -> Result<(), EmitError> {
        let d = self.def_reg(inst, 0)?;
        let masked = self.needs_mask(b, inst);
        // Under the mask, a select of ~0 and 0 on itself, in place.
        let (yes, no) = (Src::Imm(IMM_MINUS_1), Src::Imm(IMM_0));
        if masked && self.masked_sel_fresh(d, Some(inst), no, yes, no)? {
            return Ok(());
        }
        let cond = self.compare_flags(inst)?;
        let to = if masked { Reg::A(SCRATCH_A) } else { d };
        self.push_alu(builder::mov(to, Reg::SmallImm(IMM_MINUS_1))?.cond_add(cond));
        self.push_alu(builder::mov(to, Reg::SmallImm(IMM_0))?.cond_add(invert(cond)));
        if masked {
            self.exec_flags()?;
            self.push_alu(builder::mov(d, Reg::A(SCRATCH_A))?.cond_add(Cond::Zs));
        }
        Ok(())
    }

    fn sel(&mut self, b: Block, inst: &Inst) -> Result<(), EmitError> {
        let d = self.def_reg(inst, 0)?;
        let masked = self.needs_mask(b, inst);
        let c = self.src(&inst.operands[0])?;
        let x = self.src(&inst.operands[1])?;
        let y = self.src(&inst.operands[2])?;
        let compare = self.pending_compare.take();
        if let Some(op) = self.deferred.take() {
            return self.sel_with_operation(inst, d, compare, c, op);
        }
        // Under the mask, when the destination holds one operand already: one move of the
        // other, in the running lanes where the condition says so.
        if masked && x != y && self.masked_sel(d, compare, c, x, y)? {
            return Ok(());
        }
        if masked && x != y && self.masked_sel_fresh(d, compare, c, x, y)? {
            return Ok(());
        }
        let to = if masked { Reg::A(SCRATCH_A) } else { d };
        if x == y {
            if let Some(cmp) = compare {
                // Its operands are read (a uniform among them pops the stream).
                self.compare_flags(cmp)?;
            }
            self.copy_to(to, x, Cond::Always)?;
        } else {
            // x where the condition holds, y where not: Z clear where c != 0, or the flags of
            // the comparison folded here. Each lane reads its own operands before the write, so
            // any register assignment works; write first the one that is the destination, so
            // that the other read never follows a write of it.
            let cond = match compare {
                Some(cmp) => self.compare_flags(cmp)?,
                None => {
                    let r = self.place(&[c])?;
                    self.push_alu(builder::mov(Reg::Nop, r[0])?.sf());
                    Cond::Zc
                }
            };
            let to_src = d_src_opt(to);
            if Some(x) == to_src {
                self.copy_to(to, y, invert(cond))?;
            } else if Some(y) == to_src {
                self.copy_to(to, x, cond)?;
            } else {
                self.copy_to(to, x, cond)?;
                self.copy_to(to, y, invert(cond))?;
            }
        }
        if masked {
            self.exec_flags()?;
            self.push_alu(builder::mov(d, Reg::A(SCRATCH_A))?.cond_add(Cond::Zs));
        }
        Ok(())
    }

    /// A `sel` one of whose values a deferred operation computes ([`Emitter::defers`]): the
    /// flags, the operation writing the destination where its side is chosen, and a move of
    /// the other value where not (unless the destination holds it already).
    fn sel_with_operation(
        &mut self,
        inst: &Inst,
        d: Reg,
        compare: Option<&Inst>,
        c: Src,
        op: &Inst,
    ) -> Result<(), EmitError> {
        let t = op.defs[0].temp;
        let op_is_x = inst.operands[1].temp_id() == Some(t);
        let other = self.src(&inst.operands[if op_is_x { 2 } else { 1 }])?;
        let cond = match compare {
            Some(cmp) => self.compare_flags(cmp)?,
            None => {
                let r = self.place(&[c])?;
                self.push_alu(builder::mov(Reg::Nop, r[0])?.sf());
                Cond::Zc
            }
        };
        let (op_cond, other_cond) = if op_is_x {
            (cond, invert(cond))
        } else {
            (invert(cond), cond)
        };
        let hw = Op::of_opcode(op.op)
            .ok_or_else(|| internal("a deferred operation is no vc4 operation"))?
            .facts()
            .hw;
        let srcs: Vec<Src> = op
            .operands
            .iter()
            .map(|o| self.src(o))
            .collect::<Result<_, _>>()?;
        let (x, y) = match srcs.as_slice() {
            [x] => (*x, *x),
            [x, y] => (*x, *y),
            _ => return Err(internal("a deferred operation with three operands")),
        };
        // Each lane is written once: by the operation (which reads its operands first, the
        // destination's old value among them, in the same instruction) or by the move.
        self.alu(hw, d, x, y, op_cond)?;
        if Some(other) != d_src_opt(d) {
            self.copy_to(d, other, other_cond)?;
        }
        Ok(())
    }

    /// A masked `sel` whose destination holds `x` or `y` already (the allocators put it in an
    /// operand's register where they can): the flags of the condition set in the running
    /// lanes only, then one conditional move of the other operand. The lanes that do not run
    /// must fail the move's condition with the flags an execute-mask test leaves them
    /// ([`masked_if_takes`]). Returns whether it emitted the select.
    fn masked_sel(
        &mut self,
        d: Reg,
        compare: Option<&Inst>,
        c: Src,
        x: Src,
        y: Src,
    ) -> Result<bool, EmitError> {
        let d_src = d_src_opt(d);
        // (the operand to move, whether it moves where the condition holds)
        let (v, when_true) = if Some(y) == d_src {
            (x, true)
        } else if Some(x) == d_src {
            (y, false)
        } else {
            return Ok(false);
        };
        let true_cond = sel_true_cond(compare)?;
        let write = if when_true {
            true_cond
        } else {
            invert(true_cond)
        };
        let c_set = match write {
            // N and C clear where no lane runs, as the execute flags leave them.
            Cond::Zs | Cond::Ns | Cond::Cs => false,
            Cond::Cc => true,
            _ => return Ok(false),
        };
        // The flags a select before this one left, where it tested the same condition with
        // the same preparation: they hold it still.
        // (A condition that is a register's value is tested again: the register may have been
        // written since.)
        let key = compare.map(|cmp| {
            Flags::MaskedCompared(
                cmp.op,
                self.same(&cmp.operands[0]),
                self.same(&cmp.operands[1]),
                c_set,
            )
        });
        if key.is_none() || self.flags != key.expect("some") {
            // The condition of the lanes that run, after the preparation.
            let running = match self.flags {
                // Those lanes, the others' flags clear already.
                Flags::Running(run, true) if !c_set => run,
                _ if c_set => {
                    let zero = Reg::SmallImm(IMM_0);
                    self.push_alu(builder::qpu_a(AddOp::Sub, Reg::Nop, zero, EXEC)?.sf());
                    Cond::Zs
                }
                _ => {
                    self.exec_flags()?;
                    Cond::Zs
                }
            };
            match compare {
                Some(cmp) => {
                    self.compare_flags_where(cmp, running)?;
                }
                None => {
                    let r = self.place(&[c])?;
                    self.push_alu(builder::mov(Reg::Nop, r[0])?.sf().cond_add(running));
                }
            }
            self.flags = key.unwrap_or(Flags::Unknown);
        } else {
            // Its operands are not read again (a folded uniform among them).
            self.folded = None;
        }
        self.copy_to(d, v, write)?;
        Ok(true)
    }

    /// [`Emitter::masked_sel`] where the destination holds neither value: one is first moved
    /// there in the running lanes, the one that leaves the other's move a condition no
    /// waiting lane meets — three instructions, where a select into the scratch register and
    /// a masked move of it take five. Not where the destination's register is one the
    /// condition reads.
    fn masked_sel_fresh(
        &mut self,
        d: Reg,
        compare: Option<&Inst>,
        c: Src,
        x: Src,
        y: Src,
    ) -> Result<bool, EmitError> {
        let Some(d_src) = d_src_opt(d) else {
            return Ok(false);
        };
        let read = match compare {
            Some(cmp) => vec![self.src(&cmp.operands[0])?, self.src(&cmp.operands[1])?],
            None => vec![c],
        };
        if read.contains(&d_src) || x == d_src || y == d_src {
            return Ok(false);
        }
        let true_cond = sel_true_cond(compare)?;
        // The lanes that run: the flags' condition where the others' flags are clear (what
        // `masked_sel` prepares), else Z after the execute flags.
        let running = match self.flags {
            Flags::Running(run, true) => run,
            _ => {
                self.exec_flags()?;
                Cond::Zs
            }
        };
        // A uniform read folded into the comparison stays folded: the move reads another.
        let folded = self.folded;
        if matches!(true_cond, Cond::Zc | Cond::Nc) {
            // x first; y where the condition fails (Z or N set).
            self.copy_to(d, x, running)?;
            self.folded = folded;
            self.masked_sel(d, compare, c, d_src, y)
        } else {
            self.copy_to(d, y, running)?;
            self.folded = folded;
            self.masked_sel(d, compare, c, x, d_src)
        }
    }

    fn parallel_copy(&mut self, b: Block, inst: &Inst) -> Result<(), EmitError> {
        use kiln_regalloc::parallel_copy::{Source, Step, sequentialize};
        let mut copies = Vec::new();
        for (d, o) in inst.defs.iter().zip(&inst.operands) {
            let du = d
                .reg
                .ok_or_else(|| internal("copy without register"))?
                .unit();
            let s = match o.value {
                Value::Const(c) => Source::Const(c),
                Value::Undef(_) => continue,
                Value::Temp(_) => {
                    let su = o
                        .reg
                        .ok_or_else(|| internal("copy without register"))?
                        .unit();
                    if su == du {
                        continue;
                    }
                    Source::Unit(su)
                }
            };
            copies.push((du, s));
        }
        if copies.is_empty() {
            return Ok(());
        }
        let masked = self.write_cond(b, inst)? != Cond::Always;
        // The condition of one masked move, found again before each (the flags are kept).
        let cond = |e: &mut Self| {
            if masked {
                e.running_cond()
            } else {
                Ok(Cond::Always)
            }
        };
        let scratch = QpuReg::A(SCRATCH_A).unit();
        let free = (!self.packing).then_some(scratch);
        for step in sequentialize(&copies, free) {
            // The scratch unit is free: its moves need no mask.
            match step {
                Step::Move { dst, src } => {
                    let s = match src {
                        Source::Unit(u) => reg_of(u)?,
                        Source::Const(c) => src_of_const(c),
                    };
                    let c = if dst == scratch {
                        Cond::Always
                    } else {
                        cond(self)?
                    };
                    self.copy_to(dst_reg(dst)?, s, c)?;
                }
                Step::Swap { a, b: bb } => {
                    // Three xors, each lane on its own.
                    let (ra, rb) = (reg_of(a)?, reg_of(bb)?);
                    let (da, db) = (dst_reg(a)?, dst_reg(bb)?);
                    for (d, x, y) in [(da, ra, rb), (db, rb, ra), (da, ra, rb)] {
                        let c = cond(self)?;
                        let r = self.place(&[x, y])?;
                        self.push_alu(builder::qpu_a(AddOp::Xor, d, r[0], r[1])?.cond_add(c));
                    }
                }
            }
        }
        Ok(())
    }

    // ---- control flow -------------------------------------------------------------------

    /// Sets Z where the branch condition is false, in the lanes that run (others: Z clear).
    fn condition_flags(&mut self, b: Block, c: &Operand) -> Result<(), EmitError> {
        let s = self.src(c)?;
        if self.masked[b.index()] {
            self.exec_flags()?;
            let r = self.place(&[s])?;
            self.push_alu(builder::mov(Reg::Nop, r[0])?.sf().cond_add(Cond::Zs));
        } else {
            let r = self.place(&[s])?;
            self.push_alu(builder::mov(Reg::Nop, r[0])?.sf());
        }
        self.flags = Flags::Unknown;
        Ok(())
    }

    fn terminator(&mut self, b: Block, inst: &Inst, mode: OutputMode) -> Result<(), EmitError> {
        let next = Block(b.0 + 1);
        match inst.op {
            Opcode::Return => self.end(mode),
            Opcode::Jump => {
                // The end of a divergent if's then side with an else: its lanes wait for the
                // endif.
                if let Some(i) =
                    self.cfg.ifs.iter().find(|i| {
                        i.divergent && i.else_start.0 == b.0 + 1 && i.else_start < i.endif
                    })
                {
                    let endif = i.endif;
                    self.set_exec_waiting(self.wait_ids[endif.index()])?;
                }
                let succ = self.cfg.linear.succs[b.index()][0];
                if succ != next {
                    self.branch(BranchCond::Always, succ);
                }
                Ok(())
            }
            Opcode::If => {
                let (t, e, m) = (inst.targets[0], inst.targets[1], inst.targets[2]);
                if t != next {
                    return Err(internal("then block does not follow its if"));
                }
                // A uniform `if` on a constant takes one side in every lane, running or not
                // (where none runs the interpreter goes by lane 0's condition, the same): no
                // flags, and a jump to the else side where it is false.
                if !inst.flags.divergent
                    && self.pending_compare.is_none()
                    && let Value::Const(c) = inst.operands[0].value
                {
                    if c == 0 {
                        self.branch(BranchCond::Always, e);
                    }
                    return Ok(());
                }
                // Where the condition is false: Z set (in the lanes that run), or the opposite
                // of a comparison folded here (in a block every lane runs).
                // (Whether the comparison set the flags of the running lanes only, the others'
                // Z, N and C clear.)
                let mut masked_compare = false;
                let false_cond = match self.pending_compare.take() {
                    Some(cmp) if self.masked[b.index()] => {
                        // The lanes that do not run must fail the false condition
                        // ([`masked_if_takes`]); the comparison sets the flags of the others.
                        let (_, _, true_cond) = compare_encoding(cmp.op)
                            .ok_or_else(|| internal("a folded comparison is no comparison"))?;
                        // (A divergent if that marks its lanes with `v8max`, below, needs the
                        // execute flags whatever its condition.)
                        masked_compare = inst.flags.divergent
                            && self.ordered_waits
                            && matches!(true_cond, Cond::Zs | Cond::Ns | Cond::Cs);
                        if invert(true_cond) == Cond::Cc && !masked_compare {
                            let zero = Reg::SmallImm(IMM_0);
                            self.push_alu(builder::qpu_a(AddOp::Sub, Reg::Nop, zero, EXEC)?.sf());
                        } else {
                            // N and C clear where no lane runs, as the execute flags leave them.
                            self.exec_flags()?;
                        }
                        invert(self.compare_flags_where(cmp, Cond::Zs)?)
                    }
                    Some(cmp) => invert(self.compare_flags(cmp)?),
                    None => {
                        self.condition_flags(b, &inst.operands[0])?;
                        Cond::Zs
                    }
                };
                let id = self.wait_ids[e.index()];
                if masked_compare {
                    // In a masked block, with wait ids ordered: the lanes that wait hold ids
                    // above the else side's (see `wait_ids`), so ra13 = max(ra13, id) where
                    // the condition is false — every lane that does not run, whose flags the
                    // execute test cleared, and the running ones that go to the else side —
                    // marks the latter and leaves the others as they are. On the mul unit
                    // (`v8max`: the ids are bytes) it clears Z, N and C where it writes, so
                    // the lanes where the condition holds are those that run: the lanes it
                    // does not write, with the comparison's flags.
                    let r = self.place(&[Src::A(EXEC_REG), src_of_const(id)])?;
                    self.push_alu(
                        builder::qpu_m(MulOp::V8max, EXEC, r[0], r[1])?
                            .sf()
                            .cond_mul(false_cond),
                    );
                    self.flags = Flags::Running(invert(false_cond), true);
                    if self.skippable(t, e) {
                        self.skip_if_none_run(e)?;
                    }
                } else if inst.flags.divergent {
                    self.copy_to(EXEC, src_of_const(id), false_cond)?;
                    match all_lanes(false_cond).filter(|_| !self.masked[b.index()]) {
                        // Every lane ran: those that go on are the lanes where the condition
                        // holds, as the flags it was tested on say — the branch over the then
                        // side and its masked writes need no test of ra13 right after its
                        // write (which waits an instruction).
                        Some(_) => self.flags = Flags::Running(invert(false_cond), false),
                        None => self.flags = Flags::Unknown,
                    }
                    if self.skippable(t, e) {
                        self.skip_if_none_run(e)?;
                    }
                } else {
                    // Uniform: the running lanes agree; any of them false → else (or endif).
                    self.branch(any_lane(false_cond), e);
                    if self.masked[b.index()] && !self.straight(t, m) {
                        // No lane runs (the interpreter then goes by lane 0, as here): some lane
                        // runs → then; else lane 0's condition decides. Where neither side has
                        // a loop or a jump out, either side run by no lane writes nothing and
                        // reaches the endif, so the code after does not depend on which: the
                        // then side runs, as the branch above falls through.
                        self.exec_flags()?;
                        self.branch(BranchCond::AnyZs, t);
                        let r = self.place(&[self.src(&inst.operands[0])?])?;
                        self.push_alu(builder::mov(Reg::Nop, Reg::ReadA(raddr::ELEMENT_QPU))?.sf());
                        self.push_alu(builder::mov(Reg::Nop, r[0])?.sf().cond_add(Cond::Zs));
                        self.branch(BranchCond::AnyZs, e);
                    }
                }
                Ok(())
            }
            Opcode::Loop => {
                if inst.targets[0] != next {
                    return Err(internal("loop header does not follow its preheader"));
                }
                Ok(())
            }
            Opcode::Break | Opcode::Continue => {
                let l = self.cfg.loop_of[b.index()]
                    .ok_or_else(|| internal("break or continue outside a loop"))?;
                let (header, exit, divergent_loop) = {
                    let li = &self.cfg.loops[l];
                    (li.header, li.exit, li.divergent)
                };
                let divergent = self.cfg.divergent_jump[b.index()];
                if divergent {
                    let to = if inst.op == Opcode::Break {
                        exit
                    } else {
                        header
                    };
                    self.set_exec_waiting(self.wait_ids[to.index()])?;
                    let succ = self.cfg.linear.succs[b.index()][0];
                    if succ != next {
                        self.branch(BranchCond::Always, succ);
                    }
                    return Ok(());
                }
                if inst.op == Opcode::Break {
                    if exit != next {
                        self.branch(BranchCond::Always, exit);
                    }
                    return Ok(());
                }
                // A uniform back edge.
                if self.cfg.loops[l].divergent_continue {
                    self.wake(header)?;
                }
                if divergent_loop {
                    // Back while any lane runs: after the header's wake the flags say which
                    // ([`Flags::Running`]), no test of ra13 right after its write.
                    let running = self.running_cond()?;
                    self.branch(any_lane(running), header);
                    if exit != next {
                        self.branch(BranchCond::Always, exit);
                    }
                } else {
                    self.branch(BranchCond::Always, header);
                }
                Ok(())
            }
            op => Err(internal(format!("`{op}` is not a terminator"))),
        }
    }

    /// One output, where the function writes it (its register may be reused right after):
    /// packed into ra14's byte for the tile buffer, or written to the next VPM row.
    fn output(&mut self, b: Block, inst: &Inst, mode: OutputMode) -> Result<(), EmitError> {
        if self.masked[b.index()] && !self.discards {
            return Err(internal("an output inside divergent control flow"));
        }
        let slot = inst.imms[0];
        let op = inst.operands[0];
        match mode {
            OutputMode::Tlb => {
                let Some(OutputKind::Color(c @ 0..4)) = self.info.outputs.get(&slot).cloned()
                else {
                    return Err(EmitError::Unsupported(format!(
                        "output slot {slot} to the tile buffer"
                    )));
                };
                if self.constant_colour.is_some() {
                    self.outputs.push((slot, op));
                    return Ok(());
                }
                if !self.packing {
                    // Components the shader does not write stay 0.
                    let all = (0..4).all(|k| {
                        self.info
                            .outputs
                            .values()
                            .any(|o| *o == OutputKind::Color(k))
                    });
                    if !all {
                        self.push(builder::load_imm(Reg::A(SCRATCH_A), 0)?);
                    }
                    self.packing = true;
                }
                if let Some(mul) = self.take_written_by_output(&op) {
                    // The product itself packed into byte c.
                    let x = self.src(&mul.operands[0])?;
                    let y = self.src(&mul.operands[1])?;
                    let r = self.place_operation(&[x, y])?;
                    self.push_alu(
                        builder::qpu_m(MulOp::Fmul, Reg::A(SCRATCH_A), r[0], r[1])?
                            .pack(true, 4 + c as u8),
                    );
                    self.outputs.push((slot, op));
                    return Ok(());
                }
                let s = match self.src(&op)? {
                    Src::Big(v) => {
                        self.push(builder::load_imm(Reg::B(SCRATCH_B), v)?);
                        Reg::B(SCRATCH_B)
                    }
                    s => self.place(&[s])?[0],
                };
                // Mul-unit float → unorm8 pack into byte c (Mesa's RGBA8 colour).
                self.push_alu(
                    builder::qpu_m(MulOp::V8min, Reg::A(SCRATCH_A), s, s)?.pack(true, 4 + c as u8),
                );
            }
            OutputMode::Vpm => {
                if !self.vpm_setup {
                    // Generic block writes: 32-bit, horizontal, stride 1, from row 0.
                    self.push(builder::load_imm(Reg::IoB(waddr::VPM_SETUP), 0x1a00)?);
                    self.vpm_setup = true;
                }
                if let Some(inst) = self.take_written_by_output(&op) {
                    // The operation writes the VPM itself.
                    let hw = Op::of_opcode(inst.op)
                        .ok_or_else(|| internal("an output's operation that is none"))?
                        .facts()
                        .hw;
                    let x = self.src(&inst.operands[0])?;
                    let y = match inst.operands.get(1) {
                        Some(o) => self.src(o)?,
                        None => x,
                    };
                    self.alu(hw, Reg::Io(waddr::VPM), x, y, Cond::Always)?;
                    self.outputs.push((slot, op));
                    return Ok(());
                }
                let r = match self.src(&op)? {
                    Src::Big(v) => {
                        self.push(builder::load_imm(Reg::A(SCRATCH_A), v)?);
                        Reg::A(SCRATCH_A)
                    }
                    s => self.place(&[s])?[0],
                };
                self.push_alu(builder::mov(Reg::Io(waddr::VPM), r)?);
            }
        }
        self.outputs.push((slot, op));
        Ok(())
    }

    /// The program end: the colour write (tile buffer), then `thrend` and its two delay slots.
    fn end(&mut self, mode: OutputMode) -> Result<(), EmitError> {
        self.origin = Origin::End;
        // The last thread switch tells the QPU that this thread ends next (`vc4_generate_code`);
        // it must run exactly once, before the tile buffer is touched: the last lookup's switch
        // when its block runs once, else one of its own here, where every value left (the
        // colour in ra14, the execute mask) is in a file register.
        if self.threaded {
            match self.last_thrsw {
                Some((at, b)) if crate::threads::runs_once(self.func, &self.cfg)[b.index()] => {
                    if let Instr::Alu(a) = &mut self.out[at] {
                        a.sig = Signal::LastThreadSwitch;
                    }
                }
                _ => {
                    let mut sw = AluInstr::nop();
                    sw.sig = Signal::LastThreadSwitch;
                    self.push_alu(sw);
                    self.nop();
                    self.nop();
                    self.flags = Flags::Unknown;
                }
            }
        }
        if mode == OutputMode::Tlb {
            if !self.packing && self.constant_colour.is_none() {
                self.push(builder::load_imm(Reg::A(SCRATCH_A), 0)?);
            }
            // The first two instructions may not touch the TLB or wait on the scoreboard.
            while self.out.len() < 2 {
                self.nop();
            }
            // Discarded lanes keep the tile buffer's colour (Mesa's conditional TLB write).
            let cond = if self.discards {
                self.running_cond()?
            } else {
                Cond::Always
            };
            // The colour: ra14, or a constant (a small immediate, or loaded into r0: every
            // value is dead by now).
            let colour = match self.constant_colour {
                None => Reg::A(SCRATCH_A),
                Some(word) => match self.src(&Operand::constant(word))? {
                    Src::Big(v) => {
                        self.push(builder::load_imm(Reg::Acc(0), v)?);
                        Reg::Acc(0)
                    }
                    s => self.place(&[s])?[0],
                },
            };
            // The tile-buffer write waits on the scoreboard itself (its first access does,
            // as in Mesa's code, which has no explicit wait).
            self.push_alu(builder::mov(Reg::Io(waddr::TLB_COLOR_ALL), colour)?.cond_add(cond));
        }
        let mut end = AluInstr::nop();
        end.sig = Signal::ProgramEnd;
        self.push_alu(end);
        self.nop();
        self.nop();
        Ok(())
    }
}

/// The RGBA8 word of `func`'s colour when every component it writes is a constant (unwritten
/// ones are 0), packed as the mul unit packs a float (`sim::alu::pack_mul`).
fn constant_colour(func: &Function, info: &ShaderInfo) -> Option<u32> {
    let mut word = 0;
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        if inst.op != Opcode::Output {
            continue;
        }
        let Some(OutputKind::Color(c @ 0..4)) = info.outputs.get(&inst.imms[0]) else {
            continue;
        };
        let Value::Const(v) = inst.operands[0].value else {
            return None;
        };
        let (bits, mask) = kiln_qpu::sim::alu::pack_mul(4 + *c as u8, v);
        word = (word & !mask) | (bits & mask);
    }
    Some(word)
}

/// A comparison's flag-setting operation: the add-unit op, whether the operands swap, and the
/// condition where the comparison is true.
/// The fewest instructions a divergent side needs for a branch over it when no lane runs
/// (Mesa's `ntq_emit_if` branches over every side). The branch costs its flags, itself and
/// three delay slots whenever some lane runs, and saves the side only when none does; LLVM's
/// AMDGPU back end waits for 12 instructions with a one-instruction branch
/// (`amdgpu-skip-threshold`). On the corpus, beside Mesa (instructions of the 3,747 entry
/// points both compile): branching over every side 513,801, over every non-empty one 509,185,
/// over those of 12 instructions or more 493,130.
const SKIP_MIN: usize = 12;

/// How far [`Emitter::dead_after`] looks for the next write of a register.
const DEAD_SEARCH: usize = 256;

/// A lookup's unit, its bias or level operand and that operand's mode (`qpu_tex_b`).
/// A lookup's unit, operand layout and level mode (1 bias, 2 explicit level), when constant.
fn lookup_fields(inst: &Inst) -> Result<(Option<u32>, Layout, Option<u32>), EmitError> {
    let layout = Layout::of(inst).ok_or_else(|| internal("a lookup that is no TMU operation"))?;
    let mode = layout
        .lod()
        .and_then(|b| inst.operands.get(b + 1))
        .and_then(|o| crate::texture::constant(&o.value));
    Ok((
        crate::texture::constant(&inst.operands[0].value),
        layout,
        mode,
    ))
}

/// The `q` units of a value of `size` in `r`, as a mask.
fn units(r: kiln_ir::PhysReg, size: u8) -> u128 {
    r.units(size.max(1), crate::target::UNITS)
        .into_iter()
        .flatten()
        .fold(0, |m, u| m | 1u128 << u)
}

/// Per block of allocated `func`, the `q` units live at its end in some lane: a backward
/// dataflow over registers, as the allocation left them, along the logical CFG — the path of
/// each lane, on which a masked write is the lane's own.
fn register_live_out(func: &Function, cfg: &Cfg) -> Vec<u128> {
    let n = func.blocks.len();
    // No block with a successor (one block): nothing is live at any block's end.
    if cfg.logical.succs.iter().all(|s| s.is_empty()) {
        return vec![0; n];
    }
    let (mut gen_, mut kill) = (vec![0u128; n], vec![0u128; n]);
    for (b, block) in func.blocks.iter().enumerate() {
        for inst in block.insts.iter().rev() {
            for d in &inst.defs {
                if let Some(r) = d.reg {
                    let m = units(r, func.class(d.temp).size);
                    kill[b] |= m;
                    gen_[b] &= !m;
                }
            }
            for o in &inst.operands {
                if let Some(r) = o.reg {
                    let m = units(r, o.temp_id().map_or(1, |t| func.class(t).size));
                    gen_[b] |= m;
                }
            }
        }
    }
    let mut live_in = vec![0u128; n];
    let mut live_out = vec![0u128; n];
    let mut changed = true;
    while changed {
        changed = false;
        for b in (0..n).rev() {
            let out = cfg.logical.succs[b]
                .iter()
                .fold(0, |m, s| m | live_in[s.index()]);
            let inn = gen_[b] | (out & !kill[b]);
            if out != live_out[b] || inn != live_in[b] {
                live_out[b] = out;
                live_in[b] = inn;
                changed = true;
            }
        }
    }
    live_out
}

fn compare_encoding(op: Opcode) -> Option<(AddOp, bool, Cond)> {
    Some(match op {
        Opcode::Ieq => (AddOp::Xor, false, Cond::Zs),
        Opcode::Ine => (AddOp::Xor, false, Cond::Zc),
        // max sets C where its first operand is greater (signed).
        Opcode::Ilt => (AddOp::Max, true, Cond::Cs),
        Opcode::Ile => (AddOp::Max, false, Cond::Cc),
        // sub sets C on borrow: a <u b.
        Opcode::Ult => (AddOp::Sub, false, Cond::Cs),
        Opcode::Ule => (AddOp::Sub, true, Cond::Cc),
        Opcode::Feq => (AddOp::Fsub, false, Cond::Zs),
        Opcode::Fne => (AddOp::Fsub, false, Cond::Zc),
        // fmax sets C where its first operand is greater.
        Opcode::Flt => (AddOp::Fmax, true, Cond::Cs),
        Opcode::Fle => (AddOp::Fmax, false, Cond::Cc),
        _ => return None,
    })
}

/// Whether a divergent `if` in a masked block can take its flags from comparison `op` (set in
/// the lanes that run only): the lanes that do not run must fail the condition where the
/// comparison is false, with the flags an execute-mask test leaves them — Z, N and C clear
/// after `mov.sf ra13`, C set after `sub.sf 0, ra13`. A false condition of Z clear fails
/// neither.
fn masked_if_takes(op: Opcode) -> bool {
    compare_encoding(op).is_some_and(|(_, _, c)| invert(c) != Cond::Zc)
}

/// The branch taken when `c` holds in every lane (`None` for the conditions that are no
/// flag's).
fn all_lanes(c: Cond) -> Option<BranchCond> {
    Some(match c {
        Cond::Zs => BranchCond::AllZs,
        Cond::Zc => BranchCond::AllZc,
        Cond::Ns => BranchCond::AllNs,
        Cond::Nc => BranchCond::AllNc,
        Cond::Cs => BranchCond::AllCs,
        Cond::Cc => BranchCond::AllCc,
        Cond::Always | Cond::Never => return None,
    })
}

/// The branch taken when `c` holds in any lane.
fn any_lane(c: Cond) -> BranchCond {
    match c {
        Cond::Zs => BranchCond::AnyZs,
        Cond::Zc => BranchCond::AnyZc,
        Cond::Ns => BranchCond::AnyNs,
        Cond::Nc => BranchCond::AnyNc,
        Cond::Cs => BranchCond::AnyCs,
        Cond::Cc => BranchCond::AnyCc,
        Cond::Always => BranchCond::Always,
        Cond::Never => BranchCond::Undefined(12),
    }
}

fn invert(c: Cond) -> Cond {
    match c {
        Cond::Zs => Cond::Zc,
        Cond::Zc => Cond::Zs,
        Cond::Ns => Cond::Nc,
        Cond::Nc => Cond::Ns,
        Cond::Cs => Cond::Cc,
        Cond::Cc => Cond::Cs,
        Cond::Always => Cond::Never,
        Cond::Never => Cond::Always,
    }
}

fn d_src_opt(d: Reg) -> Option<Src> {
    match d {
        Reg::Acc(n) => Some(Src::Acc(n)),
        Reg::A(n) => Some(Src::A(n)),
        Reg::B(n) => Some(Src::B(n)),
        _ => None,
    }
}
