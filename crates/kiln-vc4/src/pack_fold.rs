//! Colour bytes packed by their producer: where the emitter packs a colour component into its
//! byte of the colour register with a move (`v8min ra14.8a, r3, r3`: the mul unit's float →
//! unorm8 pack), and the value moved is a mul-unit result read by nothing else, the operation
//! that computes it packs it itself (`fmul ra14.8a, …`, as Mesa's code does) and the move goes.
//! On the QPU code before scheduling, with the liveness of [`crate::rename`].

use crate::rename::{Refs, Regs, liveness, refs};
use kiln_qpu::isa::effects;
use kiln_qpu::isa::validate::block_starts;
use kiln_qpu::isa::{AddOp, Cond, Instr, MulOp, Mux, Signal, Unpack, waddr};

/// The mul unit's pack codes 8a–8d.
const BYTES: std::ops::RangeInclusive<u8> = 4..=7;

/// Folds pack moves into their producers in `code` (a folded move becomes a `nop`, which the
/// scheduler drops); `r` is what each instruction reads and writes ([`refs`], kept current),
/// `succ` the control flow, `live_at_end` as for [`crate::rename::rename`]. `known`: the
/// registers live after each instruction ([`liveness`]) where a pass before found them and
/// changed nothing since; found here at the first pack move, and kept for the next pass where
/// nothing folds.
pub fn fold(
    code: &mut [Instr],
    r: &mut [Refs],
    succ: &[kiln_qpu::isa::validate::Successors],
    live_at_end: Regs,
    known: &mut Option<Vec<Regs>>,
) {
    let n = code.len();
    let mut joins = None;
    let mut folded = false;
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
        // (Liveness from before the first fold: a fold leaves what the others read alone.)
        let live_out = known.get_or_insert_with(|| liveness(r, succ, live_at_end));
        if live_out[j] & s != 0 {
            continue;
        }
        let joins = joins.get_or_insert_with(|| block_starts(code));
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
        r[i] = refs(&code[i]);
        r[j] = refs(&code[j]);
        folded = true;
    }
    if folded {
        // (What `known` holds is the liveness of the code before the folds.)
        *known = None;
    }
}

/// The colour register (ra14).
const COLOUR: u32 = 14;

/// The tile-buffer colour write, where it reads the colour register ra14 (with no unpack).
pub(crate) fn colour_write(code: &[Instr]) -> Option<(usize, kiln_qpu::isa::AluInstr)> {
    let t = code.iter().position(|i| {
        effects::write_addrs(i)
            .iter()
            .any(|&w| w == waddr::TLB_COLOR_ALL || w == waddr::TLB_COLOR_MS)
    })?;
    let Instr::Alu(tw) = code[t] else {
        return None;
    };
    (tw.raddr_a == COLOUR as u8 && effects::reads_mux(&tw, Mux::A) && tw.unpack == Unpack::None)
        .then_some((t, tw))
}

/// The colour in an accumulator (Mesa packs it into one): where the colour register ra14 is
/// written — its four bytes packed by the mul unit, or written whole first — and read by the
/// tile-buffer write all in the straight-line code after the last thread switch, an
/// accumulator nothing uses there holds it instead (one the first write reads last is free),
/// and the write reads it the next instruction rather than the second. `r`, `succ` and
/// `live_at_end` as for [`fold`].
pub fn colour_in_accumulator(
    code: &mut [Instr],
    r: &mut [Refs],
    succ: &[kiln_qpu::isa::validate::Successors],
    live_at_end: Regs,
    known: &mut Option<Vec<Regs>>,
) {
    move_colour(code, r, succ, live_at_end, false, known);
}

/// [`colour_in_accumulator`], and where no accumulator can hold the colour (a thread switch
/// among its writes, every accumulator busy), a file-A register free over its life instead
/// ([`crate::rename::movable`]'s): the program end and its delay slots may not touch
/// register 14, so a colour in another one lets the end take the last instructions
/// ([`crate::schedule`]'s `fill_end_slots`). For scheduled code.
pub fn colour_out_of_register_14(
    code: &mut [Instr],
    r: &mut [Refs],
    succ: &[kiln_qpu::isa::validate::Successors],
    live_at_end: Regs,
) {
    move_colour(code, r, succ, live_at_end, true, &mut None);
}

