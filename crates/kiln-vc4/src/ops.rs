//! The vc4 target opcodes: the QPU's add-unit, mul-unit and SFU operations as kiln target
//! instructions (`kiln_ir::target_op`), with their unit, latency, implicit resources and their
//! meaning on one lane — the simulator's own ALU and SFU functions (`sim::alu`, `sim::sfu`), so
//! the interpreter runs a selected program exactly as the simulator computes each operation.
//!
//! Names carry a `qpu_` prefix so that they never shadow the shared generic opcodes in the text
//! format (`%3:q1 = qpu_fadd %1, %2`). Facts (Mesa `vc4_qir.h`, `vc4_qpu_emit.c`):
//!
//! - add and mul ops: one instruction; a result written to file A or B is not readable by the
//!   next instruction (accumulators are), so the latency is 1;
//! - SFU ops (`qpu_recip`, `qpu_recipsqrt`, `qpu_exp2`, `qpu_log2`): a write to the SFU address,
//!   whose result arrives in r4 for the third instruction after it (latency 2, resources `sfu`
//!   and `r4`). Their definition may live in any register: as Mesa's emitter does, the emitter
//!   moves r4 into it; the r4 write is named as a resource so that class narrowing can take r4
//!   away from values live across it.

use kiln_ir::{Access, Arity, OpInfo, ResourceUse, TargetOp, TargetOpInfo};
use kiln_qpu::isa::{AddOp, MulOp, waddr};
use kiln_qpu::sim::{alu, sfu};

fn add(op: AddOp, a: u32, b: u32) -> u32 {
    alu::add_op(op, a, b).map_or(0, |r| r.value)
}

fn mul(op: MulOp, a: u32, b: u32) -> u32 {
    alu::mul_op(op, a, b).value
}

const fn binary(name: &'static str, commutative: bool) -> OpInfo {
    OpInfo {
        commutative,
        ..OpInfo::target(name, Arity::Fixed(1), Arity::Fixed(2), 0)
    }
}

const fn unary(name: &'static str) -> OpInfo {
    OpInfo::target(name, Arity::Fixed(1), Arity::Fixed(1), 0)
}

const fn alu_op(info: OpInfo, unit: &'static str, eval: fn(&[u32]) -> u32) -> TargetOpInfo {
    TargetOpInfo {
        info,
        unit,
        latency: 1,
        resources: &[],
        operand_classes: None,
        def_classes: None,
        eval: Some(eval),
        cross_lane: None,
    }
}

const SFU_RESOURCES: &[ResourceUse] = &[
    ResourceUse {
        name: "sfu",
        access: Access::ReadWrite,
    },
    ResourceUse {
        name: "r4",
        access: Access::Write,
    },
];

const fn sfu_op(name: &'static str, eval: fn(&[u32]) -> u32) -> TargetOpInfo {
    TargetOpInfo {
        info: unary(name),
        unit: "sfu",
        latency: 2,
        resources: SFU_RESOURCES,
        operand_classes: None,
        def_classes: None,
        eval: Some(eval),
        cross_lane: None,
    }
}

/// Index of each opcode in [`VC4_OPS`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    Fadd,
    Fsub,
    Fmin,
    Fmax,
    Fminabs,
    Fmaxabs,
    Ftoi,
    Itof,
    Add,
    Sub,
    Shr,
    Asr,
    Ror,
    Shl,
    Min,
    Max,
    And,
    Or,
    Xor,
    Not,
    Clz,
    V8adds,
    V8subs,
    Fmul,
    Mul24,
    V8muld,
    V8min,
    V8max,
    Recip,
    Recipsqrt,
    Exp2,
    Log2,
}

impl Op {
    /// The opcode as a kiln target opcode.
    pub fn target_op(self) -> TargetOp {
        TargetOp(&VC4_OPS[self as usize])
    }

    pub fn opcode(self) -> kiln_ir::Opcode {
        kiln_ir::Opcode::Target(self.target_op())
    }
}

