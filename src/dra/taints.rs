//! GPU faults as DRA device taints (KEP-5055): a GPU with a held fault is taken out of
//! allocation on its own, not with its node. For each slice device that covers such a GPU (the
//! join of `super::join`), one `DeviceTaintRule` that selects exactly that device (driver, pool,
//! device name), with the taint key [`TAINT_KEY`], the GPU's fault kinds as its value and the
//! strongest effect of those faults (`publish.deviceTaintEffects` over
//! `config::DEVICE_TAINT_DEFAULTS`). Pure: what to apply; the node sink applies it
//! (`publish::device_taints`), `run --sink stdout` prints it (docs/taints.md#device-taints).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::config::{DEVICE_TAINT_DEFAULTS, DeviceTaintEffect};
use crate::features::FeatureSet;

use super::{DRA_DEVICE, GPU_DEVICE};

/// The API group of `DeviceTaintRule`.
pub const GROUP: &str = "resource.k8s.io";
/// The key of every device taint gpu-labeler writes (the node taint's key, NFD's namespace).
pub const TAINT_KEY: &str = "feature.node.kubernetes.io/gpu-unhealthy";
/// Every rule's name starts with this, then the node's name and `-`.
pub const NAME_PREFIX: &str = "gpu-labeler-";
/// The label that finds a node's rules (one list request); its value is the node's name.
pub const NODE_LABEL: &str = "gpu-labeler.feature.node.kubernetes.io/node";
/// The API version `run --sink stdout` prints: served by 1.36 (beta) and 1.37 (beside v1).
pub const OFFLINE_API_VERSION: &str = "resource.k8s.io/v1beta2";
/// The longest object name Kubernetes takes (a DNS subdomain).
const MAX_NAME: usize = 253;

/// One `DeviceTaintRule` to apply.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Wanted {
    pub name: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// The fault kinds, in `HEALTH_FAULTS` order, joined with `.`: a valid label value.
    pub value: String,
    pub effect: DeviceTaintEffect,
    /// The GPU's PCI address, and its faults in words (for logs, `explain` and `match`).
    pub gpu: String,
    pub because: String,
}

impl Wanted {
    /// The part of the object gpu-labeler owns: what it applies, and compares with what the
    /// API server has (never `timeAdded`, which the server sets).
    pub fn spec(&self) -> Value {
        json!({
            "deviceSelector": {"driver": self.driver, "pool": self.pool, "device": self.device},
            "taint": {"key": TAINT_KEY, "value": self.value, "effect": self.effect.as_str()},
        })
    }

    /// The whole object, as server-side apply sends it.
    pub fn object(&self, api_version: &str, node: &str) -> Value {
        json!({
            "apiVersion": api_version,
            "kind": "DeviceTaintRule",
            "metadata": {
                "name": self.name,
                "labels": {
                    "app.kubernetes.io/managed-by": "gpu-labeler",
                    NODE_LABEL: node_label_value(node),
                },
                "annotations": {
                    "gpu-labeler.feature.node.kubernetes.io/gpu": self.gpu,
                    "gpu-labeler.feature.node.kubernetes.io/faults": self.because,
                },
            },
            "spec": self.spec(),
        })
    }
}

/// The node's name as a label value: itself where it is one (63 characters or fewer, as nearly
/// every node name is), else its first 54 characters and a hash of the whole (still unique per
/// node, and what the list's label selector asks for).
pub fn node_label_value(node: &str) -> String {
    if crate::validate::label_value(node).is_ok() {
        return node.to_string();
    }
    // FNV-1a, 32 bits: stable across releases and platforms.
    let hash = node.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let head: String = node
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(54)
        .collect();
    format!(
        "{}-{hash:08x}",
        head.trim_matches(|c: char| !c.is_ascii_alphanumeric())
    )
}

/// `gpu-labeler-<node>-<bus id>`, the bus id's `:` and `.` as `-`
/// (`gpu-labeler-node-1-0000-9d-00-0`); a GPU's further slice devices (partitions, MIG) add
/// `-<device name>`.
pub fn rule_name(node: &str, bus_id: &str, device: Option<&str>) -> String {
    let safe = |s: &str| -> String {
        s.to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect()
    };
    let mut name = format!("{NAME_PREFIX}{node}-{}", safe(bus_id));
    if let Some(d) = device {
        name.push('-');
        name.push_str(&safe(d));
    }
    name
}

