//! Assembler for the disassembler's text (both [`Style::Mesa`](super::Style) and the kiln
//! style), with labels and comments, and [`normalize`], which gives the fields the machine
//! ignores their normal value. The kiln-style text carries every bit:
//! `assemble(disasm(w, Kiln)) == w` for every word. The design is in `docs/vc4.md` ("Assembler
//! and the normalized form").

use super::fields::*;
use super::instr::*;
use super::names::*;
use std::collections::HashMap;

/// An assembly error with its position (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct AsmError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Canonical form of an instruction word: the fields text cannot show and the machine does
/// not use are set to fixed values.
///
/// ALU: `cond_add`/`cond_mul` of a `nop` op → never; a raddr no mux selects and whose read
/// has no side effect → 39 (nop), and a small immediate below 48 no mux reads → 0; a read of a
/// shared-name address (uni, vary, nop, vpm, mutex) through file B moves to file A when
/// file A is free; pm → 0 when there is no pack and no file-A or r4 operand (nothing the
/// unpack could apply to).
/// All forms: ws → 0 when no destination depends on it (no file register, r5, quad x/y,
/// alpha mask, ms flags / rev flag, VPM setup/address, and no pm = 0 pack). Load immediate /
/// semaphore: a destination `nop` has its condition → never (the add condition is kept when
/// sf is set: it selects the lanes whose flags are set); pm → 0 without pack. Branch: unused
/// bits 59:56 → 0; without `reg`, raddr_a bits 4:1 → 0 (bit 0 is bit 45, which vc4asm reads
/// as the sf bit, so it is kept).
///
/// The kiln-style text shows every field, so `assemble(disasm(w, Kiln)) == w`; the normalized
/// form is the word whose kiln text has no annotation for a hidden field.
pub fn normalize(word: u64) -> u64 {
    let mut i = decode(word);
    match &mut i {
        Instr::Alu(a) => {
            if a.op_add == AddOp::Nop {
                a.w.cond_add = Cond::Never;
            }
            if a.op_mul == MulOp::Nop {
                a.w.cond_mul = Cond::Never;
            }
            let muxes = [a.add_a, a.add_b, a.mul_a, a.mul_b];
            let small = a.sig == Signal::SmallImm;
            if !muxes.contains(&Mux::A) && !read_has_side_effect(a.raddr_a) {
                a.raddr_a = raddr::NOP;
            }
            if small {
                if !muxes.contains(&Mux::B) && a.raddr_b < 48 {
                    a.raddr_b = 0;
                }
            } else if !muxes.contains(&Mux::B) && !read_has_side_effect(a.raddr_b) {
                a.raddr_b = raddr::NOP;
            }
            if !small
                && muxes.contains(&Mux::B)
                && shared_read_name(a.raddr_b)
                && !muxes.contains(&Mux::A)
                && a.raddr_a == raddr::NOP
            {
                // file A free: the same read through file A (unpack applies only to file A
                // with pm = 0, so keep file B when an unpack would change meaning)
                if a.unpack == Unpack::None || a.w.pm {
                    a.raddr_a = a.raddr_b;
                    a.raddr_b = raddr::NOP;
                    for m in [&mut a.add_a, &mut a.add_b, &mut a.mul_a, &mut a.mul_b] {
                        if *m == Mux::B {
                            *m = Mux::A;
                        }
                    }
                }
            }
            // two different shared-name reads: the first operand (in add_a, add_b, mul_a,
            // mul_b order) reading one of them takes file A
            let muxes = [a.add_a, a.add_b, a.mul_a, a.mul_b];
            if !small
                && muxes.contains(&Mux::A)
                && muxes.contains(&Mux::B)
                && shared_read_name(a.raddr_a)
                && shared_read_name(a.raddr_b)
                && a.raddr_a != a.raddr_b
                && (a.unpack == Unpack::None || a.w.pm)
                && muxes.iter().find(|m| matches!(m, Mux::A | Mux::B)) == Some(&Mux::B)
            {
                std::mem::swap(&mut a.raddr_a, &mut a.raddr_b);
                for m in [&mut a.add_a, &mut a.add_b, &mut a.mul_a, &mut a.mul_b] {
                    *m = match *m {
                        Mux::A => Mux::B,
                        Mux::B => Mux::A,
                        x => x,
                    };
                }
            }
            // pm matters through the pack, or through the unpack when some operand could
            // consume it (file A with pm = 0, r4 with pm = 1)
            let muxes = [a.add_a, a.add_b, a.mul_a, a.mul_b];
            if a.w.pack == 0
                && (a.unpack == Unpack::None
                    || !(muxes.contains(&Mux::A) || muxes.contains(&Mux::R4)))
            {
                a.w.pm = false;
            }
            if !waddr_uses_ws(a.w.waddr_add)
                && !waddr_uses_ws(a.w.waddr_mul)
                && (a.w.pm || a.w.pack == 0)
            {
                a.w.ws = false;
            }
        }
        Instr::LoadImm(LoadImm { w, .. }) | Instr::Semaphore(Semaphore { w, .. }) => {
            if w.waddr_add == waddr::NOP && !w.sf {
                w.cond_add = Cond::Never;
            }
            if w.waddr_mul == waddr::NOP {
                w.cond_mul = Cond::Never;
            }
            if w.pack == 0 {
                w.pm = false;
            }
            if !waddr_uses_ws(w.waddr_add) && !waddr_uses_ws(w.waddr_mul) && (w.pm || w.pack == 0) {
                w.ws = false;
            }
        }
        Instr::Branch(b) => {
            b.unused = 0;
            if !b.reg {
                b.raddr_a &= 1;
            }
            if !waddr_uses_ws(b.waddr_add) && !waddr_uses_ws(b.waddr_mul) {
                b.ws = false;
            }
        }
    }
    encode(&i)
}

struct Ctx<'a> {
    line: usize,
    text: &'a str,
}

impl Ctx<'_> {
    /// An error at `at`: a slice of the line (its exact position) or other text (its first
    /// occurrence in the line, else column 1). Columns count characters.
    fn err(&self, at: &str, msg: impl Into<String>) -> AsmError {
        let base = self.text.as_ptr() as usize;
        let start = at.as_ptr() as usize;
        let offset = if start >= base && start + at.len() <= base + self.text.len() {
            Some(start - base)
        } else if at.is_empty() {
            None
        } else {
            self.text.find(at)
        };
        let column = offset
            .and_then(|o| self.text.get(..o))
            .map_or(1, |s| s.chars().count() + 1);
        AsmError {
            line: self.line,
            column,
            message: msg.into(),
        }
    }
}

