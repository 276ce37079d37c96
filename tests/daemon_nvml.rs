//! NVML that is missing when the daemon starts (the driver often loads after the pod) is tried
//! again on later cycles: the fake libnvidia-ml of fake-nvml/ appears at the configured path
//! while `gpu-labeler run` is running, and the next cycle uses it.

mod apiserver;
mod common;
mod kube;
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use apiserver::*;
use common::nvml_fixture;
use support::{AgentSpec, NODE, WAIT, agent, fake_server, wait_labels_of};

/// The fake library that `cargo test --workspace` builds.
fn fake_lib() -> PathBuf {
    common::fake_nvml_lib("nvidia_ml")
}

/// An agent with NVML from the fake library answering from `fixture`, and the shipped rules.
fn with_nvml(fixture: &Path) -> AgentSpec {
    agent().fake_nvml(&fake_lib(), fixture).default_rules()
}

#[test]
fn nvml_missing_at_start_is_used_once_it_appears() {
    let spec = agent();
    let lib = spec.dir().join("libnvidia-ml.so.1");
    let mut agent = spec
        .fake_nvml(&lib, &nvml_fixture("h100-8x"))
        .default_rules()
        .args(&["--sink", "stdout"])
        .start_local();
    let addr = agent.health_addr();
    let unavailable = wait_for(WAIT, || {
        (metric(addr, "gpu_labeler_nvml_status{status=\"unavailable\"}")? == 1.0).then_some(())
    });
    assert!(unavailable.is_some(), "{}", agent.log_text());
    agent.wait_log("published to stdout", WAIT);

    // The driver arrives.
    std::fs::copy(fake_lib(), &lib).unwrap();
    let ok = wait_for(WAIT, || {
        (metric(addr, "gpu_labeler_nvml_status{status=\"ok\"}")? == 1.0).then_some(())
    });
    assert!(ok.is_some(), "{}", agent.log_text());
    // The labels that need NVML are published on that cycle.
    agent.wait_log("+feature.node.kubernetes.io/gpu.compute.major=9", WAIT);
    assert_eq!(
        metric(
            addr,
            "gpu_labeler_gpus{vendor=\"nvidia\",product=\"NVIDIA H100 80GB HBM3\"}"
        ),
        Some(8.0),
        "{}",
        get(addr, "/metrics").1
    );
    assert_eq!(agent.stop(), 0);
}

/// A copy of `h100-8x.json` whose `function` misbehaves with `action`.
fn misbehaving_fixture(dir: &Path, function: &str, action: &str) -> PathBuf {
    let faults = serde_json::json!({"misbehave": [{"function": function, "action": action}]});
    common::edited_nvml_fixture(dir, &format!("{action}.json"), "h100-8x", |v| {
        v["faults"] = faults
    })
}

/// NVML that hangs in init or crashes costs only NVML's labels: the daemon publishes every
/// other label to the Node, becomes ready, counts the failure and tries again each cycle.
#[test]
fn a_hanging_or_crashing_nvml_costs_only_its_own_labels() {
    for (function, action, reason) in [
        ("nvmlInit_v2", "hang", "timeout"),
        ("nvmlDeviceGetCount_v2", "segv", "crash"),
    ] {
        let server = fake_server(&[("kubernetes.io/os", "linux")]);
        let spec = agent();
        let fixture = misbehaving_fixture(spec.dir(), function, action);
        let lib = fake_lib();
        let mut agent = spec
            .fake_nvml(&lib, &fixture)
            .args(&["--nvml-timeout", "1s"])
            .start_fake(&server);
        let want = union(&[
            &map(&[("kubernetes.io/os", "linux")]),
            &fixture_pci_labels(),
        ]);
        labels_become(&server, &agent, &want, action);
        let addr = agent.health_addr();
        let ready = wait_for(WAIT, || (get(addr, "/readyz").0 == 200).then_some(()));
        assert!(
            ready.is_some(),
            "{action}: never ready\n{}",
            agent.log_text()
        );
        // Tried again on later cycles, each failure counted.
        let series = format!("gpu_labeler_nvml_failures_total{{reason=\"{reason}\"}}");
        let counted = wait_for(WAIT, || (metric(addr, &series)? >= 2.0).then_some(()));
        assert!(counted.is_some(), "{action}: {}", get(addr, "/metrics").1);
        assert_eq!(
            metric(addr, "gpu_labeler_nvml_status{status=\"error\"}"),
            Some(1.0)
        );
        let what = if action == "hang" {
            "timed out after 1s"
        } else {
            "killed by SIGSEGV"
        };
        agent.wait_log(&format!("NVML: {}: {what}", lib.display()), WAIT);
        assert_eq!(agent.stop(), 0);
    }
}

