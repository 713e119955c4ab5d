//! kiln beside Mesa's vc4 compiler: Mesa's shader-db figures (`mesa-vc4/stats.tsv` of the
//! shared corpus, made as its README says) and Mesa's QPU code (`mesa-vc4/qpu/`) against kiln's
//! on the entry points both compile.

use kiln_qpu::isa::census::Census;
use kiln_vc4::compile::Stats;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// An entry point as `stats.tsv` names it: path relative to the corpus directory, `vert` or
/// `frag`, entry point name.
pub type Key = (String, String, String);

/// Where `dir` sits in the corpus whose figures `stats` (`CORPUS/mesa-vc4/stats.tsv`) holds:
/// the path from `CORPUS` to `dir` (empty for the corpus itself), which prefixes the paths of
/// `dir`'s entry points to make their keys.
pub fn dir_in_corpus(stats: &Path, dir: &Path) -> Result<String, String> {
    let canonical =
        |p: &Path| std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()));
    let stats = canonical(stats)?;
    let root = stats
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{}: not in CORPUS/mesa-vc4/", stats.display()))?;
    let dir = canonical(dir)?;
    let rel = dir.strip_prefix(root).map_err(|_| {
        format!(
            "{} is not inside the corpus {} whose figures --mesa gives",
            dir.display(),
            root.display()
        )
    })?;
    Ok(rel.to_string_lossy().into_owned())
}

/// `key` of an entry point of the directory at `prefix` in its corpus ([`dir_in_corpus`]).
pub fn in_corpus(prefix: &str, mut key: Key) -> Key {
    if !prefix.is_empty() {
        key.0 = format!("{prefix}/{}", key.0);
    }
    key
}

/// Mesa's figures of one entry point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Figures {
    pub instructions: u64,
    pub threads: u64,
    pub uniforms: u64,
    /// Mesa's estimated cycles.
    pub cycles: u64,
    /// The GLSL pair Mesa compiled (`mesa-vc4/qpu/` names its code after it).
    pub glsl_file: Option<String>,
}

/// Reads Mesa's `stats.tsv`: the figures of every entry point Mesa compiled.
pub fn read_stats(tsv: &str) -> Result<BTreeMap<Key, Figures>, String> {
    let mut lines = tsv.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (Some(p), Some(st), Some(en)) = (col("path"), col("stage"), col("entry")) else {
        return Err("not Mesa's stats.tsv: no path, stage and entry columns".into());
    };
    let mut mesa = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        let get = |name: &str| {
            col(name)
                .and_then(|i| f.get(i))
                .and_then(|v| v.parse::<u64>().ok())
        };
        let figures = if f.get(st) == Some(&"frag") {
            get("fs_inst")
                .zip(get("fs_threads"))
                .zip(get("fs_uniforms"))
                .map(|((i, t), u)| (i, t, u, get("fs_est_cycles").unwrap_or(0)))
        } else {
            get("vs_inst")
                .zip(get("vs_uniforms"))
                .map(|(i, u)| (i, 1, u, get("vs_est_cycles").unwrap_or(0)))
        };
        if let (
            Some((instructions, threads, uniforms, cycles)),
            Some(path),
            Some(stage),
            Some(entry),
        ) = (figures, f.get(p), f.get(st), f.get(en))
        {
            let glsl_file = col("glsl_file")
                .and_then(|i| f.get(i))
                .filter(|g| !g.is_empty())
                .map(|g| g.to_string());
            mesa.insert(
                (path.to_string(), stage.to_string(), entry.to_string()),
                Figures {
                    instructions,
                    threads,
                    uniforms,
                    cycles,
                    glsl_file,
                },
            );
        }
    }
    Ok(mesa)
}

