//! Reads of r4's copy forwarded to r4: where the code copies an SFU or texture result out of
//! r4 into an accumulator (`mov r1, r4`), the instructions after the copy in straight-line code
//! read r4 instead of the copy, up to the first that writes r4 (an SFU request, a texture or
//! colour load) or the copy's register, or a thread switch — of those before a write of r4,
//! only the ones that write would wait for anyway. A copy read by nothing then goes with the
//! other dead writes ([`crate::dead_writes`], which runs next). On the QPU code before
//! scheduling; the scheduler's DAG orders each forwarded read after r4's write and before the
//! next (Mesa's vc4 copies every SFU result out of r4, `qir_SFU`).

use crate::rename::{Refs, refs};
use kiln_qpu::isa::effects::{self, Resource};
use kiln_qpu::isa::validate::block_starts;
use kiln_qpu::isa::{AddOp, Cond, Instr, MulOp, Mux, Signal, Unpack, waddr};

/// How far after a copy its reads and the next write of r4 are looked for (a bound on the
/// cost per copy; a read further on keeps the copy).
const SPAN: usize = 64;

/// Forwards reads of copies of r4 in `code` to r4; `r` is what each instruction reads and
/// writes ([`refs`], kept current). Where r4 is written again later in the straight-line code,
/// only the reads that write (through any chain of registers) what that write reads are
/// forwarded: another read of r4 would have to go before it, a false dependence the copy
/// avoids (the next SFU request could no longer start early). Returns how many reads it
/// forwarded.
pub fn forward(code: &mut [Instr], r: &mut [Refs]) -> usize {
    let starts = block_starts(code);
    let mut scratch = Vec::new();
    let mut sites = Vec::new();
    let mut forwarded = 0;
    for i in 0..code.len() {
        let Some(copy) = r4_copy(&code[i]) else {
            continue;
        };
        let bit = 1u128 << (64 + copy);
        sites.clear();
        // The next write of r4 in the straight-line code, if any (looked for past the copy's
        // end too: a read of r4 is tied before it all the same).
        let mut rewrite = None;
        let mut open = true;
        for j in i + 1..code.len().min(i + 1 + SPAN) {
            if starts[j] {
                break;
            }
            scratch.clear();
            effects::effects(&code[j], &mut scratch);
            if scratch
                .iter()
                .any(|e| e.write && e.resource == Resource::R4)
            {
                rewrite = Some(j);
                break;
            }
            let reads = open && r[j].reads & bit != 0;
            match &code[j] {
                Instr::Alu(a) => {
                    if matches!(
                        a.sig,
                        Signal::ThreadSwitch | Signal::LastThreadSwitch | Signal::ProgramEnd
                    ) {
                        break;
                    }
                    // A rotation reads accumulators only; an r4 unpack would apply to the
                    // value; a partial write of the copy reads it without a mux.
                    let rotation = effects::is_rotation(a);
                    let unpacks_r4 = a.w.pm && a.unpack != Unpack::None;
                    if reads && (rotation || unpacks_r4 || r[j].part & bit != 0) {
                        break;
                    }
                    if reads {
                        sites.push(j);
                    }
                }
                Instr::LoadImm(_) => {}
                _ => break,
            }
            open &= (r[j].whole | r[j].part) & bit == 0;
        }
        if let Some(w) = rewrite {
            // The reads the rewrite waits on anyway.
            let mut needed = r[w].reads;
            let mut feeds = vec![false; w - i];
            for j in (i + 1..w).rev() {
                if (r[j].whole | r[j].part) & needed != 0 {
                    needed |= r[j].reads;
                    feeds[j - i] = true;
                }
            }
            sites.retain(|&j| feeds[j - i]);
        }
        let from = Mux::ALL[copy];
        for &j in &sites {
            let Instr::Alu(a) = &mut code[j] else {
                continue;
            };
            let mut used: Vec<&mut Mux> = Vec::with_capacity(4);
            if a.op_add != AddOp::Nop {
                used.extend([&mut a.add_a, &mut a.add_b]);
            }
            if a.op_mul != MulOp::Nop {
                used.extend([&mut a.mul_a, &mut a.mul_b]);
            }
            for m in used.into_iter().filter(|m| **m == from) {
                *m = Mux::R4;
                forwarded += 1;
            }
            r[j] = refs(&code[j]);
        }
    }
    forwarded
}

/// The accumulator (0–3) that `ins` copies r4 into whole: a move on either unit, alone, with
/// no condition, flags, pack, unpack or signal.
fn r4_copy(ins: &Instr) -> Option<usize> {
    let Instr::Alu(a) = ins else { return None };
    if a.sig != Signal::None || a.unpack != Unpack::None || a.w.pack != 0 || a.w.sf {
        return None;
    }
    let to = |w: u8| {
        (waddr::R0..=waddr::R3)
            .contains(&w)
            .then(|| (w - waddr::R0) as usize)
    };
    if a.op_add == AddOp::Or
        && a.op_mul == MulOp::Nop
        && a.add_a == Mux::R4
        && a.add_b == Mux::R4
        && a.w.cond_add == Cond::Always
    {
        return to(a.w.waddr_add);
    }
    if a.op_mul == MulOp::V8min
        && a.op_add == AddOp::Nop
        && a.mul_a == Mux::R4
        && a.mul_b == Mux::R4
        && a.w.cond_mul == Cond::Always
    {
        return to(a.w.waddr_mul);
    }
    None
}
