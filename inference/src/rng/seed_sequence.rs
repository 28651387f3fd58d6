//! numpy's `SeedSequence`, the seed mixer torchsde's Brownian tree derives its seeds with.
//!
//! Ported from `numpy/random/bit_generator.pyx` (numpy >= 1.19, which pads the entropy to
//! the pool size whenever a spawn key is given; Melissa O'Neill's `seed_seq` design). Only
//! what torchsde uses: integer entropy, an integer spawn key, `generate_state` as `uint32`.

const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;

/// A mixed entropy pool; `generate_state` reads seeds out of it.
pub struct SeedSequence {
    pool: Vec<u32>,
}

impl SeedSequence {
    /// `np.random.SeedSequence(entropy, spawn_key=spawn_key, pool_size=pool_size)` for
    /// non-negative integer entropy and spawn-key entries (`pool_size >= 4`).
    pub fn new(entropy: u64, spawn_key: &[u64], pool_size: usize) -> Self {
        let mut assembled = int_to_words(entropy);
        let spawn: Vec<u32> = spawn_key.iter().flat_map(|&k| int_to_words(k)).collect();
        if !spawn.is_empty() && assembled.len() < pool_size {
            assembled.resize(pool_size, 0);
        }
        assembled.extend(spawn);
        let mut pool = vec![0u32; pool_size.max(4)];
        mix_entropy(&mut pool, &assembled);
        Self { pool }
    }

    /// `generate_state(n_words)` with the default `uint32` words.
    pub fn generate_state(&self, n_words: usize) -> Vec<u32> {
        let mut hash_const = INIT_B;
        self.pool
            .iter()
            .cycle()
            .take(n_words)
            .map(|&word| {
                let mut value = word ^ hash_const;
                hash_const = hash_const.wrapping_mul(MULT_B);
                value = value.wrapping_mul(hash_const);
                value ^ (value >> XSHIFT)
            })
            .collect()
    }
}

/// `_int_to_uint32_array`: little-endian 32-bit words, `[0]` for zero.
fn int_to_words(mut n: u64) -> Vec<u32> {
    if n == 0 {
        return vec![0];
    }
    let mut words = Vec::with_capacity(2);
    while n > 0 {
        words.push(n as u32);
        n >>= 32;
    }
    words
}

fn hashmix(value: u32, hash_const: &mut u32) -> u32 {
    let mut value = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(MULT_A);
    value = value.wrapping_mul(*hash_const);
    value ^ (value >> XSHIFT)
}

fn mix(x: u32, y: u32) -> u32 {
    let result = MIX_MULT_L
        .wrapping_mul(x)
        .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    result ^ (result >> XSHIFT)
}

fn mix_entropy(pool: &mut [u32], entropy: &[u32]) {
    let mut hash_const = INIT_A;
    for (i, slot) in pool.iter_mut().enumerate() {
        *slot = hashmix(entropy.get(i).copied().unwrap_or(0), &mut hash_const);
    }
    // Every word influences every other, so late entropy words reach early pool words.
    for src in 0..pool.len() {
        for dst in 0..pool.len() {
            if src != dst {
                let hashed = hashmix(pool[src], &mut hash_const);
                pool[dst] = mix(pool[dst], hashed);
            }
        }
    }
    for &word in entropy.iter().skip(pool.len()) {
        for slot in pool.iter_mut() {
            let hashed = hashmix(word, &mut hash_const);
            *slot = mix(*slot, hashed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_split_into_little_endian_words() {
        assert_eq!(int_to_words(0), vec![0]);
        assert_eq!(int_to_words(7), vec![7]);
        assert_eq!(int_to_words(0x1_0000_0002), vec![2, 1]);
    }

    #[test]
    fn spawn_keys_and_entropy_change_the_state() {
        let plain = SeedSequence::new(1234, &[], 24).generate_state(4);
        assert_ne!(
            plain,
            SeedSequence::new(1234, &[0, 0], 24).generate_state(4)
        );
        assert_ne!(plain, SeedSequence::new(1235, &[], 24).generate_state(4));
        assert_ne!(
            SeedSequence::new(1234, &[0, 1], 24).generate_state(4),
            SeedSequence::new(1234, &[1, 1], 24).generate_state(4)
        );
    }
}
