//! User clip distances on a fragment shader (Mesa's `nir_lower_clip_fs`, which vc4 runs when
//! its shader key enables clip planes): the vertex stage writes `gl_ClipDistance[k]` as
//! varyings after its own, and the fragment shader reads them back and discards the fragment
//! where one is negative — vc4 has no clipping against user planes in hardware.
//!
//! The fragment shader does not name the distances, so how many there are is part of the key,
//! as in Mesa; [`discard_clipped`] adds their inputs (built-in `clip_distance`, components
//! `0..n`, slots [`CLIP_DISTANCE_SLOT`]` + k`, the slots the vertex outputs have) and the test.

use crate::interface::{Scalar, Slot, SlotKind, Stage};
use crate::lower::Lowered;
use kiln_ir::builder::Builder;
use kiln_ir::{GenericTarget, Inst, Opcode, Operand};

/// The slot of `gl_ClipDistance[0]`, input or output; component k is `+ k`.
pub const CLIP_DISTANCE_SLOT: u32 = 1110;

/// The most clip distances a shader has (`GL_MAX_CLIP_DISTANCES`' minimum).
pub const MAX_CLIP_DISTANCES: u32 = 8;

/// Makes fragment shader `lowered` discard where one of `n` interpolated clip distances is
/// negative. The test goes at the end, before the outputs (a fragment shader has no other
/// effects, so where a lane stops does not matter). Refuses a vertex shader, more than
/// [`MAX_CLIP_DISTANCES`], and a shader that reads the distances itself.
pub fn discard_clipped(lowered: &mut Lowered, n: u32) -> Result<(), String> {
    if n == 0 {
        return Ok(());
    }
    if lowered.interface.stage != Stage::Fragment {
        return Err("clip distances are discarded on in fragment shaders".into());
    }
    if n > MAX_CLIP_DISTANCES {
        return Err(format!("{n} clip distances: at most {MAX_CLIP_DISTANCES}"));
    }
    let slots = CLIP_DISTANCE_SLOT..CLIP_DISTANCE_SLOT + n;
    if lowered
        .interface
        .inputs
        .iter()
        .any(|s| slots.contains(&s.slot))
    {
        return Err("a fragment shader that reads gl_ClipDistance itself".into());
    }
    let func = &mut lowered.function;
    let last = func.blocks.len() - 1;
    let ret = match func.blocks[last].insts.last() {
        Some(i) if i.op == Opcode::Return => func.blocks[last].insts.pop(),
        _ => return Err("(internal) the function's last block does not return".into()),
    };
    // The outputs move after the test: they are written at the top level, in the last block.
    let (outputs, rest): (Vec<Inst>, Vec<Inst>) = std::mem::take(&mut func.blocks[last].insts)
        .into_iter()
        .partition(|i| i.op == Opcode::Output);
    func.blocks[last].insts = rest;
    let v1 = func.target.class(GenericTarget::V, 1);
    let mut b = Builder::new(func);
    let mut clipped: Option<Operand> = None;
    for slot in slots.clone() {
        let d = b.inst(Opcode::Input, &[slot], &[v1], [])[0];
        let negative = b.op(Opcode::Flt, v1, [Operand::temp(d), Operand::constant(0)]);
        clipped = Some(match clipped {
            None => Operand::temp(negative),
            Some(c) => Operand::temp(b.op(Opcode::Ior, v1, [c, Operand::temp(negative)])),
        });
    }
    let scope = b.begin_if(clipped.expect("n > 0"), true);
    b.push(Inst::new(Opcode::Discard));
    b.end_if(scope);
    drop(ret);
    for o in outputs {
        b.push(o);
    }
    b.ret();
    for (k, slot) in slots.enumerate() {
        lowered.interface.inputs.push(Slot {
            slot,
            kind: SlotKind::BuiltIn {
                name: "clip_distance".into(),
                component: k as u32,
            },
            scalar: Some(Scalar::Float),
        });
    }
    Ok(())
}
