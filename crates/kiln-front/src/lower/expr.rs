//! Expressions: constants, composites, pointers and loads, operators, conversions, textures.

use super::{FnCx, Lowerer, Ptr, Root, Val, types};
use crate::FrontError;
use kiln_ir::sample::{Compare, Level, SampleMode};
use kiln_ir::{Opcode, Operand};
use naga::{BinaryOperator as B, Expression, Handle, ScalarKind, TypeInner};

/// The scalar kind of a scalar, vector or matrix type.
pub(super) fn kind_of(inner: &TypeInner) -> ScalarKind {
    let k = match *inner {
        TypeInner::Scalar(s)
        | TypeInner::Vector { scalar: s, .. }
        | TypeInner::Matrix { scalar: s, .. } => s.kind,
        TypeInner::ValuePointer { scalar, .. } => scalar.kind,
        _ => ScalarKind::Float,
    };
    match k {
        ScalarKind::AbstractFloat => ScalarKind::Float,
        ScalarKind::AbstractInt => ScalarKind::Sint,
        k => k,
    }
}

fn literal(l: &naga::Literal) -> Result<u32, FrontError> {
    Ok(match *l {
        naga::Literal::F32(v) => v.to_bits(),
        naga::Literal::I32(v) => v as u32,
        naga::Literal::U32(v) => v,
        naga::Literal::Bool(b) => {
            if b {
                u32::MAX
            } else {
                0
            }
        }
        naga::Literal::AbstractInt(v) => v as i32 as u32,
        naga::Literal::AbstractFloat(v) => (v as f32).to_bits(),
        ref other => {
            return Err(FrontError::unsupported(format!(
                "literal {other:?} (only 32-bit values)"
            )));
        }
    })
}

