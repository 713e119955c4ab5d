//! kiln beside Mesa's vc4 compiler: Mesa's shader-db figures (`mesa-vc4/stats.tsv` of the
//! shared corpus, made as its README says) against kiln's on the entry points both compile.

use kiln_vc4::compile::Stats;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// An entry point as `stats.tsv` names it: path relative to the corpus directory, `vert` or
/// `frag`, entry point name.
pub type Key = (String, String, String);

/// Mesa's figures of one entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Figures {
    pub instructions: u64,
    pub threads: u64,
    pub uniforms: u64,
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
                .map(|((i, t), u)| (i, t, u))
        } else {
            get("vs_inst")
                .zip(get("vs_uniforms"))
                .map(|(i, u)| (i, 1, u))
        };
        if let (Some((instructions, threads, uniforms)), Some(path), Some(stage), Some(entry)) =
            (figures, f.get(p), f.get(st), f.get(en))
        {
            mesa.insert(
                (path.to_string(), stage.to_string(), entry.to_string()),
                Figures {
                    instructions,
                    threads,
                    uniforms,
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
        .filter_map(|(key, s)| mesa.get(key).map(|&m| (key, s, m)))
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
