//! `kiln run`: a fragment shader drawn over a W×H image as a full-screen quad in the QPU
//! simulator, checked pixel by pixel against the reference interpreter and written as a PNG;
//! a vertex shader run on given attributes, its outputs printed per vertex.

use clap::Args;
use kiln_front::interface::{Interface, SlotKind};
use kiln_front::{Parsed, Source, lower_entry_point, parse};
use kiln_interp::{Env, Texture};
use kiln_regalloc::Allocator;
use kiln_vc4::compile::{CompileError, CompileOptions, Compiled, compile};
use kiln_vc4::emit::OutputMode;
use kiln_vc4::harness;
use kiln_vc4::render::{self, InputValue, RenderInputs};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Stack for lowering deep shaders.
const STACK: usize = 256 << 20;

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
    /// `BINDING=FILE.png`: the texture of a sampler, by binding number or name.
    #[arg(long = "texture", value_name = "BINDING=FILE")]
    pub texture: Vec<String>,
    /// Entry point name.
    #[arg(long)]
    pub entry: Option<String>,
    /// Vertices to run (vertex shaders, 1–16).
    #[arg(long, default_value_t = 1)]
    pub vertices: usize,
    /// The register allocator.
    #[arg(long, default_value = "graph")]
    pub allocator: Allocator,
    /// Where to write the image (fragment shaders).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

/// `kiln run`.
pub fn run_cmd(args: RunArgs) -> miette::Result<()> {
    let text = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || run_on_this_thread(&args))
        .map_err(|e| miette::miette!("cannot start the compiler thread: {e}"))?
        .join()
        .unwrap_or_else(|_| Err("internal error: the compiler panicked".into()))
        .map_err(|e| miette::miette!("{e}"))?;
    print!("{text}");
    Ok(())
}

/// The scalar type of a settable value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scalar {
    Float,
    Sint,
    Uint,
    Bool,
}

/// A settable uniform member or input: its name, scalar type and the uniform word or input
/// slot of each component.
#[derive(Clone, Debug)]
struct Leaf {
    name: String,
    scalar: Scalar,
    /// Uniform words (uniforms) or locations × 4 + component (inputs).
    places: Vec<u32>,
}

impl Scalar {
    fn name(self) -> &'static str {
        match self {
            Scalar::Float => "float",
            Scalar::Sint => "signed integer",
            Scalar::Uint => "unsigned integer",
            Scalar::Bool => "boolean",
        }
    }
}

fn scalar_of(s: naga::Scalar) -> Option<Scalar> {
    Some(match s.kind {
        naga::ScalarKind::Float if s.width == 4 => Scalar::Float,
        naga::ScalarKind::Sint if s.width == 4 => Scalar::Sint,
        naga::ScalarKind::Uint if s.width == 4 => Scalar::Uint,
        naga::ScalarKind::Bool => Scalar::Bool,
        _ => return None,
    })
}

/// The leaves of a value of type `ty` at byte `offset` of a uniform block.
fn uniform_leaves(
    m: &naga::Module,
    ty: naga::Handle<naga::Type>,
    name: &str,
    offset: u32,
    base: u32,
    out: &mut Vec<Leaf>,
) {
    let word = |o: u32| base + o / 4;
    match &m.types[ty].inner {
        naga::TypeInner::Scalar(s) => {
            if let Some(scalar) = scalar_of(*s) {
                out.push(Leaf {
                    name: name.into(),
                    scalar,
                    places: vec![word(offset)],
                });
            }
        }
        naga::TypeInner::Vector { size, scalar } => {
            if let Some(sc) = scalar_of(*scalar) {
                out.push(Leaf {
                    name: name.into(),
                    scalar: sc,
                    places: (0..*size as u32).map(|k| word(offset + 4 * k)).collect(),
                });
            }
        }
        naga::TypeInner::Matrix {
            columns,
            rows,
            scalar,
        } => {
            if let Some(sc) = scalar_of(*scalar) {
                let rows = *rows as u32;
                let stride = if rows == 2 { 8 } else { 16 };
                let places = (0..*columns as u32)
                    .flat_map(|c| (0..rows).map(move |r| offset + c * stride + 4 * r))
                    .map(word)
                    .collect();
                out.push(Leaf {
                    name: name.into(),
                    scalar: sc,
                    places,
                });
            }
        }
        naga::TypeInner::Array {
            base: elem,
            size: naga::ArraySize::Constant(n),
            stride,
        } => {
            for i in 0..n.get().min(256) {
                uniform_leaves(
                    m,
                    *elem,
                    &format!("{name}[{i}]"),
                    offset + i * stride,
                    base,
                    out,
                );
            }
        }
        naga::TypeInner::Struct { members, .. } => {
            for mem in members {
                let Some(mname) = &mem.name else { continue };
                let full = if name.is_empty() {
                    mname.clone()
                } else {
                    format!("{name}.{mname}")
                };
                uniform_leaves(m, mem.ty, &full, offset + mem.offset, base, out);
            }
        }
        _ => {}
    }
}

