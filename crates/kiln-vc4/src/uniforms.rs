//! The uniform stream of an emitted program, after Mesa's `vc4_uniforms.c` (`vc4_write_uniforms`)
//! and the `QUNIFORM_*` kinds of `vc4_qir.h`.
//!
//! The QPU reads uniforms as a FIFO: every read of the uniform address pops the next 32-bit word,
//! whatever the instruction does with it. An emitted program therefore comes with a table that
//! names, for each read in program order, what the driver must put there. kiln's emitter reads
//! every uniform exactly once, in straight-line code before any branch (the interface pass moves
//! the reads there), so the table is also the stream.

use serde::Serialize;

/// What one uniform-stream word holds (Mesa `enum quniform_contents`, the kinds kiln uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Uniform {
    /// A fixed 32-bit value (Mesa `QUNIFORM_CONSTANT`).
    Constant(u32),
    /// Word `slot` of the shader's user uniforms (Mesa `QUNIFORM_UNIFORM`): the front end's
    /// uniform slot, the word index into its uniform blocks.
    User(u32),
    /// The viewport's x scale, y scale, z scale, z offset (k = 0–3; Mesa
    /// `QUNIFORM_VIEWPORT_X_SCALE` … `QUNIFORM_VIEWPORT_Z_OFFSET`), read at uniform slot
    /// `crate::vertex::VIEWPORT_X_SCALE + k` of the IR.
    Viewport(u32),
    /// Texture configuration parameter 0 / 1 of a unit (Mesa `QUNIFORM_TEXTURE_CONFIG_P0`,
    /// `_P1`): base address and format; size, filters and wrapping. Read by the TMU writes of
    /// each lookup.
    TextureP0(u32),
    TextureP1(u32),
    /// The address of a unit's two configuration words (P0, P1) in memory, for lookups that
    /// point the stream there (read at IR uniform slot `crate::texture::CONFIG + unit`).
    TextureConfigAddress(u32),
}

impl Uniform {
    /// The table entry for an IR `uniform SLOT`.
    pub fn of_slot(slot: u32) -> Uniform {
        let k = slot.wrapping_sub(crate::vertex::VIEWPORT_X_SCALE);
        let t = slot.wrapping_sub(crate::texture::CONFIG);
        if k < 4 {
            Uniform::Viewport(k)
        } else if t < 0x1000 {
            Uniform::TextureConfigAddress(t)
        } else {
            Uniform::User(slot)
        }
    }

    /// The IR uniform slot whose value the entry carries (none for constants).
    pub fn slot(self) -> Option<u32> {
        match self {
            Uniform::Constant(_) => None,
            Uniform::User(s) => Some(s),
            Uniform::Viewport(k) => Some(crate::vertex::VIEWPORT_X_SCALE + k),
            Uniform::TextureP0(_) | Uniform::TextureP1(_) => None,
            Uniform::TextureConfigAddress(u) => Some(crate::texture::CONFIG + u),
        }
    }
}

impl Uniform {
    /// The word the driver writes, given the user uniform words (missing ones read 0).
    pub fn value(self, user: impl Fn(u32) -> Option<u32>) -> u32 {
        match self {
            Uniform::Constant(c) => c,
            u => u.slot().and_then(user).unwrap_or(0),
        }
    }
}

/// The stream for one run: each entry of `table` resolved against `user`.
pub fn stream(table: &[Uniform], user: impl Fn(u32) -> Option<u32>) -> Vec<u32> {
    table.iter().map(|u| u.value(&user)).collect()
}

impl std::fmt::Display for Uniform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Uniform::Constant(c) => write!(f, "constant {c:#010x}"),
            Uniform::User(s) => write!(f, "uniform {s}"),
            Uniform::TextureP0(u) => write!(f, "texture {u} config p0"),
            Uniform::TextureP1(u) => write!(f, "texture {u} config p1"),
            Uniform::TextureConfigAddress(u) => write!(f, "texture {u} config address"),
            Uniform::Viewport(k) => write!(
                f,
                "viewport {}",
                ["x scale", "y scale", "z scale", "z offset"][*k as usize & 3]
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_resolves_user_words_and_constants() {
        let table = [Uniform::User(3), Uniform::Constant(7), Uniform::User(9)];
        let s = stream(&table, |k| (k == 3).then_some(42));
        assert_eq!(s, vec![42, 7, 0]);
        assert_eq!(Uniform::User(2).to_string(), "uniform 2");
    }
}
