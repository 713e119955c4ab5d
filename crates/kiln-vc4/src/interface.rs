//! Interface lowering before register allocation: puts a selected shader's inputs, uniforms and
//! outputs where the QPU can serve them (after Mesa's `vc4_program.c` and `vc4_nir_lower_io.c`),
//! retargets the function to `vc4(threads=N)` and narrows the classes again; what the emitter
//! cannot do is refused here. The design is in `docs/vc4.md` ("Interface lowering").

use crate::isel::Unsupported;
use crate::ops::{Hw, Op};
use crate::target::Vc4Target;
use kiln_analysis::Liveness;
use kiln_ir::{Block, Cfg, Function, Inst, Opcode, Temp, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The shader stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Fragment,
    Vertex,
}

/// What an input slot carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// An interpolated varying: `vary × W + r5`.
    Varying,
    /// A vertex attribute component, read from the VPM (generic 32-bit reads, in slot order).
    Attribute,
    /// The vertex (`instance == false`) or instance index, read from the VPM like an
    /// attribute: the QPU has no such register and Mesa's vc4 does not offer them, so the
    /// driver is to supply them as an extra integer attribute.
    IndexAttribute { instance: bool },
    /// `gl_FragCoord`: `.x` / `.y` the pixel coordinate (`x_coord`/`y_coord` reads) + 0.5; `.z`
    /// the 24-bit depth of the payload (rb15) scaled to [0, 1]: `itof(rb15) × (1 / 0xffffff)`;
    /// `.w` the reciprocal of the payload W (ra15), as Mesa's `emit_fragcoord_input`.
    FragCoord(u32),
    /// `gl_FrontFacing`: the `rev_flag` read (file B address 42: 0 for a front face, 1 for a
    /// back face) plus −1, true (all ones) for a front face, as Mesa's vc4 `load_front_face`.
    FrontFacing,
    /// Something the back end does not read yet (named in the refusal).
    Unsupported(String),
}

/// What an output slot carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputKind {
    /// Component 0–3 (r, g, b, a) of colour output 0.
    Color(u32),
    /// A vertex shader's position, component 0–3 (`crate::vertex` rewrites it).
    Position(u32),
    /// A vertex shader's varying output at (location, component).
    Varying(u32, u32),
    /// A vertex shader's point size (`crate::vertex` writes it after 1/Wc).
    PointSize,
    /// A vertex shader's `gl_ClipDistance[k]` (`crate::vertex` writes them after the varyings,
    /// for the fragment shader to discard on: `kiln_front::clip`).
    ClipDistance(u32),
    /// Any value written raw to a VPM row ([`crate::emit::OutputMode::Vpm`]): a vertex
    /// shader's outputs in Mesa's layout (`crate::vertex`), generated test programs.
    Raw,
    Unsupported(String),
}

/// The interface of one entry point, as the emitter needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShaderInfo {
    pub stage: Stage,
    pub inputs: BTreeMap<u32, InputKind>,
    pub outputs: BTreeMap<u32, OutputKind>,
}

impl ShaderInfo {
    /// A fragment shader whose input slots are all varyings and whose output slots 0–3 are
    /// the colour components (the convention of hand-written `.kir` tests).
    pub fn fragment_default(func: &Function) -> ShaderInfo {
        let mut info = ShaderInfo {
            stage: Stage::Fragment,
            inputs: BTreeMap::new(),
            outputs: BTreeMap::new(),
        };
        for inst in func.blocks.iter().flat_map(|b| &b.insts) {
            match inst.op {
                Opcode::Input => {
                    info.inputs.insert(inst.imms[0], InputKind::Varying);
                }
                Opcode::Output => {
                    let s = inst.imms[0];
                    let kind = if s < 4 {
                        OutputKind::Color(s)
                    } else {
                        OutputKind::Unsupported(format!("output slot {s}"))
                    };
                    info.outputs.insert(s, kind);
                }
                _ => {}
            }
        }
        info
    }

