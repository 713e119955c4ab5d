//! Register demand of one instruction per register file, exactly as seed 000 (ACO's
//! `aco_live_var_analysis.cpp` description) defines it. [`InstDemand::compute`] is the one
//! function that computes it; liveness, the spiller and the allocators all call it.

use kiln_ir::{Demand, Inst, RegClass};

/// The quantities of seed 000 for one instruction, each a per-file [`Demand`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct InstDemand {
    /// Temps live after the instruction.
    pub live_out: Demand,
    /// Definitions used later.
    pub live_definitions: Demand,
    /// Definitions not used later.
    pub dead_definitions: Demand,
    /// `first_kill && !late_kill` operands.
    pub early_kill_operands: Demand,
    /// `first_kill && late_kill` operands.
    pub late_kill_operands: Demand,
    /// `(copy_kill && !late_kill) || (clobbered && !kill)` operands.
    pub early_kill_copies: Demand,
    /// `copy_kill && late_kill` operands.
    pub late_kill_copies: Demand,
}

impl InstDemand {
    /// Computes the quantities from the instruction's flags and the demand live after it;
    /// `classes` is the function's per-temp class table ([`kiln_ir::Function::temps`]).
    /// Phi operands are used at the predecessors and count nothing here.
    pub fn compute(classes: &[RegClass], inst: &Inst, live_out: Demand) -> InstDemand {
        let mut d = InstDemand {
            live_out,
            ..InstDemand::default()
        };
        for def in &inst.defs {
            let size = Demand::of(classes[def.temp.index()]);
            if def.dead {
                d.dead_definitions += size;
            } else {
                d.live_definitions += size;
            }
        }
        if inst.op.is_phi() {
            return d;
        }
        for op in &inst.operands {
            let Some(t) = op.temp_id() else { continue };
            let size = Demand::of(classes[t.index()]);
            if op.is_first_kill() {
                if op.is_late_kill() {
                    d.late_kill_operands += size;
                } else {
                    d.early_kill_operands += size;
                }
            }
            if (op.is_copy_kill() && !op.is_late_kill()) || (op.is_clobbered() && !op.is_kill()) {
                d.early_kill_copies += size;
            } else if op.is_copy_kill() && op.is_late_kill() {
                d.late_kill_copies += size;
            }
        }
        d
    }

    pub fn first_kill_operands(&self) -> Demand {
        self.early_kill_operands + self.late_kill_operands
    }

    /// Temps live before the instruction.
    pub fn live_in(&self) -> Demand {
        self.live_out - self.live_definitions + self.first_kill_operands()
    }

    /// Temps live both before and after.
    pub fn live_through(&self) -> Demand {
        self.live_out - self.live_definitions
    }

    /// Stage `k` (0..=4) in the `live_out` form of seed 000.
    pub fn stage(&self, k: usize) -> Demand {
        let base = self.live_out - self.live_definitions;
        match k {
            0 => base + self.late_kill_operands + self.early_kill_operands,
            1 => {
                base + self.late_kill_operands
                    + self.early_kill_operands
                    + self.early_kill_copies
                    + self.late_kill_copies
            }
            2 => base + self.late_kill_operands + self.late_kill_copies,
            3 => {
                self.live_out
                    + self.dead_definitions
                    + self.late_kill_operands
                    + self.late_kill_copies
            }
            4 => self.live_out,
            _ => panic!("register demand has stages 0..=4, not {k}"),
        }
    }

    /// All five stages.
    pub fn stages(&self) -> [Demand; 5] {
        [0, 1, 2, 3, 4].map(|k| self.stage(k))
    }

    /// `max(stage1, stage3)`: the registers the instruction needs at once.
    pub fn register_demand(&self) -> Demand {
        self.stage(1).max(self.stage(3))
    }

    /// `live_definitions - first_kill_operands` (= live_out - live_in).
    pub fn live_changes(&self) -> Demand {
        self.live_definitions - self.first_kill_operands()
    }

    /// The temporary increase for copies, late kills and dead definitions
    /// (= register_demand - live_out).
    pub fn temp_registers(&self) -> Demand {
        let a = self.early_kill_operands
            + self.late_kill_operands
            + self.early_kill_copies
            + self.late_kill_copies
            - self.live_definitions;
        let b = self.late_kill_operands + self.late_kill_copies + self.dead_definitions;
        a.max(b)
    }

    /// `live_definitions + dead_definitions - early_kill_operands - early_kill_copies`
    /// (= stage3 - stage1).
    pub fn temp_reg_changes(&self) -> Demand {
        self.live_definitions + self.dead_definitions
            - self.early_kill_operands
            - self.early_kill_copies
    }
}
