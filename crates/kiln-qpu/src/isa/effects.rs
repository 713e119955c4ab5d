//! What a QPU instruction reads and writes: registers, accumulators, r4, the flags, the uniform
//! stream and the peripherals' FIFOs (reference guide §"Summary of Instruction Restrictions";
//! Mesa `vc4_qpu_schedule.c`, `process_raddr_deps` / `process_waddr_deps`). One model, read by
//! the validator ([`super::validate`]), the emitter and the scheduler (`kiln-vc4`).

use super::fields::*;
use super::instr::*;
use super::latency;
use smallvec::{SmallVec, smallvec};

#[derive(Clone, Copy, Debug)]
pub struct Write {
    pub waddr: u8,
    /// For waddr < 32: true = file A.
    pub file_a: bool,
    pub cond: Cond,
}

/// The register and I/O writes of `i`: the add unit's, then the mul unit's.
pub fn writes(i: &Instr) -> SmallVec<[Write; 2]> {
    let branch;
    let (w, add, mul) = match i {
        Instr::Alu(a) => (&a.w, a.op_add != AddOp::Nop, a.op_mul != MulOp::Nop),
        Instr::LoadImm(l) => (&l.w, true, true),
        Instr::Semaphore(s) => (&s.w, true, true),
        Instr::Branch(b) => {
            branch = WriteFields {
                ws: b.ws,
                waddr_add: b.waddr_add,
                waddr_mul: b.waddr_mul,
                cond_add: Cond::Always,
                cond_mul: Cond::Always,
                ..WriteFields::NONE
            };
            (&branch, true, true)
        }
    };
    let none = Write {
        waddr: waddr::NOP,
        file_a: false,
        cond: Cond::Never,
    };
    let on_add = (add && w.waddr_add != waddr::NOP).then_some(Write {
        waddr: w.waddr_add,
        file_a: !w.ws,
        cond: w.cond_add,
    });
    let on_mul = (mul && w.waddr_mul != waddr::NOP).then_some(Write {
        waddr: w.waddr_mul,
        file_a: w.ws,
        cond: w.cond_mul,
    });
    // Built whole: no push's capacity checks on this hot path.
    match (on_add, on_mul) {
        (Some(a), Some(m)) => SmallVec::from_buf([a, m]),
        (Some(x), None) | (None, Some(x)) => SmallVec::from_buf_and_len([x, none], 1),
        (None, None) => SmallVec::from_buf_and_len([none, none], 0),
    }
}

/// The addresses `i` writes, the add unit's then the mul unit's, `waddr::NOP` for a unit
/// that writes nothing: [`writes`] without the files and conditions, for the tests that look
/// at addresses alone.
#[inline]
pub fn write_addrs(i: &Instr) -> [u8; 2] {
    let (w_add, w_mul, add, mul) = match i {
        Instr::Alu(a) => (
            a.w.waddr_add,
            a.w.waddr_mul,
            a.op_add != AddOp::Nop,
            a.op_mul != MulOp::Nop,
        ),
        Instr::LoadImm(l) => (l.w.waddr_add, l.w.waddr_mul, true, true),
        Instr::Semaphore(s) => (s.w.waddr_add, s.w.waddr_mul, true, true),
        Instr::Branch(b) => (b.waddr_add, b.waddr_mul, true, true),
    };
    [
        if add { w_add } else { waddr::NOP },
        if mul { w_mul } else { waddr::NOP },
    ]
}

pub fn writes_addr(i: &Instr, w: u8) -> bool {
    w != waddr::NOP && write_addrs(i).contains(&w)
}

/// Whether `a`'s mul operation is a vector rotation (a small immediate 48–63): it reads
/// accumulators only, no sooner than the second instruction after their write.
pub fn is_rotation(a: &AluInstr) -> bool {
    a.sig == Signal::SmallImm && a.raddr_b >= 48 && a.op_mul != MulOp::Nop
}

/// Whether `a` rotates by r5 (small immediate 48), which reads r5.
pub fn rotates_by_r5(a: &AluInstr) -> bool {
    a.raddr_b == 48 && is_rotation(a)
}

/// Muxes used by non-nop ops.
pub fn used_muxes(a: &AluInstr) -> SmallVec<[Mux; 4]> {
    let mut m = SmallVec::new();
    if a.op_add != AddOp::Nop {
        m.push(a.add_a);
        if !a.op_add.is_unary() {
            m.push(a.add_b);
        }
    }
    if a.op_mul != MulOp::Nop {
        m.push(a.mul_a);
        m.push(a.mul_b);
    }
    m
}

/// Whether an operation of `a` reads input mux `m` ([`used_muxes`] contains it), without
/// making the list.
pub fn reads_mux(a: &AluInstr, m: Mux) -> bool {
    (a.op_add != AddOp::Nop && (a.add_a == m || (!a.op_add.is_unary() && a.add_b == m)))
        || (a.op_mul != MulOp::Nop && (a.mul_a == m || a.mul_b == m))
}

