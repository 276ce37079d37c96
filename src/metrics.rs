//! The daemon's health and metrics: a `prometheus-client` registry (every name prefixed
//! `gpu_labeler_`) and the small HTTP server that serves `/healthz`, `/readyz` and `/metrics` on
//! `--listen`.
//!
//! The loop writes, the server reads: both share one `Health` through an `Arc`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use crate::discover::nvml::child::FailureReason;
use crate::features::FeatureSet;
use crate::publish::error::Reason;
use crate::publish::outcome::OutcomeKind;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GpuLabel {
    pub vendor: String,
    pub product: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabel {
    pub status: String,
}

/// The sources of `gpu_labeler_events_total` (`watch::Source`, whose test holds the two lists
/// equal).
pub const EVENT_SOURCES: [&str; 5] = ["files", "uevent", "nvml", "node", "dra"];

/// The NVML states `gpu.node.nvml` can take; each is a series, 1 for the current one.
const NVML_STATES: [&str; 4] = ["ok", "unavailable", "error", "stale"];

/// Every metric the daemon exports.
pub struct Metrics {
    registry: Registry,
    pub scan_duration: Histogram,
    pub publish_duration: Histogram,
    /// Successful publishes by result: `written`, `unchanged`, `dry_run`.
    pub publishes: Family<ResultLabel, Counter>,
    /// Failed publish attempts by reason: `conflict`, `server`, `timeout`, `connect`, `client`, `io`.
    pub publish_errors: Family<ReasonLabel, Counter>,
    /// Label keys another field manager owns with another value (reported, not applied).
    pub label_conflicts: Counter,
    /// Keys left out because the API server's admission policy refused the apply carrying them.
    pub label_refused: Counter,
    pub rule_errors: Counter,
    pub rejected_labels: Counter,
    /// Rules or config files that changed into something invalid (the last good one was kept).
    pub reload_errors: Counter,
    pub gpus: Family<GpuLabel, Gauge>,
    /// GPUs with each fault (`gpu.device` `health`, held faults included), every kind always.
    pub gpu_faults: Family<KindLabel, Gauge>,
    /// Disagreements of the DRA driver's slices with the machine (`dra.mismatch`), every
    /// reason always (0 without DRA facts).
    pub dra_mismatches: Family<ReasonLabel, Gauge>,
    /// This node's DeviceTaintRules in force (`publish.deviceTaints`).
    pub device_taints: Gauge,
    pub nvml_status: Family<StatusLabel, Gauge>,
    /// NVML scans and light checks that failed in the child process, by reason: `timeout`, `crash`, `exit`,
    /// `protocol`, `spawn`.
    pub nvml_failures: Family<ReasonLabel, Counter>,
    /// Unix time of the last successful publish (a write or a confirmed no-op).
    pub last_publish: Gauge<f64, AtomicU64>,
    /// Changes seen between intervals, by source: `files`, `uevent`, `nvml`.
    pub events: Family<SourceLabel, Counter>,
    /// Time from the first change of a burst to the cycle that published it.
    pub event_to_publish: Histogram,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    pub source: String,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("gpu_labeler");
        registry.register(
            "build",
            "gpu-labeler build information",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        // 1 ms .. ~65 s: a scan is milliseconds, a publish against a slow API server seconds.
        let scan_duration = Histogram::new(exponential_buckets(0.001, 2.0, 17));
        registry.register_with_unit(
            "scan_duration",
            "Time to discover the node's features",
            Unit::Seconds,
            scan_duration.clone(),
        );
        let publish_duration = Histogram::new(exponential_buckets(0.001, 2.0, 17));
        registry.register_with_unit(
            "publish_duration",
            "Time to publish one cycle's labels, retries within the cycle included",
            Unit::Seconds,
            publish_duration.clone(),
        );
        let publishes = Family::<ResultLabel, Counter>::default();
        registry.register(
            "publishes",
            "Successful publishes, by result (written, unchanged, dry_run)",
            publishes.clone(),
        );
        let publish_errors = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "publish_errors",
            "Failed publish attempts, by reason",
            publish_errors.clone(),
        );
        let label_conflicts = Counter::default();
        registry.register(
            "label_conflicts",
            "Label keys not applied because another field manager owns them with another value",
            label_conflicts.clone(),
        );
        let label_refused = Counter::default();
        registry.register(
            "label_refused",
            "Label keys left out because the API server's admission policy refused the apply that carried them",
            label_refused.clone(),
        );
        let rule_errors = Counter::default();
        registry.register(
            "rule_errors",
            "Rule evaluation errors (the rule produced nothing)",
            rule_errors.clone(),
        );
        let rejected_labels = Counter::default();
        registry.register(
            "rejected_labels",
            "Labels rejected by validation or the namespace policy",
            rejected_labels.clone(),
        );
        let reload_errors = Counter::default();
        registry.register(
            "reload_errors",
            "Rules or config files that changed into an invalid version (the last good one is kept)",
            reload_errors.clone(),
        );
        let gpus = Family::<GpuLabel, Gauge>::default();
        registry.register(
            "gpus",
            "GPUs on this node by vendor and product",
            gpus.clone(),
        );
        let gpu_faults = Family::<KindLabel, Gauge>::default();
        registry.register(
            "gpu_faults",
            "GPUs with each fault kind on the last scan (gpu.device health, and gpu.node missing: the GPUs missing; held faults included)",
            gpu_faults.clone(),
        );
        let device_taints = Gauge::default();
        registry.register(
            "device_taints",
            "This node's DeviceTaintRules in force: GPUs (slice devices) taken out of DRA allocation for a fault (publish.deviceTaints)",
            device_taints.clone(),
        );
        let dra_mismatches = Family::<ReasonLabel, Gauge>::default();
        registry.register(
            "dra_mismatches",
            "Disagreements of this node's ResourceSlices with its GPUs on the last scan, by reason (dra.mismatch)",
            dra_mismatches.clone(),
        );
        for r in crate::dra::Reason::ALL {
            dra_mismatches
                .get_or_create(&ReasonLabel {
                    reason: r.as_str().into(),
                })
                .set(0);
        }
        let nvml_status = Family::<StatusLabel, Gauge>::default();
        registry.register(
            "nvml_status",
            "NVML state on the last scan (1 for the current status)",
            nvml_status.clone(),
        );
        let nvml_failures = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "nvml_failures",
            "NVML scans and light checks that failed in the child process (hang, crash, exit, garbage), by reason",
            nvml_failures.clone(),
        );
        let last_publish = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "last_publish_timestamp_seconds",
            "Unix time of the last successful publish",
            last_publish.clone(),
        );
        let events = Family::<SourceLabel, Counter>::default();
        registry.register(
            "events",
            "Changes that wake the daemon before its interval, by source (files, uevent, nvml)",
            events.clone(),
        );
        // 10 ms .. ~40 s.
        let event_to_publish = Histogram::new(exponential_buckets(0.01, 2.0, 13));
        registry.register_with_unit(
            "event_to_publish",
            "Time from a change (the first of a burst) to the cycle that published it",
            Unit::Seconds,
            event_to_publish.clone(),
        );
        // Every series of a counter family from the first scrape, at 0: a rate or an alert over
        // `publish_errors_total` needs the series before its first increment.
        for r in OutcomeKind::ALL {
            let _ = publishes.get_or_create(&ResultLabel {
                result: r.as_str().into(),
            });
        }
        for r in Reason::ALL {
            let _ = publish_errors.get_or_create(&ReasonLabel {
                reason: r.as_str().into(),
            });
        }
        for r in FailureReason::ALL {
            let _ = nvml_failures.get_or_create(&ReasonLabel {
                reason: r.as_str().into(),
            });
        }
        for s in EVENT_SOURCES {
            let _ = events.get_or_create(&SourceLabel { source: s.into() });
        }
        Metrics {
            registry,
            scan_duration,
            publish_duration,
            publishes,
            publish_errors,
            label_conflicts,
            label_refused,
            rule_errors,
            rejected_labels,
            reload_errors,
            gpus,
            gpu_faults,
            dra_mismatches,
            device_taints,
            nvml_status,
            nvml_failures,
            last_publish,
            events,
            event_to_publish,
        }
    }

    pub fn event(&self, source: &str) {
        self.events
            .get_or_create(&SourceLabel {
                source: source.into(),
            })
            .inc();
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut s, &self.registry);
        s
    }

    /// Sets the GPU and NVML gauges from one scan's features.
    pub fn observe_features(&self, features: &FeatureSet) {
        self.gpus.clear();
        for gpu in features.instances(crate::discover::gpu::GPU_DEVICE) {
            let label = GpuLabel {
                vendor: gpu.get("vendor").unwrap_or("unknown").to_string(),
                product: gpu.get("product").unwrap_or("unknown").to_string(),
            };
            self.gpus.get_or_create(&label).inc();
        }
        let mut faults = [0i64; crate::features::HEALTH_FAULTS.len()];
        for gpu in features.instances(crate::discover::gpu::GPU_DEVICE) {
            for kind in gpu.get("health").unwrap_or("ok").split(',') {
                if let Some(i) = crate::features::HEALTH_FAULTS
                    .iter()
                    .position(|k| *k == kind)
                {
                    faults[i] += 1;
                }
            }
        }
        for (kind, n) in crate::features::HEALTH_FAULTS.iter().zip(faults) {
            let label = KindLabel {
                kind: kind.to_string(),
            };
            self.gpu_faults.get_or_create(&label).set(n);
        }
        // A node fault counts its GPUs: `missing` 1 for one GPU missing.
        for kind in crate::features::NODE_FAULTS {
            let n = features
                .attribute(crate::discover::gpu::GPU_NODE, kind)
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0);
            let label = KindLabel {
                kind: kind.to_string(),
            };
            self.gpu_faults.get_or_create(&label).set(n);
        }
        for r in crate::dra::Reason::ALL {
            let n = features
                .instances(crate::dra::DRA_MISMATCH)
                .iter()
                .filter(|m| m.get("reason") == Some(r.as_str()))
                .count();
            self.dra_mismatches
                .get_or_create(&ReasonLabel {
                    reason: r.as_str().into(),
                })
                .set(n as i64);
        }
        let status = features
            .attribute(crate::discover::gpu::GPU_NODE, "nvml")
            .unwrap_or("unavailable");
        for s in NVML_STATES {
            let label = StatusLabel { status: s.into() };
            self.nvml_status
                .get_or_create(&label)
                .set(i64::from(s == status));
        }
    }

    pub fn nvml_failure(&self, reason: FailureReason) {
        self.nvml_failures
            .get_or_create(&ReasonLabel {
                reason: reason.as_str().into(),
            })
            .inc();
    }

    pub fn publish_error(&self, reason: Reason) {
        self.publish_errors
            .get_or_create(&ReasonLabel {
                reason: reason.as_str().into(),
            })
            .inc();
    }

    pub fn published(&self, result: OutcomeKind) {
        self.publishes
            .get_or_create(&ResultLabel {
                result: result.as_str().into(),
            })
            .inc();
        self.last_publish.set(unix_now_f64());
    }
}

