//! `kiln report BEFORE AFTER`: two corpus runs compared the way shader-db's `report.py` compares
//! them — per metric the totals over the programs both compiled, the totals over the programs
//! that changed, how many were helped and hurt; the most helped and most hurt programs; the
//! programs whose status changed. A run is `kiln corpus compile --json`'s document or Mesa's
//! `mesa-vc4/stats.tsv`.

use crate::mesa::Key;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

/// A figure of a compiled program: its JSON name, Mesa's columns for a fragment and a vertex
/// shader, whether fewer is better, and whether it is a time (totals only: too noisy to call a
/// program helped or hurt).
pub struct Metric {
    pub name: &'static str,
    pub mesa: Option<(&'static str, &'static str)>,
    pub fewer_is_better: bool,
    pub time: bool,
}

const fn metric(name: &'static str, mesa: Option<(&'static str, &'static str)>) -> Metric {
    Metric {
        name,
        mesa,
        fewer_is_better: true,
        time: false,
    }
}

/// The metrics, in the order they are reported.
pub const METRICS: &[Metric] = &[
    metric("instructions", Some(("fs_inst", "vs_inst"))),
    metric("operations", None),
    metric("nops", None),
    Metric {
        fewer_is_better: false,
        ..metric("threads", Some(("fs_threads", "")))
    },
    metric("uniforms", Some(("fs_uniforms", "vs_uniforms"))),
    metric("max_temps", Some(("fs_max_temps", "vs_max_temps"))),
    metric("estimated_cycles", Some(("fs_est_cycles", "vs_est_cycles"))),
    metric("registers", None),
    metric("copies", None),
    metric("spills", None),
    Metric {
        time: true,
        ..metric("compile_time_us", None)
    },
];

/// One entry point of a run: its status (`compiled` or why not) and its figures by
/// [`METRICS`] index.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub key: Key,
    pub status: String,
    pub figures: Vec<Option<f64>>,
}

impl Record {
    fn compiled(&self) -> bool {
        self.status == "compiled"
    }
}

/// A run read from `text` (the file `name`): kiln's JSON or Mesa's `stats.tsv`.
pub fn read_run(name: &str, text: &str) -> Result<Vec<Record>, String> {
    if text.starts_with("path\tstage\tentry") {
        read_mesa(text).map_err(|e| format!("{name}: {e}"))
    } else if text.trim_start().starts_with('{') {
        read_json(text).map_err(|e| format!("{name}: {e}"))
    } else {
        Err(format!(
            "{name}: neither `kiln corpus compile --json` output nor Mesa's stats.tsv"
        ))
    }
}

fn read_json(text: &str) -> Result<Vec<Record>, String> {
    let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    match doc.get("format").and_then(|f| f.as_str()) {
        Some(crate::corpus::REPORT_FORMAT) => {}
        Some(other) => {
            return Err(format!(
                "format `{other}`, not `{}`",
                crate::corpus::REPORT_FORMAT
            ));
        }
        None => return Err("no `format`: not `kiln corpus compile --json` output".into()),
    }
    let entries = doc
        .get("entries")
        .and_then(|e| e.as_array())
        .ok_or("no `entries` array")?;
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let text = |field: &str| {
                e.get(field)
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
                    .ok_or_else(|| format!("entry {i}: no string `{field}`"))
            };
            let figures = METRICS
                .iter()
                .map(|m| match e.get(m.name) {
                    None | Some(serde_json::Value::Null) => Ok(None),
                    Some(v) => v
                        .as_f64()
                        .map(Some)
                        .ok_or_else(|| format!("entry {i}: `{}` is not a number", m.name)),
                })
                .collect::<Result<_, _>>()?;
            Ok(Record {
                key: (text("path")?, text("stage")?, text("entry")?),
                status: text("status")?,
                figures,
            })
        })
        .collect()
}

/// Mesa's rows: `ok` and `ok_interp` compiled; `mesa_error` and `vc4_error` failed; the rest
/// (`not_converted`: no GLSL ES to give Mesa) not given.
fn read_mesa(text: &str) -> Result<Vec<Record>, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (Some(p), Some(st), Some(en), Some(status)) =
        (col("path"), col("stage"), col("entry"), col("status"))
    else {
        return Err("no path, stage, entry and status columns".into());
    };
    let mut out = Vec::new();
    for (n, line) in lines.enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        let field = |i: usize| {
            f.get(i)
                .copied()
                .ok_or_else(|| format!("line {}: too few columns", n + 2))
        };
        let stage = field(st)?;
        let status = match field(status)? {
            "ok" | "ok_interp" => "compiled",
            "mesa_error" | "vc4_error" => "failed",
            _ => "not given",
        };
        let figures = METRICS
            .iter()
            .map(|m| {
                let (frag, vert) = m.mesa?;
                let c = col(if stage == "frag" { frag } else { vert })?;
                f.get(c)?.parse::<f64>().ok()
            })
            .collect();
        out.push(Record {
            key: (
                field(p)?.to_string(),
                stage.to_string(),
                field(en)?.to_string(),
            ),
            status: status.to_string(),
            figures,
        });
    }
    Ok(out)
}

