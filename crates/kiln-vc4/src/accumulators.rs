//! Accumulator values of a scheduled region, renamed after scheduling. The register allocator
//! shares r0–r3 among many short values, and each reuse is a write-after-read or
//! write-after-write edge that keeps independent work apart; the renaming pass before
//! scheduling ([`crate::rename`]) removes those it can in the original order only. Here, within
//! a region, each whole write of r0–r3 starts a value (a conditional or packed write continues
//! the value it partly keeps); the DAG orders a value's own accesses only, and once the region
//! is scheduled each value takes an accumulator free over its scheduled life — interval
//! colouring in order of definition, as a linear-scan allocator assigns. Values read before
//! the region's first write of their register, or live after the region, keep their
//! registers (and their accesses the register's ordering). Where the schedule needs more
//! accumulators than there are, [`Values::assign`] says so and the caller schedules the region
//! with the registers as allocated.

use crate::rename::{Refs, Regs};
use kiln_qpu::isa::effects::Resource;
use kiln_qpu::isa::{Instr, Mux, waddr};
use kiln_sched::Access;

/// No value.
const NONE: u32 = u32::MAX;

/// The liveness bit of r0 ([`crate::rename::write_bit`]'s numbering: r0–r3 are 64–67).
const R0_BIT: u32 = 64;

/// The accumulator values of a region's instructions, in their original order.
pub(crate) struct Values {
    /// Per instruction, per accumulator r0–r3: the value it reads, and the value it writes.
    read: Vec<[u32; 4]>,
    write: Vec<[u32; 4]>,
    /// Per value: its register as allocated, and whether it is live into or out of the region
    /// (then it keeps that register).
    reg: Vec<u8>,
    live_in: Vec<bool>,
    live_out: Vec<bool>,
}

impl Values {
    /// The values of instructions that read and write what `refs` says
    /// ([`crate::rename::refs`]), after which the registers `live_after` are live.
    pub(crate) fn new(refs: impl ExactSizeIterator<Item = Refs>, live_after: Regs) -> Values {
        let mut v = Values {
            read: Vec::with_capacity(refs.len()),
            write: Vec::with_capacity(refs.len()),
            reg: Vec::new(),
            live_in: Vec::new(),
            live_out: Vec::new(),
        };
        let mut current = [NONE; 4];
        for r in refs {
            let (mut read, mut write) = ([NONE; 4], [NONE; 4]);
            for k in 0..4 {
                let bit = 1u128 << (R0_BIT + k as u32);
                if r.reads & bit != 0 {
                    if current[k] == NONE {
                        current[k] = v.value(k as u8, true);
                    }
                    read[k] = current[k];
                }
                if r.whole & bit != 0 {
                    current[k] = v.value(k as u8, false);
                    write[k] = current[k];
                } else if r.part & bit != 0 {
                    write[k] = current[k];
                }
            }
            v.read.push(read);
            v.write.push(write);
        }
        for (k, &value) in current.iter().enumerate() {
            if live_after & (1 << (R0_BIT + k as u32)) != 0 {
                // A register live through the region untouched is a value of its own.
                let value = if value == NONE {
                    v.value(k as u8, true)
                } else {
                    value
                };
                v.live_out[value as usize] = true;
            }
        }
        v
    }

    fn value(&mut self, reg: u8, live_in: bool) -> u32 {
        self.reg.push(reg);
        self.live_in.push(live_in);
        self.live_out.push(false);
        self.reg.len() as u32 - 1
    }

    fn pinned(&self, v: u32) -> bool {
        self.live_in[v as usize] || self.live_out[v as usize]
    }

    /// Whether any value may take another register.
    pub(crate) fn any_free(&self) -> bool {
        (0..self.reg.len() as u32).any(|v| !self.pinned(v))
    }

    /// The DAG resources past [`Resource::COUNT`] the values of [`Values::version`] use.
    pub(crate) fn resources(&self) -> usize {
        Resource::COUNT + self.reg.len()
    }

