//! Field types of a QPU instruction word (reference guide §"QPU Instruction Encoding";
//! Mesa `vc4_qpu_defines.h`). Every enum here covers all values of its bit field, so that
//! decoding is total: values the hardware leaves undefined are kept as `Undefined(n)` variants
//! or raw numbers.

/// Signalling field, bits 63:60, for ALU-form instructions (values 0–13).
/// 14 (load immediate / semaphore) and 15 (branch) select other instruction forms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    Breakpoint = 0,
    None = 1,
    ThreadSwitch = 2,
    ProgramEnd = 3,
    ScoreboardWait = 4,
    ScoreboardUnlock = 5,
    LastThreadSwitch = 6,
    CoverageLoad = 7,
    ColorLoad = 8,
    ColorLoadEnd = 9,
    LoadTmu0 = 10,
    LoadTmu1 = 11,
    AlphaMaskLoad = 12,
    SmallImm = 13,
}

impl Signal {
    pub const ALL: [Signal; 14] = [
        Signal::Breakpoint,
        Signal::None,
        Signal::ThreadSwitch,
        Signal::ProgramEnd,
        Signal::ScoreboardWait,
        Signal::ScoreboardUnlock,
        Signal::LastThreadSwitch,
        Signal::CoverageLoad,
        Signal::ColorLoad,
        Signal::ColorLoadEnd,
        Signal::LoadTmu0,
        Signal::LoadTmu1,
        Signal::AlphaMaskLoad,
        Signal::SmallImm,
    ];
    /// `None` for 14 and 15 (not ALU signals).
    pub fn from_bits(v: u8) -> Option<Signal> {
        Signal::ALL.get(v as usize).copied()
    }
    /// True for signals that end the program (sig 3 and sig 9).
    pub fn is_program_end(self) -> bool {
        matches!(self, Signal::ProgramEnd | Signal::ColorLoadEnd)
    }
    /// True for signals that load r4 from a peripheral (TMU, colour, coverage, alpha mask).
    pub fn loads_r4(self) -> bool {
        matches!(
            self,
            Signal::LoadTmu0
                | Signal::LoadTmu1
                | Signal::ColorLoad
                | Signal::ColorLoadEnd
                | Signal::CoverageLoad
                | Signal::AlphaMaskLoad
        )
    }
}

/// Write condition (cond_add / cond_mul), 3 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cond {
    Never = 0,
    Always = 1,
    Zs = 2,
    Zc = 3,
    Ns = 4,
    Nc = 5,
    Cs = 6,
    Cc = 7,
}

impl Cond {
    pub const ALL: [Cond; 8] = [
        Cond::Never,
        Cond::Always,
        Cond::Zs,
        Cond::Zc,
        Cond::Ns,
        Cond::Nc,
        Cond::Cs,
        Cond::Cc,
    ];
    pub fn from_bits(v: u8) -> Cond {
        Cond::ALL[(v & 7) as usize]
    }
    /// Mesa's suffix (`.never`, `` for always, `.zs` …).
    pub fn suffix(self) -> &'static str {
        [".never", "", ".zs", ".zc", ".ns", ".nc", ".cs", ".cc"][self as usize]
    }
    /// Evaluates the condition against one lane's flags.
    #[inline]
    pub fn holds(self, z: bool, n: bool, c: bool) -> bool {
        match self {
            Cond::Never => false,
            Cond::Always => true,
            Cond::Zs => z,
            Cond::Zc => !z,
            Cond::Ns => n,
            Cond::Nc => !n,
            Cond::Cs => c,
            Cond::Cc => !c,
        }
    }
}

/// Branch condition, bits 55:52 of a branch (12 defined codes, 15 = always).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BranchCond {
    AllZs,
    AllZc,
    AnyZs,
    AnyZc,
    AllNs,
    AllNc,
    AnyNs,
    AnyNc,
    AllCs,
    AllCc,
    AnyCs,
    AnyCc,
    /// Codes 12–14, undefined by the guide.
    Undefined(u8),
    Always,
}

