//! The QPU scheduler on generated programs: straight-line ALU code (both units, file and
//! accumulator registers, small immediates, uniforms, flags and conditional writes, SFU results
//! in r4) in regions separated by uniform branches, written one operation per instruction with
//! `nop`s enough for every latency. The oracle is the simulator on the unscheduled program:
//! scheduled (registers renamed, reordered, paired), the program must pass both validators,
//! end in the same registers, and read the uniform table it was given, rewritten in the order
//! it now reads it.

use kiln_qpu::isa::builder::{self, Reg};
use kiln_qpu::isa::{
    AddOp, BranchCond, Cond, Instr, MulOp, Signal, census::Census, validate_instrs, validate_mesa,
    waddr,
};
use kiln_qpu::sim::{Machine, Program};
use kiln_vc4::emit::{Emitted, Origin};
use kiln_vc4::schedule::{Effort, schedule, schedule_with};
use kiln_vc4::uniforms::Uniform;

/// The registers a test looks at after the program ends, as `schedule_with` numbers them:
/// ra0–ra5, rb0–rb5, r0–r3.
const OBSERVED: u128 = 0x3f | (0x3f << 32) | (0xf << 64);

const BASE: u32 = 0x10000;
const UNIF: u32 = 0x80000;

/// xorshift64*: the generator's randomness, seeded.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A load immediate of a random value that Mesa's validator reads as it is meant (it reads the
/// immediate's bits 12–23 as read addresses, and refuses two mutex reads).
fn load_imm(r: &mut Rng, to: Reg) -> Instr {
    loop {
        let i = builder::load_imm(to, r.next() as u32).unwrap();
        if validate_mesa(&[i.encode(), Instr::nop().encode()]).is_ok() {
            return i;
        }
    }
}

/// A register to write: r0–r3, ra0–ra5, rb0–rb5.
fn dst(r: &mut Rng) -> Reg {
    match r.below(3) {
        0 => Reg::Acc(r.below(4) as u8),
        1 => Reg::A(r.below(6) as u8),
        _ => Reg::B(r.below(6) as u8),
    }
}

/// An operand: a register, r4 (after an SFU write), a uniform (where the stream's position is
/// known: before the first branch) or a small immediate.
fn src(r: &mut Rng, r4: bool, uniform: bool) -> Reg {
    match r.below(10) {
        0 if uniform => Reg::ReadA(kiln_qpu::isa::raddr::UNIFORM),
        1 => Reg::SmallImm(r.below(48) as u8),
        2 if r4 => Reg::Acc(4),
        3..=5 => Reg::Acc(r.below(4) as u8),
        6 | 7 => Reg::A(r.below(6) as u8),
        _ => Reg::B(r.below(6) as u8),
    }
}

const ADD_OPS: [AddOp; 10] = [
    AddOp::Fadd,
    AddOp::Fsub,
    AddOp::Fmax,
    AddOp::Fmin,
    AddOp::Add,
    AddOp::Sub,
    AddOp::And,
    AddOp::Or,
    AddOp::Xor,
    AddOp::Shl,
];
const MUL_OPS: [MulOp; 3] = [MulOp::Fmul, MulOp::V8min, MulOp::Mul24];
const CONDS: [Cond; 4] = [Cond::Zs, Cond::Zc, Cond::Ns, Cond::Nc];

/// One generated operation (not yet padded).
fn operation(r: &mut Rng, r4: &mut bool, uniform: bool) -> Option<Instr> {
    let k = r.below(20);
    let i = if k == 0 {
        // An SFU write: r4 holds its result from the third instruction on.
        *r4 = true;
        let s = src(r, false, uniform);
        Instr::Alu(builder::mov(Reg::Io(waddr::SFU_RECIP), s).ok()?)
    } else if k == 1 {
        let to = dst(r);
        load_imm(r, to)
    } else if k < 11 {
        let op = ADD_OPS[r.below(ADD_OPS.len() as u64) as usize];
        let (a, b) = (src(r, *r4, uniform), src(r, *r4, uniform));
        let mut i = builder::qpu_a(op, dst(r), a, b).ok()?;
        match r.below(8) {
            0 => i = i.sf(),
            1 => i = i.cond_add(CONDS[r.below(4) as usize]),
            _ => {}
        }
        Instr::Alu(i)
    } else {
        let op = MUL_OPS[r.below(MUL_OPS.len() as u64) as usize];
        let (a, b) = (src(r, *r4, uniform), src(r, *r4, uniform));
        let mut i = builder::qpu_m(op, dst(r), a, b).ok()?;
        if r.below(8) == 0 {
            i = i.cond_mul(CONDS[r.below(4) as usize]);
        }
        Instr::Alu(i)
    };
    Some(i)
}

/// A program: an initialisation of every register, then regions of generated operations (the
/// first reading uniforms too: after a branch, the stream's position depends on the path,
/// and kiln's code resets it first) separated by branches — to the next region, or on flags some operation set over the next
/// region (so that a branch decided on the wrong flags ends in other registers), or always to
/// the next region or the one after — each
/// operation followed by two `nop`s (no latency is longer than three), and the program end
/// with its delay slots. Returns it with its uniform table.
fn program(seed: u64) -> (Vec<Instr>, Vec<Uniform>) {
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let nop = Instr::nop();
    let mut code = Vec::new();
    for reg in (0..4)
        .map(Reg::Acc)
        .chain((0..6).map(Reg::A))
        .chain((0..6).map(Reg::B))
    {
        code.push(load_imm(&mut r, reg));
    }
    code.extend([nop, nop]);
    let count = 1 + r.below(4) as usize;
    let mut r4 = false;
    let regions: Vec<Vec<Instr>> = (0..count)
        .map(|k| {
            let mut region = Vec::new();
            for _ in 0..(3 + r.below(25)) {
                if let Some(i) = operation(&mut r, &mut r4, k == 0) {
                    region.extend([i, nop, nop]);
                }
            }
            region
        })
        .collect();
    // Where each region starts, with a branch group after every region but the last.
    let mut starts = Vec::new();
    let mut at = code.len();
    for (k, region) in regions.iter().enumerate() {
        starts.push(at);
        at += region.len() + if k + 1 < count { 4 } else { 0 };
    }
    starts.push(at);
    const CONDS: [BranchCond; 4] = [
        BranchCond::AnyZs,
        BranchCond::AllZc,
        BranchCond::AnyNs,
        BranchCond::AllNc,
    ];
    for (k, region) in regions.iter().enumerate() {
        code.extend(region);
        if k + 1 < count {
            let (cond, target) = match r.below(3) {
                0 => (BranchCond::Always, starts[k + 1]),
                1 => (BranchCond::Always, starts[k + 2]),
                _ => (CONDS[r.below(4) as usize], starts[k + 2]),
            };
            let offset = 8 * (target as i32 - (code.len() as i32 + 4));
            code.extend([builder::branch(cond, true, offset), nop, nop, nop]);
        }
    }
    let end = signalled(Signal::ProgramEnd);
    code.extend([end, nop, nop]);
    let reads = code
        .iter()
        .filter(|i| kiln_qpu::isa::effects::takes_uniform(i))
        .count();
    let uniforms = (0..reads)
        .map(|_| Uniform::Constant(r.next() as u32))
        .collect();
    (code, uniforms)
}

