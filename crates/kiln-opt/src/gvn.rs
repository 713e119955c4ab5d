//! Value numbering over the dominator tree (Click's GVN in its dominator-scoped form, as NIR's
//! `nir_opt_cse`/`nir_opt_gvn` and ACO's value numbering do it): an instruction already computed
//! by a definition that reaches it is removed, and its readers read the earlier definition. The
//! design, with the rules that make a reuse sound on a SIMT machine, is in `docs/middle.md`
//! ("Value numbering", "Lanes: where a value may be read").

use crate::util::{Avail, reads_other_lanes, set_value};
use hashbrown::HashTable;
use kiln_analysis::{Changed, Context, PassError};
use kiln_ir::{Block, Function, Inst, Opcode, Value};
use rustc_hash::FxHasher;
use std::hash::{Hash, Hasher};

fn order(v: &Value) -> (u8, u32) {
    match *v {
        Value::Temp(t) => (0, t.0),
        Value::Const(c) => (1, c),
        Value::Undef(_) => (2, 0),
    }
}

/// Whether value numbering may reuse or be reused by `inst`: it computes its definitions from
/// its operands and immediates alone.
fn numbered(inst: &Inst, uniforms: bool) -> bool {
    let info = inst.op.info();
    !((!uniforms && inst.op == Opcode::Uniform)
        || info.side_effects
        || info.terminator
        || inst.defs.is_empty()
        || matches!(inst.op, Opcode::Reload | Opcode::ParallelCopy)
        || inst
            .defs
            .iter()
            .any(|d| d.fixed.is_some() || d.tied.is_some())
        || inst
            .operands
            .iter()
            .any(|o| matches!(o.value, Value::Undef(_))))
}

/// The operands in the order that makes commuted ones equal (the lower first).
fn operands(inst: &Inst) -> impl Iterator<Item = Value> + '_ {
    let swap = inst.op.info().commutative
        && inst.operands.len() == 2
        && order(&inst.operands[1].value) < order(&inst.operands[0].value);
    let n = inst.operands.len();
    (0..n).map(move |k| inst.operands[if swap { n - 1 - k } else { k }].value)
}

/// The block a value is reused within only: phis and ops that read other lanes.
fn scope(inst: &Inst, b: Block) -> Option<Block> {
    (inst.op.is_phi() || reads_other_lanes(inst)).then_some(b)
}

/// The value number's hash: opcode, lanes, immediates, operands (commuted to one order), the
/// definitions' classes and the block of a block-local value — what [`same`] compares.
fn hash_of(func: &Function, b: Block, inst: &Inst) -> u64 {
    let mut h = FxHasher::default();
    inst.op.hash(&mut h);
    inst.flags.all_lanes.hash(&mut h);
    inst.imms[..].hash(&mut h);
    for v in operands(inst) {
        v.hash(&mut h);
    }
    for d in &inst.defs {
        func.class(d.temp).hash(&mut h);
    }
    scope(inst, b).hash(&mut h);
    h.finish()
}

/// Whether `x` (in block `bx`) and `y` (in `by`) compute the same values.
fn same(func: &Function, (x, bx): (&Inst, Block), (y, by): (&Inst, Block)) -> bool {
    x.op == y.op
        && x.flags.all_lanes == y.flags.all_lanes
        && x.imms == y.imms
        && x.operands.len() == y.operands.len()
        && operands(x).eq(operands(y))
        && x.defs.len() == y.defs.len()
        && x.defs
            .iter()
            .zip(&y.defs)
            .all(|(a, b)| func.class(a.temp) == func.class(b.temp))
        && scope(x, bx) == scope(y, by)
}

/// The instruction a number names, and its block.
fn inst_of(func: &Function, m: Number) -> (&Inst, Block) {
    (&func.block(m.block).insts[m.index as usize], m.block)
}

/// Removes instructions that recompute a value available from a dominating one.
pub fn gvn(cx: &mut Context) -> Result<Changed, PassError> {
    gvn_with(cx, true)
}

