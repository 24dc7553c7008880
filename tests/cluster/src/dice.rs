//! A small deterministic generator for the concurrency tests (no timer, no entropy: a run is the
//! same every time): xorshift64.

/// Rolls of a die with any number of sides, from a seed (not 0).
pub struct Dice(pub u64);

impl Dice {
    /// The next roll, in `0..sides`.
    pub fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % sides
    }
}