    /// `accesses` (instruction j's are `accesses[at[j]..at[j + 1]]`, as the scheduler builds
    /// them) with each access of r0–r3 made an access of its value: a value that keeps its
    /// register, the register's resource; any other, a resource of its own.
    pub(crate) fn version(&self, accesses: &mut [Access], at: &[usize]) {
        let resource = |v: u32, k: usize| {
            if self.pinned(v) {
                Resource::Acc(k as u8).index() as u32
            } else {
                (Resource::COUNT as u32) + v
            }
        };
        let acc = |r: u32| {
            (Resource::Acc(0).index() as u32..=Resource::Acc(3).index() as u32)
                .contains(&r)
                .then(|| (r - Resource::Acc(0).index() as u32) as usize)
        };
        for (j, w) in at.windows(2).enumerate() {
            for a in &mut accesses[w[0]..w[1]] {
                match a {
                    Access::Read { resource: r, .. } => {
                        if let Some(k) = acc(*r)
                            && self.read[j][k] != NONE
                        {
                            *r = resource(self.read[j][k], k);
                        }
                    }
                    Access::Write { resource: r, .. } => {
                        if let Some(k) = acc(*r)
                            && self.write[j][k] != NONE
                        {
                            *r = resource(self.write[j][k], k);
                        }
                    }
                }
            }
        }
    }

    /// Instruction `ins` (instruction `n` of the region) with its writes of values that may
    /// move sent to accumulators that `taken` (a mask of r0–r3) does not name, where one
    /// was named: for the test of whether it pairs with an instruction writing those — two
    /// values written in one cycle get different registers anyway. `None` where nothing
    /// changes.
    // (Inlined into `schedule::PairRule::pairs`, which the list scheduler's loop asks.)
    #[inline(always)]
    pub(crate) fn apart(&self, ins: &Instr, n: usize, taken: u8) -> Option<Instr> {
        let Instr::Alu(mut a) = *ins else {
            return None;
        };
        let mut changed = false;
        let mut used = taken | Self::written(ins);
        for w in [&mut a.w.waddr_add, &mut a.w.waddr_mul] {
            if !(waddr::R0..=waddr::R3).contains(w) {
                continue;
            }
            let k = *w - waddr::R0;
            let value = self.write[n][k as usize];
            if taken & (1 << k) == 0 || value == NONE || self.pinned(value) {
                continue;
            }
            let free = (0..4u8).find(|&x| used & (1 << x) == 0)?;
            used |= 1 << free;
            *w = waddr::R0 + free;
            changed = true;
        }
        changed.then_some(Instr::Alu(a))
    }

    /// The accumulators `ins` writes, as a mask of r0–r3.
    pub(crate) fn written(ins: &Instr) -> u8 {
        let mut mask = 0;
        if let Instr::Alu(a) = ins {
            for w in [a.w.waddr_add, a.w.waddr_mul] {
                if (waddr::R0..=waddr::R3).contains(&w) {
                    mask |= 1 << (w - waddr::R0);
                }
            }
        }
        mask
    }

    /// The values as the list scheduler counts them ([`kiln_sched::Registers`]): four
    /// accumulators, the values live into the region live at its start, and every instruction
    /// that writes a value among its users — so a value nothing reads is never counted live
    /// (the assignment still gives it a register in its cycle, or refuses the schedule).
    pub(crate) fn registers(&self) -> kiln_sched::Registers {
        let mut regs = kiln_sched::Registers {
            limit: 4,
            live: self.live_in.iter().filter(|&&l| l).count() as u32,
            starts: Vec::with_capacity(self.read.len()),
            use_at: Vec::with_capacity(self.read.len() + 1),
            uses: Vec::new(),
            users: vec![0; self.reg.len()],
        };
        let mut started = vec![false; self.reg.len()];
        for (read, write) in self.read.iter().zip(&self.write) {
            regs.use_at.push(regs.uses.len() as u32);
            let mut starts = 0;
            let at = regs.uses.len();
            for k in 0..4 {
                let w = write[k];
                if w != NONE && !self.live_in[w as usize] && !started[w as usize] {
                    started[w as usize] = true;
                    starts += 1;
                }
                for v in [read[k], w] {
                    if v != NONE && !regs.uses[at..].contains(&v) {
                        regs.uses.push(v);
                        regs.users[v as usize] += 1;
                    }
                }
            }
            regs.starts.push(starts);
        }
        regs.use_at.push(regs.uses.len() as u32);
        for (v, users) in regs.users.iter_mut().enumerate() {
            if self.live_out[v] {
                *users = kiln_sched::Registers::FOREVER;
            }
        }
        regs
    }