impl BranchCond {
    const NAMES: [&'static str; 12] = [
        "all_zs", "all_zc", "any_zs", "any_zc", "all_ns", "all_nc", "any_ns", "any_nc", "all_cs",
        "all_cc", "any_cs", "any_cc",
    ];
    pub fn from_bits(v: u8) -> BranchCond {
        use BranchCond::*;
        match v & 15 {
            0 => AllZs,
            1 => AllZc,
            2 => AnyZs,
            3 => AnyZc,
            4 => AllNs,
            5 => AllNc,
            6 => AnyNs,
            7 => AnyNc,
            8 => AllCs,
            9 => AllCc,
            10 => AnyCs,
            11 => AnyCc,
            15 => Always,
            n => Undefined(n),
        }
    }
    pub fn bits(self) -> u8 {
        use BranchCond::*;
        match self {
            AllZs => 0,
            AllZc => 1,
            AnyZs => 2,
            AnyZc => 3,
            AllNs => 4,
            AllNc => 5,
            AnyNs => 6,
            AnyNc => 7,
            AllCs => 8,
            AllCc => 9,
            AnyCs => 10,
            AnyCc => 11,
            Undefined(n) => n & 15,
            Always => 15,
        }
    }
    /// The condition that holds exactly where this one does not (`any_zs` ↔ `all_zc`), for a
    /// condition on flags.
    pub fn negated(self) -> Option<BranchCond> {
        match self.bits() {
            v @ 0..=11 => Some(BranchCond::from_bits(v ^ 3)),
            _ => None,
        }
    }
    /// Name without the dot (`all_zs` …), `None` for always and undefined codes.
    pub fn name(self) -> Option<&'static str> {
        let b = self.bits() as usize;
        BranchCond::NAMES.get(b).copied()
    }
    pub fn from_name(s: &str) -> Option<BranchCond> {
        BranchCond::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| BranchCond::from_bits(i as u8))
    }
    /// Evaluates the condition over 16 lanes of flags (bit i = lane i).
    /// Undefined codes never branch.
    pub fn taken(self, z: u16, n: u16, c: u16) -> bool {
        let code = self.bits();
        if code == 15 {
            return true;
        }
        if code >= 12 {
            return false;
        }
        let flags = match code / 4 {
            0 => z,
            1 => n,
            _ => c,
        };
        let want_set = code % 2 == 0;
        let any = code % 4 >= 2;
        let lanes = if want_set { flags } else { !flags };
        if any { lanes != 0 } else { lanes == 0xffff }
    }
}

