//! Removes loops whose body runs once (NIR's `wrapper_unroll` in `nir_opt_loop_unroll.c`, with the
//! constant branches and dead code after jumps of `nir_opt_dead_cf.c`): the front end's wrappers
//! for early `return`s and `switch`es, once every path through the body reaches a `break`
//! before any `continue`. The body is rebuilt without the loop; its blocks must form a CFG, and
//! where the compile checks (debug builds, `KILN_DEBUG=verify`) the result must verify, else the
//! loop stays. The design is in `docs/middle.md` ("Loops that never iterate").

use crate::blocks::copies_after_phis;
use kiln_analysis::{Changed, Context, PassError};
use kiln_ir::{Block, BlockData, Cfg, Def, Function, Inst, Opcode, Operand, Value};

/// Why a loop is left alone (never shown: the loop simply stays).
type Refused = ();

/// The state of one rebuild: a working copy of the function, the new order of the body's
/// blocks (old numbers; numbers from `n` up are new endif blocks) and what was emitted.
struct Rebuild<'a> {
    /// The function before the rebuild (the working copy's terminators change as it goes).
    f: &'a Function,
    cfg: &'a Cfg,
    k: usize,
    g: Function,
    /// Blocks of the function before the rebuild.
    n: usize,
    order: Vec<Block>,
    emitted: Vec<bool>,
    /// Exit phis: one value per phi of the exit (in order) for every path leaving the body.
    exit: Block,
    nexit: usize,
    /// The fewest remainders left on the stack since it was last reset (a path took those
    /// above).
    low: usize,
}

/// Where a path leaves the body: the block whose terminator the caller sets, and the values
/// the exit phis read on it.
struct Leave {
    block: Block,
    values: Vec<Value>,
}

fn jump(to: Block) -> Inst {
    let mut j = Inst::new(Opcode::Jump);
    j.targets = vec![to].into_boxed_slice();
    j
}

