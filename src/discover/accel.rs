//! `accel.device`, `accel.node` and `accel.driver`: accelerators that are not GPUs (Gaudi HPUs,
//! NPUs, TPUs, Neuron devices, ...), as the catalogue (`crate::catalogue`) classifies PCI
//! functions, and the devices of the kernel's `accel` class (`/sys/class/accel/accel<N>`, the
//! DRM accel subsystem of the Intel and AMD NPUs, Gaudi and Qualcomm's AI 100).
//!
//! `accel.node` carries what needs all devices to agree (`kind`, `product`, memory, driver
//! version), present only when they do, as `gpu.node` does; and the counts per vendor (and per
//! model on a node of several models).

use std::collections::{BTreeMap, BTreeSet};

use crate::catalogue::{self, Class, Source};
use crate::features::FeatureSet;
use crate::pciids::PciIds;
use crate::sysfs::Sysfs;
use crate::validate::sanitize_value;

use super::pci::{PciAddress, PciDevice};
use super::warnings::Warnings;

pub const ACCEL_DEVICE: &str = "accel.device";
pub const ACCEL_NODE: &str = "accel.node";
pub const ACCEL_DRIVER: &str = "accel.driver";

/// The longest model name in `accel-model-<name>.count` (a label name is at most 63 characters).
pub const MODEL_KEY_MAX: usize = 63 - "accel-model-".len() - ".count".len();

/// PCI functions with a device in the `accel` class: address -> `accel<N>` (the first, sorted).
pub fn accel_class(sysfs: &Sysfs, warnings: &mut Warnings) -> BTreeMap<PciAddress, String> {
    let dir = sysfs.path("class/accel");
    let mut out = BTreeMap::new();
    let names = match sysfs.list(&dir) {
        Ok(Some(n)) => n,
        Ok(None) => return out,
        Err(e) => {
            warnings.push(format!("{e}; accel class devices left out"));
            return out;
        }
    };
    for name in names.into_iter().filter(|n| is_numbered(n, "accel")) {
        match sysfs.link_name(&dir.join(&name).join("device")) {
            Ok(Some(parent)) => {
                if let Some(a) = PciAddress::parse(&parent) {
                    out.entry(a).or_insert(name);
                }
            }
            Ok(None) => {}
            Err(e) => warnings.push(format!("{e}; {name} left out of the accel class")),
        }
    }
    out
}

/// Reads a catalogue `Source` of a device: a file under its PCI directory, or a module's
/// `version`.
fn read_source(
    sysfs: &Sysfs,
    dev: &PciDevice,
    source: &Source,
    warnings: &mut Warnings,
) -> Option<String> {
    let path = match source {
        Source::Module(m) => sysfs.path("module").join(m).join("version"),
        Source::File { path, .. } => dev.path.join(path),
    };
    match sysfs.read(&path) {
        Ok(Some(v)) if !v.is_empty() => Some(v),
        Ok(_) => None,
        Err(e) => {
            warnings.push(format!("{e}; attribute left out"));
            None
        }
    }
}

/// A device's memory in MiB from its catalogue entry, when sysfs has it (0 is unknown).
pub fn memory_mib(
    sysfs: &Sysfs,
    dev: &PciDevice,
    entry: &catalogue::DeviceEntry,
    warnings: &mut Warnings,
) -> Option<u64> {
    let source = entry.memory.as_ref()?;
    let Source::File { unit, .. } = source else {
        return None;
    };
    let raw = read_source(sysfs, dev, source, warnings)?;
    match raw.trim().parse::<u64>() {
        Ok(v) if v > 0 => Some(unit.to_mib(v)),
        Ok(_) => None,
        Err(_) => {
            warnings.push(format!(
                "{}: {raw:?} is not a number; memory left out",
                dev.path.display()
            ));
            None
        }
    }
}

/// A device's driver version from its catalogue entry: `(key, version)`, the key being the
/// module or the entry's driver (`DeviceEntry::version_key`).
pub fn driver_version(
    sysfs: &Sysfs,
    dev: &PciDevice,
    entry: &catalogue::DeviceEntry,
    warnings: &mut Warnings,
) -> Option<(String, String)> {
    let key = entry.version_key()?.to_string();
    let version = read_source(sysfs, dev, entry.version.as_ref()?, warnings)?;
    Some((key, version))
}

/// What the catalogue says each of `devices` is (in their order; `None`: neither GPU nor
/// accelerator), once for both `gpu::discover` and `discover`.
pub fn classify(
    devices: &[PciDevice],
    accel_class: &BTreeMap<PciAddress, String>,
) -> Vec<Option<Class<'static>>> {
    let cat = catalogue::catalogue();
    devices
        .iter()
        .map(|d| {
            let in_class = accel_class.contains_key(&d.sort_key);
            cat.classify(d.vendor_id, d.device_id, d.class_code, in_class)
        })
        .collect()
}

