//! The QPU scheduler: emitted code → regions of straight-line operations → a DAG per region
//! (`kiln_sched`, from the one effects model `kiln_qpu::isa::effects`) → list scheduling that
//! pairs an add-unit and a mul-unit operation into one instruction → finalize: the `nop`s a
//! latency still needs, branches relocated, the uniform table rewritten in the new order of its
//! reads. After Mesa's `vc4_qpu_schedule.c` (`calculate_deps`, `qpu_merge_inst` in
//! `vc4_qpu.c`, the uniform renumbering of `schedule_instructions`). The design is in
//! `docs/sched.md`.
//!
//! What stays in place: branches with their three delay slots, thread switches and the
//! program end with their two, semaphores and uniforms-address writes. Everything else between
//! two of them, or between branch targets, is a region; the emitter's hazard `nop`s there are
//! dropped and the latencies they kept are the DAG's. Across a region's start, a latency still
//! running from the code before holds the first instructions back (branch targets are reached
//! after three delay slots, longer than any latency, so only the fall-through matters).

use crate::emit::{EmitError, Emitted, Origin};
use kiln_qpu::isa::effects::{self, Effect, Resource};
use kiln_qpu::isa::{AddOp, AluInstr, Instr, MulOp, Mux, Signal, Unpack, WriteFields};
use kiln_qpu::isa::{latency, raddr, waddr};
use kiln_sched::{Access, Dag};

fn internal(m: &str) -> EmitError {
    EmitError::Internal(format!("scheduler: {m}"))
}

/// Schedules an emitted program.
pub fn schedule(e: &Emitted) -> Result<Emitted, EmitError> {
    let n = e.instrs.len();
    let mut label = vec![false; n + 1];
    let mut fixed = vec![false; n];
    for (i, ins) in e.instrs.iter().enumerate() {
        let slots = match ins {
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
            Instr::Alu(a) if held(a.sig) => 3,
            _ if effects::writes(ins)
                .iter()
                .any(|w| w.waddr == waddr::UNIFORMS_ADDRESS) =>
            {
                1
            }
            _ => 0,
        };
        for f in fixed.iter_mut().skip(i).take(slots) {
            *f = true;
        }
    }
    let mut rank = vec![None; n];
    let mut takers = 0;
    for (i, ins) in e.instrs.iter().enumerate() {
        if effects::takes_uniform(ins) {
            rank[i] = Some(takers);
            takers += 1;
        }
    }
    if takers != e.uniforms.len() && takers + 1 != e.uniforms.len() {
        return Err(internal("the uniform table is not one entry per read"));
    }

    let mut s = Scheduler {
        e,
        rank,
        out: Vec::with_capacity(n),
        origins: Vec::with_capacity(n),
        from: Vec::with_capacity(n),
        uniforms: e.uniforms.clone(),
        next_uniform: 0,
        read_at: vec![0; Resource::COUNT],
        write_at: vec![0; Resource::COUNT],
        written: vec![None; Resource::COUNT],
        effects: Vec::new(),
    };
    // No TLB access or scoreboard wait in the first two instructions.
    s.write_at[Resource::Tlb.index()] = 2;
    let mut position = vec![None; n + 1];
    let mut region = Vec::new();
    for i in 0..n {
        if label[i] || fixed[i] {
            s.region(&region)?;
            region.clear();
            position[i] = Some(s.out.len());
        }
        if fixed[i] {
            s.fixed(i);
        } else if e.instrs[i] != Instr::nop() {
            region.push(i);
        }
    }
    s.region(&region)?;
    position[n] = Some(s.out.len());

    // Relocate: relative branches count from the branch + 4 instructions.
    let mut out = s.out;
    for (at, from) in s.from.iter().enumerate() {
        if let Some(Instr::Branch(b)) = from.map(|f| &e.instrs[f]) {
            let from = from.expect("a branch's instruction");
            let target = (from as i64 + 4 + b.imm as i64 / 8) as usize;
            let to = position[target].ok_or_else(|| internal("a branch into a region"))?;
            if let Instr::Branch(nb) = &mut out[at] {
                nb.imm = 8 * (to as i32 - (at as i32 + 4));
            }
        }
    }
    Ok(Emitted {
        instrs: out,
        origins: s.origins,
        uniforms: s.uniforms,
        varyings: e.varyings.clone(),
        output_rows: e.output_rows.clone(),
    })
}

