//! `gpu-labeler rules check` and `explain` as an operator who made typos meets them: every problem
//! in one run, each naming file:line:column and the rule, exit 1 on any error.

mod common;

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");

fn run(args: &[&str]) -> (i32, String, String) {
    common::run(args).parts()
}

#[test]
fn typos_are_all_reported_in_one_run() {
    let (code, stdout, _) = run(&["rules", "check", "tests/fixtures/rules/typos/typos.yaml"]);
    assert_eq!(code, 1);
    let f = "tests/fixtures/rules/typos/typos.yaml";
    assert_eq!(
        stdout,
        format!(
            "error: {f}:20:26: rule \"typo-op\" (NodeFeatureRule \"my-rules\"): matchFeatures[0].matchExpressions.vendor.op: unknown operator \"Inn\" (did you mean \"In\"?); supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse\n\
             error: {f}:21:42: rule \"typo-op\" (NodeFeatureRule \"my-rules\"): gpu.device: memory_mib: Gt needs an integer, got \"forty\"\n\
             warning: {f}:13:13: rule \"big-gpus\" (NodeFeatureRule \"my-rules\"): gpu.node: memory_mib_mn: gpu.node has no element \"memory_mib_mn\" (did you mean \"memory_mib_min\"?); the expression can never match\n\
             1 file(s) checked: 2 error(s), 1 warning(s)\n"
        )
    );
}

#[test]
fn the_shipped_rules_check_clean() {
    let (code, stdout, _) = run(&["rules", "check", "rules/"]);
    assert_eq!(
        (code, stdout.as_str()),
        (0, "2 file(s) checked: 0 error(s), 0 warning(s)\n")
    );
}

