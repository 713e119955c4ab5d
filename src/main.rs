//! The `kiln` command.

use clap::Parser;

/// mimalloc: a compile makes tens of thousands of short-lived allocations, which glibc's
/// allocator serves at several times the cost (`kiln bench compile-cost`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> miette::Result<()> {
    kiln_front::install_quiet_panic_hook();
    kiln::cli::Cli::parse().run()
}
