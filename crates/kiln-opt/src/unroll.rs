//! Full unrolling of loops with a constant trip count (NIR's `nir_opt_loop_unroll`, its
//! "simple loop" case). The loop must have the shape the front end gives a `for` loop: a header
//! whose phis start from constants or values from before the loop, ending in an `if` whose one
//! side is a lone `break` and whose other side is empty, followed by straight-line blocks up to
//! the latch; no other `break` or `continue`. The trip count is found by running the loop's
//! instructions on constants with `eval_scalar` (the interpreter's own meaning) until the exit
//! test is a constant that leaves; a test that is not a constant, or more than
//! [`MAX_TRIPS`] iterations, leaves the loop alone. Cost model (`docs/middle.md`): unrolled when
//! trip count × body instructions ≤ [`MAX_UNROLLED`]. The unrolled copies get fresh temps except
//! the last copy of each instruction, which keeps the original temps, so reads after the loop
//! (of values whose last definition is the last iteration's) stay as they are; the header's
//! phis become copies of their last values. One CFG recomputation per unrolled loop.

use crate::blocks::remove_blocks;
use kiln_analysis::{Changed, Context, PassError};
use kiln_ir::semantics::eval_scalar;
use kiln_ir::{Block, Cfg, Def, Function, Inst, LoopInfo, Opcode, Operand, Temp, Value};
use rustc_hash::FxHashMap as HashMap;

/// Most iterations a loop may run to be unrolled.
pub const MAX_TRIPS: usize = 32;
/// Most instructions the unrolled loop may have.
pub const MAX_UNROLLED: usize = 96;

/// The shape: (exit-test `if` side that breaks is then?, the blocks after the test up to the
/// latch).
struct Shape {
    break_on_true: bool,
    body: Vec<Block>,
}

fn shape(func: &Function, cfg: &Cfg, k: usize, l: &LoopInfo) -> Option<Shape> {
    let h = l.header;
    let term = func.block(h).insts.last()?;
    if term.op != Opcode::If || l.divergent_continue || !l.back_edges.iter().eq([&l.latch]) {
        return None;
    }
    let (t, e, m) = (term.targets[0], term.targets[1], term.targets[2]);
    // One side a lone break to the exit, the other empty (a jump to the endif, or none).
    let lone_break = |b: Block| {
        let i = &func.block(b).insts;
        i.len() == 1 && i[0].op == Opcode::Break && i[0].targets[0] == l.exit
    };
    let empty_jump = |b: Block| {
        let i = &func.block(b).insts;
        i.len() == 1 && i[0].op == Opcode::Jump && i[0].targets[0] == m
    };
    let break_on_true = if e == m {
        // then = break, no else
        if t.0 + 1 != e.0 || !lone_break(t) {
            return None;
        }
        true
    } else if t.0 + 1 == e.0 && e.0 + 1 == m.0 && lone_break(t) && empty_jump(e) {
        true
    } else if t.0 + 1 == e.0 && e.0 + 1 == m.0 && empty_jump(t) && lone_break(e) {
        false
    } else {
        return None;
    };
    // Straight-line blocks from the endif to the latch, all of this loop.
    let body: Vec<Block> = (m.0..l.exit.0).map(Block).collect();
    for &b in &body {
        let last = func.block(b).insts.last()?;
        let ok = if b == l.latch {
            last.op == Opcode::Continue
        } else {
            last.op == Opcode::Jump && last.targets[0].0 == b.0 + 1
        };
        if !ok || cfg.loop_of[b.index()] != Some(k) || (b != m && func.block(b).phi_count() > 0) {
            return None;
        }
    }
    // The endif's phis (from the empty side and the header) are not handled.
    if func.block(m).phi_count() > 0 {
        return None;
    }
    // The exit is reached from the break alone, without linear phis.
    if func
        .block(l.exit)
        .insts
        .iter()
        .any(|i| i.op == Opcode::LinearPhi)
    {
        return None;
    }
    // No side effects that cannot be repeated in order: all are fine (outputs, discards run
    // in order in the copies), but no instruction may define more than it reads by position
    // constraints: fixed or tied definitions are left alone.
    for &b in std::iter::once(&h).chain(&body) {
        for i in &func.block(b).insts {
            if i.defs.iter().any(|d| d.fixed.is_some() || d.tied.is_some()) {
                return None;
            }
        }
    }
    Some(Shape {
        break_on_true,
        body,
    })
}

