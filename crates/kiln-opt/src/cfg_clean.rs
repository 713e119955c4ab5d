//! CFG clean-up and uniformity (LLVM's SimplifyCFG and NIR's `nir_opt_if`/`nir_opt_dead_cf` in
//! spirit, on kiln's structured layout): `if`s on conditions proven uniform are marked uniform
//! (the question is [`Uniformity`]), constant branches and single-pass loops go, and
//! straight-line blocks merge. The design is in `docs/middle.md` ("CFG clean-up and
//! uniformity").

use crate::blocks::{copies_after_phis, remove_blocks, remove_merged};
use crate::util::is_uniform_file;
use kiln_analysis::{Changed, Context, PassError};
use kiln_ir::{Block, Cfg, Function, Inst, Opcode, Operand, Temp, Value};

/// Which branch conditions are uniform: constants and uniform-file values ([`ByFile`]), and
/// whatever the divergence analysis proves ([`ByDivergence`], the default).
pub trait Uniformity {
    /// Whether `cond`, read at the end of block `at`, has one value in every active lane.
    fn is_uniform(&self, func: &Function, cond: &Operand, at: Block) -> bool;
}

/// Uniformity from register files alone.
pub struct ByFile;

impl Uniformity for ByFile {
    fn is_uniform(&self, func: &Function, cond: &Operand, _at: Block) -> bool {
        match cond.value {
            Value::Const(_) => true,
            Value::Temp(t) => is_uniform_file(func, t),
            Value::Undef(_) => false,
        }
    }
}

/// Uniformity by the divergence analysis (NIR's rules, temporal divergence included), on top
/// of the register files.
pub struct ByDivergence(pub std::sync::Arc<kiln_analysis::Divergence>);

impl Uniformity for ByDivergence {
    fn is_uniform(&self, func: &Function, cond: &Operand, at: Block) -> bool {
        ByFile.is_uniform(func, cond, at) || self.0.operand_uniform_at(cond, at)
    }
}

/// Marks ifs on uniform conditions uniform; returns whether any was.
fn mark_uniform(func: &mut Function, cfg: &Cfg, uni: &dyn Uniformity) -> bool {
    let mut any = false;
    for info in cfg.ifs.iter().filter(|i| i.divergent) {
        let h = info.head;
        let cond = func.block(h).insts.last().expect("if").operands[0];
        if !uni.is_uniform(func, &cond, h) {
            continue;
        }
        func.block_mut(h)
            .insts
            .last_mut()
            .expect("if")
            .flags
            .divergent = false;
        // The linear CFG changes: linear values defined on the then side no longer reach the
        // else side, linear phis see other predecessors. Kept only if the function still
        // verifies (one verification per marked if).
        let ok = Cfg::compute(func).is_ok_and(|new| kiln_ir::verify_with_cfg(func, &new).is_ok());
        if ok {
            any = true;
        } else {
            func.block_mut(h)
                .insts
                .last_mut()
                .expect("if")
                .flags
                .divergent = true;
        }
    }
    any
}

/// The phis of `b`, with one predecessor left (operand `k`), become copies.
fn phis_to_copies(insts: &mut [Inst], k: usize) {
    for inst in insts.iter_mut().take_while(|i| i.op.is_phi()) {
        let v = inst.operands[k].value;
        let mut op = Operand::from(v);
        op.flags = Default::default();
        inst.op = Opcode::Mov;
        inst.operands.clear();
        inst.operands.push(op);
    }
}