/// Runs a program with its table; the registers it ends with (r0–r3, ra0–ra5, rb0–rb5).
fn run(code: &[Instr], uniforms: &[Uniform]) -> Vec<[u32; 16]> {
    let words: Vec<u64> = code.iter().map(Instr::encode).collect();
    let table: Vec<u32> = uniforms
        .iter()
        .map(|u| match u {
            Uniform::Constant(c) => *c,
            _ => unreachable!("generated tables hold constants"),
        })
        .collect();
    let mut m = Machine::new(1 << 21, Program::new(BASE, &words));
    m.mem.write_words(UNIF, &table).unwrap();
    m.add_qpu(UNIF);
    m.run(100_000).unwrap_or_else(|e| panic!("{e}"));
    let q = &m.qpus[0];
    let mut out: Vec<[u32; 16]> = q.acc[..4].to_vec();
    out.extend_from_slice(&q.ra[..6]);
    out.extend_from_slice(&q.rb[..6]);
    out
}

fn emitted(code: Vec<Instr>, uniforms: Vec<Uniform>) -> Emitted {
    Emitted {
        origins: vec![[Origin::Prologue; 2]; code.len()],
        instrs: code,
        uniforms,
        varyings: Vec::new(),
        output_rows: Vec::new(),
        bound: 0,
    }
}

/// Schedules `code` (which reads no uniforms) and checks the result: both validators pass and
/// the simulator ends in the registers the unscheduled code ends in (`what` names the case).
/// Returns the scheduled instructions and their listing.
fn scheduled_agrees(code: Vec<Instr>, what: &str) -> (Vec<Instr>, String) {
    let (s, listing) = scheduled_agrees_with(code, Vec::new(), what);
    (s.instrs, listing)
}

/// [`scheduled_agrees`] of `code` reading `uniforms`: the scheduled program and its listing.
fn scheduled_agrees_with(
    code: Vec<Instr>,
    uniforms: Vec<Uniform>,
    what: &str,
) -> (Emitted, String) {
    let expected = run(&code, &uniforms);
    let s = schedule_with(&emitted(code, uniforms), OBSERVED).unwrap();
    let words: Vec<u64> = s.instrs.iter().map(Instr::encode).collect();
    let listing = kiln_qpu::isa::disasm_program(&words, kiln_qpu::isa::Style::Mesa);
    assert_eq!(validate_instrs(&s.instrs), vec![], "{what}:\n{listing}");
    assert_eq!(validate_mesa(&words), Ok(()), "{what}:\n{listing}");
    assert_eq!(run(&s.instrs, &s.uniforms), expected, "{what}:\n{listing}");
    (s, listing)
}

/// The instructions in branches' delay slots that are copies of the instructions just before
/// the branch's target (the target's first instructions, which the branch now goes past).
fn target_copies(code: &[Instr]) -> Vec<u64> {
    let mut copies = Vec::new();
    for (b, ins) in code.iter().enumerate() {
        let Instr::Branch(br) = ins else { continue };
        let t = b as i64 + 4 + br.imm as i64 / 8;
        if t < 0 || t as usize == b + 4 {
            continue;
        }
        let t = t as usize;
        let k = (1..=3)
            .filter(|&j| {
                t >= j
                    && code[b + 4 - j..b + 4] == code[t - j..t]
                    && code[b + 4 - j..b + 4].iter().all(|i| *i != Instr::nop())
            })
            .max()
            .unwrap_or(0);
        copies.extend(code[b + 4 - k..b + 4].iter().map(Instr::encode));
    }
    copies
}

#[test]
fn scheduled_programs_end_in_the_same_registers() {
    let (mut before, mut after, mut written, mut copies) = (
        Census::default(),
        Census::default(),
        Census::default(),
        Census::default(),
    );
    let mut jumps_to_next = 0;
    // Programs the search made shorter; instructions with the list schedules and with it.
    let (mut shortened, mut listed, mut found) = (0, 0, 0);
    for seed in 0..400 {
        let (code, uniforms) = program(seed);
        assert_eq!(
            validate_instrs(&code),
            vec![],
            "seed {seed}: the input is valid"
        );
        let input: Vec<u64> = code.iter().map(Instr::encode).collect();
        assert_eq!(
            validate_mesa(&input),
            Ok(()),
            "seed {seed}: the input is valid"
        );
        let expected = run(&code, &uniforms);
        let e = emitted(code.clone(), uniforms);
        let s = schedule_with(&e, OBSERVED).unwrap();
        let words: Vec<u64> = s.instrs.iter().map(Instr::encode).collect();
        let listing = kiln_qpu::isa::disasm_program(&words, kiln_qpu::isa::Style::Mesa);
        // The bound over the whole regions only: the same code, a bound no higher.
        let whole = kiln_vc4::schedule::schedule_bounded(&e, OBSERVED, Effort::default()).unwrap();
        assert_eq!(whole.instrs, s.instrs, "seed {seed}:\n{listing}");
        assert!(whole.bound <= s.bound, "seed {seed}:\n{listing}");
        // With a search for shorter schedules: valid, the same results.
        let effort = Effort {
            bound_windows: true,
            search_steps: 2000,
        };
        let searched = kiln_vc4::schedule::schedule_bounded(&e, OBSERVED, effort).unwrap();
        let searched_words: Vec<u64> = searched.instrs.iter().map(Instr::encode).collect();
        let searched_listing =
            kiln_qpu::isa::disasm_program(&searched_words, kiln_qpu::isa::Style::Mesa);
        assert_eq!(
            validate_instrs(&searched.instrs),
            vec![],
            "seed {seed}:\n{searched_listing}"
        );
        assert_eq!(
            validate_mesa(&searched_words),
            Ok(()),
            "seed {seed}:\n{searched_listing}"
        );
        assert_eq!(
            run(&searched.instrs, &searched.uniforms),
            expected,
            "seed {seed}:\n{searched_listing}"
        );
        shortened += (searched.instrs.len() < s.instrs.len()) as usize;
        (listed, found) = (listed + s.instrs.len(), found + searched.instrs.len());
        assert_eq!(
            validate_instrs(&s.instrs),
            vec![],
            "seed {seed}:\n{listing}"
        );
        assert_eq!(validate_mesa(&words), Ok(()), "seed {seed}:\n{listing}");
        assert_eq!(
            run(&s.instrs, &s.uniforms),
            expected,
            "seed {seed}:\n{listing}"
        );
        written += Census::of(&code.iter().map(Instr::encode).collect::<Vec<_>>());
        // What is left once the writes nothing reads before the end are gone.
        let mut live = code.clone();
        kiln_vc4::dead_writes::remove(&mut live, OBSERVED);
        before += Census::of(&live.iter().map(Instr::encode).collect::<Vec<_>>());
        after += Census::of(&words);
        let copied = Census::of(&target_copies(&s.instrs));
        let jumps = code
            .iter()
            .filter(|i| matches!(i, Instr::Branch(b) if b.cond == BranchCond::Always && b.imm == 0))
            .count() as u64;
        // The same operations but the dead ones (the generated programs write values nothing
        // reads) and the copies in delay slots; where a jump to the next instruction went, its
        // blocks became one, in which dead writes go in chains (across a block's end, only
        // those dead by the liveness before any went).
        let (ran, kept) = (
            Census::of(&words).operations - copied.operations + jumps,
            Census::of(&live.iter().map(Instr::encode).collect::<Vec<_>>()).operations,
        );
        if jumps == 0 {
            assert_eq!(ran, kept, "seed {seed}:\n{listing}");
        } else {
            assert!(ran <= kept, "seed {seed}:\n{listing}");
        }
        copies += copied;
        jumps_to_next += jumps;
    }
    // The search found shorter schedules, and no program is longer for it overall.
    assert!(
        shortened > 0 && found < listed,
        "{shortened}: {found} of {listed}"
    );
    // The scheduler did its work: paired, without most `nop`s.
    assert!(jumps_to_next > 0);
    assert!(
        copies.operations > 0,
        "some delay slots take their target's work"
    );
    assert!(before.operations < written.operations);
    let load_imm = 40;
    let alu = after.operations - after.by_kind[load_imm] - after.by_kind[42];
    assert!(after.paired * 5 > alu, "{after:?}");
    assert!(
        after.instructions * 2 < before.instructions,
        "{after:?} from {before:?}"
    );
}

