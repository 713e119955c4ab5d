//! Simulator semantics per op and per rule, with programs written in the assembler's syntax.
//! Expectations come from the reference guide and `vc4/README.md`, not from the simulator.

use kiln_qpu::isa::assemble;
use kiln_qpu::sim::{Machine, Program, SimErrorKind, TMU_LATENCY, tmu};

const BASE: u32 = 0x10000;
const UNIF: u32 = 0x80000;

fn machine(src: &str, uniforms: &[u32]) -> Machine {
    let code = assemble(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let mut m = Machine::new(1 << 21, Program::new(BASE, &code));
    m.mem.write_words(UNIF, uniforms).unwrap();
    m.add_qpu(UNIF);
    m
}

fn run(src: &str, uniforms: &[u32]) -> Machine {
    let mut m = machine(src, uniforms);
    m.run(100_000).unwrap_or_else(|e| panic!("{e}"));
    m
}

const END: &str = "sig_end nop\nnop\nnop\n";

fn f(x: f32) -> u32 {
    x.to_bits()
}

#[test]
fn regfile_writes_visible_one_instruction_later_accumulators_at_once() {
    let m = run(
        &format!(
            "load_imm ra1, nop, 7\n\
             mov r0, ra1 ; nop nop, r0, r0\n\
             mov r1, ra1 ; nop nop, r0, r0\n\
             load_imm r2, nop, 9\n\
             mov r3, r2 ; nop nop, r0, r0\n{END}"
        ),
        &[],
    );
    let q = &m.qpus[0];
    assert_eq!(
        q.acc[0], [0; 16],
        "ra1 read right after its write gives the old value"
    );
    assert_eq!(q.acc[1], [7; 16]);
    assert_eq!(q.acc[3], [9; 16]);
}

#[test]
fn flags_and_conditions_per_lane() {
    // N set in lanes 0..7 (elem - 8 < 0), Z in lane 8, C (borrow) in lanes 0..7
    let m = run(
        &format!(
            "sig_small_imm sub.sf r0, elem, 8 ; nop nop, r0, r0\n\
             sig_small_imm mov.ns r1, 1 ; nop nop, r0, r0\n\
             sig_small_imm mov.zs r2, 2 ; nop nop, r0, r0\n\
             sig_small_imm mov.cs r3, 3 ; nop nop, r0, r0\n{END}"
        ),
        &[],
    );
    let q = &m.qpus[0];
    assert_eq!(q.n, 0x00ff);
    assert_eq!(q.z, 0x0100);
    assert_eq!(q.c, 0x00ff);
    for l in 0..16 {
        assert_eq!(q.acc[1][l], if l < 8 { 1 } else { 0 });
        assert_eq!(q.acc[2][l], if l == 8 { 2 } else { 0 });
        assert_eq!(q.acc[3][l], if l < 8 { 3 } else { 0 });
    }
}

#[test]
fn flags_come_from_mul_when_add_is_nop() {
    let m = run(
        &format!("load_imm r0, nop, 0\nnop nop, r0, r0 ; fmul.sf r1, r0, r0\n{END}"),
        &[],
    );
    assert_eq!(m.qpus[0].z, 0xffff);
}

#[test]
fn add_ops() {
    let cases: &[(&str, u32, u32, u32)] = &[
        ("add", 0xffff_ffff, 2, 1),
        ("sub", 3, 5, (-2i32) as u32),
        ("shr", 0x8000_0000, 31, 1),
        ("asr", 0x8000_0000, 31, 0xffff_ffff),
        ("ror", 1, 4, 0x1000_0000),
        ("shl", 3, 33, 6),
        ("min", (-5i32) as u32, 3, (-5i32) as u32),
        ("max", (-5i32) as u32, 3, 3),
        ("and", 0b1100, 0b1010, 0b1000),
        ("or", 0b1100, 0b1010, 0b1110),
        ("xor", 0b1100, 0b1010, 0b0110),
        ("not", 0, 0, 0xffff_ffff),
        ("clz", 0x0000_8000, 0, 16),
        ("fadd", f(1.5), f(2.25), f(3.75)),
        ("fsub", f(1.5), f(2.25), f(-0.75)),
        ("fmin", f(-1.0), f(2.0), f(-1.0)),
        ("fmax", f(-1.0), f(2.0), f(2.0)),
        ("fminabs", f(-1.0), f(2.0), f(1.0)),
        ("fmaxabs", f(-3.0), f(2.0), f(3.0)),
        ("ftoi", f(-7.9), 0, (-7i32) as u32),
        ("itof", (-3i32) as u32, 0, f(-3.0)),
        ("v8adds", 0x01ff_8010, 0x0102_8010, 0x02ff_ff20),
        ("v8subs", 0x0510_0000, 0x0620_0000, 0),
    ];
    for (op, a, b, want) in cases {
        let m = run(
            &format!(
                "load_imm r0, nop, {a:#x}\nload_imm r1, nop, {b:#x}\n\
                 {op} r2, r0, r1 ; nop nop, r0, r0\n{END}"
            ),
            &[],
        );
        assert_eq!(m.qpus[0].acc[2][0], *want, "{op} {a:#x} {b:#x}");
    }
}

#[test]
fn mul_ops() {
    let cases: &[(&str, u32, u32, u32)] = &[
        ("fmul", f(1.5), f(-4.0), f(-6.0)),
        ("mul24", 0x0100_0003, 0x0000_0005, 15),
        ("v8muld", 0x80ff_ff00, 0x80ff_8010, 0x40ff_8000),
        ("v8min", 0x0102_0304, 0x0401_0402, 0x0101_0302),
        ("v8max", 0x0102_0304, 0x0401_0402, 0x0402_0404),
        ("v8adds", 0xf0f0_0101, 0x2020_0101, 0xffff_0202),
        ("v8subs", 0x1010_0101, 0x2005_0202, 0x000b_0000),
    ];
    for (op, a, b, want) in cases {
        let m = run(
            &format!(
                "load_imm r0, nop, {a:#x}\nload_imm r1, nop, {b:#x}\n\
                 nop nop, r0, r0 ; {op} r2, r0, r1\n{END}"
            ),
            &[],
        );
        assert_eq!(m.qpus[0].acc[2][0], *want, "{op}");
    }
}

#[test]
fn small_immediates_and_rotations() {
    // per-element unsigned ldi gives lane i the value i & 3; rotate r0 by 1: lane i ← lane i-1
    let m = run(
        &format!(
            "mov r0, elem ; nop nop, r0, r0\n\
             mov ra2, elem ; nop nop, r0, r0\n\
             nop\n\
             nop nop, r0, r0 ; mov r1, r0+1\n\
             nop nop, r0, r0 ; mov r2, ra2+1\n\
             sig_small_imm mov r3, 0.500000 ; nop nop, r0, r0\n{END}"
        ),
        &[],
    );
    let q = &m.qpus[0];
    for l in 0..16u32 {
        assert_eq!(q.acc[1][l as usize], (l + 15) % 16, "full rotation");
        assert_eq!(
            q.acc[2][l as usize],
            (l & !3) | ((l + 3) % 4),
            "quad rotation"
        );
    }
    assert_eq!(q.acc[3][0], f(0.5));
}

#[test]
fn rotate_by_r5() {
    let m = run(
        &format!(
            "mov r0, elem ; nop nop, r0, r0\n\
             load_imm r5rep, nop, 3\n\
             nop\n\
             nop nop, r0, r0 ; mov r1, r0+r5\n{END}"
        ),
        &[],
    );
    for l in 0..16u32 {
        assert_eq!(m.qpus[0].acc[1][l as usize], (l + 13) % 16);
    }
}

#[test]
fn per_element_load_immediates() {
    // lane i: (bit(16+i) << 1) | bit(i)
    let imm = 0x0003_0005u32; // lane0: 11b, lane1: 10b, lane2: 01b
    let m = run(
        &format!("load_imm.peu r0, nop, {imm:#x}\nload_imm.pes r1, nop, {imm:#x}\n{END}"),
        &[],
    );
    let q = &m.qpus[0];
    assert_eq!(&q.acc[0][..4], &[3, 2, 1, 0]);
    assert_eq!(&q.acc[1][..4], &[u32::MAX, (-2i32) as u32, 1, 0]);
}

#[test]
fn packs_and_unpacks() {
    let m = run(
        &format!(
            "load_imm r0, nop, 0x12345678\n\
             load_imm ra1, nop, 0xffffffff\n\
             nop\n\
             mov ra1.16a, r0 ; nop nop, r0, r0\n\
             load_imm r1, nop, 0x3f800000\n\
             nop nop, r0, r0 ; fmul r2.8888, r1, r1\n\
             load_imm ra3, nop, 0x3c00c000\n\
             nop\n\
             fadd r3, ra3.16a, ra3.16a ; nop nop, r0, r0\n\
             mov r0, ra1 ; nop nop, r0, r0\n{END}"
        ),
        &[],
    );
    let q = &m.qpus[0];
    assert_eq!(
        q.acc[0][0], 0xffff_5678,
        "16a pack writes only the low half"
    );
    assert_eq!(q.acc[2][0], 0xffff_ffff, "1.0 packs to 255 in every byte");
    // half 0xc000 = -2.0 in the low half, unpacked to float by the float op
    assert_eq!(f32::from_bits(q.acc[3][0]), -4.0);
}

#[test]
fn sfu_timing_and_values() {
    let m = run(
        &format!(
            "load_imm r0, nop, 0x41000000\n\
             mov sfu_log, r0 ; nop nop, r0, r0\n\
             nop\nnop\n\
             mov r1, r4 ; nop nop, r0, r0\n{END}"
        ),
        &[],
    );
    assert_eq!(f32::from_bits(m.qpus[0].acc[1][0]), 3.0);
    let mut m = machine(
        &format!("mov sfu_recip, r0 ; nop nop, r0, r0\nnop\nmov r1, r4 ; nop nop, r0, r0\n{END}"),
        &[],
    );
    let e = m.run(100).unwrap_err();
    assert_eq!((e.index, e.kind), (2, SimErrorKind::R4TooEarly));
}

#[test]
fn uniforms_stream_and_address_reset() {
    let mut m = machine(
        &format!(
            "mov r0, uni ; nop nop, r0, r0\n\
             mov r1, uni ; nop nop, r0, r0\n\
             load_imm r2, nop, {:#x}\n\
             mov uniforms_addr, r2 ; nop nop, r0, r0\n\
             nop\nnop\n\
             mov r3, uni ; nop nop, r0, r0\n{END}",
            UNIF + 0x100
        ),
        &[11, 22, 33],
    );
    m.mem.write_u32(UNIF + 0x100, 99).unwrap();
    m.run(1000).unwrap();
    let q = &m.qpus[0];
    assert_eq!((q.acc[0][5], q.acc[1][5], q.acc[3][5]), (11, 22, 99));
}

#[test]
fn branches_delay_slots_link_and_conditions() {
    let m = run(
        &format!(
            "load_imm r0, nop, 0\n\
             branch.rel skip, ra4, nop\n\
             sig_small_imm add r0, r0, 1 ; nop nop, r0, r0\n\
             sig_small_imm add r0, r0, 1 ; nop nop, r0, r0\n\
             sig_small_imm add r0, r0, 1 ; nop nop, r0, r0\n\
             sig_small_imm add r0, r0, 8 ; nop nop, r0, r0\n\
             skip:\n\
             mov.sf r1, elem ; nop nop, r0, r0\n\
             branch.all_zs.rel never_taken\n\
             nop\nnop\nnop\n\
             branch.any_zs.rel taken\n\
             nop\nnop\nnop\n\
             never_taken:\n\
             sig_small_imm add r0, r0, 15 ; nop nop, r0, r0\n\
             taken:\n{END}"
        ),
        &[],
    );
    let q = &m.qpus[0];
    assert_eq!(
        q.acc[0][0], 3,
        "three delay slots run, the skipped add does not"
    );
    assert_eq!(q.ra[4][0], BASE + 8 + 32, "link = branch address + 32");
}

#[test]
fn absolute_and_register_branches() {
    // jump to an absolute address held in ra1 (+ imm 0); the target sets r0 = 5
    let target = BASE + 8 * 9;
    let m = run(
        &format!(
            "load_imm ra1, nop, {target:#x}\n\
             nop\n\
             branch 0+ra1\n\
             nop\nnop\nnop\n\
             sig_small_imm mov r0, 1 ; nop nop, r0, r0\n\
             sig_end nop\nnop\n\
             sig_small_imm mov r0, 5 ; nop nop, r0, r0\n{END}"
        ),
        &[],
    );
    assert_eq!(m.qpus[0].acc[0][0], 5);
}

#[test]
fn program_end_runs_two_delay_slots() {
    let m = run(
        "sig_end nop\n\
         sig_small_imm mov r0, 1 ; nop nop, r0, r0\n\
         sig_small_imm mov r1, 2 ; nop nop, r0, r0\n\
         sig_small_imm mov r2, 3 ; nop nop, r0, r0\n",
        &[],
    );
    let q = &m.qpus[0];
    assert_eq!((q.acc[0][0], q.acc[1][0], q.acc[2][0]), (1, 2, 0));
    assert_eq!(q.instructions, 3);
}

#[test]
fn errors_carry_the_instruction_index() {
    let mut m = machine("nop\nnop\n", &[]);
    let e = m.run(100).unwrap_err();
    assert_eq!((e.index, e.kind), (2, SimErrorKind::PastEnd(BASE + 16)));
    let mut m = machine("l: branch.rel l\nnop\nnop\nnop\n", &[]);
    let e = m.run(1000).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::StepLimit(1000));
    let mut m = machine("load_tmu0 nop\n", &[]);
    assert_eq!(m.run(10).unwrap_err().kind, SimErrorKind::TmuFifoEmpty(0));
    let five = "mov tmu0_s, uni ; nop nop, r0, r0\n".repeat(5);
    let mut m = machine(&five, &[0x1000; 5]);
    let e = m.run(10).unwrap_err();
    assert_eq!((e.index, e.kind), (4, SimErrorKind::TmuFifoOverflow(0)));
}

