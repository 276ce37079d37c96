//! The command line of docs/catalog.md#command-line: output formats byte for byte, `version`, exit codes and error
//! messages with file:line:column, and environment variables that are the same as the flags.

mod common;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

const NFD: &str = "nfd-rootfs-1";
const DELL: &str = "dell-xe9680-8xh100";

const NFD_LABEL_LINES: &str = "\
feature.node.kubernetes.io/pci-0300_1a03.present=true
feature.node.kubernetes.io/pci-0b40_8086.present=true
feature.node.kubernetes.io/pci-0b40_8086.sriov.capable=true
";

fn nfd_labels(format: Option<&str>) -> String {
    let mut cmd = vec!["labels"];
    if let Some(f) = format {
        cmd.extend(["-o", f]);
    }
    run(fixture_args(&cmd, NFD, &["--no-default-rules"]))
        .ok()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Output formats.

#[test]
fn text_output_is_sorted_key_value_lines_and_the_default() {
    assert_eq!(nfd_labels(Some("text")), NFD_LABEL_LINES);
    assert_eq!(nfd_labels(None), NFD_LABEL_LINES);
}

#[test]
fn json_output_is_one_labels_object() {
    assert_eq!(
        nfd_labels(Some("json")),
        r#"{
  "labels": {
    "feature.node.kubernetes.io/pci-0300_1a03.present": "true",
    "feature.node.kubernetes.io/pci-0b40_8086.present": "true",
    "feature.node.kubernetes.io/pci-0b40_8086.sriov.capable": "true"
  }
}
"#
    );
}

#[test]
fn yaml_output_is_the_same_object() {
    assert_eq!(
        nfd_labels(Some("yaml")),
        r#"labels:
  feature.node.kubernetes.io/pci-0300_1a03.present: "true"
  feature.node.kubernetes.io/pci-0b40_8086.present: "true"
  feature.node.kubernetes.io/pci-0b40_8086.sriov.capable: "true"
"#
    );
}

#[test]
fn features_file_output_is_nfds_features_d_format() {
    assert_eq!(
        nfd_labels(Some("features-file")),
        format!(
            "# Written by gpu-labeler {}; NFD features.d format.\n{NFD_LABEL_LINES}",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn no_labels_prints_nothing_or_an_empty_object() {
    let out = |f: &str| {
        run(fixture_args(
            &["labels", "-o", f],
            "this-vm",
            &["--no-default-rules"],
        ))
        .ok()
        .to_string()
    };
    assert_eq!(out("text"), "");
    assert_eq!(out("json"), "{\n  \"labels\": {}\n}\n");
    assert_eq!(out("yaml"), "labels: {}\n");
    assert_eq!(
        out("features-file"),
        format!(
            "# Written by gpu-labeler {}; NFD features.d format.\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn features_yaml_is_the_same_feature_set_as_json() {
    for m in MACHINES {
        let json: Value =
            serde_json::from_str(run(fixture_args(&["features", "-o", "json"], m, &[])).ok())
                .unwrap();
        let yaml: Value =
            serde_saphyr::from_str(run(fixture_args(&["features", "-o", "yaml"], m, &[])).ok())
                .unwrap();
        assert_eq!(yaml, json, "{m}");
        // JSON is the default format of `features`.
        assert_eq!(
            run(fixture_args(&["features"], m, &[])).ok(),
            run(fixture_args(&["features", "-o", "json"], m, &[])).ok(),
            "{m}"
        );
    }
}

#[test]
fn version_prints_name_and_version() {
    let want = format!("gpu-labeler {}\n", env!("CARGO_PKG_VERSION"));
    let r = run(["version"]);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (0, want.as_str(), "")
    );
    let r = run(["--version"]);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (0, want.as_str(), "")
    );
}

// ---------------------------------------------------------------------------------------------
// Exit codes and error messages.

/// `error: invalid <what> <path>:<line>:<column>: <message>` split into its parts; the message
/// must be there but its wording is the parser's.
fn located_error(stderr: &str, what: &str) -> (String, u64, u64) {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one error line: {stderr}");
    let rest = lines[0]
        .strip_prefix(&format!("error: invalid {what} "))
        .unwrap_or_else(|| panic!("not an `invalid {what}` error: {stderr}"));
    let mut parts = rest.splitn(4, ':');
    let path = parts.next().unwrap().to_string();
    let line = parts.next().unwrap().parse().unwrap();
    let column = parts.next().unwrap().parse().unwrap();
    let message = parts.next().unwrap_or_default().trim();
    assert_ne!(message, "", "a reason after the position: {stderr}");
    (path, line, column)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn labels_with(flag: &str, file: &Path) -> Run {
    run(fixture_args(
        &["labels"],
        NFD,
        &[flag, file.to_str().unwrap()],
    ))
}

#[test]
fn config_with_a_yaml_syntax_error_exits_1_naming_file_line_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "config.yaml",
        "sources:\n  pci:\n    deviceClassWhitelist: [\"03\"\n",
    );
    let r = labels_with("--config", &p);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    // Line 3, at the `[` that is never closed.
    assert_eq!(
        located_error(&r.stderr, "config"),
        (p.display().to_string(), 3, 27)
    );
}

#[test]
fn config_with_an_unknown_key_exits_1_naming_file_line_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "config.yaml",
        "sources:\n  pci:\n    deviceClassWhitelst: [\"03\"]\n",
    );
    let r = labels_with("--config", &p);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        located_error(&r.stderr, "config"),
        (p.display().to_string(), 3, 5)
    );
}

