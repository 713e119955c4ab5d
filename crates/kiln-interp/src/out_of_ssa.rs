//! The reference out-of-SSA assignment: every temp gets registers of its own in unbounded files,
//! and phis become copies (Sreedhar et al.'s method I, "Translating out of static single
//! assignment form", 1999): each phi gets a fresh register, written by a copy at the end of every
//! predecessor and read into the phi's own register by a copy at the start of the block. The
//! isolation avoids the lost-copy and swap problems on the linear CFG's critical edges without
//! splitting them. Copies for logical phis write the active lanes; copies for linear phis write
//! every lane.

use kiln_ir::{Cfg, Def, Function, Inst, Opcode, Operand, PhysReg, RegClass, Temp};
use std::sync::Arc;

/// Units of every file of the unbounded target.
const UNITS: u32 = kiln_ir::MAX_GENERIC_UNITS;

/// Returns an allocated copy of the SSA function `func` in which no two temps share a register.
pub fn reference_assignment(func: &Function) -> Result<Function, String> {
    let cfg = Cfg::compute(func).map_err(|e| format!("{}: {}", e.block, e.message))?;
    reference_assignment_with_cfg(func, &cfg)
}

/// [`reference_assignment`] with the function's CFG at hand (`Cfg::compute(func)`).
pub fn reference_assignment_with_cfg(func: &Function, cfg: &Cfg) -> Result<Function, String> {
    let mut out = func.clone();
    out.target = Arc::new(kiln_ir::ResizedTarget::unbounded(
        func.target.clone(),
        UNITS,
    ));
    out.allocated = true;
    let mut next = vec![0u32; func.target.files().len()];
    let mut reg_of = vec![None; func.temps.len()];
    let assign = |class: RegClass, next: &mut Vec<u32>| -> Result<PhysReg, String> {
        let n = &mut next[class.file.index()];
        let align = class.align.max(1) as u32;
        let unit = n.div_ceil(align) * align;
        *n = unit
            .checked_add(class.size as u32)
            .filter(|&end| end <= UNITS)
            .ok_or("the function has more temps than the reference assignment's files hold")?;
        Ok(PhysReg::new(class.file, unit))
    };
    for (t, class) in func.temps.iter().enumerate() {
        if !class.is_none() {
            reg_of[t] = Some(assign(*class, &mut next)?);
        }
    }
    // Phis: isolate each through a fresh temp and register.
    let mut pred_copies: Vec<[Vec<(Temp, Operand)>; 2]> =
        vec![[Vec::new(), Vec::new()]; func.blocks.len()];
    for b in func.block_ids() {
        let block = out.block_mut(b);
        let nphi = block.phi_count();
        let phis: Vec<Inst> = block.insts.drain(..nphi).collect();
        let mut entry_copies: [Inst; 2] = [
            Inst::new(Opcode::ParallelCopy),
            Inst::new(Opcode::ParallelCopy),
        ];
        entry_copies[1].flags.all_lanes = true;
        for phi in phis {
            let linear = phi.op == Opcode::LinearPhi;
            let dest = phi.defs[0].temp;
            let class = func.class(dest);
            let fresh = out.new_temp(class);
            reg_of.push(Some(assign(class, &mut next)?));
            let preds = if linear {
                &cfg.linear.preds[b.index()]
            } else {
                &cfg.logical.preds[b.index()]
            };
            for (op, p) in phi.operands.iter().zip(preds) {
                pred_copies[p.index()][linear as usize].push((fresh, *op));
            }
            let c = &mut entry_copies[linear as usize];
            c.defs.push(Def::new(dest));
            c.operands.push(Operand::temp(fresh));
        }
        let block = out.block_mut(b);
        for c in entry_copies
            .into_iter()
            .rev()
            .filter(|c| !c.defs.is_empty())
        {
            block.insts.insert(0, c);
        }
    }
    for (b, copies) in pred_copies.into_iter().enumerate() {
        for (linear, copies) in copies.into_iter().enumerate() {
            if copies.is_empty() {
                continue;
            }
            let mut pc = Inst::new(Opcode::ParallelCopy);
            pc.flags.all_lanes = linear == 1;
            for (t, op) in copies {
                pc.defs.push(Def::new(t));
                pc.operands.push(op);
            }
            let insts = &mut out.blocks[b].insts;
            let at = insts.len() - 1;
            insts.insert(at, pc);
        }
    }
    // Registers on every operand and definition; flags of the SSA program no longer apply.
    for block in &mut out.blocks {
        for inst in &mut block.insts {
            for d in &mut inst.defs {
                d.reg = reg_of[d.temp.index()];
                d.fixed = None;
                d.tied = None;
            }
            for op in &mut inst.operands {
                op.flags = kiln_ir::OperandFlags::empty();
                op.fixed = None;
                if let Some(t) = op.temp_id() {
                    op.reg = reg_of[t.index()];
                }
            }
        }
    }
    Ok(out)
}
