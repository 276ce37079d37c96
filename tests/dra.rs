//! The DRA source offline (`--dra FILE`, docs/dra.md): every GPU fixture with the ResourceSlices
//! its vendor's DRA driver would publish there (tests/fixtures/dra, generated from the drivers'
//! own code: PROVENANCE.md), and a mutation suite over the Dell 8x H100's slice: each mutation
//! reported with the right reason and bus id, and nothing else.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use common::{fake_nvml_lib, fixture_args, fixtures, labels_of, nvml_fixture, run_env};
use serde_json::{Value, json};

/// `COMMAND -o json` on `machine` (with NVML's fixture `nvml` when given) and `extra`.
fn command(cmd: &str, machine: &str, nvml: Option<&str>, extra: &[OsString]) -> common::Run {
    let mut args = fixture_args(&[cmd, "-o", "json"], machine, &[]);
    let mut env: Vec<(&str, OsString)> = Vec::new();
    if let Some(n) = nvml {
        args.retain(|a| a != "--no-nvml");
        args.extend(["--nvml-lib".into(), fake_nvml_lib("nvidia_ml").into()]);
        env.push(("FAKE_NVML_FIXTURE", nvml_fixture(n).into_os_string()));
    }
    args.extend(extra.iter().cloned());
    run_env(args, &env)
}

fn dra_arg(path: &Path) -> Vec<OsString> {
    vec!["--dra".into(), path.into()]
}

/// The `dra.*` features of `features -o json`: `(dra.node, dra.mismatch, dra.device)`.
fn dra_features(json: &str) -> (Value, Value, Value) {
    let f: Value = serde_json::from_str(json).expect("features -o json");
    (
        f["attributes"]["dra.node"]["elements"].clone(),
        json!(
            f["instances"]["dra.mismatch"]["elements"]
                .as_array()
                .expect("dra.mismatch")
                .iter()
                .map(|e| e["attributes"].clone())
                .collect::<Vec<_>>()
        ),
        f["instances"]["dra.device"]["elements"].clone(),
    )
}

/// The GPU fixtures, the NVML fixture that pairs with each, and what their slices say.
const MACHINES: &[(&str, Option<&str>, &str, usize)] = &[
    ("dell-xe9680-8xh100", Some("h100-8x"), "gpu.nvidia.com", 8),
    ("azure-nd-a100-v4", None, "gpu.nvidia.com", 8),
    ("nvidia-dgx2h", None, "gpu.nvidia.com", 16),
    ("amd-mi210-8x", None, "gpu.amd.com", 8),
    ("amd-mi300x-cpx", None, "gpu.amd.com", 8),
    ("intel-tigerlake-igpu", None, "gpu.intel.com", 1),
];

/// On every unmodified fixture with its slices: coverage complete, every GPU joined to exactly
/// its own bus id, no mismatch.
#[test]
fn every_fixture_with_its_drivers_slices_is_covered_without_a_mismatch() {
    for (machine, nvml, driver, gpus) in MACHINES {
        let slices = fixtures().join(format!("dra/{machine}.json"));
        let r = command("features", machine, *nvml, &dra_arg(&slices));
        let (node, mismatches, devices) = dra_features(r.ok());
        assert_eq!(
            (node, mismatches),
            (
                json!({"coverage": "complete", "devices": gpus.to_string(), "drivers": driver}),
                json!([])
            ),
            "{machine}"
        );
        // Every device sits on the GPU at its bus id (partitions on their parent's).
        let f: Value = serde_json::from_str(r.ok()).unwrap();
        let addresses: std::collections::BTreeSet<&str> = f["instances"]["gpu.device"]["elements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["attributes"]["address"].as_str().unwrap())
            .collect();
        let joined: std::collections::BTreeSet<&str> = devices
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let a = &d["attributes"];
                assert_eq!(a["gpu"], a["pciBusID"], "{machine}: {a}");
                a["gpu"].as_str().unwrap()
            })
            .collect();
        assert_eq!(joined, addresses, "{machine}");
    }
}

