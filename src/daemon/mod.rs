//! The `run` daemon (docs/catalog.md#publishing): every interval, scan the node, evaluate the labels and publish
//! them to the sink when they changed.
//!
//! The loop owns everything that lives across cycles: one `NvmlLibrary` (NVML that is missing at
//! start is tried again on each scan), the last good config and rules (re-read when their content
//! changes, kept when the new version is invalid), the sink's memory of what it published, and
//! the backoff. Failures never end the process: a failed cycle is tried again after a capped
//! exponential backoff with full jitter. SIGTERM and SIGINT stop it (exit 0, labels left in
//! place), SIGHUP re-reads the config and rules at once. The first cycle starts at a random
//! offset within the interval so that a fleet started together does not publish together.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::signal::unix::{Signal, SignalKind, signal};

mod backoff;
mod inputs;
mod memory;

pub use backoff::{BACKOFF_BASE, BACKOFF_CAP, Backoff, random_fraction};
pub use inputs::{digest, with_defaults};
pub use memory::{
    MEMORY_BASE, MEMORY_NVML_CHILD, MEMORY_PER_FUNCTION, memory_limit, memory_need, memory_warning,
};

use crate::config::{self, Config};
use crate::discover;
use crate::discover::nvml::child::IsolatedNvml;
use crate::discover::nvml::worker::{Notice, NvmlWorker, WorkerProbe};
use crate::discover::sharing::SharingSource;
use crate::error::{Error, exit};
use crate::features::{self, FeatureSet};
use crate::labels::evaluate_node;
use crate::metrics::{self, Health};
use crate::pipeline::{RuleFiles, Sources};
use crate::publish::client;
use crate::publish::device_taints::DeviceTaints;
use crate::publish::error::{MAX_RESPONSE_BYTES, PublishError};
use crate::publish::node;
use crate::publish::outcome::{Outcome, OutcomeKind};
use crate::publish::sink::{Sink, SinkKind, SinkTarget, request_timeout, sink_kind};
use crate::said::SaidOnce;
use crate::watch::{self, Coalescer, Event, FileWatch, Source};
use inputs::Inputs;

/// Everything `run` is told: where inputs come from and how to publish. Built by the command
/// line from its flags and environment.
#[derive(Debug, Clone)]
pub struct Options {
    pub sources: Sources,
    pub rules: RuleFiles,
    pub publish: PublishOptions,
}

/// How and where to publish (docs/catalog.md#publishing).
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// The Node to label (this node).
    pub node_name: Option<String>,
    /// kubeconfig file (else in-cluster config, else $KUBECONFIG).
    pub kubeconfig: Option<PathBuf>,
    /// Where labels go (default: the config's publish.sink).
    pub sink: Option<SinkKind>,
    /// Path of the features.d file for the features-file sink.
    pub features_file: Option<PathBuf>,
    /// Time between scans (default: the config's publish.interval).
    pub interval: Option<String>,
    /// Publish once and exit.
    pub oneshot: bool,
    /// Compute and log what would be published, but do not write.
    pub dry_run: bool,
    /// Address for /healthz, /readyz and /metrics; empty for none.
    pub listen: String,
    /// The agent's own cgroup directory, whose memory limit is compared with what the node's
    /// PCI functions need (`/sys/fs/cgroup` in a container).
    pub cgroup_root: PathBuf,
    /// Read uevents from a Unix datagram socket bound here instead of the kernel's netlink
    /// broadcast (tests drive it).
    pub uevent_socket: Option<PathBuf>,
    /// Relabel only every interval (and on SIGHUP), whatever `publish.events` says.
    pub no_events: bool,
    /// Read no DRA objects from the cluster.
    pub no_dra: bool,
    /// The node sink applies the rules' taints, whatever `publish.taints` says.
    pub publish_taints: bool,
    /// The node sink sets the `GPUHealthy` condition, whatever `publish.condition` says.
    pub publish_condition: bool,
    /// GPU faults as DRA device taints, whatever `publish.deviceTaints` says.
    pub publish_device_taints: bool,
}

/// `--oneshot` tries this many times (backoff capped at 8 s) before exiting 3.
const ONESHOT_ATTEMPTS: u32 = 4;
const ONESHOT_BACKOFF_CAP: Duration = Duration::from_secs(8);

/// How often the loop says it is alive while it waits.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// The interval in force: the flag, else the config's `publish.interval`.
fn interval(publish: &PublishOptions, config: &Config) -> Result<Duration, Error> {
    let (text, from) = match &publish.interval {
        Some(s) => (s.as_str(), "--interval"),
        None => (config.publish.interval.as_str(), "config publish.interval"),
    };
    config::parse_interval(text).map_err(|e| Error::InvalidInput(format!("{from}: {e}")))
}

