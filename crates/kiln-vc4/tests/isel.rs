//! Differential tests of vc4 instruction selection: one-op programs run in the interpreter
//! before (generic ops) and after selection (vc4 ops, lowered sequences) on edge cases and
//! random inputs. Where the QPU means the same as the generic op the results agree bit for bit;
//! where it intentionally differs (denormals flushed, truncating adder, SFU approximations,
//! ftoi's range) the documented rule or the measured error bound is asserted.

use kiln_interp::Env;
use kiln_ir::generate::Rng;
use kiln_ir::{Def, FileId, Function, GenericTarget, Inst, Opcode, Operand, builder::Builder};
use kiln_vc4::isel::select;
use kiln_vc4::ops::Op;

/// `output 0, op(input 0, input 1, …)` on the generic target.
fn program(op: Opcode, arity: usize) -> Function {
    let target = GenericTarget::arc(64, 16);
    let v1 = target.class(FileId(0), 1);
    let mut f = Function::new("t", target);
    let mut b = Builder::new(&mut f);
    let args: Vec<Operand> = (0..arity)
        .map(|k| Operand::temp(b.inst(Opcode::Input, &[k as u32], &[v1], [])[0]))
        .collect();
    let r = b.op(op, v1, args);
    b.inst(Opcode::Output, &[0], &[], [Operand::temp(r)]);
    b.ret();
    f
}

/// The SFU's reciprocal and reciprocal square root as the interpreter computes them (the
/// simulator's model, correctly rounded), or coarsened to the 13 good bits of the hardware's
/// estimate: the low 10 mantissa bits cleared (`Low`, an estimate below) or set (`High`, above).
#[derive(Clone, Copy, Debug)]
enum Sfu {
    Exact,
    Low,
    High,
}

/// Rewrites every `qpu_recip`/`qpu_recipsqrt` result through the mask `sfu` asks for.
fn coarsen(func: &mut Function, sfu: Sfu) {
    let (op, mask) = match sfu {
        Sfu::Exact => return,
        Sfu::Low => (Op::And, 0xffff_fc00),
        Sfu::High => (Op::Or, 0x0000_03ff),
    };
    for b in 0..func.blocks.len() {
        let insts = std::mem::take(&mut func.blocks[b].insts);
        let mut out = Vec::with_capacity(insts.len());
        for mut inst in insts {
            if inst.op == Op::Recip.opcode() || inst.op == Op::Recipsqrt.opcode() {
                let t = inst.defs[0].temp;
                let raw = func.new_temp(func.class(t));
                inst.defs[0].temp = raw;
                let mut m = Inst::new(op.opcode());
                m.flags = inst.flags;
                m.defs.push(Def::new(t));
                m.operands.push(Operand::temp(raw));
                m.operands.push(Operand::constant(mask));
                out.push(inst);
                out.push(m);
            } else {
                out.push(inst);
            }
        }
        func.blocks[b].insts = out;
    }
}

/// Runs `op` before and after selection on every row of `rows` (64 lanes a run); returns
/// (inputs, generic result, selected result) per row.
fn run(op: Opcode, rows: &[Vec<u32>]) -> Vec<(Vec<u32>, u32, u32)> {
    run_with(op, rows, Sfu::Exact)
}

fn run_with(op: Opcode, rows: &[Vec<u32>], sfu: Sfu) -> Vec<(Vec<u32>, u32, u32)> {
    run_program(op, program(op, rows[0].len()), rows, sfu)
}

/// `output 0, op(input 0, d)` with a constant second operand.
fn program_const(op: Opcode, d: u32) -> Function {
    let target = GenericTarget::arc(64, 16);
    let v1 = target.class(FileId(0), 1);
    let mut f = Function::new("t", target);
    let mut b = Builder::new(&mut f);
    let x = b.inst(Opcode::Input, &[0], &[v1], [])[0];
    let r = b.op(op, v1, [Operand::temp(x), Operand::constant(d)]);
    b.inst(Opcode::Output, &[0], &[], [Operand::temp(r)]);
    b.ret();
    f
}

fn run_program(
    op: Opcode,
    before: Function,
    rows: &[Vec<u32>],
    sfu: Sfu,
) -> Vec<(Vec<u32>, u32, u32)> {
    let arity = rows[0].len();
    let mut after = before.clone();
    select(&mut after).unwrap_or_else(|e| panic!("{op}: {e}"));
    if let Err(e) = kiln_ir::verify(&after) {
        panic!("{op}: {}\n{}", e[0], kiln_ir::print_function(&after));
    }
    assert_eq!(after.target.name(), "vc4");
    coarsen(&mut after, sfu);
    let mut out = Vec::new();
    for chunk in rows.chunks(64) {
        let mut env = Env::new(64);
        for k in 0..arity {
            let mut lanes: Vec<u32> = chunk.iter().map(|r| r[k]).collect();
            lanes.resize(64, 0);
            env.inputs.insert(k as u32, lanes);
        }
        let value = |f: &Function| {
            let o = kiln_interp::run_ssa(f, &env).unwrap_or_else(|e| panic!("{op}: {e}"));
            (0..chunk.len())
                .map(|l| o.slots[&0][l].as_ref().unwrap()[0].unwrap())
                .collect::<Vec<u32>>()
        };
        let (w, g) = (value(&before), value(&after));
        for (i, r) in chunk.iter().enumerate() {
            out.push((r.clone(), w[i], g[i]));
        }
    }
    out
}

fn f(x: u32) -> f32 {
    f32::from_bits(x)
}
fn is_denormal(x: u32) -> bool {
    x & 0x7f80_0000 == 0 && x & 0x007f_ffff != 0
}
/// The value the QPU reads for a float operand (denormals flushed to signed zero).
fn ftz(x: u32) -> u32 {
    if is_denormal(x) { x & 0x8000_0000 } else { x }
}
/// Equal as numbers: bit for bit, or both zero, or both NaN.
fn same_number(a: u32, b: u32) -> bool {
    a == b || (f(a) == 0.0 && f(b) == 0.0) || (f(a).is_nan() && f(b).is_nan())
}
fn rel_err(got: u32, want: u32) -> f64 {
    let (g, w) = (f(got) as f64, f(want) as f64);
    if g == w { 0.0 } else { ((g - w) / w).abs() }
}

fn special_floats() -> Vec<u32> {
    let mut v: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        3.5,
        0.49999997,
        -0.49999997,
        0.99999994,
        -0.99999994,
        1e-40,
        -1e-40,
        1e-45,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        8388608.0,
        8388609.0,
        -8388609.0,
        16777217.0,
        2147483520.0,
        2147483648.0,
        -2147483648.0,
        -2147483904.0,
        4294967296.0,
        1e10,
        -1e10,
        1e-10,
        -1e-10,
        0.1,
        -0.1,
        3.0,
        7.0,
        100.25,
        -100.75,
        std::f32::consts::PI,
        1e30,
        -1e30,
        1e-30,
    ];
    v.extend([1e-38f32, 3e38]);
    v.into_iter().map(f32::to_bits).collect()
}

