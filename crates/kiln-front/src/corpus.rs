//! Lowering a directory of shaders: every vertex and fragment entry point of every file, a
//! verdict each, and a summary by reason.

use crate::{FrontError, Source, entry_points, lower_entry_point, parse};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The verdict on one entry point (or on a file that did not parse).
#[derive(Clone, Debug)]
pub struct Verdict {
    pub file: PathBuf,
    pub entry: Option<String>,
    pub outcome: Outcome,
    /// Instructions of the lowered function.
    pub instructions: usize,
    /// Time spent lowering (not parsing, verifying or running).
    pub seconds: f64,
    /// Loop-exit branches of the lowered function, uniform and divergent
    /// ([`crate::lower::uniformity::loop_exit_branches`]).
    pub exit_branches: crate::lower::uniformity::ExitBranches,
}

/// What a check after lowering found on a function it did not reject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// The check passed (the run completed).
    Passed,
    /// The interpreter stopped at its step limit: neither a pass nor a failure.
    StepLimit,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Lowered and verified.
    Lowered,
    /// Lowered and verified, but the run after it stopped at the interpreter's step limit.
    StepLimit,
    /// `unsupported: …` (or a parse/validation error of the input).
    Rejected(String),
    /// A verifier failure or an internal error: a bug.
    Failed(String),
}

/// Shader files under `dir` (`.wgsl`, `.spv`, `.vert`, `.frag`), sorted.
pub fn shader_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                [".wgsl", ".spv", ".vert", ".frag"]
                    .iter()
                    .any(|x| n.ends_with(x))
            }) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Lowers and verifies every vertex and fragment entry point of one file.
pub fn lower_file(path: &Path) -> Vec<Verdict> {
    lower_file_then(path, |_| Ok(Checked::Passed))
}

/// [`lower_file`], then `check` on every lowered and verified function (an `Err` is a failure).
pub fn lower_file_then(
    path: &Path,
    check: impl Fn(&kiln_ir::Function) -> Result<Checked, String>,
) -> Vec<Verdict> {
    let start = std::time::Instant::now();
    let fail = |outcome: Outcome| {
        vec![Verdict {
            file: path.to_path_buf(),
            entry: None,
            outcome,
            instructions: 0,
            seconds: start.elapsed().as_secs_f64(),
            exit_branches: Default::default(),
        }]
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return fail(Outcome::Failed(format!("cannot read: {e}"))),
    };
    let source = match Source::from_path(path, bytes) {
        Ok(s) => s,
        Err(e) => return fail(Outcome::Rejected(e.reason())),
    };
    let parsed = match parse(&source) {
        Ok(p) => p,
        Err(e @ FrontError::Internal(_)) => return fail(Outcome::Failed(e.to_string())),
        Err(e) => return fail(Outcome::Rejected(e.reason())),
    };
    entry_points(&parsed.module)
        .into_iter()
        .map(|(name, stage)| {
            let t = std::time::Instant::now();
            let lowered = lower_entry_point(&parsed, Some(stage), Some(&name));
            let seconds = t.elapsed().as_secs_f64();
            let mut exit_branches = Default::default();
            let (outcome, instructions) = match lowered {
                Ok(l) => match kiln_ir::verify(&l.function) {
                    Ok(()) => {
                        exit_branches = crate::lower::uniformity::loop_exit_branches(&l.function);
                        match check(&l.function) {
                            Ok(Checked::Passed) => (Outcome::Lowered, l.function.inst_count()),
                            Ok(Checked::StepLimit) => (Outcome::StepLimit, l.function.inst_count()),
                            Err(e) => (Outcome::Failed(e), 0),
                        }
                    }
                    Err(errs) => (Outcome::Failed(format!("verifier: {}", errs[0])), 0),
                },
                Err(e @ FrontError::Internal(_)) => (Outcome::Failed(e.to_string()), 0),
                Err(e) => (Outcome::Rejected(e.reason()), 0),
            };
            Verdict {
                file: path.to_path_buf(),
                entry: Some(name),
                outcome,
                instructions,
                seconds,
                exit_branches,
            }
        })
        .collect()
}

/// Counts by outcome and reason.
pub fn summarize(verdicts: &[Verdict]) -> String {
    let total = verdicts.len();
    let lowered = verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Lowered)
        .count();
    let stopped = verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::StepLimit)
        .count();
    let exits = verdicts
        .iter()
        .fold(crate::lower::uniformity::ExitBranches::default(), |a, v| {
            a + v.exit_branches
        });
    let mut rejected: BTreeMap<String, usize> = BTreeMap::new();
    let mut failed: BTreeMap<String, usize> = BTreeMap::new();
    for v in verdicts {
        match &v.outcome {
            Outcome::Lowered | Outcome::StepLimit => {}
            Outcome::Rejected(r) => *rejected.entry(r.clone()).or_default() += 1,
            Outcome::Failed(r) => *failed.entry(r.chars().take(100).collect()).or_default() += 1,
        }
    }
    let pct = |n: usize| {
        if total == 0 {
            0.0
        } else {
            100.0 * n as f64 / total as f64
        }
    };
    let mut s = format!(
        "{total} entry points: {} lowered and verified ({:.2} %), {} unsupported, {} failed\n",
        lowered + stopped,
        pct(lowered + stopped),
        rejected.values().sum::<usize>(),
        failed.values().sum::<usize>()
    );
    if stopped > 0 {
        s.push_str(&format!(
            "runs: {lowered} completed, {stopped} stopped at the interpreter's step limit (counted apart: neither passed nor failed)\n"
        ));
    }
    s.push_str(&format!(
        "loop-header branches (the `if` ending a loop's header that controls a `break` of it): {} uniform, {} divergent\n",
        exits.header.0, exits.header.1
    ));
    s.push_str(&format!(
        "all loop-exit branches (every `if` that controls a `break` of its loop: the innermost on a non-constant condition around it): {} uniform, {} divergent\n",
        exits.all.0, exits.all.1
    ));
    s.push_str(&format!(
        "loops (one-trip loops left out): {} left by all lanes at once, {} divergent\n",
        exits.loops.0, exits.loops.1
    ));
    let mut by_count = |title: &str, m: &BTreeMap<String, usize>| {
        if m.is_empty() {
            return;
        }
        s.push_str(title);
        let mut rows: Vec<_> = m.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (r, n) in rows {
            s.push_str(&format!("  {n:5}  {r}\n"));
        }
    };
    by_count("unsupported or invalid input, by reason:\n", &rejected);
    by_count("failures (bugs), by message:\n", &failed);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(outcome: Outcome) -> Verdict {
        Verdict {
            file: PathBuf::from("x.wgsl"),
            entry: Some("main".into()),
            outcome,
            instructions: 1,
            seconds: 0.0,
            exit_branches: Default::default(),
        }
    }

    #[test]
    fn step_limit_runs_are_counted_apart() {
        let s = summarize(&[
            verdict(Outcome::Lowered),
            verdict(Outcome::StepLimit),
            verdict(Outcome::Rejected("unsupported: atomics".into())),
            verdict(Outcome::Failed("interpreter: boom".into())),
        ]);
        assert!(
            s.starts_with(
                "4 entry points: 2 lowered and verified (50.00 %), 1 unsupported, 1 failed\n"
            ),
            "{s}"
        );
        assert!(
            s.contains("runs: 1 completed, 1 stopped at the interpreter's step limit"),
            "{s}"
        );
    }
}
