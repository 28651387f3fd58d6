//! The jobs the session queues and runs: what each does ([`Work`]), and the running one's
//! progress, speed and time left.

use std::time::{Duration, Instant};

use inference::api::{GenerateRequest, Stage};
use inference::upscale::UpscaleRequest;
use inference::worker::{CancelToken, JobId};

/// What a job does (kept in `queue.json` across a start-again: see `crate::gui::queue_file`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Work {
    Generate(Box<GenerateRequest>),
    /// The Extras view's upscale.
    Upscale(Box<UpscaleRequest>),
}

impl Work {
    /// How the progress line and the queue name the job: `seed 42`, `seed 42 variation 7`,
    /// `upscale`.
    pub fn label(&self) -> String {
        match self {
            Work::Generate(r) => format!("seed {}", Self::seed_text(r)),
            Work::Upscale(_) => "upscale".into(),
        }
    }

    /// A generation's seed as the queue shows it: with its variation seed, when it has one.
    pub fn seed_text(r: &GenerateRequest) -> String {
        match r.noise.active_variation() {
            Some(v) => format!("{} variation {}", r.seed, v.seed),
            None => r.seed.to_string(),
        }
    }
}

/// A job waiting its turn.
#[derive(Clone, Debug)]
pub struct QueuedJob {
    pub id: JobId,
    pub work: Work,
}

/// The job the worker is running.
#[derive(Clone, Debug)]
pub struct RunningJob {
    pub id: JobId,
    pub work: Work,
    pub cancel: CancelToken,
    pub stage: Option<Stage>,
    pub step: usize,
    pub total: usize,
    /// When and at which step denoising was first seen (speed is measured from there).
    pub(super) denoise_start: Option<(Instant, usize)>,
    /// Denoising steps per second.
    pub its: Option<f64>,
    /// Cancel was asked; the worker stops within a UNet block.
    pub cancelling: bool,
}

impl RunningJob {
    /// Seconds left in denoising at the measured speed.
    pub fn eta(&self) -> Option<Duration> {
        let its = self.its.filter(|s| *s > 0.0)?;
        Some(Duration::from_secs_f64(
            self.total.saturating_sub(self.step) as f64 / its,
        ))
    }

    /// Done fraction for the progress bar.
    pub fn fraction(&self) -> f32 {
        match self.stage {
            Some(Stage::Denoising) if self.total > 0 => self.step as f32 / self.total as f32,
            Some(Stage::Decoding) => 1.0,
            Some(Stage::Upscaling) if self.total > 0 => self.step as f32 / self.total as f32,
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use inference::worker::Command;

    use super::super::Session;

    fn upscale() -> inference::upscale::UpscaleRequest {
        let image = inference::imaging::ImageRgb8 {
            width: 8,
            height: 8,
            pixels: vec![0; 8 * 8 * 3],
        };
        inference::upscale::UpscaleRequest {
            image,
            model: "4x.pth".into(),
            options: Default::default(),
            source_parameters: None,
        }
    }

    #[test]
    fn an_upscale_goes_ahead_of_generations_waiting_for_a_model() {
        let mut session = Session::default();
        session.enqueue(Default::default());
        session.enqueue_upscale(upscale());
        // No model: the generation waits, the upscale runs.
        assert!(matches!(
            session.next_command(),
            Some(Command::Upscale { .. })
        ));
        assert_eq!(session.queue.len(), 1);
        assert!(session.next_command().is_none(), "one job at a time");
    }

    #[test]
    fn a_job_lost_with_the_gpu_starts_over_unless_it_was_being_cancelled() {
        use inference::worker::Event;
        for cancelling in [false, true] {
            let mut session = Session::default();
            let job = session.enqueue_upscale(upscale());
            assert!(session.next_command().is_some(), "it runs");
            if cancelling {
                session.cancel_running();
            }
            let error = "the GPU stopped working while upscaling".to_string();
            let now = std::time::Instant::now();
            let reload = Vec::new();
            let lost = Event::GpuLost {
                error: error.clone(),
                reload,
            };
            let _ = session.apply(lost, now);
            let _ = session.apply(Event::Failed { job, error }, now);
            assert!(session.running.is_none());
            let queued: Vec<_> = session.queue.iter().map(|q| q.id).collect();
            let expected = if cancelling { vec![] } else { vec![job] };
            assert_eq!(queued, expected, "cancelling: {cancelling}");
        }
    }
}
