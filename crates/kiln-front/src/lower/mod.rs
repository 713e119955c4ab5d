//! naga → kiln IR. One walk over the entry point's structured body builds SSA directly: values
//! split into 32-bit scalars ([`Val::Comps`]), variables as SSA variables (Braun et al. 2013),
//! calls inlined, naga's control flow in kiln's structured form; afterwards
//! [`uniformity::make_uniform`] makes uniform what the divergence analysis proves uniform. The
//! design is in `docs/front.md` ("Passes, in the order a reader meets them", "Uniformity").

mod assigned;
mod control;
mod expr;
mod math;
mod types;
pub mod uniformity;

use crate::FrontError;
use crate::interface::{
    Interface, Scalar, Slot, SlotKind, Stage, TextureUnit, UniformBlock, Variable,
};
use crate::parse::Parsed;
use kiln_ir::builder::{Builder, LoopScope};
use kiln_ir::{Block, Function, GenericTarget, Opcode, Operand, RegClass, Temp, Value};
use naga::{Handle, ShaderStage};
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;

/// A lowered entry point and its interface.
#[derive(Clone, Debug)]
pub struct Lowered {
    pub function: Function,
    pub interface: Interface,
}

/// An SSA variable of the lowering (a local, a private global, a flag).
type Var = u32;
/// Current definition of every variable, per component.
type Defs = BTreeMap<Var, Vec<Operand>>;

/// A lowered naga expression.
#[derive(Clone, Debug)]
enum Val {
    /// 32-bit scalar components.
    Comps(Vec<Operand>),
    Ptr(Ptr),
    /// An image or sampler global.
    Resource(Handle<naga::GlobalVariable>),
}

/// Where a pointer points.
#[derive(Clone, Copy, Debug)]
enum Root {
    /// An SSA variable; offsets count components.
    Var(Var),
    /// A uniform block starting at uniform word `base`; offsets count bytes.
    Uniform { base: u32 },
}

/// A pointer: root, pointee type, static offset, and its dynamic indices.
#[derive(Clone, Debug)]
struct Ptr {
    root: Root,
    ty: naga::TypeInner,
    offset: u32,
    /// Each `(index, stride, count)` adds `index × stride` to the offset; `count` elements exist.
    /// Several indices (`a[i][j]`) select among the product of their counts.
    dynamic: Vec<(Operand, u32, u32)>,
}

/// How the current function returns.
#[derive(Clone, Copy, Debug)]
enum RetMode {
    /// Only a final `Return` (or none).
    Tail,
    /// Inside a one-trip loop: a `Return` stores the value and breaks.
    Loop { value: Option<Var>, flag: Var },
}

/// One function being lowered (the entry point or an inlined callee).
struct FnCx<'m> {
    f: &'m naga::Function,
    info: &'m naga::valid::FunctionInfo,
    args: Vec<Val>,
    cache: HashMap<Handle<naga::Expression>, Val>,
    locals: Vec<Var>,
    ret: RetMode,
    /// The value of a tail `Return`.
    tail_value: Option<Vec<Operand>>,
}

/// Kinds of kiln loops the lowering opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LoopKind {
    /// A naga loop.
    Naga,
    /// A switch's single pass.
    Switch,
    /// A function's single pass for early returns.
    Return,
}

/// An open kiln loop.
struct LoopFrame<'m> {
    kind: LoopKind,
    scope: LoopScope,
    preheader: Block,
    pre: Defs,
    header_phis: Vec<(Var, usize, Temp)>,
    back: Vec<(Block, Defs)>,
    breaks: Vec<(Block, Defs)>,
    continuing: Option<&'m naga::Block>,
    break_if: Option<Handle<naga::Expression>>,
    /// A switch's flag for lanes that took a naga `continue` inside it: they break out of the
    /// switch, and the `continue` happens after it.
    continue_flag: Option<Var>,
}

/// A built-in's name without its fields (`Barycentric`, not `Barycentric { perspective: true }`).
fn builtin_name(b: &naga::BuiltIn) -> String {
    format!("{b:?}")
        .split([' ', '{', '('])
        .next()
        .unwrap_or("?")
        .to_string()
}

