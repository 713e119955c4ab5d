//! Seed 000's identities on random programs: the three forms of every stage, both forms of
//! `register_demand`, the helper quantities, and the relations between consecutive instructions;
//! and the demand against the path oracle's live sets (`oracle/mod.rs`), which shares no code
//! with liveness or `demand.rs`.

mod oracle;

use kiln_analysis::{Cfg, InstDemand, compute_liveness};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Demand, verify};
use proptest::prelude::*;
use std::collections::BTreeSet;

fn check(d: &InstDemand) -> Result<(), TestCaseError> {
    let live_in = d.live_in();
    let through = d.live_through();
    let out = d.live_out;
    let (ek, lk, ekc, lkc) = (
        d.early_kill_operands,
        d.late_kill_operands,
        d.early_kill_copies,
        d.late_kill_copies,
    );
    let (ld, dd) = (d.live_definitions, d.dead_definitions);
    // live_out, live_in and live_through in their equivalent forms.
    prop_assert_eq!(out, through + ld);
    prop_assert_eq!(out, live_in - d.first_kill_operands() + ld);
    prop_assert_eq!(live_in, through + d.first_kill_operands());
    prop_assert_eq!(through, live_in - d.first_kill_operands());
    // Stages, using live_in.
    let by_in = [
        live_in,
        live_in + ekc + lkc,
        live_in - ek + lkc,
        live_in - ek + lkc + ld + dd,
        live_in - ek - lk + ld,
    ];
    // Stages, using live_through.
    let by_through = [
        through + lk + ek,
        through + lk + ek + ekc + lkc,
        through + lk + lkc,
        through + lk + lkc + ld + dd,
        through + ld,
    ];
    for k in 0..5 {
        prop_assert_eq!(d.stage(k), by_in[k], "stage {} by live_in", k);
        prop_assert_eq!(d.stage(k), by_through[k], "stage {} by live_through", k);
    }
    // register_demand = max(stage1, stage3) = max of all stages.
    let all = d
        .stages()
        .into_iter()
        .fold(Demand([i32::MIN; kiln_ir::MAX_FILES]), Demand::max);
    prop_assert_eq!(d.register_demand(), all);
    prop_assert_eq!(d.live_changes(), out - live_in);
    prop_assert_eq!(d.temp_registers(), d.register_demand() - out);
    prop_assert_eq!(d.temp_reg_changes(), d.stage(3) - d.stage(1));
    prop_assert_eq!(
        d.register_demand(),
        live_in + d.live_changes() + d.temp_registers()
    );
    prop_assert_eq!(d.register_demand(), out + d.temp_registers());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn seed_000_identities_hold(seed in any::<u64>(), size in 20usize..300, pressure in 4usize..64) {
        let mut func = generate(&GenConfig { size, pressure, ..GenConfig::new(seed) });
        let cfg = Cfg::compute(&func).unwrap();
        let lv = compute_liveness(&mut func, &cfg);
        // The flags liveness writes obey the verifier's rules.
        if let Err(e) = verify(&func) {
            return Err(TestCaseError::fail(format!("{}\n{}", e[0], kiln_ir::print_function(&func))));
        }
        for b in 0..func.blocks.len() {
            let dems = lv.inst_demands(&func, kiln_ir::Block::new(b));
            let dems = &dems;
            let mut block_max = Demand::ZERO;
            for (k, d) in dems.iter().enumerate() {
                check(d)?;
                prop_assert_eq!(d.register_demand(), lv.register_demand[b][k]);
                block_max = block_max.max(d.register_demand());
                if k + 1 < dems.len() {
                    let next = &dems[k + 1];
                    // stage4(a) == stage0(b), and the two relations between neighbours.
                    prop_assert_eq!(d.stage(4), next.stage(0));
                    prop_assert_eq!(d.register_demand(), next.register_demand() - next.temp_registers() - next.live_changes() + d.temp_registers());
                    prop_assert_eq!(next.register_demand(), d.register_demand() - d.temp_registers() + next.live_changes() + next.temp_registers());
                }
            }
            // The block starts with its live-in set and ends with its live-out set.
            let block = kiln_ir::Block::new(b);
            if let (Some(first), Some(last)) = (dems.first(), dems.last()) {
                prop_assert_eq!(first.stage(0), lv.live_in_demand(&func, block));
                let out: Demand = lv.live_out[b].iter().fold(Demand::ZERO, |a, t| a + Demand::of(func.class(t)));
                prop_assert_eq!(last.stage(4), out);
            }
            prop_assert_eq!(block_max, lv.block_max[b]);
        }
    }
}

