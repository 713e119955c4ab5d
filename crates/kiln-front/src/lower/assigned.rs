//! Which SSA variables a loop assigns, so that its header gets phis only for them (Braun et al.
//! 2013 create phis on demand; on structured input, a scan of the loop's statements for stores
//! gives the same set up front). Stores through pointers are traced to their root variable;
//! calls are followed into the callee (whose own locals are fresh and need no phi), pointer
//! arguments resolved in the caller; a `Return` of the function being lowered assigns its
//! return flag and value. Anything the scan cannot trace makes it answer `None`: every live
//! variable gets a phi.

use super::{FnCx, Lowerer, RetMode, Root, Val, Var};
use naga::{Expression, Handle, Statement};
use std::collections::BTreeSet;

/// Calls followed at most this deep (the lowering refuses deeper calls anyway).
const MAX_DEPTH: u32 = 64;

/// Where a pointer expression points: a variable, nothing the loop must merge (a uniform
/// block, a callee's fresh local), or unknown.
#[derive(Clone, Copy)]
enum Target {
    Var(Var),
    Nothing,
    Unknown,
}

/// How one function's pointer roots resolve.
struct Scope<'a> {
    f: &'a naga::Function,
    /// The function being lowered (its locals are variables) or a callee (fresh locals).
    locals: Option<&'a [Var]>,
    args: &'a dyn Fn(u32) -> Target,
}

impl Lowerer<'_, '_> {
    /// The variables the statements of `blocks` (a loop's body and continuing) assign, or
    /// `None` when the scan cannot tell.
    pub(super) fn assigned_vars(
        &self,
        cx: &FnCx<'_>,
        blocks: &[&naga::Block],
    ) -> Option<BTreeSet<Var>> {
        let args = |i: u32| match cx.args.get(i as usize) {
            Some(Val::Ptr(p)) => match p.root {
                Root::Var(v) => Target::Var(v),
                Root::Uniform { .. } => Target::Nothing,
            },
            _ => Target::Unknown,
        };
        let scope = Scope {
            f: cx.f,
            locals: Some(&cx.locals),
            args: &args,
        };
        let mut out = BTreeSet::new();
        if let RetMode::Loop { value, flag } = cx.ret
            && blocks.iter().any(|b| super::control::contains_return(b))
        {
            out.insert(flag);
            out.extend(value);
        }
        for b in blocks {
            if !self.scan(&scope, b, &mut out, 0) {
                return None;
            }
        }
        Some(out)
    }

    fn root(&self, scope: &Scope<'_>, mut h: Handle<Expression>) -> Target {
        for _ in 0..1024 {
            match scope.f.expressions[h] {
                Expression::LocalVariable(l) => {
                    return match scope.locals {
                        Some(locals) => locals
                            .get(l.index())
                            .map_or(Target::Unknown, |&v| Target::Var(v)),
                        None => Target::Nothing,
                    };
                }
                Expression::GlobalVariable(g) => {
                    return match self.private_vars.get(&g) {
                        Some(&v) => Target::Var(v),
                        None => Target::Nothing,
                    };
                }
                Expression::FunctionArgument(i) => return (scope.args)(i),
                Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => h = base,
                _ => return Target::Unknown,
            }
        }
        Target::Unknown
    }

    /// Adds what `block` assigns to `out`; `false` when something cannot be traced.
    fn scan(
        &self,
        scope: &Scope<'_>,
        block: &naga::Block,
        out: &mut BTreeSet<Var>,
        depth: u32,
    ) -> bool {
        for s in block.iter() {
            let ok = match s {
                Statement::Store { pointer, .. } => match self.root(scope, *pointer) {
                    Target::Var(v) => {
                        out.insert(v);
                        true
                    }
                    Target::Nothing => true,
                    Target::Unknown => false,
                },
                Statement::Block(b) => self.scan(scope, b, out, depth),
                Statement::If { accept, reject, .. } => {
                    self.scan(scope, accept, out, depth) && self.scan(scope, reject, out, depth)
                }
                Statement::Loop {
                    body, continuing, ..
                } => self.scan(scope, body, out, depth) && self.scan(scope, continuing, out, depth),
                Statement::Switch { cases, .. } => {
                    cases.iter().all(|c| self.scan(scope, &c.body, out, depth))
                }
                Statement::Call {
                    function,
                    arguments,
                    ..
                } => {
                    if depth >= MAX_DEPTH {
                        return false;
                    }
                    let args = |i: u32| match arguments.get(i as usize) {
                        Some(&a) => self.root(scope, a),
                        None => Target::Unknown,
                    };
                    let callee = Scope {
                        f: &self.m.functions[*function],
                        locals: None,
                        args: &args,
                    };
                    self.scan(&callee, &callee.f.body, out, depth + 1)
                }
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        true
    }
}
