//! What an NVML scan says, as owned data: the status, the GPUs with their MIG devices, fabric
//! and faults. It crosses the pipe from NVML's child process as JSON (`child`), so every type
//! here is serde.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::super::pci::PciAddress;

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
