//! `gpu-labeler template`: a node group's scale-from-zero template from one captured node.
//!
//! - On every fixture scenario `labels` is tested on (every sysfs machine, every DRA fixture,
//!   every NVML capture through the fake library, every snapshot, every rule fixture, the mixed
//!   nodes, every sharing config, the MIG strategies), `template -o json --per-node keep` gives
//!   exactly `labels -o json`'s labels and taints, and the default `template -o json` gives them
//!   too, but for a degraded node's health labels, which are a healthy node's.
//! - Each output format's golden file (tests/fixtures/template/), the Karpenter documents
//!   valid against Karpenter's CRDs (tests/fixtures/template/karpenter/PROVENANCE.md).
//! - `diff --template` names each node that differs with what differs, exit 4.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::{Value, json};

/// One way `labels` is run: its arguments (after `-o json`) and environment.
struct Scenario {
    id: String,
    args: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
}

fn os(s: impl AsRef<std::ffi::OsStr>) -> OsString {
    s.as_ref().to_os_string()
}

/// NFD's fake features snapshot with `rules` alone.
fn nfd_fake_with(rules: &Path) -> Vec<OsString> {
    vec![
        os("--features"),
        os(fixtures().join("rules/features/nfd-fake.features.json")),
        os("--no-default-rules"),
        os("--rules"),
        os(rules),
    ]
}

/// `diff --template TEMPLATE --nodes NODES -o FORMAT`, by format.
fn diff_args(template: &Path, nodes: &Path) -> impl Fn(&str) -> Vec<OsString> {
    let (template, nodes) = (template.to_path_buf(), nodes.to_path_buf());
    move |o| {
        vec![
            os("diff"),
            os("--template"),
            os(&template),
            os("--nodes"),
            os(&nodes),
            os("-o"),
            os(o),
        ]
    }
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    v.sort();
    v
}

fn stem(p: &Path, ext: &str) -> String {
    let name = p.file_name().unwrap().to_string_lossy();
    name.strip_suffix(ext).unwrap_or(&name).to_string()
}

fn config_file(dir: &Path, name: &str, text: &str) -> Vec<OsString> {
    let path = dir.join(format!("{name}.config.yaml"));
    std::fs::write(&path, text).unwrap();
    vec![os("--config"), path.into_os_string()]
}

/// A fake-NVML scenario: the capture answers; the sysfs tree is a machine's, or empty (NVML
/// alone).
fn nvml_args(capture: &Path, machine: Option<&str>, dir: &Path) -> (Vec<OsString>, OsString) {
    let mut args = match machine {
        Some(m) => discovery_args(&sysfs_fixture(m), &proc_fixture(m)),
        None => {
            let root = dir.join("empty-sys");
            std::fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
            discovery_args(&root, &proc_fixture("none"))
        }
    };
    args.retain(|a| a != "--no-nvml");
    args.extend([
        os("--nvml-lib"),
        fake_nvml_lib("nvidia_ml").into_os_string(),
    ]);
    (args, capture.as_os_str().to_os_string())
}

