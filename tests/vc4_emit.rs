//! The emitter end to end: hand-written fragment shaders (generic `.kir`) compiled for vc4,
//! validated, and run in the simulator against the interpreter on the selected SSA function
//! (VPM debug path: every output's 32 bits; tile buffer: the RGBA8 bytes).

use kiln::pipeline::{Kept, Options as CompileOptions, back_end};
use kiln_ir::Function;
use kiln_regalloc::Allocator;
use kiln_vc4::compile::{CompileError, Compiled, Threads};
use kiln_vc4::emit::OutputMode;
use kiln_vc4::harness;
use kiln_vc4::interface::ShaderInfo;

/// The pipeline's back end on a generic function.
fn compile(
    func: &Function,
    info: &ShaderInfo,
    opts: &CompileOptions,
) -> Result<Compiled, CompileError> {
    back_end(func, info, opts, &mut Kept::default())
}

fn compile_text(text: &str, allocator: Allocator, output: OutputMode) -> (Compiled, ShaderInfo) {
    let func = kiln_ir::parse_function(text).unwrap_or_else(|e| panic!("{e}"));
    let info = ShaderInfo::fragment_default(&func);
    let c = compile(
        &func,
        &info,
        &CompileOptions {
            allocator,
            output,
            check: true,
            threads: Threads::Auto,
            ..CompileOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (c, info)
}

/// Both output paths and both allocators agree with the interpreter.
/// The simulator's VPM rows for `c` with input slot k holding `inputs[k]` per lane (the
/// harness's values elsewhere).
fn rows_with_inputs(
    c: &Compiled,
    info: &ShaderInfo,
    inputs: &[(u32, &dyn Fn(usize) -> f32)],
) -> Vec<(u32, Vec<u32>)> {
    let mut env = harness::environment(&c.ssa, info);
    for &(slot, f) in inputs {
        env.inputs
            .insert(slot, (0..16).map(|l| f(l).to_bits()).collect());
    }
    match harness::simulate(&c.emitted, OutputMode::Vpm, false, &env).expect("the program runs") {
        harness::SimOutput::Vpm(rows) => rows,
        _ => panic!("VPM output"),
    }
}

fn agrees(text: &str) -> Compiled {
    let mut last = None;
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        for mode in [OutputMode::Vpm, OutputMode::Tlb] {
            let (c, info) = compile_text(text, allocator, mode);
            if let Err(m) = harness::check(&c.ssa, &c.emitted, mode, &info) {
                panic!(
                    "{allocator:?} {mode:?}: {m}\n{}\n{}",
                    kiln_ir::print_function(&c.allocated),
                    c.disasm()
                );
            }
            last = Some(c);
        }
    }
    last.unwrap()
}

#[test]
fn arithmetic_on_varyings_and_uniforms() {
    let c = agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:s1 = uniform 0
    %3:s1 = uniform 1
    %4:v1 = fmul %0, %2
    %5:v1 = fadd %4, %1
    %6:v1 = fsub %5, %3
    %7:v1 = fmul %6, 0.75
    %8:v1 = fadd %7, 1234.5
    %9:v1 = fmul %8, %2
    %10:v1 = fmul %3, %2
    %11:v1 = fadd %9, %10
    output 0, %5
    output 1, %6
    output 2, %7
    output 3, %11
    return
}
",
    );
    assert_eq!(c.emitted.varyings, vec![0, 1]);
    // Each operation reads its first uniform operand itself (Mesa's `QFILE_UNIF` operands); the
    // second of `fmul %3, %2` stays a read into a register: 1 + 4 reads, one move. The 32-bit
    // constants 0.75 and 1234.5 come from the stream too (Mesa's `qir_uniform_f`).
    use kiln_qpu::isa::{Instr, Mux, raddr};
    use kiln_vc4::uniforms::Uniform;
    let constants = [0.75f32, 1234.5].map(|x| Uniform::Constant(x.to_bits()));
    assert_eq!(c.emitted.uniforms.len(), 7, "{:?}", c.emitted.uniforms);
    assert!(constants.iter().all(|k| c.emitted.uniforms.contains(k)));
    assert!(
        !c.emitted
            .instrs
            .iter()
            .any(|i| matches!(i, Instr::LoadImm(_))),
        "{}",
        c.disasm()
    );
    // A move on either unit (`or` on the add unit, `v8min` on the mul unit), to a file
    // register or an accumulator.
    let register =
        |w: u8| w < 32 || (kiln_qpu::isa::waddr::R0..=kiln_qpu::isa::waddr::R3).contains(&w);
    let uniform_moves = c.emitted.instrs.iter().filter(|i| {
        matches!(i, Instr::Alu(a) if a.raddr_a == raddr::UNIFORM
            && ((a.op_add == kiln_qpu::isa::AddOp::Or && a.add_a == Mux::A && register(a.w.waddr_add))
                || (a.op_mul == kiln_qpu::isa::MulOp::V8min
                    && a.mul_a == Mux::A
                    && register(a.w.waddr_mul))))
    });
    assert_eq!(uniform_moves.count(), 1, "{}", c.disasm());
}

#[test]
fn sfu_integer_and_comparisons() {
    agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fdiv %0, %1
    %3:v1 = fsqrt %0
    %4:v1 = flt %0, %1
    %5:v1 = sel %4, %2, %3
    %6:v1 = f2i %5
    %7:v1 = imul %6, 77777
    %8:v1 = ilt %7, 3
    %9:v1 = ult %7, 3
    %10:v1 = ixor %8, %9
    %11:v1 = fexp2 %1
    %12:v1 = flog2 %11
    %13:v1 = fle %1, %0
    %14:v1 = feq %0, %0
    %15:v1 = iand %13, %14
    %16:v1 = ixor %10, %15
    output 0, %5
    output 1, %7
    output 2, %16
    output 3, %12
    return
}
",
    );
}

#[test]
fn uniform_if_becomes_a_branch() {
    let c = agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:s1 = flt %1, 0.5
    if.uniform %2, bb1, bb2, bb3
bb1:
    %3:v1 = fmul %0, 2.0
    jump bb3
bb2:
    %4:v1 = fadd %0, 3.0
    jump bb3
bb3:
    %5:v1 = phi %3, %4
    output 0, %5
    return
}
",
    );
    assert!(c.stats.branches >= 2, "{}", c.disasm());
}

/// The block after a uniform branch goes on reading the uniform stream without a reset: it
/// skips the entry the branch target's reset reads. Both ways of the branch agree; a skip
/// taken off (the read address cleared) shifts the stream, which the check catches.
#[test]
fn the_fall_through_skips_the_branch_targets_stream_entry() {
    use kiln_qpu::isa::{Instr, raddr, waddr};
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:s1 = flt %1, 0.5
    if.uniform %2, bb1, bb2, bb3
bb1:
    %3:s1 = uniform 1
    %4:v1 = fmul %0, %3
    jump bb3
bb2:
    %5:s1 = uniform 2
    %6:v1 = fadd %0, %5
    jump bb3
bb3:
    %7:v1 = phi %4, %6
    %8:s1 = uniform 3
    %9:v1 = fmul %7, %8
    output 0, %9
    return
}
";
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        let (c, info) = compile_text(text, allocator, OutputMode::Vpm);
        // Two resets (at the branch targets), none where the stream goes on.
        let resets = c
            .emitted
            .instrs
            .iter()
            .filter(|i| kiln_qpu::isa::effects::writes_addr(i, waddr::UNIFORMS_ADDRESS))
            .count();
        assert_eq!(resets, 2, "{}", c.disasm());
        for condition in [0.25f32, 0.75] {
            let uniforms = [(0, condition.to_bits())];
            if let Err(m) =
                harness::check_with(&c.ssa, &c.emitted, OutputMode::Vpm, &info, &uniforms)
            {
                panic!(
                    "{allocator:?}, uniform 0 = {condition}: {m}\n{}",
                    c.disasm()
                );
            }
        }
        // Mutation: the skip's read taken off.
        let mut wrong = c.emitted.clone();
        let skip = wrong
            .instrs
            .iter()
            .position(|i| {
                matches!(i, Instr::Alu(a) if a.raddr_a == raddr::UNIFORM
                    && kiln_qpu::isa::effects::used_muxes(a).iter().all(|m| *m != kiln_qpu::isa::Mux::A))
                    || matches!(i, Instr::Alu(a) if a.raddr_b == raddr::UNIFORM
                    && a.sig != kiln_qpu::isa::Signal::SmallImm
                    && kiln_qpu::isa::effects::used_muxes(a).iter().all(|m| *m != kiln_qpu::isa::Mux::B))
            })
            .unwrap_or_else(|| panic!("a read that skips an entry\n{}", c.disasm()));
        if let Instr::Alu(a) = &mut wrong.instrs[skip] {
            if a.raddr_a == raddr::UNIFORM {
                a.raddr_a = raddr::NOP;
            } else {
                a.raddr_b = raddr::NOP;
            }
        }
        let caught = [0.25f32, 0.75].iter().any(|c0| {
            harness::check_with(&c.ssa, &wrong, OutputMode::Vpm, &info, &[(0, c0.to_bits())])
                .is_err()
        });
        assert!(caught, "{}", c.disasm());
    }
}

/// A select under the execute mask whose destination holds neither value: the false value
/// moved in the running lanes, the comparison setting the flags of those lanes only, the true
/// value moved where it holds — no scratch register. Making the first move unconditional
/// writes the waiting lanes, which the check catches.
#[test]
fn a_masked_select_writes_its_destination_in_place() {
    use kiln_qpu::isa::{Cond, Instr};
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = flt %0, 0.5
    %8:v1 = fsub %1, %0
    if.divergent %2, bb1, bb2, bb2
bb1:
    %3:s1 = uniform 0
    %4:s1 = uniform 1
    %5:v1 = flt %1, 0.25
    %6:v1 = sel %5, %3, %4
    jump bb2
bb2:
    %7:v1 = phi %8, %6
    output 0, %7
    return
}
";
    let c = agrees(text);
    let scratch = c.emitted.instrs.iter().any(|i| {
        kiln_qpu::isa::effects::writes(i)
            .iter()
            .any(|w| w.waddr == 14 && w.file_a)
    });
    assert!(!scratch, "{}", c.disasm());
    // Mutation: the first masked move written in every lane.
    let (c, info) = compile_text(text, Allocator::Graph, OutputMode::Vpm);
    let mut wrong = c.emitted.clone();
    let first = wrong
        .instrs
        .iter()
        .position(|i| {
            matches!(i, Instr::Alu(a) if a.w.cond_add == Cond::Zs && a.op_add != kiln_qpu::isa::AddOp::Nop && !a.w.sf)
        })
        .unwrap_or_else(|| panic!("a masked move\n{}", c.disasm()));
    if let Instr::Alu(a) = &mut wrong.instrs[first] {
        a.w.cond_add = Cond::Always;
    }
    assert!(
        harness::check(&c.ssa, &wrong, OutputMode::Vpm, &info).is_err(),
        "{}",
        c.disasm()
    );
}

