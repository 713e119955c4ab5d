//! `kiln draw pressure`: the register demand of every instruction (seed 000's demand, as
//! `kiln liveness --demand` reports it) per register file as a step plot, written as SVG here:
//! blocks as vertical lines, loop depth as shading, the budget per file as a horizontal line,
//! and the spills, reloads and rematerialisations the allocator inserted at that budget
//! marked where they sit.

use super::{Allocation, html};
use kiln_analysis::{Cfg, compute_liveness};
use kiln_ir::{Function, Inst, Opcode};
use std::fmt::Write as _;

/// What the allocator inserted, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    Spill,
    Reload,
    Remat,
}

impl Mark {
    fn name(self) -> &'static str {
        match self {
            Mark::Spill => "spill",
            Mark::Reload => "reload",
            Mark::Remat => "remat",
        }
    }
}

/// One inserted instruction: before which instruction of the SSA function (layout index; the
/// count of instructions when at the very end), its file and its text.
#[derive(Clone, Debug)]
pub struct Marker {
    pub kind: Mark,
    pub at: usize,
    pub file: usize,
    pub text: String,
}

/// The numbers the picture is drawn from.
pub struct Pressure {
    /// Per instruction of the SSA function in layout order, the demand of every file.
    pub demand: Vec<Vec<i32>>,
    /// First instruction of every block.
    pub block_start: Vec<usize>,
    pub loop_depth: Vec<u32>,
    pub markers: Vec<Marker>,
    pub file_names: Vec<String>,
    /// The budget of every file, and the file's size.
    pub limits: Vec<u32>,
    pub file_units: Vec<u32>,
}

/// Demand, blocks and the allocator's insertions of `alloc`.
pub fn measure(alloc: &Allocation) -> Result<Pressure, String> {
    let mut ssa = alloc.ssa.clone();
    let cfg = Cfg::compute(&ssa).map_err(|e| format!("{}: {}", e.block, e.message))?;
    let lv = compute_liveness(&mut ssa, &cfg);
    let files = ssa.target.files().len();
    let mut demand = Vec::with_capacity(ssa.inst_count());
    let mut block_start = Vec::with_capacity(ssa.blocks.len());
    for b in ssa.block_ids() {
        block_start.push(demand.len());
        for d in &lv.register_demand[b.index()] {
            demand.push((0..files).map(|f| d.0[f]).collect());
        }
    }
    let loop_depth = ssa.block_ids().map(|b| cfg.loop_depth(b)).collect();
    let markers = markers(&ssa, &alloc.allocated, &block_start);
    Ok(Pressure {
        demand,
        block_start,
        loop_depth,
        markers,
        file_names: ssa.target.files().iter().map(|f| f.name.clone()).collect(),
        limits: alloc.limits.clone(),
        file_units: ssa.target.files().iter().map(|f| f.units).collect(),
    })
}

/// Whether the allocated instruction `a` is the SSA instruction `s` (same operation, same
/// values defined, as many operands).
fn same(a: &Inst, s: &Inst) -> bool {
    a.op == s.op
        && a.operands.len() == s.operands.len()
        && a.defs.len() == s.defs.len()
        && a.defs.iter().zip(&s.defs).all(|(x, y)| x.temp == y.temp)
}

