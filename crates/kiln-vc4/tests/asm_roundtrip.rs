//! Assembler round trips: every `disasm.tsv` word, every `programs/` file and random words
//! disassemble (kiln style) and reassemble to the same normalized fields
//! (`kiln_vc4::isa::normalize`, defined in `docs/vc4.md`).

use kiln_vc4::isa::{Style, assemble, assemble_line, decode, disasm, disasm_program, normalize};
use kiln_vc4::words;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/vc4/golden")
}

fn roundtrip(w: u64) -> Result<(), String> {
    let text = disasm(w, Style::Kiln);
    match assemble_line(&text) {
        Ok(back) if back == normalize(w) => Ok(()),
        Ok(back) => Err(format!(
            "{w:016x} `{text}` -> {back:016x}\n   want {:?}\n   got  {:?}",
            decode(normalize(w)),
            decode(back)
        )),
        Err(e) => Err(format!("{w:016x} `{text}`: {e}")),
    }
}

#[test]
fn every_disasm_tsv_word_roundtrips() {
    let text = std::fs::read_to_string(golden().join("disasm.tsv")).unwrap();
    let fails: Vec<String> = text
        .lines()
        .skip(1)
        .filter_map(|l| {
            roundtrip(u64::from_str_radix(l.split('\t').next().unwrap(), 16).unwrap()).err()
        })
        .collect();
    assert!(
        fails.is_empty(),
        "{} words:\n{}",
        fails.len(),
        fails[..fails.len().min(15)].join("\n")
    );
}

#[test]
fn every_golden_program_roundtrips() {
    let mut n = 0;
    for entry in std::fs::read_dir(golden().join("programs")).unwrap() {
        let path = entry.unwrap().path();
        let words = words::parse(&std::fs::read(&path).unwrap()).unwrap();
        assert!(!words.is_empty());
        let text = disasm_program(&words, Style::Kiln);
        let back = assemble(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let want: Vec<u64> = words.iter().map(|w| normalize(*w)).collect();
        assert_eq!(back, want, "{}", path.display());
        n += 1;
    }
    assert_eq!(n, 16);
}

#[test]
fn normalize_is_idempotent_and_keeps_real_programs_mostly_unchanged() {
    let words =
        words::parse(&std::fs::read(golden().join("programs/shader_256.hex")).unwrap()).unwrap();
    for w in &words {
        assert_eq!(normalize(normalize(*w)), normalize(*w));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn random_words_roundtrip(w in any::<u64>()) {
        prop_assert_eq!(roundtrip(w), Ok(()));
    }
    #[test]
    fn random_alu_words_roundtrip(sig in 0u64..14, low in any::<u64>()) {
        let w = (sig << 60) | (low & ((1u64 << 60) - 1));
        prop_assert_eq!(roundtrip(w), Ok(()));
    }
}
