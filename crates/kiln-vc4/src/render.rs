//! Rendering a compiled fragment shader over a W×H image as a full-screen quad, in the
//! simulator (one run per 8×2-pixel QPU batch) and in the reference interpreter on the generic
//! function it was compiled from, and comparing the two images. The design is in `docs/vc4.md`
//! ("`kiln run`: shader to pixels").

use crate::compile::Compiled;
use crate::interface::{InputKind, OutputKind, Stage};
use crate::uniforms::Uniform;
use kiln_interp::{Env, Texture};
use kiln_ir::Function;
use kiln_qpu::sim::{Machine, Program, alu, tlb, tmu};
use std::collections::BTreeMap;

const BASE: u32 = 0x1_0000;
const UNIFORMS: u32 = 0x8_0000;
const TEXTURES: u32 = 0x10_0000;
/// Instructions one batch may execute.
pub const STEP_LIMIT: u64 = 1_000_000;
/// Largest texture side the TMU addresses.
pub const MAX_TEXTURE_SIDE: u32 = 2048;
/// Largest image side `render` draws.
pub const MAX_IMAGE_SIDE: u32 = 4096;

/// The value of one fragment input slot (a scalar varying component).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputValue {
    /// The same 32 bits at every pixel.
    Constant(u32),
    /// Component `k` (0: s = (x + 0.5) / W, 1: t = (y + 0.5) / H) of the pixel centre's
    /// texture coordinate in [0, 1]².
    TexCoord(u32),
}

/// What a render reads.
#[derive(Clone, Debug, Default)]
pub struct RenderInputs {
    pub width: u32,
    pub height: u32,
    /// Per varying input slot; a slot not listed reads 0.
    pub inputs: BTreeMap<u32, InputValue>,
    /// User uniform words by slot; missing words read 0.
    pub uniforms: BTreeMap<u32, u32>,
    /// Textures by unit; a unit without one samples [`checkerboard`].
    pub textures: BTreeMap<u32, Texture>,
    /// The quad is a back face (`gl_FrontFacing` false; the simulator's `rev_flag` 1).
    pub back_face: bool,
}

/// Two images of the same shader and their difference.
#[derive(Clone, Debug)]
pub struct Rendered {
    pub width: u32,
    pub height: u32,
    /// Row-major RGBA8 from the simulator.
    pub simulated: Vec<[u8; 4]>,
    /// Row-major RGBA8 from the interpreter running the selected program (the code
    /// generator's input): the simulator must match it exactly.
    pub selected: Vec<[u8; 4]>,
    /// Pixels where the simulator differs from the selected program at all.
    pub mismatched: usize,
    /// First such pixel (x, y).
    pub first_mismatch: Option<(u32, u32)>,
    /// With textures and a mismatch: the simulator's image with the procedural textures the
    /// exact check binds (what `selected` is compared with).
    pub simulated_check: Option<Vec<[u8; 4]>>,
    /// Row-major RGBA8 from the interpreter running the exact-math reference (the generic
    /// program): differences measure the precision of the hardware's math, not correctness.
    pub reference: Vec<[u8; 4]>,
    /// Pixels where some channel differs from the reference by more than 1 (of 255).
    pub differing: usize,
    /// Largest difference from the reference per channel (r, g, b, a).
    pub channel_difference: [u8; 4],
    /// First pixel (x, y) more than 1/255 from the reference.
    pub first_difference: Option<(u32, u32)>,
    /// QPU instructions executed over all batches.
    pub instructions: u64,
    /// QPU cycles over all batches, as the simulator counts them (one per instruction and the
    /// waits for texture results; loops counted as they run).
    pub cycles: u64,
}

/// A `w`×`h` checkerboard of `cell`-texel squares, light grey and dark blue, opaque.
pub fn checkerboard(w: u32, h: u32, cell: u32) -> Texture {
    tinted_checkerboard(w, h, cell, [224, 224, 224])
}

/// A cube map of six `side`×`side` checkerboards, each face's light squares its own colour
/// (+X red, −X cyan, +Y green, −Y magenta, +Z blue, −Z yellow).
pub fn checkerboard_cube(side: u32, cell: u32) -> Result<Texture, String> {
    const TINTS: [[u8; 3]; 6] = [
        [224, 96, 96],
        [96, 224, 224],
        [96, 224, 96],
        [224, 96, 224],
        [96, 96, 224],
        [224, 224, 96],
    ];
    Texture::cube(TINTS.map(|t| tinted_checkerboard(side, side, cell, t)))
}

