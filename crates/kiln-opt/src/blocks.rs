//! Structural edits: removing blocks from the structured layout and renumbering the rest.

use kiln_ir::{Block, Function, Inst};

/// Removes the blocks in `gone`; a branch to one of them goes to `into` instead. Every other
/// block keeps its order, so the layout stays structured when the caller has merged the removed
/// blocks' contents into `into` (which must not be removed). Linear in the instructions.
pub fn remove_blocks(func: &mut Function, gone: &[Block], into: Block) {
    let merged: Vec<(Block, Block)> = gone.iter().map(|&b| (b, into)).collect();
    remove_merged(func, &merged);
}

/// Removes each block of `merged` whose contents went to the block beside it; a branch to a
/// removed block goes to where its contents went (followed through blocks removed the same
/// way). Every other block keeps its order. Linear in the instructions: many edits of one pass
/// cost one renumbering.
pub fn remove_merged(func: &mut Function, merged: &[(Block, Block)]) {
    let n = func.blocks.len();
    let mut into: Vec<Option<Block>> = vec![None; n];
    for &(b, to) in merged {
        into[b.index()] = Some(to);
    }
    // New index of every kept block.
    let mut new_index = vec![0u32; n];
    let mut next = 0u32;
    for b in 0..n {
        new_index[b] = next;
        if into[b].is_none() {
            next += 1;
        }
    }
    // Where a removed block's contents are now, following chains once per block.
    let mut home: Vec<u32> = (0..n as u32).collect();
    for b in 0..n {
        let mut h = b;
        while let Some(to) = into[h] {
            h = to.index();
            if h < b {
                h = home[h] as usize;
                break;
            }
        }
        home[b] = h as u32;
    }
    let target = |b: Block| Block(new_index[home[b.index()] as usize]);
    let mut k = 0;
    func.blocks.retain(|_| {
        k += 1;
        into[k - 1].is_none()
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
