//! The vc4 operations: every QPU operation selection produces, defined once — its hardware
//! operation, unit, latency and the implicit resources it uses, in order, with the IR's facts
//! (arity, classes, its meaning on a lane: the simulator's own ALU and SFU functions, so the
//! interpreter runs a selected program as the QPU computes each operation). Selection, class
//! narrowing, emission and scheduling read these facts; `kiln_ir::TargetOpInfo::code` leads
//! from an instruction's opcode back to its [`Op`].
//!
//! IR names carry a `qpu_` prefix so that they never shadow a generic opcode in the text format
//! (`%3:q1 = qpu_fadd %1, %2`). The design is in `docs/vc4.md` ("Operations").

use kiln_ir::{Arity, ClassReq, CrossLaneEval, OpInfo, TargetOp, TargetOpInfo};
use kiln_qpu::isa::{AddOp, MulOp, latency, waddr};
use kiln_qpu::sim::{alu, sfu};

/// The functional unit an operation issues on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Add,
    Mul,
    /// Either ALU: both have the operation.
    Either,
    /// The special-function unit (a write to its address; the result arrives in r4).
    Sfu,
    /// Texture and memory lookup unit 0.
    Tmu,
}

/// Implicit state an operation uses besides its operands and result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// Accumulator r4, where SFU and TMU results arrive.
    R4,
    /// The TMU request FIFO (four requests in flight at most).
    TmuFifo,
    /// The uniform stream, read in program order.
    UniformStream,
    /// The varying FIFO (and r5, which receives each varying's C coefficient).
    VaryingFifo,
    /// The vertex pipe memory.
    Vpm,
    /// The tile buffer (and the scoreboard).
    TileBuffer,
    /// The Z, N and C flags.
    Flags,
}

/// How an operation uses a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

/// One use of a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Use(pub Resource, pub Access);

/// Which neighbour a derivative subtracts (Mesa's `ntq_fddx`, `ntq_fddy`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Axis {
    /// Horizontal: lanes `l` and `l ^ 1`.
    X,
    /// Vertical: lanes `l` and `l ^ 2`.
    Y,
}

impl Axis {
    /// The bit of the lane (element) number that tells the two pixels of a pair apart.
    pub fn bit(self) -> u32 {
        match self {
            Axis::X => 1,
            Axis::Y => 2,
        }
    }

    /// Rotations (lane `l` receives lane `l − n`) that bring the neighbour with the bit set to
    /// the lane without it, and the other way round (Mesa: 15 and 1, 14 and 2).
    pub fn rotations(self) -> (u8, u8) {
        let b = self.bit() as u8;
        (16 - b, b)
    }
}

/// The hardware operation behind an [`Op`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hw {
    Add(AddOp),
    Mul(MulOp),
    /// An operation both ALUs have: the add unit's and the mul unit's opcode.
    Either(AddOp, MulOp),
    /// A write to this SFU address.
    Sfu(u8),
    /// A TMU0 lookup; `cube`: a cube map, its r coordinate written first; `lod`: a bias or an
    /// explicit level is written to the b register.
    Tmu {
        cube: bool,
        lod: bool,
    },
    /// A derivative: the value rotated on the mul unit, neighbours subtracted on the add unit.
    Derivative(Axis),
    /// Two 16-bit halves of a file-A register, each written by this add-unit operation of one
    /// operand with the pack that keeps the other half (`op ra.16a, x` then `op ra.16b, y`:
    /// the low 16 bits of each result; Mesa's `emit_scaled_viewport_write`).
    Halves(AddOp),
}

/// The machine facts of one operation.
#[derive(Debug)]
pub struct Facts {
    pub hw: Hw,
    pub unit: Unit,
    /// Instructions from the operation (its last instruction) to the first that may read its
    /// result: [`latency`]'s distances.
    pub latency: u8,
    /// The implicit resources it uses, in the order it uses them.
    pub resources: &'static [Use],
}

impl Facts {
    /// Whether the operation writes `r`.
    pub fn writes(&self, r: Resource) -> bool {
        self.resources
            .iter()
            .any(|u| u.0 == r && u.1 != Access::Read)
    }
}

