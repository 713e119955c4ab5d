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
    let linear_edge = cfg.linear.succs[from.index()].contains(&to);
    if !linear_edge && !cfg.logical.succs[from.index()].contains(&to) {
        return Err(format!("{from} → {to} is not an edge"));
    }
    let Some(term) = func.block(from).terminator() else {
        return Err(format!("{from} has no terminator"));
    };
    let at = match term.op {
        // An if without else: the new block is the else region, right before the endif.
        Opcode::If if term.targets[1] == term.targets[2] && term.targets[2] == to => to,
        // A jump (to the next block, or from a region's last block to its endif): the new
        // block follows `from` at the end of the same region.
        // It is the block's only edge in each CFG (a divergent if's then region flows linearly
        // to its else region, logically to the endif: the new block splits both).
        Opcode::Jump => Block::new(from.index() + 1),
        op => {
            return Err(format!(
                "{from} → {to} cannot be split in the structured form (`{op}`)"
            ));
        }
    };
    let op = term.op;
    let old_succs: Vec<Block> = if op == Opcode::Jump {
        let mut v: Vec<Block> = cfg.logical.succs[from.index()].to_vec();
        v.extend(&cfg.linear.succs[from.index()]);
        v.sort_unstable();
        v.dedup();
        v
    } else {
        vec![to]
    };
    let target = if op == Opcode::Jump {
        term.targets[0]
    } else {
        to
    };
    let new = func.insert_blocks(at, 1).start;
    let renumber = |b: Block| {
        if b >= new {
            Block::new(b.index() + 1)
        } else {
            b
        }
    };
    let from = renumber(from);
    let mut jump = Inst::new(Opcode::Jump);
    jump.targets = [renumber(target)].into();
    func.block_mut(new).insts.push(jump);
    let term = func
        .block_mut(from)
        .insts
        .last_mut()
        .expect("checked above");
    match op {
        Opcode::If => term.targets[1] = new,
        _ => term.targets[0] = new,
    }
    for succ in old_succs {
        reorder_phis(func, cfg, from, new, renumber(succ))
            .map_err(|e| format!("split {from} → {to}: {e}"))?;
    }
    Ok(new)
}

/// After a split, `to`'s predecessor `from` is replaced by `new`: permute the operands of its
/// phis to the new ascending predecessor order.
fn reorder_phis(
    func: &mut Function,
    old_cfg: &Cfg,
    from: Block,
    new: Block,
    to: Block,
) -> Result<(), String> {
    let new_cfg = Cfg::compute(func).map_err(|e| format!("{}: {}", e.block, e.message))?;
    // Old block numbers of the blocks at or after the insertion point were one lower.
    let old_number = |b: Block| {
        if b > new {
            Block::new(b.index() - 1)
        } else {
            b
        }
    };
    let old_to = old_number(to);
    let from_old = old_number(from);
    for inst in func
        .block_mut(to)
        .insts
        .iter_mut()
        .filter(|i| i.op.is_phi())
    {
        let (old_preds, new_preds) = if inst.op == Opcode::Phi {
            (
                &old_cfg.logical.preds[old_to.index()],
                &new_cfg.logical.preds[to.index()],
            )
        } else {
            (
                &old_cfg.linear.preds[old_to.index()],
                &new_cfg.linear.preds[to.index()],
            )
        };
        // The new block stands for the one old predecessor that no longer reaches `to`
        // directly: `from`, or on the linear CFG of a divergent `if` with no else, the end of
        // the then region (which now flows through the new else block).
        let gone: Vec<Block> = old_preds
            .iter()
            .copied()
            .filter(|&q| !new_preds.iter().any(|&p| p != new && old_number(p) == q))
            .collect();
        let replaced = match gone.as_slice() {
            [one] => *one,
            _ => from_old,
        };
        let mut ops: Vec<Operand> = Vec::with_capacity(new_preds.len());
        for &p in new_preds {
            let old_p = if p == new { replaced } else { old_number(p) };
            let k = old_preds
                .iter()
                .position(|&q| q == old_p)
                .ok_or_else(|| format!("{p} was not a predecessor of {to} before"))?;
            ops.push(inst.operands[k]);
        }
        inst.operands = ops.into_iter().collect();
    }
    Ok(())
}
