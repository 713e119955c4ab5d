//! What a `texture_sample` samples and how: its mode immediate (`imm1`) decoded.
//!
//! Bits 0–1 choose the level of detail (implicit, bias, explicit level, gradients), bits 4–5 the
//! sampler's dimension (2D, cube, 3D, 1D), bit 6 an arrayed sampler, bit 7 a depth comparison
//! and bits 8–10 its function ([`Compare`], the sampler state a driver compiles in, as Mesa's
//! vc4 shader key does). Mode 0 is a plain 2D sample. The operands follow in that order: the coordinates (two for 2D,
//! three for cube and 3D, one for 1D), the layer when arrayed, the depth reference when
//! comparing, then the bias or level (one operand) or the two gradients (one per coordinate
//! each).

/// How a sample's level of detail is chosen (NIR's `tex`, `txb`, `txl`, `txd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// From the coordinates' derivatives across the quad.
    Implicit,
    /// Implicit plus a bias operand.
    Bias,
    /// An explicit level operand.
    Explicit,
    /// Explicit gradients.
    Gradient,
}

/// A sampler's dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    D2,
    Cube,
    D3,
    D1,
}

impl Dim {
    /// Coordinate operands of a sample of this dimension.
    pub fn coords(self) -> usize {
        match self {
            Dim::D1 => 1,
            Dim::D2 => 2,
            Dim::Cube | Dim::D3 => 3,
        }
    }

    /// The name a refusal or a listing uses.
    pub fn name(self) -> &'static str {
        match self {
            Dim::D1 => "1D",
            Dim::D2 => "2D",
            Dim::Cube => "cube",
            Dim::D3 => "3D",
        }
    }
}

/// A depth comparison's function (`GL_TEXTURE_COMPARE_FUNC`, WebGPU's `GPUCompareFunction`),
/// in OpenGL's order: the sample is 1 where `reference FUNC depth` holds, else 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    Never,
    Less,
    Equal,
    LessEqual,
    Greater,
    NotEqual,
    GreaterEqual,
    Always,
}

impl Compare {
    const ALL: [Compare; 8] = [
        Compare::Never,
        Compare::Less,
        Compare::Equal,
        Compare::LessEqual,
        Compare::Greater,
        Compare::NotEqual,
        Compare::GreaterEqual,
        Compare::Always,
    ];

    /// The comparison as generic IR: `(op, reference first)`, or the constant result of
    /// `never` and `always`. `Fle` is `not(a > b)`, so a NaN reference passes `less_equal`.
    pub fn as_op(self) -> Result<(crate::Opcode, bool), bool> {
        use crate::Opcode::*;
        Ok(match self {
            Compare::Never => return Err(false),
            Compare::Always => return Err(true),
            Compare::Less => (Flt, true),
            Compare::LessEqual => (Fle, true),
            Compare::Greater => (Flt, false),
            Compare::GreaterEqual => (Fle, false),
            Compare::Equal => (Feq, true),
            Compare::NotEqual => (Fne, true),
        })
    }

    /// The name `.kir` comments and messages use.
    pub fn name(self) -> &'static str {
        match self {
            Compare::Never => "never",
            Compare::Less => "less",
            Compare::Equal => "equal",
            Compare::LessEqual => "less_equal",
            Compare::Greater => "greater",
            Compare::NotEqual => "not_equal",
            Compare::GreaterEqual => "greater_equal",
            Compare::Always => "always",
        }
    }
}

/// A `texture_sample`'s mode, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleMode {
    pub level: Level,
    pub dim: Dim,
    pub arrayed: bool,
    /// A depth comparison against a reference operand (a shadow sampler), with its function.
    pub compare: Option<Compare>,
}

const KNOWN_BITS: u32 = 0b111_1111_0011;

impl SampleMode {
    /// A plain sample of `dim` with `level`.
    pub fn new(dim: Dim, level: Level) -> SampleMode {
        SampleMode {
            level,
            dim,
            arrayed: false,
            compare: None,
        }
    }

