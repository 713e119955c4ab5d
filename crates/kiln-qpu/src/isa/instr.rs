//! Typed instruction model with total `decode` and exact `encode` (reference guide
//! §"Instruction Encoding"; Mesa `vc4_qpu_defines.h` for the bit positions).
//!
//! `encode(decode(w)) == w` for every 64-bit word: fields that the hardware leaves unused or
//! undefined are kept (undefined opcodes, reserved load-immediate modes, unused branch bits,
//! the unused bits of a semaphore immediate).

use super::fields::*;

/// Destination and write-control fields shared by ALU, load-immediate and semaphore words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteFields {
    /// bit 56: pack mode (pm).
    pub pm: bool,
    /// bits 55:52.
    pub pack: u8,
    pub cond_add: Cond,
    pub cond_mul: Cond,
    /// bit 45: set flags.
    pub sf: bool,
    /// bit 44: write swap.
    pub ws: bool,
    /// bits 43:38 (0–63).
    pub waddr_add: u8,
    /// bits 37:32 (0–63).
    pub waddr_mul: u8,
}

impl WriteFields {
    /// No writes: both destinations `nop`, conditions never, no packing.
    pub const NONE: WriteFields = WriteFields {
        pm: false,
        pack: 0,
        cond_add: Cond::Never,
        cond_mul: Cond::Never,
        sf: false,
        ws: false,
        waddr_add: waddr::NOP,
        waddr_mul: waddr::NOP,
    };

    /// True when the add result goes to register file A (for addresses 0–31).
    pub fn add_to_a(&self) -> bool {
        !self.ws
    }
    /// True when the mul result goes to register file A (for addresses 0–31).
    pub fn mul_to_a(&self) -> bool {
        self.ws
    }

    fn encode(&self) -> u64 {
        ((self.pm as u64) << 56)
            | (((self.pack & 15) as u64) << 52)
            | ((self.cond_add as u64) << 49)
            | ((self.cond_mul as u64) << 46)
            | ((self.sf as u64) << 45)
            | ((self.ws as u64) << 44)
            | (((self.waddr_add & 63) as u64) << 38)
            | (((self.waddr_mul & 63) as u64) << 32)
    }

    fn decode(w: u64) -> WriteFields {
        WriteFields {
            pm: bit(w, 56),
            pack: field(w, 52, 4),
            cond_add: Cond::from_bits(field(w, 49, 3)),
            cond_mul: Cond::from_bits(field(w, 46, 3)),
            sf: bit(w, 45),
            ws: bit(w, 44),
            waddr_add: field(w, 38, 6),
            waddr_mul: field(w, 32, 6),
        }
    }
}

/// ALU instruction (sig 0–13): one add and one mul operation issued together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AluInstr {
    pub sig: Signal,
    /// bits 59:57.
    pub unpack: Unpack,
    pub w: WriteFields,
    pub op_mul: MulOp,
    pub op_add: AddOp,
    /// bits 23:18.
    pub raddr_a: u8,
    /// bits 17:12 (the small immediate when sig = 13).
    pub raddr_b: u8,
    pub add_a: Mux,
    pub add_b: Mux,
    pub mul_a: Mux,
    pub mul_b: Mux,
}

/// Load immediate (sig 14, modes 0–3 and 5–7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LoadImm {
    pub mode: LoadImmMode,
    pub w: WriteFields,
    pub imm: u32,
}

/// Semaphore (sig 14, mode 4): increment (release) or decrement (acquire) one of 16 counters.
/// The write fields behave as in a load immediate of the raw 32-bit field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Semaphore {
    pub w: WriteFields,
    /// bit 4 of the immediate.
    pub acquire: bool,
    /// bits 3:0.
    pub number: u8,
    /// bits 31:5 of the immediate (unused by the machine), kept for the round trip.
    pub unused: u32,
}

impl Semaphore {
    /// The raw 32-bit immediate field.
    pub fn imm(&self) -> u32 {
        (self.unused << 5) | ((self.acquire as u32) << 4) | (self.number as u32 & 15)
    }
}

/// Branch (sig 15).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Branch {
    /// bits 59:56 (unused by the machine), kept for the round trip.
    pub unused: u8,
    pub cond: BranchCond,
    /// bit 51: relative to the address after the branch's delay slots (PC + 4 instructions).
    pub rel: bool,
    /// bit 50: add `ra[raddr_a]` to the target.
    pub reg: bool,
    /// bits 49:45.
    pub raddr_a: u8,
    /// bit 44: swap link destinations.
    pub ws: bool,
    pub waddr_add: u8,
    pub waddr_mul: u8,
    /// bits 31:0, signed byte offset.
    pub imm: i32,
}

/// One QPU instruction, any form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Instr {
    Alu(AluInstr),
    LoadImm(LoadImm),
    Semaphore(Semaphore),
    Branch(Branch),
}

