//! What a program is made of: instructions, operations (the non-`nop` halves of ALU
//! instructions, load immediates, semaphores, branches), pure `nop`s and paired instructions
//! (an add and a mul operation in one) — the figures that compare two compilers' code.

use super::fields::{AddOp, MulOp, Signal};
use super::instr::{Instr, decode};
use std::ops::AddAssign;

/// See the module comment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    pub instructions: u64,
    pub operations: u64,
    /// Instructions that do nothing: no operation and no signal but a small immediate.
    pub nops: u64,
    /// ALU instructions with both an add and a mul operation.
    pub paired: u64,
}

impl Census {
    /// The census of one program.
    pub fn of(words: &[u64]) -> Census {
        let mut c = Census {
            instructions: words.len() as u64,
            ..Census::default()
        };
        for &w in words {
            match decode(w) {
                Instr::Alu(a) => {
                    let ops = (a.op_add != AddOp::Nop) as u64 + (a.op_mul != MulOp::Nop) as u64;
                    c.operations += ops;
                    c.paired += (ops == 2) as u64;
                    c.nops += (ops == 0 && matches!(a.sig, Signal::None | Signal::SmallImm)) as u64;
                }
                Instr::LoadImm(_) | Instr::Semaphore(_) | Instr::Branch(_) => c.operations += 1,
            }
        }
        c
    }
}

impl AddAssign for Census {
    fn add_assign(&mut self, o: Census) {
        self.instructions += o.instructions;
        self.operations += o.operations;
        self.nops += o.nops;
        self.paired += o.paired;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::assemble;

    #[test]
    fn counts_operations_nops_and_pairs() {
        let words = assemble(
            "fadd r0, r1, r2 ; fmul r3, r1, r2\n\
             nop\n\
             sig_small_imm nop nop, r0, r0 ; nop nop, r0, r0\n\
             sig_thread_switch nop nop, r0, r0 ; nop nop, r0, r0\n\
             mov r1, r0 ; nop nop, r0, r0\n\
             load_imm r2, nop, 0x3f800000\n\
             branch.all_zc 0\n",
        )
        .unwrap();
        let c = Census::of(&words);
        assert_eq!(
            c,
            Census {
                instructions: 7,
                operations: 5,
                nops: 2,
                paired: 1
            }
        );
    }
}
