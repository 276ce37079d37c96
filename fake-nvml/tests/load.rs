//! Loads the built `libnvidia_ml.so` through nvml-wrapper, as gpu-labeler does, and checks that
//! each fixture's values and faults come back exactly.

use std::ffi::{CStr, OsStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Brand, GpuVirtualizationMode};
use nvml_wrapper::enums::device::DeviceArchitecture;
use nvml_wrapper::error::NvmlError;
use serde_json::Value;

const MIB: u64 = 1024 * 1024;

/// The fixture is chosen by environment variable and NVML state is per process, so the tests
/// take turns.
static TURN: Mutex<()> = Mutex::new(());

fn turn() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// target/debug/deps/load-HASH -> target/debug/deps/libnvidia_ml.so: `cargo test` refreshes the
/// library there (the copy in target/debug only on `cargo build`).
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().join("libnvidia_ml.so");
    assert!(lib.exists(), "{} not built", lib.display());
    lib
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/nvml")
        .join(name)
}

/// Points the library at `fixture` (or at nothing) and initialises NVML.
fn open(fixture: Option<&Path>) -> Result<Nvml, NvmlError> {
    // SAFETY: every test holds `TURN` while it changes or reads the environment.
    unsafe {
        match fixture {
            Some(f) => std::env::set_var("FAKE_NVML_FIXTURE", f),
            None => std::env::remove_var("FAKE_NVML_FIXTURE"),
        }
        std::env::remove_var("FAKE_NVML_TRACE");
    }
    let lib = library();
    Nvml::builder().lib_path(lib.as_os_str()).init()
}

/// The name of the error variant (`NvmlError` has no `PartialEq`), or "Ok".
fn err<T>(r: Result<T, NvmlError>) -> String {
    match r {
        Ok(_) => "Ok".to_string(),
        Err(e) => format!("{e:?}").split('(').next().unwrap().to_string(),
    }
}

