//! The per-shader interface description: which input, output, uniform and texture slots the
//! lowered function uses and what each one means. Later stages and simulator harnesses read it.

use serde::Serialize;

/// What one input or output slot carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum SlotKind {
    /// A user location and component.
    Location { location: u32, component: u32 },
    /// A built-in (`position`, `front_facing`, `frag_depth`…) and component.
    BuiltIn { name: String, component: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Slot {
    pub slot: u32,
    pub kind: SlotKind,
    /// The component's scalar type (`None`: not a 32-bit scalar type).
    pub scalar: Option<Scalar>,
}

/// The shader stage of an entry point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Vertex,
    #[default]
    Fragment,
}

impl Stage {
    /// The stage as `naga` names it.
    pub fn naga(self) -> naga::ShaderStage {
        match self {
            Stage::Vertex => naga::ShaderStage::Vertex,
            Stage::Fragment => naga::ShaderStage::Fragment,
        }
    }
}

/// The scalar type of a user variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scalar {
    Float,
    Sint,
    Uint,
    Bool,
}

impl Scalar {
    /// The 32-bit scalar types a shader can be given values of.
    pub fn of(s: naga::Scalar) -> Option<Scalar> {
        Some(match s.kind {
            naga::ScalarKind::Float if s.width == 4 => Scalar::Float,
            naga::ScalarKind::Sint if s.width == 4 => Scalar::Sint,
            naga::ScalarKind::Uint if s.width == 4 => Scalar::Uint,
            naga::ScalarKind::Bool => Scalar::Bool,
            _ => return None,
        })
    }
}

/// A user variable whose value comes from outside, by name: a uniform-block member (a leaf:
/// scalar, vector or matrix) or an input at a location.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Variable {
    /// The member's path in its block (`light.color`, `weights[3]`), or the input's name.
    pub name: String,
    pub scalar: Scalar,
    /// Uniform words of a member, input slots of an input, one per component (a matrix's
    /// column by column).
    pub slots: Vec<u32>,
    /// An input's location.
    pub location: Option<u32>,
}

/// A uniform buffer (or push-constant block) laid out in consecutive uniform words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UniformBlock {
    pub name: String,
    /// `(group, binding)`, or `None` for push constants.
    pub binding: Option<(u32, u32)>,
    /// First uniform word; byte offset `o` of the block is word `base + o / 4`.
    pub base: u32,
    pub words: u32,
    /// Its members by name, each with its words (the block's own name when it is not a
    /// struct); arrays up to 256 elements.
    pub members: Vec<Variable>,
    /// The block is a struct: its members are named by their paths in it.
    pub is_struct: bool,
}

/// A texture unit: one image sampled with one sampler.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TextureUnit {
    pub unit: u32,
    /// The image's kind: `2D`, `cube`, `2D array`, `2D shadow` (a depth image), ….
    pub kind: String,
    pub image: String,
    pub sampler: String,
    /// Uniform words holding the texture's width and height, when the shader asks for its size.
    pub size_words: Option<(u32, u32)>,
    /// The image's binding number.
    pub binding: Option<u32>,
}

/// Everything the lowered function reads and writes outside itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Interface {
    pub stage: Stage,
    pub entry_point: String,
    pub inputs: Vec<Slot>,
    /// The inputs at locations, by name.
    pub named_inputs: Vec<Variable>,
    pub outputs: Vec<Slot>,
    pub uniforms: Vec<UniformBlock>,
    pub textures: Vec<TextureUnit>,
    /// Number of uniform words used.
    pub uniform_words: u32,
}
