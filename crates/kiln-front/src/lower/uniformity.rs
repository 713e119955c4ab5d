//! After lowering: make uniform what the divergence analysis proves uniform
//! ([`kiln_analysis::Divergence`], NIR's rules), as ACO places such values in SGPRs: uniform
//! `if`s become `if.uniform`, uniform values move to the uniform file `s`, and temporal
//! divergence gets per-lane copies. The design is in `docs/front.md` ("Uniformity").

use crate::FrontError;
use kiln_analysis::Divergence;
use kiln_ir::{
    Block, Cfg, Def, Function, GenericTarget, Inst, Lanes, Opcode, Operand, RegClass, Temp,
};
use rustc_hash::FxHashMap as HashMap;

/// What the pass changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UniformityStats {
    pub ifs_made_uniform: usize,
    pub ifs_made_divergent: usize,
    pub temps_made_uniform: usize,
    pub temps_made_per_lane: usize,
    pub phis_made_linear: usize,
    pub exit_copies: usize,
}

fn is_uniform_file(func: &Function, c: RegClass) -> bool {
    func.target
        .files()
        .get(c.file.index())
        .is_some_and(|f| f.lanes == Lanes::Uniform)
}

/// Runs the pass on a lowered function of the generic target.
pub fn make_uniform(func: &mut Function) -> Result<UniformityStats, FrontError> {
    let internal = |m: String| FrontError::Internal(format!("uniformity: {m}"));
    let mut stats = UniformityStats::default();
    let cfg = Cfg::compute(func).map_err(|e| internal(e.message))?;
    let dv = Divergence::compute(func, &cfg);

    // 1. Branches, both ways: a branch the lowering thought uniform is divergent when its
    // condition leaves a divergent loop.
    for (k, info) in cfg.ifs.iter().enumerate() {
        let term = func
            .block_mut(info.head)
            .insts
            .last_mut()
            .expect("an if block ends in its if");
        if term.flags.divergent != dv.if_divergent[k] {
            term.flags.divergent = dv.if_divergent[k];
            if dv.if_divergent[k] {
                stats.ifs_made_divergent += 1;
            } else {
                stats.ifs_made_uniform += 1;
            }
        }
    }
    let cfg2 = Cfg::compute(func).map_err(|e| internal(e.message))?;

    // Definitions and users.
    let n = func.temps.len();
    let mut def_op: Vec<Option<(Block, usize)>> = vec![None; n];
    let mut users: Vec<Vec<Temp>> = vec![Vec::new(); n];
    // Read by anything but a per-lane phi, or by nothing.
    let mut only_phi_users = vec![true; n];
    for b in func.block_ids() {
        for (i, inst) in func.block(b).insts.iter().enumerate() {
            for d in &inst.defs {
                def_op[d.temp.index()] = Some((b, i));
            }
            for t in inst.used_temps() {
                users[t.index()].extend(inst.defs.iter().map(|d| d.temp));
                if inst.op != Opcode::Phi {
                    only_phi_users[t.index()] = false;
                }
            }
        }
    }
    // Temps read after a divergent loop they are defined in (temporal divergence).
    let mut escapes = vec![false; n];
    for b in func.block_ids() {
        for inst in &func.block(b).insts {
            for (k, op) in inst.operands.iter().enumerate() {
                let Some(t) = op.temp_id() else { continue };
                let at = match inst.op {
                    Opcode::Phi => cfg2.logical.preds[b.index()][k],
                    Opcode::LinearPhi => cfg2.linear.preds[b.index()][k],
                    _ => b,
                };
                if dv.leaves_divergent_loop(t, at) {
                    escapes[t.index()] = true;
                }
            }
        }
    }

    // 2. Candidates, then the closure over operands.
    let mut uniform = vec![false; n];
    for (t, slot) in uniform.iter_mut().enumerate() {
        let Some((b, i)) = def_op[t] else { continue };
        let inst = &func.block(b).insts[i];
        let ok_op = match inst.op {
            Opcode::Input
            | Opcode::TextureSample
            | Opcode::TextureFetch
            | Opcode::Reload
            | Opcode::Fddx
            | Opcode::Fddy
            | Opcode::CreateVector
            | Opcode::SplitVector
            | Opcode::ParallelCopy => false,
            Opcode::Phi => cfg2.logical.preds[b.index()] == cfg2.linear.preds[b.index()],
            // Stays linear only where its predecessors did not change.
            Opcode::LinearPhi => cfg.linear.preds[b.index()] == cfg2.linear.preds[b.index()],
            // A copy read after the divergent loop it is in is the per-lane copy that keeps
            // each lane's last iteration: it stays per lane.
            Opcode::Mov => !escapes[t],
            _ => inst.defs.len() == 1,
        };
        *slot = ok_op && func.class(Temp::new(t)).size == 1 && dv.is_uniform(Temp::new(t));
    }
    let operands_ok = |func: &Function, uniform: &[bool], t: usize| -> bool {
        let (b, i) = def_op[t].expect("defined");
        func.block(b).insts[i]
            .used_temps()
            .all(|o| uniform[o.index()])
    };
    let mut work: Vec<usize> = (0..n).filter(|&t| uniform[t]).collect();
    while let Some(t) = work.pop() {
        if uniform[t] && !operands_ok(func, &uniform, t) {
            uniform[t] = false;
            work.extend(users[t].iter().map(|u| u.index()).filter(|&u| uniform[u]));
        }
    }

    // Copies that feed only per-lane phis are the per-lane copies of uniform phi operands:
    // they stay per lane (otherwise step 4 would copy them again).
    for t in 0..n {
        if uniform[t]
            && !users[t].is_empty()
            && only_phi_users[t]
            && users[t].iter().all(|u| !uniform[u.index()])
            && def_op[t].is_some_and(|(b, i)| func.block(b).insts[i].op == Opcode::Mov)
        {
            uniform[t] = false;
        }
    }

    // Linear phis that become per-lane: their operands follow the linear predecessors as they
    // were, which must have been the logical ones (the lowering makes linear phis only there).
    for b in func.block_ids() {
        for inst in func.block(b).insts.iter().take_while(|i| i.op.is_phi()) {
            let t = inst.defs[0].temp.index();
            if inst.op == Opcode::LinearPhi
                && !uniform[t]
                && cfg.logical.preds[b.index()] != cfg.linear.preds[b.index()]
            {
                return Err(internal(format!(
                    "linear phi {} at {b} is not uniform where the CFGs differ",
                    inst.defs[0].temp
                )));
            }
        }
    }

    // 3. Temporal divergence: linear values read after a divergent loop go through a copy.
    let will_be_linear = |func: &Function, t: usize| -> bool {
        uniform[t] || def_op[t].is_some_and(|(b, i)| func.block(b).insts[i].writes_all_lanes())
    };
    let v1 = func.target.class(GenericTarget::V, 1);
    let s1 = func.target.class(GenericTarget::S, 1);
    let mut copy_of: HashMap<Temp, Temp> = HashMap::default();
    let mut escaping: Vec<(Block, usize, usize, Temp)> = Vec::new();
    for b in func.block_ids() {
        for (i, inst) in func.block(b).insts.iter().enumerate() {
            for (k, op) in inst.operands.iter().enumerate() {
                let Some(t) = op.temp_id().filter(|t| escapes[t.index()]) else {
                    continue;
                };
                let at = match inst.op {
                    Opcode::Phi => cfg2.logical.preds[b.index()][k],
                    Opcode::LinearPhi => cfg2.linear.preds[b.index()][k],
                    _ => b,
                };
                if will_be_linear(func, t.index()) && dv.leaves_divergent_loop(t, at) {
                    escaping.push((b, i, k, t));
                }
            }
        }
    }
    for &(_, _, _, t) in &escaping {
        copy_of.entry(t).or_insert_with(|| {
            let size = func.class(t).size;
            let class = func.target.class(GenericTarget::V, size);
            func.new_temp(class)
        });
    }
    for &(b, i, k, t) in &escaping {
        func.block_mut(b).insts[i].operands[k] = Operand::temp(copy_of[&t]);
    }
    stats.exit_copies = copy_of.len();
    // Insertions after each definition, applied per block from the back.
    let mut inserts: Vec<(Block, usize, Inst)> = Vec::new();
    for (&t, &c) in &copy_of {
        let (b, i) = def_op[t.index()].expect("defined");
        let at = if func.block(b).insts[i].op.is_phi() {
            func.block(b).phi_count()
        } else {
            i + 1
        };
        let mut mov = Inst::new(Opcode::Mov);
        mov.defs.push(Def::new(c));
        mov.operands.push(Operand::temp(t));
        inserts.push((b, at, mov));
    }

    // Classes and phi kinds.
    for t in 0..n {
        if def_op[t].is_none() {
            continue;
        }
        let c = func.class(Temp::new(t));
        if uniform[t] && !is_uniform_file(func, c) {
            func.temps[t] = s1;
            stats.temps_made_uniform += 1;
        } else if !uniform[t] && is_uniform_file(func, c) && !will_be_linear(func, t) {
            func.temps[t] = func.target.class(GenericTarget::V, c.size);
            stats.temps_made_per_lane += 1;
        } else if !uniform[t] && is_uniform_file(func, c) {
            // Written in all lanes (a uniform word) but not uniform here: keep its file; it has
            // no operands, so nothing per-lane feeds it.
        }
    }
    for b in (0..func.blocks.len()).map(Block::new) {
        let nphi = func.block(b).phi_count();
        for i in 0..nphi {
            let inst = &mut func.block_mut(b).insts[i];
            let t = inst.defs[0].temp.index();
            if inst.op == Opcode::Phi && uniform[t] {
                inst.op = Opcode::LinearPhi;
                stats.phis_made_linear += 1;
            } else if inst.op == Opcode::LinearPhi && !uniform[t] {
                inst.op = Opcode::Phi;
            }
        }
    }

    // 4. Per-lane phis read per-lane copies of uniform operands, made at the end of the
    // predecessor (one copy per predecessor and value).
    let mut at_end: HashMap<(Block, Temp), Temp> = HashMap::default();
    let mut end_inserts: Vec<(Block, Inst)> = Vec::new();
    for b in (0..func.blocks.len()).map(Block::new) {
        let nphi = func.block(b).phi_count();
        for i in 0..nphi {
            if func.block(b).insts[i].op != Opcode::Phi {
                continue;
            }
            for k in 0..func.block(b).insts[i].operands.len() {
                let Some(t) = func.block(b).insts[i].operands[k].temp_id() else {
                    continue;
                };
                if !is_uniform_file(func, func.class(t)) {
                    continue;
                }
                let p = cfg2.logical.preds[b.index()][k];
                let c = match at_end.get(&(p, t)) {
                    Some(&c) => c,
                    None => {
                        let c = func.new_temp(v1);
                        let mut mov = Inst::new(Opcode::Mov);
                        mov.defs.push(Def::new(c));
                        mov.operands.push(Operand::temp(t));
                        end_inserts.push((p, mov));
                        at_end.insert((p, t), c);
                        c
                    }
                };
                func.block_mut(b).insts[i].operands[k] = Operand::temp(c);
            }
        }
    }
    for (p, mov) in end_inserts {
        let insts = &mut func.block_mut(p).insts;
        let at = insts.len() - 1;
        inserts.push((p, at, mov));
    }
    // Apply insertions: per block, by position (stable for equal positions).
    inserts.sort_by_key(|(b, at, _)| (*b, *at));
    let mut by_block: HashMap<Block, Vec<(usize, Inst)>> = HashMap::default();
    for (b, at, inst) in inserts {
        by_block.entry(b).or_default().push((at, inst));
    }
    for (b, list) in by_block {
        let old = std::mem::take(&mut func.block_mut(b).insts);
        let mut out = Vec::with_capacity(old.len() + list.len());
        let mut list = list.into_iter().peekable();
        for (i, inst) in old.into_iter().enumerate() {
            while list.peek().is_some_and(|(at, _)| *at == i) {
                out.push(list.next().expect("peeked").1);
            }
            out.push(inst);
        }
        out.extend(list.map(|(_, inst)| inst));
        func.block_mut(b).insts = out;
    }
    Ok(stats)
}

