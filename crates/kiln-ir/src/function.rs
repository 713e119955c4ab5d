//! A function: its target, blocks in structured layout order, and per-temp classes.

use crate::entity::{Block, Temp};
use crate::inst::Inst;
use crate::regs::{RegClass, Target};
use std::sync::Arc;

/// A basic block: instructions, phis first, one terminator last.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct BlockData {
    pub insts: Vec<Inst>,
}

impl BlockData {
    /// The terminator, if the block has one.
    pub fn terminator(&self) -> Option<&Inst> {
        self.insts.last().filter(|i| i.op.is_terminator())
    }

    /// Number of leading phi instructions.
    pub fn phi_count(&self) -> usize {
        self.insts.iter().take_while(|i| i.op.is_phi()).count()
    }
}

/// A shader function in SSA form.
#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub target: Arc<dyn Target>,
    pub blocks: Vec<BlockData>,
    /// Class of every temp; [`RegClass::NONE`] for numbers no instruction defines.
    pub temps: Vec<RegClass>,
    /// After register assignment: every operand and definition carries its register, phis are
    /// gone, and a temp may be written more than once (copies), so the SSA rules no longer
    /// apply. Printed as `function @name allocated {`.
    pub allocated: bool,
}

/// Structural equality: same name, target (by name and parameters), blocks, temps and form.
/// Round-trip tests compare functions with it, not two printings.
impl PartialEq for Function {
    fn eq(&self, other: &Function) -> bool {
        self.name == other.name
            && self.target.name() == other.target.name()
            && self.target.params() == other.target.params()
            && self.allocated == other.allocated
            && self.temps == other.temps
            && self.blocks == other.blocks
    }
}

impl Function {
    pub fn new(name: impl Into<String>, target: Arc<dyn Target>) -> Function {
        Function {
            name: name.into(),
            target,
            blocks: Vec::new(),
            temps: Vec::new(),
            allocated: false,
        }
    }

    /// A copy with as many blocks, each empty, and the same temps: for a pass that builds
    /// every block anew from this function (not a copy of instructions it then drops).
    pub fn with_empty_blocks(&self) -> Function {
        Function {
            name: self.name.clone(),
            target: self.target.clone(),
            blocks: vec![BlockData::default(); self.blocks.len()],
            temps: self.temps.clone(),
            allocated: self.allocated,
        }
    }

    pub fn new_temp(&mut self, class: RegClass) -> Temp {
        let t = Temp::new(self.temps.len());
        self.temps.push(class);
        t
    }

    pub fn class(&self, t: Temp) -> RegClass {
        self.temps[t.index()]
    }

    pub fn new_block(&mut self) -> Block {
        let b = Block::new(self.blocks.len());
        self.blocks.push(BlockData::default());
        b
    }

    pub fn block(&self, b: Block) -> &BlockData {
        &self.blocks[b.index()]
    }

    pub fn block_mut(&mut self, b: Block) -> &mut BlockData {
        &mut self.blocks[b.index()]
    }

    pub fn block_ids(&self) -> impl DoubleEndedIterator<Item = Block> + ExactSizeIterator {
        (0..self.blocks.len()).map(Block::new)
    }

    /// Per temp, whether some instruction defines it.
    pub fn defined(&self) -> Vec<bool> {
        let mut defined = vec![false; self.temps.len()];
        for d in self
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .flat_map(|i| &i.defs)
        {
            if let Some(x) = defined.get_mut(d.temp.index()) {
                *x = true;
            }
        }
        defined
    }

    /// The temps table as the function's text carries it: the classes of temps no instruction
    /// defines or reads cleared (passes that delete instructions leave their classes behind;
    /// a read of a temp nothing defines carries its class).
    pub fn text_temps(&self) -> Vec<RegClass> {
        self.named()
            .iter()
            .zip(&self.temps)
            .map(|(&named, &c)| if named { c } else { RegClass::NONE })
            .collect()
    }

    /// Per temp, whether some instruction defines or reads it.
    fn named(&self) -> Vec<bool> {
        let mut named = vec![false; self.temps.len()];
        for i in self.blocks.iter().flat_map(|b| &b.insts) {
            for t in i.defs.iter().map(|d| d.temp).chain(i.used_temps()) {
                if let Some(slot) = named.get_mut(t.index()) {
                    *slot = true;
                }
            }
        }
        named
    }

    /// Numbers the temps some instruction defines or reads 0, 1, 2… in their old order, and
    /// drops the classes of the others (what passes that delete instructions leave behind), so
    /// that what keeps a table per temp keeps one per value. Returns each old number's new
    /// one (`None` for a dropped temp). Linear in the instructions and temps; the order of the
    /// temps is kept, so whatever breaks ties by temp number breaks them as before.
    pub fn compact_temps(&mut self) -> Vec<Option<Temp>> {
        let mut temps = Vec::with_capacity(self.temps.len());
        let map: Vec<Option<Temp>> = self
            .named()
            .iter()
            .zip(&self.temps)
            .map(|(&named, &c)| {
                named.then(|| {
                    temps.push(c);
                    Temp::new(temps.len() - 1)
                })
            })
            .collect();
        if temps.len() == self.temps.len() {
            return map;
        }
        let renamed = |t: Temp| map.get(t.index()).copied().flatten().unwrap_or(t);
        for inst in self.blocks.iter_mut().flat_map(|b| &mut b.insts) {
            for d in &mut inst.defs {
                d.temp = renamed(d.temp);
            }
            for o in &mut inst.operands {
                if let crate::Value::Temp(t) = &mut o.value {
                    *t = renamed(*t);
                }
            }
        }
        self.temps = temps;
        map
    }

    /// Total number of instructions.
    pub fn inst_count(&self) -> usize {
        self.blocks.iter().map(|b| b.insts.len()).sum()
    }

    /// Whether a temp lives along the linear CFG: its file is uniform, or the instruction that
    /// defines it writes all lanes. One entry per temp.
    pub fn linear_temps(&self) -> Vec<bool> {
        let mut linear = self.uniform_file_temps();
        for inst in self.blocks.iter().flat_map(|b| &b.insts) {
            self.mark_linear_defs(inst, &mut linear);
        }
        linear
    }

    /// Whether each temp's file is uniform: where [`Function::linear_temps`] starts from.
    pub fn uniform_file_temps(&self) -> Vec<bool> {
        // Indexed by the file's number whatever it is: a branch-free look-up per temp.
        let mut uniform = [false; 256];
        for (u, f) in uniform.iter_mut().zip(self.target.files()) {
            *u = f.lanes == crate::Lanes::Uniform;
        }
        self.temps
            .iter()
            .map(|c| uniform[c.file.0 as usize] & (c.size != 0))
            .collect()
    }

    /// Marks in `linear` the definitions of `inst` that [`Function::linear_temps`] counts as
    /// linear for what the instruction is: it writes all lanes, or it is a `linear_phi`.
    #[inline]
    pub fn mark_linear_defs(&self, inst: &crate::Inst, linear: &mut [bool]) {
        if inst.writes_all_lanes() || inst.op == crate::Opcode::LinearPhi {
            for d in &inst.defs {
                if let Some(l) = linear.get_mut(d.temp.index()) {
                    *l = true;
                }
            }
        }
    }
}
