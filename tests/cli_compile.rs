//! `kiln compile` and `kiln corpus compile`, run as a user would.

mod common;

use common::kiln;
use std::path::PathBuf;

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-cli-compile-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

const SHADE: &str = "
struct U { tint: vec4<f32>, k: f32 }
@group(0) @binding(0) var<uniform> u: U;
@fragment
fn main(@location(0) uv: vec2<f32>, @builtin(position) p: vec4<f32>) -> @location(0) vec4<f32> {
    var c = vec3<f32>(uv, 0.25) * u.tint.xyz;
    if (uv.x > 0.5) {
        c = sqrt(c) + vec3<f32>(p.x / 64.0);
    }
    var s = 0.0;
    for (var i = 0; i < 3; i++) {
        s += c.y * u.k;
    }
    return vec4<f32>(c.x, c.y, s, 1.0);
}
";

const TEXTURED: &str = "
@group(0) @binding(0) var t: texture_2d<f32>;
@group(0) @binding(1) var smp: sampler;
@fragment
fn main(@location(0) uv: vec2<f32>) -> @location(0) vec4<f32> {
    return textureSample(t, smp, uv);
}
";

const DERIVATIVES: &str = "
@fragment
fn main(@location(0) uv: vec2<f32>, @builtin(position) p: vec4<f32>) -> @location(0) vec4<f32> {
    let v = uv.x * uv.y + p.x * p.x * 0.01 + p.y * 0.25;
    return vec4<f32>(dpdx(v), dpdy(v), fwidth(uv.x * p.y), 1.0);
}
";

const DERIVATIVES_GLSL: &str = "#version 450
layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;
void main() {
    float v = uv.x * uv.x + gl_FragCoord.x * gl_FragCoord.y * 0.01;
    color = vec4(dFdx(v), dFdy(v), abs(dFdx(uv.y)) + abs(dFdy(uv.x)), 1.0);
}
";

const SAMPLE_INDEX: &str = "
@fragment
fn main(@builtin(sample_index) s: u32) -> @location(0) vec4<f32> {
    return vec4<f32>(f32(s), 0.0, 0.0, 1.0);
}
";

#[test]
fn compile_writes_a_binary_disassembly_and_statistics() {
    let d = dir();
    let src = d.join("shade.wgsl");
    std::fs::write(&src, SHADE).unwrap();
    let bin = d.join("shade.bin");
    let (ok, out, err) = kiln(&[
        "compile",
        src.to_str().unwrap(),
        "-o",
        bin.to_str().unwrap(),
        "--stats",
        "--json",
        "--check",
    ]);
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let words = std::fs::read(&bin).unwrap().len() / 8;
    assert_eq!(json["instructions"], words as u64);
    for key in ["threads", "uniforms", "max_temps", "estimated_cycles"] {
        assert!(json[key].is_u64(), "{key}");
    }
    assert!(out.contains("simulator agrees"), "{out}");
    // The binary disassembles, ends with the program end and its two delay slots.
    let (ok, dis, _) = kiln(&["disasm", bin.to_str().unwrap()]);
    assert!(ok);
    let lines: Vec<&str> = dis.lines().collect();
    assert_eq!(lines.len(), words);
    assert!(
        lines[lines.len() - 3].contains("thrend") || lines[lines.len() - 3].starts_with("sig_end")
    );
    assert!(dis.contains("tlb_c"), "{dis}");
    // Both allocators, Mesa-style text with the uniform table.
    for a in ["ssa", "graph"] {
        let (ok, text, err) = kiln(&[
            "compile",
            src.to_str().unwrap(),
            "--allocator",
            a,
            "--check",
        ]);
        assert!(ok, "{a}: {err}");
        let (ok, text2, _) = kiln(&[
            "compile",
            src.to_str().unwrap(),
            "--allocator",
            a,
            "--disasm",
        ]);
        assert!(ok);
        assert!(text.contains("agrees"));
        assert!(text2.contains("# uniform stream [0]: uniform"), "{text2}");
    }
}

