//! Instruction constructors from register descriptors, after Mesa's `vc4_qpu.c`
//! (`qpu_a_*`, `qpu_m_*`, `qpu_load_imm_*`, `qpu_branch`, `qpu_merge_inst`, `qpu_set_sig`,
//! `qpu_set_cond_*`): a [`Reg`] knows which mux and address it needs, `qpu_a`/`qpu_m` build one
//! operation, [`merge`] pairs an add and a mul operation into one instruction, and the setters
//! of [`AluInstr`] set conditions, flags, signals and packs.

use super::fields::*;
use super::instr::*;

/// A register as an operand or destination (Mesa `struct qpu_reg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    /// Accumulator r0–r5 (r4 is read-only).
    Acc(u8),
    /// Register-file A register 0–31.
    A(u8),
    /// Register-file B register 0–31.
    B(u8),
    /// An I/O read address 32–63 through file A (`raddr::UNIFORM`, `raddr::VPM`, …).
    ReadA(u8),
    /// An I/O read address 32–63 through file B.
    ReadB(u8),
    /// A write address 32–63 that means the same in both files (`waddr::TMU0_S`, …).
    Io(u8),
    /// An I/O write address seen from file A (`vr_setup`, `quad_x`, r5 per quad).
    IoA(u8),
    /// An I/O write address seen from file B (`vw_setup`, `quad_y`, r5 replicated).
    IoB(u8),
    /// A small immediate code 0–63 (read through the B mux; sets sig 13).
    SmallImm(u8),
    /// No destination (`waddr 39`).
    Nop,
}

/// Why operands cannot share one instruction.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("two different file-A read addresses ({0} and {1})")]
    RaddrA(u8, u8),
    #[error("two different file-B read addresses or small immediates ({0} and {1})")]
    RaddrB(u8, u8),
    #[error("both operations write the same register file")]
    SameFile,
    #[error("{0:?} cannot be a destination")]
    BadDst(Reg),
    #[error("{0:?} cannot be a source")]
    BadSrc(Reg),
    #[error("the instructions conflict in field {0}")]
    Conflict(&'static str),
}

#[derive(Default)]
struct Reads {
    a: Option<u8>,
    b: Option<u8>,
    small: bool,
}

impl Reads {
    fn take(&mut self, r: Reg) -> Result<Mux, BuildError> {
        let set = |slot: &mut Option<u8>, v: u8, err: fn(u8, u8) -> BuildError| match slot {
            Some(x) if *x != v => Err(err(*x, v)),
            _ => {
                *slot = Some(v);
                Ok(())
            }
        };
        Ok(match r {
            Reg::Acc(n) if n <= 5 => Mux::ALL[n as usize],
            Reg::A(n) if n < 32 => {
                set(&mut self.a, n, BuildError::RaddrA)?;
                Mux::A
            }
            Reg::ReadA(n) if (32..64).contains(&n) => {
                set(&mut self.a, n, BuildError::RaddrA)?;
                Mux::A
            }
            Reg::B(n) | Reg::ReadB(n) if n < 64 && !self.small => {
                set(&mut self.b, n, BuildError::RaddrB)?;
                Mux::B
            }
            Reg::SmallImm(si) if si < 64 && (self.small || self.b.is_none()) => {
                set(&mut self.b, si, BuildError::RaddrB)?;
                self.small = true;
                Mux::B
            }
            Reg::B(n) | Reg::ReadB(n) => return Err(BuildError::RaddrB(self.b.unwrap_or(0), n)),
            Reg::SmallImm(si) => return Err(BuildError::RaddrB(self.b.unwrap_or(0), si)),
            r => return Err(BuildError::BadSrc(r)),
        })
    }
}

/// Destination address and the side it must be on (Some(true) = file A).
fn dst_addr(d: Reg) -> Result<(u8, Option<bool>), BuildError> {
    Ok(match d {
        Reg::Acc(n) if n <= 3 => (waddr::R0 + n, None),
        Reg::Acc(5) => (waddr::R5, None),
        Reg::A(n) if n < 32 => (n, Some(true)),
        Reg::B(n) if n < 32 => (n, Some(false)),
        Reg::Io(w) if (32..64).contains(&w) => (w, None),
        Reg::IoA(w) if (32..64).contains(&w) => (w, Some(true)),
        Reg::IoB(w) if (32..64).contains(&w) => (w, Some(false)),
        Reg::Nop => (waddr::NOP, None),
        r => return Err(BuildError::BadDst(r)),
    })
}