    /// The mode immediate; [`SampleMode::decode`] reads it back.
    pub fn encode(self) -> u32 {
        let level = match self.level {
            Level::Implicit => 0,
            Level::Bias => 1,
            Level::Explicit => 2,
            Level::Gradient => 3,
        };
        let dim = match self.dim {
            Dim::D2 => 0,
            Dim::Cube => 1,
            Dim::D3 => 2,
            Dim::D1 => 3,
        };
        let compare = self.compare.map_or(0, |c| {
            1 << 7 | (Compare::ALL.iter().position(|&k| k == c).unwrap_or(0) as u32) << 8
        });
        level | dim << 4 | (self.arrayed as u32) << 6 | compare
    }

    /// The mode of immediate `m`, or `None` when it sets bits no mode has.
    pub fn decode(m: u32) -> Option<SampleMode> {
        // A function without a comparison is no mode.
        if m & !KNOWN_BITS != 0 || (m & 1 << 7 == 0 && m >> 8 != 0) {
            return None;
        }
        let level = [
            Level::Implicit,
            Level::Bias,
            Level::Explicit,
            Level::Gradient,
        ][m as usize & 3];
        let dim = [Dim::D2, Dim::Cube, Dim::D3, Dim::D1][(m >> 4) as usize & 3];
        Some(SampleMode {
            level,
            dim,
            arrayed: m & 1 << 6 != 0,
            compare: (m & 1 << 7 != 0).then(|| Compare::ALL[(m >> 8) as usize & 7]),
        })
    }

    /// The mode of `inst`'s immediates (a `texture_sample`), when they decode.
    pub fn of(imms: &[u32]) -> Option<SampleMode> {
        SampleMode::decode(imms.get(1).copied().unwrap_or(0))
    }

    /// The operands a sample of this mode has.
    pub fn operands(self) -> usize {
        let coords = self.dim.coords();
        let lod = match self.level {
            Level::Implicit => 0,
            Level::Bias | Level::Explicit => 1,
            Level::Gradient => 2 * coords,
        };
        coords + self.arrayed as usize + self.compare.is_some() as usize + lod
    }

    /// Whether the level of detail comes from derivatives across the quad (reads other lanes).
    pub fn implicit_derivatives(self) -> bool {
        matches!(self.level, Level::Implicit | Level::Bias)
    }

    /// What kind of sampler this is, for messages: `cube`, `2D array`, `2D shadow`, ….
    pub fn kind(self) -> String {
        let mut s = self.dim.name().to_string();
        if self.arrayed {
            s.push_str(" array");
        }
        if self.compare.is_some() {
            s.push_str(" shadow");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_reads_back_and_unknown_bits_do_not() {
        let mut seen = std::collections::BTreeSet::new();
        for level in [
            Level::Implicit,
            Level::Bias,
            Level::Explicit,
            Level::Gradient,
        ] {
            for dim in [Dim::D2, Dim::Cube, Dim::D3, Dim::D1] {
                for arrayed in [false, true] {
                    for compare in std::iter::once(None).chain(Compare::ALL.map(Some)) {
                        let m = SampleMode {
                            level,
                            dim,
                            arrayed,
                            compare,
                        };
                        assert_eq!(SampleMode::decode(m.encode()), Some(m));
                        assert!(seen.insert(m.encode()), "{m:?} shares its encoding");
                    }
                }
            }
        }
        assert_eq!(seen.len(), 4 * 4 * 2 * 9);
        // Mode 0 stays a plain implicit 2D sample, as text written before modes had kinds.
        assert_eq!(
            SampleMode::decode(0),
            Some(SampleMode::new(Dim::D2, Level::Implicit))
        );
        assert_eq!(SampleMode::decode(1 << 2), None);
        assert_eq!(SampleMode::decode(1 << 8), None);
        assert_eq!(SampleMode::decode(1 << 11 | 1 << 7), None);
    }

    #[test]
    fn operand_counts_follow_the_layout() {
        assert_eq!(SampleMode::new(Dim::D2, Level::Implicit).operands(), 2);
        assert_eq!(SampleMode::new(Dim::Cube, Level::Bias).operands(), 4);
        assert_eq!(SampleMode::new(Dim::D3, Level::Gradient).operands(), 9);
        let shadow_array = SampleMode {
            arrayed: true,
            compare: Some(Compare::Less),
            ..SampleMode::new(Dim::D2, Level::Explicit)
        };
        assert_eq!(shadow_array.operands(), 5);
        assert_eq!(shadow_array.kind(), "2D array shadow");
    }
}
