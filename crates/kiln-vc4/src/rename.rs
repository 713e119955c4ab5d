//! Register renaming before scheduling: a value the allocator put in a register that an
//! earlier value also used, or that a later one reuses, gets a register nothing touches while
//! it lives, so that the scheduler's DAG has no write-after-read or write-after-write edge
//! between the two (the allocator knows nothing of the schedule; four accumulators are reused
//! constantly). After GCC's `regrename` and the post-pass renaming of classic list
//! schedulers; within straight-line code, on the QPU instructions, with liveness over the
//! program's control flow (`isa::validate::successors`).
//!
//! A value is renamed when it is written whole (no condition, no pack) by an ALU operation
//! or a load immediate, read only in the straight-line code after it (no branch or branch
//! target between), and its register is dead after its last read or written whole again. Its
//! new register is of the same kind — an accumulator r0–r3 for an accumulator, the same file
//! for a file register, so that read ports stay as they were — one no instruction of its life
//! reads or writes and that is dead after it. Accumulator values go first, each to the
//! accumulator used most recently: their false dependences are no longer this pass's to
//! remove (the scheduler renames them after scheduling, `crate::accumulators`), and packed
//! they leave accumulators free for the file values, which go second — into a free
//! accumulator where their readers allow, else to the file register least recently used.

use kiln_qpu::isa::effects::{self, Resource};
use kiln_qpu::isa::validate::block_starts;
use kiln_qpu::isa::{AddOp, Cond, Instr, MulOp, Mux, Signal, Unpack, waddr};

/// Registers as bits: file A 0–31, file B 32–63, r0–r3 64–67, r5 68 (never renamed).
pub type Regs = u128;

/// The register a resource of the effects model is, as a bit of [`Regs`].
pub(crate) fn bit(r: Resource) -> Option<u32> {
    match r {
        Resource::FileA(k) => Some(k as u32),
        Resource::FileB(k) => Some(32 + k as u32),
        Resource::Acc(k) if k < 4 => Some(64 + k as u32),
        Resource::Acc(5) => Some(R5),
        _ => None,
    }
}

/// What an instruction reads, writes whole, and writes in part (a partial write also reads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refs {
    pub(crate) reads: Regs,
    pub(crate) whole: Regs,
    pub(crate) part: Regs,
}

/// The bit of the register a write address names (in file A when `file_a`), or `None` for a
/// write that is an effect (a peripheral, the SFU, the TMU…).
pub(crate) fn write_bit(waddr: u8, file_a: bool) -> Option<u32> {
    match waddr {
        0..=31 if file_a => Some(waddr as u32),
        0..=31 => Some(32 + waddr as u32),
        waddr::R0..=waddr::R3 => Some(64 + (waddr - waddr::R0) as u32),
        waddr::R5 => Some(R5),
        _ => None,
    }
}

/// ra14 and rb14, the emitter's scratch registers: a value there may move, nothing moves in.
const SCRATCH: Regs = (1 << 14) | (1 << (32 + 14));

/// r5's bit.
pub(crate) const R5: u32 = 68;

/// What `i` reads, writes whole and writes in part, from its fields: the registers its
/// operations' muxes read (`effects::mux_resource` of each) and a rotation's
/// r5 — the effects model's register reads without the list of every resource, which the
/// tests check it against — and its writes.
pub(crate) fn refs(i: &Instr) -> Refs {
    let mut r = Refs::default();
    if let Instr::Alu(a) = i {
        // (The muxes `effects::used_muxes` lists, without making the list.)
        let mut read = |m: Mux| {
            if let Some(b) = effects::mux_resource(m, a).and_then(bit) {
                r.reads |= 1 << b;
            }
        };
        if a.op_add != AddOp::Nop {
            read(a.add_a);
            if !a.op_add.is_unary() {
                read(a.add_b);
            }
        }
        if a.op_mul != MulOp::Nop {
            read(a.mul_a);
            read(a.mul_b);
        }
        if effects::rotates_by_r5(a) {
            r.reads |= 1 << R5;
        }
    }
    let packs = match i {
        Instr::Alu(a) => a.w.pack != 0,
        Instr::LoadImm(l) => l.w.pack != 0,
        _ => false,
    };
    for w in effects::writes(i) {
        let Some(b) = write_bit(w.waddr, w.file_a) else {
            continue;
        };
        if packs || w.cond != Cond::Always {
            r.part |= 1 << b;
            r.reads |= 1 << b;
        } else {
            r.whole |= 1 << b;
        }
    }
    // A varying read also writes r5 (the varying's C coefficient).
    if effects::reads_io(i, kiln_qpu::isa::raddr::VARYING) {
        r.whole |= 1 << R5;
    }
    r
}

