//! Pictures of a function (`kiln draw`): its logical and linear CFG ([`cfg`]), its
//! interference graph coloured by the registers the allocator chose ([`interference`]), its
//! register demand per instruction ([`pressure`]). The first two are Graphviz dot text, the
//! third SVG written here. What each shows and how to read it is in `docs/draw.md`.

pub mod cfg;
pub mod interference;
pub mod pressure;

use crate::pipeline::{self, EntryPoint, Kept, Options, Stage};
use kiln_ir::Function;
use kiln_regalloc::{Allocator, RaOptions, RaStats};
use std::path::Path;

/// Whether `path` names `.kir` text (or `-`, standard input) rather than a shader.
pub fn is_kir(path: &Path) -> bool {
    path.as_os_str() == "-" || path.extension().is_some_and(|e| e == "kir")
}

/// The function a picture is drawn of: a `.kir` function as written (verified), or, for a
/// shader, the function the vc4 back end allocates (the IR after the interface pass, as
/// `kiln compile --ir interface` prints it).
pub fn load(path: &Path, entry: &EntryPoint) -> miette::Result<Function> {
    if is_kir(path) {
        return crate::kir::load_verified(path);
    }
    let shader = pipeline::read_shader(path)?;
    let options = Options {
        keep: vec![Stage::Interface],
        ..Options::default()
    };
    let interface = |stages: Vec<(Stage, Function)>| {
        stages
            .into_iter()
            .rev()
            .find(|(s, _)| *s == Stage::Interface)
            .map(|(_, f)| f)
    };
    match pipeline::compile(&shader, entry, &options) {
        Ok(c) => interface(c.stages)
            .ok_or_else(|| miette::miette!("{}: no function reached allocation", shader.name())),
        // The back end refused (say, a shader that would spill): the function it was given is
        // still worth drawing.
        Err(e @ pipeline::Error::Back { .. }) => {
            let mut kept = Kept::new(&[Stage::Interface]);
            let front = pipeline::front(&shader, entry, &options, &mut kept)?;
            let info = pipeline::shader_info(&front.interface);
            let _ = pipeline::back_end(&front.generic, &info, &options, &mut kept);
            interface(kept.stages).ok_or_else(|| e.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// An allocation of a function, with the SSA function it is an allocation of.
pub struct Allocation {
    /// The input in the allocator's form (critical edges split, constrained operands copied),
    /// before spilling: the blocks are the allocated function's.
    pub ssa: Function,
    pub allocated: Function,
    pub stats: RaStats,
    /// The budget of every file, in units (the whole file where none was given).
    pub limits: Vec<u32>,
}

/// Reads a budget such as `v=24,s=8` for `func`'s target (`None`: whole files).
pub fn parse_budget(func: &Function, budget: Option<&str>) -> miette::Result<Vec<Option<u32>>> {
    match budget {
        Some(b) => {
            RaOptions::parse_budget(&*func.target, b).map_err(|e| miette::miette!("--budget: {e}"))
        }
        None => Ok(Vec::new()),
    }
}

/// Allocates `func` (checked) with `allocator` within `budget`.
pub fn allocate(
    func: &Function,
    allocator: Allocator,
    budget: Vec<Option<u32>>,
) -> Result<Allocation, String> {
    if func.allocated {
        return Err("the function is already allocated; draw it from its SSA form".into());
    }
    let options = RaOptions {
        allocator,
        budget,
        check: true,
        refuse_spilling: false,
    };
    let limits = options.limits(&*func.target);
    let mut allocated = func.clone();
    let (stats, ssa) = kiln_regalloc::allocate_with_input(&mut allocated, &options)
        .map_err(|e| format!("allocation: {e}"))?;
    Ok(Allocation {
        ssa,
        allocated,
        stats,
        limits,
    })
}

/// Text escaped for a Graphviz HTML-like label.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A double-quoted dot string.
pub fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The fill colour of register unit `unit`: hues a golden angle apart, in three lightness
/// levels, so that neighbouring units differ clearly and units of one file never repeat a
/// colour below 360.
pub fn unit_colour(unit: u32) -> String {
    let hue = (unit as f64 * 137.507_764) % 360.0;
    let light = [0.78, 0.66, 0.88][(unit % 3) as usize];
    let (r, g, b) = hsl(hue, 0.62, light);
    format!("#{r:02x}{g:02x}{b:02x}")
}

fn hsl(h: f64, s: f64, l: f64) -> (u8, u8, u8) {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = h / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (byte(r), byte(g), byte(b))
}

/// Renders dot text with Graphviz's `dot` into `format` (`svg`, `png`, `pdf`).
pub fn render_dot(dot: &str, format: &str) -> Result<Vec<u8>, String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("dot")
        .arg(format!("-T{format}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "`dot` (Graphviz) is not installed or not on PATH: it renders .{format}; \
                 install Graphviz, or write dot text with `-o FILE.dot` (or no -o)"
            ),
            _ => format!("cannot run `dot`: {e}"),
        })?;
    let mut stdin = child.stdin.take().expect("piped");
    let text = dot.to_string();
    // Write from another thread: `dot` may fill its output pipe before it reads everything.
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("`dot` failed: {e}"))?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(format!(
            "`dot` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}
