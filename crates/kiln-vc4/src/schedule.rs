//! The QPU scheduler: emitted code → regions of straight-line operations → a DAG per region
//! (`kiln_sched`, from the one effects model `kiln_qpu::isa::effects`) → list scheduling that
//! pairs an add-unit and a mul-unit operation into one instruction → finalize: the `nop`s a
//! latency still needs, branches relocated, the uniform table rewritten in the new order of its
//! reads. After Mesa's `vc4_qpu_schedule.c` (`calculate_deps`, `qpu_merge_inst` in
//! `vc4_qpu.c`, the uniform renumbering of `schedule_instructions`). The design is in
//! `docs/sched.md`.
//!
//! What stays in place: branches with their three delay slots, thread switches and the
//! program end with their two, and semaphores. Everything else between two of them, or between
//! branch targets, is a region; the emitter's hazard `nop`s there are dropped and the
//! latencies they kept are the DAG's. Across a region's start, a latency still running from
//! the code before holds the first instructions back (branch targets are reached after three
//! delay slots, longer than any latency, so only the fall-through matters; the copies
//! [`crate::target_slots`] puts in the slots later check their own).

use crate::emit::{EmitError, Emitted, Origin};
use kiln_qpu::isa::effects::{self, Effect, Resource};
use kiln_qpu::isa::merge::{Pairable, PortRead, Units, merge_pairable};
use kiln_qpu::isa::{AddOp, AluInstr, Instr, Mux, Signal};
use kiln_qpu::isa::{latency, waddr};
use kiln_sched::{Access, Dag};

fn internal(m: &str) -> EmitError {
    EmitError::Internal(format!("scheduler: {m}"))
}

/// Schedules an emitted program.
pub fn schedule(e: &Emitted) -> Result<Emitted, EmitError> {
    schedule_with(e, 0)
}

/// Schedules an emitted program after which registers `live_at_end` (bits as
/// [`crate::rename`] numbers them: file A 0–31, file B 32–63, r0–r3 64–67) are still read.
pub fn schedule_with(e: &Emitted, live_at_end: u128) -> Result<Emitted, EmitError> {
    let effort = Effort {
        bound_windows: true,
        search_steps: 0,
    };
    schedule_bounded(e, live_at_end, effort)
}

/// How hard the scheduler works beyond its list schedules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Effort {
    /// Count the lower bound (`Emitted::bound`) over every time window of a region, and where
    /// the list schedule is above that, search [`PROOF_STEPS`] steps for a higher one
    /// (`kiln_sched::optimal`); else over the whole region ([`Bound`]). The same code either
    /// way.
    pub bound_windows: bool,
    /// Search steps per region of at most `kiln_sched::optimal::MOST_NODES` instructions for a
    /// schedule shorter than the list scheduler's, where that is above the bound (0: none).
    pub search_steps: u32,
}

/// [`schedule_with`] as hard as `effort` says.
pub fn schedule_bounded(
    e: &Emitted,
    live_at_end: u128,
    effort: Effort,
) -> Result<Emitted, EmitError> {
    let n = e.instrs.len();
    let mut instrs = e.instrs.clone();
    branch_over_jump(&mut instrs);
    jump_to_next(&mut instrs);
    // What each instruction reads and writes, decoded once and kept current by the passes
    // that change instructions (none changes the control flow).
    let mut refs = crate::rename::refs_of(&instrs);
    let succ = kiln_qpu::isa::validate::successors(&instrs);
    // The registers live after each instruction, found once for the passes that read them
    // and kept while none changes the code.
    let mut known = None;
    crate::pack_fold::fold(&mut instrs, &mut refs, &succ, live_at_end, &mut known);
    crate::pack_fold::colour_in_accumulator(&mut instrs, &mut refs, &succ, live_at_end, &mut known);
    if crate::r4_forward::forward(&mut instrs, &mut refs) > 0 {
        known = None;
    }
    let (mut refs, live_out) = crate::rename::rename(&mut instrs, refs, &succ, live_at_end, known);
    let live_in = crate::dead_writes::remove_with(&mut instrs, &mut refs, &live_out, live_at_end);
    let mut label = vec![false; n + 1];
    let mut fixed = vec![false; n];
    // Thread switches whose two delay slots are `nop`s: the switch's signal goes where the
    // scheduled code leaves two instructions to fill them.
    let mut switch = vec![None; n];
    for i in 0..n {
        let slots = match &mut instrs[i] {
            Instr::Branch(b) => {
                if !b.rel || b.reg || b.imm % 8 != 0 {
                    return Err(internal("a branch that is not relative to a constant"));
                }
                let t = i as i64 + 4 + b.imm as i64 / 8;
                if !(0..=n as i64).contains(&t) {
                    return Err(internal("a branch out of the program"));
                }
                label[t as usize] = true;
                4
            }
            Instr::Semaphore(_) => 1,
            Instr::Alu(a)
                if matches!(a.sig, Signal::ThreadSwitch | Signal::LastThreadSwitch)
                    && e.instrs.get(i + 1).is_some_and(Instr::is_nop)
                    && e.instrs.get(i + 2).is_some_and(Instr::is_nop) =>
            {
                switch[i] = Some(a.sig);
                a.sig = Signal::None;
                0
            }
            Instr::Alu(a) if held(a.sig) => 3,
            _ => 0,
        };
        for f in fixed.iter_mut().skip(i).take(slots) {
            *f = true;
        }
    }
    // Reads of the uniform stream take its entries in the new order; that is right on every
    // path only if, after a branch target, the stream is reset before it is read (as the
    // emitter does: the position depends on the path).
    let mut rank = vec![None; n];
    let mut takers = 0;
    let mut known = true;
    for (i, ins) in e.instrs.iter().enumerate() {
        known &= !label[i];
        let resets = effects::writes_addr(ins, waddr::UNIFORMS_ADDRESS);
        if effects::takes_uniform(ins) {
            if !known && !resets {
                return Err(internal(
                    "a uniform read after a branch target, with no stream reset between",
                ));
            }
            rank[i] = Some(takers);
            takers += 1;
        }
        known |= resets;
    }
    if takers != e.uniforms.len() && takers + 1 != e.uniforms.len() {
        return Err(internal("the uniform table is not one entry per read"));
    }

    let mut s = Scheduler {
        e,
        instrs,
        refs,
        rank,
        out: Vec::with_capacity(n),
        origins: Vec::with_capacity(n),
        from: Vec::with_capacity(n),
        uniforms: e.uniforms.clone(),
        next_uniform: 0,
        base: 0,
        read_at: vec![0; Resource::COUNT],
        write_at: vec![0; Resource::COUNT],
        written: vec![None; Resource::COUNT],
        effects: Vec::new(),
        excess: 0,
        effort,
    };
    // No TLB access or scoreboard wait in the first two instructions.
    s.write_at[Resource::Tlb.index()] = 2;
    let starts = kiln_qpu::isa::validate::block_starts(&s.instrs);
    let around = Around {
        label: &label,
        starts: &starts,
        fixed: &fixed,
        switch: &switch,
        live_in: &live_in,
        movable: crate::rename::movable(&e.instrs),
    };
    let mut position = vec![None; n + 1];
    let mut region = Vec::new();
    let mut i = 0;
    while i < n {
        if label[i] || fixed[i] {
            let branch = matches!(s.instrs[i], Instr::Branch(_)) && !label[i];
            s.region(&region, branch.then_some(&s.instrs[i]).copied(), live_in[i])?;
            region.clear();
            position[i] = Some(s.out.len());
        }
        if let Some(sig) = switch[i] {
            if !s.instrs[i].is_nop() {
                region.push(i);
            }
            s.region(&region, None, live_in[i + 1])?;
            region.clear();
            s.thread_switch(sig, i, &around)?;
            i += 3;
            continue;
        }
        if fixed[i] && matches!(s.instrs[i], Instr::Branch(_)) && !label[i] {
            // The delay slots: what the branch can be put before, then `nop`s.
            let moved = s.delay_slots(i);
            s.fixed(i)?;
            let mut filled = moved.len();
            for m in moved {
                s.push(m.0, m.1, m.2);
            }
            if let Instr::Branch(b) = s.instrs[i]
                && !label[i + 4]
            {
                let target = (i as i64 + 4 + b.imm as i64 / 8) as usize;
                filled += s.fall_through_slots(i, 3 - filled, live_in[target], &around)?;
            }
            s.base = s.out.len();
            for k in i + 1 + filled..i + 4 {
                s.fixed(k)?;
            }
            i += 4;
            continue;
        }
        if fixed[i] {
            s.fixed(i)?;
        } else if !s.instrs[i].is_nop() {
            region.push(i);
        }
        i += 1;
    }
    s.region(&region, None, live_in[n])?;
    position[n] = Some(s.out.len());

    // Relocate: relative branches count from the branch + 4 instructions.
    let mut out = s.out;
    for (at, &from) in s.from.iter().enumerate() {
        let Some(f) = from else { continue };
        let Instr::Branch(b) = s.instrs[f] else {
            continue;
        };
        let target = (f as i64 + 4 + b.imm as i64 / 8) as usize;
        let to = position[target].ok_or_else(|| internal("a branch into a region"))?;
        if let Instr::Branch(nb) = &mut out[at] {
            nb.imm = 8 * (to as i32 - (at as i32 + 4));
        }
    }
    let mut origins = s.origins;
    let mut from = s.from;
    let excess = s.excess;
    // The colour still in ra14 may fit an accumulator in the scheduled order, or another file
    // register (so that the program end may take the last instructions).
    if crate::pack_fold::colour_write(&out).is_some() {
        let mut refs = crate::rename::refs_of(&out);
        let succ = kiln_qpu::isa::validate::successors(&out);
        crate::pack_fold::colour_out_of_register_14(&mut out, &mut refs, &succ, live_at_end);
    }
    // The lower bound is the DAG's: a `nop` the bypass removes is below it.
    let bypassed = crate::bypass::bypass(&mut out, &mut origins, &mut from, live_at_end);
    colour_write_ends(&mut out, &mut origins);
    fill_end_slots(&mut out, &mut origins);
    crate::target_slots::fill(&mut out, &mut origins, &from, &live_in);
    let out_len = out.len();
    Ok(Emitted {
        instrs: out,
        origins,
        uniforms: s.uniforms,
        varyings: e.varyings.clone(),
        output_rows: e.output_rows.clone(),
        bound: (out_len + bypassed).saturating_sub(excess) as u32,
    })
}

