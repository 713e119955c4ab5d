//! The example fragment shaders rendered in the simulator and compared, pixel by pixel, with
//! the interpreter running the generic function they were compiled from; a PNG texture
//! checked against its own texels.

use kiln::pipeline::{self, Compilation, EntryPoint, Options};
use kiln::run::{draw as render, read_png, write_png};
use kiln_vc4::render::Rendered;
use std::path::{Path, PathBuf};

/// A fragment shader file compiled as `kiln run` compiles it.
fn prepare(path: &Path) -> Compilation {
    let shader = pipeline::read_shader(path).unwrap();
    let entry = EntryPoint {
        stage: Some(kiln_front::interface::Stage::Fragment),
        name: None,
    };
    pipeline::compile(&shader, &entry, &Options::default()).unwrap()
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-run-examples-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn draw(p: &Compilation, w: u32, h: u32, sets: &[&str], textures: &[String]) -> Rendered {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    render(p, w, h, &sets, textures).unwrap().0
}

/// Every pixel within 1/255 per channel of the interpreter's.
fn assert_agrees(out: &Rendered, what: &str) {
    assert_eq!(out.simulated.len(), (out.width * out.height) as usize);
    for (i, (a, b)) in out.simulated.iter().zip(&out.reference).enumerate() {
        for k in 0..4 {
            assert!(
                a[k].abs_diff(b[k]) <= 1,
                "{what}: pixel ({}, {}) simulator {a:?}, interpreter {b:?}",
                i as u32 % out.width,
                i as u32 / out.width
            );
        }
    }
    assert_eq!(out.differing, 0, "{what}");
    assert_eq!(
        out.mismatched, 0,
        "{what}: the simulator differs from the selected program"
    );
}

/// The exact check catches a code generator that does not do what the selected program says:
/// the selected program's alpha changed under the same machine code.
#[test]
fn a_program_unlike_its_selected_function_is_caught() {
    let mut p = prepare(&example("rings.frag"));
    let out = draw(&p, 8, 4, &["progress=0.5"], &[]);
    assert_eq!(out.mismatched, 0);
    let ssa = &mut p.compiled.ssa;
    let output = ssa
        .blocks
        .iter_mut()
        .flat_map(|b| b.insts.iter_mut())
        .filter(|i| i.op == kiln_ir::Opcode::Output)
        .last()
        .expect("an output");
    output.operands[0].value = kiln_ir::Value::Const(0.5f32.to_bits());
    let out = draw(&p, 8, 4, &["progress=0.5"], &[]);
    assert_eq!(
        out.mismatched, 32,
        "every pixel's changed channel must be caught"
    );
    assert!(out.first_mismatch == Some((0, 0)));
}

/// An image that is not one flat colour (the shader really drew something).
fn distinct_colours(out: &Rendered) -> usize {
    let mut v = out.simulated.clone();
    v.sort_unstable();
    v.dedup();
    v.len()
}

#[test]
fn procedural_example_agrees_with_the_interpreter() {
    let p = prepare(&example("rings.frag"));
    // 21×11: batches cut by both image edges.
    for progress in ["0", "0.35", "1"] {
        let set = format!("progress={progress}");
        let out = draw(&p, 21, 11, &[&set], &[]);
        assert_agrees(&out, &set);
        assert!(distinct_colours(&out) > 20, "{set}: a flat image");
    }
    let out = draw(&p, 16, 16, &["rings=3", "progress=0.5"], &[]);
    assert_agrees(&out, "rings=3");
    // The uniform matters.
    let other = draw(&p, 16, 16, &["progress=0.5"], &[]);
    assert_ne!(out.simulated, other.simulated);
}

#[test]
fn textured_example_agrees_with_the_interpreter() {
    let p = prepare(&example("wipe.frag"));
    for progress in ["0", "0.5", "1"] {
        let set = format!("progress={progress}");
        let out = draw(&p, 24, 10, &[&set], &[]);
        assert_agrees(&out, &set);
        assert!(distinct_colours(&out) >= 2, "{set}: a flat image");
    }
}

/// A PNG texture in T-format (both sides > 16) and one in LT-format, of sides that are not
/// powers of two: the render agrees with the interpreter, and where the wipe shows only the
/// second texture, each pixel is its texel (nearest, repeat) times the tint.
#[test]
fn png_textures_are_sampled_as_the_interpreter_samples_them() {
    let d = dir("png");
    let big = d.join("big.png");
    let small = d.join("small.png");
    let (bw, bh) = (40u32, 23u32);
    let texels: Vec<[u8; 4]> = (0..bw * bh)
        .map(|i| {
            let (x, y) = (i % bw, i / bw);
            [(x * 6) as u8, (y * 11) as u8, ((x * y) % 256) as u8, 255]
        })
        .collect();
    write_png(&big, bw, bh, &texels).unwrap();
    let small_texels: Vec<[u8; 4]> = (0..7 * 5).map(|i| [(i * 7) as u8, 200, 30, 128]).collect();
    write_png(&small, 7, 5, &small_texels).unwrap();
    let back = read_png(&big).unwrap();
    assert_eq!((back.width, back.height), (bw, bh));
    assert_eq!(back.texels, texels);

    let p = prepare(&example("wipe.frag"));
    let tex = |a: &Path, b: &Path| {
        vec![
            format!("0={}", a.display()),
            format!("to_image={}", b.display()),
        ]
    };
    for (a, b) in [(&small, &big), (&big, &small)] {
        for progress in ["0.5", "1"] {
            let set = format!("progress={progress}");
            let out = draw(&p, 33, 18, &[&set], &tex(a, b));
            assert_agrees(&out, &format!("{set} {}", b.display()));
        }
    }
    // progress = 1: the colour is texture(to_image, 2·uv) × (0.6, 0.8, 1.0, 1.0).
    let (w, h) = (33u32, 18u32);
    let out = draw(&p, w, h, &["progress=1"], &tex(&small, &big));
    let tint = [0.6f32, 0.8, 1.0, 1.0];
    for y in 0..h {
        for x in 0..w {
            let s = 2.0 * (x as f32 + 0.5) / w as f32;
            let t = 2.0 * (y as f32 + 0.5) / h as f32;
            let tx = ((s * bw as f32).floor() as u32) % bw;
            let ty = ((t * bh as f32).floor() as u32) % bh;
            let texel = texels[(ty * bw + tx) as usize];
            let got = out.simulated[(y * w + x) as usize];
            for k in 0..4 {
                let want = (texel[k] as f32 / 255.0 * tint[k] * 255.0).round();
                assert!(
                    (got[k] as f32 - want).abs() <= 1.0,
                    "pixel ({x}, {y}) channel {k}: {} for texel {texel:?}",
                    got[k]
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A WGSL shader: a uniform that is not a block, an integer vector uniform, a second input set
/// by location, SFU math, and one image both sampled and size-queried (two texture units
/// sharing the file given for it).
#[test]
fn wgsl_inputs_uniforms_and_texture_sizes() {
    let d = dir("wgsl");
    let shader = d.join("s.wgsl");
    std::fs::write(
        &shader,
        "
struct VOut { @builtin(position) pos: vec4<f32>, @location(0) uv: vec2<f32>, @location(1) tint: vec3<f32> }
@group(0) @binding(0) var<uniform> progress: f32;
@group(0) @binding(1) var<uniform> k: vec2<i32>;
@group(0) @binding(2) var t: texture_2d<f32>;
@group(0) @binding(3) var s: sampler;
@fragment
fn main(v: VOut) -> @location(0) vec4<f32> {
    let sz = vec2<f32>(textureDimensions(t));
    let c = textureSample(t, s, v.uv * sz / 64.0);
    let e = exp2(v.uv.x * 3.0) / 8.0;
    let l = log2(1.0 + v.uv.y * 7.0) / 3.0;
    let r = 1.0 / (1.0 + v.pos.x * 0.1);
    return vec4<f32>(c.r * e, l * progress + f32(k.y) * 0.1, r, inverseSqrt(1.0 + v.uv.y)) * vec4<f32>(v.tint, 1.0);
}
",
    )
    .unwrap();
    let png = d.join("t.png");
    let texels: Vec<[u8; 4]> = (0..30 * 20)
        .map(|i| [(i % 30 * 8) as u8, (i / 30 * 12) as u8, 77, 255])
        .collect();
    write_png(&png, 30, 20, &texels).unwrap();
    let p = prepare(&shader);
    let given = vec![format!("2={}", png.display())];
    let sets = ["progress=0.5", "k=0,3", "@1=1,0.5,1"];
    let out = draw(&p, 19, 13, &sets, &given);
    assert_agrees(&out, "wgsl");
    assert!(distinct_colours(&out) > 20);
    // The checkerboard (64×64) in place of the 30×20 file changes the size words and the texels.
    let other = draw(&p, 19, 13, &sets, &[]);
    assert_agrees(&other, "wgsl, checkerboard");
    assert_ne!(out.simulated, other.simulated);
    // Unset, the second input is 0: blue and green and red vanish.
    let black = draw(&p, 8, 2, &["progress=0.5"], &given);
    assert_agrees(&black, "wgsl, tint 0");
    assert!(black.simulated.iter().all(|px| px[..3] == [0, 0, 0]));
    let _ = std::fs::remove_dir_all(&d);
}

/// A cube map from six PNG files (2×2, each texel its own colour): the render agrees with the
/// interpreter, and each pixel is the texel OpenGL's face table (8.19) picks, worked out here
/// by hand for the direction (2u − 1, 1 − 2v, 0.6). Five files, or a cube map's files given to
/// a 2D sampler, are refused by name.
#[test]
fn cube_maps_from_six_pngs() {
    let d = dir("cube");
    let shader = d.join("sky.wgsl");
    std::fs::write(
        &shader,
        "
@group(0) @binding(0) var sky: texture_cube<f32>;
@group(0) @binding(1) var s: sampler;
@fragment
fn main(@location(0) uv: vec2<f32>) -> @location(0) vec4<f32> {
    return textureSample(sky, s, vec3<f32>(uv.x * 2.0 - 1.0, 1.0 - uv.y * 2.0, 0.6));
}
",
    )
    .unwrap();
    let colour = |f: u32, i: u32, j: u32| {
        [
            (f * 40 + 10) as u8,
            (i * 200 + 20) as u8,
            (j * 200 + 20) as u8,
            255,
        ]
    };
    let files: Vec<PathBuf> = (0..6)
        .map(|f| {
            let png = d.join(format!("face{f}.png"));
            let texels: Vec<[u8; 4]> = (0..4).map(|k| colour(f, k % 2, k / 2)).collect();
            write_png(&png, 2, 2, &texels).unwrap();
            png
        })
        .collect();
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let p = prepare(&shader);
    let given = vec![format!("0={}", names.join(","))];
    // 20×14: |x| = odd/20 and |y| = odd/14 are never equal nor 0.6, so no pixel sits on a tie
    // between faces, where the exact and the hardware's arithmetic may choose apart.
    let (w, h) = (20u32, 14u32);
    let out = draw(&p, w, h, &[], &given);
    assert_agrees(&out, "cube map");
    let mut faces_seen = std::collections::BTreeSet::new();
    for py in 0..h {
        for px in 0..w {
            let x = 2.0 * (px as f64 + 0.5) / w as f64 - 1.0;
            let y = 1.0 - 2.0 * (py as f64 + 0.5) / h as f64;
            let z = 0.6;
            // (face, sc, tc, |ma|) by the table: +X (−z, −y), −X (z, −y), +Y (x, z), −Y (x, −z),
            // +Z (x, −y); x before y before z among equal magnitudes.
            let (f, sc, tc, ma) = if x.abs() >= y.abs() && x.abs() >= z {
                if x >= 0.0 {
                    (0, -z, -y, x.abs())
                } else {
                    (1, z, -y, x.abs())
                }
            } else if y.abs() >= z {
                if y >= 0.0 {
                    (2, x, z, y.abs())
                } else {
                    (3, x, -z, y.abs())
                }
            } else {
                (4, x, -y, z)
            };
            let texel = |c: f64| (((c / ma + 1.0) / 2.0 * 2.0).floor() as u32).min(1);
            faces_seen.insert(f);
            assert_eq!(
                out.simulated[(py * w + px) as usize],
                colour(f, texel(sc), texel(tc)),
                "pixel ({px}, {py}): face {f}"
            );
        }
    }
    assert_eq!(faces_seen.len(), 5, "every face but -Z is in view");
    // The built-in checkerboard cube map when no files are given.
    assert_agrees(&draw(&p, 12, 12, &[], &[]), "checkerboard cube map");
    let five = vec![format!("0={}", names[..5].join(","))];
    let e = render(&p, 8, 8, &[], &five).unwrap_err();
    assert!(e.contains("six PNG files"), "{e}");
    let one = vec![format!("0={}", names[0])];
    let e = render(&p, 8, 8, &[], &one).unwrap_err();
    assert!(e.contains("six PNG files"), "{e}");
    let flat = prepare(&example("wipe.frag"));
    let e = render(&flat, 8, 8, &[], &[format!("0={}", names.join(","))]).unwrap_err();
    assert!(e.contains("takes one PNG file"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

/// `textureLoad` of a 7×5 PNG (its sizes the driver's 1/width and 1/height): each pixel is the
/// texel at its integer coordinates, wrapped where they fall left of or above the image.
#[test]
fn texel_fetches_from_a_png() {
    let d = dir("fetch");
    let shader = d.join("fetch.wgsl");
    std::fs::write(
        &shader,
        "
@group(0) @binding(0) var t: texture_2d<f32>;
@fragment
fn main(@location(0) uv: vec2<f32>) -> @location(0) vec4<f32> {
    return textureLoad(t, vec2<i32>(floor(uv * vec2<f32>(10.0, 8.0))) - vec2<i32>(2, 1), 0);
}
",
    )
    .unwrap();
    let (tw, th) = (7u32, 5u32);
    let texels: Vec<[u8; 4]> = (0..tw * th)
        .map(|i| [(i * 7) as u8, (i % tw * 30) as u8, (i / tw * 50) as u8, 255])
        .collect();
    let png = d.join("t.png");
    write_png(&png, tw, th, &texels).unwrap();
    let p = prepare(&shader);
    let (w, h) = (20u32, 16u32);
    let out = draw(&p, w, h, &[], &[format!("0={}", png.display())]);
    assert_agrees(&out, "textureLoad");
    for py in 0..h {
        for px in 0..w {
            let x = ((px as f32 + 0.5) / w as f32 * 10.0).floor() as i32 - 2;
            let y = ((py as f32 + 0.5) / h as f32 * 8.0).floor() as i32 - 1;
            let (tx, ty) = (
                x.rem_euclid(tw as i32) as u32,
                y.rem_euclid(th as i32) as u32,
            );
            assert_eq!(
                out.simulated[(py * w + px) as usize],
                texels[(ty * tw + tx) as usize],
                "pixel ({px}, {py}) fetches ({x}, {y})"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `gl_FrontFacing`: the `rev_flag` read, true on a front face and false on a back face, each
/// image exact against the selected program and equal to the interpreter's.
#[test]
fn front_facing_reads_the_face() {
    let d = dir("front-facing");
    let path = d.join("face.frag");
    std::fs::write(
        &path,
        "#version 450
layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 o;
void main() { o = gl_FrontFacing ? vec4(uv, 1.0, 1.0) : vec4(0.25, 0.5, 0.0, 1.0); }
",
    )
    .unwrap();
    let p = prepare(&path);
    let face = |back: bool| kiln::run::draw_face(&p, 8, 4, &[], &[], back).unwrap().0;
    let (front, back) = (face(false), face(true));
    assert_agrees(&front, "front");
    assert_agrees(&back, "back");
    assert!(distinct_colours(&front) > 8, "the front face draws uv");
    assert_eq!(distinct_colours(&back), 1, "the back face draws one colour");
    assert_eq!(back.reference[0], [64, 128, 0, 255]);
    let _ = std::fs::remove_dir_all(&d);
}

/// `kiln run` on every corpus fragment shader kiln compiles (16×16, default uniforms, the
/// checkerboard textures): the simulator agrees exactly with the selected program on every
/// pixel. Long: `cargo test --release --test run_examples -- --ignored`.
#[test]
#[ignore]
fn every_corpus_fragment_shader_renders_exactly() {
    use rayon::prelude::*;
    let dir = Path::new("../shared/corpus");
    let files = kiln::corpus::files(dir).expect("the corpus");
    let results: Vec<(String, Result<usize, String>)> = files
        .par_iter()
        .flat_map_iter(|path| {
            let Ok(shader) = pipeline::read_shader(path) else {
                return Vec::new();
            };
            shader
                .entry_points()
                .into_iter()
                .filter(|(_, s)| *s == kiln_front::interface::Stage::Fragment)
                .filter_map(|(name, stage)| {
                    let entry = EntryPoint {
                        stage: Some(stage),
                        name: Some(name.clone()),
                    };
                    let c = pipeline::compile(&shader, &entry, &Options::default()).ok()?;
                    let rendered = render(&c, 16, 16, &[], &[]).map(|(out, _)| out.mismatched);
                    Some((format!("{}:{name}", path.display()), rendered))
                })
                .collect()
        })
        .collect();
    // A loop bounded by a uniform that is 0 by default (`deltaPhi` of the irradiance cube
    // maps) does not end: the interpreter stops at its step limit and nothing is checked, as
    // `corpus compile --check` reports such a shader "not checked".
    let stopped = |r: &Result<usize, String>| r.as_ref().is_err_and(|e| e.contains("step limit"));
    let unchecked = results.iter().filter(|(_, r)| stopped(r)).count();
    let bad: Vec<&(String, Result<usize, String>)> = results
        .iter()
        .filter(|(_, r)| r != &Ok(0) && !stopped(r))
        .collect();
    eprintln!(
        "{} fragment entry points rendered, {} not exact, {unchecked} not checked (the interpreter stops)",
        results.len(),
        bad.len()
    );
    assert!(results.len() > 2000, "the corpus was not found");
    assert!(
        unchecked <= 8,
        "{unchecked} renders the interpreter cannot finish"
    );
    assert!(bad.is_empty(), "{:#?}", &bad[..bad.len().min(20)]);
}
