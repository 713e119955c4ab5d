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

#[test]
fn kiln_style_text_reassembles_to_the_same_words() {
    // ws on a write to address 42, a branch's raddr_a without reg, Mesa's NOP, a load immediate
    let hex = "10025aa7159e7000\nfd50b655d4f70c60\n100009e7009e7000\ne00248e700000040\n";
    let (ok, text, err) = kiln(
        &["disasm", "--style", "kiln", "--format", "hex", "-"],
        Some(hex.as_bytes()),
    );
    assert!(ok, "{err}");
    assert!(text.starts_with("mov rev_flag, r0"), "{text}");
    let (ok, out, err) = kiln(&["asm", "-", "-o", "-", "--hex"], Some(text.as_bytes()));
    assert!(ok, "{err}");
    assert_eq!(out, hex);
}

#[test]
fn malformed_assembly_is_a_diagnostic_in_every_command() {
    let src = "nop\nmov r0, é+1 ; nop nop, r0,\n".as_bytes();
    for cmd in [
        &["asm", "-", "-o", "-"][..],
        &["sim", "--format", "asm", "-"],
        &["disasm", "--format", "asm", "-"],
    ] {
        let (ok, _, err) = kiln(cmd, Some(src));
        assert!(!ok, "{cmd:?}");
        assert!(err.contains("2:9") && err.contains("é+1"), "{cmd:?}: {err}");
        assert!(!err.contains("panicked"), "{cmd:?}: {err}");
    }
}