/// The records of `after` paired with those of `before` by key; a path that differs only by
/// the directories above it (one run made on a subdirectory of the other's corpus, or Mesa's
/// paths from the corpus root) pairs by its longest unique common suffix.
fn pair<'a>(before: &'a [Record], after: &'a [Record]) -> Vec<(&'a Record, &'a Record)> {
    let exact: HashMap<&Key, &Record> = before.iter().map(|r| (&r.key, r)).collect();
    let mut by_suffix: HashMap<Key, Option<&Record>> = HashMap::new();
    for r in before {
        for s in suffixes(&r.key.0) {
            let k = (s.to_string(), r.key.1.clone(), r.key.2.clone());
            by_suffix
                .entry(k)
                .and_modify(|v| *v = None)
                .or_insert(Some(r));
        }
    }
    let mut used: HashSet<&Key> = HashSet::new();
    let mut pairs = Vec::new();
    for a in after {
        let found = exact.get(&a.key).copied().or_else(|| {
            by_suffix.get(&a.key).copied().flatten().or_else(|| {
                suffixes(&a.key.0).find_map(|s| {
                    exact
                        .get(&(s.to_string(), a.key.1.clone(), a.key.2.clone()))
                        .copied()
                })
            })
        });
        if let Some(b) = found
            && used.insert(&b.key)
        {
            pairs.push((b, a));
        }
    }
    pairs
}

/// The proper suffixes of a path at its `/` boundaries, longest first.
fn suffixes(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[i + 1..])
}

/// The report of `after` against `before`, `most` programs in each list.
pub fn report(before: &[Record], after: &[Record], most: usize) -> String {
    let pairs = pair(before, after);
    let mut out = String::new();
    let both: Vec<&(&Record, &Record)> = pairs
        .iter()
        .filter(|(b, a)| b.compiled() && a.compiled())
        .collect();
    let _ = writeln!(
        out,
        "{} entry points before, {} after, {} in both, {} compiled in both\n",
        before.len(),
        after.len(),
        pairs.len(),
        both.len()
    );
    for (m, metric) in METRICS.iter().enumerate() {
        let values: Vec<(f64, f64)> = both
            .iter()
            .filter_map(|(b, a)| Some((b.figures[m]?, a.figures[m]?)))
            .collect();
        if values.is_empty() {
            continue;
        }
        let total = |v: &mut dyn Iterator<Item = &(f64, f64)>| {
            v.fold((0.0, 0.0), |(x, y), (b, a)| (x + b, y + a))
        };
        let (tb, ta) = total(&mut values.iter());
        let _ = writeln!(
            out,
            "total {} in shared programs: {} -> {} ({})",
            metric.name,
            tb,
            ta,
            percent(tb, ta)
        );
        if metric.time {
            let _ = writeln!(out);
            continue;
        }
        let (ab, aa) = total(&mut values.iter().filter(|(b, a)| b != a));
        let _ = writeln!(
            out,
            "{} in affected programs: {} -> {} ({})",
            metric.name,
            ab,
            aa,
            percent(ab, aa)
        );
        let better = |b: f64, a: f64| if metric.fewer_is_better { a < b } else { a > b };
        let helped = values.iter().filter(|(b, a)| better(*b, *a)).count();
        let hurt = values
            .iter()
            .filter(|(b, a)| a != b && !better(*b, *a))
            .count();
        let _ = writeln!(out, "helped: {helped}\nHURT: {hurt}\n");
    }
    // The programs whose instructions changed most, relatively.
    let mut changes: Vec<(f64, f64, &Record)> = both
        .iter()
        .filter_map(|(b, a)| Some((b.figures[0]?, a.figures[0]?, *a)))
        .filter(|(b, a, _)| b != a)
        .collect();
    changes.sort_by(|x, y| {
        let rel = |(b, a, _): &(f64, f64, &Record)| (a - b) / b.max(1.0);
        rel(x)
            .total_cmp(&rel(y))
            .then_with(|| x.2.key.cmp(&y.2.key))
    });
    let line = |out: &mut String, (b, a, r): &(f64, f64, &Record)| {
        let _ = writeln!(
            out,
            "  {}:{} ({}): {} -> {} ({})",
            r.key.0,
            r.key.2,
            r.key.1,
            b,
            a,
            percent(*b, *a)
        );
    };
    let helped: Vec<_> = changes
        .iter()
        .filter(|(b, a, _)| a < b)
        .take(most)
        .collect();
    if !helped.is_empty() {
        let _ = writeln!(out, "most helped (instructions):");
        for c in helped {
            line(&mut out, c);
        }
    }
    let hurt: Vec<_> = changes
        .iter()
        .rev()
        .filter(|(b, a, _)| a > b)
        .take(most)
        .collect();
    if !hurt.is_empty() {
        let _ = writeln!(out, "most HURT (instructions):");
        for c in hurt {
            line(&mut out, c);
        }
    }
    // Status changes: counts per (before, after), and the programs newly compiling or failing.
    let mut moves: BTreeMap<(&str, &str), Vec<&Record>> = BTreeMap::new();
    for (b, a) in &pairs {
        if b.status != a.status {
            moves.entry((&b.status, &a.status)).or_default().push(a);
        }
    }
    if !moves.is_empty() {
        let _ = writeln!(out, "\nstatus changes:");
        for ((from, to), records) in &moves {
            let _ = writeln!(out, "  {:>6}  {from} -> {to}", records.len());
            if *from == "compiled" || *to == "compiled" {
                for r in records.iter().take(most) {
                    let _ = writeln!(out, "          {}:{} ({})", r.key.0, r.key.2, r.key.1);
                }
            }
        }
    }
    out
}