fn finish(a: &mut AluInstr, reads: Reads) {
    a.raddr_a = reads.a.unwrap_or(raddr::NOP);
    a.raddr_b = reads.b.unwrap_or(raddr::NOP);
    if reads.small {
        a.sig = Signal::SmallImm;
    }
}

/// One add-unit operation `op dst, src_a, src_b` (Mesa `qpu_a_*`); unary ops pass the same
/// source twice.
pub fn qpu_a(op: AddOp, dst: Reg, src_a: Reg, src_b: Reg) -> Result<AluInstr, BuildError> {
    let (w, file) = dst_addr(dst)?;
    let mut reads = Reads::default();
    let ma = reads.take(src_a)?;
    let mb = reads.take(src_b)?;
    let mut a = AluInstr::nop().add(op, w, ma, mb);
    a.w.ws = file == Some(false);
    finish(&mut a, reads);
    Ok(a)
}

/// One mul-unit operation `op dst, src_a, src_b` (Mesa `qpu_m_*`).
pub fn qpu_m(op: MulOp, dst: Reg, src_a: Reg, src_b: Reg) -> Result<AluInstr, BuildError> {
    let (w, file) = dst_addr(dst)?;
    let mut reads = Reads::default();
    let ma = reads.take(src_a)?;
    let mb = reads.take(src_b)?;
    let mut a = AluInstr::nop().mul(op, w, ma, mb);
    a.w.ws = file == Some(true);
    finish(&mut a, reads);
    Ok(a)
}

/// `mov dst, src` on the add unit (`or src, src`).
pub fn mov(dst: Reg, src: Reg) -> Result<AluInstr, BuildError> {
    qpu_a(AddOp::Or, dst, src, src)
}

/// `load_imm dst, imm` (Mesa `qpu_load_imm_ui`), writing from the add side.
pub fn load_imm(dst: Reg, imm: u32) -> Result<Instr, BuildError> {
    let (w, file) = dst_addr(dst)?;
    Ok(Instr::LoadImm(LoadImm {
        mode: LoadImmMode::Full32,
        w: WriteFields {
            waddr_add: w,
            cond_add: Cond::Always,
            ws: file == Some(false),
            ..WriteFields::NONE
        },
        imm,
    }))
}

/// A branch by `imm` bytes (relative: from the branch address + 32) (Mesa `qpu_branch`).
pub fn branch(cond: BranchCond, rel: bool, imm: i32) -> Instr {
    Instr::Branch(Branch {
        unused: 0,
        cond,
        rel,
        reg: false,
        raddr_a: 0,
        ws: false,
        waddr_add: waddr::NOP,
        waddr_mul: waddr::NOP,
        imm,
    })
}

/// Semaphore acquire (`true`) or release of counter `n`.
pub fn semaphore(acquire: bool, n: u8) -> Instr {
    Instr::Semaphore(Semaphore {
        w: WriteFields::NONE,
        acquire,
        number: n & 15,
        unused: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesa_words() {
        // mov r0, uni ; nop — GPU_FFT's first instruction
        let m = mov(Reg::Acc(0), Reg::ReadA(raddr::UNIFORM)).unwrap();
        assert_eq!(m.encode(), 0x1002082715827d80);
        // sig_small_imm add r1, r0, 4
        let a = qpu_a(AddOp::Add, Reg::Acc(1), Reg::Acc(0), Reg::SmallImm(4)).unwrap();
        assert_eq!(a.encode(), 0xd00208670c9c41c0);
        // load_imm rb8, nop, 0x14
        assert_eq!(
            encode(&load_imm(Reg::B(8), 0x14).unwrap()),
            0xe002122700000014
        );
    }

    #[test]
    fn builders_refuse_what_cannot_be_encoded() {
        assert!(qpu_a(AddOp::Add, Reg::Acc(0), Reg::A(1), Reg::A(2)).is_err());
        assert!(qpu_a(AddOp::Add, Reg::Acc(4), Reg::Acc(0), Reg::Acc(0)).is_err());
        let c = mov(Reg::Io(waddr::TMU0_S), Reg::Acc(0))
            .unwrap()
            .cond_add(Cond::Zs)
            .sig(Signal::LoadTmu0);
        assert_eq!(c.w.cond_add, Cond::Zs);
        assert_eq!(c.sig, Signal::LoadTmu0);
    }
}
