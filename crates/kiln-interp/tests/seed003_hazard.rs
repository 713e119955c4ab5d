//! Seed 003's hazard, caught twice: liveness says the all-lanes header temp and the colour that
//! leaves the loop interfere, and an allocation that shares their register anyway produces a
//! different output in SIMT mode.

use kiln_analysis::{Cfg, Interference, compute_liveness};
use kiln_interp::out_of_ssa::reference_assignment;
use kiln_interp::{Env, Mismatch, compare};
use kiln_ir::{Temp, parse_function, verify};

fn example() -> kiln_ir::Function {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/seed003_loop.kir"
    ))
    .unwrap();
    parse_function(&text).unwrap()
}

/// Lanes start at different texture coordinates, so they leave the loop at different iterations.
fn env() -> Env {
    let mut env = Env::new(16);
    env.inputs
        .insert(0, (0..16).map(|l| (l as f32 * 0.37).to_bits()).collect());
    env.uniforms.insert(0, 0.6f32.to_bits());
    env
}

#[test]
fn liveness_reports_the_header_and_the_colour_as_interfering() {
    let mut func = example();
    let cfg = Cfg::compute(&func).unwrap();
    let lv = compute_liveness(&mut func, &cfg);
    let inter = Interference::new(&func, &cfg, &lv);
    for colour in 12..16 {
        assert!(
            inter.interferes(&func, Temp(4), Temp(colour)),
            "%4 and %{colour}"
        );
        // Per-lane values written under the mask do not disturb the lanes that left.
        assert!(!inter.interferes(&func, Temp(11), Temp(colour)));
    }
    // Across the loop, not before it: the input %0 dies at the loop entry.
    assert!(!inter.interferes(&func, Temp(0), Temp(13)));
    // The colour is defined after %4's last use in its iteration: only seed 003's rule makes
    // them interfere. Liveness itself stays exact (the colour is not live into the header); the
    // rule is the loop's leaving set.
    assert!(!lv.live_in[cfg.loops[0].header.index()].contains(Temp(12)));
    assert!(lv.loop_leaving[0].contains(Temp(12)));
}

#[test]
fn sharing_their_register_changes_the_output_in_simt_mode() {
    let func = example();
    let env = env();
    let good = reference_assignment(&func).unwrap();
    assert!(verify(&good).is_ok());
    compare(&func, &good, &env).expect("the reference assignment agrees");

    // The hazardous allocation: the header temp %4 reuses color2's (%12) register.
    let mut bad = good.clone();
    let reg_of_12 = bad
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .flat_map(|i| &i.defs)
        .find(|d| d.temp == Temp(12))
        .unwrap()
        .reg;
    for inst in bad.blocks.iter_mut().flat_map(|b| &mut b.insts) {
        for d in inst.defs.iter_mut().filter(|d| d.temp == Temp(4)) {
            d.reg = reg_of_12;
        }
        for op in inst
            .operands
            .iter_mut()
            .filter(|o| o.temp_id() == Some(Temp(4)))
        {
            op.reg = reg_of_12;
        }
    }
    assert!(verify(&bad).is_ok(), "the bad allocation is well formed");
    match compare(&func, &bad, &env) {
        Err(m) => assert!(matches!(*m, Mismatch::Value { slot: 0, .. }), "{m}"),
        Ok(()) => panic!("the clobbered colour went unnoticed"),
    }
}