/// What each instruction of `code` reads and writes ([`refs`]).
pub fn refs_of(code: &[Instr]) -> Vec<Refs> {
    code.iter().map(refs).collect()
}

/// Renames registers in `code`, whose instructions read and write what `refs` says
/// ([`refs_of`]) and flow as `succ` says (`isa::validate::successors`); `live_at_end` are
/// registers read after the program ends (none for a shader; a test that looks at registers
/// names them); `known`: the registers live after each instruction ([`liveness`]) where a pass
/// before found them. Returns what the renamed code's instructions read and write and the
/// registers live after each, kept exact through the renaming.
pub fn rename(
    code: &mut [Instr],
    mut refs: Vec<Refs>,
    succ: &[kiln_qpu::isa::validate::Successors],
    live_at_end: Regs,
    known: Option<Vec<Regs>>,
) -> (Vec<Refs>, Vec<Regs>) {
    let n = code.len();
    let end = walk_ends(&block_starts(code), n);
    debug_assert!(
        known
            .as_ref()
            .is_none_or(|k| *k == liveness(&refs, succ, live_at_end)),
        "the liveness known is the code's"
    );
    let mut live_out = known.unwrap_or_else(|| liveness(&refs, succ, live_at_end));
    let allowed = movable(code);
    // Accumulator values first, packed; then file values, into the accumulators left free.
    for kind in [0xfu128 << 64, !(0xfu128 << 64)] {
        // Per register, the last instruction that read or wrote it.
        let mut last_ref: Vec<Option<usize>> = vec![None; 68];
        for i in 0..n {
            let r = refs[i];
            let renameable = match &code[i] {
                Instr::Alu(a) => !matches!(
                    a.sig,
                    Signal::ThreadSwitch | Signal::LastThreadSwitch | Signal::ProgramEnd
                ),
                Instr::LoadImm(_) => true,
                _ => false,
            };
            let mut whole = if renameable {
                r.whole & (allowed | SCRATCH) & kind
            } else {
                0
            };
            while whole != 0 {
                let b = whole.trailing_zeros();
                whole &= whole - 1;
                if let Some((x, last)) =
                    new_register(code, i, b, &refs, &end, &live_out, &last_ref, allowed)
                {
                    apply(code, &mut refs, &mut live_out, (i, last), b, x);
                }
            }
            let r = refs[i];
            let mut touched = r.reads | r.whole | r.part;
            while touched != 0 {
                let b = touched.trailing_zeros();
                touched &= touched - 1;
                if (b as usize) < last_ref.len() {
                    last_ref[b as usize] = Some(i);
                }
            }
        }
    }
    (refs, live_out)
}

/// Registers a value of `code` may move to: r0–r3 and the file registers but 13–15 of either
/// file (the execute mask, the colour being packed and the scratch registers, the payload),
/// in a threaded shader only the lower half of each file.
pub(crate) fn movable(code: &[Instr]) -> Regs {
    let threaded = code.iter().any(|i| {
        matches!(
            i.signal(),
            Some(Signal::ThreadSwitch | Signal::LastThreadSwitch)
        )
    });
    // Of each file's 32: all but 13–15, or in a threaded shader 0–12.
    let file: Regs = if threaded { 0x0000_1fff } else { 0xffff_1fff };
    (0xf << 64) | file | (file << 32)
}