fn write_temp(name: &str, text: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn h100_8x_values_come_back_exactly() {
    let _turn = turn();
    let nvml = open(Some(&fixture("h100-8x.json"))).unwrap();
    assert_eq!(nvml.sys_driver_version().unwrap(), "535.161.08");
    assert_eq!(nvml.sys_nvml_version().unwrap(), "12.535.161.08");
    assert_eq!(nvml.sys_cuda_driver_version().unwrap(), 12020);
    assert_eq!(nvml.device_count().unwrap(), 8);

    let dev = nvml.device_by_index(0).unwrap();
    assert_eq!(dev.name().unwrap(), "NVIDIA H100 80GB HBM3");
    assert_eq!(
        dev.uuid().unwrap(),
        "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"
    );
    let pci = dev.pci_info().unwrap();
    assert_eq!(pci.bus_id, "00000000:19:00.0");
    assert_eq!((pci.domain, pci.bus, pci.device), (0, 0x19, 0));
    assert_eq!(pci.pci_device_id, 0x2330_10DE);
    assert_eq!(pci.pci_sub_system_id, Some(0x16C1_10DE));
    let mem = dev.memory_info().unwrap();
    assert_eq!(mem.total, 81559 * MIB);
    assert_eq!(mem.total, 85_520_809_984);
    assert_eq!(mem.reserved, 551 * MIB);
    assert_eq!(mem.used, 0);
    assert_eq!(mem.free, (81559 - 551) * MIB);
    let cc = dev.cuda_compute_capability().unwrap();
    assert_eq!((cc.major, cc.minor), (9, 0));
    assert_eq!(dev.architecture().unwrap(), DeviceArchitecture::Hopper);
    assert_eq!(dev.brand().unwrap(), Brand::Nvidia);
    let mig = dev.mig_mode().unwrap();
    assert_eq!((mig.current, mig.pending), (0, 0));
    assert_eq!(dev.mig_device_count().unwrap(), 7);
    assert_eq!(err(dev.mig_device_by_index(0)), "NotFound");
    assert!(!dev.mig_is_mig_device_handle().unwrap());
    assert_eq!(err(dev.attributes()), "NotSupported");
    assert_eq!(
        dev.virtualization_mode().unwrap(),
        GpuVirtualizationMode::Bare
    );
    assert_eq!(dev.serial().unwrap(), "1650124031592");
    assert_eq!(dev.board_part_number().unwrap(), "692-2G520-0200-000");
    assert_eq!(dev.minor_number().unwrap(), 0);
    assert_eq!(dev.index().unwrap(), 0);

    let last = nvml.device_by_index(7).unwrap();
    assert_eq!(last.pci_info().unwrap().bus_id, "00000000:DB:00.0");
    assert_eq!(last.index().unwrap(), 7);
    assert_eq!(err(nvml.device_by_index(8)), "InvalidArg");

    // Lookups by UUID and bus id (either format) find the same GPU.
    let by_uuid = nvml
        .device_by_uuid("GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa")
        .unwrap();
    assert_eq!(by_uuid.index().unwrap(), 0);
    assert_eq!(
        nvml.device_by_pci_bus_id("0000:DB:00.0")
            .unwrap()
            .index()
            .unwrap(),
        7
    );
    assert_eq!(err(nvml.device_by_uuid("GPU-nope")), "NotFound");

    // The raw C API: the v1 memory struct counts reserved memory as used; CUDA version v1.
    unsafe {
        let mut v1 = std::mem::zeroed();
        assert_eq!(nvml.lib().nvmlDeviceGetMemoryInfo(dev.handle(), &mut v1), 0);
        assert_eq!(
            (v1.total, v1.used, v1.free),
            (81559 * MIB, 551 * MIB, 81008 * MIB)
        );
        let mut cuda = 0;
        assert_eq!(nvml.lib().nvmlSystemGetCudaDriverVersion(&mut cuda), 0);
        assert_eq!(cuda, 12020);
        // Null out-pointers are invalid arguments, never a crash.
        let null = std::ptr::null_mut();
        assert_eq!(nvml.lib().nvmlDeviceGetMemoryInfo(dev.handle(), null), 2);
        assert_eq!(nvml.lib().nvmlDeviceGetCount_v2(std::ptr::null_mut()), 2);
        let gone = CStr::from_ptr(nvml.lib().nvmlErrorString(15));
        assert_eq!(gone.to_str().unwrap(), "GPU is lost");
    }
}

/// Every fixture in tests/fixtures/nvml comes back as written: the generic half of the check.
#[test]
fn every_fixture_round_trips() {
    let _turn = turn();
    let dir = fixture("");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension() != Some(OsStr::new("json")) {
            continue;
        }
        let want: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let nvml = match open(Some(&path)) {
            Ok(n) => n,
            Err(e) => {
                assert!(
                    want["faults"]["init"].is_string(),
                    "{}: {e}",
                    path.display()
                );
                continue;
            }
        };
        check_fixture(&nvml, &want, &path);
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} fixtures");
}

