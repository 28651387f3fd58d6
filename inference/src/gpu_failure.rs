//! A GPU runtime's report of a failure (dozens of lines from Burn and cubecl) as Ember's
//! one-line error: its innermost cause, CUDA's status in words, and whether the GPU is
//! lost for good ([`Error::DeviceLost`]) or only short of memory.

use crate::error::Error;

/// What the GPU was doing when it failed, for the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GpuWork {
    Generating,
    Loading,
}

/// The GPU runtime's report (dozens of lines) of a failure while generating, as one line.
pub(crate) fn device_failure(report: &str) -> Error {
    device_failure_while(GpuWork::Generating, report)
}

/// The GPU runtime's report (dozens of lines) of a failure during `work`, as one line
/// naming its innermost cause. A lost GPU ([`Error::DeviceLost`]) is told apart from one
/// short of memory: a smaller size does not help it, and nothing more runs on it.
pub(crate) fn device_failure_while(work: GpuWork, report: &str) -> Error {
    let (doing, outcome, hint) = match work {
        GpuWork::Generating => (
            "generating",
            "nothing was saved",
            "Try a smaller size or batch, --vae-tiling on, or --device cpu",
        ),
        GpuWork::Loading => (
            "loading the model",
            "the model was not loaded",
            "Close other programs that use the GPU, or use --device cpu",
        ),
    };
    let lost = gpu_is_lost(report);
    let cause = innermost_cause(report);
    let loss = if lost { wgpu_loss(cause) } else { None };
    let cause = match (cuda_status_name(cause), loss) {
        (Some(name), _) => format!("{cause}: {name}"),
        (None, Some(loss)) => loss,
        (None, None) => cause.to_string(),
    };
    if lost {
        return Error::DeviceLost {
            what: format!("the GPU stopped working while {doing} ({cause}); {outcome}"),
        };
    }
    Error::Device(format!(
        "the GPU failed while {doing} ({cause}); {outcome}. {hint}"
    ))
}

/// Whether a GPU runtime's report says the device is lost for good: cubecl marks a device
/// "poisoned" after a fault CUDA makes sticky (an Xid error, a kernel's illegal access) and
/// after wgpu's device-lost callback (a driver reset, a GPU removed); a call that is not a
/// launch (an allocation) reports the sticky fault by its CUDA name or status.
fn gpu_is_lost(report: &str) -> bool {
    report.contains("poisoned")
        || report.contains("Device lost")
        || report.contains("DeviceLost")
        || report.contains(WGPU_UNREADABLE)
        || STICKY_CUDA_FAULTS.iter().any(|(status, name)| {
            report.contains(name) || report.contains(&format!("status {status}"))
        })
}

/// cubecl's wgpu runtime failing to map the buffer it copied results into: wgpu refuses that
/// only on a device that is no longer valid, which on a destroyed device (as
/// `tests/reference/wgpu_lost.rs` does) comes before the lost callback marks it poisoned.
const WGPU_UNREADABLE: &str = "the staging buffer could not be mapped";

