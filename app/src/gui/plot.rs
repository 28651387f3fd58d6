//! The X/Y/Z plot in the app: its persisted settings (the form's section), and the plots
//! under way, whose cells' images are gathered until none is left to make and the grid is
//! drawn.

use std::collections::HashSet;

use inference::imaging::ImageRgb8;
use inference::metadata::Parameters;
use inference::worker::JobId;
use serde::{Deserialize, Serialize};

use super::restore::Restored;
use crate::plot::{AxisKind, AxisSpec, Planned, Plot, grid};

/// The form's X/Y/Z plot section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlotSettings {
    pub enabled: bool,
    /// X, Y and Z.
    pub axes: [AxisSpec; 3],
}

impl PlotSettings {
    /// The plot Generate makes: `None` when it is off or every axis is Nothing.
    pub fn plot(&self) -> Result<Option<Plot>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let plot = Plot::parse(&self.axes)?;
        Ok((!plot.is_empty()).then_some(plot))
    }
}

/// A plot whose cells are queued or being made.
struct Run {
    planned: Planned,
    /// Cell `i`'s job.
    jobs: Vec<JobId>,
    images: Vec<Option<ImageRgb8>>,
    /// Cell 0's settings, which the grid's metadata starts from (A1111's).
    first_parameters: Option<String>,
}

/// A plot none of whose cells is left to make.
pub struct Finished {
    /// The number the grid is saved and shown under, one no job has.
    pub id: JobId,
    /// `Ok(None)` when no cell made an image (all cancelled or failed).
    pub grid: Result<Option<ImageRgb8>, String>,
    pub parameters: String,
    pub seed: u64,
    /// Cells made and cells planned.
    pub made: (usize, usize),
}

/// The plots under way, and the grids being drawn (on a thread of their own: a large grid
/// takes a while, and the window stays responsive meanwhile).
#[derive(Default)]
pub struct Plots {
    runs: Vec<Run>,
    drawing: Vec<(JobId, crossbeam_channel::Receiver<Finished>)>,
    finished: u64,
}

impl Plots {
    /// Gathers the images of `jobs`, cell `i` made by `jobs[i]`.
    pub fn start(&mut self, planned: Planned, jobs: Vec<JobId>) {
        let images = vec![None; jobs.len()];
        self.runs.push(Run {
            planned,
            jobs,
            images,
            first_parameters: None,
        });
    }

    /// Takes a finished job's first image when it is a plot's cell.
    pub fn result(&mut self, job: JobId, image: &ImageRgb8, parameters: &str) {
        for run in &mut self.runs {
            if let Some(i) = run.jobs.iter().position(|j| *j == job) {
                run.images[i] = Some(image.clone());
                if i == 0 || run.first_parameters.is_none() {
                    run.first_parameters = Some(parameters.to_string());
                }
            }
        }
    }

    /// Cells made and cells planned, over every plot under way (for the progress row).
    pub fn progress(&self) -> Option<(usize, usize)> {
        if self.runs.is_empty() {
            return None;
        }
        let made = self.runs.iter().map(|r| r.images.iter().flatten().count());
        let planned = self.runs.iter().map(|r| r.jobs.len());
        Some((made.sum(), planned.sum()))
    }

    /// The progress row's line: cells made of those planned, the cell `running` makes, or
    /// the grid being drawn; `None` when no plot is under way.
    pub fn status(&self, running: Option<JobId>) -> Option<String> {
        match self.progress() {
            Some((made, planned)) => {
                let cell = running.and_then(|job| self.cell_label(job));
                let now = cell.map_or(String::new(), |c| format!(" (now: {c})"));
                Some(format!(
                    "X/Y/Z plot: {made} of {planned} images made{now}; the grid follows the last"
                ))
            }
            None if !self.drawing.is_empty() => Some("X/Y/Z plot: drawing the grid…".into()),
            None => None,
        }
    }

