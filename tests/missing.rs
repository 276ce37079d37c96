//! GPUs that never enumerated: `gpu.node` `expected_count` and the node fault `missing`, the
//! label `gpu.count.expected` and `gpu.health` (docs/health.md#missing-gpus). Every multi-GPU
//! capture with one and with two GPUs taken out of its sysfs tree, the way the kernel leaves a
//! node whose GPU never came up on PCI: the function's directory, its `bus/pci/devices` entry and
//! its driver's back-link gone; the NVSwitches stay (they are on the board, not on the GPU); the
//! KFD topology node of the GPU stays only where the test says why.
//!
//! A row is a fixture in, the node's health attributes out, compared whole: `count`,
//! `expected_count`, `missing`, `health_missing`, `health`, `healthy_count`.

mod apiserver;
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Tree, label_map, labels_of, pci_ids, proc_fixture, run, run_env};
use serde_json::Value;

/// The `gpu.node` attributes this issue is about.
const HEALTH_KEYS: [&str; 6] = [
    "count",
    "expected_count",
    "missing",
    "health_missing",
    "health",
    "healthy_count",
];

/// `features -o json` of a tree (NVML off unless `extra` gives a library), and the run's
/// stderr.
fn features(root: &Path, machine: &str, extra: &[&str], env: &[(&str, &Path)]) -> Value {
    let mut a: Vec<String> = vec![
        "features".into(),
        "-o".into(),
        "json".into(),
        "--sysfs-root".into(),
        root.display().to_string(),
        "--proc-root".into(),
        proc_fixture(machine).display().to_string(),
        "--pci-ids".into(),
        pci_ids().display().to_string(),
    ];
    if !extra.contains(&"--nvml-lib") {
        a.push("--no-nvml".into());
    }
    a.extend(extra.iter().map(|s| s.to_string()));
    let r = run_env(a, env);
    serde_json::from_str(r.ok()).expect("features -o json is JSON")
}

/// The node's health attributes, those it has.
fn node_health(v: &Value) -> BTreeMap<String, String> {
    let node = &v["attributes"]["gpu.node"]["elements"];
    HEALTH_KEYS
        .iter()
        .filter_map(|k| Some((k.to_string(), node[*k].as_str()?.to_string())))
        .collect()
}

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Takes GPUs out of a tree as a node whose GPUs never enumerated shows it: no device
/// directory, no `bus/pci/devices` entry, no back-link under its driver.
fn remove_gpus(t: &Tree, bdfs: &[&str]) {
    for bdf in bdfs {
        let dir = t.device_dir(bdf);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_file(t.entry(bdf)).unwrap();
        let drivers = t.root().join("bus/pci/drivers");
        for d in std::fs::read_dir(&drivers).into_iter().flatten() {
            let _ = std::fs::remove_file(d.unwrap().path().join(bdf));
        }
    }
}

