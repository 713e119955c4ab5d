//! `kiln fuzz regalloc`: a differential campaign of the register allocators over the random
//! program generator's configuration space, on the generic target and on vc4. Every seed
//! decides a configuration ([`Case::new`]); each allocation is checked, and run in SIMT mode
//! against the SSA program. The design is in `docs/regalloc.md` ("The campaign").

use kiln_interp::{Env, compare};
use kiln_ir::Function;
use kiln_ir::generate::{GenConfig, generate};
use kiln_regalloc::{Allocator, RaError, RaOptions};
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The target a case is allocated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// The generated program as it is (`generic(v=256, s=104)`).
    Generic,
    /// The generated program selected for vc4 (`kiln_vc4::compile::select`, one thread),
    /// allocated in its one register file.
    Vc4,
}

impl std::str::FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Target, String> {
        match s {
            "generic" => Ok(Target::Generic),
            "vc4" => Ok(Target::Vc4),
            _ => Err(format!("unknown target `{s}` (known: generic, vc4)")),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::Generic => "generic",
            Target::Vc4 => "vc4",
        })
    }
}

/// One generated program and how it is allocated and run, all from its seed.
#[derive(Clone, Debug)]
pub struct Case {
    pub seed: u64,
    pub target: Target,
    pub config: GenConfig,
    /// Lanes of the SIMT run.
    pub lanes: usize,
    /// Units per register file.
    pub budget: Vec<Option<u32>>,
}

impl Case {
    /// The configuration of `seed`: the bits of `seed · 0x9E3779B97F4A7C15 >> 13` choose size
    /// (5–304), pressure (2–61), nesting depth (1–5), vectors, constraints, all-lanes values,
    /// lanes (1–32, 1–16 on vc4) and the budget — on the generic target `v` 6–69 and `s` half
    /// of it plus 4; on vc4 12–69 units of its file (vectors and the generic target's fixed
    /// registers have no vc4 form there).
    pub fn new(seed: u64, target: Target) -> Case {
        let knobs = (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 13) as usize;
        let generic = target == Target::Generic;
        let config = GenConfig {
            size: 5 + knobs % 300,
            pressure: 2 + (knobs >> 9) % 60,
            max_depth: 1 + (knobs >> 16) % 5,
            vectors: generic && knobs & (1 << 24) != 0,
            constraints: generic && knobs & (1 << 25) != 0,
            all_lanes: knobs & (1 << 26) != 0,
            ..GenConfig::new(seed)
        };
        let (lanes, budget) = if generic {
            let b = 6 + (knobs >> 20) as u32 % 64;
            (1 + (knobs >> 27) % 32, vec![Some(b), Some(b / 2 + 4)])
        } else {
            (
                1 + (knobs >> 27) % 16,
                vec![Some(12 + (knobs >> 20) as u32 % 58)],
            )
        };
        Case {
            seed,
            target,
            config,
            lanes,
            budget,
        }
    }

    /// The SSA function to allocate, or why the target refuses the program.
    pub fn function(&self) -> Result<Function, String> {
        let func = generate(&self.config);
        match self.target {
            Target::Generic => Ok(func),
            Target::Vc4 => {
                use kiln_vc4::compile as vc4;
                let info = kiln_vc4::interface::ShaderInfo::debug(&func);
                let selected = vc4::select(&func, &info, kiln_vc4::emit::OutputMode::Vpm)
                    .map_err(|e| e.to_string())?;
                vc4::lower_interface(
                    &selected,
                    selected.func.clone(),
                    1,
                    Some(kiln_vc4::pre_sched::Order::Latency),
                    true,
                )
                .map(|(func, _)| func)
                .map_err(|e| e.to_string())
            }
        }
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        let budget: Vec<String> = self
            .budget
            .iter()
            .map(|b| b.map_or("-".into(), |b| b.to_string()))
            .collect();
        write!(
            f,
            "seed {} {}: size {} pressure {} depth {} vectors {} constraints {} all_lanes {} \
             lanes {} budget {}",
            self.seed,
            self.target,
            c.size,
            c.pressure,
            c.max_depth,
            c.vectors,
            c.constraints,
            c.all_lanes,
            self.lanes,
            budget.join(",")
        )
    }
}

