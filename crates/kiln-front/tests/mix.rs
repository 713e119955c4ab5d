//! `mix(x, y, a)` gives exactly `y` at `a = 1` and `x` at `a = 0`, so a `step` on the result
//! does not flip (`mix(x, -2.0, 1.0)` was −1.99999988 with `x + a·(y − x)`), checked through
//! the interpreter on per-lane inputs.

use kiln_front::{Language, Source, lower_entry_point, parse};
use kiln_interp::{Env, Slot, run_ssa};

const LANES: usize = 16;

fn x(l: usize) -> f32 {
    [0.3, 1.0e-3, -7.25, 123.456, 0.1, 1.0e7, -0.0, 3.0][l % 8] * if l >= 8 { -1.0 } else { 1.0 }
}

/// Runs `body` with `@location(0) x: f32` and returns output 0..3 per lane.
fn outputs(body: &str) -> Vec<[u32; 4]> {
    let src =
        format!("@fragment fn main(@location(0) x: f32) -> @location(0) vec4f {{\n{body}\n}}\n");
    let source = Source {
        name: "mix".into(),
        language: Language::Wgsl,
        bytes: src.into_bytes(),
    };
    let parsed = parse(&source).unwrap();
    let lowered = lower_entry_point(&parsed, None, None).unwrap();
    kiln_ir::verify(&lowered.function).unwrap();
    let env = Env::from_slots(&lowered.function, LANES, |s| match s {
        Slot::Input { lane, .. } => x(lane).to_bits(),
        Slot::Uniform(_) => 0,
    });
    let out = run_ssa(&lowered.function, &env).unwrap();
    (0..LANES)
        .map(|l| [0u32, 1, 2, 3].map(|c| out.slots[&c][l].as_ref().unwrap()[0].unwrap()))
        .collect()
}

#[test]
fn mix_ends_are_exact_and_step_does_not_flip() {
    let outs = outputs(
        "let a = mix(x, -2.0, 1.0);
         let b = mix(-2.0, x, 0.0);
         return vec4f(a, b, step(-2.0, a), mix(x, 5.0, 0.5));",
    );
    for (l, o) in outs.iter().enumerate() {
        assert_eq!(f32::from_bits(o[0]), -2.0, "lane {l}: mix(x, -2, 1)");
        assert_eq!(f32::from_bits(o[1]), -2.0, "lane {l}: mix(-2, x, 0)");
        assert_eq!(
            f32::from_bits(o[2]),
            1.0,
            "lane {l}: step(-2, mix(x, -2, 1))"
        );
        // The middle is x/2 + 2.5 up to rounding.
        let mid = x(l) * 0.5 + 2.5;
        assert!(
            (f32::from_bits(o[3]) - mid).abs() <= 1e-6 * mid.abs().max(1.0),
            "lane {l}"
        );
    }
}
