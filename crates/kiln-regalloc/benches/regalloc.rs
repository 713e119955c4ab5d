//! kiln's SSA and graph-colouring allocators against regalloc2's Ion and fastalloc on the same
//! scalar functions, with
//! the same registers per class: generated programs of about 1k, 10k and 100k instructions and
//! the largest corpus shaders that both can express, at a plentiful and a tight budget.
//! Run with `cargo bench -p kiln-regalloc --bench regalloc`.
//!
//! What both allocators are given (docs/regalloc.md, "Benchmark against regalloc2"):
//! - scalar temps only (classes of one unit, no subsets), no fixed registers or tied operands;
//! - in corpus shaders, texture samples (their only vectors) replaced by scalar arithmetic on
//!   the coordinates that defines the sample's four scalars ([`scalarise_samples`]);
//! - uniform control flow: every `if.divergent` is made uniform, so the linear CFG is the logical
//!   CFG and a phi's operands follow the predecessors regalloc2 sees;
//! - no critical edges (split with `kiln_ir::layout::split_edge`), and every phi operand a temp
//!   (constants and undefs become a `mov` at the end of the predecessor).
//!
//! regalloc2 sees one block per kiln block in layout order, the phis as block parameters, file
//! `v` as `RegClass::Int` and `s` as `RegClass::Float`, uses early and definitions late, and no
//! dedicated scratch register (regalloc2 0.15 finds one itself when a move cycle needs it).
//!
//! `KILN_BENCH_SIZE=N` (or `KILN_BENCH_SHADER=NAME`) with `KILN_BENCH_ALLOC=ssa|graph|ion|fast` and
//! `KILN_BENCH_BUDGET=plenty|tight` allocates one function once, for
//! `valgrind --tool=callgrind --toggle-collect='*measured*'`.

use kiln_analysis::Context;
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Cfg, Function, Opcode, Value};
use kiln_regalloc::{RaOptions, RaStats, allocate};
use regalloc2::{
    Algorithm, Edit, MachineEnv, Operand, Output, PReg, PRegSet, RegClass, RegallocOptions, VReg,
};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// The functions.

/// Why a function is left out.
fn unsupported(func: &Function) -> Option<String> {
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        for d in &inst.defs {
            let c = func.class(d.temp);
            if c.size != 1 || c.subset.is_some() || c.file.index() > 1 {
                return Some(format!("{} has class size {} / a subset", d.temp, c.size));
            }
        }
        if inst
            .defs
            .iter()
            .any(|d| d.fixed.is_some() || d.tied.is_some())
        {
            return Some(format!("`{}` has a fixed or tied definition", inst.op));
        }
        if inst
            .operands
            .iter()
            .any(|o| o.fixed.is_some() || o.is_vector_aligned())
        {
            return Some(format!("`{}` has a fixed or vector operand", inst.op));
        }
    }
    None
}

