//! `kiln disasm`, `kiln asm`, `kiln sim`: the VideoCore IV QPU tools of `kiln-vc4`.

use clap::{Args, ValueEnum};
use kiln_qpu::isa::{self, Style};
use kiln_qpu::sim::{Machine, Program, Qpu};
use kiln_qpu::words;
use miette::{IntoDiagnostic, Result, WrapErr, miette};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

fn read_input(path: &Path) -> Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .into_diagnostic()
            .wrap_err("reading standard input")?;
        Ok(buf)
    } else {
        std::fs::read(path)
            .into_diagnostic()
            .wrap_err_with(|| format!("reading {}", path.display()))
    }
}

/// How a program file is read.
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum InputFormat {
    /// Text if the file is printable ASCII (hex words, else assembly), raw binary otherwise.
    #[default]
    Auto,
    /// Raw little-endian 64-bit words.
    Binary,
    /// Hex words (16 digits bit 63 first, or `0xLOW, 0xHIGH` pairs).
    Hex,
    /// Assembly text.
    Asm,
}

/// Program words from raw little-endian binary, hex text, or (for text that is not hex)
/// assembly source.
fn read_program(path: &Path, format: InputFormat) -> Result<Vec<u64>> {
    let bytes = read_input(path)?;
    let text =
        || std::str::from_utf8(&bytes).map_err(|_| miette!("{}: not UTF-8 text", path.display()));
    match format {
        InputFormat::Binary => {
            return words::from_binary(&bytes).map_err(|e| miette!("{}: {e}", path.display()));
        }
        InputFormat::Hex => {
            return words::from_hex_text(text()?).map_err(|e| miette!("{}: {e}", path.display()));
        }
        InputFormat::Asm => {
            return isa::assemble(text()?).map_err(|e| miette!("{}:{e}", path.display()));
        }
        InputFormat::Auto => {}
    }
    match words::parse(&bytes) {
        Ok(w) => Ok(w),
        Err(e @ words::WordsError::OddLength(_)) => Err(miette!("{}: {e}", path.display())),
        Err(hex_err) => {
            let text = std::str::from_utf8(&bytes)
                .map_err(|_| miette!("{}: {hex_err}", path.display()))?;
            isa::assemble(text).map_err(|e| {
                miette!(
                    "{}: not hex words ({hex_err}) and not assembly ({e})",
                    path.display()
                )
            })
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StyleArg {
    /// Byte-identical to Mesa's vc4_qpu_disasm.
    Mesa,
    /// Mesa's text plus every field Mesa leaves out (reassembles exactly).
    Kiln,
}

/// Disassemble QPU code (raw little-endian 64-bit words or hex text).
#[derive(Debug, Args)]
pub struct DisasmArgs {
    /// Program file (`-` for standard input).
    pub file: PathBuf,
    /// Text style.
    #[arg(long, value_enum, default_value = "kiln")]
    pub style: StyleArg,
    /// Prefix each line with the instruction index and word.
    #[arg(long)]
    pub words: bool,
    /// Input format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: InputFormat,
}

pub fn run_disasm(args: DisasmArgs) -> Result<()> {
    let code = read_program(&args.file, args.format)?;
    let style = match args.style {
        StyleArg::Mesa => Style::Mesa,
        StyleArg::Kiln => Style::Kiln,
    };
    let mut out = String::new();
    for (i, w) in code.iter().enumerate() {
        if args.words {
            out.push_str(&format!("{i:5}: {w:016x}  "));
        }
        out.push_str(&isa::disasm(*w, style));
        out.push('\n');
    }
    std::io::stdout()
        .write_all(out.as_bytes())
        .into_diagnostic()
}

/// Assemble QPU assembly text (the disassembler's syntax, labels, comments).
#[derive(Debug, Args)]
pub struct AsmArgs {
    /// Source file (`-` for standard input).
    pub file: PathBuf,
    /// Output file (`-` for standard output).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Write hex text (one 16-digit word per line) instead of raw little-endian binary.
    #[arg(long)]
    pub hex: bool,
}

pub fn run_asm(args: AsmArgs) -> Result<()> {
    let bytes = read_input(&args.file)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| miette!("{}: not UTF-8 text", args.file.display()))?;
    let code = isa::assemble(text).map_err(|e| miette!("{}:{e}", args.file.display()))?;
    let data = if args.hex {
        code.iter()
            .map(|w| format!("{w:016x}\n"))
            .collect::<String>()
            .into_bytes()
    } else {
        words::to_binary(&code)
    };
    if args.output.as_os_str() == "-" {
        std::io::stdout().write_all(&data).into_diagnostic()
    } else {
        std::fs::write(&args.output, data)
            .into_diagnostic()
            .wrap_err_with(|| format!("writing {}", args.output.display()))
    }
}

/// Run QPU code on the simulator and print the final state.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Program file: raw little-endian words, hex text or assembly (`-` for standard input).
    pub file: PathBuf,
    /// Uniform stream: comma-separated 32-bit values (decimal, 0x hex, or floats with a `.`).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub uniforms: Vec<String>,
    /// Load a file into memory: ADDR=FILE (raw bytes; ADDR decimal or 0x hex). Repeatable.
    #[arg(long)]
    pub memory: Vec<String>,
    /// Print memory words after the run: ADDR:COUNT. Repeatable.
    #[arg(long)]
    pub dump: Vec<String>,
    /// Bus address of the program.
    #[arg(long, default_value = "0x10000", value_parser = parse_u32)]
    pub base: u32,
    /// Address where the uniform stream is placed.
    #[arg(long, default_value = "0x80000", value_parser = parse_u32)]
    pub uniforms_address: u32,
    /// Memory size in bytes.
    #[arg(long, default_value = "0x400000", value_parser = parse_u32)]
    pub mem_size: u32,
    /// Instruction budget.
    #[arg(long, default_value_t = 10_000_000)]
    pub max_steps: u64,
    /// Print the state as JSON.
    #[arg(long)]
    pub json: bool,
    /// Input format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: InputFormat,
}

fn parse_u32(s: &str) -> std::result::Result<u32, String> {
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16)
    } else {
        s.parse::<u32>()
    };
    r.map_err(|e| format!("`{s}`: {e}"))
}

