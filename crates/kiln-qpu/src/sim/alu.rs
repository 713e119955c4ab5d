//! Per-lane ALU semantics: add and mul ops, flags, pack and unpack (reference guide §"ALU
//! Instructions", "Pack/Unpack"; behaviour pinned by py-videocore's hardware-verified tests).
//!
//! Floats: denormal inputs and outputs flush to (signed) zero; `fadd`/`fsub` round toward zero
//! (the hardware adder truncates); `fmul` and `itof` round to nearest even; `ftoi` truncates and
//! gives 0 when the value is out of the i32 range or NaN.

use crate::isa::{AddOp, MulOp, Unpack};

/// Result of one lane of an ALU op: value and carry flag.
#[derive(Clone, Copy, Debug, Default)]
pub struct LaneResult {
    pub value: u32,
    pub carry: bool,
    /// Value before 32-bit wrapping, for the `32sat` pack (integer add/sub only).
    pub wide: i64,
}

/// Flushes a denormal float to zero of the same sign.
#[inline]
pub fn ftz(bits: u32) -> f32 {
    if bits & 0x7f80_0000 == 0 {
        f32::from_bits(bits & 0x8000_0000)
    } else {
        f32::from_bits(bits)
    }
}

/// Flushes a denormal result to zero of the same sign.
#[inline]
pub fn ftz_out(f: f32) -> u32 {
    let bits = f.to_bits();
    if bits & 0x7f80_0000 == 0 {
        bits & 0x8000_0000
    } else {
        bits
    }
}

/// a + b rounded toward zero (exact sum via error-free transformation in f64).
fn add_rtz(a: f32, b: f32) -> f32 {
    let (a, b) = (a as f64, b as f64);
    let s = a + b;
    if !s.is_finite() {
        return s as f32;
    }
    // two-sum: s + err == a + b exactly
    let bb = s - a;
    let err = (a - (s - bb)) + (b - bb);
    let f = s as f32;
    if f.is_infinite() {
        // round toward zero never overflows to infinity from finite operands
        return f32::MAX.copysign(f);
    }
    let diff = (f as f64 - s) - err; // f - exact
    // rounded away from zero: step one ulp back toward zero
    if (f > 0.0 && diff > 0.0) || (f < 0.0 && diff < 0.0) {
        f32::from_bits(f.to_bits() - 1)
    } else {
        f
    }
}

/// True for add ops whose inputs are floats (they take float unpacks).
pub fn add_reads_float(op: AddOp) -> bool {
    matches!(
        op,
        AddOp::Fadd
            | AddOp::Fsub
            | AddOp::Fmin
            | AddOp::Fmax
            | AddOp::Fminabs
            | AddOp::Fmaxabs
            | AddOp::Ftoi
    )
}

/// True for add ops producing a float (they take float packs).
pub fn add_writes_float(op: AddOp) -> bool {
    matches!(
        op,
        AddOp::Fadd
            | AddOp::Fsub
            | AddOp::Fmin
            | AddOp::Fmax
            | AddOp::Fminabs
            | AddOp::Fmaxabs
            | AddOp::Itof
    )
}

#[inline]
fn fcmp_gt(a: f32, b: f32) -> bool {
    a > b
}

