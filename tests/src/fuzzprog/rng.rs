//! The generator's random numbers: SplitMix64 (Steele, Lea, Flood 2014). Written here rather
//! than taken from `rand` because a program is named by its seed: the same seed must give the
//! same program in every later build, which `rand`'s generators do not promise across versions.

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x6a09_e667_f3bc_c909)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    /// An index drawn by weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| w as u64).sum();
        let mut x = self.below(total.max(1));
        for (i, &w) in weights.iter().enumerate() {
            if x < w as u64 {
                return i;
            }
            x -= w as u64;
        }
        weights.len() - 1
    }
    pub fn u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
}

/// The seed of program `index` of a run with base seed `base` (and a stream per driver).
pub fn program_seed(base: u64, stream: u64, index: u64) -> u64 {
    let mut r = Rng::new(base ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03));
    for _ in 0..(index % 8) {
        r.next_u64();
    }
    r.next_u64() ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}
