//! What tells the daemon to relabel before its interval: file changes (rule files, the config,
//! the device plugin's sharing config; a ConfigMap's `..data` symlink swap included), the
//! kernel's uevents for PCI devices and drivers (a driver loaded late, VFs created, a GPU
//! removed), and NVML's light check (MIG mode and layout, GPUs lost; run by the daemon). Each
//! becomes an `Event` on one channel; the daemon coalesces them (`Coalescer`) so that a burst is
//! one relabel, at most one a second.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use crate::publish::node::Guarded;

/// Where an event came from (`gpu_labeler_events_total{source}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Files,
    Uevent,
    Nvml,
    /// Our own Node, changed by someone else: one of our labels removed or changed.
    Node,
    /// This node's ResourceSlices changed (a DRA driver published, changed or removed one).
    Dra,
}

impl Source {
    pub const ALL: [Source; 5] = [
        Source::Files,
        Source::Uevent,
        Source::Nvml,
        Source::Node,
        Source::Dra,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Files => "files",
            Source::Uevent => "uevent",
            Source::Nvml => "nvml",
            Source::Node => "node",
            Source::Dra => "dra",
        }
    }
}

/// Something that may change the labels, and when it was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub source: Source,
    pub at: Instant,
}

/// After an event, wait this long for the rest of its burst (a ConfigMap update is several
/// inotify events; a MIG reconfiguration of 8 GPUs, several uevents).
pub const QUIET: Duration = Duration::from_millis(200);
/// ... but no longer than this after the first event of a burst.
pub const MAX_DELAY: Duration = Duration::from_millis(800);
/// Never more than one event-driven relabel a second.
pub const MIN_SPACING: Duration = Duration::from_secs(1);

/// Decides when pending events trigger a relabel: `QUIET` after the last event of a burst, at
/// most `MAX_DELAY` after its first, and not within `MIN_SPACING` of the previous relabel.
///
/// A burst that holds a file change (the rules or config, from a ConfigMap that reaches the
/// whole fleet at once) waits a further random part of `spread`, drawn once per burst.
#[derive(Debug, Default, Clone)]
pub struct Coalescer {
    first: Option<Instant>,
    last: Option<Instant>,
    sources: BTreeSet<Source>,
    last_run: Option<Instant>,
    spread: Duration,
    /// This burst's part of `spread`.
    jitter: Duration,
}

impl Coalescer {
    /// A coalescer whose file-change bursts wait up to `spread` more.
    pub fn with_spread(spread: Duration) -> Coalescer {
        Coalescer {
            spread,
            ..Coalescer::default()
        }
    }

    pub fn set_spread(&mut self, spread: Duration) {
        self.spread = spread;
    }

    pub fn add(&mut self, e: Event) {
        if self.first.is_none() {
            self.jitter = Duration::ZERO;
        }
        if e.source == Source::Files && self.jitter.is_zero() && !self.spread.is_zero() {
            self.jitter = self.spread.mul_f64(random_fraction());
        }
        self.first.get_or_insert(e.at);
        self.last = Some(e.at);
        self.sources.insert(e.source);
    }

    /// Whether a pending event came from this source.
    pub fn pending_from(&self, source: Source) -> bool {
        self.sources.contains(&source)
    }

    /// When the pending burst is due (`None`: nothing pending).
    pub fn due(&self) -> Option<Instant> {
        let (first, last) = (self.first?, self.last?);
        let mut at = (last + QUIET).min(first + MAX_DELAY) + self.jitter;
        if let Some(run) = self.last_run {
            at = at.max(run + MIN_SPACING);
        }
        Some(at)
    }

    /// A relabel ran at `now` (for the pending events or for the interval): returns the first
    /// pending event's time and the sources, and clears them.
    pub fn ran(&mut self, now: Instant) -> Option<(Instant, BTreeSet<Source>)> {
        self.last_run = Some(now);
        self.last = None;
        let sources = std::mem::take(&mut self.sources);
        self.first.take().map(|f| (f, sources))
    }
}

