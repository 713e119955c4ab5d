//! `Function::compact_temps` on random programs: with an unused number put before every temp
//! (and a few after the last), compacting gives the program back exactly — every temp its old
//! number, class and uses — and the verifier accepts both.

use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Function, RegClass, Temp, Value, verify};
use proptest::prelude::*;

/// `func` with temp t renumbered 2t + 1, the even numbers (and three past the end) defined by
/// nothing and given some class.
fn spread(func: &Function) -> Function {
    let mut out = func.clone();
    let filler = func
        .temps
        .iter()
        .copied()
        .find(|c| !c.is_none())
        .unwrap_or(RegClass::NONE);
    out.temps = func.temps.iter().flat_map(|&c| [filler, c]).collect();
    out.temps.extend([filler; 3]);
    let moved = |t: Temp| Temp(2 * t.0 + 1);
    for inst in out.blocks.iter_mut().flat_map(|b| &mut b.insts) {
        for d in &mut inst.defs {
            d.temp = moved(d.temp);
        }
        for o in &mut inst.operands {
            if let Value::Temp(t) = &mut o.value {
                *t = moved(*t);
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn compacting_a_spread_program_gives_it_back(seed in any::<u64>(), size in 10usize..250) {
        let mut func = generate(&GenConfig { size, ..GenConfig::new(seed) });
        // Only the temps the program names count: the generator may leave some unnamed.
        let named = func.compact_temps();
        prop_assert!(named.windows(2).all(|w| match (w[0], w[1]) {
            (Some(a), Some(b)) => a < b,
            _ => true,
        }), "the order of the temps is kept");
        prop_assert!(verify(&func).is_ok());
        let mut wide = spread(&func);
        prop_assert!(verify(&wide).is_ok());
        let map = wide.compact_temps();
        prop_assert_eq!(&wide, &func);
        for (old, new) in map.iter().enumerate() {
            let want = (old % 2 == 1 && old / 2 < func.temps.len()).then(|| Temp::new(old / 2));
            prop_assert_eq!(*new, want, "temp {}", old);
        }
        // A compact program stays as it is.
        let again = wide.compact_temps();
        prop_assert_eq!(&wide, &func);
        prop_assert!(again.iter().enumerate().all(|(k, m)| *m == Some(Temp::new(k))));
    }
}