#[test]
fn config_that_does_not_exist_exits_1_naming_it() {
    let p = PathBuf::from("/nonexistent/gpu-labeler.yaml");
    let r = labels_with("--config", &p);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            1,
            "",
            "error: cannot read config /nonexistent/gpu-labeler.yaml: No such file or directory (os error 2)\n"
        )
    );
}

#[test]
fn json_snapshot_with_a_syntax_error_exits_1_naming_file_line_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "snap.json", "{\"flags\": {\n  \"a\": }\n");
    let r = labels_with("--features", &p);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        located_error(&r.stderr, "snapshot"),
        (p.display().to_string(), 2, 8)
    );
}

#[test]
fn yaml_snapshot_with_a_syntax_error_exits_1_naming_file_line_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "snap.yaml", "flags:\n  a: [\n");
    let r = labels_with("--features", &p);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        located_error(&r.stderr, "snapshot"),
        (p.display().to_string(), 2, 6)
    );
}

#[test]
fn snapshot_that_does_not_exist_exits_1_naming_it() {
    let r = labels_with("--features", Path::new("/nonexistent/snap.json"));
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            1,
            "",
            "error: cannot read snapshot /nonexistent/snap.json: No such file or directory (os error 2)\n"
        )
    );
}

/// Exit code, stdout, and whether stderr says something (clap's error or, with no subcommand,
/// its help).
fn usage_error(args: &[&str]) -> (i32, String, bool) {
    let r = run(args);
    (r.code, r.stdout, !r.stderr.trim().is_empty())
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["frobnicate"],
        &["labels", "--no-such-flag"],
        &["labels", "-o", "xml"],
        &["features", "-o", "text"],
        &["labels", "--no-nvml", "--nvml-lib", "/x/libnvidia-ml.so.1"],
        &["labels", "--sysfs-root"],
        &["version", "extra"],
    ] {
        assert_eq!(usage_error(args), (2, String::new(), true), "{args:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Environment variables are the flags.

fn os(s: impl AsRef<OsStr>) -> OsString {
    s.as_ref().to_os_string()
}

#[test]
fn discovery_env_vars_equal_the_flags() {
    let sysfs = sysfs_fixture(DELL);
    let proc = proc_fixture(DELL);
    let ids = pci_ids();
    let env: [(&str, &OsStr); 4] = [
        ("GPU_LABELER_SYSFS_ROOT", sysfs.as_os_str()),
        ("GPU_LABELER_PROC_ROOT", proc.as_os_str()),
        ("GPU_LABELER_PCI_IDS", ids.as_os_str()),
        ("GPU_LABELER_NO_NVML", OsStr::new("true")),
    ];
    for cmd in [&["features", "-o", "json"][..], &["labels", "-o", "json"]] {
        let by_env = run_env(cmd, &env);
        let by_flag = run(fixture_args(cmd, DELL, &[]));
        assert_eq!(by_env.ok(), by_flag.ok(), "{cmd:?}");
        assert_eq!(by_env.stderr, by_flag.stderr, "{cmd:?}");
    }
}

#[test]
fn flags_win_over_env_vars() {
    let other = sysfs_fixture("this-vm");
    let r = run_env(
        fixture_args(&["labels"], NFD, &[]),
        &[
            ("GPU_LABELER_SYSFS_ROOT", other.as_os_str()),
            ("GPU_LABELER_PROC_ROOT", OsStr::new("/nonexistent")),
        ],
    );
    assert_eq!(r.ok(), NFD_LABEL_LINES);
}

#[test]
fn config_env_var_equals_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "config.yaml",
        "sources:\n  pci:\n    deviceClassWhitelist: [\"0c\"]\n",
    );
    let by_env = run_env(
        fixture_args(&["labels"], NFD, &[]),
        &[("GPU_LABELER_CONFIG", p.as_os_str())],
    );
    assert_eq!(
        by_env.ok(),
        "feature.node.kubernetes.io/pci-0c80_8086.present=true\n"
    );
    assert_eq!(by_env, labels_with("--config", &p));
}

