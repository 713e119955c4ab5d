//! Bit counting, bit reversal and bitfields in shifts and masks, as NIR lowers them for
//! hardware without such instructions (`src/compiler/nir/nir_opt_algebraic.py`:
//! `lower_bit_count`, `lower_bitfield_reverse`, `lower_bitfield_extract`,
//! `lower_bitfield_insert`), written for the QPU's shifts, which use only the low 5 bits of the
//! count: every place where a count of 32 could arise is handled explicitly.
//!
//! The meaning matched is kiln's (`kiln_ir::semantics`): the offset is taken mod 32, the count
//! (unsigned) is clamped to 32 − offset, and a count of 0 extracts 0 and inserts nothing.

use super::{Emitter, ic};
use crate::ops::Op;
use kiln_ir::{Opcode, Operand};

fn k(x: u32) -> Operand {
    Operand::constant(x)
}

impl Emitter<'_> {
    /// Population count: pairs, nibbles, bytes summed in place (the classic SWAR count), then
    /// the four byte counts added with shifts (the QPU's `mul24` cannot take NIR's multiply
    /// by 0x01010101).
    pub(super) fn bitcount(&mut self, x: Operand) -> Operand {
        let t = self.q(Op::Shr, &[x, ic(1)]);
        let t = self.q(Op::And, &[t, k(0x5555_5555)]);
        let x = self.q(Op::Sub, &[x, t]);
        let lo = self.q(Op::And, &[x, k(0x3333_3333)]);
        let hi = self.q(Op::Shr, &[x, ic(2)]);
        let hi = self.q(Op::And, &[hi, k(0x3333_3333)]);
        let x = self.q(Op::Add, &[lo, hi]);
        let t = self.q(Op::Shr, &[x, ic(4)]);
        let x = self.q(Op::Add, &[x, t]);
        let x = self.q(Op::And, &[x, k(0x0f0f_0f0f)]);
        let t = self.q(Op::Shr, &[x, ic(8)]);
        let x = self.q(Op::Add, &[x, t]);
        let t = self.q(Op::Shr, &[x, ic(16)]);
        let x = self.q(Op::Add, &[x, t]);
        self.q(Op::And, &[x, k(0x3f)])
    }

    /// Bit reversal: swap neighbouring bits, pairs, nibbles and bytes with masks, then the two
    /// halves with one rotation.
    pub(super) fn bitreverse(&mut self, mut x: Operand) -> Operand {
        for (shift, mask) in [
            (1, 0x5555_5555),
            (2, 0x3333_3333),
            (4, 0x0f0f_0f0f),
            (8, 0x00ff_00ff),
        ] {
            let down = self.q(Op::Shr, &[x, ic(shift)]);
            let down = self.q(Op::And, &[down, k(mask)]);
            let up = self.q(Op::And, &[x, k(mask)]);
            let up = self.q(Op::Shl, &[up, ic(shift)]);
            x = self.q(Op::Or, &[down, up]);
        }
        self.q(Op::Ror, &[x, ic(16)])
    }

    /// The offset mod 32 and the count clamped to 32 − offset (unsigned).
    fn field(&mut self, offset: Operand, count: Operand) -> (Operand, Operand) {
        let o = self.q(Op::And, &[offset, ic(31)]);
        let room = self.q(Op::Sub, &[ic(32), o]);
        let fits = self.g(Opcode::Ult, &[count, room]);
        let c = self.g(Opcode::Sel, &[fits, count, room]);
        (o, c)
    }

    /// `ubfe`/`ibfe`: the field shifted to the top, then down by 32 − count (logical or
    /// arithmetic). Both shifts stay below 32 when count ≥ 1; count 0 is masked to 0.
    pub(super) fn bitfield_extract(
        &mut self,
        signed: bool,
        x: Operand,
        offset: Operand,
        count: Operand,
    ) -> Operand {
        let (o, c) = self.field(offset, count);
        let room = self.q(Op::Sub, &[ic(32), o]);
        let up = self.q(Op::Sub, &[room, c]);
        let top = self.q(Op::Shl, &[x, up]);
        let down = self.q(Op::Sub, &[ic(32), c]);
        let v = self.q(if signed { Op::Asr } else { Op::Shr }, &[top, down]);
        let some = self.g(Opcode::Ine, &[c, ic(0)]);
        self.q(Op::And, &[v, some])
    }

    /// `bfi`: the mask of `count` ones at `offset` (all ones shifted right by 32 − count, which
    /// is right for 32 and masked to 0 for 0), then base ^ ((base ^ (insert << offset)) & mask).
    pub(super) fn bitfield_insert(
        &mut self,
        base: Operand,
        insert: Operand,
        offset: Operand,
        count: Operand,
    ) -> Operand {
        let (o, c) = self.field(offset, count);
        let down = self.q(Op::Sub, &[ic(32), c]);
        let ones = self.q(Op::Shr, &[ic(-1), down]);
        let some = self.g(Opcode::Ine, &[c, ic(0)]);
        let ones = self.q(Op::And, &[ones, some]);
        let mask = self.q(Op::Shl, &[ones, o]);
        let moved = self.q(Op::Shl, &[insert, o]);
        let diff = self.q(Op::Xor, &[base, moved]);
        let diff = self.q(Op::And, &[diff, mask]);
        self.q(Op::Xor, &[base, diff])
    }
}
