//! `kiln draw cfg`: the logical CFG (what one lane does) and the linear CFG (what the wave
//! executes) side by side as Graphviz dot, each block with its instructions, edges out of
//! divergent branches dashed (the divergence analysis decides, not the flags), back edges and
//! edges only the wave takes coloured, loop headers doubly outlined.

use super::{html, quoted};
use kiln_analysis::{Cfg, Divergence};
use kiln_ir::{Block, Function, Opcode};
use std::fmt::Write as _;

/// What to draw.
#[derive(Clone, Copy, Debug)]
pub struct CfgOptions {
    /// Instructions shown per block; longer blocks keep their first and last ones and say how
    /// many are left out.
    pub max_insts: usize,
}

impl Default for CfgOptions {
    fn default() -> CfgOptions {
        CfgOptions { max_insts: 24 }
    }
}

/// Colours of the edges: forward, back edge, edge only the wave takes (linear CFG).
const FORWARD: &str = "#333333";
const BACK: &str = "#c0392b";
const WAVE_ONLY: &str = "#2c7fb8";
/// Divergent edges are dashed and drawn in this colour when forward.
const DIVERGENT: &str = "#d95f02";

/// The dot text of both CFGs of `func`.
pub fn dot(func: &Function, options: CfgOptions) -> Result<String, String> {
    let cfg = Cfg::compute(func).map_err(|e| format!("{}: {}", e.block, e.message))?;
    let div = Divergence::compute(func, &cfg);
    let divergent: Vec<Option<bool>> = func
        .block_ids()
        .map(|b| branch_divergent(func, &cfg, &div, b))
        .collect();
    let mut out = String::new();
    let name = format!("@{}", func.name);
    let _ = writeln!(out, "digraph {} {{", quoted(&format!("cfg {name}")));
    let _ = writeln!(
        out,
        "  graph [fontname=\"Helvetica\", fontsize=12, labelloc=t, newrank=true, nodesep=0.3, ranksep=0.35,\n         label=<{}>];",
        legend(&name)
    );
    let _ = writeln!(
        out,
        "  node [shape=box, style=\"rounded,filled\", fontname=\"Courier\", fontsize=10, margin=\"0.08,0.04\"];"
    );
    let _ = writeln!(
        out,
        "  edge [fontname=\"Helvetica\", fontsize=9, arrowsize=0.7];"
    );
    for (kind, title, edges) in [
        (
            "logical",
            "logical CFG: what one lane does",
            &cfg.logical.succs,
        ),
        (
            "linear",
            "linear CFG: what the wave executes",
            &cfg.linear.succs,
        ),
    ] {
        let _ = writeln!(out, "  subgraph {} {{", quoted(&format!("cluster_{kind}")));
        let _ = writeln!(
            out,
            "    label=<<B>{}</B>>; fontsize=14; style=rounded; color=\"#999999\";",
            html(title)
        );
        for b in func.block_ids() {
            let _ = writeln!(
                out,
                "    {} [{}];",
                node_id(kind, b),
                block_attrs(func, &cfg, &div, b, options)
            );
        }
        for b in func.block_ids() {
            for &s in &edges[b.index()] {
                let back = cfg.is_back_edge(b, s);
                let wave_only = kind == "linear" && !cfg.logical.succs[b.index()].contains(&s);
                let dashed = divergent[b.index()] == Some(true);
                let colour = match (back, wave_only, dashed) {
                    (true, _, _) => BACK,
                    (false, true, _) => WAVE_ONLY,
                    (false, false, true) => DIVERGENT,
                    _ => FORWARD,
                };
                let mut attrs = format!(
                    "style={}, color=\"{colour}\"",
                    if dashed { "dashed" } else { "solid" }
                );
                if back {
                    attrs.push_str(", penwidth=1.6, label=\"back\", fontcolor=\"#c0392b\"");
                }
                let _ = writeln!(
                    out,
                    "    {} -> {} [{attrs}];",
                    node_id(kind, b),
                    node_id(kind, s)
                );
            }
        }
        let _ = writeln!(out, "  }}");
    }
    let _ = writeln!(out, "}}");
    Ok(out)
}

/// The node of block `b` in the cluster `kind` (`logical` or `linear`).
pub fn node_id(kind: &str, b: Block) -> String {
    quoted(&format!("{kind}_{b}"))
}

/// Whether the branch ending `b` is divergent by the analysis (`None`: it is no branch).
fn branch_divergent(func: &Function, cfg: &Cfg, div: &Divergence, b: Block) -> Option<bool> {
    match func.block(b).terminator()?.op {
        Opcode::If => div.if_divergent_at(cfg, b),
        Opcode::Break | Opcode::Continue => div.jump_divergent.get(b.index()).copied(),
        _ => None,
    }
}

