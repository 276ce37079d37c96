//! The `nvidia-gfd` compatibility profile: NVIDIA GPU Feature Discovery's `nvidia.com/*` labels,
//! computed from the feature set alone (so `labels --features SNAPSHOT` reproduces them).
//!
//! A port of GFD's labelers (NVIDIA/k8s-device-plugin `internal/lm`): machine type, driver and
//! CUDA versions, `mig.capable`, `mps.capable`, `gpu.mode`, the full-GPU resource labels and the
//! `single`/`mixed` MIG strategy labels, and `vgpu.*`. GFD's inputs map onto features as:
//!
//! | GFD | features |
//! |---|---|
//! | NVML devices (`GetDevices`) | `gpu.device` instances with `vendor=nvidia`, `source=nvml` |
//! | device name, total memory, compute capability | `product`, `memory_mib`, `compute_major`/`compute_minor` |
//! | `IsMigCapable`, `IsMigEnabled` | `mig_capable`, `mig_enabled` |
//! | PCI class | `class` (`0300` graphics, `0302` compute) |
//! | MIG devices, `GetName` (`+` becomes `.`), `GetAttributes` | `gpu.mig` instances by `parent_index` |
//! | driver, CUDA driver version | `gpu.driver` `nvidia`, `cuda` |
//! | `/sys/class/dmi/id/product_name` | `system.dmiid` `product_name` |
//! | sharing config (`sharing.timeSlicing`/`sharing.mps`) | `gpu.sharing` |
//! | vGPU PCI capability | `gpu.device` `vgpu_capability`, `vgpu_host_driver_*` |
//! | `GetGpuFabricInfo` (cluster UUID, clique id) | `gpu.node` `clique` |
//!
//! Deliberate deviations (docs/nvidia-gfd.md): no `gfd.timestamp`; where GFD lets Go's map order
//! pick which GPU model's labels win on a heterogeneous node, the most numerous model wins (ties:
//! the one with the lowest-index GPU), every run; where GFD would stop labelling (an error from
//! one labeler fails them all) the other labels are still given; every value is a valid label
//! value (GFD's own sanitising can end in `-` or exceed 63 characters).

use std::collections::BTreeMap;

use crate::config::{Config, GfdOnDra, MigStrategy};
use crate::discover::gpu::{GPU_DEVICE, GPU_DRIVER, GPU_MIG};
use crate::discover::sharing::{GPU_SHARING, Sharing, Strategy};
use crate::features::{FeatureSet, Instance};

use crate::output::LabelMap;
use crate::validate::{label_value, sanitize_value};

/// The profile's name in `profiles:`.
pub const PROFILE: &str = "nvidia-gfd";

const NS: &str = "nvidia.com/";
const FULL_GPU: &str = "gpu";

/// One NVIDIA GPU as GFD's resource manager sees it.
#[derive(Debug, Clone)]
struct Gpu {
    index: usize,
    name: String,
    memory_mib: u64,
    compute: Option<(u64, u64)>,
    mig_capable: bool,
    mig_enabled: bool,
    class: Option<String>,
    migs: Vec<Mig>,
}

/// One MIG device: GFD's name for its profile and its `GetAttributes` map.
#[derive(Debug, Clone)]
struct Mig {
    name: String,
    parent: usize,
    attributes: Vec<(&'static str, String)>,
}

/// `gpu.mig` attribute -> GFD's attribute key, in GFD's `GetAttributes` order.
const MIG_ATTRIBUTES: &[(&str, &str)] = &[
    ("memory_mib", "memory"),
    ("multiprocessors", "multiprocessors"),
    ("slices_gi", "slices.gi"),
    ("slices_ci", "slices.ci"),
    ("engines_copy", "engines.copy"),
    ("engines_decoder", "engines.decoder"),
    ("engines_encoder", "engines.encoder"),
    ("engines_jpeg", "engines.jpeg"),
    ("engines_ofa", "engines.ofa"),
];

/// GFD's `sanitise`: drop characters outside `[A-Za-z0-9-_. ]`, then join the words with `-`.
pub fn sanitise(input: &str) -> String {
    let kept: String = input
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ' '))
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join("-")
}

/// A value GFD would compute, made valid when GFD's would not be (deviation: always valid).
fn valid(value: String) -> String {
    if label_value(&value).is_ok() {
        value
    } else {
        sanitize_value(&value)
    }
}