/// Special values, then random bit patterns and ordinary floats.
fn floats(rng: &mut Rng, n: usize) -> Vec<u32> {
    let mut v = special_floats();
    while v.len() < n {
        v.push(match rng.below(3) {
            0 => rng.next_u64() as u32,
            1 => ((rng.below(2_000_000) as f32 - 1_000_000.0) / 997.0).to_bits(),
            _ => {
                // Exponents across the whole normal range.
                let e = 1 + rng.below(254) as u32;
                (rng.next_u64() as u32 & 0x807f_ffff) | (e << 23)
            }
        });
    }
    v
}

fn ints(rng: &mut Rng, n: usize) -> Vec<u32> {
    let mut v: Vec<u32> = vec![
        0,
        1,
        2,
        3,
        23,
        24,
        31,
        32,
        33,
        255,
        0xff_ffff,
        0x100_0000,
        0x7fff_ffff,
        0x8000_0000,
        0x8000_0001,
        0xffff_ffff,
        0xffff_fffe,
        0xff00_0000,
        0x00ff_00ff,
    ];
    while v.len() < n {
        v.push(match rng.below(3) {
            0 => rng.next_u64() as u32,
            1 => rng.below(64) as u32,
            _ => (rng.below(200_000) as i32 - 100_000) as u32,
        });
    }
    v
}

fn unary(v: &[u32]) -> Vec<Vec<u32>> {
    v.iter().map(|&x| vec![x]).collect()
}

/// All pairs of the first `k` values, then consecutive pairs of the rest.
fn pairs(v: &[u32], k: usize, rng: &mut Rng, n: usize) -> Vec<Vec<u32>> {
    let mut rows = Vec::new();
    for &a in &v[..k] {
        for &b in &v[..k] {
            rows.push(vec![a, b]);
        }
    }
    while rows.len() < n {
        let a = v[rng.below(v.len())];
        let b = v[rng.below(v.len())];
        rows.push(vec![a, b]);
    }
    rows
}

const N: usize = 4096;

/// Integer ops mean on the QPU exactly what they mean in kiln: bit for bit on every input.
#[test]
fn integer_ops_agree_bit_for_bit() {
    let mut rng = Rng::new(1);
    let v = ints(&mut rng, N);
    let two = pairs(&v, 19, &mut rng, N);
    use Opcode::*;
    for op in [
        Iadd, Isub, Iand, Ior, Ixor, Ishl, Ushr, Ishr, Imin, Imax, Umin, Umax, Imul,
    ] {
        for (x, w, g) in run(op, &two) {
            assert_eq!(w, g, "{op} {x:x?}: want {w:#x}, got {g:#x}");
        }
    }
    for op in [Inot, Ineg, Iabs, Iclz, Ictz, I2f] {
        for (x, w, g) in run(op, &unary(&v)) {
            assert_eq!(w, g, "{op} {x:x?}: want {w:#x}, got {g:#x}");
        }
    }
}

/// Conversions: ftoi truncates like f2i inside the i32 range and gives 0 outside (Mesa's
/// rule, not saturation); f2u is ftoi clamped at 0, exact below 2^31; u2f is exact everywhere
/// (itof of x, or of x halved with a sticky bit, doubled).
#[test]
fn conversions_follow_the_hardware_rules() {
    let mut rng = Rng::new(2);
    let fl = floats(&mut rng, N);
    let in_i32 = |x: u32| f(ftz(x)).abs() < 2147483648.0 || f(x) == -2147483648.0;
    for (x, w, g) in run(Opcode::F2i, &unary(&fl)) {
        let x = x[0];
        if in_i32(x) || f(x).is_nan() {
            assert_eq!(w, g, "f2i {}", f(x));
        } else {
            assert_eq!(g, 0, "f2i {} out of range", f(x));
        }
    }
    for (x, w, g) in run(Opcode::F2u, &unary(&fl)) {
        let x = x[0];
        if f(ftz(x)) < 2147483648.0 || f(x).is_nan() {
            assert_eq!(w, g, "f2u {}", f(x));
        } else {
            assert_eq!(g, 0, "f2u {} out of range", f(x));
        }
    }
    let mut iv = ints(&mut rng, N);
    // Ties and near-ties of the rounding above 2^31 (an ulp is 256 there) and above 2^24.
    for base in [
        0x8000_0000u32,
        0xffff_ff00,
        0x9abc_de00,
        0x0100_0000,
        0x7fff_ff00,
    ] {
        for off in [0u32, 1, 2, 127, 128, 129, 255, 383, 384, 385] {
            iv.push(base.wrapping_add(off));
        }
    }
    for (x, w, g) in run(Opcode::U2f, &unary(&iv)) {
        assert_eq!(w, g, "u2f {:#x}", x[0]);
    }
}

/// fmul rounds to nearest even like IEEE; only denormals differ (flushed to signed zero).
/// fneg and fsign are exact; fabs, fmin, fmax are exact on what the QPU reads (fmin/fmax
/// return the first operand when it is NaN, and either zero for ±0).
#[test]
fn exact_float_ops_agree() {
    let mut rng = Rng::new(3);
    let fl = floats(&mut rng, N);
    let two = pairs(&fl, 50, &mut rng, N);
    for (x, w, g) in run(Opcode::Fmul, &two) {
        let want = (f(ftz(x[0])) * f(ftz(x[1]))).to_bits();
        if is_denormal(want) {
            assert_eq!(g, want & 0x8000_0000, "fmul {x:x?}");
        } else {
            assert!(same_number(g, want), "fmul {x:x?}: {g:#x} {want:#x}");
            if !is_denormal(x[0]) && !is_denormal(x[1]) && !f(w).is_nan() {
                assert_eq!(g, w, "fmul {x:x?}");
            }
        }
    }
    for (x, w, g) in run(Opcode::Fneg, &unary(&fl)) {
        assert_eq!(w, g, "fneg {x:x?}");
    }
    for (x, w, g) in run(Opcode::Fsign, &unary(&fl)) {
        assert_eq!(w, g, "fsign {x:x?}");
    }
    for (x, w, g) in run(Opcode::Fabs, &unary(&fl)) {
        assert!(same_number(g, ftz(w)), "fabs {x:x?}");
    }
    for op in [Opcode::Fmin, Opcode::Fmax] {
        for (x, w, g) in run(op, &two) {
            // The QPU's rule: fmin picks b where a > b, else a; fmax a where a > b, else b.
            let (a, b) = (ftz(x[0]), ftz(x[1]));
            let gt = f(a) > f(b);
            let want = if (op == Opcode::Fmin) != gt { a } else { b };
            assert_eq!(g, want, "{op} {x:x?}");
            let nan = f(a).is_nan() || f(b).is_nan();
            let zeros = f(a) == 0.0 && f(b) == 0.0;
            if !nan && !zeros && !is_denormal(x[0]) && !is_denormal(x[1]) {
                assert_eq!(g, w, "{op} {x:x?}");
            }
        }
    }
}