/// Totals, wins, ties and losses on instructions and threads, and the biggest losses, on the
/// entry points both compile.
pub fn compare(mesa: &BTreeMap<Key, Figures>, kiln: &[(Key, Stats)]) -> String {
    let both: Vec<(&Key, &Stats, Figures)> = kiln
        .iter()
        .filter_map(|(key, s)| mesa.get(key).map(|m| (key, s, m.clone())))
        .collect();
    let mut out = String::new();
    let sum_kiln = |f: &dyn Fn(&Stats) -> u32| both.iter().map(|(_, s, _)| f(s) as u64).sum();
    let sum_mesa = |f: &dyn Fn(&Figures) -> u64| both.iter().map(|(_, _, m)| f(m)).sum();
    let (ki, mi): (u64, u64) = (sum_kiln(&|s| s.instructions), sum_mesa(&|m| m.instructions));
    let (kt, mt): (u64, u64) = (sum_kiln(&|s| s.threads), sum_mesa(&|m| m.threads));
    let (ku, mu): (u64, u64) = (sum_kiln(&|s| s.uniforms), sum_mesa(&|m| m.uniforms));
    // (kiln better, equal, kiln worse)
    let tally = |better: &dyn Fn(&Stats, &Figures) -> std::cmp::Ordering| {
        let mut t = (0, 0, 0);
        for (_, s, m) in &both {
            match better(s, m) {
                std::cmp::Ordering::Less => t.0 += 1,
                std::cmp::Ordering::Equal => t.1 += 1,
                std::cmp::Ordering::Greater => t.2 += 1,
            }
        }
        t
    };
    let (win, tie, loss) = tally(&|s, m| (s.instructions as u64).cmp(&m.instructions));
    let (twin, ttie, tloss) = tally(&|s, m| m.threads.cmp(&(s.threads as u64)));
    let _ = writeln!(
        out,
        "beside Mesa      {} entry points both compile",
        both.len()
    );
    let _ = writeln!(
        out,
        "  instructions   kiln {ki}, Mesa {mi} ({:+.1} %); kiln wins {win}, ties {tie}, loses {loss}",
        100.0 * (ki as f64 - mi as f64) / mi.max(1) as f64
    );
    let _ = writeln!(
        out,
        "  threads        kiln {kt}, Mesa {mt}; kiln wins {twin}, ties {ttie}, loses {tloss}"
    );
    let _ = writeln!(out, "  uniforms       kiln {ku}, Mesa {mu}");
    let (kc, mc): (u64, u64) = (sum_kiln(&|s| s.estimated_cycles), sum_mesa(&|m| m.cycles));
    let (cwin, ctie, closs) = tally(&|s, m| (s.estimated_cycles as u64).cmp(&m.cycles));
    let _ = writeln!(
        out,
        "  est. cycles    kiln {kc}, Mesa {mc} ({:+.1} %); kiln wins {cwin}, ties {ctie}, loses {closs}",
        100.0 * (kc as f64 - mc as f64) / mc.max(1) as f64
    );
    let mut by_loss = both;
    by_loss
        .sort_by_key(|(_, s, m)| std::cmp::Reverse(s.instructions as i64 - m.instructions as i64));
    let _ = writeln!(
        out,
        "  biggest losses on instructions (kiln, Mesa, kiln nops):"
    );
    for (k, s, m) in by_loss.iter().take(10) {
        let _ = writeln!(
            out,
            "    {}:{}:{}  {} vs {}  ({} nops)",
            k.0, k.1, k.2, s.instructions, m.instructions, s.nops
        );
    }
    out
}

/// Mesa's QPU code for one entry point: the words of the fragment (`stage` `frag`) or vertex
/// shader section of `qpu_dir/<glsl_file with / as __>.qpu`.
pub fn read_code(qpu_dir: &Path, glsl_file: &str, stage: &str) -> Result<Vec<u64>, String> {
    let path = qpu_dir.join(format!("{}.qpu", glsl_file.replace('/', "__")));
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let header = if stage == "vert" {
        "## vertex shader"
    } else {
        "## fragment shader"
    };
    let mut words = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("##") {
            inside = line.starts_with(header);
        } else if inside && let Some(hex) = line.strip_prefix("0x") {
            let word = hex.split_whitespace().next().unwrap_or("");
            words.push(
                u64::from_str_radix(word, 16)
                    .map_err(|_| format!("{}: `{line}` is not a word", path.display()))?,
            );
        }
    }
    if words.is_empty() {
        return Err(format!("{}: no {header} section", path.display()));
    }
    Ok(words)
}

/// The corpus category of an entry point: its collection (`skia`, `pixi-filters`, …).
pub fn category(key: &Key) -> &str {
    key.0.split('/').nth(1).unwrap_or(&key.0)
}