/// Every scenario, from the fixture tree (a new fixture is a new scenario).
fn scenarios(dir: &Path) -> Vec<Scenario> {
    let gfd = config_file(dir, "gfd", "profiles: [nvidia-gfd]\n");
    let mut out = Vec::new();
    let mut add = |id: String, args: Vec<OsString>, env: Vec<(&'static str, OsString)>| {
        out.push(Scenario { id, args, env });
    };
    // Every sysfs machine, without and with the nvidia-gfd profile.
    let machines = sysfs_machines();
    for m in &machines {
        let args = discovery_args(&sysfs_fixture(m), &proc_fixture(m));
        add(format!("sysfs {m}"), args.clone(), vec![]);
        add(
            format!("sysfs {m} gfd"),
            [args, gfd.clone()].concat(),
            vec![],
        );
    }
    // Every DRA fixture with its machine.
    for f in files(&fixtures().join("dra"), ".json") {
        let m = stem(&f, ".json");
        let mut args = discovery_args(&sysfs_fixture(&m), &proc_fixture(&m));
        args.extend([os("--dra"), f.into_os_string()]);
        add(format!("dra {m}"), args, vec![]);
    }
    // Every NVML capture alone, without and with the profile; the two paired with their
    // machines (tests/fixtures/dra/generate.py's pairs).
    for f in files(&fixtures().join("nvml"), ".json") {
        let name = stem(&f, ".json");
        let (args, capture) = nvml_args(&f, None, dir);
        let env = vec![("FAKE_NVML_FIXTURE", capture)];
        add(format!("nvml {name}"), args.clone(), env.clone());
        add(
            format!("nvml {name} gfd"),
            [args, gfd.clone()].concat(),
            env,
        );
    }
    for (m, capture) in [
        ("dell-xe9680-8xh100", "h100-8x"),
        ("dell-xe9680-8xh100", "h100-8x-xid"),
        ("azure-nd-a100-v4", "a100-8x-nvlink"),
    ] {
        let (args, capture) = nvml_args(&nvml_fixture(capture), Some(m), dir);
        let env = vec![("FAKE_NVML_FIXTURE", capture.clone())];
        let id = format!("{m} + {}", capture.to_string_lossy());
        add(id.clone(), args.clone(), env.clone());
        add(format!("{id} gfd"), [args, gfd.clone()].concat(), env);
    }
    // The MIG strategies and every sharing config (on the H100 node, with the profile).
    for (capture, strategy) in [
        ("a100-80gb-mig-4x1g", "single"),
        ("a100-pcie-40gb-mig-mixed", "mixed"),
        ("h200-mig-me", "mixed"),
    ] {
        let (args, c) = nvml_args(&nvml_fixture(capture), None, dir);
        let cfg = config_file(
            dir,
            &format!("{capture}-{strategy}"),
            &format!("profiles: [nvidia-gfd]\nmigStrategy: {strategy}\n"),
        );
        add(
            format!("nvml {capture} mig {strategy}"),
            [args, cfg].concat(),
            vec![("FAKE_NVML_FIXTURE", c)],
        );
    }
    for f in files(&fixtures().join("sharing"), ".yaml") {
        let name = stem(&f, ".yaml");
        let (args, c) = nvml_args(&nvml_fixture("h100-8x"), Some("dell-xe9680-8xh100"), dir);
        let cfg = config_file(
            dir,
            &format!("sharing-{name}"),
            &format!(
                "profiles: [nvidia-gfd]\nsources: {{sharing: {{configFile: {}}}}}\n",
                f.display()
            ),
        );
        add(
            format!("sharing {name}"),
            [args, cfg].concat(),
            vec![("FAKE_NVML_FIXTURE", c)],
        );
    }
    // The mixed nodes, with their own PCI database and NVML captures.
    let mixed = fixtures().join("mixed");
    for m in ["h100-l40s", "nvidia-amd"] {
        let (mut args, c) = nvml_args(&mixed.join(format!("{m}.nvml.json")), None, dir);
        let i = args.iter().position(|a| a == "--sysfs-root").unwrap();
        args[i + 1] = mixed.join(m).into_os_string();
        let i = args.iter().position(|a| a == "--pci-ids").unwrap();
        args[i + 1] = mixed.join("pci.ids").into_os_string();
        let i = args.iter().position(|a| a == "--proc-root").unwrap();
        args[i + 1] = mixed.join("proc").into_os_string();
        add(
            format!("mixed {m}"),
            [args, gfd.clone()].concat(),
            vec![("FAKE_NVML_FIXTURE", c)],
        );
    }
    // Every snapshot, without and with the profile.
    let mut snapshots = Vec::new();
    for d in ["golden", "rules/features", "gfd"] {
        snapshots.extend(files(&fixtures().join(d), ".features.json"));
    }
    for s in &snapshots {
        let args = vec![os("--features"), s.clone().into_os_string()];
        let id = s.strip_prefix(fixtures()).unwrap().display().to_string();
        add(format!("snapshot {id}"), args.clone(), vec![]);
        add(
            format!("snapshot {id} gfd"),
            [args, gfd.clone()].concat(),
            vec![],
        );
    }
    // Every rule fixture directory over every rules snapshot, the shipped rules left out.
    for rules in ["nfd", "intel", "typos"] {
        for s in files(&fixtures().join("rules/features"), ".features.json") {
            let args = vec![
                os("--features"),
                s.clone().into_os_string(),
                os("--no-default-rules"),
                os("--rules"),
                fixtures().join("rules").join(rules).into_os_string(),
            ];
            add(
                format!("rules {rules} on {}", stem(&s, ".features.json")),
                args,
                vec![],
            );
        }
    }
    out
}

