//! The differential harness: runs an emitted shader in the simulator for one batch of 16 lanes
//! and compares what it wrote with the reference interpreter running the selected SSA function
//! ([`crate::compile::Compiled::ssa`]) on the same inputs, with zero tolerance. The design is in
//! `docs/vc4.md` ("The differential harness").

use crate::emit::{Emitted, OutputMode};
use crate::interface::{InputKind, ShaderInfo};
use crate::render;
use crate::uniforms::Uniform;
use kiln_interp::{Env, Outputs};
use kiln_ir::Function;
use kiln_qpu::isa::{AddOp, MulOp};
use kiln_qpu::sim::{Machine, Program, alu, tlb};
use std::collections::BTreeMap;

const BASE: u32 = 0x1_0000;
const UNIFORMS: u32 = 0x8_0000;
const TEXTURES: u32 = 0xC_0000;
const MEM: usize = 0x20_0000;
/// Instructions a run may execute.
pub const STEP_LIMIT: u64 = 1_000_000;

/// What the simulator produced for 16 lanes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimOutput {
    /// Packed RGBA8 per lane.
    Tlb(Vec<u32>),
    /// Output slot and its 16 lane values, in VPM row order.
    Vpm(Vec<(u32, Vec<u32>)>),
}

/// The payload depth (24 bits) of lane `l` in the simulator's rb15.
fn frag_z(l: usize) -> u32 {
    0x12_3456 + 0x1_0101 * l as u32
}

/// Inputs for a 16-lane run of `ssa`: the interpreter's ordinary values, with
/// `gl_FragCoord.xy` set to the pixel centres the simulator's batch covers.
pub fn environment(ssa: &Function, info: &ShaderInfo) -> Env {
    let mut env = Env::with_ordinary_values(ssa, 16);
    for (slot, kind) in &info.inputs {
        if let InputKind::IndexAttribute { instance } = kind {
            // Vertex k of the batch is lane k; one instance.
            let vals = (0..16)
                .map(|l| if *instance { 0 } else { l as u32 })
                .collect();
            env.inputs.insert(*slot, vals);
        }
        if let InputKind::FragCoord(2) = kind {
            // What the QPU computes from the payload depth `frag_z(lane)`.
            let vals = (0..16)
                .map(|l| {
                    let z = alu::add_op(AddOp::Itof, frag_z(l), 0).map_or(0, |r| r.value);
                    alu::mul_op(MulOp::Fmul, z, crate::emit::FRAG_Z_SCALE).value
                })
                .collect();
            env.inputs.insert(*slot, vals);
        }
        if let InputKind::FrontFacing = kind {
            // The simulator's batches are front faces (`rev_flag` 0): true, all ones.
            env.inputs.insert(*slot, vec![u32::MAX; 16]);
        }
        if let InputKind::FragCoord(3) = kind {
            // 1 / W with W = 1.0 (what `simulate` puts in ra15).
            env.inputs.insert(*slot, vec![1.0f32.to_bits(); 16]);
        }
        if let InputKind::FragCoord(c @ (0 | 1)) = kind {
            let vals = (0..16)
                .map(|l| {
                    let (x, y) = tlb::lane_xy(0, 0, l);
                    let p = if *c == 0 { x } else { y };
                    (p as f32 + 0.5).to_bits()
                })
                .collect();
            env.inputs.insert(*slot, vals);
        }
    }
    // A 64×64 viewport with 12.4 sub-pixel x/y (Mesa scales by 16) and depth in [0, 1].
    for (k, v) in [512.0f32, -512.0, 0.5, 0.5, 512.0].into_iter().enumerate() {
        env.uniforms
            .insert(crate::vertex::VIEWPORT_X_SCALE + k as u32, v.to_bits());
    }
    // Texel fetches and gradients scale by the bound texture's size: the procedural textures
    // are 16×16.
    for inst in ssa.blocks.iter().flat_map(|b| &b.insts) {
        if inst.op != kiln_ir::Opcode::Uniform {
            continue;
        }
        let (unit, axis, reciprocal) = match Uniform::of_slot(inst.imms[0]) {
            Uniform::TexrectScale { unit, axis } => (unit, axis, true),
            Uniform::TextureSize { unit, axis } => (unit, axis, false),
            _ => continue,
        };
        let tex = kiln_interp::Texture::procedural(unit);
        let side = if axis == 0 { tex.width } else { tex.height } as f32;
        let value = if reciprocal { 1.0 / side } else { side };
        env.uniforms.insert(inst.imms[0], value.to_bits());
    }
    env.step_limit = STEP_LIMIT;
    env
}