fn strip_comment(line: &str) -> &str {
    let mut end = line.len();
    for m in ["#", "//"] {
        if let Some(p) = line.find(m) {
            end = end.min(p);
        }
    }
    &line[..end]
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_' || ch == '.')
        && s.chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '.')
}

/// A decimal or `0x` hex integer with an optional sign; `None` when malformed or beyond
/// the range of `i64`.
fn parse_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (digits, radix) = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (body, 10),
    };
    // from_str_radix accepts a sign of its own: only digits here
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let v = i64::from_str_radix(digits, radix).ok()?;
    if neg { v.checked_neg() } else { Some(v) }
}

/// True for text written as an integer (sign, then decimal digits or `0x` and hex digits),
/// whatever its size.
fn is_int_syntax(s: &str) -> bool {
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(h) => !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()),
        None => !body.is_empty() && body.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// Assembles a program. Labels resolve to instruction indices: a relative branch to `L`
/// gets `imm = 8 · (L − (i + 4))`, an absolute one `imm = 8 · L` (program at address 0).
pub fn assemble(text: &str) -> Result<Vec<u64>, AsmError> {
    // pass 1: labels and instruction lines
    let mut labels: HashMap<String, usize> = HashMap::new();
    let mut lines: Vec<(usize, &str, &str)> = Vec::new();
    for (ln, raw) in text.lines().enumerate() {
        let mut code = strip_comment(raw).trim();
        while let Some(p) = code.find(':') {
            let name = code[..p].trim();
            if !is_ident(name) || name.contains(' ') {
                break;
            }
            if labels.insert(name.to_string(), lines.len()).is_some() {
                return Err(Ctx {
                    line: ln + 1,
                    text: raw,
                }
                .err(name, format!("label `{name}` defined twice")));
            }
            code = code[p + 1..].trim();
        }
        if !code.is_empty() {
            lines.push((ln + 1, raw, code));
        }
    }
    let mut out = Vec::with_capacity(lines.len());
    for (idx, (ln, raw, code)) in lines.iter().enumerate() {
        let cx = Ctx {
            line: *ln,
            text: raw,
        };
        out.push(encode(&parse_instr(&cx, code, idx, &labels)?));
    }
    Ok(out)
}

/// Assembles one instruction (no labels).
pub fn assemble_line(text: &str) -> Result<u64, AsmError> {
    let cx = Ctx { line: 1, text };
    let code = strip_comment(text).trim();
    Ok(encode(&parse_instr(&cx, code, 0, &HashMap::new())?))
}

fn split_args(s: &str) -> Vec<&str> {
    if s.trim().is_empty() {
        return Vec::new();
    }
    s.split(',').map(|x| x.trim()).collect()
}

fn parse_cond(cx: &Ctx, s: &str) -> Result<Cond, AsmError> {
    Ok(match s {
        "never" => Cond::Never,
        "always" => Cond::Always,
        "zs" => Cond::Zs,
        "zc" => Cond::Zc,
        "ns" => Cond::Ns,
        "nc" => Cond::Nc,
        "cs" => Cond::Cs,
        "cc" => Cond::Cc,
        _ => return Err(cx.err(s, format!("unknown condition `.{s}`"))),
    })
}

/// `raN` / `rbN` (N decimal digits only): (N, file A). N may be out of range.
fn regfile_number(s: &str) -> Option<(u8, bool)> {
    let (n, is_a) = file_digits(s, "ra", "rb")?;
    Some((n.parse::<u8>().unwrap_or(u8::MAX), is_a))
}

/// The decimal digits after prefix `a` (file A) or `b` (file B), if that is all there is.
fn file_digits<'s>(s: &'s str, a: &str, b: &str) -> Option<(&'s str, bool)> {
    let (n, is_a) = match (s.strip_prefix(a), s.strip_prefix(b)) {
        (Some(n), _) => (n, true),
        (_, Some(n)) => (n, false),
        _ => return None,
    };
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some((n, is_a))
}

/// An unnamed address `a40?` / `b40?` (32–63): (address, file A).
fn unnamed_address(s: &str) -> Option<(u8, bool)> {
    let (n, is_a) = file_digits(s.strip_suffix('?')?, "a", "b")?;
    n.parse::<u8>()
        .ok()
        .filter(|n| (32..64).contains(n))
        .map(|n| (n, is_a))
}

/// A destination: address, file constraint (Some(true) = must be file A) and pack text.
struct Dst<'a> {
    waddr: u8,
    file: Option<bool>,
    pack: Option<&'a str>,
    cond: Option<Cond>,
}

fn parse_dst<'a>(cx: &Ctx, s: &'a str, allow_cond: bool) -> Result<Dst<'a>, AsmError> {
    // `a:` / `b:`: the file whose write port the destination uses
    let (port, s) = match (s.strip_prefix("a:"), s.strip_prefix("b:")) {
        (Some(r), _) => (Some(true), r),
        (_, Some(r)) => (Some(false), r),
        _ => (None, s),
    };
    // split name from suffixes
    let (name, rest) = match s.find('.') {
        Some(p) => (&s[..p], Some(&s[p..])),
        None => (s, None),
    };
    let (waddr, file) = if let Some((n, is_a)) = regfile_number(name) {
        if n > 31 {
            return Err(cx.err(name, format!("register number out of range in `{name}`")));
        }
        (n, Some(is_a))
    } else if let Some((n, is_a)) = unnamed_address(name) {
        (n, Some(is_a))
    } else {
        let a = (32..64).find(|w| kiln_write_name(*w, true) == Some(name));
        let b = (32..64).find(|w| kiln_write_name(*w, false) == Some(name));
        match (a, b) {
            (Some(x), Some(y)) if x == y => (x, None),
            (Some(x), None) => (x, Some(true)),
            (None, Some(y)) => (y, Some(false)),
            // Mesa's name for r5 in either file
            _ if name == "r5" => (waddr::R5, None),
            _ => return Err(cx.err(name, format!("unknown destination `{name}`"))),
        }
    };
    let file = match (port, file) {
        (Some(p), Some(f)) if p != f => {
            return Err(cx.err(
                name,
                format!(
                    "`{name}` is not written through file {}",
                    if p { "A" } else { "B" }
                ),
            ));
        }
        (Some(p), _) => Some(p),
        (None, f) => f,
    };
    let mut pack = None;
    let mut cond = None;
    if let Some(r) = rest {
        let mut r = r;
        if allow_cond {
            for c in ["never", "always", "zs", "zc", "ns", "nc", "cs", "cc"] {
                let suf = format!(".{c}");
                if let Some(x) = r.strip_suffix(&suf) {
                    cond = Some(parse_cond(cx, c)?);
                    r = x;
                    break;
                }
            }
        }
        if !r.is_empty() {
            pack = Some(r);
        }
    }
    Ok(Dst {
        waddr,
        file,
        pack,
        cond,
    })
}

