//! The bad-input matrix (issue 8): every kind of malformed input gpu-labeler accepts, one row
//! each, in one table. A row says how the input is broken and what must happen: the exit code,
//! every message line exactly as printed (level and text), and the whole label map that
//! survives (printed by `labels -o json`, or on the Node for the `run` daemon's rows).
//!
//! Inputs: rule files, the config file, snapshots (`--features`), sysfs, NVML (the fake
//! `libnvidia_ml.so` with injected faults), the device plugin's sharing config, and the API
//! server's answers to `run --oneshot`. `tests/bad_input.rs` and the other suites keep their
//! deeper per-case checks (whole feature sets); this is the one place that lists them all.

mod apiserver;
mod common;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{
    PREFIX, Tree, dell_sysfs_default_labels, fake_nvml_lib, fixture_args, label_map, labels_of,
    nvidia_sysfs, nvml_fixture, parse_log, run_env,
};

type Labels = BTreeMap<String, String>;
type Log = Vec<(String, String)>;

/// What a run gave, or must give.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    code: i32,
    /// Every line of stderr as (level, message); see `common::parse_log`.
    log: Log,
    labels: Labels,
}

/// Runs a row in its temporary directory: (actual, expected).
type Check = Box<dyn Fn(&Path) -> (Outcome, Outcome) + Send + Sync>;

/// One row: its name, how the input is broken, and its check.
struct Row {
    name: &'static str,
    broken: &'static str,
    check: Check,
}

fn row(
    name: &'static str,
    broken: &'static str,
    check: impl Fn(&Path) -> (Outcome, Outcome) + Send + Sync + 'static,
) -> Row {
    Row {
        name,
        broken,
        check: Box::new(check),
    }
}

fn err(m: impl Into<String>) -> (String, String) {
    ("ERROR".to_string(), m.into())
}

fn warn(m: impl Into<String>) -> (String, String) {
    ("WARN".to_string(), m.into())
}

fn expect(code: i32, log: Log, labels: Labels) -> Outcome {
    Outcome { code, log, labels }
}

// ---------------------------------------------------------------------------------------------
// Running `labels`.

const DELL: &str = "dell-xe9680-8xh100";
const NFD: &str = "nfd-rootfs-1";
const ASPEED: &str = "0000:02:00.0";

/// `labels -o json ARGS` with `env`; an empty stdout (the command failed before printing) is
/// an empty label map.
fn labels_run(args: Vec<OsString>, env: &[(&str, &OsStr)]) -> Outcome {
    let r = run_env(args, env);
    let labels = if r.stdout.trim().is_empty() {
        Labels::new()
    } else {
        labels_of(&r.stdout)
    };
    Outcome {
        code: r.code,
        log: r.log(),
        labels,
    }
}

fn os(items: &[&dyn AsRef<OsStr>]) -> Vec<OsString> {
    items.iter().map(|i| i.as_ref().to_os_string()).collect()
}

/// `labels -o json` on the Dell tree (8x H100, no NVML), without the shipped rules, plus `extra`.
fn dell_labels(extra: Vec<OsString>) -> Outcome {
    let mut a = fixture_args(&["labels", "-o", "json"], DELL, &["--no-default-rules"]);
    a.extend(extra);
    labels_run(a, &[])
}

/// NFD's PCI labels of the Dell tree.
fn dell_pci() -> Labels {
    label_map(&[
        ("pci-0300_102b.present", "true"),
        ("pci-0302_10de.present", "true"),
        ("pci-0302_10de.sriov.capable", "true"),
    ])
}

fn with(mut base: Labels, more: &[(&str, &str)]) -> Labels {
    base.extend(label_map(more));
    base
}

