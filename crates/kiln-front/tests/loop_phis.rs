//! Loop-header phis exist only for the variables a loop assigns (directly, through pointers
//! passed to called functions, or private globals written by callees); one-trip loops
//! (switches, early returns) get none. Counted on generated shaders and checked through the
//! interpreter.

use kiln_front::{Language, Source, lower_entry_point, parse};
use kiln_interp::{Env, Slot, run_ssa};
use kiln_ir::{Cfg, Function};

const LANES: usize = 4;

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
        panic!("{}", e[0]);
    }
    f
}

/// Phis at loop headers, per loop in layout order.
fn header_phis(f: &Function) -> Vec<usize> {
    let cfg = Cfg::compute(f).expect("structured");
    cfg.loops
        .iter()
        .map(|l| f.block(l.header).phi_count())
        .collect()
}

/// Output location 0 per lane, with input `x = (l, l + 1, …)` and every uniform word 0.5.
fn run(f: &Function) -> Vec<[f32; 4]> {
    let env = Env::from_slots(f, LANES, |s| match s {
        Slot::Input { slot, lane } => (lane as f32 + (slot % 4) as f32).to_bits(),
        Slot::Uniform(_) => 0.5f32.to_bits(),
    });
    let out = run_ssa(f, &env).unwrap_or_else(|e| panic!("{e}"));
    (0..LANES)
        .map(|l| {
            [0, 1, 2, 3].map(|c| {
                f32::from_bits(out.slots[&c][l].as_ref().expect("written")[0].expect("defined"))
            })
        })
        .collect()
}

/// `vars` variables, `loops` sequential loops, loop `j` adding 1 to variable `j % vars` twice.
fn many_loops(vars: usize, loops: usize) -> String {
    let mut s = String::from("@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f {\n");
    for v in 0..vars {
        s += &format!("  var v{v} = x.x + {v}.0;\n");
    }
    for j in 0..loops {
        s += &format!(
            "  for (var i{j} = 0; i{j} < 2; i{j}++) {{ v{} += 1.0; }}\n",
            j % vars
        );
    }
    let sum: Vec<String> = (0..vars).map(|v| format!("v{v}")).collect();
    s += &format!("  return vec4({}, 0.0, 0.0, 1.0);\n}}\n", sum.join(" + "));
    s
}

#[test]
fn header_phis_follow_what_loops_assign() {
    let (vars, loops) = (150, 150);
    let f = lower(&many_loops(vars, loops));
    let phis = header_phis(&f);
    assert_eq!(phis.len(), loops);
    // Each loop assigns its counter and one variable: two phis, not one per live variable.
    assert!(phis.iter().all(|&n| n == 2), "{phis:?}");
    let want_sum = |x: f32| -> f32 {
        (0..vars)
            .map(|v| x + v as f32 + 2.0 * (loops / vars) as f32)
            .sum()
    };
    for (l, got) in run(&f).into_iter().enumerate() {
        let want = want_sum(l as f32);
        assert!(
            (got[0] - want).abs() <= 1e-3 * want.abs(),
            "lane {l}: {got:?} vs {want}"
        );
    }
}

#[test]
fn assignments_through_calls_and_private_globals_get_phis() {
    let f = lower(
        "var<private> g: f32;
         fn bump(p: ptr<function, f32>) { *p += 1.0; g += 2.0; }
         fn read_only(v: f32) -> f32 { var t = v; t *= 2.0; return t; }
         @fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f {
           var a = x.x; var b = x.y; var c = 0.0;
           for (var i = 0; i < 3; i++) { bump(&a); c += read_only(b); }
           return vec4(a, g, b, c);
         }",
    );
    // i, a, g, c: the callee's own local `t` and the untouched `b` get none.
    assert_eq!(header_phis(&f), vec![4]);
    for (l, got) in run(&f).into_iter().enumerate() {
        let (x, y) = (l as f32, l as f32 + 1.0);
        assert_eq!(got, [x + 3.0, 6.0, y, 6.0 * y], "lane {l}");
    }
}

#[test]
fn one_trip_loops_have_no_header_phis() {
    let f = lower(
        "fn f(v: f32) -> f32 { var a = v; if (v > 1.0) { return a * 2.0; } a += 1.0; return a; }
         @fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f {
           var s = x.x;
           switch i32(x.y) { case 1: { s = 10.0; } case 2: { s += 5.0; } default: { s -= 1.0; } }
           return vec4(f(x.x), s, 0.0, 1.0);
         }",
    );
    assert_eq!(header_phis(&f), vec![0, 0]);
    for (l, got) in run(&f).into_iter().enumerate() {
        let (x, y) = (l as f32, l as f32 + 1.0);
        let fx = if x > 1.0 { 2.0 * x } else { x + 1.0 };
        let s = match y as i32 {
            1 => 10.0,
            2 => x + 5.0,
            _ => x - 1.0,
        };
        assert_eq!(got, [fx, s, 0.0, 1.0], "lane {l}");
    }
}
