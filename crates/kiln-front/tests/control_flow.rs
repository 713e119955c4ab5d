//! Harder control flow through the interpreter, each expected result worked out by a plain Rust
//! transcription of the shader: `continue` reaching `continuing` and `break if` from nested ifs,
//! returns from inside nested loops of a function inlined twice, `switch` inside loops, discard
//! followed by loops, values that leave divergent loops, and variables changed on the path that
//! breaks. Also: unsupported constructs and malformed input are errors, never panics.

use kiln_front::{Language, Source, lower_entry_point, parse};
use kiln_interp::{Env, run_ssa};

const LANES: usize = 8;

fn source(lang: Language, src: &[u8]) -> Source {
    Source {
        name: "test".into(),
        language: lang,
        bytes: src.to_vec(),
    }
}

/// Lowers and verifies a WGSL fragment shader with input `@location(0) x: vec4f`, runs it with
/// lane `l`'s input `x = (l/2 - 1.5, l/2 - 0.5, l/2 + 0.5, l/2 + 1.5)`, and returns output
/// location 0 per lane (`None` for a discarded lane).
fn run(body: &str, prelude: &str) -> Vec<Option<[f32; 4]>> {
    let src = format!(
        "{prelude}\n@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f {{\n{body}\n}}\n"
    );
    let parsed = parse(&source(Language::Wgsl, src.as_bytes())).unwrap_or_else(|e| panic!("{e}"));
    let lowered = lower_entry_point(&parsed, None, None).unwrap_or_else(|e| panic!("{e}"));
    let text = kiln_ir::print_function(&lowered.function);
    if let Err(e) = kiln_ir::verify(&lowered.function) {
        panic!("{}\n{text}", e[0]);
    }
    // These shaders read no uniform words.
    let env = Env::from_slots(&lowered.function, LANES, |s| match s {
        kiln_interp::Slot::Input { slot, lane } => x(lane)[(slot % 4) as usize].to_bits(),
        kiln_interp::Slot::Uniform(_) => 0,
    });
    let out = run_ssa(&lowered.function, &env).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (0..LANES)
        .map(|l| {
            let comps: Vec<f32> = (0..4u32)
                .filter_map(|c| {
                    out.slots
                        .get(&c)
                        .and_then(|v| v[l].as_ref())
                        .map(|u| f32::from_bits(u[0].unwrap_or(0xdead)))
                })
                .collect();
            match comps.len() {
                0 => None,
                4 => Some([comps[0], comps[1], comps[2], comps[3]]),
                n => panic!("lane {l} wrote {n} components\n{text}"),
            }
        })
        .collect()
}

fn x(l: usize) -> [f32; 4] {
    [0, 1, 2, 3].map(|c| l as f32 * 0.5 - 1.5 + c as f32)
}

fn check(body: &str, prelude: &str, want: impl Fn([f32; 4]) -> Option<[f32; 4]>) {
    for (l, got) in run(body, prelude).into_iter().enumerate() {
        let want = want(x(l));
        let same = match (got, want) {
            (Some(g), Some(w)) => g
                .iter()
                .zip(w)
                .all(|(g, w)| (g - w).abs() <= 1e-5 * w.abs().max(1.0)),
            (None, None) => true,
            _ => false,
        };
        assert!(
            same,
            "lane {l} (x = {:?}): got {got:?}, want {want:?}",
            x(l)
        );
    }
}

#[test]
fn continue_from_a_nested_if_runs_continuing_and_break_if() {
    // The per-lane `continue` must still run the continuing block (i += 1, t += 100) and the
    // `break if`, for every lane, at different iterations.
    check(
        "var i = 0; var s = 0.0; var t = 0.0;
         loop {
           if (f32(i) < x.y) { if (i % 2 == 0) { s += 1.0; continue; } s += 10.0; }
           t += 1.0;
           continuing { i += 1; t += 100.0; break if i >= 5; }
         }
         return vec4f(s, t, f32(i), 0.0);",
        "",
        |x| {
            let (mut i, mut s, mut t) = (0, 0.0f32, 0.0f32);
            loop {
                let mut skip = false;
                if (i as f32) < x[1] {
                    if i % 2 == 0 {
                        s += 1.0;
                        skip = true;
                    } else {
                        s += 10.0;
                    }
                }
                if !skip {
                    t += 1.0;
                }
                i += 1;
                t += 100.0;
                if i >= 5 {
                    break;
                }
            }
            Some([s, t, i as f32, 0.0])
        },
    );
}

