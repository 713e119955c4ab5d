//! `kiln opt` and `kiln corpus lower --stats --opt` on small inputs.

use std::process::Command;

fn kiln(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("kiln runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn opt_runs_the_named_passes_and_reports() {
    let file = "tests/filetests/copy_prop/seed004_if_break_endif.kir";
    let out = kiln(&["opt", file, "--passes", "copy_prop,dce", "--stats"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("%13:v1 = fadd %11, %1"), "{stdout}");
    assert!(!stdout.contains("%5:v1 = mov %1"), "{stdout}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("total instructions in shared programs: 26 -> 20"),
        "{stderr}"
    );
    let out = kiln(&["opt", file, "--passes", "nonsense"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("no such pass"));
}

#[test]
fn corpus_stats_before_and_after() {
    let dir = std::env::temp_dir().join(format!("kiln-cli-opt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("a.frag.wgsl"),
        "@fragment fn main(@location(0) x: f32) -> @location(0) vec4f {
            var c = 0.0;
            if (x > 0.5) { c = 1.0; }
            return vec4f(c, mix(x, 2.0, 0.5), 0.0, 1.0);
        }",
    )
    .unwrap();
    let out = kiln(&["corpus", "lower", dir.to_str().unwrap(), "--stats", "--opt"]);
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("1 entry points measured"), "{stdout}");
    assert!(
        stdout.contains("instructions: helped 1 hurt 0 of 1 shaders"),
        "{stdout}"
    );
    assert!(stdout.contains("max demand, every file: "), "{stdout}");
}
