//! Threaded fragment shaders (Mesa's `vc4_program.c`, `vc4_qpu_emit.c`): whether a selected
//! shader can run two-threaded, and which blocks run exactly once (where the last thread switch
//! may go). The design is in `docs/vc4.md` ("The emitter": threads).

use crate::interface::{ShaderInfo, Stage};
use kiln_ir::Function;

/// Whether a selected function (`info` its interface) can run as a threaded fragment shader,
/// or why not: it must be a fragment shader with a texture lookup (each request is a thread
/// switch; Mesa's threaded attempt of a shader without one gives up, `no-tmu-access` in
/// `mesa-vc4/README.md`).
pub fn threading(func: &Function, info: &ShaderInfo) -> Result<(), String> {
    if info.stage != Stage::Fragment {
        return Err("only fragment shaders run threaded".into());
    }
    if func
        .blocks
        .iter()
        .any(|b| b.insts.iter().any(crate::texture::is_lookup))
    {
        Ok(())
    } else {
        Err("the shader has no texture lookup to switch threads at".into())
    }
}

/// The blocks the emitted program runs exactly once (where the last lookup's switch can be the
/// last switch, Mesa's `last_thrsw_at_top_level`): those outside every if, in no loop that
/// may run them again or skip them. A loop none of whose reachable blocks has a `continue` of
/// it runs once (the front end wraps a body with early returns in such a loop); then only a
/// reachable `break` of it before a block may skip that block. Reachability follows the
/// linear CFG the emitter lays out, and only the taken side of a uniform `if` on a constant.
pub fn runs_once(func: &Function, cfg: &kiln_ir::Cfg) -> Vec<bool> {
    use kiln_ir::{Block, Opcode, Value};
    let n = func.blocks.len();
    let term = |b: usize| func.blocks[b].insts.last();
    let mut reach = vec![false; n];
    let mut stack = vec![0];
    reach[0] = true;
    while let Some(b) = stack.pop() {
        let taken: Vec<Block> = match term(b) {
            Some(i) if i.op == Opcode::If && !i.flags.divergent => match i.operands[0].value {
                Value::Const(c) => vec![i.targets[if c != 0 { 0 } else { 1 }]],
                _ => cfg.linear.succs[b].to_vec(),
            },
            _ => cfg.linear.succs[b].to_vec(),
        };
        for s in taken {
            if !reach[s.index()] {
                reach[s.index()] = true;
                stack.push(s.index());
            }
        }
    }
    let mut once = reach.clone();
    for i in &cfg.ifs {
        once[i.then_start.index()..i.endif.index()].fill(false);
    }
    for (l, lp) in cfg.loops.iter().enumerate() {
        let body = lp.header.index()..lp.exit.index();
        let ends = |op: Opcode| {
            body.clone().find(|&b| {
                reach[b] && cfg.loop_of[b] == Some(l) && term(b).is_some_and(|i| i.op == op)
            })
        };
        if ends(Opcode::Continue).is_some() {
            once[body].fill(false);
        } else if let Some(k) = ends(Opcode::Break) {
            once[k + 1..lp.exit.index()].fill(false);
        }
    }
    once
}