/// The one mismatch on an unmodified fixture, and a real one: AMD's driver at the pinned commit
/// cannot read the old kernel's KFD topology (no `domain` line) and publishes its 80 GiB
/// default for a 16 GiB Vega 10.
#[test]
fn the_vega10_on_an_old_kernel_is_advertised_with_80_gib() {
    let slices = fixtures().join("dra/amd-vega10.json");
    let r = command("features", "amd-vega10", None, &dra_arg(&slices));
    let (node, mismatches, _) = dra_features(r.ok());
    assert_eq!(
        (node, mismatches),
        (
            json!({"coverage": "complete", "devices": "1", "drivers": "gpu.amd.com"}),
            json!([{"reason": "attribute", "pciBusID": "0000:19:00.0", "attribute": "memory",
                    "published": "81920Mi", "measured": "16368Mi"}])
        )
    );
}

/// The Dell's slice (NVIDIA's driver) changed by `mutate`, written to a file.
fn mutated(dir: &Path, mutate: impl FnOnce(&mut Value)) -> std::path::PathBuf {
    let mut v: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("dra/dell-xe9680-8xh100.json")).unwrap(),
    )
    .unwrap();
    mutate(&mut v);
    let path = dir.join("slices.json");
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

fn devices(v: &mut Value) -> &mut Vec<Value> {
    v["items"][0]["spec"]["devices"].as_array_mut().unwrap()
}

fn node_with_gpus(n: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
           "status": {"allocatable": {"cpu": "224", "nvidia.com/gpu": n}}})
}

