//! NVIDIA GPUs through NVML, loaded at run time with `nvml-wrapper`.
//!
//! `NvmlProbe` is the seam in front of the foreign library: the real `NvmlLibrary` holds one
//! `Nvml` per process and retries a failed init on the next scan; each scan copies what it needs
//! into owned structs. NVML being absent or failing is a status, never an error: the GPUs are
//! still discovered from sysfs.
//!
//! Each GPU's health faults (`NvmlGpu.faults`: ecc, remap, xid, nvlink, fabric, thermal;
//! docs/health.md) are read on every scan and light check. What they need across scans lives in
//! the `NvmlLibrary` (the NVLinks seen up, the critical XIDs an event thread records from an
//! event set kept open for the life of the process), so it only works in a long-lived process:
//! NVML's child.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;
use serde::{Deserialize, Serialize};

use super::pci::PciAddress;

/// The reason of the `Unavailable` status when NVML is turned off (`--no-nvml`, `enabled: false`).
pub const DISABLED: &str = "disabled";

/// The library name the loader searches for by default.
pub const DEFAULT_LIB: &str = "libnvidia-ml.so.1";

/// How NVML went on this scan: `gpu.node.nvml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NvmlStatus {
    Ok,
    /// Disabled, not installed, or the driver is not loaded.
    Unavailable(String),
    /// Loaded but failed.
    Error(String),
    /// NVML failed on this scan (the reason); the GPUs are its last good answer, kept for the
    /// grace period (`sources.nvml.gracePeriod`).
    Stale(String),
}

impl NvmlStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            NvmlStatus::Ok => "ok",
            NvmlStatus::Unavailable(_) => "unavailable",
            NvmlStatus::Error(_) => "error",
            NvmlStatus::Stale(_) => "stale",
        }
    }
}

/// One MIG device, as NVML describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlMigDevice {
    pub uuid: Option<String>,
    pub memory_size_mb: u64,
    pub multiprocessors: u32,
    pub slices_gi: u32,
    pub slices_ci: u32,
    pub engines_copy: u32,
    pub engines_decoder: u32,
    pub engines_encoder: u32,
    pub engines_jpeg: u32,
    pub engines_ofa: u32,
    /// The GPU instance profile (`NVML_GPU_INSTANCE_PROFILE_*`, e.g. 7 for `1_SLICE_REV1`, the
    /// `+me` one), when NVML says: it decides the profile name's `+me`/`-me`/`+gfx` suffix.
    pub gi_profile: Option<u32>,
    /// The compute instance profile (`NVML_COMPUTE_INSTANCE_PROFILE_*`, e.g. 0 for `1_SLICE`),
    /// when NVML says: it decides the `<c>c.` of `1c.3g.20gb`.
    #[serde(default)]
    pub ci_profile: Option<u32>,
}

/// A GPU's place in a multi-node NVLink domain (`nvmlDeviceGetGpuFabricInfo`), given only when
/// the GPU is attached as go-nvlib's `IsFabricAttached` has it: registration completed and
/// succeeded, and a cluster UUID that is not all zero (single-node NVSwitch systems have none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlFabric {
    /// Lower-case, hyphenated (`9277d399-0674-44a9-b64e-d85bb19ce2b0`).
    pub cluster_uuid: String,
    pub clique_id: u32,
}

/// One GPU, as NVML describes it. `None` fields: NVML could not say (older driver, not supported).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NvmlGpu {
    pub index: u32,
    pub address: Option<PciAddress>,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub memory_bytes: Option<u64>,
    pub compute: Option<(i32, i32)>,
    /// `Some(current)` when the GPU supports MIG.
    pub mig_enabled: Option<bool>,
    pub vgpu_guest: Option<bool>,
    pub mig_devices: Vec<NvmlMigDevice>,
    /// How many of its NVLinks are active: `Some(0)` for a GPU without NVLink (NVML: not
    /// supported), `None` when NVML could not say.
    #[serde(default)]
    pub nvlinks_active: Option<u32>,
    #[serde(default)]
    pub fabric: Option<NvmlFabric>,
    /// The PCI addresses of the GPUs at the far end of its active NVLinks
    /// (`nvmlDeviceGetNvLinkRemoteDeviceType` GPU, `nvmlDeviceGetNvLinkRemotePciInfo_v2`),
    /// ascending, each once; empty without NVLink peers (an NVSwitch is no peer).
    #[serde(default)]
    pub nvlink_peers: Vec<PciAddress>,
    /// What NVML says is wrong with this GPU now (`gpu.device` `health`), in the order of
    /// [`NvmlFault::KINDS`]; empty when nothing is.
    #[serde(default)]
    pub faults: Vec<NvmlFault>,
}

/// One health fault NVML reports for a GPU: its kind (one of [`NvmlFault::KINDS`]) and the
/// detail the `health_<kind>` attribute carries.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NvmlFault {
    pub kind: String,
    pub detail: String,
}

impl NvmlFault {
    /// The kinds NVML reports, in the order `health` lists them.
    pub const KINDS: [&'static str; 6] = ["ecc", "remap", "xid", "nvlink", "fabric", "thermal"];
}

/// A GPU NVML counts but answers `GPU is lost` for (fallen off the bus, a handle that worked
/// before failing now): `gpu.device` marks it `lost`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlLostGpu {
    /// NVML's index.
    pub index: u32,
    /// Its PCI address, when an earlier scan of this process read it (NVML cannot say now).
    pub address: Option<PciAddress>,
}

/// What one scan found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmlScan {
    pub status: NvmlStatus,
    pub driver_version: Option<String>,
    /// `12.2`.
    pub cuda_version: Option<String>,
    pub gpus: Vec<NvmlGpu>,
    pub warnings: Vec<String>,
    /// GPUs NVML counts but answers `GPU is lost` for; they are not in `gpus`.
    #[serde(default)]
    pub lost: Vec<NvmlLostGpu>,
}

impl NvmlScan {
    pub fn unavailable(reason: impl Into<String>) -> Self {
        NvmlScan {
            status: NvmlStatus::Unavailable(reason.into()),
            driver_version: None,
            cuda_version: None,
            gpus: Vec::new(),
            warnings: Vec::new(),
            lost: Vec::new(),
        }
    }
}

/// What the health checks need from the config (`sources.health`): the XIDs that count as
/// critical, and how long an XID fault is reported after the XID was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlHealth {
    pub critical_xids: Vec<u32>,
    pub clear_after: Duration,
}

impl Default for NvmlHealth {
    fn default() -> Self {
        NvmlHealth::from(&crate::config::HealthConfig::default())
    }
}

impl From<&crate::config::HealthConfig> for NvmlHealth {
    fn from(h: &crate::config::HealthConfig) -> Self {
        let mut critical_xids = h.critical_xids.clone();
        critical_xids.sort_unstable();
        critical_xids.dedup();
        NvmlHealth {
            critical_xids,
            clear_after: h.clear_after,
        }
    }
}

