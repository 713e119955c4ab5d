//! `kiln run`'s set-up and reports: a fragment shader drawn over a W×H image as a full-screen
//! quad (uniforms and inputs by name, textures from PNG files), a vertex shader run on given
//! attributes; both checked against the interpreter. The renderer itself is
//! `kiln_vc4::render`.

use crate::pipeline::Compilation;
use kiln_front::interface::{Scalar, Variable};
use kiln_interp::{Env, Texture};
use kiln_vc4::emit::OutputMode;
use kiln_vc4::harness;
use kiln_vc4::render::{self, InputValue, RenderInputs, Rendered};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn scalar_name(s: Scalar) -> &'static str {
    match s {
        Scalar::Float => "float",
        Scalar::Sint => "signed integer",
        Scalar::Uint => "unsigned integer",
        Scalar::Bool => "boolean",
    }
}

/// Parses `VALUE[,VALUE…]` as `n` components of `scalar`, as 32-bit words.
fn parse_values(text: &str, scalar: Scalar, n: usize) -> Result<Vec<u32>, String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.len() != n {
        return Err(format!("expected {n} value(s), got {}", parts.len()));
    }
    parts
        .iter()
        .map(|p| {
            let bad = || format!("`{p}` is not a {} value", scalar_name(scalar));
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

/// Every uniform member of the shader's blocks by name: its short name first (what the report
/// prints), then, for struct blocks, `BLOCK.member`.
fn uniform_members(c: &Compilation) -> Vec<Variable> {
    let mut out = Vec::new();
    let mut prefixed = Vec::new();
    for block in &c.interface.uniforms {
        out.extend(block.members.iter().cloned());
        if block.is_struct && !block.name.is_empty() {
            prefixed.extend(block.members.iter().map(|m| Variable {
                name: format!("{}.{}", block.name, m.name),
                ..m.clone()
            }));
        }
    }
    out.extend(prefixed);
    out
}

/// `--set` resolved: uniform words and values of location inputs, and the report of every
/// uniform member's value.
struct Settings {
    uniforms: BTreeMap<u32, u32>,
    /// Input slot (`4 · location + component`) → value (per vertex for `NAME@K`).
    inputs: BTreeMap<(u32, Option<usize>), u32>,
    report: String,
}

fn settings(c: &Compilation, sets: &[String], vertex: bool) -> Result<Settings, String> {
    let members = uniform_members(c);
    let inputs = &c.interface.named_inputs;
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
        let named: Vec<&Variable> = members.iter().filter(|l| l.name == name).collect();
        if named.len() > 1 {
            return Err(format!(
                "--set {name}: several uniform blocks have a member of that name; write BLOCK.{name}"
            ));
        }
        if let Some(leaf) = named.first() {
            let words = parse_values(value, leaf.scalar, leaf.slots.len())
                .map_err(|e| format!("--set {name}: {e}"))?;
            for (&w, v) in leaf.slots.iter().zip(words) {
                s.uniforms.insert(w, v);
            }
            continue;
        }
        let input = inputs.iter().find(|l| {
            l.name == name
                || name.strip_prefix('@').and_then(|n| n.parse::<u32>().ok()) == l.location
        });
        if let Some(leaf) = input {
            let words = parse_values(value, leaf.scalar, leaf.slots.len())
                .map_err(|e| format!("--set {name}: {e}"))?;
            for (&slot, v) in leaf.slots.iter().zip(words) {
                s.inputs.insert((slot, vert), v);
            }
            continue;
        }
        let mut known: Vec<&str> = members.iter().map(|l| l.name.as_str()).collect();
        known.extend(inputs.iter().map(|l| l.name.as_str()));
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
    let mut seen = BTreeSet::new();
    for leaf in &members {
        if !seen.insert(leaf.slots.clone()) {
            continue;
        }
        let words: Vec<u32> = leaf
            .slots
            .iter()
            .map(|w| s.uniforms.get(w).copied().unwrap_or(0))
            .collect();
        // A name several blocks use is printed with its block's name.
        let shared = members.iter().filter(|l| l.name == leaf.name).count() > 1;
        let name = members
            .iter()
            .find(|l| {
                shared && l.slots == leaf.slots && l.name.ends_with(&format!(".{}", leaf.name))
            })
            .map_or(&leaf.name, |l| &l.name);
        let _ = writeln!(s.report, "uniform {} = {}", name, show(leaf.scalar, &words));
    }
    Ok(s)
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
        faces: 1,
        texels,
    })
}