fn tinted_checkerboard(w: u32, h: u32, cell: u32, light: [u8; 3]) -> Texture {
    let cell = cell.max(1);
    let [r, g, b] = light;
    let texels = (0..w * h)
        .map(|i| {
            let (x, y) = (i % w, i / w);
            if (x / cell + y / cell) % 2 == 0 {
                [r, g, b, 255]
            } else {
                [32, 48, 96, 255]
            }
        })
        .collect();
    Texture {
        width: w,
        height: h,
        faces: 1,
        texels,
    }
}

/// Bytes a `w`×`h` RGBA8888 texture takes in the TMU's layout (whole tiles).
pub fn texture_bytes(w: u32, h: u32) -> u32 {
    if w <= 16 || h <= 16 {
        w.div_ceil(4) * h.div_ceil(4) * 64
    } else {
        w.div_ceil(32) * h.div_ceil(32) * 4096
    }
}

/// Bytes from one face of `tex` to the next: whole 4 KiB pages (the cube-map stride's unit).
pub fn face_stride(tex: &Texture) -> u32 {
    texture_bytes(tex.width, tex.height).next_multiple_of(4096)
}

/// Texture parameter 1: size, nearest filtering, repeat — or clamped to the edge (a cube map's
/// faces) — (a side of 2048 is written as 0).
fn texture_p1(w: u32, h: u32, clamp: bool) -> u32 {
    let wrap = if clamp { 1 | 1 << 2 } else { 0 };
    ((h & 2047) << 20) | ((w & 2047) << 8) | (1 << 7) | (1 << 4) | wrap
}

/// The word the driver writes for configuration entry `u` of a texture `tex` stored at `base`
/// (Mesa `vc4_uniforms.c`: the sampler view's p0 and p1, `write_texture_p2`), or `None` for an
/// entry that is no texture configuration.
pub fn texture_config(u: Uniform, base: u32, tex: &Texture) -> Option<u32> {
    let cube = tex.faces == 6;
    match u {
        Uniform::TextureP0 { .. } => Some(if cube { base | tmu::P0_CUBE_MAP } else { base }),
        Uniform::TextureP1(_) => Some(texture_p1(tex.width, tex.height, cube)),
        Uniform::TextureP2 { explicit_level, .. } => Some(crate::uniforms::texture_p2(
            explicit_level,
            if cube { face_stride(tex) } else { 0 },
        )),
        _ => None,
    }
}

/// Stores `tex` at `base` in the TMU's layout (RGBA8888: byte 0 red … byte 3 alpha), each face
/// [`face_stride`] after the one before.
pub fn upload(
    mem: &mut kiln_qpu::sim::memory::Memory,
    base: u32,
    tex: &Texture,
) -> Result<(), String> {
    for f in 0..tex.faces {
        let texels = tex.face(f);
        let face_base = base + f * face_stride(tex);
        for y in 0..tex.height {
            for x in 0..tex.width {
                let word = u32::from_le_bytes(texels[(y * tex.width + x) as usize]);
                let at = face_base + tmu::texel_offset(tex.width, tex.height, x, y);
                mem.write_u32(at, word).ok_or("texture outside memory")?;
            }
        }
    }
    Ok(())
}

/// The texture units a uniform table reads, each with whether it reads a cube map.
pub fn texture_units(uniforms: &[Uniform]) -> BTreeMap<u32, bool> {
    let mut units = BTreeMap::new();
    for u in uniforms {
        match *u {
            Uniform::TextureP0 { unit, cube } => *units.entry(unit).or_default() |= cube,
            Uniform::TextureP1(unit) | Uniform::TextureP2 { unit, .. } => {
                units.entry(unit).or_default();
            }
            _ => {}
        }
    }
    units
}

