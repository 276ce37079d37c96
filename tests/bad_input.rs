//! Bad sysfs input: each test copies a real fixture tree into a temporary directory, breaks one
//! thing, and checks that gpu-labeler exits 0, says on stderr exactly which path is wrong and
//! why, and still discovers and labels everything else (whole feature set and label map compared
//! with the golden output of the intact tree, less what was broken). Never a panic (checked on
//! every run by `common::run_env`).

mod common;

use std::path::Path;

use common::*;
use serde_json::{Value, json};

const NFD: &str = "nfd-rootfs-1";
const DELL: &str = "dell-xe9680-8xh100";
/// nfd-rootfs-1's ASPEED BMC VGA: the function behind `pci-0300_1a03.present`.
const ASPEED: &str = "0000:02:00.0";
/// The Dell tree's first H100.
const H100: &str = "0000:19:00.0";

const NEEDS: &str = "(NFD needs class, vendor, device, subsystem_vendor, subsystem_device)";

fn golden_json(name: &str) -> Value {
    let text = std::fs::read_to_string(golden_dir().join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn golden_features(machine: &str) -> Value {
    golden_json(&format!("{machine}.features.json"))
}

fn golden_labels(machine: &str) -> Value {
    golden_json(&format!("{machine}.labels.json"))
}

fn warn(msg: String) -> (String, String) {
    ("WARN".to_string(), msg)
}

/// The warning every copy of nfd-rootfs-1 gives: its hidden PMC function has only `class`.
fn nfd_pmc_warning(tree: &Tree) -> (String, String) {
    warn(format!(
        "{}: no `vendor` attribute {NEEDS}; PCI device skipped",
        tree.entry("0000:00:1f.2").display()
    ))
}

/// Discovery of a broken tree: features, labels and the log, each checked to exit 0.
struct Outcome {
    features: Value,
    labels: Value,
    log: Vec<(String, String)>,
}

fn discover(tree: &Tree, machine: &str) -> Outcome {
    let proc = proc_fixture(machine);
    let (features, fr) = features_json(tree.root(), &proc);
    let (labels, lr) = labels_json(tree.root(), &proc);
    assert_eq!(
        fr.log(),
        lr.log(),
        "features and labels report the same problems"
    );
    Outcome {
        features,
        labels,
        log: fr.log(),
    }
}

/// `features` less the `pci.device` instance at `bdf`.
fn without_pci_device(mut features: Value, bdf: &str) -> Value {
    let list = features["instances"]["pci.device"]["elements"]
        .as_array_mut()
        .unwrap();
    let before = list.len();
    list.retain(|i| i["attributes"]["address"] != json!(bdf));
    assert_eq!(list.len(), before - 1, "{bdf} was in the golden features");
    features
}

/// The nfd-rootfs-1 labels without the ASPEED function.
fn nfd_labels_without_aspeed() -> Value {
    label_object(&[
        "feature.node.kubernetes.io/pci-0b40_8086.present",
        "feature.node.kubernetes.io/pci-0b40_8086.sriov.capable",
    ])
}

/// Checks an nfd-rootfs-1 copy whose ASPEED function is broken: skipped with `message` about
/// `path`, every other function discovered and labelled as in the intact tree.
fn assert_aspeed_skipped(tree: &Tree, path: &Path, message: &str) {
    let out = discover(tree, NFD);
    assert_eq!(
        out.log,
        vec![
            nfd_pmc_warning(tree),
            warn(format!("{}: {message}; PCI device skipped", path.display())),
        ]
    );
    assert_json_eq(
        &out.features,
        &without_pci_device(golden_features(NFD), ASPEED),
        "features",
    );
    assert_json_eq(&out.labels, &nfd_labels_without_aspeed(), "labels");
}

#[test]
fn device_missing_a_mandatory_attribute_is_skipped() {
    let tree = Tree::copy_of(NFD);
    std::fs::remove_file(tree.entry(ASPEED).join("subsystem_vendor")).unwrap();
    assert_aspeed_skipped(
        &tree,
        &tree.entry(ASPEED),
        &format!("no `subsystem_vendor` attribute {NEEDS}"),
    );
}

#[test]
fn dangling_symlink_in_bus_pci_devices_is_skipped() {
    let tree = Tree::copy_of(NFD);
    // The device went away (hot unplug) while its bus link is still listed.
    std::fs::remove_dir_all(tree.device_dir(ASPEED)).unwrap();
    assert_aspeed_skipped(
        &tree,
        &tree.entry(ASPEED),
        "dangling symlink to ../../../devices/pci0000:00/0000:02:00.0",
    );
}

#[test]
fn non_directory_entry_in_bus_pci_devices_is_skipped() {
    let tree = Tree::copy_of(NFD);
    std::fs::remove_file(tree.entry(ASPEED)).unwrap();
    std::fs::write(tree.entry(ASPEED), "not a device\n").unwrap();
    assert_aspeed_skipped(&tree, &tree.entry(ASPEED), "not a directory");
}

#[test]
fn entry_that_is_not_a_pci_address_is_skipped() {
    let tree = Tree::copy_of(NFD);
    let stray = tree.root().join("bus/pci/devices/README");
    std::fs::write(&stray, "left here by someone\n").unwrap();
    let out = discover(&tree, NFD);
    assert_eq!(
        out.log,
        vec![
            nfd_pmc_warning(&tree),
            warn(format!(
                "{}: not a PCI address (dddd:bb:dd.f); PCI device skipped",
                stray.display()
            )),
        ]
    );
    assert_json_eq(&out.features, &golden_features(NFD), "features");
    assert_json_eq(&out.labels, &golden_labels(NFD), "labels");
}

/// A mandatory attribute that cannot be read as one (empty, not hex, binary, larger than any
/// sysfs attribute) skips its device alone, named with the attribute's path and why.
#[test]
fn a_bad_mandatory_attribute_skips_the_device() {
    let huge = "0x030000\n".repeat(10_000);
    let cases: [(&str, &[u8], &str); 4] = [
        ("vendor", b"", "not a hex id: \"\""),
        ("device", b"0xzz00\n", "not a hex id: \"0xzz00\""),
        (
            "subsystem_device",
            b"\x00\x20\xff\xfe\n",
            "binary content, not a text attribute",
        ),
        (
            "class",
            huge.as_bytes(),
            "larger than 65536 bytes, not a sysfs attribute",
        ),
    ];
    for (attr, content, why) in cases {
        let tree = Tree::copy_of(NFD);
        let path = tree.write_attr(ASPEED, attr, content);
        assert_aspeed_skipped(&tree, &path, why);
    }
}

#[test]
fn mandatory_attribute_that_is_a_directory_skips_the_device() {
    let tree = Tree::copy_of(NFD);
    let path = tree.entry(ASPEED).join("class");
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("x"), "0x030000\n").unwrap();
    assert_aspeed_skipped(&tree, &path, "Is a directory (os error 21)");
}

/// The Dell features with the first H100 lacking `pci_attrs` (and the GPU instance `gpu_attrs`).
fn dell_without(pci_attrs: &[&str], gpu_attrs: &[&str]) -> Value {
    let mut f = golden_features(DELL);
    let pci = f["instances"]["pci.device"]["elements"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|i| i["attributes"]["address"] == json!(H100))
        .unwrap();
    for a in pci_attrs {
        assert!(
            pci["attributes"]
                .as_object_mut()
                .unwrap()
                .remove(*a)
                .is_some()
        );
    }
    let gpu = &mut f["instances"]["gpu.device"]["elements"][0]["attributes"];
    assert_eq!(gpu["address"], json!(H100));
    for a in gpu_attrs {
        assert!(gpu.as_object_mut().unwrap().remove(*a).is_some());
    }
    // A GPU whose NUMA node is unknown: no RDMA NIC is known to be next to it, and how the
    // GPUs spread over NUMA nodes is unknown.
    if gpu_attrs.contains(&"numa_node") {
        let node = f["attributes"]["gpu.node"]["elements"]
            .as_object_mut()
            .unwrap();
        for k in ["rdma_nic_local", "numa_nodes", "numa_gpus_max"] {
            assert!(node.remove(k).is_some(), "{k}");
        }
    }
    f
}

#[test]
fn garbage_optional_attributes_are_left_out_with_a_warning() {
    let tree = Tree::copy_of(DELL);
    let revision = tree.write_attr(H100, "revision", b"0xa1b2\n");
    let numa = tree.write_attr(H100, "numa_node", b"zero\n");
    let sriov = tree.write_attr(H100, "sriov_numvfs", b"-3\n");
    let speed = tree.write_attr(H100, "current_link_speed", b"fast GT/s PCIe\n");
    let width = tree.write_attr(H100, "max_link_width", b"x16\n");
    let out = discover(&tree, DELL);
    let left_out =
        |p: &Path, why: &str| warn(format!("{}: {why}; attribute left out", p.display()));
    assert_eq!(
        out.log,
        vec![
            left_out(&revision, "not a hex byte: \"0xa1b2\""),
            left_out(&numa, "not a number: \"zero\""),
            left_out(&sriov, "not a number: \"-3\""),
            left_out(&speed, "not a link speed: \"fast GT/s PCIe\""),
            left_out(&width, "not a number: \"x16\""),
        ]
    );
    assert_json_eq(
        &out.features,
        &dell_without(
            &[
                "revision",
                "numa_node",
                "sriov_numvfs",
                "link_speed",
                "max_link_width",
            ],
            &["numa_node"],
        ),
        "features",
    );
    assert_json_eq(&out.labels, &golden_labels(DELL), "labels");
}

#[test]
fn binary_and_very_large_optional_attributes_are_left_out_with_a_warning() {
    let tree = Tree::copy_of(DELL);
    let numa = tree.write_attr(H100, "numa_node", &vec![b'0'; 70_000]);
    let width = tree.write_attr(H100, "current_link_width", b"1\x006\n");
    let out = discover(&tree, DELL);
    assert_eq!(
        out.log,
        vec![
            warn(format!(
                "{}: larger than 65536 bytes, not a sysfs attribute; attribute left out",
                numa.display()
            )),
            warn(format!(
                "{}: binary content, not a text attribute; attribute left out",
                width.display()
            )),
        ]
    );
    assert_json_eq(
        &out.features,
        &dell_without(&["numa_node", "link_width"], &["numa_node"]),
        "features",
    );
    assert_json_eq(&out.labels, &golden_labels(DELL), "labels");
}

/// A copy of the Dell without its `bus/pci/devices` directory (returned, for the test to put
/// something in its place).
fn dell_without_devices_dir() -> (Tree, std::path::PathBuf) {
    let tree = Tree::copy_of(DELL);
    let devices = tree.root().join("bus/pci/devices");
    std::fs::remove_dir_all(&devices).unwrap();
    (tree, devices)
}

/// Discovery on `tree` found no PCI function and said `warning` only: the Dell's features
/// without PCI, no labels.
fn assert_no_pci(tree: &Tree, warning: String) {
    let out = discover(tree, DELL);
    assert_eq!(out.log, vec![warn(warning)]);
    assert_json_eq(&out.features, &dell_without_pci(), "features");
    assert_json_eq(&out.labels, &json!({"labels": {}}), "labels");
}

/// The Dell features when no PCI function could be read: kernel modules and DMI still there.
fn dell_without_pci() -> Value {
    let mut f = golden_features(DELL);
    f["instances"]["pci.device"]["elements"] = json!([]);
    f["instances"]["gpu.device"]["elements"] = json!([]);
    f["attributes"]["gpu.node"]["elements"] = json!({"count": "0", "nvml": "unavailable"});
    f
}

#[test]
fn unreadable_bus_pci_devices_gives_no_pci_devices_and_the_rest() {
    let (tree, devices) = dell_without_devices_dir();
    std::fs::write(&devices, "a file where a directory should be\n").unwrap();
    assert_no_pci(
        &tree,
        format!(
            "cannot list PCI devices: {}: not a directory",
            devices.display()
        ),
    );
}

#[test]
fn missing_bus_pci_devices_gives_no_pci_devices_and_the_rest() {
    let (tree, devices) = dell_without_devices_dir();
    assert_no_pci(
        &tree,
        format!(
            "{}: does not exist; no PCI devices discovered",
            devices.display()
        ),
    );
}

/// Several broken functions at once: each reported, the intact ones all discovered.
#[test]
fn many_broken_functions_do_not_stop_the_others() {
    let tree = Tree::copy_of(DELL);
    let gpus = ["0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0"];
    let a = tree.write_attr(gpus[0], "vendor", b"\xff\xfe");
    let b = tree.write_attr(gpus[1], "class", b"");
    std::fs::remove_file(tree.entry(gpus[2]).join("device")).unwrap();
    let out = discover(&tree, DELL);
    assert_eq!(
        out.log,
        vec![
            warn(format!(
                "{}: binary content, not a text attribute; PCI device skipped",
                a.display()
            )),
            warn(format!(
                "{}: not a hex id: \"\"; PCI device skipped",
                b.display()
            )),
            warn(format!(
                "{}: no `device` attribute {NEEDS}; PCI device skipped",
                tree.entry(gpus[2]).display()
            )),
        ]
    );
    let mut expected = golden_features(DELL);
    for g in gpus {
        expected = without_pci_device(expected, g);
    }
    let gpu_list = expected["instances"]["gpu.device"]["elements"]
        .as_array_mut()
        .unwrap();
    gpu_list.retain(|g| !gpus.iter().any(|a| g["attributes"]["address"] == json!(a)));
    for (i, g) in gpu_list.iter_mut().enumerate() {
        g["attributes"]["index"] = json!(i.to_string());
    }
    expected["attributes"]["gpu.node"]["elements"]["count"] = json!("5");
    expected["attributes"]["gpu.node"]["elements"]["count_nvidia"] = json!("5");
    // The five left sit under five root buses (the three skipped had their own).
    expected["attributes"]["gpu.node"]["elements"]["pcie_roots"] = json!("5");
    expected["attributes"]["gpu.node"]["elements"]["healthy_count"] = json!("5");
    assert_json_eq(&out.features, &expected, "features");
    // The other five H100s still give the same labels.
    assert_json_eq(&out.labels, &golden_labels(DELL), "labels");
}

#[test]
fn symlink_loop_in_bus_pci_devices_is_skipped() {
    let tree = Tree::copy_of(NFD);
    std::fs::remove_file(tree.entry(ASPEED)).unwrap();
    std::os::unix::fs::symlink(ASPEED, tree.entry(ASPEED)).unwrap();
    assert_aspeed_skipped(&tree, &tree.entry(ASPEED), "symlink loop");
}

#[test]
fn a_driver_entry_that_is_not_a_symlink_is_left_out_and_the_device_kept() {
    let tree = Tree::copy_of(DELL);
    // A file where the kernel puts a link: the driver is unknown, nothing else changes.
    let driver = tree.device_dir(H100).join("driver");
    std::fs::remove_file(&driver).unwrap();
    std::fs::write(&driver, "nvidia\n").unwrap();
    let out = discover(&tree, DELL);
    assert_eq!(
        out.log,
        vec![warn(format!(
            "{}: not a symlink; attribute left out",
            tree.entry(H100).join("driver").display()
        ))]
    );
    let mut expected = golden_features(DELL);
    for feature in ["pci.device", "gpu.device"] {
        let list = &mut expected["instances"][feature]["elements"];
        for i in list.as_array_mut().unwrap() {
            if i["attributes"]["address"] == json!(H100) {
                i["attributes"].as_object_mut().unwrap().remove("driver");
            }
        }
    }
    assert_json_eq(&out.features, &expected, "features");
    assert_json_eq(&out.labels, &golden_labels(DELL), "labels");
}
