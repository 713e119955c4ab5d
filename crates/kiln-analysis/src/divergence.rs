//! Divergence analysis: which temps are uniform (in each dynamic instance of the definition,
//! every lane that ran it computed the same value) and which `if`s, breaks, continues and loops
//! are divergent, by NIR's `nir_divergence_analysis.c` rules on kiln's structured form, with
//! temporal divergence answered per use ([`Divergence::is_uniform_at`]). The design is in
//! `docs/ir.md` ("Divergence analysis").

use kiln_ir::{Block, Cfg, Function, Opcode, Operand, Temp, Value};

/// The result: per temp, per `if` (indexed like [`Cfg::ifs`]), per loop (like [`Cfg::loops`]),
/// per block for jumps.
#[derive(Clone, Debug)]
pub struct Divergence {
    /// Divergent at its definition.
    pub divergent: Vec<bool>,
    /// Per `if` of the CFG: its condition is divergent.
    pub if_divergent: Vec<bool>,
    /// Per loop: some break is divergent (lanes leave at different iterations).
    pub loop_divergent: Vec<bool>,
    /// Per loop: some continue is divergent.
    pub loop_divergent_continue: Vec<bool>,
    /// Per block: it ends in a divergent `break` or `continue`.
    pub jump_divergent: Vec<bool>,
    /// Rounds over the function until the fixpoint (for tests and statistics).
    pub rounds: usize,
    def_block: Vec<Option<Block>>,
    loop_of: Vec<Option<usize>>,
    loops: Vec<(Block, Block, Option<usize>)>,
}

impl Divergence {
    /// Whether `t` is uniform where it is defined.
    pub fn is_uniform(&self, t: Temp) -> bool {
        !self.divergent[t.index()]
    }

    /// Whether `t` is uniform when read in block `at` (for a phi operand: at the end of the
    /// predecessor): uniform at its definition and not leaving a divergent loop on the way.
    pub fn is_uniform_at(&self, t: Temp, at: Block) -> bool {
        !self.divergent[t.index()] && !self.leaves_divergent_loop(t, at)
    }

    /// Whether an operand is uniform when read in block `at`.
    pub fn operand_uniform_at(&self, op: &Operand, at: Block) -> bool {
        match op.value {
            Value::Temp(t) => self.is_uniform_at(t, at),
            Value::Const(_) | Value::Undef(_) => true,
        }
    }

    /// Whether reaching block `at` from `t`'s definition leaves a divergent loop.
    pub fn leaves_divergent_loop(&self, t: Temp, at: Block) -> bool {
        let Some(d) = self.def_block.get(t.index()).copied().flatten() else {
            return false;
        };
        let mut l = self.loop_of[d.index()];
        while let Some(k) = l {
            let (header, exit, parent) = self.loops[k];
            if header <= at && at < exit {
                return false;
            }
            if self.loop_divergent[k] {
                return true;
            }
            l = parent;
        }
        false
    }

    /// The divergence of the `if` ending block `head`, if it ends in one.
    pub fn if_divergent_at(&self, cfg: &Cfg, head: Block) -> Option<bool> {
        cfg.ifs
            .iter()
            .position(|i| i.head == head)
            .map(|k| self.if_divergent[k])
    }

