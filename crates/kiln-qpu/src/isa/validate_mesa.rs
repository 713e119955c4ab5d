//! Mesa's verdict: the checks of Mesa's `vc4_qpu_validate.c` in its order, on raw words, with
//! its conventions (linear, conditions ignored, loops that stop at `num_inst - 1`, the thread-end
//! delay-slot loop over `i` and `i + 1`, words outside the program read as 0). It answers "would
//! Mesa's debug build abort on this code, and with which message"; [`super::validate`] is kiln's
//! own validator.

use super::disasm::{Style, disasm};

/// Mesa's first failure: the instruction index (or `None` for the assertion) and the message
/// `vc4_qpu_validate: <reason>: <Mesa disassembly>` it prints before aborting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MesaReject {
    pub index: Option<usize>,
    pub message: String,
}

fn f(w: u64, lo: u32, bits: u32) -> u32 {
    ((w >> lo) & ((1 << bits) - 1)) as u32
}
fn sig(w: u64) -> u32 {
    f(w, 60, 4)
}
fn waddr_add(w: u64) -> u32 {
    f(w, 38, 6)
}
fn waddr_mul(w: u64) -> u32 {
    f(w, 32, 6)
}
fn raddr_a(w: u64) -> u32 {
    f(w, 18, 6)
}
fn raddr_b(w: u64) -> u32 {
    f(w, 12, 6)
}
fn writes_reg(w: u64, r: u32) -> bool {
    waddr_add(w) == r || waddr_mul(w) == r
}
fn reads(w: u64, r: u32, check_a: bool, check_b: bool) -> bool {
    if sig(w) == 15 || sig(w) == 14 {
        return false;
    }
    (0..4).any(|k| {
        let mux = f(w, 9 - 3 * k, 3);
        (check_a && mux == 6 && raddr_a(w) == r)
            || (check_b && sig(w) != 13 && mux == 7 && raddr_b(w) == r)
    })
}
fn writes_sfu(w: u64) -> bool {
    (52..=55).any(|r| writes_reg(w, r))
}
fn is_tlb(w: u64) -> bool {
    [waddr_add(w), waddr_mul(w)]
        .iter()
        .any(|x| matches!(x, 44..=46))
        || sig(w) == 8
        || sig(w) == 4
}
fn sf_accesses(w: u64) -> u32 {
    let specials = [45, 46, 44, 56, 57, 58, 59, 60, 61, 62, 63, 52, 53, 54, 55];
    let mut n = 0;
    for s in specials {
        n += (waddr_add(w) == s) as u32 + (waddr_mul(w) == s) as u32;
    }
    n += (raddr_a(w) == 51) as u32;
    n += (raddr_b(w) == 51 && sig(w) != 13) as u32;
    n += matches!(sig(w), 8..=11) as u32;
    n
}