/// What one allocation of a case came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Checked, and the SIMT run agrees with the SSA run.
    Agrees,
    /// The target refuses the program before allocation (vc4 selection).
    Refused,
    /// One instruction needs more than the budget: the one failure the allocators may give.
    InstructionOverBudget,
    /// The checker rejected the allocation. `wrong`: allocated again without the checker,
    /// the SIMT run disagrees (a wrong allocation), else agrees on these inputs.
    Rejected { message: String, wrong: bool },
    /// Any other allocation error (internal, no register, another budget error).
    Error(String),
    /// Checked, but the SIMT run disagrees: a wrong allocation the checker missed.
    Mismatch(String),
    /// The allocator panicked.
    Panic(String),
}

impl Outcome {
    /// Whether this is a defect of the allocators.
    pub fn is_failure(&self) -> bool {
        !matches!(
            self,
            Outcome::Agrees | Outcome::Refused | Outcome::InstructionOverBudget
        )
    }
}

fn first_lines(s: &str, n: usize) -> String {
    s.lines().take(n).collect::<Vec<_>>().join(" / ")
}

/// Allocates `case` with `allocator` and runs it (see [`Outcome`]).
pub fn run_case(case: &Case, allocator: Allocator) -> Outcome {
    let func = match case.function() {
        Ok(f) => f,
        Err(_) => return Outcome::Refused,
    };
    let options = RaOptions {
        allocator,
        budget: case.budget.clone(),
        check: true,
        refuse_spilling: false,
    };
    let env = Env::for_function(&func, case.lanes, case.seed);
    let attempt = |options: &RaOptions| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut allocated = func.clone();
            kiln_regalloc::allocate(&mut allocated, options).map(|_| allocated)
        }))
    };
    match attempt(&options) {
        Err(p) => Outcome::Panic(panic_message(&p)),
        Ok(Ok(allocated)) => match compare(&func, &allocated, &env) {
            Ok(()) => Outcome::Agrees,
            Err(m) => Outcome::Mismatch(first_lines(&m.to_string(), 2)),
        },
        Ok(Err(RaError::Budget { message, .. }))
            if message.contains("for its own operands") && !message.contains("lowered") =>
        {
            Outcome::InstructionOverBudget
        }
        Ok(Err(e @ RaError::Check(_))) => {
            let unchecked = RaOptions {
                check: false,
                ..options
            };
            let wrong = match attempt(&unchecked) {
                Ok(Ok(allocated)) => compare(&func, &allocated, &env).is_err(),
                _ => false,
            };
            Outcome::Rejected {
                message: first_lines(&e.to_string(), 3),
                wrong,
            }
        }
        Ok(Err(e)) => Outcome::Error(first_lines(&e.to_string(), 2)),
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    pub allocators: Vec<Allocator>,
    pub targets: Vec<Target>,
    /// The first seed; seeds are taken in order.
    pub from: u64,
    /// Stop after this many seeds (each seed is one program per target), or at `seconds`.
    pub count: Option<u64>,
    pub seconds: Option<u64>,
    /// Worker threads (0: all cores).
    pub jobs: usize,
}

/// Counts for one allocator on one target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub programs: u64,
    pub agrees: u64,
    pub refused: u64,
    pub over_budget: u64,
    pub rejected: u64,
    /// Rejections that run wrong when allocated without the checker.
    pub rejected_wrong: u64,
    pub errors: u64,
    pub mismatches: u64,
    pub panics: u64,
}

impl Counts {
    fn add(&mut self, o: &Outcome) {
        self.programs += 1;
        match o {
            Outcome::Agrees => self.agrees += 1,
            Outcome::Refused => self.refused += 1,
            Outcome::InstructionOverBudget => self.over_budget += 1,
            Outcome::Rejected { wrong, .. } => {
                self.rejected += 1;
                self.rejected_wrong += *wrong as u64;
            }
            Outcome::Error(_) => self.errors += 1,
            Outcome::Mismatch(_) => self.mismatches += 1,
            Outcome::Panic(_) => self.panics += 1,
        }
    }

    /// Defects: rejections, errors, mismatches and panics.
    pub fn failures(&self) -> u64 {
        self.rejected + self.errors + self.mismatches + self.panics
    }
}

/// One failing allocation.
#[derive(Clone, Debug)]
pub struct Failure {
    pub case: Case,
    pub allocator: Allocator,
    pub outcome: Outcome,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.outcome {
            Outcome::Rejected { message, wrong } => format!(
                "rejected ({}): {message}",
                if *wrong {
                    "wrong when run unchecked"
                } else {
                    "agrees when run unchecked"
                }
            ),
            Outcome::Error(m) => format!("error: {m}"),
            Outcome::Mismatch(m) => format!("mismatch: {m}"),
            Outcome::Panic(m) => format!("panic: {m}"),
            o => format!("{o:?}"),
        };
        write!(f, "FAIL {} {:?}: {what}", self.case, self.allocator)
    }
}

