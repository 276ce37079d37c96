//! A test double for NVIDIA's NVML library (`libnvidia-ml.so`), built as `libnvidia_ml.so`.
//!
//! gpu-labeler loads it through nvml-wrapper exactly as it loads the real library, so tests
//! exercise the real dlopen and per-symbol lookup. `fake-nvml-legacy` compiles these files
//! without `api_modern`, for a library that truly lacks those symbols (nvml-wrapper's
//! `FailedToLoadSymbol`).
//!
//! - `FAKE_NVML_FIXTURE=<file.json>` is read at every `nvmlInit_v2`/`nvmlInitWithFlags` (unset,
//!   unreadable or invalid: `NVML_ERROR_UNKNOWN`, with the reason on stderr). Schema: `fixture.rs`;
//!   real-capture fixtures: `tests/fixtures/nvml/` in the workspace. Init and shutdown are
//!   reference-counted as in NVML; calls before init are `NVML_ERROR_UNINITIALIZED`. Like a real
//!   driver, which answers with the GPUs' state of the moment, the fake reads the file again
//!   when it changes (modification time or length) while initialised: a test rewrites it to
//!   reconfigure MIG or lose a GPU under a running process.
//! - `FAKE_NVML_TRACE=<file>` appends one line per call (`nvmlDeviceGetName 3`, `… 3:1` for a
//!   MIG device), for tests that check what was asked.
//! - A value the fixture leaves out is `NVML_ERROR_NOT_SUPPORTED`; a null out-pointer or an
//!   unknown handle is `NVML_ERROR_INVALID_ARGUMENT`; a panic is `NVML_ERROR_UNKNOWN`.
//! - Faults (`faults` in the fixture), checked in this order: `not_found` functions return
//!   `NVML_ERROR_FUNCTION_NOT_FOUND`; `device_errors` (GPU index -> error) fail every call about
//!   that GPU, including `nvmlDeviceGetHandleByIndex_v2` for it and calls on its MIG devices;
//!   `errors` rules (`function`, `gpu`, `mig`, `error`; unset fields match anything) fail the
//!   first matching call, e.g. one MIG slot in `nvmlDeviceGetMigDeviceHandleByIndex`.
//! - `misbehave` rules (`function`, `gpu`, `mig`, `action`) make the first matching call, init
//!   included, `hang` forever, die of `segv`, `exit` the process (status 3), or write to
//!   `stdout` before answering: what a wedged or broken driver does to its caller.
//! - Handles are addresses in a static table (GPUs, then 8 MIG slots per GPU; GPU instances by
//!   id in a second table), so they stay valid and distinct for the life of the process.
//! - MIG profiles: `gpu_instance_profiles` (a GPU's `nvidia-smi mig -lgip` table, by
//!   `NVML_GPU_INSTANCE_PROFILE_*` index) and each MIG device's `gpu_instance_profile_id` answer
//!   `nvmlDeviceGetGpuInstanceProfileInfo`, `nvmlDeviceGetGpuInstanceById` and
//!   `nvmlGpuInstanceGetInfo`, as go-nvlib uses them to name a profile (`1g.10gb+me`).
//! - Compute instances: each MIG device's `compute_instance_id` and
//!   `compute_instance_profile_id`, and each GPU instance profile's `compute_instance_profiles`
//!   (`nvidia-smi mig -lcip`), answer `nvmlGpuInstanceGetComputeInstanceById`,
//!   `nvmlComputeInstanceGetInfo(_v2)` and `nvmlGpuInstanceGetComputeInstanceProfileInfo`, the
//!   calls go-nvlib names `1c.3g.20gb` with.
//! - `nvlinks` (per link: active or not) answers `nvmlDeviceGetNvLinkState`; `fabric` answers
//!   `nvmlDeviceGetGpuFabricInfo` (state, status, cluster UUID, clique id).
//! - Health: `ecc_errors` answers `nvmlDeviceGetTotalEccErrors`; `retired_pages`
//!   `nvmlDeviceGetRetiredPages(PendingStatus)`; `remapped_rows` `nvmlDeviceGetRemappedRows`;
//!   `clocks_event_reasons` (names) `nvmlDeviceGetCurrentClocksEventReasons` and its older name
//!   `…ThrottleReasons`; `fabric.health_mask`/`health_summary` `nvmlDeviceGetGpuFabricInfoV`.
//! - Events: `nvmlEventSetCreate`/`Free`, `nvmlDeviceRegisterEvents` and
//!   `nvmlDeviceGetSupportedEventTypes` (single/double-bit ECC and critical XID on every GPU);
//!   `nvmlEventSetWait(_v2)` delivers each of the fixture's `xid_events` once to every set that
//!   registered its GPU, once the set is `at_ms` old, else waits up to its timeout (polling the
//!   fixture, without the library's lock) and answers `NVML_ERROR_TIMEOUT`. A `misbehave` `hang`
//!   rule for the wait function makes it never return, also without the lock.
//! - `faults.not_found` may not name a function that the fixture's driver (before R450) would
//!   not export at all: such a driver's library is `fake-nvml-legacy`, which lacks the symbol.

// The exported names are NVML's, not Rust's.
#![allow(non_snake_case)]

mod api;
mod api_modern;
mod ctypes;
mod fixture;
mod runtime;
