//! Texture lookups through the TMU (Mesa's `ntq_emit_tex`): their selection — each component a
//! `texture_sample`'s split takes becomes one [`Op::Tex`] (or [`Op::TexB`], with a bias or an
//! explicit level) — and the facts the emitter and class narrowing share about them: which
//! lookups make a TMU request (in a threaded shader, a thread switch) and which read the texel
//! already in r4. The design is in `docs/vc4.md` ("The emitter": textures).

use crate::ops::{Hw, Op, Unit};
use kiln_ir::sample::{Compare, Dim, Level, SampleMode};
use kiln_ir::{Def, Function, GenericTarget, Inst, Opcode, Operand, OperandFlags, Temp, Value};
use std::collections::BTreeMap;

/// What the TMU path cannot do in `func`: samplers other than 2D, cube and 2D shadow (3D, 1D,
/// arrays — the hardware has none — and cube shadow), explicit gradients, and a texture result
/// used other than through its split into components.
pub fn refusals(func: &Function) -> Vec<String> {
    let mut refused = Vec::new();
    let lookup = |i: &Inst| matches!(i.op, Opcode::TextureFetch | Opcode::TextureSample);
    if !func.blocks.iter().flat_map(|b| &b.insts).any(lookup) {
        return refused;
    }
    let uses = crate::interface::use_counts(func);
    let used = |t: Temp| uses.get(t.index()).copied().unwrap_or(0);
    let mut samples = Vec::new();
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        match inst.op {
            // x, y and the level: the front end refuses fetches from arrays and 3D images.
            Opcode::TextureFetch if !(2..=3).contains(&inst.operands.len()) => refused.push(
                format!("texel fetches with {} operands", inst.operands.len()),
            ),
            Opcode::TextureFetch => {
                let t = inst.defs[0].temp;
                if used(t) > 1 {
                    refused.push("a texture result used whole".to_string());
                }
                samples.push(t);
            }
            Opcode::TextureSample => {
                let Some(mode) = SampleMode::of(&inst.imms) else {
                    refused.push(format!("texture sample mode {}", inst.imms[1]));
                    continue;
                };
                let cube_compare = mode.dim == Dim::Cube && mode.compare.is_some();
                if mode.arrayed || cube_compare || !matches!(mode.dim, Dim::D2 | Dim::Cube) {
                    refused.push(format!("{} samplers", mode.kind()));
                } else if mode.level == Level::Gradient
                    && (mode.dim != Dim::D2 || mode.compare.is_some())
                {
                    refused.push(format!("{} sampling with explicit gradients", mode.kind()));
                } else if inst.operands.len() != mode.operands() {
                    refused.push(format!(
                        "a {} sample with {} operands",
                        mode.kind(),
                        inst.operands.len()
                    ));
                } else {
                    let t = inst.defs[0].temp;
                    if used(t) > 1 {
                        refused.push("a texture result used whole".to_string());
                    }
                    samples.push(t);
                }
            }
            Opcode::SplitVector => {}
            _ if inst.used_temps().any(|t| samples.contains(&t)) => {
                refused.push("a texture result used whole".to_string());
            }
            _ => {}
        }
    }
    refused.sort();
    refused.dedup();
    refused
}

/// Where a lookup's operands are: `U, k, s, t`, then `r` for a cube map, then the bias or level
/// and its mode ([`Op::Tex`], [`Op::TexB`], [`Op::TexCube`], [`Op::TexCubeB`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub cube: bool,
    pub lod: bool,
}

impl Layout {
    /// The layout of lookup `inst`, or `None` when it is no lookup.
    pub fn of(inst: &Inst) -> Option<Layout> {
        match Op::of_opcode(inst.op)?.facts().hw {
            Hw::Tmu { cube, lod } => Some(Layout { cube, lod }),
            _ => None,
        }
    }

    /// The lookup operation with this layout.
    pub fn op(self) -> Op {
        match (self.cube, self.lod) {
            (false, false) => Op::Tex,
            (false, true) => Op::TexB,
            (true, false) => Op::TexCube,
            (true, true) => Op::TexCubeB,
        }
    }

    /// The r coordinate's operand.
    pub fn r(self) -> Option<usize> {
        self.cube.then_some(4)
    }

    /// The bias or level operand; the mode constant follows it.
    pub fn lod(self) -> Option<usize> {
        self.lod.then_some(4 + self.cube as usize)
    }

    /// The TMU registers a request writes (s, t, and r and b when present): what it takes of
    /// the request FIFO.
    pub fn writes(self) -> usize {
        2 + self.cube as usize + self.lod as usize
    }
}