/// The QPU's adder truncates: the result is the IEEE sum or the float next to it toward zero
/// (at most one unit in the last place), and an overflow stops at ±MAX.
#[test]
fn fadd_truncates() {
    let mut rng = Rng::new(4);
    let fl = floats(&mut rng, N);
    let two = pairs(&fl, 50, &mut rng, N);
    for op in [Opcode::Fadd, Opcode::Fsub] {
        for (x, _, g) in run(op, &two) {
            let (a, b) = (f(ftz(x[0])) as f64, f(ftz(x[1])) as f64);
            let exact = if op == Opcode::Fadd { a + b } else { a - b };
            let gf = f(g) as f64;
            if exact.is_nan() {
                assert!(gf.is_nan(), "{op} {x:x?}");
            } else if exact.is_infinite() {
                assert_eq!(gf, exact, "{op} {x:x?}");
            } else if exact.abs() >= f32::MAX as f64 {
                // ±MAX, or the float below when the f64 sum rounded a smaller operand away.
                let below = f32::from_bits(f32::MAX.to_bits() - 1) as f64;
                assert!(
                    gf.abs() == f32::MAX as f64 || gf.abs() == below,
                    "{op} {x:x?}"
                );
                assert_eq!(gf.signum(), exact.signum(), "{op} {x:x?}");
            } else {
                // Truncation: |g| ≤ |exact| and within one ulp of it.
                let rounded = exact as f32;
                if is_denormal(rounded.to_bits()) || exact.abs() < f32::MIN_POSITIVE as f64 {
                    assert!(
                        gf == 0.0 || gf.abs() >= f32::MIN_POSITIVE as f64,
                        "{op} {x:x?}"
                    );
                    continue;
                }
                assert!(gf.abs() <= exact.abs(), "{op} {x:x?}: {gf} {exact}");
                let ulp = f32::EPSILON as f64 * 2f64.powi(exact.abs().log2().floor() as i32);
                assert!(exact.abs() - gf.abs() <= ulp, "{op} {x:x?}: {gf} {exact}");
            }
        }
    }
}

/// `fddx`/`fddy` select to `qpu_fddx`/`qpu_fddy` (Mesa's ntq_fddx): in both lanes of each pair
/// (lanes `l ^ 1` for x, `l ^ 2` for y, within the 64 lanes of a run) the QPU's truncating
/// `fsub` of `v[odd] − v[even]`, the generic derivative up to that rounding (the rule of
/// `fadd_truncates`); the two axes differ.
#[test]
fn derivatives_are_the_pair_difference_truncated() {
    let mut rng = Rng::new(11);
    let rows = unary(&floats(&mut rng, N));
    let mut axes_differ = 0;
    let mut dx = Vec::new();
    for (op, bit) in [(Opcode::Fddx, 1usize), (Opcode::Fddy, 2)] {
        let res = run(op, &rows);
        let mut sel = Vec::new();
        for (i, (_, w, g)) in res.iter().enumerate() {
            let (lo, hi) = (res[i & !bit].0[0], res[i | bit].0[0]);
            let (a, b) = (f(ftz(hi)) as f64, f(ftz(lo)) as f64);
            let exact = a - b;
            let (gf, wf) = (f(*g), f(*w));
            // The same value in both lanes of the pair.
            assert_eq!(*g, res[i ^ bit].2, "{op} lane {i}");
            if exact.is_nan() {
                assert!(gf.is_nan() && wf.is_nan(), "{op} lane {i}");
            } else if exact.is_infinite() || exact.abs() >= f32::MAX as f64 {
                assert_eq!(gf.signum(), exact.signum() as f32, "{op} lane {i}");
            } else if exact.abs() < f32::MIN_POSITIVE as f64 {
                assert!(gf == 0.0 || gf.abs() >= f32::MIN_POSITIVE, "{op} lane {i}");
            } else {
                assert!(
                    (gf as f64).abs() <= exact.abs(),
                    "{op} lane {i}: {gf} {exact}"
                );
                let ulp = f32::EPSILON as f64 * 2f64.powi(exact.abs().log2().floor() as i32);
                assert!(exact.abs() - (gf as f64).abs() <= ulp, "{op} lane {i}");
                // Truncated or rounded to nearest: the same float or its neighbour toward 0.
                if !is_denormal(lo) && !is_denormal(hi) {
                    let (ga, wa) = (g & 0x7fff_ffff, w & 0x7fff_ffff);
                    assert!(
                        *g == *w || (g ^ w) >> 31 == 0 && wa == ga + 1,
                        "{op} lane {i}: {gf} {wf}"
                    );
                }
            }
            sel.push(*g);
        }
        if bit == 1 {
            dx = sel;
        } else {
            axes_differ = dx.iter().zip(&sel).filter(|(x, y)| x != y).count();
        }
    }
    assert!(axes_differ > N / 2, "{axes_differ}");
    let mut after = program(Opcode::Fddy, 1);
    select(&mut after).unwrap();
    let text = kiln_ir::print_function(&after);
    assert!(text.contains("qpu_fddy"), "{text}");
}

/// Maximum relative error of `op` over rows where `ok` holds, asserting it stays under `bound`.
fn measure(op: Opcode, rows: &[Vec<u32>], ok: impl Fn(&[u32], u32) -> bool, bound: f64) -> f64 {
    let mut worst = 0.0f64;
    let mut count = 0;
    for (x, w, g) in run(op, rows) {
        if !ok(&x, w) {
            continue;
        }
        count += 1;
        let e = if f(w).is_nan() {
            assert!(f(g).is_nan(), "{op} {x:x?}: want NaN, got {}", f(g));
            0.0
        } else if f(w).is_infinite() || f(w) == 0.0 {
            assert!(
                same_number(g, w),
                "{op} {x:x?}: want {}, got {}",
                f(w),
                f(g)
            );
            0.0
        } else {
            rel_err(g, w)
        };
        assert!(
            e <= bound,
            "{op} {x:x?}: want {}, got {}, error {e:e}",
            f(w),
            f(g)
        );
        worst = worst.max(e);
    }
    assert!(count > 100, "{op}: only {count} rows checked");
    eprintln!("{op}: {count} inputs, max relative error {worst:e}");
    worst
}

fn normal_result(w: u32) -> bool {
    !is_denormal(w) && (f(w) == 0.0 || f(w).abs() >= f32::MIN_POSITIVE * 4.0)
}

