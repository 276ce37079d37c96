//! Relabel latency (issue 17): `gpu-labeler run --interval 60s` against the test API server of
//! `tests/apiserver`, on the Dell 8x H100 fixture; the rules are a kubelet-style ConfigMap
//! directory. `EVENTS_CHANGES` times (default 40; 3 under `cargo test --benches`), the rules are
//! swapped to a new version (`..data` renamed over) and the time until the Node carries the new
//! label is measured by polling the server every 5 ms. Prints p50, p95 and max, and the writes
//! made (one per change is the target: a swap is one relabel).
//!
//! The agent runs with `publish.spread: 0s`: this measures how fast one node relabels; the
//! spread a fleet adds on purpose is the fleet bench's.
//!
//! Then time to first labels: a node that just joined (nothing of ours on it, NVML through the
//! fake library on the 8x H100 fixture, the built-in rules) and `gpu-labeler run` started on
//! it, `EVENTS_STARTS` times (default 10; 2 under `cargo test --benches`): the time from the
//! process's start until the Node carries NVML's `gpu.memory`. Target: 3 s.
//!
//! `cargo bench --bench events`.

#[path = "../tests/apiserver/mod.rs"]
mod apiserver;
#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use apiserver::{Agent, FakeApiServer, write_kubeconfig};

const NODE: &str = "events-node";

fn swap(dir: &Path, version: u32, label: &str) {
    let v = format!("..v{version}");
    std::fs::create_dir(dir.join(&v)).unwrap();
    std::fs::write(
        dir.join(&v).join("rules.yaml"),
        apiserver::rule_file(&[("nvidia", label)]),
    )
    .unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(&v, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    if version > 1 {
        let _ = std::fs::remove_dir_all(dir.join(format!("..v{}", version - 1)));
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let changes: u32 = if full {
        std::env::var("EVENTS_CHANGES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(40)
    } else {
        3
    };
    let server = FakeApiServer::start();
    server.add_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &server.url());
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).unwrap();
    swap(&rules, 1, "v1");
    std::os::unix::fs::symlink("..data/rules.yaml", rules.join("rules.yaml")).unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "publish: {spread: 0s}\n").unwrap();
    let mut args = apiserver::run_args(
        &kubeconfig,
        NODE,
        &[
            "--rules",
            rules.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let i = args.iter().position(|a| a == "1s").unwrap();
    args[i] = "60s".into();
    let agent = Agent::start(&args, &[]);
    agent.wait_log("every 60s", Duration::from_secs(30));
    let key = |v: u32| format!("feature.node.kubernetes.io/v{v}");
    let mut took = Vec::new();
    server.clear_requests();
    for v in 2..=changes + 1 {
        // More than the 1 s spacing apart: each change is its own relabel.
        std::thread::sleep(Duration::from_millis(1200));
        let t = Instant::now();
        swap(&rules, v, &format!("v{v}"));
        let seen = loop {
            if server.labels(NODE).contains_key(&key(v)) {
                break t.elapsed();
            }
            if t.elapsed() > Duration::from_secs(30) {
                panic!("v{v} never published\n{}", agent.log_text());
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        took.push(seen);
    }
    // The agent's first cycle, at its start, writes v1, which is not a relabel.
    let writes = apiserver::writes(&server.requests())
        .iter()
        .filter(|r| !r.body.contains(&format!("\"{}\"", key(1))))
        .count();
    took.sort();
    let p = |q: f64| took[((took.len() as f64 * q).ceil() as usize).clamp(1, took.len()) - 1];
    println!(
        "relabel after a ConfigMap swap, {} changes at a 60 s interval: p50 {:.0} ms, p95 {:.0} ms, max {:.0} ms; {writes} writes",
        took.len(),
        p(0.5).as_secs_f64() * 1000.0,
        p(0.95).as_secs_f64() * 1000.0,
        took.last().unwrap().as_secs_f64() * 1000.0
    );
    let mut failed = Vec::new();
    if full && p(0.95) > Duration::from_secs(2) {
        failed.push(format!("p95 {:?} (target 2 s)", p(0.95)));
    }
    drop(agent);

    let starts: u32 = if full {
        std::env::var("EVENTS_STARTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10)
    } else {
        2
    };
    let mut first = first_labels(starts);
    first.sort();
    let max = *first.last().unwrap();
    println!(
        "first labels of a new node (NVML included), {starts} starts: p50 {:.0} ms, max {:.0} ms",
        first[first.len() / 2].as_secs_f64() * 1000.0,
        max.as_secs_f64() * 1000.0
    );
    if max > Duration::from_secs(3) {
        failed.push(format!("first labels after {max:?} (target 3 s)"));
    }
    if writes as u32 != changes {
        failed.push(format!("{writes} writes for {changes} changes"));
    }
    if !failed.is_empty() {
        eprintln!("events targets missed: {}", failed.join("; "));
        std::process::exit(1);
    }
}

/// From the agent's start to NVML's `gpu.memory` on a Node that has none of our labels, each
/// run a fresh Node and a fresh process.
fn first_labels(runs: u32) -> Vec<Duration> {
    let server = FakeApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &server.url());
    let lib = common::fake_nvml_lib("nvidia_ml");
    let fixture = common::nvml_fixture("h100-8x");
    (0..runs)
        .map(|i| {
            let node = format!("new-node-{i}");
            server.add_node(&node, &[("kubernetes.io/hostname", &node)]);
            let mut args: Vec<String> = apiserver::run_args(&kubeconfig, &node, &[])
                .into_iter()
                .filter(|a| a != "--no-nvml" && a != "--no-default-rules")
                .collect();
            let at = args.iter().position(|a| a == "1s").unwrap();
            args[at] = "60s".into();
            args.extend(["--nvml-lib".to_string(), lib.display().to_string()]);
            let t = Instant::now();
            let agent = Agent::start(&args, &[("FAKE_NVML_FIXTURE", fixture.to_str().unwrap())]);
            loop {
                if server
                    .labels(&node)
                    .contains_key("feature.node.kubernetes.io/gpu.memory")
                {
                    break t.elapsed();
                }
                if t.elapsed() > Duration::from_secs(30) {
                    panic!("{node} never labelled\n{}", agent.log_text());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
        .collect()
}