/// Puts a scalar function in the form both allocators are given (see the file's comment).
fn normalise(mut func: Function) -> Result<Function, String> {
    if let Some(why) = unsupported(&func) {
        return Err(why);
    }
    let old = Cfg::compute(&func).map_err(|e| format!("{}: {}", e.block, e.message))?;
    for inst in func.blocks.iter_mut().flat_map(|b| &mut b.insts) {
        inst.flags.divergent = false;
    }
    // Phi operands follow the new predecessors; an edge the wave did not take before (into
    // the endif of an if with no else, say) brings a constant.
    let new = Cfg::compute(&func).map_err(|e| format!("{}: {}", e.block, e.message))?;
    for b in func.block_ids().collect::<Vec<_>>() {
        for phi in func.blocks[b.index()]
            .insts
            .iter_mut()
            .take_while(|i| i.op.is_phi())
        {
            let old_preds = if phi.op == Opcode::Phi {
                &old.logical.preds[b.index()]
            } else {
                &old.linear.preds[b.index()]
            };
            phi.operands = new.linear.preds[b.index()]
                .iter()
                .map(|p| match old_preds.iter().position(|q| q == p) {
                    Some(k) => phi.operands[k],
                    None => kiln_ir::Operand::constant(0),
                })
                .collect();
        }
    }
    // Split every critical edge of the (now single) CFG.
    loop {
        let cfg = Cfg::compute(&func).map_err(|e| format!("{}: {}", e.block, e.message))?;
        let critical = func.block_ids().find_map(|s| {
            let preds = &cfg.linear.preds[s.index()];
            (preds.len() > 1)
                .then(|| {
                    preds
                        .iter()
                        .find(|p| cfg.linear.succs[p.index()].len() > 1)
                        .map(|&p| (p, s))
                })
                .flatten()
        });
        let Some((p, s)) = critical else { break };
        kiln_ir::layout::split_edge(&mut func, &cfg, p, s)?;
    }
    let cfg = Cfg::compute(&func).map_err(|e| format!("{}: {}", e.block, e.message))?;
    if cfg.linear.succs != cfg.logical.succs {
        return Err("the linear CFG is not the logical CFG".into());
    }
    // Phi operands that are not temps become temps defined at the end of the predecessor.
    for s in func.block_ids().collect::<Vec<_>>() {
        let preds = cfg.linear.preds[s.index()].clone();
        for k in 0..func.block(s).phi_count() {
            for (j, &p) in preds.iter().enumerate() {
                let phi = &func.block(s).insts[k];
                let op = phi.operands[j];
                if op.temp_id().is_some() {
                    continue;
                }
                let class = func.class(phi.defs[0].temp);
                let value = match op.value {
                    Value::Const(c) => c,
                    _ => 0,
                };
                let t = func.new_temp(class);
                let mut mov = kiln_ir::Inst::new(Opcode::Mov);
                mov.defs.push(kiln_ir::Def::new(t));
                mov.operands.push(kiln_ir::Operand::constant(value));
                let insts = &mut func.blocks[p.index()].insts;
                let at = insts.len() - 1;
                insts.insert(at, mov);
                func.blocks[s.index()].insts[k].operands[j] = kiln_ir::Operand::temp(t);
            }
        }
    }
    if let Err(e) = kiln_ir::verify(&func) {
        return Err(format!("does not verify: {}", e[0]));
    }
    Ok(func)
}

/// The corpus's only vectors are the results of texture samples, split into scalars right
/// after: each `texture_sample` and its `split_vector` become four scalar `fadd`s of the
/// coordinates defining the split's scalars (same operands read, same scalars defined, no
/// vector register).
fn scalarise_samples(mut func: Function) -> Result<Function, String> {
    let mut uses = vec![0u32; func.temps.len()];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        for t in inst.operands.iter().filter_map(|o| o.temp_id()) {
            uses[t.index()] += 1;
        }
    }
    for b in 0..func.blocks.len() {
        let mut k = 0;
        while k < func.blocks[b].insts.len() {
            let inst = &func.blocks[b].insts[k];
            if inst.op != Opcode::TextureSample {
                k += 1;
                continue;
            }
            let vector = inst.defs[0].temp;
            let coords: Vec<kiln_ir::Operand> = inst
                .operands
                .iter()
                .map(|o| kiln_ir::Operand::from(o.value))
                .collect();
            let split = func.blocks[b].insts[k + 1..]
                .iter()
                .position(|i| {
                    i.op == Opcode::SplitVector && i.operands[0].temp_id() == Some(vector)
                })
                .map(|j| k + 1 + j);
            let Some(split) = split.filter(|_| uses[vector.index()] == 1 && !coords.is_empty())
            else {
                return Err(format!("{vector} is not split once in its block"));
            };
            let parts: Vec<kiln_ir::Temp> = func.blocks[b].insts[split]
                .defs
                .iter()
                .map(|d| d.temp)
                .collect();
            if parts.iter().any(|&t| func.class(t).size != 1) {
                return Err(format!("{vector} is split into vectors"));
            }
            func.blocks[b].insts.remove(split);
            let n = coords.len();
            let ops: Vec<kiln_ir::Inst> = parts
                .iter()
                .enumerate()
                .map(|(i, &t)| {
                    let mut op = kiln_ir::Inst::new(Opcode::Fadd);
                    op.defs.push(kiln_ir::Def::new(t));
                    op.operands.push(coords[i % n]);
                    op.operands.push(coords[(i + 1) % n]);
                    op
                })
                .collect();
            let len = ops.len();
            func.blocks[b].insts.splice(k..=k, ops);
            func.temps[vector.index()] = kiln_ir::RegClass::NONE;
            k += len;
        }
    }
    Ok(func)
}

/// The generated program of about `size` instructions.
fn generated(size: usize) -> Function {
    let func = generate(&GenConfig {
        size,
        pressure: 24,
        max_depth: 4,
        vectors: false,
        constraints: false,
        all_lanes: false,
        ..GenConfig::new(42)
    });
    normalise(func).expect("scalar generated programs normalise")
}