fn unix_now_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What the HTTP server reports: liveness (the loop's heartbeat), readiness and metrics.
///
/// - alive (`/healthz`): the loop beat within `stale_after` (it beats every second while it
///   waits, and between cycles, so only a cycle stuck past its own bounds goes stale);
/// - ready (`/readyz`): a cycle has succeeded, and either the last one did or the last success
///   is within `ready_window` (three intervals: one failed attempt does not flap readiness).
pub struct Health {
    pub metrics: Metrics,
    /// Unix seconds of the last successful cycle; 0 before the first.
    last_success: AtomicU64,
    failing: AtomicBool,
    ready_window: AtomicU64,
    heartbeat: AtomicU64,
    /// A heartbeat older than this means the loop is stuck.
    stale_after: AtomicU64,
}

impl Health {
    pub fn new(stale_after: Duration) -> Health {
        Health {
            metrics: Metrics::new(),
            last_success: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            ready_window: AtomicU64::new(u64::MAX),
            heartbeat: AtomicU64::new(unix_now()),
            stale_after: AtomicU64::new(stale_after.as_secs().max(1)),
        }
    }

    pub fn set_ready_window(&self, d: Duration) {
        self.ready_window
            .store(d.as_secs().max(1), Ordering::Relaxed);
    }

    /// A cycle failed.
    pub fn set_failed(&self) {
        self.failing.store(true, Ordering::Relaxed);
    }

    /// The loop calls this whenever it wakes up.
    pub fn beat(&self) {
        self.heartbeat.store(unix_now(), Ordering::Relaxed);
    }

    pub fn set_stale_after(&self, d: Duration) {
        self.stale_after
            .store(d.as_secs().max(1), Ordering::Relaxed);
    }

    /// A cycle succeeded (published, or confirmed nothing to publish).
    pub fn set_ready(&self) {
        self.last_success.store(unix_now(), Ordering::Relaxed);
        self.failing.store(false, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        let last = self.last_success.load(Ordering::Relaxed);
        if last == 0 {
            return false;
        }
        !self.failing.load(Ordering::Relaxed)
            || unix_now().saturating_sub(last) <= self.ready_window.load(Ordering::Relaxed)
    }

    pub fn is_alive(&self) -> bool {
        let age = unix_now().saturating_sub(self.heartbeat.load(Ordering::Relaxed));
        age <= self.stale_after.load(Ordering::Relaxed)
    }
}

fn answer(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

/// Answers one request to the health and metrics server.
pub fn respond(health: &Health, method: &Method, path: &str) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    if method != Method::GET && method != Method::HEAD {
        return answer(StatusCode::METHOD_NOT_ALLOWED, TEXT, "GET only\n".into());
    }
    match path {
        "/healthz" if health.is_alive() => answer(StatusCode::OK, TEXT, "ok\n".into()),
        "/healthz" => answer(
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT,
            "the publish loop has not run for too long\n".into(),
        ),
        "/readyz" if health.is_ready() => answer(StatusCode::OK, TEXT, "ready\n".into()),
        "/readyz" => answer(
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT,
            "no successful publish recently\n".into(),
        ),
        "/metrics" => answer(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            health.metrics.encode(),
        ),
        _ => answer(StatusCode::NOT_FOUND, TEXT, "not found\n".into()),
    }
}

/// At most this many connections are held at once, so that a flood of connections costs a
/// bounded amount of memory (each holds hyper's 8 KiB read buffer: 2 MiB in all). When all are
/// taken, a new connection takes the place of the one that has been quiet the longest (see
/// [`Connections`]): idle or slow clients can never keep a probe out. A probe sends its
/// request as soon as it connects, and only a full turn of this many newer connections could
/// close it before it is read.
pub const MAX_CONNECTIONS: usize = 256;
/// A client must send its request headers within this (also the idle time allowed between the
/// requests of a kept-alive connection).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// No connection lives longer than this, however busy.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// The connections the health server holds, each with when it last showed life (accepted, or a
/// request read) and a way to close it.
#[derive(Default)]
struct Connections {
    next_id: u64,
    open: std::collections::HashMap<u64, (Arc<AtomicU64>, tokio::sync::oneshot::Sender<()>)>,
}

impl Connections {
    /// Makes room for one more: when full, closes the connection quiet the longest (a probe
    /// sends its request at once, so it is never the one). Returns the new connection's id.
    fn admit(&mut self, active: Arc<AtomicU64>, close: tokio::sync::oneshot::Sender<()>) -> u64 {
        if self.open.len() >= MAX_CONNECTIONS
            && let Some(quietest) = self
                .open
                .iter()
                .min_by_key(|(id, (at, _))| (at.load(Ordering::Relaxed), **id))
                .map(|(id, _)| *id)
            && let Some((_, close)) = self.open.remove(&quietest)
        {
            let _ = close.send(());
        }
        let id = self.next_id;
        self.next_id += 1;
        self.open.insert(id, (active, close));
        id
    }
}

/// How many connections the kernel holds for the health server before it accepts them. The
/// default of 128 overflows in a burst of new connections while the accept loop waits for a
/// core, and then the kernel drops a probe's SYN: its connect waits the 1 s retry, past the
/// probe's timeout (the invariant soak found it; 5 of 400 probes under bursts of 300).
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds `addr` (the first address it resolves to) with `LISTEN_BACKLOG`.
async fn listen(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(a).and_then(|()| socket.listen(LISTEN_BACKLOG)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{addr}: no address"),
        )
    }))
}

