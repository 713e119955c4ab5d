//! `kiln run`: a fragment shader drawn to a PNG in the QPU simulator, or a vertex shader run on
//! given attributes, each checked against the interpreter (`crate::run`).

use crate::cli::EntryArgs;
use crate::cli::print;
use crate::pipeline::{self, Options};
use clap::Args;
use kiln_front::interface::Stage;
use kiln_regalloc::Allocator;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A `.frag`, `.vert`, `.wgsl` or `.spv` shader.
    pub shader: PathBuf,
    /// Image size, `WxH` (fragment shaders).
    #[arg(long, default_value = "64x64")]
    pub size: String,
    /// `NAME=VALUE[,VALUE…]`: a uniform-block member or an input (by name, or `@LOCATION`);
    /// vertex attributes of one vertex as `NAME@K=…`.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// A fragment shader discards where one of this many user clip distances (inputs
    /// `clip_distance`, set like the others) is negative.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub clip_distances: u32,
    /// `BINDING=FILE.png`: the texture of a sampler, by binding number or name; a cube map
    /// takes six files, `BINDING=PX.png,NX.png,PY.png,NY.png,PZ.png,NZ.png`.
    #[arg(long = "texture", value_name = "BINDING=FILE")]
    pub texture: Vec<String>,
    #[command(flatten)]
    pub entry: EntryArgs,
    /// Vertices to run (vertex shaders, 1–16).
    #[arg(long, default_value_t = 1)]
    pub vertices: usize,
    /// The register allocator: `graph` (seed 002's graph colouring) or `ssa` (SSA-based assignment).
    #[arg(long, default_value = "graph")]
    pub allocator: Allocator,
    /// Draw the quad as a back face (`gl_FrontFacing` false).
    #[arg(long)]
    pub back_face: bool,
    /// Where to write the image (fragment shaders; `-` for standard output).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

/// `kiln run`.
pub fn run(args: RunArgs) -> miette::Result<()> {
    // The image on standard output: the report goes to standard error.
    let to_stdout = args.output.as_ref().is_some_and(|o| o.as_os_str() == "-");
    let text = pipeline::with_stack(move || run_on_this_thread(&args))
        .map_err(|e| miette::miette!("{e}"))??;
    if to_stdout {
        crate::cli::eprint(&text);
    } else {
        print(&text);
    }
    Ok(())
}

fn run_on_this_thread(args: &RunArgs) -> miette::Result<String> {
    // The shader and the textures are inputs no output may replace.
    let textures: Vec<PathBuf> = args
        .texture
        .iter()
        .filter_map(|t| t.split_once('=').map(|(_, f)| crate::run::texture_files(f)))
        .flatten()
        .collect();
    let mut inputs: Vec<&std::path::Path> = vec![&args.shader];
    inputs.extend(textures.iter().map(PathBuf::as_path));
    if let Some(o) = &args.output {
        crate::cli::check_output(o, &inputs)?;
    }
    let shader = pipeline::read_shader(&args.shader)?;
    let mut entry = args.entry.entry_point();
    if entry.stage.is_none() && entry.name.is_none() {
        // A fragment shader unless the file is a `.vert` or has only vertex entry points.
        let fragment = shader
            .entry_points()
            .iter()
            .any(|(_, s)| *s == Stage::Fragment);
        entry.stage = Some(if shader.name().ends_with(".vert") || !fragment {
            Stage::Vertex
        } else {
            Stage::Fragment
        });
    }
    let options = Options {
        allocator: args.allocator,
        clip_distances: args.clip_distances,
        ..Options::default()
    };
    let c = pipeline::compile(&shader, &entry, &options)?;
    let fail = |e: String| miette::miette!("{e}");
    if c.interface.stage == Stage::Vertex {
        if let Some(o) = &args.output {
            return Err(fail(format!(
                "{}: a vertex shader writes no image; leave out -o",
                o.display()
            )));
        }
        if !args.texture.is_empty() {
            return Err(fail(
                "--texture: vertex shaders cannot sample textures on vc4".into(),
            ));
        }
        return crate::run::vertex(&c, args.vertices, &args.set).map_err(fail);
    }
    let (w, h) = crate::run::parse_size(&args.size).map_err(fail)?;
    let out_path = args
        .output
        .as_ref()
        .ok_or_else(|| fail("kiln run: a fragment shader needs -o OUT.png".into()))?;
    let (out, mut text) =
        crate::run::draw_face(&c, w, h, &args.set, &args.texture, args.back_face).map_err(fail)?;
    let png = crate::run::png_bytes(w, h, &out.simulated).map_err(fail)?;
    crate::cli::write_output(out_path, &inputs, &png)?;
    text.push_str(&crate::run::render_report(&out, &c, out_path));
    if out.mismatched > 0 {
        // The code generator is wrong: say so with the figures, and fail.
        return Err(fail(format!(
            "{text}the simulator differs from the selected program on {} pixels",
            out.mismatched
        )));
    }
    Ok(text)
}
