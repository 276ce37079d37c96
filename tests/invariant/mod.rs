//! The invariant soak (issue 35): the real daemon (`gpu-labeler run --interval 1s`, the Dell
//! 8x H100 tree, NVML through the fake library, the built-in rules and a site rule file)
//! against Kubernetes' own API server behind the fault proxy, under randomized faults from
//! every side at once, epoch after epoch:
//!
//! - the API proxy: 500s, 409s, 429s (Retry-After 1 s), garbage, dropped connections, slow
//!   answers (past the request timeout), a 64 MiB body, an endless body;
//! - the Node watch: garbage streams, an 8 MiB event;
//! - NVML: a hang or a segfault in a per-scan query, implausible values, a GPU lost and back
//!   every second (`GPU is lost`, #44);
//! - the health port: a flood of idle connections;
//! - the rule files: a file that does not parse, a 100,000-character regex;
//! - the cluster: another manager removing one of the agent's labels, taking its taint off, or
//!   setting its `GPUHealthy` condition to something else (#44).
//!
//! Checked all along (every 250 ms): `/healthz` answered 200 within 1 s, the agent's RSS under
//! the DaemonSet's 96 MiB limit, and every label of ours on the Node has the value a healthy
//! node gets (nothing outside what validation and the plausibility checks allow; a label may be
//! missing only while another manager removed it; `gpu.health` and `gpu.healthy.count` may say
//! one GPU is lost while one flaps and for the hold after, and nothing else may change with it);
//! the agent's taint (a site rule's, `publish.taints`) and its `GPUHealthy` condition
//! (`publish.condition`, under the health-condition policy) are there and right, but while
//! another manager has just changed them, and the condition may say the lost GPU as the labels do.
//! At the end: at most 30 API requests over any 10 s (the first labelling alone is about 11:
//! the Node's read, apply, taints, condition and watch, DRA's API groups, slices, classes, Node
//! and watch; then two watches restarting under the faults, the writes of a 1 s interval and
//! the write-backs of what another manager changed; before DRA and the extras, 20), and the whole right label set on
//! the Node within 2 intervals of the faults stopping (and of the lost GPU's hold ending, and of
//! the answers the proxy held back arriving).
//!
//! The schedule comes from one seed (`SOAK_SEED`, else the clock), printed first, so that a
//! failure replays from it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::apiserver::{self, Agent, FakeApiServer, Faults, WatchFault};
use crate::common;
use crate::kube::{KubeApiServer, Who};

pub const NODE: &str = "soak-node";
/// The DaemonSet's memory limit.
const LIMIT_KIB: u64 = 96 * 1024;
const INTERVAL: Duration = Duration::from_secs(1);
/// The most API requests in any 10 s (the module's doc says what they are).
const MAX_REQUESTS_10S: usize = 30;
/// `sources.health.clearAfter`: longer than the flapping GPU's second away, and than a cycle the
/// API's faults hold up, so that its fault, memory and compute capability are held through the
/// flapping (at 3 s, a cycle delayed by slow answers saw the GPU lost on both sides of it).
const CLEAR_AFTER: Duration = Duration::from_secs(10);
/// The labels a lost GPU changes (held: `degraded` and one GPU fewer healthy).
/// The taint a site rule asks for, and the condition of a healthy node (and of one GPU lost).
const OUR_TAINT: &str = "feature.node.kubernetes.io/soak=true:PreferNoSchedule";
const HEALTHY: &str = "True/GPUsHealthy/8 of 8 GPUs healthy";
const ONE_LOST: &str = "False/GPUsDegraded/7 of 8 GPUs healthy";
const TAINT_RULE: &str = "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: soak-taint\nspec:\n  rules:\n    - name: soak taint\n      taints:\n        - {key: feature.node.kubernetes.io/soak, value: \"true\", effect: PreferNoSchedule}\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {op: In, value: [\"10de\"]}\n";