#[test]
fn unsupported_features_are_named_not_panicked() {
    let d = dir();
    let src = d.join("sample_index.wgsl");
    std::fs::write(&src, SAMPLE_INDEX).unwrap();
    let (ok, _, err) = kiln(&["compile", src.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("unsupported: input built-in"), "{err}");
    assert!(err.contains("sample_index"), "{err}");
    assert!(!err.contains("panic"), "{err}");
}

/// dpdx/dpdy (WGSL) and dFdx/dFdy (GLSL) compile to Mesa's rotations (ntq_fddx) and the
/// simulator agrees with the interpreter on every pixel of the batch, with both allocators.
#[test]
fn derivatives_compile_and_agree() {
    let d = dir();
    for (name, text) in [
        ("derivatives.wgsl", DERIVATIVES),
        ("derivatives.frag", DERIVATIVES_GLSL),
    ] {
        let src = d.join(name);
        std::fs::write(&src, text).unwrap();
        for a in ["graph", "ssa"] {
            let (ok, out, err) = kiln(&[
                "compile",
                src.to_str().unwrap(),
                "--allocator",
                a,
                "--check",
                "--disasm",
            ]);
            assert!(ok, "{name} {a}: {err}");
            assert!(out.contains("agrees"), "{name} {a}: {out}");
            for rot in [
                "+15",
                "+14",
                "+2\n",
                "+1\n",
                "and.sf nop, elem, 1",
                "and.sf nop, elem, 2",
            ] {
                assert!(out.contains(rot), "{name} {a}: {rot}: {out}");
            }
        }
    }
}

/// A phi in an accumulator that a derivative's scratch displaces at the start of its block: the
/// copies into the phi write the register the block starts with (the SSA allocator once wrote
/// the displaced one, which the allocation checker refused).
#[test]
fn displaced_phi_takes_its_copies_where_its_block_starts() {
    let shader = "../shared/corpus/wgsl/skia/16-56.frag.wgsl";
    for a in ["ssa", "graph"] {
        let (ok, out, err) = kiln(&["compile", shader, "--allocator", a, "--check", "--stats"]);
        assert!(ok, "{a}: {err}");
        assert!(out.contains("agrees"), "{a}: {out}");
    }
}

#[test]
fn corpus_compile_reports_by_outcome() {
    let d = dir().join("corpus");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("a.wgsl"), SHADE).unwrap();
    std::fs::write(d.join("b.wgsl"), DERIVATIVES).unwrap();
    std::fs::write(d.join("c.wgsl"), TEXTURED).unwrap();
    std::fs::write(d.join("d.wgsl"), SAMPLE_INDEX).unwrap();
    let (ok, out, err) = kiln(&[
        "corpus",
        "compile",
        d.to_str().unwrap(),
        "--check",
        "-j",
        "1",
    ]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("4: 3 compiled, 1 unsupported, 0 failed"),
        "{out}"
    );
    assert!(out.contains("3 agree, 0 mismatched"), "{out}");
    assert!(out.contains("sample_index"), "{out}");
}

/// `--time-limit`: an entry point past it fails with a message that says so, the run goes on
/// to the others, and a limit that is no number of seconds is refused before anything runs.
#[test]
fn corpus_compile_time_limit() {
    let d = dir().join("time-limit");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("a.wgsl"), SHADE).unwrap();
    std::fs::write(d.join("c.wgsl"), TEXTURED).unwrap();
    let dir = d.to_str().unwrap();
    let args = |limit: &'static str| {
        [
            "corpus",
            "compile",
            dir,
            "--no-cache",
            "--verbose",
            "--time-limit",
            limit,
        ]
    };
    let (ok, out, err) = kiln(&args("0.000000001"));
    assert!(!ok);
    assert!(
        out.contains("2: 0 compiled, 0 unsupported, 2 failed"),
        "{out}"
    );
    assert!(
        format!("{out}{err}").contains("over the time limit of 1ns (after the middle end)"),
        "{out}\n{err}"
    );
    let (ok, out, err) = kiln(&args("0"));
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("2: 2 compiled"), "{out}");
    let (ok, _, err) = kiln(&args("soon"));
    assert!(!ok && err.contains("--time-limit"), "{err}");
    let (ok, _, err) = kiln(&args("inf"));
    assert!(!ok && err.contains("--time-limit inf"), "{err}");
}

/// `--mesa` on a part of the corpus matches its entry points by their place in the corpus, and
/// a directory outside the corpus is an error that says so.
#[test]
fn corpus_compile_beside_mesa_on_a_part_of_the_corpus() {
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    let stats = corpus.join("mesa-vc4/stats.tsv");
    let part = corpus.join("wgsl/sauerbraten");
    let (ok, out, err) = kiln(&[
        "corpus",
        "compile",
        part.to_str().unwrap(),
        "-j",
        "1",
        "--mesa",
        stats.to_str().unwrap(),
        "--mesa-qpu",
        corpus.join("mesa-vc4/qpu").to_str().unwrap(),
    ]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("beside Mesa      2 entry points both compile"),
        "{out}"
    );
    assert!(out.contains("operations by kind"), "{out}");
    let d = dir().join("outside");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("a.wgsl"), SHADE).unwrap();
    let (ok, out, err) = kiln(&[
        "corpus",
        "compile",
        d.to_str().unwrap(),
        "--mesa",
        stats.to_str().unwrap(),
    ]);
    assert!(!ok, "{out}");
    assert!(err.contains("is not inside the corpus"), "{err}");
}

