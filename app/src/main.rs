//! The `ember` binary.

fn main() -> std::process::ExitCode {
    ember_app::cli::main(std::env::args_os())
}
