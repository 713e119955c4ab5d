//! `kiln interp`: runs a `.kir` function in the reference interpreter.

use crate::kir::{interp_env, load_verified};
use clap::Args;
use kiln_interp::out_of_ssa::reference_assignment;
use kiln_interp::{run_simt, run_ssa};
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
    /// A uniform word: `--uniform 3=0.25` (a float: `0.25`, `8.0`, `8f`; an integer: `8`, `8u`,
    /// `-2i`; bits: `0x3f800000`). Slots not given read 0. What each slot holds is noted on
    /// standard error.
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

pub fn run(args: InterpArgs) -> miette::Result<()> {
    let func = load_verified(&args.file)?;
    let (mut env, notes) = interp_env(&func, args.lanes, &args.inputs, &args.uniforms)
        .map_err(|e| miette::miette!("{e}"))?;
    // What each slot holds, on standard error (the outputs stay alone on standard output).
    for n in notes {
        crate::cli::eprint(&format!("note: {n}\n"));
    }
    env.step_limit = args.step_limit;
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