/// Why a cycle failed.
#[derive(Debug)]
struct CycleError {
    reason: &'static str,
    message: String,
    /// The API server asked for this much patience.
    retry_after: Option<Duration>,
}

impl From<PublishError> for CycleError {
    fn from(e: PublishError) -> Self {
        CycleError {
            reason: e.reason.as_str(),
            message: e.message,
            retry_after: e.retry_after,
        }
    }
}

/// The wait before retrying a failed cycle: the backoff's next delay, or the server's
/// `Retry-After` when that is longer (up to `BACKOFF_CAP`).
fn retry_delay(backoff: &mut Backoff, e: &CycleError) -> Duration {
    let d = backoff.next_delay();
    match e.retry_after {
        Some(r) => d.max(r.min(BACKOFF_CAP)),
        None => d,
    }
}

/// A file's modification time and length.
type FileStamp = (std::time::SystemTime, u64);

/// Everything that lives across cycles.
struct Daemon {
    inputs: Inputs,
    publish: PublishOptions,
    /// NVML's thread and child process (`nvml::worker`), started by the first scan that needs
    /// it, with the settings it runs (a new child when the config changes them).
    nvml: Option<(IsolatedNvml, Arc<NvmlWorker>)>,
    /// Where NVML's changes wake the loop (events on).
    nvml_wake: Option<tokio::sync::mpsc::UnboundedSender<Event>>,
    /// The device-plugin sharing config, keeping its last good value when the file turns bad.
    sharing: SharingSource,
    /// Keeps each GPU fault for `sources.health.clearAfter` after it was last seen.
    faults: discover::health::Hold,
    sink: Sink,
    /// What the loop last reported, each said once per change.
    said: Said,
    health: Arc<Health>,
    interval: Duration,
    /// The `--features` snapshot as last read, with the file's modification time and length
    /// then: read again only when they change (standard input: read once).
    snapshot: Option<(Option<FileStamp>, Arc<FeatureSet>)>,
    /// The labels we applied to the Node and what the Node watch saw (`watch::watch_node`).
    applied: Arc<std::sync::Mutex<watch::NodeView>>,
    /// The config or rules were re-read: the watched files may be others now.
    rewatch: bool,
    /// Whether the Node watch has a stream open (`watch::watch_node`); true where there is
    /// no watch (the interval and the sink's own reads decide then).
    node_watched: Arc<std::sync::atomic::AtomicBool>,
    /// This node's DRA objects as the API server last gave them (`watch::watch_dra`, or one
    /// read a cycle where nothing watches them).
    dra: Arc<std::sync::Mutex<watch::DraView>>,
    /// Whether `watch_dra` keeps `dra` (else each cycle reads it once).
    dra_watched: bool,
    /// The Node's instance type the last scan ran with (`None`: none known then).
    scanned_instance_type: Option<String>,
    /// This node's DeviceTaintRules (`publish.deviceTaints`, the node sink).
    device_taint_state: Option<DeviceTaints>,
    /// The rules the stdout sink last printed.
    device_taints_printed: Option<Vec<crate::dra::taints::Wanted>>,
}

/// What the loop last reported about each subject: a steady problem is one log line.
struct Said {
    /// Discovery's warnings and errors.
    scan: SaidOnce<(Vec<String>, Vec<String>)>,
    /// What is wrong with the GPUs (`None`: nothing).
    faults: SaidOnce<Option<String>>,
    /// The `--dra` file's errors.
    dra_file: SaidOnce<Vec<String>>,
    /// What reading DRA from the cluster went wrong.
    dra_read: SaidOnce<Option<String>>,
    /// The evaluation's notes, and its rule errors, rejected labels and warnings.
    evaluation: SaidOnce<(Vec<String>, Vec<String>)>,
    /// What device taints went wrong.
    device_taints: SaidOnce<Vec<String>>,
}

impl Default for Said {
    fn default() -> Said {
        Said {
            scan: SaidOnce::starting_at(Default::default()),
            faults: SaidOnce::starting_at(None),
            dra_file: SaidOnce::starting_at(Vec::new()),
            dra_read: SaidOnce::starting_at(None),
            // The first evaluation is said whatever it is.
            evaluation: SaidOnce::new(),
            device_taints: SaidOnce::starting_at(Vec::new()),
        }
    }
}

