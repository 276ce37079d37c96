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

/// The value of `health` on a GPU (or the node) without a fault.
pub const OK: &str = "ok";
/// `gpu.node` `health` when a GPU has a fault.
pub const DEGRADED: &str = "degraded";

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
pub struct NodeView<'a> {
    /// Per vendor, the drivers its GPU functions (not VFs) are bound to, holding drivers aside.
    bound: BTreeMap<Vendor, BTreeSet<&'a str>>,
    /// The PCI addresses NVML listed, when it answered this scan (`None`: it did not, and a
    /// GPU missing from its list says nothing).
    nvml_listed: Option<BTreeSet<PciAddress>>,
    /// The GPUs NVML answered GPU_IS_LOST for (by the address an earlier scan read).
    nvml_lost: BTreeSet<PciAddress>,
}

impl<'a> NodeView<'a> {
    pub fn new(gpus: &[(&'a PciDevice, Vendor)], nvml: &NvmlScan) -> NodeView<'a> {
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
        NodeView {
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
    node: &NodeView,
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

/// Which GPU has which fault, in words: `0000:3b:00.0 pcie-link (x8 of x16); ...`; `None` when
/// every GPU is healthy. What `explain` prints beside `gpu.node.health`.
pub fn node_because(features: &FeatureSet) -> Option<String> {
    let mut parts = Vec::new();
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
#[derive(Debug, Default)]
pub struct Hold {
    /// GPU -> kind -> (detail, last seen).
    seen: BTreeMap<String, BTreeMap<String, (String, Instant)>>,
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
        let Some(devices) = features.instances.get_mut(GPU_DEVICE) else {
            self.seen.clear();
            return 0;
        };
        let mut present = BTreeSet::new();
        let mut held_total = 0;
        for g in devices.elements.iter_mut() {
            let Some(id) = g.get("address").or_else(|| g.get("index")) else {
                continue;
            };
            let id = id.to_string();
            let now_faults = faults_of(g);
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
            if faults.is_empty() {
                continue;
            }
            let mut attrs: BTreeMap<String, String> = g
                .attributes
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            write(&mut attrs, &faults);
            *g = attrs
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
        }
        self.seen
            .retain(|id, faults| present.contains(id) && !faults.is_empty());
        if held_total > 0 {
            let summary = node_attributes(devices.elements.iter().map(|g| g.get("health")));
            for (k, v) in summary.into_iter().flatten() {
                features.insert_attribute(GPU_NODE, k, v);
            }
        }
        held_total
    }
}

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
        // Absent for clearAfter: cleared.
        let mut f = scan(&[]);
        assert_eq!(hold.apply(&mut f, t0 + s(300), five), 0);
        assert_eq!(seen(&f), strs(&["ok", "ok", "2"]));
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
