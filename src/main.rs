use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = gpu_labeler::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("GPU_LABELER_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    ExitCode::from(gpu_labeler::cli::run(cli))
}
