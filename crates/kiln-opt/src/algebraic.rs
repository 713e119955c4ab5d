//! Algebraic simplification by rules written as data, in the spirit of NIR's
//! `nir_opt_algebraic.py`: each rule is a search pattern and a replacement in a small
//! S-expression language, a condition on the constants it binds, and its precision — exact
//! (bit for bit on every input) or relaxed (valid under GLSL's relaxed floating-point
//! precision, with the tolerance its test holds it to). The pass rewrites every instruction a
//! rule matches, to a fixed point. The design and the rule language are in `docs/middle.md`
//! ("Algebraic rules").

use crate::util::{Avail, is_free_operand, set_value};
use kiln_analysis::{Changed, Context, PassError};
use kiln_ir::semantics::eval_scalar;
use kiln_ir::{Block, Def, Function, Inst, InstFlags, Opcode, Operand, OperandFlags, Value};
use smallvec::SmallVec;
use std::sync::OnceLock;

/// How exact a rule, or the middle end, is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Bit for bit what the program computes, on every input.
    Exact,
    /// GLSL's relaxed precision: results within the stated tolerance, NaN payloads and the
    /// sign of a zero free.
    Relaxed,
}

/// What a relaxed rule may change, which its test allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tolerance {
    /// Nothing: bit for bit.
    None,
    /// A NaN's payload (a signalling NaN may come out quiet).
    NanPayload,
    /// The sign of a zero and NaN payloads.
    SignedZero,
    /// Up to this many units in the last place, besides the sign of a zero and NaN payloads.
    Ulps(u32),
    /// Reassociation (GLSL's operations without `precise`, NIR's inexact rules): where the
    /// inputs and every intermediate value of the search pattern are finite, the result within
    /// this many units in the last place of the largest of them; infinities and NaNs free.
    Reassociated(u32),
}

/// One rule.
#[derive(Debug)]
pub struct Rule {
    pub name: &'static str,
    /// The search pattern: `(op operand…)`, operands being patterns, variables (`a`: any
    /// value; `#a`: a constant) or constants (`1.0`, `-1`, `0x80000000`).
    pub from: &'static str,
    /// The replacement, over the variables of `from`; operations on constants only are
    /// folded as the rule applies.
    pub to: &'static str,
    /// A condition on the constants bound to `#` variables, in order of first appearance.
    pub when: Option<fn(&[u32]) -> bool>,
    /// Every operation of the search pattern below its root has no reader but the pattern
    /// (NIR's `is_used_once`): for rules that move an operation outward, so that a value read
    /// twice is not computed twice.
    pub once: bool,
    pub precision: Precision,
    pub tolerance: Tolerance,
}

const fn exact(name: &'static str, from: &'static str, to: &'static str) -> Rule {
    Rule {
        name,
        from,
        to,
        when: None,
        once: false,
        precision: Precision::Exact,
        tolerance: Tolerance::None,
    }
}

const fn relaxed(
    name: &'static str,
    from: &'static str,
    to: &'static str,
    tolerance: Tolerance,
) -> Rule {
    Rule {
        name,
        from,
        to,
        when: None,
        once: false,
        precision: Precision::Relaxed,
        tolerance,
    }
}

const fn when(mut rule: Rule, f: fn(&[u32]) -> bool) -> Rule {
    rule.when = Some(f);
    rule
}

const fn once(mut rule: Rule) -> Rule {
    rule.once = true;
    rule
}

fn fl(x: u32) -> f32 {
    f32::from_bits(x)
}

/// `1 / c` is a normal float (so `a · (1/c)` is within an ulp or two of `a / c`).
fn normal_reciprocal(c: &[u32]) -> bool {
    (1.0 / fl(c[0])).is_normal()
}

/// `c` is a power of two whose reciprocal is a normal float: `a / c` and `a · (1/c)` are the
/// same number (both exact scalings) unless the result leaves the normal range.
fn power_of_two(c: &[u32]) -> bool {
    let x = fl(c[0]).abs();
    x.is_normal() && (1.0 / x).is_normal() && c[0] & 0x007f_ffff == 0
}

