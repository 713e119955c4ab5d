//! The uniform stream of an emitted program, after Mesa's `vc4_uniforms.c` (`vc4_write_uniforms`)
//! and the `QUNIFORM_*` kinds of `vc4_qir.h`.
//!
//! The QPU reads uniforms as a FIFO: every read of the uniform address pops the next 32-bit word,
//! whatever the instruction does with it. An emitted program therefore comes with a table that
//! names, for each read in program order, what the driver must put there; the table is also the
//! stream. Blocks that control can reach other than by falling through point the stream back at
//! their own entries first ([`Uniform::StreamAddress`], see `crate::emit`).

use kiln_qpu::sim::tmu;
use serde::{Deserialize, Serialize};

/// What one uniform-stream word holds (Mesa `enum quniform_contents`, the kinds kiln uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Uniform {
    /// A fixed 32-bit value (Mesa `QUNIFORM_CONSTANT`).
    Constant(u32),
    /// Word `slot` of the shader's user uniforms (Mesa `QUNIFORM_UNIFORM`): the front end's
    /// uniform slot, the word index into its uniform blocks.
    User(u32),
    /// The viewport's x scale, y scale, z scale, z offset (k = 0–3; Mesa
    /// `QUNIFORM_VIEWPORT_X_SCALE` … `QUNIFORM_VIEWPORT_Z_OFFSET`) and the y scale negated
    /// (k = 4, for a y flip: `crate::vertex::VIEWPORT_Y_SCALE_NEGATED`), read at uniform slot
    /// `crate::vertex::VIEWPORT_X_SCALE + k` of the IR.
    Viewport(u32),
    /// Texture configuration parameter 0 / 1 of a unit (Mesa `QUNIFORM_TEXTURE_CONFIG_P0`,
    /// `_P1`): base address and format; size, filters and wrapping. Read by the TMU writes of
    /// each lookup.
    TextureP0 {
        unit: u32,
        /// A cube map: parameter 0 sets `CMMODE`.
        cube: bool,
    },
    TextureP1(u32),
    /// Texture configuration parameter 2 of a unit (Mesa `QUNIFORM_TEXTURE_CONFIG_P2`): the
    /// cube-map stride type, and `BSLOD` when the b register holds an explicit level.
    TextureP2 {
        unit: u32,
        explicit_level: bool,
    },
    /// The reciprocal of a texture's width (`axis` 0) or height (1) (Mesa
    /// `QUNIFORM_TEXRECT_SCALE_X`, `_Y`), read at uniform slot
    /// `crate::texture::TEXRECT_SCALE + 2·unit + axis` of the IR: a texel fetch's coordinates.
    TexrectScale {
        unit: u32,
        axis: u32,
    },
    /// A texture's width (`axis` 0) or height (1) as a float, read at uniform slot
    /// `crate::texture::TEXTURE_SIZE + 2·unit + axis` of the IR: explicit gradients' level.
    TextureSize {
        unit: u32,
        axis: u32,
    },
    /// The address of the uniform stream itself (Mesa `QUNIFORM_UNIFORMS_ADDRESS`), read by the
    /// stream resets at block starts.
    StreamAddress,
}

impl Uniform {
    /// The table entry for an IR `uniform SLOT`.
    pub fn of_slot(slot: u32) -> Uniform {
        let k = slot.wrapping_sub(crate::vertex::VIEWPORT_X_SCALE);
        let texrect = slot.wrapping_sub(crate::texture::TEXRECT_SCALE);
        if k < 5 {
            Uniform::Viewport(k)
        } else if texrect < 0x1_0000 {
            Uniform::TexrectScale {
                unit: texrect / 2,
                axis: texrect % 2,
            }
        } else if let size = slot.wrapping_sub(crate::texture::TEXTURE_SIZE)
            && size < 0x1_0000
        {
            Uniform::TextureSize {
                unit: size / 2,
                axis: size % 2,
            }
        } else {
            Uniform::User(slot)
        }
    }

