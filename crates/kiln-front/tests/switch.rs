//! `switch` beyond the simple cases: `continue` inside a switch (nested in another switch too)
//! and cases that fall through after statements (GLSL), through the interpreter against plain
//! Rust transcriptions of each shader.

use kiln_front::{Language, Source, lower_entry_point, parse};
use kiln_interp::{Env, Slot, run_ssa};

const LANES: usize = 8;

/// Lowers, verifies and runs with input 0 of lane `l` = `(l, l + 1, l + 2, l + 3)` as floats;
/// returns output 0 per lane.
fn run(source: Source) -> Vec<[f32; 4]> {
    let parsed = parse(&source).unwrap_or_else(|e| panic!("{e}"));
    let f = lower_entry_point(&parsed, None, None)
        .unwrap_or_else(|e| panic!("{e}"))
        .function;
    let text = kiln_ir::print_function(&f);
    if let Err(e) = kiln_ir::verify(&f) {
        panic!("{}\n{text}", e[0]);
    }
    let env = Env::from_slots(&f, LANES, |s| match s {
        Slot::Input { slot, lane } => (lane as f32 + (slot % 4) as f32).to_bits(),
        Slot::Uniform(_) => 0,
    });
    let out = run_ssa(&f, &env).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (0..LANES)
        .map(|l| {
            [0, 1, 2, 3].map(|c| {
                f32::from_bits(out.slots[&c][l].as_ref().expect("written")[0].expect("defined"))
            })
        })
        .collect()
}

fn wgsl(body: &str) -> Source {
    Source {
        name: "t.wgsl".into(),
        language: Language::Wgsl,
        bytes: format!(
            "@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f {{\n{body}\n}}\n"
        )
        .into_bytes(),
    }
}

fn glsl(body: &str) -> Source {
    Source {
        name: "t.frag".into(),
        language: Language::Glsl(naga::ShaderStage::Fragment),
        bytes: format!(
            "#version 450\nlayout(location = 0) in vec4 x;\nlayout(location = 0) out vec4 o;\nvoid main() {{\n{body}\n}}\n"
        )
        .into_bytes(),
    }
}

fn check(source: Source, want: impl Fn(usize) -> [f32; 4]) {
    for (l, got) in run(source).into_iter().enumerate() {
        assert_eq!(got, want(l), "lane {l}");
    }
}

#[test]
fn continue_inside_a_switch() {
    // Per lane: i runs 0..6; `continue` skips the addition for i % 3 == 1 (and the per-lane
    // case i == lane % 4), the other cases add.
    check(
        wgsl(
            "var s = 0.0; var lane = i32(x.x);
             for (var i = 0; i < 6; i++) {
               switch i % 3 {
                 case 1: { continue; }
                 case 2: { if (i == lane % 4) { continue; } s += 10.0; }
                 default: { s += 1.0; }
               }
               s += 100.0;
             }
             return vec4(s, 0.0, 0.0, 1.0);",
        ),
        |l| {
            let mut s = 0.0;
            for i in 0..6 {
                match i % 3 {
                    1 => continue,
                    2 => {
                        if i == (l as i32) % 4 {
                            continue;
                        }
                        s += 10.0;
                    }
                    _ => s += 1.0,
                }
                s += 100.0;
            }
            [s, 0.0, 0.0, 1.0]
        },
    );
}

#[test]
fn continue_inside_nested_switches_with_continuing() {
    check(
        wgsl(
            "var s = 0.0; var t = 0.0; var lane = i32(x.x);
             var i = 0;
             loop {
               if (i >= 5) { break; }
               switch lane % 2 {
                 case 0: {
                   switch i { case 1, 3: { continue; } default: { s += 1.0; } }
                   s += 10.0;
                 }
                 default: { if (i == 2) { continue; } s += 100.0; }
               }
               s += 1000.0;
               continuing { i += 1; t += 1.0; }
             }
             return vec4(s, t, 0.0, 1.0);",
        ),
        |l| {
            let (mut s, mut t) = (0.0, 0.0);
            for i in 0..5 {
                t += 1.0;
                if l % 2 == 0 {
                    if i == 1 || i == 3 {
                        continue;
                    }
                    s += 1.0;
                    s += 10.0;
                } else {
                    if i == 2 {
                        continue;
                    }
                    s += 100.0;
                }
                s += 1000.0;
            }
            [s, t, 0.0, 1.0]
        },
    );
}

#[test]
fn cases_falling_through_after_statements() {
    // GLSL: case 0 adds 1 and falls into case 1 (adds 10, falls into 2: adds 100, breaks);
    // the default sits in the middle and falls into case 5.
    check(
        glsl(
            "float s = 0.0;
             switch (int(x.x)) {
               case 0: s += 1.0;
               case 1: s += 10.0;
               case 2: s += 100.0; break;
               default: s += 1000.0;
               case 5: s += 10000.0; break;
               case 6: s += 5.0;
             }
             o = vec4(s, 0.0, 0.0, 1.0);",
        ),
        |l| {
            let s = match l {
                0 => 111.0,
                1 => 110.0,
                2 => 100.0,
                5 => 10000.0,
                6 => 5.0,
                _ => 11000.0,
            };
            [s, 0.0, 0.0, 1.0]
        },
    );
}

#[test]
fn fall_through_into_a_case_with_a_conditional_break_and_a_continue() {
    check(
        glsl(
            "float s = 0.0;
             for (int i = 0; i < 4; i++) {
               switch (i) {
                 case 0: s += 1.0;
                 case 1: if (x.x > 3.0) { s += 7.0; break; } s += 10.0;
                 case 2: if (x.x < 2.0) { continue; } s += 100.0; break;
                 default: s += 1000.0;
               }
               s += 0.5;
             }
             o = vec4(s, 0.0, 0.0, 1.0);",
        ),
        |l| {
            let x = l as f32;
            let mut s = 0.0f32;
            for i in 0..4 {
                let mut skip = false;
                let mut k = i;
                // case labels 0, 1, 2 fall through in order; default is alone.
                if k <= 2 {
                    loop {
                        match k {
                            0 => s += 1.0,
                            1 => {
                                if x > 3.0 {
                                    s += 7.0;
                                    break;
                                }
                                s += 10.0;
                            }
                            _ => {
                                if x < 2.0 {
                                    skip = true;
                                    break;
                                }
                                s += 100.0;
                                break;
                            }
                        }
                        k += 1;
                    }
                } else {
                    s += 1000.0;
                }
                if !skip {
                    s += 0.5;
                }
            }
            [s, 0.0, 0.0, 1.0]
        },
    );
}