impl Wanted {
    /// The rule for one device of GPU `gpu` with `faults` (kind, detail), in `HEALTH_FAULTS`
    /// order: the kinds joined as its value, the strongest of their effects.
    pub fn for_faults(
        name: String,
        (driver, pool, device): (&str, &str, &str),
        gpu: &str,
        faults: &[(String, String)],
        site: &BTreeMap<String, DeviceTaintEffect>,
    ) -> Wanted {
        let kinds: Vec<&str> = faults.iter().map(|(k, _)| k.as_str()).collect();
        Wanted {
            name,
            driver: driver.to_string(),
            pool: pool.to_string(),
            device: device.to_string(),
            value: kinds.join("."),
            effect: kinds
                .iter()
                .map(|k| effect_of(k, site))
                .max()
                .unwrap_or(DeviceTaintEffect::NoSchedule),
            gpu: gpu.to_string(),
            because: because(faults),
        }
    }
}

/// The effect of one fault kind: the site's, else the default (`NoSchedule` for a kind this
/// release does not know).
pub fn effect_of(kind: &str, site: &BTreeMap<String, DeviceTaintEffect>) -> DeviceTaintEffect {
    site.get(kind).copied().unwrap_or_else(|| {
        DEVICE_TAINT_DEFAULTS
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(DeviceTaintEffect::NoSchedule, |(_, e)| *e)
    })
}

/// The rules for `node`: one per slice device (`dra.device`) of a GPU whose `gpu.device`
/// `health` lists a fault, sorted by name; and what could not be tainted, in words (a device
/// in a pool not named for the node, which the admission policy would refuse; a name too long).
pub fn wanted(
    features: &FeatureSet,
    node: &str,
    site: &BTreeMap<String, DeviceTaintEffect>,
) -> (Vec<Wanted>, Vec<String>) {
    let gpus = features.instances(GPU_DEVICE);
    let mut by_gpu: BTreeMap<&str, Vec<&crate::features::Instance>> = BTreeMap::new();
    for d in features.instances(DRA_DEVICE) {
        if let Some(gpu) = d.get("gpu").filter(|g| !g.is_empty()) {
            by_gpu.entry(gpu).or_default().push(d);
        }
    }
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for g in gpus {
        let Some(address) = g.get("address") else {
            continue;
        };
        let faults = faults_of(g);
        if faults.is_empty() {
            continue;
        }
        let Some(devices) = by_gpu.get(address) else {
            continue;
        };
        // The whole GPU's device keeps the short name; each further device adds its own.
        let mut devices = devices.clone();
        devices.sort_by_key(|d| (d.get("device").map(str::len), d.get("device")));
        for (i, d) in devices.iter().enumerate() {
            let (Some(driver), Some(pool), Some(device)) =
                (d.get("driver"), d.get("pool"), d.get("device"))
            else {
                continue;
            };
            if pool != node {
                problems.push(format!(
                    "GPU {address} ({driver} {pool}/{device}): its pool is not named for this \
                     node, so no device taint can select it (the admission policy allows only \
                     pool {node:?}); the node-level taint and condition still say it"
                ));
                continue;
            }
            let name = rule_name(node, address, (i > 0).then_some(device));
            if name.len() > MAX_NAME {
                problems.push(format!(
                    "GPU {address} ({driver} {pool}/{device}): the rule's name would be {} \
                     characters, past Kubernetes' {MAX_NAME}; no device taint",
                    name.len()
                ));
                continue;
            }
            out.push(Wanted::for_faults(
                name,
                (driver, pool, device),
                address,
                &faults,
                site,
            ));
        }
    }
    out.sort();
    (out, problems)
}

