//! naga types as kiln sees them: how many 32-bit components a value has, where each component
//! of a uniform block sits in bytes.

use crate::FrontError;
use naga::{Handle, Type, TypeInner};

fn check_scalar(s: naga::Scalar) -> Result<(), FrontError> {
    match (s.kind, s.width) {
        (naga::ScalarKind::Bool, _) | (_, 4) => Ok(()),
        (naga::ScalarKind::AbstractInt | naga::ScalarKind::AbstractFloat, _) => Ok(()),
        (k, w) => Err(FrontError::unsupported(format!(
            "{}-bit {k:?} values",
            w * 8
        ))),
    }
}

/// Number of 32-bit components of a value of type `ty`.
pub fn comp_count(m: &naga::Module, ty: Handle<Type>) -> Result<u32, FrontError> {
    inner_count(m, &m.types[ty].inner)
}

pub fn inner_count(m: &naga::Module, inner: &TypeInner) -> Result<u32, FrontError> {
    Ok(match *inner {
        TypeInner::Scalar(s) => {
            check_scalar(s)?;
            1
        }
        TypeInner::Vector { size, scalar } => {
            check_scalar(scalar)?;
            size as u32
        }
        TypeInner::Matrix {
            columns,
            rows,
            scalar,
        } => {
            check_scalar(scalar)?;
            columns as u32 * rows as u32
        }
        TypeInner::Array { base, size, .. } => {
            let n = array_len(size)?;
            n * comp_count(m, base)?
        }
        TypeInner::Struct { ref members, .. } => {
            let mut n = 0;
            for mem in members {
                n += comp_count(m, mem.ty)?;
            }
            n
        }
        TypeInner::Atomic(_) => return Err(FrontError::unsupported("atomics")),
        ref other => {
            return Err(FrontError::unsupported(format!(
                "values of type {}",
                type_name(other)
            )));
        }
    })
}

pub fn array_len(size: naga::ArraySize) -> Result<u32, FrontError> {
    match size {
        naga::ArraySize::Constant(n) => Ok(n.get()),
        naga::ArraySize::Pending(_) => Err(FrontError::unsupported("arrays sized by overrides")),
        naga::ArraySize::Dynamic => Err(FrontError::unsupported("runtime-sized arrays")),
    }
}

fn type_name(inner: &TypeInner) -> &'static str {
    match inner {
        TypeInner::Image { .. } => "image",
        TypeInner::Sampler { .. } => "sampler",
        TypeInner::Pointer { .. } | TypeInner::ValuePointer { .. } => "pointer",
        TypeInner::BindingArray { .. } => "binding arrays",
        TypeInner::AccelerationStructure { .. } | TypeInner::RayQuery { .. } => "ray tracing",
        TypeInner::CooperativeMatrix { .. } => "cooperative matrices",
        _ => "this kind",
    }
}

/// Byte stride between the columns of a matrix with `rows` rows in a uniform block (WGSL's
/// layout, which naga applies: vec2 columns 8 bytes, vec3/vec4 columns 16).
pub fn column_stride(rows: naga::VectorSize) -> u32 {
    match rows {
        naga::VectorSize::Bi => 8,
        _ => 16,
    }
}

