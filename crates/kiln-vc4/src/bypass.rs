//! File-register results bypassed through an accumulator, after scheduling: where an
//! instruction writes a file register, a `nop` follows only because a file register is
//! readable from the second instruction after its write, and the next instruction reads it,
//! the result goes to an accumulator free there instead, the reader reads the accumulator,
//! and the `nop` goes. A value still read later is copied to its file register by the reader's
//! free unit (`mov rb5, r2` paired with it). The forwarding network of a classic pipeline,
//! done by the compiler because the QPU has none for its register files: the allocator puts
//! long-lived values in the files and knows nothing of where the schedule reads them.
//!
//! A candidate is `W; nop; R` in straight-line code — no branch target at the `nop` or R, W in
//! no delay slot (of a branch, thread switch or the program end: a slot's accumulator does not
//! reach the code after a switch, and a branch's slots run on the taken path too) — where W
//! writes the file register whole and unconditionally, R reads it with no file-A unpack and
//! does not write it in part, and an accumulator r0–r3 is dead after W and untouched by W and
//! R (liveness over the program's control flow, [`crate::rename`]'s). The copy pairs with R;
//! the instruction after R, which could not read the register yet, reads the accumulator too.
//! With the `nop` gone, every latency between instructions less than three apart around it
//! is checked again with the effects model ([`crate::schedule::latencies_hold`]); where a branch target
//! lies before W, an unknown way in may have written anything, and R reads nothing whose
//! latency is three (r4 after the SFU, the uniforms address, the TLB Z write).

use crate::emit::Origin;
use crate::rename::{Refs, Regs, liveness, refs_of};
use crate::schedule::{effects_of, latencies_hold};
use crate::target_slots::MAX_DISTANCE;
use kiln_qpu::isa::builder::{self, Reg};
use kiln_qpu::isa::effects::{self, Effect, Resource};
use kiln_qpu::isa::{
    AddOp, AluInstr, Cond, Instr, MulOp, Signal, Unpack, merge::merge, validate, waddr,
};

/// Bypasses what it can in `out` (scheduled, relocated code), whose instructions came from
/// `origins` and input instructions `from`; registers `live_at_end` are read after the
/// program. Every `nop` no latency needs any longer (after a rewrite before this, such as the
/// colour moved into an accumulator) goes as well. Returns how many `nop`s went.
pub fn bypass(
    out: &mut Vec<Instr>,
    origins: &mut Vec<[Origin; 2]>,
    from: &mut Vec<Option<usize>>,
    live_at_end: Regs,
) -> usize {
    let n = out.len();
    let starts = validate::block_starts(out);
    // Liveness only where a candidate's pattern is seen (most programs have none).
    let mut facts: Option<(Vec<Refs>, Vec<Regs>)> = None;
    let mut keep = vec![true; n];
    let mut removed = 0;
    // Instructions before this one may have changed.
    let mut edited = 0;
    let mut c = 0;
    while c < n {
        if c + 2 < n && file_write_read(out, c).is_some() {
            let (refs, live_out) = facts.get_or_insert_with(|| {
                let refs = refs_of(out);
                let live_out = liveness(&refs, &validate::successors(out), live_at_end);
                (refs, live_out)
            });
            if let Some(edit) = candidate(out, &keep, c, refs, live_out, &starts, edited) {
                if let Some((p, before)) = edit.before {
                    out[p] = before;
                }
                out[c] = edit.w;
                out[c + 2] = edit.r;
                if edit.copied {
                    origins[c + 2][1] = origins[c][0];
                }
                if let Some(next) = edit.next {
                    out[c + 3] = next;
                }
                keep[c + 1] = false;
                removed += 1;
                // R (and the one after it) has changed: what `refs` says of it is not true now,
                // and it is not the W, or the P, of another candidate.
                c += 3 + edit.next.is_some() as usize;
                edited = c;
                continue;
            }
        }
        if out[c].is_nop() && unneeded(out, &keep, c, &starts) {
            keep[c] = false;
            removed += 1;
        }
        c += 1;
    }
    if removed == 0 {
        return 0;
    }
    // New places, and the branches relocated (no target is a removed `nop`).
    let mut place = Vec::with_capacity(n + 1);
    let mut k = 0;
    for &kept in &keep {
        place.push(k);
        k += kept as usize;
    }
    place.push(k);
    for (b, ins) in out.iter_mut().enumerate() {
        if let Instr::Branch(br) = ins
            && br.rel
            && !br.reg
        {
            let t = b as i64 + 4 + br.imm as i64 / 8;
            if (0..=n as i64).contains(&t) {
                br.imm = 8 * (place[t as usize] as i32 - (place[b] as i32 + 4));
            }
        }
    }
    let mut it = keep.iter();
    out.retain(|_| *it.next().unwrap_or(&true));
    let mut it = keep.iter();
    origins.retain(|_| *it.next().unwrap_or(&true));
    let mut it = keep.iter();
    from.retain(|_| *it.next().unwrap_or(&true));
    removed
}

