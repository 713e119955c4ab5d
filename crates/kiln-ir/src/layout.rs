//! Inserting and removing blocks while the structured layout stays consistent: block numbers are
//! layout positions, so every branch target past the change is renumbered, and phi operands are
//! reordered when a split changes a block's predecessors (they follow ascending block order).
//!
//! [`split_edge`] splits the edges that the structured form can express: an `if` without an
//! else region (the edge from the `if` to its endif gets an empty else block), and a `jump`
//! (a block after its source, at the end of the same region). A divergent loop's back edge is
//! critical on the linear CFG (the back-edge block also flows to the exit when no lane
//! remains) but needs no split block: copies placed at the end of the back-edge block write
//! only the continuing lanes, or, when they write every lane, are kept apart by interference
//! from every value live into the exit (docs/ir.md).

use crate::cfg::Cfg;
use crate::entity::Block;
use crate::function::{BlockData, Function};
use crate::inst::{Inst, Operand};
use crate::opcode::Opcode;
use std::ops::Range;

impl Function {
    /// Inserts `n` empty blocks before `at` (at the end when `at` is past the last block) and
    /// renumbers every branch target at or after `at`. The caller fills the new blocks and
    /// retargets what should reach them.
    pub fn insert_blocks(&mut self, at: Block, n: usize) -> Range<Block> {
        let at = at.index().min(self.blocks.len());
        let shift = |b: &mut Block| {
            if b.index() >= at {
                *b = Block::new(b.index() + n);
            }
        };
        for inst in self.blocks.iter_mut().flat_map(|b| &mut b.insts) {
            inst.targets.iter_mut().for_each(shift);
        }
        self.blocks
            .splice(at..at, std::iter::repeat_with(BlockData::default).take(n));
        Block::new(at)..Block::new(at + n)
    }

