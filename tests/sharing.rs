//! GPU sharing and virtualization.
//!
//! Time-slicing and MPS: the NVIDIA device plugin's configuration file named by
//! `sources.sharing.configFile` (tests/fixtures/sharing/, see PROVENANCE.md there) becomes
//! `gpu.sharing`, the default labels `gpu.sharing-strategy` and `gpu.replicas`, and GFD's
//! sharing labels in the `nvidia-gfd` profile. The node is the Dell XE9680 with 8x H100 through
//! the fake NVML (as tests/nvml.rs).
//!
//! Virtualization: NVIDIA vGPU guests from PCI configuration space (GFD's own test bytes,
//! tests/fixtures/pciconfig/), what an unprivileged reader's 64 bytes allow, SR-IOV PFs and VFs,
//! and the MI300X VFs of Azure's ND MI300X v5 (a guest sees no `physfn`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

mod common;
use common::{Run, label_map as map, repo};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");
const DELL: &str = "tests/fixtures/sysfs/dell-xe9680-8xh100";
const DELL_PROC: &str = "tests/fixtures/proc/dell-xe9680-8xh100";

fn sharing_file(name: &str) -> PathBuf {
    repo().join("tests/fixtures/sharing").join(name)
}

/// A gpu-labeler config naming `sharing` as the device-plugin file, plus `extra` lines.
fn config(dir: &Path, sharing: &Path, extra: &str) -> PathBuf {
    let text = format!(
        "sources:\n  sharing:\n    configFile: {}\n{extra}",
        sharing.display()
    );
    common::write_in(dir, "config.yaml", &text)
}

fn run(cmd: &str, config: &Path) -> Run {
    let config = config.to_str().unwrap();
    let args = [
        cmd,
        "-o",
        "json",
        "--sysfs-root",
        DELL,
        "--proc-root",
        DELL_PROC,
        "--config",
        config,
    ];
    common::run_fake_nvml(&args, "nvidia_ml", &common::nvml_fixture("h100-8x"))
}

fn labels(r: &Run) -> BTreeMap<String, String> {
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    serde_json::from_value(v["labels"].clone()).unwrap()
}

fn sharing_features(r: &Run) -> Value {
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    v["attributes"]["gpu.sharing"].clone()
}

/// The H100 node's default labels (tests/nvml.rs), with the sharing labels given.
fn h100_default(sharing: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut m = common::h100_default_labels();
    m.extend(map(sharing));
    m
}

/// GFD's labels for this node (gfd_labels__k8s-device-plugin-1501 plus what that excerpt cut),
/// with the sharing-dependent ones given.
fn h100_gfd(sharing: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut m = map(&[
        ("nvidia.com/cuda.driver-version.full", "535.161.08"),
        ("nvidia.com/cuda.driver-version.major", "535"),
        ("nvidia.com/cuda.driver-version.minor", "161"),
        ("nvidia.com/cuda.driver-version.revision", "08"),
        ("nvidia.com/cuda.driver.major", "535"),
        ("nvidia.com/cuda.driver.minor", "161"),
        ("nvidia.com/cuda.driver.rev", "08"),
        ("nvidia.com/cuda.runtime-version.full", "12.2"),
        ("nvidia.com/cuda.runtime-version.major", "12"),
        ("nvidia.com/cuda.runtime-version.minor", "2"),
        ("nvidia.com/cuda.runtime.major", "12"),
        ("nvidia.com/cuda.runtime.minor", "2"),
        ("nvidia.com/gpu.compute.major", "9"),
        ("nvidia.com/gpu.compute.minor", "0"),
        ("nvidia.com/gpu.count", "8"),
        ("nvidia.com/gpu.family", "hopper"),
        ("nvidia.com/gpu.machine", "PowerEdge-XE9680"),
        ("nvidia.com/gpu.memory", "81559"),
        ("nvidia.com/gpu.mode", "compute"),
        ("nvidia.com/mig.capable", "true"),
    ]);
    m.extend(map(sharing));
    m
}

/// `labels` with the GFD profile on and the device plugin's file `file` (a sharing fixture).
fn gfd_labels(file: &str) -> BTreeMap<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), &sharing_file(file), "profiles: [nvidia-gfd]\n");
    labels(&run("labels", &c))
}

