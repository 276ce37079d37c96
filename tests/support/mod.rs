//! The test-support layer for the daemon's tests: a scenario is a [`Cluster`] (Kubernetes' own
//! API server under the shipped policy with the agent's Node made, optionally behind the fault
//! proxy) and an agent built by [`agent`] (rules, interval, fake NVML, config), checked with one
//! [`wait_labels`]. A test file lists scenarios instead of copying the last file's set-up.
//!
//! It stands on the two modules below it, which a test crate declares beside it:
//! `mod apiserver; mod kube; mod support;` (the fake server, the proxy and the agent process;
//! Kubernetes' own server).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::apiserver::{Agent, FakeApiServer, fixture_pci_labels, map, rule_file, run_args, union};
use crate::kube::{KubeApiServer, Who};

/// The agent's Node in every scenario.
pub const NODE: &str = "gpu-node-1";
/// How long a scenario waits for the agent to do what it must (each wait is bounded by it).
pub const WAIT: Duration = Duration::from_secs(20);

/// The kubelet's labels on [`NODE`] as [`Cluster::new`] registers it.
pub fn kubelet_labels() -> BTreeMap<String, String> {
    map(&[
        ("kubernetes.io/hostname", NODE),
        ("kubernetes.io/os", "linux"),
    ])
}

/// What a Node holds after the agent's first publish with `rules` (label names; see
/// [`crate::apiserver::rule_labels`]) on the Dell fixture: `others` (the labels it does not own)
/// plus NFD's PCI labels and the rules' labels.
pub fn published(others: &BTreeMap<String, String>, rules: &[&str]) -> BTreeMap<String, String> {
    union(&[
        others,
        &fixture_pci_labels(),
        &crate::apiserver::rule_labels(rules),
    ])
}

/// The fake API server (tests/apiserver) with [`NODE`] registered with the kubelet's `labels`.
pub fn fake_server(labels: &[(&str, &str)]) -> FakeApiServer {
    let server = FakeApiServer::start();
    server.add_node(NODE, labels);
    server
}

/// Anything that can say what labels a Node has now.
pub trait NodeLabels {
    fn node_labels(&self, node: &str) -> BTreeMap<String, String>;
}

impl NodeLabels for KubeApiServer {
    fn node_labels(&self, node: &str) -> BTreeMap<String, String> {
        self.labels(node)
    }
}

impl NodeLabels for FakeApiServer {
    fn node_labels(&self, node: &str) -> BTreeMap<String, String> {
        self.labels(node)
    }
}

impl NodeLabels for Cluster {
    fn node_labels(&self, node: &str) -> BTreeMap<String, String> {
        self.kube.labels(node)
    }
}

/// Waits up to [`WAIT`] until [`NODE`]'s labels are exactly `want`; panics with both maps and
/// the agent's log. Returns how long it took.
#[track_caller]
pub fn wait_labels(
    server: &impl NodeLabels,
    agent: &Agent,
    want: &BTreeMap<String, String>,
) -> Duration {
    wait_labels_of(server, NODE, WAIT, agent, want)
}

/// [`wait_labels`] for any node, within `within`.
#[track_caller]
pub fn wait_labels_of(
    server: &impl NodeLabels,
    node: &str,
    within: Duration,
    agent: &Agent,
    want: &BTreeMap<String, String>,
) -> Duration {
    let started = Instant::now();
    let ok =
        crate::apiserver::wait_for(within, || (server.node_labels(node) == *want).then_some(()));
    assert!(
        ok.is_some(),
        "labels of {node} never became {want:#?}\nthey are {:#?}\nlog:\n{}",
        server.node_labels(node),
        agent.log_text()
    );
    started.elapsed()
}

/// Waits up to [`WAIT`] until the agent has completed a cycle (`/readyz` answers 200).
#[track_caller]
pub fn wait_ready(agent: &Agent) {
    let addr = agent.health_addr();
    let ok = crate::apiserver::wait_for(WAIT, || {
        (crate::apiserver::get(addr, "/readyz").0 == 200).then_some(())
    });
    assert!(ok.is_some(), "never ready; log:\n{}", agent.log_text());
}

/// A `kB` field of the agent's `/proc/PID/status` (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(agent: &Agent, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

/// Kubernetes' own test API server under the shipped Node policy, with [`NODE`] registered by
/// the kubelet, and optionally the fault proxy the agent talks to instead (forwarding as the
/// agent's node-bound token). Derefs to the real server for reads and admin requests.
pub struct Cluster {
    pub kube: KubeApiServer,
    proxy: Option<FakeApiServer>,
    /// The agent's Node ([`NODE`] unless [`Cluster::named`]).
    pub node: String,
}

impl Cluster {
    /// The shipped policy and [`NODE`] with [`kubelet_labels`].
    pub fn new() -> Cluster {
        let labels = kubelet_labels();
        let labels: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Cluster::with_node(&labels)
    }

    /// The shipped policy and [`NODE`] with the kubelet's `labels`.
    pub fn with_node(labels: &[(&str, &str)]) -> Cluster {
        Cluster::named(NODE, labels)
    }