#[test]
fn tmu_direct_lookups_in_fifo_order_with_latency() {
    let mut m = machine(
        &format!(
            "mov tmu0_s, uni ; nop nop, r0, r0\n\
             mov tmu0_s, uni ; nop nop, r0, r0\n\
             load_tmu0 nop\n\
             mov r0, r4 ; nop nop, r0, r0\n\
             load_tmu0 nop\n\
             mov r1, r4 ; nop nop, r0, r0\n{END}"
        ),
        &[0x1000, 0x1004],
    );
    m.mem.write_words(0x1000, &[0xaaaa, 0xbbbb]).unwrap();
    m.run(100).unwrap();
    let q = &m.qpus[0];
    assert_eq!((q.acc[0][3], q.acc[1][3]), (0xaaaa, 0xbbbb));
    // the first ldtmu (instruction 2, cycle 2) waits until cycle TMU_LATENCY
    assert_eq!(q.cycles, q.instructions + (TMU_LATENCY - 2));
}

#[test]
fn tmu_texture_lookup_from_uniform_configuration() {
    let (w, h, base) = (64u32, 64u32, 0x40000u32);
    let mut m = machine(
        &format!(
            "mov tmu0_t, uni ; nop nop, r0, r0\n\
             mov tmu0_s, uni ; nop nop, r0, r0\n\
             load_tmu0 nop\n\
             mov r0, r4 ; nop nop, r0, r0\n{END}"
        ),
        &[
            f(0.75),
            base,
            f(0.25),
            (h << 20) | (w << 8) | (1 << 7) | (1 << 4),
        ],
    );
    // uniform stream: t coordinate (read by instruction 0), P0 (taken by the TMU with the t
    // write), s coordinate (read by instruction 1), P1 (taken with the s write)
    for y in 0..h {
        for x in 0..w {
            m.mem
                .write_u32(base + tmu::texel_offset(w, h, x, y), (y << 16) | x)
                .unwrap();
        }
    }
    m.run(100).unwrap();
    assert_eq!(m.qpus[0].acc[0][0], (48 << 16) | 16);
}

