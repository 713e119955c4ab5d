//! Reproducers from the allocators' campaign (`kiln fuzz regalloc`), each the smallest
//! generated program found for one cause, with the component that was wrong
//! (docs/regalloc.md, "The campaign"). Each is allocated checked and run in SIMT mode against
//! the SSA program on 1, 4, 16 and 32 lanes; before its fix each was rejected by the checker
//! or ran wrong.

use kiln_interp::{Env, compare};
use kiln_ir::generate::{GenConfig, generate};
use kiln_regalloc::{Allocator, RaOptions, allocate};

struct Repro {
    /// What was wrong, and where.
    cause: &'static str,
    seed: u64,
    size: usize,
    pressure: usize,
    depth: usize,
    /// Vectors, constraints, all-lanes values.
    features: (bool, bool, bool),
    /// Units of `v`; `s` gets half of it plus 4, as in the campaign.
    v: u32,
    allocator: Allocator,
}

const REPROS: &[Repro] = &[
    Repro {
        cause: "allocator (to_assignment_form): after spilling, the copy of a header linear phi \
                for a divergent loop's exit was a new value, not a version of the spilled one",
        seed: 3_099_619,
        size: 13,
        pressure: 10,
        depth: 4,
        features: (false, false, false),
        v: 4,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "assignment: a phi of a loop body live into the exit shared a home with a header \
                linear phi, whose copy at the latch writes every lane also when the wave leaves \
                (wrong outputs)",
        seed: 7_470_907,
        size: 25,
        pressure: 10,
        depth: 4,
        features: (false, false, false),
        v: 4,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "checker: a linear value delivered along a linear-only edge (a divergent loop's \
                latch to its exit) was unknown in the per-lane view",
        seed: 15_302_208,
        size: 5,
        pressure: 12,
        depth: 4,
        features: (false, false, true),
        v: 4,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "checker: a uniform continue other than the latch also reaches a divergent \
                loop's exit with no lane active; assignment: an all-lanes value defined before a \
                divergent continue's phi copy and live through the rest of the body shared the \
                phi's home",
        seed: 1_000_494,
        size: 10,
        pressure: 15,
        depth: 4,
        features: (false, false, true),
        v: 5,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "checker: two rematerialisations of one constant in one block: the second made \
                the first stale",
        seed: 29_466_060,
        size: 14,
        pressure: 15,
        depth: 2,
        features: (false, false, false),
        v: 4,
        allocator: Allocator::Graph,
    },
    Repro {
        cause: "assignment: a phi that is an operand of a loop header's linear phi sat in the \
                home of a logical phi of that header (internal error: the copies of logical and \
                linear phis feed each other)",
        seed: 10_482_878,
        size: 59,
        pressure: 30,
        depth: 3,
        features: (false, false, true),
        v: 11,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "assignment: a vector operand's block displaced an all-lanes value; the copy \
                naming it wrote every lane of every value it moved",
        seed: 9_657_489,
        size: 109,
        pressure: 49,
        depth: 5,
        features: (true, false, true),
        v: 25,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "assignment (make_room): a value moved out of the way of one definition was moved \
                again for the next definition of the same instruction, both moves in one \
                parallel copy, the second reading where the first wrote (found at a budget of \
                23; it now allocates at 23 and 21 without spilling: an operand may stay away \
                from home, and the assignment tries a colouring's homes before spilling more)",
        seed: 10_923_720,
        size: 94,
        pressure: 36,
        depth: 4,
        features: (true, false, false),
        v: 19,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "spiller: a per-lane value kept in a register along a logical edge that the wave \
                takes only after running blocks that write its file in all lanes (the other side \
                of a divergent if) needs more registers than the demand counts; the assignment \
                found none, and retries at lower budgets failed",
        seed: 1_002_059,
        size: 304,
        pressure: 53,
        depth: 3,
        features: (false, false, true),
        v: 6,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "spiller: the same for the phis of a divergent loop's exit, copied at its breaks \
                while later iterations write in all lanes: they stay in memory",
        seed: 1_116_452,
        size: 198,
        pressure: 42,
        depth: 5,
        features: (false, false, true),
        v: 6,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "spiller: a value kept in a register at a loop header's entry was reloaded at \
                the end of a divergent `continue` block, so its register had to survive the \
                rest of the body in the waiting lanes, past writes of every lane; the \
                assignment found no register at any budget (an error, 20 in 1,000,000 \
                programs, all with all-lanes values)",
        seed: 1_360_572,
        size: 137,
        pressure: 19,
        depth: 3,
        features: (false, false, true),
        v: 6,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "spiller: the same, in a larger program",
        seed: 1_348_880,
        size: 128,
        pressure: 48,
        depth: 4,
        features: (false, false, true),
        v: 6,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "spiller: a linear value it reloaded itself in the then side of a divergent if \
                wrote every lane while a per-lane value living into the else side sat in a \
                register (only the input's all-lanes writes were counted); the assignment \
                found no register at any budget (4 errors in 1,000,000 programs)",
        seed: 1_437_369,
        size: 118,
        pressure: 33,
        depth: 5,
        features: (false, false, true),
        v: 6,
        allocator: Allocator::Ssa,
    },
    Repro {
        cause: "spiller: the same, at a budget of 7 in a larger program",
        seed: 1_825_998,
        size: 164,
        pressure: 61,
        depth: 5,
        features: (false, false, true),
        v: 7,
        allocator: Allocator::Ssa,
    },
];

#[test]
fn campaign_reproducers_allocate_and_agree() {
    let mut failures = Vec::new();
    for r in REPROS {
        let (vectors, constraints, all_lanes) = r.features;
        let func = generate(&GenConfig {
            size: r.size,
            pressure: r.pressure,
            max_depth: r.depth,
            vectors,
            constraints,
            all_lanes,
            ..GenConfig::new(r.seed)
        });
        let options = RaOptions {
            allocator: r.allocator,
            budget: vec![Some(r.v), Some(r.v / 2 + 4)],
            check: true,
            refuse_spilling: false,
        };
        let mut allocated = func.clone();
        match allocate(&mut allocated, &options) {
            Ok(stats) => {
                if stats.spills + stats.remats == 0 {
                    failures.push(format!("seed {}: no longer spills ({})", r.seed, r.cause));
                }
                for lanes in [1, 4, 16, 32] {
                    let env = Env::for_function(&func, lanes, r.seed);
                    if let Err(m) = compare(&func, &allocated, &env) {
                        failures.push(format!(
                            "seed {} on {lanes} lanes: {m} ({})",
                            r.seed, r.cause
                        ));
                    }
                }
            }
            Err(e) => failures.push(format!("seed {}: {e} ({})", r.seed, r.cause)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
