//! Vertex pipe memory: generic block reads and writes, VDR (DMA load) and VDW (DMA store)
//! (reference guide §"VPM and VCD", Tables 32–37).
//!
//! The VPM is modelled as 256 rows of 16 32-bit words shared by all QPUs; each QPU has its
//! own read/write setup registers. DMA transfers complete immediately (no stall modelled).

use super::memory::Memory;

pub const VPM_ROWS: usize = 256;

/// The shared VPM storage.
#[derive(Clone, Debug)]
pub struct Vpm {
    pub data: Vec<u32>,
}

impl Default for Vpm {
    fn default() -> Self {
        Vpm {
            data: vec![0; VPM_ROWS * 16],
        }
    }
}

/// A generic block access setup (read: Table 34, write: Table 33).
#[derive(Clone, Copy, Debug, Default)]
pub struct Generic {
    pub num: u32,
    pub stride: u32,
    pub horizontal: bool,
    pub laned: bool,
    pub size: u32,
    pub addr: u32,
}

impl Generic {
    pub fn from_setup(v: u32) -> Generic {
        Generic {
            num: (v >> 20) & 15,
            stride: (v >> 12) & 63,
            horizontal: v & (1 << 11) != 0,
            laned: v & (1 << 10) != 0,
            size: (v >> 8) & 3,
            addr: v & 255,
        }
    }
}

/// One QPU's VPM/VCD setup registers.
#[derive(Clone, Debug, Default)]
pub struct VpmPort {
    pub read: Generic,
    pub write: Generic,
    /// Last VDR setup word (DMA load).
    pub vdr: u32,
    /// VDR extended memory pitch (0 = not set).
    pub vdr_pitch: u32,
    /// Last VDW setup word (DMA store).
    pub vdw: u32,
    /// VDW stride (bytes added after each row), from the VDW stride setup.
    pub vdw_stride: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VpmError {
    /// DMA touched memory outside the simulated space.
    Memory(u32),
}

/// Word index inside the VPM of lane `lane` of a generic access, and the sub-word part
/// (shift, mask) for 8/16-bit sizes.
fn locate(g: &Generic, lane: usize) -> (usize, u32, u32) {
    let a = g.addr as usize;
    match g.size {
        // 8-bit: ADDR[7:2] = Y, ADDR[1:0] = byte
        0 => {
            let (y, b) = (a >> 2, (a & 3) as u32);
            if g.horizontal {
                ((y * 16 + lane) % (VPM_ROWS * 16), 8 * b, 0xff)
            } else {
                (
                    (((y & !15) + lane) * 16 + (y & 15)) % (VPM_ROWS * 16),
                    8 * b,
                    0xff,
                )
            }
        }
        // 16-bit: ADDR[7:1] = Y, ADDR[0] = half
        1 => {
            let (y, h) = (a >> 1, (a & 1) as u32);
            if g.horizontal {
                ((y * 16 + lane) % (VPM_ROWS * 16), 16 * h, 0xffff)
            } else {
                (
                    (((y & !15) + lane) * 16 + (y & 15)) % (VPM_ROWS * 16),
                    16 * h,
                    0xffff,
                )
            }
        }
        // 32-bit: horizontal ADDR = Y; vertical ADDR[7:4] = Y block, ADDR[3:0] = X
        _ => {
            if g.horizontal {
                ((a * 16 + lane) % (VPM_ROWS * 16), 0, u32::MAX)
            } else {
                (
                    (((a & !15) + lane) * 16 + (a & 15)) % (VPM_ROWS * 16),
                    0,
                    u32::MAX,
                )
            }
        }
    }
}

impl Vpm {
    /// Generic block read of one 16-lane vector; advances the address by the stride.
    pub fn read(&self, port: &mut VpmPort) -> [u32; 16] {
        let g = port.read;
        let mut out = [0u32; 16];
        for (lane, o) in out.iter_mut().enumerate() {
            let (idx, shift, mask) = locate(&g, lane);
            // 8/16-bit reads return the zero-extended field
            *o = (self.data[idx] >> shift) & mask;
        }
        port.read.addr = (g.addr + g.stride) & 255;
        out
    }

    /// Generic block write of one vector (lanes with `mask` bit set); advances the address.
    pub fn write(&mut self, port: &mut VpmPort, values: &[u32; 16], lanes: u16) {
        let g = port.write;
        for (lane, v) in values.iter().enumerate() {
            if lanes & (1 << lane) == 0 {
                continue;
            }
            let (idx, shift, mask) = locate(&g, lane);
            let old = self.data[idx];
            self.data[idx] = (old & !(mask << shift)) | ((v & mask) << shift);
        }
        port.write.addr = (g.addr + g.stride) & 255;
    }

