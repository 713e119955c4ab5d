//! One opcode space for special, generic and target instructions, with a per-op info table.

use crate::target_op::TargetOp;
use std::fmt;

/// How many of something an instruction has.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Arity {
    Fixed(u8),
    Variable,
}

impl Arity {
    pub fn accepts(self, n: usize) -> bool {
        match self {
            Arity::Fixed(k) => k as usize == n,
            Arity::Variable => true,
        }
    }
}

/// Static facts about an opcode.
#[derive(Clone, Copy, Debug)]
pub struct OpInfo {
    pub name: &'static str,
    pub defs: Arity,
    pub operands: Arity,
    /// Number of immediate fields (locations, slots, texture units...).
    pub imms: u8,
    /// Number of block targets (terminators only).
    pub targets: u8,
    pub commutative: bool,
    /// Must not be removed or reordered past other side effects.
    pub side_effects: bool,
    /// Writes every lane of its definitions, active or not (seed 003's header setup).
    pub writes_all_lanes: bool,
    pub terminator: bool,
}

impl OpInfo {
    /// The facts of a target opcode with these arities (not a terminator; the rest off, to be
    /// set with struct update syntax).
    pub const fn target(name: &'static str, defs: Arity, operands: Arity, imms: u8) -> OpInfo {
        info(name, defs, operands, imms, 0)
    }
}

const fn info(name: &'static str, defs: Arity, operands: Arity, imms: u8, targets: u8) -> OpInfo {
    OpInfo {
        name,
        defs,
        operands,
        imms,
        targets,
        commutative: false,
        side_effects: false,
        writes_all_lanes: false,
        terminator: targets > 0,
    }
}

const fn f(n: u8) -> Arity {
    Arity::Fixed(n)
}
const VAR: Arity = Arity::Variable;

const fn alu(name: &'static str, n: u8) -> OpInfo {
    info(name, f(1), f(n), 0, 0)
}
const fn comm(name: &'static str) -> OpInfo {
    let mut i = alu(name, 2);
    i.commutative = true;
    i
}
const fn effect(mut i: OpInfo) -> OpInfo {
    i.side_effects = true;
    i
}
const fn term(mut i: OpInfo) -> OpInfo {
    i.terminator = true;
    i.side_effects = true;
    i
}

