//! The plot's plan (A1111's order, values and errors) and its grid's layout.

use inference::api::{GenerateRequest, SamplerChoice};
use inference::imaging::ImageRgb8;
use inference::schedule::named::{SamplerName, ScheduleName};

use super::*;

fn spec(kind: AxisKind, values: &str) -> AxisSpec {
    AxisSpec {
        kind,
        values: values.into(),
    }
}

fn plot(x: AxisSpec, y: AxisSpec, z: AxisSpec) -> Result<Plot, String> {
    Plot::parse(&[x, y, z])
}

fn nothing() -> AxisSpec {
    AxisSpec::default()
}

fn base() -> GenerateRequest {
    GenerateRequest {
        prompt: "a red fox".into(),
        negative_prompt: "blurry fox".into(),
        width: 64,
        height: 64,
        steps: 20,
        seed: 7,
        sampler: SamplerChoice::Named {
            sampler: SamplerName::DpmPp2M,
            schedule: ScheduleName::Karras,
        },
        ..GenerateRequest::default()
    }
}

const CONTEXT: Context<'static> = Context {
    variation_seed: 99,
    schedule_follows_sampler: false,
    vaes: &[],
    checkpoints: &[],
};

#[test]
fn cells_run_x_fastest_and_each_takes_its_values() {
    let plot = plot(
        spec(AxisKind::Steps, "10-30 (+10)"),
        spec(AxisKind::Sampler, "Euler a, DDIM"),
        nothing(),
    )
    .unwrap();
    let planned = plot.plan(&base(), CONTEXT).unwrap();
    assert_eq!(planned.shape, [3, 2, 1]);
    let at: Vec<[usize; 3]> = planned.cells.iter().map(|c| c.at).collect();
    assert_eq!(at[..4], [[0, 0, 0], [1, 0, 0], [2, 0, 0], [0, 1, 0]]);
    let last = &planned.cells[5].request;
    assert_eq!(last.steps, 30);
    // The form's schedule stays unless the sampler's own is asked for.
    assert!(matches!(
        last.sampler,
        SamplerChoice::Named {
            sampler: SamplerName::Ddim,
            schedule: ScheduleName::Karras
        }
    ));
    assert!(planned.cells.iter().all(|c| c.request.seed == 7));
    assert_eq!(planned.labels[0], ["Steps: 10", "Steps: 20", "Steps: 30"]);
    assert_eq!(planned.labels[1], ["Euler a", "DDIM"]);
    assert_eq!(planned.labels[2], [""]);
    let follows = Context {
        schedule_follows_sampler: true,
        ..CONTEXT
    };
    let planned = plot.plan(&base(), follows).unwrap();
    assert!(matches!(
        planned.cells[5].request.sampler,
        SamplerChoice::Named {
            sampler: SamplerName::Ddim,
            schedule: ScheduleName::DdimUniform
        }
    ));
}

#[test]
fn prompt_search_and_replace_changes_both_prompts_and_needs_its_word() {
    let planned = plot(spec(AxisKind::PromptSr, "fox, cat"), nothing(), nothing())
        .unwrap()
        .plan(&base(), CONTEXT)
        .unwrap();
    assert_eq!(planned.cells[0].request.prompt, "a red fox");
    assert_eq!(planned.cells[1].request.prompt, "a red cat");
    assert_eq!(planned.cells[1].request.negative_prompt, "blurry cat");
    assert_eq!(planned.labels[0], ["fox", "cat"]);
    let missing = plot(spec(AxisKind::PromptSr, "wolf, cat"), nothing(), nothing())
        .unwrap()
        .plan(&base(), CONTEXT)
        .unwrap_err();
    assert!(missing.contains("\"wolf\""), "{missing}");
}

#[test]
fn seeds_of_minus_one_are_drawn_once_and_recorded() {
    let planned = plot(nothing(), spec(AxisKind::Seed, "-1, 5"), nothing())
        .unwrap()
        .plan(&base(), CONTEXT)
        .unwrap();
    let drawn = planned.cells[0].request.seed;
    assert_eq!(planned.cells[1].request.seed, 5);
    let fields = &planned.fields;
    let get = |k: &str| {
        fields
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("Script"), Some("X/Y/Z plot"));
    assert_eq!(get("Y Type"), Some("Seed"));
    assert_eq!(get("Y Values"), Some("-1, 5"));
    assert_eq!(get("Fixed Y Values"), Some(format!("{drawn}, 5").as_str()));
    assert_eq!(get("X Type"), None);
    let text = planned.grid_parameters("a red fox\nSteps: 20, Seed: 7");
    let parameters = inference::metadata::Parameters::parse(&text);
    assert_eq!(parameters.get("Steps"), Some("20"));
    assert_eq!(
        parameters.get("Fixed Y Values"),
        Some(format!("{drawn}, 5").as_str())
    );
}

