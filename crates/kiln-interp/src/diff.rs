//! Differential testing: run a program before and after a transformation (allocation,
//! scheduling, lowering) on the same inputs and report the first differing output.

use crate::{Env, InterpError, Outputs, fmt_value, run_simt, run_ssa};
use kiln_ir::Function;
use std::fmt;

/// Runs a function in the mode its form calls for: SSA mode, or SIMT mode when allocated.
pub fn run(func: &Function, env: &Env) -> Result<Outputs, InterpError> {
    if func.allocated {
        run_simt(func, env)
    } else {
        run_ssa(func, env)
    }
}

/// How two runs disagree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// The reference run failed.
    BeforeFailed(InterpError),
    /// The transformed run failed.
    AfterFailed(InterpError),
    /// The first differing output unit.
    Value {
        slot: u32,
        lane: usize,
        unit: usize,
        before: Option<u32>,
        after: Option<u32>,
        before_trace: Vec<String>,
        after_trace: Vec<String>,
    },
    /// A lane discarded in one run and not the other, or an output written in one only.
    Presence {
        slot: Option<u32>,
        lane: usize,
        what: String,
    },
}

fn write_trace(f: &mut fmt::Formatter<'_>, trace: &[String]) -> fmt::Result {
    trace.iter().try_for_each(|t| writeln!(f, "    {t}"))
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::BeforeFailed(e) => write!(f, "the original program fails: {e}"),
            Mismatch::AfterFailed(e) => {
                writeln!(f, "the transformed program fails: {e}")?;
                write_trace(f, e.trace())
            }
            Mismatch::Value {
                slot,
                lane,
                unit,
                before,
                after,
                before_trace,
                after_trace,
            } => {
                writeln!(
                    f,
                    "output {slot} lane {lane} unit {unit}: expected {}, got {}",
                    fmt_value(*before),
                    fmt_value(*after)
                )?;
                writeln!(f, "  end of the original run:")?;
                write_trace(f, before_trace)?;
                writeln!(f, "  end of the transformed run:")?;
                write_trace(f, after_trace)
            }
            Mismatch::Presence { slot, lane, what } => match slot {
                Some(s) => write!(f, "output {s} lane {lane}: {what}"),
                None => write!(f, "lane {lane}: {what}"),
            },
        }
    }
}

/// Runs both programs on `env` and compares every output unit the original defines. An
/// allocated program runs twice, with registers nothing defined holding two different
/// patterns ([`Env::poison`]): what it computes must not depend on them.
pub fn compare(before_fn: &Function, after_fn: &Function, env: &Env) -> Result<(), Box<Mismatch>> {
    compare_with(before_fn, after_fn, env)?;
    if after_fn.allocated {
        let other = Env {
            poison: !env.poison,
            ..(*env).clone()
        };
        compare_with(before_fn, after_fn, &other)?;
    }
    Ok(())
}

fn compare_with(before_fn: &Function, after_fn: &Function, env: &Env) -> Result<(), Box<Mismatch>> {
    let want = run(before_fn, env).map_err(|e| Box::new(Mismatch::BeforeFailed(e)))?;
    let got = run(after_fn, env).map_err(|e| Box::new(Mismatch::AfterFailed(e)))?;
    compare_outputs(&want, &got).map_err(|m| {
        Box::new(match m {
            Mismatch::Value {
                slot,
                lane,
                unit,
                before,
                after,
                ..
            } => {
                // Traces of the last instructions of each run, for the report.
                let (before_trace, after_trace) = (
                    crate::exec_trace(before_fn, env),
                    crate::exec_trace(after_fn, env),
                );
                Mismatch::Value {
                    slot,
                    lane,
                    unit,
                    before,
                    after,
                    before_trace,
                    after_trace,
                }
            }
            other => other,
        })
    })
}

/// Compares two runs' outputs; undefined units of `want` match anything.
pub fn compare_outputs(want: &Outputs, got: &Outputs) -> Result<(), Mismatch> {
    for lane in 0..want.lanes {
        if want.discarded.get(lane) != got.discarded.get(lane) {
            return Err(Mismatch::Presence {
                slot: None,
                lane,
                what: "discarded in one run only".into(),
            });
        }
    }
    for (slot, lanes) in &want.slots {
        for (lane, w) in lanes.iter().enumerate() {
            let g = got
                .slots
                .get(slot)
                .and_then(|v| v.get(lane))
                .cloned()
                .flatten();
            match (w, g) {
                (None, None) => {}
                (Some(w), Some(g)) => {
                    for (unit, (a, b)) in w
                        .iter()
                        .zip(g.iter().chain(std::iter::repeat(&None)))
                        .enumerate()
                    {
                        if a.is_some() && a != b {
                            return Err(Mismatch::Value {
                                slot: *slot,
                                lane,
                                unit,
                                before: *a,
                                after: *b,
                                before_trace: vec![],
                                after_trace: vec![],
                            });
                        }
                    }
                }
                (Some(_), None) => {
                    return Err(Mismatch::Presence {
                        slot: Some(*slot),
                        lane,
                        what: "written only by the original".into(),
                    });
                }
                (None, Some(_)) => {
                    return Err(Mismatch::Presence {
                        slot: Some(*slot),
                        lane,
                        what: "written only by the transformed program".into(),
                    });
                }
            }
        }
    }
    if let Some(slot) = got.slots.keys().find(|s| !want.slots.contains_key(s)) {
        return Err(Mismatch::Presence {
            slot: Some(*slot),
            lane: 0,
            what: "written only by the transformed program".into(),
        });
    }
    Ok(())
}