/// The (up to) three instructions before `c` as the code now runs, without the `nop`s gone.
fn kept_before(keep: &[bool], c: usize) -> Vec<usize> {
    let mut before: Vec<usize> = (0..c)
        .rev()
        .filter(|&k| keep[k])
        .take(MAX_DISTANCE)
        .collect();
    before.reverse();
    before
}

/// Whether an instruction's signal keeps it and the two after it in place (a thread switch,
/// the program end: the two are its delay slots).
fn switches(i: &Instr) -> bool {
    i.signal().is_some_and(crate::schedule::held)
}

/// Whether the `nop` at `p` can go: in straight-line code (no branch target at it, just before
/// or after it), in no delay slot, not among the first three instructions (no TLB access
/// there), and every latency around it holds without it.
fn unneeded(out: &[Instr], keep: &[bool], p: usize, starts: &[bool]) -> bool {
    let before = kept_before(keep, p);
    if p < MAX_DISTANCE
        || before.len() < MAX_DISTANCE
        || starts[p - 1..=p + 1].iter().any(|&s| s)
        || out[p.saturating_sub(3)..p]
            .iter()
            .any(|i| matches!(i, Instr::Branch(_)))
        || out[p.saturating_sub(2)..p].iter().any(switches)
        || out[..p]
            .iter()
            .rev()
            .take(2)
            .chain(out.get(p + 1))
            .any(|i| i.signal().is_some_and(|s| s.is_program_end()))
    {
        return false;
    }
    let hi = (p + 1 + MAX_DISTANCE).min(out.len());
    let order: Vec<Instr> = before
        .iter()
        .map(|&k| out[k])
        .chain(out[p + 1..hi].iter().copied())
        .collect();
    latencies_hold(&order)
}

/// The file register of bit `f` ([`crate::rename::bit`]'s numbering, below 64).
fn file_register(f: u32) -> Reg {
    if f < 32 {
        Reg::A(f as u8)
    } else {
        Reg::B((f - 32) as u8)
    }
}

/// At `c`, `W; nop; R` with R reading a file register W writes: the register's bit
/// ([`crate::rename::bit`]'s numbering).
fn file_write_read(out: &[Instr], c: usize) -> Option<u32> {
    if !out[c + 1].is_nop() {
        return None;
    }
    let (ra, rb) = effects::regfile_reads(&out[c + 2]);
    effects::writes(&out[c]).iter().find_map(|w| {
        let read = if w.file_a { ra } else { rb };
        (w.waddr < 32 && read == Some(w.waddr))
            .then_some(w.waddr as u32 + if w.file_a { 0 } else { 32 })
    })
}

/// A candidate made: W writing the accumulator, R reading it (and copying it back), and the
/// instruction after R reading it where it reads the register.
struct Edit {
    /// An instruction before W and what it becomes: it copies the register's old value (a
    /// conditional W).
    before: Option<(usize, Instr)>,
    w: Instr,
    r: Instr,
    next: Option<Instr>,
    copied: bool,
}