    /// A fragment shader whose inputs are all varyings and whose outputs are debug values (any
    /// number of them, for the VPM debug path): generated test programs.
    pub fn debug(func: &Function) -> ShaderInfo {
        let mut info = ShaderInfo::fragment_default(func);
        for k in info.outputs.values_mut() {
            *k = OutputKind::Raw;
        }
        info
    }
}

/// The blocks whose per-lane writes the execute mask guards: those inside a divergent `if` or
/// a loop with a divergent `break` or `continue`, and every block from the first `discard` on
/// (discarded lanes wait for no block).
pub fn masked_blocks(func: &Function, cfg: &Cfg) -> Vec<bool> {
    let mut masked = vec![false; func.blocks.len()];
    for i in cfg.ifs.iter().filter(|i| i.divergent) {
        masked[i.then_start.index()..i.endif.index()].fill(true);
    }
    for l in cfg
        .loops
        .iter()
        .filter(|l| l.divergent || l.divergent_continue)
    {
        masked[l.header.index()..l.exit.index()].fill(true);
    }
    let first_discard = func
        .blocks
        .iter()
        .position(|b| b.insts.iter().any(|i| i.op == Opcode::Discard));
    if let Some(d) = first_discard {
        masked[d..].fill(true);
    }
    masked
}

/// Ties each select under the execute mask to a value it reads and kills (its false value
/// first), so that the allocators put it in that value's register and the emitter writes the
/// other value alone, in the running lanes where the condition chooses it, with one move
/// instead of two into a scratch register and a masked third.
/// The kill flags must be current: they say which values a select may overwrite. Returns the
/// blocks where it tied a select.
fn tie_masked_selects(func: &mut Function, cfg: &Cfg) -> Vec<Block> {
    let mut tied = Vec::new();
    let masked = masked_blocks(func, cfg);
    let any = |b: usize| func.blocks[b].insts.iter().any(|i| i.op == Opcode::Sel);
    if !(0..func.blocks.len()).any(|b| masked[b] && any(b)) {
        return tied;
    }
    let linear = func.linear_temps();
    for (b, block) in func.blocks.iter_mut().enumerate() {
        if !masked[b] {
            continue;
        }
        for inst in block.insts.iter_mut().filter(|i| i.op == Opcode::Sel) {
            if inst.flags.all_lanes || linear[inst.defs[0].temp.index()] {
                continue;
            }
            let (x, y) = (inst.operands[1].temp_id(), inst.operands[2].temp_id());
            let tie = [2usize, 1].into_iter().find(|&k| {
                let o = &inst.operands[k];
                o.temp_id().is_some_and(|t| {
                    o.is_kill()
                        && x != y
                        && inst.operands[0].temp_id() != Some(t)
                        && !linear[t.index()]
                })
            });
            if let Some(k) = tie {
                inst.defs[0].tied = Some(k as u8);
                inst.operands[k]
                    .flags
                    .set(kiln_ir::OperandFlags::CLOBBERED, true);
                if tied.last() != Some(&Block::new(b)) {
                    tied.push(Block::new(b));
                }
            }
        }
    }
    tied
}

/// Whether the function has divergent control flow or discards lanes (and so needs the
/// execute mask).
pub fn needs_exec(func: &Function, cfg: &Cfg) -> bool {
    cfg.ifs.iter().any(|i| i.divergent)
        || cfg
            .loops
            .iter()
            .any(|l| l.divergent || l.divergent_continue)
        || func
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .any(|i| i.op == Opcode::Discard)
}

