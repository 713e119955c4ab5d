//! Tile buffer written through the TLB (reference guide §"Tile Buffer"): 64×64 pixels of
//! colour and Z. Lanes map to pixels as the fragment front end issues them: four 2×2 quads
//! side by side, lane i at (x0 + 2·(i / 4) + (i & 1), y0 + ((i >> 1) & 1)).

pub const TILE: usize = 64;

#[derive(Clone, Debug)]
pub struct TileBuffer {
    pub color: Vec<u32>,
    pub z: Vec<u32>,
    /// Last value written to the stencil setup address.
    pub stencil_setup: Option<u32>,
}

impl Default for TileBuffer {
    fn default() -> Self {
        TileBuffer {
            color: vec![0; TILE * TILE],
            z: vec![0; TILE * TILE],
            stencil_setup: None,
        }
    }
}

/// Pixel coordinates of a lane for a fragment batch at (x0, y0).
pub fn lane_xy(x0: u32, y0: u32, lane: usize) -> (u32, u32) {
    let l = lane as u32;
    (x0 + 2 * (l / 4) + (l & 1), y0 + ((l >> 1) & 1))
}

impl TileBuffer {
    fn index(x: u32, y: u32) -> usize {
        (y as usize % TILE) * TILE + (x as usize % TILE)
    }
    pub fn write_color(&mut self, x0: u32, y0: u32, v: &[u32; 16], lanes: u16) {
        for (i, val) in v.iter().enumerate() {
            if lanes & (1 << i) != 0 {
                let (x, y) = lane_xy(x0, y0, i);
                self.color[Self::index(x, y)] = *val;
            }
        }
    }
    pub fn write_z(&mut self, x0: u32, y0: u32, v: &[u32; 16], lanes: u16) {
        for (i, val) in v.iter().enumerate() {
            if lanes & (1 << i) != 0 {
                let (x, y) = lane_xy(x0, y0, i);
                self.z[Self::index(x, y)] = *val;
            }
        }
    }
    pub fn color_at(&self, x: u32, y: u32) -> u32 {
        self.color[Self::index(x, y)]
    }
    pub fn z_at(&self, x: u32, y: u32) -> u32 {
        self.z[Self::index(x, y)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn lanes_cover_an_8x2_block() {
        let mut seen = std::collections::HashSet::new();
        for l in 0..16 {
            let (x, y) = lane_xy(0, 0, l);
            assert!(x < 8 && y < 2);
            assert!(seen.insert((x, y)));
        }
        assert_eq!(lane_xy(0, 0, 3), (1, 1));
        assert_eq!(lane_xy(0, 0, 4), (2, 0));
    }
}
