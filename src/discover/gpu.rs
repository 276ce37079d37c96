//! `gpu.device`, `gpu.mig`, `gpu.migprofile`, `gpu.node` and `gpu.driver`: GPUs from PCI,
//! enriched by NVML (NVIDIA), KFD/amdgpu (AMD), DRM (Intel) sysfs and PCI configuration space
//! (NVIDIA vGPU guests).
//!
//! Virtualisation: a GPU is `is_vf` when it is an SR-IOV virtual function, seen from the host
//! (`physfn` exists; `physfn` then names the PF) or from a guest, where the VF looks like a plain
//! function and only its device id tells (the AMD MxGPU VFs of [`GUEST_VF_IDS`], e.g. the
//! MI300X VF `74b5` of Azure's ND MI300X v5). A PF with VFs enabled carries `sriov_numvfs` and
//! `sriov_totalvfs`. An NVIDIA GPU whose configuration space was read carries
//! `vgpu_capability` (`present`, `absent`, or `unknown` when only the 64-byte header was readable,
//! as for an unprivileged reader) and, for a vGPU guest, `vgpu_host_driver_version` and
//! `vgpu_host_driver_branch`.
//!
//! Which PCI functions are GPUs is the catalogue's to say (`data/accelerators.yaml`): NVIDIA's and
//! AMD's functions of base class `03` or `12` or class `0b40`, Intel's of class `03`, and the
//! GPUs of further vendors (Moore Threads, MetaX, Hygon, ...). BMC and virtual display adapters
//! (ASPEED, Matrox, virtio...) are not in it and so never GPUs; Intel's `0b40` functions are
//! QuickAssist and Xeon Phi co-processors, and its class-`12` ones NPUs (`accel`).
//!
//! `gpu.node` also carries values derived over all GPUs (`vendor`, `product`, `family`, ...) that
//! NFD rules cannot compute (agreement across instances, sanitising); each is present only when
//! every GPU agrees, so heterogeneous nodes are labelled deterministically.

use std::collections::{BTreeMap, BTreeSet};

use crate::features::{FeatureSet, Instance};
use crate::pciids::PciIds;
use crate::sysfs::Sysfs;
use crate::validate::sanitize_value;

use super::nvml::{NvmlGpu, NvmlMigDevice, NvmlScan};
use super::pci::{PciAddress, PciDevice};
use super::warnings::Warnings;
use super::{accel, amd, health, intel, vgpu};
use crate::catalogue;

pub use super::gpu_names::{GPU_DEVICE, GPU_DRIVER, GPU_MIG, GPU_MIGPROFILE, GPU_NODE, Vendor};

/// Whether a PCI function of catalogue class `class` (`accel::classify`) is a GPU (see the
/// module docs), whose, and the catalogue entry that says so.
pub fn gpu_class(
    dev: &PciDevice,
    class: Option<&catalogue::Class<'static>>,
) -> Option<(Vendor, &'static catalogue::DeviceEntry)> {
    let class = class.filter(|c| c.is_gpu())?;
    let vendor = match dev.vendor_id {
        0x10de => Vendor::Nvidia,
        0x1002 => Vendor::Amd,
        0x8086 => Vendor::Intel,
        _ => match &class.vendor {
            std::borrow::Cow::Borrowed(name) => Vendor::Other(name),
            std::borrow::Cow::Owned(_) => return None,
        },
    };
    Some((vendor, class.entry?))
}

/// NVIDIA's architecture family by compute capability, as GPU Feature Discovery names it.
pub fn nvidia_family(major: i32, minor: i32) -> &'static str {
    match major {
        1 => "tesla",
        2 => "fermi",
        3 => "kepler",
        5 => "maxwell",
        6 => "pascal",
        7 if minor < 5 => "volta",
        7 => "turing",
        8 if minor < 9 => "ampere",
        8 => "ada-lovelace",
        9 => "hopper",
        // 10.x data centre (B200), 11.x Thor (10.1 before CUDA 13 renumbered it), 12.x the RTX
        // parts (RTX 50, RTX PRO 6000).
        10..=12 => "blackwell",
        13 => "rubin",
        _ => "undefined",
    }
}

/// An NVIDIA GPU's family from its chip, as the PCI ID database names it (`GH100 [H100 SXM5
/// 80GB]`, `AD102GL [L40S]`): the chip's letters name its architecture, the one its compute
/// capability gives (`nvidia_family`), so a GPU found through sysfs alone has the family NVML
/// would give. `None` for a name without a known chip prefix (parts older than Fermi, parts the
/// database names otherwise).
pub fn nvidia_family_of_chip(pci_name: &str) -> Option<&'static str> {
    let end = pci_name
        .find(|c: char| !c.is_ascii_uppercase())
        .unwrap_or(pci_name.len());
    let (letters, rest) = pci_name.split_at(end);
    if !rest.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    Some(match letters {
        "GF" => "fermi",
        "GK" => "kepler",
        "GM" => "maxwell",
        "GP" => "pascal",
        "GV" => "volta",
        "TU" => "turing",
        "GA" => "ampere",
        "AD" => "ada-lovelace",
        "GH" => "hopper",
        "GB" => "blackwell",
        _ => return None,
    })
}

/// SR-IOV virtual functions as a guest sees them: no `physfn`, only the device id says VF.
/// From the PCI ID database (data/pci.ids, 2025.07.11): AMD MxGPU functions, named `... VF`
/// or `MxGPU`.
pub const GUEST_VF_IDS: &[(u16, u16)] = &[
    (0x1002, 0x686c), // Vega 10 [Instinct MI25 MxGPU/MI25x2 MxGPU/V340 MxGPU/V340L MxGPU]
    (0x1002, 0x73ae), // Navi 21 [Radeon Pro V620 MxGPU]
    (0x1002, 0x73ce), // Navi 22-XL SRIOV MxGPU
    (0x1002, 0x74b5), // Aqua Vanjaram [Instinct MI300X VF]
    (0x1002, 0x74b9), // Aqua Vanjaram [Instinct MI325X VF]
];

