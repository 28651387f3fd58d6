//! Model downloads in the app: one at a time on its own thread (through [`crate::download`]),
//! its progress for the Download window, and what arrived for the app to load or list.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};

use crate::download::{self, Failure, Options, Progress, Target};

/// The Download window's state.
#[derive(Default)]
pub struct Downloads {
    /// The window is shown.
    pub open: bool,
    /// The URL being typed.
    pub url: String,
    pub active: Option<Active>,
}

/// The download under way.
pub struct Active {
    /// What is downloading (a catalogue title or the URL).
    pub label: String,
    pub progress: Option<Progress>,
    cancel: Arc<AtomicBool>,
    events: Receiver<Message>,
}

enum Message {
    Progress(Progress),
    Done(Result<PathBuf, Failure>),
}

/// How a download ended.
#[derive(Debug, PartialEq)]
pub enum Arrival {
    Done(PathBuf),
    Failed(String),
    Cancelled,
}

/// Progress messages at most this often (the window redraws on each).
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

impl Downloads {
    /// Starts downloading `target` into `dir` on its own thread; `wake` redraws the window.
    pub fn start(
        &mut self,
        target: Target,
        dir: PathBuf,
        label: String,
        wake: impl Fn() + Send + 'static,
    ) -> Result<(), String> {
        if let Some(active) = &self.active {
            return Err(format!(
                "{} is still downloading; wait for it or cancel it",
                active.label
            ));
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let (tx, events) = unbounded();
        let options = Options {
            cancel: cancel.clone(),
            ..Options::new(dir)
        };
        std::thread::Builder::new()
            .name("download".into())
            .spawn(move || {
                let mut last = Instant::now() - PROGRESS_EVERY;
                let result = download::download(&target, &options, &mut |p| {
                    if last.elapsed() >= PROGRESS_EVERY {
                        last = Instant::now();
                        let _ = tx.send(Message::Progress(*p));
                        wake();
                    }
                });
                let _ = tx.send(Message::Done(result));
                wake();
            })
            .map_err(|e| format!("could not start the download: {e}"))?;
        self.active = Some(Active {
            label,
            progress: None,
            cancel,
            events,
        });
        Ok(())
    }

    /// Asks the download to stop (its `.part` stays for a resume).
    pub fn cancel(&self) {
        if let Some(active) = &self.active {
            active.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Takes in the download's messages; returns how it ended once it has.
    pub fn poll(&mut self) -> Option<Arrival> {
        let active = self.active.as_mut()?;
        while let Ok(message) = active.events.try_recv() {
            match message {
                Message::Progress(p) => active.progress = Some(p),
                Message::Done(result) => {
                    self.active = None;
                    return Some(match result {
                        Ok(path) => Arrival::Done(path),
                        Err(Failure::Cancelled) => Arrival::Cancelled,
                        Err(Failure::Failed(e)) => Arrival::Failed(e),
                    });
                }
            }
        }
        None
    }
}
