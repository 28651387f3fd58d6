//! The inference worker: one named thread that owns the engine (model and device) and
//! serves plain-data [`Command`]s, answering with [`Event`]s and latest-only [`Preview`]s.
//!
//! **Invariants:** all model and device work happens on this thread; every command runs under
//! `catch_unwind`, so a panic becomes a failed event (the model is freed, as its state is
//! unknown) and the worker keeps serving; the UI is woken with the callback it gave after
//! every event or preview, and never blocks on the worker.

mod burn_engine;
mod engine;
pub mod estimate;
mod gpu_lost;
mod protocol;
mod serve;

pub use burn_engine::BurnEngine;
pub use engine::{Engine, EngineProgress};
pub use estimate::Cost;
pub use protocol::{
    CancelToken, Command, Event, JobId, ModelRole, ModelSummary, ModelToReload, Preview,
    ResultImage,
};

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

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
                let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    serve::serve(engine, &command_rx, &event_tx, &slot, &wake, &stop);
                }));
                // Jobs and loads catch their own panics; one outside them ends the thread,
                // which the UI must hear of rather than wait for forever.
                if let Err(payload) = served {
                    let error = panic_message(&*payload);
                    let _ = event_tx.send(Event::Stopped { error });
                    wake();
                }
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
        // The worker stops on Shutdown or Drop, or after `Event::Stopped`, when nothing
        // sent is done any more: the UI sends nothing then.
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

/// A panic payload as text.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
