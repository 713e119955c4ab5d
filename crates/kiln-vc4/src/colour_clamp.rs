//! Clamps to [0, 1] dropped before the colour outputs of a fragment shader. The tile buffer's
//! colour is written by the mul unit's colour pack, which converts a float to a byte saturating
//! to [0, 1], a NaN to 0 (reference guide, "Mul unit pack" with pm = 1;
//! `kiln_qpu::sim::alu::pack_mul`, with which the harness converts the interpreter's outputs
//! too). So a colour output may read through `fmax x, a` with a ≤ 0 — a NaN x gives a, which
//! packs to 0 as the NaN does — and through `fmin x, b` with b ≥ 1 where x is never NaN (a NaN
//! would give b, which packs to 255). The `clamp(colour, 0, 1)` a shader writes last,
//! `fmin (fmax c, 0), 1.0`, then costs nothing, and an output that was a clamped product packs
//! the product itself (`emit`). `fmax (fmin c, 1.0), 0` keeps its `fmin`: c may be NaN.
//! Mesa's vc4 keeps such clamps (`ntq_emit_pack_unorm_4x8` folds the pack into the instruction
//! before it, not the saturation).
//!
//! An output reads through a clamp only where the clamp then goes: every reader of the value
//! it writes is a colour output, and every clamp further in was read only by the one before it
//! (reading the unclamped value beside a clamp that stays would only keep both live).

use crate::interface::{OutputKind, ShaderInfo};
use kiln_ir::{Function, Inst, Opcode, Temp, Value};
use smallvec::SmallVec;

/// Drops the clamps before `func`'s colour outputs (a generic function, before selection);
/// returns how many operations went.
pub fn drop_colour_clamps(func: &mut Function, info: &ShaderInfo) -> usize {
    let colour = |inst: &Inst| {
        inst.op == Opcode::Output
            && matches!(info.outputs.get(&inst.imms[0]), Some(OutputKind::Color(_)))
    };
    // Most shaders write no clamp into a colour: then nothing is looked at further.
    let outputs: SmallVec<[Temp; 4]> = func
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .filter(|i| colour(i))
        .filter_map(|i| i.operands[0].temp_id())
        .collect();
    let clamped = !outputs.is_empty()
        && func.blocks.iter().flat_map(|b| &b.insts).any(|i| {
            matches!(i.op, Opcode::Fmin | Opcode::Fmax)
                && i.defs.iter().any(|d| outputs.contains(&d.temp))
        });
    if !clamped {
        return 0;
    }
    // Per temp, its definition, its readers and the colour outputs among them.
    let mut def: Vec<Option<(usize, usize)>> = vec![None; func.temps.len()];
    let mut uses = crate::interface::use_counts(func);
    let mut colour_reads = vec![0u32; func.temps.len()];
    for (b, block) in func.blocks.iter().enumerate() {
        for (i, inst) in block.insts.iter().enumerate() {
            for d in &inst.defs {
                def[d.temp.index()] = Some((b, i));
            }
            if colour(inst) {
                for t in inst.used_temps() {
                    colour_reads[t.index()] += 1;
                }
            }
        }
    }
    let mut dead: Vec<(usize, usize)> = Vec::new();
    let mut released = Vec::new();
    for b in 0..func.blocks.len() {
        for i in 0..func.blocks[b].insts.len() {
            let out = &func.blocks[b].insts[i];
            if !colour(out) {
                continue;
            }
            let read = out.operands[0].value;
            let Value::Temp(t) = read else { continue };
            if uses[t.index()] != colour_reads[t.index()] {
                continue;
            }
            let mut v = read;
            while let Some(x) = through(func, &def, v) {
                v = x;
                if !matches!(v, Value::Temp(t) if uses[t.index()] == 1) {
                    break;
                }
            }
            if v == read {
                continue;
            }
            colour_reads[t.index()] -= 1;
            func.blocks[b].insts[i].operands[0].value = v;
            if let Value::Temp(t) = v {
                uses[t.index()] += 1;
            }
            // The clamps the output no longer reads, and theirs, go when nothing reads them.
            released.push(read);
            while let Some(value) = released.pop() {
                let Value::Temp(t) = value else {
                    continue;
                };
                uses[t.index()] -= 1;
                let Some((db, di)) = def[t.index()] else {
                    continue;
                };
                let d = &func.blocks[db].insts[di];
                if uses[t.index()] == 0 && clamp(d).is_some() {
                    dead.push((db, di));
                    released.extend(d.operands.iter().map(|o| o.value));
                }
            }
        }
    }
    let dropped = dead.len();
    dead.sort_unstable();
    for (b, block) in func.blocks.iter_mut().enumerate() {
        let mut gone = dead.iter().filter(|&&(db, _)| db == b).map(|&(_, i)| i);
        let mut next = gone.next();
        let mut i = 0;
        block.insts.retain(|_| {
            let keep = next != Some(i);
            if !keep {
                next = gone.next();
            }
            i += 1;
            keep
        });
    }
    dropped
}

/// The value `v` packs as, one clamp further in: the operand of an `fmax` with a constant
/// ≤ 0, or of an `fmin` with a constant ≥ 1 whose operand is never NaN.
fn through(func: &Function, def: &[Option<(usize, usize)>], v: Value) -> Option<Value> {
    let d = defining(func, def, v)?;
    let (x, c) = clamp(d)?;
    let drops = match d.op {
        Opcode::Fmax => c <= 0.0,
        _ => c >= 1.0 && never_nan(func, def, x),
    };
    drops.then_some(x)
}

/// Whether `v` is never NaN as far as its definition shows: a constant that is not, or a
/// `fmin` / `fmax` with one (IEEE minNum / maxNum return it for a NaN operand).
fn never_nan(func: &Function, def: &[Option<(usize, usize)>], v: Value) -> bool {
    match v {
        Value::Const(bits) => !f32::from_bits(bits).is_nan(),
        _ => defining(func, def, v).and_then(clamp).is_some(),
    }
}

fn defining<'f>(func: &'f Function, def: &[Option<(usize, usize)>], v: Value) -> Option<&'f Inst> {
    let Value::Temp(t) = v else { return None };
    let (b, i) = (*def.get(t.index())?)?;
    Some(&func.blocks[b].insts[i])
}

/// An `fmin` or `fmax` of a value and a constant that is not NaN (either way round): the
/// value and the constant.
fn clamp(inst: &Inst) -> Option<(Value, f32)> {
    if !matches!(inst.op, Opcode::Fmin | Opcode::Fmax)
        || inst.operands.len() != 2
        || inst.defs.len() != 1
    {
        return None;
    }
    let constant = |v: Value| match v {
        Value::Const(bits) => Some(f32::from_bits(bits)).filter(|c| !c.is_nan()),
        _ => None,
    };
    let (a, b) = (inst.operands[0].value, inst.operands[1].value);
    match (constant(a), constant(b)) {
        (_, Some(c)) => Some((a, c)),
        (Some(c), None) => Some((b, c)),
        (None, None) => None,
    }
}