impl Rebuild<'_> {
    fn term(&self, b: Block) -> &Inst {
        self.g.blocks[b.index()].insts.last().expect("terminator")
    }

    fn set_term(&mut self, b: Block, inst: Inst) {
        *self.g.blocks[b.index()]
            .insts
            .last_mut()
            .expect("terminator") = inst;
    }

    fn emit(&mut self, b: Block) -> Result<(), Refused> {
        if std::mem::replace(&mut self.emitted[b.index()], true) {
            return Err(());
        }
        self.order.push(b);
        Ok(())
    }

    /// Whether a block of `[s, e)` ends in a `break` or `continue` of the loop.
    fn has_jump(&self, s: Block, e: Block) -> bool {
        (s.0..e.0).map(Block).any(|b| {
            self.cfg.loop_of[b.index()] == Some(self.k)
                && matches!(self.term(b).op, Opcode::Break | Opcode::Continue)
        })
    }

    /// `m`'s phis, now reached from `pred` alone, become copies of that operand (a
    /// `linear_phi`'s operand for `pred` in the linear CFG, which must have that edge).
    fn phis_from(&mut self, m: Block, pred: Block) -> Result<(), Refused> {
        let pos = |preds: &[Block]| preds.iter().position(|&p| p == pred);
        let logical = pos(&self.cfg.logical.preds[m.index()]);
        let linear = pos(&self.cfg.linear.preds[m.index()]);
        let insts = &mut self.g.blocks[m.index()].insts;
        for inst in insts.iter_mut().take_while(|i| i.op.is_phi()) {
            let idx = if inst.op == Opcode::LinearPhi {
                linear
            } else {
                logical
            };
            let idx = idx.ok_or(())?;
            let mut op = Operand::from(inst.operands[idx].value);
            op.flags = Default::default();
            inst.op = Opcode::Mov;
            inst.operands.clear();
            inst.operands.push(op);
        }
        copies_after_phis(insts);
        Ok(())
    }

    /// Rebuilds the region `[s, e)` in tail mode. `rest` holds the remainders of the regions
    /// around it (innermost last) that a path falling off the region's end runs next; none of
    /// the first `floor` may be taken (another side took them).
    fn tail(
        &mut self,
        mut s: Block,
        mut e: Block,
        rest: &mut Vec<(Block, Block)>,
        floor: usize,
        depth: usize,
    ) -> Result<Leave, Refused> {
        if depth > 256 {
            return Err(());
        }
        loop {
            let b = s;
            if b >= e {
                return Err(());
            }
            let t = self.term(b).clone();
            match t.op {
                Opcode::Jump => {
                    let x = t.targets[0];
                    self.emit(b)?;
                    if x.0 == b.0 + 1 && x < e {
                        s = x;
                        continue;
                    }
                    // The region's end: on to the innermost remainder.
                    if rest.len() <= floor {
                        // Another side took it: fine if it does nothing but leave.
                        let values = self.trivial_leave(rest)?;
                        return Ok(Leave { block: b, values });
                    }
                    let (rs, re) = rest.pop().expect("checked");
                    self.low = self.low.min(rest.len());
                    if rs != x {
                        return Err(());
                    }
                    self.phis_from(rs, b)?;
                    (s, e) = (rs, re);
                }
                Opcode::Break if self.cfg.loop_of[b.index()] == Some(self.k) => {
                    self.emit(b)?;
                    let values = self.exit_values(b)?;
                    return Ok(Leave { block: b, values });
                }
                Opcode::Loop => {
                    let inner_exit = t.targets[1];
                    for i in b.0..inner_exit.0 {
                        self.emit(Block(i))?;
                    }
                    s = inner_exit;
                }
                Opcode::If => {
                    let (tt, ee, m) = (t.targets[0], t.targets[1], t.targets[2]);
                    let constant = match t.operands[0].value {
                        Value::Const(c) if !t.flags.divergent => Some(c != 0),
                        _ => None,
                    };
                    if let Some(c) = constant {
                        let (ss, se) = if c { (tt, ee) } else { (ee, m) };
                        if ss == se {
                            // No else side taken: straight on to the endif.
                            self.set_term(b, jump(m));
                            self.emit(b)?;
                            self.phis_from(m, b)?;
                            s = m;
                            continue;
                        }
                        self.set_term(b, jump(ss));
                        self.emit(b)?;
                        rest.push((m, e));
                        (s, e) = (ss, se);
                        continue;
                    }
                    if !self.has_jump(tt, m) {
                        for i in b.0..m.0 {
                            self.emit(Block(i))?;
                        }
                        s = m;
                        continue;
                    }
                    // A side leaves the loop: the if ends the region, the rest goes into the
                    // side that falls through.
                    self.emit(b)?;
                    rest.push((m, e));
                    let len = rest.len();
                    let mut then_rest = rest.clone();
                    let low = std::mem::replace(&mut self.low, usize::MAX);
                    let then_leave = self.tail(tt, ee, &mut then_rest, floor, depth + 1)?;
                    let then_took = self.low < len;
                    self.low = self.low.min(low);
                    let else_floor = if then_took { len } else { floor };
                    let mut else_start = None;
                    let else_leave = if ee == m {
                        // No else side: the head flows to the endif, which begins the else
                        // side now; when the then side took the rest, the head flows to the
                        // new endif (the rest must then do nothing but leave).
                        if len <= else_floor {
                            let values = self.trivial_leave(rest)?;
                            Leave { block: b, values }
                        } else {
                            let (rs, re) = rest.pop().expect("checked");
                            self.low = self.low.min(rest.len());
                            self.phis_from(rs, b)?;
                            else_start = Some(rs);
                            self.tail(rs, re, rest, else_floor, depth + 1)?
                        }
                    } else {
                        else_start = Some(ee);
                        self.tail(ee, m, rest, else_floor, depth + 1)?
                    };
                    // The new endif, merging the exit values.
                    let endif = Block::new(self.g.blocks.len());
                    self.g.blocks.push(BlockData::default());
                    self.emitted.push(false);
                    let mut values = Vec::with_capacity(self.nexit);
                    let mut phis = Vec::with_capacity(self.nexit + 1);
                    for i in 0..self.nexit {
                        let (op, def) = self.exit_phi(i);
                        // Lanes of a divergent if disagree: what it merges must be per-lane.
                        if t.flags.divergent
                            && (op == Opcode::LinearPhi
                                || crate::util::is_uniform_file(&self.g, def))
                        {
                            return Err(());
                        }
                        let d = self.g.new_temp(self.g.class(def));
                        // A uniform if's endif has the same predecessors in both CFGs.
                        let mut phi = Inst::new(op);
                        phi.defs.push(Def::new(d));
                        // Operands in block order: the head comes before the then side.
                        let (first, second) = if else_leave.block == b {
                            (&else_leave, &then_leave)
                        } else {
                            (&then_leave, &else_leave)
                        };
                        phi.operands.push(Operand::from(first.values[i]));
                        phi.operands.push(Operand::from(second.values[i]));
                        phis.push(phi);
                        values.push(Value::Temp(d));
                    }
                    phis.push(jump(endif)); // the caller sets the real terminator
                    self.g.blocks[endif.index()].insts = phis;
                    self.set_term(then_leave.block, jump(endif));
                    let mut head = t.clone();
                    head.targets = vec![tt, else_start.unwrap_or(endif), endif].into_boxed_slice();
                    if else_leave.block != b {
                        self.set_term(else_leave.block, jump(endif));
                    }
                    self.set_term(b, head);
                    self.emit(endif)?;
                    return Ok(Leave {
                        block: endif,
                        values,
                    });
                }
                _ => return Err(()),
            }
        }
    }

    /// The exit values of a path that runs the remainders `rest` (innermost last) when they
    /// hold nothing but jumps, constant uniform branches and a `break` of the loop: such a
    /// rest needs no copy for a second path through it.
    fn trivial_leave(&self, rest: &[(Block, Block)]) -> Result<Vec<Value>, Refused> {
        let mut rest = rest.to_vec();
        let (mut s, mut e) = rest.pop().ok_or(())?;
        for _ in 0..self.n {
            let b = s;
            if b >= e || self.f.blocks[b.index()].insts.len() != 1 {
                return Err(());
            }
            let t = self.f.blocks[b.index()].insts.last().ok_or(())?;
            match t.op {
                Opcode::Jump if t.targets[0].0 == b.0 + 1 && t.targets[0] < e => s = t.targets[0],
                Opcode::Jump => {
                    let (rs, re) = rest.pop().ok_or(())?;
                    if rs != t.targets[0] {
                        return Err(());
                    }
                    (s, e) = (rs, re);
                }
                Opcode::Break if self.cfg.loop_of[b.index()] == Some(self.k) => {
                    return self.exit_values(b);
                }
                Opcode::If if !t.flags.divergent => {
                    let Value::Const(c) = t.operands[0].value else {
                        return Err(());
                    };
                    let (tt, ee, m) = (t.targets[0], t.targets[1], t.targets[2]);
                    let (ss, se) = if c != 0 { (tt, ee) } else { (ee, m) };
                    if ss == se {
                        s = m;
                    } else {
                        rest.push((m, e));
                        (s, e) = (ss, se);
                    }
                }
                _ => return Err(()),
            }
        }
        Err(())
    }

    /// The opcode and definition of the exit's `i`th phi.
    fn exit_phi(&self, i: usize) -> (Opcode, kiln_ir::Temp) {
        let inst = &self.g.blocks[self.exit.index()].insts[i];
        (inst.op, inst.defs[0].temp)
    }

    /// What the exit's phis read from the `break` in `b` (a `linear_phi` by the linear edge,
    /// which a divergent break does not have).
    fn exit_values(&self, b: Block) -> Result<Vec<Value>, Refused> {
        let x = self.exit.index();
        let pos = |preds: &[Block]| preds.iter().position(|&p| p == b);
        let logical = pos(&self.cfg.logical.preds[x]);
        let linear = pos(&self.cfg.linear.preds[x]);
        (0..self.nexit)
            .map(|i| {
                let inst = &self.g.blocks[x].insts[i];
                let idx = if inst.op == Opcode::LinearPhi {
                    linear
                } else {
                    logical
                };
                Ok(inst.operands[idx.ok_or(())?].value)
            })
            .collect()
    }
}

