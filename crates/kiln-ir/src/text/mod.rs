//! The `.kir` text format: a printer and a reader that round-trip exactly (grammar in
//! `docs/ir.md`).

mod lexer;
mod parse;
mod print;

pub use parse::{ParseError, parse_function, parse_function_with};
pub use print::{
    fmt_class, fmt_const, fmt_reg, print_function, print_function_annotated, print_inst,
};