/// A 32-bit constant two operations read, where the uniform stream's position is not known,
/// is loaded into r5 once: r5 keeps it in the straight-line code between.
#[test]
fn a_constant_in_r5_is_loaded_once() {
    use kiln_qpu::isa::{Instr, waddr};
    let c = agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = flt %0, 0.5
    if.divergent %2, bb1, bb2, bb2
bb1:
    %3:v1 = fmul %0, 1.2345
    %4:v1 = fmul %1, 1.2345
    %5:v1 = fadd %3, %4
    jump bb2
bb2:
    %6:v1 = phi %0, %5
    output 0, %6
    return
}
",
    );
    let loads = c
        .emitted
        .instrs
        .iter()
        .filter(|i| matches!(i, Instr::LoadImm(l) if l.w.waddr_add == waddr::R5 && l.imm == 1.2345f32.to_bits()))
        .count();
    assert_eq!(loads, 1, "{}", c.disasm());
}

#[test]
fn divergent_if_masks_writes() {
    let c = agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = flt %0, 0.5
    if.divergent %2, bb1, bb2, bb3
bb1:
    %3:v1 = fmul %0, %1
    %4:v1 = fadd %3, 0.25
    jump bb3
bb2:
    %5:v1 = fsub %1, %0
    jump bb3
bb3:
    %6:v1 = phi %4, %5
    %7:v1 = phi %1, %0
    output 0, %6
    output 1, %7
    return
}
",
    );
    // The lanes waiting for the else side and the endif hold small immediates in ra13: each
    // wake compares with one, not with a constant loaded into r5 first.
    let d = c.disasm();
    assert!(
        d.contains("sub.sf nop, ra13, ") && !d.contains("sub.sf nop, ra13, r5"),
        "{d}"
    );
}

/// A uniform `if` inside a divergent one whose sides have no loop and no jump out: a run with
/// no lane at the `if` takes the then side (either side writes nothing then) — no test of lane
/// 0's condition (`elem`, which the emitter's fallback reads). It agrees with the interpreter.
#[test]
fn a_masked_uniform_if_with_straight_sides_runs_its_then_side() {
    let straight = agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:v1 = flt %0, 0.5
    if.divergent %2, bb1, bb5, bb5
bb1:
    %3:s1 = flt %1, 0.5
    if.uniform %3, bb2, bb3, bb4
bb2:
    %4:v1 = fmul %0, 2.0
    jump bb4
bb3:
    %5:v1 = fadd %0, 3.0
    jump bb4
bb4:
    %6:v1 = phi %4, %5
    jump bb5
bb5:
    %7:v1 = phi %0, %6
    output 0, %7
    return
}
",
    );
    assert!(!straight.disasm().contains("elem"), "{}", straight.disasm());
}

/// A uniform `if` on a constant takes its side with no test, also in a masked block where
/// no lane may run (the interpreter then goes by lane 0's condition, the same): no flags, no
/// read of `elem`, a jump only where the constant is false. Inside a divergent loop whose
/// `continue`s both wake at the latch, whose branch back goes by the flags the wake left.
#[test]
fn a_uniform_if_on_a_constant_takes_its_side_untested() {
    let text = |k: &str| {
        format!(
            "target generic(v=32, s=16)
function @main {{
bb0:
    %0:v1 = input 0
    %1:v1 = fmul %0, 10.0
    loop bb1, bb6
bb1:
    %2:v1 = phi 0.0, %5, %5
    %3:v1 = phi 0, %6, %7
    %4:v1 = flt %1, %2
    if.divergent %4, bb2, bb3, bb3
bb2:
    break bb6
bb3:
    %5:v1 = fadd %2, 1.0
    %6:v1 = iadd %3, 1
    %7:v1 = iadd %3, 2
    if.uniform {k}, bb4, bb5, bb5
bb4:
    continue bb1
bb5:
    continue bb1
bb6:
    %8:v1 = phi %2
    %9:v1 = phi %3
    output 0, %8
    output 1, %9
    return
}}
"
        )
    };
    for k in ["-1", "0"] {
        let c = agrees(&text(k));
        let d = c.disasm();
        assert!(!d.contains("elem"), "{k}: {d}");
    }
}

#[test]
fn divergent_loop_with_break() {
    agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = fmul %0, 10.0
    loop bb1, bb4
bb1:
    %2:v1 = phi 0.0, %5
    %3:v1 = phi 0, %6
    %4:v1 = flt %1, %2
    if.divergent %4, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    %5:v1 = fadd %2, 1.0
    %6:v1 = iadd %3, 1
    continue bb1
bb4:
    %7:v1 = phi %2
    %8:v1 = phi %3
    output 0, %7
    output 1, %8
    return
}
",
    );
}

/// The harness sees a wrong program: dropping the execute-mask conditions of a divergent
/// shader, or turning the last `fadd` (not a varying's `+ r5`, which adds C = 0) into `fsub`,
/// makes it disagree with the interpreter.
#[test]
fn the_harness_rejects_broken_programs() {
    use kiln_qpu::isa::{AddOp, Cond, Instr};
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = flt %0, 0.5
    if.divergent %2, bb1, bb2, bb3
bb1:
    %3:v1 = fmul %0, %1
    %4:v1 = fadd %3, 0.25
    jump bb3
bb2:
    %5:v1 = fsub %1, %0
    jump bb3
bb3:
    %6:v1 = phi %4, %5
    output 0, %6
    return
}
";
    let (c, info) = compile_text(text, Allocator::Ssa, OutputMode::Vpm);
    harness::check(&c.ssa, &c.emitted, OutputMode::Vpm, &info).unwrap();
    // (A masked write's condition is Z after the execute flags, or the condition the lanes
    // that run met where every lane ran before.)
    let mut unmasked = c.emitted.clone();
    for i in unmasked.instrs.iter_mut() {
        if let Instr::Alu(a) = i
            && !matches!(a.w.cond_add, Cond::Always | Cond::Never)
            && a.w.waddr_add < 39
        {
            a.w.cond_add = Cond::Always;
        }
    }
    assert!(harness::check(&c.ssa, &unmasked, OutputMode::Vpm, &info).is_err());
    let mut wrong = c.emitted.clone();
    let k = wrong
        .instrs
        .iter()
        .rposition(|i| matches!(i, Instr::Alu(a) if a.op_add == AddOp::Fadd))
        .expect("an fadd");
    if let Instr::Alu(a) = &mut wrong.instrs[k] {
        a.op_add = AddOp::Fsub;
    }
    assert!(harness::check(&c.ssa, &wrong, OutputMode::Vpm, &info).is_err());
}

/// Generated scalar programs (nested uniform and divergent ifs, loops with breaks and
/// continues, phis, linear values written in all lanes) through the whole back end with both
/// allocators; every output of every lane agrees with the interpreter (VPM debug path).
#[test]
fn generated_programs_agree() {
    use kiln_ir::generate::{GenConfig, generate};
    let (mut compiled, mut refused, mut rejected) = (0, 0, 0);
    // KILN_EMIT_SEEDS=N runs more seeds.
    let seeds: u64 = std::env::var("KILN_EMIT_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    for seed in 0..seeds {
        let cfg = GenConfig {
            vectors: false,
            constraints: false,
            size: 50 + (seed as usize % 4) * 20,
            ..GenConfig::new(seed)
        };
        let func = generate(&cfg);
        let info = ShaderInfo::debug(&func);
        for allocator in [Allocator::Ssa, Allocator::Graph] {
            let opts = CompileOptions {
                allocator,
                output: OutputMode::Vpm,
                check: true,
                threads: Threads::Auto,
                ..CompileOptions::default()
            };
            match compile(&func, &info, &opts) {
                Ok(c) => {
                    compiled += 1;
                    if let Err(m) = harness::check(&c.ssa, &c.emitted, OutputMode::Vpm, &info) {
                        panic!(
                            "seed {seed} {allocator:?}: {m}\n{}\n{}",
                            kiln_ir::print_function(&c.allocated),
                            c.disasm()
                        );
                    }
                }
                Err(e @ CompileError::Unsupported(_)) => {
                    refused += 1;
                    eprintln!("seed {seed}: {e}");
                }
                // Allocations that fail are not the emitter's failures: counted and listed.
                Err(CompileError::Failed(m)) if m.starts_with("allocation: ") => {
                    rejected += 1;
                    eprintln!("seed {seed} {allocator:?}: {m}");
                }
                Err(e) => panic!(
                    "seed {seed} {allocator:?}: {e}\n{}",
                    kiln_ir::print_function(&func)
                ),
            }
        }
    }
    eprintln!("{compiled} compiled, {refused} refused, {rejected} allocations rejected");
    assert!(
        compiled as u64 >= seeds * 19 / 10,
        "{compiled} compiled, {refused} refused"
    );
    // None of 3,000 at 1,500 seeds (8 were wrong allocations the checker stopped: a phi of a
    // loop body sharing a home with a header linear phi whose copy at the latch writes every
    // lane, and a value living through a divergent continue's phi copy gap in that phi's home
    // — generated seeds 233, 305, 558, 963, 1003, 1013, 1286, 1305).
    assert_eq!(rejected, 0, "{rejected} allocations rejected");
}

/// A vertex shader's interface: `attributes` inputs, the position in output slots 0–3, then
/// `more` outputs.
fn vertex_info(
    attributes: u32,
    more: impl IntoIterator<Item = (u32, kiln_vc4::interface::OutputKind)>,
) -> ShaderInfo {
    use kiln_vc4::interface::{InputKind, OutputKind, Stage};
    ShaderInfo {
        stage: Stage::Vertex,
        inputs: (0..attributes).map(|s| (s, InputKind::Attribute)).collect(),
        outputs: (0..4)
            .map(|c| (c, OutputKind::Position(c)))
            .chain(more)
            .collect(),
    }
}