/// The spills, reloads and rematerialisations of `allocated`, placed in the layout of `ssa`
/// (whose blocks are the allocated function's: the allocator splits edges in both). The
/// input's instructions appear in the allocated function in order, but for the
/// rematerialisable ones the graph allocator's spilling removes; a recomputation that lands
/// where its removed original stood is taken for the original.
fn markers(ssa: &Function, allocated: &Function, block_start: &[usize]) -> Vec<Marker> {
    let total = ssa.inst_count();
    let mut out = Vec::new();
    for b in allocated.block_ids() {
        let (start, mine): (usize, &[Inst]) = match ssa.blocks.get(b.index()) {
            Some(block) => (block_start[b.index()], &block.insts),
            None => (total, &[]),
        };
        // Phis become copies at the ends of predecessors: the block's own instructions follow.
        let mut j = mine.iter().take_while(|i| i.op.is_phi()).count();
        for inst in &allocated.block(b).insts {
            // The input's instruction, or the next one after input instructions the graph
            // allocator's spilling removed (those it recomputes where they are read).
            let found = mine[j.min(mine.len())..]
                .iter()
                .position(|s| same(inst, s) || !kiln_regalloc::spill::rematerializable(s))
                .filter(|&k| same(inst, &mine[j + k]));
            if let Some(k) = found {
                j += k + 1;
                continue;
            }
            let kind = match inst.op {
                Opcode::Spill => Mark::Spill,
                Opcode::Reload => Mark::Reload,
                // Copies are the assignment's (a `mov` of the input matches above; one the
                // allocator adds recomputes a constant).
                Opcode::ParallelCopy => continue,
                _ if inst.defs.len() == 1 && !inst.op.info().terminator => Mark::Remat,
                _ => continue,
            };
            let file = match kind {
                Mark::Spill => inst.operands.first().and_then(|o| o.temp_id()),
                _ => inst.defs.first().map(|d| d.temp),
            }
            .map_or(0, |t| allocated.class(t).file.index());
            out.push(Marker {
                kind,
                at: (start + j).min(total),
                file,
                text: format!("{b}: {}", kiln_ir::text::print_inst(allocated, inst)),
            });
        }
    }
    out
}

/// Colours of the files' series, by file index.
/// (No red or green: those are the markers'.)
const SERIES: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];
const SPILL: &str = "#d62728";
const RELOAD: &str = "#2ca02c";
const REMAT: &str = "#bcbd22";

/// First legend row's baseline area, and the height of a row.
const LEGEND_Y: f64 = 44.0;
const LEGEND_ROW: f64 = 18.0;

