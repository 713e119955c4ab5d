//! Dominator trees by Cooper, Harvey & Kennedy, "A Simple, Fast Dominance Algorithm" (2001).
//!
//! Structured layout order is a reverse post-order of either CFG (every edge but a loop's back
//! edge goes forward), so the iteration runs over block indices.

use crate::cfg::Edges;
use crate::entity::Block;

/// A dominator tree with constant-time dominance queries (DFS entry/exit numbers).
#[derive(Clone, Debug)]
pub struct DomTree {
    idom: Vec<Option<Block>>,
    pre: Vec<u32>,
    post: Vec<u32>,
}

impl DomTree {
    /// Computes the dominator tree of `edges`, rooted at block 0.
    pub fn compute(edges: &Edges) -> DomTree {
        let n = edges.preds.len();
        let mut idom: Vec<Option<Block>> = vec![None; n];
        if n == 0 {
            return DomTree {
                idom,
                pre: vec![],
                post: vec![],
            };
        }
        idom[0] = Some(Block(0));
        let mut changed = true;
        while changed {
            changed = false;
            for b in 1..n {
                let mut new_idom: Option<Block> = None;
                for &p in &edges.preds[b] {
                    if idom[p.index()].is_none() {
                        continue;
                    }
                    new_idom = Some(match new_idom {
                        None => p,
                        Some(cur) => intersect(&idom, p, cur),
                    });
                }
                if new_idom.is_some() && idom[b] != new_idom {
                    idom[b] = new_idom;
                    changed = true;
                }
            }
        }
        // Children lists, then iterative DFS numbering.
        let mut children: Vec<Vec<Block>> = vec![Vec::new(); n];
        for (b, d) in idom.iter().enumerate().skip(1) {
            if let Some(d) = d {
                children[d.index()].push(Block::new(b));
            }
        }
        let (mut pre, mut post) = (vec![u32::MAX; n], vec![u32::MAX; n]);
        let mut clock = 0u32;
        let mut stack = vec![(Block(0), 0usize)];
        pre[0] = clock;
        clock += 1;
        while let Some((b, i)) = stack.pop() {
            if let Some(&c) = children[b.index()].get(i) {
                stack.push((b, i + 1));
                pre[c.index()] = clock;
                clock += 1;
                stack.push((c, 0));
            } else {
                post[b.index()] = clock;
                clock += 1;
            }
        }
        idom[0] = None;
        DomTree { idom, pre, post }
    }

    /// The immediate dominator; `None` for the entry and unreachable blocks.
    pub fn idom(&self, b: Block) -> Option<Block> {
        self.idom[b.index()]
    }

    /// Whether `b` is reachable from the entry.
    pub fn is_reachable(&self, b: Block) -> bool {
        self.pre[b.index()] != u32::MAX
    }

    /// Whether `a` dominates `b` (reflexive). False when either is unreachable.
    pub fn dominates(&self, a: Block, b: Block) -> bool {
        self.is_reachable(a)
            && self.is_reachable(b)
            && self.pre[a.index()] <= self.pre[b.index()]
            && self.post[b.index()] <= self.post[a.index()]
    }
}

fn intersect(idom: &[Option<Block>], mut a: Block, mut b: Block) -> Block {
    while a != b {
        while a > b {
            a = idom[a.index()].expect("processed block has an idom");
        }
        while b > a {
            b = idom[b.index()].expect("processed block has an idom");
        }
    }
    a
}
