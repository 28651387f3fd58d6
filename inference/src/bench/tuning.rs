//! Reads the decisions Burn's autotune logged during a benchmark, to say which attention
//! kernel ran on the GPU for each shape.

use std::path::Path;

/// The kernel autotune chose for one class of attention shapes. Autotune rounds each size
/// up to a power of two and tunes once per class, so the sizes here are the class's bounds
/// (SD 1.5's 77 text tokens are tuned as 128).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttentionChoice {
    /// Batch times heads.
    pub batches: usize,
    pub seq_q: usize,
    pub seq_kv: usize,
    pub head_dim: usize,
    /// Burn's name for it: `fallback` materialises the whole score matrix; `unit` and
    /// `blackbox_accelerated_*` are flash kernels (the latter on the matrix units).
    pub kernel: String,
}

impl AttentionChoice {
    /// Whether the kernel is a flash one (never builds the `seq_q × seq_kv` scores).
    pub fn is_flash(&self) -> bool {
        self.kernel != "fallback"
    }
}

impl std::fmt::Display for AttentionChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.is_flash() {
            "flash"
        } else {
            "materialised"
        };
        write!(
            f,
            "up to {}x{} tokens, head {}, {} heads x batch: {path} ({})",
            self.seq_q, self.seq_kv, self.head_dim, self.batches, self.kernel
        )
    }
}

/// The attention decisions in an autotune decision log (one JSON object a line, as cubecl
/// writes them); other operations' lines and unreadable ones are passed over. Empty when
/// the file is missing (nothing ran on a GPU).
pub fn attention_choices(log: &Path) -> Vec<AttentionChoice> {
    let Ok(text) = std::fs::read_to_string(log) else {
        return Vec::new();
    };
    let mut choices: Vec<AttentionChoice> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|decision| attention_choice(&decision))
        .collect();
    choices.dedup();
    choices
}

fn attention_choice(decision: &serde_json::Value) -> Option<AttentionChoice> {
    let key = decision.get("key")?;
    let field = |name: &str| key.get(name)?.as_u64().map(|v| v as usize);
    // Only attention's key has both sequence lengths.
    let (seq_q, seq_kv) = (field("seq_q")?, field("seq_kv")?);
    let fastest = decision.get("fastest_index")?.as_u64()?;
    let kernel = decision
        .get("results")?
        .as_array()?
        .iter()
        .filter_map(|r| r.get("outcome")?.get("Ok"))
        .find(|outcome| outcome.get("index").and_then(|i| i.as_u64()) == Some(fastest))?
        .get("name")?
        .as_str()?
        .to_string();
    Some(AttentionChoice {
        batches: field("total_batches")?,
        seq_q,
        seq_kv,
        head_dim: field("head_dim")?,
        kernel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_attention_decisions_and_passes_over_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("decisions.jsonl");
        let attention = |seq: usize, fastest: usize| {
            serde_json::json!({
                "key": {"total_batches": 16, "seq_q": seq, "head_dim": 40, "seq_kv": seq,
                        "val_dim": 40, "attention_mask": false},
                "fastest_index": fastest,
                "results": [
                    {"outcome": {"Ok": {"name": "unit", "index": 4}}},
                    {"outcome": {"Ok": {"name": "fallback", "index": 0}}},
                    {"outcome": {"Err": "Skip"}},
                ],
            })
            .to_string()
        };
        let matmul = serde_json::json!({
            "key": {"m": 64, "n": 64, "k": 64}, "fastest_index": 0,
            "results": [{"outcome": {"Ok": {"name": "simple", "index": 0}}}],
        });
        let text = [
            attention(4096, 4),
            "not json".into(),
            matmul.to_string(),
            attention(1024, 0),
        ];
        std::fs::write(&log, text.join("\n")).unwrap();
        let choices = attention_choices(&log);
        assert_eq!(choices.len(), 2);
        assert_eq!(
            (choices[0].seq_q, choices[0].kernel.as_str()),
            (4096, "unit")
        );
        assert!(choices[0].is_flash());
        assert_eq!(
            (choices[1].seq_q, choices[1].kernel.as_str()),
            (1024, "fallback")
        );
        assert!(!choices[1].is_flash());
        assert!(attention_choices(&dir.path().join("missing")).is_empty());
    }
}
