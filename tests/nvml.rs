//! NVIDIA discovery through the real dlopen path: the `gpu-labeler` binary loads the fake
//! `libnvidia-ml.so` built in this workspace (fake-nvml/), driven by fixtures taken from real
//! `nvidia-smi` captures (tests/fixtures/nvml/PROVENANCE.md).

use std::collections::BTreeMap;

use std::process::Command;

use serde_json::Value;

mod common;
use common::{
    Run, label_map as map, labels_of as labels, nvidia_sysfs, nvml_fixture as fixture, repo,
};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");
const P: &str = "feature.node.kubernetes.io/";
/// A sysfs root whose PCI bus lists no device: the GPUs are NVML's alone.
const NO_PCI_DEVICES: &str = "tests/fixtures/sysfs/no-pci-devices";

/// `COMMAND --sysfs-root ROOT --proc-root /nonexistent`: a tree of [`nvidia_sysfs`] alone.
fn on_tree<'a>(command: &[&'a str], root: &'a str) -> Vec<&'a str> {
    [
        command,
        &["--sysfs-root", root, "--proc-root", "/nonexistent"],
    ]
    .concat()
}

/// `COMMAND` on a new [`nvidia_sysfs`] tree of `gpus`, with the fake NVML library `lib`
/// answering from the fixture `nvml_fixture`.
fn run_on_gpus(gpus: &[(&str, &str)], command: &[&str], nvml_fixture: &str, lib: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    nvidia_sysfs(dir.path(), gpus);
    run(
        &on_tree(command, dir.path().to_str().unwrap()),
        nvml_fixture,
        lib,
    )
}

/// `gpu-labeler ARGS` with the fake NVML library `lib` answering from the fixture
/// `nvml_fixture`.
fn run(args: &[&str], nvml_fixture: &str, lib: &str) -> Run {
    common::run_fake_nvml(args, lib, &fixture(nvml_fixture))
}

const DELL: &str = "tests/fixtures/sysfs/dell-xe9680-8xh100";

fn dell_args<'a>(cmd: &'a str, proc_root: &'a str) -> Vec<&'a str> {
    vec![cmd, "--sysfs-root", DELL, "--proc-root", proc_root]
}

/// `COMMAND -o json` on the Dell, its /proc included, with the fake NVML answering `fixture`.
fn on_dell(command: &str, fixture: &str) -> Run {
    let mut args = dell_args(command, "tests/fixtures/proc/dell-xe9680-8xh100");
    args.extend(["-o", "json"]);
    run(&args, fixture, "nvidia_ml")
}

fn h100_labels() -> BTreeMap<String, String> {
    common::h100_default_labels()
}

#[test]
fn h100_hgx_through_nvml_gives_the_default_labels() {
    let r = on_dell("labels", "h100-8x");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(labels(&r.stdout), h100_labels());
    assert_eq!(r.stderr, "");
}

#[test]
fn h100_features_carry_nvml_values_per_gpu() {
    let r = run(
        &dell_args("features", "tests/fixtures/proc/dell-xe9680-8xh100"),
        "h100-8x",
        "nvidia_ml",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let gpus = v["instances"]["gpu.device"]["elements"].as_array().unwrap();
    let addresses: Vec<&str> = gpus
        .iter()
        .map(|g| g["attributes"]["address"].as_str().unwrap())
        .collect();
    assert_eq!(addresses, common::DELL_GPUS);
    let first: BTreeMap<String, String> =
        serde_json::from_value(gpus[0]["attributes"].clone()).unwrap();
    assert_eq!(
        first,
        map(&[
            ("address", "0000:19:00.0"),
            ("class", "0302"),
            ("compute_major", "9"),
            ("compute_minor", "0"),
            ("device_id", "2330"),
            ("driver", "nvidia"),
            ("family", "hopper"),
            ("health", "ok"),
            ("index", "0"),
            ("is_vf", "false"),
            ("memory_mib", "81559"),
            ("mig_capable", "true"),
            ("mig_enabled", "false"),
            ("numa_node", "0"),
            ("nvlinks", "18"),
            ("pcie_root", "0000:15"),
            ("product", "NVIDIA H100 80GB HBM3"),
            ("source", "nvml"),
            ("uuid", "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"),
            ("vendor", "nvidia"),
            ("vendor_id", "10de"),
            ("vgpu", "false"),
        ])
        .into_iter()
        .map(|(k, v)| (k.trim_start_matches(P).to_string(), v))
        .collect()
    );
    assert_eq!(
        v["attributes"]["gpu.driver"]["elements"],
        serde_json::json!({"cuda": "12.2", "nvidia": "535.161.08"})
    );
    assert_eq!(v["attributes"]["gpu.node"]["elements"]["nvml"], "ok");
}

#[test]
fn snapshot_with_nvml_relabels_identically_without_nvml() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap.json");
    let r = run(
        &dell_args("features", "tests/fixtures/proc/dell-xe9680-8xh100"),
        "h100-8x",
        "nvidia_ml",
    );
    std::fs::write(&snap, r.stdout).unwrap();
    let out = Command::new(BIN)
        .args(["labels", "-o", "json", "--features"])
        .arg(&snap)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        labels(&String::from_utf8(out.stdout).unwrap()),
        h100_labels()
    );
}