/// The rules, in the order they are tried at an instruction.
pub const RULES: &[Rule] = &[
    // Division: by a constant, a multiplication by its reciprocal (exact for powers of two);
    // otherwise a reciprocal the value numbering shares between divisions by one value
    // (NIR's `lower_fdiv`, done here so that folding and numbering see it).
    when(
        exact("fdiv_power_of_two", "(fdiv a #b)", "(fmul a (frcp #b))"),
        power_of_two,
    ),
    when(
        relaxed(
            "fdiv_constant",
            "(fdiv a #b)",
            "(fmul a (frcp #b))",
            Tolerance::Ulps(2),
        ),
        normal_reciprocal,
    ),
    relaxed(
        "fdiv_reciprocal",
        "(fdiv a b)",
        "(fmul a (frcp b))",
        Tolerance::Ulps(2),
    ),
    // Identities (NaN in, NaN out: its payload is free under relaxed precision).
    relaxed("fmul_one", "(fmul a 1.0)", "a", Tolerance::NanPayload),
    relaxed(
        "fmul_minus_one",
        "(fmul a -1.0)",
        "(fneg a)",
        Tolerance::NanPayload,
    ),
    relaxed(
        "fadd_minus_zero",
        "(fadd a -0.0)",
        "a",
        Tolerance::NanPayload,
    ),
    relaxed("fadd_zero", "(fadd a 0.0)", "a", Tolerance::SignedZero),
    relaxed("fsub_zero", "(fsub a 0.0)", "a", Tolerance::NanPayload),
    relaxed(
        "fsub_from_zero",
        "(fsub 0.0 a)",
        "(fneg a)",
        Tolerance::SignedZero,
    ),
    relaxed("fdiv_one", "(fdiv a 1.0)", "a", Tolerance::NanPayload),
    // Negation moves into the operation that reads it (a NaN's sign is free).
    relaxed(
        "fadd_fneg",
        "(fadd a (fneg b))",
        "(fsub a b)",
        Tolerance::NanPayload,
    ),
    relaxed(
        "fsub_fneg",
        "(fsub a (fneg b))",
        "(fadd a b)",
        Tolerance::NanPayload,
    ),
    relaxed(
        "fmul_fneg_fneg",
        "(fmul (fneg a) (fneg b))",
        "(fmul a b)",
        Tolerance::NanPayload,
    ),
    // Cancellation and absorption, where values are finite (NIR's inexact rules): a value
    // added and taken away again, or multiplied by zero.
    relaxed(
        "fsub_fadd_cancel",
        "(fsub (fadd a b) a)",
        "b",
        Tolerance::Reassociated(2),
    ),
    relaxed(
        "fadd_fsub_cancel",
        "(fadd a (fsub b a))",
        "b",
        Tolerance::Reassociated(2),
    ),
    relaxed(
        "fsub_fsub_cancel",
        "(fsub a (fsub a b))",
        "b",
        Tolerance::Reassociated(2),
    ),
    relaxed(
        "fsub_fsub_negate",
        "(fsub (fsub a b) a)",
        "(fneg b)",
        Tolerance::Reassociated(2),
    ),
    relaxed("fsub_self", "(fsub a a)", "0.0", Tolerance::Reassociated(0)),
    // Factoring (NIR's `~fadd(fmul(a, b), fmul(a, c)) → fmul(a, fadd(b, c))`), where the
    // products are read by the sum alone: one multiply fewer, none with constant factors.
    once(relaxed(
        "fadd_fmul_factor",
        "(fadd (fmul a b) (fmul a c))",
        "(fmul a (fadd b c))",
        Tolerance::Reassociated(2),
    )),
    once(relaxed(
        "fsub_fmul_factor",
        "(fsub (fmul a b) (fmul a c))",
        "(fmul a (fsub b c))",
        Tolerance::Reassociated(2),
    )),
    relaxed(
        "fmul_zero",
        "(fmul a 0.0)",
        "0.0",
        Tolerance::Reassociated(0),
    ),
    // Negation moves outward, to where an addition, a subtraction or another negation
    // absorbs it, or into a constant (NIR's `fmul(fneg(a), b) → fneg(fmul(a, b))`).
    exact("fneg_fneg", "(fneg (fneg a))", "a"),
    relaxed(
        "fmul_fneg_constant",
        "(fmul (fneg a) #b)",
        "(fmul a (fneg #b))",
        Tolerance::NanPayload,
    ),
    relaxed(
        "fneg_fmul_constant",
        "(fneg (fmul a #b))",
        "(fmul a (fneg #b))",
        Tolerance::NanPayload,
    ),
    once(relaxed(
        "fmul_fneg",
        "(fmul (fneg a) b)",
        "(fneg (fmul a b))",
        Tolerance::NanPayload,
    )),
    once(relaxed(
        "fsub_fneg_first",
        "(fsub (fneg a) b)",
        "(fneg (fadd a b))",
        Tolerance::SignedZero,
    )),
    relaxed(
        "fneg_fsub",
        "(fneg (fsub a b))",
        "(fsub b a)",
        Tolerance::SignedZero,
    ),
    exact("flt_fneg_fneg", "(flt (fneg a) (fneg b))", "(flt b a)"),
    exact(
        "flt_fneg_constant",
        "(flt (fneg a) #b)",
        "(flt (fneg #b) a)",
    ),
    exact(
        "flt_constant_fneg",
        "(flt #a (fneg b))",
        "(flt b (fneg #a))",
    ),
    exact("fle_fneg_fneg", "(fle (fneg a) (fneg b))", "(fle b a)"),
    exact(
        "fle_fneg_constant",
        "(fle (fneg a) #b)",
        "(fle (fneg #b) a)",
    ),
    exact(
        "fle_constant_fneg",
        "(fle #a (fneg b))",
        "(fle b (fneg #a))",
    ),
    // Fused multiply-adds with a trivial factor or addend (`mix(x, 0, t)` leaves `0·t + …`).
    relaxed(
        "ffma_zero_first",
        "(ffma 0.0 a b)",
        "b",
        Tolerance::Reassociated(0),
    ),
    relaxed(
        "ffma_zero_second",
        "(ffma a 0.0 b)",
        "b",
        Tolerance::Reassociated(0),
    ),
    relaxed(
        "ffma_one_first",
        "(ffma 1.0 a b)",
        "(fadd a b)",
        Tolerance::NanPayload,
    ),
    relaxed(
        "ffma_one_second",
        "(ffma a 1.0 b)",
        "(fadd a b)",
        Tolerance::NanPayload,
    ),
    relaxed(
        "ffma_zero_addend",
        "(ffma a b 0.0)",
        "(fmul a b)",
        Tolerance::SignedZero,
    ),
    exact("fabs_fneg", "(fabs (fneg a))", "(fabs a)"),
    // A bound of a value with itself, or twice (a NaN gives way to the other operand).
    relaxed("fmax_self", "(fmax a a)", "a", Tolerance::NanPayload),
    relaxed("fmin_self", "(fmin a a)", "a", Tolerance::NanPayload),
    relaxed(
        "fmax_fmax",
        "(fmax (fmax a b) a)",
        "(fmax a b)",
        Tolerance::NanPayload,
    ),
    relaxed(
        "fmin_fmin",
        "(fmin (fmin a b) a)",
        "(fmin a b)",
        Tolerance::NanPayload,
    ),
    exact("sel_same", "(sel a b b)", "b"),
    // A comparison of a value with itself (`fle` is unordered-or-less-equal: true for a NaN
    // too, `flt` false for one).
    exact("flt_self", "(flt a a)", "0"),
    exact("fle_self", "(fle a a)", "-1"),
    exact("ilt_self", "(ilt a a)", "0"),
    exact("ile_self", "(ile a a)", "-1"),
    exact("ult_self", "(ult a a)", "0"),
    exact("ule_self", "(ule a a)", "-1"),
    exact("ieq_self", "(ieq a a)", "-1"),
    exact("ine_self", "(ine a a)", "0"),
    // Booleans (0 or −1): selects between them are logic (a select of other values stays one:
    // on the QPU it reads the condition's flags, where `iand` would need it in a register), a
    // negated condition swaps the arms, a
    // negated comparison is the opposite one (`fle` is `not flt` with its operands swapped,
    // NaN included), and comparisons with one bound merge (NIR's `ior(flt(a, c), flt(b, c))
    // → flt(fmin(a, b), c)`; fmin and fmax return the other operand of a NaN, as the
    // comparison of a NaN is false).
    exact("inot_inot", "(inot (inot a))", "a"),
    exact("ior_zero", "(ior a 0)", "a"),
    exact("ior_self", "(ior a a)", "a"),
    exact("iand_ones", "(iand a -1)", "a"),
    exact("iand_self", "(iand a a)", "a"),
    exact("inot_flt", "(inot (flt a b))", "(fle b a)"),
    exact("inot_fle", "(inot (fle a b))", "(flt b a)"),
    exact("sel_inot", "(sel (inot ?a) b c)", "(sel ?a c b)"),
    once(exact(
        "sel_fle",
        "(sel (fle a b) c d)",
        "(sel (flt b a) d c)",
    )),
    exact("sel_true_or", "(sel ?a -1 ?b)", "(ior ?a ?b)"),
    exact("sel_or_false", "(sel ?a ?b 0)", "(iand ?a ?b)"),
    exact("sel_boolean", "(sel a -1 0)", "(ine a 0)"),
    exact("sel_boolean_not", "(sel a 0 -1)", "(ieq a 0)"),
    exact(
        "ior_flt_below",
        "(ior (flt a #c) (flt b #c))",
        "(flt (fmin a b) #c)",
    ),
    exact(
        "ior_flt_above",
        "(ior (flt #c a) (flt #c b))",
        "(flt #c (fmax a b))",
    ),
    once(exact(
        "ior_ior_flt_below",
        "(ior (ior (flt a #c) b) (flt d #c))",
        "(ior (flt (fmin a d) #c) b)",
    )),
    once(exact(
        "ior_ior_flt_above",
        "(ior (ior (flt #c a) b) (flt #c d))",
        "(ior (flt #c (fmax a d)) b)",
    )),
    exact("fabs_fabs", "(fabs (fabs a))", "(fabs a)"),
    // Powers (NIR's `fpow` rules): exp2 and log2 where the SFU has them, multiplies where
    // the exponent is small.
    relaxed("fpow_one", "(fpow a 1.0)", "a", Tolerance::Ulps(4)),
    relaxed("fpow_two", "(fpow a 2.0)", "(fmul a a)", Tolerance::Ulps(4)),
    relaxed(
        "fpow_base_two",
        "(fpow 2.0 a)",
        "(fexp2 a)",
        Tolerance::Ulps(4),
    ),
];

/// What a variable of a pattern matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Any value (`a`).
    Any,
    /// A constant (`#a`).
    Constant,
    /// A boolean: a value known to be 0 or −1 in every lane (`?a`: a comparison, a logic
    /// operation of booleans, a select between booleans; NIR's 1-bit booleans).
    Boolean,
}

/// A parsed pattern.
#[derive(Clone, Debug, PartialEq)]
enum Pat {
    /// Variable number `k`, of `kind`.
    Var {
        k: usize,
        kind: Kind,
    },
    Const(u32),
    Op(Opcode, Vec<Pat>),
}

/// A rule parsed.
#[derive(Debug)]
struct Compiled {
    rule: &'static Rule,
    from: Pat,
    to: Pat,
    vars: usize,
    /// Variables bound to constants, in order of first appearance.
    constants: Vec<usize>,
}

/// Parses one pattern; `vars` names the variables seen so far.
fn parse(text: &str, vars: &mut Vec<(String, Kind)>, new_vars: bool) -> Result<Pat, String> {
    let toks: Vec<String> = text
        .replace('(', " ( ")
        .replace(')', " ) ")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let mut pos = 0;
    let pat = parse_at(&toks, &mut pos, vars, new_vars)?;
    if pos != toks.len() {
        return Err(format!("`{text}`: text after the pattern"));
    }
    Ok(pat)
}