/// A GPU instance profile (`NVML_GPU_INSTANCE_PROFILE_*` index): its slice count and the suffix
/// go-nvlib gives its name (`+me`, `+me.all`, `+gfx`, `-me`). `None` for an index go-nvlib does
/// not know.
pub fn gi_profile_shape(profile: u32) -> Option<(u32, &'static str)> {
    Some(match profile {
        0 => (1, ""),
        1 => (2, ""),
        2 => (3, ""),
        3 => (4, ""),
        4 => (7, ""),
        5 => (8, ""),
        6 => (6, ""),
        7 => (1, "+me"),      // 1_SLICE_REV1
        8 => (2, "+me"),      // 2_SLICE_REV1
        9 => (1, ""),         // 1_SLICE_REV2
        10 => (1, "+gfx"),    // 1_SLICE_GFX
        11 => (2, "+gfx"),    // 2_SLICE_GFX
        12 => (4, "+gfx"),    // 4_SLICE_GFX
        13 => (1, "-me"),     // 1_SLICE_NO_ME
        14 => (2, "-me"),     // 2_SLICE_NO_ME
        15 => (1, "+me.all"), // 1_SLICE_ALL_ME
        16 => (2, "+me.all"), // 2_SLICE_ALL_ME
        _ => return None,
    })
}

/// A compute instance profile (`NVML_COMPUTE_INSTANCE_PROFILE_*` index): its slice count, as
/// go-nvlib reads it. `None` for an index go-nvlib does not know.
pub fn ci_profile_slices(profile: u32) -> Option<u32> {
    Some(match profile {
        0 | 7 => 1, // 1_SLICE, 1_SLICE_REV1
        1 => 2,
        2 => 3,
        3 => 4,
        4 => 7,
        5 => 8,
        6 => 6,
        _ => return None,
    })
}

/// A MIG device's memory in GB as go-nvlib names it: its share of the whole GPU rounded up to
/// eighths, times the GPU's memory in GB rounded up.
pub fn mig_memory_gb(mig_memory_mb: u64, gpu_memory_bytes: u64) -> u64 {
    const GB: u64 = 1 << 30;
    if gpu_memory_bytes == 0 {
        return mig_memory_mb.div_ceil(1024);
    }
    let frac = (mig_memory_mb as f64 * (1u64 << 20) as f64) / gpu_memory_bytes as f64;
    let frac = (frac * 8.0).ceil() / 8.0;
    let total_gb = gpu_memory_bytes.div_ceil(GB) as f64;
    (frac * total_gb).round() as u64
}

/// A MIG profile name as NVIDIA's tools write it (`1g.10gb`, `1c.3g.20gb`, `1g.10gb+me`), built
/// as go-nvlib's `MigProfileInfo.String`: `<C>c.` only when the compute instance is smaller than
/// the GPU instance; the slice counts and suffix from the GPU and compute instance profiles
/// when NVML gave them, else from the device's attributes.
pub fn mig_profile(mig: &NvmlMigDevice, gpu_memory_bytes: u64) -> String {
    let gb = mig_memory_gb(mig.memory_size_mb, gpu_memory_bytes);
    let shape = mig.gi_profile.and_then(gi_profile_shape);
    let g = shape.map_or(mig.slices_gi, |(slices, _)| slices);
    let suffix = shape.map_or("", |(_, suffix)| suffix);
    let c = mig
        .ci_profile
        .and_then(ci_profile_slices)
        .unwrap_or(mig.slices_ci);
    if c == g || c == 0 {
        format!("{g}g.{gb}gb{suffix}")
    } else {
        format!("{c}c.{g}g.{gb}gb{suffix}")
    }
}

/// One GPU being assembled.
struct Gpu {
    address: Option<PciAddress>,
    vendor: Vendor,
    /// A further vendor's driver version (`(module or driver, version)`), from the catalogue.
    driver_version: Option<(String, String)>,
    attributes: BTreeMap<String, String>,
    mig: Vec<NvmlMigDevice>,
    memory_bytes: Option<u64>,
    /// What is wrong with it (`health`).
    faults: health::Faults,
}

/// What PCI discovery found: the functions, the catalogue's class of each, the names.
pub struct Pci<'a> {
    pub devices: &'a [PciDevice],
    pub classes: &'a [Option<catalogue::Class<'static>>],
    pub ids: &'a PciIds,
}

