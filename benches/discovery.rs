//! Issue 2's performance target, measured side by side on a generated tree of more than 2,000
//! PCI functions (copies of the Dell 8x H100 fixture in PCI domains 0000.., kernel layout):
//!
//! - `gpu-labeler labels --sysfs-root <tree> --no-nvml` takes at most half the wall time of
//!   `lspci -A linux-sysfs -O sysfs.path=<tree>/bus/pci -nnvmm` (Debian's pciutils);
//! - gpu-labeler's peak RSS is under 20 MiB.
//!
//! `cargo bench --bench discovery` (a plain `fn main`, `harness = false`). Runs alternate
//! between the two programs so that both see the same machine state. Peak RSS comes from GNU
//! time (`/usr/bin/time -f %M`, three runs each, the largest), not from this process's `wait4`:
//! a child spawned from here inherits this process's high-water mark at `exec` (the kernel keeps
//! the larger of the old and new address spaces' peaks), so `wait4` reported this bench's own
//! size for lspci (26.6 MiB where it uses 11.9). Environment: `BENCH_RUNS` (default 21), `BENCH_COPIES` (default
//! 4, i.e. 2,068 functions), `BENCH_STRICT=1` exits 1 when a target is missed, `BENCH_KEEP=1`
//! keeps the generated tree.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `struct rusage` on 64-bit Linux: two `timeval`s, then 14 `long`s (`ru_maxrss` first, KiB).
#[repr(C)]
struct Rusage([i64; 18]);

unsafe extern "C" {
    fn wait4(pid: i32, status: *mut i32, options: i32, rusage: *mut Rusage) -> i32;
}

/// One run: wall time from spawn to reaping, exit status.
struct Sample {
    wall: Duration,
    status: i32,
}