/// What wakes the loop before its interval (`watch`).
struct Events {
    /// Kept so that the channel never closes, whatever source ends (and cloned for the Node
    /// watch).
    tx: tokio::sync::mpsc::UnboundedSender<Event>,
    rx: tokio::sync::mpsc::UnboundedReceiver<Event>,
    files: FileWatch,
    coalescer: Coalescer,
}

impl Daemon {
    fn set_interval(&mut self) {
        match interval(&self.publish, &self.inputs.config) {
            Ok(i) => self.interval = i,
            Err(e) => tracing::error!("{e}; keeping {:?}", self.interval),
        }
        // The loop beats every second while it waits, so it is stuck only when one cycle runs
        // past its bounds: NVML's timeout, then the publish's requests (a read, up to
        // MAX_CONFLICT_ROUNDS applies, re-reads), each bounded by the request timeout.
        let request = request_timeout(self.interval);
        let nvml = self
            .inputs
            .sources
            .nvml_timeout
            .unwrap_or(self.inputs.config.sources.nvml.timeout);
        self.health
            .set_stale_after(nvml + 8 * request + Duration::from_secs(60));
        // One failed cycle does not make the pod unready; three intervals without success do.
        self.health
            .set_ready_window(3 * self.interval + Duration::from_secs(30));
    }

    /// The files whose change means a relabel: the rule paths, the config file, the device
    /// plugin's sharing config.
    fn watched_paths(&self) -> Vec<PathBuf> {
        let mut paths = self.inputs.rule_files.paths.clone();
        paths.extend(self.inputs.sources.config.iter().cloned());
        let sharing = &self.inputs.config.sources.sharing.config_file;
        if !sharing.is_empty() {
            paths.push(PathBuf::from(sharing));
        }
        paths
    }

    /// NVML's worker with the settings the config asks for now.
    fn nvml_worker(&mut self, config: &Config) -> Arc<NvmlWorker> {
        let wanted = self.inputs.sources.nvml(config);
        // The light check only matters when a change can wake the loop.
        let check_every = if self.nvml_wake.is_some() {
            config.sources.nvml.check_interval
        } else {
            Duration::ZERO
        };
        match &mut self.nvml {
            Some((settings, worker)) => {
                if !settings.same_settings(&wanted) {
                    worker.replace(self.inputs.sources.nvml(config));
                    *settings = wanted;
                }
                worker.set_check_interval(check_every);
                worker.clone()
            }
            None => {
                let health = self.health.clone();
                let wake = self.nvml_wake.clone();
                let notify = Box::new(move |n: Notice| match n {
                    Notice::Changed(why) => {
                        tracing::debug!("{why}");
                        if let Some(tx) = &wake {
                            let _ = tx.send(Event {
                                source: Source::Nvml,
                                at: Instant::now(),
                            });
                        }
                    }
                    Notice::Failed { reason, .. } => health.metrics.nvml_failure(reason),
                });
                let worker = Arc::new(NvmlWorker::start(
                    self.inputs.sources.nvml(config),
                    check_every,
                    notify,
                ));
                self.nvml = Some((wanted, worker.clone()));
                worker
            }
        }
    }

