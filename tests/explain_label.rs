//! `gpu-labeler explain --label KEY`: "why is this label missing?" answered from every part that
//! makes labels, on real captures, compared whole against the outputs in
//! tests/fixtures/explain (see its PROVENANCE.md): a label present and the rule that gave it; a
//! gpu.node value absent because the GPUs disagree (mixed TITAN V + RTX 5880) or because the
//! memory is unknown without NVML; a built-in PCI label absent under the current
//! deviceLabelFields, with the setting that gives it; a profile label with the profile off and
//! with it on but no NVML; a key nothing writes (a typo, with the closest key); a label refused
//! by validation, with its rule.

mod common;

use common::repo;

const DELL: [&str; 7] = [
    "--sysfs-root",
    "tests/fixtures/sysfs/dell-xe9680-8xh100",
    "--proc-root",
    "tests/fixtures/proc/dell-xe9680-8xh100",
    "--pci-ids",
    "tests/fixtures/pci.ids",
    "--no-nvml",
];

fn explain(args: &[&str], env: &[(&str, String)]) -> (i32, String) {
    let r = common::run_env(["explain"].iter().chain(args), env);
    (r.code, r.stdout)
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(repo().join("tests/fixtures/explain").join(name)).unwrap()
}

#[test]
fn explain_label_on_the_h100_node_without_nvml() {
    let cases: [(&[&str], &str); 7] = [
        (&["--label", "gpu.product"], "h100-gpu.product.txt"),
        (&["--label", "gpu.memory"], "h100-no-nvml-gpu.memory.txt"),
        (
            &["--label", "pci-10de.present"],
            "h100-pci-10de.present.txt",
        ),
        (
            &["--label", "nvidia.com/gpu.product"],
            "h100-profile-off.txt",
        ),
        (
            &[
                "--label",
                "nvidia.com/gpu.product",
                "--config",
                "tests/fixtures/explain/gfd-config.yaml",
            ],
            "h100-profile-no-nvml.txt",
        ),
        (&["--label", "gpu.prodct"], "h100-typo.txt"),
        (
            &[
                "--label",
                "team",
                "--rules",
                "tests/fixtures/explain/site-rules.yaml",
            ],
            "h100-refused.txt",
        ),
    ];
    for (extra, file) in cases {
        let args: Vec<&str> = DELL.iter().copied().chain(extra.iter().copied()).collect();
        assert_eq!(explain(&args, &[]), (0, expected(file)), "{file}");
    }
}

#[test]
fn explain_label_on_a_mixed_node_says_the_gpus_disagree() {
    let env = [(
        "FAKE_NVML_FIXTURE",
        repo()
            .join("tests/fixtures/nvml/workstation-titanv-rtx5880.json")
            .display()
            .to_string(),
    )];
    let discovery = common::discovery_args_with_fake_nvml(
        &common::sysfs_fixture("no-pci-devices"),
        std::path::Path::new("/nonexistent"),
    );
    let discovery: Vec<String> = discovery
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect();
    let args: Vec<&str> = ["--label", "gpu.product"]
        .into_iter()
        .chain(discovery.iter().map(String::as_str))
        .collect();
    assert_eq!(explain(&args, &env), (0, expected("mixed-gpu.product.txt")));
}

#[test]
fn explain_takes_a_label_or_a_rule_not_both() {
    let args: Vec<&str> = DELL
        .iter()
        .copied()
        .chain(["--label", "gpu.product", "--rule", "x"])
        .collect();
    let (code, stdout) = explain(&args, &[]);
    assert_eq!((code, stdout.as_str()), (2, ""));
}

/// `explain` without `--rule` ends with what no rule gives: NFD's built-in PCI labels with the
/// settings that shape them, and the profile's labels, or that it is off.
#[test]
fn explain_ends_with_the_built_in_labels_and_the_profile() {
    let section = |out: &str| -> String {
        let at = out
            .find("\nBuilt-in labels:\n")
            .expect("the built-in section");
        out[at + 1..].to_string()
    };
    let (code, out) = explain(&DELL, &[]);
    assert_eq!(
        (code, section(&out)),
        (0, expected("h100-no-nvml-builtin.txt"))
    );
    let lib = common::fake_nvml_lib("nvidia_ml").display().to_string();
    let args: Vec<&str> = DELL
        .iter()
        .copied()
        .filter(|a| *a != "--no-nvml")
        .chain([
            "--nvml-lib",
            &lib,
            "--config",
            "tests/fixtures/explain/gfd-config.yaml",
        ])
        .collect();
    let env = [(
        "FAKE_NVML_FIXTURE",
        common::nvml_fixture("h100-8x").display().to_string(),
    )];
    let (code, out) = explain(&args, &env);
    assert_eq!((code, section(&out)), (0, expected("h100-gfd-builtin.txt")));
}