#[test]
fn labels_with_a_broken_rules_file_prints_the_rest_and_exits_1() {
    let (code, stdout, stderr) = run(&[
        "labels",
        "--sysfs-root",
        "tests/fixtures/sysfs/nfd-rootfs-1",
        "--proc-root",
        "/nonexistent",
        "--no-nvml",
        "--rules",
        "tests/fixtures/rules/typos/typos.yaml",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        stdout,
        "feature.node.kubernetes.io/pci-0300_1a03.present=true\n\
         feature.node.kubernetes.io/pci-0b40_8086.present=true\n\
         feature.node.kubernetes.io/pci-0b40_8086.sriov.capable=true\n"
    );
    assert_eq!(
        stderr,
        "warning: tests/fixtures/sysfs/nfd-rootfs-1/bus/pci/devices/0000:00:1f.2: no `vendor` attribute (NFD needs class, vendor, device, subsystem_vendor, subsystem_device); PCI device skipped\n\
         error: tests/fixtures/rules/typos/typos.yaml:20:26: rule \"typo-op\" (NodeFeatureRule \"my-rules\"): matchFeatures[0].matchExpressions.vendor.op: unknown operator \"Inn\" (did you mean \"In\"?); supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse\n"
    );
}

/// A 500-byte rule file whose template would write 26 MB a cycle: `rules check` warns, and
/// `labels` cuts the render at 1 MiB, fails that rule alone and reports values shortened.
#[test]
fn a_template_that_writes_megabytes_is_warned_about_and_bounded() {
    let f = "tests/fixtures/rules/typos/heavy-template.yaml";
    let (code, stdout, _) = run(&["rules", "check", f]);
    assert_eq!(
        (code, stdout),
        (
            0,
            format!(
                "warning: {f}:9:9: rule \"huge\" (NodeFeatureRule \"big\"): template action {{{{ repeat 60000 \"x\" }}}} can write far more than labels carry; a template's output is cut at 1024 KiB and the rule then fails\n\
                 1 file(s) checked: 0 error(s), 1 warning(s)\n"
            )
        )
    );
    let (code, stdout, stderr) = run(&[
        "labels",
        "--sysfs-root",
        "tests/fixtures/sysfs/dell-xe9680-8xh100",
        "--proc-root",
        "/nonexistent",
        "--no-nvml",
        "--no-default-rules",
        "--rules",
        f,
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "feature.node.kubernetes.io/pci-0300_102b.present=true\n\
         feature.node.kubernetes.io/pci-0302_10de.present=true\n\
         feature.node.kubernetes.io/pci-0302_10de.sriov.capable=true\n"
    );
    let y = "y".repeat(100);
    assert_eq!(
        stderr,
        format!(
            "warning: rule \"huge\" (NodeFeatureRule \"big\", {f}:7:7) failed: failed to expand template at line 9, column 18: the render would write more than the 1048576 bytes allowed\n\
             warning: label \"feature.node.kubernetes.io/big={y}… (1000 bytes)\" from rule \"refused\" (NodeFeatureRule \"big\", {f}:14:7) rejected: invalid value \"{y}… (1000 bytes)\": must be no more than 63 characters (has 1000)\n"
        )
    );
}

/// The ConfigMap the README says to edit is read as rules: its `site.yaml` entry is checked
/// (the configuration entry beside it is not rules and is left alone), and a problem in it is
/// reported at its line and column in the ConfigMap file.
#[test]
fn the_shipped_configmap_is_checked_in_place() {
    for shipped in [
        "deploy/base/configmap.yaml",
        "deploy/components/example-rules/rules.yaml",
    ] {
        let (code, stdout, _) = run(&["rules", "check", shipped]);
        assert_eq!(
            (code, stdout.as_str()),
            (0, "1 file(s) checked: 0 error(s), 0 warning(s)\n"),
            "{shipped}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("configmap.yaml");
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/components/example-rules/rules.yaml"
    ))
    .unwrap();
    let line = shipped
        .lines()
        .position(|l| l.contains("memory_mib_min"))
        .unwrap()
        + 1;
    std::fs::write(&file, shipped.replace("memory_mib_min", "memory_mib_mn")).unwrap();
    let f = file.to_str().unwrap();
    let (code, stdout, _) = run(&["rules", "check", f]);
    assert_eq!(
        (code, stdout),
        (
            0,
            format!(
                "warning: {f}:{line}:17: rule \"large-memory GPUs\" (NodeFeatureRule \"site-gpu-classes\"): gpu.node: memory_mib_mn: gpu.node has no element \"memory_mib_mn\" (did you mean \"memory_mib_min\"?); the expression can never match\n\
                 1 file(s) checked: 0 error(s), 1 warning(s)\n"
            )
        )
    );
}

/// `--rules` takes a ConfigMap too: on the 8x MI300X tree (192 GiB each) the example-rules
/// component's rule adds exactly `gpu.class=large-memory` to the labels.
#[test]
fn labels_take_rules_from_a_configmap() {
    let base = [
        "labels",
        "--no-nvml",
        "--proc-root",
        "/nonexistent",
        "--sysfs-root",
        "tests/fixtures/sysfs/amd-mi300x-cpx",
        "--pci-ids",
        "tests/fixtures/pci.ids",
    ];
    let (code, without, _) = run(&base);
    assert_eq!(code, 0);
    let mut args = base.to_vec();
    args.extend(["--rules", "deploy/components/example-rules/rules.yaml"]);
    let (code, with, stderr) = run(&args);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let mut want: Vec<&str> = without.lines().collect();
    want.push("feature.node.kubernetes.io/gpu.class=large-memory");
    want.sort_unstable_by_key(|l| l.split_once('=').map(|(k, _)| k));
    assert_eq!(with.lines().collect::<Vec<_>>(), want);
}

/// `explain --rule` with a name no loaded rule has is an error (exit 1) with the closest name,
/// not an empty explanation that looks like success.
#[test]
fn explain_refuses_an_unknown_rule_name() {
    let (code, stdout, stderr) = run(&[
        "explain",
        "--rule",
        "gpu vendr (single vendor)",
        "--features",
        "tests/fixtures/golden/this-vm.features.json",
    ]);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            1,
            "",
            "error: --rule \"gpu vendr (single vendor)\": no rule of that name is loaded (did you mean \"gpu vendor (single vendor)\"?)\n"
        )
    );
}