/// Folds one uniform if on a constant; returns whether it did.
fn fold_constant_if(func: &mut Function, cfg: &Cfg) -> bool {
    for info in cfg.ifs.iter().rev().filter(|i| !i.divergent) {
        let (h, t, e, m) = (info.head, info.then_start, info.else_start, info.endif);
        let Value::Const(c) = func.block(h).insts.last().expect("if").operands[0].value else {
            continue;
        };
        // The side taken, as [start, end); it must fall through to the endif.
        let (start, end, gone_start, gone_end) = if c != 0 { (t, e, e, m) } else { (e, m, t, e) };
        let falls = if start == end {
            true // no else side: the head itself reaches the endif
        } else {
            let last = func
                .block(Block(end.0 - 1))
                .insts
                .last()
                .expect("terminator");
            last.op == Opcode::Jump && last.targets.first() == Some(&m)
        };
        // The side that goes must hold no jump out of it (a loop's only break, say).
        let jumps_out = (gone_start.0..gone_end.0).any(|g| {
            func.block(Block(g))
                .insts
                .last()
                .is_some_and(|i| matches!(i.op, Opcode::Break | Opcode::Continue | Opcode::Return))
        });
        if !falls || jumps_out {
            continue;
        }
        let taken_pred = if start == end { h } else { Block(end.0 - 1) };
        let preds = &cfg.logical.preds[m.index()];
        let Some(k) = preds.iter().position(|&p| p == taken_pred) else {
            continue;
        };
        if preds.len() != 2 && !(preds.len() == 1 && preds[0] == taken_pred) {
            continue;
        }
        // Linear phis of the endif must read the same predecessor.
        if func
            .block(m)
            .insts
            .iter()
            .take_while(|i| i.op.is_phi())
            .any(|i| i.op == Opcode::LinearPhi)
            && cfg.linear.preds[m.index()] != *preds
        {
            continue;
        }
        let mut endif = std::mem::take(&mut func.block_mut(m).insts);
        phis_to_copies(&mut endif, k);
        copies_after_phis(&mut endif);
        func.block_mut(m).insts = endif;
        let term = func.block_mut(h).insts.last_mut().expect("if");
        let mut jump = Inst::new(Opcode::Jump);
        jump.targets = vec![if start == end { m } else { start }].into_boxed_slice();
        *term = jump;
        let gone: Vec<Block> = (gone_start.0..gone_end.0).map(Block).collect();
        remove_blocks(func, &gone, h);
        return true;
    }
    false
}

/// Merges every straight-line pair of blocks (a block whose only successor, in both CFGs, is
/// the next block, which has it as its only predecessor and is no endif): a chain goes into
/// its first block in one round, each block's instructions moving once. Returns whether it
/// merged any.
fn merge_straight(func: &mut Function, cfg: &Cfg) -> bool {
    let mut endif = vec![false; func.blocks.len()];
    for i in &cfg.ifs {
        endif[i.endif.index()] = true;
    }
    // The block that holds each block's instructions.
    let mut holder: Vec<Block> = func.block_ids().collect();
    let mut merged: Vec<(Block, Block)> = Vec::new();
    for b in (0..func.blocks.len()).map(Block::new) {
        let at = holder[b.index()];
        let Some(term) = func.block(at).insts.last() else {
            continue;
        };
        if term.op != Opcode::Jump {
            continue;
        }
        let next = term.targets[0];
        if next.0 != b.0 + 1
            || endif[next.index()]
            || cfg.logical.preds[next.index()].as_slice() != [b]
            || cfg.linear.preds[next.index()].as_slice() != [b]
            || cfg.logical.succs[b.index()].as_slice() != [next]
            || cfg.linear.succs[b.index()].as_slice() != [next]
        {
            continue;
        }
        let mut tail = std::mem::take(&mut func.block_mut(next).insts);
        phis_to_copies(&mut tail, 0);
        let insts = &mut func.block_mut(at).insts;
        insts.pop();
        insts.extend(tail);
        holder[next.index()] = at;
        merged.push((next, at));
    }
    if merged.is_empty() {
        return false;
    }
    remove_merged(func, &merged);
    true
}

