//! Liveness against an independent oracle: for every use, walk backwards over the predecessors
//! (of the temp's CFG) until the definition, marking blocks live-in and live-out — the path
//! definition of liveness (Appel, "liveness by use"), with seed 003's loop rule applied after.

use kiln_analysis::{Cfg, compute_liveness};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Block, Function, Opcode};
use proptest::prelude::*;
use std::collections::BTreeSet;

type Sets = Vec<BTreeSet<u32>>;

fn oracle(func: &Function, cfg: &Cfg) -> (Sets, Sets) {
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
    // Seed 003.
    for lp in cfg.loops.iter().filter(|l| l.divergent) {
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
        for b in lp.header.index()..lp.exit.index() {
            live_in[b].extend(&leaving);
            live_out[b].extend(&leaving);
        }
    }
    (live_in, live_out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn fixpoint_matches_the_path_oracle(seed in any::<u64>(), size in 10usize..400) {
        let mut func = generate(&GenConfig { size, ..GenConfig::new(seed) });
        let cfg = Cfg::compute(&func).unwrap();
        let (want_in, want_out) = oracle(&func, &cfg);
        let lv = compute_liveness(&mut func, &cfg);
        for b in 0..func.blocks.len() {
            let got_in: BTreeSet<u32> = lv.live_in[b].iter().map(|t| t.0).collect();
            let got_out: BTreeSet<u32> = lv.live_out[b].iter().map(|t| t.0).collect();
            prop_assert_eq!(&got_in, &want_in[b], "live-in of bb{}", b);
            prop_assert_eq!(&got_out, &want_out[b], "live-out of bb{}", b);
        }
    }
}

/// Seed 003: the texture header written in all lanes inside the loop must interfere with the
/// colour defined in the loop and used after it — both live at the header's definition.
#[test]
fn seed_003_color2_is_live_across_the_loop() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/seed003_loop.kir"
    ))
    .unwrap();
    let mut func = kiln_ir::parse_function(&text).unwrap();
    let cfg = Cfg::compute(&func).unwrap();
    let lv = compute_liveness(&mut func, &cfg);
    let header = cfg.loops[0].header;
    for t in [12, 13, 14, 15] {
        assert!(
            lv.live_in[header.index()].contains(kiln_ir::Temp(t)),
            "%{t} live into the loop header"
        );
    }
    // The loop's linear temp %4 is defined in the header while %12 is live there.
    assert!(lv.linear[4]);
    assert!(!lv.linear[12]);
}
