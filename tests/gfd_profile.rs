//! The `nvidia-gfd` profile (config `profiles: [nvidia-gfd]`): NVIDIA GPU Feature Discovery's
//! `nvidia.com/*` labels.
//!
//! Part 1 ports GFD's own unit tests (NVIDIA/k8s-device-plugin commit 1b826acc,
//! `internal/lm/{nvml,mig-strategy,resource}_test.go`) to snapshots: each GFD mock device
//! becomes a `gpu.device` instance (`MOCKMODEL`, 300 MiB, compute capability 8.0 for a full GPU
//! and 0 for a MIG-enabled one, as GFD's `rt.NewFullGPU`/`rt.NewMigEnabledDevice` have it),
//! each mock MIG device a `gpu.mig` instance, GFD's mock manager (driver `400.300`, CUDA 8.0)
//! `gpu.driver`, and GFD's `spec.Sharing` a `gpu.sharing`. GFD's tests call one labeler each;
//! here the binary gives the whole profile, so every expected map is the GFD test's labels plus
//! what GFD's other labelers give for the same mock node ([`mock_node`]), spelled out.
//!
//! Part 2 compares real GFD outputs (tests/fixtures/gfd/captures/, copied verbatim from the
//! project's hardware captures with their provenance headers: the GFD README's DGX A100, the Dell
//! XE9680 8x H100 of k8s-device-plugin#1501, the A100-PCIE-40GB MIG-mixed node of
//! network-operator#211, the A100 80GB PCIe 7g node of gpu-operator#687) with what the profile
//! gives on the matching fixtures. The captured labels are read from the capture files; the
//! labels those excerpts cut off are listed in each test, derived from the capture's machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_gpu-labeler");

type Labels = BTreeMap<String, String>;
/// Expected `nvidia.com/` labels, without the prefix.
type Pairs = Vec<(&'static str, &'static str)>;
/// A ported case: GFD's description, its devices, its sharing config, its labels.
type Case = (&'static str, Vec<Mock>, Option<Value>, Pairs);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn labels_of(l: &[(&str, &str)]) -> Labels {
    l.iter()
        .map(|(k, v)| (format!("nvidia.com/{k}"), v.to_string()))
        .collect()
}

/// `labels --features SNAPSHOT --config FILE --no-default-rules`: the profile's labels alone.
fn gfd(snapshot: &Value, config: &str) -> Labels {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snapshot.json");
    std::fs::write(&snap, snapshot.to_string()).unwrap();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(&cfg, format!("profiles: [nvidia-gfd]\n{config}")).unwrap();
    let (snap, cfg) = (snap.to_str().unwrap(), cfg.to_str().unwrap());
    let r = common::run([
        "labels",
        "-o",
        "json",
        "--no-default-rules",
        "--features",
        snap,
        "--config",
        cfg,
    ]);
    let labels = common::labels_of(r.ok());
    assert_eq!(r.stderr, "");
    labels
}

// ---- GFD's mocks as snapshots ----

/// A mock device: `rt.NewFullGPU()` or `rt.NewMigEnabledDevice(migs...)`.
#[derive(Clone)]
enum Mock {
    Full,
    MigEnabled(Vec<MockMig>),
}

/// `rt.NewMigDevice(gi, ci, gb, attributes)`: named `<gi>g.<gb>gb`, memory `gb`.
#[derive(Clone)]
struct MockMig {
    gi: u32,
    ci: u32,
    gb: u32,
    extra: [u32; 6],
}

fn mig(gi: u32, ci: u32, gb: u32) -> MockMig {
    MockMig {
        gi,
        ci,
        gb,
        extra: [0; 6],
    }
}

/// `multiprocessors`, `engines.copy`, `.decoder`, `.encoder`, `.jpeg`, `.ofa`.
fn mig_with(gi: u32, ci: u32, gb: u32, extra: [u32; 6]) -> MockMig {
    MockMig { gi, ci, gb, extra }
}

/// GFD's `spec.Sharing` as `gpu.sharing` attributes.
fn sharing(strategy: &str, rename: bool, replicas: &[(&str, u32)]) -> Value {
    let mut e = serde_json::Map::new();
    e.insert("strategy".into(), json!(strategy));
    e.insert("rename_by_default".into(), json!(rename.to_string()));
    let gpu = replicas
        .iter()
        .find(|(n, _)| *n == "gpu")
        .map_or(1, |(_, r)| *r);
    e.insert("replicas".into(), json!(gpu.to_string()));
    for (n, r) in replicas {
        e.insert(format!("replicas.{n}"), json!(r.to_string()));
    }
    json!({"elements": e})
}

/// A snapshot of GFD's mock manager with these devices (and `classes`, when given, as the
/// devices' PCI classes) and optional `gpu.sharing`.
fn snapshot(devices: &[Mock], classes: Option<&[&str]>, sharing: Option<Value>) -> Value {
    let mut gpus = Vec::new();
    let mut migs = Vec::new();
    for (i, d) in devices.iter().enumerate() {
        let mut a = json!({"index": i.to_string(), "vendor": "nvidia", "source": "nvml",
                           "product": "MOCKMODEL", "memory_mib": "300"});
        match d {
            Mock::Full => {
                a["compute_major"] = json!("8");
                a["compute_minor"] = json!("0");
                a["mig_capable"] = json!("false");
                a["mig_enabled"] = json!("false");
            }
            Mock::MigEnabled(ms) => {
                a["mig_capable"] = json!("true");
                a["mig_enabled"] = json!("true");
                for m in ms {
                    let x = m.extra;
                    migs.push(json!({"attributes": {
                        "parent_index": i.to_string(),
                        "profile": format!("{}g.{}gb", m.gi, m.gb),
                        "memory_mib": m.gb.to_string(),
                        "multiprocessors": x[0].to_string(),
                        "slices_gi": m.gi.to_string(), "slices_ci": m.ci.to_string(),
                        "engines_copy": x[1].to_string(), "engines_decoder": x[2].to_string(),
                        "engines_encoder": x[3].to_string(), "engines_jpeg": x[4].to_string(),
                        "engines_ofa": x[5].to_string()}}));
                }
            }
        }
        if let Some(c) = classes {
            a["class"] = json!(c[i]);
        }
        gpus.push(json!({ "attributes": a }));
    }
    let mut attributes = json!({"gpu.driver": {"elements": {"nvidia": "400.300", "cuda": "8.0"}}});
    if let Some(s) = sharing {
        attributes["gpu.sharing"] = s;
    }
    json!({"attributes": attributes,
           "instances": {"gpu.device": {"elements": gpus}, "gpu.mig": {"elements": migs}}})
}

