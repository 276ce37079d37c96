//! Time-slicing and MPS: the NVIDIA device plugin's configuration file named by
//! `sources.sharing.configFile` (tests/fixtures/sharing/, see PROVENANCE.md there) becomes
//! `gpu.sharing`, the default labels `gpu.sharing-strategy` and `gpu.replicas`, and GFD's
//! sharing labels in the `nvidia-gfd` profile. The node is the Dell XE9680 with 8x H100 through
//! the fake NVML (as tests/nvml.rs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");
const P: &str = "feature.node.kubernetes.io/";
const DELL: &str = "tests/fixtures/sysfs/dell-xe9680-8xh100";
const DELL_PROC: &str = "tests/fixtures/proc/dell-xe9680-8xh100";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fake_lib() -> PathBuf {
    let bin_dir = Path::new(BIN).parent().unwrap();
    for dir in [bin_dir.join("deps"), bin_dir.to_path_buf()] {
        let p = dir.join("libnvidia_ml.so");
        if p.exists() {
            return p;
        }
    }
    panic!("libnvidia_ml.so not built: run the tests with `cargo test --workspace`");
}

fn sharing_file(name: &str) -> PathBuf {
    repo().join("tests/fixtures/sharing").join(name)
}

/// A gpu-labeler config naming `sharing` as the device-plugin file, plus `extra` lines.
fn config(dir: &Path, sharing: &Path, extra: &str) -> PathBuf {
    let p = dir.join("config.yaml");
    std::fs::write(
        &p,
        format!(
            "sources:\n  sharing:\n    configFile: {}\n{extra}",
            sharing.display()
        ),
    )
    .unwrap();
    p
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(cmd: &str, config: &Path) -> Run {
    let out = Command::new(BIN)
        .args([cmd, "-o", "json", "--sysfs-root", DELL, "--proc-root", DELL_PROC])
        .arg("--config")
        .arg(config)
        .arg("--nvml-lib")
        .arg(fake_lib())
        .arg("--pci-ids")
        .arg(repo().join("tests/fixtures/pci.ids"))
        .env(
            "FAKE_NVML_FIXTURE",
            repo().join("tests/fixtures/nvml/h100-8x.json"),
        )
        .env_remove("GPU_LABELER_CONFIG")
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn labels(r: &Run) -> BTreeMap<String, String> {
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    serde_json::from_value(v["labels"].clone()).unwrap()
}

fn sharing_features(r: &Run) -> Value {
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    v["attributes"]["gpu.sharing"].clone()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| {
            let key = if k.contains('/') {
                k.to_string()
            } else {
                format!("{P}{k}")
            };
            (key, v.to_string())
        })
        .collect()
}

/// The H100 node's default labels (tests/nvml.rs), with the sharing labels given.
fn h100_default(sharing: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut m = map(&[
        ("gpu-nvidia.count", "8"),
        ("gpu.compute.major", "9"),
        ("gpu.compute.minor", "0"),
        ("gpu.count", "8"),
        ("gpu.cuda.major", "12"),
        ("gpu.cuda.minor", "2"),
        ("gpu.driver.major", "535"),
        ("gpu.driver.minor", "161"),
        ("gpu.driver.version", "535.161.08"),
        ("gpu.family", "hopper"),
        ("gpu.memory", "81559"),
        ("gpu.memory.max", "81559"),
        ("gpu.memory.total", "652472"),
        ("gpu.mig.capable", "true"),
        ("gpu.mig.enabled", "false"),
        ("gpu.present", "true"),
        ("gpu.product", "NVIDIA-H100-80GB-HBM3"),
        ("gpu.vendor", "nvidia"),
        ("gpu.vgpu.present", "false"),
        ("gpu.virtual", "false"),
        ("pci-0300_102b.present", "true"),
        ("pci-0302_10de.present", "true"),
        ("pci-0302_10de.sriov.capable", "true"),
    ]);
    m.extend(map(sharing));
    m
}

/// GFD's labels for this node (gfd_labels__k8s-device-plugin-1501 plus what that excerpt cut),
/// with the sharing-dependent ones given.
fn h100_gfd(sharing: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut m = map(&[
        ("nvidia.com/cuda.driver-version.full", "535.161.08"),
        ("nvidia.com/cuda.driver-version.major", "535"),
        ("nvidia.com/cuda.driver-version.minor", "161"),
        ("nvidia.com/cuda.driver-version.revision", "08"),
        ("nvidia.com/cuda.driver.major", "535"),
        ("nvidia.com/cuda.driver.minor", "161"),
        ("nvidia.com/cuda.driver.rev", "08"),
        ("nvidia.com/cuda.runtime-version.full", "12.2"),
        ("nvidia.com/cuda.runtime-version.major", "12"),
        ("nvidia.com/cuda.runtime-version.minor", "2"),
        ("nvidia.com/cuda.runtime.major", "12"),
        ("nvidia.com/cuda.runtime.minor", "2"),
        ("nvidia.com/gpu.compute.major", "9"),
        ("nvidia.com/gpu.compute.minor", "0"),
        ("nvidia.com/gpu.count", "8"),
        ("nvidia.com/gpu.family", "hopper"),
        ("nvidia.com/gpu.machine", "PowerEdge-XE9680"),
        ("nvidia.com/gpu.memory", "81559"),
        ("nvidia.com/gpu.mode", "compute"),
        ("nvidia.com/mig.capable", "true"),
    ]);
    m.extend(map(sharing));
    m
}

#[test]
fn time_slicing_from_the_plugin_readme() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), &sharing_file("time-slicing.yaml"), "");
    assert_eq!(
        sharing_features(&run("features", &c)),
        json!({"elements": {"rename_by_default": "false", "replicas": "10",
                            "replicas.gpu": "10", "strategy": "time-slicing"}})
    );
    assert_eq!(
        labels(&run("labels", &c)),
        h100_default(&[
            ("gpu.replicas", "10"),
            ("gpu.sharing-strategy", "time-slicing")
        ])
    );
    let gfd = config(
        dir.path(),
        &sharing_file("time-slicing.yaml"),
        "profiles: [nvidia-gfd]\n",
    );
    let mut expected = h100_default(&[
        ("gpu.replicas", "10"),
        ("gpu.sharing-strategy", "time-slicing"),
    ]);
    expected.extend(h100_gfd(&[
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-SHARED"),
        ("nvidia.com/gpu.replicas", "10"),
        ("nvidia.com/gpu.sharing-strategy", "time-slicing"),
        ("nvidia.com/mps.capable", "false"),
    ]));
    assert_eq!(labels(&run("labels", &gfd)), expected);
}