/// File-change notification on the directories that hold the watched files: a file is
/// replaced (editors, ConfigMap updates) as often as it is written, so its directory is what
/// is watched, and any change there is an event (the daemon's content digests decide whether
/// anything changed).
pub struct FileWatch {
    watcher: Option<notify::RecommendedWatcher>,
    /// Each watched directory, and whether its subdirectories are watched too.
    dirs: BTreeSet<(PathBuf, bool)>,
}

impl FileWatch {
    /// Watches nothing yet; `None` (said once) when the kernel gives no inotify instance.
    pub fn new(events: UnboundedSender<Event>) -> FileWatch {
        let watcher = notify::recommended_watcher(move |r: notify::Result<notify::Event>| {
            if let Ok(e) = r
                && !matches!(e.kind, notify::EventKind::Access(_))
            {
                let _ = events.send(Event {
                    source: Source::Files,
                    at: Instant::now(),
                });
            }
        });
        match watcher {
            Ok(w) => FileWatch {
                watcher: Some(w),
                dirs: BTreeSet::new(),
            },
            Err(e) => {
                tracing::warn!(
                    "cannot watch files ({e}); rule, config and sharing changes wait for the interval"
                );
                FileWatch {
                    watcher: None,
                    dirs: BTreeSet::new(),
                }
            }
        }
    }

    /// Watches the directories of `paths` (a directory itself with its subdirectories, as the
    /// rules loader reads them; a file's parent alone), and no others.
    pub fn set(&mut self, paths: &[PathBuf]) {
        use notify::Watcher;
        let Some(w) = self.watcher.as_mut() else {
            return;
        };
        let wanted: BTreeSet<(PathBuf, bool)> = paths.iter().filter_map(|p| dir_of(p)).collect();
        for (gone, _) in self.dirs.difference(&wanted) {
            let _ = w.unwatch(gone);
        }
        let mut now = BTreeSet::new();
        for entry @ (dir, recursive) in &wanted {
            if self.dirs.contains(entry) {
                now.insert(entry.clone());
                continue;
            }
            let mode = if *recursive {
                notify::RecursiveMode::Recursive
            } else {
                notify::RecursiveMode::NonRecursive
            };
            match w.watch(dir, mode) {
                Ok(()) => {
                    now.insert(entry.clone());
                }
                Err(e) => tracing::warn!(
                    "cannot watch {} ({e}); its changes wait for the interval",
                    dir.display()
                ),
            }
        }
        self.dirs = now;
    }
}

fn dir_of(p: &Path) -> Option<(PathBuf, bool)> {
    if p.is_dir() {
        Some((p.to_path_buf(), true))
    } else {
        p.parent()
            .map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                }
            })
            .filter(|d| d.is_dir())
            .map(|d| (d.to_path_buf(), false))
    }
}

/// One kernel uevent, as the netlink message carries it (`ACTION@DEVPATH\0KEY=VALUE\0...`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Uevent {
    pub action: String,
    pub devpath: String,
    pub subsystem: String,
    pub driver: String,
}

/// Parses a kernel uevent message; `None` for anything else (udev's own `libudev` messages,
/// which start with a binary header, or garbage).
pub fn parse_uevent(msg: &[u8]) -> Option<Uevent> {
    let mut parts = msg.split(|b| *b == 0).filter(|p| !p.is_empty());
    let head = std::str::from_utf8(parts.next()?).ok()?;
    let (action, devpath) = head.split_once('@')?;
    let mut e = Uevent {
        action: action.to_string(),
        devpath: devpath.to_string(),
        ..Uevent::default()
    };
    for p in parts {
        let Ok(kv) = std::str::from_utf8(p) else {
            continue;
        };
        match kv.split_once('=') {
            Some(("SUBSYSTEM", v)) => e.subsystem = v.to_string(),
            Some(("DRIVER", v)) => e.driver = v.to_string(),
            _ => {}
        }
    }
    Some(e)
}

