//! GLSL globals with initialisers: constant ones are kept and read back through the
//! interpreter; one naga cannot make constant (it drops the store) is refused with the span of
//! the global's name when the entry point reads it, never lowered to a global that reads 0.

use kiln_front::{FrontError, Language, Source, lower_entry_point, parse};
use kiln_interp::{Env, Slot, run_ssa};

fn source(globals: &str, body: &str) -> Source {
    Source {
        name: "t.frag".into(),
        language: Language::Glsl(naga::ShaderStage::Fragment),
        bytes: format!(
            "#version 450
layout(set = 0, binding = 0) uniform U {{ float progress; }};
layout(location = 0) out vec4 o;
{globals}
void main() {{ {body} }}
"
        )
        .into_bytes(),
    }
}

fn lower(s: &Source) -> Result<kiln_ir::Function, FrontError> {
    lower_entry_point(&parse(s)?, None, None).map(|l| l.function)
}

#[test]
fn non_constant_initialiser_is_refused_with_the_name_span() {
    let s = source("float g = progress + 1.0;", "o = vec4(g, 0.0, 0.0, 1.0);");
    match lower(&s) {
        Err(FrontError::Unsupported {
            what,
            span: Some(span),
        }) => {
            assert_eq!(what, "global initialiser that is not a constant expression");
            assert_eq!(&s.bytes[span], b"g");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    // Also when a function reads it, and among several declarators.
    let s = source(
        "float a = 1.0, g = progress * 2.0;\nfloat get() { return g; }",
        "o = vec4(get(), a, 0.0, 1.0);",
    );
    assert_eq!(
        lower(&s).map(|_| ()).unwrap_err().reason(),
        "unsupported: global initialiser that is not a constant expression"
    );
}

#[test]
fn constant_initialisers_and_unused_globals_lower_correctly() {
    let s = source(
        "const float c = 2.0;\nfloat h = c * 3.0;\nvec2 v = vec2(1.5, -2.0);\nfloat unused = progress + 1.0;",
        "o = vec4(h, v.x, v.y, progress);",
    );
    let f = lower(&s).unwrap_or_else(|e| panic!("{e}"));
    kiln_ir::verify(&f).expect("verifies");
    let env = Env::from_slots(&f, 4, |slot| match slot {
        Slot::Input { .. } => 0,
        Slot::Uniform(_) => 0.25f32.to_bits(),
    });
    let out = run_ssa(&f, &env).expect("runs");
    for lane in 0..4 {
        let got: Vec<f32> = (0..4)
            .map(|c| f32::from_bits(out.slots[&c][lane].as_ref().unwrap()[0].unwrap()))
            .collect();
        assert_eq!(got, [6.0, 1.5, -2.0, 0.25], "lane {lane}");
    }
}