#[test]
fn a_lost_gpu_is_left_to_sysfs_and_the_others_keep_their_nvml_values() {
    let r = on_dell("features", "h100-8x-gpu3-lost");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stderr.lines().collect::<Vec<_>>(),
        [
            "warning: NVML GPU 3: device fell off the bus or has otherwise become inacessible; left to sysfs"
        ],
    );
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let sources: Vec<[&str; 4]> = v["instances"]["gpu.device"]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let a = &g["attributes"];
            [
                a["address"].as_str().unwrap(),
                a["source"].as_str().unwrap(),
                a["health"].as_str().unwrap(),
                a["health_lost"].as_str().unwrap_or("-"),
            ]
        })
        .collect();
    // GPU 3 is bound to nvidia (sysfs) and NVML, which answered, cannot reach it: `lost`.
    let lost = "bound to nvidia, not listed by NVML";
    assert_eq!(
        sources,
        [
            ["0000:19:00.0", "nvml", "ok", "-"],
            ["0000:3b:00.0", "nvml", "ok", "-"],
            ["0000:4c:00.0", "nvml", "ok", "-"],
            ["0000:5d:00.0", "sysfs", "lost", lost],
            ["0000:9b:00.0", "nvml", "ok", "-"],
            ["0000:bb:00.0", "nvml", "ok", "-"],
            ["0000:cb:00.0", "nvml", "ok", "-"],
            ["0000:db:00.0", "nvml", "ok", "-"],
        ]
    );
}

#[test]
fn a_lost_gpu_drops_only_the_labels_that_need_every_gpu() {
    let r = on_dell("labels", "h100-8x-gpu3-lost");
    let mut expected = h100_labels();
    // GPU 3's memory and compute capability are unknown: the node's come from the seven GPUs
    // NVML answered for (#44), so the total is theirs. Its product is known from sysfs, by the
    // same name NVML gives the others (one name whichever source answers), and so is its family
    // (its chip, GH100), so `gpu.product` and `gpu.family` stay.
    expected.insert(format!("{P}gpu.memory.total"), (7 * 81559).to_string());
    // GPU 3 is lost: still counted as present, not as healthy.
    expected.insert(format!("{P}gpu.health"), "degraded".into());
    expected.insert(format!("{P}gpu.healthy.count"), "7".into());
    assert_eq!(labels(&r.stdout), expected);
}

#[test]
fn driver_not_loaded_is_unavailable_and_sysfs_still_labels() {
    let mut args = dell_args("features", "/nonexistent");
    args.extend(["-o", "json"]);
    let r = run(&args, "init-driver-not-loaded", "nvidia_ml");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["attributes"]["gpu.node"]["elements"],
        serde_json::json!({
            "count": "8", "count_nvidia": "8", "expected_count": "8", "family": "hopper",
            "health": "ok", "healthy_count": "8", "homogeneous": "true", "interconnect": "nvlink",
            "numa_gpus_max": "4", "numa_nodes": "2", "nvml": "unavailable", "pcie_roots": "8",
            "product": "NVIDIA-H100-80GB-HBM3", "rdma_nic_local": "true", "vendor": "nvidia",
            "vendors": "nvidia",
            "vgpu_present": "false", "virtual": "false"
        })
    );
}

