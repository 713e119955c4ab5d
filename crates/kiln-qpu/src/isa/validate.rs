//! Validator for the rules emitted QPU code must obey (`../shared/vc4/README.md`, "Rules
//! emitted code must obey"; Mesa `vc4_qpu_validate.c`; vc4asm's validator; reference guide
//! §"Summary of Instruction Restrictions"): every violation, with its index and rule. The rules
//! and the conventions it reads them with are in `docs/vc4.md` ("Validator").

use super::effects::*;
use super::fields::*;
use super::instr::*;
use super::latency;

/// A rule of `vc4/README.md` (numbers as listed there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// 1. A file A/B register written by one instruction is not read by the next.
    RegfileReadAfterWrite,
    /// 2. r4 is read from the third instruction after an SFU write on; no other SFU write,
    ///    ldtmu or colour load in the two instructions after it.
    SfuR4,
    /// 3. At most one peripheral access per instruction.
    Peripherals,
    /// 4. Thread end and its two delay slots.
    ThreadEnd,
    /// 4. No TLB access or scoreboard wait in the first two instructions.
    FirstTwo,
    /// 5. TMU writes more than three instructions after a TMU no-swap write.
    TmuNoswap,
    /// 6. No uniform read within two instructions after a uniforms-address write.
    UniformsAddress,
    /// 7. Rotation inputs and the instruction before a rotation.
    Rotation,
    /// 8. No ms-flags read within two instructions after a TLB Z write.
    TlbZMsFlags,
    /// 9. At least two non-branch instructions between branches.
    BranchDistance,
    /// 9. No conditional writes to TMU or VPM.
    ConditionalPeripheral,
    /// 9. Both units write one register only with inverse conditions.
    DualWrite,
    /// 9. No VPM setup write together with another VPM access in one instruction.
    VpmSetup,
    /// Threaded shaders (Mesa): no thread switch with the scoreboard locked, after a last
    /// thread switch or with one queued; TMU results collected per thread switch. The
    /// kernel's (`vc4_validate_shaders.c`): no branch in a thread switch's delay slots, no
    /// register 16–31 of file A or B (the other thread's half) read or written.
    ThreadSwitch,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::RegfileReadAfterWrite => "regfile-raw",
            Rule::SfuR4 => "sfu",
            Rule::Peripherals => "multi_periph",
            Rule::ThreadEnd => "thrend",
            Rule::FirstTwo => "first_two",
            Rule::TmuNoswap => "tmu_noswap",
            Rule::UniformsAddress => "unif_addr",
            Rule::Rotation => "rotate",
            Rule::TlbZMsFlags => "tlb_z_ms_flags",
            Rule::BranchDistance => "branch_distance",
            Rule::ConditionalPeripheral => "cond_periph",
            Rule::DualWrite => "dual_write",
            Rule::VpmSetup => "vpm_setup",
            Rule::ThreadSwitch => "thrsw",
        }
    }
}

/// One violation: instruction index, rule and explanation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub index: usize,
    pub rule: Rule,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "instruction {}: [{}] {}",
            self.index,
            self.rule.name(),
            self.message
        )
    }
}

/// Registers 16–31 of file A (true) or B an instruction names, as the kernel counts them: the
/// encoded read addresses (B unless a small immediate), a register branch's, and both write
/// addresses of ALU, load-immediate and semaphore instructions.
fn other_threads_registers(i: &Instr) -> Vec<(bool, u8)> {
    let mut out = Vec::new();
    let mut write = |w: &WriteFields| {
        out.extend(
            [(!w.ws, w.waddr_add), (w.ws, w.waddr_mul)]
                .into_iter()
                .filter(|&(_, r)| (16..32).contains(&r)),
        );
    };
    match i {
        Instr::Alu(a) => {
            write(&a.w);
            if (16..32).contains(&a.raddr_a) {
                out.push((true, a.raddr_a));
            }
            if a.sig != Signal::SmallImm && (16..32).contains(&a.raddr_b) {
                out.push((false, a.raddr_b));
            }
        }
        Instr::LoadImm(l) => write(&l.w),
        Instr::Semaphore(s) => write(&s.w),
        Instr::Branch(b) if b.reg && (16..32).contains(&b.raddr_a) => out.push((true, b.raddr_a)),
        Instr::Branch(_) => {}
    }
    out
}

fn is_thrend(i: &Instr) -> bool {
    sig(i).is_some_and(|s| s.is_program_end())
}

