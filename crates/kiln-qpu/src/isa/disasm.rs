//! Disassembler whose text follows Mesa's `vc4_qpu_disasm.c` exactly ([`Style::Mesa`]), plus
//! the kiln style ([`Style::Kiln`]) that is identical wherever Mesa's text is complete and adds
//! what Mesa leaves out, so that the kiln text assembles back to the same word. What it adds is
//! listed in `docs/vc4.md` ("Disassembly").

use super::fields::*;
use super::instr::*;
use super::names::*;

/// Text style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Byte-identical to Mesa's `vc4_qpu_disasm`.
    Mesa,
    /// Mesa's text plus the fields Mesa does not show: lossless.
    Kiln,
}

/// glibc `printf("%.*f")` of a double: NaN as `nan`/`-nan`, infinities as `inf`/`-inf`.
pub fn c_fixed(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    format!("{x:.prec$}")
}

/// Disassembles one instruction word.
pub fn disasm(word: u64, style: Style) -> String {
    let mut out = String::new();
    match decode(word) {
        Instr::Branch(b) => branch(&mut out, &b, style),
        Instr::LoadImm(l) => {
            out.push_str("load_imm");
            if style == Style::Kiln {
                match l.mode {
                    LoadImmMode::Full32 => {}
                    LoadImmMode::PerElemSigned => out.push_str(".pes"),
                    LoadImmMode::PerElemUnsigned => out.push_str(".peu"),
                    LoadImmMode::Reserved(n) => out.push_str(&format!(".mode{n}")),
                }
                if l.w.sf {
                    out.push_str(".sf");
                }
            }
            out.push(' ');
            imm_dsts(&mut out, &l.w, style);
            out.push_str(&format!(
                "0x{:08x} ({})",
                l.imm,
                c_fixed(f32::from_bits(l.imm) as f64, 6)
            ));
        }
        Instr::Semaphore(s) => {
            if style == Style::Mesa {
                out.push_str("load_imm ");
                imm_dsts(&mut out, &s.w, style);
                let imm = s.imm();
                out.push_str(&format!(
                    "0x{imm:08x} ({})",
                    c_fixed(f32::from_bits(imm) as f64, 6)
                ));
            } else {
                out.push_str(if s.acquire { "sacq" } else { "srel" });
                if s.w.sf {
                    out.push_str(".sf");
                }
                out.push(' ');
                imm_dsts(&mut out, &s.w, style);
                let v = s.imm() & !0x10;
                if v < 16 {
                    out.push_str(&format!("{v}"));
                } else {
                    out.push_str(&format!("0x{v:08x}"));
                }
            }
        }
        Instr::Alu(a) => alu(&mut out, &a, style),
    }
    out
}

fn branch(out: &mut String, b: &Branch, style: Style) {
    out.push_str("branch");
    match b.cond {
        BranchCond::Always => {}
        c => match c.name() {
            Some(n) => {
                out.push('.');
                out.push_str(n);
            }
            None => {
                if style == Style::Mesa {
                    out.push_str("???");
                } else {
                    out.push_str(&format!(".cond{}", c.bits()));
                }
            }
        },
    }
    if style == Style::Kiln {
        if b.rel {
            out.push_str(".rel");
        }
        if b.unused != 0 {
            out.push_str(&format!(".unused{}", b.unused));
        }
        if !b.reg && b.raddr_a != 0 {
            out.push_str(&format!(".raddr_a{}", b.raddr_a));
        }
    }
    out.push_str(&format!(" {}", b.imm));
    if style == Style::Mesa {
        return;
    }
    if b.reg {
        out.push_str(&format!("+ra{}", b.raddr_a));
    }
    {
        let w = WriteFields {
            ws: b.ws,
            waddr_add: b.waddr_add,
            waddr_mul: b.waddr_mul,
            ..WriteFields::NONE
        };
        out.push_str(", ");
        dst(out, &w, false, style, false, false);
        out.push_str(", ");
        dst(out, &w, true, style, false, false);
    }
}

/// A write condition's suffix. Kiln style shows a condition Mesa leaves out (on a `nop`
/// op or destination, where the normal value is never), naming always `.always`.
fn cond_text(out: &mut String, c: Cond, mesa_shows: bool, style: Style) {
    if mesa_shows {
        out.push_str(c.suffix());
    } else if style == Style::Kiln && c != Cond::Never {
        out.push_str(if c == Cond::Always {
            ".always"
        } else {
            c.suffix()
        });
    }
}

