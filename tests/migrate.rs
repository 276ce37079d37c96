//! The migration paths of docs/migrating.md, each on the fake API server with a Node as the tools being
//! replaced leave it, its labels from real captures: a GPU Operator node (NFD with
//! `deviceLabelFields: [vendor]`, GFD through nfd-master, the operator's own keys; the Dell
//! XE9680 8x H100 of k8s-device-plugin#1501) and an AMD node (AMD's node labeller on an MI300X,
//! ROCm/k8s-device-plugin's documented example). Each step is what an operator runs: `diff`,
//! the publish, the old tool turned off, `diff` again; the outputs are the ones docs/migrating.md shows.

mod apiserver;
mod common;

use std::collections::BTreeMap;

use apiserver::*;

const NODE: &str = "gpu-node-1";

fn gpu_labeler(args: &[String], env: &[(&str, String)]) -> (i32, String, String) {
    common::run_env(args, env).parts()
}

/// GFD's labels on the XE9680 (tests/fixtures/gfd/captures, k8s-device-plugin#1501), less the
/// GPU Operator's own (`gpu.deploy.*`, `gpu.present`) and `mig.config`, cut off in the capture.
type Labels = Vec<(String, String)>;

fn gfd_capture() -> (Labels, Labels) {
    let text = std::fs::read_to_string(repo().join(
        "tests/fixtures/gfd/captures/gfd_labels__k8s-device-plugin-1501__PowerEdge-XE9680_8xH100.txt",
    ))
    .unwrap();
    let (mut gfd, mut operator) = (Vec::new(), Vec::new());
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((k, v)) = l.trim().split_once('=') else {
            continue;
        };
        let kv = (k.to_string(), v.to_string());
        if k.starts_with("nvidia.com/gpu.deploy.") || k == "nvidia.com/gpu.present" {
            operator.push(kv);
        } else if k != "nvidia.com/mig.config" {
            gfd.push(kv);
        }
    }
    (gfd, operator)
}

fn patch(server: &FakeApiServer, manager: &str, labels: &[(String, String)]) {
    let l: Vec<(&str, Option<&str>)> = labels
        .iter()
        .map(|(k, v)| (k.as_str(), Some(v.as_str())))
        .collect();
    server.merge_patch_labels(NODE, manager, &l);
}

fn nvml_env() -> Vec<(&'static str, String)> {
    vec![(
        "FAKE_NVML_FIXTURE",
        common::nvml_fixture("h100-8x").display().to_string(),
    )]
}

/// `--kubeconfig K --node-name NODE`.
fn on_node(kubeconfig: &std::path::Path) -> [String; 4] {
    let k = kubeconfig.display().to_string();
    ["--kubeconfig".into(), k, "--node-name".into(), NODE.into()]
}

fn dell_args(cmd: &str, kubeconfig: &std::path::Path, extra: &[&str]) -> Vec<String> {
    let dell = "dell-xe9680-8xh100";
    let discovery = common::discovery_args_with_fake_nvml(
        &common::sysfs_fixture(dell),
        &common::proc_fixture(dell),
    );
    let mut a = vec![cmd.to_string()];
    a.extend(discovery.iter().map(|s| s.to_string_lossy().into_owned()));
    a.extend(on_node(kubeconfig));
    let profile = ["--profile", "nvidia-gfd"];
    let rules = ["--rules", "deploy/components/nfd-vendor-labels/rules.yaml"];
    a.extend(profile.iter().chain(&rules).map(|s| s.to_string()));
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

#[test]
fn from_the_gpu_operators_nfd_and_gfd() {
    let server = FakeApiServer::start();
    server.add_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    let (gfd, operator) = gfd_capture();
    // nfd-master writes NFD's labels and, through its features file, GFD's.
    let mut nfd = vec![(
        "feature.node.kubernetes.io/pci-10de.present".to_string(),
        "true".to_string(),
    )];
    nfd.extend(gfd.iter().cloned());
    patch(&server, "nfd-master", &nfd);
    patch(&server, "gpu-operator", &operator);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &server.url());

    // 1. Before: every GFD key the capture lists is given with GFD's value (`=`, shared), the
    //    operator's own keys stay theirs (`?`), the rest is added.
    let diff = dell_args("diff", &kubeconfig, &[]);
    let before = expected("gpu-operator.diff.txt");
    assert_eq!(
        golden_diff("gpu-operator.diff.txt", gpu_labeler(&diff, &nvml_env())),
        (4, before, String::new())
    );

    // 2. Install gpu-labeler (one publish here): the Node gains what diff said, nothing else.
    let run = dell_args(
        "run",
        &kubeconfig,
        &["--oneshot", "--no-events", "--listen", "127.0.0.1:0"],
    );
    let (code, _, stderr) = gpu_labeler(&run, &nvml_env());
    assert_eq!(code, 0, "{stderr}");
    let labels_cmd = strip_cluster_args(dell_args("labels", &kubeconfig, &["-o", "json"]));
    let (code, out, stderr) = gpu_labeler(&labels_cmd, &nvml_env());
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ours: BTreeMap<String, String> = serde_json::from_value(v["labels"].clone()).unwrap();
    let mut want = ours.clone();
    want.extend(operator.iter().cloned());
    want.insert("kubernetes.io/hostname".into(), NODE.into());
    assert_eq!(server.labels(NODE), want);
    let after: String = "node gpu-node-1: 0 to add, 0 to change, 0 to remove, 0 in conflict, 58 unchanged; 10 written only by other managers\n".to_string()
        + &expected("gpu-operator.diff.txt")
            .lines()
            .filter(|l| l.starts_with("? ") || l.starts_with("= "))
            .map(|l| format!("{l}\n"))
            .collect::<String>();
    assert_eq!(gpu_labeler(&diff, &nvml_env()), (0, after, String::new()));

    // 3. Turn GFD off (and NFD's PCI source): nfd-master removes every label it wrote, shared
    //    ones included (a JSON patch, not an apply); the agent sees its keys missing and applies
    //    them again (here: the next publish). Nothing selectors use is lost for longer.
    let gone: Vec<(&str, Option<&str>)> = nfd.iter().map(|(k, _)| (k.as_str(), None)).collect();
    server.merge_patch_labels(NODE, "nfd-master", &gone);
    let (code, _, stderr) = gpu_labeler(&run, &nvml_env());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(server.labels(NODE), want);
    let last = summary_then_others(
        "node gpu-node-1: 0 to add, 0 to change, 0 to remove, 0 in conflict, 58 unchanged; 10 written only by other managers\n",
        "gpu-operator.diff.txt",
    );
    assert_eq!(gpu_labeler(&diff, &nvml_env()), (0, last, String::new()));
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(repo().join("tests/fixtures/migrate").join(name)).unwrap()
}

