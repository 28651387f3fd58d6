//! `ember generate --plot-x/-y/-z`: the axes read from their flags, the cells' file names,
//! and the grid written beside them.

use std::path::{Path, PathBuf};

use inference::imaging::{ImageRgb8, SaveFormat};

use crate::cli::GenerateArgs;
use crate::plot::{AxisKind, AxisSpec, Planned, Plot, grid};

/// The plot the flags ask for, or `None`; checked against the flags it cannot go with.
pub(super) fn parse(args: &GenerateArgs) -> Result<Option<Plot>, String> {
    let flags = [
        ("--plot-x", &args.plot_x),
        ("--plot-y", &args.plot_y),
        ("--plot-z", &args.plot_z),
    ];
    if flags.iter().all(|(_, v)| v.is_none()) {
        return Ok(None);
    }
    let mut specs: [AxisSpec; 3] = Default::default();
    for ((flag, value), spec) in flags.iter().zip(&mut specs) {
        let Some(value) = value else { continue };
        let (kind, values) = value.split_once(':').ok_or_else(|| {
            format!("{flag} wants TYPE: VALUES, for example \"Steps: 10-30 (+10)\"; got {value:?}")
        })?;
        *spec = AxisSpec {
            kind: AxisKind::parse(kind).map_err(|e| format!("{flag}: {e}"))?,
            values: values.trim().to_string(),
        };
    }
    if args.batch > 1 {
        return Err("the plot makes one image per cell; leave out --batch".into());
    }
    if args.save_latents.is_some() {
        return Err("--save-latents writes one image's latents; it does not go with a plot".into());
    }
    let plot = Plot::parse(&specs)?;
    Ok((!plot.is_empty()).then_some(plot))
}

/// The largest image a plot with a Size axis makes (`None` without one: every cell has the
/// flags' size), for the memory check.
pub(super) fn largest_size(planned: &Planned) -> Option<(u32, u32)> {
    let sizes = planned
        .cells
        .iter()
        .map(|c| (c.request.width, c.request.height));
    let first = sizes.clone().next()?;
    if sizes.clone().all(|s| s == first) {
        return None;
    }
    sizes.max_by_key(|&(w, h)| u64::from(w) * u64::from(h))
}

/// Cell `i`'s file: `<out stem>-<i>.<ext>` beside `--out`, as a batch names its images.
pub(super) fn cell_path(out: &Path, i: usize) -> PathBuf {
    let stem = out.file_stem().unwrap_or_default().to_string_lossy();
    let ext = out.extension().unwrap_or_default().to_string_lossy();
    out.with_file_name(format!("{stem}-{i}.{ext}"))
}

/// Writes the grid of the cells' images to `out`, with the first image's settings and the
/// plot's (`Script: X/Y/Z plot`, `X Type`, `X Values`…).
pub(super) fn write_grid(
    planned: &Planned,
    images: &[Option<ImageRgb8>],
    first_parameters: &str,
    (out, format): (&Path, SaveFormat),
) -> Result<(), String> {
    let grid = grid::draw(planned, images).ok_or("the plot made no images")?;
    let parameters = planned.grid_parameters(first_parameters);
    super::super::write::write_image(out, &grid, format, &[("parameters", &parameters)])
}

/// The models a Checkpoint name axis' names are found among: `--model` and the
/// checkpoints and diffusers folders beside it (A1111's checkpoint list is its folder's).
pub(super) fn checkpoints_beside(args: &GenerateArgs) -> Vec<inference::api::PinnedModel> {
    let pinned = |path: PathBuf| inference::api::PinnedModel {
        config_dir: (path == args.model).then(|| args.config.clone()).flatten(),
        path,
    };
    let mut found = vec![pinned(args.model.clone())];
    let Some(dir) = args.model.parent() else {
        return found;
    };
    let mut beside: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| *p != args.model)
        .filter(|p| match p.is_dir() {
            true => p.join("model_index.json").is_file(),
            false => (p.extension().and_then(|e| e.to_str())).is_some_and(|e| {
                ["safetensors", "ckpt"].contains(&e.to_ascii_lowercase().as_str())
            }),
        })
        .collect();
    beside.sort();
    found.extend(beside.into_iter().map(pinned));
    found
}

/// Every other checkpoint a plot's cells are for, read from its headers before anything
/// is made (a file that is not a model fails now, not halfway through the plot).
pub(super) fn check_checkpoints(
    requests: &[inference::api::GenerateRequest],
    model: &inference::model::Model,
    options: &inference::weights::LoadOptions,
) -> Result<(), String> {
    let mut checked = std::collections::HashSet::new();
    for wanted in requests.iter().filter_map(|r| r.checkpoint.as_ref()) {
        if wanted.path == model.info.path || !checked.insert(wanted.path.clone()) {
            continue;
        }
        inference::weights::plan::plan(&wanted.path, &with_config(options, wanted))
            .map_err(|e| format!("Checkpoint name: {e}"))?;
    }
    Ok(())
}

/// Loads a plot's checkpoint with the options of `--model` (its own config folder).
pub(super) fn load_checkpoint(
    wanted: &inference::api::PinnedModel,
    options: &inference::weights::LoadOptions,
) -> Result<inference::model::Model, String> {
    let model = inference::weights::load(&wanted.path, &with_config(options, wanted))
        .map_err(|e| format!("Checkpoint name: {e}"))?;
    for note in model.info.report.notes() {
        eprintln!("note: {note}");
    }
    Ok(model)
}

fn with_config(
    options: &inference::weights::LoadOptions,
    wanted: &inference::api::PinnedModel,
) -> inference::weights::LoadOptions {
    inference::weights::LoadOptions {
        config_dir: wanted.config_dir.clone(),
        ..options.clone()
    }
}
