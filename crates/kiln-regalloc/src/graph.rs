//! Class-based graph colouring (seed 002): Runeson & Nyström's retargetable colouring for
//! irregular register files ("Retargetable graph-coloring register allocation for irregular
//! architectures", 2003), as Mesa's `util/register_allocate.c` does it, on kiln's own exact
//! interference rather than Mesa vc4's start/end intervals.
//!
//! - **Graph**: one node per temp; an edge between two temps of a file where one is live right
//!   after the other's definition (a backward walk of every block from its live-out set, so
//!   building costs the sum of live values at every definition, never all pairs), plus seed
//!   003's SIMT edges of values written in all lanes (`Interference`).
//! - **Simplify** (Chaitin; Briggs's optimistic pushing): a node whose neighbours' q-values
//!   sum below its class's p is trivially colourable and leaves the graph; the sums are kept
//!   up to date as nodes leave, so simplify is linear in the edges. When none is left, the node
//!   with the longest live range and most pressure is pushed optimistically.
//! - **Coalescing** (conservative, Briggs): copy-related nodes that do not interfere merge when
//!   the merged node stays trivially colourable by the pq test.
//! - **Select**: nodes come back in reverse order and take the lowest start of their class that
//!   no coloured neighbour overlaps — a copy partner's colour first (biased colouring of phi
//!   operands and copies).
//!
//! The colours become the homes the SSA assigner (`assign`) tries first; constraints it meets
//! around an instruction, the SIMT rules of phi copies, and any node that found no colour are
//! left to it, so the allocation is checked and correct whatever the colouring chose.

use crate::regset::{ClassId, RegModel};
use kiln_analysis::{Interference, Liveness};
use kiln_ir::{
    Cfg, FileId, Function, Lanes, Opcode, PhysReg, RegClass, RegFile, RegSubset, Target, Temp,
};
use std::sync::Arc;

/// A target's files cut to a budget, so that the register model counts only allowed starts.
#[derive(Debug)]
struct Budgeted {
    inner: Arc<dyn Target>,
    files: Vec<RegFile>,
}

impl Target for Budgeted {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn params(&self) -> Vec<(String, u32)> {
        self.inner.params()
    }
    fn files(&self) -> &[RegFile] {
        &self.files
    }
    fn subsets(&self) -> &[RegSubset] {
        self.inner.subsets()
    }
    fn opcodes(&self) -> &'static [kiln_ir::TargetOpInfo] {
        self.inner.opcodes()
    }
    fn max_size(&self, file: FileId) -> u8 {
        self.inner.max_size(file)
    }
    fn default_align(&self, file: FileId, size: u8) -> u8 {
        self.inner.default_align(file, size)
    }
}

/// What the colouring did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColourStats {
    pub nodes: u32,
    pub edges: u32,
    /// Nodes pushed without being trivially colourable (Briggs), and those that then found no
    /// colour.
    pub optimistic: u32,
    pub uncoloured: u32,
    /// Copy-related pairs merged by conservative coalescing.
    pub coalesced: u32,
}