/// The seam in front of NVML.
pub trait NvmlProbe {
    fn scan(&mut self) -> NvmlScan;
}

/// Which library to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvmlChoice {
    Disabled,
    Library(PathBuf),
}

/// The real NVML: one `Nvml` per process, initialised lazily and retried while it fails.
///
/// The `Nvml` is leaked once initialised: the XID event thread borrows it for the life of the
/// process (NVML's child process, which ends with the agent), and NVML is not shut down.
pub struct NvmlLibrary {
    choice: NvmlChoice,
    nvml: Option<&'static Nvml>,
    health: NvmlHealth,
    tracker: HealthTracker,
}

impl NvmlLibrary {
    pub fn new(choice: NvmlChoice) -> Self {
        NvmlLibrary::with_health(choice, NvmlHealth::default())
    }

    pub fn with_health(choice: NvmlChoice, health: NvmlHealth) -> Self {
        NvmlLibrary {
            choice,
            nvml: None,
            health,
            tracker: HealthTracker::default(),
        }
    }

    fn init(&mut self) -> Result<&'static Nvml, NvmlStatus> {
        if self.nvml.is_none() {
            let path = match &self.choice {
                NvmlChoice::Disabled => {
                    return Err(NvmlStatus::Unavailable(DISABLED.into()));
                }
                NvmlChoice::Library(p) => OsString::from(p.as_os_str()),
            };
            let nvml = Nvml::builder()
                .lib_path(&path)
                .init()
                .map_err(|e| init_status(&path, e))?;
            let nvml: &'static Nvml = Box::leak(Box::new(nvml));
            self.nvml = Some(nvml);
            if !self.health.critical_xids.is_empty() {
                self.tracker
                    .watch_xids(nvml, self.health.critical_xids.clone());
            }
        }
        Ok(self.nvml.expect("initialised above"))
    }
}

impl Drop for NvmlLibrary {
    fn drop(&mut self) {
        // The event thread ends at its next wake (a wait is bounded by `XID_WAIT_MS`).
        self.tracker.stop.store(true, Ordering::Relaxed);
    }
}

fn init_status(path: &OsString, e: NvmlError) -> NvmlStatus {
    let lib = path.to_string_lossy();
    match e {
        // A file that is there but does not load (not a library, wrong architecture, missing
        // dependencies) is an operator's mistake worth a warning; a library that is absent
        // (no driver yet, not an NVIDIA node) is not.
        NvmlError::LibloadingError(err) if lib.contains('/') && Path::new(path).is_file() => {
            // dlerror's text starts with the path again.
            let err = err.to_string();
            let why = err.strip_prefix(&format!("{lib}: ")).unwrap_or(&err);
            NvmlStatus::Error(format!("cannot load {lib}: {why}"))
        }
        NvmlError::LibloadingError(err) => {
            NvmlStatus::Unavailable(format!("cannot load {lib}: {err}"))
        }
        NvmlError::DriverNotLoaded | NvmlError::LibraryNotFound => {
            NvmlStatus::Unavailable(format!("{lib}: {e}"))
        }
        other => NvmlStatus::Error(format!("{lib}: init failed: {other}")),
    }
}

impl NvmlProbe for NvmlLibrary {
    fn scan(&mut self) -> NvmlScan {
        let nvml = match self.init() {
            Ok(n) => n,
            Err(status) => {
                return NvmlScan {
                    status,
                    ..NvmlScan::unavailable("")
                };
            }
        };
        scan_nvml(nvml, &self.health, &mut self.tracker)
    }
}

impl NvmlLibrary {
    /// The light check: only the state that changes while a node runs (how many GPUs answer,
    /// each one's MIG mode, its MIG devices' slices and memory, its fabric registration), as one
    /// line of text to compare with the last. A few calls per GPU, against a whole scan's
    /// dozens.
    pub fn check(&mut self) -> String {
        let nvml = match self.init() {
            Ok(n) => n,
            Err(_) => return "unavailable".into(),
        };
        let count = match nvml.device_count() {
            Ok(c) => c,
            Err(e) => return format!("error: {e}"),
        };
        let mut out = format!("{count}");
        for index in 0..count {
            out.push_str(&format!(";{index}:"));
            let dev = match nvml.device_by_index(index) {
                Ok(d) => d,
                Err(e) => {
                    out.push_str(&format!("lost ({e})"));
                    continue;
                }
            };
            match dev.mig_mode() {
                Ok(m) if m.current == 1 => {
                    out.push_str("mig[");
                    let max = dev.mig_device_count().unwrap_or(0);
                    for i in 0..max {
                        if let Ok(a) = dev.mig_device_by_index(i).and_then(|m| m.attributes()) {
                            out.push_str(&format!(
                                "{}/{}/{},",
                                a.gpu_instance_slice_count,
                                a.compute_instance_slice_count,
                                a.memory_size_mb
                            ));
                        }
                    }
                    out.push(']');
                }
                Ok(m) => out.push_str(&format!("mig-off(pending {})", m.pending)),
                Err(_) => out.push('-'),
            }
            // The fabric registers after boot (the fabric manager): the clique appears then.
            if let Some(Ok(f)) = fabric_info(nvml, &dev) {
                out.push_str(&format!(
                    " fabric {}/{}/{}.{}",
                    f.state,
                    f.status,
                    uuid_text(&f.clusterUuid),
                    f.cliqueId
                ));
            }
            // Faults come and go while the node runs (an XID, a link down, a slowdown).
            let key = gpu_key(index, dev.uuid().ok().as_deref());
            let links = nvlink_states(&dev, &mut Vec::new());
            let mut ignored = Vec::new();
            let faults = read_faults(
                nvml,
                &dev,
                &key,
                links.as_deref(),
                &self.health,
                &mut self.tracker,
                false,
                &mut ignored,
            );
            for f in faults {
                out.push_str(&format!(" {}={}", f.kind, f.detail));
            }
        }
        out
    }
}

/// An NVML value that may be unsupported on this GPU or driver: unsupported is `None` quietly,
/// any other error is `None` with a warning.
fn optional<T>(what: &str, r: Result<T, NvmlError>, warnings: &mut Vec<String>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(
            NvmlError::NotSupported
            | NvmlError::FunctionNotFound
            | NvmlError::FailedToLoadSymbol(_)
            | NvmlError::NotFound,
        ) => None,
        Err(e) => {
            warnings.push(format!("NVML {what}: {e}"));
            None
        }
    }
}