/// Reciprocal, division, reciprocal square root and square root: the SFU's estimate and one
/// Newton–Raphson step (Mesa's sequences) stay within the measured bounds of the IEEE result
/// on finite, normal inputs. Documented differences, asserted: rcp and rsq of ±0 and ±∞ are
/// NaN (the Newton step multiplies 0 by ∞), so is x/0 and x/∞; rsq and sqrt act on |x|.
#[test]
fn sfu_sequences_within_bounds() {
    let mut rng = Rng::new(5);
    let fl = floats(&mut rng, N);
    let finite = |x: u32| f(x).is_finite() && !is_denormal(x) && f(x) != 0.0;
    let rcp = measure(
        Opcode::Frcp,
        &unary(&fl),
        |x, w| finite(x[0]) && normal_result(w),
        2.0f64.powi(-22),
    );
    let two = pairs(&fl, 50, &mut rng, N);
    let div = measure(
        Opcode::Fdiv,
        &two,
        |x, w| {
            finite(x[1])
                && normal_result(w)
                && normal_result((1.0 / f(x[1])).to_bits())
                && !is_denormal(x[0])
        },
        2.0f64.powi(-21),
    );
    let pos = |x: u32| finite(x) && f(x) > 0.0;
    let rsq = measure(
        Opcode::Frsq,
        &unary(&fl),
        |x, w| pos(x[0]) && normal_result(w),
        2.0f64.powi(-21),
    );
    let sqrt = measure(
        Opcode::Fsqrt,
        &unary(&fl),
        |x, w| (pos(x[0]) || f(x[0]) == 0.0 || f(x[0]) == f32::INFINITY) && normal_result(w),
        2.0f64.powi(-21),
    );
    eprintln!("bounds: rcp {rcp:e} div {div:e} rsq {rsq:e} sqrt {sqrt:e}");
    // The documented special cases.
    let nan = |op: Opcode, x: &[f32]| {
        let rows = vec![x.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()];
        let (_, _, g) = run(op, &rows)[0].clone();
        f(g).is_nan()
    };
    assert!(nan(Opcode::Frcp, &[0.0]) && nan(Opcode::Frcp, &[f32::INFINITY]));
    assert!(nan(Opcode::Fdiv, &[1.0, 0.0]) && nan(Opcode::Frsq, &[0.0]));
    let (_, _, g) = run(Opcode::Fsqrt, &[vec![(-0.0f32).to_bits()]])[0].clone();
    assert_eq!(g, (-0.0f32).to_bits());
    // x < 0: the SFU reads |x|, the Newton step then doubles: rsq x = 2/√|x|, sqrt x = −2√|x|.
    let (_, _, g) = run(Opcode::Frsq, &[vec![(-4.0f32).to_bits()]])[0].clone();
    assert_eq!(f(g), 1.0);
    let (_, _, g) = run(Opcode::Fsqrt, &[vec![(-4.0f32).to_bits()]])[0].clone();
    assert_eq!(f(g), -4.0);
}

/// exp2 and log2 are the SFU functions: within an ulp of the host's on what the QPU reads
/// (log2 of |x|); pow = exp2(y·log2 x) within the measured bound for moderate results.
#[test]
fn exp_log_pow() {
    let mut rng = Rng::new(6);
    let fl = floats(&mut rng, N);
    measure(
        Opcode::Fexp2,
        &unary(&fl),
        |x, w| !is_denormal(x[0]) && normal_result(w),
        2.0f64.powi(-23),
    );
    measure(
        Opcode::Flog2,
        &unary(&fl),
        |x, w| !is_denormal(x[0]) && f(x[0]) >= 0.0 && normal_result(w),
        2.0f64.powi(-23),
    );
    let mut rows = Vec::new();
    for _ in 0..N {
        let x = rng.below(1_000_000) as f32 / 10_000.0;
        let y = (rng.below(1600) as f32 - 800.0) / 100.0;
        rows.push(vec![x.to_bits(), y.to_bits()]);
    }
    measure(
        Opcode::Fpow,
        &rows,
        |x, w| f(x[0]) > 0.0 && normal_result(w) && f(w).abs() < 1e30,
        2.0f64.powi(-16),
    );
}

/// trunc, floor, ceil, round and fract through ftoi/itof: the same numbers as IEEE (a zero may
/// lose its sign) for |x| < 2^31 on what the QPU reads, or on the input itself; fract within one ulp of 1 where x is a
/// tiny negative number (the truncating adder).
#[test]
fn rounding_ops() {
    let mut rng = Rng::new(7);
    let mut fl = floats(&mut rng, N);
    for k in -40..40 {
        fl.push((k as f32 * 0.25).to_bits());
        fl.push((k as f32 * 0.5 + 0.5).to_bits());
    }
    let in_range = |x: u32| f(ftz(x)).abs() < 2147483648.0;
    use Opcode::*;
    for op in [Ftrunc, Ffloor, Fceil, Fround] {
        let mut checked = 0;
        for (x, _, g) in run(op, &unary(&fl)) {
            if !in_range(x[0]) {
                continue;
            }
            let round = |y: f32| match op {
                Ftrunc => y.trunc(),
                Ffloor => y.floor(),
                Fceil => y.ceil(),
                _ => y.round_ties_even(),
            };
            // A denormal input may be taken as its zero or as itself (floor and ceil compare
            // the input with its truncation, which does not flush).
            let y = f(ftz(x[0]));
            assert!(
                same_number(g, round(y).to_bits()) || same_number(g, round(f(x[0])).to_bits()),
                "{op} {y}: got {}",
                f(g)
            );
            checked += 1;
        }
        eprintln!("{op}: {checked} inputs agree");
    }
    let mut worst = 0.0f64;
    for (x, _, g) in run(Ffract, &unary(&fl)) {
        if !in_range(x[0]) {
            continue;
        }
        let y = f(ftz(x[0])) as f64;
        let exact = y - y.floor();
        let e = (f(g) as f64 - exact).abs();
        assert!(e <= f32::EPSILON as f64, "ffract {y}: got {}", f(g));
        assert!(f(g) < 1.0 && f(g) >= 0.0, "ffract {y}: got {}", f(g));
        worst = worst.max(e);
    }
    eprintln!("ffract: max absolute error {worst:e}");
}

/// ffma is a multiply then a truncating add: within 2^-22 of |a·b| + |c|.
#[test]
fn ffma_is_mul_then_add() {
    let mut rng = Rng::new(8);
    let mut worst = 0.0f64;
    let mut rows = Vec::new();
    for _ in 0..N {
        let r = |rng: &mut Rng| ((rng.below(2_000_000) as f32 - 1_000_000.0) / 997.0).to_bits();
        rows.push(vec![r(&mut rng), r(&mut rng), r(&mut rng)]);
    }
    for (x, _, g) in run(Opcode::Ffma, &rows) {
        let (a, b, c) = (f(x[0]) as f64, f(x[1]) as f64, f(x[2]) as f64);
        let e = (f(g) as f64 - (a * b + c)).abs() / ((a * b).abs() + c.abs()).max(1e-30);
        worst = worst.max(e);
        assert!(e <= 2.0f64.powi(-22), "ffma {a} {b} {c}: {}", f(g));
    }
    eprintln!("ffma: max error {worst:e} of |ab|+|c|");
}