/// Location `location`, component `c`: slot `4 · location + c`.
fn location_slot(location: u32, c: u32) -> (u32, SlotKind) {
    (
        4 * location + c,
        SlotKind::Location {
            location,
            component: c,
        },
    )
}

/// Upper bound on the elements dynamic indices select among (a select chain per element; with
/// several indices in one access, the product of their counts).
pub const MAX_DYNAMIC_ELEMENTS: u32 = 64;

struct Lowerer<'m, 'f> {
    m: &'m naga::Module,
    info: &'m naga::valid::ModuleInfo,
    b: Builder<'f>,
    iface: Interface,
    defs: Defs,
    var_sizes: Vec<u32>,
    loops: Vec<LoopFrame<'m>>,
    /// Per open region: whether a jump at its top level must be wrapped so the region still
    /// falls through (kiln's `break`/`continue` end an if region; a loop body ends in `continue`).
    regions: Vec<bool>,
    uniform_bases: HashMap<Handle<naga::GlobalVariable>, u32>,
    private_vars: HashMap<Handle<naga::GlobalVariable>, Var>,
    units: Vec<(Handle<naga::GlobalVariable>, Handle<naga::GlobalVariable>)>,
    /// GLSL file-scope declarators written with an initialiser, by name, with their spans.
    initialised: HashMap<String, std::ops::Range<usize>>,
    /// Phis created by the lowering, checked for triviality when their loop closes.
    call_depth: u32,
}

/// What the lowering does besides building the IR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LowerOptions {
    /// Run [`uniformity::make_uniform`] (on by default; off only to compare against it).
    pub uniformity: bool,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions { uniformity: true }
    }
}

/// Lowers entry point `entry` (by name, or the only vertex/fragment one of `stage`).
pub fn lower_entry_point(
    parsed: &Parsed,
    stage: Option<ShaderStage>,
    entry: Option<&str>,
) -> Result<Lowered, FrontError> {
    lower_entry_point_with(parsed, stage, entry, LowerOptions::default())
}

/// [`lower_entry_point`] with options.
pub fn lower_entry_point_with(
    parsed: &Parsed,
    stage: Option<ShaderStage>,
    entry: Option<&str>,
    options: LowerOptions,
) -> Result<Lowered, FrontError> {
    let result = crate::parse::catch_quietly(|| lower_inner(parsed, stage, entry, options));
    let result = result.unwrap_or_else(|p| {
        Err(FrontError::Internal(format!(
            "lowering panicked: {}",
            crate::parse::panic_text(&p)
        )))
    });
    // Spans into a moved initialiser point at its declaration in the shader as written.
    match (result, &parsed.hoisted) {
        (
            Err(FrontError::Unsupported {
                what,
                span: Some(r),
            }),
            Some(h),
        ) => Err(FrontError::Unsupported {
            what,
            span: Some(h.original(r)),
        }),
        (result, _) => result,
    }
}