/// The campaign's result: counts per (target, allocator), in the order asked, the seeds run and
/// the time taken.
#[derive(Clone, Debug)]
pub struct Report {
    pub counts: Vec<((Target, Allocator), Counts)>,
    pub seeds: u64,
    pub from: u64,
    pub elapsed: Duration,
}

impl Report {
    pub fn failures(&self) -> u64 {
        self.counts.iter().map(|(_, c)| c.failures()).sum()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seeds {}..{} ({}) in {:.0} s",
            self.from,
            self.from + self.seeds,
            self.seeds,
            self.elapsed.as_secs_f64()
        )?;
        writeln!(
            f,
            "{:<8} {:<6} {:>9} {:>9} {:>8} {:>11} {:>9} {:>7} {:>7} {:>11} {:>7}",
            "target",
            "alloc",
            "programs",
            "agree",
            "refused",
            "over-budget",
            "rejected",
            "(wrong)",
            "errors",
            "mismatches",
            "panics"
        )?;
        for ((t, a), c) in &self.counts {
            writeln!(
                f,
                "{:<8} {:<6} {:>9} {:>9} {:>8} {:>11} {:>9} {:>7} {:>7} {:>11} {:>7}",
                t.to_string(),
                format!("{a:?}").to_lowercase(),
                c.programs,
                c.agrees,
                c.refused,
                c.over_budget,
                c.rejected,
                c.rejected_wrong,
                c.errors,
                c.mismatches,
                c.panics
            )?;
        }
        Ok(())
    }
}

/// Runs the campaign on `options.jobs` threads, seeds in order from `options.from`, until
/// `count` seeds or `seconds` have passed (whichever comes first; neither: 60 seconds). Each
/// failure goes to `on_failure` as it is found.
pub fn campaign(options: &Options, on_failure: impl Fn(&Failure) + Sync) -> Report {
    let start = Instant::now();
    let deadline = match (options.seconds, options.count) {
        (Some(s), _) => Some(start + Duration::from_secs(s)),
        (None, None) => Some(start + Duration::from_secs(60)),
        (None, Some(_)) => None,
    };
    let end = options.count.map(|n| options.from.saturating_add(n));
    let next = AtomicU64::new(options.from);
    let done = AtomicU64::new(0);
    let keys: Vec<(Target, Allocator)> = options
        .targets
        .iter()
        .flat_map(|&t| options.allocators.iter().map(move |&a| (t, a)))
        .collect();
    let counts = Mutex::new(vec![Counts::default(); keys.len()]);
    let jobs = if options.jobs == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        options.jobs
    };
    // Panics are counted and reported with their seeds; keep their messages off the output.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                let mut local = vec![Counts::default(); keys.len()];
                loop {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        break;
                    }
                    let seed = next.fetch_add(1, Relaxed);
                    if end.is_some_and(|e| seed >= e) {
                        break;
                    }
                    for (k, &(target, allocator)) in keys.iter().enumerate() {
                        let case = Case::new(seed, target);
                        let outcome = run_case(&case, allocator);
                        local[k].add(&outcome);
                        if outcome.is_failure() {
                            on_failure(&Failure {
                                case,
                                allocator,
                                outcome,
                            });
                        }
                    }
                    done.fetch_add(1, Relaxed);
                }
                let mut all = counts.lock().unwrap_or_else(|e| e.into_inner());
                for (a, l) in all.iter_mut().zip(local) {
                    a.programs += l.programs;
                    a.agrees += l.agrees;
                    a.refused += l.refused;
                    a.over_budget += l.over_budget;
                    a.rejected += l.rejected;
                    a.rejected_wrong += l.rejected_wrong;
                    a.errors += l.errors;
                    a.mismatches += l.mismatches;
                    a.panics += l.panics;
                }
            });
        }
    });
    std::panic::set_hook(hook);
    let counts = counts.into_inner().unwrap_or_else(|e| e.into_inner());
    Report {
        counts: keys.into_iter().zip(counts).collect(),
        seeds: done.load(Relaxed),
        from: options.from,
        elapsed: start.elapsed(),
    }
}