/// kiln's code beside Mesa's, counted the same way from both programs' words
/// ([`Census`]): totals, per category, operations helped and hurt, and the entry points
/// with the largest operation excess. `kiln` holds each entry point's key and census.
pub fn compare_code(
    mesa: &BTreeMap<Key, Figures>,
    qpu_dir: &Path,
    kiln: &[(Key, Census)],
) -> Result<String, String> {
    let mut both = Vec::new();
    // Mesa's code estimated by kiln's model, beside Mesa's own estimate: the model's check.
    let (mut modelled, mut reported) = (0u64, 0u64);
    for (key, k) in kiln {
        let Some(figures) = mesa.get(key) else {
            continue;
        };
        let Some(glsl) = figures.glsl_file.as_deref() else {
            continue;
        };
        let words = read_code(qpu_dir, glsl, &key.1)?;
        let program: Vec<_> = words.iter().map(|&w| kiln_qpu::isa::decode(w)).collect();
        modelled += kiln_qpu::isa::census::estimated_cycles(&program);
        reported += figures.cycles;
        both.push((key, *k, Census::of(&words)));
    }
    let mut out = String::new();
    let mut totals = (Census::default(), Census::default());
    let mut categories: BTreeMap<&str, (usize, Census, Census)> = BTreeMap::new();
    let (mut helped, mut hurt) = (0, 0);
    for (key, k, m) in &both {
        totals.0 += *k;
        totals.1 += *m;
        let c = categories.entry(category(key)).or_default();
        c.0 += 1;
        c.1 += *k;
        c.2 += *m;
        match k.operations.cmp(&m.operations) {
            std::cmp::Ordering::Less => helped += 1,
            std::cmp::Ordering::Greater => hurt += 1,
            std::cmp::Ordering::Equal => {}
        }
    }
    let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
    let line = |out: &mut String, name: &str, n: usize, k: &Census, m: &Census| {
        let _ = writeln!(
            out,
            "  {name:<18} {n:>5}  operations {:>8} / {:>8} ({:5.1} %)  instructions {:>8} / {:>8} ({:5.1} %)  nops {:>7} / {:>7}  paired {:>7} / {:>7}",
            k.operations,
            m.operations,
            pct(k.operations, m.operations),
            k.instructions,
            m.instructions,
            pct(k.instructions, m.instructions),
            k.nops,
            m.nops,
            k.paired,
            m.paired
        );
    };
    let _ = writeln!(
        out,
        "code beside Mesa's ({} entry points both compile; kiln / Mesa, kiln as % of Mesa)",
        both.len()
    );
    line(&mut out, "all", both.len(), &totals.0, &totals.1);
    for (name, (n, k, m)) in &categories {
        line(&mut out, name, *n, k, m);
    }
    let _ = writeln!(
        out,
        "  estimated cycles of Mesa's code: {modelled} by kiln's model, {reported} by Mesa's ({:.1} %)",
        pct(modelled, reported)
    );
    let _ = writeln!(
        out,
        "  operations: kiln fewer on {helped}, more on {hurt}, as many on {}",
        both.len() - helped - hurt
    );
    // Where the operations differ, by kind, largest difference first.
    let mut kinds: Vec<(i64, usize)> = (0..kiln_qpu::isa::census::KINDS)
        .map(|k| (totals.0.by_kind[k] as i64 - totals.1.by_kind[k] as i64, k))
        .filter(|&(d, _)| d != 0)
        .collect();
    kinds.sort_by_key(|&(d, k)| (std::cmp::Reverse(d.abs()), k));
    let _ = writeln!(out, "  operations by kind (kiln − Mesa, kiln / Mesa):");
    for &(d, k) in kinds.iter().take(12) {
        let _ = writeln!(
            out,
            "    {:<14} {d:+8}  {:>8} / {:>8}",
            Census::kind_name(k),
            totals.0.by_kind[k],
            totals.1.by_kind[k]
        );
    }
    let mut excess: Vec<_> = both
        .iter()
        .map(|(key, k, m)| (k.operations as i64 - m.operations as i64, key, k, m))
        .collect();
    excess.sort_by_key(|e| std::cmp::Reverse(e.0));
    let _ = writeln!(out, "  largest operation excess (kiln, Mesa operations):");
    for (d, key, k, m) in excess.iter().take(15) {
        let _ = writeln!(
            out,
            "    {:+6}  {}:{}:{}  {} vs {}",
            d, key.0, key.1, key.2, k.operations, m.operations
        );
    }
    Ok(out)
}
