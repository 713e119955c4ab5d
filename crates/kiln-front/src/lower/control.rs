//! Statements: structured control flow, SSA merges (phis), variable stores, inlined calls.

use super::{Defs, FnCx, LoopFrame, LoopKind, Lowerer, Ptr, RetMode, Root, Val, Var, types};
use crate::FrontError;
use kiln_ir::{Block, Inst, Opcode, Operand, Temp, Value};
use naga::{Handle, Statement};
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeSet;

/// The else side of a structured if: told whether it must reach the endif.
type Side<'m, 'f, 'a> =
    dyn FnMut(&mut Lowerer<'m, 'f>, &mut FnCx<'m>, bool) -> Result<(), FrontError> + 'a;

/// How a naga jump leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Jump {
    Break,
    Continue,
    Return,
}

impl<'m, 'f> Lowerer<'m, 'f> {
    /// Lowers a function body with its arguments; returns the value of its `Return`, if any.
    pub(super) fn function_body(
        &mut self,
        f: &'m naga::Function,
        info: &'m naga::valid::FunctionInfo,
        args: Vec<Val>,
    ) -> Result<Option<Vec<Operand>>, FrontError> {
        if self.call_depth > 64 {
            return Err(FrontError::unsupported("calls nested more than 64 deep"));
        }
        let mut cx = FnCx {
            f,
            info,
            args,
            cache: Default::default(),
            locals: Vec::new(),
            ret: RetMode::Tail,
            tail_value: None,
        };
        for (_, local) in f.local_variables.iter() {
            let size = types::comp_count(self.m, local.ty)?;
            let init = match local.init {
                Some(e) => self.comps(&mut cx, e)?,
                None => vec![Operand::constant(0); size as usize],
            };
            let v = self.new_var(size, init);
            cx.locals.push(v);
        }
        let early_return = has_early_return(&f.body);
        if !early_return {
            self.block(&mut cx, &f.body)?;
            return Ok(cx.tail_value);
        }
        // A one-trip loop around the body: `Return` stores its value and breaks out.
        let value = match &f.result {
            Some(r) => {
                let n = types::comp_count(self.m, r.ty)?;
                Some(self.new_var(n, vec![Operand::constant(0); n as usize]))
            }
            None => None,
        };
        let flag = self.new_var(1, vec![Operand::constant(0)]);
        cx.ret = RetMode::Loop { value, flag };
        self.open_loop(LoopKind::Return, None, None, Some(&BTreeSet::new()));
        self.block(&mut cx, &f.body)?;
        self.finish_one_trip(&mut cx)?;
        self.close_loop()?;
        Ok(value.map(|v| self.defs[&v].clone()))
    }