/// Runs `em` in the simulator on `env`'s inputs.
/// `vertex`: inputs are VPM attribute rows rather than varyings.
pub fn simulate(
    em: &Emitted,
    mode: OutputMode,
    vertex: bool,
    env: &Env,
) -> Result<SimOutput, String> {
    let words = em.words();
    let mut m = Machine::new(MEM, Program::new(BASE, &words));
    let mut stream =
        crate::uniforms::stream(&em.uniforms, UNIFORMS, |s| env.uniforms.get(&s).copied());
    // Textures: each unit's procedural texture or cube map (the interpreter's), RGBA8888 in LT
    // format on 4 KiB pages; nearest filtering, repeat (a cube map's faces clamped).
    let mut bound = BTreeMap::new();
    let mut next = TEXTURES;
    for (unit, cube) in render::texture_units(&em.uniforms) {
        let tex = if cube {
            kiln_interp::Texture::procedural_cube(unit)
        } else {
            kiln_interp::Texture::procedural(unit)
        };
        render::upload(&mut m.mem, next, &tex)?;
        let bytes = render::face_stride(&tex) * tex.faces;
        bound.insert(unit, (next, tex));
        next += bytes;
    }
    for (k, &u) in em.uniforms.iter().enumerate() {
        let unit = match u {
            Uniform::TextureP0 { unit, .. } | Uniform::TextureP1(unit) => unit,
            Uniform::TextureP2 { unit, .. } => unit,
            _ => continue,
        };
        let (base, tex) = &bound[&unit];
        if let Some(word) = render::texture_config(u, *base, tex) {
            stream[k] = word;
        }
    }
    m.mem
        .write_words(UNIFORMS, &stream)
        .ok_or("the uniform stream does not fit in memory")?;
    let q = m.add_qpu(UNIFORMS);
    // What no instruction wrote holds a pattern (`Env::poison`): the check runs twice, with
    // two patterns, and a program that reads such a lane differs.
    let qpu = &mut m.qpus[q];
    for (k, reg) in qpu.acc[..4]
        .iter_mut()
        .chain(qpu.ra.iter_mut())
        .chain(qpu.rb.iter_mut())
        .enumerate()
    {
        *reg =
            std::array::from_fn(|l| kiln_interp::storage::poison_pattern(env.poison, k * 16 + l));
    }
    m.qpus[q].ra[15] = [1.0f32.to_bits(); 16];
    m.qpus[q].rb[15] = std::array::from_fn(frag_z);
    for (row, slot) in em.varyings.iter().enumerate() {
        let vals = env
            .inputs
            .get(slot)
            .ok_or_else(|| format!("no values for input slot {slot}"))?;
        let v: [u32; 16] = std::array::from_fn(|l| vals.get(l).copied().unwrap_or(0));
        if vertex {
            // Attributes: VPM row k holds the k-th attribute read, one vertex per lane.
            m.vpm.data[row * 16..row * 16 + 16].copy_from_slice(&v);
        } else {
            m.qpus[q].varyings.push_back((v, [0; 16]));
        }
    }
    m.run(STEP_LIMIT).map_err(|e| format!("simulator: {e:?}"))?;
    Ok(match mode {
        OutputMode::Tlb => SimOutput::Tlb(
            (0..16)
                .map(|l| {
                    let (x, y) = tlb::lane_xy(0, 0, l);
                    m.tlb.color_at(x, y)
                })
                .collect(),
        ),
        OutputMode::Vpm => SimOutput::Vpm(
            em.output_rows
                .iter()
                .enumerate()
                .map(|(row, slot)| (*slot, m.vpm.data[row * 16..row * 16 + 16].to_vec()))
                .collect(),
        ),
    })
}