#[test]
fn strict_makes_the_warnings_errors() {
    let f = "tests/fixtures/rules/typos/typos.yaml";
    let (code, stdout, _) = run(&["rules", "check", "--strict", f]);
    assert_eq!(
        (code, stdout),
        (
            1,
            format!(
                "error: {f}:20:26: rule \"typo-op\" (NodeFeatureRule \"my-rules\"): matchFeatures[0].matchExpressions.vendor.op: unknown operator \"Inn\" (did you mean \"In\"?); supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse\n\
                 error: {f}:21:42: rule \"typo-op\" (NodeFeatureRule \"my-rules\"): gpu.device: memory_mib: Gt needs an integer, got \"forty\"\n\
                 error: {f}:13:13: rule \"big-gpus\" (NodeFeatureRule \"my-rules\"): gpu.node: memory_mib_mn: gpu.node has no element \"memory_mib_mn\" (did you mean \"memory_mib_min\"?); the expression can never match\n\
                 1 file(s) checked: 3 error(s), 0 warning(s)\n"
            )
        )
    );
    // A file with only a warning: clean without --strict, a failure with it.
    let (_dir, only) = common::temp_file(
        "warn.yaml",
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: w\nspec:\n  rules:\n    - name: r\n      labels: {x: \"1\"}\n      matchFeatures:\n        - feature: gpu.node\n          matchExpressions:\n            count_gpus: {op: Exists}\n",
    );
    let p = only.to_str().unwrap();
    let problem = format!(
        "{p}:12:13: rule \"r\" (NodeFeatureRule \"w\"): gpu.node: count_gpus: gpu.node has no element \"count_gpus\"; the expression can never match"
    );
    let (code, out, _) = run(&["rules", "check", p]);
    assert_eq!(
        (code, out),
        (
            0,
            format!("warning: {problem}\n1 file(s) checked: 0 error(s), 1 warning(s)\n")
        )
    );
    let (code, out, _) = run(&["rules", "check", "--strict", p]);
    assert_eq!(
        (code, out),
        (
            1,
            format!("error: {problem}\n1 file(s) checked: 1 error(s), 0 warning(s)\n")
        )
    );
}

/// `-o json` for CI: the counts and every finding with its position, the same findings as the
/// text form (under `--strict`, the warning is an error there too).
#[test]
fn json_output_gives_every_finding_with_its_position() {
    let f = "tests/fixtures/rules/typos/typos.yaml";
    let parse = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
    let finding = |severity: &str, line: u32, column: u32, rule: &str, message: &str| {
        serde_json::json!({
            "severity": severity, "file": f, "line": line, "column": column,
            "object": "my-rules", "rule": rule, "message": message,
        })
    };
    let op = "matchFeatures[0].matchExpressions.vendor.op: unknown operator \"Inn\" (did you mean \"In\"?); supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse";
    let gt = "gpu.device: memory_mib: Gt needs an integer, got \"forty\"";
    let typo = "gpu.node: memory_mib_mn: gpu.node has no element \"memory_mib_mn\" (did you mean \"memory_mib_min\"?); the expression can never match";
    for (strict, third) in [(false, "warning"), (true, "error")] {
        let mut args = vec!["rules", "check", "-o", "json", f];
        if strict {
            args.push("--strict");
        }
        let (code, stdout, _) = run(&args);
        let (errors, warnings) = if strict { (3, 0) } else { (2, 1) };
        assert_eq!(
            (code, parse(&stdout)),
            (
                1,
                serde_json::json!({
                    "files": 1, "errors": errors, "warnings": warnings,
                    "findings": [
                        finding("error", 20, 26, "typo-op", op),
                        finding("error", 21, 42, "typo-op", gt),
                        finding(third, 13, 13, "big-gpus", typo),
                    ],
                })
            )
        );
    }
    // A file that cannot be read has no position: line and column are null.
    let (code, stdout, _) = run(&["rules", "check", "-o", "json", "/nonexistent/rules.yaml"]);
    assert_eq!(
        (code, parse(&stdout)),
        (
            1,
            serde_json::json!({
                "files": 0, "errors": 1, "warnings": 0,
                "findings": [{
                    "severity": "error", "file": "/nonexistent/rules.yaml", "line": null,
                    "column": null, "object": null, "rule": null,
                    "message": "cannot read rule file: No such file or directory (os error 2)",
                }],
            })
        )
    );
}

/// A site's rules kept per team and vendor: a directory is read with its subdirectories, in
/// path order; hidden entries (`.git`, a ConfigMap's `..data`) and links to directories are not
/// entered.
#[test]
fn a_directory_is_read_with_its_subdirectories() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let typos = std::fs::read_to_string("tests/fixtures/rules/typos/typos.yaml").unwrap();
    let shipped = std::fs::read_to_string("rules/gpu.yaml").unwrap();
    for (path, text) in [
        ("team-a/nvidia/typos.yaml", typos.as_str()),
        ("team-b/defaults.yml", shipped.as_str()),
        ("team-b/README.md", "not a rule file"),
        (".git/typos.yaml", typos.as_str()),
    ] {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::os::unix::fs::symlink(root.join("team-a"), root.join("team-b/link-to-a")).unwrap();
    let (code, stdout, _) = run(&["rules", "check", "--strict", root.to_str().unwrap()]);
    let f = root.join("team-a/nvidia/typos.yaml");
    let f = f.display();
    assert_eq!(
        (code, stdout),
        (
            1,
            format!(
                "error: {f}:20:26: rule \"typo-op\" (NodeFeatureRule \"my-rules\"): matchFeatures[0].matchExpressions.vendor.op: unknown operator \"Inn\" (did you mean \"In\"?); supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse\n\
                 error: {f}:21:42: rule \"typo-op\" (NodeFeatureRule \"my-rules\"): gpu.device: memory_mib: Gt needs an integer, got \"forty\"\n\
                 error: {f}:13:13: rule \"big-gpus\" (NodeFeatureRule \"my-rules\"): gpu.node: memory_mib_mn: gpu.node has no element \"memory_mib_mn\" (did you mean \"memory_mib_min\"?); the expression can never match\n\
                 2 file(s) checked: 3 error(s), 0 warning(s)\n"
            )
        )
    );
}

/// A template that reads fields its data cannot have: each one at its file position, warned
/// about, refused under --strict; the rule then fails at run time at the first of them, as
/// predicted, while the same reads written right label the node.
#[test]
fn template_field_typos_are_found_before_the_rule_runs() {
    let f = "tests/fixtures/rules/typos/template-fields.yaml";
    let r = "rule \"typos\" (NodeFeatureRule \"template-fields\")";
    let tail = "the rule fails with a missing key when it runs";
    let findings = [
        format!(
            "{f}:28:39: {r}: template: .Attributes: an element of pci.device is the map of its attributes: write .vendor, not .Attributes.vendor; {tail}"
        ),
        format!(
            "{f}:28:64: {r}: template: pci.device has no attribute \"devce\" (did you mean .device?); {tail}"
        ),
        format!(
            "{f}:29:63: {r}: template: .Nmae: an element of kernel.loadedmodule, a flag, has only .Name (did you mean .Name?); {tail}"
        ),
        format!(
            "{f}:29:77: {r}: template: .Value: an element of kernel.loadedmodule, a flag, has only .Name; {tail}"
        ),
        format!(
            "{f}:30:41: {r}: template: .count: gpu.node is a list of elements, which has no fields; range over it; {tail}"
        ),
        format!(
            "{f}:30:83: {r}: template: .Value.x: .Value of an element of gpu.node is a string, which has no fields; {tail}"
        ),
    ];
    let listed =
        |level: &str| -> String { findings.iter().map(|m| format!("{level}: {m}\n")).collect() };
    assert_eq!(
        run(&["rules", "check", f]),
        (
            0,
            listed("warning") + "1 file(s) checked: 0 error(s), 6 warning(s)\n",
            String::new()
        )
    );
    assert_eq!(
        run(&["rules", "check", "--strict", f]),
        (
            1,
            listed("error") + "1 file(s) checked: 6 error(s), 0 warning(s)\n",
            String::new()
        )
    );
    let node: Vec<String> = common::fixture_args(&["labels"], "dell-xe9680-8xh100", &[])
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let node: Vec<&str> = node.iter().map(String::as_str).collect();
    let (_, without, _) = run(&node);
    let (code, stdout, stderr) = run(&[&node[..], &["--rules", f]].concat());
    // Exactly the node's labels plus the right rule's; the typos rule gives nothing.
    let mut want: Vec<&str> = without.lines().collect();
    want.extend([
        "feature.node.kubernetes.io/gpus=8",
        "feature.node.kubernetes.io/mod-nvidia=true",
        "feature.node.kubernetes.io/pci-10de-2330=true",
    ]);
    want.sort_unstable_by_key(|l| l.split_once('=').map(|(k, _)| k));
    assert_eq!(
        (code, stdout.lines().collect::<Vec<_>>(), stderr),
        (
            0,
            want,
            format!(
                "warning: rule \"typos\" (NodeFeatureRule \"template-fields\", {f}:26:7) failed: failed to expand template at line 28, column 39: map has no entry for key \"Attributes\"\n"
            )
        )
    );
}

/// deploy/components/nfd-vendor-labels adds NFD's vendor-only PCI labels beside the default
/// ones: on every sysfs fixture, the labels with its rule are exactly the default labels plus
/// those NFD gives with `deviceLabelFields: [vendor]`.
#[test]
fn the_vendor_labels_component_gives_nfds_vendor_only_labels_beside_the_default() {
    let (_dir, vendor_config) = common::temp_file(
        "vendor.yaml",
        "sources:\n  pci:\n    deviceLabelFields: [vendor]\n",
    );
    let rules = "deploy/components/nfd-vendor-labels/rules.yaml";
    assert_eq!(
        run(&["rules", "check", "--strict", rules]),
        (
            0,
            "1 file(s) checked: 0 error(s), 0 warning(s)\n".into(),
            String::new()
        )
    );
    let labels = |sysfs: &str, extra: &[&str]| -> std::collections::BTreeMap<String, String> {
        let mut args = vec![
            "labels",
            "-o",
            "json",
            "--no-nvml",
            "--sysfs-root",
            sysfs,
            "--proc-root",
            "/nonexistent",
            "--pci-ids",
            "tests/fixtures/pci.ids",
        ];
        args.extend(extra);
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{sysfs}: {stderr}");
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        serde_json::from_value(v["labels"].clone()).unwrap()
    };
    let mut fixtures: Vec<String> = std::fs::read_dir("tests/fixtures/sysfs")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("bus/pci/devices").is_dir())
        .map(|p| p.display().to_string())
        .collect();
    fixtures.sort();
    assert!(fixtures.len() >= 15, "{fixtures:?}");
    let mut with_vendor_labels = 0;
    for f in &fixtures {
        let default = labels(f, &[]);
        let vendor = labels(f, &["--config", vendor_config.to_str().unwrap()]);
        let mut want = default.clone();
        want.extend(vendor.clone());
        if want != default {
            with_vendor_labels += 1;
        }
        assert_eq!(labels(f, &["--rules", rules]), want, "{f}");
    }
    assert!(with_vendor_labels >= 15, "{with_vendor_labels}");
}

