//! Whether the VAE runs on the whole image or in tiles (`--vae-tiling auto|on|off`).

use crate::error::{Error, Result};

/// When the VAE decodes (and encodes) in tiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum VaeTiling {
    /// In tiles only when the whole image would not fit in the memory that is free.
    #[default]
    Auto,
    /// In tiles whenever the image is larger than one tile (diffusers' `enable_tiling()`).
    On,
    /// Never: a request whose whole-image VAE cannot fit is refused before it starts.
    Off,
}

impl VaeTiling {
    pub const ALL: [VaeTiling; 3] = [VaeTiling::Auto, VaeTiling::On, VaeTiling::Off];

    /// `auto`, `on` or `off`.
    pub fn parse(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            _ => Err(Error::settings(format!(
                "unknown VAE tiling {name:?}; valid: auto, on, off"
            ))),
        }
    }

    /// The name [`VaeTiling::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::On => "on",
            Self::Off => "off",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_ones_say_the_choices() {
        for mode in VaeTiling::ALL {
            assert_eq!(VaeTiling::parse(mode.name()).unwrap(), mode);
        }
        assert_eq!(VaeTiling::parse(" ON ").unwrap(), VaeTiling::On);
        let message = VaeTiling::parse("sometimes").unwrap_err().to_string();
        assert!(message.contains("auto, on, off"), "{message}");
    }
}