/// Whether a uevent can change the labels: a PCI function added, removed, bound to or unbound
/// from a driver (a driver loaded after the agent, VFs created), or a DRM device (the GPU
/// driver's card) coming or going.
pub fn relevant(e: &Uevent) -> bool {
    matches!(e.subsystem.as_str(), "pci" | "drm")
        && matches!(
            e.action.as_str(),
            "add" | "remove" | "bind" | "unbind" | "change"
        )
}

/// The kernel's uevent broadcast (netlink, `NETLINK_KOBJECT_UEVENT`, group 1): an unprivileged
/// process in the host's user namespace receives it. Or, for tests, a Unix datagram socket at
/// a path whose messages are read the same way.
pub fn open_uevents(test_socket: Option<&Path>) -> std::io::Result<OwnedFd> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    match test_socket {
        Some(path) => {
            let _ = std::fs::remove_file(path);
            let fd = rustix::net::socket_with(AddressFamily::UNIX, SocketType::DGRAM, flags, None)?;
            rustix::net::bind(&fd, &rustix::net::SocketAddrUnix::new(path)?)?;
            Ok(fd)
        }
        None => {
            let fd = rustix::net::socket_with(
                AddressFamily::NETLINK,
                SocketType::DGRAM,
                flags,
                Some(rustix::net::netlink::KOBJECT_UEVENT),
            )?;
            rustix::net::bind(&fd, &rustix::net::netlink::SocketAddrNetlink::new(0, 1))?;
            Ok(fd)
        }
    }
}

/// Reads uevents from `fd` until it fails, sending an event for each relevant one.
pub async fn forward_uevents(fd: OwnedFd, events: UnboundedSender<Event>) {
    // SAFETY: the OwnedFd is an open socket that the AsyncFd owns, so it stays open and the same
    // for the AsyncFd's whole life.
    let registered = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
    };
    let fd = match registered {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!(
                "cannot wait on the uevent socket ({e}); device changes wait for the interval"
            );
            return;
        }
    };
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let Ok(mut ready) = fd.readable().await else {
            return;
        };
        match rustix::net::recv(
            ready.get_inner().as_fd(),
            &mut buf[..],
            rustix::net::RecvFlags::empty(),
        ) {
            Ok((n, _)) => {
                if let Some(e) = parse_uevent(&buf[..n.min(buf.len())])
                    && relevant(&e)
                {
                    tracing::debug!(
                        "uevent {} {} ({}, driver {:?})",
                        e.action,
                        e.devpath,
                        e.subsystem,
                        e.driver
                    );
                    if events
                        .send(Event {
                            source: Source::Uevent,
                            at: Instant::now(),
                        })
                        .is_err()
                    {
                        return;
                    }
                }
            }
            Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
            // The kernel dropped messages (ENOBUFS under a storm): something changed.
            Err(rustix::io::Errno::NOBUFS) => {
                let _ = events.send(Event {
                    source: Source::Uevent,
                    at: Instant::now(),
                });
            }
            Err(e) => {
                tracing::warn!(
                    "the uevent socket failed ({e}); device changes wait for the interval"
                );
                return;
            }
        }
    }
}

/// The server-side timeout of one watch request (the API server caps it near 5 minutes).
pub const WATCH_SECONDS: u32 = 290;

/// A uniform number in [0, 1), from the standard library's random hasher keys.
pub fn random_fraction() -> f64 {
    use std::hash::BuildHasher;
    let r = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    (r >> 11) as f64 / (1u64 << 53) as f64
}

/// When the next watch request may go out. Every restart waits, whatever ended the last watch
/// (an error, a broken stream, garbage, an ERROR event, the server's timeout): at least
/// [`WatchPacer::MIN`], so never more than one watch request a second; the pause doubles up to
/// [`WatchPacer::MAX`] while watches keep ending early, and each wait adds up to the pause
/// again of jitter, so that a fleet behind a misbehaving proxy does not restart in step.
#[derive(Debug, Clone)]
pub struct WatchPacer {
    pause: Duration,
}

impl WatchPacer {
    pub const MIN: Duration = Duration::from_secs(1);
    pub const MAX: Duration = Duration::from_secs(30);
    /// A watch that lasted this long was a good one: the pause starts again from the minimum.
    pub const HEALTHY: Duration = Duration::from_secs(30);

