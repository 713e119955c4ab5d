//! Texture sampling through the TMU, after Mesa's `ntq_emit_tex` (`vc4_program.c`) and the
//! texture configuration uniforms of `vc4_uniforms.c`.
//!
//! Instruction selection refuses `texture_sample` (its result is a vector, which the vc4 target
//! does not hold), so this module works around it in two steps:
//!
//! 1. [`hide`], before selection: each `texture_sample U, 0, s, t` whose vector is split into
//!    components becomes one placeholder per component (`sel s, t, 0`, a generic op that
//!    selection keeps), remembered by its temp;
//! 2. [`reveal`], after selection: each placeholder becomes `qpu_tex U, k, s, t` ([`TEX`]),
//!    component k of the texel at (s, t) of the interpreter's procedural texture of unit U
//!    (`kiln_interp::Texture::procedural`), `byte / 255`, the texel chosen as the TMU does:
//!    nearest, `floor(s × size) mod size` computed exactly. The generic `texture_sample` of the
//!    interpreter computes the fraction of a coordinate in f32 first, which rounds a negative
//!    coordinate within an ulp below a texel edge up to the next texel (seen on 6 corpus
//!    shaders); non-finite coordinates read texel (0, 0) there and wherever `floor` lands here.
//!
//! The emitter turns each `qpu_tex` into one TMU request: the t coordinate then the s
//! coordinate to TMU0 (each write takes a configuration uniform, P0 then P1), `ldtmu0`, and the
//! component moved out of r4 with the r4 unpack `8a`–`8d` (byte / 255 as a float). The
//! configuration words come from the driver ([`crate::uniforms::Uniform::TextureP0`]); the
//! harness binds the procedural texture as RGBA8888 in LT format, nearest, repeat. 2D sampling
//! with an implicit level, a bias or an explicit level ([`TEX_B`]) is handled.

use crate::isel::Unsupported;
use kiln_ir::{Function, Inst, Opcode, Operand, TargetOp, TargetOpInfo, Temp, Value};
use std::collections::BTreeMap;

/// Texel index of coordinate `c` on an axis of `n` texels, as the TMU computes it (nearest,
/// repeat): `floor(c × n) mod n`, exactly (the simulator's `sim::tmu`).
fn texel(c: u32, n: u32) -> i32 {
    let c = f32::from_bits(c);
    // Denormal coordinates are flushed, as every QPU float input is.
    let c = if c.is_subnormal() { 0.0 } else { c };
    ((c as f64 * n as f64).floor() as i64).rem_euclid(n as i64) as i32
}

fn eval(a: &[u32]) -> u32 {
    let tex = kiln_interp::Texture::procedural(a[0]);
    let (x, y) = (texel(a[2], tex.width), texel(a[3], tex.height));
    tex.fetch(x, y)[a[1] as usize & 3]
}

/// `qpu_tex U, k, s, t`: component k of texture unit U's texel at (s, t). In the vc4 opcode
/// table (`crate::ops::VC4_OPS`), so that the IR text reads back.
pub static TEX: &TargetOpInfo = &crate::ops::VC4_OPS[crate::ops::TEX_INDEX];

/// [`TEX`]'s facts.
pub(crate) const TEX_INFO: TargetOpInfo = TargetOpInfo {
    info: kiln_ir::OpInfo::target(
        "qpu_tex",
        kiln_ir::Arity::Fixed(1),
        kiln_ir::Arity::Fixed(4),
        0,
    ),
    unit: "tmu",
    latency: 1,
    resources: &[],
    operand_classes: None,
    def_classes: None,
    eval: Some(eval),
    cross_lane: None,
};

/// `qpu_tex_b U, k, s, t, b, M`: the same with a bias (`M` = 1) or an explicit level (`M` = 2)
/// written to the TMU's b register (Mesa's `txb` / `txl`). The test textures have one level, so
/// the texel is the same (the interpreter's `texture_sample` ignores the mode too).
pub static TEX_B: &TargetOpInfo = &crate::ops::VC4_OPS[crate::ops::TEX_INDEX + 1];

/// [`TEX_B`]'s facts.
pub(crate) const TEX_B_INFO: TargetOpInfo = TargetOpInfo {
    info: kiln_ir::OpInfo::target(
        "qpu_tex_b",
        kiln_ir::Arity::Fixed(1),
        kiln_ir::Arity::Fixed(6),
        0,
    ),
    ..TEX_INFO
};

/// A placeholder left by [`hide`]: its temp, texture unit and component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hidden {
    pub temp: Temp,
    pub unit: u32,
    pub component: u32,
    /// 0: implicit level; 1: bias; 2: explicit level (the third placeholder operand).
    pub mode: u32,
}