/// The largest corpus shaders files are searched for (by file size).
const CORPUS_CANDIDATES: usize = 60;
/// How many corpus functions are measured.
const CORPUS_FUNCTIONS: usize = 5;

/// The largest scalar entry points among the largest corpus files, lowered and optimised like
/// `kiln corpus regalloc` does, and normalised; with the number of entry points left out.
fn corpus() -> (Vec<(String, Function)>, usize) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let mut files: Vec<(u64, std::path::PathBuf)> = kiln_front::corpus::shader_files(&dir)
        .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.len(), p)))
        .collect();
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut found = Vec::new();
    let mut skipped = 0;
    for (_, path) in files.into_iter().take(CORPUS_CANDIDATES) {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(source) = kiln_front::Source::from_path(&path, bytes) else {
            continue;
        };
        let Ok(parsed) = kiln_front::parse(&source) else {
            continue;
        };
        for (entry, stage) in kiln_front::entry_points(&parsed.module) {
            let Ok(lowered) = kiln_front::lower_entry_point(&parsed, Some(stage), Some(&entry))
            else {
                continue;
            };
            let mut cx = Context::new(lowered.function);
            if kiln_opt::optimize(&mut cx, kiln_opt::Precision::Relaxed).is_err() {
                continue;
            }
            let name = format!(
                "{}:{entry}",
                path.strip_prefix(&dir).unwrap_or(&path).display()
            );
            match scalarise_samples(cx.into_func()).and_then(normalise) {
                Ok(f) => found.push((name, f)),
                Err(why) => {
                    skipped += 1;
                    if std::env::var_os("KILN_BENCH_VERBOSE").is_some() {
                        eprintln!("skipped {name}: {why}");
                    }
                }
            }
        }
    }
    found.sort_by(|a, b| {
        b.1.inst_count()
            .cmp(&a.1.inst_count())
            .then_with(|| a.0.cmp(&b.0))
    });
    found.truncate(CORPUS_FUNCTIONS);
    (found, skipped)
}

// ---------------------------------------------------------------------------------------------
// The regalloc2 view of a kiln function.

/// A kiln function as regalloc2 sees it: one block per kiln block, phis as block parameters.
struct Adapter {
    /// Per regalloc2 instruction: its operands (a range of `operands`), ret, branch.
    ops: Vec<(u32, u32)>,
    operands: Vec<Operand>,
    is_ret: Vec<bool>,
    is_branch: Vec<bool>,
    blocks: Vec<regalloc2::InstRange>,
    succs: Vec<Vec<regalloc2::Block>>,
    preds: Vec<Vec<regalloc2::Block>>,
    params: Vec<Vec<VReg>>,
    /// Per block, per successor: the branch arguments.
    args: Vec<Vec<Vec<VReg>>>,
    vregs: usize,
}

fn class_of(func: &Function, t: kiln_ir::Temp) -> RegClass {
    if func.class(t).file.index() == 0 {
        RegClass::Int
    } else {
        RegClass::Float
    }
}

fn vreg(func: &Function, t: kiln_ir::Temp) -> VReg {
    VReg::new(t.index(), class_of(func, t))
}