/// Removes one one-trip loop; returns whether it did. The loop's only `break` is the then
/// side of a uniform `if` on a non-zero constant at the top level of its body, and it has no
/// `continue` but its latch: it runs its body once, up to that if, and leaves.
fn remove_one_trip_loop(func: &mut Function, cfg: &Cfg) -> bool {
    for (k, l) in cfg.loops.iter().enumerate().rev() {
        let term = |b: Block| func.block(b).insts.last().expect("terminator");
        // Blocks whose innermost loop is this one.
        let in_body = |b: Block| cfg.loop_of[b.index()] == Some(k);
        let breaks: Vec<Block> = (l.header.0..l.exit.0)
            .map(Block)
            .filter(|&b| in_body(b) && term(b).op == Opcode::Break)
            .collect();
        let continues = (l.header.0..l.exit.0)
            .map(Block)
            .filter(|&b| in_body(b) && term(b).op == Opcode::Continue)
            .count();
        let [t] = breaks.as_slice() else { continue };
        if continues != 1 || l.divergent || l.divergent_continue || func.block(*t).insts.len() != 1
        {
            continue;
        }
        // The if whose then side is exactly the break, with no else.
        let Some(info) = cfg.ifs.iter().find(|i| i.then_start == *t) else {
            continue;
        };
        let b = info.head;
        if info.divergent
            || info.else_start != info.endif
            || info.endif.0 != t.0 + 1
            || !matches!(term(b).operands[0].value, Value::Const(c) if c != 0)
        {
            continue;
        }
        // At the top level of the body: inside no if region of the loop.
        if cfg
            .ifs
            .iter()
            .any(|i| l.contains(i.head) && i.then_start <= b && b < i.endif)
        {
            continue;
        }
        let (p, h, x) = (l.preheader, l.header, l.exit);
        // The header's phis keep the entry operand (the preheader is their first predecessor).
        let hp = func.block(h).phi_count();
        phis_to_copies(&mut func.block_mut(h).insts[..hp], 0);
        // The exit's phis read what they read from the break block, now from `b`.
        let jump = |to: Block| {
            let mut j = Inst::new(Opcode::Jump);
            j.targets = vec![to].into_boxed_slice();
            j
        };
        *func.block_mut(p).insts.last_mut().expect("loop") = jump(h);
        *func.block_mut(b).insts.last_mut().expect("if") = jump(x);
        let gone: Vec<Block> = (t.0..x.0).map(Block).collect();
        remove_blocks(func, &gone, b);
        return true;
    }
    false
}

/// The blocks each temp is read in, as the lowest and highest block number (`u32::MAX, 0`
/// for a temp nothing reads): one walk, so that whether a region's values are read outside it
/// costs the region, not the function.
pub(crate) struct Readers {
    lo: Vec<u32>,
    hi: Vec<u32>,
}

impl Readers {
    pub(crate) fn new(func: &Function) -> Readers {
        let n = func.temps.len();
        let (mut lo, mut hi) = (vec![u32::MAX; n], vec![0u32; n]);
        for b in func.block_ids() {
            for t in func.block(b).insts.iter().flat_map(|i| i.used_temps()) {
                lo[t.index()] = lo[t.index()].min(b.0);
                hi[t.index()] = hi[t.index()].max(b.0);
            }
        }
        Readers { lo, hi }
    }

    /// Whether some block outside `region` reads `t`.
    fn outside(&self, t: kiln_ir::Temp, region: &std::ops::Range<u32>) -> bool {
        let (lo, hi) = (self.lo[t.index()], self.hi[t.index()]);
        lo != u32::MAX && (lo < region.start || hi >= region.end)
    }
}

/// Whether the blocks `region` do nothing observable from outside it when it is left for
/// `exit`: no instruction in it has a side effect, no terminator returns or leaves for a block
/// other than `exit` or one of the region's own, and no instruction outside reads a value the
/// region defines (NIR's `nir_opt_dead_cf`, `cf_node_has_side_effects` and `node_is_dead`).
fn unobserved(
    func: &Function,
    readers: &Readers,
    region: std::ops::Range<u32>,
    exit: Block,
) -> bool {
    for b in region.clone() {
        for inst in &func.block(Block(b)).insts {
            let info = inst.op.info();
            let effect = if info.terminator {
                inst.op == Opcode::Return
                    || inst
                        .targets
                        .iter()
                        .any(|&t| t != exit && !region.contains(&t.0))
            } else {
                info.side_effects
            };
            if effect || inst.defs.iter().any(|d| readers.outside(d.temp, &region)) {
                return false;
            }
        }
    }
    true
}

/// Removes one loop that does nothing observable: its exit has no phis and the loop is
/// [`unobserved`]. A shader's loops end (an endless one is undefined behaviour, as NIR takes
/// it), so the loop may as well not run. Returns whether it removed one.
fn remove_dead_loop(func: &mut Function, cfg: &Cfg, readers: &Readers) -> bool {
    for l in &cfg.loops {
        let (p, x) = (l.preheader, l.exit);
        if func.block(x).phi_count() > 0 || !unobserved(func, readers, l.header.0..x.0, x) {
            continue;
        }
        let mut jump = Inst::new(Opcode::Jump);
        jump.targets = vec![x].into_boxed_slice();
        *func.block_mut(p).insts.last_mut().expect("loop") = jump;
        let gone: Vec<Block> = (l.header.0..x.0).map(Block).collect();
        remove_blocks(func, &gone, x);
        return true;
    }
    false
}