fn attr(i: &Instance, key: &str) -> Option<String> {
    i.get(key).map(str::to_string)
}

fn number(i: &Instance, key: &str) -> Option<u64> {
    i.get(key)?.parse().ok()
}

/// The NVIDIA GPUs NVML reported, in index order, with their MIG devices. GPUs NVML did not
/// read (left to sysfs) or without a name are not GFD devices.
fn nvml_gpus(features: &FeatureSet) -> Vec<Gpu> {
    let mut gpus: Vec<Gpu> = features
        .instances
        .get(GPU_DEVICE)
        .map(|f| f.elements.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|i| i.get("vendor") == Some("nvidia") && i.get("source") == Some("nvml"))
        .filter_map(|i| {
            Some(Gpu {
                index: number(i, "index")? as usize,
                name: attr(i, "product")?,
                memory_mib: number(i, "memory_mib").unwrap_or(0),
                compute: number(i, "compute_major")
                    .filter(|&m| m != 0)
                    .map(|m| (m, number(i, "compute_minor").unwrap_or(0))),
                mig_capable: i.get("mig_capable") == Some("true"),
                mig_enabled: i.get("mig_enabled") == Some("true"),
                class: attr(i, "class"),
                migs: Vec::new(),
            })
        })
        .collect();
    gpus.sort_by_key(|g| g.index);
    let migs = features
        .instances
        .get(GPU_MIG)
        .map(|f| f.elements.as_slice())
        .unwrap_or_default();
    for m in migs {
        let (Some(parent), Some(profile)) = (number(m, "parent_index"), m.get("profile")) else {
            continue;
        };
        let Some(gpu) = gpus.iter_mut().find(|g| g.index as u64 == parent) else {
            continue;
        };
        // GFD's MIG device GetName: the profile with `+` as `.` (a resource name).
        let attributes = MIG_ATTRIBUTES
            .iter()
            .map(|(ours, theirs)| (*theirs, m.get(ours).unwrap_or("0").to_string()))
            .collect();
        gpu.migs.push(Mig {
            name: profile.replace('+', "."),
            parent: gpu.index,
            attributes,
        });
    }
    gpus
}

/// GFD's labels for this node (empty when the node has no NVIDIA GPU).
/// Why the profile gives no label on a node that has NVIDIA GPUs, if it gives none.
pub fn silent_because(features: &FeatureSet) -> Option<String> {
    let nvidia = features
        .instances(GPU_DEVICE)
        .iter()
        .filter(|i| i.get("vendor") == Some("nvidia"))
        .count();
    if nvidia == 0 || !nvml_gpus(features).is_empty() {
        return None;
    }
    let nvml = features
        .attribute(crate::discover::gpu::GPU_NODE, "nvml")
        .unwrap_or("unavailable");
    Some(format!(
        "profile {PROFILE:?}: none of the {nvidia} NVIDIA GPU(s) was read through NVML \
         (gpu.node.nvml={nvml}), so no nvidia.com/ label is given"
    ))
}

/// Whether NVIDIA's DRA driver publishes this node's GPUs (a `dra.device` of `gpu.nvidia.com`
/// on a GPU): then the device plugin's view is not this node's.
pub fn published_by_dra(features: &FeatureSet) -> bool {
    features.instances(crate::dra::DRA_DEVICE).iter().any(|d| {
        d.get("driver") == Some(NVIDIA_DRA_DRIVER) && d.get("gpu").is_some_and(|g| !g.is_empty())
    })
}

const NVIDIA_DRA_DRIVER: &str = "gpu.nvidia.com";