/// The named leaves (scalars, vectors, matrices) of a value of type `ty` at byte `offset` of
/// a uniform block whose first word is `base`, each with its words; struct members are named
/// `name.member` (or `member` at the top), array elements `name[i]` (at most 256 of them).
pub fn uniform_members(
    m: &naga::Module,
    ty: Handle<Type>,
    name: &str,
    offset: u32,
    base: u32,
    out: &mut Vec<crate::interface::Variable>,
) {
    use crate::interface::{Scalar, Variable};
    let word = |o: u32| base + o / 4;
    let mut leaf = |scalar: naga::Scalar, slots: Vec<u32>| {
        if let Some(scalar) = Scalar::of(scalar) {
            out.push(Variable {
                name: name.to_string(),
                scalar,
                slots,
                location: None,
            });
        }
    };
    match &m.types[ty].inner {
        TypeInner::Scalar(s) => leaf(*s, vec![word(offset)]),
        TypeInner::Vector { size, scalar } => leaf(
            *scalar,
            (0..*size as u32).map(|k| word(offset + 4 * k)).collect(),
        ),
        TypeInner::Matrix {
            columns,
            rows,
            scalar,
        } => {
            let stride = column_stride(*rows);
            let rows = *rows as u32;
            let slots = (0..*columns as u32)
                .flat_map(|c| (0..rows).map(move |r| offset + c * stride + 4 * r))
                .map(word)
                .collect();
            leaf(*scalar, slots);
        }
        TypeInner::Array {
            base: elem,
            size: naga::ArraySize::Constant(n),
            stride,
        } => {
            for i in 0..n.get().min(256) {
                let element = format!("{name}[{i}]");
                uniform_members(m, *elem, &element, offset + i * stride, base, out);
            }
        }
        TypeInner::Struct { members, .. } => {
            for mem in members {
                let Some(mname) = &mem.name else { continue };
                let full = if name.is_empty() {
                    mname.clone()
                } else {
                    format!("{name}.{mname}")
                };
                uniform_members(m, mem.ty, &full, offset + mem.offset, base, out);
            }
        }
        _ => {}
    }
}

/// Byte size of a type in a uniform block.
pub fn byte_size(m: &naga::Module, ty: Handle<Type>) -> Result<u32, FrontError> {
    Ok(match m.types[ty].inner {
        TypeInner::Scalar(_) => 4,
        TypeInner::Vector { size, .. } => 4 * size as u32,
        TypeInner::Matrix { columns, rows, .. } => columns as u32 * column_stride(rows),
        TypeInner::Array { size, stride, .. } => array_len(size)? * stride,
        TypeInner::Struct { span, .. } => span,
        _ => return Err(FrontError::unsupported("this type in a uniform block")),
    })
}

/// Byte offsets of the components of a value of type `ty` stored at byte `base`.
pub fn uniform_offsets(
    m: &naga::Module,
    ty: Handle<Type>,
    base: u32,
    out: &mut Vec<u32>,
) -> Result<(), FrontError> {
    uniform_offsets_inner(m, &m.types[ty].inner, base, out)
}

/// [`uniform_offsets`] for a type given by value.
pub fn uniform_offsets_inner(
    m: &naga::Module,
    inner: &TypeInner,
    base: u32,
    out: &mut Vec<u32>,
) -> Result<(), FrontError> {
    match *inner {
        TypeInner::Scalar(_) => out.push(base),
        TypeInner::Vector { size, .. } => out.extend((0..size as u32).map(|c| base + 4 * c)),
        TypeInner::Matrix { columns, rows, .. } => {
            for c in 0..columns as u32 {
                for r in 0..rows as u32 {
                    out.push(base + c * column_stride(rows) + 4 * r);
                }
            }
        }
        TypeInner::Array {
            base: elem,
            size,
            stride,
        } => {
            for e in 0..array_len(size)? {
                uniform_offsets(m, elem, base + e * stride, out)?;
            }
        }
        TypeInner::Struct { ref members, .. } => {
            for mem in members {
                uniform_offsets(m, mem.ty, base + mem.offset, out)?;
            }
        }
        _ => return Err(FrontError::unsupported("this type in a uniform block")),
    }
    Ok(())
}

/// Component offset of struct member `index` (in flattened components).
pub fn member_comp_offset(
    m: &naga::Module,
    members: &[naga::StructMember],
    index: u32,
) -> Result<u32, FrontError> {
    let mut off = 0;
    for mem in &members[..index as usize] {
        off += comp_count(m, mem.ty)?;
    }
    Ok(off)
}

/// The 32-bit scalar type of a scalar, vector or matrix type.
pub(crate) fn scalar_of(
    m: &naga::Module,
    ty: naga::Handle<naga::Type>,
) -> Option<crate::interface::Scalar> {
    match m.types[ty].inner {
        naga::TypeInner::Scalar(s)
        | naga::TypeInner::Vector { scalar: s, .. }
        | naga::TypeInner::Matrix { scalar: s, .. } => crate::interface::Scalar::of(s),
        _ => None,
    }
}
