//! DRA in `match`: the workloads of tests/fixtures/dra-match/ (pods with ResourceClaims and
//! ResourceClaimTemplates beside them) against the fleet of tests/fixtures/scheduling/nodes.json
//! and the DRA objects of tests/fixtures/dra-match/cluster.json (the drivers' ResourceSlices of
//! tests/fixtures/dra on four of its nodes, their DeviceClasses, a device taint and a claim
//! already allocated: tests/fixtures/dra-match/make.py). Whole outputs, text and JSON.

mod apiserver;
mod common;
mod kube;

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use serde_json::{Value, json};

fn dir() -> PathBuf {
    common::fixtures().join("dra-match")
}

fn run_match(name: &str, extra: &[&str]) -> common::Run {
    let mut a: Vec<OsString> = vec![
        "match".into(),
        dir().join(format!("{name}.yaml")).into(),
        "--nodes".into(),
        common::fixtures().join("scheduling/nodes.json").into(),
        "--dra".into(),
        dir().join("cluster.json").into(),
    ];
    a.extend(extra.iter().map(OsString::from));
    common::run_env(
        a.iter().map(OsString::as_os_str).collect::<Vec<_>>(),
        &[] as &[(&str, &OsStr)],
    )
}

/// `NAME.yaml` -> `NAME.match.txt` (or `.match.json` with `-o json`), whole, and the exit code.
/// `UPDATE_GOLDEN=1` rewrites the goldens.
fn golden(name: &str, json: bool, code: i32) {
    let extra: &[&str] = if json { &["-o", "json"] } else { &[] };
    let r = run_match(name, extra);
    let out = r
        .stdout
        .replace(&dir().display().to_string(), "tests/fixtures/dra-match");
    let file = format!("{name}.match.{}", if json { "json" } else { "txt" });
    assert_eq!((r.code, r.stderr.as_str()), (code, ""), "{name}");
    common::check_golden_in(&dir(), &file, &out);
}

/// Two H100s on one NUMA node: fit the H100 node; the A100s' product name, the AMD GPUs' driver
/// (each candidate's values named), and nodes without slices say why.
#[test]
fn a_template_beside_the_pod_names_the_selector_each_node_misses() {
    golden("h100-pair", false, 0);
}

/// A capacity NVIDIA's driver does not publish: the allocation is aborted where an NVIDIA GPU
/// is reached (on the A100 node, the first GPU not already allocated).
#[test]
fn a_capacity_not_published_aborts_the_allocation() {
    golden("unpublished", false, 1);
}

/// `firstAvailable`: eight GPUs of 80 GiB (the H100 publishes 81559Mi, short of 80Gi), else four
/// AMD GPUs, which the MI210 node has.
#[test]
fn first_available_falls_to_its_second_subrequest() {
    golden("first-available", false, 0);
}

/// Four GPUs where six are allocated to another claim and one is tainted.
#[test]
fn devices_already_allocated_are_named_with_their_claim() {
    golden("any-four", false, 0);
}

/// The JSON: per node, per claim and per request, the devices allocated or the reason.
#[test]
fn json_gives_the_verdict_per_claim_and_request() {
    golden("first-available", true, 0);
}

/// Two claims: nine NVIDIA GPUs, then an AMD one. Nodes of eight GPUs have too few; the second
/// claim is not tried there (`NotReached` in the JSON). The node of sixteen V100s has no AMD GPU,
/// and the exhaustive search backtracks over every choice of nine of sixteen: it gives up after
/// `MAX_STEPS` (`TimedOut`), as the scheduler's 10 s filter timeout does.
#[test]
fn a_claim_after_one_that_fails_is_not_tried() {
    golden("two-claims", true, 1);
}

/// A pod naming a claim that is nowhere.
#[test]
fn a_missing_claim_is_named() {
    golden("missing-claim", false, 1);
}

/// `claims check`: a typo (did you mean), a capacity read as an attribute, a domain no driver
/// publishes, an attribute no device publishes (NVIDIA's quickstart `index`), an unguarded
/// capacity and attribute some devices lack, versions and strings compared; whole output.
#[test]
fn claims_check_names_each_mistake_with_its_place() {
    let args: Vec<OsString> = vec![
        "claims".into(),
        "check".into(),
        dir().join("lint.yaml").into(),
        "--dra".into(),
        dir().join("cluster.json").into(),
    ];
    let r = common::run_env(
        args.iter().map(OsString::as_os_str).collect::<Vec<_>>(),
        &[] as &[(&str, &OsStr)],
    );
    let out = r
        .stdout
        .replace(&dir().display().to_string(), "tests/fixtures/dra-match");
    assert_eq!((r.code, r.stderr.as_str()), (1, ""));
    common::check_golden_in(&dir(), "lint.check.txt", &out);
}

