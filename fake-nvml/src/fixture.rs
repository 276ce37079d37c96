//! The JSON fixture that describes the machine the fake library pretends to be, and the faults
//! it injects. A value the fixture leaves out is one the "driver" cannot report: the function
//! that would return it answers `NVML_ERROR_NOT_SUPPORTED`.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

/// Every function this crate can export. `faults.not_found` and `faults.errors[].function`
/// must name one of these, so a typo in a fixture fails loudly instead of injecting nothing.
pub const KNOWN_FUNCTIONS: &[&str] = &[
    "nvmlInit_v2",
    "nvmlInitWithFlags",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlSystemGetDriverBranch",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetHandleByPciBusId_v2",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetArchitecture",
    "nvmlDeviceGetBrand",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetVirtualizationMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetAttributes_v2",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetBoardPartNumber",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetGridLicensableFeatures_v4",
    "nvmlDeviceGetGpuInstanceProfileInfo",
    "nvmlDeviceGetGpuInstanceById",
    "nvmlGpuInstanceGetInfo",
    "nvmlGpuInstanceGetComputeInstanceById",
    "nvmlGpuInstanceGetComputeInstanceProfileInfo",
    "nvmlComputeInstanceGetInfo",
    "nvmlComputeInstanceGetInfo_v2",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkRemoteDeviceType",
    "nvmlDeviceGetNvLinkRemotePciInfo_v2",
    "nvmlDeviceGetGpuFabricInfo",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlEventSetCreate",
    "nvmlDeviceRegisterEvents",
    "nvmlDeviceGetSupportedEventTypes",
    "nvmlEventSetWait",
    "nvmlEventSetWait_v2",
    "nvmlEventSetFree",
    "nvmlDeviceGetGpuFabricInfoV",
];

/// The functions of `KNOWN_FUNCTIONS` that came with R450 (`api_modern`): a driver older than
/// that does not export them at all, so a fixture of such a driver cannot make them answer
/// `NVML_ERROR_FUNCTION_NOT_FOUND` (`faults.not_found`); it is loaded through
/// `libnvidia_ml_legacy.so` instead, which lacks the symbols.
pub const SINCE_R450: &[&str] = &[
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlSystemGetDriverBranch",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetAttributes_v2",
    "nvmlDeviceGetGridLicensableFeatures_v4",
    "nvmlDeviceGetGpuInstanceProfileInfo",
    "nvmlDeviceGetGpuInstanceById",
    "nvmlGpuInstanceGetInfo",
    "nvmlGpuInstanceGetComputeInstanceById",
    "nvmlGpuInstanceGetComputeInstanceProfileInfo",
    "nvmlComputeInstanceGetInfo",
    "nvmlComputeInstanceGetInfo_v2",
    "nvmlDeviceGetGpuFabricInfo",
    // Row remapping came with A100 and R450; the "clocks event reasons" name replaced
    // "clocks throttle reasons" in R535; nvmlEventSetWait_v2 (MIG instance ids) came with R450.
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlEventSetWait_v2",
    "nvmlDeviceGetGpuFabricInfoV",
    // The remote end's device type of an NVLink came with R450's NVSwitch systems.
    "nvmlDeviceGetNvLinkRemoteDeviceType",
];

/// Handles are addresses in a fixed table, so a fixture may not describe more than this.
pub const MAX_GPUS: usize = 64;
/// Real GPUs have at most 7 MIG devices.
pub const MAX_MIG_DEVICES: usize = 8;
/// GPU instance ids are small (A100/H100: 1-14); handles exist for ids below this.
pub const MAX_GPU_INSTANCE_ID: usize = 32;
/// Compute instance ids within a GPU instance (at most 7 compute instances, ids 0-6).
pub const MAX_COMPUTE_INSTANCE_ID: usize = 8;
/// `NVML_COMPUTE_INSTANCE_PROFILE_COUNT` and `NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT`.
pub const COMPUTE_INSTANCE_PROFILE_COUNT: u32 = 8;
pub const COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT: u32 = 1;
/// `NVML_NVLINK_MAX_LINKS`.
pub const NVLINK_MAX_LINKS: usize = 18;
/// What `nvmlDeviceGetMaxMigDeviceCount` reports for a MIG-capable GPU when the fixture does not
/// say: A100, H100, H200 and B200 allow 7 MIG devices (A30 allows 4).
pub const DEFAULT_MAX_MIG_DEVICE_COUNT: u32 = 7;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// Free text pointing at the capture; ignored.
    #[serde(default, rename = "_source")]
    pub _source: Option<String>,
    pub driver_version: Option<String>,
    pub nvml_version: Option<String>,
    /// CUDA driver version as NVML encodes it: 1000 * major + 10 * minor (12.2 -> 12020).
    pub cuda_driver_version: Option<i32>,
    pub driver_branch: Option<String>,
    #[serde(default)]
    pub faults: Faults,
    pub devices: Vec<Device>,
    /// XID errors (`NVML_EVENT_TYPE_XID_CRITICAL_ERROR`) that `nvmlEventSetWait(_v2)` delivers,
    /// each once to every event set that registered its GPU for XID events, once the set has
    /// existed `at_ms`. A test appends events to a running process's fixture file (entries are
    /// told apart by their place in the list: append, do not reorder).
    #[serde(default)]
    pub xid_events: Vec<XidEvent>,
}