/// What [`gfd_labels`] must give: our labels with `ours` (the sharing labels), and GFD's with
/// its product name, replicas, sharing strategy and `mps.capable`.
fn gfd_expected(
    ours: &[(&str, &str)],
    [product, replicas, strategy, mps]: [&str; 4],
) -> BTreeMap<String, String> {
    let mut expected = h100_default(ours);
    expected.extend(h100_gfd(&[
        ("nvidia.com/gpu.product", product),
        ("nvidia.com/gpu.replicas", replicas),
        ("nvidia.com/gpu.sharing-strategy", strategy),
        ("nvidia.com/mps.capable", mps),
    ]));
    expected
}

const H100: &str = "NVIDIA-H100-80GB-HBM3";
const SHARED: &str = "NVIDIA-H100-80GB-HBM3-SHARED";
const TIME_SLICED_10: [(&str, &str); 2] = [
    ("gpu.replicas", "10"),
    ("gpu.sharing-strategy", "time-slicing"),
];

#[test]
fn time_slicing_from_the_plugin_readme() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), &sharing_file("time-slicing.yaml"), "");
    assert_eq!(
        sharing_features(&run("features", &c)),
        json!({"elements": {"rename_by_default": "false", "replicas": "10",
                            "replicas.gpu": "10", "strategy": "time-slicing"}})
    );
    assert_eq!(
        labels(&run("labels", &c)),
        h100_default(&[
            ("gpu.replicas", "10"),
            ("gpu.sharing-strategy", "time-slicing")
        ])
    );
    assert_eq!(
        gfd_labels("time-slicing.yaml"),
        gfd_expected(&TIME_SLICED_10, [SHARED, "10", "time-slicing", "false"])
    );
}

#[test]
fn renamed_resources_keep_the_plain_product_name() {
    assert_eq!(
        gfd_labels("time-slicing-renamed.yaml"),
        gfd_expected(&TIME_SLICED_10, [H100, "10", "time-slicing", "false"])
    );
}

#[test]
fn mps_from_the_plugin_readme() {
    let ours = [("gpu.replicas", "10"), ("gpu.sharing-strategy", "mps")];
    assert_eq!(
        gfd_labels("mps.yaml"),
        gfd_expected(&ours, [SHARED, "10", "mps", "true"])
    );
}

#[test]
fn sharing_only_mig_resources_leaves_whole_gpus_unshared() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        &sharing_file("gpu-operator-full.yaml"),
        "profiles: [nvidia-gfd]\n",
    );
    assert_eq!(
        sharing_features(&run("features", &c)),
        json!({"elements": {"rename_by_default": "false", "replicas": "1",
                            "replicas.mig-1g.5gb": "2", "replicas.mig-2g.10gb": "4",
                            "strategy": "time-slicing"}})
    );
    let ours = [
        ("gpu.replicas", "1"),
        ("gpu.sharing-strategy", "time-slicing"),
    ];
    assert_eq!(
        labels(&run("labels", &c)),
        gfd_expected(&ours, [H100, "1", "none", "false"])
    );
}

#[test]
fn without_a_sharing_file_there_are_no_sharing_labels_but_gfd_says_none() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("config.yaml");
    std::fs::write(&c, "profiles: [nvidia-gfd]\n").unwrap();
    assert_eq!(
        labels(&run("labels", &c)),
        gfd_expected(&[], [H100, "1", "none", "false"])
    );
}

/// `labels` with the device plugin's file `sharing`: one warning, `why` and "gpu.sharing left
/// out", and the labels without sharing.
#[track_caller]
fn assert_left_out(dir: &Path, sharing: &Path, why: &str) {
    let r = run("labels", &config(dir, sharing, ""));
    assert_eq!(
        r.stderr.lines().collect::<Vec<_>>(),
        [format!("warning: {why}; gpu.sharing left out")]
    );
    assert_eq!(labels(&r), h100_default(&[]));
}

#[test]
fn a_bad_file_is_reported_with_line_and_column_and_shares_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (file, at, message) in [
        (
            "bad-replicas.yaml",
            "6:17",
            "number of replicas must be >= 2",
        ),
        (
            "bad-typo.yaml",
            "3:3",
            "unknown field `timeslicing`, expected one of timeSlicing, mps",
        ),
    ] {
        let path = sharing_file(file);
        let warning = format!("invalid sharing config {}:{at}: {message}", path.display());
        assert_left_out(dir.path(), &path, &warning);
    }
}

