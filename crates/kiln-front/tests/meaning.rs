//! Small shaders whose outputs are worked out by hand (in Rust, independently of kiln), run
//! through the interpreter: the lowering preserves their meaning.

use kiln_front::{Language, Source, lower_entry_point, parse};
use kiln_interp::{Env, run_ssa};

const LANES: usize = 8;

/// Lowers `src`, runs it with input location `l` component `c` = `input(l, c, lane)` and uniform
/// word `w` = `uniform(w)`, and returns output location 0's components per lane.
fn run_with(
    lang: Language,
    src: &str,
    input: impl Fn(u32, u32, usize) -> f32,
    uniform: impl Fn(u32) -> u32,
) -> Vec<Vec<u32>> {
    let source = Source {
        name: "test".into(),
        language: lang,
        bytes: src.as_bytes().to_vec(),
    };
    let parsed = parse(&source).unwrap_or_else(|e| panic!("{e}"));
    let lowered = lower_entry_point(&parsed, None, None).unwrap_or_else(|e| panic!("{e}"));
    kiln_ir::verify(&lowered.function)
        .unwrap_or_else(|e| panic!("{}\n{}", e[0], kiln_ir::print_function(&lowered.function)));
    let env = Env::from_slots(&lowered.function, LANES, |s| match s {
        kiln_interp::Slot::Input { slot, lane } => input(slot / 4, slot % 4, lane).to_bits(),
        kiln_interp::Slot::Uniform(w) => uniform(w),
    });
    let out = run_ssa(&lowered.function, &env)
        .unwrap_or_else(|e| panic!("{e}\n{}", kiln_ir::print_function(&lowered.function)));
    (0..LANES)
        .map(|l| {
            (0..4)
                .filter_map(|c| {
                    out.slots
                        .get(&c)
                        .and_then(|v| v[l].as_ref())
                        .map(|u| u[0].unwrap_or(0xdead))
                })
                .collect()
        })
        .collect()
}

/// A WGSL fragment shader with `@location(0) x: vec4f` in and `@location(0) vec4f` out.
fn wgsl(body: &str) -> Vec<Vec<f32>> {
    let src =
        format!("@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f {{\n{body}\n}}\n");
    floats(run_with(Language::Wgsl, &src, lane_input, |w| {
        (w as f32 * 0.5 + 1.0).to_bits()
    }))
}

/// A helper-function prelude plus a body.
fn wgsl_with(prelude: &str, body: &str) -> Vec<Vec<f32>> {
    let src = format!(
        "{prelude}\n@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f {{\n{body}\n}}\n"
    );
    floats(run_with(Language::Wgsl, &src, lane_input, |w| {
        (w as f32 * 0.5 + 1.0).to_bits()
    }))
}

fn floats(v: Vec<Vec<u32>>) -> Vec<Vec<f32>> {
    v.into_iter()
        .map(|l| l.into_iter().map(f32::from_bits).collect())
        .collect()
}

/// Input component `c` of lane `l`: distinct, small, some negative.
fn lane_input(_loc: u32, c: u32, l: usize) -> f32 {
    l as f32 * 0.5 - 1.5 + c as f32
}

fn x(l: usize) -> [f32; 4] {
    [0, 1, 2, 3].map(|c| lane_input(0, c, l))
}

fn check(got: Vec<Vec<f32>>, want: impl Fn([f32; 4]) -> [f32; 4]) {
    for (l, g) in got.iter().enumerate() {
        let w = want(x(l));
        for c in 0..4 {
            let ok = (g[c] - w[c]).abs() <= 1e-5 * w[c].abs().max(1.0)
                || (g[c].is_nan() && w[c].is_nan());
            assert!(
                ok,
                "lane {l} component {c}: got {} want {} (all: {g:?} vs {w:?})",
                g[c], w[c]
            );
        }
    }
}

#[test]
fn passthrough() {
    check(wgsl("return x;"), |x| x);
}

#[test]
fn arithmetic_and_swizzles() {
    check(
        wgsl("return vec4f(x.x * 2.0 + 1.0, x.y - x.z, x.w / 2.0, -x.x);"),
        |x| [x[0] * 2.0 + 1.0, x[1] - x[2], x[3] / 2.0, -x[0]],
    );
    check(wgsl("return x.wzyx;"), |x| [x[3], x[2], x[1], x[0]]);
}