/// `--allowed-ns` / `GPU_LABELER_ALLOWED_NS` stand for the config's `labels.allowedNs` (a
/// kustomize env patch, not an edit inside the ConfigMap): a label outside them is refused and
/// named with its rule, the others are given.
#[test]
fn allowed_namespaces_come_from_the_environment_too() {
    let (_dir, rules) = common::temp_file(
        "amd.yaml",
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: amd\nspec:\n  rules:\n    - name: amd keys\n      labels:\n        amd.com/gpu.cu-count: \"304\"\n        vendor.example/team: a\n      matchFeatures:\n        - feature: gpu.node\n          matchExpressions:\n            count: {op: Gt, value: [\"0\"]}\n",
    );
    let r = rules.to_str().unwrap();
    let discovery = common::discovery_arg_strings(
        &common::sysfs_fixture("amd-mi300x-cpx"),
        std::path::Path::new("/nonexistent"),
    );
    let base: Vec<&str> = ["labels", "-o", "json", "--no-default-rules", "--rules", r]
        .into_iter()
        .chain(discovery.iter().map(String::as_str))
        .collect();
    let refused = format!(
        "warning: label \"vendor.example/team=a\" from rule \"amd keys\" (NodeFeatureRule \"amd\", {r}:7:7) rejected: namespace \"vendor.example\" is not in labels.allowedNs [feature.node.kubernetes.io, amd.com] (the admission policy must allow it too)\n"
    );
    let keys = |stdout: &str| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(stdout).unwrap();
        v["labels"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !k.starts_with("feature.node.kubernetes.io/pci-"))
            .cloned()
            .collect()
    };
    let out = Command::new(BIN)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(&base)
        .env(
            "GPU_LABELER_ALLOWED_NS",
            "feature.node.kubernetes.io, amd.com",
        )
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert_eq!(
        (out.status.code(), keys(&stdout), stderr.as_str()),
        (
            Some(0),
            vec!["amd.com/gpu.cu-count".to_string()],
            refused.as_str()
        )
    );
    let mut flag = base.to_vec();
    flag.extend(["--allowed-ns", "feature.node.kubernetes.io,amd.com"]);
    let (code, stdout, stderr) = run(&flag);
    assert_eq!(
        (code, keys(&stdout), stderr),
        (0, vec!["amd.com/gpu.cu-count".to_string()], refused)
    );
    // Without it (and no allowedNs in a config), NFD's policy alone: both are given.
    let (code, stdout, stderr) = run(&base);
    assert_eq!(
        (code, keys(&stdout), stderr),
        (
            0,
            vec![
                "amd.com/gpu.cu-count".to_string(),
                "vendor.example/team".to_string()
            ],
            String::new()
        )
    );
}

