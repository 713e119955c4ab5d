//! `kiln report BEFORE AFTER`: two corpus runs compared, as shader-db's `report.py` does.

use crate::cli::print;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run before: `kiln corpus compile --json` output, or Mesa's `mesa-vc4/stats.tsv`.
    pub before: PathBuf,
    /// The run after (either kind).
    pub after: PathBuf,
    /// Programs in each list of the most helped and most hurt.
    #[arg(long, default_value_t = 10)]
    pub most: usize,
}

pub fn report(args: ReportArgs) -> miette::Result<()> {
    let read = |path: &PathBuf| {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| miette::miette!("{name}: {e}"))?;
        crate::shader_db::read_run(&name, &text).map_err(|e| miette::miette!("{e}"))
    };
    let (before, after) = (read(&args.before)?, read(&args.after)?);
    print(&crate::shader_db::report(&before, &after, args.most));
    Ok(())
}