fn lower_inner(
    parsed: &Parsed,
    stage: Option<ShaderStage>,
    entry: Option<&str>,
    options: LowerOptions,
) -> Result<Lowered, FrontError> {
    let m = &parsed.module;
    let candidates: Vec<usize> = m
        .entry_points
        .iter()
        .enumerate()
        .filter(|(_, e)| entry.is_none_or(|n| e.name == n) && stage.is_none_or(|s| e.stage == s))
        .filter(|(_, e)| matches!(e.stage, ShaderStage::Vertex | ShaderStage::Fragment))
        .map(|(i, _)| i)
        .collect();
    let index = match candidates.as_slice() {
        [i] => *i,
        [] => {
            let all: Vec<String> = m
                .entry_points
                .iter()
                .map(|e| format!("{} ({})", e.name, format!("{:?}", e.stage).to_lowercase()))
                .collect();
            let stage = stage.map(|s| format!("{s:?}").to_lowercase());
            let asked = match (entry, stage) {
                (Some(n), Some(s)) => format!(" named `{n}` of stage {s}"),
                (Some(n), None) => format!(" named `{n}`"),
                (None, Some(s)) => format!(" of stage {s}"),
                (None, None) => String::new(),
            };
            return Err(FrontError::Input(format!(
                "no vertex or fragment entry point{asked}; the shader has {}",
                if all.is_empty() {
                    "none".to_string()
                } else {
                    all.join(", ")
                }
            )));
        }
        _ => {
            let names: Vec<&str> = candidates
                .iter()
                .map(|&i| m.entry_points[i].name.as_str())
                .collect();
            return Err(FrontError::Input(format!(
                "several entry points match ({}): choose one with --entry",
                names.join(", ")
            )));
        }
    };
    // Pipeline overrides take their default values (naga evaluates them and every constant
    // expression depending on them, array sizes included).
    let (stage, name) = (
        m.entry_points[index].stage,
        m.entry_points[index].name.clone(),
    );
    let (module, info) = if m.overrides.is_empty() {
        (
            std::borrow::Cow::Borrowed(m),
            std::borrow::Cow::Borrowed(&parsed.info),
        )
    } else {
        naga::back::pipeline_constants::process_overrides(
            m,
            &parsed.info,
            Some((stage, &name)),
            &Default::default(),
        )
        .map_err(|e| FrontError::unsupported(format!("pipeline overrides: {e}")))?
    };
    let m: &naga::Module = &module;
    let index = m
        .entry_points
        .iter()
        .position(|e| e.name == name && e.stage == stage)
        .ok_or_else(|| FrontError::Internal("entry point lost".into()))?;
    let ep = &m.entry_points[index];
    let mut func = Function::new(ep.name.clone(), GenericTarget::arc(256, 104));
    let mut lw = Lowerer {
        m,
        info: &info,
        b: Builder::new(&mut func),
        iface: Interface {
            stage: if ep.stage == ShaderStage::Vertex {
                Stage::Vertex
            } else {
                Stage::Fragment
            },
            entry_point: ep.name.clone(),
            ..Interface::default()
        },
        defs: Defs::new(),
        var_sizes: Vec::new(),
        loops: Vec::new(),
        regions: vec![false],
        uniform_bases: HashMap::default(),
        private_vars: HashMap::default(),
        units: Vec::new(),
        initialised: parsed.initialised_globals.iter().cloned().collect(),
        call_depth: 0,
    };
    lw.globals(index)?;
    let info = info.get_entry_point(index);
    let args = lw.entry_inputs(&ep.function)?;
    let outputs = lw.function_body(&ep.function, info, args)?;
    if let (Some(result), Some(values)) = (&ep.function.result, outputs) {
        lw.entry_outputs(result, &values)?;
    }
    lw.b.ret();
    let iface = lw.iface;
    if options.uniformity {
        uniformity::make_uniform(&mut func)?;
    }
    Ok(Lowered {
        function: func,
        interface: iface,
    })
}

