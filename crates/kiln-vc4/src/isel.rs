//! Instruction selection for the QPU: rewrites a function of generic ops (after the middle end)
//! into vc4 target opcodes (`crate::ops`) and retargets it to `vc4(threads=1)`, lowering what the
//! QPU lacks the way Mesa's vc4 compiler and NIR do; the submodules lower integer division
//! (`divide`), bit operations (`bits`) and trigonometry (`trig`). The design is in `docs/vc4.md`
//! ("Target opcodes and instruction selection").

mod bits;
mod divide;
mod trig;

pub use trig::{ACOS_P, ASIN_P, ASIN_SMALL, ATAN_COEFFICIENTS, SIN_COEFFICIENTS};

use crate::ops::Op;
use crate::target::Vc4Target;
use kiln_ir::{Function, Inst, InstFlags, Lanes, Opcode, Operand, OperandFlags, RegClass, Value};
use std::collections::BTreeSet;
use std::fmt;

/// What selection refuses: the features the function needs that the QPU (or kiln's vc4 back
/// end so far) cannot do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub Vec<String>);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unsupported: {}", self.0.join(", "))
    }
}

impl std::error::Error for Unsupported {}

const SIGN: u32 = 0x8000_0000;

fn fc(x: f32) -> Operand {
    Operand::constant(x.to_bits())
}

fn ic(x: i32) -> Operand {
    Operand::constant(x as u32)
}

/// A constant shift count as a small immediate where one encodes it: the QPU shifts by the low
/// five bits, so 16–31 is the same count as −16…−1, which the small immediates have — no
/// uniform-stream word.
fn shift_count(c: u32) -> Operand {
    let k = c & 31;
    Operand::constant(if k >= 16 { k | 0xffff_ffe0 } else { k })
}

/// Why `inst` cannot be selected, if it cannot.
fn refusal(func: &Function, inst: &Inst, texture_results: &[bool]) -> Option<String> {
    use Opcode::*;
    let vector = inst
        .defs
        .iter()
        .map(|d| func.class(d.temp))
        .chain(inst.operands.iter().filter_map(|o| match o.value {
            Value::Temp(t) => Some(func.class(t)),
            Value::Undef(c) => Some(c),
            Value::Const(_) => None,
        }))
        .any(|c| c.size != 1);
    Some(match inst.op {
        // Refused or selected by `crate::texture`.
        TextureSample | TextureFetch => return None,
        SplitVector
            if inst.operands[0]
                .temp_id()
                .is_some_and(|t| texture_results[t.index()]) =>
        {
            return None;
        }
        Target(t) => format!("another target's opcode ({})", t.info().info.name),
        op if !op.info().operands.accepts(inst.operands.len())
            || !op.info().defs.accepts(inst.defs.len()) =>
        {
            format!(
                "a malformed {op} ({} operands, {} definitions)",
                inst.operands.len(),
                inst.defs.len()
            )
        }
        _ if vector => format!("vector values ({})", inst.op),
        _ if inst.defs.iter().any(|d| d.fixed.is_some())
            || inst.operands.iter().any(|o| o.fixed.is_some()) =>
        {
            "fixed registers".into()
        }
        _ => return None,
    })
}

/// Emits the instructions of one lowering.
struct Emitter<'a> {
    func: &'a mut Function,
    q1: RegClass,
    flags: InstFlags,
    out: Vec<Inst>,
    /// Per temp: bit 31 is known to be clear ([`sign_bit_clear`]).
    nonneg: &'a [bool],
    /// Per temp: a comparison's result (0 or −1).
    comparisons: &'a [bool],
}

