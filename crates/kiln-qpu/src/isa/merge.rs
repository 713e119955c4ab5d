//! Pairing: one instruction doing what two do, an add-unit and a mul-unit operation issued
//! together, when their fields allow it (Mesa's `qpu_merge_inst`, `vc4_qpu.c`). A `mov` moves
//! to the other unit where that makes the pair (`or` on the add unit, `v8min` on the mul unit,
//! as Mesa's `qpu_convert_add_to_mul` does), and a uniform or varying read to the other file's read port.

use super::effects;
use super::fields::*;
use super::instr::*;

/// One instruction doing what `x` and `y` do, when their fields allow it, moving a `mov` to
/// the other unit if that makes the pair.
pub fn merge(x: &Instr, y: &Instr) -> Option<Instr> {
    merge_pairable(&Pairable::new(x)?, &Pairable::new(y)?)
}

/// What [`merge`] needs of one instruction, found once: its variants with their read ports
/// and units, and whether it takes a uniform. A scheduler asks about many pairs of the same
/// instructions.
#[derive(Clone, Copy, Debug)]
pub struct Pairable {
    /// `variants[..count]`, in the order [`variants`] gives them (the rest repeat the first).
    variants: [Variant; 4],
    count: u8,
    /// Bit `1 << units` for the units of each variant (`Variant::units`).
    unit_sets: u8,
    uniform: bool,
}

/// Bits of [`Pairable`]'s unit sets: an encoding that uses no unit, the add unit alone, the
/// mul unit alone.
const NONE: u8 = 1;
const ADD: u8 = 1 << 1;
const MUL: u8 = 1 << 2;

/// What an instruction's encodings ask of the two units ([`Pairable::units`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Units {
    None,
    Add,
    Mul,
    Either,
    Both,
}

/// One read through a register file's port ([`Pairable::reads`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortRead {
    /// What two instructions may read through one port together: register `k` of file A
    /// (`k` < 32), register `k − 32` of file B, small immediate `k − 64` (file B's port).
    Shared(u8),
    /// An I/O read (a FIFO's, never shared) through file A's port, file B's, or either (`None`).
    Io(Option<Mux>),
}

impl PortRead {
    /// The port the read takes: file A's, file B's, or either (`None`).
    pub fn port(self) -> Option<Mux> {
        match self {
            PortRead::Shared(k) if k < 32 => Some(Mux::A),
            PortRead::Shared(_) => Some(Mux::B),
            PortRead::Io(port) => port,
        }
    }
}

/// One way of encoding an instruction, with what pairing looks at first.
#[derive(Clone, Copy, Debug)]
struct Variant {
    i: AluInstr,
    port_a: Option<u8>,
    port_b: Option<Result<u8, u8>>,
    /// Bit 0: the add unit is used; bit 1: the mul unit.
    units: u8,
}

impl Variant {
    fn new(i: AluInstr) -> Variant {
        Variant {
            port_a: port_a(&i),
            port_b: port_b(&i),
            units: (i.op_add != AddOp::Nop) as u8 | ((i.op_mul != MulOp::Nop) as u8) << 1,
            i,
        }
    }
}

impl Pairable {
    /// `None` for what never pairs (branches, load-immediates, semaphores).
    pub fn new(i: &Instr) -> Option<Pairable> {
        let Instr::Alu(a) = i else {
            return None;
        };
        let first = Variant::new(*a);
        let mut p = Pairable {
            variants: [first; 4],
            count: 1,
            unit_sets: 1 << first.units,
            uniform: effects::takes_uniform(i),
        };
        for v in variants(a).into_iter().skip(1).flatten() {
            let v = Variant::new(v);
            p.variants[p.count as usize] = v;
            p.count += 1;
            p.unit_sets |= 1 << v.units;
        }
        Some(p)
    }

    fn variants(&self) -> &[Variant] {
        &self.variants[..self.count as usize]
    }

