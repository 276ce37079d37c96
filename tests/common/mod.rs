//! Helpers shared by the integration tests (and by `benches/discovery.rs`, which includes this
//! file with `#[path]`): running the real binary, the fixture trees, golden files, and sysfs trees
//! built in temporary directories.
//!
//! Every test crate uses a different part of this module.
#![allow(dead_code)]

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The PCI addresses of the Dell XE9680's eight H100s, in bus order.
pub const DELL_GPUS: [&str; 8] = [
    "0000:19:00.0",
    "0000:3b:00.0",
    "0000:4c:00.0",
    "0000:5d:00.0",
    "0000:9b:00.0",
    "0000:bb:00.0",
    "0000:cb:00.0",
    "0000:db:00.0",
];

/// The PCI addresses of the Azure 8x A100 VM's GPUs, a PCI domain each.
pub const AZURE_GPUS: [&str; 8] = [
    "0001:00:00.0",
    "0002:00:00.0",
    "0003:00:00.0",
    "0004:00:00.0",
    "000b:00:00.0",
    "000c:00:00.0",
    "000d:00:00.0",
    "000e:00:00.0",
];

/// The cells of a Markdown table row, each trimmed.
pub fn table_cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// `(a, b)` of each element of the JSON array `items`, `a` and `b` JSON pointers into the element
/// (`/attributes/address`); each must be a string.
pub fn string_pairs<'v>(items: &'v serde_json::Value, a: &str, b: &str) -> Vec<(&'v str, &'v str)> {
    let at = |e: &'v serde_json::Value, p: &str| {
        e.pointer(p)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_else(|| panic!("no string at {p} in {e}"))
    };
    let items = items
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {items}"));
    items.iter().map(|e| (at(e, a), at(e, b))).collect()
}

/// The fixture machines of `tests/fixtures/sysfs/` (see its PROVENANCE.md).
pub const MACHINES: [&str; 6] = [
    "nfd-rootfs-1",
    "this-vm",
    "dell-xe9680-8xh100",
    "azure-nd-a100-v4",
    "hwloc-5digit-domain",
    "ttar-gpu-sriov",
];

/// The NFD label prefix.
pub const PREFIX: &str = "feature.node.kubernetes.io/";

/// The repository's files, relative to its root: `git ls-files` where this is a git checkout,
/// else every file (and link) below the root less `target/` and `.git/`.
pub fn tracked_files() -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(repo())
        .output();
    if let Ok(out) = out
        && out.status.success()
        && !out.stdout.is_empty()
    {
        return out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
    }
    fn walk(root: &Path, dir: &Path, files: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == "target" || rel == ".git" {
                continue;
            }
            if path.is_symlink() || path.is_file() {
                files.push(rel);
            } else if path.is_dir() {
                walk(root, &path, files);
            }
        }
    }
    let mut files = Vec::new();
    walk(&repo(), &repo(), &mut files);
    files
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixtures() -> PathBuf {
    repo().join("tests/fixtures")
}

/// `tests/fixtures/sysfs/<machine>`: a sysfs root.
pub fn sysfs_fixture(machine: &str) -> PathBuf {
    fixtures().join("sysfs").join(machine)
}