/// A diff's stdout once the cluster is migrated: its summary line, then the `? ` lines (labels
/// written only by other managers) of the recorded diff `name`.
fn summary_then_others(summary: &str, name: &str) -> String {
    summary.to_string()
        + &expected(name)
            .lines()
            .filter(|l| l.starts_with("? "))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
}

/// `(code, stdout, stderr)` of a diff, the stdout checked against `name` (`UPDATE_GOLDEN=1`
/// rewrites it, to be read before it is committed).
fn golden_diff(name: &str, got: (i32, String, String)) -> (i32, String, String) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(repo().join("tests/fixtures/migrate").join(name), &got.1).unwrap();
    }
    got
}

/// A command line without the cluster's flags (for `labels`).
fn strip_cluster_args(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if a == "--kubeconfig" || a == "--node-name" {
            skip = true;
            continue;
        }
        out.push(a);
    }
    out
}

/// AMD's node labeller on an MI300X (its documented labels, tests/fixtures/migrate); the node is
/// the MI300X capture of tests/fixtures/sysfs/amd-mi300x-cpx (the same part, in CPX mode: the
/// CU, SIMD and device-id values agree). `diff` shows the labeller's keys as others' (`?`), the
/// rest as added; after the publish only those remain, untouched.
#[test]
fn from_amds_node_labeller() {
    let server = FakeApiServer::start();
    server.add_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    let text = std::fs::read_to_string(
        repo().join("tests/fixtures/migrate/amd_labeller_mi300x_example_labels.txt"),
    )
    .unwrap();
    let amd: Vec<(String, String)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(amd.len(), 6);
    patch(&server, "k8s-node-labeller", &amd);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &server.url());
    let args = |cmd: &str, extra: &[&str]| -> Vec<String> {
        let mut a = vec![cmd.to_string()];
        let discovery = common::discovery_args(
            &common::sysfs_fixture("amd-mi300x-cpx"),
            std::path::Path::new("/nonexistent"),
        );
        a.extend(discovery.iter().map(|s| s.to_string_lossy().into_owned()));
        a.extend(on_node(&kubeconfig));
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let diff = args("diff", &[]);
    assert_eq!(
        golden_diff("amd.diff.txt", gpu_labeler(&diff, &[])),
        (4, expected("amd.diff.txt"), String::new())
    );
    let (code, _, stderr) = gpu_labeler(
        &args(
            "run",
            &["--oneshot", "--no-events", "--listen", "127.0.0.1:0"],
        ),
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, _) = gpu_labeler(&diff, &[]);
    let after = summary_then_others(
        "node gpu-node-1: 0 to add, 0 to change, 0 to remove, 0 in conflict, 17 unchanged; 6 written only by other managers\n",
        "amd.diff.txt",
    );
    assert_eq!((code, stdout), (0, after));
}
