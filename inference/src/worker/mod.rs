//! The inference worker: one named thread that owns the engine (model and device) and
//! serves plain-data [`Command`]s, answering with [`Event`]s and latest-only [`Preview`]s.
//!
//! **Invariants:** all model and device work happens on this thread; every command runs under
//! `catch_unwind`, so a panic becomes a failed event (the model is freed, as its state is
//! unknown) and the worker keeps serving; the UI is woken with the callback it gave after
//! every event or preview, and never blocks on the worker.

mod engine;
pub mod estimate;
mod gpu_lost;
mod protocol;

pub use engine::{BurnEngine, Engine, EngineProgress};
pub use estimate::Cost;
pub use protocol::{
    CancelToken, Command, Event, JobId, ModelRole, ModelSummary, ModelToReload, Preview,
    ResultImage,
};

use std::ops::ControlFlow;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};

/// The newest preview, overwritten by the worker, taken by the UI.
#[derive(Clone, Default)]
struct PreviewSlot(Arc<Mutex<Option<Preview>>>);

impl PreviewSlot {
    fn put(&self, preview: Preview) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(preview);
    }

    fn take(&self) -> Option<Preview> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// `work` with a job's cancel `question` in scope for long kernel calls
/// ([`kernels::interrupt`]): a job cancelled inside one ends as cancelled, the kernel's
/// unfinished result dropped.
fn cancel_in_kernels<T>(
    question: &kernels::interrupt::Question,
    work: impl FnOnce() -> crate::Result<T>,
) -> crate::Result<T> {
    kernels::interrupt::interruptible(question.clone(), work)
        .unwrap_or(Err(crate::Error::Cancelled))
}

