//! What the assembly text calls things, for the disassembler and the assembler alike: names of
//! read and write addresses and signals (Mesa's `vc4_qpu_disasm.c` tables, with kiln's names
//! where Mesa's are ambiguous), and the rules for which fields a text shows.

use super::fields::*;
use super::instr::*;

/// Names of read addresses 32–51 in file A (Mesa `special_read_a`).
pub fn special_read_a(raddr: u8) -> Option<&'static str> {
    Some(match raddr {
        32 => "uni",
        35 => "vary",
        38 => "elem",
        39 => "nop",
        41 => "x_pix",
        42 => "ms_flags",
        48 => "vpm_read",
        49 => "vpm_ld_busy",
        50 => "vpm_ld_wait",
        51 => "mutex_acq",
        _ => return None,
    })
}

/// Names of read addresses 32–51 in file B (Mesa `special_read_b`).
pub fn special_read_b(raddr: u8) -> Option<&'static str> {
    Some(match raddr {
        32 => "uni",
        35 => "vary",
        38 => "qpu",
        39 => "nop",
        41 => "y_pix",
        42 => "rev_flag",
        48 => "vpm_read",
        49 => "vpm_st_busy",
        50 => "vpm_st_wait",
        51 => "mutex_acq",
        _ => return None,
    })
}

/// Names of write addresses 32–63 (Mesa `special_write` with the A-file overrides).
pub fn special_write(waddr: u8, is_a: bool) -> Option<&'static str> {
    if is_a {
        match waddr {
            41 => return Some("quad_x"),
            49 => return Some("vr_setup"),
            50 => return Some("vr_addr"),
            _ => {}
        }
    }
    Some(match waddr {
        32 => "r0",
        33 => "r1",
        34 => "r2",
        35 => "r3",
        36 => "tmu_noswap",
        37 => "r5",
        38 => "host_int",
        39 => "nop",
        40 => "uniforms_addr",
        41 => "quad_y",
        42 => "ms_flags",
        43 => "tlb_stencil_setup",
        44 => "tlb_z",
        45 => "tlb_color_ms",
        46 => "tlb_color_all",
        48 => "vpm",
        49 => "vw_setup",
        50 => "vw_addr",
        51 => "mutex_release",
        52 => "sfu_recip",
        53 => "sfu_recipsqrt",
        54 => "sfu_exp",
        55 => "sfu_log",
        56 => "tmu0_s",
        57 => "tmu0_t",
        58 => "tmu0_r",
        59 => "tmu0_b",
        60 => "tmu1_s",
        61 => "tmu1_t",
        62 => "tmu1_r",
        63 => "tmu1_b",
        _ => return None,
    })
}

/// Mesa's signal prefixes for sig 0–13 (sig 1 prints nothing).
pub fn signal_name(s: Signal) -> &'static str {
    [
        "sig_brk",
        "",
        "sig_switch",
        "sig_end",
        "sig_wait_score",
        "sig_unlock_score",
        "sig_thread_switch",
        "sig_coverage_load",
        "sig_color_load",
        "sig_color_load_end",
        "load_tmu0",
        "load_tmu1",
        "sig_alpha_mask_load",
        "sig_small_imm",
    ][s as usize]
}

/// Read addresses whose read has an effect (pops or waits) even when no mux uses the value.
pub fn read_has_side_effect(raddr: u8) -> bool {
    matches!(raddr, 32 | 35 | 48 | 50 | 51)
}

/// Read addresses with the same name in both files (Mesa `special_read_a/b`).
pub fn shared_read_name(raddr: u8) -> bool {
    matches!(raddr, 32 | 35 | 39 | 48 | 51)
}

/// True when the write address depends on ws for its meaning or its name (`a47?`/`b47?`).
pub fn waddr_uses_ws(w: u8) -> bool {
    w < 32 || matches!(w, 37 | 41 | 42 | 47 | 49 | 50)
}

/// Kiln-style name of write address 32–63 in one file: Mesa's name, except that r5 is
/// `r5quad` (A) / `r5rep` (B) and address 42 through file B is `rev_flag`.
pub fn kiln_write_name(waddr: u8, is_a: bool) -> Option<&'static str> {
    match (waddr, is_a) {
        (37, true) => Some("r5quad"),
        (37, false) => Some("r5rep"),
        (42, false) => Some("rev_flag"),
        _ => special_write(waddr, is_a),
    }
}

/// True when ws is shown by nothing else in the text (no destination name depends on it and
/// no pm = 0 pack places a destination in file A): kiln style then writes `b:` on the add
/// destination.
pub fn ws_hidden(w: &WriteFields) -> bool {
    w.ws && !waddr_uses_ws(w.waddr_add) && !waddr_uses_ws(w.waddr_mul) && (w.pm || w.pack == 0)
}

/// True when some operand of `a` shows (consumes) the unpack field.
pub fn unpack_consumed(a: &AluInstr) -> bool {
    let want = if a.w.pm { Mux::R4 } else { Mux::A };
    [a.add_a, a.add_b, a.mul_a, a.mul_b].contains(&want)
}

/// True when the mul destination's name shows that it is in file A (`raN`, `quad_x`,
/// `vr_setup`, `vr_addr`, `r5quad`, the unnamed `a47?`).
pub fn mul_dst_names_a(w: &WriteFields) -> bool {
    w.ws && waddr_uses_ws(w.waddr_mul)
}

/// Whether Mesa's name of a pm = 1 mul pack (codes 3–7) reads back as pm = 1: it does unless
/// the mul destination is named in file A (then the same name means a pm = 0 pack) and no
/// r4 operand shows the pm = 1 unpack.
pub fn pm1_pack_evident(w: &WriteFields, r4_unpack_shown: bool) -> bool {
    r4_unpack_shown || !mul_dst_names_a(w)
}