/// Lowers the interface of a selected function with outputs written as `output` says, for
/// `threads` threads (2: a threaded fragment shader, see [`crate::threads::threading`] for when
/// it can be one), as the module comment says; the function verifies afterwards. Refuses,
/// changing nothing, what the emitter cannot do. Returns the CFG and liveness of the function
/// it leaves (kill flags written), for the allocator.
pub fn lower(
    func: &mut Function,
    info: &ShaderInfo,
    output: crate::emit::OutputMode,
    threads: u32,
    pre_schedule: Option<kiln_sched::pressure::Order>,
) -> Result<(Cfg, Liveness), Unsupported> {
    let mut refused = BTreeSet::new();
    if func.target.name() != "vc4" || func.allocated {
        refused.insert("a function that is not selected for vc4 or already allocated".into());
    }
    let cfg = Cfg::compute(func).map_err(|e| Unsupported(vec![e.message]))?;
    let last = Block::new(func.blocks.len() - 1);
    let mut input_count = 0;
    for (b, block) in func.blocks.iter().enumerate() {
        for inst in &block.insts {
            input_count += (inst.op == Opcode::Input) as usize;
            match inst.op {
                Opcode::Spill | Opcode::Reload => {
                    refused.insert("spilling".into());
                }
                Opcode::Input => match info.inputs.get(&inst.imms[0]) {
                    Some(InputKind::Unsupported(what)) => {
                        refused.insert(format!("input {what}"));
                    }
                    None => {
                        refused.insert(format!("input slot {} not in the interface", inst.imms[0]));
                    }
                    _ => {}
                },
                Opcode::Output => {
                    match info.outputs.get(&inst.imms[0]) {
                        Some(OutputKind::Unsupported(what)) => {
                            refused.insert(format!("output {what}"));
                        }
                        None => {
                            refused.insert(format!(
                                "output slot {} not in the interface",
                                inst.imms[0]
                            ));
                        }
                        _ => {}
                    }
                    if b != last.index() {
                        refused.insert("outputs written inside control flow".into());
                    }
                }
                _ => {}
            }
        }
    }
    if !refused.is_empty() {
        return Err(Unsupported(refused.into_iter().collect()));
    }

    // Inputs first (one per slot), at the top of the entry block: gl_FragCoord first (its z
    // reads the payload in rb15 before any input's register is written), then by slot —
    // where they are not so already.
    let fragcoord = |i: &Inst| matches!(info.inputs.get(&i.imms[0]), Some(InputKind::FragCoord(_)));
    let place = |i: &Inst| (!fragcoord(i), i.imms[0]);
    let entry = &func.blocks[0].insts;
    let placed = entry.len() >= input_count
        && entry[..input_count].iter().all(|i| i.op == Opcode::Input)
        && entry[..input_count]
            .windows(2)
            .all(|w| place(&w[0]) < place(&w[1]));
    if !placed {
        hoist_inputs(func, info);
    }

    uniforms_at_uses(func);

    // Outputs just before the return, in their order; a VPM row right after the add- or
    // mul-unit operation whose one reader it is (with that operation's own uniform read), so
    // that the operation can write the VPM itself (`emit`). (Not a colour: operations between
    // the colour's bytes would find ra14, their read-port scratch, taken.)
    let insts = &func.blocks[last.index()].insts;
    let first_output = insts
        .iter()
        .position(|i| i.op == Opcode::Output)
        .unwrap_or(insts.len().saturating_sub(1));
    let outputs_last = insts.len().checked_sub(1).is_some_and(|end| {
        insts[first_output..end]
            .iter()
            .all(|i| i.op == Opcode::Output)
            && insts[end].op != Opcode::Output
    });
    if output == crate::emit::OutputMode::Vpm || !outputs_last {
        place_outputs(func, last, output);
    }

    // Retarget (threads, execute mask), keep every value out of r4 and, threaded, out of the
    // accumulators across a thread switch.
    func.target = Vc4Target::shared(threads, needs_exec(func, &cfg));
    // The moves above left every block its terminator: the CFG is the one computed first.
    debug_assert!(
        Cfg::compute(func).is_ok_and(|now| now == cfg),
        "the blocks changed"
    );
    // The pre-RA scheduler's CFG and liveness (kill flags written) serve class narrowing, the
    // selects' ties and the allocator; narrowing changes classes within their files only, so
    // they stay valid, and a tie changes what the select needs: its block's demand.
    let (cfg, mut lv) = match pre_schedule {
        Some(order) => {
            let (_, cfg, lv) = crate::pre_sched::pre_schedule(func, cfg, order);
            (cfg, lv)
        }
        None => {
            let lv = kiln_analysis::compute_liveness(func, &cfg);
            (cfg, lv)
        }
    };
    crate::narrow::narrow_classes_live(
        func,
        &cfg,
        &lv.live_out,
        &lv.loop_leaving,
        false,
        threads == 2,
    );
    let tied = tie_masked_selects(func, &cfg);
    if !tied.is_empty() {
        lv.rewalk(func, &cfg, &tied);
    }
    Ok((cfg, lv))
}

