//! NVML calls shared by the scan and the health checks: a value a GPU or driver may not
//! support, and the fabric query nvml-wrapper does not wrap.

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

/// An NVML value that may be unsupported on this GPU or driver: unsupported is `None` quietly,
/// any other error is `None` with a warning.
pub(super) fn optional<T>(
    what: &str,
    r: Result<T, NvmlError>,
    warnings: &mut Vec<String>,
) -> Option<T> {
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

/// `NVML_GPU_FABRIC_STATE_COMPLETED`.
pub(super) const FABRIC_STATE_COMPLETED: u8 = 3;

/// `nvmlDeviceGetGpuFabricInfo` (R530 and later; nvml-wrapper does not wrap it): `None` when
/// the library lacks the symbol.
pub(super) fn fabric_info(
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