/// Index of the first opcode after the ALU and SFU ones of [`Op`]: the TMU lookups
/// (`crate::texture::TEX`, `TEX_B`), then the derivatives (`crate::derivative::FDDX`, `FDDY`).
pub const TEX_INDEX: usize = 32;

/// The vc4 opcodes: those of [`Op`], in its order, then the lookups and the derivatives.
pub static VC4_OPS: [TargetOpInfo; TEX_INDEX + 4] = [
    alu_op(binary("qpu_fadd", true), "add", |a| {
        add(AddOp::Fadd, a[0], a[1])
    }),
    alu_op(binary("qpu_fsub", false), "add", |a| {
        add(AddOp::Fsub, a[0], a[1])
    }),
    alu_op(binary("qpu_fmin", false), "add", |a| {
        add(AddOp::Fmin, a[0], a[1])
    }),
    alu_op(binary("qpu_fmax", false), "add", |a| {
        add(AddOp::Fmax, a[0], a[1])
    }),
    alu_op(binary("qpu_fminabs", false), "add", |a| {
        add(AddOp::Fminabs, a[0], a[1])
    }),
    alu_op(binary("qpu_fmaxabs", false), "add", |a| {
        add(AddOp::Fmaxabs, a[0], a[1])
    }),
    alu_op(unary("qpu_ftoi"), "add", |a| add(AddOp::Ftoi, a[0], 0)),
    alu_op(unary("qpu_itof"), "add", |a| add(AddOp::Itof, a[0], 0)),
    alu_op(binary("qpu_add", true), "add", |a| {
        add(AddOp::Add, a[0], a[1])
    }),
    alu_op(binary("qpu_sub", false), "add", |a| {
        add(AddOp::Sub, a[0], a[1])
    }),
    alu_op(binary("qpu_shr", false), "add", |a| {
        add(AddOp::Shr, a[0], a[1])
    }),
    alu_op(binary("qpu_asr", false), "add", |a| {
        add(AddOp::Asr, a[0], a[1])
    }),
    alu_op(binary("qpu_ror", false), "add", |a| {
        add(AddOp::Ror, a[0], a[1])
    }),
    alu_op(binary("qpu_shl", false), "add", |a| {
        add(AddOp::Shl, a[0], a[1])
    }),
    alu_op(binary("qpu_min", true), "add", |a| {
        add(AddOp::Min, a[0], a[1])
    }),
    alu_op(binary("qpu_max", true), "add", |a| {
        add(AddOp::Max, a[0], a[1])
    }),
    alu_op(binary("qpu_and", true), "add", |a| {
        add(AddOp::And, a[0], a[1])
    }),
    alu_op(binary("qpu_or", true), "add", |a| {
        add(AddOp::Or, a[0], a[1])
    }),
    alu_op(binary("qpu_xor", true), "add", |a| {
        add(AddOp::Xor, a[0], a[1])
    }),
    alu_op(unary("qpu_not"), "add", |a| add(AddOp::Not, a[0], 0)),
    alu_op(unary("qpu_clz"), "add", |a| add(AddOp::Clz, a[0], 0)),
    alu_op(binary("qpu_v8adds", true), "add", |a| {
        add(AddOp::V8adds, a[0], a[1])
    }),
    alu_op(binary("qpu_v8subs", false), "add", |a| {
        add(AddOp::V8subs, a[0], a[1])
    }),
    alu_op(binary("qpu_fmul", true), "mul", |a| {
        mul(MulOp::Fmul, a[0], a[1])
    }),
    alu_op(binary("qpu_mul24", true), "mul", |a| {
        mul(MulOp::Mul24, a[0], a[1])
    }),
    alu_op(binary("qpu_v8muld", true), "mul", |a| {
        mul(MulOp::V8muld, a[0], a[1])
    }),
    alu_op(binary("qpu_v8min", true), "mul", |a| {
        mul(MulOp::V8min, a[0], a[1])
    }),
    alu_op(binary("qpu_v8max", true), "mul", |a| {
        mul(MulOp::V8max, a[0], a[1])
    }),
    sfu_op("qpu_recip", |a| sfu::sfu(waddr::SFU_RECIP, a[0])),
    sfu_op("qpu_recipsqrt", |a| sfu::sfu(waddr::SFU_RECIPSQRT, a[0])),
    sfu_op("qpu_exp2", |a| sfu::sfu(waddr::SFU_EXP, a[0])),
    sfu_op("qpu_log2", |a| sfu::sfu(waddr::SFU_LOG, a[0])),
    crate::texture::TEX_INFO,
    crate::texture::TEX_B_INFO,
    crate::derivative::FDDX_INFO,
    crate::derivative::FDDY_INFO,
];

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::Opcode;

    const ALL: [Op; 32] = [
        Op::Fadd,
        Op::Fsub,
        Op::Fmin,
        Op::Fmax,
        Op::Fminabs,
        Op::Fmaxabs,
        Op::Ftoi,
        Op::Itof,
        Op::Add,
        Op::Sub,
        Op::Shr,
        Op::Asr,
        Op::Ror,
        Op::Shl,
        Op::Min,
        Op::Max,
        Op::And,
        Op::Or,
        Op::Xor,
        Op::Not,
        Op::Clz,
        Op::V8adds,
        Op::V8subs,
        Op::Fmul,
        Op::Mul24,
        Op::V8muld,
        Op::V8min,
        Op::V8max,
        Op::Recip,
        Op::Recipsqrt,
        Op::Exp2,
        Op::Log2,
    ];

    /// `Op` indexes the table in order, names are unique, never shadow a shared opcode, and
    /// are found through the target.
    #[test]
    fn table_matches_the_enum() {
        let t = crate::target::Vc4Target::new(1);
        for (i, op) in ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
            let name = VC4_OPS[i].info.name;
            let want = format!("qpu_{}", format!("{op:?}").to_lowercase());
            assert_eq!(name, want);
            assert!(Opcode::from_name(name).is_none());
            assert_eq!(Opcode::from_name_in(name, &t), Some(op.opcode()));
        }
    }

    fn f(x: f32) -> u32 {
        x.to_bits()
    }

    /// A few lanes of each kind of rule: truncating add, flushed denormals, ftoi's zero out of
    /// range, mul24's low bits, shifts mod 32, the SFU on |x|.
    #[test]
    fn eval_follows_the_qpu() {
        let ev = |op: Op, a: &[u32]| (VC4_OPS[op as usize].eval.unwrap())(a);
        // 1 + 0.75 ulp rounds to 1 + 1 ulp in IEEE; the QPU truncates to 1.
        assert_eq!(ev(Op::Fadd, &[f(1.0), f(0.75 * f32::EPSILON)]), f(1.0));
        assert_eq!(ev(Op::Fsub, &[f(-1.0), f(0.75 * f32::EPSILON)]), f(-1.0));
        assert_eq!(ev(Op::Fmul, &[f(1e-20), f(1e-20)]), 0);
        assert_eq!(ev(Op::Ftoi, &[f(3e9)]), 0);
        assert_eq!(ev(Op::Ftoi, &[f(-2.7)]), -2i32 as u32);
        assert_eq!(ev(Op::Ftoi, &[f(f32::NAN)]), 0);
        assert_eq!(ev(Op::Mul24, &[0x0100_0003, 5]), 15);
        assert_eq!(ev(Op::Shl, &[1, 33]), 2);
        assert_eq!(ev(Op::Asr, &[0x8000_0000, 31]), u32::MAX);
        assert_eq!(ev(Op::Clz, &[0]), 32);
        assert_eq!(ev(Op::Recipsqrt, &[f(-4.0)]), f(0.5));
        assert_eq!(ev(Op::Recip, &[f(0.0)]), f(f32::INFINITY));
        assert_eq!(ev(Op::Log2, &[f(8.0)]), f(3.0));
        assert_eq!(ev(Op::Exp2, &[f(-1.0)]), f(0.5));
    }
}
