//! Trigonometry from multiplies and adds: sin and cos by range reduction and a minimax
//! polynomial (after vc4's `ntq_fsin`, folded further without comparisons), atan and atan2 with NIR's polynomial, asin and acos
//! with NIR's `build_asin`. The design is in `docs/vc4.md` ("Trigonometry").

use super::{Emitter, SIGN, fc, ic};
use crate::ops::Op;
use kiln_ir::{Opcode, Operand};
use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};

/// sin 2πg = g·S(g²) on [−1/4, 1/4]: the minimax (Remez) coefficients of g, g³, g⁵, g⁷, off
/// by at most 5.9·10⁻⁷ there (GLSL asks 2⁻¹¹ ≈ 4.9·10⁻⁴ on [−π, π]).
pub const SIN_COEFFICIENTS: [f32; 4] = [6.283_164, -41.337_143, 81.340_77, -70.993_43];

/// NIR's atan polynomial on [0, 1], coefficients of u, u³, …, u¹¹ (`nir_atan`,
/// `src/compiler/nir/nir_builtin_builder.c`).
pub const ATAN_COEFFICIENTS: [f32; 6] = [
    0.999_979_3,
    -0.332_675_64,
    0.193_892_5,
    -0.117_350_32,
    0.053_681_378,
    -0.012_132_321_5,
];

/// NIR's p0, p1 for asin (|x| ≥ 1/2) and for acos (`build_asin` callers,
/// `src/compiler/spirv/vtn_glsl450.c`).
pub const ASIN_P: [f32; 2] = [0.086_566_724, -0.031_029_55];
pub const ACOS_P: [f32; 2] = [0.081_324_63, -0.023_633_18];

/// NIR's rational asin for |x| < 1/2 (from the same file): numerator coefficients pS0, pS1,
/// pS2 of x², x⁴, x⁶ and the denominator's qS1.
pub const ASIN_SMALL: [f32; 4] = [0.166_665_87, -0.042_743_422, -0.008_656_363, -0.706_629_63];

/// 2^100 and 2^-100: the scale of atan2's operands when the larger is huge.
const HUGE: f32 = f32::from_bits((127 + 100) << 23);
const TINY: f32 = f32::from_bits((127 - 100) << 23);