#[test]
fn bad_plans_say_what_is_wrong() {
    let err = |x: AxisSpec| match plot(x, nothing(), nothing()) {
        Ok(plot) => plot.plan(&base(), CONTEXT).unwrap_err(),
        Err(e) => e,
    };
    assert!(err(spec(AxisKind::Sampler, "Euler a, Nope")).contains("Nope"));
    assert!(err(spec(AxisKind::Steps, "ten")).starts_with("X axis: "));
    assert!(err(spec(AxisKind::Steps, "")).contains("no values"));
    assert!(err(spec(AxisKind::Denoising, "0.5")).contains("hires fix"));
    assert!(err(spec(AxisKind::Size, "512x500")).contains("512x500"));
    assert!(err(spec(AxisKind::Steps, "0, 10")).contains("Steps: 0"));
    let many = plot(
        spec(AxisKind::Steps, "1-30"),
        spec(AxisKind::CfgScale, "1-30"),
        nothing(),
    )
    .unwrap_err();
    assert!(many.contains("900 images"), "{many}");
    assert_eq!(AxisKind::parse("cfg scale"), Ok(AxisKind::CfgScale));
}

fn filled(width: u32, height: u32, value: u8) -> ImageRgb8 {
    ImageRgb8 {
        width,
        height,
        pixels: vec![value; (width * height * 3) as usize],
    }
}

#[test]
fn the_grid_is_laid_out_as_a1111_lays_it_out() {
    let planned = plot(
        spec(AxisKind::Steps, "10, 20"),
        spec(AxisKind::CfgScale, "5, 7"),
        spec(AxisKind::Sampler, "Euler, DDIM"),
    )
    .unwrap()
    .plan(&base(), CONTEXT)
    .unwrap();
    // Cell i is filled with 10 + i; the last one failed.
    let mut images: Vec<Option<ImageRgb8>> = (0..8)
        .map(|i| Some(filled(100, 100, 10 + i as u8)))
        .collect();
    images[7] = None;
    let grid = grid::draw(&planned, &images).unwrap();
    assert_eq!((grid.width, grid.height), grid::size(&planned, (100, 100)));
    // A1111's numbers: cells of 100 px take a font of (100 + 100) // 25 = 8 px and a line
    // spacing of 4; Y labels get 3/4 of a cell (75 px) on the left; the X labels' one line
    // and twice the spacing above. Each 2×2 sub-grid is 275 × (200 + that); the Z labels
    // above them are drawn at (275 + 200 + pad) // 25 px with half that as spacing.
    let pad_left = 75;
    let pad_top = (super::text::Font::new(8.0).line_height() + 8.0) as u32;
    let sub = (pad_left + 200, 200 + pad_top);
    let z_font = (sub.0 + sub.1) / 25;
    let z_top =
        (super::text::Font::new(z_font as f32).line_height() + (z_font / 2 * 2) as f32) as u32;
    assert_eq!((grid.width, grid.height), (2 * sub.0, z_top + sub.1));
    let at = |x: u32, y: u32| {
        let i = ((y * grid.width + x) * 3) as usize;
        grid.pixels[i]
    };
    let top = z_top + pad_top;
    for (i, (x, y, z)) in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 1)]
        .into_iter()
        .enumerate()
    {
        let i = [0, 1, 2, 7][i];
        let left = z * sub.0 + pad_left + x * 100;
        let expected = if i == 7 { 0 } else { 10 + i as u8 };
        // The whole cell, corners included.
        for (dx, dy) in [(0, 0), (99, 0), (0, 99), (99, 99), (50, 50)] {
            assert_eq!(at(left + dx, top + y * 100 + dy), expected, "cell {i}");
        }
    }
    // The labels are ink on white, each in its own band: Z above X above the cells, Y to
    // the left of its row; the corner left of the X labels stays white.
    let dark = |xs: std::ops::Range<u32>, ys: std::ops::Range<u32>| {
        ys.flat_map(|y| xs.clone().map(move |x| (x, y)))
            .filter(|&(x, y)| at(x, y) < 128)
            .count()
    };
    assert!(dark(0..sub.0, 0..z_top) > 0, "the first Z label");
    assert!(dark(sub.0..2 * sub.0, 0..z_top) > 0, "the second Z label");
    assert!(dark(pad_left..pad_left + 100, z_top..top) > 0, "an X label");
    assert!(dark(0..pad_left, top..top + 100) > 0, "a Y label");
    assert_eq!(dark(0..pad_left, z_top..top), 0, "the corner");
    assert!(grid::draw(&planned, &[None, None]).is_none());
}

#[test]
fn empty_replacements_are_values_with_empty_labels() {
    let planned = plot(spec(AxisKind::PromptSr, "fox,,"), nothing(), nothing());
    let planned = planned.unwrap().plan(&base(), CONTEXT).unwrap();
    assert_eq!(planned.labels[0], ["fox", "", ""]);
    assert_eq!(planned.cells[1].request.prompt, "a red ");
    assert_eq!(planned.cell_label(1), "");
    let images: Vec<Option<ImageRgb8>> = (0..3).map(|_| Some(filled(64, 32, 200))).collect();
    let grid = grid::draw(&planned, &images).unwrap();
    // One X label line above the cells; no Y labels, so no space on the left.
    assert_eq!(grid.width, 3 * 64);
    let font = (64 + 32) / 25;
    let pad_top =
        (super::text::Font::new(font as f32).line_height() + (font / 2 * 2) as f32) as u32;
    assert_eq!(grid.height, 32 + pad_top);
}