/// `nvmlSystemGetCudaDriverVersion_v2`, else the v1 function that drivers before R450 export
/// alone (same answer: 1000 x major + 10 x minor).
fn cuda_driver_version(nvml: &Nvml) -> Result<i32, NvmlError> {
    match nvml.sys_cuda_driver_version() {
        Err(NvmlError::FailedToLoadSymbol(_) | NvmlError::FunctionNotFound) => {
            let v1 = nvml
                .lib()
                .nvmlSystemGetCudaDriverVersion
                .as_ref()
                .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
            let mut version = 0;
            // SAFETY: the symbol comes from the loaded library with nvml.h's signature
            // (bindgen); the out-parameter is a local c_int.
            nvml_wrapper::error::nvml_try(unsafe { v1(&mut version) })?;
            Ok(version)
        }
        other => other,
    }
}

fn scan_nvml(nvml: &Nvml, health: &NvmlHealth, tracker: &mut HealthTracker) -> NvmlScan {
    let mut warnings = Vec::new();
    let driver_version = optional("driver version", nvml.sys_driver_version(), &mut warnings);
    let cuda_version = optional(
        "CUDA driver version",
        cuda_driver_version(nvml),
        &mut warnings,
    )
    .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
    let count = match nvml.device_count() {
        Ok(c) => c,
        Err(e) => {
            return NvmlScan {
                status: NvmlStatus::Error(format!("device count: {e}")),
                driver_version,
                cuda_version,
                gpus: Vec::new(),
                warnings,
                lost: Vec::new(),
            };
        }
    };
    let mut gpus = Vec::new();
    let mut lost = Vec::new();
    for index in 0..count {
        // One failing GPU (e.g. "GPU is lost") does not stop the others.
        let read = nvml
            .device_by_index(index)
            .and_then(|dev| read_gpu(nvml, index, &dev, health, tracker, &mut warnings));
        match read {
            Ok(gpu) => {
                if let Some(a) = gpu.address {
                    tracker.addresses.insert(index, a);
                }
                gpus.push(gpu);
            }
            Err(e) => {
                let message = format!("NVML GPU {index}: {e}; left to sysfs");
                if tracker.failing_anew(index, &message, health.clear_after) {
                    warnings.push(message);
                }
                if matches!(e, NvmlError::GpuLost) {
                    lost.push(NvmlLostGpu {
                        index,
                        address: tracker.addresses.get(&index).copied(),
                    });
                }
            }
        }
    }
    // What the health checks and the XID thread have to say about the driver.
    warnings.extend(tracker.take_notes());
    NvmlScan {
        status: NvmlStatus::Ok,
        driver_version,
        cuda_version,
        gpus,
        warnings,
        lost,
    }
}

/// One GPU. `Err` only when the GPU is lost (its PCI info answers `GPU is lost`: a handle that
/// worked before); any other failing value is `None` with a warning.
fn read_gpu(
    nvml: &Nvml,
    index: u32,
    dev: &nvml_wrapper::Device,
    health: &NvmlHealth,
    tracker: &mut HealthTracker,
    warnings: &mut Vec<String>,
) -> Result<NvmlGpu, NvmlError> {
    let mut w = Vec::new();
    let pci = match dev.pci_info() {
        Err(NvmlError::GpuLost) => return Err(NvmlError::GpuLost),
        other => other,
    };
    let address = optional("PCI info", pci, &mut w).and_then(|p| {
        parse_bus_id(&p.bus_id).or(Some(PciAddress {
            domain: p.domain,
            bus: p.bus as u8,
            device: p.device as u8,
            function: 0,
        }))
    });
    let mig = optional("MIG mode", dev.mig_mode(), &mut w);
    let mig_enabled = mig.map(|m| m.current == 1);
    let uuid = optional("UUID", dev.uuid(), &mut w);
    let links = nvlink_states(dev, &mut w);
    let key = gpu_key(index, uuid.as_deref());
    let faults = read_faults(
        nvml,
        dev,
        &key,
        links.as_deref(),
        health,
        tracker,
        true,
        &mut w,
    );
    let mut gpu = NvmlGpu {
        index,
        address,
        name: optional("name", dev.name(), &mut w),
        uuid,
        memory_bytes: optional("memory", dev.memory_info(), &mut w).map(|m| m.total),
        compute: optional("compute capability", dev.cuda_compute_capability(), &mut w)
            .map(|c| (c.major, c.minor)),
        mig_enabled,
        vgpu_guest: optional("virtualization mode", dev.virtualization_mode(), &mut w).map(|m| {
            matches!(
                m,
                nvml_wrapper::enum_wrappers::device::GpuVirtualizationMode::Vgpu
            )
        }),
        mig_devices: Vec::new(),
        nvlinks_active: links
            .as_ref()
            .map(|l| l.iter().filter(|up| **up).count() as u32),
        faults,
        fabric: fabric(nvml, dev, &mut w),
        nvlink_peers: nvlink_peers(nvml, dev, links.as_deref()),
    };
    if mig_enabled == Some(true) {
        let max = optional("MIG device count", dev.mig_device_count(), &mut w).unwrap_or(0);
        for i in 0..max {
            if let Some(m) = read_mig(nvml, dev, i, &mut w) {
                gpu.mig_devices.push(m);
            }
        }
    }
    warnings.extend(w.into_iter().map(|m| format!("GPU {index}: {m}")));
    Ok(gpu)
}

/// MIG device slot `i`. Slots may be empty, and a MIG device may vanish between listing and
/// reading (reconfigured by mig-parted, say): both are skipped quietly; other failures warn.
fn read_mig(
    nvml: &Nvml,
    parent: &nvml_wrapper::Device,
    i: u32,
    w: &mut Vec<String>,
) -> Option<NvmlMigDevice> {
    let vanished = |e: &NvmlError| matches!(e, NvmlError::NotFound | NvmlError::InvalidArg);
    let mig = match parent.mig_device_by_index(i) {
        Ok(m) => m,
        Err(e) if vanished(&e) => return None,
        Err(e) => {
            w.push(format!("MIG device {i}: {e}"));
            return None;
        }
    };
    let profiles = mig_profile_ids(nvml, parent, &mig);
    let a = match mig.attributes() {
        Ok(a) => a,
        Err(e) if vanished(&e) => {
            tracing::debug!("MIG device {i} vanished while being read: {e}");
            return None;
        }
        Err(e) => {
            optional::<()>(&format!("MIG device {i} attributes"), Err(e), w);
            return None;
        }
    };
    Some(NvmlMigDevice {
        uuid: mig.uuid().ok(),
        memory_size_mb: a.memory_size_mb,
        multiprocessors: a.multiprocessor_count,
        slices_gi: a.gpu_instance_slice_count,
        slices_ci: a.compute_instance_slice_count,
        engines_copy: a.shared_copy_engine_count,
        engines_decoder: a.shared_decoder_count,
        engines_encoder: a.shared_encoder_count,
        engines_jpeg: a.shared_jpeg_count,
        engines_ofa: a.shared_ofa_count,
        gi_profile: profiles.map(|(gi, _)| gi),
        ci_profile: profiles.and_then(|(_, ci)| ci),
    })
}