/// What GFD's other labelers give for the mock manager with these devices: versions from the
/// mock manager (`400.300`, CUDA 8.0), machine type `unknown` (no DMI), `gpu.mode` `unknown`
/// (the mocks' PCI class is 0), `mig.capable` (MIG-capable == MIG-enabled for the mocks),
/// `mps.capable=false`.
fn mock_node(devices: &[Mock]) -> Labels {
    if devices.is_empty() {
        return Labels::new();
    }
    let capable = devices.iter().any(|d| matches!(d, Mock::MigEnabled(_)));
    labels_of(&[
        ("cuda.driver.major", "400"),
        ("cuda.driver.minor", "300"),
        ("cuda.driver.rev", ""),
        ("cuda.driver-version.major", "400"),
        ("cuda.driver-version.minor", "300"),
        ("cuda.driver-version.revision", ""),
        ("cuda.driver-version.full", "400.300"),
        ("cuda.runtime.major", "8"),
        ("cuda.runtime.minor", "0"),
        ("cuda.runtime-version.major", "8"),
        ("cuda.runtime-version.minor", "0"),
        ("cuda.runtime-version.full", "8.0"),
        ("gpu.machine", "unknown"),
        ("gpu.mode", "unknown"),
        ("mig.capable", if capable { "true" } else { "false" }),
        ("mps.capable", "false"),
    ])
}

fn with(mut base: Labels, l: &[(&str, &str)]) -> Labels {
    base.extend(labels_of(l));
    base
}

/// The labels of `rt.NewFullGPU()` x `count` without sharing (GFD's "no sharing" case).
const FULL_MOCK: &[(&str, &str)] = &[
    ("gpu.compute.major", "8"),
    ("gpu.compute.minor", "0"),
    ("gpu.family", "ampere"),
    ("gpu.memory", "300"),
    ("gpu.product", "MOCKMODEL"),
];

// TestMigStrategyNoneLabels (mig-strategy_test.go)
#[test]
fn gfd_mig_strategy_none() {
    let ts2 = || Some(sharing("time-slicing", false, &[("gpu", 2)]));
    let cases: Vec<Case> = vec![
        ("no devices returns empty labels", vec![], None, vec![]),
        (
            "single non-mig device returns non-mig (none) labels",
            vec![Mock::Full],
            None,
            [
                FULL_MOCK,
                &[
                    ("gpu.count", "1"),
                    ("gpu.replicas", "1"),
                    ("gpu.sharing-strategy", "none"),
                ],
            ]
            .concat(),
        ),
        (
            "sharing is applied to single device",
            vec![Mock::Full],
            ts2(),
            vec![
                ("gpu.compute.major", "8"),
                ("gpu.compute.minor", "0"),
                ("gpu.family", "ampere"),
                ("gpu.count", "1"),
                ("gpu.replicas", "2"),
                ("gpu.sharing-strategy", "time-slicing"),
                ("gpu.memory", "300"),
                ("gpu.product", "MOCKMODEL-SHARED"),
            ],
        ),
        (
            "sharing is applied to multiple devices",
            vec![Mock::Full, Mock::Full],
            ts2(),
            vec![
                ("gpu.compute.major", "8"),
                ("gpu.compute.minor", "0"),
                ("gpu.family", "ampere"),
                ("gpu.count", "2"),
                ("gpu.replicas", "2"),
                ("gpu.sharing-strategy", "time-slicing"),
                ("gpu.memory", "300"),
                ("gpu.product", "MOCKMODEL-SHARED"),
            ],
        ),
        (
            "sharing is not applied to single MIG device; replicas is zero",
            vec![Mock::MigEnabled(vec![])],
            ts2(),
            vec![
                ("gpu.count", "1"),
                ("gpu.replicas", "0"),
                ("gpu.sharing-strategy", "none"),
                ("gpu.memory", "300"),
                ("gpu.product", "MOCKMODEL"),
            ],
        ),
        (
            "sharing is not applied to multiple MIG device; replicas is zero",
            vec![Mock::MigEnabled(vec![]), Mock::MigEnabled(vec![])],
            ts2(),
            vec![
                ("gpu.count", "2"),
                ("gpu.replicas", "0"),
                ("gpu.sharing-strategy", "none"),
                ("gpu.memory", "300"),
                ("gpu.product", "MOCKMODEL"),
            ],
        ),
        (
            "sharing is applied to MIG device and non-MIG device",
            vec![Mock::MigEnabled(vec![]), Mock::Full],
            ts2(),
            vec![
                ("gpu.compute.major", "8"),
                ("gpu.compute.minor", "0"),
                ("gpu.family", "ampere"),
                ("gpu.count", "2"),
                ("gpu.replicas", "2"),
                ("gpu.sharing-strategy", "time-slicing"),
                ("gpu.memory", "300"),
                ("gpu.product", "MOCKMODEL-SHARED"),
            ],
        ),
    ];
    for (name, devices, sh, expected) in cases {
        assert_eq!(
            gfd(&snapshot(&devices, None, sh), "migStrategy: none\n"),
            with(mock_node(&devices), &expected),
            "{name}"
        );
    }
}

