//! When a result can be read, in instructions from the one that writes it (the reference guide's
//! instruction restrictions; Mesa `vc4_qpu_schedule.c`, `waddr_latency`). The validator checks
//! these distances; code generators plan with them.

/// A file A or B register is readable from the second instruction after its write.
pub const REGFILE: usize = 2;
/// An accumulator (r0–r3, r5) is readable by the next instruction.
pub const ACCUMULATOR: usize = 1;
/// r4 holds an SFU result from the third instruction after the SFU write.
pub const SFU: usize = 3;
/// A texture lookup: `ldtmu` may follow its request at once (the QPU stalls until the result is
/// there); this is Mesa's estimate of the wait, in cycles, for a scheduler to hide.
pub const TMU_ESTIMATE: usize = 100;
