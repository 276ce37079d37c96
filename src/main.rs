use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The printing commands' stderr reads like a compiler's: `warning: <path>: <problem>`, the same
/// shape as their `error: ...` lines. The daemon keeps tracing's format (or JSON).
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warning",
            tracing::Level::INFO => "info",
            tracing::Level::DEBUG => "debug",
            tracing::Level::TRACE => "trace",
        };
        write!(writer, "{level}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

fn main() -> ExitCode {
    let cli = gpu_labeler::cli::Cli::parse();
    // The daemon reports what it publishes (info); the printing commands only warn. kube's
    // client logs each failed request at ERROR without saying which object or why ("failed with
    // status 500 Internal Server Error"); the daemon's own line names both, so kube's own lines
    // only appear when GPU_LABELER_LOG asks for them.
    let (daemon, json, level) = match &cli.command {
        gpu_labeler::cli::Command::Run { publish, .. } => {
            (true, publish.log_json, "info,kube_client=off")
        }
        _ => (false, false, "warn"),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("GPU_LABELER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_env_filter(filter);
    if json {
        logs.json().init();
    } else if daemon {
        logs.without_time()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    } else {
        logs.event_format(Plain).init();
    }
    ExitCode::from(gpu_labeler::cli::run(cli))
}