/// Pack text → (pm, code). `.packN` is always pm = 1; named packs return pm = None when both
/// tables have the name (3–7), the caller decides.
fn parse_pack(cx: &Ctx, p: &str) -> Result<(Option<bool>, u8), AsmError> {
    if let Some(n) = p.strip_prefix(".apack") {
        let n: u8 = n
            .parse()
            .ok()
            .filter(|n| *n < 16)
            .ok_or_else(|| cx.err(p, format!("bad pack `{p}`")))?;
        return Ok((Some(false), n));
    }
    if let Some(n) = p.strip_prefix(".pack") {
        let n: u8 = n
            .parse()
            .ok()
            .filter(|n| *n < 16)
            .ok_or_else(|| cx.err(p, format!("bad pack `{p}`")))?;
        return Ok((Some(true), n));
    }
    if p == "???" {
        return Err(cx.err(p, "`???` pack cannot be assembled (write `.packN`)"));
    }
    let code = PACK_A_NAMES
        .iter()
        .position(|n| *n == p)
        .ok_or_else(|| cx.err(p, format!("unknown pack `{p}`")))? as u8;
    Ok((
        if (3..=7).contains(&code) {
            None
        } else {
            Some(false)
        },
        code,
    ))
}

fn parse_instr(
    cx: &Ctx,
    code: &str,
    idx: usize,
    labels: &HashMap<String, usize>,
) -> Result<Instr, AsmError> {
    let (head, args) = match code.find(char::is_whitespace) {
        Some(p) => (&code[..p], code[p..].trim()),
        None => (code, ""),
    };
    let mnemonic = head.split('.').next().unwrap();
    match mnemonic {
        "branch" => parse_branch(cx, head, args, idx, labels),
        "load_imm" | "sacq" | "srel" => parse_imm(cx, head, args),
        _ => parse_alu(cx, code),
    }
}

fn side_constraints(
    cx: &Ctx,
    at: &str,
    add: Option<bool>,
    mul: Option<bool>,
) -> Result<Option<bool>, AsmError> {
    // ws = 0: add → A, mul → B
    let from_add = add.map(|a| !a);
    let from_mul = mul;
    match (from_add, from_mul) {
        (Some(x), Some(y)) if x != y => Err(cx.err(
            at,
            "both destinations in the same register file (one must be A, the other B)",
        )),
        (Some(x), _) | (None, Some(x)) => Ok(Some(x)),
        _ => Ok(None),
    }
}

fn parse_branch(
    cx: &Ctx,
    head: &str,
    args: &str,
    idx: usize,
    labels: &HashMap<String, usize>,
) -> Result<Instr, AsmError> {
    let mut b = Branch {
        unused: 0,
        cond: BranchCond::Always,
        rel: false,
        reg: false,
        raddr_a: 0,
        ws: false,
        waddr_add: waddr::NOP,
        waddr_mul: waddr::NOP,
        imm: 0,
    };
    let number = |s: &str, prefix: &str, max: u8| {
        s.strip_prefix(prefix)
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u8>().ok())
            .filter(|n| *n <= max)
    };
    for s in head.split('.').skip(1) {
        if s == "rel" {
            b.rel = true;
        } else if let Some(n) = number(s, "unused", 15) {
            b.unused = n;
        } else if let Some(n) = number(s, "raddr_a", 31) {
            b.raddr_a = n;
        } else if let Some(c) = BranchCond::from_name(s) {
            b.cond = c;
        } else if let Some(n) = number(s, "cond", 15) {
            b.cond = BranchCond::from_bits(n);
        } else {
            return Err(cx.err(s, format!("unknown branch modifier `.{s}`")));
        }
    }
    let a = split_args(args);
    if a.is_empty() {
        return Err(cx.err(head, "branch needs a target"));
    }
    let mut target = a[0];
    if let Some(p) = target.find("+ra") {
        let r = regfile_number(&target[p + 1..])
            .map(|(r, _)| r)
            .filter(|r| *r < 32)
            .ok_or_else(|| cx.err(target, "bad register in branch target"))?;
        if b.raddr_a != 0 && b.raddr_a != r {
            return Err(cx.err(target, "`.raddr_aN` and the `+raN` register disagree"));
        }
        b.reg = true;
        b.raddr_a = r;
        target = &target[..p];
    }
    b.imm = if let Some(v) = parse_int(target) {
        if !(i32::MIN as i64..=u32::MAX as i64).contains(&v) {
            return Err(cx.err(target, "branch offset out of range"));
        }
        v as i32
    } else if is_int_syntax(target) {
        return Err(cx.err(target, "branch offset out of range"));
    } else if let Some(&l) = labels.get(target) {
        let (l, i) = (l as i64, idx as i64);
        let off = if b.rel { 8 * (l - (i + 4)) } else { 8 * l };
        i32::try_from(off).map_err(|_| cx.err(target, "branch offset out of range"))?
    } else {
        return Err(cx.err(target, format!("unknown label `{target}`")));
    };
    match a.len() {
        1 => {}
        3 => {
            let da = parse_dst(cx, a[1], false)?;
            let dm = parse_dst(cx, a[2], false)?;
            if da.pack.is_some() || dm.pack.is_some() {
                return Err(cx.err(a[1], "branch link destinations take no pack"));
            }
            b.ws = side_constraints(cx, a[1], da.file, dm.file)?.unwrap_or(false);
            b.waddr_add = da.waddr;
            b.waddr_mul = dm.waddr;
        }
        _ => {
            return Err(cx.err(
                args,
                "branch takes a target and optionally two link destinations",
            ));
        }
    }
    Ok(Instr::Branch(b))
}

