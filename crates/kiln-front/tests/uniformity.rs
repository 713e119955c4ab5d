//! Uniform values and branches after the divergence analysis: counted loops come out with a
//! uniform counter, a `linear_phi` and `if.uniform`; values leaving divergent loops stay
//! correct (temporal divergence). Every shader is verified and run through the interpreter
//! against hand-computed results.

use kiln_front::lower::uniformity::{loop_exit_branches, make_uniform};
use kiln_front::{Language, Source, lower_entry_point, parse};
use kiln_interp::{Env, Slot, run_ssa};
use kiln_ir::{Cfg, Function, GenericTarget, Opcode};

const LANES: usize = 8;
const PROGRESS: f32 = 0.3;

fn lower(src: &str) -> Function {
    let source = Source {
        name: "test.wgsl".into(),
        language: Language::Wgsl,
        bytes: src.as_bytes().to_vec(),
    };
    let parsed = parse(&source).unwrap_or_else(|e| panic!("{e}"));
    let f = lower_entry_point(&parsed, None, None)
        .unwrap_or_else(|e| panic!("{e}"))
        .function;
    if let Err(e) = kiln_ir::verify(&f) {
        panic!("{}\n{}", e[0], kiln_ir::print_function(&f));
    }
    f
}

/// Input `l` of lane `l`, component `c`: `l/2 - 1.5 + c`; every uniform word is [`PROGRESS`].
fn x(l: usize) -> [f32; 4] {
    [0, 1, 2, 3].map(|c| l as f32 * 0.5 - 1.5 + c as f32)
}

/// Runs and returns output location 0 per lane.
fn run(f: &Function) -> Vec<[f32; 4]> {
    let env = Env::from_slots(f, LANES, |s| match s {
        Slot::Input { slot, lane } => x(lane)[(slot % 4) as usize].to_bits(),
        Slot::Uniform(_) => PROGRESS.to_bits(),
    });
    let text = kiln_ir::print_function(f);
    let out = run_ssa(f, &env).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (0..LANES)
        .map(|l| {
            [0, 1, 2, 3].map(|c| {
                let u = out.slots[&c][l].as_ref().expect("written")[0].expect("defined");
                f32::from_bits(u)
            })
        })
        .collect()
}

fn check(src: &str, want: impl Fn([f32; 4]) -> [f32; 4]) -> Function {
    let f = lower(src);
    for (l, got) in run(&f).into_iter().enumerate() {
        let w = want(x(l));
        assert!(
            got.iter().zip(w).all(|(g, w)| (g - w).abs() <= 1e-5),
            "lane {l}: got {got:?}, want {w:?}\n{}",
            kiln_ir::print_function(&f)
        );
    }
    // Every uniform-file value agrees across the lanes that computed it, instance by instance.
    let env = Env::from_slots(&f, LANES, |s| match s {
        Slot::Input { slot, lane } => x(lane)[(slot % 4) as usize].to_bits(),
        Slot::Uniform(_) => PROGRESS.to_bits(),
    });
    let in_s = |t: kiln_ir::Temp| f.class(t).file == GenericTarget::S;
    let report = kiln_interp::uniform_check::check_uniform(&f, &env, &in_s).expect("runs");
    assert!(report.violations.is_empty(), "{}", report.violations[0]);
    // One application reaches the fixpoint.
    let mut again = f.clone();
    let stats = make_uniform(&mut again).expect("runs");
    assert_eq!(
        stats,
        Default::default(),
        "a second application changed something"
    );
    f
}

const PRELUDE: &str = "@group(0) @binding(0) var<uniform> progress: f32;\n";

fn frag(body: &str, functions: &str) -> String {
    format!(
        "{PRELUDE}{functions}\n@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f {{\n{body}\n}}\n"
    )
}

#[test]
fn counted_loop_has_a_uniform_counter_and_branch() {
    let f = check(
        &frag(
            "var s = 0.0;
             for (var i = 0u; i < 4u; i++) { s += x.x * f32(i); }
             return vec4(s, 0.0, 0.0, 1.0);",
            "",
        ),
        |x| [6.0 * x[0], 0.0, 0.0, 1.0],
    );
    let cfg = Cfg::compute(&f).expect("structured");
    assert_eq!(cfg.loops.len(), 1);
    let header = f.block(cfg.loops[0].header);
    let phis: Vec<_> = header.insts.iter().take_while(|i| i.op.is_phi()).collect();
    // The counter is a linear phi in the uniform file; the sum stays per lane.
    let counters: Vec<_> = phis
        .iter()
        .filter(|i| i.op == Opcode::LinearPhi)
        .map(|i| i.defs[0].temp)
        .collect();
    assert_eq!(counters.len(), 1, "{}", kiln_ir::print_function(&f));
    assert_eq!(f.class(counters[0]).file, GenericTarget::S);
    assert_eq!(phis.len(), 2);
    let term = header.terminator().expect("terminator");
    assert!(term.op == Opcode::If && !term.flags.divergent);
    assert_eq!(loop_exit_branches(&f).header, (1, 0));
    assert!(!cfg.loops[0].divergent);
}

#[test]
fn loop_with_a_per_lane_limit_stays_divergent() {
    let f = check(
        &frag(
            "var i = 0u;
             while (f32(i) < x.y) { i++; }
             return vec4(f32(i), 0.0, 0.0, 1.0);",
            "",
        ),
        |x| [x[1].max(0.0).ceil(), 0.0, 0.0, 1.0],
    );
    assert_eq!(loop_exit_branches(&f).header, (0, 1));
}

