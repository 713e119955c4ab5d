//! The allocation checker, after regalloc2's symbolic checker: a dataflow over an allocated
//! function that tracks which SSA values every register unit and spill slot holds, in a per-lane
//! and a wave view, and proves that every operand reads its own value. It trusts nothing the
//! allocator added: only the SSA function says what a value is. The design is in
//! `docs/regalloc.md` ("The checker").

use kiln_ir::{Block, Cfg, Function, Inst, Lanes, Opcode, PhysReg, Temp, Value};
use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A place that holds values: a register unit of a file, or a unit of a spill slot.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Loc {
    Unit(u8, u32),
    Slot(u32, u8),
}

/// One value a place can hold.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Val {
    /// Unit `offset` of `temp`.
    Temp(Temp, u8),
    Const(u32),
}

type Vals = SmallVec<[Val; 2]>;

/// The abstract machine: what each place holds, and the temps any place may stand for.
#[derive(Clone, PartialEq, Eq, Default, Debug)]
struct State {
    places: BTreeMap<Loc, Vals>,
    wild: BTreeSet<Temp>,
}

impl State {
    fn holds(&self, loc: Loc, v: Val) -> bool {
        self.places.get(&loc).is_some_and(|s| s.contains(&v))
            || matches!(v, Val::Temp(t, _) if self.wild.contains(&t))
    }

    /// Every copy of `t` goes stale.
    fn forget(&mut self, t: Temp) {
        self.wild.remove(&t);
        self.places.retain(|_, vals| {
            vals.retain(|v| !matches!(v, Val::Temp(u, _) if *u == t));
            !vals.is_empty()
        });
    }

    fn set(&mut self, loc: Loc, vals: Vals) {
        if vals.is_empty() {
            self.places.remove(&loc);
        } else {
            self.places.insert(loc, vals);
        }
    }

    /// Adds what `other` knows (both hold at the same point).
    fn join(&mut self, other: &State) {
        for (loc, vals) in &other.places {
            for &v in vals {
                push(self, *loc, v);
            }
        }
        self.wild.extend(other.wild.iter().copied());
    }

    /// What both states agree on.
    fn meet(&mut self, other: &State) {
        let wild = &self.wild;
        let mut places = BTreeMap::new();
        for (loc, vals) in &self.places {
            let kept: Vals = vals
                .iter()
                .copied()
                .filter(|&v| other.holds(*loc, v))
                .collect();
            if !kept.is_empty() {
                places.insert(*loc, kept);
            }
        }
        for (loc, vals) in &other.places {
            for &v in vals {
                if matches!(v, Val::Temp(t, _) if wild.contains(&t)) {
                    let e: &mut Vals = places.entry(*loc).or_default();
                    if !e.contains(&v) {
                        e.push(v);
                    }
                }
            }
        }
        self.places = places;
        self.wild = self.wild.intersection(&other.wild).copied().collect();
    }
}

/// Why an allocation is wrong, at an instruction of the allocated function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckError {
    pub block: Block,
    pub inst: usize,
    pub message: String,
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.block, self.inst, self.message)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum View {
    PerLane,
    Wave,
}

/// The phis of one SSA block: per phi, whether it is a linear phi, its temp, and its operand per
/// predecessor.
type Phis = Vec<(bool, Temp, Vec<Value>)>;