    /// The IR uniform slot whose value the entry carries (none for constants).
    pub fn slot(self) -> Option<u32> {
        match self {
            Uniform::Constant(_) | Uniform::StreamAddress => None,
            Uniform::User(s) => Some(s),
            Uniform::Viewport(k) => Some(crate::vertex::VIEWPORT_X_SCALE + k),
            Uniform::TexrectScale { unit, axis } => {
                Some(crate::texture::TEXRECT_SCALE + 2 * unit + axis)
            }
            Uniform::TextureSize { unit, axis } => {
                Some(crate::texture::TEXTURE_SIZE + 2 * unit + axis)
            }
            Uniform::TextureP0 { .. } | Uniform::TextureP1(_) | Uniform::TextureP2 { .. } => None,
        }
    }
}

/// Texture configuration parameter 2 (Mesa `write_texture_p2`): type `CUBE_MAP_STRIDE` in
/// bits 31:30, the stride between a cube map's faces (bits 29:12; 0 for a 2D texture), `BSLOD`
/// in bit 0.
pub fn texture_p2(explicit_level: bool, cube_stride: u32) -> u32 {
    tmu::P2_CUBE_MAP_STRIDE | (cube_stride & tmu::P2_STRIDE_MASK) | explicit_level as u32
}

impl Uniform {
    /// The word the driver writes, given the stream's address and the user uniform words
    /// (missing ones read 0).
    pub fn value(self, base: u32, user: impl Fn(u32) -> Option<u32>) -> u32 {
        match self {
            Uniform::Constant(c) => c,
            Uniform::StreamAddress => base,
            Uniform::TextureP2 { explicit_level, .. } => texture_p2(explicit_level, 0),
            u => u.slot().and_then(user).unwrap_or(0),
        }
    }
}

/// The stream for one run, placed at address `base`: each entry of `table` resolved against
/// `user`.
pub fn stream(table: &[Uniform], base: u32, user: impl Fn(u32) -> Option<u32>) -> Vec<u32> {
    table.iter().map(|u| u.value(base, &user)).collect()
}

impl std::fmt::Display for Uniform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Uniform::Constant(c) => write!(f, "constant {c:#010x}"),
            Uniform::User(s) => write!(f, "uniform {s}"),
            Uniform::TextureP0 { unit, cube } => write!(
                f,
                "texture {unit} config p0{}",
                if *cube { " (cube map)" } else { "" }
            ),
            Uniform::TextureP1(u) => write!(f, "texture {u} config p1"),
            Uniform::TextureP2 {
                unit,
                explicit_level,
            } => write!(
                f,
                "texture {unit} config p2{}",
                if *explicit_level {
                    " (b is the level)"
                } else {
                    ""
                }
            ),
            Uniform::StreamAddress => write!(f, "uniforms address"),
            Uniform::TexrectScale { unit, axis } => write!(
                f,
                "texture {unit} 1/{}",
                if *axis == 0 { "width" } else { "height" }
            ),
            Uniform::TextureSize { unit, axis } => write!(
                f,
                "texture {unit} {}",
                if *axis == 0 { "width" } else { "height" }
            ),
            Uniform::Viewport(k) => write!(
                f,
                "viewport {}",
                [
                    "x scale",
                    "y scale",
                    "z scale",
                    "z offset",
                    "y scale negated"
                ][(*k as usize).min(4)]
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_resolves_user_words_and_constants() {
        let table = [
            Uniform::User(3),
            Uniform::Constant(7),
            Uniform::User(9),
            Uniform::StreamAddress,
        ];
        let s = stream(&table, 0x400, |k| (k == 3).then_some(42));
        assert_eq!(s, vec![42, 7, 0, 0x400]);
        assert_eq!(Uniform::User(2).to_string(), "uniform 2");
    }
}
