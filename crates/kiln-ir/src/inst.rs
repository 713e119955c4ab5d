//! Instructions, operands and definitions (modelled on ACO's `aco_ir.h` and NAK's `ir.rs`).

use crate::entity::{Block, Temp};
use crate::opcode::Opcode;
use crate::regs::{PhysReg, RegClass};
use smallvec::SmallVec;

/// What an operand reads.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Value {
    Temp(Temp),
    /// A 32-bit constant (bit pattern).
    Const(u32),
    /// An undefined value of a class (occupies no register).
    Undef(RegClass),
}

/// The operand flags of seed 000 (ACO's live variable analysis).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub struct OperandFlags(u8);

impl OperandFlags {
    /// Not live after the instruction.
    pub const KILL: OperandFlags = OperandFlags(1);
    /// First operand of its temp in the instruction that is killed.
    pub const FIRST_KILL: OperandFlags = OperandFlags(2);
    /// Cannot share registers with any definition.
    pub const LATE_KILL: OperandFlags = OperandFlags(4);
    /// Shares registers with a definition (tied).
    pub const CLOBBERED: OperandFlags = OperandFlags(8);
    /// Must use a different register than earlier instances of its temp in the instruction.
    pub const COPY_KILL: OperandFlags = OperandFlags(16);
    /// Starts or continues a vector of operands placed in consecutive registers.
    pub const VECTOR_ALIGNED: OperandFlags = OperandFlags(32);

    /// Flags with their text names, in printing order.
    pub const NAMES: [(OperandFlags, &'static str); 6] = [
        (Self::KILL, "kill"),
        (Self::FIRST_KILL, "first_kill"),
        (Self::LATE_KILL, "late_kill"),
        (Self::CLOBBERED, "clobbered"),
        (Self::COPY_KILL, "copy_kill"),
        (Self::VECTOR_ALIGNED, "vector_aligned"),
    ];

    pub const fn empty() -> Self {
        OperandFlags(0)
    }
    pub fn contains(self, other: OperandFlags) -> bool {
        self.0 & other.0 == other.0
    }
    pub fn set(&mut self, flag: OperandFlags, on: bool) {
        if on {
            self.0 |= flag.0;
        } else {
            self.0 &= !flag.0;
        }
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for OperandFlags {
    type Output = OperandFlags;
    fn bitor(self, rhs: OperandFlags) -> OperandFlags {
        OperandFlags(self.0 | rhs.0)
    }
}

/// An operand: a value, its flags, an optional fixed register (a constraint) and, after register
/// allocation, the register it is read from.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Operand {
    pub value: Value,
    pub flags: OperandFlags,
    pub fixed: Option<PhysReg>,
    pub reg: Option<PhysReg>,
}

impl Operand {
    pub fn temp(t: Temp) -> Operand {
        Operand::from(Value::Temp(t))
    }
    pub fn constant(bits: u32) -> Operand {
        Operand::from(Value::Const(bits))
    }
    pub fn undef(class: RegClass) -> Operand {
        Operand::from(Value::Undef(class))
    }
    pub fn temp_id(&self) -> Option<Temp> {
        match self.value {
            Value::Temp(t) => Some(t),
            _ => None,
        }
    }
    pub fn has(&self, flag: OperandFlags) -> bool {
        self.flags.contains(flag)
    }
    pub fn is_kill(&self) -> bool {
        self.has(OperandFlags::KILL)
    }
    pub fn is_first_kill(&self) -> bool {
        self.has(OperandFlags::FIRST_KILL)
    }
    pub fn is_late_kill(&self) -> bool {
        self.has(OperandFlags::LATE_KILL)
    }
    pub fn is_clobbered(&self) -> bool {
        self.has(OperandFlags::CLOBBERED)
    }
    pub fn is_copy_kill(&self) -> bool {
        self.has(OperandFlags::COPY_KILL)
    }
    pub fn is_vector_aligned(&self) -> bool {
        self.has(OperandFlags::VECTOR_ALIGNED)
    }
    pub fn with_flags(mut self, flags: OperandFlags) -> Operand {
        self.flags = self.flags | flags;
        self
    }
    pub fn with_fixed(mut self, reg: PhysReg) -> Operand {
        self.fixed = Some(reg);
        self
    }
}

impl From<Value> for Operand {
    fn from(value: Value) -> Operand {
        Operand {
            value,
            flags: OperandFlags::empty(),
            fixed: None,
            reg: None,
        }
    }
}

impl From<Temp> for Operand {
    fn from(t: Temp) -> Operand {
        Operand::temp(t)
    }
}

/// A definition: the temp written, an optional fixed register, an optional operand it is tied to
/// (two-address and in-place ops), the dead flag, and after allocation its register.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Def {
    pub temp: Temp,
    pub fixed: Option<PhysReg>,
    /// Index of the operand this definition must share registers with.
    pub tied: Option<u8>,
    /// Not used later (ACO's `isKill` on a definition).
    pub dead: bool,
    pub reg: Option<PhysReg>,
}

impl Def {
    pub fn new(temp: Temp) -> Def {
        Def {
            temp,
            fixed: None,
            tied: None,
            dead: false,
            reg: None,
        }
    }
}

/// Per-instruction flags.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub struct InstFlags {
    /// For `if`: lanes may disagree on the condition.
    pub divergent: bool,
    /// Writes every lane of its definitions, active or not (i965's WE_all, seed 003).
    pub all_lanes: bool,
}

