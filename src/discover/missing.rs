//! The GPUs a node should have and does not show: `gpu.node` `expected_count`, and the node
//! fault `missing` (`gpu.node` `missing`, how many, and `health_missing`, the evidence) that
//! makes `gpu.node` `health` `degraded` (docs/health.md#missing-gpus).
//!
//! A GPU that never enumerated leaves no trace among the GPUs (`lost` and `unbound` see only
//! GPUs on the PCI bus), so the count it should have comes from elsewhere, each source named in
//! the detail, in order of trust: the table (`data/expected-gpus.yaml` and the site's rows, by
//! DMI product and board or by cloud instance type), then the hardware: the NVSwitch chips of
//! an HGX baseboard (each generation's chips carry a fixed number of GPUs), NVLink peers that
//! NVML reports at a PCI address where no function is, and AMD XGMI hive members that the KFD
//! lists and PCI lacks.
//!
//! Zero false positives come before recall: the GPUs present are every GPU function on the bus
//! that is not a VF, whatever its driver (a GPU `lost`, `unbound`, bound to `vfio-pci` or in
//! MIG mode is present, not missing); NVSwitch evidence says nothing where the GPUs present are
//! a shape a passthrough VM of part of the board has (a power of two up to half the board), nor
//! on a vGPU guest.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use crate::config::{ExpectedGpus, ExpectedKey};
use crate::features::FeatureSet;

use super::amd::KfdNode;
use super::gpu_names::{GPU_DEVICE, GPU_NODE};
use super::nvml::{NvmlScan, NvmlStatus};
use super::pci::{PciAddress, PciDevice};

/// The node fault's name, as `gpu.node` `health_missing` and the metrics carry it.
pub const KIND: &str = "missing";
/// `gpu.node` attributes this module writes.
pub const EXPECTED_COUNT: &str = "expected_count";
pub const MISSING: &str = "missing";
pub const DETAIL: &str = "health_missing";

/// The longest `health_missing`: a label value's 63 characters would cut an address list
/// short; `explain` and the log print it whole, so it is bounded only against a flood.
pub const MAX_DETAIL_LEN: usize = 160;

/// How many GPUs a node should have, and what says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    /// `table`, `nvswitch`, `nvlink` or `kfd`.
    pub source: &'static str,
    /// The vendor whose GPUs it counts (`None`: every GPU).
    pub vendor: Option<&'static str>,
    pub expected: usize,
    /// What the source saw, in words (`4 NVSwitch 22a3 (gen3, 4 a board of 8 GPUs)`).
    pub detail: String,
}

/// An NVSwitch generation: its PCI device ids (the management endpoint, class 0680), how many
/// chips one baseboard has, and how many GPUs that board carries.
struct NvSwitchGen {
    name: &'static str,
    ids: &'static [u16],
    per_board: usize,
    gpus_per_board: usize,
}

