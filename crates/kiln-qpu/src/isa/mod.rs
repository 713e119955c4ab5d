//! The VideoCore IV QPU instruction set: typed model, encoding, text and rules.

pub mod asm;
pub mod builder;
pub mod census;
pub mod disasm;
pub mod effects;
pub mod fields;
pub mod instr;
pub mod latency;
pub mod merge;
pub mod names;
pub mod validate;
pub mod validate_mesa;

pub use asm::{AsmError, assemble, assemble_line, normalize};
pub use disasm::{Style, disasm, disasm_program};
pub use fields::*;
pub use instr::*;
pub use validate::{Rule, Violation, validate, validate_instrs};
pub use validate_mesa::{MesaReject, validate_mesa};