/// Per instruction, the registers live after it.
pub(crate) fn liveness(
    refs: &[Refs],
    succ: &[kiln_qpu::isa::validate::Successors],
    live_at_end: Regs,
) -> Vec<Regs> {
    let n = refs.len();
    let mut live_in: Vec<Regs> = vec![0; n];
    let mut live_out: Vec<Regs> = vec![0; n];
    // Backward passes until the live-in each backward edge read is its target's at the pass's
    // end: a forward edge reads what this pass found, so every equation then holds, and the
    // iteration from nothing live has reached the least solution (one pass without a backward
    // edge, two for most loops — not a third only to see nothing change).
    let mut read_back: Vec<(usize, Regs)> = Vec::new();
    loop {
        read_back.clear();
        for i in (0..n).rev() {
            let mut out = if succ[i].is_empty() { live_at_end } else { 0 };
            for &s in &succ[i] {
                out |= live_in[s];
                if s <= i {
                    read_back.push((s, live_in[s]));
                }
            }
            live_out[i] = out;
            live_in[i] = refs[i].reads | (out & !refs[i].whole);
        }
        if read_back.iter().all(|&(s, seen)| live_in[s] == seen) {
            return live_out;
        }
    }
}

/// The longest a renamed value may live, in instructions (a bound on the search).
const SPAN: usize = 64;

/// Per instruction `i` of `n`, where the walk for a value it writes ends: the next branch
/// target (`joins`), at most [`SPAN`] instructions on, or the end.
fn walk_ends(joins: &[bool], n: usize) -> Vec<usize> {
    let mut end = vec![0; n];
    let mut next_join = n;
    for i in (0..n).rev() {
        end[i] = next_join.min(i + SPAN + 1);
        if joins[i] {
            next_join = i;
        }
    }
    end
}

/// A better register for the value instruction `i` writes whole to register bit `b`, and the
/// value's last read: its
/// reads end before any other write to `b`, branch or branch target, and `b` is dead after
/// them; the register chosen is touched by no instruction from `i` to the last read, dead
/// after it, and (for an accumulator) was last used more recently or (for a file register)
/// longer ago than `b`.
#[allow(clippy::too_many_arguments)]
fn new_register(
    code: &[Instr],
    i: usize,
    b: u32,
    refs: &[Refs],
    end: &[usize],
    live_out: &[Regs],
    last_ref: &[Option<usize>],
    allowed: Regs,
) -> Option<(u32, usize)> {
    let mask: Regs = 1 << b;
    let touched = |r: &Refs| r.reads | r.whole | r.part;
    // One walk: the last read, the registers touched from `i` to it, and whether every read
    // is an operation an accumulator can serve (a file-A unpack applies to file-A reads only).
    // (Past the window, a read left means the register is live after the last one seen.)
    let mut last_use = None;
    let (mut touched_so_far, mut touched_to_last) = (touched(&refs[i]), 0);
    let mut readers_operate = true;
    for (k, r) in refs.iter().enumerate().take(end[i]).skip(i + 1) {
        let t = touched(r);
        touched_so_far |= t;
        // (Most instructions of the walk do not touch `b`: one test for them.)
        if t & mask == 0 {
            continue;
        }
        if r.reads & mask != 0 {
            last_use = Some(k);
            touched_to_last = touched_so_far;
            readers_operate &=
                matches!(code[k], Instr::Alu(a) if b >= 32 || a.unpack == Unpack::None || a.w.pm);
        }
        if r.part & mask != 0 {
            return None;
        }
        if r.whole & mask != 0 {
            break;
        }
    }
    let last_use = last_use?;
    // Dead after its last read, or written anew by it.
    if live_out[last_use] & mask != 0 && refs[last_use].whole & mask == 0 {
        return None;
    }
    // The registers any instruction of the value's life touches.
    let busy: Regs = live_out[last_use] | touched_to_last;
    let same_kind: Regs = match b {
        0..32 => 0xffff_ffff,
        32..64 => 0xffff_ffff << 32,
        _ => 0xf << 64,
    };
    let mut free = same_kind & allowed & !busy;
    let age = |x: u32| last_ref[x as usize].map_or(usize::MAX, |l| i - l);
    let mut best = None;
    let mut best_age = age(b);
    while free != 0 {
        let x = free.trailing_zeros();
        free &= free - 1;
        let better = if b >= 64 {
            age(x) < best_age
        } else {
            age(x) > best_age
        };
        if better {
            best = Some(x);
            best_age = age(x);
        }
    }
    if b < 64 && !switches_within(code, i, last_use) {
        // A file register's value read only by operations is better in an accumulator: read
        // the next instruction, and through no read port.
        let mut accs = (0xf << 64) & allowed & !busy;
        let mut acc_best: Option<(u32, usize)> = None;
        while readers_operate && accs != 0 {
            let x = accs.trailing_zeros();
            accs &= accs - 1;
            if acc_best.is_none_or(|(_, a)| age(x) > a) {
                acc_best = Some((x, age(x)));
            }
        }
        if let Some((x, _)) = acc_best {
            best = Some(x);
        }
    }
    best.map(|x| (x, last_use))
}

