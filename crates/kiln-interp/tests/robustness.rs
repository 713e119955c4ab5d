//! Any program that verifies runs to an answer or an error, never a panic: mutated generated
//! programs that still verify are run in both modes.

use kiln_interp::out_of_ssa::reference_assignment;
use kiln_interp::{Env, run_simt, run_ssa};
use kiln_ir::generate::{GenConfig, Rng, generate};
use kiln_ir::{parse_function, print_function, verify};

#[test]
fn verified_mutants_never_panic() {
    let mut rng = Rng::new(77);
    let alphabet: Vec<char> = "%0123456789,.-".chars().collect();
    let mut ran = 0;
    for seed in 0..40 {
        let text: Vec<char> = print_function(&generate(&GenConfig::new(seed)))
            .chars()
            .collect();
        for _ in 0..60 {
            let mut m = text.clone();
            let at = rng.below(m.len());
            m[at] = alphabet[rng.below(alphabet.len())];
            let s: String = m.into_iter().collect();
            let Ok(f) = parse_function(&s) else { continue };
            if verify(&f).is_err() {
                continue;
            }
            let mut env = Env::for_function(&f, 8, seed);
            env.step_limit = 20_000;
            let _ = run_ssa(&f, &env);
            if let Ok(a) = reference_assignment(&f) {
                let _ = run_simt(&a, &env);
            }
            ran += 1;
        }
    }
    assert!(ran > 100, "only {ran} mutants verified");
}
