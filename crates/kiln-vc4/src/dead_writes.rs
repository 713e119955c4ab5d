//! Dead writes out of the QPU code before scheduling: an ALU operation or load immediate whose
//! only effect is a register nothing reads afterwards — and flags nothing tests — goes, the way
//! a dead-code pass after register allocation removes what the allocator's copies and the
//! execute mask's bookkeeping left (the mask reset at a program's last endif, a value copied
//! for a path that ends). Liveness is the renaming pass's, over the program's control flow
//! ([`crate::rename::liveness`]); flags count as dead only where, in the straight-line code that
//! follows, they are set again or the program ends before anything tests them.

use crate::rename::{Regs, liveness, refs};
use kiln_qpu::isa::effects;
use kiln_qpu::isa::validate::{block_starts, successors};
use kiln_qpu::isa::{AddOp, Cond, Instr, MulOp, Mux, Signal, raddr, waddr};

/// Removes dead operations from `code` (a removed instruction becomes a `nop`, which the
/// scheduler drops); `live_at_end` as for [`crate::rename::rename`]. Instructions that read the
/// uniform stream, a varying, the VPM or a mutex, carry a signal, or write anything but
/// registers keep their effects. One backward walk: within straight-line code the registers
/// live after an instruction are those the instructions after it — as they are left — still
/// read, so a chain of dead writes goes at once; at a block's end they are the liveness over
/// the control flow, computed once.
pub fn remove(code: &mut [Instr], live_at_end: Regs) {
    let mut r = crate::rename::refs_of(code);
    let live_out = liveness(&r, &successors(code), live_at_end);
    remove_with(code, &mut r, &live_out, live_at_end);
}

/// [`remove`] with what the code's instructions read and write (`r`, kept current for the
/// instructions it changes) and the registers live after each (`live_out`) known
/// ([`crate::rename::rename`] returns them). Returns, per instruction and at the end, the
/// registers live before it in the code as it is left (exact within straight-line code; at a
/// block's end, the liveness given).
pub fn remove_with(
    code: &mut [Instr],
    r: &mut [crate::rename::Refs],
    live_out: &[Regs],
    live_at_end: Regs,
) -> Vec<Regs> {
    let succ = successors(code);
    let starts = block_starts(code);
    let mut live_in = vec![live_at_end; code.len() + 1];
    let mut live: Regs = 0;
    for i in (0..code.len()).rev() {
        if starts[i + 1] || succ[i].as_slice() != [i + 1] {
            live = live_out[i];
        }
        let dead = |waddr: u8, file_a: bool| {
            register_bit(waddr, file_a).is_some_and(|b| live & (1 << b) == 0)
        };
        // Scanned only for an instruction that sets flags, up to the next that does (or a test,
        // a branch, a block start): each stretch of code is scanned once.
        let sets_flags = match &code[i] {
            Instr::Alu(a) => a.w.sf,
            Instr::LoadImm(l) => l.w.sf,
            _ => false,
        };
        let flags_dead = sets_flags && flags_dead_after(code, &starts, i);
        let before = code[i];
        match &mut code[i] {
            Instr::Alu(a) => {
                // Which operation sets the flags: the add unit's, or the mul unit's when the
                // add unit has none.
                let add_sets = a.w.sf && a.op_add != AddOp::Nop;
                let mul_sets = a.w.sf && a.op_add == AddOp::Nop;
                let add_gone = a.op_add != AddOp::Nop
                    && (a.w.waddr_add == waddr::NOP || dead(a.w.waddr_add, !a.w.ws))
                    && (!add_sets || flags_dead);
                let mul_gone = a.op_mul != MulOp::Nop
                    && (a.w.waddr_mul == waddr::NOP || dead(a.w.waddr_mul, a.w.ws))
                    && (!mul_sets || flags_dead);
                if add_gone {
                    a.op_add = AddOp::Nop;
                    a.w.waddr_add = waddr::NOP;
                    a.w.cond_add = Cond::Never;
                }
                if mul_gone {
                    a.op_mul = MulOp::Nop;
                    a.w.waddr_mul = waddr::NOP;
                    a.w.cond_mul = Cond::Never;
                }
                if add_gone || mul_gone {
                    if a.op_add == AddOp::Nop && a.op_mul == MulOp::Nop {
                        a.w.sf = false;
                    }
                    // A register-file address no operation reads any more is not encoded: it
                    // would still count as a read (Mesa's validator counts encoded addresses).
                    let muxes = effects::used_muxes(a);
                    if !muxes.contains(&Mux::A) && a.raddr_a < 32 {
                        a.raddr_a = raddr::NOP;
                    }
                    if !muxes.contains(&Mux::B) && a.raddr_b < 32 && a.sig != Signal::SmallImm {
                        a.raddr_b = raddr::NOP;
                    }
                }
            }
            Instr::LoadImm(l) => {
                let gone = |waddr: u8, file_a: bool| waddr == waddr::NOP || dead(waddr, file_a);
                if !l.w.sf && gone(l.w.waddr_add, !l.w.ws) && gone(l.w.waddr_mul, l.w.ws) {
                    code[i] = Instr::nop();
                }
            }
            _ => {}
        }
        if let Instr::Alu(a) = &code[i]
            && a.op_add == AddOp::Nop
            && a.op_mul == MulOp::Nop
            && matches!(a.sig, Signal::None | Signal::SmallImm)
            && ![raddr::UNIFORM, raddr::VARYING, raddr::VPM, raddr::MUTEX]
                .iter()
                .any(|&r| effects::reads_io(&code[i], r))
        {
            code[i] = Instr::nop();
        }
        // What is live before the instruction as it is now.
        if code[i] != before {
            r[i] = refs(&code[i]);
        }
        let now = r[i];
        live = now.reads | (live & !now.whole);
        live_in[i] = live;
    }
    live_in
}