/// A conditional branch over an unconditional one, `branch.c T; …; branch L; nop ×3; T:`,
/// becomes one branch on the opposite condition, `branch.!c L; …; T:` (the jump becomes a
/// `nop`, which the scheduler drops with its slots): where no branch goes to the jump, its
/// slots hold nothing and it links no register. The fall-through then reaches `T` as the
/// taken branch did, and the first branch's slots run on both paths, as they did.
fn branch_over_jump(instrs: &mut [Instr]) {
    let n = instrs.len();
    let target = |i: usize, b: &kiln_qpu::isa::Branch| {
        (b.rel && !b.reg && b.imm % 8 == 0).then(|| i as i64 + 4 + b.imm as i64 / 8)
    };
    let mut targeted = vec![false; n + 1];
    for (i, ins) in instrs.iter().enumerate() {
        if let Instr::Branch(b) = ins
            && let Some(t) = target(i, b).filter(|t| (0..=n as i64).contains(t))
        {
            targeted[t as usize] = true;
        }
    }
    for i in 0..n.saturating_sub(8) {
        let (Instr::Branch(first), Instr::Branch(jump)) = (instrs[i], instrs[i + 4]) else {
            continue;
        };
        let Some(negated) = first.cond.negated() else {
            continue;
        };
        let Some(to) = target(i + 4, &jump) else {
            continue;
        };
        if target(i, &first) != Some(i as i64 + 8)
            || jump.cond != kiln_qpu::isa::BranchCond::Always
            || jump.waddr_add != waddr::NOP
            || jump.waddr_mul != waddr::NOP
            || targeted[i + 4..i + 8].iter().any(|&t| t)
            || instrs[i + 5..i + 8].iter().any(|x| !x.is_nop())
        {
            continue;
        }
        let mut merged = first;
        merged.cond = negated;
        merged.imm = 8 * (to - (i as i64 + 4)) as i32;
        instrs[i] = Instr::Branch(merged);
        instrs[i + 4] = Instr::nop();
    }
}

/// A jump to the instruction after its delay slots (the end of an `if`'s side whose other
/// side is empty), with `nop`s in its slots and no register linked, becomes a `nop`: the
/// scheduler drops it with its slots, and the code on either side of it is one region unless
/// another branch goes there.
fn jump_to_next(instrs: &mut [Instr]) {
    for i in 0..instrs.len().saturating_sub(3) {
        if let Instr::Branch(b) = instrs[i]
            && b.cond == kiln_qpu::isa::BranchCond::Always
            && b.rel
            && !b.reg
            && b.imm == 0
            && b.waddr_add == waddr::NOP
            && b.waddr_mul == waddr::NOP
            && instrs[i + 1..i + 4].iter().all(|x| x.is_nop())
        {
            instrs[i] = Instr::nop();
        }
    }
}

/// The colour's tile-buffer write as the program end's own instruction (as Broadcom's own
/// shaders end: `or tlb_color_all, r0, r0; thrend`): when the instruction before the end is
/// that write alone, reading an accumulator (the end's instruction and its slots may not touch
/// register 14), the end's signal goes on it and the `nop` that carried it goes. The write's
/// scoreboard wait, which the end's instruction may not do itself (both validators), becomes a
/// `sbwait` signal on the latest instruction before it that has none, after the last thread
/// switch's slots and not in the first two (unless a tile-buffer access before has waited).
/// No branch may reach the moved instructions.
fn colour_write_ends(out: &mut Vec<Instr>, origins: &mut Vec<[Origin; 2]>) {
    let Some(end) = out
        .iter()
        .rposition(|i| matches!(i, Instr::Alu(a) if a.sig == Signal::ProgramEnd))
    else {
        return;
    };
    if end < 4 || out[end] != end_nop() {
        return;
    }
    let Instr::Alu(write) = out[end - 1] else {
        return;
    };
    let colour = effects::writes(&out[end - 1])
        .iter()
        .all(|w| w.waddr == waddr::TLB_COLOR_ALL)
        && write.op_mul == kiln_qpu::isa::MulOp::Nop
        && write.sig == Signal::None
        && effects::regfile_reads(&out[end - 1]) == (None, None)
        && !effects::takes_uniform(&out[end - 1]);
    if !colour {
        return;
    }
    let reached = out.iter().enumerate().any(|(b, i)| match i {
        Instr::Branch(br) => b + 4 > end - 1 || b as i64 + 4 + br.imm as i64 / 8 >= end as i64 - 1,
        _ => false,
    });
    if reached {
        return;
    }
    // A tile-buffer access before has waited already.
    if !out[..end - 1].iter().any(effects::is_tlb) {
        let Some(wait) = wait_place(out, end - 1) else {
            return;
        };
        if let Instr::Alu(a) = &mut out[wait] {
            a.sig = Signal::ScoreboardWait;
        }
    }
    let mut merged = write;
    merged.sig = Signal::ProgramEnd;
    out[end - 1] = Instr::Alu(merged);
    out.remove(end);
    origins.remove(end);
}

/// The program end's two delay slots filled with the program's last instructions: its signal
/// moves up to two instructions earlier and as many trailing `nop`s go (the instructions run in
/// the same order; the slots execute as any other). The end's instruction may not write a
/// register file, nor touch the tile buffer without an earlier scoreboard wait; it and its
/// slots read no varying, uniform or VPM and use no register 14; the last instruction writes
/// no Z; no branch or its delay slots reaches past the end's instruction (the rules of both
/// validators, from the reference guide's "Thread End").
fn fill_end_slots(out: &mut Vec<Instr>, origins: &mut Vec<[Origin; 2]>) {
    let n = out.len();
    let Some(end) = out
        .iter()
        .rposition(|i| matches!(i, Instr::Alu(a) if a.sig == Signal::ProgramEnd))
    else {
        return;
    };
    if end + 3 != n || out[end + 1..].iter().any(|i| !i.is_nop()) {
        return;
    }
    let quiet = |p: &Instr| {
        let (ra, rb) = effects::regfile_reads(p);
        !effects::writes_addr(p, waddr::VPM)
            && !effects::reads_io(p, kiln_qpu::isa::raddr::VARYING)
            && !effects::reads_io(p, kiln_qpu::isa::raddr::UNIFORM)
            && !effects::reads_io(p, kiln_qpu::isa::raddr::VPM)
            && ra != Some(14)
            && rb != Some(14)
            && !effects::writes(p).iter().any(|w| w.waddr == 14)
    };
    let waited_before = |k: usize| {
        out[..k]
            .iter()
            .any(|i| effects::is_tlb(i) || effects::sig(i) == Some(Signal::ScoreboardWait))
    };
    for k in [2usize, 1] {
        let Some(first) = end.checked_sub(k) else {
            continue;
        };
        let Instr::Alu(host) = &out[first] else {
            continue;
        };
        // A scoreboard wait on the host or in the slots moves before the host
        // ([`wait_place`]).
        let waiting = (first..end).find(|&j| effects::sig(&out[j]) == Some(Signal::ScoreboardWait));
        let wait_to = match waiting {
            Some(_) => {
                let Some(w) = wait_place(out, first) else {
                    continue;
                };
                Some(w)
            }
            None => None,
        };
        let host_free = host.sig == Signal::None || waiting == Some(first);
        let last = &out[end];
        let reached = out.iter().enumerate().any(|(b, i)| match i {
            Instr::Branch(br) => b + 3 >= first || b as i64 + 4 + br.imm as i64 / 8 > first as i64,
            _ => false,
        });
        let ok = !reached
            && host_free
            && !effects::writes(&out[first]).iter().any(|w| w.waddr < 32)
            && (!effects::is_tlb(&out[first]) || waited_before(first))
            && out[first..=end].iter().all(quiet)
            && out[first + 1..end]
                .iter()
                .enumerate()
                .all(|(j, i)| match i {
                    Instr::Alu(a) => {
                        matches!(a.sig, Signal::None | Signal::SmallImm)
                            || waiting == Some(first + 1 + j)
                    }
                    Instr::LoadImm(_) => true,
                    _ => false,
                })
            && !effects::writes_addr(last, waddr::TLB_Z);
        if !ok {
            continue;
        }
        if let (Some(from), Some(to)) = (waiting, wait_to) {
            if let Instr::Alu(a) = &mut out[from] {
                a.sig = Signal::None;
            }
            if let Instr::Alu(a) = &mut out[to] {
                a.sig = Signal::ScoreboardWait;
            }
        }
        if let Instr::Alu(a) = &mut out[end] {
            a.sig = Signal::None;
        }
        if let Instr::Alu(a) = &mut out[first] {
            a.sig = Signal::ProgramEnd;
        }
        out.truncate(n - k);
        origins.truncate(n - k);
        return;
    }
}