/// The colour's writes and its read moved from ra14 to an accumulator, or with `to_file` a
/// file-A register where no accumulator fits; `known` as for [`fold`].
fn move_colour(
    code: &mut [Instr],
    r: &mut [Refs],
    succ: &[kiln_qpu::isa::validate::Successors],
    live_at_end: Regs,
    to_file: bool,
    known: &mut Option<Vec<Regs>>,
) {
    let colour: Regs = 1 << COLOUR;
    let Some((t, _)) = colour_write(code) else {
        return;
    };
    let live_out = known.get_or_insert_with(|| liveness(r, succ, live_at_end));
    let joins = block_starts(code);
    if live_out[t] & colour != 0 {
        return;
    }
    // Back from the write: the colour's writes, up to a whole one or the four bytes.
    let mut refs_at = vec![t];
    let mut bytes = 0u8;
    let mut first = None;
    // Whether a thread switch lies among the colour's writes.
    let mut crossed = false;
    let mut k = t;
    while first.is_none() {
        if k == 0 || joins[k] {
            return;
        }
        k -= 1;
        let switch = matches!(
            code[k].signal(),
            Some(Signal::ThreadSwitch | Signal::LastThreadSwitch)
        );
        crossed |= switch;
        if switch && !to_file {
            return;
        }
        let rk = r[k];
        if (rk.reads | rk.whole | rk.part) & colour == 0 {
            continue;
        }
        match code[k] {
            Instr::Alu(_) if rk.whole & colour != 0 && rk.reads & colour == 0 => first = Some(k),
            Instr::LoadImm(l) if rk.whole & colour != 0 && l.w.waddr_mul == waddr::NOP => {
                first = Some(k)
            }
            Instr::Alu(a)
                if a.w.pm
                    && BYTES.contains(&a.w.pack)
                    && a.op_mul != MulOp::Nop
                    && a.w.waddr_mul == COLOUR as u8
                    && a.w.ws
                    && a.w.cond_mul == Cond::Always
                    && a.raddr_a != COLOUR as u8 =>
            {
                bytes |= 1 << (a.w.pack - 4);
                if bytes == 0xf {
                    first = Some(k);
                }
            }
            _ => return,
        }
        refs_at.push(k);
    }
    let Some(first) = first else { return };
    // Two instructions after a switch's signal it is still to come.
    crossed |= code[first.saturating_sub(2)..first].iter().any(|c| {
        matches!(
            c.signal(),
            Some(Signal::ThreadSwitch | Signal::LastThreadSwitch)
        )
    });
    if crossed && !to_file {
        return;
    }
    // Free from the colour's first write to its read: dead after each instruction, written by
    // none, read by none after the first write (which may read it: reads come before writes).
    let mut busy: Regs = live_out[t];
    for k in first..=t {
        busy |= live_out[k] | r[k].whole | r[k].part;
        if k > first {
            busy |= r[k].reads;
        }
    }
    let acc = (0..4u32)
        .find(|&a| !crossed && busy & (1 << (64 + a)) == 0)
        .map(|a| waddr::R0 + a as u8);
    // A file-A register free over the colour's life; the tile-buffer write reads it
    // through the same port.
    let file = || {
        let free = crate::rename::movable(code) & 0xffff_ffff & !busy;
        (to_file && free != 0).then(|| free.trailing_zeros() as u8)
    };
    let Some(to) = acc.or_else(file) else { return };
    *known = None;
    for &k in &refs_at {
        match &mut code[k] {
            Instr::Alu(a) if k == t => {
                if to < 32 {
                    a.raddr_a = to;
                    continue;
                }
                let m = Mux::from_bits(to - waddr::R0);
                for x in [&mut a.add_a, &mut a.add_b, &mut a.mul_a, &mut a.mul_b] {
                    if *x == Mux::A {
                        *x = m;
                    }
                }
                a.raddr_a = kiln_qpu::isa::raddr::NOP;
            }
            Instr::Alu(a) => {
                if a.w.waddr_mul == COLOUR as u8 && a.op_mul != MulOp::Nop && a.w.ws {
                    a.w.waddr_mul = to;
                } else {
                    a.w.waddr_add = to;
                }
            }
            Instr::LoadImm(l) => l.w.waddr_add = to,
            _ => {}
        }
    }
    for &k in &refs_at {
        r[k] = refs(&code[k]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_qpu::isa::validate::successors;

    fn facts(code: &[Instr]) -> (Vec<Refs>, Vec<kiln_qpu::isa::validate::Successors>) {
        (crate::rename::refs_of(code), successors(code))
    }
    use kiln_qpu::isa::{
        AluInstr,
        builder::{self, Reg},
    };

    /// `fmul r3, r1, r2` then `v8min ra14.8a, r3, r3` (pm): the fmul packs, the move goes; a
    /// product read again later is left alone.
    #[test]
    fn the_producer_packs_its_byte() {
        let fmul =
            |d| Instr::Alu(builder::qpu_m(MulOp::Fmul, d, Reg::Acc(1), Reg::Acc(2)).unwrap());
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
        let (mut r, succ) = facts(&code);
        fold(&mut code, &mut r, &succ, 1 << 14, &mut None);
        let Instr::Alu(p) = code[0] else { panic!() };
        assert_eq!(
            (p.op_mul, p.w.waddr_mul, p.w.ws, p.w.pm, p.w.pack),
            (MulOp::Fmul, 14, true, true, 4)
        );
        assert_eq!(code[1], Instr::nop());
        // r3 read after the move: kept.
        let mut code = vec![
            fmul(Reg::Acc(3)),
            pack(0),
            Instr::Alu(builder::mov(Reg::Acc(0), Reg::Acc(3)).unwrap()),
        ];
        code.extend(end);
        let before = code.clone();
        let (mut r, succ) = facts(&code);
        fold(&mut code, &mut r, &succ, 1 << 14, &mut None);
        assert_eq!(code, before);
    }

    /// Four bytes packed into ra14 and the tile-buffer write: an accumulator holds the colour;
    /// not when an accumulator-clobbering thread switch falls between.
    #[test]
    fn the_colour_moves_to_an_accumulator() {
        let pack = |k: u8| {
            Instr::Alu(
                builder::qpu_m(MulOp::Fmul, Reg::A(14), Reg::Acc(1), Reg::Acc(1))
                    .unwrap()
                    .pack(true, 4 + k),
            )
        };
        let write = Instr::Alu(builder::mov(Reg::Io(waddr::TLB_COLOR_ALL), Reg::A(14)).unwrap());
        let mut end = AluInstr::nop();
        end.sig = Signal::ProgramEnd;
        let program = |switch: bool| {
            let mut c = vec![Instr::Alu(
                builder::mov(Reg::Acc(1), Reg::Acc(2))
                    .unwrap()
                    .sig(if switch {
                        Signal::LastThreadSwitch
                    } else {
                        Signal::None
                    }),
            )];
            c.extend((0..4).map(pack));
            c.extend([write, Instr::Alu(end), Instr::nop(), Instr::nop()]);
            c
        };
        let mut code = program(false);
        let (mut r, succ) = facts(&code);
        colour_in_accumulator(&mut code, &mut r, &succ, 0, &mut None);
        // r1 is read by the packs: r0 is the free accumulator.
        for (k, i) in code[1..5].iter().enumerate() {
            let Instr::Alu(a) = i else { panic!() };
            assert_eq!(
                (a.w.waddr_mul, a.w.pm, a.w.pack),
                (waddr::R0, true, 4 + k as u8)
            );
        }
        let Instr::Alu(t) = code[5] else { panic!() };
        assert_eq!(
            (t.add_a, t.add_b, t.raddr_a),
            (Mux::R0, Mux::R0, kiln_qpu::isa::raddr::NOP)
        );
        let mut code = program(true);
        let before = code.clone();
        let (mut r, succ) = facts(&code);
        colour_in_accumulator(&mut code, &mut r, &succ, 0, &mut None);
        assert_eq!(code, before);
        // After scheduling, a file-A register other than 14 holds it across the switch: ra0,
        // the lowest free one a threaded shader's value may move to.
        let (mut r, succ) = facts(&code);
        colour_out_of_register_14(&mut code, &mut r, &succ, 0);
        for (k, i) in code[1..5].iter().enumerate() {
            let Instr::Alu(a) = i else { panic!() };
            assert_eq!(
                (a.w.waddr_mul, a.w.ws, a.w.pm, a.w.pack),
                (0, true, true, 4 + k as u8)
            );
        }
        let Instr::Alu(t) = code[5] else { panic!() };
        assert_eq!((t.add_a, t.raddr_a), (Mux::A, 0));
        assert_eq!(r, crate::rename::refs_of(&code), "refs kept current");
    }
}