    /// Lowers a block in the current region; stops after a jump (the rest is dead).
    fn block(&mut self, cx: &mut FnCx<'m>, block: &'m naga::Block) -> Result<bool, FrontError> {
        for (stmt, span) in block.span_iter() {
            let ended = self.stmt(cx, stmt).map_err(|e| with_span(e, *span))?;
            if ended {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Bounds the lowering's recursion: inlining stacks the nesting of callees on their call
    /// sites, and the lowering adds regions of its own (one-trip loops, wrapped jumps), so
    /// the bound on open regions is a multiple of the source bound.
    fn check_depth(&self) -> Result<(), FrontError> {
        let max = crate::nesting::MAX_NESTING;
        if self.regions.len() > 3 * max {
            return Err(FrontError::unsupported(format!(
                "nesting deeper than {max} (after inlining calls)"
            )));
        }
        Ok(())
    }

    /// Lowers a block as a region of its own.
    fn region(
        &mut self,
        cx: &mut FnCx<'m>,
        block: &'m naga::Block,
        must_fall_through: bool,
    ) -> Result<(), FrontError> {
        self.check_depth()?;
        self.regions.push(must_fall_through);
        let r = self.block(cx, block);
        self.regions.pop();
        r.map(|_| ())
    }

    /// One statement; `true` when it ends the block (a jump or `Kill`).
    fn stmt(&mut self, cx: &mut FnCx<'m>, stmt: &'m Statement) -> Result<bool, FrontError> {
        match stmt {
            Statement::Emit(range) => {
                for h in range.clone() {
                    self.expr(cx, h)?;
                }
            }
            Statement::Block(b) => return self.block(cx, b),
            Statement::If {
                condition,
                accept,
                reject,
            } => self.if_(cx, *condition, accept, reject)?,
            Statement::Loop {
                body,
                continuing,
                break_if,
            } => self.loop_(cx, body, continuing, *break_if)?,
            Statement::Switch { selector, cases } => self.switch(cx, *selector, cases)?,
            Statement::Break => {
                self.jump(cx, Jump::Break)?;
                return Ok(true);
            }
            Statement::Continue => {
                self.jump(cx, Jump::Continue)?;
                return Ok(true);
            }
            Statement::Return { value } => {
                let v = match value {
                    Some(e) => Some(self.comps(cx, *e)?),
                    None => None,
                };
                match cx.ret {
                    RetMode::Tail => cx.tail_value = v,
                    RetMode::Loop { value, flag } => {
                        if let (Some(var), Some(v)) = (value, v) {
                            self.defs.insert(var, v);
                        }
                        self.defs.insert(flag, vec![Operand::constant(u32::MAX)]);
                        self.jump(cx, Jump::Return)?;
                    }
                }
                return Ok(true);
            }
            Statement::Kill => {
                self.b.push(Inst::new(Opcode::Discard));
                return Ok(true);
            }
            Statement::Store { pointer, value } => {
                let Val::Ptr(ptr) = self.expr(cx, *pointer)? else {
                    return Err(FrontError::Internal("store through a non-pointer".into()));
                };
                let v = self.comps(cx, *value)?;
                self.store(&ptr, v)?;
            }
            Statement::Call {
                function,
                arguments,
                result,
            } => {
                let mut args = Vec::new();
                for a in arguments {
                    args.push(self.expr(cx, *a)?);
                }
                let callee = &self.m.functions[*function];
                let info = &self.info[*function];
                self.call_depth += 1;
                let value = self.function_body(callee, info, args);
                self.call_depth -= 1;
                if let (Some(r), Some(v)) = (result, value?) {
                    cx.cache.insert(*r, Val::Comps(v));
                }
            }
            Statement::ControlBarrier(_) | Statement::MemoryBarrier(_) => {
                return Err(FrontError::unsupported("barriers"));
            }
            Statement::ImageStore { .. } => return Err(FrontError::unsupported("image stores")),
            Statement::Atomic { .. } | Statement::ImageAtomic { .. } => {
                return Err(FrontError::unsupported("atomics"));
            }
            Statement::WorkGroupUniformLoad { .. } => {
                return Err(FrontError::unsupported("workgroup memory"));
            }
            Statement::RayQuery { .. } | Statement::RayPipelineFunction(_) => {
                return Err(FrontError::unsupported("ray tracing"));
            }
            Statement::SubgroupBallot { .. }
            | Statement::SubgroupGather { .. }
            | Statement::SubgroupCollectiveOperation { .. } => {
                return Err(FrontError::unsupported("subgroup operations"));
            }
            Statement::CooperativeStore { .. } => {
                return Err(FrontError::unsupported("cooperative matrices"));
            }
        }
        Ok(false)
    }

    fn if_(
        &mut self,
        cx: &mut FnCx<'m>,
        cond: Handle<naga::Expression>,
        accept: &'m naga::Block,
        reject: &'m naga::Block,
    ) -> Result<(), FrontError> {
        let c = self.comps(cx, cond)?[0];
        let mut then_side = |lw: &mut Self, cx: &mut FnCx<'m>| lw.region(cx, accept, false);
        let mut else_side = |lw: &mut Self, cx: &mut FnCx<'m>, fall_through: bool| {
            lw.region(cx, reject, fall_through)
        };
        let else_side: Option<&mut Side<'m, 'f, '_>> = if reject.is_empty() {
            None
        } else {
            Some(&mut else_side)
        };
        self.structured_if(cx, c, &mut then_side, else_side)
    }

    /// `if c { then } else { else }` with the SSA merge at the endif. The else side is told
    /// whether it must reach the endif (when the then side left by a jump).
    fn structured_if(
        &mut self,
        cx: &mut FnCx<'m>,
        c: Operand,
        then_side: &mut dyn FnMut(&mut Self, &mut FnCx<'m>) -> Result<(), FrontError>,
        else_side: Option<&mut Side<'m, 'f, '_>>,
    ) -> Result<(), FrontError> {
        let divergent = !self.is_uniform(&c);
        let before = self.defs.clone();
        let head = self.b.current_block();
        let mut scope = self.b.begin_if(c, divergent);
        then_side(self, cx)?;
        let then_jumped = self.b.is_terminated();
        let then_end = (self.b.current_block(), self.defs.clone());
        let mut incoming = Vec::new();
        let mut else_jumped = false;
        match else_side {
            None => incoming.push((head, before.clone())),
            Some(side) => {
                self.defs = before.clone();
                self.b.begin_else(&mut scope);
                side(self, cx, then_jumped)?;
                else_jumped = self.b.is_terminated();
                if !else_jumped {
                    incoming.push((self.b.current_block(), self.defs.clone()));
                }
            }
        }
        if !then_jumped {
            incoming.push(then_end);
        }
        incoming.sort_by_key(|(b, _)| *b);
        let endif = self.b.end_if(scope);
        // Logical and linear predecessors agree only when neither side jumped.
        let uniform_merge = !divergent && !then_jumped && !else_jumped;
        self.defs = self.merge(endif, &incoming, uniform_merge, &before);
        Ok(())
    }

    /// Merges incoming definitions (in predecessor order) at `block`: a phi per component
    /// whose incoming values differ. Variables missing in some predecessor are out of scope.
    fn merge(
        &mut self,
        block: Block,
        incoming: &[(Block, Defs)],
        uniform: bool,
        fallback: &Defs,
    ) -> Defs {
        let Some((_, first)) = incoming.first() else {
            return fallback.clone();
        };
        let mut out = Defs::new();
        for (var, comps) in first {
            if !incoming.iter().all(|(_, d)| d.contains_key(var)) {
                continue;
            }
            let mut merged = Vec::with_capacity(comps.len());
            for c in 0..comps.len() {
                let vals: Vec<Operand> = incoming.iter().map(|(_, d)| d[var][c]).collect();
                if vals.iter().all(|v| *v == vals[0]) {
                    merged.push(vals[0]);
                    continue;
                }
                merged.push(Operand::temp(self.phi(block, incoming, &vals, uniform)));
            }
            out.insert(*var, merged);
        }
        out
    }

    /// A phi at `block` over `vals` (one per predecessor): a linear phi of uniform values where
    /// allowed, otherwise a per-lane phi (uniform operands copied to per-lane registers at the
    /// end of their predecessor).
    fn phi(
        &mut self,
        block: Block,
        preds: &[(Block, Defs)],
        vals: &[Operand],
        uniform: bool,
    ) -> Temp {
        if uniform && vals.iter().all(|v| self.is_uniform(v)) {
            let c = self.s1();
            return self.b.phi(block, Opcode::LinearPhi, c, vals.to_vec());
        }
        let ops: Vec<Operand> = preds
            .iter()
            .zip(vals)
            .map(|((p, _), v)| self.per_lane_at_end(*p, *v))
            .collect();
        let c = self.v1();
        self.b.phi(block, Opcode::Phi, c, ops)
    }

    /// A per-lane copy of `op` placed before the terminator of `block`.
    fn per_lane_at_end(&mut self, block: Block, op: Operand) -> Operand {
        match op.value {
            Value::Temp(t) if !self.is_uniform(&op) => Operand::temp(t),
            Value::Temp(_) => {
                let c = self.v1();
                let t = self.b.func.new_temp(c);
                let mut inst = Inst::new(Opcode::Mov);
                inst.defs.push(kiln_ir::Def::new(t));
                inst.operands.push(op);
                let insts = &mut self.b.func.block_mut(block).insts;
                let at = insts.len() - 1;
                insts.insert(at, inst);
                Operand::temp(t)
            }
            _ => op,
        }
    }

    /// Opens a kiln loop with a phi per component of every live variable in `assigned` (all
    /// live variables when `None`), created in one batch in the new, empty header. Single-pass
    /// loops pass an empty set: their back edge is never taken.
    fn open_loop(
        &mut self,
        kind: LoopKind,
        continuing: Option<&'m naga::Block>,
        break_if: Option<Handle<naga::Expression>>,
        assigned: Option<&BTreeSet<Var>>,
    ) {
        let pre = self.defs.clone();
        let preheader = self.b.current_block();
        let scope = self.b.begin_loop();
        let mut header_phis = Vec::new();
        let c = self.v1();
        let vars: Vec<Var> = match assigned {
            Some(set) => set
                .iter()
                .copied()
                .filter(|v| self.defs.contains_key(v))
                .collect(),
            None => self.defs.keys().copied().collect(),
        };
        for var in vars {
            let n = self.defs[&var].len();
            for k in 0..n {
                let t = self.b.phi(scope.header, Opcode::Phi, c, Vec::new());
                header_phis.push((var, k, t));
                self.defs.get_mut(&var).expect("live variable")[k] = Operand::temp(t);
            }
        }
        self.loops.push(LoopFrame {
            kind,
            scope,
            preheader,
            pre,
            header_phis,
            back: Vec::new(),
            breaks: Vec::new(),
            continuing,
            break_if,
            continue_flag: None,
        });
        // The loop body's last block must end in `continue`: top-level jumps are wrapped.
        self.regions.push(true);
    }

    /// Closes the innermost loop: its latch (already terminated), header phis, exit merge.
    fn close_loop(&mut self) -> Result<(), FrontError> {
        self.regions.pop();
        let frame = self.loops.pop().expect("an open loop");
        let exit = self.b.end_loop_terminated(frame.scope);
        if frame.breaks.is_empty() {
            return Err(FrontError::unsupported("loop without a way out"));
        }
        // Header phi operands: the preheader, then the back edges in block order.
        let mut back = frame.back;
        back.sort_by_key(|(b, _)| *b);
        let header = kiln_ir::Block(frame.preheader.0 + 1);
        if frame.kind == LoopKind::Naga {
            // Variables without a header phi must come back unchanged (the assignment scan
            // found every store of the loop).
            for (var, comps) in &frame.pre {
                if frame.header_phis.iter().any(|(v, _, _)| v == var) {
                    continue;
                }
                if back
                    .iter()
                    .any(|(_, d)| d.get(var).is_some_and(|c| c != comps))
                {
                    return Err(FrontError::Internal(format!(
                        "a loop assigns variable {var} that its assignment scan missed"
                    )));
                }
            }
        }
        let index: HashMap<Temp, usize> = self
            .b
            .func
            .block(header)
            .insts
            .iter()
            .enumerate()
            .take_while(|(_, i)| i.op.is_phi())
            .map(|(k, i)| (i.defs[0].temp, k))
            .collect();
        for &(var, k, t) in &frame.header_phis {
            let mut ops = vec![self.per_lane_at_end(frame.preheader, frame.pre[&var][k])];
            for (blk, defs) in &back {
                let v = defs.get(&var).map_or(Operand::constant(0), |d| d[k]);
                ops.push(self.per_lane_at_end(*blk, v));
            }
            let at = *index.get(&t).ok_or_else(|| {
                FrontError::Internal(format!("header phi {t} of variable {var} is lost"))
            })?;
            self.b.func.block_mut(header).insts[at].operands = ops.into();
        }
        let mut breaks = frame.breaks;
        breaks.sort_by_key(|(b, _)| *b);
        self.defs = self.merge(exit, &breaks, false, &frame.pre);
        self.remove_trivial_phis(kiln_ir::Block(frame.preheader.0 + 1), exit);
        Ok(())
    }

    /// Braun et al.'s trivial phis (all operands the phi itself or one value) are replaced by
    /// that value, in rounds: each round finds every trivial phi of the loop header and exit,
    /// then rewrites the loop's blocks once (uses of these phis cannot come before the header),
    /// so the cost is the loop's size per round, not per phi.
    fn remove_trivial_phis(&mut self, header: Block, exit: Block) {
        loop {
            let mut subst: HashMap<Temp, Operand> = HashMap::default();
            for blk in [header, exit] {
                for inst in self
                    .b
                    .func
                    .block(blk)
                    .insts
                    .iter()
                    .take_while(|i| i.op.is_phi())
                {
                    let me = inst.defs[0].temp;
                    let mut same: Option<Operand> = None;
                    let mut trivial = true;
                    for op in &inst.operands {
                        if op.temp_id() == Some(me) || same.is_some_and(|s| s.value == op.value) {
                            continue;
                        }
                        if same.is_some() {
                            trivial = false;
                            break;
                        }
                        same = Some(Operand::from(op.value));
                    }
                    if trivial {
                        subst.insert(me, same.unwrap_or(Operand::constant(0)));
                    }
                }
            }
            if subst.is_empty() {
                return;
            }
            // Resolve chains (a trivial phi whose value is another trivial phi).
            let keys: Vec<Temp> = subst.keys().copied().collect();
            for k in keys {
                let mut v = subst[&k];
                let mut hops = 0;
                while let Some(t) = v.temp_id().filter(|t| subst.contains_key(t) && *t != k) {
                    v = subst[&t];
                    hops += 1;
                    if hops > subst.len() {
                        break;
                    }
                }
                if v.temp_id() == Some(k) {
                    v = Operand::constant(0);
                }
                subst.insert(k, v);
            }
            for blk in [header, exit] {
                self.b
                    .func
                    .block_mut(blk)
                    .insts
                    .retain(|i| !(i.op.is_phi() && subst.contains_key(&i.defs[0].temp)));
            }
            self.replace(&subst, header);
        }
    }

    /// Applies a substitution to every use at or after block `from`, and to the lowering's state.
    fn replace(&mut self, subst: &HashMap<Temp, Operand>, from: Block) {
        let swap = |op: &mut Operand| {
            if let Some(w) = op.temp_id().and_then(|t| subst.get(&t)) {
                op.value = w.value;
            }
        };
        for block in &mut self.b.func.blocks[from.index()..] {
            for inst in &mut block.insts {
                inst.operands.iter_mut().for_each(swap);
            }
        }
        for comps in self.defs.values_mut() {
            comps.iter_mut().for_each(swap);
        }
        for frame in &mut self.loops {
            for comps in frame.pre.values_mut() {
                comps.iter_mut().for_each(swap);
            }
            for (_, d) in frame.back.iter_mut().chain(frame.breaks.iter_mut()) {
                for comps in d.values_mut() {
                    comps.iter_mut().for_each(swap);
                }
            }
        }
    }

    fn loop_(
        &mut self,
        cx: &mut FnCx<'m>,
        body: &'m naga::Block,
        continuing: &'m naga::Block,
        break_if: Option<Handle<naga::Expression>>,
    ) -> Result<(), FrontError> {
        self.check_depth()?;
        let assigned = self.assigned_vars(cx, &[body, continuing]);
        self.open_loop(
            LoopKind::Naga,
            Some(continuing),
            break_if,
            assigned.as_ref(),
        );
        self.block(cx, body)?;
        if !self.b.is_terminated() {
            self.continue_path(cx)?;
        }
        self.close_loop()?;
        self.propagate_return(cx, body)
    }

    /// After a loop or switch that may return: lanes that returned leave the enclosing loop too.
    fn propagate_return(
        &mut self,
        cx: &mut FnCx<'m>,
        body: &naga::Block,
    ) -> Result<(), FrontError> {
        let RetMode::Loop { flag, .. } = cx.ret else {
            return Ok(());
        };
        if !contains_return(body) {
            return Ok(());
        }
        let f = self.defs[&flag][0];
        let divergent = !self.is_uniform(&f);
        let head = self.b.current_block();
        let before = self.defs.clone();
        let scope = self.b.begin_if(f, divergent);
        self.regions.push(false);
        self.jump_to_frame(cx, Jump::Return, None)?;
        self.regions.pop();
        let endif = self.b.end_if(scope);
        self.defs = self.merge(endif, &[(head, before.clone())], false, &before);
        Ok(())
    }

    /// `continuing`, `break_if`, then `continue` to the header.
    fn continue_path(&mut self, cx: &mut FnCx<'m>) -> Result<(), FrontError> {
        let frame = self
            .loops
            .iter()
            .rposition(|f| f.kind == LoopKind::Naga)
            .expect("inside a loop");
        let (continuing, break_if) = (self.loops[frame].continuing, self.loops[frame].break_if);
        if let Some(c) = continuing {
            // The continuing block is emitted at every continue site: evaluate it afresh.
            forget_emitted(cx, c);
            if let Some(cond) = break_if {
                cx.cache.remove(&cond);
            }
            self.regions.push(false);
            let r = self.block(cx, c);
            self.regions.pop();
            r?;
        }
        if let Some(cond) = break_if {
            let c = self.comps(cx, cond)?[0];
            let divergent = !self.is_uniform(&c);
            let head = self.b.current_block();
            let before = self.defs.clone();
            let scope = self.b.begin_if(c, divergent);
            self.regions.push(false);
            self.jump_to_frame(cx, Jump::Break, Some(frame))?;
            self.regions.pop();
            let endif = self.b.end_if(scope);
            self.defs = self.merge(endif, &[(head, before.clone())], false, &before);
        }
        let at = self.b.current_block();
        self.loops[frame].back.push((at, self.defs.clone()));
        let scope = &self.loops[frame].scope;
        self.b.continue_(scope);
        Ok(())
    }

    /// A naga jump at the current point; wrapped in `if true` where the region must go on.
    fn jump(&mut self, cx: &mut FnCx<'m>, kind: Jump) -> Result<(), FrontError> {
        if *self.regions.last().unwrap_or(&false) {
            let head = self.b.current_block();
            let before = self.defs.clone();
            let scope = self.b.begin_if(Operand::constant(u32::MAX), false);
            self.regions.push(false);
            self.jump_inner(cx, kind)?;
            self.regions.pop();
            let endif = self.b.end_if(scope);
            self.defs = self.merge(endif, &[(head, before.clone())], false, &before);
            Ok(())
        } else {
            self.jump_inner(cx, kind)
        }
    }

    fn jump_inner(&mut self, cx: &mut FnCx<'m>, kind: Jump) -> Result<(), FrontError> {
        match kind {
            Jump::Continue => {
                let Some(frame) = self.loops.last() else {
                    return Err(FrontError::Internal("continue outside a loop".into()));
                };
                match (frame.kind, frame.continue_flag) {
                    (LoopKind::Naga, _) => self.continue_path(cx),
                    // Inside a switch: leave it with the flag set; the continue follows it.
                    (LoopKind::Switch, Some(flag)) => {
                        self.defs.insert(flag, vec![Operand::constant(u32::MAX)]);
                        self.jump_to_frame(cx, Jump::Break, None)
                    }
                    _ => Err(FrontError::Internal(
                        "continue in a one-trip loop without a flag".into(),
                    )),
                }
            }
            Jump::Break | Jump::Return => self.jump_to_frame(cx, kind, None),
        }
    }

    /// `break` out of the innermost kiln loop (or `frame`), recording the definitions.
    fn jump_to_frame(
        &mut self,
        _cx: &mut FnCx<'m>,
        _kind: Jump,
        frame: Option<usize>,
    ) -> Result<(), FrontError> {
        let f = frame.unwrap_or(
            self.loops
                .len()
                .checked_sub(1)
                .ok_or_else(|| FrontError::Internal("break outside a loop".into()))?,
        );
        let at = self.b.current_block();
        self.loops[f].breaks.push((at, self.defs.clone()));
        let scope = &mut self.loops[f].scope;
        self.b.break_(scope);
        Ok(())
    }

    /// `switch` as a compare chain inside a one-trip loop.
    fn switch(
        &mut self,
        cx: &mut FnCx<'m>,
        selector: Handle<naga::Expression>,
        cases: &'m [naga::SwitchCase],
    ) -> Result<(), FrontError> {
        let sel = self.comps(cx, selector)?[0];
        // Each group of values runs a sequence of case bodies: its own and, while a case falls
        // through, the next ones (bodies are lowered again for every group that reaches them).
        // Empty fall-through cases join the values of the case that follows.
        let mut groups: Vec<(Vec<Option<u32>>, Vec<&'m naga::Block>)> = Vec::new();
        let mut pending: Vec<Option<u32>> = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            let v = match case.value {
                naga::SwitchValue::I32(v) => Some(v as u32),
                naga::SwitchValue::U32(v) => Some(v),
                naga::SwitchValue::Default => None,
            };
            pending.push(v);
            if case.fall_through && case.body.is_empty() && i + 1 < cases.len() {
                continue;
            }
            let mut bodies = vec![&case.body];
            let mut k = i;
            while cases[k].fall_through && k + 1 < cases.len() {
                k += 1;
                bodies.push(&cases[k].body);
            }
            groups.push((std::mem::take(&mut pending), bodies));
        }
        // The groups exclude each other, so their order in the chain is free, except that the
        // default (which may stand anywhere in naga's list) must come last: the chain's final
        // arm takes every value no earlier arm matched.
        if let Some(d) = groups.iter().position(|(vs, _)| vs.contains(&None)) {
            let default = groups.remove(d);
            groups.push(default);
        }
        let continues = cases.iter().any(|c| contains_continue(&c.body));
        let continue_flag = continues.then(|| self.new_var(1, vec![Operand::constant(0)]));
        self.open_loop(LoopKind::Switch, None, None, Some(&BTreeSet::new()));
        self.loops
            .last_mut()
            .expect("the switch loop")
            .continue_flag = continue_flag;
        self.case_chain(cx, sel, &groups)?;
        self.finish_one_trip(cx)?;
        self.close_loop()?;
        if let Some(body) = cases.iter().map(|c| &c.body).find(|b| contains_return(b)) {
            self.propagate_return(cx, body)?;
        }
        if let Some(flag) = continue_flag {
            // Lanes that took a `continue` in the switch continue the enclosing loop now.
            let f = self.defs[&flag][0];
            let divergent = !self.is_uniform(&f);
            let head = self.b.current_block();
            let before = self.defs.clone();
            let scope = self.b.begin_if(f, divergent);
            self.regions.push(false);
            self.jump_inner(cx, Jump::Continue)?;
            self.regions.pop();
            let endif = self.b.end_if(scope);
            self.defs = self.merge(endif, &[(head, before.clone())], false, &before);
        }
        Ok(())
    }

    /// Ends a one-trip loop's body: `if true { break }`, then the latch's `continue` (never
    /// taken, but kiln's loops end in one).
    fn finish_one_trip(&mut self, cx: &mut FnCx<'m>) -> Result<(), FrontError> {
        if !self.b.is_terminated() {
            self.jump(cx, Jump::Break)?;
        }
        let frame = self.loops.len() - 1;
        let at = self.b.current_block();
        self.loops[frame].back.push((at, self.defs.clone()));
        self.b.continue_(&self.loops[frame].scope);
        Ok(())
    }

    fn case_chain(
        &mut self,
        cx: &mut FnCx<'m>,
        sel: Operand,
        groups: &[(Vec<Option<u32>>, Vec<&'m naga::Block>)],
    ) -> Result<(), FrontError> {
        let Some(((values, bodies), rest)) = groups.split_first() else {
            return Ok(());
        };
        if values.contains(&None) || rest.is_empty() {
            // The default (or the last case) takes whatever is left.
            if values.contains(&None) || !values.is_empty() {
                let last_specific = !values.contains(&None);
                if last_specific {
                    return self.guarded_case(cx, sel, values, bodies, &[]);
                }
                return self.case_bodies(cx, bodies, true);
            }
            return Ok(());
        }
        self.guarded_case(cx, sel, values, bodies, rest)
    }

    /// A case's bodies in sequence, as one region; each is lowered afresh (a body that a
    /// case falls into is lowered for every case that reaches it).
    fn case_bodies(
        &mut self,
        cx: &mut FnCx<'m>,
        bodies: &[&'m naga::Block],
        must_fall_through: bool,
    ) -> Result<(), FrontError> {
        self.check_depth()?;
        self.regions.push(must_fall_through);
        let mut r = Ok(false);
        for body in bodies {
            forget_emitted(cx, body);
            r = self.block(cx, body);
            if !matches!(r, Ok(false)) {
                break;
            }
        }
        self.regions.pop();
        r.map(|_| ())
    }

    /// `if sel ∈ values { body } else { rest of the chain }`.
    fn guarded_case(
        &mut self,
        cx: &mut FnCx<'m>,
        sel: Operand,
        values: &[Option<u32>],
        bodies: &[&'m naga::Block],
        rest: &[(Vec<Option<u32>>, Vec<&'m naga::Block>)],
    ) -> Result<(), FrontError> {
        let mut cond: Option<Operand> = None;
        for v in values.iter().flatten() {
            let eq = self.op(Opcode::Ieq, &[sel, Operand::constant(*v)]);
            cond = Some(match cond {
                None => eq,
                Some(c) => self.op(Opcode::Ior, &[c, eq]),
            });
        }
        let cond = cond.unwrap_or(Operand::constant(0));
        let mut then_side = |lw: &mut Self, cx: &mut FnCx<'m>| lw.case_bodies(cx, bodies, false);
        let mut else_side = |lw: &mut Self, cx: &mut FnCx<'m>, fall_through: bool| {
            lw.regions.push(fall_through);
            let r = lw.case_chain(cx, sel, rest);
            lw.regions.pop();
            r
        };
        let else_side: Option<&mut Side<'m, 'f, '_>> = if rest.is_empty() {
            None
        } else {
            Some(&mut else_side)
        };
        self.structured_if(cx, cond, &mut then_side, else_side)
    }

    /// Writes `v` through a pointer.
    fn store(&mut self, ptr: &Ptr, v: Vec<Operand>) -> Result<(), FrontError> {
        let Root::Var(var) = ptr.root else {
            return Err(FrontError::unsupported("stores to uniform memory"));
        };
        let n = v.len() as u32;
        if ptr.dynamic.is_empty() {
            let comps = self
                .defs
                .get_mut(&var)
                .ok_or_else(|| FrontError::Internal("store to a dead variable".into()))?;
            for (k, x) in v.into_iter().enumerate() {
                comps[ptr.offset as usize + k] = x;
            }
            return Ok(());
        }
        for (off, hit) in self.dynamic_cases(&ptr.dynamic, false)? {
            let hit = hit.ok_or_else(|| FrontError::Internal("dynamic case".into()))?;
            for k in 0..n {
                let at = (ptr.offset + off + k) as usize;
                let old = self.defs[&var][at];
                let new = self.op(Opcode::Sel, &[hit, v[k as usize], old]);
                self.defs.get_mut(&var).expect("variable")[at] = new;
            }
        }
        Ok(())
    }
}

/// Drops the cached values of every expression a block (and its nested blocks) evaluates.
fn forget_emitted(cx: &mut FnCx<'_>, block: &naga::Block) {
    for s in block.iter() {
        match s {
            Statement::Emit(range) => {
                for h in range.clone() {
                    cx.cache.remove(&h);
                }
            }
            Statement::Block(b) => forget_emitted(cx, b),
            Statement::If { accept, reject, .. } => {
                forget_emitted(cx, accept);
                forget_emitted(cx, reject);
            }
            Statement::Loop {
                body, continuing, ..
            } => {
                forget_emitted(cx, body);
                forget_emitted(cx, continuing);
            }
            Statement::Switch { cases, .. } => {
                cases.iter().for_each(|c| forget_emitted(cx, &c.body))
            }
            Statement::Call {
                result: Some(r), ..
            } => {
                cx.cache.remove(r);
            }
            _ => {}
        }
    }
}

fn with_span(e: FrontError, span: naga::Span) -> FrontError {
    match e {
        FrontError::Unsupported { what, span: None } => FrontError::Unsupported {
            what,
            span: span.to_range(),
        },
        other => other,
    }
}

/// A `Return` anywhere but as the body's last top-level statement.
fn has_early_return(body: &naga::Block) -> bool {
    let n = body.len();
    body.iter().enumerate().any(|(k, s)| match s {
        Statement::Return { .. } => k + 1 != n,
        other => stmt_contains_return(other),
    })
}

/// A naga `continue` of the enclosing loop (not inside a nested loop).
fn contains_continue(body: &naga::Block) -> bool {
    body.iter().any(|s| match s {
        Statement::Continue => true,
        Statement::Block(b) => contains_continue(b),
        Statement::If { accept, reject, .. } => {
            contains_continue(accept) || contains_continue(reject)
        }
        Statement::Switch { cases, .. } => cases.iter().any(|c| contains_continue(&c.body)),
        _ => false,
    })
}

pub(super) fn contains_return(body: &naga::Block) -> bool {
    body.iter().any(stmt_contains_return)
}

fn stmt_contains_return(s: &Statement) -> bool {
    match s {
        Statement::Return { .. } => true,
        Statement::Block(b) => contains_return(b),
        Statement::If { accept, reject, .. } => contains_return(accept) || contains_return(reject),
        Statement::Loop {
            body, continuing, ..
        } => contains_return(body) || contains_return(continuing),
        Statement::Switch { cases, .. } => cases.iter().any(|c| contains_return(&c.body)),
        _ => false,
    }
}
