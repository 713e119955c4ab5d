//! `kiln disasm`, `kiln asm`, `kiln sim`: the VideoCore IV QPU tools of `kiln-qpu`.

use crate::qpu::{self, InputFormat, parse_u32, read_input, read_program};
use clap::{Args, ValueEnum};
use kiln_qpu::isa::{self, Style};
use kiln_qpu::sim::{Machine, Program};
use kiln_qpu::words;
use miette::{Result, miette};
use std::path::{Path, PathBuf};

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
    let code = read_program(&args.file, args.format).map_err(|e| miette!("{e}"))?;
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
    super::print(&out);
    Ok(())
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
    crate::cli::check_output(&args.output, &[&args.file])?;
    let bytes = read_input(&args.file).map_err(|e| miette!("{e}"))?;
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
    crate::cli::write_output(&args.output, &[&args.file], &data)
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

pub fn run_sim(args: SimArgs) -> Result<()> {
    let code = read_program(&args.file, args.format).map_err(|e| miette!("{e}"))?;
    if code.is_empty() {
        return Err(miette!("{}: empty program", args.file.display()));
    }
    let end = args.base as u64 + 8 * code.len() as u64;
    if end > args.mem_size as u64 {
        return Err(miette!(
            "program does not fit in {} bytes of memory",
            args.mem_size
        ));
    }
    let mut m = Machine::new(args.mem_size as usize, Program::new(args.base, &code));
    for spec in &args.memory {
        let (addr, file) = spec
            .split_once('=')
            .ok_or_else(|| miette!("--memory expects ADDR=FILE, got `{spec}`"))?;
        let addr = parse_u32(addr).map_err(|e| miette!("--memory: {e}"))?;
        let mut bytes = read_input(Path::new(file)).map_err(|e| miette!("{e}"))?;
        bytes.resize(bytes.len().div_ceil(4) * 4, 0);
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        m.mem
            .write_words(addr, &words)
            .ok_or_else(|| miette!("--memory {spec}: outside the simulated memory"))?;
    }
    let unifs = args
        .uniforms
        .iter()
        .map(|s| qpu::parse_uniform(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| miette!("{e}"))?;
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
    if args.json {
        let v = qpu::state_json(&m, &dumps);
        super::print(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).map_err(|e| miette!("{e}"))?
        ));
    } else {
        super::print(&qpu::state_text(&m, &dumps));
    }
    Ok(())
}
