//! kiln's SSA machine IR (DESIGN.md §3): dense entities, the register model, instructions with
//! seed 000's operand flags, structured SIMT control flow with its two CFGs, a builder, the
//! `.kir` text format and the verifier.

pub mod builder;
pub mod cfg;
pub mod dominance;
mod entity;
mod function;
pub mod generate;
mod inst;
pub mod layout;
mod opcode;
mod regs;
mod resized;
pub mod sample;
pub mod semantics;
pub mod target_op;
pub mod text;
pub mod verify;

pub use cfg::{Cfg, LoopInfo};
pub use dominance::DomTree;
pub use entity::{Block, Temp};
pub use function::{BlockData, Function};
pub use inst::{Def, Inst, InstFlags, Operand, OperandFlags, Value};
pub use opcode::{Arity, OpInfo, Opcode};
pub use regs::{
    Demand, FileId, GenericTarget, Lanes, MAX_FILES, MAX_GENERIC_UNITS, PhysReg, RegClass, RegFile,
    RegSubset, SubsetId, Target, TargetConstructor, TargetRegistry, UnitMask,
    close_under_intersection, lowest_unit, unit_in,
};
pub use resized::ResizedTarget;
pub use target_op::{ClassReq, CrossLaneEval, TargetOp, TargetOpInfo};
pub use text::{ParseError, parse_function, print_function};
pub use verify::{VerifyError, verify, verify_inst, verify_with_cfg};
