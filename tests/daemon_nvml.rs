//! NVML that is missing when the daemon starts (the driver often loads after the pod) is tried
//! again on later cycles: the fake libnvidia-ml of fake-nvml/ appears at the configured path
//! while `gpu-labeler run` is running, and the next cycle uses it.

mod apiserver;
mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use apiserver::*;
use common::nvml_fixture;

const WAIT: Duration = Duration::from_secs(20);

/// The fake library that `cargo test --workspace` builds.
fn fake_lib() -> PathBuf {
    common::fake_nvml_lib("nvidia_ml")
}

fn args(lib: &Path) -> Vec<String> {
    let mut a = vec!["run".to_string()];
    // The fixture's discovery flags, with NVML from `lib` instead of `--no-nvml`.
    a.extend(fixture_args().into_iter().filter(|x| x != "--no-nvml"));
    for x in [
        "--nvml-lib",
        lib.to_str().unwrap(),
        "--sink",
        "stdout",
        "--interval",
        "1s",
        "--listen",
        "127.0.0.1:0",
    ] {
        a.push(x.to_string());
    }
    a
}

#[test]
fn nvml_missing_at_start_is_used_once_it_appears() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libnvidia-ml.so.1");
    let fixture = nvml_fixture("h100-8x");
    let mut agent = Agent::start(
        &args(&lib),
        &[("FAKE_NVML_FIXTURE", fixture.to_str().unwrap())],
    );
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
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(nvml_fixture("h100-8x")).unwrap()).unwrap();
    v["faults"] = serde_json::json!({"misbehave": [{"function": function, "action": action}]});
    let path = dir.join(format!("{action}.json"));
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

