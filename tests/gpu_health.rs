//! GPU health from sysfs (`gpu.device` `health`, `gpu.node` `health`/`healthy_count`, the labels
//! `gpu.health` and `gpu.healthy.count`, `explain --label gpu.health`): each fault on a writable
//! copy of a real capture, broken the way the kernel shows it. No capture in hand shows a GPU
//! with a narrowed link, an unbound GPU or a RAS error, so each test derives one from the real
//! tree and says how (`tests/fixtures/sysfs/PROVENANCE.md` for the trees themselves):
//!
//! - a narrowed link: the GPU's `current_link_width` says `8` where `max_link_width` says `16`,
//!   as `lspci -vvv`'s `LnkSta: ... Width x8 (downgraded)` reads the same register;
//! - an unbound GPU: its `driver` link removed, as `echo <bdf> > .../nvidia/unbind` leaves it;
//! - a GPU held for passthrough: its `driver` link pointing at `vfio-pci`;
//! - AMD RAS: `ras/<block>_err_count` files in the format `amdgpu_ras_sysfs_read` prints
//!   (torvalds/linux drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c: `ue: %lu\nce: %lu\n`).

mod common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use common::{Tree, label_map, labels_of, pci_ids, proc_fixture, run, run_env};
use serde_json::Value;

const DELL: &str = "dell-xe9680-8xh100";

/// `COMMAND --sysfs-root ROOT --proc-root <the Dell's> --pci-ids ... [extra]` (NVML off unless
/// `extra` gives a library).
fn args(command: &[&str], root: &Path, extra: &[&str]) -> Vec<OsString> {
    let mut a: Vec<OsString> = command.iter().map(OsString::from).collect();
    a.extend([
        "--sysfs-root".into(),
        root.into(),
        "--proc-root".into(),
        proc_fixture(DELL).into(),
        "--pci-ids".into(),
        pci_ids().into(),
    ]);
    a.extend(extra.iter().map(OsString::from));
    a
}

/// Each GPU's `[address, health, its details...]`, the details as `key=value`.
fn health_of(features: &Value) -> Vec<Vec<String>> {
    features["instances"]["gpu.device"]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let a = g["attributes"].as_object().unwrap();
            let mut row = vec![
                a["address"].as_str().unwrap().to_string(),
                a["health"].as_str().unwrap().to_string(),
            ];
            row.extend(
                a.iter()
                    .filter(|(k, _)| k.starts_with("health_"))
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap())),
            );
            row
        })
        .collect()
}

