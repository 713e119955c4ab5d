//! `colour_clamp`: the clamps dropped before a colour output leave every byte the tile buffer
//! gets as it was. The oracle is the interpreter on the function before and after, each output
//! converted as the mul unit's colour pack converts it (`sim::alu::pack_mul`, the harness's
//! conversion), on the values where clamps and the pack could differ: NaNs, infinities, signed
//! zeros, denormals, the ends of [0, 1] and beyond.

use kiln_interp::Env;
use kiln_ir::{Function, GenericTarget, Opcode, Operand, RegClass, Temp, builder::Builder};
use kiln_vc4::colour_clamp::drop_colour_clamps;
use kiln_vc4::interface::ShaderInfo;

const SPECIAL: &[u32] = &[
    0x7fc0_0000, // NaN
    0xffc0_0000, // a negative NaN
    0x7f80_0001, // a signalling NaN
    0x7f80_0000, // +∞
    0xff80_0000, // −∞
    0x0000_0000,
    0x8000_0000, // −0
    0x0000_0001, // a denormal
    0x8000_0001, // a negative denormal
    0x3f80_0000, // 1
    0x3f7f_ffff, // just below 1
    0x3f80_0001, // just above 1
    0x3b00_0000, // 1/512: half a byte
];

const ORDINARY: &[f32] = &[0.5, 1.5, -0.5, 2.0, 0.75, -2.5, 255.0, 1e-8, 1e30, -1e30];

fn inputs() -> Vec<u32> {
    SPECIAL
        .iter()
        .copied()
        .chain(ORDINARY.iter().map(|f| f.to_bits()))
        .collect()
}

fn c(x: f32) -> Operand {
    Operand::constant(x.to_bits())
}

/// A fragment shader writing colour components 0.. with what `body` makes of input 0.
fn shader(body: impl FnOnce(&mut Builder, RegClass, Temp) -> Vec<Temp>) -> Function {
    let target = GenericTarget::arc(64, 16);
    let v1 = target.class(kiln_ir::FileId(0), 1);
    let mut f = Function::new("t", target);
    let mut b = Builder::new(&mut f);
    let x = b.inst(Opcode::Input, &[0], &[v1], [])[0];
    for (slot, v) in body(&mut b, v1, x).into_iter().enumerate() {
        b.inst(Opcode::Output, &[slot as u32], &[], [Operand::temp(v)]);
    }
    b.ret();
    f
}

/// Each colour output's byte per lane, as the tile buffer gets it.
fn bytes(f: &Function, lanes: &[u32]) -> Vec<Vec<u32>> {
    let mut env = Env::new(lanes.len());
    env.inputs.insert(0, lanes.to_vec());
    let o = kiln_interp::run_ssa(f, &env).unwrap_or_else(|e| panic!("{e}"));
    o.slots
        .values()
        .map(|per_lane| {
            per_lane
                .iter()
                .map(|units| {
                    let v = units.as_ref().expect("written")[0].expect("defined");
                    kiln_qpu::sim::alu::pack_mul(4, v).0
                })
                .collect()
        })
        .collect()
}

/// Drops the clamps of `f`; asserts that `dropped` operations went, that the function is
/// still valid, and that every colour byte is what it was.
fn check(what: &str, f: Function, dropped: usize) {
    let mut after = f.clone();
    let info = ShaderInfo::fragment_default(&f);
    assert_eq!(drop_colour_clamps(&mut after, &info), dropped, "{what}");
    let count = |f: &Function| f.blocks.iter().map(|b| b.insts.len()).sum::<usize>();
    assert_eq!(count(&after), count(&f) - dropped, "{what}");
    if let Err(e) = kiln_ir::verify(&after) {
        panic!("{what}: {}\n{}", e[0], kiln_ir::print_function(&after));
    }
    let lanes = inputs();
    assert_eq!(bytes(&after, &lanes), bytes(&f, &lanes), "{what}");
}

