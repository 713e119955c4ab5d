//! A deterministic random program generator for property tests, fuzzing and benchmarks:
//! structured control flow (nested ifs and loops, break and continue, uniform and divergent
//! branches), phis and linear phis, vectors through create/split, tied and fixed operands, and
//! knobs for size and register pressure. Every loop terminates: its header counts iterations and
//! breaks at a (uniform or per-lane) limit before anything else runs.

use crate::builder::{Builder, LoopScope};
use crate::cfg::Cfg;
use crate::entity::{Block, Temp};
use crate::function::Function;
use crate::inst::{Operand, OperandFlags};
use crate::opcode::Opcode;
use crate::regs::{GenericTarget, PhysReg, RegClass};

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenConfig {
    pub seed: u64,
    /// Approximate number of instructions.
    pub size: usize,
    /// Number of values kept available for use; more means more values live at once.
    pub pressure: usize,
    /// Deepest nesting of ifs and loops.
    pub max_depth: usize,
    /// Units of the generic target's `v` and `s` files.
    pub v_units: u32,
    pub s_units: u32,
    /// Emit vectors (create/split, vector operands of texture samples).
    pub vectors: bool,
    /// Emit tied definitions and fixed registers.
    pub constraints: bool,
    /// Emit per-lane values written in all lanes (seed 003's header setup).
    pub all_lanes: bool,
}

impl GenConfig {
    /// A small program with every feature on.
    pub fn new(seed: u64) -> GenConfig {
        GenConfig {
            seed,
            size: 60,
            pressure: 12,
            max_depth: 3,
            v_units: 256,
            s_units: 104,
            vectors: true,
            constraints: true,
            all_lanes: true,
        }
    }

    /// Many simultaneously live values, wide vectors and fixed registers: allocator stress.
    pub fn high_pressure(seed: u64) -> GenConfig {
        GenConfig {
            size: 150,
            pressure: 64,
            ..GenConfig::new(seed)
        }
    }
}

/// SplitMix64: small, fast, and the same everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent as usize
    }
}

struct PendingPhi {
    block: Block,
    temp: Temp,
    /// Fixed operand for the first predecessor (loop counters start at zero).
    entry_value: Option<Operand>,
    /// Value for every other predecessor (loop counters).
    back_value: Option<Temp>,
}

struct Gen<'f> {
    b: Builder<'f>,
    cfg: GenConfig,
    rng: Rng,
    pool: Vec<Temp>,
    end_pools: Vec<Vec<Temp>>,
    phis: Vec<PendingPhi>,
    budget: usize,
    next_location: u32,
}

/// Generates a verified-valid function for `cfg`.
pub fn generate(cfg: &GenConfig) -> Function {
    let mut func = Function::new("main", GenericTarget::arc(cfg.v_units, cfg.s_units));
    let mut g = Gen {
        b: Builder::new(&mut func),
        cfg: cfg.clone(),
        rng: Rng::new(cfg.seed),
        pool: Vec::new(),
        end_pools: Vec::new(),
        phis: Vec::new(),
        budget: cfg.size,
        next_location: 0,
    };
    for i in 0..3 {
        g.input(i);
    }
    g.uniform();
    g.region(0, None);
    let outputs = g.pool.len().min(8.max(cfg.pressure / 2));
    for k in 0..outputs {
        let t = g.pool[g.pool.len() - 1 - k];
        let mut op = Operand::temp(t);
        if cfg.constraints
            && g.b.func.class(t).size == 1
            && g.b.func.class(t).file == GenericTarget::V
            && k < 4
        {
            op.fixed = Some(PhysReg::new(GenericTarget::V, k as u32));
        }
        let mut inst = crate::Inst::new(Opcode::Output);
        inst.imms.push(g.next_location + k as u32);
        inst.operands.push(op);
        g.b.push(inst);
    }
    g.b.ret();
    g.record_end();
    let (phis, end_pools, mut rng) = (
        std::mem::take(&mut g.phis),
        std::mem::take(&mut g.end_pools),
        g.rng.clone(),
    );
    drop(g);
    fill_phis(&mut func, &phis, &end_pools, &mut rng);
    func
}

