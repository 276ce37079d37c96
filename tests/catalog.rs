//! `docs/catalog.md` is the contract that `--help`, the README and the source cite: the feature
//! catalog, the label catalog, the exit codes, the snapshot and the configuration file. This test
//! holds the document to the code, whole:
//!
//! - its feature tables name exactly `gpu_labeler::features::CATALOG`'s features and, for each
//!   fixed set, exactly its elements; each feature has the kind (flags, attributes, instances)
//!   it has in real snapshots; every element a snapshot of the scenarios has is documented, and
//!   every example is in the snapshot of the scenario it names;
//! - its label tables are exactly the keys the binary gives on the scenarios (real fixture trees,
//!   the fake NVML driven by real captures, the `nvidia-gfd` profile), variable parts written as
//!   placeholders (`pci-<class>_<vendor>.present`), and every example is that scenario's value;
//! - its exit-code table is `gpu_labeler::exit`, constant by constant;
//! - its configuration example loads and is the defaults; its snapshot example loads.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::Path;
use std::sync::OnceLock;

use common::*;
use serde_json::Value;

const DOC: &str = "docs/catalog.md";

fn doc() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        std::fs::read_to_string(repo().join(DOC)).unwrap_or_else(|e| panic!("{DOC}: {e}"))
    })
}

// ---------------------------------------------------------------------------------------------
// Reading the document.

/// A Markdown table: its header cells and its rows, each cell trimmed.
struct Table {
    name: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// The cells of the column named `column`, row by row.
    fn column(&self, column: &str) -> Vec<&str> {
        let i = self
            .header
            .iter()
            .position(|h| h == column)
            .unwrap_or_else(|| panic!("table {}: no column {column:?}", self.name));
        self.rows.iter().map(|r| r[i].as_str()).collect()
    }
}

/// The table that follows the line `<!-- NAME -->` (there must be exactly one such line).
fn table(name: &str) -> Table {
    let marker = format!("<!-- {name} -->");
    let found: Vec<usize> = doc().match_indices(&marker).map(|(i, _)| i).collect();
    assert_eq!(found.len(), 1, "{DOC}: {marker} must appear once");
    let mut lines = doc()[found[0] + marker.len()..]
        .lines()
        .skip(1)
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.trim_start().starts_with('|'));
    let cells = table_cells;
    let header = cells(lines.next().unwrap_or_else(|| panic!("{marker}: no table")));
    let separator = cells(lines.next().expect("separator row"));
    assert!(
        separator.iter().all(|c| c.chars().all(|ch| ch == '-')),
        "{marker}: no separator row"
    );
    let rows: Vec<Vec<String>> = lines.map(cells).collect();
    for r in &rows {
        assert_eq!(r.len(), header.len(), "{marker}: row {r:?}");
    }
    Table {
        name: name.to_string(),
        header,
        rows,
    }
}

/// The names of every `<!-- PREFIX NAME -->` marker, in document order.
fn markers(prefix: &str) -> Vec<String> {
    let start = format!("<!-- {prefix} ");
    doc()
        .lines()
        .filter_map(|l| l.trim().strip_prefix(&start)?.strip_suffix(" -->"))
        .map(str::to_string)
        .collect()
}

/// A cell that is one code span (`` `x` ``): its text; `None` for "—".
fn code(cell: &str) -> Option<&str> {
    if cell == "—" {
        return None;
    }
    let inner = cell
        .strip_prefix('`')
        .and_then(|c| c.strip_suffix('`'))
        .unwrap_or_else(|| panic!("{cell:?} is neither one `code span` nor \"—\""));
    assert!(!inner.contains('`'), "{cell:?} is more than one code span");
    Some(inner)
}

/// The first fenced block of `lang` after the line `<!-- NAME -->`.
fn fenced(name: &str, lang: &str) -> &'static str {
    let marker = format!("<!-- {name} -->");
    let at = doc()
        .find(&marker)
        .unwrap_or_else(|| panic!("{DOC}: no {marker}"));
    let rest = &doc()[at..];
    let open = format!("```{lang}\n");
    let start = rest.find(&open).expect("fenced block") + open.len();
    let len = rest[start..].find("```").expect("closing fence");
    &rest[start..start + len]
}

