//! The options of `ember generate` and `ember bench`, as clap reads them.

use std::path::PathBuf;

use clap::Args;

/// `ember bench` options.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// unet, vae-decode, text-encoder, preview (the live preview of one step),
    /// preview-taesd (the TAESD preview of one step), controlnet (one ControlNet call beside one UNet call), lora (merging a kohya LoRA) or generate
    /// (a whole generation, as a job runs, with its peak device memory).
    pub target: String,
    /// sd15, sd2, sdxl or sdxl-refiner.
    #[arg(long, default_value = "sd15")]
    pub arch: String,
    /// Image size in pixels (the latents are size / 8).
    #[arg(long, default_value_t = 512)]
    pub size: usize,
    /// Batch (2 = one image with classifier-free guidance; `generate` makes batch / 2
    /// images, at least one).
    #[arg(long, default_value_t = 2)]
    pub batch: usize,
    /// `generate`: sampling steps.
    #[arg(long, default_value_t = 20)]
    pub steps: u32,
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    #[arg(long, default_value = "cpu")]
    pub device: String,
    #[arg(long, default_value = "f32")]
    pub precision: String,
    /// Print one JSON line instead of text.
    #[arg(long)]
    pub json: bool,
    /// On a GPU: tune every kernel again instead of using the autotune answers kept from
    /// earlier runs (which stay as they are), so the attention kernels picked are printed.
    #[arg(long)]
    pub retune: bool,
    /// `lora`: the LoRA's rank.
    #[arg(long, default_value_t = 32)]
    pub rank: usize,
    /// `lora`: merge into this checkpoint, `text-encoder`: time its text encoders (loaded as
    /// `ember generate` loads it), instead of random weights of `--arch`.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// `vae-decode`: auto (tiles when the whole image would not fit in free memory), on
    /// or off.
    #[arg(long, default_value = "auto")]
    pub vae_tiling: String,
    /// `generate`: seamless tiling, off, both, x or y (its wrapped convolutions' cost).
    #[arg(long, default_value = "off")]
    pub seamless: String,
}

/// A seed flag: a number, or -1 for a random one (A1111's `-1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedArg {
    Random,
    Fixed(u64),
}

impl SeedArg {
    /// The seed given, `None` for a random one.
    pub fn fixed(seed: Option<SeedArg>) -> Option<u64> {
        match seed? {
            SeedArg::Random => None,
            SeedArg::Fixed(seed) => Some(seed),
        }
    }
}

fn parse_seed(text: &str) -> Result<SeedArg, String> {
    match text.trim() {
        "-1" => Ok(SeedArg::Random),
        t => t.parse().map(SeedArg::Fixed).map_err(|_| {
            format!(
                "a seed is a whole number from 0 to {}, or -1 for a random one",
                u64::MAX
            )
        }),
    }
}