/// The Node's labels, its taints as `key=value:effect` and its `GPUHealthy` condition as
/// `status/reason/message`.
fn node_state(kube: &KubeApiServer) -> (BTreeMap<String, String>, Vec<String>, Option<String>) {
    let n = kube.node(NODE);
    let labels = serde_json::from_value(n["metadata"]["labels"].clone()).unwrap_or_default();
    let taints = n["spec"]["taints"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    format!(
                        "{}={}:{}",
                        t["key"].as_str().unwrap_or(""),
                        t["value"].as_str().unwrap_or(""),
                        t["effect"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let condition = crate::kube::gpu_healthy_condition(&n, "/");
    (labels, taints, condition)
}

/// How long after the flapper last lost GPU 3 the agent may still see it lost: the second it
/// stays lost, and an epoch (at most 4 s) in which NVML crashes or hangs and the agent keeps its
/// last good answer, taken while the GPU was lost (docs/health.md: a stale answer is kept while
/// the GPUs are on the bus). Its hold of `CLEAR_AFTER` counts from the last time it was seen.
const LOST_SEEN: Duration = Duration::from_secs(1 + 4);

const LOST_HEALTH: [(&str, &str); 2] = [
    ("feature.node.kubernetes.io/gpu.health", "degraded"),
    ("feature.node.kubernetes.io/gpu.healthy.count", "7"),
];

/// SplitMix64: the schedule's only source of chance, so that a seed replays it.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        common::splitmix64(&mut self.0)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// `SOAK_SEED`, else one from the clock.
pub fn seed() -> u64 {
    std::env::var("SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct Report {
    pub seed: u64,
    /// Each epoch's faults, in order.
    pub epochs: Vec<String>,
    /// Every broken invariant, with when (seconds from the start) and what.
    pub violations: Vec<String>,
    pub max_rss_kib: u64,
    pub slowest_probe: Duration,
    pub probes: usize,
    /// The most API requests in any 10 s.
    pub peak_requests_10s: usize,
    pub requests: usize,
    /// From the faults stopping (or, later, the hold of a GPU lost lately ending) to the right
    /// labels on the Node.
    pub recovered_after: Option<Duration>,
}

impl Report {
    pub fn summary(&self) -> String {
        format!(
            "seed {}: {} epochs, {} probes (slowest {:.0} ms), peak RSS {} KiB, {} API requests (at most {} in any 10 s), right labels {} after the faults stopped; {} violations",
            self.seed,
            self.epochs.len(),
            self.probes,
            self.slowest_probe.as_secs_f64() * 1000.0,
            self.max_rss_kib,
            self.requests,
            self.peak_requests_10s,
            self.recovered_after
                .map_or("never".into(), |d| format!("{:.1} s", d.as_secs_f64())),
            self.violations.len()
        )
    }
}

/// The files the faults rewrite.
struct Inputs {
    dir: tempfile::TempDir,
    nvml: PathBuf,
    rules: PathBuf,
    /// The NVML fault of this epoch, and whether GPU 3 is lost now (the flapper's side).
    nvml_state: Mutex<(Option<serde_json::Value>, bool)>,
}

const GOOD_RULES: &str = "site.yaml";

impl Inputs {
    fn new() -> Inputs {
        let dir = tempfile::tempdir().unwrap();
        let nvml = dir.path().join("nvml.json");
        std::fs::copy(common::nvml_fixture("h100-8x"), &nvml).unwrap();
        let rules = dir.path().join("rules");
        std::fs::create_dir(&rules).unwrap();
        std::fs::write(
            rules.join(GOOD_RULES),
            apiserver::rule_file(&[("nvidia", "site.nvidia")]),
        )
        .unwrap();
        std::fs::write(rules.join("taint.yaml"), TAINT_RULE).unwrap();
        Inputs {
            dir,
            nvml,
            rules,
            nvml_state: Mutex::new((None, false)),
        }
    }

    fn config(&self) -> PathBuf {
        let path = self.dir.path().join("config.yaml");
        std::fs::write(
            &path,
            format!(
                "sources:\n  nvml: {{timeout: 2s, checkInterval: 1s}}\n  health: {{clearAfter: {}s}}\n",
                CLEAR_AFTER.as_secs()
            ),
        )
        .unwrap();
        path
    }

    fn set_nvml(&self, fault: Option<serde_json::Value>) {
        let mut state = self.nvml_state.lock().unwrap();
        state.0 = fault;
        self.write_nvml(&state);
    }

    /// GPU 3 lost (`GPU is lost` to every call about it) or back.
    fn set_lost(&self, lost: bool) {
        let mut state = self.nvml_state.lock().unwrap();
        state.1 = lost;
        self.write_nvml(&state);
    }

    fn write_nvml(&self, (fault, lost): &(Option<serde_json::Value>, bool)) {
        let mut v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(common::nvml_fixture("h100-8x")).unwrap(),
        )
        .unwrap();
        match fault.clone() {
            Some(serde_json::Value::String(s)) if s == "garbage" => {
                for d in v["devices"].as_array_mut().unwrap() {
                    d["memory_total_bytes"] = serde_json::json!(2_415_267_542_309u64 << 20);
                }
            }
            Some(f) => v["faults"] = serde_json::json!({"misbehave": [f]}),
            None => {}
        }
        if *lost {
            v["faults"]["device_errors"] = serde_json::json!({"3": "GPU_IS_LOST"});
        }
        atomic_write(&self.nvml, &v.to_string());
    }

    /// A second rule file, or none.
    fn set_extra_rules(&self, text: Option<String>) {
        let path = self.rules.join("extra.yaml");
        match text {
            Some(t) => atomic_write(&path, &t),
            None => {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

fn atomic_write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp-soak");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// What the faults come from.
struct Sides<'a> {
    proxy: &'a FakeApiServer,
    kube: &'a KubeApiServer,
    inputs: &'a Inputs,
    health: SocketAddr,
    ours: &'a BTreeMap<String, String>,
    flap: &'a Mutex<Flap>,
}

/// The GPU that NVML loses and has back every second: shared by the faults, the flapper that
/// rewrites the fixture, and the checker.
#[derive(Debug, Default)]
struct Flap {
    /// This epoch flaps GPU 3.
    on: bool,
    /// Lost now, and since when.
    lost: Option<Instant>,
    /// When it was last made lost.
    last_lost: Option<Instant>,
}

impl Flap {
    /// Until when the Node may say a GPU is lost: while one flaps, and for the hold after it
    /// was last seen lost (`LOST_SEEN`, then `CLEAR_AFTER`, then a cycle to publish).
    fn may_be_lost(&self, now: Instant) -> bool {
        self.on
            || self
                .last_lost
                .is_some_and(|t| now < t + LOST_SEEN + CLEAR_AFTER + 2 * INTERVAL)
    }
}

/// Loses GPU 3 and has it back every second while `flap.on`, until `stop`.
fn flapper(inputs: &Inputs, flap: &Mutex<Flap>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        {
            let mut f = flap.lock().unwrap();
            let now = Instant::now();
            match f.lost {
                Some(since) if !f.on || now >= since + Duration::from_secs(1) => {
                    inputs.set_lost(false);
                    f.lost = None;
                }
                // Back for a second before it is lost again.
                None if f.on
                    && f.last_lost
                        .is_none_or(|t| now >= t + Duration::from_secs(2)) =>
                {
                    inputs.set_lost(true);
                    f.lost = Some(now);
                    f.last_lost = Some(now);
                }
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One epoch's faults, drawn from `rng`, applied; returns what they are.
fn draw_faults(
    rng: &mut Rng,
    sides: &Sides<'_>,
    flood: &mut Vec<TcpStream>,
    removed: &Mutex<Option<String>>,
    drifted: &Mutex<Option<&'static str>>,
) -> (String, Duration) {
    let Sides {
        proxy,
        kube,
        inputs,
        health,
        ours,
        flap,
    } = *sides;
    let mut said = Vec::new();
    let k = 1 + rng.below(4) as usize;
    let mut faults = Faults::default();
    match rng.below(9) {
        0 => faults.error_500 = k,
        1 => faults.conflict_409 = k,
        2 => {
            faults.throttle_429 = k;
            faults.retry_after_secs = 1;
        }
        3 => faults.garbage = k,
        4 => faults.drop = k,
        5 => {
            faults.slow = k;
            faults.slow_for = Duration::from_secs(3);
        }
        6 => faults.huge_body = 1,
        7 => faults.endless_body = 1,
        _ => {}
    }
    faults.watch = match rng.below(3) {
        0 => Some(WatchFault::Garbage),
        1 => Some(WatchFault::Huge(8 << 20)),
        _ => None,
    };
    said.push(format!("api {faults:?}"));
    // How long an answer the proxy holds back may still be on its way after the faults stop.
    let held = if faults.slow > 0 {
        faults.slow_for
    } else {
        Duration::ZERO
    };
    proxy.set_faults(faults);

    let query = *rng.pick(&["nvmlDeviceGetCount_v2", "nvmlDeviceGetMemoryInfo"]);
    let nvml = match rng.below(4) {
        0 => Some(serde_json::json!({"function": query, "action": "hang"})),
        1 => Some(serde_json::json!({"function": query, "action": "segv"})),
        2 => Some(serde_json::json!("garbage")),
        _ => None,
    };
    said.push(format!("nvml {nvml:?}"));
    inputs.set_nvml(nvml);
    let flapping = rng.below(3) == 0;
    flap.lock().unwrap().on = flapping;
    if flapping {
        said.push("GPU 3 lost and back every second".into());
    }

    let rules = match rng.below(3) {
        0 => Some(("does not parse", "spec: [\n  rules: {\n".to_string())),
        1 => Some((
            "a 100,000-character regex",
            apiserver::rule_file(&[("huge", "site.huge")]).replace(
                "vendor: {op: In, value: [\"10de\"]}",
                &format!(
                    "vendor: {{op: InRegexp, value: [\"{}\"]}}",
                    "(a|b)*c".repeat(14_286)
                ),
            ),
        )),
        _ => None,
    };
    said.push(format!("rules {:?}", rules.as_ref().map(|r| r.0)));
    inputs.set_extra_rules(rules.map(|r| r.1.replace("test-rules", "extra-rules")));

    flood.clear();
    let idle = *rng.pick(&[0usize, 0, 64, 300]);
    for _ in 0..idle {
        if let Ok(s) = TcpStream::connect_timeout(&health, Duration::from_millis(200)) {
            flood.push(s);
        }
    }
    said.push(format!("{idle} idle health connections"));

    if removed.lock().unwrap().is_none() && rng.below(4) == 0 {
        let keys: Vec<&String> = ours.keys().collect();
        let key = (*rng.pick(&keys)).clone();
        // Said before it is done, so that the checker never sees it unannounced.
        *removed.lock().unwrap() = Some(key.clone());
        let patch = serde_json::json!({"metadata": {"labels": {key.clone(): null}}});
        kube.merge_patch(
            &Who::admin(),
            "kubectl-label",
            &format!("/api/v1/nodes/{NODE}"),
            &patch,
        );
        said.push(format!("{key} removed by another manager"));
    }
    if drifted.lock().unwrap().is_none() && rng.below(4) == 0 {
        let admin = Who::admin();
        // Said before it is done, so that the checker never sees it unannounced.
        if rng.below(2) == 0 {
            *drifted.lock().unwrap() = Some("taint");
            kube.merge_patch(
                &admin,
                "kubectl-taint",
                &format!("/api/v1/nodes/{NODE}"),
                &serde_json::json!({"spec": {"taints": null}}),
            );
            said.push("our taint taken off by another manager".into());
        } else {
            *drifted.lock().unwrap() = Some("condition");
            kube.request(
                &admin,
                "PATCH",
                &format!("/api/v1/nodes/{NODE}/status?fieldManager=someone"),
                Some((
                    "application/strategic-merge-patch+json",
                    &serde_json::json!({"status": {"conditions": [{"type": "GPUHealthy",
                        "status": "False", "reason": "Someone", "message": "says so"}]}}),
                )),
            );
            said.push("our condition set by another manager".into());
        }
    }
    (said.join("; "), held)
}

/// One GET /healthz bounded by 1 s: (status, how long it took).
fn probe(addr: SocketAddr) -> (u16, Duration) {
    let started = Instant::now();
    let status = (|| -> std::io::Result<u16> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        s.set_read_timeout(Some(Duration::from_secs(1)))?;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head)?;
        Ok(std::str::from_utf8(&head[9..12])
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0))
    })()
    .unwrap_or(0);
    (status, started.elapsed())
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// What `got` has other than `want`: `-key`, `+key=value`, `key=value (not v)`.
fn difference(want: &BTreeMap<String, String>, got: &BTreeMap<String, String>) -> String {
    let mut d = Vec::new();
    for (k, v) in want {
        match got.get(k) {
            None => d.push(format!("-{k}")),
            Some(g) if g != v => d.push(format!("{k}={g} (not {v})")),
            _ => {}
        }
    }
    for (k, g) in got.iter().filter(|(k, _)| !want.contains_key(*k)) {
        d.push(format!("+{k}={g}"));
    }
    d.join(" ")
}

/// The most of `times` within any `window`.
pub fn peak_within(times: &[Instant], window: Duration) -> usize {
    let mut t = times.to_vec();
    t.sort();
    let mut peak = 0;
    let mut j = 0;
    for i in 0..t.len() {
        while t[i].duration_since(t[j]) >= window {
            j += 1;
        }
        peak = peak.max(i - j + 1);
    }
    peak
}

/// Runs the soak: `faulty` of faults, then the recovery check.
pub fn run(seed: u64, faulty: Duration) -> Report {
    eprintln!("invariant soak: seed {seed} (SOAK_SEED={seed} replays it)");
    let mut rng = Rng::new(seed);
    let mut report = Report {
        seed,
        ..Report::default()
    };
    let kube =
        KubeApiServer::with_policy(&crate::kube::shipped_node_policy(Some("health-condition")));
    kube.create_node(NODE, &[("kubernetes.io/os", "linux")]);
    // NVIDIA's DRA driver publishes the node's GPUs (the agent watches its slices through the
    // proxy's faults too): `labels --dra` with the same slice is what the Node must carry.
    let slice = common::dell_dra_slice(NODE);
    let a = kube.apply(
        &Who::admin(),
        "gpu.nvidia.com",
        &crate::kube::object_path(&slice),
        &slice,
        true,
    );
    assert!(a.ok(), "{}", a.body);
    let proxy = FakeApiServer::proxy_to(&kube.kubeconfig(&Who::agent(NODE)));
    let inputs = Inputs::new();
    let kubeconfig = apiserver::write_kubeconfig(inputs.dir.path(), &proxy.url());
    let lib = common::fake_nvml_lib("nvidia_ml");
    let config = inputs.config();
    let extra = [
        "--rules",
        inputs.rules.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--nvml-lib",
        lib.to_str().unwrap(),
    ];
    let mut args = apiserver::run_args(&kubeconfig, NODE, &extra);
    args.retain(|a| a != "--no-nvml" && a != "--no-default-rules" && a != "--no-dra");
    let log = std::env::var("SOAK_LOG").unwrap_or_else(|_| "info".into());
    let env = [
        ("FAKE_NVML_FIXTURE", inputs.nvml.to_str().unwrap()),
        ("GPU_LABELER_LOG", log.as_str()),
        ("GPU_LABELER_PUBLISH_TAINTS", "true"),
        ("GPU_LABELER_PUBLISH_CONDITION", "true"),
    ];

    // What a healthy node gets: `labels` on the same inputs.
    let mut labels_args: Vec<String> = vec!["labels".into(), "-o".into(), "json".into()];
    labels_args.extend(
        apiserver::fixture_args()
            .into_iter()
            .filter(|a| a != "--no-nvml"),
    );
    labels_args.extend(extra.iter().map(|s| s.to_string()));
    let dra_file = inputs.dir.path().join("dra.json");
    std::fs::write(
        &dra_file,
        serde_json::json!({"kind": "List", "items": [slice]}).to_string(),
    )
    .unwrap();
    labels_args.extend([
        "--dra".to_string(),
        dra_file.display().to_string(),
        "--node-name".to_string(),
        NODE.to_string(),
    ]);
    let ours = common::labels_of(common::run_env(&labels_args, &env).ok());
    let mut want = ours.clone();
    want.insert("kubernetes.io/os".into(), "linux".into());

    let mut agent = Agent::start(&args, &env);
    let health = agent.health_addr();
    let started = Instant::now();
    let right_now = |state: &(BTreeMap<String, String>, Vec<String>, Option<String>)| {
        state.0 == want && state.1 == [OUR_TAINT] && state.2.as_deref() == Some(HEALTHY)
    };
    let first = apiserver::wait_for(Duration::from_secs(30), || {
        right_now(&node_state(&kube)).then_some(())
    });
    if first.is_none() {
        report.violations.push(format!(
            "never labelled: {:#?}\n{}",
            kube.labels(NODE),
            agent.log_text()
        ));
        return report;
    }

    // The checker, every 250 ms until told to stop.
    let stop = AtomicBool::new(false);
    let flap = Mutex::new(Flap::default());
    let removed: Mutex<Option<String>> = Mutex::new(None);
    let drifted: Mutex<Option<&'static str>> = Mutex::new(None);
    let found = Mutex::new((Vec::<String>::new(), 0u64, Duration::ZERO, 0usize));
    {
        let pid = agent.pid();
        let kube = &kube;
        let (stop, removed, found, want, flap) = (&stop, &removed, &found, &want, &flap);
        let drifted = &drifted;
        let inputs = &inputs;
        std::thread::scope(|scope| {
            let flapping = scope.spawn(move || flapper(inputs, flap, stop));
            let handle = scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let at = started.elapsed().as_secs_f64();
                    let (code, took) = probe(health);
                    let rss = rss_kib(pid);
                    let (labels, taints, condition) = node_state(kube);
                    let gone = removed.lock().unwrap().clone();
                    let drift = *drifted.lock().unwrap();
                    let may_be_lost = flap.lock().unwrap().may_be_lost(Instant::now());
                    let mut f = found.lock().unwrap();
                    f.3 += 1;
                    f.2 = f.2.max(took);
                    f.1 = f.1.max(rss);
                    if code != 200 || took > Duration::from_secs(1) {
                        f.0.push(format!("{at:.1}s: /healthz {code} after {took:?}"));
                    }
                    if rss > LIMIT_KIB {
                        f.0.push(format!("{at:.1}s: RSS {rss} KiB"));
                    }
                    for (k, v) in want {
                        let lost = LOST_HEALTH.iter().find(|(l, _)| l == k).map(|(_, v)| *v);
                        match labels.get(k) {
                            Some(got) if may_be_lost && Some(got.as_str()) == lost => {}
                            Some(got) if got != v => {
                                f.0.push(format!("{at:.1}s: {k}={got}, not {v}"))
                            }
                            None if gone.as_deref() != Some(k.as_str()) => {
                                f.0.push(format!("{at:.1}s: {k} missing"))
                            }
                            _ => {}
                        }
                    }
                    for k in labels.keys().filter(|k| !want.contains_key(*k)) {
                        f.0.push(format!(
                            "{at:.1}s: {k}={} is not a label of ours",
                            labels[k]
                        ));
                    }
                    if taints != [OUR_TAINT] && drift != Some("taint") {
                        f.0.push(format!("{at:.1}s: taints {taints:?}, not [{OUR_TAINT}]"));
                    }
                    let condition_ok = condition.as_deref() == Some(HEALTHY)
                        || (may_be_lost && condition.as_deref() == Some(ONE_LOST));
                    if !condition_ok && drift != Some("condition") {
                        f.0.push(format!("{at:.1}s: GPUHealthy {condition:?}, not {HEALTHY}"));
                    }
                    drop(f);
                    std::thread::sleep(Duration::from_millis(250));
                }
            });
            // The faults, epoch after epoch.
            let mut flood = Vec::new();
            let mut held_back = Duration::ZERO;
            let until = Instant::now() + faulty;
            while Instant::now() < until {
                // A removed label counts as restored once it is back.
                {
                    let mut r = removed.lock().unwrap();
                    if r.as_ref()
                        .is_some_and(|k| kube.labels(NODE).get(k) == want.get(k))
                    {
                        *r = None;
                    }
                }
                let sides = Sides {
                    proxy: &proxy,
                    kube,
                    inputs,
                    health,
                    ours: &ours,
                    flap,
                };
                // A changed taint or condition counts as restored once the Node is right again.
                {
                    let (_, taints, condition) = node_state(kube);
                    let may_be_lost = flap.lock().unwrap().may_be_lost(Instant::now());
                    let mut d = drifted.lock().unwrap();
                    let back = match *d {
                        Some("taint") => taints == [OUR_TAINT],
                        Some(_) => {
                            condition.as_deref() == Some(HEALTHY)
                                || (may_be_lost && condition.as_deref() == Some(ONE_LOST))
                        }
                        None => false,
                    };
                    if back {
                        *d = None;
                    }
                }
                let said;
                (said, held_back) = draw_faults(&mut rng, &sides, &mut flood, removed, drifted);
                report
                    .epochs
                    .push(format!("{:.1}s: {said}", started.elapsed().as_secs_f64()));
                std::thread::sleep(Duration::from_millis(1000 + rng.below(3000)));
            }
            // The faults stop.
            proxy.set_faults(Faults::default());
            inputs.set_nvml(None);
            flap.lock().unwrap().on = false;
            inputs.set_extra_rules(None);
            flood.clear();
            let stopped = Instant::now();
            // A GPU lost lately: its hold ends first.
            let held_until = flap
                .lock()
                .unwrap()
                .last_lost
                .map(|t| t + LOST_SEEN + CLEAR_AFTER);
            // Answers the proxy held back (slow ones) are still on their way: the faults have
            // stopped when they have arrived.
            let stopped = stopped + held_back;
            let from = held_until.map_or(stopped, |h| h.max(stopped));
            let right = apiserver::wait_for(Duration::from_secs(30), || {
                right_now(&node_state(kube)).then(|| Instant::now().saturating_duration_since(from))
            });
            report.recovered_after = right;
            match right {
                Some(d) if d <= 2 * INTERVAL => {}
                _ => {
                    let (labels, taints, condition) = node_state(kube);
                    report.violations.push(format!(
                        "the right labels, taint and condition {} after the faults stopped (2 intervals allowed): {} taints {taints:?} GPUHealthy {condition:?}",
                        right.map_or("never".into(), |d| format!("{d:?}")),
                        difference(want, &labels)
                    ))
                }
            }
            // The last seconds checked too, then the checker stops.
            std::thread::sleep(Duration::from_secs(1));
            stop.store(true, Ordering::Relaxed);
            handle.join().unwrap();
            flapping.join().unwrap();
        });
    }
    let (violations, rss, slowest, probes) = std::mem::take(&mut *found.lock().unwrap());
    report.violations.extend(violations);
    report.max_rss_kib = rss;
    report.slowest_probe = slowest;
    report.probes = probes;
    // Every request, the Node watch's included.
    let times: Vec<Instant> = proxy
        .requests()
        .iter()
        .chain(&proxy.watches())
        .map(|r| r.at)
        .collect();
    report.requests = times.len();
    report.peak_requests_10s = peak_within(&times, Duration::from_secs(10));
    if report.peak_requests_10s > MAX_REQUESTS_10S {
        report.violations.push(format!(
            "{} API requests within 10 s (at most {MAX_REQUESTS_10S})",
            report.peak_requests_10s
        ));
    }
    if !agent.child_alive() {
        report.violations.push("the agent died".into());
    }
    if !report.violations.is_empty() {
        report
            .violations
            .push(format!("epochs:\n{}", report.epochs.join("\n")));
        report
            .violations
            .push(format!("log:\n{}", agent.log_text()));
    }
    report
}