/// Every member of every uniform block, by name (members of a block's top-level struct by
/// their own name and as `BLOCK.member`).
fn uniform_members(parsed: &Parsed, iface: &Interface) -> Vec<Leaf> {
    let m = &parsed.module;
    let globals = m.global_variables.iter().filter(|(_, g)| {
        matches!(
            g.space,
            naga::AddressSpace::Uniform | naga::AddressSpace::Immediate
        )
    });
    let mut out = Vec::new();
    let mut prefixed = Vec::new();
    for ((_, g), block) in globals.zip(&iface.uniforms) {
        let gname = g.name.clone().unwrap_or_default();
        if matches!(m.types[g.ty].inner, naga::TypeInner::Struct { .. }) {
            let mut leaves = Vec::new();
            uniform_leaves(m, g.ty, "", 0, block.base, &mut leaves);
            if !gname.is_empty() {
                prefixed.extend(leaves.iter().map(|l| Leaf {
                    name: format!("{gname}.{}", l.name),
                    ..l.clone()
                }));
            }
            out.extend(leaves);
        } else {
            uniform_leaves(m, g.ty, &gname, 0, block.base, &mut out);
        }
    }
    // Short names first (they are what the report prints), then `BLOCK.member`.
    out.extend(prefixed);
    out
}

/// The entry point's location inputs: name, scalar type, `4 · location + component` places.
fn location_inputs(parsed: &Parsed, entry: &str, stage: naga::ShaderStage) -> Vec<(Leaf, u32)> {
    let m = &parsed.module;
    let Some(ep) = m
        .entry_points
        .iter()
        .find(|e| e.name == entry && e.stage == stage)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut add = |name: &str, ty: naga::Handle<naga::Type>, binding: &Option<naga::Binding>| {
        let Some(naga::Binding::Location { location, .. }) = binding else {
            return;
        };
        let (n, s) = match &m.types[ty].inner {
            naga::TypeInner::Scalar(s) => (1, *s),
            naga::TypeInner::Vector { size, scalar } => (*size as u32, *scalar),
            _ => return,
        };
        let Some(scalar) = scalar_of(s) else { return };
        out.push((
            Leaf {
                name: name.into(),
                scalar,
                places: (0..n).map(|c| 4 * location + c).collect(),
            },
            *location,
        ));
    };
    for arg in &ep.function.arguments {
        if let naga::TypeInner::Struct { members, .. } = &m.types[arg.ty].inner {
            for mem in members {
                add(mem.name.as_deref().unwrap_or(""), mem.ty, &mem.binding);
            }
        } else {
            add(arg.name.as_deref().unwrap_or(""), arg.ty, &arg.binding);
        }
    }
    out
}

