//! `kiln run` from the command line: the examples render with no setup, a vertex shader
//! prints its outputs, and bad input gets a clear error (never a panic, no image written).

mod common;

use common::kiln;
use std::path::PathBuf;

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-cli-run-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn example(name: &str) -> String {
    format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Width, height, bit depth and colour type of a PNG file, from its header.
fn png_header(path: &PathBuf) -> (u32, u32, u8, u8) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&b[12..16], b"IHDR");
    let be = |o: usize| u32::from_be_bytes(b[o..o + 4].try_into().unwrap());
    (be(16), be(20), b[24], b[25])
}

#[test]
fn examples_render_with_no_setup() {
    let d = dir("examples");
    for (name, size) in [("rings.frag", "64x64"), ("wipe.frag", "20x7")] {
        let out = d.join(format!("{name}.png"));
        let o = out.to_str().unwrap();
        let (ok, stdout, stderr) = kiln(&["run", &example(name), "--size", size, "-o", o]);
        assert!(ok, "{name}: {stderr}");
        assert!(stdout.contains("uniform progress = 0"), "{stdout}");
        assert!(stdout.contains("input uv (location 0) = the pixel's texture coordinate"));
        assert!(
            stdout.contains("check: the simulator agrees exactly with the selected program")
                && stdout.contains(" 0 of ")
                && stdout.contains("pixels beyond 1/255"),
            "{stdout}"
        );
        // Executed instructions and cycles: a texture wait makes the cycles more (wipe samples
        // two textures; rings none).
        let number_before = |word: &str| -> u64 {
            let at = stdout
                .find(word)
                .unwrap_or_else(|| panic!("{word}: {stdout}"));
            let digits: String = stdout[..at]
                .trim_end()
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            digits.chars().rev().collect::<String>().parse().unwrap()
        };
        let executed = number_before(" QPU instructions executed");
        let cycles = number_before(" cycles (");
        if name == "wipe.frag" {
            assert!(cycles > executed, "{stdout}");
        } else {
            assert_eq!(cycles, executed, "{stdout}");
        }
        let (w, h) = size.split_once('x').unwrap();
        // 8 bits per channel, RGBA (colour type 6).
        assert_eq!(
            png_header(&out),
            (w.parse().unwrap(), h.parse().unwrap(), 8, 6)
        );
    }
    let (ok, stdout, _) = kiln(&[
        "run",
        &example("wipe.frag"),
        "--size",
        "8x2",
        "--set",
        "progress=0.25",
        "-o",
        d.join("w.png").to_str().unwrap(),
    ]);
    assert!(ok);
    assert!(stdout.contains("uniform progress = 0.25"), "{stdout}");
    assert!(stdout.contains("texture from_image = built-in checkerboard"));
    let _ = std::fs::remove_dir_all(&d);
}