#[test]
fn a_missing_file_is_reported_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.yaml");
    let warning = format!(
        "cannot read sharing config {}: No such file or directory (os error 2)",
        missing.display()
    );
    assert_left_out(dir.path(), &missing, &warning);
}

#[test]
fn a_node_without_gpus_gets_no_sharing_label() {
    let dir = tempfile::tempdir().unwrap();
    let with = config(dir.path(), &sharing_file("time-slicing.yaml"), "");
    let without = dir.path().join("empty.yaml");
    std::fs::write(&without, "").unwrap();
    let this_vm = repo().join("tests/fixtures/sysfs/this-vm");
    let labels_with = |c: &Path| {
        let (vm, c) = (this_vm.to_str().unwrap(), c.to_str().unwrap());
        let no_proc = ["--no-nvml", "--proc-root", "/nonexistent"];
        let args = [
            &["labels", "-o", "json"],
            &no_proc[..],
            &["--sysfs-root", vm, "--config", c],
        ];
        common::labels_of(common::run(args.concat()).ok())
    };
    // The sharing file changes nothing where there is no GPU to share.
    assert_eq!(labels_with(&with), labels_with(&without));
}

// ---- virtualization ----

/// One PCI function in a sysfs tree under `root`.
struct Function<'a> {
    address: &'a str,
    vendor: &'a str,
    device: &'a str,
    class: &'a str,
    config: Option<&'a [u8]>,
    physfn: Option<&'a str>,
    sriov: Option<(u32, u32)>,
}

fn function(address: &str, vendor: &str, device: &str, class: &str) -> Function<'static> {
    Function {
        address: Box::leak(address.to_string().into_boxed_str()),
        vendor: Box::leak(vendor.to_string().into_boxed_str()),
        device: Box::leak(device.to_string().into_boxed_str()),
        class: Box::leak(class.to_string().into_boxed_str()),
        config: None,
        physfn: None,
        sriov: None,
    }
}

fn pci_tree(root: &Path, functions: &[Function]) {
    std::fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
    for f in functions {
        let dev = root.join("devices/pci0000:00").join(f.address);
        std::fs::create_dir_all(&dev).unwrap();
        for (k, v) in [
            ("class", f.class),
            ("vendor", f.vendor),
            ("device", f.device),
            ("subsystem_vendor", f.vendor),
            ("subsystem_device", "0x0000"),
        ] {
            std::fs::write(dev.join(k), format!("{v}\n")).unwrap();
        }
        if let Some(c) = f.config {
            std::fs::write(dev.join("config"), c).unwrap();
        }
        if let Some(pf) = f.physfn {
            std::os::unix::fs::symlink(format!("../{pf}"), dev.join("physfn")).unwrap();
        }
        if let Some((num, total)) = f.sriov {
            std::fs::write(dev.join("sriov_numvfs"), format!("{num}\n")).unwrap();
            std::fs::write(dev.join("sriov_totalvfs"), format!("{total}\n")).unwrap();
        }
        std::os::unix::fs::symlink(
            format!("../../../devices/pci0000:00/{}", f.address),
            root.join("bus/pci/devices").join(f.address),
        )
        .unwrap();
    }
}

/// `cmd` without NVML on a sysfs tree, with `config` lines; stdout as JSON.
fn offline(cmd: &str, root: &Path, config: &str) -> Value {
    let cfg = root.join("gpu-labeler.yaml");
    std::fs::write(&cfg, config).unwrap();
    let out = Command::new(BIN)
        .args([
            cmd,
            "-o",
            "json",
            "--no-nvml",
            "--proc-root",
            "/nonexistent",
        ])
        .arg("--sysfs-root")
        .arg(root)
        .arg("--config")
        .arg(&cfg)
        .arg("--pci-ids")
        .arg(repo().join("tests/fixtures/pci.ids"))
        .env_remove("GPU_LABELER_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn gpu_devices(f: &Value) -> Vec<BTreeMap<String, String>> {
    f["instances"]["gpu.device"]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| serde_json::from_value(g["attributes"].clone()).unwrap())
        .collect()
}

fn label_map(v: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(v["labels"].clone()).unwrap()
}