fn row(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn ok(address: &str) -> Vec<String> {
    row(&[address, "ok"])
}

/// `features -o json` of the MI210 tree `t`: every GPU's health `ok` but 0000:26:00.0's, which
/// is `ras` with `detail`, and `warning` the one line of stderr.
fn assert_amd_ras(t: &Tree, detail: &str, warning: String) {
    let mut a: Vec<OsString> = vec!["features".into(), "-o".into(), "json".into()];
    a.extend(common::discovery_args(t.root(), Path::new("/nonexistent")));
    let r = run(a);
    let v: Value = serde_json::from_str(r.ok()).unwrap();
    assert_eq!(
        health_of(&v),
        amd_all_ok_but_26(&["0000:26:00.0", "ras", detail])
    );
    assert_eq!(r.stderr.lines().collect::<Vec<_>>(), [warning]);
}

/// The MI210 machine's eight GPUs' health rows, all `ok` but 0000:26:00.0's, which is `faulty`.
fn amd_all_ok_but_26(faulty: &[&str]) -> Vec<Vec<String>> {
    let mut expected: Vec<Vec<String>> = [
        "0000:03:00.0",
        "0000:26:00.0",
        "0000:43:00.0",
        "0000:63:00.0",
        "0000:83:00.0",
        "0000:a3:00.0",
        "0000:c3:00.0",
        "0000:e3:00.0",
    ]
    .iter()
    .map(|a| ok(a))
    .collect();
    expected[1] = row(faulty);
    expected
}

/// The whole label map of the node as `base` has it, with `gpu.health` and
/// `gpu.healthy.count` as given.
fn with_health(
    base: BTreeMap<String, String>,
    health: &str,
    healthy: &str,
) -> BTreeMap<String, String> {
    let mut m = base;
    m.extend(label_map(&[
        ("gpu.health", health),
        ("gpu.healthy.count", healthy),
    ]));
    m
}

/// The Dell's labels from sysfs alone, with this health.
fn dell(health: &str, healthy: &str) -> BTreeMap<String, String> {
    with_health(common::dell_sysfs_default_labels(), health, healthy)
}

/// The Dell tree with GPU 1 trained to x8 and GPU 4 unbound.
fn dell_with_faults() -> Tree {
    let t = Tree::copy_of(DELL);
    t.write_attr("0000:3b:00.0", "current_link_width", b"8\n");
    std::fs::remove_file(t.entry("0000:9b:00.0").join("driver")).unwrap();
    t
}

#[test]
fn a_narrowed_link_and_an_unbound_gpu_degrade_the_node() {
    let t = dell_with_faults();
    let r = run(args(&["features", "-o", "json"], t.root(), &["--no-nvml"]));
    let v: Value = serde_json::from_str(r.ok()).unwrap();
    assert_eq!(
        health_of(&v),
        [
            ok("0000:19:00.0"),
            row(&["0000:3b:00.0", "pcie-link", "health_pcie_link=x8 of x16"]),
            ok("0000:4c:00.0"),
            ok("0000:5d:00.0"),
            row(&[
                "0000:9b:00.0",
                "unbound",
                "health_unbound=no driver; the others are bound to nvidia"
            ]),
            ok("0000:bb:00.0"),
            ok("0000:cb:00.0"),
            ok("0000:db:00.0"),
        ]
    );
    let node = &v["attributes"]["gpu.node"]["elements"];
    assert_eq!(
        (
            node["count"].as_str(),
            node["health"].as_str(),
            node["healthy_count"].as_str()
        ),
        (Some("8"), Some("degraded"), Some("6"))
    );
    let r = run(args(&["labels", "-o", "json"], t.root(), &["--no-nvml"]));
    assert_eq!(labels_of(r.ok()), dell("degraded", "6"));
}

/// A link that runs at a lower *speed* is fine (GPUs drop to Gen1 when idle); only the width
/// counts, and the check can be switched off for parts that narrow the link when idle.
#[test]
fn link_speed_is_not_a_fault_and_the_width_check_can_be_off() {
    let t = Tree::copy_of(DELL);
    t.write_attr("0000:19:00.0", "current_link_speed", b"2.5 GT/s PCIe\n");
    t.write_attr("0000:3b:00.0", "current_link_width", b"8\n");
    let config = t.root().join("config.yaml");
    std::fs::write(&config, "sources:\n  health:\n    pcieLink: false\n").unwrap();
    let c = config.display().to_string();
    let r = run(args(
        &["labels", "-o", "json"],
        t.root(),
        &["--no-nvml", "--config", &c],
    ));
    assert_eq!(labels_of(r.ok()), dell("ok", "8"));
    let r = run(args(&["labels", "-o", "json"], t.root(), &["--no-nvml"]));
    assert_eq!(labels_of(r.ok()), dell("degraded", "7"));
}

/// A GPU bound to vfio-pci is held for a VM: not unbound, and not lost when NVML (which cannot
/// see it) leaves it out. The same GPU bound to `nvidia` and missing from NVML is lost.
#[test]
fn passthrough_is_not_a_fault_and_a_gpu_nvml_cannot_reach_is_lost() {
    let lib = common::fake_nvml_lib("nvidia_ml").display().to_string();
    let fixture = common::nvml_fixture("h100-8x-gpu3-lost");
    let env = [("FAKE_NVML_FIXTURE", fixture.as_os_str())];
    let features = |t: &Tree| {
        let r = run_env(
            args(&["features", "-o", "json"], t.root(), &["--nvml-lib", &lib]),
            &env,
        );
        let v: Value = serde_json::from_str(r.ok()).unwrap();
        health_of(&v)
    };
    let t = Tree::copy_of(DELL);
    let lost = row(&[
        "0000:5d:00.0",
        "lost",
        "health_lost=bound to nvidia, not listed by NVML",
    ]);
    let others = |gpu3: Vec<String>| {
        vec![
            ok("0000:19:00.0"),
            ok("0000:3b:00.0"),
            ok("0000:4c:00.0"),
            gpu3,
            ok("0000:9b:00.0"),
            ok("0000:bb:00.0"),
            ok("0000:cb:00.0"),
            ok("0000:db:00.0"),
        ]
    };
    assert_eq!(features(&t), others(lost));
    let link = t.entry("0000:5d:00.0").join("driver");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("../../../../../../bus/pci/drivers/vfio-pci", &link).unwrap();
    assert_eq!(features(&t), others(ok("0000:5d:00.0")));
}

/// amdgpu's RAS counters: a block with uncorrectable errors is a fault, corrected ones are not,
/// and a counter that cannot be read is a warning naming its file, the GPU's other facts kept.
#[test]
fn amd_ras_uncorrectable_errors_are_a_fault() {
    let t = Tree::copy_of("amd-mi210-8x");
    let ras = |bdf: &str, file: &str, text: &str| {
        let dir = t.device_dir(bdf).join("ras");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(file), text).unwrap();
        dir.join(file)
    };
    ras("0000:03:00.0", "umc_err_count", "ue: 0\nce: 12\n");
    ras("0000:03:00.0", "features", "feature mask: 0x3fff\n");
    ras("0000:26:00.0", "umc_err_count", "ue: 2\nce: 5\n");
    ras("0000:26:00.0", "gfx_err_count", "ue: 1\nce: 0\nde: 0\n");
    ras("0000:43:00.0", "sdma_err_count", "garbage\n");
    assert_amd_ras(
        &t,
        "health_ras=gfx 1 uncorrectable, umc 2 uncorrectable",
        format!(
            "warning: {}: no `ue: <count>` line; RAS counter left out",
            t.entry("0000:43:00.0").join("ras/sdma_err_count").display()
        ),
    );
}