/// What the QPU lacks and kiln does not lower yet is refused, naming the feature, and the
/// function is left as it was.
#[test]
fn unsupported_features_are_named() {
    for (op, why) in [
        (Opcode::TextureFetch, "a texture result used whole"),
        (Opcode::TextureSample, "a texture result used whole"),
    ] {
        let before = program(op, 2);
        let mut after = before.clone();
        let e = select(&mut after).unwrap_err();
        assert_eq!(e.to_string(), format!("unsupported: {why}"));
        assert_eq!(after, before);
    }
}

/// A lowered op with the wrong number of operands (which the builder does not check) is
/// refused with a clear message rather than indexed out of bounds.
#[test]
fn malformed_instructions_are_refused() {
    for (op, n) in [(Opcode::Bfi, 2), (Opcode::Udiv, 1), (Opcode::Fatan2, 1)] {
        let before = program(op, n);
        let mut after = before.clone();
        let e = select(&mut after).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("unsupported: a malformed {op} ({n} operands, 1 definitions)")
        );
        assert_eq!(after, before);
    }
}

/// Integers that stress a reciprocal-based division: zero, ±1, the ends of the i32 and u32
/// ranges, powers of two and their neighbours, and divisors just below 2^32 (where the
/// fixed-point reciprocal estimate is 0).
fn division_specials() -> Vec<u32> {
    let mut v: Vec<u32> = vec![
        0,
        1,
        2,
        3,
        5,
        7,
        10,
        255,
        65535,
        65536,
        65537,
        0x00ff_ffff,
        0x0100_0000,
        0x0100_0001,
        0x7fff_fffe,
        0x7fff_ffff,
        0x8000_0000,
        0x8000_0001,
        0xffff_dfff,
        0xffff_e000,
        0xffff_e001,
        0xffff_fffe,
        0xffff_ffff,
        (-2i32) as u32,
        (-3i32) as u32,
        (-7i32) as u32,
        (-65536i32) as u32,
        123_456_789,
        1_000_000_007,
        (-1_000_000_007i32) as u32,
    ];
    for k in [4, 11, 16, 23, 24, 30, 31] {
        v.push((1u32 << k) - 1);
        v.push(1u32 << k);
        v.push((1u32 << k) + 1);
    }
    v
}

/// Rows for division: all pairs of the specials, then n = q·d + r with r ∈ {0, 1, d − 1}
/// (the boundaries where an estimate off by one shows), then random pairs of every size.
fn division_rows(rng: &mut Rng, n: usize) -> Vec<Vec<u32>> {
    let sp = division_specials();
    let mut rows = Vec::new();
    for &a in &sp {
        for &b in &sp {
            rows.push(vec![a, b]);
        }
    }
    let size = |rng: &mut Rng| {
        let bits = 1 + rng.below(32) as u32;
        (rng.next_u64() as u32) >> (32 - bits)
    };
    while rows.len() < n {
        let d = size(rng).max(1);
        let q = size(rng) / d.max(1);
        let q = if q == 0 {
            size(rng) % (u32::MAX / d).max(1)
        } else {
            q
        };
        let base = q.wrapping_mul(d);
        match rng.below(4) {
            0 => rows.push(vec![base, d]),
            1 => rows.push(vec![base.wrapping_add(d - 1), d]),
            2 => rows.push(vec![base.wrapping_add(1), d]),
            _ => rows.push(vec![size(rng), size(rng)]),
        }
    }
    rows
}

/// udiv, urem, idiv, irem are exact: bit for bit against kiln's semantics (x / 0 = x,
/// x % 0 = 0, i32::MIN / −1 = i32::MIN) on the specials, on quotient boundaries and on random
/// pairs.
#[test]
fn integer_division_is_exact() {
    let mut rng = Rng::new(9);
    let rows = division_rows(&mut rng, 12_288);
    use Opcode::*;
    for op in [Udiv, Urem, Idiv, Irem] {
        let mut count = 0;
        for (x, w, g) in run(op, &rows) {
            assert_eq!(w, g, "{op} {x:#x?}: want {w:#x}, got {g:#x}");
            count += 1;
        }
        eprintln!("{op}: {count} pairs agree");
    }
}

/// A constant divisor (a shift and a mask for powers of two, a fixed-point reciprocal computed
/// at compile time otherwise, the defined results for 0) and a constant factor of imul: bit for
/// bit on every special dividend, quotient boundaries and random ones.
#[test]
fn constant_divisors_and_factors_are_exact() {
    let mut rng = Rng::new(16);
    let mut divisors = division_specials();
    for _ in 0..40 {
        let bits = 1 + rng.below(32) as u32;
        divisors.push((rng.next_u64() as u32) >> (32 - bits));
    }
    use Opcode::*;
    for &d in &divisors {
        let mut rows: Vec<Vec<u32>> = division_specials().into_iter().map(|n| vec![n]).collect();
        while rows.len() < 512 {
            let n = rng.next_u64() as u32;
            let q = n.checked_div(d).unwrap_or(n);
            rows.push(vec![n]);
            rows.push(vec![q.wrapping_mul(d)]);
            rows.push(vec![q.wrapping_mul(d).wrapping_sub(1)]);
        }
        for op in [Udiv, Urem, Idiv, Irem, Imul] {
            for (x, w, g) in run_program(op, program_const(op, d), &rows, Sfu::Exact) {
                assert_eq!(w, g, "{op} {:#x}, {d:#x}: want {w:#x}, got {g:#x}", x[0]);
            }
        }
    }
}

/// The reference the division tests compare against is kiln's semantics, whose edge cases
/// are the documented ones (so an agreement above is an agreement with them).
#[test]
fn division_edge_cases_are_the_documented_ones() {
    use Opcode::*;
    let one = |op: Opcode, a: u32, b: u32| run(op, &[vec![a, b]])[0].2;
    assert_eq!(one(Idiv, 7, 0), 7);
    assert_eq!(one(Udiv, 0xffff_fff0, 0), 0xffff_fff0);
    assert_eq!(one(Irem, (-7i32) as u32, 0), 0);
    assert_eq!(one(Urem, 9, 0), 0);
    assert_eq!(one(Idiv, 0x8000_0000, u32::MAX), 0x8000_0000);
    assert_eq!(one(Irem, 0x8000_0000, u32::MAX), 0);
    assert_eq!(one(Idiv, (-7i32) as u32, 2), (-3i32) as u32);
    assert_eq!(one(Irem, (-7i32) as u32, 2), (-1i32) as u32);
    assert_eq!(one(Irem, 7, (-2i32) as u32), 1);
    assert_eq!(one(Udiv, u32::MAX, 1), u32::MAX);
    assert_eq!(one(Udiv, u32::MAX, 0xffff_e001), 1);
    assert_eq!(one(Urem, 0xffff_e000, 0xffff_e001), 0xffff_e000);
}