/// `NVML_NVLINK_MAX_LINKS`.
const NVLINK_MAX_LINKS: u32 = 18;

/// Each NVLink's state (`true`: active), as `nvidia-smi nvlink -s` lists them: links `0..`
/// until NVML says the index is past the GPU's links. A GPU without NVLink answers not
/// supported: no links. `None` when NVML could not say.
fn nvlink_states(dev: &nvml_wrapper::Device, w: &mut Vec<String>) -> Option<Vec<bool>> {
    let mut links = Vec::new();
    for link in 0..NVLINK_MAX_LINKS {
        match dev.link_wrapper_for(link).is_active() {
            Ok(up) => links.push(up),
            Err(NvmlError::InvalidArg | NvmlError::NotSupported) => break,
            Err(e) => {
                optional::<()>(&format!("NVLink {link} state"), Err(e), w);
                return None;
            }
        }
    }
    Some(links)
}

/// `NVML_NVLINK_DEVICE_TYPE_GPU` (`nvmlIntNvLinkDeviceType_t`).
const NVLINK_DEVICE_TYPE_GPU: u32 = 0;

/// The GPUs at the far end of the active links (`links`, as [`nvlink_states`] read them): a
/// link whose remote device type NVML says is a GPU (not an NVSwitch or an NPU), by the remote
/// PCI address. Quiet: a link NVML cannot say this of, or a library without
/// `nvmlDeviceGetNvLinkRemoteDeviceType` (R450+), is no peer, and no peer is no fault by itself
/// (the `missing` check reads them: docs/health.md).
fn nvlink_peers(
    nvml: &Nvml,
    dev: &nvml_wrapper::Device,
    links: Option<&[bool]>,
) -> Vec<PciAddress> {
    let Some(links) = links else {
        return Vec::new();
    };
    let Ok(remote_type) = nvml.lib().nvmlDeviceGetNvLinkRemoteDeviceType.as_ref() else {
        return Vec::new();
    };
    let mut peers = BTreeSet::new();
    for (link, _) in links.iter().enumerate().filter(|(_, up)| **up) {
        let link = link as u32;
        // SAFETY: the symbol comes from the loaded library with nvml.h's signature (bindgen);
        // the handle is live for the scan; the out-parameter is a local of the named type.
        let kind = unsafe {
            let mut kind: nvml_wrapper_sys::bindings::nvmlIntNvLinkDeviceType_t = 0;
            nvml_wrapper::error::nvml_try(remote_type(dev.handle(), link, &mut kind)).map(|()| kind)
        };
        if kind.ok() != Some(NVLINK_DEVICE_TYPE_GPU) {
            continue;
        }
        if let Some(a) = dev
            .link_wrapper_for(link)
            .remote_pci_info()
            .ok()
            .and_then(|p| parse_bus_id(&p.bus_id))
        {
            peers.insert(a);
        }
    }
    peers.into_iter().collect()
}

/// `NVML_GPU_FABRIC_STATE_COMPLETED`.
const FABRIC_STATE_COMPLETED: u8 = 3;

/// `nvmlDeviceGetGpuFabricInfo` (R530 and later; nvml-wrapper does not wrap it): `None` when
/// the library lacks the symbol.
fn fabric_info(
    nvml: &Nvml,
    dev: &nvml_wrapper::Device,
) -> Option<Result<nvml_wrapper_sys::bindings::nvmlGpuFabricInfo_t, NvmlError>> {
    let get = nvml.lib().nvmlDeviceGetGpuFabricInfo.as_ref().ok()?;
    // SAFETY: the symbol comes from the loaded library with nvml.h's signature (bindgen); the
    // handle is live for the scan; the out-parameter is a zeroed local of the named type.
    Some(unsafe {
        let mut info: nvml_wrapper_sys::bindings::nvmlGpuFabricInfo_t = std::mem::zeroed();
        nvml_wrapper::error::nvml_try(get(dev.handle(), &mut info)).map(|()| info)
    })
}

/// The GPU's fabric, when it is attached to a multi-node NVLink domain.
fn fabric(nvml: &Nvml, dev: &nvml_wrapper::Device, w: &mut Vec<String>) -> Option<NvmlFabric> {
    let info = optional("fabric info", fabric_info(nvml, dev)?, w)?;
    let attached =
        info.state == FABRIC_STATE_COMPLETED && info.status == 0 && info.clusterUuid != [0; 16];
    attached.then(|| NvmlFabric {
        cluster_uuid: uuid_text(&info.clusterUuid),
        clique_id: info.cliqueId,
    })
}

