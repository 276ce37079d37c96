//! `gpu-labeler inventory` over a large fleet (issue 47): 5,000 nodes of mixed instance types,
//! one in 50 short of its type's GPUs, read from a `--nodes` file as an operator runs it. Target:
//! the short nodes found, every one and no other, in under 1 s.
//!
//! The fleet is `tests/fixtures/missing/nodes.json`'s nodes (real labels of an H100 node, given
//! instance types and counts) copied and renamed: node `k` takes template `k % 11`, and every
//! 50th node of a GPU type has one GPU less than its type's count.
//!
//! `cargo bench --bench inventory` (plain `fn main`). `BENCH_RUNS` (default 11), `FLEET_NODES`
//! (default 5,000). Under `cargo test --benches` (unoptimised) three runs prove the bench works:
//! every short node found, and the time within ten times the target.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");
const COUNT: &str = "feature.node.kubernetes.io/gpu.count";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let runs = env("BENCH_RUNS", if full { 11 } else { 3 });
    let size = env("FLEET_NODES", 5_000);
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(repo.join("tests/fixtures/missing/nodes.json")).unwrap(),
    )
    .unwrap();
    // The templates: one whole node of each type (the first of its type), and the CPU node.
    let mut templates: Vec<Value> = Vec::new();
    for n in fixture["items"].as_array().unwrap() {
        let t = &n["metadata"]["labels"]["node.kubernetes.io/instance-type"];
        if t.is_null() {
            continue;
        }
        if !templates
            .iter()
            .any(|x| x["metadata"]["labels"]["node.kubernetes.io/instance-type"] == *t)
        {
            templates.push(n.clone());
        }
    }
    let mut items = Vec::with_capacity(size);
    let mut planted = Vec::new();
    for k in 0..size {
        let mut n = templates[k % templates.len()].clone();
        let name = format!("node-{k:05}");
        n["metadata"]["name"] = name.clone().into();
        let labels = &mut n["metadata"]["labels"];
        if let Some(c) = labels[COUNT].as_str().and_then(|c| c.parse::<u64>().ok())
            && (k / templates.len()) % 50 == 7
            && c > 1
        {
            labels[COUNT] = (c - 1).to_string().into();
            planted.push(name);
        }
        items.push(n);
    }
    planted.sort();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nodes.json");
    std::fs::write(
        &file,
        serde_json::to_vec(
            &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}),
        )
        .unwrap(),
    )
    .unwrap();
    let mut found = Vec::new();
    let times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let out = Command::new(BIN)
                .args(["inventory", "-o", "json", "--nodes"])
                .arg(&file)
                .output()
                .expect("runs");
            let took = t.elapsed();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            found = v["short"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["node"].as_str().unwrap().to_string())
                .collect();
            found.sort();
            took
        })
        .collect();
    let m = median(times);
    println!(
        "inventory -o json over {size} nodes ({} KB): median {:.1} ms, {} short found of {} planted",
        std::fs::metadata(&file).unwrap().len() / 1024,
        m.as_secs_f64() * 1e3,
        found.len(),
        planted.len()
    );
    assert_eq!(found, planted, "the short nodes, every one and no other");
    // The target is the release binary's; the unoptimised smoke run only has to be in reach.
    let target = if full { 1 } else { 10 };
    assert!(
        m < Duration::from_secs(target),
        "over the {target} s target: {m:?}"
    );
}
