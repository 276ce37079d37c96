//! Accelerators beyond GPUs and GPUs of further vendors, from sysfs trees built from real
//! captures (`tests/fixtures/gen/make_accel_sysfs.py`, sources in
//! `tests/fixtures/captures/accel/`): whole label maps with the shipped rules, whole
//! `accel.device` instances, and NFD's PCI labels unchanged.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use common::*;

/// `labels -o json` of a fixture tree (shipped rules unless `extra` says otherwise); no warning.
fn labels(root: &Path, extra: &[&str]) -> BTreeMap<String, String> {
    let mut a: Vec<OsString> = vec!["labels".into(), "-o".into(), "json".into()];
    a.extend(discovery_args(root, Path::new("/nonexistent")));
    a.extend(extra.iter().map(OsString::from));
    let r = run(a);
    assert_eq!(r.stderr, "", "no warnings expected");
    labels_of(r.ok())
}

fn machine_labels(machine: &str) -> BTreeMap<String, String> {
    labels(&sysfs_fixture(machine), &[])
}

fn accel_devices(root: &Path) -> serde_json::Value {
    let (f, r) = features_json(root, Path::new("/nonexistent"));
    assert_eq!(r.stderr, "", "no warnings expected");
    f["instances"]["accel.device"]["elements"].clone()
}

#[test]
fn eight_gaudi_2_are_hpus_not_gpus() {
    assert_eq!(
        machine_labels("habana-gaudi2-8x"),
        label_map(&[
            ("accel-habana.count", "8"),
            ("accel.count", "8"),
            ("accel.kind", "hpu"),
            ("accel.present", "true"),
            ("accel.product", "Gaudi2-AI-Training-Accelerator"),
            ("accel.vendor", "habana"),
            ("pci-1200_1da3.present", "true"),
        ])
    );
}

/// The journal of a Gaudi 3 host: the driver's version (`driver_ver`) and the accel minor.
#[test]
fn a_gaudi_3_with_intels_driver_gives_its_version_and_accel_device() {
    assert_eq!(
        machine_labels("habana-gaudi3"),
        label_map(&[
            ("accel-habana.count", "1"),
            ("accel.count", "1"),
            ("accel.driver.version", "1.18.0-ee698fb"),
            ("accel.kind", "hpu"),
            ("accel.present", "true"),
            ("accel.product", "Gaudi3-AI-Training-Accelerator"),
            ("accel.vendor", "habana"),
            ("pci-1200_1da3.present", "true"),
        ])
    );
    assert_eq!(
        accel_devices(&sysfs_fixture("habana-gaudi3")),
        serde_json::json!([{"attributes": {
            "accel": "accel0",
            "address": "0000:21:00.0",
            "class": "1200",
            "device_id": "1060",
            "driver": "habanalabs",
            "driver_version": "1.18.0-ee698fb",
            "index": "0",
            "is_vf": "false",
            "kind": "hpu",
            "product": "Gaudi3 AI Training Accelerator",
            "vendor": "habana",
            "vendor_id": "1da3",
        }}])
    );
}

/// A Lunar Lake laptop: the NPU (class 1200) is an accelerator; the Platform Monitoring
/// Technology function next to it (class 1180, intel_vsec) is nothing.
#[test]
fn a_core_ultra_npu_is_an_npu_and_its_neighbour_nothing() {
    assert_eq!(
        machine_labels("intel-lunarlake-npu"),
        label_map(&[
            ("accel-intel.count", "1"),
            ("accel.count", "1"),
            ("accel.kind", "npu"),
            ("accel.present", "true"),
            ("accel.product", "Lunar-Lake-NPU"),
            ("accel.vendor", "intel"),
            ("pci-1200_8086.present", "true"),
        ])
    );
    assert_eq!(
        accel_devices(&sysfs_fixture("intel-lunarlake-npu")),
        serde_json::json!([{"attributes": {
            "accel": "accel0",
            "address": "0000:00:0b.0",
            "class": "1200",
            "device_id": "643e",
            "driver": "intel_vpu",
            "index": "0",
            "is_vf": "false",
            "kind": "npu",
            "product": "Lunar Lake NPU",
            "vendor": "intel",
            "vendor_id": "8086",
        }}])
    );
}

/// trn1.2xlarge: the Trainium is a "System peripheral" (0880), found by its id; Amazon's VGA
/// (0300) stays a display adapter, not a GPU.
#[test]
fn a_trainium_is_found_by_its_id_and_amazons_vga_is_no_gpu() {
    assert_eq!(
        machine_labels("aws-trn1-2xlarge"),
        label_map(&[
            ("accel-aws.count", "1"),
            ("accel.count", "1"),
            ("accel.kind", "neuron"),
            ("accel.present", "true"),
            ("accel.product", "NeuronDevice-Trainium"),
            ("accel.vendor", "aws"),
            ("pci-0300_1d0f.present", "true"),
        ])
    );
}

