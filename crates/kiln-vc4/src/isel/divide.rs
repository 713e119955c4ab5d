//! Integer division and remainder, which the QPU lacks: NIR's lowering (`nir_lower_idiv.c`) of a
//! float reciprocal to a fixed-point one, exact for every pair of 32-bit inputs, and a multiply
//! for a constant divisor. The design, with the argument for exactness, is in `docs/vc4.md`
//! ("Integer division").

use super::{Emitter, SIGN, fc, ic};
use crate::ops::Op;
use kiln_ir::{Opcode, Operand, Value};

/// 2^32 − 2^13: the fixed-point scale of the float reciprocal, low enough that the estimate
/// never exceeds 2^32/d (see the module comment).
const RCP_SCALE: f32 = 4_294_959_104.0;

impl Emitter<'_> {
    /// `udiv`, `urem`, `idiv` or `irem` of n by d.
    pub(super) fn divide(&mut self, op: Opcode, n: Operand, d: Operand) -> Operand {
        let signed = matches!(op, Opcode::Idiv | Opcode::Irem);
        let quotient = matches!(op, Opcode::Idiv | Opcode::Udiv);
        if let Value::Const(c) = d.value {
            if c == 0 {
                return if quotient { n } else { ic(0) };
            }
            if !signed {
                return self.udivmod_const(n, c, quotient);
            }
            let an = self.iabs(n);
            let v = self.udivmod_const(an, (c as i32).unsigned_abs(), quotient);
            return self.fix_sign(op, n, d, v);
        }
        if !signed {
            let v = self.udivmod(n, d, quotient);
            return self.by_zero(op, n, d, v);
        }
        let an = self.iabs(n);
        let ad = self.iabs(d);
        let v = self.udivmod(an, ad, quotient);
        let v = self.fix_sign(op, n, d, v);
        self.by_zero(op, n, d, v)
    }

    /// |x| as Mesa computes it, max(x, 0 − x): i32::MIN stays 2^31, its magnitude as an
    /// unsigned value.
    fn iabs(&mut self, x: Operand) -> Operand {
        let neg = self.q(Op::Sub, &[ic(0), x]);
        self.q(Op::Max, &[x, neg])
    }

    /// The signed result from the unsigned quotient or remainder v of the magnitudes, as NIR's
    /// `emit_idiv`: the quotient negated where n and d differ in sign, the remainder given n's
    /// sign.
    fn fix_sign(&mut self, op: Opcode, n: Operand, d: Operand, v: Operand) -> Operand {
        // Negate where the sign mask s is all ones: (v ^ s) − s.
        let sign_of = if op == Opcode::Idiv {
            self.q(Op::Xor, &[n, d])
        } else {
            n
        };
        let s = self.q(Op::Asr, &[sign_of, ic(31)]);
        let flipped = self.q(Op::Xor, &[v, s]);
        self.q(Op::Sub, &[flipped, s])
    }

    /// The defined results for a zero divisor: the dividend for a quotient, 0 for a remainder.
    fn by_zero(&mut self, op: Opcode, n: Operand, d: Operand, v: Operand) -> Operand {
        let zero = self.g(Opcode::Ieq, &[d, ic(0)]);
        match op {
            Opcode::Idiv | Opcode::Udiv => self.g(Opcode::Sel, &[zero, n, v]),
            _ => self.g(Opcode::Sel, &[zero, ic(0), v]),
        }
    }

    /// x (unsigned) as a float, within 2^-23 relative: `itof` reads x as signed, so 2^32 is
    /// added where the sign bit is set (`asr` spreads it into a mask for the constant's bits).
    fn u2f_estimate(&mut self, x: Operand) -> Operand {
        let f = self.q(Op::Itof, &[x]);
        let m = self.q(Op::Asr, &[x, ic(31)]);
        let c = self.q(Op::And, &[m, fc(4_294_967_296.0)]);
        self.q(Op::Fadd, &[f, c])
    }

    /// x ∈ [0, 2^32) truncated to an unsigned integer (`ftoi` covers only the i32 range, so
    /// the upper half goes through x − 2^31, which is exact there, and gets bit 31 back).
    /// NaN gives 0.
    fn f2u_wide(&mut self, x: Operand) -> Operand {
        let big = self.g(Opcode::Fle, &[fc(2_147_483_648.0), x]);
        let low = self.q(Op::Fsub, &[x, fc(2_147_483_648.0)]);
        let y = self.g(Opcode::Sel, &[big, low, x]);
        let i = self.q(Op::Ftoi, &[y]);
        let bit = self.q(Op::And, &[big, Operand::constant(SIGN)]);
        self.q(Op::Or, &[i, bit])
    }

    /// The low and high 16 bits of x (folded for a constant).
    fn halves(&mut self, x: Operand) -> (Operand, Operand) {
        if let Value::Const(c) = x.value {
            return (Operand::constant(c & 0xffff), Operand::constant(c >> 16));
        }
        let lo = self.q(Op::And, &[x, Operand::constant(0xffff)]);
        let hi = self.q(Op::Shr, &[x, ic(16)]);
        (lo, hi)
    }

    /// The high 32 bits of the 64-bit product a·b (unsigned), from four 16 × 16-bit `mul24`s.
    fn umul_high(&mut self, a: Operand, b: Operand) -> Operand {
        let mask = Operand::constant(0xffff);
        let (a_lo, a_hi) = self.halves(a);
        let (b_lo, b_hi) = self.halves(b);
        let ll = self.q(Op::Mul24, &[a_lo, b_lo]);
        let lh = self.q(Op::Mul24, &[a_lo, b_hi]);
        let hl = self.q(Op::Mul24, &[a_hi, b_lo]);
        let hh = self.q(Op::Mul24, &[a_hi, b_hi]);
        // Bits 16–47 of the sum of the middle terms, below 3·2^16: no carry is lost.
        let ll_hi = self.q(Op::Shr, &[ll, ic(16)]);
        let lh_lo = self.q(Op::And, &[lh, mask]);
        let hl_lo = self.q(Op::And, &[hl, mask]);
        let mid = self.q(Op::Add, &[ll_hi, lh_lo]);
        let mid = self.q(Op::Add, &[mid, hl_lo]);
        let carry = self.q(Op::Shr, &[mid, ic(16)]);
        let lh_hi = self.q(Op::Shr, &[lh, ic(16)]);
        let hl_hi = self.q(Op::Shr, &[hl, ic(16)]);
        let hi = self.q(Op::Add, &[hh, lh_hi]);
        let hi = self.q(Op::Add, &[hi, hl_hi]);
        self.q(Op::Add, &[hi, carry])
    }

    /// One correction step: where r ≥ d, q + 1 and r − d. With `only`, the last step: just
    /// the quotient (`Some(true)`) or the remainder (`Some(false)`), in the first place.
    fn correct(
        &mut self,
        q: Operand,
        r: Operand,
        d: Operand,
        only: Option<bool>,
    ) -> (Operand, Operand) {
        // `ule` gives all ones when r ≥ d: subtracting it adds 1.
        let ge = self.g(Opcode::Ule, &[d, r]);
        if only == Some(false) {
            let dd = self.q(Op::And, &[d, ge]);
            return (self.q(Op::Sub, &[r, dd]), q);
        }
        let q = self.q(Op::Sub, &[q, ge]);
        if only == Some(true) {
            return (q, r);
        }
        let dd = self.q(Op::And, &[d, ge]);
        let r = self.q(Op::Sub, &[r, dd]);
        (q, r)
    }

    /// The quotient (`quotient`) or the remainder of n / d for a constant d ≥ 1 (unsigned).
    fn udivmod_const(&mut self, n: Operand, d: u32, quotient: bool) -> Operand {
        if d.is_power_of_two() {
            let k = d.trailing_zeros() as i32;
            return match (quotient, k) {
                (true, 0) => n,
                (true, _) => self.q(Op::Shr, &[n, ic(k)]),
                (false, _) => self.q(Op::And, &[n, Operand::constant(d - 1)]),
            };
        }
        let rcp = ((1u64 << 32) / d as u64) as u32;
        let q = self.umul_high(n, Operand::constant(rcp));
        let qd = self.umul(q, Operand::constant(d));
        let r = self.q(Op::Sub, &[n, qd]);
        self.correct(q, r, Operand::constant(d), Some(quotient)).0
    }

    /// The unsigned quotient (`quotient`) or remainder of n / d for d ≠ 0 (for d = 0 it is
    /// meaningless; [`Self::by_zero`] replaces it).
    fn udivmod(&mut self, n: Operand, d: Operand, quotient: bool) -> Operand {
        let df = self.u2f_estimate(d);
        let rf = self.rcp(df);
        let scaled = self.q(Op::Fmul, &[rf, fc(RCP_SCALE)]);
        let r0 = self.f2u_wide(scaled);
        // One Newton–Raphson step in fixed point: e = 2^32 − r0·d, r = r0 + r0·e / 2^32.
        let neg_d = self.q(Op::Sub, &[ic(0), d]);
        let e = self.umul(r0, neg_d);
        let step = self.umul_high(r0, e);
        let rcp = self.q(Op::Add, &[r0, step]);
        let q = self.umul_high(n, rcp);
        let qd = self.umul(q, d);
        let r = self.q(Op::Sub, &[n, qd]);
        let (q, r) = self.correct(q, r, d, None);
        self.correct(q, r, d, Some(quotient)).0
    }
}
