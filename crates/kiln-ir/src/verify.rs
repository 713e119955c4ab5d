//! The IR verifier: structure, SSA (single definition, dominance), classes, seed 000's operand
//! flag rules, ties, and registers. It returns every violation it finds, each with its rule name.

use crate::cfg::Cfg;
use crate::dominance::DomTree;
use crate::entity::{Block, Temp};
use crate::function::Function;
use crate::inst::{Inst, Operand, Value};
use crate::opcode::Opcode;
use crate::regs::{Lanes, RegClass};
use std::fmt;

/// One violated rule at a place in the function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub block: Option<Block>,
    pub inst: Option<usize>,
    /// Short rule name, stable for tests: `structure`, `ssa`, `dominance`, `class`, `flags`...
    pub rule: &'static str,
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.block, self.inst) {
            (Some(b), Some(i)) => write!(f, "{b}:{i}: ")?,
            (Some(b), None) => write!(f, "{b}: ")?,
            _ => {}
        }
        write!(f, "[{}] {}", self.rule, self.message)
    }
}

/// Checks every rule; `Ok` or all violations found.
pub fn verify(func: &Function) -> Result<(), Vec<VerifyError>> {
    verify_inner(func, None)
}

/// [`verify`] with the function's CFG already at hand (a pass context's cache); `cfg` must be
/// `Cfg::compute(func)`.
pub fn verify_with_cfg(func: &Function, cfg: &Cfg) -> Result<(), Vec<VerifyError>> {
    verify_inner(func, Some(cfg))
}

/// The rules of instruction `i` of block `b` alone — arity, classes, operand and definition
/// constraints, the register files it reads and writes — without those between instructions
/// (SSA dominance, the CFG, phis and their predecessors): what a pass that changed the classes
/// of a few temps checks of the instructions that define or read them, where the rules between
/// instructions hold by its construction.
pub fn verify_inst(func: &Function, b: Block, i: usize) -> Result<(), Vec<VerifyError>> {
    let mut v = Verifier {
        func,
        errors: Vec::new(),
    };
    if let Some(inst) = func.block(b).insts.get(i) {
        v.inst(b, i, inst);
    }
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(v.errors)
    }
}

fn verify_inner(func: &Function, cfg: Option<&Cfg>) -> Result<(), Vec<VerifyError>> {
    let mut v = Verifier {
        func,
        errors: Vec::new(),
    };
    v.run(cfg);
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(v.errors)
    }
}

struct Verifier<'f> {
    func: &'f Function,
    errors: Vec<VerifyError>,
}

