//! The pre-RA scheduler on generated programs: the result verifies, computes the same outputs
//! in the interpreter, keeps every block's side effects in their order, never takes a block's
//! register demand past both the budget and the original's, and lowers the demand where the
//! budget is tight — each checked by something other than the scheduler: the verifier, the
//! interpreter, the liveness analysis.

use kiln_analysis::{Cfg, compute_liveness};
use kiln_interp::Env;
use kiln_interp::diff::{compare_outputs, run};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Demand, Function, Inst, print_function};
use kiln_sched::pressure::{GenericPreRa, Order, schedule};

fn budget(v: i32, s: i32) -> Demand {
    let mut d = Demand::ZERO;
    d.0[0] = v;
    d.0[1] = s;
    d
}

fn block_max(func: &mut Function) -> Vec<Demand> {
    let cfg = Cfg::compute(func).expect("a CFG");
    compute_liveness(func, &cfg).block_max
}

fn side_effects(func: &Function) -> Vec<Vec<Inst>> {
    func.blocks
        .iter()
        .map(|b| {
            b.insts
                .iter()
                .filter(|i| i.op.info().side_effects)
                .cloned()
                .collect()
        })
        .collect()
}

#[test]
fn scheduled_programs_verify_agree_and_stay_within_the_budget() {
    let (mut reordered, mut lowered, mut raised) = (0, 0i64, 0i64);
    for seed in 0..300u64 {
        let mut config = if seed % 2 == 0 {
            GenConfig::new(seed)
        } else {
            GenConfig::high_pressure(seed)
        };
        config.size = 60 + (seed % 4) as usize * 30;
        let mut before = generate(&config);
        let tight = budget(8 + (seed % 3) as i32 * 4, 4);
        let old = block_max(&mut before);
        let mut after = before.clone();
        let outcome = schedule(&mut after, &GenericPreRa, tight, Order::Latency);
        reordered += outcome.reordered;
        if let Err(e) = kiln_ir::verify(&after) {
            panic!("seed {seed}: {}\n{}", e[0], print_function(&after));
        }
        assert_eq!(
            side_effects(&before),
            side_effects(&after),
            "seed {seed}: side effects reordered"
        );
        let new = block_max(&mut after);
        for (b, (o, n)) in old.iter().zip(&new).enumerate() {
            assert!(
                !(n.exceeds(tight) && n.exceeds(*o)),
                "seed {seed} bb{b}: demand {n:?} over the budget {tight:?} and the original {o:?}"
            );
            let (o, n) = (
                o.0.iter().sum::<i32>() as i64,
                n.0.iter().sum::<i32>() as i64,
            );
            lowered += (o - n).max(0);
            raised += (n - o).max(0);
        }
        for k in 0..2 {
            let env = Env::for_function(&before, 16, seed * 7 + k);
            let Ok(want) = run(&before, &env) else {
                continue;
            };
            let got = run(&after, &env).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            if let Err(m) = compare_outputs(&want, &got) {
                panic!(
                    "seed {seed}: {m}\nbefore:\n{}\nafter:\n{}",
                    print_function(&before),
                    print_function(&after)
                );
            }
        }
    }
    assert!(reordered > 300, "only {reordered} blocks reordered");
    assert!(
        lowered > raised,
        "the scheduler raised the demand more ({raised}) than it lowered it ({lowered})"
    );
}

/// A block where the original order makes every value before reading any: the scheduler must
/// interleave, and the analysis sees the demand fall.
#[test]
fn consuming_values_as_they_are_made_lowers_the_demand() {
    let text = "target generic(v=16, s=8)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = fmul %0, %0
    %2:v1 = fadd %0, %0
    %3:v1 = fsub %0, %0
    %4:v1 = fmul %0, 2.0
    %5:v1 = fadd %1, 1.0
    %6:v1 = fadd %2, 1.0
    %7:v1 = fadd %3, 1.0
    %8:v1 = fadd %4, 1.0
    %9:v1 = fadd %5, %6
    %10:v1 = fadd %7, %8
    %11:v1 = fadd %9, %10
    output 0, %11
    return
}
";
    let mut func = kiln_ir::parse_function(text).expect("parses");
    let old = block_max(&mut func)[0];
    let outcome = schedule(&mut func, &GenericPreRa, budget(3, 4), Order::Latency);
    let new = block_max(&mut func)[0];
    assert_eq!(outcome.reordered, 1, "{}", print_function(&func));
    assert!(new.0[0] < old.0[0], "demand {new:?} not below {old:?}");
}

/// For [`Order::Latency`], the wait for a transient result (a texture sample, four cycles on
/// the generic target) takes independent work; for [`Order::Pressure`] its reader follows it.
#[test]
fn a_transient_results_wait_is_filled_for_latency() {
    let text = "target generic(v=16, s=8)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v4 = texture_sample 0, 0, %0, %1
    %3:v1, %4:v1, %5:v1, %6:v1 = split_vector %2
    %8:v1 = fmul %0, %1
    %7:v1 = fadd %3, %4
    %9:v1 = fadd %7, %8
    output 0, %9
    return
}
";
    let after_sample = |order: Order| {
        let mut func = kiln_ir::parse_function(text).expect("parses");
        schedule(&mut func, &GenericPreRa, budget(16, 8), order);
        let insts = &func.blocks[0].insts;
        let at = insts
            .iter()
            .position(|i| i.op == kiln_ir::Opcode::TextureSample)
            .expect("the sample");
        insts[at + 1].op
    };
    assert_eq!(after_sample(Order::Latency), kiln_ir::Opcode::Fmul);
    assert_eq!(after_sample(Order::Pressure), kiln_ir::Opcode::SplitVector);
}