type Mutation = (&'static str, Box<dyn Fn(&mut Value)>, Value, Value);

/// One published value of one of the Dell's GPUs changed, and the one mismatch it is: (case,
/// the device's index, a JSON pointer into it, the value (JSON), the reason, the attribute, the
/// measured value); the published one is the value as text.
#[rustfmt::skip]
const ONE_VALUE_CHANGED: [(&str, usize, &str, &str, &str, &str, &str); 3] = [
    ("memory 0", 1, "/capacity/memory/value", r#""0""#, "zero-memory", "memory", "81559Mi"),
    ("a wrong NUMA node", 2, "/attributes/resource.kubernetes.io~1numaNode/int", "1", "attribute", "resource.kubernetes.io/numaNode", "0"),
    ("an older driver version", 5, "/attributes/driverVersion/version", r#""535.129.3""#, "attribute", "driverVersion", "535.161.08"),
];

/// The Dell's eight GPUs, each `unpublished`.
fn every_gpu_unpublished() -> Value {
    json!(
        common::DELL_GPUS
            .iter()
            .map(|b| json!({"reason": "unpublished", "pciBusID": b,
                            "measured": "NVIDIA H100 80GB HBM3"}))
            .collect::<Vec<_>>()
    )
}

#[test]
fn every_mutation_of_the_slices_is_reported_with_its_reason_and_bus_id() {
    let dir = tempfile::tempdir().unwrap();
    let complete = json!({"coverage": "complete", "devices": "8", "drivers": "gpu.nvidia.com"});
    let partial = json!({"coverage": "partial", "devices": "7", "drivers": "gpu.nvidia.com"});
    let mut cases: Vec<Mutation> = vec![
        (
            "a GPU's device dropped",
            Box::new(|v| {
                devices(v).remove(3);
            }),
            partial.clone(),
            json!([{"reason": "unpublished", "pciBusID": "0000:5d:00.0",
                    "measured": "NVIDIA H100 80GB HBM3"}]),
        ),
        (
            "a device of a GPU that is not there (a stale pool)",
            Box::new(|v| {
                let mut d = devices(v)[7].clone();
                d["name"] = json!("gpu-8");
                d["attributes"]["resource.kubernetes.io/pciBusID"]["string"] =
                    json!("0000:ef:00.0");
                devices(v).push(d);
            }),
            complete.clone(),
            json!([{"reason": "unknown-device", "pciBusID": "0000:ef:00.0",
                    "published": "n1/gpu-8"}]),
        ),
        (
            "a bus id moved",
            Box::new(|v| {
                devices(v)[0]["attributes"]["resource.kubernetes.io/pciBusID"]["string"] =
                    json!("0000:1a:00.0");
            }),
            partial.clone(),
            json!([
                {"reason": "unpublished", "pciBusID": "0000:19:00.0",
                 "measured": "NVIDIA H100 80GB HBM3"},
                {"reason": "unknown-device", "pciBusID": "0000:1a:00.0", "published": "n1/gpu-0"},
            ]),
        ),
        (
            "a wrong product and PCIe root",
            Box::new(|v| {
                let a = &mut devices(v)[4]["attributes"];
                a["productName"]["string"] = json!("NVIDIA H100 PCIe");
                a["resource.kubernetes.io/pcieRoot"]["string"] = json!("pci0000:15");
            }),
            complete.clone(),
            json!([
                {"reason": "attribute", "pciBusID": "0000:9b:00.0", "attribute": "productName",
                 "published": "NVIDIA H100 PCIe", "measured": "NVIDIA H100 80GB HBM3"},
                {"reason": "attribute", "pciBusID": "0000:9b:00.0",
                 "attribute": "resource.kubernetes.io/pcieRoot", "published": "pci0000:15",
                 "measured": "0000:97"},
            ]),
        ),
        (
            "no slices",
            Box::new(|v| {
                v["items"] = json!([]);
            }),
            json!({"coverage": "none", "devices": "0", "drivers": ""}),
            every_gpu_unpublished(),
        ),
        (
            "the device plugin's nvidia.com/gpu beside the slices",
            Box::new(|v| {
                v["items"].as_array_mut().unwrap().push(node_with_gpus("8"));
            }),
            complete.clone(),
            json!([{"reason": "double-advertised", "pciBusID": "", "attribute": "nvidia.com/gpu",
                    "published": "8 nvidia.com/gpu and 8 gpu.nvidia.com devices",
                    "measured": "8 GPUs"}]),
        ),
        (
            "nvidia.com/gpu mapped to the slices by a DeviceClass",
            Box::new(|v| {
                let items = v["items"].as_array_mut().unwrap();
                items.push(node_with_gpus("8"));
                items.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                    "metadata": {"name": "gpu.nvidia.com"},
                    "spec": {"extendedResourceName": "nvidia.com/gpu",
                             "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}));
            }),
            complete.clone(),
            json!([]),
        ),
        (
            "another node's slices only",
            Box::new(|v| {
                v["items"][0]["spec"]["nodeName"] = json!("n2");
                v["items"][0]["spec"]["pool"]["name"] = json!("n2");
            }),
            json!({"coverage": "none", "devices": "0", "drivers": ""}),
            every_gpu_unpublished(),
        ),
    ];
    cases.extend(ONE_VALUE_CHANGED.iter().map(
        |&(name, device, pointer, value, reason, attribute, measured)| -> Mutation {
            let value: Value = serde_json::from_str(value).unwrap();
            let published = value.as_str().map_or(value.to_string(), str::to_string);
            let want = json!([{"reason": reason, "pciBusID": common::DELL_GPUS[device],
                "attribute": attribute, "published": published, "measured": measured}]);
            let mutate = move |v: &mut Value| {
                *devices(v)[device].pointer_mut(pointer).expect(pointer) = value.clone();
            };
            (name, Box::new(mutate), complete.clone(), want)
        },
    ));
    for (name, mutate, node, want) in cases {
        let path = mutated(dir.path(), mutate);
        let mut extra = dra_arg(&path);
        extra.extend(["--node-name".into(), "n1".into()]);
        let r = command("features", "dell-xe9680-8xh100", Some("h100-8x"), &extra);
        let (got_node, got, _) = dra_features(r.ok());
        assert_eq!((got_node, got), (node, want), "{name}");
    }
}

/// `labels --dra` is `labels` plus the two DRA labels, whole; no DRA label on a node without
/// GPUs, nor without `--dra`.
#[test]
fn the_dra_labels_are_the_labels_without_dra_and_the_coverage() {
    let slices = fixtures().join("dra/dell-xe9680-8xh100.json");
    let without = labels_of(command("labels", "dell-xe9680-8xh100", Some("h100-8x"), &[]).ok());
    let with = labels_of(
        command(
            "labels",
            "dell-xe9680-8xh100",
            Some("h100-8x"),
            &dra_arg(&slices),
        )
        .ok(),
    );
    let mut want = without.clone();
    want.insert(
        "feature.node.kubernetes.io/gpu.dra.coverage".into(),
        "complete".into(),
    );
    want.insert(
        "feature.node.kubernetes.io/gpu.dra.devices".into(),
        "8".into(),
    );
    assert_eq!(with, want);

    // A node without GPUs: the slices are another node's, and nothing of DRA is labelled.
    let plain = labels_of(command("labels", "nfd-rootfs-1", None, &[]).ok());
    let mut extra = dra_arg(&slices);
    extra.extend(["--node-name".into(), "nfd-rootfs-1".into()]);
    let r = command("labels", "nfd-rootfs-1", None, &extra);
    assert_eq!(labels_of(r.ok()), plain);
    let f = command("features", "nfd-rootfs-1", None, &extra);
    let v: Value = serde_json::from_str(f.ok()).unwrap();
    assert_eq!(
        (
            &v["attributes"]["dra.node"],
            &v["instances"]["dra.device"],
            &v["instances"]["dra.mismatch"]
        ),
        (&Value::Null, &Value::Null, &Value::Null)
    );
}

/// A broken DRA file is an error naming the file, line and column and the field; the labels
/// come out whole without DRA facts and the command exits 1. Slices of several nodes without
/// `--node-name` name the nodes.
#[test]
fn a_bad_dra_file_is_an_error_with_its_position_and_the_rest_is_labelled() {
    let (dir, bad) = common::temp_file(
        "bad.yaml",
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\nspec:\n  driver: gpu.nvidia.com\n  nodeName: n1\n  pool: {name: n1, generation: 1, resourceSliceCount: 1}\n  devices:\n    - name: gpu-0\n      attributes:\n        productName: {text: \"H100\"}\n",
    );
    let without = labels_of(command("labels", "amd-mi210-8x", None, &[]).ok());
    let r = command("labels", "amd-mi210-8x", None, &dra_arg(&bad));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(labels_of(&r.stdout), without);
    assert_eq!(
        r.stderr.trim(),
        format!(
            "error: {}:11:23: spec.devices[0].attributes.productName.text: unknown attribute type \"text\" (one of int, bool, string, version)",
            bad.display()
        )
    );

    let two = dir.path().join("two.yaml");
    let text = std::fs::read_to_string(fixtures().join("dra/dell-xe9680-8xh100.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    let mut other = v["items"][0].clone();
    other["spec"]["nodeName"] = json!("n2");
    v["items"].as_array_mut().unwrap().push(other);
    std::fs::write(&two, v.to_string()).unwrap();
    let r = command(
        "labels",
        "dell-xe9680-8xh100",
        Some("h100-8x"),
        &dra_arg(&two),
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr.trim(),
        format!(
            "error: {}: slices of 2 nodes (n1, n2): say which is this one with --node-name (NODE_NAME)",
            two.display()
        )
    );
    let _: BTreeMap<String, String> = labels_of(&r.stdout);
}

/// The nvidia-gfd profile on a node whose GPUs NVIDIA's DRA driver publishes: the hardware's
/// labels only (kubernetes-sigs/dra-driver-nvidia-gpu#1244): not the device plugin's view (MIG
/// strategy, time-slicing replicas and sharing strategy, the `-SHARED` product), whatever the
/// config says of them; `gfdOnDra: all` keeps everything.
#[test]
fn the_gfd_profile_on_a_dra_node_keeps_the_hardware_labels_only() {
    let dir = tempfile::tempdir().unwrap();
    let slices = fixtures().join("dra/dell-xe9680-8xh100.json");
    let sharing = fixtures().join("sharing/time-slicing.yaml");
    let labels = |name: &str, config: &str, dra: bool| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, config).unwrap();
        let mut extra: Vec<OsString> = vec!["--config".into(), path.into()];
        if dra {
            extra.extend(dra_arg(&slices));
        }
        labels_of(command("labels", "dell-xe9680-8xh100", Some("h100-8x"), &extra).ok())
    };
    let device_plugin_view = format!(
        "profiles: [nvidia-gfd]\nmigStrategy: single\nsources: {{sharing: {{configFile: {}}}}}\n",
        sharing.display()
    );
    let shared = labels("shared", &device_plugin_view, false);
    let plain = labels("plain", "profiles: [nvidia-gfd]\n", false);
    // What the device plugin's view adds on this node.
    let get = |m: &BTreeMap<String, String>, k: &str| m.get(k).cloned();
    assert_eq!(
        [
            get(&shared, "nvidia.com/mig.strategy"),
            get(&shared, "nvidia.com/gpu.replicas"),
            get(&shared, "nvidia.com/gpu.sharing-strategy"),
            get(&shared, "nvidia.com/gpu.product"),
        ],
        [
            Some("single".into()),
            Some("10".into()),
            Some("time-slicing".into()),
            Some("NVIDIA-H100-80GB-HBM3-SHARED".into()),
        ]
    );
    let dra_labels = [
        ("feature.node.kubernetes.io/gpu.dra.coverage", "complete"),
        ("feature.node.kubernetes.io/gpu.dra.devices", "8"),
    ];
    let mut hardware = plain.clone();
    hardware.remove("nvidia.com/gpu.replicas");
    hardware.remove("nvidia.com/gpu.sharing-strategy");
    hardware.extend(dra_labels.map(|(k, v)| (k.to_string(), v.to_string())));
    assert_eq!(
        labels("plain-dra", "profiles: [nvidia-gfd]\n", true),
        hardware
    );
    // The built-in rules still say what the sharing file says (`gpu.sharing`, a fact of the
    // node's files); the profile no longer presents it as GFD's resource view.
    let mut shared_hardware = hardware.clone();
    for k in ["gpu.replicas", "gpu.sharing-strategy"] {
        let k = format!("feature.node.kubernetes.io/{k}");
        shared_hardware.insert(k.clone(), shared[&k].clone());
    }
    assert_eq!(
        labels("shared-dra", &device_plugin_view, true),
        shared_hardware
    );

    let mut all = shared.clone();
    all.extend(dra_labels.map(|(k, v)| (k.to_string(), v.to_string())));
    assert_eq!(
        labels("all", &format!("{device_plugin_view}gfdOnDra: all\n"), true),
        all
    );
}

/// `explain --label gpu.dra.coverage` names each mismatch with its bus id, what the slices say
/// and what the machine has, under the rule that made the label.
#[test]
fn explain_names_the_mismatches_of_the_dra_labels() {
    let dir = tempfile::tempdir().unwrap();
    let path = mutated(dir.path(), |v| {
        devices(v).remove(3);
        devices(v)[1]["capacity"]["memory"]["value"] = json!("0");
    });
    let mut args = fixture_args(&["explain"], "dell-xe9680-8xh100", &[]);
    args.retain(|a| a != "--no-nvml");
    args.extend(["--nvml-lib".into(), fake_nvml_lib("nvidia_ml").into()]);
    args.extend(dra_arg(&path));
    args.extend(["--label".into(), "gpu.dra.coverage".into()]);
    let env = [("FAKE_NVML_FIXTURE", nvml_fixture("h100-8x"))];
    let r = run_env(args, &env);
    let want: Vec<&str> = vec![
        "label feature.node.kubernetes.io/gpu.dra.coverage=partial: present",
        "  the rules that name it:",
        "",
        "NodeFeatureRule \"gpu-labeler-gpu\" (builtin:rules/gpu.yaml)",
        "  rule \"gpu dra coverage\" (builtin:rules/gpu.yaml:244:7): MATCHED",
        "    matchFeatures (all terms must match): matched",
        "      term 1 (line 252): feature \"dra.node\" (3 attribute(s)): matched",
        "        dra.node.coverage = \"partial\": coverage Exists -> yes",
        "        flags/attributes: all expressions hold",
        "      term 2 (line 255): feature \"gpu.node\" (30 attribute(s)): matched",
        "        gpu.node.count = \"8\": count Gt [\"0\"] -> yes",
        "        flags/attributes: all expressions hold",
        "    label feature.node.kubernetes.io/gpu.dra.coverage=@dra.node.coverage (published as feature.node.kubernetes.io/gpu.dra.coverage=partial)",
        "    label feature.node.kubernetes.io/gpu.dra.devices=@dra.node.devices (published as feature.node.kubernetes.io/gpu.dra.devices=7)",
        "",
        "",
        "  where the slices disagree with the machine (dra.mismatch):",
        "    unpublished 0000:5d:00.0: no slice device covers this GPU (NVIDIA H100 80GB HBM3)",
        "    zero-memory 0000:3b:00.0 memory: the slices say 0, the machine 81559Mi",
    ];
    assert_eq!(r.ok(), want.join("\n") + "\n");
}

/// AMD's older release, in the shape of the dump ROCm/k8s-gpu-dra-driver#21 shows (not its
/// values): `resource.k8s.io/v1beta1` with attributes under `basic`, partitions that name their
/// GPU by `parentPciAddr` and carry no `pciBusID`. Written as YAML here for the MI300X fixture's
/// eight GPUs, two partitions each: every GPU covered through the older attribute.
#[test]
fn an_older_amd_release_is_joined_through_parent_pci_addr() {
    let buses = [
        "0000:05:00.0",
        "0000:27:00.0",
        "0000:47:00.0",
        "0000:65:00.0",
        "0000:85:00.0",
        "0000:a7:00.0",
        "0000:c7:00.0",
        "0000:e5:00.0",
    ];
    let mut yaml = String::from(
        "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceSlice\nmetadata: {name: n1-gpu.amd.com-x}\nspec:\n  driver: gpu.amd.com\n  nodeName: n1\n  pool: {name: n1, generation: 1, resourceSliceCount: 1}\n  devices:\n",
    );
    for (g, bus) in buses.iter().enumerate() {
        for p in 0..2 {
            yaml.push_str(&format!(
                "  - name: gpu-{g}-{p}\n    basic:\n      attributes:\n        type: {{string: amdgpu-partition}}\n        partitionProfile: {{string: dpx_nps1}}\n        parentPciAddr: {{string: \"{bus}\"}}\n        resource.kubernetes.io/pcieRoot: {{string: \"pci{}\"}}\n      capacity:\n        memory: {{value: 98296Mi}}\n",
                &bus[..7]
            ));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("older.yaml");
    std::fs::write(&path, yaml).unwrap();
    let r = command("features", "amd-mi300x-cpx", None, &dra_arg(&path));
    let (node, mismatches, devices) = dra_features(r.ok());
    assert_eq!(
        (node, mismatches),
        (
            json!({"coverage": "complete", "devices": "8", "drivers": "gpu.amd.com"}),
            json!([])
        )
    );
    let joined: Vec<(String, String)> = devices
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["attributes"]["device"].as_str().unwrap().to_string(),
                d["attributes"]["gpu"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = buses
        .iter()
        .enumerate()
        .flat_map(|(g, b)| (0..2).map(move |p| (format!("gpu-{g}-{p}"), b.to_string())))
        .collect();
    assert_eq!(joined, want);
}
