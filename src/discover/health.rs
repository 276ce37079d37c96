//! GPU health: what is wrong with each GPU now (`gpu.device` `health` and its `health_<kind>`
//! details) and over the node (`gpu.node` `health`, `healthy_count`), and the hold that keeps a
//! fault for `sources.health.clearAfter` after it was last seen so that an intermittent fault
//! does not flap labels and taints (docs/health.md).
//!
//! The faults seen from sysfs, for any vendor: `pcie-link` (the link width trained below its
//! maximum; a lower *speed* is not a fault, GPUs drop to Gen1 when idle by design), `unbound` (a
//! GPU without a driver while the vendor's other GPUs are bound to one: the driver is loaded and
//! did not take this one), `lost` (an NVIDIA physical function bound to `nvidia` that NVML, which
//! answered, does not list: NVML's GPU_IS_LOST, or a GPU the driver failed to initialise), and
//! `ras` (AMD: an uncorrectable error count above zero in the amdgpu RAS counters of the
//! function's `ras/` directory). NVML's (`ecc`, `remap`, `xid`, `nvlink`, `fabric`, `thermal`)
//! come from its child process (`nvml::NvmlFault`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::config::HealthConfig;
use crate::features::{FeatureSet, Instance};
use crate::sysfs::Sysfs;

use super::gpu_names::{GPU_DEVICE, GPU_NODE, Vendor};
use super::nvml::{NvmlScan, NvmlStatus};
use super::pci::{PciAddress, PciDevice};
use super::warnings::Warnings;

/// Every fault kind, in the order `health` lists them.
pub use crate::features::HEALTH_FAULTS as KINDS;

pub use super::gpu_names::{DEGRADED, OK};

/// Drivers that hold a GPU away from its vendor's driver on purpose (passthrough, stubs): a GPU
/// bound to one is neither `unbound` nor `lost`.
const HOLDING_DRIVERS: [&str; 3] = ["vfio-pci", "pci-stub", "nvgrace-gpu-vfio-pci"];

/// The most characters a detail built from names read from sysfs may have: a label value's 63,
/// so that 20,000 `ras/*_err_count` files (509 KB once) cannot make the feature set, `explain`
/// or the log carry them all. Past it the list ends in `+N more`.
pub const MAX_DETAIL_LEN: usize = 63;
/// The longest name (a RAS block, a driver) a detail takes from sysfs; amdgpu's longest block
/// is `xgmi_wafl`, so one entry always fits in `MAX_DETAIL_LEN`.
const MAX_NAME_LEN: usize = 24;

/// Whether `name`, read from sysfs, may stand in a detail: 1 to `MAX_NAME_LEN` characters of a
/// label value's (`[A-Za-z0-9_.-]`), as every name the kernel gives these entries is. Anything
/// else (a newline, a megabyte) is no name the kernel wrote.
fn is_plain_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `items` joined by `sep` within `max` characters: as many as fit, then `+N more` for the rest.
fn bounded_list(items: &[String], sep: &str, max: usize) -> String {
    let whole = items.join(sep);
    if whole.len() <= max {
        return whole;
    }
    let mut kept = 0;
    let mut len = 0;
    for (i, item) in items.iter().enumerate() {
        let with = len + if i > 0 { sep.len() } else { 0 } + item.len();
        let more = format!("{sep}+{} more", items.len() - i - 1);
        if with + more.len() > max {
            break;
        }
        kept = i + 1;
        len = with;
    }
    let rest = format!("+{} more", items.len() - kept);
    if kept == 0 {
        return rest;
    }
    format!("{}{sep}{rest}", items[..kept].join(sep))
}

/// The attribute that carries a fault's detail: `health_pcie_link` for `pcie-link`.
pub fn detail_key(kind: &str) -> String {
    format!("health_{}", kind.replace('-', "_"))
}

/// A GPU's faults: kind -> detail.
pub type Faults = BTreeMap<String, String>;

/// What the sysfs checks need to know of the node beyond one function.
pub struct SysfsContext<'a> {
    /// Per vendor, the drivers its GPU functions (not VFs) are bound to, holding drivers aside.
    bound: BTreeMap<Vendor, BTreeSet<&'a str>>,
    /// The PCI addresses NVML listed, when it answered this scan (`None`: it did not, and a
    /// GPU missing from its list says nothing).
    nvml_listed: Option<BTreeSet<PciAddress>>,
    /// The GPUs NVML answered GPU_IS_LOST for (by the address an earlier scan read).
    nvml_lost: BTreeSet<PciAddress>,
}