/// Fills `gpu.device`, `gpu.mig`, `gpu.node` and `gpu.driver`. Returns the KFD topology it
/// read (none without an AMD GPU), which the `missing` check reads too.
pub fn discover(
    sysfs: &Sysfs,
    pci: Pci<'_>,
    nvml: &NvmlScan,
    health_config: &crate::config::HealthConfig,
    features: &mut FeatureSet,
    warnings: &mut Warnings,
) -> Vec<amd::KfdNode> {
    let Pci {
        devices,
        classes,
        ids,
    } = pci;
    let mut nvml_by_addr: BTreeMap<PciAddress, &NvmlGpu> = BTreeMap::new();
    let mut nvml_unplaced: Vec<&NvmlGpu> = Vec::new();
    for g in &nvml.gpus {
        match g.address {
            Some(a) => {
                nvml_by_addr.insert(a, g);
            }
            None => nvml_unplaced.push(g),
        }
    }
    let found: Vec<(&PciDevice, Vendor, &catalogue::DeviceEntry)> = devices
        .iter()
        .zip(classes)
        .filter_map(|(d, c)| gpu_class(d, c.as_ref()).map(|(v, e)| (d, v, e)))
        .collect();
    let view = health::SysfsContext::new(
        &found.iter().map(|(d, v, _)| (*d, *v)).collect::<Vec<_>>(),
        nvml,
    );
    let kfd = if found.iter().any(|(_, v, _)| *v == Vendor::Amd) {
        amd::kfd_nodes(sysfs, warnings)
    } else {
        Vec::new()
    };

    let mut gpus: Vec<Gpu> = Vec::new();
    for (dev, vendor, entry) in found {
        let mut a = BTreeMap::new();
        a.insert("address".to_string(), dev.address.clone());
        a.insert("vendor".into(), vendor.name().into());
        a.insert("vendor_id".into(), format!("{:04x}", dev.vendor_id));
        a.insert("device_id".into(), format!("{:04x}", dev.device_id));
        a.insert("class".into(), format!("{:04x}", dev.class_code >> 8));
        for key in ["numa_node", "driver", "is_vf"] {
            if let Some(v) = dev.attr(key) {
                a.insert(key.into(), v.to_string());
            }
        }
        virtualization(sysfs, dev, &mut a, warnings);
        match pcie_root(sysfs, dev) {
            Ok(Some(root)) => {
                a.insert("pcie_root".into(), root);
            }
            Ok(None) => {}
            Err(e) => warnings.push(format!("{e}; pcie_root left out")),
        }
        // The vendor's own name first (NVML's, for NVIDIA): one name whichever source answers.
        let db_name = ids.device_name(dev.vendor_id, dev.device_id);
        let product = entry
            .name(dev.device_id, dev.subsystem)
            .or(db_name)
            .or_else(|| entry.product(dev.device_id));
        if let Some(n) = product {
            a.insert("product".into(), n.to_string());
        }
        if vendor == Vendor::Nvidia
            && let Some(f) = db_name.and_then(nvidia_family_of_chip)
        {
            a.insert("family".into(), f.into());
        }
        a.insert("source".into(), "sysfs".into());
        let mut gpu = Gpu {
            address: Some(dev.sort_key),
            vendor,
            driver_version: None,
            attributes: a,
            mig: Vec::new(),
            memory_bytes: None,
            faults: health::sysfs_faults(sysfs, dev, vendor, &view, health_config, warnings),
        };
        match vendor {
            Vendor::Nvidia => {
                if let Some(n) = nvml_by_addr.remove(&dev.sort_key) {
                    apply_nvml(&mut gpu, n);
                }
                apply_config_space(dev, &mut gpu.attributes, warnings);
            }
            Vendor::Amd => gpu
                .attributes
                .extend(amd::attributes(sysfs, dev, &kfd, warnings)),
            Vendor::Intel => gpu
                .attributes
                .extend(intel::attributes(sysfs, dev, warnings)),
            Vendor::Other(_) => {
                if let Some(m) = accel::memory_mib(sysfs, dev, entry, warnings) {
                    gpu.attributes.insert("memory_mib".into(), m.to_string());
                }
                gpu.driver_version = accel::driver_version(sysfs, dev, entry, warnings);
            }
        }
        gpus.push(gpu);
    }
    // GPUs NVML knows but sysfs does not show (e.g. sysfs not mounted in the container). An
    // answer kept from before NVML failed (`stale`) describes only GPUs still on the PCI bus
    // when sysfs shows one: a GPU gone from it takes its NVML values with it.
    let stale_on_a_bus =
        matches!(nvml.status, super::nvml::NvmlStatus::Stale(_)) && !devices.is_empty();
    for n in nvml_by_addr.into_values().chain(nvml_unplaced) {
        if stale_on_a_bus {
            continue;
        }
        let mut gpu = Gpu {
            address: n.address,
            vendor: Vendor::Nvidia,
            driver_version: None,
            attributes: BTreeMap::from([
                ("vendor".to_string(), "nvidia".to_string()),
                ("vendor_id".into(), "10de".into()),
            ]),
            mig: Vec::new(),
            memory_bytes: None,
            faults: health::Faults::new(),
        };
        if let Some(a) = n.address {
            gpu.attributes.insert("address".into(), format_address(a));
        }
        apply_nvml(&mut gpu, n);
        gpus.push(gpu);
    }
    gpus.sort_by_key(|g| g.address);

    features
        .instances
        .entry(GPU_DEVICE.to_string())
        .or_default();
    for (index, gpu) in gpus.iter_mut().enumerate() {
        gpu.attributes.insert("index".into(), index.to_string());
        health::write(&mut gpu.attributes, &gpu.faults);
        features.push_instance(
            GPU_DEVICE,
            gpu.attributes
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
        );
        for m in &gpu.mig {
            let mut i = Instance::default();
            let mut put = |k: &str, v: String| {
                i.attributes.insert(k.into(), v.into());
            };
            put("parent_index", index.to_string());
            if let Some(a) = gpu.attributes.get("address") {
                put("parent_address", a.clone());
            }
            put("profile", mig_profile(m, gpu.memory_bytes.unwrap_or(0)));
            put("memory_mib", m.memory_size_mb.to_string());
            put("multiprocessors", m.multiprocessors.to_string());
            put("slices_gi", m.slices_gi.to_string());
            put("slices_ci", m.slices_ci.to_string());
            put("engines_copy", m.engines_copy.to_string());
            put("engines_decoder", m.engines_decoder.to_string());
            put("engines_encoder", m.engines_encoder.to_string());
            put("engines_jpeg", m.engines_jpeg.to_string());
            put("engines_ofa", m.engines_ofa.to_string());
            features.push_instance(GPU_MIG, i);
        }
    }

    let mut profiles: BTreeMap<String, usize> = BTreeMap::new();
    for gpu in &gpus {
        for m in &gpu.mig {
            *profiles
                .entry(mig_profile(m, gpu.memory_bytes.unwrap_or(0)))
                .or_default() += 1;
        }
    }
    for (profile, n) in profiles {
        features.insert_attribute(GPU_MIGPROFILE, profile, n.to_string());
    }

    let drivers = driver_versions(sysfs, &gpus, nvml, warnings);
    for (k, v) in &drivers {
        features.insert_attribute(GPU_DRIVER, k.clone(), v.clone());
    }
    // NVSwitch: NVIDIA's functions of class 0680 (the A100's 1af1, the H100's 22a3, ...).
    let nvswitches = devices
        .iter()
        .filter(|d| d.vendor_id == 0x10de && d.class_code >> 8 == 0x0680)
        .count();
    for (k, v) in node_attributes(&gpus, &drivers, nvml, nvswitches) {
        features.insert_attribute(GPU_NODE, k, v);
    }
    if !gpus.is_empty() && every_gpu_has_a_local_rdma_nic(devices, &gpus) {
        features.insert_attribute(GPU_NODE, "rdma_nic_local", "true");
    }
    kfd
}

/// The kernel drivers of RDMA-capable NICs: NVIDIA/Mellanox ConnectX (`mlx5_core`,
/// `mlx4_core`), Broadcom NetXtreme-E (`bnxt_en`, RoCE through `bnxt_re`), Intel E810 (`ice`,
/// RDMA through `irdma`), Marvell/QLogic (`qede`), Chelsio (`cxgb4`), Cornelis Omni-Path
/// (`hfi1`). `i40e` drives the X710 family (no RDMA) and the X722 (iWARP through `irdma`):
/// only the X722's device ids count (`X722_DEVICE_IDS`).
const RDMA_NIC_DRIVERS: [&str; 7] = [
    "mlx5_core",
    "mlx4_core",
    "bnxt_en",
    "ice",
    "qede",
    "cxgb4",
    "hfi1",
];

