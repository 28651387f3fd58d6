//! The plot's axes: what each can change (A1111's names), the values typed for one, and
//! those values read and labelled.

use inference::schedule::named::{SamplerName, ScheduleName};

use super::values;

/// What an axis changes, by A1111's names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AxisKind {
    #[default]
    Nothing,
    Seed,
    VarSeed,
    VarStrength,
    Steps,
    CfgScale,
    PromptSr,
    Sampler,
    Schedule,
    Denoising,
    ClipSkip,
    Size,
    Vae,
    Checkpoint,
}

impl AxisKind {
    pub const ALL: [AxisKind; 14] = [
        AxisKind::Nothing,
        AxisKind::Seed,
        AxisKind::VarSeed,
        AxisKind::VarStrength,
        AxisKind::Steps,
        AxisKind::CfgScale,
        AxisKind::PromptSr,
        AxisKind::Sampler,
        AxisKind::Schedule,
        AxisKind::Denoising,
        AxisKind::ClipSkip,
        AxisKind::Size,
        AxisKind::Vae,
        AxisKind::Checkpoint,
    ];

    /// A1111's name (its menu's and its metadata's `X Type`).
    pub fn name(self) -> &'static str {
        match self {
            AxisKind::Nothing => "Nothing",
            AxisKind::Seed => "Seed",
            AxisKind::VarSeed => "Var. seed",
            AxisKind::VarStrength => "Var. strength",
            AxisKind::Steps => "Steps",
            AxisKind::CfgScale => "CFG Scale",
            AxisKind::PromptSr => "Prompt S/R",
            AxisKind::Sampler => "Sampler",
            AxisKind::Schedule => "Schedule type",
            AxisKind::Denoising => "Denoising",
            AxisKind::ClipSkip => "Clip skip",
            AxisKind::Size => "Size",
            AxisKind::Vae => "VAE",
            AxisKind::Checkpoint => "Checkpoint name",
        }
    }

    /// The kind of an A1111 name, any case.
    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
                format!("no axis {name:?}; the axes are {}", names.join(", "))
            })
    }

    /// An example of its values, for a hint.
    pub fn example(self) -> &'static str {
        match self {
            AxisKind::Nothing => "",
            AxisKind::Seed | AxisKind::VarSeed => "-1, -1, 1234",
            AxisKind::VarStrength => "0, 0.1, 0.2",
            AxisKind::Steps => "10-40 (+10)",
            AxisKind::CfgScale => "4-10 [4]",
            AxisKind::PromptSr => "dog, cat, fox",
            AxisKind::Sampler => "Euler a, DPM++ 2M, DDIM",
            AxisKind::Schedule => "Karras, Exponential",
            AxisKind::Denoising => "0.3-0.7 (+0.2)",
            AxisKind::ClipSkip => "1, 2",
            AxisKind::Size => "512x512, 512x768",
            AxisKind::Vae => "None, sdxl_vae.safetensors",
            AxisKind::Checkpoint => "v1-5-pruned-emaonly, dreamshaper_8",
        }
    }
}

/// One axis as typed: its kind and its values' text.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct AxisSpec {
    pub kind: AxisKind,
    pub values: String,
}

/// One value of an axis.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Value {
    Nothing,
    Int(i128),
    Float(f64),
    Text(String),
    Sampler(SamplerName),
    Schedule(ScheduleName),
    Size(u32, u32),
}

/// An axis with its values read.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Axis {
    pub kind: AxisKind,
    pub typed: String,
    pub values: Vec<Value>,
}

impl Axis {
    pub fn parse(spec: &AxisSpec) -> Result<Self, String> {
        use AxisKind as K;
        let listed = values::split(&spec.values)?;
        let texts = || listed.iter().filter(|v| !v.is_empty());
        let values: Vec<Value> = match spec.kind {
            K::Nothing => vec![Value::Nothing],
            K::Seed | K::VarSeed | K::Steps | K::ClipSkip => values::integers(&listed)?
                .into_iter()
                .map(Value::Int)
                .collect(),
            K::VarStrength | K::CfgScale | K::Denoising => values::floats(&listed)?
                .into_iter()
                .map(Value::Float)
                .collect(),
            // A1111 keeps empty values here: replacing the word by nothing is a value.
            K::PromptSr => listed.iter().cloned().map(Value::Text).collect(),
            // Names, found among the VAE files when the plot is planned.
            K::Vae | K::Checkpoint => texts().cloned().map(Value::Text).collect(),
            K::Sampler => texts()
                .map(|v| SamplerName::parse(v).map(Value::Sampler))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?,
            K::Schedule => texts()
                .map(|v| ScheduleName::parse(v).map(Value::Schedule))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?,
            K::Size => texts().map(|v| parse_size(v)).collect::<Result<_, _>>()?,
        };
        if values.is_empty() {
            return Err(format!(
                "{} has no values (for example {})",
                spec.kind.name(),
                spec.kind.example()
            ));
        }
        if spec.kind == K::PromptSr && values.len() < 2 {
            return Err(
                "Prompt S/R needs the word to find and at least one to put in its \
                        place (dog, cat)"
                    .into(),
            );
        }
        Ok(Self {
            kind: spec.kind,
            typed: spec.values.trim().to_string(),
            values,
        })
    }

    /// A1111's label of a value: `Steps: 20`, the value alone for samplers and prompts.
    pub fn label(&self, value: &Value) -> String {
        let text = match value {
            Value::Nothing => return String::new(),
            Value::Int(v) => v.to_string(),
            Value::Float(v) => values::python_float(*v),
            Value::Text(v) if self.kind == AxisKind::PromptSr => return v.clone(),
            // A1111's `format_remove_path`: the name without its folder, and no label.
            Value::Text(v) if self.kind == AxisKind::Checkpoint => {
                let name = v.rsplit(['/', '\\']).next().unwrap_or(v);
                return name.to_string();
            }
            Value::Text(v) => v.clone(),
            Value::Sampler(s) => return s.a1111_name().to_string(),
            Value::Schedule(s) => s.a1111_name().to_string(),
            Value::Size(w, h) => format!("{w}x{h}"),
        };
        format!("{}: {text}", self.kind.name())
    }
}

/// `512x768`: A1111 splits at the `x`.
fn parse_size(text: &str) -> Result<Value, String> {
    let bad = || format!("{text:?} is not a size such as 512x768");
    let (w, h) = text.split_once(['x', 'X', '×']).ok_or_else(bad)?;
    let side = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
    Ok(Value::Size(side(w)?, side(h)?))
}

/// Stored by its A1111 name; a name this version does not know reads as Nothing.
impl serde::Serialize for AxisKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for AxisKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <String as serde::Deserialize>::deserialize(d)?;
        Ok(Self::parse(&name).unwrap_or_default())
    }
}
