//! A simulator of VideoCore IV QPUs running 16-lane QPU code (reference guide §"QPU Core",
//! `../shared/vc4/README.md` "Semantics a simulator needs"): one [`Machine`] holds the shared
//! memory, VPM, tile buffer and semaphores, the program and the QPUs ([`Qpu`]) that run it
//! round-robin, one instruction at a time. The design, with the timing model and what a thread
//! switch does, is in `docs/vc4.md` ("Simulator").

pub mod alu;
pub mod memory;
pub mod sfu;
pub mod tlb;
pub mod tmu;
pub mod vpm;

use crate::isa::*;
use alu::LaneResult;
use memory::Memory;
use std::collections::VecDeque;
use tlb::TileBuffer;
use vpm::{Vpm, VpmPort};

/// Cycles from a TMU request to its result.
pub const TMU_LATENCY: u64 = 8;
/// Requests a TMU can hold before `ldtmu` reads them.
pub const TMU_FIFO_DEPTH: usize = 4;
/// What accumulator rN holds in lane l after a thread switch: `POISON | N << 4 | l`, an
/// ordinary float near 0.368, so that a value wrongly kept across a switch shows in a packed
/// colour as well as in raw bits.
pub const POISON: u32 = 0x3ebc_5a00;

/// What went wrong, and at which instruction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("QPU {qpu}, instruction {index} (address {pc:#x}): {kind}")]
pub struct SimError {
    pub qpu: usize,
    /// Instruction index in the program.
    pub index: usize,
    pub pc: u32,
    pub kind: SimErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimErrorKind {
    #[error(
        "r4 read before the SFU result is ready (two instructions must separate the SFU write and the read)"
    )]
    R4TooEarly,
    #[error("TMU{0} request FIFO overflow (more than {TMU_FIFO_DEPTH} outstanding lookups)")]
    TmuFifoOverflow(usize),
    #[error("ldtmu{0} with no outstanding TMU{0} request")]
    TmuFifoEmpty(usize),
    #[error("program counter {0:#x} is outside the program")]
    PastEnd(u32),
    #[error("step limit of {0} instructions reached")]
    StepLimit(u64),
    #[error("memory access at {0:#x} outside the simulated memory")]
    Memory(u32),
    #[error("undefined add opcode {0}")]
    UndefinedOpcode(u8),
    #[error("reserved load-immediate mode {0}")]
    ReservedLoadImm(u8),
    #[error("software breakpoint")]
    Breakpoint,
    #[error("unsupported texture type {0}")]
    UnsupportedTexture(u32),
    #[error("all running QPUs are blocked on semaphores (deadlock)")]
    Deadlock,
    #[error(
        "{}{reg} in a threaded program (registers 16–31 of each file belong to the other thread)",
        if *file_a { "ra" } else { "rb" }
    )]
    OtherThreadsRegister { file_a: bool, reg: u8 },
}

/// A program placed at a bus address.
#[derive(Clone, Debug)]
pub struct Program {
    pub base: u32,
    pub words: Vec<u64>,
    pub instrs: Vec<Instr>,
    /// The program switches threads (has a `thrsw` or `lthrsw` signal).
    pub threaded: bool,
}