const REGFILE: u8 = latency::REGFILE as u8;

const fn alu(hw: Hw, unit: Unit) -> Facts {
    Facts {
        hw,
        unit,
        latency: REGFILE,
        resources: &[],
    }
}

const fn add(op: AddOp) -> Facts {
    alu(Hw::Add(op), Unit::Add)
}

const fn mul(op: MulOp) -> Facts {
    alu(Hw::Mul(op), Unit::Mul)
}

const fn sfu_op(address: u8) -> Facts {
    Facts {
        hw: Hw::Sfu(address),
        unit: Unit::Sfu,
        latency: latency::SFU as u8,
        resources: &[Use(Resource::R4, Access::Write)],
    }
}

const fn tmu(cube: bool, lod: bool) -> Facts {
    Facts {
        hw: Hw::Tmu { cube, lod },
        unit: Unit::Tmu,
        latency: latency::TMU_ESTIMATE as u8,
        // The configuration uniforms, the request, the result in r4.
        resources: &[
            Use(Resource::UniformStream, Access::Read),
            Use(Resource::TmuFifo, Access::Write),
            Use(Resource::R4, Access::Write),
        ],
    }
}

const fn halves(op: AddOp) -> Facts {
    alu(Hw::Halves(op), Unit::Add)
}

const fn derivative(axis: Axis) -> Facts {
    Facts {
        hw: Hw::Derivative(axis),
        unit: Unit::Mul,
        latency: REGFILE,
        // Z from the element number picks each lane's neighbour.
        resources: &[Use(Resource::Flags, Access::Write)],
    }
}

/// The IR's facts of an operation beyond its name.
struct Ir {
    defs: u8,
    operands: u8,
    commutative: bool,
    def_classes: Option<&'static [ClassReq]>,
    eval: Option<fn(&[u32]) -> u32>,
    cross_lane: Option<CrossLaneEval>,
}

const fn ir(operands: u8, commutative: bool, eval: fn(&[u32]) -> u32) -> Ir {
    Ir {
        defs: 1,
        operands,
        commutative,
        def_classes: None,
        eval: Some(eval),
        cross_lane: None,
    }
}

