//! What the worker does when the GPU is lost mid-command (a fault CUDA makes sticky, a
//! driver reset): the engine goes on on the CPU, and the UI is told what to load again there,
//! so the app stays usable without a restart.

use super::{Engine, Event, ModelRole, ModelToReload};
use crate::device::GpuWork;

/// When `error` is the GPU lost and the engine can go on on the CPU: moves it there, emits
/// [`Event::GpuLost`] and returns the failed command's message. `loading` is the model a
/// failed load was loading: it is loaded again in place of its slot's old model. `None`
/// leaves the error as it is.
pub(super) fn on_error(
    engine: &mut impl Engine,
    error: &crate::Error,
    loading: Option<ModelToReload>,
    emit: &dyn Fn(Event),
) -> Option<String> {
    let crate::Error::DeviceLost { what } = error else {
        return None;
    };
    let mut reload = engine.fall_back_to_cpu()?;
    if let Some(loading) = loading {
        reload.retain(|m| m.role != loading.role);
        reload.push(loading);
        reload.sort_by_key(|m| m.role != ModelRole::Main);
    }
    let error = format!(
        "{what}. Ember goes on on the CPU, which is slower; restart Ember to use the GPU again"
    );
    emit(Event::GpuLost {
        error: error.clone(),
        reload,
    });
    Some(error)
}

/// [`on_error`] for a panic during `work`: Burn panics on a lost GPU where a read was not
/// asked to return errors, and its message says the device is poisoned.
pub(super) fn on_panic(
    engine: &mut impl Engine,
    message: &str,
    work: GpuWork,
    loading: Option<ModelToReload>,
    emit: &dyn Fn(Event),
) -> Option<String> {
    let error = crate::device::device_failure_while(work, message);
    on_error(engine, &error, loading, emit)
}