#[test]
fn features_env_var_equals_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let snap = write(
        dir.path(),
        "snap.json",
        run(fixture_args(&["features"], DELL, &[])).ok(),
    );
    let by_env = run_env(
        ["labels", "-o", "json"],
        &[("GPU_LABELER_FEATURES", snap.as_os_str())],
    );
    let by_flag = run([
        os("labels"),
        os("-o"),
        os("json"),
        os("--features"),
        os(&snap),
    ]);
    assert_eq!(by_env, by_flag);
    assert_eq!(
        by_env.ok(),
        run(fixture_args(&["labels", "-o", "json"], DELL, &[])).ok()
    );
}

#[test]
fn no_default_rules_env_var_equals_the_flag() {
    let by_env = run_env(
        fixture_args(&["labels"], DELL, &[]),
        &[("GPU_LABELER_NO_DEFAULT_RULES", OsStr::new("true"))],
    );
    let by_flag = run(fixture_args(&["labels"], DELL, &["--no-default-rules"]));
    assert_eq!(by_env, by_flag);
    assert_eq!(
        by_env.ok(),
        std::fs::read_to_string(sysfs_fixture(DELL).with_extension("expected-pci-labels.txt"))
            .unwrap()
    );
}

/// Output and errors into pipes whose readers went away (`| head`, a closed log collector): the
/// command ends with its own exit code, quietly, never a panic (101).
#[test]
fn closed_pipes_end_the_printing_commands_quietly() {
    let mut args = fixture_args(&["labels"], DELL, &[]);
    // An error line on stderr (exit 1) besides the labels on stdout.
    args.extend(["--rules".into(), "/nonexistent/rules.yaml".into()]);
    for extra in [vec![], vec!["-o".into(), "json".into()]] {
        let all: Vec<OsString> = args.iter().cloned().chain(extra.clone()).collect();
        assert_eq!(exit_with_closed_pipes(&all), Some(1), "{extra:?}");
    }
    let check = ["rules", "check", "/nonexistent/rules.yaml"].map(OsString::from);
    assert_eq!(exit_with_closed_pipes(&check), Some(1));
}

/// The exit code of gpu-labeler `args` whose stdout and stderr readers are gone at once.
fn exit_with_closed_pipes(args: &[OsString]) -> Option<i32> {
    let mut child = std::process::Command::new(binary())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    child.wait().unwrap().code()
}

/// Boolean environment variables take clap's usual set: `1`, `yes`, `on` turn a flag on, `0`,
/// `no`, `off` leave it off, anything else is a usage error (exit 2) naming the value.
#[test]
fn boolean_env_vars_take_one_and_zero() {
    let labels_with = |value: &str| {
        run_env(
            fixture_args(&["labels"], "mthreads-s3000", &[]),
            &[("GPU_LABELER_NO_DEFAULT_RULES", OsStr::new(value))],
        )
    };
    let pci_only = "feature.node.kubernetes.io/pci-0302_1ed5.present=true\n";
    for on in ["1", "yes", "on", "true", "TRUE"] {
        let r = labels_with(on);
        assert_eq!((r.code, r.stdout.as_str()), (0, pci_only), "{on}");
    }
    let default = run(fixture_args(&["labels"], "mthreads-s3000", &[]));
    assert_ne!(default.ok(), pci_only);
    for off in ["0", "no", "off", "false"] {
        let r = labels_with(off);
        assert_eq!((r.code, r.stdout.as_str()), (0, default.ok()), "{off}");
    }
    let r = labels_with("maybe");
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr.lines().next(),
        Some(
            "error: invalid value 'maybe' for 'GPU_LABELER_NO_DEFAULT_RULES (the environment variable of --no-default-rules)': value was not a boolean"
        )
    );
}

