//! Constant folding and algebraic simplification, bit-exact with `docs/semantics.md`: constants
//! are folded with [`kiln_ir::semantics::eval_scalar`], the definition the interpreter executes,
//! identities are applied only where they are exact for every input, and trivial phis go. The
//! design is in `docs/middle.md` ("Constant folding and simplification").

use crate::util::{Avail, set_value};
use kiln_analysis::{Changed, Context, PassError};
use kiln_ir::semantics::eval_scalar;
use kiln_ir::{Block, Function, Inst, Opcode, Operand, Temp, Value};

/// What an instruction simplifies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Simple {
    Const(u32),
    /// A `mov` of this value.
    Copy(Value),
}

const TRUE: u32 = u32::MAX;

fn is_comparison(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Ieq | Ine | Ilt | Ile | Ult | Ule | Feq | Fne | Flt | Fle
    )
}

/// The instruction defining `t`, if any.
fn def_of<'f>(func: &'f Function, avail: &Avail, t: Temp) -> Option<&'f Inst> {
    let (b, i) = avail.sites().get(t.index()).copied().flatten()?;
    func.block(b).insts.get(i)
}

/// The simplification of a scalar instruction, if any.
fn simplify(func: &Function, avail: &Avail, b: Block, inst: &Inst) -> Option<Simple> {
    use Opcode::*;
    if inst.defs.len() != 1
        || inst.op.info().side_effects
        || func.class(inst.defs[0].temp).size != 1
    {
        return None;
    }
    let ops = &inst.operands;
    let consts: Option<Vec<u32>> = ops
        .iter()
        .map(|o| match o.value {
            Value::Const(c) => Some(c),
            _ => None,
        })
        .collect();
    if let Some(cs) = &consts
        && !cs.is_empty()
        && let Some(v) = eval_scalar(inst.op, cs)
    {
        return Some(Simple::Const(v));
    }
    let c = |k: usize| match ops.get(k).map(|o| o.value) {
        Some(Value::Const(c)) => Some(c),
        _ => None,
    };
    let v = |k: usize| ops[k].value;
    let same = ops.len() == 2 && matches!(v(0), Value::Temp(_)) && v(0) == v(1);
    let copy = |k: usize| Some(Simple::Copy(v(k)));
    // The operand of the instruction defining operand k, if that instruction is `op`, and the
    // value may be read here.
    let inner = |k: usize, want: &[Opcode]| -> Option<Value> {
        let t = ops[k].temp_id()?;
        let d = def_of(func, avail, t)?;
        if !want.contains(&d.op) || d.operands.len() != 1 || d.flags.all_lanes {
            return None;
        }
        match d.operands[0].value {
            Value::Temp(x) if avail.reaches(x, b) => Some(Value::Temp(x)),
            Value::Const(c) => Some(Value::Const(c)),
            _ => None,
        }
    };
    let comparison = |k: usize| {
        ops[k]
            .temp_id()
            .and_then(|t| def_of(func, avail, t))
            .is_some_and(|d| is_comparison(d.op))
    };
    match inst.op {
        Iadd | Ior | Ixor | Umax => {
            if c(1) == Some(0) {
                return copy(0);
            }
            if c(0) == Some(0) {
                return copy(1);
            }
            if same && inst.op == Ixor {
                return Some(Simple::Const(0));
            }
            if same && matches!(inst.op, Ior | Umax) {
                return copy(0);
            }
            if inst.op == Ior && (c(0) == Some(TRUE) || c(1) == Some(TRUE)) {
                return Some(Simple::Const(TRUE));
            }
            if inst.op == Umax && (c(0) == Some(TRUE) || c(1) == Some(TRUE)) {
                return Some(Simple::Const(TRUE));
            }
        }
        Isub => {
            if c(1) == Some(0) {
                return copy(0);
            }
            if same {
                return Some(Simple::Const(0));
            }
        }
        Imul => {
            if c(1) == Some(1) {
                return copy(0);
            }
            if c(0) == Some(1) {
                return copy(1);
            }
            if c(0) == Some(0) || c(1) == Some(0) {
                return Some(Simple::Const(0));
            }
        }
        Iand | Umin => {
            if c(1) == Some(TRUE) {
                return copy(0);
            }
            if c(0) == Some(TRUE) {
                return copy(1);
            }
            if c(0) == Some(0) || c(1) == Some(0) {
                return Some(Simple::Const(0));
            }
            if same {
                return copy(0);
            }
        }
        Imin | Imax if same => return copy(0),
        Ishl | Ushr | Ishr => {
            if c(1).is_some_and(|s| s & 31 == 0) {
                return copy(0);
            }
            if c(0) == Some(0) || (inst.op == Ishr && c(0) == Some(TRUE)) {
                return Some(Simple::Const(c(0)?));
            }
        }
        Idiv | Udiv if c(1) == Some(1) => return copy(0),
        Irem | Urem if c(1) == Some(1) => return Some(Simple::Const(0)),
        Ieq | Ile | Ule if same => return Some(Simple::Const(TRUE)),
        Ine | Ilt | Ult if same => return Some(Simple::Const(0)),
        // A comparison result is all-ones or zero: `c != 0` is `c`.
        Ine if c(1) == Some(0) && comparison(0) => return copy(0),
        Ine if c(0) == Some(0) && comparison(1) => return copy(1),
        Sel => {
            if let Some(cond) = c(0) {
                return copy(if cond != 0 { 1 } else { 2 });
            }
            if v(1) == v(2) && !matches!(v(1), Value::Undef(_)) {
                return copy(1);
            }
            if c(1) == Some(TRUE) && c(2) == Some(0) && comparison(0) {
                return copy(0);
            }
        }
        Ineg => return inner(0, &[Ineg]).map(Simple::Copy),
        Inot => return inner(0, &[Inot]).map(Simple::Copy),
        Fneg => return inner(0, &[Fneg]).map(Simple::Copy),
        _ => {}
    }
    None
}

