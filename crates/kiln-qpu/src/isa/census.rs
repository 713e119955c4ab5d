//! What a program is made of: instructions, operations (the non-`nop` halves of ALU
//! instructions, load immediates, semaphores, branches), pure `nop`s and paired instructions
//! (an add and a mul operation in one) — the figures that compare two compilers' code.

use super::effects;
use super::fields::{AddOp, MulOp, Signal, waddr};
use super::instr::{Instr, decode};
use super::latency;
use std::ops::AddAssign;

/// See the module comment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Census {
    pub instructions: u64,
    pub operations: u64,
    /// Instructions that do nothing: no operation and no signal but a small immediate.
    pub nops: u64,
    /// ALU instructions with both an add and a mul operation.
    pub paired: u64,
    /// Operations by kind: the add unit's by opcode field (`mov` is an `or`), the mul unit's by
    /// opcode field, then load immediates, semaphores and branches ([`Census::kinds`]).
    pub by_kind: [u64; KINDS],
}

/// Kinds of operation a census counts: 32 add-unit opcode codes, 8 mul-unit ones, `load_imm`,
/// `semaphore`, `branch`.
pub const KINDS: usize = 32 + 8 + 3;

impl Default for Census {
    fn default() -> Census {
        Census {
            instructions: 0,
            operations: 0,
            nops: 0,
            paired: 0,
            by_kind: [0; KINDS],
        }
    }
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
                    if a.op_add != AddOp::Nop {
                        c.by_kind[a.op_add.bits() as usize] += 1;
                    }
                    if a.op_mul != MulOp::Nop {
                        c.by_kind[32 + a.op_mul.bits() as usize] += 1;
                    }
                }
                other => {
                    c.operations += 1;
                    c.by_kind[match other {
                        Instr::LoadImm(_) => 40,
                        Instr::Semaphore(_) => 41,
                        _ => 42,
                    }] += 1;
                }
            }
        }
        c
    }
}

impl Census {
    /// The name of operation kind `k` (Mesa's mnemonic; `add?N` for an undefined add code).
    pub fn kind_name(k: usize) -> String {
        match k {
            0..32 => AddOp::from_bits(k as u8)
                .name()
                .map_or(format!("add?{k}"), |n| n.to_string()),
            32..40 => format!("{} (mul)", MulOp::from_bits((k - 32) as u8).name()),
            40 => "load_imm".into(),
            41 => "semaphore".into(),
            _ => "branch".into(),
        }
    }
}

/// Cycles a program takes by Mesa's estimate (`qpu_schedule_instructions` in
/// `vc4_qpu_schedule.c`, as shader-db prints it): one per instruction, and a TMU result load
/// waits until [`latency::TMU_ESTIMATE`] cycles after its request (`tmu0_s`, `tmu1_s`) when
/// both are in one block; each block counted once (branch targets and the instruction after a
/// branch's delay slots start blocks, and a loop is not multiplied).
pub fn estimated_cycles(program: &[Instr]) -> u64 {
    let starts = super::validate::block_starts(program);
    let mut cycles = 0u64;
    let mut time = 0u64;
    // Per TMU, the times of the requests not yet loaded, in order.
    let mut requests: [std::collections::VecDeque<u64>; 2] = Default::default();
    for (i, ins) in program.iter().enumerate() {
        if starts[i] {
            cycles += time;
            time = 0;
            requests.iter_mut().for_each(|q| q.clear());
        }
        if let Some(t @ (Signal::LoadTmu0 | Signal::LoadTmu1)) = ins.signal() {
            let unit = (t == Signal::LoadTmu1) as usize;
            if let Some(r) = requests[unit].pop_front() {
                time = time.max(r + latency::TMU_ESTIMATE as u64);
            }
        }
        for w in effects::writes(ins) {
            if w.waddr == waddr::TMU0_S || w.waddr == waddr::TMU1_S {
                requests[(w.waddr == waddr::TMU1_S) as usize].push_back(time);
            }
        }
        time += 1;
    }
    cycles + time
}

impl AddAssign for Census {
    fn add_assign(&mut self, o: Census) {
        self.instructions += o.instructions;
        self.operations += o.operations;
        self.nops += o.nops;
        self.paired += o.paired;
        for (a, b) in self.by_kind.iter_mut().zip(o.by_kind) {
            *a += b;
        }
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
            (c.instructions, c.operations, c.nops, c.paired),
            (7, 5, 2, 1)
        );
        // fadd, fmul, mov (an `or`), load_imm, branch: one each, and they are the operations.
        let kind = |name: &str| (0..KINDS).find(|&k| Census::kind_name(k) == name).unwrap();
        for name in ["fadd", "fmul (mul)", "or", "load_imm", "branch"] {
            assert_eq!(c.by_kind[kind(name)], 1, "{name}");
        }
        assert_eq!(c.by_kind.iter().sum::<u64>(), c.operations);
    }

    #[test]
    fn a_texture_result_waits_for_its_request_in_its_block() {
        let program = |text: &str| -> Vec<Instr> {
            assemble(text).unwrap().into_iter().map(decode).collect()
        };
        // Request, two instructions, load: the load waits until 100 cycles after the request.
        let near = program(
            "mov tmu0_s, r0 ; nop nop, r0, r0\n\
             nop\n\
             nop\n\
             load_tmu0 nop nop, r0, r0 ; nop nop, r0, r0\n",
        );
        assert_eq!(estimated_cycles(&near), 101);
        // A branch between them ends the block: no wait is counted.
        let apart = program(
            "mov tmu0_s, r0 ; nop nop, r0, r0\n\
             branch 0\n\
             nop\n\
             nop\n\
             nop\n\
             load_tmu0 nop nop, r0, r0 ; nop nop, r0, r0\n",
        );
        assert_eq!(estimated_cycles(&apart), 6);
    }
}
