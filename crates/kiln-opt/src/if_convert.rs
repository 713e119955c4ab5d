//! If-conversion (NIR's `nir_opt_peephole_select`): an `if` whose sides are each at most one
//! small block of straight-line code without side effects is flattened into one block, every
//! endif phi becoming a `sel`; the limits per side are [`DIVERGENT_LIMIT`] and
//! [`UNIFORM_LIMIT`]. The design and its cost model are in `docs/middle.md` ("If-conversion").

use crate::blocks::remove_merged;
use crate::util::is_uniform_file;
use kiln_analysis::{Changed, Context, PassError};
use kiln_ir::cfg::IfInfo;
use kiln_ir::{Block, Cfg, Def, Function, Inst, Opcode, Operand};

/// Instructions per side of a divergent `if` that are flattened.
pub const DIVERGENT_LIMIT: usize = 16;
/// Instructions per side of a uniform `if` that are flattened.
pub const UNIFORM_LIMIT: usize = 3;

/// The body of a side block (without its closing `jump`), if it can be moved.
fn movable(func: &Function, b: Block, endif: Block, limit: usize) -> Option<usize> {
    let insts = &func.block(b).insts;
    let (last, body) = insts.split_last()?;
    if last.op != Opcode::Jump || last.targets.first() != Some(&endif) || body.len() > limit {
        return None;
    }
    body.iter()
        .all(|i| {
            !i.op.is_phi()
                && !i.op.info().side_effects
                && !matches!(
                    i.op,
                    Opcode::TextureSample
                        | Opcode::TextureFetch
                        | Opcode::Fddx
                        | Opcode::Fddy
                        | Opcode::Reload
                )
                && !matches!(i.op, Opcode::Target(t) if t.0.cross_lane.is_some())
        })
        .then_some(body.len())
}

/// Whether `info`'s if can be flattened, and its side blocks (`holder`: the block that holds the
/// head's instructions, which end in the if).
fn candidate(
    func: &Function,
    cfg: &Cfg,
    info: &IfInfo,
    holder: Block,
) -> Option<(Block, Option<Block>)> {
    let (h, t, e, m) = (info.head, info.then_start, info.else_start, info.endif);
    let limit = if info.divergent {
        DIVERGENT_LIMIT
    } else {
        UNIFORM_LIMIT
    };
    let else_block = if e == m {
        if t.0 + 1 != e.0 {
            return None;
        }
        None
    } else {
        if t.0 + 1 != e.0 || e.0 + 1 != m.0 {
            return None;
        }
        Some(e)
    };
    movable(func, t, m, limit)?;
    if let Some(e) = else_block {
        movable(func, e, m, limit)?;
    }
    // The endif's logical predecessors are exactly the two sides.
    let else_pred = else_block.unwrap_or(h);
    let preds = &cfg.logical.preds[m.index()];
    if preds.len() != 2 || !preds.contains(&t) || !preds.contains(&else_pred) {
        return None;
    }
    let cond = func.block(holder).insts.last()?.operands[0];
    let cond_per_lane = cond.temp_id().is_some_and(|c| !is_uniform_file(func, c));
    for phi in func.block(m).insts.iter().take_while(|i| i.op.is_phi()) {
        let d = phi.defs[0].temp;
        // `sel` is scalar: a vector phi keeps its if.
        if func.class(d).size != 1 || (is_uniform_file(func, d) && cond_per_lane) {
            return None;
        }
        if phi.op == Opcode::LinearPhi && cfg.linear.preds[m.index()] != *preds {
            // A divergent if's linear phi has one operand (the else side's end): rare.
            return None;
        }
    }
    Some((t, else_block))
}

/// Flattens one if: the sides and the endif go into `h`, the block that holds the head's
/// instructions; `merged` records them as gone into it.
fn flatten(
    func: &mut Function,
    cfg: &Cfg,
    (info, h): (&IfInfo, Block),
    t: Block,
    e: Option<Block>,
    merged: &mut Vec<(Block, Block)>,
) {
    let m = info.endif;
    let preds = &cfg.logical.preds[m.index()];
    let then_k = preds
        .iter()
        .position(|&p| p == t)
        .expect("then is a predecessor");
    let else_k = 1 - then_k;
    let mut head = std::mem::take(&mut func.block_mut(h).insts);
    let term = head.pop().expect("the head ends in its if");
    let cond = term.operands[0];
    let mut cond_op = Operand::from(cond.value);
    cond_op.flags = Default::default();
    for side in std::iter::once(t).chain(e) {
        let mut insts = std::mem::take(&mut func.block_mut(side).insts);
        insts.pop();
        head.extend(insts);
    }
    let endif = std::mem::take(&mut func.block_mut(m).insts);
    for inst in endif {
        if inst.op.is_phi() {
            let mut sel = Inst::new(Opcode::Sel);
            sel.defs.push(Def::new(inst.defs[0].temp));
            let mut a = Operand::from(inst.operands[then_k].value);
            let mut b = Operand::from(inst.operands[else_k].value);
            a.flags = Default::default();
            b.flags = Default::default();
            sel.operands.extend([cond_op, a, b]);
            head.push(sel);
        } else {
            head.push(inst);
        }
    }
    func.block_mut(h).insts = head;
    merged.extend([t, m].into_iter().chain(e).map(|b| (b, h)));
}