/// The oracle has teeth: an operation moved before the one whose result it reads (keeping
/// every latency), its own result written nowhere after, changes what the program ends with
/// unless the values happen to agree (a conditional write, equal operands), and the
/// comparison sees it.
#[test]
fn the_comparison_sees_a_wrong_order() {
    use kiln_qpu::isa::effects::{Resource, effects};
    let written = |i: &Instr| -> Vec<Resource> {
        let mut e = Vec::new();
        effects(i, &mut e);
        e.iter().filter(|e| e.write).map(|e| e.resource).collect()
    };
    let read = |i: &Instr| -> Vec<Resource> {
        let mut e = Vec::new();
        effects(i, &mut e);
        e.iter().filter(|e| !e.write).map(|e| e.resource).collect()
    };
    let (mut tried, mut caught) = (0, 0);
    for seed in 0..400 {
        let (code, uniforms) = program(seed);
        let expected = run(&code, &uniforms);
        // Each operation is followed by two `nop`s, so swapping two operations three
        // instructions apart keeps every latency; in the first region, which always runs.
        let first_branch = code
            .iter()
            .position(|i| matches!(i, Instr::Branch(_)))
            .unwrap_or(code.len() - 3);
        let pair = (16..first_branch.saturating_sub(3)).find(|&i| {
            let (x, y) = (&code[i], &code[i + 3]);
            let register = |w: &Resource| {
                matches!(
                    w,
                    Resource::FileA(_) | Resource::FileB(_) | Resource::Acc(_)
                )
            };
            let last_write = written(y)
                .iter()
                .any(|w| register(w) && !code[i + 4..].iter().any(|z| written(z).contains(w)));
            matches!((x, y), (Instr::Alu(_), Instr::Alu(_)))
                && last_write
                && written(x)
                    .iter()
                    .any(|w| register(w) && read(y).contains(w))
        });
        if let Some(i) = pair {
            let mut wrong = code.clone();
            wrong.swap(i, i + 3);
            tried += 1;
            if run(&wrong, &uniforms) != expected {
                caught += 1;
            }
        }
    }
    // Min, max, and, or and conditional writes often give the value either way.
    assert!(
        tried > 60 && caught * 3 > tried * 2,
        "{caught} of {tried} caught"
    );
}

/// After a branch target the stream's position depends on the path: a read there with no
/// reset before it is refused, not reordered.
#[test]
fn a_uniform_read_after_a_branch_target_needs_a_reset() {
    let nop = Instr::nop();
    let read =
        Instr::Alu(builder::mov(Reg::Acc(0), Reg::ReadA(kiln_qpu::isa::raddr::UNIFORM)).unwrap());
    let end = signalled(Signal::ProgramEnd);
    let code = vec![
        builder::branch(BranchCond::AllZc, true, 0),
        nop,
        nop,
        nop,
        read,
        end,
        nop,
        nop,
    ];
    let e = emitted(code, vec![Uniform::Constant(1)]);
    let err = schedule(&e).unwrap_err();
    assert!(err.to_string().contains("no stream reset"), "{err}");
}

/// The lower bound counts the uniform stream: an instruction reads one uniform at most, so
/// four moves from it take four instructions, though the units alone would pair them two by
/// two. The schedule meets the bound it reports.
#[test]
fn the_bound_counts_one_uniform_read_to_an_instruction() {
    let nop = Instr::nop();
    let read = |k| {
        Instr::Alu(builder::mov(Reg::Acc(k), Reg::ReadA(kiln_qpu::isa::raddr::UNIFORM)).unwrap())
    };
    let end = signalled(Signal::ProgramEnd);
    let code = vec![read(0), read(1), read(2), read(3), end, nop, nop];
    let uniforms: Vec<Uniform> = (1..=4).map(Uniform::Constant).collect();
    let (s, listing) = scheduled_agrees_with(code, uniforms, "four reads");
    assert_eq!(s.bound as usize, s.instrs.len(), "{listing}");
}