    /// Gives each value that may move an accumulator free over its life in the schedule where
    /// instruction j issues in cycle `cycle[j]`, and rewrites `instrs` to match. Returns
    /// false, leaving `instrs` as they were, where some value finds none.
    pub(crate) fn assign(&self, cycle: &[u32], instrs: &mut [Instr]) -> bool {
        let n = self.reg.len();
        // Each value's life: from its write (before the region, for a value live into it) to
        // its last access (after the region, for one live out of it), half open — a value may
        // be written in the cycle of another's last read — and at least its own cycle.
        let (mut start, mut end) = (vec![i64::MAX; n], vec![i64::MIN; n]);
        for (j, (read, write)) in self.read.iter().zip(&self.write).enumerate() {
            let c = cycle[j] as i64;
            for k in 0..4 {
                if read[k] != NONE {
                    end[read[k] as usize] = end[read[k] as usize].max(c);
                }
                if write[k] != NONE {
                    let v = write[k] as usize;
                    start[v] = start[v].min(c);
                    end[v] = end[v].max(c);
                }
            }
        }
        for v in 0..n {
            if self.live_in[v] {
                start[v] = -1;
            }
            if self.live_out[v] {
                end[v] = i64::MAX;
            }
            end[v] = end[v].max(start[v] + 1);
        }
        // The kept registers' lives, per register (at most a value in and one out each).
        let mut kept: [Vec<(i64, i64)>; 4] = Default::default();
        let mut order = Vec::with_capacity(n);
        for v in 0..n {
            if self.pinned(v as u32) {
                kept[self.reg[v] as usize].push((start[v], end[v]));
            } else {
                order.push(v);
            }
        }
        order.sort_unstable_by_key(|&v| start[v]);
        // In order of definition, the end of the last life given each register.
        let mut busy_until = [i64::MIN; 4];
        let mut reg = self.reg.clone();
        for v in order {
            let (s, e) = (start[v], end[v]);
            let fits =
                |k: usize| busy_until[k] <= s && kept[k].iter().all(|&(ks, ke)| ke <= s || e <= ks);
            let own = self.reg[v] as usize;
            let Some(k) = std::iter::once(own).chain(0..4).find(|&k| fits(k)) else {
                return false;
            };
            busy_until[k] = e;
            reg[v] = k as u8;
        }
        for (j, ins) in instrs.iter_mut().enumerate() {
            let map = |table: &[u32; 4], k: u8| match table[k as usize] {
                NONE => k,
                v => reg[v as usize],
            };
            let (read, write) = (&self.read[j], &self.write[j]);
            let rewrite = |w: &mut kiln_qpu::isa::WriteFields| {
                for waddr in [&mut w.waddr_add, &mut w.waddr_mul] {
                    if (waddr::R0..=waddr::R3).contains(waddr) {
                        *waddr = waddr::R0 + map(write, *waddr - waddr::R0);
                    }
                }
            };
            match ins {
                Instr::Alu(a) => {
                    rewrite(&mut a.w);
                    for m in [&mut a.add_a, &mut a.add_b, &mut a.mul_a, &mut a.mul_b] {
                        if (*m as u8) < 4 {
                            *m = Mux::from_bits(map(read, *m as u8));
                        }
                    }
                }
                Instr::LoadImm(l) => rewrite(&mut l.w),
                _ => {}
            }
        }
        true
    }
}
