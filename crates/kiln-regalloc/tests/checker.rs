//! The checker against the SIMT interpreter: it accepts the reference assignment of generated
//! programs, and it rejects every corruption of an allocation that changes what the program
//! computes (merged registers, dropped copies, copies that write the wrong lanes, single operands
//! moved to another register).

use kiln_interp::out_of_ssa::reference_assignment;
use kiln_interp::{Env, compare, run_ssa};
use kiln_ir::generate::{GenConfig, Rng, generate};
use kiln_ir::{Function, Opcode, PhysReg, Temp, print_function};
use kiln_regalloc::checker::check;
use kiln_regalloc::{RaOptions, allocate_with_input};

fn programs(n: u64) -> impl Iterator<Item = (u64, Function)> {
    (0..n).map(|seed| {
        let cfg = if seed % 4 == 0 {
            GenConfig::high_pressure(seed)
        } else {
            GenConfig {
                size: 20 + (seed % 150) as usize,
                ..GenConfig::new(seed)
            }
        };
        (seed, generate(&cfg))
    })
}

#[test]
fn reference_assignments_pass() {
    for (seed, func) in programs(200) {
        let alloc = reference_assignment(&func).unwrap();
        if let Err(e) = check(&func, &alloc) {
            panic!("seed {seed}: {}\n{}", e[0], print_function(&alloc));
        }
    }
}

/// Where each temp's register is, from its first definition.
fn reg_of(f: &Function, t: Temp) -> Option<PhysReg> {
    f.blocks
        .iter()
        .flat_map(|b| &b.insts)
        .flat_map(|i| &i.defs)
        .find(|d| d.temp == t)
        .and_then(|d| d.reg)
}

/// `alloc` with every definition and read of `victim` in `into`'s register.
fn merged(alloc: &Function, victim: Temp, into: Temp) -> Function {
    let r = reg_of(alloc, into);
    let mut f = alloc.clone();
    for inst in f.blocks.iter_mut().flat_map(|b| &mut b.insts) {
        inst.defs
            .iter_mut()
            .filter(|d| d.temp == victim)
            .for_each(|d| d.reg = r);
        for op in inst
            .operands
            .iter_mut()
            .filter(|o| o.temp_id() == Some(victim))
        {
            op.reg = r;
        }
    }
    f
}

/// One random corruption of `alloc`, or `None` when the chosen kind does not apply.
fn mutate(alloc: &Function, rng: &mut Rng) -> Option<(String, Function)> {
    let mut f = alloc.clone();
    let sites: Vec<(usize, usize)> = f
        .blocks
        .iter()
        .enumerate()
        .flat_map(|(b, blk)| (0..blk.insts.len()).map(move |k| (b, k)))
        .collect();
    let temps: Vec<Temp> = (0..f.temps.len())
        .filter(|&t| f.temps[t].size == 1 && reg_of(&f, Temp(t as u32)).is_some())
        .map(|t| Temp(t as u32))
        .collect();
    if temps.len() < 2 {
        return None;
    }
    let copies: Vec<(usize, usize)> = sites
        .iter()
        .copied()
        .filter(|&(b, k)| f.blocks[b].insts[k].op == Opcode::ParallelCopy)
        .collect();
    let reloads: Vec<(usize, usize)> = sites
        .iter()
        .copied()
        .filter(|&(b, k)| f.blocks[b].insts[k].op == Opcode::Reload)
        .collect();
    match rng.below(5) {
        4 => {
            // A reload from another slot.
            let &(b, k) = reloads.get(rng.below(reloads.len().max(1)))?;
            let inst = &mut f.blocks[b].insts[k];
            inst.imms[0] ^= 1 + rng.below(3) as u32;
            Some((format!("bb{b}:{k}: reload from slot {}", inst.imms[0]), f))
        }
        0 => {
            // Merge one temp's register into another's.
            let (a, b) = (temps[rng.below(temps.len())], temps[rng.below(temps.len())]);
            if a == b || f.class(a) != f.class(b) {
                return None;
            }
            Some((format!("{b} moved to {a}'s register"), merged(&f, b, a)))
        }
        1 => {
            // Drop one copy of a parallel copy.
            let &(b, k) = copies.get(rng.below(copies.len().max(1)))?;
            let inst = &mut f.blocks[b].insts[k];
            let j = rng.below(inst.defs.len());
            inst.defs.remove(j);
            inst.operands.remove(j);
            if inst.defs.is_empty() {
                f.blocks[b].insts.remove(k);
            }
            Some((format!("bb{b}:{k}: copy {j} dropped"), f))
        }
        2 => {
            // A copy that writes all lanes, or only the active ones.
            let &(b, k) = copies.get(rng.below(copies.len().max(1)))?;
            let inst = &mut f.blocks[b].insts[k];
            inst.flags.all_lanes = !inst.flags.all_lanes;
            Some((format!("bb{b}:{k}: all_lanes flipped"), f))
        }
        _ => {
            // One operand reads another temp's register.
            let &(b, k) = sites.get(rng.below(sites.len()))?;
            let other = temps[rng.below(temps.len())];
            let r = reg_of(&f, other);
            let inst = &mut f.blocks[b].insts[k];
            let ops: Vec<usize> = (0..inst.operands.len())
                .filter(|&j| {
                    inst.operands[j].temp_id().is_some_and(|t| {
                        alloc.class(t) == alloc.class(other) && inst.operands[j].reg != r
                    })
                })
                .collect();
            let &j = ops.get(rng.below(ops.len().max(1)))?;
            inst.operands[j].reg = r;
            Some((
                format!("bb{b}:{k}: operand {j} reads {other}'s register"),
                f,
            ))
        }
    }
}