#[test]
fn dot_cross_length_normalize() {
    check(
        wgsl(
            "let c = cross(x.xyz, vec3f(0.0, 0.0, 1.0)); return vec4f(dot(x, x), length(x.xy), c.x, normalize(x.xy).x);",
        ),
        |x| {
            let len = (x[0] * x[0] + x[1] * x[1]).sqrt();
            [x.iter().map(|v| v * v).sum(), len, x[1], x[0] / len]
        },
    );
}

#[test]
fn divergent_if_else() {
    check(
        wgsl(
            "var r = x; if (x.x > 0.0) { r.y = 10.0; } else { r.y = -10.0; r.z = 5.0; } return r;",
        ),
        |x| {
            if x[0] > 0.0 {
                [x[0], 10.0, x[2], x[3]]
            } else {
                [x[0], -10.0, 5.0, x[3]]
            }
        },
    );
}

#[test]
fn for_loop_sums() {
    check(
        wgsl(
            "var s = 0.0; for (var i = 0; i < 5; i++) { s += f32(i) * x.x; } return vec4f(s, 0.0, 0.0, 1.0);",
        ),
        |x| [10.0 * x[0], 0.0, 0.0, 1.0],
    );
}

#[test]
fn loop_with_per_lane_trip_count_and_break() {
    check(
        wgsl(
            "var n = 0; var acc = 0.0; loop { if (f32(n) > x.x + 1.5) { break; } acc += 1.0; n++; } return vec4f(acc, f32(n), 0.0, 0.0);",
        ),
        |x| {
            let mut n = 0;
            while n as f32 <= x[0] + 1.5 {
                n += 1;
            }
            [n as f32, n as f32, 0.0, 0.0]
        },
    );
}

#[test]
fn continue_skips_to_the_continuing_block() {
    check(
        wgsl(
            "var s = 0; for (var i = 0; i < 6; i++) { if (i % 2 == 1) { continue; } s += i; } return vec4f(f32(s), 0.0, 0.0, 0.0);",
        ),
        |_| [6.0, 0.0, 0.0, 0.0],
    );
}

#[test]
fn while_loop_per_lane() {
    check(
        wgsl(
            "var v = x.y; var k = 0.0; while (v < 4.0) { v += 1.0; k += 1.0; } return vec4f(v, k, 0.0, 0.0);",
        ),
        |x| {
            let (mut v, mut k) = (x[1], 0.0);
            while v < 4.0 {
                v += 1.0;
                k += 1.0;
            }
            [v, k, 0.0, 0.0]
        },
    );
}

#[test]
fn nested_loops() {
    check(
        wgsl(
            "var s = 0.0; for (var i = 0; i < 3; i++) { for (var j = 0; j < 4; j++) { if (j > i) { break; } s += 1.0; } } return vec4f(s, 0.0, 0.0, 0.0);",
        ),
        |_| [6.0, 0.0, 0.0, 0.0],
    );
}

#[test]
fn switch_statement() {
    check(
        wgsl(
            "var r = 0.0; switch (i32(x.x + 1.5)) { case 0: { r = 10.0; } case 1, 2: { r = 20.0; } default: { r = 30.0; } } return vec4f(r, 0.0, 0.0, 0.0);",
        ),
        |x| {
            let r = match (x[0] + 1.5) as i32 {
                0 => 10.0,
                1 | 2 => 20.0,
                _ => 30.0,
            };
            [r, 0.0, 0.0, 0.0]
        },
    );
}

#[test]
fn function_call_with_pointer_argument() {
    check(
        wgsl_with(
            "fn bump(p: ptr<function, vec4f>, k: f32) { (*p).x += k; (*p).w = k * 2.0; }",
            "var v = x; bump(&v, 3.0); return v;",
        ),
        |x| [x[0] + 3.0, x[1], x[2], 6.0],
    );
}

#[test]
fn early_return_from_a_function() {
    check(
        wgsl_with(
            "fn f(a: f32) -> f32 { if (a < 0.0) { return -a; } for (var i = 0; i < 3; i++) { if (a > 1.0) { return a * 10.0; } } return a; }",
            "return vec4f(f(x.x), f(x.y), f(x.z), 0.0);",
        ),
        |x| {
            let f = |a: f32| {
                if a < 0.0 {
                    -a
                } else if a > 1.0 {
                    a * 10.0
                } else {
                    a
                }
            };
            [f(x[0]), f(x[1]), f(x[2]), 0.0]
        },
    );
}