/// How long dropping the handle waits for the worker to stop before leaving it behind.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The UI's handle on the worker thread. Dropping it stops the running job (within a
/// step), drops the queued ones and joins the worker, waiting at most [`SHUTDOWN_WAIT`].
pub struct WorkerHandle {
    commands: Sender<Command>,
    events: Receiver<Event>,
    preview: PreviewSlot,
    /// Set on drop: every job and load checks it as it checks its own token.
    stopping: CancelToken,
    /// Disconnected when the worker thread returns.
    stopped: Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl WorkerHandle {
    /// Starts the worker thread (named `inference`) around `engine`; `wake` is called after
    /// every event or preview (eframe: `ctx.request_repaint()`).
    pub fn spawn(
        engine: impl Engine + 'static,
        wake: impl Fn() + Send + 'static,
    ) -> std::io::Result<Self> {
        let (commands, command_rx) = unbounded();
        let (event_tx, events) = unbounded();
        let preview = PreviewSlot::default();
        let slot = preview.clone();
        let stopping = CancelToken::new();
        let stop = stopping.clone();
        let (stopped_tx, stopped) = crossbeam_channel::bounded::<()>(0);
        let thread = std::thread::Builder::new()
            .name("inference".into())
            .spawn(move || {
                let _stopped = stopped_tx; // dropped (disconnecting) when serving ends
                serve(engine, &command_rx, &event_tx, &slot, &wake, &stop);
            })?;
        Ok(Self {
            commands,
            events,
            preview,
            stopping,
            stopped,
            thread: Some(thread),
        })
    }

    /// Sends a command (never blocks).
    pub fn send(&self, command: Command) {
        // The worker only stops on Shutdown or Drop, so a send error cannot happen while
        // the handle lives.
        let _ = self.commands.send(command);
    }

    /// The next event, if one is waiting.
    pub fn try_event(&self) -> Option<Event> {
        self.events.try_recv().ok()
    }

    /// The newest preview since the last call, if any.
    pub fn take_preview(&self) -> Option<Preview> {
        self.preview.take()
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        self.stopping.cancel();
        let _ = self.commands.send(Command::Shutdown);
        let Some(thread) = self.thread.take() else {
            return;
        };
        // Cancel acts within a step; a step stuck in one huge kernel must not keep the
        // window open: past the wait the thread is left to end with the process.
        match self.stopped.recv_timeout(SHUTDOWN_WAIT) {
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => eprintln!(
                "ember: the inference thread did not stop within {} s; exiting without it",
                SHUTDOWN_WAIT.as_secs()
            ),
            _ => {
                let _ = thread.join();
            }
        }
    }
}

/// Jobs expected to run longer than this are announced before they start.
const LONG_JOB: Duration = Duration::from_secs(5 * 60);

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

/// A panic payload as text.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

fn serve(
    mut engine: impl Engine,
    commands: &Receiver<Command>,
    events: &Sender<Event>,
    preview: &PreviewSlot,
    wake: &dyn Fn(),
    stopping: &CancelToken,
) {
    let emit = |event: Event| {
        let _ = events.send(event);
        wake();
    };
    while let Ok(command) = commands.recv() {
        if stopping.is_cancelled() {
            break;
        }
        match command {
            Command::Shutdown => break,
            Command::Unload(role) => {
                engine.unload(role);
                emit(Event::ModelUnloaded(role));
            }
            Command::LoadModel {
                path,
                config_dir,
                role,
                cancel,
            } => {
                let start = Instant::now();
                let mut progress = |step, total| {
                    emit(Event::ModelLoading {
                        path: path.clone(),
                        role,
                        step,
                        total,
                    });
                    if cancel.is_cancelled() || stopping.is_cancelled() {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                };
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    engine.load(&path, config_dir.as_deref(), role, &mut progress)
                }));
                let needs_config = matches!(outcome, Ok(Err(crate::Error::NeedsConfig { .. })));
                let this_load = || {
                    Some(ModelToReload {
                        role,
                        path: path.clone(),
                        config_dir: config_dir.clone(),
                    })
                };
                let error = match outcome {
                    Ok(Ok(summary)) => {
                        emit(Event::ModelLoaded {
                            summary: Box::new(summary),
                            role,
                            elapsed: start.elapsed(),
                        });
                        continue;
                    }
                    Ok(Err(crate::Error::Cancelled)) => "loading was cancelled".to_string(),
                    Ok(Err(e)) => {
                        // A lost GPU: the load goes on on the CPU (`GpuLost` says so).
                        if gpu_lost::on_error(&mut engine, &e, this_load(), &emit).is_some() {
                            continue;
                        }
                        e.to_string()
                    }
                    Err(payload) => {
                        let message = panic_message(&*payload);
                        let work = crate::device::GpuWork::Loading;
                        if gpu_lost::on_panic(&mut engine, &message, work, this_load(), &emit)
                            .is_some()
                        {
                            continue;
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
                });
            }
            Command::Upscale {
                job,
                request,
                cancel,
            } => {
                emit(Event::JobStarted { job });
                let start = Instant::now();
                let mut on_tile = |step, total| {
                    emit(Event::Progress {
                        job,
                        stage: crate::api::Stage::Upscaling,
                        step,
                        total,
                        elapsed: start.elapsed(),
                    });
                    if cancel.is_cancelled() || stopping.is_cancelled() {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                };
                let outcome =
                    catch_unwind(AssertUnwindSafe(|| engine.upscale(&request, &mut on_tile)));
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
                        error: gpu_lost::on_error(&mut engine, &e, None, &emit)
                            .unwrap_or_else(|| e.to_string()),
                    },
                    Err(payload) => {
                        let message = panic_message(&*payload);
                        let work = crate::device::GpuWork::Generating;
                        Event::Failed {
                            job,
                            error: gpu_lost::on_panic(&mut engine, &message, work, None, &emit)
                                .unwrap_or_else(|| {
                                    format!("internal error while upscaling: {message}")
                                }),
                        }
                    }
                });
            }
            Command::Generate {
                job,
                request,
                cancel,
            } => {
                emit(Event::JobStarted { job });
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
                    if cancel.is_cancelled() || stopping.is_cancelled() {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                };
                // What it will cost: refused when it cannot fit, announced when long. Not
                // for a job already cancelled (costing may time a UNet call).
                let interrupted = || cancel.is_cancelled() || stopping.is_cancelled();
                // The same question inside one long kernel call (CPU attention at large
                // sizes takes minutes): a job cancelled there ends as cancelled, its
                // unfinished result dropped by the scope.
                let question: kernels::interrupt::Question = {
                    let (cancel, stopping) = (cancel.clone(), stopping.clone());
                    Arc::new(move || cancel.is_cancelled() || stopping.is_cancelled())
                };
                let cost = if interrupted() {
                    Ok(Ok(None))
                } else {
                    catch_unwind(AssertUnwindSafe(|| {
                        cancel_in_kernels(&question, || engine.cost(&request, &interrupted))
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
                    // A panic while costing leaves the models as unknown as one while
                    // generating: the same handling below.
                    Err(payload)
                } else if let Ok(Err(refused)) = cost {
                    Ok(Err(refused))
                } else {
                    // The metadata (which hashes the model files) runs under the guard too.
                    catch_unwind(AssertUnwindSafe(|| {
                        let generation = cancel_in_kernels(&question, || {
                            engine.generate(&request, &mut progress, &interrupted)
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
                                seed: request.seed.wrapping_add(i as u64),
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
                        error: gpu_lost::on_error(&mut engine, &e, None, &emit)
                            .unwrap_or_else(|| e.to_string()),
                    }),
                    Err(payload)
                        if let Some(error) = gpu_lost::on_panic(
                            &mut engine,
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
    }
}