/// `labels -o json` of a scenario beside `template -o json --per-node MODE`.
fn command(cmd: &[&str], s: &Scenario) -> Run {
    let mut a: Vec<OsString> = cmd.iter().map(os).collect();
    a.extend(s.args.iter().cloned());
    run_env(a, &s.env)
}

fn label_map_of(v: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(v["labels"].clone()).expect("a label map")
}

const HEALTH: &str = "feature.node.kubernetes.io/gpu.health";
const HEALTHY: &str = "feature.node.kubernetes.io/gpu.healthy.count";
const COUNT: &str = "feature.node.kubernetes.io/gpu.count";

#[test]
fn on_every_fixture_scenario_the_template_labels_are_the_labels() {
    let dir = tempfile::tempdir().unwrap();
    let all = scenarios(dir.path());
    assert!(all.len() > 100, "{} scenarios", all.len());
    let failures: Vec<String> = std::thread::scope(|scope| {
        let chunks: Vec<&[Scenario]> = all.chunks(all.len().div_ceil(4)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| scope.spawn(move || chunk.iter().filter_map(check).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// What is wrong with one scenario's template, if anything.
fn check(s: &Scenario) -> Option<String> {
    let labels = command(&["labels", "-o", "json"], s);
    let keep = command(&["template", "-o", "json", "--per-node", "keep"], s);
    let default = command(&["template", "-o", "json"], s);
    let mut problems = Vec::new();
    if (keep.code, &keep.stderr) != (labels.code, &labels.stderr) {
        problems.push(format!(
            "exit/stderr: labels {} {:?}, template {} {:?}",
            labels.code, labels.stderr, keep.code, keep.stderr
        ));
    }
    let l: Value = serde_json::from_str(&labels.stdout).expect("labels -o json");
    let k: Value = serde_json::from_str(&keep.stdout).expect("template -o json");
    let d: Value = serde_json::from_str(&default.stdout).expect("template -o json");
    // Byte for byte: each value is the same string.
    if k["labels"] != l["labels"] {
        problems.push(json_differences(&k["labels"], &l["labels"]).join("; "));
    }
    let taints = l.get("taints").cloned().unwrap_or(json!([]));
    if k["taints"] != taints {
        problems.push(format!("taints {} != {taints}", k["taints"]));
    }
    // The default: a healthy node of the shape. On a healthy node that is `labels`; on a
    // degraded one, the health labels say what they say of a node whose GPUs are all healthy.
    let mut want = label_map_of(&l);
    if want.get(HEALTH).map(String::as_str) == Some("degraded") {
        want.insert(HEALTH.into(), "ok".into());
        let count = want.get(COUNT).cloned().unwrap_or_default();
        want.insert(HEALTHY.into(), count);
    }
    if label_map_of(&d) != want {
        problems.push(format!(
            "default: {}",
            json_differences(&d["labels"], &json!(want)).join("; ")
        ));
    }
    (!problems.is_empty()).then(|| format!("{}:\n  {}", s.id, problems.join("\n  ")))
}

// ---------------------------------------------------------------------------------------------
// The formats, each against its golden file (tests/fixtures/template/<scenario>.<format>).

fn template_dir() -> PathBuf {
    fixtures().join("template")
}

/// Compares with a golden file byte for byte; `UPDATE_GOLDEN=1` rewrites it.
fn check_template_golden(name: &str, actual: &str) {
    let path = template_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; UPDATE_GOLDEN=1 creates it", path.display()));
    assert_eq!(
        actual,
        expected,
        "differs from {} (UPDATE_GOLDEN=1 rewrites it after review)",
        path.display()
    );
}

/// The scenarios of the golden files: `(name, args, env)`.
fn golden_scenario(name: &str, dir: &Path) -> Scenario {
    let gfd = config_file(dir, name, "profiles: [nvidia-gfd]\n");
    let (args, env) = match name {
        "h100" => {
            let (a, c) = nvml_args(&nvml_fixture("h100-8x"), Some("dell-xe9680-8xh100"), dir);
            ([a, gfd].concat(), vec![("FAKE_NVML_FIXTURE", c)])
        }
        "h100-time-slicing-renamed" => {
            let (a, c) = nvml_args(&nvml_fixture("h100-8x"), Some("dell-xe9680-8xh100"), dir);
            let cfg = config_file(
                dir,
                name,
                &format!(
                    "profiles: [nvidia-gfd]\nsources: {{sharing: {{configFile: {}}}}}\n",
                    fixtures()
                        .join("sharing/time-slicing-renamed.yaml")
                        .display()
                ),
            );
            ([a, cfg].concat(), vec![("FAKE_NVML_FIXTURE", c)])
        }
        "a100-mig-mixed" => {
            let (a, c) = nvml_args(&nvml_fixture("a100-pcie-40gb-mig-mixed"), None, dir);
            let cfg = config_file(dir, name, "profiles: [nvidia-gfd]\nmigStrategy: mixed\n");
            ([a, cfg].concat(), vec![("FAKE_NVML_FIXTURE", c)])
        }
        "mi300x-cpx" | "tigerlake" => {
            let m = if name == "tigerlake" {
                "intel-tigerlake-igpu"
            } else {
                "amd-mi300x-cpx"
            };
            (discovery_args(&sysfs_fixture(m), &proc_fixture(m)), vec![])
        }
        "nfd-taints" => (
            nfd_fake_with(&fixtures().join("rules/nfd/e2e-nodefeaturerule-3.yaml")),
            vec![],
        ),
        other => panic!("no golden scenario {other}"),
    };
    Scenario {
        id: name.to_string(),
        args,
        env,
    }
}

const FORMATS: [&str; 6] = [
    "json",
    "cluster-autoscaler",
    "cluster-autoscaler-gce",
    "cluster-api",
    "karpenter",
    "resourceslice",
];

/// The golden scenarios (see `golden_scenario`).
const GOLDEN_SCENARIOS: [&str; 6] = [
    "h100",
    "h100-time-slicing-renamed",
    "a100-mig-mixed",
    "mi300x-cpx",
    "tigerlake",
    "nfd-taints",
];

#[test]
fn every_format_of_every_golden_scenario_is_its_golden_file() {
    let dir = tempfile::tempdir().unwrap();
    for name in GOLDEN_SCENARIOS {
        let s = golden_scenario(name, dir.path());
        if name == "h100" {
            // The snapshot docs/autoscaling.md's examples start from.
            let r = command(&["features", "-o", "json"], &s);
            check_template_golden("h100.features.json", r.ok());
        }
        for format in FORMATS {
            let r = command(
                &[
                    "template",
                    "-o",
                    format,
                    "--node-name",
                    "gpu-node-1",
                    "--instance-type",
                    "p5.48xlarge",
                ],
                &s,
            );
            let file = if format == "json" {
                format!("{name}.json")
            } else {
                format!("{name}.{format}.yaml")
            };
            check_template_golden(&file, r.ok());
        }
    }
}

/// The `openAPIV3Schema` of a CRD kept in tests/fixtures/template/karpenter.
fn crd_schema(file: &str) -> jsonschema::Validator {
    let path = template_dir().join("karpenter").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let crd: Value = serde_saphyr::from_str(&text).unwrap();
    let schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
    jsonschema::draft7::new(&schema).expect("the CRD's schema compiles")
}

fn schema_errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// The documents of `template -o karpenter`.
fn karpenter_docs(text: &str) -> Vec<Value> {
    text.split("\n---\n")
        .map(|d| serde_saphyr::from_str(d).expect("a YAML document"))
        .collect()
}

#[test]
fn the_karpenter_documents_are_valid_against_karpenters_crds() {
    let pools = crd_schema("karpenter.sh_nodepools.yaml");
    let overlays = crd_schema("karpenter.sh_nodeoverlays.yaml");
    for name in GOLDEN_SCENARIOS {
        let text =
            std::fs::read_to_string(template_dir().join(format!("{name}.karpenter.yaml"))).unwrap();
        let docs = karpenter_docs(&text);
        let pool = &docs[0];
        assert_eq!(pool["kind"], "NodePool", "{name}");
        assert_eq!(schema_errors(&pools, pool), Vec::<String>::new(), "{name}");
        // The CRD's CEL rules a template could break.
        let labels = pool["spec"]["template"]["metadata"]["labels"]
            .as_object()
            .unwrap();
        for k in labels.keys() {
            let domain = k.split('/').next().unwrap();
            assert!(
                !(k.contains('/') && domain.ends_with("karpenter.sh")),
                "{name}: {k}"
            );
            assert_ne!(k, "kubernetes.io/hostname");
        }
        // The pool's labels are the template's.
        let t: Value = serde_json::from_str(
            &std::fs::read_to_string(template_dir().join(format!("{name}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(&Value::Object(labels.clone()), &t["labels"], "{name}");
        match docs.get(1) {
            Some(overlay) => {
                assert_eq!(overlay["kind"], "NodeOverlay");
                assert_eq!(
                    schema_errors(&overlays, overlay),
                    Vec::<String>::new(),
                    "{name}"
                );
                assert_eq!(overlay["spec"]["capacity"], t["resources"], "{name}");
                for k in overlay["spec"]["capacity"].as_object().unwrap().keys() {
                    assert!(!["cpu", "memory", "ephemeral-storage", "pods"].contains(&k.as_str()));
                }
            }
            None => assert_eq!(t["resources"], json!({}), "{name}"),
        }
    }
    // The validator does refuse what the CRD refuses: a label value of 64 characters, a pool
    // without its NodeClass, an overlay capacity that is not a quantity.
    let text = std::fs::read_to_string(template_dir().join("h100.karpenter.yaml")).unwrap();
    let docs = karpenter_docs(&text);
    let mut pool = docs[0].clone();
    pool["spec"]["template"]["metadata"]["labels"]["example.com/x"] = json!("x".repeat(64));
    pool["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("nodeClassRef");
    assert_eq!(schema_errors(&pools, &pool).len(), 2);
    let mut overlay = docs[1].clone();
    overlay["spec"]["capacity"]["nvidia.com/gpu"] = json!("eight");
    assert_eq!(schema_errors(&overlays, &overlay).len(), 1);
}

// ---------------------------------------------------------------------------------------------
// `diff --template`.

/// A Node as `kubectl get nodes -o json` lists it.
fn node(
    name: &str,
    labels: &BTreeMap<String, String>,
    allocatable: &Value,
    taints: &Value,
) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
           "spec": {"taints": taints}, "status": {"allocatable": allocatable}})
}

fn write_json(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).unwrap();
    p
}

#[test]
fn diff_names_each_node_that_differs_with_what_differs() {
    let dir = tempfile::tempdir().unwrap();
    let h100: Value =
        serde_json::from_str(&std::fs::read_to_string(template_dir().join("h100.json")).unwrap())
            .unwrap();
    let labels: BTreeMap<String, String> = serde_json::from_value(h100["labels"].clone()).unwrap();
    let mut with_kubelet = labels.clone();
    with_kubelet.insert("kubernetes.io/hostname".into(), "a".into());
    let mut seven = labels.clone();
    seven.insert("nvidia.com/gpu.count".into(), "7".into());
    let mut other_driver = labels.clone();
    other_driver.insert("nvidia.com/cuda.driver.major".into(), "570".into());
    other_driver.remove("feature.node.kubernetes.io/gpu.present");
    let alloc = json!({"cpu": "192", "nvidia.com/gpu": "8"});
    let nodes = json!({"apiVersion": "v1", "kind": "List", "items": [
        node("a", &with_kubelet, &alloc, &json!([])),
        node("b", &seven, &json!({"nvidia.com/gpu": "7"}), &json!([])),
        node("c", &other_driver, &alloc, &json!([])),
    ]});
    let nodes_file = write_json(dir.path(), "nodes.json", &nodes);
    let template = template_dir().join("h100.json");
    let args = diff_args(&template, &nodes_file);
    let r = run(args("text"));
    assert_eq!((r.code, r.stderr.as_str()), (4, ""));
    let driver = labels["nvidia.com/cuda.driver.major"].clone();
    assert_eq!(
        r.stdout,
        format!(
            "node b: label nvidia.com/gpu.count: template \"8\", node \"7\"\n\
             node b: resource nvidia.com/gpu: template \"8\", node \"7\"\n\
             node c: label feature.node.kubernetes.io/gpu.present: template \"true\", node absent\n\
             node c: label nvidia.com/cuda.driver.major: template \"{driver}\", node \"570\"\n\
             2 of 3 node(s) differ from the template\n"
        )
    );
    let r = run(args("json"));
    assert_eq!(r.code, 4);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v,
        json!({"nodes": 3, "differ": 2, "differences": [
            {"node": "b", "differences": [
                {"field": "label", "key": "nvidia.com/gpu.count", "template": "8", "node": "7"},
                {"field": "resource", "key": "nvidia.com/gpu", "template": "8", "node": "7"}]},
            {"node": "c", "differences": [
                {"field": "label", "key": "feature.node.kubernetes.io/gpu.present", "template": "true", "node": null},
                {"field": "label", "key": "nvidia.com/cuda.driver.major", "template": driver, "node": "570"}]}]})
    );
    // Only the group's nodes: a selector that picks `a`.
    let mut a = args("text");
    a.extend([os("-l"), os("kubernetes.io/hostname=a")]);
    let r = run(a);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (0, "0 of 1 node(s) differ from the template\n", "")
    );
}

/// `diff --template` holds the fleet against itself too (#47): a node of an instance type
/// whose `gpu.count` is below most of its type's is named, with the usual count, whatever the
/// template says (here the template does not name the type's count at all).
#[test]
fn diff_names_a_node_short_of_its_instance_type() {
    let (dir, template) = temp_file(
        "empty.json",
        r#"{"labels": {}, "resources": {}, "taints": []}"#,
    );
    let node_of = |name: &str, count: &str| {
        let labels: BTreeMap<String, String> = [
            ("node.kubernetes.io/instance-type", "p5.48xlarge"),
            ("feature.node.kubernetes.io/gpu.count", count),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        node(name, &labels, &json!({}), &json!([]))
    };
    let nodes = json!({"apiVersion": "v1", "kind": "List", "items": [
        node_of("p5-a", "8"), node_of("p5-b", "7"), node_of("p5-c", "8")]});
    let nodes_file = write_json(dir.path(), "nodes.json", &nodes);
    let args = diff_args(&template, &nodes_file);
    let r = run(args("text"));
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            4,
            "0 of 3 node(s) differ from the template\n\
             1 node(s) with fewer GPUs than most of their instance type:\n\
             \x20 p5-b (p5.48xlarge): 7 GPUs, 8 on 2 of its 3 nodes\n",
            ""
        )
    );
    let r = run(args("json"));
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        (r.code, v),
        (
            4,
            json!({"nodes": 3, "differ": 0, "differences": [], "short": [
                {"node": "p5-b", "instance_type": "p5.48xlarge", "gpus": 7, "usual": 8,
                 "usual_nodes": 2, "type_nodes": 3}]})
        )
    );
}

#[test]
fn diff_reports_a_missing_taint_and_a_bad_template_by_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let template = template_dir().join("nfd-taints.json");
    let t: Value = serde_json::from_str(&std::fs::read_to_string(&template).unwrap()).unwrap();
    let labels: BTreeMap<String, String> = serde_json::from_value(t["labels"].clone()).unwrap();
    let taints = t["taints"].as_array().unwrap();
    let nodes = json!({"kind": "NodeList", "apiVersion": "v1", "items": [
        node("n", &labels, &json!({}), &json!(taints[1..]))]});
    let nodes_file = write_json(dir.path(), "nodes.json", &nodes);
    let r = run([
        os("diff"),
        os("--template"),
        template.into_os_string(),
        os("--nodes"),
        nodes_file.clone().into_os_string(),
    ]);
    let first = &taints[0];
    assert_eq!(
        (r.code, r.stdout),
        (
            4,
            format!(
                "node n: taint {}:{}: template {}, node absent\n1 of 1 node(s) differ from the template\n",
                first["key"].as_str().unwrap(),
                first["effect"].as_str().unwrap(),
                first["value"]
            )
        )
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"labels\": {\"a\": 1}}").unwrap();
    let r = run([
        os("diff"),
        os("--template"),
        bad.clone().into_os_string(),
        os("--nodes"),
        nodes_file.into_os_string(),
    ]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        format!(
            "error: {}:1:18: not a template as `template -o json` writes it: invalid type: integer `1`, expected a string at line 1 column 18\n",
            bad.display()
        )
    );
}

// ---------------------------------------------------------------------------------------------
// What an autoscaler would refuse or drop is said, not written silently.

#[test]
fn limits_of_each_autoscaler_are_warned_about_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let h100 = golden_scenario("h100", dir.path());
    let stderr = |cmd: &[&str], s: &Scenario| {
        let r = command(cmd, s);
        (r.code, r.stderr)
    };
    assert_eq!(
        stderr(&["template", "-o", "cluster-autoscaler"], &h100),
        (0, "warning: 56 node-template tags: an Auto Scaling group holds at most 50 (with its other tags); keep the labels pods select on with --label-ns\n".to_string())
    );
    assert_eq!(
        stderr(
            &[
                "template",
                "-o",
                "cluster-autoscaler",
                "--label-ns",
                "nvidia.com"
            ],
            &h100
        ),
        (0, String::new())
    );
    assert_eq!(
        stderr(&["template", "-o", "karpenter"], &h100),
        (0, "warning: no --instance-type: the NodePool may launch any instance type with these labels; name the types of this shape\n".to_string())
    );
    let mig = golden_scenario("a100-mig-mixed", dir.path());
    assert_eq!(
        stderr(&["template", "-o", "cluster-api"], &mig),
        (0, "warning: Cluster API's annotations hold one GPU resource (nvidia.com/mig-1g.5gb); not said: nvidia.com/mig-2g.10gb\n".to_string())
    );
    let taints = golden_scenario("nfd-taints", dir.path());
    assert_eq!(
        stderr(&["template", "-o", "resourceslice"], &taints),
        (0, "warning: no GPU of a vendor with a DRA driver (NVIDIA, AMD, Intel): no ResourceSlice\n".to_string())
    );
    // A NodePool holds at most 100 labels and none of Karpenter's own domain.
    let many: String = (0..101).map(|i| format!("        l{i}: \"1\"\n")).collect();
    let rules = dir.path().join("many.yaml");
    std::fs::write(
        &rules,
        format!(
            "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: many\nspec:\n  rules:\n    - name: many\n      labels:\n{many}        karpenter.sh/x: \"1\"\n"
        ),
    )
    .unwrap();
    let config = config_file(
        dir.path(),
        "karpenter-ns",
        "labels: {extraLabelNs: [karpenter.sh]}\n",
    );
    let with = |n: usize| Scenario {
        id: "many".into(),
        args: [
            nfd_fake_with(&rules),
            config.clone(),
            if n == 0 {
                vec![]
            } else {
                vec![os("--label-ns"), os("karpenter.sh")]
            },
        ]
        .concat(),
        env: vec![],
    };
    assert_eq!(
        stderr(&["template", "-o", "karpenter"], &with(0)),
        (1, "error: 102 labels: a NodePool's template holds at most 100 (its CRD's maxProperties); keep the labels pods select on with --label-ns\n".to_string())
    );
    assert_eq!(
        stderr(&["template", "-o", "karpenter"], &with(1)),
        (1, "error: label \"karpenter.sh/x\": the karpenter.sh domain is Karpenter's own (its CRD refuses it)\n".to_string())
    );
}