/// Colours the temps of `func` (liveness `lv`, kill flags set) within `limit[f]` units per
/// file: a home per temp, `None` for temps without one.
pub fn colour(
    func: &Function,
    cfg: &Cfg,
    lv: &Liveness,
    limit: &[u32],
) -> (Vec<Option<PhysReg>>, ColourStats) {
    let n = func.temps.len();
    let target = Arc::new(Budgeted {
        inner: func.target.clone(),
        files: func
            .target
            .files()
            .iter()
            .enumerate()
            .map(|(f, file)| RegFile {
                units: limit.get(f).copied().unwrap_or(file.units).min(file.units),
                ..file.clone()
            })
            .collect(),
    });
    let mut model = RegModel::new(target);
    let class: Vec<Option<ClassId>> = func
        .temps
        .iter()
        .map(|&c| (!c.is_none()).then(|| model.class_id(c)))
        .collect();
    let Graph {
        mut adj,
        partners,
        mut length,
    } = build(func, cfg, lv);
    let mut class = class;
    let mut stats = ColourStats {
        nodes: class.iter().filter(|c| c.is_some()).count() as u32,
        edges: adj.iter().map(|a| a.len() as u32).sum::<u32>() / 2,
        ..ColourStats::default()
    };
    let rep = coalesce(
        &mut model,
        &mut class,
        &mut adj,
        &mut length,
        &partners,
        &mut stats,
    );
    // Simplify: pressure[t] = Σ q(class t, class u) over neighbours u still in the graph.
    let mut pressure = vec![0u32; n];
    for t in 0..n {
        let Some(b) = class[t] else { continue };
        pressure[t] = adj[t]
            .iter()
            .filter_map(|&u| class[u as usize])
            .map(|c| model.q(b, c))
            .sum();
    }
    let mut removed = vec![false; n];
    let mut stack: Vec<(u32, bool)> = Vec::with_capacity(n);
    let mut ready: Vec<u32> = (0..n as u32)
        .filter(|&t| class[t as usize].is_some_and(|b| pressure[t as usize] < model.p(b)))
        .collect();
    // Short live ranges colour first (seed 002): they leave the graph last.
    ready.sort_unstable_by_key(|&t| std::cmp::Reverse(length[t as usize]));
    let mut queued = vec![false; n];
    for &t in &ready {
        queued[t as usize] = true;
    }
    let mut left = class.iter().filter(|c| c.is_some()).count();
    let mut heavy: Vec<u32> = (0..n as u32)
        .filter(|&t| class[t as usize].is_some())
        .collect();
    // The optimistic pick: longest live range, then most pressure (a heap would make this
    // O(log n); the scan runs once per optimistic node, which pressure makes rare).
    while left > 0 {
        let (t, optimistic) = match ready.pop() {
            Some(t) => (t, false),
            None => {
                heavy.retain(|&t| !removed[t as usize]);
                let &t = heavy
                    .iter()
                    .max_by_key(|&&t| (length[t as usize], pressure[t as usize]))
                    .expect("nodes are left");
                stats.optimistic += 1;
                (t, true)
            }
        };
        if removed[t as usize] {
            continue;
        }
        removed[t as usize] = true;
        left -= 1;
        stack.push((t, optimistic));
        let c = class[t as usize].expect("a node");
        for &u in &adj[t as usize] {
            let u = u as usize;
            let Some(b) = class[u] else { continue };
            if removed[u] {
                continue;
            }
            pressure[u] = pressure[u].saturating_sub(model.q(b, c));
            if !queued[u] && pressure[u] < model.p(b) {
                queued[u] = true;
                ready.push(u as u32);
            }
        }
    }
    // Select.
    let mut home: Vec<Option<PhysReg>> = vec![None; n];
    while let Some((t, _)) = stack.pop() {
        let t = t as usize;
        let c: RegClass = func.temps[t];
        let size = c.size as u32;
        let taken = |r: PhysReg, home: &[Option<PhysReg>]| {
            adj[t].iter().any(|&u| {
                home[u as usize].is_some_and(|h| {
                    let us = func.temps[u as usize].size as u32;
                    h.file() == r.file() && h.unit() < r.unit() + size && r.unit() < h.unit() + us
                })
            })
        };
        let starts = model.starts(class[t].expect("a node")).to_vec();
        let biased = partners[t]
            .iter()
            .filter_map(|&(p, delta)| {
                let h = home[rep[p as usize] as usize]?;
                PhysReg::try_new(h.file(), h.unit().checked_add_signed(delta)?)
                    .filter(|r| r.file() == c.file)
            })
            .find(|&r| starts.binary_search(&r.unit()).is_ok() && !taken(r, &home));
        home[t] = biased.or_else(|| {
            starts
                .iter()
                .map(|&u| PhysReg::new(c.file, u))
                .find(|&r| !taken(r, &home))
        });
        stats.uncoloured += home[t].is_none() as u32;
    }
    // Coalesced temps take their representative's colour.
    for t in 0..n {
        if rep[t] as usize != t {
            home[t] = home[rep[t] as usize];
        }
    }
    (home, stats)
}

