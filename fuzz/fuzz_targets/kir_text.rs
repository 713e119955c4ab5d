//! Any text: the reader answers without panicking; whatever parses and verifies prints back to
//! itself, survives liveness with its flags still valid, and runs or fails cleanly.
#![no_main]

use kiln_analysis::{Cfg, compute_liveness};
use kiln_interp::{Env, run_ssa};
use kiln_ir::{parse_function, print_function, verify};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(mut func) = parse_function(text) else { return };
    let printed = print_function(&func);
    let again = parse_function(&printed).expect("printed text parses");
    assert_eq!(print_function(&again), printed, "round trip");
    if verify(&func).is_err() || func.allocated {
        return;
    }
    let cfg = Cfg::compute(&func).expect("verified functions are structured");
    compute_liveness(&mut func, &cfg);
    assert!(verify(&func).is_ok(), "liveness wrote invalid flags");
    let mut env = Env::for_function(&func, 4, 1);
    env.step_limit = 10_000;
    let _ = run_ssa(&func, &env);
});
