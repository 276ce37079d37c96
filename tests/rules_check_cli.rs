//! `gpu-labeler rules check` and `explain` as an operator who made typos meets them: every problem
//! in one run, each naming file:line:column and the rule, exit 1 on any error.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
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
        (0, "1 file(s) checked: 0 error(s), 0 warning(s)\n")
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