    /// Runs the analysis. `cfg` must be the function's CFG; only its structure (ifs, loops,
    /// logical predecessors) is used, not the `.uniform`/`.divergent` flags the function carries.
    pub fn compute(func: &Function, cfg: &Cfg) -> Divergence {
        let n = func.blocks.len();
        let mut def_block = vec![None; func.temps.len()];
        for b in func.block_ids() {
            for inst in &func.block(b).insts {
                for d in &inst.defs {
                    if let Some(slot) = def_block.get_mut(d.temp.index()) {
                        *slot = Some(b);
                    }
                }
            }
        }
        // Structure: innermost enclosing if of each block (a sweep in layout order), and what
        // each block starts (loop header, loop exit, endif).
        let mut parent_if: Vec<Option<usize>> = vec![None; n];
        {
            let mut by_then: Vec<Option<usize>> = vec![None; n];
            for (k, i) in cfg.ifs.iter().enumerate() {
                by_then[i.then_start.index()] = Some(k);
            }
            let mut stack: Vec<usize> = Vec::new();
            for b in 0..n {
                while stack.last().is_some_and(|&k| cfg.ifs[k].endif.index() <= b) {
                    stack.pop();
                }
                if let Some(k) = by_then[b] {
                    stack.push(k);
                }
                parent_if[b] = stack.last().copied();
            }
        }
        #[derive(Clone, Copy)]
        enum Starts {
            Nothing,
            Header(usize),
            Exit(usize),
            Endif(usize),
        }
        let mut starts = vec![Starts::Nothing; n];
        for (k, i) in cfg.ifs.iter().enumerate() {
            starts[i.endif.index()] = Starts::Endif(k);
        }
        for (k, l) in cfg.loops.iter().enumerate() {
            starts[l.header.index()] = Starts::Header(k);
            starts[l.exit.index()] = Starts::Exit(k);
        }
        let mut dv = Divergence {
            divergent: vec![false; func.temps.len()],
            if_divergent: vec![false; cfg.ifs.len()],
            loop_divergent: vec![false; cfg.loops.len()],
            loop_divergent_continue: vec![false; cfg.loops.len()],
            jump_divergent: vec![false; n],
            rounds: 0,
            def_block,
            loop_of: cfg.loop_of.clone(),
            loops: cfg
                .loops
                .iter()
                .map(|l| (l.header, l.exit, l.parent))
                .collect(),
        };
        // Per block: a divergent `if` of the block's innermost loop encloses it.
        let mut divergent_in_loop = vec![false; n];
        loop {
            dv.rounds += 1;
            let mut changed = false;
            // Branches.
            for (k, i) in cfg.ifs.iter().enumerate() {
                let term = func.block(i.head).terminator().expect("an if block");
                if !dv.if_divergent[k] && !dv.operand_uniform_at(&term.operands[0], i.head) {
                    dv.if_divergent[k] = true;
                    changed = true;
                }
            }
            let mut seen_divergent_continue = vec![false; cfg.loops.len()];
            for b in 0..n {
                divergent_in_loop[b] = parent_if[b].is_some_and(|k| {
                    let head = cfg.ifs[k].head.index();
                    cfg.loop_of[head].is_some() && cfg.loop_of[head] == cfg.loop_of[b] && {
                        dv.if_divergent[k] || divergent_in_loop[head]
                    }
                });
                let Some(term) = func.blocks[b].terminator() else {
                    continue;
                };
                if !matches!(term.op, Opcode::Break | Opcode::Continue) {
                    continue;
                }
                let Some(l) = cfg.loop_of[b] else { continue };
                let divergent = divergent_in_loop[b] || seen_divergent_continue[l];
                if divergent && !dv.jump_divergent[b] {
                    dv.jump_divergent[b] = true;
                    changed = true;
                }
                if divergent && term.op == Opcode::Continue {
                    seen_divergent_continue[l] = true;
                    if !dv.loop_divergent_continue[l] {
                        dv.loop_divergent_continue[l] = true;
                        changed = true;
                    }
                }
                if divergent && term.op == Opcode::Break && !dv.loop_divergent[l] {
                    dv.loop_divergent[l] = true;
                    changed = true;
                }
            }
            // Values.
            for b in func.block_ids() {
                let preds = &cfg.logical.preds[b.index()];
                let lpreds = &cfg.linear.preds[b.index()];
                for inst in &func.block(b).insts {
                    let mut mark = |dv: &mut Divergence, t: Temp| {
                        if !dv.divergent[t.index()] {
                            dv.divergent[t.index()] = true;
                            changed = true;
                        }
                    };
                    let any_divergent_at = |dv: &Divergence, ops: &[Operand], at: Block| {
                        ops.iter().any(|o| !dv.operand_uniform_at(o, at))
                    };
                    match inst.op {
                        Opcode::Phi => {
                            let t = inst.defs[0].temp;
                            if dv.divergent[t.index()] {
                                continue;
                            }
                            let operand_divergent = inst
                                .operands
                                .iter()
                                .zip(preds.iter())
                                .any(|(o, &p)| !dv.operand_uniform_at(o, p));
                            let all_same = |ops: &[Operand]| ops.iter().all(|o| *o == ops[0]);
                            let divergent = operand_divergent
                                || match starts[b.index()] {
                                    Starts::Endif(k) => {
                                        dv.if_divergent[k] && !all_same(&inst.operands)
                                    }
                                    Starts::Header(l) => {
                                        dv.loop_divergent_continue[l]
                                            && inst.operands.len() > 1
                                            && !all_same(&inst.operands[1..])
                                    }
                                    Starts::Exit(l) => dv.loop_divergent[l],
                                    Starts::Nothing => false,
                                };
                            if divergent {
                                mark(&mut dv, t);
                            }
                        }
                        Opcode::LinearPhi => {
                            let t = inst.defs[0].temp;
                            let divergent = inst
                                .operands
                                .iter()
                                .zip(lpreds.iter())
                                .any(|(o, &p)| !dv.operand_uniform_at(o, p));
                            if divergent {
                                mark(&mut dv, t);
                            }
                        }
                        op if is_source(op) => {
                            for d in &inst.defs {
                                mark(&mut dv, d.temp);
                            }
                        }
                        Opcode::Uniform => {}
                        Opcode::ParallelCopy => {
                            for (d, o) in inst.defs.iter().zip(&inst.operands) {
                                if !dv.operand_uniform_at(o, b) {
                                    mark(&mut dv, d.temp);
                                }
                            }
                        }
                        _ => {
                            if !inst.defs.is_empty() && any_divergent_at(&dv, &inst.operands, b) {
                                for d in &inst.defs {
                                    mark(&mut dv, d.temp);
                                }
                            }
                        }
                    }
                }
            }
            if !changed {
                return dv;
            }
        }
    }
}