/// Defines [`Op`], its facts and the target opcode table from one list.
macro_rules! vc4_ops {
    ($($(#[$doc:meta])* $v:ident $name:literal => $facts:expr, $ir:expr;)*) => {
        /// A vc4 operation (the target opcodes of `vc4`).
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        pub enum Op {
            $($(#[$doc])* $v,)*
        }

        impl Op {
            /// Every operation, in table order.
            pub const ALL: &'static [Op] = &[$(Op::$v,)*];

            /// The machine facts.
            pub fn facts(self) -> &'static Facts {
                match self {
                    $(Op::$v => {
                        const F: Facts = $facts;
                        &F
                    })*
                }
            }
        }

        /// The vc4 target opcodes, in [`Op`]'s order.
        pub static VC4_OPS: [TargetOpInfo; Op::ALL.len()] = [$({
            const I: Ir = $ir;
            TargetOpInfo {
                info: OpInfo {
                    commutative: I.commutative,
                    ..OpInfo::target(
                        concat!("qpu_", $name),
                        Arity::Fixed(I.defs),
                        Arity::Fixed(I.operands),
                        0,
                    )
                },
                code: Op::$v as u16,
                latency: { const F: Facts = $facts; F.latency },
                operand_classes: None,
                def_classes: I.def_classes,
                eval: I.eval,
                cross_lane: I.cross_lane,
            }
        },)*];
    };
}

vc4_ops! {
    Fadd "fadd" => add(AddOp::Fadd), ir(2, true, |a| eval(Op::Fadd, a));
    Fsub "fsub" => add(AddOp::Fsub), ir(2, false, |a| eval(Op::Fsub, a));
    Fmin "fmin" => add(AddOp::Fmin), ir(2, false, |a| eval(Op::Fmin, a));
    Fmax "fmax" => add(AddOp::Fmax), ir(2, false, |a| eval(Op::Fmax, a));
    Fminabs "fminabs" => add(AddOp::Fminabs), ir(2, false, |a| eval(Op::Fminabs, a));
    Fmaxabs "fmaxabs" => add(AddOp::Fmaxabs), ir(2, false, |a| eval(Op::Fmaxabs, a));
    Ftoi "ftoi" => add(AddOp::Ftoi), ir(1, false, |a| eval(Op::Ftoi, a));
    Itof "itof" => add(AddOp::Itof), ir(1, false, |a| eval(Op::Itof, a));
    Add "add" => add(AddOp::Add), ir(2, true, |a| eval(Op::Add, a));
    Sub "sub" => add(AddOp::Sub), ir(2, false, |a| eval(Op::Sub, a));
    Shr "shr" => add(AddOp::Shr), ir(2, false, |a| eval(Op::Shr, a));
    Asr "asr" => add(AddOp::Asr), ir(2, false, |a| eval(Op::Asr, a));
    Ror "ror" => add(AddOp::Ror), ir(2, false, |a| eval(Op::Ror, a));
    Shl "shl" => add(AddOp::Shl), ir(2, false, |a| eval(Op::Shl, a));
    Min "min" => add(AddOp::Min), ir(2, true, |a| eval(Op::Min, a));
    Max "max" => add(AddOp::Max), ir(2, true, |a| eval(Op::Max, a));
    And "and" => add(AddOp::And), ir(2, true, |a| eval(Op::And, a));
    Or "or" => add(AddOp::Or), ir(2, true, |a| eval(Op::Or, a));
    Xor "xor" => add(AddOp::Xor), ir(2, true, |a| eval(Op::Xor, a));
    Not "not" => add(AddOp::Not), ir(1, false, |a| eval(Op::Not, a));
    Clz "clz" => add(AddOp::Clz), ir(1, false, |a| eval(Op::Clz, a));
    V8adds "v8adds" => alu(Hw::Either(AddOp::V8adds, MulOp::V8adds), Unit::Either),
        ir(2, true, |a| eval(Op::V8adds, a));
    V8subs "v8subs" => alu(Hw::Either(AddOp::V8subs, MulOp::V8subs), Unit::Either),
        ir(2, false, |a| eval(Op::V8subs, a));
    Fmul "fmul" => mul(MulOp::Fmul), ir(2, true, |a| eval(Op::Fmul, a));
    Mul24 "mul24" => mul(MulOp::Mul24), ir(2, true, |a| eval(Op::Mul24, a));
    V8muld "v8muld" => mul(MulOp::V8muld), ir(2, true, |a| eval(Op::V8muld, a));
    V8min "v8min" => mul(MulOp::V8min), ir(2, true, |a| eval(Op::V8min, a));
    V8max "v8max" => mul(MulOp::V8max), ir(2, true, |a| eval(Op::V8max, a));
    Recip "recip" => sfu_op(waddr::SFU_RECIP), ir(1, false, |a| eval(Op::Recip, a));
    Recipsqrt "recipsqrt" => sfu_op(waddr::SFU_RECIPSQRT), ir(1, false, |a| eval(Op::Recipsqrt, a));
    Exp2 "exp2" => sfu_op(waddr::SFU_EXP), ir(1, false, |a| eval(Op::Exp2, a));
    Log2 "log2" => sfu_op(waddr::SFU_LOG), ir(1, false, |a| eval(Op::Log2, a));
    /// `qpu_tex U, k, s, t`: component k of texture unit U's texel at (s, t) as a float, or
    /// its whole word for k = 4 ([`crate::texture::WORD`]).
    Tex "tex" => tmu(false, false), ir(4, false, texel_component);
    /// `qpu_tex_b U, k, s, t, b, M`: the same with a bias (`M` = 1) or an explicit level
    /// (`M` = 2) written to the TMU's b register (Mesa's `txb` / `txl`). The test textures
    /// have one level, so the texel is the same.
    TexB "tex_b" => tmu(false, true), ir(6, false, texel_component);
    /// `qpu_tex_cube U, k, s, t, r`: component k of cube map U's texel in direction (s, t, r),
    /// a direction whose largest component has magnitude 1 (Mesa's `ntq_emit_tex` divides by
    /// it first).
    TexCube "tex_cube" => tmu(true, false), ir(5, false, cube_texel_component);
    /// `qpu_tex_cube_b U, k, s, t, r, b, M`: the same with a bias or an explicit level.
    TexCubeB "tex_cube_b" => tmu(true, true), ir(7, false, cube_texel_component);
    /// `%d = qpu_pack16 %lo, %hi`: the low 16 bits of `lo` and of `hi` in the low and high half
    /// of a file-A register (`mov ra.16a, lo ; mov ra.16b, hi`).
    Pack16 "pack16" => halves(AddOp::Or), Ir {
        eval: Some(|a| eval(Op::Pack16, a)),
        ..HALVES
    };
    /// `%d = qpu_ftoi_pack16 %x, %y`: `ftoi` of each, packed as `qpu_pack16` packs (a vertex's
    /// screen X and Y, `ftoi ra.16a, x ; ftoi ra.16b, y`).
    FtoiPack16 "ftoi_pack16" => halves(AddOp::Ftoi), Ir {
        eval: Some(|a| eval(Op::FtoiPack16, a)),
        ..HALVES
    };
    /// `%scratch, %d = qpu_fddx %v`: the horizontal derivative of `v`; `scratch` is an
    /// accumulator the emitter may overwrite in every lane.
    Fddx "fddx" => derivative(Axis::X), Ir {
        cross_lane: Some(|lane, read| pair_difference(lane, Axis::X, read)),
        ..DERIVATIVE
    };
    /// `%scratch, %d = qpu_fddy %v`: the vertical derivative.
    Fddy "fddy" => derivative(Axis::Y), Ir {
        cross_lane: Some(|lane, read| pair_difference(lane, Axis::Y, read)),
        ..DERIVATIVE
    };
}

impl Op {
    /// The operation as a kiln target opcode.
    pub fn target_op(self) -> TargetOp {
        TargetOp(&VC4_OPS[self as usize])
    }

    pub fn opcode(self) -> kiln_ir::Opcode {
        kiln_ir::Opcode::Target(self.target_op())
    }

    /// The vc4 operation a target opcode is, if it is one.
    pub fn of(t: TargetOp) -> Option<Op> {
        let code = t.info().code as usize;
        VC4_OPS
            .get(code)
            .is_some_and(|i| std::ptr::eq(i, t.0))
            .then(|| Op::ALL[code])
    }

    /// The vc4 operation of an IR opcode, if it is one.
    pub fn of_opcode(op: kiln_ir::Opcode) -> Option<Op> {
        match op {
            kiln_ir::Opcode::Target(t) => Op::of(t),
            _ => None,
        }
    }

    /// The IR name (`qpu_…`).
    pub fn name(self) -> &'static str {
        VC4_OPS[self as usize].info.name
    }
}

/// A derivative's definitions: a scratch accumulator (first, so that an allocator places this
/// constrained value before the result takes a register), then the result.
const DERIVATIVE: Ir = Ir {
    defs: 2,
    operands: 1,
    commutative: false,
    def_classes: Some(&[
        ClassReq {
            file: "q",
            size: 1,
            subset: Some("r0_r3"),
        },
        ClassReq {
            file: "q",
            size: 1,
            subset: None,
        },
    ]),
    eval: None,
    cross_lane: None,
};

/// The halves' facts: two operands, a result in file A (a pack applies to file-A writes only);
/// the table gives each its meaning.
const HALVES: Ir = Ir {
    defs: 1,
    operands: 2,
    commutative: false,
    def_classes: Some(&[ClassReq {
        file: "q",
        size: 1,
        subset: Some("a"),
    }]),
    eval: None,
    cross_lane: None,
};

/// An ALU or SFU operation on one lane, as the QPU computes it.
fn eval(op: Op, a: &[u32]) -> u32 {
    let b = a.get(1).copied().unwrap_or(0);
    match op.facts().hw {
        Hw::Add(o) | Hw::Either(o, _) => alu::add_op(o, a[0], b).map_or(0, |r| r.value),
        Hw::Mul(o) => alu::mul_op(o, a[0], b).value,
        Hw::Sfu(address) => sfu::sfu(address, a[0]),
        Hw::Halves(o) => {
            // Each write as the simulator packs it (pm = 0, codes 1 and 2: the low 16 bits).
            let half = |x: u32, code: u8| {
                let r = alu::add_op(o, x, x).unwrap_or_default();
                alu::pack_a(code, r, false)
            };
            let (lo, lo_mask) = half(a[0], 1);
            let (hi, hi_mask) = half(b, 2);
            (lo & lo_mask) | (hi & hi_mask)
        }
        Hw::Tmu { .. } | Hw::Derivative(_) => unreachable!("not evaluated per lane"),
    }
}

/// Texel index of coordinate `c` on an axis of `n` texels, as the TMU computes it (nearest,
/// repeat): `floor(c × n) mod n`, exactly (the simulator's `sim::tmu`).
fn texel(c: u32, n: u32) -> i32 {
    let c = f32::from_bits(c);
    // Denormal coordinates are flushed, as every QPU float input is.
    let c = if c.is_subnormal() { 0.0 } else { c };
    ((c as f64 * n as f64).floor() as i64).rem_euclid(n as i64) as i32
}

/// `qpu_tex`'s meaning: component `a[1]` (0–3, or the whole word: `texture::WORD`) of unit
/// `a[0]`'s procedural texture
/// (`kiln_interp::Texture::procedural`, what the harness binds) at (`a[2]`, `a[3]`).
fn texel_component(a: &[u32]) -> u32 {
    let tex = kiln_interp::Texture::procedural(a[0]);
    let (x, y) = (texel(a[2], tex.width), texel(a[3], tex.height));
    if a[1] == crate::texture::WORD {
        let (w, h) = (tex.width as i32, tex.height as i32);
        return u32::from_le_bytes(tex.texels[(y.rem_euclid(h) * w + x.rem_euclid(w)) as usize]);
    }
    tex.fetch(x, y)[a[1] as usize & 3]
}

/// `qpu_tex_cube`'s meaning: component `a[1]` of unit `a[0]`'s procedural cube map
/// (`kiln_interp::Texture::procedural_cube`, what the harness binds) in direction (`a[2]`,
/// `a[3]`, `a[4]`): the face and coordinates the TMU takes (`sim::tmu::cube_face`), its nearest
/// texel clamped to the edge.
fn cube_texel_component(a: &[u32]) -> u32 {
    let tex = kiln_interp::Texture::procedural_cube(a[0]);
    let [s, t, r] = [a[2], a[3], a[4]].map(f32::from_bits);
    let (face, fs, ft) = kiln_qpu::sim::tmu::cube_face(s, t, r);
    let clamped = kiln_interp::texture::clamped_texel;
    let (x, y) = (clamped(fs, tex.width), clamped(ft, tex.height));
    let texel = tex.face(face)[(y * tex.width + x) as usize];
    (texel[a[1] as usize & 3] as f32 / 255.0).to_bits()
}

/// `v[odd] − v[even]` of the lane's pair on `axis`, with the QPU's `fsub`.
fn pair_difference(
    lane: usize,
    axis: Axis,
    read: &dyn Fn(usize, usize) -> Option<u32>,
) -> Option<u32> {
    let bit = axis.bit() as usize;
    let lo = read(0, lane & !bit)?;
    let hi = read(0, lane | bit)?;
    alu::add_op(AddOp::Fsub, hi, lo).map(|r| r.value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::Opcode;
    use kiln_qpu::isa::{Instr, Rule, builder, validate_instrs};

    /// Names follow the hardware's mnemonics, are unique, never shadow a shared opcode, and
    /// lead back to their operation through the target.
    /// The TMU's face rule (`sim::tmu::cube_face`, which `qpu_tex_cube` means) and the
    /// interpreter's OpenGL rule (`kiln_interp::texture::cube_face`) are written apart; they
    /// agree on every direction but denormal ones (the TMU flushes those), ties and NaNs
    /// included.
    #[test]
    fn the_tmu_and_the_interpreter_pick_the_same_cube_face() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let pick = [0.0, -0.0, 1.0, -1.0, 0.5, f32::NAN, f32::INFINITY, 3.0];
            match seed % 4 {
                0 => pick[(seed >> 8) as usize % pick.len()],
                _ => ((seed >> 16) as u32 as f32 / u32::MAX as f32 - 0.5) * 8.0,
            }
        };
        for _ in 0..20_000 {
            let (x, y, z) = (next(), next(), next());
            let (f1, s1, t1) = kiln_qpu::sim::tmu::cube_face(x, y, z);
            let (f2, s2, t2) = kiln_interp::texture::cube_face(x, y, z);
            let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
            assert!(
                f1 == f2 && same(s1, s2) && same(t1, t2),
                "({x}, {y}, {z}): tmu {f1} {s1} {t1}, interpreter {f2} {s2} {t2}"
            );
        }
    }

    #[test]
    fn table_matches_the_operations() {
        let t = crate::target::Vc4Target::new(1);
        for (i, &op) in Op::ALL.iter().enumerate() {
            assert_eq!(op as usize, i);
            assert_eq!(Op::of(op.target_op()), Some(op));
            let name = op.name();
            assert!(Opcode::from_name(name).is_none());
            assert_eq!(Opcode::from_name_in(name, &t), Some(op.opcode()));
            let hw = match op.facts().hw {
                Hw::Add(a) | Hw::Either(a, _) => a.mnemonic(),
                Hw::Mul(m) => m.mnemonic(),
                _ => None,
            };
            if let Some(m) = hw {
                assert_eq!(name, format!("qpu_{m}"));
            }
            if let Hw::Either(a, m) = op.facts().hw {
                assert_eq!(
                    a.mnemonic(),
                    m.mnemonic(),
                    "{name}: one operation on both units"
                );
            }
        }
        let generic = kiln_ir::GenericTarget::new(8, 8);
        assert_eq!(
            Op::of(TargetOp(&kiln_ir::Target::opcodes(&generic)[0])),
            None
        );
    }

    fn f(x: f32) -> u32 {
        x.to_bits()
    }

    /// A few lanes of each kind of rule: truncating add, flushed denormals, ftoi's zero out of
    /// range, mul24's low bits, shifts mod 32, the SFU on |x|.
    #[test]
    fn eval_follows_the_qpu() {
        let ev = |op: Op, a: &[u32]| (VC4_OPS[op as usize].eval.unwrap())(a);
        // 1 + 0.75 ulp rounds to 1 + 1 ulp in IEEE; the QPU truncates to 1.
        assert_eq!(ev(Op::Fadd, &[f(1.0), f(0.75 * f32::EPSILON)]), f(1.0));
        assert_eq!(ev(Op::Fsub, &[f(-1.0), f(0.75 * f32::EPSILON)]), f(-1.0));
        assert_eq!(ev(Op::Fmul, &[f(1e-20), f(1e-20)]), 0);
        assert_eq!(ev(Op::Ftoi, &[f(3e9)]), 0);
        assert_eq!(ev(Op::Ftoi, &[f(-2.7)]), -2i32 as u32);
        assert_eq!(ev(Op::Ftoi, &[f(f32::NAN)]), 0);
        assert_eq!(ev(Op::Mul24, &[0x0100_0003, 5]), 15);
        assert_eq!(ev(Op::Shl, &[1, 33]), 2);
        assert_eq!(ev(Op::Asr, &[0x8000_0000, 31]), u32::MAX);
        assert_eq!(ev(Op::Clz, &[0]), 32);
        assert_eq!(ev(Op::V8adds, &[0x10ff_0102, 0x0102_0304]), 0x11ff_0406);
        assert_eq!(ev(Op::Recipsqrt, &[f(-4.0)]), f(0.5));
        assert_eq!(ev(Op::Recip, &[f(0.0)]), f(f32::INFINITY));
        assert_eq!(ev(Op::Log2, &[f(8.0)]), f(3.0));
        assert_eq!(ev(Op::Exp2, &[f(-1.0)]), f(0.5));
        // Halves: the low 16 bits of each, low then high.
        assert_eq!(ev(Op::Pack16, &[0x1234_5678, 0x9abc_def0]), 0xdef0_5678);
        assert_eq!(ev(Op::FtoiPack16, &[f(-3.7), f(5.2)]), 0x0005_fffd);
        assert_eq!(ev(Op::FtoiPack16, &[f(3e9), f(-1.0)]), 0xffff_0000);
    }

    /// Each operation's latency is the distance the QPU needs: its result read one instruction
    /// earlier breaks a rule of the validator, read at the latency it does not. (The TMU's is
    /// an estimate: the QPU waits for a lookup's result, so no distance breaks a rule.)
    #[test]
    fn latencies_are_what_the_qpu_needs() {
        use builder::Reg;
        let broken =
            |prog: &[Instr], rule: Rule| validate_instrs(prog).iter().any(|v| v.rule == rule);
        let with_gap = |first: Instr, read: Instr, distance: usize| {
            let mut p = vec![first];
            p.extend(std::iter::repeat_n(Instr::nop(), distance - 1));
            p.push(read);
            p
        };
        for &op in Op::ALL {
            let facts = op.facts();
            let d = facts.latency as usize;
            match facts.hw {
                Hw::Add(_) | Hw::Mul(_) | Hw::Either(..) | Hw::Derivative(_) | Hw::Halves(_) => {
                    let w = Instr::Alu(
                        builder::qpu_a(AddOp::Fadd, Reg::A(3), Reg::Acc(0), Reg::Acc(1)).unwrap(),
                    );
                    let r = Instr::Alu(builder::mov(Reg::Acc(2), Reg::A(3)).unwrap());
                    assert!(
                        broken(&with_gap(w, r, d - 1), Rule::RegfileReadAfterWrite),
                        "{op:?}"
                    );
                    assert!(
                        !broken(&with_gap(w, r, d), Rule::RegfileReadAfterWrite),
                        "{op:?}"
                    );
                }
                Hw::Sfu(address) => {
                    let w = Instr::Alu(builder::mov(Reg::Io(address), Reg::Acc(0)).unwrap());
                    let r = Instr::Alu(builder::mov(Reg::Acc(1), Reg::Acc(4)).unwrap());
                    assert!(broken(&with_gap(w, r, d - 1), Rule::SfuR4), "{op:?}");
                    assert!(!broken(&with_gap(w, r, d), Rule::SfuR4), "{op:?}");
                }
                Hw::Tmu { .. } => assert_eq!(d, latency::TMU_ESTIMATE),
            }
        }
    }

    /// Both lanes of a pair get `v[odd] − v[even]`, x pairs lanes `l ^ 1`, y pairs `l ^ 2`,
    /// and the subtraction truncates as the QPU's does.
    #[test]
    fn derivatives_pair_lanes() {
        let v: Vec<u32> = (0..16).map(|l| f((l * l) as f32)).collect();
        let read = |_: usize, l: usize| v.get(l).copied();
        let cross = |op: Op| VC4_OPS[op as usize].cross_lane.unwrap();
        for l in 0..16usize {
            let dx = cross(Op::Fddx)(l, &read).unwrap();
            let dy = cross(Op::Fddy)(l, &read).unwrap();
            let (x0, x1) = (l & !1, l | 1);
            let (y0, y1) = (l & !2, l | 2);
            assert_eq!(f32::from_bits(dx), (x1 * x1 - x0 * x0) as f32, "lane {l}");
            assert_eq!(f32::from_bits(dy), (y1 * y1 - y0 * y0) as f32, "lane {l}");
        }
        // 1 − 2^-25 rounds to 1.0 in IEEE; the QPU truncates toward zero.
        let w = [f(2f32.powi(-25)), f(1.0)];
        let read = |_: usize, l: usize| w.get(l).copied();
        let d = cross(Op::Fddx)(0, &read).unwrap();
        assert_eq!(d, f(1.0 - f32::EPSILON / 2.0));
        assert_eq!(Axis::X.rotations(), (15, 1));
        assert_eq!(Axis::Y.rotations(), (14, 2));
    }
}