/// Parses `VALUE[,VALUE…]` as `n` components of `scalar`, as uniform words.
fn parse_values(text: &str, scalar: Scalar, n: usize) -> Result<Vec<u32>, String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.len() != n {
        return Err(format!("expected {n} value(s), got {}", parts.len()));
    }
    parts
        .iter()
        .map(|p| {
            let bad = || format!("`{p}` is not a {} value", scalar.name());
            Ok(match scalar {
                Scalar::Float => p.parse::<f32>().map_err(|_| bad())?.to_bits(),
                Scalar::Sint => p.parse::<i32>().map_err(|_| bad())? as u32,
                Scalar::Uint => p.parse::<u32>().map_err(|_| bad())?,
                Scalar::Bool => match *p {
                    "true" | "1" => 1,
                    "false" | "0" => 0,
                    _ => return Err(bad()),
                },
            })
        })
        .collect()
}

fn show(scalar: Scalar, words: &[u32]) -> String {
    let one = |w: u32| match scalar {
        Scalar::Float => format!("{}", f32::from_bits(w)),
        Scalar::Sint => format!("{}", w as i32),
        Scalar::Uint => format!("{w}"),
        Scalar::Bool => format!("{}", w != 0),
    };
    let v: Vec<String> = words.iter().map(|&w| one(w)).collect();
    v.join(", ")
}

/// Reads a PNG file as RGBA8.
pub fn read_png(path: &Path) -> Result<Texture, String> {
    let name = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let mut dec = png::Decoder::new(std::io::BufReader::new(file));
    dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = dec
        .read_info()
        .map_err(|e| format!("{name}: not a readable PNG: {e}"))?;
    let (w, h) = (reader.info().width, reader.info().height);
    if w == 0 || h == 0 || w > render::MAX_TEXTURE_SIDE || h > render::MAX_TEXTURE_SIDE {
        return Err(format!(
            "{name}: {w}x{h}: texture sides must be 1..={}",
            render::MAX_TEXTURE_SIDE
        ));
    }
    let mut buf = vec![0; reader.output_buffer_size()];
    let frame = reader
        .next_frame(&mut buf)
        .map_err(|e| format!("{name}: not a readable PNG: {e}"))?;
    let bytes = &buf[..frame.buffer_size()];
    let stride = frame.line_size;
    let channels = match frame.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => return Err(format!("{name}: indexed colour was not expanded")),
    };
    let mut texels = Vec::with_capacity((w * h) as usize);
    for y in 0..h as usize {
        for x in 0..w as usize {
            let p = &bytes[y * stride + x * channels..][..channels];
            texels.push(match channels {
                1 => [p[0], p[0], p[0], 255],
                2 => [p[0], p[0], p[0], p[1]],
                3 => [p[0], p[1], p[2], 255],
                _ => [p[0], p[1], p[2], p[3]],
            });
        }
    }
    Ok(Texture {
        width: w,
        height: h,
        texels,
    })
}

/// Writes row-major RGBA8 pixels as a PNG.
pub fn write_png(path: &Path, w: u32, h: u32, pixels: &[[u8; 4]]) -> Result<(), String> {
    let name = path.display();
    let file = std::fs::File::create(path).map_err(|e| format!("{name}: {e}"))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(|e| format!("{name}: {e}"))?;
    let data: Vec<u8> = pixels.iter().flatten().copied().collect();
    writer
        .write_image_data(&data)
        .map_err(|e| format!("{name}: {e}"))?;
    writer.finish().map_err(|e| format!("{name}: {e}"))
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("--size `{s}`: expected WxH, e.g. 64x64");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let (w, h) = (
        w.trim().parse::<u32>().map_err(|_| bad())?,
        h.trim().parse::<u32>().map_err(|_| bad())?,
    );
    let max = render::MAX_IMAGE_SIDE;
    if w == 0 || h == 0 || w > max || h > max {
        return Err(format!("--size {w}x{h}: each side must be 1..={max}"));
    }
    Ok((w, h))
}

/// A shader lowered, optimised and compiled.
pub struct Prepared {
    pub parsed: Parsed,
    pub iface: Interface,
    /// The optimised generic function (before selection).
    pub generic: kiln_ir::Function,
    pub compiled: Compiled,
}

