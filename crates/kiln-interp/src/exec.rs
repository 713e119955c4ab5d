//! The wave executor shared by both modes: it walks the linear CFG with an execution mask, so
//! that every lane follows the logical CFG (checked at every block entry) while the wave runs
//! both sides of divergent ifs and a loop until every lane has left (`docs/semantics.md`).

use crate::storage::Storage;
use crate::texture::{self, Texture};
use crate::{Env, InterpError, Outputs};
use kiln_ir::sample::{Dim, SampleMode};
use kiln_ir::semantics::eval_scalar;
use kiln_ir::{Block, Cfg, Function, Inst, Opcode, Operand, Value};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};

/// The units an instruction reads or writes in one lane.
type Units = SmallVec<[Option<u32>; 8]>;

/// Last executed instructions kept for error reports and differential traces.
const TRACE: usize = 12;

enum Frame {
    If {
        restore: u64,
        else_mask: u64,
        then_end: Block,
        else_end: Option<Block>,
    },
    Loop {
        idx: usize,
        break_mask: u64,
        continue_mask: u64,
    },
}

pub struct Machine<'a, S: Storage> {
    func: &'a Function,
    cfg: Cow<'a, Cfg>,
    env: &'a Env,
    storage: S,
    linear: Vec<bool>,
    lanes: usize,
    exec: u64,
    discarded: u64,
    lane_block: Vec<Option<Block>>,
    wave_prev: Option<Block>,
    frames: Vec<Frame>,
    steps: u64,
    outputs: BTreeMap<u32, Vec<Option<Vec<Option<u32>>>>>,
    spill: BTreeMap<u32, Vec<Option<u32>>>,
    /// Operands of logical phis, taken per lane when the lane leaves the predecessor (a lane
    /// may reach the phi's block much later than it left, while others iterate).
    pending: BTreeMap<kiln_ir::Temp, Vec<Option<u32>>>,
    textures: BTreeMap<u32, Texture>,
    /// Last executed instructions: block, index, execution mask.
    trace: VecDeque<(Block, usize, u64)>,
    /// Divergent if regions by their last blocks: (then end, else end) → if index.
    region_end: Vec<Option<usize>>,
}

fn bit(lane: usize) -> u64 {
    1u64 << lane
}

impl<'a, S: Storage> Machine<'a, S> {
    /// A machine for `func`; `cfg`, when given, must be `Cfg::compute(func)` (a pass context's
    /// cache), else it is computed.
    pub fn new(
        func: &'a Function,
        cfg: Option<&'a Cfg>,
        env: &'a Env,
        storage: S,
    ) -> Result<Self, InterpError> {
        if env.lanes == 0 || env.lanes > 64 {
            return Err(InterpError::Setup(format!(
                "lane count {} is outside 1..=64",
                env.lanes
            )));
        }
        let cfg = match cfg {
            Some(cfg) => Cow::Borrowed(cfg),
            None => Cow::Owned(
                Cfg::compute(func)
                    .map_err(|e| InterpError::Setup(format!("{}: {}", e.block, e.message)))?,
            ),
        };
        let mut region_end = vec![None; func.blocks.len()];
        for (k, i) in cfg.ifs.iter().enumerate().filter(|(_, i)| i.divergent) {
            region_end[i.else_start.index() - 1] = Some(k);
            if i.else_start < i.endif {
                region_end[i.endif.index() - 1] = Some(k);
            }
        }
        let lanes = env.lanes;
        Ok(Machine {
            func,
            linear: func.linear_temps(),
            cfg,
            env,
            storage,
            lanes,
            exec: if lanes == 64 {
                u64::MAX
            } else {
                (1 << lanes) - 1
            },
            discarded: 0,
            lane_block: vec![None; lanes],
            wave_prev: None,
            frames: Vec::new(),
            steps: 0,
            outputs: BTreeMap::new(),
            spill: BTreeMap::new(),
            pending: BTreeMap::new(),
            textures: env.textures.clone(),
            trace: VecDeque::new(),
            region_end,
        })
    }

    fn err(&self, b: Block, i: usize, message: impl Into<String>) -> InterpError {
        InterpError::At {
            block: b,
            inst: i,
            message: message.into(),
            trace: self.trace_text(),
        }
    }

