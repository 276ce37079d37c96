//! The NVML functions a pre-R450 driver's library lacks: MIG, compute capability, the v2 CUDA
//! driver version, the driver branch, the v4 GRID licence query, the fabric, remapped rows, the
//! R535 name of the clocks event reasons and the v2 event wait. `fake-nvml-legacy` leaves this
//! module out, so its library has no such symbols at all.

use std::ffi::{c_int, c_uint};

use crate::api::cuda_driver_version;
use crate::ctypes::*;
use crate::fixture::{
    COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT, COMPUTE_INSTANCE_PROFILE_COUNT,
    DEFAULT_MAX_MIG_DEVICE_COUNT, Fixture, MigDevice,
};
use crate::runtime::{
    self, About, Target, compute_instance_handle, fill_chars, gpu_handle, gpu_instance_handle,
    mig_handle, put,
};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(
    cuda_driver_version: *mut c_int,
) -> Return {
    runtime::system("nvmlSystemGetCudaDriverVersion_v2", |f| unsafe {
        self::cuda_driver_version(f, cuda_driver_version)
    })
}

/// `branch_info` is an `nvmlSystemDriverBranchInfo_t` with its version set; `length` is the
/// size of its `branch` buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverBranch(
    branch_info: *mut SystemDriverBranchInfo,
    length: c_uint,
) -> Return {
    runtime::system("nvmlSystemGetDriverBranch", |f| {
        runtime::non_null(branch_info)?;
        // SAFETY: non-null; the caller passes the struct with its version set.
        if unsafe { (*branch_info).version } != DRIVER_BRANCH_INFO_VERSION {
            return Err(ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        let branch = f.driver_branch.as_deref().ok_or(ERROR_NOT_SUPPORTED)?;
        if branch.len() + 1 > (length as usize).min(80) {
            return Err(ERROR_INSUFFICIENT_SIZE);
        }
        let mut value = SystemDriverBranchInfo {
            version: DRIVER_BRANCH_INFO_VERSION,
            branch: [0; 80],
        };
        fill_chars(&mut value.branch, branch);
        unsafe { put(branch_info, value) }
    })
}

/// The parent's, for a MIG handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: Handle,
    major: *mut c_int,
    minor: *mut c_int,
) -> Return {
    runtime::device("nvmlDeviceGetCudaComputeCapability", device, |_, t| {
        runtime::non_null(major)?;
        runtime::non_null(minor)?;
        let [ma, mi] = t.gpu().compute_capability.ok_or(ERROR_NOT_SUPPORTED)?;
        unsafe {
            put(major, ma)?;
            put(minor, mi)
        }
    })
}

/// Not supported on a GPU that is not MIG-capable (no `mig_mode`) and on MIG handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: Handle,
    current_mode: *mut c_uint,
    pending_mode: *mut c_uint,
) -> Return {
    runtime::device("nvmlDeviceGetMigMode", device, |_, t| {
        runtime::non_null(current_mode)?;
        runtime::non_null(pending_mode)?;
        let Target::Gpu { dev, .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        let mode = dev.mig_mode.ok_or(ERROR_NOT_SUPPORTED)?;
        unsafe {
            put(current_mode, mode.current)?;
            put(pending_mode, mode.pending)
        }
    })
}

/// How many MIG device slots the GPU has (7 unless the fixture says), not how many exist.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: Handle,
    count: *mut c_uint,
) -> Return {
    runtime::device("nvmlDeviceGetMaxMigDeviceCount", device, |_, t| {
        runtime::non_null(count)?;
        let Target::Gpu { dev, .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        dev.mig_mode.ok_or(ERROR_NOT_SUPPORTED)?;
        let max = dev
            .max_mig_device_count
            .unwrap_or(DEFAULT_MAX_MIG_DEVICE_COUNT);
        unsafe { put(count, max) }
    })
}

/// MIG devices fill slots `0..mig_devices.len()`; a later slot below the maximum is empty
/// (`NVML_ERROR_NOT_FOUND`), one beyond it is an invalid argument. A fault rule with `mig` set
/// makes fetching that one slot fail (a MIG device that vanished).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: Handle,
    index: c_uint,
    mig_device: *mut Handle,
) -> Return {
    let name = "nvmlDeviceGetMigDeviceHandleByIndex";
    runtime::device(name, device, |f, t| {
        runtime::non_null(mig_device)?;
        let Target::Gpu { index: gpu, dev } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        dev.mig_mode.ok_or(ERROR_NOT_SUPPORTED)?;
        let slot = index as usize;
        runtime::injected(
            f,
            name,
            Some(About {
                gpu,
                mig: Some(slot),
            }),
        )?;
        let max = dev
            .max_mig_device_count
            .unwrap_or(DEFAULT_MAX_MIG_DEVICE_COUNT);
        if slot < dev.mig_devices.len() {
            unsafe { put(mig_device, mig_handle(gpu, slot)) }
        } else if slot < max as usize {
            Err(ERROR_NOT_FOUND)
        } else {
            Err(ERROR_INVALID_ARGUMENT)
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: Handle,
    is_mig_device: *mut c_uint,
) -> Return {
    runtime::device("nvmlDeviceIsMigDeviceHandle", device, |_, t| {
        let is_mig = matches!(t, Target::Mig { .. });
        unsafe { put(is_mig_device, is_mig as c_uint) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: Handle,
    device: *mut Handle,
) -> Return {
    runtime::device(
        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
        mig_device,
        |_, t| {
            runtime::non_null(device)?;
            let Target::Mig { gpu, .. } = t else {
                return Err(ERROR_INVALID_ARGUMENT);
            };
            unsafe { put(device, gpu_handle(gpu)) }
        },
    )
}

/// A value only a MIG device has; not supported on a GPU handle.
unsafe fn put_mig_value<T>(
    name: &str,
    device: Handle,
    out: *mut T,
    get: impl Fn(&crate::fixture::MigDevice) -> Option<T>,
) -> Return {
    runtime::device(name, device, |_, t| {
        runtime::non_null(out)?;
        let Target::Mig { mig, .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        let v = get(mig).ok_or(ERROR_NOT_SUPPORTED)?;
        unsafe { put(out, v) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(device: Handle, id: *mut c_uint) -> Return {
    unsafe {
        put_mig_value("nvmlDeviceGetGpuInstanceId", device, id, |m| {
            m.gpu_instance_id
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(device: Handle, id: *mut c_uint) -> Return {
    unsafe {
        put_mig_value("nvmlDeviceGetComputeInstanceId", device, id, |m| {
            m.compute_instance_id
        })
    }
}

/// NVML documents this for MIG device handles only.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetAttributes_v2(
    device: Handle,
    attributes: *mut DeviceAttributes,
) -> Return {
    unsafe {
        put_mig_value("nvmlDeviceGetAttributes_v2", device, attributes, |m| {
            let a = m.attributes()?;
            Some(DeviceAttributes {
                multiprocessor_count: a.multiprocessor_count,
                shared_copy_engine_count: a.shared_copy_engine_count,
                shared_decoder_count: a.shared_decoder_count,
                shared_encoder_count: a.shared_encoder_count,
                shared_jpeg_count: a.shared_jpeg_count,
                shared_ofa_count: a.shared_ofa_count,
                gpu_instance_slice_count: a.gpu_instance_slice_count,
                compute_instance_slice_count: a.compute_instance_slice_count,
                memory_size_mb: a.memory_size_mb,
            })
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGridLicensableFeatures_v4(
    device: Handle,
    features: *mut GridLicensableFeatures,
) -> Return {
    runtime::device("nvmlDeviceGetGridLicensableFeatures_v4", device, |_, t| {
        runtime::non_null(features)?;
        let Target::Gpu { dev, .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        let g = dev
            .grid_licensable_features
            .as_ref()
            .ok_or(ERROR_NOT_SUPPORTED)?;
        let empty = || GridLicensableFeature {
            feature_code: 0,
            feature_state: 0,
            license_info: [0; 128],
            product_name: [0; 128],
            feature_enabled: 0,
            license_expiry: GridLicenseExpiry {
                year: 0,
                month: 0,
                day: 0,
                hour: 0,
                min: 0,
                sec: 0,
                status: 0,
            },
        };
        let mut value = GridLicensableFeatures {
            is_grid_license_supported: g.supported as c_int,
            licensable_features_count: g.features.len() as c_uint,
            grid_licensable_features: [empty(), empty(), empty()],
        };
        for (slot, feat) in value.grid_licensable_features.iter_mut().zip(&g.features) {
            slot.feature_code = feat.code;
            slot.feature_state = feat.state;
            slot.feature_enabled = feat.enabled as c_uint;
            fill_chars(&mut slot.license_info, &feat.license_info);
            fill_chars(&mut slot.product_name, &feat.product_name);
        }
        unsafe { put(features, value) }
    })
}

/// The fixture's `gpu_instance_profiles` entry for `profile`; others are not supported.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfo(
    device: Handle,
    profile: c_uint,
    info: *mut GpuInstanceProfileInfo,
) -> Return {
    runtime::device("nvmlDeviceGetGpuInstanceProfileInfo", device, |_, t| {
        runtime::non_null(info)?;
        let Target::Gpu { dev, .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        dev.mig_mode.ok_or(ERROR_NOT_SUPPORTED)?;
        let p = dev
            .gpu_instance_profiles
            .iter()
            .find(|p| p.profile == profile)
            .ok_or(ERROR_NOT_SUPPORTED)?;
        unsafe {
            put(
                info,
                GpuInstanceProfileInfo {
                    id: p.id,
                    is_p2p_supported: 0,
                    slice_count: p.slice_count,
                    instance_count: p.instance_count,
                    multiprocessor_count: p.multiprocessor_count,
                    copy_engine_count: p.copy_engine_count,
                    decoder_count: p.decoder_count,
                    encoder_count: p.encoder_count,
                    jpeg_count: p.jpeg_count,
                    ofa_count: p.ofa_count,
                    memory_size_mb: p.memory_size_mb,
                },
            )
        }
    })
}

/// The GPU instance with this id: one exists for every distinct `gpu_instance_id` of the GPU's
/// MIG devices; any other id is `NVML_ERROR_NOT_FOUND`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceById(
    device: Handle,
    id: c_uint,
    gpu_instance: *mut GpuInstanceHandle,
) -> Return {
    runtime::device("nvmlDeviceGetGpuInstanceById", device, |_, t| {
        runtime::non_null(gpu_instance)?;
        let Target::Gpu { index, dev } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        if dev.mig_mode.is_none_or(|m| m.current != 1) {
            return Err(ERROR_NOT_SUPPORTED);
        }
        if !dev
            .mig_devices
            .iter()
            .any(|m| m.gpu_instance_id == Some(id))
        {
            return Err(ERROR_NOT_FOUND);
        }
        unsafe { put(gpu_instance, gpu_instance_handle(index, id as usize)) }
    })
}

/// Its id and profile id (`gpu_instance_profile_id` of its MIG devices; not supported when the
/// fixture leaves that out).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetInfo(
    gpu_instance: GpuInstanceHandle,
    info: *mut GpuInstanceInfo,
) -> Return {
    runtime::gpu_instance("nvmlGpuInstanceGetInfo", gpu_instance, |_, gpu, mig| {
        runtime::non_null(info)?;
        let profile_id = mig.gpu_instance_profile_id.ok_or(ERROR_NOT_SUPPORTED)?;
        unsafe {
            put(
                info,
                GpuInstanceInfo {
                    device: gpu_handle(gpu),
                    id: mig.gpu_instance_id.unwrap_or(0),
                    profile_id,
                    placement: GpuInstancePlacement { start: 0, size: 0 },
                },
            )
        }
    })
}

/// The compute instance with this id in the GPU instance: one exists for every MIG device of
/// that GPU instance (`compute_instance_id`); any other id is `NVML_ERROR_NOT_FOUND`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceById(
    gpu_instance: GpuInstanceHandle,
    id: c_uint,
    compute_instance: *mut ComputeInstanceHandle,
) -> Return {
    runtime::gpu_instance(
        "nvmlGpuInstanceGetComputeInstanceById",
        gpu_instance,
        |f, gpu, first| {
            runtime::non_null(compute_instance)?;
            let gi = first.gpu_instance_id.unwrap_or(0);
            let exists = f.devices[gpu]
                .mig_devices
                .iter()
                .any(|m| m.gpu_instance_id == Some(gi) && m.compute_instance_id == Some(id));
            if !exists {
                return Err(ERROR_NOT_FOUND);
            }
            unsafe {
                put(
                    compute_instance,
                    compute_instance_handle(gpu, gi as usize, id as usize),
                )
            }
        },
    )
}

/// The profile of this GPU instance's profile (`gpu_instance_profiles[].compute_instance_profiles`
/// of the profile with its `gpu_instance_profile_id`), by `NVML_COMPUTE_INSTANCE_PROFILE_*`
/// index; an index or engine profile past NVML's counts is an invalid argument, one the table
/// leaves out is not supported.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceProfileInfo(
    gpu_instance: GpuInstanceHandle,
    profile: c_uint,
    eng_profile: c_uint,
    info: *mut ComputeInstanceProfileInfo,
) -> Return {
    runtime::gpu_instance(
        "nvmlGpuInstanceGetComputeInstanceProfileInfo",
        gpu_instance,
        |f, gpu, mig| {
            runtime::non_null(info)?;
            if profile >= COMPUTE_INSTANCE_PROFILE_COUNT
                || eng_profile >= COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT
            {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            let gi_profile = mig.gpu_instance_profile_id.ok_or(ERROR_NOT_SUPPORTED)?;
            let p = f.devices[gpu]
                .gpu_instance_profiles
                .iter()
                .find(|p| p.id == gi_profile)
                .and_then(|p| {
                    p.compute_instance_profiles
                        .iter()
                        .find(|c| c.profile == profile)
                })
                .ok_or(ERROR_NOT_SUPPORTED)?;
            unsafe {
                put(
                    info,
                    ComputeInstanceProfileInfo {
                        id: p.id,
                        slice_count: p.slice_count,
                        instance_count: p.instance_count,
                        multiprocessor_count: p.multiprocessor_count,
                        shared_copy_engine_count: p.copy_engine_count,
                        shared_decoder_count: p.decoder_count,
                        shared_encoder_count: p.encoder_count,
                        shared_jpeg_count: p.jpeg_count,
                        shared_ofa_count: p.ofa_count,
                    },
                )
            }
        },
    )
}

/// Its GPU, GPU instance, id and profile id (`compute_instance_profile_id` of its MIG device;
/// not supported when the fixture leaves that out).
unsafe fn compute_instance_info(
    name: &str,
    compute_instance: ComputeInstanceHandle,
    info: *mut ComputeInstanceInfo,
) -> Return {
    runtime::compute_instance(
        name,
        compute_instance,
        |_: &Fixture, gpu, mig: &MigDevice| {
            runtime::non_null(info)?;
            let profile_id = mig.compute_instance_profile_id.ok_or(ERROR_NOT_SUPPORTED)?;
            let gi = mig.gpu_instance_id.unwrap_or(0);
            unsafe {
                put(
                    info,
                    ComputeInstanceInfo {
                        device: gpu_handle(gpu),
                        gpu_instance: gpu_instance_handle(gpu, gi as usize),
                        id: mig.compute_instance_id.unwrap_or(0),
                        profile_id,
                        placement: GpuInstancePlacement { start: 0, size: 0 },
                    },
                )
            }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlComputeInstanceGetInfo(
    compute_instance: ComputeInstanceHandle,
    info: *mut ComputeInstanceInfo,
) -> Return {
    unsafe { compute_instance_info("nvmlComputeInstanceGetInfo", compute_instance, info) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlComputeInstanceGetInfo_v2(
    compute_instance: ComputeInstanceHandle,
    info: *mut ComputeInstanceInfo,
) -> Return {
    unsafe { compute_instance_info("nvmlComputeInstanceGetInfo_v2", compute_instance, info) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfo(
    device: Handle,
    info: *mut GpuFabricInfo,
) -> Return {
    runtime::device("nvmlDeviceGetGpuFabricInfo", device, |_, t| {
        runtime::non_null(info)?;
        let Target::Gpu { dev, .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        let fabric = dev.fabric.as_ref().ok_or(ERROR_NOT_SUPPORTED)?;
        unsafe {
            put(
                info,
                GpuFabricInfo {
                    cluster_uuid: fabric.cluster_uuid_bytes().unwrap_or([0; 16]),
                    status: fabric.status.map_or(0, |e| e.0),
                    clique_id: fabric.clique_id,
                    state: fabric.state,
                },
            )
        }
    })
}

/// `remapped_rows` (A100 and later; R450).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: Handle,
    corr_rows: *mut c_uint,
    unc_rows: *mut c_uint,
    is_pending: *mut c_uint,
    failure_occurred: *mut c_uint,
) -> Return {
    runtime::device("nvmlDeviceGetRemappedRows", device, |_, t| {
        for p in [corr_rows, unc_rows, is_pending, failure_occurred] {
            runtime::non_null(p)?;
        }
        let Target::Gpu { dev, .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        let r = dev.remapped_rows.as_ref().ok_or(ERROR_NOT_SUPPORTED)?;
        unsafe {
            put(corr_rows, r.correctable)?;
            put(unc_rows, r.uncorrectable)?;
            put(is_pending, c_uint::from(r.pending))?;
            put(failure_occurred, c_uint::from(r.failure))
        }
    })
}

/// The clocks event reasons' mask under its R535 name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksEventReasons(
    device: Handle,
    reasons: *mut std::ffi::c_ulonglong,
) -> Return {
    runtime::device("nvmlDeviceGetCurrentClocksEventReasons", device, |_, t| {
        runtime::non_null(reasons)?;
        let v = t.gpu().clocks_event_mask().ok_or(ERROR_NOT_SUPPORTED)?;
        unsafe { put(reasons, v) }
    })
}

/// The wait with MIG instance ids (R450): XID events are about a whole GPU, so the ids are
/// `0xFFFFFFFF` (NVML's "not a MIG device").
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: EventSetHandle,
    data: *mut EventData,
    timeoutms: c_uint,
) -> Return {
    runtime::event_wait("nvmlEventSetWait_v2", set, timeoutms, |d| unsafe {
        put(
            data,
            EventData {
                device: gpu_handle(d.gpu),
                event_type: EVENT_TYPE_XID_CRITICAL_ERROR,
                event_data: d.xid,
                gpu_instance_id: u32::MAX,
                compute_instance_id: u32::MAX,
            },
        )
    })
}

/// The versioned fabric query (R550): `version` v2 (health mask) or v3 (and health summary);
/// another version is `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfoV(
    device: Handle,
    info: *mut GpuFabricInfoV3,
) -> Return {
    runtime::device("nvmlDeviceGetGpuFabricInfoV", device, |_, t| {
        runtime::non_null(info)?;
        // SAFETY: non-null; the caller sets `version` first, as NVML's contract says.
        let version = unsafe { (*info).version };
        if version != GPU_FABRIC_INFO_V2 && version != GPU_FABRIC_INFO_V3 {
            return Err(ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        let Target::Gpu { dev, .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        let fabric = dev.fabric.as_ref().ok_or(ERROR_NOT_SUPPORTED)?;
        // SAFETY: the caller's struct is at least the v2 size; the v3 field only for v3.
        unsafe {
            (*info).cluster_uuid = fabric.cluster_uuid_bytes().unwrap_or([0; 16]);
            (*info).status = fabric.status.map_or(0, |e| e.0);
            (*info).clique_id = fabric.clique_id;
            (*info).state = fabric.state;
            (*info).health_mask = fabric.health_mask;
            if version == GPU_FABRIC_INFO_V3 {
                (*info).health_summary = fabric.health_summary;
            }
        }
        Ok(())
    })
}

/// `nvlink_remotes[link].device_type` (a MIG handle answers for its parent).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemoteDeviceType(
    device: Handle,
    link: c_uint,
    device_type: *mut c_uint,
) -> Return {
    runtime::device("nvmlDeviceGetNvLinkRemoteDeviceType", device, |_, t| {
        runtime::non_null(device_type)?;
        let remotes = t.gpu().nvlink_remotes.as_ref().ok_or(ERROR_NOT_SUPPORTED)?;
        let r = remotes.get(link as usize).ok_or(ERROR_INVALID_ARGUMENT)?;
        unsafe { put(device_type, r.device_type as c_uint) }
    })
}
