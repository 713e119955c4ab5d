//! kiln-qpu: the Broadcom VideoCore IV QPU (Raspberry Pi 1–3) as a machine — the instruction
//! model, encoder and decoder, Mesa-compatible disassembler, assembler, validators, a 16-lane
//! simulator and program words. It knows nothing of kiln's IR; `kiln-vc4` generates code for it.
//!
//! The ISA facts are in `../shared/vc4/README.md`; the model and the simulator's timing in
//! `docs/vc4.md`.

pub mod isa;
pub mod sim;
pub mod words;
