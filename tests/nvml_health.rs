//! GPU health faults through NVML (#37), on the real path: NVML's child process
//! (`gpu-labeler __nvml-child`) loads the fake `libnvidia-ml.so` of fake-nvml/ through
//! nvml-wrapper, driven by fixtures from real captures (tests/fixtures/nvml/PROVENANCE.md,
//! "Health fixtures"). Each test compares every GPU's whole `faults` (and the whole scan where
//! the fixture has a plain twin).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpu_labeler::discover::nvml::child::IsolatedNvml;
use gpu_labeler::discover::nvml::{
    NvmlChoice, NvmlFault, NvmlHealth, NvmlLostGpu, NvmlProbe, NvmlScan, NvmlStatus,
};
use gpu_labeler::discover::pci::PciAddress;

mod common;
use common::{fake_nvml_lib, nvml_fixture};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");

/// Every wait in these tests gives up after this.
const BOUND: Duration = Duration::from_secs(15);

/// NVML in a child process, as the agent runs it, on `fixture` (a path: tests that change the
/// GPUs' state rewrite it) through `lib` (`nvidia_ml` or `nvidia_ml_legacy`). The child is
/// this crate's binary behind a script that names the fixture in its environment.
fn child(dir: &Path, fixture: &Path, lib: &str, health: NvmlHealth) -> IsolatedNvml {
    child_tracing(dir, fixture, lib, health, None)
}