#[test]
fn vpm_write_and_dma_store() {
    let m = run(
        &format!(
            "load_imm vw_setup, nop, 0x1a00\n\
             mov vpm, elem ; nop nop, r0, r0\n\
             load_imm vw_setup, nop, 0x80904000\n\
             load_imm vw_addr, nop, 0x3000\n\
             mov r0, vpm_st_wait ; nop nop, r0, r0\n{END}"
        ),
        &[],
    );
    assert_eq!(
        m.mem.read_words(0x3000, 16).unwrap(),
        (0..16).collect::<Vec<u32>>()
    );
}

#[test]
fn tlb_colour_and_z_writes() {
    let m = run(
        &format!(
            "nop\nnop\n\
             sig_wait_score mov tlb_z, elem ; nop nop, r0, r0\n\
             load_imm tlb_color_all, nop, 0xff0000ff\n\
             sig_unlock_score nop\n{END}"
        ),
        &[],
    );
    assert_eq!(m.tlb.color_at(0, 0), 0xff00_00ff);
    assert_eq!(m.tlb.color_at(7, 1), 0xff00_00ff);
    assert_eq!(m.tlb.z_at(1, 1), 3, "lane 3 is pixel (1, 1)");
    assert_eq!(m.tlb.color_at(8, 0), 0);
}

