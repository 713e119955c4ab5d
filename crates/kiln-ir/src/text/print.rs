//! Printing functions as `.kir` text.

use crate::entity::Block;
use crate::function::Function;
use crate::inst::{Def, Inst, Operand, Value};
use crate::regs::{PhysReg, RegClass, Target};
use std::fmt::Write;

/// A class as `v1`, `v3.align1`, `r1.a_or_b`.
pub fn fmt_class(target: &dyn Target, class: RegClass) -> String {
    let file = target
        .files()
        .get(class.file.index())
        .map_or("?", |f| f.name.as_str());
    let mut s = format!("{file}{}", class.size);
    if class.align != target.default_align(class.file, class.size) {
        let _ = write!(s, ".align{}", class.align);
    }
    if let Some(sub) = class.subset {
        let name = target.subset(sub).map_or("?", |s| s.name.as_str());
        let _ = write!(s, ".{name}");
    }
    s
}

/// A physical register as `v[3]`.
pub fn fmt_reg(target: &dyn Target, reg: PhysReg) -> String {
    if let Some(name) = target.reg_name(reg) {
        return name;
    }
    let file = target
        .files()
        .get(reg.file().index())
        .map_or("?", |f| f.name.as_str());
    format!("{file}[{}]", reg.unit())
}

/// A constant: small integers in decimal, floats that print and parse back exactly as floats,
/// anything else in hex.
pub fn fmt_const(bits: u32) -> String {
    let i = bits as i32;
    if (-65536..=65536).contains(&i) {
        return i.to_string();
    }
    let x = f32::from_bits(bits);
    if x.is_finite() {
        let s = format!("{x:?}");
        if s.parse::<f32>().is_ok_and(|y| y.to_bits() == bits) {
            return s;
        }
    }
    format!("{bits:#010x}")
}

/// `class`: printed after the temp (`%15:s1@s[1]`) when no instruction of the allocated
/// function defines it — a phi whose copies were all identities, left out of SSA with none.
fn fmt_operand(out: &mut String, target: &dyn Target, op: &Operand, class: Option<RegClass>) {
    match op.value {
        Value::Temp(t) => {
            let _ = write!(out, "{t}");
            if let Some(c) = class {
                let _ = write!(out, ":{}", fmt_class(target, c));
            }
        }
        Value::Const(c) => out.push_str(&fmt_const(c)),
        Value::Undef(class) => {
            let _ = write!(out, "undef:{}", fmt_class(target, class));
        }
    }
    if let Some(r) = op.reg {
        let _ = write!(out, "@{}", fmt_reg(target, r));
    }
    let mut flags: Vec<String> = crate::inst::OperandFlags::NAMES
        .iter()
        .filter(|(f, _)| op.flags.contains(*f))
        .map(|(_, n)| n.to_string())
        .collect();
    if let Some(r) = op.fixed {
        flags.push(format!("fixed={}", fmt_reg(target, r)));
    }
    if !flags.is_empty() {
        let _ = write!(out, "({})", flags.join(", "));
    }
}

fn fmt_def(out: &mut String, func: &Function, d: &Def) {
    let target = &*func.target;
    let class = func
        .temps
        .get(d.temp.index())
        .copied()
        .unwrap_or(RegClass::NONE);
    let _ = write!(out, "{}:{}", d.temp, fmt_class(target, class));
    if let Some(r) = d.reg {
        let _ = write!(out, "@{}", fmt_reg(target, r));
    }
    let mut flags = Vec::new();
    if d.dead {
        flags.push("dead".to_string());
    }
    if let Some(t) = d.tied {
        flags.push(format!("tied={t}"));
    }
    if let Some(r) = d.fixed {
        flags.push(format!("fixed={}", fmt_reg(target, r)));
    }
    if !flags.is_empty() {
        let _ = write!(out, "({})", flags.join(", "));
    }
}

/// One instruction, without indentation or newline.
pub fn print_inst(func: &Function, inst: &Inst) -> String {
    print_inst_with(func, inst, &[])
}

/// [`print_inst`]; `defined` (empty: all) says which temps have a definition — operands of the
/// others carry their class.
fn print_inst_with(func: &Function, inst: &Inst, defined: &[bool]) -> String {
    let mut out = String::new();
    for (i, d) in inst.defs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        fmt_def(&mut out, func, d);
    }
    if !inst.defs.is_empty() {
        out.push_str(" = ");
    }
    out.push_str(inst.op.name());
    if inst.op == crate::Opcode::If {
        out.push_str(if inst.flags.divergent {
            ".divergent"
        } else {
            ".uniform"
        });
    } else if inst.flags.divergent {
        out.push_str(".divergent");
    }
    if inst.flags.all_lanes {
        out.push_str(".all_lanes");
    }
    let mut first = true;
    let mut sep = |out: &mut String| {
        out.push_str(if first { " " } else { ", " });
        first = false;
    };
    for imm in &inst.imms {
        sep(&mut out);
        let _ = write!(out, "{imm}");
    }
    for op in &inst.operands {
        sep(&mut out);
        let class = op
            .temp_id()
            .filter(|t| defined.get(t.index()) == Some(&false))
            .map(|t| func.class(t));
        fmt_operand(&mut out, &*func.target, op, class);
    }
    for t in &inst.targets {
        sep(&mut out);
        let _ = write!(out, "{t}");
    }
    out
}

/// The whole function as `.kir` text.
pub fn print_function(func: &Function) -> String {
    print_function_annotated(func, |_, _| None, |_| None)
}

/// The function as text, with an optional comment after each instruction (`annotate(block,
/// index)`) and after each block label (`block_note(block)`).
pub fn print_function_annotated(
    func: &Function,
    annotate: impl Fn(Block, usize) -> Option<String>,
    block_note: impl Fn(Block) -> Option<String>,
) -> String {
    let target = &*func.target;
    let params: Vec<String> = target
        .params()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut out = format!(
        "target {}({})\n\nfunction @{}{} {{\n",
        target.name(),
        params.join(", "),
        func.name,
        if func.allocated { " allocated" } else { "" }
    );
    // Only an allocated function has temps that are read and never defined.
    let defined = if func.allocated {
        func.defined()
    } else {
        Vec::new()
    };
    for b in func.block_ids() {
        let _ = write!(out, "{b}:");
        if let Some(note) = block_note(b) {
            let _ = write!(out, "  ; {note}");
        }
        out.push('\n');
        for (i, inst) in func.block(b).insts.iter().enumerate() {
            let text = print_inst_with(func, inst, &defined);
            match annotate(b, i) {
                Some(note) => {
                    let _ = writeln!(out, "    {text:<40} ; {note}");
                }
                None => {
                    let _ = writeln!(out, "    {text}");
                }
            }
        }
    }
    out.push_str("}\n");
    out
}
