//! The `.kir` text format: exact round trip on random programs, and no panic on any input.

use kiln_ir::generate::{GenConfig, Rng, generate};
use kiln_ir::{parse_function, print_function, verify};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn parse_print_is_identity(seed in any::<u64>(), size in 10usize..200) {
        let func = generate(&GenConfig { size, ..GenConfig::new(seed) });
        let text = print_function(&func);
        let parsed = parse_function(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        // The structures agree, not just two printings of the same loss.
        prop_assert!(parsed == func, "{text}");
        prop_assert!(verify(&parsed).is_ok());
    }
}

fn corpus() -> Vec<String> {
    (0..20)
        .map(|s| print_function(&generate(&GenConfig::new(s))))
        .collect()
}

/// Feeds truncated, mutated and random text to the reader; it must answer, never panic.
#[test]
fn reader_never_panics() {
    let texts = corpus();
    let mut rng = Rng::new(0x5eed);
    let alphabet: Vec<char> = "%:@()[],={}.;\n -0123456789abvsx_fikldnuelpr\t"
        .chars()
        .collect();
    let mut cases = 0;
    for text in &texts {
        let chars: Vec<char> = text.chars().collect();
        // Every truncation point on a stride.
        for cut in (0..chars.len()).step_by(7) {
            let s: String = chars[..cut].iter().collect();
            let _ = parse_function(&s);
            cases += 1;
        }
        // Point mutations: replace, delete, insert.
        for _ in 0..300 {
            let mut m = chars.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(m.len().max(1));
                match rng.below(3) {
                    0 if !m.is_empty() => m[at] = alphabet[rng.below(alphabet.len())],
                    1 if !m.is_empty() => {
                        m.remove(at);
                    }
                    _ => m.insert(at.min(m.len()), alphabet[rng.below(alphabet.len())]),
                }
            }
            let s: String = m.into_iter().collect();
            if let Ok(f) = parse_function(&s) {
                // Whatever parses must also verify without panicking and print.
                let _ = verify(&f);
                let _ = print_function(&f);
            }
            cases += 1;
        }
    }
    // Random text.
    for _ in 0..2000 {
        let n = rng.below(200);
        let s: String = (0..n)
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        let _ = parse_function(&format!(
            "target generic(v=8, s=4)\nfunction @f {{\n{s}\n}}\n"
        ));
        let _ = parse_function(&s);
        cases += 2;
    }
    assert!(cases > 5000, "{cases}");
}

/// Inputs fuzzing found.
#[test]
fn fuzzer_findings_are_errors() {
    for class in ["v200", "v255", "v0", "s129"] {
        let text = format!(
            "target generic(v=8, s=4)\nfunction @f {{\nbb0:\n    %0:{class} = input 0\n    return\n}}\n"
        );
        let e = parse_function(&text).unwrap_err();
        assert!(e.message.contains("invalid class"), "{class}: {e}");
    }
}

#[test]
fn errors_carry_line_and_column() {
    let text = "target generic(v=8, s=4)\nfunction @f {\nbb0:\n    %0:v1 = fadd %1, 2\n    %1:q1 = input 0\n    return\n}\n";
    let e = parse_function(text).unwrap_err();
    assert_eq!((e.line, e.col), (5, 8), "{e}");
    assert!(e.message.contains("unknown register file `q`"), "{e}");
    let e = parse_function("target generic(v=8)\nfunction @f {\nbb1:\n}\n").unwrap_err();
    assert_eq!((e.line, e.col), (3, 1));
    assert!(e.message.contains("expected block label `bb0`"), "{e}");
    let e = parse_function("target nope()\n").unwrap_err();
    assert!(e.message.contains("unknown target `nope`"), "{e}");
}

#[test]
fn constants_round_trip_through_their_printed_form() {
    let mut rng = Rng::new(3);
    for k in 0..20_000u64 {
        let bits = match k % 4 {
            0 => rng.next_u64() as u32,
            1 => (rng.below(200_000) as i64 - 100_000) as u32,
            2 => (rng.below(1000) as f32 / 8.0 - 60.0).to_bits(),
            _ => [
                0x8000_0000,
                0x7f80_0000,
                0xff80_0000,
                0x7fc0_0001,
                1,
                0x0080_0000,
            ][k as usize / 4 % 6],
        };
        let text = format!(
            "target generic(v=8, s=4)\nfunction @f {{\nbb0:\n    %0:v1 = mov {}\n    return\n}}\n",
            kiln_ir::text::fmt_const(bits)
        );
        let f = parse_function(&text).unwrap_or_else(|e| panic!("{bits:#x}: {e}\n{text}"));
        match f.blocks[0].insts[0].operands[0].value {
            kiln_ir::Value::Const(c) => assert_eq!(c, bits),
            v => panic!("{v:?}"),
        }
    }
}
