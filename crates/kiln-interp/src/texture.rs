//! Test textures: RGBA8 images sampled with nearest filtering — 2D images with repeat wrapping,
//! cube maps (six square faces) with the face chosen by the major axis and edges clamped, and
//! depth comparisons reading a 24-bit depth from the texel's upper bytes.

use kiln_ir::sample::Compare;

/// An RGBA8 image: one face, or the six faces of a cube map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Texture {
    pub width: u32,
    pub height: u32,
    /// 1, or 6 for a cube map: faces +X, −X, +Y, −Y, +Z, −Z.
    pub faces: u32,
    /// Row-major texels, `[r, g, b, a]`, face after face.
    pub texels: Vec<[u8; 4]>,
}

/// The face and face coordinates a cube-map direction selects (OpenGL 4.6 §8.13, table 8.19):
/// the major axis is the largest magnitude (x before y before z among equals), and
/// `s = (sc / |ma| + 1) / 2`, `t = (tc / |ma| + 1) / 2`. A NaN component fails every
/// comparison (the face is what they fall to) and gives NaN coordinates, as does (0, 0, 0).
pub fn cube_face(x: f32, y: f32, z: f32) -> (u32, f32, f32) {
    let (ax, ay, az) = (x.abs(), y.abs(), z.abs());
    let (face, sc, tc, ma) = if ax >= ay && ax >= az {
        if x >= 0.0 {
            (0, -z, -y, ax)
        } else {
            (1, z, -y, ax)
        }
    } else if ay >= az {
        if y >= 0.0 {
            (2, x, z, ay)
        } else {
            (3, x, -z, ay)
        }
    } else if z >= 0.0 {
        (4, x, -y, az)
    } else {
        (5, -x, -y, az)
    };
    (face, (sc / ma + 1.0) * 0.5, (tc / ma + 1.0) * 0.5)
}

/// The depth a texel of a depth texture holds: a 24-bit depth in its upper three bytes (the
/// X8Z24 word Mesa's vc4 reads, `ntq_scale_depth_texture`), `(word >> 8) · (1 / 0xffffff)`.
pub fn depth(texel: [u8; 4]) -> f32 {
    let z = u32::from_le_bytes(texel) >> 8;
    z as f32 * (1.0 / 16_777_215.0f32)
}

/// A depth comparison's result, 1.0 or 0.0: `reference`, clamped to [0, 1] as for a
/// fixed-point depth texture (`GL_ARB_shadow`), against `depth` with `func`, computed with the
/// generic ops' meaning (`kiln_ir::semantics`) as the code that lowers it does.
pub fn shadow(func: Compare, reference: f32, depth: f32) -> f32 {
    use kiln_ir::semantics::eval_scalar;
    let pass = match func.as_op() {
        Err(constant) => constant,
        Ok((op, reference_first)) => {
            let f = |op, a: f32, b: f32| eval_scalar(op, &[a.to_bits(), b.to_bits()]);
            let clamped = f(kiln_ir::Opcode::Fmax, reference, 0.0)
                .and_then(|r| f(kiln_ir::Opcode::Fmin, f32::from_bits(r), 1.0))
                .map_or(f32::NAN, f32::from_bits);
            let (a, b) = if reference_first {
                (clamped, depth)
            } else {
                (depth, clamped)
            };
            f(op, a, b).is_some_and(|c| c != 0)
        }
    };
    if pass { 1.0 } else { 0.0 }
}

/// Texel index on an axis of `n` texels for a cube face coordinate: nearest, clamped to the
/// edge; a NaN coordinate reads texel 0.
pub fn clamped_texel(c: f32, n: u32) -> u32 {
    let x = (c as f64 * n as f64).floor();
    if x.is_nan() {
        0
    } else {
        x.clamp(0.0, (n - 1) as f64) as u32
    }
}

impl Texture {
    /// The procedural texture of unit `unit`: a 16×16 hash pattern, the same on every machine.
    pub fn procedural(unit: u32) -> Texture {
        Texture {
            width: 16,
            height: 16,
            faces: 1,
            texels: hash_texels(unit, 0, 256),
        }
    }

    /// The procedural cube map of unit `unit`: six 16×16 hash patterns, face 0 the
    /// [`Texture::procedural`] image.
    pub fn procedural_cube(unit: u32) -> Texture {
        Texture {
            width: 16,
            height: 16,
            faces: 6,
            texels: (0..6).flat_map(|f| hash_texels(unit, f, 256)).collect(),
        }
    }

    /// A cube map of six square faces of one size, in the order +X, −X, +Y, −Y, +Z, −Z.
    pub fn cube(faces: [Texture; 6]) -> Result<Texture, String> {
        let (w, h) = (faces[0].width, faces[0].height);
        if w != h {
            return Err(format!("a cube map's faces must be square, not {w}×{h}"));
        }
        for (k, f) in faces.iter().enumerate() {
            if (f.width, f.height, f.faces) != (w, h, 1) {
                return Err(format!(
                    "cube face {k} is {}×{}, face 0 is {w}×{h}",
                    f.width, f.height
                ));
            }
        }
        Ok(Texture {
            width: w,
            height: h,
            faces: 6,
            texels: faces.into_iter().flat_map(|f| f.texels).collect(),
        })
    }

    /// The texels of face `f`.
    pub fn face(&self, f: u32) -> &[[u8; 4]] {
        let n = (self.width * self.height) as usize;
        &self.texels[f as usize * n..(f as usize + 1) * n]
    }