fn parse_at(
    toks: &[String],
    pos: &mut usize,
    vars: &mut Vec<(String, Kind)>,
    new_vars: bool,
) -> Result<Pat, String> {
    let tok = toks.get(*pos).ok_or("a pattern ends early")?.clone();
    *pos += 1;
    if tok == "(" {
        let name = toks.get(*pos).ok_or("an operation without a name")?;
        let op = Opcode::from_name(name).ok_or_else(|| format!("unknown operation `{name}`"))?;
        *pos += 1;
        let mut args = Vec::new();
        while toks.get(*pos).is_some_and(|t| t != ")") {
            args.push(parse_at(toks, pos, vars, new_vars)?);
        }
        if toks.get(*pos).is_none() {
            return Err("unclosed `(`".into());
        }
        *pos += 1;
        if !op.info().operands.accepts(args.len()) || !op.info().defs.accepts(1) {
            return Err(format!("`{name}` with {} operands", args.len()));
        }
        return Ok(Pat::Op(op, args));
    }
    if tok == ")" {
        return Err("an unexpected `)`".into());
    }
    if tok.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
        let bits = if let Some(h) = tok.strip_prefix("0x") {
            u32::from_str_radix(h, 16).map_err(|_| format!("`{tok}` is not a number"))?
        } else if tok.contains(['.', 'e']) {
            tok.parse::<f32>()
                .map_err(|_| format!("`{tok}` is not a number"))?
                .to_bits()
        } else {
            tok.parse::<i64>()
                .map_err(|_| format!("`{tok}` is not a number"))? as u32
        };
        return Ok(Pat::Const(bits));
    }
    let (name, kind) = if let Some(n) = tok.strip_prefix('#') {
        (n.to_string(), Kind::Constant)
    } else if let Some(n) = tok.strip_prefix('?') {
        (n.to_string(), Kind::Boolean)
    } else {
        (tok.clone(), Kind::Any)
    };
    if let Some(k) = vars.iter().position(|(n, _)| *n == name) {
        if vars[k].1 != kind {
            return Err(format!("`{tok}`: `{name}` is bound as another kind"));
        }
        return Ok(Pat::Var { k, kind });
    }
    if !new_vars {
        return Err(format!("`{name}` is not bound by the search pattern"));
    }
    vars.push((name, kind));
    Ok(Pat::Var {
        k: vars.len() - 1,
        kind,
    })
}

/// Most variables a rule may bind (its bindings live on the stack).
const MAX_VARS: usize = 6;

fn compile(rule: &'static Rule) -> Result<Compiled, String> {
    let mut vars = Vec::new();
    let from = parse(rule.from, &mut vars, true).map_err(|e| format!("{}: {e}", rule.name))?;
    if vars.len() > MAX_VARS {
        return Err(format!("{}: more than {MAX_VARS} variables", rule.name));
    }
    if !matches!(from, Pat::Op(..)) {
        return Err(format!("{}: the search pattern is no operation", rule.name));
    }
    let to = parse(rule.to, &mut vars, false).map_err(|e| format!("{}: {e}", rule.name))?;
    let constants = (0..vars.len())
        .filter(|&k| vars[k].1 == Kind::Constant)
        .collect();
    Ok(Compiled {
        rule,
        from,
        to,
        vars: vars.len(),
        constants,
    })
}

/// The rules parsed, once per process (the rules are data: a malformed one is a bug the
/// tests catch).
fn compiled() -> &'static [Compiled] {
    static RULES_PARSED: OnceLock<Vec<Compiled>> = OnceLock::new();
    RULES_PARSED.get_or_init(|| {
        RULES
            .iter()
            .map(|r| compile(r).unwrap_or_else(|e| panic!("algebraic rule: {e}")))
            .collect()
    })
}

/// A pattern still to match against a value, and what follows it: the continuation of a
/// backtracking match, one node per stack frame.
#[derive(Clone, Copy)]
struct Todo<'p> {
    p: &'p Pat,
    v: Value,
    /// `v` is read by an instruction the pattern looks through, so a temp it binds must be
    /// readable at the root.
    inner: bool,
    next: Option<&'p Todo<'p>>,
}

/// Matching state at one instruction.
struct Matcher<'a> {
    func: &'a Function,
    avail: &'a Avail<'a>,
    block: Block,
    /// Readers of each temp when the round began (temps made since: unknown).
    uses: &'a [u32],
    /// The rule's `once`.
    once: bool,
    /// Temps known to be booleans when the round began.
    booleans: &'a [bool],
}

impl Matcher<'_> {
    fn boolean(&self, v: Value) -> bool {
        match v {
            Value::Const(c) => c == 0 || c == u32::MAX,
            Value::Temp(t) => self.booleans.get(t.index()) == Some(&true),
            Value::Undef(_) => false,
        }
    }

    /// Whether every (pattern, value) of `todo` matches, binding variables. A commutative
    /// operation is tried both ways round together with the rest of the pattern (full
    /// backtracking, as NIR's matcher enumerates its commutative operations' directions):
    /// `(fsub (fadd a b) a)` matches `fsub (fadd x y) y` too.
    fn all_match(&self, todo: Option<&Todo>, bind: &mut [Option<Value>]) -> bool {
        let Some(&Todo { p, v, inner, next }) = todo else {
            return true;
        };
        match p {
            Pat::Const(c) => v == Value::Const(*c) && self.all_match(next, bind),
            Pat::Var { k, kind } => {
                if *kind == Kind::Constant && !matches!(v, Value::Const(_)) {
                    return false;
                }
                if *kind == Kind::Boolean && !self.boolean(v) {
                    return false;
                }
                if matches!(v, Value::Undef(_)) {
                    return false;
                }
                // (A variable bound to another value fails before the dominance test.)
                if bind[*k].is_some_and(|w| w != v) {
                    return false;
                }
                if let Value::Temp(t) = v
                    && inner
                    && !self.avail.reaches(t, self.block)
                {
                    return false;
                }
                match bind[*k] {
                    Some(w) => w == v && self.all_match(next, bind),
                    None => {
                        bind[*k] = Some(v);
                        if self.all_match(next, bind) {
                            return true;
                        }
                        bind[*k] = None;
                        false
                    }
                }
            }
            Pat::Op(op, args) => {
                let Some(d) = self.definition(v) else {
                    return false;
                };
                let Value::Temp(t) = v else { return false };
                d.op == *op
                    && (!self.once || self.uses.get(t.index()) == Some(&1))
                    && d.defs.len() == 1
                    && self.func.class(t).size == 1
                    && self.operands_then(d, args, next, bind, true)
            }
        }
    }

    /// The instruction defining `v`, if it is a temp with a definition.
    fn definition(&self, v: Value) -> Option<&Inst> {
        let Value::Temp(t) = v else { return None };
        let &(b, i) = self.avail.sites().get(t.index())?.as_ref()?;
        Some(&self.func.block(b).insts[i])
    }

    /// Whether `p` can match `v` as far as one look shows (its operation, its constant): the
    /// cheap test before the whole match.
    fn may_match(&self, p: &Pat, v: Value) -> bool {
        p.fits(shape(self.func, self.avail, v))
    }

    /// Whether the operands of `inst` match `args` (either order for a commutative pair) and
    /// then `rest` does.
    fn operands_then(
        &self,
        inst: &Inst,
        args: &[Pat],
        rest: Option<&Todo>,
        bind: &mut [Option<Value>],
        inner: bool,
    ) -> bool {
        let n = args.len();
        if inst.operands.len() != n || n > 4 {
            return false;
        }
        let swap = inst.op.info().commutative && n == 2;
        let orders: &[[usize; 4]] = if swap {
            &[[0, 1, 2, 3], [1, 0, 2, 3]]
        } else {
            &[[0, 1, 2, 3]]
        };
        for order in orders {
            let value = |j: usize| inst.operands[order[j]].value;
            if !(0..n).all(|j| self.may_match(&args[j], value(j))) {
                continue;
            }
            let mut items: [(&Pat, Value); 4] = [(&args[0], Value::Const(0)); 4];
            for (j, item) in items.iter_mut().enumerate().take(n) {
                *item = (&args[j], value(j));
            }
            if self.chain(&items[..n], inner, rest, bind) {
                return true;
            }
        }
        false
    }

    /// [`Matcher::all_match`] of `items` in front of `rest`: a node per item on the stack,
    /// the last built first.
    fn chain(
        &self,
        items: &[(&Pat, Value)],
        inner: bool,
        rest: Option<&Todo>,
        bind: &mut [Option<Value>],
    ) -> bool {
        match items.split_last() {
            None => self.all_match(rest, bind),
            Some((&(p, v), init)) => {
                let node = Todo {
                    p,
                    v,
                    inner,
                    next: rest,
                };
                self.chain(init, inner, Some(&node), bind)
            }
        }
    }

    /// Whether the operands of the root `inst` match `args`.
    fn operands(&self, inst: &Inst, args: &[Pat], bind: &mut [Option<Value>]) -> bool {
        self.operands_then(inst, args, None, bind, false)
    }
}