/// The lower bound counts a time window: three products with the uniform stream that wait for
/// the sum before them share the instructions after it, one each — four in all, though the
/// critical path is two instructions, the units would take the four operations in two, the
/// mul unit its three in three and the uniform reads alone in three. The schedule meets the
/// bound it reports.
#[test]
fn the_bound_counts_the_uniform_reads_that_wait_for_a_result() {
    let nop = Instr::nop();
    let uniform = Reg::ReadA(kiln_qpu::isa::raddr::UNIFORM);
    let code = vec![
        add(Reg::Acc(0), Reg::Acc(1), Reg::Acc(1)),
        mul(Reg::Acc(1), Reg::Acc(0), uniform),
        mul(Reg::Acc(2), Reg::Acc(0), uniform),
        mul(Reg::Acc(3), Reg::Acc(0), uniform),
        signalled(Signal::ProgramEnd),
        nop,
        nop,
    ];
    let uniforms: Vec<Uniform> = (1..=3).map(Uniform::Constant).collect();
    let (s, listing) = scheduled_agrees_with(code, uniforms, "three products");
    assert_eq!(s.bound as usize, s.instrs.len(), "{listing}");
}

/// A conditional branch's free delay slots take the first instructions of the code it falls
/// through to where that is harmless when the branch is taken: here writes masked by `.zs`
/// after `branch.all_zc` (taken only where no lane has Z set). Both ways of the branch end in
/// the registers the unscheduled program ends in.
#[test]
fn a_branchs_slots_take_masked_work_it_falls_through_to() {
    let nop = Instr::nop();
    let end = signalled(Signal::ProgramEnd);
    let program = |flag: u32| {
        let masked = |op: AddOp, d: Reg| {
            Instr::Alu(
                builder::qpu_a(op, d, Reg::A(0), Reg::B(0))
                    .unwrap()
                    .cond_add(Cond::Zs),
            )
        };
        let mut code = vec![
            builder::load_imm(Reg::A(0), 5).unwrap(),
            builder::load_imm(Reg::B(0), 7).unwrap(),
            builder::load_imm(Reg::A(1), 1).unwrap(),
            builder::load_imm(Reg::B(1), 2).unwrap(),
            builder::load_imm(Reg::Acc(0), flag).unwrap(),
            Instr::Alu(builder::mov(Reg::Nop, Reg::Acc(0)).unwrap().sf()),
        ];
        // To the program end, past the masked side.
        code.push(builder::branch(BranchCond::AllZc, true, 8 * 4));
        code.extend([nop, nop, nop]);
        code.extend([masked(AddOp::Add, Reg::A(1)), nop, nop]);
        code.extend([masked(AddOp::Sub, Reg::B(1)), nop, nop]);
        code.extend([end, nop, nop]);
        code
    };
    for flag in [0, 1] {
        let (instrs, listing) = scheduled_agrees(program(flag), &format!("flag {flag}"));
        let at = instrs
            .iter()
            .position(|i| matches!(i, Instr::Branch(_)))
            .expect("the branch");
        let hoisted = instrs[at + 1..at + 4]
            .iter()
            .any(|i| matches!(i, Instr::Alu(a) if a.w.cond_add == Cond::Zs));
        assert!(hoisted, "a masked write in the slots:\n{listing}");
    }
}

/// A conditional branch's free delay slots take the flags the code it falls through to sets,
/// where the target sets its own before testing them (a divergent loop's exit tests, each
/// branch deciding on flags set just before it); where the target tests the flags first, they
/// stay after the slots. Every way through ends in the registers of the unscheduled program.
#[test]
fn a_branchs_slots_take_flags_the_target_sets_again() {
    let nop = Instr::nop();
    let end = signalled(Signal::ProgramEnd);
    let program = |first: u32, second: u32, target_tests_first: bool| {
        let masked = |op: AddOp, d: Reg, c: Cond| {
            Instr::Alu(
                builder::qpu_a(op, d, Reg::A(0), Reg::B(0))
                    .unwrap()
                    .cond_add(c),
            )
        };
        let set = |r: Reg| Instr::Alu(builder::mov(Reg::Nop, r).unwrap().sf());
        let mut code = vec![
            builder::load_imm(Reg::A(0), 5).unwrap(),
            builder::load_imm(Reg::B(0), 7).unwrap(),
            builder::load_imm(Reg::Acc(0), first).unwrap(),
            builder::load_imm(Reg::Acc(1), second).unwrap(),
            builder::load_imm(Reg::Acc(2), first ^ second).unwrap(),
            set(Reg::Acc(0)),
        ];
        // To the target, past the second test.
        code.push(builder::branch(BranchCond::AnyZs, true, 8 * 6));
        code.extend([nop, nop, nop]);
        code.extend([set(Reg::Acc(1)), masked(AddOp::Add, Reg::A(1), Cond::Zs)]);
        code.extend([nop, nop, masked(AddOp::Sub, Reg::B(1), Cond::Zc), nop, nop]);
        // The target.
        if target_tests_first {
            code.extend([masked(AddOp::Add, Reg::B(2), Cond::Zs), nop, nop]);
        }
        code.extend([
            set(Reg::Acc(2)),
            masked(AddOp::Sub, Reg::A(2), Cond::Zs),
            nop,
            nop,
        ]);
        code.extend([end, nop, nop]);
        code
    };
    for target_tests_first in [false, true] {
        for (first, second) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let (instrs, listing) = scheduled_agrees(
                program(first, second, target_tests_first),
                &format!("flags {first} {second}"),
            );
            let at = instrs
                .iter()
                .position(|i| matches!(i, Instr::Branch(_)))
                .expect("the branch");
            let in_slots = instrs[at + 1..at + 4]
                .iter()
                .any(|i| matches!(i, Instr::Alu(a) if a.w.sf));
            assert_eq!(
                in_slots, !target_tests_first,
                "the second test in the slots only where the target sets the flags first:\n{listing}"
            );
        }
    }
}

/// A conditional branch over a jump (`branch.any_zs T; branch L; T:`) becomes one branch on
/// the opposite condition to the jump's target; where another branch goes to the jump, both
/// stay. Every way through ends in the registers of the unscheduled program.
#[test]
fn a_branch_over_a_jump_becomes_one_branch() {
    let nop = Instr::nop();
    let end = signalled(Signal::ProgramEnd);
    let program = |flag: u32, jump_targeted: bool| {
        let add = |d: Reg, a: Reg| Instr::Alu(builder::qpu_a(AddOp::Add, d, a, Reg::B(0)).unwrap());
        let mut code = vec![
            builder::load_imm(Reg::A(0), 5).unwrap(),
            builder::load_imm(Reg::B(0), 7).unwrap(),
            builder::load_imm(Reg::Acc(0), flag).unwrap(),
            Instr::Alu(builder::mov(Reg::Nop, Reg::Acc(0)).unwrap().sf()),
        ];
        if jump_targeted {
            // Straight to the jump where lane 0's flag is clear.
            code.push(builder::branch(BranchCond::AllZc, true, 8 * 4));
            code.extend([nop, nop, nop]);
        }
        // Over the jump to T (8 instructions on), or on to the jump to L.
        code.push(builder::branch(BranchCond::AnyZs, true, 8 * 4));
        code.extend([nop, nop, nop]);
        code.push(builder::branch(BranchCond::Always, true, 8 * 7));
        code.extend([nop, nop, nop]);
        // T: one side, then on to the end.
        code.extend([add(Reg::A(1), Reg::A(0)), nop, nop]);
        code.push(builder::branch(BranchCond::Always, true, 8 * 3));
        code.extend([nop, nop, nop]);
        // L: the other.
        code.extend([add(Reg::B(1), Reg::A(0)), nop, nop]);
        code.extend([end, nop, nop]);
        code
    };
    for jump_targeted in [false, true] {
        for flag in [0, 1] {
            let code = program(flag, jump_targeted);
            let branches = |c: &[Instr]| c.iter().filter(|i| matches!(i, Instr::Branch(_))).count();
            let before = branches(&code);
            let (instrs, listing) = scheduled_agrees(code, &format!("flag {flag}"));
            let merged = usize::from(!jump_targeted);
            assert_eq!(branches(&instrs), before - merged, "{listing}");
        }
    }
}