/// The value every operand of a phi has, ignoring the phi itself, if there is one.
fn trivial_phi(inst: &Inst) -> Option<Value> {
    let me = Value::Temp(inst.defs[0].temp);
    let mut only = None;
    for op in &inst.operands {
        if op.value == me {
            continue;
        }
        match only {
            None => only = Some(op.value),
            Some(v) if v == op.value => {}
            Some(_) => return None,
        }
    }
    only.filter(|v| !matches!(v, Value::Undef(_)))
}

/// Folds constants and applies exact algebraic identities.
pub fn fold(cx: &mut Context) -> Result<Changed, PassError> {
    let cfg = cx.cfg()?;
    let dom = cx.dominance()?;
    // The first round's definition sites are the context's; later rounds find them again.
    let mut facts = Some(cx.def_sites());
    let func = cx.func_mut();
    let mut changed = false;
    for _round in 0..16 {
        let avail = match facts.take() {
            Some(f) => Avail::with(f, &cfg, &dom),
            None => Avail::new(func, &cfg, &dom),
        };
        let mut subst: Vec<Option<Value>> = vec![None; func.temps.len()];
        let mut round = false;
        for b in cfg.rpo() {
            for i in 0..func.block(b).insts.len() {
                // Operands first, through what earlier instructions folded to.
                let inst = &mut func.block_mut(b).insts[i];
                for op in inst.operands.iter_mut() {
                    if let Value::Temp(t) = op.value
                        && let Some(v) = subst[t.index()]
                    {
                        set_value(op, v);
                        round = true;
                    }
                }
                let inst = &func.block(b).insts[i];
                let result = match inst.op {
                    Opcode::Phi | Opcode::LinearPhi => match trivial_phi(inst) {
                        Some(Value::Const(k)) => Some(Simple::Const(k)),
                        Some(Value::Temp(x)) if avail.can_replace(func, inst.defs[0].temp, x) => {
                            subst[inst.defs[0].temp.index()] = Some(Value::Temp(x));
                            round = true;
                            None
                        }
                        _ => None,
                    },
                    Opcode::Mov => match inst.operands[0].value {
                        Value::Const(k) => Some(Simple::Const(k)),
                        // A copy within one class and lane kind: read the source instead.
                        Value::Temp(x) if avail.can_replace(func, inst.defs[0].temp, x) => {
                            subst[inst.defs[0].temp.index()] = Some(Value::Temp(x));
                            round = true;
                            None
                        }
                        _ => None,
                    },
                    _ => simplify(func, &avail, b, inst),
                };
                // A copy its readers can read through goes now, not as a `mov` the next round
                // would find.
                let result = match result {
                    Some(Simple::Copy(Value::Const(k))) => Some(Simple::Const(k)),
                    Some(Simple::Copy(Value::Temp(x)))
                        if avail.can_replace(func, inst.defs[0].temp, x) =>
                    {
                        subst[inst.defs[0].temp.index()] = Some(Value::Temp(x));
                        round = true;
                        None
                    }
                    r => r,
                };
                match result {
                    Some(Simple::Const(k)) => {
                        let d = inst.defs[0].temp;
                        subst[d.index()] = Some(Value::Const(k));
                        round = true;
                    }
                    Some(Simple::Copy(v)) => {
                        let inst = &mut func.block_mut(b).insts[i];
                        let mut op = Operand::from(v);
                        op.flags = kiln_ir::OperandFlags::empty();
                        inst.op = Opcode::Mov;
                        inst.operands.clear();
                        inst.operands.push(op);
                        for d in inst.defs.iter_mut() {
                            d.tied = None;
                        }
                        round = true;
                    }
                    None => {}
                }
            }
        }
        if !round {
            break;
        }
        changed = true;
        // Back edges: phi operands read values folded later in the walk. Every other operand
        // was read through what folded before it, and every definition a simplification looks
        // at came before it in the walk: where no operand changes here, another round finds
        // nothing.
        let back = crate::util::substitute(func, &subst, |_, _, _, _, _| true);
        // The folded definitions are gone.
        for block in &mut func.blocks {
            block.insts.retain(|inst| {
                !inst
                    .defs
                    .iter()
                    .any(|d| subst.get(d.temp.index()).copied().flatten().is_some())
            });
        }
        if back == 0 {
            break;
        }
    }
    Ok(if changed {
        Changed::Instructions
    } else {
        Changed::Nothing
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::{parse_function, print_function};

    fn run(src: &str) -> String {
        let mut cx = Context::new(parse_function(src).unwrap());
        cx.run("fold", fold).unwrap();
        print_function(cx.func())
    }

    #[test]
    fn folds_constants_bit_exactly() {
        let out = run("target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:v1 = iadd 0xffffffff, 2
    %2:v1 = fmul 0x7f800000, 0
    %3:v1 = fadd -0.0, -0.0
    %4:v1 = fadd -0.0, 0.0
    %5:v1 = idiv 0x80000000, 0xffffffff
    %6:v1 = f2i 0x7fc00000
    %7:v1 = fmul 0x7f800001, 1.0
    %8:v1 = iadd %1, %0
    output 0, %1
    output 1, %2
    output 2, %3
    output 3, %4
    output 4, %5
    output 5, %6
    output 6, %7
    output 7, %8
    return
}
");
        // 0xffffffff + 2 wraps to 1; inf * 0 is NaN; -0 + -0 = -0; -0 + 0 = +0;
        // i32::MIN / -1 = i32::MIN; NaN → int is 0; a signalling NaN times 1 comes out quiet.
        // Computed at run time, as the interpreter does (not by the Rust compiler).
        use std::hint::black_box;
        let nan = black_box(f32::INFINITY) * black_box(0.0);
        let snan_quiet = black_box(f32::from_bits(0x7f80_0001)) * black_box(1.0);
        for want in [
            "output 0, 1\n".to_string(),
            format!("output 1, {:#x}\n", nan.to_bits()),
            "output 2, -0.0\n".into(),
            "output 3, 0\n".into(),
            "output 4, -0.0\n".into(), // 0x80000000 prints as a float
            "output 5, 0\n".into(),
            format!("output 6, {:#x}\n", snan_quiet.to_bits()),
            "%8:v1 = iadd 1, %0".into(),
        ] {
            assert!(out.contains(&want), "missing {want:?} in\n{out}");
        }
        assert!(!out.contains("fmul"), "{out}");
    }

    #[test]
    fn exact_identities_only() {
        let out = run("target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:v1 = iadd %0, 0
    %2:v1 = imul %0, 1
    %3:v1 = ixor %0, %0
    %4:v1 = fmul %0, 1.0
    %5:v1 = fadd %0, -0.0
    %6:v1 = fsub %0, %0
    %7:v1 = ishl %0, 32
    %8:v1 = fneg %0
    %9:v1 = fneg %8
    %10:v1 = flt %0, 1.0
    %11:v1 = sel %10, -1, 0
    %12:v1 = ieq %0, %0
    output 0, %1
    output 1, %2
    output 2, %3
    output 3, %4
    output 4, %5
    output 5, %6
    output 6, %7
    output 7, %9
    output 8, %11
    output 9, %12
    return
}
");
        for want in [
            "output 0, %0\n",
            "output 1, %0\n",
            "output 2, 0\n",
            "%4:v1 = fmul %0, 1.0",
            "%5:v1 = fadd %0, -0.0",
            "%6:v1 = fsub %0, %0",
            "output 6, %0\n",
            "output 7, %0\n",
            "output 8, %10\n",
            "output 9, -1\n",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
    }

    #[test]
    fn loop_carried_constants_and_trivial_phis() {
        let out = run("target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    loop bb1, bb4
bb1:
    %1:v1 = phi 3, %2
    %3:v1 = phi %0, %3
    %4:v1 = ilt %0, %1
    if.divergent %4, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    %2:v1 = iadd %1, 0
    continue bb1
bb4:
    output 0, %1
    output 1, %3
    return
}
");
        assert!(out.contains("%4:v1 = ilt %0, 3"), "{out}");
        assert!(out.contains("output 0, 3\n"), "{out}");
        assert!(out.contains("output 1, %0\n"), "{out}");
        assert!(!out.contains("phi"), "{out}");
    }
}