/// The `gpu.device` attributes of the vGPU guest's T4 (see [`vgpu_guest`]), with its `vgpu`
/// ones.
fn t4_guest(vgpu: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut a = attrs(&[
        ("address", "0000:00:05.0"),
        ("class", "0300"),
        ("device_id", "1eb8"),
        ("health", "ok"),
        ("index", "0"),
        ("is_vf", "false"),
        ("pcie_root", "0000:00"),
        ("product", "Tesla T4"),
        ("source", "sysfs"),
        ("vendor", "nvidia"),
        ("vendor_id", "10de"),
    ]);
    a.extend(attrs(vgpu));
    a
}

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn pciconfig(name: &str) -> Vec<u8> {
    std::fs::read(repo().join("tests/fixtures/pciconfig").join(name)).unwrap()
}

/// A T4 vGPU guest (GFD's mock: 10de:1eb8, a VGA controller to the guest) with this much of
/// its configuration space readable.
fn vgpu_guest(root: &Path, config: &[u8]) {
    let mut f = function("0000:00:05.0", "0x10de", "0x1eb8", "0x030000");
    f.config = Some(config);
    pci_tree(root, &[f]);
}

const GFD: &str = "profiles: [nvidia-gfd]\n";

/// The labels of a node with one T4 and no NVML (the profile's own labels aside).
const ONE_T4: [(&str, &str); 9] = [
    ("gpu-nvidia.count", "1"),
    ("gpu.count", "1"),
    ("gpu.health", "ok"),
    ("gpu.healthy.count", "1"),
    ("gpu.pcie.roots", "1"),
    ("gpu.present", "true"),
    ("gpu.product", "Tesla-T4"),
    ("gpu.vendor", "nvidia"),
    ("pci-0300_10de.present", "true"),
];

#[test]
fn a_vgpu_guest_is_recognised_from_its_configuration_space() {
    let dir = tempfile::tempdir().unwrap();
    vgpu_guest(dir.path(), &pciconfig("gfd-vgpu-guest-10de-1eb8.config"));
    assert_eq!(
        gpu_devices(&offline("features", dir.path(), "")),
        [t4_guest(&[
            ("vgpu", "true"),
            ("vgpu_capability", "present"),
            ("vgpu_host_driver_branch", "r460_00"),
            ("vgpu_host_driver_version", "460.16"),
        ])]
    );
    assert_eq!(
        label_map(&offline("labels", dir.path(), GFD)),
        map(&[
            &ONE_T4[..],
            &[
                ("gpu.vgpu.present", "true"),
                ("gpu.virtual", "true"),
                // GFD's vGPU labeler (NVML is off: no device labels, as GFD without NVML).
                ("nvidia.com/vgpu.host-driver-branch", "r460_00"),
                ("nvidia.com/vgpu.host-driver-version", "460.16"),
                ("nvidia.com/vgpu.present", "true"),
            ],
        ]
        .concat())
    );
}

#[test]
fn a_passthrough_gpu_is_not_a_vgpu() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = function("0000:00:05.0", "0x10de", "0x118a", "0x030000");
    let config = pciconfig("gfd-passthrough-10de-118a.config");
    f.config = Some(&config);
    pci_tree(dir.path(), &[f]);
    let features = offline("features", dir.path(), "");
    let gpu = &gpu_devices(&features)[0];
    assert_eq!(
        (gpu["vgpu"].as_str(), gpu["vgpu_capability"].as_str()),
        ("false", "absent")
    );
    assert_eq!(
        label_map(&offline("labels", dir.path(), GFD)),
        map(&[
            ("gpu-nvidia.count", "1"),
            ("gpu.count", "1"),
            ("gpu.health", "ok"),
            ("gpu.healthy.count", "1"),
            ("gpu.pcie.roots", "1"),
            ("gpu.present", "true"),
            ("gpu.vendor", "nvidia"),
            ("gpu.vgpu.present", "false"),
            ("gpu.virtual", "false"),
            ("pci-0300_10de.present", "true"),
            ("nvidia.com/vgpu.present", "false"),
        ])
    );
}

#[test]
fn an_unprivileged_reader_sees_64_bytes_and_claims_nothing() {
    let dir = tempfile::tempdir().unwrap();
    vgpu_guest(
        dir.path(),
        &pciconfig("gfd-vgpu-guest-10de-1eb8.config")[..64],
    );
    assert_eq!(
        gpu_devices(&offline("features", dir.path(), "")),
        [t4_guest(&[("vgpu_capability", "unknown")])]
    );
    // Neither gpu.vgpu.present nor gpu.virtual: unknown is not "false". GFD gives no vGPU label
    // either (it asks for privileged mode).
    assert_eq!(label_map(&offline("labels", dir.path(), GFD)), map(&ONE_T4));
}