/// Conservative coalescing (Briggs et al. 1994, generalised to classes through the pq test as
/// Runeson & Nyström do): two copy-related nodes of one class that do not interfere merge when
/// the neighbours of the merged node that are not trivially colourable themselves block fewer
/// than p of its registers, so simplify still removes it and coalescing never makes the graph
/// harder to colour. Returns each temp's representative. Only same-unit copies merge (phi operands,
/// `mov`, `parallel_copy`); parts of vectors keep their own nodes and are biased in select.
fn coalesce(
    model: &mut RegModel,
    class: &mut [Option<ClassId>],
    adj: &mut [Vec<u32>],
    length: &mut [u32],
    partners: &[Vec<(u32, i32)>],
    stats: &mut ColourStats,
) -> Vec<u32> {
    let n = class.len();
    let mut rep: Vec<u32> = (0..n as u32).collect();
    fn find(rep: &mut [u32], mut x: u32) -> u32 {
        while rep[x as usize] != x {
            rep[x as usize] = rep[rep[x as usize] as usize];
            x = rep[x as usize];
        }
        x
    }
    let mut pairs: Vec<(u32, u32)> = (0..n as u32)
        .flat_map(|a| {
            partners[a as usize]
                .iter()
                .filter(move |&&(b, delta)| delta == 0 && a < b)
                .map(move |&(b, _)| (a, b))
        })
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    // Pressure of every node (Σ q over its neighbours), kept current as nodes merge.
    let mut pressure: Vec<u32> = (0..n)
        .map(|t| match class[t] {
            Some(b) => adj[t]
                .iter()
                .filter_map(|&u| class[u as usize])
                .map(|c| model.q(b, c))
                .sum(),
            None => 0,
        })
        .collect();
    for (a, b) in pairs {
        let (ra, rb) = (find(&mut rep, a), find(&mut rep, b));
        if ra == rb {
            continue;
        }
        let (Some(ca), Some(cb)) = (class[ra as usize], class[rb as usize]) else {
            continue;
        };
        if ca != cb || adj[ra as usize].binary_search(&rb).is_ok() {
            continue;
        }
        // Briggs: only neighbours that are not trivially colourable themselves can stop the
        // merged node from being coloured; they must block less than p of its registers.
        let merged = merge_sorted(&adj[ra as usize], &adj[rb as usize]);
        let mut significant = 0;
        for &u in &merged {
            let Some(c) = class[u as usize] else { continue };
            if pressure[u as usize] >= model.p(c) {
                significant += model.q(ca, c);
            }
        }
        if significant >= model.p(ca) {
            continue;
        }
        for &u in &adj[rb as usize].clone() {
            let list = &mut adj[u as usize];
            if let Ok(i) = list.binary_search(&rb) {
                list.remove(i);
            }
            match list.binary_search(&ra) {
                // A neighbour of both now sees one node where it saw two.
                Ok(_) => {
                    let cu = class[u as usize].expect("a neighbour in the graph");
                    pressure[u as usize] -= model.q(cu, cb);
                }
                Err(i) => list.insert(i, ra),
            }
        }
        pressure[ra as usize] = merged
            .iter()
            .filter_map(|&u| class[u as usize])
            .map(|c| model.q(ca, c))
            .sum();
        adj[ra as usize] = merged;
        adj[rb as usize].clear();
        class[rb as usize] = None;
        length[ra as usize] += length[rb as usize];
        rep[rb as usize] = ra;
        stats.coalesced += 1;
    }
    (0..n as u32).map(|t| find(&mut rep, t)).collect()
}

/// The union of two ascending lists.
fn merge_sorted(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let x = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if x < y => {
                i += 1;
                x
            }
            (Some(&x), Some(&y)) if y < x => {
                j += 1;
                y
            }
            (Some(&x), Some(_)) => {
                i += 1;
                j += 1;
                x
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (None, Some(&y)) => {
                j += 1;
                y
            }
            (None, None) => break,
        };
        out.push(x);
    }
    out
}

/// The interference graph and what guides colouring.
struct Graph {
    /// Neighbours of every temp, ascending.
    adj: Vec<Vec<u32>>,
    /// Copy partners of every temp with the unit offset that makes the copy an identity.
    partners: Vec<Vec<(u32, i32)>>,
    /// Instructions every temp is live across.
    length: Vec<u32>,
}

