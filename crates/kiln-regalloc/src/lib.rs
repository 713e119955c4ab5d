//! kiln register allocation (DESIGN.md §5): one interface for every allocator ([`allocate`]),
//! the SSA-based allocator (spilling to the budget first ([`spill`]), then [`assign`] in
//! dominance order and out of SSA), the allocation checker that every allocator's output goes
//! through ([`checker`]), the register model of seed 002 that the class-based graph-colouring
//! allocator works from ([`regset`]), and the lowering of parallel copies to moves and swaps
//! ([`parallel_copy`]).

pub mod assign;
pub mod checker;
pub mod graph;
pub mod parallel_copy;
pub mod regset;
pub mod spill;
pub mod spill_everywhere;

pub use regset::RegModel;

use kiln_analysis::{Liveness, compute_liveness};
use kiln_ir::{Block, Cfg, Def, Demand, Function, Inst, Opcode, Target, print_function};
use std::fmt;
use std::time::{Duration, Instant};

/// Which allocator runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Allocator {
    /// Spilling to the budget, then SSA-based assignment in dominance order ([`assign`]).
    #[default]
    Ssa,
    /// Spilling to the budget, then seed 002's class-based graph colouring ([`graph`]), whose
    /// colours the assignment takes as homes wherever constraints allow.
    Graph,
}

impl std::str::FromStr for Allocator {
    type Err = String;
    fn from_str(s: &str) -> Result<Allocator, String> {
        match s {
            "ssa" => Ok(Allocator::Ssa),
            "graph" => Ok(Allocator::Graph),
            _ => Err(format!("unknown allocator `{s}` (known: ssa, graph)")),
        }
    }
}

/// How to allocate.
#[derive(Clone, Debug, Default)]
pub struct RaOptions {
    pub allocator: Allocator,
    /// Units per register file the allocation may use (`None`: the whole file).
    pub budget: Vec<Option<u32>>,
    /// Run the checker on the result (tests and `KILN_DEBUG=verify` do).
    pub check: bool,
    /// The target cannot spill (vc4): [`RaError::WouldSpill`] as soon as the register demand
    /// exceeds the budget, and graph colouring that cannot colour gives way to the SSA
    /// allocator's assignment without spill rounds. Bounded work for a hopeless attempt.
    pub refuse_spilling: bool,
}

impl RaOptions {
    /// Reads a budget such as `v=24,s=8` (file names of `target`; files not named keep their
    /// size).
    pub fn parse_budget(target: &dyn Target, text: &str) -> Result<Vec<Option<u32>>, String> {
        let mut budget = vec![None; target.files().len()];
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, n) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected FILE=UNITS"))?;
            let file = target
                .file_by_name(name.trim())
                .ok_or_else(|| format!("`{name}`: the target has no such register file"))?;
            let n: u32 = n
                .trim()
                .parse()
                .map_err(|_| format!("`{part}`: the number of units is not a number"))?;
            budget[file.index()] = Some(n);
        }
        Ok(budget)
    }

    /// The budget of every file of `target`, capped at the file's size.
    pub fn limits(&self, target: &dyn Target) -> Vec<u32> {
        target
            .files()
            .iter()
            .enumerate()
            .map(|(f, file)| {
                self.budget
                    .get(f)
                    .copied()
                    .flatten()
                    .map_or(file.units, |b| b.min(file.units))
            })
            .collect()
    }

    /// [`RaOptions::limits`], each file capped by the units `func`'s register classes and fixed
    /// registers can reach: values live at once need that many distinct units, so a demand
    /// above it cannot be allocated however it is coloured (vc4's two-thread mode gives every
    /// class the lower half of each file: 34 of the 69 units, 33 with the execute mask).
    pub fn limits_for(&self, func: &Function) -> Vec<u32> {
        let target = &*func.target;
        let mut limits = self.limits(target);
        let files = target.files();
        let mut reach: Vec<Vec<bool>> = files
            .iter()
            .map(|f| vec![false; f.units as usize])
            .collect();
        let mut mark = |file: usize, range: std::ops::Range<u32>| {
            let end = (range.end as usize).min(reach[file].len());
            reach[file][(range.start as usize).min(end)..end].fill(true);
        };
        // Distinct classes are few: a linear scan of those seen keeps this one pass.
        let mut seen: Vec<kiln_ir::RegClass> = Vec::new();
        // (A temp no instruction defines any more has no class.)
        for &class in func.temps.iter().filter(|c| !c.is_none()) {
            if seen.contains(&class) {
                continue;
            }
            seen.push(class);
            let file = class.file.index();
            match class.subset.and_then(|s| target.subset(s)) {
                Some(subset) => {
                    for u in subset.units.iter() {
                        mark(file, u..u + class.size as u32);
                    }
                }
                None => mark(file, 0..files[file].units),
            }
        }
        for inst in func.blocks.iter().flat_map(|b| &b.insts) {
            let fixed = inst
                .defs
                .iter()
                .filter_map(|d| Some((d.fixed?, d.temp)))
                .chain(
                    inst.operands
                        .iter()
                        .filter_map(|o| Some((o.fixed?, o.temp_id()?))),
                );
            for (reg, t) in fixed {
                let size = func.class(t).size;
                if let Some(units) = reg.units(size, files[reg.file().index()].units) {
                    mark(reg.file().index(), units);
                }
            }
        }
        for (limit, reach) in limits.iter_mut().zip(&reach) {
            *limit = (*limit).min(reach.iter().filter(|&&r| r).count() as u32);
        }
        limits
    }
}