/// The whole shared corpus (release build recommended): nothing fails or panics, every compiled
/// entry point agrees with the interpreter, and at least the measured number compiles.
#[test]
#[ignore]
fn corpus_compiles_and_agrees() {
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    let (ok, out, err) = kiln(&["corpus", "compile", corpus.to_str().unwrap(), "--check"]);
    assert!(ok, "{out}\n{err}");
    let line = out.lines().next().unwrap();
    let compiled: usize = line
        .split(": ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(compiled >= 4373, "{line}");
    assert!(line.contains(" 0 failed"), "{line}");
    assert!(out.contains(" 0 mismatched"), "{out}");
}

/// `--threads`: a textured fragment shader runs 2 threads under `auto` and `2`, 1 under `1`;
/// `2` on a shader without lookups is an error that says why, `auto` falls back to 1.
#[test]
fn compile_threads() {
    let d = dir();
    let tex = d.join("textured.wgsl");
    std::fs::write(&tex, TEXTURED).unwrap();
    let shade = d.join("shade-threads.wgsl");
    std::fs::write(&shade, SHADE).unwrap();
    let threads = |src: &PathBuf, t: &str| {
        let (ok, out, err) = kiln(&[
            "compile",
            src.to_str().unwrap(),
            "--threads",
            t,
            "--stats",
            "--json",
            "--check",
        ]);
        assert!(ok, "{t}: {err}");
        assert!(out.contains("simulator agrees"), "{out}");
        let json: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        json["threads"].as_u64().unwrap()
    };
    assert_eq!(threads(&tex, "auto"), 2);
    assert_eq!(threads(&tex, "2"), 2);
    assert_eq!(threads(&tex, "1"), 1);
    assert_eq!(threads(&shade, "auto"), 1);
    let (ok, _, err) = kiln(&["compile", shade.to_str().unwrap(), "--threads", "2"]);
    assert!(!ok);
    assert!(
        err.contains("2 threads:") && err.contains("no texture lookup"),
        "{err}"
    );
    let (ok, _, err) = kiln(&["compile", tex.to_str().unwrap(), "--threads", "3"]);
    assert!(!ok && err.contains("threads"), "{err}");
}

/// `--ir` prints the IR after the stages asked for, in pipeline order, allocated IR with the
/// QPU's register names; `--ir` alone prints the allocated function; an unknown stage is
/// refused with the list of stages.
#[test]
fn ir_after_stages() {
    let (ok, out, err) = kiln(&[
        "compile",
        "examples/rings.frag",
        "--ir",
        "allocated,selected",
    ]);
    assert!(ok, "{err}");
    let selected = out.find("; after selected").expect("selected");
    let allocated = out.find("; after allocated").expect("allocated");
    assert!(selected < allocated, "{out}");
    assert!(out[allocated..].contains("allocated {") && out[allocated..].contains("@r"));
    assert!(!out.contains("q["), "{out}");
    let (ok, alone, _) = kiln(&["compile", "examples/rings.frag", "--ir"]);
    assert!(ok && alone.starts_with("; after allocated\n"), "{alone}");
    let (ok, _, err) = kiln(&["compile", "examples/rings.frag", "--ir", "qir"]);
    assert!(
        !ok && err.contains("lowered, optimized, selected, interface, allocated"),
        "{err}"
    );
}

/// `--search-steps`: where the search finds shorter schedules the program is shorter, and it
/// still runs as the interpreter says.
#[test]
fn a_search_for_shorter_schedules_shortens_a_program() {
    let shader = "../shared/corpus/wgsl/skia/325.frag.wgsl";
    let length = |extra: &[&str]| {
        let mut args = vec!["compile", shader, "--json", "--check", "--no-cache"];
        args.extend(extra);
        let (ok, out, err) = kiln(&args);
        assert!(ok, "{err}");
        assert!(out.contains("simulator agrees"), "{out}");
        let json: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        json["instructions"].as_u64().unwrap()
    };
    let (listed, searched) = (length(&[]), length(&["--search-steps", "1000"]));
    assert!(searched < listed, "{searched} against {listed}");
}