    /// Removes the blocks of `range` and renumbers the targets after it. Branches into the
    /// range must be gone (retargeted or removed) first.
    pub fn remove_blocks(&mut self, range: Range<Block>) -> Result<(), String> {
        let (lo, hi) = (
            range.start.index(),
            range.end.index().min(self.blocks.len()),
        );
        if lo >= hi {
            return Ok(());
        }
        self.blocks.drain(lo..hi);
        for (b, block) in self.blocks.iter_mut().enumerate() {
            for inst in &mut block.insts {
                for t in inst.targets.iter_mut() {
                    if t.index() >= hi {
                        *t = Block::new(t.index() - (hi - lo));
                    } else if t.index() >= lo {
                        return Err(format!(
                            "bb{b} still branches to removed block bb{}",
                            t.index()
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Splits the edge `from → to` (of either CFG) with a new empty block ending in a `jump`, and
/// returns it. `cfg` is the function's CFG before the split. A block ending in `jump` has one
/// edge per CFG and the new block takes both. Phi operands follow the new predecessor order. Edges the structured form cannot express (a loop back edge, a
/// `break`, a divergent `continue`) are refused with the reason.
pub fn split_edge(func: &mut Function, cfg: &Cfg, from: Block, to: Block) -> Result<Block, String> {
    Ok(split_edges(func, cfg, &[(from, to)])?[0])
}

/// Splits every edge of `edges` (distinct, all edges of `cfg`, the function's CFG) at once:
/// what [`split_edge`] does to each, with one renumbering of the blocks and one CFG
/// computation for the whole batch, so that splitting k edges costs O(instructions + k) rather
/// than k times the function. The new block of each edge, in the order of `edges` (a block's
/// edges share one).
pub fn split_edges(
    func: &mut Function,
    cfg: &Cfg,
    edges: &[(Block, Block)],
) -> Result<Vec<Block>, String> {
    let n = func.blocks.len();
    // The plan of each split, in the old numbering: where its block goes, what it jumps to.
    struct Split {
        from: Block,
        at: usize,
        op: Opcode,
        target: Block,
    }
    let mut plans = Vec::with_capacity(edges.len());
    // A block's splittable edges are one split (a jump's logical and linear edges are split by
    // one block; an if has one splittable edge): the plan of each edge.
    let mut plan_of_from: Vec<Option<usize>> = vec![None; n];
    let mut plan_of_edge = Vec::with_capacity(edges.len());
    for &(from, to) in edges {
        if !cfg.linear.succs[from.index()].contains(&to)
            && !cfg.logical.succs[from.index()].contains(&to)
        {
            return Err(format!("{from} → {to} is not an edge"));
        }
        if let Some(k) = plan_of_from[from.index()] {
            plan_of_edge.push(k);
            continue;
        }
        let Some(term) = func.block(from).terminator() else {
            return Err(format!("{from} has no terminator"));
        };
        let (at, target) = match term.op {
            Opcode::If if term.targets[1] == term.targets[2] && term.targets[2] == to => {
                (to.index(), to)
            }
            Opcode::Jump => (from.index() + 1, term.targets[0]),
            op => {
                return Err(format!(
                    "{from} → {to} cannot be split in the structured form (`{op}`)"
                ));
            }
        };
        plan_of_from[from.index()] = Some(plans.len());
        plan_of_edge.push(plans.len());
        plans.push(Split {
            from,
            at,
            op: term.op,
            target,
        });
    }
    // The new layout: before old block b, the new blocks placed at b — a jump's (the end of the
    // region before) ahead of an if's new else region, as one split after the other places them.
    let mut order: Vec<usize> = (0..plans.len()).collect();
    order.sort_by_key(|&k| (plans[k].at, plans[k].op == Opcode::If));
    let mut new_of_old = vec![Block(0); n + 1];
    let mut new_block = vec![Block(0); plans.len()];
    let mut next = 0usize;
    let mut k = 0;
    for (b, slot) in new_of_old.iter_mut().enumerate() {
        while k < order.len() && plans[order[k]].at == b {
            new_block[order[k]] = Block::new(next);
            next += 1;
            k += 1;
        }
        *slot = Block::new(next);
        next += 1;
    }
    let old_blocks = std::mem::take(&mut func.blocks);
    let mut blocks: Vec<crate::function::BlockData> = std::iter::repeat_with(Default::default)
        .take(n + plans.len())
        .collect();
    for (b, data) in old_blocks.into_iter().enumerate() {
        blocks[new_of_old[b].index()] = data;
    }
    func.blocks = blocks;
    for inst in func.blocks.iter_mut().filter_map(|b| b.insts.last_mut()) {
        for t in inst.targets.iter_mut() {
            *t = new_of_old[t.index()];
        }
    }
    for (plan, &new) in plans.iter().zip(&new_block) {
        let mut jump = Inst::new(Opcode::Jump);
        jump.targets = [new_of_old[plan.target.index()]].into();
        func.block_mut(new).insts.push(jump);
        let term = func
            .block_mut(new_of_old[plan.from.index()])
            .insts
            .last_mut()
            .expect("checked above");
        match plan.op {
            Opcode::If => term.targets[1] = new,
            _ => term.targets[0] = new,
        }
    }
    // The phis of every block whose predecessors changed, permuted to the new order: a new
    // block stands for the predecessor it took the place of.
    let new_cfg = Cfg::compute(func).map_err(|e| format!("{}: {}", e.block, e.message))?;
    let mut old_of_new: Vec<Option<Block>> = vec![None; func.blocks.len()];
    for b in 0..n {
        old_of_new[new_of_old[b].index()] = Some(Block::new(b));
    }
    let mut from_of_new: Vec<Option<Block>> = vec![None; func.blocks.len()];
    for (plan, &new) in plans.iter().zip(&new_block) {
        from_of_new[new.index()] = Some(plan.from);
    }
    let mut touched: Vec<Block> = plans
        .iter()
        .flat_map(|p| {
            let f = p.from.index();
            cfg.logical.succs[f]
                .iter()
                .chain(&cfg.linear.succs[f])
                .copied()
        })
        .collect();
    touched.sort_unstable();
    touched.dedup();
    for old_to in touched {
        let to = new_of_old[old_to.index()];
        for inst in func
            .block_mut(to)
            .insts
            .iter_mut()
            .take_while(|i| i.op.is_phi())
        {
            let (old_preds, new_preds) = if inst.op == Opcode::Phi {
                (
                    &cfg.logical.preds[old_to.index()],
                    &new_cfg.logical.preds[to.index()],
                )
            } else {
                (
                    &cfg.linear.preds[old_to.index()],
                    &new_cfg.linear.preds[to.index()],
                )
            };
            let stands_for = stand_ins(old_preds, new_preds, &old_of_new, &from_of_new)
                .map_err(|e| format!("{old_to}: {e}"))?;
            let mut ops: Vec<Operand> = Vec::with_capacity(new_preds.len());
            for old_p in stands_for {
                let k = old_preds
                    .iter()
                    .position(|&q| q == old_p)
                    .ok_or_else(|| format!("{old_p} was not a predecessor of {old_to} before"))?;
                ops.push(inst.operands[k]);
            }
            inst.operands = ops.into_iter().collect();
        }
    }
    Ok(plan_of_edge.into_iter().map(|k| new_block[k]).collect())
}

/// The old predecessor each new predecessor stands for: an old block itself; a new block, the
/// old predecessor that no longer reaches the block directly — its split's source, or on the
/// linear CFG of a divergent `if` with no else, the end of the then region (the one left).
fn stand_ins(
    old_preds: &[Block],
    new_preds: &[Block],
    old_of_new: &[Option<Block>],
    from_of_new: &[Option<Block>],
) -> Result<Vec<Block>, String> {
    let kept: Vec<Block> = new_preds
        .iter()
        .filter_map(|p| old_of_new[p.index()])
        .collect();
    let mut gone: Vec<Block> = old_preds
        .iter()
        .copied()
        .filter(|q| !kept.contains(q))
        .collect();
    let mut out: Vec<Option<Block>> = new_preds.iter().map(|p| old_of_new[p.index()]).collect();
    // New blocks whose source is gone stand for it.
    for (k, p) in new_preds.iter().enumerate() {
        if out[k].is_none()
            && let Some(from) = from_of_new[p.index()]
            && let Some(g) = gone.iter().position(|&q| q == from)
        {
            out[k] = Some(gone.remove(g));
        }
    }
    // One new block and one gone predecessor left: the one for the other.
    let open: Vec<usize> = (0..out.len()).filter(|&k| out[k].is_none()).collect();
    match (open.as_slice(), gone.as_slice()) {
        ([], _) => {}
        ([k], [g]) => out[*k] = Some(*g),
        ([k], []) => out[*k] = from_of_new[new_preds[*k].index()],
        _ => return Err("cannot tell which predecessor a new block replaces".into()),
    }
    Ok(out.into_iter().map(|b| b.expect("filled above")).collect())
}