/// Where a scoreboard wait for a tile-buffer access at `before` can go: the latest
/// instruction before it that has no signal, after the last thread switch's slots and not in
/// the first two.
fn wait_place(out: &[Instr], before: usize) -> Option<usize> {
    let switch_end = out
        .iter()
        .rposition(|i| {
            matches!(
                effects::sig(i),
                Some(Signal::ThreadSwitch | Signal::LastThreadSwitch)
            )
        })
        .map_or(0, |k| k + 3);
    (switch_end.max(2)..before)
        .rev()
        .find(|&k| matches!(&out[k], Instr::Alu(a) if a.sig == Signal::None))
}

fn end_nop() -> Instr {
    let mut a = AluInstr::nop();
    a.sig = Signal::ProgramEnd;
    Instr::Alu(a)
}

/// The longest region whose accumulator values are renamed after scheduling
/// ([`crate::accumulators`]); longer ones are generated code (thousands of if-converted ifs),
/// not shaders.
const RENAMED_REGION: usize = 8192;

/// What a region's schedule always has: the DAG and bound of the order it is of.
const ORDER: &str = "a schedule of some order";

/// The search steps (`kiln_sched::optimal`) for a region's bound where it is counted over
/// every time window ([`Effort::bound_windows`]) and the list schedule is above that.
pub const PROOF_STEPS: u32 = 20_000;

/// How far [`Scheduler::hoist`] looks for an instruction to move (a bound on its cost).
const HOIST_WINDOW: usize = 16;

/// An instruction whose accumulator result moves to a file register
/// ([`Scheduler::moved_to_file`]): the instruction writing the register, its readers (input
/// index, rewritten) and the register's bit.
struct FileMove {
    instr: Instr,
    readers: Vec<(usize, Instr)>,
    register: u32,
}

/// How far after it [`Scheduler::moved_to_file`] follows the value an instruction writes.
const VALUE_WINDOW: usize = 64;

/// How far back [`Scheduler::lift_carrier`] looks for a thread switch's carrier.
const LIFT_WINDOW: usize = 8;

/// Whether an ALU instruction reads a FIFO, the uniform stream or any I/O address, used or not.
pub(crate) fn has_io_read(i: &Instr) -> bool {
    match i {
        Instr::Alu(a) => {
            let io = |r: u8| r >= 32 && r != kiln_qpu::isa::raddr::NOP;
            io(a.raddr_a) || (a.sig != Signal::SmallImm && io(a.raddr_b))
        }
        _ => false,
    }
}

/// What the instructions after a branch are: branch targets, kept in place, thread switches.
struct Around<'a> {
    label: &'a [bool],
    /// Block starts (branch targets and the instructions after branches' delay slots).
    starts: &'a [bool],
    fixed: &'a [bool],
    switch: &'a [Option<Signal>],
    /// Per instruction, the registers live before it.
    live_in: &'a [crate::rename::Regs],
    /// The registers a value may move to ([`crate::rename::movable`]).
    movable: crate::rename::Regs,
}

/// The write condition no lane meets after branch condition `c` was taken: `all_zc` means Z
/// is clear in every lane, so a `.zs` write writes none.
fn unmet_when_taken(c: kiln_qpu::isa::BranchCond) -> Option<kiln_qpu::isa::Cond> {
    use kiln_qpu::isa::{BranchCond as B, Cond as C};
    Some(match c {
        B::AllZc => C::Zs,
        B::AllZs => C::Zc,
        B::AllNc => C::Ns,
        B::AllNs => C::Nc,
        B::AllCc => C::Cs,
        B::AllCs => C::Cc,
        _ => return None,
    })
}

/// Signals that keep their instruction and the two after it in place.
pub(crate) fn held(s: Signal) -> bool {
    matches!(
        s,
        Signal::ThreadSwitch
            | Signal::LastThreadSwitch
            | Signal::ProgramEnd
            | Signal::ColorLoadEnd
            | Signal::Breakpoint
    )
}

struct Scheduler<'a> {
    e: &'a Emitted,
    /// The instructions of `e`, thread switches' signals taken off.
    instrs: Vec<Instr>,
    /// What each of `instrs` reads and writes ([`crate::rename::refs`]).
    refs: Vec<crate::rename::Refs>,
    /// Per instruction of `e`, the uniform-table entry it reads.
    rank: Vec<Option<usize>>,
    out: Vec<Instr>,
    origins: Vec<[Origin; 2]>,
    /// Per instruction of `out`, the instruction of `e` it is (for a pair, the first; none
    /// for a `nop`).
    from: Vec<Option<usize>>,
    uniforms: Vec<crate::uniforms::Uniform>,
    next_uniform: usize,
    /// Where the last region began: instructions from here may still move.
    base: usize,
    /// Per resource, the first instruction that may read it and the first that may write it.
    read_at: Vec<usize>,
    write_at: Vec<usize>,
    /// Per resource, the instruction that last wrote it.
    written: Vec<Option<usize>>,
    effects: Vec<Effect>,
    /// The regions' instructions beyond their lower bounds ([`Bound`]).
    excess: usize,
    /// How hard to work beyond the list schedules.
    effort: Effort,
}

/// A placed instruction taken back: the instruction, its origins and what it was.
type Placed = (Instr, [Origin; 2], Option<usize>);

