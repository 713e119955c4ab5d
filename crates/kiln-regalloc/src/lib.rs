//! kiln register allocation (DESIGN.md §5). This crate holds the register model of seed 002
//! that the class-based graph-colouring allocator works from: [`regset`].

pub mod regset;

pub use regset::RegModel;
