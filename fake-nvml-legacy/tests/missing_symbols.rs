//! Loads the built `libnvidia_ml_legacy.so` through nvml-wrapper: the functions a pre-R450
//! driver lacks are missing symbols (`FailedToLoadSymbol`), everything else still works.

use std::path::{Path, PathBuf};

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

/// target/debug/deps/missing_symbols-HASH -> target/debug/deps/libnvidia_ml_legacy.so, which
/// `cargo test` refreshes (the copy in target/debug only on `cargo build`).
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().join("libnvidia_ml_legacy.so");
    assert!(lib.exists(), "{} not built", lib.display());
    lib
}

fn is_missing_symbol<T>(r: Result<T, NvmlError>) -> bool {
    matches!(r, Err(NvmlError::FailedToLoadSymbol(_)))
}

// The only test in this binary, so nothing else reads the environment meanwhile.
#[test]
fn a_pre_r450_library_lacks_mig_compute_capability_and_cuda_v2() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/nvml/h100-8x.json");
    // SAFETY: single-threaded: this binary has one test.
    unsafe { std::env::set_var("FAKE_NVML_FIXTURE", &fixture) };
    let lib = library();
    let nvml = Nvml::builder().lib_path(lib.as_os_str()).init().unwrap();

    assert_eq!(nvml.sys_driver_version().unwrap(), "535.161.08");
    assert!(is_missing_symbol(nvml.sys_cuda_driver_version()));
    assert_eq!(nvml.device_count().unwrap(), 8);
    let dev = nvml.device_by_index(0).unwrap();
    assert_eq!(dev.name().unwrap(), "NVIDIA H100 80GB HBM3");
    assert_eq!(dev.memory_info().unwrap().total, 81559 * 1024 * 1024);
    assert_eq!(dev.pci_info().unwrap().bus_id, "00000000:19:00.0");
    assert!(is_missing_symbol(dev.cuda_compute_capability()));
    assert!(is_missing_symbol(dev.mig_mode()));
    assert!(is_missing_symbol(dev.mig_device_count()));
    assert!(is_missing_symbol(dev.mig_device_by_index(0)));
    assert!(is_missing_symbol(dev.mig_is_mig_device_handle()));
    assert!(is_missing_symbol(dev.attributes()));
}
