//! The well-known models `ember download NAME` and the app's Download window offer, with
//! the sizes and SHA-256 hashes their Hugging Face repositories publish (the LFS object ids,
//! which are the files' SHA-256), or, for the TAESD preview decoders kept in a GitHub
//! repository, git's blob ids at a pinned commit.

/// What the finished file must hash to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Its SHA-256; the size is exact too.
    Sha256(&'static str),
    /// Its git blob id (SHA-1 of `blob <length>\0` and the bytes: covers the length too),
    /// for files in a git repository that publishes no SHA-256.
    GitBlob(&'static str),
}

/// One downloadable model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What `ember download` takes.
    pub name: &'static str,
    pub title: &'static str,
    pub url: &'static str,
    pub file_name: &'static str,
    /// The size in bytes (checked exactly with [`Check::Sha256`], shown only otherwise).
    pub size: u64,
    pub check: Check,
    /// The models-folder subfolder it belongs in (A1111's layout), `""` for checkpoints.
    pub folder: &'static str,
    pub license: &'static str,
}

pub const CATALOGUE: [Entry; 6] = [
    Entry {
        name: "sd15",
        title: "Stable Diffusion 1.5 (pruned EMA)",
        url: "https://huggingface.co/stable-diffusion-v1-5/stable-diffusion-v1-5/resolve/main/v1-5-pruned-emaonly.safetensors",
        file_name: "v1-5-pruned-emaonly.safetensors",
        size: 4_265_146_304,
        check: Check::Sha256("6ce0161689b3853acaa03779ec93eafe75a02f4ced659bee03f50797806fa2fa"),
        folder: "",
        license: "CreativeML Open RAIL-M",
    },
    Entry {
        name: "sdxl-base",
        title: "Stable Diffusion XL 1.0 base",
        url: "https://huggingface.co/stabilityai/stable-diffusion-xl-base-1.0/resolve/main/sd_xl_base_1.0.safetensors",
        file_name: "sd_xl_base_1.0.safetensors",
        size: 6_938_078_334,
        check: Check::Sha256("31e35c80fc4829d14f90153f4c74cd59c90b779f6afe05a74cd6120b893f7e5b"),
        folder: "",
        license: "CreativeML Open RAIL++-M",
    },
    Entry {
        name: "sdxl-refiner",
        title: "Stable Diffusion XL 1.0 refiner",
        url: "https://huggingface.co/stabilityai/stable-diffusion-xl-refiner-1.0/resolve/main/sd_xl_refiner_1.0.safetensors",
        file_name: "sd_xl_refiner_1.0.safetensors",
        size: 6_075_981_930,
        check: Check::Sha256("7440042bbdc8a24813002c09b6b69b64dc90fded4472613437b7f55f9b7d9c5f"),
        folder: "",
        license: "CreativeML Open RAIL++-M",
    },
    Entry {
        name: "sdxl-vae-fp16-fix",
        title: "SDXL VAE, fp16 fix (madebyollin)",
        url: "https://huggingface.co/madebyollin/sdxl-vae-fp16-fix/resolve/main/sdxl.vae.safetensors",
        file_name: "sdxl.vae.safetensors",
        size: 334_641_162,
        check: Check::Sha256("235745af8d86bf4a4c1b5b4f529868b37019a10f7c0b2e79ad0abca3a22bc6e1"),
        folder: "VAE",
        license: "MIT",
    },
    Entry {
        name: "taesd",
        title: "TAESD preview decoder, SD 1.x / 2.x (madebyollin)",
        url: "https://github.com/madebyollin/taesd/raw/7f572ca629c9b0d3c9f71140e5f501e09f9ea280/taesd_decoder.pth",
        file_name: "taesd_decoder.pth",
        size: 4_900_000,
        check: Check::GitBlob("5915a429fc08eba4adf62bf74f96705b8b0d5c1f"),
        folder: "VAE-taesd",
        license: "MIT",
    },
    Entry {
        name: "taesdxl",
        title: "TAESD preview decoder, SDXL (madebyollin)",
        url: "https://github.com/madebyollin/taesd/raw/7f572ca629c9b0d3c9f71140e5f501e09f9ea280/taesdxl_decoder.pth",
        file_name: "taesdxl_decoder.pth",
        size: 4_900_000,
        check: Check::GitBlob("477bc7e9604f418029508e72ac8719bb9d048291"),
        folder: "VAE-taesd",
        license: "MIT",
    },
];

impl Entry {
    /// The size as the catalogue shows it (`about …` where it is not checked exactly).
    pub fn size_text(&self) -> String {
        let size = inference::memory::human_bytes(self.size);
        match self.check {
            Check::Sha256(_) => size,
            Check::GitBlob(_) => format!("about {size}"),
        }
    }
}

/// The entry of that name (case-insensitive), if any.
pub fn find(name: &str) -> Option<&'static Entry> {
    CATALOGUE
        .iter()
        .find(|e| e.name.eq_ignore_ascii_case(name.trim()))
}