/// `ember generate` options; names and defaults are documented in README.md.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// A diffusers folder, a single-file .safetensors or a .ckpt.
    #[arg(long)]
    pub model: PathBuf,
    /// A diffusers-style folder whose */config.json describe a non-standard single file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long)]
    pub prompt: String,
    #[arg(long, default_value = "")]
    pub negative: String,
    /// An A1111 style to apply to the prompts, by name; repeat it for more, applied in the
    /// order given.
    #[arg(long = "style", value_name = "NAME")]
    pub styles: Vec<String>,
    /// The styles.csv `--style` reads (default: Ember's, in its config folder, which the
    /// app's Styles editor writes).
    #[arg(long, value_name = "FILE", requires = "styles")]
    pub styles_file: Option<PathBuf>,
    /// SDXL: the prompt of the second text encoder (OpenCLIP bigG); default: --prompt.
    #[arg(long)]
    pub prompt_2: Option<String>,
    /// SDXL: the negative prompt of the second text encoder; default: --negative.
    #[arg(long)]
    pub negative_2: Option<String>,
    /// SDXL size conditioning: the original size WxH (default: the generation size).
    #[arg(long)]
    pub original_size: Option<String>,
    /// SDXL size conditioning: the crop's top-left corner X,Y (default 0,0).
    #[arg(long)]
    pub crop_top_left: Option<String>,
    /// SDXL size conditioning: the target size WxH (default: the generation size).
    #[arg(long)]
    pub target_size: Option<String>,
    /// SDXL refiner: the aesthetic score of the prompt (default 6).
    #[arg(long, allow_negative_numbers = true)]
    pub aesthetic_score: Option<f32>,
    /// SDXL refiner: the aesthetic score of the negative prompt (default 2.5).
    #[arg(long, allow_negative_numbers = true)]
    pub negative_aesthetic_score: Option<f32>,
    /// CFG rescale φ (diffusers' guidance_rescale), 0 to 1; 0.7 suits zero-terminal-SNR
    /// v-prediction models.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub cfg_rescale: f32,
    /// What the model predicts: epsilon or v (overrides what its files say or imply).
    #[arg(long)]
    pub prediction: Option<String>,
    /// A refiner (the SDXL refiner, or another model of the same family) that takes over at
    /// --refiner-switch.
    #[arg(long)]
    pub refiner: Option<PathBuf>,
    /// The fraction of the schedule the base model runs before the refiner (default 0.8).
    #[arg(long, allow_negative_numbers = true)]
    pub refiner_switch: Option<f32>,
    /// --config for a single-file refiner of non-standard size.
    #[arg(long)]
    pub refiner_config: Option<PathBuf>,
    /// Also print load notes, timings and the peak memory used.
    #[arg(long)]
    pub verbose: bool,
    /// Default: the model's native size (the init image's size for img2img).
    #[arg(long)]
    pub width: Option<u32>,
    #[arg(long)]
    pub height: Option<u32>,
    #[arg(long, default_value_t = 20)]
    pub steps: u32,
    #[arg(long, default_value_t = 7.0, allow_negative_numbers = true)]
    pub cfg: f32,
    /// Default (or -1, A1111's way of saying it): a random seed, printed.
    #[arg(long, value_parser = parse_seed, allow_negative_numbers = true)]
    pub seed: Option<SeedArg>,
    /// Images to make; image i gets seed + i (with a variation: the seed and variation seed
    /// + i) and is written as `<out stem>-<i>.png`.
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    /// ComfyUI or A1111 sampler name (euler, dpmpp_2m_sde, "DPM++ 2M", ...; a wrong name lists all).
    #[arg(long)]
    pub sampler: Option<String>,
    /// ComfyUI schedule name (normal, karras, exponential, beta, align_your_steps, ...).
    #[arg(long)]
    pub schedule: Option<String>,
    #[arg(long, allow_negative_numbers = true)]
    pub eta: Option<f32>,
    /// Noise of the DPM++ SDE samplers: brownian (torchsde's Brownian tree from the seed, as
    /// ComfyUI and A1111 do) or generator (fresh draws from the seed's generator).
    #[arg(long, default_value = "brownian")]
    pub sde_noise: String,
    /// Where the noise comes from: cpu (torch's CPU generator, as diffusers, ComfyUI and
    /// A1111's CPU setting) or nv (A1111's NV: what its default GPU noise is on NVIDIA cards).
    #[arg(long, default_value = "cpu")]
    pub rng: String,
    /// A1111's variation seed (default with --variation-strength, or -1: a random one,
    /// printed); image i of a batch gets this + i and every image the seed itself.
    #[arg(long, value_parser = parse_seed, allow_negative_numbers = true)]
    pub variation_seed: Option<SeedArg>,
    /// How far the noise turns from the seed's towards the variation seed's (0 to 1).
    #[arg(long, allow_negative_numbers = true)]
    pub variation_strength: Option<f32>,
    /// A1111's "Resize seed from" WxH: the seed's noise as at this size, pasted into the middle.
    #[arg(long)]
    pub seed_resize_from: Option<String>,
    /// A1111's eta noise seed delta (ENSD; 31337 for NovelAI-style images): the step noise
    /// of ancestral samplers comes from seed + this.
    #[arg(long, default_value_t = 0)]
    pub ensd: u64,
    /// A1111 numbering: 1 = last layer, 2 = penultimate.
    #[arg(long, default_value_t = 1)]
    pub clip_skip: u32,
    /// How prompt weights act, as A1111's Emphasis setting: original (scale, then restore each
    /// chunk's mean), none (scale only), ignore (brackets removed, no weights) or off
    /// (brackets are text, as diffusers reads a prompt).
    #[arg(long, default_value = "original")]
    pub emphasis: String,
    /// A folder of textual-inversion embeddings (repeatable): a prompt word equal to a
    /// file's name becomes its vectors. `embeddings/` beside the model, or one or two folders
    /// up (A1111's and ComfyUI's layouts), is searched after these.
    #[arg(long = "embeddings", value_name = "DIR")]
    pub embeddings: Vec<PathBuf>,
    /// A LoRA to merge, with its weight (default 1); repeatable. The prompt's
    /// `<lora:name:weight>` tags add LoRAs found by name.
    #[arg(long = "lora", value_name = "FILE[:WEIGHT]")]
    pub lora: Vec<String>,
    /// The VAE that decodes (and encodes) the images, as A1111's SD VAE setting: `auto` (a
    /// `<model>.vae.safetensors`, `.pt` or `.ckpt` beside the model, else the model's own),
    /// `none` (the model's own), or a VAE file (LDM or diffusers keys) or diffusers VAE folder.
    #[arg(long, value_name = "auto|none|FILE", default_value = "auto")]
    pub vae: String,
    /// A folder the prompt's `<lora:name:…>` tags are looked up in (repeatable); `Lora/`
    /// beside the model or one or two folders up is searched after these.
    #[arg(long = "loras", value_name = "DIR")]
    pub loras: Vec<PathBuf>,
    /// A folder of wildcard files (`name.txt`, one choice a line) for the prompt's
    /// `__name__` (repeatable); `wildcards/` beside the model or up to two folders up is
    /// searched after these.
    #[arg(long = "wildcards", value_name = "DIR")]
    pub wildcards: Vec<PathBuf>,
    /// Take `{a|b}` and `__name__` literally instead of as dynamic prompts.
    #[arg(long)]
    pub no_dynamic_prompts: bool,
    /// A ControlNet: a single file (A1111's `control_v11p_sd15_*.safetensors`) or a
    /// diffusers folder; repeatable, the n-th `--control-*` flag of each kind going with the
    /// n-th ControlNet.
    #[arg(long = "controlnet", value_name = "DIR")]
    pub controlnet: Vec<PathBuf>,
    /// The image each ControlNet reads (resized to the generation size).
    #[arg(long = "control-image", value_name = "IMG")]
    pub control_image: Vec<PathBuf>,
    /// Each ControlNet's weight (default 1).
    #[arg(long = "control-scale")]
    pub control_scale: Vec<f32>,
    /// The fraction of the steps where each ControlNet starts guiding (default 0).
    #[arg(long = "control-start")]
    pub control_start: Vec<f32>,
    /// The fraction of the steps where each ControlNet stops guiding (default 1).
    #[arg(long = "control-end")]
    pub control_end: Vec<f32>,
    /// How each control image becomes its map: none (it is the map), canny, invert,
    /// threshold, scribble_xdog.
    #[arg(long = "control-preprocess")]
    pub control_preprocess: Vec<String>,
    /// Canny's thresholds for each canny ControlNet (default 100,200).
    #[arg(long = "canny", value_name = "LOW,HIGH")]
    pub canny: Vec<String>,
    /// The threshold of each threshold (default 127) or scribble_xdog (default 32)
    /// ControlNet, in their order.
    #[arg(long = "control-threshold")]
    pub control_threshold: Vec<f32>,
    /// How each control map is fitted to the image size: crop (A1111's default "Crop and
    /// Resize"), resize ("Just Resize"), fill ("Resize and Fill").
    #[arg(long = "control-resize")]
    pub control_resize: Vec<String>,
    /// Each ControlNet's preprocessor resolution (default 512), or pixel-perfect: the
    /// resolution the image size implies.
    #[arg(long = "control-res", value_name = "N|pixel-perfect")]
    pub control_res: Vec<String>,
    /// A diffusers scheduler_config.json to run as diffusers does.
    #[arg(long)]
    pub scheduler_config: Option<PathBuf>,
    #[arg(long)]
    pub init_image: Option<PathBuf>,
    /// Denoising strength with --init-image (default 0.75).
    #[arg(long, allow_negative_numbers = true)]
    pub strength: Option<f32>,
    /// Inpainting mask (white = repaint); needs --init-image.
    #[arg(long)]
    pub mask: Option<PathBuf>,
    /// Gaussian blur of the mask in pixels (feathers the composite; A1111's default 4).
    #[arg(long, default_value_t = 4)]
    pub mask_blur: u32,
    /// whole (the picture at the generation size) or masked (a box around the mask,
    /// generated at full size and pasted back).
    #[arg(long, default_value = "whole")]
    pub inpaint_area: String,
    /// Pixels around the mask for --inpaint-area masked.
    #[arg(long, default_value_t = 32)]
    pub padding: u32,
    /// What the masked area starts from: original, fill, latent-noise or latent-nothing.
    #[arg(long, default_value = "original")]
    pub masked_content: String,
    /// Extend the canvas by L,R,U,D pixels and inpaint the new area (needs --init-image).
    #[arg(long)]
    pub outpaint: Option<String>,
    /// Keep the raw generation instead of compositing it over the source through the mask.
    #[arg(long)]
    pub no_composite: bool,
    /// How an --init-image of another size becomes the generation size: resize, crop or
    /// fill (A1111's Just resize / Crop and resize / Resize and fill).
    #[arg(long, default_value = "resize")]
    pub resize_mode: String,
    /// auto (a GPU when this build and the machine have one, else the CPU), cpu, wgpu (the
    /// best GPU), wgpu:N or cuda:N (a GPU `ember devices` lists; cuda is cuda:0); without it,
    /// `EMBER_DEVICE` (as the app reads it), else auto.
    #[arg(long)]
    pub device: Option<String>,
    /// auto (f16 with an f32 VAE on a GPU, f32 on the CPU), f32, f16 or bf16.
    #[arg(long, default_value = "auto")]
    pub precision: String,
    /// With --init-image, run exactly --steps steps (A1111's "do exactly the amount of
    /// steps the slider specifies") instead of int(steps * strength).
    #[arg(long)]
    pub exact_steps: bool,
    /// The VAE in tiles: auto (when the whole image would not fit in free memory), on
    /// (diffusers' enable_tiling) or off (a request that cannot fit is refused).
    #[arg(long, default_value = "auto")]
    pub vae_tiling: String,
    /// Seamless tiling (A1111's Tiling): both (the image tiles in a grid), x (left and
    /// right edges meet), y (top and bottom edges meet) or off.
    #[arg(long, default_value = "off")]
    pub seamless: String,
    /// Hires fix: enlarge the first pass by this factor (1 to 4; default 2 when another
    /// --hires-* flag is given) and denoise it again.
    #[arg(long)]
    pub hires_scale: Option<f32>,
    /// Hires fix to a size WxH instead of a factor (0 for one side keeps the aspect).
    #[arg(long, value_name = "WxH")]
    pub hires_size: Option<String>,
    /// The hires upscaler: Latent (default), "Latent (antialiased)", "Latent (bicubic)",
    /// "Latent (bicubic antialiased)", "Latent (nearest)", "Latent (nearest-exact)", None,
    /// Lanczos, Nearest, or an ESRGAN model file or name (looked up in --upscalers and in
    /// ESRGAN/ beside the model).
    #[arg(long)]
    pub hires_upscaler: Option<String>,
    /// The second pass's steps (default: --steps).
    #[arg(long)]
    pub hires_steps: Option<u32>,
    /// The second pass's denoising strength (default 0.7).
    #[arg(long, allow_negative_numbers = true)]
    pub hires_strength: Option<f32>,
    /// A folder of ESRGAN upscaler models (repeatable) for --hires-upscaler NAME.
    #[arg(long = "upscalers", value_name = "DIR")]
    pub upscalers: Vec<PathBuf>,
    /// Output image: .png (settings in a `parameters` text chunk), .jpg or .webp (lossless;
    /// settings in EXIF, as A1111 writes them). A batch adds `-0`, `-1`, … to the name.
    #[arg(long)]
    pub out: PathBuf,
    /// A .jpg output's quality, 1–100 (A1111's default).
    #[arg(long, default_value_t = inference::imaging::DEFAULT_JPEG_QUALITY)]
    pub jpeg_quality: u8,
    /// Also write the final latents as a safetensors file (tensor `latents`).
    #[arg(long)]
    pub save_latents: Option<PathBuf>,
    /// A1111's X/Y/Z plot: `TYPE: VALUES`, for example `Steps: 10-30 (+10)` or `Sampler:
    /// Euler a, DPM++ 2M`. One image per combination of the axes' values, each written as
    /// `<out stem>-<i>`, and their labelled grid as `--out`.
    #[arg(long, value_name = "TYPE: VALUES")]
    pub plot_x: Option<String>,
    /// The plot's Y axis (rows).
    #[arg(long, value_name = "TYPE: VALUES")]
    pub plot_y: Option<String>,
    /// The plot's Z axis (one grid per value, side by side).
    #[arg(long, value_name = "TYPE: VALUES")]
    pub plot_z: Option<String>,
}