/// [`child`], the fake library writing the calls it answers to `trace` (`FAKE_NVML_TRACE`).
fn child_tracing(
    dir: &Path,
    fixture: &Path,
    lib: &str,
    health: NvmlHealth,
    trace: Option<&Path>,
) -> IsolatedNvml {
    let exe = dir.join("gpu-labeler.sh");
    let trace = trace
        .map(|t| format!("FAKE_NVML_TRACE='{}' ", t.display()))
        .unwrap_or_default();
    std::fs::write(
        &exe,
        format!(
            "#!/bin/sh\nFAKE_NVML_FIXTURE='{}' {trace}exec '{BIN}' \"$@\"\n",
            fixture.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    wait_executable(&exe);
    IsolatedNvml::new(
        NvmlChoice::Library(fake_nvml_lib(lib)),
        exe,
        Duration::from_secs(10),
        Duration::ZERO,
    )
    .with_health(health)
}

/// Waits until `exe`, just written, can be executed. A process another test thread forked
/// while the script was open for writing holds that descriptor until it execs, and executing
/// the script meanwhile fails with ETXTBSY ("Text file busy": the child's start failed in 1 of
/// 19 runs of this file). No descriptor opened later is ours, so once it runs, it keeps running.
fn wait_executable(exe: &Path) {
    let start = Instant::now();
    loop {
        match std::process::Command::new(exe)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .status()
        {
            Err(e) if e.raw_os_error() == Some(26) && start.elapsed() < BOUND => {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => {
                assert!(other.unwrap().success(), "{} --version", exe.display());
                return;
            }
        }
    }
}

fn health(critical_xids: &[u32], clear_after: Duration) -> NvmlHealth {
    NvmlHealth {
        critical_xids: critical_xids.to_vec(),
        clear_after,
    }
}

fn fault(kind: &str, detail: &str) -> NvmlFault {
    NvmlFault {
        kind: kind.into(),
        detail: detail.into(),
    }
}

fn faults_of(scan: &NvmlScan) -> Vec<Vec<NvmlFault>> {
    scan.gpus.iter().map(|g| g.faults.clone()).collect()
}

/// A copy of fixture `name` in `dir`, to rewrite under a running child.
fn copy(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join("fixture.json");
    std::fs::copy(nvml_fixture(name), &p).unwrap();
    p
}

/// Replaces the running child's fixture with `name`, so that the fake sees the change: its
/// length differs, or its modification time does once a clock tick has passed.
fn become_(path: &Path, name: &str) {
    std::thread::sleep(Duration::from_millis(20));
    std::fs::copy(nvml_fixture(name), path).unwrap();
}

/// Scans until `done` holds, at most `BOUND`; the last scan.
fn scan_until(p: &mut IsolatedNvml, done: impl Fn(&NvmlScan) -> bool) -> NvmlScan {
    let start = Instant::now();
    loop {
        let scan = p.scan();
        if done(&scan) || start.elapsed() > BOUND {
            return scan;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn plain(fixture: &str, lib: &str) -> NvmlScan {
    let dir = tempfile::tempdir().unwrap();
    child(
        dir.path(),
        &nvml_fixture(fixture),
        lib,
        NvmlHealth::default(),
    )
    .scan()
}

const SLOWDOWN: &str = "hw-slowdown,hw-power-brake-slowdown";

#[test]
fn each_fault_kind_is_read_per_gpu_in_kind_order() {
    let dir = tempfile::tempdir().unwrap();
    let scan = child(
        dir.path(),
        &nvml_fixture("h100-8x-faults"),
        "nvidia_ml",
        NvmlHealth::default(),
    )
    .scan();
    let thermal = fault("thermal", SLOWDOWN);
    assert_eq!(
        faults_of(&scan),
        vec![
            vec![fault("ecc", "3 volatile uncorrected"), thermal.clone()],
            vec![fault("remap", "pending"), thermal.clone()],
            vec![fault("remap", "failed"), thermal.clone()],
            vec![
                fault("fabric", "failed: Insufficient resources"),
                thermal.clone()
            ],
            vec![fault("fabric", "degraded: degraded-bandwidth")],
            vec![fault(
                "fabric",
                "degraded: route-unhealthy,insufficient-nvlinks"
            )],
            vec![],
            vec![],
        ]
    );
    // Everything else is the plain capture's.
    let mut expected = plain("h100-8x", "nvidia_ml");
    for (g, f) in expected.gpus.iter_mut().zip(faults_of(&scan)) {
        g.faults = f;
    }
    assert_eq!(scan, expected);
}

#[test]
fn a_captured_hw_slowdown_is_a_thermal_fault_on_every_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let scan = child(
        dir.path(),
        &nvml_fixture("h100-8x-hw-slowdown"),
        "nvidia_ml",
        NvmlHealth::default(),
    )
    .scan();
    let mut expected = plain("h100-8x", "nvidia_ml");
    for g in &mut expected.gpus {
        g.faults = vec![fault("thermal", SLOWDOWN)];
    }
    assert_eq!(scan, expected);
}

#[test]
fn a_captured_pending_row_remap_is_a_remap_fault() {
    let dir = tempfile::tempdir().unwrap();
    let scan = child(
        dir.path(),
        &nvml_fixture("a10-remap-pending"),
        "nvidia_ml",
        NvmlHealth::default(),
    )
    .scan();
    let mut expected = plain("a10", "nvidia_ml");
    // The A10 is idle (`gpu_idle`): not a fault.
    expected.gpus[0].faults = vec![fault("remap", "pending")];
    assert_eq!(scan, expected);
}

#[test]
fn critical_xids_seen_while_the_child_runs_are_reported_until_clear_after() {
    let dir = tempfile::tempdir().unwrap();
    let clear_after = Duration::from_millis(1500);
    let mut p = child(
        dir.path(),
        &nvml_fixture("h100-8x-xid"),
        "nvidia_ml",
        health(&[48, 63, 74, 79], clear_after),
    );
    // 79 on GPU 4 and 48 on GPU 5 (at 0.3 s and 0.6 s); the 13s are not critical.
    let xid = |s: &NvmlScan| s.gpus[5].faults.len() == 1;
    let seen = scan_until(&mut p, xid);
    let mut expected = vec![vec![]; 8];
    expected[4] = vec![fault("xid", "79")];
    expected[5] = vec![fault("xid", "48")];
    assert_eq!(faults_of(&seen), expected);
    // Cleared once clearAfter has passed since each was seen.
    let started = Instant::now();
    let cleared = scan_until(&mut p, |s| s.gpus.iter().all(|g| g.faults.is_empty()));
    assert_eq!(faults_of(&cleared), vec![Vec::<NvmlFault>::new(); 8]);
    assert!(started.elapsed() < clear_after + Duration::from_secs(2));
    assert_eq!(cleared.warnings, Vec::<String>::new());
}

#[test]
fn xids_not_in_the_critical_list_do_not_count_and_new_ones_arrive_later() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy(dir.path(), "h100-8x-xid");
    let mut p = child(
        dir.path(),
        &path,
        "nvidia_ml",
        health(&[48], Duration::from_secs(600)),
    );
    let seen = scan_until(&mut p, |s| s.gpus[5].faults.len() == 1);
    let mut expected = vec![vec![]; 8];
    expected[5] = vec![fault("xid", "48")];
    assert_eq!(faults_of(&seen), expected, "79 is not critical here");
    // The driver reports another 48 on GPU 0, and a 79 on GPU 1, while the child runs.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = v["xid_events"].as_array_mut().unwrap();
    events.push(serde_json::json!({"gpu": 0, "xid": 48}));
    events.push(serde_json::json!({"gpu": 1, "xid": 79}));
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let later = scan_until(&mut p, |s| !s.gpus[0].faults.is_empty());
    expected[0] = vec![fault("xid", "48")];
    assert_eq!(faults_of(&later), expected);
}

#[test]
fn an_nvlink_that_was_up_and_goes_down_is_a_fault_and_one_never_seen_up_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy(dir.path(), "h100-8x");
    let mut p = child(dir.path(), &path, "nvidia_ml", NvmlHealth::default());
    let before = p.scan();
    assert_eq!(faults_of(&before), vec![Vec::<NvmlFault>::new(); 8]);
    become_(&path, "h100-8x-nvlink-down");
    let after = scan_until(&mut p, |s| !s.gpus[2].faults.is_empty());
    let mut expected = vec![vec![]; 8];
    expected[2] = vec![fault("nvlink", "links 3,7 down")];
    expected[6] = vec![fault("nvlink", "link 0 down")];
    assert_eq!(faults_of(&after), expected);
    let active: Vec<Option<u32>> = after.gpus.iter().map(|g| g.nvlinks_active).collect();
    assert_eq!(active, [18, 18, 16, 18, 18, 18, 17, 18].map(Some).to_vec());
    // A child that starts with the links down never saw them up: no fault.
    let fresh = plain("h100-8x-nvlink-down", "nvidia_ml");
    assert_eq!(faults_of(&fresh), vec![Vec::<NvmlFault>::new(); 8]);
}

#[test]
fn a_gpu_lost_mid_run_is_listed_with_its_address_and_the_others_are_scanned() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy(dir.path(), "h100-8x");
    let mut p = child(dir.path(), &path, "nvidia_ml", NvmlHealth::default());
    let before = p.scan();
    assert_eq!(before.lost, vec![]);
    become_(&path, "h100-8x-gpu3-lost");
    let after = scan_until(&mut p, |s| !s.lost.is_empty());
    assert_eq!(after.status, NvmlStatus::Ok);
    assert_eq!(
        after.lost,
        vec![NvmlLostGpu {
            index: 3,
            address: PciAddress::parse("0000:5d:00.0"),
        }]
    );
    let mut expected = before.gpus.clone();
    expected.remove(3);
    assert_eq!(after.gpus, expected);
    assert_eq!(
        after.warnings,
        vec!["NVML GPU 3: device fell off the bus or has otherwise become inacessible; left to sysfs".to_string()]
    );
    // Lost from the start: NVML never said where it was.
    let from_start = plain("h100-8x-gpu3-lost", "nvidia_ml");
    assert_eq!(
        from_start.lost,
        vec![NvmlLostGpu {
            index: 3,
            address: None
        }]
    );
}

#[test]
fn an_old_driver_reports_through_the_calls_it_has() {
    // libnvidia_ml_legacy.so lacks nvmlDeviceGetRemappedRows, the R535 clocks event reasons
    // name and nvmlEventSetWait_v2: retired pages, the throttle reasons name and the v1 wait
    // stand in, quietly.
    let dir = tempfile::tempdir().unwrap();
    let mut p = child(
        dir.path(),
        &nvml_fixture("old-driver-faults"),
        "nvidia_ml_legacy",
        NvmlHealth::default(),
    );
    let scan = scan_until(&mut p, |s| s.gpus[0].faults.len() == 3);
    assert_eq!(
        faults_of(&scan),
        vec![vec![
            fault("remap", "2 retired pages pending"),
            fault("xid", "48"),
            fault("thermal", "hw-slowdown,hw-thermal-slowdown"),
        ]]
    );
    assert_eq!(scan.warnings, Vec::<String>::new());
    // The captured P400 has none of these values: no faults, the scan as before.
    let old = plain("old-driver-no-mig", "nvidia_ml_legacy");
    assert_eq!(faults_of(&old), vec![Vec::<NvmlFault>::new()]);
    assert_eq!(old.warnings, Vec::<String>::new());
    let mut without = scan.clone();
    without.gpus[0].faults.clear();
    assert_eq!(without, old);
}

#[test]
fn a_check_the_driver_cannot_do_is_skipped_with_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(nvml_fixture("h100-8x-faults")).unwrap())
            .unwrap();
    v["faults"] = serde_json::json!({"not_found": ["nvmlDeviceGetTotalEccErrors"]});
    let path = dir.path().join("fixture.json");
    std::fs::write(&path, v.to_string()).unwrap();
    let mut p = child(dir.path(), &path, "nvidia_ml", NvmlHealth::default());
    let first = p.scan();
    assert_eq!(
        first.warnings,
        vec![
            "GPU health: this driver lacks nvmlDeviceGetTotalEccErrors: the ecc check is skipped"
                .to_string()
        ]
    );
    assert_eq!(
        first.gpus[0].faults,
        vec![fault("thermal", SLOWDOWN)],
        "no ecc"
    );
    assert_eq!(first.gpus[1].faults[0], fault("remap", "pending"));
    let second = p.scan();
    assert_eq!(second.warnings, Vec::<String>::new(), "said once");
    assert_eq!(faults_of(&second), faults_of(&first));
}