/// Draws `c` over the image `r` describes, in the simulator, and checks it twice: exactly
/// against the interpreter running the selected program `c.ssa` (the code generator's input:
/// any difference is a code-generation bug), and for precision against the interpreter running
/// the exact-math `reference` (the generic program: differences measure the hardware's
/// approximate math). The selected program's texture lookups read the procedural textures the
/// harness binds (`kiln_interp::Texture::procedural`), so a shader with textures is drawn a
/// second time with those bound for the exact check.
pub fn render(c: &Compiled, reference: &Function, r: &RenderInputs) -> Result<Rendered, String> {
    if c.info.stage != Stage::Fragment || c.output != crate::emit::OutputMode::Tlb {
        return Err("render needs a fragment shader compiled for the tile buffer".into());
    }
    let (w, h) = (r.width, r.height);
    if w == 0 || h == 0 || w > MAX_IMAGE_SIDE || h > MAX_IMAGE_SIDE {
        return Err(format!(
            "image size {w}x{h}: each side must be 1..={MAX_IMAGE_SIDE}"
        ));
    }
    let units = texture_units(&c.emitted.uniforms);
    let mut textures = BTreeMap::new();
    for (&u, &cube) in &units {
        let tex = match r.textures.get(&u) {
            Some(t) => t.clone(),
            None if cube => checkerboard_cube(64, 8)?,
            None => checkerboard(64, 64, 8),
        };
        if tex.width == 0
            || tex.height == 0
            || tex.width > MAX_TEXTURE_SIDE
            || tex.height > MAX_TEXTURE_SIDE
            || tex.texels.len() != (tex.width * tex.height * tex.faces) as usize
        {
            return Err(format!(
                "texture {u}: {}x{} (each side must be 1..={MAX_TEXTURE_SIDE})",
                tex.width, tex.height
            ));
        }
        if (tex.faces == 6) != cube {
            return Err(format!(
                "texture {u}: the shader samples {}, the texture given is {}",
                if cube { "a cube map" } else { "a 2D image" },
                if tex.faces == 6 {
                    "a cube map"
                } else {
                    "a 2D image"
                },
            ));
        }
        textures.insert(u, tex);
    }
    let (image, exact) = if units.is_empty() {
        let mut one = draw(c, r, &textures, &[reference, &c.ssa])?;
        let selected = one.interpreted.pop().expect("two functions");
        let exact = one.simulated.clone();
        (one, (exact, selected))
    } else {
        let procedural = units
            .iter()
            .map(|(&u, &cube)| {
                let tex = if cube {
                    Texture::procedural_cube(u)
                } else {
                    Texture::procedural(u)
                };
                (u, tex)
            })
            .collect();
        let mut check = draw(c, r, &procedural, &[&c.ssa])?;
        let selected = check.interpreted.pop().expect("one function");
        (
            draw(c, r, &textures, &[reference])?,
            (check.simulated, selected),
        )
    };
    let n = (w * h) as usize;
    let mut out = Rendered {
        width: w,
        height: h,
        simulated: image.simulated,
        selected: exact.1,
        mismatched: 0,
        first_mismatch: None,
        simulated_check: None,
        reference: image.interpreted.into_iter().next().expect("the reference"),
        differing: 0,
        channel_difference: [0; 4],
        first_difference: None,
        instructions: image.instructions,
        cycles: image.cycles,
    };
    for i in 0..n {
        let at = Some((i as u32 % w, i as u32 / w));
        if exact.0[i] != out.selected[i] {
            out.mismatched += 1;
            out.first_mismatch = out.first_mismatch.or(at);
        }
        let (a, b) = (out.simulated[i], out.reference[i]);
        for k in 0..4 {
            out.channel_difference[k] = out.channel_difference[k].max(a[k].abs_diff(b[k]));
        }
        let d = (0..4).map(|k| a[k].abs_diff(b[k])).max().unwrap_or(0);
        if d > 1 {
            out.differing += 1;
            out.first_difference = out.first_difference.or(at);
        }
    }
    if out.mismatched > 0 {
        // Where the check's image differs, show the check's own pixels.
        out.simulated_check = Some(exact.0);
    }
    Ok(out)
}

/// One drawing of the image: the simulator's pixels, and each of `functions` interpreted on
/// the same inputs, uniforms and `textures`.
struct Drawn {
    simulated: Vec<[u8; 4]>,
    interpreted: Vec<Vec<[u8; 4]>>,
    instructions: u64,
    cycles: u64,
}

