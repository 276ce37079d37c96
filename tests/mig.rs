//! MIG through the real dlopen path (fake libnvidia-ml, fixtures in tests/fixtures/nvml/, see
//! PROVENANCE.md there): profile names as NVIDIA's tools write them (`+me` from the GPU instance
//! profile, GB by go-nvlib's rounding), `gpu.mig` and `gpu.migprofile`, the default labels
//! `gpu.mig.capable`, `gpu.mig.enabled`, `gpu.mig-<profile>.count`, and MIG devices that vanish
//! while they are read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

mod common;
use common::{Run, label_map as map, nvidia_sysfs, nvml_fixture as fixture};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");

fn run(args: &[&str], nvml_fixture: &Path) -> Run {
    let mut a = args.to_vec();
    a.extend(["--proc-root", "/nonexistent"]);
    common::run_fake_nvml(&a, "nvidia_ml", nvml_fixture)
}

fn features(root: &Path, nvml_fixture: &Path) -> Value {
    let r = run(
        &["features", "--sysfs-root", root.to_str().unwrap()],
        nvml_fixture,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
    serde_json::from_str(&r.stdout).unwrap()
}

fn labels(root: &Path, nvml_fixture: &Path) -> BTreeMap<String, String> {
    let r = run(
        &[
            "labels",
            "-o",
            "json",
            "--sysfs-root",
            root.to_str().unwrap(),
        ],
        nvml_fixture,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    serde_json::from_value(v["labels"].clone()).unwrap()
}

/// One MIG device as `gpu.mig` has it.
#[allow(clippy::too_many_arguments)]
fn mig(
    profile: &str,
    mib: u32,
    sms: u32,
    slices: u32,
    ce: u32,
    dec: u32,
    jpg: u32,
    ofa: u32,
) -> Value {
    json!({"attributes": {
        "engines_copy": ce.to_string(), "engines_decoder": dec.to_string(),
        "engines_encoder": "0", "engines_jpeg": jpg.to_string(), "engines_ofa": ofa.to_string(),
        "memory_mib": mib.to_string(), "multiprocessors": sms.to_string(),
        "parent_address": "0000:19:00.0", "parent_index": "0", "profile": profile,
        "slices_ci": slices.to_string(), "slices_gi": slices.to_string()}})
}

fn h200_migs() -> Vec<Value> {
    vec![
        mig("3g.71gb", 71168, 60, 3, 3, 3, 3, 0),
        mig("2g.35gb", 33024, 32, 2, 2, 2, 2, 0),
        mig("1g.18gb+me", 16384, 16, 1, 1, 1, 1, 1),
        mig("1g.18gb", 16384, 16, 1, 1, 1, 1, 0),
    ]
}

fn h200_labels(mig_counts: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut m = common::one_nvidia_gpu(&[
        ("gpu.compute.major", "9"),
        ("gpu.compute.minor", "0"),
        ("gpu.family", "hopper"),
        ("gpu.interconnect", "pcie"),
        ("gpu.memory", "143771"),
        ("gpu.memory.max", "143771"),
        ("gpu.memory.total", "143771"),
        ("gpu.mig.capable", "true"),
        ("gpu.mig.enabled", "true"),
        ("gpu.pcie.roots", "1"),
        ("gpu.product", "NVIDIA-H200"),
        ("pci-0302_10de.present", "true"),
    ]);
    m.extend(map(mig_counts));
    m
}

/// The H200 fixture has no bus id (the capture has none): NVML's GPU is placed by its own
/// order, so sysfs shows it at the address NVML would not report. Give it one.
fn h200_fixture(dir: &Path, faults: Value) -> PathBuf {
    common::edited_nvml_fixture(dir, "h200.json", "h200-mig-me", |f| {
        f["devices"][0]["pci_bus_id"] = json!("00000000:19:00.0");
        f["faults"] = faults;
    })
}

fn h200_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    nvidia_sysfs(&dir.path().join("sys"), &[("0000:19:00.0", "0x2335")]);
    dir
}

/// An H200 tree and its fixture with `faults`: (the directory, the fixture).
fn h200_with(faults: Value) -> (tempfile::TempDir, PathBuf) {
    let dir = h200_tree();
    let nvml = h200_fixture(dir.path(), faults);
    (dir, nvml)
}

#[test]
fn h200_profiles_are_named_as_nvidia_names_them_including_plus_me() {
    let (dir, nvml) = h200_with(json!({}));
    let f = features(&dir.path().join("sys"), &nvml);
    assert_eq!(
        f["instances"]["gpu.mig"]["elements"],
        Value::Array(h200_migs())
    );
    assert_eq!(
        f["attributes"]["gpu.migprofile"]["elements"],
        json!({"1g.18gb": "1", "1g.18gb+me": "1", "2g.35gb": "1", "3g.71gb": "1"})
    );
    assert_eq!(
        labels(&dir.path().join("sys"), &nvml),
        h200_labels(&[
            ("gpu.mig-1g.18gb.count", "1"),
            ("gpu.mig-1g.18gb.me.count", "1"),
            ("gpu.mig-2g.35gb.count", "1"),
            ("gpu.mig-3g.71gb.count", "1"),
        ])
    );
}

#[test]
fn without_the_gpu_instance_calls_the_name_comes_from_the_slices_alone() {
    // A driver (or a container without the MIG monitor capability) that refuses the GPU
    // instance queries: the `+me` instance cannot be told apart from a plain 1g.
    let (dir, nvml) = h200_with(
        json!({"errors": [{"function": "nvmlDeviceGetGpuInstanceById", "error": "NO_PERMISSION"}]}),
    );
    let f = features(&dir.path().join("sys"), &nvml);
    let mut expected = h200_migs();
    expected[2]["attributes"]["profile"] = json!("1g.18gb");
    assert_eq!(
        f["instances"]["gpu.mig"]["elements"],
        Value::Array(expected)
    );
    assert_eq!(
        labels(&dir.path().join("sys"), &nvml),
        h200_labels(&[
            ("gpu.mig-1g.18gb.count", "2"),
            ("gpu.mig-2g.35gb.count", "1"),
            ("gpu.mig-3g.71gb.count", "1"),
        ])
    );
}

#[test]
fn a_mig_device_that_vanishes_mid_scan_is_skipped_quietly() {
    // Slot 2 (the 1g.18gb+me) is listed, then gone when its attributes are read; slot 1's
    // handle is gone already.
    let (dir, nvml) = h200_with(json!({"errors": [
        {"function": "nvmlDeviceGetAttributes_v2", "gpu": 0, "mig": 2, "error": "NOT_FOUND"},
        {"function": "nvmlDeviceGetMigDeviceHandleByIndex", "gpu": 0, "mig": 1, "error": "NOT_FOUND"}
    ]}));
    let f = features(&dir.path().join("sys"), &nvml);
    let all = h200_migs();
    assert_eq!(
        f["instances"]["gpu.mig"]["elements"],
        json!([all[0], all[3]])
    );
    assert_eq!(
        labels(&dir.path().join("sys"), &nvml),
        h200_labels(&[
            ("gpu.mig-1g.18gb.count", "1"),
            ("gpu.mig-3g.71gb.count", "1"),
        ])
    );
}

#[test]
fn any_other_mig_failure_is_a_warning_and_the_rest_is_kept() {
    let (dir, nvml) = h200_with(json!({"errors": [
        {"function": "nvmlDeviceGetAttributes_v2", "gpu": 0, "mig": 0, "error": "UNKNOWN"}
    ]}));
    let r = run(
        &[
            "features",
            "--sysfs-root",
            dir.path().join("sys").to_str().unwrap(),
        ],
        &nvml,
    );
    assert_eq!(r.code, 0);
    assert_eq!(
        r.stderr.lines().collect::<Vec<_>>(),
        ["warning: GPU 0: NVML MIG device 0 attributes: an internal driver error occurred"]
    );
    let f: Value = serde_json::from_str(&r.stdout).unwrap();
    let all = h200_migs();
    assert_eq!(
        f["instances"]["gpu.mig"]["elements"],
        json!([all[1], all[2], all[3]])
    );
}

#[test]
fn a100_80gb_one_slice_instances_with_twice_the_memory_are_1g_20gb() {
    // telegraf__a100-sxm4-v12.xml: four 1g instances of 19968 MiB on an 80 GB A100: the
    // 1_SLICE_REV2 profile (id 15), 1g.20gb, not 1g.10gb.
    let dir = tempfile::tempdir().unwrap();
    nvidia_sysfs(dir.path(), &[("0000:01:00.0", "0x20b2")]);
    let nvml = fixture("a100-80gb-mig-4x1g");
    let f = features(dir.path(), &nvml);
    let profiles: Vec<&str> = f["instances"]["gpu.mig"]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["attributes"]["profile"].as_str().unwrap())
        .collect();
    assert_eq!(profiles, ["1g.20gb"; 4]);
    assert_eq!(
        f["attributes"]["gpu.migprofile"]["elements"],
        json!({"1g.20gb": "4"})
    );
    assert_eq!(
        labels(dir.path(), &nvml),
        common::one_nvidia_gpu(&[
            ("gpu.compute.major", "8"),
            ("gpu.compute.minor", "0"),
            ("gpu.cuda.major", "12"),
            ("gpu.cuda.minor", "2"),
            ("gpu.driver.major", "535"),
            ("gpu.driver.minor", "54"),
            ("gpu.driver.version", "535.54.03"),
            ("gpu.family", "ampere"),
            ("gpu.interconnect", "pcie"),
            ("gpu.memory", "81920"),
            ("gpu.memory.max", "81920"),
            ("gpu.memory.total", "81920"),
            ("gpu.mig-1g.20gb.count", "4"),
            ("gpu.mig.capable", "true"),
            ("gpu.mig.enabled", "true"),
            ("gpu.pcie.roots", "1"),
            ("gpu.product", "NVIDIA-A100-SXM4-80GB"),
            ("pci-0302_10de.present", "true"),
        ])
    );
}

