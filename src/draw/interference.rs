//! `kiln draw interference`: the interference graph of a function (the graph the
//! graph-colouring allocator builds, `kiln_regalloc::graph::interference_graph`, on the SSA
//! function the allocator was given) as Graphviz dot, each value filled with the colour of
//! the register the allocation gave it, values joined by a copy that the allocation made an
//! identity (coalesced) grouped in one cluster, spilled values outlined.

use super::{Allocation, html, quoted, unit_colour};
use kiln_analysis::{Cfg, compute_liveness};
use kiln_ir::text::fmt_reg;
use kiln_ir::{Function, Opcode, PhysReg, Temp};
use std::fmt::Write as _;

/// What to draw.
#[derive(Clone, Copy, Debug)]
pub struct InterferenceOptions {
    /// Refuse graphs of more values than this (their layout takes long and shows little).
    pub max_nodes: usize,
}

impl Default for InterferenceOptions {
    fn default() -> InterferenceOptions {
        InterferenceOptions { max_nodes: 400 }
    }
}

/// Where the allocated function keeps one value of the SSA function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// Its home: the register it is written to by its definition (for a fixed definition,
    /// where the copy right after moves it), or, for a value defined by copies only (a phi),
    /// the register of its first read in layout order — at a block boundary every value is in
    /// its home.
    pub home: Option<PhysReg>,
    /// Stored to a spill slot or reloaded somewhere.
    pub spilled: bool,
    /// Every register it occupies somewhere (moved aside, reloaded), ascending.
    pub regs: Vec<PhysReg>,
}

/// Reads every value's registers off an allocated function (`temps`: the number of temps of
/// its SSA function; the allocated function names each value as the SSA function does).
pub fn placements(allocated: &Function, temps: usize) -> Vec<Placement> {
    let n = temps.max(allocated.temps.len());
    let mut place = vec![Placement::default(); n];
    let mut first_read: Vec<Option<PhysReg>> = vec![None; n];
    let mut copied_to: Vec<Option<PhysReg>> = vec![None; n];
    for b in allocated.block_ids() {
        let insts = &allocated.block(b).insts;
        for (k, inst) in insts.iter().enumerate() {
            for op in &inst.operands {
                if let (Some(t), Some(r)) = (op.temp_id(), op.reg) {
                    first_read[t.index()].get_or_insert(r);
                    place[t.index()].regs.push(r);
                }
                if inst.op == Opcode::Spill
                    && let Some(t) = op.temp_id()
                {
                    place[t.index()].spilled = true;
                }
            }
            for d in &inst.defs {
                let t = d.temp.index();
                if let Some(r) = d.reg {
                    place[t].regs.push(r);
                }
                match inst.op {
                    Opcode::Reload => place[t].spilled = true,
                    Opcode::ParallelCopy if copied_to[t].is_none() => copied_to[t] = d.reg,
                    Opcode::ParallelCopy => {}
                    _ if place[t].home.is_none() => {
                        // A fixed definition goes home by the copy that follows it.
                        let moved = d.fixed.and_then(|_| {
                            let next = insts.get(k + 1)?;
                            (next.op == Opcode::ParallelCopy)
                                .then(|| next.defs.iter().find(|e| e.temp == d.temp)?.reg)
                                .flatten()
                        });
                        place[t].home = moved.or(d.reg);
                    }
                    _ => {}
                }
            }
        }
    }
    for (t, p) in place.iter_mut().enumerate() {
        if p.home.is_none() {
            p.home = first_read[t].or(copied_to[t]);
        }
        p.regs.sort_unstable();
        p.regs.dedup();
    }
    place.truncate(temps);
    place
}

/// The interference graph of an allocation, as the picture shows it.
pub struct Graph {
    /// The values (temps defined in the SSA function), in layout order of their definitions.
    pub values: Vec<Temp>,
    /// Interfering pairs, each once (`a < b`).
    pub edges: Vec<(Temp, Temp)>,
    pub placements: Vec<Placement>,
    /// Sets of two or more values whose copies the allocation made identities.
    pub coalesced: Vec<Vec<Temp>>,
}