/// Removes one if, uniform or divergent, whose sides do nothing observable: its endif has no
/// phis and both sides are [`unobserved`]. What simplification leaves of a branchy shader
/// (sides emptied by folding, values nobody reads any more) goes with it. Returns whether it
/// removed one.
fn remove_dead_if(func: &mut Function, cfg: &Cfg, readers: &Readers) -> bool {
    for info in &cfg.ifs {
        let (h, m) = (info.head, info.endif);
        if func.block(m).phi_count() > 0 || !unobserved(func, readers, info.then_start.0..m.0, m) {
            continue;
        }
        let mut jump = Inst::new(Opcode::Jump);
        jump.targets = vec![m].into_boxed_slice();
        *func.block_mut(h).insts.last_mut().expect("if") = jump;
        let gone: Vec<Block> = (info.then_start.0..m.0).map(Block).collect();
        remove_blocks(func, &gone, m);
        return true;
    }
    false
}

/// The clean-up with uniformity from register files.
pub fn cfg_clean(cx: &mut Context) -> Result<Changed, PassError> {
    cfg_clean_with(cx, |cx| {
        let cfg = cx.cfg()?;
        let sites = cx.def_sites();
        if from_sources(cx.func(), &sites, &cfg) {
            return Ok(Box::new(NoneUniform));
        }
        Ok(Box::new(ByDivergence(cx.divergence()?)))
    })
}

/// The oracle where no condition asked about is uniform.
struct NoneUniform;

impl Uniformity for NoneUniform {
    fn is_uniform(&self, _: &Function, _: &Operand, _: Block) -> bool {
        false
    }
}

/// Whether every divergent `if` of `cfg` reads a per-lane-file condition computed from a
/// source of divergence (`kiln_analysis::divergence::is_source`): the analysis finds each
/// divergent, as divergence flows from an operand to what reads it, so [`ByDivergence`] would
/// find none uniform and the analysis is not made. A walk from each condition through its
/// operands' definitions until a source, within a budget of steps linear in the function
/// (past it, the analysis decides).
fn from_sources(func: &Function, sites: &kiln_analysis::DefSites, cfg: &Cfg) -> bool {
    let mut budget = 4 * func.inst_count() + 64;
    // Temps seen by the walk of if number `seen[t]` (+ 1).
    let mut seen = vec![0u32; func.temps.len()];
    let mut stack: Vec<Temp> = Vec::new();
    for (k, info) in cfg.ifs.iter().filter(|i| i.divergent).enumerate() {
        let mark = k as u32 + 1;
        let cond = func.block(info.head).insts.last().expect("if").operands[0];
        let Value::Temp(t) = cond.value else {
            return false;
        };
        if is_uniform_file(func, t) {
            return false;
        }
        stack.clear();
        stack.push(t);
        let mut found = false;
        while let Some(t) = stack.pop() {
            if seen.get(t.index()).is_none_or(|&s| s == mark) {
                continue;
            }
            seen[t.index()] = mark;
            if budget == 0 {
                return false;
            }
            budget -= 1;
            let Some(Some((b, i))) = sites.sites.get(t.index()).copied() else {
                continue;
            };
            let inst = &func.block(b).insts[i];
            if kiln_analysis::divergence::is_source(inst.op) {
                found = true;
                break;
            }
            let operands: &[Operand] = match inst.op {
                // A parallel copy's definitions each read their own operand.
                Opcode::ParallelCopy => match inst.defs.iter().position(|d| d.temp == t) {
                    Some(j) => &inst.operands[j..=j],
                    None => &[],
                },
                _ => &inst.operands,
            };
            stack.extend(operands.iter().filter_map(|o| o.temp_id()));
        }
        if !found {
            return false;
        }
    }
    true
}

