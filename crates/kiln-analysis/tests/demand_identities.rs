//! Seed 000's identities on random programs: the three forms of every stage, both forms of
//! `register_demand`, the helper quantities, and the relations between consecutive instructions.

use kiln_analysis::{Cfg, InstDemand, compute_liveness};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Demand, verify};
use proptest::prelude::*;

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