// TestMigStrategySingleLabels (mig-strategy_test.go)
#[test]
fn gfd_mig_strategy_single() {
    let invalid: &[(&str, &str)] = &[
        ("gpu.count", "0"),
        ("gpu.replicas", "0"),
        ("gpu.sharing-strategy", ""),
        ("gpu.memory", "0"),
        ("gpu.product", "MOCKMODEL-MIG-INVALID"),
        ("mig.strategy", "single"),
    ];
    let arch: &[(&str, &str)] = &[
        ("gpu.compute.major", "8"),
        ("gpu.compute.minor", "0"),
        ("gpu.family", "ampere"),
    ];
    let zero_attrs: &[(&str, &str)] = &[
        ("gpu.multiprocessors", "0"),
        ("gpu.slices.gi", "1"),
        ("gpu.slices.ci", "2"),
        ("gpu.engines.copy", "0"),
        ("gpu.engines.decoder", "0"),
        ("gpu.engines.encoder", "0"),
        ("gpu.engines.jpeg", "0"),
        ("gpu.engines.ofa", "0"),
    ];
    let extra = [12, 13, 14, 15, 16, 17];
    let cases: Vec<(&str, Vec<Mock>, Pairs)> = vec![
        ("no devices returns empty labels", vec![], vec![]),
        (
            "single non-mig device returns non-mig (none) labels",
            vec![Mock::Full],
            [
                FULL_MOCK,
                &[
                    ("gpu.count", "1"),
                    ("gpu.replicas", "1"),
                    ("gpu.sharing-strategy", "none"),
                    ("mig.strategy", "single"),
                ],
            ]
            .concat(),
        ),
        (
            "multiple non-mig device returns non-mig (none) labels",
            vec![Mock::Full, Mock::Full],
            [
                FULL_MOCK,
                &[
                    ("gpu.count", "2"),
                    ("gpu.replicas", "1"),
                    ("gpu.sharing-strategy", "none"),
                    ("mig.strategy", "single"),
                ],
            ]
            .concat(),
        ),
        (
            "single mig-enabled device returns mig labels",
            vec![Mock::MigEnabled(vec![mig(1, 2, 100)])],
            [
                zero_attrs,
                &[
                    ("gpu.count", "1"),
                    ("gpu.replicas", "1"),
                    ("gpu.sharing-strategy", "none"),
                    ("gpu.memory", "100"),
                    ("gpu.product", "MOCKMODEL-MIG-1g.100gb"),
                    ("mig.strategy", "single"),
                ],
            ]
            .concat(),
        ),
        (
            "multiple mig-enabled devices returns mig labels",
            vec![
                Mock::MigEnabled(vec![mig_with(1, 2, 100, extra)]),
                Mock::MigEnabled(vec![mig_with(1, 2, 100, extra)]),
            ],
            vec![
                ("gpu.count", "2"),
                ("gpu.replicas", "1"),
                ("gpu.sharing-strategy", "none"),
                ("gpu.memory", "100"),
                ("gpu.product", "MOCKMODEL-MIG-1g.100gb"),
                ("mig.strategy", "single"),
                ("gpu.multiprocessors", "12"),
                ("gpu.slices.gi", "1"),
                ("gpu.slices.ci", "2"),
                ("gpu.engines.copy", "13"),
                ("gpu.engines.decoder", "14"),
                ("gpu.engines.encoder", "15"),
                ("gpu.engines.jpeg", "16"),
                ("gpu.engines.ofa", "17"),
            ],
        ),
        (
            "empty mig devices returns MIG invalid label",
            vec![Mock::MigEnabled(vec![])],
            invalid.to_vec(),
        ),
        (
            "mixed mig config returns MIG invalid label",
            vec![Mock::MigEnabled(vec![mig(1, 2, 100), mig(3, 4, 100)])],
            invalid.to_vec(),
        ),
        (
            "mixed mig enabled and disabled returns invalid config",
            vec![Mock::MigEnabled(vec![mig(1, 2, 100)]), Mock::Full],
            [arch, invalid].concat(),
        ),
        (
            "enabled, disabled, and empty returns invalid config",
            vec![
                Mock::MigEnabled(vec![mig(1, 2, 100)]),
                Mock::Full,
                Mock::MigEnabled(vec![]),
            ],
            [arch, invalid].concat(),
        ),
    ];
    for (name, devices, expected) in cases {
        assert_eq!(
            gfd(&snapshot(&devices, None, None), "migStrategy: single\n"),
            with(mock_node(&devices), &expected),
            "{name}"
        );
    }
}

