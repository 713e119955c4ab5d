//! The `kiln` command on good and bad input: bad input gets a diagnostic and a non-zero exit,
//! never a panic.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn kiln(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kiln runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn main_job_on_the_bundled_example() {
    let out = kiln(&["liveness", "examples/phong.kir", "--demand"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("; max demand: v="), "{stdout}");
    assert!(stdout.contains("live-in {"), "{stdout}");
}

#[test]
fn bad_input_is_a_diagnostic_not_a_panic() {
    let cases: [(&[&str], Option<&str>, &str); 6] = [
        (
            &["print", "-"],
            Some("target generic(v=8, s=4)\nfunction @f {\nbb0:\n    %0:v1 = frob 1\n}\n"),
            "4:13: unknown opcode `frob`",
        ),
        (
            &["verify", "-"],
            Some(
                "target generic(v=8, s=4)\nfunction @f {\nbb0:\n    %1:v1 = fadd %0, 1\n    return\n}\n",
            ),
            "[ssa]",
        ),
        (
            &["liveness", "no/such/file.kir"],
            None,
            "cannot read no/such/file.kir",
        ),
        (&["print", "-"], Some("\u{0}\u{1}garbage"), "1:1"),
        (
            &["interp", "-", "--input", "0=abc"],
            Some(
                "target generic(v=8, s=4)\nfunction @f {\nbb0:\n    %0:v1 = input 0\n    output 0, %0\n    return\n}\n",
            ),
            "--input `abc` is not a 32-bit integer",
        ),
        (
            &["interp", "-", "--lanes", "100"],
            Some("target generic(v=8, s=4)\nfunction @f {\nbb0:\n    return\n}\n"),
            "--lanes must be in 1..=64",
        ),
    ];
    for (args, stdin, want) in cases {
        let out = kiln(args, stdin);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            stderr.contains(want),
            "{args:?}: expected `{want}` in\n{stderr}"
        );
    }
}

#[test]
fn liveness_json_is_json_with_every_block() {
    let out = kiln(&["liveness", "examples/seed003_loop.kir", "--json"], None);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let blocks = v["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 5);
    // Exact liveness: color2 is not live into the header; it leaves the divergent loop.
    assert!(
        !blocks[1]["live_in"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "%12")
    );
    assert_eq!(
        v["loops"][0]["leaving"],
        serde_json::json!([12, 13, 14, 15])
    );
    // Two late-killed operands beside the four-unit texture result.
    assert_eq!(v["max_demand"]["v"], 6);
}

#[test]
fn interp_runs_in_both_modes_with_the_same_output() {
    let args = [
        "interp",
        "examples/seed003_loop.kir",
        "--lanes",
        "4",
        "--input",
        "0=0,0.37,0.74,1.11",
        "--uniform",
        "0=0.6",
    ];
    let ssa = kiln(&args, None);
    let mut simt_args = args.to_vec();
    simt_args.push("--simt");
    let simt = kiln(&simt_args, None);
    assert!(
        ssa.status.success() && simt.status.success(),
        "{}",
        text(&ssa.stderr)
    );
    assert_eq!(text(&ssa.stdout), text(&simt.stdout));
    assert_eq!(text(&ssa.stdout).matches("lane").count(), 16);
}

#[test]
fn lower_prints_verified_ir_or_an_unsupported_diagnostic() {
    let dir = std::env::temp_dir().join(format!("kiln-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("ok.wgsl");
    std::fs::write(
        &good,
        "@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f { return x * 2.0; }\n",
    )
    .unwrap();
    let out = kiln(&["lower", good.to_str().unwrap(), "--interface"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("= fmul") && stdout.contains("\"entry_point\": \"main\""),
        "{stdout}"
    );
    let bad = dir.join("bad.wgsl");
    std::fs::write(&bad, "@group(0) @binding(0) var<storage, read> b: array<f32>;\n@fragment fn main() -> @location(0) vec4f { return vec4f(b[0]); }\n").unwrap();
    let out = kiln(&["lower", bad.to_str().unwrap()], None);
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("unsupported: storage buffers") && !stderr.contains("panicked"),
        "{stderr}"
    );
    let garbage = dir.join("junk.wgsl");
    std::fs::write(&garbage, "fn (((").unwrap();
    let out = kiln(&["lower", garbage.to_str().unwrap()], None);
    assert!(
        !out.status.success() && text(&out.stderr).contains("parse error"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn corpus_lower_survives_deep_nesting() {
    let dir = std::env::temp_dir().join(format!("kiln-deep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for n in [200usize, 1000, 3000] {
        let mut s = String::from(
            "#version 450\nlayout(location = 0) in vec4 x;\nlayout(location = 0) out vec4 o;\nvoid main() {\nfloat s = 0.0;\n",
        );
        for i in 0..n {
            s += &format!("if (x.x > {i}.0) {{ s += 1.0;\n");
        }
        s += &"}".repeat(n);
        s += "\no = vec4(s);\n}\n";
        std::fs::write(dir.join(format!("nest{n}.frag")), s).unwrap();
    }
    let out = kiln(
        &["corpus", "lower", dir.to_str().unwrap(), "-j", "2", "--run"],
        None,
    );
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("3 entry points: 1 lowered and verified"),
        "{stdout}"
    );
    assert!(
        stdout.contains("2  unsupported: nesting deeper than 256"),
        "{stdout}"
    );
}

/// `kiln regalloc` on the bundled example: the allocated text reads back, runs in SIMT mode and
/// gives the SSA program's outputs.
#[test]
fn regalloc_main_job_runs_as_it_prints() {
    let out = kiln(&["regalloc", "examples/phong.kir", "--stats"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let allocated = text(&out.stdout);
    assert!(allocated.contains("allocated {"), "{allocated}");
    assert!(text(&out.stderr).contains("registers used"));
    let ssa = kiln(&["interp", "examples/phong.kir"], None);
    let simt = kiln(&["interp", "--simt", "-"], Some(&allocated));
    assert!(simt.status.success(), "{}", text(&simt.stderr));
    assert_eq!(text(&ssa.stdout), text(&simt.stdout));
}

/// Budgets that cannot hold an instruction, bad budgets and allocated input get a diagnostic
/// naming the problem, never a panic.
#[test]
fn regalloc_bad_input_is_refused() {
    for allocator in ["ssa", "graph"] {
        let over = kiln(
            &[
                "regalloc",
                "examples/phong.kir",
                "--budget",
                "v=2",
                "--allocator",
                allocator,
            ],
            None,
        );
        assert!(!over.status.success());
        let e = text(&over.stderr);
        assert!(
            e.contains("over budget") && e.contains("bb"),
            "{allocator}: {e}"
        );
        assert!(!e.contains("panicked"), "{e}");
    }
    let unknown = kiln(
        &["regalloc", "examples/phong.kir", "--allocator", "linear"],
        None,
    );
    assert!(!unknown.status.success());
    assert!(text(&unknown.stderr).contains("unknown allocator"));
    for budget in ["q=3", "v=x", "v"] {
        let out = kiln(
            &["regalloc", "examples/phong.kir", "--budget", budget],
            None,
        );
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("--budget"),
            "{}",
            text(&out.stderr)
        );
    }
    let allocated = text(&kiln(&["regalloc", "examples/phong.kir"], None).stdout);
    let again = kiln(&["regalloc", "-"], Some(&allocated));
    assert!(!again.status.success());
    assert!(text(&again.stderr).contains("already allocated"));
}