/// Where straight-line code starts anew (index `n` = the end included): every relative branch's
/// target, and the instruction after each branch's three delay slots.
pub fn block_starts(prog: &[Instr]) -> Vec<bool> {
    let n = prog.len();
    let mut starts = vec![false; n + 1];
    for (i, ins) in prog.iter().enumerate() {
        if let Instr::Branch(b) = ins {
            starts[(i + 4).min(n)] = true;
            let t = i as i64 + 4 + b.imm as i64 / 8;
            if b.rel && !b.reg && (0..=n as i64).contains(&t) {
                starts[t as usize] = true;
            }
        }
    }
    starts
}

/// The possible next instructions of one instruction: the next, a branch target, both, or
/// none (inline: an instruction has at most two).
pub type Successors = smallvec::SmallVec<[usize; 2]>;

/// Control flow: the possible next instructions of each instruction.
pub fn successors(prog: &[Instr]) -> Vec<Successors> {
    let n = prog.len();
    let mut succ: Vec<Successors> = (0..n)
        .map(|i| {
            if i + 1 < n {
                smallvec::smallvec![i + 1]
            } else {
                Successors::new()
            }
        })
        .collect();
    for (i, ins) in prog.iter().enumerate() {
        if is_thrend(ins) && i + 2 < n {
            succ[i + 2].clear();
        }
        if let Instr::Branch(b) = ins {
            let last = i + 3;
            if last >= n {
                continue;
            }
            let target = if b.rel && !b.reg && b.imm % 8 == 0 {
                let t = (i as i64 + 4) + (b.imm as i64) / 8;
                (0..n as i64).contains(&t).then_some(t as usize)
            } else {
                None
            };
            if b.cond == BranchCond::Always {
                succ[last].clear();
            }
            if let Some(t) = target {
                if !succ[last].contains(&t) {
                    succ[last].push(t);
                }
            }
        }
    }
    succ
}

/// Instructions reachable from `i` in 1..=k steps, with their distance.
fn following(succ: &[Successors], i: usize, k: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut frontier = vec![i];
    for d in 1..=k {
        let mut next = Vec::new();
        for f in frontier {
            for &s in &succ[f] {
                if !out.contains(&(s, d)) {
                    out.push((s, d));
                    next.push(s);
                }
            }
        }
        frontier = next;
    }
    out
}

fn inverse(a: Cond, b: Cond) -> bool {
    matches!(
        (a, b),
        (Cond::Zs, Cond::Zc)
            | (Cond::Zc, Cond::Zs)
            | (Cond::Ns, Cond::Nc)
            | (Cond::Nc, Cond::Ns)
            | (Cond::Cs, Cond::Cc)
            | (Cond::Cc, Cond::Cs)
            | (Cond::Never, _)
            | (_, Cond::Never)
    )
}

/// Validates a program; returns every violation found (empty = valid).
pub fn validate(words: &[u64]) -> Vec<Violation> {
    let prog: Vec<Instr> = words.iter().map(|w| decode(*w)).collect();
    validate_instrs(&prog)
}