/// A vertex shader: attributes from the VPM, Mesa's output rows (packed screen x/y, Zs,
/// 1/Wc, the varyings) compared row by row with the interpreter running the same layout.
#[test]
fn vertex_shader_writes_mesas_vpm_layout() {
    use kiln_vc4::interface::OutputKind;
    let func = kiln_ir::parse_function(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = input 2
    %3:s1 = uniform 0
    %4:v1 = fmul %0, %3
    %5:v1 = fadd %1, 0.5
    %6:v1 = fsub %2, %0
    output 0, %4
    output 1, %5
    output 2, %6
    output 3, 1.5
    output 4, %2
    output 5, %0
    output 6, %5
    return
}
",
    )
    .unwrap();
    let info = vertex_info(
        3,
        [
            (4, OutputKind::Varying(1, 0)),
            (5, OutputKind::Varying(0, 2)),
            (6, OutputKind::PointSize),
        ],
    );
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        let opts = CompileOptions {
            allocator,
            ..CompileOptions::default()
        };
        let c = compile(&func, &info, &opts).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.output, OutputMode::Vpm);
        // xy, zs, 1/wc, point size, then location 0 before location 1.
        assert_eq!(c.emitted.output_rows.len(), 6);
        assert_eq!(c.emitted.varyings, vec![0, 1, 2]);
        harness::check_compiled(&c).unwrap_or_else(|m| panic!("{m}\n{}", c.disasm()));
        // The harness reads the rows back: a wrong row order would disagree.
        let mut swapped = c.emitted.clone();
        swapped.output_rows.swap(3, 5);
        assert!(harness::check(&c.ssa, &swapped, OutputMode::Vpm, &c.info).is_err());
        // Vertex shaders run one thread.
        assert_eq!(c.stats.threads, 1);
        let two = CompileOptions {
            threads: Threads::Two,
            ..opts
        };
        let e = compile(&func, &info, &two).unwrap_err().to_string();
        assert!(e.contains("only fragment shaders run threaded"), "{e}");
    }
}

/// The y flip (`gl_Position.y = -y`) costs no instruction: the negated y scale takes the
/// negation, and the two `ftoi`s write the halves of the screen-XY row themselves. The row is
/// checked against the viewport transform computed here from the generic program's position.
#[test]
fn vertex_y_flip_and_screen_xy_halves() {
    let func = kiln_ir::parse_function(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = input 2
    %3:v1 = fneg %1
    output 0, %0
    output 1, %3
    output 2, 0.25
    output 3, %2
    return
}
",
    )
    .unwrap();
    let info = vertex_info(3, []);
    let c = compile(&func, &info, &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let listing = c.disasm();
    assert!(!listing.contains("xor"), "{listing}");
    assert!(
        listing.contains("ftoi ra") && listing.contains(".16a"),
        "{listing}"
    );
    assert!(listing.contains(".16b"), "{listing}");
    harness::check_compiled(&c).unwrap_or_else(|m| panic!("{m}\n{listing}"));
    // Positions on both sides of the origin, w a power of two (an exact reciprocal).
    let mut env = harness::environment(&c.ssa, &c.info);
    let x: Vec<f32> = (0..16).map(|l| l as f32 * 0.37 - 2.9).collect();
    let y: Vec<f32> = (0..16).map(|l| 1.7 - l as f32 * 0.29).collect();
    let w: Vec<f32> = (0..16).map(|l| [1.0, 2.0, 0.5, 4.0][l % 4]).collect();
    for (slot, v) in [(0, &x), (1, &y), (2, &w)] {
        env.inputs
            .insert(slot, v.iter().map(|f| f.to_bits()).collect());
    }
    let kiln_vc4::harness::SimOutput::Vpm(rows) =
        harness::simulate(&c.emitted, OutputMode::Vpm, true, &env).unwrap()
    else {
        panic!("a vertex shader writes the VPM")
    };
    let scale = |k: u32| f32::from_bits(env.uniforms[&(kiln_vc4::vertex::VIEWPORT_X_SCALE + k)]);
    let (xs, ys) = (scale(0), scale(1));
    for l in 0..16 {
        // The generic program's position: (x, −y, 0.25, w).
        let sx = (x[l] / w[l] * xs) as i32 as u32 & 0xffff;
        let sy = (-y[l] / w[l] * ys) as i32 as u32;
        assert_eq!(
            rows[0].1[l],
            sx | sy << 16,
            "lane {l}: {:?}",
            (x[l], y[l], w[l])
        );
    }
}

/// `bfi x, y, 16, 16` is two packed moves into the halves of a file-A register
/// (`qpu_pack16`), and with conversions of its operands two packed `ftoi`s
/// (`qpu_ftoi_pack16`): both agree with the interpreter in the simulator, on both output paths
/// and with both allocators, and the selected program computes what the generic one does.
#[test]
fn halves_of_a_register() {
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fmul %0, 1000.0
    %3:v1 = fmul %1, -700.0
    %4:v1 = f2i %2
    %5:v1 = f2i %3
    %6:v1 = bfi %4, %5, 16, 16
    %7:v1 = ushr %6, 16
    %8:v1 = iand %6, 65535
    %9:v1 = bfi %7, %8, 16, 16
    %10:v1 = ishr %9, 16
    %11:v1 = iand %9, 65535
    %12:v1 = i2f %10
    %13:v1 = i2f %11
    output 0, %12
    output 1, %13
    output 2, %0
    output 3, %1
    return
}
";
    let c = agrees(text);
    let listing = c.disasm();
    assert!(
        listing.contains("ftoi ra") && listing.contains(".16b"),
        "{listing}"
    );
    // The plain halves: moves with the pack, on either unit.
    assert!(
        listing
            .lines()
            .any(|l| l.contains("mov ra") && l.contains(".16a")),
        "{listing}"
    );
    // The selected program against the generic one, on the harness's inputs.
    let generic = kiln_ir::parse_function(text).unwrap();
    let env = harness::environment(&c.ssa, &c.info);
    let want = kiln_interp::run(&generic, &env).unwrap();
    let got = kiln_interp::run(&c.ssa, &env).unwrap();
    assert_eq!(want.slots, got.slots);
}

/// Texture sampling through the TMU: every component of two samples of two units agrees with
/// the interpreter; a wrong component unpack disagrees.
#[test]
fn texture_samples_through_the_tmu() {
    use kiln_qpu::isa::{Instr, Unpack};
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fmul %0, 3.0
    %3:v1 = fsub 0.0, %1
    %4:v4 = texture_sample 0, 0, %2, %3
    %5:v1, %6:v1, %7:v1, %8:v1 = split_vector %4
    %9:v4 = texture_sample 1, 0, %1, %0
    %10:v1, %11:v1, %12:v1, %13:v1 = split_vector %9
    %14:v1 = fadd %5, %13
    %15:v1 = fmul %6, %12
    %16:v1 = fsub %7, %11
    %17:v1 = fadd %8, %10
    output 0, %14
    output 1, %15
    output 2, %16
    output 3, %17
    return
}
";
    let c = agrees(text);
    assert!(
        c.emitted
            .uniforms
            .contains(&kiln_vc4::uniforms::Uniform::TextureP1(1))
    );
    let (c, info) = compile_text(text, Allocator::Ssa, OutputMode::Vpm);
    let mut wrong = c.emitted.clone();
    let k = wrong
        .instrs
        .iter()
        .position(|i| matches!(i, Instr::Alu(a) if a.unpack == Unpack::U8a))
        .expect("an r4 unpack");
    if let Instr::Alu(a) = &mut wrong.instrs[k] {
        a.unpack = Unpack::U8b;
    }
    assert!(harness::check(&c.ssa, &wrong, OutputMode::Vpm, &info).is_err());
}

/// A texel channel whose one reader comes before anything else writes r4 is read in place with
/// the r4 unpack (Mesa's `fmul d, r4.8a, …`); after an SFU operation it is unpacked into its
/// register first. Reading the SFU's result instead would disagree.
#[test]
fn texel_channels_read_in_place() {
    use kiln_qpu::isa::{AddOp, Instr, MulOp, Unpack};
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v4 = texture_sample 0, 0, %0, %1
    %3:v1, %4:v1, %5:v1, %6:v1 = split_vector %2
    %7:v1 = fmul %3, 3.0
    %8:v1 = frcp %1
    %9:v1 = fadd %4, %8
    %10:v1 = fmul %5, %0
    %11:v1 = fadd %6, %7
    output 0, %9
    output 1, %10
    output 2, %11
    output 3, %7
    return
}
";
    let c = agrees(text);
    let alus: Vec<_> = c
        .emitted
        .instrs
        .iter()
        .filter_map(|i| match i {
            Instr::Alu(a) if a.unpack != Unpack::None => Some(*a),
            _ => None,
        })
        .collect();
    assert!(
        alus.iter()
            .any(|a| a.op_mul == MulOp::Fmul && a.unpack == Unpack::U8a && a.w.pm),
        "{}",
        c.disasm()
    );
    // Each channel is read from r4 once, in place or into its register (the SFU's result
    // then replaces the texel).
    let mut channels: Vec<Unpack> = alus.iter().filter(|a| a.w.pm).map(|a| a.unpack).collect();
    channels.sort_by_key(|u| *u as u8);
    assert_eq!(
        channels,
        [Unpack::U8a, Unpack::U8b, Unpack::U8c, Unpack::U8d],
        "{}",
        c.disasm()
    );
    assert!(
        alus.iter().any(|a| a.op_add == AddOp::Fmax),
        "{}",
        c.disasm()
    );
}

/// A product whose one reader is a colour output is packed into its byte of the colour by the
/// multiplication itself (Mesa's `fmul ra.8a, …`); a value two outputs read is copied into
/// each byte, and so is a product whose operands' registers are written before the output.
/// Packing a product into the wrong byte disagrees.
#[test]
fn products_pack_into_the_colour() {
    use kiln_qpu::isa::{Instr, MulOp};
    agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fmul %0, %1
    %3:v1 = fmul %1, 0.5
    %4:v1 = fmul %0, %0
    output 0, %2
    output 1, %3
    output 2, %4
    output 3, %4
    return
}
",
    );
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fadd %0, %1
    %3:v1 = fmul %0, 0.5
    %4:v1 = fmul %1, %0
    output 0, %3
    output 1, %4
    output 2, %2
    output 3, %2
    return
}
";
    agrees(text);
    let (c, info) = compile_text(text, Allocator::Graph, OutputMode::Tlb);
    let packed: Vec<usize> = c
        .emitted
        .instrs
        .iter()
        .enumerate()
        .filter(|(_, i)| {
            matches!(i, Instr::Alu(a) if a.op_mul == MulOp::Fmul && a.w.pm && (4..8).contains(&a.w.pack))
        })
        .map(|(k, _)| k)
        .collect();
    assert_eq!(packed.len(), 2, "{}", c.disasm());
    let mut wrong = c.emitted.clone();
    if let Instr::Alu(a) = &mut wrong.instrs[packed[0]] {
        a.w.pack = 4 + (a.w.pack - 4 + 1) % 4;
    }
    assert!(harness::check(&c.ssa, &wrong, OutputMode::Tlb, &info).is_err());
}

