//! A stable-Rust fuzzing harness (cargo-fuzz needs nightly): a seeded random-mutation loop
//! over seed inputs, each input run under `catch_unwind`. Targets: the weight-file reader
//! (safetensors header and container checks, the `.ckpt` zip + pickle path with its pickle
//! guard), the pickle guard's opcode walker on its own, PNG metadata (the PNG text reader,
//! the A1111 / ComfyUI / Fooocus parsers and the app's restore of settings), and the app's
//! kept queue (`queue.json`, [`queue_file`]); [`Targets`] has their seeds.
//!
//! A target may return any error; only a panic, or an input slower than [`SLOW`], counts as
//! a finding. `tests/reference/fuzz.rs` runs a short fixed-seed round in CI; `cargo run -p
//! ember-tests --bin fuzz -- RUNS` runs long ones and prints the counts README reports.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

mod queue_file;
mod targets;

pub use targets::Targets;

/// An input slower than this is reported as a finding (a hang in the making).
pub const SLOW: Duration = Duration::from_secs(2);

/// xorshift64*: small, seeded, good enough to pick mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Values that tend to break length and offset arithmetic.
const INTERESTING: [u64; 10] = [
    0,
    1,
    7,
    8,
    0x7f,
    0xff,
    0xffff_ffff,
    u64::MAX,
    u64::MAX / 2,
    100_000_001,
];

/// One random mutation of `data`, biased to its first `hot` bytes (headers).
pub fn mutate(rng: &mut Rng, data: &mut Vec<u8>, hot: usize, others: &[Vec<u8>]) {
    let span = |rng: &mut Rng, len: usize| {
        if len == 0 {
            return 0;
        }
        if rng.below(4) > 0 {
            rng.below(hot.min(len).max(1))
        } else {
            rng.below(len)
        }
    };
    match rng.below(9) {
        0 if !data.is_empty() => {
            let i = span(rng, data.len());
            data[i] ^= 1 << rng.below(8);
        }
        1 if !data.is_empty() => {
            let i = span(rng, data.len());
            data[i] = rng.next_u64() as u8;
        }
        2 => {
            let i = span(rng, data.len() + 1).min(data.len());
            let n = 1 + rng.below(16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            data.splice(i..i, bytes);
        }
        3 if !data.is_empty() => {
            let i = span(rng, data.len());
            let n = (1 + rng.below(32)).min(data.len() - i);
            data.drain(i..i + n);
        }
        4 if !data.is_empty() => {
            let i = span(rng, data.len());
            let value = INTERESTING[rng.below(INTERESTING.len())].to_le_bytes();
            let width = [1, 2, 4, 8][rng.below(4)].min(data.len() - i);
            data[i..i + width].copy_from_slice(&value[..width]);
        }
        5 => {
            let n = rng.below(data.len() + 1);
            data.truncate(n);
        }
        6 if !data.is_empty() => {
            // An ASCII digit changed: JSON offsets, shapes and lengths.
            let digits: Vec<usize> = (0..data.len().min(hot))
                .filter(|&i| data[i].is_ascii_digit())
                .collect();
            if !digits.is_empty() {
                let i = digits[rng.below(digits.len())];
                data[i] = b'0' + rng.below(10) as u8;
                if rng.below(3) == 0 {
                    data.splice(i..i, std::iter::repeat_n(b'9', 1 + rng.below(12)));
                }
            }
        }
        7 if !others.is_empty() => {
            // Splice in a piece of another seed.
            let other = &others[rng.below(others.len())];
            if !other.is_empty() {
                let (a, b) = (rng.below(other.len()), rng.below(other.len()));
                let piece = other[a.min(b)..a.max(b)].to_vec();
                let i = rng.below(data.len() + 1);
                data.splice(i..i, piece);
            }
        }
        _ if data.len() > 1 => {
            // Duplicate a range.
            let i = span(rng, data.len());
            let n = (1 + rng.below(64)).min(data.len() - i);
            let piece = data[i..i + n].to_vec();
            data.splice(i..i, piece);
        }
        _ => data.push(rng.next_u64() as u8),
    }
}

/// What fuzzing one target found.
#[derive(Debug, Default)]
pub struct Findings {
    pub runs: u64,
    /// Inputs the target accepted (as opposed to a clean error).
    pub accepted: u64,
    /// `(panic message, input)` of every panic.
    pub panics: Vec<(String, Vec<u8>)>,
    pub slowest: Duration,
    pub slow: Vec<Vec<u8>>,
}

/// A target: runs one input, `Ok(true)` when it was accepted, `Ok(false)` for a clean error.
pub type Target<'a> = &'a mut dyn FnMut(&[u8]) -> bool;

/// Runs `runs` mutated inputs (1 to 4 stacked mutations of a seed) through `target`.
pub fn fuzz(
    seeds: &[Vec<u8>],
    hot: usize,
    runs: u64,
    rng_seed: u64,
    target: Target<'_>,
) -> Findings {
    let mut rng = Rng::new(rng_seed);
    let mut findings = Findings::default();
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for _ in 0..runs {
        let mut input = seeds[rng.below(seeds.len())].clone();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut input, hot, seeds);
        }
        let start = Instant::now();
        match catch_unwind(AssertUnwindSafe(|| target(&input))) {
            Ok(accepted) => findings.accepted += u64::from(accepted),
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-text panic".into());
                findings.panics.push((message, input.clone()));
            }
        }
        let took = start.elapsed();
        findings.slowest = findings.slowest.max(took);
        if took > SLOW {
            findings.slow.push(input);
        }
        findings.runs += 1;
    }
    std::panic::set_hook(quiet);
    findings
}

/// One target ready to fuzz: its name (as README and `--bin fuzz` say it), its seeds, and
/// how many leading bytes the mutator aims at (see [`mutate`]).
pub struct NamedTarget<'a> {
    pub name: &'static str,
    pub seeds: Vec<Vec<u8>>,
    pub hot: usize,
    pub run: Run<'a>,
}

/// A [`NamedTarget`]'s run of one input (as [`Target`], kept in the target).
pub type Run<'a> = Box<dyn Fn(&[u8]) -> bool + 'a>;

impl<'a> NamedTarget<'a> {
    pub fn new(
        name: &'static str,
        seeds: Vec<Vec<u8>>,
        hot: usize,
        run: impl Fn(&[u8]) -> bool + 'a,
    ) -> Self {
        Self {
            name,
            seeds,
            hot,
            run: Box::new(run),
        }
    }

    /// `runs` mutated inputs of this target's seeds, picked from `rng_seed` (see [`fuzz`]).
    pub fn fuzz(&self, runs: u64, rng_seed: u64) -> Findings {
        fuzz(&self.seeds, self.hot, runs, rng_seed, &mut |b| {
            (self.run)(b)
        })
    }
}
