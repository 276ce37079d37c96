use std::process::ExitCode;

use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

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
    let cli = gpu_labeler::cli::parse();
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
    let value = std::env::var("GPU_LABELER_LOG").ok();
    let (filter, refused) = log_filter(value.as_deref(), level);
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    let registry = tracing_subscriber::registry().with(filter);
    if json {
        registry.with(logs.json()).init();
    } else if daemon {
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        registry.with(logs.without_time().with_ansi(ansi)).init();
    } else {
        registry.with(logs.event_format(Plain)).init();
    }
    if refused {
        tracing::warn!(
            "GPU_LABELER_LOG={:?} is not a log filter (a level, or target=level, comma-separated); the default is used",
            value.unwrap_or_default()
        );
    }
    ExitCode::from(gpu_labeler::cli::run(cli))
}

/// GPU_LABELER_LOG: a level or `target=level` directives, comma-separated, as RUST_LOG's (read
/// by tracing's `Targets`). Unset or empty gives `default`; so does a value that is not such a
/// list (returned `true`, to be warned about), rather than a filter that would show nothing.
fn log_filter(value: Option<&str>, default: &str) -> (Targets, bool) {
    let level = |l: &str| l.parse::<tracing_subscriber::filter::LevelFilter>().is_ok();
    let target = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
    };
    let readable = |v: &str| {
        v.split(',')
            .map(str::trim)
            .all(|d| match d.split_once('=') {
                Some((t, l)) => target(t.trim()) && level(l.trim()),
                None => level(d) || target(d),
            })
    };
    let fallback = || default.parse().unwrap_or_default();
    match value.map(str::trim) {
        None | Some("") => (fallback(), false),
        Some(v) if readable(v) => (v.parse().unwrap_or_else(|_| fallback()), false),
        Some(_) => (fallback(), true),
    }
}