fn parse_imm(cx: &Ctx, head: &str, args: &str) -> Result<Instr, AsmError> {
    let mut parts = head.split('.');
    let mn = parts.next().unwrap();
    let mut mode = LoadImmMode::Full32;
    let mut sf = false;
    for s in parts {
        match s {
            "sf" => sf = true,
            "pes" => mode = LoadImmMode::PerElemSigned,
            "peu" => mode = LoadImmMode::PerElemUnsigned,
            _ => {
                let n = s
                    .strip_prefix("mode")
                    .and_then(|n| n.parse::<u8>().ok())
                    .filter(|n| matches!(n, 2 | 5 | 6 | 7))
                    .ok_or_else(|| cx.err(s, format!("unknown modifier `.{s}`")))?;
                mode = LoadImmMode::Reserved(n);
            }
        }
    }
    // value may be followed by " (float)"
    let args = match args.find('(') {
        Some(p) => args[..p].trim(),
        None => args,
    };
    let mut a = split_args(args);
    if a.len() == 2 {
        // `load_imm dst, value`: the mul destination is nop
        a.insert(1, "nop");
    }
    if a.len() != 3 {
        return Err(cx.err(
            head,
            format!("`{mn}` takes one or two destinations and a value"),
        ));
    }
    let da = parse_dst(cx, a[0], true)?;
    let dm = parse_dst(cx, a[1], true)?;
    let val = a[2];
    let imm: u32 = if let Some(v) = parse_int(val) {
        if !(i32::MIN as i64..=u32::MAX as i64).contains(&v) {
            return Err(cx.err(val, "immediate out of 32-bit range"));
        }
        v as u32
    } else if is_int_syntax(val) {
        return Err(cx.err(val, "immediate out of 32-bit range"));
    } else if let Ok(f) = val.parse::<f32>() {
        f.to_bits()
    } else {
        return Err(cx.err(val, format!("bad immediate `{val}`")));
    };
    let mut w = WriteFields {
        sf,
        waddr_add: da.waddr,
        waddr_mul: dm.waddr,
        cond_add: da.cond.unwrap_or(if da.waddr == waddr::NOP && !sf {
            Cond::Never
        } else {
            Cond::Always
        }),
        cond_mul: dm.cond.unwrap_or(if dm.waddr == waddr::NOP {
            Cond::Never
        } else {
            Cond::Always
        }),
        ..WriteFields::NONE
    };
    let mut add_file = da.file;
    let mut mul_file = dm.file;
    apply_packs(
        cx,
        a[0],
        &mut w,
        &da,
        &dm,
        &mut add_file,
        &mut mul_file,
        false,
    )?;
    w.ws = side_constraints(cx, a[0], add_file, mul_file)?.unwrap_or(false);
    Ok(match mn {
        "load_imm" => Instr::LoadImm(LoadImm { mode, w, imm }),
        _ => {
            if mode != LoadImmMode::Full32 {
                return Err(cx.err(head, "semaphores take no load-immediate mode"));
            }
            Instr::Semaphore(Semaphore {
                w,
                acquire: mn == "sacq",
                number: (imm & 15) as u8,
                unused: imm >> 5,
            })
        }
    })
}

/// Decides pm and pack from the destinations' pack texts (see `normalize`).
#[allow(clippy::too_many_arguments)]
fn apply_packs(
    cx: &Ctx,
    at: &str,
    w: &mut WriteFields,
    da: &Dst,
    dm: &Dst,
    add_file: &mut Option<bool>,
    mul_file: &mut Option<bool>,
    pm1_evidence: bool,
) -> Result<Option<bool>, AsmError> {
    let mut pm: Option<bool> = None;
    if let Some(p) = da.pack {
        let (_, code) = parse_pack(cx, p)?;
        if p.starts_with(".pack") || p.starts_with(".apack") {
            return Err(cx.err(p, "`.packN` / `.apackN` go on the mul destination"));
        }
        pm = Some(false);
        w.pack = code;
        *add_file = Some(true);
    }
    if let Some(p) = dm.pack {
        if pm.is_some() {
            return Err(cx.err(p, "only one pack per instruction"));
        }
        let (which, code) = parse_pack(cx, p)?;
        w.pack = code;
        let is_pm1 = match which {
            Some(x) => x,
            None => pm1_evidence || *mul_file != Some(true),
        };
        if is_pm1 {
            pm = Some(true);
        } else {
            pm = Some(false);
            if *mul_file == Some(false) {
                return Err(cx.err(p, "a pm = 0 pack needs a file-A destination"));
            }
            *mul_file = Some(true);
        }
    }
    let _ = at;
    if let Some(p) = pm {
        w.pm = p;
    }
    Ok(pm)
}

/// A parsed source operand.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Src {
    Acc(u8),
    RegA(u8),
    RegB(u8),
    /// A special read by name: (A address if named in A, B address if named in B).
    Special(Option<u8>, Option<u8>),
    SmallImm(u8),
}

struct Operand {
    src: Src,
    rot: Option<u8>,
    unpack: Option<Unpack>,
}

fn small_imm_code(s: &str) -> Option<u8> {
    if let Some(v) = parse_int(s) {
        return match v {
            0..=15 => Some(v as u8),
            -16..=-1 => Some((v + 32) as u8),
            _ => None,
        };
    }
    if let Some(n) = s
        .strip_prefix("<bad imm ")
        .and_then(|r| r.strip_suffix('>'))
    {
        return n.parse::<u8>().ok().filter(|n| *n < 64);
    }
    let f: f32 = s.parse().ok()?;
    (32u8..48).find(|si| {
        let v = f32::from_bits(small_imm_value(*si).unwrap());
        (v - f).abs() <= v * 1e-4
    })
}

