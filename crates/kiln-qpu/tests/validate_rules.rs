//! One failing and one passing program per validator rule, built with the instruction builder.

use kiln_qpu::isa::*;

fn nop() -> u64 {
    AluInstr::nop().encode()
}
/// `mov waddr, mux` on the add unit.
fn mov(w: u8, m: Mux) -> AluInstr {
    AluInstr::nop().add(AddOp::Or, w, m, m)
}
fn thrend() -> u64 {
    AluInstr::nop().sig(Signal::ProgramEnd).encode()
}
fn rules(words: &[u64]) -> Vec<Rule> {
    validate(words).into_iter().map(|v| v.rule).collect()
}
fn check(rule: Rule, bad: &[u64], good: &[u64]) {
    let r = rules(bad);
    assert!(r.contains(&rule), "{rule:?} not found in {r:?}");
    let g = validate(good);
    assert!(g.is_empty(), "{rule:?}: good program rejected: {g:?}");
}

#[test]
fn regfile_read_after_write() {
    let w = mov(5, Mux::R0).encode();
    let r = mov(waddr::R1, Mux::A).raddr_a(5).encode();
    check(Rule::RegfileReadAfterWrite, &[w, r], &[w, nop(), r]);
    // the other file is a different register
    let rb = mov(waddr::R1, Mux::B).raddr_b(5).encode();
    assert!(validate(&[w, rb]).is_empty());
}

#[test]
fn sfu_r4() {
    let s = mov(waddr::SFU_RECIP, Mux::R0).encode();
    let r = mov(waddr::R1, Mux::R4).encode();
    check(Rule::SfuR4, &[s, nop(), r], &[s, nop(), nop(), r]);
    check(Rule::SfuR4, &[s, nop(), s], &[s, nop(), nop(), s]);
    let ld = AluInstr::nop().sig(Signal::LoadTmu0).encode();
    assert!(rules(&[s, ld]).contains(&Rule::SfuR4));
}

#[test]
fn peripherals() {
    let both = mov(waddr::TMU0_S, Mux::R0)
        .mul(MulOp::V8min, waddr::SFU_RECIP, Mux::R1, Mux::R1)
        .encode();
    check(
        Rule::Peripherals,
        &[both, nop()],
        &[mov(waddr::TMU0_S, Mux::R0).encode(), nop()],
    );
}

#[test]
fn thread_end() {
    let bad = mov(3, Mux::R0).sig(Signal::ProgramEnd).encode();
    let good = mov(waddr::R0, Mux::R0).sig(Signal::ProgramEnd).encode();
    check(
        Rule::ThreadEnd,
        &[nop(), nop(), bad, nop(), nop()],
        &[nop(), nop(), good, nop(), nop()],
    );
    let unif = mov(waddr::R0, Mux::A).raddr_a(raddr::UNIFORM).encode();
    assert!(rules(&[nop(), nop(), thrend(), nop(), unif]).contains(&Rule::ThreadEnd));
    let z = mov(waddr::TLB_Z, Mux::R0).encode();
    assert!(rules(&[nop(), nop(), thrend(), nop(), z]).contains(&Rule::ThreadEnd));
    assert!(rules(&[nop(), nop(), thrend(), nop()]).contains(&Rule::ThreadEnd));
}

#[test]
fn first_two() {
    let sb = AluInstr::nop().sig(Signal::ScoreboardWait).encode();
    check(
        Rule::FirstTwo,
        &[nop(), sb, nop()],
        &[nop(), nop(), sb, nop()],
    );
}

#[test]
fn tmu_noswap() {
    let ns = mov(waddr::TMU_NOSWAP, Mux::R0).encode();
    let s = mov(waddr::TMU0_S, Mux::R1).encode();
    check(
        Rule::TmuNoswap,
        &[ns, nop(), nop(), s, nop()],
        &[ns, nop(), nop(), nop(), s, nop()],
    );
}

#[test]
fn uniforms_address() {
    let w = mov(waddr::UNIFORMS_ADDRESS, Mux::R0).encode();
    let u = mov(waddr::R1, Mux::A).raddr_a(raddr::UNIFORM).encode();
    check(Rule::UniformsAddress, &[w, nop(), u], &[w, nop(), nop(), u]);
}

