//! Comparisons issued again right before each select or branch that reads them, as Mesa's
//! `ntq_emit_bcsel` emits a `bcsel`'s comparison again at the select: the emitter then sets the
//! flags from the comparison itself instead of making a boolean (two conditional moves) and
//! testing it (a third). A comparison left with no other use goes. The design is in
//! `docs/vc4.md` ("Comparisons and selects").

use kiln_ir::{Def, Function, Inst, Opcode, OperandFlags, Temp, Value};

/// See the module comment. `func` is a selected vc4 function in SSA form.
pub fn compare_at_use(func: &mut Function) {
    let mut compares: Vec<Option<Inst>> = vec![None; func.temps.len()];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        if crate::interface::is_comparison(inst.op) {
            compares[inst.defs[0].temp.index()] = Some(inst.clone());
        }
    }
    if compares.iter().all(Option::is_none) {
        return;
    }
    let compared = |t: Temp, compares: &[Option<Inst>]| compares.get(t.index())?.clone();
    for b in 0..func.blocks.len() {
        let insts = std::mem::take(&mut func.blocks[b].insts);
        let mut out = Vec::with_capacity(insts.len());
        for mut inst in insts {
            let reads_flags = matches!(inst.op, Opcode::Sel | Opcode::If);
            if reads_flags
                && let Some(t) = inst.operands[0].temp_id()
                && let Some(mut again) = compared(t, &compares)
            {
                let t2 = func.new_temp(func.temps[t.index()]);
                again.defs[0] = Def::new(t2);
                for o in again.operands.iter_mut() {
                    o.flags = OperandFlags::empty();
                }
                out.push(again);
                inst.operands[0].value = Value::Temp(t2);
                inst.operands[0].flags = OperandFlags::empty();
            }
            out.push(inst);
        }
        func.blocks[b].insts = out;
    }
    // The comparisons nothing else reads go.
    let mut used = vec![false; func.temps.len()];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        for t in inst.used_temps() {
            used[t.index()] = true;
        }
    }
    for block in func.blocks.iter_mut() {
        block
            .insts
            .retain(|i| !crate::interface::is_comparison(i.op) || used[i.defs[0].temp.index()]);
    }
    for (t, c) in compares.iter().enumerate() {
        if c.is_some() && !used[t] {
            func.temps[t] = kiln_ir::RegClass::NONE;
        }
    }
}