fn imm_dsts(out: &mut String, w: &WriteFields, style: Style) {
    dst(out, w, false, style, false, false);
    let shows = w.waddr_add != waddr::NOP || (style == Style::Kiln && w.sf);
    cond_text(out, w.cond_add, shows, style);
    out.push_str(", ");
    dst(out, w, true, style, false, false);
    cond_text(out, w.cond_mul, w.waddr_mul != waddr::NOP, style);
    out.push_str(", ");
}

/// Mesa `print_alu_dst`, with the kiln-style names. `pm_shown`: an unpack shows pm.
fn dst(
    out: &mut String,
    w: &WriteFields,
    is_mul: bool,
    style: Style,
    r4_unpack: bool,
    pm_shown: bool,
) {
    let is_a = is_mul == w.ws;
    let waddr = if is_mul { w.waddr_mul } else { w.waddr_add };
    let file = if is_a { "a" } else { "b" };
    let kiln = style == Style::Kiln;
    if kiln && !is_mul && ws_hidden(w) {
        out.push_str("b:");
    }
    let name = if kiln {
        kiln_write_name(waddr, is_a)
    } else {
        special_write(waddr, is_a)
    };
    if waddr <= 31 {
        out.push_str(&format!("r{file}{waddr}"));
    } else if let Some(n) = name {
        out.push_str(n);
    } else {
        out.push_str(&format!("{file}{waddr}?"));
    }
    if kiln && is_mul && w.pm && w.pack == 0 && !pm_shown {
        out.push_str(".pack0");
    } else if is_mul && w.pm {
        match PACK_MUL_NAMES[w.pack as usize] {
            Some(n) if style == Style::Mesa || w.pack == 0 || pm1_pack_evident(w, r4_unpack) => {
                out.push_str(n)
            }
            Some(_) => out.push_str(&format!(".pack{}", w.pack)),
            None if style == Style::Mesa => out.push_str("???"),
            None => out.push_str(&format!(".pack{}", w.pack)),
        }
    } else if is_a && !w.pm {
        if style == Style::Kiln && is_mul && (3..=7).contains(&w.pack) && !mul_dst_names_a(w) {
            out.push_str(&format!(".apack{}", w.pack));
        } else {
            out.push_str(PACK_A_NAMES[w.pack as usize]);
        }
    }
}

fn rot_suffix(si: u8) -> String {
    if si == 48 {
        "+r5".to_string()
    } else {
        format!("+{}", si - 48)
    }
}

/// Mesa `print_alu_src`, with the kiln-style additions.
fn src(out: &mut String, a: &AluInstr, mux: Mux, is_mul: bool, style: Style) {
    let is_a = mux != Mux::B;
    let has_si = a.sig == Signal::SmallImm;
    let si = a.raddr_b;
    let rotating = has_si && si >= 48 && style == Style::Kiln;
    if mux.is_accumulator() {
        out.push_str(&format!("r{}", mux as u8));
        if has_si && is_mul && si >= 49 && style == Style::Mesa {
            out.push_str(&format!("+{}", si - 48));
        }
    } else if !is_a && has_si {
        match si {
            0..=47 => out.push_str(&small_imm_text(si)),
            _ if style == Style::Mesa => out.push_str(&format!("<bad imm {si}>")),
            _ => {
                out.push_str(&format!("{}", si as i32 - 64));
                out.push_str(&rot_suffix(si));
            }
        }
    } else {
        let raddr = if is_a { a.raddr_a } else { a.raddr_b };
        if raddr <= 31 {
            out.push_str(&format!("r{}{raddr}", if is_a { "a" } else { "b" }));
        } else {
            let n = if is_a {
                special_read_a(raddr)
            } else {
                special_read_b(raddr)
            };
            match n {
                Some(n) => {
                    if style == Style::Kiln && !is_a && super::asm::b_read_needs_prefix(a) {
                        out.push_str("b:");
                    }
                    out.push_str(n)
                }
                None if style == Style::Mesa => out.push_str("???"),
                None => out.push_str(&format!("{}{raddr}?", if is_a { "a" } else { "b" })),
            }
        }
    }
    if rotating && is_mul && !(mux == Mux::B) {
        out.push_str(&rot_suffix(si));
    }
    if ((mux == Mux::A && !a.w.pm) || (mux == Mux::R4 && a.w.pm)) && a.unpack != Unpack::None {
        out.push('.');
        out.push_str(a.unpack.name());
    }
}

/// Kiln-style text of a read address as an operand: `ra5`, `uni`, `a40?`.
fn read_name(raddr: u8, is_a: bool) -> String {
    let file = if is_a { "a" } else { "b" };
    if raddr <= 31 {
        return format!("r{file}{raddr}");
    }
    let n = if is_a {
        special_read_a(raddr)
    } else {
        special_read_b(raddr)
    };
    match n {
        Some(n) => n.to_string(),
        None => format!("{file}{raddr}?"),
    }
}

