//! AMD and Intel GPUs from sysfs: real KFD topologies and amdgpu/i915 trees
//! (tests/fixtures/sysfs/GPU_PROVENANCE.md). Each fixture's expected values were derived by hand
//! from the capture (`<machine>.expected-gpu.json`), independently of this code.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The `gpu.device` keys the expected files speak about; each is compared whole (present with the
/// same value, or absent on both sides).
const KEYS: &[&str] = &[
    "address",
    "vendor",
    "vendor_id",
    "device_id",
    "class",
    "memory_mib",
    "gfx_target",
    "simd_count",
    "cu_count",
    "compute_partition",
    "memory_partition",
    "tiles",
    "driver",
    "numa_node",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `gpu-labeler COMMAND` on the sysfs tree `root`, without NVML or a proc tree.
fn on_tree(command: &[&str], root: &std::path::Path) -> common::Run {
    let mut args: Vec<std::ffi::OsString> = command.iter().map(Into::into).collect();
    args.extend(common::discovery_args(
        root,
        std::path::Path::new("/nonexistent"),
    ));
    common::run(args)
}

fn features(machine: &str) -> Value {
    let r = on_tree(
        &["features"],
        &repo().join("tests/fixtures/sysfs").join(machine),
    );
    let features = serde_json::from_str(r.ok()).unwrap();
    assert_eq!(r.stderr, "", "no warnings expected");
    features
}

fn project(attrs: &Value, keys: &[&str]) -> BTreeMap<String, String> {
    keys.iter()
        .filter_map(|k| Some((k.to_string(), attrs.get(*k)?.as_str()?.to_string())))
        .collect()
}

fn check(machine: &str) {
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(
            repo().join(format!("tests/fixtures/sysfs/{machine}.expected-gpu.json")),
        )
        .unwrap(),
    )
    .unwrap();
    let f = features(machine);
    let got: Vec<_> = f["instances"]["gpu.device"]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| project(&g["attributes"], KEYS))
        .collect();
    let want: Vec<_> = expected["gpu.device"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| project(g, KEYS))
        .collect();
    assert_eq!(got, want, "{machine}: gpu.device");

    let node_keys: Vec<&str> = [
        "count",
        "memory_mib_min",
        "memory_mib_max",
        "memory_mib_total",
    ]
    .to_vec();
    assert_eq!(
        project(&f["attributes"]["gpu.node"]["elements"], &node_keys),
        project(&expected["gpu.node"], &node_keys),
        "{machine}: gpu.node"
    );
}

#[test]
fn amd_mi210_8x_xgmi() {
    check("amd-mi210-8x");
}

#[test]
fn amd_vega10() {
    check("amd-vega10");
}

#[test]
fn amd_mi300x_cpx_partitions_are_one_gpu_each() {
    check("amd-mi300x-cpx");
}

#[test]
fn intel_tigerlake_integrated_has_unknown_memory() {
    check("intel-tigerlake-igpu");
}

#[test]
fn amd_mi300x_labels() {
    // The GPU at e5:00.0 has 7 of 8 partitions in the capture, so SIMDs differ but nothing
    // labelled here depends on them; memory is the same on all eight.
    assert_eq!(
        labels_of(&repo().join("tests/fixtures/sysfs/amd-mi300x-cpx")),
        label_map(&[
            ("gpu-amd.count", "8"),
            ("gpu.count", "8"),
            ("gpu.health", "ok"),
            ("gpu.healthy.count", "8"),
            ("gpu.family", "gfx942"),
            ("gpu.memory", "196592"),
            ("gpu.memory.max", "196592"),
            ("gpu.memory.total", "1572736"),
            ("gpu.numa.gpus.max", "4"),
            ("gpu.numa.nodes", "2"),
            ("gpu.pcie.roots", "8"),
            ("gpu.present", "true"),
            ("gpu.product", "Aqua-Vanjaram-Instinct-MI300X"),
            ("gpu.vendor", "amd"),
            ("gpu.vgpu.present", "false"),
            ("gpu.virtual", "false"),
            ("pci-1200_1002.present", "true"),
        ])
    );
}

/// `labels -o json` of a sysfs tree with the shipped rules, no NVML; no warning expected.
fn labels_of(root: &std::path::Path) -> BTreeMap<String, String> {
    let r = on_tree(&["labels", "-o", "json"], root);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    common::labels_of(&r.stdout)
}

fn label_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (format!("feature.node.kubernetes.io/{k}"), v.to_string()))
        .collect()
}