/// Whether a thread switch takes effect between instruction `i` and `last` (after its
/// carrier's two delay slots): accumulators do not keep their values across one.
fn switches_within(code: &[Instr], i: usize, last: usize) -> bool {
    code[i.saturating_sub(2)..=last].iter().any(|c| {
        matches!(
            c.signal(),
            Some(Signal::ThreadSwitch | Signal::LastThreadSwitch)
        )
    })
}

/// Moves the value instruction `i` writes to register bit `b`, last read by instruction
/// `last`, into register bit `x`: the write and every read.
fn apply(
    code: &mut [Instr],
    refs: &mut [Refs],
    live_out: &mut [Regs],
    (i, last): (usize, usize),
    b: u32,
    x: u32,
) {
    let (from, to): (Regs, Regs) = (1 << b, 1 << x);
    match &mut code[i] {
        Instr::Alu(a) => retarget(&mut a.w, b, x),
        Instr::LoadImm(l) => retarget(&mut l.w, b, x),
        _ => {}
    }
    refs[i].whole = (refs[i].whole & !from) | to;
    for k in i..=last {
        if k > i && refs[k].reads & from != 0 {
            if let Instr::Alu(a) = &mut code[k] {
                reread(a, b, x);
            }
            refs[k].reads = (refs[k].reads & !from) | to;
        }
        if k < last {
            live_out[k] = (live_out[k] & !from) | to;
        }
    }
}

/// A write to register bit `b` now goes to `x` (of the same kind, or an accumulator for a
/// file register).
pub(crate) fn retarget(w: &mut kiln_qpu::isa::WriteFields, b: u32, x: u32) {
    let address = |r: u32| match r {
        0..64 => (r % 32) as u8,
        _ => waddr::R0 + (r - 64) as u8,
    };
    let (old, new) = (address(b), address(x));
    // The unit writing `old` to the file (or accumulator) `b` names.
    let add_file_a = !w.ws;
    if w.waddr_add == old && (b >= 64 || add_file_a == (b < 32)) {
        w.waddr_add = new;
    } else if w.waddr_mul == old {
        w.waddr_mul = new;
    }
}

