//! Special function unit: recip, recipsqrt, exp2, log2 (reference guide §"SFU").
//!
//! Precision modelled: each result is the correctly rounded f32 of the exact function of the
//! (denormal-flushed) input, computed in f64. The hardware is an approximation with about
//! 13 correct mantissa bits; programs must not depend on the low bits. Negative inputs of
//! recipsqrt and log2 act on |x| (hardware tests); recip and recipsqrt of ±0 give ±infinity.

use super::alu::{ftz, ftz_out};
use crate::isa::waddr;

/// Computes one lane of the SFU function selected by write address 52–55.
pub fn sfu(waddr: u8, x: u32) -> u32 {
    let f = ftz(x) as f64;
    let r = match waddr {
        waddr::SFU_RECIP => 1.0 / f,
        waddr::SFU_RECIPSQRT => {
            if f == 0.0 {
                f64::INFINITY.copysign(f)
            } else {
                1.0 / f.abs().sqrt()
            }
        }
        waddr::SFU_EXP => f.exp2(),
        _ => f.abs().log2(),
    };
    ftz_out(r as f32)
}

#[cfg(test)]
mod tests {
    use super::*;
    fn v(w: u8, x: f32) -> f32 {
        f32::from_bits(sfu(w, x.to_bits()))
    }
    #[test]
    fn functions() {
        assert_eq!(v(waddr::SFU_RECIP, 4.0), 0.25);
        assert_eq!(v(waddr::SFU_RECIPSQRT, 16.0), 0.25);
        assert_eq!(v(waddr::SFU_RECIPSQRT, -16.0), 0.25);
        assert_eq!(v(waddr::SFU_EXP, 3.0), 8.0);
        assert_eq!(v(waddr::SFU_LOG, 8.0), 3.0);
        assert_eq!(v(waddr::SFU_LOG, -8.0), 3.0);
        assert!(v(waddr::SFU_RECIP, 0.0).is_infinite());
        assert!(v(waddr::SFU_RECIPSQRT, 0.0).is_infinite());
    }
}
