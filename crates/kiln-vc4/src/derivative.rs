//! Screen-space derivatives (`fddx`, `fddy`) on the QPU, after Mesa's `ntq_fddx` and
//! `ntq_fddy` (`vc4_program.c`).
//!
//! A fragment batch is 16 lanes, four 2×2 quads side by side: lane `4q + 2(y & 1) + (x & 1)`
//! (`sim::tlb::lane_xy`), so the horizontal neighbour of a lane is lane `l ^ 1` and the
//! vertical one lane `l ^ 2`, as in the interpreter's `fddx`/`fddy`. The mul unit's full
//! vector rotation of an accumulator (r0–r3) brings lane `l − n` to lane `l`; Mesa rotates the
//! value by 1 and 15 (x) or 2 and 14 (y) and picks per lane, from bit 0 (x) or bit 1 (y) of the
//! element number, `right − v` (even lanes) or `v − left` (odd lanes). Both lanes of a pair get
//! `v[odd] − v[even]` of that pair, computed by the QPU's truncating `fsub`: a fine derivative,
//! the interpreter's definition up to the rounding of the subtraction.
//!
//! Selection turns `fddx v` into `qpu_fddx v` ([`FDDX`]), whose first definition is a dead
//! scratch value of class `r0_r3` (the result is the second): the allocator gives it an
//! accumulator that holds nothing live there, and the emitter copies `v` into it (in every
//! lane, so inactive lanes hold `v` too, as the interpreter reads them) unless `v` already sits
//! in an accumulator, then rotates it into ra14 and rb14 (the emitter's own registers) and
//! subtracts.
//!
//! Lanes are read whether they run or not, as the interpreter reads them. Where a neighbour
//! does not run (divergent control flow, a discarded pixel), its register holds what that lane
//! last wrote there, which is the interpreter's value unless the register was given to another
//! value since: in a divergent loop that a neighbour left earlier, a derivative of a value the
//! loop computes disagrees (seen on a hand-written shader; none in the corpus). GLSL leaves
//! derivatives undefined in non-uniform control flow.

use kiln_ir::{Arity, ClassReq, OpInfo, TargetOp, TargetOpInfo};
use kiln_qpu::sim::alu;

/// Which neighbour a derivative subtracts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Axis {
    /// Horizontal: lanes `l` and `l ^ 1`.
    X,
    /// Vertical: lanes `l` and `l ^ 2`.
    Y,
}

impl Axis {
    /// The bit of the lane (element) number that tells the two pixels of a pair apart.
    pub fn bit(self) -> u32 {
        match self {
            Axis::X => 1,
            Axis::Y => 2,
        }
    }

    /// Rotations (lane `l` receives lane `l − n`) that bring the neighbour with the bit set to
    /// the lane without it, and the other way round (Mesa: 15 and 1, 14 and 2).
    pub fn rotations(self) -> (u8, u8) {
        let b = self.bit() as u8;
        (16 - b, b)
    }
}

/// `v[odd] − v[even]` of the lane's pair, with the QPU's `fsub`.
fn pair_difference(
    lane: usize,
    bit: usize,
    read: &dyn Fn(usize, usize) -> Option<u32>,
) -> Option<u32> {
    let lo = read(0, lane & !bit)?;
    let hi = read(0, lane | bit)?;
    alu::add_op(kiln_qpu::isa::AddOp::Fsub, hi, lo).map(|r| r.value)
}

const DEF_CLASSES: &[ClassReq] = &[
    ClassReq {
        file: "q",
        size: 1,
        subset: Some("r0_r3"),
    },
    ClassReq {
        file: "q",
        size: 1,
        subset: None,
    },
];

/// `%scratch, %d = qpu_fddx %v`: the horizontal derivative of `v` (Mesa's `ntq_fddx`);
/// `scratch` is an accumulator the emitter may overwrite in every lane.
pub static FDDX: &TargetOpInfo = &crate::ops::VC4_OPS[crate::ops::TEX_INDEX + 2];

/// [`FDDX`]'s facts.
pub(crate) const FDDX_INFO: TargetOpInfo = TargetOpInfo {
    info: OpInfo::target("qpu_fddx", Arity::Fixed(2), Arity::Fixed(1), 0),
    unit: "mul",
    latency: 1,
    resources: &[],
    operand_classes: None,
    def_classes: Some(DEF_CLASSES),
    eval: None,
    cross_lane: Some(|lane, read| pair_difference(lane, 1, read)),
};

/// `%scratch, %d = qpu_fddy %v`: the vertical derivative (Mesa's `ntq_fddy`).
pub static FDDY: &TargetOpInfo = &crate::ops::VC4_OPS[crate::ops::TEX_INDEX + 3];

/// [`FDDY`]'s facts.
pub(crate) const FDDY_INFO: TargetOpInfo = TargetOpInfo {
    info: OpInfo::target("qpu_fddy", Arity::Fixed(2), Arity::Fixed(1), 0),
    cross_lane: Some(|lane, read| pair_difference(lane, 2, read)),
    ..FDDX_INFO
};

/// The axis of a derivative opcode.
pub fn axis(op: TargetOp) -> Option<Axis> {
    if std::ptr::eq(op.0, FDDX) {
        Some(Axis::X)
    } else if std::ptr::eq(op.0, FDDY) {
        Some(Axis::Y)
    } else {
        None
    }
}

/// The derivative opcode of an axis.
pub fn opcode(axis: Axis) -> kiln_ir::Opcode {
    kiln_ir::Opcode::Target(TargetOp(match axis {
        Axis::X => FDDX,
        Axis::Y => FDDY,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f32) -> u32 {
        x.to_bits()
    }

    /// Both lanes of a pair get `v[odd] − v[even]`, x pairs lanes `l ^ 1`, y pairs `l ^ 2`,
    /// and the subtraction truncates as the QPU's does.
    #[test]
    fn pairs_and_rounding() {
        let v: Vec<u32> = (0..16).map(|l| f((l * l) as f32)).collect();
        let read = |_: usize, l: usize| v.get(l).copied();
        for l in 0..16usize {
            let dx = (FDDX.cross_lane.unwrap())(l, &read).unwrap();
            let dy = (FDDY.cross_lane.unwrap())(l, &read).unwrap();
            let (x0, x1) = (l & !1, l | 1);
            let (y0, y1) = (l & !2, l | 2);
            assert_eq!(f32::from_bits(dx), (x1 * x1 - x0 * x0) as f32, "lane {l}");
            assert_eq!(f32::from_bits(dy), (y1 * y1 - y0 * y0) as f32, "lane {l}");
        }
        // 1 − 2^-25 rounds to 1.0 in IEEE; the QPU truncates toward zero.
        let w = [f(2f32.powi(-25)), f(1.0)];
        let read = |_: usize, l: usize| w.get(l).copied();
        let d = (FDDX.cross_lane.unwrap())(0, &read).unwrap();
        assert_eq!(d, f(1.0 - f32::EPSILON / 2.0));
        assert_eq!(Axis::X.rotations(), (15, 1));
        assert_eq!(Axis::Y.rotations(), (14, 2));
    }
}
