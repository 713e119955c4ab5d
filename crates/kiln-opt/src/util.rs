//! Helpers shared by the passes: availability, use counts, operand rewriting.

use kiln_ir::{Block, Function, Inst, Lanes, Opcode, Operand, OperandFlags, Temp, Value};

/// Whether `inst` reads other lanes than its own: derivatives, a target's cross-lane operations,
/// and samples with implicit derivatives (their level of detail). What it gives depends on which
/// lanes run, so it is reused only where the same lanes run (its own block).
pub fn reads_other_lanes(inst: &Inst) -> bool {
    matches!(inst.op, Opcode::Fddx | Opcode::Fddy)
        || matches!(inst.op, Opcode::Target(t) if t.0.cross_lane.is_some())
        || (inst.op == Opcode::TextureSample
            && kiln_ir::sample::SampleMode::of(&inst.imms)
                .is_some_and(|m| m.implicit_derivatives()))
}

/// Whether `t` lives in a uniform register file.
pub fn is_uniform_file(func: &Function, t: Temp) -> bool {
    let c = func.class(t);
    !c.is_none()
        && func
            .target
            .files()
            .get(c.file.index())
            .is_some_and(|f| f.lanes == Lanes::Uniform)
}

/// Replaces what `op` reads by `value`, dropping the kill flags liveness wrote for the old value
/// (the next liveness run recomputes them).
pub fn set_value(op: &mut Operand, value: Value) {
    op.value = value;
    op.flags.set(OperandFlags::KILL, false);
    op.flags.set(OperandFlags::FIRST_KILL, false);
    op.flags.set(OperandFlags::COPY_KILL, false);
}

/// Whether an operand may read any value of the same size: no fixed register, no tie, not part
/// of a vector of operands (those constrain the class of what they read).
pub fn is_free_operand(inst: &Inst, k: usize) -> bool {
    let op = &inst.operands[k];
    // A target opcode that requires its operands' classes keeps them (class narrowing).
    let class_bound = inst
        .op
        .target_info()
        .is_some_and(|t| t.operand_classes.is_some());
    !class_bound
        && op.fixed.is_none()
        && !op.is_clobbered()
        && !op.is_vector_aligned()
        && (k == 0 || !inst.operands[k - 1].is_vector_aligned())
        && inst.tied_def(k).is_none()
}

/// Applies `subst` (temp → value) to every operand, following chains; returns how many operands
/// changed. Only operands for which `allowed(inst, k, new)` holds are rewritten.
pub fn substitute(
    func: &mut Function,
    subst: &[Option<Value>],
    mut allowed: impl FnMut(&Function, Block, usize, usize, Value) -> bool,
) -> usize {
    let resolve = |mut v: Value| {
        let mut steps = 0;
        while let Value::Temp(t) = v {
            match subst.get(t.index()).copied().flatten() {
                Some(n) if steps < 64 => {
                    v = n;
                    steps += 1;
                }
                _ => break,
            }
        }
        v
    };
    let mut changed = 0;
    for b in 0..func.blocks.len() {
        for i in 0..func.blocks[b].insts.len() {
            for k in 0..func.blocks[b].insts[i].operands.len() {
                let old = func.blocks[b].insts[i].operands[k].value;
                let new = resolve(old);
                if new != old && allowed(func, Block::new(b), i, k, new) {
                    set_value(&mut func.blocks[b].insts[i].operands[k], new);
                    changed += 1;
                }
            }
        }
    }
    changed
}

/// Where a temp may be read: its definition dominates the place in the temp's own CFG (logical
/// for per-lane temps, linear for linear ones: uniform-file, all-lanes, `linear_phi`), and a
/// linear temp defined in a divergent loop is not read after it (temporal divergence, the
/// verifier's `divergence` rule).
pub struct Avail<'a> {
    pub cfg: &'a kiln_ir::Cfg,
    pub logical: &'a kiln_ir::DomTree,
    pub linear_dom: &'a kiln_ir::DomTree,
    facts: std::sync::Arc<kiln_analysis::DefSites>,
}

impl<'a> Avail<'a> {
    /// Availability in `func` as it is now (its definition sites found again).
    pub fn new(
        func: &Function,
        cfg: &'a kiln_ir::Cfg,
        dom: &'a (kiln_ir::DomTree, kiln_ir::DomTree),
    ) -> Avail<'a> {
        Avail::with(
            std::sync::Arc::new(kiln_analysis::DefSites::compute(func)),
            cfg,
            dom,
        )
    }

    /// Availability from definition sites found already (`Context::def_sites`).
    pub fn with(
        facts: std::sync::Arc<kiln_analysis::DefSites>,
        cfg: &'a kiln_ir::Cfg,
        dom: &'a (kiln_ir::DomTree, kiln_ir::DomTree),
    ) -> Avail<'a> {
        Avail {
            cfg,
            logical: &dom.0,
            linear_dom: &dom.1,
            facts,
        }
    }

    /// The definition sites this availability reads.
    pub fn def_sites(&self) -> &std::sync::Arc<kiln_analysis::DefSites> {
        &self.facts
    }

    /// Where each temp is defined.
    pub fn sites(&self) -> &[Option<(Block, usize)>] {
        &self.facts.sites
    }

    /// Whether each temp is linear.
    pub fn linear(&self) -> &[bool] {
        &self.facts.linear
    }

    /// Whether `t` may be read by an instruction of block `b` placed after `t`'s definition
    /// when both are in the same block.
    pub fn reaches(&self, t: Temp, b: Block) -> bool {
        let Some(Some((db, _))) = self.sites().get(t.index()) else {
            return false;
        };
        let linear = self.linear()[t.index()];
        let dom = if linear {
            self.linear_dom
        } else {
            self.logical
        };
        dom.dominates(*db, b)
            && !(linear
                && self
                    .cfg
                    .enclosing_loops(*db)
                    .any(|l| self.cfg.loops[l].divergent && !self.cfg.loops[l].contains(b)))
    }

    /// Whether every read of `d` may read `x` instead: same class, same linearity, and `x`
    /// reaches `d`'s definition (so it reaches everything `d`'s definition reaches).
    pub fn can_replace(&self, func: &Function, d: Temp, x: Temp) -> bool {
        let (Some(Some((db, di))), Some(Some((xb, xi)))) =
            (self.sites().get(d.index()), self.sites().get(x.index()))
        else {
            return false;
        };
        d != x
            && func.class(d) == func.class(x)
            && self.linear()[d.index()] == self.linear()[x.index()]
            && self.reaches(x, *db)
            && (xb != db || xi < di)
    }
}

/// Helpers of the passes' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use kiln_interp::{Env, compare, run_simt};
    use kiln_ir::Function;

    /// `after` agrees with `before` on 16 lanes whose input 0 is `lane × step`, the other
    /// inputs and uniforms drawn from each of `seeds`: in SSA mode, and in SIMT mode on
    /// registers (each temp its own).
    pub fn agrees_on_16_lanes(before: &Function, after: &Function, step: f32, seeds: u64) {
        for seed in 0..seeds {
            let mut env = Env::for_function(before, 16, seed);
            env.inputs
                .insert(0, (0..16).map(|l| (l as f32 * step).to_bits()).collect());
            compare(before, after, &env).unwrap();
            let alloc = kiln_interp::out_of_ssa::reference_assignment(after).unwrap();
            let want = kiln_interp::run_ssa(before, &env).unwrap();
            let got = run_simt(&alloc, &env).unwrap();
            kiln_interp::diff::compare_outputs(&want, &got).unwrap();
        }
    }
}