/// One instruction.
#[derive(PartialEq, Eq, Debug)]
pub struct Inst {
    pub op: Opcode,
    pub flags: InstFlags,
    pub imms: SmallVec<[u32; 2]>,
    pub defs: SmallVec<[Def; 1]>,
    pub operands: SmallVec<[Operand; 3]>,
    /// Block targets of a terminator; empty (and unallocated) for every other instruction.
    pub targets: Box<[Block]>,
}

/// A copy of each list at once (its items are `Copy`), not item by item as the derived clone of
/// a `SmallVec` does: whole functions are copied several times per compile.
impl Clone for Inst {
    fn clone(&self) -> Inst {
        Inst {
            op: self.op,
            flags: self.flags,
            imms: SmallVec::from_slice(&self.imms),
            defs: SmallVec::from_slice(&self.defs),
            operands: SmallVec::from_slice(&self.operands),
            targets: self.targets.clone(),
        }
    }
}

impl Inst {
    pub fn new(op: Opcode) -> Inst {
        Inst {
            op,
            flags: InstFlags::default(),
            imms: SmallVec::new(),
            defs: SmallVec::new(),
            operands: SmallVec::new(),
            targets: Box::default(),
        }
    }

    /// Whether the definitions are written in every lane, active or not.
    pub fn writes_all_lanes(&self) -> bool {
        self.flags.all_lanes || self.op.info().writes_all_lanes
    }

    /// The temps this instruction reads (with repeats).
    pub fn used_temps(&self) -> impl Iterator<Item = Temp> + '_ {
        self.operands.iter().filter_map(Operand::temp_id)
    }

    /// Whether a definition or an operand is bound to a register (fixed, or tied to another).
    pub fn has_register_constraints(&self) -> bool {
        self.defs
            .iter()
            .any(|d| d.fixed.is_some() || d.tied.is_some())
            || self.operands.iter().any(|o| o.fixed.is_some())
    }

    /// Operand index → definition index for tied pairs.
    pub fn tied_def(&self, operand: usize) -> Option<usize> {
        self.defs.iter().position(|d| d.tied == Some(operand as u8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the allocator's data structures are built around: a register with its option in
    /// 4 bytes, an operand in 20 (was 36), an instruction in 160 (was 216; 16 of them are the
    /// opcode, which may point at a target's descriptor).
    #[test]
    fn compact_sizes() {
        assert_eq!(std::mem::size_of::<Option<PhysReg>>(), 4);
        assert_eq!(std::mem::size_of::<Value>(), 8);
        assert_eq!(std::mem::size_of::<Operand>(), 20);
        assert_eq!(std::mem::size_of::<Def>(), 16);
        assert_eq!(std::mem::size_of::<crate::Opcode>(), 16);
        assert!(
            std::mem::size_of::<Inst>() <= 160,
            "{}",
            std::mem::size_of::<Inst>()
        );
    }
}