fn fill_phis(func: &mut Function, phis: &[PendingPhi], end_pools: &[Vec<Temp>], rng: &mut Rng) {
    let cfg = Cfg::compute(func).expect("generated programs are structured");
    for p in phis {
        let class = func.class(p.temp);
        let (op, idx) = func
            .block(p.block)
            .insts
            .iter()
            .enumerate()
            .find(|(_, i)| i.defs.first().is_some_and(|d| d.temp == p.temp))
            .map(|(k, i)| (i.op, k))
            .expect("phi exists");
        let preds = if op == Opcode::Phi {
            &cfg.logical.preds[p.block.index()]
        } else {
            &cfg.linear.preds[p.block.index()]
        };
        let operands: Vec<Operand> = preds
            .iter()
            .enumerate()
            .map(|(k, pred)| {
                if k == 0
                    && let Some(v) = p.entry_value
                {
                    return v;
                }
                if k > 0
                    && let Some(t) = p.back_value
                {
                    return Operand::temp(t);
                }
                let pool = &end_pools[pred.index()];
                let same: Vec<Temp> = pool
                    .iter()
                    .copied()
                    .filter(|t| func.class(*t) == class)
                    .collect();
                if same.is_empty() {
                    if class.size == 1 {
                        Operand::constant(rng.below(100) as u32)
                    } else {
                        Operand::undef(class)
                    }
                } else {
                    Operand::temp(same[rng.below(same.len())])
                }
            })
            .collect();
        func.block_mut(p.block).insts[idx].operands = operands.into();
    }
}

const INT_BINARY: [Opcode; 9] = [
    Opcode::Iadd,
    Opcode::Isub,
    Opcode::Imul,
    Opcode::Iand,
    Opcode::Ior,
    Opcode::Ixor,
    Opcode::Imin,
    Opcode::Umax,
    Opcode::Ishl,
];
const FLOAT_BINARY: [Opcode; 4] = [Opcode::Fadd, Opcode::Fmul, Opcode::Fmin, Opcode::Fsub];
const UNARY: [Opcode; 5] = [
    Opcode::Ineg,
    Opcode::Inot,
    Opcode::I2f,
    Opcode::Fabs,
    Opcode::Mov,
];

