//! The benchmarks' own parts: the generated families are programs the pipeline takes (and the
//! live values one is refused for spilling, as the scaling table says), the sample list is Mesa's
//! and the ten largest, and the report's median and totals are those of its rows.

use kiln::bench::{self, Family, Measured, Sample};
use std::path::Path;

#[test]
fn every_family_compiles_at_a_small_size() {
    for family in Family::ALL {
        // A thousand values live at once are past the registers (a hundred the pre-RA
        // scheduler brings within them).
        let n = if family == Family::LiveValues {
            1000
        } else {
            100
        };
        let (insts, outcome, seconds) =
            bench::scaling_one(family, n).unwrap_or_else(|e| panic!("{}: {e}", family.name()));
        assert!(insts >= n, "{}: {insts} instructions", family.name());
        assert!(seconds >= 0.0);
        match family {
            Family::LiveValues => assert!(outcome.contains("refused"), "{outcome}"),
            Family::SequentialIfs => assert!(outcome.ends_with("QPU instructions"), "{outcome}"),
            Family::WideSsa | Family::WideGraph => assert!(!outcome.starts_with("0 "), "{outcome}"),
            _ => {}
        }
        assert_eq!(Family::by_name(family.name()), Some(family));
    }
}

#[test]
fn the_live_family_fits_the_registers_when_small() {
    // Four values live at once fit: the refusal above is the demand's, not the generator's.
    let (_, outcome, _) = bench::scaling_one(Family::LiveValues, 4).unwrap();
    assert!(outcome.ends_with("QPU instructions"), "{outcome}");
}

#[test]
fn the_samples_are_mesas_and_the_largest() {
    let samples = bench::samples(Path::new("../shared/corpus/mesa-vc4/compile-cost.tsv")).unwrap();
    assert_eq!(samples.len(), 30 + bench::LARGEST.len());
    assert!(samples[..30].iter().all(|s| s.mesa_ir.is_some()));
    assert!(samples[30..].iter().all(|s| s.mesa_ir.is_none()));
    for s in &samples {
        assert!(
            Path::new("../shared/corpus").join(&s.path).exists(),
            "{}",
            s.path
        );
    }
}

#[test]
fn the_report_gives_the_median_and_total() {
    let row = |warm: u64, mesa: u64| Measured {
        sample: Sample {
            path: format!("x{warm}.wgsl"),
            entry: "main".into(),
            mesa_instructions: Some(1),
            mesa_ir: Some(mesa),
        },
        outcome: "1".into(),
        warm,
        setup: 10,
    };
    // Ratios 1, 3 and 5 (total 900 / 300); an unmeasured row counts in neither.
    let mut rows = vec![row(100, 100), row(300, 100), row(500, 100)];
    rows.push(Measured {
        sample: Sample {
            mesa_ir: None,
            ..rows[0].sample.clone()
        },
        ..row(7000, 1)
    });
    let text = bench::report(&rows);
    assert!(text.contains("median ratio 3.00"), "{text}");
    assert!(text.contains("total 900 / 300 = 3.00"), "{text}");
    assert!(text.contains("max 5.00, 2 above 2x"), "{text}");
}