/// Defines an ALU unit's opcode enum from one list of (variant, code, Mesa mnemonic): the
/// enum, `ALL` (every defined opcode in code order), `bits`, `name`, `from_name`, and
/// `specialise`, which calls a function with the opcode as a constant per match arm (the
/// simulator's 16-lane loops are compiled once per opcode).
macro_rules! alu_opcodes {
    ($(#[$doc:meta])* $ty:ident, $n:literal, [$($v:ident = $code:literal $text:literal,)*]
     $(, $(#[$udoc:meta])* $undef:ident(u8))?) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $ty {
            $($v,)*
            $($(#[$udoc])* $undef(u8),)?
        }

        impl $ty {
            /// Every defined opcode, in code order.
            pub const ALL: [$ty; $n] = [$($ty::$v,)*];

            /// The opcode field's value.
            pub fn bits(self) -> u8 {
                match self {
                    $($ty::$v => $code,)*
                    $($ty::$undef(n) => n & 31,)?
                }
            }

            /// Mesa's mnemonic (`None` for an undefined code).
            pub fn mnemonic(self) -> Option<&'static str> {
                match self {
                    $($ty::$v => Some($text),)*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }

            /// The opcode with Mesa's mnemonic `s`.
            pub fn from_name(s: &str) -> Option<$ty> {
                $ty::ALL.into_iter().find(|op| op.mnemonic() == Some(s))
            }

            /// `f(self)`, with `self` a constant in each match arm, so that an inlined `f` is
            /// compiled once per opcode.
            #[inline(always)]
            pub fn specialise<R>(self, f: impl FnOnce($ty) -> R) -> R {
                match self {
                    $($ty::$v => f($ty::$v),)*
                    #[allow(unreachable_patterns)]
                    other => f(other),
                }
            }
        }
    };
}

alu_opcodes!(
    /// Add-unit opcode, bits 28:24; codes 9–11 and 25–29 are undefined.
    AddOp, 24, [
    Nop = 0 "nop",
    Fadd = 1 "fadd",
    Fsub = 2 "fsub",
    Fmin = 3 "fmin",
    Fmax = 4 "fmax",
    Fminabs = 5 "fminabs",
    Fmaxabs = 6 "fmaxabs",
    Ftoi = 7 "ftoi",
    Itof = 8 "itof",
    Add = 12 "add",
    Sub = 13 "sub",
    Shr = 14 "shr",
    Asr = 15 "asr",
    Ror = 16 "ror",
    Shl = 17 "shl",
    Min = 18 "min",
    Max = 19 "max",
    And = 20 "and",
    Or = 21 "or",
    Xor = 22 "xor",
    Not = 23 "not",
    Clz = 24 "clz",
    V8adds = 30 "v8adds",
    V8subs = 31 "v8subs",
],
    /// Codes 9–11 and 25–29, undefined.
    Undefined(u8));

impl AddOp {
    pub fn from_bits(v: u8) -> AddOp {
        let v = v & 31;
        AddOp::ALL
            .into_iter()
            .find(|op| op.bits() == v)
            .unwrap_or(AddOp::Undefined(v))
    }

    /// Mesa's mnemonic, `None` for undefined codes.
    pub fn name(self) -> Option<&'static str> {
        self.mnemonic()
    }

    /// Ops that read only one operand (the second mux is not used by the machine).
    pub fn is_unary(self) -> bool {
        matches!(self, AddOp::Ftoi | AddOp::Itof | AddOp::Not | AddOp::Clz)
    }
}

alu_opcodes!(
    /// Mul-unit opcode, bits 31:29 (all 8 defined).
    MulOp, 8, [
    Nop = 0 "nop",
    Fmul = 1 "fmul",
    Mul24 = 2 "mul24",
    V8muld = 3 "v8muld",
    V8min = 4 "v8min",
    V8max = 5 "v8max",
    V8adds = 6 "v8adds",
    V8subs = 7 "v8subs",
]);

impl MulOp {
    pub fn from_bits(v: u8) -> MulOp {
        MulOp::ALL[(v & 7) as usize]
    }

    pub fn name(self) -> &'static str {
        self.mnemonic().unwrap_or("nop")
    }
}

/// ALU input mux, 3 bits: r0–r5, file A, file B.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mux {
    R0 = 0,
    R1 = 1,
    R2 = 2,
    R3 = 3,
    R4 = 4,
    R5 = 5,
    A = 6,
    B = 7,
}

impl Mux {
    pub const ALL: [Mux; 8] = [
        Mux::R0,
        Mux::R1,
        Mux::R2,
        Mux::R3,
        Mux::R4,
        Mux::R5,
        Mux::A,
        Mux::B,
    ];
    pub fn from_bits(v: u8) -> Mux {
        Mux::ALL[(v & 7) as usize]
    }
    pub fn is_accumulator(self) -> bool {
        (self as u8) <= 5
    }
}

/// Unpack field, bits 59:57 (applies to file-A reads with pm = 0, to r4 reads with pm = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unpack {
    None = 0,
    U16a = 1,
    U16b = 2,
    U8dRep = 3,
    U8a = 4,
    U8b = 5,
    U8c = 6,
    U8d = 7,
}

impl Unpack {
    pub const ALL: [Unpack; 8] = [
        Unpack::None,
        Unpack::U16a,
        Unpack::U16b,
        Unpack::U8dRep,
        Unpack::U8a,
        Unpack::U8b,
        Unpack::U8c,
        Unpack::U8d,
    ];
    const NAMES: [&'static str; 8] = ["", "16a", "16b", "8d_rep", "8a", "8b", "8c", "8d"];
    pub fn from_bits(v: u8) -> Unpack {
        Unpack::ALL[(v & 7) as usize]
    }
    pub fn name(self) -> &'static str {
        Unpack::NAMES[self as usize]
    }
    pub fn from_name(s: &str) -> Option<Unpack> {
        Unpack::NAMES
            .iter()
            .position(|n| *n == s && !s.is_empty())
            .map(|i| Unpack::ALL[i])
    }
}