fn value(map: &HashMap<Temp, Value>, v: Value) -> Value {
    match v {
        Value::Temp(t) => map.get(&t).copied().unwrap_or(v),
        _ => v,
    }
}

fn konst(map: &HashMap<Temp, Value>, op: &Operand) -> Option<u32> {
    match value(map, op.value) {
        Value::Const(c) => Some(c),
        _ => None,
    }
}

/// The trip count: iterations that run the body before the exit test leaves.
fn trip_count(func: &Function, l: &LoopInfo, s: &Shape) -> Option<usize> {
    let h = l.header;
    let phis: Vec<&Inst> = func
        .block(h)
        .insts
        .iter()
        .take_while(|i| i.op.is_phi())
        .collect();
    let mut env: HashMap<Temp, Value> = HashMap::default();
    for p in &phis {
        env.insert(p.defs[0].temp, p.operands[0].value);
    }
    let eval = |env: &mut HashMap<Temp, Value>, inst: &Inst| {
        if inst.defs.len() != 1 {
            return;
        }
        let args: Option<Vec<u32>> = inst.operands.iter().map(|o| konst(env, o)).collect();
        let v = args.and_then(|a| eval_scalar(inst.op, &a));
        match v {
            Some(c) => env.insert(inst.defs[0].temp, Value::Const(c)),
            None => env.remove(&inst.defs[0].temp),
        };
    };
    for trip in 0..=MAX_TRIPS {
        let insts = &func.block(h).insts;
        for inst in &insts[phis.len()..insts.len() - 1] {
            eval(&mut env, inst);
        }
        let cond = konst(&env, &insts[insts.len() - 1].operands[0])?;
        if (cond != 0) == s.break_on_true {
            return Some(trip);
        }
        for &b in &s.body {
            let insts = &func.block(b).insts;
            for inst in &insts[..insts.len() - 1] {
                eval(&mut env, inst);
            }
        }
        let next: Vec<(Temp, Value)> = phis
            .iter()
            .map(|p| (p.defs[0].temp, value(&env, p.operands[1].value)))
            .collect();
        for (t, v) in next {
            match v {
                Value::Const(_) => env.insert(t, v),
                _ => env.remove(&t),
            };
        }
    }
    None
}

/// Copies of `insts` with operands through `map`; fresh temps unless `last`.
fn emit(
    func: &mut Function,
    insts: &[Inst],
    map: &mut HashMap<Temp, Value>,
    last: bool,
    out: &mut Vec<Inst>,
) {
    for inst in insts {
        let mut c = inst.clone();
        for op in c.operands.iter_mut() {
            let v = value(map, op.value);
            crate::util::set_value(op, v);
        }
        for d in c.defs.iter_mut() {
            let t = if last {
                d.temp
            } else {
                func.new_temp(func.class(d.temp))
            };
            map.insert(d.temp, Value::Temp(t));
            *d = Def::new(t);
        }
        out.push(c);
    }
}

fn unroll_one(func: &mut Function, l: &LoopInfo, s: &Shape, trips: usize) {
    let (p, h, x) = (l.preheader, l.header, l.exit);
    let hinsts = func.block(h).insts.clone();
    let nphi = hinsts.iter().take_while(|i| i.op.is_phi()).count();
    let phis = &hinsts[..nphi];
    let head = &hinsts[nphi..hinsts.len() - 1];
    let body: Vec<Vec<Inst>> = s
        .body
        .iter()
        .map(|&b| {
            let i = &func.block(b).insts;
            i[..i.len() - 1].to_vec()
        })
        .collect();
    let mut out: Vec<Inst> = Vec::new();
    let mut map: HashMap<Temp, Value> = HashMap::default();
    let mut phi_values: Vec<Value> = phis.iter().map(|ph| ph.operands[0].value).collect();
    for it in 0..=trips {
        for (ph, v) in phis.iter().zip(&phi_values) {
            map.insert(ph.defs[0].temp, *v);
        }
        emit(func, head, &mut map, it == trips, &mut out);
        if it == trips {
            break;
        }
        for insts in &body {
            emit(func, insts, &mut map, it + 1 == trips, &mut out);
        }
        phi_values = phis
            .iter()
            .map(|ph| value(&map, ph.operands[1].value))
            .collect();
    }
    // The phis' last values, under their own names (read after the loop).
    let mut copies = Vec::new();
    for (ph, v) in phis.iter().zip(&phi_values) {
        let mut m = Inst::new(Opcode::Mov);
        m.defs.push(Def::new(ph.defs[0].temp));
        m.operands.push(Operand::from(*v));
        copies.push(m);
    }
    // Copies first: the last header copy may read the phis' names... it reads `map`, which
    // points at the values, so the order only matters for reads after the loop.
    let mut exit = std::mem::take(&mut func.block_mut(x).insts);
    for inst in exit.iter_mut().take_while(|i| i.op.is_phi()) {
        let v = value(&map, inst.operands[0].value);
        inst.op = Opcode::Mov;
        inst.operands.clear();
        inst.operands.push(Operand::from(v));
    }
    let pre = &mut func.block_mut(p).insts;
    pre.pop(); // the loop
    pre.extend(out);
    pre.extend(copies);
    pre.extend(exit);
    let gone: Vec<Block> = (h.0..=x.0).map(Block).collect();
    remove_blocks(func, &gone, p);
}

