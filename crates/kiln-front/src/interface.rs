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
}

/// A texture unit: one image sampled with one sampler.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TextureUnit {
    pub unit: u32,
    pub image: String,
    pub sampler: String,
    /// Uniform words holding the texture's width and height, when the shader asks for its size.
    pub size_words: Option<(u32, u32)>,
}

/// Everything the lowered function reads and writes outside itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Interface {
    pub stage: String,
    pub entry_point: String,
    pub inputs: Vec<Slot>,
    pub outputs: Vec<Slot>,
    pub uniforms: Vec<UniformBlock>,
    pub textures: Vec<TextureUnit>,
    /// Number of uniform words used.
    pub uniform_words: u32,
}
