//! A fixed slice of the allocators' campaign (`kiln fuzz regalloc`): seeds 1,000,000 on, both
//! allocators, the generic target and vc4; every allocation checked and run against the SSA
//! program, and no failure allowed. The long runs are `kiln fuzz regalloc --count N` (or this
//! file's ignored test with `KILN_FUZZ_SEEDS=N`, in release).

use kiln::fuzz::{Options, Target, campaign};
use kiln_regalloc::Allocator;
use std::sync::Mutex;

fn run(count: u64) {
    let options = Options {
        allocators: vec![Allocator::Ssa, Allocator::Graph],
        targets: vec![Target::Generic, Target::Vc4],
        from: 1_000_000,
        count: Some(count),
        seconds: None,
        jobs: 0,
    };
    let failures = Mutex::new(Vec::new());
    let report = campaign(&options, |f| failures.lock().unwrap().push(f.to_string()));
    eprint!("{report}");
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(report.seeds, count);
    for ((target, allocator), c) in &report.counts {
        // Most programs allocate within the budget and run.
        assert!(
            c.agrees * 10 >= c.programs * 9,
            "{target} {allocator:?}: {} of {} agree",
            c.agrees,
            c.programs
        );
    }
}

#[test]
fn campaign_slice() {
    run(200);
}

#[test]
#[ignore = "long: run in release with KILN_FUZZ_SEEDS=N"]
fn campaign_long() {
    let count = std::env::var("KILN_FUZZ_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    run(count);
}