#[test]
fn mig_devices_on_two_gpus_are_counted_per_profile_across_the_node() {
    // network-operator#211: 4x 1g.5gb and 2x 2g.10gb on A100-PCIE-40GB (fixture: two GPUs).
    let dir = tempfile::tempdir().unwrap();
    nvidia_sysfs(
        dir.path(),
        &[("0000:01:00.0", "0x20f1"), ("0000:41:00.0", "0x20f1")],
    );
    let nvml = fixture("a100-pcie-40gb-mig-mixed");
    let f = features(dir.path(), &nvml);
    assert_eq!(
        f["attributes"]["gpu.migprofile"]["elements"],
        json!({"1g.5gb": "4", "2g.10gb": "2"})
    );
    let parents = common::string_pairs(
        &f["instances"]["gpu.mig"]["elements"],
        "/attributes/parent_address",
        "/attributes/profile",
    );
    assert_eq!(
        parents,
        [
            ("0000:01:00.0", "1g.5gb"),
            ("0000:01:00.0", "1g.5gb"),
            ("0000:01:00.0", "1g.5gb"),
            ("0000:01:00.0", "1g.5gb"),
            ("0000:01:00.0", "2g.10gb"),
            ("0000:41:00.0", "2g.10gb"),
        ]
    );
    assert_eq!(
        labels(dir.path(), &nvml),
        map(&[
            ("gpu-nvidia.count", "2"),
            ("gpu.compute.major", "8"),
            ("gpu.compute.minor", "0"),
            ("gpu.count", "2"),
            ("gpu.health", "ok"),
            ("gpu.healthy.count", "2"),
            ("gpu.family", "ampere"),
            ("gpu.interconnect", "pcie"),
            ("gpu.memory", "40536"),
            ("gpu.memory.max", "40536"),
            ("gpu.memory.total", "81072"),
            ("gpu.mig-1g.5gb.count", "4"),
            ("gpu.mig-2g.10gb.count", "2"),
            ("gpu.mig.capable", "true"),
            ("gpu.mig.enabled", "true"),
            ("gpu.pcie.roots", "2"),
            ("gpu.present", "true"),
            ("gpu.product", "A100-PCIE-40GB"),
            ("gpu.vendor", "nvidia"),
            ("gpu.vgpu.present", "false"),
            ("gpu.virtual", "false"),
            ("pci-0302_10de.present", "true"),
        ])
    );
}

