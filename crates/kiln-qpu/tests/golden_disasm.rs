//! Every row of `golden/disasm.tsv`: Mesa style must be identical to Mesa's text; kiln style
//! must show the missing information on noted rows, and on rows without a note the kiln text of
//! the normalized word must be Mesa's text (but for the documented extras).

use kiln_qpu::isa::{Style, disasm, normalize};
use std::path::{Path, PathBuf};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/vc4/golden")
}

/// What the kiln text must contain for each kind of note (any of the strings).
fn shown_by_kiln(note: &str) -> Vec<String> {
    let num = |s: &str| -> u8 {
        s.split(|c: char| !c.is_ascii_digit())
            .find(|t| !t.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    };
    if note.starts_with("branch:") {
        // link destinations after the target (Mesa's branch text has no comma)
        return vec![", ".into()];
    }
    if note.starts_with("semaphore") {
        return vec!["sacq".into(), "srel".into()];
    }
    if note.starts_with("ldi per-element mode 1") {
        return vec!["load_imm.pes".into()];
    }
    if note.starts_with("ldi per-element mode 3") {
        return vec!["load_imm.peu".into()];
    }
    if note.starts_with("ldi sf") {
        return vec![".sf ".into()];
    }
    if note.starts_with("reserved ldi mode") {
        return vec![format!("load_imm.mode{}", num(note))];
    }
    if note.starts_with("rotate by r5") {
        return vec!["+r5".into()];
    }
    if note.starts_with("rotate of regfile") {
        // checked by `rotates_non_accumulator` instead
        return vec![];
    }
    if let Some(rest) = note.strip_prefix("small imm ") {
        let si = num(rest) as i32;
        return vec![format!("{}+", si - 64)];
    }
    if note.starts_with("pm=1 pack") {
        return vec![format!(".pack{}", num(&note[4..]))];
    }
    if note.starts_with("undefined op_add") {
        return vec![format!("op_add{}", num(note))];
    }
    if note.starts_with("unpack") {
        let names = ["", "16a", "16b", "8d_rep", "8a", "8b", "8c", "8d"];
        let n = names[num(note) as usize];
        return vec![format!("unpack.{n} "), format!("unpack.r4.{n} ")];
    }
    panic!("unknown note {note}");
}

/// True when some operand other than r0–r5 carries a rotation (`ra6+8`, `-8+8`, `vpm_read+1`).
fn rotates_non_accumulator(text: &str) -> bool {
    text.split([' ', ',', ';']).any(|t| {
        t.contains('+') && !(t.len() > 2 && t.starts_with('r') && t.as_bytes()[1].is_ascii_digit())
    })
}

const EXTRAS: &[&str] = &[
    "read_a.", "read_b.", "b:", "?", "r5quad", "r5rep", "rev_flag", ".pack", ".apack",
];

/// Kiln-style annotations of fields the machine ignores (shown when not normal).
const HIDDEN: &[&str] = &[
    " nop.", ", nop.", ".always", ".pack0", ".unused", ".raddr_a", "read_a.", "read_b.", "b:",
];

#[test]
fn disasm_tsv_every_row() {
    let text = std::fs::read_to_string(golden().join("disasm.tsv")).unwrap();
    let mut rows = 0;
    let mut mesa_fail = Vec::new();
    let mut kiln_fail = Vec::new();
    let mut extras = 0;
    let (mut not_normal, mut annotated) = (0, 0);
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let word = u64::from_str_radix(cols[0], 16).unwrap();
        let mesa = cols[1];
        let note = cols.get(3).copied().unwrap_or("");
        rows += 1;
        let ours = disasm(word, Style::Mesa);
        if ours != mesa {
            mesa_fail.push(format!("{:016x}\n  want {mesa}\n  got  {ours}", word));
        }
        let k = disasm(word, Style::Kiln);
        if normalize(word) != word {
            not_normal += 1;
            // a word that is not normal shows a hidden field (else it could not round-trip)
            if HIDDEN.iter().any(|x| k.contains(x)) {
                annotated += 1;
            }
        }
        let k = disasm(normalize(word), Style::Kiln);
        if note.is_empty() {
            // Kiln style may add only the documented extras where Mesa's text is ambiguous
            // without a note: side-effect reads no operand shows, `b:` file prefixes, unnamed
            // read addresses, r5 per-quad/replicate, pm = 1 packs that read like pm = 0.
            if k != mesa {
                extras += 1;
                if !EXTRAS.iter().any(|x| k.contains(x)) {
                    kiln_fail.push(format!("{word:016x} (no note)\n  want {mesa}\n  got  {k}"));
                }
            }
        } else {
            for n in note.split("; ") {
                let want = shown_by_kiln(n);
                let shown = if n.starts_with("rotate of regfile") {
                    rotates_non_accumulator(&k)
                } else {
                    want.iter().any(|w| k.contains(w.as_str()))
                };
                if !shown {
                    kiln_fail.push(format!("{word:016x} ({n}): not shown: {k}"));
                }
            }
        }
    }
    assert_eq!(rows, 3912);
    eprintln!("kiln style adds documented extras to {extras} rows without a note");
    eprintln!("{not_normal} words are not normal, {annotated} of them show a hidden-field mark");
    assert_eq!(annotated, not_normal);
    assert!(
        mesa_fail.is_empty(),
        "{} of {rows} rows differ from Mesa:\n{}",
        mesa_fail.len(),
        mesa_fail[..mesa_fail.len().min(20)].join("\n")
    );
    assert!(
        kiln_fail.is_empty(),
        "{} kiln-style rows wrong:\n{}",
        kiln_fail.len(),
        kiln_fail[..kiln_fail.len().min(20)].join("\n")
    );
}
