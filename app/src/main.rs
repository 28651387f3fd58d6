//! The `ember` binary.

/// mimalloc keeps freed activation buffers for reuse instead of returning them to the kernel.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    ember_app::cli::main(std::env::args_os())
}