// TestGPUResourceLabeler (resource_test.go): one full GPU under each sharing config.
#[test]
fn gfd_gpu_resource_labeler() {
    let labels = |replicas: &'static str, strategy: &'static str, product: &'static str| {
        let mut l = FULL_MOCK.to_vec();
        l.retain(|(k, _)| *k != "gpu.product");
        l.extend([
            ("gpu.count", "1"),
            ("gpu.replicas", replicas),
            ("gpu.sharing-strategy", strategy),
            ("gpu.product", product),
        ]);
        l
    };
    let cases: Vec<Case> = vec![
        ("zero count returns empty", vec![], None, vec![]),
        (
            "no sharing",
            vec![Mock::Full],
            None,
            labels("1", "none", "MOCKMODEL"),
        ),
        (
            "time-slicing ignores non-matching resource",
            vec![Mock::Full],
            Some(sharing("time-slicing", false, &[("not-gpu", 2)])),
            labels("1", "none", "MOCKMODEL"),
        ),
        (
            "time-slicing appends suffix and doubles count",
            vec![Mock::Full],
            Some(sharing("time-slicing", false, &[("gpu", 2)])),
            labels("2", "time-slicing", "MOCKMODEL-SHARED"),
        ),
        (
            // GFD's test sets `rename: nvidia.com/gpu.shared`; GFD itself runs with
            // DisableResourceNamingInConfig, where only renameByDefault renames.
            "time-slicing renamed does not append suffix and doubles count",
            vec![Mock::Full],
            Some(sharing("time-slicing", true, &[("gpu", 2)])),
            labels("2", "time-slicing", "MOCKMODEL"),
        ),
        (
            "mps ignores non-matching resource",
            vec![Mock::Full],
            Some(sharing("mps", false, &[("not-gpu", 2)])),
            labels("1", "none", "MOCKMODEL"),
        ),
        (
            "mps appends suffix and doubles count",
            vec![Mock::Full],
            Some(sharing("mps", false, &[("gpu", 2)])),
            labels("2", "mps", "MOCKMODEL-SHARED"),
        ),
        (
            "mps renamed does not append suffix and doubles count",
            vec![Mock::Full],
            Some(sharing("mps", true, &[("gpu", 2)])),
            labels("2", "mps", "MOCKMODEL"),
        ),
    ];
    for (name, devices, sh, expected) in cases {
        let mps = sh
            .as_ref()
            .is_some_and(|s| s["elements"]["strategy"] == "mps");
        let mut want = with(mock_node(&devices), &expected);
        if mps && !devices.is_empty() {
            // GFD's sharing labeler, on the same config: MPS on a GPU without MIG.
            want.insert("nvidia.com/mps.capable".into(), "true".into());
        }
        assert_eq!(
            gfd(&snapshot(&devices, None, sh), "migStrategy: none\n"),
            want,
            "{name}"
        );
    }
}

// TestMigResourceLabeler (resource_test.go): `rt.NewMigDevice(1, 2, 300)` on a MIG-enabled mock.
// GFD calls the MIG labeler with a resource name directly; here the strategy picks it:
// `nvidia.com/gpu` is the single strategy, `nvidia.com/mig-<profile>` the mixed one, where the
// profile is the device's own (GFD's test pairs `mig-1g.1gb` with a `1g.300gb` device, which
// GFD itself never does).
#[test]
fn gfd_mig_resource_labeler() {
    let device = || vec![Mock::MigEnabled(vec![mig(1, 2, 300)])];
    let attrs = |prefix: &str| -> Vec<(String, String)> {
        [
            ("multiprocessors", "0"),
            ("slices.gi", "1"),
            ("slices.ci", "2"),
            ("engines.copy", "0"),
            ("engines.decoder", "0"),
            ("engines.encoder", "0"),
            ("engines.jpeg", "0"),
            ("engines.ofa", "0"),
            ("memory", "300"),
            ("count", "1"),
        ]
        .iter()
        .map(|(k, v)| (format!("{prefix}.{k}"), v.to_string()))
        .collect()
    };
    let expect = |strategy: &str, prefix: &str, extra: &[(&str, &str)]| {
        let mut l = mock_node(&device());
        // The MIG-enabled GPU's own whole-GPU labels (GFD's newGPULabelers, no sharing).
        l.extend(labels_of(&[
            ("gpu.count", "1"),
            ("gpu.replicas", "0"),
            ("gpu.sharing-strategy", "none"),
            ("gpu.memory", "300"),
            ("gpu.product", "MOCKMODEL"),
            ("mig.strategy", strategy),
        ]));
        for (k, v) in attrs(prefix) {
            l.insert(format!("nvidia.com/{k}"), v);
        }
        l.extend(labels_of(extra));
        l
    };
    let cases: Vec<(&str, &str, Option<Value>, Labels)> = vec![
        (
            "no sharing",
            "single",
            None,
            expect(
                "single",
                "gpu",
                &[
                    ("gpu.replicas", "1"),
                    ("gpu.sharing-strategy", "none"),
                    ("gpu.product", "MOCKMODEL-MIG-1g.300gb"),
                ],
            ),
        ),
        (
            "shared appends suffix and doubles count",
            "single",
            Some(sharing("time-slicing", false, &[("gpu", 2)])),
            expect(
                "single",
                "gpu",
                &[
                    ("gpu.replicas", "2"),
                    ("gpu.sharing-strategy", "time-slicing"),
                    ("gpu.product", "MOCKMODEL-MIG-1g.300gb-SHARED"),
                ],
            ),
        ),
        (
            "renamed does not append suffix and doubles count",
            "single",
            Some(sharing("time-slicing", true, &[("gpu", 2)])),
            expect(
                "single",
                "gpu",
                &[
                    ("gpu.replicas", "2"),
                    ("gpu.sharing-strategy", "time-slicing"),
                    ("gpu.product", "MOCKMODEL-MIG-1g.300gb"),
                ],
            ),
        ),
        (
            "mig mixed appends shared",
            "mixed",
            Some(sharing(
                "time-slicing",
                false,
                &[("gpu", 2), ("mig-1g.300gb", 2)],
            )),
            expect(
                "mixed",
                "mig-1g.300gb",
                &[
                    ("mig-1g.300gb.replicas", "2"),
                    ("mig-1g.300gb.sharing-strategy", "time-slicing"),
                    ("mig-1g.300gb.product", "MOCKMODEL-MIG-1g.300gb-SHARED"),
                ],
            ),
        ),
        (
            "mig mixed rename does not append",
            "mixed",
            Some(sharing("time-slicing", true, &[("mig-1g.300gb", 2)])),
            expect(
                "mixed",
                "mig-1g.300gb",
                &[
                    ("mig-1g.300gb.replicas", "2"),
                    ("mig-1g.300gb.sharing-strategy", "time-slicing"),
                    ("mig-1g.300gb.product", "MOCKMODEL-MIG-1g.300gb"),
                ],
            ),
        ),
    ];
    for (name, strategy, sh, expected) in cases {
        assert_eq!(
            gfd(
                &snapshot(&device(), None, sh),
                &format!("migStrategy: {strategy}\n")
            ),
            expected,
            "{name}"
        );
    }
}