/// What one allocation did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaStats {
    /// Instructions before (phis included) and after allocation.
    pub insts_before: u32,
    pub insts_after: u32,
    /// Parallel copies inserted, and the register units they move.
    pub parallel_copies: u32,
    pub copied_units: u32,
    pub spills: u32,
    pub reloads: u32,
    pub remats: u32,
    pub spill_slots: u32,
    /// Blocks inserted to split critical edges.
    pub split_edges: u32,
    /// Times the assignment found no register and the spiller ran again with less.
    pub retries: u32,
    /// Graph colouring: nodes that found no colour, and colours the assignment could not
    /// take (it chose for them).
    pub uncoloured: u32,
    pub preferred_refused: u32,
    /// The assignment found no register with its preferences (the colouring's homes, or
    /// none) and assigned again with the other ones.
    pub preferences_swapped: bool,
    /// Graph colouring: copy-related nodes merged, rounds of spilling everywhere, and whether
    /// colouring gave up spilling and the SSA spiller spilled instead.
    pub coalesced: u32,
    pub spill_rounds: u32,
    pub graph_fallback: bool,
    /// Graph colouring: nodes and edges of the last interference graph built.
    pub graph_nodes: u32,
    pub graph_edges: u32,
    /// Per file: highest unit used + 1.
    pub registers_used: Vec<u32>,
    /// Per file: the maximum register demand before allocation (seed 000).
    pub max_demand: Vec<u32>,
    /// Time per phase.
    pub time_spill: Duration,
    pub time_assign: Duration,
    pub time_check: Duration,
}

/// Why a function could not be allocated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RaError {
    /// The budget cannot hold what one instruction needs.
    Budget {
        block: Block,
        inst: usize,
        message: String,
    },
    /// No register satisfies an instruction's constraints.
    NoRegister {
        block: Block,
        inst: usize,
        message: String,
    },
    /// A constraint the allocator does not handle.
    Unsupported {
        block: Block,
        inst: usize,
        message: String,
    },
    /// The function needs more registers than the budget and the options refuse spilling.
    WouldSpill {
        /// The maximum register demand, per file.
        demand: Vec<u32>,
        budget: Vec<u32>,
    },
    /// The function's structure (CFG) is invalid.
    Structure(String),
    /// An allocator invariant failed (a bug).
    Internal {
        block: Block,
        inst: usize,
        message: String,
    },
    /// The checker rejected the allocation (a bug): its first errors.
    Check(Vec<checker::CheckError>),
}

