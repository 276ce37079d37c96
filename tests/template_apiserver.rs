//! `template -o resourceslice` against Kubernetes' own API server (tests/kube-apiserver): the
//! ResourceSlices of every GPU fixture machine store as they are, and read back from the
//! server, they join to the machine's GPUs with no mismatch: the DRA source's own check
//! (`--dra`, `dra::join`), coverage complete. What the test server does not run (per-kind
//! resource.k8s.io validation: 128 devices per slice, attribute name rules) is not covered
//! here (the test API server serves resource.k8s.io without kube-apiserver's own registry).

mod common;
mod kube;

use std::ffi::OsString;

use common::*;
use kube::{KubeApiServer, Who};
use serde_json::{Value, json};

const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";

/// The machines and the NVML capture each pairs with (tests/fixtures/dra/generate.py's).
fn machine_args(machine: &str) -> (Vec<OsString>, Vec<(&'static str, OsString)>) {
    let mut args = discovery_args(&sysfs_fixture(machine), &proc_fixture(machine));
    let capture = match machine {
        "dell-xe9680-8xh100" => Some("h100-8x"),
        "azure-nd-a100-v4" => Some("a100-8x-nvlink"),
        _ => None,
    };
    match capture {
        Some(c) => {
            args.retain(|a| a != "--no-nvml");
            args.extend(["--nvml-lib".into(), fake_nvml_lib("nvidia_ml").into()]);
            (args, vec![("FAKE_NVML_FIXTURE", nvml_fixture(c).into())])
        }
        None => (args, vec![]),
    }
}

fn command(cmd: &[&str], args: &[OsString], env: &[(&str, OsString)]) -> Run {
    let mut a: Vec<OsString> = cmd.iter().map(OsString::from).collect();
    a.extend(args.iter().cloned());
    run_env(a, env)
}

#[test]
fn every_gpu_machines_slice_template_stores_and_joins_to_its_gpus_without_a_mismatch() {
    let s = KubeApiServer::start();
    let admin = Who::admin();
    let dir = tempfile::tempdir().unwrap();
    let machines = common::sysfs_machines();
    let mut joined = Vec::new();
    for m in &machines {
        let (args, env) = machine_args(m);
        let r = command(
            &["template", "-o", "resourceslice", "--node-name", m],
            &args,
            &env,
        );
        let text = r.ok();
        if text.is_empty() {
            continue; // no GPU of a DRA driver's vendor
        }
        for doc in text.split("\n---\n") {
            let slice: Value = serde_saphyr::from_str(doc).expect("a YAML document");
            let path = kube::object_path(&slice);
            let a = s.apply(&admin, "gpu-labeler-template", &path, &slice, false);
            assert!(a.ok(), "{m}: {} {}", a.code, a.body);
            // Stored as written: the server's object has the template's spec.
            assert_eq!(s.get(&path)["spec"], slice["spec"], "{m}");
        }
        let mut list = s.get(&format!("{SLICES}?fieldSelector=spec.nodeName={m}"));
        // As `kubectl get -o json` writes a list: each item with its kind.
        for item in list["items"].as_array_mut().unwrap() {
            item["apiVersion"] = json!("resource.k8s.io/v1");
            item["kind"] = json!("ResourceSlice");
        }
        let file = dir.path().join(format!("{m}.json"));
        std::fs::write(&file, list.to_string()).unwrap();
        let mut with_dra = args.clone();
        with_dra.extend([
            "--dra".into(),
            file.into_os_string(),
            "--node-name".into(),
            m.into(),
        ]);
        let r = command(&["features", "-o", "json"], &with_dra, &env);
        let f: Value = serde_json::from_str(r.ok()).unwrap();
        let gpus = f["instances"]["gpu.device"]["elements"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(
            (
                &f["attributes"]["dra.node"]["elements"]["coverage"],
                &f["attributes"]["dra.node"]["elements"]["devices"],
                &f["instances"]["dra.mismatch"]["elements"],
            ),
            (&json!("complete"), &json!(gpus.to_string()), &json!([])),
            "{m}"
        );
        joined.push(m.clone());
    }
    assert_eq!(
        joined,
        [
            "amd-mi210-8x",
            "amd-mi300x-cpx",
            "amd-vega10",
            "azure-nd-a100-v4",
            "dell-xe9680-8xh100",
            "intel-tigerlake-igpu",
            "nvidia-dgx2h",
            "ttar-gpu-sriov",
        ]
    );
}

/// `diff --template` reads the group's nodes from the cluster: the H100 template against three
/// Nodes of Kubernetes' own API server, two of them the group's (`-l`), one of those with 7 GPUs.
#[test]
fn diff_reads_the_groups_nodes_from_the_cluster() {
    let s = KubeApiServer::start();
    let admin = Who::admin();
    let template = fixtures().join("template/h100.json");
    let t: Value = serde_json::from_str(&std::fs::read_to_string(&template).unwrap()).unwrap();
    let labels: Vec<(String, String)> = t["labels"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    for (name, group, gpus) in [("a", "h100", "8"), ("b", "h100", "7"), ("c", "cpu", "0")] {
        let mut l: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        l.push(("example.com/group", group));
        if gpus == "7" {
            l.retain(|(k, _)| *k != "nvidia.com/gpu.count");
            l.push(("nvidia.com/gpu.count", "7"));
        }
        s.create_node(name, &l);
        let a = s.merge_patch(
            &admin,
            "kubelet",
            &format!("/api/v1/nodes/{name}/status"),
            &json!({"status": {"allocatable": {"cpu": "192", "nvidia.com/gpu": gpus}}}),
        );
        assert!(a.ok(), "{} {}", a.code, a.body);
    }
    let kubeconfig = s.kubeconfig(&admin);
    let r = run([
        OsString::from("diff"),
        "--template".into(),
        template.into_os_string(),
        "--kubeconfig".into(),
        kubeconfig.into_os_string(),
        "-l".into(),
        "example.com/group=h100".into(),
    ]);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            4,
            "node b: label nvidia.com/gpu.count: template \"8\", node \"7\"\n\
             node b: resource nvidia.com/gpu: template \"8\", node \"7\"\n\
             1 of 2 node(s) differ from the template\n",
            ""
        )
    );
}