/// Builds `p` over `bind` before the root: new instructions of the root's class and flags go
/// to `out`; operations on constants fold.
fn build(
    p: &Pat,
    bind: &[Option<Value>],
    func: &mut Function,
    root: &Inst,
    out: &mut Vec<Inst>,
) -> Option<Value> {
    Some(match p {
        Pat::Const(c) => Value::Const(*c),
        Pat::Var { k, .. } => bind[*k]?,
        Pat::Op(op, args) => {
            let vals: Vec<Value> = args
                .iter()
                .map(|a| build(a, bind, func, root, out))
                .collect::<Option<_>>()?;
            let consts: Option<Vec<u32>> = vals
                .iter()
                .map(|v| match v {
                    Value::Const(c) => Some(*c),
                    _ => None,
                })
                .collect();
            if let Some(cs) = consts
                && let Some(k) = eval_scalar(*op, &cs)
            {
                return Some(Value::Const(k));
            }
            let t = func.new_temp(func.class(root.defs[0].temp));
            let mut inst = Inst::new(*op);
            inst.flags = InstFlags {
                divergent: false,
                ..root.flags
            };
            inst.defs.push(Def::new(t));
            inst.operands.extend(vals.into_iter().map(Operand::from));
            out.push(inst);
            Value::Temp(t)
        }
    })
}

/// A value as far as one look shows: its constant, or the operation defining it.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Const(u32),
    /// A temp defined by this operation.
    Op(Opcode),
    /// A temp with no definition, or undefined.
    Other,
}

fn shape(func: &Function, avail: &Avail, v: Value) -> Shape {
    match v {
        Value::Const(c) => Shape::Const(c),
        Value::Temp(t) => match avail.sites().get(t.index()) {
            Some(Some((db, di))) => Shape::Op(func.block(*db).insts[*di].op),
            _ => Shape::Other,
        },
        Value::Undef(_) => Shape::Other,
    }
}

impl Pat {
    /// Whether the pattern can match a value of `shape` (its operation, its constant): the
    /// cheap test before the whole match.
    fn fits(&self, shape: Shape) -> bool {
        match (self, shape) {
            (Pat::Const(c), Shape::Const(v)) => *c == v,
            (Pat::Var { kind, .. }, shape) => {
                *kind != Kind::Constant || matches!(shape, Shape::Const(_))
            }
            (Pat::Op(op, _), Shape::Op(d)) => *op == d,
            (Pat::Const(_) | Pat::Op(..), _) => false,
        }
    }
}

/// Tries `rules` on the instruction at (b, i); on a match, rewrites it in place and returns the
/// new instructions that go before it.
fn rewrite(
    func: &mut Function,
    avail: &Avail,
    uses: &[u32],
    booleans: &[bool],
    rules: &Rules,
    b: Block,
    i: usize,
) -> Option<Vec<Inst>> {
    let inst = &func.block(b).insts[i];
    // (Most operations are the root of no rule: the cheapest test first.)
    let root_rules = rules.get(inst.op.generic_index()?)?.as_ref()?;
    // The rewrite replaces the root's operation and operands: its register constraints would
    // name operands it no longer has.
    if inst.defs.len() != 1
        || func.class(inst.defs[0].temp).size != 1
        || inst.op.info().side_effects
        || inst.has_register_constraints()
    {
        return None;
    }
    // What each operand is, looked up once for every rule: its constant, or the operation
    // defining it.
    let values: SmallVec<[Value; 4]> = inst.operands.iter().map(|o| o.value).collect();
    let shapes: SmallVec<[Shape; 4]> = values.iter().map(|&v| shape(func, avail, v)).collect();
    let swap = inst.op.info().commutative && shapes.len() == 2;
    let mut candidates = root_rules.candidates(&shapes, &values, swap);
    while candidates != 0 {
        let c = root_rules.rules[candidates.trailing_zeros() as usize];
        candidates &= candidates - 1;
        let Pat::Op(_, args) = &c.from else { continue };
        let m = Matcher {
            func,
            avail,
            block: b,
            uses,
            once: c.rule.once,
            booleans,
        };
        let mut bind = [None; MAX_VARS];
        let bind = &mut bind[..c.vars];
        if !m.operands(inst, args, bind) {
            continue;
        }
        if let Some(when) = c.rule.when {
            let consts: Vec<u32> = c
                .constants
                .iter()
                .filter_map(|&k| match bind[k] {
                    Some(Value::Const(x)) => Some(x),
                    _ => None,
                })
                .collect();
            if !when(&consts) {
                continue;
            }
        }
        let root = inst.clone();
        let mut out = Vec::new();
        let (op, vals) = match &c.to {
            Pat::Op(op, args) => {
                let vals: Vec<Value> = args
                    .iter()
                    .map(|a| build(a, bind, func, &root, &mut out))
                    .collect::<Option<_>>()?;
                let consts: Option<Vec<u32>> = vals
                    .iter()
                    .map(|v| match v {
                        Value::Const(c) => Some(*c),
                        _ => None,
                    })
                    .collect();
                match consts.and_then(|cs| eval_scalar(*op, &cs)) {
                    Some(k) => (Opcode::Mov, vec![Value::Const(k)]),
                    None => (*op, vals),
                }
            }
            p => (Opcode::Mov, vec![build(p, bind, func, &root, &mut out)?]),
        };
        let target = &mut func.block_mut(b).insts[i];
        target.op = op;
        target.operands.clear();
        target.operands.extend(vals.into_iter().map(|v| {
            let mut o = Operand::from(v);
            o.flags = OperandFlags::empty();
            o
        }));
        return Some(out);
    }
    None
}