#[test]
fn early_return_from_the_entry_point() {
    check(
        wgsl("if (x.x < 0.0) { return vec4f(1.0); } return vec4f(2.0);"),
        |x| if x[0] < 0.0 { [1.0; 4] } else { [2.0; 4] },
    );
}

#[test]
fn discard_drops_the_lane() {
    let src = "@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f { if (x.x < 0.0) { discard; } return x; }";
    let got = run_with(Language::Wgsl, src, lane_input, |_| 0);
    for (l, g) in got.iter().enumerate() {
        if x(l)[0] < 0.0 {
            assert!(g.is_empty(), "lane {l} was discarded but wrote {g:?}");
        } else {
            assert_eq!(
                g.iter().map(|b| f32::from_bits(*b)).collect::<Vec<_>>(),
                x(l).to_vec()
            );
        }
    }
}

#[test]
fn clamp_mix_step_smoothstep() {
    check(
        wgsl(
            "return vec4f(clamp(x.x, -0.5, 0.5), mix(x.y, x.z, 0.25), step(0.0, x.x), smoothstep(0.0, 2.0, x.y));",
        ),
        |x| {
            let t = (x[1] / 2.0).clamp(0.0, 1.0);
            [
                x[0].clamp(-0.5, 0.5),
                x[1] + (x[2] - x[1]) * 0.25,
                if x[0] < 0.0 { 0.0 } else { 1.0 },
                t * t * (3.0 - 2.0 * t),
            ]
        },
    );
}

#[test]
fn floor_fract_round_trunc_abs_sign() {
    check(
        wgsl(
            "return vec4f(floor(x.x) + fract(x.x), round(x.y * 3.0), trunc(x.z - 3.3), abs(x.x) * sign(x.x));",
        ),
        |x| {
            [
                x[0].floor() + (x[0] - x[0].floor()),
                (x[1] * 3.0).round_ties_even(),
                (x[2] - 3.3).trunc(),
                x[0],
            ]
        },
    );
}

#[test]
fn exponentials_and_power() {
    check(
        wgsl(
            "let a = abs(x.y) + 0.5; return vec4f(exp2(a), log2(a), pow(a, 1.5), sqrt(a) * inverseSqrt(a));",
        ),
        |x| {
            let a = x[1].abs() + 0.5;
            [a.exp2(), a.log2(), a.powf(1.5), a.sqrt() * (1.0 / a.sqrt())]
        },
    );
}

#[test]
fn trigonometry() {
    check(
        wgsl("return vec4f(sin(x.x), cos(x.x), atan2(x.y, 2.0), tan(0.5));"),
        |x| {
            [
                x[0].sin(),
                x[0].cos(),
                x[1].atan2(2.0),
                0.5f32.sin() / 0.5f32.cos(),
            ]
        },
    );
}

#[test]
fn matrix_times_vector_and_transpose() {
    check(
        wgsl(
            "let m = mat2x2f(1.0, 2.0, 3.0, 4.0); let v = m * x.xy; let w = transpose(m) * x.xy; return vec4f(v, w);",
        ),
        |x| {
            [
                x[0] + 3.0 * x[1],
                2.0 * x[0] + 4.0 * x[1],
                x[0] + 2.0 * x[1],
                3.0 * x[0] + 4.0 * x[1],
            ]
        },
    );
    check(
        wgsl("let m = mat2x2f(1.0, 2.0, 3.0, 4.0); let v = x.xy * m; return vec4f(v, 0.0, 0.0);"),
        |x| [x[0] + 2.0 * x[1], 3.0 * x[0] + 4.0 * x[1], 0.0, 0.0],
    );
}

