//! `kiln bench compile-cost`: what a compile costs beside what Mesa's vc4 costs for the same
//! shader, in instructions executed (callgrind's `Ir`, stable where wall time is not).
//!
//! The measured part is [`measured_compile`]: the middle end and the back end on a lowered
//! entry point (`pipeline::compile_lowered`), the part a driver runs per shader — Mesa's figure
//! (`corpus/mesa-vc4/compile-cost.tsv`) is its `vc4_shader_ntq`: NIR lowering and optimisation,
//! NIR→QIR, QIR optimisation, allocation, scheduling, emission. Each shader is compiled twice in
//! one process under callgrind: the first compile also pays the process's one-time set-up (tables
//! built once per target, as Mesa builds its register set once per screen), the second is the
//! figure compared; their difference is reported as the set-up.

use crate::pipeline::{self, EntryPoint, Options};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The ten largest corpus entry points by lowered IR (not in Mesa's sample; `781.frag` is the
/// largest, 22k lowered instructions, and the one that cannot be allocated without spilling).
pub const LARGEST: [&str; 10] = [
    "wgsl/skia/781.frag.wgsl:main",
    "wgsl/skia/193-5.frag.wgsl:main",
    "wgsl/skia/1453.frag.wgsl:main",
    "wgsl/skia/1684.frag.wgsl:main",
    "wgsl/skia/1963.frag.wgsl:main",
    "wgsl/skia/1114.frag.wgsl:main",
    "wgsl/skia/1051.frag.wgsl:main",
    "wgsl/skia/1354.frag.wgsl:main",
    "wgsl/skia/1009.frag.wgsl:main",
    "wgsl/skia/316-3.frag.wgsl:main",
];

/// One shader of the benchmark: `path:entry` under the corpus, and Mesa's figures if known.
#[derive(Clone, Debug)]
pub struct Sample {
    pub path: String,
    pub entry: String,
    pub mesa_instructions: Option<u64>,
    pub mesa_ir: Option<u64>,
}

fn split_entry(path_entry: &str) -> Result<(String, String), String> {
    let (path, entry) = path_entry
        .rsplit_once(':')
        .ok_or_else(|| format!("`{path_entry}`: expected PATH:ENTRY"))?;
    Ok((path.to_string(), entry.to_string()))
}

/// Mesa's sample (`compile-cost.tsv`: `path_entry`, `mesa_fs_inst`, `mesa_fs_Ir`) and then
/// [`LARGEST`].
pub fn samples(mesa_tsv: &Path) -> Result<Vec<Sample>, String> {
    let text =
        std::fs::read_to_string(mesa_tsv).map_err(|e| format!("{}: {e}", mesa_tsv.display()))?;
    let mut samples = Vec::new();
    for (k, line) in text.lines().enumerate().skip(1) {
        let bad = || {
            format!(
                "{}:{}: expected PATH:ENTRY, instructions, Ir",
                mesa_tsv.display(),
                k + 1
            )
        };
        let cols: Vec<&str> = line.split('\t').collect();
        let [path_entry, inst, ir] = cols[..] else {
            return Err(bad());
        };
        let (path, entry) = split_entry(path_entry)?;
        samples.push(Sample {
            path,
            entry,
            mesa_instructions: Some(inst.parse().map_err(|_| bad())?),
            mesa_ir: Some(ir.parse().map_err(|_| bad())?),
        });
    }
    for path_entry in LARGEST {
        let (path, entry) = split_entry(path_entry)?;
        samples.push(Sample {
            path,
            entry,
            mesa_instructions: None,
            mesa_ir: None,
        });
    }
    Ok(samples)
}

/// The measured compile: the pipeline after the front end. Never inlined, so that callgrind
/// can collect it by name.
#[inline(never)]
pub fn measured_compile(
    name: &str,
    lowered: kiln_front::Lowered,
    options: &Options,
) -> Result<pipeline::Compilation, pipeline::Error> {
    pipeline::compile_lowered(name, lowered, options)
}

/// `kiln bench compile-one`: one entry point read, parsed and lowered, then compiled twice by
/// [`measured_compile`] (cold, then warm). The program's size, or what refused it.
pub fn compile_one(path: &Path, entry: &str) -> Result<String, String> {
    let shader = pipeline::read_shader(path).map_err(|e| e.to_string())?;
    let entry = EntryPoint {
        stage: None,
        name: Some(entry.to_string()),
    };
    let lowered = pipeline::lower(&shader, &entry).map_err(|e| e.to_string())?;
    // A driver's compile: no lower bound measured beyond the whole regions'.
    let options = Options {
        bound_windows: false,
        ..Options::default()
    };
    let mut result = String::new();
    for _ in 0..2 {
        result = match measured_compile(shader.name(), lowered.clone(), &options) {
            Ok(c) => c.compiled.stats.instructions.to_string(),
            Err(e) => format!("refused: {}", e.to_string().lines().next().unwrap_or("")),
        };
    }
    Ok(result)
}

/// One shader's measurement.
#[derive(Clone, Debug)]
pub struct Measured {
    pub sample: Sample,
    /// kiln's instructions, or why it refused the shader.
    pub outcome: String,
    /// `Ir` of the second (warm) compile.
    pub warm: u64,
    /// `Ir` of the first compile less the second's: the process's one-time set-up.
    pub setup: i64,
}

impl Measured {
    pub fn ratio(&self) -> Option<f64> {
        self.sample.mesa_ir.map(|m| self.warm as f64 / m as f64)
    }
}

/// The `Ir` total of one callgrind dump.
fn dump_total(path: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .ok_or_else(|| format!("{}: no `summary:` line", path.display()))
}

/// Runs `exe bench compile-one` under callgrind for one sample.
pub fn callgrind(
    exe: &Path,
    valgrind: &str,
    corpus: &Path,
    sample: &Sample,
    scratch: &Path,
    id: usize,
) -> Result<Measured, String> {
    let out = scratch.join(format!("compile-cost.{id}"));
    let output = Command::new(valgrind)
        .arg("--tool=callgrind")
        .arg("--collect-atstart=no")
        .arg("--toggle-collect=kiln::bench::measured_compile")
        .arg("--dump-after=kiln::bench::measured_compile")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(["bench", "compile-one"])
        .arg(corpus.join(&sample.path))
        .args(["--entry", &sample.entry])
        .output()
        .map_err(|e| format!("{valgrind}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.starts_with("=="))
            .unwrap_or("");
        return Err(format!("{}:{}: {last}", sample.path, sample.entry));
    }
    let dump = |k: usize| PathBuf::from(format!("{}.{k}", out.display()));
    let (cold, warm) = (dump_total(&dump(1))?, dump_total(&dump(2))?);
    for k in [1, 2] {
        let _ = std::fs::remove_file(dump(k));
    }
    let _ = std::fs::remove_file(&out);
    Ok(Measured {
        sample: sample.clone(),
        outcome: stdout.trim().to_string(),
        warm,
        setup: cold as i64 - warm as i64,
    })
}

/// Every sample measured, `jobs` at a time (callgrind's counts do not depend on the load).
pub fn measure_all(
    exe: &Path,
    valgrind: &str,
    corpus: &Path,
    samples: &[Sample],
    jobs: usize,
) -> Result<Vec<Measured>, String> {
    let scratch = std::env::temp_dir().join(format!("kiln-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .build()
        .map_err(|e| e.to_string())?;
    let measured = pool.install(|| {
        samples
            .par_iter()
            .enumerate()
            .map(|(id, s)| callgrind(exe, valgrind, corpus, s, &scratch, id))
            .collect::<Result<Vec<_>, _>>()
    });
    let _ = std::fs::remove_dir_all(&scratch);
    measured
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The table (one row per shader, Mesa's figures beside kiln's) and the summary.
pub fn report(measured: &[Measured]) -> String {
    use std::fmt::Write;
    let mut out = String::from("entry\tkiln_inst\tmesa_inst\tkiln_Ir\tmesa_Ir\tratio\tsetup_Ir\n");
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    for m in measured {
        let ratio = m.ratio().map_or("-".to_string(), |r| format!("{r:.2}"));
        let _ = writeln!(
            out,
            "{}:{}\t{}\t{}\t{}\t{}\t{ratio}\t{}",
            m.sample.path,
            m.sample.entry,
            m.outcome,
            opt(m.sample.mesa_instructions),
            m.warm,
            opt(m.sample.mesa_ir),
            m.setup
        );
    }
    let with_mesa: Vec<&Measured> = measured.iter().filter(|m| m.ratio().is_some()).collect();
    let ratios: Vec<f64> = with_mesa.iter().filter_map(|m| m.ratio()).collect();
    let (kiln, mesa): (u64, u64) = with_mesa
        .iter()
        .map(|m| (m.warm, m.sample.mesa_ir.unwrap_or(0)))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    if let Some(med) = median(ratios.clone()) {
        let max = ratios.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "beside Mesa ({} shaders): median ratio {med:.2}, total {kiln} / {mesa} = {:.2}, \
             max {max:.2}, {} above 2x",
            ratios.len(),
            kiln as f64 / mesa.max(1) as f64,
            ratios.iter().filter(|&&r| r > 2.0).count()
        );
    }
    if let Some(setup) = median(measured.iter().map(|m| m.setup as f64).collect()) {
        let _ = writeln!(out, "one-time set-up per process: median {setup:.0} Ir");
    }
    out
}

// ---- scaling --------------------------------------------------------------------------------

/// A family of generated programs that grows with one parameter: the shapes that found
/// quadratic corners (`../shared/repro/gen.py`), each compiled by one stage of the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// n sequential small ifs in a fragment shader (WGSL), the whole compile.
    SequentialIfs,
    /// n values live at once in a fragment shader (WGSL): from about a thousand, more than the
    /// pre-RA scheduler can bring within the registers, refused (spilling) after bounded work.
    LiveValues,
    /// n if/else diamonds with a phi each (`.kir`, generic target): the SSA allocator.
    DiamondsSsa,
    /// n values live at once (`.kir`, generic target, 32 registers): the SSA allocator, spilling.
    WideSsa,
    /// The same through graph colouring.
    WideGraph,
    /// A chain of n dependent operations (`.kir`): the middle end.
    ChainOpt,
}

impl Family {
    pub const ALL: [Family; 6] = [
        Family::SequentialIfs,
        Family::LiveValues,
        Family::DiamondsSsa,
        Family::WideSsa,
        Family::WideGraph,
        Family::ChainOpt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Family::SequentialIfs => "seqif",
            Family::LiveValues => "live",
            Family::DiamondsSsa => "diamonds-ssa",
            Family::WideSsa => "wide-ssa",
            Family::WideGraph => "wide-graph",
            Family::ChainOpt => "chain-opt",
        }
    }

    pub fn by_name(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The program of size `n`, as source text.
    pub fn source(self, n: usize) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        const FS: &str =
            "@fragment\nfn main(@location(0) uv: vec2<f32>) -> @location(0) vec4<f32> {\n";
        const KIR: &str =
            "target generic(v=32, s=16)\n\nfunction @main {\nbb0:\n    %0:v1 = input 0\n";
        match self {
            Family::SequentialIfs => {
                s.push_str(FS);
                s.push_str("    var a = uv.y;\n");
                for _ in 0..n {
                    s.push_str("    if (a > uv.x) { a = a * 0.5 + sin(a); }\n");
                }
                s.push_str("    return vec4<f32>(a);\n}\n");
            }
            Family::LiveValues => {
                s.push_str(FS);
                for i in 0..n {
                    let _ = writeln!(s, "    let v{i} = uv.x * {}.0 + uv.y;", i + 1);
                }
                s.push_str("    var s = 0.0;\n");
                for i in 0..n {
                    let _ = writeln!(s, "    s = s + v{i} * v{};", n - 1 - i);
                }
                s.push_str("    return vec4<f32>(s);\n}\n");
            }
            Family::DiamondsSsa => {
                s.push_str(KIR);
                let (mut t, mut b, mut prev) = (1, 0, 0);
                for _ in 0..n {
                    let (c, x, p) = (t, t + 1, t + 2);
                    t += 3;
                    let _ = write!(
                        s,
                        "    %{c}:v1 = flt %{prev}, 0.5\n    if.divergent %{c}, bb{}, bb{}, bb{}\n\
                         bb{}:\n    %{x}:v1 = fmul %{prev}, 0.5\n    jump bb{}\n\
                         bb{}:\n    %{p}:v1 = phi %{prev}, %{x}\n",
                        b + 1,
                        b + 2,
                        b + 2,
                        b + 1,
                        b + 2,
                        b + 2
                    );
                    prev = p;
                    b += 2;
                }
                let _ = write!(s, "    output 0, %{prev}\n    return\n}}\n");
            }
            Family::WideSsa | Family::WideGraph => {
                s.push_str(KIR);
                for k in 1..n {
                    let _ = writeln!(s, "    %{k}:v1 = fadd %0, {k}.0");
                }
                let _ = writeln!(s, "    %{n}:v1 = fadd %1, %2");
                for k in 3..n {
                    let _ = writeln!(s, "    %{}:v1 = fadd %{}, %{k}", n + k - 2, n + k - 3);
                }
                let _ = write!(s, "    output 0, %{}\n    return\n}}\n", 2 * n - 3);
            }
            Family::ChainOpt => {
                s.push_str(KIR);
                for k in 1..n {
                    let _ = writeln!(s, "    %{k}:v1 = fadd %{}, 1.0", k - 1);
                }
                let _ = write!(s, "    output 0, %{}\n    return\n}}\n", n - 1);
            }
        }
        s
    }
}

/// One run of a family at one size, in this process: what it compiled (IR instructions given
/// to the measured stage) and how it ended, with the time of the measured stage.
pub fn scaling_one(family: Family, n: usize) -> Result<(usize, String, f64), String> {
    let text = family.source(n);
    let start;
    let (insts, outcome) = match family {
        Family::SequentialIfs | Family::LiveValues => {
            let source = kiln_front::Source::from_path(Path::new("gen.wgsl"), text.into_bytes())
                .map_err(|e| e.reason())?;
            let shader = pipeline::parse(source).map_err(|e| e.to_string())?;
            let entry = EntryPoint::default();
            let lowered = pipeline::lower(&shader, &entry).map_err(|e| e.to_string())?;
            let insts = lowered.function.inst_count();
            start = std::time::Instant::now();
            let outcome = match pipeline::compile_lowered("gen", lowered, &Options::default()) {
                Ok(c) => format!("{} QPU instructions", c.compiled.stats.instructions),
                Err(e) => format!("refused: {}", e.to_string().lines().next().unwrap_or("")),
            };
            (insts, outcome)
        }
        Family::DiamondsSsa | Family::WideSsa | Family::WideGraph | Family::ChainOpt => {
            let mut func = kiln_ir::parse_function(&text).map_err(|e| e.to_string())?;
            let insts = func.inst_count();
            start = std::time::Instant::now();
            let outcome = if family == Family::ChainOpt {
                let options = Options {
                    check: false,
                    ..Options::default()
                };
                let out = pipeline::optimize(func, &options).map_err(|e| e.to_string())?;
                format!("{} instructions after", out.inst_count())
            } else {
                let options = Options {
                    allocator: if family == Family::WideGraph {
                        kiln_regalloc::Allocator::Graph
                    } else {
                        kiln_regalloc::Allocator::Ssa
                    },
                    check: false,
                    ..Options::default()
                };
                let stats = pipeline::allocate(&mut func, &options).map_err(|e| e.to_string())?;
                format!("{} spills", stats.spills)
            };
            (insts, outcome)
        }
    };
    Ok((insts, outcome, start.elapsed().as_secs_f64()))
}

/// This process's peak resident memory in KiB (Linux: `VmHWM`).
pub fn peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One row of the scaling table, measured in a child process (`kiln bench scaling-one`) so
/// that its peak memory is its own.
#[derive(Clone, Debug)]
pub struct ScalingRow {
    pub family: Family,
    pub n: usize,
    pub insts: usize,
    pub outcome: String,
    pub seconds: f64,
    pub peak_kib: Option<u64>,
}

/// Runs `exe bench scaling-one` for every family and size.
pub fn scaling(
    exe: &Path,
    families: &[Family],
    sizes: &[usize],
) -> Result<Vec<ScalingRow>, String> {
    let mut rows = Vec::new();
    for &family in families {
        for &n in sizes {
            let out = Command::new(exe)
                .args(["bench", "scaling-one", family.name(), &n.to_string()])
                .output()
                .map_err(|e| format!("{}: {e}", exe.display()))?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                let stderr = String::from_utf8_lossy(&out.stderr);
                return Err(format!("{} {n}: {}", family.name(), stderr.trim()));
            }
            // insts \t seconds \t peak \t outcome
            let cols: Vec<&str> = stdout.trim().splitn(4, '\t').collect();
            let [insts, seconds, peak, outcome] = cols[..] else {
                return Err(format!(
                    "{} {n}: unexpected output `{stdout}`",
                    family.name()
                ));
            };
            rows.push(ScalingRow {
                family,
                n,
                insts: insts.parse().map_err(|_| format!("bad count `{insts}`"))?,
                outcome: outcome.to_string(),
                seconds: seconds
                    .parse()
                    .map_err(|_| format!("bad time `{seconds}`"))?,
                peak_kib: peak.parse().ok(),
            });
        }
    }
    Ok(rows)
}

/// The scaling table: time per IR instruction at each size and its growth from the size
/// before (1.0: linear; 10: quadratic for a ×10 step).
pub fn scaling_report(rows: &[ScalingRow]) -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "family        n        IR insts   time (s)   µs/inst   growth   peak MB   outcome\n",
    );
    for (k, r) in rows.iter().enumerate() {
        let per = r.seconds * 1e6 / r.insts.max(1) as f64;
        let growth = match k.checked_sub(1).map(|j| &rows[j]) {
            Some(p) if p.family == r.family => {
                let before = p.seconds * 1e6 / p.insts.max(1) as f64;
                format!("{:.2}", per / before.max(1e-9))
            }
            _ => "-".into(),
        };
        let peak = r
            .peak_kib
            .map_or("-".to_string(), |k| format!("{:.0}", k as f64 / 1024.0));
        let _ = writeln!(
            out,
            "{:<13} {:<8} {:<10} {:<10.3} {:<9.2} {:<8} {:<9} {}",
            r.family.name(),
            r.n,
            r.insts,
            r.seconds,
            per,
            growth,
            peak,
            r.outcome
        );
    }
    out
}

