//! Texture and memory lookup unit (reference guide §"Texture and Memory Lookup Unit";
//! configuration words as Mesa's `vc4_uniforms.c`/`vc4_tiling.c` lay them out): direct memory
//! lookups and 2D texture lookups in T-format or LT-format. The design is in `docs/vc4.md`
//! ("Texture and memory lookups").

use super::memory::Memory;

/// Decoded texture configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TexConfig {
    pub base: u32,
    pub ty: u32,
    pub flip_y: bool,
    pub width: u32,
    pub height: u32,
    pub mag_nearest: bool,
    pub min_nearest: bool,
    pub wrap_s: u32,
    pub wrap_t: u32,
    /// A cube map (`CMMODE`): six faces `cube_stride` bytes apart, chosen by direction.
    pub cube: bool,
    pub cube_stride: u32,
}

/// Parameter 0's cube-map mode bit (`CMMODE`).
pub const P0_CUBE_MAP: u32 = 1 << 9;
/// Parameter 2's type field (bits 31:30) for a cube-map stride (`PTYPE_CUBE_MAP_STRIDE`).
pub const P2_CUBE_MAP_STRIDE: u32 = 1 << 30;
/// Parameter 2's cube-map stride field (`CMST`, bits 29:12: the stride in bytes, 4 KiB units).
pub const P2_STRIDE_MASK: u32 = 0x3fff_f000;

impl TexConfig {
    /// The configuration a request's parameters give: p0, p1, and the cube-map stride of the
    /// first later parameter of type `CUBE_MAP_STRIDE` (the kernel's `vc4_validate.c` looks at
    /// p2 and p3).
    pub fn from_request(params: &[u32]) -> TexConfig {
        let p = |k: usize| params.get(k).copied().unwrap_or(0);
        let mut c = TexConfig::from_params(p(0), p(1));
        c.cube_stride = params
            .iter()
            .skip(2)
            .find(|&&w| w >> 30 == P2_CUBE_MAP_STRIDE >> 30)
            .map_or(0, |w| w & P2_STRIDE_MASK);
        c
    }

