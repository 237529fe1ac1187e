//! Deterministic pseudo-random sequences shared by the experiments and the
//! workloads: every run, and every allocator compared in one run, must see
//! the same sequence, so none of them takes a seed from the clock.

/// A small deterministic generator (the runs must be repeatable).
pub struct Lcg(pub u64);
impl Lcg {
    /// Next value (xorshift64*).
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Shuffle `v` in place: Fisher-Yates with a fixed xorshift sequence, so every
/// allocator frees its blocks in the same order.
pub fn shuffle<T>(v: &mut [T]) {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
}