/// The generations whose chips sit on the host's PCI bus beside their GPUs. Fourth-generation
/// NVSwitches (HGX B200/B300) are managed through NVLink Subnet Manager and show no such
/// function, so a Blackwell board gives no NVSwitch evidence.
const NVSWITCH_GENS: [NvSwitchGen; 3] = [
    // HGX-2 / DGX-2: two baseboards of 8 V100 and 6 NVSwitches each (NVIDIA Fabric Manager
    // User Guide, "The HGX-2 GPU Baseboard"); 1ac2 is the DGX-2H's (hwloc/nvidiaDGX2.xml).
    NvSwitchGen {
        name: "gen1",
        ids: &[0x1ac2],
        per_board: 6,
        gpus_per_board: 8,
    },
    // HGX A100 8-GPU: 6 NVSwitches (Fabric Manager User Guide, "The NVIDIA HGX A100 GPU
    // Baseboard"); LR10's ids in NVIDIA/open-gpu-kernel-modules src/common/nvswitch/kernel/
    // nvswitch.c (`nvswitch_lr10_device_ids`).
    NvSwitchGen {
        name: "gen2",
        ids: &[
            0x1ae8, 0x1af0, 0x1af1, 0x1af2, 0x1af3, 0x1af4, 0x1af5, 0x1af6, 0x1af7, 0x1af8, 0x1af9,
            0x1afa, 0x1afb, 0x1afc, 0x1afd, 0x1afe, 0x1aff,
        ],
        per_board: 6,
        gpus_per_board: 8,
    },
    // HGX H100/H200/H800 8-GPU: 4 NVSwitches (the Fabric Manager guide's HGX H100 baseboard;
    // 4 x 22a3 in gpud/lspci-vvv); LS10's management endpoints 22a0-22a7 (`nvswitch_ls10_device_ids`).
    NvSwitchGen {
        name: "gen3",
        ids: &[
            0x22a0, 0x22a1, 0x22a2, 0x22a3, 0x22a4, 0x22a5, 0x22a6, 0x22a7,
        ],
        per_board: 4,
        gpus_per_board: 8,
    },
];

/// Whether `n` GPUs of a board of `board` could be a passthrough VM's part of it (the Fabric
/// Manager's full-passthrough and shared-NVSwitch partitions: 1, 2, 4 or 8 GPUs of 8 or 16).
fn partition_shape(n: usize, board: usize) -> bool {
    n.is_power_of_two() && n * 2 <= board
}

/// The GPU functions present (of `vendor`, or all): every GPU function that is not a VF,
/// whatever its driver.
fn present(features: &FeatureSet, vendor: Option<&str>) -> usize {
    features
        .instances(GPU_DEVICE)
        .iter()
        .filter(|g| g.get("is_vf") != Some("true"))
        .filter(|g| vendor.is_none_or(|v| g.get("vendor") == Some(v)))
        .count()
}

/// Whether the NVIDIA GPUs present can be a whole host's short of some of `expected`: not a
/// vGPU guest, at least one GPU, and not a shape a passthrough VM given part of the GPUs has.
fn whole_host(features: &FeatureSet, expected: usize) -> bool {
    let vgpu = features
        .instances(GPU_DEVICE)
        .iter()
        .any(|g| g.get("vgpu") == Some("true"));
    let nvidia = present(features, Some("nvidia"));
    !vgpu && nvidia > 0 && !partition_shape(nvidia, expected)
}

/// The NVSwitch chips of an HGX baseboard: their generation's chips per board give the boards,
/// and the boards the GPUs. `None` without NVSwitches, with chips of two generations, on a
/// vGPU guest, or where the NVIDIA GPUs present are a shape a passthrough VM of part of the
/// board has.
pub fn nvswitch(devices: &[PciDevice], features: &FeatureSet) -> Option<Expectation> {
    let switches: Vec<&PciDevice> = devices
        .iter()
        .filter(|d| d.vendor_id == 0x10de && d.class_code >> 8 == 0x0680)
        .collect();
    let generation = |d: &PciDevice| NVSWITCH_GENS.iter().find(|g| g.ids.contains(&d.device_id));
    let first = generation(switches.first()?)?;
    if !switches
        .iter()
        .all(|d| generation(d).is_some_and(|g| g.name == first.name))
    {
        return None;
    }
    let boards = switches.len().div_ceil(first.per_board);
    let expected = boards * first.gpus_per_board;
    if !whole_host(features, expected) {
        return None;
    }
    let ids: BTreeSet<String> = switches
        .iter()
        .map(|d| format!("{:04x}", d.device_id))
        .collect();
    let ids: Vec<String> = ids.into_iter().collect();
    Some(Expectation {
        source: "nvswitch",
        vendor: Some("nvidia"),
        expected,
        detail: format!(
            "{} NVSwitch {} ({}, {} a board of {} GPUs)",
            switches.len(),
            ids.join(","),
            first.name,
            first.per_board,
            first.gpus_per_board
        ),
    })
}