fn parse_src(cx: &Ctx, s: &str) -> Result<Operand, AsmError> {
    if s.starts_with("<bad imm") {
        let si = small_imm_code(s).ok_or_else(|| cx.err(s, format!("bad operand `{s}`")))?;
        return Ok(Operand {
            src: Src::SmallImm(si),
            rot: None,
            unpack: None,
        });
    }
    let mut body = s;
    let mut unpack = None;
    // unpack suffix: .16a .16b .8d_rep .8a-.8d (not for numbers such as 0.5)
    if let Some(p) = body.rfind('.') {
        if let Some(u) = Unpack::from_name(&body[p + 1..]) {
            unpack = Some(u);
            body = &body[..p];
        }
    }
    if body.is_empty() {
        return Err(cx.err(s, "missing operand"));
    }
    let mut rot = None;
    // `+` after the first character (a leading `+` is a number's sign)
    if let Some((p, _)) = body.char_indices().skip(1).find(|(_, c)| *c == '+') {
        let r = &body[p + 1..];
        rot = Some(if r == "r5" {
            48
        } else {
            r.parse::<u8>()
                .ok()
                .filter(|n| (1..=15).contains(n))
                .map(|n| n + 48)
                .ok_or_else(|| cx.err(s, format!("bad rotation in `{s}`")))?
        });
        body = &body[..p];
    }
    let src = if let Some(n) = body
        .strip_prefix('r')
        .and_then(|n| n.parse::<u8>().ok())
        .filter(|n| *n <= 5 && body.len() == 2)
    {
        Src::Acc(n)
    } else if let Some((n, is_a)) = regfile_number(body) {
        if n > 31 {
            return Err(cx.err(s, format!("register number out of range in `{s}`")));
        }
        if is_a { Src::RegA(n) } else { Src::RegB(n) }
    } else if let Some(n) = body.strip_prefix("b:") {
        let b = (32..64).find(|r| special_read_b(*r) == Some(n));
        match b {
            Some(b) => Src::Special(None, Some(b)),
            None => return Err(cx.err(s, format!("unknown read `{n}`"))),
        }
    } else if let Some((n, is_a)) = unnamed_address(body) {
        if is_a {
            Src::Special(Some(n), None)
        } else {
            Src::Special(None, Some(n))
        }
    } else if body == "???" {
        return Err(cx.err(s, "`???` read cannot be assembled (write `a40?` / `b40?`)"));
    } else {
        let a = (32..64).find(|r| special_read_a(*r) == Some(body));
        let b = (32..64).find(|r| special_read_b(*r) == Some(body));
        if a.is_some() || b.is_some() {
            Src::Special(a, b)
        } else if let Some(si) = small_imm_code(body) {
            if rot.is_some() && si < 16 || rot.is_some() && si >= 32 {
                return Err(cx.err(s, format!("bad operand `{s}`")));
            }
            match rot {
                // a rotation code read through the B mux: value −16..−1 and its rotation
                Some(r) => {
                    if small_imm_read_value(r) != small_imm_read_value(si) {
                        return Err(cx.err(s, format!("`{s}`: value does not match rotation")));
                    }
                    return Ok(Operand {
                        src: Src::SmallImm(r),
                        rot: Some(r),
                        unpack,
                    });
                }
                None => Src::SmallImm(si),
            }
        } else {
            return Err(cx.err(s, format!("unknown operand `{s}`")));
        }
    };
    Ok(Operand { src, rot, unpack })
}

#[derive(Default)]
struct AluState {
    raddr_a: Option<u8>,
    raddr_b: Option<u8>,
    si: Option<u8>,
    unpack: Option<Unpack>,
    pm_evidence: Option<bool>,
}

impl AluState {
    fn set_si(&mut self, cx: &Ctx, at: &str, si: u8) -> Result<(), AsmError> {
        match self.si {
            Some(x) if x != si => Err(cx.err(at, "two different small immediates / rotations")),
            _ => {
                if self.raddr_b.is_some() {
                    return Err(cx.err(at, "small immediate and a file-B read in one instruction"));
                }
                self.si = Some(si);
                Ok(())
            }
        }
    }
    fn set_a(&mut self, cx: &Ctx, at: &str, r: u8) -> Result<(), AsmError> {
        match self.raddr_a {
            Some(x) if x != r => Err(cx.err(at, "two different file-A reads in one instruction")),
            _ => {
                self.raddr_a = Some(r);
                Ok(())
            }
        }
    }
    fn set_b(&mut self, cx: &Ctx, at: &str, r: u8) -> Result<(), AsmError> {
        if self.si.is_some() {
            return Err(cx.err(at, "small immediate and a file-B read in one instruction"));
        }
        match self.raddr_b {
            Some(x) if x != r => Err(cx.err(at, "two different file-B reads in one instruction")),
            _ => {
                self.raddr_b = Some(r);
                Ok(())
            }
        }
    }
    fn mux(&mut self, cx: &Ctx, text: &str, op: &Operand, is_mul: bool) -> Result<Mux, AsmError> {
        if let Some(r) = op.rot {
            if !is_mul && !matches!(op.src, Src::SmallImm(_)) {
                return Err(cx.err(text, "rotation applies to mul operands only"));
            }
            self.set_si(cx, text, r)?;
        }
        let m = match op.src {
            Src::Acc(n) => Mux::ALL[n as usize],
            Src::RegA(n) => {
                self.set_a(cx, text, n)?;
                Mux::A
            }
            Src::RegB(n) => {
                self.set_b(cx, text, n)?;
                Mux::B
            }
            Src::SmallImm(si) => {
                self.set_si(cx, text, si)?;
                Mux::B
            }
            Src::Special(a, b) => match (a, b) {
                (Some(a), Some(b)) if a == b => {
                    if self.raddr_a.is_none() || self.raddr_a == Some(a) {
                        self.set_a(cx, text, a)?;
                        Mux::A
                    } else {
                        self.set_b(cx, text, b)?;
                        Mux::B
                    }
                }
                (Some(a), _) => {
                    self.set_a(cx, text, a)?;
                    Mux::A
                }
                (_, Some(b)) => {
                    self.set_b(cx, text, b)?;
                    Mux::B
                }
                (None, None) => return Err(cx.err(text, "operand reads no address")),
            },
        };
        if let Some(u) = op.unpack {
            let pm = match m {
                Mux::A => false,
                Mux::R4 => true,
                _ => return Err(cx.err(text, "unpack applies to file-A or r4 operands only")),
            };
            if self.pm_evidence.is_some_and(|p| p != pm) {
                return Err(cx.err(text, "file-A and r4 unpacks in one instruction"));
            }
            if self.unpack.is_some_and(|x| x != u) {
                return Err(cx.err(text, "two different unpacks in one instruction"));
            }
            self.pm_evidence = Some(pm);
            self.unpack = Some(u);
        }
        Ok(m)
    }
}

