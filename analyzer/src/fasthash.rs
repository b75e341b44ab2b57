//! A fast, non-keyed hasher for maps whose keys no attacker picks: handles and dispatch keys
//! (values the driver and loader choose), and plan keys (call-site hashes the layer computed
//! itself, sizes, flags). SipHash's flood resistance buys nothing there, while it cost the
//! enforce hot path about 75,000 instructions per c_vkfft iteration (issue 35: the maps that
//! follow each fresh staging buffer, memory and bind). One multiply per 8 bytes spreads the
//! bits (FxHash's scheme); `finish` folds the high bits (DashMap's shard choice) into the low
//! ones (hashbrown's bucket).

/// The hasher. `Default` starts every hash from 0.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            // The length in the top byte: "ab" and "ab\0" differ.
            self.write_u64(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }
    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_u16(&mut self, v: u16) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(29) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

/// `BuildHasher` for [`FastHasher`].
pub type FastBuild = std::hash::BuildHasherDefault<FastHasher>;
/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastBuild>;
/// A `HashSet` with [`FastHasher`].
pub type FastSet<K> = std::collections::HashSet<K, FastBuild>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash, Hasher};

    fn h<T: Hash>(t: &T) -> u64 {
        FastBuild::default().hash_one(t)
    }

    #[test]
    fn strings_and_tails_hash_apart() {
        assert_ne!(h(&"ab"), h(&"ab\0"));
        assert_ne!(h(&"0123456789abcdef"), h(&"0123456789abcdeg"));
        assert_ne!(h(&(1u64, 2u32)), h(&(2u64, 1u32)));
        let mut a = FastHasher::default();
        a.write(&[1, 2, 3]);
        let mut b = FastHasher::default();
        b.write(&[1, 2, 3, 0]);
        assert_ne!(a.finish(), b.finish());
        // Spread: 4096 consecutive page-aligned handles fill most of 4096 low-bit buckets.
        let buckets: std::collections::HashSet<u64> = (0..4096u64)
            .map(|i| h(&(0x5555_0000_0000 + (i << 12))) & 4095)
            .collect();
        assert!(buckets.len() > 2000, "{}", buckets.len());
    }
}