/// Whether `op` makes values that differ between lanes whatever its operands: an input, a
/// derivative, a reload, a cross-lane operation. (`uniform` makes one value whatever its
/// operand; every other operation is divergent where an operand is, and a phi also where
/// control flow is.)
pub fn is_source(op: Opcode) -> bool {
    match op {
        Opcode::Input | Opcode::Fddx | Opcode::Fddy | Opcode::Reload => true,
        Opcode::Target(t) => t.0.cross_lane.is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::parse_function;

    fn analyse(text: &str) -> (Function, Cfg, Divergence) {
        let f = parse_function(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let cfg = Cfg::compute(&f).expect("structured");
        let dv = Divergence::compute(&f, &cfg);
        (f, cfg, dv)
    }

    fn t(n: u32) -> Temp {
        Temp(n)
    }

    #[test]
    fn sources_and_propagation() {
        let (_, _, dv) = analyse(
            "target generic(v=16, s=8)
function @main {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:v1 = fadd %1, 1.0
    %3:v1 = fadd %0, %1
    %4:v1 = fddx %1
    %5:v4 = texture_sample 0, 0, %2, %2
    %6:v4 = texture_sample 0, 0, %3, %2
    %7:v1, %8:v1 = parallel_copy %1, %0
    output 0, %5
    output 1, %6
    output 2, %4
    output 3, %7
    output 4, %8
    return
}
",
        );
        assert!(!dv.is_uniform(t(0)), "input");
        assert!(dv.is_uniform(t(1)), "uniform word");
        assert!(
            dv.is_uniform(t(2)),
            "uniform op in a per-lane register is still uniform"
        );
        assert!(!dv.is_uniform(t(3)), "divergent operand");
        assert!(!dv.is_uniform(t(4)), "derivative");
        assert!(dv.is_uniform(t(5)), "texture on uniform coordinates");
        assert!(!dv.is_uniform(t(6)), "texture on divergent coordinates");
        assert!(dv.is_uniform(t(7)) && !dv.is_uniform(t(8)), "parallel copy");
    }

    /// The flags the text carries do not matter: the `if` is marked divergent but is uniform.
    #[test]
    fn if_merges() {
        let (_, cfg, dv) = analyse(
            "target generic(v=16, s=8)
function @main {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:v1 = flt %0, 1.0
    if.divergent %1, bb1, bb2, bb3
bb1:
    jump bb3
bb2:
    jump bb3
bb3:
    %3:v1 = phi 1.0, 2.0
    if.divergent %2, bb4, bb5, bb6
bb4:
    jump bb6
bb5:
    jump bb6
bb6:
    %4:v1 = phi 1.0, 2.0
    %5:v1 = phi %3, %3
    %6:v1 = phi %1, %3
    output 0, %4
    output 1, %5
    output 2, %6
    return
}
",
        );
        assert_eq!(dv.if_divergent, vec![false, true]);
        assert_eq!(dv.if_divergent_at(&cfg, Block(0)), Some(false));
        assert!(dv.is_uniform(t(3)), "phi at a uniform if's endif");
        assert!(
            !dv.is_uniform(t(4)),
            "phi of different values at a divergent endif"
        );
        assert!(dv.is_uniform(t(5)), "the same value on both sides");
        assert!(
            !dv.is_uniform(t(6)),
            "different uniform values at a divergent endif"
        );
    }

    const UNIFORM_LOOP: &str = "target generic(v=16, s=8)
function @main {
bb0:
    %0:v1 = input 0
    %9:s1 = uniform 0
    loop bb1, bb5
bb1:
    %1:v1 = phi 0, %3
    %2:v1 = phi 0.0, %6
    %10:s1 = fadd %9, 1.0
    %4:v1 = ule 4, %1
    if.divergent %4, bb2, bb3, bb3
bb2:
    break bb5
bb3:
    %3:v1 = iadd %1, 1
    %6:v1 = fadd %2, %0
    jump bb4
bb4:
    continue bb1
bb5:
    %7:v1 = phi %1
    %8:v1 = fadd %10, %1
    output 0, %7
    output 1, %2
    output 2, %8
    return
}
";

    #[test]
    fn uniform_counted_loop() {
        let (_, _, dv) = analyse(UNIFORM_LOOP);
        assert_eq!(dv.loop_divergent, vec![false]);
        assert_eq!(dv.if_divergent, vec![false]);
        assert!(dv.is_uniform(t(1)) && dv.is_uniform(t(3)) && dv.is_uniform(t(4)));
        assert!(!dv.is_uniform(t(2)) && !dv.is_uniform(t(6)), "per-lane sum");
        assert!(dv.is_uniform(t(7)), "exit phi of a uniform loop");
        assert!(dv.is_uniform(t(8)), "uniform loop: no temporal divergence");
        assert!(dv.is_uniform_at(t(10), Block(5)));
    }

    /// The same loop with a per-lane limit: the loop, its exit phi and every use of a loop
    /// value after it are divergent, while the counter stays uniform inside.
    #[test]
    fn divergent_loop_and_temporal_divergence() {
        let text = UNIFORM_LOOP.replace("%4:v1 = ule 4, %1", "%4:v1 = ule %0, %1");
        let (_, _, dv) = analyse(&text);
        assert_eq!(dv.loop_divergent, vec![true]);
        assert_eq!(dv.if_divergent, vec![true]);
        assert!(
            dv.is_uniform(t(1)),
            "the counter is uniform inside the loop"
        );
        assert!(dv.is_uniform(t(10)), "a uniform value inside the loop");
        assert!(!dv.is_uniform_at(t(10), Block(5)), "…but not after it");
        assert!(dv.is_uniform_at(t(10), Block(3)));
        assert!(!dv.is_uniform(t(7)), "exit phi of a divergent loop");
        assert!(
            !dv.is_uniform(t(8)),
            "temporal divergence through an operand"
        );
    }

    /// A divergent `continue`: the header phi merges different back-edge values.
    #[test]
    fn divergent_continue() {
        let (_, _, dv) = analyse(
            "target generic(v=16, s=8)
function @main {
bb0:
    %0:v1 = input 0
    loop bb1, bb7
bb1:
    %1:v1 = phi 0, %3, %5
    %2:v1 = ule 4, %1
    if.uniform %2, bb2, bb3, bb3
bb2:
    break bb7
bb3:
    %3:v1 = iadd %1, 1
    %4:v1 = flt %0, 0.5
    if.uniform %4, bb4, bb5, bb5
bb4:
    continue bb1
bb5:
    %5:v1 = iadd %1, 2
    jump bb6
bb6:
    continue bb1
bb7:
    return
}
",
        );
        assert_eq!(dv.loop_divergent_continue, vec![true]);
        assert_eq!(
            dv.if_divergent,
            vec![true, true],
            "the counter became divergent"
        );
        assert_eq!(
            dv.loop_divergent,
            vec![true],
            "breaks after a divergent continue"
        );
        assert!(!dv.is_uniform(t(1)) && !dv.is_uniform(t(3)) && !dv.is_uniform(t(5)));
        assert!(dv.jump_divergent[4] && dv.jump_divergent[6]);
        assert!(dv.rounds >= 2);
    }

    /// A break under a uniform `if` nested in a divergent one is divergent; one in a nested
    /// loop's divergent if does not make the outer loop divergent.
    #[test]
    fn break_divergence_follows_the_enclosing_ifs_of_its_loop() {
        let (_, _, dv) = analyse(
            "target generic(v=16, s=8)
function @main {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    loop bb1, bb12
bb1:
    loop bb2, bb5
bb2:
    %2:v1 = flt %0, 0.5
    if.divergent %2, bb3, bb4, bb4
bb3:
    break bb5
bb4:
    continue bb2
bb5:
    if.uniform %1, bb6, bb11, bb11
bb6:
    if.divergent %0, bb7, bb10, bb10
bb7:
    if.uniform %1, bb8, bb9, bb9
bb8:
    break bb12
bb9:
    jump bb10
bb10:
    jump bb11
bb11:
    continue bb1
bb12:
    return
}
",
        );
        assert_eq!(dv.loop_divergent, vec![true, true]);
        assert!(dv.jump_divergent[8], "uniform if inside a divergent one");
        assert_eq!(dv.if_divergent, vec![true, false, true, false]);
    }

    #[test]
    fn outer_loop_stays_uniform_around_a_divergent_inner_loop() {
        let (_, _, dv) = analyse(
            "target generic(v=16, s=8)
function @main {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    loop bb1, bb8
bb1:
    %5:v1 = phi 0, %6
    %6:v1 = iadd %5, 1
    loop bb2, bb5
bb2:
    %2:v1 = flt %0, 0.5
    %7:v1 = fadd %1, 2.0
    if.divergent %2, bb3, bb4, bb4
bb3:
    break bb5
bb4:
    continue bb2
bb5:
    %8:v1 = fadd %7, 1.0
    %3:v1 = ule 3, %6
    if.uniform %3, bb6, bb7, bb7
bb6:
    break bb8
bb7:
    continue bb1
bb8:
    %9:v1 = phi %6
    output 0, %8
    output 1, %9
    return
}
",
        );
        assert_eq!(dv.loop_divergent, vec![false, true]);
        assert!(dv.is_uniform(t(6)) && dv.is_uniform(t(9)));
        assert!(
            dv.is_uniform(t(7)) && !dv.is_uniform(t(8)),
            "temporal divergence"
        );
        assert!(!dv.is_uniform_at(t(7), Block(8)) && dv.is_uniform_at(t(6), Block(8)));
    }
}