    /// The node's features: shared, so that a snapshot of tens of MB is not copied each cycle.
    async fn scan(&mut self) -> Result<Arc<FeatureSet>, CycleError> {
        let config = self.inputs.config.clone();
        if let Some(path) = self.inputs.sources.features.clone() {
            // Read once, and again only when the file changes: a snapshot of tens of MB is
            // not parsed every cycle, and standard input is not there a second time. A file
            // that goes away keeps the labels of the last one read.
            let stamp = if path == Path::new("-") {
                None
            } else {
                std::fs::metadata(&path)
                    .ok()
                    .and_then(|m| Some((m.modified().ok()?, m.len())))
            };
            if let Some((seen, set)) = &self.snapshot
                && (stamp.is_none() || *seen == stamp)
            {
                return Ok(set.clone());
            }
            let set = features::load_snapshot(&path).map_err(|e| CycleError {
                reason: "snapshot",
                message: e.to_string(),
                retry_after: None,
            })?;
            let set = Arc::new(set);
            self.snapshot = Some((stamp, set.clone()));
            return Ok(set);
        }
        let nvml = self.nvml_worker(&config);
        let mut sharing = std::mem::take(&mut self.sharing);
        let mut opts = self.inputs.sources.discovery_options(&config);
        // The cloud's instance type from the Node's label (the node sink read it), where the
        // config names none: the expected GPU count's table (docs/health.md).
        if opts.config.sources.health.instance_type.is_empty()
            && let Some(t) = self.node_instance_type()
        {
            opts.config.sources.health.instance_type = t.to_string();
        }
        self.scanned_instance_type = self.node_instance_type().map(str::to_string);
        // Discovery reads files and waits (briefly) for NVML's thread: off the async thread.
        let d = tokio::task::spawn_blocking(move || {
            let d = discover::discover_with(&opts, &mut WorkerProbe(&nvml), &mut sharing);
            (sharing, d)
        })
        .await;
        let (sharing, d) = d.map_err(|e| CycleError {
            reason: "scan",
            message: format!("discovery failed: {e}"),
            retry_after: None,
        })?;
        self.sharing = sharing;
        // Said once per change, not every cycle.
        let mut warnings = d.warnings;
        let functions = d
            .features
            .instances
            .get("pci.device")
            .map_or(0, |i| i.elements.len());
        let nvml_child = !matches!(
            self.inputs.sources.nvml_choice(&config),
            crate::discover::nvml::NvmlChoice::Disabled
        );
        warnings.extend(memory_warning(
            functions,
            nvml_child,
            &self.publish.cgroup_root,
        ));
        let report = (warnings, d.errors);
        if let Some((warnings, errors)) = self.said.scan.changed(report) {
            for w in warnings {
                tracing::warn!("{w}");
            }
            for e in errors {
                tracing::error!("{e}");
            }
        }
        let mut set = d.features;
        let clear_after = config.sources.health.clear_after;
        self.faults.apply(&mut set, Instant::now(), clear_after);
        let faults = discover::health::node_because(&set);
        match self.said.faults.changed(faults) {
            Some(Some(f)) => tracing::warn!("GPU faults: {f}"),
            Some(None) => tracing::info!("GPU faults: none"),
            None => {}
        }
        Ok(Arc::new(set))
    }

    /// The features with this node's DRA facts from the API server, when the node sink has
    /// them (`None`: no DRA facts, or a `--dra` file stands in). Where nothing watches them
    /// (`--oneshot`, events off) they are read once a cycle.
    async fn dra_features(&mut self, features: &FeatureSet) -> Option<FeatureSet> {
        let Sink::Node(n) = &self.sink else {
            return None;
        };
        if self.inputs.sources.dra.is_some() || self.publish.no_dra {
            return None;
        }
        let node = n.node_name().to_string();
        if !self.dra_watched {
            let timeout = request_timeout(self.interval);
            let (view, problem) = match watch::read_dra(&n.client(), &node, timeout).await {
                Ok((watch::DraView::Absent, _)) => (
                    watch::DraView::Absent,
                    Some(watch::NO_DRA_IN_CLUSTER.to_string()),
                ),
                Ok((v, _)) => (v, None),
                Err(e) => (
                    watch::DraView::Unknown,
                    Some(format!("cannot read this node's DRA objects: {e}")),
                ),
            };
            if let Some(Some(p)) = self.said.dra_read.changed(problem) {
                tracing::warn!("{p}");
            }
            if let Ok(mut v) = self.dra.lock() {
                *v = view;
            }
        }
        let view = self.dra.lock().ok()?.clone();
        let watch::DraView::Read(objects) = view else {
            return None;
        };
        let mut f = features.clone();
        crate::dra::add_features(&mut f, &objects, &node);
        Some(f)
    }

    /// The Node's instance type as the node sink last read it.
    fn node_instance_type(&self) -> Option<&str> {
        match &self.sink {
            Sink::Node(n) => n.instance_type(),
            _ => None,
        }
    }

    /// The Node's instance type is known now and was not when the last scan ran (the first
    /// cycle reads the Node after its scan): the scan should run again with it.
    fn instance_type_unseen(&self) -> bool {
        self.inputs.config.sources.health.instance_type.is_empty()
            && self.node_instance_type() != self.scanned_instance_type.as_deref()
    }

