//! The VideoCore IV register model as a kiln [`Target`] (seed 002): one allocatable per-lane file
//! `q` of 69 units (r0–r4, ra0–ra31, rb0–rb31) with the register subsets of Mesa's
//! `vc4_register_allocate.c`, in a single-thread and a threaded-fragment variant. The design is
//! in `docs/vc4.md` ("The register model as a kiln target").

use kiln_ir::{
    FileId, Lanes, RegClass, RegFile, RegSubset, Target, UnitMask, close_under_intersection,
};
use std::sync::{Arc, OnceLock};

/// Units of the `q` file.
pub const UNITS: u32 = 69;
/// First unit of the A file (ra0); the B file starts at [`B0`].
pub const A0: u32 = 5;
pub const B0: u32 = A0 + 32;
/// r4's unit.
pub const R4: u32 = 4;
/// The register the emitter keeps free in each file.
const RESERVED: u32 = 14;
/// The file-A register that holds the execute mask of divergent control flow (per lane: 0 when
/// the lane runs, else the block it waits for), reserved in the `exec=1` variant.
pub const EXEC_REG: u8 = 13;

/// The file every allocatable value lives in.
pub const Q: FileId = FileId(0);

/// Which of the 69 units a physical QPU register is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum QpuReg {
    /// r0–r4.
    Acc(u8),
    A(u8),
    B(u8),
}

impl QpuReg {
    /// The register at `unit` of the `q` file.
    pub fn from_unit(unit: u32) -> Option<QpuReg> {
        match unit {
            0..=4 => Some(QpuReg::Acc(unit as u8)),
            A0..B0 => Some(QpuReg::A((unit - A0) as u8)),
            B0..UNITS => Some(QpuReg::B((unit - B0) as u8)),
            _ => None,
        }
    }

    pub fn unit(self) -> u32 {
        match self {
            QpuReg::Acc(i) => i as u32,
            QpuReg::A(i) => A0 + i as u32,
            QpuReg::B(i) => B0 + i as u32,
        }
    }
}

/// The vc4 target in one of its two thread modes.
#[derive(Clone, Debug)]
pub struct Vc4Target {
    threads: u32,
    exec: bool,
    files: [RegFile; 1],
    subsets: Vec<RegSubset>,
}

impl Vc4Target {
    /// `threads` is 1 (all 32 registers of A and B) or 2 (a threaded fragment shader: the lower
    /// 16 of each).
    pub fn new(threads: u32) -> Vc4Target {
        Vc4Target::with_exec(threads, false)
    }

    /// The target with ra13 also reserved, for the execute mask of divergent control flow
    /// (`vc4(threads=N, exec=1)`; the emitter retargets a function to it before allocation).
    pub fn with_exec(threads: u32, exec: bool) -> Vc4Target {
        let per_file = if threads == 2 { 16 } else { 32 };
        let file_regs = |base: u32| {
            (0..per_file)
                .filter(move |&i| i != RESERVED && !(exec && base == A0 && i == EXEC_REG as u32))
                .map(move |i| base + i)
        };
        let a: Vec<u32> = file_regs(A0).collect();
        let b: Vec<u32> = file_regs(B0).collect();
        let acc: Vec<u32> = (0..4).collect();
        let subset = |name: &str, parts: &[&[u32]]| RegSubset {
            name: name.into(),
            file: Q,
            units: UnitMask::from_units(UNITS, parts.iter().flat_map(|p| p.iter().copied())),
        };
        let subsets = close_under_intersection(vec![
            subset("any", &[&acc, &[R4], &a, &b]),
            subset("a_or_b_or_acc", &[&acc, &a, &b]),
            subset("a_or_b", &[&a, &b]),
            subset("r4_or_a", &[&[R4], &a]),
            subset("a", &[&a]),
            subset("r0_r3", &[&acc]),
        ]);
        Vc4Target {
            threads,
            exec,
            files: [RegFile {
                name: "q".into(),
                units: UNITS,
                lanes: Lanes::PerLane,
            }],
            subsets,
        }
    }

    pub fn arc(threads: u32) -> Arc<dyn Target> {
        Vc4Target::shared(threads, false)
    }

    /// [`Vc4Target::with_exec`], built once per process for each of the four targets a
    /// compile retargets to (one or two threads, with or without the execute mask).
    pub fn shared(threads: u32, exec: bool) -> Arc<dyn Target> {
        static BUILT: [OnceLock<Arc<Vc4Target>>; 4] = [
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
        ];
        if !matches!(threads, 1 | 2) {
            return Arc::new(Vc4Target::with_exec(threads, exec));
        }
        let k = 2 * (threads as usize - 1) + exec as usize;
        BUILT[k]
            .get_or_init(|| Arc::new(Vc4Target::with_exec(threads, exec)))
            .clone()
    }

    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// Whether ra13 is reserved for the execute mask.
    pub fn exec(&self) -> bool {
        self.exec
    }

