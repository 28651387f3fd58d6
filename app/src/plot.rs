//! A1111's X/Y/Z plot: up to three axes of settings (steps, CFG, sampler, a prompt word…),
//! one image per combination, and one labelled grid of them all. Shared by the app and
//! `ember generate --plot-x …`; [`grid`] draws the grid.

use inference::api::{GenerateRequest, PinnedModel, SamplerChoice, VaeChoice, Variation};
use inference::metadata::Parameters;

mod axis;
pub mod grid;
mod text;
mod values;

use axis::{Axis, Value};
pub use axis::{AxisKind, AxisSpec};

/// The most images one plot makes.
pub const MAX_CELLS: usize = 500;

/// Three axes read, X, Y and Z.
#[derive(Clone, Debug, PartialEq)]
pub struct Plot {
    axes: [Axis; 3],
}

/// The images a plot makes: one request a cell, X fastest (A1111's order: Z, then Y, then
/// X), with their labels and the seeds fixed for `-1`.
#[derive(Clone, Debug)]
pub struct Planned {
    pub cells: Vec<Cell>,
    /// Each axis' value labels.
    pub labels: [Vec<String>; 3],
    /// `[x, y, z]` counts.
    pub shape: [usize; 3],
    /// The metadata fields the grid adds to its first image's: `Script: X/Y/Z plot`,
    /// `X Type`, `X Values`, `Fixed X Values` (the seeds drawn for `-1`).
    pub fields: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
pub struct Cell {
    /// `[x, y, z]` value indices.
    pub at: [usize; 3],
    pub request: GenerateRequest,
}

impl Planned {
    /// Cell `i`'s labels, as its grid shows them (`Steps: 20, Euler a`); empty ones left out.
    pub fn cell_label(&self, i: usize) -> String {
        let at = self.cells[i].at;
        let labels: Vec<&str> = (0..3)
            .map(|axis| self.labels[axis][at[axis]].as_str())
            .filter(|l| !l.is_empty())
            .collect();
        labels.join(", ")
    }

    /// The grid's metadata: the first image's, with the plot's fields added.
    pub fn grid_parameters(&self, first_image: &str) -> String {
        let mut parameters = Parameters::parse(first_image);
        for (key, value) in &self.fields {
            parameters.push(key, value);
        }
        parameters.to_text()
    }
}

/// How the requests are made beyond the base request.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The variation seed a Var. strength axis uses when the base request has none.
    pub variation_seed: u64,
    /// A Sampler axis takes each sampler's own schedule (A1111's "Automatic"; the command
    /// line without `--schedule`), else it keeps the base request's.
    pub schedule_follows_sampler: bool,
    /// The VAE files and folders a VAE axis' names are found among (by file name, any
    /// case, as A1111's `find_vae`).
    pub vaes: &'a [std::path::PathBuf],
    /// The models a Checkpoint name axis' names are found among (A1111's checkpoint list:
    /// the models folder's, or those beside `--model`).
    pub checkpoints: &'a [PinnedModel],
}

impl Plot {
    /// Reads three axes; errors name the axis (`X: …`).
    pub fn parse(specs: &[AxisSpec; 3]) -> Result<Self, String> {
        let mut axes = Vec::with_capacity(3);
        for (spec, letter) in specs.iter().zip(["X", "Y", "Z"]) {
            axes.push(Axis::parse(spec).map_err(|e| format!("{letter} axis: {e}"))?);
        }
        let axes: [Axis; 3] = axes.try_into().expect("three axes");
        let count: usize = axes.iter().map(|a| a.values.len()).product();
        if count > MAX_CELLS {
            return Err(format!(
                "the plot would make {count} images (at most {MAX_CELLS}); use fewer values"
            ));
        }
        Ok(Self { axes })
    }

    /// `true` when every axis is Nothing: no plot to make.
    pub fn is_empty(&self) -> bool {
        self.axes.iter().all(|a| a.kind == AxisKind::Nothing)
    }

    /// Whether an axis is of `kind`.
    pub fn has(&self, kind: AxisKind) -> bool {
        self.axes.iter().any(|a| a.kind == kind)
    }

    /// `[x, y, z]` value counts.
    pub fn shape(&self) -> [usize; 3] {
        self.axes.clone().map(|a| a.values.len())
    }