/// Takes out the KFD topology nodes of the GPUs at `bdfs` (a partitioned GPU has several) and
/// the other nodes' io_links to them, as the kernel's topology has no node for a GPU amdgpu
/// never registered.
fn remove_kfd_nodes(t: &Tree, bdfs: &[&str]) {
    let nodes = t.root().join("class/kfd/kfd/topology/nodes");
    let locations: Vec<(u64, u64)> = bdfs
        .iter()
        .map(|b| {
            let bus = u64::from_str_radix(&b[5..7], 16).unwrap();
            let dev = u64::from_str_radix(&b[8..10], 16).unwrap();
            (bus, dev)
        })
        .collect();
    let mut gone = Vec::new();
    for e in std::fs::read_dir(&nodes).unwrap() {
        let dir = e.unwrap().path();
        let props = std::fs::read_to_string(dir.join("properties")).unwrap();
        let loc = props
            .lines()
            .find_map(|l| l.strip_prefix("location_id "))
            .map(|v| v.trim().parse::<u64>().unwrap());
        let simd = props
            .lines()
            .find_map(|l| l.strip_prefix("simd_count "))
            .map(|v| v.trim().parse::<u64>().unwrap());
        if let (Some(loc), Some(s)) = (loc, simd)
            && s > 0
            && locations.contains(&((loc >> 8) & 0xff, (loc >> 3) & 0x1f))
        {
            gone.push(dir.file_name().unwrap().to_string_lossy().to_string());
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
    assert!(!gone.is_empty(), "no KFD node at {bdfs:?}");
    for e in std::fs::read_dir(&nodes).unwrap() {
        let links = e.unwrap().path().join("io_links");
        for l in std::fs::read_dir(&links).into_iter().flatten() {
            let l = l.unwrap().path();
            let p = std::fs::read_to_string(l.join("properties")).unwrap();
            let to = p.lines().find_map(|x| x.strip_prefix("node_to ")).unwrap();
            if gone.iter().any(|g| g == to.trim()) {
                std::fs::remove_dir_all(&l).unwrap();
            }
        }
    }
}

fn config(t: &Tree, text: &str) -> PathBuf {
    let p = t.root().join("config.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

const DELL: &str = "dell-xe9680-8xh100";
const DELL_DETAIL: &str = "table: DMI product PowerEdge XE9680 has 8 (data/expected-gpus.yaml); nvswitch: 4 NVSwitch 22a3 (gen3, 4 a board of 8 GPUs)";
const DGX2: &str = "nvidia-dgx2h";
const DGX2_DETAIL: &str = "table: DMI product NVIDIA DGX-2H has 16 (data/expected-gpus.yaml); nvswitch: 11 NVSwitch 1ac2 (gen1, 6 a board of 8 GPUs)";
const AZURE: &str = "azure-nd-a100-v4";
const AZURE_DETAIL: &str = "nvswitch: 6 NVSwitch 1af1 (gen2, 6 a board of 8 GPUs)";

/// The health attributes of a node of `count` GPUs, all healthy, where `expected` are expected.
fn short(count: &str, expected: &str, detail: &str) -> BTreeMap<String, String> {
    let missing =
        (expected.parse::<usize>().unwrap() - count.parse::<usize>().unwrap()).to_string();
    attrs(&[
        ("count", count),
        ("expected_count", expected),
        ("missing", &missing),
        ("health_missing", detail),
        ("health", "degraded"),
        ("healthy_count", count),
    ])
}

/// Every NVIDIA board with NVSwitches, one and two GPUs out: the switches and the DMI table
/// say how many there should be.
#[test]
fn nvswitch_boards_with_one_and_two_gpus_gone_are_short() {
    let rows: Vec<(&str, &[&str], BTreeMap<String, String>)> = vec![
        (DELL, &["0000:9b:00.0"], short("7", "8", DELL_DETAIL)),
        (
            DELL,
            &["0000:19:00.0", "0000:db:00.0"],
            short("6", "8", DELL_DETAIL),
        ),
        (DGX2, &["0000:3b:00.0"], short("15", "16", DGX2_DETAIL)),
        (
            DGX2,
            &["0000:34:00.0", "0000:e7:00.0"],
            short("14", "16", DGX2_DETAIL),
        ),
        (AZURE, &["0003:00:00.0"], short("7", "8", AZURE_DETAIL)),
        (
            AZURE,
            &["0001:00:00.0", "000e:00:00.0"],
            short("6", "8", AZURE_DETAIL),
        ),
    ];
    let got: Vec<_> = rows
        .iter()
        .map(|(machine, gone, _)| {
            let t = Tree::copy_of(machine);
            remove_gpus(&t, gone);
            (
                *machine,
                gone.to_vec(),
                node_health(&features(t.root(), machine, &[], &[])),
            )
        })
        .collect();
    let want: Vec<_> = rows
        .iter()
        .map(|(m, gone, w)| (*m, gone.to_vec(), w.clone()))
        .collect();
    assert_eq!(got, want);
}

/// The Dell's whole label map with one GPU gone: the count it shows, the count it should have,
/// and `gpu.health` degraded while every GPU present is healthy.
#[test]
fn a_short_node_is_labelled_degraded_with_the_count_it_should_have() {
    let t = Tree::copy_of(DELL);
    remove_gpus(&t, &["0000:9b:00.0"]);
    let mut a: Vec<String> = vec!["labels".into(), "-o".into(), "json".into()];
    a.extend(
        common::discovery_args(t.root(), &proc_fixture(DELL))
            .iter()
            .map(|s| s.to_string_lossy().to_string()),
    );
    let r = run(a);
    let mut want = common::dell_sysfs_default_labels();
    want.extend(label_map(&[
        ("gpu-nvidia.count", "7"),
        ("gpu.count", "7"),
        ("gpu.count.expected", "8"),
        ("gpu.health", "degraded"),
        ("gpu.healthy.count", "7"),
        // The GPU taken out sat on NUMA node 1 under its own root port.
        ("gpu.numa.gpus.max", "4"),
        ("gpu.pcie.roots", "7"),
    ]));
    assert_eq!(labels_of(r.ok()), want);
}

/// AMD XGMI hives. With the GPU's KFD node gone too (amdgpu never registered it) the hardware
/// says nothing, and the table does: the site's row for the MI210 box, the shipped row of
/// Azure's MI300X size. With the KFD node left (a GPU that fell off PCI while amdgpu held it,
/// so its topology node was never taken down) the hive itself says so.
#[test]
fn amd_hives_with_one_and_two_gpus_gone_are_short() {
    let mi210 = "amd-mi210-8x";
    let mi300 = "amd-mi300x-cpx";
    let site = "sources:\n  health:\n    instanceType: lab-mi210-8x\n    expectedGpus:\n      - {instanceType: lab-mi210-8x, count: 8, source: the lab's purchase order}\n";
    let azure = "sources:\n  health:\n    instanceType: Standard_ND96isr_MI300X_v5\n";
    let table = |t: &str, n: &str| format!("table: instance type {t} has {n} ({})", "the config");
    type Row<'a> = (
        &'a str,
        &'a [&'a str],
        bool,
        &'a str,
        BTreeMap<String, String>,
    );
    let rows: Vec<Row> = vec![
        (
            mi210,
            &["0000:63:00.0"],
            false,
            site,
            short("7", "8", &table("lab-mi210-8x", "8")),
        ),
        (
            mi210,
            &["0000:03:00.0", "0000:e3:00.0"],
            false,
            site,
            short("6", "8", &table("lab-mi210-8x", "8")),
        ),
        (
            mi300,
            &["0000:65:00.0"],
            false,
            azure,
            short(
                "7",
                "8",
                "table: instance type Standard_ND96isr_MI300X_v5 has 8 (data/expected-gpus.yaml)",
            ),
        ),
        (
            mi300,
            &["0000:05:00.0", "0000:c7:00.0"],
            false,
            azure,
            short(
                "6",
                "8",
                "table: instance type Standard_ND96isr_MI300X_v5 has 8 (data/expected-gpus.yaml)",
            ),
        ),
        (
            mi210,
            &["0000:63:00.0"],
            true,
            "",
            short("7", "8", "kfd: XGMI hive members not on PCI: 0000:63:00.0"),
        ),
        (
            mi300,
            &["0000:05:00.0", "0000:c7:00.0"],
            true,
            "",
            short(
                "6",
                "8",
                "kfd: XGMI hive members not on PCI: 0000:05:00.0,0000:c7:00.0",
            ),
        ),
    ];
    let got: Vec<_> = rows
        .iter()
        .map(|(machine, gone, keep_kfd, cfg, _)| {
            let t = Tree::copy_of(machine);
            remove_gpus(&t, gone);
            if !keep_kfd {
                remove_kfd_nodes(&t, gone);
            }
            let c = config(&t, cfg).display().to_string();
            let v = features(t.root(), machine, &["--config", &c], &[]);
            (*machine, gone.to_vec(), *keep_kfd, node_health(&v))
        })
        .collect();
    let want: Vec<_> = rows
        .iter()
        .map(|(m, gone, k, _, w)| (*m, gone.to_vec(), *k, w.clone()))
        .collect();
    assert_eq!(got, want);
}

/// A vendor whose hardware gives no evidence (Hygon's DCUs): the site's row says how many. Both
/// gone leaves no GPU at all, and a node without GPUs has no `gpu.*` feature to carry a fault.
#[test]
fn the_site_table_covers_any_vendor() {
    let machine = "hygon-k100ai-2x";
    let cfg = "sources:\n  health:\n    instanceType: lab-k100ai-2x\n    expectedGpus:\n      - {instanceType: lab-k100ai-2x, count: 2, source: rack inventory}\n";
    let health = |gone: &[&str]| {
        let t = Tree::copy_of(machine);
        remove_gpus(&t, gone);
        let c = config(&t, cfg).display().to_string();
        node_health(&features(t.root(), machine, &["--config", &c], &[]))
    };
    assert_eq!(
        [
            health(&[]),
            health(&["0000:07:00.0"]),
            health(&["0000:07:00.0", "0000:0a:00.0"])
        ],
        [
            attrs(&[
                ("count", "2"),
                ("expected_count", "2"),
                ("health", "ok"),
                ("healthy_count", "2"),
            ]),
            short(
                "1",
                "2",
                "table: instance type lab-k100ai-2x has 2 (the config)"
            ),
            attrs(&[("count", "0")]),
        ]
    );
}

/// What every capture says unmodified: the boards whose NVSwitches or DMI say how many GPUs
/// they carry have it as `expected_count`; no capture is short.
#[test]
fn no_capture_as_it_is_is_short() {
    let machines = common::sysfs_machines();
    let got: BTreeMap<String, BTreeMap<String, String>> = machines
        .iter()
        .map(|m| {
            let v = features(&common::sysfs_fixture(m), m, &[], &[]);
            (m.clone(), node_health(&v))
        })
        .collect();
    let healthy = |n: &str| attrs(&[("count", n), ("health", "ok"), ("healthy_count", n)]);
    let expected = |n: &str| {
        attrs(&[
            ("count", n),
            ("expected_count", n),
            ("health", "ok"),
            ("healthy_count", n),
        ])
    };
    let none = || attrs(&[("count", "0")]);
    let want: BTreeMap<String, BTreeMap<String, String>> = common::owned_names([
        ("amd-mi210-8x", healthy("8")),
        ("amd-mi300x-cpx", healthy("8")),
        ("amd-vega10", healthy("1")),
        ("aws-trn1-2xlarge", none()),
        ("azure-nd-a100-v4", expected("8")),
        ("dell-xe9680-8xh100", expected("8")),
        ("habana-gaudi2-8x", none()),
        ("habana-gaudi3", none()),
        ("huawei-ascend-910b-16x", none()),
        ("hwloc-5digit-domain", none()),
        ("hygon-k100ai-2x", healthy("2")),
        ("intel-lunarlake-npu", none()),
        ("intel-tigerlake-igpu", healthy("1")),
        ("mixed-gaudi2-npu-wormhole", none()),
        ("mthreads-s3000", healthy("1")),
        ("nfd-rootfs-1", none()),
        ("no-pci-devices", none()),
        ("nvidia-dgx2h", expected("16")),
        ("this-vm", none()),
        ("ttar-gpu-sriov", healthy("1")),
    ]);
    assert_eq!(got, want);
}

/// Zero false positives: GPUs a VM was given part of a board, GPUs bound to vfio-pci or left
/// unbound (their own fault), and a service VM that holds only the NVSwitches.
#[test]
fn passthrough_parts_held_and_unbound_gpus_are_not_missing() {
    let azure_gpus = common::AZURE_GPUS;
    // A VM of 4 (or 2, or 1) of the board's 8 GPUs with all 6 NVSwitches: a Fabric Manager
    // partition, not a short node.
    let vm = |keep: usize| {
        let t = Tree::copy_of(AZURE);
        remove_gpus(&t, &azure_gpus[keep..]);
        node_health(&features(t.root(), AZURE, &[], &[]))
    };
    let healthy = |n: &str| attrs(&[("count", n), ("health", "ok"), ("healthy_count", n)]);
    assert_eq!(
        [vm(4), vm(2), vm(1)],
        [healthy("4"), healthy("2"), healthy("1")]
    );
    // The service VM of the shared-NVSwitch model: switches, no GPU.
    let t = Tree::copy_of(AZURE);
    remove_gpus(&t, &azure_gpus);
    assert_eq!(
        node_health(&features(t.root(), AZURE, &[], &[])),
        attrs(&[("count", "0")])
    );
    // One GPU unbound, one held by vfio-pci: 8 present, the unbound one's own fault.
    let t = Tree::copy_of(DELL);
    std::fs::remove_file(t.entry("0000:9b:00.0").join("driver")).unwrap();
    let link = t.entry("0000:5d:00.0").join("driver");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("../../../../../../bus/pci/drivers/vfio-pci", &link).unwrap();
    assert_eq!(
        node_health(&features(t.root(), DELL, &[], &[])),
        attrs(&[
            ("count", "8"),
            ("expected_count", "8"),
            ("health", "degraded"),
            ("healthy_count", "7"),
        ])
    );
}

/// NVLink peers: two GPUs bridged by NVLink, one of which fell off PCIe after its links
/// trained (NVLink 4 trains them in hardware, apart from PCIe): NVML on the other still
/// reports an active link whose far end is a GPU at an address where no function is. A link
/// to an NVSwitch, or to a GPU on the bus, is no evidence, nor is a VM's link to a GPU outside
/// it. No capture shows NVML's remote ends of a direct NVLink: the fixtures are written here,
/// each field as `nvidia-smi nvlink -R` reports it.
#[test]
fn an_nvlink_peer_nvml_sees_and_pci_lacks_is_missing() {
    let lib = common::fake_nvml_lib("nvidia_ml").display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sys");
    common::nvidia_sysfs(
        &root,
        &[("0000:17:00.0", "0x2321"), ("0000:2a:00.0", "0x2321")],
    );
    let gpu = |bus: &str, index: u32, remotes: &str| {
        format!(
            r#"{{"name": "NVIDIA H100 NVL", "uuid": "GPU-{index}", "pci_bus_id": "00000000:{bus}:00.0",
                "memory_total_bytes": 100485038080, "compute_capability": [9, 0],
                "nvlinks": [true, true, true, false], "nvlink_remotes": [{remotes}]}}"#
        )
    };
    let remote = |ty: &str, bus: &str| {
        format!(r#"{{"device_type": "{ty}", "pci_bus_id": "00000000:{bus}:00.0"}}"#)
    };
    let fixture = |gpus: &[String]| {
        let p = dir.path().join("nvml.json");
        std::fs::write(
            &p,
            format!(
                r#"{{"driver_version": "550.54.15", "cuda_driver_version": 12040, "devices": [{}]}}"#,
                gpus.join(",")
            ),
        )
        .unwrap();
        p
    };
    let run_with = |f: &Path| {
        node_health(&features(
            &root,
            DELL,
            &["--nvml-lib", &lib],
            &[("FAKE_NVML_FIXTURE", f)],
        ))
    };
    // GPUs 0 and 1 on the bus, linked to each other (and to a switch): nothing missing.
    let peers = [
        remote("gpu", "2A"),
        remote("gpu", "2A"),
        remote("switch", "80"),
        remote("gpu", "2A"),
    ]
    .join(",");
    let back = [
        remote("gpu", "17"),
        remote("gpu", "17"),
        remote("switch", "80"),
        remote("gpu", "17"),
    ]
    .join(",");
    let both = fixture(&[gpu("17", 0, &peers), gpu("2A", 1, &back)]);
    assert_eq!(
        run_with(&both),
        attrs(&[("count", "2"), ("health", "ok"), ("healthy_count", "2")])
    );
    // GPU 0's peer at 3c is on no bus: one missing (its inactive link 3 says nothing).
    let lost = [
        remote("gpu", "3C"),
        remote("gpu", "3C"),
        remote("switch", "80"),
        remote("gpu", "4D"),
    ]
    .join(",");
    let short_of_one = fixture(&[gpu("17", 0, &lost), gpu("2A", 1, &back)]);
    assert_eq!(
        run_with(&short_of_one),
        short("2", "3", "nvlink: peers not on PCI: 0000:3c:00.0")
    );
    // A VM given one GPU of the bridged pair: its link to the other, outside the VM, says
    // nothing (a passthrough shape, as for NVSwitches).
    let vm = dir.path().join("vm");
    common::nvidia_sysfs(&vm, &[("0000:17:00.0", "0x2321")]);
    let one = fixture(&[gpu("17", 0, &peers)]);
    assert_eq!(
        node_health(&features(
            &vm,
            DELL,
            &["--nvml-lib", &lib],
            &[("FAKE_NVML_FIXTURE", &one)]
        )),
        attrs(&[("count", "1"), ("health", "ok"), ("healthy_count", "1")])
    );
}

/// The shipped table parses, and every row says where its count comes from.
#[test]
fn the_shipped_table_names_a_source_for_every_row() {
    let text = std::fs::read_to_string(common::repo().join("data/expected-gpus.yaml")).unwrap();
    let rows = gpu_labeler::discover::missing::parse_table(&text).unwrap();
    let unsourced: Vec<String> = rows
        .iter()
        .filter(|r| r.source.trim().is_empty())
        .map(|r| format!("{:?}", r.key))
        .collect();
    assert_eq!((rows.len() > 40, unsourced), (true, Vec::<String>::new()));
}

/// A row of the site's that names both keys, or none, is an error naming its line.
#[test]
fn a_bad_site_row_is_an_error_naming_its_place() {
    let t = Tree::copy_of("amd-vega10");
    let c = config(
        &t,
        "sources:\n  health:\n    expectedGpus:\n      - {productName: X, instanceType: p5.48xlarge, count: 2}\n",
    );
    let r = run(vec![
        "labels".to_string(),
        "--config".into(),
        c.display().to_string(),
        "--sysfs-root".into(),
        t.root().display().to_string(),
        "--no-nvml".into(),
    ]);
    let (code, _, stderr) = r.parts();
    let want = format!(
        "error: invalid config {}:4:9: sources.health.expectedGpus[0]: an expected-GPU row names either a productName (with an optional boardName) or an instanceType",
        c.display()
    );
    assert_eq!(
        (code, stderr.lines().last().map(str::to_string)),
        (1, Some(want))
    );
}

/// `explain --label gpu.health` names the GPUs missing and the evidence, before any GPU's own
/// fault.
#[test]
fn explain_names_the_evidence_of_the_gpus_missing() {
    let t = Tree::copy_of(DELL);
    remove_gpus(&t, &["0000:9b:00.0"]);
    t.write_attr("0000:3b:00.0", "current_link_width", b"8\n");
    let mut a: Vec<String> = vec!["explain".into(), "--label".into(), "gpu.health".into()];
    a.extend(
        common::discovery_args(t.root(), &proc_fixture(DELL))
            .iter()
            .map(|s| s.to_string_lossy().to_string()),
    );
    let out = run(a).ok().to_string();
    let expected = common::explain_degraded(
        20,
        &[&format!(
            "gpu.node.health: missing 1 of 8 ({DELL_DETAIL}); 0000:3b:00.0: pcie-link (x8 of x16)"
        )],
        "6",
    );
    assert_eq!(out, expected);
}

/// Fleet consensus over `tests/fixtures/missing/nodes.json`: 13 nodes made from the fleet's
/// first H100's real labels (tests/fixtures/scheduling/nodes.json, `dgx-h100-01`), renamed, given
/// an instance type and a count (the L40S and A100 nodes their product, family and memory):
/// four p5.48xlarge (one with 7 GPUs), three g6e.12xlarge (one with 3 of 4, the incident of
/// aws/eks-node-monitoring-agent#121), two a2-highgpu-1g, two nodes of a type with 8 and 7 (no
/// consensus: neither named), a node without an instance type (not compared), and a CPU node.
#[test]
fn inventory_names_the_nodes_short_of_their_type() {
    let nodes = common::fixtures().join("missing/nodes.json");
    let r = run(vec![
        "inventory".to_string(),
        "--nodes".into(),
        nodes.display().to_string(),
    ]);
    let want = "\
PRODUCT                VENDOR  FAMILY        NODES  GPUS  MEMORY/GPU  MIG      SHARING  DRA
NVIDIA-A100-SXM4-40GB  nvidia  ampere        2      2     40960 MiB   capable  -        -
NVIDIA-H100-80GB-HBM3  nvidia  hopper        7      53    81559 MiB   capable  -        -
NVIDIA-L40S            nvidia  ada-lovelace  3      11    46068 MiB   capable  -        -
TOTAL                                        12     66
12 node(s) with GPUs, 1 without; 4911295 MiB of GPU memory on the nodes that label it (gpu.memory.total)
2 node(s) with fewer GPUs than most of their instance type:
  g6e-02 (g6e.12xlarge): 3 GPUs, 4 on 2 of its 3 nodes
  p5-03 (p5.48xlarge): 7 GPUs, 8 on 3 of its 4 nodes
";
    assert_eq!(r.ok(), want);
}

/// The H100 node with NVML: a GPU that never came up is on neither PCI nor NVML's list (the
/// `h100-8x.json` capture with that GPU's device taken out), one and two of them; the other
/// GPUs answer as before, and the board's switches and DMI still say 8.
#[test]
fn with_nvml_a_gpu_gone_from_both_is_missing() {
    let lib = common::fake_nvml_lib("nvidia_ml").display().to_string();
    let capture: Value =
        serde_json::from_str(&std::fs::read_to_string(common::nvml_fixture("h100-8x")).unwrap())
            .unwrap();
    let health = |gone: &[&str]| {
        let t = Tree::copy_of(DELL);
        remove_gpus(&t, gone);
        let mut fixture = capture.clone();
        let devices = fixture["devices"].as_array_mut().unwrap();
        devices.retain(|d| {
            let bus = d["pci_bus_id"].as_str().unwrap().to_ascii_lowercase();
            !gone.iter().any(|g| bus.ends_with(&g[5..]))
        });
        assert_eq!(devices.len(), 8 - gone.len());
        let f = t.root().join("nvml.json");
        std::fs::write(&f, fixture.to_string()).unwrap();
        let v = features(
            t.root(),
            DELL,
            &["--nvml-lib", &lib],
            &[("FAKE_NVML_FIXTURE", &f)],
        );
        let node = &v["attributes"]["gpu.node"]["elements"];
        (node["nvml"].as_str().map(str::to_string), node_health(&v))
    };
    let ok = Some("ok".to_string());
    assert_eq!(
        [
            health(&["0000:9b:00.0"]),
            health(&["0000:19:00.0", "0000:db:00.0"])
        ],
        [
            (ok.clone(), short("7", "8", DELL_DETAIL)),
            (ok, short("6", "8", DELL_DETAIL)),
        ]
    );
}

/// Puts a GPU the test took out back, as the fixture has it (a GPU that came up late, or the
/// node after its repair): its device directory, `bus/pci/devices` entry and driver back-link.
fn restore_gpu(t: &Tree, machine: &str, bdf: &str) {
    let fixture = common::sysfs_fixture(machine);
    let entry = fixture.join("bus/pci/devices").join(bdf);
    let dir = std::fs::canonicalize(&entry).unwrap();
    let rel = dir
        .strip_prefix(std::fs::canonicalize(&fixture).unwrap())
        .unwrap();
    common::copy_tree(&dir, &t.root().join(rel));
    std::os::unix::fs::symlink(std::fs::read_link(&entry).unwrap(), t.entry(bdf)).unwrap();
    let back = fixture.join("bus/pci/drivers/nvidia").join(bdf);
    std::os::unix::fs::symlink(
        std::fs::read_link(&back).unwrap(),
        t.root().join("bus/pci/drivers/nvidia").join(bdf),
    )
    .unwrap();
}

/// `run`: a node short of a GPU is degraded from its first cycle and says why in the log; the
/// GPU back (it came up late), the fault is held for `clearAfter` like a GPU's, then clears.
#[test]
fn the_daemon_holds_the_missing_fault_and_clears_it() {
    const HOLD: Duration = Duration::from_secs(4);
    let t = Tree::copy_of(DELL);
    remove_gpus(&t, &["0000:9b:00.0"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gpu-labeler");
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("sources:\n  health:\n    clearAfter: {}s\n", HOLD.as_secs()),
    )
    .unwrap();
    let args: Vec<String> = [
        "run",
        "--sysfs-root",
        t.root().to_str().unwrap(),
        "--proc-root",
        proc_fixture(DELL).to_str().unwrap(),
        "--pci-ids",
        pci_ids().to_str().unwrap(),
        "--no-nvml",
        "--config",
        config.to_str().unwrap(),
        "--sink",
        "features-file",
        "--features-file",
        file.to_str().unwrap(),
        "--interval",
        "1s",
        "--no-events",
        "--listen",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let agent = apiserver::Agent::start(&args, &[]);
    // The count and health lines of the features file.
    let counts = || -> Option<Vec<String>> {
        let text = std::fs::read_to_string(&file).ok()?;
        Some(
            text.lines()
                .filter_map(|l| l.strip_prefix("feature.node.kubernetes.io/"))
                .filter(|l| l.starts_with("gpu.count") || l.starts_with("gpu.health"))
                .map(str::to_string)
                .collect(),
        )
    };
    // The four lines, for `count` GPUs of the 8 expected, `healthy` of them healthy.
    let lines = |count: u32, health: &str, healthy: u32| {
        vec![
            format!("gpu.count={count}"),
            "gpu.count.expected=8".to_string(),
            format!("gpu.health={health}"),
            format!("gpu.healthy.count={healthy}"),
        ]
    };
    let wait = Duration::from_secs(20);
    let short = lines(7, "degraded", 7);
    let seen = |want: &Vec<String>| apiserver::wait_for(wait, || counts().filter(|c| c == want));
    assert!(seen(&short).is_some(), "log:\n{}", agent.log_text());
    agent.wait_log(&format!("GPU faults: missing 1 of 8 ({DELL_DETAIL})"), wait);

    restore_gpu(&t, DELL, "0000:9b:00.0");
    let back = std::time::Instant::now();
    // Held: all 8 there, still degraded with the count it was short against.
    let held = lines(8, "degraded", 8);
    assert!(seen(&held).is_some(), "log:\n{}", agent.log_text());
    let whole = lines(8, "ok", 8);
    assert!(seen(&whole).is_some(), "log:\n{}", agent.log_text());
    let took = back.elapsed();
    assert!(
        took >= HOLD - Duration::from_millis(1100),
        "cleared {took:?} after the GPU came back (hold {HOLD:?}); log:\n{}",
        agent.log_text()
    );
    agent.wait_log("GPU faults: none", wait);
}

/// On a cloud whose DMI is not the instance type (Azure), the Node's
/// `node.kubernetes.io/instance-type` label is the table's key, as the config's
/// `sources.health.instanceType` would be: `run` reads it with the Node and scans again with it,
/// so even `--oneshot` publishes the short count (#47). The labels are what `labels` gives with
/// the config naming the type, compared whole.
#[test]
fn the_nodes_instance_type_label_keys_the_table() {
    const NODE: &str = "azure-mi300x-1";
    let machine = "amd-mi300x-cpx";
    let t = Tree::copy_of(machine);
    remove_gpus(&t, &["0000:65:00.0"]);
    remove_kfd_nodes(&t, &["0000:65:00.0"]);
    let server = apiserver::FakeApiServer::start();
    let kubelet = [
        ("kubernetes.io/hostname", NODE),
        (
            "node.kubernetes.io/instance-type",
            "Standard_ND96isr_MI300X_v5",
        ),
    ];
    server.add_node(NODE, &kubelet);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = apiserver::write_kubeconfig(dir.path(), &server.url());
    let discovery = common::discovery_arg_strings(t.root(), &proc_fixture(machine));
    let mut args = vec!["run", "--oneshot", "--no-dra", "--kubeconfig"];
    let k = kubeconfig.display().to_string();
    args.push(&k);
    args.extend(["--node-name", NODE, "--listen", ""]);
    args.extend(discovery.iter().map(String::as_str));
    let r = run(&args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // What `labels` gives with the config naming the type, and the kubelet's labels.
    let cfg = config(
        &t,
        "sources:\n  health:\n    instanceType: Standard_ND96isr_MI300X_v5\n",
    )
    .display()
    .to_string();
    let mut labels = vec!["labels", "-o", "json", "--config", &cfg];
    labels.extend(discovery.iter().map(String::as_str));
    let mut want = labels_of(run(&labels).ok());
    assert_eq!(
        (
            want.get("feature.node.kubernetes.io/gpu.count.expected"),
            want.get("feature.node.kubernetes.io/gpu.health")
        ),
        (Some(&"8".to_string()), Some(&"degraded".to_string()))
    );
    want.extend(kubelet.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    assert_eq!(server.labels(NODE), want);
}
