//! Shader statistics in shader-db's terms (seed 004 reports its results as shader-db totals):
//! instructions, phis, blocks, loops and the maximum register demand per register file, and the
//! comparison of two sets of them (totals, helped and hurt).

use kiln_analysis::{Context, PassError};
use kiln_ir::{Demand, Function, MAX_FILES};

/// What one function costs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Instructions other than phis (terminators included).
    pub instructions: usize,
    pub phis: usize,
    pub blocks: usize,
    /// `loop` instructions (every loop, the front end's one-trip ones included).
    pub loops: usize,
    /// Maximum register demand per register file, in units (seed 000).
    pub max_demand: Demand,
}

impl Stats {
    /// The statistics of the context's function (computes liveness).
    pub fn of(cx: &mut Context) -> Result<Stats, PassError> {
        let lv = cx.liveness()?;
        Ok(Stats::with_demand(cx.func(), lv.max))
    }

    pub fn with_demand(func: &Function, max_demand: Demand) -> Stats {
        let phis = func
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .filter(|i| i.op.is_phi())
            .count();
        let loops = func
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .filter(|i| i.op == kiln_ir::Opcode::Loop)
            .count();
        Stats {
            instructions: func.inst_count() - phis,
            phis,
            blocks: func.blocks.len(),
            loops,
            max_demand,
        }
    }
}

/// Totals over many functions, before and after, with helped and hurt counts.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    pub before: Totals,
    pub after: Totals,
    pub shaders: usize,
    /// Fewer instructions / more instructions.
    pub helped: usize,
    pub hurt: usize,
    /// Max demand lower in some file and higher in none / higher in some file.
    pub demand_helped: usize,
    pub demand_hurt: usize,
    /// Max demand summed over the files: lower / higher.
    pub sum_helped: usize,
    pub sum_hurt: usize,
}

/// Sums of [`Stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub instructions: usize,
    pub phis: usize,
    pub blocks: usize,
    pub loops: usize,
    /// Shaders with at least one loop.
    pub with_loops: usize,
    pub max_demand: [i64; MAX_FILES],
}

impl Totals {
    pub fn add(&mut self, s: &Stats) {
        self.instructions += s.instructions;
        self.phis += s.phis;
        self.blocks += s.blocks;
        self.loops += s.loops;
        self.with_loops += (s.loops > 0) as usize;
        for (t, d) in self.max_demand.iter_mut().zip(s.max_demand.0) {
            *t += d as i64;
        }
    }
}

impl Comparison {
    pub fn add(&mut self, before: &Stats, after: &Stats) {
        self.shaders += 1;
        self.before.add(before);
        self.after.add(after);
        if after.instructions < before.instructions {
            self.helped += 1;
        } else if after.instructions > before.instructions {
            self.hurt += 1;
        }
        let (b, a) = (before.max_demand.0, after.max_demand.0);
        let (sb, sa): (i32, i32) = (b.iter().sum(), a.iter().sum());
        if sa > sb {
            self.sum_hurt += 1;
        } else if sa < sb {
            self.sum_helped += 1;
        }
        if a.iter().zip(b).any(|(a, b)| *a > b) {
            self.demand_hurt += 1;
        } else if a.iter().zip(b).any(|(a, b)| *a < b) {
            self.demand_helped += 1;
        }
    }

    /// shader-db-style report; `files` names the register files (index order).
    pub fn report(&self, files: &[&str]) -> String {
        let pct = |b: i64, a: i64| {
            if b == 0 {
                0.0
            } else {
                100.0 * (a - b) as f64 / b as f64
            }
        };
        let line = |what: &str, b: i64, a: i64| {
            format!(
                "total {what} in shared programs: {b} -> {a} ({:+.2}%)\n",
                pct(b, a)
            )
        };
        let mut s = String::new();
        s += &line(
            "instructions",
            self.before.instructions as i64,
            self.after.instructions as i64,
        );
        s += &line("phis", self.before.phis as i64, self.after.phis as i64);
        s += &line(
            "blocks",
            self.before.blocks as i64,
            self.after.blocks as i64,
        );
        s += &line("loops", self.before.loops as i64, self.after.loops as i64);
        s += &line(
            "shaders with a loop",
            self.before.with_loops as i64,
            self.after.with_loops as i64,
        );
        for (k, name) in files.iter().enumerate() {
            s += &line(
                &format!("max demand ({name})"),
                self.before.max_demand[k],
                self.after.max_demand[k],
            );
        }
        s += &format!(
            "instructions: helped {} hurt {} of {} shaders\n",
            self.helped, self.hurt, self.shaders
        );
        s += &format!(
            "max demand, every file: helped {} hurt {} of {} shaders\n",
            self.demand_helped, self.demand_hurt, self.shaders
        );
        s += &format!(
            "max demand, units of all files: helped {} hurt {} of {} shaders\n",
            self.sum_helped, self.sum_hurt, self.shaders
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::parse_function;

    #[test]
    fn counts_and_compares() {
        let f = parse_function(
            "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = flt %0, %1
    if.divergent %2, bb1, bb2, bb2
bb1:
    jump bb2
bb2:
    %3:v1 = phi %0, %1
    output 0, %3
    return
}
",
        )
        .unwrap();
        let mut cx = Context::new(f);
        let s = Stats::of(&mut cx).unwrap();
        assert_eq!((s.instructions, s.phis, s.blocks, s.loops), (7, 1, 3, 0));
        let looped =
            kiln_ir::parse_function(include_str!("../../../examples/seed003_loop.kir")).unwrap();
        assert_eq!(Stats::with_demand(&looped, Demand::ZERO).loops, 1);
        assert_eq!(s.max_demand.0[0], 3);
        let mut fewer = s;
        fewer.instructions = 5;
        let mut c = Comparison::default();
        c.add(&s, &fewer);
        c.add(&s, &s);
        assert_eq!((c.helped, c.hurt, c.shaders), (1, 0, 2));
        let r = c.report(&["v", "s"]);
        assert!(
            r.contains("total instructions in shared programs: 14 -> 12 (-14.29%)"),
            "{r}"
        );
    }
}
