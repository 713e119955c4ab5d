//! Every case of `golden/sim/` (py-videocore's hardware-verified tests), run on the simulator
//! and compared with each case's `checks` exactly as `golden/sim/check.py` defines them.

use kiln_qpu::sim::{Machine, Program};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/vc4/golden/sim")
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap_or(f64::NAN))
        .collect()
}

fn half_to_f64(h: u32) -> f64 {
    kiln_qpu::sim::alu::f16_to_f32(h as u16) as f64
}

fn close(a: f64, r: f64, c: &Value) -> bool {
    let rtol = c["rtol"].as_f64().unwrap_or(0.0);
    let atol = c["atol"].as_f64().unwrap_or(0.0);
    let rel = if c["rel_to"].as_str() == Some("actual") {
        a.abs()
    } else {
        r.abs()
    };
    if a.is_nan() || r.is_nan() {
        return false;
    }
    (a - r).abs() <= atol + rtol * rel
}

/// Applies one case's checks; returns the failures.
fn check(case: &Value, actual: &dyn Fn(&str) -> Vec<u32>) -> Vec<String> {
    let mut fails = Vec::new();
    let mut checked = 0usize;
    for c in case["checks"].as_array().unwrap() {
        let buf = c["buffer"].as_str().unwrap();
        let words = actual(buf);
        let expected = u32s(&case["expected"][buf]);
        let (lo, hi) = match c.get("rows") {
            Some(r) if !r.is_null() => {
                let r = u32s(r);
                (r[0] as usize * 16, r[1] as usize * 16)
            }
            _ => (0, words.len()),
        };
        let kind = c["kind"].as_str().unwrap();
        for (j, w) in (lo..hi).enumerate() {
            let got = words[w];
            checked += 1;
            let ok = match kind {
                "exact" => got == expected[w],
                "mask" => {
                    let m = c["mask"].as_u64().unwrap() as u32;
                    got & m == expected[w] & m
                }
                "f32_close" => close(f32::from_bits(got) as f64, f64s(&c["ref"])[j], c),
                "f16_close" => {
                    let sh = c["shift"].as_u64().unwrap() as u32;
                    close(half_to_f64((got >> sh) & 0xffff), f64s(&c["ref"])[j], c)
                }
                "byte_close" => {
                    let shifts = u32s(&c["shifts"]);
                    let tol = c["tol"].as_i64().unwrap();
                    let r = f64s(&c["ref"]);
                    shifts.iter().enumerate().all(|(k, s)| {
                        let b = ((got >> s) & 255) as i64;
                        (b - r[j * shifts.len() + k] as i64).abs() <= tol
                    })
                }
                "f32_isinf" => f32::from_bits(got).is_infinite(),
                k => panic!("unknown check kind {k}"),
            };
            if !ok {
                fails.push(format!(
                    "{buf}[{w}] ({kind}): got {got:#010x} ({}), expected {:#010x} ({})",
                    f32::from_bits(got),
                    expected[w],
                    f32::from_bits(expected[w])
                ));
            }
        }
    }
    if checked == 0 {
        fails.push("no word checked".into());
    }
    fails
}

fn run_case(case: &Value) -> Result<Vec<String>, String> {
    let code: Vec<u64> = case["program_hex"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| u64::from_str_radix(h.as_str().unwrap(), 16).unwrap())
        .collect();
    let base = case["code_address"].as_u64().unwrap() as u32;
    let mut m = Machine::new(4 << 20, Program::new(base, &code));
    for (name, b) in case["buffers"].as_object().unwrap() {
        let addr = b["address"].as_u64().unwrap() as u32;
        m.mem
            .write_words(addr, &u32s(&case["inputs"][name]))
            .unwrap();
    }
    let streams = case["uniforms_per_thread"].as_array().unwrap();
    let addrs = u32s(&case["uniforms_address"]);
    for (t, s) in streams.iter().enumerate() {
        m.mem.write_words(addrs[t], &u32s(s)).unwrap();
        m.add_qpu(addrs[t]);
    }
    m.run(3_000_000).map_err(|e| e.to_string())?;
    // the kernel must have produced its outputs (not left the initial contents)
    for (name, b) in case["buffers"].as_object().unwrap() {
        let exp = &case["expected"][name];
        if !exp.is_null() && u32s(exp) != u32s(&case["inputs"][name]) {
            let addr = b["address"].as_u64().unwrap() as u32;
            let got = m.mem.read_words(addr, u32s(exp).len()).unwrap();
            if got == u32s(&case["inputs"][name]) {
                return Err(format!("{name} unchanged"));
            }
        }
    }
    let buffers = case["buffers"].clone();
    let mem = m.mem.clone();
    let actual = move |buf: &str| {
        let b = &buffers[buf];
        mem.read_words(
            b["address"].as_u64().unwrap() as u32,
            b["n_words"].as_u64().unwrap() as usize,
        )
        .unwrap()
    };
    Ok(check(case, &actual))
}

#[test]
fn every_golden_sim_case_passes() {
    let index = std::fs::read_to_string(golden().join("INDEX.tsv")).unwrap();
    let mut failed = Vec::new();
    let mut n = 0;
    for line in index.lines().skip(1) {
        let file = line.split('\t').next().unwrap();
        let case: Value =
            serde_json::from_str(&std::fs::read_to_string(golden().join(file)).unwrap()).unwrap();
        n += 1;
        match run_case(&case) {
            Ok(f) if f.is_empty() => {}
            Ok(f) => failed.push(format!(
                "{file}: {} words differ\n    {}",
                f.len(),
                f[..f.len().min(6)].join("\n    ")
            )),
            Err(e) => failed.push(format!("{file}: error {e}")),
        }
    }
    assert_eq!(n, 42);
    assert!(
        failed.is_empty(),
        "{} of {n} cases fail:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The checker agrees with the reference expectations (`check.py --self`).
#[test]
fn expected_outputs_pass_their_own_checks() {
    let index = std::fs::read_to_string(golden().join("INDEX.tsv")).unwrap();
    for line in index.lines().skip(1) {
        let file = line.split('\t').next().unwrap();
        let case: Value =
            serde_json::from_str(&std::fs::read_to_string(golden().join(file)).unwrap()).unwrap();
        let exp = case["expected"].clone();
        let f = check(&case, &|b: &str| u32s(&exp[b]));
        assert!(f.is_empty(), "{file}: {f:?}");
    }
}
