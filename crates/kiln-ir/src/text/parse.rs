//! Reading `.kir` text. Every error carries a line and column; no input makes it panic.

use super::lexer::{Tok, Token, lex};
use crate::entity::{Block, Temp};
use crate::function::{BlockData, Function};
use crate::inst::{Def, Inst, Operand, OperandFlags};
use crate::opcode::Opcode;
use crate::regs::{PhysReg, RegClass, Target, TargetRegistry};
use std::fmt;
use std::sync::Arc;

/// A reading error at `line:col`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

/// Highest temp number accepted (bounds memory on hostile input).
pub const MAX_TEMPS: usize = 1 << 22;

/// Reads one function; targets known: the generic test target.
pub fn parse_function(text: &str) -> Result<Function, ParseError> {
    parse_function_with(text, &TargetRegistry::new())
}

/// Reads one function, looking its target up in `registry`.
pub fn parse_function_with(text: &str, registry: &TargetRegistry) -> Result<Function, ParseError> {
    let toks = lex(text).map_err(|e| ParseError {
        line: e.line,
        col: e.col,
        message: e.message,
    })?;
    let mut p = Parser {
        toks,
        pos: 0,
        target: None,
        classes: Vec::new(),
        block_refs: Vec::new(),
    };
    p.function(registry)
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    target: Option<Arc<dyn Target>>,
    /// Class of each temp as defined, with the position of its first definition.
    classes: Vec<RegClass>,
    /// Block references, checked once all blocks are known.
    block_refs: Vec<(Block, usize, usize)>,
}