    pub fn new() -> WatchPacer {
        WatchPacer { pause: Self::MIN }
    }

    /// The wait before the next watch, given how long the last one lasted; `jitter` in [0, 1).
    pub fn wait(&mut self, lasted: Duration, jitter: f64) -> Duration {
        if lasted >= Self::HEALTHY {
            self.pause = Self::MIN;
        }
        let wait = self.pause + self.pause.mul_f64(jitter.clamp(0.0, 1.0));
        if lasted < Self::HEALTHY {
            self.pause = (self.pause * 2).min(Self::MAX);
        }
        wait
    }
}

impl Default for WatchPacer {
    fn default() -> Self {
        Self::new()
    }
}

/// Watches our own Node (one watch, field selector on its name) and sends an event when one of
/// the labels we applied (`ours`, kept current by the daemon) is missing or changed: another
/// controller removed them (nfd-master when its PCI source is turned off, an operator's
/// `kubectl label ...-`). Other changes of the Node (kubelet's status) are ignored here, at no
/// cost to the API server. A watch that ends is resumed from its last resourceVersion, after
/// the [`WatchPacer`]'s wait whatever ended it.
///
/// `ours` is what the daemon applied and what the watch last saw of the Node, under one
/// lock: a change someone makes between our write and the daemon noting what it wrote is
/// still caught, on whichever side comes second.
///
/// `watching` is true while a watch stream is open: while it is not (a broken stream, a proxy
/// that refuses watches, the pause between two watches), the daemon reads the Node at each
/// cycle instead, so that a label someone removed comes back within an interval even when
/// the watch cannot say so.
pub async fn watch_node(
    api: kube::Api<k8s_openapi::api::core::v1::Node>,
    node: String,
    ours: std::sync::Arc<std::sync::Mutex<NodeView>>,
    events: UnboundedSender<Event>,
    watching: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let mut version = "0".to_string();
    let mut pacer = WatchPacer::new();
    loop {
        let started = Instant::now();
        let ended = watch_once(&api, &node, &mut version, &ours, &events, &watching).await;
        watching.store(false, Ordering::Relaxed);
        if ended.is_err() {
            return;
        }
        let wait = pacer.wait(started.elapsed(), random_fraction());
        tracing::debug!("watching node {node}: again in {wait:?}");
        tokio::time::sleep(wait).await;
    }
}

/// What the daemon knows of DRA on its node (`watch_dra`).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum DraView {
    /// Not read yet (or the last read failed): no DRA facts this cycle.
    #[default]
    Unknown,
    /// The cluster serves no `resource.k8s.io`: no DRA facts.
    Absent,
    /// This node's slices, the DeviceClasses and the Node's allocatable as last read.
    Read(crate::dra::DraObjects),
}

/// What the daemon says (once) of a cluster without DRA.
pub const NO_DRA_IN_CLUSTER: &str =
    "the cluster serves no resource.k8s.io (ResourceSlices v1 or v1beta2): no DRA facts";

/// How long a cluster without `resource.k8s.io` is left before it is asked again (an upgrade
/// that adds DRA is noticed within this).
pub const DRA_ABSENT_RECHECK: Duration = Duration::from_secs(600);

