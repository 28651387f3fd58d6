//! The choices the settings file stores by name ([`Named`]), and the serde adapter that
//! reads an unknown name (a newer version's choice) as a fallback.

use inference::api::{MaskedContent, RngSource, Seamless, VaeTiling};
use inference::canvas::FitMode;
use inference::schedule::named::{SamplerName, ScheduleName};
use inference::text::emphasis::Emphasis;

/// A choice the settings file stores by its name.
pub trait Named: Sized + Copy {
    /// The name written to the file.
    fn name(self) -> &'static str;
    /// The choice of that name, if there is one.
    fn from_name(name: &str) -> Option<Self>;
    /// What an unknown name (a newer version's choice) reads as.
    const FALLBACK: Self;
}

impl Named for SamplerName {
    fn name(self) -> &'static str {
        self.comfy_name()
    }
    fn from_name(name: &str) -> Option<Self> {
        SamplerName::parse(name).ok()
    }
    const FALLBACK: Self = SamplerName::DpmPp2M;
}

impl Named for ScheduleName {
    fn name(self) -> &'static str {
        self.comfy_name()
    }
    fn from_name(name: &str) -> Option<Self> {
        ScheduleName::parse(name).ok()
    }
    const FALLBACK: Self = ScheduleName::Karras;
}

impl Named for MaskedContent {
    fn name(self) -> &'static str {
        MaskedContent::name(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        MaskedContent::parse(name).ok()
    }
    const FALLBACK: Self = MaskedContent::Original;
}

impl Named for VaeTiling {
    fn name(self) -> &'static str {
        VaeTiling::name(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        VaeTiling::parse(name).ok()
    }
    const FALLBACK: Self = VaeTiling::Auto;
}

impl Named for Seamless {
    fn name(self) -> &'static str {
        Seamless::name(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        Seamless::parse(name).ok()
    }
    const FALLBACK: Self = Seamless::Off;
}

impl Named for RngSource {
    fn name(self) -> &'static str {
        RngSource::name(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        RngSource::parse(name).ok()
    }
    const FALLBACK: Self = RngSource::Cpu;
}

impl Named for Emphasis {
    fn name(self) -> &'static str {
        Emphasis::name(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        Emphasis::parse(name).ok()
    }
    const FALLBACK: Self = Emphasis::Original;
}

impl Named for inference::control::Module {
    fn name(self) -> &'static str {
        inference::control::Module::name(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        inference::control::Module::parse(name)
    }
    const FALLBACK: Self = inference::control::Module::None;
}

impl Named for FitMode {
    fn name(self) -> &'static str {
        FitMode::name(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        FitMode::parse(name)
    }
    const FALLBACK: Self = FitMode::Resize;
}

impl Named for inference::preview::PreviewMethod {
    fn name(self) -> &'static str {
        inference::preview::PreviewMethod::name(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        inference::preview::PreviewMethod::parse(name)
    }
    const FALLBACK: Self = inference::preview::PreviewMethod::Auto;
}

/// Serde for [`Named`] fields: the name as a string; an unknown name reads as the
/// fallback rather than failing the whole file.
pub(crate) mod by_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Named;

    pub fn serialize<S: Serializer, T: Named>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(value.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Named>(d: D) -> Result<T, D::Error> {
        let name = String::deserialize(d)?;
        Ok(T::from_name(&name).unwrap_or(T::FALLBACK))
    }
}
