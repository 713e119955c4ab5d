//! The logical and linear CFGs, derived from the structured form (ACO's two CFGs; seed 004): the
//! logical CFG is what one lane does, the linear CFG what the wave executes. Predecessors are
//! listed in ascending block order; phi operands follow that order. The design is in
//! `docs/ir.md` ("Structured SIMT control flow and the two CFGs").

use crate::entity::Block;
use crate::function::Function;
use crate::opcode::Opcode;
use smallvec::SmallVec;

/// Edges of one CFG.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Edges {
    pub preds: Vec<SmallVec<[Block; 2]>>,
    pub succs: Vec<SmallVec<[Block; 2]>>,
}

impl Edges {
    fn new(n: usize) -> Edges {
        // (Each list made empty, not cloned from one: `vec![x; n]` clones `x` item by item.)
        let empty = || (0..n).map(|_| SmallVec::new()).collect();
        Edges {
            preds: empty(),
            succs: empty(),
        }
    }

    fn add(&mut self, from: Block, to: Block) {
        if !self.succs[from.index()].contains(&to) {
            self.succs[from.index()].push(to);
        }
    }

    fn finish_preds(&mut self) {
        for (b, succs) in self.succs.iter().enumerate() {
            for s in succs {
                self.preds[s.index()].push(Block::new(b));
            }
        }
    }
}

/// One loop of the structured program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopInfo {
    /// The block ending in `loop`.
    pub preheader: Block,
    pub header: Block,
    /// The body's last block, ending in `continue header`.
    pub latch: Block,
    /// The first block after the loop.
    pub exit: Block,
    /// Enclosing loop.
    pub parent: Option<usize>,
    /// 1 for an outermost loop.
    pub depth: u32,
    /// Some break of this loop is divergent: lanes leave at different iterations.
    pub divergent: bool,
    /// Some continue of this loop is divergent: from it on, lanes may wait for the next
    /// iteration, so every later break or continue of the loop is divergent too.
    pub divergent_continue: bool,
    /// Blocks ending in a uniform `continue` of this loop (the back edges), the latch last.
    pub back_edges: Vec<Block>,
}

impl LoopInfo {
    /// Whether `b` is inside the loop body.
    pub fn contains(&self, b: Block) -> bool {
        self.header <= b && b < self.exit
    }
}

/// Kind of one structured if region, for passes and the interpreter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfInfo {
    pub head: Block,
    pub then_start: Block,
    pub else_start: Block,
    pub endif: Block,
    pub divergent: bool,
}

/// Both CFGs, loops and ifs of a function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cfg {
    pub logical: Edges,
    pub linear: Edges,
    pub loops: Vec<LoopInfo>,
    pub ifs: Vec<IfInfo>,
    /// Innermost loop of each block.
    pub loop_of: Vec<Option<usize>>,
    /// Whether the block's terminator is a divergent `break` or `continue`.
    pub divergent_jump: Vec<bool>,
}

impl Cfg {
    /// A reverse post-order of both CFGs: the structured layout order, in which every edge but
    /// a loop's back edges goes forward (checked by the property tests).
    pub fn rpo(&self) -> impl DoubleEndedIterator<Item = Block> + ExactSizeIterator {
        (0..self.loop_of.len()).map(Block::new)
    }

    /// Whether `from → to` is a back edge: it goes to the header of a loop containing `from`.
    pub fn is_back_edge(&self, from: Block, to: Block) -> bool {
        self.enclosing_loops(from)
            .any(|l| self.loops[l].header == to)
    }

    pub fn loop_depth(&self, b: Block) -> u32 {
        self.loop_of[b.index()].map_or(0, |l| self.loops[l].depth)
    }

    /// The loops that contain `b`, innermost first.
    pub fn enclosing_loops(&self, b: Block) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(self.loop_of[b.index()], |&l| self.loops[l].parent)
    }
}

/// Why the blocks do not form a structured program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StructureError {
    pub block: Block,
    pub message: String,
}

/// Deepest nesting of regions accepted (bounds recursion on hostile input).
const MAX_NESTING: usize = 1024;

