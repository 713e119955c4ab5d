//! Structural edits: removing blocks from the structured layout and renumbering the rest.

use kiln_ir::{Block, Function, Inst};

/// Removes the blocks in `gone`; a branch to one of them goes to `into` instead. Every other
/// block keeps its order, so the layout stays structured when the caller has merged the removed
/// blocks' contents into `into` (which must not be removed). Linear in the instructions.
pub fn remove_blocks(func: &mut Function, gone: &[Block], into: Block) {
    let n = func.blocks.len();
    let mut removed = vec![false; n];
    for b in gone {
        removed[b.index()] = true;
    }
    // New index of every kept block.
    let mut new_index = vec![0u32; n];
    let mut next = 0u32;
    for b in 0..n {
        new_index[b] = next;
        if !removed[b] {
            next += 1;
        }
    }
    let target = |b: Block| {
        let b = if removed[b.index()] { into } else { b };
        Block(new_index[b.index()])
    };
    let mut k = 0;
    func.blocks.retain(|_| {
        k += 1;
        !removed[k - 1]
    });
    for block in &mut func.blocks {
        if let Some(term) = block.insts.last_mut() {
            for t in term.targets.iter_mut() {
                *t = target(*t);
            }
        }
    }
}

/// Moves the copies made of phis behind any remaining phis (they are at the block's start).
pub fn copies_after_phis(insts: &mut Vec<Inst>) {
    let (phis, rest): (Vec<Inst>, Vec<Inst>) = insts.drain(..).partition(|i| i.op.is_phi());
    insts.extend(phis);
    insts.extend(rest);
}