    /// VDR DMA load (Table 36) from `addr` using the port's VDR setup (32-bit words; 8/16-bit
    /// widths load whole words into the addressed rows).
    pub fn dma_load(&mut self, port: &VpmPort, mem: &Memory, addr: u32) -> Result<(), VpmError> {
        let s = port.vdr;
        let mpitch = (s >> 24) & 15;
        let rowlen = match (s >> 20) & 15 {
            0 => 16,
            n => n,
        };
        let nrows = match (s >> 16) & 15 {
            0 => 16,
            n => n,
        };
        let vpitch = match (s >> 12) & 15 {
            0 => 16,
            n => n,
        };
        let vert = s & (1 << 11) != 0;
        let y0 = ((s >> 4) & 127) as usize;
        let x0 = (s & 15) as usize;
        let pitch = if mpitch == 0 {
            port.vdr_pitch
        } else {
            8 << mpitch
        };
        for r in 0..nrows as usize {
            for w in 0..rowlen as usize {
                let a = addr
                    .wrapping_add(pitch.wrapping_mul(r as u32))
                    .wrapping_add(4 * w as u32);
                let v = mem.read_u32(a).ok_or(VpmError::Memory(a))?;
                let (y, x) = if vert {
                    (y0 + w, x0 + r * vpitch as usize)
                } else {
                    (y0 + r * vpitch as usize, x0 + w)
                };
                let idx = ((y + x / 16) * 16 + x % 16) % (VPM_ROWS * 16);
                self.data[idx] = v;
            }
        }
        Ok(())
    }

    /// VDW DMA store (Table 35) to `addr` using the port's VDW setup (32-bit mode).
    pub fn dma_store(&self, port: &VpmPort, mem: &mut Memory, addr: u32) -> Result<(), VpmError> {
        let s = port.vdw;
        let units = match (s >> 23) & 127 {
            0 => 128,
            n => n,
        };
        let depth = match (s >> 16) & 127 {
            0 => 128,
            n => n,
        };
        let horiz = s & (1 << 14) != 0;
        let y0 = ((s >> 7) & 127) as usize;
        let x0 = ((s >> 3) & 15) as usize;
        let mut a = addr;
        for u in 0..units as usize {
            for d in 0..depth as usize {
                let (y, x) = if horiz {
                    (y0 + u, x0 + d)
                } else {
                    (y0 + d, x0 + u)
                };
                let idx = ((y + x / 16) * 16 + x % 16) % (VPM_ROWS * 16);
                mem.write_u32(a, self.data[idx])
                    .ok_or(VpmError::Memory(a))?;
                a = a.wrapping_add(4);
            }
            a = a.wrapping_add(port.vdw_stride);
        }
        Ok(())
    }
}

/// Handles a write to vr_setup (A-side waddr 49): generic read setup, VDR setup or VDR
/// extended pitch.
pub fn write_read_setup(port: &mut VpmPort, v: u32) {
    if v >> 28 == 9 {
        port.vdr_pitch = v & 0x1fff;
    } else if v & 0x8000_0000 != 0 {
        port.vdr = v;
    } else {
        port.read = Generic::from_setup(v);
    }
}

/// Handles a write to vw_setup (B-side waddr 49): generic write setup, VDW setup or VDW stride.
pub fn write_write_setup(port: &mut VpmPort, v: u32) {
    match v >> 30 {
        0 | 1 => port.write = Generic::from_setup(v),
        2 => port.vdw = v,
        _ => port.vdw_stride = v & 0x1fff,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_horizontal_rows_with_stride() {
        let mut vpm = Vpm::default();
        let mut p = VpmPort::default();
        write_write_setup(&mut p, 0x1a00 | 5); // stride 1, horizontal, 32-bit, row 5
        vpm.write(&mut p, &[7; 16], 0xffff);
        vpm.write(&mut p, &[8; 16], 0x0001);
        assert_eq!(vpm.data[5 * 16 + 3], 7);
        assert_eq!(vpm.data[6 * 16], 8);
        assert_eq!(vpm.data[6 * 16 + 1], 0);
        write_read_setup(&mut p, 0x0020_1a00 | 5);
        assert_eq!(vpm.read(&mut p), [7; 16]);
        assert_eq!(vpm.read(&mut p)[0], 8);
    }

    #[test]
    fn dma_round_trip() {
        let mut mem = Memory::new(0x2000);
        let words: Vec<u32> = (0..32).collect();
        mem.write_words(0x1000, &words).unwrap();
        let mut vpm = Vpm::default();
        let mut p = VpmPort::default();
        write_read_setup(&mut p, 0x8302_1000); // 2 rows, pitch 64, VPM row 0
        vpm.dma_load(&p, &mem, 0x1000).unwrap();
        assert_eq!(vpm.data[16 + 2], 18);
        write_write_setup(&mut p, 0x8000_0000 | (2 << 23) | (16 << 16) | (1 << 14));
        vpm.dma_store(&p, &mut mem, 0x0).unwrap();
        assert_eq!(mem.read_words(0, 32).unwrap(), words);
    }
}