/// In the debug build (every output raw to a VPM row), an add- or mul-unit operation whose one
/// reader is an output writes the VPM itself, also with a uniform operand (the interface pass
/// puts the row right after it); an operation with another reader is copied. Writing another
/// operation's result there disagrees.
#[test]
fn operations_write_vpm_rows_themselves() {
    use kiln_qpu::isa::{AddOp, Instr, MulOp, waddr};
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:s1 = uniform 0
    %3:v1 = fadd %0, %2
    %4:v1 = fmul %1, %2
    %5:v1 = fsub %0, %1
    %6:v1 = fadd %5, 1.0
    output 0, %3
    output 1, %4
    output 2, %5
    output 3, %6
    return
}
";
    agrees(text);
    let (c, info) = compile_text(text, Allocator::Graph, OutputMode::Vpm);
    let vpm = waddr::VPM;
    let writers: Vec<usize> = c
        .emitted
        .instrs
        .iter()
        .enumerate()
        .filter(|(_, i)| {
            matches!(i, Instr::Alu(a)
                if (a.w.waddr_add == vpm && matches!(a.op_add, AddOp::Fadd | AddOp::Fsub))
                    || (a.w.waddr_mul == vpm && a.op_mul == MulOp::Fmul))
        })
        .map(|(k, _)| k)
        .collect();
    assert!(
        writers.len() >= 3,
        "{}\n{}",
        kiln_ir::print_function(&c.ssa),
        c.disasm()
    );
    let mut wrong = c.emitted.clone();
    if let Instr::Alu(a) = &mut wrong.instrs[writers[0]] {
        if a.op_add == AddOp::Fadd {
            a.op_add = AddOp::Fsub;
        } else {
            a.op_add = AddOp::Fadd;
        }
    }
    assert!(harness::check(&c.ssa, &wrong, OutputMode::Vpm, &info).is_err());
}

/// Lookups and uniform reads inside divergent control flow and a loop, where the uniform
/// stream is reset: the program agrees, and an off-by-one reset offset is caught.
#[test]
fn uniform_reads_and_samples_inside_control_flow() {
    use kiln_qpu::isa::{Instr, waddr};
    use kiln_vc4::uniforms::Uniform;
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:s1 = uniform 0
    %3:v1 = flt %0, 0.4
    if.divergent %3, bb1, bb2, bb3
bb1:
    %4:v4 = texture_sample 0, 0, %0, %1
    %5:v1, %6:v1, %7:v1, %8:v1 = split_vector %4
    jump bb3
bb2:
    %24:s1 = uniform 2
    %25:v1 = fmul %0, %24
    %9:v1 = fmul %25, %2
    jump bb3
bb3:
    %10:v1 = phi %6, %9
    %11:s1 = uniform 1
    loop bb4, bb7
bb4:
    %12:v1 = phi %10, %16
    %13:s1 = linear_phi 0, %17
    %14:v4 = texture_sample 1, 0, %12, %0
    %15:v1, %18:v1, %19:v1, %20:v1 = split_vector %14
    %26:s1 = uniform 3
    %27:v1 = fmul %15, %26
    %16:v1 = fadd %12, %27
    %17:s1 = iadd %13, 1
    %21:s1 = ile 3, %17
    if.uniform %21, bb5, bb6, bb6
bb5:
    break bb7
bb6:
    continue bb4
bb7:
    %22:v1 = phi %16
    %28:s1 = uniform 4
    %23:v1 = fmul %22, %28
    output 0, %10
    output 1, %23
    return
}
";
    let c = agrees(text);
    let resets = c
        .emitted
        .uniforms
        .iter()
        .filter(|u| **u == Uniform::StreamAddress)
        .count();
    assert!(resets >= 3, "{:?}", c.emitted.uniforms);
    // Mutation: the first reset points one entry too far.
    let (c, info) = compile_text(text, Allocator::Graph, OutputMode::Vpm);
    let mut wrong = c.emitted.clone();
    let k = wrong
        .instrs
        .iter()
        .position(|i| matches!(i, Instr::LoadImm(l) if l.w.waddr_add == waddr::R5))
        .expect("a reset");
    if let Instr::LoadImm(l) = &mut wrong.instrs[k] {
        l.imm += 4;
    }
    assert!(harness::check(&c.ssa, &wrong, OutputMode::Vpm, &info).is_err());
}

/// Lookups with a bias and with an explicit level write the TMU's b register between t and s
/// (Mesa's order); dropping that write shifts the uniform stream, which the check catches.
#[test]
fn samples_with_a_bias_or_a_level() {
    use kiln_qpu::isa::{Instr, waddr};
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v4 = texture_sample 0, 2, %0, %1, 0.0
    %3:v1, %4:v1, %5:v1, %6:v1 = split_vector %2
    %7:v4 = texture_sample 1, 1, %1, %0, %0
    %8:v1, %9:v1, %10:v1, %11:v1 = split_vector %7
    %12:s1 = uniform 0
    %13:v1 = fmul %3, %12
    %14:v1 = fadd %13, %10
    output 0, %14
    output 1, %4
    return
}
";
    let c = agrees(text);
    // On either unit (a move to an I/O address pairs on the mul unit too).
    let writes_b = |i: &Instr| kiln_qpu::isa::effects::write_addrs(i).contains(&waddr::TMU0_B);
    assert_eq!(c.emitted.instrs.iter().filter(|i| writes_b(i)).count(), 2);
    let (c, info) = compile_text(text, Allocator::Graph, OutputMode::Vpm);
    let mut wrong = c.emitted.clone();
    let k = wrong.instrs.iter().position(writes_b).expect("a b write");
    wrong.instrs[k] = Instr::nop();
    assert!(harness::check(&c.ssa, &wrong, OutputMode::Vpm, &info).is_err());
}

/// Cube maps (mode 16: implicit level, 17: a bias): the direction is divided by its largest
/// magnitude and written to r, t, then s, with parameter 0 marked as a cube map and parameter 2
/// carrying the faces' stride; the simulator picks the face. Both allocators agree with the
/// interpreter; dropping the r write, or swapping r and t, disagrees.
#[test]
fn cube_maps_through_the_tmu() {
    use kiln_qpu::isa::{Instr, waddr};
    use kiln_vc4::uniforms::Uniform;
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = input 2
    %3:v1 = fmul %2, -3.0
    %4:v4 = texture_sample 0, 16, %0, %1, %3
    %5:v1, %6:v1, %7:v1, %8:v1 = split_vector %4
    %9:v4 = texture_sample 1, 17, %1, %3, %0, %2
    %10:v1, %11:v1, %12:v1, %13:v1 = split_vector %9
    %14:v1 = fadd %5, %13
    %15:v1 = fmul %6, %12
    output 0, %14
    output 1, %15
    output 2, %7
    output 3, %10
    return
}
";
    let c = agrees(text);
    let table = &c.emitted.uniforms;
    assert!(table.contains(&Uniform::TextureP0 {
        unit: 0,
        cube: true
    }));
    assert!(table.contains(&Uniform::TextureP2 {
        unit: 1,
        explicit_level: false
    }));
    let writes = |i: &Instr, reg: u8| matches!(i, Instr::Alu(a) if a.w.waddr_add == reg || a.w.waddr_mul == reg);
    assert_eq!(
        c.emitted
            .instrs
            .iter()
            .filter(|i| writes(i, waddr::TMU0_R))
            .count(),
        2
    );
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        let (c, info) = compile_text(text, allocator, OutputMode::Vpm);
        assert!(harness::check(&c.ssa, &c.emitted, OutputMode::Vpm, &info).is_ok());
        let k = c
            .emitted
            .instrs
            .iter()
            .position(|i| writes(i, waddr::TMU0_R))
            .expect("an r write");
        let mut dropped = c.emitted.clone();
        dropped.instrs[k] = Instr::nop();
        assert!(harness::check(&c.ssa, &dropped, OutputMode::Vpm, &info).is_err());
        let mut swapped = c.emitted.clone();
        for i in swapped.instrs.iter_mut() {
            if let Instr::Alu(a) = i {
                for w in [&mut a.w.waddr_add, &mut a.w.waddr_mul] {
                    *w = match *w {
                        waddr::TMU0_R => waddr::TMU0_T,
                        waddr::TMU0_T => waddr::TMU0_R,
                        other => other,
                    };
                }
            }
        }
        assert!(harness::check(&c.ssa, &swapped, OutputMode::Vpm, &info).is_err());
    }
}

/// Texel fetches (`texture_fetch`, WGSL's `textureLoad`): the texel's centre scaled by the
/// driver's 1/width and 1/height, looked up at level 0. The simulator reads exactly the texel
/// the procedural texture holds at (x, y), wrapped, for texels inside, left of and beyond the
/// 16×16 image — checked against `Texture::fetch`, not against the lowering. A uniform table
/// with a wrong scale in place of 1/width disagrees.
#[test]
fn texel_fetches_read_the_texel() {
    use kiln_vc4::uniforms::Uniform;
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = f2i %0
    %3:v1 = f2i %1
    %4:v4 = texture_fetch 0, %2, %3, 0
    %5:v1, %6:v1, %7:v1, %8:v1 = split_vector %4
    %9:v4 = texture_fetch 1, %3, %2
    %10:v1, %11:v1, %12:v1, %13:v1 = split_vector %9
    output 0, %5
    output 1, %6
    output 2, %7
    output 3, %11
    return
}
";
    let c = agrees(text);
    assert!(
        c.emitted
            .uniforms
            .contains(&Uniform::TexrectScale { unit: 1, axis: 1 })
    );
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        let (c, info) = compile_text(text, allocator, OutputMode::Vpm);
        let x = |l: usize| l as i32 - 5;
        let y = |l: usize| 3 * l as i32 - 7;
        let rows = rows_with_inputs(&c, &info, &[(0, &|l| x(l) as f32), (1, &|l| y(l) as f32)]);
        let (t0, t1) = (
            kiln_interp::Texture::procedural(0),
            kiln_interp::Texture::procedural(1),
        );
        for (slot, vals) in rows {
            for (l, &v) in vals.iter().enumerate() {
                let want = match slot {
                    0..=2 => t0.fetch(x(l), y(l))[slot as usize],
                    _ => t1.fetch(y(l), x(l))[1],
                };
                assert_eq!(v, want, "slot {slot} lane {l}: ({}, {})", x(l), y(l));
            }
        }
        let mut wrong = c.emitted.clone();
        let k = wrong
            .uniforms
            .iter()
            .position(|u| *u == Uniform::TexrectScale { unit: 0, axis: 0 })
            .expect("unit 0's 1/width");
        wrong.uniforms[k] = Uniform::Constant(0.5f32.to_bits());
        assert!(harness::check(&c.ssa, &wrong, OutputMode::Vpm, &info).is_err());
    }
}

