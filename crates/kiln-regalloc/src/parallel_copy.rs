//! Parallel copies to sequential moves (Boissinot et al., "Revisiting out-of-SSA translation for
//! correctness, code quality and efficiency", 2009, algorithm 1; ir3's
//! `ir3_lower_parallelcopy.c` does the same per component).
//!
//! A parallel copy reads every source before it writes any destination. Copies are split into
//! units; a unit whose value no pending copy still needs is written first (a tree of copies
//! empties leaf first), and what remains are cycles, broken with the free scratch unit when
//! there is one, else with swaps. Sources that are constants are written last (nothing reads
//! them). Cost: O(units) moves, at most one extra move or swap per cycle.

use rustc_hash::FxHashMap as HashMap;

/// Where a unit's value comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Source {
    Unit(u32),
    Const(u32),
}

/// One sequential step on units of one register file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Step {
    /// `dst ← src`.
    Move { dst: u32, src: Source },
    /// Exchange the values of two units.
    Swap { a: u32, b: u32 },
}

/// Orders the unit copies `(dst, src)` of one parallel copy into moves and swaps with the same
/// effect. Destinations must be distinct. `scratch`, a unit that holds nothing live and is no
/// destination, breaks cycles with one move instead of a chain of swaps.
pub fn sequentialize(copies: &[(u32, Source)], scratch: Option<u32>) -> Vec<Step> {
    let mut steps = Vec::with_capacity(copies.len() + 1);
    // pred[d]: where d's value comes from; readers[s]: how many pending copies read unit s.
    let mut pred: HashMap<u32, u32> = HashMap::default();
    let mut readers: HashMap<u32, u32> = HashMap::default();
    let mut constants = Vec::new();
    for &(d, s) in copies {
        match s {
            Source::Const(_) => constants.push((d, s)),
            Source::Unit(s) if s == d => {}
            Source::Unit(s) => {
                pred.insert(d, s);
                *readers.entry(s).or_default() += 1;
            }
        }
    }
    // Where each source's value currently is (it moves when a cycle is broken).
    let mut loc: HashMap<u32, u32> = pred.values().map(|&s| (s, s)).collect();
    let mut dsts: Vec<u32> = pred.keys().copied().collect();
    dsts.sort_unstable();
    let mut ready: Vec<u32> = dsts
        .iter()
        .copied()
        .filter(|d| readers.get(d).copied().unwrap_or(0) == 0)
        .collect();
    let mut done = 0;
    let total = dsts.len();
    let mut next_cycle = dsts.iter();
    while done < total {
        while let Some(d) = ready.pop() {
            let Some(&s) = pred.get(&d) else { continue };
            let from = loc[&s];
            steps.push(Step::Move {
                dst: d,
                src: Source::Unit(from),
            });
            pred.remove(&d);
            done += 1;
            let r = readers.get_mut(&s).expect("a source has readers");
            *r -= 1;
            // (A unit saved to the scratch unit was made ready already and is done by now.)
            if *r == 0 && pred.contains_key(&s) {
                ready.push(s);
            }
        }
        if done == total {
            break;
        }
        // Only cycles remain: every pending destination is also a pending source.
        let Some(&start) = next_cycle.find(|d| pred.contains_key(d)) else {
            break;
        };
        match scratch {
            Some(t) => {
                // Save start's value; the copies reading it read the scratch unit instead.
                steps.push(Step::Move {
                    dst: t,
                    src: Source::Unit(start),
                });
                // Its readers now read the scratch unit, so start may be written.
                loc.insert(start, t);
                ready.push(start);
            }
            None => {
                // Rotate the cycle with swaps: start ← pred(start) ← ... each swap settles one.
                let mut d = start;
                loop {
                    let s = pred[&d];
                    if s == start {
                        // The last unit of the cycle already holds start's old value.
                        pred.remove(&d);
                        done += 1;
                        break;
                    }
                    steps.push(Step::Swap { a: d, b: s });
                    pred.remove(&d);
                    done += 1;
                    d = s;
                }
            }
        }
    }
    steps.extend(
        constants
            .into_iter()
            .map(|(dst, src)| Step::Move { dst, src }),
    );
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::generate::Rng;

    /// Runs the steps on a register file whose units start holding their own numbers.
    fn run(steps: &[Step], units: u32) -> Vec<u32> {
        let mut r: Vec<u32> = (0..units).collect();
        for s in steps {
            match *s {
                Step::Move { dst, src } => {
                    r[dst as usize] = match src {
                        Source::Unit(u) => r[u as usize],
                        Source::Const(c) => c,
                    }
                }
                Step::Swap { a, b } => r.swap(a as usize, b as usize),
            }
        }
        r
    }

    /// Random parallel copies with shared sources, chains and cycles, with and without a
    /// scratch unit: the sequence gives every destination its source's old value and leaves
    /// every other unit (but the scratch) alone, with at most one extra step per cycle.
    #[test]
    fn sequential_steps_do_what_the_parallel_copy_does() {
        let mut rng = Rng::new(0xc0b7);
        let units = 10;
        for case in 0..20_000 {
            let n = 1 + rng.below(8);
            let mut dsts: Vec<u32> = (0..units - 1).collect();
            for i in (1..dsts.len()).rev() {
                dsts.swap(i, rng.below(i + 1));
            }
            let copies: Vec<(u32, Source)> = dsts[..n]
                .iter()
                .map(|&d| {
                    let src = if rng.chance(10) {
                        Source::Const(1000 + rng.below(5) as u32)
                    } else {
                        Source::Unit(rng.below(units as usize - 1) as u32)
                    };
                    (d, src)
                })
                .collect();
            let scratch = (case % 2 == 0).then_some(units - 1);
            let steps = sequentialize(&copies, scratch);
            let got = run(&steps, units);
            for u in 0..units - 1 {
                let want = match copies.iter().find(|c| c.0 == u) {
                    Some((_, Source::Unit(s))) => *s,
                    Some((_, Source::Const(c))) => *c,
                    None => u,
                };
                assert_eq!(
                    got[u as usize], want,
                    "unit {u} after {copies:?} as {steps:?}"
                );
            }
            let real = copies
                .iter()
                .filter(|(d, s)| *s != Source::Unit(*d))
                .count();
            assert!(
                steps.len() <= real + real / 2 + 1,
                "{copies:?} took {steps:?}"
            );
        }
    }

    #[test]
    fn a_swap_of_two_is_one_swap_or_three_moves() {
        let swap = [(0, Source::Unit(1)), (1, Source::Unit(0))];
        assert_eq!(sequentialize(&swap, None), vec![Step::Swap { a: 0, b: 1 }]);
        assert_eq!(sequentialize(&swap, Some(5)).len(), 3);
        // A chain needs no extra step: 2 ← 1, 1 ← 0.
        let chain = [(1, Source::Unit(0)), (2, Source::Unit(1))];
        assert_eq!(sequentialize(&chain, None).len(), 2);
    }
}
