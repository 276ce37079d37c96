//! What the accelerator catalogue costs (issue 16): parsing `data/accelerators.yaml` (once per
//! process, on the first classification) and `gpu-labeler labels` on the accelerator fixtures
//! against a node without accelerators.
//!
//! `cargo bench --bench accel` (plain `fn main`). `BENCH_RUNS` (default 31). Under `cargo test`
//! (no `--bench` argument, unoptimised) three runs only prove the bench works.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full { 31 } else { 3 });
    let text = include_str!("../data/accelerators.yaml");
    let parse: Vec<Duration> = (0..runs * 10)
        .map(|_| {
            let t = Instant::now();
            let c = gpu_labeler::catalogue::Catalogue::parse(text).expect("the catalogue parses");
            std::hint::black_box(c);
            t.elapsed()
        })
        .collect();
    println!(
        "catalogue parse ({} bytes, {} vendors): median {:.3} ms",
        text.len(),
        gpu_labeler::catalogue::catalogue().vendors.len(),
        median(parse).as_secs_f64() * 1e3
    );
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for machine in [
        "this-vm",
        "dell-xe9680-8xh100",
        "habana-gaudi2-8x",
        "mixed-gaudi2-npu-wormhole",
    ] {
        let root = repo.join("tests/fixtures/sysfs").join(machine);
        let times: Vec<Duration> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let s = Command::new(BIN)
                    .args(["labels", "--no-nvml", "--proc-root", "/nonexistent"])
                    .arg("--sysfs-root")
                    .arg(&root)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .expect("runs");
                assert!(s.success());
                t.elapsed()
            })
            .collect();
        println!(
            "labels {machine}: median {:.2} ms",
            median(times).as_secs_f64() * 1e3
        );
    }
}