/// Derivatives of the texture coordinate over several batches: the QPU's rotations (Mesa's
/// ntq_fddx) give the interpreter's image.
#[test]
fn derivatives_render_like_the_interpreter() {
    let d = dir("derivatives");
    let src = d.join("d.frag");
    std::fs::write(
        &src,
        "#version 450
layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;
void main() {
    color = vec4(dFdx(uv.x) * 8.0, dFdy(uv.y) * 2.0, fwidth(uv.x * uv.y) * 4.0, 1.0);
}
",
    )
    .unwrap();
    let out = d.join("d.png");
    let (ok, stdout, stderr) = kiln(&[
        "run",
        src.to_str().unwrap(),
        "--size",
        "16x4",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("agrees exactly") && stdout.contains(" 0 of 64 pixels beyond"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn vertex_shader_outputs_per_vertex() {
    let d = dir("vertex");
    let vert = d.join("t.vert");
    std::fs::write(
        &vert,
        "#version 450
layout(location = 0) in vec3 pos;
layout(location = 0) out vec2 uv;
layout(set = 0, binding = 0) uniform Xf { float scale; };
void main() { uv = pos.xy * scale; gl_Position = vec4(pos, 1.0); }
",
    )
    .unwrap();
    let (ok, stdout, stderr) = kiln(&[
        "run",
        vert.to_str().unwrap(),
        "--vertices",
        "2",
        "--set",
        "scale=2",
        "--set",
        "pos=0.5,0.25,0",
        "--set",
        "pos@1=-1,1,0.5",
    ]);
    assert!(ok, "{stderr}");
    let v1 = stdout.split("vertex 1:\n").nth(1).unwrap();
    let v0 = stdout.split("vertex 0:\n").nth(1).unwrap();
    assert!(
        v0.contains("location 0.x = 1\n") && v0.contains("location 0.y = 0.5\n"),
        "{stdout}"
    );
    assert!(
        v1.contains("location 0.x = -2\n") && v1.contains("position.z = 0.5\n"),
        "{stdout}"
    );
    assert!(stdout.contains("simulator: the VPM rows agree with the interpreter"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_input_is_a_clear_error() {
    let d = dir("bad");
    let out = d.join("out.png");
    let o = out.to_str().unwrap();
    let wipe = example("wipe.frag");
    let not_png = d.join("not.png");
    std::fs::write(&not_png, "hello").unwrap();
    let facing = d.join("intout.frag");
    std::fs::write(
        &facing,
        "#version 450
layout(location = 0) out ivec4 color;
void main() { color = ivec4(1, 2, 3, 4); }
",
    )
    .unwrap();
    let np = format!("0={}", not_png.display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--set", "nosuch=1"],
            "no uniform member or input named `nosuch`",
        ),
        (vec!["--set", "progress=abc"], "`abc` is not a float value"),
        (vec!["--set", "progress=1,2"], "expected 1 value(s), got 2"),
        (vec!["--set", "progress"], "expected NAME=VALUE"),
        (
            vec!["--texture", "0=/nonexistent/x.png"],
            "/nonexistent/x.png",
        ),
        (vec!["--texture", &np], "not a readable PNG"),
        (
            vec!["--texture", "9=a.png"],
            "the shader samples no such texture",
        ),
        (vec!["--size", "0x4"], "each side must be"),
        (vec!["--size", "big"], "expected WxH"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["run", wipe.as_str(), "-o", o];
        args.extend(extra.iter().copied());
        let (ok, _, stderr) = kiln(&args);
        assert!(!ok, "{extra:?} succeeded");
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{extra:?}: {stderr}");
        assert!(!out.exists(), "{extra:?} wrote an image");
    }
    let (ok, _, stderr) = kiln(&["run", facing.to_str().unwrap(), "-o", o]);
    assert!(!ok);
    assert!(stderr.contains("unsupported: "), "{stderr}");
    assert!(!out.exists());
    let (ok, _, stderr) = kiln(&["run", &wipe]);
    assert!(!ok);
    assert!(stderr.contains("needs -o"), "{stderr}");
    let (ok, _, stderr) = kiln(&["run", "/nonexistent/s.frag", "-o", o]);
    assert!(!ok && !stderr.contains("panicked"), "{stderr}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn members_several_blocks_share_need_the_block_name() {
    let d = dir("blocks");
    let shader = d.join("two.wgsl");
    std::fs::write(
        &shader,
        "
struct A { progress: f32 }
struct B { progress: f32, k: f32 }
@group(0) @binding(0) var<uniform> a: A;
@group(0) @binding(1) var<uniform> b: B;
@fragment
fn main(@location(0) uv: vec2<f32>) -> @location(0) vec4<f32> {
    return vec4<f32>(uv * a.progress, b.progress, b.k);
}
",
    )
    .unwrap();
    let s = shader.to_str().unwrap();
    let out = d.join("o.png");
    let o = out.to_str().unwrap();
    let (ok, _, stderr) = kiln(&["run", s, "--size", "8x2", "--set", "progress=1", "-o", o]);
    assert!(
        !ok && stderr.contains("several uniform blocks have a member"),
        "{stderr}"
    );
    assert!(!out.exists());
    let (ok, stdout, stderr) = kiln(&[
        "run",
        s,
        "--size",
        "8x2",
        "--set",
        "a.progress=1",
        "--set",
        "b.progress=0.5",
        "--set",
        "k=0.25",
        "-o",
        o,
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("uniform a.progress = 1\n"), "{stdout}");
    assert!(stdout.contains("uniform b.progress = 0.5\n"), "{stdout}");
    assert!(stdout.contains("uniform k = 0.25\n"), "{stdout}");
    assert!(
        stdout.contains("agrees exactly") && stdout.contains(" 0 of 16 pixels beyond"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
