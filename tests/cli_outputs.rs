//! The command line a user can trust: no output written over an input (directly, through a
//! symbolic link, or inside an input directory), `-o -` is standard output, naga's panics on
//! malformed input are errors without a backtrace, a wrong entry point lists the ones there are,
//! and a closed output pipe is not a crash.

mod common;
use common::kiln;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-cli-outputs-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Error text with miette's line wrapping undone.
fn flat(s: &str) -> String {
    s.replace('│', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn copy_example(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::copy(Path::new("examples").join(name), &to).unwrap();
    to
}

#[test]
fn no_output_replaces_an_input() {
    let d = scratch("inputs");
    let shader = copy_example(&d, "rings.frag");
    let original = std::fs::read(&shader).unwrap();
    let link = d.join("link.frag");
    std::os::unix::fs::symlink(&shader, &link).unwrap();
    let s = shader.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["compile", s, "--no-cache", "-o", s],
        vec!["compile", s, "--no-cache", "-o", link.to_str().unwrap()],
        vec!["run", s, "--size", "8x2", "-o", s],
        vec!["run", s, "--size", "8x2", "-o", link.to_str().unwrap()],
        vec!["asm", s, "-o", s],
    ];
    for args in &cases {
        let (ok, _, stderr) = kiln(args);
        assert!(!ok, "{args:?} succeeded");
        assert!(
            flat(&stderr).contains("refusing to write the output there: it is the input"),
            "{args:?}: {stderr}"
        );
        assert_eq!(
            std::fs::read(&shader).unwrap(),
            original,
            "{args:?} changed the input"
        );
    }
    // A report inside the corpus directory is refused before the corpus runs.
    let tsv = d.join("out.tsv");
    let (ok, stdout, stderr) = kiln(&[
        "corpus",
        "compile",
        d.to_str().unwrap(),
        "--no-cache",
        "--tsv",
        tsv.to_str().unwrap(),
    ]);
    assert!(
        !ok && flat(&stderr).contains("it is inside the input"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("entry points"),
        "the corpus ran first: {stdout}"
    );
    assert!(!tsv.exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn dash_is_standard_output() {
    let d = scratch("dash");
    let shader = copy_example(&d, "rings.frag");
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["run", shader.to_str().unwrap(), "--size", "8x2", "-o", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stdout.starts_with(b"\x89PNG\r\n\x1a\n"),
        "no PNG on stdout"
    );
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(
        report.contains("agrees exactly"),
        "the report goes to stderr: {report}"
    );
    assert!(!d.join("-").exists());
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["compile", shader.to_str().unwrap(), "--no-cache", "-o", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout.len() % 8, 0);
    assert!(out.stdout.len() >= 8 * 3, "no program on stdout");
    assert!(!d.join("-").exists());
    // The uniform table the program needs, beside it.
    let table = d.join("rings.json");
    let (ok, _, stderr) = kiln(&[
        "compile",
        shader.to_str().unwrap(),
        "--no-cache",
        "--uniforms",
        table.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&table).unwrap()).unwrap();
    let uniforms = doc["uniforms"].as_array().expect("a uniform table");
    assert!(uniforms.iter().any(|u| u["kind"] == "user"), "{doc}");
    assert_eq!(doc["inputs_in_read_order"], serde_json::json!([0, 1]));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn messages_name_the_problem() {
    for f in ["spvmut245.vert.spv", "spvmut300.vert.spv"] {
        let path = Path::new("../shared/repro").join(f);
        let (ok, _, stderr) = kiln(&["compile", path.to_str().unwrap(), "--no-cache"]);
        assert!(!ok);
        assert!(flat(&stderr).contains("naga panicked"), "{f}: {stderr}");
        assert!(
            !stderr.contains("stack backtrace") && !stderr.contains("panicked at"),
            "{f}: a backtrace reached the user: {stderr}"
        );
    }
    let (ok, _, stderr) = kiln(&["compile", "examples/rings.frag", "--entry", "nope"]);
    assert!(!ok);
    let stderr = flat(&stderr);
    assert!(
        stderr.contains("named `nope`") && stderr.contains("main (fragment)"),
        "{stderr}"
    );
}

/// No wrong answers given quietly: an integer colour output is refused (the tile buffer has no
/// integer format); a loop bounded by an integer uniform is checked, not reported as a
/// mismatch when the interpreter would run a billion steps.
#[test]
fn no_quiet_wrong_answers() {
    for command in [
        vec!["compile", "../shared/repro/intout.frag", "--no-cache"],
        vec![
            "run",
            "../shared/repro/intout.frag",
            "--size",
            "8x2",
            "-o",
            "-",
        ],
    ] {
        let (ok, stdout, stderr) = kiln(&command);
        assert!(!ok && stdout.is_empty(), "{command:?}");
        assert!(
            flat(&stderr).contains("unsupported: output of integer type"),
            "{command:?}: {stderr}"
        );
    }
    let (ok, stdout, stderr) = kiln(&[
        "compile",
        "../shared/repro/inf2.frag",
        "--check",
        "--no-cache",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("check: the simulator agrees"), "{stdout}");
}

/// The interpreter says what every slot holds: values as read (and how), defaults as chosen.
#[test]
fn interp_says_what_each_slot_holds() {
    for (text, bits, how) in [
        ("8", "0x00000008", "integer"),
        ("8u", "0x00000008", "integer"),
        ("-1i", "0xffffffff", "integer"),
        ("8.0", "0x41000000", "float"),
        ("8f", "0x41000000", "float"),
        ("0x41000000", "0x41000000", "bits"),
    ] {
        let set = format!("0={text}");
        let (ok, _, stderr) = kiln(&["interp", "examples/phong.kir", "--uniform", &set]);
        assert!(ok, "{stderr}");
        assert!(
            stderr.contains(&format!("note: uniform 0 = {bits} (read as {how})")),
            "{text}: {stderr}"
        );
        assert!(stderr.contains("note: input 0: not given, the lane index as a float"));
    }
    let (ok, _, stderr) = kiln(&["interp", "examples/phong.kir", "--uniform", "0=8x"]);
    assert!(
        !ok && stderr.contains("`8x` is not a 32-bit integer"),
        "{stderr}"
    );
}

#[test]
fn a_closed_output_pipe_is_not_a_crash() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["liveness", "--json", "examples/phong.kir"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
}