// ---------------------------------------------------------------------------------------------
// The slice template against what the drivers publish (tests/fixtures/dra/generate.py).

/// Each device's attributes and capacities that differ between the generated fixture of a
/// machine (what the vendor's driver publishes there) and `template -o resourceslice
/// --per-node keep`, devices paired by bus id: `key: fixture -> template` (`-`: absent).
fn slice_differences(machine: &str, dir: &Path) -> BTreeSet<String> {
    let (mut args, env) = match machine {
        "dell-xe9680-8xh100" | "azure-nd-a100-v4" => {
            let capture = if machine == "azure-nd-a100-v4" {
                "a100-8x-nvlink"
            } else {
                "h100-8x"
            };
            let (a, c) = nvml_args(&nvml_fixture(capture), Some(machine), dir);
            (a, vec![("FAKE_NVML_FIXTURE", c)])
        }
        m => (discovery_args(&sysfs_fixture(m), &proc_fixture(m)), vec![]),
    };
    args.extend([os("--node-name"), os("n1")]);
    let s = Scenario {
        id: machine.into(),
        args,
        env,
    };
    let r = command(
        &["template", "-o", "resourceslice", "--per-node", "keep"],
        &s,
    );
    let ours: Vec<Value> = r
        .ok()
        .split("\n---\n")
        .flat_map(|d| {
            let slice: Value = serde_saphyr::from_str(d).unwrap();
            slice["spec"]["devices"].as_array().unwrap().clone()
        })
        .collect();
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join(format!("dra/{machine}.json"))).unwrap(),
    )
    .unwrap();
    let theirs: Vec<Value> = fixture["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["spec"]["devices"].as_array().unwrap().clone())
        .collect();
    // Paired by bus id, in order within one bus id (a GPU's partitions).
    let keyed = |devices: &[Value]| -> BTreeMap<(String, usize), Value> {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        devices
            .iter()
            .map(|d| {
                let a = &d["attributes"];
                let bus = a["resource.kubernetes.io/pciBusID"]["string"]
                    .as_str()
                    .or(a["pciAddress"]["string"].as_str())
                    .unwrap_or("")
                    .to_string();
                let n = seen.entry(bus.clone()).or_default();
                *n += 1;
                ((bus, *n), d.clone())
            })
            .collect()
    };
    let (ours, theirs) = (keyed(&ours), keyed(&theirs));
    let mut out = BTreeSet::new();
    let shown = |v: Option<&Value>| v.map_or("-".to_string(), |v| v.to_string());
    for key in ours.keys().chain(theirs.keys()) {
        let (Some(o), Some(t)) = (ours.get(key), theirs.get(key)) else {
            out.insert(format!("device {key:?}: only in one"));
            continue;
        };
        for field in ["attributes", "capacity"] {
            let empty = serde_json::Map::new();
            let om = o[field].as_object().unwrap_or(&empty);
            let tm = t[field].as_object().unwrap_or(&empty);
            for k in om.keys().chain(tm.keys()) {
                if om.get(k) != tm.get(k) {
                    // One line for all GPUs' UUIDs.
                    let value = |v: Option<&Value>| match v {
                        Some(_) if k == "uuid" => "UUID".to_string(),
                        v => shown(v),
                    };
                    out.insert(format!(
                        "{field}.{k}: {} -> {}",
                        value(tm.get(k)),
                        value(om.get(k))
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn the_slice_template_is_what_each_driver_publishes_but_for_what_the_features_lack() {
    // What the features cannot say (docs/autoscaling.md lists it): NVIDIA's brand; AMD's
    // productName (sysfs product_name), the driver's 80 GiB and 20 GiB fallbacks where the
    // capture lacks KFD's memory banks (the template says the GPU's memory, shared by its
    // partitions), the SIMDs and CUs of a GPU whose KFD node the driver drops, the partition the
    // MI300X capture lacks; Intel's model table and xpumd's health; the DGX-2's UUIDs and
    // compute capability, which only hwloc's capture had (no NVML there).
    let expected: BTreeMap<&str, Vec<&str>> = BTreeMap::from([
        (
            "amd-mi210-8x",
            vec![
                r#"attributes.productName: {"string":""} -> -"#,
                r#"capacity.memory: {"value":"80Gi"} -> -"#,
            ],
        ),
        (
            "amd-mi300x-cpx",
            vec![
                r#"attributes.productName: {"string":""} -> -"#,
                r#"capacity.computeUnits: {"value":"38"} -> {"value":"33"}"#,
                r#"capacity.memory: {"value":"20Gi"} -> {"value":"24574Mi"}"#,
                r#"capacity.simdUnits: {"value":"152"} -> {"value":"133"}"#,
                r#"device ("0000:e5:00.0", 8): only in one"#,
            ],
        ),
        (
            "amd-vega10",
            vec![
                r#"attributes.productName: {"string":""} -> -"#,
                r#"capacity.computeUnits: {"value":"0"} -> {"value":"64"}"#,
                r#"capacity.memory: {"value":"80Gi"} -> {"value":"16368Mi"}"#,
                r#"capacity.simdUnits: {"value":"0"} -> {"value":"256"}"#,
            ],
        ),
        ("azure-nd-a100-v4", vec![]),
        (
            "dell-xe9680-8xh100",
            vec![r#"attributes.brand: {"string":"Nvidia"} -> -"#],
        ),
        (
            "intel-tigerlake-igpu",
            vec![
                r#"attributes.family: {"string":"Unknown"} -> -"#,
                r#"attributes.health: {"string":"Unknown"} -> -"#,
                r#"attributes.model: {"string":"Unknown"} -> -"#,
            ],
        ),
        (
            "nvidia-dgx2h",
            vec![
                r#"attributes.cudaComputeCapability: {"version":"7.0.0"} -> -"#,
                "attributes.uuid: UUID -> -",
            ],
        ),
        (
            "ttar-gpu-sriov",
            vec![r#"attributes.productName: {"string":""} -> -"#],
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let machines: Vec<String> = files(&fixtures().join("dra"), ".json")
        .iter()
        .map(|p| stem(p, ".json"))
        .collect();
    assert_eq!(
        machines,
        expected.keys().map(|k| k.to_string()).collect::<Vec<_>>()
    );
    for (m, want) in expected {
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(slice_differences(m, dir.path()), want, "{m}");
    }
}
