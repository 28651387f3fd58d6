//! The well-known checkpoints `ember download NAME` and the app's Download window offer,
//! with the sizes and SHA-256 hashes their Hugging Face repositories publish (the LFS object
//! ids, which are the files' SHA-256).

/// One downloadable model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What `ember download` takes.
    pub name: &'static str,
    pub title: &'static str,
    pub url: &'static str,
    pub file_name: &'static str,
    pub size: u64,
    pub sha256: &'static str,
    /// The models-folder subfolder it belongs in (A1111's layout), `""` for checkpoints.
    pub folder: &'static str,
    pub license: &'static str,
}

pub const CATALOGUE: [Entry; 4] = [
    Entry {
        name: "sd15",
        title: "Stable Diffusion 1.5 (pruned EMA)",
        url: "https://huggingface.co/stable-diffusion-v1-5/stable-diffusion-v1-5/resolve/main/v1-5-pruned-emaonly.safetensors",
        file_name: "v1-5-pruned-emaonly.safetensors",
        size: 4_265_146_304,
        sha256: "6ce0161689b3853acaa03779ec93eafe75a02f4ced659bee03f50797806fa2fa",
        folder: "",
        license: "CreativeML Open RAIL-M",
    },
    Entry {
        name: "sdxl-base",
        title: "Stable Diffusion XL 1.0 base",
        url: "https://huggingface.co/stabilityai/stable-diffusion-xl-base-1.0/resolve/main/sd_xl_base_1.0.safetensors",
        file_name: "sd_xl_base_1.0.safetensors",
        size: 6_938_078_334,
        sha256: "31e35c80fc4829d14f90153f4c74cd59c90b779f6afe05a74cd6120b893f7e5b",
        folder: "",
        license: "CreativeML Open RAIL++-M",
    },
    Entry {
        name: "sdxl-refiner",
        title: "Stable Diffusion XL 1.0 refiner",
        url: "https://huggingface.co/stabilityai/stable-diffusion-xl-refiner-1.0/resolve/main/sd_xl_refiner_1.0.safetensors",
        file_name: "sd_xl_refiner_1.0.safetensors",
        size: 6_075_981_930,
        sha256: "7440042bbdc8a24813002c09b6b69b64dc90fded4472613437b7f55f9b7d9c5f",
        folder: "",
        license: "CreativeML Open RAIL++-M",
    },
    Entry {
        name: "sdxl-vae-fp16-fix",
        title: "SDXL VAE, fp16 fix (madebyollin)",
        url: "https://huggingface.co/madebyollin/sdxl-vae-fp16-fix/resolve/main/sdxl.vae.safetensors",
        file_name: "sdxl.vae.safetensors",
        size: 334_641_162,
        sha256: "235745af8d86bf4a4c1b5b4f529868b37019a10f7c0b2e79ad0abca3a22bc6e1",
        folder: "VAE",
        license: "MIT",
    },
];

/// The entry of that name (case-insensitive), if any.
pub fn find(name: &str) -> Option<&'static Entry> {
    CATALOGUE
        .iter()
        .find(|e| e.name.eq_ignore_ascii_case(name.trim()))
}