impl Verifier<'_> {
    fn error(
        &mut self,
        block: Option<Block>,
        inst: Option<usize>,
        rule: &'static str,
        message: String,
    ) {
        self.errors.push(VerifyError {
            block,
            inst,
            rule,
            message,
        });
    }

    fn run(&mut self, cached: Option<&Cfg>) {
        let func = self.func;
        let target = &*func.target;
        if target.files().len() > crate::MAX_FILES {
            self.error(
                None,
                None,
                "target",
                format!(
                    "target declares more than {} register files",
                    crate::MAX_FILES
                ),
            );
            return;
        }
        for (i, &c) in func.temps.iter().enumerate() {
            if !c.is_none()
                && let Err(e) = target.check_class(c)
            {
                self.error(None, None, "class", format!("{}: {e}", Temp::new(i)));
            }
        }
        // Per-instruction rules, and definition sites.
        let mut def_site: Vec<Option<(Block, usize)>> = vec![None; func.temps.len()];
        for b in func.block_ids() {
            let insts = &func.block(b).insts;
            if insts.is_empty() {
                self.error(
                    Some(b),
                    None,
                    "structure",
                    "block is empty: it needs a terminator".into(),
                );
            }
            let mut phis_done = false;
            for (i, inst) in insts.iter().enumerate() {
                if inst.op.is_phi() {
                    if phis_done {
                        self.error(
                            Some(b),
                            Some(i),
                            "structure",
                            format!("`{}` after a non-phi instruction", inst.op),
                        );
                    }
                } else {
                    phis_done = true;
                }
                if inst.op.is_terminator() && i + 1 != insts.len() {
                    self.error(
                        Some(b),
                        Some(i),
                        "structure",
                        format!("terminator `{}` is not the last instruction", inst.op),
                    );
                }
                if i + 1 == insts.len() && !inst.op.is_terminator() {
                    self.error(
                        Some(b),
                        Some(i),
                        "structure",
                        "block does not end in a terminator".into(),
                    );
                }
                for d in &inst.defs {
                    match def_site.get_mut(d.temp.index()) {
                        Some(site @ None) => *site = Some((b, i)),
                        Some(Some(_)) if func.allocated => {}
                        Some(Some((pb, pi))) => {
                            let msg = format!(
                                "{} is defined more than once (first at {pb}:{pi})",
                                d.temp
                            );
                            self.error(Some(b), Some(i), "ssa", msg);
                        }
                        None => {
                            self.error(Some(b), Some(i), "ssa", format!("{} has no class", d.temp))
                        }
                    }
                }
                self.inst(b, i, inst);
            }
        }
        if !self.errors.is_empty() {
            return;
        }
        let computed;
        let cfg = match cached {
            Some(cfg) => cfg,
            None => match Cfg::compute(func) {
                Ok(cfg) => {
                    computed = cfg;
                    &computed
                }
                Err(e) => {
                    self.error(Some(e.block), None, "structure", e.message);
                    return;
                }
            },
        };
        for b in func.block_ids().skip(1) {
            if cfg.logical.preds[b.index()].is_empty() {
                self.error(
                    Some(b),
                    None,
                    "cfg",
                    "block has no logical predecessor (only the entry may have none)".into(),
                );
            }
            if cfg.linear.preds[b.index()].is_empty() {
                self.error(
                    Some(b),
                    None,
                    "cfg",
                    "block has no linear predecessor (only the entry may have none)".into(),
                );
            }
        }
        if !self.errors.is_empty() {
            return;
        }
        if func.allocated {
            self.allocated();
        } else {
            self.dominance(cfg, &def_site);
        }
    }

    /// Allocated form: no phis, and every temp operand and definition has its register.
    fn allocated(&mut self) {
        let func = self.func;
        for b in func.block_ids() {
            for (i, inst) in func.block(b).insts.iter().enumerate() {
                if inst.op.is_phi() {
                    self.error(
                        Some(b),
                        Some(i),
                        "allocated",
                        format!("`{}` in an allocated function", inst.op),
                    );
                }
                for (k, op) in inst.operands.iter().enumerate() {
                    if op.temp_id().is_some() && op.reg.is_none() {
                        self.error(
                            Some(b),
                            Some(i),
                            "allocated",
                            format!("operand {k} has no register"),
                        );
                    }
                }
                for (k, d) in inst.defs.iter().enumerate() {
                    if d.reg.is_none() {
                        self.error(
                            Some(b),
                            Some(i),
                            "allocated",
                            format!("definition {k} has no register"),
                        );
                    }
                }
            }
        }
    }

    fn class_of(&self, op: &Operand) -> Option<RegClass> {
        match op.value {
            Value::Temp(t) => self
                .func
                .temps
                .get(t.index())
                .copied()
                .filter(|c| !c.is_none()),
            Value::Undef(c) => Some(c),
            Value::Const(_) => None,
        }
    }

    /// Size in units of an operand (a constant is one unit).
    fn size_of(&self, op: &Operand) -> u32 {
        self.class_of(op).map_or(1, |c| c.size as u32)
    }

    fn inst(&mut self, b: Block, i: usize, inst: &Inst) {
        let func = self.func;
        let target = &*func.target;
        let info = inst.op.info();
        let e = |s: &mut Self, rule, msg: String| s.error(Some(b), Some(i), rule, msg);
        if !info.defs.accepts(inst.defs.len()) {
            e(
                self,
                "arity",
                format!(
                    "`{}` takes {:?} definitions, has {}",
                    inst.op,
                    info.defs,
                    inst.defs.len()
                ),
            );
        }
        if !info.operands.accepts(inst.operands.len()) {
            e(
                self,
                "arity",
                format!(
                    "`{}` takes {:?} operands, has {}",
                    inst.op,
                    info.operands,
                    inst.operands.len()
                ),
            );
        }
        if inst.imms.len() != info.imms as usize {
            e(
                self,
                "arity",
                format!(
                    "`{}` takes {} immediates, has {}",
                    inst.op,
                    info.imms,
                    inst.imms.len()
                ),
            );
        }
        if inst.targets.len() != info.targets as usize {
            e(
                self,
                "arity",
                format!(
                    "`{}` takes {} block targets, has {}",
                    inst.op,
                    info.targets,
                    inst.targets.len()
                ),
            );
        }
        for t in &inst.targets {
            if t.index() >= func.blocks.len() {
                e(self, "structure", format!("target {t} does not exist"));
            }
        }
        if inst.op == Opcode::TextureSample && inst.imms.len() == 2 {
            match crate::sample::SampleMode::of(&inst.imms) {
                None => e(
                    self,
                    "arity",
                    format!("`texture_sample` mode {} is no sample mode", inst.imms[1]),
                ),
                Some(m) if m.operands() != inst.operands.len() => e(
                    self,
                    "arity",
                    format!(
                        "a {} sample with mode {} takes {} operands, has {}",
                        m.kind(),
                        inst.imms[1],
                        m.operands(),
                        inst.operands.len()
                    ),
                ),
                Some(_) => {}
            }
        }
        if inst.flags.divergent && inst.op != Opcode::If {
            e(
                self,
                "flags",
                format!("only `if` can be divergent, not `{}`", inst.op),
            );
        }
        // Operands: temps exist, flag rules of seed 000.
        for (k, op) in inst.operands.iter().enumerate() {
            if let Value::Temp(t) = op.value
                && func.temps.get(t.index()).is_none_or(|c| c.is_none())
            {
                e(self, "ssa", format!("operand {k}: {t} is never defined"));
                continue;
            }
            if let Value::Undef(c) = op.value
                && let Err(m) = target.check_class(c)
            {
                e(self, "class", format!("operand {k}: undef class: {m}"));
            }
            if op.temp_id().is_none() && (op.is_kill() || op.is_first_kill() || op.is_copy_kill()) {
                e(
                    self,
                    "flags",
                    format!("operand {k}: kill flags on a value that is not a temp"),
                );
            }
            if op.is_first_kill() && !op.is_kill() {
                e(
                    self,
                    "flags",
                    format!("operand {k}: first_kill requires kill"),
                );
            }
            if op.is_kill() && op.is_late_kill() && !op.is_first_kill() && !op.is_copy_kill() {
                e(
                    self,
                    "flags",
                    format!(
                        "operand {k}: a killed late_kill operand must be first_kill or copy_kill"
                    ),
                );
            }
            if op.is_copy_kill() && op.is_first_kill() {
                e(
                    self,
                    "flags",
                    format!("operand {k}: copy_kill is incompatible with first_kill"),
                );
            }
            if op.is_copy_kill() && !op.is_kill() {
                e(
                    self,
                    "flags",
                    format!("operand {k}: copy_kill requires kill"),
                );
            }
            let tied = inst.tied_def(k).is_some();
            if tied != op.is_clobbered() {
                let msg = if tied {
                    "is tied to a definition but not clobbered"
                } else {
                    "is clobbered but tied to no definition"
                };
                e(self, "flags", format!("operand {k} {msg}"));
            }
            let in_vector =
                op.is_vector_aligned() || (k > 0 && inst.operands[k - 1].is_vector_aligned());
            if in_vector && !tied && !op.is_late_kill() {
                e(
                    self,
                    "flags",
                    format!(
                        "operand {k} is part of a vector and not tied, so it must be late_kill"
                    ),
                );
            }
            for (reg, what) in [(op.fixed, "fixed"), (op.reg, "assigned")] {
                if let Some(r) = reg {
                    let class = self
                        .class_of(op)
                        .unwrap_or_else(|| target.class(r.file(), 1));
                    if let Err(m) = target.check_reg(r, class) {
                        e(
                            self,
                            "register",
                            format!("operand {k}: {what} register: {m}"),
                        );
                    }
                }
            }
        }
        // late_kill and clobbered on the same temp.
        for (k, op) in inst.operands.iter().enumerate() {
            if let Some(t) = op.temp_id()
                && op.is_late_kill()
                && inst
                    .operands
                    .iter()
                    .any(|o| o.temp_id() == Some(t) && o.is_clobbered())
            {
                e(
                    self,
                    "flags",
                    format!("operand {k}: {t} is both late_kill and clobbered in one instruction"),
                );
            }
        }
        // Definitions: ties and registers.
        for (k, d) in inst.defs.iter().enumerate() {
            let Some(class) = func
                .temps
                .get(d.temp.index())
                .copied()
                .filter(|c| !c.is_none())
            else {
                continue;
            };
            if let Some(t) = d.tied {
                match inst.operands.get(t as usize) {
                    None => e(
                        self,
                        "tie",
                        format!("definition {k} is tied to operand {t}, which does not exist"),
                    ),
                    Some(op) if self.size_of(op) != class.size as u32 => e(
                        self,
                        "tie",
                        format!("definition {k} is tied to operand {t} of a different size"),
                    ),
                    Some(op)
                        if op.temp_id().is_some_and(|o| {
                            func.temps
                                .get(o.index())
                                .is_some_and(|c| c.file != class.file)
                        }) =>
                    {
                        e(
                            self,
                            "tie",
                            format!(
                                "definition {k} is tied to operand {t} of another register file"
                            ),
                        )
                    }
                    Some(_) if inst.defs.iter().filter(|o| o.tied == Some(t)).count() > 1 => e(
                        self,
                        "tie",
                        format!("operand {t} is tied to more than one definition"),
                    ),
                    _ => {}
                }
            }
            for (reg, what) in [(d.fixed, "fixed"), (d.reg, "assigned")] {
                if let Some(r) = reg
                    && let Err(m) = target.check_reg(r, class)
                {
                    e(
                        self,
                        "register",
                        format!("definition {k}: {what} register: {m}"),
                    );
                }
            }
        }
        self.classes(b, i, inst);
    }

    /// Class consistency of special and generic instructions.
    fn classes(&mut self, b: Block, i: usize, inst: &Inst) {
        let func = self.func;
        let files = func.target.files();
        let def_class = |k: usize| {
            inst.defs
                .get(k)
                .and_then(|d| func.temps.get(d.temp.index()).copied())
                .filter(|c| !c.is_none())
        };
        let mut e = |rule, msg: String| {
            self.errors.push(VerifyError {
                block: Some(b),
                inst: Some(i),
                rule,
                message: msg,
            })
        };
        let size = |op: &Operand| match op.value {
            Value::Temp(t) => func
                .temps
                .get(t.index())
                .filter(|c| !c.is_none())
                .map_or(1, |c| c.size as u32),
            Value::Undef(c) => c.size as u32,
            Value::Const(_) => 1,
        };
        let file_of = |op: &Operand| match op.value {
            Value::Temp(t) => func
                .temps
                .get(t.index())
                .filter(|c| !c.is_none())
                .map(|c| c.file),
            Value::Undef(c) => Some(c.file),
            Value::Const(_) => None,
        };
        match inst.op {
            Opcode::CreateVector => {
                if let Some(c) = def_class(0) {
                    let total: u32 = inst.operands.iter().map(size).sum();
                    if total != c.size as u32 {
                        e(
                            "class",
                            format!(
                                "create_vector of {total} units defines a value of {} units",
                                c.size
                            ),
                        );
                    }
                }
            }
            Opcode::SplitVector => {
                if let Some(op) = inst.operands.first() {
                    let total: u32 = (0..inst.defs.len())
                        .filter_map(def_class)
                        .map(|c| c.size as u32)
                        .sum();
                    if total != size(op) {
                        e(
                            "class",
                            format!("split_vector of {} units defines {total} units", size(op)),
                        );
                    }
                }
            }
            Opcode::Mov => {
                if let (Some(c), Some(op)) = (def_class(0), inst.operands.first()) {
                    if size(op) != c.size as u32 {
                        e(
                            "class",
                            "operand of `mov` differs in size from its definition".into(),
                        );
                    }
                    let uniform = |f: crate::FileId| {
                        files
                            .get(f.index())
                            .is_some_and(|f| f.lanes == Lanes::Uniform)
                    };
                    if uniform(c.file) && file_of(op).is_some_and(|f| !uniform(f)) {
                        e(
                            "class",
                            "`mov` defines a uniform-file value from a per-lane operand".into(),
                        );
                    }
                }
            }
            Opcode::ParallelCopy | Opcode::Phi | Opcode::LinearPhi => {
                if inst.op == Opcode::ParallelCopy && inst.defs.len() != inst.operands.len() {
                    e(
                        "arity",
                        "parallel_copy needs as many definitions as operands".into(),
                    );
                }
                for (k, op) in inst.operands.iter().enumerate() {
                    let d = if inst.op == Opcode::ParallelCopy {
                        def_class(k)
                    } else {
                        def_class(0)
                    };
                    if let Some(c) = d
                        && (size(op) != c.size as u32 || file_of(op).is_some_and(|f| f != c.file))
                    {
                        e(
                            "class",
                            format!(
                                "operand {k} of `{}` differs in class from its definition",
                                inst.op
                            ),
                        );
                    }
                }
            }
            Opcode::If if inst.operands.first().is_some_and(|op| size(op) != 1) => {
                e("class", "the condition of `if` must be one unit".into());
            }
            Opcode::If => {}
            Opcode::Input => {
                if let Some(c) = def_class(0)
                    && files
                        .get(c.file.index())
                        .is_some_and(|f| f.lanes == Lanes::Uniform)
                {
                    e(
                        "class",
                        "`input` is per lane and cannot define a uniform-file value".into(),
                    );
                }
            }
            Opcode::Target(t) => {
                // The target's own class requirements.
                let t = t.info();
                let checks = [
                    (t.operand_classes, "operand", inst.operands.len()),
                    (t.def_classes, "definition", inst.defs.len()),
                ];
                for (reqs, what, n) in checks {
                    let Some(reqs) = reqs else { continue };
                    if reqs.len() != n {
                        e(
                            "arity",
                            format!("`{}` takes {} {what}s, has {n}", inst.op, reqs.len()),
                        );
                        continue;
                    }
                    for (k, req) in reqs.iter().enumerate() {
                        let class = if what == "operand" {
                            match inst.operands[k].value {
                                Value::Temp(tmp) => func.temps.get(tmp.index()).copied(),
                                Value::Undef(c) => Some(c),
                                Value::Const(_) => None,
                            }
                        } else {
                            def_class(k)
                        };
                        if let Some(c) = class.filter(|c| !c.is_none())
                            && let Err(m) = req.check(&*func.target, c)
                        {
                            e("class", format!("{what} {k} of `{}`: {m}", inst.op));
                        }
                    }
                }
            }
            op if !op.is_terminator()
                && !matches!(
                    op,
                    Opcode::Spill
                        | Opcode::Reload
                        | Opcode::TextureSample
                        | Opcode::TextureFetch
                        | Opcode::Output
                        | Opcode::Uniform
                ) =>
            {
                // Scalar generic arithmetic.
                for (k, o) in inst.operands.iter().enumerate() {
                    if size(o) != 1 {
                        e(
                            "class",
                            format!("operand {k} of scalar `{}` is {} units", inst.op, size(o)),
                        );
                    }
                }
                if let Some(c) = def_class(0) {
                    if c.size != 1 {
                        e(
                            "class",
                            format!("scalar `{}` defines {} units", inst.op, c.size),
                        );
                    }
                    if files
                        .get(c.file.index())
                        .is_some_and(|f| f.lanes == Lanes::Uniform)
                        && inst.operands.iter().filter_map(file_of).any(|f| {
                            files
                                .get(f.index())
                                .is_some_and(|f| f.lanes == Lanes::PerLane)
                        })
                    {
                        e(
                            "class",
                            format!(
                                "`{}` defines a uniform-file value from a per-lane operand",
                                inst.op
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
    }

    fn dominance(&mut self, cfg: &Cfg, def_site: &[Option<(Block, usize)>]) {
        let func = self.func;
        let logical = DomTree::compute(&cfg.logical);
        let linear = DomTree::compute(&cfg.linear);
        let is_linear = func.linear_temps();
        for b in func.block_ids() {
            for (i, inst) in func.block(b).insts.iter().enumerate() {
                let preds = match inst.op {
                    Opcode::Phi => Some(&cfg.logical.preds[b.index()]),
                    Opcode::LinearPhi => Some(&cfg.linear.preds[b.index()]),
                    _ => None,
                };
                if inst.op == Opcode::Phi
                    && is_linear[inst.defs[0].temp.index()]
                    && cfg.logical.preds[b.index()] != cfg.linear.preds[b.index()]
                {
                    let msg = format!(
                        "`phi` defines linear {} where the logical and linear predecessors differ (use `linear_phi`)",
                        inst.defs[0].temp
                    );
                    self.error(Some(b), Some(i), "phi", msg);
                }
                if let Some(preds) = preds
                    && preds.len() != inst.operands.len()
                {
                    let msg = format!(
                        "`{}` has {} operands for {} predecessors",
                        inst.op,
                        inst.operands.len(),
                        preds.len()
                    );
                    self.error(Some(b), Some(i), "phi", msg);
                    continue;
                }
                for (k, op) in inst.operands.iter().enumerate() {
                    let Some(t) = op.temp_id() else { continue };
                    let Some((db, di)) = def_site[t.index()] else {
                        self.error(
                            Some(b),
                            Some(i),
                            "ssa",
                            format!("operand {k}: {t} is never defined"),
                        );
                        continue;
                    };
                    let dom = if is_linear[t.index()] {
                        &linear
                    } else {
                        &logical
                    };
                    let ok = match preds {
                        Some(preds) => dom.dominates(db, preds[k]),
                        None if db == b => di < i,
                        None => dom.dominates(db, b),
                    };
                    // Temporal divergence (NIR's divergence analysis): lanes leave a divergent
                    // loop at different iterations, so a linear value defined inside it is not
                    // uniform after it; it may leave only through a phi of the exit.
                    let use_block = preds.map_or(b, |p| p[k]);
                    if is_linear[t.index()]
                        && let Some(l) = cfg
                            .enclosing_loops(db)
                            .find(|&l| cfg.loops[l].divergent && !cfg.loops[l].contains(use_block))
                    {
                        let msg = format!(
                            "operand {k}: linear {t} is defined in the divergent loop at {} and used after it, where lanes that left at different iterations disagree (pass it through a phi of the exit)",
                            cfg.loops[l].header
                        );
                        self.error(Some(b), Some(i), "divergence", msg);
                    }
                    if !ok {
                        let place = match preds {
                            Some(p) => format!("the end of {}", p[k]),
                            None => "its use".into(),
                        };
                        let cfgname = if is_linear[t.index()] {
                            "linear"
                        } else {
                            "logical"
                        };
                        let msg = format!(
                            "operand {k}: the definition of {t} at {db}:{di} does not dominate {place} ({cfgname} CFG)"
                        );
                        self.error(Some(b), Some(i), "dominance", msg);
                    }
                }
            }
        }
    }
}
