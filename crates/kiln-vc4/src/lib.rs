//! kiln-vc4: the code generator for the Broadcom VideoCore IV QPU (`kiln-qpu` is the machine):
//! typed vc4 operations, instruction selection, register classes, interface lowering and
//! emission, the differential harness and the renderer.
//!
//! See `docs/vc4.md` for the design and `../shared/vc4/README.md` for the ISA facts.

pub mod accumulators;
pub mod bypass;
pub mod colour_clamp;
pub mod compare_at_use;
pub mod compile;
pub mod dead_writes;
pub mod emit;
pub mod harness;
pub mod interface;
pub mod isel;
pub mod narrow;
pub mod ops;
pub mod pack_fold;
pub mod pre_sched;
pub mod r4_forward;
pub mod rename;
pub mod render;
pub mod schedule;
pub mod target;
pub mod target_slots;
pub mod texture;
pub mod threads;
pub mod uniforms;
pub mod vertex;
