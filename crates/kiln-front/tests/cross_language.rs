//! The same shader written in GLSL and in HLSL (Sascha Willems' samples, both compiled to SPIR-V
//! in the corpus) lowers to programs that agree on the same inputs.

use kiln_front::{Source, lower_entry_point, parse};
use kiln_interp::{Env, Outputs, run_ssa};
use std::path::{Path, PathBuf};

fn lower(path: &Path) -> Option<kiln_ir::Function> {
    let source = Source::from_path(path, std::fs::read(path).ok()?).ok()?;
    let parsed = parse(&source).ok()?;
    lower_entry_point(&parsed, None, None)
        .ok()
        .map(|l| l.function)
}

/// Relative closeness of two floats (the two compilers order float operations differently).
fn close(a: u32, b: u32) -> bool {
    let (x, y) = (f32::from_bits(a), f32::from_bits(b));
    a == b || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-3 * x.abs().max(y.abs()).max(1.0)
}

fn agree(a: &Outputs, b: &Outputs) -> Result<(), String> {
    for (slot, lanes) in &a.slots {
        // Compare what both write (the two sources may declare different extra outputs).
        let Some(other) = b.slots.get(slot) else {
            continue;
        };
        for (l, (x, y)) in lanes.iter().zip(other).enumerate() {
            match (x, y) {
                (Some(x), Some(y)) => {
                    for (u, (p, q)) in x.iter().zip(y).enumerate() {
                        if let (Some(p), Some(q)) = (p, q)
                            && !close(*p, *q)
                        {
                            return Err(format!(
                                "slot {slot} lane {l} unit {u}: {} vs {}",
                                f32::from_bits(*p),
                                f32::from_bits(*q)
                            ));
                        }
                    }
                }
                (None, None) => {}
                _ => return Err(format!("slot {slot} lane {l}: written by one only")),
            }
        }
    }
    Ok(())
}

/// Twins whose sources compute different things (checked by reading their lowered code: the
/// GLSL source inverts a matrix for the normals — a determinant and a division — that the HLSL
/// source does not).
const DIFFERENT_SOURCES: [&str; 2] = [
    "glsl_instancing_instancing.vert.spv",
    "glsl_texture3d_texture3d.vert.spv",
];

/// The slots a function reads and writes: (op, slot) pairs.
fn interface(f: &kiln_ir::Function) -> std::collections::BTreeSet<(&'static str, u32)> {
    use kiln_ir::Opcode::*;
    f.blocks
        .iter()
        .flat_map(|b| &b.insts)
        .filter(|i| matches!(i.op, Input | Uniform | Output))
        .map(|i| (i.op.name(), i.imms[0]))
        .collect()
}

#[test]
fn glsl_and_hlsl_versions_agree() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/spv/sw");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    let (mut compared, mut skipped, mut mismatches) = (0, 0, Vec::new());
    for name in names.iter().filter(|n| n.starts_with("glsl_")) {
        let twin: PathBuf = dir.join(name.replacen("glsl_", "hlsl_", 1));
        let (Some(a), Some(b)) = (lower(&dir.join(name)), lower(&twin)) else {
            continue;
        };
        // Only twins with the same interface are the same program (some samples' HLSL and
        // GLSL sources declare different uniform blocks).
        if interface(&a) != interface(&b) || DIFFERENT_SOURCES.contains(&name.as_str()) {
            skipped += 1;
            continue;
        }
        // The same inputs in both (slots are numbered by location and uniform offset).
        let mut env = Env::with_ordinary_values(&a, 16);
        env.merge_missing(Env::with_ordinary_values(&b, 16));
        let (ra, rb) = (run_ssa(&a, &env), run_ssa(&b, &env));
        match (ra, rb) {
            (Ok(x), Ok(y)) => {
                compared += 1;
                if let Err(e) = agree(&x, &y) {
                    mismatches.push(format!("{name}: {e}"));
                }
            }
            (x, y) => mismatches.push(format!("{name}: runs: {:?} / {:?}", x.err(), y.err())),
        }
    }
    println!(
        "{compared} pairs compared, {skipped} with different interfaces skipped; {} disagree",
        mismatches.len()
    );
    for m in &mismatches {
        println!("  {m}");
    }
    assert!(compared >= 5, "only {compared} pairs compared");
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}
