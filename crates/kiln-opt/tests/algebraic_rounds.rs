//! The algebraic pass's worklist against its whole walk: on corpus shaders, lowered and taken
//! through the passes the default pipeline runs before it, rounds that try only the
//! instructions within reach of a change give the same function as rounds that try every
//! instruction (`kiln_opt::algebraic::rounds`), at both precisions; some of them take more than
//! two rounds, so the later rounds' reach is exercised.

use kiln_analysis::Context;
use kiln_front::corpus::shader_files;
use kiln_front::{Source, entry_points, lower_entry_point, parse};
use kiln_opt::algebraic::rounds;
use kiln_opt::{Precision, pass_by_name};
use std::path::Path;

#[test]
fn worklist_rounds_give_the_whole_walk() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let mut files = shader_files(&root);
    files.sort();
    let (mut compared, mut long) = (0, 0);
    // Every 40th file: a spread over the corpus's sources and languages.
    for path in files.iter().step_by(40) {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        let Ok(source) = Source::from_path(path, bytes) else {
            continue;
        };
        let Ok(parsed) = parse(&source) else { continue };
        for (name, stage) in entry_points(&parsed.module) {
            let Ok(lowered) = lower_entry_point(&parsed, Some(stage), Some(&name)) else {
                continue;
            };
            for precision in [Precision::Relaxed, Precision::Exact] {
                let mut cx = Context::new(lowered.function.clone());
                for pass in ["fold", "copy_prop"] {
                    cx.run(pass, pass_by_name(pass).unwrap()).unwrap();
                }
                let mut whole = Context::new(cx.func().clone());
                let (_, taken) = rounds(&mut cx, precision, false).unwrap();
                let (_, taken_whole) = rounds(&mut whole, precision, true).unwrap();
                assert_eq!(taken, taken_whole, "{} [{name}]: rounds", path.display());
                assert!(
                    cx.func() == whole.func(),
                    "{} [{name}] at {precision:?}: the worklist's function differs from the whole walk's",
                    path.display()
                );
                compared += 1;
                long += (taken > 2) as usize;
            }
        }
    }
    assert!(compared > 100, "only {compared} entry points compared");
    assert!(long > 0, "no entry point took more than two rounds");
}
