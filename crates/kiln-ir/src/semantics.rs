//! The meaning of the scalar generic ops on 32-bit lanes (`docs/semantics.md`): the one
//! definition the interpreter executes and the middle end folds constants with.

use crate::opcode::Opcode;

fn f(x: u32) -> f32 {
    f32::from_bits(x)
}
fn b(x: f32) -> u32 {
    x.to_bits()
}
fn cmp(c: bool) -> u32 {
    if c { u32::MAX } else { 0 }
}

/// Evaluates a scalar op on one lane (a target opcode by its `eval`); `None` for ops that are
/// not scalar arithmetic.
pub fn eval_scalar(op: Opcode, a: &[u32]) -> Option<u32> {
    use Opcode::*;
    let x = || a[0];
    let y = || a[1];
    Some(match op {
        Mov => x(),
        Iadd => x().wrapping_add(y()),
        Isub => x().wrapping_sub(y()),
        Imul => x().wrapping_mul(y()),
        Ineg => x().wrapping_neg(),
        Iabs => (x() as i32).wrapping_abs() as u32,
        Iand => x() & y(),
        Ior => x() | y(),
        Ixor => x() ^ y(),
        Inot => !x(),
        Ishl => x().wrapping_shl(y() & 31),
        Ushr => x().wrapping_shr(y() & 31),
        Ishr => ((x() as i32).wrapping_shr(y() & 31)) as u32,
        Imin => (x() as i32).min(y() as i32) as u32,
        Imax => (x() as i32).max(y() as i32) as u32,
        Umin => x().min(y()),
        Umax => x().max(y()),
        Idiv => match (x() as i32, y() as i32) {
            (a, 0) => a as u32,
            (a, b) => a.wrapping_div(b) as u32,
        },
        Udiv => x().checked_div(y()).unwrap_or(x()),
        Irem => match (x() as i32, y() as i32) {
            (_, 0) => 0,
            (a, b) => a.wrapping_rem(b) as u32,
        },
        Urem => x().checked_rem(y()).unwrap_or(0),
        Ibitcount => x().count_ones(),
        Ibitreverse => x().reverse_bits(),
        Iclz => x().leading_zeros(),
        Ictz => x().trailing_zeros(),
        Ubfe | Ibfe => {
            let (off, count) = (a[1] & 31, a[2].min(32));
            let count = count.min(32 - off);
            if count == 0 {
                0
            } else {
                let shifted = (x() as u64) << (64 - off - count);
                if op == Ubfe {
                    (shifted >> (64 - count)) as u32
                } else {
                    ((shifted as i64) >> (64 - count)) as u32
                }
            }
        }
        Bfi => {
            let (off, count) = (a[2] & 31, a[3].min(32));
            let count = count.min(32 - off);
            let mask = (((1u64 << count) - 1) << off) as u32;
            (a[0] & !mask) | ((a[1] << off) & mask)
        }
        Fadd => b(f(x()) + f(y())),
        Fsub => b(f(x()) - f(y())),
        Fmul => b(f(x()) * f(y())),
        Ffma => b(f(a[0]).mul_add(f(a[1]), f(a[2]))),
        Fdiv => b(f(x()) / f(y())),
        Fneg => x() ^ 0x8000_0000,
        Fabs => x() & 0x7fff_ffff,
        Fmin => b(f(x()).min(f(y()))),
        Fmax => b(f(x()).max(f(y()))),
        Frcp => b(1.0 / f(x())),
        Frsq => b(1.0 / f(x()).sqrt()),
        Fsqrt => b(f(x()).sqrt()),
        Fexp2 => b(f(x()).exp2()),
        Flog2 => b(f(x()).log2()),
        Ffloor => b(f(x()).floor()),
        Fceil => b(f(x()).ceil()),
        Ftrunc => b(f(x()).trunc()),
        Fround => b(f(x()).round_ties_even()),
        Ffract => b(f(x()) - f(x()).floor()),
        Fsin => b(f(x()).sin()),
        Fcos => b(f(x()).cos()),
        Fpow => b(f(x()).powf(f(y()))),
        Fsign => b(if f(x()) > 0.0 {
            1.0
        } else if f(x()) < 0.0 {
            -1.0
        } else {
            0.0
        }),
        Fatan => b(f(x()).atan()),
        Fatan2 => b(f(x()).atan2(f(y()))),
        Fasin => b(f(x()).asin()),
        Facos => b(f(x()).acos()),
        Ieq => cmp(x() == y()),
        Ine => cmp(x() != y()),
        Ilt => cmp((x() as i32) < (y() as i32)),
        Ile => cmp((x() as i32) <= (y() as i32)),
        Ult => cmp(x() < y()),
        Ule => cmp(x() <= y()),
        Feq => cmp(f(x()) == f(y())),
        Fne => cmp(f(x()) != f(y())),
        Flt => cmp(f(x()) < f(y())),
        // Unordered or less-or-equal: `not flt y, x`, what the VideoCore IV's flag test computes.
        Fle => cmp(f(x()).partial_cmp(&f(y())) != Some(std::cmp::Ordering::Greater)),
        Sel => {
            if a[0] != 0 {
                a[1]
            } else {
                a[2]
            }
        }
        I2f => b(x() as i32 as f32),
        U2f => b(x() as f32),
        F2i => f(x()) as i32 as u32,
        F2u => f(x()) as u32,
        // A target opcode means what its target says it means.
        Target(t) => (t.0.eval?)(a),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Opcode::*;

    fn fl(x: f32) -> u32 {
        x.to_bits()
    }

    #[test]
    fn integers_wrap_and_shifts_mask() {
        assert_eq!(eval_scalar(Iadd, &[u32::MAX, 2]), Some(1));
        assert_eq!(eval_scalar(Ishl, &[1, 33]), Some(2));
        assert_eq!(eval_scalar(Ishr, &[0x8000_0000, 31]), Some(u32::MAX));
        assert_eq!(eval_scalar(Ushr, &[0x8000_0000, 31]), Some(1));
        assert_eq!(eval_scalar(Iabs, &[i32::MIN as u32]), Some(i32::MIN as u32));
        assert_eq!(eval_scalar(Imin, &[u32::MAX, 3]), Some(u32::MAX));
        assert_eq!(eval_scalar(Umin, &[u32::MAX, 3]), Some(3));
    }

    #[test]
    fn floats_follow_ieee() {
        assert_eq!(eval_scalar(Frcp, &[fl(0.0)]), Some(fl(f32::INFINITY)));
        assert!(f32::from_bits(eval_scalar(Fdiv, &[fl(0.0), fl(0.0)]).unwrap()).is_nan());
        assert_eq!(eval_scalar(Fmin, &[fl(f32::NAN), fl(2.0)]), Some(fl(2.0)));
        assert_eq!(eval_scalar(Fround, &[fl(2.5)]), Some(fl(2.0)));
        assert_eq!(eval_scalar(Ffract, &[fl(-0.25)]), Some(fl(0.75)));
        assert_eq!(eval_scalar(Fneg, &[fl(0.0)]), Some(fl(-0.0)));
        assert_eq!(
            eval_scalar(Fne, &[fl(f32::NAN), fl(f32::NAN)]),
            Some(u32::MAX)
        );
        assert_eq!(eval_scalar(Feq, &[fl(f32::NAN), fl(f32::NAN)]), Some(0));
    }

    #[test]
    fn division_and_bits_are_total() {
        assert_eq!(eval_scalar(Idiv, &[7, 0]), Some(7));
        assert_eq!(
            eval_scalar(Idiv, &[i32::MIN as u32, -1i32 as u32]),
            Some(i32::MIN as u32)
        );
        assert_eq!(eval_scalar(Idiv, &[-7i32 as u32, 2]), Some(-3i32 as u32));
        assert_eq!(eval_scalar(Irem, &[-7i32 as u32, 2]), Some(-1i32 as u32));
        assert_eq!(eval_scalar(Urem, &[7, 0]), Some(0));
        assert_eq!(eval_scalar(Ubfe, &[0xabcd_1234, 8, 8]), Some(0x12));
        assert_eq!(eval_scalar(Ibfe, &[0x0000_8000, 12, 4]), Some(-8i32 as u32));
        assert_eq!(eval_scalar(Ibfe, &[0x0000_f000, 12, 4]), Some(u32::MAX));
        assert_eq!(eval_scalar(Bfi, &[0xffff_ffff, 0, 4, 8]), Some(0xffff_f00f));
        assert_eq!(eval_scalar(Iclz, &[0]), Some(32));
        assert_eq!(eval_scalar(Ibitcount, &[0xf0f0]), Some(8));
    }

    #[test]
    fn conversions_saturate() {
        assert_eq!(eval_scalar(F2i, &[fl(3e10)]), Some(i32::MAX as u32));
        assert_eq!(eval_scalar(F2i, &[fl(-2.7)]), Some(-2i32 as u32));
        assert_eq!(eval_scalar(F2u, &[fl(-1.0)]), Some(0));
        assert_eq!(eval_scalar(F2i, &[fl(f32::NAN)]), Some(0));
        assert_eq!(eval_scalar(I2f, &[-3i32 as u32]), Some(fl(-3.0)));
    }
}