impl<'m> Lowerer<'m, '_> {
    pub(super) fn ty(&self, cx: &FnCx<'m>, h: Handle<Expression>) -> TypeInner {
        cx.info[h].ty.inner_with(&self.m.types).clone()
    }

    /// The components of a value expression.
    pub(super) fn comps(
        &mut self,
        cx: &mut FnCx<'m>,
        h: Handle<Expression>,
    ) -> Result<Vec<Operand>, FrontError> {
        match self.expr(cx, h)? {
            Val::Comps(c) => Ok(c),
            Val::Ptr(_) => Err(FrontError::Internal("a pointer used as a value".into())),
            Val::Resource(_) => Err(FrontError::unsupported("images or samplers as values")),
        }
    }

    /// A module-scope constant expression.
    pub(super) fn const_expr(&mut self, h: Handle<Expression>) -> Result<Vec<Operand>, FrontError> {
        let m = self.m;
        Ok(match &m.global_expressions[h] {
            Expression::Literal(l) => vec![Operand::constant(literal(l)?)],
            Expression::Constant(c) => self.const_expr(m.constants[*c].init)?,
            Expression::ZeroValue(ty) => {
                vec![Operand::constant(0); types::comp_count(m, *ty)? as usize]
            }
            Expression::Compose { components, .. } => {
                let mut out = Vec::new();
                for c in components {
                    out.extend(self.const_expr(*c)?);
                }
                out
            }
            Expression::Splat { size, value } => {
                let v = self.const_expr(*value)?;
                v.iter().copied().cycle().take(*size as usize).collect()
            }
            Expression::Override(_) => return Err(FrontError::unsupported("pipeline overrides")),
            other => {
                return Err(FrontError::unsupported(format!(
                    "constant expression {}",
                    variant(other)
                )));
            }
        })
    }

    /// Lowers (once) and caches an expression of the current function.
    pub(super) fn expr(
        &mut self,
        cx: &mut FnCx<'m>,
        h: Handle<Expression>,
    ) -> Result<Val, FrontError> {
        if let Some(v) = cx.cache.get(&h) {
            return Ok(v.clone());
        }
        let v = self.expr_uncached(cx, h).map_err(|e| match e {
            FrontError::Unsupported { what, span: None } => FrontError::Unsupported {
                what,
                span: cx.f.expressions.get_span(h).to_range(),
            },
            other => other,
        })?;
        cx.cache.insert(h, v.clone());
        Ok(v)
    }

    fn expr_uncached(
        &mut self,
        cx: &mut FnCx<'m>,
        h: Handle<Expression>,
    ) -> Result<Val, FrontError> {
        let m = self.m;
        let comps = |v: Vec<Operand>| Ok(Val::Comps(v));
        match &cx.f.expressions[h] {
            Expression::Literal(l) => comps(vec![Operand::constant(literal(l)?)]),
            Expression::Constant(c) => comps(self.const_expr(m.constants[*c].init)?),
            Expression::Override(_) => Err(FrontError::unsupported("pipeline overrides")),
            Expression::ZeroValue(ty) => comps(vec![
                Operand::constant(0);
                types::comp_count(m, *ty)? as usize
            ]),
            Expression::Compose { components, .. } => {
                let mut out = Vec::new();
                for c in components {
                    out.extend(self.comps(cx, *c)?);
                }
                comps(out)
            }
            Expression::Splat { size, value } => {
                let v = self.comps(cx, *value)?[0];
                comps(vec![v; *size as usize])
            }
            Expression::Swizzle {
                size,
                vector,
                pattern,
            } => {
                let v = self.comps(cx, *vector)?;
                comps(
                    pattern[..*size as usize]
                        .iter()
                        .map(|c| v[*c as usize])
                        .collect(),
                )
            }
            Expression::FunctionArgument(i) => Ok(cx.args[*i as usize].clone()),
            Expression::GlobalVariable(g) => {
                let gv = &m.global_variables[*g];
                match gv.space {
                    naga::AddressSpace::Handle => Ok(Val::Resource(*g)),
                    naga::AddressSpace::Uniform | naga::AddressSpace::Immediate => {
                        Ok(Val::Ptr(Ptr {
                            root: Root::Uniform {
                                base: self.uniform_bases[g],
                            },
                            ty: m.types[gv.ty].inner.clone(),
                            offset: 0,
                            dynamic: Vec::new(),
                        }))
                    }
                    naga::AddressSpace::Private => Ok(Val::Ptr(Ptr {
                        root: Root::Var(self.private_vars[g]),
                        ty: m.types[gv.ty].inner.clone(),
                        offset: 0,
                        dynamic: Vec::new(),
                    })),
                    other => Err(FrontError::unsupported(format!("address space {other:?}"))),
                }
            }
            Expression::LocalVariable(l) => Ok(Val::Ptr(Ptr {
                root: Root::Var(cx.locals[l.index()]),
                ty: m.types[cx.f.local_variables[*l].ty].inner.clone(),
                offset: 0,
                dynamic: Vec::new(),
            })),
            Expression::Load { pointer } => {
                let Val::Ptr(p) = self.expr(cx, *pointer)? else {
                    return Err(FrontError::Internal("load from a non-pointer".into()));
                };
                comps(self.load(&p)?)
            }
            Expression::AccessIndex { base, index } => self.access(cx, *base, Some(*index), None),
            Expression::Access { base, index } => {
                let i = self.comps(cx, *index)?[0];
                match i.value {
                    kiln_ir::Value::Const(c) => self.access(cx, *base, Some(c), None),
                    _ => self.access(cx, *base, None, Some(i)),
                }
            }
            Expression::Unary { op, expr } => {
                let kind = kind_of(&self.ty(cx, *expr));
                let v = self.comps(cx, *expr)?;
                let out = v
                    .iter()
                    .map(|&x| match op {
                        naga::UnaryOperator::Negate if kind == ScalarKind::Float => {
                            self.op(Opcode::Fneg, &[x])
                        }
                        naga::UnaryOperator::Negate => self.op(Opcode::Ineg, &[x]),
                        naga::UnaryOperator::LogicalNot | naga::UnaryOperator::BitwiseNot => {
                            self.op(Opcode::Inot, &[x])
                        }
                    })
                    .collect();
                comps(out)
            }
            Expression::Binary { op, left, right } => {
                self.binary(cx, *op, *left, *right).map(Val::Comps)
            }
            Expression::Select {
                condition,
                accept,
                reject,
            } => {
                let c = self.comps(cx, *condition)?;
                let (a, r) = (self.comps(cx, *accept)?, self.comps(cx, *reject)?);
                let out = (0..a.len())
                    .map(|k| self.op(Opcode::Sel, &[c[k.min(c.len() - 1)], a[k], r[k]]))
                    .collect();
                comps(out)
            }
            Expression::Relational { fun, argument } => {
                let v = self.comps(cx, *argument)?;
                let out = match fun {
                    naga::RelationalFunction::All => vec![self.reduce(&v, Opcode::Iand)],
                    naga::RelationalFunction::Any => vec![self.reduce(&v, Opcode::Ior)],
                    naga::RelationalFunction::IsNan => {
                        v.iter().map(|&x| self.op(Opcode::Fne, &[x, x])).collect()
                    }
                    naga::RelationalFunction::IsInf => v
                        .iter()
                        .map(|&x| {
                            let a = self.op(Opcode::Fabs, &[x]);
                            self.op(
                                Opcode::Feq,
                                &[a, Operand::constant(f32::INFINITY.to_bits())],
                            )
                        })
                        .collect(),
                };
                comps(out)
            }
            Expression::As {
                expr,
                kind,
                convert,
            } => {
                let from = kind_of(&self.ty(cx, *expr));
                let v = self.comps(cx, *expr)?;
                let out = match convert {
                    None => v,
                    Some(_) => v
                        .iter()
                        .map(|&x| self.convert(x, from, *kind))
                        .collect::<Result<_, _>>()?,
                };
                comps(out)
            }
            Expression::Derivative { axis, expr, .. } => {
                let v = self.comps(cx, *expr)?;
                let out = v
                    .iter()
                    .map(|&x| match axis {
                        naga::DerivativeAxis::X => self.op_v(Opcode::Fddx, &[x]),
                        naga::DerivativeAxis::Y => self.op_v(Opcode::Fddy, &[x]),
                        naga::DerivativeAxis::Width => {
                            let dx = self.op_v(Opcode::Fddx, &[x]);
                            let dy = self.op_v(Opcode::Fddy, &[x]);
                            let (ax, ay) =
                                (self.op(Opcode::Fabs, &[dx]), self.op(Opcode::Fabs, &[dy]));
                            self.op(Opcode::Fadd, &[ax, ay])
                        }
                    })
                    .collect();
                comps(out)
            }
            Expression::Math {
                fun,
                arg,
                arg1,
                arg2,
                arg3,
            } => self
                .math(cx, *fun, *arg, *arg1, *arg2, *arg3)
                .map(Val::Comps),
            Expression::ImageSample {
                image,
                sampler,
                gather,
                coordinate,
                array_index,
                offset,
                level,
                depth_ref,
                clamp_to_edge,
            } => {
                if gather.is_some() {
                    return Err(FrontError::unsupported("texture gathers"));
                }
                if offset.is_some() {
                    return Err(FrontError::unsupported("texture sample offsets"));
                }
                if *clamp_to_edge {
                    return Err(FrontError::unsupported("external textures"));
                }
                let (Val::Resource(img), Val::Resource(smp)) =
                    (self.expr(cx, *image)?, self.expr(cx, *sampler)?)
                else {
                    return Err(FrontError::unsupported(
                        "texture or sampler chosen at run time",
                    ));
                };
                let unit = self.unit(img, smp);
                let dim = self.sample_dim(img)?;
                let depth_image = matches!(
                    m.types[m.global_variables[img].ty].inner,
                    TypeInner::Image {
                        class: naga::ImageClass::Depth { .. },
                        ..
                    }
                );
                if depth_image && depth_ref.is_none() {
                    return Err(FrontError::unsupported(
                        "depth textures sampled without a comparison",
                    ));
                }
                let mut ops = self.comps(cx, *coordinate)?;
                if let Some(a) = array_index {
                    ops.extend(self.comps(cx, *a)?);
                }
                if let Some(d) = depth_ref {
                    ops.extend(self.comps(cx, *d)?);
                }
                let level = match level {
                    naga::SampleLevel::Auto => Level::Implicit,
                    naga::SampleLevel::Bias(b) => {
                        ops.extend(self.comps(cx, *b)?);
                        Level::Bias
                    }
                    naga::SampleLevel::Zero => {
                        ops.push(Operand::constant(0));
                        Level::Explicit
                    }
                    naga::SampleLevel::Exact(l) => {
                        ops.extend(self.comps(cx, *l)?);
                        Level::Explicit
                    }
                    naga::SampleLevel::Gradient { x, y } => {
                        ops.extend(self.comps(cx, *x)?);
                        ops.extend(self.comps(cx, *y)?);
                        Level::Gradient
                    }
                };
                // The comparison's function is sampler state the shader does not name:
                // OpenGL's default, `less_equal`.
                let mode = SampleMode {
                    level,
                    dim,
                    arrayed: array_index.is_some(),
                    compare: depth_ref.map(|_| Compare::LessEqual),
                }
                .encode();
                let coords: Vec<Operand> = ops
                    .into_iter()
                    .enumerate()
                    .map(|(k, o)| {
                        let flags = if k == 0 {
                            kiln_ir::OperandFlags::VECTOR_ALIGNED | kiln_ir::OperandFlags::LATE_KILL
                        } else {
                            kiln_ir::OperandFlags::LATE_KILL
                        };
                        o.with_flags(flags)
                    })
                    .collect();
                let c4 = self.b.func.target.class(kiln_ir::GenericTarget::V, 4);
                let t = self
                    .b
                    .inst(Opcode::TextureSample, &[unit, mode], &[c4], coords)[0];
                let c1 = self.v1();
                let parts = self
                    .b
                    .inst(Opcode::SplitVector, &[], &[c1; 4], [Operand::temp(t)]);
                let all: Vec<Operand> = parts.iter().map(|&p| Operand::temp(p)).collect();
                let n = types::inner_count(m, &self.ty(cx, h))? as usize;
                comps(all[..n].to_vec())
            }
            Expression::ImageQuery { image, query } => {
                let Val::Resource(img) = self.expr(cx, *image)? else {
                    return Err(FrontError::unsupported("texture chosen at run time"));
                };
                match query {
                    naga::ImageQuery::Size { .. } => {
                        let (w, hgt) = self.size_words(img);
                        let n = types::inner_count(m, &self.ty(cx, h))?;
                        let mut out = Vec::new();
                        for k in 0..n {
                            let slot = if k == 0 { w } else { hgt };
                            let c = self.s1();
                            out.push(Operand::temp(
                                self.b.inst(Opcode::Uniform, &[slot], &[c], [])[0],
                            ));
                        }
                        comps(out)
                    }
                    _ => Err(FrontError::unsupported("texture queries other than size")),
                }
            }
            Expression::CallResult(_) => {
                Err(FrontError::Internal("call result before its call".into()))
            }
            Expression::ImageLoad {
                image,
                coordinate,
                array_index,
                sample,
                level,
            } => {
                if sample.is_some() {
                    return Err(FrontError::unsupported("multisampled texel fetches"));
                }
                let Val::Resource(img) = self.expr(cx, *image)? else {
                    return Err(FrontError::unsupported("texture chosen at run time"));
                };
                if let TypeInner::Image {
                    dim,
                    arrayed,
                    class,
                } = m.types[m.global_variables[img].ty].inner
                {
                    let integer = matches!(
                        class,
                        naga::ImageClass::Sampled {
                            kind: ScalarKind::Sint | ScalarKind::Uint,
                            ..
                        }
                    );
                    if integer || arrayed || dim != naga::ImageDimension::D2 {
                        return Err(FrontError::unsupported(format!(
                            "texel fetches from {} images",
                            if integer {
                                "integer"
                            } else if arrayed {
                                "array"
                            } else {
                                "non-2D"
                            }
                        )));
                    }
                }
                let unit = match self.units.iter().position(|u| u.0 == img) {
                    Some(u) => u as u32,
                    None => self.unit(img, img),
                };
                let mut ops = self.comps(cx, *coordinate)?;
                if let Some(a) = array_index {
                    ops.extend(self.comps(cx, *a)?);
                }
                if let Some(l) = level {
                    ops.extend(self.comps(cx, *l)?);
                }
                let c4 = self.b.func.target.class(kiln_ir::GenericTarget::V, 4);
                let t = self.b.inst(Opcode::TextureFetch, &[unit], &[c4], ops)[0];
                let c1 = self.v1();
                let parts = self
                    .b
                    .inst(Opcode::SplitVector, &[], &[c1; 4], [Operand::temp(t)]);
                let n = types::inner_count(m, &self.ty(cx, h))? as usize;
                comps(parts.iter().take(n).map(|&p| Operand::temp(p)).collect())
            }
            Expression::ArrayLength(_) => Err(FrontError::unsupported("runtime-sized arrays")),
            other => Err(FrontError::unsupported(format!(
                "expression {}",
                variant(other)
            ))),
        }
    }

    /// Uniform words holding an image's width and height.
    fn size_words(&mut self, img: Handle<naga::GlobalVariable>) -> (u32, u32) {
        if let Some(t) = self
            .iface
            .textures
            .iter()
            .find(|t| self.units[t.unit as usize].0 == img && t.size_words.is_some())
        {
            return t.size_words.expect("checked");
        }
        let unit = match self.units.iter().position(|u| u.0 == img) {
            Some(u) => u as u32,
            None => self.unit(img, img),
        };
        let w = self.iface.uniform_words;
        self.iface.uniform_words += 2;
        self.iface.textures[unit as usize].size_words = Some((w, w + 1));
        (w, w + 1)
    }

    fn reduce(&mut self, v: &[Operand], op: Opcode) -> Operand {
        let mut acc = v[0];
        for &x in &v[1..] {
            acc = self.op(op, &[acc, x]);
        }
        acc
    }

    /// A numeric conversion between scalar kinds.
    pub(super) fn convert(
        &mut self,
        x: Operand,
        from: ScalarKind,
        to: ScalarKind,
    ) -> Result<Operand, FrontError> {
        use ScalarKind::*;
        let (from, to) = (norm(from), norm(to));
        Ok(match (from, to) {
            (a, b) if a == b => x,
            (Float, Sint) => self.op(Opcode::F2i, &[x]),
            (Float, Uint) => self.op(Opcode::F2u, &[x]),
            (Sint, Float) => self.op(Opcode::I2f, &[x]),
            (Uint, Float) => self.op(Opcode::U2f, &[x]),
            (Sint, Uint) | (Uint, Sint) => x,
            (Float, Bool) => self.op(Opcode::Fne, &[x, Operand::constant(0)]),
            (Sint | Uint, Bool) => self.op(Opcode::Ine, &[x, Operand::constant(0)]),
            (Bool, Float) => self.op(
                Opcode::Sel,
                &[x, Operand::constant(1.0f32.to_bits()), Operand::constant(0)],
            ),
            (Bool, Sint | Uint) => self.op(
                Opcode::Sel,
                &[x, Operand::constant(1), Operand::constant(0)],
            ),
            (a, b) => {
                return Err(FrontError::unsupported(format!(
                    "conversion from {a:?} to {b:?}"
                )));
            }
        })
    }

    /// `base.index` (static) or `base[index]` (dynamic), on a value or a pointer.
    fn access(
        &mut self,
        cx: &mut FnCx<'m>,
        base: Handle<Expression>,
        index: Option<u32>,
        dynamic: Option<Operand>,
    ) -> Result<Val, FrontError> {
        let m = self.m;
        match self.expr(cx, base)? {
            Val::Ptr(p) => {
                // Element type, its size (components or bytes), and the element count.
                let uniform = matches!(p.root, Root::Uniform { .. });
                let (elem, stride, count, member_off): (TypeInner, u32, u32, Option<u32>) = match &p
                    .ty
                {
                    TypeInner::Struct { members, .. } => {
                        let i = index
                            .ok_or_else(|| FrontError::Internal("dynamic struct access".into()))?;
                        let off = if uniform {
                            members[i as usize].offset
                        } else {
                            types::member_comp_offset(m, members, i)?
                        };
                        (
                            m.types[members[i as usize].ty].inner.clone(),
                            0,
                            0,
                            Some(off),
                        )
                    }
                    TypeInner::Array {
                        base: e,
                        size,
                        stride,
                    } => {
                        let n = types::array_len(*size)?;
                        let s = if uniform {
                            *stride
                        } else {
                            types::comp_count(m, *e)?
                        };
                        (m.types[*e].inner.clone(), s, n, None)
                    }
                    TypeInner::Matrix {
                        columns,
                        rows,
                        scalar,
                    } => {
                        let s = if uniform {
                            types::column_stride(*rows)
                        } else {
                            *rows as u32
                        };
                        (
                            TypeInner::Vector {
                                size: *rows,
                                scalar: *scalar,
                            },
                            s,
                            *columns as u32,
                            None,
                        )
                    }
                    TypeInner::Vector { size, scalar } => (
                        TypeInner::Scalar(*scalar),
                        if uniform { 4 } else { 1 },
                        *size as u32,
                        None,
                    ),
                    TypeInner::BindingArray { .. } => {
                        return Err(FrontError::unsupported("binding arrays"));
                    }
                    _ => return Err(FrontError::Internal("access into a scalar".into())),
                };
                let mut q = Ptr {
                    root: p.root,
                    ty: elem,
                    offset: p.offset,
                    dynamic: p.dynamic.clone(),
                };
                match (member_off, index, dynamic) {
                    (Some(off), _, _) => q.offset += off,
                    (None, Some(i), _) => q.offset += i * stride,
                    (None, None, Some(d)) => q.dynamic.push((d, stride, count)),
                    _ => return Err(FrontError::Internal("access without index".into())),
                }
                Ok(Val::Ptr(q))
            }
            Val::Comps(v) => {
                let ty = self.ty(cx, base);
                let (elem_size, count): (u32, u32) = match &ty {
                    TypeInner::Struct { members, .. } => {
                        let i = index
                            .ok_or_else(|| FrontError::Internal("dynamic struct access".into()))?;
                        let off = types::member_comp_offset(m, members, i)? as usize;
                        let n = types::comp_count(m, members[i as usize].ty)? as usize;
                        return Ok(Val::Comps(v[off..off + n].to_vec()));
                    }
                    TypeInner::Array { base: e, size, .. } => {
                        (types::comp_count(m, *e)?, types::array_len(*size)?)
                    }
                    TypeInner::Matrix { columns, rows, .. } => (*rows as u32, *columns as u32),
                    TypeInner::Vector { size, .. } => (1, *size as u32),
                    _ => return Err(FrontError::Internal("access into a scalar value".into())),
                };
                let elem =
                    |e: u32| v[(e * elem_size) as usize..((e + 1) * elem_size) as usize].to_vec();
                match (index, dynamic) {
                    (Some(i), _) => Ok(Val::Comps(elem(i.min(count - 1)))),
                    (None, Some(d)) => {
                        if count > super::MAX_DYNAMIC_ELEMENTS {
                            return Err(FrontError::unsupported(format!(
                                "dynamic indexing of more than {} elements",
                                super::MAX_DYNAMIC_ELEMENTS
                            )));
                        }
                        let mut acc = elem(0);
                        for e in 1..count {
                            let hit = self.op(Opcode::Ieq, &[d, Operand::constant(e)]);
                            let cand = elem(e);
                            acc = (0..elem_size as usize)
                                .map(|k| self.op(Opcode::Sel, &[hit, cand[k], acc[k]]))
                                .collect();
                        }
                        Ok(Val::Comps(acc))
                    }
                    _ => Err(FrontError::Internal("access without index".into())),
                }
            }
            Val::Resource(_) => Err(FrontError::unsupported("binding arrays")),
        }
    }

    /// Reads the components a pointer points to.
    pub(super) fn load(&mut self, p: &Ptr) -> Result<Vec<Operand>, FrontError> {
        let m = self.m;
        let read_at = |lw: &mut Self, offset: u32| -> Result<Vec<Operand>, FrontError> {
            match p.root {
                Root::Var(var) => {
                    let n = types::inner_count(m, &p.ty)? as usize;
                    let cur = lw
                        .defs
                        .get(&var)
                        .ok_or_else(|| FrontError::Internal("load of a dead variable".into()))?;
                    Ok(cur[offset as usize..offset as usize + n].to_vec())
                }
                Root::Uniform { base } => {
                    let mut offs = Vec::new();
                    types::uniform_offsets_inner(m, &p.ty, offset, &mut offs)?;
                    let c = lw.s1();
                    Ok(offs
                        .iter()
                        .map(|o| {
                            Operand::temp(lw.b.inst(Opcode::Uniform, &[base + o / 4], &[c], [])[0])
                        })
                        .collect())
                }
            }
        };
        if p.dynamic.is_empty() {
            return read_at(self, p.offset);
        }
        let cases = self.dynamic_cases(&p.dynamic, true)?;
        let mut acc = read_at(self, p.offset + cases[0].0)?;
        for &(off, hit) in &cases[1..] {
            let hit = hit.ok_or_else(|| FrontError::Internal("dynamic case".into()))?;
            let cand = read_at(self, p.offset + off)?;
            acc = (0..acc.len())
                .map(|k| self.op(Opcode::Sel, &[hit, cand[k], acc[k]]))
                .collect();
        }
        Ok(acc)
    }

    fn binary(
        &mut self,
        cx: &mut FnCx<'m>,
        op: B,
        l: Handle<Expression>,
        r: Handle<Expression>,
    ) -> Result<Vec<Operand>, FrontError> {
        let (lt, rt) = (self.ty(cx, l), self.ty(cx, r));
        if op == B::Multiply {
            match (&lt, &rt) {
                (TypeInner::Matrix { .. }, TypeInner::Vector { .. }) => {
                    let v = self.comps(cx, r)?;
                    return self.matrix_times_vector(cx, l, v);
                }
                (TypeInner::Vector { .. }, TypeInner::Matrix { .. }) => {
                    let v = self.comps(cx, l)?;
                    return self.vector_times_matrix(cx, v, r);
                }
                _ => {}
            }
        }
        let (a, b) = (self.comps(cx, l)?, self.comps(cx, r)?);
        if let (
            B::Multiply,
            TypeInner::Matrix {
                columns: k_cols,
                rows,
                ..
            },
            TypeInner::Matrix { columns, .. },
        ) = (op, &lt, &rt)
        {
            let (kk, rw, c) = (*k_cols as usize, *rows as usize, *columns as usize);
            let mut out = Vec::with_capacity(c * rw);
            for j in 0..c {
                for i in 0..rw {
                    out.push(self.sum_products((0..kk).map(|k| (a[k * rw + i], b[j * kk + k]))));
                }
            }
            return Ok(out);
        }
        let kind = kind_of(&lt);
        let n = a.len().max(b.len());
        let pick = |v: &Vec<Operand>, k: usize| v[if v.len() == 1 { 0 } else { k }];
        let mut out = Vec::with_capacity(n);
        for k in 0..n {
            let (x, y) = (pick(&a, k), pick(&b, k));
            out.push(self.scalar_binary(op, kind, x, y)?);
        }
        Ok(out)
    }

    /// The factors of `h` when it is a product of two matrices.
    fn matrix_product(
        &self,
        cx: &FnCx<'m>,
        h: Handle<Expression>,
    ) -> Option<[Handle<Expression>; 2]> {
        match cx.f.expressions[h] {
            Expression::Binary {
                op: B::Multiply,
                left,
                right,
            } if matches!(self.ty(cx, left), TypeInner::Matrix { .. })
                && matches!(self.ty(cx, right), TypeInner::Matrix { .. }) =>
            {
                Some([left, right])
            }
            _ => None,
        }
    }

    /// Matrix `m` times column vector `v`. A product of matrices is applied factor by factor,
    /// `(A·B)·v = A·(B·v)` (two matrix–vector products instead of a matrix product; NIR's
    /// `nir_opt_reassociate_matrix_mul`): what is left of `A·B` goes as dead code.
    fn matrix_times_vector(
        &mut self,
        cx: &mut FnCx<'m>,
        m: Handle<Expression>,
        v: Vec<Operand>,
    ) -> Result<Vec<Operand>, FrontError> {
        if let Some([a, b]) = self.matrix_product(cx, m) {
            let bv = self.matrix_times_vector(cx, b, v)?;
            return self.matrix_times_vector(cx, a, bv);
        }
        let TypeInner::Matrix { columns, rows, .. } = self.ty(cx, m) else {
            return Err(FrontError::Internal(
                "a matrix product of a non-matrix".into(),
            ));
        };
        let (c, rw) = (columns as usize, rows as usize);
        let a = self.comps(cx, m)?;
        Ok((0..rw)
            .map(|i| self.sum_products((0..c).map(|k| (a[k * rw + i], v[k]))))
            .collect())
    }

    /// Row vector `v` times matrix `m`, `v·(A·B) = (v·A)·B` as in
    /// [`Self::matrix_times_vector`].
    fn vector_times_matrix(
        &mut self,
        cx: &mut FnCx<'m>,
        v: Vec<Operand>,
        m: Handle<Expression>,
    ) -> Result<Vec<Operand>, FrontError> {
        if let Some([a, b]) = self.matrix_product(cx, m) {
            let va = self.vector_times_matrix(cx, v, a)?;
            return self.vector_times_matrix(cx, va, b);
        }
        let TypeInner::Matrix { columns, rows, .. } = self.ty(cx, m) else {
            return Err(FrontError::Internal(
                "a matrix product of a non-matrix".into(),
            ));
        };
        let (c, rw) = (columns as usize, rows as usize);
        let b = self.comps(cx, m)?;
        Ok((0..c)
            .map(|j| self.sum_products((0..rw).map(|i| (v[i], b[j * rw + i]))))
            .collect())
    }

    /// Σ xᵢ·yᵢ in float.
    pub(super) fn sum_products(
        &mut self,
        pairs: impl Iterator<Item = (Operand, Operand)>,
    ) -> Operand {
        let mut acc: Option<Operand> = None;
        for (x, y) in pairs.collect::<Vec<_>>() {
            let p = self.op(Opcode::Fmul, &[x, y]);
            acc = Some(match acc {
                None => p,
                Some(s) => self.op(Opcode::Fadd, &[s, p]),
            });
        }
        acc.unwrap_or(Operand::constant(0))
    }

    pub(super) fn scalar_binary(
        &mut self,
        op: B,
        kind: ScalarKind,
        x: Operand,
        y: Operand,
    ) -> Result<Operand, FrontError> {
        use ScalarKind::*;
        let float = kind == Float;
        let o = |f: Opcode, i: Opcode| if float { f } else { i };
        Ok(match op {
            B::Add => self.op(o(Opcode::Fadd, Opcode::Iadd), &[x, y]),
            B::Subtract => self.op(o(Opcode::Fsub, Opcode::Isub), &[x, y]),
            B::Multiply => self.op(o(Opcode::Fmul, Opcode::Imul), &[x, y]),
            B::Divide => match kind {
                Float => self.op(Opcode::Fdiv, &[x, y]),
                Uint => self.op(Opcode::Udiv, &[x, y]),
                _ => self.op(Opcode::Idiv, &[x, y]),
            },
            B::Modulo => match kind {
                // WGSL's %: x − y·trunc(x / y).
                Float => {
                    let q = self.op(Opcode::Fdiv, &[x, y]);
                    let t = self.op(Opcode::Ftrunc, &[q]);
                    let p = self.op(Opcode::Fmul, &[y, t]);
                    self.op(Opcode::Fsub, &[x, p])
                }
                Uint => self.op(Opcode::Urem, &[x, y]),
                _ => self.op(Opcode::Irem, &[x, y]),
            },
            B::Equal => self.op(o(Opcode::Feq, Opcode::Ieq), &[x, y]),
            B::NotEqual => self.op(o(Opcode::Fne, Opcode::Ine), &[x, y]),
            B::Less => self.op(cmp_lt(kind), &[x, y]),
            B::LessEqual => self.op(cmp_le(kind), &[x, y]),
            B::Greater => self.op(cmp_lt(kind), &[y, x]),
            B::GreaterEqual => self.op(cmp_le(kind), &[y, x]),
            B::And | B::LogicalAnd => self.op(Opcode::Iand, &[x, y]),
            B::InclusiveOr | B::LogicalOr => self.op(Opcode::Ior, &[x, y]),
            B::ExclusiveOr => self.op(Opcode::Ixor, &[x, y]),
            B::ShiftLeft => self.op(Opcode::Ishl, &[x, y]),
            B::ShiftRight => self.op(
                if kind == Sint {
                    Opcode::Ishr
                } else {
                    Opcode::Ushr
                },
                &[x, y],
            ),
        })
    }
}

fn norm(k: ScalarKind) -> ScalarKind {
    match k {
        ScalarKind::AbstractFloat => ScalarKind::Float,
        ScalarKind::AbstractInt => ScalarKind::Sint,
        k => k,
    }
}

fn cmp_lt(kind: ScalarKind) -> Opcode {
    match kind {
        ScalarKind::Float => Opcode::Flt,
        ScalarKind::Uint => Opcode::Ult,
        _ => Opcode::Ilt,
    }
}

fn cmp_le(kind: ScalarKind) -> Opcode {
    match kind {
        ScalarKind::Float => Opcode::Fle,
        ScalarKind::Uint => Opcode::Ule,
        _ => Opcode::Ile,
    }
}

/// The variant name of an expression, for messages.
pub(super) fn variant(e: &Expression) -> String {
    let d = format!("{e:?}");
    d.split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("?")
        .to_string()
}
