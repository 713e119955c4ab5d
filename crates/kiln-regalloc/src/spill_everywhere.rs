//! Chaitin's spill-everywhere rewrite, the spilling of the graph-colouring allocator: every
//! value the colouring could not colour is stored right after its definition and reloaded into
//! a fresh temp before the instructions that read it (or recomputed, when it can be), and the
//! graph is built and coloured again. The design is in `docs/regalloc.md` ("Spilling
//! everywhere").

use crate::spill::{SpillStats, rematerializable};

/// A reload serves the reads of its value in the same block up to this many instructions after
/// the last one (the operands of one instruction always share one reload). A block runs with one
/// set of active lanes, so any reuse inside it is sound; the reach only bounds how long the fresh
/// temp lives. The driver uses it in the first round of spilling only. Measured on the corpus
/// at `v=24,s=8` (reach in every round): 0 (Chaitin's spill everywhere) 842,792 instructions,
/// 4: 835,999, 8: 835,370; from 12 on, reloads live long enough that some shaders stay
/// uncolourable and fall back to the SSA spiller. In the first round only, 8 gives 835,669 and
/// 4 of 5,000 generated programs fall back (32 when every round reuses).
pub const RELOAD_REACH: usize = 8;
use kiln_analysis::Liveness;
use kiln_ir::{Cfg, Def, Function, Inst, Opcode, Operand, Temp, Value};

/// What the rounds of spilling share.
#[derive(Clone, Debug, Default)]
pub struct Rounds {
    /// `versions[t]`: the temp of the input program `t` is a copy of.
    pub versions: Vec<Temp>,
    /// Temps spilling cannot help: the fresh copies, and the values already spilled.
    pub unspillable: Vec<bool>,
    /// The next free spill slot.
    pub next_slot: u32,
}

impl Rounds {
    /// Before any spilling: every temp of `func` is its own version.
    pub fn new(func: &Function) -> Rounds {
        Rounds {
            versions: (0..func.temps.len()).map(Temp::new).collect(),
            unspillable: vec![false; func.temps.len()],
            next_slot: 0,
        }
    }
}

