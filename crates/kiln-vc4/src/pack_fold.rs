//! Colour bytes packed by their producer: where the emitter packs a colour component into its
//! byte of the colour register with a move (`v8min ra14.8a, r3, r3`: the mul unit's float →
//! unorm8 pack), and the value moved is a mul-unit result read by nothing else, the operation
//! that computes it packs it itself (`fmul ra14.8a, …`, as Mesa's code does) and the move goes.
//! On the QPU code before scheduling, with the liveness of [`crate::rename`].

use crate::rename::{Regs, joins, liveness, refs};
use kiln_qpu::isa::validate::successors;
use kiln_qpu::isa::effects;
use kiln_qpu::isa::{AddOp, Cond, Instr, MulOp, Mux, Signal, Unpack};

/// The mul unit's pack codes 8a–8d.
const BYTES: std::ops::RangeInclusive<u8> = 4..=7;

/// Folds pack moves into their producers in `code` (a folded move becomes a `nop`, which the
/// scheduler drops); `live_at_end` as for [`crate::rename::rename`].
pub fn fold(code: &mut [Instr], live_at_end: Regs) {
    let n = code.len();
    let mut scratch = Vec::new();
    let mut r: Vec<_> = code.iter().map(|i| refs(i, &mut scratch)).collect();
    let live_out = liveness(&r, &successors(code), live_at_end);
    let joins = joins(code);
    for j in 0..n {
        let Instr::Alu(m) = code[j] else { continue };
        let is_pack_move = m.op_add == AddOp::Nop
            && m.op_mul == MulOp::V8min
            && m.mul_a == m.mul_b
            && m.w.pm
            && BYTES.contains(&m.w.pack)
            && m.w.cond_mul == Cond::Always
            && m.w.waddr_mul < 32
            && m.unpack == Unpack::None
            && m.sig == Signal::None;
        if !is_pack_move {
            continue;
        }
        // The value moved: an accumulator r0–r3, or a file register.
        let src: u32 = match m.mul_a {
            Mux::R0 | Mux::R1 | Mux::R2 | Mux::R3 => 64 + m.mul_a as u32,
            Mux::A if m.raddr_a < 32 => m.raddr_a as u32,
            Mux::B if m.raddr_b < 32 => 32 + m.raddr_b as u32,
            _ => continue,
        };
        let dst: u32 = if m.w.ws { 0 } else { 32 } + m.w.waddr_mul as u32;
        let (s, d): (Regs, Regs) = (1 << src, 1 << dst);
        if live_out[j] & s != 0 {
            continue;
        }
        // Its producer: the last write before, in the same straight-line code, with nothing
        // else reading the value and nothing reading or wholly writing the colour between.
        // (Other bytes of the colour packed between are fine: they write other bytes.)
        let reads_colour = |k: usize| {
            let (ra, rb) = effects::regfile_reads(&code[k]);
            if dst < 32 {
                ra == Some(dst as u8)
            } else {
                rb == Some((dst - 32) as u8)
            }
        };
        let mut i = j;
        let producer = loop {
            if i == 0 || joins[i] {
                break None;
            }
            i -= 1;
            let ri = r[i];
            if ri.whole & s != 0 {
                break Some(i);
            }
            if ri.part & s != 0 || ri.reads & s != 0 || ri.whole & d != 0 || reads_colour(i) {
                break None;
            }
        };
        let Some(i) = producer else { continue };
        if reads_colour(i) || r[i].whole & d != 0 || r[i].part & d != 0 {
            continue;
        }
        let Instr::Alu(p) = code[i] else { continue };
        let produces = p.op_add == AddOp::Nop
            && p.op_mul != MulOp::Nop
            && p.w.pack == 0
            && p.w.cond_mul == Cond::Always
            && (p.unpack == Unpack::None || p.w.pm)
            && !matches!(p.sig, Signal::ThreadSwitch | Signal::LastThreadSwitch);
        if !produces {
            continue;
        }
        let mut q = p;
        q.w.waddr_mul = m.w.waddr_mul;
        q.w.ws = m.w.ws;
        q.w.pm = true;
        q.w.pack = m.w.pack;
        code[i] = Instr::Alu(q);
        code[j] = Instr::nop();
        r[i] = refs(&code[i], &mut scratch);
        r[j] = refs(&code[j], &mut scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_qpu::isa::{
        AluInstr,
        builder::{self, Reg},
    };

    /// `fmul r3, r1, r2` then `v8min ra14.8a, r3, r3` (pm): the fmul packs, the move goes; a
    /// product read again later is left alone.
    #[test]
    fn the_producer_packs_its_byte() {
        let fmul = |d| Instr::Alu(builder::qpu_m(MulOp::Fmul, d, Reg::Acc(1), Reg::Acc(2)).unwrap());
        let pack = |k: u8| {
            Instr::Alu(
                builder::qpu_m(MulOp::V8min, Reg::A(14), Reg::Acc(3), Reg::Acc(3))
                    .unwrap()
                    .pack(true, 4 + k),
            )
        };
        let mut end = AluInstr::nop();
        end.sig = Signal::ProgramEnd;
        let end = [Instr::Alu(end), Instr::nop(), Instr::nop()];
        let mut code = vec![fmul(Reg::Acc(3)), pack(0)];
        code.extend(end);
        fold(&mut code, 1 << 14);
        let Instr::Alu(p) = code[0] else { panic!() };
        assert_eq!((p.op_mul, p.w.waddr_mul, p.w.ws, p.w.pm, p.w.pack), (MulOp::Fmul, 14, true, true, 4));
        assert_eq!(code[1], Instr::nop());
        // r3 read after the move: kept.
        let mut code = vec![fmul(Reg::Acc(3)), pack(0), Instr::Alu(builder::mov(Reg::Acc(0), Reg::Acc(3)).unwrap())];
        code.extend(end);
        let before = code.clone();
        fold(&mut code, 1 << 14);
        assert_eq!(code, before);
    }
}