#[test]
fn a_snapshot_relabels_mig_identically() {
    let (dir, nvml) = h200_with(json!({}));
    let f = features(&dir.path().join("sys"), &nvml);
    let snap = dir.path().join("snap.json");
    std::fs::write(&snap, f.to_string()).unwrap();
    let out = Command::new(BIN)
        .args(["labels", "-o", "json", "--features"])
        .arg(&snap)
        .env_remove("GPU_LABELER_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let got: BTreeMap<String, String> = serde_json::from_value(v["labels"].clone()).unwrap();
    assert_eq!(got, labels(&dir.path().join("sys"), &nvml));
}

/// The A100-SXM4-40GB of the netdata capture with GPU instance 1 split into a 1c and a 2c
/// compute instance (tests/fixtures/nvml/PROVENANCE.md), at the bus id its GCP VM shows.
fn compute_instance_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    nvidia_sysfs(&dir.path().join("sys"), &[("0000:00:04.0", "0x20b0")]);
    dir
}

fn compute_instance_fixture(dir: &Path, edit: impl Fn(&mut Value)) -> PathBuf {
    common::edited_nvml_fixture(dir, "a100-ci.json", "a100-40gb-mig-ci", edit)
}

/// The labels of that GPU with one MIG device of each compute instance profile.
fn a100_ci_one_of_each() -> BTreeMap<String, String> {
    a100_ci_labels(&[
        ("gpu.mig-1c.3g.20gb.count", "1"),
        ("gpu.mig-2c.3g.20gb.count", "1"),
        ("gpu.mig-3g.20gb.count", "1"),
    ])
}