/// Mesa's names of the pm = 0 (file A) pack codes, index = code.
pub const PACK_A_NAMES: [&str; 16] = [
    "",
    ".16a",
    ".16b",
    ".8888",
    ".8a",
    ".8b",
    ".8c",
    ".8d",
    ".sat",
    ".16a.sat",
    ".16b.sat",
    ".8888.sat",
    ".8a.sat",
    ".8b.sat",
    ".8c.sat",
    ".8d.sat",
];

/// Mesa's names of the pm = 1 (mul) pack codes; `None` = no name (Mesa prints `???`).
pub const PACK_MUL_NAMES: [Option<&str>; 16] = [
    Some(""),
    None,
    None,
    Some(".8888"),
    Some(".8a"),
    Some(".8b"),
    Some(".8c"),
    Some(".8d"),
    None,
    None,
    None,
    None,
    None,
    None,
    None,
    None,
];

/// Load-immediate mode, bits 59:57 of a sig = 14 word (4 = semaphore, handled separately).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoadImmMode {
    /// 0: one 32-bit value for all lanes.
    Full32,
    /// 1: per-element signed 2-bit values.
    PerElemSigned,
    /// 3: per-element unsigned 2-bit values.
    PerElemUnsigned,
    /// 2, 5, 6, 7: reserved.
    Reserved(u8),
}

impl LoadImmMode {
    pub fn from_bits(v: u8) -> LoadImmMode {
        match v & 7 {
            0 => LoadImmMode::Full32,
            1 => LoadImmMode::PerElemSigned,
            3 => LoadImmMode::PerElemUnsigned,
            n => LoadImmMode::Reserved(n),
        }
    }
    pub fn bits(self) -> u8 {
        match self {
            LoadImmMode::Full32 => 0,
            LoadImmMode::PerElemSigned => 1,
            LoadImmMode::PerElemUnsigned => 3,
            LoadImmMode::Reserved(n) => n & 7,
        }
    }
    /// Value a lane receives (reference guide §"Load Immediate Instructions").
    #[inline]
    pub fn lane_value(self, imm: u32, lane: usize) -> u32 {
        match self {
            LoadImmMode::PerElemSigned | LoadImmMode::PerElemUnsigned => {
                let v = (((imm >> (16 + lane)) & 1) << 1) | ((imm >> lane) & 1);
                if self == LoadImmMode::PerElemSigned {
                    ((v << 30) as i32 >> 30) as u32
                } else {
                    v
                }
            }
            _ => imm,
        }
    }
}

/// Read address constants (raddr_a / raddr_b), reference guide Table 14.
pub mod raddr {
    pub const UNIFORM: u8 = 32;
    pub const VARYING: u8 = 35;
    pub const ELEMENT_QPU: u8 = 38;
    pub const NOP: u8 = 39;
    pub const XY_COORD: u8 = 41;
    pub const MS_REV: u8 = 42;
    pub const VPM: u8 = 48;
    pub const VPM_BUSY: u8 = 49;
    pub const VPM_WAIT: u8 = 50;
    pub const MUTEX: u8 = 51;
}

/// Write address constants (waddr_add / waddr_mul), reference guide Table 15.
pub mod waddr {
    pub const R0: u8 = 32;
    pub const R1: u8 = 33;
    pub const R2: u8 = 34;
    pub const R3: u8 = 35;
    pub const TMU_NOSWAP: u8 = 36;
    pub const R5: u8 = 37;
    pub const HOST_INT: u8 = 38;
    pub const NOP: u8 = 39;
    pub const UNIFORMS_ADDRESS: u8 = 40;
    pub const QUAD_XY: u8 = 41;
    pub const MS_FLAGS: u8 = 42;
    pub const TLB_STENCIL_SETUP: u8 = 43;
    pub const TLB_Z: u8 = 44;
    pub const TLB_COLOR_MS: u8 = 45;
    pub const TLB_COLOR_ALL: u8 = 46;
    pub const TLB_ALPHA_MASK: u8 = 47;
    pub const VPM: u8 = 48;
    pub const VPM_SETUP: u8 = 49;
    pub const VPM_ADDR: u8 = 50;
    pub const MUTEX_RELEASE: u8 = 51;
    pub const SFU_RECIP: u8 = 52;
    pub const SFU_RECIPSQRT: u8 = 53;
    pub const SFU_EXP: u8 = 54;
    pub const SFU_LOG: u8 = 55;
    pub const TMU0_S: u8 = 56;
    pub const TMU0_T: u8 = 57;
    pub const TMU0_R: u8 = 58;
    pub const TMU0_B: u8 = 59;
    pub const TMU1_S: u8 = 60;
    pub const TMU1_T: u8 = 61;
    pub const TMU1_R: u8 = 62;
    pub const TMU1_B: u8 = 63;

