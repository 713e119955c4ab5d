//! The QPU tools' input and output (`kiln disasm`, `asm`, `sim`): program words from raw
//! binary, hex text or assembly, uniform values, and the simulator's final state as text or JSON.

use kiln_qpu::isa;
use kiln_qpu::sim::{Machine, Qpu};
use kiln_qpu::words;
use serde_json::{Value, json};
use std::io::Read;
use std::path::Path;

/// Reads a file, or standard input for `-`.
pub fn read_input(path: &Path) -> Result<Vec<u8>, String> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| format!("reading standard input: {e}"))?;
        Ok(buf)
    } else {
        std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))
    }
}

/// How a program file is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
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
pub fn read_program(path: &Path, format: InputFormat) -> Result<Vec<u64>, String> {
    let bytes = read_input(path)?;
    let name = path.display();
    let text = || std::str::from_utf8(&bytes).map_err(|_| format!("{name}: not UTF-8 text"));
    match format {
        InputFormat::Binary => {
            return words::from_binary(&bytes).map_err(|e| format!("{name}: {e}"));
        }
        InputFormat::Hex => {
            return words::from_hex_text(text()?).map_err(|e| format!("{name}: {e}"));
        }
        InputFormat::Asm => return isa::assemble(text()?).map_err(|e| format!("{name}:{e}")),
        InputFormat::Auto => {}
    }
    match words::parse(&bytes) {
        Ok(w) => Ok(w),
        Err(e @ words::WordsError::OddLength(_)) => Err(format!("{name}: {e}")),
        Err(hex_err) => {
            let text = std::str::from_utf8(&bytes).map_err(|_| format!("{name}: {hex_err}"))?;
            isa::assemble(text)
                .map_err(|e| format!("{name}: not hex words ({hex_err}) and not assembly ({e})"))
        }
    }
}

/// Reads `0x…` hex or decimal.
pub fn parse_u32(s: &str) -> Result<u32, String> {
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16)
    } else {
        s.parse::<u32>()
    };
    r.map_err(|e| format!("`{s}`: {e}"))
}

/// A uniform value: unsigned or negative decimal, `0x` hex, or a float with a `.`.
pub fn parse_uniform(s: &str) -> Result<u32, String> {
    let s = s.trim();
    if let Ok(v) = parse_u32(s) {
        return Ok(v);
    }
    if let Ok(v) = s.parse::<i32>() {
        return Ok(v as u32);
    }
    if s.contains('.')
        && let Ok(f) = s.parse::<f32>()
    {
        return Ok(f.to_bits());
    }
    Err(format!("bad uniform value `{s}`"))
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

/// The simulator's state after a run, as JSON: QPU 0's registers and flags, the non-zero VPM
/// rows, the written tile-buffer pixels, the semaphores and the memory `dumps`.
pub fn state_json(m: &Machine, dumps: &[(u32, Vec<u32>)]) -> Value {
    let width = kiln_qpu::sim::tlb::TILE;
    json!({
        "qpu": qpu_json(&m.qpus[0]),
        "vpm": vpm_rows(m).iter().map(|(r, row)| json!({"row": r, "words": row.to_vec()})).collect::<Vec<_>>(),
        "tile_buffer": tile(m).iter().map(|(i, c, z)| json!({"x": i % width, "y": i / width, "color": c, "z": z})).collect::<Vec<_>>(),
        "semaphores": m.semaphores.to_vec(),
        "memory": dumps.iter().map(|(a, w)| json!({"address": a, "words": w})).collect::<Vec<_>>(),
    })
}

fn vpm_rows(m: &Machine) -> Vec<(usize, [u32; 16])> {
    (0..kiln_qpu::sim::vpm::VPM_ROWS)
        .filter_map(|r| {
            let row: [u32; 16] = m.vpm.data[r * 16..r * 16 + 16].try_into().ok()?;
            (row != [0; 16]).then_some((r, row))
        })
        .collect()
}

fn tile(m: &Machine) -> Vec<(usize, u32, u32)> {
    (0..m.tlb.color.len())
        .filter(|&i| m.tlb.color[i] != 0 || m.tlb.z[i] != 0)
        .map(|i| (i, m.tlb.color[i], m.tlb.z[i]))
        .collect()
}

/// [`state_json`] as text.
pub fn state_text(m: &Machine, dumps: &[(u32, Vec<u32>)]) -> String {
    use std::fmt::Write as _;
    let q = &m.qpus[0];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "instructions {}  cycles {}  (stalls modelled: TMU latency, semaphore waits)",
        q.instructions, q.cycles
    );
    for i in 0..6 {
        let _ = writeln!(out, "r{i}   {}", lanes_text(&q.acc[i]));
    }
    for (name, file) in [("ra", &q.ra), ("rb", &q.rb)] {
        for (i, lanes) in file.iter().enumerate() {
            if *lanes != [0; 16] {
                let _ = writeln!(out, "{name}{i:<2} {}", lanes_text(lanes));
            }
        }
    }
    let bits = |f: u16| {
        (0..16)
            .map(|l| if f >> l & 1 == 1 { '1' } else { '.' })
            .collect::<String>()
    };
    let _ = writeln!(
        out,
        "flags Z {}  N {}  C {}  (lane 0 first)",
        bits(q.z),
        bits(q.n),
        bits(q.c)
    );
    if !q.host_int.is_empty() {
        let _ = writeln!(out, "host_int {:?}", q.host_int);
    }
    let rows = vpm_rows(m);
    let _ = writeln!(out, "vpm: {} non-zero row(s)", rows.len());
    for (r, row) in &rows {
        let _ = writeln!(out, "  {r:3} {}", lanes_text(row));
    }
    let width = kiln_qpu::sim::tlb::TILE;
    let pixels = tile(m);
    let _ = writeln!(out, "tile buffer: {} written pixel(s)", pixels.len());
    for (i, c, z) in pixels.iter().take(64) {
        let _ = writeln!(
            out,
            "  ({:2},{:2}) color {c:08x} z {z:08x}",
            i % width,
            i / width
        );
    }
    for (a, w) in dumps {
        let _ = writeln!(out, "memory {a:#x}:");
        for (k, chunk) in w.chunks(8).enumerate() {
            let t: Vec<String> = chunk.iter().map(|x| format!("{x:08x}")).collect();
            let _ = writeln!(out, "  {:#010x} {}", *a as usize + 32 * k, t.join(" "));
        }
    }
    out
}