#[test]
fn return_from_nested_loops_of_a_function_inlined_twice() {
    check(
        "return vec4f(g(x.x), g(x.w), g(-x.y), 1.0);",
        "fn g(a: f32) -> f32 {
           var acc = 0.0;
           for (var i = 0; i < 4; i++) {
             for (var j = 0; j < 4; j++) {
               acc += 1.0;
               if (f32(i * 4 + j) > a * 2.0) { return acc + 0.5; }
             }
           }
           return -acc;
         }",
        |x| {
            let g = |a: f32| {
                let mut acc = 0.0;
                for i in 0..4 {
                    for j in 0..4 {
                        acc += 1.0;
                        if ((i * 4 + j) as f32) > a * 2.0 {
                            return acc + 0.5;
                        }
                    }
                }
                -acc
            };
            Some([g(x[0]), g(x[3]), g(-x[1]), 1.0])
        },
    );
}

#[test]
fn switch_with_break_inside_a_loop() {
    // `break` inside a case leaves the switch, not the loop.
    check(
        "var s = 0.0;
         for (var i = 0; i < 6; i++) {
           switch (i % 3) {
             case 0: { if (x.x > 0.0) { break; } s += 1.0; }
             case 1: { s += 10.0; }
             default: { s += 100.0; }
           }
           s += 1000.0;
         }
         return vec4f(s, 0.0, 0.0, 0.0);",
        "",
        |x| {
            let mut s = 0.0;
            for i in 0..6 {
                match i % 3 {
                    0 => {
                        if x[0] <= 0.0 {
                            s += 1.0;
                        }
                    }
                    1 => s += 10.0,
                    _ => s += 100.0,
                }
                s += 1000.0;
            }
            Some([s, 0.0, 0.0, 0.0])
        },
    );
}

#[test]
fn return_inside_a_switch_inside_a_loop() {
    check(
        "for (var i = 0; i < 4; i++) {
           switch (i) {
             case 2: { if (x.x > -0.5) { return vec4f(f32(i), x.x, 0.0, 0.0); } }
             default: { }
           }
         }
         return vec4f(-1.0);",
        "",
        |x| {
            if x[0] > -0.5 {
                Some([2.0, x[0], 0.0, 0.0])
            } else {
                Some([-1.0; 4])
            }
        },
    );
}

#[test]
fn discard_then_a_loop_for_the_remaining_lanes() {
    check(
        "if (x.y < 0.0) { discard; }
         var p = 1.0;
         for (var i = 0; i < i32(x.y * 2.0); i++) { p *= 2.0; }
         return vec4f(p, x.y, 0.0, 1.0);",
        "",
        |x| {
            if x[1] < 0.0 {
                return None;
            }
            let mut p = 1.0f32;
            for _ in 0..(x[1] * 2.0) as i32 {
                p *= 2.0;
            }
            Some([p, x[1], 0.0, 1.0])
        },
    );
}

#[test]
fn uniform_counter_leaves_a_divergent_loop() {
    // `i` is computed from constants only, but lanes leave the loop at different iterations:
    // after the loop its value differs per lane (temporal divergence).
    check(
        "var i = 0;
         loop { if (f32(i) > x.x + 1.0) { break; } i += 1; }
         var r = 0.0;
         if (i > 2) { r = 1.0; }
         return vec4f(f32(i), r, 0.0, 0.0);",
        "",
        |x| {
            let mut i = 0;
            while (i as f32) <= x[0] + 1.0 {
                i += 1;
            }
            Some([i as f32, if i > 2 { 1.0 } else { 0.0 }, 0.0, 0.0])
        },
    );
}

#[test]
fn variables_changed_on_the_breaking_path() {
    check(
        "var a = 0.0; var b = 0.0;
         for (var i = 0; i < 8; i++) {
           if (f32(i) >= x.z) { a = f32(i) * 3.0; break; } else { b += 1.0; }
           if (i == 5) { a = -1.0; break; }
         }
         return vec4f(a, b, 0.0, 0.0);",
        "",
        |x| {
            let (mut a, mut b) = (0.0f32, 0.0f32);
            for i in 0..8 {
                if i as f32 >= x[2] {
                    a = i as f32 * 3.0;
                    break;
                } else {
                    b += 1.0;
                }
                if i == 5 {
                    a = -1.0;
                    break;
                }
            }
            Some([a, b, 0.0, 0.0])
        },
    );
}

#[test]
fn both_sides_of_an_if_leave_the_loop() {
    check(
        "var k = 0.0;
         loop { k += 1.0; if (k > x.w) { break; } else { if (k > 3.0) { break; } continue; } }
         return vec4f(k, 0.0, 0.0, 0.0);",
        "",
        |x| {
            let mut k = 0.0f32;
            loop {
                k += 1.0;
                if k > x[3] || k > 3.0 {
                    break;
                }
            }
            Some([k, 0.0, 0.0, 0.0])
        },
    );
}