/// Muxes of the operand slots (add_a, add_b, mul_a, mul_b): operands with a fixed file
/// first, then names both files share with an unpack (file A), then the other shared names
/// in slot order, each taking file A when it is free or reads the same address.
fn assign_muxes(
    cx: &Ctx,
    st: &mut AluState,
    slots: &[Option<(&str, Operand, bool)>; 4],
) -> Result<[Mux; 4], AsmError> {
    let mut muxes = [Mux::R0; 4];
    for pass in 0..3 {
        for (k, slot) in slots.iter().enumerate() {
            if let Some((text, op, is_mul)) = slot {
                let shared = matches!(op.src, Src::Special(Some(x), Some(y)) if x == y);
                let p = if !shared {
                    0
                } else if op.unpack.is_some() {
                    1
                } else {
                    2
                };
                if p == pass {
                    muxes[k] = st.mux(cx, text, op, *is_mul)?;
                }
            }
        }
    }
    Ok(muxes)
}

/// True when `a`'s file-B read of a name both files share (uni, vary, nop, vpm_read,
/// mutex_acq) must be written `b:name` in kiln style: read without the prefix, the
/// assembler ([`assign_muxes`]) would give it file A.
pub fn b_read_needs_prefix(a: &AluInstr) -> bool {
    let small = a.sig == Signal::SmallImm;
    if small || !shared_read_name(a.raddr_b) {
        return false;
    }
    let muxes = [a.add_a, a.add_b, a.mul_a, a.mul_b];
    if !muxes.contains(&Mux::B) {
        return false;
    }
    let operand = |m: Mux| -> Operand {
        let src = match m {
            Mux::A if a.raddr_a < 32 => Src::RegA(a.raddr_a),
            Mux::A if shared_read_name(a.raddr_a) => Src::Special(Some(a.raddr_a), Some(a.raddr_a)),
            Mux::A => Src::Special(Some(a.raddr_a), None),
            Mux::B => Src::Special(Some(a.raddr_b), Some(a.raddr_b)),
            acc => Src::Acc(acc as u8),
        };
        let shows_unpack = (m == Mux::A && !a.w.pm) || (m == Mux::R4 && a.w.pm);
        Operand {
            src,
            rot: None,
            unpack: (shows_unpack && a.unpack != Unpack::None).then_some(a.unpack),
        }
    };
    let add_mov = a.op_add == AddOp::Or && a.add_a == a.add_b;
    let mul_mov = a.op_mul == MulOp::V8min && a.mul_a == a.mul_b;
    let slots = [
        Some(("", operand(a.add_a), false)),
        (!add_mov).then(|| ("", operand(a.add_b), false)),
        Some(("", operand(a.mul_a), true)),
        (!mul_mov).then(|| ("", operand(a.mul_b), true)),
    ];
    let mut st = AluState::default();
    // a `read_a.` prefix (no operand reads file A) claims file A first
    if !muxes.contains(&Mux::A) && a.raddr_a != raddr::NOP {
        st.raddr_a = Some(a.raddr_a);
    }
    let cx = Ctx { line: 0, text: "" };
    match assign_muxes(&cx, &mut st, &slots) {
        Ok(got) => (0..4).any(|k| slots[k].is_some() && got[k] != muxes[k]),
        Err(_) => true,
    }
}

struct OpText<'a> {
    name: &'a str,
    sf: bool,
    cond: Option<Cond>,
    args: Vec<&'a str>,
    whole: &'a str,
}

fn parse_op_text<'a>(cx: &Ctx, s: &'a str) -> Result<OpText<'a>, AsmError> {
    let (head, args) = match s.find(char::is_whitespace) {
        Some(p) => (&s[..p], s[p..].trim()),
        None => (s, ""),
    };
    let mut it = head.split('.');
    let name = it.next().unwrap();
    let mut sf = false;
    let mut cond = None;
    for m in it {
        if m == "sf" {
            sf = true;
        } else {
            cond = Some(parse_cond(cx, m)?);
        }
    }
    Ok(OpText {
        name,
        sf,
        cond,
        args: split_args(args),
        whole: s,
    })
}