/// Branches that decide loop exits, counted (uniform, divergent) two ways.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExitBranches {
    /// `if`s ending a loop's header block that control a `break` of that loop (below): the
    /// condition of `for`/`while` loops (naga's `if cond {} else { break }` at the top of the
    /// body). Single-pass loops (the lowering's loops around switches and early returns, whose
    /// latch is reached only past an `if` on a constant that breaks) are left out.
    pub header: (usize, usize),
    /// Every `if` that controls a `break` of the loop it is in: the innermost `if` on a
    /// non-constant condition enclosing the `break` (the lowering's `if`s on a constant around
    /// jumps are skipped) — header branches, `break if`, breaks in the body, switch cases and
    /// the early-return checks.
    pub all: (usize, usize),
    /// Loops (one-trip loops left out) left by all lanes at once, and divergent loops (some
    /// `break` divergent: liveness extends per-lane values leaving them across the loop).
    pub loops: (usize, usize),
}

impl std::ops::Add for ExitBranches {
    type Output = ExitBranches;
    fn add(self, o: ExitBranches) -> ExitBranches {
        ExitBranches {
            header: (self.header.0 + o.header.0, self.header.1 + o.header.1),
            all: (self.all.0 + o.all.0, self.all.1 + o.all.1),
            loops: (self.loops.0 + o.loops.0, self.loops.1 + o.loops.1),
        }
    }
}