/// Per temp of a generic function: whether its value's bit 31 is known to be clear on every
/// lane, from the op defining it (a mask without bit 31, a logical shift right, a remainder by
/// a small constant, a bit count…) and what is known of its operands. One pass in layout
/// order, where definitions come before their uses except through phis, which count as
/// unknown.
fn sign_bit_clear(func: &Function) -> Vec<bool> {
    use Opcode::*;
    let mut known = vec![false; func.temps.len()];
    let small = |c: u32| c < SIGN;
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        let [def] = inst.defs.as_slice() else {
            continue;
        };
        let k = |i: usize| match inst.operands.get(i).map(|o| o.value) {
            Some(Value::Temp(t)) => known.get(t.index()).copied().unwrap_or(false),
            Some(Value::Const(c)) => small(c),
            _ => false,
        };
        let c = |i: usize| match inst.operands.get(i).map(|o| o.value) {
            Some(Value::Const(c)) => Some(c),
            _ => None,
        };
        let clear = match inst.op {
            Mov => k(0),
            Iand | Umin => k(0) || k(1),
            Ior | Ixor | Umax | Imax | Imin => k(0) && k(1),
            Ushr => c(1).is_some_and(|s| s & 31 != 0),
            Udiv => k(0) || c(1).is_some_and(|d| d >= 2),
            Urem => k(0) || c(1).is_some_and(|d| d <= SIGN),
            Ibitcount | Iclz | Ictz => true,
            _ => false,
        };
        if let Some(slot) = known.get_mut(def.temp.index()) {
            *slot = clear;
        }
    }
    known
}