#[test]
fn renamed_resources_keep_the_plain_product_name() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        &sharing_file("time-slicing-renamed.yaml"),
        "profiles: [nvidia-gfd]\n",
    );
    let mut expected = h100_default(&[
        ("gpu.replicas", "10"),
        ("gpu.sharing-strategy", "time-slicing"),
    ]);
    expected.extend(h100_gfd(&[
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
        ("nvidia.com/gpu.replicas", "10"),
        ("nvidia.com/gpu.sharing-strategy", "time-slicing"),
        ("nvidia.com/mps.capable", "false"),
    ]));
    assert_eq!(labels(&run("labels", &c)), expected);
}

#[test]
fn mps_from_the_plugin_readme() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        &sharing_file("mps.yaml"),
        "profiles: [nvidia-gfd]\n",
    );
    let mut expected = h100_default(&[("gpu.replicas", "10"), ("gpu.sharing-strategy", "mps")]);
    expected.extend(h100_gfd(&[
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-SHARED"),
        ("nvidia.com/gpu.replicas", "10"),
        ("nvidia.com/gpu.sharing-strategy", "mps"),
        ("nvidia.com/mps.capable", "true"),
    ]));
    assert_eq!(labels(&run("labels", &c)), expected);
}

#[test]
fn sharing_only_mig_resources_leaves_whole_gpus_unshared() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        &sharing_file("gpu-operator-full.yaml"),
        "profiles: [nvidia-gfd]\n",
    );
    assert_eq!(
        sharing_features(&run("features", &c)),
        json!({"elements": {"rename_by_default": "false", "replicas": "1",
                            "replicas.mig-1g.5gb": "2", "replicas.mig-2g.10gb": "4",
                            "strategy": "time-slicing"}})
    );
    let mut expected = h100_default(&[
        ("gpu.replicas", "1"),
        ("gpu.sharing-strategy", "time-slicing"),
    ]);
    expected.extend(h100_gfd(&[
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
        ("nvidia.com/gpu.replicas", "1"),
        ("nvidia.com/gpu.sharing-strategy", "none"),
        ("nvidia.com/mps.capable", "false"),
    ]));
    assert_eq!(labels(&run("labels", &c)), expected);
}