/// Validates decoded instructions.
pub fn validate_instrs(prog: &[Instr]) -> Vec<Violation> {
    let n = prog.len();
    let succ = successors(prog);
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, s) in succ.iter().enumerate() {
        for &j in s {
            preds[j].push(i);
        }
    }
    let mut v = Vec::new();
    let mut add = |index: usize, rule: Rule, message: String| {
        v.push(Violation {
            index,
            rule,
            message,
        })
    };

    for (i, ins) in prog.iter().enumerate() {
        let ws = writes(ins);
        // 1. regfile read after write
        for &(j, _) in &following(&succ, i, latency::REGFILE - 1) {
            let (ra, rb) = regfile_reads(&prog[j]);
            for w in ws.iter().filter(|w| w.waddr < 32) {
                if (w.file_a && ra == Some(w.waddr)) || (!w.file_a && rb == Some(w.waddr)) {
                    add(
                        j,
                        Rule::RegfileReadAfterWrite,
                        format!(
                            "reads r{}{} written by the previous instruction {i}",
                            if w.file_a { "a" } else { "b" },
                            w.waddr
                        ),
                    );
                }
            }
        }
        // 2. SFU
        if writes_sfu(ins) {
            for (j, d) in following(&succ, i, latency::SFU - 1) {
                if reads_r4(&prog[j]) {
                    add(
                        j,
                        Rule::SfuR4,
                        format!("reads r4 {d} instruction(s) after the SFU write at {i}"),
                    );
                }
                if writes_sfu(&prog[j]) || loads_r4_signal(&prog[j]) {
                    add(
                        j,
                        Rule::SfuR4,
                        format!("writes r4 {d} instruction(s) after the SFU write at {i}"),
                    );
                }
            }
        }
        // 3. peripherals
        let p = peripheral_accesses(ins);
        if p > 1 {
            add(i, Rule::Peripherals, format!("{p} peripheral accesses"));
        }
        // 4. first two instructions
        if i < 2 && (sig(ins) == Some(Signal::ScoreboardWait) || is_tlb(ins)) {
            add(
                i,
                Rule::FirstTwo,
                "scoreboard wait (explicit or by a TLB access) in the first two instructions"
                    .into(),
            );
        }
        // 5. TMU no-swap
        if writes_addr(ins, waddr::TMU_NOSWAP) {
            for (j, d) in following(&succ, i, 3) {
                if writes(&prog[j])
                    .iter()
                    .any(|w| (56..=63).contains(&w.waddr))
                {
                    add(
                        j,
                        Rule::TmuNoswap,
                        format!("TMU write {d} instruction(s) after the TMU no-swap write at {i}"),
                    );
                }
            }
            if prog[..i]
                .iter()
                .any(|p| writes(p).iter().any(|w| (56..=63).contains(&w.waddr)))
            {
                add(
                    i,
                    Rule::TmuNoswap,
                    "TMU no-swap changed after the TMU has been used".into(),
                );
            }
        }
        // 6. uniforms address
        if writes_addr(ins, waddr::UNIFORMS_ADDRESS) {
            for (j, d) in following(&succ, i, 2) {
                if reads_io(&prog[j], raddr::UNIFORM) {
                    add(
                        j,
                        Rule::UniformsAddress,
                        format!(
                            "uniform read {d} instruction(s) after the uniforms-address write at {i}"
                        ),
                    );
                }
            }
        }
        // 7. rotation
        if let Instr::Alu(a) = ins {
            if a.sig == Signal::SmallImm && a.raddr_b >= 48 && a.op_mul != MulOp::Nop {
                if a.mul_a as u8 > 3 || a.mul_b as u8 > 3 {
                    add(
                        i,
                        Rule::Rotation,
                        "rotation with a mul input other than r0–r3".into(),
                    );
                }
                for &p in &preds[i] {
                    if a.raddr_b == 48 && writes_addr(&prog[p], waddr::R5) {
                        add(
                            i,
                            Rule::Rotation,
                            format!("rotate by r5 right after the r5 write at {p}"),
                        );
                    }
                    for m in [a.mul_a, a.mul_b] {
                        if (m as u8) <= 3 && writes_addr(&prog[p], waddr::R0 + m as u8) {
                            add(
                                i,
                                Rule::Rotation,
                                format!(
                                    "rotated r{} written by the previous instruction {p}",
                                    m as u8
                                ),
                            );
                        }
                    }
                }
            }
        }
        // 8. TLB Z then ms flags
        if writes_addr(ins, waddr::TLB_Z) {
            for (j, d) in following(&succ, i, 2) {
                if let Instr::Alu(a) = &prog[j] {
                    if a.raddr_a == raddr::MS_REV {
                        add(
                            j,
                            Rule::TlbZMsFlags,
                            format!(
                                "ms_flags read {d} instruction(s) after the TLB Z write at {i}"
                            ),
                        );
                    }
                }
            }
        }
        // 9. branches, conditional peripheral writes, dual writes, VPM setup
        if matches!(ins, Instr::Branch(_)) {
            for (j, p) in prog.iter().enumerate().take((i + 3).min(n)).skip(i + 1) {
                if matches!(p, Instr::Branch(_)) {
                    add(
                        j,
                        Rule::BranchDistance,
                        format!("branch within three instructions of the branch at {i}"),
                    );
                }
            }
        }
        for w in &ws {
            let periph = (56..=63).contains(&w.waddr)
                || w.waddr == waddr::TMU_NOSWAP
                || (48..=50).contains(&w.waddr);
            if periph && !matches!(w.cond, Cond::Always | Cond::Never) {
                add(
                    i,
                    Rule::ConditionalPeripheral,
                    format!("conditional write to peripheral address {}", w.waddr),
                );
            }
        }
        if ws.len() == 2
            && ws[0].waddr == ws[1].waddr
            && (ws[0].waddr >= 32 || ws[0].file_a == ws[1].file_a)
            && !inverse(ws[0].cond, ws[1].cond)
        {
            add(
                i,
                Rule::DualWrite,
                format!(
                    "both units write address {} without inverse conditions",
                    ws[0].waddr
                ),
            );
        }
        let setup_writes = ws.iter().filter(|w| w.waddr == waddr::VPM_SETUP).count();
        if setup_writes > 0
            && (setup_writes > 1
                || reads_io(ins, raddr::VPM)
                || ws.iter().any(|w| w.waddr == waddr::VPM))
        {
            add(
                i,
                Rule::VpmSetup,
                "VPM setup write together with another VPM access".into(),
            );
        }
    }

    // 4. thread end
    let mut scoreboard_locked = false;
    for (i, ins) in prog.iter().enumerate() {
        if !is_thrend(ins) {
            if is_tlb(ins) || sig(ins) == Some(Signal::ScoreboardWait) {
                scoreboard_locked = true;
            }
            continue;
        }
        if writes(ins).iter().any(|w| w.waddr < 32) {
            add(
                i,
                Rule::ThreadEnd,
                "thread end writes register file A or B".into(),
            );
        }
        if is_tlb(ins) && !scoreboard_locked {
            add(
                i,
                Rule::ThreadEnd,
                "TLB access in the thread end instruction without an earlier scoreboard wait"
                    .into(),
            );
        }
        if i + 2 >= n {
            add(
                i,
                Rule::ThreadEnd,
                "program ends before the two thread-end delay slots".into(),
            );
        }
        for (j, p) in prog.iter().enumerate().take((i + 3).min(n)).skip(i) {
            if writes_addr(p, waddr::VPM)
                || reads_io(p, raddr::VARYING)
                || reads_io(p, raddr::UNIFORM)
                || reads_io(p, raddr::VPM)
            {
                add(
                    j,
                    Rule::ThreadEnd,
                    format!(
                        "varying, uniform or VPM access in thread end slot {}",
                        j - i
                    ),
                );
            }
            let (ra, rb) = regfile_reads(p);
            if ra == Some(14) || rb == Some(14) || writes(p).iter().any(|w| w.waddr == 14) {
                add(
                    j,
                    Rule::ThreadEnd,
                    format!("register 14 used in thread end slot {}", j - i),
                );
            }
        }
        if i + 2 < n && writes_addr(&prog[i + 2], waddr::TLB_Z) {
            add(
                i + 2,
                Rule::ThreadEnd,
                "final instruction writes TLB Z".into(),
            );
        }
    }

    // Threaded shaders (Mesa).
    let threaded = prog.iter().any(|p| {
        matches!(
            sig(p),
            Some(Signal::ThreadSwitch | Signal::LastThreadSwitch)
        )
    });
    if threaded {
        let mut last_found = false;
        let mut locked = false;
        let mut outstanding = 0i32;
        let mut last_outstanding = 0i32;
        let mut switch_at: Option<usize> = None;
        for (i, ins) in prog.iter().enumerate() {
            if switch_at == Some(i) {
                if last_outstanding != 0 {
                    add(
                        i,
                        Rule::ThreadSwitch,
                        "thread switch with results of the previous switch still in the TMU FIFO"
                            .into(),
                    );
                }
                last_outstanding = outstanding;
                outstanding = 0;
            }
            if is_tlb(ins) || sig(ins) == Some(Signal::ScoreboardWait) {
                locked = true;
            }
            match sig(ins) {
                Some(s @ (Signal::ThreadSwitch | Signal::LastThreadSwitch)) => {
                    if locked {
                        add(
                            i,
                            Rule::ThreadSwitch,
                            "thread switch with the scoreboard locked".into(),
                        );
                    }
                    if last_found {
                        add(
                            i,
                            Rule::ThreadSwitch,
                            "thread switch after a last thread switch".into(),
                        );
                    }
                    if s == Signal::LastThreadSwitch {
                        last_found = true;
                    }
                    if switch_at.is_some_and(|t| i < t) {
                        add(
                            i,
                            Rule::ThreadSwitch,
                            "thread switch with a thread switch queued".into(),
                        );
                    }
                    switch_at = Some(i + 3);
                }
                None if matches!(ins, Instr::Branch(_)) && switch_at.is_some_and(|t| i < t) => {
                    add(
                        i,
                        Rule::ThreadSwitch,
                        "branch in the delay slots of a thread switch".into(),
                    );
                }
                Some(Signal::LoadTmu0 | Signal::LoadTmu1) => {
                    if last_outstanding == 0 {
                        add(
                            i,
                            Rule::ThreadSwitch,
                            "TMU load with nothing requested before the previous thread switch"
                                .into(),
                        );
                    }
                    last_outstanding -= 1;
                }
                _ => {}
            }
            if writes(ins)
                .iter()
                .any(|w| w.waddr == waddr::TMU0_S || w.waddr == waddr::TMU1_S)
            {
                outstanding += 1;
            }
            for (file_a, reg) in other_threads_registers(ins) {
                add(
                    i,
                    Rule::ThreadSwitch,
                    format!(
                        "{}{reg} in a threaded shader (registers 16–31 belong to the other thread)",
                        if file_a { "ra" } else { "rb" }
                    ),
                );
            }
        }
    }
    v.sort_by_key(|x| x.index);
    v
}