/// Replaces each `texture_sample U, s, t[, r][, b]` or `texture_fetch U, x, y[, level]` and its
/// split by one lookup per component the function reads ([`Layout`]), in the split's place, with
/// what the TMU needs computed once per sample before them:
/// - a cube map's direction divided by its largest magnitude, as Mesa's `ntq_emit_tex` does
///   (`fmaxabs`, the reciprocal with a Newton step, three products);
/// - a texel fetch's integer texel turned into the coordinate of its centre,
///   `(x + 0.5) · 2^level / width` — the reciprocal of the size a driver uniform, as Mesa's
///   rectangle textures have it (`QUNIFORM_TEXRECT_SCALE_X`, [`TEXRECT_SCALE`]) — looked up at
///   the explicit level; the unit is bound with nearest filtering, so the lookup reads that
///   texel, wrapped as the interpreter wraps it;
/// - explicit gradients turned into the level of detail they give, looked up at that level;
/// - a depth comparison's texel word turned into a depth and compared (one lookup of
///   [`WORD`]).
///
/// `func` has no [`refusals`].
pub fn select_lookups(func: &mut Function) {
    struct Sample {
        unit: u32,
        layout: Layout,
        /// The bias or level's mode constant (1 or 2).
        level: u32,
        fetch: bool,
        gradient: bool,
        compare: Option<Compare>,
        operands: Vec<Operand>,
    }
    let mut samples: BTreeMap<Temp, Sample> = BTreeMap::new();
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        let operands = inst.operands.iter().map(|&o| clean(o)).collect();
        let sample = match inst.op {
            Opcode::TextureSample => {
                let mode = SampleMode::of(&inst.imms).expect("refusals checked the mode");
                Sample {
                    unit: inst.imms[0],
                    layout: Layout {
                        cube: mode.dim == Dim::Cube,
                        lod: mode.level != Level::Implicit,
                    },
                    level: if matches!(mode.level, Level::Explicit | Level::Gradient) {
                        2
                    } else {
                        1
                    },
                    fetch: false,
                    gradient: mode.level == Level::Gradient,
                    compare: mode.compare,
                    operands,
                }
            }
            Opcode::TextureFetch => Sample {
                unit: inst.imms[0],
                layout: Layout {
                    cube: false,
                    lod: true,
                },
                level: 2,
                fetch: true,
                gradient: false,
                compare: None,
                operands,
            },
            _ => continue,
        };
        samples.insert(inst.defs[0].temp, sample);
    }
    if samples.is_empty() {
        return;
    }
    // Components nothing reads are not unpacked (a sample nothing reads makes no request).
    let mut used = vec![false; func.temps.len()];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        for t in inst.used_temps() {
            used[t.index()] = true;
        }
    }
    let uniform_class = func.target.class(GenericTarget::S, 1);
    for b in 0..func.blocks.len() {
        let insts = std::mem::take(&mut func.blocks[b].insts);
        let mut out = Vec::with_capacity(insts.len());
        for inst in insts {
            let sample = match inst.op {
                Opcode::TextureSample | Opcode::TextureFetch => continue,
                Opcode::SplitVector => inst.operands[0].temp_id().and_then(|t| samples.get(&t)),
                _ => None,
            };
            let Some(sample) = sample else {
                out.push(inst);
                continue;
            };
            if !inst.defs.iter().any(|d| used[d.temp.index()]) {
                continue;
            }
            // A component's class: per lane, as the coordinates are.
            let class = func.class(inst.defs[0].temp);
            // An instruction defining a new temp: per lane, or a uniform `slot` (the uniform
            // file's class).
            let mut emit = |code: Opcode, operands: &[Operand], slot: Option<u32>| {
                let t = func.new_temp(if slot.is_some() { uniform_class } else { class });
                let mut i = Inst::new(code);
                i.flags = inst.flags;
                i.defs.push(Def::new(t));
                i.imms.extend(slot);
                i.operands.extend_from_slice(operands);
                out.push(i);
                Operand::temp(t)
            };
            let mut coords = sample.operands.clone();
            if sample.layout.cube {
                let xy = emit(Op::Fmaxabs.opcode(), &coords[..2], None);
                let ma = emit(Op::Fmaxabs.opcode(), &[xy, coords[2]], None);
                // The reciprocal with a Newton–Raphson step, r·(2 − ma·r), as Mesa's code has
                // it: the face coordinates are the products, the TMU takes them as they are.
                let r = emit(Op::Recip.opcode(), &[ma], None);
                let mr = emit(Op::Fmul.opcode(), &[ma, r], None);
                let e = emit(Op::Fsub.opcode(), &[fc(2.0), mr], None);
                let rcp = emit(Op::Fmul.opcode(), &[r, e], None);
                for c in coords[..3].iter_mut() {
                    *c = emit(Op::Fmul.opcode(), &[*c, rcp], None);
                }
            }
            if sample.gradient {
                // OpenGL's level of detail from explicit gradients (§8.14: ρ the longer of the
                // two texel-space gradients, λ = log2 ρ), as `nir_lower_tex`'s `lower_txd`
                // makes a `txl` of it: λ = ½·log2 max(|(∂s·w, ∂t·h)/∂x|², |…/∂y|²), the sizes
                // driver uniforms ([`TEXTURE_SIZE`]).
                let mut size = [Operand::constant(0); 2];
                for (axis, side) in size.iter_mut().enumerate() {
                    let slot = TEXTURE_SIZE + 2 * sample.unit + axis as u32;
                    *side = emit(Opcode::Uniform, &[], Some(slot));
                }
                let mut lengths = [Operand::constant(0); 2];
                for (d, length) in lengths.iter_mut().enumerate() {
                    let u = emit(Opcode::Fmul, &[coords[2 + 2 * d], size[0]], None);
                    let v = emit(Opcode::Fmul, &[coords[3 + 2 * d], size[1]], None);
                    let uu = emit(Opcode::Fmul, &[u, u], None);
                    let vv = emit(Opcode::Fmul, &[v, v], None);
                    *length = emit(Opcode::Fadd, &[uu, vv], None);
                }
                let longer = emit(Opcode::Fmax, &lengths, None);
                let log = emit(Opcode::Flog2, &[longer], None);
                let level = emit(Opcode::Fmul, &[log, fc(0.5)], None);
                coords.truncate(2);
                coords.push(level);
            }
            if sample.fetch {
                let level = coords.get(2).copied().unwrap_or(Operand::constant(0));
                let level_is_0 = matches!(level.value, Value::Const(0));
                let mut centre = Vec::with_capacity(3);
                for (axis, &c) in coords[..2].iter().enumerate() {
                    let f = emit(Opcode::I2f, &[c], None);
                    let mid = emit(Opcode::Fadd, &[f, fc(0.5)], None);
                    let slot = TEXRECT_SCALE + 2 * sample.unit + axis as u32;
                    let scale = emit(Opcode::Uniform, &[], Some(slot));
                    centre.push(emit(Opcode::Fmul, &[mid, scale], None));
                }
                if level_is_0 {
                    centre.push(fc(0.0));
                } else {
                    // Level L's texels are 2^L of level 0's wide.
                    let step = emit(Opcode::Ishl, &[Operand::constant(1), level], None);
                    let step = emit(Opcode::I2f, &[step], None);
                    for c in centre.iter_mut() {
                        *c = emit(Opcode::Fmul, &[*c, step], None);
                    }
                    centre.push(emit(Opcode::I2f, &[level], None));
                }
                coords = centre;
            }
            let n = if sample.layout.cube { 3 } else { 2 };
            let lookup = |component: u32, def: Temp| {
                let mut lookup = Inst::new(sample.layout.op().opcode());
                lookup.flags = inst.flags;
                lookup.defs.push(Def::new(def));
                lookup
                    .operands
                    .extend([Operand::constant(sample.unit), Operand::constant(component)]);
                lookup.operands.extend_from_slice(&coords[..n]);
                if sample.layout.lod {
                    lookup.operands.extend([
                        coords[n + sample.compare.is_some() as usize],
                        Operand::constant(sample.level),
                    ]);
                }
                lookup
            };
            if let Some(compare) = sample.compare {
                // Mesa's shadow lookup (`ntq_emit_tex`, `ntq_scale_depth_texture`): the texel's
                // word, its upper 24 bits as the depth, compared with the reference clamped to
                // [0, 1]; RGBA (r, 0, 0, 1).
                let word = func.new_temp(class);
                out.push(lookup(WORD, word));
                let mut emit = |code: Opcode, operands: &[Operand], def: Option<Temp>| {
                    let t = def.unwrap_or_else(|| func.new_temp(class));
                    let mut i = Inst::new(code);
                    i.flags = inst.flags;
                    i.defs.push(Def::new(t));
                    i.operands.extend_from_slice(operands);
                    out.push(i);
                    Operand::temp(t)
                };
                let z = emit(
                    Opcode::Ushr,
                    &[Operand::temp(word), Operand::constant(8)],
                    None,
                );
                let z = emit(Opcode::I2f, &[z], None);
                let depth = emit(Opcode::Fmul, &[z, fc(1.0 / 16_777_215.0)], None);
                let reference = emit(Opcode::Fmax, &[coords[n], fc(0.0)], None);
                let reference = emit(Opcode::Fmin, &[reference, fc(1.0)], None);
                for (k, d) in inst.defs.iter().enumerate() {
                    if !used[d.temp.index()] {
                        continue;
                    }
                    let t = Some(d.temp);
                    match (k, compare.as_op()) {
                        (0, Ok((op, reference_first))) => {
                            let (a, b) = if reference_first {
                                (reference, depth)
                            } else {
                                (depth, reference)
                            };
                            let pass = emit(op, &[a, b], None);
                            emit(Opcode::Sel, &[pass, fc(1.0), fc(0.0)], t);
                        }
                        (0, Err(constant)) => {
                            emit(Opcode::Mov, &[fc(if constant { 1.0 } else { 0.0 })], t);
                        }
                        (3, _) => {
                            emit(Opcode::Mov, &[fc(1.0)], t);
                        }
                        _ => {
                            emit(Opcode::Mov, &[fc(0.0)], t);
                        }
                    }
                }
                continue;
            }
            for (k, d) in inst.defs.iter().enumerate() {
                if !used[d.temp.index()] {
                    continue;
                }
                let lookup = lookup(k as u32, d.temp);
                out.push(lookup);
            }
        }
        func.blocks[b].insts = out;
    }
}