/// Reads through copies of constants at (b, i) (a rule's replacement may be one) and folds
/// the instruction when all its operands are then constants, so that rules see the constants
/// their earlier rewrites made. Whether anything changed.
fn constant_operands(func: &mut Function, avail: &Avail, b: Block, i: usize) -> bool {
    let constant_of = |func: &Function, v: Value| match v {
        Value::Temp(t) => match avail.sites().get(t.index()) {
            Some(Some((db, di))) => {
                let d = &func.block(*db).insts[*di];
                match (d.op, d.operands.first()) {
                    (Opcode::Mov, Some(o)) if d.operands.len() == 1 => match o.value {
                        Value::Const(c) => Some(c),
                        _ => None,
                    },
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    };
    let inst = &func.block(b).insts[i];
    if inst.op.is_phi() || inst.op.info().side_effects || inst.op.info().terminator {
        return false;
    }
    let mut changed = false;
    for k in 0..inst.operands.len() {
        let inst = &func.block(b).insts[i];
        if let Some(c) = constant_of(func, inst.operands[k].value)
            && is_free_operand(inst, k)
        {
            set_value(&mut func.block_mut(b).insts[i].operands[k], Value::Const(c));
            changed = true;
        }
    }
    let inst = &mut func.block_mut(b).insts[i];
    if inst.op == Opcode::Mov
        || inst.defs.len() != 1
        || !inst.imms.is_empty()
        || inst.has_register_constraints()
        || !inst
            .operands
            .iter()
            .all(|o| matches!(o.value, Value::Const(_)))
    {
        return changed;
    }
    let consts: Option<SmallVec<[u32; 4]>> = inst
        .operands
        .iter()
        .map(|o| match o.value {
            Value::Const(c) => Some(c),
            _ => None,
        })
        .collect();
    if let Some(k) = consts.and_then(|cs| eval_scalar(inst.op, &cs)) {
        inst.op = Opcode::Mov;
        inst.operands.clear();
        inst.operands.push(Operand::constant(k));
        changed = true;
    }
    changed
}

/// The temps known to be booleans (0 or −1 in every lane): comparisons, and logic operations,
/// selects, copies and phis of booleans — one walk in reverse post-order (a phi of a value from
/// a back edge is not known to be one).
fn booleans(func: &Function, cfg: &kiln_ir::Cfg) -> Vec<bool> {
    use Opcode::*;
    let mut known = vec![false; func.temps.len()];
    for b in cfg.rpo() {
        for inst in &func.block(b).insts {
            let [def] = inst.defs.as_slice() else {
                continue;
            };
            let is = |k: usize| match inst.operands[k].value {
                Value::Const(c) => c == 0 || c == u32::MAX,
                Value::Temp(t) => known[t.index()],
                Value::Undef(_) => false,
            };
            let all = |from: usize| (from..inst.operands.len()).all(is);
            known[def.temp.index()] = match inst.op {
                Flt | Fle | Feq | Fne | Ieq | Ine | Ilt | Ile | Ult | Ule => true,
                Inot | Iand | Ior | Ixor | Mov | Phi => all(0),
                Sel => all(1),
                _ => false,
            };
        }
    }
    known
}

/// How many operands of live instructions read each temp: a rewrite leaves the instructions
/// it no longer reads in place until dead-code elimination, and they do not count.
fn readers(func: &Function) -> Vec<u32> {
    let mut uses = vec![0; func.temps.len()];
    let mut def_site: Vec<Option<&Inst>> = vec![None; func.temps.len()];
    for inst in func.blocks.iter().flat_map(|b| &b.insts) {
        for o in &inst.operands {
            if let Value::Temp(t) = o.value {
                uses[t.index()] += 1;
            }
        }
        if let [d] = inst.defs.as_slice() {
            def_site[d.temp.index()] = Some(inst);
        }
    }
    // Unread pure definitions are dead: what they read is read once less.
    let removable =
        |i: &Inst| !i.op.info().side_effects && !i.op.info().terminator && !i.op.is_phi();
    let mut dead: Vec<usize> = (0..uses.len())
        .filter(|&t| uses[t] == 0 && def_site[t].is_some_and(removable))
        .collect();
    while let Some(t) = dead.pop() {
        let Some(inst) = def_site[t].take() else {
            continue;
        };
        for o in &inst.operands {
            if let Value::Temp(u) = o.value {
                uses[u.index()] -= 1;
                if uses[u.index()] == 0 && def_site[u.index()].is_some_and(removable) {
                    dead.push(u.index());
                }
            }
        }
    }
    uses
}

/// Rules by the operation at the root of their search pattern (indexed by the operation's
/// number), in order.
type Rules = Vec<Option<Root>>;

/// The most root operands the index of [`Root`] looks at (`ffma`, `sel`).
const ROOT_ARGS: usize = 3;

/// The rules of one root operation, in the order they are tried, with an index of what their
/// root's operands must be — the cheap test before a matcher, for every rule at once. Bit `r`
/// of a mask stands for `rules[r]`.
#[derive(Default)]
struct Root {
    rules: Vec<&'static Compiled>,
    /// Per operand count, the rules whose root takes that many.
    arity: [u64; ROOT_ARGS + 1],
    /// Per operand position: the rules whose operand there is a variable that takes anything,
    /// one that takes any constant, a given constant, and a given operation.
    any: [u64; ROOT_ARGS],
    constant: [u64; ROOT_ARGS],
    value: [Vec<(u32, u64)>; ROOT_ARGS],
    op: [Vec<(Opcode, u64)>; ROOT_ARGS],
    /// Per pair of operand positions ([`PAIRS`]): the rules whose operands there are one
    /// variable, which match only where the two operands are one value (`(fsub a a)`).
    same: [u64; PAIRS.len()],
}

/// The pairs of a root's operand positions, for [`Root::same`].
const PAIRS: [(usize, usize); 3] = [(0, 1), (0, 2), (1, 2)];

impl Root {
    fn push(&mut self, c: &'static Compiled) {
        let Pat::Op(_, args) = &c.from else { return };
        let bit = 1u64 << self.rules.len();
        assert!(
            self.rules.len() < 64 && args.len() <= ROOT_ARGS,
            "the root index holds 64 rules of up to {ROOT_ARGS} operands"
        );
        self.rules.push(c);
        self.arity[args.len()] |= bit;
        fn add<K: PartialEq>(list: &mut Vec<(K, u64)>, key: K, bit: u64) {
            match list.iter_mut().find(|e| e.0 == key) {
                Some(e) => e.1 |= bit,
                None => list.push((key, bit)),
            }
        }
        for (m, &(i, j)) in PAIRS.iter().enumerate() {
            if let (Some(Pat::Var { k: x, .. }), Some(Pat::Var { k: y, .. })) =
                (args.get(i), args.get(j))
                && x == y
            {
                self.same[m] |= bit;
            }
        }
        for (k, a) in args.iter().enumerate() {
            match a {
                Pat::Var { kind, .. } if *kind == Kind::Constant => self.constant[k] |= bit,
                Pat::Var { .. } => self.any[k] |= bit,
                Pat::Const(v) => add(&mut self.value[k], *v, bit),
                Pat::Op(o, _) => add(&mut self.op[k], *o, bit),
            }
        }
    }

    /// The rules whose operand `k` can be a value of `shape` ([`Pat::fits`] of each).
    fn fitting(&self, k: usize, shape: Shape) -> u64 {
        fn find<K: PartialEq>(list: &[(K, u64)], key: K) -> u64 {
            list.iter().find(|e| e.0 == key).map_or(0, |e| e.1)
        }
        self.any[k]
            | match shape {
                Shape::Const(c) => self.constant[k] | find(&self.value[k], c),
                Shape::Op(o) => find(&self.op[k], o),
                Shape::Other => 0,
            }
    }

    /// The rules whose root's operands can be `shapes` (of `values`), in either order of a
    /// commutative pair (`swap`): the cheap test of `Matcher::may_match`, before a matcher is
    /// made. (Swapping a pair leaves whether its two operands are one value.)
    fn candidates(&self, shapes: &[Shape], values: &[Value], swap: bool) -> u64 {
        let Some(&arity) = self.arity.get(shapes.len()) else {
            return 0;
        };
        let mut arity = arity;
        for (m, &(i, j)) in PAIRS.iter().enumerate() {
            if j < values.len() && values[i] != values[j] {
                arity &= !self.same[m];
            }
        }
        let direct = shapes
            .iter()
            .enumerate()
            .fold(arity, |m, (k, &s)| m & self.fitting(k, s));
        let swapped = if swap && shapes.len() == 2 {
            arity & self.fitting(0, shapes[1]) & self.fitting(1, shapes[0])
        } else {
            0
        };
        direct | swapped
    }
}

/// The rules of `precision` (exact rules at both), by root operation; built once per process.
fn rules_at(precision: Precision) -> &'static Rules {
    static EXACT: OnceLock<Rules> = OnceLock::new();
    static RELAXED: OnceLock<Rules> = OnceLock::new();
    let cell = match precision {
        Precision::Exact => &EXACT,
        Precision::Relaxed => &RELAXED,
    };
    cell.get_or_init(|| {
        let mut by_root: Rules = (0..Opcode::ALL.len()).map(|_| None).collect();
        for c in compiled() {
            if precision == Precision::Exact && c.rule.precision != Precision::Exact {
                continue;
            }
            if let Pat::Op(op, _) = c.from {
                let k = op.generic_index().expect("rules are of generic operations");
                by_root[k].get_or_insert_with(Root::default).push(c);
            }
        }
        by_root
    })
}

/// How many operations deep a search pattern reaches below its root (1: the root alone).
fn depth(p: &Pat) -> u8 {
    match p {
        Pat::Op(_, args) => 1 + args.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The deepest search pattern of any rule, found once per process.
fn deepest() -> u8 {
    static DEEPEST: OnceLock<u8> = OnceLock::new();
    *DEEPEST.get_or_init(|| compiled().iter().map(|c| depth(&c.from)).max().unwrap_or(1))
}

/// Rewrites with the rules of `precision` to a fixed point (bounded: a rule set that cycled
/// would stop after this many rounds). Each round looks the definitions up once: an
/// instruction a rule makes is looked through in the next round.
///
/// After the first round, a round tries only the instructions whose match can have changed
/// (LLVM's InstCombine worklist, kept to rounds so that the result is the whole walk's): a
/// pattern at an instruction sees the instructions at most [`deepest`] − 1 reads below it, and
/// the read counts and boolean facts of the temps one read further, so an instruction is
/// tried again only within [`deepest`] reads above a change — an instruction rewritten or
/// made, or a temp whose read count or boolean fact differs from the round before. The
/// distance is counted in the round's walk in reverse post-order, where definitions come
/// before their readers (phis, which no pattern looks through, pass nothing on). A long chain
/// of rewrites, each enabling the next, costs its length, not a whole walk per link.
pub fn algebraic_with(cx: &mut Context, precision: Precision) -> Result<Changed, PassError> {
    rounds(cx, precision, false).map(|(changed, _)| changed)
}

/// [`algebraic_with`], and how many rounds it took; `whole`: every round visits every
/// instruction (the walk the worklist must give the same function as, for tests).
pub fn rounds(
    cx: &mut Context,
    precision: Precision,
    whole: bool,
) -> Result<(Changed, usize), PassError> {
    const ROUNDS: usize = 32;
    const FAR: u8 = u8::MAX;
    let rules = rules_at(precision);
    let reach = deepest();
    let cfg = cx.cfg()?;
    let dom = cx.dominance()?;
    // The first round's definition sites are the context's; later rounds find them again.
    let mut facts = Some(cx.def_sites());
    let func = cx.func_mut();
    let mut changed = false;
    // Temps whose definition changed in the last round, and that round's facts.
    let mut touched: Vec<bool> = Vec::new();
    let mut before: Option<(Vec<u32>, Vec<bool>)> = None;
    // Reads from each temp's definition to the nearest change (`FAR`: none within reach).
    let mut near: Vec<u8> = Vec::new();
    let mut taken = 0;
    let mut last_sites = None;
    for _ in 0..ROUNDS {
        taken += 1;
        let avail = match facts.take() {
            Some(f) => Avail::with(f, &cfg, &dom),
            None => Avail::new(func, &cfg, &dom),
        };
        let uses = readers(func);
        let booleans = booleans(func, &cfg);
        let n = func.temps.len();
        let first = whole || before.is_none();
        near.clear();
        near.resize(n, FAR);
        if let Some((old_uses, old_booleans)) = &before {
            touched.resize(n, true);
            for t in 0..n {
                if touched[t]
                    || old_uses.get(t) != uses.get(t)
                    || old_booleans.get(t) != booleans.get(t)
                {
                    near[t] = 0;
                }
            }
        }
        touched.clear();
        touched.resize(n, false);
        // (block, index, instructions to insert before it)
        let mut inserts: Vec<(Block, usize, Vec<Inst>)> = Vec::new();
        let mut round = false;
        for b in cfg.rpo() {
            for i in 0..func.block(b).insts.len() {
                let dist = if first {
                    0
                } else {
                    let inst = &func.block(b).insts[i];
                    let own = inst
                        .defs
                        .iter()
                        .filter_map(|d| near.get(d.temp.index()))
                        .min();
                    let above = if inst.op.is_phi() {
                        None
                    } else {
                        inst.used_temps()
                            .map(|t| near.get(t.index()).map_or(0, |d| d.saturating_add(1)))
                            .min()
                    };
                    own.copied().unwrap_or(FAR).min(above.unwrap_or(FAR))
                };
                let mut here = false;
                if dist <= reach {
                    here = constant_operands(func, &avail, b, i);
                    if let Some(new) = rewrite(func, &avail, &uses, &booleans, rules, b, i) {
                        here = true;
                        if !new.is_empty() {
                            inserts.push((b, i, new));
                        }
                    }
                }
                let dist = if here { 0 } else { dist };
                for d in &func.block(b).insts[i].defs {
                    let t = d.temp.index();
                    if let (Some(n), Some(c)) = (near.get_mut(t), touched.get_mut(t)) {
                        *n = (*n).min(dist);
                        *c |= here;
                    }
                }
                round |= here;
            }
        }
        insert_all(func, inserts);
        if !round {
            // This round's walk found nothing: its definition sites are the function's.
            last_sites = Some(avail.def_sites().clone());
            break;
        }
        changed = true;
        before = Some((uses, booleans));
    }
    if changed && let Some(sites) = last_sites {
        cx.give_def_sites(sites);
    }
    let changed = if changed {
        Changed::Instructions
    } else {
        Changed::Nothing
    };
    Ok((changed, taken))
}

/// Puts each list of `inserts` (block, index, instructions, in walk order: ascending in each
/// block) before the instruction at its index, each block rebuilt once — not a splice per
/// list, which would move the rest of the block every time.
fn insert_all(func: &mut Function, inserts: Vec<(Block, usize, Vec<Inst>)>) {
    let mut inserts = inserts.into_iter().peekable();
    while let Some(&(b, _, _)) = inserts.peek() {
        let old = std::mem::take(&mut func.block_mut(b).insts);
        let mut insts = Vec::with_capacity(old.len() + 4);
        let mut old = old.into_iter().enumerate().peekable();
        while let Some((_, i, _)) = inserts.peek().filter(|(ib, _, _)| *ib == b) {
            let i = *i;
            while let Some((_, inst)) = old.next_if(|(k, _)| *k < i) {
                insts.push(inst);
            }
            let (_, _, new) = inserts.next().expect("peeked");
            insts.extend(new);
        }
        insts.extend(old.map(|(_, inst)| inst));
        func.block_mut(b).insts = insts;
    }
}

/// [`algebraic_with`] at relaxed precision (the default pipeline's).
pub fn algebraic(cx: &mut Context) -> Result<Changed, PassError> {
    algebraic_with(cx, Precision::Relaxed)
}

/// [`algebraic_with`] with the exact rules only.
pub fn algebraic_exact(cx: &mut Context) -> Result<Changed, PassError> {
    algebraic_with(cx, Precision::Exact)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The root index picks, for every shape of the root's operands, the rules whose operand
    /// patterns each fit (`Pat::fits`, one rule at a time), in either order of a commutative
    /// pair: every root operation, operand counts 1–3, shapes from the constants and
    /// operations the patterns name and others.
    #[test]
    fn root_index_picks_the_rules_whose_operands_fit() {
        let mut shapes = vec![
            Shape::Other,
            Shape::Const(0x1234_5678),
            Shape::Op(Opcode::Iadd),
        ];
        for c in compiled() {
            if let Pat::Op(_, args) = &c.from {
                for a in args {
                    match a {
                        Pat::Const(v) => shapes.push(Shape::Const(*v)),
                        Pat::Op(o, _) => shapes.push(Shape::Op(*o)),
                        Pat::Var { .. } => {}
                    }
                }
            }
        }
        let mut checked = 0;
        for precision in [Precision::Exact, Precision::Relaxed] {
            let roots = Opcode::ALL.iter().zip(rules_at(precision));
            for (op, root) in roots.filter_map(|(op, root)| Some((op, root.as_ref()?))) {
                let swap = op.info().commutative;
                for n in 1..=3 {
                    let combos = shapes.len().pow(n as u32);
                    for k in (0..combos).step_by(1 + combos / 4000) {
                        let operands: Vec<Shape> = (0..n)
                            .map(|j| shapes[k / shapes.len().pow(j as u32) % shapes.len()])
                            .collect();
                        let swap = swap && n == 2;
                        // Operands that are one value, and operands that are all different:
                        // a variable named twice matches only the first.
                        for one in [true, false] {
                            let values: Vec<Value> = (0..n)
                                .map(|j| Value::Temp(kiln_ir::Temp::new(if one { 0 } else { j })))
                                .collect();
                            let want = root.rules.iter().enumerate().fold(0u64, |m, (r, c)| {
                                let Pat::Op(_, args) = &c.from else { return m };
                                let direct = args.len() == n
                                    && args.iter().zip(&operands).all(|(p, &s)| p.fits(s));
                                let swapped = swap
                                    && args.len() == 2
                                    && args[0].fits(operands[1])
                                    && args[1].fits(operands[0]);
                                let vars: Vec<usize> = args
                                    .iter()
                                    .filter_map(|a| match a {
                                        Pat::Var { k, .. } => Some(*k),
                                        _ => None,
                                    })
                                    .collect();
                                let repeats = (1..vars.len()).any(|i| vars[..i].contains(&vars[i]));
                                let bound = one || !repeats;
                                m | ((bound && (direct || swapped)) as u64) << r
                            });
                            assert_eq!(
                                root.candidates(&operands, &values, swap),
                                want,
                                "{op:?} {operands:?} {values:?}"
                            );
                            checked += (want != 0) as usize;
                        }
                    }
                }
            }
        }
        assert!(checked > 100, "{checked} shapes some rule fits");
    }

    /// Every rule parses, binds in its replacement only what its pattern binds, and keeps
    /// its `when` to patterns with constants.
    #[test]
    fn rules_parse() {
        for r in RULES {
            let c = compile(r).unwrap_or_else(|e| panic!("{e}"));
            if r.when.is_some() {
                assert!(
                    !c.constants.is_empty(),
                    "{}: a condition but no constant",
                    r.name
                );
            }
            assert_eq!(
                r.tolerance == Tolerance::None,
                r.precision == Precision::Exact,
                "{}",
                r.name
            );
        }
        let mut names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), RULES.len(), "rule names are unique");
    }

    /// A function computing `p` with the variables as inputs (per-lane) and the `#` variables
    /// as `constants`, its value as output 0.
    fn program(p: &Pat, constants: &[(usize, u32)]) -> Function {
        use kiln_ir::{GenericTarget, builder::Builder};
        let mut func = Function::new("rule", GenericTarget::arc(64, 32));
        let v1 = func.target.class(GenericTarget::V, 1);
        let mut b = Builder::new(&mut func);

        fn emit(
            p: &Pat,
            b: &mut Builder,
            v1: kiln_ir::RegClass,
            constants: &[(usize, u32)],
            inputs: &mut Vec<(usize, kiln_ir::Temp)>,
        ) -> Operand {
            match p {
                Pat::Const(c) => Operand::constant(*c),
                Pat::Var { k, kind } => {
                    if let Some(&(_, c)) = constants.iter().find(|(j, _)| j == k) {
                        return Operand::constant(c);
                    }
                    if let Some(&(_, t)) = inputs.iter().find(|(j, _)| j == k) {
                        return Operand::temp(t);
                    }
                    let mut t = b.inst(Opcode::Input, &[*k as u32], &[v1], [])[0];
                    if *kind == Kind::Boolean {
                        // A boolean from the input: its sign.
                        let zero = Operand::constant(0);
                        t = b.inst(Opcode::Flt, &[], &[v1], [Operand::temp(t), zero])[0];
                    }
                    inputs.push((*k, t));
                    Operand::temp(t)
                }
                Pat::Op(op, args) => {
                    let ops: Vec<Operand> = args
                        .iter()
                        .map(|a| emit(a, b, v1, constants, inputs))
                        .collect();
                    Operand::temp(b.inst(*op, &[], &[v1], ops)[0])
                }
            }
        }
        let out = emit(p, &mut b, v1, constants, &mut Vec::new());
        let mut o = Inst::new(Opcode::Output);
        o.imms.push(0);
        o.operands.push(out);
        b.push(o);
        b.ret();
        func
    }

    /// Floats as ordered integers, denormals flushed (relaxed precision allows it).
    fn ordered(x: u32) -> i64 {
        let x = if fl(x).is_subnormal() || fl(x) == 0.0 {
            0
        } else {
            x
        };
        if x & 0x8000_0000 != 0 {
            -((x & 0x7fff_ffff) as i64)
        } else {
            x as i64
        }
    }

    /// Whether `got` is `want` within `t`.
    fn within(t: Tolerance, want: u32, got: u32) -> bool {
        let nan = |x: u32| fl(x).is_nan();
        match t {
            Tolerance::None => want == got,
            Tolerance::NanPayload => want == got || (nan(want) && nan(got)),
            Tolerance::SignedZero => {
                want == got || (nan(want) && nan(got)) || (fl(want) == 0.0 && fl(got) == 0.0)
            }
            Tolerance::Ulps(n) => {
                (nan(want) && nan(got))
                    || (!nan(want) && !nan(got) && (ordered(want) - ordered(got)).abs() <= n as i64)
            }
            // Checked by `reassociated_within`, which knows the intermediate values.
            Tolerance::Reassociated(_) => true,
        }
    }

    /// The value of `p` on one lane (`vars`: each variable's bits), with the largest
    /// magnitude among its inputs and intermediate values, and whether all of them are finite.
    fn eval_pattern(p: &Pat, vars: &[u32]) -> Option<(u32, f32, bool)> {
        match p {
            Pat::Const(c) => Some((*c, fl(*c).abs(), fl(*c).is_finite())),
            Pat::Var { k, .. } => {
                let x = vars[*k];
                Some((x, fl(x).abs(), fl(x).is_finite()))
            }
            Pat::Op(op, args) => {
                let mut bits = Vec::new();
                let (mut largest, mut finite) = (0f32, true);
                for a in args {
                    let (x, m, f) = eval_pattern(a, vars)?;
                    bits.push(x);
                    largest = largest.max(m);
                    finite &= f;
                }
                let r = eval_scalar(*op, &bits)?;
                Some((r, largest.max(fl(r).abs()), finite && fl(r).is_finite()))
            }
        }
    }

    /// One unit in the last place at magnitude `x` (the smallest denormal below the normals).
    fn ulp(x: f32) -> f64 {
        let e = (x.abs().to_bits() >> 23) as i32;
        2f64.powi(e.max(1) - 127 - 23)
    }

    /// [`Tolerance::Reassociated`]: where the search pattern's inputs and intermediates on
    /// these variables are finite, `got` within `n` ulps of the largest of them from `want`.
    fn reassociated_within(n: u32, from: &Pat, vars: &[u32], want: u32, got: u32) -> bool {
        let Some((_, largest, finite)) = eval_pattern(from, vars) else {
            return false;
        };
        if !finite {
            return true;
        }
        !fl(got).is_nan() && (fl(want) as f64 - fl(got) as f64).abs() <= n as f64 * ulp(largest)
    }

    /// Lane values that reach every kind of float: ordinary, tiny, huge, zeros, infinities,
    /// NaNs, denormals.
    fn value(rng: &mut kiln_ir::generate::Rng) -> u32 {
        match rng.below(8) {
            0 => [
                0,
                0x8000_0000,
                0x7f80_0000,
                0xff80_0000,
                0x7fc0_0000,
                0x7f80_0001,
                1,
                0x3f80_0000,
            ][rng.below(8)],
            1 => (rng.below(1 << 20) as f32 * 1e-30).to_bits(),
            2 => rng.next_u64() as u32,
            _ => ((rng.below(200_000) as f32 - 100_000.0) / (1 + rng.below(1000)) as f32).to_bits(),
        }
    }

    /// Every rule, differentially: a program of its search pattern before and after the pass,
    /// in the interpreter on 4,096 lanes of inputs that reach every kind of float, equal within
    /// the rule's tolerance (bit for bit for an exact rule; a relaxed rule also passes where
    /// both programs agree with denormal inputs flushed, which relaxed precision allows), and
    /// the rule fires. `#` variables take constants from a list, where the rule's condition
    /// holds.
    #[test]
    fn every_rule_holds_within_its_tolerance() {
        use kiln_interp::{Env, run};
        const CONSTANTS: [f32; 14] = [
            1.0, 2.0, 0.5, 3.0, -4.0, 0.1, 1e-3, 255.0, 7.0, -0.25, 1e30, 1e-30, 1e-40, 6.0e37,
        ];
        let mut rng = kiln_ir::generate::Rng::new(20);
        for c in compiled() {
            let sets: Vec<Vec<(usize, u32)>> = if c.constants.is_empty() {
                vec![Vec::new()]
            } else {
                CONSTANTS
                    .iter()
                    .map(|x| {
                        c.constants
                            .iter()
                            .map(|&k| (k, x.to_bits()))
                            .collect::<Vec<_>>()
                    })
                    .filter(|set| {
                        let bits: Vec<u32> = set.iter().map(|&(_, x)| x).collect();
                        c.rule.when.is_none_or(|w| w(&bits))
                    })
                    .collect()
            };
            assert!(
                !sets.is_empty(),
                "{}: no constant satisfies the condition",
                c.rule.name
            );
            for set in sets {
                let before = program(&c.from, &set);
                let mut cx = Context::new(before.clone());
                let at = if c.rule.precision == Precision::Exact {
                    Precision::Exact
                } else {
                    Precision::Relaxed
                };
                let changed = cx.run("algebraic", |cx| algebraic_with(cx, at)).unwrap();
                assert_eq!(
                    changed,
                    Changed::Instructions,
                    "{}: did not fire",
                    c.rule.name
                );
                let after = cx.into_func();
                for round in 0..64 {
                    let mut env = Env::new(64);
                    for k in 0..c.vars {
                        env.inputs
                            .insert(k as u32, (0..64).map(|_| value(&mut rng)).collect());
                    }
                    let _ = round;
                    let want = run(&before, &env).unwrap();
                    // Relaxed precision may flush denormal inputs.
                    let mut flushed = env.clone();
                    for vals in flushed.inputs.values_mut() {
                        for v in vals.iter_mut().filter(|v| fl(**v).is_subnormal()) {
                            *v &= 0x8000_0000;
                        }
                    }
                    let want_flushed = run(&before, &flushed).unwrap();
                    let got = run(&after, &env).unwrap();
                    let got_flushed = run(&after, &flushed).unwrap();
                    let value = |o: &kiln_interp::Outputs, lane: usize| {
                        o.slots[&0][lane].as_ref().unwrap()[0].unwrap()
                    };
                    for lane in 0..64 {
                        let (w, g) = (value(&want, lane), value(&got, lane));
                        let relaxed = c.rule.precision == Precision::Relaxed;
                        if let Tolerance::Reassociated(n) = c.rule.tolerance {
                            let vars: Vec<u32> = (0..c.vars)
                                .map(|k| match set.iter().find(|(j, _)| *j == k) {
                                    Some(&(_, x)) => x,
                                    None => env.inputs[&(k as u32)][lane],
                                })
                                .collect();
                            assert!(
                                reassociated_within(n, &c.from, &vars, w, g),
                                "{} {set:?}: inputs {vars:?}: {:#x} ({}) became {:#x} ({})",
                                c.rule.name,
                                w,
                                fl(w),
                                g,
                                fl(g)
                            );
                            continue;
                        }
                        assert!(
                            within(c.rule.tolerance, w, g)
                                || (relaxed
                                    && within(
                                        c.rule.tolerance,
                                        value(&want_flushed, lane),
                                        value(&got_flushed, lane)
                                    )),
                            "{} {set:?}: inputs {:?}: {:#x} ({}) became {:#x} ({})",
                            c.rule.name,
                            (0..c.vars)
                                .map(|k| env.inputs[&(k as u32)][lane])
                                .collect::<Vec<_>>(),
                            w,
                            fl(w),
                            g,
                            fl(g)
                        );
                    }
                }
            }
        }
    }

    /// `text` parsed, the pass run on it, printed.
    fn after_algebraic(text: &str) -> String {
        let mut cx = Context::new(kiln_ir::parse_function(text).unwrap());
        cx.run("algebraic", algebraic).unwrap();
        kiln_ir::print_function(cx.func())
    }

    /// An instruction bound to registers (a tied or fixed definition) keeps its operation and
    /// operands: neither a rule (`x · 1`) nor folding its constants rewrites it, which would
    /// leave the tie naming an operand it no longer has. Without the constraint, both go.
    #[test]
    fn constrained_instructions_are_not_rewritten() {
        let run = |flags: &str| {
            after_algebraic(&format!(
                "target generic(v=16, s=8)
function @f {{
bb0:
    %0:v1 = input 0
    %1:v1{flags} = fmul %0, 1.0
    %2:v1{flags} = iadd 3, 4
    output 0, %1
    output 1, %2
    return
}}
"
            ))
        };
        for flags in ["(tied=1)", "(fixed=v[3])"] {
            let out = run(flags);
            assert!(
                out.contains("= fmul %0, 1.0") && out.contains("= iadd 3, 4"),
                "{out}"
            );
        }
        let out = run("");
        assert!(
            out.contains("%1:v1 = mov %0") && out.contains("%2:v1 = mov 7"),
            "{out}"
        );
    }

    /// A commutative operation inside a pattern is tried both ways round together with the
    /// rest of the pattern: `fsub (fadd x y) y` is `fsub (fadd a b) a` with a = y, which the
    /// first order (a = x) does not bind.
    #[test]
    fn commutative_operations_backtrack() {
        let text = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fadd %0, %1
    %3:v1 = fsub %2, %1
    output 0, %3
    return
}
";
        let out = after_algebraic(text);
        assert!(out.contains("%3:v1 = mov %0"), "{out}");
    }

    /// A rule marked `once` moves a negation outward only when the product is its only
    /// reader: read twice, the negation stays where it is and is not computed twice.
    #[test]
    fn once_rules_keep_shared_values() {
        let run = |tail: &str| {
            let text = format!(
                "target generic(v=16, s=8)
function @f {{
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fneg %0
    %3:v1 = fmul %2, %1
    output 0, %3
{tail}    return
}}
"
            );
            after_algebraic(&text)
        };
        let alone = run("");
        assert!(!alone.contains("fmul %2"), "{alone}");
        assert!(alone.contains("fmul %0, %1"), "{alone}");
        let shared = run("    output 1, %2\n");
        assert!(shared.contains("%3:v1 = fmul %2, %1"), "{shared}");
    }

    /// A rule looks through an instruction only where the value it binds is readable there: a
    /// wave value (uniform file) defined in a divergent loop is not read after the loop
    /// (temporal divergence), so the negation of one, kept per lane, is not looked through.
    #[test]
    fn nested_patterns_need_available_values() {
        let run = |tail: &str| {
            let text = format!(
                "target generic(v=16, s=8)
function @f {{
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    loop bb1, bb4
bb1:
    %2:s1 = phi %1, %5
    %3:v1 = fneg %2
    %4:v1 = flt %0, %3
    if.divergent %4, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    %5:s1 = fadd %2, 1.0
    continue bb1
bb4:
    %6:v1 = fsub %0, %3
{tail}    output 0, %6
    return
}}
"
            );
            after_algebraic(&text)
        };
        let out = run("");
        assert!(out.contains("%6:v1 = fsub %0, %3"), "{out}");
        // Inside the loop the same pattern is rewritten.
        let text = "target generic(v=16, s=8)
function @f {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fneg %1
    %3:v1 = fsub %0, %2
    output 0, %3
    return
}
";
        let out = after_algebraic(text);
        assert!(out.contains("%3:v1 = fadd %0, %1"), "{out}");
    }

    #[test]
    fn malformed_rules_are_refused() {
        let bad = |from: &'static str, to: &'static str| {
            let r: &'static Rule = Box::leak(Box::new(exact("bad", from, to)));
            compile(r).unwrap_err()
        };
        assert!(bad("(fdiv a)", "a").contains("operands"));
        assert!(bad("(fmul a 1.0)", "b").contains("not bound"));
        assert!(bad("(fnope a)", "a").contains("unknown operation"));
        assert!(bad("(fmul a (fneg b)", "a").contains("unclosed"));
        assert!(bad("a", "a").contains("no operation"));
    }
}