/// NVLink peers NVML reports (an active link whose remote end is a GPU) at an address where no
/// PCI function is: a GPU the NVLink fabric sees and the host does not. `None` unless NVML
/// answered this scan, and, as for NVSwitches, on a vGPU guest or a passthrough shape.
pub fn nvlink(
    nvml: &NvmlScan,
    devices: &[PciDevice],
    features: &FeatureSet,
) -> Option<Expectation> {
    if nvml.status != NvmlStatus::Ok {
        return None;
    }
    let on_bus: BTreeSet<PciAddress> = devices.iter().map(|d| d.sort_key).collect();
    let absent: BTreeSet<PciAddress> = nvml
        .gpus
        .iter()
        .flat_map(|g| g.nvlink_peers.iter().copied())
        .filter(|a| !on_bus.contains(a) && !nvml.gpus.iter().any(|g| g.address == Some(*a)))
        .collect();
    if absent.is_empty() {
        return None;
    }
    let expected = present(features, Some("nvidia")) + absent.len();
    // A VM given one GPU of a bridged pair, or half a mesh, may see links to GPUs outside it.
    if !whole_host(features, expected) {
        return None;
    }
    let names: Vec<String> = absent.iter().map(|a| address(*a)).collect();
    Some(Expectation {
        source: "nvlink",
        vendor: Some("nvidia"),
        expected,
        detail: format!("peers not on PCI: {}", list(&names)),
    })
}

/// XGMI hive members the KFD lists (a GPU node with a hive id) at a PCI address where no
/// function is. A partitioned GPU's nodes share one address: counted once.
pub fn kfd(nodes: &[KfdNode], devices: &[PciDevice], features: &FeatureSet) -> Option<Expectation> {
    let on_bus: BTreeSet<(u32, u8, u8)> = devices
        .iter()
        .map(|d| (d.sort_key.domain, d.sort_key.bus, d.sort_key.device))
        .collect();
    let absent: BTreeSet<(u32, u8, u8)> = nodes
        .iter()
        .filter(|n| n.hive_id.is_some_and(|h| h != 0))
        .map(|n| (n.domain, n.bus, n.slot))
        .filter(|at| !on_bus.contains(at))
        .collect();
    if absent.is_empty() {
        return None;
    }
    let names: Vec<String> = absent
        .iter()
        .map(|&(domain, bus, device)| {
            address(PciAddress {
                domain,
                bus,
                device,
                function: 0,
            })
        })
        .collect();
    Some(Expectation {
        source: "kfd",
        vendor: Some("amd"),
        expected: present(features, Some("amd")) + absent.len(),
        detail: format!("XGMI hive members not on PCI: {}", list(&names)),
    })
}

/// The shipped table (data/expected-gpus.yaml), parsed once.
pub fn shipped_table() -> &'static [ExpectedGpus] {
    static TABLE: OnceLock<Vec<ExpectedGpus>> = OnceLock::new();
    TABLE.get_or_init(|| {
        parse_table(include_str!("../../data/expected-gpus.yaml"))
            .expect("data/expected-gpus.yaml is checked by the tests")
    })
}

/// An expected-GPU table in the file's format (a YAML list of rows); the error names the line
/// and column.
pub fn parse_table(text: &str) -> Result<Vec<ExpectedGpus>, String> {
    serde_saphyr::from_str(text).map_err(|e| crate::yaml::error_message(&e))
}

/// What the table is looked up by: the DMI product and board names, and the instance type
/// (the config's, else on AWS the DMI product name, which is the instance type there).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableKeys {
    pub product_name: Option<String>,
    pub board_name: Option<String>,
    pub instance_type: Option<String>,
}

/// The DMI sys_vendor of AWS Nitro instances, whose product_name is the instance type.
const AWS_SYS_VENDOR: &str = "Amazon EC2";