#[inline]
fn field(w: u64, lo: u32, width: u32) -> u8 {
    ((w >> lo) & ((1u64 << width) - 1)) as u8
}
#[inline]
fn bit(w: u64, b: u32) -> bool {
    (w >> b) & 1 != 0
}

/// Decodes any 64-bit word (total).
pub fn decode(w: u64) -> Instr {
    let sig = field(w, 60, 4);
    match sig {
        15 => Instr::Branch(Branch {
            unused: field(w, 56, 4),
            cond: BranchCond::from_bits(field(w, 52, 4)),
            rel: bit(w, 51),
            reg: bit(w, 50),
            raddr_a: field(w, 45, 5),
            ws: bit(w, 44),
            waddr_add: field(w, 38, 6),
            waddr_mul: field(w, 32, 6),
            imm: w as u32 as i32,
        }),
        14 => {
            let mode = field(w, 57, 3);
            let wf = WriteFields::decode(w);
            let imm = w as u32;
            if mode == 4 {
                Instr::Semaphore(Semaphore {
                    w: wf,
                    acquire: imm & 16 != 0,
                    number: (imm & 15) as u8,
                    unused: imm >> 5,
                })
            } else {
                Instr::LoadImm(LoadImm {
                    mode: LoadImmMode::from_bits(mode),
                    w: wf,
                    imm,
                })
            }
        }
        s => Instr::Alu(AluInstr {
            sig: Signal::from_bits(s).expect("sig < 14"),
            unpack: Unpack::from_bits(field(w, 57, 3)),
            w: WriteFields::decode(w),
            op_mul: MulOp::from_bits(field(w, 29, 3)),
            op_add: AddOp::from_bits(field(w, 24, 5)),
            raddr_a: field(w, 18, 6),
            raddr_b: field(w, 12, 6),
            add_a: Mux::from_bits(field(w, 9, 3)),
            add_b: Mux::from_bits(field(w, 6, 3)),
            mul_a: Mux::from_bits(field(w, 3, 3)),
            mul_b: Mux::from_bits(field(w, 0, 3)),
        }),
    }
}

/// Encodes an instruction. Out-of-range numeric fields are masked to their width.
pub fn encode(i: &Instr) -> u64 {
    match i {
        Instr::Alu(a) => {
            ((a.sig as u64) << 60)
                | ((a.unpack as u64) << 57)
                | a.w.encode()
                | ((a.op_mul as u64) << 29)
                | ((a.op_add.bits() as u64) << 24)
                | (((a.raddr_a & 63) as u64) << 18)
                | (((a.raddr_b & 63) as u64) << 12)
                | ((a.add_a as u64) << 9)
                | ((a.add_b as u64) << 6)
                | ((a.mul_a as u64) << 3)
                | (a.mul_b as u64)
        }
        Instr::LoadImm(l) => {
            (14u64 << 60) | ((l.mode.bits() as u64) << 57) | l.w.encode() | l.imm as u64
        }
        Instr::Semaphore(s) => (14u64 << 60) | (4u64 << 57) | s.w.encode() | s.imm() as u64,
        Instr::Branch(b) => {
            (15u64 << 60)
                | (((b.unused & 15) as u64) << 56)
                | ((b.cond.bits() as u64) << 52)
                | ((b.rel as u64) << 51)
                | ((b.reg as u64) << 50)
                | (((b.raddr_a & 31) as u64) << 45)
                | ((b.ws as u64) << 44)
                | (((b.waddr_add & 63) as u64) << 38)
                | (((b.waddr_mul & 63) as u64) << 32)
                | (b.imm as u32 as u64)
        }
    }
}

impl Instr {
    pub fn decode(w: u64) -> Instr {
        decode(w)
    }
    pub fn encode(&self) -> u64 {
        encode(self)
    }
    /// Mesa's canonical NOP, `0x100009e7009e7000`.
    pub fn nop() -> Instr {
        Instr::Alu(AluInstr::nop())
    }
    /// Whether this is [`Instr::nop`]: `*self == Instr::nop()`, the operations asked first
    /// (what sets most instructions apart).
    pub fn is_nop(&self) -> bool {
        matches!(self, Instr::Alu(a) if a.op_add == AddOp::Nop
            && a.op_mul == MulOp::Nop
            && *a == AluInstr::nop())
    }
    /// The write fields of ALU, load-immediate and semaphore forms.
    pub fn write_fields(&self) -> Option<&WriteFields> {
        match self {
            Instr::Alu(a) => Some(&a.w),
            Instr::LoadImm(l) => Some(&l.w),
            Instr::Semaphore(s) => Some(&s.w),
            Instr::Branch(_) => None,
        }
    }
    /// The ALU signal, if this is an ALU-form instruction.
    pub fn signal(&self) -> Option<Signal> {
        match self {
            Instr::Alu(a) => Some(a.sig),
            _ => None,
        }
    }
}