/// The Intel X722's physical functions (torvalds/linux `i40e_devids.h`: KX, QSFP, SFP, 1G and
/// 10G BASE-T, SFP-I), the `i40e` parts with RDMA.
const X722_DEVICE_IDS: [u16; 6] = [0x37ce, 0x37cf, 0x37d0, 0x37d1, 0x37d2, 0x37d3];

/// A network function that can do RDMA: an InfiniBand controller (class 0207), a function of
/// an RDMA NIC driver, or an X722 under `i40e`.
fn is_rdma_nic(d: &PciDevice) -> bool {
    d.base_class() == 0x02
        && (d.class_code >> 8 == 0x0207
            || d.driver().is_some_and(|drv| {
                RDMA_NIC_DRIVERS.contains(&drv)
                    || (drv == "i40e"
                        && d.vendor_id == 0x8086
                        && X722_DEVICE_IDS.contains(&d.device_id))
            }))
}

/// Whether every GPU's NUMA node holds an RDMA-capable NIC (`is_rdma_nic`). A NUMA node of -1 (no
/// NUMA information, as in most VMs) only matches -1; a GPU without one matches nothing.
fn every_gpu_has_a_local_rdma_nic(devices: &[PciDevice], gpus: &[Gpu]) -> bool {
    let nics: BTreeSet<&str> = devices
        .iter()
        .filter(|d| is_rdma_nic(d))
        .filter_map(|d| d.attr("numa_node"))
        .collect();
    gpus.iter().all(|g| {
        g.attributes
            .get("numa_node")
            .is_some_and(|n| nics.contains(n.as_str()))
    })
}

/// The PCI root bus (host bridge) a function sits under, `<domain>:<bus>` of the
/// `pci<domain>:<bus>` directory its `bus/pci/devices` link leads through (`0000:15` for
/// `../../../devices/pci0000:15/0000:15:01.0/.../0000:19:00.0`). GPUs under one root reach each
/// other without crossing the CPU's interconnect (nvidia-smi topo's `PHB` or better).
fn pcie_root(sysfs: &Sysfs, dev: &PciDevice) -> Result<Option<String>, crate::sysfs::SysfsError> {
    let Some(target) = sysfs.link_target(&dev.path)? else {
        return Ok(None);
    };
    Ok(target.components().find_map(|c| {
        let name = c.as_os_str().to_str()?;
        let root = name.strip_prefix("pci")?;
        let (domain, bus) = root.split_once(':')?;
        let hex = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit());
        (hex(domain) && bus.len() == 2 && hex(bus)).then(|| root.to_ascii_lowercase())
    }))
}

/// SR-IOV: `physfn` of a VF, the VF counts of a PF with VFs enabled, and VFs a guest sees.
fn virtualization(
    sysfs: &Sysfs,
    dev: &PciDevice,
    a: &mut BTreeMap<String, String>,
    warnings: &mut Warnings,
) {
    if dev.attr("is_vf") == Some("true") {
        match sysfs.link_name(&dev.path.join("physfn")) {
            Ok(Some(pf)) => {
                a.insert("physfn".into(), pf);
            }
            Ok(None) => {}
            Err(e) => warnings.push(format!("{e}; physfn left out")),
        }
    } else if GUEST_VF_IDS.contains(&(dev.vendor_id, dev.device_id)) {
        a.insert("is_vf".into(), "true".into());
    }
    let numvfs = dev.attr("sriov_numvfs").and_then(|v| v.parse::<u64>().ok());
    if numvfs.is_some_and(|n| n > 0) {
        for key in ["sriov_numvfs", "sriov_totalvfs"] {
            if let Some(v) = dev.attr(key) {
                a.insert(key.into(), v.to_string());
            }
        }
    }
}

/// NVIDIA vGPU guests from PCI configuration space (see `vgpu`). A missing `config` file
/// (a trimmed sysfs) says nothing and adds nothing.
fn apply_config_space(dev: &PciDevice, a: &mut BTreeMap<String, String>, warnings: &mut Warnings) {
    let space = match vgpu::read(&dev.path) {
        Ok(Some(s)) => s,
        Ok(None) => return,
        Err(e) => {
            warnings.push(format!("{e}; vGPU capability left out"));
            return;
        }
    };
    a.insert("vgpu_capability".into(), space.capability().into());
    match space {
        vgpu::ConfigSpace::Vgpu(host) => {
            a.insert("vgpu".into(), "true".into());
            if let Some(h) = host {
                for (k, v) in [
                    ("vgpu_host_driver_version", h.version),
                    ("vgpu_host_driver_branch", h.branch),
                ] {
                    if !v.is_empty() {
                        a.insert(k.into(), v);
                    }
                }
            }
        }
        vgpu::ConfigSpace::NotVgpu => {
            a.entry("vgpu".into()).or_insert_with(|| "false".into());
        }
        vgpu::ConfigSpace::HeaderOnly { len } => {
            tracing::debug!(
                "{}/config: {len} bytes readable, the capability list is not (unprivileged)",
                dev.path.display()
            );
        }
    }
}

fn format_address(a: PciAddress) -> String {
    format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        a.domain, a.bus, a.device, a.function
    )
}

fn apply_nvml(gpu: &mut Gpu, n: &NvmlGpu) {
    for f in &n.faults {
        gpu.faults.insert(f.kind.clone(), f.detail.clone());
    }
    let a = &mut gpu.attributes;
    a.insert("source".into(), "nvml".into());
    if let Some(v) = &n.name {
        a.insert("product".into(), v.clone());
    }
    if let Some(v) = &n.uuid {
        a.insert("uuid".into(), v.clone());
    }
    if let Some(b) = n.memory_bytes {
        a.insert("memory_mib".into(), (b >> 20).to_string());
        gpu.memory_bytes = Some(b);
    }
    if let Some((major, minor)) = n.compute {
        a.insert("compute_major".into(), major.to_string());
        a.insert("compute_minor".into(), minor.to_string());
        a.insert("family".into(), nvidia_family(major, minor).into());
    }
    a.insert("mig_capable".into(), n.mig_enabled.is_some().to_string());
    if let Some(e) = n.mig_enabled {
        a.insert("mig_enabled".into(), e.to_string());
    }
    if let Some(v) = n.vgpu_guest {
        a.insert("vgpu".into(), v.to_string());
    }
    if let Some(v) = n.nvlinks_active {
        a.insert("nvlinks".into(), v.to_string());
    }
    if let Some(f) = &n.fabric {
        a.insert(
            "clique".into(),
            format!("{}.{}", f.cluster_uuid, f.clique_id),
        );
    }
    gpu.mig = n.mig_devices.clone();
}