impl Emitter<'_> {
    fn push(&mut self, op: Opcode, args: &[Operand]) -> Operand {
        let t = self.func.new_temp(self.q1);
        let mut inst = Inst::new(op);
        inst.flags = self.flags;
        inst.defs.push(kiln_ir::Def::new(t));
        // Kill flags belong to the instruction replaced; liveness writes new ones.
        inst.operands.extend(args.iter().map(|o| Operand {
            flags: OperandFlags::empty(),
            ..*o
        }));
        self.out.push(inst);
        Operand::temp(t)
    }

    fn q(&mut self, op: Op, args: &[Operand]) -> Operand {
        if matches!(op, Op::Shl | Op::Shr | Op::Asr | Op::Ror)
            && let [x, count] = args
            && let Value::Const(c) = count.value
        {
            return self.push(op.opcode(), &[*x, shift_count(c)]);
        }
        self.push(op.opcode(), args)
    }

    fn g(&mut self, op: Opcode, args: &[Operand]) -> Operand {
        self.push(op, args)
    }

    /// Mesa's `ntq_rcp`: the SFU reciprocal and one Newton–Raphson step, r·(2 − x·r).
    fn rcp(&mut self, x: Operand) -> Operand {
        let r = self.q(Op::Recip, &[x]);
        let xr = self.q(Op::Fmul, &[x, r]);
        let e = self.q(Op::Fsub, &[fc(2.0), xr]);
        self.q(Op::Fmul, &[r, e])
    }

    /// Mesa's `ntq_rsq`: the SFU reciprocal square root and one Newton–Raphson step,
    /// r·(1.5 − 0.5·x·r²), with x·r·r multiplied as (x·r)·r: Mesa's x·(r·r) flushes r² to 0
    /// for x > 2^126 (and overflows it for x < 2^-128), leaving 1.5·r.
    fn rsq(&mut self, x: Operand) -> Operand {
        let r = self.q(Op::Recipsqrt, &[x]);
        let xr = self.q(Op::Fmul, &[x, r]);
        let xrr = self.q(Op::Fmul, &[xr, r]);
        let h = self.q(Op::Fmul, &[fc(0.5), xrr]);
        let e = self.q(Op::Fsub, &[fc(1.5), h]);
        self.q(Op::Fmul, &[r, e])
    }

    /// Mesa's `ntq_umul`: the low 32 bits of a·b from three 24-bit multiplies.
    /// Constant pieces are folded, and a constant's zero high piece drops its product.
    fn umul(&mut self, a: Operand, b: Operand) -> Operand {
        let (a, b) = match a.value {
            Value::Const(_) => (b, a),
            _ => (a, b),
        };
        let a_hi = self.q(Op::Shr, &[a, ic(24)]);
        let hilo = self.q(Op::Mul24, &[a_hi, b]);
        let lolo = self.q(Op::Mul24, &[a, b]);
        let mid = match b.value {
            Value::Const(c) if c >> 24 == 0 => hilo,
            Value::Const(c) => {
                let lohi = self.q(Op::Mul24, &[a, Operand::constant(c >> 24)]);
                self.q(Op::Add, &[hilo, lohi])
            }
            _ => {
                let b_hi = self.q(Op::Shr, &[b, ic(24)]);
                let lohi = self.q(Op::Mul24, &[a, b_hi]);
                self.q(Op::Add, &[hilo, lohi])
            }
        };
        let mid = self.q(Op::Shl, &[mid, ic(24)]);
        self.q(Op::Add, &[lolo, mid])
    }

    /// √x as `x · rsq(x)`, and x itself where that is NaN (x = 0, ∞ or NaN), so that
    /// sqrt(±0) = ±0 and sqrt(∞) = ∞. (NIR's lower_fsqrt takes rcp(rsq(x)), which is NaN at 0
    /// after the Newton–Raphson steps.)
    fn sqrt(&mut self, x: Operand) -> Operand {
        let r = self.rsq(x);
        let y = self.q(Op::Fmul, &[x, r]);
        let nan = self.g(Opcode::Fne, &[y, y]);
        self.g(Opcode::Sel, &[nan, x, y])
    }

    /// `itof(ftoi(x))`: x truncated toward zero (for |x| < 2^31; 0 outside and for NaN).
    fn trunc(&mut self, x: Operand) -> Operand {
        let i = self.q(Op::Ftoi, &[x]);
        self.q(Op::Itof, &[i])
    }

    /// Lowers one instruction; `None` when it stays as it is.
    fn lower(&mut self, inst: &Inst) -> Option<Operand> {
        use Opcode::*;
        let a = |k: usize| inst.operands[k];
        // Logic with a comparison is a select on its flags (`x | c` is `c ? −1 : x`, `x & c`
        // is `c ? x : 0` for c 0 or −1), as Mesa's `ntq_emit_bcsel` reads a comparison's
        // flags: `or`/`and` would need the comparison in a register first.
        if matches!(inst.op, Ior | Iand) {
            let comparison = |k: usize| {
                a(k).temp_id()
                    .is_some_and(|t| self.comparisons.get(t.index()) == Some(&true))
            };
            if let Some(k) = (0..2).rev().find(|&k| comparison(k)) {
                let (c, x) = (a(k), a(1 - k));
                return Some(if inst.op == Ior {
                    self.g(Sel, &[c, ic(-1), x])
                } else {
                    self.g(Sel, &[c, x, ic(0)])
                });
            }
        }
        let direct = |op: Opcode| -> Option<Op> {
            Some(match op {
                Iadd => Op::Add,
                Isub => Op::Sub,
                Iand => Op::And,
                Ior => Op::Or,
                Ixor => Op::Xor,
                Inot => Op::Not,
                Ishl => Op::Shl,
                Ushr => Op::Shr,
                Ishr => Op::Asr,
                Imin => Op::Min,
                Imax => Op::Max,
                Iclz => Op::Clz,
                Fadd => Op::Fadd,
                Fsub => Op::Fsub,
                Fmul => Op::Fmul,
                Fmin => Op::Fmin,
                Fmax => Op::Fmax,
                Fexp2 => Op::Exp2,
                Flog2 => Op::Log2,
                I2f => Op::Itof,
                F2i => Op::Ftoi,
                _ => return None,
            })
        };
        if let Some(op) = direct(inst.op) {
            let args: Vec<Operand> = inst.operands.iter().copied().collect();
            return Some(self.q(op, &args));
        }
        Some(match inst.op {
            Ineg => self.q(Op::Sub, &[ic(0), a(0)]),
            // Mesa: max(x, 0 - x).
            Iabs => {
                let n = self.q(Op::Sub, &[ic(0), a(0)]);
                self.q(Op::Max, &[a(0), n])
            }
            // Unsigned order is signed order with the sign bits flipped.
            Umin | Umax => {
                let x = self.q(Op::Xor, &[a(0), Operand::constant(SIGN)]);
                let y = self.q(Op::Xor, &[a(1), Operand::constant(SIGN)]);
                let m = self.q(if inst.op == Umin { Op::Min } else { Op::Max }, &[x, y]);
                self.q(Op::Xor, &[m, Operand::constant(SIGN)])
            }
            Imul => self.umul(a(0), a(1)),
            // ctz x = 32 − clz(~x & (x − 1)) (32 for 0).
            Ictz => {
                let n = self.q(Op::Not, &[a(0)]);
                let m = self.q(Op::Sub, &[a(0), ic(1)]);
                let low = self.q(Op::And, &[n, m]);
                let z = self.q(Op::Clz, &[low]);
                self.q(Op::Sub, &[ic(32), z])
            }
            // NIR's lower_ffma: a separate multiply and add.
            Ffma => {
                let p = self.q(Op::Fmul, &[a(0), a(1)]);
                self.q(Op::Fadd, &[p, a(2)])
            }
            // The sign bit, exactly (Mesa subtracts from 0, which loses −0).
            Fneg => self.q(Op::Xor, &[a(0), Operand::constant(SIGN)]),
            // Mesa: fmaxabs(x, x).
            Fabs => self.q(Op::Fmaxabs, &[a(0), a(0)]),
            Frcp => self.rcp(a(0)),
            // NIR's lower_fdiv: a · rcp(b).
            Fdiv => {
                let r = self.rcp(a(1));
                self.q(Op::Fmul, &[a(0), r])
            }
            Frsq => self.rsq(a(0)),
            Fsqrt => self.sqrt(a(0)),
            // NIR's lower_fpow: exp2(log2(x) · y).
            Fpow => {
                let l = self.q(Op::Log2, &[a(0)]);
                let p = self.q(Op::Fmul, &[l, a(1)]);
                self.q(Op::Exp2, &[p])
            }
            Ftrunc => self.trunc(a(0)),
            // Mesa's ntq_ffloor: trunc, minus 1 where that rounded a negative value up. Mesa
            // tests the sign of x − trunc(x); x < trunc(x) is the same test without the
            // subtraction (the difference is exact, and −0 is not below 0 either way).
            Ffloor => {
                let t = self.trunc(a(0));
                let c = self.g(Flt, &[a(0), t]);
                let m = self.q(Op::Fsub, &[t, fc(1.0)]);
                self.g(Sel, &[c, m, t])
            }
            // Mesa's ntq_fceil: trunc, plus 1 where that rounded a positive value down.
            Fceil => {
                let t = self.trunc(a(0));
                let c = self.g(Flt, &[t, a(0)]);
                let p = self.q(Op::Fadd, &[t, fc(1.0)]);
                self.g(Sel, &[c, p, t])
            }
            // Mesa's ntq_ffract: x − trunc(x), plus 1 where negative.
            Ffract => {
                let t = self.trunc(a(0));
                let d = self.q(Op::Fsub, &[a(0), t]);
                let c = self.g(Flt, &[d, fc(0.0)]);
                let p = self.q(Op::Fadd, &[d, fc(1.0)]);
                self.g(Sel, &[c, p, d])
            }
            // Round half to even from the truncation i and the exact remainder d = x − i:
            // step away from zero when |d| > 0.5, or |d| = 0.5 and i is odd.
            Fround => {
                let i = self.q(Op::Ftoi, &[a(0)]);
                let t = self.q(Op::Itof, &[i]);
                let d = self.q(Op::Fsub, &[a(0), t]);
                let ad = self.q(Op::Fmaxabs, &[d, d]);
                let more = self.g(Flt, &[fc(0.5), ad]);
                let half = self.g(Feq, &[ad, fc(0.5)]);
                let odd = self.q(Op::And, &[i, ic(1)]);
                let odd = self.q(Op::Sub, &[ic(0), odd]);
                let tie = self.q(Op::And, &[half, odd]);
                let away = self.q(Op::Or, &[more, tie]);
                let neg = self.g(Flt, &[d, fc(0.0)]);
                let step = self.g(Sel, &[neg, ic(-1), ic(1)]);
                let step = self.q(Op::And, &[away, step]);
                let r = self.q(Op::Add, &[i, step]);
                self.q(Op::Itof, &[r])
            }
            // Mesa's ntq_fsign as compare and select: 1, −1 or 0 (also for NaN).
            Fsign => {
                let pos = self.g(Flt, &[fc(0.0), a(0)]);
                let neg = self.g(Flt, &[a(0), fc(0.0)]);
                let n = self.g(Sel, &[neg, fc(-1.0), fc(0.0)]);
                self.g(Sel, &[pos, fc(1.0), n])
            }
            // itof reads x as signed (Mesa's vc4 converts u2f with it alone). At and above
            // 2^31, halve x keeping the lost bit as a sticky bit (round to odd), convert, and
            // double: the one rounding is the one u2f would make.
            U2f if match a(0).value {
                Value::Temp(t) => self.nonneg.get(t.index()).copied().unwrap_or(false),
                Value::Const(c) => c < SIGN,
                Value::Undef(_) => false,
            } =>
            {
                self.q(Op::Itof, &[a(0)])
            }
            U2f => {
                let low = self.q(Op::Itof, &[a(0)]);
                let half = self.q(Op::Shr, &[a(0), ic(1)]);
                let odd = self.q(Op::And, &[a(0), ic(1)]);
                let half = self.q(Op::Or, &[half, odd]);
                let hf = self.q(Op::Itof, &[half]);
                let high = self.q(Op::Fmul, &[hf, fc(2.0)]);
                let big = self.g(Ilt, &[a(0), ic(0)]);
                self.g(Sel, &[big, high, low])
            }
            // ftoi, clamped below at 0 (ftoi is signed).
            F2u => {
                let i = self.q(Op::Ftoi, &[a(0)]);
                self.q(Op::Max, &[i, ic(0)])
            }
            Udiv | Urem | Idiv | Irem => self.divide(inst.op, a(0), a(1)),
            Ibitcount => self.bitcount(a(0)),
            Ibitreverse => self.bitreverse(a(0)),
            Ubfe | Ibfe => self.bitfield_extract(inst.op == Ibfe, a(0), a(1), a(2)),
            // Halves: two packed writes of a file-A register.
            Bfi if a(2).value == Value::Const(16) && a(3).value == Value::Const(16) => {
                let d = self.q(Op::Pack16, &[a(0), a(1)]);
                if let Some(pack) = self.out.last_mut() {
                    pack.operands[1] = halves_high(pack.operands[1]);
                }
                d
            }
            Bfi => self.bitfield_insert(a(0), a(1), a(2), a(3)),
            Fsin => self.sin(a(0), false),
            Fcos => self.sin(a(0), true),
            Fatan => self.atan(a(0)),
            Fatan2 => self.atan2(a(0), a(1)),
            Fasin => self.asin(a(0)),
            Facos => self.acos(a(0)),
            _ => return None,
        })
    }
}

