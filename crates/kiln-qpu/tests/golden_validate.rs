//! `golden/validate.tsv` (every row) and `golden/validate_programs.tsv` (every program).
//!
//! kiln's verdict is "reject" when Mesa rejects or vc4asm warns (the union of both validators,
//! which is what `vc4/README.md` lists), except the rows in `DELIBERATE` where both tools are
//! known to be wrong or one of them has a documented quirk.

use kiln_qpu::isa::{Rule, validate};
use kiln_qpu::words;
use std::path::{Path, PathBuf};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/vc4/golden")
}

/// Rows where kiln's verdict differs from the union on purpose: (name, kiln rejects, why).
const DELIBERATE: &[(&str, bool, &str)] = &[
    (
        "thrend_one_delay_slot",
        true,
        "rule 4: only one instruction follows thrend, the QPU would run past the program",
    ),
    (
        "lthrsw_writes_ra",
        false,
        "last thread switch is not a thread end (vc4asm quirk)",
    ),
    (
        "sfu_then_r4_read_next",
        true,
        "rule 2: r4 read one instruction after an SFU write (both tools miss it)",
    ),
    (
        "rot_invalid_in_last_inst",
        true,
        "rule 7 in the last word (Mesa stops at num_inst - 1, vc4asm ignores file-A inputs)",
    ),
];

fn rules_for(category: &str) -> &'static [Rule] {
    match category {
        "regfile-raw" => &[Rule::RegfileReadAfterWrite],
        "sfu" => &[Rule::SfuR4],
        "tmu_noswap" => &[Rule::TmuNoswap],
        "thrend" => &[Rule::ThreadEnd],
        "first_two" => &[Rule::FirstTwo],
        "unif_addr" => &[Rule::UniformsAddress],
        "multi_periph" => &[Rule::Peripherals],
        "rotate" => &[Rule::Rotation],
        "tlb_z_ms_flags" => &[Rule::TlbZMsFlags],
        "thrsw" => &[Rule::ThreadSwitch],
        "vc4asm_only" => &[
            Rule::BranchDistance,
            Rule::DualWrite,
            Rule::ConditionalPeripheral,
            Rule::VpmSetup,
        ],
        _ => &[],
    }
}

#[test]
fn validate_tsv_every_row() {
    let text = std::fs::read_to_string(golden().join("validate.tsv")).unwrap();
    let mut header = Vec::new();
    let mut rows = 0;
    let mut fails = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let cols: Vec<&str> = line.split('\t').collect();
        if n == 0 {
            header = cols.iter().map(|s| s.to_string()).collect();
            continue;
        }
        let col = |name: &str| cols[header.iter().position(|h| h == name).unwrap()];
        rows += 1;
        let name = col("name");
        let words: Vec<u64> = col("words")
            .split(' ')
            .map(|w| u64::from_str_radix(w, 16).unwrap())
            .collect();
        let mesa_rejects = col("mesa_verdict").starts_with("reject");
        let v = if col("vc4asm_V").starts_with("n/a") {
            col("vc4dis_V")
        } else {
            col("vc4asm_V")
        };
        let vc4asm_rejects = v.starts_with("warn");
        let mut expect = mesa_rejects || vc4asm_rejects;
        if let Some(d) = DELIBERATE.iter().find(|d| d.0 == name) {
            expect = d.1;
        }
        let got = validate(&words);
        if got.is_empty() == expect {
            fails.push(format!(
                "{name}: expected {}, got {:?}",
                if expect { "reject" } else { "accept" },
                got.iter().map(|v| v.to_string()).collect::<Vec<_>>()
            ));
            continue;
        }
        if expect {
            let want = rules_for(col("rule"));
            if !want.is_empty() && !got.iter().any(|v| want.contains(&v.rule)) {
                fails.push(format!(
                    "{name}: rejected for {:?}, expected one of {want:?}",
                    got.iter().map(|v| v.to_string()).collect::<Vec<_>>()
                ));
            }
        }
    }
    assert_eq!(rows, 92);
    assert!(
        fails.is_empty(),
        "{} rows differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

#[test]
fn validate_programs_tsv() {
    let text = std::fs::read_to_string(golden().join("validate_programs.tsv")).unwrap();
    let mut checked = 0;
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let file = cols[0].rsplit('/').next().unwrap();
        let path = golden().join("programs").join(file);
        let Ok(bytes) = std::fs::read(&path) else {
            continue; // shader_256_new is listed but not distributed
        };
        let words = words::parse(&bytes).unwrap();
        assert_eq!(words.len().to_string(), cols[1], "{file}");
        let got = validate(&words);
        let vc4asm_accepts = cols[3] == "accept";
        // GPU_FFT shaders run on real hardware: kiln's flow-aware rules accept them, as vc4asm
        // does; sgemm rotates r2 right after a conditional write to it (Mesa's reason).
        if vc4asm_accepts {
            assert!(
                got.is_empty(),
                "{file}: {:?}",
                got.iter().map(|v| v.to_string()).collect::<Vec<_>>()
            );
        } else {
            assert!(
                got.iter().any(|v| v.rule == Rule::Rotation),
                "{file}: {got:?}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 16, "{checked}");
}

/// Mesa's own verdict, reproduced: identical verdict and abort message on every row.
#[test]
fn mesa_verdicts_reproduced_on_every_row() {
    let text = std::fs::read_to_string(golden().join("validate.tsv")).unwrap();
    let mut fails = Vec::new();
    let mut rows = 0;
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let words: Vec<u64> = cols[2]
            .split(' ')
            .map(|w| u64::from_str_radix(w, 16).unwrap())
            .collect();
        let got = match kiln_qpu::isa::validate_mesa(&words) {
            Ok(()) => "accept".to_string(),
            Err(r) => format!("reject: {}", r.message),
        };
        rows += 1;
        if got != cols[3] {
            fails.push(format!("{}:\n  want {}\n  got  {got}", cols[0], cols[3]));
        }
    }
    assert_eq!(rows, 92);
    assert!(
        fails.is_empty(),
        "{} rows differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

#[test]
fn mesa_verdicts_reproduced_on_programs() {
    let text = std::fs::read_to_string(golden().join("validate_programs.tsv")).unwrap();
    let mut n = 0;
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let file = cols[0].rsplit('/').next().unwrap();
        let Ok(bytes) = std::fs::read(golden().join("programs").join(file)) else {
            continue;
        };
        let words = words::parse(&bytes).unwrap();
        let got = match kiln_qpu::isa::validate_mesa(&words) {
            Ok(()) => "accept".to_string(),
            Err(r) => format!("reject: {}", r.message),
        };
        assert_eq!(got, cols[2], "{file}");
        n += 1;
    }
    assert!(n >= 16);
}