/// One XID error event.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XidEvent {
    /// GPU index.
    pub gpu: usize,
    pub xid: u64,
    /// Delivered once the event set is this old (ms); at once when left out.
    #[serde(default)]
    pub at_ms: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// `nvmlInit_v2`/`nvmlInitWithFlags` return this error (e.g. `DRIVER_NOT_LOADED`).
    pub init: Option<ErrorCode>,
    /// These functions return `NVML_ERROR_FUNCTION_NOT_FOUND`, as on an older driver.
    #[serde(default)]
    pub not_found: Vec<String>,
    /// GPU index (a string, as JSON keys are) -> error returned by every call about that GPU:
    /// `nvmlDeviceGetHandleByIndex_v2` for it, every call on its handle and on its MIG devices.
    #[serde(default)]
    pub device_errors: BTreeMap<String, ErrorCode>,
    /// Finer-grained faults; the first rule that matches a call decides its error.
    #[serde(default)]
    pub errors: Vec<FaultRule>,
    /// What a wedged or broken driver does instead of returning: the first rule that matches a
    /// call (as `errors` match, `nvmlInit_v2` included) hangs, crashes or ends the process.
    #[serde(default)]
    pub misbehave: Vec<Misbehaviour>,
}

/// A call that does not return an error but misbehaves.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Misbehaviour {
    pub function: Option<String>,
    pub gpu: Option<usize>,
    pub mig: Option<usize>,
    pub action: Action,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Never return (a wedged driver, a GPU fallen off the bus).
    Hang,
    /// Die of SIGSEGV, as a library that dereferences a bad pointer.
    Segv,
    /// End the process with status 3, as a library that calls `exit`.
    Exit,
    /// Write text to the process's standard output, then answer normally.
    Stdout,
}

/// A call matches when every field the rule sets matches it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// Only this function; any when absent.
    pub function: Option<String>,
    /// Only calls about this GPU index (its handle, its MIG devices, or fetching its handle).
    pub gpu: Option<usize>,
    /// Only calls about this MIG device index of `gpu` (its handle, or fetching its handle).
    pub mig: Option<usize>,
    pub error: ErrorCode,
    /// Only the first this many calls the rule matches fail; later ones go on to the next
    /// rule, or succeed: a driver that fails a call a while and then answers (e.g.
    /// `nvmlDeviceRegisterEvents` answering `UNKNOWN` while a GPU comes up). Counted from
    /// `nvmlInit` by the rule's place in `errors` (append, do not reorder); every call when
    /// absent.
    pub times: Option<u32>,
}

/// The far end of one NVLink.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvLinkRemote {
    pub device_type: NvLinkDeviceType,
    /// As nvidia-smi prints it: `00000000:19:00.0`.
    pub pci_bus_id: String,
}