/// Checks that `allocated`, an allocation of the SSA function `ssa`, reads every value where it
/// is. The allocation keeps `ssa`'s blocks; it adds only copies, spills and reloads. Every error
/// found, in block order.
pub fn check(ssa: &Function, allocated: &Function) -> Result<(), Vec<CheckError>> {
    let fail = |message: String| {
        Err(vec![CheckError {
            block: Block(0),
            inst: 0,
            message,
        }])
    };
    if !allocated.allocated {
        return fail("the function is not allocated".into());
    }
    if ssa.blocks.len() != allocated.blocks.len() {
        return fail(format!(
            "the allocation has {} blocks, the SSA function {}",
            allocated.blocks.len(),
            ssa.blocks.len()
        ));
    }
    let cfg = match Cfg::compute(allocated) {
        Ok(c) => c,
        Err(e) => return fail(format!("{}: {}", e.block, e.message)),
    };
    let phis: Vec<Phis> = ssa
        .blocks
        .iter()
        .map(|b| {
            b.insts
                .iter()
                .filter(|i| i.op.is_phi())
                .map(|i| {
                    let vals = i.operands.iter().map(|o| o.value).collect();
                    (i.op == Opcode::LinearPhi, i.defs[0].temp, vals)
                })
                .collect()
        })
        .collect();
    let checker = Checker::new(ssa, allocated, &cfg, phis);
    let mut errors = Vec::new();
    for b in allocated.block_ids() {
        for (k, inst) in allocated.block(b).insts.iter().enumerate() {
            checker.constraints(b, k, inst, &mut errors);
        }
    }
    // The wave view first: what it proves at a block's entry holds in every lane, so the
    // per-lane view starts each block from it as well.
    let wave = checker.dataflow(View::Wave, &[], &mut errors);
    checker.dataflow(View::PerLane, &wave, &mut errors);
    errors.sort_by_key(|e| (e.block, e.inst));
    errors.dedup();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

struct Checker<'f> {
    func: &'f Function,
    cfg: &'f Cfg,
    phis: Vec<Phis>,
    /// Temps of the SSA function (the allocation may add more; those name nothing).
    ssa_temps: usize,
    linear: Vec<bool>,
    /// Temps the allocated function defines in all lanes somewhere: every definition of such a
    /// temp writes all lanes (docs/semantics.md), whatever its flags say.
    writes_all: Vec<bool>,
    per_lane_file: Vec<bool>,
    /// Per block: per-lane places written by all-lanes instructions.
    all_lanes_places: Vec<Vec<Loc>>,
    /// Per SSA temp: its definition in the SSA function (phis excluded), with whether it can be
    /// recomputed anywhere (it reads no temp: [`crate::spill::rematerializable`]).
    defs: Vec<Option<(&'f Inst, bool)>>,
}

/// Whether an instruction only moves values (it defines none of the SSA program).
fn is_move(inst: &Inst) -> bool {
    matches!(
        inst.op,
        Opcode::ParallelCopy | Opcode::Spill | Opcode::Reload
    )
}

impl<'f> Checker<'f> {
    fn new(ssa: &'f Function, func: &'f Function, cfg: &'f Cfg, phis: Vec<Phis>) -> Checker<'f> {
        let mut defs = vec![None; ssa.temps.len()];
        for inst in ssa.blocks.iter().flat_map(|b| &b.insts) {
            if inst.op.is_phi() {
                continue;
            }
            for d in &inst.defs {
                if let Some(slot) = defs.get_mut(d.temp.index()) {
                    *slot = Some((inst, crate::spill::rematerializable(inst)));
                }
            }
        }
        let per_lane_file: Vec<bool> = func
            .target
            .files()
            .iter()
            .map(|f| f.lanes == Lanes::PerLane)
            .collect();
        let writes_all = func.linear_temps();
        let mut linear = writes_all.clone();
        // What is linear is decided by the SSA program (a copy may write all lanes of anything).
        for (t, l) in ssa.linear_temps().into_iter().enumerate() {
            linear[t] = l;
        }
        let mut c = Checker {
            func,
            cfg,
            phis,
            ssa_temps: ssa.temps.len(),
            linear,
            writes_all,
            per_lane_file,
            all_lanes_places: Vec::new(),
            defs,
        };
        c.all_lanes_places = func
            .blocks
            .iter()
            .map(|block| {
                block
                    .insts
                    .iter()
                    .filter(|i| c.all_lanes(i))
                    .flat_map(|i| c.written(i))
                    .filter(|&l| c.per_lane(l))
                    .collect()
            })
            .collect();
        c
    }

    /// Whether an instruction writes every lane of what it defines.
    fn all_lanes(&self, inst: &Inst) -> bool {
        inst.writes_all_lanes()
            || inst.op == Opcode::LinearPhi
            || inst.defs.iter().any(|d| self.writes_all[d.temp.index()])
    }

    /// Whether a place holds a value per lane (spill slots are per-lane memory).
    fn per_lane(&self, l: Loc) -> bool {
        match l {
            Loc::Unit(f, _) => self.per_lane_file.get(f as usize).copied().unwrap_or(true),
            Loc::Slot(..) => true,
        }
    }

    fn size(&self, t: Temp) -> u8 {
        self.func.temps.get(t.index()).map_or(1, |c| c.size.max(1))
    }

    fn units(reg: PhysReg, size: u8) -> impl Iterator<Item = (Loc, u8)> {
        (0..size).map(move |i| (Loc::Unit(reg.file().0, reg.unit() + i as u32), i))
    }

    /// The places an operand or definition occupies.
    fn places_of(&self, t: Temp, reg: PhysReg) -> Vec<Loc> {
        Self::units(reg, self.size(t)).map(|(l, _)| l).collect()
    }

    /// The places an instruction writes.
    fn written(&self, inst: &Inst) -> Vec<Loc> {
        if inst.op == Opcode::Spill {
            return match (inst.operands.first(), inst.imms.first()) {
                (Some(op), Some(&slot)) => {
                    let n = op.temp_id().map_or(1, |t| self.size(t));
                    (0..n).map(|i| Loc::Slot(slot, i)).collect()
                }
                _ => Vec::new(),
            };
        }
        inst.defs
            .iter()
            .filter_map(|d| d.reg.map(|r| self.places_of(d.temp, r)))
            .flatten()
            .collect()
    }

    /// Per-instruction constraints.
    fn constraints(&self, b: Block, k: usize, inst: &Inst, errors: &mut Vec<CheckError>) {
        let mut err = |m: String| {
            errors.push(CheckError {
                block: b,
                inst: k,
                message: m,
            })
        };
        let target = &*self.func.target;
        let name = |r: PhysReg| kiln_ir::text::fmt_reg(target, r);
        for (j, op) in inst.operands.iter().enumerate() {
            let Value::Temp(t) = op.value else { continue };
            let Some(r) = op.reg else {
                err(format!("operand {j} ({t}) has no register"));
                continue;
            };
            if let Some(f) = op.fixed
                && f != r
            {
                err(format!(
                    "operand {j} ({t}) is fixed to {} but reads {}",
                    name(f),
                    name(r)
                ));
            }
            if let Err(m) = target.check_reg(r, self.func.class(t)) {
                err(format!("operand {j} ({t}): {m}"));
            }
        }
        for (j, d) in inst.defs.iter().enumerate() {
            let Some(r) = d.reg else {
                err(format!("definition {j} ({}) has no register", d.temp));
                continue;
            };
            if let Some(f) = d.fixed
                && f != r
            {
                err(format!(
                    "definition {j} ({}) is fixed to {} but writes {}",
                    d.temp,
                    name(f),
                    name(r)
                ));
            }
            if let Err(m) = target.check_reg(r, self.func.class(d.temp)) {
                err(format!("definition {j} ({}): {m}", d.temp));
            }
            if let Some(o) = d.tied
                && inst
                    .operands
                    .get(o as usize)
                    .is_some_and(|op| op.reg != Some(r))
            {
                err(format!(
                    "definition {j} ({}) is tied to operand {o} but they are in different registers",
                    d.temp
                ));
            }
        }
        if !is_move(inst) && !inst.op.is_phi() {
            for d in &inst.defs {
                if let Some(Some((orig, _))) = self.defs.get(d.temp.index())
                    && !same_computation(orig, inst)
                {
                    err(format!(
                        "{} is defined by `{}`, which is not its definition `{}`",
                        d.temp, inst.op, orig.op
                    ));
                }
            }
        }
        let defs: Vec<(Loc, Temp)> = inst
            .defs
            .iter()
            .filter_map(|d| d.reg.map(|r| (r, d.temp)))
            .flat_map(|(r, t)| self.places_of(t, r).into_iter().map(move |l| (l, t)))
            .collect();
        for (i, (l, t)) in defs.iter().enumerate() {
            if let Some((_, u)) = defs[i + 1..].iter().find(|(m, _)| m == l) {
                err(format!("definitions {t} and {u} overlap"));
            }
        }
        for (j, op) in inst.operands.iter().enumerate() {
            let (Value::Temp(t), Some(r), true) = (op.value, op.reg, op.is_late_kill()) else {
                continue;
            };
            if self
                .places_of(t, r)
                .iter()
                .any(|l| defs.iter().any(|(m, _)| m == l))
            {
                err(format!("late-kill operand {j} ({t}) overlaps a definition"));
            }
        }
    }

    /// Runs the view's dataflow to its fixpoint and checks every read; returns the state at
    /// every block's entry. `known`: states at block entries that hold in every lane (the wave
    /// view's), joined into each entry.
    fn dataflow(&self, view: View, known: &[State], errors: &mut Vec<CheckError>) -> Vec<State> {
        let func = self.func;
        let n = func.blocks.len();
        let mut out: Vec<Option<State>> = vec![None; n];
        // What a loop's continue block delivers to the loop's exit: the wave leaves the loop
        // only when no lane is left, so on that edge the block ran with no lane active and only
        // its all-lanes and uniform-file writes happened.
        let mut idle_out: Vec<Option<State>> = vec![None; n];
        // Blocks in layout order are a reverse post-order of both CFGs: a few sweeps.
        let mut changed = true;
        while changed {
            changed = false;
            for b in func.block_ids() {
                let mut entry = self.entry_state(view, &out, &idle_out, b);
                if let Some(k) = known.get(b.index()) {
                    entry.join(k);
                }
                if view == View::Wave && self.idle_exit(b).is_some() {
                    let idle = self.run_block(view, b, entry.clone(), None, true);
                    if idle_out[b.index()].as_ref() != Some(&idle) {
                        idle_out[b.index()] = Some(idle);
                        changed = true;
                    }
                }
                let state = self.run_block(view, b, entry, None, false);
                if out[b.index()].as_ref() != Some(&state) {
                    out[b.index()] = Some(state);
                    changed = true;
                }
            }
        }
        let mut entries = Vec::with_capacity(n);
        for b in func.block_ids() {
            let mut state = self.entry_state(view, &out, &idle_out, b);
            if let Some(k) = known.get(b.index()) {
                state.join(k);
            }
            entries.push(state.clone());
            self.run_block(view, b, state, Some(errors), false);
        }
        entries
    }

    /// The exit of the loop of which `b` is a back-edge block, when the wave reaches that exit
    /// from `b` only with no lane active: a loop with a divergent break is left along the linear
    /// edge from a block ending in a uniform `continue` (its latch, or another) when no lane
    /// runs the next iteration — neither the lanes active in `b` nor those waiting at a
    /// divergent `continue`, which rejoin only at that `continue` — so `b` ran with no lane
    /// active; and that edge is not a logical one.
    fn idle_exit(&self, b: Block) -> Option<Block> {
        self.cfg
            .loops
            .iter()
            .find(|l| l.divergent && l.back_edges.contains(&b))
            .map(|l| l.exit)
            .filter(|e| {
                self.cfg.linear.succs[b.index()].contains(e)
                    && !self.cfg.logical.succs[b.index()].contains(e)
            })
    }

    /// The meet over the reached predecessors of what each edge delivers.
    fn entry_state(
        &self,
        view: View,
        out: &[Option<State>],
        idle_out: &[Option<State>],
        b: Block,
    ) -> State {
        let edges = match view {
            View::PerLane => &self.cfg.logical,
            View::Wave => &self.cfg.linear,
        };
        let mut meet: Option<State> = None;
        for (k, &p) in edges.preds[b.index()].iter().enumerate() {
            let idle = view == View::Wave && self.idle_exit(p) == Some(b);
            let delivered = if idle {
                &idle_out[p.index()]
            } else {
                &out[p.index()]
            };
            let Some(s) = delivered else { continue };
            let mut s = s.clone();
            if view == View::PerLane && !self.cfg.linear.succs[p.index()].contains(&b) {
                for blk in crate::skipped(self.cfg, p, b) {
                    for l in &self.all_lanes_places[blk] {
                        s.places.remove(l);
                    }
                }
            }
            self.edge_phis(view, b, k, &mut s);
            match &mut meet {
                None => meet = Some(s),
                Some(m) => m.meet(&s),
            }
        }
        meet.unwrap_or_default()
    }

    /// The phis of `b` taking their operand from predecessor `k` of the view's CFG: the phis
    /// whose temps the view checks (a logical phi of a linear temp sits where both CFGs give the
    /// block the same predecessors, as the verifier requires).
    fn edge_phis(&self, view: View, b: Block, k: usize, s: &mut State) {
        let phis: Vec<&(bool, Temp, Vec<Value>)> = self.phis[b.index()]
            .iter()
            .filter(|(_, t, _)| self.linear[t.index()] == (view == View::Wave))
            .collect();
        if phis.is_empty() {
            return;
        }
        // All phis read before any is defined.
        let before = s.clone();
        for (_, t, _) in &phis {
            s.forget(*t);
        }
        for (_, t, ops) in phis {
            match ops.get(k) {
                Some(Value::Undef(_)) | None => {
                    s.wild.insert(*t);
                }
                Some(&Value::Const(c)) => {
                    for (loc, vals) in &before.places {
                        if vals.contains(&Val::Const(c)) {
                            push(s, *loc, Val::Temp(*t, 0));
                        }
                    }
                }
                Some(&Value::Temp(a)) => {
                    if before.wild.contains(&a) {
                        s.wild.insert(*t);
                        continue;
                    }
                    for (loc, vals) in &before.places {
                        for v in vals {
                            if let Val::Temp(x, i) = *v
                                && x == a
                            {
                                push(s, *loc, Val::Temp(*t, i));
                            }
                        }
                    }
                }
            }
        }
    }

    /// Runs block `b` from `state`. `idle`: the wave runs it with no lane active (only in the
    /// wave view), so masked writes to per-lane places change nothing.
    fn run_block(
        &self,
        view: View,
        b: Block,
        mut state: State,
        mut errors: Option<&mut Vec<CheckError>>,
        idle: bool,
    ) -> State {
        for (k, inst) in self.func.block(b).insts.iter().enumerate() {
            if inst.op.is_phi() {
                continue;
            }
            if let Some(errors) = errors.as_deref_mut() {
                self.reads(view, b, k, inst, &state, errors);
            }
            // What each written place receives, read before anything is written.
            let mut writes: Vec<(Loc, Vals)> = Vec::new();
            if is_move(inst) {
                let srcs: Vec<Vec<Vals>> = match inst.op {
                    Opcode::Reload => {
                        let slot = inst.imms.first().copied().unwrap_or(0);
                        let n = inst.defs.first().map_or(1, |d| self.size(d.temp));
                        vec![
                            (0..n)
                                .map(|i| self.vals(&state, Loc::Slot(slot, i)))
                                .collect(),
                        ]
                    }
                    _ => inst
                        .operands
                        .iter()
                        .map(|op| match (op.value, op.reg) {
                            (Value::Temp(t), Some(r)) => self
                                .places_of(t, r)
                                .into_iter()
                                .map(|l| self.vals(&state, l))
                                .collect(),
                            (Value::Const(c), _) => vec![SmallVec::from_elem(Val::Const(c), 1)],
                            (Value::Undef(c), _) => vec![Vals::new(); c.size.max(1) as usize],
                            (Value::Temp(t), None) => vec![Vals::new(); self.size(t) as usize],
                        })
                        .collect(),
                };
                let dests = self.written(inst);
                let flat: Vec<Vals> = srcs.into_iter().flatten().collect();
                for (i, loc) in dests.into_iter().enumerate() {
                    writes.push((loc, flat.get(i).cloned().unwrap_or_default()));
                }
            } else {
                for d in &inst.defs {
                    // A recomputation of a value that reads no temp (a rematerialisation)
                    // gives the same bits: the other copies stay valid.
                    let recomputed = matches!(self.defs.get(d.temp.index()), Some(Some((_, true))));
                    if d.temp.index() < self.ssa_temps && !recomputed {
                        state.forget(d.temp);
                    }
                    if let Some(r) = d.reg {
                        for (loc, i) in Self::units(r, self.size(d.temp)) {
                            writes.push((loc, SmallVec::from_elem(Val::Temp(d.temp, i), 1)));
                        }
                    }
                }
            }
            let all = self.all_lanes(inst);
            for (loc, vals) in writes {
                match view {
                    View::PerLane => {
                        if self.per_lane(loc) {
                            state.set(loc, vals);
                        }
                    }
                    View::Wave if all || !self.per_lane(loc) => state.set(loc, vals),
                    View::Wave if idle => {}
                    View::Wave => {
                        // Active lanes get the new values, the others keep the old ones.
                        let old = self.vals(&state, loc);
                        state.set(loc, vals.into_iter().filter(|v| old.contains(v)).collect());
                    }
                }
            }
        }
        state
    }

    fn vals(&self, state: &State, loc: Loc) -> Vals {
        state.places.get(&loc).cloned().unwrap_or_default()
    }

    /// Checks the reads of one instruction whose values belong to `view`. A copy's operand is
    /// checked only for values of the SSA program (it moves whatever it finds).
    fn reads(
        &self,
        view: View,
        b: Block,
        k: usize,
        inst: &Inst,
        state: &State,
        errors: &mut Vec<CheckError>,
    ) {
        if is_move(inst) {
            return;
        }
        let mine =
            |t: Temp| (view == View::Wave) == self.linear.get(t.index()).copied().unwrap_or(false);
        let target = &*self.func.target;
        for (j, op) in inst.operands.iter().enumerate() {
            let (Value::Temp(t), Some(r)) = (op.value, op.reg) else {
                continue;
            };
            if !mine(t) {
                continue;
            }
            for (loc, i) in Self::units(r, self.size(t)) {
                if state.holds(loc, Val::Temp(t, i)) {
                    continue;
                }
                let Loc::Unit(f, u) = loc else { continue };
                let place = kiln_ir::text::fmt_reg(target, PhysReg::new(kiln_ir::FileId(f), u));
                let found: Vec<String> = self
                    .vals(state, loc)
                    .iter()
                    .map(|v| match v {
                        Val::Temp(x, 0) if self.size(*x) == 1 => x.to_string(),
                        Val::Temp(x, i) => format!("unit {i} of {x}"),
                        Val::Const(c) => format!("constant {c:#x}"),
                    })
                    .collect();
                let want = if self.size(t) == 1 {
                    t.to_string()
                } else {
                    format!("unit {i} of {t}")
                };
                errors.push(CheckError {
                    block: b,
                    inst: k,
                    message: format!(
                        "operand {j} reads {place} expecting {want}, found {}",
                        if found.is_empty() {
                            "no known value".to_string()
                        } else {
                            found.join(" or ")
                        }
                    ),
                });
                break;
            }
        }
    }
}

/// Whether `inst` computes what the SSA definition `orig` computes: the same operation on the
/// same immediates and operand values (whose places the reads check), with the same definitions.
fn same_computation(orig: &Inst, inst: &Inst) -> bool {
    orig.op == inst.op
        && orig.imms == inst.imms
        && orig.defs.len() == inst.defs.len()
        && orig
            .defs
            .iter()
            .zip(&inst.defs)
            .all(|(a, b)| a.temp == b.temp)
        && orig.operands.len() == inst.operands.len()
        && orig
            .operands
            .iter()
            .zip(&inst.operands)
            .all(|(a, b)| a.value == b.value)
}

fn push(s: &mut State, loc: Loc, v: Val) {
    let e = s.places.entry(loc).or_default();
    if !e.contains(&v) {
        e.push(v);
    }
}