impl TableKeys {
    /// The keys of this node: `<sysfs>/class/dmi/id/{sys_vendor,product_name,board_name}`
    /// and the configured instance type. An unreadable DMI file is no key.
    pub fn read(sysfs: &crate::sysfs::Sysfs, instance_type: &str) -> TableKeys {
        let dmi = |name: &str| {
            sysfs
                .read(&sysfs.path("class/dmi/id").join(name))
                .ok()
                .flatten()
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let product_name = dmi("product_name");
        let instance_type = match instance_type.trim() {
            "" if dmi("sys_vendor").as_deref() == Some(AWS_SYS_VENDOR) => product_name.clone(),
            "" => None,
            t => Some(t.to_string()),
        };
        TableKeys {
            product_name,
            board_name: dmi("board_name"),
            instance_type,
        }
    }
}

/// The first row of `site`, then of `shipped`, that this node's keys match: the instance type
/// first (it names the node's shape exactly), then the board.
pub fn table(
    site: &[ExpectedGpus],
    shipped: &[ExpectedGpus],
    keys: &TableKeys,
) -> Option<Expectation> {
    let rows = || site.iter().chain(shipped);
    let by_type = keys
        .instance_type
        .as_deref()
        .and_then(|t| rows().find(|r| matches!(&r.key, ExpectedKey::InstanceType(k) if k == t)));
    let by_board = || {
        let product = keys.product_name.as_deref()?;
        rows().find(|r| match &r.key {
            ExpectedKey::Board {
                product_name,
                board_name,
            } => {
                product_name == product
                    && board_name
                        .as_deref()
                        .is_none_or(|b| keys.board_name.as_deref() == Some(b))
            }
            ExpectedKey::InstanceType(_) => false,
        })
    };
    let row = by_type.or_else(by_board)?;
    let (what, name) = match &row.key {
        ExpectedKey::InstanceType(t) => ("instance type", t.as_str()),
        ExpectedKey::Board { product_name, .. } => ("DMI product", product_name.as_str()),
    };
    let origin = if site.iter().any(|r| std::ptr::eq(r, row)) {
        "the config"
    } else {
        "data/expected-gpus.yaml"
    };
    Some(Expectation {
        source: "table",
        vendor: None,
        expected: row.count,
        detail: format!("{what} {name} has {} ({origin})", row.count),
    })
}

fn address(a: PciAddress) -> String {
    format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        a.domain, a.bus, a.device, a.function
    )
}

/// Addresses joined by `,` (the detail as a whole is bounded by [`MAX_DETAIL_LEN`]).
fn list(names: &[String]) -> String {
    names.join(",")
}

/// Writes `expected_count` and, when fewer GPUs are present, `missing`, `health_missing` and
/// `health: degraded` into `gpu.node`, from the first of `evidence` (they come in order of
/// trust). Nothing on a node without GPUs: no `gpu.*` feature says anything there. The PCI
/// functions the scan could not read (`unreadable`) may be GPUs: they count as present.
pub fn apply(features: &mut FeatureSet, evidence: &[Expectation], unreadable: usize) {
    let Some(e) = evidence.first() else {
        return;
    };
    if features
        .attribute(GPU_NODE, "count")
        .is_none_or(|c| c == "0")
    {
        return;
    }
    features.insert_attribute(GPU_NODE, EXPECTED_COUNT, e.expected.to_string());
    let have = present(features, e.vendor) + unreadable;
    if have >= e.expected {
        return;
    }
    // Every source that sees GPUs missing, the trusted one first.
    let detail: Vec<String> = evidence
        .iter()
        .filter(|o| present(features, o.vendor) + unreadable < o.expected)
        .map(|o| format!("{}: {}", o.source, o.detail))
        .collect();
    write(features, e.expected - have, &detail.join("; "));
}