/// The high half's operand of `qpu_pack16`/`qpu_ftoi_pack16`: read by the second instruction,
/// after the first has written the low half of the result, so late-killed (never the
/// result's register).
fn halves_high(o: Operand) -> Operand {
    o.with_flags(OperandFlags::LATE_KILL)
}

/// `bfi(f2i x, f2i y, 16, 16)` — the halves of a vertex's screen XY — as one
/// `qpu_ftoi_pack16 x, y`, where each conversion is read by the insert alone in its block: the
/// two `ftoi`s write the halves themselves (Mesa's `emit_scaled_viewport_write`).
fn pack_conversions(func: &mut Function) {
    if !func
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .any(|i| i.op == Opcode::Bfi)
    {
        return;
    }
    let uses = crate::interface::use_counts(func);
    for block in &mut func.blocks {
        let mut gone = Vec::new();
        for k in 0..block.insts.len() {
            let inst = &block.insts[k];
            let halves = inst.op == Opcode::Bfi
                && inst.operands[2].value == Value::Const(16)
                && inst.operands[3].value == Value::Const(16);
            if !halves {
                continue;
            }
            let conversion = |o: &Operand| {
                let t = o.temp_id().filter(|t| uses[t.index()] == 1)?;
                block.insts[..k]
                    .iter()
                    .rposition(|i| i.op == Opcode::F2i && i.defs[0].temp == t)
            };
            let (Some(x), Some(y)) = (conversion(&inst.operands[0]), conversion(&inst.operands[1]))
            else {
                continue;
            };
            let source = |j: usize| Operand::from(block.insts[j].operands[0].value);
            let (sx, sy) = (source(x), halves_high(source(y)));
            let inst = &mut block.insts[k];
            inst.op = Op::FtoiPack16.opcode();
            inst.operands.clear();
            inst.operands.extend([sx, sy]);
            gone.extend([x, y]);
        }
        gone.sort_unstable();
        for j in gone.into_iter().rev() {
            block.insts.remove(j);
        }
    }
}

