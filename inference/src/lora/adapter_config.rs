//! A PEFT adapter folder's `adapter_config.json`: the alpha its dotted-name adapters scale by.

use std::path::Path;

use super::file::{Adapter, ModuleName};
use crate::error::{Error, Result};

/// A PEFT adapter folder's `adapter_config.json` beside the file: its `lora_alpha` (or the
/// `alpha_pattern` entry whose name ends the module's path) over the rank, or over the
/// rank's square root with `use_rslora`, scales every dotted-name adapter that has no
/// `.alpha` of its own. Without the file such adapters scale by 1 (diffusers' own files
/// fold the alpha into `lora_B`).
pub(super) fn apply_adapter_config(path: &Path, adapters: &mut [Adapter]) -> Result<()> {
    let config_path = path.with_file_name("adapter_config.json");
    if !config_path.is_file() {
        return Ok(());
    }
    let bad = |m: String| Error::invalid_model(&config_path, m);
    let text = std::fs::read_to_string(&config_path).map_err(|e| Error::io(&config_path, e))?;
    let config: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not JSON ({e})")))?;
    let Some(alpha) = config.get("lora_alpha").and_then(serde_json::Value::as_f64) else {
        return Err(bad("no number `lora_alpha`".into()));
    };
    let rslora = config
        .get("use_rslora")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let patterns = config
        .get("alpha_pattern")
        .and_then(serde_json::Value::as_object)
        .cloned()
        .unwrap_or_default();
    for adapter in adapters.iter_mut() {
        let ModuleName::Dotted(module) = &adapter.module else {
            continue;
        };
        let (None, Some(dim)) = (adapter.alpha, adapter.dim()) else {
            continue;
        };
        let alpha = patterns
            .iter()
            .find(|(name, _)| module == *name || module.ends_with(&format!(".{name}")))
            .and_then(|(_, v)| v.as_f64())
            .unwrap_or(alpha);
        if !alpha.is_finite() || alpha.abs() > 1e6 {
            return Err(bad(format!("lora_alpha {alpha} is not a usable number")));
        }
        // `scale()` divides by the rank; rsLoRA divides by its square root instead.
        let dim = dim as f64;
        let effective = if rslora {
            alpha * dim / dim.sqrt()
        } else {
            alpha
        };
        adapter.alpha = Some(effective as f32);
    }
    Ok(())
}