    /// One cycle: reload, scan, evaluate, publish.
    async fn cycle(&mut self, force_reload: bool) -> Result<Outcome, CycleError> {
        self.health.beat();
        if self.inputs.reload(force_reload, &self.health) {
            self.rewatch = true;
            self.set_interval();
            let wanted = sink_kind(self.publish.sink, &self.inputs.config).map(SinkKind::name);
            if wanted.is_ok_and(|w| w != self.sink.name()) {
                tracing::warn!(
                    "config publish.sink changed; the sink ({}) changes on the next start",
                    self.sink.name()
                );
            }
        }
        let started = Instant::now();
        let mut features = self.scan().await?;
        if let Some(f) = self.dra_features(&features).await {
            features = Arc::new(f);
        }
        // DRA facts from `--dra FILE`, read each cycle (a small file).
        if self.inputs.sources.dra.is_some() {
            let mut f = (*features).clone();
            let errors = self.inputs.sources.add_dra(&mut f);
            for e in self.said.dra_file.changed(errors).into_iter().flatten() {
                tracing::warn!("{e}; no DRA facts this cycle");
            }
            features = Arc::new(f);
        }
        let metrics = &self.health.metrics;
        metrics
            .scan_duration
            .observe(started.elapsed().as_secs_f64());
        metrics.observe_features(&features);

        let evaluated = evaluate_node(&features, &self.inputs.config, &self.inputs.rules);
        let writes = node::NodeWrites {
            taints: self.publish.publish_taints || self.inputs.config.publish.taints,
            condition: self.publish.publish_condition || self.inputs.config.publish.condition,
        };
        if let Sink::Node(n) = &mut self.sink {
            n.set_writes(writes);
        }
        let metrics = &self.health.metrics;
        metrics.rule_errors.inc_by(evaluated.errors.len() as u64);
        metrics
            .rejected_labels
            .inc_by(evaluated.rejected.len() as u64);
        let report = (
            evaluated.notes.clone(),
            evaluated
                .errors
                .iter()
                .chain(&evaluated.rejected)
                .chain(&evaluated.warnings)
                .cloned()
                .collect::<Vec<String>>(),
        );
        if let Some(report) = self.said.evaluation.changed(report) {
            for n in &report.0 {
                tracing::info!("{n}");
            }
            for p in &report.1 {
                tracing::warn!("{p}");
            }
            let out = &evaluated.output;
            if matches!(self.sink, Sink::Node(_)) {
                if !out.taints.is_empty() && !writes.taints {
                    tracing::warn!(
                        "rules produced taints; they are not published (publish.taints is off, \
                         docs/taints.md)"
                    );
                }
                if !out.extended_resources.is_empty() {
                    tracing::warn!(
                        "rules produced extended resources; they are not published (the node \
                         sink writes labels, annotations and taints only)"
                    );
                }
            }
        }

        let dry_run = self.publish.dry_run;
        let started = Instant::now();
        let result = self
            .sink
            .publish(&features, &evaluated.output, dry_run)
            .await;
        let metrics = &self.health.metrics;
        metrics
            .publish_duration
            .observe(started.elapsed().as_secs_f64());
        let outcome = result.inspect_err(|e| metrics.publish_error(e.reason))?;
        for c in &outcome.conflicts {
            metrics.label_conflicts.inc();
            tracing::warn!("{c}");
        }
        for r in &outcome.refused {
            metrics.label_refused.inc();
            tracing::warn!("{r}");
        }
        for w in &outcome.warnings {
            tracing::warn!("{w}");
        }
        let sink = self.sink.name();
        match outcome.kind {
            OutcomeKind::Written => tracing::info!("published to {sink}: {}", outcome.diff),
            OutcomeKind::DryRun => {
                tracing::info!("dry run, not written to {sink}: {}", outcome.diff)
            }
            OutcomeKind::Unchanged => tracing::debug!("{sink}: unchanged"),
        }
        metrics.published(outcome.kind);
        self.device_taints(&features, dry_run).await?;
        self.health.set_ready();
        Ok(outcome)
    }

    /// GPU faults as DRA device taints (`publish.deviceTaints`): applied by the node sink,
    /// printed by the stdout sink. Only where this cycle has DRA facts (`dra.node`): with none
    /// (the API server did not answer, no DRA in the cluster) the rules stay as they are.
    async fn device_taints(
        &mut self,
        features: &FeatureSet,
        dry_run: bool,
    ) -> Result<(), CycleError> {
        let config = &self.inputs.config.publish;
        if !(self.publish.publish_device_taints || config.device_taints) {
            return Ok(());
        }
        let site = config.device_taint_effects.clone();
        let Some(node) = self.publish.node_name.clone().filter(|n| !n.is_empty()) else {
            return Ok(());
        };
        if features
            .attribute(crate::dra::DRA_NODE, "coverage")
            .is_none()
        {
            return Ok(());
        }
        let (wanted, mut report) = crate::dra::taints::wanted(features, &node, &site);
        let result = match &mut self.sink {
            Sink::Node(n) => {
                let timeout = request_timeout(self.interval);
                let client = n.client();
                let state = self
                    .device_taint_state
                    .get_or_insert_with(|| DeviceTaints::new(&node));
                let faulty = crate::dra::taints::faulty(features);
                state
                    .sync(&client, &wanted, &faulty, &site, dry_run, timeout)
                    .await
            }
            Sink::Stdout(_) => {
                if self.device_taints_printed.as_ref() != Some(&wanted) && !dry_run {
                    let lines = crate::dra::taints::offline_lines(&wanted, &node);
                    let mut out = std::io::stdout().lock();
                    use std::io::Write;
                    let _ = out.write_all(lines.as_bytes()).and_then(|_| out.flush());
                    self.device_taints_printed = Some(wanted.clone());
                }
                Ok(Default::default())
            }
            _ => Ok(Default::default()),
        };
        let metrics = &self.health.metrics;
        let synced = result.inspect_err(|e| metrics.publish_error(e.reason))?;
        for c in &synced.changes {
            tracing::info!("device taints: {c}");
        }
        metrics.device_taints.set(synced.rules as i64);
        report.extend(synced.warnings);
        for w in self
            .said
            .device_taints
            .changed(report)
            .into_iter()
            .flatten()
        {
            tracing::warn!("device taints: {w}");
        }
        Ok(())
    }

