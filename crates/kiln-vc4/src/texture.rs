//! Texture lookups through the TMU (Mesa's `ntq_emit_tex`): their selection — each component a
//! `texture_sample`'s split takes becomes one [`Op::Tex`] (or [`Op::TexB`], with a bias or an
//! explicit level) — and the facts the emitter and class narrowing share about them: which
//! lookups make a TMU request (in a threaded shader, a thread switch) and which read the texel
//! already in r4. The design is in `docs/vc4.md` ("The emitter": textures).

use crate::ops::{Op, Unit};
use kiln_ir::{Def, Function, Inst, Opcode, Operand, OperandFlags, Temp, Value};
use std::collections::BTreeMap;

/// What the TMU path cannot do in `func`: non-2D samplers, explicit gradients, texel fetches,
/// and a texture result used other than through its split into components.
pub fn refusals(func: &Function) -> Vec<String> {
    let mut refused = Vec::new();
    let mut uses: BTreeMap<Temp, usize> = BTreeMap::new();
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        for t in inst.used_temps() {
            *uses.entry(t).or_default() += 1;
        }
    }
    let mut samples = Vec::new();
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
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

/// Replaces each `texture_sample U, s, t[, b]` and its split by one lookup per component the
/// function reads ([`Op::Tex`] `U, k, s, t` or [`Op::TexB`] `U, k, s, t, b, mode`), in the
/// split's place.
/// `func` has no [`refusals`].
pub fn select_lookups(func: &mut Function) {
    // unit, mode, s, t, bias or level
    type Sample = (u32, u32, Operand, Operand, Option<Operand>);
    let mut samples: BTreeMap<Temp, Sample> = BTreeMap::new();
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        if inst.op == Opcode::TextureSample {
            let mode = inst.imms.get(1).copied().unwrap_or(0);
            samples.insert(
                inst.defs[0].temp,
                (
                    inst.imms[0],
                    mode,
                    inst.operands[0],
                    inst.operands[1],
                    inst.operands.get(2).copied(),
                ),
            );
        }
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
    for block in func.blocks.iter_mut() {
        let mut out = Vec::with_capacity(block.insts.len());
        for inst in block.insts.drain(..) {
            let sample = match inst.op {
                Opcode::TextureSample => continue,
                Opcode::SplitVector => inst.operands[0]
                    .temp_id()
                    .and_then(|t| samples.get(&t).copied()),
                _ => None,
            };
            let Some((unit, mode, s, t, b)) = sample else {
                out.push(inst);
                continue;
            };
            for (k, d) in inst.defs.iter().enumerate() {
                if !used[d.temp.index()] {
                    continue;
                }
                let mut lookup = Inst::new(if mode == 0 { Op::Tex } else { Op::TexB }.opcode());
                lookup.flags = inst.flags;
                lookup.defs.push(Def::new(d.temp));
                lookup.operands.extend([
                    Operand::constant(unit),
                    Operand::constant(k as u32),
                    clean(s),
                    clean(t),
                ]);
                if mode != 0 {
                    let b = b.map_or(Operand::constant(0), clean);
                    lookup.operands.extend([b, Operand::constant(mode)]);
                }
                out.push(lookup);
            }
        }
        block.insts = out;
    }
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

/// Whether `inst` is a TMU lookup ([`Op::Tex`] or [`Op::TexB`]).
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