pub fn labels(features: &FeatureSet, config: &Config) -> LabelMap {
    let mut out = LabelMap::new();
    let gpus = nvml_gpus(features);
    // On a DRA node (gfdOnDra: hardware) the labels of the hardware only: no sharing, no MIG
    // strategy, and no replicas or sharing strategy of a `nvidia.com/gpu` resource it lacks.
    let dra = config.gfd_on_dra == GfdOnDra::Hardware && published_by_dra(features);
    let sharing = features
        .attributes
        .get(GPU_SHARING)
        .filter(|_| !dra)
        .map(|a| Sharing::from_attributes(&a.elements))
        .unwrap_or_default();
    let mig_strategy = if dra {
        MigStrategy::None
    } else {
        config.mig_strategy
    };
    if !gpus.is_empty() {
        machine_type(features, &mut out);
        versions(features, &mut out);
        out.insert(
            format!("{NS}mig.capable"),
            gpus.iter().any(|g| g.mig_capable).to_string(),
        );
        // GFD refuses to label at all for MPS on a MIG-enabled GPU; here it is just not capable.
        let mps = sharing.strategy == Strategy::Mps && !gpus.iter().any(|g| g.mig_enabled);
        out.insert(format!("{NS}mps.capable"), mps.to_string());
        out.insert(format!("{NS}gpu.mode"), gpu_mode(&gpus).to_string());
        // GFD's imex labeler: the one cluster UUID and clique id of the fabric-attached GPUs.
        if let Some(c) = features.attribute(crate::discover::gpu::GPU_NODE, "clique") {
            out.insert(format!("{NS}gpu.clique"), c.to_string());
        }
        full_gpu_labels(&gpus, &sharing, &mut out);
        if dra {
            out.remove(&format!("{NS}gpu.replicas"));
            out.remove(&format!("{NS}gpu.sharing-strategy"));
        }
        match mig_strategy {
            MigStrategy::None => {}
            MigStrategy::Single => {
                out.insert(format!("{NS}mig.strategy"), "single".into());
                mig_single(&gpus, &sharing, &mut out);
            }
            MigStrategy::Mixed => {
                out.insert(format!("{NS}mig.strategy"), "mixed".into());
                mig_mixed(&gpus, &sharing, &mut out);
            }
        }
    }
    vgpu(features, &mut out);
    out.into_iter().map(|(k, v)| (k, valid(v))).collect()
}

fn machine_type(features: &FeatureSet, out: &mut LabelMap) {
    let machine = features
        .attributes
        .get("system.dmiid")
        .and_then(|a| a.elements.get("product_name"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    out.insert(format!("{NS}gpu.machine"), sanitise(&machine));
}

/// Driver and CUDA versions; GFD fails on a driver version not `X.Y[.Z]`, here those labels
/// are left out.
fn versions(features: &FeatureSet, out: &mut LabelMap) {
    let driver = features.attributes.get(GPU_DRIVER).map(|a| &a.elements);
    if let Some(version) = driver.and_then(|d| d.get("nvidia")) {
        let parts: Vec<&str> = version.split('.').collect();
        if (2..=3).contains(&parts.len()) {
            let rev = parts.get(2).copied().unwrap_or("");
            for (k, v) in [
                ("cuda.driver.major", parts[0]),
                ("cuda.driver.minor", parts[1]),
                ("cuda.driver.rev", rev),
                ("cuda.driver-version.major", parts[0]),
                ("cuda.driver-version.minor", parts[1]),
                ("cuda.driver-version.revision", rev),
                ("cuda.driver-version.full", version),
            ] {
                out.insert(format!("{NS}{k}"), v.to_string());
            }
        }
    }
    if let Some(cuda) = driver.and_then(|d| d.get("cuda")) {
        let mut it = cuda.split('.');
        if let (Some(major), Some(minor)) = (it.next(), it.next()) {
            for (k, v) in [
                ("cuda.runtime.major", major),
                ("cuda.runtime.minor", minor),
                ("cuda.runtime-version.major", major),
                ("cuda.runtime-version.minor", minor),
            ] {
                out.insert(format!("{NS}{k}"), v.to_string());
            }
            out.insert(
                format!("{NS}cuda.runtime-version.full"),
                format!("{major}.{minor}"),
            );
        }
    }
}

/// `graphics` when every GPU is a VGA controller, `compute` when every one is a 3D controller.
fn gpu_mode(gpus: &[Gpu]) -> &'static str {
    let first = gpus[0].class.as_deref();
    if gpus.iter().any(|g| g.class.as_deref() != first) {
        return "unknown";
    }
    match first {
        Some("0300") => "graphics",
        Some("0302") => "compute",
        _ => "unknown",
    }
}

/// GFD's `resourceLabeler`: one resource (`gpu`, `mig-1g.5gb`) and the sharing config, or
/// `None` for "sharing disabled" (MIG-enabled GPUs' whole-GPU labels).
struct Resource<'a> {
    name: String,
    sharing: Option<&'a Sharing>,
}