    /// The units the instruction's encodings leave it to: some need none (it pairs with
    /// anything), else it may go to either unit, to one, or it takes both.
    pub fn units(&self) -> Units {
        let x = self.unit_sets;
        if x & NONE != 0 {
            Units::None
        } else if x & ADD != 0 && x & MUL != 0 {
            Units::Either
        } else if x & ADD != 0 {
            Units::Add
        } else if x & MUL != 0 {
            Units::Mul
        } else {
            Units::Both
        }
    }

    /// Whether the instruction takes an entry of the uniform stream (`effects::takes_uniform`).
    pub fn takes_uniform(&self) -> bool {
        self.uniform
    }

    /// What the instruction reads through the register files' two read ports, whatever its
    /// encoding: [`merge`] shares a port between two instructions only for one register or one
    /// small immediate, so a schedule's instructions hold, per port, the distinct registers
    /// (and small immediates) read through it and every I/O read.
    pub fn reads(&self) -> [Option<PortRead>; 2] {
        let first = &self.variants[0];
        // A uniform or varying some variant reads through the other port may take either.
        let moves = self.variants()[1..]
            .iter()
            .any(|v| v.port_a.is_some() != first.port_a.is_some());
        let a = first.port_a.map(|r| match r {
            r if r < 32 => PortRead::Shared(r),
            _ if moves => PortRead::Io(None),
            _ => PortRead::Io(Some(Mux::A)),
        });
        let b = first.port_b.map(|r| match r {
            Ok(r) if r < 32 => PortRead::Shared(32 + r),
            Err(code) => PortRead::Shared(64 + code),
            Ok(_) if moves => PortRead::Io(None),
            Ok(_) => PortRead::Io(Some(Mux::B)),
        });
        [a, b]
    }

    /// Whether some encodings of the two use different units and they take at most one
    /// uniform between them: what any pairing needs, whatever their registers.
    pub fn units_allow(&self, other: &Pairable) -> bool {
        let (x, y) = (self.unit_sets, other.unit_sets);
        !(self.uniform && other.uniform)
            && ((x | y) & NONE != 0
                || (x & ADD != 0 && y & MUL != 0)
                || (x & MUL != 0 && y & ADD != 0))
    }
}

/// [`merge`] of two instructions' [`Pairable`]s.
pub fn merge_pairable(x: &Pairable, y: &Pairable) -> Option<Instr> {
    // One uniform read per instruction; no variant changes whether one is taken.
    if x.uniform && y.uniform {
        return None;
    }
    for a in x.variants() {
        for b in y.variants() {
            if a.units & b.units == 0
                && let Some(m) = merge_units(a, b)
            {
                return Some(m);
            }
        }
    }
    None
}

/// An instruction as it is, with its uniform or varying read through the other file's port, with its
/// `mov` on the other unit, and both.
fn variants(i: &AluInstr) -> [Option<AluInstr>; 4] {
    let port = uniform_on_other_port(i);
    [
        Some(*i),
        port,
        other_unit(i),
        port.as_ref().and_then(other_unit),
    ]
}

/// The uniform or varying an instruction reads through one file's read address, read through
/// the other file's (both FIFOs are the same address in both files), when that port is free
/// and no file-A unpack would change meaning.
fn uniform_on_other_port(i: &AluInstr) -> Option<AluInstr> {
    if i.unpack != Unpack::None && !i.w.pm {
        return None;
    }
    let mut m = *i;
    let both = |r: u8| r == raddr::UNIFORM || r == raddr::VARYING;
    let (from, to) = match (port_a(i), port_b(i)) {
        (Some(r), None) if both(r) => {
            m.raddr_a = raddr::NOP;
            m.raddr_b = r;
            (Mux::A, Mux::B)
        }
        (None, Some(Ok(r))) if both(r) => {
            m.raddr_b = raddr::NOP;
            m.raddr_a = r;
            (Mux::B, Mux::A)
        }
        _ => return None,
    };
    for mux in [&mut m.add_a, &mut m.add_b, &mut m.mul_a, &mut m.mul_b] {
        if *mux == from {
            *mux = to;
        }
    }
    Some(m)
}

