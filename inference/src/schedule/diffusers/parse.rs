//! Reading a `scheduler_config.json` into a [`SchedulerConfig`]: typed keys, diffusers'
//! defaults, and the settings Ember does not reproduce refused by name.

use serde_json::Value;

use super::{Prediction, SchedulerClass, SchedulerConfig, Spacing};
use crate::error::{Error, Result};
use crate::sampling::UniPcVariant;
use crate::schedule::BetaSchedule;

/// Python's `json` output made standard JSON: the bare `NaN`, `Infinity` and `-Infinity` it
/// writes for non-finite floats (diffusers saves `lambda_min_clipped: -Infinity`) become
/// `null`, outside strings only.
fn python_json(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("Infinity") && !text.contains("NaN") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            (in_string, escaped) = (escaped || c != '"', !escaped && c == '\\');
        } else if c == '"' {
            in_string = true;
        } else if let Some(token) = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|t| rest.starts_with(t))
        {
            out.push_str("null");
            rest = &rest[token.len()..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
}

/// Typed reads of a config's keys: a key that is absent or `null` is `None` (diffusers' default
/// applies); a key of the wrong type is an error naming it. Unknown keys are never read.
struct Fields<'a>(&'a Value);

impl<'a> Fields<'a> {
    fn get<T>(
        &self,
        key: &str,
        expected: &str,
        read: impl Fn(&'a Value) -> Option<T>,
    ) -> Result<Option<T>> {
        crate::models::config_json::typed(self.0, (key, "scheduler"), expected, read)
    }

    fn u64(&self, key: &str) -> Result<Option<u64>> {
        self.get(key, "a whole number", Value::as_u64)
    }

    fn f64(&self, key: &str) -> Result<Option<f64>> {
        self.get(key, "a number", Value::as_f64)
    }

    fn bool(&self, key: &str) -> Result<Option<bool>> {
        self.get(key, "true or false", Value::as_bool)
    }

    fn str(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key, "a string", Value::as_str)
    }
}

impl SchedulerConfig {
    /// What any `scheduler_config.json` says about the model itself, whatever its class:
    /// the prediction type and whether the table is rescaled to zero terminal SNR. Fails on
    /// invalid JSON, a wrong type or a prediction type Ember cannot run.
    pub fn model_facts(text: &str) -> Result<(Prediction, bool)> {
        let v: Value = serde_json::from_str(&python_json(text))
            .map_err(|e| Error::settings(format!("not valid JSON: {e}")))?;
        let fields = Fields(&v);
        let prediction = match fields.str("prediction_type")?.unwrap_or("epsilon") {
            "epsilon" => Prediction::Epsilon,
            "v_prediction" => Prediction::V,
            other => {
                return Err(Error::settings(format!(
                    "prediction_type {other:?} is not supported (epsilon or v_prediction)"
                )));
            }
        };
        Ok((
            prediction,
            fields.bool("rescale_betas_zero_snr")?.unwrap_or(false),
        ))
    }

    /// Parses a `scheduler_config.json`. Settings that change the result and that Ember does
    /// not reproduce are refused by name rather than ignored.
    pub fn from_json(text: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(&python_json(text))
            .map_err(|e| Error::settings(format!("scheduler config is not valid JSON: {e}")))?;
        let class_name = v["_class_name"]
            .as_str()
            .ok_or_else(|| Error::settings("scheduler config has no \"_class_name\""))?;
        let class = SchedulerClass::ALL
            .iter()
            .find(|(_, n)| *n == class_name)
            .map(|(c, _)| *c)
            .ok_or_else(|| {
                let known: Vec<&str> = SchedulerClass::ALL.iter().map(|(_, n)| *n).collect();
                Error::settings(format!(
                    "scheduler class {class_name} is not supported yet; supported: {}",
                    known.join(", ")
                ))
            })?;
        let fields = Fields(&v);
        let float = |key: &str, default: f64| fields.f64(key).map(|x| x.unwrap_or(default));
        let text_or = |key: &str, default: &'static str| {
            fields.str(key).map(|x| x.unwrap_or(default).to_string())
        };
        let flag = |key: &str, default: bool| fields.bool(key).map(|x| x.unwrap_or(default));
        let uint = |key: &str, default: u64| fields.u64(key).map(|x| x.unwrap_or(default));
        let refuse = |what: String| {
            Err(Error::settings(format!(
                "{class_name}: {what} is not supported yet"
            )))
        };

