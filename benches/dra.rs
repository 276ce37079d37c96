//! The DRA source's cost (issue 45's target: `labels --dra` adds under 2 ms for 8 GPUs), on the
//! Dell 8x H100 (517 PCI functions, NVML from the fake library's h100-8x fixture) with the slice
//! NVIDIA's DRA driver publishes there (tests/fixtures/dra/dell-xe9680-8xh100.json):
//!
//! - in process: reading the file, joining its 8 devices to the GPUs and adding the `dra.*`
//!   features, then evaluating the rules on them, against evaluating without;
//! - the whole command: `labels --features SNAPSHOT --dra FILE` against `labels --features
//!   SNAPSHOT`, alternating, median of each (the snapshot keeps NVML and sysfs out of both).
//!
//! `cargo build -p fake-nvml --release && cargo bench --bench dra` (plain `fn main`); `BENCH_RUNS` (default 201 in process, a fifth of
//! that for the command). Under `cargo test` (unoptimised) a few runs only prove it works.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpu_labeler::config::Config;
use gpu_labeler::features::FeatureSet;
use gpu_labeler::labels::evaluate_node;
use gpu_labeler::pipeline::{RuleFiles, add_dra_file};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");
/// Issue 45's target for 8 GPUs.
const TARGET: Duration = Duration::from_millis(2);

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The Dell's features with NVML, as `features -o json` writes them, in a file.
fn snapshot(dir: &std::path::Path) -> PathBuf {
    let out = Command::new(BIN)
        .args(["features", "-o", "json", "--sysfs-root"])
        .arg(common::sysfs_fixture("dell-xe9680-8xh100"))
        .arg("--proc-root")
        .arg(common::proc_fixture("dell-xe9680-8xh100"))
        .arg("--nvml-lib")
        .arg(common::fake_nvml_lib("nvidia_ml"))
        .env("FAKE_NVML_FIXTURE", common::nvml_fixture("h100-8x"))
        .stderr(Stdio::null())
        .output()
        .expect("gpu-labeler features");
    assert!(out.status.success());
    let path = dir.join("dell.json");
    std::fs::write(&path, out.stdout).unwrap();
    path
}

fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 3 } else { 201 });
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot(dir.path());
    let slices = common::fixtures().join("dra/dell-xe9680-8xh100.json");
    let features: FeatureSet =
        gpu_labeler::features::load_snapshot(&snap).expect("the snapshot loads");
    let config = Config::default();
    let (rules, errors) = RuleFiles {
        paths: Vec::new(),
        no_default_rules: false,
    }
    .load();
    assert!(errors.is_empty(), "{errors:?}");

    // In process: the DRA part alone, and the evaluation with and without its features.
    let (mut join, mut eval_with, mut eval_without) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let mut f = features.clone();
        let t = Instant::now();
        add_dra_file(&mut f, &slices, Some("n1")).expect("the slices load");
        join.push(t.elapsed());
        assert_eq!(f.attribute("dra.node", "coverage"), Some("complete"));
        let t = Instant::now();
        let with = evaluate_node(&f, &config, &rules);
        eval_with.push(t.elapsed());
        let t = Instant::now();
        let without = evaluate_node(&features, &config, &rules);
        eval_without.push(t.elapsed());
        assert_eq!(with.output.labels.len(), without.output.labels.len() + 2);
    }
    let (join, eval_with, eval_without) = (median(join), median(eval_with), median(eval_without));
    let added = join + eval_with.saturating_sub(eval_without);
    println!(
        "dra in process (8 GPUs, {runs} runs, median): read + join + features {join:.2?}; evaluation {eval_with:.2?} with, {eval_without:.2?} without; added {added:.2?} (target {TARGET:?}: {})",
        if added < TARGET { "met" } else { "MISSED" }
    );

    // The whole command, alternating.
    let command_runs = (runs / 5).max(3);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let run = |dra: bool| {
        let mut cmd = Command::new(BIN);
        cmd.arg("labels").arg("--features").arg(&snap);
        if dra {
            cmd.arg("--dra").arg(&slices).args(["--node-name", "n1"]);
        }
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let t = Instant::now();
        let status = cmd.status().expect("gpu-labeler labels");
        let wall = t.elapsed();
        assert!(status.success());
        wall
    };
    for _ in 0..command_runs {
        with.push(run(true));
        without.push(run(false));
    }
    let (with, without) = (median(with), median(without));
    println!(
        "labels --dra (8 GPUs, {command_runs} runs each, alternating, median): {with:.2?} with, {without:.2?} without: {:+.2} ms",
        (with.as_secs_f64() - without.as_secs_f64()) * 1000.0
    );
}
