//! Liveness against an independent oracle, the path definition of liveness (`oracle/mod.rs`),
//! and seed 003's leaving sets from the path sets.

mod oracle;

use kiln_analysis::{Cfg, compute_liveness};
use kiln_ir::generate::{GenConfig, generate};
use proptest::prelude::*;
use std::collections::BTreeSet;

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn fixpoint_matches_the_path_oracle(seed in any::<u64>(), size in 10usize..400) {
        let mut func = generate(&GenConfig { size, ..GenConfig::new(seed) });
        let cfg = Cfg::compute(&func).unwrap();
        let (want_in, want_out, want_leaving) = oracle::oracle(&func, &cfg);
        let lv = compute_liveness(&mut func, &cfg);
        for b in 0..func.blocks.len() {
            let got_in: BTreeSet<u32> = lv.live_in[b].iter().map(|t| t.0).collect();
            let got_out: BTreeSet<u32> = lv.live_out[b].iter().map(|t| t.0).collect();
            prop_assert_eq!(&got_in, &want_in[b], "live-in of bb{}", b);
            prop_assert_eq!(&got_out, &want_out[b], "live-out of bb{}", b);
        }
        for (l, want) in want_leaving.iter().enumerate() {
            let got: BTreeSet<u32> = lv.loop_leaving[l].iter().map(|t| t.0).collect();
            prop_assert_eq!(&got, want, "leaving loop {}", l);
        }
    }
}

/// Seed 003: the colour defined in the loop and used after it leaves the loop; liveness itself
/// stays exact (the colour is not live into the header).
#[test]
fn seed_003_color2_leaves_the_loop() {
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
        assert!(lv.loop_leaving[0].contains(kiln_ir::Temp(t)), "%{t} leaves");
        assert!(
            !lv.live_in[header.index()].contains(kiln_ir::Temp(t)),
            "%{t} is not live into the loop header"
        );
    }
    // The loop's linear temp %4 is defined in the header while %12 is live there.
    assert!(lv.linear[4]);
    assert!(!lv.linear[12]);
}

/// The debug check of a liveness handed to a pass: it holds for the function's own liveness,
/// and fails for a function whose kill flags were never written and for another function's
/// liveness.
#[test]
fn is_liveness_of_tells_the_functions_own() {
    let fresh = generate(&GenConfig {
        size: 200,
        ..GenConfig::new(7)
    });
    let mut func = fresh.clone();
    let cfg = Cfg::compute(&func).unwrap();
    let lv = compute_liveness(&mut func, &cfg);
    assert!(kiln_analysis::is_liveness_of(&lv, &func, &cfg));
    assert!(
        fresh.blocks != func.blocks,
        "the generated function has kill flags to write"
    );
    assert!(!kiln_analysis::is_liveness_of(&lv, &fresh, &cfg));
    let mut other = generate(&GenConfig {
        size: 200,
        ..GenConfig::new(8)
    });
    let other_cfg = Cfg::compute(&other).unwrap();
    compute_liveness(&mut other, &other_cfg);
    assert!(!kiln_analysis::is_liveness_of(&lv, &other, &other_cfg));
}