/// The message of a failed lowering (parse or lower), or `None` when it lowered.
fn failure(lang: Language, src: &[u8]) -> Option<String> {
    let parsed = match parse(&source(lang, src)) {
        Ok(p) => p,
        Err(e) => return Some(e.to_string()),
    };
    lower_entry_point(&parsed, None, None)
        .err()
        .map(|e| e.to_string())
}

#[test]
fn unsupported_constructs_are_reported() {
    let storage = "@group(0) @binding(0) var<storage, read> b: array<f32>;
        @fragment fn main() -> @location(0) vec4f { return vec4f(b[0]); }";
    let msg = failure(Language::Wgsl, storage.as_bytes()).expect("storage buffers are refused");
    assert!(msg.contains("unsupported: storage buffers"), "{msg}");
    // The error points at the global's declaration.
    let parsed = parse(&source(Language::Wgsl, storage.as_bytes())).expect("valid");
    match lower_entry_point(&parsed, None, None) {
        Err(kiln_front::FrontError::Unsupported {
            span: Some(span), ..
        }) => assert!(storage[span].starts_with("var<storage"), "{storage}"),
        other => panic!(
            "expected an unsupported error with a span: {:?}",
            other.err()
        ),
    }
    // A storage buffer that only another entry point uses does not stop this one.
    let shared = "@group(0) @binding(0) var<storage, read> b: array<f32>;
        @vertex fn vs() -> @builtin(position) vec4f { return vec4f(b[0]); }
        @fragment fn fs() -> @location(0) vec4f { return vec4f(1.0); }";
    let parsed = parse(&source(Language::Wgsl, shared.as_bytes())).expect("valid");
    let lowered = lower_entry_point(&parsed, None, Some("fs")).expect("fs does not use b");
    kiln_ir::verify(&lowered.function).expect("verifies");
    let msg = match lower_entry_point(&parsed, None, Some("vs")) {
        Err(e) => e,
        Ok(_) => panic!("vs uses b"),
    };
    assert!(msg.to_string().contains("storage buffers"), "{msg}");
    let compute = "@compute @workgroup_size(1) fn main() {}";
    let msg = failure(Language::Wgsl, compute.as_bytes()).expect("no vertex/fragment entry");
    assert!(!msg.is_empty());
}

#[test]
fn malformed_input_is_an_error_not_a_panic() {
    let cases: &[(Language, &[u8])] = &[
        (Language::Wgsl, b"@fragment fn main( -> {"),
        (Language::Wgsl, b"\xff\xfe not utf-8"),
        (Language::SpirV, b"\x03\x02\x23\x07\x00\x00\x01\x00garbage"),
        (Language::SpirV, b""),
        (
            Language::Wgsl,
            b"@fragment fn main() -> @location(0) vec4f { return 1.0; }",
        ),
    ];
    for (lang, src) in cases {
        assert!(failure(*lang, src).is_some(), "{src:?} was accepted");
    }
}

/// Lowers `src`, gives uniform word `w` the value `w / 2 + 1` and every input the slot number
/// plus the lane, and returns, per lane, the first unit written to each output slot.
fn run_any(
    lang: Language,
    src: &str,
) -> (
    kiln_front::Interface,
    std::collections::BTreeMap<u32, Vec<f32>>,
) {
    let parsed = parse(&source(lang, src.as_bytes())).unwrap_or_else(|e| panic!("{e}"));
    let lowered = lower_entry_point(&parsed, None, None).unwrap_or_else(|e| panic!("{e}"));
    let text = kiln_ir::print_function(&lowered.function);
    if let Err(e) = kiln_ir::verify(&lowered.function) {
        panic!("{}\n{text}", e[0]);
    }
    let env = Env::from_slots(&lowered.function, LANES, |s| match s {
        kiln_interp::Slot::Input { slot, lane } => ((slot + lane as u32) as f32).to_bits(),
        kiln_interp::Slot::Uniform(w) => (w as f32 * 0.5 + 1.0).to_bits(),
    });
    let out = run_ssa(&lowered.function, &env).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let slots = out
        .slots
        .iter()
        .map(|(&s, lanes)| {
            let v = lanes
                .iter()
                .map(|u| f32::from_bits(u.as_ref().and_then(|u| u[0]).unwrap_or(0xdead)))
                .collect();
            (s, v)
        })
        .collect();
    (lowered.interface, slots)
}

