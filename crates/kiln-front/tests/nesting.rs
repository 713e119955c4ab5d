//! Deep nesting: accepted up to the bound and run through the interpreter; beyond it, an
//! `unsupported: nesting deeper than …` error with the source span — before naga's parser or
//! validator could overflow its stack — and never a crash. The tests run on a thread with a
//! large stack, as the corpus runner's workers do.

use kiln_front::nesting::MAX_NESTING;
use kiln_front::{FrontError, Language, Source, lower_entry_point, parse};
use kiln_interp::{Env, Slot, run_ssa};

fn glsl(body: &str, functions: &str) -> Source {
    let src = format!(
        "#version 450\nlayout(location = 0) in vec4 x;\nlayout(location = 0) out vec4 o;\n{functions}\nvoid main() {{\n{body}\n}}\n"
    );
    Source {
        name: "test.frag".into(),
        language: Language::Glsl(naga::ShaderStage::Fragment),
        bytes: src.into_bytes(),
    }
}

/// `n` nested ifs, each adding 1 to `s` when `x.x > level`.
fn nested_ifs(n: usize) -> String {
    let mut s = String::from("float s = 0.0;\n");
    for i in 0..n {
        s += &format!("if (x.x > {i}.0) {{ s += 1.0;\n");
    }
    s += &"}".repeat(n);
    s += "\no = vec4(s, 0.0, 0.0, 1.0);";
    s
}

fn lower(source: &Source) -> Result<kiln_ir::Function, FrontError> {
    let parsed = parse(source)?;
    lower_entry_point(&parsed, None, None).map(|l| l.function)
}

fn on_big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(f)
        .expect("thread")
        .join()
        .expect("no panic");
}

#[test]
fn nesting_within_the_bound_lowers_and_runs() {
    on_big_stack(|| {
        let f = lower(&glsl(&nested_ifs(200), "")).expect("lowers");
        kiln_ir::verify(&f).expect("verifies");
        let env = Env::from_slots(&f, 8, |s| match s {
            Slot::Input { lane, .. } => (lane as f32 * 30.0).to_bits(),
            Slot::Uniform(_) => 0,
        });
        let out = run_ssa(&f, &env).expect("runs");
        for lane in 0..8 {
            let got = f32::from_bits(out.slots[&0][lane].as_ref().unwrap()[0].unwrap());
            // x.x = 30·lane exceeds the levels 0 … 30·lane − 1.
            assert_eq!(got, (30 * lane).min(200) as f32, "lane {lane}");
        }
    });
}

#[test]
fn deeper_nesting_is_unsupported_with_a_span() {
    on_big_stack(|| {
        for n in [MAX_NESTING + 1, 1000, 1500, 3000] {
            let source = glsl(&nested_ifs(n), "");
            match lower(&source) {
                Err(FrontError::Unsupported {
                    what,
                    span: Some(span),
                }) => {
                    assert_eq!(what, format!("nesting deeper than {MAX_NESTING}"));
                    let at = &source.bytes[span];
                    assert!(at == b"{" || at == b"(", "{n}: {at:?}");
                }
                other => panic!("{n}: {:?}", other.map(|_| ())),
            }
        }
        // WGSL too (naga's own WGSL limit is lower; kiln's check comes first).
        let deep = format!(
            "@fragment fn main() -> @location(0) vec4f {{ var s = 0.0; {} {} return vec4(s); }}",
            "if (s < 1.0) { s += 1.0; ".repeat(3000),
            "}".repeat(3000)
        );
        let source = Source {
            name: "deep.wgsl".into(),
            language: Language::Wgsl,
            bytes: deep.into_bytes(),
        };
        let e = lower(&source).map(|_| ()).unwrap_err();
        assert_eq!(
            e.reason(),
            format!("unsupported: nesting deeper than {MAX_NESTING}")
        );
    });
}

#[test]
fn nesting_added_by_inlining_is_bounded_too() {
    on_big_stack(|| {
        // Four functions nested 200 deep, each calling the next at its innermost level.
        let mut functions = String::new();
        for k in (0..4).rev() {
            let inner = if k == 3 {
                "s += 1.0;".to_string()
            } else {
                format!("s += f{}(v);", k + 1)
            };
            let mut body = String::from("float s = 0.0;\n");
            for i in 0..200 {
                body += &format!("if (v > {i}.0) {{\n");
            }
            body += &inner;
            body += &"}".repeat(200);
            functions += &format!("float f{k}(float v) {{ {body}\n return s; }}\n");
        }
        let source = glsl("o = vec4(f0(x.x));", &functions);
        let e = lower(&source).map(|_| ()).unwrap_err();
        assert_eq!(
            e.reason(),
            format!("unsupported: nesting deeper than {MAX_NESTING} (after inlining calls)")
        );
    });
}

/// SPIR-V has no text to scan: naga's block nesting is checked before validation. The binary
/// is the GLSL shader of `nested_ifs(260)` written out by naga's SPIR-V back end.
#[test]
fn deep_spirv_is_unsupported() {
    on_big_stack(|| {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nested260.frag.spv");
        let source = Source::from_path(&path, std::fs::read(&path).expect("fixture")).expect("spv");
        let e = lower(&source).map(|_| ()).unwrap_err();
        assert_eq!(
            e.reason(),
            format!("unsupported: nesting deeper than {MAX_NESTING}")
        );
    });
}