// The child is reaped by `wait4`, which std's `Child::wait` cannot replace (no rusage).
#[allow(clippy::zombie_processes)]
fn time_once(program: &Path, args: &[String]) -> Sample {
    let start = Instant::now();
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let mut status = 0;
    let mut usage = Rusage([0; 18]);
    // SAFETY: the child is ours and not yet reaped; both pointers are valid for the call.
    let pid = unsafe { wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    Sample { wall, status }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn env_num(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn find_lspci() -> Option<std::path::PathBuf> {
    [
        "/usr/bin/lspci",
        "/usr/sbin/lspci",
        "/bin/lspci",
        "/sbin/lspci",
    ]
    .iter()
    .map(std::path::PathBuf::from)
    .find(|p| p.exists())
}

struct Row {
    name: String,
    walls: Vec<Duration>,
    max_rss_kib: Option<u64>,
}

impl Row {
    fn print(&self) {
        let min = self.walls.iter().min().unwrap();
        let max = self.walls.iter().max().unwrap();
        println!(
            "{:<42} {:>10.2} {:>10.2} {:>10.2} {:>12}",
            self.name,
            ms(median(self.walls.clone())),
            ms(*min),
            ms(*max),
            self.max_rss_kib
                .map_or("-".to_string(), |k| format!("{:.1}", k as f64 / 1024.0))
        );
    }
}

fn main() {
    // Under `cargo test` (an unoptimised binary) a few runs only prove the bench works.
    let runs = env_num("BENCH_RUNS", if cfg!(debug_assertions) { 3 } else { 21 }).max(1);
    let copies = env_num("BENCH_COPIES", 4).max(1);
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = dir.path().join("sys");
    // BENCH_KEEP=1 leaves the tree behind for measuring by hand (`/usr/bin/time -v`, perf).
    let _dir = if std::env::var_os("BENCH_KEEP").is_some() {
        Err(dir.keep())
    } else {
        Ok(dir)
    };
    let t = Instant::now();
    let functions = common::generate_large_tree(&tree, copies);
    println!(
        "tree: {functions} PCI functions ({copies} copies of dell-xe9680-8xh100) at {} (built in {:.1} s)",
        tree.display(),
        t.elapsed().as_secs_f64()
    );

    let bin = common::binary();
    println!(
        "binary: {} ({:.2} MiB)",
        bin.display(),
        std::fs::metadata(&bin).expect("binary").len() as f64 / (1024.0 * 1024.0)
    );
    let proc = tree.with_file_name("proc-absent");
    let labeler_args: Vec<String> = vec![
        "labels".into(),
        "--sysfs-root".into(),
        tree.display().to_string(),
        "--proc-root".into(),
        proc.display().to_string(),
        "--no-nvml".into(),
    ];

    // Sanity: gpu-labeler sees every function and gives the Dell labels, without warnings.
    let mut features_args = labeler_args.clone();
    features_args[0] = "features".into();
    let out = Command::new(&bin).args(&features_args).output().unwrap();
    let features: serde_json::Value = serde_json::from_slice(&out.stdout).expect("features JSON");
    let seen = features["instances"]["pci.device"]["elements"]
        .as_array()
        .map_or(0, Vec::len);
    println!(
        "gpu-labeler: {seen} pci.device instances, {} gpu.device, stderr {} bytes",
        features["instances"]["gpu.device"]["elements"]
            .as_array()
            .map_or(0, Vec::len),
        out.stderr.len()
    );
    assert_eq!(seen, functions, "gpu-labeler read every function");

    let lspci = find_lspci();
    let lspci_args: Vec<String> = vec![
        "-A".into(),
        "linux-sysfs".into(),
        "-O".into(),
        format!("sysfs.path={}", tree.join("bus/pci").display()),
        "-nnvmm".into(),
    ];
    if let Some(l) = &lspci {
        let out = Command::new(l).args(&lspci_args).output().unwrap();
        let slots = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("Slot:"))
            .count();
        println!(
            "lspci: {slots} functions listed, exit {}, stderr {} bytes",
            out.status,
            out.stderr.len()
        );
    } else {
        println!("lspci: not installed (apt-get install -y pciutils); timing gpu-labeler only");
    }

    // Warm the page cache and the binaries once, then alternate.
    time_once(&bin, &labeler_args);
    if let Some(l) = &lspci {
        time_once(l, &lspci_args);
    }
    let mut ours = Row {
        name: "gpu-labeler labels --no-nvml".into(),
        walls: Vec::new(),
        max_rss_kib: None,
    };
    let mut theirs = Row {
        name: "lspci -A linux-sysfs -nnvmm".into(),
        walls: Vec::new(),
        max_rss_kib: None,
    };
    for _ in 0..runs {
        let s = time_once(&bin, &labeler_args);
        assert_eq!(s.status, 0, "gpu-labeler failed");
        ours.walls.push(s.wall);
        if let Some(l) = &lspci {
            let s = time_once(l, &lspci_args);
            theirs.walls.push(s.wall);
        }
    }
    ours.max_rss_kib = common::peak_rss_kib(&bin, &labeler_args);
    if let Some(l) = &lspci {
        theirs.max_rss_kib = common::peak_rss_kib(l, &lspci_args);
    }

    println!();
    println!(
        "{:<42} {:>10} {:>10} {:>10} {:>12}",
        format!("{runs} runs each, {functions} functions"),
        "median ms",
        "min ms",
        "max ms",
        "peak RSS MiB"
    );
    ours.print();
    let mut missed = Vec::new();
    if lspci.is_some() {
        theirs.print();
        let ratio = ms(median(ours.walls.clone())) / ms(median(theirs.walls.clone()));
        println!("time ratio gpu-labeler / lspci (medians): {ratio:.3} (target <= 0.500)");
        if ratio > 0.5 {
            missed.push(format!("time ratio {ratio:.3} > 0.5"));
        }
    }
    match ours.max_rss_kib {
        Some(kib) => {
            let rss_mib = kib as f64 / 1024.0;
            println!("gpu-labeler peak RSS: {rss_mib:.1} MiB (target < 20 MiB)");
            if rss_mib >= 20.0 {
                missed.push(format!("peak RSS {rss_mib:.1} MiB >= 20 MiB"));
            }
        }
        None => println!("peak RSS: not measured (needs GNU time: apt-get install -y time)"),
    }
    if cfg!(debug_assertions) {
        println!(
            "targets: unoptimised build (cargo test), not judged; run `cargo bench --bench discovery`"
        );
    } else if missed.is_empty() {
        println!("targets: met");
    } else {
        println!("targets: MISSED: {}", missed.join("; "));
        if std::env::var_os("BENCH_STRICT").is_some_and(|v| v == "1") {
            std::process::exit(1);
        }
    }
}