/// Depth comparisons (2D shadow samplers, mode 896: `less_equal`; 1154: `greater` at an explicit
/// level): the texel's word read whole from r4, its upper 24 bits the depth, compared with the
/// reference clamped to [0, 1]. The simulator's results are checked against the comparison
/// worked out here from the procedural texture's bytes, for references below 0, inside and
/// above 1.
#[test]
fn depth_comparisons_read_the_texel_word() {
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = input 2
    %3:v4 = texture_sample 0, 896, %0, %1, %2
    %4:v1, %5:v1, %6:v1, %7:v1 = split_vector %3
    %8:v4 = texture_sample 0, 1154, %1, %0, %2, 0.0
    %9:v1, %10:v1, %11:v1, %12:v1 = split_vector %8
    output 0, %4
    output 1, %9
    output 2, %7
    output 3, %5
    return
}
";
    agrees(text);
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        let (c, info) = compile_text(text, allocator, OutputMode::Vpm);
        let s = |l: usize| (l as f32 + 0.5) / 16.0;
        let t = |l: usize| ((l * 7) % 16) as f32 / 16.0 + 0.03;
        let r = |l: usize| l as f32 / 12.0 - 0.2;
        let rows = rows_with_inputs(&c, &info, &[(0, &s), (1, &t), (2, &r)]);
        let tex = kiln_interp::Texture::procedural(0);
        let depth = |x: f32, y: f32| {
            let [_, g, b, a] = tex.texels[(y * 16.0) as usize * 16 + (x * 16.0) as usize];
            (g as u32 + 256 * b as u32 + 65536 * a as u32) as f32 / 16_777_215.0
        };
        let (mut passed, mut failed) = (0, 0);
        for (slot, vals) in rows {
            for (l, &v) in vals.iter().enumerate() {
                let reference = r(l).clamp(0.0, 1.0);
                let want = match slot {
                    0 => (reference <= depth(s(l), t(l))) as u32 as f32,
                    1 => (reference > depth(t(l), s(l))) as u32 as f32,
                    2 => 1.0,
                    _ => 0.0,
                };
                if slot < 2 {
                    if want == 1.0 {
                        passed += 1
                    } else {
                        failed += 1
                    }
                }
                assert_eq!(f32::from_bits(v), want, "slot {slot} lane {l}");
            }
        }
        assert!(passed > 4 && failed > 4, "{passed} pass, {failed} fail");
    }
}

/// Explicit gradients (mode 3) become an explicit level: λ = ½·log2 of the longer squared
/// texel-space gradient, the texture's size a driver uniform. The selected program's level
/// operand, run in the interpreter, is λ worked out here (within the SFU's log2 error), for
/// gradients of different lengths per lane.
#[test]
fn explicit_gradients_give_the_level() {
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = input 2
    %3:v1 = input 3
    %4:v4 = texture_sample 0, 3, %0, %1, %2, %3, %3, %0
    %5:v1, %6:v1, %7:v1, %8:v1 = split_vector %4
    output 0, %5
    return
}
";
    agrees(text);
    let (c, info) = compile_text(text, Allocator::Graph, OutputMode::Vpm);
    let mut f = c.ssa.clone();
    let level = f
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .find(|i| kiln_vc4::texture::Layout::of(i).is_some_and(|l| l.lod))
        .map(|i| i.operands[4])
        .expect("a lookup at a level");
    let last = f.blocks.len() - 1;
    let at = f.blocks[last].insts.len() - 1;
    let mut out = kiln_ir::Inst::new(kiln_ir::Opcode::Output);
    out.imms.push(1);
    out.operands.push(level);
    f.blocks[last].insts.insert(at, out);
    let mut env = harness::environment(&f, &info);
    let input =
        |k: u32, l: usize| [0.3, 0.6, 0.05 * (l as f32 + 1.0), 0.002 * l as f32][k as usize];
    for k in 0..4 {
        env.inputs
            .insert(k, (0..16).map(|l| input(k, l).to_bits()).collect());
    }
    let run = kiln_interp::run_ssa(&f, &env).unwrap_or_else(|e| panic!("{e}"));
    for l in 0..16 {
        let (s, dsx, dty) = (input(0, l), input(2, l), input(3, l));
        // ddx = (dsx, dty), ddy = (dty, s); a 16×16 texture.
        let x = (dsx * 16.0).powi(2) + (dty * 16.0).powi(2);
        let y = (dty * 16.0).powi(2) + (s * 16.0).powi(2);
        let want = 0.5 * x.max(y).log2();
        let got = f32::from_bits(run.slots[&1][l].as_ref().unwrap()[0].unwrap());
        assert!(
            (got - want).abs() < 1e-3,
            "lane {l}: level {got}, want {want}"
        );
    }
}

/// A constant colour is packed at compile time (as Mesa does): one word, no byte packs; the
/// simulator's pixels agree with the interpreter for a word that needs a load and for one that
/// is a small immediate, and a wrong word disagrees.
#[test]
fn constant_colours_are_packed_at_compile_time() {
    use kiln_qpu::isa::{Instr, LoadImm};
    for (colour, word) in [
        (["1.0", "0.2", "0.5", "1.0"], 0xff80_33ffu32),
        (["0.0", "0.0", "0.0", "0.0"], 0),
    ] {
        let text = format!(
            "target generic(v=32, s=16)
function @main {{
bb0:
    output 0, {}
    output 1, {}
    output 2, {}
    output 3, {}
    return
}}
",
            colour[0], colour[1], colour[2], colour[3]
        );
        let (c, info) = compile_text(&text, Allocator::Graph, OutputMode::Tlb);
        harness::check(&c.ssa, &c.emitted, OutputMode::Tlb, &info)
            .unwrap_or_else(|m| panic!("{m}\n{}", c.disasm()));
        assert!(
            !c.emitted
                .instrs
                .iter()
                .any(|i| matches!(i, Instr::Alu(a) if a.w.pm && a.w.pack != 0)),
            "no byte packs:\n{}",
            c.disasm()
        );
        let loads: Vec<u32> = c
            .emitted
            .instrs
            .iter()
            .filter_map(|i| match i {
                Instr::LoadImm(LoadImm { imm, .. }) => Some(*imm),
                _ => None,
            })
            .collect();
        assert_eq!(loads, if word == 0 { vec![] } else { vec![word] });
        if word != 0 {
            let mut wrong = c.emitted.clone();
            for i in wrong.instrs.iter_mut() {
                if let Instr::LoadImm(l) = i {
                    l.imm ^= 0x100;
                }
            }
            assert!(harness::check(&c.ssa, &wrong, OutputMode::Tlb, &info).is_err());
        }
    }
}

/// Graph colouring keeps the operands of one instruction on different read ports (files A and
/// B), so the emitter copies none of them to ra14/rb14: twelve values live across sums and
/// products of pairs of them (a bipartite pairing), more than the accumulators hold.
#[test]
fn operands_read_together_sit_in_different_files() {
    use kiln_vc4::target::QpuReg;
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = input 2
    %3:v1 = input 3
    %4:v1 = input 4
    %5:v1 = input 5
    %6:v1 = input 6
    %7:v1 = input 7
    %8:v1 = input 8
    %9:v1 = input 9
    %10:v1 = input 10
    %11:v1 = input 11
    %12:v1 = fmul %0, %6
    %13:v1 = fmul %1, %7
    %14:v1 = fmul %2, %8
    %15:v1 = fmul %3, %9
    %16:v1 = fmul %4, %10
    %17:v1 = fmul %5, %11
    %18:v1 = fadd %0, %11
    %19:v1 = fadd %1, %10
    %20:v1 = fadd %2, %9
    %21:v1 = fadd %3, %8
    %22:v1 = fadd %4, %7
    %23:v1 = fadd %5, %6
    %24:v1 = fadd %12, %13
    %25:v1 = fadd %24, %14
    %26:v1 = fadd %25, %15
    %27:v1 = fadd %26, %16
    %28:v1 = fadd %27, %17
    %29:v1 = fadd %28, %18
    %30:v1 = fadd %29, %19
    %31:v1 = fadd %30, %20
    %32:v1 = fadd %31, %21
    %33:v1 = fadd %32, %22
    %34:v1 = fadd %33, %23
    %35:v1 = fsub %34, %0
    %36:v1 = fsub %35, %1
    %37:v1 = fsub %36, %2
    %38:v1 = fsub %37, %3
    %39:v1 = fsub %38, %4
    %40:v1 = fsub %39, %5
    %41:v1 = fsub %40, %6
    %42:v1 = fsub %41, %7
    %43:v1 = fsub %42, %8
    %44:v1 = fsub %43, %9
    %45:v1 = fsub %44, %10
    %46:v1 = fsub %45, %11
    output 0, %46
    return
}
";
    let (c, _) = compile_text(text, Allocator::Graph, OutputMode::Vpm);
    let port = |o: &kiln_ir::Operand| match o.reg.and_then(|r| QpuReg::from_unit(r.unit())) {
        Some(QpuReg::A(i)) => Some((0, i)),
        Some(QpuReg::B(i)) => Some((1, i)),
        _ => None,
    };
    let mut in_files = 0;
    for inst in c.allocated.blocks.iter().flat_map(|b| &b.insts) {
        if let [x, y] = &inst.operands[..]
            && let (Some(px), Some(py)) = (port(x), port(y))
        {
            in_files += 1;
            assert!(
                px.0 != py.0 || px == py,
                "{}",
                kiln_ir::print_function(&c.allocated)
            );
        }
    }
    assert!(in_files > 0, "no instruction reads two file registers");
    agrees(text);
}

/// The selected function's text reads back with the vc4 opcode table, lookups and derivatives
/// included: the same opcodes, operands and definitions, instruction by instruction.
#[test]
fn selected_text_reads_back() {
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v4 = texture_sample 0, 2, %0, %1, 0.0
    %3:v1, %4:v1, %5:v1, %6:v1 = split_vector %2
    %7:v1 = fddx %3
    %8:v1 = fddy %4
    %9:v1 = fadd %7, %8
    output 0, %9
    return
}
";
    let (c, _) = compile_text(text, Allocator::Graph, OutputMode::Vpm);
    let printed = kiln_ir::print_function(&c.ssa);
    let mut registry = kiln_ir::TargetRegistry::new();
    registry.register("vc4", kiln_vc4::target::Vc4Target::from_params);
    let back = kiln_ir::text::parse_function_with(&printed, &registry)
        .unwrap_or_else(|e| panic!("{e}\n{printed}"));
    let ops = |f: &kiln_ir::Function| -> Vec<(String, usize, usize)> {
        f.blocks
            .iter()
            .flat_map(|b| &b.insts)
            .map(|i| (i.op.name().to_string(), i.operands.len(), i.defs.len()))
            .collect()
    };
    assert_eq!(ops(&back), ops(&c.ssa));
    for name in ["qpu_tex_b", "qpu_fddx", "qpu_fddy"] {
        assert!(printed.contains(name), "{name}: {printed}");
    }
}

