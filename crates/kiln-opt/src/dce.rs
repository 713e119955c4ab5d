//! Dead code elimination (NIR's `nir_opt_dce`): mark from the instructions that must stay —
//! those with side effects (`Opcode::info().side_effects`: outputs, spills, discards,
//! terminators) — through the definitions of every operand they read, transitively, then sweep
//! the rest. Phis are marked like any instruction, so a cycle of phis that only feed each other
//! goes. An all-lanes write (`.all_lanes`, `uniform`, `linear_phi`) writes lanes nobody is
//! active in, but in SSA form nothing but its own temp can observe them: with no reader it is
//! dead too. Linear in the instructions.

use kiln_analysis::{Changed, Context, DefSites, PassError};
use kiln_ir::{Block, BlockData, Function};

/// Removes every instruction without side effects whose definitions nothing live reads.
pub fn dce(cx: &mut Context) -> Result<Changed, PassError> {
    let facts = cx.def_sites();
    let func = cx.func_mut();
    let Some(live) = live(func, &facts.sites) else {
        return Ok(Changed::Nothing);
    };
    for (block, keep) in func.blocks.iter_mut().zip(&live) {
        let mut k = keep.iter();
        block
            .insts
            .retain(|_| *k.next().expect("one flag per instruction"));
    }
    Ok(Changed::Instructions)
}

/// What [`dce`] leaves of `func`, as a copy: only the instructions that stay are copied (for a
/// caller that keeps `func`, the copy a pass would otherwise start from, without the dead code
/// it would then remove); `sites`: the definition sites of `func`. Whether any instruction was
/// left out.
pub fn live_copy(func: &Function, sites: &DefSites) -> (Function, Changed) {
    let Some(live) = live(func, &sites.sites) else {
        return (func.clone(), Changed::Nothing);
    };
    let blocks = func
        .blocks
        .iter()
        .zip(&live)
        .map(|(block, keep)| {
            let mut insts = Vec::with_capacity(keep.iter().filter(|&&k| k).count());
            insts.extend(
                block
                    .insts
                    .iter()
                    .zip(keep)
                    .filter(|&(_, &k)| k)
                    .map(|(inst, _)| inst.clone()),
            );
            BlockData { insts }
        })
        .collect();
    let copy = Function {
        name: func.name.clone(),
        target: func.target.clone(),
        blocks,
        temps: func.temps.clone(),
        allocated: func.allocated,
    };
    (copy, Changed::Instructions)
}

/// Per block, which instructions stay: those with side effects and, transitively, the
/// definitions of what they read (`sites`: each temp's). `None` where every one stays.
fn live(func: &Function, sites: &[Option<(Block, usize)>]) -> Option<Vec<Vec<bool>>> {
    let mut live: Vec<Vec<bool>> = func
        .blocks
        .iter()
        .map(|b| vec![false; b.insts.len()])
        .collect();
    let mut work = Vec::new();
    for (b, block) in func.blocks.iter().enumerate() {
        for (i, inst) in block.insts.iter().enumerate() {
            if inst.op.info().side_effects {
                live[b][i] = true;
                work.push((b, i));
            }
        }
    }
    let mut marked = work.len();
    while let Some((b, i)) = work.pop() {
        for t in func.blocks[b].insts[i].used_temps() {
            if let Some(Some((db, di))) = sites.get(t.index()) {
                let (db, di) = (db.index(), *di);
                if !live[db][di] {
                    live[db][di] = true;
                    marked += 1;
                    work.push((db, di));
                }
            }
        }
    }
    (marked < func.blocks.iter().map(|b| b.insts.len()).sum::<usize>()).then_some(live)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::{parse_function, print_function};

    #[test]
    fn removes_unused_values_and_phi_cycles_keeps_effects() {
        let f = parse_function(
            "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    %2:v1 = fadd %0, %0
    %3:v1 = mov.all_lanes %1
    loop bb1, bb4
bb1:
    %4:v1 = phi %0, %5
    %6:v1 = phi %0, %6
    %7:v1 = ilt %4, 3
    if.divergent %7, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    %5:v1 = iadd %4, 1
    %8:v1 = fmul %6, %6
    continue bb1
bb4:
    output 0, %4
    discard
    return
}
",
        )
        .unwrap();
        let mut cx = Context::new(f);
        assert_eq!(cx.run("dce", dce).unwrap(), Changed::Instructions);
        let text = print_function(cx.func());
        for gone in ["%1:s1", "%2:v1", "%3:v1", "%6:v1", "%8:v1"] {
            assert!(!text.contains(gone), "{gone} survived:\n{text}");
        }
        for kept in [
            "%4:v1 = phi",
            "%5:v1 = iadd",
            "output 0",
            "discard",
            "%7:v1",
        ] {
            assert!(text.contains(kept), "{kept} removed:\n{text}");
        }
        assert_eq!(cx.run("dce", dce).unwrap(), Changed::Nothing);
    }
}