/// `explain --label gpu.health` names each GPU's fault.
#[test]
fn explain_names_the_faulty_gpus() {
    let t = dell_with_faults();
    let r = run(args(
        &["explain", "--label", "gpu.health"],
        t.root(),
        &["--no-nvml"],
    ));
    let out = r.ok().to_string();
    let expected = common::explain_degraded(
        18,
        &[
            "gpu.node.health: 0000:3b:00.0: pcie-link (x8 of x16); 0000:9b:00.0: unbound (no driver; the others are bound to nvidia)",
        ],
        "6",
    );
    assert_eq!(out, expected);
}

/// `match` says which nodes a workload misses only because of their GPUs' health: the health
/// taint, or a `gpu.health` the pod asks for. A node that misses for another reason as well is
/// not one of them. The nodes are the fleet's first H100 (its real labels), as is and degraded.
#[test]
fn match_names_the_nodes_that_fail_only_on_gpu_health() {
    let fleet: Value = serde_json::from_str(
        &std::fs::read_to_string(common::fixtures().join("scheduling/nodes.json")).unwrap(),
    )
    .unwrap();
    let base = fleet["items"][0].clone();
    let node = |name: &str, degraded: bool, memory: &str| {
        let mut n = base.clone();
        n["metadata"]["name"] = name.into();
        let labels = &mut n["metadata"]["labels"];
        labels["feature.node.kubernetes.io/gpu.memory"] = memory.into();
        if degraded {
            labels["feature.node.kubernetes.io/gpu.health"] = "degraded".into();
            labels["feature.node.kubernetes.io/gpu.healthy.count"] = "7".into();
            n["spec"]["taints"] = serde_json::json!([{"key":
                "feature.node.kubernetes.io/gpu-unhealthy", "value": "true", "effect": "NoSchedule"}]);
        }
        n
    };
    let dir = tempfile::tempdir().unwrap();
    let nodes = dir.path().join("nodes.json");
    let items = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        node("h100-ok", false, "81559"),
        node("h100-sick", true, "81559"),
        node("h100-sick-small", true, "20000"),
    ]});
    std::fs::write(&nodes, items.to_string()).unwrap();
    let pod = dir.path().join("pods.yaml");
    std::fs::write(
        &pod,
        "\
apiVersion: v1
kind: Pod
metadata: {name: train}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: feature.node.kubernetes.io/gpu.memory, operator: Gt, values: [\"40535\"]}
  containers: [{name: c, image: x}]
---
apiVersion: v1
kind: Pod
metadata: {name: picky}
spec:
  nodeSelector: {feature.node.kubernetes.io/gpu.health: ok}
  tolerations: [{key: feature.node.kubernetes.io/gpu-unhealthy, operator: Exists}]
  containers: [{name: c, image: x}]
",
    )
    .unwrap();
    let r = run([
        OsString::from("match"),
        pod.clone().into(),
        "--nodes".into(),
        nodes.into(),
    ]);
    let out = r.stdout.replace(&dir.path().display().to_string(), "DIR");
    assert_eq!(
        out,
        "\
Pod train (DIR/pods.yaml:1:1)
NODE             FITS  REASON
h100-ok          yes
h100-sick        no    taint feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule not tolerated
h100-sick-small  no    taint feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule not tolerated (+1 more)
1/3 nodes are available: 2 node(s) had untolerated taint {feature.node.kubernetes.io/gpu-unhealthy: true}.
hint: gpu.memory: rule \"gpu memory (MiB, smallest GPU)\" of NodeFeatureRule gpu-labeler-gpu (builtin:rules/gpu.yaml:62:7) writes the value of gpu.node.memory_mib_min; closest to > 40535: h100-sick-small (20000)
health: h100-sick fails only because of its GPUs' health (gpu.health=degraded, 7 of 8 GPUs healthy, tainted feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule); it fits once they are healthy

Pod picky (DIR/pods.yaml:13:1)
NODE             FITS  REASON
h100-ok          yes
h100-sick        no    gpu.health=degraded, nodeSelector wants ok
h100-sick-small  no    gpu.health=degraded, nodeSelector wants ok
1/3 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.
hint: gpu.health: rule \"gpu health\" of NodeFeatureRule gpu-labeler-gpu (builtin:rules/gpu.yaml:259:7) writes the value of gpu.node.health; values on the nodes that miss: degraded (2)
health: h100-sick fails only because of its GPUs' health (gpu.health=degraded, 7 of 8 GPUs healthy, tainted feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule); it fits once they are healthy
health: h100-sick-small fails only because of its GPUs' health (gpu.health=degraded, 7 of 8 GPUs healthy, tainted feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule); it fits once they are healthy
"
    );
}