fn check_fixture(nvml: &Nvml, want: &Value, path: &Path) {
    let ctx = path.display();
    let not_found = |f: &str| {
        want["faults"]["not_found"]
            .as_array()
            .is_some_and(|l| l.iter().any(|n| n == f))
    };
    let lost = |i: usize| want["faults"]["device_errors"][i.to_string()].is_string();
    match want["driver_version"].as_str() {
        Some(v) => assert_eq!(nvml.sys_driver_version().unwrap(), v, "{ctx}"),
        None => assert_eq!(err(nvml.sys_driver_version()), "NotSupported"),
    }
    if let Some(v) = want["cuda_driver_version"].as_i64()
        && !not_found("nvmlSystemGetCudaDriverVersion_v2")
    {
        assert_eq!(nvml.sys_cuda_driver_version().unwrap() as i64, v, "{ctx}");
    }
    let devices = want["devices"].as_array().unwrap();
    assert_eq!(
        nvml.device_count().unwrap() as usize,
        devices.len(),
        "{ctx}"
    );
    for (i, d) in devices.iter().enumerate() {
        let ctx = format!("{ctx} device {i}");
        let dev = match nvml.device_by_index(i as u32) {
            Ok(dev) => dev,
            Err(e) => {
                assert!(lost(i), "{ctx}: {e}");
                continue;
            }
        };
        assert_eq!(dev.name().ok().as_deref(), d["name"].as_str(), "{ctx}");
        assert_eq!(dev.uuid().ok().as_deref(), d["uuid"].as_str(), "{ctx}");
        let pci = dev.pci_info().ok();
        assert_eq!(
            pci.as_ref().map(|p| p.bus_id.as_str()),
            d["pci_bus_id"].as_str(),
            "{ctx}"
        );
        if let (Some(p), Some(id)) = (&pci, d["pci_device_id"].as_str()) {
            assert_eq!(format!("0x{:08X}", p.pci_device_id), id, "{ctx}");
        }
        assert_eq!(
            dev.memory_info().ok().map(|m| m.total),
            d["memory_total_bytes"].as_u64(),
            "{ctx}"
        );
        if !not_found("nvmlDeviceGetCudaComputeCapability") {
            let cc = dev
                .cuda_compute_capability()
                .ok()
                .map(|c| vec![c.major, c.minor]);
            let want_cc: Option<Vec<i32>> =
                serde_json::from_value(d["compute_capability"].clone()).unwrap();
            assert_eq!(cc, want_cc, "{ctx}");
        }
        assert_eq!(
            dev.minor_number().ok().map(u64::from),
            d["minor_number"].as_u64(),
            "{ctx}"
        );
        if not_found("nvmlDeviceGetMigMode") {
            assert_eq!(err(dev.mig_mode()), "FunctionNotFound");
            continue;
        }
        let mig = dev
            .mig_mode()
            .ok()
            .map(|m| (m.current as u64, m.pending as u64));
        let want_mig = d["mig_mode"].as_object().map(|m| {
            (
                m["current"].as_u64().unwrap(),
                m["pending"].as_u64().unwrap(),
            )
        });
        assert_eq!(mig, want_mig, "{ctx}");
        let migs = d["mig_devices"].as_array().cloned().unwrap_or_default();
        for (m, want) in migs.iter().enumerate() {
            let md = dev.mig_device_by_index(m as u32).unwrap();
            let a = md.attributes().unwrap();
            assert_eq!(
                a.multiprocessor_count as u64, want["multiprocessor_count"],
                "{ctx}"
            );
            assert_eq!(a.memory_size_mb, want["memory_size_mb"], "{ctx}");
            assert_eq!(
                a.gpu_instance_slice_count as u64,
                want["gpu_instance_slice_count"]
            );
            assert_eq!(md.memory_info().unwrap().total, want["memory_total_bytes"]);
        }
        if want_mig.is_some() {
            let slot = migs.len() as u32;
            assert_eq!(err(dev.mig_device_by_index(slot)), "NotFound");
        }
    }
}