/// `gpu.driver`: NVML's versions, else the kernel module's `version` file.
fn driver_versions(
    sysfs: &Sysfs,
    gpus: &[Gpu],
    nvml: &NvmlScan,
    warnings: &mut Warnings,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(v) = &nvml.driver_version {
        out.insert("nvidia".to_string(), v.clone());
    }
    if let Some(v) = &nvml.cuda_version {
        out.insert("cuda".to_string(), v.clone());
    }
    let modules: BTreeSet<&str> = gpus
        .iter()
        .filter_map(|g| g.attributes.get("driver").map(String::as_str))
        .filter(|d| matches!(*d, "nvidia" | "amdgpu" | "i915" | "xe"))
        .collect();
    for (what, v) in gpus.iter().filter_map(|g| g.driver_version.as_ref()) {
        out.entry(what.clone()).or_insert_with(|| v.clone());
    }
    for m in modules {
        if out.contains_key(m) {
            continue;
        }
        match sysfs.read(&sysfs.path("module").join(m).join("version")) {
            Ok(Some(v)) if !v.is_empty() => {
                out.insert(m.to_string(), v);
            }
            Ok(_) => {}
            Err(e) => warnings.push(format!("{e}; driver version left out")),
        }
    }
    out
}

/// The value every GPU agrees on, if any.
fn common<'a>(gpus: &'a [Gpu], key: &str) -> Option<&'a str> {
    let first = gpus.first()?.attributes.get(key)?;
    gpus.iter()
        .all(|g| g.attributes.get(key) == Some(first))
        .then_some(first.as_str())
}

fn node_attributes(
    gpus: &[Gpu],
    drivers: &BTreeMap<String, String>,
    nvml: &NvmlScan,
    nvswitches: usize,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("count".to_string(), gpus.len().to_string());
    out.insert("nvml".to_string(), nvml.status.as_str().to_string());
    if gpus.is_empty() {
        return out;
    }
    let vendors: BTreeSet<Vendor> = gpus.iter().map(|g| g.vendor).collect();
    out.insert(
        "vendors".into(),
        vendors
            .iter()
            .map(|v| v.name())
            .collect::<Vec<_>>()
            .join(","),
    );
    for v in &vendors {
        let n = gpus.iter().filter(|g| g.vendor == *v).count();
        out.insert(format!("count_{}", v.name()), n.to_string());
    }
    // Memory and compute capability over the GPUs NVML answered for: a lost one does not take
    // them off the node (`run` holds its last answer meanwhile: `health::Hold`).
    out.extend(health::nvml_node_values(gpus.iter().map(|g| &g.attributes)));
    if let Some(link) = interconnect(gpus, &vendors, nvswitches) {
        out.insert("interconnect".into(), link.into());
    }
    if let Some(c) = clique(gpus) {
        out.insert("clique".into(), c.into());
    }
    placement(gpus, &mut out);
    let summary = health::node_attributes(
        gpus.iter()
            .map(|g| g.attributes.get("health").map(String::as_str)),
    );
    for (k, v) in summary.into_iter().flatten() {
        out.insert(k.into(), v);
    }
    // Unknown on every GPU counts as alike: eight identical GPUs without a memory reading are
    // still homogeneous.
    let alike = |k: &str| {
        gpus.iter()
            .all(|g| g.attributes.get(k) == gpus[0].attributes.get(k))
    };
    out.insert(
        "homogeneous".into(),
        (vendors.len() == 1 && alike("product") && alike("memory_mib")).to_string(),
    );

    // Derived, for rules: present only when all GPUs agree.
    if vendors.len() == 1 {
        let vendor = *vendors.first().expect("one vendor");
        out.insert("vendor".into(), vendor.name().into());
        let driver_key = match vendor {
            Vendor::Nvidia => Some("nvidia"),
            Vendor::Amd => Some("amdgpu"),
            Vendor::Intel => common(gpus, "driver").filter(|d| matches!(*d, "i915" | "xe")),
            Vendor::Other(_) => {
                let first = gpus[0].driver_version.as_ref().map(|(w, _)| w.as_str());
                first.filter(|w| {
                    gpus.iter()
                        .all(|g| g.driver_version.as_ref().map(|(o, _)| o.as_str()) == Some(*w))
                })
            }
        };
        if let Some(version) = driver_key.and_then(|k| drivers.get(k)) {
            let mut parts = version.split(['.', '-']);
            out.insert("driver_version".into(), sanitize_value(version));
            if let Some(m) = parts.next().filter(|p| is_number(p)) {
                out.insert("driver_major".into(), m.to_string());
            }
            if let Some(m) = parts.next().filter(|p| is_number(p)) {
                out.insert("driver_minor".into(), m.to_string());
            }
        }
    }
    if let Some(p) = common(gpus, "product") {
        let s = sanitize_value(p);
        if !s.is_empty() {
            out.insert("product".into(), s);
        }
    }
    let family = common(gpus, "family").or_else(|| common(gpus, "gfx_target"));
    if let Some(f) = family {
        out.insert("family".into(), sanitize_value(f));
    }
    mixed_counts(gpus, &mut out);
    if let Some(cuda) = drivers.get("cuda") {
        let mut it = cuda.split('.');
        if let (Some(a), Some(b)) = (it.next(), it.next()) {
            out.insert("cuda_major".into(), a.to_string());
            out.insert("cuda_minor".into(), b.to_string());
        }
    }
    let any = |k: &str| {
        gpus.iter()
            .any(|g| g.attributes.get(k).map(String::as_str) == Some("true"))
    };
    if gpus
        .iter()
        .any(|g| g.attributes.contains_key("mig_capable"))
    {
        out.insert("mig_capable".into(), any("mig_capable").to_string());
        out.insert("mig_enabled".into(), any("mig_enabled").to_string());
    }
    // A GPU whose configuration space was only partly readable and that NVML did not describe
    // may be a vGPU: then "no vGPU" and "not virtual" are unknown, and left out.
    let vgpu_unknown = gpus.iter().any(|g| {
        g.attributes.get("vgpu_capability").map(String::as_str) == Some("unknown")
            && !g.attributes.contains_key("vgpu")
    });
    let vgpu = any("vgpu");
    if vgpu || !vgpu_unknown {
        out.insert("vgpu_present".into(), vgpu.to_string());
    }
    let virtual_gpu = vgpu || any("is_vf");
    if virtual_gpu || !vgpu_unknown {
        out.insert("virtual".into(), virtual_gpu.to_string());
    }
    out
}