/// Products of matrices applied to a vector (lowered factor by factor, `(A·B)·v = A·(B·v)`),
/// also as a row vector and as a chain of three, against the products worked out here.
#[test]
fn matrix_product_times_vector() {
    check(
        wgsl(
            "let a = mat2x2f(1.0, 2.0, 3.0, 4.0); let b = mat2x2f(x.x, 0.5, x.z, 2.0); \
             let v = (a * b) * x.zw; let w = x.xy * (a * b); let c = ((a * b) * a) * x.xy; \
             return vec4f(v.x, w.y, c);",
        ),
        |x| {
            // Column-major: a = [[1, 3], [2, 4]], b = [[x0, x2], [0.5, 2]] (rows).
            let ab = [
                [x[0] + 1.5, x[2] + 6.0],
                [2.0 * x[0] + 2.0, 2.0 * x[2] + 8.0],
            ];
            let v0 = ab[0][0] * x[2] + ab[0][1] * x[3];
            let w1 = x[0] * ab[0][1] + x[1] * ab[1][1];
            let aba = [
                [ab[0][0] + 2.0 * ab[0][1], 3.0 * ab[0][0] + 4.0 * ab[0][1]],
                [ab[1][0] + 2.0 * ab[1][1], 3.0 * ab[1][0] + 4.0 * ab[1][1]],
            ];
            [
                v0,
                w1,
                aba[0][0] * x[0] + aba[0][1] * x[1],
                aba[1][0] * x[0] + aba[1][1] * x[1],
            ]
        },
    );
}

#[test]
fn matrix_products_determinant_inverse() {
    let src = "#version 450\nlayout(location = 0) in vec4 x;\nlayout(location = 0) out vec4 o;\nvoid main() { mat3 a = mat3(2.0, 0.0, 1.0, 1.0, 3.0, 0.0, 0.0, 1.0, 4.0) * x.w; mat3 i = inverse(a); mat3 p = a * i; o = vec4(determinant(a), p[0][0], p[1][0], (i * (a * x.xyz)).z); }\n";
    let got = floats(run_with(
        Language::Glsl(naga::ShaderStage::Fragment),
        src,
        lane_input,
        |_| 0,
    ));
    // det(k·A) = k³·det(A) = 25·k³ with k = x.w; A·A⁻¹ = I.
    check(got, |x| [25.0 * x[3] * x[3] * x[3], 1.0, 0.0, x[2]]);
}

#[test]
fn integer_arithmetic_and_bits() {
    check(
        wgsl(
            "let i = i32(x.x * 4.0); let u = u32(abs(i)) + 5u; return vec4f(f32(i / 3), f32(i % 3), f32(u >> 1u), f32(countOneBits(u) + (u & 6u)));",
        ),
        |x| {
            let i = (x[0] * 4.0) as i32;
            let u = i.unsigned_abs() + 5;
            [
                (i / 3) as f32,
                (i % 3) as f32,
                (u >> 1) as f32,
                (u.count_ones() + (u & 6)) as f32,
            ]
        },
    );
}

#[test]
fn select_and_comparisons() {
    check(
        wgsl(
            "return vec4f(select(1.0, 2.0, x.x > x.y - 1.5), f32(x.x == x.x), f32(all(x > vec4f(-10.0))), f32(any(x < vec4f(-1.0))));",
        ),
        |x| {
            [
                if x[0] > x[1] - 1.5 { 2.0 } else { 1.0 },
                1.0,
                1.0,
                if x.iter().any(|v| *v < -1.0) {
                    1.0
                } else {
                    0.0
                },
            ]
        },
    );
}

#[test]
fn local_array_with_dynamic_index() {
    check(
        wgsl(
            "var a = array<f32, 4>(10.0, 20.0, 30.0, 40.0); let k = u32(x.x + 1.5) % 4u; a[k] = a[k] + 1.0; return vec4f(a[0], a[1], a[2], a[3]);",
        ),
        |x| {
            let mut a = [10.0, 20.0, 30.0, 40.0];
            let k = ((x[0] + 1.5) as u32 % 4) as usize;
            a[k] += 1.0;
            a
        },
    );
}

#[test]
fn structs_and_private_globals() {
    check(
        wgsl_with(
            "struct S { a: f32, b: vec2f } var<private> g: S = S(1.0, vec2f(2.0, 3.0));",
            "g.b.y += x.x; let s = g; return vec4f(s.a, s.b, 0.0);",
        ),
        |x| [1.0, 2.0, 3.0 + x[0], 0.0],
    );
}

