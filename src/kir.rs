//! `.kir` text in and out of the driver: reading a file or standard input, parsing with a
//! diagnostic at line:column, verifying with every violation listed, and the liveness report
//! (`kiln liveness`, the liveness filetests) as annotated text or JSON, and the interpreter's
//! inputs (`kiln interp`).

use kiln_analysis::{Cfg, Liveness};
use kiln_ir::text::{fmt_reg, print_function_annotated};
use kiln_ir::{Block, Demand, Function, Target, verify};
use miette::{Diagnostic, NamedSource, SourceSpan};
use serde_json::{Value as Json, json};
use std::io::Read;
use std::path::Path;

/// A reading error pointing into the source.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(kiln::parse))]
struct ParseDiagnostic {
    message: String,
    #[source_code]
    src: NamedSource<String>,
    #[label("here")]
    span: SourceSpan,
}

/// Reads a file or standard input.
pub fn read_input(path: &Path) -> miette::Result<(String, String)> {
    let name = path.display().to_string();
    if name == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| miette::miette!("cannot read standard input: {e}"))?;
        return Ok(("<stdin>".into(), s));
    }
    let bytes = std::fs::read(path).map_err(|e| miette::miette!("cannot read {name}: {e}"))?;
    let text =
        String::from_utf8(bytes).map_err(|e| miette::miette!("{name} is not UTF-8 text: {e}"))?;
    Ok((name, text))
}

/// Parses `.kir` text into a function, or a diagnostic pointing at line:column.
pub fn parse_source(name: &str, text: &str) -> miette::Result<Function> {
    kiln_ir::text::parse_function_with(text, &crate::targets()).map_err(|e| {
        let offset: usize = text
            .split_inclusive('\n')
            .take(e.line - 1)
            .map(str::len)
            .sum::<usize>()
            + text
                .split_inclusive('\n')
                .nth(e.line - 1)
                .map_or(0, |l| l.chars().take(e.col - 1).map(char::len_utf8).sum());
        let offset = offset.min(text.len());
        ParseDiagnostic {
            message: format!("{name}:{}:{}: {}", e.line, e.col, e.message),
            src: NamedSource::new(name, text.to_string()),
            span: (offset, 0).into(),
        }
        .into()
    })
}

/// Parses and verifies, reporting every violation.
pub fn load_verified(path: &Path) -> miette::Result<Function> {
    let (name, text) = read_input(path)?;
    let func = parse_source(&name, &text)?;
    check(&name, &func)?;
    Ok(func)
}

pub fn check(name: &str, func: &Function) -> miette::Result<()> {
    verify(func).map_err(|errs| {
        let lines: Vec<String> = errs.iter().map(|e| format!("  {e}")).collect();
        miette::miette!(
            "{name}: the function does not verify ({} errors):\n{}",
            errs.len(),
            lines.join("\n")
        )
    })
}

fn fmt_demand(target: &dyn Target, d: Demand) -> String {
    let parts: Vec<String> = target
        .files()
        .iter()
        .enumerate()
        .map(|(i, f)| format!("{}={}", f.name, d.0[i]))
        .collect();
    parts.join(" ")
}

fn fmt_set(set: &kiln_analysis::LiveSet) -> String {
    let parts: Vec<String> = set.iter().map(|t| t.to_string()).collect();
    format!("{{{}}}", parts.join(", "))
}