/// The link between the node's GPUs: `nvlink` when the node has NVSwitch functions or NVML
/// reports an active NVLink on a GPU, `xgmi` when an AMD GPU has XGMI links (KFD io_links),
/// `pcie` when every GPU's links are known and none is either (NVML answered for every NVIDIA
/// GPU, KFD listed every AMD GPU's io_links). Otherwise nothing: a GPU seen only through sysfs
/// (NVLink bridges between PCIe cards do not show there) or of another vendor leaves it unknown.
fn interconnect(
    gpus: &[Gpu],
    vendors: &BTreeSet<Vendor>,
    nvswitches: usize,
) -> Option<&'static str> {
    let links = |key: &str| {
        gpus.iter()
            .filter_map(|g| g.attributes.get(key))
            .any(|n| n != "0")
    };
    if (nvswitches > 0 && vendors.contains(&Vendor::Nvidia)) || links("nvlinks") {
        return Some("nvlink");
    }
    if links("xgmi_links") {
        return Some("xgmi");
    }
    let known = gpus.iter().all(|g| match g.vendor {
        Vendor::Nvidia => g.attributes.contains_key("nvlinks"),
        Vendor::Amd => g.attributes.contains_key("xgmi_links"),
        _ => false,
    });
    known.then_some("pcie")
}

/// Where the GPUs sit: how many NUMA nodes hold them (`numa_nodes`), the most any one holds
/// (`numa_gpus_max`: what kubelet's `single-numa-node` topology policy can give one pod), and
/// how many PCIe roots (`pcie_roots`). Each only when every GPU's value is known; a NUMA node
/// of -1 (no NUMA information, as in most VMs) is unknown.
fn placement(gpus: &[Gpu], out: &mut BTreeMap<String, String>) {
    let all = |key: &str| -> Option<Vec<&str>> {
        gpus.iter()
            .map(|g| {
                g.attributes
                    .get(key)
                    .map(String::as_str)
                    .filter(|v| *v != "-1")
            })
            .collect()
    };
    if let Some(numa) = all("numa_node") {
        let mut per: BTreeMap<&str, usize> = BTreeMap::new();
        for n in numa {
            *per.entry(n).or_default() += 1;
        }
        out.insert("numa_nodes".into(), per.len().to_string());
        let max = per.values().max().copied().unwrap_or(0);
        out.insert("numa_gpus_max".into(), max.to_string());
    }
    if let Some(roots) = all("pcie_root") {
        let distinct: BTreeSet<&str> = roots.into_iter().collect();
        out.insert("pcie_roots".into(), distinct.len().to_string());
    }
}

/// The multi-node NVLink domain of the node's GPUs (`<cluster uuid>.<clique id>`), as GFD's
/// `gpu.clique`: from the GPUs attached to a fabric, when they all name one cluster and one
/// clique; nothing when none is attached or they disagree.
fn clique(gpus: &[Gpu]) -> Option<&str> {
    let ids: BTreeSet<&str> = gpus
        .iter()
        .filter_map(|g| g.attributes.get("clique"))
        .map(String::as_str)
        .collect();
    let (uuids, cliques): (BTreeSet<&str>, BTreeSet<&str>) =
        ids.iter().filter_map(|id| id.rsplit_once('.')).unzip();
    (uuids.len() == 1 && cliques.len() == 1).then(|| *ids.first().expect("one id"))
}

/// The longest model name in `gpu-model-<name>.count` (a label name is at most 63 characters).
pub const MODEL_KEY_MAX: usize = 63 - "gpu-model-".len() - ".count".len();
/// The same for `gpu-family-<name>.count`.
pub const FAMILY_KEY_MAX: usize = 63 - "gpu-family-".len() - ".count".len();