/// Signals that keep their instruction and the two after it in place.
fn held(s: Signal) -> bool {
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
    /// Per instruction of `e`, the uniform-table entry it reads.
    rank: Vec<Option<usize>>,
    out: Vec<Instr>,
    origins: Vec<[Origin; 2]>,
    /// Per instruction of `out`, the instruction of `e` it is (for a pair, the first; none
    /// for a `nop`).
    from: Vec<Option<usize>>,
    uniforms: Vec<crate::uniforms::Uniform>,
    next_uniform: usize,
    /// Per resource, the first instruction that may read it and the first that may write it.
    read_at: Vec<usize>,
    write_at: Vec<usize>,
    /// Per resource, the instruction that last wrote it.
    written: Vec<Option<usize>>,
    effects: Vec<Effect>,
}

impl Scheduler<'_> {
    /// Appends an instruction made of instructions `parts` of the input (none: a `nop`).
    fn put(&mut self, i: Instr, parts: &[usize]) -> Result<(), EmitError> {
        let at = self.out.len();
        self.effects.clear();
        effects::effects(&i, &mut self.effects);
        for e in &self.effects {
            let r = e.resource.index();
            if e.write {
                self.written[r] = Some(at);
                self.read_at[r] = self.read_at[r].max(at + e.distance as usize);
                self.write_at[r] = self.write_at[r].max(at + waw(e) as usize);
            }
        }
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
        self.origins.push([first, origin(parts.get(1)).unwrap_or(first)]);
        self.from.push(parts.first().copied());
        self.out.push(i);
        Ok(())
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

    /// Places an instruction kept where it is, after the `nop`s its inputs still need.
    fn fixed(&mut self, i: usize) {
        let ins = self.e.instrs[i];
        let need = self.earliest(&ins);
        while self.out.len() < need {
            let _ = self.put(Instr::nop(), &[]);
        }
        let _ = self.put(ins, &[i]);
    }

    /// Schedules the instructions `idx` of the input, placing them after what is placed.
    fn region(&mut self, idx: &[usize]) -> Result<(), EmitError> {
        if idx.is_empty() {
            return Ok(());
        }
        let base = self.out.len();
        let mut accesses: Vec<Vec<Access>> = Vec::with_capacity(idx.len());
        let mut earliest = Vec::with_capacity(idx.len());
        let mut classes = Vec::with_capacity(idx.len());
        for &i in idx {
            let ins = self.e.instrs[i];
            classes.push(class(&ins));
            earliest.push(self.earliest(&ins).saturating_sub(base) as u32);
            accesses.push(self.effects.iter().map(|e| access(e, &ins)).collect());
        }
        let dag = Dag::build(accesses.iter().map(Vec::as_slice), Resource::COUNT);
        let instrs: Vec<Instr> = idx.iter().map(|&i| self.e.instrs[i]).collect();
        let slots = kiln_sched::schedule(&dag, &earliest, &classes, |a, b| {
            merge(&instrs[a as usize], &instrs[b as usize]).is_some()
        });
        for slot in slots {
            match slot {
                [None, _] => self.put(Instr::nop(), &[])?,
                [Some(a), None] => self.put(instrs[a as usize], &[idx[a as usize]])?,
                [Some(a), Some(b)] => {
                    let (x, y) = (&instrs[a as usize], &instrs[b as usize]);
                    let m = merge(x, y).ok_or_else(|| internal("a pair that does not merge"))?;
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

/// Which ready instructions go first (Mesa's `get_instruction_priority`): texture requests
/// early, so that their results have time to come; TMU result loads late; the scoreboard
/// wait and the tile buffer last, so that the QPU holds the tile's lock as briefly as
/// possible.
fn class(i: &Instr) -> u8 {
    let tlb = effects::is_tlb(i) || i.signal() == Some(Signal::ScoreboardWait);
    if tlb {
        0
    } else if matches!(i.signal(), Some(Signal::LoadTmu0 | Signal::LoadTmu1)) {
        1
    } else if effects::writes(i).iter().any(|w| waddr::is_tmu(w.waddr)) {
        3
    } else {
        2
    }
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
    effects::writes(i)
        .iter()
        .any(|w| w.waddr == waddr::TMU0_S || w.waddr == waddr::TMU1_S)
}

/// The read port an instruction occupies on file A: the register its muxes read, or an I/O
/// read address (read whether a mux uses it or not).
fn port_a(a: &AluInstr) -> Option<u8> {
    (effects::used_muxes(a).contains(&Mux::A) || (a.raddr_a >= 32 && a.raddr_a != raddr::NOP))
        .then_some(a.raddr_a)
}

/// File B's port: a register or I/O read (`Ok`), or a small immediate (`Err`).
fn port_b(a: &AluInstr) -> Option<Result<u8, u8>> {
    if a.sig == Signal::SmallImm {
        return Some(Err(a.raddr_b));
    }
    (effects::used_muxes(a).contains(&Mux::B) || (a.raddr_b >= 32 && a.raddr_b != raddr::NOP))
        .then_some(Ok(a.raddr_b))
}

/// Whether a write address means the same in both files' write ports (the accumulators).
fn either_file(w: u8) -> bool {
    w == waddr::NOP || (waddr::R0..=waddr::R3).contains(&w)
}

/// One instruction doing what `x` and `y` do, when their fields allow it (Mesa's
/// `qpu_merge_inst`): one add and one mul operation, one signal, the read ports shared only
/// for one register or one small immediate, writes to different files, flags set by the
/// operation that set them, at most one pack or unpack and nothing else it would apply to, at
/// most one uniform read and one peripheral access.
pub fn merge(x: &Instr, y: &Instr) -> Option<Instr> {
    let (Instr::Alu(x), Instr::Alu(y)) = (x, y) else {
        return None;
    };
    if (x.op_add != AddOp::Nop && y.op_add != AddOp::Nop)
        || (x.op_mul != MulOp::Nop && y.op_mul != MulOp::Nop)
        || (effects::takes_uniform(&Instr::Alu(*x)) && effects::takes_uniform(&Instr::Alu(*y)))
    {
        return None;
    }
    let add = if x.op_add != AddOp::Nop { x } else { y };
    let mul = if x.op_mul != MulOp::Nop { x } else { y };
    let add_on = add.op_add != AddOp::Nop;
    let mul_on = mul.op_mul != MulOp::Nop;

    // Read ports.
    let raddr_a = match (port_a(x), port_a(y)) {
        (Some(p), Some(q)) if p == q && p < 32 => p,
        (Some(_), Some(_)) => return None,
        (p, q) => p.or(q).unwrap_or(raddr::NOP),
    };
    let b = match (port_b(x), port_b(y)) {
        (Some(Ok(p)), Some(Ok(q))) if p == q && p < 32 => Some(Ok(p)),
        (Some(Err(p)), Some(Err(q))) if p == q => Some(Err(p)),
        (Some(_), Some(_)) => return None,
        (p, q) => p.or(q),
    };
    // Signals: one, or a small immediate.
    let signal = |s: Signal| !matches!(s, Signal::None | Signal::SmallImm);
    if signal(x.sig) && signal(y.sig) {
        return None;
    }
    let sig = match b {
        Some(Err(code)) => {
            if code >= 48 || signal(x.sig) || signal(y.sig) {
                return None;
            }
            Signal::SmallImm
        }
        _ if signal(x.sig) => x.sig,
        _ => y.sig,
    };
    if sig == Signal::Breakpoint {
        return None;
    }
    let raddr_b = match b {
        Some(Ok(r) | Err(r)) => r,
        None => raddr::NOP,
    };

    // Writes: each unit's address and condition, one write-swap bit for both.
    let mut w = WriteFields::NONE;
    let mut ws = None;
    if add_on {
        w.waddr_add = add.w.waddr_add;
        w.cond_add = add.w.cond_add;
        if !either_file(w.waddr_add) {
            ws = Some(add.w.ws);
        }
    }
    if mul_on {
        w.waddr_mul = mul.w.waddr_mul;
        w.cond_mul = mul.w.cond_mul;
        if !either_file(w.waddr_mul) {
            match ws {
                Some(v) if v != mul.w.ws => return None,
                _ => ws = Some(mul.w.ws),
            }
        }
    }
    if add_on && mul_on && w.waddr_add == w.waddr_mul && w.waddr_add != waddr::NOP {
        return None;
    }
    w.ws = ws.unwrap_or(false);

    // Flags come from the add result when there is an add operation, else the mul's.
    if x.w.sf && y.w.sf {
        return None;
    }
    if let Some(s) = [x, y].into_iter().find(|i| i.w.sf) {
        let sets_add = s.op_add != AddOp::Nop;
        if (!sets_add && s.op_mul == MulOp::Nop) || sets_add != add_on {
            return None;
        }
        w.sf = true;
    }

    // Pack and unpack: one owner, and nothing of the other's it would apply to.
    let packs = |i: &AluInstr| i.w.pack != 0 || i.unpack != Unpack::None;
    let mut unpack = Unpack::None;
    match (packs(x), packs(y)) {
        (true, true) => return None,
        (false, false) => {}
        (px, _) => {
            let (owner, other) = if px { (x, y) } else { (y, x) };
            w.pm = owner.w.pm;
            w.pack = owner.w.pack;
            unpack = owner.unpack;
            let muxes = effects::used_muxes(other);
            if owner.w.pack != 0 {
                if owner.w.pm {
                    // The mul unit's pack: the mul operation must be the owner's.
                    if other.op_mul != MulOp::Nop {
                        return None;
                    }
                } else {
                    // The file-A pack: the other's write must not be a file-A register.
                    let other_writes_a = (other.op_add != AddOp::Nop
                        && w.waddr_add < 32
                        && !w.ws)
                        || (other.op_mul != MulOp::Nop && w.waddr_mul < 32 && w.ws);
                    if other_writes_a {
                        return None;
                    }
                }
            }
            if owner.unpack != Unpack::None {
                let unpacked = if owner.w.pm { Mux::R4 } else { Mux::A };
                if muxes.contains(&unpacked) {
                    return None;
                }
            }
        }
    }

    let (add_a, add_b) = (add.add_a, add.add_b);
    let (mul_a, mul_b) = (mul.mul_a, mul.mul_b);
    let m = AluInstr {
        sig,
        unpack,
        w,
        op_mul: if mul_on { mul.op_mul } else { MulOp::Nop },
        op_add: if add_on { add.op_add } else { AddOp::Nop },
        raddr_a,
        raddr_b,
        add_a,
        add_b,
        mul_a,
        mul_b,
    };
    let merged = Instr::Alu(m);
    if effects::peripheral_accesses(&merged) > 1 || vpm_setup_conflict(&merged) {
        return None;
    }
    Some(merged)
}

/// A VPM setup write in the same instruction as another VPM access.
fn vpm_setup_conflict(i: &Instr) -> bool {
    let ws = effects::writes(i);
    let setups = ws.iter().filter(|w| w.waddr == waddr::VPM_SETUP).count();
    setups > 0
        && (setups > 1
            || effects::io_reads(i).contains(&raddr::VPM)
            || ws.iter().any(|w| w.waddr == waddr::VPM))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_qpu::isa::{assemble_line, decode};

    fn asm(s: &str) -> Instr {
        decode(assemble_line(s).unwrap_or_else(|e| panic!("{s}: {e:?}")))
    }

    #[test]
    fn an_add_and_a_mul_pair() {
        let x = asm("fadd r0, r1, r2 ; nop");
        let y = asm("nop ; fmul r3, r1, r1");
        assert_eq!(merge(&x, &y), Some(asm("fadd r0, r1, r2 ; fmul r3, r1, r1")));
        assert_eq!(merge(&y, &x), Some(asm("fadd r0, r1, r2 ; fmul r3, r1, r1")));
    }
}