    pub fn is_sfu(w: u8) -> bool {
        (SFU_RECIP..=SFU_LOG).contains(&w)
    }
    pub fn is_tmu(w: u8) -> bool {
        w == TMU_NOSWAP || (TMU0_S..=TMU1_B).contains(&w)
    }
    pub fn is_tlb(w: u8) -> bool {
        (TLB_STENCIL_SETUP..=TLB_ALPHA_MASK).contains(&w)
    }
    /// True for addresses that go to the register file regardless of ws (0–31).
    pub fn is_regfile(w: u8) -> bool {
        w < 32
    }
}

/// Small-immediate value for raddr_b when sig = 13 (reference guide Table 16), as a 32-bit word.
/// `None` for 48–63 (mul-output rotation codes). See [`small_imm_value_add`] for their
/// value when an ALU reads them anyway.
pub fn small_imm_value(si: u8) -> Option<u32> {
    match si {
        0..=15 => Some(si as u32),
        16..=31 => Some((si as i32 - 32) as u32),
        32..=39 => Some(((1u32 << (si - 32)) as f32).to_bits()),
        40..=47 => Some((1.0f32 / (1u32 << (48 - si)) as f32).to_bits()),
        _ => None,
    }
}

/// Value an ALU reads through the B mux for any small-immediate code. Codes 48–63 (the
/// rotation codes) read as −16..−1 (py-videocore `test_rotate_as_simm`, verified on hardware).
pub fn small_imm_read_value(si: u8) -> u32 {
    match small_imm_value(si) {
        Some(v) => v,
        None => (si as i32 - 64) as u32,
    }
}

/// The small-immediate code (0–47) whose value is `v`, if one is: the inverse of
/// [`small_imm_value`], read off the value (an integer −16..15, or ±0-free powers of two from
/// 2⁻⁸ to 2⁷ as `f32` bits).
pub fn small_imm_code(v: u32) -> Option<u8> {
    let i = v as i32;
    if (0..=15).contains(&i) {
        return Some(i as u8);
    }
    if (-16..=-1).contains(&i) {
        return Some((i + 32) as u8);
    }
    // A positive power of two: no sign, no mantissa bits.
    if v & 0x807f_ffff != 0 {
        return None;
    }
    match ((v >> 23) & 0xff) as i32 - 127 {
        e @ 0..=7 => Some(32 + e as u8),
        e @ -8..=-1 => Some((48 + e) as u8),
        _ => None,
    }
}

#[cfg(test)]
mod small_imm_tests {
    use super::*;

    /// The inverse agrees with a search of the 48 codes, on every code's value and on values
    /// around them (neighbouring bit patterns, negatives, NaN, zero of either sign).
    #[test]
    fn small_imm_code_inverts_the_value_table() {
        let search = |v: u32| (0..48u8).find(|&c| small_imm_value(c) == Some(v));
        let mut probes: Vec<u32> = vec![0, 0x8000_0000, 0x7fc0_0000, u32::MAX, 16, 0xffff_ffef];
        for c in 0..48u8 {
            let v = small_imm_value(c).unwrap();
            assert_eq!(small_imm_code(v), Some(c));
            probes.extend([
                v.wrapping_add(1),
                v.wrapping_sub(1),
                v ^ 0x8000_0000,
                v << 1,
            ]);
        }
        for v in probes {
            assert_eq!(small_imm_code(v), search(v), "{v:#x}");
        }
    }
}
