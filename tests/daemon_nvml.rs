//! NVML that is missing when the daemon starts (the driver often loads after the pod) is tried
//! again on later cycles: the fake libnvidia-ml of fake-nvml/ appears at the configured path
//! while `gpu-labeler run` is running, and the next cycle uses it.

mod apiserver;

use std::path::{Path, PathBuf};
use std::time::Duration;

use apiserver::*;

const WAIT: Duration = Duration::from_secs(20);

/// The fake library that `cargo test --workspace` builds.
fn fake_lib() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_gpu-labeler"));
    let dir = bin.parent().unwrap();
    for d in [dir.join("deps"), dir.to_path_buf()] {
        let p = d.join("libnvidia_ml.so");
        if p.exists() {
            return p;
        }
    }
    panic!("libnvidia_ml.so not built: run the tests with `cargo test --workspace`");
}

fn nvml_fixture(name: &str) -> PathBuf {
    repo()
        .join("tests/fixtures/nvml")
        .join(format!("{name}.json"))
}

fn args(lib: &Path) -> Vec<String> {
    let mut a = vec!["run".to_string()];
    // The fixture's discovery flags, with NVML from `lib` instead of `--no-nvml`.
    a.extend(fixture_args().into_iter().filter(|x| x != "--no-nvml"));
    for x in [
        "--nvml-lib",
        lib.to_str().unwrap(),
        "--sink",
        "stdout",
        "--interval",
        "1s",
        "--listen",
        "127.0.0.1:0",
    ] {
        a.push(x.to_string());
    }
    a
}

#[test]
fn nvml_missing_at_start_is_used_once_it_appears() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libnvidia-ml.so.1");
    let fixture = nvml_fixture("h100-8x");
    let mut agent = Agent::start(
        &args(&lib),
        &[("FAKE_NVML_FIXTURE", fixture.to_str().unwrap())],
    );
    let addr = agent.health_addr();
    let unavailable = wait_for(WAIT, || {
        (metric(addr, "gpu_labeler_nvml_status{status=\"unavailable\"}")? == 1.0).then_some(())
    });
    assert!(unavailable.is_some(), "{}", agent.log_text());
    agent.wait_log("published to stdout", WAIT);

    // The driver arrives.
    std::fs::copy(fake_lib(), &lib).unwrap();
    let ok = wait_for(WAIT, || {
        (metric(addr, "gpu_labeler_nvml_status{status=\"ok\"}")? == 1.0).then_some(())
    });
    assert!(ok.is_some(), "{}", agent.log_text());
    // The labels that need NVML are published on that cycle.
    agent.wait_log("+feature.node.kubernetes.io/gpu.compute.major=9", WAIT);
    assert_eq!(
        metric(
            addr,
            "gpu_labeler_gpus{vendor=\"nvidia\",product=\"NVIDIA H100 80GB HBM3\"}"
        ),
        Some(8.0),
        "{}",
        get(addr, "/metrics").1
    );
    assert_eq!(agent.stop(), 0);
}