fn parse_alu(cx: &Ctx, code: &str) -> Result<Instr, AsmError> {
    let mut a = AluInstr::nop();
    let (add_part, mul_part) = match code.find(';') {
        Some(p) => (code[..p].trim(), Some(code[p + 1..].trim())),
        None => (code.trim(), None),
    };
    // prefixes: signal, unpack.X, read_a.NAME / read_b.NAME
    let mut rest = add_part;
    let mut sig = Signal::None;
    let mut st = AluState::default();
    let mut prefix_unpack = None;
    loop {
        let (tok, after) = match rest.find(char::is_whitespace) {
            Some(p) => (&rest[..p], rest[p..].trim_start()),
            None => (rest, ""),
        };
        if let Some(s) = Signal::ALL
            .iter()
            .find(|s| **s != Signal::None && signal_name(**s) == tok)
        {
            sig = *s;
        } else if let Some(u) = tok.strip_prefix("unpack.") {
            // `unpack.r4.X`: pm = 1 (r4 unpack), `unpack.X`: pm = 0 (file-A unpack)
            let (pm, u) = match u.strip_prefix("r4.") {
                Some(x) => (true, x),
                None => (false, u),
            };
            prefix_unpack = Some((
                Unpack::from_name(u).ok_or_else(|| cx.err(tok, format!("unknown unpack `{u}`")))?,
                pm,
            ));
        } else if let Some(n) = tok.strip_prefix("read_a.") {
            // a file-A read no operand uses: `read_a.uni`, `read_a.ra5`, `read_a.a40?`
            match parse_src(cx, n)? {
                Operand {
                    src: Src::RegA(r) | Src::Special(Some(r), _),
                    rot: None,
                    unpack: None,
                } => st.set_a(cx, tok, r)?,
                _ => return Err(cx.err(tok, format!("`{n}` is not a file-A read"))),
            }
        } else if let Some(n) = tok.strip_prefix("read_b.") {
            // a file-B read or small immediate no operand uses: `read_b.rb5`, `read_b.-3`
            match parse_src(cx, n)? {
                Operand {
                    src: Src::RegB(r) | Src::Special(_, Some(r)),
                    rot: None,
                    unpack: None,
                } => st.set_b(cx, tok, r)?,
                Operand {
                    src: Src::SmallImm(si),
                    rot: None,
                    unpack: None,
                } if si < 48 => st.set_si(cx, tok, si)?,
                _ => return Err(cx.err(tok, format!("`{n}` is not a file-B read"))),
            }
        } else {
            break;
        }
        rest = after;
        if rest.is_empty() {
            break;
        }
    }
    // `nop` alone
    let add = if rest.is_empty() || (rest == "nop" && mul_part.is_none()) {
        None
    } else {
        Some(parse_op_text(cx, rest)?)
    };
    let mul = match mul_part {
        Some(m) => Some(parse_op_text(cx, m)?),
        None => None,
    };
    let mut dsts: [Option<Dst>; 2] = [None, None];
    let mut slots: [Option<(&str, Operand, bool)>; 4] = [None, None, None, None];
    let (mut add_mov, mut mul_mov) = (false, false);
    // add op
    if let Some(op) = &add {
        let (opcode, is_mov) = match op.name {
            "mov" => (AddOp::Or, true),
            "???" => {
                return Err(cx.err(
                    op.name,
                    "undefined add opcode `???` cannot be assembled (write `op_addN`)",
                ));
            }
            n => match n.strip_prefix("op_add").and_then(|x| x.parse::<u8>().ok()) {
                Some(c) if c < 32 => (AddOp::from_bits(c), false),
                _ => (
                    AddOp::from_name(n)
                        .ok_or_else(|| cx.err(n, format!("unknown add op `{n}`")))?,
                    false,
                ),
            },
        };
        let need = if is_mov { 2 } else { 3 };
        if op.args.len() != need {
            return Err(cx.err(op.whole, format!("`{}` takes {} operands", op.name, need)));
        }
        a.op_add = opcode;
        a.w.sf |= op.sf && opcode != AddOp::Nop;
        if op.sf && opcode == AddOp::Nop {
            return Err(cx.err(op.whole, "`.sf` on an add nop goes on the mul op"));
        }
        a.w.cond_add = op.cond.unwrap_or(if opcode == AddOp::Nop {
            Cond::Never
        } else {
            Cond::Always
        });
        dsts[0] = Some(parse_dst(cx, op.args[0], false)?);
        slots[0] = Some((op.args[1], parse_src(cx, op.args[1])?, false));
        if !is_mov {
            slots[1] = Some((op.args[2], parse_src(cx, op.args[2])?, false));
        }
        add_mov = is_mov;
    }
    if let Some(op) = &mul {
        let (opcode, is_mov) = match op.name {
            "mov" => (MulOp::V8min, true),
            n => (
                MulOp::from_name(n).ok_or_else(|| cx.err(n, format!("unknown mul op `{n}`")))?,
                false,
            ),
        };
        let need = if is_mov { 2 } else { 3 };
        if op.args.len() != need {
            return Err(cx.err(op.whole, format!("`{}` takes {} operands", op.name, need)));
        }
        a.op_mul = opcode;
        if op.sf {
            if a.op_add != AddOp::Nop {
                return Err(cx.err(op.whole, "`.sf` goes on the add op unless it is nop"));
            }
            a.w.sf = true;
        }
        a.w.cond_mul = op.cond.unwrap_or(if opcode == MulOp::Nop {
            Cond::Never
        } else {
            Cond::Always
        });
        dsts[1] = Some(parse_dst(cx, op.args[0], false)?);
        slots[2] = Some((op.args[1], parse_src(cx, op.args[1])?, true));
        if !is_mov {
            slots[3] = Some((op.args[2], parse_src(cx, op.args[2])?, true));
        }
        mul_mov = is_mov;
    }
    let muxes = assign_muxes(cx, &mut st, &slots)?;
    if add.is_some() {
        a.add_a = muxes[0];
        a.add_b = if add_mov { muxes[0] } else { muxes[1] };
    }
    if mul.is_some() {
        a.mul_a = muxes[2];
        a.mul_b = if mul_mov { muxes[2] } else { muxes[3] };
    }
    let da = dsts[0].take().unwrap_or(Dst {
        waddr: waddr::NOP,
        file: None,
        pack: None,
        cond: None,
    });
    let dm = dsts[1].take().unwrap_or(Dst {
        waddr: waddr::NOP,
        file: None,
        pack: None,
        cond: None,
    });
    a.w.waddr_add = da.waddr;
    a.w.waddr_mul = dm.waddr;
    let mut add_file = da.file;
    let mut mul_file = dm.file;
    let pack_pm = apply_packs(
        cx,
        code,
        &mut a.w,
        &da,
        &dm,
        &mut add_file,
        &mut mul_file,
        st.pm_evidence == Some(true),
    )?;
    if let (Some(p), Some(e)) = (pack_pm, st.pm_evidence) {
        if p != e {
            return Err(cx.err(code, "pack and unpack disagree on the pm bit"));
        }
    }
    a.w.pm = pack_pm.or(st.pm_evidence).unwrap_or(false);
    if let Some((u, pm)) = prefix_unpack {
        if st.unpack.is_some() {
            return Err(cx.err(code, "unpack given twice"));
        }
        if a.w.pm != pm {
            if pack_pm.is_some() || st.pm_evidence.is_some() {
                return Err(cx.err(
                    code,
                    "the unpack prefix and the pack disagree on the pm bit",
                ));
            }
            a.w.pm = pm;
        }
        st.unpack = Some(u);
    }
    a.unpack = st.unpack.unwrap_or(Unpack::None);
    a.w.ws = side_constraints(cx, code, add_file, mul_file)?.unwrap_or(false);
    a.raddr_a = st.raddr_a.unwrap_or(raddr::NOP);
    if let Some(si) = st.si {
        a.sig = Signal::SmallImm;
        a.raddr_b = si;
        if sig != Signal::None && sig != Signal::SmallImm {
            return Err(cx.err(
                code,
                "a small immediate cannot be combined with another signal",
            ));
        }
    } else if sig == Signal::SmallImm {
        if st.raddr_b.is_some() {
            return Err(cx.err(code, "small immediate and a file-B read in one instruction"));
        }
        a.sig = sig;
        a.raddr_b = 0;
    } else {
        a.raddr_b = st.raddr_b.unwrap_or(raddr::NOP);
        a.sig = sig;
    }
    Ok(Instr::Alu(a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::disasm::{Style, disasm};

    #[test]
    fn mesa_text_examples() {
        for w in [
            0x100009e7009e7000u64,
            0x1002082715827d80,
            0xd00208670c9c41c0,
            0xe002122700000014,
            0x10020e270c9e7080,
        ] {
            let t = disasm(w, Style::Mesa);
            assert_eq!(assemble_line(&t).unwrap(), normalize(w), "{t}");
        }
    }

    #[test]
    fn labels_and_comments() {
        let p = assemble(
            "start: load_imm r1, 3   # counter\n\
             loop:\n  sub.sf r1, r1, 1 ; nop nop, r0, r0 // decrement\n\
             branch.any_zc.rel loop\n nop\n nop\n nop\n\
             branch start\n",
        )
        .unwrap();
        assert_eq!(p.len(), 7);
        match decode(p[2]) {
            Instr::Branch(b) => {
                assert!(b.rel);
                assert_eq!(b.imm, 8 * (1 - (2 + 4)));
                assert_eq!(b.cond, BranchCond::AnyZc);
            }
            i => panic!("{i:?}"),
        }
        match decode(p[6]) {
            Instr::Branch(b) => assert_eq!((b.rel, b.imm), (false, 0)),
            i => panic!("{i:?}"),
        }
    }

    #[test]
    fn errors_have_positions() {
        let e = assemble("nop\n  fadd r0, r1, bogus ; nop nop, r0, r0").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.column, 16);
        assert!(assemble("branch nowhere").is_err());
        assert!(assemble("x: nop\nx: nop").is_err());
        assert!(assemble("add r0, ra1, ra2 ; nop nop, r0, r0").is_err());
        assert!(assemble("load_imm r0, nop, 0x1ffffffff").is_err());
    }
    #[test]
    fn malformed_operands_are_errors_with_positions() {
        for (text, line, column, msg) in [
            ("fadd r0, , r1", 1, 9, "missing operand"),
            ("nop\nmov r0, é+1", 2, 9, "unknown operand `é+1`"),
            ("nop nop, r0, r0 ; fmul r1, a56?,", 1, 33, "missing operand"),
            ("mov r0, .8a", 1, 9, "missing operand"),
            ("mov r0, ra5+€", 1, 9, "bad rotation"),
            ("mov é?, r0", 1, 5, "unknown destination `é?`"),
            ("mov ?, r0", 1, 5, "unknown destination `?`"),
            ("fadd ra40, r0, r1", 1, 6, "out of range"),
            ("mov r0, rb99999999999", 1, 9, "out of range"),
            (
                "load_imm r0, nop, --9223372036854775808",
                1,
                19,
                "bad immediate",
            ),
            ("load_imm r0, nop, 0x-5", 1, 19, "bad immediate"),
            (
                "load_imm r0, nop, 99999999999999999999999",
                1,
                19,
                "out of 32-bit range",
            ),
            (
                "load_imm r0, nop, -0x100000000",
                1,
                19,
                "out of 32-bit range",
            ),
            ("branch 99999999999", 1, 8, "out of range"),
            ("branch 0x-5", 1, 8, "unknown label"),
            ("éé fadd r0, r1, bogus", 1, 1, "unknown add op `éé`"),
            ("  é mov r0, é", 1, 3, "unknown add op `é`"),
            ("mov b:ra5, r0", 1, 7, "not written through file B"),
            ("read_a.rb5 nop", 1, 1, "not a file-A read"),
            ("read_b.-8+8 nop", 1, 1, "not a file-B read"),
            ("branch.raddr_a3 0+ra4", 1, 17, "disagree"),
            ("branch.unused16 0", 1, 8, "unknown branch modifier"),
        ] {
            let e = assemble(text).unwrap_err();
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
            assert!(e.message.contains(msg), "{text:?}: {e}");
        }
    }
    #[test]
    fn hidden_field_syntax() {
        let alu = |t: &str| match decode(assemble_line(t).unwrap()) {
            Instr::Alu(a) => a,
            i => panic!("{t}: {i:?}"),
        };
        let a = alu("fadd b:r0, r1, r2 ; nop nop, r0, r0");
        assert!(a.w.ws && a.w.waddr_add == waddr::R0);
        let a = alu("nop.zs nop, r0, r0 ; nop.always nop, r0, r0");
        assert_eq!((a.w.cond_add, a.w.cond_mul), (Cond::Zs, Cond::Always));
        let a = alu("read_a.ra5 read_b.qpu nop");
        assert!(a.raddr_a == 5 && a.raddr_b == 38);
        assert!(assemble_line("read_b.elem nop").is_err());
        let a = alu("read_a.elem read_b.rb7 nop");
        assert!(a.raddr_a == 38 && a.raddr_b == 7);
        let a = alu("sig_small_imm read_b.-3 nop");
        assert!(a.sig == Signal::SmallImm && a.raddr_b == 29);
        let a = alu("mov r0, r1 ; mov r2.pack0, r3");
        assert!(a.w.pm && a.w.pack == 0);
        let a = alu("mov rev_flag, r0 ; mov ms_flags, r1");
        assert!(a.w.ws && a.w.waddr_add == 42 && a.w.waddr_mul == 42);
        let a = alu("fadd r0, uni, b:uni ; nop nop, r0, r0");
        assert!((a.add_a, a.add_b, a.raddr_a, a.raddr_b) == (Mux::A, Mux::B, 32, 32));
        match decode(assemble_line("branch.unused5.raddr_a3 16, b:nop, nop").unwrap()) {
            Instr::Branch(b) => assert_eq!((b.unused, b.raddr_a, b.reg, b.ws), (5, 3, false, true)),
            i => panic!("{i:?}"),
        }
        match decode(assemble_line("sacq nop, nop.always, 3").unwrap()) {
            Instr::Semaphore(s) => assert_eq!((s.w.cond_mul, s.number), (Cond::Always, 3)),
            i => panic!("{i:?}"),
        }
    }
}
