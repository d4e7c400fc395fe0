//! A fast keyed hasher for the hash maps of the reward and its bindings.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::OnceLock;

/// A fast keyed hasher for maps keyed by model output (tokens, task addresses). The key is
/// random per process, so model output cannot be crafted to collide (the reason the
/// standard library uses SipHash), while hashing costs a multiply per 8 bytes.
#[derive(Clone, Copy)]
pub struct KeyedHasher {
    hash: u64,
}

const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

fn process_key() -> u64 {
    static KEY: OnceLock<u64> = OnceLock::new();
    *KEY.get_or_init(|| RandomState::new().hash_one(0x5EED_u64) | 1)
}

impl Default for KeyedHasher {
    fn default() -> Self {
        KeyedHasher {
            hash: process_key(),
        }
    }
}

/// The high and low halves of the full product, folded together.
fn folded_multiply(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

impl KeyedHasher {
    fn add(&mut self, word: u64) {
        self.hash = folded_multiply(self.hash ^ word, MULTIPLIER);
    }
}

impl Hasher for KeyedHasher {
    fn finish(&self) -> u64 {
        folded_multiply(self.hash, process_key())
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            // The length keeps "a" and "a\0" apart.
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

/// The `BuildHasher` of [`KeyedHasher`], for `HashMap::with_hasher` and friends.
pub type FastHash = BuildHasherDefault<KeyedHasher>;