    /// The trace as text: `bb3:2 exec=0xff %5:v1 = fadd %3, %4`.
    fn trace_text(&self) -> Vec<String> {
        let func = self.func;
        self.trace
            .iter()
            .map(|&(b, i, exec)| {
                format!(
                    "{b}:{i} exec={exec:#x} {}",
                    kiln_ir::text::print_inst(func, &func.block(b).insts[i])
                )
            })
            .collect()
    }

    /// Runs to `return` and returns the last instructions executed.
    pub fn run_with_trace(mut self) -> Result<Vec<String>, InterpError> {
        let mut b = Block(0);
        while let Some(next) = self.block(b)? {
            self.wave_prev = Some(b);
            b = next;
        }
        Ok(self.trace_text())
    }

    /// Runs to `return`.
    pub fn run(mut self) -> Result<Outputs, InterpError> {
        let mut b = Block(0);
        while let Some(next) = self.block(b)? {
            self.wave_prev = Some(b);
            b = next;
        }
        let mut outputs = std::mem::take(&mut self.outputs);
        for lanes in outputs.values_mut() {
            for (l, v) in lanes.iter_mut().enumerate() {
                if self.discarded & bit(l) != 0 {
                    *v = None;
                }
            }
        }
        Ok(Outputs {
            lanes: self.lanes,
            slots: outputs,
            discarded: (0..self.lanes)
                .map(|l| self.discarded & bit(l) != 0)
                .collect(),
        })
    }