/// Bit counting, reversal and bitfields agree bit for bit, including offsets and counts of
/// 0, 31, 32 and beyond, and counts that are negative as signed values.
#[test]
fn bit_ops_agree_bit_for_bit() {
    let mut rng = Rng::new(10);
    let v = ints(&mut rng, N);
    use Opcode::*;
    for op in [Ibitcount, Ibitreverse] {
        for (x, w, g) in run(op, &unary(&v)) {
            assert_eq!(w, g, "{op} {x:x?}: want {w:#x}, got {g:#x}");
        }
    }
    let fields: Vec<u32> = (0..34)
        .chain([63, 64, 100, 0x7fff_ffff, 0x8000_0000, 0xffff_ffe0, u32::MAX])
        .collect();
    let values = [
        0u32,
        u32::MAX,
        0x8000_0000,
        0x7fff_ffff,
        0xabcd_1234,
        0x0000_8001,
    ];
    let mut rows = Vec::new();
    for &x in &values {
        for &o in &fields {
            for &c in &fields {
                rows.push(vec![x, o, c]);
            }
        }
    }
    while rows.len() < 20_000 {
        let x = rng.next_u64() as u32;
        let o = fields[rng.below(fields.len())];
        let c = fields[rng.below(fields.len())];
        rows.push(vec![x, o, c]);
    }
    for op in [Ubfe, Ibfe] {
        for (x, w, g) in run(op, &rows) {
            assert_eq!(w, g, "{op} {x:#x?}: want {w:#x}, got {g:#x}");
        }
    }
    let bfi: Vec<Vec<u32>> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            vec![
                values[i % values.len()] ^ r[0].rotate_left(7),
                r[0],
                r[1],
                r[2],
            ]
        })
        .collect();
    for (x, w, g) in run(Bfi, &bfi) {
        assert_eq!(w, g, "bfi {x:#x?}: want {w:#x}, got {g:#x}");
    }
}

/// Largest absolute error of `op` against the generic result over `rows` whose inputs are not
/// denormal (the QPU reads those as zeros), asserting |got − want| ≤ bound(inputs) on each
/// row, NaN exactly where the generic op gives NaN, and (`unit`) results within [−1, 1].
fn abs_error(op: Opcode, rows: &[Vec<u32>], bound: impl Fn(&[f64]) -> f64, unit: bool) -> f64 {
    abs_error_with(op, rows, bound, unit, Sfu::Exact)
}

fn abs_error_with(
    op: Opcode,
    rows: &[Vec<u32>],
    bound: impl Fn(&[f64]) -> f64,
    unit: bool,
    sfu: Sfu,
) -> f64 {
    let mut worst = 0.0f64;
    for (x, w, g) in run_with(op, rows, sfu) {
        if x.iter().any(|&a| is_denormal(a)) {
            continue;
        }
        let args: Vec<f64> = x.iter().map(|&a| f(a) as f64).collect();
        if f(w).is_nan() {
            assert!(f(g).is_nan(), "{op} {args:?}: want NaN, got {}", f(g));
            continue;
        }
        let e = (f(g) as f64 - f(w) as f64).abs();
        assert!(
            e <= bound(&args),
            "{op} {args:?}: want {}, got {}, error {e:e}",
            f(w),
            f(g)
        );
        if unit {
            assert!(f(g).abs() <= 1.0, "{op} {args:?}: {}", f(g));
        }
        worst = worst.max(e);
    }
    eprintln!(
        "{op} ({sfu:?} SFU): {} inputs, max absolute error {worst:e}",
        rows.len()
    );
    worst
}

/// Measured worst absolute errors (simulator's SFU) with a margin; the tests below assert
/// them, and `bounds_are_tight` shows a wrong coefficient would break them.
const SIN_BOUND: f64 = 1.5e-6;
/// Per unit of |x|: x/2π is rounded twice (the constant, the product), up to 2^-23 relative,
/// which is |x|·2^-23 in the angle; cos adds its quarter turn with one more truncation.
const SIN_SLOPE: f64 = 2.5e-7;
const ATAN_BOUND: f64 = 4.0e-6;
const ASIN_BOUND: f64 = 4.0e-4;
const ACOS_BOUND: f64 = 2.0e-4;

fn trig_inputs(rng: &mut Rng) -> Vec<u32> {
    let mut v = special_floats();
    for k in -64..=64 {
        v.push((k as f32 * std::f32::consts::FRAC_PI_4).to_bits());
        v.push((k as f32 * 0.125).to_bits());
    }
    while v.len() < N {
        v.push(match rng.below(3) {
            0 => ((rng.below(2_000_001) as f32 - 1_000_000.0) / 100_000.0).to_bits(),
            1 => ((rng.below(2_000_001) as f32 - 1_000_000.0) / 10.0).to_bits(),
            _ => {
                let e = 90 + rng.below(60) as u32;
                (rng.next_u64() as u32 & 0x807f_ffff) | (e << 23)
            }
        });
    }
    v
}

/// sin and cos: |error| ≤ 1.5·10⁻⁶ + 2.5·10⁻⁷·|x| for |x| ≤ 2^24 (beyond, x/2π has no fraction
/// left and the result is that of a whole number of turns), always in [−1, 1], NaN for ±∞
/// and NaN.
#[test]
fn sin_cos_within_bounds() {
    let mut rng = Rng::new(11);
    let v = trig_inputs(&mut rng);
    let part = |keep: &dyn Fn(f32) -> bool| -> Vec<Vec<u32>> {
        v.iter()
            .filter(|&&x| keep(f(x)))
            .map(|&x| vec![x])
            .collect()
    };
    let small = part(&|x| x.abs() <= 8.0);
    let moderate = part(&|x| x.abs() <= 16_777_216.0);
    let huge = part(&|x| x.abs() > 16_777_216.0 || x.is_nan());
    for op in [Opcode::Fsin, Opcode::Fcos] {
        let bound = |x: &[f64]| SIN_BOUND + SIN_SLOPE * x[0].abs();
        abs_error(op, &small, bound, true);
        abs_error(op, &moderate, bound, true);
        abs_error(op, &huge, |_| 2.0, true);
        for x in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
            let g = run(op, &[vec![x.to_bits()]])[0].2;
            assert!(f(g).is_nan(), "{op} {x}: {}", f(g));
        }
    }
}

