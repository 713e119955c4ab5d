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
