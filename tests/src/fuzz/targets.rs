//! The fuzz targets over files: the weight-file reader (safetensors and `.ckpt`), the pickle
//! guard on its own, PNG files, JPEG/WebP files' EXIF and their metadata text; each with its
//! seeds, and [`Targets::all`]
//! listing every target ([`super::queue_file`] adds the kept queue's).

use std::path::{Path, PathBuf};

use inference::imaging::{self, ImageRgb8};

use super::NamedTarget;

/// The fuzz targets, each with its seeds, over files in `dir`.
pub struct Targets {
    pub(super) dir: PathBuf,
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
            NamedTarget::new("exif", self.exif_seeds(), 4096, |b| self.exif_image(b)),
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

    /// Seeds: the JPEG, WebP and PNG files of `tests/extra/exif` that carry settings.
    pub fn exif_seeds(&self) -> Vec<Vec<u8>> {
        [
            "a1111.jpg",
            "a1111.webp",
            "comfyui.webp",
            "fooocus.jpg",
            "exif.png",
        ]
        .iter()
        .map(|name| std::fs::read(crate::extra("exif").join(name)).expect("exif seed"))
        .collect()
    }

    /// An image's EXIF (or text chunks) read, interpreted and restored into the settings.
    pub fn exif_image(&self, bytes: &[u8]) -> bool {
        let path = self.scratch("input.image", bytes);
        let Ok(chunks) = imaging::read_image_text(&path) else {
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