impl Scheduler<'_> {
    /// Appends an instruction made of instructions `parts` of the input (none: a `nop`),
    /// taking their uniform-table entries in the new order.
    fn put(&mut self, i: Instr, parts: &[usize]) -> Result<(), EmitError> {
        for &p in parts {
            if let Some(k) = self.rank[p] {
                *self
                    .uniforms
                    .get_mut(self.next_uniform)
                    .ok_or_else(|| internal("more uniform reads than entries"))? =
                    self.e.uniforms[k];
                self.next_uniform += 1;
            }
        }
        let origin = |p: Option<&usize>| p.map(|&p| self.e.origins[p][0]);
        let first = origin(parts.first()).unwrap_or(Origin::End);
        let origins = [first, origin(parts.get(1)).unwrap_or(first)];
        self.push(i, origins, parts.first().copied());
        Ok(())
    }

    /// Inserts an instruction that writes nothing at `at`, among the region's placed ones: what
    /// those after it write is written one later now.
    fn insert(&mut self, at: usize, i: Instr, origins: [Origin; 2]) {
        self.out.insert(at, i);
        self.origins.insert(at, origins);
        self.from.insert(at, None);
        self.written_later(at + 1..self.out.len());
    }

    /// Records that what the placed instructions `moved` write is written where they are now
    /// (they moved later; what moved earlier keeps its recorded place: later than true, so only
    /// cautious).
    fn written_later(&mut self, moved: std::ops::Range<usize>) {
        for p in moved {
            for e in effects_of(&self.out[p]).iter().filter(|e| e.write) {
                let r = e.resource.index();
                self.written[r] = self.written[r].max(Some(p));
                self.read_at[r] = self.read_at[r].max(p + e.distance as usize);
                self.write_at[r] = self.write_at[r].max(p + waw(e) as usize);
            }
        }
    }

    /// Appends an instruction and records what it writes.
    fn push(&mut self, i: Instr, origins: [Origin; 2], from: Option<usize>) {
        let at = self.out.len();
        self.effects.clear();
        effects::write_effects(&i, &mut self.effects);
        for e in &self.effects {
            let r = e.resource.index();
            self.written[r] = Some(at);
            self.read_at[r] = self.read_at[r].max(at + e.distance as usize);
            self.write_at[r] = self.write_at[r].max(at + waw(e) as usize);
        }
        self.origins.push(origins);
        self.from.push(from);
        self.out.push(i);
    }

    /// The first instruction `i` may be at, after what is already placed.
    fn earliest(&mut self, i: &Instr) -> usize {
        self.effects.clear();
        effects::effects(i, &mut self.effects);
        self.effects
            .iter()
            .map(|e| {
                let r = e.resource.index();
                if e.write {
                    self.write_at[r]
                } else {
                    let after = self.written[r].map_or(0, |w| w + e.distance as usize);
                    self.read_at[r].max(after)
                }
            })
            .max()
            .unwrap_or(0)
    }

    /// Places instruction `i` of the input where it is, after the `nop`s its inputs still
    /// need.
    fn fixed(&mut self, i: usize) -> Result<(), EmitError> {
        let ins = self.instrs[i];
        let need = self.earliest(&ins);
        while self.out.len() < need {
            self.put(Instr::nop(), &[])?;
        }
        self.put(ins, &[i])?;
        self.base = self.out.len();
        Ok(())
    }

    /// Takes back the last instructions of the region just scheduled that can run in the
    /// delay slots of branch `i` instead of before it: none writes the flags a conditional
    /// branch reads, and each result is ready by the first instruction after the slots, on
    /// either path (a rotation reads an accumulator two instructions after its write).
    fn delay_slots(&mut self, i: usize) -> Vec<Placed> {
        let Instr::Branch(b) = self.instrs[i] else {
            return Vec::new();
        };
        if self.instrs[i + 1..i + 4].iter().any(|x| !x.is_nop()) {
            return Vec::new();
        }
        let conditional = b.cond != kiln_qpu::isa::BranchCond::Always;
        let movable = self.out.len() - self.base;
        let mut take = 0;
        'k: for k in (1..=movable.min(3)).rev() {
            for (s, ins) in self.out[self.out.len() - k..].iter().enumerate() {
                let mut list = Vec::new();
                effects::effects(ins, &mut list);
                for e in list.iter().filter(|e| e.write) {
                    let needed = match e.resource {
                        Resource::Acc(_) => e.distance.max(2),
                        _ => e.distance,
                    };
                    let sets_branch_flags = conditional && e.resource == Resource::Flags;
                    if sets_branch_flags || needed as usize > 3 - s {
                        continue 'k;
                    }
                }
            }
            take = k;
            break;
        }
        let at = self.out.len() - take;
        let instrs = self.out.split_off(at);
        let origins = self.origins.split_off(at);
        let from = self.from.split_off(at);
        instrs
            .into_iter()
            .zip(origins)
            .zip(from)
            .map(|((i, o), f)| (i, o, f))
            .collect()
    }

    /// Fills up to `free` delay slots of conditional branch `i` with instructions of the code
    /// it falls through to ([`Scheduler::hoist`]) that are harmless where the branch goes
    /// (delay slots run on both paths): each register they write dead at the
    /// target (`live_at_target`) or written under a condition that no lane meets when the
    /// branch is taken (`.zs` after `branch.all_zc`: the masked side of a divergent if), and
    /// flags set only where the target sets them again before testing them (the branch has
    /// read its own: a loop's exit tests one after another, each setting the flags the next
    /// branch reads). Returns how many it placed.
    fn fall_through_slots(
        &mut self,
        i: usize,
        free: usize,
        live_at_target: u128,
        around: &Around,
    ) -> Result<usize, EmitError> {
        let Instr::Branch(b) = self.instrs[i] else {
            return Ok(0);
        };
        if b.cond == kiln_qpu::isa::BranchCond::Always {
            return Ok(0);
        }
        let unmet = unmet_when_taken(b.cond);
        let target = (i as i64 + 4 + b.imm as i64 / 8) as usize;
        let flags = crate::dead_writes::flags_dead_from(&self.instrs, around.starts, target);
        let rules = Hoist {
            flags,
            into_file: false,
            commit: true,
        };
        self.hoist(i + 4, free, around, rules, |cond, bit| {
            bit.is_some_and(|bit| Some(cond) == unmet || live_at_target & (1 << bit) == 0)
        })
    }

    /// Fills up to `free` delay slots of a thread switch with instructions from after it
    /// (input index `from` on) that write only file registers, unconditionally (the
    /// accumulators do not keep their values across the switch) — or an accumulator whose
    /// value then moves to a file register free there ([`Scheduler::moved_to_file`]). Returns how
    /// many it placed.
    /// With `commit` false, only counts them.
    fn switch_slots(
        &mut self,
        from: usize,
        free: usize,
        around: &Around,
        commit: bool,
    ) -> Result<usize, EmitError> {
        let rules = Hoist {
            flags: false,
            into_file: true,
            commit,
        };
        self.hoist(from, free, around, rules, |cond, bit| {
            bit.is_some_and(|bit| bit < 64) && cond == kiln_qpu::isa::Cond::Always
        })
    }

    /// Moves up to `free` instructions of the input from `from` on to the end of the output:
    /// ALU operations and load immediates with no signal but a small immediate, no stream,
    /// FIFO or peripheral access, setting no flags unless `flags`, whose every write
    /// `writes(condition, register bit)` allows (no bit: not a register), that no instruction
    /// they pass over conflicts with (writes what they read, reads or writes what they write),
    /// and whose inputs are ready there. With `into_file`, one that writes an accumulator may
    /// move with its value in a file register instead ([`Scheduler::moved_to_file`]). The scan
    /// stops at a branch target, a fixed instruction or a thread switch, and after
    /// [`HOIST_WINDOW`] instructions. Each moved instruction is taken out of the input; with
    /// `commit` false none moves, and the count is of those that would (a little more than
    /// would: what a moved one writes is not waited for by the next).
    fn hoist(
        &mut self,
        from: usize,
        free: usize,
        around: &Around,
        Hoist {
            flags,
            into_file,
            commit,
        }: Hoist,
        writes: impl Fn(kiln_qpu::isa::Cond, Option<u32>) -> bool,
    ) -> Result<usize, EmitError> {
        let (mut placed, mut read, mut written) = (0, 0u128, 0u128);
        // File registers free from `from` on that no value moved into yet.
        let mut vacant = around.movable & !around.live_in[from] & !(0xf << 64);
        let end = self.instrs.len().min(from + HOIST_WINDOW);
        for j in from..end {
            if placed == free || around.label[j] || around.fixed[j] || around.switch[j].is_some() {
                break;
            }
            let ins = self.instrs[j];
            if ins.is_nop() {
                continue;
            }
            let (ok, r, w) = self.hoistable(&ins, flags, &writes, (read, written));
            let moved = if ok || !into_file {
                None
            } else {
                self.moved_to_file(j, from, vacant, around)
                    .filter(|m| self.hoistable(&m.instr, flags, &writes, (read, written)).0)
            };
            if !commit && (ok || moved.is_some()) {
                if let Some(m) = moved {
                    vacant &= !(1 << m.register);
                }
                placed += 1;
                continue;
            }
            if let Some(m) = moved {
                vacant &= !(1 << m.register);
                for (k, reader) in m.readers {
                    self.instrs[k] = reader;
                    self.refs[k] = crate::rename::refs(&reader);
                }
                self.put(m.instr, &[j])?;
            } else if ok {
                self.put(ins, &[j])?;
            } else {
                read |= r;
                written |= w;
                continue;
            }
            self.instrs[j] = Instr::nop();
            placed += 1;
        }
        Ok(placed)
    }

    /// Whether [`Scheduler::hoist`] may move `ins` to the end of the output past instructions
    /// that read and wrote `(read, written)`; what `ins` reads and writes.
    fn hoistable(
        &mut self,
        ins: &Instr,
        flags: bool,
        writes: &impl Fn(kiln_qpu::isa::Cond, Option<u32>) -> bool,
        (read, written): (u128, u128),
    ) -> (bool, u128, u128) {
        let fields = match ins {
            Instr::Alu(a) if matches!(a.sig, Signal::None | Signal::SmallImm) => Some(a.w),
            Instr::LoadImm(l) => Some(l.w),
            _ => None,
        };
        self.effects.clear();
        effects::effects(ins, &mut self.effects);
        let (mut r, mut w) = (0u128, 0u128);
        for e in &self.effects {
            let bit = 1u128 << e.resource.index();
            if e.write { w |= bit } else { r |= bit }
        }
        let ok = fields.is_some_and(|f| {
            let write = |waddr: u8, cond: kiln_qpu::isa::Cond, file_a: bool| {
                waddr == waddr::NOP
                    || cond == kiln_qpu::isa::Cond::Never
                    || writes(cond, crate::rename::write_bit(waddr, file_a))
            };
            (!f.sf || flags)
                && write(f.waddr_add, f.cond_add, !f.ws)
                && write(f.waddr_mul, f.cond_mul, f.ws)
        }) && !effects::takes_uniform(ins)
            && !has_io_read(ins)
            && r & written == 0
            && w & (read | written) == 0
            && self.earliest(ins) <= self.out.len();
        (ok, r, w)
    }

    /// Instruction `j` of the input (after a thread switch, whose slots hoist from `from`)
    /// with the accumulator it writes — its one register, whole and unconditionally — moved to
    /// a file register of `vacant` (free from `from` on), and its readers reading that. The value's
    /// life is straight-line code before any branch target, fixed instruction or thread
    /// switch, and its readers are operations that can read a file register: a read port free
    /// (file A only without a file-A unpack, file B only without a small immediate), no
    /// rotation (a full rotation reads accumulators). The register is touched by nothing from
    /// `from` to the last reader.
    fn moved_to_file(
        &self,
        j: usize,
        from: usize,
        vacant: crate::rename::Regs,
        around: &Around,
    ) -> Option<FileMove> {
        let r = self.refs[j];
        let acc = r.whole & (0xf << 64);
        if acc.count_ones() != 1 || r.whole != acc || r.part != 0 {
            return None;
        }
        let b = acc.trailing_zeros();
        let w = match &self.instrs[j] {
            Instr::Alu(a) if !a.w.sf => a.w,
            Instr::LoadImm(l) if !l.w.sf => l.w,
            _ => return None,
        };
        let address = waddr::R0 + (b - 64) as u8;
        let on_add = match (w.waddr_add, w.waddr_mul) {
            (a, waddr::NOP) if a == address && w.cond_add == kiln_qpu::isa::Cond::Always => true,
            (waddr::NOP, m) if m == address && w.cond_mul == kiln_qpu::isa::Cond::Always => false,
            _ => return None,
        };
        let mut readers = Vec::new();
        // What the instructions from `from` to the value's end touch (to its last reader
        // would do; a little more is only cautious).
        let mut touched = 0;
        for k in from..self.instrs.len() {
            let rk = self.refs[k];
            if k > j {
                if k > j + VALUE_WINDOW {
                    return None;
                }
                if around.label[k] || around.fixed[k] || around.switch[k].is_some() {
                    // Past the straight-line code, the value is dead.
                    if around.live_in[k] & acc != 0 {
                        return None;
                    }
                    break;
                }
                if rk.part & acc != 0 {
                    return None;
                }
                if rk.reads & acc != 0 {
                    readers.push(k);
                }
            }
            touched |= rk.reads | rk.whole | rk.part;
            if k > j && rk.whole & acc != 0 {
                break;
            }
        }
        if readers.is_empty() {
            return None;
        }
        let (mut port_a, mut port_b) = (true, true);
        for &k in &readers {
            let Instr::Alu(a) = &self.instrs[k] else {
                return None;
            };
            if effects::is_rotation(a) {
                return None;
            }
            // A port is free where no operand reads it and its address reads nothing with an
            // effect (a plain register or none).
            let idle = |m: Mux, address: u8| {
                !effects::reads_mux(a, m) && (address < 32 || address == kiln_qpu::isa::raddr::NOP)
            };
            port_a &=
                idle(Mux::A, a.raddr_a) && (a.unpack == kiln_qpu::isa::Unpack::None || a.w.pm);
            port_b &= idle(Mux::B, a.raddr_b) && a.sig != Signal::SmallImm;
        }
        let files: crate::rename::Regs =
            if port_a { 0xffff_ffff } else { 0 } | if port_b { 0xffff_ffff << 32 } else { 0 };
        let free = vacant & files & !touched;
        if free == 0 {
            return None;
        }
        let x = free.trailing_zeros();
        let mut fields = w;
        if on_add {
            fields.waddr_add = (x % 32) as u8;
        } else {
            fields.waddr_mul = (x % 32) as u8;
        }
        // ws: the add unit writes file A without it, the mul unit with it.
        fields.ws = (x < 32) != on_add;
        let renamed = match self.instrs[j] {
            Instr::Alu(mut a) => {
                a.w = fields;
                Instr::Alu(a)
            }
            Instr::LoadImm(mut l) => {
                l.w = fields;
                Instr::LoadImm(l)
            }
            _ => return None,
        };
        let readers = readers
            .into_iter()
            .map(|k| match self.instrs[k] {
                Instr::Alu(mut a) => {
                    crate::rename::reread(&mut a, b, x);
                    Some((k, Instr::Alu(a)))
                }
                _ => None,
            })
            .collect::<Option<_>>()?;
        Some(FileMove {
            instr: renamed,
            readers,
            register: x,
        })
    }

    /// Puts thread-switch signal `sig` (of instruction `i` of the input) on the instruction two
    /// before the end of the region just scheduled, so that the two after it are its delay
    /// slots (Mesa's `emit_thrsw`); where that instruction has a signal already (a small
    /// immediate), on one later, with `nop`s after it for the slots the region does not fill;
    /// else on a `nop` of its own with two `nop`s after. The switch happens where it did: after
    /// the region.
    fn thread_switch(&mut self, sig: Signal, i: usize, around: &Around) -> Result<(), EmitError> {
        let len = self.out.len();
        let find = |out: &[Instr], base: usize| {
            (1..=3).rev().find(|&k| {
                len >= base + k
                    && matches!(out[len - k], Instr::Alu(a) if a.sig == Signal::None)
                    && out[len - k + 1..]
                        .iter()
                        .all(|x| !matches!(x.signal(), Some(Signal::LoadTmu0 | Signal::LoadTmu1)))
            })
        };
        let mut carrier = find(&self.out, self.base);
        if carrier.is_none_or(|k| k < 3) && self.lift_carrier() {
            carrier = find(&self.out, self.base);
        }
        let origin = [self.e.origins[i][0]; 2];
        // Where the slots would hold two `nop`s or more (with the carrier's own), a `nop`
        // carrying the switch before the region's last two instructions costs one.
        let free = carrier.map_or(2, |k| 3 - k);
        let cost = free + carrier.is_none() as usize;
        let before_last_two = len >= self.base + 2
            && self.out[len - 2..]
                .iter()
                .all(|x| !matches!(x.signal(), Some(Signal::LoadTmu0 | Signal::LoadTmu1)));
        if before_last_two
            && cost >= 2
            && cost - self.switch_slots(i + 3, free, around, false)?.min(free) >= 2
        {
            let mut carrier = AluInstr::nop();
            carrier.sig = sig;
            self.insert(len - 2, Instr::Alu(carrier), origin);
            self.base = self.out.len();
            return Ok(());
        }
        match carrier {
            Some(k) => {
                if let Instr::Alu(a) = &mut self.out[len - k] {
                    a.sig = sig;
                }
            }
            None => {
                let mut carrier = AluInstr::nop();
                carrier.sig = sig;
                self.push(Instr::Alu(carrier), origin, None);
            }
        }
        let filled = self.switch_slots(i + 3, free, around, true)?;
        for _ in filled..free {
            self.push(Instr::nop(), origin, None);
        }
        self.base = self.out.len();
        Ok(())
    }

    /// Where the region's third last instruction has a signal (a small immediate: a wrap's
    /// `fmax.sf nop, 0, x; fadd.cs x, x, 1.0` before a texture request) and so cannot carry a
    /// thread switch with the last two as its delay slots, moves an instruction with none
    /// there — one of the last two, else the latest of the [`LIFT_WINDOW`] before — so that
    /// it does, instead of `nop`s in the slots. It may pass over only instructions it shares
    /// no resource with that one of them writes; those move one place, and every latency
    /// between instructions now less than three apart is checked again. Returns whether it
    /// moved one.
    fn lift_carrier(&mut self) -> bool {
        let len = self.out.len();
        let Some(to) = len.checked_sub(3).filter(|&t| t >= self.base) else {
            return false;
        };
        let lo = self.base.max(len.saturating_sub(3 + LIFT_WINDOW));
        for from in (to + 1..len).chain((lo..to).rev()) {
            let x = self.out[from];
            if !matches!(x, Instr::Alu(a) if a.sig == Signal::None) || effects::takes_uniform(&x) {
                continue;
            }
            let ex = effects_of(&x);
            let (first, last) = (from.min(to), from.max(to));
            let independent = (first..=last).filter(|&p| p != from).all(|p| {
                effects_of(&self.out[p]).iter().all(|b| {
                    ex.iter()
                        .all(|a| a.resource != b.resource || !(a.write || b.write))
                })
            });
            if !independent {
                continue;
            }
            let down = from < to;
            // The new order from three before the first moved on, and every pair less than
            // three apart in it.
            let start = first.saturating_sub(3);
            let mut order: Vec<Instr> = self.out[start..len].to_vec();
            rotate(&mut order[first - start..=last - start], down);
            if !latencies_hold(&order) {
                continue;
            }
            rotate(&mut self.out[first..=last], down);
            rotate(&mut self.origins[first..=last], down);
            rotate(&mut self.from[first..=last], down);
            self.written_later(first..last + 1);
            return true;
        }
        false
    }

    /// Schedules the instructions `idx` of the input, placing them after what is placed;
    /// registers `live_after` are live after them. Before a conditional `branch`, the flags it
    /// reads are set as early as the region allows, so that what comes after can fill its
    /// delay slots. The region's accumulator values take their registers after scheduling
    /// ([`crate::accumulators`]) where that fits, else the region is scheduled with them as
    /// allocated.
    fn region(
        &mut self,
        idx: &[usize],
        branch: Option<Instr>,
        live_after: crate::rename::Regs,
    ) -> Result<(), EmitError> {
        self.base = self.out.len();
        if idx.is_empty() {
            return Ok(());
        }
        let (base, effort) = (self.base, self.effort);
        let windows = effort.bound_windows;
        // Each instruction's accesses, in one vector: `accesses[at[k]..at[k + 1]]`.
        let mut accesses: Vec<Access> = Vec::with_capacity(4 * idx.len());
        let mut at = Vec::with_capacity(idx.len() + 1);
        let mut earliest = Vec::with_capacity(idx.len());
        let mut classes = Vec::with_capacity(idx.len());
        let mut sets_flags = None;
        for (k, &i) in idx.iter().enumerate() {
            let ins = self.instrs[i];
            classes.push(class(&ins));
            earliest.push(self.earliest(&ins).saturating_sub(base) as u32);
            if self
                .effects
                .iter()
                .any(|e| e.write && e.resource == Resource::Flags)
            {
                sets_flags = Some(k);
            }
            // A read that skips the entry a reset elsewhere reads goes before the region's
            // other reads: the entry must stay where it is in the table.
            let skips = self.rank[i].map(|k| self.e.uniforms[k])
                == Some(crate::uniforms::Uniform::StreamAddress)
                && !effects::writes_addr(&ins, waddr::UNIFORMS_ADDRESS);
            at.push(accesses.len());
            accesses.extend(self.effects.iter().map(|e| match e.resource {
                Resource::Uniforms if skips => Access::Write {
                    resource: e.resource.index() as u32,
                    latency: 1,
                    waw: 1,
                    war: 0,
                    delay: 0,
                },
                _ => access(e, &ins),
            }));
        }
        at.push(accesses.len());
        let original: Vec<Instr> = idx.iter().map(|&i| self.instrs[i]).collect();
        let pairable: Vec<Option<Pairable>> = original.iter().map(Pairable::new).collect();
        let plan = Plan {
            earliest: &earliest,
            classes: &classes,
            instrs: &original,
            pairable: &pairable,
            branch,
            sets_flags,
        };
        // With the accumulator values renamed after scheduling: greedily within the four
        // registers; where that order ends with no node fitting, also with every node leaving
        // a completion that fits, and with the registers as allocated — the shorter.
        let values =
            crate::accumulators::Values::new(idx.iter().map(|&i| self.refs[i]), live_after);
        let physical = || {
            let dag = Dag::build(
                at.windows(2).map(|w| &accesses[w[0]..w[1]]),
                Resource::COUNT,
            );
            let mut bound = Bound::new(&dag, &earliest, &pairable, windows);
            let slots = list_schedule(&dag, &plan, None, &mut bound)
                .ok_or_else(|| internal("a schedule with no register limit"))?;
            Ok::<_, EmitError>((dag, slots, bound))
        };
        // The renamed order: its DAG and bound, and the schedule with the instructions renamed.
        let mut renamed = None;
        let mut renamed_dag = None;
        // (A region longer than `RENAMED_REGION` keeps its accumulators as allocated: three
        // schedules of it, the safe one to its checks' budget, cost more than they find.)
        if values.any_free() && original.len() <= RENAMED_REGION {
            let mut versioned = accesses.clone();
            values.version(&mut versioned, &at);
            let dag = Dag::build(
                at.windows(2).map(|w| &versioned[w[0]..w[1]]),
                values.resources(),
            );
            let regs = values.registers();
            let mut bound = Bound::new(&dag, &earliest, &pairable, windows);
            // Greedy first; the safe order where it finds no way on (its checks' budget keeps it
            // linear in the region past 512 instructions).
            for safe in [false, true] {
                let limit = Some((&values, &regs, safe));
                let Some(slots) = list_schedule(&dag, &plan, limit, &mut bound) else {
                    continue;
                };
                let mut named = original.clone();
                if values.assign(&cycles(&slots, original.len()), &mut named) {
                    renamed = Some((slots, named, safe));
                    break;
                }
            }
            renamed_dag = Some((dag, bound));
        }
        // The schedule, its instructions, and whether they are the original ones (whose
        // `pairable` holds); the DAG it keeps with its bound. (The renamed DAG's bound is a
        // bound for the physical order too, which has its edges and more.)
        let (mut slots, mut instrs, as_given, mut searched) = match renamed {
            Some((slots, named, false)) => (slots, named, false, None),
            Some((slots, named, true)) => {
                let (dag, other, bound) = physical()?;
                if slots.len() <= other.len() {
                    (slots, named, false, None)
                } else {
                    (other, original.clone(), true, Some((dag, bound)))
                }
            }
            None => {
                let (dag, slots, bound) = physical()?;
                (slots, original.clone(), true, Some((dag, bound)))
            }
        };
        // Above its bound, a shorter schedule by search (`kiln_sched::optimal`): of the
        // physical order, or of the renamed one where its registers can be assigned.
        let small = original.len() <= kiln_sched::optimal::MOST_NODES;
        if small && effort.search_steps > 0 {
            let (dag, bound) = searched.as_mut().or(renamed_dag.as_mut()).expect(ORDER);
            let rename = (!as_given).then_some(&values);
            let mut budget = effort.search_steps as u64;
            while !bound.met_by(slots.len()) {
                let range = (slots.len() - 1, slots.len());
                let need = bound.need(&pairable);
                let found = search(dag, &plan, rename, need, range, &mut budget);
                let Some(shorter) = found.schedule else {
                    // (Below `range.0`, where the search starts, nothing was ruled out.)
                    if found.bound > range.0 {
                        bound.proven(found.bound);
                    }
                    break;
                };
                let mut named = original.clone();
                if !as_given && !values.assign(&cycles(&shorter, original.len()), &mut named) {
                    break;
                }
                (slots, instrs) = (shorter, named);
            }
        }
        // Where the bound is counted over the windows, also the bound a longer search proves,
        // on the renamed order where there is one (its edges are the physical order's or
        // fewer, its pairs more, its registers unlimited: a bound for both).
        if small && windows {
            let rename = renamed_dag.is_some().then_some(&values);
            let (dag, bound) = renamed_dag.as_mut().or(searched.as_mut()).expect(ORDER);
            if !bound.met_by(slots.len()) {
                let range = (bound.windows(), slots.len());
                let mut budget = PROOF_STEPS as u64;
                let found = search(
                    dag,
                    &plan,
                    rename,
                    bound.need(&pairable),
                    range,
                    &mut budget,
                );
                bound.proven(found.bound);
            }
        }
        let bound =
            (renamed_dag.as_mut().or(searched.as_mut())).map(|(_, b)| b.for_schedule(slots.len()));
        // What the bound's uniform term rests on: one uniform read to an instruction, and
        // nothing beside an instruction that is not an operation.
        debug_assert!(slots.iter().all(|slot| {
            let nodes = || slot.iter().flatten().map(|&n| &instrs[n as usize]);
            nodes().filter(|i| effects::takes_uniform(i)).count() <= 1
                && (slot[1].is_none() || nodes().all(|i| matches!(i, Instr::Alu(_))))
        }));
        debug_assert!(
            slots.len() >= bound.unwrap_or(0),
            "a region of {} instructions scheduled in {}, below its lower bound {bound:?}",
            idx.len(),
            slots.len()
        );
        self.excess += slots.len().saturating_sub(bound.unwrap_or(0));
        // (A renamed instruction is found again; most are as given.)
        let pairable_now = |k: usize| {
            if as_given || instrs[k] == original[k] {
                pairable[k]
            } else {
                Pairable::new(&instrs[k])
            }
        };
        let merge =
            |a: u32, b: u32| merge_pairable(&pairable_now(a as usize)?, &pairable_now(b as usize)?);
        for slot in slots {
            match slot {
                [None, _] => self.put(Instr::nop(), &[])?,
                [Some(a), None] => self.put(instrs[a as usize], &[idx[a as usize]])?,
                [Some(a), Some(b)] => {
                    let (x, y) = (&instrs[a as usize], &instrs[b as usize]);
                    let m = merge(a, b).ok_or_else(|| internal("a pair that does not merge"))?;
                    // The add unit's origin first.
                    let (p, q) = (idx[a as usize], idx[b as usize]);
                    let parts = if adds(x) || !adds(y) { [p, q] } else { [q, p] };
                    self.put(m, &parts)?;
                }
            }
        }
        Ok(())
    }
}