#[test]
fn a_vae_axis_finds_its_names_among_the_vae_files_as_a1111_does() {
    use inference::api::VaeChoice;
    let vaes = [
        std::path::PathBuf::from("/m/VAE/sdxl_vae.safetensors"),
        std::path::PathBuf::from("/m/VAE/fp16-fix"),
    ];
    let context = Context {
        vaes: &vaes,
        ..CONTEXT
    };
    let plot = plot(
        spec(
            AxisKind::Vae,
            "Automatic, None, SDXL_VAE.safetensors, fp16-fix",
        ),
        nothing(),
        nothing(),
    )
    .unwrap();
    let planned = plot.plan(&base(), context).unwrap();
    let chosen: Vec<VaeChoice> = planned
        .cells
        .iter()
        .map(|c| c.request.vae.clone())
        .collect();
    assert_eq!(
        chosen,
        [
            VaeChoice::Automatic,
            VaeChoice::ModelsOwn,
            VaeChoice::File(vaes[0].clone()),
            VaeChoice::File(vaes[1].clone()),
        ]
    );
    assert_eq!(
        planned.labels[0],
        [
            "VAE: Automatic",
            "VAE: None",
            "VAE: SDXL_VAE.safetensors",
            "VAE: fp16-fix"
        ],
        "A1111 labels a VAE with its axis' name"
    );
    let missing = self::plot(
        spec(AxisKind::Vae, "kl-f8-anime2.ckpt"),
        nothing(),
        nothing(),
    )
    .unwrap()
    .plan(&base(), context)
    .unwrap_err();
    assert!(missing.contains("kl-f8-anime2.ckpt"), "{missing}");
    assert!(
        missing.contains("sdxl_vae.safetensors, fp16-fix"),
        "{missing}"
    );
}

#[test]
fn a_checkpoint_axis_finds_models_as_a1111_does_and_runs_one_model_at_a_time() {
    use inference::api::PinnedModel;
    let model = |p: &str| PinnedModel {
        path: p.into(),
        config_dir: None,
    };
    let models = [
        model("/m/Stable-diffusion/dreamshaper_8.safetensors"),
        model("/m/Stable-diffusion/sdxl/juggernaut.safetensors"),
        model("/m/Stable-diffusion/v1-5-pruned-emaonly.safetensors"),
        model("/m/Stable-diffusion/v1-5-pruned.ckpt"),
    ];
    let context = Context {
        checkpoints: &models,
        ..CONTEXT
    };
    let plot = plot(
        spec(AxisKind::Steps, "10, 20"),
        spec(
            AxisKind::Checkpoint,
            "dreamshaper_8, sdxl/juggernaut.safetensors [1234567890], v1-5",
        ),
        nothing(),
    )
    .unwrap();
    let planned = plot.plan(&base(), context).unwrap();
    let pinned: Vec<&std::path::Path> = (planned.cells.iter())
        .map(|c| c.request.checkpoint.as_ref().unwrap().path.as_path())
        .collect();
    // The shortest name holding "v1-5" (A1111's closest match).
    assert_eq!(
        pinned,
        [
            &models[0].path,
            &models[0].path,
            &models[1].path,
            &models[1].path,
            &models[3].path,
            &models[3].path
        ]
        .map(|p| p.as_path())
    );
    assert_eq!(
        planned.labels[1],
        [
            "dreamshaper_8",
            "juggernaut.safetensors [1234567890]",
            "v1-5"
        ],
        "A1111's format_remove_path: no folder, no label"
    );

    // With the checkpoint on X, the cells go one checkpoint at a time (A1111's cost order),
    // each still in its place in the grid.
    let plot = self::plot(
        spec(AxisKind::Checkpoint, "dreamshaper_8, juggernaut"),
        spec(AxisKind::Steps, "10, 20, 30"),
        nothing(),
    )
    .unwrap();
    let planned = plot.plan(&base(), context).unwrap();
    let at: Vec<[usize; 3]> = planned.cells.iter().map(|c| c.at).collect();
    assert_eq!(
        at,
        [
            [0, 0, 0],
            [0, 1, 0],
            [0, 2, 0],
            [1, 0, 0],
            [1, 1, 0],
            [1, 2, 0]
        ]
    );
    assert_eq!(planned.cells[3].request.steps, 10);

    let missing = self::plot(spec(AxisKind::Checkpoint, "nope"), nothing(), nothing())
        .unwrap()
        .plan(&base(), context)
        .unwrap_err();
    assert!(missing.contains("\"nope\""), "{missing}");
    assert!(missing.contains("dreamshaper_8.safetensors"), "{missing}");
}
