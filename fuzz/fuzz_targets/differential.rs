//! Random programs from fuzzer-chosen generator settings: SIMT mode on the reference assignment
//! and on both allocators' allocations (checked, at a fuzzer-chosen budget that may force
//! spilling) must agree with SSA mode; a checker rejection is a failure.
#![no_main]

use kiln_interp::out_of_ssa::reference_assignment;
use kiln_interp::{Env, compare};
use kiln_ir::generate::{GenConfig, generate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 12 {
        return;
    }
    let word = |k: usize| u32::from_le_bytes(data[k..k + 4].try_into().unwrap()) as usize;
    let seed = u64::from_le_bytes(data[0..8].try_into().unwrap());
    let knobs = word(8);
    let cfg = GenConfig {
        size: 5 + knobs % 400,
        pressure: 2 + (knobs >> 9) % 80,
        max_depth: 1 + (knobs >> 16) % 5,
        vectors: knobs & (1 << 24) != 0,
        constraints: knobs & (1 << 25) != 0,
        all_lanes: knobs & (1 << 26) != 0,
        ..GenConfig::new(seed)
    };
    let func = generate(&cfg);
    let env = Env::for_function(&func, 1 + (knobs >> 27) % 32, seed);
    let alloc = reference_assignment(&func).expect("reference assignment");
    if let Err(m) = compare(&func, &alloc, &env) {
        panic!("{m}\n{}", kiln_ir::print_function(&func));
    }
    let budget = 8 + (knobs >> 20) as u32 % 64;
    for allocator in [kiln_regalloc::Allocator::Ssa, kiln_regalloc::Allocator::Graph] {
        let options = kiln_regalloc::RaOptions {
            allocator,
            budget: vec![Some(budget), Some(budget / 2 + 4)],
            check: true,
        };
        let mut allocated = func.clone();
        match kiln_regalloc::allocate(&mut allocated, &options) {
            Ok(_) => {
                if let Err(m) = compare(&func, &allocated, &env) {
                    panic!("{allocator:?}: {m}\n{}", kiln_ir::print_function(&func));
                }
            }
            // One instruction needing more than the budget is a clear error, not a bug; any
            // other error — a checker rejection above all — is.
            Err(kiln_regalloc::RaError::Budget { message, .. })
                if message.contains("for its own operands") && !message.contains("lowered") => {}
            Err(e) => panic!("{allocator:?}: {e}\n{}", kiln_ir::print_function(&func)),
        }
    }
});