/// The liveness report as annotated `.kir` text.
pub fn liveness_text(func: &Function, cfg: &Cfg, lv: &Liveness, demand: bool) -> String {
    let target = &*func.target;
    let dems: Vec<Vec<kiln_analysis::InstDemand>> =
        func.block_ids().map(|b| lv.inst_demands(func, b)).collect();
    let text = print_function_annotated(
        func,
        |b, k| {
            if !demand {
                return None;
            }
            let d = &dems[b.index()][k];
            let stages: Vec<String> = target
                .files()
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    format!(
                        "{}:{}",
                        f.name,
                        d.stages()
                            .iter()
                            .map(|s| s.0[i].to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                })
                .collect();
            Some(format!(
                "demand {} | stages {}",
                fmt_demand(target, d.register_demand()),
                stages.join(" ")
            ))
        },
        |b| {
            let i = b.index();
            let preds = |p: &[Block]| {
                p.iter()
                    .map(|b| b.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let mut note = format!(
                "preds {} | linear preds {} | live-in {} | live-out {}",
                preds(&cfg.logical.preds[i]),
                preds(&cfg.linear.preds[i]),
                fmt_set(&lv.live_in[i]),
                fmt_set(&lv.live_out[i])
            );
            if demand {
                note.push_str(&format!(" | max {}", fmt_demand(target, lv.block_max[i])));
            }
            Some(note)
        },
    );
    let mut text = text;
    for (l, leaving) in lv.loop_leaving.iter().enumerate() {
        if !leaving.is_empty() {
            text.push_str(&format!(
                "; loop {l} ({}): seed 003, leaving {}\n",
                cfg.loops[l].header,
                fmt_set(leaving)
            ));
        }
    }
    if demand {
        format!("{text}; max demand: {}\n", fmt_demand(target, lv.max))
    } else {
        text
    }
}

fn demand_json(target: &dyn Target, d: Demand) -> Json {
    let map: serde_json::Map<String, Json> = target
        .files()
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.clone(), json!(d.0[i])))
        .collect();
    Json::Object(map)
}

