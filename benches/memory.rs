//! Memory per PCI function (issue 13): how the agent's peak resident memory grows with the
//! number of PCI functions, so the DaemonSet's memory limit can be sized from the count.
//!
//! For each size (copies of the Dell 8x H100 tree, 517 functions each, as the discovery bench
//! makes them) it measures the peak RSS (`VmHWM` of `/proc/<pid>/status`) of:
//!
//! - `gpu-labeler labels -o json` (the shipped rules, no NVML), sampled every 2 ms until its
//!   output ends (a high-water mark: the last sample, taken after the work and the printing, is
//!   the peak);
//! - the daemon, `gpu-labeler run --interval 1s` with the node sink against the test API server
//!   (`tests/apiserver`), after three cycles: what it holds between cycles (the last output, the
//!   rules) on top of a cycle's peak.
//!
//! Then the slope between the smallest and the largest size (KiB per function), and the number
//! of functions at which the default 96 MiB limit is crossed.
//!
//! `cargo bench --bench memory`; `MEMORY_COPIES` (default `4,16,64`: 2,068, 8,272 and 33,088
//! functions). Under `cargo test --benches` (no `--bench` argument) it runs sizes 1 and 2 so CI
//! keeps the harness working.

#[path = "../tests/apiserver/mod.rs"]
mod apiserver;
#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apiserver::{Agent, FakeApiServer, http, write_kubeconfig};

const NODE: &str = "memory-node";
/// The default limit in deploy/base/agent/daemonset.yaml.
const LIMIT_MIB: f64 = 96.0;

/// A `/proc/<pid>/status` field in KiB.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// `gpu_labeler_scan_duration_seconds_count` from the agent's `/metrics`.
fn cycles(addr: SocketAddr) -> u64 {
    let Ok((200, body)) = http(addr, "GET", "/metrics", None) else {
        return 0;
    };
    body.lines()
        .find_map(|l| l.strip_prefix("gpu_labeler_scan_duration_seconds_count "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .unwrap_or(0)
}

/// Peak RSS (KiB) of `labels -o json` over `root`: its `VmHWM`, sampled while its stdout is
/// read to the end (once it has exited, a zombie has no memory to report).
fn labels_peak(root: &std::path::Path, proc_root: &std::path::Path) -> u64 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpu-labeler"))
        .args(["labels", "-o", "json", "--no-nvml", "--sysfs-root"])
        .arg(root)
        .arg("--proc-root")
        .arg(proc_root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn gpu-labeler labels");
    let pid = child.id();
    let mut peak = 0;
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s.len()
    });
    while !reader.is_finished() {
        if let Some(k) = status_kib(pid, "VmHWM:") {
            peak = peak.max(k);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    if let Some(k) = status_kib(pid, "VmHWM:") {
        peak = peak.max(k);
    }
    let bytes = reader.join().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "labels: {status}");
    assert!(bytes > 0, "labels printed nothing");
    peak
}

/// Peak RSS (KiB) of the daemon over `root` after three cycles.
fn daemon_peak(root: &std::path::Path, proc_root: &std::path::Path) -> (u64, u64) {
    let server = FakeApiServer::start();
    server.add_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = write_kubeconfig(dir.path(), &server.url());
    let args: Vec<String> = [
        "run",
        "--node-name",
        NODE,
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--interval",
        "1s",
        "--listen",
        "127.0.0.1:0",
        "--no-nvml",
        "--sysfs-root",
        root.to_str().unwrap(),
        "--proc-root",
        proc_root.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let mut agent = Agent::start(&args, &[]);
    let health = agent.health_addr();
    let deadline = Instant::now() + Duration::from_secs(300);
    while cycles(health) < 3 {
        assert!(Instant::now() < deadline, "three cycles within 300 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = agent.pid();
    let hwm = status_kib(pid, "VmHWM:").expect("VmHWM");
    let rss = status_kib(pid, "VmRSS:").expect("VmRSS");
    assert_eq!(agent.stop(), 0);
    let labels = server.labels(NODE);
    assert!(
        labels.keys().any(|k| k.starts_with(common::PREFIX)),
        "the daemon published its labels: {labels:?}"
    );
    (hwm, rss)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let sizes: Vec<u32> = if full {
        std::env::var("MEMORY_COPIES")
            .unwrap_or_else(|_| "4,16,64".into())
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect()
    } else {
        vec![1, 2]
    };
    if cfg!(debug_assertions) {
        println!("memory bench: unoptimised build; the numbers are not the release binary's");
    }
    let proc_root = tempfile::tempdir().expect("tempdir");
    println!(
        "{:>9}  {:>16}  {:>16}  {:>16}",
        "functions", "labels peak MiB", "run peak MiB", "run RSS MiB"
    );
    let mut rows = Vec::new();
    for copies in sizes {
        let tree = tempfile::tempdir().expect("tempdir");
        let n = common::generate_large_tree(tree.path(), copies);
        let labels = labels_peak(tree.path(), proc_root.path());
        let (run, rss) = daemon_peak(tree.path(), proc_root.path());
        let mib = |k: u64| k as f64 / 1024.0;
        println!(
            "{n:>9}  {:>16.1}  {:>16.1}  {:>16.1}",
            mib(labels),
            mib(run),
            mib(rss)
        );
        rows.push((n, labels, run));
    }
    if let (Some(a), Some(b)) = (rows.first(), rows.last())
        && b.0 > a.0
    {
        let per = |x: u64, y: u64| (y as f64 - x as f64) / (b.0 - a.0) as f64;
        let (labels_kib, run_kib) = (per(a.1, b.1), per(a.2, b.2));
        let base_mib = (a.2 as f64 - run_kib * a.0 as f64) / 1024.0;
        println!(
            "per function: labels {:.2} KiB, run {:.2} KiB; run = {:.1} MiB + {:.2} KiB x functions",
            labels_kib, run_kib, base_mib, run_kib
        );
        if run_kib > 0.0 {
            let at = (LIMIT_MIB - base_mib) * 1024.0 / run_kib;
            println!("the {LIMIT_MIB} MiB limit is reached near {at:.0} functions");
        }
    }
}