/// A name with placeholders (`pci-<class>_<vendor>.present`) as an anchored regex: `<class>`
/// is 4 lower-case hex digits, `<vendor>` a vendor name or id (`[0-9a-z]+`: no `-`, so
/// `gpu-<vendor>.count` is not `gpu-model-<product>.count`), any other placeholder a run of
/// label-name characters.
fn pattern(name: &str) -> regex::Regex {
    let mut re = String::from("^");
    let mut rest = name;
    while let Some(open) = rest.find('<') {
        let close = open + rest[open..].find('>').expect("placeholder closed");
        re.push_str(&regex::escape(&rest[..open]));
        re.push_str(match &rest[open + 1..close] {
            "class" => "[0-9a-f]{4}",
            "vendor" => "[0-9a-z]+",
            _ => "[A-Za-z0-9._+-]+",
        });
        rest = &rest[close + 1..];
    }
    re.push_str(&regex::escape(rest));
    re.push('$');
    regex::Regex::new(&re).unwrap()
}

fn is_pattern(name: &str) -> bool {
    name.contains('<')
}

/// The row names that `key` is: the literal row of that name if there is one, else every
/// pattern row it matches. A documented key is exactly one row.
fn rows_of<'a>(key: &str, names: &'a [String]) -> Vec<&'a str> {
    if let Some(n) = names.iter().find(|n| *n == key) {
        return vec![n.as_str()];
    }
    names
        .iter()
        .filter(|n| is_pattern(n) && pattern(n).is_match(key))
        .map(String::as_str)
        .collect()
}

/// An example cell of a row: the value (literal row) or `name=value` (pattern row, the name
/// matching it); `None` for "—".
fn example<'a>(row: &str, cell: &'a str) -> Option<(String, &'a str)> {
    let text = code(cell)?;
    if !is_pattern(row) {
        return Some((row.to_string(), text));
    }
    let (name, value) = text.split_once('=').unwrap_or((text, ""));
    assert!(
        pattern(row).is_match(name),
        "example {text:?} of {row}: {name:?} is not a {row}"
    );
    Some((name.to_string(), value))
}

// ---------------------------------------------------------------------------------------------
// The scenarios: what the binary gives on real fixtures.

/// The scenarios the document's examples come from, as its scenario table lists them.
const SCENARIOS: &[&str] = &[
    "h100",
    "h100-gpu-lost",
    "h100-short",
    "h100-shared-gfd",
    "a100-mig-single",
    "a100-mig-mixed",
    "titanv-rtx5880",
    "gb200",
    "t4-vgpu-guest",
    "mi210",
    "mi300x-cpx",
    "tigerlake",
    "hygon",
    "nfd-rootfs-1",
    "gaudi2",
    "gaudi3",
    "mixed-accel",
    "gaudi2-memory",
    "h100-dra",
    "vega10-dra",
];

/// `labels -o json` and `features -o json` of one scenario.
struct Output {
    labels: BTreeMap<String, String>,
    features: Value,
}

const GFD: &str = "profiles: [nvidia-gfd]\n";

