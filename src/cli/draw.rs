//! `kiln draw cfg|interference|pressure`: pictures of a function (`crate::draw`).

use crate::cli::{EntryArgs, print};
use crate::draw::{self, cfg::CfgOptions, interference::InterferenceOptions};
use crate::pipeline;
use clap::{Args, Subcommand};
use kiln_ir::Function;
use kiln_regalloc::Allocator;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum DrawCommand {
    /// The logical and linear CFG side by side: blocks with their instructions, edges out of
    /// divergent branches dashed, loops marked (Graphviz dot).
    Cfg(CfgArgs),
    /// The interference graph, each value filled with the colour of its register, coalesced
    /// values grouped, spilled values outlined (Graphviz dot).
    Interference(InterferenceArgs),
    /// Register demand per instruction and register file, with block starts, loops, the
    /// budget and the allocator's spills and reloads (SVG).
    Pressure(PressureArgs),
}

/// The function to draw.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// A `.kir` file (`-` reads standard input), or a shader (`.wgsl`, `.spv`, `.vert`,
    /// `.frag`): then the function the back end allocates (`kiln compile --ir interface`).
    pub file: PathBuf,
    #[command(flatten)]
    pub entry: EntryArgs,
}

/// The allocation drawn, as `kiln regalloc` makes it.
#[derive(Debug, Args)]
pub struct AllocArgs {
    /// The register allocator: `graph` (seed 002's graph colouring) or `ssa` (SSA-based assignment).
    #[arg(long, default_value = "ssa")]
    pub allocator: Allocator,
    /// Units per register file, e.g. `v=24,s=8` (default: whole files).
    #[arg(long)]
    pub budget: Option<String>,
}

#[derive(Debug, Args)]
pub struct CfgArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Write to this file: `.dot` or `.gv` as dot text; `.svg`, `.png`, `.pdf` rendered by
    /// Graphviz's `dot` (default: dot text on standard output).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Instructions shown per block; longer blocks show their first and last ones.
    #[arg(long, default_value_t = CfgOptions::default().max_insts)]
    pub max_insts: usize,
}

#[derive(Debug, Args)]
pub struct InterferenceArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub alloc: AllocArgs,
    /// Write to this file: `.dot` or `.gv` as dot text; `.svg`, `.png`, `.pdf` rendered by
    /// Graphviz's `dot` (default: dot text on standard output).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Refuse graphs of more values than this.
    #[arg(long, default_value_t = InterferenceOptions::default().max_nodes)]
    pub max_nodes: usize,
}

#[derive(Debug, Args)]
pub struct PressureArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub alloc: AllocArgs,
    /// Write the SVG to this file (default: standard output).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

/// `kiln draw …`.
pub fn run(command: DrawCommand) -> miette::Result<()> {
    // Shaders go through the front end, which wants a deep stack.
    pipeline::with_stack(move || draw_on_this_thread(command))
        .map_err(|e| miette::miette!("{e}"))?
}

fn draw_on_this_thread(command: DrawCommand) -> miette::Result<()> {
    match command {
        DrawCommand::Cfg(a) => {
            let format = dot_format(a.output.as_deref(), &a.input.file)?;
            let func = load(&a.input)?;
            let text = draw::cfg::dot(
                &func,
                CfgOptions {
                    max_insts: a.max_insts,
                },
            )
            .map_err(|e| miette::miette!("{}: {e}", a.input.file.display()))?;
            write_dot(&text, a.output.as_deref(), format)
        }
        DrawCommand::Interference(a) => {
            let format = dot_format(a.output.as_deref(), &a.input.file)?;
            let func = load(&a.input)?;
            let alloc = allocate(&func, &a.input, &a.alloc)?;
            let text = draw::interference::dot(
                &alloc,
                InterferenceOptions {
                    max_nodes: a.max_nodes,
                },
            )
            .map_err(|e| miette::miette!("{}: {e}", a.input.file.display()))?;
            write_dot(&text, a.output.as_deref(), format)
        }
        DrawCommand::Pressure(a) => {
            if let Some(out) = &a.output {
                crate::cli::check_output(out, &[&a.input.file])?;
                if out.extension().is_none_or(|e| e != "svg") {
                    return Err(miette::miette!(
                        "{}: `kiln draw pressure` writes SVG; name the output `….svg`",
                        out.display()
                    ));
                }
            }
            let func = load(&a.input)?;
            let alloc = allocate(&func, &a.input, &a.alloc)?;
            let p = draw::pressure::measure(&alloc)
                .map_err(|e| miette::miette!("{}: {e}", a.input.file.display()))?;
            let svg = draw::pressure::svg(&func.name, &p);
            match &a.output {
                Some(path) => write_file(path, svg.as_bytes()),
                None => {
                    print(&svg);
                    Ok(())
                }
            }
        }
    }
}

fn load(input: &InputArgs) -> miette::Result<Function> {
    draw::load(&input.file, &input.entry.entry_point())
}

fn allocate(func: &Function, input: &InputArgs, a: &AllocArgs) -> miette::Result<draw::Allocation> {
    let budget = draw::parse_budget(func, a.budget.as_deref())?;
    draw::allocate(func, a.allocator, budget)
        .map_err(|e| miette::miette!("{}: {e}", input.file.display()))
}

/// How dot text leaves: as it is, or rendered by `dot` in a format.
#[derive(Clone, Copy)]
enum DotFormat {
    Text,
    Rendered(&'static str),
}

/// The format `-o` asks for, refused before any work when it names the input.
fn dot_format(output: Option<&Path>, input: &Path) -> miette::Result<DotFormat> {
    let Some(out) = output else {
        return Ok(DotFormat::Text);
    };
    crate::cli::check_output(out, &[input])?;
    let ext = out
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "dot" | "gv" => Ok(DotFormat::Text),
        "svg" => Ok(DotFormat::Rendered("svg")),
        "png" => Ok(DotFormat::Rendered("png")),
        "pdf" => Ok(DotFormat::Rendered("pdf")),
        _ => Err(miette::miette!(
            "{}: name the output `.dot` (dot text) or `.svg`, `.png`, `.pdf` (rendered by Graphviz's `dot`)",
            out.display()
        )),
    }
}

fn write_dot(text: &str, output: Option<&Path>, format: DotFormat) -> miette::Result<()> {
    match (output, format) {
        (None, _) => {
            print(text);
            Ok(())
        }
        (Some(path), DotFormat::Text) => write_file(path, text.as_bytes()),
        (Some(path), DotFormat::Rendered(f)) => {
            let bytes = draw::render_dot(text, f)
                .map_err(|e| miette::miette!("{}: {e}", path.display()))?;
            write_file(path, &bytes)
        }
    }
}

/// The output, checked against the input before any work was done.
fn write_file(path: &Path, bytes: &[u8]) -> miette::Result<()> {
    crate::cli::write_output(path, &[], bytes)
}