/// Selects vc4 opcodes for every generic op the QPU has, lowers those it lacks, and retargets
/// `func` to `vc4(threads=1)`, every value in the whole `q` class: the interface pass narrows
/// the classes on the final function ([`crate::narrow`]), and nothing before it reads them
/// (the pre-RA scheduler counts units). On error `func` is unchanged.
pub fn select(func: &mut Function) -> Result<(), Unsupported> {
    let mut refused = BTreeSet::new();
    if func.allocated {
        refused.insert("an allocated function".to_string());
    }
    match func.target.name() {
        "generic" | "vc4" => {}
        other => {
            refused.insert(format!("functions of target {other}"));
        }
    }
    // What the TMU path refuses is all that is said (its vectors are part of the same refusal).
    let texture = crate::texture::refusals(func);
    if !texture.is_empty() {
        return Err(Unsupported(texture));
    }
    let mut texture_results = vec![false; func.temps.len()];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        if matches!(inst.op, Opcode::TextureSample | Opcode::TextureFetch) {
            texture_results[inst.defs[0].temp.index()] = true;
        }
    }
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        if let Some(why) = refusal(func, inst, &texture_results) {
            refused.insert(why);
        }
    }
    if !refused.is_empty() {
        return Err(Unsupported(refused.into_iter().collect()));
    }
    crate::texture::select_lookups(func);
    pack_conversions(func);

    let nonneg = sign_bit_clear(func);
    let mut comparisons = vec![false; func.temps.len()];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        if crate::interface::is_comparison(inst.op)
            && let [d] = inst.defs.as_slice()
        {
            comparisons[d.temp.index()] = true;
        }
    }
    let uniform_file: Vec<bool> = func
        .target
        .files()
        .iter()
        .map(|f| f.lanes == Lanes::Uniform)
        .collect();
    let was_uniform: Vec<bool> = func
        .temps
        .iter()
        .map(|c| !c.is_none() && uniform_file.get(c.file.index()).copied().unwrap_or(false))
        .collect();
    let target = Vc4Target::arc(1);
    let q1 = target.class(crate::target::Q, 1);
    let acc = RegClass {
        subset: kiln_ir::Target::subset_by_name(&*target, "r0_r3"),
        ..q1
    };
    func.target = target;
    for c in func.temps.iter_mut().filter(|c| !c.is_none()) {
        *c = q1;
    }

    // The instructions one lowering makes (a buffer kept from one to the next).
    let mut made: Vec<Inst> = Vec::new();
    for b in 0..func.blocks.len() {
        let insts = std::mem::take(&mut func.blocks[b].insts);
        let mut out = Vec::with_capacity(insts.len());
        for mut inst in insts {
            for o in inst.operands.iter_mut() {
                if let Value::Undef(_) = o.value {
                    o.value = Value::Undef(q1);
                }
            }
            let uniform = inst
                .defs
                .iter()
                .any(|d| was_uniform.get(d.temp.index()).copied().unwrap_or(false));
            if uniform {
                inst.flags.all_lanes = true;
            }
            if let Some(op) = match inst.op {
                Opcode::Fddx => Some(Op::Fddx),
                Opcode::Fddy => Some(Op::Fddy),
                _ => None,
            } {
                // Mesa's ntq_fddx / ntq_fddy: one target op with a scratch accumulator.
                inst.op = op.opcode();
                let scratch = func.new_temp(acc);
                let mut d = kiln_ir::Def::new(scratch);
                d.dead = true;
                inst.defs.insert(0, d);
                out.push(inst);
                continue;
            }
            made.clear();
            let mut e = Emitter {
                func,
                q1,
                flags: inst.flags,
                out: std::mem::take(&mut made),
                nonneg: &nonneg,
                comparisons: &comparisons,
            };
            let lowered = e.lower(&inst);
            made = e.out;
            match lowered {
                None => out.push(inst),
                Some(result) => {
                    let dst = inst.defs[0].temp;
                    let seq = &mut made;
                    let last_def = seq.last().and_then(|i| i.defs.first()).map(|d| d.temp);
                    match (result.value, last_def) {
                        (Value::Temp(t), Some(l)) if t == l => {
                            // The last instruction defines the result: give it `dst`.
                            if let Some(d) = seq.last_mut().and_then(|i| i.defs.first_mut()) {
                                d.temp = dst;
                                d.dead = inst.defs[0].dead;
                            }
                            func.temps[t.index()] = RegClass::NONE;
                        }
                        _ => {
                            let mut mov = Inst::new(Opcode::Mov);
                            mov.flags = inst.flags;
                            mov.defs.push(kiln_ir::Def::new(dst));
                            mov.operands.push(result);
                            seq.push(mov);
                        }
                    }
                    out.append(seq);
                }
            }
        }
        func.blocks[b].insts = out;
    }
    Ok(())
}

/// Instructions per opcode name, for statistics and tests.
pub fn opcode_counts(func: &Function) -> std::collections::BTreeMap<&'static str, usize> {
    let mut m = std::collections::BTreeMap::new();
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        *m.entry(inst.op.name()).or_insert(0) += 1;
    }
    m
}