/// One output unit of one lane as the interpreter has it.
fn interp_value(want: &Outputs, slot: u32, lane: usize) -> Option<u32> {
    want.slots
        .get(&slot)
        .and_then(|lanes| lanes.get(lane).cloned().flatten())
        .and_then(|units| units.first().copied().flatten())
}

fn same_bits(a: u32, b: u32) -> bool {
    a == b || (f32::from_bits(a).is_nan() && f32::from_bits(b).is_nan())
}

/// Compares a simulator run with the interpreter's outputs; the first difference as text.
pub fn compare(got: &SimOutput, want: &Outputs, info: &ShaderInfo) -> Result<(), String> {
    match got {
        SimOutput::Vpm(rows) => {
            for (slot, vals) in rows {
                for (l, &v) in vals.iter().enumerate() {
                    let Some(w) = interp_value(want, *slot, l) else {
                        continue;
                    };
                    if !same_bits(v, w) {
                        return Err(format!(
                            "output {slot} lane {l}: simulator {v:#010x} ({}), interpreter {w:#010x} ({})",
                            f32::from_bits(v),
                            f32::from_bits(w)
                        ));
                    }
                }
            }
        }
        SimOutput::Tlb(pixels) => {
            for (l, &p) in pixels.iter().enumerate() {
                // A discarded lane leaves the tile buffer as it was (cleared to 0).
                if want.discarded.get(l).copied().unwrap_or(false) {
                    if p != 0 {
                        return Err(format!("pixel {l} is discarded but written ({p:#010x})"));
                    }
                    continue;
                }
                for (slot, kind) in &info.outputs {
                    let crate::interface::OutputKind::Color(c) = kind else {
                        continue;
                    };
                    let Some(w) = interp_value(want, *slot, l) else {
                        continue;
                    };
                    let byte = (p >> (8 * c)) & 0xff;
                    let (wb, _) = alu::pack_mul(4, w);
                    if byte != wb {
                        return Err(format!(
                            "pixel {l} component {c}: simulator {byte}, interpreter {wb} ({})",
                            f32::from_bits(w)
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Runs the SSA function in the interpreter and the program in the simulator on the same
/// inputs and compares them.
pub fn check(
    ssa: &Function,
    em: &Emitted,
    mode: OutputMode,
    info: &ShaderInfo,
) -> Result<(), String> {
    check_with(ssa, em, mode, info, &[])
}

/// [`check`] with some uniform words given (`(slot, bits)`) in place of the ordinary values:
/// integer uniforms, whose ordinary float bits would bound a loop by a billion.
pub fn check_with(
    ssa: &Function,
    em: &Emitted,
    mode: OutputMode,
    info: &ShaderInfo,
    uniforms: &[(u32, u32)],
) -> Result<(), String> {
    let mut env = environment(ssa, info);
    for &(slot, bits) in uniforms {
        if let Some(v) = env.uniforms.get_mut(&slot) {
            *v = bits;
        }
    }
    let want = kiln_interp::run_ssa(ssa, &env).map_err(|e| format!("interpreter: {e}"))?;
    let vertex = info.stage == crate::interface::Stage::Vertex;
    // Registers nothing wrote hold one pattern, then another: no output may depend on them.
    for poison in [env.poison, !env.poison] {
        let env = Env {
            poison,
            ..env.clone()
        };
        let got = simulate(em, mode, vertex, &env)?;
        compare(&got, &want, info)
            .map_err(|m| format!("{m} (registers first holding {poison:#x}…)"))?;
    }
    Ok(())
}

/// [`check`] on a compiled shader, with its own output path and interface.
pub fn check_compiled(c: &crate::compile::Compiled) -> Result<(), String> {
    check(&c.ssa, &c.emitted, c.output, &c.info)
}