impl Program {
    pub fn new(base: u32, words: &[u64]) -> Program {
        let instrs: Vec<Instr> = words.iter().map(|w| decode(*w)).collect();
        let threaded = instrs.iter().any(|i| {
            matches!(i, Instr::Alu(a)
                if matches!(a.sig, Signal::ThreadSwitch | Signal::LastThreadSwitch))
        });
        Program {
            base,
            words: words.to_vec(),
            instrs,
            threaded,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct RfWrite {
    file_a: bool,
    reg: u8,
    vals: [u32; 16],
    lanes: u16,
    mask: u32,
}

#[derive(Clone, Debug, Default)]
struct TmuUnit {
    /// t, r, b written for the next request.
    coords: [Option<[u32; 16]>; 3],
    /// Uniforms consumed by the request being built.
    params: Vec<u32>,
    fifo: VecDeque<([u32; 16], u64)>,
}

/// State of one QPU.
#[derive(Clone, Debug)]
pub struct Qpu {
    pub num: u32,
    /// r0–r5.
    pub acc: [[u32; 16]; 6],
    pub ra: [[u32; 16]; 32],
    pub rb: [[u32; 16]; 32],
    /// Flags, bit i = lane i.
    pub z: u16,
    pub n: u16,
    pub c: u16,
    /// Byte address of the next instruction.
    pub pc: u32,
    /// Address of the next uniform.
    pub unif_addr: u32,
    pub halted: bool,
    /// Values written to host_int.
    pub host_int: Vec<u32>,
    pub instructions: u64,
    pub cycles: u64,
    /// Fragment batch origin in the tile buffer (x_pix / y_pix, TLB writes).
    pub frag_xy: (u32, u32),
    /// What the `rev_flag` read gives: 1 when the batch's primitive is a back face.
    pub rev_flag: u32,
    /// Varyings waiting to be read, in order: each read of the varying address pops one
    /// (value, C coefficient) pair, returns the value and writes C to r5 (the hardware hands
    /// the shader `(A·x + B·y)` and C; `vary × W + r5` interpolates). Empty: reads give 0 and
    /// leave r5 alone.
    pub varyings: VecDeque<([u32; 16], [u32; 16])>,
    /// The C coefficient of the varying read by the instruction running, for r5 once its
    /// operands are read (an operation of the same instruction reads the r5 before: Mesa pairs
    /// `fadd r3, r0, r5 ; fmul r1, vary, ra15`).
    varying_c: Option<[u32; 16]>,
    pending: [Option<RfWrite>; 2],
    sfu: Option<([u32; 16], u64)>,
    branch: Option<(u32, u8)>,
    end: Option<u8>,
    /// Delay slots left before a thread switch.
    switch: Option<u8>,
    /// The program is threaded: registers 16–31 of A and B are not this thread's.
    threaded: bool,
    tmu: [TmuUnit; 2],
    pub vpm: VpmPort,
}

impl Qpu {
    pub fn new(num: u32, pc: u32, unif_addr: u32) -> Qpu {
        Qpu {
            num,
            acc: [[0; 16]; 6],
            ra: [[0; 16]; 32],
            rb: [[0; 16]; 32],
            z: 0,
            n: 0,
            c: 0,
            pc,
            unif_addr,
            halted: false,
            host_int: Vec::new(),
            instructions: 0,
            cycles: 0,
            frag_xy: (0, 0),
            rev_flag: 0,
            varyings: VecDeque::new(),
            varying_c: None,
            pending: [None, None],
            sfu: None,
            branch: None,
            end: None,
            switch: None,
            threaded: false,
            tmu: Default::default(),
            vpm: VpmPort::default(),
        }
    }

    /// What a thread switch leaves of this thread's state: the accumulators, the flags and an
    /// SFU result in flight are gone.
    fn switch_threads(&mut self) {
        for (n, acc) in self.acc.iter_mut().enumerate() {
            *acc = std::array::from_fn(|l| POISON | (n as u32) << 4 | l as u32);
        }
        self.sfu = None;
        (self.z, self.n, self.c) = (0x5a5a, 0xa5a5, 0x3c3c);
    }

    /// Commits register-file writes still in flight (used when inspecting final state).
    pub fn flush(&mut self) {
        for p in self.pending.iter_mut() {
            if let Some(w) = p.take() {
                let file = if w.file_a { &mut self.ra } else { &mut self.rb };
                merge(&mut file[w.reg as usize], &w.vals, w.lanes, w.mask);
            }
        }
    }
}

#[inline]
fn merge(dst: &mut [u32; 16], vals: &[u32; 16], lanes: u16, mask: u32) {
    for i in 0..16 {
        if lanes & (1 << i) != 0 {
            dst[i] = (dst[i] & !mask) | (vals[i] & mask);
        }
    }
}

/// Result of one step of one QPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Ran,
    Blocked,
    Halted,
}

/// The simulated machine: shared memory, VPM, tile buffer, semaphores and the QPUs.
#[derive(Clone, Debug)]
pub struct Machine {
    pub mem: Memory,
    pub vpm: Vpm,
    pub tlb: TileBuffer,
    pub semaphores: [u8; 16],
    pub mutex: Option<usize>,
    pub qpus: Vec<Qpu>,
    pub program: Program,
    step_index: u64,
}

struct Operands {
    add_a: [u32; 16],
    add_b: [u32; 16],
    mul_a: [u32; 16],
    mul_b: [u32; 16],
}

impl Machine {
    /// A machine with `mem_size` bytes of zeroed memory and `program` copied to its base.
    pub fn new(mem_size: usize, program: Program) -> Machine {
        let mut mem = Memory::new(mem_size);
        let _ = mem.write_code(program.base, &program.words);
        Machine {
            mem,
            vpm: Vpm::default(),
            tlb: TileBuffer::default(),
            semaphores: [0; 16],
            mutex: None,
            qpus: Vec::new(),
            program,
            step_index: 0,
        }
    }

    /// Adds a QPU starting at the program base and reading uniforms from `unif_addr`.
    pub fn add_qpu(&mut self, unif_addr: u32) -> usize {
        let n = self.qpus.len();
        self.qpus
            .push(Qpu::new(n as u32, self.program.base, unif_addr));
        n
    }

    /// Runs every QPU round-robin until all have ended; `max_steps` bounds the total number of
    /// instructions executed.
    pub fn run(&mut self, max_steps: u64) -> Result<(), SimError> {
        let mut steps = 0u64;
        loop {
            let mut any_ran = false;
            let mut any_blocked = false;
            let mut blocked_at = (0, 0);
            for q in 0..self.qpus.len() {
                match self.step(q)? {
                    Step::Ran => {
                        any_ran = true;
                        steps += 1;
                        if steps > max_steps {
                            let qpu = &self.qpus[q];
                            return Err(self.error(q, qpu.pc, SimErrorKind::StepLimit(max_steps)));
                        }
                    }
                    Step::Blocked => {
                        any_blocked = true;
                        blocked_at = (q, self.qpus[q].pc);
                    }
                    Step::Halted => {}
                }
            }
            if !any_ran {
                if any_blocked {
                    return Err(self.error(blocked_at.0, blocked_at.1, SimErrorKind::Deadlock));
                }
                for q in self.qpus.iter_mut() {
                    q.flush();
                }
                return Ok(());
            }
        }
    }

    fn error(&self, q: usize, pc: u32, kind: SimErrorKind) -> SimError {
        SimError {
            qpu: q,
            index: (pc.wrapping_sub(self.program.base) / 8) as usize,
            pc,
            kind,
        }
    }

    /// Executes one instruction of QPU `q`.
    pub fn step(&mut self, q: usize) -> Result<Step, SimError> {
        if self.qpus[q].halted {
            return Ok(Step::Halted);
        }
        let pc = self.qpus[q].pc;
        self.step_inner(q).map_err(|k| self.error(q, pc, k))
    }

    fn step_inner(&mut self, q: usize) -> Result<Step, SimErrorKind> {
        self.step_index += 1;
        let Machine {
            mem,
            vpm,
            tlb,
            semaphores,
            mutex,
            qpus,
            program,
            ..
        } = self;
        let qpu = &mut qpus[q];
        let off = qpu.pc.wrapping_sub(program.base);
        let idx = (off / 8) as usize;
        if off % 8 != 0 || idx >= program.instrs.len() {
            return Err(SimErrorKind::PastEnd(qpu.pc));
        }
        let instr = program.instrs[idx];
        // An SFU result lands in r4 for the third instruction after the write.
        if let Some((vals, ready)) = qpu.sfu {
            if qpu.instructions >= ready {
                qpu.acc[4] = vals;
                qpu.sfu = None;
            }
        }
        qpu.threaded = program.threaded;
        let mut new_pending: [Option<RfWrite>; 2] = [None, None];
        let prev_branch = qpu.branch.take();
        let prev_end = qpu.end.take();
        let prev_switch = qpu.switch.take();
        let mut sx = Shared {
            mem,
            vpm,
            tlb,
            mutex,
            q,
        };
        match instr {
            Instr::Alu(a) => {
                exec_alu(qpu, &mut sx, &a, &mut new_pending)?;
            }
            Instr::LoadImm(l) => {
                if let LoadImmMode::Reserved(m) = l.mode {
                    return Err(SimErrorKind::ReservedLoadImm(m));
                }
                let mut vals = [0u32; 16];
                for (i, v) in vals.iter_mut().enumerate() {
                    *v = l.mode.lane_value(l.imm, i);
                }
                exec_imm(qpu, &mut sx, &l.w, &vals, &mut new_pending)?;
            }
            Instr::Semaphore(s) => {
                let n = s.number as usize;
                if s.acquire {
                    if semaphores[n] == 0 {
                        qpu.cycles += 1;
                        qpu.branch = prev_branch;
                        qpu.end = prev_end;
                        qpu.switch = prev_switch;
                        return Ok(Step::Blocked);
                    }
                    semaphores[n] -= 1;
                } else {
                    if semaphores[n] == 15 {
                        qpu.cycles += 1;
                        qpu.branch = prev_branch;
                        qpu.end = prev_end;
                        qpu.switch = prev_switch;
                        return Ok(Step::Blocked);
                    }
                    semaphores[n] += 1;
                }
                let vals = [s.imm(); 16];
                exec_imm(qpu, &mut sx, &s.w, &vals, &mut new_pending)?;
            }
            Instr::Branch(b) => {
                let taken = b.cond.taken(qpu.z, qpu.n, qpu.c);
                let link = qpu.pc.wrapping_add(32);
                if taken {
                    let mut target = if b.rel { link } else { 0 };
                    target = target.wrapping_add(b.imm as u32);
                    if b.reg {
                        if qpu.threaded && b.raddr_a >= 16 {
                            return Err(SimErrorKind::OtherThreadsRegister {
                                file_a: true,
                                reg: b.raddr_a,
                            });
                        }
                        target = target.wrapping_add(qpu.ra[b.raddr_a as usize][15]);
                    }
                    qpu.branch = Some((target, 3));
                }
                let w = WriteFields {
                    cond_add: Cond::Always,
                    cond_mul: Cond::Always,
                    ws: b.ws,
                    waddr_add: b.waddr_add,
                    waddr_mul: b.waddr_mul,
                    ..WriteFields::NONE
                };
                let vals = [link; 16];
                write_dst(
                    qpu,
                    &mut sx,
                    &w,
                    false,
                    &vals,
                    0xffff,
                    u32::MAX,
                    &mut new_pending,
                )?;
                write_dst(
                    qpu,
                    &mut sx,
                    &w,
                    true,
                    &vals,
                    0xffff,
                    u32::MAX,
                    &mut new_pending,
                )?;
            }
        }
        // Register-file writes of the previous instruction become visible now.
        qpu.flush();
        qpu.pending = new_pending;
        qpu.instructions += 1;
        qpu.cycles += 1;
        // Program flow: three branch delay slots, two thread-end delay slots.
        qpu.pc = qpu.pc.wrapping_add(8);
        if let Some((target, left)) = prev_branch {
            if qpu.branch.is_none() {
                if left == 1 {
                    qpu.pc = target;
                } else {
                    qpu.branch = Some((target, left - 1));
                }
            }
        }
        // A thread switch: two delay slots, then the state the switch does not keep is gone.
        match prev_switch {
            Some(1) => qpu.switch_threads(),
            Some(left) => qpu.switch = Some(left - 1),
            None => {
                if let Instr::Alu(a) = instr
                    && matches!(a.sig, Signal::ThreadSwitch | Signal::LastThreadSwitch)
                {
                    qpu.switch = Some(2);
                }
            }
        }
        match prev_end {
            Some(1) => {
                qpu.halted = true;
                qpu.flush();
            }
            Some(left) => qpu.end = Some(left - 1),
            None => {
                if let Instr::Alu(a) = instr {
                    if a.sig.is_program_end() {
                        qpu.end = Some(2);
                    }
                }
            }
        }
        Ok(Step::Ran)
    }
}

/// Shared machine parts a QPU touches during one step.
struct Shared<'a> {
    mem: &'a mut Memory,
    vpm: &'a mut Vpm,
    tlb: &'a mut TileBuffer,
    mutex: &'a mut Option<usize>,
    q: usize,
}

fn pop_uniform(qpu: &mut Qpu, mem: &Memory) -> Result<u32, SimErrorKind> {
    let v = mem
        .read_u32(qpu.unif_addr)
        .ok_or(SimErrorKind::Memory(qpu.unif_addr))?;
    qpu.unif_addr = qpu.unif_addr.wrapping_add(4);
    Ok(v)
}

/// Reads a register-file address (or I/O read address) once for this instruction.
fn read_raddr(
    qpu: &mut Qpu,
    sx: &mut Shared,
    raddr: u8,
    file_a: bool,
) -> Result<[u32; 16], SimErrorKind> {
    Ok(match raddr {
        16..=31 if qpu.threaded => {
            return Err(SimErrorKind::OtherThreadsRegister { file_a, reg: raddr });
        }
        0..=31 => {
            if file_a {
                qpu.ra[raddr as usize]
            } else {
                qpu.rb[raddr as usize]
            }
        }
        raddr::UNIFORM => [pop_uniform(qpu, sx.mem)?; 16],
        raddr::ELEMENT_QPU => {
            if file_a {
                std::array::from_fn(|i| i as u32)
            } else {
                [qpu.num; 16]
            }
        }
        // B: the fragment batch's primitive faces away (1) or not (0); A: the multisample
        // flags (kiln draws without multisampling: 0).
        raddr::MS_REV if !file_a => [qpu.rev_flag; 16],
        raddr::XY_COORD => std::array::from_fn(|i| {
            let (x, y) = tlb::lane_xy(qpu.frag_xy.0, qpu.frag_xy.1, i);
            if file_a { x } else { y }
        }),
        raddr::VPM => sx.vpm.read(&mut qpu.vpm),
        raddr::VARYING => match qpu.varyings.pop_front() {
            Some((v, c)) => {
                qpu.varying_c = Some(c);
                v
            }
            None => [0; 16],
        },
        raddr::MUTEX => {
            *sx.mutex = Some(sx.q);
            [0; 16]
        }
        _ => [0; 16],
    })
}

#[inline]
fn rotate(v: &[u32; 16], n: u32, full: bool) -> [u32; 16] {
    let n = n as usize & 15;
    std::array::from_fn(|i| {
        if full {
            v[(i + 16 - n) & 15]
        } else {
            v[(i & !3) | ((i + 16 - n) & 3)]
        }
    })
}

fn lane_mask(cond: Cond, z: u16, n: u16, c: u16) -> u16 {
    match cond {
        Cond::Never => 0,
        Cond::Always => 0xffff,
        Cond::Zs => z,
        Cond::Zc => !z,
        Cond::Ns => n,
        Cond::Nc => !n,
        Cond::Cs => c,
        Cond::Cc => !c,
    }
}

fn exec_alu(
    qpu: &mut Qpu,
    sx: &mut Shared,
    a: &AluInstr,
    pending: &mut [Option<RfWrite>; 2],
) -> Result<(), SimErrorKind> {
    if let AddOp::Undefined(n) = a.op_add {
        return Err(SimErrorKind::UndefinedOpcode(n));
    }
    if a.sig == Signal::Breakpoint {
        return Err(SimErrorKind::Breakpoint);
    }
    let muxes = [a.add_a, a.add_b, a.mul_a, a.mul_b];
    let uses_add = a.op_add != AddOp::Nop;
    let uses_mul = a.op_mul != MulOp::Nop;
    let used = |i: usize| if i < 2 { uses_add } else { uses_mul };
    if qpu.sfu.is_some() && (0..4).any(|i| used(i) && muxes[i] == Mux::R4) {
        return Err(SimErrorKind::R4TooEarly);
    }
    // Register-file and I/O reads happen whenever the read address is set.
    let va = read_raddr(qpu, sx, a.raddr_a, true)?;
    let small = a.sig == Signal::SmallImm;
    let vb = if small {
        [small_imm_read_value(a.raddr_b); 16]
    } else {
        read_raddr(qpu, sx, a.raddr_b, false)?
    };
    let fetch = |m: Mux, float: bool| -> [u32; 16] {
        let mut v = match m {
            Mux::A => va,
            Mux::B => vb,
            r => qpu.acc[r as usize],
        };
        if a.unpack != Unpack::None {
            if m == Mux::A && !a.w.pm {
                for x in v.iter_mut() {
                    *x = alu::unpack_a(a.unpack, *x, float);
                }
            } else if m == Mux::R4 && a.w.pm {
                for x in v.iter_mut() {
                    *x = alu::unpack_r4(a.unpack, *x);
                }
            }
        }
        v
    };
    let add_float = alu::add_reads_float(a.op_add);
    let mul_float = a.op_mul == MulOp::Fmul;
    let zero = [0u32; 16];
    let mut ops = Operands {
        add_a: if uses_add {
            fetch(a.add_a, add_float)
        } else {
            zero
        },
        add_b: if uses_add {
            fetch(a.add_b, add_float)
        } else {
            zero
        },
        mul_a: if uses_mul {
            fetch(a.mul_a, mul_float)
        } else {
            zero
        },
        mul_b: if uses_mul {
            fetch(a.mul_b, mul_float)
        } else {
            zero
        },
    };
    // Mul-input rotation (small immediate 48–63): full for r0–r3, per quad otherwise.
    if small && a.raddr_b >= 48 {
        let n = if a.raddr_b == 48 {
            qpu.acc[5][0] & 15
        } else {
            (a.raddr_b - 48) as u32
        };
        if a.mul_a != Mux::B {
            ops.mul_a = rotate(&ops.mul_a, n, (a.mul_a as u8) <= 3);
        }
        if a.mul_b != Mux::B {
            ops.mul_b = rotate(&ops.mul_b, n, (a.mul_b as u8) <= 3);
        }
    }
    if let Some(c) = qpu.varying_c.take() {
        qpu.acc[5] = c;
    }
    let mut add_r = [LaneResult::default(); 16];
    let mut mul_r = [LaneResult::default(); 16];
    if uses_add {
        alu::add_vec(a.op_add, &ops.add_a, &ops.add_b, &mut add_r);
    }
    if uses_mul {
        alu::mul_vec(a.op_mul, &ops.mul_a, &ops.mul_b, &mut mul_r);
    }
    let (z, n, c) = (qpu.z, qpu.n, qpu.c);
    let add_lanes = if uses_add {
        lane_mask(a.w.cond_add, z, n, c)
    } else {
        0
    };
    let mul_lanes = if uses_mul {
        lane_mask(a.w.cond_mul, z, n, c)
    } else {
        0
    };
    // Flags from the add result, else the mul result, in the lanes written.
    if a.w.sf {
        let (res, lanes) = if uses_add {
            (&add_r, add_lanes)
        } else {
            (&mul_r, mul_lanes)
        };
        set_flags(qpu, res, lanes);
    }
    // Writes (pack: pm = 0 on the file-A side register write, pm = 1 on the mul result).
    for is_mul in [false, true] {
        let (uses, res, lanes) = if is_mul {
            (uses_mul, &mul_r, mul_lanes)
        } else {
            (uses_add, &add_r, add_lanes)
        };
        if !uses || lanes == 0 {
            continue;
        }
        let waddr = if is_mul { a.w.waddr_mul } else { a.w.waddr_add };
        let is_a = is_mul == a.w.ws;
        let mut vals = [0u32; 16];
        let mut mask = u32::MAX;
        if a.w.pm && is_mul {
            for i in 0..16 {
                let (v, m) = alu::pack_mul(a.w.pack, res[i].value);
                vals[i] = v;
                mask = m;
            }
        } else if !a.w.pm && is_a && waddr < 32 && a.w.pack != 0 {
            let float = if is_mul {
                a.op_mul == MulOp::Fmul
            } else {
                alu::add_writes_float(a.op_add)
            };
            for i in 0..16 {
                let (v, m) = alu::pack_a(a.w.pack, res[i], float);
                vals[i] = v;
                mask = m;
            }
        } else {
            for i in 0..16 {
                vals[i] = res[i].value;
            }
        }
        write_dst(qpu, sx, &a.w, is_mul, &vals, lanes, mask, pending)?;
    }
    // Signals.
    match a.sig {
        Signal::LoadTmu0 | Signal::LoadTmu1 => {
            let t = if a.sig == Signal::LoadTmu0 { 0 } else { 1 };
            let (vals, ready) = qpu.tmu[t]
                .fifo
                .pop_front()
                .ok_or(SimErrorKind::TmuFifoEmpty(t))?;
            if ready > qpu.cycles {
                qpu.cycles = ready;
            }
            qpu.acc[4] = vals;
        }
        Signal::ColorLoad | Signal::ColorLoadEnd => {
            let (x0, y0) = qpu.frag_xy;
            qpu.acc[4] = std::array::from_fn(|i| {
                let (x, y) = tlb::lane_xy(x0, y0, i);
                sx.tlb.color_at(x, y)
            });
        }
        Signal::CoverageLoad | Signal::AlphaMaskLoad => qpu.acc[4] = [0xffff_ffff; 16],
        _ => {}
    }
    Ok(())
}

fn set_flags(qpu: &mut Qpu, res: &[LaneResult; 16], lanes: u16) {
    let (mut z, mut n, mut c) = (0u16, 0u16, 0u16);
    for (i, r) in res.iter().enumerate() {
        let (zz, nn) = alu::zn(r.value);
        z |= (zz as u16) << i;
        n |= (nn as u16) << i;
        c |= (r.carry as u16) << i;
    }
    qpu.z = (qpu.z & !lanes) | (z & lanes);
    qpu.n = (qpu.n & !lanes) | (n & lanes);
    qpu.c = (qpu.c & !lanes) | (c & lanes);
}

/// Load immediate / semaphore writes: the same value to both destinations.
fn exec_imm(
    qpu: &mut Qpu,
    sx: &mut Shared,
    w: &WriteFields,
    vals: &[u32; 16],
    pending: &mut [Option<RfWrite>; 2],
) -> Result<(), SimErrorKind> {
    let (z, n, c) = (qpu.z, qpu.n, qpu.c);
    let add_lanes = lane_mask(w.cond_add, z, n, c);
    let mul_lanes = lane_mask(w.cond_mul, z, n, c);
    if w.sf {
        let res: [LaneResult; 16] = std::array::from_fn(|i| LaneResult {
            value: vals[i],
            carry: false,
            wide: vals[i] as i32 as i64,
        });
        set_flags(qpu, &res, add_lanes);
    }
    for (is_mul, lanes) in [(false, add_lanes), (true, mul_lanes)] {
        if lanes == 0 {
            continue;
        }
        let waddr = if is_mul { w.waddr_mul } else { w.waddr_add };
        let is_a = is_mul == w.ws;
        let mut out = *vals;
        let mut mask = u32::MAX;
        if w.pm && is_mul {
            for v in out.iter_mut() {
                let (p, m) = alu::pack_mul(w.pack, *v);
                *v = p;
                mask = m;
            }
        } else if !w.pm && is_a && waddr < 32 && w.pack != 0 {
            for v in out.iter_mut() {
                let r = LaneResult {
                    value: *v,
                    carry: false,
                    wide: *v as i32 as i64,
                };
                let (p, m) = alu::pack_a(w.pack, r, false);
                *v = p;
                mask = m;
            }
        }
        write_dst(qpu, sx, w, is_mul, &out, lanes, mask, pending)?;
    }
    Ok(())
}

/// Writes one unit's result to its destination address.
#[allow(clippy::too_many_arguments)]
fn write_dst(
    qpu: &mut Qpu,
    sx: &mut Shared,
    w: &WriteFields,
    is_mul: bool,
    vals: &[u32; 16],
    lanes: u16,
    mask: u32,
    pending: &mut [Option<RfWrite>; 2],
) -> Result<(), SimErrorKind> {
    let waddr = if is_mul { w.waddr_mul } else { w.waddr_add };
    let is_a = is_mul == w.ws;
    match waddr {
        16..=31 if qpu.threaded => {
            return Err(SimErrorKind::OtherThreadsRegister {
                file_a: is_a,
                reg: waddr,
            });
        }
        0..=31 => {
            pending[is_mul as usize] = Some(RfWrite {
                file_a: is_a,
                reg: waddr,
                vals: *vals,
                lanes,
                mask,
            });
        }
        waddr::R0..=waddr::R3 => {
            merge(&mut qpu.acc[(waddr - 32) as usize], vals, lanes, mask);
        }
        waddr::R5 => {
            // A side: each quad takes its first lane; B side: lane 0 to all lanes.
            let v: [u32; 16] = std::array::from_fn(|i| if is_a { vals[i & !3] } else { vals[0] });
            merge(&mut qpu.acc[5], &v, 0xffff, mask);
        }
        waddr::HOST_INT => qpu
            .host_int
            .push(vals[lanes.trailing_zeros() as usize & 15]),
        waddr::UNIFORMS_ADDRESS => qpu.unif_addr = vals[lanes.trailing_zeros() as usize & 15],
        waddr::TLB_STENCIL_SETUP => sx.tlb.stencil_setup = Some(vals[0]),
        waddr::TLB_Z => sx.tlb.write_z(qpu.frag_xy.0, qpu.frag_xy.1, vals, lanes),
        waddr::TLB_COLOR_MS | waddr::TLB_COLOR_ALL => {
            sx.tlb
                .write_color(qpu.frag_xy.0, qpu.frag_xy.1, vals, lanes)
        }
        waddr::VPM => sx.vpm.write(&mut qpu.vpm, vals, lanes),
        waddr::VPM_SETUP => {
            if is_a {
                vpm::write_read_setup(&mut qpu.vpm, vals[0]);
            } else {
                vpm::write_write_setup(&mut qpu.vpm, vals[0]);
            }
        }
        waddr::VPM_ADDR => {
            let r = if is_a {
                sx.vpm.dma_load(&qpu.vpm, sx.mem, vals[0])
            } else {
                sx.vpm.dma_store(&qpu.vpm, sx.mem, vals[0])
            };
            r.map_err(|vpm::VpmError::Memory(a)| SimErrorKind::Memory(a))?;
        }
        waddr::MUTEX_RELEASE => *sx.mutex = None,
        waddr::SFU_RECIP..=waddr::SFU_LOG => {
            let r: [u32; 16] = std::array::from_fn(|i| sfu::sfu(waddr, vals[i]));
            qpu.sfu = Some((r, qpu.instructions + 3));
        }
        waddr::TMU0_S..=waddr::TMU1_B => {
            let unit = ((waddr - 56) / 4) as usize;
            let reg = (waddr - 56) % 4;
            tmu_write(qpu, sx, unit, reg, vals)?;
        }
        _ => {} // nop, tmu_noswap, quad x/y, ms flags, alpha mask
    }
    Ok(())
}

fn tmu_write(
    qpu: &mut Qpu,
    sx: &mut Shared,
    unit: usize,
    reg: u8,
    vals: &[u32; 16],
) -> Result<(), SimErrorKind> {
    let building = qpu.tmu[unit].coords.iter().any(|c| c.is_some());
    if reg != 0 || building {
        // texture request: one configuration uniform per coordinate write
        let p = pop_uniform(qpu, sx.mem)?;
        qpu.tmu[unit].params.push(p);
    }
    if reg != 0 {
        qpu.tmu[unit].coords[reg as usize - 1] = Some(*vals);
        return Ok(());
    }
    if qpu.tmu[unit].fifo.len() >= TMU_FIFO_DEPTH {
        return Err(SimErrorKind::TmuFifoOverflow(unit));
    }
    let t = &mut qpu.tmu[unit];
    let mut out = [0u32; 16];
    if !building {
        for (o, a) in out.iter_mut().zip(vals.iter()) {
            *o = sx.mem.read_u32(*a & !3).ok_or(SimErrorKind::Memory(*a))?;
        }
    } else {
        let cfg = tmu::TexConfig::from_request(&t.params);
        let tc = t.coords[0].unwrap_or([0; 16]);
        let rc = t.coords[1].unwrap_or([0; 16]);
        for i in 0..16 {
            let [s, tt, r] = [vals[i], tc[i], rc[i]].map(f32::from_bits);
            let texel = if cfg.cube {
                tmu::sample_cube(sx.mem, &cfg, s, tt, r)
            } else {
                tmu::sample(sx.mem, &cfg, s, tt)
            };
            out[i] = texel.map_err(|e| match e {
                tmu::TmuError::Memory(a) => SimErrorKind::Memory(a),
                tmu::TmuError::UnsupportedFormat(t) => SimErrorKind::UnsupportedTexture(t),
            })?;
        }
    }
    t.coords = [None; 3];
    t.params.clear();
    t.fifo.push_back((out, qpu.cycles + TMU_LATENCY));
    Ok(())
}