fn without(mut base: Labels, keys: &[&str]) -> Labels {
    for k in keys {
        let key = if k.contains('/') {
            k.to_string()
        } else {
            format!("{PREFIX}{k}")
        };
        assert!(base.remove(&key).is_some(), "{key} was expected");
    }
    base
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

// ---------------------------------------------------------------------------------------------
// Rows whose input is one file: data, a line each kind of file, turned into rows here.

/// Which option reads the file.
#[derive(Clone, Copy)]
enum Kind {
    /// `--rules` beside the good rule file (see [`good_rules`]).
    Rules,
    Config,
    /// `--features` (a snapshot, no discovery).
    Snapshot,
}

/// A row whose input is one file, `file` holding `text`, written into the row's directory.
struct FileCase {
    name: &'static str,
    broken: &'static str,
    kind: Kind,
    file: &'static str,
    text: String,
}

impl FileCase {
    fn rules(
        name: &'static str,
        broken: &'static str,
        file: &'static str,
        text: impl Into<String>,
    ) -> FileCase {
        FileCase {
            name,
            broken,
            kind: Kind::Rules,
            file,
            text: text.into(),
        }
    }

    fn config(name: &'static str, broken: &'static str, text: &str) -> FileCase {
        FileCase {
            name,
            broken,
            kind: Kind::Config,
            file: "config.yaml",
            text: text.into(),
        }
    }

    fn snapshot(
        name: &'static str,
        broken: &'static str,
        file: &'static str,
        text: &str,
    ) -> FileCase {
        FileCase {
            name,
            broken,
            kind: Kind::Snapshot,
            file,
            text: text.into(),
        }
    }

    /// The whole expected run; in `log`, `{file}` stands for the file's path.
    fn expect(self, code: i32, log: Log, labels: Labels) -> Row {
        let FileCase {
            name,
            broken,
            kind,
            file,
            text,
        } = self;
        row(name, broken, move |dir| {
            let path = write(dir, file, &text);
            let out = match kind {
                Kind::Rules => rules_path_row(dir, &path),
                Kind::Config => dell_labels(os(&[&"--config", &path])),
                Kind::Snapshot => {
                    labels_run(os(&[&"labels", &"-o", &"json", &"--features", &path]), &[])
                }
            };
            let log = log
                .iter()
                .map(|(level, m)| (level.clone(), m.replace("{file}", &show(&path))))
                .collect();
            (out, expect(code, log, labels.clone()))
        })
    }

    /// A config or snapshot refused at `at` (line:column): exit 1, that one line, no labels.
    fn error(self, at: &str, message: &str) -> Row {
        let what = match self.kind {
            Kind::Config => "config",
            Kind::Snapshot => "snapshot",
            Kind::Rules => unreachable!("a rule file's errors name only the file"),
        };
        let line = err(format!("invalid {what} {{file}}:{at}: {message}"));
        self.expect(1, vec![line], Labels::new())
    }

    /// Read without a word: exit 0, `labels`.
    fn labels(self, labels: Labels) -> Row {
        self.expect(0, vec![], labels)
    }

    /// A rule file refused (exit 1, `message`); the good rules (and `more`) still label.
    fn refused(self, message: &str, more: &[(&str, &str)]) -> Row {
        self.expect(1, vec![err(message)], with(good_labels(), more))
    }

    /// A rule file that loads with a warning (`message`): the good rules and `more` label.
    fn warned(self, message: &str, more: &[(&str, &str)]) -> Row {
        self.expect(0, vec![warn(message)], with(good_labels(), more))
    }
}

// ---------------------------------------------------------------------------------------------
// Rule files.

const HEADER: &str = "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\n";

/// A NodeFeatureRule `name` whose rule `rule` gives `label=true` on NVIDIA nodes.
fn nvidia_rule(object: &str, rule: &str, label: &str) -> String {
    format!(
        "{HEADER}metadata:\n  name: {object}\nspec:\n  rules:\n    - name: {rule}\n      labels:\n        {label}: \"true\"\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {{op: In, value: [\"10de\"]}}\n"
    )
}

/// The good rule file every rule row loads besides the broken one.
fn good_rules(dir: &Path) -> PathBuf {
    write(
        dir,
        "good.yaml",
        &nvidia_rule("good", "nvidia", "good.nvidia"),
    )
}

fn good_labels() -> Labels {
    with(dell_pci(), &[("good.nvidia", "true")])
}

/// A one-rule object (`metadata.name: r`) with the rule body `rule` (indented YAML).
fn one_rule(rule: &str) -> String {
    format!("{HEADER}metadata:\n  name: r\nspec:\n  rules:\n{rule}")
}

/// `labels` with the good rule file and `bad` (a path in `dir` the row has laid out).
fn rules_path_row(dir: &Path, bad: &Path) -> Outcome {
    let good = good_rules(dir);
    dell_labels(os(&[&"--rules", &good, &"--rules", &bad]))
}

/// A JSON rule file whose label value holds DEL and a C1 control (valid JSON; serde_json writes
/// them raw, as here).
fn c1_json() -> String {
    let text = serde_json::json!({"apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule", "metadata": {"name": "j"},
        "spec": {"rules": [{"name": "c1",
            "labels": {"c1": "a\u{7f}\u{88}b", "plain": "yes"}}]}})
    .to_string();
    assert!(text.contains('\u{88}'));
    text
}

fn rule_rows() -> Vec<Row> {
    vec![
        row(
            "rules: a FIFO named *.yaml",
            "a named pipe where a rule file should be: an error naming it, never a read that waits for a writer",
            |dir| {
                let fifo = dir.join("pipe.yaml");
                let made = std::process::Command::new("mkfifo")
                    .arg(&fifo)
                    .status()
                    .unwrap();
                assert!(made.success());
                let out = rules_path_row(dir, &fifo);
                let e = expect(
                    1,
                    vec![err(format!(
                        "{}: cannot read rule file: not a regular file (a FIFO)",
                        show(&fifo)
                    ))],
                    good_labels(),
                );
                (out, e)
            },
        ),
        row(
            "rules: a ConfigMap caught mid-swap",
            "a mounted ConfigMap directory whose `..data` link dangles: its rule file is an error, not silently no rules",
            |dir| {
                let cm = dir.join("configmap");
                std::fs::create_dir(&cm).unwrap();
                std::os::unix::fs::symlink("..2026_12_03_gone", cm.join("..data")).unwrap();
                std::os::unix::fs::symlink("..data/gpu.yaml", cm.join("gpu.yaml")).unwrap();
                let out = rules_path_row(dir, &cm);
                let e = expect(
                    1,
                    vec![err(format!(
                        "{}: cannot read rule file: No such file or directory (os error 2)",
                        show(&cm.join("gpu.yaml"))
                    ))],
                    good_labels(),
                );
                (out, e)
            },
        ),
        row(
            "rules: a directory without rule files",
            "--rules names an empty directory",
            |dir| {
                let empty = dir.join("empty");
                std::fs::create_dir(&empty).unwrap();
                let out = rules_path_row(dir, &empty);
                let e = expect(
                    1,
                    vec![err(format!(
                        "{}: no rule files here (*.yaml, *.yml, *.json)",
                        show(&empty)
                    ))],
                    good_labels(),
                );
                (out, e)
            },
        ),
        FileCase::rules("rules: YAML syntax error", "an unclosed flow mapping on line 8", "syntax.yaml", one_rule("    - name: x\n      labels: {a: \"b\"\n"))
            .refused("{file}:8:15: invalid YAML/JSON: unclosed bracket '{'", &[]),
        FileCase::rules("rules: unknown operator", "`op: Inn` in one object; another object in the same file is fine", "op.yaml", format!(
                    "{}---\n{}",
                    one_rule(
                        "    - name: typo\n      labels:\n        typo: \"true\"\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {op: Inn, value: [\"10de\"]}\n"
                    ),
                    nvidia_rule("other", "fine", "other.fine")
                ))
            .refused("{file}:13:26: rule \"typo\" (NodeFeatureRule \"r\"): matchFeatures[0].matchExpressions.vendor.op: unknown operator \"Inn\" (did you mean \"In\"?); supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse", &[("other.fine", "true")]),
        FileCase::rules("rules: a bad rule among good ones in one object", "the object's second rule has `op: Inn`: the API server refuses the whole object, so its good rule does not apply either", "object.yaml", one_rule(
                    "    - name: fine\n      labels:\n        fine: \"true\"\n    - name: typo\n      labels:\n        typo: \"true\"\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {op: Inn, value: [\"10de\"]}\n",
                ))
            .refused("{file}:16:26: rule \"typo\" (NodeFeatureRule \"r\"): matchFeatures[0].matchExpressions.vendor.op: unknown operator \"Inn\" (did you mean \"In\"?); supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse", &[]),
        FileCase::rules("rules: wrong apiVersion", "apiVersion nfd.k8s-sigs.io/v1", "apiversion.yaml", "apiVersion: nfd.k8s-sigs.io/v1\nkind: NodeFeatureRule\nmetadata:\n  name: r\nspec:\n  rules: []\n")
            .refused("{file}:1:13: NodeFeatureRule \"r\": unsupported apiVersion \"nfd.k8s-sigs.io/v1\" (expected \"nfd.k8s-sigs.io/v1alpha1\")", &[]),
        FileCase::rules("rules: wrong kind", "kind NodeFeature", "kind.yaml", "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeature\nmetadata:\n  name: r\nspec:\n  rules: []\n")
            .refused("{file}:2:7: NodeFeatureRule \"r\": unsupported kind \"NodeFeature\" (expected \"NodeFeatureRule\")", &[]),
        FileCase::rules("rules: duplicate keys", "label `a` twice in one map", "dup.yaml", one_rule("    - name: d\n      labels:\n        a: \"1\"\n        a: \"2\"\n"))
            .refused("{file}:10:9: invalid YAML/JSON: duplicate mapping key: a", &[]),
        FileCase::rules("rules: bad regexp", "`InRegexp [\"10d[\"]` on a present key: fails at evaluation, the other rules apply, exit 0", "regex.yaml", one_rule(
                    "    - name: re\n      labels:\n        re: \"1\"\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {op: InRegexp, value: [\"10d[\"]}\n",
                ))
            .warned("rule \"re\" (NodeFeatureRule \"r\", {file}:7:7) failed: invalid regexp \"10d[\": missing closing ]: `[`", &[]),
        FileCase::rules("rules: Gt on a non-number", "`vendor Gt 5`: the first PCI function's vendor 14e4 is not a number at evaluation", "gt.yaml", one_rule(
                    "    - name: gt\n      labels:\n        gt: \"1\"\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {op: Gt, value: [\"5\"]}\n",
                ))
            .warned("rule \"gt\" (NodeFeatureRule \"r\", {file}:7:7) failed: not a number \"14e4\"", &[]),
        FileCase::rules("rules: a template that fails", "labelsTemplate calls `now` (unsupported, as documented)", "tmpl.yaml", one_rule(
                    "    - name: tmpl\n      labelsTemplate: \"t={{ now }}\"\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {op: In, value: [\"10de\"]}\n",
                ))
            .warned("rule \"tmpl\" (NodeFeatureRule \"r\", {file}:7:7) failed: failed to expand template at line 8, column 29: template function \"now\" is not supported by gpu-labeler", &[]),
        FileCase::rules("rules: a template line without `=`", "labelsTemplate expands to `oops`", "noeq.yaml", one_rule(
                    "    - name: noeq\n      labelsTemplate: \"oops\"\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {op: In, value: [\"10de\"]}\n",
                ))
            .warned("rule \"noeq\" (NodeFeatureRule \"r\", {file}:7:7) failed: failed to expand template: missing value in expanded template line \"oops\", (format must be '<key>=<value>')", &[]),
        FileCase::rules("rules: an invalid label value", "a rule gives `bad=has space`: refused and reported, its other label applies", "value.yaml", one_rule(
                    "    - name: v\n      labels:\n        bad: \"has space\"\n        ok: \"yes\"\n",
                ))
            .warned("label \"feature.node.kubernetes.io/bad=has space\" from rule \"v\" (NodeFeatureRule \"r\", {file}:7:7) rejected: invalid value \"has space\": a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", &[("ok", "yes")]),
        FileCase::rules("rules: JSON with characters YAML does not print", "a JSON rule file whose label value holds DEL and a C1 control (valid JSON): it loads, and that label is refused and reported", "c1.json", c1_json())
            .warned("label \"feature.node.kubernetes.io/c1=a\\u{7f}\\u{88}b\" from rule \"c1\" (NodeFeatureRule \"j\", {file}) rejected: invalid value \"a\\u{7f}\\u{88}b\": a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", &[("plain", "yes")]),
        row(
            "rules: a path that does not exist",
            "--rules names a missing file",
            |dir| {
                let good = good_rules(dir);
                let missing = dir.join("missing.yaml");
                let out = dell_labels(os(&[&"--rules", &good, &"--rules", &missing]));
                let e = expect(
                    1,
                    vec![err(format!(
                        "{}: cannot read rule file: No such file or directory (os error 2)",
                        show(&missing)
                    ))],
                    good_labels(),
                );
                (out, e)
            },
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// The config file.

/// A config error: exit 1, one line, nothing printed on stdout.
fn config_error(c: &Path, at: &str, message: &str) -> Outcome {
    expect(
        1,
        vec![err(format!("invalid config {}:{at}: {message}", show(c)))],
        Labels::new(),
    )
}

fn config_rows() -> Vec<Row> {
    vec![
        FileCase::config("config: unknown key", "sources.pci.deviceLabelFeilds", "sources:\n  pci:\n    deviceLabelFeilds: [class]\n")
            .error("3:5", "unknown key \"deviceLabelFeilds\" in sources.pci (did you mean \"deviceLabelFields\"?); known: deviceClassWhitelist, deviceLabelFields"),
        FileCase::config("config: wrong type", "deviceClassWhitelist: 3 (a list is expected)", "sources:\n  pci:\n    deviceClassWhitelist: 3\n")
            .error("3:27", "sources.pci.deviceClassWhitelist: expected a list, got number 3"),
        FileCase::config("config: bad duration", "publish.interval: soon", "publish:\n  interval: soon\n")
            .error("2:13", "publish.interval: invalid duration \"soon\": expected e.g. 60s, 5m, 1h"),
        FileCase::config("config: unknown sink", "publish.sink: nowhere", "publish: {sink: nowhere}\n")
            .error("1:17", "publish.sink: unknown sink \"nowhere\", expected one of node, nodefeature, features-file, stdout"),
        FileCase::config("config: bad migStrategy", "migStrategy: sometimes", "migStrategy: sometimes\n")
            .error("1:14", "migStrategy: unknown value \"sometimes\"; expected one of none, single, mixed"),
        FileCase::config("config: unknown profile", "profiles: [nvidia-gdf]", "profiles: [nvidia-gdf]\n")
            .error("1:12", "profiles[0]: unknown value \"nvidia-gdf\" (did you mean \"nvidia-gfd\"?); expected one of nvidia-gfd"),
        FileCase::config("config: bad nvml.enabled", "sources.nvml.enabled: maybe", "sources:\n  nvml: {enabled: maybe}\n")
            .error("2:19", "sources.nvml.enabled: unknown value \"maybe\"; expected one of auto, true, false"),
        row(
            "config: bad duration, daemon",
            "publish.interval: soon, given to `run`: refused at start with its position",
            |dir| {
                let c = write(dir, "config.yaml", "publish:\n  interval: soon\n");
                let mut a = fixture_args(
                    &["run"],
                    DELL,
                    &[
                        "--no-default-rules",
                        "--sink",
                        "stdout",
                        "--oneshot",
                        "--listen",
                        "127.0.0.1:0",
                    ],
                );
                a.extend(os(&[&"--config", &c]));
                let out = labels_run(a, &[]);
                let e = config_error(
                    &c,
                    "2:13",
                    "publish.interval: invalid duration \"soon\": expected e.g. 60s, 5m, 1h",
                );
                (out, e)
            },
        ),
        row(
            "config: missing file",
            "--config names a file that does not exist",
            |dir| {
                let c = dir.join("nope.yaml");
                let out = dell_labels(os(&[&"--config", &c]));
                let e = expect(
                    1,
                    vec![err(format!(
                        "cannot read config {}: No such file or directory (os error 2)",
                        show(&c)
                    ))],
                    Labels::new(),
                );
                (out, e)
            },
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Snapshots.

fn snapshot_rows() -> Vec<Row> {
    vec![
        FileCase::snapshot("snapshot: truncated JSON", "the file ends inside an object", "trunc.json", "{\"flags\": {\"kernel.loadedmodule\": {\"elements\": {\"nvidia\": {}}}},\n \"attributes\": {\"gpu.node\": {\"elements\": {\"count\": \"8\"")
            .error("2:54", "EOF while parsing an object at line 2 column 54"),
        FileCase::snapshot("snapshot: wrong structure", "`flags` is a list", "struct.json", "{\"flags\": [], \"attributes\": {}}\n")
            .error("1:3", "`flags` must be an object"),
        FileCase::snapshot("snapshot: YAML syntax error", "an unclosed flow mapping", "syntax.yaml", "attributes:\n  gpu.node:\n    elements: {count: \"8\"\n")
            .error("3:15", "unclosed bracket '{'"),
        FileCase::snapshot("snapshot: a list where a string belongs", "gpu.node count: [8]", "list.yaml", "attributes:\n  gpu.node:\n    elements:\n      count: [8]\n")
            .error("2:3", "attributes.gpu.node.elements must be a map of string values"),
        FileCase::snapshot("snapshot: numbers where strings belong", "unquoted YAML numbers and booleans: `count: 8`, `class: 0302`, `homogeneous: true` are the strings they spell", "numbers.yaml", "attributes:\n  gpu.node:\n    elements:\n      count: 8\n      vendor: nvidia\n      homogeneous: true\ninstances:\n  pci.device:\n    elements:\n      - attributes: {class: 0302, vendor: 10de}\n")
            .labels(label_map(&[
                        ("gpu.count", "8"),
                        ("gpu.present", "true"),
                        ("gpu.vendor", "nvidia"),
                        ("pci-0302_10de.present", "true"),
                    ])),
        FileCase::snapshot("snapshot: numbers in JSON", "`\"count\": 8` (a JSON number) is the string \"8\"", "numbers.json", "{\"attributes\": {\"gpu.node\": {\"elements\": {\"count\": 8, \"vendor\": \"amd\"}}}}\n")
            .labels(label_map(&[
                        ("gpu.count", "8"),
                        ("gpu.present", "true"),
                        ("gpu.vendor", "amd"),
                    ])),
        FileCase::snapshot("snapshot: empty file", "zero bytes", "empty.json", "")
            .error("1:1", "expected an object with flags/attributes/instances, or a NodeFeature"),
        FileCase::snapshot("snapshot: a bare string", "the document is a string", "string.yaml", "\"just a string\"\n")
            .error("1:1", "expected an object with flags/attributes/instances, or a NodeFeature"),
        row(
            "snapshot: missing file",
            "--features names a file that does not exist",
            |dir| {
                let s = dir.join("nope.json");
                let out = labels_run(os(&[&"labels", &"-o", &"json", &"--features", &s]), &[]);
                let e = expect(
                    1,
                    vec![err(format!(
                        "cannot read snapshot {}: No such file or directory (os error 2)",
                        show(&s)
                    ))],
                    Labels::new(),
                );
                (out, e)
            },
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// sysfs (nfd-rootfs-1: an ASPEED BMC VGA, Intel accelerators with SR-IOV, a hidden PMC).

const NEEDS: &str = "(NFD needs class, vendor, device, subsystem_vendor, subsystem_device)";

/// `labels` on a broken copy of nfd-rootfs-1 (no shipped rules).
fn nfd_labels(tree: &Tree) -> Outcome {
    let mut a: Vec<OsString> = os(&[&"labels", &"-o", &"json"]);
    a.extend(common::discovery_args(
        tree.root(),
        &common::proc_fixture(NFD),
    ));
    a.push("--no-default-rules".into());
    labels_run(a, &[])
}

/// Every copy of nfd-rootfs-1 warns about its PMC function, which has only `class`.
fn pmc(tree: &Tree) -> (String, String) {
    warn(format!(
        "{}: no `vendor` attribute {NEEDS}; PCI device skipped",
        tree.entry("0000:00:1f.2").display()
    ))
}

fn nfd_all() -> Labels {
    label_map(&[
        ("pci-0300_1a03.present", "true"),
        ("pci-0b40_8086.present", "true"),
        ("pci-0b40_8086.sriov.capable", "true"),
    ])
}

fn nfd_without_aspeed() -> Labels {
    without(nfd_all(), &["pci-0300_1a03.present"])
}

/// The ASPEED function broken by `breaker`, which returns the path and the problem to report:
/// the function is skipped with that message, everything else labelled.
fn aspeed_row(
    name: &'static str,
    broken: &'static str,
    breaker: fn(&Tree) -> (PathBuf, String),
) -> Row {
    row(name, broken, move |_| {
        let tree = Tree::copy_of(NFD);
        let (path, problem) = breaker(&tree);
        let out = nfd_labels(&tree);
        let e = expect(
            0,
            vec![
                pmc(&tree),
                warn(format!("{}: {problem}; PCI device skipped", path.display())),
            ],
            nfd_without_aspeed(),
        );
        (out, e)
    })
}

fn sysfs_rows() -> Vec<Row> {
    vec![
        aspeed_row(
            "sysfs: missing attribute",
            "subsystem_vendor removed",
            |t| {
                std::fs::remove_file(t.entry(ASPEED).join("subsystem_vendor")).unwrap();
                (
                    t.entry(ASPEED),
                    format!("no `subsystem_vendor` attribute {NEEDS}"),
                )
            },
        ),
        aspeed_row("sysfs: empty attribute", "vendor is empty", |t| {
            (
                t.write_attr(ASPEED, "vendor", b""),
                "not a hex id: \"\"".into(),
            )
        }),
        aspeed_row("sysfs: garbage attribute", "device is 0xzz00", |t| {
            (
                t.write_attr(ASPEED, "device", b"0xzz00\n"),
                "not a hex id: \"0xzz00\"".into(),
            )
        }),
        aspeed_row(
            "sysfs: binary attribute",
            "subsystem_device holds NUL and 0xff bytes",
            |t| {
                (
                    t.write_attr(ASPEED, "subsystem_device", b"\x00\x20\xff\xfe\n"),
                    "binary content, not a text attribute".into(),
                )
            },
        ),
        aspeed_row("sysfs: huge attribute", "class is 90,000 bytes", |t| {
            (
                t.write_attr(ASPEED, "class", "0x030000\n".repeat(10_000).as_bytes()),
                "larger than 65536 bytes, not a sysfs attribute".into(),
            )
        }),
        aspeed_row(
            "sysfs: attribute that is a directory",
            "class is a directory",
            |t| {
                let p = t.entry(ASPEED).join("class");
                std::fs::remove_file(&p).unwrap();
                std::fs::create_dir(&p).unwrap();
                (p, "Is a directory (os error 21)".into())
            },
        ),
        aspeed_row(
            "sysfs: dangling symlink",
            "the device directory is gone, its bus link stays",
            |t| {
                std::fs::remove_dir_all(t.device_dir(ASPEED)).unwrap();
                (
                    t.entry(ASPEED),
                    "dangling symlink to ../../../devices/pci0000:00/0000:02:00.0".into(),
                )
            },
        ),
        aspeed_row(
            "sysfs: symlink loop",
            "the bus link points at itself",
            |t| {
                std::fs::remove_file(t.entry(ASPEED)).unwrap();
                std::os::unix::fs::symlink(ASPEED, t.entry(ASPEED)).unwrap();
                (t.entry(ASPEED), "symlink loop".into())
            },
        ),
        aspeed_row(
            "sysfs: entry that is not a directory",
            "a file where the bus link should be",
            |t| {
                std::fs::remove_file(t.entry(ASPEED)).unwrap();
                std::fs::write(t.entry(ASPEED), "not a device\n").unwrap();
                (t.entry(ASPEED), "not a directory".into())
            },
        ),
        row(
            "sysfs: garbage optional attribute",
            "revision is 0xa1b2: left out, the device kept",
            |_| {
                let tree = Tree::copy_of(NFD);
                let p = tree.write_attr(ASPEED, "revision", b"0xa1b2\n");
                let out = nfd_labels(&tree);
                let e = expect(
                    0,
                    vec![
                        pmc(&tree),
                        warn(format!(
                            "{}: not a hex byte: \"0xa1b2\"; attribute left out",
                            p.display()
                        )),
                    ],
                    nfd_all(),
                );
                (out, e)
            },
        ),
        row(
            "sysfs: stray entry",
            "bus/pci/devices/README, not a PCI address",
            |_| {
                let tree = Tree::copy_of(NFD);
                let p = tree.root().join("bus/pci/devices/README");
                std::fs::write(&p, "x\n").unwrap();
                let out = nfd_labels(&tree);
                let e = expect(
                    0,
                    vec![
                        pmc(&tree),
                        warn(format!(
                            "{}: not a PCI address (dddd:bb:dd.f); PCI device skipped",
                            p.display()
                        )),
                    ],
                    nfd_all(),
                );
                (out, e)
            },
        ),
        row(
            "sysfs: unreadable directory",
            "bus/pci/devices is a file",
            |_| {
                let tree = Tree::copy_of(NFD);
                let d = tree.root().join("bus/pci/devices");
                std::fs::remove_dir_all(&d).unwrap();
                std::fs::write(&d, "x\n").unwrap();
                let out = nfd_labels(&tree);
                let e = expect(
                    0,
                    vec![warn(format!(
                        "cannot list PCI devices: {}: not a directory",
                        d.display()
                    ))],
                    Labels::new(),
                );
                (out, e)
            },
        ),
        row(
            "sysfs: missing directory",
            "bus/pci/devices does not exist",
            |_| {
                let tree = Tree::copy_of(NFD);
                let d = tree.root().join("bus/pci/devices");
                std::fs::remove_dir_all(&d).unwrap();
                let out = nfd_labels(&tree);
                let e = expect(
                    0,
                    vec![warn(format!(
                        "{}: does not exist; no PCI devices discovered",
                        d.display()
                    ))],
                    Labels::new(),
                );
                (out, e)
            },
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// NVML (the fake library through the real dlopen path).

/// `labels` on the Dell tree with the shipped rules and the fake NVML on `fixture`.
fn dell_nvml(fixture: &Path, lib: &Path) -> Outcome {
    let mut a = fixture_args(&["labels", "-o", "json"], DELL, &[]);
    a.retain(|x| x != "--no-nvml");
    a.extend(os(&[&"--nvml-lib", &lib]));
    labels_run(a, &[("FAKE_NVML_FIXTURE", fixture.as_os_str())])
}

/// A copy of `h100-8x.json` with `faults`, written into `dir`.
fn h100_with_faults(dir: &Path, faults: serde_json::Value) -> PathBuf {
    common::edited_nvml_fixture(dir, "nvml.json", "h100-8x", |v| v["faults"] = faults)
}

/// `labels` with NVML that misbehaves in `function` (for `gpu`): within the 1 s timeout plus
/// 2 s, every label sysfs gives and one warning naming the library and what happened.
fn nvml_misbehaves(
    dir: &Path,
    function: &str,
    gpu: Option<usize>,
    action: &str,
    what: &str,
) -> (Outcome, Outcome) {
    let f = h100_with_faults(
        dir,
        serde_json::json!({"misbehave": [{"function": function, "gpu": gpu, "action": action}]}),
    );
    let lib = fake_nvml_lib("nvidia_ml");
    let start = std::time::Instant::now();
    let mut a = fixture_args(&["labels", "-o", "json"], DELL, &["--nvml-timeout", "1s"]);
    a.retain(|x| x != "--no-nvml");
    a.extend(os(&[&"--nvml-lib", &lib]));
    let out = labels_run(a, &[("FAKE_NVML_FIXTURE", f.as_os_str())]);
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "{function} {action}: took {took:?}"
    );
    let e = expect(
        0,
        vec![warn(format!("NVML: {}: {what}", lib.display()))],
        dell_sysfs_default_labels(),
    );
    (out, e)
}

/// `labels` with NVML from a copy of `h100-8x.json` with `faults`: the whole expected run (in
/// `log`, `{lib}` stands for the library's path).
fn faults_row(
    name: &'static str,
    broken: &'static str,
    faults: serde_json::Value,
    log: Log,
    labels: Labels,
) -> Row {
    row(name, broken, move |dir| {
        let f = h100_with_faults(dir, faults.clone());
        let lib = fake_nvml_lib("nvidia_ml");
        let out = dell_nvml(&f, &lib);
        let log = log
            .iter()
            .map(|(level, m)| {
                (
                    level.clone(),
                    m.replace("{lib}", &lib.display().to_string()),
                )
            })
            .collect();
        (out, expect(0, log, labels.clone()))
    })
}

fn h100() -> Labels {
    common::h100_default_labels()
}

const DRIVER_ERROR: &str = "an internal driver error occurred";

fn nvml_rows() -> Vec<Row> {
    vec![
        row(
            "nvml: driver not loaded",
            "nvmlInit answers DRIVER_NOT_LOADED: unavailable, sysfs labels",
            |_| {
                let lib = fake_nvml_lib("nvidia_ml");
                let out = dell_nvml(&nvml_fixture("init-driver-not-loaded"), &lib);
                let why = format!(
                    "NVML unavailable ({}: NVIDIA driver is not loaded); the NVIDIA GPUs are labelled from sysfs alone",
                    lib.display()
                );
                (out, expect(0, vec![warn(why)], dell_sysfs_default_labels()))
            },
        ),
        row(
            "nvml: --nvml-lib names a missing file",
            "a typo in the library path: a warning naming it, sysfs labels",
            |dir| {
                let lib = dir.join("libnvidia-ml.so.1");
                let out = dell_nvml(&nvml_fixture("h100-8x"), &lib);
                let why = format!(
                    "NVML unavailable (cannot load {}: {}: cannot open shared object file: No such file or directory); the NVIDIA GPUs are labelled from sysfs alone",
                    lib.display(),
                    lib.display()
                );
                (out, expect(0, vec![warn(why)], dell_sysfs_default_labels()))
            },
        ),
        row(
            "nvml: required but unavailable",
            "sources.nvml.enabled: true and no library: an error and exit 3, every other label printed",
            |dir| {
                let lib = dir.join("libnvidia-ml.so.1");
                let c = write(
                    dir,
                    "config.yaml",
                    "sources:\n  nvml: {enabled: \"true\"}\n",
                );
                let mut a = fixture_args(&["labels", "-o", "json"], DELL, &["--config"]);
                a.retain(|x| x != "--no-nvml");
                a.extend(os(&[&c, &"--nvml-lib", &lib]));
                let out = labels_run(a, &[]);
                let why = format!(
                    "NVML is required (sources.nvml.enabled: true) but unavailable: cannot load {}: {}: cannot open shared object file: No such file or directory",
                    lib.display(),
                    lib.display()
                );
                (out, expect(3, vec![err(why)], dell_sysfs_default_labels()))
            },
        ),
        faults_row(
            "nvml: init fails",
            "nvmlInit answers UNKNOWN: an error, sysfs labels",
            serde_json::json!({"init": "UNKNOWN"}),
            vec![warn(format!("NVML: {{lib}}: init failed: {DRIVER_ERROR}"))],
            dell_sysfs_default_labels(),
        ),
        row(
            "nvml: not a library",
            "--nvml-lib is a text file: a warning naming it and why, sysfs labels",
            |dir| {
                let lib = write(dir, "libnvidia-ml.so.1", "not an ELF file\n");
                let out = dell_nvml(&nvml_fixture("h100-8x"), &lib);
                let why = format!("NVML: cannot load {}: file too short", lib.display());
                (out, expect(0, vec![warn(why)], dell_sysfs_default_labels()))
            },
        ),
        faults_row(
            "nvml: device count fails",
            "nvmlDeviceGetCount answers UNKNOWN: driver versions kept, GPUs from sysfs",
            serde_json::json!({"errors": [{"function": "nvmlDeviceGetCount_v2", "error": "UNKNOWN"}]}),
            vec![warn(format!("NVML: device count: {DRIVER_ERROR}"))],
            with(
                dell_sysfs_default_labels(),
                &[
                    ("gpu.cuda.major", "12"),
                    ("gpu.cuda.minor", "2"),
                    ("gpu.driver.major", "535"),
                    ("gpu.driver.minor", "161"),
                    ("gpu.driver.version", "535.161.08"),
                ],
            ),
        ),
        row(
            "nvml: one GPU lost",
            "device_errors: GPU 3 answers GPU_IS_LOST to every call",
            |_| {
                let out = dell_nvml(
                    &nvml_fixture("h100-8x-gpu3-lost"),
                    &fake_nvml_lib("nvidia_ml"),
                );
                let e = expect(
                    0,
                    vec![warn(
                        "NVML GPU 3: device fell off the bus or has otherwise become inacessible; left to sysfs",
                    )],
                    // The lost GPU keeps its product and its family: sysfs names it as NVML
                    // does, and its chip (GH100) gives the family its compute capability does.
                    // It is counted, and not as healthy (`lost`). Memory and compute
                    // capability are the seven answering GPUs' (#44).
                    with(
                        h100(),
                        &[
                            ("gpu.health", "degraded"),
                            ("gpu.healthy.count", "7"),
                            ("gpu.memory.total", "570913"),
                        ],
                    ),
                );
                (out, e)
            },
        ),
        faults_row(
            "nvml: one call fails on one GPU",
            "nvmlDeviceGetMemoryInfo answers UNKNOWN for GPU 2",
            serde_json::json!({"errors": [
                {"function": "nvmlDeviceGetMemoryInfo", "gpu": 2, "error": "UNKNOWN"},
                {"function": "nvmlDeviceGetMemoryInfo_v2", "gpu": 2, "error": "UNKNOWN"}]}),
            vec![warn(format!("GPU 2: NVML memory: {DRIVER_ERROR}"))],
            without(
                h100(),
                &["gpu.memory", "gpu.memory.max", "gpu.memory.total"],
            ),
        ),
        faults_row(
            "nvml: driver version fails",
            "nvmlSystemGetDriverVersion answers UNKNOWN",
            serde_json::json!({"errors": [{"function": "nvmlSystemGetDriverVersion", "error": "UNKNOWN"}]}),
            vec![warn(format!("NVML driver version: {DRIVER_ERROR}"))],
            without(
                h100(),
                &["gpu.driver.major", "gpu.driver.minor", "gpu.driver.version"],
            ),
        ),
        row(
            "nvml: hangs in init",
            "nvmlInit_v2 never returns (a wedged driver): the child is killed at the timeout",
            |dir| nvml_misbehaves(dir, "nvmlInit_v2", None, "hang", "timed out after 1s"),
        ),
        row(
            "nvml: hangs in one device call",
            "nvmlDeviceGetName never returns for GPU 3 (a GPU fallen off the bus)",
            |dir| {
                nvml_misbehaves(
                    dir,
                    "nvmlDeviceGetName",
                    Some(3),
                    "hang",
                    "timed out after 1s",
                )
            },
        ),
        row(
            "nvml: crashes in init",
            "nvmlInit_v2 dies of SIGSEGV",
            |dir| nvml_misbehaves(dir, "nvmlInit_v2", None, "segv", "killed by SIGSEGV"),
        ),
        row(
            "nvml: crashes in a device call",
            "nvmlDeviceGetUUID dies of SIGSEGV for GPU 2",
            |dir| {
                nvml_misbehaves(
                    dir,
                    "nvmlDeviceGetUUID",
                    Some(2),
                    "segv",
                    "killed by SIGSEGV",
                )
            },
        ),
        row(
            "nvml: exits the process",
            "nvmlDeviceGetCount_v2 calls exit(3)",
            |dir| {
                nvml_misbehaves(
                    dir,
                    "nvmlDeviceGetCount_v2",
                    None,
                    "exit",
                    "exited with status 3",
                )
            },
        ),
        faults_row(
            "nvml: prints to stdout",
            "nvmlInit_v2 writes a line to standard output: the answer pipe is private, labels whole",
            serde_json::json!({"misbehave": [{"function": "nvmlInit_v2", "action": "stdout"}]}),
            vec![(
                String::new(),
                "fake-nvml: nvmlInit_v2 says hello on stdout".into(),
            )],
            h100(),
        ),
        row(
            "nvml: symbols missing",
            "an old driver's library: no MIG, compute capability or v2 CUDA version symbols at all",
            |dir| {
                let root = dir.join("sys");
                nvidia_sysfs(&root, &[("0000:43:00.0", "0x1cb3")]);
                let a = os(&[
                    &"labels",
                    &"-o",
                    &"json",
                    &"--sysfs-root",
                    &root,
                    &"--proc-root",
                    &"/nonexistent",
                    &"--pci-ids",
                    &common::pci_ids(),
                    &"--nvml-lib",
                    &fake_nvml_lib("nvidia_ml_legacy"),
                ]);
                let f = nvml_fixture("old-driver-no-mig");
                let out = labels_run(a, &[("FAKE_NVML_FIXTURE", f.as_os_str())]);
                let e = expect(0, vec![], common::p400_old_driver_labels());
                (out, e)
            },
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// The NVIDIA device plugin's sharing configuration.

/// `labels` (shipped rules, no NVML) with a config naming `sharing` as the sharing file.
fn sharing_row(dir: &Path, text: &[u8]) -> (PathBuf, Outcome) {
    let s = dir.join("dp-config.yaml");
    std::fs::write(&s, text).unwrap();
    let c = write(
        dir,
        "config.yaml",
        &format!("sources:\n  sharing:\n    configFile: {}\n", show(&s)),
    );
    let mut a = fixture_args(&["labels", "-o", "json"], DELL, &[]);
    a.extend(os(&[&"--config", &c]));
    (s, labels_run(a, &[]))
}

fn sharing_left_out(s: &Path, at: &str, message: &str) -> Outcome {
    expect(
        0,
        vec![warn(format!(
            "invalid sharing config {}:{at}: {message}; gpu.sharing left out",
            show(s)
        ))],
        dell_sysfs_default_labels(),
    )
}

fn sharing_rows() -> Vec<Row> {
    vec![
        row("sharing: garbage", "binary bytes", |dir| {
            let (s, out) = sharing_row(dir, b"\x00\x01\xff garbage");
            let e = expect(
                0,
                vec![warn(format!(
                    "cannot read sharing config {}: stream did not contain valid UTF-8; gpu.sharing left out",
                    show(&s)
                ))],
                dell_sysfs_default_labels(),
            );
            (out, e)
        }),
        row("sharing: not a mapping", "a YAML list", |dir| {
            let (s, out) = sharing_row(dir, b"- a\n- b\n");
            let e = sharing_left_out(&s, "1:1", "expected a mapping (key: value) here");
            (out, e)
        }),
        row("sharing: unknown strategy", "sharing.spacial", |dir| {
            let (s, out) = sharing_row(dir, b"version: v1\nsharing:\n  spacial:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n");
            let e = sharing_left_out(
                &s,
                "3:3",
                "unknown field `spacial`, expected one of timeSlicing, mps",
            );
            (out, e)
        }),
        row("sharing: bad replicas", "replicas: 1", |dir| {
            let (s, out) = sharing_row(dir, b"version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 1\n");
            let e = sharing_left_out(&s, "6:17", "number of replicas must be >= 2");
            (out, e)
        }),
        row(
            "sharing: missing file",
            "configFile names a file that does not exist",
            |dir| {
                let s = dir.join("nope.yaml");
                let c = write(
                    dir,
                    "config.yaml",
                    &format!("sources:\n  sharing:\n    configFile: {}\n", show(&s)),
                );
                let mut a = fixture_args(&["labels", "-o", "json"], DELL, &[]);
                a.extend(os(&[&"--config", &c]));
                let out = labels_run(a, &[]);
                let e = expect(
                    0,
                    vec![warn(format!(
                        "cannot read sharing config {}: No such file or directory (os error 2); gpu.sharing left out",
                        show(&s)
                    ))],
                    dell_sysfs_default_labels(),
                );
                (out, e)
            },
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// The API server's answers to `run --oneshot` (node sink).

use apiserver::{Agent, FakeApiServer, Faults};

const NODE: &str = "gpu-node-1";

/// The daemon's stderr as (level, message): tracing's `LEVEL message` lines without time; a
/// retry's jittered delay is written `<delay>`. Lines that are not log lines (main's closing
/// `error: ...`) go through `parse_log`. INFO lines are left out: they say what was published,
/// which the Node's labels show.
fn daemon_log(lines: &[String]) -> Log {
    let delay = regex::Regex::new(r"retrying in [0-9.]+(ms|s|µs)").unwrap();
    lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .flat_map(|l| {
            let t = l.trim_start();
            let parsed = ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"]
                .iter()
                .find_map(|lvl| {
                    t.strip_prefix(&format!("{lvl} "))
                        .map(|m| (lvl.to_string(), m.to_string()))
                });
            let (level, message) = parsed.unwrap_or_else(|| parse_log(l).remove(0));
            (level != "INFO").then(|| {
                (
                    level,
                    delay
                        .replace_all(&message, "retrying in <delay>")
                        .into_owned(),
                )
            })
        })
        .collect()
}

/// `run --oneshot` against the server at `url`: exit code and log; labels are the Node's.
fn oneshot(dir: &Path, url: &str, extra: &[&str]) -> (i32, Log) {
    let kubeconfig = apiserver::write_kubeconfig(dir, url);
    let rules = write(
        dir,
        "rules.yaml",
        &apiserver::rule_file(&[("nvidia", "test.nvidia")]),
    );
    let mut args = vec!["--rules", rules.to_str().unwrap(), "--oneshot"];
    args.extend_from_slice(extra);
    let mut agent = Agent::start(&apiserver::run_args(&kubeconfig, NODE, &args), &[]);
    let code = agent.wait_exit(Duration::from_secs(60));
    (code, daemon_log(&agent.log()))
}

fn kubelet() -> Labels {
    apiserver::map(&[("kubernetes.io/hostname", NODE), ("team", "ml")])
}

fn ours() -> Labels {
    with(dell_pci(), &[("test.nvidia", "true")])
}

fn cluster() -> FakeApiServer {
    let s = FakeApiServer::start();
    s.add_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    s.merge_patch_labels(NODE, "ops-controller", &[("team", Some("ml"))]);
    s
}

/// An API server that answers every request 403 Forbidden (RBAC without `nodes patch`).
struct Forbidden {
    url: String,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
}

impl Forbidden {
    fn start() -> Forbidden {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut c) = conn else { continue };
                let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 65536];
                let mut req = Vec::new();
                // Headers, then the body by Content-Length.
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    req.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&req);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if req.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "reason": "Forbidden", "code": 403,
                    "message": format!("nodes \"{NODE}\" is forbidden: User \"system:serviceaccount:gpu-labeler:gpu-labeler\" cannot patch resource \"nodes\" in API group \"\" at the cluster scope"),
                    "details": {"name": NODE, "kind": "nodes"}})
                .to_string();
                let _ = write!(
                    c,
                    "HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Forbidden {
            url: format!("http://{addr}"),
            stop,
            addr,
        }
    }
}

impl Drop for Forbidden {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr);
    }
}

/// (exit code, log, Node labels) as one Outcome.
fn node_outcome(code: i32, log: Log, labels: Labels) -> Outcome {
    Outcome { code, log, labels }
}

/// `run --oneshot` against a server whose first answer is broken by `faults`: one warning for
/// attempt 1 (`failure`, then the retry), exit 0, and the Node gets our labels.
fn faulted_once(dir: &Path, faults: Faults, failure: String) -> (Outcome, Outcome) {
    let s = cluster();
    s.set_faults(faults);
    let (code, log) = oneshot(dir, &s.url(), &[]);
    let actual = node_outcome(code, log, s.labels(NODE));
    let e = expect(
        0,
        vec![warn(format!("{failure}; attempt 1, retrying in <delay>"))],
        apiserver::union(&[&kubelet(), &ours()]),
    );
    (actual, e)
}

fn api_rows() -> Vec<Row> {
    vec![
        row(
            "api: 500 once",
            "the first request answers 500: retried, then applied",
            |dir| {
                faulted_once(
                    dir,
                    Faults {
                        error_500: 1,
                        ..Faults::default()
                    },
                    format!(
                        "GET node {NODE}: 500 InternalError: Internal error occurred: injected fault (server)"
                    ),
                )
            },
        ),
        row(
            "api: 409 conflict",
            "another manager owns one of our keys with another value: reported, the rest applied",
            |dir| {
                let s = cluster();
                let contested = format!("{PREFIX}pci-0302_10de.present");
                s.merge_patch_labels(NODE, "ops-controller", &[(&contested, Some("false"))]);
                let (code, log) = oneshot(dir, &s.url(), &[]);
                let actual = node_outcome(code, log, s.labels(NODE));
                let mut want = apiserver::union(&[&kubelet(), &ours()]);
                want.insert(contested.clone(), "false".into());
                let e = expect(
                    0,
                    vec![warn(format!(
                        "label {contested} is owned by field manager \"ops-controller\" with another value; not applied"
                    ))],
                    want,
                );
                (actual, e)
            },
        ),
        row(
            "api: 409 on apply",
            "the first apply answers 409 \"the object has been modified\": the Node is read again and applied in the same attempt, nothing to report",
            |dir| {
                let s = cluster();
                s.set_faults(Faults {
                    conflict_409: 1,
                    only_method: Some("PATCH".into()),
                    ..Faults::default()
                });
                let (code, log) = oneshot(dir, &s.url(), &[]);
                let actual = node_outcome(code, log, s.labels(NODE));
                let e = expect(0, vec![], apiserver::union(&[&kubelet(), &ours()]));
                (actual, e)
            },
        ),
        row(
            "api: 403 forbidden",
            "every request answers 403: four attempts, exit 3, the Node untouched",
            |dir| {
                let f = Forbidden::start();
                let (code, log) = oneshot(dir, &f.url, &[]);
                let forbidden = format!(
                    "GET node {NODE}: 403 Forbidden: nodes \"{NODE}\" is forbidden: User \"system:serviceaccount:gpu-labeler:gpu-labeler\" cannot patch resource \"nodes\" in API group \"\" at the cluster scope"
                );
                let e = expect(
                    3,
                    vec![
                        warn(format!(
                            "{forbidden} (client); attempt 1, retrying in <delay>"
                        )),
                        warn(format!(
                            "{forbidden} (client); attempt 2, retrying in <delay>"
                        )),
                        warn(format!(
                            "{forbidden} (client); attempt 3, retrying in <delay>"
                        )),
                        err(format!(
                            "publishing failed after 4 attempts (client): {forbidden}"
                        )),
                    ],
                    Labels::new(),
                );
                (node_outcome(code, log, Labels::new()), e)
            },
        ),
        row(
            "api: timeout once",
            "the first answer takes 4 s, past the 2 s request timeout: retried, then applied",
            |dir| {
                // `run_args` sets a 1 s interval: requests time out after 2 s.
                faulted_once(
                    dir,
                    Faults {
                        slow: 1,
                        slow_for: Duration::from_secs(4),
                        ..Faults::default()
                    },
                    format!("GET node {NODE}: no answer in 2s (timeout)"),
                )
            },
        ),
        row(
            "api: answer too large",
            "the first GET answers a 64 MiB Node: cut at 4 MiB, a failed attempt, then applied",
            |dir| {
                apiserver::huge_node();
                faulted_once(
                    dir,
                    Faults {
                        huge_body: 1,
                        ..Faults::default()
                    },
                    format!(
                        "GET node {NODE}: the answer is larger than 4 MiB; not read (too_large)"
                    ),
                )
            },
        ),
        row(
            "api: answer never ends",
            "the first GET sends headers and a body that never ends: bounded by the 2 s request timeout, then applied",
            |dir| {
                faulted_once(
                    dir,
                    Faults {
                        endless_body: 1,
                        ..Faults::default()
                    },
                    format!("GET node {NODE}: no answer in 2s (timeout)"),
                )
            },
        ),
        row(
            "api: 429 too many requests",
            "the first GET answers 429 with Retry-After: 1: waited for, then applied",
            |dir| {
                faulted_once(
                    dir,
                    Faults {
                        throttle_429: 1,
                        retry_after_secs: 1,
                        ..Faults::default()
                    },
                    format!(
                        "GET node {NODE}: 429 TooManyRequests: Too many requests, please try again later. (throttled)"
                    ),
                )
            },
        ),
        row(
            "cgroup: memory limit below the need",
            "memory.max is 8 MiB, the node's 517 functions need about 13: said, labels published",
            |dir| {
                let s = cluster();
                let cgroup = dir.join("cgroup");
                std::fs::create_dir(&cgroup).unwrap();
                let max = write(&cgroup, "memory.max", "8388608\n");
                let (code, log) =
                    oneshot(dir, &s.url(), &["--cgroup-root", cgroup.to_str().unwrap()]);
                let actual = node_outcome(code, log, s.labels(NODE));
                let e = expect(
                    0,
                    vec![warn(format!(
                        "this node has 517 PCI functions: the agent needs about 15 MiB, more than its memory limit of 8 MiB ({}); raise resources.limits.memory to at least 19Mi",
                        max.display()
                    ))],
                    apiserver::union(&[&kubelet(), &ours()]),
                );
                (actual, e)
            },
        ),
        row(
            "api: unreachable, then back",
            "nothing listens: four attempts, exit 3; once the server is up, the next run applies",
            |dir| {
                let port = apiserver::reserve_port();
                let url = format!("http://127.0.0.1:{port}");
                let (code, log) = oneshot(dir, &url, &[]);
                let down = format!(
                    "GET node {NODE}: ServiceError: client error (Connect): tcp connect error: Connection refused (os error 111)"
                );
                let during = node_outcome(code, log, Labels::new());
                let s = FakeApiServer::start_on(port);
                s.add_node(NODE, &[("kubernetes.io/hostname", NODE)]);
                s.merge_patch_labels(NODE, "ops-controller", &[("team", Some("ml"))]);
                let (code2, log2) = oneshot(dir, &url, &[]);
                let after = node_outcome(code2, log2, s.labels(NODE));
                // One Outcome for both runs: codes as a two-digit number, logs concatenated.
                let actual = Outcome {
                    code: during.code * 10 + after.code,
                    log: [during.log, after.log].concat(),
                    labels: after.labels,
                };
                let e = expect(
                    30,
                    vec![
                        warn(format!("{down} (network); attempt 1, retrying in <delay>")),
                        warn(format!("{down} (network); attempt 2, retrying in <delay>")),
                        warn(format!("{down} (network); attempt 3, retrying in <delay>")),
                        err(format!(
                            "publishing failed after 4 attempts (network): {down}"
                        )),
                    ],
                    apiserver::union(&[&kubelet(), &ours()]),
                );
                (actual, e)
            },
        ),
    ]
}

// ---------------------------------------------------------------------------------------------

fn matrix() -> Vec<Row> {
    [
        rule_rows(),
        config_rows(),
        snapshot_rows(),
        sysfs_rows(),
        nvml_rows(),
        sharing_rows(),
        api_rows(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[test]
fn bad_input_matrix() {
    let rows = matrix();
    let names: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.name).collect();
    assert_eq!(names.len(), rows.len(), "row names are unique");
    // Rows run on a few threads (the daemon rows mostly wait on back-off); every row's result
    // is collected and all failures reported together.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(r) = rows.get(i) else { break };
                    let dir = tempfile::tempdir().unwrap();
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        (r.check)(dir.path())
                    }));
                    let failure = match result {
                        Ok((actual, expected)) if actual == expected => None,
                        Ok((actual, expected)) => Some(format!(
                            "row {:?} ({}):\n  actual:   {actual:#?}\n  expected: {expected:#?}",
                            r.name, r.broken
                        )),
                        Err(p) => Some(format!(
                            "row {:?} ({}): panicked: {}",
                            r.name,
                            r.broken,
                            p.downcast_ref::<String>()
                                .cloned()
                                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default()
                        )),
                    };
                    if let Some(f) = failure {
                        failures.lock().unwrap().push(f);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n\n")
    );
}
