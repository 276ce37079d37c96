//! Soak (issue 8): the real daemon, `gpu-labeler run --interval 1s`, against the test API server
//! of `tests/apiserver` for ten minutes, on the Dell 8x H100 fixture (517 PCI functions) with
//! NVML through the fake `libnvidia-ml.so`.
//!
//! Every `SOAK_SAMPLE_SECS` (default 30) it reads the agent's CPU time (`/proc/<pid>/stat`,
//! utime + stime), its resident memory (`/proc/<pid>/status` VmRSS), the number of cycles it has
//! run (`gpu_labeler_scan_duration_seconds_count` from its own `/metrics`) and the requests the
//! API server saw, and prints one row. At the end: CPU per cycle, RSS growth after the first
//! minute, and the writes after the first publish (the target: none).
//!
//! `SOAK_RULES=FILE` adds `--rules FILE` (the rules bench writes its 1,000 operators' rules with
//! `RULES_WRITE=FILE`), to compare the CPU per cycle with and without a large rule set.
//! `SOAK_INTERVAL=SECS` (default 1) sets `--interval`; `SOAK_EVENTS=off` adds `--no-events`, to
//! compare the CPU per hour with the event sources (file watch, uevents, NVML's 5 s check, the
//! Node watch) on and off.
//!
//! `cargo build -p fake-nvml --release && cargo bench --bench soak` runs `SOAK_SECS` (default
//! 600). Under `cargo test --benches` (no `--bench` argument) it runs for 6 seconds, so CI keeps
//! the harness working: the write targets are checked, the pace only as "it keeps cycling".

#[path = "../tests/apiserver/mod.rs"]
mod apiserver;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use apiserver::{Agent, FakeApiServer, http, write_kubeconfig};

const NODE: &str = "soak-node";

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn fake_lib() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_gpu-labeler"));
    let dir = bin.parent().expect("target dir");
    for p in [
        dir.join("libnvidia_ml.so"),
        dir.join("deps/libnvidia_ml.so"),
    ] {
        if p.exists() {
            return p;
        }
    }
    panic!("libnvidia_ml.so not built next to {bin:?}: build fake-nvml in the same profile");
}

/// utime + stime of `pid` in clock ticks (fields 14 and 15 of `/proc/<pid>/stat`).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // The command name is in parentheses and may hold spaces: count fields after the last ')'.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe {
        sysconf(2 /* _SC_CLK_TCK */)
    };
    if t > 0 { t as u64 } else { 100 }
}