/// Loop `k` rebuilt away, before the blocks outside it join: the working copy `g` (its
/// blocks outside `around` left empty), and the new layout in old block numbers (numbers from
/// `n` up are new blocks).
struct Removed {
    g: Function,
    layout: Vec<Block>,
    around: std::ops::RangeInclusive<usize>,
    n: usize,
}

/// Loop `k` of `func` rebuilt away ([`assemble`] makes the function), if its body never
/// reaches a `continue` of it.
fn remove_loop(func: &Function, cfg: &Cfg, k: usize) -> Result<Removed, Refused> {
    let l = &cfg.loops[k];
    let (p, h, x) = (l.preheader, l.header, l.exit);
    let n = func.blocks.len();
    let nexit = func.block(x).phi_count();
    // The working copy holds the blocks from the preheader to the exit, all the rebuild reads
    // and changes; the others join only when the loop goes, moved rather than copied (a
    // refused loop costs its own blocks, not the function).
    let around = p.index()..=x.index();
    let mut g = Function {
        blocks: Vec::new(),
        ..Function::new(func.name.clone(), func.target.clone())
    };
    g.temps = func.temps.clone();
    g.allocated = func.allocated;
    g.blocks = func
        .blocks
        .iter()
        .enumerate()
        .map(|(b, data)| {
            if around.contains(&b) {
                data.clone()
            } else {
                Default::default()
            }
        })
        .collect();
    let mut r = Rebuild {
        f: func,
        cfg,
        k,
        g,
        n,
        order: Vec::new(),
        emitted: vec![false; n],
        exit: x,
        nexit,
        low: usize::MAX,
    };
    // The header runs once, entered from the preheader (its first predecessor in both CFGs).
    let hp = r.g.blocks[h.index()].phi_count();
    for inst in &mut r.g.blocks[h.index()].insts[..hp] {
        let mut op = Operand::from(inst.operands[0].value);
        op.flags = Default::default();
        inst.op = Opcode::Mov;
        inst.operands.clear();
        inst.operands.push(op);
    }
    let leave = r.tail(h, x, &mut Vec::new(), 0, 0)?;
    r.set_term(leave.block, jump(x));
    r.set_term(p, jump(h));
    for (i, inst) in r.g.blocks[x.index()].insts[..nexit].iter_mut().enumerate() {
        let mut op = Operand::from(leave.values[i]);
        op.flags = Default::default();
        inst.op = Opcode::Mov;
        inst.operands.clear();
        inst.operands.push(op);
    }
    // The new layout: the blocks up to the preheader, the rebuilt body, the exit and after.
    let layout: Vec<Block> = (0..=p.0)
        .map(Block)
        .chain(r.order.iter().copied())
        .chain((x.0..r.n as u32).map(Block))
        .collect();
    Ok(Removed {
        g: r.g,
        layout,
        around,
        n,
    })
}