/// Fills `accel.device`, `accel.node` and `accel.driver` from the PCI functions the catalogue
/// says are accelerators (not GPUs); `classes` from `classify`.
pub fn discover(
    sysfs: &Sysfs,
    devices: &[PciDevice],
    classes: &[Option<Class<'static>>],
    ids: &PciIds,
    accel_class: &BTreeMap<PciAddress, String>,
    features: &mut FeatureSet,
    warnings: &mut Warnings,
) {
    let mut accels: Vec<BTreeMap<String, String>> = Vec::new();
    let mut drivers: BTreeMap<String, String> = BTreeMap::new();
    for (dev, class) in devices.iter().zip(classes) {
        let Some(class) = class.as_ref().filter(|c| !c.is_gpu()) else {
            continue;
        };
        let class_dev = accel_class.get(&dev.sort_key);
        let mut a = BTreeMap::new();
        a.insert("address".to_string(), dev.address.clone());
        a.insert("vendor".into(), class.vendor.to_string());
        a.insert("vendor_id".into(), format!("{:04x}", dev.vendor_id));
        a.insert("device_id".into(), format!("{:04x}", dev.device_id));
        a.insert("class".into(), format!("{:04x}", dev.class_code >> 8));
        a.insert("kind".into(), class.kind.to_string());
        for key in ["numa_node", "driver", "is_vf"] {
            if let Some(v) = dev.attr(key) {
                a.insert(key.into(), v.to_string());
            }
        }
        if let Some(c) = class_dev {
            a.insert("accel".into(), c.clone());
        }
        let product = ids
            .device_name(dev.vendor_id, dev.device_id)
            .or_else(|| class.entry.and_then(|e| e.product(dev.device_id)));
        if let Some(p) = product {
            a.insert("product".into(), p.to_string());
        }
        if let Some(e) = class.entry {
            if let Some(m) = memory_mib(sysfs, dev, e, warnings) {
                a.insert("memory_mib".into(), m.to_string());
            }
            if let Some((what, v)) = driver_version(sysfs, dev, e, warnings) {
                a.insert("driver_version".into(), v.clone());
                drivers.entry(what).or_insert(v);
            }
        }
        accels.push(a);
    }

    features
        .instances
        .entry(ACCEL_DEVICE.to_string())
        .or_default();
    for (index, a) in accels.iter_mut().enumerate() {
        a.insert("index".into(), index.to_string());
        features.push_instance(
            ACCEL_DEVICE,
            a.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
        );
    }
    for (k, v) in drivers {
        features.insert_attribute(ACCEL_DRIVER, k, v);
    }
    for (k, v) in node_attributes(&accels) {
        features.insert_attribute(ACCEL_NODE, k, v);
    }
}

fn node_attributes(accels: &[BTreeMap<String, String>]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("count".to_string(), accels.len().to_string());
    if accels.is_empty() {
        return out;
    }
    let common = |k: &str| -> Option<&str> {
        let first = accels[0].get(k)?;
        accels
            .iter()
            .all(|a| a.get(k) == Some(first))
            .then_some(first.as_str())
    };
    let distinct = |k: &str| -> BTreeSet<&str> {
        accels
            .iter()
            .filter_map(|a| a.get(k).map(String::as_str))
            .collect()
    };
    let join = |set: &BTreeSet<&str>| set.iter().copied().collect::<Vec<_>>().join(",");
    let vendors = distinct("vendor");
    out.insert("vendors".into(), join(&vendors));
    for v in &vendors {
        let n = accels
            .iter()
            .filter(|a| a.get("vendor").map(String::as_str) == Some(v))
            .count();
        out.insert(format!("count_{v}"), n.to_string());
    }
    out.insert("kinds".into(), join(&distinct("kind")));
    for k in ["vendor", "kind"] {
        if let Some(v) = common(k) {
            out.insert(k.into(), v.to_string());
        }
    }
    if let Some(p) = common("product").map(sanitize_value)
        && !p.is_empty()
    {
        out.insert("product".into(), p);
    }
    if let Some(v) = common("driver_version").map(sanitize_value)
        && !v.is_empty()
    {
        out.insert("driver_version".into(), v);
    }
    memory_summary(accels.iter(), &mut out);
    // Several models, every one named: how many, and a count per model.
    let products: Option<Vec<&str>> = accels
        .iter()
        .map(|a| a.get("product").map(String::as_str))
        .collect();
    if let Some(products) = products
        && common("product").is_none()
    {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for p in products {
            *counts
                .entry(crate::validate::sanitize_to(p, MODEL_KEY_MAX))
                .or_default() += 1;
        }
        counts.retain(|k, _| !k.is_empty());
        out.insert("models".into(), counts.len().to_string());
        for (k, c) in counts {
            out.insert(format!("count_model_{k}"), c.to_string());
        }
    }
    out
}

/// `memory_mib_min`, `memory_mib_max` and `memory_mib_total` over devices' `memory_mib`, only
/// when every device's is known (shared by `gpu.node` and `accel.node`).
pub fn memory_summary<'a>(
    devices: impl Iterator<Item = &'a BTreeMap<String, String>>,
    out: &mut BTreeMap<String, String>,
) {
    let memory: Option<Vec<u64>> = devices.map(|a| a.get("memory_mib")?.parse().ok()).collect();
    if let Some(m) = memory.filter(|m| !m.is_empty()) {
        let min = m.iter().min().copied().unwrap_or(0);
        let max = m.iter().max().copied().unwrap_or(0);
        out.insert("memory_mib_min".into(), min.to_string());
        out.insert("memory_mib_max".into(), max.to_string());
        out.insert("memory_mib_total".into(), m.iter().sum::<u64>().to_string());
    }
}

fn is_numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}