/// 16 bytes as a UUID's text (`8-4-4-4-12` lower-case hex digits).
fn uuid_text(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// `NVML_GPU_INSTANCE_PROFILE_COUNT` of current drivers: profile indices are `0..18`.
pub const GPU_INSTANCE_PROFILE_COUNT: u32 = 18;
/// `NVML_COMPUTE_INSTANCE_PROFILE_COUNT` and `NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT`.
const COMPUTE_INSTANCE_PROFILE_COUNT: u32 = 8;
const COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT: u32 = 1;

/// The GPU instance profile and compute instance profile (`NVML_GPU_INSTANCE_PROFILE_*` and
/// `NVML_COMPUTE_INSTANCE_PROFILE_*` indices) of a MIG device, found as go-nvlib's
/// `MigDevice.GetProfile` finds them: the GPU and compute instances by id, their profile ids,
/// matched against the parent's GPU instance profile table and that instance's compute instance
/// profile table. nvml-wrapper does not wrap these calls; the library's own symbols are used,
/// each checked for presence first (`nvmlComputeInstanceGetInfo_v2`, else the v1 symbol, as
/// go-nvml falls back). `None` when the GPU instance's profile cannot be found (an older driver,
/// no MIG monitor permission): the name is then built from the device's attributes alone; the
/// compute instance's profile is `None` on its own when only its steps fail, and its slice
/// count then comes from the attributes.
fn mig_profile_ids(
    nvml: &Nvml,
    parent: &nvml_wrapper::Device,
    mig: &nvml_wrapper::Device,
) -> Option<(u32, Option<u32>)> {
    const SUCCESS: u32 = 0;
    let lib = nvml.lib();
    let instance_id = lib.nvmlDeviceGetGpuInstanceId.as_ref().ok()?;
    let instance_by_id = lib.nvmlDeviceGetGpuInstanceById.as_ref().ok()?;
    let instance_info = lib.nvmlGpuInstanceGetInfo.as_ref().ok()?;
    let profile_info = lib.nvmlDeviceGetGpuInstanceProfileInfo.as_ref().ok()?;
    // SAFETY: the symbols come from the loaded library with nvml.h's signatures (bindgen); the
    // handles are live for the duration of the scan; every out-parameter is a local of the
    // type the signature names, zero-initialised plain C data.
    unsafe {
        let (parent, mig) = (parent.handle(), mig.handle());
        let mut gi_id = 0;
        if instance_id(mig, &mut gi_id) != SUCCESS {
            return None;
        }
        let mut gi = std::ptr::null_mut();
        if instance_by_id(parent, gi_id, &mut gi) != SUCCESS || gi.is_null() {
            return None;
        }
        let mut info = std::mem::zeroed();
        if instance_info(gi, &mut info) != SUCCESS {
            return None;
        }
        let profile_id: u32 = info.profileId;
        let gi_profile = (0..GPU_INSTANCE_PROFILE_COUNT).find(|&p| {
            let mut pi = std::mem::zeroed();
            profile_info(parent, p, &mut pi) == SUCCESS && pi.id == profile_id
        })?;
        Some((gi_profile, compute_instance_profile(lib, gi, mig)))
    }
}

/// The compute instance profile index of MIG device `mig` in GPU instance `gi`.
///
/// # Safety
/// `gi` and `mig` are live handles of the loaded library.
unsafe fn compute_instance_profile(
    lib: &nvml_wrapper_sys::bindings::NvmlLib,
    gi: nvml_wrapper_sys::bindings::nvmlGpuInstance_t,
    mig: nvml_wrapper_sys::bindings::nvmlDevice_t,
) -> Option<u32> {
    const SUCCESS: u32 = 0;
    let ci_id_of = lib.nvmlDeviceGetComputeInstanceId.as_ref().ok()?;
    let ci_by_id = lib.nvmlGpuInstanceGetComputeInstanceById.as_ref().ok()?;
    let ci_info = lib
        .nvmlComputeInstanceGetInfo_v2
        .as_ref()
        .or(lib.nvmlComputeInstanceGetInfo.as_ref())
        .ok()?;
    let ci_profile_info = lib
        .nvmlGpuInstanceGetComputeInstanceProfileInfo
        .as_ref()
        .ok()?;
    // SAFETY: as in `mig_profile_ids`: the library's own symbols, live handles, zeroed locals.
    unsafe {
        let mut ci_id = 0;
        if ci_id_of(mig, &mut ci_id) != SUCCESS {
            return None;
        }
        let mut ci = std::ptr::null_mut();
        if ci_by_id(gi, ci_id, &mut ci) != SUCCESS || ci.is_null() {
            return None;
        }
        let mut info = std::mem::zeroed();
        if ci_info(ci, &mut info) != SUCCESS {
            return None;
        }
        let profile_id: u32 = info.profileId;
        (0..COMPUTE_INSTANCE_PROFILE_COUNT).find(|&p| {
            (0..COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT).any(|e| {
                let mut pi = std::mem::zeroed();
                ci_profile_info(gi, p, e, &mut pi) == SUCCESS && pi.id == profile_id
            })
        })
    }
}

// ---- Health: the faults NVML reports (docs/health.md) ----

/// How long one `nvmlEventSetWait` may block the XID thread: its stop flag is looked at this
/// often, and a driver that answers errors is asked again no sooner.
const XID_WAIT_MS: u32 = 500;

/// How often the XID event thread looks for GPUs it has not registered yet.
const XID_REGISTER_EVERY: Duration = Duration::from_secs(5);

/// The longest wait before a failed XID registration is asked again.
const XID_REGISTER_MAX: Duration = Duration::from_secs(300);

/// How long after its `tries`-th failure an XID registration is asked again:
/// `XID_REGISTER_EVERY`, doubling with each failure, at most `XID_REGISTER_MAX` (a driver may
/// fail it for a while, e.g. `NVML_ERROR_UNKNOWN` while the GPU comes up).
fn xid_register_backoff(tries: u32) -> Duration {
    XID_REGISTER_EVERY
        .saturating_mul(1 << tries.saturating_sub(1).min(16))
        .min(XID_REGISTER_MAX)
}

/// A GPU whose XID registration failed: how often, the last error, when to ask again.
struct FailedRegistration {
    tries: u32,
    error: u32,
    next: Instant,
}

/// `nvmlEventTypeXidCriticalError`.
const EVENT_XID: u64 = 0x8;
/// `NVML_ERROR_NOT_SUPPORTED`.
const NVML_NOT_SUPPORTED: u32 = 3;
/// `NVML_ERROR_TIMEOUT`.
const NVML_TIMEOUT: u32 = 10;

/// The clocks event reasons that are a fault (`thermal`), as nvidia-smi lists them; idle,
/// applications clocks, the software power cap, sync boost and the display clock are not.
const SLOWDOWNS: [(u64, &str); 4] = [
    (0x8, "hw-slowdown"),
    (0x40, "hw-thermal-slowdown"),
    (0x80, "hw-power-brake-slowdown"),
    (0x20, "sw-thermal-slowdown"),
];

/// One critical XID as the event thread saw it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    at: Instant,
    /// A scan reported it: from now on it is reported only while within `clear_after`.
    reported: bool,
}

/// What the XID event thread records: the critical XIDs by GPU (`gpu_key`) and XID, and its
/// own warnings for the next scan.
#[derive(Debug, Default)]
struct XidLog {
    seen: HashMap<String, BTreeMap<u32, Seen>>,
    notes: Vec<String>,
}

/// What the health checks keep between scans of one process.
#[derive(Debug, Default)]
struct HealthTracker {
    /// The NVLinks seen active so far, by GPU: one down now is a fault.
    ever_up: HashMap<String, BTreeSet<u32>>,
    xids: Arc<Mutex<XidLog>>,
    stop: Arc<AtomicBool>,
    /// Warnings said already (a check this driver cannot do is said once).
    said: BTreeSet<String>,
    /// GPUs' PCI addresses by NVML index, from earlier scans (for `lost`).
    addresses: HashMap<u32, PciAddress>,
    /// GPUs NVML failed to answer for, by index: the warning said, and when it last failed.
    failing: HashMap<u32, (String, Instant)>,
}

impl HealthTracker {
    fn log(&self) -> std::sync::MutexGuard<'_, XidLog> {
        self.xids.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.log().notes)
    }

    /// Whether GPU `index` failing with `message` is news: not when it failed with the same
    /// message less than `hold` ago, so that a GPU lost and back every second is said lost
    /// once, as its `lost` fault is held (`sources.health.clearAfter`), not every scan.
    fn failing_anew(&mut self, index: u32, message: &str, hold: Duration) -> bool {
        let now = Instant::now();
        let anew = !self
            .failing
            .get(&index)
            .is_some_and(|(said, at)| said == message && now.saturating_duration_since(*at) < hold);
        self.failing.insert(index, (message.to_string(), now));
        anew
    }

    /// `message` once for the life of the process, with the next scan's warnings (about the
    /// driver, not one GPU).
    fn once(&mut self, message: String) {
        if self.said.insert(message.clone()) {
            self.log().notes.push(message);
        }
    }

    /// Starts the thread that keeps an NVML event set open for the life of the process and
    /// records the critical XIDs it delivers.
    fn watch_xids(&mut self, nvml: &'static Nvml, critical: Vec<u32>) {
        let log = self.xids.clone();
        let stop = self.stop.clone();
        let started = std::thread::Builder::new()
            .name("nvml-xid".into())
            .spawn(move || watch_xids(nvml, &critical, &log, &stop));
        if let Err(e) = started {
            self.log().notes.push(format!(
                "GPU health: cannot start the XID event thread: {e}"
            ));
        }
    }
}