/// Parses, lowers and compiles `path`: fragment unless the file is a `.vert` or the module has
/// only vertex entry points.
pub fn prepare(path: &Path, entry: Option<&str>, allocator: Allocator) -> Result<Prepared, String> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| format!("{name}: {e}"))?;
    let source = Source::from_path(path, bytes).map_err(|e| format!("{name}: {e}"))?;
    let parsed = parse(&source).map_err(|e| format!("{name}: {e}"))?;
    let eps = kiln_front::entry_points(&parsed.module);
    let stage = if entry.is_some() {
        None
    } else if name.ends_with(".vert") {
        Some(naga::ShaderStage::Vertex)
    } else if eps.iter().any(|(_, s)| *s == naga::ShaderStage::Fragment) {
        Some(naga::ShaderStage::Fragment)
    } else {
        Some(naga::ShaderStage::Vertex)
    };
    let lowered = lower_entry_point(&parsed, stage, entry).map_err(|e| format!("{name}: {e}"))?;
    let mut cx = kiln_analysis::Context::new(lowered.function);
    kiln_opt::optimize(&mut cx).map_err(|e| format!("{name}: opt: {e}"))?;
    let generic = cx.into_func();
    let info = crate::cli::compile::shader_info(&lowered.interface);
    let opts = CompileOptions {
        allocator,
        output: OutputMode::Tlb,
        check: true,
        threads: Default::default(),
    };
    let compiled = compile(&generic, &info, &opts).map_err(|e| match e {
        CompileError::Unsupported(m) if m.starts_with("unsupported") => format!("{name}: {m}"),
        CompileError::Unsupported(m) => format!("{name}: unsupported: {m}"),
        CompileError::Failed(m) => format!("{name}: the vc4 back end failed: {m}"),
    })?;
    Ok(Prepared {
        parsed,
        iface: lowered.interface,
        generic,
        compiled,
    })
}

/// `--set` resolved: uniform words and values of location inputs, and the report of every
/// uniform member's value.
struct Settings {
    uniforms: BTreeMap<u32, u32>,
    /// Input slot (`4 · location + component`) → value (per vertex for `NAME@K`).
    inputs: BTreeMap<(u32, Option<usize>), u32>,
    report: String,
}

