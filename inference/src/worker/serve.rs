//! The worker thread's loop: each command run under `catch_unwind` and answered with events.

use std::ops::ControlFlow;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use kernels::interrupt::Question;

use super::{
    CancelToken, Command, Cost, Engine, EngineProgress, Event, JobId, ModelRole, ModelToReload,
    Preview, PreviewSlot, ResultImage, gpu_lost, panic_message,
};
use crate::api::GenerateRequest;
use crate::upscale::UpscaleRequest;

/// Jobs expected to run longer than this are announced before they start.
const LONG_JOB: Duration = Duration::from_secs(5 * 60);

/// Serves `commands` until `Shutdown`, a closed channel, or `stopping`.
pub(super) fn serve(
    engine: impl Engine,
    commands: &Receiver<Command>,
    events: &Sender<Event>,
    preview: &PreviewSlot,
    wake: &dyn Fn(),
    stopping: &CancelToken,
) {
    let mut server = Server {
        engine,
        events,
        preview,
        wake,
        stopping,
    };
    while let Ok(command) = commands.recv() {
        if stopping.is_cancelled() {
            break;
        }
        match command {
            Command::Shutdown => break,
            Command::Unload(role) => {
                server.engine.unload(role);
                server.emit(Event::ModelUnloaded(role));
            }
            Command::LoadModel {
                path,
                config_dir,
                role,
                cancel,
            } => server.load(path, config_dir, role, &cancel),
            Command::Upscale {
                job,
                request,
                cancel,
            } => server.upscale(job, &request, &cancel),
            Command::Generate {
                job,
                request,
                cancel,
            } => server.generate(job, request, &cancel),
        }
    }
}

struct Server<'a, E> {
    engine: E,
    events: &'a Sender<Event>,
    preview: &'a PreviewSlot,
    wake: &'a dyn Fn(),
    /// Set when the handle is dropped: every job and load asks it as it asks its own token.
    stopping: &'a CancelToken,
}

/// `work` with a job's cancel `question` in scope for long kernel calls
/// ([`kernels::interrupt`]): a job cancelled inside one ends as cancelled, the kernel's
/// unfinished result dropped.
fn cancel_in_kernels<T>(
    question: &Question,
    work: impl FnOnce() -> crate::Result<T>,
) -> crate::Result<T> {
    kernels::interrupt::interruptible(question.clone(), work)
        .unwrap_or(Err(crate::Error::Cancelled))
}

/// Sends an event and wakes the UI. A free function, not only [`Server::emit`], so a handler
/// can emit while it holds the engine mutably.
fn emitter<'a>(events: &'a Sender<Event>, wake: &'a dyn Fn()) -> impl Fn(Event) + 'a {
    move |event| {
        let _ = events.send(event);
        wake();
    }
}

/// What a progress callback answers to `question`.
fn go_on(question: &Question) -> ControlFlow<()> {
    if question() {
        ControlFlow::Break(())
    } else {
        ControlFlow::Continue(())
    }
}

