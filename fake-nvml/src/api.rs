//! The NVML functions every driver generation has (including a pre-R450 one).
//!
//! On a MIG device handle, the physical properties (PCI info, architecture, brand,
//! virtualization mode) are the parent GPU's; name, UUID and memory are the MIG device's own;
//! index, minor number, serial and board part number are `NVML_ERROR_NOT_SUPPORTED`.

use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong};

use crate::ctypes::*;
use crate::fixture::{Fixture, parse_bus_id};
use crate::runtime::{self, About, Target, fill_chars, gpu_handle, mig_handle, put, put_str};

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> Return {
    runtime::init("nvmlInit_v2")
}

/// Flags (`NVML_INIT_FLAG_NO_GPUS`, `NVML_INIT_FLAG_NO_ATTACH`) change nothing here: a fixture
/// without devices initialises either way.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> Return {
    runtime::init("nvmlInitWithFlags")
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> Return {
    runtime::shutdown("nvmlShutdown")
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: Return) -> *const c_char {
    runtime::error_string(result)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> Return {
    runtime::system("nvmlSystemGetDriverVersion", |f| unsafe {
        put_str(version, length, f.driver_version.as_deref())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(version: *mut c_char, length: c_uint) -> Return {
    runtime::system("nvmlSystemGetNVMLVersion", |f| unsafe {
        put_str(version, length, f.nvml_version.as_deref())
    })
}

/// Shared by `nvmlSystemGetCudaDriverVersion` and its `_v2`.
pub unsafe fn cuda_driver_version(f: &Fixture, out: *mut c_int) -> Result<(), Return> {
    runtime::non_null(out)?;
    let v = f.cuda_driver_version.ok_or(ERROR_NOT_SUPPORTED)?;
    unsafe { put(out, v) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(cuda_driver_version: *mut c_int) -> Return {
    runtime::system("nvmlSystemGetCudaDriverVersion", |f| unsafe {
        self::cuda_driver_version(f, cuda_driver_version)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(device_count: *mut c_uint) -> Return {
    runtime::system("nvmlDeviceGetCount_v2", |f| unsafe {
        put(device_count, f.devices.len() as c_uint)
    })
}

/// A `device_errors` entry for the index makes this fail too, as NVML does for a GPU that fell
/// off the bus.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut Handle,
) -> Return {
    let about = About {
        gpu: index as usize,
        mig: None,
    };
    runtime::indexed("nvmlDeviceGetHandleByIndex_v2", about, |f| {
        runtime::non_null(device)?;
        if about.gpu >= f.devices.len() {
            return Err(ERROR_INVALID_ARGUMENT);
        }
        unsafe { put(device, gpu_handle(about.gpu)) }
    })
}

/// Finds a GPU or MIG device by `matches`, applying the faults of the device found.
unsafe fn lookup(
    f: &Fixture,
    name: &str,
    out: *mut Handle,
    matches: impl Fn(&crate::fixture::Device, Option<&crate::fixture::MigDevice>) -> bool,
) -> Result<(), Return> {
    runtime::non_null(out)?;
    for (g, dev) in f.devices.iter().enumerate() {
        if matches(dev, None) {
            runtime::injected(f, name, Some(About { gpu: g, mig: None }))?;
            return unsafe { put(out, gpu_handle(g)) };
        }
        for (m, mig) in dev.mig_devices.iter().enumerate() {
            if matches(dev, Some(mig)) {
                runtime::injected(
                    f,
                    name,
                    Some(About {
                        gpu: g,
                        mig: Some(m),
                    }),
                )?;
                return unsafe { put(out, mig_handle(g, m)) };
            }
        }
    }
    Err(ERROR_NOT_FOUND)
}

/// Reads a caller's C string argument.
unsafe fn arg_str<'a>(p: *const c_char) -> Result<&'a str, Return> {
    runtime::non_null(p)?;
    // SAFETY: NVML's contract: a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map_err(|_| ERROR_INVALID_ARGUMENT)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut Handle,
) -> Return {
    let name = "nvmlDeviceGetHandleByUUID";
    runtime::system(name, |f| unsafe {
        let wanted = arg_str(uuid)?;
        lookup(f, name, device, |d, mig| match mig {
            None => d.uuid.as_deref() == Some(wanted),
            Some(m) => m.uuid.as_deref() == Some(wanted),
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    pci_bus_id: *const c_char,
    device: *mut Handle,
) -> Return {
    let name = "nvmlDeviceGetHandleByPciBusId_v2";
    runtime::system(name, |f| unsafe {
        let wanted = parse_bus_id(arg_str(pci_bus_id)?).ok_or(ERROR_INVALID_ARGUMENT)?;
        lookup(f, name, device, |d, mig| {
            mig.is_none() && d.pci_bus_id.as_deref().and_then(parse_bus_id) == Some(wanted)
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: Handle,
    name: *mut c_char,
    length: c_uint,
) -> Return {
    runtime::device("nvmlDeviceGetName", device, |_, t| {
        let value = match t {
            Target::Gpu { dev, .. } => dev.name.as_deref(),
            Target::Mig { mig, .. } => mig.name.as_deref(),
        };
        unsafe { put_str(name, length, value) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: Handle,
    uuid: *mut c_char,
    length: c_uint,
) -> Return {
    runtime::device("nvmlDeviceGetUUID", device, |_, t| {
        let value = match t {
            Target::Gpu { dev, .. } => dev.uuid.as_deref(),
            Target::Mig { mig, .. } => mig.uuid.as_deref(),
        };
        unsafe { put_str(uuid, length, value) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(device: Handle, pci: *mut PciInfo) -> Return {
    runtime::device("nvmlDeviceGetPciInfo_v3", device, |_, t| {
        runtime::non_null(pci)?;
        let dev = t.gpu();
        let bus_id = dev.pci_bus_id.as_deref().ok_or(ERROR_NOT_SUPPORTED)?;
        let (domain, bus, device) = parse_bus_id(bus_id).ok_or(ERROR_NOT_SUPPORTED)?;
        let mut info = PciInfo {
            bus_id_legacy: [0; 16],
            domain,
            bus,
            device,
            pci_device_id: dev.pci_device_id.map_or(0, |v| v.0),
            pci_sub_system_id: dev.pci_subsystem_id.map_or(0, |v| v.0),
            bus_id: [0; 32],
        };
        // NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT is "%04X:%02X:%02X.0".
        let legacy = format!("{domain:04X}:{bus:02X}:{device:02X}.0");
        fill_chars(&mut info.bus_id_legacy, &legacy);
        fill_chars(&mut info.bus_id, bus_id);
        unsafe { put(pci, info) }
    })
}

/// (total, reserved, used) of a GPU or MIG device.
fn memory_of(t: Target<'_>) -> Result<(u64, u64, u64), Return> {
    let (total, reserved, used) = match t {
        Target::Gpu { dev, .. } => (
            dev.memory_total_bytes,
            dev.memory_reserved_bytes,
            dev.memory_used_bytes,
        ),
        Target::Mig { mig, .. } => (
            mig.memory_total_bytes,
            mig.memory_reserved_bytes,
            mig.memory_used_bytes,
        ),
    };
    Ok((total.ok_or(ERROR_NOT_SUPPORTED)?, reserved, used))
}

/// The v1 struct has no `reserved`: NVML counts it as used there.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(device: Handle, memory: *mut Memory) -> Return {
    runtime::device("nvmlDeviceGetMemoryInfo", device, |_, t| {
        runtime::non_null(memory)?;
        let (total, reserved, used) = memory_of(t)?;
        let used = used.saturating_add(reserved);
        let free = total.saturating_sub(used);
        unsafe { put(memory, Memory { total, free, used }) }
    })
}

/// Checks `version` as NVML does (`NVML_STRUCT_VERSION(Memory, 2)`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: Handle,
    memory: *mut MemoryV2,
) -> Return {
    runtime::device("nvmlDeviceGetMemoryInfo_v2", device, |_, t| {
        runtime::non_null(memory)?;
        // SAFETY: non-null; the caller passes an nvmlMemory_v2_t with its version set.
        if unsafe { (*memory).version } != MEMORY_V2_VERSION {
            return Err(ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        let (total, reserved, used) = memory_of(t)?;
        let free = total.saturating_sub(reserved).saturating_sub(used);
        let value = MemoryV2 {
            version: MEMORY_V2_VERSION,
            total,
            reserved,
            free,
            used,
        };
        unsafe { put(memory, value) }
    })
}

/// A value of the physical GPU (the parent, for a MIG handle), or not supported.
unsafe fn put_gpu_value<T>(
    name: &str,
    device: Handle,
    out: *mut T,
    get: impl Fn(&crate::fixture::Device) -> Option<T>,
) -> Return {
    runtime::device(name, device, |_, t| {
        runtime::non_null(out)?;
        let v = get(t.gpu()).ok_or(ERROR_NOT_SUPPORTED)?;
        unsafe { put(out, v) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetArchitecture(device: Handle, arch: *mut c_uint) -> Return {
    unsafe {
        put_gpu_value("nvmlDeviceGetArchitecture", device, arch, |d| {
            d.architecture
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetBrand(device: Handle, type_: *mut c_uint) -> Return {
    unsafe { put_gpu_value("nvmlDeviceGetBrand", device, type_, |d| d.brand) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetVirtualizationMode(
    device: Handle,
    mode: *mut c_uint,
) -> Return {
    unsafe {
        put_gpu_value("nvmlDeviceGetVirtualizationMode", device, mode, |d| {
            d.virtualization_mode
        })
    }
}

/// A value only a whole GPU has; not supported on a MIG handle.
unsafe fn put_whole_gpu_value<T>(
    name: &str,
    device: Handle,
    out: *mut T,
    get: impl Fn(usize, &crate::fixture::Device) -> Option<T>,
) -> Return {
    runtime::device(name, device, |_, t| {
        runtime::non_null(out)?;
        let v = match t {
            Target::Gpu { index, dev } => get(index, dev),
            Target::Mig { .. } => None,
        };
        unsafe { put(out, v.ok_or(ERROR_NOT_SUPPORTED)?) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetIndex(device: Handle, index: *mut c_uint) -> Return {
    unsafe {
        put_whole_gpu_value("nvmlDeviceGetIndex", device, index, |i, _| {
            Some(i as c_uint)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(
    device: Handle,
    minor_number: *mut c_uint,
) -> Return {
    unsafe {
        put_whole_gpu_value("nvmlDeviceGetMinorNumber", device, minor_number, |_, d| {
            d.minor_number
        })
    }
}

/// A string only a whole GPU has; not supported on a MIG handle.
unsafe fn put_whole_gpu_str(
    name: &str,
    device: Handle,
    buf: *mut c_char,
    length: c_uint,
    get: impl Fn(&crate::fixture::Device) -> Option<&str>,
) -> Return {
    runtime::device(name, device, |_, t| {
        let value = match t {
            Target::Gpu { dev, .. } => get(dev),
            Target::Mig { .. } => None,
        };
        unsafe { put_str(buf, length, value) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetBoardPartNumber(
    device: Handle,
    part_number: *mut c_char,
    length: c_uint,
) -> Return {
    unsafe {
        put_whole_gpu_str(
            "nvmlDeviceGetBoardPartNumber",
            device,
            part_number,
            length,
            |d| d.board_part_number.as_deref(),
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSerial(
    device: Handle,
    serial: *mut c_char,
    length: c_uint,
) -> Return {
    unsafe {
        put_whole_gpu_str("nvmlDeviceGetSerial", device, serial, length, |d| {
            d.serial.as_deref()
        })
    }
}

/// `nvlinks[link]` of the GPU (a MIG handle answers for its parent, as NVML does).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: Handle,
    link: c_uint,
    is_active: *mut c_uint,
) -> Return {
    runtime::device("nvmlDeviceGetNvLinkState", device, |_, t| {
        runtime::non_null(is_active)?;
        let links = t.gpu().nvlinks.as_ref().ok_or(ERROR_NOT_SUPPORTED)?;
        let active = *links.get(link as usize).ok_or(ERROR_INVALID_ARGUMENT)?;
        unsafe { put(is_active, active as c_uint) }
    })
}

/// `nvlink_remotes[link].pci_bus_id`, as `nvmlDeviceGetPciInfo_v3` fills a GPU's own.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    device: Handle,
    link: c_uint,
    pci: *mut PciInfo,
) -> Return {
    runtime::device("nvmlDeviceGetNvLinkRemotePciInfo_v2", device, |_, t| {
        runtime::non_null(pci)?;
        let remotes = t.gpu().nvlink_remotes.as_ref().ok_or(ERROR_NOT_SUPPORTED)?;
        let r = remotes.get(link as usize).ok_or(ERROR_INVALID_ARGUMENT)?;
        let (domain, bus, dev) = parse_bus_id(&r.pci_bus_id).ok_or(ERROR_NOT_SUPPORTED)?;
        let mut info = PciInfo {
            bus_id_legacy: [0; 16],
            domain,
            bus,
            device: dev,
            pci_device_id: 0,
            pci_sub_system_id: 0,
            bus_id: [0; 32],
        };
        let legacy = format!("{domain:04X}:{bus:02X}:{dev:02X}.0");
        fill_chars(&mut info.bus_id_legacy, &legacy);
        fill_chars(&mut info.bus_id, &r.pci_bus_id);
        unsafe { put(pci, info) }
    })
}

/// `ecc_errors`: `error_type` 0 corrected, 1 uncorrected; `counter_type` 0 volatile, 1
/// aggregate.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: Handle,
    error_type: c_uint,
    counter_type: c_uint,
    ecc_counts: *mut c_ulonglong,
) -> Return {
    runtime::device("nvmlDeviceGetTotalEccErrors", device, |_, t| {
        runtime::non_null(ecc_counts)?;
        let Target::Gpu { dev, .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        let e = dev.ecc_errors.as_ref().ok_or(ERROR_NOT_SUPPORTED)?;
        let v = match (error_type, counter_type) {
            (0, 0) => e.volatile_corrected,
            (1, 0) => e.volatile_uncorrected,
            (0, 1) => e.aggregate_corrected,
            (1, 1) => e.aggregate_uncorrected,
            _ => return Err(ERROR_INVALID_ARGUMENT),
        };
        unsafe { put(ecc_counts, v) }
    })
}

/// `retired_pages`: `cause` 0 multiple single-bit ECC errors, 1 a double-bit ECC error. The
/// addresses are made up (page numbers 1..), as a capture has only the counts. With
/// `*page_count` 0 (or too small), NVML's size query: the count, and
/// `NVML_ERROR_INSUFFICIENT_SIZE` when there are pages.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: Handle,
    cause: c_uint,
    page_count: *mut c_uint,
    addresses: *mut c_ulonglong,
) -> Return {
    runtime::device("nvmlDeviceGetRetiredPages", device, |_, t| {
        runtime::non_null(page_count)?;
        let Target::Gpu { dev, .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        let r = dev.retired_pages.as_ref().ok_or(ERROR_NOT_SUPPORTED)?;
        let n = match cause {
            0 => r.single_bit_ecc,
            1 => r.double_bit_ecc,
            _ => return Err(ERROR_INVALID_ARGUMENT),
        };
        // SAFETY: non-null; the caller's count says how many addresses fit.
        let room = unsafe { *page_count };
        unsafe { put(page_count, n)? };
        if n == 0 {
            return Ok(());
        }
        if room < n {
            return Err(ERROR_INSUFFICIENT_SIZE);
        }
        runtime::non_null(addresses)?;
        for i in 0..n {
            // SAFETY: the buffer holds `room` >= n addresses.
            unsafe { addresses.add(i as usize).write(u64::from(i) + 1) };
        }
        Ok(())
    })
}

/// `retired_pages.pending` (`nvmlEnableState_t`: 1 pending).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    device: Handle,
    is_pending: *mut c_uint,
) -> Return {
    runtime::device("nvmlDeviceGetRetiredPagesPendingStatus", device, |_, t| {
        runtime::non_null(is_pending)?;
        let Target::Gpu { dev, .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        let r = dev.retired_pages.as_ref().ok_or(ERROR_NOT_SUPPORTED)?;
        unsafe { put(is_pending, c_uint::from(r.pending)) }
    })
}

/// The clocks event reasons' mask, under its name before R535 (every driver still exports it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: Handle,
    reasons: *mut c_ulonglong,
) -> Return {
    unsafe {
        put_gpu_value(
            "nvmlDeviceGetCurrentClocksThrottleReasons",
            device,
            reasons,
            |d| d.clocks_event_mask(),
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut EventSetHandle) -> Return {
    runtime::event_set_create("nvmlEventSetCreate", set)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetFree(set: EventSetHandle) -> Return {
    runtime::event_set_free("nvmlEventSetFree", set)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceRegisterEvents(
    device: Handle,
    event_types: c_ulonglong,
    set: EventSetHandle,
) -> Return {
    runtime::register_events("nvmlDeviceRegisterEvents", device, event_types, set)
}

/// Every GPU supports `runtime::SUPPORTED_EVENTS` (single- and double-bit ECC, critical XID).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: Handle,
    event_types: *mut c_ulonglong,
) -> Return {
    runtime::device("nvmlDeviceGetSupportedEventTypes", device, |_, t| {
        runtime::non_null(event_types)?;
        let Target::Gpu { .. } = t else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        unsafe { put(event_types, runtime::SUPPORTED_EVENTS) }
    })
}

/// The wait of drivers before R450 (its `nvmlEventData_t` has no MIG instance ids).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait(
    set: EventSetHandle,
    data: *mut EventDataV1,
    timeoutms: c_uint,
) -> Return {
    runtime::event_wait("nvmlEventSetWait", set, timeoutms, |d| unsafe {
        put(
            data,
            EventDataV1 {
                device: gpu_handle(d.gpu),
                event_type: EVENT_TYPE_XID_CRITICAL_ERROR,
                event_data: d.xid,
            },
        )
    })
}
