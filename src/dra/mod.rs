//! Dynamic Resource Allocation, as gpu-labeler sees it: the `resource.k8s.io` objects
//! (`objects`), what each GPU vendor's DRA driver publishes (`VENDORS`, from the drivers' own
//! source: docs/dra-drivers.md), and the join of a node's slice devices to the GPUs discovery
//! found, which says whether the DRA driver's view matches the machine (`features`: the `dra.*`
//! features of docs/catalog.md). Pure: the slices come from a file (`--dra`) or from the API
//! server (the daemon), read elsewhere; this room knows nothing above the feature model.

use std::collections::{BTreeMap, BTreeSet};

use crate::features::{FeatureSet, Instance};

pub mod objects;
pub mod taints;

pub use objects::{Attr, Device, DraObjects, Slice};

/// The feature of one slice device of this node.
pub const DRA_DEVICE: &str = "dra.device";
/// Node-wide: `coverage`, `devices`, `drivers`.
pub const DRA_NODE: &str = "dra.node";
/// One instance per problem: `reason`, `pciBusID`, `attribute`, `published`, `measured`.
pub const DRA_MISMATCH: &str = "dra.mismatch";

/// The GPU features discovery makes (`discover::gpu`'s names, one floor up).
const GPU_DEVICE: &str = "gpu.device";
const GPU_NODE: &str = "gpu.node";

/// The standard attributes (`k8s.io/dynamic-resource-allocation/deviceattribute`).
pub const PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";
pub const NUMA_NODE: &str = "resource.kubernetes.io/numaNode";

/// What one GPU vendor's DRA driver publishes, by attribute name (docs/dra-drivers.md cites the
/// source of each).
#[derive(Debug)]
pub struct Vendor {
    /// The driver's name, `spec.driver` and the domain of its attributes.
    pub driver: &'static str,
    /// gpu-labeler's vendor name (`gpu.device` `vendor`).
    pub vendor: &'static str,
    /// The device plugin's extended resources for the same GPUs (Node allocatable).
    pub extended_resources: &'static [&'static str],
    /// The attribute that says what a device is, and its value for a whole GPU (partitions
    /// and MIG devices share their parent's bus id and are compared with nothing).
    pub type_attr: &'static str,
    pub whole: &'static [&'static str],
    /// Where the bus id is when the standard attribute is absent (older releases).
    pub bus_id_fallback: &'static [&'static str],
    /// The NUMA node attribute (standard, or the driver's own).
    pub numa: &'static [&'static str],
    /// Compared with what NVML says (`productName`, `architecture`, `driverVersion`): only
    /// NVIDIA's come from the same source as gpu-labeler's.
    pub product: Option<&'static str>,
    pub architecture: Option<&'static str>,
    pub driver_version: Option<&'static str>,
    /// The device's UUID, and a MIG device's parent's (joined when the bus id is absent).
    pub uuid: Option<&'static str>,
    pub parent_uuid: Option<&'static str>,
}

/// The GPU DRA drivers gpu-labeler knows (docs/dra-drivers.md).
pub const VENDORS: &[Vendor] = &[
    // kubernetes-sigs/dra-driver-nvidia-gpu @ 95932046 (cmd/gpu-kubelet-plugin).
    Vendor {
        driver: "gpu.nvidia.com",
        vendor: "nvidia",
        extended_resources: &["nvidia.com/gpu"],
        type_attr: "type",
        whole: &["gpu"],
        bus_id_fallback: &[],
        numa: &[NUMA_NODE, "dra.net/numaNode"],
        product: Some("productName"),
        architecture: Some("architecture"),
        driver_version: Some("driverVersion"),
        uuid: Some("uuid"),
        parent_uuid: Some("parentUUID"),
    },
    // ROCm/k8s-gpu-dra-driver @ 30915570 (pkg/amdgpu/discovery.go); `pciAddr` on older main.
    Vendor {
        driver: "gpu.amd.com",
        vendor: "amd",
        extended_resources: &["amd.com/gpu"],
        type_attr: "type",
        whole: &["amdgpu"],
        bus_id_fallback: &["pciAddr", "parentPciAddr"],
        numa: &[NUMA_NODE, "numaNode"],
        product: None,
        architecture: None,
        driver_version: None,
        uuid: None,
        parent_uuid: None,
    },
    // intel/intel-resource-drivers-for-kubernetes @ 1da939fa (pkg/gpu/discovery).
    Vendor {
        driver: "gpu.intel.com",
        vendor: "intel",
        extended_resources: &["gpu.intel.com/i915", "gpu.intel.com/xe"],
        type_attr: "type",
        whole: &["gpu"],
        bus_id_fallback: &["pciAddress"],
        numa: &[NUMA_NODE],
        product: None,
        architecture: None,
        driver_version: None,
        uuid: None,
        parent_uuid: None,
    },
];

