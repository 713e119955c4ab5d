//! `kiln print`, `kiln verify`, `kiln liveness`: reading, checking and analysing `.kir` files.

use crate::cli::print as out;
use crate::kir::{liveness_json, liveness_text, load_verified};
use clap::Args;
use kiln_analysis::Context;
use std::path::PathBuf;

/// A `.kir` file to read; `-` reads standard input.
#[derive(Debug, Args)]
pub struct FileArg {
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct LivenessArgs {
    pub file: PathBuf,
    /// Annotate every instruction with its register demand stages.
    #[arg(long)]
    pub demand: bool,
    /// Print JSON for tools instead of annotated text.
    #[arg(long)]
    pub json: bool,
}

pub fn print(args: FileArg) -> miette::Result<()> {
    let func = load_verified(&args.file)?;
    out(&kiln_ir::print_function(&func));
    Ok(())
}

pub fn verify_cmd(args: FileArg) -> miette::Result<()> {
    let func = load_verified(&args.file)?;
    out(&format!(
        "ok: {} blocks, {} instructions, {} temps\n",
        func.blocks.len(),
        func.inst_count(),
        func.temps.iter().filter(|c| !c.is_none()).count()
    ));
    Ok(())
}

pub fn liveness(args: LivenessArgs) -> miette::Result<()> {
    let func = load_verified(&args.file)?;
    if func.allocated {
        return Err(miette::miette!(
            "liveness runs on SSA functions; {} is allocated",
            args.file.display()
        ));
    }
    let mut cx = Context::new(func);
    let cfg = cx.cfg().map_err(|e| miette::miette!("{e}"))?;
    let lv = cx.liveness().map_err(|e| miette::miette!("{e}"))?;
    let func = cx.func();
    if args.json {
        let json = serde_json::to_string_pretty(&liveness_json(func, &cfg, &lv))
            .expect("JSON values serialize");
        out(&format!("{json}\n"));
    } else {
        out(&liveness_text(func, &cfg, &lv, args.demand));
    }
    Ok(())
}
