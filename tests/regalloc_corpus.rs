//! The whole corpus through both allocators at two budgets of the generic target: every entry
//! point that lowers is allocated, the checker proves every allocation, and the allocated
//! program run in SIMT mode agrees with the SSA program. Long: run in release,
//! `cargo test --release --test regalloc_corpus -- --ignored`.

use kiln::pipeline::Options;
use kiln_regalloc::Allocator;
use std::path::Path;

fn run(allocator: Allocator, budget: Option<&str>) {
    let options = Options {
        allocator,
        ..Options::default()
    };
    let run = kiln::corpus::regalloc(
        Path::new("../shared/corpus"),
        None,
        &options,
        budget,
        true,
        true,
    )
    .unwrap();
    eprint!("{}", run.summary(allocator == Allocator::Graph));
    assert!(
        run.allocated.len() > 4000,
        "{} allocated",
        run.allocated.len()
    );
    assert!(run.failed.is_empty(), "{}", run.failed.join("\n"));
}

#[test]
#[ignore = "whole corpus: run in release"]
fn corpus_allocates_at_full_budget() {
    run(Allocator::Ssa, Some("v=256,s=104"));
}

#[test]
#[ignore = "whole corpus: run in release"]
fn corpus_allocates_at_tight_budget() {
    run(Allocator::Ssa, Some("v=24,s=8"));
}

#[test]
#[ignore = "whole corpus: run in release"]
fn corpus_colours_at_full_budget() {
    run(Allocator::Graph, Some("v=256,s=104"));
}

#[test]
#[ignore = "whole corpus: run in release"]
fn corpus_colours_at_tight_budget() {
    run(Allocator::Graph, Some("v=24,s=8"));
}