/// Reads DRA once: the version the cluster serves, then this node's slices, the classes and
/// the Node; with the version and the slice list's resourceVersion (where a watch starts).
pub async fn read_dra(
    client: &kube::Client,
    node: &str,
    timeout: Duration,
) -> Result<(DraView, Option<(&'static str, String)>), String> {
    use crate::publish::slices;
    match slices::version(client, timeout).await? {
        None => Ok((DraView::Absent, None)),
        Some(v) => {
            let (objects, rv) = slices::read(client, node, v, timeout).await?;
            Ok((DraView::Read(objects), Some((v, rv))))
        }
    }
}

/// Keeps `view` to this node's DRA objects: reads them, watches this node's slices from that
/// read, and on any change of a slice reads them again at once and wakes the daemon (within
/// about a second of the change). The DeviceClasses and the Node's allocatable are read again
/// with them, and when a watch has run its course (the server's timeout, about every 5
/// minutes). A watch broken early (a fault) starts again from where it was, one request, paced
/// as the Node watch is; a change, a watch too old (410) or one that ran its course reads all
/// again (three requests), and only a failed read asks for the API version again. A
/// cluster without `resource.k8s.io` is said once and asked again every `DRA_ABSENT_RECHECK`; a
/// read that fails is said once per change.
pub async fn watch_dra(
    client: kube::Client,
    node: String,
    timeout: Duration,
    view: std::sync::Arc<std::sync::Mutex<DraView>>,
    events: UnboundedSender<Event>,
) {
    use crate::publish::slices;
    use futures_util::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let mut pacer = WatchPacer::new();
    let mut said: Option<String> = None;
    let mut say = |what: Option<String>| {
        if what != said {
            if let Some(s) = &what {
                tracing::warn!("{s}");
            }
            said = what;
        }
    };
    let set = |read: DraView| -> bool {
        view.lock()
            .map(|mut v| {
                let changed = *v != read;
                *v = read;
                changed
            })
            .unwrap_or(false)
    };
    let wake = || {
        events
            .send(Event {
                source: Source::Dra,
                at: Instant::now(),
            })
            .is_ok()
    };
    let mut version: Option<&'static str> = None;
    let mut from: Option<String> = None;
    loop {
        let started = Instant::now();
        let v = match version {
            Some(v) => v,
            None => match slices::version(&client, timeout).await {
                Ok(Some(v)) => {
                    version = Some(v);
                    v
                }
                Ok(None) => {
                    say(Some(NO_DRA_IN_CLUSTER.into()));
                    if set(DraView::Absent) && !wake() {
                        return;
                    }
                    tokio::time::sleep(DRA_ABSENT_RECHECK).await;
                    continue;
                }
                Err(e) => {
                    say(Some(format!("cannot read this node's DRA objects: {e}")));
                    tokio::time::sleep(pacer.wait(started.elapsed(), random_fraction())).await;
                    continue;
                }
            },
        };
        let rv = match from.clone() {
            Some(rv) => rv,
            None => match slices::read(&client, &node, v, timeout).await {
                Ok((objects, rv)) => {
                    say(None);
                    if set(DraView::Read(objects)) && !wake() {
                        return;
                    }
                    from = Some(rv.clone());
                    rv
                }
                Err(e) => {
                    say(Some(format!("cannot read this node's DRA objects: {e}")));
                    version = None;
                    tokio::time::sleep(pacer.wait(started.elapsed(), random_fraction())).await;
                    continue;
                }
            },
        };
        let api = slices::api(&client, v, "ResourceSlice", "resourceslices");
        let params = WatchParams::default()
            .fields(&slices::node_selector(&node))
            .timeout(WATCH_SECONDS);
        if let Ok(stream) = api.watch(&params, &rv).await {
            let mut stream = std::pin::pin!(stream);
            while let Some(e) = stream.next().await {
                match e {
                    Ok(WatchEvent::Bookmark(b)) => from = Some(b.metadata.resource_version),
                    Ok(WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_)) => {
                        from = None;
                        break;
                    }
                    Ok(WatchEvent::Error(e)) => {
                        if e.code == 410 {
                            from = None;
                        }
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        if from.is_none() {
            // A slice changed: read them again at once (the watch did what it was for).
            pacer = WatchPacer::new();
            continue;
        }
        // A watch that ran its course (the server's timeout, about every 5 minutes): read the
        // classes and the allocatable again with the next one. One that broke early under a
        // fault starts again from where it was, one request.
        if started.elapsed() >= WatchPacer::HEALTHY {
            from = None;
        }
        tokio::time::sleep(pacer.wait(started.elapsed(), random_fraction())).await;
    }
}

/// What the daemon has on its Node (labels, taints, condition: `Guarded`) and the Node as the
/// watch last saw it, each with the Node's resourceVersion then.
#[derive(Debug, Default)]
pub struct NodeView {
    applied: Option<(Guarded, Option<String>)>,
    seen: Option<(Guarded, Option<String>)>,
}

/// Whether a view of the Node at `seen` can say something of a write at `written`: not when
/// it is older (it shows the Node before the write); when either is unknown or the two cannot
/// be compared (opaque versions, `kobject::compare_resource_versions`), it is taken to.
fn not_older(seen: Option<&str>, written: Option<&str>) -> bool {
    match (seen, written) {
        (Some(s), Some(w)) => {
            crate::kobject::compare_resource_versions(s, w) != Some(std::cmp::Ordering::Less)
        }
        _ => true,
    }
}

impl NodeView {
    /// The watch saw the Node as `node` at `version`: whether it lacks or changed ours.
    pub fn saw(&mut self, node: Guarded, version: Option<String>) -> bool {
        let lost = self
            .applied
            .as_ref()
            .is_some_and(|(o, v)| not_older(version.as_deref(), v.as_deref()) && !node.carries(o));
        self.seen = Some((node, version));
        lost
    }

    /// The daemon left `ours` on the Node (`None`: it does not know), the Node at `version`
    /// then: whether the Node as the watch last saw it, if that is not older, lacks or changed
    /// any of it.
    pub fn applied(&mut self, ours: Option<Guarded>, version: Option<String>) -> bool {
        self.applied = ours.map(|o| (o, version));
        match (&self.applied, &self.seen) {
            (Some((o, v)), Some((seen, sv))) => {
                not_older(sv.as_deref(), v.as_deref()) && !seen.carries(o)
            }
            _ => false,
        }
    }
}

/// One watch request, read until it ends; `Err` when the daemon is gone.
async fn watch_once(
    api: &kube::Api<k8s_openapi::api::core::v1::Node>,
    node: &str,
    version: &mut String,
    ours: &std::sync::Mutex<NodeView>,
    events: &UnboundedSender<Event>,
    watching: &std::sync::atomic::AtomicBool,
) -> Result<(), ()> {
    use futures_util::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let params = WatchParams::default()
        .fields(&format!("metadata.name={node}"))
        .timeout(WATCH_SECONDS);
    let stream = match api.watch(&params, version).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!("watching node {node}: {e}");
            return Ok(());
        }
    };
    // Open: until it breaks, the stream says what changes.
    watching.store(true, Ordering::Relaxed);
    let mut stream = std::pin::pin!(stream);
    while let Some(e) = stream.next().await {
        let n = match e {
            Ok(WatchEvent::Added(n) | WatchEvent::Modified(n)) => n,
            Ok(WatchEvent::Bookmark(b)) => {
                *version = b.metadata.resource_version;
                continue;
            }
            // 410 Gone: too old; start again from now.
            Ok(WatchEvent::Error(e)) => {
                if e.code == 410 {
                    *version = "0".into();
                }
                return Ok(());
            }
            Ok(WatchEvent::Deleted(_)) => continue,
            Err(e) => {
                tracing::debug!("watching node {node}: {e}");
                return Ok(());
            }
        };
        if let Some(v) = n.metadata.resource_version.clone() {
            *version = v;
        }
        let at = crate::publish::node::version_of(&n);
        let seen = Guarded::of_node(&n);
        let lost = ours.lock().map(|mut v| v.saw(seen, at)).unwrap_or(false);
        if lost {
            tracing::info!(
                "node {node}: some of our labels, taints or condition were removed or changed by someone else"
            );
            events
                .send(Event {
                    source: Source::Node,
                    at: Instant::now(),
                })
                .map_err(|_| ())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_event_source_is_a_series_of_the_events_metric() {
        let names = super::Source::ALL.map(super::Source::as_str);
        assert_eq!(names, crate::metrics::EVENT_SOURCES);
    }

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Guarded {
        Guarded {
            labels: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Guarded::default()
        }
    }

    /// Versions compare by length then digits (KEP-5504), so 9 is older than 10; versions that
    /// are not such integers (another storage's) cannot be ordered, and a view at one is taken
    /// to say something of the write rather than be ignored.
    #[test]
    fn versions_are_ordered_as_kubernetes_orders_them_and_opaque_ones_are_not_ignored() {
        let ours = labels(&[("a", "1")]);
        let gone = labels(&[("kubernetes.io/os", "linux")]);
        let mut v = NodeView::default();
        assert!(!v.applied(Some(ours.clone()), Some("10".into())));
        assert!(!v.saw(gone.clone(), Some("9".into())), "9 is before 10");
        assert!(v.saw(gone.clone(), Some("11".into())));
        let mut v = NodeView::default();
        assert!(!v.applied(Some(ours), Some("etcd-a".into())));
        assert!(v.saw(gone, Some("etcd-b".into())));
    }

    #[test]
    fn a_change_between_our_write_and_noting_it_is_caught_whichever_side_comes_second() {
        let ours = labels(&[("a", "1"), ("b", "2")]);
        let mut kubelet_too = ours.clone();
        kubelet_too
            .labels
            .insert("kubernetes.io/os".into(), "linux".into());
        let without_b = labels(&[("a", "1"), ("kubernetes.io/os", "linux")]);

        // The watch sees our write (version 22), then someone removes b (23), before the
        // daemon notes what it wrote at 22: noting it finds the loss.
        let mut v = NodeView::default();
        assert!(!v.saw(kubelet_too.clone(), Some("22".into())));
        assert!(!v.saw(without_b.clone(), Some("23".into())));
        assert!(v.applied(Some(ours.clone()), Some("22".into())));

        // Noted first, then the removal: the watch finds it.
        let mut v = NodeView::default();
        assert!(!v.applied(Some(ours.clone()), Some("22".into())));
        assert!(!v.saw(kubelet_too.clone(), Some("22".into())));
        assert!(v.saw(without_b.clone(), Some("23".into())));

        // A view older than our write (the watch lags behind it) says nothing of it, either
        // way round: no relabel for the Node as it was before we wrote.
        let before = labels(&[("kubernetes.io/os", "linux")]);
        let mut v = NodeView::default();
        assert!(!v.saw(before.clone(), Some("21".into())));
        assert!(!v.applied(Some(ours.clone()), Some("22".into())));
        assert!(!v.saw(before, Some("21".into())));
        assert!(!v.saw(kubelet_too, Some("22".into())));

        // Versions unknown: every view counts.
        let mut v = NodeView::default();
        assert!(!v.applied(Some(ours), None));
        assert!(v.saw(without_b, None));
    }

    #[test]
    fn a_taint_or_condition_of_ours_changed_by_someone_else_is_a_loss() {
        let ours = Guarded {
            labels: labels(&[("a", "1")]).labels,
            taints: vec!["feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule".into()],
            condition: Some("False/GPUsDegraded/7 of 8 GPUs healthy".into()),
        };
        let mut node = ours.clone();
        node.taints.insert(0, "dedicated=ml:NoSchedule".into());
        let mut v = NodeView::default();
        assert!(!v.applied(Some(ours.clone()), Some("5".into())));
        // Someone else's taint added: still ours all there.
        assert!(!v.saw(node.clone(), Some("6".into())));
        // Our taint removed.
        let mut untainted = node.clone();
        untainted.taints.pop();
        assert!(v.saw(untainted, Some("7".into())));
        // Our condition set to True by someone else.
        let mut healthy = node.clone();
        healthy.condition = Some("True/GPUsHealthy/8 of 8 GPUs healthy".into());
        assert!(v.saw(healthy, Some("8".into())));
        // A condition we do not write: no opinion on the Node's.
        let mut v = NodeView::default();
        let no_condition = Guarded {
            condition: None,
            ..ours.clone()
        };
        assert!(!v.applied(Some(no_condition), Some("5".into())));
        assert!(!v.saw(
            Guarded {
                condition: Some("True/x/y".into()),
                ..node
            },
            Some("6".into())
        ));
    }

    #[test]
    fn every_watch_restart_waits_at_least_a_second_and_longer_while_they_fail() {
        let mut p = WatchPacer::new();
        let quick = Duration::from_millis(10);
        // Broken at once, again and again: 1, 2, 4, 8, 16, 30, 30 s (no jitter), never less.
        let waits: Vec<u64> = (0..7).map(|_| p.wait(quick, 0.0).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        // Jitter adds up to the pause again.
        assert_eq!(p.wait(quick, 0.5), Duration::from_secs(45));
        // A watch that ran its course: back to the minimum, still at least a second.
        assert_eq!(
            p.wait(Duration::from_secs(290), 0.0),
            Duration::from_secs(1)
        );
        assert_eq!(
            p.wait(Duration::from_secs(290), 0.999),
            Duration::from_secs(1).mul_f64(1.999)
        );
    }

    #[test]
    fn a_kernel_uevent_is_parsed_and_only_pci_and_drm_changes_count() {
        let bind = b"bind@/devices/pci0000:00/0000:00:02.0\0ACTION=bind\0DEVPATH=/devices/pci0000:00/0000:00:02.0\0SUBSYSTEM=pci\0DRIVER=nvidia\0SEQNUM=4711\0";
        let e = parse_uevent(bind).unwrap();
        assert_eq!(
            e,
            Uevent {
                action: "bind".into(),
                devpath: "/devices/pci0000:00/0000:00:02.0".into(),
                subsystem: "pci".into(),
                driver: "nvidia".into(),
            }
        );
        assert!(relevant(&e));
        let usb = parse_uevent(b"add@/devices/usb1\0SUBSYSTEM=usb\0").unwrap();
        assert!(!relevant(&usb));
        // udev's re-broadcast starts with "libudev\0" and a binary header.
        assert_eq!(parse_uevent(b"libudev\0\xfe\xed"), None);
        assert_eq!(parse_uevent(b"\xff\xfe"), None);
    }

    #[test]
    fn a_burst_is_one_relabel_and_relabels_are_a_second_apart() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut c = Coalescer::default();
        assert_eq!(c.due(), None);
        // Events every 100 ms: due 200 ms after the last, but never past 800 ms after the first.
        for n in [0, 100, 200] {
            c.add(Event {
                source: Source::Files,
                at: ms(n),
            });
        }
        assert_eq!(c.due(), Some(ms(400)));
        for n in (300..=1000).step_by(100) {
            c.add(Event {
                source: Source::Uevent,
                at: ms(n),
            });
        }
        assert_eq!(c.due(), Some(ms(800)));
        let (first, sources) = c.ran(ms(800)).unwrap();
        assert_eq!(
            (first, sources.into_iter().collect::<Vec<_>>()),
            (ms(0), vec![Source::Files, Source::Uevent])
        );
        assert_eq!(c.due(), None);
        // The next burst waits for a second after that relabel.
        c.add(Event {
            source: Source::Nvml,
            at: ms(900),
        });
        assert_eq!(c.due(), Some(ms(1800)));
    }

    #[test]
    fn a_file_change_burst_is_spread_and_a_node_local_one_is_not() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let spread = Duration::from_secs(2);
        // Node-local: no spread.
        let mut c = Coalescer::with_spread(spread);
        c.add(Event {
            source: Source::Uevent,
            at: ms(0),
        });
        assert_eq!(c.due(), Some(ms(200)));
        c.ran(ms(200));
        // A file change: 200 ms after it, plus this burst's part of the spread (drawn once).
        let mut dues = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let mut c = Coalescer::with_spread(spread);
            c.add(Event {
                source: Source::Files,
                at: ms(0),
            });
            let due = c.due().unwrap();
            c.add(Event {
                source: Source::Files,
                at: ms(10),
            });
            assert_eq!(
                c.due(),
                Some(due + Duration::from_millis(10)),
                "drawn once per burst"
            );
            assert!(due >= ms(200) && due < ms(2200), "{:?}", due - t0);
            dues.insert(due);
        }
        assert!(
            dues.len() > 40,
            "spread over the interval: {} distinct",
            dues.len()
        );
        // Off.
        let mut c = Coalescer::with_spread(Duration::ZERO);
        c.add(Event {
            source: Source::Files,
            at: ms(0),
        });
        assert_eq!(c.due(), Some(ms(200)));
    }
}
