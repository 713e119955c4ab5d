//! Test textures: RGBA8 images sampled with nearest filtering and repeat wrapping.

/// An RGBA8 image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Texture {
    pub width: u32,
    pub height: u32,
    /// Row-major texels, `[r, g, b, a]`.
    pub texels: Vec<[u8; 4]>,
}

impl Texture {
    /// The procedural texture of unit `unit`: a 16×16 hash pattern, the same on every machine.
    pub fn procedural(unit: u32) -> Texture {
        let (width, height) = (16, 16);
        let texels = (0..width * height)
            .map(|i| {
                let mut h = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    ^ (unit as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                h ^= h >> 29;
                h.to_le_bytes()[..4].try_into().expect("4 bytes")
            })
            .collect();
        Texture {
            width,
            height,
            texels,
        }
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
        let wrap = |c: f32, n: u32| -> u32 {
            if !c.is_finite() {
                return 0;
            }
            let x = (c - c.floor()) * n as f32;
            (x as u32).min(n - 1)
        };
        let (x, y) = (wrap(s, self.width), wrap(t, self.height));
        let texel = self.texels[(y * self.width + x) as usize];
        texel.map(|c| (c as f32 / 255.0).to_bits())
    }
}
