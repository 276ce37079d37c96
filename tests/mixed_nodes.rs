//! Nodes of several GPU models and vendors (#15): the real binary on two sysfs trees built from
//! real captures by `tests/fixtures/mixed/make_mixed.py` (see `tests/fixtures/mixed/PROVENANCE.md`),
//! with the fake `libnvidia-ml.so` answering for the NVIDIA GPUs and without NVML:
//!
//! - `h100-l40s`: 4x H100 SXM (the Dell XE9680 tree, socket 0) and 4x L40S (the same tree's
//!   socket-1 GPU slots), one vendor, two models;
//! - `nvidia-amd`: 2x H100 SXM (Dell tree) and 2x MI210 (the MI210 tree's KFD nodes 8 and 9,
//!   one XGMI hive), two vendors.
//!
//! Each run's whole label map is compared with a golden file in `tests/fixtures/mixed/golden/`
//! (`UPDATE_GOLDEN=1` rewrites them after review), and the facts a reader asks of a mixed node
//! (counts per vendor, model and family; no single product; memory min/max; vendor; links and
//! placement) are spelled out below as whole sub-maps.
//!
//! The NVML runs load `libnvidia_ml.so` from the target directory: build it first with
//! `cargo build -p fake-nvml` (`cargo test --workspace` does).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

mod common;
use common::{PREFIX, fake_nvml_lib, label_map, labels_of, repo, run_env};

type Labels = BTreeMap<String, String>;

fn mixed() -> PathBuf {
    repo().join("tests/fixtures/mixed")
}

/// The PCI ID database subset of the mixed trees (data/pci.ids 2025.07.11, the version the
/// binary embeds). `tests/fixtures/pci.ids` is made from `tests/fixtures/sysfs/` only and has no
/// L40S line; see `the_shared_pci_ids_subset_does_not_name_the_l40s`.
fn mixed_pci_ids() -> PathBuf {
    mixed().join("pci.ids")
}

#[derive(Clone, Copy)]
enum Nvml {
    /// `--nvml-lib <fake libnvidia_ml.so>` with `FAKE_NVML_FIXTURE=<node>.nvml.json`.
    Fake,
    /// `--no-nvml`.
    Off,
}

/// `gpu-labeler <command> --sysfs-root <node> --proc-root <proc/node> -o json --pci-ids <ids>`
/// with or without NVML; asserts exit 0 and an empty stderr, returns stdout.
fn run_on(command: &str, node: &str, nvml: Nvml, pci_ids: PathBuf) -> String {
    let mut args: Vec<OsString> = vec![
        command.into(),
        "--sysfs-root".into(),
        mixed().join(node).into(),
        "--proc-root".into(),
        mixed().join("proc").join(node).into(),
        "-o".into(),
        "json".into(),
        "--pci-ids".into(),
        pci_ids.into(),
    ];
    let fixture = mixed().join(format!("{node}.nvml.json"));
    let mut env: Vec<(&str, &OsStr)> = Vec::new();
    match nvml {
        Nvml::Fake => {
            args.push("--nvml-lib".into());
            args.push(fake_nvml_lib("nvidia_ml").into());
            env.push(("FAKE_NVML_FIXTURE", fixture.as_os_str()));
        }
        Nvml::Off => args.push("--no-nvml".into()),
    }
    let r = run_env(&args, &env);
    assert_eq!(r.code, 0, "{command} on {node}: stderr:\n{}", r.stderr);
    assert_eq!(r.stderr, "", "{command} on {node}: stderr");
    r.stdout
}

/// `labels -o json` of a node: stdout, checked against its golden file, and the label map.
fn labels(node: &str, nvml: Nvml) -> Labels {
    let stdout = run_on("labels", node, nvml, mixed_pci_ids());
    let source = match nvml {
        Nvml::Fake => "nvml",
        Nvml::Off => "sysfs",
    };
    check_golden(&format!("{node}.{source}.labels.json"), &stdout);
    labels_of(&stdout)
}

/// As `common::check_golden`, in `tests/fixtures/mixed/golden/` (common's directory is
/// `tests/fixtures/golden/`): byte for byte; `UPDATE_GOLDEN=1` rewrites the file.
fn check_golden(name: &str, actual: &str) {
    common::check_golden_in(&mixed().join("golden"), name, actual);
}