/// Counts the loop-exit branches of a function ([`ExitBranches`]).
pub fn loop_exit_branches(func: &Function) -> ExitBranches {
    let Ok(cfg) = Cfg::compute(func) else {
        return ExitBranches::default();
    };
    let n = func.blocks.len();
    // Innermost enclosing if of each block (a sweep in layout order).
    let mut by_then: Vec<Option<usize>> = vec![None; n];
    for (k, i) in cfg.ifs.iter().enumerate() {
        by_then[i.then_start.index()] = Some(k);
    }
    let mut counted = vec![false; cfg.ifs.len()];
    let constant_cond: Vec<bool> = cfg
        .ifs
        .iter()
        .map(|i| {
            func.block(i.head)
                .terminator()
                .is_some_and(|t| t.operands[0].temp_id().is_none())
        })
        .collect();
    let mut stack: Vec<usize> = Vec::new();
    for (b, (then_of, block)) in by_then.iter().zip(&func.blocks).enumerate() {
        while stack.last().is_some_and(|&k| cfg.ifs[k].endif.index() <= b) {
            stack.pop();
        }
        if let Some(k) = *then_of {
            stack.push(k);
        }
        let is_break = block.terminator().is_some_and(|t| t.op == Opcode::Break);
        // The controlling `if`: the innermost one on a non-constant condition (the lowering
        // wraps jumps that must not end a region in `if` on a constant).
        let controlling = stack
            .iter()
            .rev()
            .find(|&&k| constant_cond.get(k) != Some(&true));
        if let (true, Some(&k)) = (is_break, controlling) {
            let head = cfg.ifs[k].head;
            if cfg.loop_of[head.index()] == cfg.loop_of[b] {
                counted[k] = true;
            }
        }
    }
    let mut out = ExitBranches::default();
    for l in cfg.loops.iter().filter(|l| !one_trip(func, &cfg, l)) {
        if l.divergent {
            out.loops.1 += 1;
        } else {
            out.loops.0 += 1;
        }
    }
    for (_, info) in cfg.ifs.iter().enumerate().filter(|(k, _)| counted[*k]) {
        let term = func.block(info.head).terminator().expect("if");
        if term.operands[0].temp_id().is_none() {
            continue;
        }
        let at_header = cfg
            .loops
            .iter()
            .any(|l| l.header == info.head && !one_trip(func, &cfg, l));
        let bump = |c: &mut (usize, usize)| {
            if info.divergent {
                c.1 += 1;
            } else {
                c.0 += 1;
            }
        };
        bump(&mut out.all);
        if at_header {
            bump(&mut out.header);
        }
    }
    out
}

/// A loop the lowering made to be run once: the latch's only logical predecessor ends in an
/// `if` on a constant whose then side breaks.
fn one_trip(func: &Function, cfg: &Cfg, l: &kiln_ir::LoopInfo) -> bool {
    match cfg.logical.preds[l.latch.index()].as_slice() {
        [p] => func.block(*p).terminator().is_some_and(|t| {
            t.op == Opcode::If
                && t.operands[0].temp_id().is_none()
                && func
                    .block(t.targets[0])
                    .terminator()
                    .is_some_and(|x| x.op == Opcode::Break)
        }),
        _ => false,
    }
}
