//! Fleet simulation (issue 6): many nodes' agents against the fake API server of
//! `tests/apiserver`, to measure what a fleet costs the API server.
//!
//! Each simulated agent is the daemon's cycle without the process around it: the same
//! `labels::evaluate_node` over a node's features and rules, the same `NodeSink` (server-side
//! apply, read once after a start, no write when nothing changed), the same first-cycle random
//! offset and backoff. All agents run as tasks in one tokio runtime; the server runs on its own
//! thread over real HTTP on 127.0.0.1.
//!
//! Time is scaled: the interval is `FLEET_INTERVAL_MS` (default 2,000 ms) standing for the
//! default 60 s, so requests per interval are requests per minute at the default interval.
//! Phases: cold start (every agent's first cycle), steady state, a rules change, and a restart
//! of every agent with nothing changed. Prints a table; the README quotes it.
//!
//! `cargo bench --bench fleet` runs 1,000 nodes (`FLEET_NODES`). Under `cargo test --benches`
//! (no `--bench` argument) it runs a 50-node smoke version and checks the targets.

#[path = "../tests/apiserver/mod.rs"]
mod apiserver;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use apiserver::{FakeApiServer, Recorded};
use gpu_labeler::config::Config;
use gpu_labeler::daemon::{BACKOFF_BASE, BACKOFF_CAP, Backoff, random_fraction, request_timeout};
use gpu_labeler::discover::nvml::{NvmlChoice, NvmlLibrary};
use gpu_labeler::discover::{DiscoveryOptions, discover};
use gpu_labeler::features::FeatureSet;
use gpu_labeler::labels::evaluate_node;
use gpu_labeler::publish::node::NodeSink;
use gpu_labeler::rules::{RuleSet, RuleSource};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rules(text: String) -> Arc<RuleSet> {
    let (set, errors) = RuleSet::load(vec![RuleSource {
        name: "fleet-rules.yaml".into(),
        text,
    }]);
    assert!(errors.is_empty(), "{errors:?}");
    Arc::new(set)
}

fn fixture_features() -> FeatureSet {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let opts = DiscoveryOptions {
        sysfs_root: f.join("sysfs").join(apiserver::MACHINE),
        proc_root: f.join("proc").join(apiserver::MACHINE),
        pci_ids: Some(f.join("pci.ids")),
        config: Config::default(),
    };
    discover(&opts, &mut NvmlLibrary::new(NvmlChoice::Disabled)).features
}

/// What every agent shares: the node's features (all nodes alike), config and current rules.
struct Fleet {
    features: FeatureSet,
    config: Config,
    rules: RwLock<Arc<RuleSet>>,
    interval: Duration,
}

/// One node's agent: first cycle at a random offset, then every interval; backoff on errors.
async fn agent(fleet: Arc<Fleet>, client: kube::Client, node: String) {
    let mut sink = NodeSink::new(client, node, request_timeout(fleet.interval));
    let mut backoff = Backoff::new(BACKOFF_BASE, BACKOFF_CAP);
    tokio::time::sleep(fleet.interval.mul_f64(random_fraction())).await;
    loop {
        let rules = fleet.rules.read().expect("rules").clone();
        let evaluated = evaluate_node(&fleet.features, &fleet.config, &rules);
        let wait = match sink.publish(&evaluated.output, false).await {
            Ok(_) => {
                backoff.reset();
                fleet.interval
            }
            Err(_) => backoff.next_delay(),
        };
        tokio::time::sleep(wait).await;
    }
}

fn client(url: &str) -> kube::Client {
    let config = kube::Config::new(url.parse().expect("url"));
    kube::Client::try_from(config).expect("client")
}

/// One client (connection pool) per 10 agents: realistic enough, within file limits. Built
/// before the clock starts (loading TLS roots is slow in a debug build).
fn clients(url: &str, nodes: usize) -> Vec<kube::Client> {
    (0..nodes.div_ceil(10)).map(|_| client(url)).collect()
}

fn spawn_all(
    set: &mut tokio::task::JoinSet<()>,
    fleet: &Arc<Fleet>,
    clients: &[kube::Client],
    nodes: usize,
) {
    for i in 0..nodes {
        set.spawn(agent(fleet.clone(), clients[i / 10].clone(), node_name(i)));
    }
}

fn node_name(i: usize) -> String {
    format!("node-{i:04}")
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    get: usize,
    patch: usize,
    other: usize,
}

fn count(reqs: &[Recorded]) -> Counts {
    let mut c = Counts::default();
    for r in reqs {
        match r.method.as_str() {
            "GET" => c.get += 1,
            "PATCH" => c.patch += 1,
            _ => c.other += 1,
        }
    }
    c
}