/// `nvmlIntNvLinkDeviceType_t`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NvLinkDeviceType {
    Gpu = 0,
    Ibmnpu = 1,
    Switch = 2,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    pub name: Option<String>,
    pub uuid: Option<String>,
    /// As nvidia-smi prints it: `00000000:19:00.0`.
    pub pci_bus_id: Option<String>,
    /// `(device << 16) | vendor`, e.g. `"0x233010DE"`; 0 when absent but the bus id is known.
    pub pci_device_id: Option<HexU32>,
    pub pci_subsystem_id: Option<HexU32>,
    pub memory_total_bytes: Option<u64>,
    #[serde(default)]
    pub memory_used_bytes: u64,
    /// `nvmlMemory_v2_t.reserved` (nvidia-smi's "Reserved").
    #[serde(default)]
    pub memory_reserved_bytes: u64,
    pub compute_capability: Option<[i32; 2]>,
    /// `nvmlDeviceArchitecture_t` (HOPPER = 9).
    pub architecture: Option<u32>,
    /// `nvmlBrandType_t` (NVIDIA = 14).
    pub brand: Option<u32>,
    /// Absent or null: the GPU is not MIG-capable (`NVML_ERROR_NOT_SUPPORTED`).
    pub mig_mode: Option<MigMode>,
    pub max_mig_device_count: Option<u32>,
    /// `nvmlGpuVirtualizationMode_t` (NONE 0, PASSTHROUGH 1, VGPU 2, HOST_VGPU 3, HOST_VSGA 4).
    pub virtualization_mode: Option<u32>,
    pub serial: Option<String>,
    pub board_part_number: Option<String>,
    pub minor_number: Option<u32>,
    #[serde(default)]
    pub mig_devices: Vec<MigDevice>,
    /// `nvmlDeviceGetGpuInstanceProfileInfo`'s table (as `nvidia-smi mig -lgip` lists it):
    /// profiles left out answer `NVML_ERROR_NOT_SUPPORTED`.
    #[serde(default)]
    pub gpu_instance_profiles: Vec<GpuInstanceProfile>,
    pub grid_licensable_features: Option<GridLicensableFeatures>,
    /// `nvmlDeviceGetNvLinkState` per link index (`true`: active), as `nvidia-smi nvlink -s`
    /// lists the links; absent: the GPU has no NVLink (`NVML_ERROR_NOT_SUPPORTED`). A link
    /// index past the list is `NVML_ERROR_INVALID_ARGUMENT`, as NVML answers past the GPU's
    /// link count.
    pub nvlinks: Option<Vec<bool>>,
    /// Per link index, what is at its far end (`nvidia-smi nvlink -R`):
    /// `nvmlDeviceGetNvLinkRemoteDeviceType` answers its `device_type` and
    /// `nvmlDeviceGetNvLinkRemotePciInfo_v2` its `pci_bus_id`. Absent: both answer
    /// `NVML_ERROR_NOT_SUPPORTED`; an index past the list, `NVML_ERROR_INVALID_ARGUMENT`.
    pub nvlink_remotes: Option<Vec<NvLinkRemote>>,
    /// `nvmlDeviceGetGpuFabricInfo`: the GPU's NVLink fabric (nvidia-smi's `Fabric` section);
    /// absent: `NVML_ERROR_NOT_SUPPORTED`.
    pub fabric: Option<Fabric>,
    /// `nvmlDeviceGetTotalEccErrors` (nvidia-smi's ECC Errors, SRAM and DRAM summed); absent:
    /// ECC off or not supported (`NVML_ERROR_NOT_SUPPORTED`).
    pub ecc_errors: Option<EccErrors>,
    /// `nvmlDeviceGetRetiredPages` / `nvmlDeviceGetRetiredPagesPendingStatus` (nvidia-smi's
    /// Retired Pages; pre-A100 GPUs); absent: not supported.
    pub retired_pages: Option<RetiredPages>,
    /// `nvmlDeviceGetRemappedRows` (nvidia-smi's Remapped Rows; A100 and later); absent: not
    /// supported.
    pub remapped_rows: Option<RemappedRows>,
    /// The active clocks event reasons (nvidia-smi's "Clocks Event Reasons" that are `Active`,
    /// by the names of [`CLOCKS_EVENT_REASONS`]); `nvmlDeviceGetCurrentClocksEventReasons` and
    /// the older `nvmlDeviceGetCurrentClocksThrottleReasons` answer their bit mask. Absent: not
    /// supported.
    pub clocks_event_reasons: Option<Vec<String>>,
}

/// `nvmlClocksEventReasons` bits by the names fixtures use (nvml.h's
/// `nvmlClocksEventReason*`, nvidia-smi's labels lower-cased with `_`).
pub const CLOCKS_EVENT_REASONS: &[(&str, u64)] = &[
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("display_clock_setting", 0x100),
];

impl Device {
    /// The clocks event reasons as NVML's bit mask (names checked when the fixture is read).
    pub fn clocks_event_mask(&self) -> Option<u64> {
        let names = self.clocks_event_reasons.as_ref()?;
        Some(
            names
                .iter()
                .filter_map(|n| CLOCKS_EVENT_REASONS.iter().find(|(k, _)| k == n))
                .fold(0, |m, (_, bit)| m | bit),
        )
    }
}

