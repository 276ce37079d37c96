//! NVML's C types, laid out exactly as `nvml.h` (and nvml-wrapper-sys 0.10's bindings) has them.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_ushort};

/// `nvmlReturn_t`.
pub type Return = c_uint;

pub const SUCCESS: Return = 0;
pub const ERROR_UNINITIALIZED: Return = 1;
pub const ERROR_INVALID_ARGUMENT: Return = 2;
pub const ERROR_NOT_SUPPORTED: Return = 3;
pub const ERROR_NOT_FOUND: Return = 6;
pub const ERROR_INSUFFICIENT_SIZE: Return = 7;
pub const ERROR_TIMEOUT: Return = 10;
pub const ERROR_FUNCTION_NOT_FOUND: Return = 13;
pub const ERROR_ARGUMENT_VERSION_MISMATCH: Return = 25;
pub const ERROR_UNKNOWN: Return = 999;

/// `struct nvmlDevice_st`: never dereferenced by callers, only passed back.
#[repr(C)]
pub struct DeviceOpaque {
    _unused: [u8; 0],
}

/// `nvmlDevice_t`.
pub type Handle = *mut DeviceOpaque;

/// `nvmlPciInfo_t` (the v3 layout).
#[repr(C)]
pub struct PciInfo {
    pub bus_id_legacy: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub bus_id: [c_char; 32],
}