/// Per interval (= per minute at the default 60 s interval).
fn per_interval(c: Counts, intervals: f64) -> (f64, f64) {
    (c.get as f64 / intervals, c.patch as f64 / intervals)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let nodes = env_num("FLEET_NODES", if full { 1000 } else { 50 }) as usize;
    let interval = Duration::from_millis(env_num("FLEET_INTERVAL_MS", 2000));

    let server = FakeApiServer::start();
    for i in 0..nodes {
        server.add_node(&node_name(i), &[("kubernetes.io/os", "linux")]);
    }
    server.clear_requests();
    let rule = |names: &[&str]| {
        let pairs: Vec<(&str, &str)> = names.iter().map(|n| (*n, *n)).collect();
        apiserver::rule_file(&pairs)
    };
    let fleet = Arc::new(Fleet {
        features: fixture_features(),
        config: Config::default(),
        rules: RwLock::new(rules(rule(&["fleet.nvidia"]))),
        interval,
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let url = server.url();
    let mut rows: Vec<(String, f64, f64)> = Vec::new();

    let spread = rt.block_on(async {
        let mut agents = tokio::task::JoinSet::new();
        let pool = clients(&url, nodes);
        let start = Instant::now();
        spawn_all(&mut agents, &fleet, &pool[..], nodes);

        // Cold start: every agent's first cycle within the first interval.
        tokio::time::sleep(interval + interval / 2).await;
        let reqs = server.requests();
        let mut first: BTreeMap<&str, Instant> = BTreeMap::new();
        for r in &reqs {
            first.entry(r.path.as_str()).or_insert(r.at);
        }
        let mut tenths = [0usize; 10];
        for at in first.values() {
            let f = at.duration_since(start).as_secs_f64() / interval.as_secs_f64();
            tenths[((f * 10.0) as usize).min(9)] += 1;
        }
        let c = count(&reqs);
        rows.push((
            "cold start (first cycle)".into(),
            c.get as f64,
            c.patch as f64,
        ));

        // Steady state.
        server.clear_requests();
        let steady = 3.0;
        tokio::time::sleep(interval.mul_f64(steady)).await;
        let (g, p) = per_interval(count(&server.requests()), steady);
        rows.push(("steady state".into(), g, p));

        // A rules change reaches every node within one interval.
        server.clear_requests();
        *fleet.rules.write().expect("rules") = rules(rule(&["fleet.nvidia", "fleet.h100"]));
        tokio::time::sleep(interval + interval / 4).await;
        let c = count(&server.requests());
        rows.push((
            "rules change (one interval)".into(),
            c.get as f64,
            c.patch as f64,
        ));
        server.clear_requests();
        tokio::time::sleep(interval.mul_f64(2.0)).await;
        let (g, p) = per_interval(count(&server.requests()), 2.0);
        rows.push(("steady state after the change".into(), g, p));

        // Every agent restarted, nothing changed: one read each, no write.
        agents.abort_all();
        while agents.join_next().await.is_some() {}
        server.clear_requests();
        let pool = clients(&url, nodes);
        spawn_all(&mut agents, &fleet, &pool[..], nodes);
        tokio::time::sleep(interval + interval / 2).await;
        let c = count(&server.requests());
        rows.push((
            "restart, nothing changed".into(),
            c.get as f64,
            c.patch as f64,
        ));
        agents.abort_all();
        tenths
    });

    println!(
        "fleet: {nodes} nodes, interval {:?} standing for 60 s (per interval = per minute at 60 s)",
        interval
    );
    println!("{:<32} {:>10} {:>10}", "phase", "GET/min", "PATCH/min");
    for (phase, g, p) in &rows {
        println!("{phase:<32} {g:>10.1} {p:>10.1}");
    }
    println!("first cycles by tenth of the interval:");
    for (i, n) in spread.iter().enumerate() {
        println!(
            "  {:>3}-{:<3}% {:>5} {}",
            i * 10,
            (i + 1) * 10,
            n,
            "#".repeat(n * 50 / nodes.max(1))
        );
    }

    // The targets: no writes in steady state, one write per node for a change, no writes after
    // a restart, and no tenth of the interval with more than twice its share of first cycles.
    let by_phase: BTreeMap<&str, (f64, f64)> = rows
        .iter()
        .map(|(p, g, w)| (p.as_str(), (*g, *w)))
        .collect();
    let mut failed = Vec::new();
    if by_phase["steady state"].1 != 0.0 {
        failed.push("writes in steady state");
    }
    if by_phase["rules change (one interval)"].1 != nodes as f64 {
        failed.push("not exactly one write per node after a rules change");
    }
    if by_phase["steady state after the change"].1 != 0.0 {
        failed.push("writes after the change settled");
    }
    if by_phase["restart, nothing changed"] != (nodes as f64, 0.0) {
        failed.push("a restart did more than one read per node");
    }
    if nodes >= 200 && spread.iter().any(|&n| n > nodes / 5) {
        failed.push("first cycles bunched in one tenth of the interval");
    }
    if failed.is_empty() {
        println!("targets met");
    } else {
        eprintln!("targets missed: {}", failed.join("; "));
        std::process::exit(1);
    }
}
