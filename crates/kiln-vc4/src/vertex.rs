//! Vertex-shader outputs in Mesa's VPM layout (`emit_vert_end` in `vc4_program.c`), written as
//! generic IR before instruction selection, so that the interpreter computes exactly the rows
//! the QPU must write; the viewport figures are driver uniforms ([`VIEWPORT_X_SCALE`] …). The
//! design is in `docs/vc4.md` ("Vertex outputs in Mesa's VPM layout").

use crate::interface::{InputKind, OutputKind, ShaderInfo, Stage};
use crate::isel::Unsupported;
use kiln_ir::{Def, Function, GenericTarget, Inst, Opcode, Operand};
use std::collections::BTreeMap;

/// Uniform slots the driver fills (Mesa `QUNIFORM_VIEWPORT_X_SCALE`, `_Y_SCALE`,
/// `QUNIFORM_VIEWPORT_Z_SCALE`, `_Z_OFFSET`); user uniform words are far below.
pub const VIEWPORT_X_SCALE: u32 = 0xffff_0000;
pub const VIEWPORT_Y_SCALE: u32 = 0xffff_0001;
pub const VIEWPORT_Z_SCALE: u32 = 0xffff_0002;
pub const VIEWPORT_Z_OFFSET: u32 = 0xffff_0003;
/// The viewport's y scale negated, for a position whose y the shader negates (the y flip):
/// the driver writes `−y scale` in its place, so the flip costs no instruction.
pub const VIEWPORT_Y_SCALE_NEGATED: u32 = 0xffff_0004;
/// First slot of the rewritten outputs (VPM row k is slot `ROW0 + k`).
pub const ROW0: u32 = 0xfff0_0000;

/// A vertex shader's outputs, from the interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct VertexOutputs {
    position: [Option<u32>; 4],
    point_size: Option<u32>,
    /// (location, component) → slot.
    varyings: BTreeMap<(u32, u32), u32>,
    /// Clip distance k → slot.
    clip_distances: BTreeMap<u32, u32>,
}

