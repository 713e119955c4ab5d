//! Byte-addressed little-endian memory shared by all QPUs (bus addresses as seen by the QPU).

/// Flat byte-addressed memory starting at address 0.
#[derive(Clone, Debug)]
pub struct Memory {
    bytes: Vec<u8>,
}

impl Memory {
    /// Zeroed memory of `size` bytes.
    pub fn new(size: usize) -> Memory {
        Memory {
            bytes: vec![0; size],
        }
    }
    pub fn size(&self) -> usize {
        self.bytes.len()
    }
    /// Reads a 32-bit word; `None` when out of range.
    pub fn read_u32(&self, addr: u32) -> Option<u32> {
        let a = addr as usize;
        let b = self.bytes.get(a..a.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// Writes a 32-bit word; `None` when out of range.
    pub fn write_u32(&mut self, addr: u32, v: u32) -> Option<()> {
        let a = addr as usize;
        let b = self.bytes.get_mut(a..a.checked_add(4)?)?;
        b.copy_from_slice(&v.to_le_bytes());
        Some(())
    }
    pub fn read_u8(&self, addr: u32) -> Option<u8> {
        self.bytes.get(addr as usize).copied()
    }
    /// Writes consecutive words starting at `addr`.
    pub fn write_words(&mut self, addr: u32, words: &[u32]) -> Option<()> {
        for (i, w) in words.iter().enumerate() {
            self.write_u32(addr.checked_add(4 * i as u32)?, *w)?;
        }
        Some(())
    }
    /// Reads `n` consecutive words starting at `addr`.
    pub fn read_words(&self, addr: u32, n: usize) -> Option<Vec<u32>> {
        (0..n)
            .map(|i| self.read_u32(addr.checked_add(4 * i as u32)?))
            .collect()
    }
    /// Writes 64-bit instruction words (low half first) starting at `addr`.
    pub fn write_code(&mut self, addr: u32, code: &[u64]) -> Option<()> {
        for (i, w) in code.iter().enumerate() {
            let a = addr.checked_add(8 * i as u32)?;
            self.write_u32(a, *w as u32)?;
            self.write_u32(a + 4, (*w >> 32) as u32)?;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn little_endian_and_bounds() {
        let mut m = Memory::new(16);
        m.write_u32(4, 0x0403_0201).unwrap();
        assert_eq!(m.read_u8(4), Some(1));
        assert_eq!(m.read_u8(7), Some(4));
        assert_eq!(m.read_u32(13), None);
        assert!(m.write_u32(u32::MAX, 0).is_none());
    }
}