/// What a region's list schedule needs besides its DAG: per instruction its first cycle and
/// class, the instructions, and the branch after the region with the last instruction before
/// it that sets flags.
#[derive(Clone, Copy)]
struct Plan<'a> {
    earliest: &'a [u32],
    classes: &'a [u8],
    instrs: &'a [Instr],
    pairable: &'a [Option<Pairable>],
    branch: Option<Instr>,
    sets_flags: Option<usize>,
}

/// The list schedule of a region's `instrs` by `dag`: priorities by the critical path, the
/// flags a conditional `branch` reads (set by instruction `sets_flags`) raised as if the
/// branch and its slots hung from them, pairs where the instructions merge. With `renaming`
/// (the accumulator values, their count, and whether the schedule is to be safe), the values
/// stay within the four accumulators, and two that are to take their registers after
/// scheduling pair as if apart; `None` where the greedy order found no way on. A schedule
/// longer than `bound` allows ([`Bound::met_by`]) is tried again with the busier unit's operations
/// first among near equals, and the shorter kept.
fn list_schedule(
    dag: &Dag,
    plan: &Plan,
    renaming: Option<(&crate::accumulators::Values, &kiln_sched::Registers, bool)>,
    bound: &mut Bound,
) -> Option<Vec<kiln_sched::Slot>> {
    let Plan {
        earliest,
        classes,
        instrs,
        branch,
        sets_flags,
        ..
    } = *plan;
    let mut prio = dag.critical_path();
    if let (Some(Instr::Branch(b)), Some(f)) = (branch, sets_flags)
        && b.cond != kiln_qpu::isa::BranchCond::Always
    {
        // The branch and its three slots hang off the last flags write.
        raise_path(dag, &mut prio, f, 4);
    }
    let rule = PairRule {
        plan,
        renaming: renaming.map(|(values, ..)| values),
    };
    let pairs = |a, b| rule.pairs(a, b);
    let run = |prio: &[u32]| match renaming {
        Some((_, regs, safe)) => {
            kiln_sched::schedule_within(dag, earliest, classes, prio, &pairs, regs, safe)
        }
        None => Some(kiln_sched::schedule(dag, earliest, classes, prio, &pairs)),
    };
    let first = run(&prio);
    if first.as_ref().is_some_and(|f| bound.met_by(f.len())) {
        return first;
    }
    // Above the bound: again with the busier unit's operations ahead by two cycles of path,
    // so that the other unit's work is left to pair with them; the shorter schedule.
    let (mut adds, mut muls) = (0, 0);
    for i in instrs {
        adds += self::adds(i) as u32;
        muls += matches!(i, Instr::Alu(a) if a.op_mul != kiln_qpu::isa::MulOp::Nop) as u32;
    }
    let busier = |i: &Instr| match i {
        Instr::Alu(a) if adds >= muls => a.op_add != AddOp::Nop,
        Instr::Alu(a) => a.op_mul != kiln_qpu::isa::MulOp::Nop,
        _ => false,
    };
    let balanced: Vec<u32> = prio
        .iter()
        .zip(instrs)
        .map(|(&p, i)| p + 2 * busier(i) as u32)
        .collect();
    match (first, run(&balanced)) {
        (Some(f), Some(b)) => Some(if b.len() < f.len() { b } else { f }),
        (f, b) => f.or(b),
    }
}