/// Builds the interference graph, copy partners and live-range lengths of every temp.
fn build(func: &Function, cfg: &Cfg, lv: &Liveness) -> Graph {
    let n = func.temps.len();
    let file_of = |t: Temp| func.temps[t.index()].file;
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut partners: Vec<Vec<(u32, i32)>> = vec![Vec::new(); n];
    let mut length = vec![0u32; n];
    let mut live = vec![false; n];
    let mut list: Vec<u32> = Vec::new();
    let add = |a: Temp, b: Temp, edges: &mut Vec<(u32, u32)>| {
        if a != b && file_of(a) == file_of(b) {
            edges.push((a.0.min(b.0), a.0.max(b.0)));
        }
    };
    for b in func.block_ids() {
        list.clear();
        for t in lv.live_out[b.index()].iter() {
            live[t.index()] = true;
            list.push(t.0);
        }
        let insts = &func.block(b).insts;
        for inst in insts.iter().rev() {
            list.retain(|&t| live[t as usize]);
            for &t in &list {
                length[t as usize] += 1;
            }
            if inst.op.is_phi() {
                continue;
            }
            // Definitions interfere with what is live after them and with each other.
            for (i, d) in inst.defs.iter().enumerate() {
                for &t in &list {
                    add(d.temp, Temp(t), &mut edges);
                }
                for e in &inst.defs[..i] {
                    add(d.temp, e.temp, &mut edges);
                }
                live[d.temp.index()] = false;
            }
            // Late-kill operands are still live when the definitions are written.
            for op in inst.operands.iter().filter(|o| o.is_late_kill()) {
                if let Some(t) = op.temp_id() {
                    for d in &inst.defs {
                        add(d.temp, t, &mut edges);
                    }
                }
            }
            copy_partners(func, inst, &mut partners);
            for t in inst.used_temps() {
                if !live[t.index()] {
                    live[t.index()] = true;
                    list.push(t.0);
                }
            }
        }
        // Phis: defined together at the block's start, with what is live into it.
        let phis: Vec<&kiln_ir::Inst> = insts.iter().take_while(|i| i.op.is_phi()).collect();
        for (i, phi) in phis.iter().enumerate() {
            let d = phi.defs[0].temp;
            for t in lv.live_in[b.index()].iter() {
                add(d, t, &mut edges);
            }
            for other in &phis[..i] {
                add(d, other.defs[0].temp, &mut edges);
            }
            for t in phi.operands.iter().filter_map(|o| o.temp_id()) {
                partners[d.index()].push((t.0, 0));
                partners[t.index()].push((d.0, 0));
            }
        }
        for &t in &list {
            live[t as usize] = false;
        }
        for t in lv.live_in[b.index()].iter() {
            live[t.index()] = false;
        }
    }
    // Seed 003 and docs/ir.md: a value written in all lanes of a per-lane file interferes with
    // values live in any lane, beyond liveness. O(such values × temps of the file): they are
    // few (loop-header setup).
    let per_lane: Vec<bool> = func
        .target
        .files()
        .iter()
        .map(|f| f.lanes == Lanes::PerLane)
        .collect();
    let wide: Vec<Temp> = (0..n)
        .map(Temp::new)
        .filter(|&t| {
            let c = func.temps[t.index()];
            !c.is_none() && lv.linear[t.index()] && per_lane[c.file.index()]
        })
        .collect();
    if !wide.is_empty() {
        let interference = Interference::new(func, cfg, lv);
        for &a in &wide {
            for u in (0..n).map(Temp::new) {
                if !func.temps[u.index()].is_none() && interference.interferes(func, a, u) {
                    add(a, u, &mut edges);
                }
            }
        }
    }
    edges.sort_unstable();
    edges.dedup();
    let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (a, b) in edges {
        adj[a as usize].push(b);
        adj[b as usize].push(a);
    }
    Graph {
        adj,
        partners,
        length,
    }
}

/// Copy partners of one instruction, with the unit offset that makes the copy an identity:
/// `mov` and `parallel_copy` (0), the parts of `create_vector` and `split_vector` (their offset
/// in the vector), and the members of a vector operand (their offsets from each other).
fn copy_partners(func: &Function, inst: &kiln_ir::Inst, partners: &mut [Vec<(u32, i32)>]) {
    let mut pair = |a: Temp, b: Temp, delta: i32| {
        // colour(a) = colour(b) + delta
        partners[a.index()].push((b.0, delta));
        partners[b.index()].push((a.0, -delta));
    };
    let size = |t: Temp| func.temps[t.index()].size as i32;
    match inst.op {
        Opcode::Mov | Opcode::ParallelCopy => {
            for (d, op) in inst.defs.iter().zip(&inst.operands) {
                if let Some(t) = op.temp_id() {
                    pair(d.temp, t, 0);
                }
            }
        }
        Opcode::CreateVector => {
            let x = inst.defs[0].temp;
            let mut off = 0;
            for op in &inst.operands {
                if let Some(t) = op.temp_id() {
                    pair(t, x, off);
                    off += size(t);
                } else {
                    off += 1;
                }
            }
        }
        Opcode::SplitVector => {
            if let Some(x) = inst.operands.first().and_then(|o| o.temp_id()) {
                let mut off = 0;
                for d in &inst.defs {
                    pair(d.temp, x, off);
                    off += size(d.temp);
                }
            }
        }
        _ => {
            // Vector operands: each member against the first.
            let mut first: Option<(Temp, i32)> = None;
            let mut off = 0;
            for (j, op) in inst.operands.iter().enumerate() {
                let in_vector =
                    op.is_vector_aligned() || (j > 0 && inst.operands[j - 1].is_vector_aligned());
                if !in_vector {
                    first = None;
                    off = 0;
                    continue;
                }
                let w = op.temp_id().map_or(1, size);
                if let Some(t) = op.temp_id() {
                    match first {
                        Some((f, fo)) => pair(t, f, off - fo),
                        None => first = Some((t, off)),
                    }
                }
                off += w;
                if !op.is_vector_aligned() {
                    first = None;
                    off = 0;
                }
            }
        }
    }
}