impl Resource<'_> {
    fn key(&self, suffix: &str) -> String {
        format!("{NS}{}.{suffix}", self.name)
    }

    fn replicas(&self) -> u32 {
        match self.sharing {
            None => 0,
            Some(s) => s.replicas_of(&self.name),
        }
    }

    fn product(&self, parts: &[&str]) -> String {
        let mut parts: Vec<String> = parts
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| sanitise(p))
            .collect();
        if parts.is_empty() {
            return String::new();
        }
        let shared = self.replicas() > 1;
        let renamed = self.sharing.is_some_and(|s| s.rename_by_default);
        if shared && !renamed {
            parts.push("SHARED".to_string());
        }
        parts.join("-")
    }

    /// `product`, `count`, `replicas`, `sharing-strategy`.
    fn base(&self, count: usize, parts: &[&str], out: &mut LabelMap) {
        let replicas = self.replicas();
        let strategy = match self.sharing {
            Some(s) if replicas > 1 => s.strategy,
            _ => Strategy::None,
        };
        out.insert(self.key("product"), self.product(parts));
        out.insert(self.key("count"), count.to_string());
        out.insert(self.key("replicas"), replicas.to_string());
        out.insert(self.key("sharing-strategy"), strategy.as_str().to_string());
    }
}

/// GFD's `NewGPUResourceLabeler`: base labels, memory when known, architecture when known.
fn gpu_resource(gpu: &Gpu, count: usize, res: &Resource, out: &mut LabelMap) {
    res.base(count, &[&gpu.name], out);
    if gpu.memory_mib != 0 {
        out.insert(res.key("memory"), gpu.memory_mib.to_string());
    }
    if let Some((major, minor)) = gpu.compute {
        out.insert(
            res.key("family"),
            crate::discover::gpu::nvidia_family(major as i32, minor as i32).to_string(),
        );
        out.insert(res.key("compute.major"), major.to_string());
        out.insert(res.key("compute.minor"), minor.to_string());
    }
}

/// GFD's `newGPULabelers`: per GPU name, MIG-enabled GPUs first (without sharing), then full
/// GPUs, later ones overwriting. GFD walks Go maps here, so on a node with several models the
/// winner changes between runs; here the order is fixed: within each group, the name with the
/// fewest GPUs first, so the most numerous (ties: the one with the lowest-index GPU) wins.
fn full_gpu_labels(gpus: &[Gpu], sharing: &Sharing, out: &mut LabelMap) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut first: BTreeMap<&str, usize> = BTreeMap::new();
    for g in gpus {
        *counts.entry(&g.name).or_default() += 1;
        first.entry(&g.name).or_insert(g.index);
    }
    for mig_enabled in [true, false] {
        // The representative of a name is its last GPU, as GFD's map assignment leaves it.
        let mut reps: BTreeMap<&str, &Gpu> = BTreeMap::new();
        for g in gpus.iter().filter(|g| g.mig_enabled == mig_enabled) {
            reps.insert(&g.name, g);
        }
        let mut order: Vec<(&str, &Gpu)> = reps.into_iter().collect();
        order.sort_by_key(|(name, _)| (counts[name], std::cmp::Reverse(first[name])));
        for (name, gpu) in order {
            let res = Resource {
                name: FULL_GPU.into(),
                sharing: (!mig_enabled).then_some(sharing),
            };
            gpu_resource(gpu, counts[name], &res, out);
        }
    }
}

/// GFD's `NewMIGResourceLabeler` for one MIG profile.
fn mig_resource(gpus: &[Gpu], mig: &Mig, count: usize, res: &Resource, out: &mut LabelMap) {
    let model = gpus
        .iter()
        .find(|g| g.index == mig.parent)
        .map_or("", |g| g.name.as_str());
    res.base(count, &[model, "MIG", &mig.name], out);
    for (k, v) in &mig.attributes {
        out.insert(res.key(k), v.clone());
    }
}

/// MIG devices by GFD name, each with its first device and count, in first-seen order.
fn mig_resources(gpus: &[Gpu]) -> Vec<(&Mig, usize)> {
    let mut out: Vec<(&Mig, usize)> = Vec::new();
    for m in gpus.iter().filter(|g| g.mig_enabled).flat_map(|g| &g.migs) {
        match out.iter_mut().find(|(first, _)| first.name == m.name) {
            Some((_, n)) => *n += 1,
            None => out.push((m, 1)),
        }
    }
    out
}