impl<'a> SysfsContext<'a> {
    pub fn new(gpus: &[(&'a PciDevice, Vendor)], nvml: &NvmlScan) -> SysfsContext<'a> {
        let mut bound: BTreeMap<Vendor, BTreeSet<&str>> = BTreeMap::new();
        for (d, v) in gpus {
            if let Some(drv) = d.driver()
                && !HOLDING_DRIVERS.contains(&drv)
                && d.attr("is_vf") != Some("true")
            {
                bound.entry(*v).or_default().insert(drv);
            }
        }
        let nvml_listed = (nvml.status == NvmlStatus::Ok)
            .then(|| nvml.gpus.iter().filter_map(|g| g.address).collect());
        let nvml_lost = nvml.lost.iter().filter_map(|l| l.address).collect();
        SysfsContext {
            bound,
            nvml_listed,
            nvml_lost,
        }
    }
}

/// The faults sysfs shows for one GPU function.
pub fn sysfs_faults(
    sysfs: &Sysfs,
    dev: &PciDevice,
    vendor: Vendor,
    node: &SysfsContext,
    config: &HealthConfig,
    warnings: &mut Warnings,
) -> Faults {
    let mut out = Faults::new();
    let vf = dev.attr("is_vf") == Some("true");
    if config.pcie_link
        && !vf
        && let Some(detail) = narrowed_link(dev)
    {
        out.insert("pcie-link".into(), detail);
    }
    match dev.driver() {
        // No `driver` entry at all: a `driver` that is there but unreadable says nothing.
        None if !vf && !sysfs.exists(&dev.path.join("driver")) => {
            if let Some(drivers) = node.bound.get(&vendor) {
                let prefix = "no driver; the others are bound to ";
                let plain: Vec<String> = drivers
                    .iter()
                    .filter(|d| is_plain_name(d))
                    .map(|d| d.to_string())
                    .collect();
                let list = match plain.len() {
                    0 => "a driver".to_string(),
                    _ => bounded_list(&plain, ",", MAX_DETAIL_LEN - prefix.len()),
                };
                out.insert("unbound".into(), format!("{prefix}{list}"));
            }
        }
        Some("nvidia") if !vf && vendor == Vendor::Nvidia => {
            if node.nvml_lost.contains(&dev.sort_key) {
                out.insert("lost".into(), "NVML: GPU is lost".into());
            } else if let Some(listed) = &node.nvml_listed
                && !listed.contains(&dev.sort_key)
            {
                out.insert("lost".into(), "bound to nvidia, not listed by NVML".into());
            }
        }
        _ => {}
    }
    if vendor == Vendor::Amd
        && !vf
        && let Some(detail) = amd_ras(sysfs, dev, warnings)
    {
        out.insert("ras".into(), detail);
    }
    out
}

/// `x8 of x16` when the link trained narrower than the function can go. A width of 0 or a
/// maximum that is not a PCIe width (some functions report 255: no link capability) says
/// nothing.
fn narrowed_link(dev: &PciDevice) -> Option<String> {
    let cur: u32 = dev.attr("link_width")?.parse().ok()?;
    let max: u32 = dev.attr("max_link_width")?.parse().ok()?;
    let width = |w: u32| matches!(w, 1 | 2 | 4 | 8 | 12 | 16 | 32);
    (width(cur) && width(max) && cur < max).then(|| format!("x{cur} of x{max}"))
}

/// The amdgpu RAS counters (`ras/<block>_err_count`, `ue: N` and `ce: N` lines, as
/// `amdgpu_ras_sysfs_read` prints them; newer kernels add `de:`): the blocks with uncorrectable
/// errors, `umc 2 uncorrectable`, within `MAX_DETAIL_LEN` (`..., +N more`). A GPU without RAS
/// (consumer parts) has no `ras/` directory. An entry whose block is no plain name (amdgpu's
/// are `[a-z0-9_]`) is left out, and the problems of one GPU's counters are one warning each
/// kind (the first named, the others counted), so that a directory of 20,000 odd entries
/// neither reaches the attribute nor floods the log.
fn amd_ras(sysfs: &Sysfs, dev: &PciDevice, warnings: &mut Warnings) -> Option<String> {
    let dir = dev.path.join("ras");
    let names = match sysfs.list(&dir) {
        Ok(Some(n)) => n,
        Ok(None) => return None,
        Err(e) => {
            warnings.push(format!("{e}; RAS counters left out"));
            return None;
        }
    };
    let mut faults = Vec::new();
    // Per kind of problem: the first one's message and how many there were.
    let mut odd_names: (Option<String>, usize) = (None, 0);
    let mut unreadable: (Option<String>, usize) = (None, 0);
    let mut no_count: (Option<String>, usize) = (None, 0);
    let note = |kind: &mut (Option<String>, usize), message: &dyn Fn() -> String| {
        if kind.0.is_none() {
            kind.0 = Some(message());
        }
        kind.1 += 1;
    };
    for name in names {
        let Some(block) = name.strip_suffix("_err_count") else {
            continue;
        };
        if !is_plain_name(block) {
            note(&mut odd_names, &|| {
                format!(
                    "{}: {:?} is not an amdgpu RAS counter (its block is not 1 to {MAX_NAME_LEN} of [A-Za-z0-9_.-]); left out",
                    dir.display(),
                    crate::validate::elide(&name, 60)
                )
            });
            continue;
        }
        let text = match sysfs.read(&dir.join(&name)) {
            Ok(Some(t)) => t,
            Ok(None) => continue,
            Err(e) => {
                note(&mut unreadable, &|| format!("{e}; RAS counter left out"));
                continue;
            }
        };
        let ue = text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "ue").then(|| v.trim().parse::<u64>().ok())?
        });
        match ue {
            Some(0) => {}
            Some(n) => faults.push(format!("{block} {n} uncorrectable")),
            None => note(&mut no_count, &|| {
                format!(
                    "{}: no `ue: <count>` line; RAS counter left out",
                    dir.join(&name).display()
                )
            }),
        }
    }
    for (first, count) in [odd_names, unreadable, no_count] {
        if let Some(first) = first {
            warnings.push(match count {
                1 => first,
                n => format!("{first} (and {} more of this GPU's)", n - 1),
            });
        }
    }
    (!faults.is_empty()).then(|| bounded_list(&faults, ", ", MAX_DETAIL_LEN))
}

