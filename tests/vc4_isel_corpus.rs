//! Selection over the real corpus (`../shared/corpus`): every vertex and fragment entry point,
//! lowered by the front end and optimised by the middle end as `kiln corpus regalloc` does, must
//! select and verify on the vc4 target, or be refused with `unsupported: …`. Counts by reason
//! are printed. Run with `cargo test --release --test vc4_isel_corpus -- --ignored
//! --nocapture`.

use kiln::pipeline::Options;
use kiln_vc4::isel::select;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Default)]
struct Counts {
    selected: usize,
    refused: usize,
    /// Per feature: entry points refused that need it.
    reasons: BTreeMap<String, usize>,
    /// Entry points that do not reach selection (front end or middle end errors).
    skipped: usize,
    /// Selected programs that run in the interpreter on ordinary inputs, before and after.
    ran: usize,
    /// ... whose outputs agree within a relative 1e-3 (or 1e-3 absolute near 0).
    close: usize,
    /// Selected programs that needed each of the longer lowerings (division, bit operations,
    /// trigonometry, u2f).
    lowered: BTreeMap<&'static str, usize>,
}

/// Generic ops whose lowering is a longer sequence, counted per selected program.
const LOWERED: [&str; 16] = [
    "idiv",
    "udiv",
    "irem",
    "urem",
    "ibitcount",
    "ibitreverse",
    "ubfe",
    "ibfe",
    "bfi",
    "fsin",
    "fcos",
    "fatan",
    "fatan2",
    "fasin",
    "facos",
    "u2f",
];

fn close(a: u32, b: u32) -> bool {
    let (x, y) = (f32::from_bits(a), f32::from_bits(b));
    a == b || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-3 * x.abs().max(y.abs()).max(1.0)
}

#[test]
#[ignore]
fn corpus_selects_or_is_refused() {
    let dir = Path::new("../shared/corpus");
    let fronts = kiln::corpus::fronts(dir, None, &Options::default()).unwrap();
    let files = fronts.len();
    let mut c = Counts::default();
    for (name, front) in fronts {
        {
            let Ok(front) = front else {
                c.skipped += 1;
                continue;
            };
            let generic = front.generic;
            let mut func = generic.clone();
            match select(&mut func) {
                Ok(()) => {
                    if let Err(e) = kiln_ir::verify(&func) {
                        panic!("{name}: the selected function does not verify: {}", e[0]);
                    }
                    c.selected += 1;
                    for (name, _) in kiln_vc4::isel::opcode_counts(&generic) {
                        if let Some(op) = LOWERED.iter().find(|&&op| op == name) {
                            *c.lowered.entry(op).or_insert(0) += 1;
                        }
                    }
                    let mut env = kiln_interp::Env::with_ordinary_values(&generic, 16);
                    env.step_limit = 200_000;
                    // The selected program runs more instructions (a lowered `fsin` is
                    // about 35, an integer division about 100): it gets a larger limit.
                    let mut env_selected = env.clone();
                    env_selected.step_limit = 20 * env.step_limit;
                    let runs = (
                        kiln_interp::run_ssa(&generic, &env),
                        kiln_interp::run_ssa(&func, &env_selected),
                    );
                    if let (Ok(_), Err(e)) | (Err(e), _) = &runs {
                        eprintln!("does not run: {name}: {e}");
                    }
                    if let (Ok(w), Ok(g)) = runs {
                        c.ran += 1;
                        let agree = w.slots.iter().all(|(slot, lanes)| {
                            lanes.iter().zip(&g.slots[slot]).all(|(a, b)| match (a, b) {
                                (Some(a), Some(b)) => a.iter().zip(b).all(|(x, y)| match (x, y) {
                                    (Some(x), Some(y)) => close(*x, *y),
                                    _ => true,
                                }),
                                (None, None) => true,
                                _ => false,
                            })
                        });
                        c.close += agree as usize;
                        if !agree {
                            eprintln!("differs beyond 1e-3: {name}");
                        }
                    }
                }
                Err(e) => {
                    assert!(e.to_string().starts_with("unsupported: "));
                    c.refused += 1;
                    for r in e.0 {
                        *c.reasons.entry(r).or_insert(0) += 1;
                    }
                }
            }
        }
    }
    eprintln!(
        "{} entry points: {} selected and verified, {} refused, {} not lowered or optimised",
        files, c.selected, c.refused, c.skipped
    );
    eprintln!(
        "selected programs run before and after: {}, outputs within 1e-3: {}",
        c.ran, c.close
    );
    let lowered: Vec<String> = c
        .lowered
        .iter()
        .map(|(op, n)| format!("{op} {n}"))
        .collect();
    eprintln!(
        "selected programs using a lowered op: {}",
        lowered.join(", ")
    );
    let mut reasons: Vec<_> = c.reasons.into_iter().collect();
    reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
    for (r, n) in reasons {
        eprintln!("  {n:6}  {r}");
    }
}