    pub fn from_params(p0: u32, p1: u32) -> TexConfig {
        let dim = |v: u32| if v == 0 { 2048 } else { v };
        TexConfig {
            base: p0 & 0xffff_f000,
            ty: ((p0 >> 4) & 15) | ((p1 >> 31) << 4),
            flip_y: p0 & (1 << 8) != 0,
            width: dim((p1 >> 8) & 2047),
            height: dim((p1 >> 20) & 2047),
            mag_nearest: p1 & (1 << 7) != 0,
            min_nearest: (p1 >> 4) & 7 == 1,
            wrap_s: p1 & 3,
            wrap_t: (p1 >> 2) & 3,
            cube: p0 & P0_CUBE_MAP != 0,
            cube_stride: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TmuError {
    Memory(u32),
    UnsupportedFormat(u32),
}

/// Byte offset of texel (x, y) of a 32-bpp image in T- or LT-format (Mesa `vc4_tiling.c`).
pub fn texel_offset(width: u32, height: u32, x: u32, y: u32) -> u32 {
    let in_utile = (y % 4) * 16 + (x % 4) * 4;
    let (ux, uy) = (x / 4, y / 4);
    if width <= 16 || height <= 16 {
        // LT: utiles in raster order
        let utile_stride = width.div_ceil(4);
        return (uy * utile_stride + ux) * 64 + in_utile;
    }
    let utile_stride = width.div_ceil(32) * 8;
    let tile_stride = utile_stride / 8;
    let (mut tx, ty) = (ux / 8, uy / 8);
    let odd = ty & 1 == 1;
    if odd {
        tx = tile_stride - tx - 1;
    }
    let tile = 4096 * (ty * tile_stride + tx);
    let sidx = (((uy >> 2) & 1) << 1) | ((ux >> 2) & 1);
    let map = if odd { [2, 1, 3, 0] } else { [0, 3, 1, 2] };
    let stile = 1024 * map[sidx as usize];
    let utile = ((uy % 4) * 4 + (ux % 4)) * 64;
    tile + stile + utile + in_utile
}

fn wrap(i: i64, n: u32, mode: u32) -> Option<u32> {
    let n = n as i64;
    match mode {
        0 => Some(i.rem_euclid(n) as u32),
        2 => {
            let p = i.rem_euclid(2 * n);
            Some(if p < n { p } else { 2 * n - 1 - p } as u32)
        }
        3 if i < 0 || i >= n => None,
        _ => Some(i.clamp(0, n - 1) as u32),
    }
}

fn fetch(mem: &Memory, c: &TexConfig, x: i64, y: i64) -> Result<u32, TmuError> {
    let (Some(x), Some(y)) = (wrap(x, c.width, c.wrap_s), wrap(y, c.height, c.wrap_t)) else {
        return Ok(0); // border colour: transparent black
    };
    let y = if c.flip_y { c.height - 1 - y } else { y };
    let a = c.base.wrapping_add(texel_offset(c.width, c.height, x, y));
    let v = mem.read_u32(a).ok_or(TmuError::Memory(a))?;
    Ok(if c.ty == 1 { v | 0xff00_0000 } else { v })
}

/// The cube face (+X, −X, +Y, −Y, +Z, −Z = 0–5) and face coordinates of direction (x, y, z):
/// the largest magnitude is the major axis `ma` (x, then y, then z among equals), the face
/// coordinates `(sc / |ma| + 1) / 2` and `(tc / |ma| + 1) / 2` with OpenGL's `sc`, `tc` per face
/// (table 8.19). Denormal components are flushed first, as every QPU float input is.
pub fn cube_face(x: f32, y: f32, z: f32) -> (u32, f32, f32) {
    let flush = |c: f32| if c.is_subnormal() { 0.0 } else { c };
    let v = [flush(x), flush(y), flush(z)];
    let m = v.map(f32::abs);
    let axis = if m[0] >= m[1] && m[0] >= m[2] {
        0
    } else if m[1] >= m[2] {
        1
    } else {
        2
    };
    let negative = v[axis] < 0.0 || v[axis].is_nan();
    // (sc, tc) for the positive and the negative face of each axis.
    let (sc, tc) = match (axis, negative) {
        (0, false) => (-v[2], -v[1]),
        (0, true) => (v[2], -v[1]),
        (1, false) => (v[0], v[2]),
        (1, true) => (v[0], -v[2]),
        (_, false) => (v[0], -v[1]),
        (_, true) => (-v[0], -v[1]),
    };
    let ma = m[axis];
    let face = 2 * axis as u32 + negative as u32;
    (face, (sc / ma + 1.0) * 0.5, (tc / ma + 1.0) * 0.5)
}

/// Samples a cube map in direction (s, t, r): the face [`cube_face`] chooses, sampled as a 2D
/// image at its face coordinates.
pub fn sample_cube(mem: &Memory, c: &TexConfig, s: f32, t: f32, r: f32) -> Result<u32, TmuError> {
    let (face, fs, ft) = cube_face(s, t, r);
    let face_config = TexConfig {
        base: c.base.wrapping_add(face * c.cube_stride),
        ..*c
    };
    sample(mem, &face_config, fs, ft)
}

/// Samples a 2D texture at normalised coordinates (s, t).
pub fn sample(mem: &Memory, c: &TexConfig, s: f32, t: f32) -> Result<u32, TmuError> {
    if c.ty > 1 {
        return Err(TmuError::UnsupportedFormat(c.ty));
    }
    let u = s as f64 * c.width as f64;
    let v = t as f64 * c.height as f64;
    // magnification when a texel covers at least a pixel; one lookup per lane cannot see the
    // derivatives, so the magnification filter is used.
    let nearest = c.mag_nearest;
    if nearest || !u.is_finite() || !v.is_finite() {
        let (x, y) = (u.floor() as i64, v.floor() as i64);
        return fetch(mem, c, x, y);
    }
    let (u, v) = (u - 0.5, v - 0.5);
    let (x0, y0) = (u.floor() as i64, v.floor() as i64);
    let (fx, fy) = (u - x0 as f64, v - y0 as f64);
    let t00 = fetch(mem, c, x0, y0)?;
    // Coordinates far outside the texture saturate (they wrap or clamp in `fetch` all the same).
    let (x1, y1) = (x0.saturating_add(1), y0.saturating_add(1));
    let t10 = fetch(mem, c, x1, y0)?;
    let t01 = fetch(mem, c, x0, y1)?;
    let t11 = fetch(mem, c, x1, y1)?;
    let mut out = 0;
    for k in 0..4 {
        let b = |t: u32| ((t >> (8 * k)) & 255) as f64;
        let top = b(t00) * (1.0 - fx) + b(t10) * fx;
        let bot = b(t01) * (1.0 - fx) + b(t11) * fx;
        let val = (top * (1.0 - fy) + bot * fy).round().clamp(0.0, 255.0) as u32;
        out |= val << (8 * k);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(mem: &mut Memory, base: u32, w: u32, h: u32, f: impl Fn(u32, u32) -> u32) {
        for y in 0..h {
            for x in 0..w {
                mem.write_u32(base + texel_offset(w, h, x, y), f(x, y))
                    .unwrap();
            }
        }
    }

    #[test]
    fn t_format_layout_is_a_bijection() {
        let (w, h) = (64, 64);
        let mut seen = vec![false; (w * h) as usize];
        for y in 0..h {
            for x in 0..w {
                let o = texel_offset(w, h, x, y);
                assert_eq!(o % 4, 0);
                assert!(!seen[(o / 4) as usize]);
                seen[(o / 4) as usize] = true;
            }
        }
        // first tile row: subtile order (0,0), (0,1), (1,1), (1,0)
        assert_eq!(texel_offset(w, h, 0, 16), 1024);
        assert_eq!(texel_offset(w, h, 16, 16), 2048);
        assert_eq!(texel_offset(w, h, 16, 0), 3072);
        // second tile row goes right to left
        assert_eq!(texel_offset(w, h, 32, 32), 4096 * 2 + 1024 * 2);
    }

    #[test]
    fn nearest_repeat_and_clamp() {
        let mut mem = Memory::new(0x10000);
        store(&mut mem, 0x1000, 4, 4, |x, y| x + 10 * y);
        // width 4, height 4, nearest (magfilt 1, minfilt 1), repeat
        let p1 = (4 << 20) | (4 << 8) | (1 << 7) | (1 << 4);
        let c = TexConfig::from_params(0x1000, p1);
        assert_eq!(sample(&mem, &c, 0.3, 0.6).unwrap(), 1 + 20);
        assert_eq!(sample(&mem, &c, 1.3, 0.1).unwrap(), 1);
        let clamp = TexConfig::from_params(0x1000, p1 | 1 | 4);
        assert_eq!(sample(&mem, &clamp, 1.3, 2.0).unwrap(), 3 + 30);
    }

    #[test]
    fn cube_maps_read_the_face_of_the_major_axis() {
        let mut mem = Memory::new(0x20000);
        let stride = 0x1000;
        for f in 0..6 {
            store(&mut mem, 0x1000 + f * stride, 4, 4, |x, y| {
                100 * f + x + 10 * y
            });
        }
        // nearest, clamp; P0 with CMMODE, P2 with the stride
        let p1 = (4 << 20) | (4 << 8) | (1 << 7) | (1 << 4) | 1 | 4;
        let c = TexConfig::from_request(&[0x1000 | P0_CUBE_MAP, p1, P2_CUBE_MAP_STRIDE | stride]);
        assert!(c.cube);
        assert_eq!(c.cube_stride, stride);
        // +X at its centre; −Y near s = 1 (column 3) and t = 0.5; −Z with its s mirrored.
        assert_eq!(sample_cube(&mem, &c, 1.0, 0.0, 0.0).unwrap(), 2 + 20);
        assert_eq!(
            sample_cube(&mem, &c, 0.99, -1.0, 0.0).unwrap(),
            300 + 3 + 20
        );
        assert_eq!(sample_cube(&mem, &c, 0.9, 0.0, -1.0).unwrap(), 500 + 20);
        // An edge clamps: +Y at z = 1 is t = 1, the last row.
        assert_eq!(sample_cube(&mem, &c, 0.0, 1.0, 1.0).unwrap(), 200 + 2 + 30);
        // Without a parameter of type CUBE_MAP_STRIDE the stride is 0: every face is face 0.
        let no_stride = TexConfig::from_request(&[0x1000 | P0_CUBE_MAP, p1, 0]);
        assert_eq!(
            sample_cube(&mem, &no_stride, 0.0, 0.0, -1.0).unwrap(),
            2 + 20
        );
    }

    #[test]
    fn bilinear_interpolates_bytes() {
        let mut mem = Memory::new(0x10000);
        store(
            &mut mem,
            0x1000,
            2,
            2,
            |x, _| if x == 0 { 0 } else { 0xc8c8_c8c8 },
        );
        let p1 = (2 << 20) | (2 << 8) | 1 | 4; // linear, clamp
        let c = TexConfig::from_params(0x1000, p1);
        assert_eq!(sample(&mem, &c, 0.5, 0.5).unwrap(), 0x6464_6464);
        assert_eq!(sample(&mem, &c, 0.0, 0.5).unwrap(), 0);
    }
}