/// Moves the inputs to the top of the entry block, one per slot (a second read of a slot
/// reads the first), gl_FragCoord first, then by slot.
fn hoist_inputs(func: &mut Function, info: &ShaderInfo) {
    let mut inputs: BTreeMap<u32, Inst> = BTreeMap::new();
    let mut rename: BTreeMap<Temp, Temp> = BTreeMap::new();
    for block in func.blocks.iter_mut() {
        let mut kept = Vec::with_capacity(block.insts.len());
        for inst in block.insts.drain(..) {
            match inst.op {
                Opcode::Input => match inputs.get(&inst.imms[0]) {
                    Some(first) => {
                        rename.insert(inst.defs[0].temp, first.defs[0].temp);
                    }
                    None => {
                        inputs.insert(inst.imms[0], inst);
                    }
                },
                _ => kept.push(inst),
            }
        }
        block.insts = kept;
    }
    let entry = &mut func.blocks[0].insts;
    let (mut head, rest): (Vec<Inst>, Vec<Inst>) = inputs
        .into_values()
        .partition(|i| matches!(info.inputs.get(&i.imms[0]), Some(InputKind::FragCoord(_))));
    head.extend(rest);
    entry.splice(0..0, head);
    if !rename.is_empty() {
        for inst in func.blocks.iter_mut().flat_map(|b| b.insts.iter_mut()) {
            for op in inst.operands.iter_mut() {
                if let Value::Temp(t) = op.value
                    && let Some(&n) = rename.get(&t)
                {
                    op.value = Value::Temp(n);
                }
            }
        }
    }
}

/// Puts the outputs of block `last` just before its terminator, in their order; a VPM row
/// right after the operation it alone reads, with that operation's own uniform read.
fn place_outputs(func: &mut Function, last: Block, output: crate::emit::OutputMode) {
    let uses = use_counts(func);
    let insts = &mut func.blocks[last.index()].insts;
    let (outs, mut rest): (Vec<Inst>, Vec<Inst>) =
        insts.drain(..).partition(|i| i.op == Opcode::Output);
    let term = rest.pop();
    for out in outs {
        let row = output == crate::emit::OutputMode::Vpm;
        let produced = out.operands[0].temp_id().filter(|_| row).and_then(|t| {
            let at = rest
                .iter()
                .rposition(|i| i.defs.iter().any(|d| d.temp == t))?;
            let alu = Op::of_opcode(rest[at].op).is_some_and(|op| {
                matches!(op.facts().hw, Hw::Add(_) | Hw::Mul(_) | Hw::Either(..))
                    && op.facts().resources.is_empty()
            });
            (alu && rest[at].defs.len() == 1 && uses[t.index()] == 1).then_some(at)
        });
        if let Some(at) = produced {
            // Its uniform read, just before it and read by it alone, goes with it.
            let from = match at.checked_sub(1).map(|k| &rest[k]) {
                Some(u)
                    if u.op == Opcode::Uniform
                        && uses[u.defs[0].temp.index()] == 1
                        && rest[at].used_temps().any(|t| t == u.defs[0].temp) =>
                {
                    at - 1
                }
                _ => at,
            };
            let moved: Vec<Inst> = rest.drain(from..=at).collect();
            rest.extend(moved);
        }
        rest.push(out);
    }
    rest.extend(term);
    *insts = rest;
}

