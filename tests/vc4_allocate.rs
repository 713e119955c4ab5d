//! Allocation on vc4's register classes: what a threaded shader's classes reach bounds what can
//! be live at once, and a demand above it is refused before any colouring.

use kiln_ir::text::parse_function_with;
use kiln_regalloc::{Allocator, RaError, RaOptions, allocate};

/// `n` values live at once (read back in a chain of adds), on vc4 with `threads`.
fn live_at_once(threads: u32, n: usize) -> kiln_ir::Function {
    let mut text = format!("target vc4(threads={threads})\n\nfunction @f {{\nbb0:\n");
    for i in 0..n {
        text += &format!("    %{i}:q1.a_or_b_or_acc = input {i}\n");
    }
    let mut sum = 0;
    for i in 1..n {
        let d = n + i;
        text += &format!("    %{d}:q1.a_or_b_or_acc = qpu_fadd %{sum}, %{i}\n");
        sum = d;
    }
    text += &format!("    output 0, %{sum}\n    return\n}}\n");
    parse_function_with(&text, &kiln::targets()).expect("the test's function parses")
}

fn refusing(allocator: Allocator) -> RaOptions {
    RaOptions {
        allocator,
        refuse_spilling: true,
        check: true,
        ..RaOptions::default()
    }
}

/// Seed 002's counts: four accumulators and every register of A and B but ra14/rb14, the
/// lower half of each in a threaded shader.
#[test]
fn the_classes_reach_the_thread_modes_registers() {
    for (threads, per_file) in [(1u32, 31u32), (2, 15)] {
        let f = live_at_once(threads, 4);
        assert_eq!(RaOptions::default().limits_for(&f), vec![4 + 2 * per_file]);
        assert_eq!(RaOptions::default().limits(&*f.target), vec![69]);
    }
}

/// As many values as the classes reach allocate; one more is refused as spilling, by both
/// allocators, in both thread modes.
#[test]
fn a_demand_past_the_reach_is_refused() {
    for threads in [1u32, 2] {
        let reach = RaOptions::default().limits_for(&live_at_once(threads, 1))[0] as usize;
        for allocator in [Allocator::Graph, Allocator::Ssa] {
            let mut fits = live_at_once(threads, reach);
            allocate(&mut fits, &refusing(allocator))
                .unwrap_or_else(|e| panic!("{reach} values, {threads} threads: {e}"));
            let mut over = live_at_once(threads, reach + 1);
            match allocate(&mut over, &refusing(allocator)) {
                Err(RaError::WouldSpill { .. }) => {}
                other => panic!("{} values, {threads} threads: {other:?}", reach + 1),
            }
            // Refused, the function is the input again (the attempt worked on it in place),
            // its instructions the same but for the kill flags liveness wrote.
            let input = live_at_once(threads, reach + 1);
            assert_eq!(over.temps, input.temps);
            let shape = |f: &kiln_ir::Function| -> Vec<_> {
                f.blocks
                    .iter()
                    .flat_map(|b| &b.insts)
                    .map(|i| {
                        (
                            i.op,
                            i.imms.clone(),
                            i.defs.clone(),
                            i.operands.iter().map(|o| o.value).collect::<Vec<_>>(),
                        )
                    })
                    .collect()
            };
            assert_eq!(
                shape(&over),
                shape(&input),
                "{threads} threads, {allocator:?}"
            );
        }
    }
}