/// Rewrites the outputs of a generic vertex shader into Mesa's VPM rows; returns the shader
/// info of the rewritten function (inputs are attributes, outputs raw rows). Refuses, changing
/// nothing, what it cannot do.
pub fn lower_vertex_outputs(
    func: &mut Function,
    info: &ShaderInfo,
) -> Result<ShaderInfo, Unsupported> {
    let mut refused: Vec<String> = Vec::new();
    let mut outs = VertexOutputs::default();
    for (&slot, kind) in &info.outputs {
        match kind {
            OutputKind::Position(c @ 0..4) => outs.position[*c as usize] = Some(slot),
            OutputKind::PointSize => outs.point_size = Some(slot),
            OutputKind::Varying(l, c) => {
                outs.varyings.insert((*l, *c), slot);
            }
            OutputKind::ClipDistance(k) => {
                outs.clip_distances.insert(*k, slot);
            }
            OutputKind::Unsupported(what) => refused.push(format!("output {what}")),
            other => refused.push(format!("vertex output {other:?}")),
        }
    }
    if func.target.name() != "generic" {
        refused.push("vertex outputs of a function already selected".into());
    }
    for (slot, kind) in &info.inputs {
        match kind {
            InputKind::Attribute | InputKind::IndexAttribute { .. } => {}
            InputKind::Unsupported(what) => refused.push(format!("input {what}")),
            _ => refused.push(format!("input slot {slot} of a vertex shader")),
        }
    }
    if outs.position.iter().any(Option::is_none) {
        refused.push("a vertex shader without a full position".into());
    }
    let last = func.blocks.len() - 1;
    if func
        .blocks
        .iter()
        .take(last)
        .flat_map(|b| &b.insts)
        .any(|i| i.op == Opcode::Output)
    {
        refused.push("outputs written inside control flow".into());
    }
    if !refused.is_empty() {
        refused.sort();
        refused.dedup();
        return Err(Unsupported(refused));
    }

    // The last value written to each slot.
    let mut value: BTreeMap<u32, Operand> = BTreeMap::new();
    let insts = &mut func.blocks[last].insts;
    let term = insts.pop();
    insts.retain(|i| {
        if i.op == Opcode::Output {
            value.insert(i.imms[0], i.operands[0]);
            false
        } else {
            true
        }
    });
    let v1 = func.target.class(GenericTarget::V, 1);
    let s1 = func.target.class(GenericTarget::S, 1);
    let mut new = Vec::new();
    let op = |func: &mut Function, new: &mut Vec<Inst>, code: Opcode, args: &[Operand]| {
        let t = func.new_temp(v1);
        let mut i = Inst::new(code);
        i.defs.push(Def::new(t));
        i.operands.extend_from_slice(args);
        new.push(i);
        Operand::temp(t)
    };
    let uniform = |func: &mut Function, new: &mut Vec<Inst>, slot: u32| {
        let t = func.new_temp(s1);
        let mut i = Inst::new(Opcode::Uniform);
        i.imms.push(slot);
        i.defs.push(Def::new(t));
        new.push(i);
        Operand::temp(t)
    };
    let pos = |k: usize| {
        outs.position[k]
            .and_then(|s| value.get(&s).copied())
            .unwrap_or(Operand::constant(0))
    };
    let (x, y, z, w) = (pos(0), pos(1), pos(2), pos(3));
    // A position whose y is negated (`gl_Position.y = -y`, the y flip every WGSL vertex shader
    // translated from GLSL ends with) is scaled by the negated y scale instead.
    let (y, ys_slot) = match negated(func, last, y) {
        Some(t) => (t, VIEWPORT_Y_SCALE_NEGATED),
        None => (y, VIEWPORT_Y_SCALE),
    };
    let rcp_w = op(func, &mut new, Opcode::Frcp, &[w]);
    let xs_scale = uniform(func, &mut new, VIEWPORT_X_SCALE);
    let ys_scale = uniform(func, &mut new, ys_slot);
    let zs_scale = uniform(func, &mut new, VIEWPORT_Z_SCALE);
    let zs_offset = uniform(func, &mut new, VIEWPORT_Z_OFFSET);
    let xw = op(func, &mut new, Opcode::Fmul, &[x, rcp_w]);
    let xs = op(func, &mut new, Opcode::Fmul, &[xw, xs_scale]);
    let yw = op(func, &mut new, Opcode::Fmul, &[y, rcp_w]);
    let ys = op(func, &mut new, Opcode::Fmul, &[yw, ys_scale]);
    let xi = op(func, &mut new, Opcode::F2i, &[xs]);
    let yi = op(func, &mut new, Opcode::F2i, &[ys]);
    // Xs in the low half, Ys in the high half.
    let sixteen = Operand::constant(16);
    let xy = op(func, &mut new, Opcode::Bfi, &[xi, yi, sixteen, sixteen]);
    let zw = op(func, &mut new, Opcode::Fmul, &[z, rcp_w]);
    let zsc = op(func, &mut new, Opcode::Fmul, &[zw, zs_scale]);
    let zs = op(func, &mut new, Opcode::Fadd, &[zsc, zs_offset]);
    let mut rows = vec![xy, zs, rcp_w];
    if let Some(s) = outs.point_size {
        rows.push(value.get(&s).copied().unwrap_or(Operand::constant(0)));
    }
    rows.extend(
        outs.varyings
            .values()
            .chain(outs.clip_distances.values())
            .map(|s| value.get(s).copied().unwrap_or(Operand::constant(0))),
    );
    let mut outputs = BTreeMap::new();
    for (k, r) in rows.into_iter().enumerate() {
        let mut i = Inst::new(Opcode::Output);
        i.imms.push(ROW0 + k as u32);
        i.operands.push(r);
        new.push(i);
        outputs.insert(ROW0 + k as u32, OutputKind::Raw);
    }
    let insts = &mut func.blocks[last].insts;
    insts.extend(new);
    insts.extend(term);
    kiln_ir::verify(func).map_err(|e| {
        Unsupported(vec![format!(
            "(internal) the vertex output pass broke the function: {}",
            e[0]
        )])
    })?;
    Ok(ShaderInfo {
        stage: Stage::Vertex,
        inputs: info.inputs.clone(),
        outputs,
    })
}

/// The operand `y` negates when it is a temp the last block defines as `fneg t`.
fn negated(func: &Function, last: usize, y: Operand) -> Option<Operand> {
    let t = y.temp_id()?;
    func.blocks[last]
        .insts
        .iter()
        .find(|i| i.op == Opcode::Fneg && i.defs.first().is_some_and(|d| d.temp == t))
        .map(|i| Operand::from(i.operands[0].value))
}