    /// The cell requests made from `base` (its seed already fixed), each checked, with the
    /// seed axes' `-1` values drawn at random once here.
    pub fn plan(&self, base: &GenerateRequest, context: Context<'_>) -> Result<Planned, String> {
        let mut axes = self.axes.clone();
        let mut fields = vec![("Script".to_string(), "X/Y/Z plot".to_string())];
        for (axis, letter) in axes.iter_mut().zip(["X", "Y", "Z"]) {
            if axis.kind == AxisKind::Nothing {
                continue;
            }
            fields.push((format!("{letter} Type"), axis.kind.name().into()));
            fields.push((format!("{letter} Values"), axis.typed.clone()));
            if matches!(axis.kind, AxisKind::Seed | AxisKind::VarSeed) {
                let mut fixed = Vec::with_capacity(axis.values.len());
                for value in &mut axis.values {
                    if let Value::Int(-1) = value {
                        // A 32-bit seed, as the app draws one.
                        *value = Value::Int(i128::from(inference::rng::random_seed()));
                    }
                    if let Value::Int(v) = value {
                        fixed.push(v.to_string());
                    }
                }
                fields.push((format!("Fixed {letter} Values"), fixed.join(", ")));
            }
            if axis.kind == AxisKind::PromptSr {
                let Value::Text(find) = &axis.values[0] else {
                    unreachable!("Prompt S/R values are text")
                };
                let prompts = [&base.prompt, &base.negative_prompt];
                let seconds = [&base.prompt_2, &base.negative_prompt_2];
                let found = prompts.iter().any(|p| p.contains(find.as_str()))
                    || seconds
                        .iter()
                        .flat_map(|p| p.as_deref())
                        .any(|p| p.contains(find.as_str()));
                if find.is_empty() {
                    return Err(format!(
                        "{letter} axis: Prompt S/R's first value is the text it replaces; \
                         it is empty"
                    ));
                }
                if !found {
                    return Err(format!(
                        "{letter} axis: Prompt S/R's first value, {find:?}, is the text it \
                         replaces, and the prompts do not contain it"
                    ));
                }
            }
        }
        let shape = axes.clone().map(|a| a.values.len());
        let mut cells = Vec::with_capacity(shape.iter().product());
        for z in 0..shape[2] {
            for y in 0..shape[1] {
                for x in 0..shape[0] {
                    let mut request = base.clone();
                    for ((axis, i), letter) in axes.iter().zip([x, y, z]).zip(["X", "Y", "Z"]) {
                        apply(axis, &axis.values[i], &mut request, base, context)
                            .map_err(|e| format!("{letter} axis: {e}"))?;
                    }
                    request.validate_settings().map_err(|e| {
                        let labels: Vec<String> = axes
                            .iter()
                            .zip([x, y, z])
                            .map(|(a, i)| a.label(&a.values[i]))
                            .filter(|l| !l.is_empty())
                            .collect();
                        format!("the image for {}: {e}", labels.join(", "))
                    })?;
                    cells.push(Cell {
                        at: [x, y, z],
                        request,
                    });
                }
            }
        }
        // A1111 makes its costliest axis the outermost loop: one load per checkpoint.
        if let Some(axis) = axes.iter().position(|a| a.kind == AxisKind::Checkpoint) {
            cells.sort_by_key(|c| c.at[axis]);
        }
        let labels = axes
            .clone()
            .map(|a| a.values.iter().map(|v| a.label(v)).collect());
        Ok(Planned {
            cells,
            labels,
            shape,
            fields,
        })
    }
}

/// Sets what `value` of `axis` says on a cell's request.
fn apply(
    axis: &Axis,
    value: &Value,
    request: &mut GenerateRequest,
    base: &GenerateRequest,
    context: Context<'_>,
) -> Result<(), String> {
    let whole = |v: i128, what: &str| {
        u32::try_from(v).map_err(|_| format!("{what} must be a whole number from 0, got {v}"))
    };
    match (axis.kind, value) {
        (AxisKind::Nothing, _) => {}
        (AxisKind::Seed, Value::Int(v)) => {
            request.seed = u64::try_from(*v)
                .map_err(|_| format!("a seed is a whole number from 0 (or -1), got {v}"))?;
        }
        (AxisKind::VarSeed, Value::Int(v)) => {
            let seed = u64::try_from(*v).map_err(|_| {
                format!("a variation seed is a whole number from 0 (or -1), got {v}")
            })?;
            let strength = request.noise.variation.map_or(0.0, |v| v.strength);
            request.noise.variation = Some(Variation { seed, strength });
        }
        (AxisKind::VarStrength, Value::Float(v)) => {
            let seed = request
                .noise
                .variation
                .map_or(context.variation_seed, |v| v.seed);
            request.noise.variation = Some(Variation {
                seed,
                strength: *v as f32,
            });
        }
        (AxisKind::Steps, Value::Int(v)) => request.steps = whole(*v, "steps")?,
        (AxisKind::ClipSkip, Value::Int(v)) => request.clip_skip = whole(*v, "clip skip")?,
        (AxisKind::CfgScale, Value::Float(v)) => request.cfg_scale = *v as f32,
        (AxisKind::PromptSr, Value::Text(to)) => {
            let Value::Text(find) = &axis.values[0] else {
                unreachable!("Prompt S/R values are text")
            };
            for prompt in [&mut request.prompt, &mut request.negative_prompt] {
                *prompt = prompt.replace(find.as_str(), to);
            }
            for prompt in [&mut request.prompt_2, &mut request.negative_prompt_2]
                .into_iter()
                .flatten()
            {
                *prompt = prompt.replace(find.as_str(), to);
            }
        }
        (AxisKind::Sampler, Value::Sampler(sampler)) => {
            let schedule = match &request.sampler {
                _ if context.schedule_follows_sampler => sampler.a1111_automatic_schedule(),
                SamplerChoice::Named { schedule, .. } => *schedule,
                SamplerChoice::Diffusers(_) => {
                    return Err("a Sampler axis needs a named sampler, not a diffusers \
                                scheduler config (give --sampler instead)"
                        .into());
                }
            };
            request.sampler = SamplerChoice::Named {
                sampler: *sampler,
                schedule,
            };
        }
        (AxisKind::Schedule, Value::Schedule(schedule)) => match &mut request.sampler {
            SamplerChoice::Named { schedule: s, .. } => *s = *schedule,
            SamplerChoice::Diffusers(_) => {
                return Err(
                    "a Schedule type axis needs a named sampler, not a diffusers \
                            scheduler config (give --sampler instead)"
                        .into(),
                );
            }
        },
        (AxisKind::Denoising, Value::Float(v)) => match (&mut request.hires, &base.init_image) {
            (Some(fix), _) => fix.strength = *v as f32,
            (None, Some(_)) => request.strength = *v as f32,
            (None, None) => {
                return Err("Denoising sets the hires fix's denoising strength, or \
                            img2img's: turn on the hires fix or start from an image"
                    .into());
            }
        },
        (AxisKind::Size, Value::Size(w, h)) => {
            request.width = *w;
            request.height = *h;
        }
        (AxisKind::Vae, Value::Text(name)) => request.vae = find_vae(name, context.vaes)?,
        (AxisKind::Checkpoint, Value::Text(name)) => {
            request.checkpoint = Some(find_checkpoint(name, context.checkpoints)?);
        }
        (kind, value) => unreachable!("{kind:?} never holds {value:?}"),
    }
    Ok(())
}