/// A copy of a fixture tree (symlinks kept) to break one thing in.
fn copy_of(machine: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-a")
        .arg(repo().join("tests/fixtures/sysfs").join(machine).join("."))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    dir
}

fn features_of(root: &std::path::Path) -> (Value, String) {
    // `common::run` fails on a panic.
    let r = on_tree(&["features"], root);
    assert_eq!(r.code, 0);
    (serde_json::from_str(&r.stdout).unwrap(), r.stderr)
}

fn gpu0(f: &Value) -> BTreeMap<String, String> {
    project(
        &f["instances"]["gpu.device"]["elements"][0]["attributes"],
        KEYS,
    )
}

fn vega_expected(changes: &[(&str, Option<&str>)]) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = [
        ("address", "0000:19:00.0"),
        ("vendor", "amd"),
        ("vendor_id", "1002"),
        ("device_id", "6860"),
        ("class", "0380"),
        ("memory_mib", "16368"),
        ("simd_count", "256"),
        ("cu_count", "64"),
        ("driver", "amdgpu"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in changes {
        match v {
            Some(v) => m.insert(k.to_string(), v.to_string()),
            None => m.remove(*k),
        };
    }
    m
}

#[test]
fn garbage_kfd_properties_skip_that_node_with_its_path() {
    let dir = copy_of("amd-vega10");
    let props = dir.path().join("class/kfd/kfd/topology/nodes/1/properties");
    let text = std::fs::read_to_string(&props)
        .unwrap()
        .replace("simd_count 256", "simd_count lots");
    std::fs::write(&props, text).unwrap();
    let (f, stderr) = features_of(dir.path());
    assert_eq!(
        stderr,
        format!(
            "warning: {}: simd_count is not a number: \"lots\"; KFD node skipped\n",
            props.display()
        )
    );
    // The GPU is still there, from PCI; what only the KFD knew is left out.
    assert_eq!(
        gpu0(&f),
        vega_expected(&[
            ("memory_mib", None),
            ("simd_count", None),
            ("cu_count", None)
        ])
    );
}

#[test]
fn non_numeric_vram_total_falls_back_to_the_kfd_banks() {
    let dir = copy_of("amd-vega10");
    let file = dir
        .path()
        .join("devices/pci0000:19/0000:19:00.0/mem_info_vram_total");
    let file = if file.parent().unwrap().exists() {
        file
    } else {
        std::fs::canonicalize(dir.path().join("bus/pci/devices/0000:19:00.0"))
            .unwrap()
            .join("mem_info_vram_total")
    };
    std::fs::write(&file, "sixteen gigs\n").unwrap();
    let (f, stderr) = features_of(dir.path());
    let shown = dir
        .path()
        .join("bus/pci/devices/0000:19:00.0/mem_info_vram_total");
    assert_eq!(
        stderr,
        format!(
            "warning: {}: not a number: \"sixteen gigs\"; attribute left out\n",
            shown.display()
        )
    );
    assert_eq!(gpu0(&f), vega_expected(&[]));
}

#[test]
fn an_invalid_utf8_product_name_is_reported_with_its_path() {
    let dir = copy_of("amd-vega10");
    let dev = dir.path().join("bus/pci/devices/0000:19:00.0");
    std::fs::write(dev.join("product_name"), b"Radeon \xff\xfe Instinct\n").unwrap();
    let (f, stderr) = features_of(dir.path());
    assert_eq!(
        stderr,
        format!(
            "warning: {}: binary content, not a text attribute; attribute left out\n",
            dev.join("product_name").display()
        )
    );
    assert_eq!(gpu0(&f), vega_expected(&[]));
}

/// The GPU interconnect on real trees (#15, topology): NVSwitch functions (the XE9680's four
/// H100 NVSwitches `22a3`, the ND A100 v4's six A100 NVSwitches `1af1`) give `nvlink`; the
/// MI210 server's KFD io_links of type 11 give `xgmi`, 3 links per GPU (two hives of four);
/// the DGX-2H's eleven readable V100 NVSwitches `1ac2` give `nvlink` too;
/// a Vega 10 whose io_links are all PCIe gives `pcie`; the MI300X capture whose KFD nodes list
/// no io_links says nothing (and does not claim zero links either).
#[test]
fn the_interconnect_comes_from_nvswitch_functions_and_kfd_io_links() {
    let seen = |machine: &str| -> (Option<String>, Vec<Option<String>>) {
        let f = features(machine);
        let node = f["attributes"]["gpu.node"]["elements"]["interconnect"]
            .as_str()
            .map(str::to_string);
        let links = f["instances"]["gpu.device"]["elements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["attributes"]["xgmi_links"].as_str().map(str::to_string))
            .collect();
        (node, links)
    };
    let s = |v: &str| Some(v.to_string());
    assert_eq!(seen("dell-xe9680-8xh100"), (s("nvlink"), vec![None; 8]));
    assert_eq!(seen("azure-nd-a100-v4"), (s("nvlink"), vec![None; 8]));
    assert_eq!(seen("amd-mi210-8x"), (s("xgmi"), vec![s("3"); 8]));
    assert_eq!(seen("amd-vega10"), (s("pcie"), vec![s("0")]));
    assert_eq!(seen("amd-mi300x-cpx"), (None, vec![None; 8]));
    assert_eq!(seen("nvidia-dgx2h"), (s("nvlink"), vec![None; 16]));
}

/// An RDMA NIC next to every GPU (#15, topology): the XE9680's ConnectX functions (`mlx5_core`)
/// sit on both NUMA nodes that hold its H100s; the MI210 server has none; the ND A100 v4 VM
/// shows no NUMA node at all (`-1`), so nothing is claimed.
#[test]
fn an_rdma_nic_on_every_gpus_numa_node() {
    let local = |machine: &str| {
        features(machine)["attributes"]["gpu.node"]["elements"]["rdma_nic_local"]
            .as_str()
            .map(str::to_string)
    };
    assert_eq!(local("dell-xe9680-8xh100"), Some("true".to_string()));
    assert_eq!(local("amd-mi210-8x"), None);
    assert_eq!(local("azure-nd-a100-v4"), None);
}

/// The MI210 server alone (#15, xGMI): eight MI210s in two XGMI hives of four, one root bus
/// each, four per socket; the whole label map.
#[test]
fn mi210_8x_labels() {
    assert_eq!(
        labels_of(&repo().join("tests/fixtures/sysfs/amd-mi210-8x")),
        label_map(&[
            ("gpu-amd.count", "8"),
            ("gpu.count", "8"),
            ("gpu.health", "ok"),
            ("gpu.healthy.count", "8"),
            ("gpu.family", "gfx90a"),
            ("gpu.interconnect", "xgmi"),
            ("gpu.numa.gpus.max", "4"),
            ("gpu.numa.nodes", "2"),
            ("gpu.pcie.roots", "8"),
            ("gpu.present", "true"),
            ("gpu.product", "Aldebaran-MI200-Instinct-MI210"),
            ("gpu.vendor", "amd"),
            ("gpu.vgpu.present", "false"),
            ("gpu.virtual", "false"),
            ("pci-0380_1002.present", "true"),
        ])
    );
}

/// The DGX-2H tree's labels, its GPUs named `product`.
fn dgx2h_labels(product: &str) -> BTreeMap<String, String> {
    label_map(&[
        ("gpu-nvidia.count", "16"),
        ("gpu.count", "16"),
        // Its DMI product and its 11 NVSwitches (two HGX-2 boards) both say 16.
        ("gpu.count.expected", "16"),
        ("gpu.health", "ok"),
        ("gpu.healthy.count", "16"),
        ("gpu.family", "volta"),
        ("gpu.interconnect", "nvlink"),
        ("gpu.numa.gpus.max", "8"),
        ("gpu.numa.nodes", "2"),
        ("gpu.pcie.roots", "4"),
        ("gpu.present", "true"),
        ("gpu.product", product),
        ("gpu.vendor", "nvidia"),
        ("gpu.vgpu.present", "false"),
        ("gpu.virtual", "false"),
        ("pci-0302_10de.present", "true"),
    ])
}

/// A DGX with NVSwitch (#15): the DGX-2H of hwloc's nvidiaDGX2.xml (GPU_PROVENANCE.md,
/// nvidia-dgx2h). Sixteen V100 SXM3 behind PLX switches, four under each of four root ports,
/// eight per socket, and NVSwitch functions (`10de:1ac2`, class 0680) on two of those root
/// ports. Expected values read off the XML: every GPU's NUMA node and root port, NVML's name
/// for the board (subsystem `10de:131d`), and the whole label map.
#[test]
fn dgx2h_sixteen_v100_behind_nvswitches() {
    let root = repo().join("tests/fixtures/sysfs/nvidia-dgx2h");
    assert_eq!(labels_of(&root), dgx2h_labels("Tesla-V100-SXM3-32GB-H"));
    let (f, stderr) = features_of(&root);
    assert_eq!(stderr, "");
    let placement = |g: &Value| {
        let a = &g["attributes"];
        ["address", "numa_node", "pcie_root", "product"].map(|k| a[k].as_str().unwrap().to_string())
    };
    let got: Vec<_> = f["instances"]["gpu.device"]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(placement)
        .collect();
    let name = "Tesla V100-SXM3-32GB-H";
    let want: Vec<_> = [
        ("0000:34:00.0", "0", "0000:2b"),
        ("0000:36:00.0", "0", "0000:2b"),
        ("0000:39:00.0", "0", "0000:2b"),
        ("0000:3b:00.0", "0", "0000:2b"),
        ("0000:57:00.0", "0", "0000:4e"),
        ("0000:59:00.0", "0", "0000:4e"),
        ("0000:5c:00.0", "0", "0000:4e"),
        ("0000:5e:00.0", "0", "0000:4e"),
        ("0000:b7:00.0", "1", "0000:ae"),
        ("0000:b9:00.0", "1", "0000:ae"),
        ("0000:bc:00.0", "1", "0000:ae"),
        ("0000:be:00.0", "1", "0000:ae"),
        ("0000:e0:00.0", "1", "0000:d7"),
        ("0000:e2:00.0", "1", "0000:d7"),
        ("0000:e5:00.0", "1", "0000:d7"),
        ("0000:e7:00.0", "1", "0000:d7"),
    ]
    .iter()
    .map(|(a, n, r)| [a, n, r, &name].map(|s| s.to_string()))
    .collect();
    assert_eq!(got, want);
}

/// NVML's name is per board where one device id has several: `1db8` with the DGX-2H's
/// subsystem `10de:131d` is "Tesla V100-SXM3-32GB-H"; the same device id on another board keeps
/// the PCI ID database's name rather than be given the DGX-2H's.
#[test]
fn a_device_ids_nvml_name_follows_its_subsystem() {
    let tree = copy_of("nvidia-dgx2h");
    for dev in std::fs::read_dir(tree.path().join("bus/pci/drivers/nvidia")).unwrap() {
        let dev = dev.unwrap().path();
        std::fs::write(dev.join("subsystem_device"), "0x12ab\n").unwrap();
    }
    assert_eq!(
        labels_of(tree.path()),
        dgx2h_labels("GV100GL-Tesla-V100-SXM3-32GB")
    );
}

/// `i40e` drives the X710 family, which has no RDMA, and the X722, which has (iWARP through
/// `irdma`): on the XE9680 with socket 1's ConnectX functions turned into `i40e` functions,
/// X710 ids (`1572`) leave socket 1's GPUs without a local RDMA NIC, X722 ids (`37d2`) give them
/// one.
#[test]
fn an_x722_counts_as_an_rdma_nic_and_an_x710_does_not() {
    let local = |device: &str| {
        let tree = copy_of("dell-xe9680-8xh100");
        let drivers = tree.path().join("bus/pci/drivers");
        std::fs::create_dir_all(drivers.join("i40e")).unwrap();
        for entry in std::fs::read_dir(drivers.join("mlx5_core")).unwrap() {
            let link = entry.unwrap().path();
            let dev = std::fs::canonicalize(&link).unwrap();
            if std::fs::read_to_string(dev.join("numa_node"))
                .unwrap()
                .trim()
                != "1"
            {
                continue;
            }
            std::fs::write(dev.join("vendor"), "0x8086\n").unwrap();
            std::fs::write(dev.join("device"), format!("0x{device}\n")).unwrap();
            let target = std::fs::read_link(dev.join("driver")).unwrap();
            let target = target.to_str().unwrap().replace("mlx5_core", "i40e");
            std::fs::remove_file(dev.join("driver")).unwrap();
            std::os::unix::fs::symlink(target, dev.join("driver")).unwrap();
            std::fs::rename(&link, drivers.join("i40e").join(link.file_name().unwrap())).unwrap();
        }
        let (f, stderr) = features_of(tree.path());
        assert_eq!(stderr, "");
        let node = &f["attributes"]["gpu.node"]["elements"];
        (
            node["rdma_nic_local"].as_str().map(str::to_string),
            f["instances"]["pci.device"]["elements"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["attributes"]["driver"] == "i40e")
                .count(),
        )
    };
    assert_eq!(local("1572"), (None, 6));
    assert_eq!(local("37d2"), (Some("true".to_string()), 6));
}