/// The none-strategy resource labels of these mock devices without sharing (what the node
/// gets besides the labeler a test is about).
fn resource_labels(devices: &[Mock]) -> Vec<(&'static str, String)> {
    let full = devices.iter().filter(|d| matches!(d, Mock::Full)).count();
    let n = devices.len().to_string();
    let mut l: Vec<(&str, String)> = vec![
        ("gpu.count", n),
        ("gpu.memory", "300".into()),
        ("gpu.product", "MOCKMODEL".into()),
    ];
    if full > 0 {
        l.extend([
            ("gpu.replicas", "1".into()),
            ("gpu.sharing-strategy", "none".into()),
            ("gpu.compute.major", "8".into()),
            ("gpu.compute.minor", "0".into()),
            ("gpu.family", "ampere".into()),
        ]);
    } else {
        l.extend([
            ("gpu.replicas", "0".into()),
            ("gpu.sharing-strategy", "none".into()),
        ]);
    }
    l
}

fn with_owned(base: Labels, l: &[(&'static str, String)]) -> Labels {
    let mut b = base;
    for (k, v) in l {
        b.insert(format!("nvidia.com/{k}"), v.clone());
    }
    b
}

// TestMigCapabilityLabeler (nvml_test.go)
#[test]
fn gfd_mig_capability() {
    let cases: Vec<(&str, Vec<Mock>, Option<&str>)> = vec![
        ("no devices returns empty labels", vec![], None),
        (
            "single non-mig capable device returns mig.capable as false",
            vec![Mock::Full],
            Some("false"),
        ),
        (
            "multiple non-mig capable devices returns mig.capable as false",
            vec![Mock::Full, Mock::Full],
            Some("false"),
        ),
        (
            "single mig capable device returns mig.capable as true",
            vec![Mock::MigEnabled(vec![])],
            Some("true"),
        ),
        (
            "one mig capable device among multiple returns mig.capable as true",
            vec![Mock::Full, Mock::MigEnabled(vec![])],
            Some("true"),
        ),
    ];
    for (name, devices, capable) in cases {
        let got = gfd(&snapshot(&devices, None, None), "");
        let mut want = with_owned(mock_node(&devices), &resource_labels(&devices));
        if devices.is_empty() {
            want.clear();
        }
        assert_eq!(
            got.get("nvidia.com/mig.capable").map(String::as_str),
            capable,
            "{name}"
        );
        assert_eq!(got, want, "{name}");
    }
}

// TestSharingLabeler (nvml_test.go)
#[test]
fn gfd_sharing_labeler() {
    let full = vec![Mock::Full];
    let mig_enabled = vec![Mock::MigEnabled(vec![])];
    let cases: Vec<(&str, &Vec<Mock>, Option<Value>, &str)> = vec![
        ("nil config", &full, None, "false"),
        (
            "empty config",
            &full,
            Some(sharing("none", false, &[])),
            "false",
        ),
        (
            "config with timeslicing replicas",
            &full,
            Some(sharing("time-slicing", false, &[("not-named", 2)])),
            "false",
        ),
        (
            // GFD builds this config in code; the plugin refuses `replicas: 1` in a file, so
            // only a snapshot can carry it.
            "config with no mps replicas",
            &full,
            Some(sharing("none", false, &[("not-named", 1)])),
            "false",
        ),
        (
            "config with mps replicas no-mig-devices",
            &full,
            Some(sharing("mps", false, &[("not-named", 2)])),
            "true",
        ),
        (
            // GFD fails with errMPSSharingNotSupported and labels nothing; here (deviation)
            // the node is labelled and MPS is not capable.
            "config with mps replicas mig-devices",
            &mig_enabled,
            Some(sharing("mps", false, &[("not-named", 2)])),
            "false",
        ),
    ];
    for (name, devices, sh, mps) in cases {
        let got = gfd(&snapshot(devices, None, sh), "");
        let mut want = with_owned(mock_node(devices), &resource_labels(devices));
        want.insert("nvidia.com/mps.capable".into(), mps.into());
        assert_eq!(got, want, "{name}");
    }
}

// TestGPUModeLabeler (nvml_test.go)
#[test]
fn gfd_gpu_mode() {
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "single device with compute PCI class",
            vec!["0300"],
            "graphics",
        ),
        (
            "single device with graphics PCI class",
            vec!["0302"],
            "compute",
        ),
        (
            "single device with switch PCI class",
            vec!["0680"],
            "unknown",
        ),
        (
            "multiple device have same graphics PCI class",
            vec!["0302", "0302", "0302"],
            "compute",
        ),
        (
            "multiple device have same compute PCI class",
            vec!["0300", "0300", "0300"],
            "graphics",
        ),
        (
            "multiple device with some with graphics and others with compute PCI class",
            vec!["0300", "0302", "0300"],
            "unknown",
        ),
    ];
    for (name, classes, mode) in cases {
        let devices = vec![Mock::Full; classes.len()];
        let got = gfd(&snapshot(&devices, Some(&classes), None), "");
        let mut want = with_owned(mock_node(&devices), &resource_labels(&devices));
        want.insert("nvidia.com/gpu.mode".into(), mode.into());
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn heterogeneous_nodes_are_labelled_deterministically() {
    // GFD walks a Go map: which model's labels win changes between runs. Here the most
    // numerous model wins, then the one with the lowest-index GPU.
    let mut s = snapshot(&[Mock::Full, Mock::Full, Mock::Full], None, None);
    let gpus = s["instances"]["gpu.device"]["elements"]
        .as_array_mut()
        .unwrap();
    gpus[0]["attributes"]["product"] = json!("OTHER MODEL");
    gpus[0]["attributes"]["memory_mib"] = json!("100");
    let want = with(
        mock_node(&[Mock::Full]),
        &[
            ("gpu.count", "2"),
            ("gpu.replicas", "1"),
            ("gpu.sharing-strategy", "none"),
            ("gpu.compute.major", "8"),
            ("gpu.compute.minor", "0"),
            ("gpu.family", "ampere"),
            ("gpu.memory", "300"),
            ("gpu.product", "MOCKMODEL"),
        ],
    );
    for _ in 0..3 {
        assert_eq!(gfd(&s, ""), want);
    }
    // One of each: the lowest-index GPU's model.
    let gpus = s["instances"]["gpu.device"]["elements"]
        .as_array_mut()
        .unwrap();
    gpus.truncate(2);
    let want = with(
        mock_node(&[Mock::Full]),
        &[
            ("gpu.count", "1"),
            ("gpu.replicas", "1"),
            ("gpu.sharing-strategy", "none"),
            ("gpu.compute.major", "8"),
            ("gpu.compute.minor", "0"),
            ("gpu.family", "ampere"),
            ("gpu.memory", "100"),
            ("gpu.product", "OTHER-MODEL"),
        ],
    );
    assert_eq!(gfd(&s, ""), want);
}

#[test]
fn no_nvidia_gpu_no_nvidia_labels() {
    let s = json!({"instances": {"gpu.device": {"elements": [
        {"attributes": {"index": "0", "vendor": "amd", "source": "sysfs", "product": "MI300X"}}]}}});
    assert_eq!(gfd(&s, "migStrategy: mixed\n"), Labels::new());
}

// ---- Part 2: real GFD outputs ----

/// The `nvidia.com/*` labels of a capture file (`key: value` YAML or `key=value` lines), less
/// the ones GPU Operator sets (`gpu.deploy.*`, `gpu.present`) and `gfd.timestamp` (not given
/// by default: deviation).
fn captured(file: &str) -> Labels {
    let text =
        std::fs::read_to_string(repo().join("tests/fixtures/gfd/captures").join(file)).unwrap();
    let mut out = Labels::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("nvidia.com/") else {
            continue;
        };
        let (k, v) = rest
            .split_once(": ")
            .or_else(|| rest.split_once('='))
            .unwrap();
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
        if k.starts_with("gpu.deploy.") || k == "gpu.present" || k == "gfd.timestamp" {
            continue;
        }
        out.insert(format!("nvidia.com/{k}"), v.to_string());
    }
    out
}

/// `labels` discovered through the fake NVML with the profile on.
fn discovered(sysfs: &Path, proc: &str, nvml: &str, config: &str) -> Labels {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(&cfg, format!("profiles: [nvidia-gfd]\n{config}")).unwrap();
    let (sysfs, cfg) = (sysfs.to_str().unwrap(), cfg.to_str().unwrap());
    let args = [
        "labels",
        "-o",
        "json",
        "--no-default-rules",
        "--proc-root",
        proc,
    ];
    let args = [&args[..], &["--sysfs-root", sysfs, "--config", cfg]].concat();
    let r = common::run_fake_nvml(&args, "nvidia_ml", &common::nvml_fixture(nvml));
    let all = common::labels_of(r.ok());
    assert_eq!(r.stderr, "");
    all.into_iter()
        .filter(|(k, _)| k.starts_with("nvidia.com/"))
        .collect()
}

/// A sysfs tree with NVIDIA 3D controllers (their identity alone) and a DMI product name.
fn nvidia_sysfs(dir: &Path, gpus: &[(&str, &str)], product_name: Option<&str>) {
    common::nvidia_sysfs_as(dir, gpus, common::Detail::Identity);
    if let Some(p) = product_name {
        std::fs::create_dir_all(dir.join("class/dmi/id")).unwrap();
        std::fs::write(dir.join("class/dmi/id/product_name"), format!("{p}\n")).unwrap();
    }
}

#[test]
fn dell_xe9680_8x_h100_as_gfd_labelled_it() {
    // k8s-device-plugin#1501: the excerpt lists count, family, machine, memory, mode, product,
    // replicas and mig.capable.
    let mut want = captured("gfd_labels__k8s-device-plugin-1501__PowerEdge-XE9680_8xH100.txt");
    assert_eq!(want.len(), 8);
    // Cut from the excerpt; from the same server model's capture (the fixtures: driver
    // 535.161.08, CUDA 12.2, compute capability 9.0), no sharing configured, MIG disabled.
    want.extend(labels_of(&[
        ("cuda.driver-version.full", "535.161.08"),
        ("cuda.driver-version.major", "535"),
        ("cuda.driver-version.minor", "161"),
        ("cuda.driver-version.revision", "08"),
        ("cuda.driver.major", "535"),
        ("cuda.driver.minor", "161"),
        ("cuda.driver.rev", "08"),
        ("cuda.runtime-version.full", "12.2"),
        ("cuda.runtime-version.major", "12"),
        ("cuda.runtime-version.minor", "2"),
        ("cuda.runtime.major", "12"),
        ("cuda.runtime.minor", "2"),
        ("gpu.compute.major", "9"),
        ("gpu.compute.minor", "0"),
        ("gpu.sharing-strategy", "none"),
        ("mps.capable", "false"),
    ]));
    let got = discovered(
        &repo().join("tests/fixtures/sysfs/dell-xe9680-8xh100"),
        "tests/fixtures/proc/dell-xe9680-8xh100",
        "h100-8x",
        "",
    );
    assert_eq!(got, want);
}

#[test]
fn a100_pcie_40gb_mig_mixed_as_gfd_labelled_it() {
    // network-operator#211 (excerpt, cut after mig-2g.10gb.engines.ofa).
    let mut want = captured(
        "gfd_labels__network-operator-211__A100-PCIE-40GB_Supermicro-AS-4124GS-TNR_MIG-mixed.txt",
    );
    assert_eq!(want.len(), 20);
    // Cut from the excerpt, derived from the fixture (tests/fixtures/nvml/PROVENANCE.md):
    // two GPUs, no driver version captured (so no cuda.* labels), mixed strategy, no sharing.
    want.extend(labels_of(&[
        ("gpu.compute.major", "8"),
        ("gpu.compute.minor", "0"),
        ("gpu.count", "2"),
        ("gpu.mode", "compute"),
        ("gpu.replicas", "0"),
        ("gpu.sharing-strategy", "none"),
        ("mig-1g.5gb.product", "A100-PCIE-40GB-MIG-1g.5gb"),
        ("mig-1g.5gb.replicas", "1"),
        ("mig-1g.5gb.sharing-strategy", "none"),
        ("mig-2g.10gb.memory", "9856"),
        ("mig-2g.10gb.multiprocessors", "28"),
        ("mig-2g.10gb.product", "A100-PCIE-40GB-MIG-2g.10gb"),
        ("mig-2g.10gb.replicas", "1"),
        ("mig-2g.10gb.sharing-strategy", "none"),
        ("mig-2g.10gb.slices.ci", "2"),
        ("mig-2g.10gb.slices.gi", "2"),
        ("mig.capable", "true"),
        ("mig.strategy", "mixed"),
        ("mps.capable", "false"),
    ]));
    let dir = tempfile::tempdir().unwrap();
    // The DMI product name GFD turned into `AS--4124GS-TNR`.
    nvidia_sysfs(
        dir.path(),
        &[("0000:01:00.0", "0x20f1"), ("0000:41:00.0", "0x20f1")],
        Some("AS -4124GS-TNR"),
    );
    let got = discovered(
        dir.path(),
        "/nonexistent",
        "a100-pcie-40gb-mig-mixed",
        "migStrategy: mixed\n",
    );
    assert_eq!(got, want);
}

#[test]
fn a100_80gb_pcie_7g_as_gfd_labelled_it() {
    // gpu-operator#687 (excerpt): count, product, cuda.driver.minor, mig-7g.80gb.engines.ofa;
    // its gfd.timestamp is not given (deviation). NVML itself names the profile 7g.79gb (DCGM's
    // GPU_I_PROFILE); GFD's rounding gives 7g.80gb.
    let mut want = captured("gfd_nfd_labels__gpu-operator-687__A100-80GB-PCIe_MIG-7g.txt");
    assert_eq!(want.len(), 4);
    want.extend(labels_of(&[
        ("cuda.driver-version.full", "535.154.05"),
        ("cuda.driver-version.major", "535"),
        ("cuda.driver-version.minor", "154"),
        ("cuda.driver-version.revision", "05"),
        ("cuda.driver.major", "535"),
        ("cuda.driver.rev", "05"),
        ("cuda.runtime-version.full", "12.2"),
        ("cuda.runtime-version.major", "12"),
        ("cuda.runtime-version.minor", "2"),
        ("cuda.runtime.major", "12"),
        ("cuda.runtime.minor", "2"),
        ("gpu.compute.major", "8"),
        ("gpu.compute.minor", "0"),
        ("gpu.family", "ampere"),
        ("gpu.machine", "unknown"),
        ("gpu.memory", "81920"),
        ("gpu.mode", "compute"),
        ("gpu.replicas", "0"),
        ("gpu.sharing-strategy", "none"),
        ("mig-7g.80gb.count", "1"),
        ("mig-7g.80gb.engines.copy", "7"),
        ("mig-7g.80gb.engines.decoder", "5"),
        ("mig-7g.80gb.engines.encoder", "0"),
        ("mig-7g.80gb.engines.jpeg", "1"),
        ("mig-7g.80gb.memory", "81152"),
        ("mig-7g.80gb.multiprocessors", "98"),
        ("mig-7g.80gb.product", "NVIDIA-A100-80GB-PCIe-MIG-7g.80gb"),
        ("mig-7g.80gb.replicas", "1"),
        ("mig-7g.80gb.sharing-strategy", "none"),
        ("mig-7g.80gb.slices.ci", "7"),
        ("mig-7g.80gb.slices.gi", "7"),
        ("mig.capable", "true"),
        ("mig.strategy", "mixed"),
        ("mps.capable", "false"),
    ]));
    let dir = tempfile::tempdir().unwrap();
    nvidia_sysfs(dir.path(), &[("0000:17:00.0", "0x20b5")], None);
    let got = discovered(
        dir.path(),
        "/nonexistent",
        "a100-80gb-pcie-mig-7g",
        "migStrategy: mixed\n",
    );
    assert_eq!(got, want);
}

#[test]
fn gfd_readme_dgx_a100_from_a_snapshot() {
    // The GFD README's example node (2020, GFD 0.2): a snapshot of what that node's discovery
    // gives (tests/fixtures/gfd/dgx2h-a100-readme.features.json).
    let mut want = captured("gfd_readme_example__A100-SXM4-40GB_in_DGX-2H.txt");
    assert_eq!(want.len(), 12);
    // Deviation: that GFD kept the space in the machine type; GFD since replaces it by `-`.
    assert_eq!(want["nvidia.com/gpu.machine"], "NVIDIA DGX-2H");
    want.insert("nvidia.com/gpu.machine".into(), "NVIDIA-DGX-2H".into());
    // Labels later GFD versions added, for the same node (snapshot: 3D controller, MIG
    // capable and not enabled, no sharing).
    want.extend(labels_of(&[
        ("cuda.driver-version.full", "455.06"),
        ("cuda.driver-version.major", "455"),
        ("cuda.driver-version.minor", "06"),
        ("cuda.driver-version.revision", ""),
        ("cuda.runtime-version.full", "11.1"),
        ("cuda.runtime-version.major", "11"),
        ("cuda.runtime-version.minor", "1"),
        ("gpu.mode", "compute"),
        ("gpu.replicas", "1"),
        ("gpu.sharing-strategy", "none"),
        ("mig.capable", "true"),
        ("mps.capable", "false"),
    ]));
    let snap: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/fixtures/gfd/dgx2h-a100-readme.features.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(gfd(&snap, ""), want);
}

/// `--profile nvidia-gfd` and `GPU_LABELER_PROFILES` (what deploy/components/nvidia-gfd sets)
/// turn the profile on exactly as the config's `profiles` does; an unknown name is a usage error.
#[test]
fn the_profile_flag_and_env_turn_the_profile_on_as_the_config_does() {
    let s = snapshot(&[Mock::Full, Mock::Full], None, None);
    let want = gfd(&s, "");
    assert!(!want.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snapshot.json");
    std::fs::write(&snap, s.to_string()).unwrap();
    let run = |extra: &[&str], env: Option<&str>| {
        let mut cmd = Command::new(BIN);
        cmd.args(["labels", "-o", "json", "--no-default-rules", "--features"])
            .arg(&snap)
            .args(extra)
            .env_remove("GPU_LABELER_CONFIG")
            .env_remove("GPU_LABELER_PROFILES");
        if let Some(v) = env {
            cmd.env("GPU_LABELER_PROFILES", v);
        }
        cmd.output().unwrap()
    };
    for out in [
        run(&["--profile", "nvidia-gfd"], None),
        run(&[], Some("nvidia-gfd")),
    ] {
        assert_eq!(String::from_utf8_lossy(&out.stderr), "");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let got: Labels = serde_json::from_value(v["labels"].clone()).unwrap();
        assert_eq!(got, want);
    }
    let out = run(&["--profile", "gfd"], None);
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned()),
        (
            Some(2),
            "error: invalid value 'gfd' for '--profile <NAME>': unknown profile \"gfd\" (known: nvidia-gfd)\n\nFor more information, try '--help'.\n".to_string()
        )
    );
}