/// Whether the `if` ending `b` is marked divergent in the text (breaks and continues carry no
/// mark).
fn if_marked(func: &Function, b: Block) -> Option<bool> {
    let term = func.block(b).terminator()?;
    (term.op == Opcode::If).then_some(term.flags.divergent)
}

fn block_attrs(
    func: &Function,
    cfg: &Cfg,
    div: &Divergence,
    b: Block,
    options: CfgOptions,
) -> String {
    let depth = cfg.loop_depth(b);
    let fill = ["#ffffff", "#eef4fb", "#dce9f7", "#c9ddf2"][depth.min(3) as usize];
    let header = cfg.loops.iter().find(|l| l.header == b);
    let mut notes = Vec::new();
    if b.0 == 0 {
        notes.push("entry".to_string());
    }
    if let Some(l) = header {
        notes.push(format!(
            "loop header, depth {}{}",
            l.depth,
            if l.divergent { ", divergent" } else { "" }
        ));
    } else if depth > 0 {
        notes.push(format!("depth {depth}"));
    }
    // Non-breaking spaces: an SVG viewer drops the leading spaces of the notes' text.
    let mut rows = format!("<TR><TD ALIGN=\"LEFT\"><B>{b}</B>");
    if !notes.is_empty() {
        let _ = write!(
            rows,
            "&#160;&#160;<FONT FACE=\"Helvetica\" POINT-SIZE=\"9\">{}</FONT>",
            html(&notes.join(", "))
        );
    }
    rows.push_str("</TD></TR>");
    let analysis = branch_divergent(func, cfg, div, b);
    let marked = if_marked(func, b);
    if let (Some(a), Some(m)) = (analysis, marked)
        && a != m
    {
        let word = |d: bool| if d { "divergent" } else { "uniform" };
        let _ = write!(
            rows,
            "<TR><TD ALIGN=\"LEFT\"><FONT FACE=\"Helvetica\" POINT-SIZE=\"9\" COLOR=\"#c0392b\">marked {}; the analysis finds it {}</FONT></TD></TR>",
            word(m),
            word(a)
        );
    }
    let insts = &func.block(b).insts;
    let shown: Vec<Option<usize>> = if insts.len() <= options.max_insts.max(2) {
        (0..insts.len()).map(Some).collect()
    } else {
        let keep = options.max_insts.max(2);
        let head = keep.div_ceil(2);
        let tail = keep - head;
        (0..head)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((insts.len() - tail..insts.len()).map(Some))
            .collect()
    };
    for k in shown {
        match k {
            Some(k) => {
                let _ = write!(
                    rows,
                    "<TR><TD ALIGN=\"LEFT\">{}</TD></TR>",
                    html(&kiln_ir::text::print_inst(func, &insts[k]))
                );
            }
            None => {
                let hidden = insts.len() - options.max_insts.max(2);
                let _ = write!(
                    rows,
                    "<TR><TD ALIGN=\"LEFT\"><FONT FACE=\"Helvetica\" POINT-SIZE=\"9\" COLOR=\"#666666\"><I>… {hidden} instruction{} not shown …</I></FONT></TD></TR>",
                    if hidden == 1 { "" } else { "s" }
                );
            }
        }
    }
    format!(
        "label=<<TABLE BORDER=\"0\" CELLBORDER=\"0\" CELLSPACING=\"0\" CELLPADDING=\"1\">{rows}</TABLE>>, fillcolor=\"{fill}\"{}",
        if header.is_some() {
            ", peripheries=2"
        } else {
            ""
        }
    )
}

/// The graph's caption: the function and what the styles mean, one meaning per cell (so that
/// a viewer's font, wider than the one `dot` measured with, does not run them together).
fn legend(name: &str) -> String {
    let cell = |colour: &str, text: &str| {
        format!(
            "<TD ALIGN=\"LEFT\"><FONT POINT-SIZE=\"10\" COLOR=\"{colour}\">{}</FONT></TD>",
            html(text)
        )
    };
    format!(
        "<TABLE BORDER=\"0\" CELLSPACING=\"0\" CELLPADDING=\"6\">\
<TR><TD ALIGN=\"LEFT\" COLSPAN=\"3\"><B>{}: logical and linear CFG</B></TD></TR>\
<TR>{}{}{}</TR><TR>{}{}{}</TR></TABLE>",
        html(name),
        cell(FORWARD, "solid edge: uniform branch"),
        cell(DIVERGENT, "dashed edge: divergent branch (lanes split)"),
        cell(FORWARD, "double outline: loop header"),
        cell(BACK, "red edge: back edge"),
        cell(WAVE_ONLY, "blue edge: only the wave takes it"),
        cell(FORWARD, "shading: loop depth"),
    )
}
