//! Branch delay slots filled from the branch target, after scheduling: where a branch's last
//! slots are `nop`s, they take copies of the target's first instructions and the branch goes
//! past the originals (the classic delay-slot filling from the target, as MIPS compilers and
//! Mesa's V3D scheduler do for jumps). Along the taken path the same instructions run in the
//! same order, minus the `nop`s; other paths to the target still run the originals. Code size
//! does not change; the taken path is up to three instructions shorter.
//!
//! A copy is a plain instruction: an ALU operation or load immediate with no signal but a
//! small immediate, reading no FIFO, stream or I/O address, writing registers only. Its
//! inputs must be ready where it now runs: its latencies are checked against the
//! instructions now before it (the branch, the slots, the code before the branch), and where
//! a branch target lies among those, against anything an unknown predecessor could have
//! written ([`worst_distance`]). The delay slots of a conditional branch also run where it
//! falls through, so a copy there sets no flags and writes only registers dead at the
//! fall-through and untouched by the slots before it.

use crate::emit::Origin;
use crate::rename::{Regs, write_bit};
use kiln_qpu::isa::effects::{self, Effect, Resource};
use kiln_qpu::isa::{BranchCond, Instr, Signal, latency, waddr};

/// The longest distance any access keeps (r4 after an SFU write, the uniforms address, the
/// TLB Z write): latencies between instructions this far apart always hold.
pub(crate) const MAX_DISTANCE: usize = 3;

/// Fills the trailing `nop` delay slots of the branches in `out` (scheduled code, relocated)
/// with copies of their targets' first instructions. `from` gives each instruction of `out`
/// the input instruction it came from and `live_in` the registers live before each input
/// instruction (for a conditional branch's fall-through). Returns how many slots it filled.
pub fn fill(
    out: &mut [Instr],
    origins: &mut [[Origin; 2]],
    from: &[Option<usize>],
    live_in: &[Regs],
) -> usize {
    let n = out.len();
    let target_of = |b: usize, br: &kiln_qpu::isa::Branch| -> Option<usize> {
        let t = b as i64 + 4 + br.imm as i64 / 8;
        (br.rel && !br.reg && br.imm % 8 == 0 && (0..n as i64).contains(&t)).then_some(t as usize)
    };
    // Positions that are branch targets or may become ones here (a target moves at most three
    // on), and delay slots of branches, thread switches and the program end (never copied:
    // they run where their own instruction decides).
    let mut maybe_target = vec![false; n + 1];
    let mut in_slot = vec![false; n];
    for (b, ins) in out.iter().enumerate() {
        if let Instr::Alu(a) = ins
            && matches!(
                a.sig,
                Signal::ThreadSwitch | Signal::LastThreadSwitch | Signal::ProgramEnd
            )
        {
            for s in in_slot.iter_mut().skip(b + 1).take(2) {
                *s = true;
            }
        }
        if let Instr::Branch(br) = ins {
            for s in in_slot.iter_mut().skip(b + 1).take(3) {
                *s = true;
            }
            if let Some(t) = target_of(b, br) {
                for m in maybe_target.iter_mut().skip(t).take(MAX_DISTANCE + 1) {
                    *m = true;
                }
            }
        }
    }
    // No branch may reach past the program end's instruction (into its delay slots).
    let copy_limit = out
        .iter()
        .rposition(|i| matches!(i, Instr::Alu(a) if a.sig == Signal::ProgramEnd))
        .unwrap_or(n);
    let mut effects_x = Vec::new();
    let mut effects_y = Vec::new();
    let mut filled = 0;
    for b in 0..n.saturating_sub(3) {
        let Instr::Branch(br) = out[b] else {
            continue;
        };
        if br.waddr_add != waddr::NOP || br.waddr_mul != waddr::NOP {
            continue;
        }
        let Some(t) = target_of(b, &br) else {
            continue;
        };
        if (b..=b + 4).contains(&t) {
            continue;
        }
        let free = out[b + 1..b + 4]
            .iter()
            .rev()
            .take_while(|i| i.is_nop())
            .count();
        if free == 0 {
            continue;
        }
        // What a copy may write: any register on the taken path alone; on both paths, a
        // register dead where the branch falls through and not written by the slots before.
        let conditional = br.cond != BranchCond::Always;
        let writable: Regs = if conditional {
            let Some(live) = from
                .get(b)
                .copied()
                .flatten()
                .and_then(|i| live_in.get(i + 4))
            else {
                continue;
            };
            let mut slot_writes: Regs = 0;
            for ins in &out[b + 1..b + 4 - free] {
                for w in effects::writes(ins) {
                    if let Some(bit) = write_bit(w.waddr, w.file_a) {
                        slot_writes |= 1 << bit;
                    }
                }
            }
            !(live | slot_writes)
        } else {
            !0
        };
        let mut k = 0;
        while k < free
            && t + k < copy_limit
            && !in_slot[t + k]
            && copyable(&out[t + k], conditional, writable)
        {
            k += 1;
        }
        // The most copies whose latencies hold where they now run, and in the order they
        // are written down: the instructions after the slots follow them (on the way a
        // conditional branch falls through; Mesa's validator reads the program in order).
        let first_slot = |k: usize| b + 4 - k;
        let Some(k) = (1..=k).rev().find(|&k| {
            let f = first_slot(k);
            // Before the copies: the three instructions there on this path (`None` where a
            // branch target between makes them unknown).
            let before: Vec<Option<Instr>> = (1..=MAX_DISTANCE)
                .rev()
                .map(|d| {
                    let pos = f.checked_sub(d)?;
                    (!(pos + 1..=b).any(|m| maybe_target[m])).then_some(out[pos])
                })
                .collect();
            let after: Vec<Instr> = out[t..(t + k + MAX_DISTANCE - 1).min(n)].to_vec();
            let slots: Vec<Option<Instr>> = (b + 1..b + 4)
                .map(|p| Some(if p < f { out[p] } else { out[t + p - f] }))
                .collect();
            let next = &out[b + 4..(b + 4 + MAX_DISTANCE - 1).min(n)];
            latencies_hold(&before, &after, &mut effects_x, &mut effects_y)
                && latencies_hold(&slots, next, &mut effects_x, &mut effects_y)
        }) else {
            continue;
        };
        let f = first_slot(k);
        for j in 0..k {
            out[f + j] = out[t + j];
            origins[f + j] = origins[t + j];
        }
        if let Instr::Branch(nb) = &mut out[b] {
            nb.imm += 8 * k as i32;
        }
        filled += k;
    }
    filled
}