fn parse_uniform(s: &str) -> Result<u32> {
    let s = s.trim();
    if let Ok(v) = parse_u32(s) {
        return Ok(v);
    }
    if let Ok(v) = s.parse::<i32>() {
        return Ok(v as u32);
    }
    if s.contains('.') {
        if let Ok(f) = s.parse::<f32>() {
            return Ok(f.to_bits());
        }
    }
    Err(miette!("bad uniform value `{s}`"))
}

fn lanes_json(v: &[u32; 16]) -> Value {
    json!(v.to_vec())
}

fn qpu_json(q: &Qpu) -> Value {
    let mut ra = serde_json::Map::new();
    let mut rb = serde_json::Map::new();
    for i in 0..32 {
        if q.ra[i] != [0; 16] {
            ra.insert(format!("ra{i}"), lanes_json(&q.ra[i]));
        }
        if q.rb[i] != [0; 16] {
            rb.insert(format!("rb{i}"), lanes_json(&q.rb[i]));
        }
    }
    json!({
        "accumulators": (0..6).map(|i| lanes_json(&q.acc[i])).collect::<Vec<_>>(),
        "ra": ra,
        "rb": rb,
        "flags": {"z": q.z, "n": q.n, "c": q.c},
        "host_int": q.host_int,
        "instructions": q.instructions,
        "cycles": q.cycles,
    })
}

