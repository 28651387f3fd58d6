//! The X/Y/Z plot section: set up by clicking and typing, Generate queues one job per cell
//! (X fastest, the seed shared unless an axis changes it), and once the last is made the
//! grid is shown and saved as `NNNNN-xyz_grid-SEED.png` with the plot in its metadata. A
//! cancelled plot still gets the grid of what was made; a bad plot queues nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use ember_app::plot::{AxisKind, AxisSpec};
use ember_tests::fake_engine::FakeEngine;
use inference::metadata::Parameters;

use crate::{app, click, drop_files, has_notice, scroll_and_click, step_until};

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    files.sort();
    files
}

fn parameters(path: &Path) -> Parameters {
    let text = inference::imaging::read_png_text(path).unwrap();
    let (_, value) = text.iter().find(|(k, _)| k == "parameters").unwrap();
    Parameters::parse(value)
}

fn combo(w: &crate::Window) -> egui_kittest::Node<'_> {
    w.get_by_role_and_label(Role::ComboBox, "X type")
}

fn is_grid(path: &Path) -> bool {
    path.to_string_lossy().contains("xyz_grid")
}

#[test]
fn a_plot_set_up_in_the_form_makes_its_cells_and_a_saved_grid() {
    let home = tempfile::tempdir().unwrap();
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(1)));
    {
        let app = w.state_mut().as_mut().unwrap();
        app.settings.prompt = "a red fox".into();
        app.settings.seed = 40;
        app.settings.seed_locked = true;
        app.settings.batch_count = 3;
        app.settings.plot.axes[1] = AxisSpec {
            kind: AxisKind::Seed,
            values: "40, 41".into(),
        };
    }
    scroll_and_click(&mut w, "X/Y/Z plot");
    scroll_and_click(&mut w, "Make an X/Y/Z plot");
    combo(&w).scroll_to_me();
    for _ in 0..30 {
        w.step();
    }
    combo(&w).hover();
    w.step();
    combo(&w).click();
    w.step();
    w.step();
    click(&mut w, "Prompt S/R");
    w.get_by_role_and_label(Role::TextInput, "X type").focus();
    w.step();
    w.get_by_role_and_label(Role::TextInput, "X type")
        .type_text("fox, cat, owl");
    w.step();
    w.get_by_label("6 images (3 × 2)");
    click(&mut w, "Generate");

    let outputs = home.path().join("outputs");
    step_until(&mut w, "the grid to be saved", |a| {
        !a.plots.busy() && a.display.results.iter().all(|r| r.path.is_some())
    });
    let saved = files(&outputs);
    let (grids, cells): (Vec<&PathBuf>, Vec<&PathBuf>) = saved.iter().partition(|p| is_grid(p));
    // One image per cell, whatever the batch count.
    assert_eq!(cells.len(), 6, "{saved:?}");
    assert_eq!(grids.len(), 1, "{saved:?}");
    assert!(grids[0].to_string_lossy().ends_with("-xyz_grid-40.png"));
    let prompts: Vec<String> = cells.iter().map(|p| parameters(p).prompt).collect();
    assert_eq!(
        prompts,
        [
            "a red fox",
            "a red cat",
            "a red owl",
            "a red fox",
            "a red cat",
            "a red owl"
        ]
    );
    let seeds: Vec<String> = (cells.iter())
        .map(|p| parameters(p).get("Seed").unwrap().to_string())
        .collect();
    assert_eq!(seeds, ["40", "40", "40", "41", "41", "41"]);
    let grid = parameters(grids[0]);
    assert_eq!(grid.prompt, "a red fox");
    assert_eq!(grid.get("Script"), Some("X/Y/Z plot"));
    assert_eq!(grid.get("X Type"), Some("Prompt S/R"));
    assert_eq!(grid.get("X Values"), Some("fox, cat, owl"));
    assert_eq!(grid.get("Y Type"), Some("Seed"));
    assert_eq!(grid.get("Fixed Y Values"), Some("40, 41"));
    // The grid is what the view shows, saved at its path.
    let shown = &app(&w).display.results;
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].path.as_deref(), Some(grids[0].as_path()));
    let image = inference::imaging::load_rgb(grids[0], None).unwrap();
    assert_eq!(
        (image.width as usize, image.height as usize),
        (shown[0].size[0], shown[0].size[1])
    );
    // The settings keep the plot for the next start.
    assert!(app(&w).settings.plot.enabled);
    assert_eq!(app(&w).settings.plot.axes[0].kind, AxisKind::PromptSr);

    // A cell dropped on the window is remade alone; the grid brings its plot back.
    drop_files(&mut w, &[cells[4].as_path()]);
    step_until(&mut w, "the cell's settings", |a| {
        a.settings.prompt == "a red cat"
    });
    assert!(!app(&w).settings.plot.enabled);
    w.state_mut().as_mut().unwrap().settings.plot.axes = Default::default();
    drop_files(&mut w, &[grids[0].as_path()]);
    step_until(&mut w, "the grid's settings", |a| a.settings.plot.enabled);
    let plot = &app(&w).settings.plot;
    assert_eq!(plot.axes[0].kind, AxisKind::PromptSr);
    assert_eq!(plot.axes[0].values, "fox, cat, owl");
    assert_eq!(plot.axes[1].kind, AxisKind::Seed);
    assert_eq!(plot.axes[1].values, "40, 41");
    assert_eq!(plot.axes[2].kind, AxisKind::Nothing);
}