    async fn oneshot(&mut self) -> Result<u8, Error> {
        let mut backoff = Backoff::new(BACKOFF_BASE, ONESHOT_BACKOFF_CAP);
        let mut attempt = 1;
        loop {
            match self.cycle(false).await {
                // The Node's instance type, read after the scan: once more with it.
                Ok(_) if self.instance_type_unseen() => continue,
                Ok(_) => return Ok(exit::OK),
                Err(e) if attempt >= ONESHOT_ATTEMPTS => {
                    return Err(Error::Runtime(format!(
                        "publishing failed after {attempt} attempts ({}): {}",
                        e.reason, e.message
                    )));
                }
                Err(e) => {
                    let d = retry_delay(&mut backoff, &e);
                    tracing::warn!(
                        "{} ({}); attempt {attempt}, retrying in {d:.1?}",
                        e.message,
                        e.reason
                    );
                    tokio::time::sleep(d).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn run_loop(&mut self, signals: &mut Signals, mut events: Option<Events>) -> u8 {
        let Signals { term, int, hup } = signals;
        // The first cycle at once: a node that just joined (autoscaling, a scale-from-zero
        // pool) is labelled within seconds, its pods not left Pending for an interval, and a
        // restarted agent whose Node has its labels costs one read and no write. The cycles
        // after it start at a random point of the interval, so that a fleet restarted at once
        // does not keep cycling in step.
        let first = Duration::ZERO;
        let mut spread_once = true;
        tracing::info!(
            "publishing to {} every {:?}; first cycle in {:.1?}",
            self.sink.name(),
            self.interval,
            first
        );
        let mut next = tokio::time::Instant::now() + first;
        // Never longer than the interval: once the API server answers again, the labels land
        // within one interval.
        let mut backoff = Backoff::new(BACKOFF_BASE, BACKOFF_CAP.min(self.interval));
        let mut beat = tokio::time::interval(HEARTBEAT);
        // While cycles fail, the backoff decides when to try again, not the events.
        let mut failing = false;
        loop {
            self.health.beat();
            let mut force_reload = false;
            let due = events
                .as_ref()
                .and_then(|e| e.coalescer.due())
                .filter(|_| !failing)
                .map(tokio::time::Instant::from_std);
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = tokio::time::sleep_until(due.unwrap_or(next)), if due.is_some() => {}
                // Alive while waiting, too: only a cycle stuck past its bounds is not.
                _ = beat.tick() => continue,
                e = recv_event(&mut events) => {
                    if let (Some(e), Some(ev)) = (e, events.as_mut()) {
                        self.health.metrics.event(e.source.as_str());
                        ev.coalescer.add(e);
                    }
                    continue;
                }
                s = stop_signal(term, int) => {
                    tracing::info!("{s}: stopping; labels stay in place");
                    return exit::OK;
                }
                _ = hup.recv() => {
                    tracing::info!("SIGHUP: reloading config and rules");
                    force_reload = true;
                }
            }
            // Someone changed our labels, or the watch that would say so is down: this cycle
            // reads the Node (a removed label comes back within an interval whatever the
            // watch does; one read an interval while it is down).
            if events
                .as_ref()
                .is_some_and(|e| e.coalescer.pending_from(Source::Node))
                || !self.node_watched.load(std::sync::atomic::Ordering::Relaxed)
            {
                self.sink.forget();
            }
            let result = tokio::select! {
                r = self.cycle(force_reload) => r,
                s = stop_signal(term, int) => {
                    tracing::info!("{s}: stopping in the middle of a cycle; labels stay in place");
                    return exit::OK;
                }
            };
            // A change someone made to the Node while this cycle wrote it, seen by the watch
            // before the cycle noted what it wrote: relabel for it (after `ran` below, which
            // answers the events before this cycle).
            let lost = self
                .applied
                .lock()
                .map(|mut v| v.applied(self.sink.guarded(), self.sink.known_version()))
                .unwrap_or(false);
            // This cycle saw every change before it: the pending events are answered.
            if let Some(ev) = events.as_mut() {
                if let Some((first, sources)) = ev.coalescer.ran(Instant::now())
                    && let Ok(outcome) = &result
                {
                    let after = first.elapsed().as_secs_f64();
                    let from: Vec<&str> = sources.iter().map(|s| s.as_str()).collect();
                    // A file saved again as it was, an editor's swap file, a uevent of a
                    // device no rule names: nothing to say.
                    if outcome.kind == OutcomeKind::Unchanged {
                        tracing::debug!("a change ({}) changed nothing", from.join(", "));
                    } else {
                        self.health.metrics.event_to_publish.observe(after);
                        tracing::info!(
                            "relabelled {after:.2}s after a change ({})",
                            from.join(", ")
                        );
                    }
                }
                // The config was re-read: the files to watch and the spread may be others.
                if std::mem::take(&mut self.rewatch) {
                    ev.files.set(&self.watched_paths());
                    ev.coalescer.set_spread(self.inputs.config.publish.spread);
                }
                if lost {
                    tracing::info!(
                        "our labels on the Node were changed by someone else during the write"
                    );
                    self.health.metrics.event(Source::Node.as_str());
                    ev.coalescer.add(Event {
                        source: Source::Node,
                        at: Instant::now(),
                    });
                }
            }
            failing = result.is_err();
            match result {
                Ok(_) => {
                    backoff.reset();
                    let wait = if std::mem::take(&mut spread_once) {
                        self.interval.mul_f64(random_fraction())
                    } else {
                        self.interval
                    };
                    next = tokio::time::Instant::now() + wait;
                    // The Node's instance type learnt by this cycle's read: scan again with it.
                    if self.instance_type_unseen() {
                        next = tokio::time::Instant::now();
                    }
                    let clear_after = self.inputs.config.sources.health.clear_after;
                    if let Some(at) = self.faults.next_clear(clear_after) {
                        next = next.min(tokio::time::Instant::from_std(at));
                    }
                }
                Err(e) => {
                    self.health.set_failed();
                    backoff.set_cap(BACKOFF_CAP.min(self.interval));
                    let d = retry_delay(&mut backoff, &e);
                    tracing::warn!("{} ({}); retrying in {d:.1?}", e.message, e.reason);
                    next = tokio::time::Instant::now() + d;
                }
            }
        }
    }
}

/// The next event, or never when events are off.
async fn recv_event(events: &mut Option<Events>) -> Option<Event> {
    match events {
        Some(e) => e.rx.recv().await,
        None => std::future::pending().await,
    }
}

struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }
}

/// Waits for SIGTERM or SIGINT; says which.
async fn stop_signal(term: &mut Signal, int: &mut Signal) -> &'static str {
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

/// `gpu-labeler run`: returns the exit code.
pub fn run(options: Options) -> Result<u8, Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Runtime(format!("cannot start the async runtime: {e}")))?;
    let result = rt.block_on(run_async(options));
    // A scan abandoned on SIGTERM must not hold the exit.
    rt.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn run_async(options: Options) -> Result<u8, Error> {
    let Options {
        sources,
        rules,
        publish,
    } = options;
    let mut inputs = Inputs::load(sources, rules)?;
    let kind = sink_kind(publish.sink, &inputs.config)?;
    inputs.set_node_sink(kind == SinkKind::Node);
    let every = interval(&publish, &inputs.config)?;
    // Installed before anything slow, so that a SIGTERM during start-up is a clean stop.
    let mut signals = if publish.oneshot {
        None
    } else {
        Some(
            Signals::install()
                .map_err(|e| Error::Runtime(format!("cannot install signal handlers: {e}")))?,
        )
    };
    let timeout = request_timeout(every);
    let target = SinkTarget {
        node_name: publish.node_name.clone(),
        kubeconfig: publish.kubeconfig.clone(),
        features_file: publish.features_file.clone(),
    };
    let sink = Sink::build(kind, &target, timeout).await?;
    let health = Arc::new(Health::new(Duration::from_secs(600)));
    let mut daemon = Daemon {
        nvml: None,
        nvml_wake: None,
        sharing: SharingSource::new(),
        faults: discover::health::Hold::new(),
        inputs,
        publish,
        sink,
        said: Said::default(),
        health: health.clone(),
        interval: every,
        snapshot: None,
        applied: Arc::new(std::sync::Mutex::new(watch::NodeView::default())),
        rewatch: false,
        node_watched: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        dra: Arc::default(),
        dra_watched: false,
        device_taint_state: None,
        device_taints_printed: None,
        scanned_instance_type: None,
    };
    daemon.set_interval();
    let Some(signals) = signals.as_mut() else {
        return daemon.oneshot().await;
    };
    let events_on = daemon.inputs.config.publish.events && !daemon.publish.no_events;
    let events = events_on.then(|| {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        daemon.nvml_wake = Some(tx.clone());
        let mut files = FileWatch::new(tx.clone());
        files.set(&daemon.watched_paths());
        match watch::open_uevents(daemon.publish.uevent_socket.as_deref()) {
            Ok(fd) => {
                tokio::spawn(watch::forward_uevents(fd, tx.clone()));
            }
            Err(e) => tracing::warn!(
                "cannot open the kernel's uevent socket ({e}); PCI and driver changes wait for the interval"
            ),
        }
        Events {
            tx,
            rx,
            files,
            coalescer: Coalescer::with_spread(daemon.inputs.config.publish.spread),
        }
    });
    if let (Some(ev), Sink::Node(n)) = (&events, &daemon.sink) {
        let client = client::kube_watch_client(
            daemon.publish.kubeconfig.as_deref(),
            timeout,
            Duration::from_secs(u64::from(watch::WATCH_SECONDS) + 30),
            // One event, a Node, at most as large as any answer.
            MAX_RESPONSE_BYTES,
        )
        .await?;
        // This node's ResourceSlices, unless a `--dra` file stands in for them.
        if daemon.inputs.sources.dra.is_none() && !daemon.publish.no_dra {
            daemon.dra_watched = true;
            tokio::spawn(watch::watch_dra(
                client.clone(),
                n.node_name().to_string(),
                timeout,
                daemon.dra.clone(),
                ev.tx.clone(),
            ));
        }
        tokio::spawn(watch::watch_node(
            kube::Api::all(client),
            n.node_name().to_string(),
            daemon.applied.clone(),
            ev.tx.clone(),
            daemon.node_watched.clone(),
        ));
    }
    if !daemon.publish.listen.trim().is_empty() {
        let addr = metrics::serve_apart(daemon.publish.listen.clone(), health)
            .await
            .map_err(|e| {
                Error::Runtime(format!("cannot listen on {}: {e}", daemon.publish.listen))
            })?;
        tracing::info!("serving /healthz, /readyz and /metrics on http://{addr}");
    }
    Ok(daemon.run_loop(signals, events).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_with_full_jitter() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        let ceilings: Vec<u64> = (0..12)
            .map(|_| {
                let c = b.ceiling().as_secs();
                b.next_with(0.5);
                c
            })
            .collect();
        assert_eq!(ceilings, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        assert_eq!(b.next_with(0.0), Duration::from_millis(100), "floor");
        assert_eq!(b.next_with(0.999), Duration::from_secs(2).mul_f64(0.999));
        b.reset();
        assert_eq!(b.ceiling(), Duration::from_secs(1));
        for _ in 0..100 {
            b.next_delay();
        }
        assert_eq!(b.ceiling(), Duration::from_secs(300));
    }

    #[test]
    fn random_fraction_is_in_range_and_varies() {
        let xs: Vec<f64> = (0..100).map(|_| random_fraction()).collect();
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        let distinct: std::collections::BTreeSet<u64> = xs.iter().map(|x| x.to_bits()).collect();
        assert!(distinct.len() > 90);
    }

    #[test]
    fn digest_follows_content_not_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.yaml");
        std::fs::write(&a, "x: 1\n").unwrap();
        std::fs::write(dir.path().join(".hidden.yaml"), "h").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "n").unwrap();
        let paths = vec![dir.path().to_path_buf()];
        let d1 = digest(&paths);
        std::fs::write(&a, "x: 1\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "changed").unwrap();
        std::fs::write(dir.path().join(".hidden.yaml"), "changed").unwrap();
        assert_eq!(digest(&paths), d1, "same content, unread files changed");
        std::fs::write(&a, "x: 2\n").unwrap();
        assert_ne!(digest(&paths), d1);
    }

    #[test]
    fn request_timeout_is_half_the_interval_within_bounds() {
        assert_eq!(
            request_timeout(Duration::from_secs(1)),
            Duration::from_secs(2)
        );
        assert_eq!(
            request_timeout(Duration::from_secs(20)),
            Duration::from_secs(10)
        );
        assert_eq!(
            request_timeout(Duration::from_secs(600)),
            Duration::from_secs(30)
        );
    }
}