/// Milliseconds on a monotonic clock, for "last showed life".
fn now_ms(start: std::time::Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Binds `addr` and serves health and metrics until the runtime ends. Returns the bound address
/// (useful with port 0). Requests are answered from `Health` alone, never waiting on a cycle.
/// As `serve`, on a thread and runtime of its own: a probe is answered whatever the daemon's
/// loop is doing (a rule file's regexes compiling, a large evaluation), not after it.
pub async fn serve_apart(addr: String, health: Arc<Health>) -> std::io::Result<SocketAddr> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("health".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            rt.block_on(async move {
                let _ = tx.send(serve(&addr, health).await);
                std::future::pending::<()>().await
            });
        })?;
    rx.await
        .unwrap_or_else(|_| Err(std::io::Error::other("the health thread ended")))
}

pub async fn serve(addr: &str, health: Arc<Health>) -> std::io::Result<SocketAddr> {
    let listener = listen(addr).await?;
    let local = listener.local_addr()?;
    let connections = Arc::new(std::sync::Mutex::new(Connections::default()));
    let clock = std::time::Instant::now();
    tokio::spawn(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!("health server: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let active = Arc::new(AtomicU64::new(now_ms(clock)));
            let (close, closed) = tokio::sync::oneshot::channel::<()>();
            let id = match connections.lock() {
                Ok(mut c) => c.admit(active.clone(), close),
                Err(_) => continue,
            };
            let health = health.clone();
            let connections = connections.clone();
            tokio::spawn(async move {
                let seen = active.clone();
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    seen.store(now_ms(clock), Ordering::Relaxed);
                    let r = respond(&health, req.method(), req.uri().path());
                    async move { Ok::<_, std::convert::Infallible>(r) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .max_buf_size(16 * 1024)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                tokio::select! {
                    _ = tokio::time::timeout(CONNECTION_LIFETIME, conn) => {}
                    _ = closed => {}
                }
                if let Ok(mut c) = connections.lock() {
                    c.open.remove(&id);
                }
            });
        }
    });
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Instance;

    #[test]
    fn a_full_server_closes_the_connection_quiet_the_longest() {
        let mut c = Connections::default();
        let mut closed = Vec::new();
        for i in 0..MAX_CONNECTIONS as u64 {
            let (tx, rx) = tokio::sync::oneshot::channel();
            // Connection 5 showed life last; the others in the order they came.
            let at = if i == 5 { 1_000 } else { i };
            c.admit(Arc::new(AtomicU64::new(at)), tx);
            closed.push(rx);
        }
        let (tx, _rx) = tokio::sync::oneshot::channel();
        let id = c.admit(Arc::new(AtomicU64::new(2_000)), tx);
        assert_eq!(id, MAX_CONNECTIONS as u64);
        assert_eq!(c.open.len(), MAX_CONNECTIONS);
        // The oldest quiet one (0) was told to close, and no other.
        let told: Vec<usize> = closed
            .iter_mut()
            .enumerate()
            .filter_map(|(i, rx)| rx.try_recv().is_ok().then_some(i))
            .collect();
        assert_eq!(told, [0]);
        // Next: 1, then 2 ..., 5 (active) last of all.
        let (tx, _rx2) = tokio::sync::oneshot::channel();
        c.admit(Arc::new(AtomicU64::new(2_001)), tx);
        assert!(!c.open.contains_key(&1));
        assert!(c.open.contains_key(&5));
    }

    /// The samples of the exposition whose metric name starts with `prefix`: `name{labels}` ->
    /// value, compared whole by the tests.
    fn samples(text: &str, prefix: &str) -> std::collections::BTreeMap<String, String> {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.starts_with(prefix))
            .filter_map(|l| l.rsplit_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_are_prefixed_and_build_info_is_there() {
        let m = Metrics::new();
        m.published(OutcomeKind::Written);
        m.publish_error(Reason::Server);
        let text = m.encode();
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            samples(&text, "gpu_labeler_build_info"),
            map(&[(
                &format!("gpu_labeler_build_info{{version=\"{version}\"}}"),
                "1"
            )])
        );
        assert_eq!(
            samples(&text, "gpu_labeler_publishes_total{result=\"written\"}"),
            map(&[("gpu_labeler_publishes_total{result=\"written\"}", "1")])
        );
        assert_eq!(
            samples(&text, "gpu_labeler_publish_errors_total{reason=\"server\"}"),
            map(&[("gpu_labeler_publish_errors_total{reason=\"server\"}", "1")])
        );
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.starts_with("gpu_labeler_"), "{line}");
        }
    }

    /// A rate or an absent-series alert needs each counter's series before its first
    /// increment: the first scrape has every one, at 0.
    #[test]
    fn every_counter_series_is_exported_at_zero_from_the_first_scrape() {
        let text = Metrics::new().encode();
        let zeros = |metric: &str, label: &str, values: &[&str]| {
            values
                .iter()
                .map(|v| {
                    (
                        format!("gpu_labeler_{metric}_total{{{label}=\"{v}\"}}"),
                        "0".into(),
                    )
                })
                .collect::<std::collections::BTreeMap<String, String>>()
        };
        assert_eq!(
            samples(&text, "gpu_labeler_publishes_total"),
            zeros("publishes", "result", &["dry_run", "unchanged", "written"])
        );
        let reasons = [
            "client",
            "conflict",
            "decode",
            "io",
            "network",
            "not_found",
            "server",
            "throttled",
            "timeout",
            "too_large",
        ];
        assert_eq!(
            samples(&text, "gpu_labeler_publish_errors_total"),
            zeros("publish_errors", "reason", &reasons)
        );
        assert_eq!(
            samples(&text, "gpu_labeler_nvml_failures_total"),
            zeros(
                "nvml_failures",
                "reason",
                &["crash", "exit", "protocol", "spawn", "timeout"]
            )
        );
        assert_eq!(
            samples(&text, "gpu_labeler_events_total"),
            zeros(
                "events",
                "source",
                &["dra", "files", "node", "nvml", "uevent"]
            )
        );
    }

    #[test]
    fn gpu_and_nvml_gauges_follow_the_last_scan() {
        let m = Metrics::new();
        let mut f = FeatureSet::default();
        for _ in 0..2 {
            f.push_instance(
                "gpu.device",
                Instance::from_iter([("vendor", "nvidia"), ("product", "H100")]),
            );
        }
        f.push_instance(
            "gpu.device",
            Instance::from_iter([
                ("vendor", "nvidia"),
                ("product", "H100"),
                ("health", "pcie-link,xid"),
            ]),
        );
        f.insert_attribute("gpu.node", "nvml", "ok");
        m.observe_features(&f);
        let text = m.encode();
        assert_eq!(
            samples(&text, "gpu_labeler_gpus"),
            map(&[("gpu_labeler_gpus{vendor=\"nvidia\",product=\"H100\"}", "3")])
        );
        let faults = |text: &str| -> std::collections::BTreeMap<String, String> {
            samples(text, "gpu_labeler_gpu_faults")
        };
        let kinds = |with: &[&str]| -> std::collections::BTreeMap<String, String> {
            crate::features::HEALTH_FAULTS
                .iter()
                .chain(crate::features::NODE_FAULTS.iter())
                .map(|k| {
                    let n = if with.contains(k) { "1" } else { "0" };
                    (
                        format!("gpu_labeler_gpu_faults{{kind=\"{k}\"}}"),
                        n.to_string(),
                    )
                })
                .collect()
        };
        assert_eq!(faults(&text), kinds(&["pcie-link", "xid"]));
        assert_eq!(
            samples(&text, "gpu_labeler_nvml_status"),
            map(&[
                ("gpu_labeler_nvml_status{status=\"ok\"}", "1"),
                ("gpu_labeler_nvml_status{status=\"unavailable\"}", "0"),
                ("gpu_labeler_nvml_status{status=\"error\"}", "0"),
                ("gpu_labeler_nvml_status{status=\"stale\"}", "0"),
            ])
        );
        m.observe_features(&FeatureSet::default());
        let text = m.encode();
        assert_eq!(samples(&text, "gpu_labeler_gpus"), map(&[]));
        assert_eq!(faults(&text), kinds(&[]));
        assert_eq!(
            samples(&text, "gpu_labeler_nvml_status"),
            map(&[
                ("gpu_labeler_nvml_status{status=\"ok\"}", "0"),
                ("gpu_labeler_nvml_status{status=\"unavailable\"}", "1"),
                ("gpu_labeler_nvml_status{status=\"error\"}", "0"),
                ("gpu_labeler_nvml_status{status=\"stale\"}", "0"),
            ])
        );
    }

    #[test]
    fn readyz_turns_ready_after_the_first_publish() {
        let h = Health::new(Duration::from_secs(60));
        assert_eq!(
            respond(&h, &Method::GET, "/readyz").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            respond(&h, &Method::GET, "/healthz").status(),
            StatusCode::OK
        );
        h.set_ready();
        assert_eq!(
            respond(&h, &Method::GET, "/readyz").status(),
            StatusCode::OK
        );
        assert_eq!(
            respond(&h, &Method::GET, "/nope").status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            respond(&h, &Method::POST, "/metrics").status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }

    #[test]
    fn healthz_fails_when_the_heartbeat_is_stale() {
        let h = Health::new(Duration::from_secs(1));
        h.heartbeat.store(unix_now() - 10, Ordering::Relaxed);
        assert_eq!(
            respond(&h, &Method::GET, "/healthz").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        h.beat();
        assert_eq!(
            respond(&h, &Method::GET, "/healthz").status(),
            StatusCode::OK
        );
    }
}