/// Selectors without problems: exit 0, and said so.
#[test]
fn claims_check_passes_clean_selectors() {
    let args: Vec<OsString> = vec![
        "claims".into(),
        "check".into(),
        dir().join("h100-pair.yaml").into(),
        dir().join("any-four.yaml").into(),
        "--dra".into(),
        dir().join("cluster.json").into(),
    ];
    let r = common::run_env(
        args.iter().map(OsString::as_os_str).collect::<Vec<_>>(),
        &[] as &[(&str, &OsStr)],
    );
    assert_eq!(
        (r.code, r.stderr.as_str(), r.stdout.as_str()),
        (0, "", "no problems found\n")
    );
}

/// The cluster path: the Nodes and the DRA objects (slices, classes, and a claim whose
/// allocation is in its status) in Kubernetes' own API server (tests/kube-apiserver), read with
/// the user's kubeconfig: the same answer as from the files.
#[test]
fn the_cluster_path_reads_slices_classes_and_allocated_claims() {
    let server = kube::KubeApiServer::start();
    let admin = kube::Who::admin();
    let post = |path: &str, body: &Value| {
        let a = server.request(&admin, "POST", path, Some(("application/json", body)));
        assert!(a.ok(), "{path}: {}", a.body);
    };
    let read = |p: PathBuf| -> Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    for n in read(common::fixtures().join("scheduling/nodes.json"))["items"]
        .as_array()
        .unwrap()
    {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": n["metadata"]["name"], "labels": n["metadata"]["labels"]}, "spec": n["spec"]});
        post("/api/v1/nodes", &node);
        let path = format!(
            "/api/v1/nodes/{}/status",
            n["metadata"]["name"].as_str().unwrap()
        );
        let a = server.merge_patch(&admin, "kubelet", &path, &json!({"status": n["status"]}));
        assert!(a.ok(), "{path}: {}", a.body);
    }
    post(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}),
    );
    let base = "/apis/resource.k8s.io/v1";
    for o in read(dir().join("cluster.json"))["items"]
        .as_array()
        .unwrap()
    {
        let mut o = o.clone();
        match o["kind"].as_str().unwrap() {
            "ResourceSlice" => post(&format!("{base}/resourceslices"), &o),
            "DeviceClass" => post(&format!("{base}/deviceclasses"), &o),
            "ResourceClaim" => {
                let status = o.as_object_mut().unwrap().remove("status").unwrap();
                let ns = o["metadata"]["namespace"].as_str().unwrap().to_string();
                let name = o["metadata"]["name"].as_str().unwrap().to_string();
                post(&format!("{base}/namespaces/{ns}/resourceclaims"), &o);
                let path = format!("{base}/namespaces/{ns}/resourceclaims/{name}/status");
                let a =
                    server.merge_patch(&admin, "kube-scheduler", &path, &json!({"status": status}));
                assert!(a.ok(), "{path}: {}", a.body);
            }
            other => panic!("{other}"),
        }
    }
    let kubeconfig = server.kubeconfig(&kube::Who::user("an-operator"));
    let out = std::process::Command::new(common::binary())
        .arg("match")
        .arg(dir().join("any-four.yaml"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    // The API server lists nodes by name; the file has them in its own order.
    let by_name = |text: &str| -> String {
        let lines: Vec<&str> = text.lines().collect();
        let mut rows = lines[2..lines.len() - 1].to_vec();
        rows.sort();
        [&lines[..2], &rows[..], &lines[lines.len() - 1..]]
            .concat()
            .join("\n")
            + "\n"
    };
    let want = by_name(&std::fs::read_to_string(dir().join("any-four.match.txt")).unwrap());
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            String::from_utf8_lossy(&out.stdout)
                .replace(&dir().display().to_string(), "tests/fixtures/dra-match")
        ),
        (Some(0), String::new(), want)
    );
}
