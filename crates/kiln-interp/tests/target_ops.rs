//! Target opcodes run in the interpreter by the meaning their target gives them, checked
//! against values computed here by hand.

use kiln_interp::{Env, run_ssa};
use kiln_ir::{GenericTarget, Opcode, Target, parse_function};

#[test]
fn generic_target_opcodes_run_with_their_meaning() {
    let func = parse_function(
        "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1.low = input 0
    %1:v1 = input 1
    %2:v1 = umul24 %0, %1
    %3:v1 = sfu_rcp %1
    %4:v1.low = iadd_low %0, %0
    output 0, %2
    output 1, %3
    output 2, %4
    return
}
",
    )
    .unwrap();
    let mut env = Env::new(4);
    let a = [3u32, 0x0100_0005, 0xffff_ffff, 7];
    let b = [4.0f32, 0.5, -2.0, 0.0];
    env.inputs.insert(0, a.to_vec());
    env.inputs
        .insert(1, b.iter().map(|x| x.to_bits()).collect());
    let out = run_ssa(&func, &env).unwrap();
    let value = |slot: u32, lane: usize| out.slots[&slot][lane].as_ref().and_then(|u| u[0]);
    for lane in 0..4 {
        let mul = (a[lane] & 0xff_ffff).wrapping_mul(b[lane].to_bits() & 0xff_ffff);
        assert_eq!(value(0, lane), Some(mul), "umul24 lane {lane}");
        assert_eq!(
            value(1, lane),
            Some((1.0 / b[lane]).to_bits()),
            "sfu_rcp lane {lane}"
        );
        assert_eq!(value(2, lane), Some(a[lane].wrapping_add(a[lane])));
    }
}

#[test]
fn target_opcode_names_do_not_shadow_shared_ones() {
    let target = GenericTarget::new(16, 8);
    for t in target.opcodes() {
        assert!(Opcode::from_name(t.info.name).is_none(), "{}", t.info.name);
        let op = Opcode::from_name_in(t.info.name, &target).unwrap();
        assert_eq!(op.info().name, t.info.name);
        assert!(!op.is_terminator());
    }
}
