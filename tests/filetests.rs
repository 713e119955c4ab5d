//! Filetests (Cranelift's model): every `tests/filetests/**/*.kir` starts with a `; test: CMD`
//! line and ends with the expected output after a `; expected:` line, each output line
//! prefixed by `; `. `KILN_BLESS=1 cargo test --test filetests` rewrites the expectations.
//!
//! Commands: `print` (parse, verify, print), `verify` (verifier verdict: `ok` or every error),
//! `liveness` (annotated with live-in/out), `liveness --demand` (and demand stages),
//! `cfg` (both CFGs, loops, dominators), `opt PASS[,PASS…]` (middle-end passes through a pass
//! context, then the printed function), `regalloc [--budget FILE=N,…]` (the SSA allocator,
//! checked; the allocated function, its statistics, and whether its SIMT run agrees with the
//! SSA run on 16 lanes).

use kiln::kir::liveness_text;
use kiln_analysis::{Cfg, DomTree, compute_liveness};
use kiln_ir::{print_function, verify};
use std::fmt::Write;
use std::path::{Path, PathBuf};

const EXPECTED: &str = "; expected:";

fn run(command: &str, source: &str) -> String {
    let mut func = match kiln_ir::text::parse_function_with(source, &kiln::targets()) {
        Ok(f) => f,
        Err(e) => return format!("parse error: {e}\n"),
    };
    let verdict = verify(&func);
    if command == "verify" {
        return match verdict {
            Ok(()) => "ok\n".into(),
            Err(errs) => errs.iter().map(|e| format!("{e}\n")).collect(),
        };
    }
    if let Err(errs) = verdict {
        return errs
            .iter()
            .map(|e| format!("verify error: {e}\n"))
            .collect();
    }
    let cfg = Cfg::compute(&func).expect("verified functions are structured");
    match command {
        "print" => print_function(&func),
        "liveness" | "liveness --demand" => {
            let lv = compute_liveness(&mut func, &cfg);
            let text = liveness_text(&func, &cfg, &lv, command.ends_with("--demand"));
            // Liveness writes only flags: the result must still verify.
            if let Err(errs) = verify(&func) {
                return format!("flags written by liveness do not verify: {}\n", errs[0]);
            }
            text
        }
        "cfg" => cfg_report(&func, &cfg),
        cmd if cmd.starts_with("opt ") => {
            let names: Vec<&str> = cmd[4..].split(',').map(str::trim).collect();
            let mut cx = kiln_analysis::Context::new(func);
            match kiln_opt::run_passes(&mut cx, &names) {
                Ok(()) => print_function(cx.func()),
                Err(e) => format!("error: {e}\n"),
            }
        }
        cmd if cmd == "regalloc" || cmd.starts_with("regalloc ") => regalloc(func, cmd),
        other => format!("unknown filetest command `{other}`\n"),
    }
}

fn cfg_report(func: &kiln_ir::Function, cfg: &Cfg) -> String {
    let dom_logical = DomTree::compute(&cfg.logical);
    let dom_linear = DomTree::compute(&cfg.linear);
    let list = |v: &[kiln_ir::Block]| {
        v.iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut out = String::new();
    for b in func.block_ids() {
        let i = b.index();
        let idom = |d: &DomTree| d.idom(b).map_or("-".to_string(), |x| x.to_string());
        let _ = writeln!(
            out,
            "{b}: logical preds [{}] succs [{}] | linear preds [{}] succs [{}] | idom {} / {} | depth {}",
            list(&cfg.logical.preds[i]),
            list(&cfg.logical.succs[i]),
            list(&cfg.linear.preds[i]),
            list(&cfg.linear.succs[i]),
            idom(&dom_logical),
            idom(&dom_linear),
            cfg.loop_depth(b)
        );
    }
    for (k, l) in cfg.loops.iter().enumerate() {
        let _ = writeln!(
            out,
            "loop {k}: preheader {} header {} latch {} exit {} depth {}{}",
            l.preheader,
            l.header,
            l.latch,
            l.exit,
            l.depth,
            if l.divergent { " divergent" } else { "" }
        );
    }
    out
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("filetests directory")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "kir") {
            out.push(p);
        }
    }
}