/// Where a region flows when it ends normally.
#[derive(Clone, Copy)]
struct Region {
    /// Blocks `[start, end)`.
    start: Block,
    end: Block,
    /// Target of the closing `jump` (the endif); `None` in loop bodies and at top level.
    follow: Option<Block>,
    /// Where the wave continues after the region's last block (linear CFG).
    cont: Option<Block>,
    /// Innermost loop, and whether a divergent `if` of that loop encloses the region.
    in_loop: Option<usize>,
    divergent_in_loop: bool,
    depth: usize,
}

struct Builder<'f> {
    func: &'f Function,
    cfg: Cfg,
    covered: Vec<bool>,
}

impl Cfg {
    /// Derives both CFGs from the structured terminators.
    pub fn compute(func: &Function) -> Result<Cfg, StructureError> {
        let n = func.blocks.len();
        if n == 0 {
            return Err(StructureError {
                block: Block(0),
                message: "function has no blocks".into(),
            });
        }
        for (i, block) in func.blocks.iter().enumerate() {
            for inst in &block.insts {
                if let Some(t) = inst.targets.iter().find(|t| t.index() >= n) {
                    return Err(StructureError {
                        block: Block::new(i),
                        message: format!("target {t} does not exist"),
                    });
                }
            }
        }
        let mut b = Builder {
            func,
            cfg: Cfg {
                logical: Edges::new(n),
                linear: Edges::new(n),
                loops: Vec::new(),
                ifs: Vec::new(),
                loop_of: vec![None; n],
                divergent_jump: vec![false; n],
            },
            covered: vec![false; n],
        };
        b.region(Region {
            start: Block(0),
            end: Block::new(n),
            follow: None,
            cont: None,
            in_loop: None,
            divergent_in_loop: false,
            depth: 0,
        })?;
        if let Some(i) = b.covered.iter().position(|c| !c) {
            return Err(StructureError {
                block: Block::new(i),
                message:
                    "block is not part of the structured program (it follows the final return)"
                        .into(),
            });
        }
        let mut cfg = b.cfg;
        cfg.logical.finish_preds();
        cfg.linear.finish_preds();
        Ok(cfg)
    }
}