#[test]
fn sriov_pf_with_vfs_and_the_vfs_it_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let mut pf = function("0000:00:04.0", "0x10de", "0x20b5", "0x030200");
    pf.sriov = Some((2, 20));
    let mut vf1 = function("0000:00:04.4", "0x10de", "0x20b5", "0x030200");
    vf1.physfn = Some("0000:00:04.0");
    let mut vf2 = function("0000:00:04.5", "0x10de", "0x20b5", "0x030200");
    vf2.physfn = Some("0000:00:04.0");
    pci_tree(dir.path(), &[pf, vf1, vf2]);
    let gpus = gpu_devices(&offline("features", dir.path(), ""));
    let project = |g: &BTreeMap<String, String>| {
        [
            "address",
            "is_vf",
            "physfn",
            "sriov_numvfs",
            "sriov_totalvfs",
        ]
        .iter()
        .filter_map(|k| Some((k.to_string(), g.get(*k)?.clone())))
        .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(
        gpus.iter().map(project).collect::<Vec<_>>(),
        [
            attrs(&[
                ("address", "0000:00:04.0"),
                ("is_vf", "false"),
                ("sriov_numvfs", "2"),
                ("sriov_totalvfs", "20"),
            ]),
            attrs(&[
                ("address", "0000:00:04.4"),
                ("is_vf", "true"),
                ("physfn", "0000:00:04.0"),
            ]),
            attrs(&[
                ("address", "0000:00:04.5"),
                ("is_vf", "true"),
                ("physfn", "0000:00:04.0"),
            ]),
        ]
    );
    assert_eq!(
        label_map(&offline("labels", dir.path(), "")),
        map(&[
            ("gpu-nvidia.count", "3"),
            ("gpu.count", "3"),
            ("gpu.health", "ok"),
            ("gpu.healthy.count", "3"),
            ("gpu.pcie.roots", "1"),
            ("gpu.present", "true"),
            ("gpu.product", "NVIDIA-A100-80GB-PCIe"),
            ("gpu.vendor", "nvidia"),
            ("gpu.vgpu.present", "false"),
            ("gpu.virtual", "true"),
            ("pci-0302_10de.present", "true"),
            ("pci-0302_10de.sriov.capable", "true"),
        ])
    );
}

#[test]
fn azure_nd_mi300x_v5_vfs_are_virtual() {
    // ROCm/k8s-device-plugin#112: 8x MI300X VF (1002:74b5) in an Azure ND96isr MI300X v5 guest;
    // the guest sees no physfn, only the VF device id. Class 1200 as MI300X functions have.
    let dir = tempfile::tempdir().unwrap();
    let functions: Vec<Function> = (0..8)
        .map(|i| {
            function(
                &format!("0000:00:{:02x}.0", 0x10 + i),
                "0x1002",
                "0x74b5",
                "0x120000",
            )
        })
        .collect();
    pci_tree(dir.path(), &functions);
    let gpus = gpu_devices(&offline("features", dir.path(), ""));
    assert_eq!(gpus.len(), 8);
    for (i, g) in gpus.iter().enumerate() {
        assert_eq!(
            g,
            &attrs(&[
                ("address", &format!("0000:00:{:02x}.0", 0x10 + i)),
                ("class", "1200"),
                ("device_id", "74b5"),
                ("health", "ok"),
                ("index", &i.to_string()),
                ("is_vf", "true"),
                ("pcie_root", "0000:00"),
                ("source", "sysfs"),
                ("vendor", "amd"),
                ("vendor_id", "1002"),
            ])
        );
    }
    assert_eq!(
        label_map(&offline("labels", dir.path(), GFD)),
        map(&[
            ("gpu-amd.count", "8"),
            ("gpu.count", "8"),
            ("gpu.health", "ok"),
            ("gpu.healthy.count", "8"),
            ("gpu.pcie.roots", "1"),
            ("gpu.present", "true"),
            ("gpu.vendor", "amd"),
            ("gpu.vgpu.present", "false"),
            ("gpu.virtual", "true"),
            ("pci-1200_1002.present", "true"),
        ])
    );
}
