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

/// Runs `w` after some setup and returns everything observable (or the error).
fn observe(w: u64, seed: u32) -> String {
    use kiln_vc4::sim::{Machine, Program};
    let mut code: Vec<u64> = (0..4u64)
        .map(|r| {
            // load_imm r0..r3 with seed-dependent per-lane-ish values
            0xe002_0827_0000_0000 | ((r & 3) << 38) | (seed.rotate_left(8 * r as u32) as u64)
        })
        .collect();
    code.push(0xe002_0967_0000_0003 ^ ((seed as u64) & 0x7)); // r5 (per quad): small value
    for r in 0..32u64 {
        // load_imm raN / rbN with distinct values
        let v = (seed ^ (0x0101_0101u32.wrapping_mul(r as u32 + 1))) as u64;
        code.push(0xe002_0027_0000_0000 | (r << 38) | v);
        code.push(0xe002_1027_0000_0000 | (r << 38) | (v ^ 0x8000_00ff));
    }
    code.push(0x1000_09e7_009e_7000);
    // no undefined add opcodes (they stop the run before anything is compared)
    let w = if (w >> 60) < 14 && matches!((w >> 24) & 31, 9..=11 | 25..=29) {
        w & !(31 << 24) | (12 << 24)
    } else {
        w
    };
    code.push(w);
    code.push(0x1000_09e7_009e_7000);
    code.push(0x3000_09e7_009e_7000); // thrend
    code.push(0x1000_09e7_009e_7000);
    code.push(0x1000_09e7_009e_7000);
    let mut m = Machine::new(1 << 20, Program::new(0x10000, &code));
    m.mem
        .write_words(0x80000, &[0x1000, 0x2000, 0x3000, 0x4000])
        .unwrap();
    m.add_qpu(0x80000);
    let r = m.run(400);
    let q = &m.qpus[0];
    format!(
        "{:?} {:?} {:?} {:?} {} {} {} {} {:?} {:?}",
        r.map_err(|e| e.kind),
        q.acc,
        q.ra,
        q.rb,
        q.z,
        q.n,
        q.c,
        q.unif_addr,
        q.host_int,
        &m.vpm.data[..64]
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// `normalize` changes only what the machine ignores: the simulator sees no difference.
    #[test]
    fn normalize_preserves_behaviour(sig in 1u64..16, low in any::<u64>(), seed in any::<u32>()) {
        let w = (sig << 60) | (low & ((1u64 << 60) - 1));
        prop_assert_eq!(observe(w, seed), observe(normalize(w), seed));
    }
}
