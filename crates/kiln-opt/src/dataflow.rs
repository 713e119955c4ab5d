//! A dataflow framework over bitsets (Kildall's iterative algorithm, as i965's
//! `brw_fs_copy_propagation.cpp` and ACO's liveness run it): forward or backward, union or
//! intersection as the meet, on the logical or the linear CFG, solved with a worklist visited in
//! reverse post-order (the structured layout order; backward problems visit it reversed).
//!
//! Seed 004 is the rule the framework enforces rather than papers over: only the entry block may
//! lack predecessors. A forward must-problem (intersection) gives a block without predecessors the
//! empty meet — every fact — and that error then cascades through its successors; here such a CFG
//! is refused with [`DataflowError`]. The ENDIF block of an `if` starts a block of its own and is
//! reached from the IF and ELSE sides (`kiln_ir::cfg`), so the if / break / endif shape of a loop
//! has its predecessors and its facts.

use fixedbitset::FixedBitSet;
use kiln_ir::cfg::Edges;
use kiln_ir::{Block, Cfg};

/// Which way facts flow.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Direction {
    /// From predecessors to successors; the boundary is the entry block.
    Forward,
    /// From successors to predecessors; the boundary is every block without successors.
    Backward,
}

/// How facts from several neighbours combine.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Meet {
    /// A fact holds if it holds along some path (may-problems: liveness, reaching definitions).
    Union,
    /// A fact holds if it holds along every path (must-problems: available copies).
    Intersection,
}

/// Which of the two CFGs (`docs/ir.md`) a problem runs on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Graph {
    /// What one lane does.
    Logical,
    /// What the wave executes.
    Linear,
}

impl Graph {
    pub fn edges(self, cfg: &Cfg) -> &Edges {
        match self {
            Graph::Logical => &cfg.logical,
            Graph::Linear => &cfg.linear,
        }
    }
}

/// A dataflow problem over sets of `bits()` facts.
pub trait Problem {
    fn direction(&self) -> Direction;
    fn meet(&self) -> Meet;
    fn bits(&self) -> usize;
    /// The facts entering at the boundary (the entry block forward, exits backward); empty by
    /// default.
    fn boundary(&self) -> FixedBitSet {
        FixedBitSet::with_capacity(self.bits())
    }
    /// The block's transfer function: `output = f(input)`, where input is the state at the
    /// block's start (forward) or end (backward).
    fn transfer(&self, block: Block, input: &FixedBitSet, output: &mut FixedBitSet);
}

/// The classic gen/kill problem: `output = gen ∪ (input − kill)`.
#[derive(Clone, Debug)]
pub struct GenKill {
    pub direction: Direction,
    pub meet: Meet,
    pub bits: usize,
    pub gen_sets: Vec<FixedBitSet>,
    pub kill_sets: Vec<FixedBitSet>,
    pub boundary: FixedBitSet,
}

impl GenKill {
    /// Empty gen and kill sets for `blocks` blocks.
    pub fn new(direction: Direction, meet: Meet, bits: usize, blocks: usize) -> GenKill {
        GenKill {
            direction,
            meet,
            bits,
            gen_sets: vec![FixedBitSet::with_capacity(bits); blocks],
            kill_sets: vec![FixedBitSet::with_capacity(bits); blocks],
            boundary: FixedBitSet::with_capacity(bits),
        }
    }
}

impl Problem for GenKill {
    fn direction(&self) -> Direction {
        self.direction
    }
    fn meet(&self) -> Meet {
        self.meet
    }
    fn bits(&self) -> usize {
        self.bits
    }
    fn boundary(&self) -> FixedBitSet {
        self.boundary.clone()
    }
    fn transfer(&self, b: Block, input: &FixedBitSet, output: &mut FixedBitSet) {
        output.clone_from(input);
        output.difference_with(&self.kill_sets[b.index()]);
        output.union_with(&self.gen_sets[b.index()]);
    }
}

/// The fixpoint: the facts at the start and at the end of every block, in program order
/// (whatever the direction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Solution {
    pub block_start: Vec<FixedBitSet>,
    pub block_end: Vec<FixedBitSet>,
    /// Blocks evaluated until the fixpoint (for tests and statistics).
    pub visits: usize,
}

/// A CFG that breaks seed 004's rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataflowError {
    pub block: Block,
}

impl std::fmt::Display for DataflowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} has no predecessor: only the entry block may have none (seed 004)",
            self.block
        )
    }
}

/// Solves `problem` on `graph` of `cfg`.
pub fn solve(problem: &impl Problem, cfg: &Cfg, graph: Graph) -> Result<Solution, DataflowError> {
    solve_on(problem, graph.edges(cfg))
}