#[test]
fn filetests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut paths = Vec::new();
    files(&root, &mut paths);
    assert!(
        paths.len() >= 30,
        "expected at least 30 filetests, found {}",
        paths.len()
    );
    let bless = std::env::var_os("KILN_BLESS").is_some();
    let mut failures = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).expect("readable filetest");
        let command = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("; test:"))
            .map(str::trim)
            .unwrap_or_else(|| panic!("{}: first line must be `; test: COMMAND`", path.display()));
        let (source, expected) = match text.find(EXPECTED) {
            Some(at) => (&text[..at], &text[at + EXPECTED.len()..]),
            None => (text.as_str(), ""),
        };
        let expected: String = expected
            .lines()
            .filter_map(|l| l.strip_prefix("; ").or(l.strip_prefix(";")))
            .map(|l| format!("{l}\n"))
            .collect();
        let actual = run(command, source);
        if actual.trim_end() != expected.trim_end() {
            if bless {
                let mut new = source.trim_end().to_string();
                new.push_str("\n\n");
                new.push_str(EXPECTED);
                new.push('\n');
                for l in actual.trim_end().lines() {
                    new.push_str(if l.is_empty() { ";" } else { "; " });
                    new.push_str(l);
                    new.push('\n');
                }
                std::fs::write(path, new).expect("writable filetest");
            } else {
                failures.push(format!(
                    "{}:\n--- expected\n{expected}--- actual\n{actual}",
                    path.display()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} filetests failed (KILN_BLESS=1 rewrites them):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// An allocator on `func` (`regalloc [--allocator ssa|graph] [--budget …]`): the allocated
/// function, then statistics and the verdict of a SIMT run against the SSA run.
fn regalloc(func: kiln_ir::Function, cmd: &str) -> String {
    let mut options = kiln_regalloc::RaOptions {
        check: true,
        ..Default::default()
    };
    let mut words = cmd.split_whitespace().skip(1);
    while let Some(word) = words.next() {
        let value = words.next().unwrap_or_default();
        match word {
            "--budget" => match kiln_regalloc::RaOptions::parse_budget(&*func.target, value) {
                Ok(b) => options.budget = b,
                Err(e) => return format!("error: {e}\n"),
            },
            "--allocator" => match value.parse() {
                Ok(a) => options.allocator = a,
                Err(e) => return format!("error: {e}\n"),
            },
            other => return format!("unknown regalloc option `{other}`\n"),
        }
    }
    let mut allocated = func.clone();
    let stats = match kiln_regalloc::allocate(&mut allocated, &options) {
        Ok(s) => s,
        Err(e) => return format!("error: {e}\n"),
    };
    let mut out = print_function(&allocated);
    // What runs is the allocated text read back (`kiln interp --simt` runs it as it is).
    let allocated = match kiln_ir::text::parse_function_with(&out, &kiln::targets()) {
        Ok(f) if print_function(&f) == out && kiln_ir::verify(&f).is_ok() => f,
        Ok(_) => return format!("error: the allocated text does not verify or print back\n{out}"),
        Err(e) => return format!("error: the allocated text does not read back: {e}\n{out}"),
    };
    let env = kiln_interp::Env::for_function(&func, 16, 1);
    let verdict = match kiln_interp::compare(&func, &allocated, &env) {
        Ok(()) => "agrees".to_string(),
        Err(m) => format!("DISAGREES: {m}"),
    };
    let _ = writeln!(
        out,
        "; copies {} ({} units), spills {}, reloads {}, rematerialised {}, registers {:?} for a demand of {:?}; SIMT run {verdict}",
        stats.parallel_copies,
        stats.copied_units,
        stats.spills,
        stats.reloads,
        stats.remats,
        stats.registers_used,
        stats.max_demand
    );
    out
}