/// One lane of the add unit. `None` for undefined opcodes.
#[inline(always)]
pub fn add_op(op: AddOp, a: u32, b: u32) -> Option<LaneResult> {
    let r = |value: u32, carry: bool| LaneResult {
        value,
        carry,
        wide: value as i32 as i64,
    };
    Some(match op {
        AddOp::Nop => r(0, false),
        AddOp::Fadd | AddOp::Fsub => {
            let fa = ftz(a);
            let fb = if op == AddOp::Fsub { -ftz(b) } else { ftz(b) };
            let s = add_rtz(fa, fb);
            let v = ftz_out(s);
            r(v, f32::from_bits(v) > 0.0)
        }
        AddOp::Fmin | AddOp::Fmax => {
            let (fa, fb) = (ftz(a), ftz(b));
            let gt = fcmp_gt(fa, fb);
            let pick_a = if op == AddOp::Fmin { !gt } else { gt };
            let v = if pick_a { fa } else { fb };
            r(v.to_bits(), gt)
        }
        AddOp::Fminabs | AddOp::Fmaxabs => {
            let (fa, fb) = (ftz(a).abs(), ftz(b).abs());
            let gt = fcmp_gt(fa, fb);
            let pick_a = if op == AddOp::Fminabs { !gt } else { gt };
            let v = if pick_a { fa } else { fb };
            r(v.to_bits(), gt)
        }
        AddOp::Ftoi => {
            let f = ftz(a);
            let v = if f.is_nan() || !(-2147483648.0..2147483648.0).contains(&f) {
                0
            } else {
                f.trunc() as i32 as u32
            };
            r(v, false)
        }
        AddOp::Itof => r(ftz_out(a as i32 as f32), false),
        AddOp::Add => {
            let (v, c) = a.overflowing_add(b);
            LaneResult {
                value: v,
                carry: c,
                wide: a as i32 as i64 + b as i32 as i64,
            }
        }
        AddOp::Sub => {
            let (v, c) = a.overflowing_sub(b);
            LaneResult {
                value: v,
                carry: c,
                wide: a as i32 as i64 - b as i32 as i64,
            }
        }
        AddOp::Shr => {
            let n = b & 31;
            let c = n > 0 && (a >> (n - 1)) & 1 != 0;
            r(a >> n, c)
        }
        AddOp::Asr => {
            let n = b & 31;
            let c = n > 0 && ((a as i32) >> (n - 1)) & 1 != 0;
            r(((a as i32) >> n) as u32, c)
        }
        AddOp::Ror => r(a.rotate_right(b & 31), false),
        AddOp::Shl => {
            let n = b & 31;
            let c = ((a as u64) << n) >> 32 & 1 != 0;
            r(a << n, c)
        }
        AddOp::Min => {
            let gt = (a as i32) > (b as i32);
            r(if gt { b } else { a }, gt)
        }
        AddOp::Max => {
            let gt = (a as i32) > (b as i32);
            r(if gt { a } else { b }, gt)
        }
        AddOp::And => r(a & b, false),
        AddOp::Or => r(a | b, false),
        AddOp::Xor => r(a ^ b, false),
        AddOp::Not => r(!a, false),
        AddOp::Clz => r(a.leading_zeros(), false),
        AddOp::V8adds => r(v8(a, b, |x, y| (x + y).min(255)), false),
        AddOp::V8subs => r(v8(a, b, |x, y| x.saturating_sub(y)), false),
        AddOp::Undefined(_) => return None,
    })
}

#[inline(always)]
fn v8(a: u32, b: u32, f: impl Fn(u32, u32) -> u32) -> u32 {
    let mut out = 0;
    for k in 0..4 {
        let x = (a >> (8 * k)) & 255;
        let y = (b >> (8 * k)) & 255;
        out |= (f(x, y) & 255) << (8 * k);
    }
    out
}

/// One lane of the mul unit.
#[inline(always)]
pub fn mul_op(op: MulOp, a: u32, b: u32) -> LaneResult {
    let value = match op {
        MulOp::Nop => 0,
        MulOp::Fmul => ftz_out(ftz(a) * ftz(b)),
        MulOp::Mul24 => (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff),
        MulOp::V8muld => v8(a, b, |x, y| (x * y + 127) / 255),
        MulOp::V8min => v8(a, b, |x, y| x.min(y)),
        MulOp::V8max => v8(a, b, |x, y| x.max(y)),
        MulOp::V8adds => v8(a, b, |x, y| (x + y).min(255)),
        MulOp::V8subs => v8(a, b, |x, y| x.saturating_sub(y)),
    };
    LaneResult {
        value,
        carry: false,
        wide: value as i32 as i64,
    }
}

/// The add unit over 16 lanes (the opcode is dispatched once, not per lane). Undefined
/// opcodes give zeros; the caller reports them.
pub fn add_vec(op: AddOp, a: &[u32; 16], b: &[u32; 16], out: &mut [LaneResult; 16]) {
    op.specialise(
        #[inline(always)]
        |op| {
            for i in 0..16 {
                out[i] = add_op(op, a[i], b[i]).unwrap_or_default();
            }
        },
    )
}

/// The mul unit over 16 lanes.
pub fn mul_vec(op: MulOp, a: &[u32; 16], b: &[u32; 16], out: &mut [LaneResult; 16]) {
    op.specialise(
        #[inline(always)]
        |op| {
            for i in 0..16 {
                out[i] = mul_op(op, a[i], b[i]);
            }
        },
    )
}

/// Z, N flags of a result.
#[inline]
pub fn zn(v: u32) -> (bool, bool) {
    (v == 0, v & 0x8000_0000 != 0)
}