/// `discard`: discarded lanes stop (a later divergent loop does not wait for them) and keep the
/// tile buffer's colour; an unconditional colour write is caught.
#[test]
fn discard_stops_lanes_and_keeps_their_pixels() {
    use kiln_qpu::isa::{Cond, Instr, waddr};
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = flt %0, 0.4
    if.divergent %2, bb1, bb2, bb2
bb1:
    discard
    jump bb2
bb2:
    %3:v1 = fmul %1, 0.5
    output 0, %0
    output 1, %3
    output 2, %1
    output 3, 1.0
    return
}
";
    agrees(text);
    let (c, info) = compile_text(text, Allocator::Ssa, OutputMode::Tlb);
    let mut wrong = c.emitted.clone();
    for i in wrong.instrs.iter_mut() {
        if let Instr::Alu(a) = i
            && a.w.waddr_add == waddr::TLB_COLOR_ALL
        {
            // On the running lanes: Z after the execute test, or the flags the last wake left.
            assert_ne!(a.w.cond_add, Cond::Always);
            a.w.cond_add = Cond::Always;
        }
    }
    assert!(harness::check(&c.ssa, &wrong, OutputMode::Tlb, &info).is_err());
}

/// `gl_FragCoord`: x and y from the pixel coordinates, z from the payload depth in rb15 (read
/// before any input overwrites it), w the reciprocal of the payload W.
#[test]
fn frag_coord_from_the_payload() {
    use kiln_vc4::interface::{InputKind, OutputKind, Stage};
    use std::collections::BTreeMap;
    let func = kiln_ir::parse_function(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1000
    %2:v1 = input 1001
    %3:v1 = input 1002
    %4:v1 = input 1003
    %5:v1 = fmul %1, %0
    output 0, %5
    output 1, %2
    output 2, %3
    output 3, %4
    return
}
",
    )
    .unwrap();
    let info = ShaderInfo {
        stage: Stage::Fragment,
        inputs: BTreeMap::from([
            (0, InputKind::Varying),
            (1000, InputKind::FragCoord(0)),
            (1001, InputKind::FragCoord(1)),
            (1002, InputKind::FragCoord(2)),
            (1003, InputKind::FragCoord(3)),
        ]),
        outputs: (0..4).map(|c| (c, OutputKind::Color(c))).collect(),
    };
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        for output in [OutputMode::Vpm, OutputMode::Tlb] {
            let opts = CompileOptions {
                allocator,
                output,
                check: true,
                threads: Threads::Auto,
                ..CompileOptions::default()
            };
            let c = compile(&func, &info, &opts).unwrap_or_else(|e| panic!("{e}"));
            harness::check_compiled(&c).unwrap_or_else(|m| panic!("{m}\n{}", c.disasm()));
        }
    }
}

/// Derivatives (Mesa's ntq_fddx / ntq_fddy): the value rotated by 1 and 15 (x) or 2 and 14 (y)
/// on the mul unit, the neighbour picked by the element number; every lane agrees with the
/// interpreter's `qpu_fddx`/`qpu_fddy`, a value in a file register is first copied to the
/// scratch accumulator, and the inputs make the two axes differ.
#[test]
fn derivatives_rotate_within_quads() {
    use kiln_qpu::isa::{AddOp, Instr, MulOp, Signal};
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fmul %0, %1
    %3:v1 = fddx %2
    %4:v1 = fddy %2
    %5:v1 = fddx %1
    %6:v1 = fddy %0
    %7:v1 = fadd %5, %6
    %8:v1 = fmul %3, %0
    %9:v1 = fadd %8, %1
    output 0, %3
    output 1, %4
    output 2, %7
    output 3, %9
    return
}
";
    agrees(text);
    let (c, info) = compile_text(text, Allocator::Graph, OutputMode::Vpm);
    let text_of = c.disasm();
    assert_eq!(text_of.matches("and.sf nop, elem").count(), 4, "{text_of}");
    for r in ["+15", "+1\n", "+14", "+2\n"] {
        assert!(text_of.contains(r), "rotation {r}: {text_of}");
    }
    // The two axes differ on these inputs, in every quad.
    let env = harness::environment(&c.ssa, &info);
    let want = kiln_interp::run_ssa(&c.ssa, &env).unwrap();
    let lane = |s: u32, l: usize| want.slots[&s][l].as_ref().unwrap()[0].unwrap();
    for q in 0..4 {
        assert!(
            (0..4).all(|k| lane(0, 4 * q + k) != lane(1, 4 * q + k)),
            "quad {q}"
        );
    }
    let fails = |em: &kiln_vc4::emit::Emitted, ssa: &kiln_ir::Function| {
        harness::check(ssa, em, OutputMode::Vpm, &info).is_err()
    };
    assert!(!fails(&c.emitted, &c.ssa));
    // x and y swapped in the selected function: the interpreter disagrees.
    let mut swapped = c.ssa.clone();
    for inst in swapped.blocks.iter_mut().flat_map(|b| b.insts.iter_mut()) {
        use kiln_vc4::ops::Op;
        match Op::of_opcode(inst.op) {
            Some(Op::Fddx) => inst.op = Op::Fddy.opcode(),
            Some(Op::Fddy) => inst.op = Op::Fddx.opcode(),
            _ => {}
        }
    }
    assert!(fails(&c.emitted, &swapped));
    // The element bit of the other axis, or the rotations of the other axis.
    let mutate = |f: &dyn Fn(&mut kiln_qpu::isa::AluInstr)| {
        let mut em = c.emitted.clone();
        for i in em.instrs.iter_mut() {
            if let Instr::Alu(a) = i {
                f(a);
            }
        }
        em
    };
    let bit = mutate(&|a| {
        if a.op_add == AddOp::And && a.sig == Signal::SmallImm && a.w.sf {
            a.raddr_b ^= 3;
        }
    });
    assert!(fails(&bit, &c.ssa));
    let rot = mutate(&|a| {
        if a.op_mul == MulOp::V8min && a.raddr_b >= 49 {
            a.raddr_b = 48 + ((a.raddr_b - 48) ^ 3) % 16;
        }
    });
    assert!(fails(&rot, &c.ssa));
}

/// A derivative inside a divergent if: the result is written under the execute mask, and the
/// neighbours are read whether they run or not (the interpreter's helper lanes).
#[test]
fn derivatives_under_a_mask() {
    let c = agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = flt %0, 0.5
    if.divergent %2, bb1, bb2, bb2
bb1:
    %3:v1 = fddx %1
    %4:v1 = fddy %0
    %5:v1 = fadd %3, %4
    jump bb2
bb2:
    %6:v1 = phi %1, %5
    output 0, %6
    output 1, %0
    return
}
",
    );
    // The differences go to rb14, then one masked move to the result.
    let text = c.disasm();
    assert_eq!(text.matches("fsub.zs rb14, rb14").count(), 2, "{text}");
}

/// A fragment shader with two samples, a value computed before the lookups and used after
/// them, for 2 threads.
const THREADED: &str = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fmul %0, 3.0
    %3:v1 = fsub 0.0, %1
    %20:v1 = fadd %0, %1
    %21:v1 = fmul %0, %1
    %4:v4 = texture_sample 0, 0, %2, %3
    %5:v1, %6:v1, %7:v1, %8:v1 = split_vector %4
    %22:v1 = fadd %5, %20
    %9:v4 = texture_sample 1, 0, %1, %0
    %10:v1, %11:v1, %12:v1, %13:v1 = split_vector %9
    %14:v1 = fadd %22, %13
    %15:v1 = fmul %6, %12
    %16:v1 = fsub %7, %11
    %17:v1 = fadd %8, %10
    %18:v1 = fadd %17, %21
    output 0, %14
    output 1, %15
    output 2, %16
    output 3, %18
    return
}
";

fn compile_threads(
    text: &str,
    allocator: Allocator,
    output: OutputMode,
    threads: Threads,
) -> Result<Compiled, CompileError> {
    let func = kiln_ir::parse_function(text).unwrap_or_else(|e| panic!("{e}"));
    let info = ShaderInfo::fragment_default(&func);
    compile(
        &func,
        &info,
        &CompileOptions {
            allocator,
            output,
            check: true,
            threads,
            ..CompileOptions::default()
        },
    )
}

/// Registers 16–31 of file A or B an instruction names.
fn upper_half(i: &kiln_qpu::isa::Instr) -> bool {
    use kiln_qpu::isa::{Instr, Signal};
    let w = match i {
        Instr::Alu(a) => {
            if (16..32).contains(&a.raddr_a)
                || (a.sig != Signal::SmallImm && (16..32).contains(&a.raddr_b))
            {
                return true;
            }
            &a.w
        }
        Instr::LoadImm(l) => &l.w,
        _ => return false,
    };
    (16..32).contains(&w.waddr_add) || (16..32).contains(&w.waddr_mul)
}

/// Two threads: a thread switch at each lookup (the last one `lthrsw`), only the lower half of
/// files A and B, and the same results as the interpreter with both allocators and outputs.
#[test]
fn threaded_fragment_shader_agrees() {
    use kiln_qpu::isa::{Instr, Signal};
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        for mode in [OutputMode::Vpm, OutputMode::Tlb] {
            let c = compile_threads(THREADED, allocator, mode, Threads::Two)
                .unwrap_or_else(|e| panic!("{allocator:?} {mode:?}: {e}"));
            assert_eq!(c.stats.threads, 2);
            let sigs: Vec<Signal> = c
                .emitted
                .instrs
                .iter()
                .filter_map(|i| i.signal())
                .filter(|s| matches!(s, Signal::ThreadSwitch | Signal::LastThreadSwitch))
                .collect();
            assert_eq!(
                sigs,
                [Signal::ThreadSwitch, Signal::LastThreadSwitch],
                "{}",
                c.disasm()
            );
            assert!(!c.emitted.instrs.iter().any(upper_half), "{}", c.disasm());
            assert!(matches!(c.emitted.instrs[0], Instr::Alu(_)));
            if let Err(m) = harness::check_compiled(&c) {
                panic!(
                    "{allocator:?} {mode:?}: {m}\n{}\n{}",
                    kiln_ir::print_function(&c.allocated),
                    c.disasm()
                );
            }
            // Auto picks 2 threads for it, as Mesa would.
            let auto = compile_threads(THREADED, allocator, mode, Threads::Auto).unwrap();
            assert_eq!(auto.stats.threads, 2);
            let one = compile_threads(THREADED, allocator, mode, Threads::One).unwrap();
            assert_eq!(one.stats.threads, 1);
            assert!(
                !one.emitted
                    .instrs
                    .iter()
                    .any(|i| matches!(i.signal(), Some(Signal::ThreadSwitch)))
            );
        }
    }
}