/// Flattens small ifs, innermost first, until none is left. One round flattens every candidate
/// of one CFG in layout order: an if whose head an earlier flattening took (it was that if's
/// endif) flattens into the block that took it, so a chain of n sequential ifs is one round
/// and each block's instructions move once; an if that becomes a candidate only once an inner
/// one is flattened waits for the next round. Each round renumbers the blocks once and computes
/// the CFG once.
pub fn if_convert(cx: &mut Context) -> Result<Changed, PassError> {
    let mut changed = Changed::Nothing;
    loop {
        let cfg = cx.cfg()?;
        let func = cx.func_mut();
        let merged = round(func, &cfg);
        if merged.is_empty() {
            break;
        }
        remove_merged(func, &merged);
        cx.invalidate(Changed::Cfg);
        changed = Changed::Cfg;
    }
    Ok(changed)
}

/// One round: flattens every candidate of `cfg`; the blocks gone and where their instructions
/// went.
fn round(func: &mut Function, cfg: &Cfg) -> Vec<(Block, Block)> {
    let mut merged: Vec<(Block, Block)> = Vec::new();
    // The block that holds each block's instructions.
    let mut holder: Vec<Block> = func.block_ids().collect();
    for info in &cfg.ifs {
        let h = holder[info.head.index()];
        if let Some((t, e)) = candidate(func, cfg, info, h) {
            let before = merged.len();
            flatten(func, cfg, (info, h), t, e, &mut merged);
            for &(b, into) in &merged[before..] {
                holder[b.index()] = into;
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_interp::{Env, compare};
    use kiln_ir::{parse_function, print_function};

    /// The front end's shape: a divergent if with an empty then side and a phi of constants
    /// (ascii.wgsl), and a diamond with work on both sides.
    const SRC: &str = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:v1 = flt 0.5, %0
    if.divergent %1, bb1, bb2, bb2
bb1:
    jump bb2
bb2:
    %2:v1 = phi 65536.0, 65600.0
    %3:v1 = flt 0.25, %0
    if.divergent %3, bb3, bb4, bb5
bb3:
    %4:v1 = fmul %0, 2.0
    jump bb5
bb4:
    %5:v1 = fadd %0, 1.0
    output 3, %5
    jump bb5
bb5:
    %6:v1 = phi %4, %0
    output 0, %2
    output 1, %6
    return
}
";

    #[test]
    fn flattens_small_ifs_into_sels() {
        let before = parse_function(SRC).unwrap();
        let mut cx = Context::new(before.clone());
        assert_eq!(cx.run("if_convert", if_convert).unwrap(), Changed::Cfg);
        let after = cx.into_func();
        let text = print_function(&after);
        // The first if flattens (phi operands: from bb0 = else, from bb1 = then); the second
        // keeps its if: its else side has an output.
        assert!(text.contains("%2:v1 = sel %1, 65600.0, 65536.0"), "{text}");
        assert_eq!(after.blocks.len(), 4, "{text}");
        for seed in 0..4 {
            let mut env = Env::for_function(&before, 16, seed);
            env.inputs
                .insert(0, (0..16).map(|l| (l as f32 / 16.0).to_bits()).collect());
            compare(&before, &after, &env).unwrap();
        }
    }

    #[test]
    fn a_uniform_if_flattens_only_small_sides() {
        let src = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    if.uniform %1, bb1, bb2, bb2
bb1:
    %2:v1 = fmul %0, 2.0
    %3:v1 = fmul %2, 2.0
    %4:v1 = fmul %3, 2.0
    %5:v1 = fmul %4, 2.0
    jump bb2
bb2:
    %6:v1 = phi %0, %5
    output 0, %6
    return
}
";
        let mut cx = Context::new(parse_function(src).unwrap());
        assert_eq!(cx.run("if_convert", if_convert).unwrap(), Changed::Nothing);
        let small = src
            .replace("    %4:v1 = fmul %3, 2.0\n    %5:v1 = fmul %4, 2.0\n", "")
            .replace("phi %0, %5", "phi %0, %3");
        let before = parse_function(&small).unwrap();
        let mut cx = Context::new(before.clone());
        assert_eq!(cx.run("if_convert", if_convert).unwrap(), Changed::Cfg);
        let after = cx.into_func();
        assert_eq!(after.blocks.len(), 1, "{}", print_function(&after));
        for u in [0u32, 7] {
            let mut env = Env::for_function(&before, 16, 1);
            env.uniforms.insert(0, u);
            compare(&before, &after, &env).unwrap();
        }
    }

    /// A chain of sequential ifs (each endif the next head), some with an else side, and one
    /// nested if: the chain flattens in one round into one block (the nested one in the next),
    /// and runs as before.
    #[test]
    fn a_chain_of_ifs_flattens_into_one_block() {
        use std::fmt::Write;
        let mut src =
            String::from("target generic(v=16, s=8)\nfunction @f {\nbb0:\n    %0:v1 = input 0\n");
        let (mut t, mut b, mut prev) = (1, 0, 0);
        for i in 0..40 {
            let (c, x, y, p) = (t, t + 1, t + 2, t + 3);
            t += 4;
            let _ = writeln!(src, "    %{c}:v1 = flt %{prev}, 0.{}", i % 9 + 1);
            if i % 3 == 0 {
                let _ = write!(
                    src,
                    "    if.divergent %{c}, bb{}, bb{}, bb{}\nbb{}:\n    %{x}:v1 = fmul %{prev}, 0.5\n    jump bb{}\nbb{}:\n    %{y}:v1 = fadd %{prev}, 0.25\n    jump bb{}\nbb{}:\n    %{p}:v1 = phi %{x}, %{y}\n",
                    b + 1,
                    b + 2,
                    b + 3,
                    b + 1,
                    b + 3,
                    b + 2,
                    b + 3,
                    b + 3
                );
                b += 3;
            } else {
                let _ = write!(
                    src,
                    "    if.divergent %{c}, bb{}, bb{}, bb{}\nbb{}:\n    %{x}:v1 = fmul %{prev}, 0.5\n    jump bb{}\nbb{}:\n    %{p}:v1 = phi %{prev}, %{x}\n",
                    b + 1,
                    b + 2,
                    b + 2,
                    b + 1,
                    b + 2,
                    b + 2
                );
                b += 2;
            }
            prev = p;
        }
        // One nested if: its outer if flattens only once the inner one has.
        let (c, d, x, p, q) = (t, t + 1, t + 2, t + 3, t + 4);
        let _ = write!(
            src,
            "    %{c}:v1 = flt %{prev}, 0.5\n    if.divergent %{c}, bb{}, bb{}, bb{}\nbb{}:\n    %{d}:v1 = flt %{prev}, 0.25\n    if.divergent %{d}, bb{}, bb{}, bb{}\nbb{}:\n    %{x}:v1 = fmul %{prev}, 3.0\n    jump bb{}\nbb{}:\n    %{p}:v1 = phi %{prev}, %{x}\n    jump bb{}\nbb{}:\n    %{q}:v1 = phi %{prev}, %{p}\n    output 0, %{q}\n    return\n}}\n",
            b + 1,
            b + 4,
            b + 4,
            b + 1,
            b + 2,
            b + 3,
            b + 3,
            b + 2,
            b + 3,
            b + 3,
            b + 4,
            b + 4
        );
        let before = parse_function(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        kiln_ir::verify(&before).unwrap();
        // The first round takes the 40 ifs of the chain and the inner if.
        let mut one = before.clone();
        let cfg = Cfg::compute(&one).unwrap();
        let merged = round(&mut one, &cfg);
        let blocks: usize = 40 * 2 + 40 / 3 + 1 + 2;
        assert_eq!(merged.len(), blocks, "{merged:?}");
        remove_merged(&mut one, &merged);
        kiln_ir::verify(&one).unwrap();
        let mut cx = Context::new(before.clone());
        assert_eq!(cx.run("if_convert", if_convert).unwrap(), Changed::Cfg);
        let after = cx.into_func();
        kiln_ir::verify(&after).unwrap();
        assert_eq!(after.blocks.len(), 1, "{}", print_function(&after));
        for seed in 0..4 {
            let mut env = Env::for_function(&before, 16, seed);
            env.inputs
                .insert(0, (0..16).map(|l| (l as f32 / 16.0).to_bits()).collect());
            compare(&before, &after, &env).unwrap();
        }
    }
}
