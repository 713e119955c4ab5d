//! The whole corpus through the middle end: every vertex and fragment entry point of
//! `../shared/corpus` is lowered, optimised with the default pipeline (verifier after every
//! pass) and run in the interpreter before and after on the same inputs; outputs must agree bit
//! for bit. Slow: `cargo test --release -p kiln-opt --test corpus -- --ignored --nocapture`.

use kiln_analysis::{Context, DebugFlags};
use kiln_front::corpus::shader_files;
use kiln_front::{Source, entry_points, lower_entry_point, parse};
use kiln_interp::diff::compare_outputs;
use kiln_interp::{Env, InterpError, run_ssa};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

enum Verdict {
    Same,
    /// Not lowered, or the original does not finish in the step limit.
    Skipped,
    Wrong(String),
}

fn check(path: &Path) -> Vec<Verdict> {
    let Ok(bytes) = std::fs::read(path) else {
        return vec![Verdict::Skipped];
    };
    let Ok(source) = Source::from_path(path, bytes) else {
        return vec![Verdict::Skipped];
    };
    let Ok(parsed) = parse(&source) else {
        return vec![Verdict::Skipped];
    };
    entry_points(&parsed.module)
        .into_iter()
        .map(|(name, stage)| {
            let Ok(lowered) = lower_entry_point(&parsed, Some(stage), Some(&name)) else {
                return Verdict::Skipped;
            };
            let before = lowered.function;
            let mut cx = Context::with_debug(
                before.clone(),
                DebugFlags {
                    verify: true,
                    ..DebugFlags::default()
                },
            );
            if let Err(e) = kiln_opt::optimize(&mut cx, kiln_opt::Precision::Exact) {
                return Verdict::Wrong(format!("{} [{name}]: {e}", path.display()));
            }
            let after = cx.into_func();
            let mut env = Env::with_ordinary_values(&before, 16);
            env.step_limit = 2_000_000;
            let want = match run_ssa(&before, &env) {
                Ok(w) => w,
                Err(InterpError::StepLimit { .. }) => return Verdict::Skipped,
                Err(e) => {
                    return Verdict::Wrong(format!("{} [{name}]: original: {e}", path.display()));
                }
            };
            match run_ssa(&after, &env) {
                Ok(got) => match compare_outputs(&want, &got) {
                    Ok(()) => Verdict::Same,
                    Err(m) => Verdict::Wrong(format!("{} [{name}]: {m}", path.display())),
                },
                Err(e) => Verdict::Wrong(format!("{} [{name}]: optimised: {e}", path.display())),
            }
        })
        .collect()
}

#[test]
#[ignore = "whole corpus: run in release"]
fn corpus_agrees_after_the_middle_end() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let files = shader_files(&root);
    assert!(files.len() > 4000, "corpus not found at {}", root.display());
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let verdicts: Vec<Verdict> = files.par_iter().flat_map_iter(|f| check(f)).collect();
    std::panic::set_hook(hook);
    let same = verdicts
        .iter()
        .filter(|v| matches!(v, Verdict::Same))
        .count();
    let skipped = verdicts
        .iter()
        .filter(|v| matches!(v, Verdict::Skipped))
        .count();
    let wrong: Vec<&String> = verdicts
        .iter()
        .filter_map(|v| match v {
            Verdict::Wrong(m) => Some(m),
            _ => None,
        })
        .collect();
    println!(
        "{} entry points: {same} agree, {skipped} skipped, {} differ",
        verdicts.len(),
        wrong.len()
    );
    for w in wrong.iter().take(10) {
        println!("{w}");
    }
    assert!(wrong.is_empty(), "{} entry points differ", wrong.len());
    assert!(same > 4000, "only {same} entry points compared");
}