#[test]
fn a100_40gb_mig_devices_and_their_attributes() {
    let _turn = turn();
    let nvml = open(Some(&fixture("a100-40gb-mig-2x3g.json"))).unwrap();
    let gpu = nvml.device_by_index(0).unwrap();
    assert_eq!(gpu.name().unwrap(), "NVIDIA A100-SXM4-40GB");
    assert_eq!(gpu.memory_info().unwrap().total, 40960 * MIB);
    assert_eq!(
        gpu.virtualization_mode().unwrap(),
        GpuVirtualizationMode::PassThrough
    );
    let mode = gpu.mig_mode().unwrap();
    assert_eq!((mode.current, mode.pending), (1, 1));
    assert_eq!(gpu.mig_device_count().unwrap(), 7);

    for (slot, gi) in [(0, 1), (1, 2)] {
        let mig = gpu.mig_device_by_index(slot).unwrap();
        assert!(mig.mig_is_mig_device_handle().unwrap());
        let a = mig.attributes().unwrap();
        assert_eq!(
            (
                a.multiprocessor_count,
                a.shared_copy_engine_count,
                a.shared_decoder_count,
                a.shared_encoder_count,
                a.shared_jpeg_count,
                a.shared_ofa_count,
                a.gpu_instance_slice_count,
                a.compute_instance_slice_count,
                a.memory_size_mb,
            ),
            (42, 3, 2, 0, 0, 0, 3, 3, 19968)
        );
        let mem = mig.memory_info().unwrap();
        assert_eq!((mem.total, mem.used), (19968 * MIB, 19 * MIB));
        // Not captured, so not reported.
        assert_eq!(err(mig.uuid()), "NotSupported");
        // Physical properties are the parent's.
        assert_eq!(mig.pci_info().unwrap().bus_id, "00000000:00:04.0");
        let cc = mig.cuda_compute_capability().unwrap();
        assert_eq!((cc.major, cc.minor), (8, 0));
        assert_eq!(err(mig.mig_mode()), "NotSupported");
        let parent = mig.mig_parent_device().unwrap();
        assert_eq!(parent.uuid().unwrap(), gpu.uuid().unwrap());
        unsafe {
            let (mut gi_id, mut ci_id) = (99, 99);
            assert_eq!(
                nvml.lib()
                    .nvmlDeviceGetGpuInstanceId(mig.handle(), &mut gi_id),
                0
            );
            assert_eq!(
                nvml.lib()
                    .nvmlDeviceGetComputeInstanceId(mig.handle(), &mut ci_id),
                0
            );
            assert_eq!((gi_id, ci_id), (gi, 0));
            assert_eq!(
                nvml.lib()
                    .nvmlDeviceGetGpuInstanceId(gpu.handle(), &mut gi_id),
                3
            );
        }
    }
    assert_eq!(err(gpu.mig_device_by_index(2)), "NotFound");
    assert_eq!(err(gpu.mig_device_by_index(7)), "InvalidArg");
    assert_eq!(err(gpu.mig_parent_device()), "InvalidArg");
}

#[test]
fn a100_80gb_has_four_1g_mig_devices() {
    let _turn = turn();
    let nvml = open(Some(&fixture("a100-80gb-mig-4x1g.json"))).unwrap();
    let gpu = nvml.device_by_index(0).unwrap();
    assert_eq!(gpu.name().unwrap(), "NVIDIA A100-SXM4-80GB");
    assert_eq!(gpu.memory_info().unwrap().total, 81920 * MIB);
    let found: Vec<(u32, u32, u64)> = (0..gpu.mig_device_count().unwrap())
        .filter_map(|i| gpu.mig_device_by_index(i).ok())
        .map(|m| m.attributes().unwrap())
        .map(|a| {
            (
                a.multiprocessor_count,
                a.gpu_instance_slice_count,
                a.memory_size_mb,
            )
        })
        .collect();
    assert_eq!(found, vec![(14, 1, 19968); 4]);
}

#[test]
fn a_lost_gpu_fails_alone() {
    let _turn = turn();
    let nvml = open(Some(&fixture("h100-8x-gpu3-lost.json"))).unwrap();
    assert_eq!(nvml.device_count().unwrap(), 8);
    assert_eq!(err(nvml.device_by_index(3)), "GpuLost");
    for i in [0, 1, 2, 4, 5, 6, 7] {
        assert_eq!(nvml.device_by_index(i).unwrap().index().unwrap(), i);
    }
    // Reaching GPU 3 another way still finds it lost.
    let lost = "GPU-afe9f2ed-9dd0-572c-3cd8-b42b58b3bc99";
    assert_eq!(err(nvml.device_by_uuid(lost)), "GpuLost");
}