impl Adapter {
    fn new(func: &Function) -> Adapter {
        let cfg = Cfg::compute(func).expect("normalised functions are structured");
        let block = |b: kiln_ir::Block| regalloc2::Block::new(b.index());
        let mut a = Adapter {
            ops: Vec::new(),
            operands: Vec::new(),
            is_ret: Vec::new(),
            is_branch: Vec::new(),
            blocks: Vec::new(),
            succs: Vec::new(),
            preds: Vec::new(),
            params: Vec::new(),
            args: Vec::new(),
            vregs: func.temps.len(),
        };
        for b in func.block_ids() {
            let data = func.block(b);
            let nphi = data.phi_count();
            a.params.push(
                data.insts[..nphi]
                    .iter()
                    .map(|phi| vreg(func, phi.defs[0].temp))
                    .collect(),
            );
            let first = a.ops.len();
            for inst in &data.insts[nphi..] {
                let start = a.operands.len() as u32;
                for op in &inst.operands {
                    if let Some(t) = op.temp_id() {
                        a.operands.push(Operand::reg_use(vreg(func, t)));
                    }
                }
                for d in &inst.defs {
                    a.operands.push(Operand::reg_def(vreg(func, d.temp)));
                }
                a.ops.push((start, a.operands.len() as u32));
                a.is_ret.push(inst.op == Opcode::Return);
                a.is_branch
                    .push(inst.op.is_terminator() && inst.op != Opcode::Return);
            }
            a.blocks.push(regalloc2::InstRange::new(
                regalloc2::Inst::new(first),
                regalloc2::Inst::new(a.ops.len()),
            ));
            let succs = &cfg.linear.succs[b.index()];
            a.succs.push(succs.iter().map(|&s| block(s)).collect());
            a.preds.push(
                cfg.linear.preds[b.index()]
                    .iter()
                    .map(|&p| block(p))
                    .collect(),
            );
            a.args.push(
                succs
                    .iter()
                    .map(|&s| {
                        let j = cfg.linear.preds[s.index()]
                            .iter()
                            .position(|&p| p == b)
                            .expect("a predecessor of its successor");
                        func.block(s)
                            .insts
                            .iter()
                            .take_while(|i| i.op.is_phi())
                            .map(|phi| vreg(func, phi.operands[j].temp_id().expect("normalised")))
                            .collect()
                    })
                    .collect(),
            );
        }
        a
    }
}

impl regalloc2::Function for Adapter {
    fn num_insts(&self) -> usize {
        self.ops.len()
    }
    fn num_blocks(&self) -> usize {
        self.blocks.len()
    }
    fn entry_block(&self) -> regalloc2::Block {
        regalloc2::Block::new(0)
    }
    fn block_insns(&self, block: regalloc2::Block) -> regalloc2::InstRange {
        self.blocks[block.index()]
    }
    fn block_succs(&self, block: regalloc2::Block) -> &[regalloc2::Block] {
        &self.succs[block.index()]
    }
    fn block_preds(&self, block: regalloc2::Block) -> &[regalloc2::Block] {
        &self.preds[block.index()]
    }
    fn block_params(&self, block: regalloc2::Block) -> &[VReg] {
        &self.params[block.index()]
    }
    fn is_ret(&self, insn: regalloc2::Inst) -> bool {
        self.is_ret[insn.index()]
    }
    fn is_branch(&self, insn: regalloc2::Inst) -> bool {
        self.is_branch[insn.index()]
    }
    fn branch_blockparams(
        &self,
        block: regalloc2::Block,
        _insn: regalloc2::Inst,
        succ_idx: usize,
    ) -> &[VReg] {
        &self.args[block.index()][succ_idx]
    }
    fn inst_operands(&self, insn: regalloc2::Inst) -> &[Operand] {
        let (s, e) = self.ops[insn.index()];
        &self.operands[s as usize..e as usize]
    }
    fn inst_clobbers(&self, _insn: regalloc2::Inst) -> PRegSet {
        PRegSet::empty()
    }
    fn num_vregs(&self) -> usize {
        self.vregs
    }
    fn spillslot_size(&self, _regclass: RegClass) -> usize {
        1
    }
}

/// `v` registers as `Int`, `s` registers as `Float`, no scratch register.
fn machine_env(v: u32, s: u32) -> MachineEnv {
    let mut int = PRegSet::empty();
    for r in 0..v as usize {
        int.add(PReg::new(r, RegClass::Int));
    }
    let mut float = PRegSet::empty();
    for r in 0..s as usize {
        float.add(PReg::new(r, RegClass::Float));
    }
    MachineEnv {
        preferred_regs_by_class: [int, float, PRegSet::empty()],
        non_preferred_regs_by_class: [PRegSet::empty(); 3],
        scratch_by_class: [None; 3],
        fixed_stack_slots: Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// Measuring.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Alloc {
    /// kiln's SSA allocator.
    Kiln,
    /// kiln's graph-colouring allocator.
    Graph,
    Ion,
    Fast,
}

impl Alloc {
    const ALL: [Alloc; 4] = [Alloc::Kiln, Alloc::Graph, Alloc::Ion, Alloc::Fast];
    fn name(self) -> &'static str {
        match self {
            Alloc::Kiln => "ssa",
            Alloc::Graph => "graph",
            Alloc::Ion => "ion",
            Alloc::Fast => "fast",
        }
    }
    fn algorithm(self) -> Algorithm {
        match self {
            Alloc::Fast => Algorithm::Fastalloc,
            _ => Algorithm::Ion,
        }
    }
}

