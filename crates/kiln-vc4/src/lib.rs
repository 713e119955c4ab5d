//! kiln-vc4: the Broadcom VideoCore IV QPU (Raspberry Pi 1–3) — instruction model,
//! encoder/decoder, Mesa-compatible disassembler, assembler, validator and a 16-lane simulator.
//!
//! See `docs/vc4.md` for the design and `../shared/vc4/README.md` for the ISA facts.

pub mod compile;
pub mod derivative;
pub mod emit;
pub mod harness;
pub mod interface;
pub mod isa;
pub mod isel;
pub mod narrow;
pub mod ops;
pub mod render;
pub mod sim;
pub mod target;
pub mod texture;
pub mod uniforms;
pub mod vertex;
pub mod words;