/// Register-file reads (file A register, file B register) used by the instruction.
pub fn regfile_reads(i: &Instr) -> (Option<u8>, Option<u8>) {
    match i {
        Instr::Alu(a) => {
            let ra = (reads_mux(a, Mux::A) && a.raddr_a < 32).then_some(a.raddr_a);
            let rb = (reads_mux(a, Mux::B) && a.sig != Signal::SmallImm && a.raddr_b < 32)
                .then_some(a.raddr_b);
            (ra, rb)
        }
        Instr::Branch(b) if b.reg => (Some(b.raddr_a), None),
        _ => (None, None),
    }
}

/// Read addresses encoded (I/O reads happen whether or not a mux uses them).
pub fn io_reads(i: &Instr) -> SmallVec<[u8; 2]> {
    match i {
        Instr::Alu(a) => {
            let mut v = smallvec![a.raddr_a];
            if a.sig != Signal::SmallImm {
                v.push(a.raddr_b);
            }
            v
        }
        _ => SmallVec::new(),
    }
}

/// Whether `i` takes the next uniform: a read of the uniform address (encoded, used or not), or
/// a TMU coordinate write (which takes a configuration uniform).
pub fn takes_uniform(i: &Instr) -> bool {
    reads_io(i, raddr::UNIFORM)
        || write_addrs(i)
            .iter()
            .any(|w| (waddr::TMU0_S..=waddr::TMU1_B).contains(w))
}

/// Whether `i` encodes read address `r` (what [`io_reads`] lists).
pub fn reads_io(i: &Instr, r: u8) -> bool {
    match i {
        Instr::Alu(a) => a.raddr_a == r || (a.sig != Signal::SmallImm && a.raddr_b == r),
        _ => false,
    }
}

pub fn reads_r4(i: &Instr) -> bool {
    match i {
        Instr::Alu(a) => reads_mux(a, Mux::R4),
        _ => false,
    }
}

pub fn sig(i: &Instr) -> Option<Signal> {
    i.signal()
}

pub fn writes_sfu(i: &Instr) -> bool {
    write_addrs(i).iter().any(|&w| waddr::is_sfu(w))
}

pub fn loads_r4_signal(i: &Instr) -> bool {
    matches!(
        sig(i),
        Some(Signal::LoadTmu0 | Signal::LoadTmu1 | Signal::ColorLoad | Signal::ColorLoadEnd)
    )
}

/// TLB accesses (implicit scoreboard wait): TLB writes and TLB load signals.
pub fn is_tlb(i: &Instr) -> bool {
    write_addrs(i).iter().any(|&w| waddr::is_tlb(w))
        || matches!(
            sig(i),
            Some(
                Signal::ColorLoad
                    | Signal::ColorLoadEnd
                    | Signal::CoverageLoad
                    | Signal::AlphaMaskLoad
            )
        )
}

pub fn peripheral_accesses(i: &Instr) -> usize {
    let mut n = write_addrs(i)
        .iter()
        .filter(|&&w| matches!(w, 44..=46) || waddr::is_sfu(w) || (56..=63).contains(&w))
        .count();
    if let Instr::Alu(a) = i {
        n += (a.raddr_a == raddr::MUTEX) as usize
            + (a.sig != Signal::SmallImm && a.raddr_b == raddr::MUTEX) as usize;
    }
    if matches!(
        sig(i),
        Some(Signal::LoadTmu0 | Signal::LoadTmu1 | Signal::ColorLoad | Signal::ColorLoadEnd)
    ) {
        n += 1;
    }
    if matches!(i, Instr::Semaphore(_)) {
        n += 1;
    }
    n
}

/// A resource the scheduler orders accesses to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    FileA(u8),
    FileB(u8),
    /// r0–r3 and r5.
    Acc(u8),
    /// SFU, TMU and TLB results.
    R4,
    Flags,
    /// The uniform stream's position (a uniforms-address write moves it).
    Uniforms,
    /// TMU requests and results, in order.
    Tmu,
    /// The tile buffer and the scoreboard.
    Tlb,
    /// The TLB Z write, which the multisample flags read after.
    TlbZ,
    Vpm,
    /// The varying FIFO.
    Varyings,
    /// The mutex and the semaphores.
    Mutex,
    /// Anything else a write has effects on (the host interrupt).
    Host,
}

impl Resource {
    /// How many resources [`Resource::index`] numbers.
    pub const COUNT: usize = 79;

