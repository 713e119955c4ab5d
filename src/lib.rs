//! kiln: the driver library (pipeline, reports) behind the `kiln` command.

pub mod cli;
