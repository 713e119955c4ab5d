//! Assembler round trips: every `disasm.tsv` and `roundtrip.tsv` word, every `programs/` file
//! and random words of every form disassemble (kiln style) and reassemble to the same word, bit
//! for bit. The normalized form (`kiln_qpu::isa::normalize`, defined in `docs/vc4.md`) is a
//! separate operation: idempotent, round-tripping too, and invisible to the simulator.

use kiln_qpu::isa::{Style, assemble, assemble_line, decode, disasm, disasm_program, normalize};
use kiln_qpu::words;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/vc4/golden")
}

fn roundtrip(w: u64) -> Result<(), String> {
    let text = disasm(w, Style::Kiln);
    match assemble_line(&text) {
        Ok(back) if back == w => Ok(()),
        Ok(back) => Err(format!(
            "{w:016x} `{text}` -> {back:016x}\n   want {:?}\n   got  {:?}",
            decode(w),
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

/// `roundtrip.tsv` is vc4asm's text, which the assembler does not read; its words are: the
/// 3912 words of `disasm.tsv` and vc4asm's re-encodings of its own text (`reasm_hex64`,
/// `reasm_M_hex64`), which choose other values for ignored fields.
#[test]
fn every_roundtrip_tsv_word_roundtrips() {
    let text = std::fs::read_to_string(golden().join("roundtrip.tsv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let cols: Vec<usize> = ["hex64", "reasm_hex64", "reasm_M_hex64"]
        .iter()
        .map(|c| header.iter().position(|h| h == c).unwrap())
        .collect();
    let mut words = std::collections::BTreeSet::new();
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        for &c in &cols {
            // `-` where vc4asm failed
            if let Ok(w) = u64::from_str_radix(f[c], 16) {
                words.insert(w);
            }
        }
    }
    assert_eq!(words.len(), 5189);
    let fails: Vec<String> = words.iter().filter_map(|w| roundtrip(*w).err()).collect();
    assert!(
        fails.is_empty(),
        "{} words:\n{}",
        fails.len(),
        fails[..fails.len().min(15)].join("\n")
    );
}

/// The two changes the old normalized text made that the machine can see: ws on writes to
/// address 42 (`ms_flags` through A, `rev_flag` through B) and branch bit 45.
#[test]
fn normalize_keeps_ws_on_address_42_and_branch_bit_45() {
    for w in [0x10025aa7159e7000u64, 0x10025aa7159e7000 & !(1 << 44)] {
        assert_eq!(normalize(w) & (1 << 44), w & (1 << 44), "{w:016x}");
        assert_eq!(roundtrip(w), Ok(()));
    }
    assert!(disasm(0x10025aa7159e7000, Style::Kiln).starts_with("mov rev_flag, r0"));
    let b = 0xfd50b655d4f70c60u64;
    assert_eq!(normalize(b) & (1 << 45), 1 << 45);
    assert_eq!(roundtrip(b), Ok(()));
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
        assert_eq!(back, words, "{}", path.display());
        n += 1;
    }
    assert_eq!(n, 16);
}

#[test]
fn normalize_is_idempotent_and_keeps_real_programs_mostly_unchanged() {
    let words =
        words::parse(&std::fs::read(golden().join("programs/shader_256.hex")).unwrap()).unwrap();
    let changed = words.iter().filter(|w| normalize(**w) != **w).count();
    assert!(changed * 10 < words.len(), "{changed} of {}", words.len());
    for w in &words {
        assert_eq!(normalize(normalize(*w)), normalize(*w));
    }
}

/// Random words with fields drawn from narrow ranges as well: `small` replaces raddr_a and
/// raddr_b (ALU) or the branch register field with values 32–63 or 0–3 often, so special
/// reads, small immediates and rotations turn up.
fn word_of_form(form: u64, low: u64, small: u8) -> u64 {
    let w = (form << 60) | (low & ((1u64 << 60) - 1));
    match (form, small % 4) {
        (0..=13, 0) => w & !(0xfff << 12) | (((small as u64 >> 2) % 64) << 18) | (39 << 12),
        (0..=13, 1) => w & !(0xfff << 12) | (39 << 18) | (((small as u64 >> 2) % 64) << 12),
        _ => w,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16000))]
    #[test]
    fn random_words_roundtrip(w in any::<u64>()) {
        prop_assert_eq!(roundtrip(w), Ok(()));
    }
    #[test]
    fn random_words_of_every_form_roundtrip(form in 0u64..16, low in any::<u64>(), small in any::<u8>()) {
        prop_assert_eq!(roundtrip(word_of_form(form, low, small)), Ok(()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]
    /// The normalized form still round-trips and is a fixed point.
    #[test]
    fn normalized_words_roundtrip(form in 0u64..16, low in any::<u64>(), small in any::<u8>()) {
        let n = normalize(word_of_form(form, low, small));
        prop_assert_eq!(normalize(n), n);
        prop_assert_eq!(roundtrip(n), Ok(()));
    }
}

/// Runs `w` after some setup and returns everything observable (or the error).
fn observe(w: u64, seed: u32) -> String {
    use kiln_qpu::sim::{Machine, Program};
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