/// IR uniform slots the driver fills with a texture's width and height as floats:
/// `TEXTURE_SIZE + 2·unit` and `+ 1` (v3d's `QUNIFORM_TEXTURE_WIDTH`, `_HEIGHT`).
pub const TEXTURE_SIZE: u32 = 0xfffd_0000;

/// The component of a lookup that is the texel's whole word (r4 as the TMU leaves it), rather
/// than one of its bytes as a float: a depth texture's texel.
pub const WORD: u32 = 4;

/// IR uniform slots the driver fills with the reciprocal of a texture's width and height:
/// `TEXRECT_SCALE + 2·unit` and `+ 1` (Mesa's `QUNIFORM_TEXRECT_SCALE_X`, `_Y`).
pub const TEXRECT_SCALE: u32 = 0xfffe_0000;

/// A float constant operand.
fn fc(x: f32) -> Operand {
    Operand::constant(x.to_bits())
}

fn clean(o: Operand) -> Operand {
    Operand {
        flags: OperandFlags::empty(),
        ..o
    }
}

/// Whether `v` is a constant operand value.
pub fn constant(v: &Value) -> Option<u32> {
    match v {
        Value::Const(c) => Some(*c),
        _ => None,
    }
}

/// Whether `inst` is a TMU lookup (one of [`Layout`]'s operations).
pub fn is_lookup(inst: &Inst) -> bool {
    Op::of_opcode(inst.op).is_some_and(|op| op.facts().unit == Unit::Tmu)
}

