//! The ResourceSlices each vendor's DRA driver would publish for a node of this shape, from its
//! features (`template -o resourceslice`): a ResourceSlice template for Karpenter's
//! DynamicResources and cluster-autoscaler's template node info. The attributes follow the
//! drivers as `crate::dra::VENDORS` and tests/fixtures/dra/generate.py do (docs/dra-drivers.md
//! cites each); what the features cannot say (NVIDIA's brand, AMD's DRM card and render minors,
//! Intel's model table) is left out or derived, as docs/autoscaling.md lists.

use serde_json::{Map, Value, json};

use crate::dra::{NUMA_NODE, PCI_BUS_ID, PCIE_ROOT, vendor_of_driver};
use crate::features::{FeatureSet, Instance};

const GPU_DEVICE: &str = "gpu.device";
const GPU_NODE: &str = "gpu.node";

/// The node a template's slices name when no `--node-name` is given.
pub const PLACEHOLDER_NODE: &str = "node-template";

/// apimachinery's `Quantity.String()` of a byte count: the largest exact binary suffix, and
/// decimal below 1024 (`81559Mi`, `80Gi`, `0`).
pub fn bytes_quantity(n: u64) -> String {
    if n < 1024 {
        return n.to_string();
    }
    let mut n = n;
    let mut i = 0;
    let suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    while n.is_multiple_of(1024) && i < suffixes.len() - 1 {
        n /= 1024;
        i += 1;
    }
    format!("{n}{}", suffixes[i])
}

/// The numeric parts of a version, coerced to `major.minor.patch` as the drivers' semver does
/// (`535.161.08` -> `535.161.8`).
fn semver(v: &str) -> Option<String> {
    let parts: Vec<u64> = v
        .trim_start_matches('v')
        .split(['.', '-', '+'])
        .map_while(|p| p.parse().ok())
        .collect();
    let get = |i: usize| parts.get(i).copied().unwrap_or(0);
    (!parts.is_empty()).then(|| format!("{}.{}.{}", get(0), get(1), get(2)))
}

fn s(v: impl Into<String>) -> Value {
    json!({"string": v.into()})
}

fn int(v: i64) -> Value {
    json!({"int": v})
}

fn ver(v: String) -> Value {
    json!({"version": v})
}

fn cap(v: String) -> Value {
    json!({"value": v})
}

/// A PCI address with a 4-digit domain, lower case (the standard attribute's form).
fn bus_id(a: &str) -> String {
    let a = a.trim().to_ascii_lowercase();
    match a.split_once(':') {
        Some((d, rest)) if d.len() > 4 && d.trim_start_matches('0').len() <= 4 => {
            format!("{:0>4}:{rest}", d.trim_start_matches('0'))
        }
        _ => a,
    }
}

fn placement(g: &Instance, attrs: &mut Map<String, Value>, numa_attr: &str, negative: bool) {
    if let Some(a) = g.get("address") {
        attrs.insert(PCI_BUS_ID.into(), s(bus_id(a)));
    }
    if let Some(r) = g.get("pcie_root") {
        attrs.insert(
            PCIE_ROOT.into(),
            s(format!("pci{}", r.to_ascii_lowercase())),
        );
    }
    if let Some(n) = g.get("numa_node").and_then(|n| n.parse::<i64>().ok())
        && (negative || n >= 0)
    {
        attrs.insert(numa_attr.into(), int(n));
    }
}

fn memory(g: &Instance, parts: u64) -> Option<String> {
    let mib: u64 = g.get("memory_mib")?.parse().ok()?;
    Some(bytes_quantity(mib / parts.max(1) * (1 << 20)))
}