/// `b -> a` as a signed percentage; `n/a` from zero.
fn percent(b: f64, a: f64) -> String {
    if b == 0.0 {
        if a == 0.0 {
            "0.00%".into()
        } else {
            "n/a".into()
        }
    } else {
        format!("{:+.2}%", 100.0 * (a - b) / b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(path: &str, status: &str, instructions: Option<f64>) -> Record {
        let mut figures = vec![None; METRICS.len()];
        figures[0] = instructions;
        Record {
            key: (path.into(), "frag".into(), "main".into()),
            status: status.into(),
            figures,
        }
    }

    #[test]
    fn totals_helped_hurt_and_status() {
        let before = [
            record("a.frag", "compiled", Some(10.0)),
            record("b.frag", "compiled", Some(20.0)),
            record("c.frag", "compiled", Some(5.0)),
            record("d.frag", "unsupported", None),
        ];
        let after = [
            record("a.frag", "compiled", Some(8.0)),
            record("b.frag", "compiled", Some(25.0)),
            record("c.frag", "compiled", Some(5.0)),
            record("d.frag", "compiled", Some(7.0)),
        ];
        let r = report(&before, &after, 5);
        assert!(
            r.contains("total instructions in shared programs: 35 -> 38 (+8.57%)"),
            "{r}"
        );
        assert!(
            r.contains("instructions in affected programs: 30 -> 33 (+10.00%)"),
            "{r}"
        );
        assert!(r.contains("helped: 1\nHURT: 1"), "{r}");
        assert!(r.contains("1  unsupported -> compiled"), "{r}");
        let helped = r.find("most helped").expect("a helped list");
        let hurt = r.find("most HURT").expect("a hurt list");
        assert!(r[helped..hurt].contains("a.frag"), "{r}");
        assert!(r[hurt..].contains("b.frag"), "{r}");
    }

    #[test]
    fn paths_pair_by_suffix() {
        let before = [record("corpus/glsl/x.frag", "compiled", Some(1.0))];
        let after = [record("glsl/x.frag", "compiled", Some(2.0))];
        assert_eq!(pair(&before, &after).len(), 1);
        assert_eq!(pair(&after, &before).len(), 1);
        let ambiguous = [
            record("one/x.frag", "compiled", Some(1.0)),
            record("two/x.frag", "compiled", Some(1.0)),
        ];
        assert!(pair(&ambiguous, &[record("x.frag", "compiled", None)]).is_empty());
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(
            read_run("x", "{ \"format\": ")
                .unwrap_err()
                .contains("line 1")
        );
        assert!(read_run("x", "{\"format\": \"other\"}").is_err());
        assert!(read_run("x", "hello").is_err());
        let doc = format!(
            "{{\"format\": \"{}\", \"entries\": [{{\"path\": 3}}]}}",
            crate::corpus::REPORT_FORMAT
        );
        assert!(read_run("x", &doc).unwrap_err().contains("entry 0"));
    }
}