#[test]
fn init_faults_and_missing_fixtures() {
    let _turn = turn();
    let init = open(Some(&fixture("init-driver-not-loaded.json")));
    assert_eq!(err(init), "DriverNotLoaded");
    assert_eq!(err(open(None)), "Unknown");
    assert_eq!(
        err(open(Some(Path::new("/nonexistent/fixture.json")))),
        "Unknown"
    );
    let typo = write_temp("typo.json", r#"{"devices": [{"nmae": "x"}]}"#);
    assert_eq!(err(open(Some(&typo))), "Unknown");
    // A good fixture afterwards initialises normally.
    assert!(open(Some(&fixture("t4.json"))).is_ok());
}

#[test]
fn an_old_driver_fixture_gives_what_its_capture_has() {
    let _turn = turn();
    let nvml = open(Some(&fixture("old-driver-no-mig.json"))).unwrap();
    assert_eq!(nvml.sys_driver_version().unwrap(), "418.43");
    let dev = nvml.device_by_index(0).unwrap();
    assert_eq!(dev.name().unwrap(), "Quadro P400");
    assert_eq!(dev.brand().unwrap(), Brand::Quadro);
    assert_eq!(dev.memory_info().unwrap().total, 1998 * MIB);
    // Not in the 418-era capture, so not reported; the library lacking the symbols
    // altogether is fake-nvml-legacy.
    assert_eq!(err(dev.architecture()), "NotSupported");
    assert_eq!(err(dev.mig_mode()), "NotSupported");
}

#[test]
fn an_old_driver_cannot_answer_function_not_found_for_symbols_it_lacks() {
    let _turn = turn();
    // A 418 driver's library does not export nvmlDeviceGetMigMode at all: a fixture saying it
    // answers FUNCTION_NOT_FOUND is refused (init fails, the reason on stderr).
    let f = write_temp(
        "old-not-found.json",
        r#"{"driver_version": "418.43", "devices": [{}],
            "faults": {"not_found": ["nvmlDeviceGetMigMode"]}}"#,
    );
    assert_eq!(err(open(Some(&f))), "Unknown");
    // A function it does export may.
    let f = write_temp(
        "old-not-found-ok.json",
        r#"{"driver_version": "418.43", "devices": [{"serial": "1"}],
            "faults": {"not_found": ["nvmlDeviceGetSerial"]}}"#,
    );
    let nvml = open(Some(&f)).unwrap();
    assert_eq!(
        err(nvml.device_by_index(0).unwrap().serial()),
        "FunctionNotFound"
    );
}

#[test]
fn a_fault_rule_makes_one_mig_device_vanish() {
    let _turn = turn();
    let base: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("a100-80gb-mig-4x1g.json")).unwrap())
            .unwrap();
    let mut f = base.clone();
    f["faults"] = serde_json::json!({"errors": [
        {"function": "nvmlDeviceGetMigDeviceHandleByIndex", "gpu": 0, "mig": 1, "error": "NOT_FOUND"},
        {"function": "nvmlDeviceGetAttributes_v2", "gpu": 0, "mig": 2, "error": "GPU_IS_LOST"},
        {"function": "nvmlDeviceGetSerial", "error": "NO_PERMISSION"}
    ]});
    let path = write_temp("mig-vanishes.json", &f.to_string());
    let nvml = open(Some(&path)).unwrap();
    let gpu = nvml.device_by_index(0).unwrap();
    assert_eq!(err(gpu.serial()), "NoPermission");
    assert_eq!(gpu.name().unwrap(), "NVIDIA A100-SXM4-80GB");
    assert!(gpu.mig_device_by_index(0).unwrap().attributes().is_ok());
    assert_eq!(err(gpu.mig_device_by_index(1)), "NotFound");
    let third = gpu.mig_device_by_index(2).unwrap();
    assert_eq!(err(third.attributes()), "GpuLost");
    assert!(third.memory_info().is_ok());
    assert!(gpu.mig_device_by_index(3).unwrap().attributes().is_ok());
}

#[test]
fn a_fault_rule_with_times_fails_only_its_first_calls() {
    let _turn = turn();
    let base: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("h100-8x.json")).unwrap()).unwrap();
    let mut f = base.clone();
    f["faults"] = serde_json::json!({"errors": [
        {"function": "nvmlDeviceGetSerial", "gpu": 1, "error": "UNKNOWN", "times": 2},
        {"function": "nvmlDeviceGetSerial", "gpu": 1, "error": "NO_PERMISSION", "times": 1}
    ]});
    let path = write_temp("times.json", &f.to_string());
    let serials = |nvml: &Nvml| -> Vec<String> {
        (0..5)
            .map(|_| match nvml.device_by_index(1).unwrap().serial() {
                Ok(s) => s,
                e => err(e),
            })
            .collect()
    };
    let want = [
        "Unknown".to_string(),
        "Unknown".into(),
        "NoPermission".into(),
        base["devices"][1]["serial"].as_str().unwrap().into(),
        base["devices"][1]["serial"].as_str().unwrap().into(),
    ];
    let nvml = open(Some(&path)).unwrap();
    assert_eq!(serials(&nvml), want);
    // Other GPUs are not counted, and a new init counts again.
    assert!(nvml.device_by_index(0).unwrap().serial().is_ok());
    drop(nvml);
    let nvml = open(Some(&path)).unwrap();
    assert_eq!(serials(&nvml), want);
}