fn lanes_text(v: &[u32; 16]) -> String {
    v.iter()
        .map(|x| format!("{x:08x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn run_sim(args: SimArgs) -> Result<()> {
    let code = read_program(&args.file, args.format)?;
    if code.is_empty() {
        return Err(miette!("{}: empty program", args.file.display()));
    }
    let mut m = Machine::new(args.mem_size as usize, Program::new(args.base, &code));
    let end = args.base as u64 + 8 * code.len() as u64;
    if end > args.mem_size as u64 {
        return Err(miette!(
            "program does not fit in {} bytes of memory",
            args.mem_size
        ));
    }
    for spec in &args.memory {
        let (addr, file) = spec
            .split_once('=')
            .ok_or_else(|| miette!("--memory expects ADDR=FILE, got `{spec}`"))?;
        let addr = parse_u32(addr).map_err(|e| miette!("--memory: {e}"))?;
        let bytes = read_input(Path::new(file))?;
        let mut padded = bytes.clone();
        padded.resize(bytes.len().div_ceil(4) * 4, 0);
        let words: Vec<u32> = padded
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        m.mem
            .write_words(addr, &words)
            .ok_or_else(|| miette!("--memory {spec}: outside the simulated memory"))?;
    }
    let unifs = args
        .uniforms
        .iter()
        .map(|s| parse_uniform(s))
        .collect::<Result<Vec<_>>>()?;
    m.mem
        .write_words(args.uniforms_address, &unifs)
        .ok_or_else(|| miette!("uniforms do not fit at {:#x}", args.uniforms_address))?;
    m.add_qpu(args.uniforms_address);
    m.run(args.max_steps)
        .map_err(|e| miette!("simulation failed: {e}"))?;
    let mut dumps = Vec::new();
    for spec in &args.dump {
        let (a, n) = spec
            .split_once(':')
            .ok_or_else(|| miette!("--dump expects ADDR:COUNT, got `{spec}`"))?;
        let a = parse_u32(a).map_err(|e| miette!("--dump: {e}"))?;
        let n = parse_u32(n).map_err(|e| miette!("--dump: {e}"))? as usize;
        let w = m
            .mem
            .read_words(a, n)
            .ok_or_else(|| miette!("--dump {spec}: outside the simulated memory"))?;
        dumps.push((a, w));
    }
    let q = &m.qpus[0];
    let vpm_rows: Vec<(usize, [u32; 16])> = (0..kiln_qpu::sim::vpm::VPM_ROWS)
        .filter_map(|r| {
            let row: [u32; 16] = m.vpm.data[r * 16..r * 16 + 16].try_into().unwrap();
            (row != [0; 16]).then_some((r, row))
        })
        .collect();
    let tile: Vec<(usize, u32, u32)> = (0..m.tlb.color.len())
        .filter(|&i| m.tlb.color[i] != 0 || m.tlb.z[i] != 0)
        .map(|i| (i, m.tlb.color[i], m.tlb.z[i]))
        .collect();
    let width = kiln_qpu::sim::tlb::TILE;
    if args.json {
        let v = json!({
            "qpu": qpu_json(q),
            "vpm": vpm_rows.iter().map(|(r, row)| json!({"row": r, "words": row.to_vec()})).collect::<Vec<_>>(),
            "tile_buffer": tile.iter().map(|(i, c, z)| json!({"x": i % width, "y": i / width, "color": c, "z": z})).collect::<Vec<_>>(),
            "semaphores": m.semaphores.to_vec(),
            "memory": dumps.iter().map(|(a, w)| json!({"address": a, "words": w})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v).into_diagnostic()?);
        return Ok(());
    }
    let mut out = String::new();
    out.push_str(&format!(
        "instructions {}  cycles {}  (stalls modelled: TMU latency, semaphore waits)\n",
        q.instructions, q.cycles
    ));
    for i in 0..6 {
        out.push_str(&format!("r{i}   {}\n", lanes_text(&q.acc[i])));
    }
    for i in 0..32 {
        if q.ra[i] != [0; 16] {
            out.push_str(&format!("ra{i:<2} {}\n", lanes_text(&q.ra[i])));
        }
    }
    for i in 0..32 {
        if q.rb[i] != [0; 16] {
            out.push_str(&format!("rb{i:<2} {}\n", lanes_text(&q.rb[i])));
        }
    }
    let bits = |f: u16| {
        (0..16)
            .map(|l| if f >> l & 1 == 1 { '1' } else { '.' })
            .collect::<String>()
    };
    out.push_str(&format!(
        "flags Z {}  N {}  C {}  (lane 0 first)\n",
        bits(q.z),
        bits(q.n),
        bits(q.c)
    ));
    if !q.host_int.is_empty() {
        out.push_str(&format!("host_int {:?}\n", q.host_int));
    }
    out.push_str(&format!("vpm: {} non-zero row(s)\n", vpm_rows.len()));
    for (r, row) in &vpm_rows {
        out.push_str(&format!("  {r:3} {}\n", lanes_text(row)));
    }
    out.push_str(&format!("tile buffer: {} written pixel(s)\n", tile.len()));
    for (i, c, z) in tile.iter().take(64) {
        out.push_str(&format!(
            "  ({:2},{:2}) color {c:08x} z {z:08x}\n",
            i % width,
            i / width
        ));
    }
    for (a, w) in &dumps {
        out.push_str(&format!("memory {a:#x}:\n"));
        for (k, chunk) in w.chunks(8).enumerate() {
            let t: Vec<String> = chunk.iter().map(|x| format!("{x:08x}")).collect();
            out.push_str(&format!(
                "  {:#010x} {}\n",
                *a as usize + 32 * k,
                t.join(" ")
            ));
        }
    }
    std::io::stdout()
        .write_all(out.as_bytes())
        .into_diagnostic()
}