/// A GPU's key in the health state: its UUID, else its index.
fn gpu_key(index: u32, uuid: Option<&str>) -> String {
    uuid.map_or_else(|| format!("#{index}"), str::to_string)
}

/// The error of a return code that is not `NVML_SUCCESS`.
fn nvml_error(rc: u32) -> NvmlError {
    nvml_wrapper::error::nvml_try(rc)
        .err()
        .unwrap_or(NvmlError::Unknown)
}

fn symbol_missing(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)
    )
}

/// The XID event thread: one event set for every GPU that supports critical XID events,
/// waited on `XID_WAIT_MS` at a time until `stop`. nvml-wrapper's `EventSet` borrows its
/// `Nvml` and has no v1 wait, so the library's own symbols are used: `nvmlEventSetWait_v2`,
/// else the `nvmlEventSetWait` of drivers before R450.
fn watch_xids(nvml: &'static Nvml, critical: &[u32], log: &Mutex<XidLog>, stop: &AtomicBool) {
    let note = |m: String| log.lock().unwrap_or_else(|e| e.into_inner()).notes.push(m);
    let lib = nvml.lib();
    let (Ok(create), Ok(register), Ok(free)) = (
        lib.nvmlEventSetCreate.as_ref(),
        lib.nvmlDeviceRegisterEvents.as_ref(),
        lib.nvmlEventSetFree.as_ref(),
    ) else {
        note("GPU health: this driver has no NVML events: the xid check is skipped".into());
        return;
    };
    let Ok(wait) = lib
        .nvmlEventSetWait_v2
        .as_ref()
        .or(lib.nvmlEventSetWait.as_ref())
    else {
        note("GPU health: this driver has no nvmlEventSetWait: the xid check is skipped".into());
        return;
    };
    let supported = lib.nvmlDeviceGetSupportedEventTypes.as_ref().ok();
    // SAFETY: the symbols come from the loaded library with nvml.h's signatures (bindgen); the
    // `Nvml` is never dropped, so device handles stay valid; out-parameters are zeroed locals
    // of the named types (the v2 `nvmlEventData_t`, larger than the v1 one).
    unsafe {
        let mut set: nvml_wrapper_sys::bindings::nvmlEventSet_t = std::ptr::null_mut();
        let rc = create(&mut set);
        if rc != 0 {
            note(format!(
                "GPU health: cannot create an NVML event set ({}): the xid check is skipped",
                nvml_error(rc)
            ));
            return;
        }
        // Registered GPUs by handle, and the handles that cannot be (no XID events): looked at
        // again every `XID_REGISTER_EVERY`, so that a GPU NVML starts listing while the child
        // runs (back after a reset, hot-plugged) is watched too. A registration that failed is
        // asked again with backoff (`xid_register_backoff`), each failure said once per GPU
        // per change of error: until it succeeds, that GPU's XIDs are not seen.
        let mut keys: HashMap<usize, String> = HashMap::new();
        let mut refused: HashSet<usize> = HashSet::new();
        let mut failed: HashMap<usize, FailedRegistration> = HashMap::new();
        let mut register_new = |keys: &mut HashMap<usize, String>| {
            let now = Instant::now();
            for index in 0..nvml.device_count().unwrap_or(0) {
                let Ok(dev) = nvml.device_by_index(index) else {
                    continue;
                };
                let handle = dev.handle();
                let id = handle as usize;
                if keys.contains_key(&id)
                    || refused.contains(&id)
                    || failed.get(&id).is_some_and(|f| now < f.next)
                {
                    continue;
                }
                if let Some(get) = supported {
                    let mut types = 0;
                    if get(handle, &mut types) == 0 && types & EVENT_XID == 0 {
                        refused.insert(id);
                        continue;
                    }
                }
                let key = gpu_key(index, dev.uuid().ok().as_deref());
                match register(handle, EVENT_XID, set) {
                    0 => {
                        if let Some(f) = failed.remove(&id) {
                            note(format!(
                                "GPU health: GPU {index} ({key}) registered for XID events after {} failed {}",
                                f.tries,
                                if f.tries == 1 { "try" } else { "tries" }
                            ));
                        }
                        keys.insert(id, key);
                    }
                    NVML_NOT_SUPPORTED => {
                        refused.insert(id);
                    }
                    rc => {
                        let f = failed.entry(id).or_insert(FailedRegistration {
                            tries: 0,
                            error: 0,
                            next: now,
                        });
                        f.tries += 1;
                        f.next = now + xid_register_backoff(f.tries);
                        if f.error != rc {
                            f.error = rc;
                            note(format!(
                                "GPU health: cannot register GPU {index} ({key}) for XID events: {}; \
                                 its XIDs are not seen until it is, asked again in {} s doubling to {} s",
                                nvml_error(rc),
                                xid_register_backoff(f.tries).as_secs(),
                                XID_REGISTER_MAX.as_secs()
                            ));
                        }
                    }
                }
            }
        };
        register_new(&mut keys);
        let mut registered_at = Instant::now();
        let mut failing: Option<u32> = None;
        while !stop.load(Ordering::Relaxed) {
            if registered_at.elapsed() >= XID_REGISTER_EVERY {
                register_new(&mut keys);
                registered_at = Instant::now();
            }
            let mut data: nvml_wrapper_sys::bindings::nvmlEventData_t = std::mem::zeroed();
            match wait(set, &mut data, XID_WAIT_MS) {
                0 => {
                    failing = None;
                    let xid = u32::try_from(data.eventData).unwrap_or(u32::MAX);
                    if data.eventType & EVENT_XID == 0 || critical.binary_search(&xid).is_err() {
                        continue;
                    }
                    let key = keys
                        .get(&(data.device as usize))
                        .cloned()
                        .unwrap_or_else(|| "#?".into());
                    let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                    log.seen.entry(key).or_default().insert(
                        xid,
                        Seen {
                            at: Instant::now(),
                            reported: false,
                        },
                    );
                }
                NVML_TIMEOUT => failing = None,
                rc => {
                    // Said once per change of error; asked again after a wait's length.
                    if failing != Some(rc) {
                        failing = Some(rc);
                        note(format!(
                            "GPU health: waiting for XID events: {}",
                            nvml_error(rc)
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(u64::from(XID_WAIT_MS)));
                }
            }
        }
        free(set);
    }
}

/// The faults of one GPU, in `NvmlFault::KINDS` order. `links` are its NVLinks' states now;
/// `mark`: this is a scan, whose report of an XID makes it clear after `clear_after` (the light
/// check only looks).
#[allow(clippy::too_many_arguments)]
fn read_faults(
    nvml: &Nvml,
    dev: &nvml_wrapper::Device,
    key: &str,
    links: Option<&[bool]>,
    health: &NvmlHealth,
    tracker: &mut HealthTracker,
    mark: bool,
    w: &mut Vec<String>,
) -> Vec<NvmlFault> {
    let mut faults = Vec::new();
    let mut fault = |kind: &str, detail: String| {
        faults.push(NvmlFault {
            kind: kind.into(),
            detail,
        })
    };
    let skipped = |tracker: &mut HealthTracker, kind: &str, what: &str| {
        tracker.once(format!(
            "GPU health: this driver lacks {what}: the {kind} check is skipped"
        ))
    };
    use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
    match dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile) {
        Ok(0) => {}
        Ok(n) => fault("ecc", format!("{n} volatile uncorrected")),
        Err(e) if symbol_missing(&e) => skipped(tracker, "ecc", "nvmlDeviceGetTotalEccErrors"),
        Err(e) => {
            optional::<()>("ECC errors", Err(e), w);
        }
    }
    if let Some(detail) = remap(nvml, dev, tracker, w) {
        fault("remap", detail);
    }
    let xids = xids(key, health, tracker, mark);
    if !xids.is_empty() {
        fault("xid", xids);
    }
    if let Some(links) = links {
        let up = tracker.ever_up.entry(key.to_string()).or_default();
        up.extend((0..).zip(links).filter(|(_, a)| **a).map(|(i, _)| i));
        let down: Vec<String> = up
            .iter()
            .filter(|&&i| !links.get(i as usize).copied().unwrap_or(false))
            .map(u32::to_string)
            .collect();
        match down.len() {
            0 => {}
            1 => fault("nvlink", format!("link {} down", down[0])),
            _ => fault("nvlink", format!("links {} down", down.join(","))),
        }
    }
    if let Some(detail) = fabric_fault(nvml, dev) {
        fault("fabric", detail);
    }
    match clocks_event_reasons(nvml, dev) {
        Ok(mask) => {
            let slow: Vec<&str> = SLOWDOWNS
                .iter()
                .filter(|(bit, _)| mask & bit != 0)
                .map(|(_, name)| *name)
                .collect();
            if !slow.is_empty() {
                fault("thermal", slow.join(","));
            }
        }
        Err(e) if symbol_missing(&e) => skipped(
            tracker,
            "thermal",
            "nvmlDeviceGetCurrentClocksEventReasons and nvmlDeviceGetCurrentClocksThrottleReasons",
        ),
        Err(e) => {
            optional::<()>("clocks event reasons", Err(e), w);
        }
    }
    faults
}

/// The fabric health conditions of `nvmlGpuFabricInfo_v2/3_t.healthMask` (nvml.h
/// `NVML_GPU_FABRIC_HEALTH_MASK_*`): shift, value mask, and the name of a `TRUE` (1).
const FABRIC_HEALTH: [(u32, u32, &str); 4] = [
    (0, 0x3, "degraded-bandwidth"),
    (2, 0x3, "route-recovery"),
    (4, 0x3, "route-unhealthy"),
    (6, 0x3, "access-timeout-recovery"),
];
/// `INCORRECT_CONFIGURATION` (shift 8, values 2-5 are faults) by value.
const FABRIC_MISCONFIGURED: [(u32, &str); 4] = [
    (2, "incorrect-sysguid"),
    (3, "incorrect-chassis-sn"),
    (4, "no-partition"),
    (5, "insufficient-nvlinks"),
];

/// `fabric`: registration completed but failed (`failed: <NVML's status text>`), or completed
/// and succeeded with a health mask that names a condition (`degraded: <conditions>`; through
/// `nvmlDeviceGetGpuFabricInfoV`, R550 and later). A fabric still registering is not a fault.
fn fabric_fault(nvml: &Nvml, dev: &nvml_wrapper::Device) -> Option<String> {
    if let Some(Ok(info)) = fabric_info(nvml, dev)
        && info.state == FABRIC_STATE_COMPLETED
        && info.status != 0
    {
        return Some(format!("failed: {}", error_text(nvml, info.status)));
    }
    let get = nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref().ok()?;
    type V3 = nvml_wrapper_sys::bindings::nvmlGpuFabricInfo_v3_t;
    type V2 = nvml_wrapper_sys::bindings::nvmlGpuFabricInfo_v2_t;
    const MISMATCH: u32 = 25; // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    let mut info: V3;
    // SAFETY: nvml.h's signature; a live handle; a zeroed v3 struct (the larger) with its
    // version set, v2's when the driver does not know v3.
    unsafe {
        info = std::mem::zeroed();
        info.version = (size_of::<V3>() as u32) | (3 << 24);
        let mut rc = get(dev.handle(), &mut info);
        if rc == MISMATCH {
            info = std::mem::zeroed();
            info.version = (size_of::<V2>() as u32) | (2 << 24);
            rc = get(dev.handle(), &mut info);
        }
        if rc != 0 {
            return None;
        }
    }
    if info.state != FABRIC_STATE_COMPLETED || info.status != 0 {
        return None;
    }
    let mut conditions: Vec<&str> = FABRIC_HEALTH
        .iter()
        .filter(|(shift, mask, _)| (info.healthMask >> shift) & mask == 1)
        .map(|(_, _, name)| *name)
        .collect();
    let config = (info.healthMask >> 8) & 0xF;
    conditions.extend(
        FABRIC_MISCONFIGURED
            .iter()
            .filter(|(v, _)| *v == config)
            .map(|(_, name)| *name),
    );
    (!conditions.is_empty()).then(|| format!("degraded: {}", conditions.join(",")))
}

/// `nvmlErrorString` of a status NVML reports as a value (the fabric's registration).
fn error_text(nvml: &Nvml, code: u32) -> String {
    match nvml.lib().nvmlErrorString.as_ref() {
        // SAFETY: nvml.h's signature; NVML returns a static NUL-terminated string (or null).
        Ok(f) => unsafe {
            let p = f(code);
            if p.is_null() {
                format!("NVML error {code}")
            } else {
                std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        },
        Err(_) => format!("NVML error {code}"),
    }
}

/// `nvmlDeviceGetCurrentClocksEventReasons` (R535), else the same mask under its older name.
fn clocks_event_reasons(nvml: &Nvml, dev: &nvml_wrapper::Device) -> Result<u64, NvmlError> {
    let lib = nvml.lib();
    let get = lib
        .nvmlDeviceGetCurrentClocksEventReasons
        .as_ref()
        .or(lib.nvmlDeviceGetCurrentClocksThrottleReasons.as_ref())
        .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
    let mut mask = 0;
    // SAFETY: nvml.h's signature (bindgen); a live handle; a local out-parameter.
    nvml_wrapper::error::nvml_try(unsafe { get(dev.handle(), &mut mask) })?;
    Ok(mask)
}

/// `remap`: row remapping failed or pending (`nvmlDeviceGetRemappedRows`, A100 and later), else,
/// where the GPU or driver has no row remapping, page retirement pending.
fn remap(
    nvml: &Nvml,
    dev: &nvml_wrapper::Device,
    tracker: &mut HealthTracker,
    w: &mut Vec<String>,
) -> Option<String> {
    let lib = nvml.lib();
    if let Ok(get) = lib.nvmlDeviceGetRemappedRows.as_ref() {
        let (mut corr, mut unc, mut pending, mut failed) = (0, 0, 0, 0);
        // SAFETY: nvml.h's signature (bindgen); a live handle; local out-parameters.
        let rc = unsafe { get(dev.handle(), &mut corr, &mut unc, &mut pending, &mut failed) };
        match nvml_wrapper::error::nvml_try(rc) {
            Ok(()) if failed != 0 => return Some("failed".into()),
            Ok(()) if pending != 0 => return Some("pending".into()),
            Ok(()) => return None,
            Err(e) if e_is_absent(&e) => {}
            Err(e) => {
                optional::<()>("remapped rows", Err(e), w);
                return None;
            }
        }
    }
    match dev.are_pages_pending_retired() {
        Ok(true) => Some(match retired_page_count(nvml, dev) {
            Some(1) => "1 retired page pending".into(),
            Some(n) if n > 0 => format!("{n} retired pages pending"),
            _ => "retired pages pending".into(),
        }),
        Ok(false) => None,
        Err(e) if symbol_missing(&e) => {
            if lib.nvmlDeviceGetRemappedRows.is_err() {
                tracker.once(
                    "GPU health: this driver lacks nvmlDeviceGetRemappedRows and \
                     nvmlDeviceGetRetiredPagesPendingStatus: the remap check is skipped"
                        .into(),
                );
            }
            None
        }
        Err(e) => {
            optional::<()>("retired pages", Err(e), w);
            None
        }
    }
}

/// Not supported here, or not in this driver: the next way is tried.
fn e_is_absent(e: &NvmlError) -> bool {
    matches!(e, NvmlError::NotSupported) || symbol_missing(e)
}

/// Retired pages of both causes (`nvmlDeviceGetRetiredPages`, asked for its count only).
fn retired_page_count(nvml: &Nvml, dev: &nvml_wrapper::Device) -> Option<u32> {
    let get = nvml.lib().nvmlDeviceGetRetiredPages.as_ref().ok()?;
    let mut total = 0;
    for cause in 0..2 {
        let mut count = 0;
        // SAFETY: nvml.h's signature; a zero count asks for the count only (no addresses are
        // written; the buffer is null).
        let rc = unsafe { get(dev.handle(), cause, &mut count, std::ptr::null_mut()) };
        // NVML_ERROR_INSUFFICIENT_SIZE (7) is the count query's answer when there are pages.
        if rc != 0 && rc != 7 {
            return None;
        }
        total += count;
    }
    Some(total)
}

/// `xid`: the critical XIDs (ascending, each once) seen on this GPU that are still reported: one
/// not yet reported by a scan, or seen within `clear_after`. A scan (`mark`) reports them;
/// those past `clear_after` that a scan reported are forgotten.
fn xids(key: &str, health: &NvmlHealth, tracker: &mut HealthTracker, mark: bool) -> String {
    let mut log = tracker.log();
    let Some(seen) = log.seen.get_mut(key) else {
        return String::new();
    };
    seen.retain(|_, s| !s.reported || s.at.elapsed() < health.clear_after);
    let out: Vec<String> = seen.keys().map(u32::to_string).collect();
    if mark {
        for s in seen.values_mut() {
            s.reported = true;
        }
    }
    out.join(",")
}

/// NVML's bus ids have an 8-digit domain (`00000000:19:00.0`); sysfs has 4 or more.
pub fn parse_bus_id(s: &str) -> Option<PciAddress> {
    PciAddress::parse(&s.trim().to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_bus_ids_match_sysfs_addresses() {
        assert_eq!(
            parse_bus_id("00000000:3B:00.0"),
            PciAddress::parse("0000:3b:00.0")
        );
        assert_eq!(
            parse_bus_id("00000001:00:00.0"),
            PciAddress::parse("0001:00:00.0")
        );
    }

    #[test]
    fn a_failed_xid_registration_is_asked_again_5_s_doubling_to_5_min() {
        let secs: Vec<u64> = (1..=9)
            .map(|tries| xid_register_backoff(tries).as_secs())
            .collect();
        assert_eq!(secs, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(xid_register_backoff(u32::MAX), XID_REGISTER_MAX);
    }

    #[test]
    fn an_xid_is_reported_by_one_scan_at_least_then_while_within_clear_after() {
        let mut tracker = HealthTracker::default();
        let at = |ago: u64| Seen {
            at: Instant::now() - Duration::from_secs(ago),
            reported: false,
        };
        tracker
            .log()
            .seen
            .insert("GPU-a".into(), BTreeMap::from([(79, at(10)), (48, at(0))]));
        let zero = NvmlHealth {
            critical_xids: vec![48, 79],
            clear_after: Duration::ZERO,
        };
        // The light check only looks; the first scan reports both, ascending, even with 0s.
        assert_eq!(xids("GPU-a", &zero, &mut tracker, false), "48,79");
        assert_eq!(xids("GPU-a", &zero, &mut tracker, true), "48,79");
        assert_eq!(xids("GPU-a", &zero, &mut tracker, true), "");
        assert_eq!(xids("GPU-b", &zero, &mut tracker, true), "");
        // With 5s, the one seen 10s ago goes after its first report, the other stays.
        tracker
            .log()
            .seen
            .insert("GPU-a".into(), BTreeMap::from([(79, at(10)), (48, at(0))]));
        let five = NvmlHealth {
            clear_after: Duration::from_secs(5),
            ..zero
        };
        assert_eq!(xids("GPU-a", &five, &mut tracker, true), "48,79");
        assert_eq!(xids("GPU-a", &five, &mut tracker, true), "48");
    }

    #[test]
    fn a_missing_library_is_unavailable_not_an_error() {
        let mut lib =
            NvmlLibrary::new(NvmlChoice::Library("/nonexistent/libnvidia-ml.so.1".into()));
        let scan = lib.scan();
        assert_eq!(scan.status.as_str(), "unavailable");
        assert!(scan.gpus.is_empty());
        let mut off = NvmlLibrary::new(NvmlChoice::Disabled);
        assert_eq!(
            off.scan().status,
            NvmlStatus::Unavailable("disabled".into())
        );
    }
}
