//! `diff --template` over a large node group (issue 48's target: 5,000 nodes in under 1 s): the
//! Dell 8x H100's template (NVML from the fake library's h100-8x capture, the nvidia-gfd
//! profile) against 5,000 Nodes as `kubectl get nodes -o json` lists them, each with the
//! template's labels, a kubelet's labels and an allocatable; one node in 100 came up with 7
//! GPUs. The whole command, wall time, and the in-process part (read the nodes, diff).
//!
//! `cargo build -p fake-nvml --release && cargo bench --bench template` (plain `fn main`);
//! `BENCH_NODES` (default 5,000), `BENCH_RUNS` (default 11). Under `cargo test` (unoptimised) a
//! few runs only prove it works.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpu_labeler::nodetemplate::{Template, diff};
use gpu_labeler::scheduling::objects::read_nodes;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");
/// Issue 48's target for 5,000 nodes.
const TARGET: Duration = Duration::from_secs(1);

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn template(dir: &Path) -> (std::path::PathBuf, Template) {
    let config = dir.join("gfd.yaml");
    std::fs::write(&config, "profiles: [nvidia-gfd]\n").unwrap();
    let out = Command::new(BIN)
        .args(["template", "-o", "json", "--sysfs-root"])
        .arg(common::sysfs_fixture("dell-xe9680-8xh100"))
        .arg("--proc-root")
        .arg(common::proc_fixture("dell-xe9680-8xh100"))
        .arg("--nvml-lib")
        .arg(common::fake_nvml_lib("nvidia_ml"))
        .arg("--config")
        .arg(&config)
        .env("FAKE_NVML_FIXTURE", common::nvml_fixture("h100-8x"))
        .stderr(Stdio::null())
        .output()
        .expect("gpu-labeler template");
    assert!(out.status.success());
    let path = dir.join("template.json");
    std::fs::write(&path, &out.stdout).unwrap();
    let t = serde_json::from_slice(&out.stdout).unwrap();
    (path, t)
}

/// `n` Nodes of the group; every 100th has 7 GPUs.
fn nodes(t: &Template, n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|i| {
            let name = format!("gpu-node-{i:05}");
            let mut labels: BTreeMap<String, String> = t.labels.clone();
            labels.insert("kubernetes.io/hostname".into(), name.clone());
            labels.insert("kubernetes.io/arch".into(), "amd64".into());
            labels.insert(
                "node.kubernetes.io/instance-type".into(),
                "p5.48xlarge".into(),
            );
            labels.insert("topology.kubernetes.io/zone".into(), "us-east-1a".into());
            let mut alloc = json!({"cpu": "191450m", "memory": "2011434904Ki", "pods": "110"});
            for (k, v) in &t.resources {
                alloc[k] = json!(v);
            }
            if i % 100 == 99 {
                labels.insert("nvidia.com/gpu.count".into(), "7".into());
                alloc["nvidia.com/gpu"] = json!("7");
            }
            json!({"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": name, "labels": labels},
                   "spec": {"providerID": format!("aws:///us-east-1a/i-{i:017x}")},
                   "status": {"allocatable": alloc.clone(), "capacity": alloc}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

fn main() {
    let n: usize = std::env::var("BENCH_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 3 } else { 11 });
    let dir = tempfile::tempdir().unwrap();
    let (template_file, t) = template(dir.path());
    let list = nodes(&t, n);
    let text = list.to_string();
    let nodes_file = dir.path().join("nodes.json");
    std::fs::write(&nodes_file, &text).unwrap();

    // In process: read the nodes, diff them.
    let (mut read, mut compare) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = Instant::now();
        let nodes = read_nodes("nodes.json", &text).expect("the nodes read");
        read.push(start.elapsed());
        let start = Instant::now();
        let d = diff::diff(&t, &nodes);
        compare.push(start.elapsed());
        assert_eq!(
            d.iter().filter(|x| !x.differences.is_empty()).count(),
            n / 100
        );
    }
    println!(
        "diff --template in process ({n} nodes, {} labels each, {:.1} MB, {runs} runs, median): read {:.2?}, diff {:.2?}",
        t.labels.len() + 4,
        text.len() as f64 / 1e6,
        median(read),
        median(compare)
    );

    // The whole command.
    let mut wall = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let status = Command::new(BIN)
            .args(["diff", "-o", "json", "--template"])
            .arg(&template_file)
            .arg("--nodes")
            .arg(&nodes_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("gpu-labeler diff");
        wall.push(start.elapsed());
        assert_eq!(status.code(), Some(4), "some nodes differ");
    }
    let m = median(wall);
    println!(
        "gpu-labeler diff --template --nodes ({n} nodes, {runs} runs, median): {m:.2?} (target {TARGET:?}: {})",
        if m < TARGET { "met" } else { "MISSED" }
    );
}
