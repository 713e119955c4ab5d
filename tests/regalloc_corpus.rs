//! The whole corpus through both allocators at two budgets of the generic target: every entry
//! point that lowers is allocated, the checker proves every allocation, and the allocated
//! program run in SIMT mode agrees with the SSA program. Long: run in release,
//! `cargo test --release --test regalloc_corpus -- --ignored`.

use kiln::cli::regalloc::{CorpusRegallocArgs, corpus_regalloc};
use kiln_regalloc::Allocator;
use std::path::PathBuf;

fn run(allocator: Allocator, budget: Option<&str>) {
    let args = CorpusRegallocArgs {
        dir: PathBuf::from("../shared/corpus"),
        allocator,
        budget: budget.map(str::to_string),
        no_opt: false,
        run: true,
        tsv: None,
        jobs: None,
        verbose: true,
    };
    if let Err(e) = corpus_regalloc(args) {
        panic!("{e:?}");
    }
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