/// Writes `health` and the `health_<kind>` details of one GPU from its faults.
pub fn write(attributes: &mut BTreeMap<String, String>, faults: &Faults) {
    attributes.retain(|k, _| k != "health" && !k.starts_with("health_"));
    if faults.is_empty() {
        attributes.insert("health".into(), OK.into());
        return;
    }
    let kinds: Vec<&str> = ordered(faults).map(|(k, _)| k).collect();
    attributes.insert("health".into(), kinds.join(","));
    for (kind, detail) in faults {
        attributes.insert(detail_key(kind), detail.clone());
    }
}

/// The faults in the order of [`KINDS`] (an unknown kind last).
fn ordered(faults: &Faults) -> impl Iterator<Item = (&str, &str)> {
    let rank = |k: &str| KINDS.iter().position(|x| *x == k).unwrap_or(KINDS.len());
    let mut v: Vec<(&str, &str)> = faults
        .iter()
        .map(|(k, d)| (k.as_str(), d.as_str()))
        .collect();
    v.sort_by_key(|(k, _)| rank(k));
    v.into_iter()
}

/// `gpu.node` `health` and `healthy_count` over the GPUs' `health` attributes.
pub fn node_attributes<'a>(
    gpus: impl Iterator<Item = Option<&'a str>>,
) -> Option<[(&'static str, String); 2]> {
    let mut count = 0;
    let mut healthy = 0;
    for h in gpus {
        count += 1;
        if h == Some(OK) {
            healthy += 1;
        }
    }
    (count > 0).then(|| {
        let health = if healthy == count { OK } else { DEGRADED };
        [
            ("health", health.to_string()),
            ("healthy_count", healthy.to_string()),
        ]
    })
}

/// The `gpu.device` attributes NVML gives that `gpu.node` sums up ([`nvml_node_values`]): what
/// [`Hold`] keeps of a GPU that NVML stops answering for.
pub const NVML_VALUES: [&str; 3] = ["memory_mib", "compute_major", "compute_minor"];

/// `gpu.node`'s memory (`memory_mib_min`, `_max`, `_total`) and compute capability
/// (`compute_major`, `_minor`) over the GPUs that answered: a `lost` GPU without a memory
/// reading (NVML did not answer for it, and no earlier answer is held) is left out, so that one
/// GPU falling off the bus does not take the node's values with it. Among the GPUs counted,
/// each value is present only when every one has it (the compute capability: and they agree).
pub fn nvml_node_values<'a>(
    gpus: impl Iterator<Item = &'a BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let answered: Vec<&BTreeMap<String, String>> = gpus
        .filter(|a| !is_lost(a.get("health").map(String::as_str)) || a.contains_key("memory_mib"))
        .collect();
    let mut out = BTreeMap::new();
    super::accel::memory_summary(answered.iter().copied(), &mut out);
    for key in ["compute_major", "compute_minor"] {
        let first = answered.first().and_then(|a| a.get(key));
        if let Some(v) = first
            && answered.iter().all(|a| a.get(key) == Some(v))
        {
            out.insert(key.to_string(), v.clone());
        }
    }
    out
}