/// Unrolls loops with a constant trip count under the size limit, innermost first.
pub fn unroll(cx: &mut Context) -> Result<Changed, PassError> {
    let mut changed = Changed::Nothing;
    loop {
        let cfg = cx.cfg()?;
        let func = cx.func_mut();
        let mut done = false;
        for (k, l) in cfg.loops.iter().enumerate().rev() {
            // Innermost: no loop nested inside.
            if cfg.loops.iter().any(|o| o.parent == Some(k)) {
                continue;
            }
            let Some(s) = shape(func, &cfg, k, l) else {
                continue;
            };
            let Some(trips) = trip_count(func, l, &s) else {
                continue;
            };
            let size: usize = (l.header.0..l.exit.0)
                .map(|b| func.blocks[b as usize].insts.len())
                .sum();
            if trips * size > MAX_UNROLLED {
                continue;
            }
            unroll_one(func, l, &s, trips);
            done = true;
            break;
        }
        if !done {
            break;
        }
        cx.invalidate(Changed::Cfg);
        changed = Changed::Cfg;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_interp::{Env, compare};
    use kiln_ir::{parse_function, print_function};

    /// `for (i = 0; i < 3; i++) acc = acc * x + i;` as the front end shapes it, with the
    /// counter and the accumulator read after the loop.
    const SRC: &str = "target generic(v=16, s=8)
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
    %4:v1 = fmul %2, %0
    %7:v1 = i2f %1
    %5:v1 = fadd %4, %7
    %6:s1 = iadd %1, 1
    continue bb1
bb5:
    %8:v1 = phi %2
    output 0, %8
    output 1, %1
    output 2, %3
    return
}
";

    #[test]
    fn unrolls_a_counted_loop() {
        let before = parse_function(SRC).unwrap();
        kiln_ir::verify(&before).unwrap();
        let mut cx = Context::new(before.clone());
        assert_eq!(cx.run("unroll", unroll).unwrap(), Changed::Cfg);
        let after = cx.into_func();
        let text = print_function(&after);
        assert_eq!(after.blocks.len(), 1, "{text}");
        assert_eq!(text.matches("fmul").count(), 3, "{text}");
        for seed in 0..4 {
            compare(&before, &after, &Env::for_function(&before, 16, seed)).unwrap();
        }
    }

    #[test]
    fn leaves_unknown_and_long_loops() {
        // The limit is a uniform word: no constant trip count.
        let unknown = SRC
            .replace("%3:s1 = ilt %1, 3", "%3:s1 = ilt %1, %9")
            .replace(
                "    %0:v1 = input 0\n",
                "    %0:v1 = input 0\n    %9:s1 = uniform 0\n",
            );
        // 1000 iterations: over the limits.
        let long = SRC.replace("ilt %1, 3", "ilt %1, 1000");
        for src in [unknown, long] {
            let f = parse_function(&src).unwrap();
            kiln_ir::verify(&f).unwrap();
            let mut cx = Context::new(f);
            assert_eq!(cx.run("unroll", unroll).unwrap(), Changed::Nothing);
        }
    }
}