pub fn vendor_of_driver(driver: &str) -> Option<&'static Vendor> {
    VENDORS.iter().find(|v| v.driver == driver)
}

/// Why a slice device and the machine disagree (`dra.mismatch` `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    /// A GPU the hardware shows that no slice device covers.
    Unpublished,
    /// A device of a GPU driver with no such GPU on the node (a stale pool).
    UnknownDevice,
    /// An attribute that disagrees with what gpu-labeler measured.
    Attribute,
    /// Memory capacity 0 where the GPU has memory.
    ZeroMemory,
    /// The device plugin's extended resource beside slices for the same GPUs.
    DoubleAdvertised,
}

impl Reason {
    pub const ALL: [Reason; 5] = [
        Reason::Unpublished,
        Reason::UnknownDevice,
        Reason::Attribute,
        Reason::ZeroMemory,
        Reason::DoubleAdvertised,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Unpublished => "unpublished",
            Reason::UnknownDevice => "unknown-device",
            Reason::Attribute => "attribute",
            Reason::ZeroMemory => "zero-memory",
            Reason::DoubleAdvertised => "double-advertised",
        }
    }
}

/// One problem.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mismatch {
    pub reason: Reason,
    pub pci_bus_id: String,
    /// The attribute (or capacity, or extended resource) that disagrees.
    pub attribute: String,
    pub published: String,
    pub measured: String,
}

/// A slice device of this node and the GPU it joined (its `gpu.device` address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined<'a> {
    pub slice: &'a Slice,
    pub device: &'a Device,
    pub bus_id: String,
    pub gpu: Option<usize>,
}

/// What the join found on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report<'a> {
    pub devices: Vec<Joined<'a>>,
    /// The GPUs (indexes into `gpu.device`) some device covers.
    pub covered: BTreeSet<usize>,
    pub gpus: usize,
    pub drivers: BTreeSet<&'a str>,
    pub mismatches: Vec<Mismatch>,
}

impl Report<'_> {
    /// `complete` | `partial` | `none`.
    pub fn coverage(&self) -> &'static str {
        if self.covered.is_empty() {
            "none"
        } else if self.covered.len() == self.gpus {
            "complete"
        } else {
            "partial"
        }
    }
}

/// A PCI address as the standard attribute writes it: lower case, a 4-digit domain.
fn bus_id(s: &str) -> String {
    let s = s.trim().to_ascii_lowercase();
    match s.split_once(':') {
        // `00000000:19:00.0` (NVML's 8-digit domain) or a short one: four digits.
        Some((domain, rest)) if rest.contains(':') && domain.len() != 4 => {
            let d = domain.trim_start_matches('0');
            format!("{:0>4}:{rest}", if d.is_empty() { "0" } else { d })
        }
        _ => s,
    }
}

/// `pci0000:15` (the standard attribute) as gpu-labeler's `pcie_root` writes it (`0000:15`).
fn pcie_root(s: &str) -> String {
    s.strip_prefix("pci").unwrap_or(s).to_ascii_lowercase()
}

/// The numeric parts of a version (`535.161.08` and `535.161.8` are one version).
fn version_parts(s: &str) -> Vec<u64> {
    s.trim_start_matches('v')
        .split(['.', '-', '+'])
        .map_while(|p| p.parse().ok())
        .collect()
}

