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