fn draw(
    c: &Compiled,
    r: &RenderInputs,
    textures: &BTreeMap<u32, Texture>,
    functions: &[&Function],
) -> Result<Drawn, String> {
    let (w, h) = (r.width, r.height);
    // Memory: code, uniforms, then each texture on 4 KiB pages.
    let mut layout = BTreeMap::new();
    let mut next = TEXTURES;
    for (&u, tex) in textures {
        layout.insert(u, next);
        next += face_stride(tex) * tex.faces;
    }
    let words = c.emitted.words();
    let mut m = Machine::new(next as usize, Program::new(BASE, &words));
    for (&u, tex) in textures {
        upload(&mut m.mem, layout[&u], tex)?;
    }
    // The driver's uniforms of the bound textures: the sizes gradients and (as reciprocals)
    // texel fetches scale by.
    let mut uniforms = r.uniforms.clone();
    for (&unit, tex) in textures {
        for (axis, side) in [(0, tex.width), (1, tex.height)] {
            let slot = crate::texture::TEXRECT_SCALE + 2 * unit + axis;
            uniforms.insert(slot, (1.0 / side as f32).to_bits());
            let slot = crate::texture::TEXTURE_SIZE + 2 * unit + axis;
            uniforms.insert(slot, (side as f32).to_bits());
        }
    }
    let mut stream =
        crate::uniforms::stream(&c.emitted.uniforms, UNIFORMS, |s| uniforms.get(&s).copied());
    for (k, &u) in c.emitted.uniforms.iter().enumerate() {
        let unit = match u {
            Uniform::TextureP0 { unit, .. } | Uniform::TextureP1(unit) => unit,
            Uniform::TextureP2 { unit, .. } => unit,
            _ => continue,
        };
        if let Some(word) = texture_config(u, layout[&unit], &textures[&unit]) {
            stream[k] = word;
        }
    }
    if UNIFORMS as usize + 4 * stream.len() > TEXTURES as usize {
        return Err("the uniform stream is too long".into());
    }
    m.mem
        .write_words(UNIFORMS, &stream)
        .ok_or("the uniform stream does not fit in memory")?;

    // Every slot a function reads starts at 0; the given uniform words replace theirs.
    let mut envs: Vec<Env> = functions
        .iter()
        .map(|f| {
            let mut env = Env::from_slots(f, 16, |_| 0);
            env.uniforms.extend(uniforms.iter().map(|(&k, &v)| (k, v)));
            env.textures = textures.clone();
            env.step_limit = STEP_LIMIT;
            env
        })
        .collect();

    let n = (w * h) as usize;
    let mut out = Drawn {
        simulated: vec![[0; 4]; n],
        interpreted: vec![vec![[0; 4]; n]; functions.len()],
        instructions: 0,
        cycles: 0,
    };
    let colour: Vec<(u32, u32)> = c
        .info
        .outputs
        .iter()
        .filter_map(|(slot, k)| match k {
            OutputKind::Color(comp) if *comp < 4 => Some((*slot, *comp)),
            _ => None,
        })
        .collect();
    for y0 in (0..h).step_by(2) {
        for x0 in (0..w).step_by(8) {
            let lanes: [(u32, u32); 16] = std::array::from_fn(|l| tlb::lane_xy(x0, y0, l));
            let mut batch_inputs: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            for (slot, kind) in &c.info.inputs {
                let vals: Vec<u32> = match kind {
                    InputKind::Varying => {
                        let v = r
                            .inputs
                            .get(slot)
                            .copied()
                            .unwrap_or(InputValue::Constant(0));
                        lanes
                            .iter()
                            .map(|&(x, y)| match v {
                                InputValue::Constant(b) => b,
                                InputValue::TexCoord(0) => ((x as f32 + 0.5) / w as f32).to_bits(),
                                InputValue::TexCoord(_) => ((y as f32 + 0.5) / h as f32).to_bits(),
                            })
                            .collect()
                    }
                    InputKind::FragCoord(k @ (0 | 1)) => lanes
                        .iter()
                        .map(|&(x, y)| (if *k == 0 { x } else { y } as f32 + 0.5).to_bits())
                        .collect(),
                    // The quad lies at depth 0 (payload Z = 0 in rb15) with W = 1 (ra15), so
                    // gl_FragCoord.z is 0 and .w (1 / W) is 1.
                    InputKind::FragCoord(2) => vec![0; 16],
                    InputKind::FragCoord(3) => vec![1.0f32.to_bits(); 16],
                    // True (all ones) on a front face, where `rev_flag` is 0.
                    InputKind::FrontFacing => vec![if r.back_face { 0 } else { u32::MAX }; 16],
                    // Not read by the program (compilation refuses a read of these).
                    _ => continue,
                };
                batch_inputs.insert(*slot, vals);
            }
            // Interpreter, on every function.
            let mut wants = Vec::with_capacity(functions.len());
            for (f, env) in functions.iter().zip(&mut envs) {
                env.inputs.extend(batch_inputs.clone());
                wants.push(
                    kiln_interp::run_ssa(f, env)
                        .map_err(|e| format!("interpreter at batch ({x0}, {y0}): {e}"))?,
                );
            }
            // Simulator.
            m.qpus.clear();
            m.mutex = None;
            m.semaphores = [0; 16];
            m.tlb.write_color(x0, y0, &[0; 16], 0xffff);
            let q = m.add_qpu(UNIFORMS);
            m.qpus[q].frag_xy = (x0, y0);
            m.qpus[q].rev_flag = r.back_face as u32;
            m.qpus[q].ra[15] = [1.0f32.to_bits(); 16];
            m.qpus[q].rb[15] = [0; 16];
            for slot in &c.emitted.varyings {
                let vals = batch_inputs
                    .get(slot)
                    .ok_or_else(|| format!("no values for input slot {slot}"))?;
                let v: [u32; 16] = std::array::from_fn(|l| vals[l]);
                m.qpus[q].varyings.push_back((v, [0; 16]));
            }
            m.run(STEP_LIMIT)
                .map_err(|e| format!("simulator at batch ({x0}, {y0}): {e:?}"))?;
            out.instructions += m.qpus[q].instructions;
            out.cycles += m.qpus[q].cycles;
            for (l, &(x, y)) in lanes.iter().enumerate() {
                if x >= w || y >= h {
                    continue;
                }
                let i = (y * w + x) as usize;
                out.simulated[i] = m.tlb.color_at(x, y).to_le_bytes();
                for (image, want) in out.interpreted.iter_mut().zip(&wants) {
                    image[i] = pixel(want, l, &colour);
                }
            }
        }
    }
    Ok(out)
}