macro_rules! opcodes {
    ($($(#[$doc:meta])* $variant:ident => $info:expr,)*) => {
        /// An instruction's operation.
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
        pub enum Opcode {
            $($(#[$doc])* $variant,)*
            /// An opcode its target declares (`crate::target_op`).
            Target(TargetOp),
        }

        impl Opcode {
            /// Every special and generic opcode, in declaration order (target opcodes are the
            /// targets' own).
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant,)*];

            /// The position of a special or generic opcode in [`Opcode::ALL`] (`None` for a
            /// target's): a dense index for tables by operation.
            pub const fn generic_index(self) -> Option<usize> {
                /// The opcodes without their targets' one, numbered in declaration order.
                #[allow(dead_code)]
                enum Plain {
                    $($variant,)*
                }
                match self {
                    $(Opcode::$variant => Some(Plain::$variant as usize),)*
                    Opcode::Target(_) => None,
                }
            }

            /// The static facts of this opcode.
            pub const fn info(self) -> &'static OpInfo {
                match self {
                    $(Opcode::$variant => {
                        const I: OpInfo = $info;
                        &I
                    })*
                    Opcode::Target(t) => &t.0.info,
                }
            }
        }
    };
}

opcodes! {
    // --- special instructions ---
    /// SSA phi over the logical predecessors, in predecessor order.
    Phi => info("phi", f(1), VAR, 0, 0),
    /// SSA phi over the linear predecessors, in predecessor order.
    LinearPhi => info("linear_phi", f(1), VAR, 0, 0),
    /// Copies every operand to its definition at once.
    ParallelCopy => info("parallel_copy", VAR, VAR, 0, 0),
    /// MERGE / collect: concatenates operands into one vector.
    CreateVector => info("create_vector", f(1), VAR, 0, 0),
    /// SPLIT: cuts one vector into consecutive parts.
    SplitVector => info("split_vector", VAR, f(1), 0, 0),
    /// Stores a value into spill slot `imm0`.
    Spill => effect(info("spill", f(0), f(1), 1, 0)),
    /// Loads a value from spill slot `imm0`.
    Reload => info("reload", f(1), f(0), 1, 0),
    /// Plain copy.
    Mov => alu("mov", 1),
    // --- structured control flow (terminators) ---
    /// Unconditional jump.
    Jump => term(info("jump", f(0), f(0), 0, 1)),
    /// Structured if: condition; then, else (equal to endif when there is none), endif blocks.
    If => term(info("if", f(0), f(1), 0, 3)),
    /// Enters a loop: header block, exit block.
    Loop => term(info("loop", f(0), f(0), 0, 2)),
    /// Leaves the innermost loop (target: its exit block).
    Break => term(info("break", f(0), f(0), 0, 1)),
    /// Next iteration of the innermost loop (target: its header); ends every loop body.
    Continue => term(info("continue", f(0), f(0), 0, 1)),
    /// Ends the program.
    Return => term(info("return", f(0), f(0), 0, 0)),
    // --- integer arithmetic (wrapping, 32-bit) ---
    Iadd => comm("iadd"),
    Isub => alu("isub", 2),
    Imul => comm("imul"),
    Ineg => alu("ineg", 1),
    Iabs => alu("iabs", 1),
    Iand => comm("iand"),
    Ior => comm("ior"),
    Ixor => comm("ixor"),
    Inot => alu("inot", 1),
    Ishl => alu("ishl", 2),
    Ushr => alu("ushr", 2),
    Ishr => alu("ishr", 2),
    Imin => comm("imin"),
    Imax => comm("imax"),
    Umin => comm("umin"),
    Umax => comm("umax"),
    /// Signed division, truncating; `x / 0 = x`, `i32::MIN / -1 = i32::MIN` (WGSL).
    Idiv => alu("idiv", 2),
    /// Unsigned division; `x / 0 = x`.
    Udiv => alu("udiv", 2),
    /// Signed remainder with the sign of the dividend; `x % 0 = 0`.
    Irem => alu("irem", 2),
    /// Unsigned remainder; `x % 0 = 0`.
    Urem => alu("urem", 2),
    /// Number of set bits.
    Ibitcount => alu("ibitcount", 1),
    /// Bits in reverse order.
    Ibitreverse => alu("ibitreverse", 1),
    /// Count of leading zero bits (32 for 0).
    Iclz => alu("iclz", 1),
    /// Count of trailing zero bits (32 for 0).
    Ictz => alu("ictz", 1),
    /// `ubfe x, offset, count`: `count` bits of `x` from `offset`, zero-extended.
    Ubfe => alu("ubfe", 3),
    /// `ibfe x, offset, count`: the same, sign-extended.
    Ibfe => alu("ibfe", 3),
    /// `bfi base, insert, offset, count`: `base` with `count` bits from `offset` replaced by `insert`.
    Bfi => alu("bfi", 4),
    // --- float arithmetic (IEEE single) ---
    Fadd => comm("fadd"),
    Fsub => alu("fsub", 2),
    Fmul => comm("fmul"),
    Ffma => alu("ffma", 3),
    Fdiv => alu("fdiv", 2),
    Fneg => alu("fneg", 1),
    Fabs => alu("fabs", 1),
    Fmin => comm("fmin"),
    Fmax => comm("fmax"),
    Frcp => alu("frcp", 1),
    Frsq => alu("frsq", 1),
    Fsqrt => alu("fsqrt", 1),
    Fexp2 => alu("fexp2", 1),
    Flog2 => alu("flog2", 1),
    Ffloor => alu("ffloor", 1),
    Fceil => alu("fceil", 1),
    Ftrunc => alu("ftrunc", 1),
    Fround => alu("fround", 1),
    Ffract => alu("ffract", 1),
    Fsin => alu("fsin", 1),
    Fcos => alu("fcos", 1),
    /// `fpow x, y` = x^y.
    Fpow => alu("fpow", 2),
    /// -1.0, 0.0 or 1.0 (NaN gives 0.0).
    Fsign => alu("fsign", 1),
    Fatan => alu("fatan", 1),
    /// `fatan2 y, x`.
    Fatan2 => alu("fatan2", 2),
    Fasin => alu("fasin", 1),
    Facos => alu("facos", 1),
    /// Horizontal derivative within the 2×2 quad of lanes (4k..4k+3, x = bit 0).
    Fddx => info("fddx", f(1), f(1), 0, 0),
    /// Vertical derivative within the 2×2 quad of lanes (y = bit 1).
    Fddy => info("fddy", f(1), f(1), 0, 0),
    // --- comparisons: all-ones when true, zero when false ---
    Ieq => comm("ieq"),
    Ine => comm("ine"),
    Ilt => alu("ilt", 2),
    Ile => alu("ile", 2),
    Ult => alu("ult", 2),
    Ule => alu("ule", 2),
    Feq => comm("feq"),
    Fne => comm("fne"),
    Flt => alu("flt", 2),
    Fle => alu("fle", 2),
    /// `sel c, a, b`: a where c is non-zero, else b.
    Sel => alu("sel", 3),
    // --- conversions ---
    I2f => alu("i2f", 1),
    U2f => alu("u2f", 1),
    F2i => alu("f2i", 1),
    F2u => alu("f2u", 1),
    // --- interface ---
    /// Per-lane shader input at location `imm0` (attribute or varying component).
    Input => info("input", f(1), f(0), 1, 0),
    /// Uniform slot `imm0`; the same value in every lane, written to all lanes.
    Uniform => OpInfo { writes_all_lanes: true, ..info("uniform", f(1), f(0), 1, 0) },
    /// Writes output location `imm0`.
    Output => effect(info("output", f(0), f(1), 1, 0)),
    /// Samples texture unit `imm0` with mode `imm1` ([`crate::sample::SampleMode`]: level of
    /// detail, dimension, array, comparison) at the coordinate operands; defines a vector.
    TextureSample => info("texture_sample", f(1), VAR, 2, 0),
    /// Reads texel (x, y) (integer operands, then optional layer and level) of unit `imm0`
    /// without filtering; defines a vector.
    TextureFetch => info("texture_fetch", f(1), VAR, 1, 0),
    /// Ends the active lanes without output (fragment discard).
    Discard => effect(info("discard", f(0), f(0), 0, 0)),
}

impl Opcode {
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Looks a special or generic opcode up by its text name.
    pub fn from_name(name: &str) -> Option<Opcode> {
        Opcode::ALL.iter().copied().find(|op| op.name() == name)
    }

    /// Looks an opcode up by its text name, the target's own opcodes after the shared ones.
    pub fn from_name_in(name: &str, target: &dyn crate::Target) -> Option<Opcode> {
        Opcode::from_name(name).or_else(|| {
            target
                .opcodes()
                .iter()
                .find(|t| t.info.name == name)
                .map(|t| Opcode::Target(TargetOp(t)))
        })
    }

    /// The target's facts, for a target opcode.
    pub fn target_info(self) -> Option<&'static crate::target_op::TargetOpInfo> {
        match self {
            Opcode::Target(t) => Some(t.0),
            _ => None,
        }
    }

    pub fn is_phi(self) -> bool {
        matches!(self, Opcode::Phi | Opcode::LinearPhi)
    }

    pub fn is_terminator(self) -> bool {
        self.info().terminator
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        for &op in Opcode::ALL {
            assert_eq!(Opcode::from_name(op.name()), Some(op), "{op:?}");
        }
    }

    #[test]
    fn generic_indices_are_positions_in_all() {
        for (k, &op) in Opcode::ALL.iter().enumerate() {
            assert_eq!(op.generic_index(), Some(k), "{op:?}");
        }
    }

    #[test]
    fn terminators_have_no_definitions() {
        for &op in Opcode::ALL.iter().filter(|op| op.is_terminator()) {
            assert_eq!(op.info().defs, Arity::Fixed(0), "{op:?}");
        }
    }
}