/// The labels whose key (without the NFD prefix) is one of `names` or starts with one of
/// `prefixes`.
fn group(labels: &Labels, names: &[&str], prefixes: &[&str]) -> Labels {
    labels
        .iter()
        .filter(|(k, _)| {
            let k = k.strip_prefix(PREFIX).unwrap_or(k);
            names.contains(&k) || prefixes.iter().any(|p| k.starts_with(p))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// How many GPUs: in all, per vendor, per model and per family, and how many models.
fn counts(labels: &Labels) -> Labels {
    group(
        labels,
        &["gpu.count", "gpu.models", "gpu.health", "gpu.healthy.count"],
        &["gpu-"],
    )
}

/// What needs every GPU to agree: product, vendor, family, compute capability.
fn identity(labels: &Labels) -> Labels {
    group(
        labels,
        &[
            "gpu.product",
            "gpu.vendor",
            "gpu.family",
            "gpu.compute.major",
            "gpu.compute.minor",
        ],
        &[],
    )
}

fn memory(labels: &Labels) -> Labels {
    group(labels, &[], &["gpu.memory"])
}

fn driver(labels: &Labels) -> Labels {
    group(labels, &[], &["gpu.driver.", "gpu.cuda.", "gpu.mig."])
}

/// Links and placement: interconnect, NUMA, PCIe roots, RDMA.
fn topology(labels: &Labels) -> Labels {
    group(
        labels,
        &["gpu.interconnect", "gpu.rdma.local"],
        &["gpu.numa.", "gpu.pcie."],
    )
}

/// NFD's PCI labels and the presence and virtualisation flags.
fn rest(labels: &Labels) -> Labels {
    group(
        labels,
        &["gpu.present", "gpu.vgpu.present", "gpu.virtual"],
        &["pci-"],
    )
}

/// The groups above cover every label: nothing in the golden file goes unread.
fn assert_groups_cover(labels: &Labels) {
    let mut all = Labels::new();
    for g in [
        counts(labels),
        identity(labels),
        memory(labels),
        driver(labels),
        topology(labels),
        rest(labels),
    ] {
        all.extend(g);
    }
    assert_eq!(&all, labels, "a label outside the groups the tests read");
}

/// `(address, vendor, source, product, memory_mib)` of each `gpu.device` of `features -o json`
/// (`-` where an attribute is absent), in the order gpu-labeler lists them.
fn devices(node: &str, nvml: Nvml) -> Vec<[String; 5]> {
    let stdout = run_on("features", node, nvml, mixed_pci_ids());
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("features -o json is JSON");
    v["instances"]["gpu.device"]["elements"]
        .as_array()
        .expect("gpu.device elements")
        .iter()
        .map(|g| {
            let a = |k: &str| g["attributes"][k].as_str().unwrap_or("-").to_string();
            [
                a("address"),
                a("vendor"),
                a("source"),
                a("product"),
                a("memory_mib"),
            ]
        })
        .collect()
}

/// NVML's names of the H100 and the L40S (and, for the H100, data/accelerators.yaml's), and the
/// PCI ID database's names of the L40S and the MI210.
const H100: &str = "NVIDIA H100 80GB HBM3";
const L40S: &str = "NVIDIA L40S";
const MI210: &str = "Aldebaran/MI200 [Instinct MI210]";

fn rows(expected: &[[&str; 5]]) -> Vec<[String; 5]> {
    expected.iter().map(|r| r.map(str::to_string)).collect()
}

/// The counts group of the h100-l40s node, the same through NVML and from sysfs alone.
fn h100_l40s_counts() -> Labels {
    label_map(&[
        ("gpu-family-ada-lovelace.count", "4"),
        ("gpu-family-hopper.count", "4"),
        ("gpu-model-NVIDIA-H100-80GB-HBM3.count", "4"),
        ("gpu-model-NVIDIA-L40S.count", "4"),
        ("gpu-nvidia.count", "8"),
        ("gpu.count", "8"),
        ("gpu.health", "ok"),
        ("gpu.healthy.count", "8"),
        ("gpu.models", "2"),
    ])
}

/// The rest group of the h100-l40s node, the same through NVML and from sysfs alone.
fn h100_l40s_rest() -> Labels {
    label_map(&[
        ("gpu.present", "true"),
        ("gpu.vgpu.present", "false"),
        ("gpu.virtual", "false"),
        ("pci-0302_10de.present", "true"),
        // The H100s' sriov_totalvfs (the L40S functions have none: not captured).
        ("pci-0302_10de.sriov.capable", "true"),
    ])
}

/// The counts group of the nvidia-amd node, the same through NVML and from sysfs alone.
fn nvidia_amd_counts() -> Labels {
    label_map(&[
        ("gpu-amd.count", "2"),
        ("gpu-family-gfx90a.count", "2"),
        ("gpu-family-hopper.count", "2"),
        ("gpu-model-Aldebaran-MI200-Instinct-MI210.count", "2"),
        ("gpu-model-NVIDIA-H100-80GB-HBM3.count", "2"),
        ("gpu-nvidia.count", "2"),
        ("gpu.count", "4"),
        ("gpu.health", "ok"),
        ("gpu.healthy.count", "4"),
        ("gpu.models", "2"),
    ])
}

/// The topology group of the nvidia-amd node, the same through NVML and from sysfs alone.
fn nvidia_amd_topology() -> Labels {
    label_map(&[
        ("gpu.interconnect", "xgmi"),
        ("gpu.numa.gpus.max", "2"),
        ("gpu.numa.nodes", "2"),
        ("gpu.pcie.roots", "4"),
    ])
}

/// The rest group of the nvidia-amd node, the same through NVML and from sysfs alone.
fn nvidia_amd_rest() -> Labels {
    label_map(&[
        ("gpu.present", "true"),
        ("gpu.vgpu.present", "false"),
        ("gpu.virtual", "false"),
        ("pci-0302_10de.present", "true"),
        ("pci-0302_10de.sriov.capable", "true"),
        ("pci-0380_1002.present", "true"),
    ])
}

// ---------------------------------------------------------------------------------------------
// 4x H100 SXM + 4x L40S

#[test]
fn h100_l40s_through_nvml() {
    let l = labels("h100-l40s", Nvml::Fake);
    assert_groups_cover(&l);
    // Per model and per family, NVML's names; no gpu.product, gpu.family or compute capability
    // (the GPUs differ), but one vendor.
    assert_eq!(counts(&l), h100_l40s_counts());
    assert_eq!(identity(&l), label_map(&[("gpu.vendor", "nvidia")]));
    // The smallest GPU (L40S, 46068 MiB), the largest (H100, 81559 MiB), and 4 x 81559 +
    // 4 x 46068.
    assert_eq!(
        memory(&l),
        label_map(&[
            ("gpu.memory", "46068"),
            ("gpu.memory.max", "81559"),
            ("gpu.memory.total", "510508"),
        ])
    );
    // One driver for both models; MIG: the H100s can, the L40S cannot ("some GPU can").
    assert_eq!(
        driver(&l),
        label_map(&[
            ("gpu.cuda.major", "12"),
            ("gpu.cuda.minor", "2"),
            ("gpu.driver.major", "535"),
            ("gpu.driver.minor", "161"),
            ("gpu.driver.version", "535.161.08"),
            ("gpu.mig.capable", "true"),
            ("gpu.mig.enabled", "false"),
        ])
    );
    // No NVSwitch in the tree and no NVLink the fake NVML reports (the fixture has no `nvlinks`:
    // NOT_SUPPORTED, as for a GPU without NVLink): every GPU's links known, none NVLink.
    // H100s on NUMA node 0, L40S on 1; each GPU under its own root port.
    assert_eq!(
        topology(&l),
        label_map(&[
            ("gpu.interconnect", "pcie"),
            ("gpu.numa.gpus.max", "4"),
            ("gpu.numa.nodes", "2"),
            ("gpu.pcie.roots", "8"),
        ])
    );
    assert_eq!(rest(&l), h100_l40s_rest());
}

#[test]
fn h100_l40s_from_sysfs_alone() {
    let l = labels("h100-l40s", Nvml::Off);
    assert_groups_cover(&l);
    // Both models are named as NVML names them (the `names` table of data/accelerators.yaml),
    // so the count keys are the NVML run's: a selector on them survives an NVML outage. The
    // families come from the chips the PCI ID database names (GH100, AD102GL), the ones NVML's
    // compute capability gives (9.0, 8.9).
    assert_eq!(counts(&l), h100_l40s_counts());
    assert_eq!(identity(&l), label_map(&[("gpu.vendor", "nvidia")]));
    assert_eq!(memory(&l), Labels::new(), "sysfs has no NVIDIA memory size");
    assert_eq!(driver(&l), Labels::new());
    // Without NVML the NVIDIA GPUs' links are unknown: no gpu.interconnect.
    assert_eq!(
        topology(&l),
        label_map(&[
            ("gpu.numa.gpus.max", "4"),
            ("gpu.numa.nodes", "2"),
            ("gpu.pcie.roots", "8"),
        ])
    );
    assert_eq!(rest(&l), h100_l40s_rest());
}

#[test]
fn h100_l40s_nvml_gpus_are_matched_to_their_functions_by_address() {
    // Eight GPUs, not sixteen: every NVML GPU found its sysfs function by bus id.
    assert_eq!(
        devices("h100-l40s", Nvml::Fake),
        rows(&[
            ["0000:19:00.0", "nvidia", "nvml", H100, "81559"],
            ["0000:3b:00.0", "nvidia", "nvml", H100, "81559"],
            ["0000:4c:00.0", "nvidia", "nvml", H100, "81559"],
            ["0000:5d:00.0", "nvidia", "nvml", H100, "81559"],
            ["0000:9b:00.0", "nvidia", "nvml", L40S, "46068"],
            ["0000:bb:00.0", "nvidia", "nvml", L40S, "46068"],
            ["0000:cb:00.0", "nvidia", "nvml", L40S, "46068"],
            ["0000:db:00.0", "nvidia", "nvml", L40S, "46068"],
        ])
    );
    assert_eq!(
        devices("h100-l40s", Nvml::Off),
        rows(&[
            ["0000:19:00.0", "nvidia", "sysfs", H100, "-"],
            ["0000:3b:00.0", "nvidia", "sysfs", H100, "-"],
            ["0000:4c:00.0", "nvidia", "sysfs", H100, "-"],
            ["0000:5d:00.0", "nvidia", "sysfs", H100, "-"],
            ["0000:9b:00.0", "nvidia", "sysfs", L40S, "-"],
            ["0000:bb:00.0", "nvidia", "sysfs", L40S, "-"],
            ["0000:cb:00.0", "nvidia", "sysfs", L40S, "-"],
            ["0000:db:00.0", "nvidia", "sysfs", L40S, "-"],
        ])
    );
}

#[test]
fn the_names_do_not_depend_on_the_pci_id_database() {
    // tests/fixtures/pci.ids covers tests/fixtures/sysfs/ only and has no L40S line; the names
    // table names both models all the same, so the model labels are the full database's. The
    // family is the database's (the chip, AD102GL): unknown for the L40S here, so no GPU's
    // family counts, rather than a count of the H100s alone.
    let stdout = run_on(
        "labels",
        "h100-l40s",
        Nvml::Off,
        repo().join("tests/fixtures/pci.ids"),
    );
    let mut want = labels("h100-l40s", Nvml::Off);
    want.retain(|k, _| !k.starts_with(&format!("{PREFIX}gpu-family-")));
    assert_eq!(labels_of(&stdout), want);
}

// ---------------------------------------------------------------------------------------------
// 2x H100 SXM + 2x MI210

#[test]
fn nvidia_amd_through_nvml() {
    let l = labels("nvidia-amd", Nvml::Fake);
    assert_groups_cover(&l);
    // Two vendors: counts per vendor, model and family; no gpu.vendor, product or family.
    assert_eq!(counts(&l), nvidia_amd_counts());
    assert_eq!(identity(&l), Labels::new());
    // The MI210 capture has no memory size: no GPU memory label describes every GPU.
    assert_eq!(memory(&l), Labels::new());
    // The driver version is the vendor's (one vendor only); CUDA and MIG are NVIDIA's alone and
    // stay.
    assert_eq!(
        driver(&l),
        label_map(&[
            ("gpu.cuda.major", "12"),
            ("gpu.cuda.minor", "2"),
            ("gpu.mig.capable", "true"),
            ("gpu.mig.enabled", "false"),
        ])
    );
    // The MI210s' XGMI link names the node's interconnect, though the H100s are not on it.
    assert_eq!(topology(&l), nvidia_amd_topology());
    assert_eq!(rest(&l), nvidia_amd_rest());
}

#[test]
fn nvidia_amd_from_sysfs_alone() {
    let l = labels("nvidia-amd", Nvml::Off);
    assert_groups_cover(&l);
    // The H100s' family from their chip (GH100), the MI210s' from KFD's gfx target.
    assert_eq!(counts(&l), nvidia_amd_counts());
    assert_eq!(identity(&l), Labels::new());
    assert_eq!(memory(&l), Labels::new());
    assert_eq!(driver(&l), Labels::new());
    assert_eq!(topology(&l), nvidia_amd_topology());
    assert_eq!(rest(&l), nvidia_amd_rest());
}

#[test]
fn nvidia_amd_gpus_each_from_their_own_source() {
    // NVML answers for the H100s only; the MI210s come from sysfs and the KFD topology (no
    // memory in that capture), whether NVML is there or not.
    assert_eq!(
        devices("nvidia-amd", Nvml::Fake),
        rows(&[
            ["0000:19:00.0", "nvidia", "nvml", H100, "81559"],
            ["0000:3b:00.0", "nvidia", "nvml", H100, "81559"],
            ["0000:83:00.0", "amd", "sysfs", MI210, "-"],
            ["0000:a3:00.0", "amd", "sysfs", MI210, "-"],
        ])
    );
    assert_eq!(
        devices("nvidia-amd", Nvml::Off),
        rows(&[
            ["0000:19:00.0", "nvidia", "sysfs", H100, "-"],
            ["0000:3b:00.0", "nvidia", "sysfs", H100, "-"],
            ["0000:83:00.0", "amd", "sysfs", MI210, "-"],
            ["0000:a3:00.0", "amd", "sysfs", MI210, "-"],
        ])
    );
}