/// The discovery arguments and environment of a scenario; `dir` holds what it builds.
fn setup(id: &str, dir: &Path) -> (Vec<OsString>, Vec<(&'static str, OsString)>) {
    let machine = |m: &str| discovery_args(&sysfs_fixture(m), &proc_fixture(m));
    // A fake-NVML scenario: `fixture` answers; the sysfs tree is `sysfs`, or one built with
    // the capture's GPUs at its bus ids (`gpus`; none: a container without the GPUs' sysfs).
    let nvml = |fixture: &str, sysfs: Option<&str>, gpus: &[(&str, &str)], config: &str| {
        let mut args = match sysfs {
            Some(m) => machine(m),
            None => {
                let root = dir.join("sys");
                std::fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
                nvidia_sysfs(&root, gpus);
                discovery_args(&root, &proc_fixture("none"))
            }
        };
        args.retain(|a| a != "--no-nvml");
        args.extend(["--nvml-lib".into(), fake_nvml_lib("nvidia_ml").into()]);
        with_config(&mut args, dir, config);
        let env = vec![("FAKE_NVML_FIXTURE", nvml_fixture(fixture).into_os_string())];
        (args, env)
    };
    let dell = Some("dell-xe9680-8xh100");
    match id {
        "h100" => nvml("h100-8x", dell, &[], ""),
        "h100-gpu-lost" => nvml("h100-8x-gpu3-lost", dell, &[], ""),
        "h100-short" => {
            // GPU 4 never came up on PCI: its function, its entry and its driver's back-link
            // are not there (NVML, which would not see it either, is left out).
            let root = dir.join("sys");
            common::copy_tree(&sysfs_fixture("dell-xe9680-8xh100"), &root);
            let gpu = "0000:9b:00.0";
            let dev = std::fs::canonicalize(root.join("bus/pci/devices").join(gpu)).unwrap();
            std::fs::remove_dir_all(dev).unwrap();
            std::fs::remove_file(root.join("bus/pci/devices").join(gpu)).unwrap();
            std::fs::remove_file(root.join("bus/pci/drivers/nvidia").join(gpu)).unwrap();
            (
                discovery_args(&root, &proc_fixture("dell-xe9680-8xh100")),
                vec![],
            )
        }
        "h100-shared-gfd" => {
            let sharing = fixtures().join("sharing/time-slicing.yaml");
            let config = format!(
                "{GFD}sources: {{sharing: {{configFile: {}}}}}\n",
                sharing.display()
            );
            nvml("h100-8x", dell, &[], &config)
        }
        "a100-mig-single" => nvml(
            "a100-80gb-mig-4x1g",
            None,
            &[("0000:01:00.0", "0x20b2")],
            &format!("{GFD}migStrategy: single\n"),
        ),
        "a100-mig-mixed" => nvml(
            "a100-pcie-40gb-mig-mixed",
            None,
            &[("0000:01:00.0", "0x20f1"), ("0000:41:00.0", "0x20f1")],
            &format!("{GFD}migStrategy: mixed\n"),
        ),
        // The capture has no bus ids: NVML alone.
        "titanv-rtx5880" => nvml("workstation-titanv-rtx5880", None, &[], ""),
        // NVML alone too: the fabric's clique.
        "gb200" => nvml("gb200-4x-clique", None, &[], GFD),
        "t4-vgpu-guest" => {
            // GFD's vGPU guest (a T4 behind a vGPU host driver 460.16): its configuration space.
            let root = dir.join("sys");
            nvidia_sysfs(&root, &[("0000:00:05.0", "0x1eb8")]);
            std::fs::copy(
                fixtures().join("pciconfig/gfd-vgpu-guest-10de-1eb8.config"),
                root.join("devices/pci0000:00/0000:00:05.0/config"),
            )
            .unwrap();
            let mut args = discovery_args(&root, &proc_fixture("none"));
            with_config(&mut args, dir, GFD);
            (args, vec![])
        }
        "h100-dra" => {
            let (mut args, env) = nvml("h100-8x", dell, &[], "");
            args.extend([
                "--dra".into(),
                fixtures().join("dra/dell-xe9680-8xh100.json").into(),
            ]);
            (args, env)
        }
        "vega10-dra" => {
            let mut args = machine("amd-vega10");
            args.extend([
                "--dra".into(),
                fixtures().join("dra/amd-vega10.json").into(),
            ]);
            (args, vec![])
        }
        "mi210" => (machine("amd-mi210-8x"), vec![]),
        "mi300x-cpx" => (machine("amd-mi300x-cpx"), vec![]),
        "tigerlake" => (machine("intel-tigerlake-igpu"), vec![]),
        "hygon" => (machine("hygon-k100ai-2x"), vec![]),
        "nfd-rootfs-1" => (machine("nfd-rootfs-1"), vec![]),
        "gaudi2" => (machine("habana-gaudi2-8x"), vec![]),
        "gaudi3" => (machine("habana-gaudi3"), vec![]),
        "mixed-accel" => (machine("mixed-gaudi2-npu-wormhole"), vec![]),
        "gaudi2-memory" => {
            // No accelerator of the catalogue has its memory in sysfs: the Gaudi 2 node's
            // snapshot with the memory `accel.node` would carry (96 GiB of HBM2E each).
            let mut args = vec!["features".into(), "-o".into(), "json".into()];
            args.extend(machine("habana-gaudi2-8x"));
            let mut snapshot: Value = serde_json::from_str(run(args).ok()).unwrap();
            let node = &mut snapshot["attributes"]["accel.node"]["elements"];
            for (k, v) in [
                ("memory_mib_min", "98304"),
                ("memory_mib_max", "98304"),
                ("memory_mib_total", "786432"),
            ] {
                node[k] = v.into();
            }
            let path = dir.join("gaudi2-memory.json");
            std::fs::write(&path, snapshot.to_string()).unwrap();
            (vec!["--features".into(), path.into_os_string()], vec![])
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// Adds `--config FILE` with `text`, when there is any.
fn with_config(args: &mut Vec<OsString>, dir: &Path, text: &str) {
    if !text.is_empty() {
        let path = dir.join("config.yaml");
        std::fs::write(&path, text).unwrap();
        args.extend(["--config".into(), path.into_os_string()]);
    }
}

fn scenario(id: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let (args, env) = setup(id, dir.path());
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    let command = |cmd: &str| {
        let mut a: Vec<OsString> = vec![cmd.into(), "-o".into(), "json".into()];
        a.extend(args.iter().cloned());
        run_env(a, &env)
    };
    let labels = command("labels");
    let features = command("features");
    Output {
        labels: labels_of(labels.ok()),
        features: serde_json::from_str(features.ok()).expect("features -o json is JSON"),
    }
}

/// Every scenario's output, computed once for all the tests of this file.
fn outputs() -> &'static BTreeMap<&'static str, Output> {
    static OUT: OnceLock<BTreeMap<&'static str, Output>> = OnceLock::new();
    OUT.get_or_init(|| SCENARIOS.iter().map(|id| (*id, scenario(id))).collect())
}

fn output(id: &str) -> &'static Output {
    outputs()
        .get(id)
        .unwrap_or_else(|| panic!("{id:?} is not a scenario (the scenario table)"))
}

#[test]
fn the_scenario_table_is_the_tests_scenarios() {
    let t = table("scenarios");
    let ids: Vec<&str> = t
        .column("scenario")
        .iter()
        .map(|c| code(c).expect("a scenario id"))
        .collect();
    assert_eq!(ids, SCENARIOS);
}

// ---------------------------------------------------------------------------------------------
// The feature catalog.

/// One documented element of a feature, or one documented label.
struct Element {
    name: String,
    example: Option<(String, String)>,
    scenario: Option<String>,
}

/// The element table of each feature, in document order.
fn element_tables() -> Vec<(String, Vec<Element>)> {
    markers("elements")
        .into_iter()
        .map(|feature| {
            let t = table(&format!("elements {feature}"));
            let names = t.column("element");
            let examples = t.column("example");
            let on = t.column("on");
            let elements = names
                .iter()
                .zip(examples)
                .zip(on)
                .map(|((n, ex), on)| {
                    let name = code(n).expect("an element name").to_string();
                    let example = example(&name, ex).map(|(k, v)| (k, v.to_string()));
                    let scenario = code(on).map(str::to_string);
                    assert_eq!(
                        example.is_some(),
                        scenario.is_some(),
                        "{feature}.{name}: an example names its scenario, and only an example"
                    );
                    Element {
                        name,
                        example,
                        scenario,
                    }
                })
                .collect();
            (feature, elements)
        })
        .collect()
}

/// `(feature, kind, element set)` of the feature table.
fn feature_table() -> Vec<(String, String, String)> {
    let t = table("features");
    let f = t.column("feature");
    let k = t.column("kind");
    let e = t.column("elements");
    f.iter()
        .zip(k)
        .zip(e)
        .map(|((f, k), e)| {
            (
                code(f).expect("feature").to_string(),
                code(k).expect("kind").to_string(),
                code(e).expect("element set").to_string(),
            )
        })
        .collect()
}

#[test]
fn the_feature_tables_are_the_catalog() {
    let table = feature_table();
    let catalog: Vec<(&str, Option<&[&str]>)> = gpu_labeler::features::CATALOG.to_vec();

    // The same features, in the catalog's order, and each set fixed or open as the catalog has it.
    let documented: Vec<(&str, &str)> = table
        .iter()
        .map(|(f, _, e)| (f.as_str(), e.as_str()))
        .collect();
    let expected: Vec<(&str, &str)> = catalog
        .iter()
        .map(|(f, e)| (*f, if e.is_some() { "fixed" } else { "open" }))
        .collect();
    assert_eq!(documented, expected, "the feature table");

    // One element table per feature, in the same order.
    let tables = element_tables();
    let names: Vec<&str> = tables.iter().map(|(f, _)| f.as_str()).collect();
    let features: Vec<&str> = catalog.iter().map(|(f, _)| *f).collect();
    assert_eq!(names, features, "the element tables");

    // The literal element names of each fixed set are the catalog's, whole; its placeholders
    // are names `catalog_has` accepts beyond them.
    let mut documented: BTreeSet<(String, String)> = BTreeSet::new();
    let mut expected: BTreeSet<(String, String)> = BTreeSet::new();
    for ((feature, elements), (_, fixed)) in tables.iter().zip(&catalog) {
        let Some(fixed) = fixed else { continue };
        for e in elements.iter().filter(|e| !is_pattern(&e.name)) {
            documented.insert((feature.clone(), e.name.clone()));
        }
        expected.extend(fixed.iter().map(|e| (feature.clone(), e.to_string())));
        for e in elements.iter().filter(|e| is_pattern(&e.name)) {
            if let Some((key, _)) = &e.example {
                assert_eq!(
                    gpu_labeler::features::catalog_has(feature, key),
                    Some(true),
                    "{feature}.{key}, the example of {}",
                    e.name
                );
                assert!(!fixed.contains(&key.as_str()), "{feature}.{key} is literal");
            }
        }
    }
    assert_eq!(
        documented, expected,
        "(feature, element) pairs of the fixed sets"
    );
}

/// Element -> `(scenario, value)` pairs.
type Values = BTreeMap<String, BTreeSet<(String, String)>>;

/// `(kind, feature) -> element -> values` over every scenario's snapshot.
type Seen = BTreeMap<(String, String), Values>;

fn snapshot_elements() -> Seen {
    let mut seen = Seen::new();
    for (id, out) in outputs() {
        for kind in ["flags", "attributes", "instances"] {
            let Some(map) = out.features[kind].as_object() else {
                continue;
            };
            for (feature, set) in map {
                let entry = seen.entry((kind.to_string(), feature.clone())).or_default();
                let mut put = |k: &str, v: &str| {
                    entry
                        .entry(k.to_string())
                        .or_default()
                        .insert((id.to_string(), v.to_string()));
                };
                match kind {
                    "flags" => set["elements"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .for_each(|(k, _)| put(k, "")),
                    "attributes" => set["elements"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .for_each(|(k, v)| put(k, v.as_str().expect("a string value"))),
                    _ => {
                        for i in set["elements"].as_array().into_iter().flatten() {
                            for (k, v) in i["attributes"].as_object().into_iter().flatten() {
                                put(k, v.as_str().expect("a string value"));
                            }
                        }
                    }
                }
            }
        }
    }
    seen
}

#[test]
fn each_feature_has_its_kind_and_every_element_of_the_snapshots_is_documented() {
    let seen = snapshot_elements();
    let kinds: BTreeMap<String, String> = feature_table()
        .into_iter()
        .map(|(f, k, _)| (f, k))
        .collect();
    // The kind under which each feature is in the snapshots.
    let in_snapshots: BTreeMap<String, String> = seen
        .keys()
        .map(|(kind, f)| (f.clone(), kind.clone()))
        .collect();
    assert_eq!(
        seen.len(),
        in_snapshots.len(),
        "a feature under two kinds: {seen:?}"
    );
    let documented: BTreeMap<String, String> = kinds
        .iter()
        .filter(|(f, _)| in_snapshots.contains_key(*f))
        .map(|(f, k)| (f.clone(), k.clone()))
        .collect();
    assert_eq!(documented, in_snapshots, "kinds");
    // Only what rules produce while they are evaluated is in no snapshot.
    let absent: Vec<&str> = kinds
        .keys()
        .filter(|f| !in_snapshots.contains_key(*f))
        .map(String::as_str)
        .collect();
    assert_eq!(absent, ["rule.matched"]);
    assert_eq!(kinds["rule.matched"], "attributes");

    // Every element of every snapshot is exactly one documented row of its feature.
    let tables: BTreeMap<String, Vec<String>> = element_tables()
        .into_iter()
        .map(|(f, e)| (f, e.into_iter().map(|e| e.name).collect()))
        .collect();
    let mut undocumented = Vec::new();
    for ((_, feature), elements) in &seen {
        let names = &tables[feature];
        for element in elements.keys() {
            let rows = rows_of(element, names);
            if rows.len() != 1 {
                undocumented.push(format!("{feature}.{element}: rows {rows:?}"));
            }
        }
    }
    assert_eq!(undocumented, Vec::<String>::new());
}

#[test]
fn every_element_example_is_in_its_scenarios_snapshot() {
    let seen = snapshot_elements();
    let by_feature: BTreeMap<&str, (&str, &Values)> = seen
        .iter()
        .map(|((kind, f), e)| (f.as_str(), (kind.as_str(), e)))
        .collect();
    let mut without = Vec::new();
    for (feature, elements) in element_tables() {
        for e in elements {
            let (Some((key, value)), Some(on)) = (&e.example, &e.scenario) else {
                without.push(format!("{feature}.{}", e.name));
                continue;
            };
            output(on);
            let (kind, values) = by_feature
                .get(feature.as_str())
                .unwrap_or_else(|| panic!("{feature} is in no snapshot"));
            // The values of the element on that scenario: one for a flag or an attribute, one
            // per instance for an instance feature (the example is one of them).
            let on_scenario: BTreeSet<&str> = values
                .get(key)
                .into_iter()
                .flatten()
                .filter(|(s, _)| s == on)
                .map(|(_, v)| v.as_str())
                .collect();
            if *kind == "instances" {
                assert!(
                    on_scenario.contains(value.as_str()),
                    "{feature}.{key}: no instance on {on} has {value:?}; they have {on_scenario:?}"
                );
            } else {
                assert_eq!(
                    on_scenario,
                    BTreeSet::from([value.as_str()]),
                    "{feature}.{key} on {on}"
                );
            }
        }
    }
    // Elements no scenario shows: SR-IOV GPUs seen from the host, drivers whose version no
    // capture has, accelerator memory (no catalogue entry reads it), and `rule.matched`.
    assert_eq!(
        without,
        [
            "gpu.device.physfn",
            "gpu.device.sriov_numvfs",
            "gpu.device.sriov_totalvfs",
            "gpu.driver.amdgpu",
            "gpu.driver.i915",
            "gpu.driver.xe",
            "gpu.driver.<driver>",
            "accel.device.memory_mib",
            "rule.matched.<name>",
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// The label catalog.

/// The rows of every label table (`<!-- labels NAME -->`), in document order; labels without
/// a namespace get NFD's.
fn label_rows() -> Vec<Element> {
    let full = |k: &str| {
        if k.contains('/') {
            k.to_string()
        } else {
            format!("{PREFIX}{k}")
        }
    };
    let mut out = Vec::new();
    for name in markers("labels") {
        let t = table(&format!("labels {name}"));
        let labels = t.column("label");
        let examples = t.column("example");
        let on = t.column("on");
        for ((l, ex), on) in labels.iter().zip(examples).zip(on) {
            let short = code(l).expect("a label");
            let label = full(short);
            let example = example(short, ex).map(|(k, v)| (full(&k), v.to_string()));
            let scenario = code(on).map(str::to_string);
            assert_eq!(
                example.is_some(),
                scenario.is_some(),
                "{label}: an example names its scenario, and only an example"
            );
            out.push(Element {
                name: label,
                example,
                scenario,
            });
        }
    }
    out
}

#[test]
fn the_label_tables_are_the_labels_the_scenarios_get() {
    let rows = label_rows();
    assert_eq!(markers("labels"), ["pci", "gpu", "accel", "nvidia-gfd"]);
    let names: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "a label documented twice");

    // Each key a scenario gets is exactly one row, and each row is some scenario's key.
    let mut matched: BTreeSet<&str> = BTreeSet::new();
    let mut undocumented = Vec::new();
    for (id, out) in outputs() {
        for key in out.labels.keys() {
            let rows = rows_of(key, &names);
            match rows[..] {
                [row] => {
                    matched.insert(row);
                }
                _ => undocumented.push(format!("{key} ({id}): rows {rows:?}")),
            }
        }
    }
    assert_eq!(undocumented, Vec::<String>::new());
    let documented: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(matched, documented, "rows no scenario gives");

    // Every example is its scenario's value.
    for Element {
        name: label,
        example,
        scenario: on,
    } in &rows
    {
        let ((key, value), on) = (
            example.as_ref().expect("every label has an example"),
            on.as_ref().expect("and its scenario"),
        );
        assert_eq!(
            output(on).labels.get(key),
            Some(value),
            "{label}: example {key}={value} on {on}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Exit codes, configuration, snapshot.

/// `(name, code)` of every constant of `pub mod exit` in src/error.rs, in source order.
fn exit_constants_in_source() -> Vec<(String, u8)> {
    let src = std::fs::read_to_string(repo().join("src/error.rs")).unwrap();
    let start = src.find("pub mod exit {").expect("pub mod exit");
    let body = &src[start..start + src[start..].find("\n}").expect("end of mod exit")];
    body.lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .map(|c| {
            let (name, rest) = c.split_once(": u8 = ").expect("NAME: u8 = N;");
            let code = rest.trim_end_matches(';').parse().expect("a number");
            (name.to_string(), code)
        })
        .collect()
}

#[test]
fn the_exit_code_table_is_gpu_labeler_exit() {
    use gpu_labeler::exit;
    let t = table("exit-codes");
    let documented: Vec<(String, u8)> = t
        .column("constant")
        .iter()
        .zip(t.column("code"))
        .map(|(c, n)| {
            (
                code(c).expect("constant").to_string(),
                code(n).expect("code").parse().expect("a number"),
            )
        })
        .collect();
    let source = exit_constants_in_source();
    assert_eq!(documented, source, "the table and src/error.rs");
    // And the source read above is what is compiled.
    let compiled: Vec<(String, u8)> = owned_names([
        ("OK", exit::OK),
        ("INVALID_INPUT", exit::INVALID_INPUT),
        ("USAGE", exit::USAGE),
        ("RUNTIME", exit::RUNTIME),
        ("NO_FIT", exit::NO_FIT),
        ("DIFFERS", exit::DIFFERS),
    ]);
    assert_eq!(source, compiled);
}

#[test]
fn the_configuration_example_loads_and_is_the_defaults() {
    use gpu_labeler::config::Config;
    let text = fenced("config-example", "yaml");
    let parsed = Config::parse(Path::new("docs/catalog.md"), text)
        .unwrap_or_else(|e| panic!("the configuration example: {e}"));
    assert_eq!(parsed, Config::default());
}

#[test]
fn the_snapshot_example_loads_and_labels_as_documented() {
    let text = fenced("snapshot-example", "json");
    let parsed = gpu_labeler::features::parse_snapshot(Path::new("docs/catalog.md"), text)
        .unwrap_or_else(|e| panic!("the snapshot example: {e}"));
    let mut expected = gpu_labeler::features::FeatureSet::default();
    expected.insert_flag("kernel.loadedmodule", "nvidia");
    expected.insert_attribute("gpu.node", "count", "8");
    expected.push_instance(
        "pci.device",
        [("class", "0302"), ("vendor", "10de")]
            .into_iter()
            .collect(),
    );
    assert_eq!(parsed, expected);
}