impl Emitter<'_> {
    /// p(z) by Horner's rule, coefficients from the highest power down to the constant.
    fn horner(&mut self, z: Operand, coefficients: &[f32]) -> Operand {
        let mut p = fc(coefficients[0]);
        for &c in &coefficients[1..] {
            let m = self.q(Op::Fmul, &[p, z]);
            p = self.q(Op::Fadd, &[m, fc(c)]);
        }
        p
    }

    /// Where `cond` holds, `a − b`, else `b` (the folds below).
    fn fold(&mut self, cond: Operand, a: f32, b: Operand) -> Operand {
        let d = self.q(Op::Fsub, &[fc(a), b]);
        self.g(Opcode::Sel, &[cond, d, b])
    }

    /// sin x, or cos x with `cos` (see the module comment): cos 2πt = cos 2π|f| for the
    /// fraction f of t, = −cos 2π(|f| − 1/2) = sin 2π(b − 1/4) with b = ||f| − 1/2| ∈ [0, 1/2],
    /// and sin x = cos(x − π/2) — a fraction and two absolute values, no comparison.
    pub(super) fn sin(&mut self, x: Operand, cos: bool) -> Operand {
        let mut turns = self.q(Op::Fmul, &[x, fc((0.5 / PI) as f32)]);
        if !cos {
            turns = self.q(Op::Fsub, &[turns, fc(0.25)]);
        }
        // f ∈ (−1, 1); beyond i32, where turns has no fraction, ftoi gives 0 and f is turns.
        let whole = self.trunc(turns);
        let f = self.q(Op::Fsub, &[turns, whole]);
        let a = self.q(Op::Fmaxabs, &[f, f]);
        let h = self.q(Op::Fsub, &[a, fc(0.5)]);
        let b = self.q(Op::Fmaxabs, &[h, h]);
        // Clamped, so that the result stays in [−1, 1] beyond i32 (the QPU's fmin keeps a
        // NaN first operand).
        let b = self.q(Op::Fmin, &[b, fc(0.5)]);
        let g = self.q(Op::Fsub, &[b, fc(0.25)]);
        let z = self.q(Op::Fmul, &[g, g]);
        let mut c = SIN_COEFFICIENTS;
        c.reverse();
        let p = self.horner(z, &c);
        let s = self.q(Op::Fmul, &[g, p]);
        // 0 for finite x, NaN for ±∞ and NaN.
        let nan = self.q(Op::Fsub, &[x, x]);
        self.q(Op::Fadd, &[s, nan])
    }

    /// atan u for u ∈ [0, 1] (NaN stays NaN).
    fn atan01(&mut self, u: Operand) -> Operand {
        let z = self.q(Op::Fmul, &[u, u]);
        let mut c = ATAN_COEFFICIENTS;
        c.reverse();
        let p = self.horner(z, &c);
        self.q(Op::Fmul, &[u, p])
    }

    /// |x| as bits (exact, also for NaN).
    fn abs_bits(&mut self, x: Operand) -> Operand {
        self.q(Op::And, &[x, Operand::constant(!SIGN)])
    }

    /// `v` with the sign bit of `x` (v's own sign bit clear).
    fn with_sign_of(&mut self, v: Operand, x: Operand) -> Operand {
        let s = self.q(Op::And, &[x, Operand::constant(SIGN)]);
        self.q(Op::Or, &[v, s])
    }

    pub(super) fn atan(&mut self, x: Operand) -> Operand {
        let a = self.abs_bits(x);
        let big = self.g(Opcode::Flt, &[fc(1.0), a]);
        // ∞ becomes 2^100, whose reciprocal is still normal.
        let capped = self.q(Op::Fmin, &[a, fc(HUGE)]);
        let r = self.rcp(capped);
        let u = self.g(Opcode::Sel, &[big, r, a]);
        let t = self.atan01(u);
        let t = self.fold(big, FRAC_PI_2 as f32, t);
        self.with_sign_of(t, x)
    }

    /// atan2(y, x), the angle of the point (x, y).
    pub(super) fn atan2(&mut self, y: Operand, x: Operand) -> Operand {
        let ax = self.abs_bits(x);
        let ay = self.abs_bits(y);
        let num = self.q(Op::Fmin, &[ax, ay]);
        let den = self.q(Op::Fmax, &[ax, ay]);
        let huge = self.g(Opcode::Fle, &[fc(HUGE), den]);
        let scale = self.g(Opcode::Sel, &[huge, fc(TINY), fc(1.0)]);
        let den_s = self.q(Op::Fmul, &[den, scale]);
        let den_s = self.q(Op::Fmin, &[den_s, fc(HUGE)]);
        let num_s = self.q(Op::Fmul, &[num, scale]);
        let r = self.rcp(den_s);
        let ratio = self.q(Op::Fmul, &[num_s, r]);
        // Equal magnitudes (also both infinite) give 1, both zero 0.
        let equal = self.g(Opcode::Feq, &[num, den]);
        let zero = self.g(Opcode::Feq, &[den, fc(0.0)]);
        let one = self.g(Opcode::Sel, &[zero, fc(0.0), fc(1.0)]);
        let u = self.g(Opcode::Sel, &[equal, one, ratio]);
        let t = self.atan01(u);
        let steep = self.g(Opcode::Flt, &[ax, ay]);
        let t = self.fold(steep, FRAC_PI_2 as f32, t);
        let left = self.g(Opcode::Ilt, &[x, ic(0)]);
        let t = self.fold(left, PI as f32, t);
        let t = self.with_sign_of(t, y);
        let nx = self.g(Opcode::Fne, &[x, x]);
        let ny = self.g(Opcode::Fne, &[y, y]);
        let nan = self.q(Op::Or, &[nx, ny]);
        self.g(Opcode::Sel, &[nan, fc(f32::NAN), t])
    }

    /// √(1 − |x|)·(π/2 + |x|(π/4 − 1 + |x|(p0 + |x|·p1))) for a = |x|.
    fn asin_tail(&mut self, a: Operand, p: [f32; 2]) -> Operand {
        let q = self.horner(a, &[p[1], p[0], (FRAC_PI_4 - 1.0) as f32, FRAC_PI_2 as f32]);
        let om = self.q(Op::Fsub, &[fc(1.0), a]);
        let s = self.sqrt(om);
        self.q(Op::Fmul, &[s, q])
    }

    /// NaN where |x| > 1, else `v`.
    fn in_domain(&mut self, a: Operand, v: Operand) -> Operand {
        let out = self.g(Opcode::Flt, &[fc(1.0), a]);
        self.g(Opcode::Sel, &[out, fc(f32::NAN), v])
    }

    pub(super) fn asin(&mut self, x: Operand) -> Operand {
        let a = self.abs_bits(x);
        let tail = self.asin_tail(a, ASIN_P);
        let large = self.q(Op::Fsub, &[fc(FRAC_PI_2 as f32), tail]);
        let [s0, s1, s2, q1] = ASIN_SMALL;
        let z = self.q(Op::Fmul, &[a, a]);
        let n = self.horner(z, &[s2, s1, s0]);
        let n = self.q(Op::Fmul, &[n, z]);
        let d = self.horner(z, &[q1, 1.0]);
        let r = self.rcp(d);
        let ratio = self.q(Op::Fmul, &[n, r]);
        let ar = self.q(Op::Fmul, &[a, ratio]);
        let small = self.q(Op::Fadd, &[a, ar]);
        let below = self.g(Opcode::Flt, &[a, fc(0.5)]);
        let v = self.g(Opcode::Sel, &[below, small, large]);
        let v = self.in_domain(a, v);
        self.with_sign_of(v, x)
    }

    pub(super) fn acos(&mut self, x: Operand) -> Operand {
        let a = self.abs_bits(x);
        let t = self.asin_tail(a, ACOS_P);
        let negative = self.g(Opcode::Ilt, &[x, ic(0)]);
        let v = self.fold(negative, PI as f32, t);
        self.in_domain(a, v)
    }
}
