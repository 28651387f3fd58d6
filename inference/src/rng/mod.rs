//! The random numbers of a generation: the PyTorch CPU generator reproduced bit for bit,
//! and A1111's "NV" imitation of torch's CUDA one ([`philox`]).
//!
//! Artists share seeds: the same seed must give the same image as diffusers, ComfyUI and
//! A1111 with CPU noise, which draw from `torch.Generator('cpu')`, and as A1111 with its
//! default GPU noise on an NVIDIA card ([`RngSource::Nv`]). This module is the only source
//! of randomness in a generation (see ARCHITECTURE.md). Noise is made on the host and
//! uploaded, so the same seed gives the same image on every backend.
//!
//! The algorithm follows `../shared/reference/rng/` (torch 2.15, `aten/src/ATen/native/cpu/
//! DistributionTemplates.h` and `core/DistributionsHelper.h`): MT19937 for raw bits, a
//! double-precision Box-Muller with one cached value for tensors of fewer than 16 elements,
//! and a float32 Box-Muller over blocks of 16 for larger tensors, computed with the 8-lane
//! `avx_mathfun` log/sincos (see [`avx_mathfun`]).

mod avx_mathfun;
pub mod brownian;
pub mod first_noise;
mod mt19937;
pub mod philox;
mod seed_sequence;

pub use mt19937::Mt19937;
pub use philox::PhiloxRng;

use crate::api::{GenerateRequest, NoiseOptions, RngSource};

/// Which float32 kernel `randn` uses for tensors of 16 or more elements.
///
/// torch picks the vectorised kernel on every x86-64 CPU with AVX2 (and AVX-512, which runs
/// the same code); the scalar one only on older CPUs or with `ATEN_CPU_CAPABILITY=default`.
/// The two differ in the last bits of about half the values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NormalKernel {
    /// `normal_fill_16_AVX2`: Cephes `log256_ps` / `sincos256_ps` with FMA contraction.
    #[default]
    Vectorized,
    /// `normal_fill_16`: libm `logf`, `cosf`, `sinf`.
    Scalar,
}

/// `torch.Generator('cpu')`: `manual_seed`, `randn` and `rand` on float32 tensors.
#[derive(Clone)]
pub struct TorchRng {
    engine: Mt19937,
    /// The second value of the last double Box-Muller pair (small `randn` path).
    cached_normal: Option<f64>,
    kernel: NormalKernel,
}

impl TorchRng {
    /// `torch.Generator('cpu').manual_seed(seed)`. Only the low 32 bits of the seed
    /// matter, as in torch.
    pub fn new(seed: u64) -> Self {
        Self::with_kernel(seed, NormalKernel::default())
    }

    /// A generator that uses the given float32 kernel for large `randn` calls.
    pub fn with_kernel(seed: u64, kernel: NormalKernel) -> Self {
        Self {
            engine: Mt19937::new(seed as u32),
            cached_normal: None,
            kernel,
        }
    }

    /// One raw 32-bit output of the engine.
    pub fn next_u32(&mut self) -> u32 {
        self.engine.next_u32()
    }

    /// `random64()`: two consecutive 32-bit outputs, the first in the high half.
    fn next_u64(&mut self) -> u64 {
        let hi = u64::from(self.next_u32());
        let lo = u64::from(self.next_u32());
        (hi << 32) | lo
    }

    /// `uniform_real_distribution<float>(0, 1)`: 24 random bits, one u32 per value.
    fn uniform_f32(&mut self) -> f32 {
        (self.next_u32() & 0x00FF_FFFF) as f32 * (1.0 / 16_777_216.0)
    }