/// Demand of a set of temps.
fn size_of(func: &kiln_ir::Function, set: impl IntoIterator<Item = u32>) -> Demand {
    set.into_iter().fold(Demand::ZERO, |d, t| {
        d + Demand::of(func.class(kiln_ir::Temp(t)))
    })
}

/// Whether each demand of `a` is at least `b`'s.
fn at_least(a: Demand, b: Demand) -> bool {
    a.0.iter().zip(b.0).all(|(x, y)| *x >= y)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    /// Stages 0 and 4 are the registers live before and after each instruction by the path
    /// definition; a plain instruction (no tie, vector or late kill) needs exactly the larger of
    /// "before" and "after plus dead definitions"; a tied operand that stays live costs a copy;
    /// killed late-kill operands stay occupied while the definitions are written.
    #[test]
    fn demand_matches_the_path_oracle(seed in any::<u64>(), size in 20usize..300, pressure in 4usize..64) {
        let mut func = generate(&GenConfig { size, pressure, ..GenConfig::new(seed) });
        let cfg = Cfg::compute(&func).unwrap();
        let (_, want_out, _) = oracle::oracle(&func, &cfg);
        let lv = compute_liveness(&mut func, &cfg);
        for (b, out) in want_out.iter().enumerate() {
            let dems = lv.inst_demands(&func, kiln_ir::Block::new(b));
            let after = oracle::live_after_each(&func, b, out);
            for (k, inst) in func.blocks[b].insts.iter().enumerate() {
                let d = &dems[k];
                let defs: BTreeSet<u32> = inst.defs.iter().map(|d| d.temp.0).collect();
                let mut before: BTreeSet<u32> = after[k].difference(&defs).copied().collect();
                if !inst.op.is_phi() {
                    before.extend(inst.used_temps().map(|t| t.0));
                }
                let dead = size_of(&func, defs.iter().copied().filter(|t| !after[k].contains(t)));
                let (before, out) = (size_of(&func, before.iter().copied()), size_of(&func, after[k].iter().copied()));
                prop_assert_eq!(d.stage(0), before, "bb{}:{} stage 0", b, k);
                prop_assert_eq!(d.stage(4), out, "bb{}:{} stage 4", b, k);
                let rd = d.register_demand();
                prop_assert!(at_least(rd, before.max(out + dead)), "bb{}:{}", b, k);
                let plain = !inst.op.is_phi()
                    && inst.defs.iter().all(|d| d.tied.is_none())
                    && inst.operands.iter().all(|o| !o.is_vector_aligned() && !o.is_late_kill());
                if plain {
                    prop_assert_eq!(rd, before.max(out + dead), "bb{}:{} plain", b, k);
                }
                for (j, op) in inst.operands.iter().enumerate() {
                    let Some(t) = op.temp_id() else { continue };
                    if inst.tied_def(j).is_some() && after[k].contains(&t.0) {
                        prop_assert!(at_least(rd, before + size_of(&func, [t.0])), "bb{}:{} tied copy", b, k);
                    }
                }
                let late_killed: BTreeSet<u32> = inst
                    .operands
                    .iter()
                    .filter(|o| o.is_late_kill() && !inst.op.is_phi())
                    .filter_map(|o| o.temp_id())
                    .map(|t| t.0)
                    .filter(|t| !after[k].contains(t))
                    .collect();
                prop_assert!(at_least(rd, out + dead + size_of(&func, late_killed)), "bb{}:{} late kill", b, k);
            }
        }
    }
}