    /// Texel (x, y) as normalized RGBA float bits; coordinates wrap (repeat), as the sampled
    /// path does.
    pub fn fetch(&self, x: i32, y: i32) -> [u32; 4] {
        let (w, h) = (self.width as i32, self.height as i32);
        let texel = self.texels[(y.rem_euclid(h) * w + x.rem_euclid(w)) as usize];
        texel.map(|c| (c as f32 / 255.0).to_bits())
    }

    /// Samples at normalized coordinates `(s, t)`: nearest texel, coordinates wrapped (repeat);
    /// returns normalized RGBA as f32 bits. Non-finite coordinates read texel (0, 0).
    pub fn sample(&self, s: f32, t: f32) -> [u32; 4] {
        self.texel_at(s, t).map(|c| (c as f32 / 255.0).to_bits())
    }

    /// The texel [`Texture::sample`] reads at `(s, t)`.
    pub fn texel_at(&self, s: f32, t: f32) -> [u8; 4] {
        let wrap = |c: f32, n: u32| -> u32 {
            if !c.is_finite() {
                return 0;
            }
            let x = (c - c.floor()) * n as f32;
            (x as u32).min(n - 1)
        };
        let (x, y) = (wrap(s, self.width), wrap(t, self.height));
        self.texels[(y * self.width + x) as usize]
    }

    /// The texel [`Texture::sample_cube`] reads in direction (x, y, z).
    pub fn texel_cube(&self, x: f32, y: f32, z: f32) -> [u8; 4] {
        let (f, s, t) = cube_face(x, y, z);
        let (i, j) = (clamped_texel(s, self.width), clamped_texel(t, self.height));
        self.face(f)[(j * self.width + i) as usize]
    }

    /// Samples the cube map in direction (x, y, z): the face [`cube_face`] selects, its nearest
    /// texel with the coordinates clamped to the edge; normalized RGBA as f32 bits.
    pub fn sample_cube(&self, x: f32, y: f32, z: f32) -> [u32; 4] {
        self.texel_cube(x, y, z)
            .map(|c| (c as f32 / 255.0).to_bits())
    }
}

/// `n` texels of a hash pattern for `unit` and `face` (face 0 is the 2D pattern).
fn hash_texels(unit: u32, face: u32, n: u32) -> Vec<[u8; 4]> {
    (0..n)
        .map(|i| {
            let mut h = (i as u64 + 1 + ((face as u64) << 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                ^ (unit as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            h ^= h >> 29;
            h.to_le_bytes()[..4].try_into().expect("4 bytes")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each face's centre, corners and edges against OpenGL's table 8.19 written out by hand:
    /// +X looks at (1, −t·2+1, −s·2+1), −X at (−1, −t·2+1, s·2−1), +Y at (s·2−1, 1, t·2−1),
    /// −Y at (s·2−1, −1, −t·2+1), +Z at (s·2−1, −t·2+1, 1), −Z at (−s·2+1, −t·2+1, −1).
    #[test]
    fn faces_follow_the_gl_table() {
        let dir = |f: u32, s: f32, t: f32| -> (f32, f32, f32) {
            let (u, v) = (2.0 * s - 1.0, 2.0 * t - 1.0);
            match f {
                0 => (1.0, -v, -u),
                1 => (-1.0, -v, u),
                2 => (u, 1.0, v),
                3 => (u, -1.0, -v),
                4 => (u, -v, 1.0),
                _ => (-u, -v, -1.0),
            }
        };
        for f in 0..6 {
            for (s, t) in [(0.5, 0.5), (0.25, 0.75), (0.9, 0.1), (0.1, 0.3)] {
                let (x, y, z) = dir(f, s, t);
                for scale in [1.0, 3.5, 0.01] {
                    let (g, s2, t2) = cube_face(x * scale, y * scale, z * scale);
                    assert_eq!(g, f, "direction ({x}, {y}, {z})");
                    assert!((s2 - s).abs() < 1e-6 && (t2 - t).abs() < 1e-6, "face {f}");
                }
            }
        }
        // Equal magnitudes: x, then y.
        assert_eq!(cube_face(1.0, 1.0, 1.0).0, 0);
        assert_eq!(cube_face(0.0, -2.0, 2.0).0, 3);
    }

    #[test]
    fn cube_samples_read_the_selected_face_clamped() {
        let tex = Texture::procedural_cube(3);
        assert_eq!(tex.face(0), Texture::procedural(3).texels.as_slice());
        for f in 1..6 {
            assert_ne!(tex.face(f), tex.face(0));
        }
        let texel = |f: u32, x: u32, y: u32| {
            tex.face(f)[(y * 16 + x) as usize].map(|c| (c as f32 / 255.0).to_bits())
        };
        // −Y's centre, and its edges: s = 1 clamps to the last column rather than wrapping.
        assert_eq!(tex.sample_cube(0.0, -5.0, 0.0), texel(3, 8, 8));
        assert_eq!(tex.sample_cube(1.0, -1.0, 0.0), texel(0, 8, 15));
        assert_eq!(tex.sample_cube(0.999, -1.0, 0.0), texel(3, 15, 8));
        assert_eq!(tex.sample_cube(f32::NAN, 0.0, 0.0), texel(2, 0, 0));
        assert_eq!(tex.sample_cube(0.0, 0.0, 0.0), texel(0, 0, 0));
        assert!(Texture::cube(std::array::from_fn(|_| Texture::procedural(0))).is_ok());
        let mut faces: [Texture; 6] = std::array::from_fn(|_| Texture::procedural(0));
        faces[4].width = 8;
        assert!(Texture::cube(faces).is_err());
    }
}