/// The candidate at `c`, made, if every condition holds; instructions before `edited` may have
/// changed since `refs` was found.
fn candidate(
    out: &[Instr],
    keep: &[bool],
    c: usize,
    refs: &[Refs],
    live_out: &[Regs],
    starts: &[bool],
    edited: usize,
) -> Option<Edit> {
    let f = file_write_read(out, c)?;
    let mask: Regs = 1 << f;
    let (w, r) = (&out[c], &out[c + 2]);
    let (Instr::Alu(_) | Instr::LoadImm(_), Instr::Alu(ra)) = (w, r) else {
        return None;
    };
    let before = kept_before(keep, c);
    let lo = before.first().copied().unwrap_or(c);
    // Straight-line code from W, W in no delay slot (of a branch, a thread switch or the
    // program end) and R not the end (which writes no file register).
    if starts[c + 1..=c + 2].iter().any(|&s| s)
        || out[lo..=c].iter().any(|i| matches!(i, Instr::Branch(_)))
        || out[c.saturating_sub(2)..=c].iter().any(switches)
        || out[c.saturating_sub(2)..=c + 2]
            .iter()
            .any(|i| i.signal().is_some_and(|s| s.is_program_end()))
    {
        return None;
    }
    // R reads it as an accumulator can serve and does not keep part of it.
    let servable = |a: &AluInstr| f >= 32 || a.unpack == Unpack::None || a.w.pm;
    if refs[c + 2].part & mask != 0 || !servable(ra) {
        return None;
    }
    if refs[c].whole & mask == 0 {
        return conditional(out, keep, c, f, (refs, live_out), starts, edited);
    }
    // The instruction after R, where it reads the register too (before the copy could be read).
    let next = match out.get(c + 3) {
        Some(Instr::Alu(a))
            if !starts[c + 3] && refs[c + 3].reads & mask != 0 && refs[c + 2].whole & mask == 0 =>
        {
            if !servable(a) {
                return None;
            }
            Some(c + 3)
        }
        _ => None,
    };
    let touched = |k: usize| refs[k].reads | refs[k].whole | refs[k].part;
    let busy = live_out[c] | touched(c) | touched(c + 2) | next.map_or(0, touched);
    let acc = (0..4u32).find(|&a| busy & (1 << (64 + a)) == 0)?;
    let x = 64 + acc;
    let mut new_w = *w;
    match &mut new_w {
        Instr::Alu(a) => crate::rename::retarget(&mut a.w, f, x),
        Instr::LoadImm(l) => crate::rename::retarget(&mut l.w, f, x),
        _ => return None,
    }
    let reading = |a: &AluInstr| {
        let mut a = *a;
        crate::rename::reread(&mut a, f, x);
        Instr::Alu(a)
    };
    let new_next = next.map(|k| match &out[k] {
        Instr::Alu(a) => reading(a),
        other => *other,
    });
    // Still read after the last reader changed (and not written whole by it): R copies it back.
    let last = next.unwrap_or(c + 2);
    let copied = live_out[last] & mask != 0 && refs[last].whole & mask == 0;
    let new_r = if copied {
        let mov = builder::mov(file_register(f), Reg::Acc(acc as u8)).ok()?;
        merge(&reading(ra), &Instr::Alu(mov))?
    } else {
        reading(ra)
    };
    // The order without the `nop`, from three before W to three after R; every pair less than
    // three apart keeps its latencies (farther apart, every one holds).
    let hi = (c + 3 + MAX_DISTANCE).min(out.len());
    let order: Vec<Instr> = before
        .iter()
        .map(|&k| out[k])
        .chain([new_w, new_r])
        .chain(new_next)
        .chain(out[c + 3 + next.is_some() as usize..hi].iter().copied())
        .collect();
    let holds = latencies_hold(&order);
    // A way in at a branch target before W: R, now two after the target's predecessor on it,
    // reads nothing a write keeps three instructions from.
    let entered = starts[lo + 1..=c].iter().any(|&s| s);
    let far = |e: &Effect| {
        !e.write
            && matches!(
                e.resource,
                Resource::R4 | Resource::Uniforms | Resource::TlbZ
            )
    };
    if !holds || (entered && effects_of(&new_r).iter().any(far)) {
        return None;
    }
    Some(Edit {
        before: None,
        w: new_w,
        r: new_r,
        next: new_next,
        copied,
    })
}

