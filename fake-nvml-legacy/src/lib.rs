//! `fake-nvml` as a pre-R450 driver's library: the same source without `api_modern`, so the
//! MIG functions, `nvmlDeviceGetCudaComputeCapability`, `nvmlSystemGetCudaDriverVersion_v2`,
//! `nvmlSystemGetDriverBranch`, `nvmlDeviceGetGridLicensableFeatures_v4`, the fabric functions,
//! `nvmlDeviceGetRemappedRows`, `nvmlDeviceGetCurrentClocksEventReasons` (R535's name; the old
//! `…ThrottleReasons` stays) and `nvmlEventSetWait_v2` (the v1 wait stays) are not exported at
//! all (nvml-wrapper reports `FailedToLoadSymbol` for them). Built as `libnvidia_ml_legacy.so`.

#![allow(non_snake_case)]
// Helpers only `api_modern` uses are compiled but unused here.
#![allow(dead_code)]

#[path = "../../fake-nvml/src/api.rs"]
mod api;
#[path = "../../fake-nvml/src/ctypes.rs"]
mod ctypes;
#[path = "../../fake-nvml/src/fixture.rs"]
mod fixture;
#[path = "../../fake-nvml/src/runtime.rs"]
mod runtime;