/// atan and atan2 within 4·10⁻⁶ (NIR's polynomial is good to 3.3·10⁻⁶), and atan2's IEEE
/// special cases exactly: signed zeros, ±π, infinities.
#[test]
fn atan_atan2_within_bounds() {
    let mut rng = Rng::new(12);
    let v = trig_inputs(&mut rng);
    abs_error(Opcode::Fatan, &unary(&v), |_| ATAN_BOUND, false);
    let mut fl = floats(&mut rng, 64);
    fl.extend(trig_inputs(&mut rng).into_iter().take(200));
    let rows = pairs(&fl, 60, &mut rng, 2 * N);
    abs_error(Opcode::Fatan2, &rows, |_| ATAN_BOUND, false);
    let pi = std::f32::consts::PI;
    let inf = f32::INFINITY;
    for (y, x, want) in [
        (0.0f32, 1.0f32, 0.0f32),
        (-0.0, 1.0, -0.0),
        (0.0, 0.0, 0.0),
        (-0.0, 0.0, -0.0),
        (0.0, -0.0, pi),
        (-0.0, -0.0, -pi),
        (0.0, -1.0, pi),
        (-0.0, -1.0, -pi),
        (1.0, 0.0, pi / 2.0),
        (-1.0, -0.0, -pi / 2.0),
        (inf, inf, pi / 4.0),
        (-inf, -inf, -3.0 * pi / 4.0),
        (1.0, -inf, pi),
        (1.0, inf, 0.0),
        (inf, 1.0, pi / 2.0),
        (1e38, 1e38, pi / 4.0),
        (3e38, 1e-30, pi / 2.0),
    ] {
        let g = run(Opcode::Fatan2, &[vec![y.to_bits(), x.to_bits()]])[0].2;
        assert!(
            g == want.to_bits() || (f(g) as f64 - want as f64).abs() <= ATAN_BOUND,
            "atan2({y}, {x}) = {}, want {want}",
            f(g)
        );
        assert_eq!(
            f(g).is_sign_negative(),
            want.is_sign_negative(),
            "atan2({y}, {x})"
        );
    }
}

/// asin and acos: within NIR's approximation error (asin 4·10⁻⁴, acos 2·10⁻⁴ absolute), asin
/// within 10⁻⁶ relative below 1/2 (the rational branch), NaN outside [−1, 1].
#[test]
fn asin_acos_within_bounds() {
    let mut rng = Rng::new(13);
    let mut v: Vec<u32> = [
        0.0f32, -0.0, 1.0, -1.0, 0.5, -0.5, 0.49999997, 1e-20, -1e-30,
    ]
    .iter()
    .map(|x| x.to_bits())
    .collect();
    while v.len() < N {
        let x = (rng.below(2_000_001) as f32 - 1_000_000.0) / 1_000_000.0;
        v.push(x.to_bits());
    }
    abs_error(Opcode::Fasin, &unary(&v), |_| ASIN_BOUND, false);
    abs_error(Opcode::Facos, &unary(&v), |_| ACOS_BOUND, false);
    let small: Vec<u32> = v.iter().copied().filter(|&x| f(x).abs() < 0.5).collect();
    let mut worst = 0.0f64;
    for (x, w, g) in run(Opcode::Fasin, &unary(&small)) {
        let e = rel_err(g, w);
        assert!(e <= 1e-6, "asin {}: {} vs {}", f(x[0]), f(g), f(w));
        worst = worst.max(e);
    }
    eprintln!("asin below 1/2: max relative error {worst:e}");
    for x in [1.0000001f32, -1.5, 2.0, f32::INFINITY, f32::NAN] {
        for op in [Opcode::Fasin, Opcode::Facos] {
            let g = run(op, &[vec![x.to_bits()]])[0].2;
            assert!(f(g).is_nan(), "{op} {x}: {}", f(g));
        }
    }
}

/// The bounds above are tight enough to catch a wrong coefficient: the same polynomials,
/// evaluated exactly on the hosts with one coefficient off by 1 %, miss them on ordinary
/// inputs.
#[test]
fn bounds_are_tight() {
    use kiln_vc4::isel::{ACOS_P, ASIN_P, ATAN_COEFFICIENTS, SIN_COEFFICIENTS};
    let grid = |lo: f64, hi: f64| (0..=1000).map(move |k| lo + (hi - lo) * k as f64 / 1000.0);
    let poly = |c: &[f64], z: f64| c.iter().rev().fold(0.0, |p, &c| p * z + c);
    // sin 2πf = f·S(f²) on [−1/4, 1/4], with S's x⁷ coefficient off by 1 %.
    let mut s: Vec<f64> = SIN_COEFFICIENTS.iter().map(|&c| c as f64).collect();
    let exact = grid(-0.25, 0.25)
        .map(|t| (t * poly(&s, t * t) - (std::f64::consts::TAU * t).sin()).abs())
        .fold(0.0, f64::max);
    assert!(exact < SIN_BOUND / 2.0, "sin polynomial: {exact:e}");
    s[3] *= 1.01;
    let wrong = grid(-0.25, 0.25)
        .map(|t| (t * poly(&s, t * t) - (std::f64::consts::TAU * t).sin()).abs())
        .fold(0.0, f64::max);
    assert!(
        wrong > SIN_BOUND,
        "a wrong sin coefficient goes unnoticed: {wrong:e}"
    );
    // atan u = u·A(u²) on [0, 1], with the u⁹ coefficient off by 1 %.
    let mut a: Vec<f64> = ATAN_COEFFICIENTS.iter().map(|&c| c as f64).collect();
    a[4] *= 1.01;
    let wrong = grid(0.0, 1.0)
        .map(|u| (u * poly(&a, u * u) - u.atan()).abs())
        .fold(0.0, f64::max);
    assert!(
        wrong > ATAN_BOUND,
        "a wrong atan coefficient goes unnoticed: {wrong:e}"
    );
    // asin/acos tails with p1 off by 10 %.
    let tail = |p: [f32; 2], x: f64| {
        let q = poly(
            &[
                std::f64::consts::FRAC_PI_2,
                std::f64::consts::FRAC_PI_4 - 1.0,
                p[0] as f64,
                p[1] as f64 * 1.1,
            ],
            x,
        );
        (1.0 - x).sqrt() * q
    };
    let wrong = grid(0.5, 1.0)
        .map(|x| (std::f64::consts::FRAC_PI_2 - tail(ASIN_P, x) - x.asin()).abs())
        .fold(0.0, f64::max);
    assert!(
        wrong > ASIN_BOUND,
        "a wrong asin coefficient goes unnoticed: {wrong:e}"
    );
    let wrong = grid(0.0, 1.0)
        .map(|x| (tail(ACOS_P, x) - x.acos()).abs())
        .fold(0.0, f64::max);
    assert!(
        wrong > ACOS_BOUND,
        "a wrong acos coefficient goes unnoticed: {wrong:e}"
    );
}