/// Runs Mesa's checks; `Ok(())` = Mesa accepts.
pub fn validate_mesa(words: &[u64]) -> Result<(), MesaReject> {
    let n = words.len() as i64;
    let at = |i: i64| -> u64 {
        if (0..n).contains(&i) {
            words[i as usize]
        } else {
            0
        }
    };
    let fail = |i: i64, reason: &str| -> Result<(), MesaReject> {
        Err(MesaReject {
            index: Some(i as usize),
            message: format!("vc4_qpu_validate: {reason}: {}", disasm(at(i), Style::Mesa)),
        })
    };
    let mut scoreboard_locked = false;
    let mut threaded = false;
    for i in 0..n {
        let w = at(i);
        if sig(w) != 3 {
            if is_tlb(w) {
                scoreboard_locked = true;
            }
            if sig(w) == 2 || sig(w) == 6 {
                threaded = true;
            }
            continue;
        }
        if waddr_add(w) < 32 || waddr_mul(w) < 32 {
            return fail(i, "write to phys reg in thread end");
        }
        if is_tlb(w) && !scoreboard_locked {
            return fail(i, "implicit sb wait in program end");
        }
        if i + 2 > n {
            return Err(MesaReject {
                index: None,
                message: "vc4_qpu_validate.c:159: vc4_qpu_validate: Assertion `i + 2 <= num_inst' failed.".into(),
            });
        }
        for j in i..i + 2 {
            let x = at(j);
            if writes_reg(x, 48)
                || reads(x, 35, true, true)
                || reads(x, 32, true, true)
                || reads(x, 48, true, true)
            {
                return fail(j, "last 3 instructions using fixed functions");
            }
            if writes_reg(x, 14) || reads(x, 14, true, true) {
                return fail(j, "last 3 instructions must not use r14");
            }
        }
        if writes_reg(at(i + 2), 44) {
            return fail(i + 2, "final instruction doing Z write");
        }
    }
    for i in 0..2 {
        if is_tlb(at(i)) {
            return fail(i, "sb wait in first two insts");
        }
    }
    let mut last_noswap = -10i64;
    for i in 0..n {
        let w = at(i);
        if i - last_noswap <= 3 && (writes_reg(w, 56) || writes_reg(w, 60)) {
            return fail(i, "TMU write too soon after TMU_NOSWAP");
        }
        if writes_reg(w, 36) {
            last_noswap = i;
        }
    }
    for i in 0..n - 1 {
        let w = at(i);
        let (wa, wb) = if w & (1 << 44) != 0 {
            (waddr_mul(w), waddr_add(w))
        } else {
            (waddr_add(w), waddr_mul(w))
        };
        if (wa < 32 && reads(at(i + 1), wa, true, false))
            || (wb < 32 && reads(at(i + 1), wb, false, true))
        {
            return fail(i + 1, "Reads physical reg too soon after write");
        }
    }
    let mut last_sfu = -10i64;
    for i in 0..n - 1 {
        let w = at(i);
        if i - last_sfu <= 2 && (writes_sfu(w) || matches!(sig(w), 10 | 11 | 8)) {
            return fail(i, "R4 write too soon after SFU write");
        }
        if writes_sfu(w) {
            last_sfu = i;
        }
    }
    for i in 0..n - 1 {
        let w = at(i);
        if sig(w) == 13 && raddr_b(w) >= 48 {
            let (ma, mb) = (f(w, 3, 3), f(w, 0, 3));
            if ma > 3 || mb > 3 {
                return fail(i, "MUL rotate using non-accumulator input");
            }
            if raddr_b(w) == 48 && writes_reg(at(i - 1), 37) {
                return fail(i, "vector rotate by r5 immediately after r5 write");
            }
            if writes_reg(at(i - 1), 32 + ma) || writes_reg(at(i - 1), 32 + mb) {
                return fail(i, "vector rotate of value written in previous instruction");
            }
        }
    }
    for i in 0..n - 1 {
        let w = at(i);
        if writes_reg(w, 44)
            && (reads(at(i + 1), 42, true, false) || reads(at(i + 2), 42, true, false))
        {
            return fail(i, "TLB Z write followed by MS mask read");
        }
    }
    for i in 0..n - 1 {
        if sf_accesses(at(i)) > 1 {
            return fail(i, "Single instruction writes SFU twice");
        }
    }
    let mut last_unif = -3i64;
    for i in 0..n {
        let w = at(i);
        if reads(w, 32, true, true) && i - last_unif <= 2 {
            return fail(i, "uniform read too soon after pointer update");
        }
        if waddr_add(w) == 40 || waddr_mul(w) == 40 {
            last_unif = i;
        }
    }
    if threaded {
        let mut last_thrsw_found = false;
        let mut locked = false;
        let mut outstanding = 0i32;
        let mut last_outstanding = 0i32;
        let mut thrsw_ip = -1i64;
        for i in 0..n {
            let w = at(i);
            if i == thrsw_ip {
                if last_outstanding != 0 {
                    return fail(
                        i,
                        "THRSW with texture results from the previous THRSW still in the FIFO.",
                    );
                }
                last_outstanding = outstanding;
                outstanding = 0;
            }
            if is_tlb(w) {
                locked = true;
            }
            match sig(w) {
                2 | 6 => {
                    if locked {
                        return fail(i, "THRSW with the scoreboard locked.");
                    }
                    if last_thrsw_found {
                        return fail(i, "THRSW after a previous LTHRSW");
                    }
                    if sig(w) == 6 {
                        last_thrsw_found = true;
                    }
                    if i < thrsw_ip {
                        return fail(i, "THRSW with a THRSW queued.");
                    }
                    thrsw_ip = i + 3;
                }
                10 | 11 => {
                    if last_outstanding == 0 {
                        return fail(
                            i,
                            "TMU load with nothing in the results fifo from the previous THRSW.",
                        );
                    }
                    last_outstanding -= 1;
                }
                _ => {}
            }
            if [56, 60].contains(&waddr_add(w)) || [56, 60].contains(&waddr_mul(w)) {
                outstanding += 1;
            }
        }
    }
    Ok(())
}