// ---- the shader cache ------------------------------------------------------------------------

/// Wall times of `kiln corpus compile` over a corpus, each run a process of its own: without
/// the cache, with an empty cache (every program compiled and stored) and with the cache the
/// cold run filled (every program read back); the median of `runs` of each.
#[derive(Clone, Copy, Debug)]
pub struct CacheTimes {
    pub uncached: f64,
    pub cold: f64,
    pub warm: f64,
}

pub fn cache_times(
    exe: &Path,
    corpus: &Path,
    jobs: usize,
    runs: usize,
) -> Result<CacheTimes, String> {
    let dir = std::env::temp_dir().join(format!("kiln-bench-cache-{}", std::process::id()));
    let time = |cache: Option<&Path>| -> Result<f64, String> {
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("corpus")
            .arg("compile")
            .arg(corpus)
            .arg("-j")
            .arg(jobs.to_string());
        match cache {
            Some(d) => cmd.arg("--cache").arg(d),
            None => cmd.arg("--no-cache"),
        };
        let start = Instant::now();
        let out = cmd
            .output()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        let seconds = start.elapsed().as_secs_f64();
        if !out.status.success() {
            return Err(format!(
                "corpus compile failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(seconds)
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mut uncached, mut cold, mut warm) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        uncached.push(time(None)?);
        let _ = std::fs::remove_dir_all(&dir);
        cold.push(time(Some(&dir))?);
        warm.push(time(Some(&dir))?);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(CacheTimes {
        uncached: median(uncached),
        cold: median(cold),
        warm: median(warm),
    })
}

impl std::fmt::Display for CacheTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "corpus compile, wall seconds (median)")?;
        writeln!(f, "  no cache      {:8.3}", self.uncached)?;
        writeln!(
            f,
            "  cold cache    {:8.3}  ({:+.1} % against no cache: hashing and storing)",
            self.cold,
            100.0 * (self.cold / self.uncached - 1.0)
        )?;
        writeln!(
            f,
            "  warm cache    {:8.3}  ({:.1}× faster than cold)",
            self.warm,
            self.cold / self.warm
        )
    }
}
