//! A cancel that reaches inside one long kernel call. The caller puts a question ("should the
//! work stop?") in scope for its thread with [`interruptible`]; kernels that can run for
//! minutes in one call ask it as they go (CPU attention: before every key tile) and give
//! up, leaving their output unfinished, and [`interruptible`] then answers `None`: an
//! unfinished result never leaves the scope.
//!
//! Why not a parameter: CPU attention is quadratic in the image's pixels (SD 1.5's first
//! attention at 2048² is about 11 TFLOP for a batch of two: minutes of two cores), while a
//! cancel is checked between the network's blocks; threading a cancel through every
//! `forward` would put it in every model's signature for the sake of one kernel.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the work in scope should stop. Asked from the pool's threads, so `Send + Sync`;
/// it should be cheap (an atomic load).
pub type Question = Arc<dyn Fn() -> bool + Send + Sync>;

/// The question in scope and whether a kernel gave up on it.
#[derive(Clone)]
pub(crate) struct Scope {
    question: Question,
    gave_up: Arc<AtomicBool>,
}

impl Scope {
    /// Whether to stop; once any task of the scope has been told so, every later ask says so
    /// without asking again (the answer is final: the output is already unfinished).
    pub(crate) fn stop(&self) -> bool {
        if self.gave_up.load(Ordering::Relaxed) {
            return true;
        }
        let stop = (self.question)();
        if stop {
            self.gave_up.store(true, Ordering::Relaxed);
        }
        stop
    }
}

thread_local! {
    static SCOPE: RefCell<Option<Scope>> = const { RefCell::new(None) };
}

/// Runs `f` with `question` in scope on this thread: `None` when a kernel it called gave up
/// on it (its result is then unfinished and dropped), else `f`'s result. Scopes nest; the
/// outer one is back in force when `f` returns or unwinds.
pub fn interruptible<R>(question: Question, f: impl FnOnce() -> R) -> Option<R> {
    let gave_up = Arc::new(AtomicBool::new(false));
    let scope = Scope {
        question,
        gave_up: gave_up.clone(),
    };
    let _restore = Restore(SCOPE.with(|s| s.replace(Some(scope))));
    let result = f();
    (!gave_up.load(Ordering::Relaxed)).then_some(result)
}

/// Puts the outer scope back, also when `f` panics.
struct Restore(Option<Scope>);

impl Drop for Restore {
    fn drop(&mut self) {
        let outer = self.0.take();
        SCOPE.with(|s| *s.borrow_mut() = outer);
    }
}

/// The scope in force on this thread, for a kernel to hand to its parallel tasks.
pub(crate) fn current() -> Option<Scope> {
    SCOPE.with(|s| s.borrow().clone())
}

/// Whether the work in scope on this thread should stop (false outside [`interruptible`]).
/// Work that gets `true` must stop: the scope's result is dropped. For long loops outside
/// this crate (and tests that stand in for a long kernel).
pub fn requested() -> bool {
    current().is_some_and(|scope| scope.stop())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_scope_nothing_is_requested() {
        assert!(!requested());
        assert_eq!(interruptible(Arc::new(|| false), requested), Some(false));
        assert!(!requested());
    }

    #[test]
    fn a_stop_asked_for_drops_the_result_and_stays_asked_for() {
        let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = asked.clone();
        let question: Question = Arc::new(move || counter.fetch_add(1, Ordering::Relaxed) >= 1);
        let result = interruptible(question, || [requested(), requested(), requested()]);
        assert_eq!(
            result, None,
            "a kernel gave up, so the result is unfinished"
        );
        // The third ask did not ask again: the answer was already final.
        assert_eq!(asked.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn scopes_nest_and_the_outer_one_is_restored_after_a_panic() {
        let outer = interruptible(Arc::new(|| false), || {
            let inner = interruptible(Arc::new(|| true), requested);
            assert_eq!(inner, None);
            let panicked = std::panic::catch_unwind(|| {
                interruptible(Arc::new(|| true), || panic!("a kernel panicked"))
            });
            assert!(panicked.is_err());
            requested()
        });
        assert_eq!(outer, Some(false), "the inner scopes' stop is theirs alone");
        assert!(current().is_none());
    }
}