#[test]
fn a_missing_library_is_unavailable_not_an_error() {
    let out = Command::new(BIN)
        .args(dell_args("labels", "/nonexistent"))
        .args(["--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "-o", "json"])
        .arg("--pci-ids")
        .arg(repo().join("tests/fixtures/pci.ids"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        labels(&String::from_utf8(out.stdout).unwrap()),
        common::dell_sysfs_default_labels()
    );
}

#[test]
fn an_old_driver_without_mig_or_compute_capability_symbols_is_tolerated() {
    // The legacy library lacks the symbols entirely (FailedToLoadSymbol in nvml-wrapper).
    let r = run_on_gpus(
        &[("0000:43:00.0", "0x1cb3")],
        &["labels", "-o", "json"],
        "old-driver-no-mig",
        "nvidia_ml_legacy",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
    assert_eq!(labels(&r.stdout), common::p400_old_driver_labels());
}

#[test]
fn a100_40gb_with_two_3g_mig_devices() {
    let dir = tempfile::tempdir().unwrap();
    nvidia_sysfs(dir.path(), &[("0000:00:04.0", "0x20b0")]);
    let root = dir.path().to_str().unwrap();
    let r = run(
        &on_tree(&["features"], root),
        "a100-40gb-mig-2x3g",
        "nvidia_ml",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let mig = serde_json::json!({"attributes": {
        "engines_copy": "3", "engines_decoder": "2", "engines_encoder": "0", "engines_jpeg": "0",
        "engines_ofa": "0", "memory_mib": "19968", "multiprocessors": "42",
        "parent_address": "0000:00:04.0", "parent_index": "0", "profile": "3g.20gb",
        "slices_ci": "3", "slices_gi": "3"}});
    assert_eq!(
        v["instances"]["gpu.mig"]["elements"],
        serde_json::json!([mig.clone(), mig])
    );
    let labels = run(
        &on_tree(&["labels", "-o", "json"], root),
        "a100-40gb-mig-2x3g",
        "nvidia_ml",
    );
    assert_eq!(
        self::labels(&labels.stdout),
        common::a100_40gb_mig_labels(&[("gpu.mig-3g.20gb.count", "2")])
    );
}

#[test]
fn nvml_alone_discovers_gpus_when_sysfs_shows_none() {
    // A container without /sys mounted: NVML still finds the A10.
    let r = run(
        &on_tree(&["labels", "-o", "json"], NO_PCI_DEVICES),
        "a10",
        "nvidia_ml",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        labels(&r.stdout),
        common::one_nvidia_gpu(&[
            ("gpu.compute.major", "8"),
            ("gpu.compute.minor", "6"),
            ("gpu.cuda.major", "12"),
            ("gpu.cuda.minor", "2"),
            ("gpu.driver.major", "535"),
            ("gpu.driver.minor", "129"),
            ("gpu.driver.version", "535.129.03"),
            ("gpu.family", "ampere"),
            ("gpu.interconnect", "pcie"),
            ("gpu.memory", "23028"),
            ("gpu.memory.max", "23028"),
            ("gpu.memory.total", "23028"),
            ("gpu.mig.capable", "false"),
            ("gpu.mig.enabled", "false"),
            ("gpu.product", "NVIDIA-A10"),
        ])
    );
}

#[test]
fn two_different_gpus_are_labelled_deterministically() {
    let run_once = || {
        run(
            &on_tree(&["labels", "-o", "json"], NO_PCI_DEVICES),
            "workstation-titanv-rtx5880",
            "nvidia_ml",
        )
    };
    let first = run_once();
    assert_eq!(first.code, 0, "{}", first.stderr);
    // No product, family, compute capability or memory describes both GPUs: none is labelled;
    // the counts per model and per family say what is there.
    assert_eq!(
        labels(&first.stdout),
        map(&[
            // A count per model and per family, and the number of models (issue 15).
            ("gpu-family-ada-lovelace.count", "1"),
            ("gpu-family-volta.count", "1"),
            ("gpu-model-NVIDIA-RTX-5880-Ada-Generation.count", "1"),
            ("gpu-model-NVIDIA-TITAN-V.count", "1"),
            ("gpu.models", "2"),
            ("gpu-nvidia.count", "2"),
            ("gpu.count", "2"),
            ("gpu.health", "ok"),
            ("gpu.healthy.count", "2"),
            ("gpu.driver.major", "570"),
            ("gpu.driver.minor", "86"),
            ("gpu.driver.version", "570.86.15"),
            // Neither has NVLink (NVML: not supported).
            ("gpu.interconnect", "pcie"),
            ("gpu.mig.capable", "false"),
            ("gpu.mig.enabled", "false"),
            ("gpu.present", "true"),
            ("gpu.vendor", "nvidia"),
            ("gpu.vgpu.present", "false"),
            ("gpu.virtual", "false"),
        ])
    );
    for _ in 0..3 {
        assert_eq!(run_once().stdout, first.stdout);
    }
}

/// The single-model captures: each fixture's NVML values, on a sysfs tree with its GPUs at the
/// captured bus ids, give exactly these labels (memory MiB, compute capability, family, driver and
/// CUDA from the capture; `vgpu.present=false` from NVML's virtualization mode, passthrough for the
/// cloud VMs).
#[test]
fn every_single_model_capture_gives_its_labels() {
    // No capture has NVLink state: NVML says not supported, and the GPUs are linked by PCIe,
    // each under the root bus the tree puts it on.
    let common = |n: &str, roots: &str, cuda: (&str, &str), driver: (&str, &str, &str)| {
        vec![
            ("gpu-nvidia.count", n.to_string()),
            ("gpu.count", n.to_string()),
            ("gpu.health", "ok".to_string()),
            ("gpu.healthy.count", n.to_string()),
            ("gpu.interconnect", "pcie".to_string()),
            ("gpu.pcie.roots", roots.to_string()),
            ("gpu.cuda.major", cuda.0.to_string()),
            ("gpu.cuda.minor", cuda.1.to_string()),
            ("gpu.driver.major", driver.0.to_string()),
            ("gpu.driver.minor", driver.1.to_string()),
            ("gpu.driver.version", driver.2.to_string()),
            ("gpu.mig.capable", "false".to_string()),
            ("gpu.mig.enabled", "false".to_string()),
            ("gpu.present", "true".to_string()),
            ("gpu.vendor", "nvidia".to_string()),
            ("gpu.vgpu.present", "false".to_string()),
            ("gpu.virtual", "false".to_string()),
            ("pci-0302_10de.present", "true".to_string()),
        ]
    };
    let per_gpu = |product: &str, mib: u64, n: u64, cc: (&str, &str), family: &str| {
        vec![
            ("gpu.product", product.to_string()),
            ("gpu.memory", mib.to_string()),
            ("gpu.memory.max", mib.to_string()),
            ("gpu.memory.total", (mib * n).to_string()),
            ("gpu.compute.major", cc.0.to_string()),
            ("gpu.compute.minor", cc.1.to_string()),
            ("gpu.family", family.to_string()),
        ]
    };
    let rtx4090: Vec<(String, &str)> = ["01", "21", "41", "61", "81", "a1", "c1", "e1"]
        .iter()
        .map(|b| (format!("0000:{b}:00.0"), "0x2684"))
        .collect();
    let at = |a: &str, d: &'static str| (a.to_string(), d);
    // (fixture, GPUs at their captured bus ids, expected labels)
    type Case<'a> = (&'a str, Vec<(String, &'a str)>, Vec<(&'a str, String)>);
    let cases: Vec<Case> = vec![
        (
            "t4",
            vec![at("0000:00:1e.0", "0x1eb8")],
            [
                common("1", "1", ("11", "7"), ("515", "105", "515.105.01")),
                per_gpu("Tesla-T4", 15360, 1, ("7", "5"), "turing"),
            ]
            .concat(),
        ),
        (
            "a10g",
            vec![at("0000:00:1e.0", "0x2237")],
            [
                common("1", "1", ("11", "7"), ("515", "105", "515.105.01")),
                per_gpu("NVIDIA-A10G", 23028, 1, ("8", "6"), "ampere"),
            ]
            .concat(),
        ),
        (
            "rtx4090-8x",
            rtx4090,
            [
                common("8", "8", ("12", "2"), ("535", "154", "535.154.05")),
                per_gpu(
                    "NVIDIA-GeForce-RTX-4090",
                    24564,
                    8,
                    ("8", "9"),
                    "ada-lovelace",
                ),
            ]
            .concat(),
        ),
        (
            "workstation-2gpu",
            vec![at("0000:81:00.0", "0x2231"), at("0000:c1:00.0", "0x2231")],
            [
                common("2", "2", ("13", "1"), ("590", "44", "590.44.01")),
                per_gpu("NVIDIA-RTX-A5000", 24564, 2, ("8", "6"), "ampere"),
            ]
            .concat(),
        ),
    ];
    for (fixture_name, gpus, expected) in cases {
        let gpus: Vec<(&str, &str)> = gpus.iter().map(|(a, d)| (a.as_str(), *d)).collect();
        let r = run_on_gpus(&gpus, &["labels", "-o", "json"], fixture_name, "nvidia_ml");
        assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{fixture_name}");
        let expected: Vec<(&str, &str)> = expected.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(labels(&r.stdout), map(&expected), "{fixture_name}");
    }
}

/// A node with GPUs of two vendors: the MI210 server's eight AMD GPUs (KFD, sysfs) and one
/// NVIDIA A10G (NVML) added to a copy of its tree. Nothing describes every GPU, so no vendor,
/// product or family label; the counts per vendor, model and family say what is there.
#[test]
fn a_node_with_nvidia_and_amd_gpus_counts_each_vendor_and_family() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("sys");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(repo().join("tests/fixtures/sysfs/amd-mi210-8x"))
        .arg(&tree)
        .status()
        .unwrap();
    assert!(copied.success());
    nvidia_sysfs(&tree, &[("0000:00:1e.0", "0x2237")]);
    let root = tree.to_str().unwrap();
    let r = run(
        &on_tree(&["labels", "-o", "json"], root),
        "a10g",
        "nvidia_ml",
    );
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(
        labels(&r.stdout),
        map(&[
            ("gpu-amd.count", "8"),
            ("gpu-family-ampere.count", "1"),
            ("gpu-family-gfx90a.count", "8"),
            ("gpu-model-Aldebaran-MI200-Instinct-MI210.count", "8"),
            ("gpu-model-NVIDIA-A10G.count", "1"),
            ("gpu-nvidia.count", "1"),
            ("gpu.count", "9"),
            ("gpu.health", "ok"),
            ("gpu.healthy.count", "9"),
            ("gpu.cuda.major", "11"),
            ("gpu.cuda.minor", "7"),
            ("gpu.interconnect", "xgmi"),
            ("gpu.mig.capable", "false"),
            ("gpu.mig.enabled", "false"),
            ("gpu.models", "2"),
            // The MI210 tree puts each GPU on its own root bus, and the A10G on a ninth.
            ("gpu.pcie.roots", "9"),
            ("gpu.present", "true"),
            ("gpu.vgpu.present", "false"),
            ("gpu.virtual", "false"),
            ("pci-0302_10de.present", "true"),
            ("pci-0380_1002.present", "true"),
        ])
    );
}

/// One node, one name (#15): the Dell's 8x H100 found through sysfs alone (NVML not loaded) and
/// through NVML give the same `gpu.*` labels wherever both know them: the product is NVML's name
/// from the catalogue's device-id table either way, so a selector on `gpu.product` survives the
/// sysfs-to-NVML handover and an NVML outage. What NVML adds on top is listed whole.
#[test]
fn sysfs_and_nvml_name_and_label_the_gpus_alike() {
    let mut args = dell_args("labels", "tests/fixtures/proc/dell-xe9680-8xh100");
    args.extend(["-o", "json"]);
    let through_nvml = labels(&run(&args, "h100-8x", "nvidia_ml").stdout);
    args.push("--no-nvml");
    let out = Command::new(BIN)
        .args(&args)
        .arg("--pci-ids")
        .arg(repo().join("tests/fixtures/pci.ids"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let through_sysfs = labels(&String::from_utf8(out.stdout).unwrap());
    let shared: BTreeMap<String, String> = through_nvml
        .iter()
        .filter(|(k, _)| through_sysfs.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(through_sysfs, shared);
    assert_eq!(
        through_sysfs
            .get(&format!("{P}gpu.product"))
            .map(String::as_str),
        Some("NVIDIA-H100-80GB-HBM3")
    );
    let only_nvml: Vec<&str> = through_nvml
        .keys()
        .filter(|k| !through_sysfs.contains_key(*k))
        .map(|k| k.strip_prefix(P).unwrap_or(k))
        .collect();
    assert_eq!(
        only_nvml,
        vec![
            "gpu.compute.major",
            "gpu.compute.minor",
            "gpu.cuda.major",
            "gpu.cuda.minor",
            "gpu.driver.major",
            "gpu.driver.minor",
            "gpu.driver.version",
            "gpu.memory",
            "gpu.memory.max",
            "gpu.memory.total",
            "gpu.mig.capable",
            "gpu.mig.enabled",
        ]
    );
}

/// The A100 VM of `nvidia-smi nvlink --status`: 12 active NVLinks per GPU. Its GPUs alone in
/// sysfs (no NVSwitch function there), so only NVML can tell they are linked.
#[test]
fn nvml_nvlinks_make_the_interconnect_nvlink_where_sysfs_shows_no_switch() {
    let buses = common::AZURE_GPUS;
    let gpus: Vec<(&str, &str)> = buses.iter().map(|b| (*b, "0x20b2")).collect();
    let r = run_on_gpus(&gpus, &["features"], "a100-8x-nvlink", "nvidia_ml");
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let links = common::string_pairs(
        &v["instances"]["gpu.device"]["elements"],
        "/attributes/address",
        "/attributes/nvlinks",
    );
    let expected: Vec<(&str, &str)> = buses.iter().map(|b| (*b, "12")).collect();
    assert_eq!(links, expected);
    assert_eq!(
        v["attributes"]["gpu.node"]["elements"]["interconnect"],
        "nvlink"
    );
    // Without NVML the same tree says nothing of the link: no switch shows, and a bridge
    // between cards would not either.
    let sysfs_only = map(&[
        ("gpu-nvidia.count", "8"),
        ("gpu.count", "8"),
        ("gpu.health", "ok"),
        ("gpu.healthy.count", "8"),
        ("gpu.family", "ampere"),
        ("gpu.pcie.roots", "8"),
        ("gpu.present", "true"),
        ("gpu.product", "NVIDIA-A100-SXM4-80GB"),
        ("gpu.vendor", "nvidia"),
        ("gpu.vgpu.present", "false"),
        ("gpu.virtual", "false"),
        ("pci-0302_10de.present", "true"),
    ]);
    let labels_with = |fixture: &str| {
        labels(&run_on_gpus(&gpus, &["labels", "-o", "json"], fixture, "nvidia_ml").stdout)
    };
    assert_eq!(labels_with("init-driver-not-loaded"), sysfs_only);
    // NVML adds the link, and what only it knows.
    let mut with_nvml = sysfs_only;
    with_nvml.extend(map(&[
        ("gpu.compute.major", "8"),
        ("gpu.compute.minor", "0"),
        ("gpu.interconnect", "nvlink"),
        ("gpu.memory", "81920"),
        ("gpu.memory.max", "81920"),
        ("gpu.memory.total", "655360"),
        ("gpu.mig.capable", "false"),
        ("gpu.mig.enabled", "false"),
    ]));
    assert_eq!(labels_with("a100-8x-nvlink"), with_nvml);
}

fn gb200_fixture(dir: &std::path::Path, edit: impl Fn(&mut Value)) -> std::path::PathBuf {
    common::edited_nvml_fixture(dir, "gb200.json", "gb200-4x-clique", edit)
}

fn gb200_labels(nvml: &std::path::Path, config: Option<&str>) -> BTreeMap<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(on_tree(&["labels", "-o", "json"], NO_PCI_DEVICES))
        .arg("--nvml-lib")
        .arg(common::fake_nvml_lib("nvidia_ml"))
        .env("FAKE_NVML_FIXTURE", nvml)
        .env_remove("GPU_LABELER_CONFIG");
    if let Some(c) = config {
        let cfg = dir.path().join("config.yaml");
        std::fs::write(&cfg, c).unwrap();
        cmd.arg("--config").arg(cfg);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success());
    labels(&String::from_utf8(out.stdout).unwrap())
}

/// A GB200 NVL tray: four GPUs of one multi-node NVLink domain. `gpu.clique` is the cluster UUID
/// and clique id, as GFD's `nvidia.com/gpu.clique` (the value of NVIDIA's DRA documentation).
#[test]
fn gpus_of_one_nvlink_domain_give_its_clique() {
    let dir = tempfile::tempdir().unwrap();
    let nvml = gb200_fixture(dir.path(), |_| {});
    let clique = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766";
    assert_eq!(
        gb200_labels(&nvml, None),
        map(&[
            ("gpu-nvidia.count", "4"),
            ("gpu.clique", clique),
            ("gpu.compute.major", "10"),
            ("gpu.compute.minor", "0"),
            ("gpu.count", "4"),
            ("gpu.health", "ok"),
            ("gpu.healthy.count", "4"),
            ("gpu.family", "blackwell"),
            ("gpu.interconnect", "nvlink"),
            ("gpu.mig.capable", "false"),
            ("gpu.mig.enabled", "false"),
            ("gpu.present", "true"),
            ("gpu.product", "NVIDIA-GB200"),
            ("gpu.vendor", "nvidia"),
            ("gpu.vgpu.present", "false"),
            ("gpu.virtual", "false"),
        ])
    );
    // The nvidia-gfd profile gives GFD's key with the same value (its other labels: the GFD
    // profile's tests).
    let gfd = gb200_labels(&nvml, Some("profiles: [nvidia-gfd]\n"));
    let cliques: BTreeMap<&str, &str> = gfd
        .iter()
        .filter(|(k, _)| k.ends_with("/gpu.clique"))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        cliques,
        BTreeMap::from([
            ("feature.node.kubernetes.io/gpu.clique", clique),
            ("nvidia.com/gpu.clique", clique)
        ])
    );
}

#[test]
fn a_clique_needs_one_cluster_and_one_clique_among_the_attached_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let clique = |edit: &dyn Fn(&mut Value)| {
        let nvml = gb200_fixture(dir.path(), edit);
        let l = gb200_labels(&nvml, Some("profiles: [nvidia-gfd]\n"));
        (
            l.get(&format!("{P}gpu.clique")).cloned(),
            l.get("nvidia.com/gpu.clique").cloned(),
        )
    };
    // A GPU still registering with the fabric, or registered with an error, is not attached:
    // the others decide.
    let others = Some("9277d399-0674-44a9-b64e-d85bb19ce2b0.32766".to_string());
    assert_eq!(
        clique(&|f| f["devices"][1]["fabric"]["state"] = serde_json::json!(2)),
        (others.clone(), others.clone())
    );
    assert_eq!(
        clique(&|f| f["devices"][2]["fabric"]["status"] = serde_json::json!("NOT_READY")),
        (others.clone(), others)
    );
    // Two clique ids, or two clusters: none (GFD: "non-unique").
    assert_eq!(
        clique(&|f| f["devices"][3]["fabric"]["clique_id"] = serde_json::json!(1)),
        (None, None)
    );
    assert_eq!(
        clique(&|f| {
            f["devices"][0]["fabric"]["cluster_uuid"] =
                serde_json::json!("11111111-2222-3333-4444-555555555555")
        }),
        (None, None)
    );
    // A single-node NVSwitch system: completed, but no cluster (all-zero UUID).
    assert_eq!(
        clique(&|f| {
            for d in f["devices"].as_array_mut().unwrap() {
                d["fabric"].as_object_mut().unwrap().remove("cluster_uuid");
            }
        }),
        (None, None)
    );
}
