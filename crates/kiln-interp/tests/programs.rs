//! Small programs with outputs worked out independently of the interpreter.

use kiln_interp::out_of_ssa::reference_assignment;
use kiln_interp::{Env, InterpError, Outputs, compare, run_simt, run_ssa};
use kiln_ir::parse_function;

fn program(body: &str) -> kiln_ir::Function {
    let text = format!("target generic(v=32, s=16)\nfunction @main {{\n{body}\n}}\n");
    let f = parse_function(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    kiln_ir::verify(&f).unwrap_or_else(|e| panic!("{}\n{text}", e[0]));
    f
}

/// Lane `l` gets `f(l)` in input slot 0.
fn env_with(f: impl Fn(u32) -> u32) -> Env {
    let mut env = Env::new(16);
    env.inputs.insert(0, (0..16).map(f).collect());
    env
}

fn scalar(out: &Outputs, slot: u32, lane: usize) -> Option<u32> {
    out.slots
        .get(&slot)?
        .get(lane)?
        .as_ref()?
        .first()
        .copied()
        .flatten()
}

/// Runs in SSA mode and on the reference assignment in SIMT mode; both must agree.
fn run_both(f: &kiln_ir::Function, env: &Env) -> Outputs {
    let out = run_ssa(f, env).unwrap_or_else(|e| panic!("{e}: {:?}", e.trace()));
    let alloc = reference_assignment(f).unwrap();
    compare(f, &alloc, env).unwrap_or_else(|m| panic!("{m}"));
    out
}

#[test]
fn divergent_if_else_merges_per_lane() {
    let f = program(
        "bb0:
    %0:v1 = input 0
    %1:v1 = ult %0, 5
    if.divergent %1, bb1, bb2, bb3
bb1:
    %2:v1 = imul %0, 2
    jump bb3
bb2:
    %3:v1 = iadd %0, 100
    jump bb3
bb3:
    %4:v1 = phi %2, %3
    output 0, %4
    return",
    );
    let out = run_both(&f, &env_with(|l| l));
    for l in 0..16u32 {
        let want = if l < 5 { l * 2 } else { l + 100 };
        assert_eq!(scalar(&out, 0, l as usize), Some(want), "lane {l}");
    }
}

#[test]
fn divergent_loop_runs_until_every_lane_leaves() {
    // i = 0; loop { next = i + 1; if (n < next) break; i = next } ; out = next (= n + 1)
    let f = program(
        "bb0:
    %0:v1 = input 0
    %1:v1 = iand %0, 7
    loop bb1, bb4
bb1:
    %2:v1 = phi 0, %3
    %3:v1 = iadd %2, 1
    %4:v1 = ult %1, %3
    if.divergent %4, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    continue bb1
bb4:
    %5:v1 = phi %3
    output 0, %5
    return",
    );
    let out = run_both(&f, &env_with(|l| l * 3));
    for l in 0..16u32 {
        assert_eq!(
            scalar(&out, 0, l as usize),
            Some(((l * 3) & 7) + 1),
            "lane {l}"
        );
    }
}

#[test]
fn divergent_continue_skips_the_rest_of_the_iteration() {
    // acc = sum of the even i in 0..=n, where n = input & 7, counting i up from 0.
    let f = program(
        "bb0:
    %0:v1 = input 0
    %1:v1 = iand %0, 7
    loop bb1, bb6
bb1:
    %2:v1 = phi 0, %4, %4
    %3:v1 = phi 0, %3, %7
    %4:v1 = iadd %2, 1
    %5:v1 = ult %1, %2
    if.divergent %5, bb2, bb3, bb3
bb2:
    break bb6
bb3:
    %6:v1 = iand %2, 1
    if.divergent %6, bb4, bb5, bb5
bb4:
    continue bb1
bb5:
    %7:v1 = iadd %3, %2
    continue bb1
bb6:
    %8:v1 = phi %3
    output 0, %8
    return",
    );
    let out = run_both(&f, &env_with(|l| l));
    for l in 0..16u32 {
        let n = l & 7;
        let want: u32 = (0..=n).filter(|i| i % 2 == 0).sum();
        assert_eq!(scalar(&out, 0, l as usize), Some(want), "lane {l}");
    }
}

#[test]
fn uniform_loop_counts_with_a_linear_phi() {
    let f = program(
        "bb0:
    %0:s1 = uniform 0
    %1:v1 = input 0
    loop bb1, bb4
bb1:
    %2:s1 = linear_phi 0, %3
    %3:s1 = iadd %2, 1
    %4:s1 = ult %0, %3
    if.uniform %4, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    continue bb1
bb4:
    %5:v1 = iadd %1, %3
    output 0, %5
    return",
    );
    let mut env = env_with(|l| 10 * l);
    env.uniforms.insert(0, 4);
    let out = run_both(&f, &env);
    for l in 0..16u32 {
        assert_eq!(scalar(&out, 0, l as usize), Some(10 * l + 5), "lane {l}");
    }
}

#[test]
fn discard_ends_lanes_and_drops_their_outputs() {
    let f = program(
        "bb0:
    %0:v1 = input 0
    %1:v1 = iand %0, 1
    if.divergent %1, bb1, bb2, bb2
bb1:
    discard
    jump bb2
bb2:
    output 0, %0
    return",
    );
    let out = run_both(&f, &env_with(|l| l));
    for l in 0..16usize {
        assert_eq!(out.discarded[l], l % 2 == 1, "lane {l}");
        assert_eq!(
            scalar(&out, 0, l),
            if l % 2 == 1 { None } else { Some(l as u32) }
        );
    }
}

#[test]
fn parallel_copies_swap_atomically_and_spills_round_trip() {
    let f = program(
        "bb0:
    %0:v1 = input 0
    %1:v1 = iadd %0, 1000
    %2:v1, %3:v1 = parallel_copy %1, %0
    spill 3, %2
    %4:v1 = reload 3
    %5:v2 = create_vector %4, %3
    output 0, %5
    return",
    );
    let out = run_both(&f, &env_with(|l| l));
    for l in 0..16usize {
        let units = out.slots[&0][l].clone().unwrap();
        assert_eq!(units, vec![Some(l as u32 + 1000), Some(l as u32)]);
    }
    // On registers: a swap of two registers in one parallel copy.
    let swap = parse_function(
        "target generic(v=8, s=4)\nfunction @main allocated {\nbb0:\n    %0:v1@v[0] = input 0\n    %1:v1@v[1] = iadd %0@v[0], 7\n    %2:v1@v[1], %3:v1@v[0] = parallel_copy %0@v[0], %1@v[1]\n    %4:v2@v[0] = create_vector %3@v[0], %2@v[1]\n    output 0, %4@v[0]\n    return\n}\n",
    )
    .unwrap();
    kiln_ir::verify(&swap).unwrap();
    let out = run_simt(&swap, &env_with(|l| l)).unwrap();
    for l in 0..16usize {
        assert_eq!(
            out.slots[&0][l].clone().unwrap(),
            vec![Some(l as u32 + 7), Some(l as u32)]
        );
    }
}

#[test]
fn texture_sample_reads_the_procedural_texture() {
    let f = program(
        "bb0:
    %0:v1 = input 0
    %1:v1 = mov 0.5
    %2:v4 = texture_sample 2, 0, %0(vector_aligned, late_kill), %1(late_kill)
    output 0, %2
    return",
    );
    let out = run_both(&f, &env_with(|l| (l as f32 / 16.0 + 1.0 / 32.0).to_bits()));
    let tex = kiln_interp::Texture::procedural(2);
    for l in 0..16usize {
        let texel = tex.texels[8 * 16 + l];
        let want: Vec<Option<u32>> = texel
            .iter()
            .map(|&c| Some((c as f32 / 255.0).to_bits()))
            .collect();
        assert_eq!(out.slots[&0][l].clone().unwrap(), want, "lane {l}");
    }
}

#[test]
fn errors_instead_of_wrong_answers() {
    // A uniform branch whose condition differs across lanes.
    let f = program(
        "bb0:\n    %0:v1 = input 0\n    if.uniform %0, bb1, bb2, bb2\nbb1:\n    jump bb2\nbb2:\n    return",
    );
    let e = run_ssa(&f, &env_with(|l| l)).unwrap_err();
    assert!(
        e.to_string().contains("uniform branch condition differs"),
        "{e}"
    );
    // An endless loop.
    let f = program(
        "bb0:\n    loop bb1, bb4\nbb1:\n    %0:s1 = uniform 0\n    if.uniform %0, bb2, bb3, bb3\nbb2:\n    break bb4\nbb3:\n    continue bb1\nbb4:\n    return",
    );
    let mut env = Env::new(4);
    env.uniforms.insert(0, 0);
    env.step_limit = 10_000;
    assert!(matches!(
        run_ssa(&f, &env),
        Err(InterpError::StepLimit { .. })
    ));
    // Arithmetic on an undefined value.
    let f = program("bb0:\n    %0:v1 = iadd undef:v1, 1\n    output 0, %0\n    return");
    let e = run_ssa(&f, &Env::new(4)).unwrap_err();
    assert!(e.to_string().contains("undefined value"), "{e}");
    // A missing input.
    let f = program("bb0:\n    %0:v1 = input 9\n    output 0, %0\n    return");
    assert!(
        run_ssa(&f, &Env::new(4))
            .unwrap_err()
            .to_string()
            .contains("input slot 9")
    );
}
