//! The `ember` binary.

/// mimalloc keeps freed activation buffers for reuse instead of returning them to the kernel.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    quiet_headless_vulkan();
    ember_app::cli::main(std::env::args_os())
}

/// Mesa's device-select Vulkan layer connects to Wayland whenever GPUs are listed, and where
/// there is no desktop session (SSH, CI, containers: no `XDG_RUNTIME_DIR`) it prints an
/// `error:` line on stderr each time. Ember picks its adapter itself, so there the layer is
/// turned off (`NODEVICE_SELECT`, Mesa's own switch).
#[allow(unsafe_code)]
fn quiet_headless_vulkan() {
    let var = |name| std::env::var_os(name).is_some();
    if !var("XDG_RUNTIME_DIR") && !var("NODEVICE_SELECT") {
        // SAFETY: the first thing `main` does, before any other thread exists.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}