/// Which two instructions of a region a schedule may issue together: their fields merge, or,
/// with `renaming` (the accumulator values that take their registers after scheduling), they
/// merge with those values apart; the tile buffer's accesses stay at the end, so one is a
/// partner only for another (the first of the two issues before the second in the slot).
#[derive(Clone, Copy)]
struct PairRule<'a> {
    plan: &'a Plan<'a>,
    renaming: Option<&'a crate::accumulators::Values>,
}

impl PairRule<'_> {
    /// (Inlined into the schedulers' loops.)
    #[inline(always)]
    fn pairs(&self, a: u32, b: u32) -> bool {
        let Plan {
            classes,
            instrs,
            pairable,
            ..
        } = *self.plan;
        if classes[b as usize] == 0 && classes[a as usize] != 0 {
            return false;
        }
        let (Some(x), Some(y)) = (&pairable[a as usize], &pairable[b as usize]) else {
            return false;
        };
        if !x.units_allow(y) {
            return false;
        }
        if merge_pairable(x, y).is_some() {
            return true;
        }
        // Values that are to take their registers after scheduling: apart.
        let Some(values) = self.renaming else {
            return false;
        };
        let (a, b) = (a as usize, b as usize);
        let taken = crate::accumulators::Values::written(&instrs[a]);
        match values.apart(&instrs[b], b, taken) {
            Some(moved) => Pairable::new(&moved).is_some_and(|y| merge_pairable(x, &y).is_some()),
            None => false,
        }
    }
}