/// `Ada Lovelace` from gpu-labeler's `ada-lovelace` (go-nvlib's architecture names).
fn architecture(family: &str) -> String {
    family
        .split(['-', ' ', '_'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn nvidia(f: &FeatureSet, gpus: &[&Instance], uuids: bool) -> Vec<Value> {
    let driver_version = f.attribute(GPU_NODE, "driver_version").and_then(semver);
    let cuda = match (
        f.attribute(GPU_NODE, "cuda_major"),
        f.attribute(GPU_NODE, "cuda_minor"),
    ) {
        (Some(a), Some(b)) => semver(&format!("{a}.{b}")),
        _ => None,
    };
    let mut out = Vec::new();
    for (i, g) in gpus.iter().enumerate() {
        let mut a = Map::new();
        a.insert("type".into(), s("gpu"));
        if uuids && let Some(u) = g.get("uuid") {
            a.insert("uuid".into(), s(u));
        }
        if let Some(p) = g.get("product") {
            a.insert("productName".into(), s(p));
        }
        if let Some(fam) = g.get("family") {
            a.insert("architecture".into(), s(architecture(fam)));
        }
        if let (Some(ma), Some(mi)) = (g.get("compute_major"), g.get("compute_minor"))
            && let Some(v) = semver(&format!("{ma}.{mi}"))
        {
            a.insert("cudaComputeCapability".into(), ver(v));
        }
        if let Some(v) = &driver_version {
            a.insert("driverVersion".into(), ver(v.clone()));
        }
        if let Some(v) = &cuda {
            a.insert("cudaDriverVersion".into(), ver(v.clone()));
        }
        placement(g, &mut a, NUMA_NODE, false);
        let index = g.get("index").map(str::to_string).unwrap_or(i.to_string());
        let mut d = json!({"name": format!("gpu-{index}"), "attributes": a});
        if let Some(m) = memory(g, 1) {
            d["capacity"] = json!({"memory": cap(m)});
        }
        out.push(d);
    }
    out
}

fn amd(gpus: &[&Instance]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut card = 0u64;
    for g in gpus {
        let cp = g
            .get("compute_partition")
            .unwrap_or("")
            .to_ascii_lowercase();
        let mp = g.get("memory_partition").unwrap_or("").to_ascii_lowercase();
        let whole = cp.is_empty() || cp == "spx";
        let parts = super::amd_partitions(&cp) as u64;
        for _ in 0..parts {
            // productName is the GPU's sysfs `product_name`, which the features do not carry:
            // left out rather than guessed from the PCI database.
            let mut a = Map::new();
            placement(g, &mut a, "numaNode", true);
            // The driver writes the kernel's NUMA node as it is, -1 included (discovery leaves
            // -1 out).
            a.entry("numaNode").or_insert_with(|| int(-1));
            if let Some(d) = g.get("device_id") {
                a.insert("deviceID".into(), s(format!("0x{d}")));
            }
            a.insert(
                "type".into(),
                s(if whole { "amdgpu" } else { "amdgpu-partition" }),
            );
            if !cp.is_empty() && !mp.is_empty() {
                a.insert("partitionProfile".into(), s(format!("{cp}_{mp}")));
            }
            let share = |k: &str| -> String {
                let n: u64 = g.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
                (n / parts).to_string()
            };
            let mut c = Map::new();
            if let Some(m) = memory(g, parts) {
                c.insert("memory".into(), cap(m));
            }
            c.insert("computeUnits".into(), cap(share("cu_count")));
            c.insert("simdUnits".into(), cap(share("simd_count")));
            out.push(json!({
                "name": format!("gpu-{card}-{}", card + 128),
                "attributes": a,
                "capacity": c,
            }));
            card += 1;
        }
    }
    out
}

fn intel(gpus: &[&Instance]) -> Vec<Value> {
    let mut out = Vec::new();
    for g in gpus {
        let driver = g.get("driver").unwrap_or("");
        if driver != "i915" && driver != "xe" {
            continue; // the driver publishes only DRM-bound GPUs
        }
        let address = g.get("address").map(bus_id).unwrap_or_default();
        let device = g.get("device_id").unwrap_or("");
        let mut a = Map::new();
        a.insert("driver".into(), s(driver));
        let vfs: u64 = g
            .get("sriov_totalvfs")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        a.insert("sriov".into(), json!({"bool": vfs > 0}));
        let vf = g.get("is_vf") == Some("true");
        a.insert("type".into(), s(if vf { "vf" } else { "gpu" }));
        a.insert("pciId".into(), s(format!("0x{device}")));
        a.insert("pciAddress".into(), s(address.clone()));
        placement(g, &mut a, NUMA_NODE, false);
        // `pciRoot`: the bus of the root (`00` of `0000:00`), as the driver writes it.
        if let Some((_, bus)) = g.get("pcie_root").and_then(|r| r.split_once(':')) {
            a.insert("pciRoot".into(), s(bus.to_ascii_lowercase()));
        }
        let name = format!("{}-0x{device}", address.replace([':', '.'], "-"));
        out.push(json!({
            "name": name,
            "attributes": a,
            "capacity": {
                "memory": cap(memory(g, 1).unwrap_or_else(|| "0".into())),
                "millicores": cap("1k".into()),
            },
        }));
    }
    out
}

/// The ResourceSlices (a `kind: List`) of `node`: one per driver with devices. `uuids`: write
/// the GPUs' UUIDs, which differ per node (`--per-node keep`).
pub fn resource_slices(features: &FeatureSet, node: &str, uuids: bool) -> Value {
    let gpus = features.instances(GPU_DEVICE);
    let of = |v: &str| -> Vec<&Instance> {
        gpus.iter().filter(|g| g.get("vendor") == Some(v)).collect()
    };
    let mut items = Vec::new();
    for (driver, devices) in [
        ("gpu.nvidia.com", nvidia(features, &of("nvidia"), uuids)),
        ("gpu.amd.com", amd(&of("amd"))),
        ("gpu.intel.com", intel(&of("intel"))),
    ] {
        debug_assert!(vendor_of_driver(driver).is_some());
        if devices.is_empty() {
            continue;
        }
        let mut devices = devices;
        devices.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        items.push(json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-{driver}-template")},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }));
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// `template -o resourceslice`: YAML documents, one slice each.
pub fn render(features: &FeatureSet, node: &str, uuids: bool) -> String {
    let list = resource_slices(features, node, uuids);
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .map(|i| serde_saphyr::to_string(i).expect("a slice always serialises"))
        .collect::<Vec<_>>()
        .join("---\n")
}