/// Issue 44's nesting bombs (600 parentheses in 1.2 KB; `not` 1,000 deep) beside a good rule:
/// `rules check` reports each as an error at the parenthesis that crosses the bound; `labels`
/// and the daemon (`run --oneshot --sink stdout`) give the good rule's labels whole, each bomb
/// failing alone with its rule's file:line, and exit normally. Before the bound each aborted
/// the process (SIGABRT, stack overflow) and `rules check` said 0 errors.
#[test]
fn nesting_bombs_fail_their_rule_alone_and_rules_check_reports_them() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bombs.yaml");
    let matcher = "      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {op: In, value: [\"10de\"]}\n";
    let parens = format!("{}1{}", "(".repeat(600), ")".repeat(600));
    let nots = format!("{}true{}", "not (".repeat(1000), ")".repeat(1000));
    std::fs::write(
        &f,
        format!(
            "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: bombs\nspec:\n  rules:\n    - name: parens\n      labelsTemplate: |\n        a={{{{ {parens} }}}}\n{matcher}    - name: nots\n      labelsTemplate: |\n        b={{{{ {nots} }}}}\n{matcher}    - name: good\n      labelsTemplate: |\n        good.count={{{{ len .pci.device }}}}\n      labels:\n        good.plain: \"yes\"\n{matcher}"
        ),
    )
    .unwrap();
    let f = f.to_str().unwrap();
    let depth = "max expression depth exceeded: parentheses nest at most 32 deep in gpu-labeler (Go allows 10000)";
    let (code, stdout, _) = run(&["rules", "check", f]);
    assert_eq!(
        (code, stdout),
        (
            1,
            format!(
                "error: {f}:9:46: rule \"parens\" (NodeFeatureRule \"bombs\"): invalid template: {depth}\n\
                 error: {f}:16:178: rule \"nots\" (NodeFeatureRule \"bombs\"): invalid template: {depth}\n\
                 1 file(s) checked: 2 error(s), 0 warning(s)\n"
            )
        )
    );
    let discovery = [
        "--sysfs-root",
        "tests/fixtures/sysfs/dell-xe9680-8xh100",
        "--proc-root",
        "/nonexistent",
        "--no-nvml",
        "--no-default-rules",
        "--rules",
        f,
    ];
    let good = "feature.node.kubernetes.io/good.count=12\n\
                feature.node.kubernetes.io/good.plain=yes\n\
                feature.node.kubernetes.io/pci-0300_102b.present=true\n\
                feature.node.kubernetes.io/pci-0302_10de.present=true\n\
                feature.node.kubernetes.io/pci-0302_10de.sriov.capable=true\n";
    let failures = format!(
        "warning: rule \"parens\" (NodeFeatureRule \"bombs\", {f}:7:7) failed: failed to parse template at line 9, column 46: {depth}\n\
         warning: rule \"nots\" (NodeFeatureRule \"bombs\", {f}:14:7) failed: failed to parse template at line 16, column 178: {depth}\n"
    );
    let labels: Vec<&str> = ["labels"].iter().chain(&discovery).copied().collect();
    assert_eq!(run(&labels), (0, good.to_string(), failures.clone()));
    let daemon: Vec<&str> = [
        "run",
        "--sink",
        "stdout",
        "--oneshot",
        "--listen",
        "127.0.0.1:0",
    ]
    .iter()
    .chain(&discovery)
    .copied()
    .collect();
    // The daemon logs at its level names (` WARN`), one line per failing rule, then publishes.
    let logged = failures.replace("warning: ", " WARN ");
    let published = good
        .lines()
        .map(|l| format!("+{l}"))
        .collect::<Vec<_>>()
        .join(" ");
    let json = good
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            format!("{k:?}:{v:?}")
        })
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        run(&daemon),
        (
            0,
            format!("{{\"labels\":{{{json}}}}}\n"),
            format!("{logged} INFO published to stdout: {published}\n")
        )
    );
}

