//! Replays the fuzz corpora on stable Rust, without cargo-fuzz: for every target in `fuzz/`,
//! the function its `fuzz_target!` calls (`gpu_labeler::fuzzing::<target>`) runs over every seed
//! in `fuzz/corpus/<target>/` and every input a fuzzer found a bug with, kept in
//! `fuzz/regressions/<target>/`. Those functions assert the targets' properties (errors name
//! their file, round trips, valid labels), so a reintroduced bug fails here, naming the file.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

type Target = fn(&[u8]);

const TARGETS: &[(&str, Target)] = &[
    ("rules", gpu_labeler::fuzzing::rules),
    ("snapshot", gpu_labeler::fuzzing::snapshot),
    ("sysfs_attr", gpu_labeler::fuzzing::sysfs_attr),
    ("pci_config", gpu_labeler::fuzzing::pci_config),
    ("kfd_properties", gpu_labeler::fuzzing::kfd_properties),
    ("sharing_config", gpu_labeler::fuzzing::sharing_config),
    ("config", gpu_labeler::fuzzing::config),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files of a directory, sorted; none when it does not exist.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `target` over every file, returning `path: panic message` for each that fails.
fn replay(target: Target, inputs: &[PathBuf]) -> Vec<String> {
    let mut failures = Vec::new();
    for path in inputs {
        let data = std::fs::read(path).unwrap();
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(&data))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("{}: {message}", path.display()));
        }
    }
    failures
}

fn check_target(name: &str) {
    let (_, target) = TARGETS.iter().find(|(n, _)| *n == name).unwrap();
    let seeds = files(&fuzz_dir().join("corpus").join(name));
    // A missing corpus would make this test pass without replaying anything.
    assert!(
        seeds.len() >= 3,
        "fuzz/corpus/{name}/ has {} seeds",
        seeds.len()
    );
    let regressions = files(&fuzz_dir().join("regressions").join(name));
    let all: Vec<PathBuf> = seeds.into_iter().chain(regressions).collect();
    let failures = replay(*target, &all);
    assert!(
        failures.is_empty(),
        "{} of {} inputs fail the {name} target:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn rules_corpus() {
    check_target("rules");
}

#[test]
fn snapshot_corpus() {
    check_target("snapshot");
}

#[test]
fn sysfs_attr_corpus() {
    check_target("sysfs_attr");
}

#[test]
fn pci_config_corpus() {
    check_target("pci_config");
}

#[test]
fn kfd_properties_corpus() {
    check_target("kfd_properties");
}

#[test]
fn sharing_config_corpus() {
    check_target("sharing_config");
}

#[test]
fn config_corpus() {
    check_target("config");
}

/// Every target has a fuzz_targets file, and every fuzz_targets file a test above.
#[test]
fn every_fuzz_target_is_replayed() {
    let mut on_disk: Vec<String> = files(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .collect();
    on_disk.sort();
    let mut here: Vec<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    here.sort();
    assert_eq!(on_disk, here);
}

/// The replay catches what the targets assert: a panic in a target is reported with its file.
#[test]
fn a_failing_input_is_reported_with_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad");
    std::fs::write(&p, b"x").unwrap();
    let failures = replay(|_| panic!("boom"), std::slice::from_ref(&p));
    assert_eq!(failures, vec![format!("{}: boom", p.display())]);
}
