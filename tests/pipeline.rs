//! The pipeline's stages: the IR kept after each one is what the next one took (the kept
//! interface function is the allocation's input, the allocated one the emitter's), and every
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
        assert!(*kept(Stage::Interface) == c.compiled.ssa, "{path}");
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