/// ECC error counts (`nvmlMemoryErrorType_t` x `nvmlEccCounterType_t`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EccErrors {
    #[serde(default)]
    pub volatile_corrected: u64,
    #[serde(default)]
    pub volatile_uncorrected: u64,
    #[serde(default)]
    pub aggregate_corrected: u64,
    #[serde(default)]
    pub aggregate_uncorrected: u64,
}

/// Retired pages: how many per cause, and whether a retirement waits for a reboot.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetiredPages {
    /// Pages retired for multiple single-bit ECC errors.
    #[serde(default)]
    pub single_bit_ecc: u32,
    /// Pages retired for a double-bit ECC error.
    #[serde(default)]
    pub double_bit_ecc: u32,
    /// nvidia-smi's "Pending Page Blacklist" / "Pending Page Retirement".
    #[serde(default)]
    pub pending: bool,
}

/// What `nvmlDeviceGetRemappedRows` reports.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemappedRows {
    #[serde(default)]
    pub correctable: u32,
    #[serde(default)]
    pub uncorrectable: u32,
    #[serde(default)]
    pub pending: bool,
    #[serde(default)]
    pub failure: bool,
}

/// What `nvmlDeviceGetGpuFabricInfo` reports.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fabric {
    /// `NOT_SUPPORTED` 0, `NOT_STARTED` 1, `IN_PROGRESS` 2, `COMPLETED` 3.
    pub state: u8,
    /// The fabric's registration result (nvidia-smi's `Status`); `SUCCESS` when left out.
    pub status: Option<ErrorCode>,
    /// As nvidia-smi prints `ClusterUUID` (`9277d399-0674-44a9-b64e-d85bb19ce2b0`); all zero
    /// when left out, as on a single-node NVSwitch system.
    pub cluster_uuid: Option<String>,
    #[serde(default)]
    pub clique_id: u32,
    /// `nvmlDeviceGetGpuFabricInfoV`'s `healthMask` (nvml.h `NVML_GPU_FABRIC_HEALTH_MASK_*`:
    /// degraded bandwidth in bits 0-1, route recovery 2-3, route unhealthy 4-5, access timeout
    /// recovery 6-7, incorrect configuration 8-11); 0 (all not supported) when left out.
    #[serde(default)]
    pub health_mask: u32,
    /// `healthSummary` (v3: `NVML_GPU_FABRIC_HEALTH_SUMMARY_*`, HEALTHY 1, UNHEALTHY 2,
    /// LIMITED_CAPACITY 3); 0 (not supported) when left out.
    #[serde(default)]
    pub health_summary: u8,
}

impl Fabric {
    /// The cluster UUID's 16 bytes.
    pub fn cluster_uuid_bytes(&self) -> Option<[u8; 16]> {
        let Some(text) = &self.cluster_uuid else {
            return Some([0; 16]);
        };
        let hex: String = text.chars().filter(|c| *c != '-').collect();
        if hex.len() != 32 {
            return None;
        }
        let mut out = [0u8; 16];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(out)
    }
}

/// One GPU instance profile a MIG-capable GPU supports.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuInstanceProfile {
    /// The `NVML_GPU_INSTANCE_PROFILE_*` index it answers to (`1_SLICE_REV1` = 7).
    pub profile: u32,
    /// Its id (`nvidia-smi mig -lgip`'s ID column, e.g. 20 for `1g.5gb+me`).
    pub id: u32,
    pub slice_count: u32,
    #[serde(default)]
    pub instance_count: u32,
    #[serde(default)]
    pub multiprocessor_count: u32,
    #[serde(default)]
    pub copy_engine_count: u32,
    #[serde(default)]
    pub decoder_count: u32,
    #[serde(default)]
    pub encoder_count: u32,
    #[serde(default)]
    pub jpeg_count: u32,
    #[serde(default)]
    pub ofa_count: u32,
    #[serde(default)]
    pub memory_size_mb: u64,
    /// `nvmlGpuInstanceGetComputeInstanceProfileInfo`'s table for a GPU instance of this
    /// profile (as `nvidia-smi mig -lcip` lists it), by `NVML_COMPUTE_INSTANCE_PROFILE_*`
    /// index; profiles left out answer `NVML_ERROR_NOT_SUPPORTED`.
    #[serde(default)]
    pub compute_instance_profiles: Vec<ComputeInstanceProfile>,
}