/// Whether the lookup `inst` reads the texel the lookup `prev` read (the same unit and
/// coordinates: another component of one sample). The emitter then takes it from r4 again:
/// no new TMU request and, in a threaded shader, no thread switch.
pub fn same_texel(prev: &Inst, inst: &Inst) -> bool {
    is_lookup(prev)
        && is_lookup(inst)
        && prev.op == inst.op
        && prev.operands.len() == inst.operands.len()
        && prev.operands[0].value == inst.operands[0].value
        && prev.operands[2..]
            .iter()
            .zip(&inst.operands[2..])
            .all(|(a, b)| a.value == b.value)
}

/// Whether the emitter's code for `inst` leaves r4 alone, so that a texel stays there across it:
/// copies.
pub fn keeps_r4(inst: &Inst) -> bool {
    matches!(inst.op, Opcode::ParallelCopy | Opcode::Mov)
}

/// For each instruction of `insts`, whether it is a lookup that makes a TMU request — in a
/// threaded shader, a thread switch (Mesa's `ntq_emit_thrsw` before each `TEX_RESULT`): every
/// lookup but one that reads the texel of the lookup before it, with only copies
/// ([`keeps_r4`]) in between. The emitter decides the same way.
pub fn requests(insts: &[Inst]) -> Vec<bool> {
    let mut prev: Option<&Inst> = None;
    insts
        .iter()
        .map(|inst| {
            let new = is_lookup(inst) && !prev.is_some_and(|p| same_texel(p, inst));
            if is_lookup(inst) {
                prev = Some(inst);
            } else if !keeps_r4(inst) {
                prev = None;
            }
            new
        })
        .collect()
}
