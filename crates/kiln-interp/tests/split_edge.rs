//! Edge splitting keeps programs structured, verified and meaning the same: every edge of
//! generated programs that the structured form can split is split, one at a time, and the
//! interpreter runs both versions.

use kiln_interp::{Env, compare, run_ssa};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::layout::{split_edge, split_edges};
use kiln_ir::{Block, Cfg, Opcode, print_function, verify};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 60, ..ProptestConfig::default() })]

    #[test]
    fn splitting_any_splittable_edge_keeps_meaning(seed in any::<u64>(), size in 10usize..120) {
        let func = generate(&GenConfig { size, ..GenConfig::new(seed) });
        let env = Env::for_function(&func, 16, seed);
        prop_assume!(run_ssa(&func, &env).is_ok());
        let cfg = Cfg::compute(&func).unwrap();
        let edges = edges_of(&func, &cfg);
        let mut split = 0;
        for (from, to) in edges {
            let mut f = func.clone();
            let term = func.block(from).terminator().unwrap().op;
            match split_edge(&mut f, &cfg, from, to) {
                Ok(new) => {
                    split += 1;
                    prop_assert!(matches!(term, Opcode::If | Opcode::Jump));
                    prop_assert_eq!(f.blocks.len(), func.blocks.len() + 1);
                    prop_assert!(f.block(new).insts.len() == 1);
                    if let Err(e) = verify(&f) {
                        return Err(TestCaseError::fail(format!("{from} → {to}: {}\n{}", e[0], print_function(&f))));
                    }
                    let new_cfg = Cfg::compute(&f).unwrap();
                    prop_assert_eq!(new_cfg.loops.len(), cfg.loops.len());
                    // The new block sits on the edge: it has one predecessor, one successor.
                    prop_assert_eq!(new_cfg.logical.preds[new.index()].len(), 1);
                    if let Err(m) = compare(&func, &f, &env) {
                        return Err(TestCaseError::fail(format!("{from} → {to}: {m}\n{}", print_function(&f))));
                    }
                }
                Err(e) => prop_assert!(!matches!(term, Opcode::Jump), "a jump edge is always splittable: {}", e),
            }
        }
        prop_assert!(split > 0 || func.blocks.len() == 1);
    }
}

/// Splitting the edge from an `if` to its endif when there is no else region adds one; the
/// endif's phi operands follow the new predecessor order.
#[test]
fn if_without_else_gets_an_else_block() {
    let text = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:v1 = flt %1, %0
    if.divergent %2, bb1, bb2, bb2
bb1:
    %3:v1 = fadd %0, 1.0
    jump bb2
bb2:
    %4:v1 = phi %0, %3
    output 0, %4
    return
}
";
    let mut f = kiln_ir::parse_function(text).unwrap();
    let before = f.clone();
    let cfg = Cfg::compute(&f).unwrap();
    let new = split_edge(&mut f, &cfg, Block(0), Block(2)).unwrap();
    assert_eq!(new, Block(2));
    let printed = print_function(&f);
    assert!(
        printed.contains("if.divergent %2, bb1, bb2, bb3"),
        "{printed}"
    );
    // Predecessors of the endif are now bb1 (then) and bb2 (the new else): operands swap.
    assert!(printed.contains("phi %3, %0"), "{printed}");
    verify(&f).unwrap();
    let mut env = Env::new(16);
    env.inputs
        .insert(0, (0..16).map(|l| (l as f32).to_bits()).collect());
    env.uniforms.insert(0, 7.5f32.to_bits());
    compare(&before, &f, &env).unwrap();
}

/// A loop's back edge cannot be expressed with a block between: refused, with the reason.
#[test]
fn back_edges_are_refused() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/seed003_loop.kir"
    ))
    .unwrap();
    let mut f = kiln_ir::parse_function(&text).unwrap();
    let cfg = Cfg::compute(&f).unwrap();
    let err = split_edge(&mut f, &cfg, Block(3), Block(1)).unwrap_err();
    assert!(err.contains("continue"), "{err}");
    assert!(
        split_edge(&mut f, &cfg, Block(0), Block(3)).is_err(),
        "not an edge"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60, ..ProptestConfig::default() })]

    /// Splitting a batch of edges at once (`split_edges`) makes the function that splitting
    /// them one at a time makes (`split_edge`, the remaining edges renumbered after each), and
    /// keeps its meaning.
    #[test]
    fn a_batch_of_splits_is_the_splits_one_at_a_time(seed in any::<u64>(), size in 10usize..120, pick in any::<u64>()) {
        let func = generate(&GenConfig { size, ..GenConfig::new(seed) });
        let env = Env::for_function(&func, 16, seed);
        prop_assume!(run_ssa(&func, &env).is_ok());
        let cfg = Cfg::compute(&func).unwrap();
        // Edges the structured form can split, about half of their sources, one edge per
        // source (a block's splittable edges are one split).
        let mut edges: Vec<(Block, Block)> = Vec::new();
        for (b, s) in edges_of(&func, &cfg) {
            let fits = split_edge(&mut func.clone(), &cfg, b, s).is_ok();
            let fresh = !edges.iter().any(|e| e.0 == b);
            if fits && fresh && (pick >> (b.index() % 64)) & 1 == 1 {
                edges.push((b, s));
            }
        }
        let mut one = func.clone();
        let mut left = edges.clone();
        while let Some((from, to)) = (!left.is_empty()).then(|| left.remove(0)) {
            let c = Cfg::compute(&one).unwrap();
            let new = split_edge(&mut one, &c, from, to).unwrap();
            for e in &mut left {
                for x in [&mut e.0, &mut e.1] {
                    if *x >= new {
                        *x = Block::new(x.index() + 1);
                    }
                }
            }
        }
        let mut batch = func.clone();
        let news = split_edges(&mut batch, &cfg, &edges).unwrap();
        prop_assert_eq!(news.len(), edges.len());
        prop_assert!(batch.blocks == one.blocks, "{} edges {:?}\nbatch:\n{}\none at a time:\n{}", edges.len(), edges, print_function(&batch), print_function(&one));
        if let Err(e) = verify(&batch) {
            return Err(TestCaseError::fail(format!("{}\n{}", e[0], print_function(&batch))));
        }
        if let Err(m) = compare(&func, &batch, &env) {
            return Err(TestCaseError::fail(format!("{m}\n{}", print_function(&batch))));
        }
    }
}

/// Every edge of either CFG, once.
fn edges_of(func: &kiln_ir::Function, cfg: &Cfg) -> Vec<(Block, Block)> {
    let mut edges: Vec<(Block, Block)> = Vec::new();
    for b in func.block_ids() {
        for s in cfg.logical.succs[b.index()]
            .iter()
            .chain(&cfg.linear.succs[b.index()])
        {
            if !edges.contains(&(b, *s)) {
                edges.push((b, *s));
            }
        }
    }
    edges
}