/// A legend entry's sample.
enum Swatch {
    /// A line of a colour, dashed or not.
    Line(&'static str, bool),
    Marker(Mark),
    Loop,
    Boundary,
}

impl Swatch {
    fn svg(&self, x: f64, y: f64) -> String {
        match self {
            Swatch::Line(colour, dashed) => format!(
                "<line x1=\"{x:.2}\" y1=\"{y:.2}\" x2=\"{:.2}\" y2=\"{y:.2}\" stroke=\"{colour}\" stroke-width=\"2\"{}/>",
                x + 18.0,
                if *dashed {
                    " stroke-dasharray=\"6,3\""
                } else {
                    ""
                }
            ),
            Swatch::Marker(m) => format!("{}/>", marker_path(*m, x + 9.0, y, 1.0)),
            Swatch::Loop => format!(
                "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"14\" height=\"10\" fill=\"#7f8fa6\" fill-opacity=\"0.24\" stroke=\"#cccccc\"/>",
                x + 2.0,
                y - 5.0
            ),
            Swatch::Boundary => format!(
                "<line x1=\"{:.2}\" y1=\"{:.2}\" x2=\"{:.2}\" y2=\"{:.2}\" stroke=\"#888888\" stroke-dasharray=\"3,3\"/>",
                x + 9.0,
                y - 7.0,
                x + 9.0,
                y + 7.0
            ),
        }
    }
}

/// The start of a marker's path (no closing `/>`), centred on (x, y): a triangle pointing
/// down for a spill (into memory), up for a reload, a diamond for a rematerialisation.
fn marker_path(m: Mark, x: f64, y: f64, scale: f64) -> String {
    let (w, h) = (4.0 * scale, 3.5 * scale);
    let d = match m {
        Mark::Spill => format!(
            "M{:.2},{:.2} L{:.2},{:.2} L{x:.2},{:.2} Z",
            x - w,
            y - h,
            x + w,
            y - h,
            y + h
        ),
        Mark::Reload => format!(
            "M{:.2},{:.2} L{:.2},{:.2} L{x:.2},{:.2} Z",
            x - w,
            y + h,
            x + w,
            y + h,
            y - h
        ),
        Mark::Remat => format!(
            "M{:.2},{y:.2} L{x:.2},{:.2} L{:.2},{y:.2} L{x:.2},{:.2} Z",
            x - h,
            y - h,
            x + h,
            y + h
        ),
    };
    let fill = match m {
        Mark::Spill => SPILL,
        Mark::Reload => RELOAD,
        Mark::Remat => REMAT,
    };
    format!("<path d=\"{d}\" fill=\"{fill}\"")
}

/// The widest plot, in pixels: past 200 instructions, instructions share pixels.
const MAX_PLOT_WIDTH: f64 = 2400.0;

/// Geometry of the plot.
struct Frame {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
    n: usize,
    ymax: f64,
}

impl Frame {
    fn x(&self, k: f64) -> f64 {
        self.left + self.width * k / self.n.max(1) as f64
    }
    fn y(&self, v: f64) -> f64 {
        self.top + self.height * (1.0 - v / self.ymax)
    }
}

/// A step between 1, 2 and 5 times a power of ten giving at most `max` ticks up to `range`.
fn nice_step(range: f64, max: usize) -> f64 {
    let raw = range / max.max(1) as f64;
    let mag = 10f64.powf(raw.max(1e-9).log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * mag)
        .max(1.0)
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// Width in pixels of `text` at `size` (a sans-serif average).
fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.6
}

/// The SVG of `p` for the function named `name`.
pub fn svg(name: &str, p: &Pressure) -> String {
    let n = p.demand.len().max(1);
    let files = p.file_names.len();
    let peak: Vec<i32> = (0..files)
        .map(|f| p.demand.iter().map(|d| d[f]).max().unwrap_or(0))
        .collect();
    let top_value = peak
        .iter()
        .map(|&v| v as f64)
        .chain(p.limits.iter().map(|&l| l as f64))
        .fold(1.0f64, f64::max);
    let ystep = nice_step(top_value, 8);
    let ymax = ((top_value * 1.08) / ystep).ceil() * ystep;
    let (left, right) = (64.0, 110.0);
    let plot_w = (n as f64 * 12.0).clamp(720.0, MAX_PLOT_WIDTH);
    let total_w = left + plot_w + right;
    let spills = p.markers.iter().filter(|m| m.kind == Mark::Spill).count();
    let reloads = p.markers.iter().filter(|m| m.kind == Mark::Reload).count();
    let remats = p.markers.iter().filter(|m| m.kind == Mark::Remat).count();
    let mut items: Vec<(Swatch, String)> = p
        .file_names
        .iter()
        .enumerate()
        .map(|(file, name)| {
            (
                Swatch::Line(SERIES[file % SERIES.len()], false),
                format!("{name} demand (max {})", peak[file]),
            )
        })
        .collect();
    items.push((Swatch::Line("#444444", true), "budget".into()));
    items.push((Swatch::Marker(Mark::Spill), format!("spill ({spills})")));
    items.push((Swatch::Marker(Mark::Reload), format!("reload ({reloads})")));
    if remats > 0 {
        items.push((
            Swatch::Marker(Mark::Remat),
            format!("rematerialised ({remats})"),
        ));
    }
    items.push((Swatch::Loop, "loop (darker: deeper)".into()));
    items.push((Swatch::Boundary, "block start".into()));
    // Legend rows wrapped to the picture's width.
    let mut legend = Vec::with_capacity(items.len());
    let (mut x, mut y) = (left, LEGEND_Y);
    for (swatch, text) in items {
        let w = 22.0 + text_width(&text, 11.0) + 16.0;
        if x + w > total_w - 8.0 && x > left {
            x = left;
            y += LEGEND_ROW;
        }
        legend.push((swatch, text, x, y));
        x += w;
    }
    let f = Frame {
        left,
        // Below the legend, with room for the block labels.
        top: y + 36.0,
        width: plot_w,
        // Wide plots are taller, to keep their shape.
        height: if plot_w > 1200.0 { 400.0 } else { 320.0 },
        n,
        ymax,
    };
    let total_h = f.top + f.height + 58.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{total_w:.0}\" height=\"{total_h:.0}\" viewBox=\"0 0 {total_w:.0} {total_h:.0}\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(
        s,
        "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{total_w:.0}\" height=\"{total_h:.0}\" fill=\"#ffffff\"/>"
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">{} — register demand per instruction ({}, {})</text>",
        f.left,
        html(&format!("@{name}")),
        plural(p.demand.len(), "instruction"),
        plural(p.block_start.len(), "block")
    );
    // Loop depth: shading behind each block in a loop.
    let _ = writeln!(s, "<g class=\"loops\">");
    for (b, &start) in p.block_start.iter().enumerate() {
        let depth = p.loop_depth[b];
        let end = p.block_start.get(b + 1).copied().unwrap_or(p.demand.len());
        if depth == 0 || end == start {
            continue;
        }
        let (x0, x1) = (f.x(start as f64), f.x(end as f64));
        let _ = writeln!(
            s,
            "<rect class=\"loop\" x=\"{x0:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"#7f8fa6\" fill-opacity=\"{:.2}\"><title>bb{b}: loop depth {depth}</title></rect>",
            f.top,
            (x1 - x0).max(0.5),
            f.height,
            (0.12 * depth as f64).min(0.5)
        );
    }
    let _ = writeln!(s, "</g>");
    // Grid and y ticks.
    let _ = writeln!(
        s,
        "<g class=\"yaxis\" font-size=\"10\" text-anchor=\"end\">"
    );
    let mut v = 0.0;
    while v <= ymax + 1e-9 {
        let y = f.y(v);
        let _ = writeln!(
            s,
            "<line x1=\"{:.2}\" y1=\"{y:.2}\" x2=\"{:.2}\" y2=\"{y:.2}\" stroke=\"#e5e5e5\"/><text x=\"{:.2}\" y=\"{:.2}\">{v}</text>",
            f.left,
            f.left + f.width,
            f.left - 6.0,
            y + 3.5
        );
        v += ystep;
    }
    let _ = writeln!(
        s,
        "<text x=\"16\" y=\"{:.2}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {:.2})\">register demand (units)</text>",
        f.top + f.height / 2.0,
        f.top + f.height / 2.0
    );
    let _ = writeln!(s, "</g>");
    // Block boundaries, labelled where there is room.
    let _ = writeln!(s, "<g class=\"blocks\" font-size=\"10\">");
    let mut last_label_end = f64::NEG_INFINITY;
    // Boundaries closer than a few pixels fade, so that the series stays readable.
    let boundary_opacity = if f.width / p.block_start.len().max(1) as f64 >= 12.0 {
        1.0
    } else {
        0.4
    };
    for (b, &start) in p.block_start.iter().enumerate() {
        let x = f.x(start as f64);
        if b > 0 {
            let _ = writeln!(
                s,
                "<line class=\"boundary\" x1=\"{x:.2}\" y1=\"{:.2}\" x2=\"{x:.2}\" y2=\"{:.2}\" stroke=\"#888888\" stroke-width=\"0.8\" stroke-dasharray=\"3,3\" stroke-opacity=\"{boundary_opacity}\"><title>bb{b} starts at instruction {start}</title></line>",
                f.top - 4.0,
                f.top + f.height
            );
        }
        let label = format!("bb{b}");
        if x >= last_label_end + 4.0 {
            let _ = writeln!(
                s,
                "<text class=\"block-label\" x=\"{:.2}\" y=\"{:.2}\" fill=\"#555555\">{label}</text>",
                x + 2.0,
                f.top - 7.0
            );
            last_label_end = x + 2.0 + text_width(&label, 10.0);
        }
    }
    let _ = writeln!(s, "</g>");
    // Plot frame and x ticks.
    let _ = writeln!(
        s,
        "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"none\" stroke=\"#444444\"/>",
        f.left, f.top, f.width, f.height
    );
    let _ = writeln!(
        s,
        "<g class=\"xaxis\" font-size=\"10\" text-anchor=\"middle\">"
    );
    let max_ticks = ((f.width / 60.0) as usize).max(2);
    let xstep = nice_step(n as f64, max_ticks) as usize;
    let bottom = f.top + f.height;
    for k in (0..=n).step_by(xstep.max(1)) {
        let x = f.x(k as f64);
        let _ = writeln!(
            s,
            "<line x1=\"{x:.2}\" y1=\"{bottom:.2}\" x2=\"{x:.2}\" y2=\"{:.2}\" stroke=\"#444444\"/><text x=\"{x:.2}\" y=\"{:.2}\">{k}</text>",
            bottom + 4.0,
            bottom + 16.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.2}\" y=\"{:.2}\" font-size=\"11\">instruction (layout order)</text>",
        f.left + f.width / 2.0,
        bottom + 34.0
    );
    let _ = writeln!(s, "</g>");
    // Budgets.
    let _ = writeln!(s, "<g class=\"budgets\" font-size=\"10\">");
    let mut label_ys: Vec<f64> = Vec::new();
    for (file, &limit) in p.limits.iter().enumerate().take(files) {
        let colour = SERIES[file % SERIES.len()];
        let y = f.y(limit as f64);
        let _ = writeln!(
            s,
            "<line class=\"budget\" data-file=\"{}\" x1=\"{:.2}\" y1=\"{y:.2}\" x2=\"{:.2}\" y2=\"{y:.2}\" stroke=\"{colour}\" stroke-width=\"1.2\" stroke-dasharray=\"8,4\"><title>{} budget: {limit} units</title></line>",
            html(&p.file_names[file]),
            f.left,
            f.left + f.width,
            html(&p.file_names[file])
        );
        // Labels of budgets close together are moved apart.
        let mut ly = y + 3.5;
        while label_ys.iter().any(|&o| (o - ly).abs() < 12.0) {
            ly += 12.0;
        }
        label_ys.push(ly);
        let _ = writeln!(
            s,
            "<text x=\"{:.2}\" y=\"{ly:.2}\" fill=\"{colour}\">{} budget {limit}{}</text>",
            f.left + f.width + 6.0,
            html(&p.file_names[file]),
            if p.file_units.get(file) == Some(&limit) {
                " (all)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(s, "</g>");
    // The series: one step line per file.
    let _ = writeln!(s, "<g class=\"series-group\" fill=\"none\">");
    for (file, name) in p.file_names.iter().enumerate() {
        let colour = SERIES[file % SERIES.len()];
        let mut points = String::new();
        let mut last: Option<i32> = None;
        for (k, d) in p.demand.iter().enumerate() {
            let v = d[file];
            if last != Some(v) {
                if let Some(l) = last {
                    let _ = write!(points, "{:.2},{:.2} ", f.x(k as f64), f.y(l as f64));
                }
                let _ = write!(points, "{:.2},{:.2} ", f.x(k as f64), f.y(v as f64));
                last = Some(v);
            }
        }
        if let Some(l) = last {
            let _ = write!(
                points,
                "{:.2},{:.2}",
                f.x(p.demand.len() as f64),
                f.y(l as f64)
            );
        }
        let _ = writeln!(
            s,
            "<polyline class=\"series\" data-file=\"{}\" points=\"{}\" stroke=\"{colour}\" stroke-width=\"1.6\" stroke-linejoin=\"round\"><title>{} demand, at most {}</title></polyline>",
            html(name),
            points.trim_end(),
            html(name),
            peak[file]
        );
    }
    let _ = writeln!(s, "</g>");
    // Markers on the series of their file, stacked where several sit at one place.
    let _ = writeln!(s, "<g class=\"markers\">");
    let mut stacked: std::collections::HashMap<(usize, usize), usize> = Default::default();
    // Many markers for the width: smaller, and see-through.
    let dense = f.width / (p.markers.len().max(1) as f64) < 6.0;
    let scale = if dense { 0.65 } else { 1.0 };
    for m in &p.markers {
        let level = p
            .demand
            .get(m.at.min(p.demand.len().saturating_sub(1)))
            .map_or(0, |d| d.get(m.file).copied().unwrap_or(0));
        let x = f.x(m.at as f64);
        let slot = stacked.entry((m.at, m.file)).or_insert(0);
        let up = *slot as f64 * 7.0 * scale;
        *slot += 1;
        let y = (f.y(level as f64) - 6.0 - up).clamp(f.top + 4.0, f.top + f.height - 4.0);
        let shape = marker_path(m.kind, x, y, scale);
        let _ = writeln!(
            s,
            "{shape} class=\"{}\" stroke=\"#ffffff\" stroke-width=\"0.6\" fill-opacity=\"{}\"><title>{} before instruction {}</title></path>",
            m.kind.name(),
            if dense { 0.8 } else { 1.0 },
            html(&m.text),
            m.at
        );
    }
    let _ = writeln!(s, "</g>");
    let _ = writeln!(s, "<g class=\"legend\" font-size=\"11\">");
    for (swatch, text, x, y) in legend {
        let _ = writeln!(
            s,
            "{}<text x=\"{:.2}\" y=\"{:.2}\">{}</text>",
            swatch.svg(x, y),
            x + 22.0,
            y + 4.0,
            html(&text)
        );
    }
    let _ = writeln!(s, "</g>");
    let _ = writeln!(s, "</svg>");
    s
}
