//! kiln register allocation (DESIGN.md §5). This crate holds the allocation checker that every
//! allocator's output goes through ([`checker`]), the register model of seed 002
//! that the class-based graph-colouring allocator works from ([`regset`]), and the lowering of
//! parallel copies to moves and swaps ([`parallel_copy`]), and the spiller of the SSA allocator
//! ([`spill`]).

pub mod checker;
pub mod parallel_copy;
pub mod regset;
pub mod spill;

pub use regset::RegModel;