/// A jump's delay slots take copies of its target's first instructions and the jump goes
/// past them; where the target's first instruction cannot be copied (it reads the uniform
/// stream), nothing is. Either way the program ends in the registers of the unscheduled one.
#[test]
fn a_jumps_slots_take_its_targets_first_instructions() {
    let nop = Instr::nop();
    let end = signalled(Signal::ProgramEnd);
    for copyable in [true, false] {
        let mut code = vec![
            builder::load_imm(Reg::A(0), 5).unwrap(),
            builder::load_imm(Reg::B(0), 7).unwrap(),
            nop,
            nop,
            add(Reg::A(1), Reg::A(0), Reg::B(0)),
            // Over the next instruction to the target.
            builder::branch(BranchCond::Always, true, 8),
            nop,
            nop,
            nop,
            add(Reg::B(3), Reg::A(0), Reg::A(0)),
        ];
        // The target: additions in a chain, plain or each reading the element number (an I/O
        // read, which a copy may not do).
        let elem = Reg::ReadA(kiln_qpu::isa::raddr::ELEMENT_QPU);
        let (x, y) = if copyable {
            (Reg::A(0), Reg::A(0))
        } else {
            (elem, elem)
        };
        code.extend([
            add(Reg::B(1), x, Reg::B(0)),
            add(Reg::Acc(0), y, Reg::B(0)),
            nop,
            nop,
        ]);
        code.extend([add(Reg::Acc(1), Reg::Acc(0), Reg::B(0)), nop, nop]);
        code.extend([add(Reg::B(2), Reg::Acc(1), y), nop, nop]);
        code.extend([end, nop, nop]);
        let (instrs, listing) = scheduled_agrees(code, &format!("copyable {copyable}"));
        let copies = target_copies(&instrs).len();
        if copyable {
            assert!(copies >= 1, "{listing}");
        } else {
            assert_eq!(copies, 0, "{listing}");
        }
    }
}

/// Where a branch target lies among the three instructions before the slots, what runs there
/// depends on the way in: another branch's slots may have written r4 by the SFU two
/// instructions before the first slot. A copy that reads r4 goes no earlier than the SFU's
/// latency allows after any instruction there (the path-following validator is the oracle).
#[test]
fn copies_in_slots_wait_for_what_another_way_in_may_have_written() {
    use kiln_vc4::target_slots::fill;
    let nop = Instr::nop();
    let end = signalled(Signal::ProgramEnd);
    let reads_r4 =
        |d: Reg| Instr::Alu(builder::qpu_a(AddOp::Fadd, d, Reg::Acc(4), Reg::Acc(4)).unwrap());
    let code = vec![
        builder::load_imm(Reg::A(0), 0x4000_0000).unwrap(),
        builder::load_imm(Reg::Acc(0), 1).unwrap(),
        Instr::Alu(builder::mov(Reg::Nop, Reg::Acc(0)).unwrap().sf()),
        // To L, with an SFU write in its last slot.
        builder::branch(BranchCond::AnyZc, true, 8 * 2),
        nop,
        nop,
        Instr::Alu(builder::mov(Reg::Io(waddr::SFU_RECIP), Reg::A(0)).unwrap()),
        nop,
        nop,
        // L: on to X.
        builder::branch(BranchCond::Always, true, 8),
        nop,
        nop,
        nop,
        nop,
        // X: three reads of r4.
        reads_r4(Reg::B(1)),
        reads_r4(Reg::B(2)),
        reads_r4(Reg::B(3)),
        end,
        nop,
        nop,
    ];
    assert_eq!(validate_instrs(&code), vec![], "the input is valid");
    let mut out = code.clone();
    let mut origins = vec![[Origin::Prologue; 2]; out.len()];
    let from: Vec<Option<usize>> = (0..out.len()).map(Some).collect();
    let live = vec![!0u128; out.len() + 1];
    let filled = fill(&mut out, &mut origins, &from, &live);
    let words: Vec<u64> = out.iter().map(Instr::encode).collect();
    let listing = kiln_qpu::isa::disasm_program(&words, kiln_qpu::isa::Style::Mesa);
    assert_eq!(validate_instrs(&out), vec![], "{listing}");
    assert_eq!(filled, 2, "two copies, the first a slot later:\n{listing}");
    assert_eq!(run(&out, &[]), run(&code, &[]), "{listing}");
}

/// A jump to the instruction after its delay slots goes, with its slots: the code on both
/// sides becomes one region. A conditional branch there stays (its slots run on both ways).
#[test]
fn a_jump_to_the_next_instruction_goes() {
    let nop = Instr::nop();
    let end = signalled(Signal::ProgramEnd);
    let add = |d: Reg, a: Reg| Instr::Alu(builder::qpu_a(AddOp::Add, d, a, Reg::B(0)).unwrap());
    for cond in [BranchCond::Always, BranchCond::AnyZs] {
        let code = vec![
            builder::load_imm(Reg::A(0), 5).unwrap(),
            builder::load_imm(Reg::B(0), 7).unwrap(),
            Instr::Alu(builder::mov(Reg::Nop, Reg::A(0)).unwrap().sf()),
            add(Reg::A(1), Reg::A(0)),
            builder::branch(cond, true, 0),
            nop,
            nop,
            nop,
            add(Reg::B(1), Reg::A(0)),
            nop,
            nop,
            end,
            nop,
            nop,
        ];
        let (instrs, listing) = scheduled_agrees(code, &format!("{cond:?}"));
        let branches = instrs
            .iter()
            .filter(|i| matches!(i, Instr::Branch(_)))
            .count();
        assert_eq!(
            branches,
            usize::from(cond != BranchCond::Always),
            "{listing}"
        );
    }
}