impl fmt::Display for RaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RaError::Budget {
                block,
                inst,
                message,
            } => write!(f, "{block}:{inst}: over budget: {message}"),
            RaError::NoRegister {
                block,
                inst,
                message,
            } => write!(f, "{block}:{inst}: {message}"),
            RaError::Unsupported {
                block,
                inst,
                message,
            } => write!(f, "{block}:{inst}: unsupported: {message}"),
            RaError::WouldSpill { demand, budget } => write!(
                f,
                "spilling: the register demand {demand:?} exceeds the budget {budget:?}"
            ),
            RaError::Structure(m) => write!(f, "{m}"),
            RaError::Internal {
                block,
                inst,
                message,
            } => write!(f, "{block}:{inst}: internal error: {message}"),
            RaError::Check(errors) => {
                write!(f, "the allocation does not check:")?;
                for e in errors.iter().take(5) {
                    write!(f, "\n  {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for RaError {}

/// Turns the SSA function `func` into its allocated form with the allocator and budget of
/// `options`: every operand and definition carries its register, phis become copies, spills
/// and reloads are explicit. Blocks may be added first to split critical edges.
pub fn allocate(func: &mut Function, options: &RaOptions) -> Result<RaStats, RaError> {
    // (The SSA input is not kept: after spilling, no copy of it is made for the caller.)
    allocate_keeping(func, options, None, false).map(|(stats, _)| stats)
}

/// [`allocate`], also returning the SSA function the allocation is an allocation of — the
/// input with its critical edges split and put in the assignment's form — which
/// [`checker::check`] takes with the result.
pub fn allocate_with_input(
    func: &mut Function,
    options: &RaOptions,
) -> Result<(RaStats, Function), RaError> {
    allocate_analysed(func, options, None)
}

/// [`allocate_with_input`] given the CFG and liveness of `func` (its kill flags written), as a
/// pass before allocation computed them: where the function needs no edge split and no copy
/// for the assignment (most do not), the allocation starts from them instead of computing
/// them again.
pub fn allocate_analysed(
    func: &mut Function,
    options: &RaOptions,
    analysed: Option<(Cfg, Liveness)>,
) -> Result<(RaStats, Function), RaError> {
    let (stats, ssa) = allocate_keeping(func, options, analysed, true)?;
    Ok((stats, ssa.expect("the input is kept when asked for")))
}

/// [`allocate_analysed`], keeping the SSA function allocated where `keep_input` (or the checker
/// runs): after spilling it is a copy of the input with its edges split as the result's are,
/// which a caller that only wants the allocation does not pay for (`None`).
fn allocate_keeping(
    func: &mut Function,
    options: &RaOptions,
    analysed: Option<(Cfg, Liveness)>,
    keep_input: bool,
) -> Result<(RaStats, Option<Function>), RaError> {
    let debug = kiln_analysis::DebugFlags::from_env();
    let (print, verify) = (debug.print, debug.verify);
    let keep_input = keep_input || options.check || verify;
    let target = func.target.clone();
    let limits = options.limits(&*target);
    // What the classes reach bounds a target that cannot spill (see `limits_for`).
    let reachable = options.refuse_spilling.then(|| options.limits_for(func));
    let mut stats = RaStats {
        insts_before: count_insts(func),
        ..RaStats::default()
    };
    let (given_cfg, given_liveness) = analysed.unzip();
    let (split, input_cfg) = split_critical_edges(func, given_cfg)?;
    stats.split_edges = split.iter().map(Vec::len).sum::<usize>() as u32;
    // (Copies only: the CFG stays the one the split ended with.)
    let (_, copied) = to_assignment_form(func, &input_cfg, Opcode::Mov);
    // The liveness given holds for the function unchanged.
    let mut input_liveness = given_liveness.filter(|_| split.is_empty() && !copied);
    let mut input_cfg = Some(input_cfg);
    // The input, unchanged until the result replaces it, and `func` again on failure. An
    // attempt works on the input itself, changing nothing of it but its kill flags, until it
    // spills: the SSA spiller then hands back the function it replaced, and colouring's
    // spilling keeps a copy first. An attempt that did not spill gives the input back for the
    // next attempt. (A target that cannot spill never copies it.)
    let mut input = Some(std::mem::replace(
        func,
        Function::new(String::new(), target.clone()),
    ));
    let mut budget = limits.clone();
    let mut graph_fallback = false;
    let outcome: Result<(RaStats, Option<Function>, Function), RaError> = 'run: {
        // Assignment can need more than the demand the spiller meets (a vector finding no aligned
        // block, SIMT interference the demand does not count): then spill to a lower budget and
        // assign again.
        for attempt in 0.. {
            let Some(mut work) = input.take() else {
                break 'run Err(internal("the input is back after every attempt"));
            };
            // Gives the input back where the attempt did not spill (no copy was kept).
            macro_rules! give_back {
                ($f:expr) => {
                    if input.is_none() {
                        input = Some($f);
                    }
                };
            }
            // Leaves the attempt with `error`, the input back.
            macro_rules! fail {
                ($error:expr) => {{
                    let error = $error;
                    give_back!(work);
                    break 'run Err(error);
                }};
            }
            // The input as it came, for an attempt that spills (on a copy).
            macro_rules! original {
                () => {
                    match input.as_ref() {
                        Some(f) => f.clone(),
                        None => fail!(internal("spilling where the input is not kept")),
                    }
                };
            }
            let cfg = match input_cfg.take() {
                Some(cfg) => cfg,
                None => match Cfg::compute(&work) {
                    Ok(cfg) => cfg,
                    Err(e) => fail!(structure(e)),
                },
            };
            let mut lv = match input_liveness.take() {
                Some(lv) => {
                    debug_assert!(
                        kiln_analysis::is_liveness_of(&lv, &work, &cfg),
                        "the liveness given is the function's"
                    );
                    lv
                }
                None => compute_liveness(&mut work, &cfg),
            };
            if attempt == 0 {
                stats.max_demand = per_file(lv.max, &limits);
            }
            // Where no colouring can exist (more values live at once than the classes reach), a
            // target that cannot spill fails before building anything.
            if options.refuse_spilling
                && (over(lv.max, &budget, 1)
                    || reachable.as_ref().is_some_and(|r| over(lv.max, r, 1)))
            {
                fail!(RaError::WouldSpill {
                    demand: per_file(lv.max, &limits),
                    budget: budget.clone(),
                });
            }
            // Far over the budget, the interference graph grows with the square of the demand and
            // most of it is values that must be spilled anyway: the SSA spiller brings the demand
            // to the budget first and colouring colours what it leaves (decoupled allocation), a
            // graph of at most budget-many neighbours per value.
            if options.allocator == Allocator::Graph && over(lv.max, &budget, FAR_OVER) {
                graph_fallback = true;
                stats.graph_fallback = true;
            }
            let t0 = Instant::now();
            let mut versions = None;
            // After spilling, the input the checker compares with (its edges split the same way).
            let mut checked_input = None;
            let mut cfg = cfg;
            let mut preferred = None;
            // A colouring that left some values uncoloured on the unchanged function: the
            // assignment's preferences if nothing is spilled after all (no second colouring).
            let mut uncoloured_homes = None;
            if options.allocator == Allocator::Graph && !graph_fallback {
                let rounds = if options.refuse_spilling {
                    1
                } else {
                    SPILL_ROUNDS
                };
                match colour_and_spill(
                    &mut work, &cfg, &mut lv, &budget, &mut stats, rounds, &mut input,
                ) {
                    Ok((homes, v)) => {
                        if let Some(v) = v {
                            versions = Some(v);
                            if keep_input {
                                checked_input = Some(original!());
                            }
                        }
                        preferred = Some(homes);
                    }
                    Err(partial) => {
                        // Spilling everywhere did not make the graph colourable: spill with the
                        // SSA spiller instead, and colour what it leaves.
                        graph_fallback = true;
                        stats.graph_fallback = true;
                        match partial {
                            Some(homes) => uncoloured_homes = Some(homes),
                            None => {
                                work = original!();
                                lv = compute_liveness(&mut work, &cfg);
                            }
                        }
                    }
                }
            }
            if preferred.is_none() && over(lv.max, &budget, 1) {
                uncoloured_homes = None;
                let (s, v, spilled) = match spill::spill_analysed(
                    &mut work,
                    &budget,
                    &cfg,
                    Some(&lv),
                ) {
                    Ok(r) => r,
                    Err(e) => fail!(RaError::Budget {
                        block: e.block,
                        inst: e.inst,
                        message: if budget == limits {
                            e.message.clone()
                        } else {
                            format!(
                                "{} (after the assignment found no register at the budget {limits:?}, \
                             lowered to {budget:?})",
                                e.message
                            )
                        },
                    }),
                };
                stats.spills = s.spills;
                stats.reloads = s.reloads;
                stats.remats = s.remats;
                stats.spill_slots = s.slots;
                versions = Some(v);
                // The spiller hands back the function it replaced: the input, where no copy
                // of it is kept yet.
                let spilled_lv = match spilled {
                    Some((spilled_lv, before)) => {
                        give_back!(before);
                        Some(spilled_lv)
                    }
                    None => None,
                };
                // Phis the spiller made may sit on edges that need splitting; the checker's copy of
                // the input gets the same blocks.
                // (Spilling changes no block's edges: the CFG is the one spilled on.)
                debug_assert!(
                    Cfg::compute(&work).is_ok_and(|c| c == cfg),
                    "the spilled function has the input's CFG"
                );
                let (splits, split_cfg) = match split_critical_edges(&mut work, Some(cfg)) {
                    Ok(r) => r,
                    Err(e) => fail!(e),
                };
                if keep_input {
                    let mut checked = original!();
                    for round in &splits {
                        let c = match Cfg::compute(&checked) {
                            Ok(c) => c,
                            Err(e) => fail!(structure(e)),
                        };
                        if let Err(m) = kiln_ir::layout::split_edges(&mut checked, &c, round) {
                            fail!(RaError::Internal {
                                block: round[0].0,
                                inst: 0,
                                message: format!("cannot split {round:?} again: {m}"),
                            });
                        }
                    }
                    checked_input = Some(checked);
                }
                stats.split_edges += splits.iter().map(Vec::len).sum::<usize>() as u32;
                // The spiller's phis in blocks of one predecessor become moves of the values
                // they copy (the checker sees the program before spilling).
                let (copied, formed) =
                    to_assignment_form(&mut work, &split_cfg, Opcode::ParallelCopy);
                // The spiller's liveness holds where neither changed the spilled function.
                let unchanged = splits.is_empty() && !formed;
                let v = versions.as_mut().expect("set above");
                for (dup, t) in copied {
                    while v.len() <= dup.index() {
                        v.push(kiln_ir::Temp::new(v.len()));
                    }
                    v[dup.index()] = v[t.index()];
                }
                if print {
                    eprintln!("; after spilling to {budget:?}\n{}", print_function(&work));
                }
                cfg = split_cfg;
                lv = match spilled_lv.filter(|_| unchanged) {
                    Some(given) => {
                        debug_assert!(
                            kiln_analysis::is_liveness_of(&given, &work, &cfg),
                            "the spiller's liveness is the spilled function's"
                        );
                        given
                    }
                    None => compute_liveness(&mut work, &cfg),
                };
            }
            stats.time_spill += t0.elapsed();
            let t1 = Instant::now();
            if preferred.is_none() && options.allocator == Allocator::Graph {
                preferred = Some(match uncoloured_homes.take() {
                    Some(homes) => homes,
                    None => {
                        let c = graph::colour(&work, &cfg, &lv, &budget, &[]);
                        stats.uncoloured = c.stats.uncoloured;
                        stats.coalesced = c.stats.coalesced;
                        stats.graph_nodes = c.stats.nodes;
                        stats.graph_edges = c.stats.edges;
                        c.homes
                    }
                });
            }
            let coloured = preferred.is_some();
            let mut assigned = assign::assign(&work, &cfg, &lv, &limits, preferred);
            if !options.refuse_spilling && matches!(assigned, Err((RaError::NoRegister { .. }, _)))
            {
                // Neither the colouring (which does not see aligned blocks) nor the assignment's
                // own choices (which do not look ahead) always leave a vector its block where the
                // other does: before spilling more, assign once with the other preferences. At
                // `v=6,s=4` corpus failures go 682 → 318 (graph) and 392 → 311 (SSA). A target
                // that cannot spill keeps the retry at a lower budget below: on vc4 it gave 62
                // instructions fewer over the 9 shaders this touches.
                stats.preferences_swapped = true;
                let other = if coloured {
                    None
                } else {
                    Some(graph::colour(&work, &cfg, &lv, &budget, &[]).homes)
                };
                assigned = assign::assign(&work, &cfg, &lv, &limits, other);
            }
            stats.time_assign += t1.elapsed();
            let (mut out, a) = match assigned {
                Ok(r) => r,
                Err((e @ RaError::NoRegister { .. }, Some(file)))
                    if attempt < 16 && budget[file.index()] > 1 =>
                {
                    let b = &mut budget[file.index()];
                    *b -= (*b / 8).max(1);
                    stats.retries += 1;
                    if debug.ra {
                        eprintln!("retry {attempt}: {e}; budget {budget:?}");
                    }
                    give_back!(work);
                    continue;
                }
                Err((e, _)) => fail!(e),
            };
            stats.parallel_copies = a.parallel_copies;
            stats.copied_units = a.copied_units;
            stats.preferred_refused = a.preferred_refused;
            // Copies made by the spiller carry the name of the value they copy.
            if let Some(v) = &versions {
                rename_versions(&mut out, v);
            }
            if print {
                eprintln!(
                    "; after assignment and out of SSA\n{}",
                    print_function(&out)
                );
            }
            // The SSA function allocated: the input as spilled from (where kept), else `work`.
            let ssa = match checked_input {
                Some(checked) => Some(checked),
                None => versions.is_none().then_some(work),
            };
            if options.check || verify {
                let t2 = Instant::now();
                let Some(checked) = &ssa else {
                    break 'run Err(internal("the input is kept for the checker"));
                };
                if let Err(e) = checker::check(checked, &out) {
                    if let Some(f) = ssa {
                        give_back!(f);
                    }
                    break 'run Err(RaError::Check(e));
                }
                stats.time_check = t2.elapsed();
            }
            stats.insts_after = count_insts(&out);
            stats.registers_used = registers_used(&out);
            break 'run Ok((stats, ssa, out));
        }
        unreachable!("the loop returns or fails")
    };
    match outcome {
        Ok((stats, ssa, out)) => {
            *func = out;
            Ok((stats, ssa))
        }
        Err(e) => {
            if let Some(f) = input {
                *func = f;
            }
            Err(e)
        }
    }
}

fn internal(message: &str) -> RaError {
    RaError::Internal {
        block: Block::new(0),
        inst: 0,
        message: message.to_string(),
    }
}

/// The demand, as a multiple of the budget, past which graph colouring spills with the SSA
/// spiller before it builds its graph.
const FAR_OVER: i32 = 2;

/// Whether `demand` exceeds `times` the budget in some file.
fn over(demand: kiln_ir::Demand, budget: &[u32], times: i32) -> bool {
    budget
        .iter()
        .enumerate()
        .any(|(f, &b)| demand.0[f] > times * b as i32)
}

/// Rounds of colouring and spilling everywhere before the graph allocator gives up on its own
/// spilling and falls back to the SSA spiller.
const SPILL_ROUNDS: usize = 6;

/// The graph allocator's build–colour–spill loop (Chaitin–Briggs): colour `work` within
/// `budget`; while some nodes find no colour, spill them everywhere and colour again. Returns
/// the homes, and the versions of the temps made by spilling (`None` when nothing spilled), or
/// an error when colouring still fails after `max_rounds` rounds: with the last colouring's
/// homes when nothing was spilled (`work` unchanged), else `None` (`work` is then spilled
/// partly; the caller starts again from the input). Before it first spills, `work` is copied
/// to `input` where that holds no copy yet.
#[allow(clippy::type_complexity)]
fn colour_and_spill(
    work: &mut Function,
    cfg: &Cfg,
    lv: &mut kiln_analysis::Liveness,
    budget: &[u32],
    stats: &mut RaStats,
    max_rounds: usize,
    input: &mut Option<Function>,
) -> Result<
    (Vec<Option<kiln_ir::PhysReg>>, Option<Vec<kiln_ir::Temp>>),
    Option<Vec<Option<kiln_ir::PhysReg>>>,
> {
    let mut rounds = spill_everywhere::Rounds::new(work);
    stats.spills = 0;
    stats.reloads = 0;
    stats.remats = 0;
    stats.spill_rounds = 0;
    for round in 0..max_rounds {
        let c = graph::colour(work, cfg, lv, budget, &rounds.unspillable);
        stats.uncoloured = c.stats.uncoloured;
        stats.coalesced = c.stats.coalesced;
        stats.graph_nodes = c.stats.nodes;
        stats.graph_edges = c.stats.edges;
        if c.stats.uncoloured == 0 {
            stats.spill_slots = rounds.next_slot;
            let spilled = stats.spill_rounds > 0;
            return Ok((c.homes, spilled.then_some(rounds.versions)));
        }
        if c.spill.is_empty() || round + 1 == max_rounds {
            return Err((stats.spill_rounds == 0).then_some(c.homes));
        }
        if input.is_none() {
            *input = Some(work.clone());
        }
        let s = spill_everywhere::spill_everywhere(
            work,
            cfg,
            lv,
            &c.spill,
            &mut rounds,
            // Reloads serve nearby reads in the first round only: in later rounds the values
            // left are those whose reloads made the graph uncolourable again.
            if stats.spill_rounds == 0 {
                spill_everywhere::RELOAD_REACH
            } else {
                0
            },
        );
        stats.spills += s.spills;
        stats.reloads += s.reloads;
        stats.remats += s.remats;
        stats.spill_rounds += 1;
        *lv = compute_liveness(work, cfg);
    }
    Err(None)
}

fn structure(e: kiln_ir::cfg::StructureError) -> RaError {
    RaError::Structure(format!("{}: {}", e.block, e.message))
}

/// Puts the SSA function in the form the assignment expects (see each step). Its copies are
/// `copy`: `mov`, or `parallel_copy` after spilling, when the checker is given the program
/// before spilling and the copies must be moves of the values they copy. Returns the new temps
/// that copy another within its file, with the temp each copies (after spilling, versions of
/// the same input value), and whether it changed the function.
fn to_assignment_form(
    func: &mut Function,
    cfg: &Cfg,
    copy: Opcode,
) -> (Vec<(kiln_ir::Temp, kiln_ir::Temp)>, bool) {
    let (temps, insts) = (func.temps.len(), count_insts(func));
    let mut copied = Vec::new();
    isolate_exit_operands(func, cfg, copy, &mut copied);
    let phis = single_predecessor_phis(func, cfg, copy);
    copy_constrained_operands(func, copy, &mut copied);
    // (Every copy is a new temp and an instruction; a phi made a copy is neither.)
    let changed = phis || func.temps.len() != temps || count_insts(func) != insts;
    (copied, changed)
}

/// Names every temp of an allocated function after the value it copies.
fn rename_versions(func: &mut Function, versions: &[kiln_ir::Temp]) {
    let rename = |t: kiln_ir::Temp| versions.get(t.index()).copied().unwrap_or(t);
    for inst in func.blocks.iter_mut().flat_map(|b| &mut b.insts) {
        for d in inst.defs.iter_mut() {
            d.temp = rename(d.temp);
        }
        for op in inst.operands.iter_mut() {
            if let Some(t) = op.temp_id() {
                op.value = kiln_ir::Value::Temp(rename(t));
            }
        }
    }
}

fn per_file(d: Demand, limits: &[u32]) -> Vec<u32> {
    (0..limits.len()).map(|f| d.0[f].max(0) as u32).collect()
}

fn count_insts(func: &Function) -> u32 {
    func.blocks.iter().map(|b| b.insts.len() as u32).sum()
}

/// Per file, the highest unit an allocated function writes or reads, plus one.
pub fn registers_used(func: &Function) -> Vec<u32> {
    let mut used = vec![0u32; func.target.files().len()];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        let regs = inst
            .defs
            .iter()
            .filter_map(|d| Some((d.reg?, func.class(d.temp).size)))
            .chain(
                inst.operands
                    .iter()
                    .filter_map(|o| Some((o.reg?, func.class(o.temp_id()?).size))),
            );
        for (r, size) in regs {
            let u = &mut used[r.file().index()];
            *u = (*u).max(r.unit() + size as u32);
        }
    }
    used
}

/// The edges one round of [`split_critical_edges`] splits: (from, to).
type SplitRound = Vec<(Block, Block)>;

/// Splits the edges that would carry phi copies but have no place for them: from a block with
/// several successors into a block with several predecessors and phis of that CFG (an `if`
/// with no else into its endif). A divergent loop's back edge is left (see [`assign`]).
/// Returns the edges split, round by round, and the CFG of the function that results.
fn split_critical_edges(
    func: &mut Function,
    mut given: Option<Cfg>,
) -> Result<(Vec<SplitRound>, Cfg), RaError> {
    let mut rounds = Vec::new();
    loop {
        let cfg = match given.take() {
            Some(cfg) => cfg,
            None => Cfg::compute(func)
                .map_err(|e| RaError::Structure(format!("{}: {}", e.block, e.message)))?,
        };
        let mut found: Vec<(Block, Block)> = Vec::new();
        // A block's splittable edges are one split: one edge per source.
        let mut split_from = vec![false; func.blocks.len()];
        for s in func.block_ids() {
            for phi in func.block(s).insts.iter().take_while(|i| i.op.is_phi()) {
                let edges = if phi.op == Opcode::LinearPhi {
                    &cfg.linear
                } else {
                    &cfg.logical
                };
                let preds = &edges.preds[s.index()];
                if preds.len() < 2 {
                    continue;
                }
                for &p in preds {
                    let critical = edges.succs[p.index()].len() > 1
                        && !(phi.op == Opcode::LinearPhi && cfg.is_back_edge(p, s));
                    let exit_of_latch = phi.op == Opcode::LinearPhi
                        && cfg.enclosing_loops(p).any(|l| {
                            cfg.loops[l].exit == s
                                && cfg.linear.succs[p.index()].contains(&cfg.loops[l].header)
                        });
                    if critical && !exit_of_latch && !split_from[p.index()] {
                        split_from[p.index()] = true;
                        found.push((p, s));
                    }
                }
            }
        }
        if found.is_empty() {
            return Ok((rounds, cfg));
        }
        kiln_ir::layout::split_edges(func, &cfg, &found).map_err(|m| RaError::Internal {
            block: found[0].0,
            inst: 0,
            message: format!("cannot split the critical edges {found:?}: {m}"),
        })?;
        rounds.push(found);
    }
}

/// The phis of a block with one predecessor (in the phi's CFG) become copies at the start of
/// the block — masked for `phi`, in all lanes for `linear_phi` — so that every phi left has its
/// copies at the ends of its predecessors. (Their operands come from dominating blocks, so the
/// copies need not be parallel.)
fn single_predecessor_phis(func: &mut Function, cfg: &Cfg, copy: Opcode) -> bool {
    let mut changed = false;
    for b in (0..func.blocks.len()).map(Block::new) {
        let block = &mut func.blocks[b.index()];
        let nphi = block.phi_count();
        let single = |op: Opcode| {
            let preds = if op == Opcode::LinearPhi {
                &cfg.linear.preds[b.index()]
            } else {
                &cfg.logical.preds[b.index()]
            };
            preds.len() == 1
        };
        if !block.insts[..nphi].iter().any(|i| single(i.op)) {
            continue;
        }
        changed = true;
        let phis: Vec<Inst> = block.insts.drain(..nphi).collect();
        let (moved, kept): (Vec<Inst>, Vec<Inst>) = phis.into_iter().partition(|i| single(i.op));
        let make = |phi: &Inst| {
            let mut mov = Inst::new(copy);
            mov.flags.all_lanes = phi.op == Opcode::LinearPhi || phi.writes_all_lanes();
            mov.defs.push(Def::new(phi.defs[0].temp));
            let mut op = phi.operands[0];
            op.flags = kiln_ir::OperandFlags::empty();
            mov.operands.push(op);
            mov
        };
        // A logical phi of a block whose linear predecessor is another block (the block after
        // a divergent break) is copied at the end of its logical predecessor: a copy at the
        // block's start would read the operand along a linear edge it may not be defined on.
        let pred = cfg.logical.preds[b.index()].first().copied();
        let at_pred = |phi: &Inst| {
            phi.op != Opcode::LinearPhi
                && cfg.linear.preds[b.index()] != cfg.logical.preds[b.index()]
        };
        let (early, here): (Vec<Inst>, Vec<Inst>) = moved.into_iter().partition(|i| at_pred(i));
        let copies: Vec<Inst> = here.iter().map(make).collect();
        block.insts.splice(0..0, kept.into_iter().chain(copies));
        if let (Some(p), false) = (pred, early.is_empty()) {
            let insts = &mut func.blocks[p.index()].insts;
            let end = insts.len() - insts.last().is_some_and(|i| i.op.is_terminator()) as usize;
            insts.splice(end..end, early.iter().map(make));
        }
    }
    changed
}

/// Blocks a lane waits through along the logical edge `p → s` that the wave does not take
/// (empty when it is also a linear edge): the other side of a divergent `if`, the rest of the
/// body after a divergent `continue`, every later iteration after a divergent `break`.
pub(crate) fn skipped(cfg: &Cfg, p: Block, s: Block) -> std::ops::Range<usize> {
    if cfg.linear.succs[p.index()].contains(&s) {
        return 0..0;
    }
    for l in cfg.enclosing_loops(p) {
        let lp = &cfg.loops[l];
        if s == lp.exit {
            return lp.header.index()..lp.exit.index();
        }
        if s == lp.header {
            return p.index() + 1..lp.exit.index();
        }
    }
    p.index() + 1..s.index()
}

/// The lost-copy problem on the linear CFG's one critical edge (Briggs et al. 1998; Sreedhar
/// et al. 1999): a loop with a divergent break is left from its back-edge blocks, after the
/// copies for the header's linear phis have overwritten them. An exit phi that reads such a
/// header phi from a back-edge block reads a copy made before, at the end of that block.
fn isolate_exit_operands(
    func: &mut Function,
    cfg: &Cfg,
    copy: Opcode,
    copied: &mut Vec<(kiln_ir::Temp, kiln_ir::Temp)>,
) {
    for lp in cfg.loops.iter().filter(|l| l.divergent) {
        let header_phis: Vec<kiln_ir::Temp> = func
            .block(lp.header)
            .insts
            .iter()
            .take_while(|i| i.op.is_phi())
            .filter(|i| i.op == Opcode::LinearPhi)
            .map(|i| i.defs[0].temp)
            .collect();
        if header_phis.is_empty() {
            continue;
        }
        let preds = cfg.linear.preds[lp.exit.index()].clone();
        let nphi = func.block(lp.exit).phi_count();
        for k in 0..nphi {
            for (j, &p) in preds.iter().enumerate() {
                let inst = &func.block(lp.exit).insts[k];
                if inst.op != Opcode::LinearPhi || !lp.back_edges.contains(&p) {
                    continue;
                }
                let Some(t) = inst.operands[j]
                    .temp_id()
                    .filter(|t| header_phis.contains(t))
                else {
                    continue;
                };
                let dup = func.new_temp(func.class(t));
                copied.push((dup, t));
                let mut mov = Inst::new(copy);
                mov.flags.all_lanes = true;
                mov.defs.push(Def::new(dup));
                mov.operands.push(kiln_ir::Operand::temp(t));
                let insts = &mut func.blocks[p.index()].insts;
                let at = insts.len() - 1;
                insts.insert(at, mov);
                func.blocks[lp.exit.index()].insts[k].operands[j] = kiln_ir::Operand::temp(dup);
            }
        }
    }
}

/// Operands that may be moved around their instruction (tied, fixed, vector operands) read a
/// masked copy when their value is linear in a per-lane file: the moves around an instruction
/// write only the active lanes, which a value of the whole wave cannot be left in. A vector
/// operand from another file than the vector's (a uniform coordinate of a per-lane vector)
/// reads a copy in the vector's file. The copies are new values (`mov`).
fn copy_constrained_operands(
    func: &mut Function,
    copy: Opcode,
    copied: &mut Vec<(kiln_ir::Temp, kiln_ir::Temp)>,
) {
    let linear = func.linear_temps();
    let files = func.target.files().to_vec();
    let per_lane = |class: kiln_ir::RegClass| {
        files
            .get(class.file.index())
            .is_some_and(|f| f.lanes == kiln_ir::Lanes::PerLane)
    };
    let in_vector = |ops: &[kiln_ir::Operand], j: usize| {
        ops[j].is_vector_aligned() || (j > 0 && ops[j - 1].is_vector_aligned())
    };
    for b in 0..func.blocks.len() {
        let mut k = 0;
        while k < func.blocks[b].insts.len() {
            let inst = &func.blocks[b].insts[k];
            let tied = |j: usize| inst.defs.iter().any(|d| d.tied.map(usize::from) == Some(j));
            // The file of each vector: its first per-lane member's.
            let vector_file = |j: usize| {
                let mut s = j;
                while s > 0 && inst.operands[s - 1].is_vector_aligned() {
                    s -= 1;
                }
                let mut e = j;
                while e + 1 < inst.operands.len() && inst.operands[e].is_vector_aligned() {
                    e += 1;
                }
                inst.operands[s..=e]
                    .iter()
                    .filter_map(|o| o.temp_id())
                    .map(|t| func.temps[t.index()])
                    .find(|&c| per_lane(c))
                    .map(|c| c.file)
            };
            let mut copies: Vec<(usize, kiln_ir::RegClass)> = Vec::new();
            for (j, op) in inst.operands.iter().enumerate() {
                let Some(t) = op.temp_id() else { continue };
                let class = func.temps[t.index()];
                let vector = in_vector(&inst.operands, j);
                if vector
                    && let Some(file) = vector_file(j)
                    && file != class.file
                {
                    copies.push((j, func.target.class(file, class.size)));
                } else if linear[t.index()]
                    && per_lane(class)
                    && (op.fixed.is_some() || tied(j) || vector)
                {
                    copies.push((j, class));
                }
            }
            if copies.is_empty() {
                k += 1;
                continue;
            }
            let mut movs = Vec::new();
            for (j, class) in copies {
                let t = func.blocks[b].insts[k].operands[j]
                    .temp_id()
                    .expect("a temp");
                let dup = func.new_temp(class);
                // A copy into another file names a new value; one in the same file is a move
                // of `t` (a version of it, after spilling).
                let same = class == func.class(t);
                let mut mov = Inst::new(if same { copy } else { Opcode::Mov });
                if same {
                    copied.push((dup, t));
                }
                mov.defs.push(Def::new(dup));
                mov.operands.push(kiln_ir::Operand::temp(t));
                movs.push(mov);
                func.blocks[b].insts[k].operands[j].value = kiln_ir::Value::Temp(dup);
            }
            let n = movs.len();
            func.blocks[b].insts.splice(k..k, movs);
            k += n + 1;
        }
    }
}