/// Spills `temps` of `func` everywhere, a reload serving the reads within `reach` instructions
/// of its block; `rounds` records the fresh temps as versions of the values they copy and marks
/// them, and the spilled temps, unspillable.
pub fn spill_everywhere(
    func: &mut Function,
    cfg: &Cfg,
    lv: &Liveness,
    temps: &[Temp],
    rounds: &mut Rounds,
    reach: usize,
) -> SpillStats {
    let Rounds {
        versions,
        unspillable,
        next_slot,
    } = rounds;
    let n = func.temps.len();
    let mut stats = SpillStats::default();
    let mut spilled = vec![false; n];
    for &t in temps {
        spilled[t.index()] = true;
    }
    // The definition of every spilled temp, and whether it is recomputed instead.
    let mut def: Vec<Option<Inst>> = vec![None; n];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        for d in inst.defs.iter().filter(|d| spilled[d.temp.index()]) {
            def[d.temp.index()] = Some(inst.clone());
        }
    }
    let remat: Vec<bool> = (0..n)
        .map(|t| spilled[t] && def[t].as_ref().is_some_and(rematerializable))
        .collect();
    let mut slot: Vec<Option<u32>> = vec![None; n];
    for &t in temps {
        if !remat[t.index()] {
            slot[t.index()] = Some(*next_slot);
            *next_slot += 1;
            stats.slots += 1;
        }
    }
    let linear = |t: Temp| lv.linear[t.index()];
    // A fresh copy of `t` (reload or recomputation) for one reading instruction.
    let mut fresh = |func: &mut Function, t: Temp, stats: &mut SpillStats| -> (Temp, Inst) {
        let new = func.new_temp(func.class(t));
        versions.push(versions[t.index()]);
        unspillable.push(true);
        let inst = match (&def[t.index()], slot[t.index()]) {
            (Some(d), None) => {
                let mut inst = d.clone();
                inst.defs[0] = Def::new(new);
                for op in inst.operands.iter_mut() {
                    op.flags = kiln_ir::OperandFlags::empty();
                }
                stats.remats += 1;
                inst
            }
            (_, slot) => {
                let mut inst = Inst::new(Opcode::Reload);
                inst.imms.push(slot.expect("a spilled value has a slot"));
                inst.defs.push(Def::new(new));
                inst.flags.all_lanes = linear(t);
                stats.reloads += 1;
                inst
            }
        };
        (new, inst)
    };
    let spill_of = |t: Temp| {
        let mut inst = Inst::new(Opcode::Spill);
        inst.imms
            .push(slot[t.index()].expect("a spilled value has a slot"));
        inst.operands.push(Operand::temp(t));
        inst.flags.all_lanes = linear(t);
        inst
    };
    // Phi operands: reloads at the end of the predecessor they come from.
    let mut end_reloads: Vec<Vec<Inst>> = vec![Vec::new(); func.blocks.len()];
    for b in func.block_ids().collect::<Vec<_>>() {
        for k in 0..func.block(b).phi_count() {
            let inst = &func.block(b).insts[k];
            let preds = if inst.op == Opcode::LinearPhi {
                &cfg.linear.preds[b.index()]
            } else {
                &cfg.logical.preds[b.index()]
            };
            let reads: Vec<(usize, Temp)> = inst
                .operands
                .iter()
                .enumerate()
                .filter_map(|(j, o)| o.temp_id().filter(|t| spilled[t.index()]).map(|t| (j, t)))
                .collect();
            for (j, t) in reads {
                let (new, reload) = fresh(func, t, &mut stats);
                end_reloads[preds[j].index()].push(reload);
                func.block_mut(b).insts[k].operands[j].value = Value::Temp(new);
            }
        }
    }
    for b in func.block_ids().collect::<Vec<_>>() {
        let insts = std::mem::take(&mut func.block_mut(b).insts);
        let nphi = insts.iter().take_while(|i| i.op.is_phi()).count();
        let mut out: Vec<Inst> = Vec::with_capacity(insts.len() + 8);
        let mut ends = std::mem::take(&mut end_reloads[b.index()]);
        let mut insts = insts.into_iter();
        let mut stores = Vec::new();
        for inst in insts.by_ref().take(nphi) {
            for d in inst.defs.iter().filter(|d| slot[d.temp.index()].is_some()) {
                stores.push(spill_of(d.temp));
                stats.spills += 1;
            }
            out.push(inst);
        }
        out.append(&mut stores);
        // Per spilled value: its latest reload in this block and where it was last read.
        let mut recent: Vec<(Temp, Temp, usize)> = Vec::new();
        for mut inst in insts {
            if inst.defs.len() == 1 && remat[inst.defs[0].temp.index()] {
                continue;
            }
            if inst.op.is_terminator() {
                out.append(&mut ends);
            }
            for j in 0..inst.operands.len() {
                let Some(t) = inst.operands[j].temp_id().filter(|t| spilled[t.index()]) else {
                    continue;
                };
                let here = out.len();
                let new = match recent.iter_mut().find(|(old, _, _)| *old == t) {
                    Some((_, new, at)) if here - *at <= reach => {
                        *at = here;
                        *new
                    }
                    found => {
                        let (new, reload) = fresh(func, t, &mut stats);
                        out.push(reload);
                        let at = out.len();
                        match found {
                            Some(r) => *r = (t, new, at),
                            None => recent.push((t, new, at)),
                        }
                        new
                    }
                };
                inst.operands[j].value = Value::Temp(new);
            }
            let stores: Vec<Inst> = inst
                .defs
                .iter()
                .filter(|d| slot[d.temp.index()].is_some())
                .map(|d| spill_of(d.temp))
                .collect();
            stats.spills += stores.len() as u32;
            out.push(inst);
            out.extend(stores);
        }
        out.append(&mut ends);
        func.block_mut(b).insts = out;
    }
    for &t in temps {
        unspillable[t.index()] = true;
    }
    stats
}