/// Operators from other languages get a did-you-mean too, and `Gt` with two values is one
/// error, not two (#49).
#[test]
fn operators_from_other_languages_are_named_and_gt_with_two_values_is_one_error() {
    let f = "tests/fixtures/rules/typos/other-words.yaml";
    let (code, stdout, _) = run(&["rules", "check", f]);
    let ops = "supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse";
    assert_eq!(
        (code, stdout),
        (
            1,
            format!(
                "error: {f}:14:26: rule \"words\" (NodeFeatureRule \"other-words\"): matchFeatures[0].matchExpressions.vendor.op: unknown operator \"GreaterThan\" (did you mean \"Gt\"?); {ops}\n\
                 error: {f}:15:27: rule \"words\" (NodeFeatureRule \"other-words\"): matchFeatures[0].matchExpressions.product.op: unknown operator \"Equals\" (did you mean \"In\"?); {ops}\n\
                 error: {f}:13:13: rule \"words\" (NodeFeatureRule \"other-words\"): gpu.node: count: Gt needs exactly one value (has 2)\n\
                 1 file(s) checked: 3 error(s), 0 warning(s)\n"
            )
        )
    );
}

/// A rule file more than 8 directories below the rules directory is not read, and that is said,
/// naming the directory; the files above it are read (#49: they were left out silently).
#[test]
fn a_rule_tree_too_deep_is_said_and_the_rest_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("a/b/c/d/e/f/g/h/i");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::copy("rules/gpu.yaml", deep.join("gpu.yaml")).unwrap();
    std::fs::copy(
        "rules/gpu.yaml",
        dir.path().join("a/b/c/d/e/f/g/h/gpu.yaml"),
    )
    .unwrap();
    let root = dir.path().to_str().unwrap();
    let (code, stdout, _) = run(&["rules", "check", root]);
    assert_eq!(
        (code, stdout),
        (
            1,
            format!(
                "error: {root}/a/b/c/d/e/f/g/h/i: not read: more than 8 directories below {root}\n\
                 1 file(s) checked: 1 error(s), 0 warning(s)\n"
            )
        )
    );
}