impl Gen<'_> {
    fn v(&self, size: u8) -> RegClass {
        self.b.func.target.class(GenericTarget::V, size)
    }
    fn s1(&self) -> RegClass {
        self.b.func.target.class(GenericTarget::S, 1)
    }
    fn class(&self, t: Temp) -> RegClass {
        self.b.func.class(t)
    }

    fn add(&mut self, t: Temp) {
        self.pool.push(t);
        if self.pool.len() > self.cfg.pressure.max(4) {
            let k = self.rng.below(self.pool.len() / 2 + 1);
            self.pool.remove(k);
        }
    }

    fn record_end(&mut self) {
        let b = self.b.current_block().index();
        if self.end_pools.len() <= b {
            self.end_pools.resize(b + 1, Vec::new());
        }
        self.end_pools[b] = self.pool.clone();
    }

    fn input(&mut self, loc: u32) -> Temp {
        let c = self.v(1);
        let t = self.b.inst(Opcode::Input, &[loc], &[c], [])[0];
        self.add(t);
        t
    }

    fn uniform(&mut self) -> Temp {
        let c = self.s1();
        let slot = self.rng.below(8) as u32;
        let t = self.b.inst(Opcode::Uniform, &[slot], &[c], [])[0];
        self.add(t);
        t
    }

    /// A random scalar of `file`-compatible kind from the pool, or a constant.
    fn scalar(&mut self, per_lane_ok: bool) -> Operand {
        let cands: Vec<Temp> = self
            .pool
            .iter()
            .copied()
            .filter(|&t| {
                let c = self.class(t);
                c.size == 1 && (per_lane_ok || c.file == GenericTarget::S)
            })
            .collect();
        if cands.is_empty() || self.rng.chance(10) {
            Operand::constant(self.rng.below(16) as u32)
        } else {
            Operand::temp(cands[self.rng.below(cands.len())])
        }
    }

    fn alu(&mut self) {
        let uniform = self.rng.chance(25);
        let a = self.scalar(!uniform);
        let b = self.scalar(!uniform);
        let class = if uniform { self.s1() } else { self.v(1) };
        let pick = self.rng.below(20);
        let t = if pick < 10 {
            let op = INT_BINARY[self.rng.below(INT_BINARY.len())];
            self.b.op(op, class, [a, b])
        } else if pick < 14 {
            let op = FLOAT_BINARY[self.rng.below(FLOAT_BINARY.len())];
            self.b.op(op, class, [a, b])
        } else if pick < 17 {
            let op = UNARY[self.rng.below(UNARY.len())];
            self.b.op(op, class, [a])
        } else if pick < 18 || !self.cfg.constraints {
            let c = self.scalar(!uniform);
            let cmp = self.b.op(Opcode::Ult, class, [a, b]);
            self.b.op(Opcode::Sel, class, [Operand::temp(cmp), c, b])
        } else if pick < 19 && !uniform {
            self.target_op(a, b)
        } else {
            // Two-address multiply-add: the definition shares the addend's registers.
            let c = self.scalar(!uniform);
            let same_file = c
                .temp_id()
                .is_some_and(|c| self.b.func.class(c).file == class.file);
            let t = self.b.op(Opcode::Ffma, class, [a, b, c]);
            let inst = self
                .b
                .func
                .block_mut(self.b.current_block())
                .insts
                .last_mut()
                .expect("ffma");
            inst.defs[0].tied = Some(2);
            inst.operands[2].flags = inst.operands[2].flags | OperandFlags::CLOBBERED;
            if !same_file {
                inst.defs[0].tied = None;
                inst.operands[2].flags = OperandFlags::empty();
            }
            t
        };
        self.budget = self.budget.saturating_sub(1);
        self.add(t);
    }

    /// One of the generic target's own opcodes; `iadd_low` reads and writes values narrowed to
    /// subset `low` by copies (class narrowing).
    fn target_op(&mut self, a: Operand, b: Operand) -> Temp {
        let target = self.b.func.target.clone();
        let op = |name| Opcode::from_name_in(name, &*target).expect("generic target opcode");
        let v = self.v(1);
        match self.rng.below(3) {
            0 => self.b.op(op("umul24"), v, [a, b]),
            1 => {
                // Its operand must be a per-lane value.
                let a = match a.temp_id() {
                    Some(t) if self.class(t) != v => Operand::temp(self.b.op(Opcode::Mov, v, [a])),
                    _ => a,
                };
                self.b.op(op("sfu_rcp"), v, [a])
            }
            _ => {
                let low = RegClass {
                    subset: target.subset_by_name("low"),
                    ..v
                };
                let x = self.b.op(Opcode::Mov, low, [a]);
                let y = self.b.op(Opcode::Mov, low, [b]);
                self.b
                    .op(op("iadd_low"), low, [Operand::temp(x), Operand::temp(y)])
            }
        }
    }

    fn vector(&mut self) {
        let size = 2 + self.rng.below(3) as u8;
        let parts: Vec<Operand> = (0..size).map(|_| self.scalar(true)).collect();
        let parts: Vec<Operand> = parts
            .into_iter()
            .map(|p| match p.temp_id() {
                Some(t) if self.class(t).file == GenericTarget::S => {
                    let c = self.v(1);
                    Operand::temp(self.b.op(Opcode::Mov, c, [p]))
                }
                _ => p,
            })
            .collect();
        let class = self.v(size);
        let vec = self.b.op(Opcode::CreateVector, class, parts);
        self.add(vec);
        if self.rng.chance(60) {
            let mut sizes = Vec::new();
            let mut left = size;
            while left > 0 {
                let s = 1 + self.rng.below(left as usize) as u8;
                let s = if s == 3 { 1 } else { s };
                sizes.push(s);
                left -= s;
            }
            let classes: Vec<RegClass> = sizes.iter().map(|&s| self.v(s)).collect();
            let parts = self
                .b
                .inst(Opcode::SplitVector, &[], &classes, [Operand::temp(vec)]);
            for p in parts {
                self.add(p);
            }
        }
        if self.rng.chance(40) {
            let u = self.scalar(true);
            let w = self.scalar(true);
            let (mut u, mut w) = (self.as_per_lane(u), self.as_per_lane(w));
            u.flags = OperandFlags::VECTOR_ALIGNED | OperandFlags::LATE_KILL;
            w.flags = OperandFlags::LATE_KILL;
            let c = self.v(4);
            let t = self.b.inst(Opcode::TextureSample, &[0, 0], &[c], [u, w])[0];
            self.add(t);
        }
        self.budget = self.budget.saturating_sub(3);
    }

    fn as_per_lane(&mut self, op: Operand) -> Operand {
        match op.temp_id() {
            Some(t) if self.class(t).file == GenericTarget::V => op,
            _ => {
                let c = self.v(1);
                Operand::temp(self.b.op(Opcode::Mov, c, [op]))
            }
        }
    }

    fn straight(&mut self) {
        let pick = self.rng.below(100);
        if pick < 5 {
            self.next_location += 1;
            self.input(self.next_location + 3);
        } else if pick < 9 {
            self.uniform();
        } else if pick < 15 && self.cfg.vectors {
            self.vector();
        } else if pick < 18 && self.cfg.all_lanes {
            // Written in every lane, so it reads only what every lane has: a uniform value.
            let a = self.scalar(false);
            let c = self.v(1);
            let t = self.b.op(Opcode::Mov, c, [a]);
            let inst = self
                .b
                .func
                .block_mut(self.b.current_block())
                .insts
                .last_mut()
                .expect("mov");
            inst.flags.all_lanes = true;
            self.add(t);
        } else {
            self.alu();
        }
        self.budget = self.budget.saturating_sub(1);
    }

    /// Generates a region's contents, ending with the current block open.
    fn region(&mut self, depth: usize, mut lp: Option<&mut LoopScope>) {
        let mut steps = 0;
        while self.budget > 0 && (depth == 0 || steps < 12) {
            steps += 1;
            let pick = self.rng.below(100);
            if depth < self.cfg.max_depth && pick < 12 {
                self.if_(depth, lp.as_deref_mut());
            } else if depth < self.cfg.max_depth && pick < 18 {
                self.loop_(depth);
            } else {
                self.straight();
            }
        }
    }

    fn if_(&mut self, depth: usize, mut lp: Option<&mut LoopScope>) {
        let divergent = self.rng.chance(60);
        let cond = self.scalar(divergent);
        let cond = if divergent {
            cond
        } else {
            self.as_uniform(cond)
        };
        let saved = self.pool.clone();
        let mut scope = self.b.begin_if(cond, divergent);
        self.region(depth + 1, lp.as_deref_mut());
        self.maybe_jump(lp.as_deref_mut());
        let then_jumped = self.b.is_terminated();
        self.record_end();
        if self.rng.chance(60) {
            self.pool = saved.clone();
            self.b.begin_else(&mut scope);
            self.region(depth + 1, lp.as_deref_mut());
            // The endif needs a predecessor: both sides may not leave.
            if !then_jumped {
                self.maybe_jump(lp);
            }
            self.record_end();
        }
        let endif = self.b.end_if(scope);
        self.pool = saved;
        self.merge_phis(endif);
    }

    fn as_uniform(&mut self, op: Operand) -> Operand {
        match op.temp_id() {
            Some(t) if self.class(t).file == GenericTarget::V => {
                let c = self.s1();
                Operand::temp(self.b.op(
                    Opcode::Iadd,
                    c,
                    [
                        Operand::constant(1),
                        Operand::constant(self.rng.below(3) as u32),
                    ],
                ))
            }
            _ => op,
        }
    }

    /// Sometimes ends an if region inside a loop with `break` or `continue`.
    fn maybe_jump(&mut self, lp: Option<&mut LoopScope>) {
        if let Some(lp) = lp
            && self.rng.chance(25)
        {
            self.record_end();
            if self.rng.chance(50) {
                self.b.break_(lp);
            } else {
                self.b.continue_(lp);
            }
        }
    }

    /// Adds phis at a merge block for a few classes found in the pool.
    fn merge_phis(&mut self, block: Block) {
        let n = 1 + self.rng.below(3);
        for _ in 0..n {
            let Some(&t) = self.pool.get(self.rng.below(self.pool.len().max(1))) else {
                return;
            };
            let class = self.class(t);
            let op = if class.file == GenericTarget::S {
                Opcode::LinearPhi
            } else {
                Opcode::Phi
            };
            let p = self.b.phi(block, op, class, Vec::new());
            self.phis.push(PendingPhi {
                block,
                temp: p,
                entry_value: None,
                back_value: None,
            });
            self.add(p);
        }
    }

    fn loop_(&mut self, depth: usize) {
        let divergent = self.rng.chance(50);
        let saved = self.pool.clone();
        // The limit is computed before the loop.
        let limit = if divergent {
            let x = self.scalar(true);
            let x = self.as_per_lane(x);
            let c = self.v(1);
            let m = self.b.op(Opcode::Iand, c, [x, Operand::constant(3)]);
            Operand::temp(m)
        } else {
            Operand::constant(1 + self.rng.below(3) as u32)
        };
        self.record_end();
        let mut scope = self.b.begin_loop();
        let header = scope.header;
        let class = if divergent { self.v(1) } else { self.s1() };
        let phi_op = if divergent {
            Opcode::Phi
        } else {
            Opcode::LinearPhi
        };
        let counter = self.b.phi(header, phi_op, class, Vec::new());
        let next = self.b.op(
            Opcode::Iadd,
            class,
            [Operand::temp(counter), Operand::constant(1)],
        );
        self.phis.push(PendingPhi {
            block: header,
            temp: counter,
            entry_value: Some(Operand::constant(0)),
            back_value: Some(next),
        });
        self.add(counter);
        self.add(next);
        // Other loop-carried values.
        for _ in 0..self.rng.below(3) {
            if let Some(&t) = saved
                .get(self.rng.below(saved.len().max(1)))
                .filter(|&&t| self.class(t).size == 1)
            {
                let c = self.class(t);
                let op = if c.file == GenericTarget::S {
                    Opcode::LinearPhi
                } else {
                    Opcode::Phi
                };
                let p = self.b.phi(header, op, c, Vec::new());
                self.phis.push(PendingPhi {
                    block: header,
                    temp: p,
                    entry_value: Some(Operand::temp(t)),
                    back_value: None,
                });
                self.add(p);
            }
        }
        let cond = self.b.op(Opcode::Ult, class, [limit, Operand::temp(next)]);
        let exit_if = self.b.begin_if(Operand::temp(cond), divergent);
        self.record_end();
        self.b.break_(&mut scope);
        let _ = self.b.end_if(exit_if);
        self.region(depth + 1, Some(&mut scope));
        self.record_end();
        let exit = self.b.end_loop(scope);
        self.pool = saved;
        self.merge_phis(exit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_programs_verify() {
        for seed in 0..300 {
            let f = generate(&GenConfig::new(seed));
            if let Err(errs) = crate::verify(&f) {
                panic!("seed {seed}: {}\n{}", errs[0], crate::print_function(&f));
            }
        }
    }

    #[test]
    fn same_seed_same_program() {
        let a = crate::print_function(&generate(&GenConfig::new(7)));
        let b = crate::print_function(&generate(&GenConfig::new(7)));
        assert_eq!(a, b);
        assert_ne!(a, crate::print_function(&generate(&GenConfig::new(8))));
    }

    #[test]
    fn size_knob_scales_the_program() {
        let small = generate(&GenConfig {
            size: 100,
            ..GenConfig::new(1)
        })
        .inst_count();
        let large = generate(&GenConfig {
            size: 10_000,
            ..GenConfig::new(1)
        })
        .inst_count();
        assert!(large > 20 * small, "{small} vs {large}");
    }
}