#[test]
#[allow(clippy::needless_range_loop)] // lanes index several slot vectors
fn glsl_uniform_block_follows_std140() {
    // std140: a[3] at bytes 0, 16, 32 (stride 16); b at 48; c at 60; m's columns at 64, 80, 96.
    // Word w holds w / 2 + 1: a[2] = word 8 -> 5, b.z = word 14 -> 8, c = word 15 -> 8.5,
    // m[1][2] = word 22 -> 12.
    let src = "#version 450
        layout(std140, set = 0, binding = 0) uniform Block { float a[3]; vec3 b; float c; mat3 m; } u;
        layout(location = 0) out vec4 o;
        void main() { o = vec4(u.a[2], u.b.z, u.c, u.m[1][2]); }";
    let (iface, out) = run_any(Language::Glsl(naga::ShaderStage::Fragment), src);
    assert_eq!(iface.uniforms.len(), 1);
    assert_eq!(iface.uniforms[0].base, 0);
    for l in 0..LANES {
        let got: Vec<f32> = (0..4).map(|c| out[&c][l]).collect();
        assert_eq!(got, [5.0, 8.0, 8.5, 12.0], "lane {l}");
    }
}

#[test]
#[allow(clippy::needless_range_loop)] // lanes index several slot vectors
fn vertex_built_ins_and_attributes() {
    // Inputs: slot s of lane l holds s + l; location 1 component 1 is slot 5, vertex_index 1007.
    // vertex_index arrives as the bits of a float here, so it is reinterpreted back.
    let src = "struct O { @builtin(position) p: vec4f, @location(2) v: f32 }
        @vertex fn main(@location(1) a: vec2f, @builtin(vertex_index) i: u32) -> O {
          var o: O;
          o.p = vec4f(a.y, a.x * 2.0, bitcast<f32>(i), 1.0);
          o.v = a.x + a.y;
          return o;
        }";
    let (_, out) = run_any(Language::Wgsl, src);
    for l in 0..LANES {
        let lf = l as f32;
        assert_eq!(out[&1100][l], 5.0 + lf, "position.x");
        assert_eq!(out[&1101][l], 2.0 * (4.0 + lf), "position.y");
        assert_eq!(out[&1102][l], 1007.0 + lf, "position.z");
        assert_eq!(out[&1103][l], 1.0, "position.w");
        assert_eq!(out[&8][l], 9.0 + 2.0 * lf, "location 2");
    }
}

#[test]
fn two_dynamic_indices_in_one_access() {
    // `m[i][j]` on a local array of arrays and a matrix column: both indices select among the
    // product of their counts, for loads and for stores.
    check(
        "var a: array<array<f32, 3>, 4>;
         for (var r = 0; r < 4; r++) { for (var c = 0; c < 3; c++) { a[r][c] = f32(r * 10 + c); } }
         let i = i32(x.x + 1.5) % 4;
         let j = i32(x.y + 0.5) % 3;
         a[j][i % 3] = -1.0;
         var m = mat3x3f(vec3f(1.0, 2.0, 3.0), vec3f(4.0, 5.0, 6.0), vec3f(7.0, 8.0, 9.0));
         m[j][i % 3] = 100.0;
         return vec4f(a[i][j], a[j][i % 3], m[j][i % 3] + m[i % 3][j], a[3][2]);",
        "",
        |x| {
            let mut a = [[0.0f32; 3]; 4];
            for (r, row) in a.iter_mut().enumerate() {
                for (c, v) in row.iter_mut().enumerate() {
                    *v = (r * 10 + c) as f32;
                }
            }
            let i = ((x[0] + 1.5) as i32 % 4) as usize;
            let j = ((x[1] + 0.5) as i32 % 3) as usize;
            a[j][i % 3] = -1.0;
            let mut m = [[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]];
            m[j][i % 3] = 100.0;
            Some([a[i][j], a[j][i % 3], m[j][i % 3] + m[i % 3][j], a[3][2]])
        },
    );
}

#[test]
fn switch_default_before_other_cases() {
    // WGSL allows `default` anywhere; values that match a later case must still reach it.
    check(
        "var r = 0.0;
         switch (i32(x.x + 1.5)) {
           case 0, default: { r = 1.0; }
           case 1: { r = 2.0; }
           case 3: { }
           case 4: { r = 4.0; }
         }
         return vec4f(r, 0.0, 0.0, 0.0);",
        "",
        |x| {
            let r = match (x[0] + 1.5) as i32 {
                1 => 2.0,
                3 => 0.0,
                4 => 4.0,
                _ => 1.0,
            };
            Some([r, 0.0, 0.0, 0.0])
        },
    );
}
