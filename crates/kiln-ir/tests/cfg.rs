//! The derived CFGs on random programs: layout order is a reverse post-order, dominators agree
//! with their definition, and the two CFGs relate as the structured form says.

use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Block, Cfg, DomTree, cfg::Edges};
use proptest::prelude::*;

/// Blocks reachable from the entry without passing through `removed`.
fn reachable_without(edges: &Edges, removed: Option<Block>) -> Vec<bool> {
    let mut seen = vec![false; edges.succs.len()];
    if removed == Some(Block(0)) {
        return seen;
    }
    let mut stack = vec![Block(0)];
    seen[0] = true;
    while let Some(b) = stack.pop() {
        for &s in &edges.succs[b.index()] {
            if Some(s) != removed && !seen[s.index()] {
                seen[s.index()] = true;
                stack.push(s);
            }
        }
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn structure_gives_sound_cfgs(seed in any::<u64>(), size in 10usize..250) {
        let func = generate(&GenConfig { size, ..GenConfig::new(seed) });
        let cfg = Cfg::compute(&func).unwrap();
        for edges in [&cfg.logical, &cfg.linear] {
            // Layout order is a topological order of the forward edges.
            for b in cfg.rpo() {
                for &s in &edges.succs[b.index()] {
                    prop_assert!(s > b || cfg.is_back_edge(b, s), "{} -> {} goes backwards", b, s);
                }
            }
            // a dominates b iff b is unreachable once a is removed.
            let dom = DomTree::compute(edges);
            let reach = reachable_without(edges, None);
            for a in func.block_ids() {
                let without = reachable_without(edges, Some(a));
                for b in func.block_ids() {
                    let want = reach[a.index()] && reach[b.index()] && (a == b || !without[b.index()]);
                    prop_assert_eq!(dom.dominates(a, b), want, "{} dom {}", a, b);
                }
            }
        }
        // Every block is reachable in both CFGs; a block's logical and linear loops agree.
        prop_assert!(reachable_without(&cfg.logical, None).iter().all(|&r| r));
        prop_assert!(reachable_without(&cfg.linear, None).iter().all(|&r| r));
        for l in &cfg.loops {
            prop_assert!(cfg.logical.preds[l.header.index()].contains(&l.preheader));
            prop_assert!(cfg.logical.succs[l.latch.index()].contains(&l.header));
            prop_assert_eq!(cfg.linear.succs[l.latch.index()].contains(&l.exit), l.divergent);
        }
    }
}
