//! The whole corpus through both allocators at three budgets of the generic target: every entry
//! point that lowers is allocated, the checker proves every allocation, and the allocated
//! program run in SIMT mode agrees with the SSA program; at a few registers only instructions
//! that alone need more fail. Long: run in release,
//! `cargo test --release --test regalloc_corpus -- --ignored`.

use kiln::pipeline::Options;
use kiln_regalloc::Allocator;
use std::path::Path;

fn run(allocator: Allocator, budget: Option<&str>) {
    let failed = run_failing(allocator, budget, true);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Allocates the corpus (after the middle end, or as lowered); returns the failures.
fn run_failing(allocator: Allocator, budget: Option<&str>, optimise: bool) -> Vec<String> {
    let options = Options {
        allocator,
        ..Options::default()
    };
    let run = kiln::corpus::regalloc(
        Path::new("../shared/corpus"),
        None,
        &options,
        budget,
        optimise,
        true,
    )
    .unwrap();
    eprint!("{}", run.summary(allocator == Allocator::Graph));
    assert!(
        run.allocated.len() > 4000,
        "{} allocated",
        run.allocated.len()
    );
    run.failed
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

/// A budget of a few registers, after the middle end and as lowered: allocation never fails
/// while every single instruction fits the budget. The only failures allowed are instructions
/// that alone need more than the budget given (not one the assignment lowered), e.g. a texture
/// sample whose coordinates, bias and result need ten units.
fn few_registers(allocator: Allocator) {
    let mut failed = run_failing(allocator, Some("v=8,s=4"), true);
    failed.extend(run_failing(allocator, Some("v=8,s=4"), false));
    let wrong: Vec<&String> = failed
        .iter()
        .filter(|e| !e.contains("for its own operands and definitions") || e.contains("lowered to"))
        .collect();
    eprintln!(
        "{} entry points need more than the budget at one instruction",
        failed.len()
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(failed.len() <= 4, "{failed:#?}");
}

#[test]
#[ignore = "whole corpus: run in release"]
fn corpus_allocates_at_few_registers() {
    few_registers(Allocator::Ssa);
}

#[test]
#[ignore = "whole corpus: run in release"]
fn corpus_colours_at_few_registers() {
    few_registers(Allocator::Graph);
}