/// Every machine of tests/fixtures/sysfs/, by name, sorted.
pub fn sysfs_machines() -> Vec<String> {
    let mut machines: Vec<String> = std::fs::read_dir(fixtures().join("sysfs"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    machines.sort();
    machines
}

/// `tests/fixtures/proc/<machine>` when the capture gave one, else a path that does not exist
/// (a kernel without `/proc/modules`: nothing to report).
pub fn proc_fixture(machine: &str) -> PathBuf {
    let p = fixtures().join("proc").join(machine);
    if p.exists() {
        p
    } else {
        fixtures().join("proc").join(format!("{machine}.absent"))
    }
}

/// The pinned PCI ID database subset (tests/fixtures/PCI_IDS_PROVENANCE.md).
pub fn pci_ids() -> PathBuf {
    fixtures().join("pci.ids")
}

pub fn golden_dir() -> PathBuf {
    fixtures().join("golden")
}

/// The binary under test.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gpu-labeler"))
}

/// Peak RSS in KiB of `program args`, the largest of three runs under GNU time (a small process,
/// so the high-water mark it passes on at `exec` is below the program's); `None` without
/// /usr/bin/time or when a run fails. For the benches.
pub fn peak_rss_kib<S: AsRef<OsStr>>(program: &Path, args: &[S]) -> Option<u64> {
    let time = Path::new("/usr/bin/time");
    if !time.exists() {
        return None;
    }
    let out = tempfile::NamedTempFile::new().expect("temp file");
    let mut peak = None;
    for _ in 0..3 {
        let status = Command::new(time)
            .args(["-f", "%M", "-o"])
            .arg(out.path())
            .arg(program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("/usr/bin/time");
        let text = std::fs::read_to_string(out.path()).unwrap_or_default();
        let kib = text
            .lines()
            .last()
            .and_then(|l| l.trim().parse::<u64>().ok());
        if !status.success() || kib.is_none() {
            return None;
        }
        peak = peak.max(kib);
    }
    peak
}

/// What one run of the binary gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The log lines on stderr as `(level, message)`; lines that are not log lines (clap's usage
    /// text, `error: ...`) are kept whole with an empty level.
    pub fn log(&self) -> Vec<(String, String)> {
        parse_log(&self.stderr)
    }

    /// `(exit code, stdout, stderr)`.
    pub fn parts(self) -> (i32, String, String) {
        (self.code, self.stdout, self.stderr)
    }

    /// Asserts exit 0 and returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "exit code; stderr:\n{}", self.stderr);
        &self.stdout
    }
}

/// Splits the printing commands' log lines (`warning: message`) into level (`WARN`, `ERROR`,
/// ...) and message; other lines are kept whole with an empty level.
pub fn parse_log(stderr: &str) -> Vec<(String, String)> {
    stderr
        .lines()
        .map(|l| {
            let level = |prefix: &str| l.strip_prefix(prefix);
            let parsed = [
                ("ERROR", "error: "),
                ("WARN", "warning: "),
                ("INFO", "info: "),
                ("DEBUG", "debug: "),
                ("TRACE", "trace: "),
            ]
            .iter()
            .find_map(|(name, prefix)| level(prefix).map(|m| (name.to_string(), m.to_string())));
            parsed.unwrap_or_else(|| (String::new(), l.to_string()))
        })
        .collect()
}

/// Runs `gpu-labeler ARGS` in the repository root with `env` added to an environment cleared of
/// every `GPU_LABELER_*` variable, `NODE_NAME` and `KUBECONFIG` (so the caller's shell cannot
/// change the result). A panic is a failure whatever the test checks next.
pub fn run_env<A, S, K, V>(args: A, env: &[(K, V)]) -> Run
where
    A: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let mut cmd = Command::new(binary());
    cmd.current_dir(repo());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GPU_LABELER_") || k == "NODE_NAME" || k == "KUBECONFIG"
        {
            cmd.env_remove(k);
        }
    }
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run gpu-labeler");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        !run.stderr.contains("panicked"),
        "gpu-labeler panicked:\n{}",
        run.stderr
    );
    run
}

pub fn run<A, S>(args: A) -> Run
where
    A: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_env::<_, _, &str, &str>(args, &[])
}

/// `--sysfs-root ROOT --proc-root PROC --pci-ids tests/fixtures/pci.ids --no-nvml`.
pub fn discovery_args(sysfs_root: &Path, proc_root: &Path) -> Vec<OsString> {
    vec![
        "--sysfs-root".into(),
        sysfs_root.into(),
        "--proc-root".into(),
        proc_root.into(),
        "--pci-ids".into(),
        pci_ids().into(),
        "--no-nvml".into(),
    ]
}