/// Replaces the texture samples of a generic function by placeholders (see the module
/// comment); refuses, changing nothing, what the TMU path does not do.
pub fn hide(func: &mut Function) -> Result<Vec<Hidden>, Unsupported> {
    let mut refused = Vec::new();
    let has_tex = func
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .any(|i| matches!(i.op, Opcode::TextureSample | Opcode::TextureFetch));
    if !has_tex {
        return Ok(Vec::new());
    }
    // Uses of each texture result.
    let mut uses: BTreeMap<Temp, usize> = BTreeMap::new();
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        for t in inst.used_temps() {
            *uses.entry(t).or_default() += 1;
        }
    }
    // unit, mode, s, t, bias or level
    type Sample = (u32, u32, Operand, Operand, Option<Operand>);
    let mut samples: BTreeMap<Temp, Sample> = BTreeMap::new();
    for block in &func.blocks {
        for inst in &block.insts {
            match inst.op {
                Opcode::TextureFetch => refused.push("texel fetches (texture_fetch)".to_string()),
                Opcode::TextureSample => {
                    let mode = inst.imms.get(1).copied().unwrap_or(0);
                    let two_d = match mode {
                        0 => inst.operands.len() == 2,
                        1 | 2 => inst.operands.len() == 3,
                        _ => false,
                    };
                    if !two_d {
                        refused.push(if mode == 3 {
                            "texture sampling with explicit gradients".to_string()
                        } else {
                            "texture sampling other than 2D (cube / 3D / array / depth comparison)"
                                .to_string()
                        });
                    } else {
                        let t = inst.defs[0].temp;
                        if uses.get(&t).copied().unwrap_or(0) > 1 {
                            refused.push("a texture result used whole".to_string());
                        }
                        let b = inst.operands.get(2).copied();
                        samples.insert(
                            t,
                            (inst.imms[0], mode, inst.operands[0], inst.operands[1], b),
                        );
                    }
                }
                Opcode::SplitVector => {}
                _ => {
                    if inst
                        .used_temps()
                        .any(|t| samples.contains_key(&t) && inst.op != Opcode::SplitVector)
                    {
                        refused.push("a texture result used whole".to_string());
                    }
                }
            }
        }
    }
    if !refused.is_empty() {
        refused.sort();
        refused.dedup();
        return Err(Unsupported(refused));
    }
    let mut hidden = Vec::new();
    for block in func.blocks.iter_mut() {
        let mut out = Vec::with_capacity(block.insts.len());
        for inst in block.insts.drain(..) {
            match inst.op {
                Opcode::TextureSample => {}
                Opcode::SplitVector
                    if inst
                        .operands
                        .first()
                        .and_then(Operand::temp_id)
                        .is_some_and(|t| samples.contains_key(&t)) =>
                {
                    let (unit, mode, s, t, b) = samples[&inst.operands[0].temp_id().expect("temp")];
                    let third = b.map_or(Operand::constant(0), clean);
                    for (k, d) in inst.defs.iter().enumerate() {
                        let mut p = Inst::new(Opcode::Sel);
                        p.flags = inst.flags;
                        p.defs.push(kiln_ir::Def::new(d.temp));
                        p.operands.extend([clean(s), clean(t), third]);
                        out.push(p);
                        hidden.push(Hidden {
                            temp: d.temp,
                            unit,
                            component: k as u32,
                            mode,
                        });
                    }
                }
                _ => out.push(inst),
            }
        }
        block.insts = out;
    }
    Ok(hidden)
}

fn clean(o: Operand) -> Operand {
    Operand {
        flags: kiln_ir::OperandFlags::empty(),
        ..o
    }
}

/// Turns the placeholders of [`hide`] into `qpu_tex` after selection.
pub fn reveal(func: &mut Function, hidden: &[Hidden]) -> Result<(), Unsupported> {
    if hidden.is_empty() {
        return Ok(());
    }
    let by_temp: BTreeMap<Temp, Hidden> = hidden.iter().map(|h| (h.temp, *h)).collect();
    let mut found = 0;
    for inst in func.blocks.iter_mut().flat_map(|b| b.insts.iter_mut()) {
        if inst.op != Opcode::Sel {
            continue;
        }
        let Some(h) = inst.defs.first().and_then(|d| by_temp.get(&d.temp)) else {
            continue;
        };
        let (s, t, b) = (inst.operands[0], inst.operands[1], inst.operands[2]);
        inst.op = Opcode::Target(TargetOp(if h.mode == 0 { TEX } else { TEX_B }));
        inst.operands.clear();
        inst.operands.extend([
            Operand::constant(h.unit),
            Operand::constant(h.component),
            clean(s),
            clean(t),
        ]);
        if h.mode != 0 {
            inst.operands.extend([clean(b), Operand::constant(h.mode)]);
        }
        found += 1;
    }
    if found != hidden.len() {
        return Err(Unsupported(vec![
            "(internal) texture placeholders lost in selection".into(),
        ]));
    }
    kiln_ir::verify(func).map_err(|e| {
        Unsupported(vec![format!(
            "(internal) the texture pass broke the function: {}",
            e[0]
        )])
    })
}

/// Whether `v` is a constant operand value.
pub fn constant(v: &Value) -> Option<u32> {
    match v {
        Value::Const(c) => Some(*c),
        _ => None,
    }
}

/// Whether `inst` is a TMU lookup ([`TEX`] or [`TEX_B`]).
pub fn is_lookup(inst: &Inst) -> bool {
    matches!(inst.op, Opcode::Target(t) if t.0.unit == "tmu")
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
