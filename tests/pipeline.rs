//! The pipeline's stages: the IR kept after each one is what the next one took (the kept
//! interface function is the allocation's input, and in the allocator's form the program's SSA
//! form; the allocated one is the emitter's), and every
//! kept function prints as `.kir` text that reads back to the same function — allocated vc4
//! code with the QPU's register names included.

use kiln::pipeline::{self, EntryPoint, Options, Stage};
use std::path::Path;

fn compile_keeping_all(path: &Path, entry: EntryPoint) -> pipeline::Compilation {
    let shader = pipeline::read_shader(path).unwrap_or_else(|e| panic!("{e}"));
    let options = Options {
        keep: Stage::ALL.to_vec(),
        ..Options::default()
    };
    pipeline::compile(&shader, &entry, &options).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_stage_is_kept_and_reads_back() {
    let fragment = EntryPoint::default();
    let vertex = EntryPoint {
        stage: Some(kiln_front::interface::Stage::Vertex),
        name: None,
    };
    let shaders = [
        ("examples/rings.frag", fragment.clone()),
        ("examples/wipe.frag", fragment.clone()),
        (
            "../shared/corpus/glsl/pixi-filters/shockwave_shockwave2.frag",
            fragment,
        ),
        (
            "../shared/corpus/glsl/pixi-filters/defaults_default2.vert",
            vertex,
        ),
    ];
    for (path, entry) in shaders {
        let c = compile_keeping_all(Path::new(path), entry);
        let stages: Vec<Stage> = c.stages.iter().map(|(s, _)| *s).collect();
        assert_eq!(stages, Stage::ALL, "{path}");
        for (stage, func) in &c.stages {
            let text = kiln_ir::print_function(func);
            let back = kiln_ir::text::parse_function_with(&text, &kiln::targets())
                .unwrap_or_else(|e| panic!("{path} after {}: {e}\n{text}", stage.name()));
            // The text carries the classes of the temps it names only.
            let mut want = func.clone();
            want.temps = func.text_temps();
            let mut got = back;
            got.temps.resize(want.temps.len(), kiln_ir::RegClass::NONE);
            assert!(
                got == want,
                "{path} after {}: the text reads back differently",
                stage.name()
            );
            let vc4 = *stage >= Stage::Selected;
            assert_eq!(
                func.target.name() == "vc4",
                vc4,
                "{path} after {}",
                stage.name()
            );
            assert_eq!(func.allocated, *stage == Stage::Allocated);
        }
        let kept = |s: Stage| &c.stages.iter().find(|(k, _)| *k == s).unwrap().1;
        assert!(*kept(Stage::Lowered) == c.lowered, "{path}");
        assert!(*kept(Stage::Optimized) == c.generic, "{path}");
        // The program's SSA form is what the allocator allocated: the kept interface function
        // with its critical edges split and in the assignment's form (itself where it needs
        // neither), as an allocation of it on its own gives back.
        let mut input = kept(Stage::Interface).clone();
        let options = kiln_regalloc::RaOptions {
            refuse_spilling: true,
            ..kiln_regalloc::RaOptions::default()
        };
        let (_, allocated) = kiln_regalloc::allocate_with_input(&mut input, &options)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(allocated == c.compiled.ssa, "{path}");
        assert!(*kept(Stage::Allocated) == c.compiled.allocated, "{path}");
        // Allocated vc4 text names the QPU's registers.
        let text = kiln_ir::print_function(kept(Stage::Allocated));
        assert!(
            text.contains("@r") && !text.contains("q["),
            "{path}:\n{text}"
        );
    }
}

/// A stage name the pipeline does not have is refused with the list of the ones it has.
#[test]
fn stage_names() {
    for s in Stage::ALL {
        assert_eq!(s.name().parse::<Stage>(), Ok(s));
    }
    let e = "qir".parse::<Stage>().unwrap_err();
    assert!(
        e.contains("lowered, optimized, selected, interface, allocated"),
        "{e}"
    );
}

/// User clip distances (`Options::clip_distances`, Mesa's `ucp_enables`): a vertex shader's
/// `gl_ClipDistance` become its last VPM rows; a fragment shader reads that many more varyings
/// and discards exactly the lanes where one is negative (worked out here per lane), and the
/// simulator agrees with the interpreter. More than eight is refused.
#[test]
fn clip_distances_discard_where_one_is_negative() {
    use kiln_front::interface::Stage as S;
    let source = |text: &str| kiln_front::Source {
        name: "clip.wgsl".into(),
        language: kiln_front::Language::Wgsl,
        bytes: text.as_bytes().to_vec(),
    };
    let frag = pipeline::parse(source(
        "@fragment fn main(@location(0) x: vec4f) -> @location(0) vec4f { return vec4f(x.x, 0.5, 0.25, 1.0); }",
    ))
    .unwrap();
    let entry = EntryPoint::default();
    let options = |n: u32| Options {
        clip_distances: n,
        ..Options::default()
    };
    let c = pipeline::compile(&frag, &entry, &options(2)).unwrap_or_else(|e| panic!("{e}"));
    let clip_inputs: Vec<u32> = c
        .interface
        .inputs
        .iter()
        .filter(|s| matches!(&s.kind, kiln_front::interface::SlotKind::BuiltIn { name, .. } if name == "clip_distance"))
        .map(|s| s.slot)
        .collect();
    assert_eq!(clip_inputs, vec![1110, 1111]);
    let lanes = 16;
    let env = kiln_interp::Env::from_slots(&c.generic, lanes, |s| match s {
        kiln_interp::Slot::Input { slot: 1110, lane } => (lane as f32 - 4.0).to_bits(),
        kiln_interp::Slot::Input { slot: 1111, lane } => (10.0 - lane as f32).to_bits(),
        kiln_interp::Slot::Input { lane, .. } => (lane as f32 * 0.25).to_bits(),
        kiln_interp::Slot::Uniform(_) => 0,
    });
    let out = kiln_interp::run_ssa(&c.generic, &env).unwrap_or_else(|e| panic!("{e}"));
    let want: Vec<bool> = (0..lanes).map(|l| !(4..=10).contains(&l)).collect();
    assert_eq!(out.discarded, want);
    kiln_vc4::harness::check_compiled(&c.compiled).unwrap_or_else(|m| panic!("{m}"));
    assert_eq!(
        c.compiled.emitted.varyings.last().copied(),
        Some(1111),
        "the distances are read after the shader's own varyings"
    );
    // Without the key nothing is discarded.
    let plain = pipeline::compile(&frag, &entry, &options(0)).unwrap();
    let out = kiln_interp::run_ssa(&plain.generic, &env).unwrap();
    assert!(out.discarded.iter().all(|d| !d));
    let e = pipeline::compile(&frag, &entry, &options(9))
        .unwrap_err()
        .to_string();
    assert!(e.contains("at most 8"), "{e}");

    let vert = pipeline::parse(source(
        "enable clip_distances;\nstruct O { @builtin(position) p: vec4f, @location(0) c: vec2f, @builtin(clip_distances) d: array<f32, 2> }\n@vertex fn main(@location(0) x: vec4f) -> O { var o: O; o.p = x; o.c = x.zw; o.d[0] = x.x; o.d[1] = -x.y; return o; }",
    ))
    .unwrap();
    let v = EntryPoint {
        stage: Some(S::Vertex),
        name: None,
    };
    let c = pipeline::compile(&vert, &v, &options(2)).unwrap_or_else(|e| panic!("{e}"));
    // Xs/Ys, Zs, 1/Wc, the two varyings, the two distances.
    assert_eq!(c.compiled.emitted.output_rows.len(), 7);
    kiln_vc4::harness::check_compiled(&c.compiled).unwrap_or_else(|m| panic!("{m}"));
    // The rows the simulator writes: the last two are d[0] = x.x and d[1] = −x.y.
    let mut env = kiln_vc4::harness::environment(&c.compiled.ssa, &c.compiled.info);
    env.inputs
        .insert(0, (0..16).map(|l| (l as f32 - 3.5).to_bits()).collect());
    env.inputs
        .insert(1, (0..16).map(|l| (l as f32 * 0.5).to_bits()).collect());
    let kiln_vc4::harness::SimOutput::Vpm(rows) = kiln_vc4::harness::simulate(
        &c.compiled.emitted,
        kiln_vc4::emit::OutputMode::Vpm,
        true,
        &env,
    )
    .unwrap() else {
        panic!("VPM rows")
    };
    let row = |k: usize| {
        rows[k]
            .1
            .iter()
            .map(|&v| f32::from_bits(v))
            .collect::<Vec<_>>()
    };
    assert_eq!(row(5), (0..16).map(|l| l as f32 - 3.5).collect::<Vec<_>>());
    assert_eq!(
        row(6),
        (0..16).map(|l| -(l as f32 * 0.5)).collect::<Vec<_>>()
    );
}
