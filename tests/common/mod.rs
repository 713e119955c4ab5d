//! Helpers shared by the command-line tests.

use std::process::Command;

/// Runs the `kiln` binary with `args`: (success, stdout, stderr).
pub fn kiln(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
