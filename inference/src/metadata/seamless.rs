//! Seamless tiling in A1111's `parameters`: `Tiling: True` (its Tiling option, both axes),
//! or its Asymmetric tiling script's `Tile X` / `Tile Y`.

use super::Parameters;
use crate::api::Seamless;

/// Writes `seamless` as A1111 does: nothing when off, `Tiling: True` for both axes, and the
/// Asymmetric tiling script's `Tile X` / `Tile Y` for one.
pub(super) fn push_fields(p: &mut Parameters, seamless: Seamless) {
    match seamless {
        Seamless::Off => {}
        Seamless::Both => p.push("Tiling", "True"),
        Seamless::X | Seamless::Y => {
            p.push("Tile X", python_bool(seamless.x()));
            p.push("Tile Y", python_bool(seamless.y()));
        }
    }
}

fn python_bool(value: bool) -> &'static str {
    if value { "True" } else { "False" }
}

/// The seamless tiling an image's parameters say it was made with. The Asymmetric tiling
/// script's fields win: while it runs, A1111 ignores its own Tiling option (which may
/// still be written).
pub fn seamless(p: &Parameters) -> Seamless {
    let yes = |key: &str| p.get(key).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if p.get("Tile X").is_some() || p.get("Tile Y").is_some() {
        return Seamless::from_axes(yes("Tile X"), yes("Tile Y"));
    }
    if yes("Tiling") {
        Seamless::Both
    } else {
        Seamless::Off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_reads_back_and_a1111s_own_fields_read() {
        for mode in Seamless::ALL {
            let mut p = Parameters::default();
            p.push("Steps", 20);
            push_fields(&mut p, mode);
            let text = p.to_text();
            assert_eq!(seamless(&Parameters::parse(&text)), mode, "{text}");
        }
        let a1111 = "a brick wall\nSteps: 20, Sampler: Euler a, Seed: 1, Tiling: True";
        assert_eq!(seamless(&Parameters::parse(a1111)), Seamless::Both);
        // The script ran: its axes, whatever the Tiling checkbox said.
        let script = "sky\nSteps: 20, Seed: 1, Tiling: True, Tile X: False, Tile Y: True";
        assert_eq!(seamless(&Parameters::parse(script)), Seamless::Y);
        let plain = "a cat\nSteps: 20, Sampler: Euler a, Seed: 1";
        assert_eq!(seamless(&Parameters::parse(plain)), Seamless::Off);
    }
}