/// A label that is not a valid label is said alike by `rules check` and `labels`: a warning
/// (NFD's CRD admits the rule; the label is rejected when the rule matches and the rule's other
/// labels are published), an error under `--strict`.
#[test]
fn an_invalid_label_value_is_a_warning_in_check_and_in_labels() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad-value.yaml");
    std::fs::write(
        &f,
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: x}\nspec:\n  rules:\n    - name: r1\n      labels: {a: \"bad value!\", b: \"ok\"}\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {op: In, value: [\"10de\"]}\n",
    )
    .unwrap();
    let f = f.to_str().unwrap();
    let why = "invalid value \"bad value!\": a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    let finding = format!(
        "{f}:7:16: rule \"r1\" (NodeFeatureRule \"x\"): label \"feature.node.kubernetes.io/a\": {why}; rejected when the rule matches, the rule's other labels published"
    );
    assert_eq!(
        run(&["rules", "check", f]),
        (
            0,
            format!("warning: {finding}\n1 file(s) checked: 0 error(s), 1 warning(s)\n"),
            String::new()
        )
    );
    assert_eq!(
        run(&["rules", "check", "--strict", f]),
        (
            1,
            format!("error: {finding}\n1 file(s) checked: 1 error(s), 0 warning(s)\n"),
            String::new()
        )
    );
    let (code, stdout, stderr) = run(&[
        "labels",
        "--no-nvml",
        "--no-default-rules",
        "--sysfs-root",
        "tests/fixtures/sysfs/dell-xe9680-8xh100",
        "--rules",
        f,
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "feature.node.kubernetes.io/b=ok\n\
         feature.node.kubernetes.io/pci-0300_102b.present=true\n\
         feature.node.kubernetes.io/pci-0302_10de.present=true\n\
         feature.node.kubernetes.io/pci-0302_10de.sriov.capable=true\n"
    );
    assert_eq!(
        stderr,
        format!(
            "warning: label \"feature.node.kubernetes.io/a=bad value!\" from rule \"r1\" (NodeFeatureRule \"x\", {f}:6:7) rejected: {why}\n"
        )
    );
}
