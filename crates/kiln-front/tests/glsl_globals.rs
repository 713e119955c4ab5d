//! GLSL globals with initialisers: constant ones are kept, ones naga cannot make constant (it
//! drops the store) run before `main` in declaration order — both read back through the
//! interpreter; one that cannot be moved is refused with the span of the global's name when the
//! entry point reads it, never lowered to a global that reads 0.

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

/// The four outputs of `f` on every lane, with uniform word 0 = `progress` and input
/// components reading `uv`.
fn outputs(f: &kiln_ir::Function, progress: f32, uv: [f32; 2]) -> Vec<[f32; 4]> {
    kiln_ir::verify(f).expect("verifies");
    let env = Env::from_slots(f, 4, |slot| match slot {
        Slot::Input { slot, .. } => uv[slot as usize % 2].to_bits(),
        Slot::Uniform(_) => progress.to_bits(),
    });
    let out = run_ssa(f, &env).expect("runs");
    (0..4)
        .map(|lane| {
            let mut v = [0.0; 4];
            for (c, x) in v.iter_mut().enumerate() {
                *x = f32::from_bits(out.slots[&(c as u32)][lane].as_ref().unwrap()[0].unwrap());
            }
            v
        })
        .collect()
}

/// GLSL runs file-scope initialisers in declaration order before `main`: ones that read
/// uniforms, inputs, other globals and functions, several declarators in one statement, a
/// global `main` then changes — the values worked out by hand.
#[test]
fn non_constant_initialisers_run_before_main_in_order() {
    let s = source(
        "layout(location = 0) in vec2 uv;
float twice(float v) { return 2.0 * v; } // a helper
float g = progress + 1.0, plain, h[2] = float[2](uv.x, progress);
const float c = 3.0;
float k = twice(g) /* reads g */ + c;
vec2 w = vec2(h[0], k);",
        "plain = 0.5; g = g + 0.25; o = vec4(g, k, w.x, w.y + plain);",
    );
    let f = lower(&s).unwrap_or_else(|e| panic!("{e}"));
    let (p, x) = (0.5f32, 0.75f32);
    let (g, k) = (p + 1.0, 2.0 * (p + 1.0) + 3.0);
    for lane in outputs(&f, p, [x, 0.0]) {
        assert_eq!(lane, [g + 0.25, k, x, k + 0.5]);
    }
    // A function reading a global that was initialised from a uniform.
    let s = source(
        "float a = 1.0, g = progress * 2.0;\nfloat get() { return g; }",
        "o = vec4(get(), a, 0.0, 1.0);",
    );
    let f = lower(&s).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(outputs(&f, 0.25, [0.0; 2])[0], [0.5, 1.0, 0.0, 1.0]);
}

/// What the lowering refuses inside a moved initialiser is pointed at where the shader has it.
#[test]
fn a_refusal_inside_a_moved_initialiser_points_at_the_declaration() {
    let s = source(
        "layout(set = 0, binding = 1) uniform texture2D tex;
layout(set = 0, binding = 2) uniform sampler smp;
vec4 t = textureOffset(sampler2D(tex, smp), vec2(progress), ivec2(1)) + progress;",
        "o = t;",
    );
    match lower(&s) {
        Err(FrontError::Unsupported {
            span: Some(span), ..
        }) => {
            let text = std::str::from_utf8(&s.bytes).unwrap();
            let at = text.find("textureOffset").unwrap();
            assert!(
                span.start >= at && span.end <= text.find("+ progress").unwrap(),
                "span {span:?} is not inside the initialiser: {:?}",
                &text[span.clone()]
            );
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}

/// A brace list is not an expression and cannot be assigned in `main`: such a global is still
/// refused with the span of its name, never lowered to read 0.
#[test]
fn an_initialiser_that_cannot_move_is_refused_with_the_name_span() {
    let s = source(
        "float h[2] = {progress, 1.0};",
        "o = vec4(h[0], h[1], 0.0, 1.0);",
    );
    match lower(&s) {
        Err(FrontError::Unsupported {
            what,
            span: Some(span),
        }) => {
            assert_eq!(what, "global initialiser that is not a constant expression");
            assert_eq!(&s.bytes[span], b"h");
        }
        Ok(f) => {
            // naga may make the list constant-foldable one day; then it must read right.
            assert_eq!(outputs(&f, 0.5, [0.0; 2])[0], [0.5, 1.0, 0.0, 1.0]);
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
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