/// The CUDA statuses after which a context "cannot be used" (CUDA's driver API), as cubecl's
/// `poisons_device` lists them.
const STICKY_CUDA_FAULTS: [(u32, &str); 11] = [
    (214, "CUDA_ERROR_ECC_UNCORRECTABLE"),
    (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    (702, "CUDA_ERROR_LAUNCH_TIMEOUT"),
    (709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"),
    (710, "CUDA_ERROR_ASSERT"),
    (714, "CUDA_ERROR_HARDWARE_STACK_ERROR"),
    (715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
    (716, "CUDA_ERROR_MISALIGNED_ADDRESS"),
    (717, "CUDA_ERROR_INVALID_ADDRESS_SPACE"),
    (718, "CUDA_ERROR_INVALID_PC"),
    (719, "CUDA_ERROR_LAUNCH_FAILED"),
];

/// What a CUDA status in a cubecl report ("… failed with status 719") means, for the
/// statuses a failing GPU gives.
fn cuda_status_name(cause: &str) -> Option<&'static str> {
    let status = cause
        .rsplit_once("with status ")?
        .1
        .trim()
        .parse::<u32>()
        .ok()?;
    Some(match status {
        2 => "out of memory",
        46 => "the GPU is busy or unavailable",
        700 => "an illegal memory access",
        719 => "an unspecified launch failure, as after a fault or a GPU that fell off the bus",
        999 => "an unknown error",
        _ => return None,
    })
}

/// cubecl's record of why wgpu lost a device ("Destroyed: ", "Unknown: <the driver's
/// words>", wgpu's `DeviceLostReason` and message), in words.
fn wgpu_loss(cause: &str) -> Option<String> {
    if cause.contains(WGPU_UNREADABLE) {
        return Some("wgpu could not read from the device any more".into());
    }
    let (reason, message) = cause.split_once(':')?;
    let message = message.trim();
    Some(match (reason, message.is_empty()) {
        ("Destroyed", _) => "wgpu lost the device: it was destroyed".to_string(),
        ("Unknown", true) => "wgpu lost the device".to_string(),
        ("Unknown", false) => format!("wgpu lost the device: {message}"),
        _ => return None,
    })
}

/// The last line of a GPU runtime's report that says what went wrong.
pub(crate) fn innermost_cause(report: &str) -> &str {
    report
        .lines()
        .map(str::trim)
        .rfind(|l| {
            !l.is_empty()
                && !l.starts_with("Caused by")
                && !l.starts_with("skipped")
                && !l.starts_with('(')
                && !l.starts_with("Asked at")
                && !l.to_ascii_lowercase().contains("backtrace")
        })
        .unwrap_or("unknown failure")
}

#[cfg(test)]
mod tests {
    /// The reports cubecl's CUDA runtime gave on the stand-in driver after a sticky fault:
    /// from a wait (the device "poisoned") and from an allocation (by its CUDA name). Each is
    /// the GPU lost, named by its cause, never by a "Backtrace:" line.
    #[test]
    fn a_sticky_cuda_fault_is_the_gpu_lost_named_by_its_cause() {
        let waited = "Error while reading data: Data(StorageAccess(Read(\"The device is \
            poisoned\nCaused by:\n  cuStreamSynchronize failed with status 719\nBacktrace:\n\
            No backtrace available\")))";
        let allocated = "Unknown error happened during execution: CUDA allocation error: \
            DriverError(CUDA_ERROR_LAUNCH_FAILED, \"unspecified launch failure\")";
        let cases = [
            (
                waited,
                "(cuStreamSynchronize failed with status 719: an unspecified launch failure",
            ),
            (allocated, "CUDA_ERROR_LAUNCH_FAILED"),
        ];
        for (report, cause) in cases {
            let error = super::device_failure(report);
            let crate::Error::DeviceLost { what } = &error else {
                panic!("not the GPU lost: {error}");
            };
            assert!(what.contains(cause), "{what}");
            assert!(!what.contains("acktrace"), "{what}");
            assert_eq!(error.to_string().lines().count(), 1, "{error}");
        }
        let short =
            "CUDA allocation error: DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")";
        assert!(
            !super::gpu_is_lost(short),
            "out of memory is not the GPU lost"
        );
    }

    /// The reports Burn gives once wgpu has lost the device: destroyed (as
    /// `tests/reference/wgpu_lost.rs` does on lavapipe) or lost by the driver, and a read
    /// that fails on the destroyed device before it is marked lost.
    #[test]
    fn a_lost_wgpu_device_is_the_gpu_lost_in_words() {
        let report = |reason: &str| {
            format!(
                "Failed to access TensorData storage: failed to materialize bytes: The device \
                is poisoned\nCaused by:\n  {reason}\nBacktrace:\nNo backtrace available"
            )
        };
        let cases = [
            ("Destroyed: ", "(wgpu lost the device: it was destroyed)"),
            ("Unknown: ", "(wgpu lost the device)"),
            (
                "Unknown: VK_ERROR_DEVICE_LOST",
                "(wgpu lost the device: VK_ERROR_DEVICE_LOST)",
            ),
        ];
        let unreadable = "Failed to access TensorData storage: failed to materialize bytes: the \
            staging buffer could not be mapped: Error occurred when trying to async map a buffer\
            \nBacktrace:\nNo backtrace available";
        let error = super::device_failure(unreadable);
        let crate::Error::DeviceLost { what } = &error else {
            panic!("not the GPU lost: {error}");
        };
        assert!(
            what.contains("(wgpu could not read from the device any more)"),
            "{what}"
        );
        for (reason, cause) in cases {
            let error = super::device_failure(&report(reason));
            let crate::Error::DeviceLost { what } = &error else {
                panic!("not the GPU lost: {error}");
            };
            assert!(what.contains(cause), "{what}");
            assert_eq!(error.to_string().lines().count(), 1, "{error}");
        }
    }

    /// The shape of the report Burn gave on lavapipe when a buffer could not be allocated.
    #[test]
    fn a_gpu_failure_report_becomes_one_line_naming_its_cause() {
        let report = "Execution(An error happened during execution\nCaused by:\n  Several \
            failures at once\nCaused by:\n  The bytes were never written (failure #5042)\n  \
            skipped `ReduceKernel`: it needed memory ManagedMemoryId { value: 8883 }\n  (86 \
            older skip record(s) were dropped)\nCaused by:\n  An IO error happened\nCaused \
            by:\n  can't allocate buffer of size: 536870912\nNo backtrace available\nAsked \
            at:\nNo backtrace available)";
        let message = super::device_failure(report).to_string();
        assert_eq!(message.lines().count(), 1, "{message}");
        assert!(
            message.contains("(can't allocate buffer of size: 536870912)"),
            "{message}"
        );
    }
}