/// One compute instance profile a GPU instance supports.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeInstanceProfile {
    /// The `NVML_COMPUTE_INSTANCE_PROFILE_*` index it answers to (`1_SLICE` = 0, `2_SLICE` = 1).
    pub profile: u32,
    /// Its id (`nvidia-smi mig -lcip`'s Profile ID column).
    pub id: u32,
    pub slice_count: u32,
    #[serde(default)]
    pub instance_count: u32,
    #[serde(default)]
    pub multiprocessor_count: u32,
    #[serde(default)]
    pub copy_engine_count: u32,
    #[serde(default)]
    pub decoder_count: u32,
    #[serde(default)]
    pub encoder_count: u32,
    #[serde(default)]
    pub jpeg_count: u32,
    #[serde(default)]
    pub ofa_count: u32,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigMode {
    pub current: u32,
    pub pending: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigDevice {
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub gpu_instance_id: Option<u32>,
    /// The id of its GPU instance's profile (`nvmlGpuInstanceGetInfo`'s `profileId`).
    pub gpu_instance_profile_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    /// The id of its compute instance's profile (`nvmlComputeInstanceGetInfo`'s `profileId`).
    pub compute_instance_profile_id: Option<u32>,
    pub memory_total_bytes: Option<u64>,
    #[serde(default)]
    pub memory_used_bytes: u64,
    #[serde(default)]
    pub memory_reserved_bytes: u64,
    // nvmlDeviceAttributes_t: reported only when all of them are present.
    pub multiprocessor_count: Option<u32>,
    pub shared_copy_engine_count: Option<u32>,
    pub shared_decoder_count: Option<u32>,
    pub shared_encoder_count: Option<u32>,
    pub shared_jpeg_count: Option<u32>,
    pub shared_ofa_count: Option<u32>,
    pub gpu_instance_slice_count: Option<u32>,
    pub compute_instance_slice_count: Option<u32>,
    pub memory_size_mb: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridLicensableFeatures {
    pub supported: bool,
    #[serde(default)]
    pub features: Vec<GridLicensableFeature>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridLicensableFeature {
    /// `nvmlGridLicenseFeatureCode_t` (VGPU 1, NVIDIA_RTX 2, VWORKSTATION 2, GAMING 3, COMPUTE 4).
    pub code: u32,
    /// `NVML_GRID_LICENSE_STATE_*` (LICENSED 5).
    pub state: u32,
    #[serde(default)]
    pub license_info: String,
    #[serde(default)]
    pub product_name: String,
    pub enabled: bool,
}

/// The multiprocessor and engine counts of a MIG device, as `nvmlDeviceAttributes_t` has them.
pub struct Attributes {
    pub multiprocessor_count: u32,
    pub shared_copy_engine_count: u32,
    pub shared_decoder_count: u32,
    pub shared_encoder_count: u32,
    pub shared_jpeg_count: u32,
    pub shared_ofa_count: u32,
    pub gpu_instance_slice_count: u32,
    pub compute_instance_slice_count: u32,
    pub memory_size_mb: u64,
}

impl MigDevice {
    pub fn attributes(&self) -> Option<Attributes> {
        Some(Attributes {
            multiprocessor_count: self.multiprocessor_count?,
            shared_copy_engine_count: self.shared_copy_engine_count?,
            shared_decoder_count: self.shared_decoder_count?,
            shared_encoder_count: self.shared_encoder_count?,
            shared_jpeg_count: self.shared_jpeg_count?,
            shared_ofa_count: self.shared_ofa_count?,
            gpu_instance_slice_count: self.gpu_instance_slice_count?,
            compute_instance_slice_count: self.compute_instance_slice_count?,
            memory_size_mb: self.memory_size_mb?,
        })
    }
}

/// A PCI id written as `"0x233010DE"`, `"233010DE"` or a JSON integer.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(try_from = "HexOrInt")]
pub struct HexU32(pub u32);

#[derive(Deserialize)]
#[serde(untagged)]
enum HexOrInt {
    Int(u32),
    Text(String),
}

impl TryFrom<HexOrInt> for HexU32 {
    type Error = String;
    fn try_from(v: HexOrInt) -> Result<Self, String> {
        match v {
            HexOrInt::Int(i) => Ok(HexU32(i)),
            HexOrInt::Text(s) => {
                let digits = s
                    .strip_prefix("0x")
                    .or_else(|| s.strip_prefix("0X"))
                    .unwrap_or(&s);
                u32::from_str_radix(digits, 16)
                    .map(HexU32)
                    .map_err(|e| format!("bad hex id {s:?}: {e}"))
            }
        }
    }
}

/// An NVML return code, written in a fixture as `"GPU_IS_LOST"`, `"NVML_ERROR_GPU_IS_LOST"` or
/// its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "ErrorName")]
pub struct ErrorCode(pub u32);

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorName {
    Code(u32),
    Name(String),
}

impl TryFrom<ErrorName> for ErrorCode {
    type Error = String;
    fn try_from(v: ErrorName) -> Result<Self, String> {
        match v {
            ErrorName::Code(c) => Ok(ErrorCode(c)),
            ErrorName::Name(n) => {
                let short = n.strip_prefix("NVML_ERROR_").unwrap_or(&n);
                RETURN_CODES
                    .iter()
                    .find(|(_, name, _)| *name == short)
                    .map(|(code, _, _)| ErrorCode(*code))
                    .ok_or_else(|| format!("unknown NVML error name {n:?}"))
            }
        }
    }
}

/// `nvmlReturn_t`: code, the name after `NVML_ERROR_`, and `nvmlErrorString`'s text.
pub const RETURN_CODES: &[(u32, &str, &str)] = &[
    (0, "SUCCESS", "Success\0"),
    (1, "UNINITIALIZED", "Uninitialized\0"),
    (2, "INVALID_ARGUMENT", "Invalid Argument\0"),
    (3, "NOT_SUPPORTED", "Not Supported\0"),
    (4, "NO_PERMISSION", "Insufficient Permissions\0"),
    (5, "ALREADY_INITIALIZED", "Already Initialized\0"),
    (6, "NOT_FOUND", "Not Found\0"),
    (7, "INSUFFICIENT_SIZE", "Insufficient Size\0"),
    (8, "INSUFFICIENT_POWER", "Insufficient External Power\0"),
    (9, "DRIVER_NOT_LOADED", "Driver Not Loaded\0"),
    (10, "TIMEOUT", "Timeout\0"),
    (11, "IRQ_ISSUE", "Interrupt Request Issue\0"),
    (12, "LIBRARY_NOT_FOUND", "NVML Shared Library Not Found\0"),
    (13, "FUNCTION_NOT_FOUND", "Function Not Found\0"),
    (14, "CORRUPTED_INFOROM", "Corrupted infoROM\0"),
    (15, "GPU_IS_LOST", "GPU is lost\0"),
    (16, "RESET_REQUIRED", "GPU requires restart\0"),
    (
        17,
        "OPERATING_SYSTEM",
        "The operating system has blocked the request.\0",
    ),
    (
        18,
        "LIB_RM_VERSION_MISMATCH",
        "RM has detected an NVML/RM version mismatch.\0",
    ),
    (19, "IN_USE", "In use by another client\0"),
    (20, "MEMORY", "Insufficient Memory\0"),
    (21, "NO_DATA", "No data\0"),
    (
        22,
        "VGPU_ECC_NOT_SUPPORTED",
        "vGPU operation not available because ECC is enabled\0",
    ),
    (23, "INSUFFICIENT_RESOURCES", "Insufficient resources\0"),
    (24, "FREQ_NOT_SUPPORTED", "Frequency not supported\0"),
    (
        25,
        "ARGUMENT_VERSION_MISMATCH",
        "Argument version mismatch\0",
    ),
    (26, "DEPRECATED", "Deprecated\0"),
    (27, "NOT_READY", "Not ready\0"),
    (28, "GPU_NOT_FOUND", "GPU not found\0"),
    (29, "INVALID_STATE", "Invalid state\0"),
    (30, "RESET_TYPE_NOT_SUPPORTED", "Reset type not supported\0"),
    (999, "UNKNOWN", "Unknown Error\0"),
];

/// Why a fixture was refused.
#[derive(Debug)]
pub struct FixtureError(String);

impl fmt::Display for FixtureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Domain, bus and device of `00000000:19:00.0` (or `0000:19:00.0`).
pub fn parse_bus_id(s: &str) -> Option<(u32, u32, u32)> {
    let (rest, _function) = s.rsplit_once('.')?;
    let mut parts = rest.rsplitn(3, ':');
    let device = u32::from_str_radix(parts.next()?, 16).ok()?;
    let bus = u32::from_str_radix(parts.next()?, 16).ok()?;
    let domain = u32::from_str_radix(parts.next()?, 16).ok()?;
    Some((domain, bus, device))
}

impl Fixture {
    pub fn parse(text: &str) -> Result<Fixture, FixtureError> {
        let f: Fixture = serde_json::from_str(text).map_err(|e| FixtureError(e.to_string()))?;
        f.validate()?;
        Ok(f)
    }

    fn validate(&self) -> Result<(), FixtureError> {
        let bad = |m: String| Err(FixtureError(m));
        if self.devices.len() > MAX_GPUS {
            return bad(format!("more than {MAX_GPUS} devices"));
        }
        for name in self.faults.not_found.iter().chain(
            self.faults
                .errors
                .iter()
                .filter_map(|r| r.function.as_ref()),
        ) {
            if !KNOWN_FUNCTIONS.contains(&name.as_str()) {
                return bad(format!("faults name an unknown function {name:?}"));
            }
        }
        let driver_major = self
            .driver_version
            .as_deref()
            .and_then(|v| v.split('.').next()?.parse::<u32>().ok());
        if let Some(major) = driver_major.filter(|m| *m < 450)
            && let Some(name) = self
                .faults
                .not_found
                .iter()
                .find(|n| SINCE_R450.contains(&n.as_str()))
        {
            return bad(format!(
                "faults.not_found: a driver {major} library does not export {name} at all (it \
                 came with R450), so it cannot answer FUNCTION_NOT_FOUND; load \
                 libnvidia_ml_legacy.so, which lacks the symbol"
            ));
        }
        for key in self.faults.device_errors.keys() {
            match key.parse::<usize>() {
                Ok(i) if i < self.devices.len() => {}
                _ => {
                    return bad(format!(
                        "faults.device_errors: {key:?} is not a device index"
                    ));
                }
            }
        }
        let mut strings: Vec<(&str, &String)> = Vec::new();
        for s in [
            &self.driver_version,
            &self.nvml_version,
            &self.driver_branch,
        ]
        .into_iter()
        .flatten()
        {
            strings.push(("system", s));
        }
        for (i, d) in self.devices.iter().enumerate() {
            if d.mig_devices.len() > MAX_MIG_DEVICES {
                return bad(format!(
                    "device {i}: more than {MAX_MIG_DEVICES} MIG devices"
                ));
            }
            if let Some(b) = &d.pci_bus_id
                && (parse_bus_id(b).is_none() || b.len() >= 32)
            {
                return bad(format!("device {i}: bad pci_bus_id {b:?}"));
            }
            let mig_enabled = d.mig_mode.is_some_and(|m| m.current == 1);
            if !d.mig_devices.is_empty() && !mig_enabled {
                return bad(format!(
                    "device {i}: MIG devices but MIG mode is not enabled"
                ));
            }
            let max = d
                .max_mig_device_count
                .unwrap_or(DEFAULT_MAX_MIG_DEVICE_COUNT);
            if d.mig_devices.len() > max as usize {
                return bad(format!(
                    "device {i}: more MIG devices than max_mig_device_count"
                ));
            }
            for m in &d.mig_devices {
                if m.gpu_instance_id
                    .is_some_and(|id| id as usize >= MAX_GPU_INSTANCE_ID)
                {
                    return bad(format!(
                        "device {i}: gpu_instance_id must be below {MAX_GPU_INSTANCE_ID}"
                    ));
                }
                if m.compute_instance_id
                    .is_some_and(|id| id as usize >= MAX_COMPUTE_INSTANCE_ID)
                {
                    return bad(format!(
                        "device {i}: compute_instance_id must be below {MAX_COMPUTE_INSTANCE_ID}"
                    ));
                }
            }
            if d.nvlinks
                .as_ref()
                .is_some_and(|l| l.len() > NVLINK_MAX_LINKS)
            {
                return bad(format!("device {i}: more than {NVLINK_MAX_LINKS} NVLinks"));
            }
            if let Some(r) = d
                .nvlink_remotes
                .iter()
                .flatten()
                .find(|r| parse_bus_id(&r.pci_bus_id).is_none())
            {
                return bad(format!(
                    "device {i}: nvlink_remotes pci_bus_id {:?} is not a PCI bus id",
                    r.pci_bus_id
                ));
            }
            if d.fabric
                .as_ref()
                .is_some_and(|f| f.cluster_uuid_bytes().is_none())
            {
                return bad(format!("device {i}: fabric.cluster_uuid is not a UUID"));
            }
            if let Some(bad_name) = d
                .clocks_event_reasons
                .iter()
                .flatten()
                .find(|n| !CLOCKS_EVENT_REASONS.iter().any(|(k, _)| k == n))
            {
                return bad(format!(
                    "device {i}: unknown clocks event reason {bad_name:?}"
                ));
            }
            if let Some(g) = &d.grid_licensable_features
                && g.features.len() > 3
            {
                return bad(format!("device {i}: more than 3 grid licensable features"));
            }
            for s in [&d.name, &d.uuid, &d.serial, &d.board_part_number]
                .into_iter()
                .flatten()
            {
                strings.push(("device", s));
            }
            for m in &d.mig_devices {
                for s in [&m.name, &m.uuid].into_iter().flatten() {
                    strings.push(("MIG device", s));
                }
            }
        }
        if let Some(e) = self.xid_events.iter().find(|e| e.gpu >= self.devices.len()) {
            return bad(format!("xid_events: GPU {} is not a device index", e.gpu));
        }
        for (what, s) in strings {
            if s.contains('\0') {
                return bad(format!("{what} string {s:?} contains a NUL"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_with_and_without_prefix() {
        let f = Fixture::parse(
            r#"{"faults": {"init": "NVML_ERROR_DRIVER_NOT_LOADED",
                 "device_errors": {"0": "GPU_IS_LOST"}}, "devices": [{}]}"#,
        )
        .unwrap();
        assert_eq!(f.faults.init, Some(ErrorCode(9)));
        assert_eq!(f.faults.device_errors["0"], ErrorCode(15));
    }

    #[test]
    fn typos_are_refused() {
        for text in [
            r#"{"devices": [], "faults": {"not_found": ["nvmlDeviceGetMigMod"]}}"#,
            r#"{"devices": [], "faults": {"init": "DRIVER_NOT_LODED"}}"#,
            r#"{"devices": [{"nmae": "x"}]}"#,
            r#"{"devices": [], "faults": {"device_errors": {"0": "GPU_IS_LOST"}}}"#,
            r#"{"devices": [{"pci_bus_id": "19:00"}]}"#,
            r#"{"devices": [{"fabric": {"state": 3, "cluster_uuid": "not-a-uuid"}}]}"#,
        ] {
            assert!(Fixture::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn an_old_driver_cannot_claim_function_not_found_for_what_it_lacks() {
        let fixture = |driver: &str, function: &str| {
            Fixture::parse(&format!(
                r#"{{"driver_version": "{driver}", "devices": [],
                    "faults": {{"not_found": ["{function}"]}}}}"#
            ))
        };
        assert_eq!(
            fixture("418.43", "nvmlDeviceGetMigMode")
                .unwrap_err()
                .to_string(),
            "faults.not_found: a driver 418 library does not export nvmlDeviceGetMigMode at all \
             (it came with R450), so it cannot answer FUNCTION_NOT_FOUND; load \
             libnvidia_ml_legacy.so, which lacks the symbol"
        );
        // What a 418 library exports may still answer FUNCTION_NOT_FOUND, and so may a
        // function of a driver that has it.
        assert!(fixture("418.43", "nvmlDeviceGetSerial").is_ok());
        assert!(fixture("535.161.08", "nvmlDeviceGetMigMode").is_ok());
    }

    #[test]
    fn bus_ids() {
        assert_eq!(parse_bus_id("00000000:19:00.0"), Some((0, 0x19, 0)));
        assert_eq!(parse_bus_id("0001:C1:1F.0"), Some((1, 0xc1, 0x1f)));
        assert_eq!(parse_bus_id("garbage"), None);
    }

    #[test]
    fn known_functions_are_exactly_the_exported_ones() {
        let source = [include_str!("api.rs"), include_str!("api_modern.rs")].concat();
        let modern: Vec<&str> = include_str!("api_modern.rs")
            .split("extern \"C\" fn ")
            .skip(1)
            .map(|rest| rest.split('(').next().unwrap())
            .collect();
        let mut since: Vec<&str> = SINCE_R450.to_vec();
        since.sort_unstable();
        let mut modern_sorted = modern.clone();
        modern_sorted.sort_unstable();
        assert_eq!(since, modern_sorted);
        let mut exported: Vec<&str> = source
            .split("extern \"C\" fn ")
            .skip(1)
            .map(|rest| rest.split('(').next().unwrap())
            .collect();
        exported.sort_unstable();
        let mut known = KNOWN_FUNCTIONS.to_vec();
        known.sort_unstable();
        assert_eq!(exported, known);
    }
}
