//! Registers nothing defined hold a pattern (`Env::poison`) that no correct program depends on:
//! a SIMT run reads it where a program reads a register it never wrote, and `diff::compare`
//! runs an allocated program under two patterns, so a program whose output only happens to
//! match under one of them is caught.

use kiln_interp::{Env, POISON, Slot, compare, run_simt};

const BEFORE: &str = "target generic(v=16, s=8)

function @f {
bb0:
    %0:v1 = input 0
    output 0, %0
    return
}
";

/// A wrong allocation: the output reads v[1], which nothing writes.
const AFTER: &str = "target generic(v=16, s=8)

function @f allocated {
bb0:
    %0:v1@v[0] = input 0
    output 0, %0@v[1]
    return
}
";

/// What lane `lane` of unit 1 holds under `poison` (the interpreter's pattern: the pattern
/// xor the storage index times a constant, unit-major).
fn pattern(poison: u32, lanes: usize, lane: usize) -> u32 {
    poison ^ ((lanes + lane) as u32).wrapping_mul(0x9e37_79b9)
}

#[test]
fn an_output_that_matches_under_one_poison_only_is_caught() {
    let before = kiln_ir::parse_function(BEFORE).expect("parses");
    let after = kiln_ir::parse_function(AFTER).expect("parses");
    let lanes = 4;
    // Inputs equal to what the unwritten register holds under the default pattern.
    let env = Env::from_slots(&before, lanes, |s| match s {
        Slot::Input { lane, .. } => pattern(POISON, lanes, lane),
        Slot::Uniform(_) => 0,
    });
    let once = run_simt(&after, &env).expect("runs");
    let got: Vec<u32> = (0..lanes)
        .map(|l| once.slots[&0][l].as_ref().unwrap()[0].unwrap())
        .collect();
    let want: Vec<u32> = (0..lanes).map(|l| pattern(POISON, lanes, l)).collect();
    assert_eq!(got, want, "the unwritten register reads the pattern");
    // One run agrees by accident; the second pattern exposes it.
    assert!(
        kiln_interp::diff::compare_outputs(&kiln_interp::run_ssa(&before, &env).unwrap(), &once)
            .is_ok()
    );
    assert!(
        compare(&before, &after, &env).is_err(),
        "the second pattern must differ"
    );
}