/// Wedges the driver under a running agent: the fixture now hangs in init, and the running
/// child is killed, so that the next one hangs; returns once the agent says NVML is stale.
fn wedge(agent: &Agent, dir: &Path, fixture: &Path) {
    let wedged = misbehaving_fixture(dir, "nvmlInit_v2", "hang");
    std::fs::rename(&wedged, fixture).unwrap();
    let child = nvml_child(agent).expect("an NVML child runs");
    std::process::Command::new("kill")
        .args(["-KILL", &child.to_string()])
        .status()
        .unwrap();
    let addr = agent.health_addr();
    let stale = wait_for(WAIT, || {
        (metric(addr, "gpu_labeler_nvml_status{status=\"stale\"}")? == 1.0).then_some(())
    });
    assert!(stale.is_some(), "{}", agent.log_text());
}

/// Waits until the Node's labels are `want`; `what` names the step in the failure.
#[track_caller]
fn labels_become(
    server: &FakeApiServer,
    agent: &Agent,
    want: &std::collections::BTreeMap<String, String>,
    what: &str,
) {
    eprintln!("waiting for the labels: {what}");
    wait_labels_of(server, NODE, WAIT, agent, want);
}

/// The pid of `agent`'s NVML child (spawned by any of its threads), once there is one.
fn nvml_child(agent: &Agent) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{}/task", agent.pid())).ok()?;
    tasks.flatten().find_map(|t| {
        let children = std::fs::read_to_string(t.path().join("children")).ok()?;
        children.split_whitespace().next()?.parse().ok()
    })
}

/// A driver that wedges after NVML answered: the labels only NVML gives stay for the grace
/// period (`gpu.node.nvml=stale`), then fall back to what sysfs knows.
#[test]
fn nvml_labels_outlive_a_wedged_driver_for_the_grace_period() {
    let server = fake_server(&[("kubernetes.io/os", "linux")]);
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("nvml.json");
    std::fs::copy(nvml_fixture("h100-8x"), &fixture).unwrap();
    let mut agent = with_nvml(&fixture)
        .config("sources:\n  nvml: {timeout: 1s, gracePeriod: 6s}\n")
        .start_fake(&server);
    let kubelet = map(&[("kubernetes.io/os", "linux")]);
    let with_nvml = union(&[&kubelet, &common::h100_default_labels()]);
    labels_become(&server, &agent, &with_nvml, "NVML answering");
    let addr = agent.health_addr();

    // The driver wedges: the next child hangs in init.
    wedge(&agent, dir.path(), &fixture);
    assert_eq!(server.labels(NODE), with_nvml, "kept while stale");

    // After the grace period, what sysfs knows.
    let mut sysfs = kubelet.clone();
    sysfs.extend(common::dell_sysfs_default_labels());
    labels_become(&server, &agent, &sysfs, "after the grace period");
    assert_eq!(
        metric(addr, "gpu_labeler_nvml_status{status=\"error\"}"),
        Some(1.0)
    );
    assert_eq!(agent.stop(), 0);
}

