//! `kiln interp`: runs a `.kir` function in the reference interpreter.

use crate::kir::load_verified;
use clap::Args;
use kiln_interp::out_of_ssa::reference_assignment;
use kiln_interp::{Env, run_simt, run_ssa};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct InterpArgs {
    pub file: PathBuf,
    /// Lanes of the wave (1..=64).
    #[arg(long, default_value_t = 16)]
    pub lanes: usize,
    /// Values of an input slot, one per lane (the last repeats): `--input 0=1.5,2,0x10`.
    /// Slots not given get the lane index as a float.
    #[arg(long = "input", value_name = "SLOT=V0,V1,…")]
    pub inputs: Vec<String>,
    /// A uniform word: `--uniform 3=0.25`. Slots not given read 0.
    #[arg(long = "uniform", value_name = "SLOT=V")]
    pub uniforms: Vec<String>,
    /// Run in SIMT mode on physical registers: an allocated function as it is, an SSA function
    /// after the reference assignment (every temp in registers of its own).
    #[arg(long)]
    pub simt: bool,
    /// Executed instructions after which the run stops with an error.
    #[arg(long, default_value_t = 1_000_000)]
    pub step_limit: u64,
}

/// Reads `1`, `-3`, `0x1f` (integer bits) or `1.5`, `2e3` (float bits).
fn parse_value(s: &str) -> Result<u32, String> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        return u32::from_str_radix(h, 16).map_err(|_| format!("`{s}` is not a 32-bit hex value"));
    }
    if s.contains(['.', 'e', 'E']) || s.contains("inf") || s.contains("nan") {
        return s
            .parse::<f32>()
            .map(f32::to_bits)
            .map_err(|_| format!("`{s}` is not a float"));
    }
    s.parse::<i64>()
        .ok()
        .filter(|v| (i32::MIN as i64..=u32::MAX as i64).contains(v))
        .map(|v| v as u32)
        .ok_or_else(|| format!("`{s}` is not a 32-bit integer"))
}

fn parse_assignment(s: &str) -> Result<(u32, Vec<u32>), String> {
    let (slot, values) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected SLOT=VALUE[,VALUE…]"))?;
    let slot = slot
        .trim()
        .parse::<u32>()
        .map_err(|_| format!("`{slot}` is not a slot number"))?;
    let values = values
        .split(',')
        .map(parse_value)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((slot, values))
}

pub fn run(args: InterpArgs) -> miette::Result<()> {
    let func = load_verified(&args.file)?;
    if !(1..=64).contains(&args.lanes) {
        return Err(miette::miette!("--lanes must be in 1..=64"));
    }
    let mut env = Env::new(args.lanes);
    env.step_limit = args.step_limit;
    for a in &args.inputs {
        let (slot, vals) = parse_assignment(a).map_err(|e| miette::miette!("--input {e}"))?;
        let last = *vals.last().expect("split yields one value at least");
        env.inputs.insert(
            slot,
            (0..args.lanes)
                .map(|l| vals.get(l).copied().unwrap_or(last))
                .collect(),
        );
    }
    for a in &args.uniforms {
        let (slot, vals) = parse_assignment(a).map_err(|e| miette::miette!("--uniform {e}"))?;
        if vals.len() != 1 {
            return Err(miette::miette!("--uniform {a}: a uniform is one value"));
        }
        env.uniforms.insert(slot, vals[0]);
    }
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        match inst.op {
            kiln_ir::Opcode::Input => {
                env.inputs
                    .entry(inst.imms[0])
                    .or_insert_with(|| (0..args.lanes).map(|l| (l as f32).to_bits()).collect());
            }
            kiln_ir::Opcode::Uniform => {
                env.uniforms.entry(inst.imms[0]).or_insert(0);
            }
            _ => {}
        }
    }
    let result = if args.simt || func.allocated {
        let alloc = if func.allocated {
            func
        } else {
            reference_assignment(&func).map_err(|e| miette::miette!("{e}"))?
        };
        run_simt(&alloc, &env)
    } else {
        run_ssa(&func, &env)
    };
    match result {
        Ok(out) => {
            crate::cli::print(&out.to_string());
            Ok(())
        }
        Err(e) => {
            let trace: Vec<String> = e.trace().iter().map(|t| format!("  {t}")).collect();
            Err(miette::miette!(
                "{e}\nlast instructions:\n{}",
                trace.join("\n")
            ))
        }
    }
}