/// GFD's single strategy: all MIG devices are `nvidia.com/gpu`, valid only when every GPU has
/// MIG enabled with at least one device, all of one profile.
fn mig_single(gpus: &[Gpu], sharing: &Sharing, out: &mut LabelMap) {
    let enabled: Vec<&Gpu> = gpus.iter().filter(|g| g.mig_enabled).collect();
    let Some(first) = enabled.first() else {
        return;
    };
    let resources = mig_resources(gpus);
    let invalid = enabled.iter().any(|g| g.migs.is_empty())
        || enabled.len() != gpus.len()
        || resources.len() != 1;
    if invalid {
        let res = Resource {
            name: FULL_GPU.into(),
            sharing: None,
        };
        out.insert(
            res.key("product"),
            res.product(&[&first.name, "MIG", "INVALID"]),
        );
        out.insert(res.key("count"), "0".into());
        out.insert(res.key("replicas"), "0".into());
        out.insert(res.key("sharing-strategy"), String::new());
        out.insert(res.key("memory"), "0".into());
        return;
    }
    let (mig, count) = resources[0];
    let res = Resource {
        name: FULL_GPU.into(),
        sharing: Some(sharing),
    };
    mig_resource(gpus, mig, count, &res, out);
}

/// GFD's mixed strategy: one `nvidia.com/mig-<profile>` resource per profile.
fn mig_mixed(gpus: &[Gpu], sharing: &Sharing, out: &mut LabelMap) {
    for (mig, count) in mig_resources(gpus) {
        let res = Resource {
            name: format!("mig-{}", mig.name),
            sharing: Some(sharing),
        };
        mig_resource(gpus, mig, count, &res, out);
    }
}

/// GFD's vGPU labeler. GFD reads the configuration space of every NVIDIA PCI function and
/// gives no vGPU label at all when one is not fully readable (unprivileged); likewise here,
/// when any NVIDIA GPU's capability is `unknown` or was not read.
fn vgpu(features: &FeatureSet, out: &mut LabelMap) {
    let nvidia: Vec<&Instance> = features
        .instances
        .get(GPU_DEVICE)
        .map(|f| f.elements.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|i| i.get("vendor") == Some("nvidia"))
        .collect();
    if nvidia.is_empty()
        || nvidia
            .iter()
            .any(|i| !matches!(i.get("vgpu_capability"), Some("present" | "absent")))
    {
        return;
    }
    let guests: Vec<&&Instance> = nvidia
        .iter()
        .filter(|i| i.get("vgpu_capability") == Some("present"))
        .collect();
    out.insert(
        format!("{NS}vgpu.present"),
        (!guests.is_empty()).to_string(),
    );
    // GFD keeps the last device's values.
    for g in guests {
        for (ours, theirs) in [
            ("vgpu_host_driver_version", "vgpu.host-driver-version"),
            ("vgpu_host_driver_branch", "vgpu.host-driver-branch"),
        ] {
            if let Some(v) = g.get(ours) {
                out.insert(format!("{NS}{theirs}"), v.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Ported from GFD's TestSanitise (internal/lm/resource_test.go).
    #[test]
    fn sanitise_as_gfd() {
        for (input, expected) in [
            ("a space separated string", "a-space-separated-string"),
            ("some(thing)else", "somethingelse"),
            ("some ( thing )else", "some-thing-else"),
            ("NVIDIA-TITAN-X-(Pascal)", "NVIDIA-TITAN-X-Pascal"),
            (
                " input  with multiple   spaces   ",
                "input-with-multiple-spaces",
            ),
            ("some [ / thing / ]else", "some-thing-else"),
            ("some / thing /else", "some-thing-else"),
            ("some-thing.else_new", "some-thing.else_new"),
        ] {
            assert_eq!(sanitise(input), expected, "{input}");
        }
    }

    #[test]
    fn values_gfd_would_make_invalid_are_made_valid() {
        assert_eq!(valid(sanitise("AS -4124GS-TNR")), "AS--4124GS-TNR");
        assert_eq!(
            valid(sanitise("Standard PC (Q35 + ICH9, 2009)")),
            "Standard-PC-Q35-ICH9-2009"
        );
        assert_eq!(valid(sanitise("Board -")), "Board");
        assert_eq!(valid(String::new()), "");
        let long = "x".repeat(80);
        assert_eq!(valid(long).len(), 63);
    }
}