#[test]
fn semaphores_block_and_detect_deadlock() {
    let code = assemble(&format!("sacq nop, nop, 2\n{END}")).unwrap();
    let mut m = Machine::new(1 << 20, Program::new(BASE, &code));
    m.add_qpu(UNIF);
    assert_eq!(m.run(100).unwrap_err().kind, SimErrorKind::Deadlock);
    let code = assemble(&format!("srel nop, nop, 2\nsacq nop, nop, 2\n{END}")).unwrap();
    let mut m = Machine::new(1 << 20, Program::new(BASE, &code));
    m.add_qpu(UNIF);
    m.add_qpu(UNIF);
    m.run(100).unwrap();
    assert_eq!(m.semaphores[2], 0);
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// Any program (random words, with common forms more likely) ends with Ok or a
        /// `SimError` carrying a valid index, never a panic.
        #[test]
        fn random_programs_never_panic(words in proptest::collection::vec(any::<u64>(), 1..24),
                                       sigs in proptest::collection::vec(0u64..16, 24)) {
            let code: Vec<u64> = words.iter().zip(&sigs).map(|(w, s)| {
                // avoid most breakpoints/undefined ops so that runs get further
                let s = if *s == 0 { 1 } else { *s };
                (s << 60) | (w & ((1 << 60) - 1))
            }).collect();
            let mut m = Machine::new(1 << 20, Program::new(BASE, &code));
            m.mem.write_words(UNIF, &[0x1000; 64]).unwrap();
            m.add_qpu(UNIF);
            if let Err(e) = m.run(300) {
                prop_assert!(e.index < code.len() || matches!(e.kind, SimErrorKind::PastEnd(_)));
            }
        }
    }
}