/// Register budgets: (name, `v` / `Int` registers, `s` / `Float` registers).
const BUDGETS: [(&str, u32, u32); 2] = [("plenty", 64, 32), ("tight", 16, 8)];

/// Moves, spills and reloads one allocation inserted.
#[derive(Clone, Copy, Default, Debug)]
struct Counts {
    moves: u64,
    spills: u64,
    reloads: u64,
}

fn kiln_options(alloc: Alloc, v: u32, s: u32) -> RaOptions {
    RaOptions {
        allocator: if alloc == Alloc::Graph {
            kiln_regalloc::Allocator::Graph
        } else {
            kiln_regalloc::Allocator::Ssa
        },
        budget: vec![Some(v), Some(s)],
        check: false,
        refuse_spilling: false,
    }
}

#[inline(never)]
fn measured_kiln(func: &mut Function, options: &RaOptions) -> RaStats {
    allocate(func, options).unwrap_or_else(|e| panic!("kiln: {e}"))
}

#[inline(never)]
fn measured_regalloc2(adapter: &Adapter, env: &MachineEnv, algorithm: Algorithm) -> Output {
    let options = RegallocOptions {
        algorithm,
        ..RegallocOptions::default()
    };
    regalloc2::run(adapter, env, &options).unwrap_or_else(|e| panic!("regalloc2: {e}"))
}

fn kiln_counts(stats: &RaStats) -> Counts {
    Counts {
        moves: stats.copied_units as u64,
        spills: stats.spills as u64,
        reloads: stats.reloads as u64,
    }
}

fn regalloc2_counts(out: &Output) -> Counts {
    let mut c = Counts::default();
    for (_, edit) in &out.edits {
        let Edit::Move { from, to } = edit;
        match (from.is_stack(), to.is_stack()) {
            (false, false) => c.moves += 1,
            (false, true) => c.spills += 1,
            (true, false) => c.reloads += 1,
            (true, true) => c.moves += 1,
        }
    }
    c
}

/// Runs regalloc2's checker on an allocation (not timed).
fn check_regalloc2(adapter: &Adapter, env: &MachineEnv, out: &Output, what: &str) {
    let mut checker = regalloc2::checker::Checker::new(adapter, env);
    checker.prepare(out);
    if let Err(e) = checker.run() {
        panic!("{what}: regalloc2's checker rejects the allocation: {e:?}");
    }
}

/// Writes a buffer larger than the last-level cache, so every timed run starts from cold caches.
fn evict(buffer: &mut [u64]) {
    for (i, x) in buffer.iter_mut().enumerate() {
        *x = x.wrapping_add(i as u64);
    }
    black_box(&buffer);
}

/// Best of several cold-cache runs of one allocator on one function: ns per instruction, and
/// what the allocation inserted. Every allocation is validated once (kiln's checker, regalloc2's
/// checker), outside the timed runs.
fn measure(
    func: &Function,
    adapter: &Adapter,
    alloc: Alloc,
    (v, s): (u32, u32),
    buffer: &mut [u64],
    what: &str,
) -> (f64, Counts) {
    let n = func.inst_count();
    let env = machine_env(v, s);
    let counts = match alloc {
        Alloc::Kiln | Alloc::Graph => {
            let mut f = func.clone();
            let options = RaOptions {
                check: true,
                ..kiln_options(alloc, v, s)
            };
            let stats = allocate(&mut f, &options).unwrap_or_else(|e| panic!("{what}: {e}"));
            kiln_counts(&stats)
        }
        _ => {
            let out = measured_regalloc2(adapter, &env, alloc.algorithm());
            check_regalloc2(adapter, &env, &out, what);
            regalloc2_counts(&out)
        }
    };
    let mut best = Duration::MAX;
    let start = Instant::now();
    let mut runs = 0;
    let options = kiln_options(alloc, v, s);
    while runs < 3 || (start.elapsed() < Duration::from_secs(2) && runs < 100) {
        let mut f = func.clone();
        evict(buffer);
        let t = Instant::now();
        match alloc {
            Alloc::Kiln | Alloc::Graph => {
                black_box(measured_kiln(&mut f, &options));
            }
            _ => {
                black_box(measured_regalloc2(adapter, &env, alloc.algorithm()));
            }
        }
        best = best.min(t.elapsed());
        runs += 1;
    }
    (best.as_nanos() as f64 / n as f64, counts)
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|s| !s.is_empty())
}

