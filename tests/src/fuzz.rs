//! A stable-Rust fuzzing harness (cargo-fuzz needs nightly): a seeded random-mutation loop
//! over seed inputs, each input run under `catch_unwind`. Targets: the weight-file reader
//! (safetensors header and container checks, the `.ckpt` zip + pickle path with its pickle
//! guard), the pickle guard's opcode walker on its own, PNG metadata (the PNG text reader,
//! the A1111 / ComfyUI / Fooocus parsers and the app's restore of settings), and the app's
//! kept queue (`queue.json`, [`queue_file`]).
//!
//! A target may return any error; only a panic, or an input slower than [`SLOW`], counts as
//! a finding. `tests/reference/fuzz.rs` runs a short fixed-seed round in CI; `cargo run -p
//! ember-tests --bin fuzz -- RUNS` runs long ones and prints the counts README reports.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use inference::imaging::{self, ImageRgb8};

mod queue_file;

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

/// The fuzz targets, each with its seeds, over files in `dir`.
pub struct Targets {
    dir: PathBuf,
}

impl Targets {
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// Every target, in the order README reports them.
    pub fn all(&self) -> Vec<NamedTarget<'_>> {
        vec![
            NamedTarget::new("safetensors", self.safetensors_seeds(), 160, |b| {
                self.weight_file(b)
            }),
            NamedTarget::new("ckpt", self.ckpt_seeds(), 4096, |b| self.weight_file(b)),
            NamedTarget::new("pickle", self.pickle_seeds(), 4096, |b| self.pickle(b)),
            NamedTarget::new("png", self.png_seeds(), 4096, |b| self.png(b)),
            NamedTarget::new("metadata", self.metadata_text_seeds(), 4096, |b| {
                self.metadata_text(b)
            }),
            NamedTarget::new("queue", self.queue_seeds(), 4096, |b| self.queue(b)),
        ]
    }

    fn scratch(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, bytes).expect("scratch file");
        path
    }

    /// Safetensors seeds: a small file of three tensors (f32, f16, i64) and one with
    /// metadata.
    pub fn safetensors_seeds(&self) -> Vec<Vec<u8>> {
        let f32s: Vec<u8> = (0..12)
            .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
            .collect();
        let f16s: Vec<u8> = (0..4u16).flat_map(|i| (0x3c00 + i).to_le_bytes()).collect();
        let i64s: Vec<u8> = (0..2i64).flat_map(|i| i.to_le_bytes()).collect();
        let views = [
            (
                "model.diffusion_model.conv_in.weight",
                safetensors::Dtype::F32,
                vec![3, 4],
                &f32s,
            ),
            (
                "first_stage_model.quant_conv.bias",
                safetensors::Dtype::F16,
                vec![4],
                &f16s,
            ),
            (
                "cond_stage_model.ids",
                safetensors::Dtype::I64,
                vec![2],
                &i64s,
            ),
        ];
        let tensors: Vec<(String, safetensors::tensor::TensorView<'_>)> = views
            .iter()
            .map(|(name, dtype, shape, data)| {
                let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), data)
                    .expect("valid view");
                (name.to_string(), view)
            })
            .collect();
        let plain = safetensors::serialize(tensors.clone(), None).expect("serialise");
        let meta = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
        let with_meta = safetensors::serialize(tensors, Some(meta)).expect("serialise");
        vec![plain, with_meta]
    }

    /// `.ckpt` seeds as torch.save writes them (and the malicious one).
    pub fn ckpt_seeds(&self) -> Vec<Vec<u8>> {
        let path = self.dir.join("seed.ckpt");
        crate::torch_file::write_checkpoint(
            &path,
            &[crate::torch_file::TorchTensor {
                name: "model.diffusion_model.conv_in.weight".into(),
                shape: vec![2, 3],
                data: vec![0.5; 6],
            }],
        );
        let good = std::fs::read(&path).expect("seed");
        crate::torch_file::write_malicious_checkpoint(&path);
        let bad = std::fs::read(&path).expect("seed");
        vec![good, bad]
    }

    /// The weight-file reader on a file of these bytes (safetensors or ckpt by content).
    pub fn weight_file(&self, bytes: &[u8]) -> bool {
        let path = self.scratch("input.bin", bytes);
        inference::weights::source::TensorFile::open(&path).is_ok()
    }

    /// Pickle seeds: the pickles inside the ckpt seeds.
    pub fn pickle_seeds(&self) -> Vec<Vec<u8>> {
        self.ckpt_seeds()
            .into_iter()
            .filter_map(|zip| {
                let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).ok()?;
                let name = (0..archive.len())
                    .filter_map(|i| {
                        archive
                            .by_index(i)
                            .ok()
                            .and_then(|e| e.name().ok().map(|n| n.to_string()))
                    })
                    .find(|n| n.ends_with(".pkl"))?;
                let mut data = Vec::new();
                std::io::Read::read_to_end(&mut archive.by_name(&name).ok()?, &mut data).ok()?;
                Some(data)
            })
            .collect()
    }

    /// The pickle guard's opcode walker.
    pub fn pickle(&self, bytes: &[u8]) -> bool {
        inference::weights::pickle_guard::imported_globals(bytes, 5).is_ok()
    }

    /// PNG seeds with A1111, ComfyUI and Fooocus metadata.
    pub fn png_seeds(&self) -> Vec<Vec<u8>> {
        let image = ImageRgb8 {
            width: 2,
            height: 2,
            pixels: vec![128; 12],
        };
        let a1111 = "a cat, (masterpiece:1.2)\nNegative prompt: blurry\nSteps: 20, Sampler: DPM++ 2M, \
                     Schedule type: Karras, CFG scale: 7, Seed: 42, Size: 512x512, Model hash: 1234abcd, \
                     Model: v1-5, Denoising strength: 0.75, Refiner: xl [abcd], Refiner switch at: 0.8";
        let comfy = r#"{"3": {"class_type": "KSampler", "inputs": {"seed": 5, "steps": 20, "cfg": 7.0,
            "sampler_name": "euler", "scheduler": "normal", "positive": ["6", 0], "negative": ["7", 0],
            "model": ["4", 0], "latent_image": ["5", 0], "denoise": 1.0}},
            "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "a.safetensors"}},
            "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 512, "batch_size": 1}},
            "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["4", 1]}},
            "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": ["4", 1]}}}"#;
        let fooocus = r#"{"prompt": "a cat", "negative_prompt": "", "steps": 30, "guidance_scale": 4,
            "seed": "7", "resolution": "(1024, 1024)", "sampler": "dpmpp_2m_sde_gpu",
            "scheduler": "karras", "base_model": "juggernautXL.safetensors", "metadata_scheme": "fooocus"}"#;
        [
            ("parameters", a1111),
            ("prompt", comfy),
            ("parameters", fooocus),
        ]
        .iter()
        .map(|(key, text)| imaging::encode_png(&image, &[(key, text)]).expect("png"))
        .collect()
    }

    /// PNG text chunks read, interpreted and restored into the app's settings.
    pub fn png(&self, bytes: &[u8]) -> bool {
        let path = self.scratch("input.png", bytes);
        let Ok(chunks) = imaging::read_png_text(&path) else {
            return false;
        };
        self.metadata_chunks(&chunks)
    }

    /// The metadata parsers and the app's restore on text chunks.
    pub fn metadata_chunks(&self, chunks: &[(String, String)]) -> bool {
        match inference::metadata::from_text_chunks(chunks) {
            Some(meta) => {
                let mut settings = ember_app::gui::settings::Settings::default();
                let _ = ember_app::gui::restore::apply(&meta, &mut settings, true);
                true
            }
            None => false,
        }
    }

    /// The metadata parsers on mutated text (much faster than going through PNG files).
    pub fn metadata_text(&self, bytes: &[u8]) -> bool {
        let text = String::from_utf8_lossy(bytes);
        let (key, value) = text.split_once('\u{1}').unwrap_or(("parameters", &text));
        self.metadata_chunks(&[(key.to_string(), value.to_string())])
    }

    /// Seeds for [`Targets::metadata_text`]: `key \x01 text`.
    pub fn metadata_text_seeds(&self) -> Vec<Vec<u8>> {
        self.png_seeds()
            .iter()
            .map(|png| {
                let path = self.scratch("seed.png", png);
                let chunks = imaging::read_png_text(&path).expect("seed png");
                let (key, text) = &chunks[0];
                format!("{key}\u{1}{text}").into_bytes()
            })
            .collect()
    }
}