/// Letters and digits, lower case: `Ada Lovelace` and `ada-lovelace` are one architecture.
fn squashed(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Memory sizes that differ by more than this part of the larger are a mismatch (what a driver
/// and NVML or sysfs round differently stays under it).
const MEMORY_TOLERANCE: f64 = 0.01;

/// Joins `node`'s slice devices to the GPUs of `features` (`gpu.device`) and finds what
/// disagrees; `objects` also gives the DeviceClasses and the Node's allocatable.
pub fn join<'a>(features: &FeatureSet, objects: &'a DraObjects, node: &str) -> Report<'a> {
    let gpus = features.instances(GPU_DEVICE);
    let by_bus: BTreeMap<String, usize> = gpus
        .iter()
        .enumerate()
        .filter_map(|(i, g)| Some((bus_id(g.get("address")?), i)))
        .collect();
    let by_uuid: BTreeMap<&str, usize> = gpus
        .iter()
        .enumerate()
        .filter_map(|(i, g)| Some((g.get("uuid")?, i)))
        .collect();
    let mut report = Report {
        devices: Vec::new(),
        covered: BTreeSet::new(),
        gpus: gpus.len(),
        drivers: BTreeSet::new(),
        mismatches: Vec::new(),
    };
    for slice in objects.slices_of(node) {
        let vendor = vendor_of_driver(&slice.driver);
        for device in &slice.devices {
            let d = slice.driver.as_str();
            let bus = device
                .text(d, PCI_BUS_ID)
                .or_else(|| {
                    vendor.and_then(|v| v.bus_id_fallback.iter().find_map(|a| device.text(d, a)))
                })
                .map(bus_id)
                .unwrap_or_default();
            let mut gpu = by_bus.get(&bus).copied();
            // No bus id at all (an older release): the UUID, or a MIG device's parent's.
            if bus.is_empty()
                && let Some(v) = vendor
            {
                gpu = [v.uuid, v.parent_uuid]
                    .into_iter()
                    .flatten()
                    .find_map(|a| device.text(d, a))
                    .and_then(|u| by_uuid.get(u).copied());
            }
            // Devices of other drivers (NICs, FPGAs) are only counted when they sit on a GPU.
            if vendor.is_none() && gpu.is_none() {
                continue;
            }
            report.drivers.insert(d);
            match gpu {
                Some(i) => {
                    report.covered.insert(i);
                    if let Some(v) = vendor {
                        compare(v, device, &gpus[i], features, &mut report.mismatches);
                    }
                }
                None => report.mismatches.push(Mismatch {
                    reason: Reason::UnknownDevice,
                    pci_bus_id: bus.clone(),
                    attribute: String::new(),
                    published: format!("{}/{}", slice.pool, device.name),
                    measured: String::new(),
                }),
            }
            report.devices.push(Joined {
                slice,
                device,
                bus_id: bus,
                gpu,
            });
        }
    }
    for (i, g) in gpus.iter().enumerate() {
        if !report.covered.contains(&i) {
            report.mismatches.push(Mismatch {
                reason: Reason::Unpublished,
                pci_bus_id: g.get("address").map(bus_id).unwrap_or_default(),
                attribute: String::new(),
                published: String::new(),
                measured: g.get("product").unwrap_or_default().to_string(),
            });
        }
    }
    let twice = double_advertised(objects, node, &report, gpus);
    report.mismatches.extend(twice);
    report.mismatches.sort();
    report
}

/// The device plugin's extended resource on the Node's allocatable beside slices for the same
/// vendor's GPUs, with no DeviceClass mapping that resource to the slices
/// (`extendedResourceName`): every such GPU is advertised twice.
fn double_advertised(
    objects: &DraObjects,
    node: &str,
    report: &Report<'_>,
    gpus: &[Instance],
) -> Vec<Mismatch> {
    let Some(n) = objects.node(node) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for v in VENDORS {
        let published = report
            .devices
            .iter()
            .filter(|j| j.slice.driver == v.driver && j.gpu.is_some())
            .count();
        if published == 0 {
            continue;
        }
        for r in v.extended_resources {
            let Some(q) = n.allocatable.get(*r).filter(|q| q.milli > 0) else {
                continue;
            };
            if objects
                .classes
                .iter()
                .any(|c| c.extended_resource_name.as_deref() == Some(*r))
            {
                continue;
            }
            let vendor_gpus = gpus
                .iter()
                .filter(|g| g.get("vendor") == Some(v.vendor))
                .count();
            out.push(Mismatch {
                reason: Reason::DoubleAdvertised,
                pci_bus_id: String::new(),
                attribute: (*r).to_string(),
                published: format!("{q} {r} and {published} {} devices", v.driver),
                measured: format!("{vendor_gpus} GPUs"),
            });
        }
    }
    out
}