/// NVML's faults (from its child, the fake library on a fixture derived from the H100 capture,
/// `tests/fixtures/nvml/PROVENANCE.md`) join the GPUs' `health` with their details, in the
/// order `health` lists kinds, and degrade the node.
#[test]
fn nvml_faults_reach_each_gpus_health() {
    let lib = common::fake_nvml_lib("nvidia_ml").display().to_string();
    let fixture = common::nvml_fixture("h100-8x-faults");
    let env = [("FAKE_NVML_FIXTURE", fixture.as_os_str())];
    let t = Tree::copy_of(DELL);
    let r = run_env(
        args(&["features", "-o", "json"], t.root(), &["--nvml-lib", &lib]),
        &env,
    );
    let v: Value = serde_json::from_str(r.ok()).unwrap();
    let thermal = "health_thermal=hw-slowdown,hw-power-brake-slowdown";
    assert_eq!(
        health_of(&v),
        [
            row(&[
                "0000:19:00.0",
                "ecc,thermal",
                "health_ecc=3 volatile uncorrected",
                thermal
            ]),
            row(&[
                "0000:3b:00.0",
                "remap,thermal",
                "health_remap=pending",
                thermal
            ]),
            row(&[
                "0000:4c:00.0",
                "remap,thermal",
                "health_remap=failed",
                thermal
            ]),
            row(&[
                "0000:5d:00.0",
                "fabric,thermal",
                "health_fabric=failed: Insufficient resources",
                thermal
            ]),
            row(&[
                "0000:9b:00.0",
                "fabric",
                "health_fabric=degraded: degraded-bandwidth"
            ]),
            row(&[
                "0000:bb:00.0",
                "fabric",
                "health_fabric=degraded: route-unhealthy,insufficient-nvlinks"
            ]),
            ok("0000:cb:00.0"),
            ok("0000:db:00.0"),
        ]
    );
    let r = run_env(
        args(&["labels", "-o", "json"], t.root(), &["--nvml-lib", &lib]),
        &env,
    );
    assert_eq!(
        labels_of(r.ok()),
        with_health(common::h100_default_labels(), "degraded", "2")
    );
}

/// Issue 44: 20,000 `ras/*_err_count` files with uncorrectable errors made a 509 KB `health_ras`
/// and a file name with a newline reached the attribute and the log. The detail stays within a
/// label value's 63 characters (`+N more`), and the entry whose name amdgpu never writes is left
/// out with one warning that shows the name escaped.
#[test]
fn amd_ras_detail_is_bounded_and_odd_names_stay_out() {
    let t = Tree::copy_of("amd-mi210-8x");
    let dir = t.device_dir("0000:26:00.0").join("ras");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..20_000 {
        std::fs::write(dir.join(format!("b{i:05}_err_count")), "ue: 1\nce: 0\n").unwrap();
    }
    std::fs::write(dir.join("umc\nforged_err_count"), "ue: 5\nce: 0\n").unwrap();
    assert_amd_ras(
        &t,
        "health_ras=b00000 1 uncorrectable, b00001 1 uncorrectable, +19998 more",
        format!(
            "warning: {}: \"umc\\nforged_err_count\" is not an amdgpu RAS counter (its block is not 1 to 24 of [A-Za-z0-9_.-]); left out",
            t.entry("0000:26:00.0").join("ras").display()
        ),
    );
}