    fn active(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.lanes).filter(|&l| self.exec & bit(l) != 0)
    }

    /// Index in the frame stack of the innermost loop.
    fn innermost_loop(&self) -> Option<usize> {
        self.frames
            .iter()
            .rposition(|f| matches!(f, Frame::Loop { .. }))
    }

    /// Lanes of `mask` still running: not discarded, not waiting at a break or continue.
    fn alive(&self, mask: u64) -> u64 {
        let waiting = match self.innermost_loop().map(|k| &self.frames[k]) {
            Some(Frame::Loop {
                break_mask,
                continue_mask,
                ..
            }) => break_mask | continue_mask,
            _ => 0,
        };
        mask & !self.discarded & !waiting
    }

    /// Executes block `b`; returns the next block, or `None` at `return`.
    fn block(&mut self, b: Block) -> Result<Option<Block>, InterpError> {
        let insts = &self.func.block(b).insts;
        // Every active lane arrives along a logical edge.
        if b.0 != 0 {
            for l in self.active().collect::<Vec<_>>() {
                let from = self.lane_block[l];
                if !from.is_some_and(|p| self.cfg.logical.preds[b.index()].contains(&p)) {
                    return Err(self.err(b, 0, format!("lane {l} arrives from {from:?}, not a logical predecessor (walker error)")));
                }
            }
        }
        let nphi = self.func.block(b).phi_count();
        self.phis(b, &insts[..nphi])?;
        for (i, inst) in insts.iter().enumerate().skip(nphi) {
            self.steps += 1;
            if self.steps > self.env.step_limit {
                return Err(InterpError::StepLimit {
                    steps: self.env.step_limit,
                    trace: self.trace_text(),
                });
            }
            if self.trace.len() == TRACE {
                self.trace.pop_front();
            }
            self.trace.push_back((b, i, self.exec));
            if inst.op.is_terminator() {
                for l in self.active().collect::<Vec<_>>() {
                    self.lane_block[l] = Some(b);
                    self.take_phi_operands(b, i, inst, l)?;
                }
                let next = self.terminator(b, i, inst)?;
                return Ok(next);
            }
            self.storage.executed(inst, self.exec);
            self.inst(b, i, inst)?;
        }
        Err(self.err(b, insts.len(), "block has no terminator"))
    }

    fn read(&self, op: &Operand, lane: usize, unit: usize) -> Result<Option<u32>, String> {
        match op.value {
            Value::Const(c) => Ok(if unit == 0 { Some(c) } else { None }),
            Value::Undef(_) => Ok(None),
            Value::Temp(t) => self.storage.read(t, op.reg, lane, unit),
        }
    }

    fn size(&self, op: &Operand) -> usize {
        match op.value {
            Value::Temp(t) => self.func.class(t).size as usize,
            Value::Undef(c) => c.size as usize,
            Value::Const(_) => 1,
        }
    }

    /// Lanes an instruction writes: every lane for all-lanes writes and uniform values.
    fn write_mask(&self, inst: &Inst) -> u64 {
        let all = inst.writes_all_lanes()
            || inst.op == Opcode::LinearPhi
            || inst.defs.iter().any(|d| self.linear[d.temp.index()]);
        if all {
            if self.lanes == 64 {
                u64::MAX
            } else {
                (1 << self.lanes) - 1
            }
        } else {
            self.exec
        }
    }

    /// Records, for lane `l` leaving `b`, the operands of the phis of its logical successor.
    fn take_phi_operands(
        &mut self,
        b: Block,
        i: usize,
        term: &Inst,
        l: usize,
    ) -> Result<(), InterpError> {
        let succ = match term.op {
            Opcode::Return => return Ok(()),
            Opcode::If => match self
                .read(&term.operands[0], l, 0)
                .map_err(|m| self.err(b, i, m))?
            {
                Some(0) => term.targets[1],
                Some(_) => term.targets[0],
                None => return Ok(()), // the branch itself reports the undefined condition
            },
            _ => term.targets[0],
        };
        let Some(k) = self.cfg.logical.preds[succ.index()]
            .iter()
            .position(|&p| p == b)
        else {
            return Ok(());
        };
        for phi in self
            .func
            .block(succ)
            .insts
            .iter()
            .take_while(|x| x.op.is_phi())
            .filter(|x| x.op == Opcode::Phi)
        {
            let op = &phi.operands[k];
            let size = self.size(op);
            let mut vals = Vec::with_capacity(size);
            for u in 0..size {
                vals.push(self.read(op, l, u).map_err(|m| self.err(b, i, m))?);
            }
            let slot = self
                .pending
                .entry(phi.defs[0].temp)
                .or_insert_with(|| vec![None; size * self.lanes]);
            for (u, v) in vals.into_iter().enumerate() {
                slot[u * self.lanes + l] = v;
            }
        }
        Ok(())
    }

    fn phis(&mut self, b: Block, phis: &[Inst]) -> Result<(), InterpError> {
        let mut writes = Vec::new();
        for (i, inst) in phis.iter().enumerate() {
            self.storage.executed(inst, self.exec);
            let mask = self.write_mask(inst);
            if inst.op == Opcode::Phi {
                let d = inst.defs[0];
                let size = self.func.class(d.temp).size as usize;
                let pending = self.pending.get(&d.temp);
                for l in (0..self.lanes).filter(|&l| mask & bit(l) != 0) {
                    for u in 0..size {
                        let v = pending.and_then(|p| p[u * self.lanes + l]);
                        writes.push((d.temp, d.reg, l, u, v));
                    }
                }
                continue;
            }
            for l in (0..self.lanes).filter(|&l| mask & bit(l) != 0) {
                let (preds, from) = (&self.cfg.linear.preds[b.index()], self.wave_prev);
                let Some(k) = from.and_then(|p| preds.iter().position(|&x| x == p)) else {
                    return Err(self.err(
                        b,
                        i,
                        format!("the wave arrives from {from:?}, not a linear predecessor"),
                    ));
                };
                let op = &inst.operands[k];
                for u in 0..self.size(op) {
                    let v = self.read(op, l, u).map_err(|m| self.err(b, i, m))?;
                    writes.push((inst.defs[0].temp, inst.defs[0].reg, l, u, v));
                }
            }
        }
        for (t, r, l, u, v) in writes {
            self.storage
                .write(t, r, l, u, v)
                .map_err(|m| self.err(b, 0, m))?;
        }
        Ok(())
    }

    /// Operand units of one lane; an error when an active lane reads an undefined value in an
    /// instruction that computes (copies pass undefined values on).
    fn lane_operands(
        &self,
        b: Block,
        i: usize,
        inst: &Inst,
        lane: usize,
        strict: bool,
    ) -> Result<Units, InterpError> {
        let mut vals = Units::new();
        for (k, op) in inst.operands.iter().enumerate() {
            for u in 0..self.size(op) {
                let v = self.read(op, lane, u).map_err(|m| self.err(b, i, m))?;
                if v.is_none() && strict {
                    return Err(self.err(
                        b,
                        i,
                        format!("lane {lane} reads an undefined value (operand {k})"),
                    ));
                }
                vals.push(v);
            }
        }
        Ok(vals)
    }

    fn inst(&mut self, b: Block, i: usize, inst: &Inst) -> Result<(), InterpError> {
        let mask = self.write_mask(inst);
        let copy_like = matches!(
            inst.op,
            Opcode::Mov
                | Opcode::ParallelCopy
                | Opcode::CreateVector
                | Opcode::SplitVector
                | Opcode::Spill
                | Opcode::Reload
                | Opcode::Output
        );
        let mut pending: Vec<(usize, Units)> = Vec::new();
        for l in (0..self.lanes).filter(|&l| mask & bit(l) != 0) {
            let active = self.exec & bit(l) != 0;
            let vals = self.lane_operands(b, i, inst, l, active && !copy_like)?;
            // The units each definition receives, in order.
            let results: Units = match inst.op {
                Opcode::Mov | Opcode::ParallelCopy | Opcode::CreateVector | Opcode::SplitVector => {
                    vals
                }
                Opcode::Input => {
                    let slot = inst.imms[0];
                    let v = self.env.inputs.get(&slot).ok_or_else(|| {
                        self.err(b, i, format!("input slot {slot} has no values"))
                    })?;
                    smallvec::smallvec![v.get(l).copied()]
                }
                Opcode::Uniform => {
                    let slot = inst.imms[0];
                    smallvec::smallvec![Some(*self.env.uniforms.get(&slot).ok_or_else(|| {
                        self.err(b, i, format!("uniform slot {slot} has no value"))
                    })?)]
                }
                Opcode::Output => {
                    if active {
                        let slot = self
                            .outputs
                            .entry(inst.imms[0])
                            .or_insert_with(|| vec![None; self.lanes]);
                        slot[l] = Some(vals.into_vec());
                    }
                    continue;
                }
                Opcode::Spill => {
                    let slot = self.spill.entry(inst.imms[0]).or_default();
                    let n = vals.len();
                    slot.resize(slot.len().max(n * self.lanes), None);
                    for (u, v) in vals.into_iter().enumerate() {
                        slot[u * self.lanes + l] = v;
                    }
                    continue;
                }
                Opcode::Reload => {
                    let size = self.func.class(inst.defs[0].temp).size as usize;
                    let slot = self.spill.get(&inst.imms[0]);
                    (0..size)
                        .map(|u| slot.and_then(|s| s.get(u * self.lanes + l).copied().flatten()))
                        .collect()
                }
                Opcode::TextureSample => {
                    let unit = inst.imms[0];
                    let mode = SampleMode::of(&inst.imms)
                        .ok_or_else(|| self.err(b, i, "no sample mode"))?;
                    let cube = mode.dim == Dim::Cube;
                    let tex = self.textures.entry(unit).or_insert_with(|| {
                        if cube {
                            Texture::procedural_cube(unit)
                        } else {
                            Texture::procedural(unit)
                        }
                    });
                    if (tex.faces == 6) != cube {
                        let bound = if tex.faces == 6 {
                            "a cube map"
                        } else {
                            "a 2D image"
                        };
                        return Err(self.err(
                            b,
                            i,
                            format!(
                                "texture unit {unit} holds {bound}, sampled as {}",
                                mode.kind()
                            ),
                        ));
                    }
                    let c = |k: usize| vals.get(k).copied().flatten().map_or(0.0, f32::from_bits);
                    // The test textures have one layer and one slice: a 3D sample reads (s, t),
                    // a 1D sample (s, 0), an array's layer does not matter.
                    let texel = match mode.dim {
                        Dim::Cube => tex.texel_cube(c(0), c(1), c(2)),
                        Dim::D1 => tex.texel_at(c(0), 0.0),
                        Dim::D2 | Dim::D3 => tex.texel_at(c(0), c(1)),
                    };
                    let reference = mode.dim.coords() + mode.arrayed as usize;
                    let rgba = match mode.compare {
                        Some(func) => {
                            let r = texture::shadow(func, c(reference), texture::depth(texel));
                            [r.to_bits(), 0, 0, 1.0f32.to_bits()]
                        }
                        None => texel.map(|c| (c as f32 / 255.0).to_bits()),
                    };
                    rgba.map(Some).into_iter().collect()
                }
                Opcode::TextureFetch => {
                    let unit = inst.imms[0];
                    let tex = self
                        .textures
                        .entry(unit)
                        .or_insert_with(|| Texture::procedural(unit));
                    let c = |k: usize| vals.get(k).copied().flatten().unwrap_or(0) as i32;
                    tex.fetch(c(0), c(1)).map(Some).into_iter().collect()
                }
                Opcode::Discard => {
                    if active {
                        self.discarded |= bit(l);
                    }
                    continue;
                }
                Opcode::Fddx | Opcode::Fddy => {
                    // The difference across the lane's 2×2 quad (lanes 4k..4k+3, x = bit 0,
                    // y = bit 1); the other lanes' values are read whether active or not.
                    let bit_of_axis = if inst.op == Opcode::Fddx { 1 } else { 2 };
                    let (lo, hi) = (l & !bit_of_axis, l | bit_of_axis);
                    let get = |lane: usize| -> Result<Option<f32>, InterpError> {
                        if lane >= self.lanes {
                            return Ok(Some(0.0));
                        }
                        Ok(self
                            .read(&inst.operands[0], lane, 0)
                            .map_err(|m| self.err(b, i, m))?
                            .map(f32::from_bits))
                    };
                    match (get(lo)?, get(hi)?) {
                        (Some(a), Some(c)) => smallvec::smallvec![Some((c - a).to_bits())],
                        _ => smallvec::smallvec![None],
                    }
                }
                Opcode::Target(t) if t.0.cross_lane.is_some() => {
                    // A target instruction that reads other lanes (the QPU's derivatives), as
                    // `fddx`: lanes beyond the run read 0.0, inactive lanes what they hold.
                    let eval = t.0.cross_lane.expect("checked");
                    let read = |k: usize, lane: usize| -> Result<Option<u32>, String> {
                        if lane >= self.lanes {
                            return Ok(Some(0));
                        }
                        self.read(&inst.operands[k], lane, 0)
                    };
                    let failed = std::cell::RefCell::new(None);
                    let v = eval(l, &|k, lane| {
                        read(k, lane).unwrap_or_else(|m| {
                            *failed.borrow_mut() = Some(m);
                            None
                        })
                    });
                    if let Some(m) = failed.into_inner() {
                        return Err(self.err(b, i, m));
                    }
                    // Scratch definitions first, undefined; the result last.
                    let mut units = Units::new();
                    for d in &inst.defs[..inst.defs.len().saturating_sub(1)] {
                        for _ in 0..self.func.class(d.temp).size {
                            units.push(None);
                        }
                    }
                    units.push(v);
                    units
                }
                op => {
                    if vals.iter().any(Option::is_none) {
                        smallvec::smallvec![None]
                    } else {
                        let xs: SmallVec<[u32; 4]> = vals.into_iter().flatten().collect();
                        let v = eval_scalar(op, &xs).ok_or_else(|| {
                            self.err(b, i, format!("`{op}` cannot be interpreted"))
                        })?;
                        smallvec::smallvec![Some(v)]
                    }
                }
            };
            pending.push((l, results));
        }
        // Every lane reads before any lane writes: a derivative reads its neighbours' operand,
        // which may share a register with the definition.
        for (l, results) in pending {
            let mut it = results.into_iter();
            for d in &inst.defs {
                for u in 0..self.func.class(d.temp).size as usize {
                    let v = it.next().flatten();
                    self.storage
                        .write(d.temp, d.reg, l, u, v)
                        .map_err(|m| self.err(b, i, m))?;
                }
            }
        }
        if inst.op == Opcode::Discard {
            self.exec &= !self.discarded;
        }
        Ok(())
    }

    fn linear_succ(&self, b: Block) -> Block {
        self.cfg.linear.succs[b.index()][0]
    }

    fn terminator(
        &mut self,
        b: Block,
        i: usize,
        inst: &Inst,
    ) -> Result<Option<Block>, InterpError> {
        let mut next = match inst.op {
            Opcode::Return => return Ok(None),
            Opcode::Jump => self.linear_succ(b),
            Opcode::If => {
                let (t, e) = (inst.targets[0], inst.targets[1]);
                let mut cond = 0u64;
                for l in self.active().collect::<Vec<_>>() {
                    let v = self
                        .read(&inst.operands[0], l, 0)
                        .map_err(|m| self.err(b, i, m))?;
                    match v {
                        Some(v) if v != 0 => cond |= bit(l),
                        Some(_) => {}
                        None => {
                            return Err(self.err(
                                b,
                                i,
                                format!("lane {l} branches on an undefined value"),
                            ));
                        }
                    }
                }
                if inst.flags.divergent {
                    self.frames.push(Frame::If {
                        restore: self.exec,
                        else_mask: self.exec & !cond,
                        then_end: Block(e.0 - 1),
                        else_end: (e < inst.targets[2]).then(|| Block(inst.targets[2].0 - 1)),
                    });
                    self.exec &= cond;
                    t
                } else {
                    if cond != 0 && cond != self.exec {
                        return Err(self.err(b, i, format!("uniform branch condition differs across active lanes ({cond:#x} of {:#x})", self.exec)));
                    }
                    if cond != 0
                        || (self.exec == 0
                            && self
                                .read(&inst.operands[0], 0, 0)
                                .ok()
                                .flatten()
                                .unwrap_or(1)
                                != 0)
                    {
                        t
                    } else {
                        e
                    }
                }
            }
            Opcode::Loop => {
                let idx = self
                    .cfg
                    .loops
                    .iter()
                    .position(|l| l.preheader == b)
                    .expect("loop of its preheader");
                self.frames.push(Frame::Loop {
                    idx,
                    break_mask: 0,
                    continue_mask: 0,
                });
                inst.targets[0]
            }
            Opcode::Break | Opcode::Continue => {
                let exec = self.exec;
                let divergent = self.cfg.divergent_jump[b.index()];
                let Some(fi) = self.innermost_loop() else {
                    return Err(self.err(b, i, "break or continue outside a loop"));
                };
                let Frame::Loop {
                    idx,
                    break_mask: mut brk,
                    continue_mask: mut cont,
                } = self.frames[fi]
                else {
                    unreachable!("innermost_loop finds loop frames")
                };
                let (header, exit) = (self.cfg.loops[idx].header, self.cfg.loops[idx].exit);
                self.exec = 0;
                let next = if inst.op == Opcode::Break {
                    brk |= exec;
                    if !divergent && cont != 0 {
                        return Err(self.err(
                            b,
                            i,
                            "uniform break while lanes wait at a continue (walker error)",
                        ));
                    }
                    divergent.then(|| self.linear_succ(b))
                } else if divergent {
                    cont |= exec;
                    Some(self.linear_succ(b))
                } else {
                    // Back edge: every lane waiting at a continue runs the next iteration. A
                    // divergent loop is left here when no lane remains (the back edge's linear
                    // edge to the exit); a uniform loop only by its uniform break.
                    self.exec = (exec | cont) & !brk & !self.discarded;
                    cont = 0;
                    (self.exec != 0 || !self.cfg.loops[idx].divergent).then_some(header)
                };
                self.frames[fi] = Frame::Loop {
                    idx,
                    break_mask: brk,
                    continue_mask: cont,
                };
                match next {
                    Some(n) if divergent => n,
                    Some(n) => return Ok(Some(n)),
                    None => return Ok(Some(self.leave_loop(exit))),
                }
            }
            op => return Err(self.err(b, i, format!("`{op}` is not a terminator"))),
        };
        // The end of a divergent if region hands the wave to the other side or closes the if.
        if self.region_end[b.index()].is_some()
            && let Some(Frame::If {
                restore,
                else_mask,
                then_end,
                else_end,
            }) = self.frames.last()
        {
            let (restore, else_mask, then_end, else_end) =
                (*restore, *else_mask, *then_end, *else_end);
            if b == then_end && else_end.is_some() {
                self.exec = self.alive(else_mask);
            } else if b == then_end || Some(b) == else_end {
                self.frames.pop();
                self.exec = self.alive(restore);
            }
            next = self.linear_succ(b);
        }
        Ok(Some(next))
    }

    /// Pops the innermost loop: its lanes that left by a break run on at the exit.
    fn leave_loop(&mut self, exit: Block) -> Block {
        while let Some(f) = self.frames.pop() {
            if let Frame::Loop { break_mask, .. } = f {
                self.exec = self.alive(break_mask);
                break;
            }
        }
        exit
    }
}