impl Builder<'_> {
    fn err<T>(&self, block: Block, message: impl Into<String>) -> Result<T, StructureError> {
        Err(StructureError {
            block,
            message: message.into(),
        })
    }

    fn edge(&mut self, from: Block, to: Block) {
        self.cfg.logical.add(from, to);
        self.cfg.linear.add(from, to);
    }

    fn region(&mut self, r: Region) -> Result<(), StructureError> {
        if r.depth > MAX_NESTING {
            return self.err(
                r.start,
                format!("control flow nested deeper than {MAX_NESTING}"),
            );
        }
        let mut b = r.start;
        loop {
            if b >= r.end {
                return self.err(r.start, "region has no block that ends it");
            }
            self.covered[b.index()] = true;
            self.cfg.loop_of[b.index()] = r.in_loop;
            let Some(term) = self.func.block(b).terminator() else {
                return self.err(b, "block does not end in a terminator");
            };
            let t = &term.targets;
            if t.len() != term.op.info().targets as usize {
                return self.err(
                    b,
                    format!(
                        "`{}` needs {} block targets",
                        term.op,
                        term.op.info().targets
                    ),
                );
            }
            let last = b.0 + 1 == r.end.0;
            match term.op {
                Opcode::Jump => {
                    let x = t[0];
                    if Some(x) == r.follow && last {
                        self.cfg.logical.add(b, x);
                        self.cfg.linear.add(b, r.cont.unwrap_or(x));
                        return Ok(());
                    }
                    if x.0 == b.0 + 1 && x < r.end {
                        self.edge(b, x);
                        b = x;
                        continue;
                    }
                    return match r.follow {
                        Some(f) => self.err(b, format!("jump must go to the next block {} or, from the region's last block, to its endif {f}", Block(b.0 + 1))),
                        None => self.err(b, format!("jump must go to the next block {}", Block(b.0 + 1))),
                    };
                }
                Opcode::If => {
                    let (then_b, else_b, endif) = (t[0], t[1], t[2]);
                    if then_b.0 != b.0 + 1 || !(then_b < else_b && else_b <= endif && endif < r.end)
                    {
                        return self.err(b, format!("if targets must satisfy {} = then < else <= endif < {} (the enclosing region's end)", Block(b.0 + 1), r.end));
                    }
                    let divergent = term.flags.divergent;
                    self.cfg.ifs.push(IfInfo {
                        head: b,
                        then_start: then_b,
                        else_start: else_b,
                        endif,
                        divergent,
                    });
                    self.cfg.logical.add(b, then_b);
                    self.cfg.logical.add(b, else_b);
                    self.cfg.linear.add(b, then_b);
                    if !divergent {
                        self.cfg.linear.add(b, else_b);
                    }
                    let inner = Region {
                        follow: Some(endif),
                        divergent_in_loop: r.divergent_in_loop
                            || (divergent && r.in_loop.is_some()),
                        depth: r.depth + 1,
                        ..r
                    };
                    let then_cont = if divergent { else_b } else { endif };
                    self.region(Region {
                        start: then_b,
                        end: else_b,
                        cont: Some(then_cont),
                        ..inner
                    })?;
                    if else_b < endif {
                        self.region(Region {
                            start: else_b,
                            end: endif,
                            cont: Some(endif),
                            ..inner
                        })?;
                    }
                    b = endif;
                }
                Opcode::Loop => {
                    let (header, exit) = (t[0], t[1]);
                    if header.0 != b.0 + 1 || !(header < exit && exit < r.end) {
                        return self.err(b, format!("loop targets must satisfy {} = header < exit < {} (the enclosing region's end)", Block(b.0 + 1), r.end));
                    }
                    let latch = Block(exit.0 - 1);
                    let idx = self.cfg.loops.len();
                    let depth = r.in_loop.map_or(1, |p| self.cfg.loops[p].depth + 1);
                    self.cfg.loops.push(LoopInfo {
                        preheader: b,
                        header,
                        latch,
                        exit,
                        parent: r.in_loop,
                        depth,
                        divergent: false,
                        divergent_continue: false,
                        back_edges: Vec::new(),
                    });
                    self.edge(b, header);
                    match self.func.block(latch).terminator() {
                        Some(i) if i.op == Opcode::Continue => {}
                        _ => return self.err(latch, format!("the last block of the loop at {header} must end in `continue {header}`")),
                    }
                    self.region(Region {
                        start: header,
                        end: exit,
                        follow: None,
                        cont: None,
                        in_loop: Some(idx),
                        divergent_in_loop: false,
                        depth: r.depth + 1,
                    })?;
                    if self.cfg.loops[idx].divergent {
                        for k in 0..self.cfg.loops[idx].back_edges.len() {
                            let from = self.cfg.loops[idx].back_edges[k];
                            self.cfg.linear.add(from, exit);
                        }
                    }
                    b = exit;
                }
                Opcode::Break | Opcode::Continue => {
                    let Some(l) = r.in_loop else {
                        return self.err(b, format!("`{}` outside a loop", term.op));
                    };
                    let info = &self.cfg.loops[l];
                    let want = if term.op == Opcode::Break {
                        info.exit
                    } else {
                        info.header
                    };
                    if t[0] != want {
                        return self.err(
                            b,
                            format!("`{}` must target {want} of the innermost loop", term.op),
                        );
                    }
                    if !last {
                        return self.err(
                            b,
                            format!(
                                "`{}` must end its region (no block may follow it before {})",
                                term.op, r.end
                            ),
                        );
                    }
                    self.cfg.logical.add(b, want);
                    let divergent = r.divergent_in_loop || self.cfg.loops[l].divergent_continue;
                    match (divergent, r.cont) {
                        (true, Some(cont)) => {
                            self.cfg.linear.add(b, cont);
                            self.cfg.divergent_jump[b.index()] = true;
                            if term.op == Opcode::Break {
                                self.cfg.loops[l].divergent = true;
                            } else {
                                self.cfg.loops[l].divergent_continue = true;
                            }
                        }
                        _ => {
                            self.cfg.linear.add(b, want);
                            if term.op == Opcode::Continue {
                                self.cfg.loops[l].back_edges.push(b);
                            }
                        }
                    }
                    return Ok(());
                }
                Opcode::Return => {
                    if r.in_loop.is_some() || r.follow.is_some() || !last {
                        return self.err(b, "`return` may only end the last block of the function");
                    }
                    return Ok(());
                }
                _ => return self.err(b, format!("`{}` is not a terminator", term.op)),
            }
        }
    }
}