#[test]
fn sixteen_ascend_910b_are_npus_named_by_the_catalogue() {
    assert_eq!(
        machine_labels("huawei-ascend-910b-16x"),
        label_map(&[
            ("accel-huawei.count", "16"),
            ("accel.count", "16"),
            ("accel.kind", "npu"),
            ("accel.present", "true"),
            ("accel.product", "Ascend-910B"),
            ("accel.vendor", "huawei"),
            ("pci-1200_19e5.present", "true"),
        ])
    );
}

/// Hygon's K100_AI DCUs (co-processors, 0b40) are GPUs with their memory from
/// `mem_info_vram_total`.
#[test]
fn hygon_dcus_join_the_gpu_labels_with_their_memory() {
    assert_eq!(
        machine_labels("hygon-k100ai-2x"),
        label_map(&[
            ("gpu-hygon.count", "2"),
            ("gpu.count", "2"),
            ("gpu.health", "ok"),
            ("gpu.healthy.count", "2"),
            ("gpu.memory", "65520"),
            ("gpu.memory.max", "65520"),
            ("gpu.memory.total", "131040"),
            ("gpu.pcie.roots", "2"),
            ("gpu.present", "true"),
            ("gpu.product", "K100_AI"),
            ("gpu.vendor", "hygon"),
            ("gpu.vgpu.present", "false"),
            ("gpu.virtual", "false"),
            ("pci-0b40_1d94.present", "true"),
        ])
    );
}

/// An MTT S3000 is a GPU; its HDMI audio function is not.
#[test]
fn a_moore_threads_gpu_joins_the_gpu_labels_and_its_audio_does_not() {
    assert_eq!(
        machine_labels("mthreads-s3000"),
        label_map(&[
            ("gpu-mthreads.count", "1"),
            ("gpu.count", "1"),
            ("gpu.health", "ok"),
            ("gpu.healthy.count", "1"),
            ("gpu.pcie.roots", "1"),
            ("gpu.present", "true"),
            ("gpu.product", "MTT-S3000"),
            ("gpu.vendor", "mthreads"),
            ("gpu.vgpu.present", "false"),
            ("gpu.virtual", "false"),
            ("pci-0302_1ed5.present", "true"),
        ])
    );
}

/// The node: 8 Gaudi 2, a Meteor Lake NPU (with its GNA and PMT functions), a
/// Tenstorrent Wormhole and a Cloud AI 100 without its driver. Before the catalogue it got
/// `gpu.count=9`, `gpu-habana.count=8`, `gpu-intel.count=1` and no count for the Wormhole.
#[test]
fn a_mixed_accelerator_node_counts_each_vendor_and_model_and_no_gpu() {
    assert_eq!(
        machine_labels("mixed-gaudi2-npu-wormhole"),
        label_map(&[
            ("accel-habana.count", "8"),
            ("accel-intel.count", "1"),
            ("accel-model-Cloud-AI-100.count", "1"),
            ("accel-model-Gaudi2-AI-Training-Accelerator.count", "8"),
            ("accel-model-Meteor-Lake-NPU.count", "1"),
            ("accel-model-Wormhole.count", "1"),
            ("accel-qualcomm.count", "1"),
            ("accel-tenstorrent.count", "1"),
            ("accel.count", "11"),
            ("accel.models", "4"),
            ("accel.present", "true"),
            ("pci-1200_17cb.present", "true"),
            ("pci-1200_1da3.present", "true"),
            ("pci-1200_1e52.present", "true"),
            ("pci-1200_8086.present", "true"),
        ])
    );
}

/// NFD's PCI labels are what they were: without the shipped rules only they remain.
#[test]
fn nfd_pci_labels_stay_byte_identical() {
    assert_eq!(
        labels(
            &sysfs_fixture("mixed-gaudi2-npu-wormhole"),
            &["--no-default-rules"]
        ),
        label_map(&[
            ("pci-1200_17cb.present", "true"),
            ("pci-1200_1da3.present", "true"),
            ("pci-1200_1e52.present", "true"),
            ("pci-1200_8086.present", "true"),
        ])
    );
}

/// A processing accelerator of a vendor the catalogue does not know is counted by its vendor
/// id, of kind `unknown`, so a new part shows before the catalogue learns it.
#[test]
fn an_unknown_class_12_device_is_counted_by_its_vendor_id() {
    let tree = Tree::copy_of("intel-lunarlake-npu");
    tree.write_attr("0000:00:0b.0", "vendor", b"0x1fc9\n");
    assert_eq!(
        labels(tree.root(), &[]),
        label_map(&[
            ("accel-1fc9.count", "1"),
            ("accel.count", "1"),
            ("accel.kind", "unknown"),
            ("accel.present", "true"),
            ("accel.vendor", "1fc9"),
            ("pci-1200_1fc9.present", "true"),
        ])
    );
}
