//! SIMT mode on the reference assignment agrees with SSA mode on random programs.

use kiln_interp::out_of_ssa::reference_assignment;
use kiln_interp::{Env, compare, run_ssa};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{parse_function, print_function, verify};
use proptest::prelude::*;

fn check(cfg: &GenConfig, lanes: usize) -> Result<(), TestCaseError> {
    let func = generate(cfg);
    let env = Env::for_function(&func, lanes, cfg.seed ^ 0xabcd);
    if let Err(e) = run_ssa(&func, &env) {
        return Err(TestCaseError::fail(format!(
            "SSA run fails: {e}\n{:?}\n{}",
            e.trace(),
            print_function(&func)
        )));
    }
    let alloc = reference_assignment(&func).map_err(TestCaseError::fail)?;
    if let Err(errs) = verify(&alloc) {
        return Err(TestCaseError::fail(format!(
            "allocated form does not verify: {}\n{}",
            errs[0],
            print_function(&alloc)
        )));
    }
    // The allocated form reads back as the same structure (every fourth program: the text of
    // an unbounded target is slow to read in a debug build).
    if cfg.seed % 4 == 0 {
        let text = print_function(&alloc);
        match parse_function(&text) {
            Ok(back) if back == alloc => {}
            Ok(_) => {
                return Err(TestCaseError::fail(format!(
                    "allocated form reads back differently\n{text}"
                )));
            }
            Err(e) => {
                return Err(TestCaseError::fail(format!(
                    "allocated form does not read back: {e}\n{text}"
                )));
            }
        }
    }
    if let Err(m) = compare(&func, &alloc, &env) {
        return Err(TestCaseError::fail(format!(
            "{m}\n{}",
            print_function(&func)
        )));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn simt_on_reference_assignment_matches_ssa(seed in any::<u64>(), size in 10usize..200) {
        check(&GenConfig { size, ..GenConfig::new(seed) }, 16)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn high_pressure_programs_agree(seed in any::<u64>(), lanes in 1usize..=64) {
        check(&GenConfig::high_pressure(seed), lanes)?;
    }
}

/// The long run: `cargo test --release -p kiln-interp --test differential -- --ignored`.
#[test]
#[ignore]
fn long_differential_run() {
    for seed in 0..50_000u64 {
        let cfg = if seed % 5 == 0 {
            GenConfig::high_pressure(seed)
        } else {
            GenConfig {
                size: 20 + (seed % 300) as usize,
                ..GenConfig::new(seed)
            }
        };
        if let Err(e) = check(&cfg, 1 + (seed % 64) as usize) {
            panic!("seed {seed}: {e}");
        }
    }
}
