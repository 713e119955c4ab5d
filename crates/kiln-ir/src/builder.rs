//! A builder for writing passes and tests: appends instructions to the current block and builds
//! structured control flow (if/else/endif, loops with break/continue) in layout order.

use crate::entity::{Block, Temp};
use crate::function::Function;
use crate::inst::{Def, Inst, Operand};
use crate::opcode::Opcode;
use crate::regs::RegClass;
use smallvec::SmallVec;

/// Builds into a function, one block at a time.
pub struct Builder<'f> {
    pub func: &'f mut Function,
    cur: Block,
}

/// An open `if`; close it with [`Builder::end_if`].
#[must_use]
pub struct IfScope {
    head: Block,
    then_end: Option<Block>,
    else_start: Option<Block>,
}

/// An open loop; close it with [`Builder::end_loop`].
#[must_use]
pub struct LoopScope {
    preheader: Block,
    pub header: Block,
    breaks: Vec<Block>,
}

impl<'f> Builder<'f> {
    /// Starts building at the end of the last block, creating the entry block if needed.
    pub fn new(func: &'f mut Function) -> Builder<'f> {
        if func.blocks.is_empty() {
            func.new_block();
        }
        let cur = Block::new(func.blocks.len() - 1);
        Builder { func, cur }
    }

    pub fn current_block(&self) -> Block {
        self.cur
    }

    /// Whether the current block already ends in a terminator.
    pub fn is_terminated(&self) -> bool {
        self.func.block(self.cur).terminator().is_some()
    }

    /// Appends `inst` to the current block.
    pub fn push(&mut self, inst: Inst) -> &mut Inst {
        assert!(
            !self.is_terminated(),
            "instruction after the terminator of {}",
            self.cur
        );
        let insts = &mut self.func.block_mut(self.cur).insts;
        insts.push(inst);
        insts.last_mut().expect("just pushed")
    }

    /// Appends an instruction defining one new temp per class in `defs`.
    pub fn inst(
        &mut self,
        op: Opcode,
        imms: &[u32],
        defs: &[RegClass],
        operands: impl IntoIterator<Item = Operand>,
    ) -> SmallVec<[Temp; 2]> {
        let temps: SmallVec<[Temp; 2]> = defs.iter().map(|&c| self.func.new_temp(c)).collect();
        let mut inst = Inst::new(op);
        inst.imms.extend_from_slice(imms);
        inst.defs = temps.iter().map(|&t| Def::new(t)).collect();
        inst.operands = operands.into_iter().collect();
        self.push(inst);
        temps
    }

    /// Appends an instruction with one definition and returns its temp.
    pub fn op(
        &mut self,
        op: Opcode,
        class: RegClass,
        operands: impl IntoIterator<Item = Operand>,
    ) -> Temp {
        self.inst(op, &[], &[class], operands)[0]
    }

    /// Appends a phi (or linear phi) at the start of `block`, after its other phis.
    pub fn phi(
        &mut self,
        block: Block,
        op: Opcode,
        class: RegClass,
        operands: Vec<Operand>,
    ) -> Temp {
        assert!(op.is_phi());
        let t = self.func.new_temp(class);
        let mut inst = Inst::new(op);
        inst.defs.push(Def::new(t));
        inst.operands = operands.into();
        let data = self.func.block_mut(block);
        let at = data.phi_count();
        data.insts.insert(at, inst);
        t
    }

    fn terminate(&mut self, op: Opcode, operands: &[Operand], targets: &[Block]) {
        let mut inst = Inst::new(op);
        inst.operands.extend_from_slice(operands);
        inst.targets = targets.into();
        self.push(inst);
    }

    fn start_block(&mut self) -> Block {
        self.cur = self.func.new_block();
        self.cur
    }

    fn set_targets(&mut self, b: Block, targets: &[Block]) {
        let inst = self
            .func
            .block_mut(b)
            .insts
            .last_mut()
            .expect("block has a terminator");
        inst.targets = targets.iter().copied().collect();
    }

    /// Ends the current block with an `if` and starts the then block.
    pub fn begin_if(&mut self, cond: Operand, divergent: bool) -> IfScope {
        let head = self.cur;
        self.terminate(Opcode::If, &[cond], &[]);
        self.func
            .block_mut(head)
            .insts
            .last_mut()
            .expect("if")
            .flags
            .divergent = divergent;
        self.start_block();
        IfScope {
            head,
            then_end: None,
            else_start: None,
        }
    }

    /// Ends the then region and starts the else block.
    pub fn begin_else(&mut self, scope: &mut IfScope) {
        assert!(scope.else_start.is_none(), "two else regions");
        scope.then_end = Some(self.cur);
        if !self.is_terminated() {
            self.terminate(Opcode::Jump, &[], &[]);
        }
        scope.else_start = Some(self.start_block());
    }

    /// Ends the if and starts its endif block, which it returns.
    pub fn end_if(&mut self, scope: IfScope) -> Block {
        let last = self.cur;
        let closes_with_jump = !self.is_terminated();
        if closes_with_jump {
            self.terminate(Opcode::Jump, &[], &[]);
        }
        let endif = self.start_block();
        let then_start = Block(scope.head.0 + 1);
        let else_start = scope.else_start.unwrap_or(endif);
        self.set_targets(scope.head, &[then_start, else_start, endif]);
        for b in [scope.then_end, Some(last)].into_iter().flatten() {
            let term = self.func.block(b).terminator().map(|t| t.op);
            if term == Some(Opcode::Jump) {
                self.set_targets(b, &[endif]);
            }
        }
        endif
    }

    /// Ends the current block with `loop` and starts the loop header.
    pub fn begin_loop(&mut self) -> LoopScope {
        let preheader = self.cur;
        self.terminate(Opcode::Loop, &[], &[]);
        let header = self.start_block();
        LoopScope {
            preheader,
            header,
            breaks: Vec::new(),
        }
    }

    /// Ends the current block with `break`; the region must end here.
    pub fn break_(&mut self, scope: &mut LoopScope) {
        scope.breaks.push(self.cur);
        self.terminate(Opcode::Break, &[], &[]);
    }

    /// Ends the current block with `continue`; the region must end here.
    pub fn continue_(&mut self, scope: &LoopScope) {
        self.terminate(Opcode::Continue, &[], &[scope.header]);
    }

    /// Closes the loop body with `continue` (the latch) and starts the exit block.
    pub fn end_loop(&mut self, scope: LoopScope) -> Block {
        self.continue_(&scope);
        let exit = self.start_block();
        self.set_targets(scope.preheader, &[scope.header, exit]);
        for b in scope.breaks {
            self.set_targets(b, &[exit]);
        }
        exit
    }

    /// Closes a loop whose current block already ends in `continue` (the latch) and starts the
    /// exit block.
    pub fn end_loop_terminated(&mut self, scope: LoopScope) -> Block {
        assert_eq!(
            self.func.block(self.cur).terminator().map(|t| t.op),
            Some(Opcode::Continue),
            "the latch of a loop ends in `continue`"
        );
        let exit = self.start_block();
        self.set_targets(scope.preheader, &[scope.header, exit]);
        for b in scope.breaks {
            self.set_targets(b, &[exit]);
        }
        exit
    }

    /// Ends the function.
    pub fn ret(&mut self) {
        self.terminate(Opcode::Return, &[], &[]);
    }
}