/// Builds the graph of `alloc`, refusing more than `max_nodes` values.
pub fn graph(alloc: &Allocation, max_nodes: usize) -> Result<Graph, String> {
    let mut ssa = alloc.ssa.clone();
    let mut values = Vec::new();
    let mut seen = vec![false; ssa.temps.len()];
    for inst in ssa.blocks.iter().flat_map(|b| &b.insts) {
        for d in &inst.defs {
            if !std::mem::replace(&mut seen[d.temp.index()], true) {
                values.push(d.temp);
            }
        }
    }
    if values.len() > max_nodes {
        return Err(format!(
            "the interference graph has {} values, more than the limit of {max_nodes}; \
             raise it with --max-nodes {} (Graphviz lays out large graphs slowly)",
            values.len(),
            values.len()
        ));
    }
    let cfg = Cfg::compute(&ssa).map_err(|e| format!("{}: {}", e.block, e.message))?;
    let lv = compute_liveness(&mut ssa, &cfg);
    let view = kiln_regalloc::graph::interference_graph(&ssa, &cfg, &lv);
    let mut placements = placements(&alloc.allocated, ssa.temps.len());
    // A phi whose copies were all identities and that is never read is gone from the
    // allocated function: its operands sit in its home. (A dead phi gets no copies and no
    // register.)
    for _ in 0..ssa.blocks.len().min(16) {
        let mut changed = false;
        for phi in ssa
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .filter(|i| i.op.is_phi())
        {
            let t = phi.defs[0].temp.index();
            if placements[t].home.is_some() || phi.defs[0].dead {
                continue;
            }
            let home = phi
                .operands
                .iter()
                .filter_map(|o| o.temp_id())
                .find_map(|o| placements[o.index()].home);
            if home.is_some() {
                placements[t].home = home;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut edges = Vec::new();
    for &a in &values {
        for &b in view.adj.get(a.index()).map_or(&[][..], Vec::as_slice) {
            if b > a.0 && seen.get(b as usize) == Some(&true) {
                edges.push((a, Temp(b)));
            }
        }
    }
    // Coalesced: copy partners whose registers make the copy an identity.
    let mut parent: Vec<u32> = (0..ssa.temps.len() as u32).collect();
    fn find(parent: &mut [u32], mut x: u32) -> u32 {
        while parent[x as usize] != x {
            parent[x as usize] = parent[parent[x as usize] as usize];
            x = parent[x as usize];
        }
        x
    }
    for &a in &values {
        let Some(ra) = placements[a.index()].home else {
            continue;
        };
        for &(b, offset) in view.partners.get(a.index()).map_or(&[][..], Vec::as_slice) {
            let Some(rb) = placements.get(b as usize).and_then(|p| p.home) else {
                continue;
            };
            if seen.get(b as usize) == Some(&true)
                && ra.file() == rb.file()
                && ra.unit() as i64 == rb.unit() as i64 + offset as i64
            {
                let (x, y) = (find(&mut parent, a.0), find(&mut parent, b));
                parent[x as usize] = y;
            }
        }
    }
    let mut sets: Vec<Vec<Temp>> = vec![Vec::new(); ssa.temps.len()];
    for &v in &values {
        let root = find(&mut parent, v.0);
        sets[root as usize].push(v);
    }
    let mut coalesced: Vec<Vec<Temp>> = sets.into_iter().filter(|s| s.len() > 1).collect();
    coalesced.sort_by_key(|s| s[0]);
    Ok(Graph {
        values,
        edges,
        placements,
        coalesced,
    })
}

/// Shapes of the files, by file index.
const SHAPES: [&str; 5] = ["ellipse", "box", "hexagon", "octagon", "diamond"];

/// The dot text of the interference graph of `alloc`.
pub fn dot(alloc: &Allocation, options: InterferenceOptions) -> Result<String, String> {
    let g = graph(alloc, options.max_nodes)?;
    let func = &alloc.ssa;
    let target = &*func.target;
    let overlap = |a: Temp, b: Temp| {
        let (pa, pb) = (&g.placements[a.index()], &g.placements[b.index()]);
        match (pa.home, pb.home) {
            (Some(x), Some(y)) if x.file() == y.file() && !pa.spilled && !pb.spilled => {
                let (sa, sb) = (func.class(a).size as u32, func.class(b).size as u32);
                x.unit() < y.unit() + sb && y.unit() < x.unit() + sa
            }
            _ => false,
        }
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "graph {} {{",
        quoted(&format!("interference @{}", func.name))
    );
    let files: Vec<String> = target
        .files()
        .iter()
        .enumerate()
        .map(|(f, file)| format!("{} {}", SHAPES[f % SHAPES.len()], file.name))
        .collect();
    let _ = writeln!(
        out,
        "  graph [layout=fdp, maxiter={}, overlap=false, sep=\"+6\", fontname=\"Helvetica\", fontsize=12, labelloc=t,\n         label=<{}>];",
        // fdp keeps the clusters; fewer iterations for many values keep its time to seconds
        // (straight edges: routing splines around nodes takes minutes on hundreds of them).
        (60_000 / g.values.len().max(1)).clamp(100, 600),
        legend(func, &g, &files, alloc)
    );
    let _ = writeln!(
        out,
        "  node [style=filled, fontname=\"Courier\", fontsize=10, margin=\"0.04,0.02\"];"
    );
    let _ = writeln!(out, "  edge [color=\"#00000055\"];");
    let mut grouped = vec![false; func.temps.len()];
    for (k, set) in g.coalesced.iter().enumerate() {
        let reg = g.placements[set[0].index()]
            .home
            .map_or("?".into(), |r| fmt_reg(target, r));
        let _ = writeln!(out, "  subgraph {} {{", quoted(&format!("cluster_{k}")));
        let _ = writeln!(
            out,
            "    label={}; fontsize=9; style=\"rounded,dashed\"; color=\"#777777\";",
            quoted(&format!("coalesced ({reg})"))
        );
        for &t in set {
            grouped[t.index()] = true;
            let _ = writeln!(out, "    {}", node(func, &g, t));
        }
        let _ = writeln!(out, "  }}");
    }
    for &t in g.values.iter().filter(|t| !grouped[t.index()]) {
        let _ = writeln!(out, "  {}", node(func, &g, t));
    }
    for &(a, b) in &g.edges {
        let attrs = if overlap(a, b) {
            " [color=\"#c0392b\", penwidth=2.5, tooltip=\"interfering values in one register: moved for part of their lives\"]"
        } else {
            ""
        };
        let _ = writeln!(out, "  {} -- {}{attrs};", node_id(a), node_id(b));
    }
    let _ = writeln!(out, "}}");
    Ok(out)
}

/// The node of value `t`.
pub fn node_id(t: Temp) -> String {
    quoted(&format!("t{}", t.0))
}

fn node(func: &Function, g: &Graph, t: Temp) -> String {
    let target = &*func.target;
    let class = func.class(t);
    let p = &g.placements[t.index()];
    let shape = SHAPES[class.file.index() % SHAPES.len()];
    let (fill, reg) = match p.home {
        Some(r) => (unit_colour(r.unit()), fmt_reg(target, r)),
        None => ("#eeeeee".into(), "no register".into()),
    };
    let mut label = format!("<B>{}</B><BR/>{}", t, html(&reg));
    let others: Vec<String> = p
        .regs
        .iter()
        .filter(|&&r| Some(r) != p.home)
        .map(|&r| fmt_reg(target, r))
        .collect();
    if !others.is_empty() {
        let shown = others.iter().take(3).cloned().collect::<Vec<_>>().join(" ");
        let more = if others.len() > 3 { " …" } else { "" };
        let _ = write!(
            label,
            "<BR/><FONT POINT-SIZE=\"8\">also {}{more}</FONT>",
            html(&shown)
        );
    }
    let mut attrs = format!(
        "shape={shape}, fillcolor=\"{fill}\", label=<{label}>, tooltip={}",
        quoted(&format!(
            "{t}:{} in {reg}",
            kiln_ir::text::fmt_class(target, class)
        ))
    );
    if p.spilled {
        attrs.push_str(", color=\"#c0392b\", penwidth=2, style=\"filled,dashed\"");
    }
    format!("{} [{attrs}];", node_id(t))
}

fn legend(func: &Function, g: &Graph, files: &[String], alloc: &Allocation) -> String {
    let s = &alloc.stats;
    // One meaning per cell, so that a viewer's wider font does not run them together.
    let cell = |colour: &str, text: String| {
        format!(
            "<TD ALIGN=\"LEFT\"><FONT POINT-SIZE=\"10\" COLOR=\"{colour}\">{}</FONT></TD>",
            html(&text)
        )
    };
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "<TABLE BORDER=\"0\" CELLSPACING=\"0\" CELLPADDING=\"6\">\
<TR><TD ALIGN=\"LEFT\" COLSPAN=\"3\"><B>@{}: interference graph, {}, {}</B></TD></TR>\
<TR>{}{}{}</TR><TR>{}{}{}</TR></TABLE>",
        html(&func.name),
        plural(g.values.len(), "value", "values"),
        plural(g.edges.len(), "edge", "edges"),
        cell("#000000", "fill: its register (a colour per unit)".into()),
        cell(
            "#000000",
            format!("shape: register file ({})", files.join(", "))
        ),
        cell(
            "#000000",
            "dashed box: values coalesced into one register".into()
        ),
        cell("#c0392b", "dashed red outline: spilled".into()),
        cell(
            "#c0392b",
            "thick red edge: one register, one value moved".into()
        ),
        cell(
            "#000000",
            format!(
                "{}, spills {}, reloads {}, registers used {:?} for a demand of {:?}",
                plural(g.coalesced.len(), "coalesced set", "coalesced sets"),
                s.spills,
                s.reloads,
                s.registers_used,
                s.max_demand
            )
        ),
    )
}
