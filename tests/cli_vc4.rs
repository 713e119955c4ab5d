//! The `kiln disasm`, `kiln asm` and `kiln sim` subcommands, run as a user would.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn kiln(args: &[&str], stdin: Option<&[u8]>) -> (bool, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(data) = stdin {
        c.stdin.take().unwrap().write_all(data).unwrap();
    } else {
        drop(c.stdin.take());
    }
    let o = c.wait_with_output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/vc4/golden")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-cli-vc4-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn disasm_matches_mesa_text_for_a_golden_program() {
    let sgemm = golden().join("programs/sgemm.bin");
    let (ok, out, _) = kiln(
        &["disasm", "--style", "mesa", sgemm.to_str().unwrap()],
        None,
    );
    assert!(ok);
    assert_eq!(out.lines().count(), 485);
    // the first word of sgemm.bin and Mesa's text for it (golden/disasm.tsv)
    assert_eq!(out.lines().next().unwrap(), "mov r0, uni ; nop nop, r0, r0");
}

#[test]
fn asm_then_disasm_then_sim() {
    let src = "load_imm r0, nop, 5\nloop:\nsig_small_imm sub.sf r0, r0, 1 ; nop nop, r0, r0\n\
               branch.any_zc.rel loop\nnop\nnop\nnop\nmov r1, uni ; nop nop, r0, r0\n\
               sig_end nop\nnop\nnop\n";
    let bin = tmp("p.bin");
    let (ok, _, err) = kiln(
        &["asm", "-", "-o", bin.to_str().unwrap()],
        Some(src.as_bytes()),
    );
    assert!(ok, "{err}");
    assert_eq!(std::fs::metadata(&bin).unwrap().len(), 8 * 10);
    let (ok, out, _) = kiln(&["disasm", bin.to_str().unwrap()], None);
    assert!(ok);
    assert!(out.starts_with("load_imm r0, nop, 0x00000005"));
    let (ok, out, err) = kiln(
        &["sim", bin.to_str().unwrap(), "--uniforms", "42", "--json"],
        None,
    );
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["qpu"]["accumulators"][1][0], 42);
    assert_eq!(v["qpu"]["accumulators"][0][0], 0);
    let (ok, out, _) = kiln(&["sim", bin.to_str().unwrap(), "--uniforms", "42"], None);
    assert!(ok);
    assert!(out.contains("cycles"));
}

#[test]
fn errors_are_diagnostics_not_panics() {
    let odd = tmp("odd.bin");
    std::fs::write(&odd, [0xffu8, 0xfe, 0x00]).unwrap();
    let (ok, _, err) = kiln(&["disasm", odd.to_str().unwrap()], None);
    assert!(!ok);
    assert!(err.contains("length 3"), "{err}");
    let (ok, _, err) = kiln(&["asm", "-", "-o", "-"], Some(b"nop\nfadd r0, r1, bogus\n"));
    assert!(!ok);
    assert!(err.contains("2:"), "{err}");
    let (ok, _, err) = kiln(&["sim", "-"], Some(b"nop\n"));
    assert!(!ok);
    assert!(err.contains("outside the program"), "{err}");
    assert!(!err.contains("panicked"));
}