unsafe extern "C" {
    fn sysconf(name: i32) -> i64;
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// `gpu_labeler_scan_duration_seconds_count` from the agent's `/metrics`.
fn cycles(addr: SocketAddr) -> u64 {
    let (status, body) = http(addr, "GET", "/metrics", None).expect("GET /metrics");
    assert_eq!(status, 200, "{body}");
    body.lines()
        .find_map(|l| l.strip_prefix("gpu_labeler_scan_duration_seconds_count "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .unwrap_or(0)
}

struct Row {
    t: Duration,
    cycles: u64,
    cpu_ticks: u64,
    rss_kib: u64,
    gets: usize,
    writes: usize,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let secs = if full { env_num("SOAK_SECS", 600) } else { 6 };
    let sample = if full {
        env_num("SOAK_SAMPLE_SECS", 30)
    } else {
        2
    };
    let tick = ticks_per_second();
    let interval = env_num("SOAK_INTERVAL", 1).max(1);
    let events = std::env::var("SOAK_EVENTS").map_or(true, |v| v != "off");

    let server = FakeApiServer::start();
    server.add_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = write_kubeconfig(dir.path(), &server.url());
    let mut args: Vec<String> = vec![
        "run".into(),
        "--node-name".into(),
        NODE.into(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--interval".into(),
        format!("{interval}s"),
        "--listen".into(),
        "127.0.0.1:0".into(),
        // The fake API server serves no DRA: the Node's cost alone, as the other tests of the
        // fake server measure it (the DRA watch's cost is tests/daemon_dra.rs's and the
        // invariant soak's).
        "--no-dra".into(),
    ];
    // The fixture's flags, NVML through the fake library instead of `--no-nvml`.
    args.extend(
        apiserver::fixture_args()
            .into_iter()
            .filter(|a| a != "--no-nvml"),
    );
    if !events {
        args.push("--no-events".into());
    }
    if let Ok(rules) = std::env::var("SOAK_RULES") {
        args.push("--rules".into());
        args.push(rules);
    }
    args.push("--nvml-lib".into());
    args.push(fake_lib().display().to_string());
    let fixture = apiserver::repo().join("tests/fixtures/nvml/h100-8x.json");
    let mut agent = Agent::start(&args, &[("FAKE_NVML_FIXTURE", fixture.to_str().unwrap())]);
    let health = agent.health_addr();
    let start = Instant::now();
    // The first cycle starts within the first interval; the first publish writes once.
    let mut rows: Vec<Row> = Vec::new();
    println!(
        "soak: gpu-labeler run --interval 1s for {secs} s, sampled every {sample} s (pid {})",
        agent.pid()
    );
    println!(
        "{:>6} {:>7} {:>10} {:>13} {:>9} {:>5} {:>7}",
        "t (s)", "cycles", "cpu (ms)", "cpu/cycle ms", "RSS KiB", "GETs", "writes"
    );
    loop {
        let elapsed = start.elapsed();
        let due = Duration::from_secs(sample * rows.len() as u64);
        if due > Duration::from_secs(secs) {
            break;
        }
        if elapsed < due {
            std::thread::sleep(due - elapsed);
        }
        assert!(agent.child_alive(), "agent exited:\n{}", agent.log_text());
        let requests = server.requests();
        let row = Row {
            t: start.elapsed(),
            cycles: cycles(health),
            cpu_ticks: cpu_ticks(agent.pid()),
            rss_kib: rss_kib(agent.pid()),
            gets: requests.iter().filter(|r| !r.is_write()).count(),
            writes: requests.iter().filter(|r| r.is_write()).count(),
        };
        let per_cycle = if row.cycles > 0 {
            row.cpu_ticks as f64 * 1000.0 / tick as f64 / row.cycles as f64
        } else {
            0.0
        };
        println!(
            "{:>6.0} {:>7} {:>10.0} {:>13.2} {:>9} {:>5} {:>7}",
            row.t.as_secs_f64(),
            row.cycles,
            row.cpu_ticks as f64 * 1000.0 / tick as f64,
            per_cycle,
            row.rss_kib,
            row.gets,
            row.writes
        );
        rows.push(row);
    }
    agent.signal("TERM");
    let code = agent.wait_exit(Duration::from_secs(10));

    // Steady state starts after the first sample that saw the first publish's write: a cycle
    // counted but its write still in flight (a loaded machine, the smoke's sample at 0 s) is not
    // yet steady.
    let first = rows
        .iter()
        .position(|r| r.cycles > 0 && r.writes > 0)
        .unwrap_or_else(|| panic!("the agent never published:\n{}", agent.log_text()));
    let last = rows.last().expect("rows");
    let base = &rows[first];
    let steady_cycles = last.cycles - base.cycles;
    let steady_cpu_ms = (last.cpu_ticks - base.cpu_ticks) as f64 * 1000.0 / tick as f64;
    let steady_writes = last.writes - base.writes;
    // RSS after warm-up (a minute in the full run, the first sample after a cycle in the smoke).
    let warm = if full {
        rows.iter()
            .position(|r| r.t >= Duration::from_secs(60))
            .unwrap_or(first)
    } else {
        first
    };
    let rss_warm = rows[warm].rss_kib;
    let rss_max = rows[warm..].iter().map(|r| r.rss_kib).max().unwrap_or(0);
    println!();
    println!(
        "steady state: {steady_cycles} cycles, {:.2} ms CPU per cycle, {steady_writes} API writes, \
         {} GETs in all; RSS {} KiB after warm-up, max {} KiB after it (growth {} KiB); exit {code}",
        if steady_cycles > 0 {
            steady_cpu_ms / steady_cycles as f64
        } else {
            0.0
        },
        last.gets,
        rss_warm,
        rss_max,
        rss_max - rss_warm
    );
    let steady_secs = (last.t - base.t).as_secs_f64();
    println!(
        "CPU per hour at a {interval} s interval, events {}: {:.0} ms ({steady_cpu_ms:.0} ms in {steady_secs:.0} s)",
        if events { "on" } else { "off" },
        if steady_secs > 0.0 {
            steady_cpu_ms * 3600.0 / steady_secs
        } else {
            0.0
        }
    );
    let mut failed = Vec::new();
    if steady_writes != 0 {
        failed.push(format!("{steady_writes} writes in steady state (target 0)"));
    }
    if base.writes != 1 {
        failed.push(format!(
            "{} writes for the first publish (1 expected)",
            base.writes
        ));
    }
    // The next cycle starts an interval after the previous one ended: a little under one a
    // second. Fewer than 90% of that means cycles are stuck or slow.
    // The smoke run under `cargo test` (a debug build on a loaded CI machine, 4 s) only proves
    // the loop keeps cycling; the pace is judged in the full run.
    let expected = secs.saturating_sub(sample * first as u64);
    if !full && steady_cycles == 0 {
        failed.push(format!("no cycle in {expected} s at a 1 s interval"));
    }
    if full && steady_cycles * 10 < (expected / interval) * 9 {
        failed.push(format!(
            "only {steady_cycles} cycles in {expected} s at a {interval} s interval"
        ));
    }
    // Growth allowance: allocator noise, not a trend (a leak of one cycle's output each second
    // would be megabytes over ten minutes). Six seconds of a debug build say nothing about it.
    if full && rss_max - rss_warm > 512 {
        failed.push(format!("RSS grew by {} KiB", rss_max - rss_warm));
    }
    if code != 0 {
        failed.push(format!("exit code {code} after SIGTERM"));
    }
    if !failed.is_empty() {
        eprintln!("soak targets missed: {}", failed.join("; "));
        std::process::exit(1);
    }
}