    /// The shipped policy and the Node `node` with the kubelet's `labels`.
    pub fn named(node: &str, labels: &[(&str, &str)]) -> Cluster {
        let kube = KubeApiServer::with_shipped_node_policy();
        kube.create_node(node, labels);
        Cluster {
            kube,
            proxy: None,
            node: node.to_string(),
        }
    }

    /// The fault proxy in front of the server, on `port` (0: any); the agent's kubeconfig
    /// ([`Cluster::kubeconfig`]) then points at the proxy.
    pub fn proxied_on(mut self, port: u16) -> Cluster {
        let upstream = self.kube.kubeconfig(&Who::agent(&self.node));
        self.proxy = Some(FakeApiServer::proxy_on(port, &upstream));
        self
    }

    pub fn proxied(self) -> Cluster {
        self.proxied_on(0)
    }

    /// The fault proxy (panics on a cluster without one).
    pub fn proxy(&self) -> &FakeApiServer {
        self.proxy.as_ref().expect("a proxied cluster")
    }

    /// Another controller's merge patch of the Node's labels as `manager` (a `None` value
    /// removes the label).
    pub fn merge_patch_labels(&self, manager: &str, labels: &[(&str, Option<&str>)]) {
        let labels: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        self.kube.admin_patch(
            manager,
            &format!("/api/v1/nodes/{}", self.node),
            &json!({"metadata": {"labels": labels}}),
        );
    }

    /// A kubeconfig for the agent, written into `dir`: the proxy's URL where there is one,
    /// else the real server as the agent's node-bound service account.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        match &self.proxy {
            Some(p) => crate::apiserver::write_kubeconfig(dir, &p.url()),
            None => self.kube.kubeconfig(&Who::agent(&self.node)),
        }
    }
}

impl Deref for Cluster {
    type Target = KubeApiServer;
    fn deref(&self) -> &KubeApiServer {
        &self.kube
    }
}

/// An agent to start: `gpu-labeler run` on the Dell fixture for [`NODE`] (see
/// [`crate::apiserver::run_args`]), its files in a temporary directory it owns.
pub struct AgentSpec {
    /// Shared with each agent started, so that its files outlive a spec dropped at once.
    dir: Arc<tempfile::TempDir>,
    rules: Option<PathBuf>,
    /// The labels its rules give (each rule labels NVIDIA nodes).
    rule_labels: Vec<String>,
    interval: Option<String>,
    nvml: Option<(PathBuf, PathBuf)>,
    default_rules: bool,
    dra: bool,
    node: String,
    sysfs_root: Option<PathBuf>,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

/// A new [`AgentSpec`]: no rules, 1 s interval, no NVML, no config.
pub fn agent() -> AgentSpec {
    AgentSpec {
        dir: Arc::new(tempfile::tempdir().unwrap()),
        rules: None,
        rule_labels: Vec::new(),
        interval: None,
        nvml: None,
        default_rules: false,
        dra: false,
        node: NODE.to_string(),
        sysfs_root: None,
        args: Vec::new(),
        env: Vec::new(),
    }
}

impl AgentSpec {
    /// `--rules` with a file of `(rule name, label name)` rules (see [`rule_file`]).
    pub fn rules(mut self, rules: &[(&str, &str)]) -> AgentSpec {
        let path = self.dir.path().join("rules.yaml");
        std::fs::write(&path, rule_file(rules)).unwrap();
        self.rules = Some(path);
        self.rule_labels = rules.iter().map(|(_, l)| l.to_string()).collect();
        self
    }

    /// `--interval` (the default is 1 s).
    pub fn interval(mut self, interval: &str) -> AgentSpec {
        self.interval = Some(interval.to_string());
        self
    }

    /// The fake NVML library `lib` (see `common::fake_nvml_lib`) answering from `fixture`,
    /// instead of `--no-nvml`.
    pub fn fake_nvml(mut self, lib: &Path, fixture: &Path) -> AgentSpec {
        self.nvml = Some((lib.to_path_buf(), fixture.to_path_buf()));
        self
    }

    /// The shipped rules too (without them, `--no-default-rules`: only PCI labels and the
    /// spec's own rules).
    pub fn default_rules(mut self) -> AgentSpec {
        self.default_rules = true;
        self
    }

    /// The agent's Node (`--node-name`; [`NODE`] by default).
    pub fn node(mut self, node: &str) -> AgentSpec {
        self.node = node.to_string();
        self
    }

    /// The DRA source on (without it, `--no-dra`: most tests count the Node's requests alone).
    pub fn dra(mut self) -> AgentSpec {
        self.dra = true;
        self
    }

    /// `--sysfs-root` (the Dell fixture's by default).
    pub fn sysfs_root(mut self, root: &Path) -> AgentSpec {
        self.sysfs_root = Some(root.to_path_buf());
        self
    }

    /// `--config` with a file of `text`.
    pub fn config(self, text: &str) -> AgentSpec {
        let path = self.config_path();
        std::fs::write(&path, text).unwrap();
        self.args(&["--config", path.to_str().unwrap()])
    }

