//! The assembler answers `Ok` or `Err` on any text, never panics: real disassemblies (random
//! words in both styles, the golden Mesa and vc4asm texts, the golden programs) mutated by
//! byte and token edits, including non-ASCII characters, are fed to `assemble`. Whatever
//! assembles prints in both styles and its kiln-style text reassembles to the same words.

use kiln_qpu::isa::{Style, assemble, assemble_line, disasm, disasm_program};
use kiln_qpu::words;
use proptest::prelude::*;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/vc4/golden")
}

/// splitmix64, for the random words of the corpus.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Texts to mutate: one instruction per entry, plus a few whole programs.
static CORPUS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut c = Vec::new();
    for i in 0..400u64 {
        let w = mix(i);
        c.push(disasm(w, Style::Kiln));
        c.push(disasm(w, Style::Mesa));
    }
    let tsv = std::fs::read_to_string(golden().join("disasm.tsv")).unwrap();
    for line in tsv.lines().skip(1).step_by(7) {
        let cols: Vec<&str> = line.split('\t').collect();
        c.push(cols[1].to_string());
        c.push(disasm(
            u64::from_str_radix(cols[0], 16).unwrap(),
            Style::Kiln,
        ));
    }
    // vc4asm's syntax, which the assembler does not read: malformed input of another kind
    let tsv = std::fs::read_to_string(golden().join("roundtrip.tsv")).unwrap();
    for line in tsv.lines().skip(1).step_by(31) {
        c.push(line.split('\t').nth(2).unwrap().to_string());
    }
    for name in ["shader_256.hex", "sgemm.bin"] {
        let w =
            words::parse(&std::fs::read(golden().join("programs").join(name)).unwrap()).unwrap();
        c.push(disasm_program(&w[..40], Style::Kiln));
        c.push(disasm_program(&w[..40], Style::Mesa));
    }
    c.push("start: load_imm r1, 3   # counter\nloop: sub.sf r1, r1, 1 // x\nbranch.any_zc.rel loop\nbranch start\n".into());
    c
});

/// Characters that are inserted or substituted: ASCII punctuation the grammar uses, digits,
/// letters, whitespace, multi-byte characters and control characters.
const CHARS: &[char] = &[
    '.', ',', ';', ':', '+', '-', '?', '<', '>', '(', ')', '#', '/', ' ', '\t', '\n', '0', '1',
    '9', 'x', 'a', 'b', 'r', 'é', '€', '𝄞', 'ß', '\u{0}', '\u{7f}', '\u{feff}', 'Ω',
];

/// Applies one edit. `pos` and `arg` are reduced modulo the sizes they index.
fn mutate(text: &str, kind: u8, pos: usize, arg: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let p = if n == 0 { 0 } else { pos % (n + 1) };
    let c = CHARS[arg % CHARS.len()];
    let mut out: Vec<char> = chars.clone();
    match kind % 8 {
        // delete a run of characters
        0 => {
            let end = (p + 1 + arg % 4).min(n);
            out.drain(p.min(n)..end);
        }
        // insert a character
        1 => out.insert(p, c),
        // replace a character
        2 if p < n => out[p] = c,
        // truncate
        3 => out.truncate(p),
        // duplicate a whitespace/comma-separated token in place
        4 | 5 => {
            let toks: Vec<&str> = text.split_inclusive([' ', ',']).collect();
            let mut s = String::new();
            let k = if toks.is_empty() { 0 } else { pos % toks.len() };
            for (i, t) in toks.iter().enumerate() {
                s.push_str(t);
                if i == k {
                    s.push_str(t);
                }
            }
            return s;
        }
        // replace a raw byte, keeping the text UTF-8 (lossily)
        6 => {
            let mut b = text.as_bytes().to_vec();
            if !b.is_empty() {
                let i = pos % b.len();
                b[i] = (arg % 256) as u8;
            }
            return String::from_utf8_lossy(&b).into_owned();
        }
        // swap a digit for a long number (overflow)
        _ => {
            if let Some(i) = chars.iter().position(|ch| ch.is_ascii_digit()) {
                let big = [
                    "99999999999999999999",
                    "4294967296",
                    "256",
                    "-9223372036854775808",
                ];
                let mut s: String = chars[..i].iter().collect();
                s.push_str(big[arg % big.len()]);
                s.extend(&chars[i + 1..]);
                return s;
            }
        }
    }
    out.into_iter().collect()
}

/// Runs the reader on `text`, and the round trip on what it assembles; `Err` with the text
/// when something panics or the kiln-style text does not give the same words back.
fn no_panic(text: &str) -> Result<(), String> {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _ = assemble_line(text);
        let words = assemble(text).ok()?;
        let _ = disasm_program(&words, Style::Mesa);
        let again = assemble(&disasm_program(&words, Style::Kiln));
        (again.as_ref() != Ok(&words)).then_some(again)
    }));
    match r {
        Ok(None) => Ok(()),
        Ok(Some(again)) => Err(format!("{text:?} assembles, its kiln text gives {again:?}")),
        Err(_) => Err(format!("assembler panicked on {text:?}")),
    }
}

#[test]
fn corpus_itself_never_panics() {
    for t in CORPUS.iter() {
        no_panic(t).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6000))]
    #[test]
    fn mutated_disassembly_never_panics(
        base in any::<usize>(),
        edits in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<usize>()), 1..4),
    ) {
        let mut text = CORPUS[base % CORPUS.len()].clone();
        for (k, p, a) in edits {
            text = mutate(&text, k, p, a);
        }
        prop_assert_eq!(no_panic(&text), Ok(()));
    }
}