#[test]
fn an_event_wait_that_never_returns_does_not_hold_up_scans() {
    let dir = tempfile::tempdir().unwrap();
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(nvml_fixture("h100-8x-xid")).unwrap())
            .unwrap();
    v["faults"] = serde_json::json!({"misbehave": [
        {"function": "nvmlEventSetWait_v2", "action": "hang"}
    ]});
    let path = dir.path().join("fixture.json");
    std::fs::write(&path, v.to_string()).unwrap();
    let mut p = child(dir.path(), &path, "nvidia_ml", NvmlHealth::default());
    let expected = plain("h100-8x", "nvidia_ml");
    for _ in 0..3 {
        let started = Instant::now();
        let scan = p.scan();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        // The XIDs never arrive: the wait that would deliver them hangs.
        assert_eq!(scan, expected);
        std::thread::sleep(Duration::from_millis(400));
    }
    assert_eq!(p.take_failure(), None);
}

/// The NVML functions the fake library saw, in the trace it writes (`FAKE_NVML_TRACE`): each
/// call's name and GPU, once.
fn traced(path: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn event_calls(calls: &std::collections::BTreeSet<String>) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.starts_with("nvmlEventSet") || c.starts_with("nvmlDeviceRegisterEvents"))
        .cloned()
        .collect()
}