impl<'m> Lowerer<'m, '_> {
    fn v1(&self) -> RegClass {
        self.b.func.target.class(GenericTarget::V, 1)
    }
    fn s1(&self) -> RegClass {
        self.b.func.target.class(GenericTarget::S, 1)
    }

    /// Whether an operand holds the same value in every lane.
    fn is_uniform(&self, op: &Operand) -> bool {
        match op.value {
            Value::Const(_) | Value::Undef(_) => true,
            Value::Temp(t) => self.b.func.class(t).file == GenericTarget::S,
        }
    }

    /// Emits a scalar op; uniform when every operand is (and `per_lane` is false). An op of
    /// constants is folded (`kiln_ir::semantics`, the interpreter's meaning), so that an index
    /// computed from constants is a static one.
    fn op(&mut self, op: Opcode, args: &[Operand]) -> Operand {
        let consts: Option<Vec<u32>> = args
            .iter()
            .map(|a| match a.value {
                Value::Const(c) => Some(c),
                _ => None,
            })
            .collect();
        if let Some(v) = consts.and_then(|c| kiln_ir::semantics::eval_scalar(op, &c)) {
            return Operand::constant(v);
        }
        let uniform = args.iter().all(|a| self.is_uniform(a));
        let class = if uniform { self.s1() } else { self.v1() };
        Operand::temp(self.b.op(op, class, args.iter().copied()))
    }

    /// Every position a pointer's dynamic indices can select: the offset added to the static one
    /// and the condition (all ones when every index equals its element number) that selects it,
    /// in row-major order. With `first_default`, the first position gets no condition: a load's
    /// select chain starts from it. At most [`MAX_DYNAMIC_ELEMENTS`] positions.
    fn dynamic_cases(
        &mut self,
        dynamic: &[(Operand, u32, u32)],
        first_default: bool,
    ) -> Result<Vec<(u32, Option<Operand>)>, FrontError> {
        let total = dynamic
            .iter()
            .try_fold(1u32, |n, &(_, _, c)| n.checked_mul(c))
            .filter(|&n| n <= MAX_DYNAMIC_ELEMENTS)
            .ok_or_else(|| {
                FrontError::unsupported(format!(
                    "dynamic indexing of more than {MAX_DYNAMIC_ELEMENTS} elements"
                ))
            })?;
        let mut cases = Vec::with_capacity(total as usize);
        let mut hits: Vec<Vec<Option<Operand>>> = dynamic
            .iter()
            .map(|&(_, _, c)| vec![None; c as usize])
            .collect();
        for n in 0..total {
            // Mixed-radix digits of `n`, the last index varying fastest.
            let mut rest = n;
            let mut digits = vec![0u32; dynamic.len()];
            for (k, &(_, _, c)) in dynamic.iter().enumerate().rev() {
                digits[k] = rest % c;
                rest /= c;
            }
            let offset = digits
                .iter()
                .zip(dynamic)
                .map(|(&e, &(_, stride, _))| e * stride)
                .sum();
            if n == 0 && first_default {
                cases.push((offset, None));
                continue;
            }
            let mut cond: Option<Operand> = None;
            for (k, &e) in digits.iter().enumerate() {
                let hit = match hits[k][e as usize] {
                    Some(h) => h,
                    None => {
                        let h = self.op(Opcode::Ieq, &[dynamic[k].0, Operand::constant(e)]);
                        hits[k][e as usize] = Some(h);
                        h
                    }
                };
                cond = Some(match cond {
                    None => hit,
                    Some(c) => self.op(Opcode::Iand, &[c, hit]),
                });
            }
            cases.push((offset, cond));
        }
        Ok(cases)
    }

    /// Emits a per-lane op regardless of its operands.
    fn op_v(&mut self, op: Opcode, args: &[Operand]) -> Operand {
        let c = self.v1();
        Operand::temp(self.b.op(op, c, args.iter().copied()))
    }

    fn new_var(&mut self, size: u32, init: Vec<Operand>) -> Var {
        let v = self.var_sizes.len() as Var;
        self.var_sizes.push(size);
        self.defs.insert(v, init);
        v
    }

    /// Uniform blocks get consecutive word ranges; private globals become variables. Globals in
    /// address spaces kiln cannot serve are refused only when entry point `index` uses them
    /// (naga's `FunctionInfo::global_uses`, which includes the uses of called functions); the
    /// error points at the global's declaration.
    fn globals(&mut self, index: usize) -> Result<(), FrontError> {
        let mut next = 0u32;
        let uses = self.info.get_entry_point(index);
        for (h, g) in self.m.global_variables.iter() {
            let unused = uses[h].is_empty();
            let refuse = |what: String| -> Result<(), FrontError> {
                if unused {
                    return Ok(());
                }
                Err(FrontError::Unsupported {
                    what,
                    span: self.m.global_variables.get_span(h).to_range(),
                })
            };
            match g.space {
                naga::AddressSpace::Uniform | naga::AddressSpace::Immediate => {
                    let bytes = types::byte_size(self.m, g.ty)?;
                    let words = bytes.div_ceil(4);
                    self.uniform_bases.insert(h, next);
                    let name = g.name.clone().unwrap_or_default();
                    let mut members = Vec::new();
                    let is_struct =
                        matches!(self.m.types[g.ty].inner, naga::TypeInner::Struct { .. });
                    let top = if is_struct {
                        String::new()
                    } else {
                        name.clone()
                    };
                    types::uniform_members(self.m, g.ty, &top, 0, next, &mut members);
                    self.iface.uniforms.push(UniformBlock {
                        name,
                        binding: g.binding.as_ref().map(|b| (b.group, b.binding)),
                        base: next,
                        words,
                        members,
                        is_struct,
                    });
                    next += words;
                }
                naga::AddressSpace::Private => {
                    // naga's GLSL reader drops an initialiser it cannot make constant (it
                    // evaluates it and never stores it): refuse rather than read 0.
                    if g.init.is_none()
                        && !unused
                        && let Some(span) = g.name.as_ref().and_then(|n| self.initialised.get(n))
                    {
                        return Err(FrontError::Unsupported {
                            what: "global initialiser that is not a constant expression".into(),
                            span: Some(span.clone()),
                        });
                    }
                    let size = types::comp_count(self.m, g.ty)?;
                    let init = match g.init {
                        Some(e) => self.const_expr(e)?,
                        None => vec![Operand::constant(0); size as usize],
                    };
                    let v = self.new_var(size, init);
                    self.private_vars.insert(h, v);
                }
                naga::AddressSpace::Handle => {}
                naga::AddressSpace::Function => {}
                naga::AddressSpace::WorkGroup => refuse("workgroup memory".into())?,
                naga::AddressSpace::Storage { .. } => refuse("storage buffers".into())?,
                _ => refuse(format!("address space {:?}", g.space))?,
            }
        }
        self.iface.uniform_words = next;
        Ok(())
    }

    /// Reads the entry point's arguments from input slots.
    fn entry_inputs(&mut self, f: &'m naga::Function) -> Result<Vec<Val>, FrontError> {
        let mut args = Vec::new();
        for arg in &f.arguments {
            let comps = match &arg.binding {
                Some(b) => self.input(b, arg.ty, arg.name.as_deref())?,
                None => {
                    let naga::TypeInner::Struct { members, .. } = &self.m.types[arg.ty].inner
                    else {
                        return Err(FrontError::unsupported(
                            "entry point argument without binding",
                        ));
                    };
                    let mut all = Vec::new();
                    for mem in members {
                        let b = mem.binding.as_ref().ok_or_else(|| {
                            FrontError::unsupported("input struct member without binding")
                        })?;
                        all.extend(self.input(b, mem.ty, mem.name.as_deref())?);
                    }
                    all
                }
            };
            args.push(Val::Comps(comps));
        }
        Ok(args)
    }

    fn input(
        &mut self,
        binding: &naga::Binding,
        ty: Handle<naga::Type>,
        name: Option<&str>,
    ) -> Result<Vec<Operand>, FrontError> {
        let n = types::comp_count(self.m, ty)?;
        if let naga::Binding::Location { location, .. } = binding {
            let scalar = match self.m.types[ty].inner {
                naga::TypeInner::Scalar(s) | naga::TypeInner::Vector { scalar: s, .. } => {
                    Scalar::of(s)
                }
                _ => None,
            };
            if let Some(scalar) = scalar {
                self.iface.named_inputs.push(Variable {
                    name: name.unwrap_or_default().to_string(),
                    scalar,
                    slots: (0..n).map(|c| location_slot(*location, c).0).collect(),
                    location: Some(*location),
                });
            }
        }
        let mut out = Vec::new();
        for c in 0..n {
            let (slot, kind) = match binding {
                naga::Binding::Location { location, .. } => location_slot(*location, c),
                naga::Binding::BuiltIn(bi) => {
                    let (base, name) = match bi {
                        naga::BuiltIn::Position { .. } => (1000, "position"),
                        naga::BuiltIn::FrontFacing => (1004, "front_facing"),
                        naga::BuiltIn::PointCoord => (1005, "point_coord"),
                        naga::BuiltIn::VertexIndex => (1007, "vertex_index"),
                        naga::BuiltIn::InstanceIndex => (1008, "instance_index"),
                        naga::BuiltIn::SampleIndex => (1009, "sample_index"),
                        other => {
                            return Err(FrontError::unsupported(format!(
                                "input built-in {}",
                                builtin_name(other)
                            )));
                        }
                    };
                    (
                        base + c,
                        SlotKind::BuiltIn {
                            name: name.into(),
                            component: c,
                        },
                    )
                }
            };
            if !self.iface.inputs.iter().any(|s| s.slot == slot) {
                let scalar = types::scalar_of(self.m, ty);
                self.iface.inputs.push(Slot { slot, kind, scalar });
            }
            let c1 = self.v1();
            out.push(Operand::temp(
                self.b.inst(Opcode::Input, &[slot], &[c1], [])[0],
            ));
        }
        Ok(out)
    }

    /// Writes the entry point's result to output slots.
    fn entry_outputs(
        &mut self,
        result: &naga::FunctionResult,
        values: &[Operand],
    ) -> Result<(), FrontError> {
        let mut parts: Vec<(naga::Binding, Handle<naga::Type>)> = Vec::new();
        match &result.binding {
            Some(b) => parts.push((b.clone(), result.ty)),
            None => {
                let naga::TypeInner::Struct { members, .. } = &self.m.types[result.ty].inner else {
                    return Err(FrontError::unsupported(
                        "entry point result without binding",
                    ));
                };
                for mem in members {
                    let b = mem.binding.clone().ok_or_else(|| {
                        FrontError::unsupported("output struct member without binding")
                    })?;
                    parts.push((b, mem.ty));
                }
            }
        }
        let mut at = 0usize;
        for (binding, ty) in parts {
            let n = types::comp_count(self.m, ty)?;
            for c in 0..n {
                let (slot, kind) = match &binding {
                    naga::Binding::Location { location, .. } => location_slot(*location, c),
                    naga::Binding::BuiltIn(bi) => {
                        let (base, name) = match bi {
                            naga::BuiltIn::Position { .. } => (1100, "position"),
                            naga::BuiltIn::FragDepth => (1104, "frag_depth"),
                            naga::BuiltIn::PointSize => (1105, "point_size"),
                            naga::BuiltIn::SampleMask => (1106, "sample_mask"),
                            naga::BuiltIn::ClipDistances => (1110, "clip_distance"),
                            other => {
                                return Err(FrontError::unsupported(format!(
                                    "output built-in {}",
                                    builtin_name(other)
                                )));
                            }
                        };
                        (
                            base + c,
                            SlotKind::BuiltIn {
                                name: name.into(),
                                component: c,
                            },
                        )
                    }
                };
                let scalar = types::scalar_of(self.m, ty);
                self.iface.outputs.push(Slot { slot, kind, scalar });
                let mut inst = kiln_ir::Inst::new(Opcode::Output);
                inst.imms.push(slot);
                inst.operands.push(values[at]);
                self.b.push(inst);
                at += 1;
            }
        }
        Ok(())
    }

    /// The dimension of image `image` (a global of image type).
    fn sample_dim(
        &self,
        image: Handle<naga::GlobalVariable>,
    ) -> Result<kiln_ir::sample::Dim, FrontError> {
        use kiln_ir::sample::Dim;
        match self.m.types[self.m.global_variables[image].ty].inner {
            naga::TypeInner::Image { dim, .. } => Ok(match dim {
                naga::ImageDimension::D1 => Dim::D1,
                naga::ImageDimension::D2 => Dim::D2,
                naga::ImageDimension::D3 => Dim::D3,
                naga::ImageDimension::Cube => Dim::Cube,
            }),
            _ => Err(FrontError::Internal(
                "a sample of a global that is no image".into(),
            )),
        }
    }

    /// The texture unit of an (image, sampler) pair, allocated on first use.
    fn unit(
        &mut self,
        image: Handle<naga::GlobalVariable>,
        sampler: Handle<naga::GlobalVariable>,
    ) -> u32 {
        if let Some(u) = self.units.iter().position(|&p| p == (image, sampler)) {
            return u as u32;
        }
        let unit = self.units.len() as u32;
        self.units.push((image, sampler));
        let name = |h: Handle<naga::GlobalVariable>| {
            self.m.global_variables[h].name.clone().unwrap_or_default()
        };
        let kind = match self.m.types[self.m.global_variables[image].ty].inner {
            naga::TypeInner::Image { arrayed, class, .. } => kiln_ir::sample::SampleMode {
                arrayed,
                compare: matches!(class, naga::ImageClass::Depth { .. })
                    .then_some(kiln_ir::sample::Compare::LessEqual),
                ..kiln_ir::sample::SampleMode::new(
                    self.sample_dim(image).unwrap_or(kiln_ir::sample::Dim::D2),
                    kiln_ir::sample::Level::Implicit,
                )
            }
            .kind(),
            _ => "2D".to_string(),
        };
        self.iface.textures.push(TextureUnit {
            unit,
            kind,
            image: name(image),
            sampler: name(sampler),
            size_words: None,
            binding: self.m.global_variables[image]
                .binding
                .as_ref()
                .map(|b| b.binding),
        });
        unit
    }
}