/// Writes row-major RGBA8 pixels as a PNG.
pub fn write_png(path: &Path, w: u32, h: u32, pixels: &[[u8; 4]]) -> Result<(), String> {
    let bytes = png_bytes(w, h, pixels)?;
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Row-major RGBA8 pixels encoded as a PNG.
pub fn png_bytes(w: u32, h: u32, pixels: &[[u8; 4]]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(|e| format!("PNG: {e}"))?;
    let data: Vec<u8> = pixels.iter().flatten().copied().collect();
    writer
        .write_image_data(&data)
        .map_err(|e| format!("PNG: {e}"))?;
    writer.finish().map_err(|e| format!("PNG: {e}"))?;
    Ok(out)
}

/// Reads `WxH`.
pub fn parse_size(s: &str) -> Result<(u32, u32), String> {
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

/// The inputs of a `w`×`h` render of fragment shader `c`: `--set` items (uniform members and
/// inputs) and `--texture` items (`BINDING=FILE.png`); also the report of the values used.
pub fn fragment_inputs(
    c: &Compilation,
    w: u32,
    h: u32,
    sets: &[String],
    textures: &[String],
) -> Result<(RenderInputs, String), String> {
    let s = settings(c, sets, false)?;
    let mut text = s.report.clone();
    let mut r = RenderInputs {
        width: w,
        height: h,
        uniforms: s.uniforms,
        ..Default::default()
    };
    let has_slot = |slot: u32| c.interface.inputs.iter().any(|s| s.slot == slot);
    // Inputs: a vec2 at location 0 is the texture coordinate unless set; others are 0 unless set.
    for leaf in &c.interface.named_inputs {
        let loc = leaf.location.unwrap_or(0);
        let uv = loc == 0 && leaf.slots.len() == 2 && leaf.scalar == Scalar::Float;
        for (k, &slot) in leaf.slots.iter().enumerate() {
            if !has_slot(slot) {
                continue;
            }
            let v = match s.inputs.get(&(slot, None)) {
                Some(&v) => InputValue::Constant(v),
                None if uv => InputValue::TexCoord(k as u32),
                None => InputValue::Constant(0),
            };
            r.inputs.insert(slot, v);
        }
        let set = leaf
            .slots
            .iter()
            .any(|pl| s.inputs.contains_key(&(*pl, None)));
        let how = if uv && !set {
            "the pixel's texture coordinate".to_string()
        } else {
            let words: Vec<u32> = leaf
                .slots
                .iter()
                .map(|pl| s.inputs.get(&(*pl, None)).copied().unwrap_or(0))
                .collect();
            show(leaf.scalar, &words)
        };
        let _ = writeln!(text, "input {} (location {loc}) = {how}", leaf.name);
    }
    // Textures, by image: units that sample (or query the size of) one image share its texture.
    let units = &c.interface.textures;
    let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for item in textures {
        let (key, file) = item.split_once('=').ok_or_else(|| {
            format!("--texture `{item}`: expected BINDING=FILE.png (a cube map: six files, +X,-X,+Y,-Y,+Z,-Z)")
        })?;
        let key = key.trim();
        let image = units
            .iter()
            .find(|t| {
                t.image == key
                    || t.sampler == key
                    || key
                        .parse::<u32>()
                        .ok()
                        .is_some_and(|b| t.binding == Some(b))
            })
            .map(|t| t.image.clone())
            .ok_or_else(|| {
                let mut known: Vec<String> = units
                    .iter()
                    .map(|t| match t.binding {
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
        files.insert(image, texture_files(file));
    }
    let mut images: BTreeMap<String, Texture> = BTreeMap::new();
    for t in units {
        if !images.contains_key(&t.image) {
            let cube = t.kind == "cube";
            let tex = match files.get(&t.image) {
                Some(f) if cube => {
                    let faces: Vec<Texture> =
                        f.iter().map(|f| read_png(f)).collect::<Result<_, _>>()?;
                    let faces: [Texture; 6] = faces.try_into().map_err(|f: Vec<Texture>| {
                        format!(
                            "--texture {}: a cube map takes six PNG files (+X,-X,+Y,-Y,+Z,-Z), not {}",
                            t.image,
                            f.len()
                        )
                    })?;
                    let tex =
                        Texture::cube(faces).map_err(|e| format!("--texture {}: {e}", t.image))?;
                    let names: Vec<String> = f.iter().map(|f| f.display().to_string()).collect();
                    let _ = writeln!(
                        text,
                        "texture {} = cube map {} ({}x{})",
                        t.image,
                        names.join(", "),
                        tex.width,
                        tex.height
                    );
                    tex
                }
                Some(f) => {
                    let [f] = f.as_slice() else {
                        return Err(format!(
                            "--texture {}: a {} texture takes one PNG file, not {}",
                            t.image,
                            t.kind,
                            f.len()
                        ));
                    };
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
                None if cube => {
                    let _ = writeln!(
                        text,
                        "texture {} = built-in checkerboard cube map (64x64 faces)",
                        t.image
                    );
                    render::checkerboard_cube(64, 8)?
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

/// The files of a `--texture` item's value: one PNG, or a cube map's six separated by commas.
pub fn texture_files(value: &str) -> Vec<PathBuf> {
    value.split(',').map(|f| PathBuf::from(f.trim())).collect()
}

/// Draws fragment shader `c` over `w`×`h` pixels in the simulator and the interpreter.
pub fn draw(
    c: &Compilation,
    w: u32,
    h: u32,
    sets: &[String],
    textures: &[String],
) -> Result<(Rendered, String), String> {
    draw_face(c, w, h, sets, textures, false)
}

/// [`draw`] on a front or a back face (what `gl_FrontFacing` reads).
pub fn draw_face(
    c: &Compilation,
    w: u32,
    h: u32,
    sets: &[String],
    textures: &[String],
    back_face: bool,
) -> Result<(Rendered, String), String> {
    let (mut r, mut text) = fragment_inputs(c, w, h, sets, textures)?;
    r.back_face = back_face;
    if c.compiled
        .info
        .inputs
        .values()
        .any(|k| *k == kiln_vc4::interface::InputKind::FrontFacing)
    {
        text.push_str(if back_face {
            "input gl_FrontFacing = false (a back face; --back-face)\n"
        } else {
            "input gl_FrontFacing = true (a front face; --back-face for the other)\n"
        });
    }
    Ok((render::render(&c.compiled, &c.generic, &r)?, text))
}

/// What a render found, in words.
pub fn render_report(out: &Rendered, c: &Compilation, image: &Path) -> String {
    let (w, h) = (out.width, out.height);
    let batches = w.div_ceil(8) * h.div_ceil(2);
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{}: {w}x{h}, {} batches of 16 pixels, {} QPU instructions executed ({} in the program), {} cycles ({:.1} per batch)",
        image.display(),
        batches,
        out.instructions,
        c.compiled.stats.instructions,
        out.cycles,
        out.cycles as f64 / batches.max(1) as f64
    );
    match out.first_mismatch {
        None => {
            let _ = writeln!(
                text,
                "check: the simulator agrees exactly with the selected program on all {} pixels",
                w * h
            );
        }
        Some((x, y)) => {
            let i = (y * w + x) as usize;
            let _ = writeln!(
                text,
                "MISMATCH: {} of {} pixels differ from the selected program; first at ({x}, {y}): simulator {:?}, selected program {:?}",
                out.mismatched,
                w * h,
                out.simulated_check.as_ref().unwrap_or(&out.simulated)[i],
                out.selected[i]
            );
        }
    }
    let [r, g, b, a] = out.channel_difference;
    let _ = write!(
        text,
        "precision against the exact-math program: largest error per channel r {r}, g {g}, b {b}, a {a} (of 255); {} of {} pixels beyond 1/255",
        out.differing,
        w * h,
    );
    if let Some((x, y)) = out.first_difference {
        let i = (y * w + x) as usize;
        let _ = write!(
            text,
            ", first at ({x}, {y}): {:?} against {:?}",
            out.simulated[i], out.reference[i]
        );
    }
    text.push('\n');
    let approximate = approximate_operations(&c.generic);
    if !approximate.is_empty() {
        let _ = writeln!(
            text,
            "approximate on the QPU (SFU estimates, Newton steps, polynomials): {}",
            approximate.join(", ")
        );
    }
    text
}

/// The operations of `generic` that the VideoCore IV computes approximately — through the SFU's
/// estimates (with a Newton step for division and reciprocals) or polynomials — with how many
/// of each.
pub fn approximate_operations(generic: &kiln_ir::Function) -> Vec<String> {
    use kiln_ir::Opcode as O;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for block in &generic.blocks {
        for inst in &block.insts {
            let op = inst.op;
            if matches!(
                op,
                O::Fdiv
                    | O::Frcp
                    | O::Frsq
                    | O::Fsqrt
                    | O::Fexp2
                    | O::Flog2
                    | O::Fpow
                    | O::Fsin
                    | O::Fcos
                    | O::Fatan
                    | O::Fatan2
                    | O::Fasin
                    | O::Facos
            ) {
                *counts.entry(op.name()).or_default() += 1;
            }
        }
    }
    counts
        .into_iter()
        .map(|(name, n)| format!("{name} ×{n}"))
        .collect()
}

/// Runs vertex shader `c` on `vertices` vertices (1–16) with `--set` items (uniform members,
/// attributes `NAME@K=…` per vertex); the outputs per vertex, checked against the interpreter.
pub fn vertex(c: &Compilation, vertices: usize, sets: &[String]) -> Result<String, String> {
    if !(1..=16).contains(&vertices) {
        return Err(format!("--vertices {vertices}: 1 to 16"));
    }
    let s = settings(c, sets, true)?;
    let mut text = s.report.clone();
    // The harness's vertex inputs (vertex k is lane k, the viewport uniforms); every other
    // uniform word 0 unless set.
    let compiled = &c.compiled;
    let mut env = harness::environment(&compiled.ssa, &compiled.info);
    let generic = Env::from_slots(&c.generic, 16, |_| 0);
    for (k, v) in generic.uniforms {
        env.uniforms.entry(k).or_insert(v);
    }
    for (k, v) in env.uniforms.iter_mut() {
        if *k < kiln_vc4::vertex::VIEWPORT_X_SCALE {
            *v = s.uniforms.get(k).copied().unwrap_or(0);
        }
    }
    env.step_limit = harness::STEP_LIMIT;
    let has_slot = |slot: u32| c.interface.inputs.iter().any(|s| s.slot == slot);
    for leaf in &c.interface.named_inputs {
        for &slot in leaf.slots.iter().filter(|&&s| has_slot(s)) {
            let vals: Vec<u32> = (0..16)
                .map(|k| {
                    s.inputs
                        .get(&(slot, Some(k)))
                        .or_else(|| s.inputs.get(&(slot, None)))
                        .copied()
                        .unwrap_or(0)
                })
                .collect();
            env.inputs.insert(slot, vals);
        }
        for k in 0..vertices {
            let words: Vec<u32> = leaf
                .slots
                .iter()
                .map(|sl| env.inputs.get(sl).map_or(0, |v| v[k]))
                .collect();
            let _ = writeln!(
                text,
                "vertex {k}: input {} (location {}) = {}",
                leaf.name,
                leaf.location.unwrap_or(0),
                show(leaf.scalar, &words)
            );
        }
    }
    // The shader's own outputs (the interpreter on the optimised generic function).
    let want = kiln_interp::run_ssa(&c.generic, &env).map_err(|e| format!("interpreter: {e}"))?;
    let got = harness::simulate(&compiled.emitted, OutputMode::Vpm, true, &env)?;
    let selected =
        kiln_interp::run_ssa(&compiled.ssa, &env).map_err(|e| format!("interpreter: {e}"))?;
    let agree = harness::compare(&got, &selected, &compiled.info);
    for k in 0..vertices {
        let _ = writeln!(text, "vertex {k}:");
        for out in &c.interface.outputs {
            let v = want
                .slots
                .get(&out.slot)
                .and_then(|l| l.get(k).cloned().flatten())
                .and_then(|u| u.first().copied().flatten());
            let xyzw = |c: u32| "xyzw".as_bytes()[c as usize & 3] as char;
            let what = match &out.kind {
                kiln_front::interface::SlotKind::Location {
                    location,
                    component,
                } => format!("location {location}.{}", xyzw(*component)),
                kiln_front::interface::SlotKind::BuiltIn { name, component } => {
                    format!("{name}.{}", xyzw(*component))
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
