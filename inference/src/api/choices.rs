//! Two named choices of a request, each read from and written as the CLI, the settings
//! file and PNG metadata name it: the SDE samplers' noise and inpainting's masked content.

/// The noise of the DPM++ SDE samplers (`dpmpp_sde`, `dpmpp_2m_sde`, `dpmpp_2m_sde_heun`,
/// `dpmpp_3m_sde`); the other samplers always draw from the image's generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum SdeNoise {
    /// torchsde's Brownian tree seeded with the image's seed: ComfyUI's and A1111's default,
    /// so the same seed gives their image.
    #[default]
    BrownianTree,
    /// Fresh draws from the image's generator, one per noise injection (diffusers'
    /// `DPMSolverMultistepScheduler` with `sde-dpmsolver++` does this).
    Generator,
}

impl SdeNoise {
    /// Parses `brownian` (or `brownian-tree`) or `generator`.
    pub fn parse(name: &str) -> crate::error::Result<Self> {
        match option_key(name).as_str() {
            "brownian" | "brownian-tree" => Ok(Self::BrownianTree),
            "generator" => Ok(Self::Generator),
            _ => Err(crate::error::Error::settings(format!(
                "unknown SDE noise {name:?}; valid: brownian, generator"
            ))),
        }
    }

    /// The name [`SdeNoise::parse`] reads (also written to PNG metadata).
    pub fn name(self) -> &'static str {
        match self {
            Self::BrownianTree => "brownian",
            Self::Generator => "generator",
        }
    }
}

/// What the masked area of an inpainting run starts from (A1111's "Masked content").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum MaskedContent {
    /// The init image as it is.
    #[default]
    Original,
    /// The masked pixels painted with the surrounding colours first
    /// ([`crate::canvas::fill_masked`], done before the engine).
    Fill,
    /// The masked latents replaced by the run's own initial noise (no extra draws).
    LatentNoise,
    /// The masked latents set to zero.
    LatentNothing,
}

impl MaskedContent {
    /// Parses `original`, `fill`, `latent-noise` or `latent-nothing` (A1111's labels too).
    pub fn parse(name: &str) -> crate::error::Result<Self> {
        match option_key(name).as_str() {
            "original" => Ok(Self::Original),
            "fill" => Ok(Self::Fill),
            "latent-noise" => Ok(Self::LatentNoise),
            "latent-nothing" => Ok(Self::LatentNothing),
            _ => Err(crate::error::Error::settings(format!(
                "unknown masked content {name:?}; valid: original, fill, latent-noise, latent-nothing"
            ))),
        }
    }

    /// Every option, in A1111's order.
    pub const ALL: [MaskedContent; 4] = [
        Self::Original,
        Self::Fill,
        Self::LatentNoise,
        Self::LatentNothing,
    ];

    /// The canonical name (`latent-noise`), as the CLI and the settings file write it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Original => "original",
            Self::Fill => "fill",
            Self::LatentNoise => "latent-noise",
            Self::LatentNothing => "latent-nothing",
        }
    }

    /// A1111's label, used in PNG metadata.
    pub fn a1111_name(self) -> &'static str {
        match self {
            Self::Original => "original",
            Self::Fill => "fill",
            Self::LatentNoise => "latent noise",
            Self::LatentNothing => "latent nothing",
        }
    }
}

/// An option name as typed (`Latent noise`, `latent_noise`) in its canonical form
/// (`latent-noise`).
fn option_key(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace(['_', ' '], "-")
}
