#![allow(dead_code)] // each test binary uses part of the oracle
//! The path definition of liveness, shared by the liveness and demand tests: for every use,
//! walk backwards over the predecessors (of the temp's CFG) until the definition, marking
//! blocks live-in and live-out (Appel, "liveness by use").

use kiln_analysis::Cfg;
use kiln_ir::{Block, Function, Opcode, Temp};
use std::collections::BTreeSet;

pub type Sets = Vec<BTreeSet<u32>>;

/// Live-in and live-out per block by the path definition, and per loop the temps leaving it
/// (seed 003), from the path sets.
pub fn oracle(func: &Function, cfg: &Cfg) -> (Sets, Sets, Sets) {
    let n = func.blocks.len();
    let linear = func.linear_temps();
    let mut def_block = vec![usize::MAX; func.temps.len()];
    for b in 0..n {
        for i in &func.blocks[b].insts {
            for d in &i.defs {
                def_block[d.temp.index()] = b;
            }
        }
    }
    let (mut live_in, mut live_out): (Sets, Sets) =
        (vec![BTreeSet::new(); n], vec![BTreeSet::new(); n]);
    let mark_out = |t: u32, start: usize, live_in: &mut Sets, live_out: &mut Sets| {
        let preds = if linear[t as usize] {
            &cfg.linear.preds
        } else {
            &cfg.logical.preds
        };
        let mut stack = vec![start];
        while let Some(b) = stack.pop() {
            if !live_out[b].insert(t) || def_block[t as usize] == b {
                continue;
            }
            live_in[b].insert(t);
            stack.extend(preds[b].iter().map(|p| p.index()));
        }
    };
    for b in 0..n {
        for (k, inst) in func.blocks[b].insts.iter().enumerate() {
            if inst.op.is_phi() {
                let preds = if inst.op == Opcode::Phi {
                    &cfg.logical.preds[b]
                } else {
                    &cfg.linear.preds[b]
                };
                for (op, p) in inst.operands.iter().zip(preds) {
                    if let Some(t) = op.temp_id() {
                        mark_out(t.0, p.index(), &mut live_in, &mut live_out);
                    }
                }
                continue;
            }
            for t in inst.used_temps() {
                let defined_before = func.blocks[b].insts[..k]
                    .iter()
                    .any(|i| i.defs.iter().any(|d| d.temp == t));
                if !defined_before {
                    live_in[b].insert(t.0);
                    let preds = if linear[t.index()] {
                        &cfg.linear.preds[b]
                    } else {
                        &cfg.logical.preds[b]
                    };
                    for p in preds {
                        mark_out(t.0, p.index(), &mut live_in, &mut live_out);
                    }
                }
            }
        }
    }
    // Seed 003: what leaves each divergent loop.
    let mut leaving_per_loop = Vec::new();
    for lp in &cfg.loops {
        if !lp.divergent {
            leaving_per_loop.push(BTreeSet::new());
            continue;
        }
        let inside = |t: u32| !linear[t as usize] && lp.contains(Block::new(def_block[t as usize]));
        let mut leaving: BTreeSet<u32> = live_in[lp.exit.index()]
            .iter()
            .copied()
            .filter(|&t| inside(t))
            .collect();
        for inst in func.blocks[lp.exit.index()]
            .insts
            .iter()
            .filter(|i| i.op == Opcode::Phi)
        {
            for (op, p) in inst
                .operands
                .iter()
                .zip(&cfg.logical.preds[lp.exit.index()])
            {
                if let Some(t) = op.temp_id().filter(|t| lp.contains(*p) && inside(t.0)) {
                    leaving.insert(t.0);
                }
            }
        }
        leaving_per_loop.push(leaving);
    }
    (live_in, live_out, leaving_per_loop)
}

/// Temps live right after each instruction of `b`, walking back from the oracle's live-out.
pub fn live_after_each(func: &Function, b: usize, live_out: &BTreeSet<u32>) -> Vec<BTreeSet<u32>> {
    let insts = &func.blocks[b].insts;
    let mut live = live_out.clone();
    let mut after = vec![BTreeSet::new(); insts.len()];
    for (k, inst) in insts.iter().enumerate().rev() {
        after[k] = live.clone();
        for d in &inst.defs {
            live.remove(&d.temp.0);
        }
        if !inst.op.is_phi() {
            live.extend(inst.used_temps().map(|t: Temp| t.0));
        }
    }
    after
}