/// IEEE half → float.
pub fn f16_to_f32(h: u16) -> f32 {
    let s = ((h >> 15) & 1) as u32;
    let e = ((h >> 10) & 31) as i32;
    let m = (h & 0x3ff) as u32;
    let bits = if e == 0 {
        if m == 0 {
            s << 31
        } else {
            // subnormal half: normalise
            let f = m as f32 / 1024.0 / 16384.0;
            return if s == 1 { -f } else { f };
        }
    } else if e == 31 {
        (s << 31) | 0x7f80_0000 | (m << 13)
    } else {
        (s << 31) | (((e - 15 + 127) as u32) << 23) | (m << 13)
    };
    f32::from_bits(bits)
}

/// Float → IEEE half, round to nearest even, overflow to infinity.
pub fn f32_to_f16(f: f32) -> u16 {
    let bits = f.to_bits();
    let s = ((bits >> 16) & 0x8000) as u16;
    let e = ((bits >> 23) & 255) as i32;
    let m = bits & 0x7f_ffff;
    if e == 255 {
        return s | 0x7c00 | if m != 0 { 0x200 } else { 0 };
    }
    let e16 = e - 127 + 15;
    if e16 >= 31 {
        return s | 0x7c00;
    }
    if e16 <= 0 {
        if e16 < -10 {
            return s;
        }
        let m = m | 0x80_0000;
        let shift = (14 - e16) as u32;
        let half = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let mid = 1 << (shift - 1);
        let r = if rem > mid || (rem == mid && half & 1 == 1) {
            half + 1
        } else {
            half
        };
        return s | r as u16;
    }
    let half = ((e16 as u32) << 10) | (m >> 13);
    let rem = m & 0x1fff;
    let r = if rem > 0x1000 || (rem == 0x1000 && half & 1 == 1) {
        half + 1
    } else {
        half
    };
    s | r as u16
}

/// Unpack of a file-A read (pm = 0). `float` selects the float conversions used when the
/// consuming op reads floats (16a/16b: half → float; 8a–8d: byte / 255).
#[inline]
pub fn unpack_a(u: Unpack, v: u32, float: bool) -> u32 {
    match u {
        Unpack::None => v,
        Unpack::U16a | Unpack::U16b => {
            let h = if u == Unpack::U16a {
                v as u16
            } else {
                (v >> 16) as u16
            };
            if float {
                f16_to_f32(h).to_bits()
            } else {
                h as i16 as i32 as u32
            }
        }
        Unpack::U8dRep => (v >> 24) * 0x0101_0101,
        _ => {
            let k = u as u32 - Unpack::U8a as u32;
            let byte = (v >> (8 * k)) & 255;
            if float {
                (byte as f32 / 255.0).to_bits()
            } else {
                byte
            }
        }
    }
}

/// Unpack of an r4 read (pm = 1): float conversions only.
#[inline]
pub fn unpack_r4(u: Unpack, v: u32) -> u32 {
    unpack_a(u, v, true)
}

/// pm = 0 pack of a value written to register file A. Returns (value, byte mask).
/// `float` selects float conversion for 16a/16b (float → half).
pub fn pack_a(code: u8, r: LaneResult, float: bool) -> (u32, u32) {
    let v = r.value;
    let sat8 = |x: i64| x.clamp(0, 255) as u32;
    let sat16 = |x: i64| x.clamp(-32768, 32767) as u32 & 0xffff;
    let ival = r.wide;
    match code & 15 {
        0 => (v, 0xffff_ffff),
        1 | 2 | 9 | 10 => {
            let h = if float {
                f32_to_f16(f32::from_bits(v)) as u32
            } else if code >= 9 {
                sat16(v as i32 as i64)
            } else {
                v & 0xffff
            };
            if code == 1 || code == 9 {
                (h, 0x0000_ffff)
            } else {
                (h << 16, 0xffff_0000)
            }
        }
        3 => ((v & 255) * 0x0101_0101, 0xffff_ffff),
        4..=7 => {
            let k = (code - 4) as u32;
            ((v & 255) << (8 * k), 0xff << (8 * k))
        }
        8 => (
            ival.clamp(i32::MIN as i64, i32::MAX as i64) as i32 as u32,
            0xffff_ffff,
        ),
        11 => (sat8(v as i32 as i64) * 0x0101_0101, 0xffff_ffff),
        _ => {
            let k = (code - 12) as u32;
            (sat8(v as i32 as i64) << (8 * k), 0xff << (8 * k))
        }
    }
}

