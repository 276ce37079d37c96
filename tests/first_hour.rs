//! A newcomer's first hour (docs/try-without-a-gpu.md): what the binary says when it finds
//! nothing, when a flag or its environment variable is mistyped, and what `key=value` output
//! cannot show. Each case compares the whole of stdout, stderr and the exit code.

use std::process::Command;

mod common;

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

/// The machine the tests run on, read as `labels` reads it: (PCI functions, whether a GPU or an
/// accelerator is among them), from `features`.
fn this_machine() -> (usize, bool) {
    let (code, stdout, _) = run(&["features", "--no-nvml", "-o", "json"], &[]);
    assert_eq!(code, 0);
    let f: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let count = |name: &str| {
        f["instances"][name]["elements"]
            .as_array()
            .map_or(0, Vec::len)
    };
    (
        count("pci.device"),
        count("gpu.device") + count("accel.device") > 0,
    )
}

/// On a machine without GPUs `labels` exits 0 with no GPU label: it says so, what it read, and
/// how to see the agent at work; on a machine with GPUs, or on a recorded tree someone chose,
/// it says nothing more.
#[test]
fn a_machine_without_gpus_gets_a_hint_not_silence() {
    let (functions, found) = this_machine();
    let hint = format!(
        "hint: no GPU or accelerator found ({functions} PCI function(s) read under /sys, none of them one). To see what gpu-labeler does on a GPU node, give it a recorded machine from a clone of the repository: gpu-labeler labels --sysfs-root tests/fixtures/sysfs/dell-xe9680-8xh100 (docs/try-without-a-gpu.md)\n"
    );
    let (code, _, stderr) = run(&["labels", "--no-nvml"], &[]);
    assert_eq!(
        (code, stderr),
        (0, if found { String::new() } else { hint })
    );
    // A recorded tree without GPUs, chosen with --sysfs-root: no hint.
    let vm = run(
        &[
            "labels",
            "--no-nvml",
            "--sysfs-root",
            "tests/fixtures/sysfs/this-vm",
        ],
        &[],
    );
    assert_eq!(vm, (0, String::new(), String::new()));
    // A snapshot is not a machine either.
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
    let (_dir, rules) = common::temp_file(
        "taints.yaml",
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
    );
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

/// A rules file saved again as it was wakes the daemon (a file event) and changes nothing: it
/// is not said at info (`relabelled … after a change` was logged for every save); a save that
/// changes a label is.
#[test]
fn a_file_event_that_changes_nothing_is_quiet() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    let rule = |label: &str| {
        format!(
            "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {{name: r}}\nspec:\n  rules:\n    - name: r\n      labels: {{example.com/{label}: \"true\"}}\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {{op: In, value: [\"10de\"]}}\n"
        )
    };
    std::fs::write(&rules, rule("a")).unwrap();
    let mut child = Command::new(BIN)
        .args(["run", "--sink", "stdout", "--interval", "1h", "--no-nvml"])
        .args(["--no-default-rules", "--sysfs-root", DELL, "--rules"])
        .arg(&rules)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("GPU_LABELER_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // The first cycle's output, then the same file saved again, then a change.
    stdout.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("{\"labels\":{\"example.com/a\":\"true\""),
        "{line}"
    );
    std::fs::write(&rules, rule("a")).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    std::fs::write(&rules, rule("b")).unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("{\"labels\":{\"example.com/b\":\"true\""),
        "{line}"
    );
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8(out.stderr).unwrap();
    // Times vary: the seconds are left out.
    let said: Vec<String> = log
        .lines()
        .filter(|l| l.contains("after a change") || l.contains("rules reloaded"))
        .map(|l| {
            l.split_whitespace()
                .map(|w| {
                    if w.ends_with('s') && w[..w.len() - 1].parse::<f64>().is_ok() {
                        "<t>"
                    } else {
                        w
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        said,
        [
            "INFO rules reloaded: 1 rules",
            "INFO relabelled <t> after a change (files)"
        ],
        "{log}"
    );
}