/// Values live across a thread switch are narrowed out of the accumulators; without that
/// narrowing the allocator keeps some of them in r0–r3, the simulator loses them at the switch
/// and the harness sees the difference.
#[test]
fn thread_switch_narrowing_is_needed() {
    let mut caught = 0;
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        let c = compile_threads(THREADED, allocator, OutputMode::Vpm, Threads::Two).unwrap();
        let mut f = c.ssa.clone();
        let target = f.target.clone();
        let acc = target.subset_by_name("a_or_b_or_acc");
        for t in f.temps.iter_mut().filter(|t| !t.is_none()) {
            t.subset = acc;
        }
        let ssa = f.clone();
        kiln_regalloc::allocate(
            &mut f,
            &kiln_regalloc::RaOptions {
                allocator,
                budget: Vec::new(),
                check: true,
                refuse_spilling: false,
            },
        )
        .unwrap();
        let em = kiln_vc4::emit::emit(&f, &c.info, OutputMode::Vpm).unwrap();
        assert!(kiln_qpu::isa::validate(&em.words()).is_empty());
        if harness::check(&ssa, &em, OutputMode::Vpm, &c.info).is_err() {
            caught += 1;
        }
    }
    assert!(caught > 0, "no allocator kept a value in an accumulator");
}

/// The thread switch signals of a program.
fn switches(c: &Compiled) -> Vec<(usize, kiln_qpu::isa::Signal)> {
    use kiln_qpu::isa::Signal;
    c.emitted
        .instrs
        .iter()
        .enumerate()
        .filter_map(|(k, i)| i.signal().map(|s| (k, s)))
        .filter(|(_, s)| matches!(s, Signal::ThreadSwitch | Signal::LastThreadSwitch))
        .collect()
}

/// The last switch runs exactly once: on the last lookup when its block does (here the body
/// of a loop the constant condition leaves after one pass, as the front end wraps early
/// returns), else on a switch after the if, on every path, before the program end (a lookup
/// inside an if, where Mesa gives up threading).
#[test]
fn last_thread_switch_runs_once() {
    use kiln_qpu::isa::{Instr, Signal};
    let once = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    loop bb1, bb4
bb1:
    %4:v4 = texture_sample 0, 0, %0, %1
    %5:v1, %6:v1, %7:v1, %8:v1 = split_vector %4
    %9:v1 = fadd %5, %0
    if.uniform -1, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    continue bb1
bb4:
    %10:v1 = phi %9
    output 0, %10
    output 1, %6
    return
}
";
    let in_if = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:s1 = uniform 0
    %3:v1 = flt %0, 0.4
    %20:v4 = texture_sample 1, 0, %1, %0
    %21:v1, %22:v1, %23:v1, %24:v1 = split_vector %20
    if.divergent %3, bb1, bb2, bb3
bb1:
    %4:v4 = texture_sample 0, 0, %0, %1
    %5:v1, %6:v1, %7:v1, %8:v1 = split_vector %4
    jump bb3
bb2:
    %9:v1 = fmul %0, %2
    jump bb3
bb3:
    %10:v1 = phi %6, %9
    %11:v1 = fadd %10, %22
    output 0, %11
    return
}
";
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        for mode in [OutputMode::Vpm, OutputMode::Tlb] {
            let c = compile_threads(once, allocator, mode, Threads::Two).unwrap();
            assert_eq!(
                switches(&c).iter().map(|s| s.1).collect::<Vec<_>>(),
                [Signal::LastThreadSwitch]
            );
            harness::check_compiled(&c).unwrap();
            let c = compile_threads(in_if, allocator, mode, Threads::Auto).unwrap();
            assert_eq!(c.stats.threads, 2);
            let sw = switches(&c);
            assert_eq!(
                sw.iter().map(|s| s.1).collect::<Vec<_>>(),
                [
                    Signal::ThreadSwitch,
                    Signal::ThreadSwitch,
                    Signal::LastThreadSwitch
                ],
                "{}",
                c.disasm()
            );
            // After the if: every path runs it once.
            assert!(
                c.emitted.instrs[..sw[2].0]
                    .iter()
                    .rposition(|i| matches!(i, Instr::Branch(_)))
                    .is_none_or(|b| b + 3 < sw[2].0),
                "{}",
                c.disasm()
            );
            harness::check_compiled(&c).unwrap_or_else(|m| panic!("{m}\n{}", c.disasm()));
        }
    }
}

/// Fall-back to one thread, as Mesa's `vc4_get_compiled_shader`: a shader without lookups is
/// not threaded (`Two` says why); one whose values live across a lookup do not fit the lower
/// half of files A and B is compiled again for one thread.
#[test]
fn threads_fall_back_to_one() {
    let no_lookup = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = fmul %0, 2.0
    output 0, %1
    return
}
";
    let c = compile_threads(no_lookup, Allocator::Graph, OutputMode::Tlb, Threads::Auto).unwrap();
    assert_eq!(c.stats.threads, 1);
    harness::check_compiled(&c).unwrap();
    match compile_threads(no_lookup, Allocator::Graph, OutputMode::Tlb, Threads::Two) {
        Err(e @ CompileError::Unsupported(_)) => {
            assert!(e.to_string().contains("no texture lookup"), "{e}")
        }
        r => panic!("{:?}", r.map(|c| c.stats)),
    }
    // 36 values live across the lookup: more than the 29 registers of ra0–ra15 and rb0–rb15
    // (ra13, ra14 and rb14 reserved), fewer than the 61 of the full files.
    let n = 36;
    let mut text = String::from("target generic(v=64, s=16)\nfunction @main {\nbb0:\n");
    for k in 0..n {
        text += &format!("    %{k}:v1 = input {k}\n");
    }
    text += "    %100:v4 = texture_sample 0, 0, %0, %1\n";
    text += "    %101:v1, %102:v1, %103:v1, %104:v1 = split_vector %100\n";
    let mut acc = 101;
    for k in 0..n {
        text += &format!("    %{}:v1 = fadd %{acc}, %{k}\n", 200 + k);
        acc = 200 + k;
    }
    text += &format!("    output 0, %{acc}\n    output 1, %102\n    return\n}}\n");
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        let c = compile_threads(&text, allocator, OutputMode::Tlb, Threads::Auto)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.stats.threads, 1, "{allocator:?}");
        harness::check_compiled(&c).unwrap();
        assert!(compile_threads(&text, allocator, OutputMode::Tlb, Threads::Two).is_err());
    }
}

/// A switch in the then side of a divergent if hits the lanes waiting for the else side too:
/// a value they need after the if (here through a phi) is live across the switch in those
/// lanes, so it must not sit in an accumulator either (found on the corpus, where the
/// allocators coalesced it with the phi into r0).
#[test]
fn thread_switch_in_a_divergent_if_keeps_the_other_lanes_values() {
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = input 2
    %3:v1 = fle 0.5, %0
    if.divergent %3, bb1, bb2, bb3
bb1:
    %4:v4 = texture_sample 0, 0, %1, %2
    %5:v1, %6:v1, %7:v1, %8:v1 = split_vector %4
    jump bb3
bb2:
    jump bb3
bb3:
    %9:v1 = phi %5, %0
    %10:v1 = phi %6, %1
    %11:v1 = phi %7, %2
    output 0, %9
    output 1, %10
    output 2, %11
    return
}
";
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        for mode in [OutputMode::Vpm, OutputMode::Tlb] {
            let c = compile_threads(text, allocator, mode, Threads::Two).unwrap();
            let f = &c.ssa;
            let a_or_b = f.target.subset_by_name("a_or_b");
            for t in [0, 1, 2] {
                assert_eq!(f.temps[t].subset, a_or_b, "%{t}");
            }
            harness::check_compiled(&c).unwrap_or_else(|m| panic!("{m}\n{}", c.disasm()));
        }
    }
}

/// Generated programs with a texture lookup at the end of every block (coordinates from the
/// first inputs, the texel unused): every lookup is a thread switch wherever the generator put
/// its ifs and loops, with the program's values live across it in every lane. Compiled with
/// `auto` (2 threads when they fit), both allocators; every output of every lane agrees. (This
/// found the phi rule of `narrow`: a loop-exit phi's copy sits at the divergent break, inside
/// the loop, and the lanes that left keep it while the others switch threads.)
#[test]
fn generated_programs_with_thread_switches_agree() {
    use kiln_ir::generate::{GenConfig, generate};
    let seeds: u64 = std::env::var("KILN_EMIT_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let (mut threaded, mut single, mut other) = (0, 0, 0);
    for seed in 0..seeds {
        let cfg = GenConfig {
            vectors: false,
            constraints: false,
            size: 50 + (seed as usize % 4) * 20,
            ..GenConfig::new(seed)
        };
        let func = generate(&cfg);
        let inputs: Vec<String> = func.blocks[0]
            .insts
            .iter()
            .filter(|i| i.op == kiln_ir::Opcode::Input && func.class(i.defs[0].temp).size == 1)
            .map(|i| format!("%{}", i.defs[0].temp.0))
            .collect();
        let Some(s) = inputs.first() else { continue };
        let t = inputs.get(1).unwrap_or(s);
        let mut fresh = func.temps.len();
        let mut text = String::new();
        let mut block: Vec<String> = Vec::new();
        let flush = |block: &mut Vec<String>, text: &mut String, fresh: &mut usize| {
            if !block.is_empty() {
                let v = *fresh;
                *fresh += 5;
                // After the phis; the first per-lane float operation after it reads the
                // sample's red (so that the lookup is not dead).
                let at = block.iter().take_while(|l| l.contains("phi")).count();
                block.insert(at, format!("    %{v}:v4 = texture_sample 0, 0, {s}, {t}"));
                block.insert(
                    at + 1,
                    format!(
                        "    %{}:v1, %{}:v1, %{}:v1, %{}:v1 = split_vector %{v}",
                        v + 1,
                        v + 2,
                        v + 3,
                        v + 4
                    ),
                );
                let reader = block[at + 2..].iter().position(|l| {
                    l.contains(":v1 = f") && l.split(" = ").nth(1).is_some_and(|r| r.contains('%'))
                });
                if let Some(k) = reader {
                    let line = &mut block[at + 2 + k];
                    let (lhs, rhs) = line.split_once(" = ").expect("a definition");
                    let (op, args) = rhs.split_once(' ').expect("an operation with operands");
                    let mut args: Vec<String> = args.split(", ").map(str::to_string).collect();
                    if let Some(a) = args.iter_mut().find(|a| a.starts_with('%')) {
                        *a = format!("%{}", v + 1);
                    }
                    *line = format!("{lhs} = {op} {}", args.join(", "));
                }
            }
            for l in block.drain(..) {
                text.push_str(&l);
                text.push('\n');
            }
        };
        for line in kiln_ir::print_function(&func).lines() {
            if line.starts_with("bb") || line.starts_with('}') {
                flush(&mut block, &mut text, &mut fresh);
                text.push_str(line);
                text.push('\n');
            } else if line.starts_with("    ") {
                block.push(line.to_string());
            } else {
                text.push_str(line);
                text.push('\n');
            }
        }
        let func = kiln_ir::parse_function(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let info = ShaderInfo::debug(&func);
        for allocator in [Allocator::Ssa, Allocator::Graph] {
            let opts = CompileOptions {
                allocator,
                output: OutputMode::Vpm,
                check: true,
                threads: Threads::Auto,
                ..CompileOptions::default()
            };
            match compile(&func, &info, &opts) {
                Ok(c) => {
                    if c.stats.threads == 2 {
                        threaded += 1;
                    } else {
                        single += 1;
                    }
                    if let Err(m) = harness::check_compiled(&c) {
                        panic!(
                            "seed {seed} {allocator:?} ({} threads): {m}\n{:?}\n{}\n{}",
                            c.stats.threads,
                            c.emitted.uniforms.iter().enumerate().collect::<Vec<_>>(),
                            kiln_ir::print_function(&c.allocated),
                            c.disasm()
                        );
                    }
                }
                Err(e) => {
                    other += 1;
                    eprintln!("seed {seed} {allocator:?}: {e}");
                }
            }
        }
    }
    // At 3,000 seeds: 3,352 of 6,000 compile threaded, 2,636 single-threaded, all agree; 12
    // allocations are rejected by the allocation checker (an allocator matter, as above).
    eprintln!("{threaded} threaded, {single} single-threaded, {other} not compiled");
    assert!(
        threaded as u64 >= seeds,
        "{threaded} threaded, {single} single"
    );
    assert!(other as u64 * 100 <= seeds, "{other} not compiled");
}

/// A comparison read by two selects and a branch is issued again at each of them (Mesa's
/// `ntq_emit_bcsel`): no boolean is made (`mov.cs r, -1` / `mov.cc r, 0`) or tested
/// (`mov.sf nop, r`), and the program agrees with the interpreter.
#[test]
fn comparisons_at_their_uses() {
    let c = agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = flt %0, %1
    %3:v1 = fmul %0, 3.0
    %4:v1 = sel %2, %3, %1
    %5:v1 = fadd %4, 1.0
    %6:v1 = sel %2, %5, %0
    %7:s1 = uniform 0
    %8:s1 = flt %7, 0.5
    if.uniform %8, bb1, bb2, bb2
bb1:
    %9:v1 = fmul %6, %6
    jump bb2
bb2:
    %10:v1 = phi %6, %9
    output 0, %4
    output 1, %10
    return
}
",
    );
    use kiln_qpu::isa::{AddOp, Instr, Signal};
    let tests = c.emitted.instrs.iter().filter(|i| {
        matches!(i, Instr::Alu(a) if a.w.sf && a.op_add == AddOp::Or && a.add_a == a.add_b
            && a.sig != Signal::SmallImm)
    });
    assert_eq!(tests.count(), 0, "a boolean tested:\n{}", c.disasm());
    let minus_one = c
        .emitted
        .instrs
        .iter()
        .filter(|i| matches!(i, Instr::Alu(a) if a.sig == Signal::SmallImm && a.raddr_b == 31));
    assert_eq!(minus_one.count(), 0, "a boolean made:\n{}", c.disasm());
}