/// Whether a `health` value lists `lost`.
fn is_lost(health: Option<&str>) -> bool {
    health.is_some_and(|h| h.split(',').any(|k| k == "lost"))
}

/// A GPU's faults as its `gpu.device` instance carries them.
pub fn faults_of(gpu: &Instance) -> Faults {
    let mut out = Faults::new();
    if let Some(h) = gpu.get("health")
        && h != OK
    {
        for kind in h.split(',') {
            let detail = gpu.get(&detail_key(kind)).unwrap_or("").to_string();
            out.insert(kind.to_string(), detail);
        }
    }
    out
}

/// Which GPU has which fault, in words: `0000:3b:00.0 pcie-link (x8 of x16); ...`, after the
/// GPUs missing (`missing 1 of 8 (nvswitch: ...)`); `None` when every GPU is healthy and none
/// is missing. What `explain` prints beside `gpu.node.health`.
pub fn node_because(features: &FeatureSet) -> Option<String> {
    let mut parts = Vec::new();
    // GPUs the node should have and does not show come first: they have no address.
    if let Some((n, detail)) = super::missing::fault_of(features) {
        let of = features
            .attribute(GPU_NODE, super::missing::EXPECTED_COUNT)
            .map(|e| format!(" of {e}"))
            .unwrap_or_default();
        parts.push(format!("missing {n}{of} ({detail})"));
    }
    for g in features.instances(GPU_DEVICE) {
        let faults = faults_of(g);
        if faults.is_empty() {
            continue;
        }
        let listed: Vec<String> = ordered(&faults)
            .map(|(k, d)| {
                if d.is_empty() {
                    k.to_string()
                } else {
                    format!("{k} ({d})")
                }
            })
            .collect();
        let name = g.get("address").or_else(|| g.get("index")).unwrap_or("?");
        parts.push(format!("{name}: {}", listed.join(", ")));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Keeps each GPU's faults for `clear_after` after they were last seen: the daemon applies it
/// to every scan before the rules see the features, so that a fault that comes and goes holds
/// `gpu.health` at `degraded` instead of flapping it. A GPU is known by its PCI address (its
/// index when it has none); a GPU that is gone takes its held faults with it.
///
/// A GPU that NVML stops answering for (`lost`) keeps its last answer's [`NVML_VALUES`] the same
/// way, for `clear_after` after NVML last gave them, and `gpu.node`'s memory and compute
/// capability are summed up again with them: a GPU lost and back every second changes no label
/// but `gpu.health`. Lost for longer, the node's values come from the GPUs that answer.
#[derive(Debug, Default)]
pub struct Hold {
    /// GPU -> kind -> (detail, last seen).
    seen: BTreeMap<String, BTreeMap<String, (String, Instant)>>,
    /// GPU -> its last NVML answer's [`NVML_VALUES`] (those it had), and when.
    answered: BTreeMap<String, (Vec<(String, String)>, Instant)>,
    /// The node fault `missing` (`discover::missing`): how many, its detail, the expected
    /// count it was seen against, and when it was last seen.
    missing: Option<(usize, String, Option<String>, Instant)>,
}

impl Hold {
    pub fn new() -> Hold {
        Hold::default()
    }

    /// Records the faults of this scan and writes the held ones back into `features`
    /// (`gpu.device` health attributes and `gpu.node` `health`/`healthy_count`). Returns the
    /// number of faults held that this scan did not see.
    pub fn apply(
        &mut self,
        features: &mut FeatureSet,
        now: Instant,
        clear_after: Duration,
    ) -> usize {
        let node_held = self.hold_missing(features, now, clear_after);
        let Some(devices) = features.instances.get_mut(GPU_DEVICE) else {
            self.seen.clear();
            self.answered.clear();
            self.missing = None;
            return 0;
        };
        let mut present = BTreeSet::new();
        let mut held_total = 0;
        let mut restored = false;
        for g in devices.elements.iter_mut() {
            let Some(id) = g.get("address").or_else(|| g.get("index")) else {
                continue;
            };
            let id = id.to_string();
            let now_faults = faults_of(g);
            let values =
                self.hold_values(&id, g, now_faults.contains_key("lost"), now, clear_after);
            restored |= !values.is_empty();
            let entry = self.seen.entry(id.clone()).or_default();
            for (k, d) in &now_faults {
                entry.insert(k.clone(), (d.clone(), now));
            }
            entry.retain(|_, (_, at)| now.saturating_duration_since(*at) < clear_after);
            let mut faults = now_faults;
            for (k, (d, _)) in entry.iter() {
                if !faults.contains_key(k) {
                    held_total += 1;
                    faults.insert(k.clone(), d.clone());
                }
            }
            present.insert(id);
            if faults.is_empty() && values.is_empty() {
                continue;
            }
            let mut attrs: BTreeMap<String, String> = g
                .attributes
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            attrs.extend(values);
            write(&mut attrs, &faults);
            *g = attrs
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
        }
        self.seen
            .retain(|id, faults| present.contains(id) && !faults.is_empty());
        self.answered.retain(|id, _| present.contains(id));
        // A GPU's held values make the node's memory and compute capability again.
        let node_values = restored.then(|| {
            let gpus: Vec<BTreeMap<String, String>> = devices
                .elements
                .iter()
                .map(|g| {
                    g.attributes
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                })
                .collect();
            nvml_node_values(gpus.iter())
        });
        if held_total > 0 {
            let summary = node_attributes(devices.elements.iter().map(|g| g.get("health")));
            for (k, v) in summary.into_iter().flatten() {
                features.insert_attribute(GPU_NODE, k, v);
            }
            // The GPUs' summary says `ok` when they are: a node fault still makes it degraded.
            if super::missing::fault_of(features).is_some() {
                features.insert_attribute(GPU_NODE, "health", DEGRADED);
            }
        }
        if let Some(values) = node_values {
            if let Some(node) = features.attributes.get_mut(GPU_NODE) {
                for key in NODE_NVML_VALUES {
                    node.elements.remove(key);
                }
            }
            for (k, v) in values {
                features.insert_attribute(GPU_NODE, k, v);
            }
        }
        held_total + node_held
    }

    /// Records the node fault `missing` of this scan, or writes the held one back into
    /// `gpu.node` (with the expected count it was seen against) when this scan does not see
    /// it; returns 1 when it wrote a held one.
    fn hold_missing(
        &mut self,
        features: &mut FeatureSet,
        now: Instant,
        clear_after: Duration,
    ) -> usize {
        if let Some((n, detail)) = super::missing::fault_of(features) {
            let expected = features
                .attribute(GPU_NODE, super::missing::EXPECTED_COUNT)
                .map(str::to_string);
            self.missing = Some((n, detail, expected, now));
            return 0;
        }
        let Some((n, detail, expected, at)) = &self.missing else {
            return 0;
        };
        if now.saturating_duration_since(*at) >= clear_after
            || features
                .attribute(GPU_NODE, "count")
                .is_none_or(|c| c == "0")
        {
            self.missing = None;
            return 0;
        }
        if let Some(e) = expected {
            features.insert_attribute(GPU_NODE, super::missing::EXPECTED_COUNT, e.clone());
        }
        super::missing::write(features, *n, detail);
        1
    }

    /// When what is held next changes unseen (`clear_after` after a fault was last seen, or
    /// after a lost GPU last gave its values): the daemon runs a cycle then, so that a fault
    /// that went away clears at the end of its hold, not at the next interval. A fault still
    /// there makes it a cycle every `clear_after` that writes nothing.
    pub fn next_clear(&self, clear_after: Duration) -> Option<Instant> {
        let faults = self
            .seen
            .values()
            .flat_map(|f| f.values().map(|(_, at)| *at));
        let values = self
            .answered
            .iter()
            .filter(|(id, _)| self.seen.get(*id).is_some_and(|f| f.contains_key("lost")))
            .map(|(_, (_, at))| *at);
        let missing = self.missing.iter().map(|(_, _, _, at)| *at);
        faults
            .chain(values)
            .chain(missing)
            .min()
            .map(|at| at + clear_after)
    }

    /// Records the [`NVML_VALUES`] of GPU `id` when NVML answered for it (`source` nvml);
    /// returns the held ones to put back when it is `lost` now, lacks them, and NVML gave them
    /// less than `clear_after` ago.
    fn hold_values(
        &mut self,
        id: &str,
        gpu: &Instance,
        lost: bool,
        now: Instant,
        clear_after: Duration,
    ) -> Vec<(String, String)> {
        let given: Vec<(String, String)> = NVML_VALUES
            .iter()
            .filter_map(|k| Some((k.to_string(), gpu.get(k)?.to_string())))
            .collect();
        if !lost {
            if gpu.get("source") == Some("nvml") && !given.is_empty() {
                self.answered.insert(id.to_string(), (given, now));
            } else {
                self.answered.remove(id);
            }
            return Vec::new();
        }
        if !given.is_empty() {
            return Vec::new();
        }
        match self.answered.get(id) {
            Some((values, at)) if now.saturating_duration_since(*at) < clear_after => {
                values.clone()
            }
            _ => {
                // Lost for `clear_after`: its values go, and the node's come from the others.
                self.answered.remove(id);
                Vec::new()
            }
        }
    }
}

/// The `gpu.node` attributes [`nvml_node_values`] gives.
const NODE_NVML_VALUES: [&str; 5] = [
    "memory_mib_min",
    "memory_mib_max",
    "memory_mib_total",
    "compute_major",
    "compute_minor",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A node of two GPUs, the second with `faults` (kind, detail) now.
    fn scan(faults: &[(&str, &str)]) -> FeatureSet {
        let mut f = FeatureSet::default();
        for (i, address) in ["0000:19:00.0", "0000:3b:00.0"].iter().enumerate() {
            let mut a = BTreeMap::from([
                ("address".to_string(), address.to_string()),
                ("index".to_string(), i.to_string()),
            ]);
            let now: Faults = if i == 1 {
                faults
                    .iter()
                    .map(|(k, d)| (k.to_string(), d.to_string()))
                    .collect()
            } else {
                Faults::new()
            };
            write(&mut a, &now);
            f.push_instance(
                GPU_DEVICE,
                a.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
            );
        }
        let summary = node_attributes(f.instances(GPU_DEVICE).iter().map(|g| g.get("health")));
        for (k, v) in summary.into_iter().flatten() {
            f.insert_attribute(GPU_NODE, k, v);
        }
        f
    }

    /// `[second GPU's health, its details..., node health, healthy_count]`.
    fn seen(f: &FeatureSet) -> Vec<String> {
        let g = &f.instances(GPU_DEVICE)[1];
        let mut out = vec![g.get("health").unwrap().to_string()];
        out.extend(
            g.attributes
                .iter()
                .filter(|(k, _)| k.starts_with("health_"))
                .map(|(k, v)| format!("{k}={v}")),
        );
        out.push(f.attribute(GPU_NODE, "health").unwrap().to_string());
        out.push(f.attribute(GPU_NODE, "healthy_count").unwrap().to_string());
        out
    }

    fn strs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A list from sysfs names ends in `+N more` where the next one would not fit, even the
    /// first; names the kernel never writes are refused.
    #[test]
    fn lists_from_sysfs_names_are_bounded_and_plain() {
        let items = |n: usize, w: &str| (0..n).map(|i| format!("{w}{i}")).collect::<Vec<_>>();
        assert_eq!(
            [
                bounded_list(&items(3, "gfx"), ", ", 63),
                bounded_list(&items(20, "block_"), ", ", 30),
                bounded_list(&["x".repeat(40)], ", ", 30),
                bounded_list(&items(9, "d"), ",", 17),
                bounded_list(&[], ", ", 63),
            ],
            [
                "gfx0, gfx1, gfx2",
                "block_0, block_1, +18 more",
                "+1 more",
                "d0,d1,d2,+6 more",
                "",
            ]
        );
        let names = [
            "umc",
            "xgmi_wafl",
            "a\nb",
            "",
            &"x".repeat(25),
            "nv idia",
            "ünï",
        ];
        assert_eq!(
            names.map(is_plain_name),
            [true, true, false, false, false, false, false]
        );
    }

    #[test]
    fn a_fault_is_held_for_clear_after_and_then_cleared() {
        let mut hold = Hold::new();
        let t0 = Instant::now();
        let five = Duration::from_secs(300);
        let s = Duration::from_secs;
        let mut f = scan(&[("ecc", "3 volatile uncorrected")]);
        assert_eq!(hold.apply(&mut f, t0, five), 0);
        let degraded = strs(&["ecc", "health_ecc=3 volatile uncorrected", "degraded", "1"]);
        assert_eq!(seen(&f), degraded);
        // Gone from the scan, still held.
        let mut f = scan(&[]);
        assert_eq!(hold.apply(&mut f, t0 + s(299), five), 1);
        assert_eq!(seen(&f), degraded);
        // The daemon's next cycle is when it clears: 300 s after it was last seen.
        assert_eq!(hold.next_clear(five), Some(t0 + s(300)));
        // Absent for clearAfter: cleared.
        let mut f = scan(&[]);
        assert_eq!(hold.apply(&mut f, t0 + s(300), five), 0);
        assert_eq!(seen(&f), strs(&["ok", "ok", "2"]));
        assert_eq!(hold.next_clear(five), None);
    }

    #[test]
    fn an_intermittent_fault_never_flaps() {
        let mut hold = Hold::new();
        let t0 = Instant::now();
        let clear = Duration::from_secs(60);
        let mut states = Vec::new();
        for i in 0..20u64 {
            // Seen every third scan, 20 s apart: never absent for 60 s.
            let now: &[(&str, &str)] = if i % 3 == 0 {
                &[("thermal", "hw-slowdown")]
            } else {
                &[]
            };
            let mut f = scan(now);
            hold.apply(&mut f, t0 + Duration::from_secs(20 * i), clear);
            states.push(seen(&f)[0].clone());
        }
        assert_eq!(states, vec!["thermal".to_string(); 20]);
    }

    #[test]
    fn a_held_fault_joins_the_faults_seen_now_in_order() {
        let mut hold = Hold::new();
        let t0 = Instant::now();
        let clear = Duration::from_secs(60);
        hold.apply(&mut scan(&[("xid", "79")]), t0, clear);
        let mut f = scan(&[("pcie-link", "x8 of x16")]);
        assert_eq!(hold.apply(&mut f, t0 + Duration::from_secs(1), clear), 1);
        assert_eq!(
            seen(&f),
            strs(&[
                "pcie-link,xid",
                "health_pcie_link=x8 of x16",
                "health_xid=79",
                "degraded",
                "1"
            ])
        );
    }

    /// Two H100s as discovery gives them: the second lost to NVML now (no memory or compute
    /// capability: NVML did not answer for it), or answering.
    fn nvml_scan(second_lost: bool) -> FeatureSet {
        let mut gpus = Vec::new();
        for (i, address) in ["0000:19:00.0", "0000:3b:00.0"].iter().enumerate() {
            let mut a = BTreeMap::from([
                ("address".to_string(), address.to_string()),
                ("index".to_string(), i.to_string()),
            ]);
            let mut faults = Faults::new();
            if i == 1 && second_lost {
                a.insert("source".into(), "sysfs".into());
                faults.insert("lost".into(), "NVML: GPU is lost".into());
            } else {
                a.insert("source".into(), "nvml".into());
                a.insert("memory_mib".into(), "81559".into());
                a.insert("compute_major".into(), "9".into());
                a.insert("compute_minor".into(), "0".into());
            }
            write(&mut a, &faults);
            gpus.push(a);
        }
        let mut f = FeatureSet::default();
        let summary = node_attributes(gpus.iter().map(|g| g.get("health").map(String::as_str)));
        for (k, v) in summary.into_iter().flatten() {
            f.insert_attribute(GPU_NODE, k, v);
        }
        for (k, v) in nvml_node_values(gpus.iter()) {
            f.insert_attribute(GPU_NODE, k, v);
        }
        for a in &gpus {
            f.push_instance(
                GPU_DEVICE,
                a.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
            );
        }
        f
    }

    fn node(f: &FeatureSet) -> BTreeMap<String, String> {
        f.attributes[GPU_NODE].elements.clone()
    }

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_node_values_come_from_the_gpus_that_answered() {
        // One lost: the other's values; both lost: none.
        assert_eq!(
            node(&nvml_scan(true)),
            attrs(&[
                ("compute_major", "9"),
                ("compute_minor", "0"),
                ("health", "degraded"),
                ("healthy_count", "1"),
                ("memory_mib_max", "81559"),
                ("memory_mib_min", "81559"),
                ("memory_mib_total", "81559"),
            ])
        );
        let lost = attrs(&[("health", "lost")]);
        assert_eq!(nvml_node_values([&lost, &lost].into_iter()), attrs(&[]));
        // A GPU that is not lost and has no memory reading still leaves the memory unknown.
        let h100 = attrs(&[("health", "ok"), ("memory_mib", "81559")]);
        let unknown = attrs(&[("health", "ok")]);
        assert_eq!(nvml_node_values([&h100, &unknown].into_iter()), attrs(&[]));
    }

    #[test]
    fn a_gpu_lost_and_back_keeps_the_node_values_until_lost_for_clear_after() {
        let mut hold = Hold::new();
        let t0 = Instant::now();
        let clear = Duration::from_secs(60);
        let s = Duration::from_secs;
        let whole = |health: &str, healthy: &str| {
            attrs(&[
                ("compute_major", "9"),
                ("compute_minor", "0"),
                ("health", health),
                ("healthy_count", healthy),
                ("memory_mib_max", "81559"),
                ("memory_mib_min", "81559"),
                ("memory_mib_total", "163118"),
            ])
        };
        let mut f = nvml_scan(false);
        hold.apply(&mut f, t0, clear);
        assert_eq!(node(&f), whole("ok", "2"));
        // Values NVML gives every scan are nothing to wake for.
        assert_eq!(hold.next_clear(clear), None);
        // Lost and back every second: the node's values never change, the fault is held.
        for i in 1..20u64 {
            let mut f = nvml_scan(i % 2 == 1);
            hold.apply(&mut f, t0 + s(i), clear);
            assert_eq!(node(&f), whole("degraded", "1"), "scan {i}");
        }
        // The lost GPU carries its last answer's values meanwhile.
        let mut f = nvml_scan(true);
        hold.apply(&mut f, t0 + s(20), clear);
        let g = &f.instances(GPU_DEVICE)[1];
        let held: Vec<Option<&str>> = NVML_VALUES.iter().map(|k| g.get(k)).collect();
        assert_eq!(held, [Some("81559"), Some("9"), Some("0")]);
        // Next to change: its values, 60 s after it last answered (at 18 s).
        assert_eq!(hold.next_clear(clear), Some(t0 + s(78)));
        // Lost for `clear_after` since it last answered (at 18 s): the other GPU's values.
        let mut f = nvml_scan(true);
        hold.apply(&mut f, t0 + s(78), clear);
        assert_eq!(node(&f), node(&nvml_scan(true)));
        assert_eq!(f.instances(GPU_DEVICE)[1].get("memory_mib"), None);
    }

    /// The node fault `missing` is held like a GPU's: a node whose GPU comes and goes stays
    /// degraded, short of it, until it has been whole for `clear_after`; the daemon wakes then.
    #[test]
    fn the_missing_fault_is_held_and_cleared() {
        let mut hold = Hold::new();
        let t0 = Instant::now();
        let clear = Duration::from_secs(60);
        let s = Duration::from_secs;
        let short = |f: &mut FeatureSet| {
            f.insert_attribute(GPU_NODE, "count", "2");
            f.insert_attribute(GPU_NODE, "expected_count", "3");
            super::super::missing::write(f, 1, "nvswitch: 4 NVSwitch 22a3");
        };
        let whole = |f: &mut FeatureSet| {
            f.insert_attribute(GPU_NODE, "count", "2");
            f.insert_attribute(GPU_NODE, "expected_count", "2");
        };
        let mut f = scan(&[]);
        short(&mut f);
        assert_eq!(hold.apply(&mut f, t0, clear), 0);
        let degraded = attrs(&[
            ("count", "2"),
            ("expected_count", "3"),
            ("health", "degraded"),
            ("health_missing", "nvswitch: 4 NVSwitch 22a3"),
            ("healthy_count", "2"),
            ("missing", "1"),
        ]);
        assert_eq!(node(&f), degraded);
        assert_eq!(hold.next_clear(clear), Some(t0 + s(60)));
        // Whole again, and a GPU fault held beside it: both held, the node degraded.
        let mut f = scan(&[("xid", "79")]);
        whole(&mut f);
        assert_eq!(hold.apply(&mut f, t0 + s(10), clear), 1);
        let mut f = scan(&[]);
        whole(&mut f);
        assert_eq!(hold.apply(&mut f, t0 + s(59), clear), 2);
        let mut both = degraded.clone();
        both.insert("healthy_count".into(), "1".into());
        assert_eq!(node(&f), both);
        // Whole for 60 s: cleared (the XID seen at 10 s still held until 70 s).
        let mut f = scan(&[]);
        whole(&mut f);
        assert_eq!(hold.apply(&mut f, t0 + s(60), clear), 1);
        assert_eq!(
            node(&f),
            attrs(&[
                ("count", "2"),
                ("expected_count", "2"),
                ("health", "degraded"),
                ("healthy_count", "1"),
            ])
        );
        let mut f = scan(&[]);
        whole(&mut f);
        assert_eq!(hold.apply(&mut f, t0 + s(70), clear), 0);
        assert_eq!(
            node(&f),
            attrs(&[
                ("count", "2"),
                ("expected_count", "2"),
                ("health", "ok"),
                ("healthy_count", "2"),
            ])
        );
        assert_eq!(hold.next_clear(clear), None);
    }

    #[test]
    fn a_gpu_that_is_gone_takes_its_held_faults_with_it_and_zero_clears_at_once() {
        let mut hold = Hold::new();
        let t0 = Instant::now();
        hold.apply(&mut scan(&[("lost", "gone")]), t0, Duration::from_secs(60));
        let mut none = FeatureSet::default();
        assert_eq!(hold.apply(&mut none, t0, Duration::from_secs(60)), 0);
        assert!(hold.seen.is_empty());
        hold.apply(&mut scan(&[("lost", "gone")]), t0, Duration::ZERO);
        let mut f = scan(&[]);
        assert_eq!(hold.apply(&mut f, t0, Duration::ZERO), 0);
        assert_eq!(seen(&f), strs(&["ok", "ok", "2"]));
    }
}