/// The small-immediate code of 1.0.
const ONE: u8 = 32;

/// A `mov` (an instruction with one operation, which copies one operand without setting the
/// flags) done by the other unit: `or d, s, s` as `v8min d, s, s` and back. The write goes to
/// the same register file.
fn other_unit(i: &AluInstr) -> Option<AluInstr> {
    if i.w.sf {
        return None;
    }
    let mut m = *i;
    let texel = matches!(
        i.unpack,
        Unpack::U8a | Unpack::U8b | Unpack::U8c | Unpack::U8d
    );
    if i.op_add == AddOp::Fmax
        && i.op_mul == MulOp::Nop
        && i.add_a == Mux::R4
        && i.add_b == Mux::R4
        && i.w.pm
        && texel
        && i.sig == Signal::None
        && port_b(i).is_none()
    {
        // A texel component unpacked from r4 (a byte as a float in [0, 1], never NaN or
        // denormal): `fmax d, r4.8x, r4.8x` is `fmul d, r4.8x, 1.0` on the mul unit.
        m.sig = Signal::SmallImm;
        m.raddr_b = ONE;
        return Some(on_mul(&m, MulOp::Fmul, Mux::R4, Mux::B));
    }
    // A pack on the add unit's file-A write applies to the mul unit's the same way; a mul-unit
    // pack (pm) has no add-unit equivalent.
    if i.w.pm && i.w.pack != 0 {
        return None;
    }
    if i.op_add == AddOp::Or && i.op_mul == MulOp::Nop && i.add_a == i.add_b {
        Some(on_mul(&m, MulOp::V8min, i.add_a, i.add_a))
    } else if i.op_mul == MulOp::V8min && i.op_add == AddOp::Nop && i.mul_a == i.mul_b {
        let mut a = *i;
        a.op_mul = MulOp::Nop;
        a.op_add = AddOp::Or;
        a.add_a = i.mul_a;
        a.add_b = i.mul_a;
        a.w.waddr_add = i.w.waddr_mul;
        a.w.cond_add = i.w.cond_mul;
        a.w.waddr_mul = waddr::NOP;
        a.w.cond_mul = Cond::Never;
        a.w.ws = !i.w.ws;
        Some(a)
    } else {
        None
    }
}

/// An add-unit instruction's write done by mul-unit operation `op` on `a` and `b`, to the same
/// register file (ws selects file A for the add unit when clear, for the mul unit when set).
fn on_mul(i: &AluInstr, op: MulOp, a: Mux, b: Mux) -> AluInstr {
    let mut m = *i;
    m.op_add = AddOp::Nop;
    m.op_mul = op;
    m.mul_a = a;
    m.mul_b = b;
    m.w.waddr_mul = i.w.waddr_add;
    m.w.cond_mul = i.w.cond_add;
    m.w.waddr_add = waddr::NOP;
    m.w.cond_add = Cond::Never;
    m.w.ws = !i.w.ws;
    m
}

/// The read port an instruction occupies on file A: the register its muxes read, or an I/O
/// read address (read whether a mux uses it or not).
fn port_a(a: &AluInstr) -> Option<u8> {
    (effects::reads_mux(a, Mux::A) || (a.raddr_a >= 32 && a.raddr_a != raddr::NOP))
        .then_some(a.raddr_a)
}

/// File B's port: a register or I/O read (`Ok`), or a small immediate (`Err`).
fn port_b(a: &AluInstr) -> Option<Result<u8, u8>> {
    if a.sig == Signal::SmallImm {
        return Some(Err(a.raddr_b));
    }
    (effects::reads_mux(a, Mux::B) || (a.raddr_b >= 32 && a.raddr_b != raddr::NOP))
        .then_some(Ok(a.raddr_b))
}

/// Whether a write address means the same in both files' write ports: the accumulators and
/// most I/O (an SFU, a TMU, the tile buffer's colour), so the write-swap bit is the other
/// unit's to choose.
fn either_file(w: u8) -> bool {
    !super::names::waddr_uses_ws(w)
}