/// A GPU's faults in words, as the rule's annotation and the logs say them:
/// `pcie-link (x8 of x16), xid (79)` (at most 1 KiB).
pub fn because(faults: &[(String, String)]) -> String {
    let s = faults
        .iter()
        .map(|(k, d)| {
            if d.is_empty() {
                k.clone()
            } else {
                format!("{k} ({d})")
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    crate::validate::elide(&s, 1024)
}

/// Each GPU's faults (by PCI address; the GPUs without a fault too, with none): what keeps a
/// rule whose device left the slices (`publish::device_taints`).
pub fn faulty(features: &FeatureSet) -> BTreeMap<String, Vec<(String, String)>> {
    features
        .instances(GPU_DEVICE)
        .iter()
        .filter_map(|g| Some((g.get("address")?.to_string(), faults_of(g))))
        .collect()
}

/// A GPU's faults as `gpu.device` lists them (`health`: the kinds in `HEALTH_FAULTS` order,
/// `health_<kind>`: the detail; `discover::health` writes them a floor up), with their details.
fn faults_of(gpu: &crate::features::Instance) -> Vec<(String, String)> {
    match gpu.get("health") {
        None | Some("ok") | Some("") => Vec::new(),
        Some(h) => h
            .split(',')
            .map(|k| {
                let detail = gpu.get(&format!("health_{}", k.replace('-', "_")));
                (k.to_string(), detail.unwrap_or_default().to_string())
            })
            .collect(),
    }
}

/// For `explain` and `match`: each faulty GPU a slice device covers, and the rule that takes
/// it out of DRA allocation with `publish.deviceTaints` (effects as by default; a site's
/// `publish.deviceTaintEffects` may differ): `dra: GPU 0000:3b:00.0 (gpu.nvidia.com n1/gpu-1) is
/// tainted out by DeviceTaintRule gpu-labeler-n1-0000-3b-00-0: None pcie-link`. Pools are
/// taken as named for their node.
pub fn explain_lines(features: &FeatureSet) -> Vec<String> {
    let pools: std::collections::BTreeSet<&str> = features
        .instances(DRA_DEVICE)
        .iter()
        .filter_map(|d| d.get("pool"))
        .collect();
    let mut lines = Vec::new();
    for pool in pools {
        for w in wanted(features, pool, &BTreeMap::new()).0 {
            lines.push(format!(
                "dra: GPU {} ({} {}/{}) is tainted out by DeviceTaintRule {}: {} {}",
                w.gpu,
                w.driver,
                w.pool,
                w.device,
                w.name,
                w.effect.as_str(),
                w.value
            ));
        }
    }
    lines
}

/// The rules as `run --sink stdout` prints them: one JSON object per line.
pub fn offline_lines(wanted: &[Wanted], node: &str) -> String {
    wanted
        .iter()
        .map(|w| {
            let mut s = w.object(OFFLINE_API_VERSION, node).to_string();
            s.push('\n');
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Instance;

    /// Two GPUs, each covered by the NVIDIA driver's device in `pool`; the second has `health`.
    fn node(pool: &str, health: &[(&str, &str)]) -> FeatureSet {
        let mut f = FeatureSet::default();
        for (i, address) in ["0000:19:00.0", "0000:9d:00.0"].iter().enumerate() {
            let mut g = vec![("address".to_string(), address.to_string())];
            if i == 1 && !health.is_empty() {
                let kinds: Vec<&str> = health.iter().map(|(k, _)| *k).collect();
                g.push(("health".into(), kinds.join(",")));
                for (k, d) in health {
                    g.push((format!("health_{}", k.replace('-', "_")), d.to_string()));
                }
            } else {
                g.push(("health".into(), "ok".into()));
            }
            f.push_instance(GPU_DEVICE, Instance::from_iter(g));
            f.push_instance(
                DRA_DEVICE,
                Instance::from_iter([
                    ("driver", "gpu.nvidia.com".to_string()),
                    ("pool", pool.to_string()),
                    ("device", format!("gpu-{i}")),
                    ("pciBusID", address.to_string()),
                    ("gpu", address.to_string()),
                ]),
            );
        }
        f
    }

    #[test]
    fn a_faulty_gpu_gets_one_rule_for_its_device_with_the_strongest_effect() {
        let f = node("node-1", &[("pcie-link", "x8 of x16"), ("xid", "79")]);
        let (w, problems) = wanted(&f, "node-1", &BTreeMap::new());
        assert_eq!(problems, Vec::<String>::new());
        assert_eq!(
            w,
            vec![Wanted {
                name: "gpu-labeler-node-1-0000-9d-00-0".into(),
                driver: "gpu.nvidia.com".into(),
                pool: "node-1".into(),
                device: "gpu-1".into(),
                value: "pcie-link.xid".into(),
                effect: DeviceTaintEffect::NoSchedule,
                gpu: "0000:9d:00.0".into(),
                because: "pcie-link (x8 of x16), xid (79)".into(),
            }]
        );
        assert_eq!(
            w[0].object(OFFLINE_API_VERSION, "node-1"),
            json!({
                "apiVersion": "resource.k8s.io/v1beta2",
                "kind": "DeviceTaintRule",
                "metadata": {
                    "name": "gpu-labeler-node-1-0000-9d-00-0",
                    "labels": {
                        "app.kubernetes.io/managed-by": "gpu-labeler",
                        "gpu-labeler.feature.node.kubernetes.io/node": "node-1",
                    },
                    "annotations": {
                        "gpu-labeler.feature.node.kubernetes.io/gpu": "0000:9d:00.0",
                        "gpu-labeler.feature.node.kubernetes.io/faults":
                            "pcie-link (x8 of x16), xid (79)",
                    },
                },
                "spec": {
                    "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-1"},
                    "taint": {
                        "key": "feature.node.kubernetes.io/gpu-unhealthy",
                        "value": "pcie-link.xid",
                        "effect": "NoSchedule",
                    },
                },
            })
        );
    }

    #[test]
    fn informational_faults_are_effect_none_and_a_site_may_choose_another() {
        let f = node("n", &[("thermal", "hw-slowdown")]);
        let effect = |site: &[(&str, DeviceTaintEffect)]| {
            let site = site.iter().map(|(k, e)| (k.to_string(), *e)).collect();
            wanted(&f, "n", &site).0[0].effect
        };
        assert_eq!(effect(&[]), DeviceTaintEffect::None);
        assert_eq!(
            effect(&[("thermal", DeviceTaintEffect::NoExecute)]),
            DeviceTaintEffect::NoExecute
        );
    }

    #[test]
    fn healthy_gpus_and_gpus_no_device_covers_get_no_rule() {
        assert_eq!(wanted(&node("n", &[]), "n", &BTreeMap::new()).0, vec![]);
        let mut f = node("n", &[("ecc", "2 volatile uncorrected")]);
        f.instances.remove(DRA_DEVICE);
        assert_eq!(wanted(&f, "n", &BTreeMap::new()), (vec![], vec![]));
    }

    #[test]
    fn a_pool_not_named_for_the_node_is_said_not_tainted() {
        let f = node("cluster-pool", &[("lost", "GPU is lost")]);
        let (w, problems) = wanted(&f, "n", &BTreeMap::new());
        assert_eq!(w, vec![]);
        assert_eq!(
            problems,
            vec![
                "GPU 0000:9d:00.0 (gpu.nvidia.com cluster-pool/gpu-1): its pool is not named for \
                 this node, so no device taint can select it (the admission policy allows only \
                 pool \"n\"); the node-level taint and condition still say it"
                    .to_string()
            ]
        );
    }

    #[test]
    fn a_gpus_further_devices_add_their_names() {
        let mut f = node("n", &[("ecc", "1")]);
        f.push_instance(
            DRA_DEVICE,
            Instance::from_iter([
                ("driver", "gpu.nvidia.com".to_string()),
                ("pool", "n".to_string()),
                ("device", "gpu-1-mig-9-1-2".to_string()),
                ("pciBusID", "0000:9d:00.0".to_string()),
                ("gpu", "0000:9d:00.0".to_string()),
            ]),
        );
        let names: Vec<String> = wanted(&f, "n", &BTreeMap::new())
            .0
            .into_iter()
            .map(|w| w.name)
            .collect();
        assert_eq!(
            names,
            [
                "gpu-labeler-n-0000-9d-00-0",
                "gpu-labeler-n-0000-9d-00-0-gpu-1-mig-9-1-2"
            ]
        );
    }

    #[test]
    fn the_defaults_cover_every_fault_kind_and_a_long_node_name_still_labels() {
        let kinds: Vec<&str> = DEVICE_TAINT_DEFAULTS.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, crate::features::HEALTH_FAULTS);
        // Every kind at once is still a label value.
        assert!(crate::validate::label_value(&kinds.join(".")).is_ok());
        let long = format!("{}.example.com", "n".repeat(80));
        let v = node_label_value(&long);
        assert!(crate::validate::label_value(&v).is_ok(), "{v}");
        assert_eq!(v, format!("{}-{}", "n".repeat(54), &v[55..]));
        assert_eq!(node_label_value("node-1"), "node-1");
    }
}