/// Solves `problem` on explicit edges (block 0 is the entry; layout order is a reverse
/// post-order, as in every structured function).
pub fn solve_on(problem: &impl Problem, edges: &Edges) -> Result<Solution, DataflowError> {
    let n = edges.preds.len();
    let bits = problem.bits();
    if let Some(b) = (1..n).find(|&b| edges.preds[b].is_empty()) {
        return Err(DataflowError {
            block: Block::new(b),
        });
    }
    let forward = problem.direction() == Direction::Forward;
    // `into[b]`: neighbours whose output flows into b; `onto[b]`: those b's output flows to.
    let (into, onto) = if forward {
        (&edges.preds, &edges.succs)
    } else {
        (&edges.succs, &edges.preds)
    };
    let top = {
        let mut s = FixedBitSet::with_capacity(bits);
        if problem.meet() == Meet::Intersection {
            s.insert_range(..);
        }
        s
    };
    let boundary = problem.boundary();
    let is_boundary = |b: usize| if forward { b == 0 } else { into[b].is_empty() };
    // Output of every block, initialised to the meet's identity (⊤ for must-problems).
    let mut out: Vec<FixedBitSet> = vec![top.clone(); n];
    let mut input: Vec<FixedBitSet> = vec![top.clone(); n];
    // Visiting order: reverse post-order forward, its reverse backward.
    let order: Vec<usize> = if forward {
        (0..n).collect()
    } else {
        (0..n).rev().collect()
    };
    let mut pos = vec![0usize; n];
    for (p, &b) in order.iter().enumerate() {
        pos[b] = p;
    }
    let mut pending = FixedBitSet::with_capacity(n);
    pending.insert_range(..);
    let mut visits = 0;
    let mut scratch = FixedBitSet::with_capacity(bits);
    // Sweeps over the pending blocks in order until none is left: each sweep is a pass of the
    // worklist in reverse post-order, and a structured CFG needs loop depth + 2 of them.
    while pending.count_ones(..) > 0 {
        for (p, &b) in order.iter().enumerate() {
            if !pending.contains(p) {
                continue;
            }
            pending.set(p, false);
            visits += 1;
            let mut inb = if is_boundary(b) {
                boundary.clone()
            } else {
                top.clone()
            };
            for nb in &into[b] {
                match problem.meet() {
                    Meet::Union => inb.union_with(&out[nb.index()]),
                    Meet::Intersection => inb.intersect_with(&out[nb.index()]),
                }
            }
            problem.transfer(Block::new(b), &inb, &mut scratch);
            input[b] = inb;
            if scratch != out[b] {
                std::mem::swap(&mut out[b], &mut scratch);
                for s in &onto[b] {
                    pending.insert(pos[s.index()]);
                }
            }
        }
    }
    let (block_start, block_end) = if forward { (input, out) } else { (out, input) };
    Ok(Solution {
        block_start,
        block_end,
        visits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::generate::{GenConfig, Rng, generate};
    use kiln_ir::parse_function;

    /// Seed 004's if / break / endif loop: the available set at the ENDIF block (bb3) holds what
    /// the preheader made available, because the ENDIF has the IF block as predecessor.
    const SEED004: &str = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:s1 = uniform 1
    loop bb1, bb4
bb1:
    %3:v1 = phi %0, %6
    %4:v1 = flt %1, %3
    if.divergent %4, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    %5:v1 = fadd %3, %2
    %6:v1 = fmul %5, 0.5
    continue bb1
bb4:
    output 0, %3
    return
}
";

    fn seed004() -> (kiln_ir::Function, Cfg) {
        let f = parse_function(SEED004).unwrap();
        let cfg = Cfg::compute(&f).unwrap();
        (f, cfg)
    }

    fn set(bits: usize, ones: &[usize]) -> FixedBitSet {
        let mut s = FixedBitSet::with_capacity(bits);
        for &o in ones {
            s.insert(o);
        }
        s
    }

    #[test]
    fn must_facts_reach_the_endif_of_if_break_endif() {
        let (_, cfg) = seed004();
        // Fact 0 made in the preheader, fact 1 in the loop header, fact 2 in the endif block,
        // fact 3 killed in the endif block.
        let mut p = GenKill::new(Direction::Forward, Meet::Intersection, 4, 5);
        p.gen_sets[0] = set(4, &[0, 3]);
        p.gen_sets[1] = set(4, &[1]);
        p.gen_sets[3] = set(4, &[2]);
        p.kill_sets[3] = set(4, &[3, 1]);
        let s = solve(&p, &cfg, Graph::Logical).unwrap();
        assert_eq!(s.block_start[0], set(4, &[]));
        // Header: from the preheader {0,3} and the latch {0,2}: only 0 on both paths.
        assert_eq!(s.block_start[1], set(4, &[0]));
        assert_eq!(s.block_start[3], set(4, &[0, 1]));
        assert_eq!(s.block_end[3], set(4, &[0, 2]));
        assert_eq!(s.block_start[4], set(4, &[0, 1]));
        // On the linear CFG the exit is reached from the latch only (divergent break).
        let s = solve(&p, &cfg, Graph::Linear).unwrap();
        assert_eq!(s.block_start[4], set(4, &[0, 2]));
    }

    #[test]
    fn an_endif_without_predecessors_is_refused() {
        // The CFG before seed 004's patch: the ENDIF block (3) has no parents.
        let (_, cfg) = seed004();
        let mut edges = cfg.logical.clone();
        edges.preds[3].clear();
        for s in &mut edges.succs {
            s.retain(|b| b.index() != 3);
        }
        let p = GenKill::new(Direction::Forward, Meet::Intersection, 1, 5);
        assert_eq!(
            solve_on(&p, &edges).unwrap_err(),
            DataflowError { block: Block(3) }
        );
    }

    #[test]
    fn backward_liveness_of_seed004() {
        let (_, cfg) = seed004();
        // Facts: temps 0..7. use = gen, def = kill (phis: operands used at the end of preds).
        let mut p = GenKill::new(Direction::Backward, Meet::Union, 7, 5);
        p.gen_sets[0] = set(7, &[0]); // %0 feeds the phi from bb0
        p.kill_sets[0] = set(7, &[0, 1, 2]);
        p.gen_sets[1] = set(7, &[1]);
        p.kill_sets[1] = set(7, &[3, 4]);
        p.gen_sets[3] = set(7, &[3, 2]);
        p.kill_sets[3] = set(7, &[5, 6]);
        p.gen_sets[4] = set(7, &[3]);
        let s = solve(&p, &cfg, Graph::Logical).unwrap();
        assert_eq!(s.block_end[4], set(7, &[]));
        assert_eq!(s.block_start[4], set(7, &[3]));
        assert_eq!(s.block_start[2], set(7, &[3]));
        assert_eq!(s.block_start[3], set(7, &[1, 2, 3]));
        // %3 is defined by bb1's phi: not live into bb1.
        assert_eq!(s.block_start[1], set(7, &[1, 2]));
        assert_eq!(s.block_end[0], set(7, &[1, 2]));
        assert_eq!(s.block_start[0], set(7, &[0]));
    }

    /// The naive solution: every block evaluated in index order until nothing changes.
    fn naive(p: &GenKill, edges: &Edges) -> (Vec<FixedBitSet>, Vec<FixedBitSet>) {
        let n = edges.preds.len();
        let forward = p.direction == Direction::Forward;
        let mut top = FixedBitSet::with_capacity(p.bits);
        if p.meet == Meet::Intersection {
            top.insert_range(..);
        }
        let mut out = vec![top.clone(); n];
        let mut inp = vec![top.clone(); n];
        loop {
            let mut changed = false;
            for b in 0..n {
                let into = if forward {
                    &edges.preds[b]
                } else {
                    &edges.succs[b]
                };
                let boundary = if forward { b == 0 } else { into.is_empty() };
                let mut i = if boundary {
                    p.boundary.clone()
                } else {
                    top.clone()
                };
                for x in into {
                    if p.meet == Meet::Union {
                        i.union_with(&out[x.index()]);
                    } else {
                        i.intersect_with(&out[x.index()]);
                    }
                }
                let mut o = FixedBitSet::with_capacity(p.bits);
                p.transfer(Block::new(b), &i, &mut o);
                changed |= o != out[b];
                out[b] = o;
                inp[b] = i;
            }
            if !changed {
                break;
            }
        }
        if forward { (inp, out) } else { (out, inp) }
    }

    #[test]
    fn worklist_agrees_with_round_robin_on_generated_cfgs() {
        for seed in 0..120 {
            let f = generate(&GenConfig {
                size: 80,
                ..GenConfig::new(seed)
            });
            let cfg = Cfg::compute(&f).unwrap();
            let n = f.blocks.len();
            let mut rng = Rng::new(seed ^ 0x5eed);
            for direction in [Direction::Forward, Direction::Backward] {
                for meet in [Meet::Union, Meet::Intersection] {
                    for graph in [Graph::Logical, Graph::Linear] {
                        let bits = 24;
                        let mut p = GenKill::new(direction, meet, bits, n);
                        for b in 0..n {
                            for k in 0..bits {
                                if rng.chance(15) {
                                    p.gen_sets[b].insert(k);
                                }
                                if rng.chance(15) {
                                    p.kill_sets[b].insert(k);
                                }
                            }
                        }
                        for k in 0..bits {
                            if rng.chance(30) {
                                p.boundary.insert(k);
                            }
                        }
                        let s = solve(&p, &cfg, graph).unwrap();
                        let (start, end) = naive(&p, graph.edges(&cfg));
                        assert_eq!(s.block_start, start, "seed {seed} {direction:?} {meet:?}");
                        assert_eq!(s.block_end, end, "seed {seed} {direction:?} {meet:?}");
                        // Reverse post-order: an acyclic CFG needs one visit per block.
                        if cfg.loops.is_empty() {
                            assert_eq!(s.visits, n);
                        }
                    }
                }
            }
        }
    }
}
