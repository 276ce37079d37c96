//! `match` with DRA claims over a large fleet (issue 51): 1,000 nodes of 8 H100s each (the
//! ResourceSlice of tests/fixtures/dra/dell-xe9680-8xh100.json on every node, NVIDIA's
//! DeviceClass), one pod with 3 claims: two GPUs on one NUMA node (a `matchAttribute`
//! constraint, the search backtracks), one GPU of at least 80 GB by a capacity selector, and a
//! `firstAvailable` of a GPU of driver 550 or newer (semver), else any GPU. Every 10th node has
//! six GPUs allocated to another claim and cannot take the pod. Target: the whole command, text
//! and JSON, under 1 s.
//!
//! `cargo bench --bench dra_match` (plain `fn main`). `BENCH_RUNS` (default 11), `FLEET_NODES`
//! (default 1,000). Under `cargo test --benches` (unoptimised) three runs prove the bench works:
//! the verdict on every node, and the time within ten times the target.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

const POD: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: pair}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.nvidia.com
          count: 2
          selectors:
          - cel: {expression: 'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")'}
      constraints:
      - matchAttribute: resource.kubernetes.io/numaNode
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: big}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("79Gi")) >= 0'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: newest}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - name: r550
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: 'device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("550.0.0")) >= 0'}
        - name: any
          deviceClassName: gpu.nvidia.com
---
apiVersion: v1
kind: Pod
metadata: {name: train}
spec:
  resourceClaims:
  - {name: pair, resourceClaimTemplateName: pair}
  - {name: big, resourceClaimTemplateName: big}
  - {name: newest, resourceClaimTemplateName: newest}
  containers:
  - {name: c, image: nvcr.io/nvidia/pytorch:24.05-py3}
"#;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let runs = env("BENCH_RUNS", if full { 11 } else { 3 });
    let size = env("FLEET_NODES", 1_000);
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(repo.join(p)).unwrap()).unwrap()
    };
    let slice = read("tests/fixtures/dra/dell-xe9680-8xh100.json")["items"][0].clone();
    let mut nodes = Vec::with_capacity(size);
    let mut objects = vec![
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression":
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}),
    ];
    let mut busy = Vec::new();
    for k in 0..size {
        let name = format!("node-{k:04}");
        nodes.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "192", "memory": "2Ti"}}}));
        let mut s = slice.clone();
        s["metadata"] = json!({"name": format!("{name}-gpu")});
        s["spec"]["nodeName"] = name.clone().into();
        s["spec"]["pool"] = json!({"name": name, "generation": 1, "resourceSliceCount": 1});
        objects.push(s);
        if k % 10 == 3 {
            let results: Vec<Value> = (0..6)
                .map(|g| {
                    json!({"request": "r", "driver": "gpu.nvidia.com", "pool": name,
                                "device": format!("gpu-{g}")})
                })
                .collect();
            objects.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": format!("busy-{k}"), "namespace": "other"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 6}}]}},
                "status": {"allocation": {"devices": {"results": results}}}}));
            busy.push(name);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let nodes_file = dir.path().join("nodes.json");
    let dra_file = dir.path().join("dra.json");
    let pod_file = dir.path().join("pod.yaml");
    std::fs::write(
        &nodes_file,
        json!({"apiVersion": "v1", "kind": "List", "items": nodes}).to_string(),
    )
    .unwrap();
    std::fs::write(
        &dra_file,
        json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string(),
    )
    .unwrap();
    std::fs::write(&pod_file, POD).unwrap();
    let mut failing = Vec::new();
    let mut time = |json: bool| -> Duration {
        let times: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let mut cmd = Command::new(BIN);
                cmd.arg("match")
                    .arg(&pod_file)
                    .arg("--nodes")
                    .arg(&nodes_file)
                    .arg("--dra")
                    .arg(&dra_file);
                if json {
                    cmd.args(["-o", "json"]);
                }
                let out = cmd.output().expect("runs");
                let took = t.elapsed();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                if json {
                    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                    failing = v["workloads"][0]["nodes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|n| n["fits"] == false)
                        .map(|n| n["name"].as_str().unwrap().to_string())
                        .collect();
                }
                took
            })
            .collect();
        median(times)
    };
    let text = time(false);
    let json_time = time(true);
    println!(
        "match with 3 DRA claims over {size} nodes x 8 GPUs ({} KB of DRA objects): median {:.1} ms text, {:.1} ms JSON; {} nodes cannot take the pod of {} with six GPUs allocated",
        std::fs::metadata(&dra_file).unwrap().len() / 1024,
        text.as_secs_f64() * 1e3,
        json_time.as_secs_f64() * 1e3,
        failing.len(),
        busy.len()
    );
    assert_eq!(
        failing, busy,
        "exactly the nodes with six GPUs allocated fail"
    );
    let target = if full { 1 } else { 10 };
    for m in [text, json_time] {
        assert!(
            m < Duration::from_secs(target),
            "over the {target} s target: {m:?}"
        );
    }
}