impl<E: Engine> Server<'_, E> {
    fn emit(&self, event: Event) {
        emitter(self.events, self.wake)(event);
    }

    /// One job's cancel: its own token, or the worker stopping. The same question goes to
    /// the engine between steps and blocks, and to the kernels inside one long call.
    fn question(&self, cancel: &CancelToken) -> Question {
        let (cancel, stopping) = (cancel.clone(), self.stopping.clone());
        Arc::new(move || cancel.is_cancelled() || stopping.is_cancelled())
    }

    fn load(
        &mut self,
        path: PathBuf,
        config_dir: Option<PathBuf>,
        role: ModelRole,
        cancel: &CancelToken,
    ) {
        let emit = emitter(self.events, self.wake);
        let question = self.question(cancel);
        let start = Instant::now();
        let mut progress = |step, total| {
            emit(Event::ModelLoading {
                path: path.clone(),
                role,
                step,
                total,
            });
            go_on(&question)
        };
        let engine = &mut self.engine;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            engine.load(&path, config_dir.as_deref(), role, &mut progress)
        }));
        let needs_config = matches!(outcome, Ok(Err(crate::Error::NeedsConfig { .. })));
        let cancelled = matches!(outcome, Ok(Err(crate::Error::Cancelled)));
        let this_load = || {
            Some(ModelToReload {
                role,
                path: path.clone(),
                config_dir: config_dir.clone(),
            })
        };
        let error = match outcome {
            Ok(Ok(summary)) => {
                return emit(Event::ModelLoaded {
                    summary: Box::new(summary),
                    role,
                    elapsed: start.elapsed(),
                });
            }
            Ok(Err(crate::Error::Cancelled)) => "loading was cancelled".to_string(),
            Ok(Err(e)) => {
                // A lost GPU: the load goes on on the CPU (`GpuLost` says so).
                if gpu_lost::on_error(engine, &e, this_load(), &emit).is_some() {
                    return;
                }
                e.to_string()
            }
            Err(payload) => {
                let message = panic_message(&*payload);
                let work = crate::device::GpuWork::Loading;
                if gpu_lost::on_panic(engine, &message, work, this_load(), &emit).is_some() {
                    return;
                }
                engine.unload(role);
                format!("internal error while loading: {message}")
            }
        };
        let kept = catch_unwind(AssertUnwindSafe(|| engine.loaded(role)))
            .ok()
            .flatten()
            .map(Box::new);
        emit(Event::ModelFailed {
            path,
            role,
            error,
            kept,
            needs_config,
            cancelled,
        });
    }

    fn upscale(&mut self, job: JobId, request: &UpscaleRequest, cancel: &CancelToken) {
        let emit = emitter(self.events, self.wake);
        emit(Event::JobStarted { job });
        let question = self.question(cancel);
        let start = Instant::now();
        let mut on_tile = |step, total| {
            emit(Event::Progress {
                job,
                stage: crate::api::Stage::Upscaling,
                step,
                total,
                elapsed: start.elapsed(),
            });
            go_on(&question)
        };
        let engine = &mut self.engine;
        // An upscale cancelled while it waited (behind a model load) does not start; one
        // cancelled inside a tile's long kernel calls stops there, as a generation does.
        let outcome = if question() {
            Ok(Err(crate::Error::Cancelled))
        } else {
            catch_unwind(AssertUnwindSafe(|| {
                cancel_in_kernels(&question, || engine.upscale(request, &mut on_tile))
            }))
        };
        emit(match outcome {
            Ok(Ok((image, extras))) => Event::Upscaled {
                job,
                image: ResultImage {
                    image,
                    seed: source_seed(request.source_parameters.as_deref()),
                    parameters: request.source_parameters.clone().unwrap_or_default(),
                    extras: Some(extras),
                },
                elapsed: start.elapsed(),
            },
            Ok(Err(crate::Error::Cancelled)) => Event::Cancelled { job },
            Ok(Err(e)) => Event::Failed {
                job,
                error: gpu_lost::on_error(engine, &e, None, &emit).unwrap_or_else(|| e.to_string()),
            },
            Err(payload) => {
                let message = panic_message(&*payload);
                let work = crate::device::GpuWork::Generating;
                Event::Failed {
                    job,
                    error: gpu_lost::on_panic(engine, &message, work, None, &emit)
                        .unwrap_or_else(|| format!("internal error while upscaling: {message}")),
                }
            }
        });
    }

    fn generate(&mut self, job: JobId, request: Box<GenerateRequest>, cancel: &CancelToken) {
        let emit = emitter(self.events, self.wake);
        let preview = self.preview;
        emit(Event::JobStarted { job });
        // Asked between steps and blocks, and inside one long kernel call (CPU attention
        // at large sizes takes minutes): a job cancelled there ends as cancelled, its
        // unfinished result dropped by the scope.
        let question = self.question(cancel);
        let interrupted: &dyn Fn() -> bool = &*question;
        let start = Instant::now();
        let mut progress = |p: EngineProgress| {
            if let Some(image) = p.preview {
                preview.put(Preview {
                    job,
                    step: p.step,
                    image,
                });
            }
            emit(Event::Progress {
                job,
                stage: p.stage,
                step: p.step,
                total: p.total,
                elapsed: p.elapsed,
            });
            go_on(&question)
        };
        let engine = &mut self.engine;
        // What it will cost: refused when it cannot fit, announced when long. Not for a
        // job already cancelled (costing may time a UNet call).
        let cost = if interrupted() {
            Ok(Ok(None))
        } else {
            catch_unwind(AssertUnwindSafe(|| {
                cancel_in_kernels(&question, || engine.cost(&request, interrupted))
            }))
        };
        if let Ok(Ok(Some(Cost {
            time: Some(time), ..
        }))) = cost
            && time > LONG_JOB
        {
            emit(Event::Notice {
                job,
                message: format!(
                    "this generation will take at least {} at this device's measured speed; Cancel stops it at once",
                    human_duration(time)
                ),
            });
        }
        let outcome = if interrupted() {
            Ok(Err(crate::Error::Cancelled))
        } else if let Err(payload) = cost {
            // A panic while costing leaves the models as unknown as one while generating:
            // the same handling below.
            Err(payload)
        } else if let Ok(Err(refused)) = cost {
            Ok(Err(refused))
        } else {
            // The metadata (which hashes the model files) runs under the guard too.
            catch_unwind(AssertUnwindSafe(|| {
                let generation = cancel_in_kernels(&question, || {
                    engine.generate(&request, &mut progress, interrupted)
                })?;
                let parameters: Vec<String> = (0..generation.images.len())
                    .map(|i| engine.parameters(&request, &generation, i))
                    .collect();
                Ok((generation, parameters))
            }))
        };
        match outcome {
            Ok(Ok((generation, parameters))) => emit(Event::Finished {
                job,
                images: generation
                    .images
                    .into_iter()
                    .zip(parameters)
                    .enumerate()
                    .map(|(i, (image, parameters))| ResultImage {
                        image,
                        seed: request.image_seed(i),
                        parameters,
                        extras: None,
                    })
                    .collect(),
                request,
                elapsed: start.elapsed(),
                warnings: generation.warnings,
            }),
            Ok(Err(crate::Error::Cancelled)) => emit(Event::Cancelled { job }),
            Ok(Err(e)) => emit(Event::Failed {
                job,
                error: gpu_lost::on_error(engine, &e, None, &emit).unwrap_or_else(|| e.to_string()),
            }),
            Err(payload)
                if let Some(error) = gpu_lost::on_panic(
                    engine,
                    &panic_message(&*payload),
                    crate::device::GpuWork::Generating,
                    None,
                    &emit,
                ) =>
            {
                emit(Event::Failed { job, error })
            }
            Err(payload) => {
                // The models' state is unknown after a panic: free them.
                for role in [ModelRole::Main, ModelRole::Refiner] {
                    engine.unload(role);
                    emit(Event::ModelUnloaded(role));
                }
                emit(Event::Failed {
                    job,
                    error: format!(
                        "internal error (the model was unloaded; load it again): {}",
                        panic_message(&*payload)
                    ),
                });
            }
        }
    }
}

/// `2 h 5 min`, `7 min`, `40 s`.
fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// The seed an image's parameters name (0 without one), for the upscaled file's name.
fn source_seed(parameters: Option<&str>) -> u64 {
    parameters
        .map(crate::metadata::Parameters::parse)
        .and_then(|p| p.get("Seed").and_then(|s| s.trim().parse().ok()))
        .unwrap_or(0)
}
