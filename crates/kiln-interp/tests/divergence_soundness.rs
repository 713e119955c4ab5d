//! Soundness of the divergence analysis against the interpreter
//! ([`kiln_interp::uniform_check`]): every temp the analysis calls uniform has one value across
//! the lanes that ran each dynamic instance of its definition, on generated programs run with
//! different values per lane. A deliberate mutation (claiming a temporally divergent value
//! uniform) shows that the check fails when the claim is wrong.

use kiln_analysis::Divergence;
use kiln_interp::Env;
use kiln_interp::uniform_check::check_uniform;
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Cfg, Function, Temp};

/// Violations, checked instances and disagreeing instances; `None` when the run failed.
fn check_run(
    func: &Function,
    env: &Env,
    claims: &dyn Fn(Temp) -> bool,
) -> Option<(Vec<String>, usize, usize)> {
    let r = check_uniform(func, env, claims).ok()?;
    Some((r.violations, r.checked, r.disagreeing))
}

#[test]
fn uniform_temps_agree_across_lanes_on_generated_programs() {
    let (mut checked, mut disagreeing, mut runs) = (0, 0, 0);
    for seed in 0..400u64 {
        let func = generate(&GenConfig {
            size: 80,
            ..GenConfig::new(seed)
        });
        let cfg = Cfg::compute(&func).expect("generated programs are structured");
        let dv = Divergence::compute(&func, &cfg);
        let claims = |t: Temp| dv.is_uniform(t);
        for k in 0..3 {
            let env = Env::for_function(&func, 16, seed * 7 + k);
            let Some((violations, c, d)) = check_run(&func, &env, &claims) else {
                continue;
            };
            runs += 1;
            assert!(
                violations.is_empty(),
                "seed {seed}, env {k}: {}\n{}",
                violations[0],
                kiln_ir::print_function(&func)
            );
            checked += c;
            disagreeing += d;
        }
    }
    // The check is not vacuous: many runs, many multi-lane instances of uniform temps, and
    // per-lane values that do differ.
    assert!(runs > 800, "{runs} runs");
    assert!(checked > 10_000, "{checked} checked instances");
    assert!(disagreeing > 1_000, "{disagreeing} disagreeing instances");
}

/// A loop left at a per-lane iteration: the counter is uniform inside, `%8` reads it after the
/// loop without an exit phi (temporal divergence) and `%7` is the exit phi.
const TEMPORAL: &str = "target generic(v=16, s=8)
function @main {
bb0:
    %0:v1 = input 0
    %2:v1 = iand %0, 3
    loop bb1, bb5
bb1:
    %1:v1 = phi 0, %3
    %4:v1 = ule %2, %1
    if.divergent %4, bb2, bb3, bb3
bb2:
    break bb5
bb3:
    %3:v1 = iadd %1, 1
    jump bb4
bb4:
    continue bb1
bb5:
    %7:v1 = phi %1
    %8:v1 = iadd %1, 10
    output 0, %7
    output 1, %8
    return
}
";

#[test]
fn mutations_are_caught() {
    let func = kiln_ir::parse_function(TEMPORAL).expect("valid text");
    let cfg = Cfg::compute(&func).expect("structured");
    let dv = Divergence::compute(&func, &cfg);
    let mut env = Env::new(16);
    env.inputs.insert(0, (0..16).collect());
    let right = |t: Temp| dv.is_uniform(t);
    let (violations, checked, _) = check_run(&func, &env, &right).expect("runs");
    assert!(violations.is_empty(), "{violations:?}");
    assert!(
        dv.is_uniform(Temp(1)) && checked > 0,
        "the counter is checked"
    );
    // Forgetting temporal divergence (an operand read after the loop) or the exit-phi rule is
    // caught; so is calling an input uniform.
    for wrong in [8u32, 7, 0] {
        assert!(!dv.is_uniform(Temp(wrong)));
        let mutated = |t: Temp| dv.is_uniform(t) || t == Temp(wrong);
        let (violations, _, _) = check_run(&func, &env, &mutated).expect("runs");
        assert!(
            !violations.is_empty(),
            "claiming %{wrong} uniform is not caught"
        );
    }
}