/// `--features -` reads the snapshot from standard input: `features | labels --features -`
/// gives the labels discovery gives; a broken snapshot names `<stdin>` with line and column.
#[test]
fn features_from_standard_input() {
    use std::io::Write;
    let labels_of_stdin = |input: &[u8]| {
        let mut child = std::process::Command::new(binary())
            .args(["labels", "--features", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let snapshot = run(fixture_args(&["features"], "habana-gaudi3", &[]));
    let direct = run(fixture_args(&["labels"], "habana-gaudi3", &[]));
    assert_eq!(
        labels_of_stdin(snapshot.ok().as_bytes()),
        (Some(0), direct.ok().to_string(), String::new())
    );
    assert_eq!(
        labels_of_stdin(b"{bad"),
        (
            Some(1),
            String::new(),
            "error: invalid snapshot <stdin>:1:2: key must be a string at line 1 column 2\n"
                .to_string()
        )
    );
}

#[test]
fn gpu_labeler_log_filters_the_log_by_level_and_target() {
    // A node without PCI devices: one warning at the default level, and debug lines below it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("bus/pci")).unwrap();
    let args = [
        "labels",
        "--sysfs-root",
        dir.path().to_str().unwrap(),
        "--proc-root",
        "/nonexistent",
        "--no-nvml",
    ];
    let warning = format!(
        "warning: {}/bus/pci/devices: does not exist; no PCI devices discovered\n",
        dir.path().display()
    );
    let stderr = |value: Option<&str>| {
        let env: Vec<(&str, &OsStr)> = value
            .map(|v| ("GPU_LABELER_LOG", OsStr::new(v)))
            .into_iter()
            .collect();
        let r = run_env(args, &env);
        assert_eq!(r.code, 0, "{value:?}: {}", r.stderr);
        r.stderr
    };
    assert_eq!(stderr(None), warning);
    assert_eq!(stderr(Some("")), warning, "empty is unset");
    assert_eq!(stderr(Some("error")), "");
    assert_eq!(stderr(Some("warn,gpu_labeler=off")), "");
    assert_eq!(stderr(Some("warn,gpu_labeler::discover=off")), warning);
    assert_eq!(
        stderr(Some("debug")),
        format!("debug: /nonexistent/modules: does not exist\n{warning}")
    );
    // Not a filter (a span filter of RUST_LOG's, a typo): the default, and a warning saying so.
    assert_eq!(
        stderr(Some("[span{x=1}]=debug")),
        format!(
            "warning: GPU_LABELER_LOG=\"[span{{x=1}}]=debug\" is not a log filter (a level, or target=level, comma-separated); the default is used\n{warning}"
        )
    );
}

#[test]
fn an_interval_under_a_second_is_refused_by_flag_and_by_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "config.yaml", "publish:\n  interval: 10ms\n");
    let base = [
        "run",
        "--sink",
        "stdout",
        "--sysfs-root",
        "tests/fixtures/sysfs/no-pci-devices",
        "--proc-root",
        "/nonexistent",
        "--no-nvml",
    ];
    let by_flag = run(base.iter().copied().chain(["--interval", "500ms"]));
    // A bad flag value is a usage error, as every flag's (exit 2); a bad config value is
    // invalid input (exit 1), with its file:line:column.
    assert_eq!(
        (by_flag.code, by_flag.stderr.as_str()),
        (
            2,
            "error: invalid value '500ms' for '--interval <INTERVAL>': invalid interval \"500ms\": at least 1s (how often the node is scanned)\n\nFor more information, try '--help'.\n"
        )
    );
    let garbage = run(base.iter().copied().chain(["--interval", "abc"]));
    assert_eq!(
        (garbage.code, garbage.stderr.as_str()),
        (
            2,
            "error: invalid value 'abc' for '--interval <INTERVAL>': invalid duration \"abc\": expected e.g. 60s, 5m, 1h\n\nFor more information, try '--help'.\n"
        )
    );
    let by_config = run(base
        .iter()
        .copied()
        .chain(["--config", config.to_str().unwrap()]));
    assert_eq!(
        (by_config.code, by_config.stderr),
        (
            1,
            format!(
                "error: invalid config {}:2:13: publish.interval: invalid interval \"10ms\": at least 1s (how often the node is scanned)\n",
                config.display()
            )
        )
    );
}

#[test]
fn a_missing_node_name_or_client_configuration_is_a_usage_error() {
    // No NODE_NAME, no kubeconfig anywhere, not in a cluster: how the command was invoked.
    let home = tempfile::tempdir().unwrap();
    let agent = |extra: &[&str]| {
        let out = std::process::Command::new(binary())
            .env_clear()
            .env("HOME", home.path())
            .args(["run", "--sink", "node", "--oneshot", "--no-nvml"])
            .args([
                "--sysfs-root",
                "tests/fixtures/sysfs/no-pci-devices",
                "--proc-root",
                "/nonexistent",
            ])
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(
        agent(&[]),
        (
            Some(2),
            "error: --node-name (or NODE_NAME) is required for --sink node\n".to_string()
        )
    );
    assert_eq!(
        agent(&["--node-name", "gpu-node-1"]),
        (
            Some(2),
            "error: no Kubernetes client configuration: not in a cluster (KUBERNETES_SERVICE_HOST is unset), and no --kubeconfig, $KUBECONFIG or ~/.kube/config\n".to_string()
        )
    );
    // A kubeconfig that is named but cannot be read stays invalid input.
    assert_eq!(
        agent(&["--node-name", "gpu-node-1", "--kubeconfig", "/nonexistent/kc"]),
        (
            Some(1),
            "error: cannot read kubeconfig /nonexistent/kc: failed to read kubeconfig from '\"/nonexistent/kc\"': No such file or directory (os error 2)\n".to_string()
        )
    );
}

#[test]
fn bash_completes_commands_flags_and_their_values() {
    let script = fixtures().join("complete-bash.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(binary())
        .output()
        .expect("bash");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "complete -o bashdefault -o default -o nosort -F _gpu__labeler gpu-labeler\n\
         gpu-labeler la| labels\n\
         gpu-labeler rules | -h --help check help\n\
         gpu-labeler labels -o | text json yaml features-file\n\
         gpu-labeler run --sink | node nodefeature features-file stdout\n"
    );
}

#[test]
fn the_manual_page_and_every_page_it_names() {
    let top = run(["man"]);
    assert_eq!(top.code, 0, "{}", top.stderr);
    check_golden("gpu-labeler.1", &top.stdout);
    // Every `gpu-labeler-X(1)` a page lists is there: `man X` (and `man rules check`).
    let mut pages = vec![Vec::<String>::new()];
    let mut seen = Vec::new();
    while let Some(path) = pages.pop() {
        let r = run(std::iter::once("man".to_string()).chain(path.iter().cloned()));
        assert_eq!(r.code, 0, "man {path:?}: {}", r.stderr);
        let title = std::iter::once("gpu-labeler".to_string())
            .chain(path.iter().cloned())
            .collect::<Vec<_>>()
            .join("-");
        // The title line (after two roff definitions); clap_mangen's footer is the program's
        // version on the top page, the command's name on the others.
        let footer = match path.last() {
            None => format!("gpu-labeler {}", env!("CARGO_PKG_VERSION")),
            Some(last) => format!("{last} "),
        };
        let th = format!(".TH {title} 1  \"{footer}\" ");
        assert_eq!(r.stdout.lines().nth(2), Some(th.as_str()), "man {path:?}");
        seen.push(title.clone());
        for l in r.stdout.lines() {
            if let Some(sub) = l.strip_suffix("(1)") {
                let sub = sub.replace("\\-", "-");
                let rest = sub
                    .strip_prefix(&format!("{title}-"))
                    .unwrap_or_else(|| panic!("{l} in {title}"));
                let mut p = path.clone();
                p.push(rest.to_string());
                pages.push(p);
            }
        }
    }
    seen.sort();
    // Every command's page (the hidden NVML child has none), clap's `help` ones included.
    assert_eq!(
        seen,
        [
            "gpu-labeler",
            "gpu-labeler-claims",
            "gpu-labeler-claims-check",
            "gpu-labeler-claims-help",
            "gpu-labeler-claims-help-check",
            "gpu-labeler-claims-help-help",
            "gpu-labeler-completions",
            "gpu-labeler-diff",
            "gpu-labeler-explain",
            "gpu-labeler-features",
            "gpu-labeler-help",
            "gpu-labeler-help-claims",
            "gpu-labeler-help-claims-check",
            "gpu-labeler-help-completions",
            "gpu-labeler-help-diff",
            "gpu-labeler-help-explain",
            "gpu-labeler-help-features",
            "gpu-labeler-help-help",
            "gpu-labeler-help-inventory",
            "gpu-labeler-help-labels",
            "gpu-labeler-help-man",
            "gpu-labeler-help-match",
            "gpu-labeler-help-prune",
            "gpu-labeler-help-rules",
            "gpu-labeler-help-rules-check",
            "gpu-labeler-help-run",
            "gpu-labeler-help-template",
            "gpu-labeler-help-version",
            "gpu-labeler-inventory",
            "gpu-labeler-labels",
            "gpu-labeler-man",
            "gpu-labeler-match",
            "gpu-labeler-prune",
            "gpu-labeler-rules",
            "gpu-labeler-rules-check",
            "gpu-labeler-rules-help",
            "gpu-labeler-rules-help-check",
            "gpu-labeler-rules-help-help",
            "gpu-labeler-run",
            "gpu-labeler-template",
            "gpu-labeler-version",
        ]
    );
    let missing = run(["man", "nope"]);
    assert_eq!(
        (missing.code, missing.stderr.as_str()),
        (2, "error: no command `nope` in `gpu-labeler`\n")
    );
}

// ---------------------------------------------------------------------------------------------
// A bad flag value is a usage error, whichever flag.

/// Each value-taking argument of each command, by `command path/argument id`: the invalid
/// value given to it, or `None` where no value is invalid as the flag is parsed (a path, a
/// rule's name, a value the command reads later and reports as invalid input).
const BAD_VALUES: &[(&str, Option<&str>)] = &[
    ("claims check/dra", None),
    ("claims check/files", None),
    ("claims check/kubeconfig", None),
    ("claims check/output", Some("yaml")),
    ("completions/shell", Some("tcsh")),
    ("diff/allowed_ns", Some("Not A Namespace")),
    ("diff/config", None),
    ("diff/dra", None),
    ("diff/features", None),
    ("diff/kubeconfig", None),
    ("diff/node", None),
    ("diff/node_name", Some("Node_1")),
    ("diff/nodes", None),
    ("diff/nvml_lib", None),
    ("diff/nvml_timeout", Some("soon")),
    ("diff/output", Some("yaml")),
    ("diff/pci_ids", None),
    ("diff/proc_root", None),
    ("diff/profiles", Some("gfd")),
    ("diff/rules", None),
    ("diff/selector", Some("gpu=a=b")),
    ("diff/sysfs_root", None),
    ("diff/template", None),
    ("explain/allowed_ns", Some("*.")),
    ("explain/config", None),
    ("explain/dra", None),
    ("explain/features", None),
    ("explain/label", Some("gpu memory")),
    ("explain/node_name", Some("Node_1")),
    ("explain/nvml_lib", None),
    ("explain/nvml_timeout", Some("0s")),
    ("explain/pci_ids", None),
    ("explain/proc_root", None),
    ("explain/profiles", Some("nvidia")),
    ("explain/rule", None),
    ("explain/rules", None),
    ("explain/sysfs_root", None),
    ("features/allowed_ns", Some("example.com/")),
    ("features/config", None),
    ("features/dra", None),
    ("features/features", None),
    ("features/node_name", Some("a..b")),
    ("features/nvml_lib", None),
    ("features/nvml_timeout", Some("ten")),
    ("features/output", Some("text")),
    ("features/pci_ids", None),
    ("features/proc_root", None),
    ("features/profiles", Some("")),
    ("features/sysfs_root", None),
    ("inventory/kubeconfig", None),
    ("inventory/nodes", None),
    ("inventory/output", Some("yaml")),
    ("labels/allowed_ns", Some("Feature.Node.Kubernetes.io")),
    ("labels/config", None),
    ("labels/dra", None),
    ("labels/features", None),
    ("labels/node_name", Some("-n1")),
    ("labels/nvml_lib", None),
    ("labels/nvml_timeout", Some("-1s")),
    ("labels/output", Some("xml")),
    ("labels/pci_ids", None),
    ("labels/proc_root", None),
    ("labels/profiles", Some("nvidia-gfd,amd")),
    ("labels/rules", None),
    ("labels/sysfs_root", None),
    ("man/command", Some("frobnicate")),
    ("match/dra", None),
    ("match/kubeconfig", None),
    ("match/no_default_rules", None),
    ("match/nodes", None),
    ("match/output", Some("yaml")),
    ("match/rules", None),
    ("match/workload", None),
    ("prune/kubeconfig", None),
    ("prune/node_name", Some("-node")),
    ("prune/nodefeature_namespace", Some("gpu.labeler")),
    ("prune/output", Some("yaml")),
    ("rules check/output", Some("yaml")),
    ("rules check/paths", None),
    ("run/allowed_ns", Some("amd com")),
    ("run/config", None),
    ("run/dra", None),
    ("run/features", None),
    ("run/features_file", None),
    ("run/interval", Some("1ms")),
    ("run/kubeconfig", None),
    ("run/listen", Some("8080")),
    ("run/node_name", Some("GPU-NODE")),
    ("run/nvml_lib", None),
    ("run/nvml_timeout", Some("1x")),
    ("run/pci_ids", None),
    ("run/proc_root", None),
    ("run/profiles", Some("nvidia-gfd,")),
    ("run/rules", None),
    ("run/sink", Some("file")),
    ("run/sysfs_root", None),
    ("template/allowed_ns", Some("Example.Com")),
    ("template/config", None),
    ("template/dra", None),
    ("template/features", None),
    ("template/instance_types", None),
    ("template/label_ns", Some("Not A Namespace")),
    (
        "template/node_class",
        Some("karpenter.k8s.aws/EC2NodeClass"),
    ),
    ("template/node_name", Some("Node_1")),
    ("template/nodepool", Some("GPU Pool")),
    ("template/nvml_lib", None),
    ("template/nvml_timeout", Some("later")),
    ("template/output", Some("terraform")),
    ("template/pci_ids", None),
    ("template/per_node", Some("drop")),
    ("template/proc_root", None),
    ("template/profiles", Some("gfd")),
    ("template/rules", None),
    ("template/sysfs_root", None),
];

/// The commands of `gpu-labeler`, as `(path, command)`, the hidden ones left out.
fn commands(c: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    for sub in c.get_subcommands().filter(|s| !s.is_hide_set()) {
        let p = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        if sub.has_subcommands() {
            commands(sub, &p, out);
        } else {
            out.push((p, sub.clone()));
        }
    }
}

/// Every value-taking argument of every command (and every boolean environment variable) is
/// in [`BAD_VALUES`]; each invalid value exits 2 with clap's usage error naming the flag and
/// the value, and the whole outputs are `tests/fixtures/golden/cli-bad-values.txt`.
#[test]
fn a_bad_value_of_any_flag_is_a_usage_error() {
    use clap::CommandFactory;
    let mut all = Vec::new();
    commands(&gpu_labeler::cli::Cli::command(), "", &mut all);
    let mut seen = Vec::new();
    let mut transcript = String::new();
    for (path, cmd) in &all {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            let id = arg.get_id().as_str();
            let key = format!("{path}/{id}");
            let takes_value = arg.get_action().takes_values();
            let env_bool = !takes_value && arg.get_env().is_some();
            if !takes_value && !env_bool {
                continue;
            }
            if env_bool {
                // A boolean flag takes its value from its environment variable only.
                let env = arg.get_env().unwrap().to_string_lossy().into_owned();
                let mut args: Vec<&str> = path.split(' ').collect();
                args.extend(positional_stand_ins(path, arg.get_long().unwrap_or("")));
                let r = run_env(&args, &[(env.as_str(), OsStr::new("maybe"))]);
                transcript.push_str(&format!(
                    "$ {env}=maybe gpu-labeler {}\nexit {}\n{}{}\n",
                    shell_words(&args),
                    r.code,
                    r.stdout,
                    r.stderr
                ));
                assert_eq!((r.code, r.stdout.as_str()), (2, ""), "{key} by {env}");
                if BAD_VALUES.iter().any(|(k, _)| *k == key) {
                    seen.push(key);
                }
                continue;
            }
            seen.push(key.clone());
            let Some(&(_, bad)) = BAD_VALUES.iter().find(|(k, _)| *k == key) else {
                panic!("{key}: not in BAD_VALUES (give it an invalid value, or None)");
            };
            let Some(bad) = bad else { continue };
            let mut args: Vec<String> = path.split(' ').map(str::to_string).collect();
            match arg.get_long() {
                Some(long) => {
                    // `--flag=value`, so that a value that starts with `-` is the flag's.
                    args.push(format!("--{long}={bad}"));
                    args.extend(
                        positional_stand_ins(path, long)
                            .iter()
                            .map(|s| s.to_string()),
                    );
                }
                None => args.push(bad.to_string()),
            }
            let r = run(&args);
            transcript.push_str(&format!(
                "$ gpu-labeler {}\nexit {}\n{}{}\n",
                shell_words(&args),
                r.code,
                r.stdout,
                r.stderr
            ));
            assert_eq!(
                (r.code, r.stdout.as_str(), r.stderr.starts_with("error: ")),
                (2, "", true),
                "{key}: {bad:?}: {}",
                r.stderr
            );
        }
    }
    let listed: Vec<&str> = BAD_VALUES.iter().map(|(k, _)| *k).collect();
    let mut seen_sorted: Vec<&str> = seen.iter().map(String::as_str).collect();
    seen_sorted.sort();
    seen_sorted.dedup();
    assert_eq!(
        seen_sorted, listed,
        "BAD_VALUES lists exactly the arguments"
    );
    check_golden("cli-bad-values.txt", &transcript);
}

/// `args` as a shell would take them back.
fn shell_words<S: AsRef<str>>(args: &[S]) -> String {
    args.iter()
        .map(|a| {
            let a = a.as_ref();
            if a.is_empty() || a.contains([' ', '*']) {
                format!("'{a}'")
            } else {
                a.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The positional arguments a command needs, so that the flag's error is the one reported,
/// and for `run` the flags that would make it end at once were the value accepted (less the
/// flag under test).
fn positional_stand_ins(path: &str, tested: &str) -> Vec<&'static str> {
    match path {
        "match" => vec!["pod.yaml"],
        "rules check" => vec!["rules/"],
        "completions" => vec!["bash"],
        "run" => [
            &["--oneshot"][..],
            &["--sink", "stdout"],
            &["--listen", ""],
            &["--sysfs-root", "tests/fixtures/sysfs/this-vm"],
        ]
        .into_iter()
        .filter(|a| a[0] != format!("--{tested}"))
        .flatten()
        .copied()
        .collect(),
        _ => vec![],
    }
}

/// docs/cli.md's list of boolean environment values is what the binary takes: each true value
/// turns `GPU_LABELER_NO_DEFAULT_RULES` on (any case), each false value leaves it off (#49: `y`, `t`, `n` and `f` were accepted and not documented).
#[test]
fn the_documented_boolean_environment_values_are_the_accepted_ones() {
    let doc = std::fs::read_to_string(common::repo().join("docs/cli.md")).unwrap();
    let start = doc.find("Boolean environment variables").unwrap();
    let sentence = doc[start..start + doc[start..].find("(exit 2)").unwrap()].replace('\n', " ");
    let pairs: Vec<(String, String)> = sentence
        .split("take ")
        .nth(1)
        .unwrap()
        .split(", ")
        .filter_map(|p| {
            let p = p.trim().trim_start_matches("and ").trim();
            let (t, f) = p.split_once('/')?;
            let clean = |s: &str| {
                s.trim_matches(|c: char| c == '`' || c.is_whitespace())
                    .to_string()
            };
            Some((clean(t), clean(f.split(' ').next()?)))
        })
        .collect();
    let pairs_words: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(t, f)| (t.as_str(), f.as_str()))
        .collect();
    assert_eq!(
        pairs_words,
        [
            ("1", "0"),
            ("y", "n"),
            ("yes", "no"),
            ("t", "f"),
            ("on", "off"),
            ("true", "false")
        ]
    );
    // Every boolean variable is read by the same parser: `GPU_LABELER_NO_DEFAULT_RULES` shows it,
    // the built-in rules' labels there or not.
    let status = |value: &str| {
        let dell = common::fixtures().join("sysfs/dell-xe9680-8xh100");
        let r = run_env(
            [
                "labels",
                "--no-nvml",
                "--sysfs-root",
                dell.to_str().unwrap(),
            ],
            &[("GPU_LABELER_NO_DEFAULT_RULES", OsStr::new(value))],
        );
        assert_eq!(r.code, 0, "{value}: {}", r.stderr);
        r.stdout.lines().count()
    };
    let off = status("true");
    let on = status("false");
    assert_ne!(off, on);
    for (t, f) in &pairs {
        for v in [t.clone(), t.to_uppercase(), f.clone(), f.to_uppercase()] {
            let want = if v.eq_ignore_ascii_case(t) { &off } else { &on };
            assert_eq!(&status(&v), want, "GPU_LABELER_NO_NVML={v}");
        }
    }
}

/// `prune --all-nodes` where `NODE_NAME` is exported (a pod's environment, a shell's) goes on
/// (here to the kubeconfig it cannot read); the flag `--node-name` with it is a usage error
/// (#49: the exported variable was refused as if `--node-name` had been passed).
#[test]
fn an_exported_node_name_does_not_stop_prune_all_nodes() {
    let r = run_env(
        [
            "prune",
            "--all-nodes",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ],
        &[("NODE_NAME", OsStr::new("n1"))],
    );
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            1,
            "",
            "error: cannot read kubeconfig /nonexistent/kubeconfig: failed to read kubeconfig from '\"/nonexistent/kubeconfig\"': No such file or directory (os error 2)\n"
        )
    );
    let r = run(["prune", "--all-nodes", "--node-name", "n1"]);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (
            2,
            "",
            "error: the argument '--node-name <NODE_NAME>' cannot be used with '--all-nodes'\n"
        )
    );
}