/// By default (`gracePeriod: forever`) the labels only NVML gives outlive a wedged driver for
/// as long as the GPUs they describe are on the PCI bus: pods selecting `gpu.memory Gt ...`
/// keep scheduling on a node whose GPUs are fine. A GPU that leaves the bus takes its NVML
/// values with it: the Node then carries what a good NVML would say of the GPUs left.
#[test]
fn nvml_labels_stay_while_their_gpus_are_on_the_bus() {
    let server = fake_server(&[("kubernetes.io/os", "linux")]);
    let dir = tempfile::tempdir().unwrap();
    let sysfs = dir.path().join("sys");
    common::copy_tree(&common::sysfs_fixture("dell-xe9680-8xh100"), &sysfs);
    let fixture = dir.path().join("nvml.json");
    std::fs::copy(nvml_fixture("h100-8x"), &fixture).unwrap();
    let spec = with_nvml(&fixture)
        .sysfs_root(&sysfs)
        .config("sources:\n  nvml: {timeout: 1s}\n");
    let agent = spec.start_fake(&server);
    let kubelet = map(&[("kubernetes.io/os", "linux")]);
    let with_nvml = union(&[&kubelet, &common::h100_default_labels()]);
    labels_become(&server, &agent, &with_nvml, "NVML answering");

    // The driver wedges.
    wedge(&agent, dir.path(), &fixture);
    // Longer than the old 6 s of the test above, and nothing changes.
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(
        server.labels(NODE),
        with_nvml,
        "kept while the GPUs are there"
    );
    agent.wait_log("while its GPUs are on the PCI bus", WAIT);

    // One GPU leaves the bus: the Node carries what a good NVML says of the seven left.
    std::fs::remove_file(sysfs.join("bus/pci/devices/0000:19:00.0")).unwrap();
    let seven = dir.path().join("seven.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(nvml_fixture("h100-8x")).unwrap()).unwrap();
    v["devices"]
        .as_array_mut()
        .unwrap()
        .retain(|d| d["pci_bus_id"] != "00000000:19:00.0");
    std::fs::write(&seven, v.to_string()).unwrap();
    // What `labels` says on the same inputs, NVML answering from `seven`.
    let r = common::run_env(
        spec.labels_command(),
        &[("FAKE_NVML_FIXTURE", seven.as_os_str())],
    );
    let mut want = common::labels_of(r.ok());
    want.extend(kubelet.clone());
    assert_eq!(want["feature.node.kubernetes.io/gpu.count"], "7");
    labels_become(&server, &agent, &want, "a GPU gone");
}

/// A critical XID under a running agent (#37): NVML's child keeps an event set open, and its
/// light check sees the XID fault, so the daemon relabels at once rather than at the next
/// interval; the XID clears after `clearAfter`, and the end of the hold wakes a relabel again.
#[test]
fn a_critical_xid_under_a_running_agent_wakes_a_relabel_and_clears() {
    let spec = agent();
    let fixture = spec.dir().join("h100-8x.json");
    std::fs::copy(nvml_fixture("h100-8x"), &fixture).unwrap();
    // A long interval: only the light check can explain a relabel within the test.
    let mut agent = spec
        .fake_nvml(&fake_lib(), &fixture)
        .default_rules()
        .interval("10m")
        .config("sources:\n  nvml: {checkInterval: 200ms}\n  health: {clearAfter: 2s, criticalXids: [79]}\n")
        .args(&["--sink", "stdout"])
        .start_local();
    agent.wait_log("published to stdout", WAIT);
    // The driver reports XID 79 on GPU 2.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    v["xid_events"] = serde_json::json!([{"gpu": 2, "xid": 79}]);
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&fixture, v.to_string()).unwrap();
    agent.wait_log("NVML's GPU or MIG state changed: relabelling", WAIT);
    // Degraded at once, and back to ok when the XID has been held for 2 s: the hold's end
    // wakes a cycle of its own (the interval is 10 minutes), however late the scan that
    // reported the XID ran.
    let published = |log: &str| -> Vec<String> {
        log.lines()
            .filter_map(|l| {
                l.split_once("published to stdout: ")
                    .map(|(_, d)| d.to_string())
            })
            .skip(1)
            .collect()
    };
    let both = wait_for(WAIT, || {
        let p = published(&agent.log_text());
        (p.len() >= 2).then_some(p)
    });
    let h = "feature.node.kubernetes.io/gpu.health";
    let n = "feature.node.kubernetes.io/gpu.healthy.count";
    assert_eq!(
        both,
        Some(vec![
            format!("~{h}=ok->degraded ~{n}=8->7"),
            format!("~{h}=degraded->ok ~{n}=7->8"),
        ]),
        "{}",
        agent.log_text()
    );
    assert_eq!(agent.stop(), 0);
}