/// The fault's attributes on `gpu.node` (also what `health::Hold` writes back while it holds
/// the fault).
pub fn write(features: &mut FeatureSet, missing: usize, detail: &str) {
    features.insert_attribute(GPU_NODE, MISSING, missing.to_string());
    features.insert_attribute(GPU_NODE, DETAIL, bound(detail));
    features.insert_attribute(GPU_NODE, "health", super::gpu_names::DEGRADED);
}

fn bound(s: &str) -> String {
    if s.len() <= MAX_DETAIL_LEN {
        return s.to_string();
    }
    let mut end = MAX_DETAIL_LEN - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// `missing` and its detail as `gpu.node` has them now, if it does.
pub fn fault_of(features: &FeatureSet) -> Option<(usize, String)> {
    let n = features.attribute(GPU_NODE, MISSING)?.parse().ok()?;
    let detail = features
        .attribute(GPU_NODE, DETAIL)
        .unwrap_or("")
        .to_string();
    (n > 0).then_some((n, detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_shapes_are_the_passthrough_vms_of_part_of_a_board() {
        let of8: Vec<usize> = (1..=8).filter(|n| partition_shape(*n, 8)).collect();
        let of16: Vec<usize> = (1..=16).filter(|n| partition_shape(*n, 16)).collect();
        assert_eq!((of8, of16), (vec![1, 2, 4], vec![1, 2, 4, 8]));
    }

    fn row(key: ExpectedKey, count: usize) -> ExpectedGpus {
        ExpectedGpus {
            key,
            count,
            source: "test".into(),
        }
    }

    fn board(product: &str, board: Option<&str>, count: usize) -> ExpectedGpus {
        row(
            ExpectedKey::Board {
                product_name: product.into(),
                board_name: board.map(Into::into),
            },
            count,
        )
    }

    fn keys(product: Option<&str>, board: Option<&str>, itype: Option<&str>) -> TableKeys {
        TableKeys {
            product_name: product.map(Into::into),
            board_name: board.map(Into::into),
            instance_type: itype.map(Into::into),
        }
    }

    /// Lookups: the instance type before the board, the site's rows before the shipped ones,
    /// a board row with a board name only on that board, nothing for an unknown node.
    #[test]
    fn table_lookups() {
        let site = [
            row(ExpectedKey::InstanceType("p5.48xlarge".into()), 4),
            board("Lab Box", Some("rev2"), 6),
        ];
        let shipped = shipped_table();
        let found = |k: TableKeys| table(&site, shipped, &k).map(|e| (e.expected, e.detail));
        let d = |s: &str| s.to_string();
        assert_eq!(
            [
                found(keys(None, None, Some("g6e.12xlarge"))),
                found(keys(Some("PowerEdge XE9680"), None, Some("a3-highgpu-8g"))),
                found(keys(Some("PowerEdge XE9680"), None, None)),
                found(keys(None, None, Some("p5.48xlarge"))),
                found(keys(Some("Lab Box"), Some("rev2"), None)),
                found(keys(Some("Lab Box"), Some("rev1"), None)),
                found(keys(Some("NVIDIA DGX-2H"), Some("NVIDIA DGX-2H"), None)),
                found(keys(
                    Some("Standard PC (Q35 + ICH9, 2009)"),
                    None,
                    Some("n2-standard-8")
                )),
            ],
            [
                Some((
                    4,
                    d("instance type g6e.12xlarge has 4 (data/expected-gpus.yaml)")
                )),
                Some((
                    8,
                    d("instance type a3-highgpu-8g has 8 (data/expected-gpus.yaml)")
                )),
                Some((
                    8,
                    d("DMI product PowerEdge XE9680 has 8 (data/expected-gpus.yaml)")
                )),
                Some((4, d("instance type p5.48xlarge has 4 (the config)"))),
                Some((6, d("DMI product Lab Box has 6 (the config)"))),
                None,
                Some((
                    16,
                    d("DMI product NVIDIA DGX-2H has 16 (data/expected-gpus.yaml)")
                )),
                None,
            ]
        );
    }

    /// AWS Nitro's DMI product name is the instance type; another vendor's is not, and the
    /// config's instance type wins over it.
    #[test]
    fn the_instance_type_comes_from_the_config_else_from_aws_dmi() {
        let dir = tempfile::tempdir().unwrap();
        let dmi = dir.path().join("class/dmi/id");
        std::fs::create_dir_all(&dmi).unwrap();
        let sysfs = crate::sysfs::Sysfs::new(dir.path());
        let put = |vendor: &str, product: &str| {
            std::fs::write(dmi.join("sys_vendor"), format!("{vendor}\n")).unwrap();
            std::fs::write(dmi.join("product_name"), format!("{product}\n")).unwrap();
        };
        put("Amazon EC2", "g6e.12xlarge");
        let aws = TableKeys::read(&sysfs, "");
        let configured = TableKeys::read(&sysfs, "g6e.48xlarge");
        put("Google", "Google Compute Engine");
        let gce = TableKeys::read(&sysfs, "");
        assert_eq!(
            [aws, configured, gce],
            [
                keys(Some("g6e.12xlarge"), None, Some("g6e.12xlarge")),
                keys(Some("g6e.12xlarge"), None, Some("g6e.48xlarge")),
                keys(Some("Google Compute Engine"), None, None),
            ]
        );
    }

    /// A node of `count` NVIDIA GPUs (`vf` of them VFs) with `gpu.node` `count`.
    fn gpus(count: usize, vf: usize) -> FeatureSet {
        let mut f = FeatureSet::default();
        for i in 0..count {
            let is_vf = if i < vf { "true" } else { "false" };
            f.push_instance(
                GPU_DEVICE,
                crate::features::Instance::from_iter([("vendor", "nvidia"), ("is_vf", is_vf)]),
            );
        }
        f.insert_attribute(GPU_NODE, "count", count.to_string());
        f.insert_attribute(GPU_NODE, "health", "ok");
        f
    }

    fn node(f: &FeatureSet) -> Vec<(String, String)> {
        f.attributes[GPU_NODE]
            .elements
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The most trusted source gives the expected count; the detail names every source that
    /// sees GPUs missing; VFs are not GPUs present.
    #[test]
    fn apply_takes_the_trusted_count_and_names_every_source() {
        let e = |source, expected, detail: &str| Expectation {
            source,
            vendor: Some("nvidia"),
            expected,
            detail: detail.into(),
        };
        let mut f = gpus(9, 2);
        apply(
            &mut f,
            &[e("table", 8, "t"), e("nvswitch", 8, "n"), e("kfd", 7, "k")],
            0,
        );
        assert_eq!(
            node(&f),
            pairs(&[
                ("count", "9"),
                ("expected_count", "8"),
                ("health", "degraded"),
                ("health_missing", "table: t; nvswitch: n"),
                ("missing", "1"),
            ])
        );
        let mut f = gpus(8, 0);
        apply(&mut f, &[e("table", 8, "t")], 0);
        let mut unread = gpus(7, 0);
        apply(&mut unread, &[e("table", 8, "t")], 1);
        assert_eq!(
            node(&unread),
            pairs(&[("count", "7"), ("expected_count", "8"), ("health", "ok")])
        );
        assert_eq!(
            node(&f),
            pairs(&[("count", "8"), ("expected_count", "8"), ("health", "ok")])
        );
        let mut f = gpus(0, 0);
        apply(&mut f, &[e("nvswitch", 8, "n")], 0);
        assert_eq!(node(&f), pairs(&[("count", "0"), ("health", "ok")]));
    }

    #[test]
    fn a_long_detail_is_cut_on_a_character() {
        // 157 bytes fit before the `...`: 78 two-byte characters.
        assert_eq!(bound(&"é".repeat(200)), format!("{}...", "é".repeat(78)));
        assert_eq!(bound("nvswitch: 4"), "nvswitch: 4");
    }
}