/// On a node whose GPUs are not all one model (every GPU's model known): how many models
/// (`models`), and a count per model and per family (`count_model_<name>`,
/// `count_family_<name>`), so that a pod can ask for "at least N of model X" where `product`
/// is absent. Names are sanitised into label-name characters and shortened with a hash of the
/// whole name past their room in a key, so two models never share one. Nodes of one model get
/// none of these: their labels stay as they were (`product`, `family`). Neither do nodes where
/// one vendor's GPUs were named by different sources (NVML for some, sysfs for a lost one).
fn mixed_counts(gpus: &[Gpu], out: &mut BTreeMap<String, String>) {
    let all = |keys: &[&str]| -> Option<Vec<&str>> {
        gpus.iter()
            .map(|g| {
                keys.iter()
                    .find_map(|k| g.attributes.get(*k))
                    .map(String::as_str)
            })
            .collect()
    };
    let count =
        |out: &mut BTreeMap<String, String>, values: Vec<&str>, max: usize, prefix: &str| {
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for v in values {
                *counts
                    .entry(crate::validate::sanitize_to(v, max))
                    .or_default() += 1;
            }
            counts.retain(|k, _| !k.is_empty());
            let n = counts.len();
            for (k, c) in counts {
                out.insert(format!("{prefix}{k}"), c.to_string());
            }
            n
        };
    // A vendor's GPUs named by two sources (one GPU lost to NVML, named from sysfs) are not
    // two models: the names differ, the GPUs may not. No counts then.
    let one_source_per_vendor = gpus.iter().all(|g| {
        gpus.iter()
            .filter(|o| o.vendor == g.vendor)
            .all(|o| o.attributes.get("source") == g.attributes.get("source"))
    });
    if !one_source_per_vendor {
        return;
    }
    if let Some(products) = all(&["product"])
        && common(gpus, "product").is_none()
    {
        let models = count(out, products, MODEL_KEY_MAX, "count_model_");
        out.insert("models".into(), models.to_string());
    }
    if let Some(families) = all(&["family", "gfx_target"])
        && common(gpus, "family")
            .or_else(|| common(gpus, "gfx_target"))
            .is_none()
    {
        count(out, families, FAMILY_KEY_MAX, "count_family_");
    }
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Why `gpu.node.<attr>` is absent on a node whose features are `features`, in words (`None`
/// when it is present, or when it is not one of the attributes derived from every GPU). What
/// `explain` says after `gpu.node.product: absent`.
pub fn node_absent_because(features: &FeatureSet, attr: &str) -> Option<String> {
    if features.attribute(GPU_NODE, attr).is_some() {
        return None;
    }
    let gpus = features.instances(GPU_DEVICE);
    let derived = matches!(
        attr,
        "vendor"
            | "vendors"
            | "product"
            | "family"
            | "compute_major"
            | "compute_minor"
            | "memory_mib_min"
            | "memory_mib_max"
            | "memory_mib_total"
            | "driver_version"
            | "driver_major"
            | "driver_minor"
            | "cuda_major"
            | "cuda_minor"
            | "mig_capable"
            | "mig_enabled"
            | "vgpu_present"
            | "virtual"
    );
    if !derived {
        return None;
    }
    if gpus.is_empty() {
        return Some("no GPU on this node (gpu.node.count=0)".into());
    }
    let nvml = features
        .attribute(GPU_NODE, "nvml")
        .unwrap_or("unavailable");
    let vendors: BTreeSet<&str> = gpus.iter().filter_map(|g| g.get("vendor")).collect();
    let of_all = |keys: &[&str], what: &str| -> String {
        let mut values: BTreeMap<&str, usize> = BTreeMap::new();
        let mut unknown = Vec::new();
        for g in gpus {
            match keys.iter().find_map(|k| g.get(k)) {
                Some(v) => *values.entry(v).or_default() += 1,
                None => unknown.push(g.get("address").unwrap_or("?")),
            }
        }
        if !unknown.is_empty() {
            let nvml_hint = if nvml == "ok" {
                String::new()
            } else {
                format!("; NVML gives it for NVIDIA GPUs, and is {nvml} here")
            };
            return format!(
                "{what} is unknown for {} of the {} GPU(s) ({}){nvml_hint}",
                unknown.len(),
                gpus.len(),
                unknown.join(", ")
            );
        }
        let listed: Vec<String> = values.iter().map(|(v, n)| format!("{n} x {v:?}")).collect();
        format!(
            "the GPUs disagree on {what} ({}): it is given only when every GPU agrees",
            listed.join(", ")
        )
    };
    Some(match attr {
        "product" => of_all(&["product"], "the product"),
        "family" => of_all(&["family", "gfx_target"], "the family"),
        "compute_major" | "compute_minor" => of_all(&[attr], "the compute capability"),
        "memory_mib_min" | "memory_mib_max" | "memory_mib_total" => {
            of_all(&["memory_mib"], "the memory size")
        }
        "vendor" | "driver_version" | "driver_major" | "driver_minor" if vendors.len() > 1 => {
            format!(
                "the GPUs are of {} vendors ({}): it is given only for a single vendor",
                vendors.len(),
                vendors.into_iter().collect::<Vec<_>>().join(", ")
            )
        }
        "driver_version" | "driver_major" | "driver_minor" => format!(
            "no version of the {} driver was found (gpu.driver has {})",
            vendors.first().copied().unwrap_or("GPU's"),
            features
                .attributes
                .get(GPU_DRIVER)
                .map(|a| a.elements.keys().cloned().collect::<Vec<_>>().join(", "))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "nothing".into())
        ),
        "cuda_major" | "cuda_minor" => {
            format!("no CUDA version: only NVML gives it (gpu.node.nvml={nvml})")
        }
        "mig_capable" | "mig_enabled" => {
            format!("no GPU says whether it is MIG-capable: only NVML does (gpu.node.nvml={nvml})")
        }
        // vgpu_present, virtual
        _ => "a GPU's PCI configuration space was only partly readable (vgpu_capability=unknown) \
              and NVML did not describe it: whether it is a vGPU is unknown"
            .to_string(),
        // `vendor` with one vendor is always present; `vendors` with GPUs too.
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mig(gi: u32, ci: u32, mb: u64) -> NvmlMigDevice {
        NvmlMigDevice {
            uuid: None,
            memory_size_mb: mb,
            multiprocessors: 0,
            slices_gi: gi,
            slices_ci: ci,
            engines_copy: 0,
            engines_decoder: 0,
            engines_encoder: 0,
            engines_jpeg: 0,
            engines_ofa: 0,
            gi_profile: None,
            ci_profile: None,
        }
    }

    #[test]
    fn mig_profile_names_follow_nvidia() {
        let a100_40 = 40960u64 << 20;
        let a100_80 = 81920u64 << 20;
        assert_eq!(mig_profile(&mig(3, 3, 19968), a100_40), "3g.20gb");
        assert_eq!(mig_profile(&mig(1, 1, 4864), a100_40), "1g.5gb");
        assert_eq!(mig_profile(&mig(7, 7, 40192), a100_40), "7g.40gb");
        assert_eq!(mig_profile(&mig(1, 1, 9728), a100_80), "1g.10gb");
        assert_eq!(mig_profile(&mig(1, 1, 19968), a100_80), "1g.20gb");
        assert_eq!(mig_profile(&mig(3, 1, 19968), a100_40), "1c.3g.20gb");
    }

    #[test]
    fn gpu_instance_profiles_give_the_suffix() {
        // H200 (mig-parted#120): 16 GiB of 143771 MiB is 1g.18gb; profile 7 is 1_SLICE_REV1.
        let h200 = 143771u64 << 20;
        let with = |p: u32, gi, ci, mb| NvmlMigDevice {
            gi_profile: Some(p),
            ..mig(gi, ci, mb)
        };
        assert_eq!(mig_profile(&with(7, 1, 1, 16384), h200), "1g.18gb+me");
        assert_eq!(mig_profile(&with(0, 1, 1, 16384), h200), "1g.18gb");
        assert_eq!(mig_profile(&with(2, 3, 3, 71168), h200), "3g.71gb");
        assert_eq!(mig_profile(&with(13, 1, 1, 16384), h200), "1g.18gb-me");
        assert_eq!(mig_profile(&with(15, 1, 1, 16384), h200), "1g.18gb+me.all");
        assert_eq!(mig_profile(&with(2, 3, 1, 71168), h200), "1c.3g.71gb");
        // The compute instance profile decides `<c>c.`, whatever the attributes say (go-nvlib
        // asks the compute-instance calls): 1_SLICE, 2_SLICE, 1_SLICE_REV1.
        let ci = |p: u32, ci: u32, c| NvmlMigDevice {
            ci_profile: Some(c),
            ..with(p, 3, ci, 19968)
        };
        let a100_40 = 40960u64 << 20;
        assert_eq!(mig_profile(&ci(2, 3, 0), a100_40), "1c.3g.20gb");
        assert_eq!(mig_profile(&ci(2, 3, 1), a100_40), "2c.3g.20gb");
        assert_eq!(mig_profile(&ci(2, 3, 2), a100_40), "3g.20gb");
        assert_eq!(mig_profile(&ci(2, 1, 7), a100_40), "1c.3g.20gb");
        // An unknown compute instance profile: the attributes' slice count.
        assert_eq!(mig_profile(&ci(2, 2, 9), a100_40), "2c.3g.20gb");
        // An index go-nvlib does not know: the slice counts alone.
        assert_eq!(mig_profile(&with(17, 3, 3, 71168), h200), "3g.71gb");
        // A100-80GB PCIe, 7g (gpu-operator#687: GFD labels it mig-7g.80gb).
        assert_eq!(
            mig_profile(&with(4, 7, 7, 81152), 81920u64 << 20),
            "7g.80gb"
        );
    }

    /// Every device name of the embedded PCI ID database and every NVML name of the catalogue's
    /// table gives a valid label key within 63 characters, and two names that sanitise
    /// differently never share a key (a cut name carries a hash of the whole).
    #[test]
    fn every_known_product_name_gives_a_valid_distinct_count_key() {
        let db = String::from_utf8_lossy(include_bytes!("../../data/pci.ids")).into_owned();
        // Vendors and devices come before the class list (`C 00  Unclassified device`).
        let mut names: Vec<String> = db
            .lines()
            .take_while(|l| !l.starts_with("C "))
            .filter(|l| l.starts_with('\t') && !l.starts_with("\t\t"))
            .filter_map(|l| l.trim_start().split_once("  ").map(|(_, n)| n.to_string()))
            .collect();
        let from_db = names.len();
        assert!(from_db > 15_000, "{from_db} device names");
        for v in &crate::catalogue::catalogue().vendors {
            for d in &v.devices {
                names.extend(d.names.iter().map(|(_, n)| n.clone()));
                names.extend(d.products.iter().map(|(_, n)| n.clone()));
            }
        }
        assert!(names.len() > from_db);
        let mut owner: BTreeMap<String, String> = BTreeMap::new();
        for name in &names {
            let full = crate::validate::sanitize_to(name, usize::MAX);
            if full.is_empty() {
                continue;
            }
            for (prefix, max) in [
                ("gpu-model-", MODEL_KEY_MAX),
                ("gpu-family-", FAMILY_KEY_MAX),
            ] {
                let key = format!("{prefix}{}.count", crate::validate::sanitize_to(name, max));
                assert!(key.len() <= 63, "{key}");
                assert_eq!(crate::validate::qualified_name(&key), Ok(()), "{key}");
                if let Some(other) = owner.insert(key.clone(), full.clone()) {
                    assert_eq!(other, full, "{key} names two models");
                }
            }
        }
    }

    /// Model names longer than their room in a label key are shortened with a hash of the whole
    /// name: two long names that share their first characters stay two keys.
    #[test]
    fn long_model_names_get_distinct_keys_within_a_label_name() {
        let a = crate::validate::sanitize_to(
            "NVIDIA GeForce RTX 4090 Laptop GPU Founders Edition Variant A",
            MODEL_KEY_MAX,
        );
        let b = crate::validate::sanitize_to(
            "NVIDIA GeForce RTX 4090 Laptop GPU Founders Edition Variant B",
            MODEL_KEY_MAX,
        );
        assert_eq!(a.len(), MODEL_KEY_MAX);
        assert_ne!(a, b);
        assert_eq!(&a[..38], "NVIDIA-GeForce-RTX-4090-Laptop-GPU-Fou");
        assert_eq!(format!("gpu-model-{a}.count").len(), 63);
        assert_eq!(
            crate::validate::sanitize_to("NVIDIA H100 80GB HBM3", MODEL_KEY_MAX),
            "NVIDIA-H100-80GB-HBM3"
        );
    }

    /// The chip prefixes of the PCI ID database's NVIDIA names give the family the compute
    /// capability would: each pair is a database name and the capability NVML reports for it.
    #[test]
    fn families_from_chip_names() {
        for (name, (major, minor)) in [
            ("GF100GL [Tesla C2050 / C2070]", (2, 0)),
            ("GK110BGL [Tesla K40m]", (3, 5)),
            ("GM204GL [Tesla M60]", (5, 2)),
            ("GP100GL [Tesla P100 PCIe 16GB]", (6, 0)),
            ("GP107GL [Quadro P400]", (6, 1)),
            ("GV100GL [Tesla V100 SXM3 32GB]", (7, 0)),
            ("TU104GL [Tesla T4]", (7, 5)),
            ("GA100 [A100 SXM4 80GB]", (8, 0)),
            ("GA102GL [A10]", (8, 6)),
            ("AD102GL [L40S]", (8, 9)),
            ("GH100 [H100 SXM5 80GB]", (9, 0)),
            ("GB100 [B200]", (10, 0)),
            (
                "GB202GL [RTX PRO 6000 Blackwell Max-Q Workstation Edition]",
                (12, 0),
            ),
        ] {
            assert_eq!(
                nvidia_family_of_chip(name),
                Some(nvidia_family(major, minor)),
                "{name}"
            );
        }
        for name in [
            "GT200b [GeForce GTX 275]",
            "G92 [GeForce 9800 GT]",
            "NV40",
            "",
            "GH",
        ] {
            assert_eq!(nvidia_family_of_chip(name), None, "{name}");
        }
    }

    #[test]
    fn families() {
        assert_eq!(nvidia_family(9, 0), "hopper");
        assert_eq!(nvidia_family(8, 0), "ampere");
        assert_eq!(nvidia_family(8, 6), "ampere");
        assert_eq!(nvidia_family(8, 9), "ada-lovelace");
        assert_eq!(nvidia_family(7, 5), "turing");
        assert_eq!(nvidia_family(7, 0), "volta");
        assert_eq!(nvidia_family(10, 0), "blackwell");
        assert_eq!(nvidia_family(11, 0), "blackwell");
        assert_eq!(nvidia_family(12, 0), "blackwell");
        assert_eq!(nvidia_family(12, 1), "blackwell");
        assert_eq!(nvidia_family(13, 0), "rubin");
        assert_eq!(nvidia_family(14, 0), "undefined");
        assert_eq!(nvidia_family(4, 0), "undefined");
    }
}