/// The function `removed` makes of `func`, with its CFG, the blocks outside the loop moved
/// out of `func`; `check`: the result must verify (a whole-function check per loop removed: a
/// fifth of the compile of a shader with many wrapper loops, and never failed on the corpus,
/// so release compiles skip it as they skip the verifier after every pass). Where the blocks
/// form no CFG (or do not verify), the loop stays and `func` is given its blocks back.
fn assemble(
    func: &mut Function,
    removed: Removed,
    check: bool,
) -> Result<(Function, Cfg), Refused> {
    let Removed {
        mut g,
        layout,
        around,
        n,
    } = removed;
    let mut new_of = vec![u32::MAX; g.blocks.len()];
    for (i, b) in layout.iter().enumerate() {
        new_of[b.index()] = i as u32;
    }
    let inside = |b: Block| b.index() >= n || around.contains(&b.index());
    // Every target has a place in the layout (read before anything moves).
    let placed = layout.iter().all(|&b| {
        let data = if inside(b) {
            &g.blocks[b.index()]
        } else {
            &func.blocks[b.index()]
        };
        data.insts
            .last()
            .is_none_or(|t| t.targets.iter().all(|t| new_of[t.index()] != u32::MAX))
    });
    if !placed {
        return Err(());
    }
    let mut old = std::mem::take(&mut g.blocks);
    let mut blocks = Vec::with_capacity(layout.len());
    for &b in &layout {
        let mut data = if inside(b) {
            std::mem::take(&mut old[b.index()])
        } else {
            std::mem::take(&mut func.blocks[b.index()])
        };
        if let Some(t) = data.insts.last_mut() {
            for target in t.targets.iter_mut() {
                *target = Block(new_of[target.index()]);
            }
        }
        blocks.push(data);
    }
    g.blocks = blocks;
    let new_cfg = Cfg::compute(&g)
        .ok()
        .filter(|c| !check || kiln_ir::verify_with_cfg(&g, c).is_ok());
    let Some(new_cfg) = new_cfg else {
        // The moved blocks go back, their targets as they were (`layout` maps new to old).
        for (mut data, &b) in g.blocks.into_iter().zip(&layout) {
            if inside(b) {
                continue;
            }
            if let Some(t) = data.insts.last_mut() {
                for target in t.targets.iter_mut() {
                    *target = layout[target.index()];
                }
            }
            func.blocks[b.index()] = data;
        }
        return Err(());
    };
    Ok((g, new_cfg))
}

