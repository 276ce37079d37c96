//! A newcomer's first hour (docs/try-without-a-gpu.md): what the binary says when it finds
//! nothing, when a flag or its environment variable is mistyped, and what `key=value` output
//! cannot show. Each case compares the whole of stdout, stderr and the exit code.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");
const DELL: &str = "tests/fixtures/sysfs/dell-xe9680-8xh100";

/// (exit code, stdout, stderr) of the binary, with none of the agent's environment inherited.
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_clear().env("PATH", "/usr/bin:/bin");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

const HINT: &str = "hint: no GPU or accelerator found (6 PCI function(s) read under tests/fixtures/sysfs/this-vm, none of them one). To see what gpu-labeler does on a GPU node, give it a recorded machine from a clone of the repository: gpu-labeler labels --sysfs-root tests/fixtures/sysfs/dell-xe9680-8xh100 (docs/try-without-a-gpu.md)\n";

/// A machine without GPUs (this VM's recorded tree): no labels, exit 0, and a hint that says
/// what was read and how to see the agent at work; a machine with GPUs gets no hint.
#[test]
fn a_machine_without_gpus_gets_a_hint_not_silence() {
    let vm = run(
        &[
            "labels",
            "--no-nvml",
            "--sysfs-root",
            "tests/fixtures/sysfs/this-vm",
        ],
        &[],
    );
    assert_eq!(vm, (0, String::new(), HINT.to_string()));
    let (code, stdout, stderr) = run(&["labels", "--no-nvml", "--sysfs-root", DELL], &[]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout.lines().find(|l| l.contains("gpu.count=")),
        Some("feature.node.kubernetes.io/gpu.count=8")
    );
    // A snapshot is not a machine: nothing to hint about.
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("features.json");
    std::fs::write(&snapshot, "{}").unwrap();
    let from_snapshot = run(
        &[
            "labels",
            "--no-nvml",
            "--features",
            snapshot.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(from_snapshot, (0, String::new(), String::new()));
}

/// A `--sysfs-root` that is not a sysfs root (missing, a file, the wrong parent) is a usage
/// error naming the flag, or the environment variable when that is where it came from; it used
/// to exit 0 with no labels, and a DaemonSet with the typo published nothing.
#[test]
fn a_sysfs_root_that_is_not_one_is_an_error_naming_the_flag() {
    let wrong_parent = "has no bus/pci: it is not the root of a sysfs tree (the kernel's is /sys; a recorded machine's, such as tests/fixtures/sysfs/dell-xe9680-8xh100, has bus/pci too)";
    let cases = [
        (
            "tests/fixtures/sysfs/no-such-machine",
            "error: --sysfs-root tests/fixtures/sysfs/no-such-machine: does not exist\n"
                .to_string(),
        ),
        (
            "Cargo.toml",
            "error: --sysfs-root Cargo.toml: is not a directory\n".to_string(),
        ),
        (
            "tests/fixtures",
            format!("error: --sysfs-root tests/fixtures: {wrong_parent}\n"),
        ),
    ];
    for (root, want) in cases {
        for cmd in ["labels", "features"] {
            assert_eq!(
                run(&[cmd, "--no-nvml", "--sysfs-root", root], &[]),
                (2, String::new(), want.clone()),
                "{cmd} {root}"
            );
        }
    }
    assert_eq!(
        run(
            &["labels", "--no-nvml"],
            &[("GPU_LABELER_SYSFS_ROOT", "tests/fixtures")]
        ),
        (
            2,
            String::new(),
            format!("error: GPU_LABELER_SYSFS_ROOT=tests/fixtures: {wrong_parent}\n")
        )
    );
    // The daemon refuses to start with it too, before it reads anything else.
    assert_eq!(
        run(
            &["run", "--sink", "stdout", "--oneshot", "--no-nvml"],
            &[("GPU_LABELER_SYSFS_ROOT", "Cargo.toml")]
        ),
        (
            2,
            String::new(),
            "error: GPU_LABELER_SYSFS_ROOT=Cargo.toml: is not a directory\n".to_string()
        )
    );
}

/// An invalid value from an environment variable is said with the variable's name: the user
/// set `GPU_LABELER_NO_NVML`, not `--no-nvml`. On the command line the flag is named.
#[test]
fn an_invalid_environment_value_names_the_variable() {
    let dell = ["labels", "--sysfs-root", DELL];
    assert_eq!(
        run(&dell, &[("GPU_LABELER_NO_NVML", "maybe")]),
        (
            2,
            String::new(),
            "error: invalid value 'maybe' for 'GPU_LABELER_NO_NVML (the environment variable of --no-nvml)': value was not a boolean\n\nFor more information, try '--help'.\n".to_string()
        )
    );
    assert_eq!(
        run(&dell, &[("GPU_LABELER_NVML_TIMEOUT", "soon")]),
        (
            2,
            String::new(),
            "error: invalid value 'soon' for 'GPU_LABELER_NVML_TIMEOUT (the environment variable of --nvml-timeout)': invalid duration \"soon\": expected e.g. 60s, 5m, 1h\n\nFor more information, try '--help'.\n".to_string()
        )
    );
    // Given on the command line, the flag is what the user typed, whatever the environment says.
    assert_eq!(
        run(
            &["labels", "--sysfs-root", DELL, "--nvml-timeout=soon"],
            &[("GPU_LABELER_NVML_TIMEOUT", "also-bad")]
        ),
        (
            2,
            String::new(),
            "error: invalid value 'soon' for '--nvml-timeout <DURATION>': invalid duration \"soon\": expected e.g. 60s, 5m, 1h\n\nFor more information, try '--help'.\n".to_string()
        )
    );
}

/// `-o text` is `key=value` lines: the rules' taints are said beside them on stderr, not lost;
/// `-o json` carries them.
#[test]
fn text_output_says_the_rules_taints() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("taints.yaml");
    std::fs::write(
        &rules,
        r#"apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: gpu-taints}
spec:
  rules:
    - name: hopper
      labels: {example.com/hopper: "true"}
      taints:
        - {key: example.com/gpu, value: hopper, effect: NoSchedule}
        - {key: example.com/reserved, effect: PreferNoSchedule}
      matchFeatures:
        - feature: pci.device
          matchExpressions:
            vendor: {op: In, value: ["10de"]}
"#,
    )
    .unwrap();
    let args = [
        "labels",
        "--no-nvml",
        "--no-default-rules",
        "--sysfs-root",
        DELL,
        "--rules",
        rules.to_str().unwrap(),
    ];
    assert_eq!(
        run(&args, &[]),
        (
            0,
            [
                "example.com/hopper=true",
                "feature.node.kubernetes.io/pci-0300_102b.present=true",
                "feature.node.kubernetes.io/pci-0302_10de.present=true",
                "feature.node.kubernetes.io/pci-0302_10de.sriov.capable=true\n",
            ]
            .join("\n"),
            "note: the rules also produce 2 taint(s), which key=value output cannot show (-o json shows them; the node sink applies them with publish.taints, docs/taints.md):\n  example.com/gpu=hopper:NoSchedule\n  example.com/reserved:PreferNoSchedule\n".to_string()
        )
    );
    let (code, stdout, stderr) = run(&[&args[..], &["-o", "json"]].concat(), &[]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        json["taints"],
        serde_json::json!([
            {"key": "example.com/gpu", "value": "hopper", "effect": "NoSchedule"},
            {"key": "example.com/reserved", "effect": "PreferNoSchedule"}
        ])
    );
}