/// An operation whose value a select reads and a phi after the branch reads too (through the
/// register it shares with the phi: out of SSA, that copy is an identity and goes) is written:
/// the select may not take it over as its own conditional write (it would leave the register
/// unwritten in the lanes where the select chose its other value).
#[test]
fn a_value_a_phi_reads_is_written() {
    agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = input 2
    %3:s1 = uniform 0
    %4:s1 = flt %3, 0.5
    if.uniform %4, bb1, bb2, bb3
bb1:
    %5:v1 = fmin %0, %1
    %6:v1 = flt %2, %0
    %7:v1 = sel %6, %5, %2
    %8:v1 = fmul %7, %7
    jump bb3
bb2:
    jump bb3
bb3:
    %9:v1 = phi %5, %1
    output 0, %9
    return
}
",
    );
}

/// An SFU result whose readers all come before the next r4 write is read from r4 by each (no
/// move into a register, Mesa's `fmul d, r4, …`); one a later lookup would overwrite first
/// is moved out. Both agree with the interpreter.
#[test]
fn sfu_results_read_in_place() {
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = frcp %1
    %3:v1 = fmul %2, %0
    %4:v1 = fadd %2, 1.0
    %5:v1 = frsq %0
    %6:v4 = texture_sample 0, 0, %0, %1
    %7:v1, %8:v1, %9:v1, %10:v1 = split_vector %6
    %11:v1 = fmul %5, %7
    output 0, %3
    output 1, %4
    output 2, %11
    output 3, %8
    return
}
";
    let c = agrees(text);
    let code = c.disasm();
    let moves = code
        .lines()
        .filter(|l| l.contains(", r4 ;") && l.starts_with("mov"))
        .count();
    assert_eq!(moves, 1, "one SFU result moved out of r4:\n{code}");
    assert!(
        code.lines()
            .any(|l| l.contains("fmul") && l.contains(", r4,")
                || l.contains("fmul") && l.contains(", r4 ;") && !l.starts_with("mov")),
        "an SFU result read from r4:\n{code}"
    );
}

/// Two lookups one after the other: the second's request goes out right after the first's
/// thread switch, before its load, so that both wait in the TMU at once (Mesa's batching);
/// the validators and the interpreter agree, and the estimate falls by the overlap.
#[test]
fn the_next_request_waits_with_the_load() {
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v4 = texture_sample 0, 0, %0, %1
    %3:v1, %4:v1, %5:v1, %6:v1 = split_vector %2
    %7:v4 = texture_sample 1, 0, %1, %0
    %8:v1, %9:v1, %10:v1, %11:v1 = split_vector %7
    %12:v1 = fadd %3, %8
    %13:v1 = fmul %4, %9
    output 0, %12
    output 1, %13
    output 2, %5
    output 3, %10
    return
}
";
    let c = agrees(text);
    let code = c.disasm();
    let first_load = code
        .lines()
        .position(|l| l.starts_with("load_tmu0"))
        .expect("a load");
    let requests = code
        .lines()
        .take(first_load)
        .filter(|l| l.contains("tmu0_s"))
        .count();
    assert_eq!(requests, 2, "both requests before the first load:\n{code}");
    assert!(
        c.stats.estimated_cycles < 200 + c.stats.instructions,
        "{:?}",
        c.stats
    );
}

/// The colour packed into an accumulator is written to the tile buffer at the program's end,
/// by the end's own instruction or in its delay slots, which hold the program's last
/// instructions rather than `nop`s; the scoreboard is waited for by a signal before it. Both
/// validators accept it; without the wait they refuse it.
#[test]
fn the_colour_write_ends_the_program() {
    use kiln_qpu::isa::{Instr, Signal, validate::validate_instrs, validate_mesa::validate_mesa};
    let text = "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fadd %0, %1
    %3:v1 = fmul %0, 0.5
    %4:v1 = fmul %1, %0
    output 0, %3
    output 1, %4
    output 2, %2
    output 3, 1.0
    return
}
";
    agrees(text);
    let (c, _) = compile_text(text, Allocator::Graph, OutputMode::Tlb);
    let code = &c.emitted.instrs;
    let end = code
        .iter()
        .position(|i| i.signal() == Some(Signal::ProgramEnd))
        .expect("an end");
    assert!(
        code[end..].iter().any(kiln_qpu::isa::effects::is_tlb),
        "the end or its slots write the colour:\n{}",
        c.disasm()
    );
    assert_eq!(end + 3, code.len(), "{}", c.disasm());
    assert!(
        code[end + 1..].iter().all(|i| *i != Instr::nop()),
        "the slots do work:\n{}",
        c.disasm()
    );
    let wait = code
        .iter()
        .position(|i| i.signal() == Some(Signal::ScoreboardWait))
        .expect("a scoreboard wait");
    assert!(wait < end, "{}", c.disasm());
    assert!(validate_instrs(code).is_empty());
    let words: Vec<u64> = code.iter().map(|i| i.encode()).collect();
    assert!(validate_mesa(&words).is_ok());
    // The end one instruction later leaves it one delay slot: both validators refuse that.
    let mut late = code.clone();
    for (k, sig) in [(end, Signal::None), (end + 1, Signal::ProgramEnd)] {
        if let Instr::Alu(a) = &mut late[k] {
            a.sig = sig;
        }
    }
    assert!(!validate_instrs(&late).is_empty());
    let words: Vec<u64> = late.iter().map(|i| i.encode()).collect();
    assert!(validate_mesa(&words).is_err());
}

/// A divergent side of a dozen instructions is branched over when no lane runs it; a side of
/// two runs masked, with no branch (a branch and its delay slots would cost more than the
/// side). Both agree with the interpreter.
#[test]
fn only_long_divergent_sides_are_branched_over() {
    let side = |n: usize| {
        let mut body = String::new();
        let mut last = "%1".to_string();
        for k in 0..n {
            body.push_str(&format!("    %{}:v1 = fmul {last}, 1.5\n", 10 + k));
            last = format!("%{}", 10 + k);
        }
        format!(
            "target generic(v=32, s=16)
function @main {{
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = flt %0, 0.5
    if.divergent %2, bb1, bb2, bb3
bb1:
{body}    jump bb3
bb2:
    jump bb3
bb3:
    %6:v1 = phi {last}, %0
    output 0, %6
    output 1, %1
    output 2, %0
    output 3, %6
    return
}}
"
        )
    };
    let branches = |c: &Compiled| {
        c.emitted
            .instrs
            .iter()
            .filter(|i| matches!(i, kiln_qpu::isa::Instr::Branch(_)))
            .count()
    };
    let short = agrees(&side(2));
    let long = agrees(&side(14));
    assert_eq!(branches(&short), 0, "{}", short.disasm());
    assert_eq!(branches(&long), 1, "{}", long.disasm());
}

/// A uniform loop inside a divergent `if`: its counter is a phi of every lane (`phi.all_lanes`)
/// whose entry copy sits in masked code. The copy must write every lane, as the loop's test
/// reads them all; a masked copy leaves the lanes that skipped the `if` without the counter
/// (the allocation checker's "found no known value").
#[test]
fn a_uniform_loop_in_a_divergent_if_copies_its_counter_into_every_lane() {
    agrees(
        "target generic(v=32, s=16)
function @main {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:v1 = flt %0, 0.5
    if.divergent %2, bb1, bb6, bb6
bb1:
    %9:s1 = fmin %1, 8.0
    loop bb2, bb5
bb2:
    %3:s1 = phi 0.0, %5
    %4:s1 = flt %9, %3
    if.uniform %4, bb3, bb4, bb4
bb3:
    break bb5
bb4:
    %5:s1 = fadd %3, 1.0
    continue bb2
bb5:
    %6:s1 = phi %3
    %7:v1 = fadd %0, %6
    jump bb6
bb6:
    %8:v1 = phi %0, %7
    output 0, %8
    return
}
",
    );
}