#[test]
fn rotation() {
    let rot_ra = AluInstr::nop()
        .mul(MulOp::V8min, waddr::R1, Mux::A, Mux::A)
        .raddr_a(3)
        .small_imm(49)
        .encode();
    let rot_r0 = AluInstr::nop()
        .mul(MulOp::V8min, waddr::R1, Mux::R0, Mux::R0)
        .small_imm(49)
        .encode();
    check(
        Rule::Rotation,
        &[nop(), rot_ra, nop()],
        &[nop(), rot_r0, nop()],
    );
    let w0 = mov(waddr::R0, Mux::R1).encode();
    assert!(rules(&[w0, rot_r0]).contains(&Rule::Rotation));
    let w5 = mov(waddr::R5, Mux::R1).encode();
    let by_r5 = AluInstr::nop()
        .mul(MulOp::V8min, waddr::R1, Mux::R0, Mux::R0)
        .small_imm(48)
        .encode();
    check(Rule::Rotation, &[w5, by_r5], &[w5, nop(), by_r5]);
}

#[test]
fn tlb_z_ms_flags() {
    let sb = AluInstr::nop().sig(Signal::ScoreboardWait).encode();
    let z = mov(waddr::TLB_Z, Mux::R0).encode();
    let ms = mov(waddr::R1, Mux::A).raddr_a(raddr::MS_REV).encode();
    check(
        Rule::TlbZMsFlags,
        &[nop(), nop(), sb, z, nop(), ms],
        &[nop(), nop(), sb, z, nop(), nop(), ms],
    );
}

#[test]
fn vc4asm_rules() {
    let br = encode(&Instr::Branch(Branch {
        unused: 0,
        cond: BranchCond::Always,
        rel: true,
        reg: false,
        raddr_a: 0,
        ws: false,
        waddr_add: waddr::NOP,
        waddr_mul: waddr::NOP,
        imm: 0,
    }));
    check(
        Rule::BranchDistance,
        &[br, nop(), br, nop(), nop(), nop()],
        &[br, nop(), nop(), br, nop(), nop(), nop()],
    );
    let cond_tmu = mov(waddr::TMU0_S, Mux::R0).cond_add(Cond::Zs).encode();
    check(
        Rule::ConditionalPeripheral,
        &[cond_tmu],
        &[mov(waddr::TMU0_S, Mux::R0).encode()],
    );
    let dual = mov(waddr::R1, Mux::R0).mul(MulOp::V8min, waddr::R1, Mux::R1, Mux::R1);
    check(
        Rule::DualWrite,
        &[dual.encode()],
        &[dual.cond_add(Cond::Zs).cond_mul(Cond::Zc).encode()],
    );
    let setup = mov(waddr::VPM_SETUP, Mux::R0)
        .mul(MulOp::V8min, waddr::R1, Mux::A, Mux::A)
        .raddr_a(raddr::VPM);
    check(
        Rule::VpmSetup,
        &[setup.encode()],
        &[mov(waddr::VPM_SETUP, Mux::R0).encode()],
    );
}

#[test]
fn thread_switch() {
    let sw = AluInstr::nop().sig(Signal::ThreadSwitch).encode();
    check(
        Rule::ThreadSwitch,
        &[sw, sw, nop(), nop(), nop()],
        &[sw, nop(), nop(), nop(), nop()],
    );
    // The kernel's rules: no branch in the two delay slots, no register 16–31 of file A or B.
    let br = builder::branch(BranchCond::Always, true, 0).encode();
    check(
        Rule::ThreadSwitch,
        &[sw, nop(), br, nop(), nop(), nop(), nop()],
        &[sw, nop(), nop(), br, nop(), nop(), nop()],
    );
    for upper in [
        mov(waddr::R0, Mux::A).raddr_a(16).encode(),
        mov(waddr::R0, Mux::B).raddr_b(31).encode(),
        mov(20, Mux::R0).encode(),
    ] {
        check(
            Rule::ThreadSwitch,
            &[sw, nop(), nop(), upper],
            &[
                sw,
                nop(),
                nop(),
                mov(waddr::R0, Mux::A).raddr_a(15).encode(),
            ],
        );
        // Without a thread switch the whole files are the thread's.
        assert!(validate(&[nop(), upper]).is_empty());
    }
    // A small immediate in raddr_b is no register.
    let imm = mov(waddr::R0, Mux::B)
        .sig(Signal::SmallImm)
        .raddr_b(20)
        .encode();
    assert!(validate(&[sw, nop(), nop(), imm]).is_empty());
}
