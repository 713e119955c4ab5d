//! Comparisons issued again right before each select or branch that reads them, as Mesa's
//! `ntq_emit_bcsel` emits a `bcsel`'s comparison again at the select: the emitter then sets the
//! flags from the comparison itself instead of making a boolean (two conditional moves) and
//! testing it (a third). A comparison left with no other use goes. The design is in
//! `docs/vc4.md` ("Comparisons and selects").

use kiln_ir::{Def, Function, Inst, Opcode, OperandFlags, Temp, Value};

/// See the module comment. `func` is a selected vc4 function in SSA form.
pub fn compare_at_use(func: &mut Function) {
    let n = func.temps.len();
    // The temp a select or branch reads as its condition.
    let condition = |inst: &Inst| {
        matches!(inst.op, Opcode::Sel | Opcode::If)
            .then(|| inst.operands[0].temp_id())
            .flatten()
    };
    let mut read = vec![false; n];
    for t in func
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .filter_map(condition)
    {
        read[t.index()] = true;
    }
    // The comparisons; those a condition reads, copied once each: `compares[at[t]]`.
    const NONE: u32 = u32::MAX;
    let mut comparison = vec![false; n];
    let mut at = vec![NONE; n];
    let mut compares: Vec<Inst> = Vec::new();
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        if crate::interface::is_comparison(inst.op) {
            let t = inst.defs[0].temp.index();
            comparison[t] = true;
            if read[t] {
                at[t] = compares.len() as u32;
                compares.push(inst.clone());
            }
        }
    }
    if !comparison.contains(&true) {
        return;
    }
    let compared = |t: Temp| {
        at.get(t.index())
            .filter(|&&k| k != NONE)
            .map(|&k| k as usize)
    };
    for b in 0..func.blocks.len() {
        let again = func.blocks[b]
            .insts
            .iter()
            .filter(|i| condition(i).and_then(compared).is_some())
            .count();
        if again == 0 {
            continue;
        }
        let insts = std::mem::take(&mut func.blocks[b].insts);
        let mut out = Vec::with_capacity(insts.len() + again);
        for mut inst in insts {
            if let Some(t) = condition(&inst)
                && let Some(k) = compared(t)
            {
                let mut again = compares[k].clone();
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
    for (t, &c) in comparison.iter().enumerate() {
        if c && !used[t] {
            func.temps[t] = kiln_ir::RegClass::NONE;
        }
    }
}