/// A stream reset after a branch target is scheduled with the region's work, not kept in
/// place: its add pairs with a multiplication, and the uniform read after it still waits its
/// two instructions and takes the entry after the reset. The program ends in the registers
/// of the unscheduled one on both ways of the branch.
#[test]
fn a_stream_reset_pairs_with_the_regions_work() {
    let nop = Instr::nop();
    let end = signalled(Signal::ProgramEnd);
    let fmul = |d: Reg, a: Reg, b: Reg| Instr::Alu(builder::qpu_m(MulOp::Fmul, d, a, b).unwrap());
    let reset = Instr::Alu(
        builder::qpu_a(
            AddOp::Add,
            Reg::Io(waddr::UNIFORMS_ADDRESS),
            Reg::Acc(5),
            Reg::ReadA(kiln_qpu::isa::raddr::UNIFORM),
        )
        .unwrap(),
    );
    for flag in [0, 1] {
        let code = vec![
            builder::load_imm(Reg::A(0), 0x4000_0000).unwrap(),
            builder::load_imm(Reg::B(0), 0x4040_0000).unwrap(),
            builder::load_imm(Reg::Acc(0), flag).unwrap(),
            Instr::Alu(builder::mov(Reg::A(1), Reg::ReadA(kiln_qpu::isa::raddr::UNIFORM)).unwrap()),
            Instr::Alu(builder::mov(Reg::Nop, Reg::Acc(0)).unwrap().sf()),
            // Both ways reach the target with the stream at entry 1.
            builder::branch(BranchCond::AnyZs, true, 0),
            nop,
            nop,
            nop,
            // The target: the stream reset to entry 2 (entry 1 holds the table's address).
            builder::load_imm(Reg::Acc(5), 8).unwrap(),
            reset,
            nop,
            nop,
            Instr::Alu(builder::mov(Reg::B(1), Reg::ReadA(kiln_qpu::isa::raddr::UNIFORM)).unwrap()),
            fmul(Reg::A(2), Reg::A(0), Reg::B(0)),
            fmul(Reg::B(2), Reg::A(0), Reg::A(0)),
            nop,
            nop,
            end,
            nop,
            nop,
        ];
        let uniforms = vec![
            Uniform::Constant(11),
            Uniform::Constant(UNIF),
            Uniform::Constant(13),
        ];
        assert_eq!(validate_instrs(&code), vec![], "the input is valid");
        let expected = run(&code, &uniforms);
        let s = schedule_with(&emitted(code, uniforms), OBSERVED).unwrap();
        let words: Vec<u64> = s.instrs.iter().map(Instr::encode).collect();
        let listing = kiln_qpu::isa::disasm_program(&words, kiln_qpu::isa::Style::Mesa);
        assert_eq!(validate_instrs(&s.instrs), vec![], "{listing}");
        assert_eq!(validate_mesa(&words), Ok(()), "{listing}");
        assert_eq!(run(&s.instrs, &s.uniforms), expected, "{listing}");
        let paired_reset = s.instrs.iter().any(|i| {
            matches!(i, Instr::Alu(a) if a.op_mul == MulOp::Fmul)
                && kiln_qpu::isa::effects::writes_addr(i, waddr::UNIFORMS_ADDRESS)
        });
        assert!(paired_reset, "{listing}");
    }
}

/// Where the last three instructions before a thread switch all have a small immediate (a
/// chain of them), an instruction with no signal from earlier in the region moves down to
/// carry the switch, the chain in its delay slots, instead of the switch on the last one with
/// two `nop`s after; not where moving it would break a latency it fills (both validators).
/// The program ends in the registers of the unscheduled one.
#[test]
fn a_thread_switch_takes_a_carrier_from_earlier_in_its_region() {
    let nop = Instr::nop();
    let end = signalled(Signal::ProgramEnd);
    let switch = signalled(Signal::ThreadSwitch);
    // `latency`: the chain starts from a file register written just before, so that the only
    // instruction that could carry the switch fills that latency and may not move.
    for latency in [false, true] {
        let mut code = vec![
            builder::load_imm(Reg::A(0), 5).unwrap(),
            builder::load_imm(Reg::B(0), 7).unwrap(),
            builder::load_imm(Reg::Acc(0), 3).unwrap(),
            nop,
            nop,
        ];
        let chain_from = if latency {
            code.extend([add(Reg::A(3), Reg::A(0), Reg::B(0)), nop, nop]);
            Reg::A(3)
        } else {
            Reg::Acc(0)
        };
        code.extend([
            add(Reg::B(1), Reg::A(0), Reg::B(0)),
            add(Reg::Acc(1), chain_from, Reg::SmallImm(1)),
            add(Reg::Acc(2), Reg::Acc(1), Reg::SmallImm(2)),
            add(Reg::A(2), Reg::Acc(2), Reg::SmallImm(3)),
            switch,
            nop,
            nop,
        ]);
        // The accumulators do not keep their values across the switch: new ones after it.
        code.extend((0..4).map(|r| builder::load_imm(Reg::Acc(r), 10 + r as u32).unwrap()));
        code.extend([nop, nop, add(Reg::B(2), Reg::A(2), Reg::B(1)), nop, nop]);
        code.extend([end, nop, nop]);
        let (instrs, listing) = scheduled_agrees(code, &format!("latency {latency}"));
        let at = instrs
            .iter()
            .position(|i| i.signal() == Some(Signal::ThreadSwitch))
            .expect("the switch");
        if !latency {
            assert!(
                instrs[at + 1..at + 3].iter().all(|i| *i != Instr::nop()),
                "the switch's slots hold the chain:\n{listing}"
            );
        }
    }
}

