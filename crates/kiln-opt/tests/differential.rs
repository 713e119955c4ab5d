//! Differential tests of every pass: generated programs run in the interpreter before and after
//! the pass (`kiln_interp::compare`), bit for bit, with the verifier after every pass (the
//! context verifies in debug builds, and these tests ask for it explicitly).

use kiln_analysis::{Context, DebugFlags};
use kiln_interp::{Env, Mismatch, compare};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Function, print_function};

/// Programs per pass: a few hundred, kept quick in debug builds.
const PROGRAMS: u64 = 300;

fn config(seed: u64) -> GenConfig {
    let mut c = GenConfig::new(seed);
    c.size = 40 + (seed % 5) as usize * 20;
    c
}

/// Runs `passes` on generated programs and compares them with the originals on two inputs.
fn differential(passes: &[&str]) {
    let mut compared = 0;
    for seed in 0..PROGRAMS {
        let before = generate(&config(seed));
        let mut cx = Context::with_debug(
            before.clone(),
            DebugFlags {
                verify: true,
                ..DebugFlags::default()
            },
        );
        if let Err(e) = kiln_opt::run_passes(&mut cx, passes) {
            panic!("seed {seed}: {e}\n{}", print_function(&before));
        }
        let after: Function = cx.into_func();
        for env_seed in 0..2 {
            let env = Env::for_function(&before, 16, seed * 31 + env_seed);
            match compare(&before, &after, &env) {
                Ok(()) => compared += 1,
                Err(m) if matches!(*m, Mismatch::BeforeFailed(_)) => {}
                Err(m) => panic!(
                    "seed {seed} env {env_seed} after {passes:?}: {m}\nbefore:\n{}\nafter:\n{}",
                    print_function(&before),
                    print_function(&after)
                ),
            }
        }
    }
    assert!(
        compared > PROGRAMS as usize,
        "only {compared} runs compared: the generated programs fail too often"
    );
}

#[test]
fn every_pass_alone() {
    for (name, _) in kiln_opt::PASSES {
        differential(&[name]);
    }
}
