//! Target instructions: opcodes a target declares with the facts the IR needs — generic ones
//! (arity, side effects, writes all lanes), the classes of their operands and definitions, the
//! latency a scheduler plans with, and their meaning, so that the verifier checks them, the
//! interpreter runs them and instruction selection is tested differentially like every other
//! pass. Machine facts beyond these (units, implicit resources, hardware encodings) live in the
//! target's own typed table, which [`TargetOpInfo::code`] indexes.
//!
//! A target keeps its table in a `static` and hands out `&'static` descriptors
//! ([`Target::opcodes`](crate::Target::opcodes)); an instruction holds a pointer to one
//! ([`TargetOp`]), so `Opcode::info` answers for target opcodes too.

use crate::opcode::OpInfo;
use crate::regs::{RegClass, Target};
use std::fmt;
use std::hash::{Hash, Hasher};

/// The class an operand or definition must have: a file by name, a size, and optionally a
/// subset by name (the value's class must lie within it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ClassReq {
    pub file: &'static str,
    pub size: u8,
    pub subset: Option<&'static str>,
}

impl ClassReq {
    /// Why `class` does not meet this requirement on `target`, if it does not.
    pub fn check(&self, target: &dyn Target, class: RegClass) -> Result<(), String> {
        let Some(file) = target.file_by_name(self.file) else {
            return Err(format!("the target has no file `{}`", self.file));
        };
        if class.file != file || class.size != self.size {
            return Err(format!("needs a value of class {}{}", self.file, self.size));
        }
        if let Some(name) = self.subset {
            let Some(sub) = target.subset_by_name(name) else {
                return Err(format!("the target has no subset `{name}`"));
            };
            let required = RegClass {
                subset: Some(sub),
                ..class
            };
            // Within the subset: narrowing by it changes nothing.
            if target.intersect_classes(class, required) != Some(class) {
                return Err(format!("needs a value within subset {name}"));
            }
        }
        Ok(())
    }
}

/// The full facts of one target opcode.
#[derive(Debug)]
pub struct TargetOpInfo {
    /// Name, arity, immediates, commutative, side effects, writes all lanes. Target opcodes are
    /// never terminators.
    pub info: OpInfo,
    /// The target's own number for the opcode: its index in the target's table, where the
    /// target keeps what else it knows of it.
    pub code: u16,
    /// Instructions from it to the first that may read its result without a stall.
    pub latency: u8,
    /// Class each operand must have (`None`: any value the verifier's generic rules accept).
    pub operand_classes: Option<&'static [ClassReq]>,
    /// Class each definition must have.
    pub def_classes: Option<&'static [ClassReq]>,
    /// Its meaning on one lane: the operands' bits to the result's bits. `None` for
    /// instructions whose meaning involves state (their target's simulator runs them).
    pub eval: Option<fn(&[u32]) -> u32>,
    /// Its meaning for instructions that read other lanes (derivatives): the last
    /// definition's bits in `lane`, given `read(operand, lane)`, any lane's operand bits (`None`
    /// when undefined there). Definitions before the last are scratch registers, undefined after
    /// it (first, so that an allocator places a constrained scratch before the result takes a
    /// register). Analyses treat such an instruction as a source of divergence.
    pub cross_lane: Option<CrossLaneEval>,
}

/// See [`TargetOpInfo::cross_lane`].
pub type CrossLaneEval = fn(lane: usize, read: &dyn Fn(usize, usize) -> Option<u32>) -> Option<u32>;

/// A target opcode: a pointer to its static descriptor. Two are equal when they are the same
/// descriptor.
#[derive(Clone, Copy)]
pub struct TargetOp(pub &'static TargetOpInfo);

impl TargetOp {
    pub fn info(self) -> &'static TargetOpInfo {
        self.0
    }
}

impl PartialEq for TargetOp {
    fn eq(&self, other: &TargetOp) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for TargetOp {}

impl Hash for TargetOp {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state)
    }
}

impl fmt::Debug for TargetOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TargetOp({})", self.0.info.name)
    }
}