type PResult<T> = Result<T, ParseError>;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn here(&self) -> (usize, usize) {
        let t = &self.toks[self.pos];
        (t.line, t.col)
    }

    fn err<T>(&self, message: impl Into<String>) -> PResult<T> {
        let (line, col) = self.here();
        Err(ParseError {
            line,
            col,
            message: message.into(),
        })
    }

    fn describe(tok: &Tok) -> String {
        match tok {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(i) => format!("number `{i}`"),
            Tok::Float(_) => "a float".into(),
            Tok::Punct(c) => format!("`{c}`"),
            Tok::Newline => "end of line".into(),
            Tok::Eof => "end of input".into(),
        }
    }

    fn bump(&mut self) -> Tok {
        let t = self.toks[self.pos].tok.clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, c: char) -> bool {
        if *self.peek() == Tok::Punct(c) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char, what: &str) -> PResult<()> {
        if self.eat(c) {
            Ok(())
        } else {
            self.err(format!(
                "expected `{c}` {what}, found {}",
                Self::describe(self.peek())
            ))
        }
    }

    fn ident(&mut self, what: &str) -> PResult<String> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                self.bump();
                Ok(s)
            }
            t => self.err(format!("expected {what}, found {}", Self::describe(&t))),
        }
    }

    fn keyword(&mut self, kw: &str) -> PResult<()> {
        match self.peek() {
            Tok::Ident(s) if s == kw => {
                self.bump();
                Ok(())
            }
            t => self.err(format!("expected `{kw}`, found {}", Self::describe(t))),
        }
    }

    fn uint(&mut self, what: &str, max: u64) -> PResult<u64> {
        match *self.peek() {
            Tok::Int(v) if v >= 0 && v as u64 <= max => {
                self.bump();
                Ok(v as u64)
            }
            Tok::Int(v) => self.err(format!("{what} {v} is out of range 0..={max}")),
            ref t => self.err(format!("expected {what}, found {}", Self::describe(t))),
        }
    }

    fn skip_newlines(&mut self) {
        while *self.peek() == Tok::Newline {
            self.bump();
        }
    }

    fn end_of_line(&mut self) -> PResult<()> {
        match self.peek() {
            Tok::Newline => {
                self.skip_newlines();
                Ok(())
            }
            Tok::Eof => Ok(()),
            t => self.err(format!("expected end of line, found {}", Self::describe(t))),
        }
    }

    fn target(&self) -> &dyn Target {
        &**self.target.as_ref().expect("target is read first")
    }

    fn function(&mut self, registry: &TargetRegistry) -> PResult<Function> {
        self.skip_newlines();
        self.keyword("target")?;
        let (tl, tc) = self.here();
        let name = self.ident("a target name")?;
        let mut params = Vec::new();
        self.expect('(', "after the target name")?;
        if !self.eat(')') {
            loop {
                let key = self.ident("a target parameter")?;
                self.expect('=', "after a target parameter name")?;
                let v = self.uint("parameter value", u32::MAX as u64)? as u32;
                params.push((key, v));
                if self.eat(')') {
                    break;
                }
                self.expect(',', "between target parameters")?;
            }
        }
        let target = registry
            .make(&name, &params)
            .map_err(|message| ParseError {
                line: tl,
                col: tc,
                message,
            })?;
        self.target = Some(target.clone());
        self.end_of_line()?;
        self.keyword("function")?;
        self.expect('@', "before the function name")?;
        let fname = self.ident("a function name")?;
        let allocated = matches!(self.peek(), Tok::Ident(s) if s == "allocated");
        if allocated {
            self.bump();
        }
        self.expect('{', "to open the function body")?;
        self.end_of_line()?;
        let mut func = Function::new(fname, target);
        func.allocated = allocated;
        while *self.peek() != Tok::Punct('}') {
            let label = self.ident("a block label `bbN:` or `}`")?;
            let expected = format!("bb{}", func.blocks.len());
            if label != expected {
                return Err(ParseError {
                    line: self.toks[self.pos - 1].line,
                    col: self.toks[self.pos - 1].col,
                    message: format!(
                        "expected block label `{expected}` (blocks are numbered in order), found `{label}`"
                    ),
                });
            }
            self.expect(':', "after the block label")?;
            self.end_of_line()?;
            let mut block = BlockData::default();
            while !matches!(self.peek(), Tok::Punct('}')) && !self.at_label() {
                if *self.peek() == Tok::Eof {
                    return self.err("unexpected end of input: missing `}`");
                }
                block.insts.push(self.inst()?);
                self.end_of_line()?;
            }
            func.blocks.push(block);
        }
        self.bump();
        self.end_of_line()?;
        if *self.peek() != Tok::Eof {
            return self.err(format!(
                "expected end of input after the function, found {}",
                Self::describe(self.peek())
            ));
        }
        for &(b, line, col) in &self.block_refs {
            if b.index() >= func.blocks.len() {
                return Err(ParseError {
                    line,
                    col,
                    message: format!("block {b} does not exist"),
                });
            }
        }
        func.temps = std::mem::take(&mut self.classes);
        Ok(func)
    }

    fn at_label(&self) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s.starts_with("bb"))
            && self
                .toks
                .get(self.pos + 1)
                .is_some_and(|t| t.tok == Tok::Punct(':'))
    }

    fn temp(&mut self) -> PResult<Temp> {
        self.expect('%', "before a temp number")?;
        let n = self.uint("temp number", MAX_TEMPS as u64 - 1)?;
        Ok(Temp(n as u32))
    }

    fn class(&mut self) -> PResult<RegClass> {
        let name = self.ident("a register class such as `v1`")?;
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (file_name, size) = name.split_at(name.len() - digits);
        let target = self.target();
        let Some(file) = target.file_by_name(file_name) else {
            return self.err_prev(format!(
                "unknown register file `{file_name}` in class `{name}`"
            ));
        };
        let Ok(size) = size.parse::<u8>() else {
            return self.err_prev(format!(
                "class `{name}` needs a size in units after the file name"
            ));
        };
        let mut class = RegClass {
            file,
            size,
            align: target.default_align(file, size.max(1)),
            subset: None,
        };
        while self.eat('.') {
            let attr = self.ident("a class attribute (`alignN` or a subset name)")?;
            if let Some(a) = attr
                .strip_prefix("align")
                .and_then(|a| a.parse::<u8>().ok())
            {
                class.align = a;
            } else if let Some(s) = self.target().subset_by_name(&attr) {
                // Several subsets name their intersection (how generated intersections print).
                let narrowed = RegClass {
                    subset: Some(s),
                    ..class
                };
                class.subset = match class.subset {
                    None => Some(s),
                    Some(_) => match self.target().intersect_classes(class, narrowed) {
                        Some(c) => c.subset,
                        None => {
                            return self.err_prev(format!(
                                "subset `{attr}` leaves no register for the class"
                            ));
                        }
                    },
                };
            } else {
                return self.err_prev(format!("unknown class attribute `{attr}`"));
            }
        }
        if let Err(e) = self.target().check_class(class) {
            return self.err_prev(format!("invalid class: {e}"));
        }
        Ok(class)
    }

    fn err_prev<T>(&self, message: String) -> PResult<T> {
        let t = &self.toks[self.pos.saturating_sub(1)];
        Err(ParseError {
            line: t.line,
            col: t.col,
            message,
        })
    }

    fn reg(&mut self) -> PResult<PhysReg> {
        let name = self.ident("a register such as `v[0]`")?;
        if *self.peek() != Tok::Punct('[')
            && let Some(r) = self.target().reg_by_name(&name)
        {
            return Ok(r);
        }
        let Some(file) = self.target().file_by_name(&name) else {
            return self.err_prev(format!("unknown register file `{name}`"));
        };
        self.expect('[', "after the register file")?;
        let unit = self.uint("register unit", PhysReg::MAX_UNIT as u64)? as u32;
        self.expect(']', "after the register unit")?;
        match PhysReg::try_new(file, unit) {
            Some(r) => Ok(r),
            None => self.err_prev(format!("register unit {unit} is out of range")),
        }
    }

    /// Reads the class after `%N:` and records it for `temp` (at `line:col`); `clash` says
    /// what another class for it means.
    fn declare(&mut self, temp: Temp, line: usize, col: usize, clash: &str) -> PResult<()> {
        let class = self.class()?;
        let i = temp.index();
        if self.classes.len() <= i {
            self.classes.resize(i + 1, RegClass::NONE);
        }
        if !self.classes[i].is_none() && self.classes[i] != class {
            return Err(ParseError {
                line,
                col,
                message: format!("{temp} {clash}"),
            });
        }
        self.classes[i] = class;
        Ok(())
    }

    fn def(&mut self) -> PResult<Def> {
        let (line, col) = self.here();
        let temp = self.temp()?;
        self.expect(':', "between a defined temp and its class")?;
        self.declare(temp, line, col, "is defined again with a different class")?;
        let mut def = Def::new(temp);
        if self.eat('@') {
            def.reg = Some(self.reg()?);
        }
        if self.eat('(') {
            loop {
                let flag = self.ident("a definition flag (`dead`, `tied=N`, `fixed=REG`)")?;
                match flag.as_str() {
                    "dead" => def.dead = true,
                    "tied" => {
                        self.expect('=', "after `tied`")?;
                        def.tied = Some(self.uint("operand index", 255)? as u8);
                    }
                    "fixed" => {
                        self.expect('=', "after `fixed`")?;
                        def.fixed = Some(self.reg()?);
                    }
                    _ => return self.err_prev(format!("unknown definition flag `{flag}`")),
                }
                if self.eat(')') {
                    break;
                }
                self.expect(',', "between flags")?;
            }
        }
        Ok(def)
    }

    fn operand_suffix(&mut self, mut op: Operand) -> PResult<Operand> {
        if self.eat('@') {
            op.reg = Some(self.reg()?);
        }
        if self.eat('(') {
            loop {
                let flag = self.ident("an operand flag")?;
                if flag == "fixed" {
                    self.expect('=', "after `fixed`")?;
                    op.fixed = Some(self.reg()?);
                } else if let Some((f, _)) = OperandFlags::NAMES.iter().find(|(_, n)| *n == flag) {
                    op.flags = op.flags | *f;
                } else {
                    return self.err_prev(format!("unknown operand flag `{flag}`"));
                }
                if self.eat(')') {
                    break;
                }
                self.expect(',', "between flags")?;
            }
        }
        Ok(op)
    }

    fn inst(&mut self) -> PResult<Inst> {
        let mut defs = smallvec::SmallVec::new();
        if *self.peek() == Tok::Punct('%') {
            loop {
                defs.push(self.def()?);
                if !self.eat(',') {
                    break;
                }
            }
            self.expect('=', "after the definitions")?;
        }
        let (ol, oc) = self.here();
        let name = self.ident("an opcode")?;
        let Some(op) = Opcode::from_name_in(&name, self.target()) else {
            return Err(ParseError {
                line: ol,
                col: oc,
                message: format!("unknown opcode `{name}`"),
            });
        };
        let mut inst = Inst::new(op);
        inst.defs = defs;
        let mut divergence_given = false;
        while self.eat('.') {
            let flag = self.ident("an instruction flag")?;
            match flag.as_str() {
                "divergent" => {
                    inst.flags.divergent = true;
                    divergence_given = true;
                }
                "uniform" if op == Opcode::If => divergence_given = true,
                "all_lanes" => inst.flags.all_lanes = true,
                _ => return self.err_prev(format!("unknown instruction flag `.{flag}`")),
            }
        }
        if op == Opcode::If && !divergence_given {
            return Err(ParseError {
                line: ol,
                col: oc,
                message: "`if` must say `.uniform` or `.divergent`".into(),
            });
        }
        let info = op.info();
        let mut targets = Vec::new();
        if !matches!(self.peek(), Tok::Newline | Tok::Eof) {
            loop {
                let (line, col) = self.here();
                match self.peek().clone() {
                    Tok::Int(v) if inst.imms.len() < info.imms as usize => {
                        if !(0..=u32::MAX as i64).contains(&v) {
                            return self
                                .err(format!("immediate {v} is out of range 0..=4294967295"));
                        }
                        self.bump();
                        inst.imms.push(v as u32);
                    }
                    _ if inst.imms.len() < info.imms as usize => {
                        return self
                            .err(format!("`{name}` takes {} immediate(s) first", info.imms));
                    }
                    Tok::Ident(s) if s.starts_with("bb") && s[2..].parse::<u32>().is_ok() => {
                        self.bump();
                        let b = Block(s[2..].parse().unwrap_or(0));
                        self.block_refs.push((b, line, col));
                        targets.push(b);
                    }
                    _ if !targets.is_empty() => {
                        return self.err("operands must come before block targets");
                    }
                    Tok::Punct('%') => {
                        let (line, col) = self.here();
                        let t = self.temp()?;
                        // `%N:class`: the class of a temp no instruction defines (allocated
                        // functions: a phi left out of SSA without a copy).
                        if self.eat(':') {
                            self.declare(t, line, col, "is read with another class than its own")?;
                        }
                        let op = self.operand_suffix(Operand::temp(t))?;
                        inst.operands.push(op);
                    }
                    Tok::Int(v) => {
                        if !(i32::MIN as i64..=u32::MAX as i64).contains(&v) {
                            return self.err(format!("constant {v} does not fit in 32 bits"));
                        }
                        self.bump();
                        let op = self.operand_suffix(Operand::constant(v as u32))?;
                        inst.operands.push(op);
                    }
                    Tok::Float(bits) => {
                        self.bump();
                        let op = self.operand_suffix(Operand::constant(bits))?;
                        inst.operands.push(op);
                    }
                    Tok::Ident(s) if s == "undef" => {
                        self.bump();
                        self.expect(':', "after `undef`")?;
                        let class = self.class()?;
                        let op = self.operand_suffix(Operand::undef(class))?;
                        inst.operands.push(op);
                    }
                    t => {
                        return self
                            .err(format!("expected an operand, found {}", Self::describe(&t)));
                    }
                }
                if !self.eat(',') {
                    break;
                }
            }
        }
        inst.targets = targets.into();
        if inst.imms.len() != info.imms as usize {
            return Err(ParseError {
                line: ol,
                col: oc,
                message: format!(
                    "`{name}` takes {} immediate(s), found {}",
                    info.imms,
                    inst.imms.len()
                ),
            });
        }
        Ok(inst)
    }
}
