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

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

use super::pci::PciAddress;

mod calls;
pub mod child;
mod faults;
mod model;
pub mod plausible;
pub mod worker;

use calls::{FABRIC_STATE_COMPLETED, fabric_info, optional};
use faults::*;
pub use model::*;

/// The reason of the `Unavailable` status when NVML is turned off (`--no-nvml`, `enabled: false`).
pub const DISABLED: &str = "disabled";

/// The library name the loader searches for by default.
pub const DEFAULT_LIB: &str = "libnvidia-ml.so.1";

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