/// A one-shot command opens no XID event set: NVML gives an XID only to a set that was open
/// when it happened, and `labels` ends after one scan. The daemon's child, with the same
/// (default) config, keeps one open with every GPU registered.
#[test]
fn a_one_shot_command_opens_no_event_set_and_the_daemons_child_does() {
    let dir = tempfile::tempdir().unwrap();
    let machine = "dell-xe9680-8xh100";
    let one_shot = dir.path().join("labels.trace");
    let lib = fake_nvml_lib("nvidia_ml");
    let args: Vec<std::ffi::OsString> = vec![
        "labels".into(),
        "--sysfs-root".into(),
        common::sysfs_fixture(machine).into(),
        "--proc-root".into(),
        common::proc_fixture(machine).into(),
        "--nvml-lib".into(),
        lib.into(),
    ];
    let run = common::run_env(
        args,
        &[
            ("FAKE_NVML_FIXTURE", nvml_fixture("h100-8x")),
            ("FAKE_NVML_TRACE", one_shot.clone()),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let calls = traced(&one_shot);
    // NVML was scanned (the trace works), and no event function was called.
    assert!(calls.contains("nvmlDeviceGetMemoryInfo_v2 7"), "{calls:?}");
    assert_eq!(event_calls(&calls), Vec::<String>::new());

    let daemon = dir.path().join("child.trace");
    let mut p = child_tracing(
        dir.path(),
        &nvml_fixture("h100-8x"),
        "nvidia_ml",
        NvmlHealth::default(),
        Some(&daemon),
    );
    assert_eq!(p.scan().status, NvmlStatus::Ok);
    // The event thread registers the GPUs beside the scan: wait for all eight.
    let registered = |c: &std::collections::BTreeSet<String>| {
        c.iter()
            .filter(|l| l.starts_with("nvmlDeviceRegisterEvents "))
            .count()
    };
    let start = Instant::now();
    while registered(&traced(&daemon)) < 8 && start.elapsed() < BOUND {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut want: Vec<String> = (0..8)
        .map(|g| format!("nvmlDeviceRegisterEvents {g}"))
        .collect();
    want.push("nvmlEventSetCreate".into());
    let got: Vec<String> = event_calls(&traced(&daemon))
        .into_iter()
        .filter(|c| !c.starts_with("nvmlEventSetWait"))
        .collect();
    assert_eq!(got, want);
}

/// A GPU that NVML starts listing while the child runs (back after a reset, or hot-plugged) is
/// registered for XID events within seconds, and its critical XIDs count: the child starts
/// with the capture's first four GPUs, then NVML lists all eight, and GPUs 4 and 5 report 79
/// and 48.
#[test]
fn a_gpu_that_appears_while_the_child_runs_is_watched_for_xids() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy(dir.path(), "h100-8x-xid");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["devices"].as_array_mut().unwrap().truncate(4);
    // (Events of GPUs a fixture does not have make it invalid.)
    v["xid_events"] = serde_json::json!([]);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let mut p = child(
        dir.path(),
        &path,
        "nvidia_ml",
        health(&[48, 79], Duration::from_secs(600)),
    );
    let four = p.scan();
    assert_eq!(four.status, NvmlStatus::Ok, "{four:?}");
    assert_eq!(faults_of(&four), vec![Vec::<NvmlFault>::new(); 4]);
    become_(&path, "h100-8x-xid");
    let eight = scan_until(&mut p, |s| {
        s.gpus.len() == 8 && s.gpus[4].faults.len() == 1 && s.gpus[5].faults.len() == 1
    });
    let mut expected = vec![vec![]; 8];
    expected[4] = vec![fault("xid", "79")];
    expected[5] = vec![fault("xid", "48")];
    assert_eq!(faults_of(&eight), expected);
}

/// A driver that fails a GPU's XID registration a while (`NVML_ERROR_UNKNOWN` twice, as one may
/// while the GPU comes up): the failure is said once, the registration is asked again with
/// backoff (5 s, then 10 s), and once it succeeds that GPU's critical XID (79 on GPU 4) is seen.
#[test]
fn a_failed_xid_registration_is_retried_with_backoff_and_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(nvml_fixture("h100-8x-xid")).unwrap())
            .unwrap();
    v["faults"] = serde_json::json!({"errors": [
        {"function": "nvmlDeviceRegisterEvents", "gpu": 4, "error": "UNKNOWN", "times": 2}
    ]});
    let path = dir.path().join("fixture.json");
    std::fs::write(&path, v.to_string()).unwrap();
    let mut p = child(
        dir.path(),
        &path,
        "nvidia_ml",
        health(&[48, 79], Duration::from_secs(600)),
    );
    let started = Instant::now();
    let mut warnings = Vec::new();
    let mut expected = vec![vec![]; 8];
    expected[5] = vec![fault("xid", "48")];
    // GPU 5 registered at once: its 48 comes; GPU 4's 79 does not, for now.
    let mut scan = p.scan();
    while scan.gpus.get(5).is_none_or(|g| g.faults.is_empty()) && started.elapsed() < BOUND {
        warnings.extend(scan.warnings);
        std::thread::sleep(Duration::from_millis(50));
        scan = p.scan();
    }
    warnings.extend(scan.warnings.clone());
    assert_eq!(faults_of(&scan), expected);
    // Asked again at 5 s (fails) and 15 s (succeeds): the 79 arrives then, not before.
    let bound = Duration::from_secs(30);
    while scan.gpus[4].faults.is_empty() && started.elapsed() < bound {
        std::thread::sleep(Duration::from_millis(100));
        scan = p.scan();
        warnings.extend(scan.warnings.clone());
    }
    let took = started.elapsed();
    expected[4] = vec![fault("xid", "79")];
    assert_eq!(faults_of(&scan), expected, "after {took:?}");
    assert!(took >= Duration::from_secs(14), "registered after {took:?}");
    let uuid = scan.gpus[4].uuid.clone().unwrap();
    assert_eq!(
        warnings,
        vec![
            format!(
                "GPU health: cannot register GPU 4 ({uuid}) for XID events: an internal driver \
                 error occurred; its XIDs are not seen until it is, asked again in 5 s doubling to 300 s"
            ),
            format!("GPU health: GPU 4 ({uuid}) registered for XID events after 2 failed tries"),
        ]
    );
}