/// NVML that hangs in init or crashes costs only NVML's labels: the daemon publishes every
/// other label to the Node, becomes ready, counts the failure and tries again each cycle.
#[test]
fn a_hanging_or_crashing_nvml_costs_only_its_own_labels() {
    for (function, action, reason) in [
        ("nvmlInit_v2", "hang", "timeout"),
        ("nvmlDeviceGetCount_v2", "segv", "crash"),
    ] {
        let server = FakeApiServer::start();
        server.add_node("gpu-node-1", &[("kubernetes.io/os", "linux")]);
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = write_kubeconfig(dir.path(), &server.url());
        let fixture = misbehaving_fixture(dir.path(), function, action);
        let lib = fake_lib();
        let mut args: Vec<String> = run_args(&kubeconfig, "gpu-node-1", &[])
            .into_iter()
            .filter(|a| a != "--no-nvml")
            .collect();
        args.extend(
            ["--nvml-lib", lib.to_str().unwrap(), "--nvml-timeout", "1s"].map(String::from),
        );
        let mut agent = Agent::start(&args, &[("FAKE_NVML_FIXTURE", fixture.to_str().unwrap())]);
        let want = union(&[
            &map(&[("kubernetes.io/os", "linux")]),
            &fixture_pci_labels(),
        ]);
        let published = wait_for(WAIT, || (server.labels("gpu-node-1") == want).then_some(()));
        assert!(
            published.is_some(),
            "{action}: labels {:#?}\nlog:\n{}",
            server.labels("gpu-node-1"),
            agent.log_text()
        );
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
fn labels_become(
    server: &FakeApiServer,
    agent: &Agent,
    want: &std::collections::BTreeMap<String, String>,
    what: &str,
) {
    let ok = wait_for(WAIT, || {
        (server.labels("gpu-node-1") == *want).then_some(())
    });
    assert!(
        ok.is_some(),
        "{what}: labels {:#?}\nlog:\n{}",
        server.labels("gpu-node-1"),
        agent.log_text()
    );
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
    let server = FakeApiServer::start();
    server.add_node("gpu-node-1", &[("kubernetes.io/os", "linux")]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &server.url());
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "sources:\n  nvml: {timeout: 1s, gracePeriod: 6s}\n",
    )
    .unwrap();
    let fixture = dir.path().join("nvml.json");
    std::fs::copy(nvml_fixture("h100-8x"), &fixture).unwrap();
    let lib = fake_lib();
    let mut args: Vec<String> = run_args(&kubeconfig, "gpu-node-1", &[])
        .into_iter()
        .filter(|a| a != "--no-nvml" && a != "--no-default-rules")
        .collect();
    args.extend(
        [
            "--nvml-lib",
            lib.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ]
        .map(String::from),
    );
    let mut agent = Agent::start(&args, &[("FAKE_NVML_FIXTURE", fixture.to_str().unwrap())]);
    let kubelet = map(&[("kubernetes.io/os", "linux")]);
    let with_nvml = union(&[&kubelet, &common::h100_default_labels()]);
    labels_become(&server, &agent, &with_nvml, "NVML answering");
    let addr = agent.health_addr();

    // The driver wedges: the next child hangs in init.
    wedge(&agent, dir.path(), &fixture);
    assert_eq!(server.labels("gpu-node-1"), with_nvml, "kept while stale");

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
    let server = FakeApiServer::start();
    server.add_node("gpu-node-1", &[("kubernetes.io/os", "linux")]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &server.url());
    let sysfs = dir.path().join("sys");
    common::copy_tree(&common::sysfs_fixture("dell-xe9680-8xh100"), &sysfs);
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "sources:\n  nvml: {timeout: 1s}\n").unwrap();
    let fixture = dir.path().join("nvml.json");
    std::fs::copy(nvml_fixture("h100-8x"), &fixture).unwrap();
    let lib = fake_lib();
    let with_sysfs = |args: Vec<String>| -> Vec<String> {
        let mut args: Vec<String> = args
            .into_iter()
            .filter(|a| a != "--no-nvml" && a != "--no-default-rules")
            .collect();
        let i = args.iter().position(|a| a == "--sysfs-root").unwrap();
        args[i + 1] = sysfs.display().to_string();
        args.extend(
            [
                "--nvml-lib",
                lib.to_str().unwrap(),
                "--config",
                config.to_str().unwrap(),
            ]
            .map(String::from),
        );
        args
    };
    let args = with_sysfs(run_args(&kubeconfig, "gpu-node-1", &[]));
    let agent = Agent::start(&args, &[("FAKE_NVML_FIXTURE", fixture.to_str().unwrap())]);
    let kubelet = map(&[("kubernetes.io/os", "linux")]);
    let with_nvml = union(&[&kubelet, &common::h100_default_labels()]);
    labels_become(&server, &agent, &with_nvml, "NVML answering");

    // The driver wedges.
    wedge(&agent, dir.path(), &fixture);
    // Longer than the old 6 s of the test above, and nothing changes.
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(
        server.labels("gpu-node-1"),
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
    let labels = with_sysfs(common_labels_args());
    let r = common::run_env(&labels, &[("FAKE_NVML_FIXTURE", seven.as_os_str())]);
    let mut want = common::labels_of(r.ok());
    want.extend(kubelet.clone());
    assert_eq!(want["feature.node.kubernetes.io/gpu.count"], "7");
    labels_become(&server, &agent, &want, "a GPU gone");
}

/// `labels -o json` of the Dell fixture (its sysfs root replaced by the caller).
fn common_labels_args() -> Vec<String> {
    let mut a = vec!["labels".to_string(), "-o".into(), "json".into()];
    a.extend(fixture_args());
    a
}

/// A critical XID under a running agent (#37): NVML's child keeps an event set open, and its
/// light check sees the XID fault, so the daemon relabels at once rather than at the next
/// interval; the XID clears after `clearAfter`, and the end of the hold wakes a relabel again.
#[test]
fn a_critical_xid_under_a_running_agent_wakes_a_relabel_and_clears() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("h100-8x.json");
    std::fs::copy(nvml_fixture("h100-8x"), &fixture).unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "sources:\n  nvml: {checkInterval: 200ms}\n  health: {clearAfter: 2s, criticalXids: [79]}\n",
    )
    .unwrap();
    let lib = fake_lib();
    let mut a = args(&lib);
    // A long interval: only the light check can explain a relabel within the test.
    let at = a.iter().position(|x| x == "1s").unwrap();
    a[at] = "10m".into();
    a.extend(["--config".to_string(), config.to_str().unwrap().to_string()]);
    let mut agent = Agent::start(&a, &[("FAKE_NVML_FIXTURE", fixture.to_str().unwrap())]);
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