        if !v["trained_betas"].is_null() {
            return refuse("\"trained_betas\"".into());
        }
        for key in [
            "clip_sample",
            "thresholding",
            "use_exponential_sigmas",
            "use_beta_sigmas",
            "use_lu_lambdas",
        ] {
            if flag(key, false)? {
                return refuse(format!("\"{key}\": true"));
            }
        }
        let (start, end) = (float("beta_start", 0.0001)?, float("beta_end", 0.02)?);
        let betas = match text_or("beta_schedule", "linear")?.as_str() {
            "scaled_linear" => BetaSchedule::ScaledLinear { start, end },
            "linear" => BetaSchedule::Linear { start, end },
            other => return refuse(format!("beta_schedule {other:?}")),
        };
        let (prediction, zero_snr) = Self::model_facts(text)?;
        let spacing = match fields.str("timestep_spacing")? {
            None => class.default_spacing(),
            Some("linspace") => Spacing::Linspace,
            Some("leading") => Spacing::Leading,
            Some("trailing") => Spacing::Trailing,
            Some(other) => return refuse(format!("timestep_spacing {other:?}")),
        };
        if text_or("interpolation_type", "linear")? != "linear" {
            return refuse("interpolation_type other than \"linear\"".into());
        }
        if text_or("timestep_type", "discrete")? != "discrete" {
            return refuse("timestep_type other than \"discrete\"".into());
        }
        if text_or("final_sigmas_type", "zero")? != "zero" {
            return refuse("final_sigmas_type other than \"zero\"".into());
        }
        let mut solver_order = 2;
        let mut sde = false;
        if class == SchedulerClass::DpmSolverMultistep {
            match text_or("algorithm_type", "dpmsolver++")?.as_str() {
                "dpmsolver++" => {}
                "sde-dpmsolver++" => sde = true,
                other => return refuse(format!("algorithm_type {other:?}")),
            }
            if text_or("solver_type", "midpoint")? != "midpoint" {
                return refuse("solver_type other than \"midpoint\"".into());
            }
            solver_order = uint("solver_order", 2)? as usize;
            if !(1..=2).contains(&solver_order) || (sde && solver_order == 1) {
                return refuse(format!("solver_order {solver_order}"));
            }
        }
        let mut unipc_variant = UniPcVariant::Bh2;
        if class == SchedulerClass::UniPcMultistep {
            unipc_variant = match text_or("solver_type", "bh2")?.as_str() {
                "bh1" => UniPcVariant::Bh1,
                "bh2" => UniPcVariant::Bh2,
                other => return refuse(format!("solver_type {other:?}")),
            };
            solver_order = uint("solver_order", 2)? as usize;
            if !(1..=3).contains(&solver_order) {
                return refuse(format!("solver_order {solver_order}"));
            }
            if !flag("predict_x0", true)? || !flag("lower_order_final", true)? {
                return refuse("\"predict_x0\" or \"lower_order_final\" false".into());
            }
            if v["disable_corrector"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
                || !v["solver_p"].is_null()
            {
                return refuse("\"disable_corrector\" or \"solver_p\"".into());
            }
        }
        if class == SchedulerClass::DeisMultistep {
            for (key, want) in [("algorithm_type", "deis"), ("solver_type", "logrho")] {
                let got = text_or(key, want)?;
                if got != want {
                    return refuse(format!("{key} {got:?}"));
                }
            }
            solver_order = uint("solver_order", 2)? as usize;
            if !(1..=2).contains(&solver_order) {
                return refuse(format!("solver_order {solver_order}"));
            }
            if !flag("lower_order_final", true)? {
                return refuse("\"lower_order_final\": false".into());
            }
        }
        if class == SchedulerClass::Ddpm {
            let variance = text_or("variance_type", "fixed_small")?;
            if variance != "fixed_small" {
                return refuse(format!("variance_type {variance:?}"));
            }
        }
        let num_train_timesteps = uint("num_train_timesteps", 1000)? as usize;
        if !(2..=100_000).contains(&num_train_timesteps) {
            return refuse(format!("num_train_timesteps {num_train_timesteps}"));
        }
        Ok(Self {
            class,
            num_train_timesteps,
            betas,
            prediction,
            spacing,
            steps_offset: uint("steps_offset", 0)? as usize,
            // DDPMScheduler has no such setting: past the start it always uses alpha 1.
            set_alpha_to_one: class == SchedulerClass::Ddpm
                || flag("set_alpha_to_one", class == SchedulerClass::Ddim)?,
            use_karras_sigmas: flag("use_karras_sigmas", false)?,
            solver_order,
            unipc_variant,
            sde,
            noise_sampler_seed: fields.u64("noise_sampler_seed")?,
            zero_snr,
            original_inference_steps: uint("original_inference_steps", 50)? as usize,
            timestep_scaling: float("timestep_scaling", 10.0)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_types_are_errors_naming_the_key() {
        let base = r#"{"_class_name": "DPMSolverMultistepScheduler", "KEY": VALUE}"#;
        let config = |key: &str, value: &str| {
            SchedulerConfig::from_json(&base.replace("KEY", key).replace("VALUE", value))
        };
        assert_eq!(config("solver_order", "1").unwrap().solver_order, 1);
        assert!(
            config("some_future_key", "\"anything\"").is_ok(),
            "unknown keys are ignored"
        );
        for (key, bad) in [
            ("solver_order", "\"two\""),
            ("solver_order", "1.5"),
            ("beta_start", "\"small\""),
            ("use_karras_sigmas", "1"),
            ("timestep_spacing", "3"),
            ("num_train_timesteps", "-5"),
        ] {
            let e = config(key, bad).unwrap_err().to_string();
            assert!(e.contains(key), "{key} = {bad}: {e}");
        }
        let facts = SchedulerConfig::model_facts(
            r#"{"prediction_type": "v_prediction",
            "_class_name": "FlowMatchEulerDiscreteScheduler", "rescale_betas_zero_snr": true}"#,
        );
        assert_eq!(facts.unwrap(), (Prediction::V, true));
        assert!(SchedulerConfig::model_facts(r#"{"prediction_type": 1}"#).is_err());
        assert!(SchedulerConfig::model_facts(r#"{"prediction_type": "sample"}"#).is_err());
    }

    #[test]
    fn python_infinities_read_as_null_outside_strings() {
        let text = r#"{"_class_name": "DPMSolverMultistepScheduler", "lambda_min_clipped": -Infinity, "note": "NaN \"Infinity\"", "x": NaN}"#;
        let fixed = python_json(text);
        let v: Value = serde_json::from_str(&fixed).unwrap();
        assert!(v["lambda_min_clipped"].is_null() && v["x"].is_null());
        assert_eq!(v["note"], "NaN \"Infinity\"");
        assert!(SchedulerConfig::from_json(text).is_ok());
    }
}