#[test]
fn calls_are_traced_when_asked() {
    let _turn = turn();
    let trace = Path::new(env!("CARGO_TARGET_TMPDIR")).join("trace.log");
    let _ = std::fs::remove_file(&trace);
    // SAFETY: `TURN` is held.
    unsafe {
        std::env::set_var("FAKE_NVML_FIXTURE", fixture("a100-40gb-mig-2x3g.json"));
        std::env::set_var("FAKE_NVML_TRACE", &trace);
    }
    let lib = library();
    let nvml = Nvml::builder().lib_path(lib.as_os_str()).init().unwrap();
    let gpu = nvml.device_by_index(0).unwrap();
    gpu.mig_device_by_index(1).unwrap().attributes().unwrap();
    drop(nvml);
    unsafe { std::env::remove_var("FAKE_NVML_TRACE") };
    let log = std::fs::read_to_string(&trace).unwrap();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            "nvmlInit_v2",
            "nvmlSystemGetDriverVersion",
            "nvmlDeviceGetHandleByIndex_v2 0",
            "nvmlDeviceGetMigDeviceHandleByIndex 0",
            "nvmlDeviceGetAttributes_v2 0:1",
            "nvmlShutdown",
        ]
    );
}

#[test]
fn the_heterogeneous_workstation_reports_only_what_was_captured() {
    let _turn = turn();
    let nvml = open(Some(&fixture("workstation-titanv-rtx5880.json"))).unwrap();
    let names: Vec<String> = (0..nvml.device_count().unwrap())
        .map(|i| nvml.device_by_index(i).unwrap().name().unwrap())
        .collect();
    assert_eq!(names, ["NVIDIA TITAN V", "NVIDIA RTX 5880 Ada Generation"]);
    let ada = nvml.device_by_index(1).unwrap();
    let cc = ada.cuda_compute_capability().unwrap();
    assert_eq!((cc.major, cc.minor), (8, 9));
    assert_eq!(ada.architecture().unwrap(), DeviceArchitecture::Ada);
    assert_eq!(err(ada.memory_info()), "NotSupported");
    assert_eq!(err(ada.pci_info()), "NotSupported");
    assert_eq!(err(nvml.sys_cuda_driver_version()), "NotSupported");
}

#[test]
fn gpu_instance_profiles_answer_as_nvml_does() {
    let _t = turn();
    let nvml = open(Some(&fixture("h200-mig-me.json"))).unwrap();
    let dev = nvml.device_by_index(0).unwrap();
    let lib = nvml.lib();
    let instance_id = lib.nvmlDeviceGetGpuInstanceId.as_ref().unwrap();
    let instance_by_id = lib.nvmlDeviceGetGpuInstanceById.as_ref().unwrap();
    let instance_info = lib.nvmlGpuInstanceGetInfo.as_ref().unwrap();
    let profile_info = lib.nvmlDeviceGetGpuInstanceProfileInfo.as_ref().unwrap();
    // SAFETY: the library's own symbols with nvml.h's signatures; out-parameters are locals.
    unsafe {
        let parent = dev.handle();
        // Slot 2 is the 1g.18gb+me: GPU instance 13, profile id 20 = profile index 7.
        let mig = dev.mig_device_by_index(2).unwrap();
        let mut gi_id = 0;
        assert_eq!(instance_id(mig.handle(), &mut gi_id), 0);
        assert_eq!(gi_id, 13);
        let mut gi = std::ptr::null_mut();
        assert_eq!(instance_by_id(parent, gi_id, &mut gi), 0);
        let mut info = std::mem::zeroed();
        assert_eq!(instance_info(gi, &mut info), 0);
        assert_eq!((info.id, info.profileId, info.device), (13, 20, parent));
        let mut p = std::mem::zeroed();
        assert_eq!(profile_info(parent, 7, &mut p), 0);
        assert_eq!(
            (p.id, p.sliceCount, p.memorySizeMB, p.ofaCount),
            (20, 1, 16384, 1)
        );
        // A profile the GPU does not list, an instance that does not exist, a MIG handle.
        assert_eq!(profile_info(parent, 4, &mut p), 3, "NOT_SUPPORTED");
        assert_eq!(instance_by_id(parent, 1, &mut gi), 6, "NOT_FOUND");
        assert_eq!(
            instance_by_id(mig.handle(), 13, &mut gi),
            3,
            "NOT_SUPPORTED"
        );
    }
}