/// [`discovery_args`] as strings, for argument lists of `&str`.
pub fn discovery_arg_strings(sysfs_root: &Path, proc_root: &Path) -> Vec<String> {
    discovery_args(sysfs_root, proc_root)
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect()
}

/// [`discovery_args`] with the fake NVML library (`--nvml-lib`) in place of `--no-nvml`.
pub fn discovery_args_with_fake_nvml(sysfs_root: &Path, proc_root: &Path) -> Vec<OsString> {
    let mut args = discovery_args(sysfs_root, proc_root);
    args.retain(|a| a != "--no-nvml");
    args.extend(["--nvml-lib".into(), fake_nvml_lib("nvidia_ml").into()]);
    args
}

/// `COMMAND [-o FORMAT] <discovery args of a fixture machine> [extra]`.
pub fn fixture_args(command: &[&str], machine: &str, extra: &[&str]) -> Vec<OsString> {
    let mut a: Vec<OsString> = command.iter().map(OsString::from).collect();
    a.extend(discovery_args(
        &sysfs_fixture(machine),
        &proc_fixture(machine),
    ));
    a.extend(extra.iter().map(OsString::from));
    a
}

/// `labels -o json --no-default-rules` of a sysfs tree: the whole `{"labels": ...}` object.
pub fn labels_json(sysfs_root: &Path, proc_root: &Path) -> (serde_json::Value, Run) {
    let mut a: Vec<OsString> = vec!["labels".into(), "-o".into(), "json".into()];
    a.extend(discovery_args(sysfs_root, proc_root));
    a.push("--no-default-rules".into());
    let r = run(a);
    let v = serde_json::from_str(r.ok()).expect("labels -o json is JSON");
    (v, r)
}

/// `features -o json` of a sysfs tree.
pub fn features_json(sysfs_root: &Path, proc_root: &Path) -> (serde_json::Value, Run) {
    let mut a: Vec<OsString> = vec!["features".into(), "-o".into(), "json".into()];
    a.extend(discovery_args(sysfs_root, proc_root));
    let r = run(a);
    let v = serde_json::from_str(r.ok()).expect("features -o json is JSON");
    (v, r)
}

/// A `{"labels": {k: "true", ...}}` object from label keys.
pub fn label_object<S: AsRef<str>>(keys: &[S]) -> serde_json::Value {
    let labels: serde_json::Map<String, serde_json::Value> = keys
        .iter()
        .map(|k| (k.as_ref().to_string(), serde_json::Value::from("true")))
        .collect();
    serde_json::json!({ "labels": labels })
}

/// Compares `actual` with a golden file byte for byte; with `UPDATE_GOLDEN=1` rewrites it.
pub fn check_golden(name: &str, actual: &str) {
    check_golden_in(&golden_dir(), name, actual);
}

/// [`check_golden`] in the golden directory `dir`.
pub fn check_golden_in(dir: &Path, name: &str, actual: &str) {
    let path = dir.join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    assert_eq!(
        actual,
        expected,
        "output differs from {} (UPDATE_GOLDEN=1 rewrites it after review)",
        path.display()
    );
}