/// Text of a small immediate 0–47 as a value (`3`, `-16`, `1.0`, `0.500000`).
fn small_imm_text(si: u8) -> String {
    match si {
        0..=15 => format!("{si}"),
        16..=31 => format!("{}", si as i32 - 32),
        32..=39 => c_fixed((1u32 << (si - 32)) as f64, 1),
        _ => c_fixed((1.0f32 / (1u32 << (48 - si.min(47))) as f32) as f64, 6),
    }
}

fn alu(out: &mut String, a: &AluInstr, style: Style) {
    if a.sig != Signal::None {
        out.push_str(signal_name(a.sig));
        out.push(' ');
    }
    if style == Style::Kiln {
        if a.unpack != Unpack::None && !unpack_consumed(a) {
            let file = if a.w.pm { "r4." } else { "" };
            out.push_str(&format!("unpack.{file}{} ", a.unpack.name()));
        }
        // reads no operand uses: side effects (uni, vpm_read, …) and unusual values
        let muxes = [a.add_a, a.add_b, a.mul_a, a.mul_b];
        if !muxes.contains(&Mux::A) && a.raddr_a != raddr::NOP {
            out.push_str(&format!("read_a.{} ", read_name(a.raddr_a, true)));
        }
        if !muxes.contains(&Mux::B) {
            if a.sig != Signal::SmallImm && a.raddr_b != raddr::NOP {
                out.push_str(&format!("read_b.{} ", read_name(a.raddr_b, false)));
            } else if a.sig == Signal::SmallImm && (1..48).contains(&a.raddr_b) {
                out.push_str(&format!("read_b.{} ", small_imm_text(a.raddr_b)));
            }
        }
    }
    let r4_unpack = a.w.pm
        && a.unpack != Unpack::None
        && [a.add_a, a.add_b, a.mul_a, a.mul_b].contains(&Mux::R4);
    // add op
    let is_mov = a.op_add == AddOp::Or && a.add_a == a.add_b;
    if is_mov {
        out.push_str("mov");
    } else {
        match a.op_add.name() {
            Some(n) => out.push_str(n),
            None if style == Style::Mesa => out.push_str("???"),
            None => out.push_str(&format!("op_add{}", a.op_add.bits())),
        }
    }
    if a.w.sf && a.op_add != AddOp::Nop {
        out.push_str(".sf");
    }
    cond_text(out, a.w.cond_add, a.op_add != AddOp::Nop, style);
    out.push(' ');
    let pm_shown = a.unpack != Unpack::None;
    dst(out, &a.w, false, style, r4_unpack, pm_shown);
    out.push_str(", ");
    src(out, a, a.add_a, false, style);
    if !is_mov {
        out.push_str(", ");
        src(out, a, a.add_b, false, style);
    }
    out.push_str(" ; ");
    // mul op
    let is_mov = a.op_mul == MulOp::V8min && a.mul_a == a.mul_b;
    out.push_str(if is_mov { "mov" } else { a.op_mul.name() });
    if a.w.sf && a.op_add == AddOp::Nop {
        out.push_str(".sf");
    }
    cond_text(out, a.w.cond_mul, a.op_mul != MulOp::Nop, style);
    out.push(' ');
    dst(out, &a.w, true, style, r4_unpack, pm_shown);
    out.push_str(", ");
    src(out, a, a.mul_a, true, style);
    if !is_mov {
        out.push_str(", ");
        src(out, a, a.mul_b, true, style);
    }
}

/// Disassembles a program, one instruction per line.
pub fn disasm_program(words: &[u64], style: Style) -> String {
    let mut s = String::new();
    for &w in words {
        s.push_str(&disasm(w, style));
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_fixed_matches_printf() {
        assert_eq!(c_fixed(0.0, 6), "0.000000");
        assert_eq!(c_fixed(-0.0, 6), "-0.000000");
        assert_eq!(c_fixed(f64::NAN, 6), "nan");
        assert_eq!(c_fixed(-f64::NAN, 6), "-nan");
        assert_eq!(c_fixed(1.0 / 256.0, 6), "0.003906");
        assert_eq!(c_fixed(128.0, 1), "128.0");
    }

    #[test]
    fn nop() {
        assert_eq!(
            disasm(0x100009e7009e7000, Style::Mesa),
            "nop nop, r0, r0 ; nop nop, r0, r0"
        );
    }
}
