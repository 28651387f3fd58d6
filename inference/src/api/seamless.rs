//! Seamless tiling (A1111's "Tiling", `--seamless both|x|y|off`): images whose opposite
//! edges meet, for textures and patterns that repeat without a seam.

use crate::error::{Error, Result};

/// Which edges of the image continue into each other. Every convolution of the UNet and
/// the VAE pads circularly on those axes ([`kernels::wrap`]), as A1111's "Tiling" and its
/// "Asymmetric tiling" script do; a ControlNet keeps its zero padding, as in A1111, where
/// the ControlNet extension's model is not among the layers the switch reaches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Seamless {
    #[default]
    Off,
    /// Both axes: the image tiles in a grid (A1111's "Tiling").
    Both,
    /// Left and right edges meet: the image repeats side by side.
    X,
    /// Top and bottom edges meet: the image repeats one above another.
    Y,
}

impl Seamless {
    pub const ALL: [Seamless; 4] = [Seamless::Off, Seamless::Both, Seamless::X, Seamless::Y];

    /// `off`, `both`, `x` or `y` (`xy` for both).
    pub fn parse(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "off" | "none" => Ok(Self::Off),
            "both" | "xy" => Ok(Self::Both),
            "x" => Ok(Self::X),
            "y" => Ok(Self::Y),
            _ => Err(Error::settings(format!(
                "unknown seamless tiling {name:?}; valid: off, both, x, y"
            ))),
        }
    }

    /// The name [`Seamless::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Both => "both",
            Self::X => "x",
            Self::Y => "y",
        }
    }

    /// The setting that wraps `x` and `y` as given.
    pub fn from_axes(x: bool, y: bool) -> Self {
        match (x, y) {
            (false, false) => Self::Off,
            (true, true) => Self::Both,
            (true, false) => Self::X,
            (false, true) => Self::Y,
        }
    }

    /// Whether the left and right edges meet.
    pub fn x(self) -> bool {
        matches!(self, Self::Both | Self::X)
    }

    /// Whether the top and bottom edges meet.
    pub fn y(self) -> bool {
        matches!(self, Self::Both | Self::Y)
    }

    pub fn is_on(self) -> bool {
        self != Self::Off
    }

    /// What the convolutions wrap.
    pub fn wrap(self) -> kernels::wrap::Wrap {
        kernels::wrap::Wrap {
            x: self.x(),
            y: self.y(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_axes_round_trip_and_bad_names_say_the_choices() {
        for mode in Seamless::ALL {
            assert_eq!(Seamless::parse(mode.name()).unwrap(), mode);
            assert_eq!(Seamless::from_axes(mode.x(), mode.y()), mode);
        }
        assert_eq!(Seamless::parse(" XY ").unwrap(), Seamless::Both);
        let message = Seamless::parse("diagonal").unwrap_err().to_string();
        assert!(message.contains("off, both, x, y"), "{message}");
    }

    /// Tiles would not see across the edges that meet: `auto` decodes whole (refusing what
    /// cannot fit), and `on` is refused with what to change.
    #[test]
    fn a_seamless_image_never_runs_the_vae_in_tiles() {
        use crate::api::{GenerateRequest, VaeTiling};
        let request = |seamless, vae_tiling| GenerateRequest {
            seamless,
            vae_tiling,
            ..GenerateRequest::default()
        };
        let tiled = request(Seamless::X, VaeTiling::On).validate_settings();
        let message = tiled.unwrap_err().to_string();
        assert!(message.contains("VAE tiling to auto or off"), "{message}");
        let auto = request(Seamless::Both, VaeTiling::Auto);
        auto.validate_settings().unwrap();
        assert_eq!(auto.effective_vae_tiling(), VaeTiling::Off);
        let plain = request(Seamless::Off, VaeTiling::Auto);
        assert_eq!(plain.effective_vae_tiling(), VaeTiling::Auto);
        assert_eq!(
            request(Seamless::Off, VaeTiling::On).effective_vae_tiling(),
            VaeTiling::On
        );
    }
}