/// A VAE axis' value as a choice: A1111's `auto` / `automatic` and `none`, else the VAE of
/// that file name (any case), else a path that exists.
fn find_vae(name: &str, vaes: &[std::path::PathBuf]) -> Result<VaeChoice, String> {
    match name.trim().to_lowercase().as_str() {
        "auto" | "automatic" => return Ok(VaeChoice::Automatic),
        "none" => return Ok(VaeChoice::ModelsOwn),
        _ => {}
    }
    let file_name = |p: &std::path::Path| p.file_name().map(|n| n.to_string_lossy().to_lowercase());
    let wanted = name.trim().to_lowercase();
    if let Some(path) = vaes
        .iter()
        .find(|p| file_name(p).as_deref() == Some(&wanted))
    {
        return Ok(VaeChoice::File(path.clone()));
    }
    let path = std::path::Path::new(name.trim());
    if path.exists() {
        return Ok(VaeChoice::File(path.to_path_buf()));
    }
    let known: Vec<String> = vaes.iter().filter_map(|p| file_name(p)).collect();
    let known = match known.is_empty() {
        true => "there are none in the models folder's VAE/".to_string(),
        false => format!("they are {}", known.join(", ")),
    };
    Err(format!(
        "no VAE named {name:?} (VAE values are Automatic, None or a VAE's file name; {known})"
    ))
}

/// A Checkpoint name axis' value as a model, as A1111's `get_closet_checkpoint_match`
/// finds it: its `[hash]` left out, a model of that file name, name without extension or
/// path's end, else the shortest whose file name contains it, else a path that exists.
fn find_checkpoint(name: &str, models: &[PinnedModel]) -> Result<PinnedModel, String> {
    let typed = name.trim();
    let bare = match typed.rsplit_once(" [") {
        Some((bare, hash)) if hash.ends_with(']') => bare.trim(),
        _ => typed,
    };
    let text = |s: Option<&std::ffi::OsStr>| s.map(|s| s.to_string_lossy().into_owned());
    let exact = models.iter().find(|m| {
        let p = &m.path;
        text(p.file_name()).as_deref() == Some(bare)
            || text(p.file_stem()).as_deref() == Some(bare)
            || p.ends_with(bare)
    });
    let contains = || {
        (models.iter())
            .filter(|m| text(m.path.file_name()).is_some_and(|n| n.contains(bare)))
            .min_by_key(|m| m.path.as_os_str().len())
    };
    if let Some(found) = exact.or_else(contains) {
        return Ok(found.clone());
    }
    let path = std::path::Path::new(typed);
    if path.exists() {
        return Ok(PinnedModel {
            path: path.to_path_buf(),
            config_dir: None,
        });
    }
    let known: Vec<String> = (models.iter())
        .filter_map(|m| text(m.path.file_name()))
        .collect();
    let known = match known.is_empty() {
        true => "there are none listed".to_string(),
        false => format!("they are {}", known.join(", ")),
    };
    Err(format!(
        "no checkpoint named {typed:?} (Checkpoint name values are models' file names; {known})"
    ))
}

#[cfg(test)]
mod tests;