fn settings(p: &Prepared, sets: &[String], vertex: bool) -> Result<Settings, String> {
    let members = uniform_members(&p.parsed, &p.iface);
    let stage = if vertex {
        naga::ShaderStage::Vertex
    } else {
        naga::ShaderStage::Fragment
    };
    let inputs = location_inputs(&p.parsed, &p.iface.entry_point, stage);
    let mut s = Settings {
        uniforms: BTreeMap::new(),
        inputs: BTreeMap::new(),
        report: String::new(),
    };
    for item in sets {
        let (lhs, value) = item
            .split_once('=')
            .ok_or_else(|| format!("--set `{item}`: expected NAME=VALUE"))?;
        let lhs = lhs.trim();
        let (name, vert) = match lhs.rsplit_once('@') {
            Some((n, k)) if vertex && !n.is_empty() => {
                let k: usize = k
                    .parse()
                    .map_err(|_| format!("--set `{item}`: `{k}` is not a vertex number"))?;
                (n, Some(k))
            }
            _ => (lhs, None),
        };
        let named: Vec<&Leaf> = members.iter().filter(|l| l.name == name).collect();
        if named.len() > 1 {
            return Err(format!(
                "--set {name}: several uniform blocks have a member of that name; write BLOCK.{name}"
            ));
        }
        if let Some(leaf) = named.first() {
            let words = parse_values(value, leaf.scalar, leaf.places.len())
                .map_err(|e| format!("--set {name}: {e}"))?;
            for (&w, v) in leaf.places.iter().zip(words) {
                s.uniforms.insert(w, v);
            }
            continue;
        }
        let input = inputs.iter().find(|(l, loc)| {
            l.name == name
                || name.strip_prefix('@').and_then(|n| n.parse::<u32>().ok()) == Some(*loc)
        });
        if let Some((leaf, _)) = input {
            let words = parse_values(value, leaf.scalar, leaf.places.len())
                .map_err(|e| format!("--set {name}: {e}"))?;
            for (&slot, v) in leaf.places.iter().zip(words) {
                s.inputs.insert((slot, vert), v);
            }
            continue;
        }
        let mut known: Vec<&str> = members.iter().map(|l| l.name.as_str()).collect();
        known.extend(inputs.iter().map(|(l, _)| l.name.as_str()));
        return Err(format!(
            "--set: no uniform member or input named `{name}` (known: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    // Every member the shader's blocks hold, with the value used.
    let mut seen = std::collections::BTreeSet::new();
    for leaf in &members {
        if !seen.insert(leaf.places.clone()) {
            continue;
        }
        let words: Vec<u32> = leaf
            .places
            .iter()
            .map(|w| s.uniforms.get(w).copied().unwrap_or(0))
            .collect();
        // A name several blocks use is printed with its block's name.
        let shared = members.iter().filter(|l| l.name == leaf.name).count() > 1;
        let name = members
            .iter()
            .find(|l| {
                shared && l.places == leaf.places && l.name.ends_with(&format!(".{}", leaf.name))
            })
            .map_or(&leaf.name, |l| &l.name);
        let _ = writeln!(s.report, "uniform {} = {}", name, show(leaf.scalar, &words));
    }
    Ok(s)
}

/// The slot of input `4 · location + component` in the front end's interface.
fn slot_of_location(iface: &Interface, place: u32) -> Option<u32> {
    iface.inputs.iter().find_map(|s| match s.kind {
        SlotKind::Location {
            location,
            component,
        } if 4 * location + component == place => Some(s.slot),
        _ => None,
    })
}

fn run_on_this_thread(args: &RunArgs) -> Result<String, String> {
    let p = prepare(&args.shader, args.entry.as_deref(), args.allocator)?;
    if p.iface.stage == "vertex" {
        return run_vertex(&p, args);
    }
    let (w, h) = parse_size(&args.size)?;
    let out_path = args
        .output
        .as_ref()
        .ok_or("kiln run: a fragment shader needs -o OUT.png")?;
    let (r, mut text) = fragment_inputs(&p, w, h, &args.set, &args.texture)?;
    let out = render::render(&p.compiled, &p.generic, &r)?;
    write_png(out_path, w, h, &out.simulated)?;
    let _ = writeln!(
        text,
        "{}: {w}x{h}, {} batches of 16 pixels, {} QPU instructions ({} per batch)",
        out_path.display(),
        w.div_ceil(8) * h.div_ceil(2),
        out.instructions,
        p.compiled.stats.instructions
    );
    let _ = write!(
        text,
        "interpreter: {} of {} pixels differ by more than 1/255 (largest difference {}/255)",
        out.differing,
        w * h,
        out.max_difference
    );
    if let Some((x, y)) = out.first_difference {
        let i = (y * w + x) as usize;
        let _ = write!(
            text,
            "; first at ({x}, {y}): simulator {:?}, interpreter {:?}",
            out.simulated[i], out.reference[i]
        );
    }
    text.push('\n');
    Ok(text)
}

/// The inputs of a `w`×`h` render of fragment shader `p`: `--set` items (uniform members and
/// inputs) and `--texture` items (`BINDING=FILE.png`); also the report of the values used.
pub fn fragment_inputs(
    p: &Prepared,
    w: u32,
    h: u32,
    sets: &[String],
    textures: &[String],
) -> Result<(RenderInputs, String), String> {
    let s = settings(p, sets, false)?;
    let mut text = s.report.clone();
    let mut r = RenderInputs {
        width: w,
        height: h,
        uniforms: s.uniforms,
        ..Default::default()
    };
    // Inputs: a vec2 at location 0 is the texture coordinate unless set; others are 0 unless set.
    let ins = location_inputs(&p.parsed, &p.iface.entry_point, naga::ShaderStage::Fragment);
    for (leaf, loc) in &ins {
        let uv = *loc == 0 && leaf.places.len() == 2 && leaf.scalar == Scalar::Float;
        for (k, &place) in leaf.places.iter().enumerate() {
            let Some(slot) = slot_of_location(&p.iface, place) else {
                continue;
            };
            let v = match s.inputs.get(&(place, None)) {
                Some(&v) => InputValue::Constant(v),
                None if uv => InputValue::TexCoord(k as u32),
                None => InputValue::Constant(0),
            };
            r.inputs.insert(slot, v);
        }
        let how = if uv
            && !leaf
                .places
                .iter()
                .any(|pl| s.inputs.contains_key(&(*pl, None)))
        {
            "the pixel's texture coordinate".to_string()
        } else {
            let words: Vec<u32> = leaf
                .places
                .iter()
                .map(|pl| s.inputs.get(&(*pl, None)).copied().unwrap_or(0))
                .collect();
            show(leaf.scalar, &words)
        };
        let _ = writeln!(text, "input {} (location {loc}) = {how}", leaf.name);
    }
    // Textures.
    // By image: units that sample (or query the size of) one image share its texture.
    let mut files: BTreeMap<String, PathBuf> = BTreeMap::new();
    for item in textures {
        let (key, file) = item
            .split_once('=')
            .ok_or_else(|| format!("--texture `{item}`: expected BINDING=FILE.png"))?;
        let key = key.trim();
        let image = p
            .iface
            .textures
            .iter()
            .find(|t| {
                t.image == key
                    || t.sampler == key
                    || key
                        .parse::<u32>()
                        .ok()
                        .is_some_and(|b| image_binding(&p.parsed, &t.image) == Some(b))
            })
            .map(|t| t.image.clone())
            .ok_or_else(|| {
                let mut known: Vec<String> = p
                    .iface
                    .textures
                    .iter()
                    .map(|t| match image_binding(&p.parsed, &t.image) {
                        Some(b) => format!("{b} ({})", t.image),
                        None => t.image.clone(),
                    })
                    .collect();
                known.dedup();
                format!(
                    "--texture {key}: the shader samples no such texture (its textures: {})",
                    if known.is_empty() {
                        "none".into()
                    } else {
                        known.join(", ")
                    }
                )
            })?;
        files.insert(image, PathBuf::from(file));
    }
    let mut images: BTreeMap<String, Texture> = BTreeMap::new();
    for t in &p.iface.textures {
        if !images.contains_key(&t.image) {
            let tex = match files.get(&t.image) {
                Some(f) => {
                    let tex = read_png(f)?;
                    let _ = writeln!(
                        text,
                        "texture {} = {} ({}x{})",
                        t.image,
                        f.display(),
                        tex.width,
                        tex.height
                    );
                    tex
                }
                None => {
                    let _ = writeln!(text, "texture {} = built-in checkerboard (64x64)", t.image);
                    render::checkerboard(64, 64, 8)
                }
            };
            images.insert(t.image.clone(), tex);
        }
        let tex = &images[&t.image];
        if let Some((ws, hs)) = t.size_words {
            r.uniforms.insert(ws, tex.width);
            r.uniforms.insert(hs, tex.height);
        }
        r.textures.insert(t.unit, tex.clone());
    }
    Ok((r, text))
}

/// The binding number of the image global named `image`.
fn image_binding(parsed: &Parsed, image: &str) -> Option<u32> {
    parsed
        .module
        .global_variables
        .iter()
        .find(|(_, g)| g.name.as_deref() == Some(image))
        .and_then(|(_, g)| g.binding.as_ref().map(|b| b.binding))
}

fn run_vertex(p: &Prepared, args: &RunArgs) -> Result<String, String> {
    if let Some(o) = &args.output {
        return Err(format!(
            "{}: a vertex shader writes no image; leave out -o",
            o.display()
        ));
    }
    if !args.texture.is_empty() {
        return Err("--texture: vertex shaders cannot sample textures on vc4".into());
    }
    let n = args.vertices;
    if !(1..=16).contains(&n) {
        return Err(format!("--vertices {n}: 1 to 16"));
    }
    let s = settings(p, &args.set, true)?;
    let mut text = s.report.clone();
    let ins = location_inputs(&p.parsed, &p.iface.entry_point, naga::ShaderStage::Vertex);
    // The harness's vertex inputs (vertex k is lane k, the viewport uniforms); every other
    // uniform word 0 unless set.
    let mut env = harness::environment(&p.compiled.ssa, &p.compiled.info);
    let generic = Env::from_slots(&p.generic, 16, |_| 0);
    for (k, v) in generic.uniforms {
        env.uniforms.entry(k).or_insert(v);
    }
    for (k, v) in env.uniforms.iter_mut() {
        if *k < kiln_vc4::vertex::VIEWPORT_X_SCALE {
            *v = s.uniforms.get(k).copied().unwrap_or(0);
        }
    }
    env.step_limit = harness::STEP_LIMIT;
    for (leaf, loc) in &ins {
        for &place in &leaf.places {
            let Some(slot) = slot_of_location(&p.iface, place) else {
                continue;
            };
            let vals: Vec<u32> = (0..16)
                .map(|k| {
                    s.inputs
                        .get(&(place, Some(k)))
                        .or_else(|| s.inputs.get(&(place, None)))
                        .copied()
                        .unwrap_or(0)
                })
                .collect();
            env.inputs.insert(slot, vals);
        }
        for k in 0..n {
            let words: Vec<u32> = leaf
                .places
                .iter()
                .map(|&pl| {
                    slot_of_location(&p.iface, pl)
                        .and_then(|sl| env.inputs.get(&sl))
                        .map_or(0, |v| v[k])
                })
                .collect();
            let _ = writeln!(
                text,
                "vertex {k}: input {} (location {loc}) = {}",
                leaf.name,
                show(leaf.scalar, &words)
            );
        }
    }
    // The shader's own outputs (the interpreter on the optimised generic function).
    let want = kiln_interp::run_ssa(&p.generic, &env).map_err(|e| format!("interpreter: {e}"))?;
    let c = &p.compiled;
    let got = harness::simulate(&c.emitted, OutputMode::Vpm, true, &env)?;
    let selected = kiln_interp::run_ssa(&c.ssa, &env).map_err(|e| format!("interpreter: {e}"))?;
    let agree = harness::compare(&got, &selected, &c.info);
    for k in 0..n {
        let _ = writeln!(text, "vertex {k}:");
        for out in &p.iface.outputs {
            let v = want
                .slots
                .get(&out.slot)
                .and_then(|l| l.get(k).cloned().flatten())
                .and_then(|u| u.first().copied().flatten());
            let what = match &out.kind {
                SlotKind::Location {
                    location,
                    component,
                } => format!(
                    "location {location}.{}",
                    "xyzw".as_bytes()[*component as usize & 3] as char
                ),
                SlotKind::BuiltIn { name, component } => {
                    format!(
                        "{name}.{}",
                        "xyzw".as_bytes()[*component as usize & 3] as char
                    )
                }
            };
            let v = v.map_or("undefined".to_string(), |v| {
                format!("{}", f32::from_bits(v))
            });
            let _ = writeln!(text, "  {what} = {v}");
        }
        if let harness::SimOutput::Vpm(rows) = &got {
            let row: Vec<String> = rows
                .iter()
                .map(|(_, vals)| format!("{:#010x}", vals[k]))
                .collect();
            let _ = writeln!(
                text,
                "  VPM (Mesa's layout: Xs|Ys, Zs, 1/Wc, varyings): {}",
                row.join(" ")
            );
        }
    }
    match agree {
        Ok(()) => text.push_str("simulator: the VPM rows agree with the interpreter\n"),
        Err(m) => return Err(format!("{text}simulator: mismatch: {m}")),
    }
    Ok(text)
}