    /// Builds the target from the parameters of a `target vc4(threads=N)` line.
    pub fn from_params(params: &[(String, u32)]) -> Result<Arc<dyn Target>, String> {
        let mut threads = 1;
        let mut exec = false;
        for (k, v) in params {
            match (k.as_str(), v) {
                ("threads", 1 | 2) => threads = *v,
                ("threads", _) => return Err("parameter `threads` must be 1 or 2".into()),
                ("exec", 0 | 1) => exec = *v == 1,
                ("exec", _) => return Err("parameter `exec` must be 0 or 1".into()),
                _ => {
                    return Err(format!(
                        "unknown parameter `{k}` of target vc4 (known: threads, exec)"
                    ));
                }
            }
        }
        Ok(Vc4Target::shared(threads, exec))
    }
}

impl Target for Vc4Target {
    fn name(&self) -> &str {
        "vc4"
    }
    fn params(&self) -> Vec<(String, u32)> {
        let mut p = vec![("threads".into(), self.threads)];
        if self.exec {
            p.push(("exec".into(), 1));
        }
        p
    }
    fn param(&self, name: &str) -> Option<u32> {
        match name {
            "threads" => Some(self.threads),
            "exec" => self.exec.then_some(1),
            _ => None,
        }
    }
    fn files(&self) -> &[RegFile] {
        &self.files
    }
    fn subsets(&self) -> &[RegSubset] {
        &self.subsets
    }
    /// Every value is one 32-bit register per lane.
    fn max_size(&self, _file: FileId) -> u8 {
        1
    }
    /// The QPU's add, mul and SFU operations (`crate::ops`).
    fn opcodes(&self) -> &'static [kiln_ir::TargetOpInfo] {
        &crate::ops::VC4_OPS
    }
    /// Short-lived values colour first and take the accumulators (seed 002: Mesa sorts temps by
    /// live-range length for this, and reports 12 % fewer instructions).
    fn short_ranges_first(&self) -> bool {
        true
    }
    /// The QPU's names: `r0`–`r4`, `ra0`–`ra31`, `rb0`–`rb31`.
    fn reg_name(&self, reg: kiln_ir::PhysReg) -> Option<String> {
        (reg.file() == Q).then_some(())?;
        Some(match QpuReg::from_unit(reg.unit())? {
            QpuReg::Acc(n) => format!("r{n}"),
            QpuReg::A(n) => format!("ra{n}"),
            QpuReg::B(n) => format!("rb{n}"),
        })
    }
    fn reg_by_name(&self, name: &str) -> Option<kiln_ir::PhysReg> {
        let number = |digits: &str, max: u8| {
            digits
                .parse::<u8>()
                .ok()
                .filter(|&n| n < max && (digits == "0" || !digits.starts_with('0')))
        };
        let reg = if let Some(d) = name.strip_prefix("ra") {
            QpuReg::A(number(d, 32)?)
        } else if let Some(d) = name.strip_prefix("rb") {
            QpuReg::B(number(d, 32)?)
        } else {
            QpuReg::Acc(number(name.strip_prefix('r')?, 5)?)
        };
        Some(kiln_ir::PhysReg::new(Q, reg.unit()))
    }
    /// Files A and B each have one read address per instruction (the accumulators none).
    fn read_port(&self, _file: FileId, unit: u32) -> Option<u8> {
        match unit {
            A0..B0 => Some(0),
            B0..UNITS => Some(1),
            _ => None,
        }
    }
    /// A small immediate is read through B's address field.
    fn constant_read_port(&self, value: u32) -> Option<u8> {
        kiln_qpu::isa::small_imm_code(value).map(|_| 1)
    }
    /// Mesa's order (`vc4_register_allocate.c`, seed 002): r4 when the class allows it (only
    /// an r4 writer's result may sit there, and taking it saves the move out of r4); then an
    /// accumulator, round-robin (no write-to-read delay, and rotating leaves the scheduler
    /// more instructions to pair); then A and B interleaved, round-robin (ra0, rb0, ra1, …), so
    /// that the operands of an instruction tend to sit in different files.
    fn select_register(&self, _class: RegClass, free: &[u64], cursor: &mut [u32; 2]) -> u32 {
        let has = |u: u32| kiln_ir::unit_in(free, u);
        if has(R4) {
            return R4;
        }
        for i in 0..4 {
            let acc = (cursor[0] + i) % 4;
            if has(acc) {
                cursor[0] = acc + 1;
                return acc;
            }
        }
        for i in 0..64 {
            let k = (cursor[1] + i) % 64;
            let unit = if k % 2 == 0 { A0 + k / 2 } else { B0 + k / 2 };
            if has(unit) {
                cursor[1] = k + 1;
                return unit;
            }
        }
        kiln_ir::lowest_unit(free)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::{PhysReg, RegClass};

    fn class(t: &Vc4Target, name: &str) -> RegClass {
        RegClass {
            subset: Some(t.subset_by_name(name).unwrap()),
            ..t.class(Q, 1)
        }
    }

    fn regs(t: &Vc4Target, c: RegClass) -> Vec<QpuReg> {
        (0..UNITS)
            .filter(|&u| t.reg_fits(PhysReg::new(Q, u), c))
            .map(|u| QpuReg::from_unit(u).unwrap())
            .collect()
    }

    /// A parameter read alone is the one the `target` line lists (the trait's default reads
    /// the list), for every target a compile uses.
    #[test]
    fn param_is_the_listed_parameter() {
        for (threads, exec) in [(1, false), (1, true), (2, false), (2, true)] {
            let t = Vc4Target::shared(threads, exec);
            let listed = t.params();
            for name in ["threads", "exec", "lanes"] {
                let from_list = listed.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
                assert_eq!(t.param(name), from_list, "{name} of {listed:?}");
            }
        }
    }

    /// The register counts of seed 002's classes (ra14/rb14 reserved), both thread modes.
    #[test]
    fn classes_hold_seed_002s_registers() {
        for (threads, per_file) in [(1u32, 31usize), (2, 15)] {
            let t = Vc4Target::new(threads);
            let count = |n: &str| regs(&t, class(&t, n)).len();
            assert_eq!(count("a"), per_file);
            assert_eq!(count("a_or_b"), 2 * per_file);
            assert_eq!(count("r4_or_a"), 1 + per_file);
            assert_eq!(count("a_or_b_or_acc"), 4 + 2 * per_file);
            assert_eq!(count("any"), 5 + 2 * per_file);
            assert_eq!(count("r0_r3"), 4);
            let a = regs(&t, class(&t, "a"));
            assert!(
                a.iter()
                    .all(|r| matches!(r, QpuReg::A(i) if *i != 14 && (*i as usize) < per_file + 1))
            );
            assert!(!regs(&t, class(&t, "a_or_b")).contains(&QpuReg::Acc(4)));
        }
    }

    /// Narrowing by two uses: r4-or-A and A-or-B-or-accumulator leave A; A and r0–r3 leave
    /// nothing (the value needs a copy).
    #[test]
    fn narrowing_intersects_classes() {
        let t = Vc4Target::new(1);
        let meet = |x: &str, y: &str| t.intersect_classes(class(&t, x), class(&t, y));
        assert_eq!(
            regs(&t, meet("r4_or_a", "a_or_b_or_acc").unwrap()),
            regs(&t, class(&t, "a"))
        );
        assert_eq!(meet("any", "r0_r3"), Some(class(&t, "r0_r3")));
        assert_eq!(meet("a", "r0_r3"), None);
        assert_eq!(
            meet("r4_or_a", "a_or_b").map(|c| regs(&t, c)),
            Some(regs(&t, class(&t, "a")))
        );
    }

    /// Seed 002's model on vc4: registers do not overlap, so one register blocks at most one
    /// of another class, and none of a class it shares nothing with.
    #[test]
    fn q_values_of_the_vc4_classes() {
        let t = Vc4Target::arc(1);
        let v = Vc4Target::new(1);
        let mut m = kiln_regalloc::RegModel::new(t);
        let id = |m: &mut kiln_regalloc::RegModel, n: &str| m.class_id(class(&v, n));
        let (any, r0_r3, a, a_or_b) = (
            id(&mut m, "any"),
            id(&mut m, "r0_r3"),
            id(&mut m, "a"),
            id(&mut m, "a_or_b"),
        );
        assert_eq!(m.p(any), 67);
        assert_eq!(m.q(any, r0_r3), 1);
        assert_eq!(m.q(a, r0_r3), 0);
        assert_eq!(m.q(a_or_b, a), 1);
        // A node of class a with 30 neighbours in A is colourable; with 31 it may not be.
        assert!(m.trivially_colourable(a, std::iter::repeat_n(a, 30)));
        assert!(!m.trivially_colourable(a, std::iter::repeat_n(a, 31)));
        assert!(m.trivially_colourable(a, std::iter::repeat_n(r0_r3, 100)));
    }

    /// Every register's QPU name reads back as that register; other names are not registers.
    #[test]
    fn register_names_read_back() {
        let t = Vc4Target::new(1);
        for u in 0..UNITS {
            let r = PhysReg::new(Q, u);
            let name = t.reg_name(r).unwrap();
            assert_eq!(t.reg_by_name(&name), Some(r), "{name}");
        }
        assert_eq!(t.reg_name(PhysReg::new(Q, A0 + 5)).as_deref(), Some("ra5"));
        for bad in ["r5", "ra32", "rb01", "q", "ra", "r", "rax"] {
            assert_eq!(t.reg_by_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn units_name_registers_both_ways() {
        for u in 0..UNITS {
            assert_eq!(QpuReg::from_unit(u).unwrap().unit(), u);
        }
        assert_eq!(QpuReg::from_unit(A0 + 15), Some(QpuReg::A(15)));
        assert_eq!(QpuReg::from_unit(B0), Some(QpuReg::B(0)));
        assert_eq!(QpuReg::from_unit(UNITS), None);
    }
}