/// `nvmlMemory_t`.
#[repr(C)]
pub struct Memory {
    pub total: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `nvmlMemory_v2_t`.
#[repr(C)]
pub struct MemoryV2 {
    pub version: c_uint,
    pub total: c_ulonglong,
    pub reserved: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `NVML_STRUCT_VERSION(Memory, 2)`.
pub const MEMORY_V2_VERSION: c_uint = (size_of::<MemoryV2>() as c_uint) | (2 << 24);

/// `nvmlDeviceAttributes_t`.
#[repr(C)]
pub struct DeviceAttributes {
    pub multiprocessor_count: c_uint,
    pub shared_copy_engine_count: c_uint,
    pub shared_decoder_count: c_uint,
    pub shared_encoder_count: c_uint,
    pub shared_jpeg_count: c_uint,
    pub shared_ofa_count: c_uint,
    pub gpu_instance_slice_count: c_uint,
    pub compute_instance_slice_count: c_uint,
    pub memory_size_mb: c_ulonglong,
}

/// `struct nvmlGpuInstance_st`: opaque, only passed back.
#[repr(C)]
pub struct GpuInstanceOpaque {
    _unused: [u8; 0],
}

/// `nvmlGpuInstance_t`.
pub type GpuInstanceHandle = *mut GpuInstanceOpaque;

/// `nvmlGpuInstancePlacement_t`.
#[repr(C)]
pub struct GpuInstancePlacement {
    pub start: c_uint,
    pub size: c_uint,
}

/// `nvmlGpuInstanceInfo_t`.
#[repr(C)]
pub struct GpuInstanceInfo {
    pub device: Handle,
    pub id: c_uint,
    pub profile_id: c_uint,
    pub placement: GpuInstancePlacement,
}

/// `nvmlGpuInstanceProfileInfo_t` (the v1 layout of `nvmlDeviceGetGpuInstanceProfileInfo`).
#[repr(C)]
pub struct GpuInstanceProfileInfo {
    pub id: c_uint,
    pub is_p2p_supported: c_uint,
    pub slice_count: c_uint,
    pub instance_count: c_uint,
    pub multiprocessor_count: c_uint,
    pub copy_engine_count: c_uint,
    pub decoder_count: c_uint,
    pub encoder_count: c_uint,
    pub jpeg_count: c_uint,
    pub ofa_count: c_uint,
    pub memory_size_mb: c_ulonglong,
}

/// `struct nvmlComputeInstance_st`: opaque, only passed back.
#[repr(C)]
pub struct ComputeInstanceOpaque {
    _unused: [u8; 0],
}

/// `nvmlComputeInstance_t`.
pub type ComputeInstanceHandle = *mut ComputeInstanceOpaque;

/// `nvmlComputeInstanceInfo_t` (the same layout for `nvmlComputeInstanceGetInfo` and `_v2`).
#[repr(C)]
pub struct ComputeInstanceInfo {
    pub device: Handle,
    pub gpu_instance: GpuInstanceHandle,
    pub id: c_uint,
    pub profile_id: c_uint,
    pub placement: GpuInstancePlacement,
}

/// `nvmlComputeInstanceProfileInfo_t` (the v1 layout of
/// `nvmlGpuInstanceGetComputeInstanceProfileInfo`).
#[repr(C)]
pub struct ComputeInstanceProfileInfo {
    pub id: c_uint,
    pub slice_count: c_uint,
    pub instance_count: c_uint,
    pub multiprocessor_count: c_uint,
    pub shared_copy_engine_count: c_uint,
    pub shared_decoder_count: c_uint,
    pub shared_encoder_count: c_uint,
    pub shared_jpeg_count: c_uint,
    pub shared_ofa_count: c_uint,
}

/// `nvmlGpuFabricInfo_t` (`nvmlDeviceGetGpuFabricInfo`).
#[repr(C)]
pub struct GpuFabricInfo {
    pub cluster_uuid: [u8; 16],
    pub status: Return,
    pub clique_id: c_uint,
    /// `nvmlGpuFabricState_t` (`NOT_SUPPORTED` 0, `NOT_STARTED` 1, `IN_PROGRESS` 2, `COMPLETED` 3).
    pub state: u8,
}

/// `nvmlGpuFabricInfo_v3_t` (`nvmlDeviceGetGpuFabricInfoV`; v2 is the same without
/// `health_summary`).
#[repr(C)]
pub struct GpuFabricInfoV3 {
    pub version: c_uint,
    pub cluster_uuid: [u8; 16],
    pub status: Return,
    pub clique_id: c_uint,
    pub state: u8,
    pub health_mask: c_uint,
    pub health_summary: u8,
}

/// `NVML_STRUCT_VERSION(GpuFabricInfo, 2)` (the v2 struct is 36 bytes) and `…, 3)`.
pub const GPU_FABRIC_INFO_V2: c_uint = 36 | (2 << 24);
pub const GPU_FABRIC_INFO_V3: c_uint = (size_of::<GpuFabricInfoV3>() as c_uint) | (3 << 24);

/// `nvmlSystemDriverBranchInfo_v1_t`.
#[repr(C)]
pub struct SystemDriverBranchInfo {
    pub version: c_uint,
    pub branch: [c_char; 80],
}

/// `NVML_STRUCT_VERSION(SystemDriverBranchInfo, 1)`.
pub const DRIVER_BRANCH_INFO_VERSION: c_uint =
    (size_of::<SystemDriverBranchInfo>() as c_uint) | (1 << 24);

/// `nvmlGridLicenseExpiry_t`.
#[repr(C)]
pub struct GridLicenseExpiry {
    pub year: c_uint,
    pub month: c_ushort,
    pub day: c_ushort,
    pub hour: c_ushort,
    pub min: c_ushort,
    pub sec: c_ushort,
    pub status: u8,
}

/// `nvmlGridLicensableFeature_t`.
#[repr(C)]
pub struct GridLicensableFeature {
    pub feature_code: c_uint,
    pub feature_state: c_uint,
    pub license_info: [c_char; 128],
    pub product_name: [c_char; 128],
    pub feature_enabled: c_uint,
    pub license_expiry: GridLicenseExpiry,
}

/// `nvmlGridLicensableFeatures_t`.
#[repr(C)]
pub struct GridLicensableFeatures {
    pub is_grid_license_supported: c_int,
    pub licensable_features_count: c_uint,
    pub grid_licensable_features: [GridLicensableFeature; 3],
}

/// `struct nvmlEventSet_st`: opaque, only passed back.
#[repr(C)]
pub struct EventSetOpaque {
    _private: [u8; 0],
}

/// `nvmlEventSet_t`.
pub type EventSetHandle = *mut EventSetOpaque;

/// `nvmlEventData_t` as `nvmlEventSetWait_v2` fills it.
#[repr(C)]
pub struct EventData {
    pub device: Handle,
    pub event_type: c_ulonglong,
    pub event_data: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// The `nvmlEventData_t` of drivers before R450 (`nvmlEventSetWait`): no MIG instance ids.
#[repr(C)]
pub struct EventDataV1 {
    pub device: Handle,
    pub event_type: c_ulonglong,
    pub event_data: c_ulonglong,
}

/// `nvmlEventTypeSingleBitEccError`, `nvmlEventTypeDoubleBitEccError`,
/// `nvmlEventTypeXidCriticalError`.
pub const EVENT_TYPE_SINGLE_BIT_ECC_ERROR: c_ulonglong = 0x1;
pub const EVENT_TYPE_DOUBLE_BIT_ECC_ERROR: c_ulonglong = 0x2;
pub const EVENT_TYPE_XID_CRITICAL_ERROR: c_ulonglong = 0x8;

// The sizes nvml.h gives these structs on x86_64 and aarch64 Linux.
const _: () = assert!(size_of::<PciInfo>() == 68);
const _: () = assert!(size_of::<Memory>() == 24);
const _: () = assert!(size_of::<MemoryV2>() == 40);
const _: () = assert!(size_of::<DeviceAttributes>() == 40);
const _: () = assert!(size_of::<SystemDriverBranchInfo>() == 84);
const _: () = assert!(size_of::<GpuInstanceInfo>() == 24);
const _: () = assert!(size_of::<GpuInstanceProfileInfo>() == 48);
const _: () = assert!(size_of::<GridLicenseExpiry>() == 16);
const _: () = assert!(size_of::<ComputeInstanceInfo>() == 32);
const _: () = assert!(size_of::<ComputeInstanceProfileInfo>() == 36);
const _: () = assert!(size_of::<GpuFabricInfo>() == 28);
const _: () = assert!(size_of::<EventData>() == 32);
const _: () = assert!(size_of::<GpuFabricInfoV3>() == 40);
const _: () = assert!(size_of::<EventDataV1>() == 24);
const _: () = assert!(size_of::<GridLicensableFeatures>() == 8 + 3 * 284);