    /// The labels of the cell `job` makes (`Steps: 20, Euler a`), when it is a plot's.
    pub fn cell_label(&self, job: JobId) -> Option<String> {
        self.runs.iter().find_map(|run| {
            let i = run.jobs.iter().position(|j| *j == job)?;
            Some(run.planned.cell_label(i)).filter(|l| !l.is_empty())
        })
    }

    /// Whether a plot's cells are being made or its grid drawn.
    pub fn busy(&self) -> bool {
        !self.runs.is_empty() || !self.drawing.is_empty()
    }

    /// Starts drawing the grid of each plot none of whose jobs is in `waiting` (queued or
    /// running; cells that made no image are black, as in A1111), and returns the grids
    /// drawn since the last call. `ctx` is woken when one is ready.
    pub fn take_finished(
        &mut self,
        waiting: &HashSet<JobId>,
        ctx: &egui::Context,
    ) -> Vec<Finished> {
        let (done, left): (Vec<Run>, Vec<Run>) = std::mem::take(&mut self.runs)
            .into_iter()
            .partition(|r| !r.jobs.iter().any(|j| waiting.contains(j)));
        self.runs = left;
        for run in done {
            let id = JobId(u64::MAX - 1 - self.finished);
            self.finished += 1;
            let (send, receive) = crossbeam_channel::bounded(1);
            let ctx = ctx.clone();
            let draw = move || {
                // The receiver goes only with the app.
                let _ = send.send(run.finish(id));
                ctx.request_repaint();
            };
            // A thread that cannot start (or dies) leaves its receiver disconnected, which
            // is reported below: the cells themselves are saved already.
            let _ = std::thread::Builder::new()
                .name("plot grid".into())
                .spawn(draw);
            self.drawing.push((id, receive));
        }
        let mut ready = Vec::new();
        self.drawing
            .retain(|(id, receive)| match receive.try_recv() {
                Ok(finished) => {
                    ready.push(finished);
                    false
                }
                Err(crossbeam_channel::TryRecvError::Empty) => true,
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    ready.push(Finished {
                        id: *id,
                        grid: Err("its grid could not be drawn (its images are saved)".into()),
                        parameters: String::new(),
                        seed: 0,
                        made: (0, 0),
                    });
                    false
                }
            });
        ready
    }
}

impl Run {
    /// The grid of what was made.
    fn finish(self, id: JobId) -> Finished {
        let grid = Ok(grid::draw(&self.planned, &self.images));
        let first = self.first_parameters.unwrap_or_default();
        Finished {
            id,
            grid,
            parameters: self.planned.grid_parameters(&first),
            seed: self.planned.cells[0].request.seed,
            made: (self.images.iter().flatten().count(), self.jobs.len()),
        }
    }
}

/// Restores A1111's plot fields (`Script: X/Y/Z plot`, each axis' `Type` and `Values`,
/// and for seed axes the seeds drawn for `-1`, `Fixed … Values`, so the grid comes out the
/// same). They turn the plot on; the caller turns it off for an image without them.
pub fn restore(p: &Parameters, s: &mut PlotSettings, r: &mut Restored) {
    if p.get("Script") != Some("X/Y/Z plot") {
        return;
    }
    let mut axes: [AxisSpec; 3] = Default::default();
    for (axis, letter) in axes.iter_mut().zip(["X", "Y", "Z"]) {
        let Some(name) = p.get(&format!("{letter} Type")) else {
            continue;
        };
        let Ok(kind) = AxisKind::parse(name) else {
            r.skipped.push(format!(
                "the plot's {letter} axis {name:?} is not one Ember has"
            ));
            return;
        };
        let values = p
            .get(&format!("Fixed {letter} Values"))
            .or_else(|| p.get(&format!("{letter} Values")))
            .unwrap_or_default();
        *axis = AxisSpec {
            kind,
            values: values.to_string(),
        };
    }
    s.axes = axes;
    s.enabled = true;
    r.applied.push("X/Y/Z plot");
}