/// How many operands read each temp.
pub(crate) fn use_counts(func: &Function) -> Vec<u32> {
    let mut uses = vec![0u32; func.temps.len()];
    for t in func
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .flat_map(|i| i.used_temps())
    {
        uses[t.index()] += 1;
    }
    uses
}

/// Whether the emitter turns `op` into one instruction reading each operand once (after any
/// fix-ups), which can then take a uniform operand from the stream itself: an ALU or SFU
/// operation (not a derivative, which reads its operand across lanes), or a comparison (the
/// flag-setting op; its moves read no operand).
pub fn folds_uniform(op: Opcode) -> bool {
    Op::of_opcode(op).is_some_and(|op| {
        matches!(
            op.facts().hw,
            Hw::Add(_) | Hw::Mul(_) | Hw::Either(..) | Hw::Sfu(_)
        )
    }) || is_comparison(op)
}

/// The comparisons, which the emitter turns into flags (and a boolean).
pub fn is_comparison(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Ieq
            | Opcode::Ine
            | Opcode::Ilt
            | Opcode::Ile
            | Opcode::Ult
            | Opcode::Ule
            | Opcode::Feq
            | Opcode::Fne
            | Opcode::Flt
            | Opcode::Fle
    )
}

/// Gives each ALU or SFU operation or comparison that reads a uniform (its first such operand) a read of its
/// own, just before it, so that the emitter can fold the read into the operation; the original
/// read stays for its other uses, or goes.
fn uniforms_at_uses(func: &mut Function) {
    // Per temp, the index in `reads` of the uniform read that defines it (dense: no map).
    const NONE: u32 = u32::MAX;
    let mut read_of = vec![NONE; func.temps.len()];
    let mut reads: Vec<Inst> = Vec::new();
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        if inst.op == Opcode::Uniform {
            read_of[inst.defs[0].temp.index()] = reads.len() as u32;
            reads.push(inst.clone());
        }
    }
    if reads.is_empty() {
        return;
    }
    let read = |t: Temp| read_of.get(t.index()).copied().filter(|&r| r != NONE);
    // The operand that gets a read of its own, if any.
    let folded = |inst: &Inst| {
        let first = inst
            .operands
            .iter()
            .position(|o| o.temp_id().is_some_and(|t| read(t).is_some()));
        first.filter(|_| folds_uniform(inst.op))
    };
    let mut uses = vec![0u32; func.temps.len()];
    for b in 0..func.blocks.len() {
        let copies = func.blocks[b]
            .insts
            .iter()
            .filter(|i| folded(i).is_some())
            .count();
        if copies == 0 {
            for t in func.blocks[b].insts.iter().flat_map(|i| i.used_temps()) {
                if let Some(n) = uses.get_mut(t.index()) {
                    *n += 1;
                }
            }
            continue;
        }
        let insts = std::mem::take(&mut func.blocks[b].insts);
        let mut out = Vec::with_capacity(insts.len() + copies);
        for mut inst in insts {
            if let Some(k) = folded(&inst) {
                let old = inst.operands[k].temp_id().expect("a temp");
                let mut copy = reads[read(old).expect("a uniform read") as usize].clone();
                let t = func.new_temp(func.temps[old.index()]);
                copy.defs[0] = kiln_ir::Def::new(t);
                for op in inst.operands.iter_mut() {
                    if op.temp_id() == Some(old) {
                        op.value = Value::Temp(t);
                    }
                }
                out.push(copy);
            }
            for t in inst.used_temps() {
                // (The new reads' temps are read here only, and never removed.)
                if let Some(n) = uses.get_mut(t.index()) {
                    *n += 1;
                }
            }
            out.push(inst);
        }
        func.blocks[b].insts = out;
    }
    for block in func.blocks.iter_mut() {
        block.insts.retain(|i| {
            i.op != Opcode::Uniform || uses.get(i.defs[0].temp.index()).is_none_or(|&n| n > 0)
        });
    }
}