#[test]
fn clamps_the_pack_makes_go_and_every_byte_stays() {
    type Body = fn(&mut Builder, RegClass, Temp) -> Vec<Temp>;
    let cases: &[(&str, usize, Body)] = &[
        ("clamp(x, 0, 1)", 2, |b, v1, x| {
            let lo = b.op(Opcode::Fmax, v1, [Operand::temp(x), c(0.0)]);
            vec![b.op(Opcode::Fmin, v1, [Operand::temp(lo), c(1.0)])]
        }),
        // A NaN x gives 1 from the fmin: that fmin stays.
        ("max(min(x, 1), 0)", 1, |b, v1, x| {
            let hi = b.op(Opcode::Fmin, v1, [Operand::temp(x), c(1.0)]);
            vec![b.op(Opcode::Fmax, v1, [Operand::temp(hi), c(0.0)])]
        }),
        ("max(x, 0)", 1, |b, v1, x| {
            vec![b.op(Opcode::Fmax, v1, [Operand::temp(x), c(0.0)])]
        }),
        ("min(x, 1)", 0, |b, v1, x| {
            vec![b.op(Opcode::Fmin, v1, [Operand::temp(x), c(1.0)])]
        }),
        ("clamp(x, -2, 1.5)", 2, |b, v1, x| {
            let lo = b.op(Opcode::Fmax, v1, [Operand::temp(x), c(-2.0)]);
            vec![b.op(Opcode::Fmin, v1, [Operand::temp(lo), c(1.5)])]
        }),
        ("max(x, 0.5)", 0, |b, v1, x| {
            vec![b.op(Opcode::Fmax, v1, [Operand::temp(x), c(0.5)])]
        }),
        ("clamp(x, 0, 0.75)", 0, |b, v1, x| {
            let lo = b.op(Opcode::Fmax, v1, [Operand::temp(x), c(0.0)]);
            vec![b.op(Opcode::Fmin, v1, [Operand::temp(lo), c(0.75)])]
        }),
        ("the constants first", 2, |b, v1, x| {
            let lo = b.op(Opcode::Fmax, v1, [c(-0.0), Operand::temp(x)]);
            vec![b.op(Opcode::Fmin, v1, [c(1.0), Operand::temp(lo)])]
        }),
        ("min(min(max(x, 0), 2), 1)", 3, |b, v1, x| {
            let lo = b.op(Opcode::Fmax, v1, [Operand::temp(x), c(0.0)]);
            let two = b.op(Opcode::Fmin, v1, [Operand::temp(lo), c(2.0)]);
            vec![b.op(Opcode::Fmin, v1, [Operand::temp(two), c(1.0)])]
        }),
        ("max(x, NaN)", 0, |b, v1, x| {
            vec![b.op(
                Opcode::Fmax,
                v1,
                [Operand::temp(x), Operand::constant(0x7fc0_0000)],
            )]
        }),
        // Read elsewhere, the clamps stay: output 0 reads x, output 1 the fmax's operand, and
        // a product reads the clamp.
        ("clamps read elsewhere", 0, |b, v1, x| {
            let lo = b.op(Opcode::Fmax, v1, [Operand::temp(x), c(0.0)]);
            let hi = b.op(Opcode::Fmin, v1, [Operand::temp(lo), c(1.0)]);
            let product = b.op(Opcode::Fmul, v1, [Operand::temp(hi), c(0.5)]);
            vec![hi, lo, product]
        }),
    ];
    for (what, dropped, body) in cases {
        check(what, shader(body), *dropped);
    }
    // Two outputs through one clamp: it goes once both read through it.
    let shared = shader(|b, v1, x| {
        let lo = b.op(Opcode::Fmax, v1, [Operand::temp(x), c(0.0)]);
        let hi = b.op(Opcode::Fmin, v1, [Operand::temp(lo), c(1.0)]);
        vec![hi, hi]
    });
    check("one clamp, two outputs", shared, 2);
}

/// Only colour outputs read through: a vertex shader's or a raw output keeps its clamp.
#[test]
fn other_outputs_keep_their_clamps() {
    let f = shader(|b, v1, x| {
        let lo = b.op(Opcode::Fmax, v1, [Operand::temp(x), c(0.0)]);
        vec![b.op(Opcode::Fmin, v1, [Operand::temp(lo), c(1.0)])]
    });
    let mut after = f.clone();
    assert_eq!(drop_colour_clamps(&mut after, &ShaderInfo::debug(&f)), 0);
    assert_eq!(after, f);
}

/// Where a clamp stays (something but a colour output reads it), the outputs still read it:
/// reading the unclamped value beside it would keep both live. Here alpha is clamped and the
/// colour clamped to alpha (premultiplied), as skia writes it.
#[test]
fn a_clamp_that_stays_keeps_its_readers() {
    let f = shader(|b, v1, x| {
        let lo = b.op(Opcode::Fmax, v1, [Operand::temp(x), c(0.0)]);
        let alpha = b.op(Opcode::Fmin, v1, [Operand::temp(lo), c(1.0)]);
        let red = b.op(Opcode::Fmin, v1, [Operand::temp(lo), Operand::temp(alpha)]);
        vec![red, red, red, alpha]
    });
    let mut after = f.clone();
    let info = ShaderInfo::fragment_default(&f);
    assert_eq!(drop_colour_clamps(&mut after, &info), 0);
    assert_eq!(after, f);
}