/// An instruction's reads of register bit `b` now read `x` (of the same kind, an accumulator
/// for a file register, whose read address is then free, or a file register for an
/// accumulator, through a read address the caller found free).
pub(crate) fn reread(a: &mut kiln_qpu::isa::AluInstr, b: u32, x: u32) {
    let acc = |r: u32| Mux::from_bits((r - 64) as u8);
    let old = match b {
        0..32 => Mux::A,
        32..64 => Mux::B,
        _ => acc(b),
    };
    if b >= 64 && x < 64 {
        let new = if x < 32 {
            a.raddr_a = x as u8;
            Mux::A
        } else {
            a.raddr_b = (x - 32) as u8;
            Mux::B
        };
        for m in [&mut a.add_a, &mut a.add_b, &mut a.mul_a, &mut a.mul_b] {
            if *m == old {
                *m = new;
            }
        }
        return;
    }
    match x {
        0..32 => a.raddr_a = x as u8,
        32..64 => a.raddr_b = (x - 32) as u8,
        _ => {
            for m in [&mut a.add_a, &mut a.add_b, &mut a.mul_a, &mut a.mul_b] {
                if *m == old {
                    *m = acc(x);
                }
            }
            if b < 32 {
                a.raddr_a = kiln_qpu::isa::raddr::NOP;
            } else if b < 64 && a.sig != Signal::SmallImm {
                a.raddr_b = kiln_qpu::isa::raddr::NOP;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The liveness is the least solution of its equations, as passes until nothing
        /// changes find it, on random reads, writes and edges (backward ones, loops, among
        /// them).
        #[test]
        fn liveness_is_the_fixed_point_of_repeated_passes(
            code in proptest::collection::vec(
                (0u8..16, 0u8..16, proptest::collection::vec(0usize..64, 0..3)),
                1..40,
            ),
            live_at_end in 0u8..16,
        ) {
            let n = code.len();
            let refs: Vec<Refs> = code
                .iter()
                .map(|&(reads, whole, _)| Refs { reads: reads as Regs, whole: whole as Regs, part: 0 })
                .collect();
            let succ: Vec<kiln_qpu::isa::validate::Successors> = code
                .iter()
                .enumerate()
                .map(|(i, (_, _, to))| {
                    if i + 1 == n && to.is_empty() {
                        return Default::default();
                    }
                    let mut s: kiln_qpu::isa::validate::Successors =
                        to.iter().map(|&t| t % n).collect();
                    if s.is_empty() {
                        s.push(i + 1);
                    }
                    s
                })
                .collect();
            let end = live_at_end as Regs;
            let (mut live_in, mut want) = (vec![0 as Regs; n], vec![0 as Regs; n]);
            loop {
                let mut changed = false;
                for i in (0..n).rev() {
                    let mut out = if succ[i].is_empty() { end } else { 0 };
                    for &s in &succ[i] {
                        out |= live_in[s];
                    }
                    let inn = refs[i].reads | (out & !refs[i].whole);
                    changed |= out != want[i] || inn != live_in[i];
                    (want[i], live_in[i]) = (out, inn);
                }
                if !changed {
                    break;
                }
            }
            prop_assert_eq!(liveness(&refs, &succ, end), want);
        }
    }

    /// `refs` reads what the effects model says an instruction reads, on random words (every
    /// form, every mux, rotations by r5 among them).
    #[test]
    fn refs_read_what_the_effects_model_reads() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut list = Vec::new();
        let mut rotations = 0;
        for k in 0..200_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Every eighth word a rotation by r5 (a mul with small immediate 48).
            let w = if k % 8 == 0 {
                (s & !(0xf << 60) & !(0x3f << 12)) | (13 << 60) | (48 << 12)
            } else {
                s
            };
            let i = Instr::decode(w);
            if let Instr::Alu(a) = &i
                && effects::rotates_by_r5(a)
            {
                rotations += 1;
            }
            list.clear();
            effects::effects(&i, &mut list);
            let reads = list
                .iter()
                .filter(|e| !e.write)
                .filter_map(|e| bit(e.resource))
                .fold(0, |m: Regs, b| m | 1 << b);
            let r = refs(&i);
            // (A partial write reads the register too: the old value stays in some lanes.)
            assert_eq!(r.reads, reads | r.part, "{w:#x}: {i:?}");
        }
        assert!(rotations > 1000, "{rotations} rotations by r5");
    }
}