/// Removes the loops that never iterate, innermost first; one CFG computation per removal
/// (the one that checks the new blocks).
pub fn one_trip_loops(cx: &mut Context) -> Result<Changed, PassError> {
    let mut changed = Changed::Nothing;
    let mut skip = 0usize;
    let check = cfg!(debug_assertions) || cx.debug.verify;
    loop {
        let cfg = cx.cfg()?;
        let func = cx.func();
        // Loops are numbered in layout order; trying from the last tries inner loops first.
        let found = (0..cfg.loops.len())
            .rev()
            .skip(skip)
            .enumerate()
            .find_map(|(i, k)| remove_loop(func, &cfg, k).ok().map(|r| (i, r)));
        let Some((i, removed)) = found else {
            break;
        };
        // The loops tried before it come later in the layout and were refused; removing an
        // earlier loop leaves their bodies as they are, so they stay refused (each loop is
        // tried once, plus once more per enclosing loop removed around it).
        skip += i;
        // (A refusal gives the function back as it was: the CFG cached stays true.)
        match assemble(cx.func_mut(), removed, check) {
            Ok((g, new_cfg)) => {
                // The CFG that checked the new blocks serves the next search, and the next pass.
                cx.replace_func(g, new_cfg);
                changed = Changed::Cfg;
            }
            Err(()) => skip += 1,
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_interp::{Env, compare};
    use kiln_ir::{parse_function, print_function};

    fn check(src: &str, loops_after: usize) -> Function {
        let before = parse_function(src).unwrap();
        kiln_ir::verify(&before).unwrap();
        let mut cx = Context::new(before.clone());
        cx.run("one_trip_loops", one_trip_loops).unwrap();
        let after = cx.into_func();
        let text = print_function(&after);
        let cfg = Cfg::compute(&after).unwrap();
        assert_eq!(cfg.loops.len(), loops_after, "{text}");
        for seed in 0..8 {
            compare(&before, &after, &Env::for_function(&before, 16, seed))
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
        }
        after
    }

    fn filetest(name: &str) -> String {
        let path = format!(
            "{}/../../tests/filetests/one_trip_loops/{name}.kir",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(path).unwrap();
        // The input ends where the expected output begins.
        text.split("\n; expected:").next().unwrap().to_string()
    }

    #[test]
    fn wrapper_loops_go() {
        for name in ["early_return", "both_sides_break", "nested_divergent_break"] {
            let src = filetest(name);
            let f = parse_function(&src).unwrap();
            let cfg = Cfg::compute(&f).unwrap();
            let k = cfg.loops.len() - 1;
            let Ok(removed) = remove_loop(&f, &cfg, k) else {
                panic!("{name}: refused");
            };
            let mut moved = f.clone();
            let (g, _) =
                assemble(&mut moved, removed, true).unwrap_or_else(|()| panic!("{name}: no CFG"));
            assert_eq!(Cfg::compute(&g).unwrap().loops.len(), cfg.loops.len() - 1);
            check(&src, 0);
        }
    }

    /// Where the rebuilt blocks form no CFG, the loop stays and the function gets the blocks
    /// it lent back, as they were.
    #[test]
    fn a_refused_assembly_gives_the_blocks_back() {
        // A wrapper loop with an `if` before it and one after it, whose blocks move (and
        // those after it are numbered anew: the body gains an endif).
        let around = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    if.uniform %1, bb1, bb2, bb2
bb1:
    jump bb2
bb2:
    loop bb3, bb9
bb3:
    %2:v1 = fmul %0, 2.0
    if.uniform %1, bb4, bb5, bb5
bb4:
    %3:v1 = fadd %2, 1.0
    break bb9
bb5:
    %4:v1 = fmul %2, %2
    if.uniform -1, bb6, bb7, bb7
bb6:
    break bb9
bb7:
    jump bb8
bb8:
    continue bb3
bb9:
    %5:v1 = phi %3, %4
    if.uniform %1, bb10, bb11, bb11
bb10:
    jump bb11
bb11:
    output 0, %5
    return
}
";
        check(around, 0);
        let sources = ["early_return", "both_sides_break", "nested_divergent_break"]
            .map(filetest)
            .into_iter()
            .chain([around.to_string()]);
        for (name, src) in sources.enumerate() {
            let f = parse_function(&src).unwrap();
            let cfg = Cfg::compute(&f).unwrap();
            let k = cfg.loops.len() - 1;
            let Ok(mut removed) = remove_loop(&f, &cfg, k) else {
                panic!("{name}: refused");
            };
            // The preheader jumps back to the entry: no structured CFG.
            let p = cfg.loops[k].preheader;
            removed.g.blocks[p.index()]
                .insts
                .last_mut()
                .unwrap()
                .targets = vec![Block(0)].into_boxed_slice();
            let mut lent = f.clone();
            assert!(assemble(&mut lent, removed, false).is_err(), "{name}");
            assert_eq!(lent, f, "{name}");
        }
    }

    #[test]
    fn a_loop_that_iterates_stays() {
        // A `for` loop whose latch is reached.
        let src = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    loop bb1, bb5
bb1:
    %1:s1 = linear_phi 0, %6
    %2:v1 = phi 1.0, %5
    %3:s1 = ilt %1, 3
    if.uniform %3, bb2, bb3, bb4
bb2:
    jump bb4
bb3:
    break bb5
bb4:
    %5:v1 = fmul %2, %0
    %6:s1 = iadd %1, 1
    continue bb1
bb5:
    %8:v1 = phi %2
    output 0, %8
    return
}
";
        check(src, 1);
        // A continue behind a per-lane condition, then a constant break: the loop may iterate.
        let src = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    loop bb1, bb6
bb1:
    %1:v1 = phi 0, %2, %2
    %2:v1 = iadd %1, 1
    %3:v1 = ilt %2, 4
    if.divergent %3, bb2, bb3, bb3
bb2:
    continue bb1
bb3:
    if.uniform -1, bb4, bb5, bb5
bb4:
    break bb6
bb5:
    continue bb1
bb6:
    output 0, %2
    return
}
";
        check(src, 1);
    }
}

#[cfg(test)]
mod generated {
    use super::*;
    use kiln_interp::{Env, compare};
    use kiln_ir::generate::{GenConfig, generate};

    /// Generated programs after constant folding and the clean-up (which make constant
    /// branches into breaks): the loops removed run as before, and some are removed.
    #[test]
    fn removals_agree_on_generated_programs() {
        let mut removed = 0;
        for seed in 0..300 {
            let mut c = GenConfig::new(seed);
            c.size = 40 + (seed % 5) as usize * 20;
            let f = generate(&c);
            let mut cx = Context::new(f);
            crate::run_passes(&mut cx, &["fold", "cfg_clean"]).unwrap();
            let before = cx.func().clone();
            let loops = cx.cfg().unwrap().loops.len();
            cx.run("one_trip_loops", one_trip_loops).unwrap();
            removed += loops - cx.cfg().unwrap().loops.len();
            let after = cx.into_func();
            for k in 0..2 {
                let env = Env::for_function(&before, 16, seed * 31 + k);
                if kiln_interp::run(&before, &env).is_ok() {
                    compare(&before, &after, &env).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                }
            }
        }
        eprintln!("{removed} loops removed");
        assert!(removed > 0);
    }
}