/// One allocation, for callgrind.
fn single() -> bool {
    let size: Option<usize> = env_var("KILN_BENCH_SIZE").and_then(|s| s.parse().ok());
    let shader = env_var("KILN_BENCH_SHADER");
    if size.is_none() && shader.is_none() {
        return false;
    }
    let func = match (size, shader) {
        (Some(size), _) => generated(size),
        (None, Some(name)) => {
            let (found, _) = corpus();
            let names: Vec<String> = found.iter().map(|(n, _)| n.clone()).collect();
            found
                .into_iter()
                .find(|(n, _)| n.contains(&name))
                .unwrap_or_else(|| panic!("none of {names:?} matches `{name}`"))
                .1
        }
        _ => unreachable!(),
    };
    let alloc = match env_var("KILN_BENCH_ALLOC").as_deref().unwrap_or("kiln") {
        "kiln" | "ssa" => Alloc::Kiln,
        "graph" => Alloc::Graph,
        "ion" => Alloc::Ion,
        "fast" => Alloc::Fast,
        other => panic!("KILN_BENCH_ALLOC={other}: expected ssa, graph, ion or fast"),
    };
    let budget = env_var("KILN_BENCH_BUDGET").unwrap_or_else(|| "plenty".into());
    let &(_, v, s) = BUDGETS
        .iter()
        .find(|b| b.0 == budget)
        .unwrap_or_else(|| panic!("KILN_BENCH_BUDGET={budget}: expected plenty or tight"));
    let adapter = Adapter::new(&func);
    let env = machine_env(v, s);
    let counts = match alloc {
        Alloc::Kiln | Alloc::Graph => {
            let mut f = func.clone();
            kiln_counts(&measured_kiln(&mut f, &kiln_options(alloc, v, s)))
        }
        _ => regalloc2_counts(&measured_regalloc2(&adapter, &env, alloc.algorithm())),
    };
    println!(
        "{} instructions, {} at {budget} (v={v}, s={s}): {} moves, {} spills, {} reloads",
        func.inst_count(),
        alloc.name(),
        counts.moves,
        counts.spills,
        counts.reloads
    );
    true
}

fn main() {
    if single() {
        return;
    }
    let mut functions: Vec<(String, Function)> = [1_000, 10_000, 100_000]
        .into_iter()
        .map(|size| (format!("generated {size}"), generated(size)))
        .collect();
    let (shaders, skipped) = corpus();
    println!(
        "corpus: the {} largest scalar entry points of the {CORPUS_CANDIDATES} largest files \
         ({skipped} entry points left out)",
        shaders.len()
    );
    functions.extend(shaders);
    let adapters: Vec<Adapter> = functions.iter().map(|(_, f)| Adapter::new(f)).collect();
    let mut buffer = vec![0u64; 8 << 20];
    for (budget, v, s) in BUDGETS {
        println!();
        println!(
            "budget {budget}: v/Int = {v}, s/Float = {s} registers (regalloc2: no dedicated scratch)"
        );
        println!(
            "{:<44} {:>7} {:>5} {:>8} {:>10} {:>8} {:>8} {:>8}",
            "function", "insts", "alloc", "ns/inst", "total ms", "moves", "spills", "reloads"
        );
        // Per allocator: ns per instruction on the 10k and 100k programs.
        let mut per_inst = [[0.0f64; 2]; 4];
        for ((name, func), adapter) in functions.iter().zip(&adapters) {
            let n = func.inst_count();
            for (k, alloc) in Alloc::ALL.into_iter().enumerate() {
                let what = format!("{name} ({}, {budget})", alloc.name());
                let (ns, c) = measure(func, adapter, alloc, (v, s), &mut buffer, &what);
                println!(
                    "{:<44} {n:>7} {:>5} {ns:>8.1} {:>10.2} {:>8} {:>8} {:>8}",
                    name,
                    alloc.name(),
                    ns * n as f64 / 1e6,
                    c.moves,
                    c.spills,
                    c.reloads
                );
                if name == "generated 10000" {
                    per_inst[k][0] = ns;
                } else if name == "generated 100000" {
                    per_inst[k][1] = ns;
                }
            }
        }
        for (k, alloc) in Alloc::ALL.into_iter().enumerate() {
            println!(
                "{:>5}: ratio 100k/10k per instruction {:.2} (goal <= 1.2)",
                alloc.name(),
                per_inst[k][1] / per_inst[k][0]
            );
        }
    }
}