#[test]
fn uniform_block_offsets() {
    // Words: 0 = a, 4..8 = v (vec4 at offset 16), 8..24 = m (mat4 at offset 32): word w holds
    // w * 0.5 + 1.
    let got = wgsl_with(
        "struct U { a: f32, v: vec4f, m: mat4x4f } @group(0) @binding(0) var<uniform> u: U;",
        "return vec4f(u.a, u.v.z, u.m[2][1], (u.m * vec4f(1.0, 0.0, 0.0, 0.0)).w);",
    );
    let w = |k: u32| k as f32 * 0.5 + 1.0;
    check(got, |_| [w(0), w(6), w(8 + 2 * 4 + 1), w(8 + 3)]);
}

#[test]
fn uniform_array_with_dynamic_index() {
    let got = wgsl_with(
        "struct U { k: array<vec4f, 3> } @group(0) @binding(0) var<uniform> u: U;",
        "let i = u32(x.x + 1.5) % 3u; return u.k[i];",
    );
    let w = |k: u32| k as f32 * 0.5 + 1.0;
    check(got, |x| {
        let i = (x[0] + 1.5) as u32 % 3;
        [0, 1, 2, 3].map(|c| w(4 * i + c))
    });
}

/// An index computed from constants only is a static one, whatever the array's length (the
/// shape of `mobile_nerf_merged`: a local set to a constant, divided, offset).
#[test]
fn index_of_constants_into_a_long_uniform_array() {
    let got = wgsl_with(
        "struct U { k: array<vec4f, 133> } @group(0) @binding(0) var<uniform> u: U;",
        "var b: i32 = 496; let i = b / 4 + 3; return u.k[i] + x * 0.0;",
    );
    let w = |k: u32| k as f32 * 0.5 + 1.0;
    check(got, |_| [0, 1, 2, 3].map(|c| w(4 * 127 + c)));
}

#[test]
fn derivatives_across_the_quad() {
    // x.x grows by 0.5 per lane: within a 2×2 quad dpdx = 0.5, dpdy = 1.0.
    check(
        wgsl("return vec4f(dpdx(x.x), dpdy(x.x), fwidth(x.x), 0.0);"),
        |_| [0.5, 1.0, 1.5, 0.0],
    );
}

#[test]
fn texture_sample_reads_the_unit_texture() {
    let src = "@group(0) @binding(0) var t: texture_2d<f32>; @group(0) @binding(1) var s: sampler;\n@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f { return textureSample(t, s, vec2f(x.x * 0.1 + 0.5, 0.25)); }";
    let got = floats(run_with(Language::Wgsl, src, lane_input, |_| 0));
    let tex = kiln_interp::Texture::procedural(0);
    check(got, |x| {
        tex.sample(x[0] * 0.1 + 0.5, 0.25).map(f32::from_bits)
    });
}

/// A cube map's face and texel from OpenGL's table 8.19 worked by hand: (x·0.13, −2, 0.3) is on
/// −Y with sc = x, tc = −z; (0.2, x·0.13, 3) on +Z with sc = x, tc = −y. No face coordinate
/// comes within 0.04 texels of a texel edge.
#[test]
fn cube_map_samples_read_the_face_of_the_major_axis() {
    let src = "@group(0) @binding(0) var t: texture_cube<f32>; @group(0) @binding(1) var s: sampler;\n@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f { let a = textureSample(t, s, vec3f(x.x * 0.13, -2.0, 0.3)); let b = textureSample(t, s, vec3f(0.2, x.x * 0.13, 3.0)); return vec4f(a.x, a.y, b.z, b.w); }";
    let got = floats(run_with(Language::Wgsl, src, lane_input, |_| 0));
    let tex = kiln_interp::Texture::procedural_cube(0);
    let texel = |face: u32, s: f64, t: f64| {
        let (i, j) = ((s * 16.0).floor() as u32, (t * 16.0).floor() as u32);
        tex.face(face)[(j * 16 + i) as usize].map(|c| c as f32 / 255.0)
    };
    check(got, |x| {
        let v = x[0] as f64 * 0.13;
        let a = texel(3, (v / 2.0 + 1.0) / 2.0, (-0.3 / 2.0 + 1.0) / 2.0);
        let b = texel(4, (0.2 / 3.0 + 1.0) / 2.0, (-v / 3.0 + 1.0) / 2.0);
        [a[0], a[1], b[2], b[3]]
    });
}

