//! The real corpus (`../shared/corpus`): every vertex and fragment entry point lowers and
//! verifies, or is rejected with `unsupported: …`; never a failure or a panic.

use kiln_front::corpus::{Outcome, Verdict, lower_file, shader_files, summarize};
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")
}

fn run(files: &[PathBuf]) -> Vec<Verdict> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let v = files.iter().flat_map(|f| lower_file(f)).collect();
    std::panic::set_hook(hook);
    v
}

/// A fast subset: every 15th file (about 300), all three languages.
#[test]
fn corpus_subset_lowers_without_failures() {
    let files: Vec<PathBuf> = shader_files(&corpus()).into_iter().step_by(15).collect();
    assert!(
        files.len() > 250,
        "corpus not found at {}",
        corpus().display()
    );
    let verdicts = run(&files);
    let failed: Vec<_> = verdicts
        .iter()
        .filter(|v| matches!(v.outcome, Outcome::Failed(_)))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    let lowered = verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Lowered)
        .count();
    assert!(
        lowered * 100 >= verdicts.len() * 95,
        "{}",
        summarize(&verdicts)
    );
}

/// The whole corpus: `cargo test --release -p kiln-front --test corpus -- --ignored`
/// (also `kiln corpus lower ../shared/corpus`).
#[test]
#[ignore]
fn whole_corpus_lowers() {
    let verdicts = run(&shader_files(&corpus()));
    let summary = summarize(&verdicts);
    println!("{summary}");
    assert!(
        verdicts
            .iter()
            .all(|v| !matches!(v.outcome, Outcome::Failed(_))),
        "{summary}"
    );
    let lowered = verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Lowered)
        .count();
    assert!(lowered * 100 >= verdicts.len() * 98, "{summary}");
}

/// Differential check of the uniformity pass: shaders with loops, lowered with and without it,
/// give the same outputs bit for bit in the interpreter (16 lanes, ordinary per-lane inputs),
/// and every value it put in the uniform file is the same in all lanes that computed it.
#[test]
fn uniformity_pass_keeps_the_meaning_of_corpus_shaders() {
    use kiln_front::{LowerOptions, Source, entry_points, lower_entry_point_with, parse};
    let files: Vec<PathBuf> = shader_files(&corpus())
        .into_iter()
        .filter(|f| {
            std::fs::read_to_string(f).is_ok_and(|t| t.contains("loop") || t.contains("for ("))
        })
        .step_by(8)
        .collect();
    let (mut compared, mut uniform_branches) = (0, 0);
    for path in &files {
        let Ok(source) = Source::from_path(path, std::fs::read(path).unwrap()) else {
            continue;
        };
        let Ok(parsed) = parse(&source) else { continue };
        for (name, stage) in entry_points(&parsed.module) {
            let lower = |uniformity| {
                lower_entry_point_with(
                    &parsed,
                    Some(stage),
                    Some(&name),
                    LowerOptions { uniformity },
                )
                .map(|l| l.function)
            };
            let (Ok(plain), Ok(uniform)) = (lower(false), lower(true)) else {
                continue;
            };
            kiln_ir::verify(&uniform).unwrap_or_else(|e| panic!("{}: {}", path.display(), e[0]));
            let mut env = kiln_interp::Env::with_ordinary_values(&plain, 16);
            env.merge_missing(kiln_interp::Env::with_ordinary_values(&uniform, 16));
            env.step_limit = 100_000;
            let (Ok(a), b) = (
                kiln_interp::run_ssa(&plain, &env),
                kiln_interp::run_ssa(&uniform, &env),
            ) else {
                continue;
            };
            let b = b.unwrap_or_else(|e| panic!("{} [{name}]: {e}", path.display()));
            assert_eq!(a, b, "{} [{name}]", path.display());
            // Every uniform-file value agrees across the lanes that computed it.
            let in_s = |t: kiln_ir::Temp| uniform.class(t).file == kiln_ir::GenericTarget::S;
            let report = kiln_interp::uniform_check::check_uniform(&uniform, &env, &in_s)
                .unwrap_or_else(|e| panic!("{} [{name}]: {e}", path.display()));
            assert!(
                report.violations.is_empty(),
                "{} [{name}]: {}",
                path.display(),
                report.violations[0]
            );
            compared += 1;
            uniform_branches += kiln_front::lower::uniformity::loop_exit_branches(&uniform)
                .all
                .0;
        }
    }
    println!("{compared} shaders compared, {uniform_branches} uniform loop-exit branches");
    assert!(compared > 30, "{compared} shaders compared");
    assert!(
        uniform_branches > 20,
        "{uniform_branches} uniform loop-exit branches"
    );
}
