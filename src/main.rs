use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = gpu_labeler::cli::Cli::parse();
    // The daemon reports what it publishes (info); the printing commands only warn.
    let (json, level) = match &cli.command {
        gpu_labeler::cli::Command::Run { publish, .. } => (publish.log_json, "info"),
        _ => (false, "warn"),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("GPU_LABELER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_env_filter(filter);
    if json {
        logs.json().init();
    } else {
        logs.without_time()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
    ExitCode::from(gpu_labeler::cli::run(cli))
}