/// The candidate at `c` where W is a conditional move (`mov.ns ra13, 0`, the execute mask's
/// update before its test): one of the two instructions before W (P) also copies the
/// register's old value to the accumulator with its free unit, W's other unit makes the same
/// move to the accumulator, and R reads that. W still writes the register, so nothing is
/// copied back; from P to R the code is straight-line, nothing else writes the register, and
/// P reads it two or more after its last write (the latencies checked).
fn conditional(
    out: &[Instr],
    keep: &[bool],
    c: usize,
    f: u32,
    (refs, live_out): (&[Refs], &[Regs]),
    starts: &[bool],
    edited: usize,
) -> Option<Edit> {
    let mask: Regs = 1 << f;
    let (Instr::Alu(w), Instr::Alu(r)) = (&out[c], &out[c + 2]) else {
        return None;
    };
    // W: one move, no pack, unpack, flags or signal but a small immediate.
    let (cond, from, on_add) = match (w.op_add, w.op_mul) {
        (AddOp::Or, MulOp::Nop) if w.add_a == w.add_b => (w.w.cond_add, w.add_a, true),
        (AddOp::Nop, MulOp::V8min) if w.mul_a == w.mul_b => (w.w.cond_mul, w.mul_a, false),
        _ => return None,
    };
    if w.w.pack != 0
        || w.unpack != Unpack::None
        || w.w.sf
        || !matches!(w.sig, Signal::None | Signal::SmallImm)
        || matches!(cond, Cond::Always | Cond::Never)
    {
        return None;
    }
    let mut both = *w;
    let mut read = *r;
    let touched = |k: usize| refs[k].reads | refs[k].whole | refs[k].part;
    for p in (c.saturating_sub(2)..c).rev() {
        let Instr::Alu(pa) = out[p] else {
            return None;
        };
        if !keep[p]
            || p < edited
            || starts[p..=c + 2].iter().any(|&s| s)
            || out[p.saturating_sub(3)..=c]
                .iter()
                .any(|i| matches!(i, Instr::Branch(_)))
            || out[p.saturating_sub(2)..=c].iter().any(switches)
            || out[p.saturating_sub(2)..=c + 2]
                .iter()
                .any(|i| i.signal().is_some_and(|s| s.is_program_end()))
            || (refs[p].whole | refs[p].part) & mask != 0
        {
            return None;
        }
        let busy = (p..=c + 2).fold(live_out[p], |b, k| b | touched(k));
        let Some(acc) = (0..4u32).find(|&a| busy & (1 << (64 + a)) == 0) else {
            continue;
        };
        let copy = builder::mov(Reg::Acc(acc as u8), file_register(f)).ok()?;
        let Some(new_p) = merge(&Instr::Alu(pa), &Instr::Alu(copy)) else {
            continue;
        };
        if on_add {
            both.op_mul = MulOp::V8min;
            (both.mul_a, both.mul_b) = (from, from);
            both.w.waddr_mul = waddr::R0 + acc as u8;
            both.w.cond_mul = cond;
        } else {
            both.op_add = AddOp::Or;
            (both.add_a, both.add_b) = (from, from);
            both.w.waddr_add = waddr::R0 + acc as u8;
            both.w.cond_add = cond;
        }
        crate::rename::reread(&mut read, f, 64 + acc);
        let (new_w, new_r) = (Instr::Alu(both), Instr::Alu(read));
        let hi = (c + 3 + MAX_DISTANCE).min(out.len());
        let order: Vec<Instr> = kept_before(keep, p)
            .iter()
            .map(|&k| out[k])
            .chain([new_p])
            .chain(out[p + 1..c].iter().copied())
            .chain([new_w, new_r])
            .chain(out[c + 3..hi].iter().copied())
            .collect();
        return latencies_hold(&order).then_some(Edit {
            before: Some((p, new_p)),
            w: new_w,
            r: new_r,
            next: None,
            copied: false,
        });
    }
    None
}