/// A thread switch takes effect after its two delay slots: then r0–r5 hold the poison pattern
/// and the flags are gone; file registers stay. In a threaded program registers 16–31 of file
/// A or B are the other thread's: touching one is an error.
#[test]
fn thread_switch_loses_accumulators_and_upper_registers() {
    use kiln_qpu::sim::POISON;
    let m = run(
        "sig_small_imm mov r0, 1 ; nop nop, r0, r0\n\
         sig_small_imm mov ra3, 2 ; nop nop, r0, r0\n\
         sig_switch nop\n\
         sig_small_imm mov r1, 3 ; nop nop, r0, r0\n\
         mov r2, r1 ; nop nop, r0, r0\n\
         mov r3, r0 ; nop nop, r0, r0\n\
         mov rb2, ra3 ; nop nop, r0, r0\n\
         sig_end nop\nnop\nnop\n",
        &[],
    );
    let q = &m.qpus[0];
    // r2 ← r1 ran in the second delay slot (3); the switch then lost r0–r2; r3 ← r0 reads the
    // poison of r0.
    assert_eq!(q.acc[0][5], POISON | 5);
    assert_eq!(q.acc[2][0], POISON | 2 << 4);
    assert_eq!(q.acc[3][7], POISON | 7);
    assert_eq!(q.rb[2][0], 2);
    for bad in [
        "mov r0, ra16 ; nop nop, r0, r0",
        "mov rb31, r0 ; nop nop, r0, r0",
    ] {
        let src = format!("sig_switch nop\nnop\nnop\n{bad}\n{END}");
        let mut m = machine(&src, &[]);
        assert!(matches!(
            m.run(100).unwrap_err().kind,
            SimErrorKind::OtherThreadsRegister { .. }
        ));
        // Not threaded: the whole files.
        run(&format!("{bad}\n{END}"), &[]);
    }
}

#[test]
fn a_varying_read_loads_r5_after_its_instruction() {
    // Mesa pairs the add of one varying's C coefficient with the next varying's read
    // (`fadd r3, r0, r5 ; fmul r1, vary, ra15`): the add reads the r5 of the previous read.
    let mut m = machine(
        &format!(
            "nop nop, r0, r0 ; fmul r0, vary, ra15\n\
             fadd r3, r0, r5 ; fmul r1, vary, ra15\n\
             fadd r2, r1, r5 ; nop nop, r0, r0\n{END}"
        ),
        &[],
    );
    let one = f(1.0);
    m.qpus[0].ra[15] = [one; 16];
    m.qpus[0].varyings.push_back(([f(2.0); 16], [f(10.0); 16]));
    m.qpus[0].varyings.push_back(([f(3.0); 16], [f(20.0); 16]));
    m.run(1000).unwrap();
    let q = &m.qpus[0];
    assert_eq!(q.acc[3], [f(12.0); 16], "2 + the first C");
    assert_eq!(q.acc[2], [f(23.0); 16], "3 + the second C");
}