#[test]
fn health_values_come_back_exactly() {
    use nvml_wrapper::bitmasks::device::ThrottleReasons;
    use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
    let _turn = turn();
    let nvml = open(Some(&fixture("h100-8x-faults.json"))).unwrap();
    let ecc = |i: u32, e: MemoryError, c: EccCounter| {
        nvml.device_by_index(i)
            .unwrap()
            .total_ecc_errors(e, c)
            .unwrap()
    };
    assert_eq!(
        [
            ecc(0, MemoryError::Uncorrected, EccCounter::Volatile),
            ecc(0, MemoryError::Uncorrected, EccCounter::Aggregate),
            ecc(0, MemoryError::Corrected, EccCounter::Volatile),
            ecc(1, MemoryError::Uncorrected, EccCounter::Volatile),
        ],
        [3, 3, 0, 0]
    );
    let remapped = |i: u32| {
        let dev = nvml.device_by_index(i).unwrap();
        let get = nvml.lib().nvmlDeviceGetRemappedRows.as_ref().unwrap();
        let (mut c, mut u, mut p, mut f) = (9, 9, 9, 9);
        // SAFETY: nvml.h's signature; a live handle; locals.
        let rc = unsafe { get(dev.handle(), &mut c, &mut u, &mut p, &mut f) };
        (rc, c, u, p, f)
    };
    assert_eq!(
        [remapped(0), remapped(1), remapped(2)],
        [(0, 0, 0, 0, 0), (0, 0, 4, 1, 0), (0, 0, 512, 0, 1)]
    );
    // HW Slowdown and HW Power Brake Slowdown on GPU 0 (captured), none on GPU 4, under both
    // names of the call.
    let dev = nvml.device_by_index(0).unwrap();
    assert_eq!(
        dev.current_throttle_reasons().unwrap(),
        ThrottleReasons::HW_SLOWDOWN | ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN
    );
    let events = nvml
        .lib()
        .nvmlDeviceGetCurrentClocksEventReasons
        .as_ref()
        .unwrap();
    let mut mask = 0;
    // SAFETY: as above.
    assert_eq!(unsafe { events(dev.handle(), &mut mask) }, 0);
    assert_eq!(mask, 0x8 | 0x80);
    let idle = nvml.device_by_index(4).unwrap();
    assert_eq!(
        idle.current_throttle_reasons().unwrap(),
        ThrottleReasons::NONE
    );
    // A100 and later have no retired pages.
    assert_eq!(err(dev.are_pages_pending_retired()), "NotSupported");
    // The versioned fabric query: v3 and v2 carry the health mask, v3 the summary too.
    let get = nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref().unwrap();
    let fabric = |i: u32, version: u32| {
        let dev = nvml.device_by_index(i).unwrap();
        /// `nvmlGpuFabricInfo_v3_t`.
        #[repr(C)]
        struct V3 {
            version: u32,
            cluster_uuid: [u8; 16],
            status: u32,
            clique_id: u32,
            state: u8,
            health_mask: u32,
            health_summary: u8,
        }
        let mut info = V3 {
            version,
            cluster_uuid: [0; 16],
            status: 0,
            clique_id: 0,
            state: 0,
            health_mask: 0,
            health_summary: 0,
        };
        // SAFETY: nvml.h's signature; the v3 layout (the larger) with its version set.
        let rc = unsafe { get(dev.handle(), (&mut info as *mut V3).cast()) };
        (
            rc,
            info.state,
            info.status,
            info.health_mask,
            info.health_summary,
        )
    };
    let v3 = 40 | (3 << 24);
    let v2 = 36 | (2 << 24);
    assert_eq!(fabric(5, v3), (0, 3, 0, (1 << 4) | (5 << 8), 0));
    assert_eq!(fabric(6, v3), (0, 3, 0, 426, 1));
    assert_eq!(fabric(6, v2), (0, 3, 0, 426, 0), "no summary in v2");
    assert_eq!(fabric(3, v3), (0, 3, 23, 0, 0), "registration failed");
    assert_eq!(fabric(4, 7).0, 25, "ARGUMENT_VERSION_MISMATCH");
}