/// The liveness report as JSON.
pub fn liveness_json(func: &Function, cfg: &Cfg, lv: &Liveness) -> Json {
    let target = &*func.target;
    let names =
        |set: &kiln_analysis::LiveSet| set.iter().map(|t| t.to_string()).collect::<Vec<_>>();
    let blocks: Vec<Json> = func
        .block_ids()
        .map(|b| {
            let i = b.index();
            let insts: Vec<Json> = func
                .block(b)
                .insts
                .iter()
                .zip(&lv.inst_demands(func, b))
                .map(|(inst, d)| {
                    json!({
                        "text": kiln_ir::text::print_inst(func, inst),
                        "stages": d.stages().iter().map(|s| demand_json(target, *s)).collect::<Vec<_>>(),
                        "register_demand": demand_json(target, d.register_demand()),
                        "live_changes": demand_json(target, d.live_changes()),
                        "temp_registers": demand_json(target, d.temp_registers()),
                        "temp_reg_changes": demand_json(target, d.temp_reg_changes()),
                        "operands": inst.operands.iter().map(|o| json!({
                            "kill": o.is_kill(), "first_kill": o.is_first_kill(), "late_kill": o.is_late_kill(),
                            "clobbered": o.is_clobbered(), "copy_kill": o.is_copy_kill(), "vector_aligned": o.is_vector_aligned(),
                            "fixed": o.fixed.map(|r| fmt_reg(target, r)),
                        })).collect::<Vec<_>>(),
                        "dead_definitions": inst.defs.iter().filter(|d| d.dead).map(|d| d.temp.to_string()).collect::<Vec<_>>(),
                    })
                })
                .collect();
            json!({
                "block": b.to_string(),
                "logical_preds": cfg.logical.preds[i].iter().map(|b| b.to_string()).collect::<Vec<_>>(),
                "linear_preds": cfg.linear.preds[i].iter().map(|b| b.to_string()).collect::<Vec<_>>(),
                "loop_depth": cfg.loop_depth(b),
                "live_in": names(&lv.live_in[i]),
                "live_out": names(&lv.live_out[i]),
                "max_demand": demand_json(target, lv.block_max[i]),
                "instructions": insts,
            })
        })
        .collect();
    let loops: Vec<Json> = cfg
        .loops
        .iter()
        .zip(&lv.loop_leaving)
        .map(|(l, leaving)| {
            json!({
                "header": l.header.0,
                "exit": l.exit.0,
                "divergent": l.divergent,
                "leaving": leaving.iter().map(|t| t.0).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "function": func.name,
        "max_demand": demand_json(target, lv.max),
        "blocks": blocks,
        "loops": loops,
    })
}

/// A 32-bit value as text: a float (`0.25`, `8.0`, `1e3`, `inf`, `nan`, or `8f`), an integer
/// (`8`, `-3`, `8u`, `8i`) or hexadecimal bits (`0x3f800000`).
pub fn parse_value(s: &str) -> Result<u32, String> {
    parse_value_how(s).map(|(v, _)| v)
}

/// [`parse_value`] and how the text was read (`float`, `integer`, `bits`).
pub fn parse_value_how(s: &str) -> Result<(u32, &'static str), String> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        return u32::from_str_radix(h, 16)
            .map(|v| (v, "bits"))
            .map_err(|_| format!("`{s}` is not a 32-bit hex value"));
    }
    let float = |t: &str| {
        t.parse::<f32>()
            .map(|f| (f.to_bits(), "float"))
            .map_err(|_| format!("`{s}` is not a float"))
    };
    if let Some(f) = s.strip_suffix(['f', 'F']).filter(|t| !t.contains("in")) {
        return float(f);
    }
    if s.contains(['.', 'e', 'E']) || s.contains("inf") || s.contains("nan") {
        return float(s);
    }
    let digits = s.strip_suffix(['u', 'U', 'i', 'I']).unwrap_or(s);
    digits
        .parse::<i64>()
        .ok()
        .filter(|v| (i32::MIN as i64..=u32::MAX as i64).contains(v))
        .map(|v| (v as u32, "integer"))
        .ok_or_else(|| format!("`{s}` is not a 32-bit integer"))
}

/// The interpreter's inputs for `func` on `lanes` lanes: `SLOT=V0,V1,…` per-lane input values
/// (the last repeats), `SLOT=V` uniform words, values as [`parse_value`] reads them. Inputs not
/// given hold the lane index as a float, uniforms 0. With the environment, one line per slot
/// saying what it holds and how its text was read, or that it was not given.
pub fn interp_env(
    func: &Function,
    lanes: usize,
    inputs: &[String],
    uniforms: &[String],
) -> Result<(kiln_interp::Env, Vec<String>), String> {
    if !(1..=64).contains(&lanes) {
        return Err("--lanes must be in 1..=64".into());
    }
    let mut env = kiln_interp::Env::new(lanes);
    let mut notes = Vec::new();
    let values = |a: &str, what: &str| -> Result<(u32, Vec<u32>, Vec<&'static str>), String> {
        let (slot, text) = a
            .split_once('=')
            .ok_or_else(|| format!("{what} `{a}`: expected SLOT=VALUE[,VALUE…]"))?;
        let slot = slot
            .trim()
            .parse::<u32>()
            .map_err(|_| format!("{what} `{a}`: `{slot}` is not a slot number"))?;
        let (vals, hows): (Vec<u32>, Vec<&str>) = text
            .split(',')
            .map(parse_value_how)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{what} {e}"))?
            .into_iter()
            .unzip();
        Ok((slot, vals, hows))
    };
    for a in inputs {
        let (slot, vals, hows) = values(a, "--input")?;
        notes.push(format!(
            "input {slot} = {} (read as {})",
            a.split_once('=').map_or("", |x| x.1),
            hows.join(", ")
        ));
        let last = *vals.last().expect("split yields one value at least");
        env.inputs.insert(
            slot,
            (0..lanes)
                .map(|l| vals.get(l).copied().unwrap_or(last))
                .collect(),
        );
    }
    for a in uniforms {
        let (slot, vals, hows) = values(a, "--uniform")?;
        if vals.len() != 1 {
            return Err(format!("--uniform {a}: a uniform is one value"));
        }
        notes.push(format!(
            "uniform {slot} = {:#010x} (read as {})",
            vals[0], hows[0]
        ));
        env.uniforms.insert(slot, vals[0]);
    }
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        match inst.op {
            kiln_ir::Opcode::Input if !env.inputs.contains_key(&inst.imms[0]) => {
                notes.push(format!(
                    "input {}: not given, the lane index as a float",
                    inst.imms[0]
                ));
                env.inputs.insert(
                    inst.imms[0],
                    (0..lanes).map(|l| (l as f32).to_bits()).collect(),
                );
            }
            kiln_ir::Opcode::Uniform if !env.uniforms.contains_key(&inst.imms[0]) => {
                notes.push(format!("uniform {}: not given, 0", inst.imms[0]));
                env.uniforms.insert(inst.imms[0], 0);
            }
            _ => {}
        }
    }
    Ok((env, notes))
}