/// Compute instances smaller than their GPU instance (tests/fixtures/nvml/a100-40gb-mig-ci.json):
/// the mixed strategy's resources are named as go-nvlib names them, `mig-1c.3g.20gb` and
/// `mig-2c.3g.20gb` beside the whole instance's `mig-3g.20gb`, each with its own SMs and the
/// GPU instance's memory, engines and slices.
#[test]
fn mig_compute_instances_in_the_mixed_strategy() {
    let mut want = labels_of(&[
        ("cuda.driver-version.full", "510.47.03"),
        ("cuda.driver-version.major", "510"),
        ("cuda.driver-version.minor", "47"),
        ("cuda.driver-version.revision", "03"),
        ("cuda.driver.major", "510"),
        ("cuda.driver.minor", "47"),
        ("cuda.driver.rev", "03"),
        ("cuda.runtime-version.full", "11.6"),
        ("cuda.runtime-version.major", "11"),
        ("cuda.runtime-version.minor", "6"),
        ("cuda.runtime.major", "11"),
        ("cuda.runtime.minor", "6"),
        ("gpu.compute.major", "8"),
        ("gpu.compute.minor", "0"),
        ("gpu.count", "1"),
        ("gpu.family", "ampere"),
        ("gpu.machine", "unknown"),
        ("gpu.memory", "40960"),
        ("gpu.mode", "compute"),
        ("gpu.product", "NVIDIA-A100-SXM4-40GB"),
        ("gpu.replicas", "0"),
        ("gpu.sharing-strategy", "none"),
        ("mig.capable", "true"),
        ("mig.strategy", "mixed"),
        ("mps.capable", "false"),
    ]);
    for (profile, sms, ci) in [
        ("1c.3g.20gb", "14", "1"),
        ("2c.3g.20gb", "28", "2"),
        ("3g.20gb", "42", "3"),
    ] {
        for (k, v) in [
            ("count", "1"),
            ("engines.copy", "3"),
            ("engines.decoder", "2"),
            ("engines.encoder", "0"),
            ("engines.jpeg", "0"),
            ("engines.ofa", "0"),
            ("memory", "19968"),
            ("multiprocessors", sms),
            ("replicas", "1"),
            ("sharing-strategy", "none"),
            ("slices.ci", ci),
            ("slices.gi", "3"),
        ] {
            want.insert(format!("nvidia.com/mig-{profile}.{k}"), v.to_string());
        }
        want.insert(
            format!("nvidia.com/mig-{profile}.product"),
            format!("NVIDIA-A100-SXM4-40GB-MIG-{profile}"),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    nvidia_sysfs(dir.path(), &[("0000:00:04.0", "0x20b0")], None);
    let got = discovered(
        dir.path(),
        "/nonexistent",
        "a100-40gb-mig-ci",
        "migStrategy: mixed\n",
    );
    assert_eq!(got, want);
}

/// A GB200 tray of one multi-node NVLink domain: GFD's `gpu.clique` (the value NVIDIA's DRA
/// documentation shows GFD giving such nodes).
#[test]
fn gb200_nvlink_domain_gives_gfds_clique() {
    // NVML alone: a sysfs without PCI functions (a container without /sys mounted).
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("bus/pci/devices")).unwrap();
    let got = discovered(dir.path(), "/nonexistent", "gb200-4x-clique", "");
    assert_eq!(
        got,
        labels_of(&[
            ("gpu.clique", "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766"),
            ("gpu.compute.major", "10"),
            ("gpu.compute.minor", "0"),
            ("gpu.count", "4"),
            ("gpu.family", "blackwell"),
            ("gpu.machine", "unknown"),
            // No sysfs: GFD's PCI class of the GPUs is unknown.
            ("gpu.mode", "unknown"),
            ("gpu.product", "NVIDIA-GB200"),
            ("gpu.replicas", "1"),
            ("gpu.sharing-strategy", "none"),
            ("mig.capable", "false"),
            ("mps.capable", "false"),
        ])
    );
}