/// Whether `ins` may run as a copy in a delay slot: plain, and (in a conditional branch's
/// slots) setting no flags and writing only registers in `writable`.
fn copyable(ins: &Instr, conditional: bool, writable: Regs) -> bool {
    let w = match ins {
        Instr::Alu(a) if matches!(a.sig, Signal::None | Signal::SmallImm) => a.w,
        Instr::LoadImm(l) => l.w,
        _ => return false,
    };
    if effects::takes_uniform(ins) || crate::schedule::has_io_read(ins) || (conditional && w.sf) {
        return false;
    }
    effects::writes(ins)
        .iter()
        .all(|w| write_bit(w.waddr, w.file_a).is_some_and(|bit| writable & (1 << bit) != 0))
}

/// The longest distance a write of `r` can make a reader keep, and a later writer of it.
fn worst_distance(r: Resource) -> (usize, usize) {
    match r {
        Resource::FileA(_) | Resource::FileB(_) => (latency::REGFILE, 1),
        Resource::R4 => (latency::SFU, latency::SFU),
        Resource::Uniforms | Resource::TlbZ => (MAX_DISTANCE, 1),
        _ => (1, 1),
    }
}

/// Whether every instruction of `after` (the copies, then what follows them at the target)
/// keeps its latencies after the `before` instructions (the last is the one just before
/// `after[0]`; `None`: unknown, which may have written anything).
fn latencies_hold(
    before: &[Option<Instr>],
    after: &[Instr],
    ex: &mut Vec<Effect>,
    ey: &mut Vec<Effect>,
) -> bool {
    for (p, x) in before.iter().enumerate() {
        if let Some(x) = x {
            ex.clear();
            effects::effects(x, ex);
        }
        for (q, y) in after.iter().enumerate() {
            let gap = before.len() - p + q;
            if gap >= MAX_DISTANCE {
                break;
            }
            ey.clear();
            effects::effects(y, ey);
            let holds = |e: &Effect| match x {
                None => {
                    let (read, write) = worst_distance(e.resource);
                    gap >= if e.write {
                        write
                    } else {
                        read.max(e.distance as usize)
                    }
                }
                Some(_) => ex
                    .iter()
                    .filter(|w| w.write && w.resource == e.resource)
                    .all(|w| crate::schedule::keeps(w, e, gap)),
            };
            if !ey.iter().all(holds) {
                return false;
            }
        }
    }
    true
}