/// One instruction doing what `x` and `y` do, as they are: one add and one mul operation, one signal, the read ports shared only
/// for one register or one small immediate, writes to different files, flags set by the
/// operation that set them, at most one pack or unpack and nothing else it would apply to, at
/// most one peripheral access (at most one uniform read: the caller's check).
fn merge_units(xv: &Variant, yv: &Variant) -> Option<Instr> {
    // (At most one uniform read, and different units: checked by the caller.)
    let (x, y) = (&xv.i, &yv.i);
    let add = if x.op_add != AddOp::Nop { x } else { y };
    let mul = if x.op_mul != MulOp::Nop { x } else { y };
    let add_on = add.op_add != AddOp::Nop;
    let mul_on = mul.op_mul != MulOp::Nop;

    // Read ports.
    let raddr_a = match (xv.port_a, yv.port_a) {
        (Some(p), Some(q)) if p == q && p < 32 => p,
        (Some(_), Some(_)) => return None,
        (p, q) => p.or(q).unwrap_or(raddr::NOP),
    };
    let b = match (xv.port_b, yv.port_b) {
        (Some(Ok(p)), Some(Ok(q))) if p == q && p < 32 => Some(Ok(p)),
        (Some(Err(p)), Some(Err(q))) if p == q => Some(Err(p)),
        (Some(_), Some(_)) => return None,
        (p, q) => p.or(q),
    };
    // Signals: one, or a small immediate.
    let signal = |s: Signal| !matches!(s, Signal::None | Signal::SmallImm);
    if signal(x.sig) && signal(y.sig) {
        return None;
    }
    let sig = match b {
        Some(Err(code)) => {
            if code >= 48 || signal(x.sig) || signal(y.sig) {
                return None;
            }
            Signal::SmallImm
        }
        _ if signal(x.sig) => x.sig,
        _ => y.sig,
    };
    if sig == Signal::Breakpoint {
        return None;
    }
    let raddr_b = match b {
        Some(Ok(r) | Err(r)) => r,
        None => raddr::NOP,
    };

    // Writes: each unit's address and condition, one write-swap bit for both.
    let mut w = WriteFields::NONE;
    let mut ws = None;
    if add_on {
        w.waddr_add = add.w.waddr_add;
        w.cond_add = add.w.cond_add;
        if !either_file(w.waddr_add) {
            ws = Some(add.w.ws);
        }
    }
    if mul_on {
        w.waddr_mul = mul.w.waddr_mul;
        w.cond_mul = mul.w.cond_mul;
        if !either_file(w.waddr_mul) {
            match ws {
                Some(v) if v != mul.w.ws => return None,
                _ => ws = Some(mul.w.ws),
            }
        }
    }
    // One address names two registers below 32 (the write swap bit puts them in different
    // files), one target above.
    if add_on
        && mul_on
        && w.waddr_add == w.waddr_mul
        && w.waddr_add >= 32
        && w.waddr_add != waddr::NOP
    {
        return None;
    }
    w.ws = ws.unwrap_or(false);

    // Flags come from the add result when there is an add operation, else the mul's.
    if x.w.sf && y.w.sf {
        return None;
    }
    if let Some(s) = [x, y].into_iter().find(|i| i.w.sf) {
        let sets_add = s.op_add != AddOp::Nop;
        if (!sets_add && s.op_mul == MulOp::Nop) || sets_add != add_on {
            return None;
        }
        w.sf = true;
    }

    // Pack and unpack: each from one instruction (both under one pm), and nothing of the other
    // instruction's it would apply to.
    let pm_of = |i: &AluInstr| (i.w.pack != 0 || i.unpack != Unpack::None).then_some(i.w.pm);
    let pm = match (pm_of(x), pm_of(y)) {
        (Some(p), Some(q)) if p != q => return None,
        (p, q) => p.or(q).unwrap_or(false),
    };
    let owner = |f: &dyn Fn(&AluInstr) -> bool| -> Result<Option<(&AluInstr, &AluInstr)>, ()> {
        match (f(x), f(y)) {
            (true, true) => Err(()),
            (true, false) => Ok(Some((x, y))),
            (false, true) => Ok(Some((y, x))),
            (false, false) => Ok(None),
        }
    };
    w.pm = pm;
    if let Some((packer, other)) = owner(&|i| i.w.pack != 0).ok()? {
        w.pack = packer.w.pack;
        if pm {
            // The mul unit's pack: the mul operation must be the packer's.
            if other.op_mul != MulOp::Nop {
                return None;
            }
        } else {
            // The file-A pack: the other's write must not be a file-A register.
            let other_writes_a = (other.op_add != AddOp::Nop && w.waddr_add < 32 && !w.ws)
                || (other.op_mul != MulOp::Nop && w.waddr_mul < 32 && w.ws);
            if other_writes_a {
                return None;
            }
        }
    }
    let mut unpack = Unpack::None;
    if let Some((unpacker, other)) = owner(&|i| i.unpack != Unpack::None).ok()? {
        unpack = unpacker.unpack;
        let unpacked = if pm { Mux::R4 } else { Mux::A };
        if effects::reads_mux(other, unpacked) {
            return None;
        }
    }

    let (add_a, add_b) = (add.add_a, add.add_b);
    let (mul_a, mul_b) = (mul.mul_a, mul.mul_b);
    let m = AluInstr {
        sig,
        unpack,
        w,
        op_mul: if mul_on { mul.op_mul } else { MulOp::Nop },
        op_add: if add_on { add.op_add } else { AddOp::Nop },
        raddr_a,
        raddr_b,
        add_a,
        add_b,
        mul_a,
        mul_b,
    };
    let merged = Instr::Alu(m);
    if effects::peripheral_accesses(&merged) > 1 || vpm_setup_conflict(&merged) {
        return None;
    }
    Some(merged)
}