/// [`kiln_sched::optimal::shortest`] of a region of at most its `MOST_NODES` instructions, by
/// [`PairRule`].
fn search(
    dag: &Dag,
    plan: &Plan,
    renaming: Option<&crate::accumulators::Values>,
    need: &[[u32; NEEDS]],
    range: (usize, usize),
    budget: &mut u64,
) -> kiln_sched::optimal::Found {
    let rule = PairRule { plan, renaming };
    let pairs = |a, b| rule.pairs(a, b);
    kiln_sched::optimal::shortest(dag, plan.earliest, need, ALPHA, pairs, range, budget)
        .expect("a region small enough to search")
}

/// Per instruction of a region, the cycle a schedule issues it in.
fn cycles(slots: &[kiln_sched::Slot], n: usize) -> Vec<u32> {
    let mut cycle = vec![0; n];
    for (c, slot) in slots.iter().enumerate() {
        for &v in slot.iter().flatten() {
            cycle[v as usize] = c as u32;
        }
    }
    cycle
}

/// What [`Scheduler::hoist`] may move: flag-setting operations (`flags`), accumulator
/// writers with their value moved to a file register (`into_file`); with `commit` false it
/// only counts.
#[derive(Clone, Copy)]
struct Hoist {
    flags: bool,
    into_file: bool,
    commit: bool,
}

/// A lower bound on a region's instructions. Every node issues no sooner than its head (the
/// required latencies from the region's start, after what the code before holds up; an
/// operation that waits on none may pair with the one before it) and leaves at least its tail
/// (the same latencies to the end, itself included) after it: the longest head and tail is the
/// critical path. The nodes of a time window — heads h or later, tails t or longer
/// (`kiln_sched::bound`) — issue within `length − h − t + 1` instructions, which must hold
/// their operations two to an instruction (a load immediate takes a whole one), the busier
/// unit's operations (one that some encoding moves to the other unit may go to either:
/// `Pairable::units`) and their reads of the uniform stream (one to an instruction, as `merge`
/// allows); the widest window of the region for each. The window of the whole region is
/// counted first, the others only for a schedule longer than it ([`Bound::met_by`]). From
/// `Pairable::new` of each of its instructions.
struct Bound {
    head: Vec<u32>,
    tail: Vec<u32>,
    /// Per node, what it needs of an instruction ([`needs`]): kept for the windows, or once a
    /// search asks ([`Bound::need`]).
    need: Vec<[u32; NEEDS]>,
    /// The critical path and the whole region's window.
    region: usize,
    /// With every window, once counted, and raised to what a search proved
    /// ([`Bound::proven`]); the whole region's alone where the windows are not counted.
    windows: Option<usize>,
}

/// Per resource of [`Bound::need`], `alpha`: a window's `alpha · (h + t) + Σ need` is
/// `alpha` times its bound plus `alpha` (two operations to an instruction).
const ALPHA: [u32; NEEDS] = [2, 1, 1, 1, 1, 1, 2];

/// What [`Bound::need`] counts.
const NEEDS: usize = 7;