    /// The file of [`AgentSpec::config`] (a test may rewrite it under the running agent).
    pub fn config_path(&self) -> PathBuf {
        self.dir().join("config.yaml")
    }

    /// More arguments, after the others.
    pub fn args(mut self, args: &[&str]) -> AgentSpec {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// One more variable in the agent's (otherwise clean) environment.
    pub fn env(mut self, key: &str, value: &str) -> AgentSpec {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// The directory the spec's files are in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The rule file (panics without [`AgentSpec::rules`]).
    pub fn rules_path(&self) -> &Path {
        self.rules.as_deref().expect("an agent with rules")
    }

    /// Rewrites the rule file with `rules` (a running agent reloads it).
    pub fn rewrite_rules(&self, rules: &[(&str, &str)]) {
        std::fs::write(self.rules_path(), rule_file(rules)).unwrap();
    }

    /// The command line for an agent with `kubeconfig`.
    pub fn command_line(&self, kubeconfig: &Path) -> Vec<String> {
        let mut args = run_args(kubeconfig, &self.node, &self.own_args());
        self.edit(&mut args);
        args
    }

    /// `labels -o json` on the spec's inputs (discovery, rules, NVML, config, arguments): what
    /// the agent would publish.
    pub fn labels_command(&self) -> Vec<String> {
        let mut args = vec!["labels".to_string(), "-o".into(), "json".into()];
        args.extend(crate::apiserver::fixture_args());
        args.push("--no-default-rules".into());
        args.extend(self.own_args().iter().map(|a| a.to_string()));
        self.edit(&mut args);
        args
    }

    fn own_args(&self) -> Vec<&str> {
        let mut extra: Vec<&str> = Vec::new();
        if let Some(r) = &self.rules {
            extra.extend(["--rules", r.to_str().unwrap()]);
        }
        if let Some((lib, _)) = &self.nvml {
            extra.extend(["--nvml-lib", lib.to_str().unwrap()]);
        }
        extra.extend(self.args.iter().map(String::as_str));
        extra
    }

    /// The spec's changes to the fixture's flags.
    fn edit(&self, args: &mut Vec<String>) {
        if self.nvml.is_some() {
            args.retain(|a| a != "--no-nvml");
        }
        if self.default_rules {
            args.retain(|a| a != "--no-default-rules");
        }
        if self.dra {
            args.retain(|a| a != "--no-dra");
        }
        if let Some(root) = &self.sysfs_root {
            let i = args.iter().position(|a| a == "--sysfs-root").unwrap();
            args[i + 1] = root.display().to_string();
        }
        if let Some(interval) = &self.interval
            && let Some(i) = args.iter().position(|a| a == "--interval")
        {
            args[i + 1] = interval.clone();
        }
    }

    /// The agent's environment.
    pub fn environment(&self) -> Vec<(&str, &str)> {
        let mut env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some((_, fixture)) = &self.nvml {
            env.push(("FAKE_NVML_FIXTURE", fixture.to_str().unwrap()));
        }
        env
    }

    /// What the agent publishes on the Dell fixture (NFD's PCI labels and its rules' labels)
    /// beside `others` (the labels it does not own); see [`published`].
    pub fn expected(&self, others: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let names: Vec<&str> = self.rule_labels.iter().map(String::as_str).collect();
        published(others, &names)
    }

    /// Starts the agent against `cluster` and waits until [`NODE`] has [`AgentSpec::expected`]
    /// beside `others`.
    #[track_caller]
    pub fn start_labelled(&self, cluster: &Cluster, others: &BTreeMap<String, String>) -> Agent {
        let agent = self.start(cluster);
        wait_labels(cluster, &agent, &self.expected(others));
        agent
    }

    /// Starts the agent against `cluster` (through its proxy where it has one).
    pub fn start(&self, cluster: &Cluster) -> Agent {
        self.start_with(&cluster.kubeconfig(self.dir()))
    }

    /// Starts the agent against the fake server `server`.
    pub fn start_fake(&self, server: &FakeApiServer) -> Agent {
        self.start_at(&server.url())
    }

    /// Starts the agent against the API server at `url` (which may not answer yet).
    pub fn start_at(&self, url: &str) -> Agent {
        let kubeconfig = crate::apiserver::write_kubeconfig(self.dir(), url);
        self.start_with(&kubeconfig)
    }

    /// Starts the agent with no API server: for `--sink stdout` or `features-file` (in
    /// [`AgentSpec::args`]).
    pub fn start_local(&self) -> Agent {
        let mut args = self.command_line(Path::new("unused"));
        let at = args.iter().position(|a| a == "--kubeconfig").unwrap();
        // `--kubeconfig K --node-name N`
        args.drain(at..at + 4);
        let mut agent = Agent::start(&args, &self.environment());
        agent.keep = Some(self.dir.clone());
        agent
    }

    /// Starts the agent with `kubeconfig`.
    pub fn start_with(&self, kubeconfig: &Path) -> Agent {
        let mut agent = Agent::start(&self.command_line(kubeconfig), &self.environment());
        agent.keep = Some(self.dir.clone());
        agent
    }
}