#[test]
fn retired_pages_answer_count_queries_and_lists() {
    use nvml_wrapper::enum_wrappers::device::RetirementCause;
    let _turn = turn();
    let nvml = open(Some(&fixture("old-driver-faults.json"))).unwrap();
    let dev = nvml.device_by_index(0).unwrap();
    assert!(dev.are_pages_pending_retired().unwrap());
    let get = nvml.lib().nvmlDeviceGetRetiredPages.as_ref().unwrap();
    let mut count = 0;
    // SAFETY: a count query: zero room, no buffer.
    let rc = unsafe { get(dev.handle(), 1, &mut count, std::ptr::null_mut()) };
    assert_eq!((rc, count), (7, 2), "INSUFFICIENT_SIZE with the count");
    let mut count = 0;
    let rc = unsafe { get(dev.handle(), 0, &mut count, std::ptr::null_mut()) };
    assert_eq!((rc, count), (0, 0), "no single-bit pages");
    let mut room = 4;
    let mut pages = [0u64; 4];
    let rc = unsafe { get(dev.handle(), 1, &mut room, pages.as_mut_ptr()) };
    assert_eq!((rc, room, pages), (0, 2, [1, 2, 0, 0]));
    // The v2 call (with timestamps) is not exported: nvml-wrapper's `retired_pages` needs it.
    assert_eq!(
        err(dev.retired_pages(RetirementCause::DoubleBitEccError)),
        "FailedToLoadSymbol"
    );
}

#[test]
fn xid_events_are_delivered_once_and_a_wait_without_one_keeps_to_its_timeout() {
    use nvml_wrapper::bitmasks::event::EventTypes;
    let _turn = turn();
    let nvml = open(Some(&fixture("h100-8x-xid.json"))).unwrap();
    let gpu = |i: u32| nvml.device_by_index(i).unwrap();
    assert_eq!(
        gpu(0).supported_event_types().unwrap(),
        EventTypes::SINGLE_BIT_ECC_ERROR
            | EventTypes::DOUBLE_BIT_ECC_ERROR
            | EventTypes::CRITICAL_XID_ERROR
    );
    let set = nvml.create_event_set().unwrap();
    // GPU 5 only: its 13 at 0.3 s, then its 48 at 0.6 s; GPU 4's 79 is not for this set.
    let set = gpu(5)
        .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        .map_err(|e| e.error)
        .unwrap();
    let started = std::time::Instant::now();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let e = set.wait(5000).unwrap();
        assert_eq!(e.device.index().unwrap(), 5);
        assert_eq!(e.event_type, EventTypes::CRITICAL_XID_ERROR);
        let xid = match e.event_data {
            Some(nvml_wrapper::enums::event::XidError::Value(x)) => Some(x),
            _ => None,
        };
        seen.push((xid, started.elapsed() >= Duration::from_millis(290)));
    }
    assert_eq!(seen, [(Some(13), true), (Some(48), true)]);
    // Nothing more: the wait returns Timeout after its 200 ms, not before, not much later.
    let started = std::time::Instant::now();
    assert_eq!(err(set.wait(200)), "Timeout");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_millis(1000),
        "{waited:?}"
    );
    set.release_events().unwrap();
    // A set that never registered a GPU gets nothing either.
    let empty = nvml.create_event_set().unwrap();
    assert_eq!(err(empty.wait(50)), "Timeout");
}