    /// A dense number, below [`Resource::COUNT`].
    pub fn index(self) -> usize {
        match self {
            Resource::FileA(r) => r as usize & 31,
            Resource::FileB(r) => 32 + (r as usize & 31),
            Resource::Acc(r) => 64 + (r as usize).min(4),
            Resource::R4 => 69,
            Resource::Flags => 70,
            Resource::Uniforms => 71,
            Resource::Tmu => 72,
            Resource::Tlb => 73,
            Resource::TlbZ => 74,
            Resource::Vpm => 75,
            Resource::Varyings => 76,
            Resource::Mutex => 77,
            Resource::Host => 78,
        }
    }

    /// Registers (file A or B, r0–r5 but r4) are read before an instruction writes: one
    /// instruction may read a register another of its operations writes, or r5 beside a
    /// varying read, which loads r5 after (Mesa's `fadd r3, r0, r5 ; fmul r1, vary, ra15`).
    pub fn read_before_write(self) -> bool {
        matches!(
            self,
            Resource::FileA(_) | Resource::FileB(_) | Resource::Acc(_)
        )
    }
}

/// One access: a read needs `distance` instructions since the last write at least (1 = the
/// next instruction may read); a write makes readers wait `distance` instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Effect {
    pub resource: Resource,
    pub write: bool,
    pub distance: u8,
}

impl Effect {
    fn read(resource: Resource) -> Effect {
        Effect {
            resource,
            write: false,
            distance: 1,
        }
    }
    fn write(resource: Resource, distance: usize) -> Effect {
        Effect {
            resource,
            write: true,
            distance: distance as u8,
        }
    }
}

/// What input mux `m` of `a` reads: r4, an accumulator, or the file register its read address
/// names (`None` for a read address that is no register: a small immediate, an I/O read).
pub fn mux_resource(m: Mux, a: &AluInstr) -> Option<Resource> {
    match m {
        Mux::R4 => Some(Resource::R4),
        Mux::A if a.raddr_a < 32 => Some(Resource::FileA(a.raddr_a)),
        Mux::B if a.sig != Signal::SmallImm && a.raddr_b < 32 => Some(Resource::FileB(a.raddr_b)),
        Mux::A | Mux::B => None,
        r => Some(Resource::Acc(r as u8)),
    }
}

/// An instruction's effects as they are found: reads go straight to the caller's list, writes
/// wait here and follow them (reads first, each kind in the order found — what a stable sort
/// by `write` would give, without sorting). Without `READS`, the reads are not kept.
struct Found<'a, const READS: bool> {
    reads: &'a mut Vec<Effect>,
    writes: [Effect; 16],
    n: usize,
}

impl<const READS: bool> Found<'_, READS> {
    #[inline]
    fn read(&mut self, resource: Resource) {
        if READS {
            self.reads.push(Effect::read(resource));
        }
    }

    #[inline]
    fn write(&mut self, resource: Resource, distance: usize) {
        self.writes[self.n] = Effect::write(resource, distance);
        self.n += 1;
    }
}

/// A read address's effects beyond a register read: the uniform stream, FIFOs, the mutex.
#[inline]
fn raddr_effects<const READS: bool>(r: u8, out: &mut Found<READS>) {
    match r {
        raddr::UNIFORM => out.read(Resource::Uniforms),
        raddr::VARYING => {
            out.write(Resource::Varyings, 1);
            out.write(Resource::Acc(5), latency::ACCUMULATOR);
        }
        raddr::MS_REV => out.read(Resource::TlbZ),
        raddr::VPM | raddr::VPM_BUSY | raddr::VPM_WAIT => out.write(Resource::Vpm, 1),
        raddr::MUTEX => out.write(Resource::Mutex, 1),
        _ => {}
    }
}

/// A write address's resource and the distance its readers keep.
#[inline]
fn waddr_effects<const READS: bool>(waddr: u8, file_a: bool, cond: Cond, out: &mut Found<READS>) {
    let (resource, distance) = match waddr {
        0..=31 if file_a => (Resource::FileA(waddr), latency::REGFILE),
        0..=31 => (Resource::FileB(waddr), latency::REGFILE),
        waddr::R0..=waddr::R3 => (Resource::Acc(waddr - waddr::R0), latency::ACCUMULATOR),
        waddr::R5 => (Resource::Acc(5), latency::ACCUMULATOR),
        waddr::NOP => return,
        waddr::UNIFORMS_ADDRESS => (Resource::Uniforms, 3),
        waddr::TLB_Z => {
            out.write(Resource::Tlb, 1);
            (Resource::TlbZ, 3)
        }
        waddr::QUAD_XY | waddr::MS_FLAGS | 43..=47 => (Resource::Tlb, 1),
        waddr::VPM..=waddr::VPM_ADDR => (Resource::Vpm, 1),
        waddr::MUTEX_RELEASE => (Resource::Mutex, 1),
        w if waddr::is_sfu(w) => (Resource::R4, latency::SFU),
        w if waddr::is_tmu(w) => {
            if (waddr::TMU0_S..=waddr::TMU1_B).contains(&w) {
                out.read(Resource::Uniforms);
            }
            (Resource::Tmu, 1)
        }
        _ => (Resource::Host, 1),
    };
    out.write(resource, distance);
    // A conditional write reads the flags. It keeps the old value in the other lanes, but
    // does not read it through a read port: the writes to one register stay in order (write
    // after write), and a later reader waits on the last.
    if !matches!(cond, Cond::Always | Cond::Never) {
        out.read(Resource::Flags);
    }
}