/// A VPM setup write in the same instruction as another VPM access.
fn vpm_setup_conflict(i: &Instr) -> bool {
    let ws = effects::writes(i);
    let setups = ws.iter().filter(|w| w.waddr == waddr::VPM_SETUP).count();
    setups > 0
        && (setups > 1
            || effects::io_reads(i).contains(&raddr::VPM)
            || ws.iter().any(|w| w.waddr == waddr::VPM))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::{assemble_line, decode};

    /// Assembles one instruction, `nop` standing for `nop nop, r0, r0` on either unit.
    fn asm(s: &str) -> Instr {
        let halves: Vec<String> = s
            .split(';')
            .map(|h| {
                let h = h.trim();
                if h.ends_with("nop") && !h.contains(',') {
                    format!("{h} nop, r0, r0")
                } else {
                    h.to_string()
                }
            })
            .collect();
        let line = halves.join(" ; ");
        decode(assemble_line(&line).unwrap_or_else(|e| panic!("{line}: {e:?}")))
    }

    fn pairs(x: &str, y: &str) -> Option<Instr> {
        let m = merge(&asm(x), &asm(y));
        assert_eq!(m, merge(&asm(y), &asm(x)), "merge is symmetric");
        m
    }

    /// `units` names what the variants leave: a `mov` (an `or` of one register with itself)
    /// goes to either unit, an add or a multiply to its own, both operations to both, a
    /// signal alone to none; and an instruction of one unit merges with another of the same
    /// unit only where one of them may go to the other.
    #[test]
    fn units_are_what_the_encodings_leave() {
        for (code, want) in [
            ("or r0, r1, r1 ; nop", Units::Either),
            ("nop ; v8min r2, r1, r1", Units::Either),
            ("fadd r0, r1, r2 ; nop", Units::Add),
            ("nop ; fmul r3, r1, r1", Units::Mul),
            ("fadd r0, r1, r2 ; fmul r3, r1, r1", Units::Both),
            ("load_tmu0 nop ; nop", Units::None),
        ] {
            let p = Pairable::new(&asm(code)).unwrap();
            assert_eq!(p.units(), want, "{code}");
        }
        let (add, mov) = (asm("fadd r0, r1, r2 ; nop"), asm("or r3, r1, r1 ; nop"));
        assert!(merge(&add, &mov).is_some());
        assert!(merge(&add, &asm("fsub r3, r1, r2 ; nop")).is_none());
    }

    /// Wherever two instructions merge, their reads ([`Pairable::reads`], a register or small
    /// immediate once) fit the two ports: one through file A's, one through file B's, two in
    /// all — what the scheduler's bound counts. Random instructions over a few read
    /// addresses and operands, so that many pairs merge.
    #[test]
    fn merged_reads_fit_the_ports() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        const RADDR: [u8; 7] = [
            0,
            1,
            2,
            raddr::UNIFORM,
            raddr::VARYING,
            raddr::VPM,
            raddr::NOP,
        ];
        let mut random =
            |unit: u64| -> Option<Instr> {
                let Instr::Alu(mut a) = decode(next() & !(0xf << 60)) else {
                    return None;
                };
                let r = next();
                a.sig = if r & 7 == 0 {
                    Signal::SmallImm
                } else {
                    Signal::None
                };
                a.unpack = Unpack::None;
                a.w.pack = 0;
                a.raddr_a = RADDR[(r >> 3) as usize % RADDR.len()];
                a.raddr_b = RADDR[(r >> 6) as usize % RADDR.len()]
                    .min(if a.sig == Signal::SmallImm { 40 } else { 63 });
                for (k, m) in [&mut a.add_a, &mut a.add_b, &mut a.mul_a, &mut a.mul_b]
                    .into_iter()
                    .enumerate()
                {
                    *m = Mux::ALL[(r >> (12 + 3 * k)) as usize % 8];
                }
                match unit {
                    0 => a.op_mul = MulOp::Nop,
                    _ => a.op_add = AddOp::Nop,
                }
                Some(Instr::Alu(a))
            };
        let mut merged = 0;
        for _ in 0..200_000 {
            let (Some(x), Some(y)) = (random(0), random(1)) else {
                continue;
            };
            let (Some(p), Some(q)) = (Pairable::new(&x), Pairable::new(&y)) else {
                continue;
            };
            if merge_pairable(&p, &q).is_none() {
                continue;
            }
            merged += 1;
            let mut shared = Vec::new();
            let (mut a, mut b, mut all) = (0, 0, 0);
            for read in p.reads().into_iter().chain(q.reads()).flatten() {
                if let PortRead::Shared(k) = read {
                    if shared.contains(&k) {
                        continue;
                    }
                    shared.push(k);
                }
                match read.port() {
                    Some(Mux::A) => a += 1,
                    Some(_) => b += 1,
                    None => {}
                }
                all += 1;
            }
            assert!(
                a <= 1 && b <= 1 && all <= 2,
                "{x:?} with {y:?}: {a} {b} {all}"
            );
        }
        assert!(merged > 1000, "{merged} pairs merged");
    }

    /// `units_allow`, read from the variants' unit sets, is the test over every pair of
    /// variants it stands for, and holds wherever two instructions merge.
    #[test]
    fn units_allow_is_the_test_over_every_pair_of_variants() {
        let code = [
            "fadd r0, r1, r2 ; nop",
            "nop ; fmul r3, r1, r1",
            "fadd r0, r1, r2 ; fmul r3, r1, r1",
            "or r0, r1, r1 ; nop",
            "nop ; v8min r2, r1, r1",
            "or r0, uni, uni ; nop",
            "fmax r0, r4.8a, r4.8a ; nop",
            "load_tmu0 nop ; nop",
            "sig_thread_switch nop ; nop",
            "fadd.sf r0, r1, r2 ; nop",
            "nop ; fmul ra5, uni, r1",
        ];
        let mut allowed = 0;
        for x in code {
            for y in code {
                let (a, b) = (asm(x), asm(y));
                let (Some(p), Some(q)) = (Pairable::new(&a), Pairable::new(&b)) else {
                    continue;
                };
                let any = p
                    .variants()
                    .iter()
                    .any(|u| q.variants().iter().any(|v| u.units & v.units == 0));
                let want = any && !(p.uniform && q.uniform);
                assert_eq!(p.units_allow(&q), want, "{x} / {y}");
                assert!(merge(&a, &b).is_none() || want, "{x} / {y} merge");
                allowed += want as u32;
            }
        }
        assert!(allowed > 0 && allowed < (code.len() * code.len()) as u32);
    }

    #[test]
    fn an_add_and_a_mul_pair() {
        assert_eq!(
            pairs("fadd r0, r1, r2 ; nop", "nop ; fmul r3, r1, r1"),
            Some(asm("fadd r0, r1, r2 ; fmul r3, r1, r1"))
        );
        // One file-A register read by both.
        assert_eq!(
            pairs("fadd r0, ra1, r2 ; nop", "nop ; fmul r3, ra1, r1"),
            Some(asm("fadd r0, ra1, r2 ; fmul r3, ra1, r1"))
        );
        // Writes to both files: ws set for the add unit's file B.
        assert_eq!(
            pairs("fadd rb4, r1, r2 ; nop", "nop ; fmul ra5, r1, r1"),
            Some(asm("fadd rb4, r1, r2 ; fmul ra5, r1, r1"))
        );
        // One write address below 32 names a register of each file.
        assert_eq!(
            pairs("fadd rb1, r1, r2 ; nop", "nop ; fmul ra1, r1, r1"),
            Some(asm("fadd rb1, r1, r2 ; fmul ra1, r1, r1"))
        );
        // An I/O address both files' ports name alike (an SFU, a TMU) leaves the write swap
        // bit to the other unit: the add unit's SFU write goes through file B here.
        assert_eq!(
            pairs("mov sfu_recip, r1 ; nop", "nop ; fmul ra5, r1, r1"),
            Some(asm("mov sfu_recip, r1 ; fmul ra5, r1, r1"))
        );
        assert_eq!(
            pairs("nop ; mov tmu0_s, r1", "fadd rb5, r1, r2 ; nop"),
            Some(asm("fadd rb5, r1, r2 ; mov tmu0_s, r1"))
        );
        // A signal joins an operation.
        assert_eq!(
            pairs("load_tmu0 nop ; nop", "fadd r0, r1, r2 ; nop"),
            Some(asm("load_tmu0 fadd r0, r1, r2 ; nop"))
        );
    }

    #[test]
    fn fields_that_conflict_do_not_pair() {
        for (x, y, why) in [
            (
                "fadd r0, ra1, r2 ; nop",
                "nop ; fmul r3, ra2, r1",
                "two file-A registers",
            ),
            (
                "fadd ra4, r1, r2 ; nop",
                "nop ; fmul ra5, r1, r1",
                "two writes to file A",
            ),
            (
                "fadd r0, r1, r2 ; nop",
                "fsub r3, r1, r2 ; nop",
                "two add operations",
            ),
            (
                "fadd r0, r1, r2 ; nop",
                "nop ; fmul r0, r1, r1",
                "two writes to one accumulator",
            ),
            (
                "fadd r0, uni, r2 ; nop",
                "nop ; fmul r3, r1, uni",
                "two uniform reads",
            ),
            (
                "sig_small_imm fadd r0, r1, 2.0 ; nop",
                "nop ; fmul r3, r1, rb2",
                "a small immediate and a file-B read",
            ),
            (
                "sig_small_imm fadd r0, r1, 2.0 ; nop",
                "sig_small_imm nop ; fmul r3, r1, 4.0",
                "two small immediates",
            ),
            (
                "nop ; fmul.sf r3, r1, r1",
                "fadd r0, r1, r2 ; nop",
                "flags from the mul, which the add would set",
            ),
            (
                "fadd r0, ra1, r2 ; nop",
                "nop ; fmul r3.8a, r1, r1",
                "a mul-unit pack beside an add operation (kept)",
            ),
            (
                "load_tmu0 nop ; nop",
                "sig_switch fadd r0, r1, r2 ; nop",
                "two signals",
            ),
            (
                "mov tmu0_s, r0 ; nop",
                "nop ; mov sfu_recip, r1",
                "two peripherals",
            ),
            (
                "mov vr_setup, r0 ; nop",
                "nop ; fmul ra5, r1, r1",
                "file A's VPM read setup, which through file B is the write setup",
            ),
        ] {
            let m = pairs(x, y);
            if why.contains("kept") {
                assert!(m.is_some(), "{why}");
            } else {
                assert_eq!(m, None, "{x} + {y}: {why}");
            }
        }
    }

    #[test]
    fn a_mov_changes_unit_to_pair() {
        // Two add-unit operations: the mov goes to the mul unit, writing the same file.
        assert_eq!(
            pairs("fadd r0, r1, r2 ; nop", "mov rb3, r1 ; nop"),
            Some(asm("fadd r0, r1, r2 ; v8min rb3, r1, r1"))
        );
        assert_eq!(
            pairs("nop ; fmul r0, r1, r2", "nop ; v8min ra3, r1, r1"),
            Some(asm("or ra3, r1, r1 ; fmul r0, r1, r2"))
        );
        // Not one that sets the flags.
        assert_eq!(pairs("fadd r0, r1, r2 ; nop", "mov.sf rb3, r1 ; nop"), None);
    }

    #[test]
    fn a_texel_unpack_changes_unit_to_pair() {
        assert_eq!(small_imm_value(ONE), Some(1.0f32.to_bits()));
        let m = pairs("fadd r0, r1, r2 ; nop", "fmax rb3, r4.8b, r4.8b ; nop").expect("pairs");
        let Instr::Alu(a) = m else { panic!() };
        assert_eq!((a.op_add, a.op_mul), (AddOp::Fadd, MulOp::Fmul));
        assert_eq!(
            (a.mul_a, a.mul_b, a.sig, a.raddr_b),
            (Mux::R4, Mux::B, Signal::SmallImm, ONE)
        );
        assert_eq!(
            (a.w.waddr_mul, a.w.ws, a.w.pm, a.unpack),
            (3, false, true, Unpack::U8b)
        );
        // Not beside another small immediate.
        assert_eq!(
            pairs(
                "sig_small_imm fadd r0, r1, 2.0 ; nop",
                "fmax rb3, r4.8b, r4.8b ; nop"
            ),
            None
        );
    }

    #[test]
    fn an_r4_unpack_and_a_mul_pack_share_pm() {
        let unpacker = asm("fmax r2, r4.8b, r4.8b ; nop");
        let Instr::Alu(mut packer) = asm("nop ; fmul ra14, r3, ra4") else {
            panic!()
        };
        packer.w.pm = true;
        packer.w.pack = 4;
        let m = merge(&unpacker, &Instr::Alu(packer)).expect("pairs");
        let Instr::Alu(a) = m else { panic!() };
        assert_eq!((a.w.pm, a.w.pack, a.unpack), (true, 4, Unpack::U8b));
        // Not when the packer reads r4, which the unpack would change.
        let Instr::Alu(mut reads_r4) = asm("nop ; fmul ra14, r4, ra4") else {
            panic!()
        };
        reads_r4.w.pm = true;
        reads_r4.w.pack = 4;
        assert_eq!(merge(&unpacker, &Instr::Alu(reads_r4)), None);
    }

    #[test]
    fn a_uniform_read_changes_port_to_pair() {
        // ra2 takes file A's read address: the uniform goes through file B's.
        let m = pairs("fadd r0, ra2, r1 ; nop", "nop ; fmul r3, uni, r1").expect("pairs");
        let Instr::Alu(a) = m else { panic!() };
        assert_eq!((a.raddr_a, a.raddr_b), (2, raddr::UNIFORM));
        assert_eq!((a.mul_a, a.mul_b), (Mux::B, Mux::R1));
        // Not when file B's is taken too.
        assert_eq!(
            pairs("fadd r0, ra2, rb1 ; nop", "nop ; fmul r3, uni, r1"),
            None
        );
    }
}