/// With the SFU's reciprocal estimates cut to the hardware's 13 good bits (below or above the
/// true value), division stays exact — the Newton–Raphson step and the fixed-point margin
/// absorb it — and the inverse trigonometry stays within its bounds.
#[test]
fn hardware_like_sfu_estimates() {
    let mut rng = Rng::new(14);
    let rows = division_rows(&mut rng, 4096);
    let v = trig_inputs(&mut rng);
    let unit: Vec<u32> = (0..N)
        .map(|_| ((rng.below(2_000_001) as f32 - 1_000_000.0) / 1_000_000.0).to_bits())
        .collect();
    let mut fl = floats(&mut rng, 64);
    fl.extend(v.iter().copied().take(200));
    let two = pairs(&fl, 60, &mut rng, N);
    // The coarsening is live: one Newton–Raphson step leaves visible differences in frcp.
    let fl_rows = unary(&fl);
    let exact = run(Opcode::Frcp, &fl_rows);
    for sfu in [Sfu::Low, Sfu::High] {
        let changed = run_with(Opcode::Frcp, &fl_rows, sfu)
            .iter()
            .zip(&exact)
            .filter(|(a, b)| a.2 != b.2)
            .count();
        assert!(
            changed > 10,
            "{sfu:?}: the SFU is not coarsened ({changed})"
        );
    }
    for sfu in [Sfu::Low, Sfu::High] {
        for op in [Opcode::Udiv, Opcode::Urem, Opcode::Idiv, Opcode::Irem] {
            for (x, w, g) in run_with(op, &rows, sfu) {
                assert_eq!(w, g, "{op} ({sfu:?} SFU) {x:#x?}: want {w:#x}, got {g:#x}");
            }
        }
        abs_error_with(Opcode::Fatan, &unary(&v), |_| ATAN_BOUND, false, sfu);
        abs_error_with(Opcode::Fatan2, &two, |_| ATAN_BOUND, false, sfu);
        abs_error_with(Opcode::Fasin, &unary(&unit), |_| ASIN_BOUND, false, sfu);
        abs_error_with(Opcode::Facos, &unary(&unit), |_| ACOS_BOUND, false, sfu);
    }
}

/// A longer run of the division check: a million pairs per op, exact. In release:
/// `cargo test --release -p kiln-vc4 --test isel -- --ignored`.
#[test]
#[ignore]
fn integer_division_many_pairs() {
    let mut rng = Rng::new(15);
    let rows = division_rows(&mut rng, 1 << 20);
    for op in [Opcode::Udiv, Opcode::Urem, Opcode::Idiv, Opcode::Irem] {
        for sfu in [Sfu::Exact, Sfu::Low, Sfu::High] {
            for (x, w, g) in run_with(op, &rows, sfu) {
                assert_eq!(w, g, "{op} ({sfu:?} SFU) {x:#x?}: want {w:#x}, got {g:#x}");
            }
        }
    }
}

/// Random structured programs (branches, loops, phis, uniform and per-lane values, and — in
/// some — vectors, texture samples and fixed registers): selection either refuses, leaving the
/// function as it was, or gives a function that verifies and runs wherever the generic one
/// runs; where the program computes with integers only, its outputs agree bit for bit. (Float
/// programs differ where the QPU's rules do — the op tests above bound each difference.)
#[test]
fn generated_programs_select_or_are_refused() {
    use kiln_ir::generate::{GenConfig, generate};
    let (mut selected, mut ran, mut exact) = (0, 0, 0);
    for seed in 0..600 {
        let mut cfg = GenConfig::new(seed);
        cfg.vectors = seed % 3 == 0;
        cfg.constraints = seed % 5 == 0;
        let before = generate(&cfg);
        let mut after = before.clone();
        match select(&mut after) {
            Err(e) => {
                assert!(
                    e.to_string().starts_with("unsupported: "),
                    "seed {seed}: {e}"
                );
                assert_eq!(after, before, "seed {seed}: changed although refused");
            }
            Ok(()) => {
                selected += 1;
                if let Err(e) = kiln_ir::verify(&after) {
                    panic!("seed {seed}: {}\n{}", e[0], kiln_ir::print_function(&after));
                }
                let env = Env::with_ordinary_values(&before, 16);
                let mut env_after = env.clone();
                env_after.step_limit = env.step_limit.saturating_mul(20);
                let Ok(w) = kiln_interp::run_ssa(&before, &env) else {
                    continue;
                };
                let g = kiln_interp::run_ssa(&after, &env_after)
                    .unwrap_or_else(|e| panic!("seed {seed}: the selected program fails: {e}"));
                ran += 1;
                let floats = kiln_vc4::isel::opcode_counts(&before)
                    .keys()
                    .any(|name| name.starts_with('f') || name.ends_with("2f"));
                if !floats {
                    assert_eq!(w.slots, g.slots, "seed {seed}: integer outputs differ");
                    exact += 1;
                }
            }
        }
    }
    eprintln!("generated: 600 programs, {selected} selected, {ran} ran, {exact} integer-only");
    assert!(
        selected > 200 && ran > 200,
        "{selected} selected, {ran} ran"
    );
}

/// `u2f` of a value whose bit 31 is known clear (a mask, a shift right, a small remainder…)
/// is a single `itof`; otherwise the full sequence. Bit for bit either way.
#[test]
fn u2f_of_known_nonnegative_values() {
    use Opcode::*;
    let mut rng = Rng::new(17);
    let v = ints(&mut rng, 2048);
    let rows = pairs(&v, 19, &mut rng, 2048);
    // (ops applied in turn to input 0 (and input 1), constants, expect a single itof).
    type Case = (&'static [(Opcode, Option<u32>)], bool);
    let cases: [Case; 14] = [
        (&[(Ibitcount, None)], true),
        (&[(Ushr, Some(4)), (Ior, Some(0x1234))], true),
        (&[(Umin, Some(5))], true),
        (&[(Iand, Some(0x7fff_ffff))], true),
        (&[(Iand, Some(0x8000_0001))], false),
        (&[(Ushr, Some(1))], true),
        (&[(Ushr, Some(32))], false),
        (&[(Ushr, Some(33))], true),
        (&[(Urem, Some(0x8000_0000))], true),
        (&[(Urem, Some(0x8000_0001))], false),
        (&[(Udiv, Some(2))], true),
        (&[(Udiv, Some(1))], false),
        (&[(Ibitcount, None), (Ior, None)], false),
        (&[(Ushr, Some(4)), (Imin, None)], false),
    ];
    for (steps, single) in cases {
        let target = GenericTarget::arc(64, 16);
        let v1 = target.class(FileId(0), 1);
        let mut func = Function::new("t", target);
        let mut b = Builder::new(&mut func);
        let x = b.inst(Opcode::Input, &[0], &[v1], [])[0];
        let y = b.inst(Opcode::Input, &[1], &[v1], [])[0];
        let mut t = x;
        for &(op, c) in steps {
            let second = c.map_or(Operand::temp(y), Operand::constant);
            t = if op.info().operands.accepts(1) {
                b.op(op, v1, [Operand::temp(t)])
            } else {
                b.op(op, v1, [Operand::temp(t), second])
            };
        }
        let r = b.op(U2f, v1, [Operand::temp(t)]);
        b.inst(Opcode::Output, &[0], &[], [Operand::temp(r)]);
        b.ret();
        for (x, w, g) in run_program(U2f, func.clone(), &rows, Sfu::Exact) {
            assert_eq!(w, g, "u2f after {steps:?} of {x:#x?}");
        }
        let mut selected = func;
        select(&mut selected).unwrap();
        let itofs = kiln_vc4::isel::opcode_counts(&selected)
            .get("qpu_itof")
            .copied()
            .unwrap_or(0);
        assert_eq!(itofs == 1, single, "{steps:?}: {itofs} itof");
    }
}