    /// `uniform_real_distribution<double>(0, 1)`: 53 random bits from one `random64()`.
    fn uniform_f64(&mut self) -> f64 {
        (self.next_u64() & ((1u64 << 53) - 1)) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `torch.rand(numel)`: uniform float32 values in [0, 1).
    pub fn rand(&mut self, numel: usize) -> Vec<f32> {
        (0..numel).map(|_| self.uniform_f32()).collect()
    }

    /// `torch.randn(shape)` for a contiguous float32 tensor of `numel` elements.
    pub fn randn(&mut self, numel: usize) -> Vec<f32> {
        if numel < 16 {
            return (0..numel).map(|_| self.normal_f64() as f32).collect();
        }
        let mut data = self.rand(numel);
        for block in data.chunks_exact_mut(16) {
            self.box_muller_16(block);
        }
        if !numel.is_multiple_of(16) {
            // torch redraws the last 16 values and transforms them as one more block,
            // overwriting the overlap with the blocks already done.
            let tail = &mut data[numel - 16..];
            for value in tail.iter_mut() {
                *value = self.uniform_f32();
            }
            self.box_muller_16(tail);
        }
        data
    }

    /// `normal_distribution<double>` with the generator's cached second value.
    fn normal_f64(&mut self) -> f64 {
        if let Some(cached) = self.cached_normal.take() {
            return cached;
        }
        let u1 = self.uniform_f64();
        let u2 = self.uniform_f64();
        let radius = (-2.0 * (-u2).ln_1p()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u1;
        self.cached_normal = Some(radius * theta.sin());
        radius * theta.cos()
    }

    fn box_muller_16(&self, block: &mut [f32]) {
        match self.kernel {
            NormalKernel::Vectorized => box_muller_16_vectorized(block),
            NormalKernel::Scalar => box_muller_16_scalar(block),
        }
    }
}

/// `normal_fill_16_AVX2` (mean 0, std 1), one lane at a time.
fn box_muller_16_vectorized(block: &mut [f32]) {
    const TWO_PI: f32 = 2.0 * std::f32::consts::PI;
    for j in 0..8 {
        let u1 = 1.0 - block[j];
        let u2 = block[j + 8];
        let radius = (-2.0 * avx_mathfun::log(u1)).sqrt();
        let theta = TWO_PI * u2;
        let (sin, cos) = avx_mathfun::sincos(theta);
        block[j] = radius * cos;
        block[j + 8] = radius * sin;
    }
}

/// `normal_fill_16` (mean 0, std 1): the kernel torch uses without AVX2.
fn box_muller_16_scalar(block: &mut [f32]) {
    for j in 0..8 {
        let u1 = 1.0 - block[j];
        let u2 = block[j + 8];
        let radius = (-2.0 * u1.ln()).sqrt();
        let theta = (2.0 * std::f64::consts::PI * f64::from(u2)) as f32;
        block[j] = radius * theta.cos();
        block[j + 8] = radius * theta.sin();
    }
}

/// One image's generator, of the request's source.
#[derive(Clone)]
pub enum ImageGenerator {
    /// Boxed: MT19937's state is 2.5 KB, Philox's 12 bytes.
    Torch(Box<TorchRng>),
    Philox(PhiloxRng),
}

impl ImageGenerator {
    /// A generator of `source` seeded with `seed`.
    pub fn new(source: RngSource, seed: u64) -> Self {
        match source {
            RngSource::Cpu => Self::Torch(Box::new(TorchRng::new(seed))),
            RngSource::Nv => Self::Philox(PhiloxRng::new(seed)),
        }
    }

    /// `randn` of `numel` values.
    pub fn randn(&mut self, numel: usize) -> Vec<f32> {
        match self {
            Self::Torch(rng) => rng.randn(numel),
            Self::Philox(rng) => rng.randn(numel),
        }
    }
}

/// One generator per image of a batch, seeded `seed, seed + 1, ...` (A1111's convention;
/// with a variation every image has the seed and its own variation seed): every image of a
/// batch is the image a batch-1 run with its own seeds makes.
pub struct BatchRng {
    rngs: Vec<ImageGenerator>,
    seeds: Vec<u64>,
    options: NoiseOptions,
}

impl BatchRng {
    /// CPU generators for `batch` images starting at `seed`, without seed extras.
    pub fn new(seed: u64, batch: usize) -> Self {
        let seeds = (0..batch as u64).map(|i| seed.wrapping_add(i)).collect();
        Self::with_seeds(seeds, NoiseOptions::default())
    }

    /// The generators of a request's images ([`GenerateRequest::image_seed`]), of its
    /// noise source, drawing its first noise with its seed extras.
    pub fn for_request(request: &GenerateRequest) -> Self {
        let seeds = (0..request.batch as usize)
            .map(|i| request.image_seed(i))
            .collect();
        Self::with_seeds(seeds, request.noise)
    }

    fn with_seeds(seeds: Vec<u64>, options: NoiseOptions) -> Self {
        Self {
            rngs: seeds
                .iter()
                .map(|&seed| ImageGenerator::new(options.rng, seed))
                .collect(),
            seeds,
            options,
        }
    }

    /// Number of images.
    pub fn batch(&self) -> usize {
        self.rngs.len()
    }

    /// Where the noise comes from (the Brownian trees draw from it too, as in A1111).
    pub fn source(&self) -> RngSource {
        self.options.rng
    }

    /// Each image's seed (what its Brownian tree is seeded with too, as in A1111).
    pub fn seeds(&self) -> &[u64] {
        &self.seeds
    }

    /// `randn` of `per_image` elements from each generator, concatenated in image order.
    pub fn randn(&mut self, per_image: usize) -> Vec<f32> {
        self.rngs
            .iter_mut()
            .flat_map(|rng| rng.randn(per_image))
            .collect()
    }

    /// The starting noise of every image, `shape` each (A1111's `ImageRNG.first`): a
    /// plain draw, or with a variation seed or "resize seed from" the noise A1111 makes
    /// of them ([`first_noise::draw`]); `factor` is the VAE's pixels per latent cell.
    pub fn first_noise(&mut self, shape: first_noise::NoiseShape, factor: usize) -> Vec<f32> {
        let options = self.options;
        self.rngs
            .iter_mut()
            .zip(&self.seeds)
            .enumerate()
            .flat_map(|(i, (rng, &seed))| {
                first_noise::draw(rng, (seed, i), shape, &options, factor)
            })
            .collect()
    }

    /// From here on the samplers' step noise: with an eta noise seed delta, each image's
    /// generator starts again from its seed + delta (A1111 does this after the first noise).
    pub fn begin_step_noise(&mut self) {
        let delta = self.options.eta_noise_seed_delta;
        if delta != 0 {
            for (rng, &seed) in self.rngs.iter_mut().zip(&self.seeds) {
                *rng = ImageGenerator::new(self.options.rng, seed.wrapping_add(delta));
            }
        }
    }
}

/// A fresh seed in A1111's range (32 bits, so every tool can type it back in), for
/// generations that ask for none. Not the generator: seeds still go through [`BatchRng`].
pub fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish() & 0xFFFF_FFFF
}