/// A thread switch's slots the region before it leaves free take the first instruction
/// after the switch even where it writes an accumulator (which does not keep its value across
/// the switch: the simulator poisons them): its value goes to a file register free there,
/// and its readers read that — not where a reader has no read port free for it. The program
/// ends in the registers of the unscheduled one.
#[test]
fn a_thread_switchs_slots_take_an_accumulator_result_in_a_file_register() {
    let nop = Instr::nop();
    let end = signalled(Signal::ProgramEnd);
    let switch = signalled(Signal::ThreadSwitch);
    for ports_free in [true, false] {
        let mut code = vec![
            builder::load_imm(Reg::A(0), 5).unwrap(),
            builder::load_imm(Reg::B(0), 7).unwrap(),
            builder::load_imm(Reg::A(1), 11).unwrap(),
            builder::load_imm(Reg::B(1), 13).unwrap(),
            nop,
            nop,
            switch,
            nop,
            nop,
            add(Reg::Acc(1), Reg::A(0), Reg::B(0)),
        ];
        // The readers: with both read ports free, or one with file A's taken and one with
        // file B's.
        if ports_free {
            code.push(add(Reg::B(2), Reg::Acc(1), Reg::Acc(1)));
        } else {
            code.push(add(Reg::B(2), Reg::Acc(1), Reg::A(1)));
            code.push(add(Reg::A(3), Reg::Acc(1), Reg::B(1)));
        }
        // The value ends there (r1 is looked at after the program).
        code.push(builder::load_imm(Reg::Acc(1), 1).unwrap());
        code.extend([nop, nop, end, nop, nop]);
        let what = format!("ports free {ports_free}");
        let (instrs, listing) = scheduled_agrees(code, &what);
        let at = instrs
            .iter()
            .position(|i| i.signal() == Some(Signal::ThreadSwitch))
            .expect("the switch");
        // The add of ra0 and rb0, which comes after the switch in the input.
        let the_add = |i: &Instr| matches!(i, Instr::Alu(a) if a.op_add == AddOp::Add && a.raddr_a == 0 && a.raddr_b == 0);
        let before_switch = instrs[..at + 3].iter().any(the_add);
        assert_eq!(
            before_switch, ports_free,
            "{what}: the add in the switch's slots:\n{listing}"
        );
    }
}

/// Reads of an SFU result's copy (`mov r1, r4`) read r4 itself while r4 holds it, and the copy
/// goes when nothing else reads it. Before a later SFU request, only a read the request waits
/// for anyway reads r4 (another would be tied before the request); a read the request does
/// not wait for, and one after it, read the copy. The program ends in the registers of the
/// unscheduled one.
#[test]
fn reads_of_r4s_copy_read_r4() {
    let nop = Instr::nop();
    let end = signalled(Signal::ProgramEnd);
    let fadd = |d: Reg, a: Reg, b: Reg| Instr::Alu(builder::qpu_a(AddOp::Fadd, d, a, b).unwrap());
    let recip = |a: Reg| Instr::Alu(builder::mov(Reg::Io(waddr::SFU_RECIP), a).unwrap());
    // The next request: none, one of what the copy's reader wrote, one of something else.
    for (case, next) in [None, Some(Reg::B(1)), Some(Reg::B(0))]
        .into_iter()
        .enumerate()
    {
        let mut code = vec![
            builder::load_imm(Reg::A(0), 0x4000_0000).unwrap(),
            builder::load_imm(Reg::B(0), 0x4080_0000).unwrap(),
            nop,
            nop,
            recip(Reg::A(0)),
            nop,
            nop,
            Instr::Alu(builder::mov(Reg::Acc(1), Reg::Acc(4)).unwrap()),
            fadd(Reg::B(1), Reg::Acc(1), Reg::Acc(1)),
        ];
        if let Some(x) = next {
            code.extend([nop, nop, recip(x), nop, nop]);
            code.push(fadd(Reg::B(2), Reg::Acc(1), Reg::Acc(4)));
        }
        // r1 is written again before the end: the copy is read only by the additions.
        code.extend([builder::load_imm(Reg::Acc(1), 1).unwrap(), end, nop, nop]);
        let (instrs, listing) = scheduled_agrees(code, &format!("case {case}"));
        // A copy is an instruction that reads r4 and writes r1 (on either unit).
        let reads_r4_writes = |i: &Instr, w: kiln_qpu::isa::effects::Resource| {
            use kiln_qpu::isa::effects::{Resource, effects};
            let mut e = Vec::new();
            effects(i, &mut e);
            e.iter().any(|e| !e.write && e.resource == Resource::R4)
                && e.iter().any(|e| e.write && e.resource == w)
        };
        use kiln_qpu::isa::effects::Resource;
        let copies = instrs
            .iter()
            .filter(|i| reads_r4_writes(i, Resource::Acc(1)))
            .count();
        let first_reads_r4 = instrs
            .iter()
            .any(|i| reads_r4_writes(i, Resource::FileB(1)));
        // The copy stays for the read after a request; the first addition reads r4 unless the
        // request does not wait for it.
        assert_eq!(copies, usize::from(next.is_some()), "{listing}");
        assert_eq!(first_reads_r4, case != 2, "{listing}");
    }
}

/// What `run` gives of the registers `live` names (bits as `schedule_with` numbers them).
fn run_live(code: &[Instr], live: u128) -> Vec<[u32; 16]> {
    let regs = run(code, &[]);
    // `run`'s order: r0–r3, ra0–ra5, rb0–rb5.
    let bits = (64..68).chain(0..6).chain(32..38);
    regs.into_iter()
        .zip(bits)
        .filter(|&(_, b)| live >> b & 1 != 0)
        .map(|(r, _)| r)
        .collect()
}

/// `code` through the bypass, with registers `live` read after it: how many `nop`s went, and
/// the code, checked by both validators and against the simulator on the input.
fn bypassed(code: &[Instr], live: u128) -> (usize, Vec<Instr>) {
    assert_eq!(validate_instrs(code), vec![], "the input is valid");
    let mut out = code.to_vec();
    let mut origins = vec![[Origin::Prologue; 2]; out.len()];
    let mut from: Vec<Option<usize>> = (0..out.len()).map(Some).collect();
    let removed = kiln_vc4::bypass::bypass(&mut out, &mut origins, &mut from, live);
    let words: Vec<u64> = out.iter().map(Instr::encode).collect();
    let listing = kiln_qpu::isa::disasm_program(&words, kiln_qpu::isa::Style::Mesa);
    assert_eq!(validate_instrs(&out), vec![], "{listing}");
    assert_eq!(validate_mesa(&words), Ok(()), "{listing}");
    assert_eq!(out.len(), code.len() - removed, "{listing}");
    assert_eq!((origins.len(), from.len()), (out.len(), out.len()));
    assert_eq!(run_live(&out, live), run_live(code, live), "{listing}");
    (removed, out)
}

/// A program end after `code`.
fn ended(mut code: Vec<Instr>) -> Vec<Instr> {
    code.extend([signalled(Signal::ProgramEnd), Instr::nop(), Instr::nop()]);
    code
}

/// A `nop` with signal `sig` (a program end, a thread switch).
fn signalled(sig: Signal) -> Instr {
    let mut a = kiln_qpu::isa::AluInstr::nop();
    a.sig = sig;
    Instr::Alu(a)
}

/// `add d, a, b` on the add unit.
fn add(d: Reg, a: Reg, b: Reg) -> Instr {
    Instr::Alu(builder::qpu_a(AddOp::Add, d, a, b).unwrap())
}

/// `fmul d, a, b` on the mul unit.
fn mul(d: Reg, a: Reg, b: Reg) -> Instr {
    Instr::Alu(builder::qpu_m(kiln_qpu::isa::MulOp::Fmul, d, a, b).unwrap())
}