/// Corrupts the allocations `allocate` makes of generated programs, 12 times each: every
/// corruption that changes an output in the SIMT interpreter must fail the checker, given the
/// SSA function the allocation is of. Returns (tried, changing an output, rejected).
fn corruptions_caught(
    rng: &mut Rng,
    programs: impl Iterator<Item = (u64, Function)>,
    allocate: impl Fn(u64, &Function) -> Option<(Function, Function)>,
) -> (usize, usize, usize) {
    let (mut tried, mut meaningful, mut rejected) = (0, 0, 0);
    for (seed, func) in programs {
        let env = Env {
            step_limit: 20_000,
            ..Env::for_function(&func, 16, seed)
        };
        if run_ssa(&func, &env).is_err() {
            continue;
        }
        let Some((ssa, alloc)) = allocate(seed, &func) else {
            continue;
        };
        for _ in 0..12 {
            let Some((what, bad)) = mutate(&alloc, rng) else {
                continue;
            };
            tried += 1;
            let verdict = check(&ssa, &bad);
            rejected += verdict.is_err() as usize;
            if let Err(m) = compare(&func, &bad, &env) {
                meaningful += 1;
                assert!(
                    verdict.is_err(),
                    "seed {seed}: {what} changes the output but passes the checker: {m}\n{}",
                    print_function(&bad)
                );
            }
        }
    }
    eprintln!(
        "{tried} corruptions, {meaningful} change an output (all caught), {rejected} rejected in all"
    );
    (tried, meaningful, rejected)
}

#[test]
fn every_corruption_that_changes_the_output_is_caught() {
    let (_, meaningful, _) = corruptions_caught(&mut Rng::new(0xc4ec), programs(60), |_, f| {
        Some((f.clone(), reference_assignment(f).unwrap()))
    });
    assert!(meaningful > 60, "{meaningful}");
}

/// The same corruptions of the SSA allocator's allocations, at a full and a spilling budget
/// (where reloads can also read the wrong slot): every one that changes an output is rejected.
#[test]
fn every_corruption_of_an_ssa_allocation_that_changes_the_output_is_caught() {
    let (_, meaningful, _) = corruptions_caught(&mut Rng::new(0x55a), programs(80), |seed, f| {
        let budget = if seed % 2 == 0 { 256 } else { 16 };
        let options = RaOptions {
            budget: vec![Some(budget), Some(budget / 2)],
            check: true,
            ..RaOptions::default()
        };
        let mut alloc = f.clone();
        let (_, ssa) = allocate_with_input(&mut alloc, &options).ok()?;
        Some((ssa, alloc))
    });
    assert!(meaningful > 60, "{meaningful}");
}

/// Completeness where it is decidable: two temps that do not interfere (by
/// `kiln_analysis::Interference`) may share a register, and the checker accepts it.
#[test]
fn merging_temps_that_do_not_interfere_is_accepted() {
    let mut rng = Rng::new(0x5afe);
    let mut accepted = 0;
    for (seed, mut func) in programs(60) {
        let cfg = kiln_ir::Cfg::compute(&func).unwrap();
        let lv = kiln_analysis::compute_liveness(&mut func, &cfg);
        let inter = kiln_analysis::Interference::new(&func, &cfg, &lv);
        let alloc = reference_assignment(&func).unwrap();
        let temps: Vec<Temp> = (0..func.temps.len() as u32)
            .map(Temp)
            .filter(|&t| func.temps[t.index()].size == 1 && reg_of(&alloc, t).is_some())
            .collect();
        for _ in 0..40 {
            let (a, b) = (temps[rng.below(temps.len())], temps[rng.below(temps.len())]);
            if a == b || func.class(a) != func.class(b) || inter.interferes(&func, a, b) {
                continue;
            }
            // Dead phis of one block are copied in by one parallel copy in the reference
            // assignment: one register for both would be a malformed copy, not a sound merge.
            let together =
                alloc.blocks.iter().flat_map(|b| &b.insts).any(|i| {
                    i.defs.iter().any(|d| d.temp == a) && i.defs.iter().any(|d| d.temp == b)
                });
            if together {
                continue;
            }
            let merged = merged(&alloc, b, a);
            if let Err(e) = check(&func, &merged) {
                panic!(
                    "seed {seed}: {b} in {a}'s register is sound, yet: {}\n{}",
                    e[0],
                    print_function(&merged)
                );
            }
            accepted += 1;
        }
    }
    assert!(accepted > 500, "{accepted}");
}