/// `textureSampleCompare` on a depth texture: 1 where the reference (clamped to [0, 1]) is at
/// most the texel's depth — its upper 24 bits over 2^24 − 1 — worked out here from the bytes.
#[test]
fn depth_comparison_against_the_texel() {
    let src = "@group(0) @binding(0) var t: texture_depth_2d; @group(0) @binding(1) var s: sampler_comparison;\n@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f { return vec4f(textureSampleCompare(t, s, vec2f(x.x * 0.1 + 0.52, 0.3), x.y * 0.2 + 0.1)); }";
    let got = floats(run_with(Language::Wgsl, src, lane_input, |_| 0));
    let tex = kiln_interp::Texture::procedural(0);
    check(got, |x| {
        let col = ((x[0] * 0.1 + 0.52) * 16.0).floor() as usize;
        let [_, g, b, a] = tex.texels[4 * 16 + col];
        let depth = (g as u32 + 256 * b as u32 + 65536 * a as u32) as f32 / 16_777_215.0;
        let reference = (x[1] * 0.2 + 0.1).clamp(0.0, 1.0);
        [(reference <= depth) as u32 as f32; 4]
    });
}

#[test]
fn conversions() {
    check(
        wgsl(
            "let i = i32(x.y * 3.0); return vec4f(f32(i), f32(u32(max(x.x, 0.0) * 2.0)), f32(bool(i)), bitcast<f32>(bitcast<u32>(x.z)));",
        ),
        |x| {
            let i = (x[1] * 3.0) as i32;
            [
                i as f32,
                ((x[0].max(0.0)) * 2.0) as u32 as f32,
                if i != 0 { 1.0 } else { 0.0 },
                x[2],
            ]
        },
    );
}

#[test]
fn vertex_shader_writes_position() {
    let src = "struct O { @builtin(position) p: vec4f, @location(0) c: vec4f }\n@vertex fn main(@location(0) x: vec4f) -> O { var o: O; o.p = vec4f(x.xy * 2.0, 0.0, 1.0); o.c = x; return o; }";
    let got = floats(run_with(Language::Wgsl, src, lane_input, |_| 0));
    check(got, |x| x);
}

#[test]
fn glsl_fragment_shader() {
    let src = "#version 450\nlayout(location = 0) in vec4 x;\nlayout(location = 0) out vec4 o;\nvoid main() { float s = 0.0; for (int i = 0; i < 3; i++) { s += x.y; } o = vec4(s, max(x.x, 0.25), mix(x.z, x.w, 0.5), 1.0); }\n";
    let got = floats(run_with(
        Language::Glsl(naga::ShaderStage::Fragment),
        src,
        lane_input,
        |_| 0,
    ));
    check(got, |x| {
        [
            x[1] + x[1] + x[1],
            x[0].max(0.25),
            x[2] + (x[3] - x[2]) * 0.5,
            1.0,
        ]
    });
}

#[test]
fn glsl_functions_with_out_parameters() {
    let src = "#version 450\nlayout(location = 0) in vec4 x;\nlayout(location = 0) out vec4 o;\nvoid split(float v, out float lo, out float hi) { lo = floor(v); hi = v - lo; }\nvoid main() { float a, b; split(x.x, a, b); o = vec4(a, b, 0.0, 0.0); }\n";
    let got = floats(run_with(
        Language::Glsl(naga::ShaderStage::Fragment),
        src,
        lane_input,
        |_| 0,
    ));
    check(got, |x| [x[0].floor(), x[0] - x[0].floor(), 0.0, 0.0]);
}

#[test]
fn texel_fetch_reads_the_texel() {
    let src = "@group(0) @binding(0) var t: texture_2d<f32>;\n@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f { return textureLoad(t, vec2i(i32(x.x * 2.0 + 3.0), 5), 0); }";
    let got = floats(run_with(Language::Wgsl, src, lane_input, |_| 0));
    let tex = kiln_interp::Texture::procedural(0);
    check(got, |x| {
        let px = (x[0] * 2.0 + 3.0) as i32;
        tex.texels[(5 * 16 + px) as usize].map(|c| c as f32 / 255.0)
    });
}