/// A seeded source of chance for generated test cases: `next` is the generator, the draws are
/// made from it the same way for all.
pub trait Draw {
    fn next(&mut self) -> u64;

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// A table written as `(name, value)` rows, collected with the names owned (into a `Vec` or a
/// map).
pub fn owned_names<'a, V, C: FromIterator<(String, V)>>(
    rows: impl IntoIterator<Item = (&'a str, V)>,
) -> C {
    rows.into_iter().map(|(n, v)| (n.to_string(), v)).collect()
}

/// A Node's taint as the API writes it: an empty value is left out.
pub fn taint(key: &str, value: &str, effect: &str) -> serde_json::Value {
    let mut t = serde_json::json!({"key": key, "effect": effect});
    if !value.is_empty() {
        t["value"] = serde_json::json!(value);
    }
    t
}

/// SplitMix64's step: the seeded tests' one source of chance, small and the same on every
/// platform, so that a seed replays a run.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `dir/name`, written with `text`.
pub fn write_in(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

/// A file `name` holding `text` in a new temporary directory (removed when the returned
/// directory is dropped).
pub fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// The lines of a file, without the trailing newline.
pub fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Trees in temporary directories.

/// Copies a directory tree, recreating symlinks with their (relative) targets unchanged.
pub fn copy_tree(src: &Path, dst: &Path) {
    copy_tree_mapped(src, dst, &|s| s.to_string());
}

/// As `copy_tree`, passing every path component and symlink target through `map`.
pub fn copy_tree_mapped(src: &Path, dst: &Path, map: &dyn Fn(&str) -> String) {
    std::fs::create_dir_all(dst).unwrap();
    let mut entries: Vec<_> = std::fs::read_dir(src)
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()))
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let to = dst.join(map(&name.to_string_lossy()));
        let ft = e.file_type().unwrap();
        if ft.is_symlink() {
            let target = std::fs::read_link(e.path()).unwrap();
            let _ = std::fs::remove_file(&to);
            std::os::unix::fs::symlink(map(&target.to_string_lossy()), &to).unwrap();
        } else if ft.is_dir() {
            copy_tree_mapped(&e.path(), &to, map);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// A writable copy of a fixture sysfs tree, to break on purpose.
pub struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    pub fn copy_of(machine: &str) -> Tree {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&sysfs_fixture(machine), dir.path());
        Tree { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `<root>/bus/pci/devices/<bdf>`: the path gpu-labeler names in its messages.
    pub fn entry(&self, bdf: &str) -> PathBuf {
        self.root().join("bus/pci/devices").join(bdf)
    }

    /// The device directory the `bus/pci/devices` link points at.
    pub fn device_dir(&self, bdf: &str) -> PathBuf {
        std::fs::canonicalize(self.entry(bdf)).unwrap()
    }

    /// Writes an attribute file of a device (through the link, as a kernel would show it).
    pub fn write_attr(&self, bdf: &str, attr: &str, bytes: &[u8]) -> PathBuf {
        let p = self.entry(bdf).join(attr);
        std::fs::write(&p, bytes).unwrap();
        p
    }
}

// ---------------------------------------------------------------------------------------------
// A large generated tree (the benchmark; a test checks the generator).

/// PCI functions per copy of the Dell tree.
pub const DELL_FUNCTIONS: usize = 517;

/// Builds in `dst` a sysfs root with `copies` copies of the Dell 8x H100 tree, copy `k` in PCI
/// domain `k` (`0000`, `0001`, ...), kernel layout kept (`bus/pci/devices` links into the nested
/// `devices/pci<domain>:<bus>/...` directories, `driver` links, back-links). Each function also
/// gets a 256-byte `config` (the kernel always has one and `lspci` reads it), made from its
/// attributes, and `numa_node` varies with the copy. Returns the number of functions.
pub fn generate_large_tree(dst: &Path, copies: u32) -> usize {
    let src = sysfs_fixture("dell-xe9680-8xh100");
    for k in 0..copies {
        let domain = format!("{k:04x}:");
        // The Dell tree uses domain 0000 only: `0000:` appears in BDFs and `pci0000:` roots.
        copy_tree_mapped(&src, dst, &|s: &str| s.replace("0000:", &domain));
    }
    let devices = dst.join("bus/pci/devices");
    let mut n = 0;
    for e in std::fs::read_dir(&devices).unwrap() {
        let dir = std::fs::canonicalize(e.unwrap().path()).unwrap();
        let domain = u32::from_str_radix(
            dir.file_name()
                .unwrap()
                .to_string_lossy()
                .split(':')
                .next()
                .unwrap(),
            16,
        )
        .unwrap();
        if let Ok(numa) = std::fs::read_to_string(dir.join("numa_node")) {
            let numa: i64 = numa.trim().parse().unwrap();
            let numa = if numa < 0 {
                numa
            } else {
                numa + 2 * domain as i64
            };
            std::fs::write(dir.join("numa_node"), format!("{numa}\n")).unwrap();
        }
        std::fs::write(dir.join("config"), config_space(&dir)).unwrap();
        n += 1;
    }
    n
}

/// A 256-byte configuration space header from a function's sysfs attributes.
fn config_space(dir: &Path) -> Vec<u8> {
    let hex = |attr: &str| -> u32 {
        std::fs::read_to_string(dir.join(attr))
            .ok()
            .and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
            .unwrap_or(0)
    };
    let mut c = vec![0u8; 256];
    c[0..2].copy_from_slice(&(hex("vendor") as u16).to_le_bytes());
    c[2..4].copy_from_slice(&(hex("device") as u16).to_le_bytes());
    c[4..6].copy_from_slice(&0x0406u16.to_le_bytes()); // memory + bus master, INTx disabled
    let class = hex("class");
    c[8] = hex("revision") as u8;
    c[9] = class as u8;
    c[10] = (class >> 8) as u8;
    c[11] = (class >> 16) as u8;
    if class >> 8 == 0x0604 {
        c[0x0e] = 0x01; // PCI-to-PCI bridge header
        // Primary bus: the bridge's own bus, from its address `dddd:bb:dd.f`.
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        c[0x18] = name
            .split(':')
            .nth(1)
            .and_then(|b| u8::from_str_radix(b, 16).ok())
            .unwrap_or(0);
        c[0x19] = dec(dir, "secondary_bus_number");
        c[0x1a] = dec(dir, "subordinate_bus_number");
    } else {
        c[0x2c..0x2e].copy_from_slice(&(hex("subsystem_vendor") as u16).to_le_bytes());
        c[0x2e..0x30].copy_from_slice(&(hex("subsystem_device") as u16).to_le_bytes());
    }
    c
}

fn dec(dir: &Path, attr: &str) -> u8 {
    std::fs::read_to_string(dir.join(attr))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Whole-value JSON comparison with a readable failure.

/// The paths where two JSON values differ (`a.b[3].c: left != right`), at most `limit`.
pub fn json_differences(left: &serde_json::Value, right: &serde_json::Value) -> Vec<String> {
    fn walk(path: &str, l: &serde_json::Value, r: &serde_json::Value, out: &mut Vec<String>) {
        use serde_json::Value;
        match (l, r) {
            (Value::Object(a), Value::Object(b)) => {
                let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for k in keys {
                    let p = format!("{path}.{k}");
                    match (a.get(k), b.get(k)) {
                        (Some(x), Some(y)) => walk(&p, x, y, out),
                        (x, y) => out.push(format!("{p}: {x:?} != {y:?}")),
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for i in 0..a.len().max(b.len()) {
                    let p = format!("{path}[{i}]");
                    match (a.get(i), b.get(i)) {
                        (Some(x), Some(y)) => walk(&p, x, y, out),
                        (x, y) => out.push(format!("{p}: {x:?} != {y:?}")),
                    }
                }
            }
            _ if l != r => out.push(format!("{path}: {l} != {r}")),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", left, right, &mut out);
    out
}

/// `assert_eq!` on whole JSON values, listing only the differing paths on failure.
#[track_caller]
pub fn assert_json_eq(actual: &serde_json::Value, expected: &serde_json::Value, what: &str) {
    if actual != expected {
        let d = json_differences(actual, expected);
        panic!(
            "{what}: {} difference(s) (actual != expected):\n{}",
            d.len(),
            d.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
        );
    }
}

/// The fake `libnvidia-ml` (`nvidia_ml`) or its legacy twin (`nvidia_ml_legacy`) that
/// `cargo test --workspace` builds; target/debug/deps is refreshed by every test build.
pub fn fake_nvml_lib(name: &str) -> PathBuf {
    let bin = binary();
    let bin_dir = bin.parent().expect("target dir");
    for dir in [bin_dir.join("deps"), bin_dir.to_path_buf()] {
        let p = dir.join(format!("lib{name}.so"));
        if p.exists() {
            return p;
        }
    }
    panic!(
        "lib{name}.so not built: run the tests with `cargo test --workspace` (it builds fake-nvml)"
    )
}

/// `tests/fixtures/nvml/<name>.json`, a fixture of the fake NVML.
pub fn nvml_fixture(name: &str) -> PathBuf {
    fixtures().join("nvml").join(format!("{name}.json"))
}

/// The NVML fixture `name` as JSON, for a test to edit (see [`write_nvml_fixture`]).
pub fn nvml_fixture_json(name: &str) -> serde_json::Value {
    let path = nvml_fixture(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A copy of the NVML fixture `name` changed by `edit`, written to `dir/file`: its path.
pub fn edited_nvml_fixture(
    dir: &Path,
    file: &str,
    name: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> PathBuf {
    let mut v = nvml_fixture_json(name);
    edit(&mut v);
    let path = dir.join(file);
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

/// Writes a sysfs tree (kernel layout) with one NVIDIA 3D controller per `(address, device id)`,
/// driven by `nvidia`, for NVML fixtures whose machine has no captured tree.
pub fn nvidia_sysfs(dir: &Path, gpus: &[(&str, &str)]) {
    nvidia_sysfs_as(dir, gpus, Detail::Kernel);
}

/// How much of a device [`nvidia_sysfs_as`] writes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// What the kernel shows: NFD's identity attributes, revision, NUMA node, the bound driver.
    Kernel,
    /// NFD's five identity attributes only (class, vendor, device, subsystem ids).
    Identity,
}

/// [`nvidia_sysfs`] with the attributes `detail` names.
pub fn nvidia_sysfs_as(dir: &Path, gpus: &[(&str, &str)], detail: Detail) {
    // A sysfs root, GPUs or none.
    std::fs::create_dir_all(dir.join("bus/pci/devices")).unwrap();
    for (addr, device) in gpus {
        let bus = &addr[..7];
        let dev = dir.join(format!("devices/pci{bus}/{addr}"));
        std::fs::create_dir_all(&dev).unwrap();
        let mut attrs = vec![
            ("class", "0x030200"),
            ("vendor", "0x10de"),
            ("device", *device),
            ("subsystem_vendor", "0x10de"),
            ("subsystem_device", "0x1234"),
        ];
        if detail == Detail::Kernel {
            attrs.extend([("revision", "0xa1"), ("numa_node", "-1")]);
            std::fs::create_dir_all(dir.join("bus/pci/drivers/nvidia")).unwrap();
            std::os::unix::fs::symlink("../../../../bus/pci/drivers/nvidia", dev.join("driver"))
                .unwrap();
        }
        for (k, v) in attrs {
            std::fs::write(dev.join(k), format!("{v}\n")).unwrap();
        }
        std::fs::create_dir_all(dir.join("bus/pci/devices")).unwrap();
        std::os::unix::fs::symlink(
            format!("../../../devices/pci{bus}/{addr}"),
            dir.join("bus/pci/devices").join(addr),
        )
        .unwrap();
    }
}

/// `gpu-labeler ARGS --nvml-lib <the fake lib{lib}.so> --pci-ids <fixtures' pci.ids>`, the fake
/// answering from `fixture` (see [`run_env`]).
pub fn run_fake_nvml<S: AsRef<OsStr>>(args: &[S], lib: &str, fixture: &Path) -> Run {
    let mut a: Vec<OsString> = args.iter().map(|s| s.as_ref().to_os_string()).collect();
    a.extend([
        "--nvml-lib".into(),
        fake_nvml_lib(lib).into(),
        "--pci-ids".into(),
        pci_ids().into(),
    ]);
    run_env(a, &[("FAKE_NVML_FIXTURE", fixture)])
}

/// A label map from `(key, value)` pairs; keys without a `/` get the NFD prefix.
pub fn label_map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| {
            let key = if k.contains('/') {
                k.to_string()
            } else {
                format!("{PREFIX}{k}")
            };
            (key, v.to_string())
        })
        .collect()
}

/// The `labels` object of `labels -o json` output.
pub fn labels_of(json: &str) -> std::collections::BTreeMap<String, String> {
    let v: serde_json::Value = serde_json::from_str(json).expect("labels -o json is JSON");
    serde_json::from_value(v["labels"].clone()).expect("labels are strings")
}

/// The Dell 8x H100 tree's labels with the shipped rules from sysfs alone (no NVML answer):
/// NFD's PCI labels and the `gpu.*` labels the PCI ID database and sysfs give.
pub fn dell_sysfs_default_labels() -> std::collections::BTreeMap<String, String> {
    label_map(&[
        ("gpu-nvidia.count", "8"),
        ("gpu.count", "8"),
        ("gpu.count.expected", "8"),
        ("gpu.health", "ok"),
        ("gpu.healthy.count", "8"),
        ("gpu.family", "hopper"),
        ("gpu.interconnect", "nvlink"),
        ("gpu.numa.gpus.max", "4"),
        ("gpu.numa.nodes", "2"),
        ("gpu.pcie.roots", "8"),
        ("gpu.present", "true"),
        ("gpu.product", "NVIDIA-H100-80GB-HBM3"),
        ("gpu.rdma.local", "true"),
        ("gpu.vendor", "nvidia"),
        ("gpu.vgpu.present", "false"),
        ("gpu.virtual", "false"),
        ("pci-0300_102b.present", "true"),
        ("pci-0302_10de.present", "true"),
        ("pci-0302_10de.sriov.capable", "true"),
    ])
}

/// The default labels of the Dell XE9680 fixture with 8x H100 through the fake NVML
/// (`h100-8x.json`): the values of the real capture (81559 MiB, CC 9.0, driver 535.161.08,
/// CUDA 12.2) and NFD's PCI labels of the tree.
pub fn h100_default_labels() -> std::collections::BTreeMap<String, String> {
    let mut labels = dell_sysfs_default_labels();
    // What NVML adds to what sysfs tells.
    labels.extend(label_map(&[
        ("gpu.compute.major", "9"),
        ("gpu.compute.minor", "0"),
        ("gpu.cuda.major", "12"),
        ("gpu.cuda.minor", "2"),
        ("gpu.driver.major", "535"),
        ("gpu.driver.minor", "161"),
        ("gpu.driver.version", "535.161.08"),
        ("gpu.memory", "81559"),
        ("gpu.memory.max", "81559"),
        ("gpu.memory.total", "652472"),
        ("gpu.mig.capable", "true"),
        ("gpu.mig.enabled", "false"),
    ]));
    labels
}

/// The labels of a node with one NVIDIA GPU, healthy, not virtual: those every such node has,
/// and `own`.
pub fn one_nvidia_gpu(own: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    let mut labels = label_map(&[
        ("gpu-nvidia.count", "1"),
        ("gpu.count", "1"),
        ("gpu.health", "ok"),
        ("gpu.healthy.count", "1"),
        ("gpu.present", "true"),
        ("gpu.vendor", "nvidia"),
        ("gpu.vgpu.present", "false"),
        ("gpu.virtual", "false"),
    ]);
    labels.extend(label_map(own));
    labels
}

/// The labels of one Quadro P400 (`0000:43:00.0` in a [`nvidia_sysfs`] tree) through the fake
/// legacy library on `old-driver-no-mig.json`: an R418 driver without the MIG, compute
/// capability and v2 CUDA version symbols.
pub fn p400_old_driver_labels() -> std::collections::BTreeMap<String, String> {
    one_nvidia_gpu(&[
        // Only v1 of the CUDA version function: R418 reports CUDA 10.1 through it.
        ("gpu.cuda.major", "10"),
        ("gpu.cuda.minor", "1"),
        ("gpu.driver.major", "418"),
        ("gpu.driver.minor", "43"),
        ("gpu.driver.version", "418.43"),
        // NVLink state is in every driver's library: the P400 has none.
        ("gpu.interconnect", "pcie"),
        ("gpu.memory", "1998"),
        ("gpu.memory.max", "1998"),
        ("gpu.memory.total", "1998"),
        ("gpu.mig.capable", "false"),
        ("gpu.mig.enabled", "false"),
        ("gpu.pcie.roots", "1"),
        ("gpu.product", "Quadro-P400"),
        ("pci-0302_10de.present", "true"),
    ])
}

/// The labels of one A100 SXM4 40GB with MIG enabled (`0000:00:04.0` in a [`nvidia_sysfs`]
/// tree, driver 510.47.03) through the fake NVML, with its MIG devices' `mig_counts`.
pub fn a100_40gb_mig_labels(
    mig_counts: &[(&str, &str)],
) -> std::collections::BTreeMap<String, String> {
    let mut m = one_nvidia_gpu(&[
        ("gpu.compute.major", "8"),
        ("gpu.compute.minor", "0"),
        ("gpu.cuda.major", "11"),
        ("gpu.cuda.minor", "6"),
        ("gpu.driver.major", "510"),
        ("gpu.driver.minor", "47"),
        ("gpu.driver.version", "510.47.03"),
        ("gpu.family", "ampere"),
        ("gpu.interconnect", "pcie"),
        ("gpu.memory", "40960"),
        ("gpu.memory.max", "40960"),
        ("gpu.memory.total", "40960"),
        ("gpu.mig.capable", "true"),
        ("gpu.mig.enabled", "true"),
        ("gpu.pcie.roots", "1"),
        ("gpu.product", "NVIDIA-A100-SXM4-40GB"),
        ("pci-0302_10de.present", "true"),
    ]);
    m.extend(label_map(mig_counts));
    m
}

/// `explain --label gpu.health` on a degraded node, whole: the shipped rule "gpu health" (its
/// line and its term's read from rules/gpu.yaml) matching a `gpu.node` of `attributes`
/// attributes, the health's `detail` (the faults as the feature says them), and `healthy` (the
/// published `gpu.healthy.count`).
pub fn explain_degraded(attributes: usize, detail: &[&str], healthy: &str) -> String {
    let rules = std::fs::read_to_string(repo().join("rules/gpu.yaml")).unwrap();
    let line = rules
        .lines()
        .position(|l| l.contains("name: \"gpu health\""))
        .unwrap()
        + 1;
    let term = line
        + rules
            .lines()
            .skip(line)
            .position(|l| l.contains("- feature: gpu.node"))
            .unwrap()
        + 1;
    let detail: String = detail
        .iter()
        .map(|d| format!("          ({d})\n"))
        .collect();
    let p = "feature.node.kubernetes.io/";
    format!(
        "\
label {p}gpu.health=degraded: present
  the rules that name it:

NodeFeatureRule \"gpu-labeler-gpu\" (builtin:rules/gpu.yaml)
  rule \"gpu health\" (builtin:rules/gpu.yaml:{line}:7): MATCHED
    matchFeatures (all terms must match): matched
      term 1 (line {term}): feature \"gpu.node\" ({attributes} attribute(s)): matched
        gpu.node.health = \"degraded\": health Exists -> yes
{detail}        flags/attributes: all expressions hold
    label {p}gpu.health=@gpu.node.health (published as {p}gpu.health=degraded)
    label {p}gpu.healthy.count=@gpu.node.healthy_count (published as {p}gpu.healthy.count={healthy})

"
    )
}

/// The Dell 8x H100's ResourceSlice as NVIDIA's DRA driver publishes it there
/// (tests/fixtures/dra/PROVENANCE.md), for `node` (its name, `spec.nodeName` and pool).
pub fn dell_dra_slice(node: &str) -> serde_json::Value {
    let list: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("dra/dell-xe9680-8xh100.json")).unwrap(),
    )
    .unwrap();
    let mut s = list["items"][0].clone();
    s["metadata"] = serde_json::json!({"name": format!("{node}-gpu.nvidia.com")});
    s["spec"]["nodeName"] = serde_json::json!(node);
    s["spec"]["pool"]["name"] = serde_json::json!(node);
    s
}