/// The shader that once failed with "linear … defined in the divergent loop … used after it":
/// an early return under a per-lane condition, a local holding a uniform value, inlined twice.
#[test]
fn uniform_local_in_a_function_with_early_returns_inlined_twice() {
    let src = format!(
        "{PRELUDE}fn f(x: f32) -> f32 {{ var a: f32 = progress; if (x < a) {{ return 1.0; }} return 0.0; }}
@fragment fn main(@location(0) uv: vec2<f32>) -> @location(0) vec4<f32> {{
  return vec4(f(uv.x), f(uv.y), 0.0, 1.0); }}"
    );
    let b = |v: f32| if v < PROGRESS { 1.0 } else { 0.0 };
    check(&src, |x| [b(x[0]), b(x[1]), 0.0, 1.0]);
}

#[test]
fn uniform_values_leaving_divergent_loops() {
    // A uniform value computed in a loop left at per-lane iterations, and the uniform counter
    // read after it: each lane keeps its last iteration's values.
    check(
        &frag(
            "var u = 0.0; var i = 0u;
             loop {
               u = progress * f32(i);
               if (f32(i) > x.x) { break; }
               i++;
             }
             return vec4(u, f32(i), progress + u, 1.0);",
            "",
        ),
        |x| {
            let i = (0..).find(|&i| i as f32 > x[0]).expect("ends") as f32;
            [PROGRESS * i, i, PROGRESS + PROGRESS * i, 1.0]
        },
    );
    // The same through a function with an early return inside the loop, called twice.
    check(
        &frag(
            "return vec4(g(x.x), g(x.y), 0.0, 1.0);",
            "fn g(v: f32) -> f32 {
               var k = 0.0;
               for (var i = 0; i < 8; i++) {
                 k = progress + f32(i);
                 if (f32(i) > v) { return k; }
               }
               return -k;
             }",
        ),
        |x| {
            let g = |v: f32| match (0..8).find(|&i| i as f32 > v) {
                Some(i) => PROGRESS + i as f32,
                None => -(PROGRESS + 7.0),
            };
            [g(x[0]), g(x[1]), 0.0, 1.0]
        },
    );
}

#[test]
fn uniform_loop_inside_a_divergent_if() {
    let f = check(
        &frag(
            "var s = 0.0;
             if (x.x > 0.0) {
               for (var i = 0; i < 3; i++) { s += progress; if (f32(i) > progress * 5.0) { break; } }
             } else { s = -1.0; }
             return vec4(s, 0.0, 0.0, 1.0);",
            "",
        ),
        |x| {
            let s = if x[0] > 0.0 {
                let mut s = 0.0;
                for i in 0..3 {
                    s += PROGRESS;
                    if i as f32 > PROGRESS * 5.0 {
                        break;
                    }
                }
                s
            } else {
                -1.0
            };
            [s, 0.0, 0.0, 1.0]
        },
    );
    let cfg = Cfg::compute(&f).expect("structured");
    assert!(cfg.loops.iter().all(|l| !l.divergent));
    assert_eq!(loop_exit_branches(&f).all, (2, 0));
}

/// A value computed from uniform words in a loop left at per-lane iterations, then branched on
/// after it: the branch is divergent (the lowering had marked it uniform), and the merge after
/// it is a per-lane phi.
#[test]
fn branch_on_a_value_leaving_a_divergent_loop() {
    let f = check(
        &frag(
            "var c = 0.0; var i = 0;
             loop { c = progress * f32(i); if (f32(i) > x.x) { break; } i++; }
             var r = 0.0;
             if (c > 0.5) { r = 1.0; } else { r = 2.0; }
             return vec4(r, c, 0.0, 1.0);",
            "",
        ),
        |x| {
            let i = (0..).find(|&i| i as f32 > x[0]).expect("ends") as f32;
            let c = PROGRESS * i;
            [if c > 0.5 { 1.0 } else { 2.0 }, c, 0.0, 1.0]
        },
    );
    let cfg = Cfg::compute(&f).expect("structured");
    let after = cfg.ifs.last().expect("the if after the loop");
    assert!(after.divergent, "{}", kiln_ir::print_function(&f));
}

/// The same with a loop-invariant uniform value: the lowering made the branch after the loop
/// `if.uniform` with a linear phi after it; the value leaves a divergent loop, so the branch
/// becomes divergent and the linear phi a per-lane one.
#[test]
fn branch_on_a_uniform_word_read_in_a_divergent_loop() {
    let f = check(
        &frag(
            "var c = 0.0; var i = 0;
             loop { c = progress; if (f32(i) > x.x) { break; } i++; }
             var r = 0.0;
             if (c > 0.1) { r = 1.0; } else { r = 2.0; }
             return vec4(r, c, f32(i), 1.0);",
            "",
        ),
        |x| {
            let i = (0..).find(|&i| i as f32 > x[0]).expect("ends") as f32;
            [1.0, PROGRESS, i, 1.0]
        },
    );
    let cfg = Cfg::compute(&f).expect("structured");
    let after = cfg.ifs.last().expect("the if after the loop");
    assert!(after.divergent, "{}", kiln_ir::print_function(&f));
}