/// The attributes of a whole GPU's device against what discovery measured.
fn compare(v: &Vendor, device: &Device, gpu: &Instance, f: &FeatureSet, out: &mut Vec<Mismatch>) {
    let d = v.driver;
    let whole = device
        .text(d, v.type_attr)
        .is_none_or(|t| v.whole.contains(&t));
    let bus = gpu.get("address").map(bus_id).unwrap_or_default();
    let mut differ = |attribute: &str, published: String, measured: &str| {
        out.push(Mismatch {
            reason: Reason::Attribute,
            pci_bus_id: bus.clone(),
            attribute: attribute.to_string(),
            published,
            measured: measured.to_string(),
        });
    };
    // Placement: the same for a GPU's partitions as for itself.
    if let (Some(p), Some(m)) = (device.text(d, PCIE_ROOT), gpu.get("pcie_root"))
        && pcie_root(p) != m.to_ascii_lowercase()
    {
        differ(PCIE_ROOT, p.to_string(), m);
    }
    if let Some((name, p)) = v.numa.iter().find_map(|a| Some((*a, device.int(d, a)?)))
        && p >= 0
        && let Some(m) = gpu.get("numa_node")
        && m.parse::<i64>().ok() != Some(p)
    {
        differ(name, p.to_string(), m);
    }
    if !whole {
        return;
    }
    // NVML's own words, where gpu-labeler read them from NVML too.
    let from_nvml = gpu.get("source") == Some("nvml");
    if let Some(a) = v.product
        && from_nvml
        && let (Some(p), Some(m)) = (device.text(d, a), gpu.get("product"))
        && p != m
    {
        differ(a, p.to_string(), m);
    }
    if let Some(a) = v.architecture
        && let (Some(p), Some(m)) = (device.text(d, a), gpu.get("family"))
        && squashed(p) != squashed(m)
    {
        differ(a, p.to_string(), m);
    }
    if let Some(a) = v.driver_version
        && from_nvml
        && let (Some(p), Some(m)) = (device.text(d, a), f.attribute(GPU_NODE, "driver_version"))
        && version_parts(p) != version_parts(m)
    {
        differ(a, p.to_string(), m);
    }
    if let (Some(q), Some(mib)) = (
        device.capacity(d, "memory"),
        gpu.get("memory_mib").and_then(|m| m.parse::<f64>().ok()),
    ) && mib > 0.0
    {
        let published = q.milli as f64 / 1000.0 / (1u64 << 20) as f64;
        if published <= 0.0 {
            out.push(Mismatch {
                reason: Reason::ZeroMemory,
                pci_bus_id: bus.clone(),
                attribute: "memory".into(),
                published: q.to_string(),
                measured: format!("{mib}Mi"),
            });
        } else if (published - mib).abs() > MEMORY_TOLERANCE * published.max(mib) {
            differ(
                "memory",
                format!("{}Mi", published.round()),
                &format!("{mib}Mi"),
            );
        }
    }
}

/// Adds the `dra.*` features of `node` to `features`, from `objects`: one `dra.device` per
/// slice device of this node, `dra.node`, and one `dra.mismatch` per problem. Nothing on a
/// node without GPUs and without slices.
pub fn add_features(features: &mut FeatureSet, objects: &DraObjects, node: &str) {
    let report = join(features, objects, node);
    if report.gpus == 0 && report.devices.is_empty() {
        return;
    }
    // Read while the GPUs are borrowed, added after.
    let gpus = features.instances(GPU_DEVICE);
    let mut add = Vec::with_capacity(report.devices.len());
    for j in &report.devices {
        add.push(Instance::from_iter([
            ("driver", j.slice.driver.clone()),
            ("pool", j.slice.pool.clone()),
            ("device", j.device.name.clone()),
            ("pciBusID", j.bus_id.clone()),
            (
                "gpu",
                j.gpu
                    .and_then(|i| gpus[i].get("address"))
                    .unwrap_or_default()
                    .to_string(),
            ),
        ]));
    }
    for i in add {
        features.push_instance(DRA_DEVICE, i);
    }
    // Present, if empty, so that a rule can tell "no device" from "no DRA facts".
    features.instances.entry(DRA_DEVICE.into()).or_default();
    features.instances.entry(DRA_MISMATCH.into()).or_default();
    for m in &report.mismatches {
        let mut i: Vec<(&str, String)> = vec![
            ("reason", m.reason.as_str().to_string()),
            ("pciBusID", m.pci_bus_id.clone()),
        ];
        for (k, v) in [
            ("attribute", &m.attribute),
            ("published", &m.published),
            ("measured", &m.measured),
        ] {
            if !v.is_empty() {
                i.push((k, v.clone()));
            }
        }
        features.push_instance(DRA_MISMATCH, Instance::from_iter(i));
    }
    features.insert_attribute(DRA_NODE, "coverage", report.coverage());
    features.insert_attribute(DRA_NODE, "devices", report.covered.len().to_string());
    features.insert_attribute(
        DRA_NODE,
        "drivers",
        report.drivers.iter().copied().collect::<Vec<_>>().join(","),
    );
}