/// `fadd ra1, ra0, rb0; nop; fmul rb1, ra1, rb0; fadd rb2, ra1, rb0`: the sum goes through a
/// free accumulator, both readers read it, and the `nop` goes; where ra1 is read after the
/// end, the first reader copies the sum to it (an operation more, paired).
#[test]
fn a_file_result_read_next_goes_through_an_accumulator() {
    let alu = |i: Result<kiln_qpu::isa::AluInstr, _>| Instr::Alu(i.unwrap());
    let code = ended(vec![
        builder::load_imm(Reg::A(0), 0x3f80_0000).unwrap(),
        builder::load_imm(Reg::B(0), 0x4000_0000).unwrap(),
        builder::load_imm(Reg::Acc(0), 7).unwrap(),
        alu(builder::qpu_a(AddOp::Fadd, Reg::A(1), Reg::A(0), Reg::B(0))),
        Instr::nop(),
        alu(builder::qpu_m(MulOp::Fmul, Reg::B(1), Reg::A(1), Reg::B(0))),
        alu(builder::qpu_a(AddOp::Fadd, Reg::B(2), Reg::A(1), Reg::B(0))),
        alu(builder::mov(Reg::B(3), Reg::Acc(0))),
    ]);
    let ops = |c: &[Instr]| Census::of(&c.iter().map(Instr::encode).collect::<Vec<_>>());
    // rb1, rb2, rb3 read after; r0 holds a value, so the sum takes r1.
    let live = (0b1110 << 32) | (1 << 64);
    let (removed, out) = bypassed(&code, live);
    assert_eq!(removed, 1);
    assert_eq!(ops(&out).operations, ops(&code).operations);
    let sum = match out[3] {
        Instr::Alu(a) => a.w.waddr_add,
        _ => unreachable!(),
    };
    assert_eq!(sum, waddr::R0 + 1, "r0 is live: the sum takes r1");
    // ra1 read after too: copied back by the first reader.
    let (removed, out) = bypassed(&code, live | 0b10);
    assert_eq!(removed, 1);
    assert_eq!(ops(&out).operations, ops(&code).operations + 1);
}

/// No bypass where the `nop` keeps another latency (r4 three instructions after an SFU
/// write), where a branch goes to the reader, or where the writer is in a delay slot; the
/// check has teeth: without the `nop` the first program is invalid.
#[test]
fn a_bypass_keeps_every_other_latency() {
    let alu = |i: Result<kiln_qpu::isa::AluInstr, _>| Instr::Alu(i.unwrap());
    let sum = alu(builder::qpu_a(AddOp::Fadd, Reg::A(1), Reg::A(0), Reg::B(0)));
    let init = [
        builder::load_imm(Reg::A(0), 0x3f80_0000).unwrap(),
        builder::load_imm(Reg::B(0), 0x4000_0000).unwrap(),
        builder::load_imm(Reg::Acc(2), 0).unwrap(),
    ];
    let live = 0b10 << 32;
    let sfu = ended(
        [
            &init[..],
            &[
                alu(builder::mov(Reg::Io(waddr::SFU_RECIP), Reg::B(0))),
                sum,
                Instr::nop(),
                alu(builder::qpu_m(
                    MulOp::Fmul,
                    Reg::B(1),
                    Reg::A(1),
                    Reg::Acc(4),
                )),
            ],
        ]
        .concat(),
    );
    assert_eq!(bypassed(&sfu, live).0, 0);
    let mut without = sfu.clone();
    without.remove(5);
    assert!(
        validate_instrs(&without)
            .iter()
            .any(|v| v.rule == kiln_qpu::isa::validate::Rule::SfuR4)
    );
    // A branch to the reader: another way in reads ra1 as it is.
    let targeted = ended(
        [
            &init[..],
            &[
                builder::branch(BranchCond::Always, true, 8 * 2),
                Instr::nop(),
                Instr::nop(),
                Instr::nop(),
                sum,
                Instr::nop(),
                alu(builder::qpu_m(MulOp::Fmul, Reg::B(1), Reg::A(1), Reg::B(0))),
            ],
        ]
        .concat(),
    );
    assert_eq!(bypassed(&targeted, live).0, 0);
    // The sum in a branch's last delay slot runs on the taken path too, which reads ra1.
    let slot = ended(
        [
            &init[..],
            &[
                builder::branch(BranchCond::Always, true, 8 * 2),
                Instr::nop(),
                Instr::nop(),
                sum,
                Instr::nop(),
                alu(builder::qpu_m(MulOp::Fmul, Reg::B(1), Reg::A(1), Reg::B(0))),
                Instr::nop(),
                alu(builder::qpu_m(MulOp::Fmul, Reg::B(1), Reg::A(1), Reg::B(0))),
            ],
        ]
        .concat(),
    );
    assert_eq!(bypassed(&slot, live).0, 0);
}

/// A conditional move before a read (`mov.zc ra2, 1; nop; fadd rb2, ra2, rb0`, the execute
/// mask's update before its test): the instruction before copies ra2's old value to a free
/// accumulator, the move's other unit makes the same move to it, the reader reads it, and the
/// `nop` goes; lanes with Z set keep the old value in both.
#[test]
fn a_conditional_move_read_next_goes_through_an_accumulator() {
    let alu = |i: Result<kiln_qpu::isa::AluInstr, _>| Instr::Alu(i.unwrap());
    let code = ended(vec![
        builder::load_imm(Reg::A(2), 7).unwrap(),
        builder::load_imm(Reg::B(0), 3).unwrap(),
        // Z set in element 0 only.
        alu(builder::mov(Reg::Nop, Reg::ReadA(kiln_qpu::isa::raddr::ELEMENT_QPU)).map(|i| i.sf())),
        alu(builder::qpu_a(AddOp::Add, Reg::B(1), Reg::B(0), Reg::B(0))),
        alu(builder::mov(Reg::A(2), Reg::SmallImm(1)).map(|i| i.cond_add(Cond::Zc))),
        Instr::nop(),
        alu(builder::qpu_a(AddOp::Add, Reg::B(2), Reg::A(2), Reg::B(0))),
    ]);
    let ops = |c: &[Instr]| Census::of(&c.iter().map(Instr::encode).collect::<Vec<_>>());
    let live = 0b100 | (0b110 << 32);
    let (removed, out) = bypassed(&code, live);
    assert_eq!(removed, 1);
    assert_eq!(ops(&out).operations, ops(&code).operations + 2);
    // Element 0 kept 7, the others took 1: the read agrees lane by lane.
    let rb2 = run_live(&out, 1 << 34)[0];
    assert_eq!((rb2[0], rb2[1]), (10, 4));
}
