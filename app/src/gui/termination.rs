//! A polite end on SIGTERM, SIGINT and SIGHUP (a logout, Ctrl+C in the terminal, the
//! terminal closed): Ember closes as if asked to keep its queue for the next start, so
//! settings, jobs still to make and images waiting unsaved are not lost, where the signal's
//! default would end the process at once.
//!
//! The handler only sets a flag (all a signal handler may safely do; a second signal ends
//! the process at once); a watcher thread wakes the UI, whose next frame closes the window
//! ([`EmberApp::end_on_request`]).
//!
//! [`EmberApp::end_on_request`]: crate::gui::app::EmberApp::end_on_request

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Whether the process was asked to end.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// Catches the signals and wakes `ctx` when one comes (Unix; elsewhere nothing).
pub fn watch(ctx: &egui::Context) {
    if !install() {
        return;
    }
    let ctx = ctx.clone();
    let spawned = std::thread::Builder::new()
        .name("end-signal".into())
        .spawn(move || {
            while !requested() {
                std::thread::sleep(Duration::from_millis(100));
            }
            ctx.request_repaint();
        });
    if let Err(e) = spawned {
        eprintln!("ember: a logout or Ctrl+C will end Ember at once ({e})");
    }
}

#[cfg(unix)]
#[allow(unsafe_code)] // installing a signal handler has no safe form in libc
fn install() -> bool {
    extern "C" fn on_signal(_: libc::c_int) {
        // A second signal (Ctrl+C again while a save holds the close up) ends at once.
        if REQUESTED.swap(true, Ordering::Relaxed) {
            // SAFETY: `_exit` is async-signal-safe.
            unsafe { libc::_exit(1) };
        }
    }
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    [libc::SIGTERM, libc::SIGINT, libc::SIGHUP]
        .into_iter()
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        .all(|signal| unsafe { libc::signal(signal, handler) } != libc::SIG_ERR)
}

#[cfg(not(unix))]
fn install() -> bool {
    false
}