/// [`gvn`] leaving `uniform` loads alone: reloading a uniform word is cheap (vc4 reads it from
/// the uniform stream), keeping one live is a register.
pub fn gvn_keep_uniform_loads(cx: &mut Context) -> Result<Changed, PassError> {
    gvn_with(cx, false)
}

/// A value number: the instruction that computes it first on the current dominator-tree path
/// (its block and index; instructions do not move until the pass ends) and its hash.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Number {
    hash: u64,
    block: Block,
    index: u32,
}

fn gvn_with(cx: &mut Context, uniforms: bool) -> Result<Changed, PassError> {
    let cfg = cx.cfg()?;
    let dom = cx.dominance()?;
    let facts = cx.def_sites();
    let func = cx.func_mut();
    let avail = Avail::with(facts, &cfg, &dom);
    let n = func.blocks.len();
    let mut children: Vec<Vec<Block>> = vec![Vec::new(); n];
    for b in func.block_ids().skip(1) {
        if let Some(d) = dom.0.idom(b) {
            children[d.index()].push(b);
        }
    }
    let mut subst: Vec<Option<Value>> = vec![None; func.temps.len()];
    let mut removed: Vec<(Block, usize)> = Vec::new();
    // The scoped table (Click's, with an undo log per dominator-tree scope): numbers are
    // compared in place, by the instructions they name, so no key is built or copied.
    let insts: usize = func.blocks.iter().map(|b| b.insts.len()).sum();
    let mut table: HashTable<Number> = HashTable::with_capacity(insts);
    // Undo log: the number entered, and the one it shadowed.
    let mut undo: Vec<(Number, Option<Number>)> = Vec::with_capacity(insts);
    // Iterative dominator-tree walk: Enter(b) then Leave(mark).
    enum Step {
        Enter(Block),
        Leave(usize),
    }
    let mut stack = vec![Step::Enter(Block(0))];
    let mut any = false;
    while let Some(step) = stack.pop() {
        let b = match step {
            // (The root's scope ends the walk: its numbers are not taken out one by one.)
            Step::Leave(_) if stack.is_empty() => break,
            Step::Leave(mark) => {
                while undo.len() > mark {
                    let (entered, shadowed) = undo.pop().expect("non-empty");
                    let Ok(entry) = table.find_entry(entered.hash, |m| *m == entered) else {
                        unreachable!("an entered number stays until its scope ends")
                    };
                    match shadowed {
                        Some(prev) => *entry.into_mut() = prev,
                        None => {
                            entry.remove();
                        }
                    }
                }
                continue;
            }
            Step::Enter(b) => b,
        };
        stack.push(Step::Leave(undo.len()));
        for &c in children[b.index()].iter().rev() {
            stack.push(Step::Enter(c));
        }
        for i in 0..func.block(b).insts.len() {
            let inst = &mut func.block_mut(b).insts[i];
            if !inst.op.is_phi() {
                for op in inst.operands.iter_mut() {
                    if let Value::Temp(t) = op.value
                        && let Some(v) = subst[t.index()]
                    {
                        set_value(op, v);
                    }
                }
            }
            let func = &*func;
            let inst = &func.block(b).insts[i];
            if !numbered(inst, uniforms) {
                continue;
            }
            let hash = hash_of(func, b, inst);
            let this = Number {
                hash,
                block: b,
                index: i as u32,
            };
            let found = table
                .find(hash, |&m| same(func, inst_of(func, m), (inst, b)))
                .copied();
            if let Some(prev) = found {
                let (prev_inst, _) = inst_of(func, prev);
                let usable = prev_inst.defs.iter().all(|p| {
                    let p = p.temp;
                    !avail.linear()[p.index()]
                        || (avail.reaches(p, b) && avail.sites()[p.index()].is_some())
                });
                if usable {
                    for (d, p) in inst.defs.iter().zip(&prev_inst.defs) {
                        subst[d.temp.index()] = Some(Value::Temp(p.temp));
                    }
                    removed.push((b, i));
                    any = true;
                    continue;
                }
                let entry = table.find_mut(hash, |&m| m == prev).expect("just found");
                *entry = this;
            } else {
                table.insert_unique(hash, this, |m| m.hash);
            }
            undo.push((this, found));
        }
    }
    if !any {
        return Ok(Changed::Nothing);
    }
    crate::util::substitute(func, &subst, |_, _, _, _, _| true);
    let mut gone: Vec<Vec<bool>> = func
        .blocks
        .iter()
        .map(|b| vec![false; b.insts.len()])
        .collect();
    for (b, i) in removed {
        gone[b.index()][i] = true;
    }
    for (block, gone) in func.blocks.iter_mut().zip(&gone) {
        let mut g = gone.iter();
        block
            .insts
            .retain(|_| !*g.next().expect("one flag per instruction"));
    }
    Ok(Changed::Instructions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::{parse_function, print_function};

    fn run(src: &str) -> (kiln_ir::Function, kiln_ir::Function) {
        let before = parse_function(src).unwrap();
        let mut cx = Context::new(before.clone());
        cx.run("gvn", gvn).unwrap();
        (before, cx.into_func())
    }

    #[test]
    fn reuses_dominating_values_commutatively() {
        let (_, after) = run("target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 3
    %2:s1 = uniform 3
    %3:v1 = fadd %0, %1
    %4:v1 = fadd %2, %0
    %5:v1 = flt %0, 1.0
    if.divergent %5, bb1, bb2, bb2
bb1:
    %6:v1 = fadd %1, %0
    output 1, %6
    jump bb2
bb2:
    output 0, %3
    output 2, %4
    return
}
");
        let text = print_function(&after);
        assert_eq!(text.matches("fadd").count(), 1, "{text}");
        assert_eq!(text.matches("uniform 3").count(), 1, "{text}");
        assert!(text.contains("output 1, %3"), "{text}");
        assert!(text.contains("output 2, %3"), "{text}");
    }

    /// A uniform value computed in the then side of a divergent if is not reused in the else
    /// side (no logical dominance), nor is a per-lane value computed in the then side reused
    /// after the endif; a uniform value computed inside a divergent loop is not reused after it.
    #[test]
    fn respects_lanes() {
        let src = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:v1 = flt %0, 1.0
    if.divergent %2, bb1, bb2, bb3
bb1:
    %3:v1 = fmul %0, %0
    %4:s1 = iadd %1, 7
    output 0, %3
    jump bb3
bb2:
    %5:s1 = iadd %1, 7
    output 1, %5
    jump bb3
bb3:
    %6:v1 = fmul %0, %0
    output 2, %6
    loop bb4, bb9
bb4:
    %7:v1 = phi 0, %10
    %8:s1 = imul %1, 3
    %9:v1 = ilt %7, %0
    if.divergent %9, bb5, bb6, bb6
bb5:
    jump bb6
bb6:
    %10:v1 = iadd %7, 1
    %11:v1 = ult 4, %10
    if.divergent %11, bb7, bb8, bb8
bb7:
    break bb9
bb8:
    continue bb4
bb9:
    %12:s1 = imul %1, 3
    output 3, %12
    output 4, %8
    return
}
";
        // (The text is not a valid program: `output 4, %8` reads a linear value after the
        // divergent loop; drop that line.)
        let src = src.replace("    output 4, %8\n", "");
        let (before, after) = run(&src);
        let text = print_function(&after);
        assert_eq!(text.matches("iadd %1, 7").count(), 2, "{text}");
        assert_eq!(text.matches("fmul %0, %0").count(), 2, "{text}");
        assert_eq!(text.matches("imul %1, 3").count(), 2, "{text}");
        crate::util::testing::agrees_on_16_lanes(&before, &after, 1.0 / 8.0, 8);
    }

    #[test]
    fn derivatives_only_within_a_block() {
        let (_, after) = run("target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:v1 = fddx %0
    %2:v1 = fddx %0
    %3:v1 = flt %0, 1.0
    if.divergent %3, bb1, bb2, bb2
bb1:
    %4:v1 = fddx %0
    output 1, %4
    jump bb2
bb2:
    output 0, %1
    output 2, %2
    return
}
");
        let text = print_function(&after);
        assert_eq!(text.matches("fddx").count(), 2, "{text}");
        assert!(text.contains("output 2, %1"), "{text}");
    }
}
