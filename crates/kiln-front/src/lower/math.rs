//! naga's math built-ins expanded into scalar generic ops.

use super::expr::kind_of;
use super::{FnCx, Lowerer};
use crate::FrontError;
use kiln_ir::{Opcode, Operand};
use naga::{Handle, MathFunction as M, ScalarKind, TypeInner};

const LOG2_E: f32 = std::f32::consts::LOG2_E;
const LN_2: f32 = std::f32::consts::LN_2;

fn c(x: f32) -> Operand {
    Operand::constant(x.to_bits())
}

impl<'m> Lowerer<'m, '_> {
    pub(super) fn math(
        &mut self,
        cx: &mut FnCx<'m>,
        fun: M,
        arg: Handle<naga::Expression>,
        arg1: Option<Handle<naga::Expression>>,
        arg2: Option<Handle<naga::Expression>>,
        arg3: Option<Handle<naga::Expression>>,
    ) -> Result<Vec<Operand>, FrontError> {
        let ty = self.ty(cx, arg);
        let kind = kind_of(&ty);
        let a = self.comps(cx, arg)?;
        let b = match arg1 {
            Some(h) => self.comps(cx, h)?,
            None => Vec::new(),
        };
        let c2 = match arg2 {
            Some(h) => self.comps(cx, h)?,
            None => Vec::new(),
        };
        let c3 = match arg3 {
            Some(h) => self.comps(cx, h)?,
            None => Vec::new(),
        };
        let n = a.len();
        let at = |v: &Vec<Operand>, k: usize| v[if v.len() == 1 { 0 } else { k }];
        let float = kind == ScalarKind::Float;
        // Componentwise helpers.
        macro_rules! each {
            (|$x:ident| $body:expr) => {{
                let mut out = Vec::with_capacity(n);
                for k in 0..n {
                    let $x = a[k];
                    out.push($body);
                }
                out
            }};
            (|$x:ident, $y:ident| $body:expr) => {{
                let mut out = Vec::with_capacity(n);
                for k in 0..n {
                    let ($x, $y) = (a[k], at(&b, k));
                    out.push($body);
                }
                out
            }};
            (|$x:ident, $y:ident, $z:ident| $body:expr) => {{
                let mut out = Vec::with_capacity(n);
                for k in 0..n {
                    let ($x, $y, $z) = (a[k], at(&b, k), at(&c2, k));
                    out.push($body);
                }
                out
            }};
        }
        let (min, max) = match kind {
            ScalarKind::Float => (Opcode::Fmin, Opcode::Fmax),
            ScalarKind::Uint => (Opcode::Umin, Opcode::Umax),
            _ => (Opcode::Imin, Opcode::Imax),
        };
        Ok(match fun {
            M::Abs => match kind {
                ScalarKind::Float => each!(|x| self.op(Opcode::Fabs, &[x])),
                ScalarKind::Sint => each!(|x| self.op(Opcode::Iabs, &[x])),
                _ => a,
            },
            M::Min => each!(|x, y| self.op(min, &[x, y])),
            M::Max => each!(|x, y| self.op(max, &[x, y])),
            M::Clamp => each!(|x, lo, hi| {
                let t = self.op(max, &[x, lo]);
                self.op(min, &[t, hi])
            }),
            M::Saturate => each!(|x| {
                let t = self.op(Opcode::Fmax, &[x, c(0.0)]);
                self.op(Opcode::Fmin, &[t, c(1.0)])
            }),
            M::Cos => each!(|x| self.op(Opcode::Fcos, &[x])),
            M::Sin => each!(|x| self.op(Opcode::Fsin, &[x])),
            M::Tan => each!(|x| {
                let s = self.op(Opcode::Fsin, &[x]);
                let co = self.op(Opcode::Fcos, &[x]);
                self.op(Opcode::Fdiv, &[s, co])
            }),
            M::Sinh | M::Cosh | M::Tanh => each!(|x| self.hyperbolic(fun, x)),
            M::Asin => each!(|x| self.op(Opcode::Fasin, &[x])),
            M::Acos => each!(|x| self.op(Opcode::Facos, &[x])),
            M::Atan => each!(|x| self.op(Opcode::Fatan, &[x])),
            M::Atan2 => each!(|y, x| self.op(Opcode::Fatan2, &[y, x])),
            M::Asinh | M::Acosh | M::Atanh => each!(|x| self.inverse_hyperbolic(fun, x)),
            M::Radians => each!(|x| self.op(Opcode::Fmul, &[x, c(std::f32::consts::PI / 180.0)])),
            M::Degrees => each!(|x| self.op(Opcode::Fmul, &[x, c(180.0 / std::f32::consts::PI)])),
            M::Ceil => each!(|x| self.op(Opcode::Fceil, &[x])),
            M::Floor => each!(|x| self.op(Opcode::Ffloor, &[x])),
            M::Round => each!(|x| self.op(Opcode::Fround, &[x])),
            M::Fract => each!(|x| self.op(Opcode::Ffract, &[x])),
            M::Trunc => each!(|x| self.op(Opcode::Ftrunc, &[x])),
            M::Exp => each!(|x| self.exp(x)),
            M::Exp2 => each!(|x| self.op(Opcode::Fexp2, &[x])),
            M::Log => each!(|x| self.ln(x)),
            M::Log2 => each!(|x| self.op(Opcode::Flog2, &[x])),
            M::Pow => each!(|x, y| self.op(Opcode::Fpow, &[x, y])),
            M::Ldexp => each!(|x, e| {
                let f = self.op(Opcode::I2f, &[e]);
                let p = self.op(Opcode::Fexp2, &[f]);
                self.op(Opcode::Fmul, &[x, p])
            }),
            M::Sqrt => each!(|x| self.op(Opcode::Fsqrt, &[x])),
            M::InverseSqrt => each!(|x| self.op(Opcode::Frsq, &[x])),
            M::Sign => match kind {
                ScalarKind::Float => each!(|x| self.op(Opcode::Fsign, &[x])),
                _ => each!(|x| {
                    let t = self.op(Opcode::Imin, &[x, Operand::constant(1)]);
                    self.op(Opcode::Imax, &[t, Operand::constant(-1i32 as u32)])
                }),
            },
            M::Fma => each!(|x, y, z| self.op(Opcode::Ffma, &[x, y, z])),
            // x·(1 − t) + y·t: exactly y at t = 1 and x at t = 0, as GPU drivers give (the
            // form x + t·(y − x) rounds y − x and misses y at t = 1).
            M::Mix => each!(|x, y, t| {
                let s = self.op(Opcode::Fsub, &[c(1.0), t]);
                let xs = self.op(Opcode::Fmul, &[x, s]);
                self.op(Opcode::Ffma, &[y, t, xs])
            }),
            M::Step => each!(|edge, x| {
                let lt = self.op(Opcode::Flt, &[x, edge]);
                self.op(Opcode::Sel, &[lt, c(0.0), c(1.0)])
            }),
            M::SmoothStep => each!(|e0, e1, x| {
                let num = self.op(Opcode::Fsub, &[x, e0]);
                let den = self.op(Opcode::Fsub, &[e1, e0]);
                let q = self.op(Opcode::Fdiv, &[num, den]);
                let lo = self.op(Opcode::Fmax, &[q, c(0.0)]);
                let t = self.op(Opcode::Fmin, &[lo, c(1.0)]);
                let two_t = self.op(Opcode::Fmul, &[t, c(2.0)]);
                let k = self.op(Opcode::Fsub, &[c(3.0), two_t]);
                let tt = self.op(Opcode::Fmul, &[t, t]);
                self.op(Opcode::Fmul, &[tt, k])
            }),
            M::Dot => {
                if float {
                    vec![self.sum_products((0..n).map(|k| (a[k], b[k])))]
                } else {
                    let mut acc = self.op(Opcode::Imul, &[a[0], b[0]]);
                    for k in 1..n {
                        let p = self.op(Opcode::Imul, &[a[k], b[k]]);
                        acc = self.op(Opcode::Iadd, &[acc, p]);
                    }
                    vec![acc]
                }
            }
            M::Cross => {
                let mut out = Vec::with_capacity(3);
                for (i, j) in [(1, 2), (2, 0), (0, 1)] {
                    let p = self.op(Opcode::Fmul, &[a[i], b[j]]);
                    let q = self.op(Opcode::Fmul, &[a[j], b[i]]);
                    out.push(self.op(Opcode::Fsub, &[p, q]));
                }
                out
            }
            M::Length => vec![self.length(&a)],
            M::Distance => {
                let d: Vec<Operand> = (0..n)
                    .map(|k| self.op(Opcode::Fsub, &[a[k], b[k]]))
                    .collect();
                vec![self.length(&d)]
            }
            M::Normalize => {
                let dd = self.sum_products((0..n).map(|k| (a[k], a[k])));
                let r = self.op(Opcode::Frsq, &[dd]);
                each!(|x| self.op(Opcode::Fmul, &[x, r]))
            }
            M::FaceForward => {
                // dot(nref, i) < 0 ? n : -n
                let d = self.sum_products((0..n).map(|k| (c2[k], b[k])));
                let neg = self.op(Opcode::Flt, &[d, c(0.0)]);
                each!(|x| {
                    let m = self.op(Opcode::Fneg, &[x]);
                    self.op(Opcode::Sel, &[neg, x, m])
                })
            }
            M::Reflect => {
                // i − 2·dot(n, i)·n
                let d = self.sum_products((0..n).map(|k| (b[k], a[k])));
                let d2 = self.op(Opcode::Fmul, &[d, c(2.0)]);
                each!(|i, nn| {
                    let p = self.op(Opcode::Fmul, &[d2, nn]);
                    self.op(Opcode::Fsub, &[i, p])
                })
            }
            M::Refract => {
                // k = 1 − η²(1 − dot(n,i)²); k < 0 ? 0 : η·i − (η·dot(n,i) + √k)·n
                let eta = c2[0];
                let d = self.sum_products((0..n).map(|k| (b[k], a[k])));
                let dd = self.op(Opcode::Fmul, &[d, d]);
                let one_minus = self.op(Opcode::Fsub, &[c(1.0), dd]);
                let e2 = self.op(Opcode::Fmul, &[eta, eta]);
                let t = self.op(Opcode::Fmul, &[e2, one_minus]);
                let k = self.op(Opcode::Fsub, &[c(1.0), t]);
                let neg = self.op(Opcode::Flt, &[k, c(0.0)]);
                let sk = self.op(Opcode::Fsqrt, &[k]);
                let ed = self.op(Opcode::Fmul, &[eta, d]);
                let f = self.op(Opcode::Fadd, &[ed, sk]);
                each!(|i, nn| {
                    let ei = self.op(Opcode::Fmul, &[eta, i]);
                    let fn_ = self.op(Opcode::Fmul, &[f, nn]);
                    let r = self.op(Opcode::Fsub, &[ei, fn_]);
                    self.op(Opcode::Sel, &[neg, c(0.0), r])
                })
            }
            M::Transpose => {
                let TypeInner::Matrix { columns, rows, .. } = ty else {
                    return Err(FrontError::Internal("transpose of a non-matrix".into()));
                };
                let (cc, r) = (columns as usize, rows as usize);
                let mut out = Vec::with_capacity(n);
                for i in 0..r {
                    for j in 0..cc {
                        out.push(a[j * r + i]);
                    }
                }
                out
            }
            M::Determinant => {
                let TypeInner::Matrix { columns, .. } = ty else {
                    return Err(FrontError::Internal("determinant of a non-matrix".into()));
                };
                let dim = columns as usize;
                let m: Vec<Vec<Operand>> = (0..dim)
                    .map(|j| a[j * dim..(j + 1) * dim].to_vec())
                    .collect();
                vec![self.determinant(&m)]
            }
            M::Inverse => {
                let TypeInner::Matrix { columns, .. } = ty else {
                    return Err(FrontError::Internal("inverse of a non-matrix".into()));
                };
                let dim = columns as usize;
                let m: Vec<Vec<Operand>> = (0..dim)
                    .map(|j| a[j * dim..(j + 1) * dim].to_vec())
                    .collect();
                let det = self.determinant(&m);
                let inv_det = self.op(Opcode::Fdiv, &[c(1.0), det]);
                // inverse = adjugate / det; element (row r, column c) is the cofactor of (c, r).
                let mut out = Vec::with_capacity(dim * dim);
                for col in 0..dim {
                    for row in 0..dim {
                        let cof = self.cofactor(&m, col, row);
                        out.push(self.op(Opcode::Fmul, &[cof, inv_det]));
                    }
                }
                out
            }
            M::Outer => {
                let mut out = Vec::new();
                for &y in &b {
                    for &x in &a {
                        out.push(self.op(Opcode::Fmul, &[x, y]));
                    }
                }
                out
            }
            M::CountOneBits => each!(|x| self.op(Opcode::Ibitcount, &[x])),
            M::ReverseBits => each!(|x| self.op(Opcode::Ibitreverse, &[x])),
            M::CountLeadingZeros => each!(|x| self.op(Opcode::Iclz, &[x])),
            M::CountTrailingZeros => each!(|x| self.op(Opcode::Ictz, &[x])),
            M::ExtractBits => {
                let op = if kind == ScalarKind::Sint {
                    Opcode::Ibfe
                } else {
                    Opcode::Ubfe
                };
                each!(|x, off, cnt| self.op(op, &[x, off, cnt]))
            }
            M::InsertBits => {
                let mut out = Vec::with_capacity(n);
                for (k, &x) in a.iter().enumerate() {
                    out.push(self.op(Opcode::Bfi, &[x, at(&b, k), at(&c2, k), at(&c3, k)]));
                }
                out
            }
            M::FirstTrailingBit => each!(|x| {
                let z = self.op(Opcode::Ieq, &[x, Operand::constant(0)]);
                let t = self.op(Opcode::Ictz, &[x]);
                self.op(Opcode::Sel, &[z, Operand::constant(u32::MAX), t])
            }),
            M::FirstLeadingBit => each!(|x| {
                let v = if kind == ScalarKind::Sint {
                    let negative = self.op(Opcode::Ilt, &[x, Operand::constant(0)]);
                    let inv = self.op(Opcode::Inot, &[x]);
                    self.op(Opcode::Sel, &[negative, inv, x])
                } else {
                    x
                };
                let z = self.op(Opcode::Ieq, &[v, Operand::constant(0)]);
                let l = self.op(Opcode::Iclz, &[v]);
                let msb = self.op(Opcode::Isub, &[Operand::constant(31), l]);
                self.op(Opcode::Sel, &[z, Operand::constant(u32::MAX), msb])
            }),
            other => return Err(FrontError::unsupported(format!("math function {other:?}"))),
        })
    }

    fn exp(&mut self, x: Operand) -> Operand {
        let t = self.op(Opcode::Fmul, &[x, c(LOG2_E)]);
        self.op(Opcode::Fexp2, &[t])
    }

    fn ln(&mut self, x: Operand) -> Operand {
        let t = self.op(Opcode::Flog2, &[x]);
        self.op(Opcode::Fmul, &[t, c(LN_2)])
    }

    fn length(&mut self, v: &[Operand]) -> Operand {
        if v.len() == 1 {
            return self.op(Opcode::Fabs, &[v[0]]);
        }
        let dd = self.sum_products(v.iter().map(|&x| (x, x)));
        self.op(Opcode::Fsqrt, &[dd])
    }

    fn hyperbolic(&mut self, fun: M, x: Operand) -> Operand {
        let ep = self.exp(x);
        let nx = self.op(Opcode::Fneg, &[x]);
        let en = self.exp(nx);
        let sum = self.op(Opcode::Fadd, &[ep, en]);
        let diff = self.op(Opcode::Fsub, &[ep, en]);
        match fun {
            M::Sinh => self.op(Opcode::Fmul, &[diff, c(0.5)]),
            M::Cosh => self.op(Opcode::Fmul, &[sum, c(0.5)]),
            _ => self.op(Opcode::Fdiv, &[diff, sum]),
        }
    }

    fn inverse_hyperbolic(&mut self, fun: M, x: Operand) -> Operand {
        match fun {
            M::Atanh => {
                let num = self.op(Opcode::Fadd, &[c(1.0), x]);
                let den = self.op(Opcode::Fsub, &[c(1.0), x]);
                let q = self.op(Opcode::Fdiv, &[num, den]);
                let l = self.ln(q);
                self.op(Opcode::Fmul, &[l, c(0.5)])
            }
            _ => {
                let xx = self.op(Opcode::Fmul, &[x, x]);
                let s = if fun == M::Asinh {
                    self.op(Opcode::Fadd, &[xx, c(1.0)])
                } else {
                    self.op(Opcode::Fsub, &[xx, c(1.0)])
                };
                let r = self.op(Opcode::Fsqrt, &[s]);
                let t = self.op(Opcode::Fadd, &[x, r]);
                self.ln(t)
            }
        }
    }

    /// The cofactor of the element at (`row`, `col`) of `m` (`m[column][row]`).
    fn cofactor(&mut self, m: &[Vec<Operand>], row: usize, col: usize) -> Operand {
        let minor: Vec<Vec<Operand>> = m
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != col)
            .map(|(_, column)| {
                column
                    .iter()
                    .enumerate()
                    .filter(|(r, _)| *r != row)
                    .map(|(_, v)| *v)
                    .collect()
            })
            .collect();
        let d = if minor.is_empty() {
            c(1.0)
        } else {
            self.determinant(&minor)
        };
        if (row + col) % 2 == 1 {
            self.op(Opcode::Fneg, &[d])
        } else {
            d
        }
    }

    /// Laplace expansion along the first column (`m[column][row]`), for sizes up to 4.
    fn determinant(&mut self, m: &[Vec<Operand>]) -> Operand {
        let n = m.len();
        if n == 1 {
            return m[0][0];
        }
        if n == 2 {
            let p = self.op(Opcode::Fmul, &[m[0][0], m[1][1]]);
            let q = self.op(Opcode::Fmul, &[m[1][0], m[0][1]]);
            return self.op(Opcode::Fsub, &[p, q]);
        }
        let mut acc: Option<Operand> = None;
        for row in 0..n {
            let minor: Vec<Vec<Operand>> = m[1..]
                .iter()
                .map(|col| {
                    col.iter()
                        .enumerate()
                        .filter(|(r, _)| *r != row)
                        .map(|(_, v)| *v)
                        .collect()
                })
                .collect();
            let d = self.determinant(&minor);
            let term = self.op(Opcode::Fmul, &[m[0][row], d]);
            acc = Some(match acc {
                None => term,
                Some(s) if row % 2 == 1 => self.op(Opcode::Fsub, &[s, term]),
                Some(s) => self.op(Opcode::Fadd, &[s, term]),
            });
        }
        acc.expect("n >= 3")
    }
}