/// `gpu.mig` of that GPU: (profile, SMs, compute slices) per MIG device; 3 GPU instance slices,
/// 19968 MiB, 3 copy engines and 2 decoders each (shared within the GPU instance).
fn a100_ci_migs(rows: &[(&str, u32, u32)]) -> Value {
    Value::Array(
        rows.iter()
            .map(|(profile, sms, ci)| {
                json!({"attributes": {
                    "engines_copy": "3", "engines_decoder": "2", "engines_encoder": "0",
                    "engines_jpeg": "0", "engines_ofa": "0", "memory_mib": "19968",
                    "multiprocessors": sms.to_string(), "parent_address": "0000:00:04.0",
                    "parent_index": "0", "profile": profile, "slices_ci": ci.to_string(),
                    "slices_gi": "3"}})
            })
            .collect(),
    )
}

fn a100_ci_labels(mig_counts: &[(&str, &str)]) -> BTreeMap<String, String> {
    common::a100_40gb_mig_labels(mig_counts)
}

#[test]
fn compute_instances_smaller_than_their_gpu_instance_are_named_c_g_gb() {
    let dir = compute_instance_tree();
    let sys = dir.path().join("sys");
    let nvml = compute_instance_fixture(dir.path(), |_| {});
    let f = features(&sys, &nvml);
    assert_eq!(
        f["instances"]["gpu.mig"]["elements"],
        a100_ci_migs(&[
            ("1c.3g.20gb", 14, 1),
            ("2c.3g.20gb", 28, 2),
            ("3g.20gb", 42, 3)
        ])
    );
    assert_eq!(
        f["attributes"]["gpu.migprofile"]["elements"],
        json!({"1c.3g.20gb": "1", "2c.3g.20gb": "1", "3g.20gb": "1"})
    );
    assert_eq!(labels(&sys, &nvml), a100_ci_one_of_each());
}

#[test]
fn the_compute_instance_profile_decides_the_name_and_the_attributes_are_the_fallback() {
    // The MIG devices' attributes claim full-width compute instances; the compute instance
    // profiles (what go-nvlib asks) say 1c and 2c. The profiles win...
    let dir = compute_instance_tree();
    let sys = dir.path().join("sys");
    let wide = |f: &mut Value| {
        for m in f["devices"][0]["mig_devices"].as_array_mut().unwrap() {
            m["compute_instance_slice_count"] = json!(3);
        }
    };
    let nvml = compute_instance_fixture(dir.path(), wide);
    let profiles = |f: &Value| -> Vec<String> {
        f["instances"]["gpu.mig"]["elements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["attributes"]["profile"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        profiles(&features(&sys, &nvml)),
        ["1c.3g.20gb", "2c.3g.20gb", "3g.20gb"]
    );
    // ...and when the compute instance calls are refused (no MIG monitor permission) or a
    // driver has no compute instance profile, the attributes name the device.
    for faults in [
        json!({"errors": [{"function": "nvmlGpuInstanceGetComputeInstanceById",
                           "error": "NO_PERMISSION"}]}),
        json!({"errors": [{"function": "nvmlGpuInstanceGetComputeInstanceProfileInfo",
                           "error": "NOT_SUPPORTED"}]}),
        json!({"errors": [{"function": "nvmlComputeInstanceGetInfo_v2",
                           "error": "NOT_SUPPORTED"}]}),
    ] {
        let nvml = compute_instance_fixture(dir.path(), |f| {
            wide(f);
            f["faults"] = faults.clone();
        });
        assert_eq!(
            profiles(&features(&sys, &nvml)),
            ["3g.20gb", "3g.20gb", "3g.20gb"],
            "{faults}"
        );
    }
    // Without the compute instance calls' answers, the true attributes still give 1c and 2c.
    let nvml = compute_instance_fixture(dir.path(), |f| {
        f["faults"] = json!({"errors": [{"function": "nvmlGpuInstanceGetComputeInstanceById",
                                         "error": "NO_PERMISSION"}]});
    });
    assert_eq!(labels(&sys, &nvml), a100_ci_one_of_each());
}