/// Lane `l`'s colour as the tile buffer stores it (each channel packed as the mul unit's
/// 8888 pack does); a discarded lane keeps the cleared buffer's zeros.
fn pixel(run: &kiln_interp::Outputs, l: usize, colour: &[(u32, u32)]) -> [u8; 4] {
    let mut px = [0u8; 4];
    if run.discarded.get(l).copied().unwrap_or(false) {
        return px;
    }
    for &(slot, comp) in colour {
        let v = run
            .slots
            .get(&slot)
            .and_then(|lanes| lanes.get(l).cloned().flatten())
            .and_then(|units| units.first().copied().flatten())
            .unwrap_or(0);
        px[comp as usize] = alu::pack_mul(4, v).0 as u8;
    }
    px
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every texel of a texture lies inside the bytes reserved for it.
    #[test]
    fn texture_bytes_cover_every_texel() {
        for (w, h) in [
            (1, 1),
            (5, 3),
            (16, 16),
            (17, 17),
            (33, 100),
            (100, 37),
            (64, 64),
            (2048, 17),
            (40, 2048),
        ] {
            let bytes = texture_bytes(w, h);
            let mut seen = vec![false; (bytes / 4) as usize];
            for y in 0..h {
                for x in 0..w {
                    let o = tmu::texel_offset(w, h, x, y);
                    assert!(
                        o + 4 <= bytes,
                        "{w}x{h}: texel ({x}, {y}) at {o} of {bytes}"
                    );
                    assert!(
                        !seen[(o / 4) as usize],
                        "{w}x{h}: texel ({x}, {y}) shares {o}"
                    );
                    seen[(o / 4) as usize] = true;
                }
            }
        }
    }

    #[test]
    fn parameter_1_reads_back_as_the_size() {
        for (w, h) in [(1, 1), (100, 37), (2048, 2048), (2048, 5)] {
            let c = tmu::TexConfig::from_params(0x10_0000, texture_p1(w, h, false));
            assert_eq!((c.width, c.height, c.wrap_s, c.wrap_t), (w, h, 0, 0));
            assert!(c.mag_nearest && c.min_nearest);
            let c = tmu::TexConfig::from_params(0x10_0000, texture_p1(w, h, true));
            assert_eq!((c.width, c.height, c.wrap_s, c.wrap_t), (w, h, 1, 1));
        }
    }

    #[test]
    fn checkerboard_alternates() {
        let t = checkerboard(16, 16, 4);
        assert_eq!(t.texels.len(), 256);
        assert_eq!(t.texels[0], t.texels[8]);
        assert_ne!(t.texels[0], t.texels[4]);
        assert_ne!(t.texels[0], t.texels[4 * 16]);
    }
}