impl Bound {
    fn new(dag: &Dag, earliest: &[u32], pairable: &[Option<Pairable>], windows: bool) -> Bound {
        let n = dag.len();
        let mut tail = vec![1u32; n];
        for v in (0..n).rev() {
            for e in &dag.succs[v] {
                // (A write after a read may issue with the read: an edge of no latency adds
                // none.)
                tail[v] = tail[v].max(tail[e.to as usize] + e.latency as u32);
            }
        }
        // Heads only for the windows: the critical path is as long through a node whose head
        // is its `earliest` (a node's head and tail are no more than its predecessor's on the
        // path), and the earliest head is a node's with no predecessor.
        let mut head = Vec::new();
        if windows {
            head = earliest.to_vec();
            for v in 0..n {
                for e in &dag.succs[v] {
                    let to = e.to as usize;
                    head[to] = head[to].max(head[v] + e.latency as u32);
                }
            }
        }
        let need = needs(pairable, windows);
        // (Kept per node only for the windows.)
        let mut total = [0u64; NEEDS];
        let need: Vec<[u32; NEEDS]> = need
            .inspect(|x| {
                for k in 0..NEEDS {
                    total[k] += x[k] as u64;
                }
            })
            .filter(|_| windows)
            .collect();
        let critical = (0..n).map(|v| earliest[v] + tail[v]).max().unwrap_or(0);
        // The window of the whole region: its earliest head and shortest tail.
        let first = (0..n)
            .filter(|&v| dag.preds[v] == 0)
            .map(|v| earliest[v])
            .min();
        let corner = first.unwrap_or(0) + tail.iter().min().unwrap_or(&1);
        let region = if n == 0 {
            0
        } else {
            (0..NEEDS)
                .map(|k| window_bound(ALPHA[k] as u64 * corner as u64 + total[k], k))
                .fold(critical as usize, usize::max)
        };
        Bound {
            head,
            tail,
            need,
            region,
            windows: (!windows).then_some(region),
        }
    }

    /// What each node needs ([`needs`], the read ports counted), for a search.
    fn need(&mut self, pairable: &[Option<Pairable>]) -> &[[u32; NEEDS]] {
        if self.need.is_empty() {
            self.need = needs(pairable, true).collect();
        }
        &self.need
    }

    /// A bound found otherwise (by search): the windows' where that is higher.
    fn proven(&mut self, bound: usize) {
        let windows = self.windows();
        self.windows = Some(windows.max(bound));
    }

    /// Whether no schedule is shorter than one of `len` instructions.
    fn met_by(&mut self, len: usize) -> bool {
        len <= self.region || len <= self.windows()
    }

    /// The bound with every window (and what a search proved).
    fn windows(&mut self) -> usize {
        let (head, tail, need, region) = (&self.head, &self.tail, &self.need, self.region);
        *self.windows.get_or_insert_with(|| {
            let densest = kiln_sched::bound::densest_window(head, tail, need, ALPHA);
            (0..NEEDS)
                .map(|k| densest.map_or(0, |d| window_bound(d[k], k)))
                .fold(region, usize::max)
        })
    }

    /// The bound for a schedule of `len` instructions: the whole region's where that meets
    /// it (no window could say more).
    fn for_schedule(&mut self, len: usize) -> usize {
        if len <= self.region {
            self.region
        } else {
            self.windows()
        }
    }
}

/// Per instruction of a region, what [`Bound::need`] counts: its operations (two to an
/// instruction; a whole instruction and one on both units are two), the add unit, the mul unit
/// (a whole instruction takes both), the uniform stream, and the register files' read ports:
/// file A's, file B's, both (`Pairable::reads`; a register or small immediate at its first
/// reader only, as instructions reading it together share the port) — the ports counted only
/// with `count_ports` (without, a weaker bound: a driver's compile asks of it only whether the
/// list schedule meets it, to skip a second order that could not be shorter).
fn needs(
    pairable: &[Option<Pairable>],
    count_ports: bool,
) -> impl Iterator<Item = [u32; NEEDS]> + '_ {
    let mut seen = 0u128;
    pairable.iter().map(move |p| match p {
        None => [2, 1, 1, 1, 1, 1, 2],
        Some(p) => {
            let reads = if count_ports { p.reads() } else { [None; 2] };
            let mut ports = [0u32; 3];
            for read in reads.into_iter().flatten() {
                if let PortRead::Shared(k) = read {
                    if seen & 1 << k != 0 {
                        continue;
                    }
                    seen |= 1 << k;
                }
                match read.port() {
                    Some(Mux::A) => ports[0] += 1,
                    Some(_) => ports[1] += 1,
                    None => {}
                }
                ports[2] += 1;
            }
            let units = p.units();
            let on = |u: Units| (units == u || units == Units::Both) as u32;
            let operations = match units {
                Units::Both => 2,
                Units::Add | Units::Mul | Units::Either => 1,
                Units::None => 0,
            };
            [
                operations,
                on(Units::Add),
                on(Units::Mul),
                p.takes_uniform() as u32,
                ports[0],
                ports[1],
                ports[2],
            ]
        }
    })
}

/// The instructions resource `k`'s window of `alpha · (h + t) + Σ need` = `f` needs.
fn window_bound(f: u64, k: usize) -> usize {
    (f.div_ceil(ALPHA[k] as u64) as usize).saturating_sub(1)
}

/// Raises the priorities of node `f` and every node before it on a path to it, as if `f` had
/// a successor `extra` cycles long.
fn raise_path(dag: &Dag, prio: &mut [u32], f: usize, extra: u32) {
    let mut to_f = vec![0u32; dag.len()];
    to_f[f] = prio[f].max(1 + extra);
    for n in (0..f).rev() {
        for e in &dag.succs[n] {
            let t = to_f[e.to as usize];
            if t > 0 {
                to_f[n] = to_f[n].max(t + (e.delay as u32).max(1));
            }
        }
    }
    for (p, t) in prio.iter_mut().zip(to_f) {
        *p = (*p).max(t);
    }
}

/// Which ready instructions go first (Mesa's `get_instruction_priority`): the scoreboard wait
/// and the tile buffer last, so that the QPU holds the tile's lock as briefly as possible;
/// everything else by its path to the region's end, on which a texture request's result counts
/// Mesa's 100 cycles, so that requests go early. (Mesa also puts requests first and TMU loads
/// last whatever their paths; measured on the corpus, that costs instructions: the loads'
/// unpacks are on the critical path, and the thread switch already hides the wait.)
fn class(i: &Instr) -> u8 {
    let tlb = effects::is_tlb(i) || i.signal() == Some(Signal::ScoreboardWait);
    if tlb { 0 } else { 1 }
}

fn adds(i: &Instr) -> bool {
    matches!(i, Instr::Alu(a) if a.op_add != AddOp::Nop)
}

/// How long after a write the next write to the resource waits: r4 after an SFU write keeps
/// the result's latency (no SFU write, TMU or colour load in the two instructions after one).
fn waw(e: &Effect) -> u8 {
    if e.resource == Resource::R4 {
        e.distance
    } else {
        1
    }
}

/// Whether access `e`, `gap` instructions after write `w` of the same resource, keeps the
/// latency between them: a read waits the write's distance (and its own), a write the
/// write-after-write distance ([`waw`]).
pub(crate) fn keeps(w: &Effect, e: &Effect, gap: usize) -> bool {
    let need = if e.write {
        waw(w)
    } else {
        w.distance.max(e.distance)
    };
    gap >= need as usize
}

/// What `i` reads and writes.
pub(crate) fn effects_of(i: &Instr) -> Vec<Effect> {
    let mut e = Vec::new();
    effects::effects(i, &mut e);
    e
}

/// Whether every pair of instructions less than three apart in `order` keeps its latencies
/// ([`keeps`]; farther apart, every one holds: [`crate::target_slots::MAX_DISTANCE`]).
pub(crate) fn latencies_hold(order: &[Instr]) -> bool {
    let effects: Vec<Vec<Effect>> = order.iter().map(effects_of).collect();
    (0..order.len()).all(|v| {
        (v.saturating_sub(crate::target_slots::MAX_DISTANCE - 1)..v).all(|u| {
            effects[u].iter().filter(|w| w.write).all(|w| {
                effects[v]
                    .iter()
                    .filter(|e| e.resource == w.resource)
                    .all(|e| keeps(w, e, v - u))
            })
        })
    })
}

/// Rotates `v` by one place: its first item to the end if `down`, else its last to the front.
fn rotate<T>(v: &mut [T], down: bool) {
    if down {
        v.rotate_left(1)
    } else {
        v.rotate_right(1)
    }
}

/// An effect as the DAG sees it.
fn access(e: &Effect, i: &Instr) -> Access {
    let resource = e.resource.index() as u32;
    if !e.write {
        return Access::Read {
            resource,
            after: e.distance,
        };
    }
    // A texture request's result is worth waiting for (Mesa's estimate), as far as the
    // region has other work.
    let delay = if e.resource == Resource::Tmu && writes_tmu_request(i) {
        latency::TMU_ESTIMATE as u16
    } else {
        0
    };
    Access::Write {
        resource,
        latency: e.distance,
        waw: waw(e),
        war: if e.resource.read_before_write() { 0 } else { 1 },
        delay,
    }
}

fn writes_tmu_request(i: &Instr) -> bool {
    effects::write_addrs(i)
        .iter()
        .any(|&w| w == waddr::TMU0_S || w == waddr::TMU1_S)
}