/// pm = 1 mul pack: float in [0, 1] → byte (codes 3–7). Returns (value, byte mask); codes
/// without a defined meaning write the value unchanged.
pub fn pack_mul(code: u8, v: u32) -> (u32, u32) {
    let f = ftz(v);
    let byte = if f.is_nan() {
        0
    } else {
        (f.clamp(0.0, 1.0) * 255.0).round() as u32
    };
    match code & 15 {
        3 => (byte * 0x0101_0101, 0xffff_ffff),
        4..=7 => {
            let k = (code - 4) as u32;
            (byte << (8 * k), 0xff << (8 * k))
        }
        _ => (v, 0xffff_ffff),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f32) -> u32 {
        x.to_bits()
    }

    #[test]
    fn int_carry_rules() {
        // hardware: 0 - 1 sets C (borrow); 0xffffffff + 1 sets C and gives 0
        let s = add_op(AddOp::Sub, 0, 1).unwrap();
        assert!(s.carry);
        assert_eq!(s.value, u32::MAX);
        let a = add_op(AddOp::Add, u32::MAX, 1).unwrap();
        assert!(a.carry);
        assert_eq!(a.value, 0);
        assert!(!add_op(AddOp::Add, 1, 1).unwrap().carry);
    }

    #[test]
    fn shifts_and_clz() {
        assert_eq!(add_op(AddOp::Shl, 1, 33).unwrap().value, 2);
        assert_eq!(add_op(AddOp::Asr, 0x8000_0000, 31).unwrap().value, u32::MAX);
        assert_eq!(add_op(AddOp::Ror, 1, 1).unwrap().value, 0x8000_0000);
        assert_eq!(add_op(AddOp::Clz, 0, 0).unwrap().value, 32);
        assert!(add_op(AddOp::Shr, 3, 1).unwrap().carry);
        assert!(add_op(AddOp::Shl, 0x8000_0000, 1).unwrap().carry);
    }

    #[test]
    fn fadd_truncates() {
        // 1 + 2^-24 is exactly halfway: nearest-even gives 1.0, truncation too;
        // 1 + 3*2^-25 rounds to nearest up, truncates down.
        let x = add_op(AddOp::Fadd, f(1.0), f(3.0 * 2f32.powi(-25))).unwrap();
        assert_eq!(x.value, f(1.0));
        let y = add_op(AddOp::Fadd, f(-1.0), f(-3.0 * 2f32.powi(-25))).unwrap();
        assert_eq!(y.value, f(-1.0));
        // 1 - tiny truncates below 1
        let z = add_op(AddOp::Fsub, f(1.0), f(1e-20)).unwrap();
        assert_eq!(z.value, f(1.0) - 1);
    }

    #[test]
    fn denormals_flush() {
        let d = f32::from_bits(1);
        assert_eq!(add_op(AddOp::Fadd, f(d), f(0.0)).unwrap().value, 0);
        assert_eq!(mul_op(MulOp::Fmul, f(1e-20), f(1e-20)).value, 0);
    }

    #[test]
    fn ftoi_out_of_range() {
        assert_eq!(
            add_op(AddOp::Ftoi, f(-2.7), 0).unwrap().value,
            (-2i32) as u32
        );
        assert_eq!(add_op(AddOp::Ftoi, f(3e9), 0).unwrap().value, 0);
        assert_eq!(add_op(AddOp::Ftoi, f(f32::NAN), 0).unwrap().value, 0);
    }

    #[test]
    fn v8_ops_saturate() {
        assert_eq!(
            mul_op(MulOp::V8adds, 0x80ff_0102, 0x8001_0203).value,
            0xffff_0305
        );
        assert_eq!(mul_op(MulOp::V8subs, 0x0010_0000, 0x0120_0000).value, 0);
        assert_eq!(mul_op(MulOp::V8muld, 0xff80, 0xff80).value, 0xff40);
    }

    #[test]
    fn half_conversions() {
        for x in [0.0f32, 1.0, -2.5, 65504.0, 0.000061035156] {
            assert_eq!(f16_to_f32(f32_to_f16(x)), x);
        }
        assert_eq!(f32_to_f16(1e6), 0x7c00);
    }

    #[test]
    fn packs() {
        let r = |v: u32| LaneResult {
            value: v,
            carry: false,
            wide: v as i32 as i64,
        };
        assert_eq!(pack_a(4, r(0x1234), false), (0x34, 0xff));
        assert_eq!(pack_a(2, r(0x1234), false), (0x1234_0000, 0xffff_0000));
        assert_eq!(pack_a(12, r(300), false), (255, 0xff));
        assert_eq!(pack_a(12, r(-5i32 as u32), false), (0, 0xff));
        assert_eq!(pack_a(9, r(40000), false).0, 32767);
        assert_eq!(pack_mul(3, f(1.0)).0, 0xffff_ffff);
        assert_eq!(pack_mul(5, f(0.5)).0, 128 << 8);
    }
}