#[test]
fn without_a_sharing_file_there_are_no_sharing_labels_but_gfd_says_none() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("config.yaml");
    std::fs::write(&c, "profiles: [nvidia-gfd]\n").unwrap();
    let mut expected = h100_default(&[]);
    expected.extend(h100_gfd(&[
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
        ("nvidia.com/gpu.replicas", "1"),
        ("nvidia.com/gpu.sharing-strategy", "none"),
        ("nvidia.com/mps.capable", "false"),
    ]));
    assert_eq!(labels(&run("labels", &c)), expected);
}

#[test]
fn a_bad_file_is_reported_with_line_and_column_and_shares_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (file, at, message) in [
        (
            "bad-replicas.yaml",
            "6:17",
            "number of replicas must be >= 2",
        ),
        (
            "bad-typo.yaml",
            "3:3",
            "unknown field `timeslicing`, expected one of timeSlicing, mps",
        ),
    ] {
        let path = sharing_file(file);
        let c = config(dir.path(), &path, "");
        let r = run("labels", &c);
        assert_eq!(
            r.stderr.lines().collect::<Vec<_>>(),
            [format!(
                " WARN invalid sharing config {}:{at}: {message}; gpu.sharing left out",
                path.display()
            )]
        );
        assert_eq!(labels(&r), h100_default(&[]));
    }
}

#[test]
fn a_missing_file_is_reported_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.yaml");
    let c = config(dir.path(), &missing, "");
    let r = run("labels", &c);
    assert_eq!(
        r.stderr.lines().collect::<Vec<_>>(),
        [format!(
            " WARN cannot read sharing config {}: No such file or directory (os error 2); gpu.sharing left out",
            missing.display()
        )]
    );
    assert_eq!(labels(&r), h100_default(&[]));
}

#[test]
fn a_node_without_gpus_gets_no_sharing_label() {
    let dir = tempfile::tempdir().unwrap();
    let with = config(dir.path(), &sharing_file("time-slicing.yaml"), "");
    let without = dir.path().join("empty.yaml");
    std::fs::write(&without, "").unwrap();
    let labels_with = |c: &Path| {
        let out = Command::new(BIN)
            .args(["labels", "-o", "json", "--no-nvml", "--proc-root", "/nonexistent"])
            .arg("--sysfs-root")
            .arg(repo().join("tests/fixtures/sysfs/this-vm"))
            .arg("--config")
            .arg(c)
            .env_remove("GPU_LABELER_CONFIG")
            .output()
            .unwrap();
        assert!(out.status.success());
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        serde_json::from_value::<BTreeMap<String, String>>(v["labels"].clone()).unwrap()
    };
    // The sharing file changes nothing where there is no GPU to share.
    assert_eq!(labels_with(&with), labels_with(&without));
}