#[test]
fn a_cancelled_plot_saves_the_grid_of_what_was_made() {
    let home = tempfile::tempdir().unwrap();
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(150)));
    {
        let app = w.state_mut().as_mut().unwrap();
        app.settings.steps = 4;
        app.settings.plot.enabled = true;
        app.settings.plot.axes[0] = AxisSpec {
            kind: AxisKind::CfgScale,
            values: "3-7 (+2)".into(),
        };
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the first cell", |a| {
        a.plots.progress() == Some((1, 3))
    });
    w.step();
    assert!(
        w.query_by_label_contains("1 of 3 images made (now: CFG Scale: 5.0)")
            .is_some(),
        "the progress row names the cell under way"
    );
    click(&mut w, "Cancel all");
    let outputs = home.path().join("outputs");
    step_until(&mut w, "the grid of one image", |_| {
        files(&outputs).iter().any(|p| is_grid(p))
    });
    assert!(has_notice(app(&w), "1 of its 3 images were made"));
    let cells = files(&outputs).into_iter().filter(|p| !is_grid(p)).count();
    assert_eq!(cells, 1);
}

#[test]
fn a_failed_cell_is_black_in_the_grid_and_the_rest_are_made() {
    let home = tempfile::tempdir().unwrap();
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(1)));
    {
        let app = w.state_mut().as_mut().unwrap();
        // The fake engine fails on the prompt "fail" (and keeps its model).
        app.settings.prompt = "fox".into();
        app.settings.plot.enabled = true;
        app.settings.plot.axes[0] = AxisSpec {
            kind: AxisKind::PromptSr,
            values: "fox, fail, owl".into(),
        };
    }
    click(&mut w, "Generate");
    let outputs = home.path().join("outputs");
    step_until(&mut w, "the grid", |a| {
        !a.plots.busy() && files(&outputs).iter().any(|p| is_grid(p))
    });
    assert!(has_notice(app(&w), "2 of its 3 images were made"));
    let grid = files(&outputs).into_iter().find(|p| is_grid(p)).unwrap();
    let image = inference::imaging::load_rgb(&grid, None).unwrap();
    // The fake's cells are 64 px; the failed middle one is black, its neighbours are not.
    let at = |x: u32| {
        let y = image.height - 32;
        let i = ((y * image.width + x) * 3) as usize;
        [image.pixels[i], image.pixels[i + 1], image.pixels[i + 2]]
    };
    assert_eq!(at(64 + 32), [0, 0, 0]);
    assert_ne!(at(32), [0, 0, 0]);
    assert_ne!(at(128 + 32), [0, 0, 0]);
}

#[test]
fn a_plot_that_cannot_be_made_queues_nothing_and_says_why() {
    let home = tempfile::tempdir().unwrap();
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(1)));
    {
        let app = w.state_mut().as_mut().unwrap();
        app.settings.prompt = "a red fox".into();
        app.settings.plot.enabled = true;
        app.settings.plot.axes[0] = AxisSpec {
            kind: AxisKind::PromptSr,
            values: "wolf, cat".into(),
        };
    }
    click(&mut w, "Generate");
    let a = app(&w);
    assert!(has_notice(
        a,
        "X/Y/Z plot: X axis: Prompt S/R's first value, \"wolf\""
    ));
    assert!(a.session.running.is_none() && a.session.queue.is_empty());
    assert!(!a.plots.busy());
}

#[test]
fn a_checkpoint_axis_loads_each_model_in_turn_and_the_chosen_one_after() {
    let home = tempfile::tempdir().unwrap();
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(1)));
    let chosen = app(&w).session.model().unwrap().path.clone();
    let others: Vec<PathBuf> = ["alpha.safetensors", "beta.safetensors"]
        .iter()
        .map(|name| {
            let path = home.path().join(name);
            std::fs::write(&path, b"fake").unwrap();
            path
        })
        .collect();
    {
        let app = w.state_mut().as_mut().unwrap();
        app.settings.recent_models.extend(others.iter().cloned());
        app.settings.plot.enabled = true;
        app.settings.plot.axes[0] = AxisSpec {
            kind: AxisKind::Checkpoint,
            values: "alpha, beta".into(),
        };
        app.settings.plot.axes[1] = AxisSpec {
            kind: AxisKind::Steps,
            values: "1, 2".into(),
        };
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the grid", |a| {
        !a.plots.busy() && a.display.results.iter().all(|r| r.path.is_some())
    });
    // Every cell ran on its checkpoint (the fake engine refuses another, as Ember's does).
    assert!(
        !app(&w)
            .session
            .notices
            .iter()
            .any(|n| n.text.contains("failed")),
        "{:?}",
        app(&w).session.notices
    );
    let outputs = home.path().join("outputs");
    let made = files(&outputs);
    assert_eq!(made.iter().filter(|p| !is_grid(p)).count(), 4, "{made:?}");
    let grid = parameters(made.iter().find(|p| is_grid(p)).unwrap());
    assert_eq!(grid.get("X Type"), Some("Checkpoint name"));
    step_until(&mut w, "the chosen model back", |a| {
        a.session.model().is_some_and(|m| m.path == chosen)
    });

    // A checkpoint that does not load leaves its cells out, and says so once.
    let broken = home.path().join("broken.safetensors");
    std::fs::write(&broken, b"fake").unwrap();
    {
        let app = w.state_mut().as_mut().unwrap();
        app.settings.recent_models.push(broken);
        app.settings.plot.axes[0].values = "alpha, broken".into();
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the grid of what was made", |a| {
        !a.plots.busy() && has_notice(a, "2 of its 4 images were made")
    });
    assert!(has_notice(
        app(&w),
        "the 2 image(s) for broken.safetensors are left out"
    ));
    step_until(&mut w, "the chosen model back", |a| {
        a.session.model().is_some_and(|m| m.path == chosen)
    });
}
