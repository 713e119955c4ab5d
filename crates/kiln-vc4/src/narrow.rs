//! Class narrowing for the QPU (seed 002; Mesa's `vc4_register_allocate.c`): after instruction
//! selection, every value of the `q` file gets the subset of the registers its definition and
//! the instructions it lives across allow — r4 only for an r4 writer's own result, no
//! accumulator across a thread switch. The design is in `docs/vc4.md` ("Class narrowing").

use crate::ops::{Op, Resource};
use crate::target::Q;
use kiln_analysis::live_set::LiveList;
use kiln_analysis::{Cfg, LiveSet, live_sets, wide_liveness};
use kiln_ir::{Function, Inst, Opcode, RegClass, Temp};

const R4: u8 = 1;
const ACC: u8 = 2;

/// Whether `inst` writes r4.
pub fn writes_r4(inst: &Inst) -> bool {
    Op::of_opcode(inst.op).is_some_and(|op| op.facts().writes(Resource::R4))
}

/// Narrows the class of every value of `func` (a vc4 function, after selection): r4 for the
/// values the r4 rule allows, no thread switches. A function whose blocks do not form a CFG is
/// left as it is (the verifier says why).
pub fn narrow_classes(func: &mut Function) {
    narrow_classes_with(func, true, false);
}

/// [`narrow_classes`] with the choices of the interface pass: `r4` — whether any value may sit
/// in r4 (the emitter moves every r4 result out, so it passes false); `threaded` — whether
/// lookups switch threads, taking the accumulators from the values live across them.
pub fn narrow_classes_with(func: &mut Function, r4: bool, threaded: bool) {
    let Ok(cfg) = Cfg::compute(func) else { return };
    let lv = live_sets(func, &cfg);
    narrow_classes_live(func, &cfg, &lv.live_out, &lv.loop_leaving, r4, threaded);
}

/// [`narrow_classes_with`] on `func`'s CFG and the live-out and loop-leaving sets of its
/// liveness, computed by the pass before (classes change here, not instructions or blocks).
pub fn narrow_classes_live(
    func: &mut Function,
    cfg: &Cfg,
    live_out: &[LiveSet],
    loop_leaving: &[LiveSet],
    r4: bool,
    threaded: bool,
) {
    let n = func.temps.len();
    // Bit R4: the value may sit in r4; bit ACC: in r0–r3.
    let mut bits = vec![if r4 { R4 | ACC } else { ACC }; n];
    // r4 for r4 writers' results not live across another (the walk takes r4 away only).
    if r4 {
        let mut live = vec![false; n];
        let mut list: Vec<Temp> = Vec::new();
        for b in func.block_ids() {
            list.clear();
            for t in live_out[b.index()].iter() {
                live[t.index()] = true;
                list.push(t);
            }
            for inst in func.block(b).insts.iter().rev() {
                let r4 = writes_r4(inst);
                for d in &inst.defs {
                    live[d.temp.index()] = false;
                    if !r4 {
                        bits[d.temp.index()] &= !R4;
                    }
                }
                if r4 {
                    list.retain(|t| live[t.index()]);
                    for &t in &list {
                        bits[t.index()] &= !R4;
                    }
                }
                for t in inst.used_temps() {
                    if !live[t.index()] {
                        live[t.index()] = true;
                        list.push(t);
                    }
                }
            }
            for &t in &list {
                live[t.index()] = false;
            }
        }
    }
    if threaded {
        let wide = wide_liveness(func, cfg);
        let switches_in: Vec<bool> = func
            .blocks
            .iter()
            .map(|b| crate::texture::requests(&b.insts).contains(&true))
            .collect();
        for m in func.block_ids() {
            for inst in func.block(m).insts.iter().filter(|i| i.op == Opcode::Phi) {
                for &p in &cfg.logical.preds[m.index()] {
                    if cfg.linear.preds[m.index()].contains(&p) {
                        continue;
                    }
                    // The linear path from p to m: the blocks after p, from the header of the
                    // outermost loop the edge leaves; a back edge (a divergent `continue`)
                    // runs the rest of the loop body first.
                    let path = if m <= p {
                        let exit = cfg
                            .loops
                            .iter()
                            .find(|l| l.header == m)
                            .map_or(p.index() + 1, |l| l.exit.index());
                        p.index() + 1..exit
                    } else {
                        let from = cfg
                            .enclosing_loops(p)
                            .filter(|&l| !cfg.loops[l].contains(m))
                            .map(|l| cfg.loops[l].header.index())
                            .min()
                            .unwrap_or(p.index() + 1);
                        from..m.index()
                    };
                    if switches_in[path].contains(&true) {
                        for d in &inst.defs {
                            bits[d.temp.index()] &= !(R4 | ACC);
                        }
                    }
                }
            }
        }
        // What is live (logically or along the linear CFG) at each switch, by one backward walk
        // of each block that has one: O(1) per definition and use, the live list read at a
        // switch.
        let mut live = LiveList::new(n);
        for b in func.block_ids() {
            let insts = &func.block(b).insts;
            if !switches_in[b.index()] {
                continue;
            }
            let switches = crate::texture::requests(insts);
            for l in cfg.enclosing_loops(b) {
                for t in loop_leaving[l].iter() {
                    bits[t.index()] &= !(R4 | ACC);
                }
            }
            for t in live_out[b.index()].iter().chain(wide[b.index()].iter()) {
                live.enter(t.0, 0);
            }
            for (inst, &switch) in insts.iter().zip(&switches).rev() {
                for d in &inst.defs {
                    live.leave(d.temp.0, 0);
                }
                if switch {
                    for &t in live.list() {
                        bits[t as usize] &= !(R4 | ACC);
                    }
                }
                if !inst.op.is_phi() {
                    for t in inst.used_temps() {
                        live.enter(t.0, 0);
                    }
                }
            }
            live.clear();
        }
    }
    let target = func.target.clone();
    let class = |name: &str| RegClass {
        subset: target.subset_by_name(name),
        ..target.class(Q, 1)
    };
    let (any, no_r4, files) = (class("any"), class("a_or_b_or_acc"), class("a_or_b"));
    let required = required_subsets(func);
    for (t, c) in func.temps.iter_mut().enumerate() {
        if !c.is_none() && c.file == Q {
            // No subset is r4 with A and B but no r0–r3: such a value keeps to A and B.
            let base = match (bits[t] & R4 != 0, bits[t] & ACC != 0) {
                (true, true) => any,
                (false, true) => no_r4,
                (_, false) => files,
            };
            *c = match required.get(t).copied().flatten() {
                Some(name) => target.intersect_classes(base, class(name)).unwrap_or(base),
                None => base,
            };
        }
    }
}

/// Per temp, the subset a target opcode requires of it as an operand or definition (the
/// derivatives' scratch accumulator: `r0_r3`).
pub fn required_subsets(func: &Function) -> Vec<Option<&'static str>> {
    let mut req = vec![None; func.temps.len()];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        let Opcode::Target(t) = inst.op else { continue };
        let info = t.info();
        let defs = inst.defs.iter().map(|d| d.temp);
        let ops = inst.operands.iter().map(|o| o.temp_id());
        for (temp, c) in defs
            .map(Some)
            .zip(info.def_classes.unwrap_or(&[]))
            .chain(ops.zip(info.operand_classes.unwrap_or(&[])))
        {
            if let (Some(temp), Some(name)) = (temp, c.subset)
                && let Some(slot) = req.get_mut(temp.index())
            {
                *slot = Some(name);
            }
        }
    }
    req
}