/// The clean-up with a uniformity oracle made for the function as it stands: after every
/// simplification the oracle is made again (the context recomputes the divergence analysis).
pub fn cfg_clean_with(
    cx: &mut Context,
    oracle: impl Fn(&mut Context) -> Result<Box<dyn Uniformity>, PassError>,
) -> Result<Changed, PassError> {
    let mut changed = Changed::Nothing;
    // Whether dead code is to be removed when no step applies: at first (a dead reader keeps a
    // region alive), and after a dead region went (what only it read is dead now, and may have
    // been all that kept another region alive).
    let mut dce_due = true;
    loop {
        let cfg = cx.cfg()?;
        let readers = Readers::new(cx.func());
        let func = cx.func_mut();
        let dead_region =
            remove_dead_loop(func, &cfg, &readers) || remove_dead_if(func, &cfg, &readers);
        // The uniformity oracle (a divergence analysis) only when a step asks it: where an
        // `if` is marked divergent.
        let step = dead_region || {
            let marked = cfg.ifs.iter().any(|i| i.divergent) && {
                let uni = oracle(cx)?;
                mark_uniform(cx.func_mut(), &cfg, &*uni)
            };
            let func = cx.func_mut();
            marked
                || fold_constant_if(func, &cfg)
                || remove_one_trip_loop(func, &cfg)
                || merge_straight(func, &cfg)
        };
        if step {
            dce_due |= dead_region;
            cx.invalidate(Changed::Cfg);
            changed = Changed::Cfg;
        } else if dce_due {
            dce_due = false;
            if crate::dce::dce(cx)? == Changed::Nothing {
                break;
            }
            cx.invalidate(Changed::Instructions);
            if changed == Changed::Nothing {
                changed = Changed::Instructions;
            }
        } else {
            break;
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the walk from the conditions decides, the analysis finds every divergent `if`
    /// divergent too; on generated programs it decides some and leaves others to the analysis.
    #[test]
    fn conditions_from_sources_are_what_the_analysis_finds_divergent() {
        let (mut decided, mut left) = (0, 0);
        for seed in 0..300 {
            let mut c = kiln_ir::generate::GenConfig::new(seed);
            c.size = 40 + (seed % 5) as usize * 30;
            let func = kiln_ir::generate::generate(&c);
            let cfg = Cfg::compute(&func).unwrap();
            if !cfg.ifs.iter().any(|i| i.divergent) {
                continue;
            }
            let sites = kiln_analysis::DefSites::compute(&func);
            let by = ByDivergence(std::sync::Arc::new(kiln_analysis::Divergence::compute(
                &func, &cfg,
            )));
            if !from_sources(&func, &sites, &cfg) {
                left += 1;
                continue;
            }
            decided += 1;
            for info in cfg.ifs.iter().filter(|i| i.divergent) {
                let cond = func.block(info.head).insts.last().unwrap().operands[0];
                assert!(
                    !by.is_uniform(&func, &cond, info.head),
                    "seed {seed}: {}",
                    info.head
                );
            }
        }
        assert!(decided > 20 && left > 0, "{decided} decided, {left} left");
        // A condition made of a uniform is left to the analysis, which finds it uniform; one
        // made of an input is decided divergent without it.
        for (from, uniform) in [("%1", true), ("%0", false)] {
            let src = format!(
                "target generic(v=16, s=8)
function @f {{
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:v1 = mov {from}
    %3:v1 = flt %2, 0.5
    if.divergent %3, bb1, bb2, bb2
bb1:
    output 0, %0
    jump bb2
bb2:
    return
}}
"
            );
            let func = parse_function(&src).unwrap();
            let cfg = Cfg::compute(&func).unwrap();
            let sites = kiln_analysis::DefSites::compute(&func);
            assert_eq!(from_sources(&func, &sites, &cfg), !uniform, "{from}");
            let mut cx = Context::new(func);
            cx.run("cfg_clean", cfg_clean).unwrap();
            let text = print_function(cx.func());
            assert_eq!(text.contains("divergent"), !uniform, "{from}:\n{text}");
        }
    }
    use kiln_interp::{Env, compare};
    use kiln_ir::{parse_function, print_function};

    #[test]
    fn constant_and_uniform_branches_fold_and_blocks_merge() {
        // `if.divergent` on a constant (the front end's `ieq 0, 0` after folding): marked
        // uniform, folded to its then side; `if.uniform 0` with no else: folded to nothing.
        let src = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    if.divergent -1, bb1, bb2, bb3
bb1:
    %1:v1 = fmul %0, 2.0
    jump bb3
bb2:
    %2:v1 = fmul %0, 3.0
    jump bb3
bb3:
    %3:v1 = phi %1, %2
    if.uniform 0, bb4, bb5, bb5
bb4:
    %4:v1 = fadd %3, 1.0
    jump bb5
bb5:
    %5:v1 = phi %3, %4
    output 0, %5
    return
}
";
        let before = parse_function(src).unwrap();
        let mut cx = Context::new(before.clone());
        assert_eq!(cx.run("cfg_clean", cfg_clean).unwrap(), Changed::Cfg);
        let after = cx.into_func();
        let text = print_function(&after);
        assert_eq!(after.blocks.len(), 1, "{text}");
        assert!(
            !text.contains("fmul %0, 3.0") && !text.contains("fadd"),
            "{text}"
        );
        assert!(text.contains("%3:v1 = mov %1"), "{text}");
        assert!(text.contains("%5:v1 = mov %3"), "{text}");
        compare(&before, &after, &Env::for_function(&before, 16, 3)).unwrap();
    }

    #[test]
    fn a_one_trip_loop_goes() {
        // The front end's wrapper for an early `return` once the return folded away.
        let src = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    loop bb1, bb5
bb1:
    %1:v1 = phi %0, %3
    %2:v1 = fmul %1, 2.0
    if.uniform -1, bb2, bb3, bb3
bb2:
    break bb5
bb3:
    %3:v1 = fadd %2, 1.0
    jump bb4
bb4:
    continue bb1
bb5:
    %4:v1 = phi %2
    output 0, %4
    return
}
";
        let before = parse_function(src).unwrap();
        let mut cx = Context::new(before.clone());
        assert_eq!(cx.run("cfg_clean", cfg_clean).unwrap(), Changed::Cfg);
        let after = cx.into_func();
        let text = print_function(&after);
        assert_eq!(after.blocks.len(), 1, "{text}");
        assert!(!text.contains("loop") && !text.contains("fadd"), "{text}");
        compare(&before, &after, &Env::for_function(&before, 16, 5)).unwrap();
        // With a second, per-lane break the loop stays.
        let two = src
            .replace(
                "    %2:v1 = fmul %1, 2.0\n",
                "    %2:v1 = fmul %1, 2.0\n    %9:v1 = flt %2, 1.0\n",
            )
            .replace(
                "    jump bb4\nbb4:",
                "    if.divergent %9, bb4, bb5, bb5\nbb4:\n    break bb6\nbb5:",
            )
            .replace(
                "continue bb1\nbb5:\n    %4:v1 = phi %2",
                "continue bb1\nbb6:\n    %4:v1 = phi %2, %3",
            )
            .replace("loop bb1, bb5", "loop bb1, bb6")
            .replace("break bb5\nbb3", "break bb6\nbb3");
        let two = parse_function(&two).unwrap();
        kiln_ir::verify(&two).unwrap();
        let mut cx = Context::new(two);
        cx.run("cfg_clean", cfg_clean).unwrap();
        assert!(print_function(cx.func()).contains("loop"));
    }

    #[test]
    fn a_loop_nothing_observes_goes() {
        // A counted loop whose sum nobody reads after it: it goes, with its blocks.
        let src = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    loop bb1, bb5
bb1:
    %1:v1 = phi %0, %3
    %5:s1 = linear_phi 0.0, %6
    %2:s1 = flt %5, 6.0
    if.uniform %2, bb2, bb3, bb3
bb2:
    break bb5
bb3:
    %3:v1 = fadd %1, 1.0
    %6:s1 = fadd %5, 1.0
    jump bb4
bb4:
    continue bb1
bb5:
    %4:v1 = fmul %0, 2.0
    output 0, %4
    return
}
";
        let before = parse_function(src).unwrap();
        let mut cx = Context::new(before.clone());
        assert_eq!(cx.run("cfg_clean", cfg_clean).unwrap(), Changed::Cfg);
        let after = cx.into_func();
        let text = print_function(&after);
        assert_eq!(after.blocks.len(), 1, "{text}");
        assert!(!text.contains("loop") && !text.contains("fadd"), "{text}");
        compare(&before, &after, &Env::for_function(&before, 16, 5)).unwrap();
        // A value of the loop that only dead code after it reads: the loop goes with it.
        let dead_reader = src.replace(
            "%4:v1 = fmul %0, 2.0\n    output 0, %4",
            "%4:v1 = fmul %1, 2.0\n    output 0, %0",
        );
        let before = parse_function(&dead_reader).unwrap();
        let mut cx = Context::new(before.clone());
        cx.run("cfg_clean", cfg_clean).unwrap();
        let after = cx.into_func();
        assert_eq!(after.blocks.len(), 1, "{}", print_function(&after));
        compare(&before, &after, &Env::for_function(&before, 16, 5)).unwrap();
        // A value of the loop read after it, or a discard in it, keeps it.
        for kept in [
            src.replace("fmul %0, 2.0", "fmul %1, 2.0"),
            src.replace("    jump bb4\nbb4:", "    discard\n    jump bb4\nbb4:"),
        ] {
            let func = parse_function(&kept).unwrap();
            kiln_ir::verify(&func).unwrap();
            let mut cx = Context::new(func);
            cx.run("cfg_clean", cfg_clean).unwrap();
            assert!(print_function(cx.func()).contains("loop"), "{kept}");
        }
    }

    #[test]
    fn an_if_nothing_observes_goes() {
        // A divergent if whose sides compute values nobody reads after it: it goes.
        let src = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:v1 = flt %0, 0.5
    if.divergent %1, bb1, bb2, bb3
bb1:
    %2:v1 = fadd %0, 1.0
    jump bb3
bb2:
    %3:v1 = fmul %0, 3.0
    jump bb3
bb3:
    %4:v1 = fmul %0, 2.0
    output 0, %4
    return
}
";
        let before = parse_function(src).unwrap();
        let mut cx = Context::new(before.clone());
        assert_eq!(cx.run("cfg_clean", cfg_clean).unwrap(), Changed::Cfg);
        let after = cx.into_func();
        let text = print_function(&after);
        assert_eq!(after.blocks.len(), 1, "{text}");
        assert!(!text.contains("if") && !text.contains("fadd"), "{text}");
        compare(&before, &after, &Env::for_function(&before, 16, 5)).unwrap();
        // A side's value read after it (through a phi), or a discard, keeps it.
        for kept in [
            src.replace(
                "bb3:\n    %4:v1 = fmul %0",
                "bb3:\n    %5:v1 = phi %2, %3\n    %4:v1 = fmul %5",
            ),
            src.replace(
                "bb3:\n    %4:v1 = fmul %0",
                "bb3:\n    %5:v1 = phi %0, %3\n    %4:v1 = fmul %5",
            ),
            src.replace("    jump bb3\nbb2:", "    discard\n    jump bb3\nbb2:"),
        ] {
            let func = parse_function(&kept).unwrap();
            kiln_ir::verify(&func).unwrap();
            let mut cx = Context::new(func);
            cx.run("cfg_clean", cfg_clean).unwrap();
            assert!(print_function(cx.func()).contains("if"), "{kept}");
        }
    }

    #[test]
    fn a_linear_value_of_the_then_side_keeps_the_if_divergent() {
        // The else side reads a uniform value of the then side: fine linearly while the if is
        // divergent (the wave runs then, then else), wrong once it is uniform.
        let src = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    if.divergent %1, bb1, bb2, bb3
bb1:
    %2:s1 = iadd %1, 1
    jump bb3
bb2:
    %3:v1 = iadd %0, 1
    jump bb3
bb3:
    %4:v1 = phi %0, %3
    output 0, %4
    return
}
";
        let mut cx = Context::new(parse_function(src).unwrap());
        cx.run("cfg_clean", cfg_clean).unwrap();
        let text = print_function(cx.func());
        assert!(text.contains("if.uniform %1"), "{text}");
        let bad = src.replace("%3:v1 = iadd %0, 1", "%3:v1 = iadd %2, 1");
        let mut cx = Context::new(parse_function(&bad).unwrap());
        cx.run("cfg_clean", cfg_clean).unwrap();
        let text = print_function(cx.func());
        assert!(text.contains("if.divergent %1"), "{text}");
    }
}