/// Builder for ALU instructions, in the style of Mesa's `qpu_a_*`/`qpu_m_*` helpers: start from
/// a NOP, set one operation per unit, then a condition, flags, signal or pack.
impl AluInstr {
    /// `nop ; nop` reading nothing, sig none: Mesa's `0x100009e7009e7000`.
    pub fn nop() -> AluInstr {
        AluInstr {
            sig: Signal::None,
            unpack: Unpack::None,
            w: WriteFields::NONE,
            op_mul: MulOp::Nop,
            op_add: AddOp::Nop,
            raddr_a: raddr::NOP,
            raddr_b: raddr::NOP,
            add_a: Mux::R0,
            add_b: Mux::R0,
            mul_a: Mux::R0,
            mul_b: Mux::R0,
        }
    }
    /// Sets the add operation writing `waddr` (condition becomes `always`).
    pub fn add(mut self, op: AddOp, waddr: u8, a: Mux, b: Mux) -> Self {
        self.op_add = op;
        self.w.waddr_add = waddr;
        self.w.cond_add = Cond::Always;
        self.add_a = a;
        self.add_b = b;
        self
    }
    /// Sets the mul operation writing `waddr` (condition becomes `always`).
    pub fn mul(mut self, op: MulOp, waddr: u8, a: Mux, b: Mux) -> Self {
        self.op_mul = op;
        self.w.waddr_mul = waddr;
        self.w.cond_mul = Cond::Always;
        self.mul_a = a;
        self.mul_b = b;
        self
    }
    pub fn raddr_a(mut self, r: u8) -> Self {
        self.raddr_a = r;
        self
    }
    pub fn raddr_b(mut self, r: u8) -> Self {
        self.raddr_b = r;
        self
    }
    /// Uses small immediate `si` (sets sig 13 and raddr_b).
    pub fn small_imm(mut self, si: u8) -> Self {
        self.sig = Signal::SmallImm;
        self.raddr_b = si;
        self
    }
    pub fn cond_add(mut self, c: Cond) -> Self {
        self.w.cond_add = c;
        self
    }
    pub fn cond_mul(mut self, c: Cond) -> Self {
        self.w.cond_mul = c;
        self
    }
    pub fn sf(mut self) -> Self {
        self.w.sf = true;
        self
    }
    pub fn ws(mut self) -> Self {
        self.w.ws = true;
        self
    }
    pub fn sig(mut self, s: Signal) -> Self {
        self.sig = s;
        self
    }
    pub fn pack(mut self, pm: bool, pack: u8) -> Self {
        self.w.pm = pm;
        self.w.pack = pack;
        self
    }
    pub fn unpack(mut self, u: Unpack) -> Self {
        self.unpack = u;
        self
    }
    pub fn build(self) -> Instr {
        Instr::Alu(self)
    }
    pub fn encode(self) -> u64 {
        encode(&Instr::Alu(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn mesa_nop() {
        assert_eq!(AluInstr::nop().encode(), 0x100009e7009e7000);
        assert_eq!(decode(0x100009e7009e7000), Instr::nop());
    }

    #[test]
    fn field_positions() {
        // `mov r0, uni` from GPU_FFT: op_add or (21), waddr_add 32, raddr_a 32, muxes A, A.
        let i = AluInstr::nop()
            .add(AddOp::Or, waddr::R0, Mux::A, Mux::A)
            .raddr_a(raddr::UNIFORM);
        assert_eq!(i.encode(), 0x1002082715827d80);
    }

    #[test]
    fn every_form_roundtrips() {
        for w in [
            0xe0020827_12345678u64,
            0xe8020827_00000011,
            0xf0f8_09e7_ffff_ffe0,
            0xffff_ffff_ffff_ffff,
            0,
            0x1d00_0000_0000_0000,
        ] {
            assert_eq!(encode(&decode(w)), w, "{w:016x}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn decode_encode_identity(w in any::<u64>()) {
            prop_assert_eq!(encode(&decode(w)), w);
        }
        #[test]
        fn decode_encode_identity_by_sig(sig in 0u64..16, low in any::<u64>()) {
            let w = (sig << 60) | (low & ((1u64 << 60) - 1));
            prop_assert_eq!(encode(&decode(w)), w);
        }
        /// `is_nop` is the comparison with `Instr::nop()`, on any word and on the nop with one
        /// field changed (what the cheap first tests let through).
        #[test]
        fn is_nop_is_equality_with_the_nop(w in any::<u64>(), bit in 0u32..64) {
            let i = decode(w);
            prop_assert_eq!(i.is_nop(), i == Instr::nop());
            let near = decode(0x100009e7009e7000 ^ (1u64 << bit));
            prop_assert_eq!(near.is_nop(), near == Instr::nop());
            prop_assert!(Instr::nop().is_nop());
        }
    }
}
