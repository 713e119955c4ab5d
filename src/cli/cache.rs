//! `kiln cache stats|clear|verify`, and the cache options of the commands that compile.

use crate::cache::Cache;
use crate::cli::{eprint, print};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Where compiled programs are cached.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// The shader cache's directory (default: `KILN_CACHE_DIR`, else the platform's cache
    /// directory, e.g. `~/.cache/kiln`; size limit `KILN_CACHE_MAX_SIZE`, default 1G).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Neither read nor write the shader cache (also `KILN_CACHE_DISABLE=1`).
    #[arg(long, conflicts_with = "cache")]
    pub no_cache: bool,
}

impl CacheArgs {
    /// The cache these options ask for: on disk with an in-memory layer, in memory only when
    /// there is no platform cache directory, or none.
    pub fn open(&self) -> miette::Result<Cache> {
        let disabled = std::env::var("KILN_CACHE_DISABLE").is_ok_and(|v| !v.is_empty() && v != "0");
        if self.no_cache || (disabled && self.cache.is_none()) {
            return Ok(Cache::disabled());
        }
        let limit =
            Cache::limit_from_env().map_err(|e| miette::miette!("KILN_CACHE_MAX_SIZE: {e}"))?;
        Ok(match self.cache.clone().or_else(Cache::default_dir) {
            Some(dir) => Cache::open(dir).limit(limit),
            None => Cache::in_memory(),
        })
    }
}

/// Prints the cache's warning, if it had one.
pub fn warn(cache: &Cache) {
    if let Some(w) = cache.warning() {
        eprint(&format!("warning: {w}\n"));
    }
}

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Entries, bytes and the size limit of the shader cache.
    Stats(CacheArgs),
    /// Remove every entry.
    Clear(CacheArgs),
    /// Read every entry, check its header and checksum, remove the damaged ones.
    Verify(CacheArgs),
}

pub fn run(command: CacheCommand) -> miette::Result<()> {
    let (CacheCommand::Stats(args) | CacheCommand::Clear(args) | CacheCommand::Verify(args)) =
        &command;
    let cache = args.open()?;
    let Some(dir) = cache.dir().map(|d| d.display().to_string()) else {
        return Err(miette::miette!(
            "no shader cache directory (--no-cache, KILN_CACHE_DISABLE, or no platform cache directory; give --cache DIR)"
        ));
    };
    match command {
        CacheCommand::Stats(_) => {
            let files = cache.files();
            let bytes: u64 = files.iter().map(|f| f.size).sum();
            let verified = cache.verify(false);
            print(&format!(
                "cache       {dir}\nentries     {} of this build, {} of other builds, {} damaged\nsize        {} of {} ({:.1} %)\n",
                verified.current,
                verified.other_builds,
                verified.damaged.len(),
                size(bytes),
                size(cache.limit_bytes()),
                100.0 * bytes as f64 / cache.limit_bytes().max(1) as f64
            ));
            report("damaged", &verified.damaged);
        }
        CacheCommand::Clear(_) => {
            let (n, bytes) = cache.clear();
            print(&format!("removed {n} files ({}) from {dir}\n", size(bytes)));
        }
        CacheCommand::Verify(_) => {
            let verified = cache.verify(true);
            print(&format!(
                "{dir}: {} sound entries of this build, {} of other builds, {} damaged (removed)\n",
                verified.current,
                verified.other_builds,
                verified.damaged.len()
            ));
            report("removed", &verified.damaged);
        }
    }
    Ok(())
}

fn report(what: &str, entries: &[(PathBuf, String)]) {
    for (path, why) in entries {
        print(&format!("{what} {}: {why}\n", path.display()));
    }
}

/// Bytes in K, M or G.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}