/// Appends what `i` reads, then what it writes, to `out`. Branches, semaphores and the
/// thread signals have effects on control that no resource describes: schedulers keep them
/// in place.
pub fn effects(i: &Instr, out: &mut Vec<Effect>) {
    collect::<true>(i, out);
}

/// The writes of [`effects`] alone, in its order, appended to `out`: what a scheduler records
/// of an instruction it has placed.
pub fn write_effects(i: &Instr, out: &mut Vec<Effect>) {
    collect::<false>(i, out);
}

/// [`effects`], or with `READS` false its writes alone.
#[inline]
fn collect<const READS: bool>(i: &Instr, out: &mut Vec<Effect>) {
    let mut found = Found::<READS> {
        reads: out,
        writes: [Effect::read(Resource::Host); 16],
        n: 0,
    };
    let out = &mut found;
    if let Instr::Alu(a) = i {
        // A rotation (a mul with small immediate 48–63) reads its accumulators, and r5 for a
        // rotation by r5, no sooner than the second instruction after their write.
        if READS {
            let rotation = is_rotation(a);
            let mut mux = |m: Mux, rotated: bool| {
                if let Some(resource) = mux_resource(m, a) {
                    let mut e = Effect::read(resource);
                    if rotated && matches!(resource, Resource::Acc(_)) {
                        e.distance = 2;
                    }
                    out.reads.push(e);
                }
            };
            if a.op_add != AddOp::Nop {
                mux(a.add_a, false);
                if !a.op_add.is_unary() {
                    mux(a.add_b, false);
                }
            }
            if a.op_mul != MulOp::Nop {
                mux(a.mul_a, rotation);
                mux(a.mul_b, rotation);
            }
            if rotates_by_r5(a) {
                out.reads.push(Effect {
                    distance: 2,
                    ..Effect::read(Resource::Acc(5))
                });
            }
        }
        raddr_effects(a.raddr_a, out);
        if a.sig != Signal::SmallImm {
            raddr_effects(a.raddr_b, out);
        }
        match a.sig {
            Signal::LoadTmu0 | Signal::LoadTmu1 => {
                out.write(Resource::Tmu, 1);
                out.write(Resource::R4, 1);
            }
            s if s.loads_r4() => {
                out.write(Resource::Tlb, 1);
                out.write(Resource::R4, 1);
            }
            Signal::ScoreboardWait | Signal::ScoreboardUnlock => out.write(Resource::Tlb, 1),
            _ => {}
        }
    }
    if let Instr::Alu(AluInstr { w, .. }) | Instr::LoadImm(LoadImm { w, .. }) = i
        && w.sf
    {
        // Flags are set in the lanes written only: the others keep theirs.
        out.read(Resource::Flags);
        out.write(Resource::Flags, 1);
    }
    for w in writes(i) {
        waddr_effects(w.waddr, w.file_a, w.cond, out);
    }
    if matches!(i, Instr::Semaphore(_)) {
        out.write(Resource::Mutex, 1);
    }
    // Reads first.
    let Found { reads, writes, n } = found;
    reads.extend_from_slice(&writes[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::decode;

    /// `reads_mux` is membership in `used_muxes`, on decoded random words.
    #[test]
    fn reads_mux_is_membership_in_the_muxes_used() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut alu = 0;
        for _ in 0..20_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let Instr::Alu(a) = decode(s) else { continue };
            alu += 1;
            let used = used_muxes(&a);
            for m in Mux::ALL {
                assert_eq!(reads_mux(&a, m), used.contains(&m), "{s:#x} {m:?}");
            }
        }
        assert!(alu > 1000, "{alu} ALU instructions");
    }

    /// `write_effects` is the writes of `effects`, in their order, on decoded random words of
    /// every kind.
    #[test]
    fn write_effects_are_the_writes_of_effects() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let (mut all, mut some) = (Vec::new(), Vec::new());
        let mut writing = 0;
        for _ in 0..50_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let i = decode(s);
            all.clear();
            some.clear();
            effects(&i, &mut all);
            write_effects(&i, &mut some);
            let writes: Vec<Effect> = all.iter().copied().filter(|e| e.write).collect();
            assert_eq!(some, writes, "{s:#x}");
            writing += !some.is_empty() as u32;
        }
        assert!(writing > 10_000, "{writing} instructions that write");
    }
}