/// The liveness bit of a register write the pass may remove (file A 0–31, file B 32–63,
/// r0–r3 64–67; r5, which also holds what a varying read leaves, stays).
fn register_bit(w: u8, file_a: bool) -> Option<u32> {
    crate::rename::write_bit(w, file_a).filter(|&b| b != crate::rename::R5)
}

/// Whether the flags instruction `i` sets are never tested: the straight-line code after it
/// sets them again, or the program ends, before any conditional write, branch or block start.
fn flags_dead_after(code: &[Instr], starts: &[bool], i: usize) -> bool {
    i + 1 >= code.len() || (!starts[i + 1] && flags_dead_from(code, starts, i + 1))
}

/// Whether the flags as they are on reaching instruction `from` are never tested: from there
/// the straight-line code sets them again, or the program ends, before any conditional write,
/// branch or other block start (a block may start at `from` itself).
pub(crate) fn flags_dead_from(code: &[Instr], starts: &[bool], from: usize) -> bool {
    for (j, ins) in code.iter().enumerate().skip(from) {
        if starts[j] && j != from {
            return false;
        }
        match ins {
            Instr::Branch(_) => return false,
            Instr::Alu(a) => {
                let tests = (a.op_add != AddOp::Nop
                    && !matches!(a.w.cond_add, Cond::Always | Cond::Never))
                    || (a.op_mul != MulOp::Nop
                        && !matches!(a.w.cond_mul, Cond::Always | Cond::Never));
                if tests {
                    return false;
                }
                if a.w.sf {
                    return true;
                }
            }
            Instr::LoadImm(l) => {
                if !matches!(l.w.cond_add, Cond::Always | Cond::Never)
                    || !matches!(l.w.cond_mul, Cond::Always | Cond::Never)
                {
                    return false;
                }
                if l.w.sf {
                    return true;
                }
            }
            Instr::Semaphore(_) => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_qpu::isa::builder::{self, Reg};

    fn alu(a: Result<kiln_qpu::isa::AluInstr, kiln_qpu::isa::builder::BuildError>) -> Instr {
        Instr::Alu(a.expect("valid"))
    }

    /// A value written and never read goes, with the flags only its condition tested; a value
    /// the colour reads stays, as do flags a later conditional write tests and whatever reads
    /// a uniform.
    #[test]
    fn only_what_nothing_reads_goes() {
        let code = vec![
            // r0 = x + y: read by the colour write.
            alu(builder::qpu_a(
                AddOp::Fadd,
                Reg::Acc(0),
                Reg::A(1),
                Reg::B(2),
            )),
            // r1 = x: never read.
            alu(builder::mov(Reg::Acc(1), Reg::A(1))),
            // flags from ra13 − rb3, tested only by a dead conditional write.
            alu(builder::qpu_a(AddOp::Sub, Reg::Nop, Reg::A(13), Reg::B(3)).map(|a| a.sf())),
            alu(builder::mov(Reg::A(13), Reg::B(4)).map(|a| a.cond_add(Cond::Zs))),
            // flags tested by a live conditional write.
            alu(builder::qpu_a(AddOp::Sub, Reg::Nop, Reg::A(5), Reg::B(3)).map(|a| a.sf())),
            alu(builder::mov(Reg::Acc(0), Reg::B(4)).map(|a| a.cond_add(Cond::Zs))),
            // a dead value from the uniform stream: its read stays.
            alu(builder::mov(Reg::Acc(2), Reg::ReadA(raddr::UNIFORM))),
            alu(builder::mov(Reg::Io(waddr::TLB_COLOR_ALL), Reg::Acc(0))),
        ];
        let mut out = code.clone();
        remove(&mut out, 0);
        let gone: Vec<bool> = out.iter().map(|i| i.is_nop()).collect();
        assert_eq!(
            gone,
            vec![false, true, true, true, false, false, false, false],
            "{out:#?}"
        );
        // The uniform read keeps its instruction, its write gone.
        let Instr::Alu(u) = &out[6] else { panic!() };
        assert!(u.op_add == AddOp::Nop && effects::reads_io(&out[6], raddr::UNIFORM));
        // Something read after the end keeps what writes it.
        let mut kept = code.clone();
        remove(&mut kept, 1 << 65);
        assert!(kept[1] != Instr::nop());
    }
}
