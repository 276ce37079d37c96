//! The bodies of the cargo-fuzz targets in `fuzz/`, here so that `tests/fuzz_regressions.rs`
//! replays the seed corpus and every crash found on stable Rust without cargo-fuzz.
//!
//! Each function takes arbitrary bytes, runs them through the same parsing code the agent runs
//! on a file or sysfs attribute, and asserts what must hold for every input: nothing panics,
//! errors name their file, what parses survives serialising and parsing again, and every label
//! produced is one the API server accepts. Not a stable API.

use std::path::Path;

use crate::config::{Config, Profile};
use crate::discover::amd::{self, KfdNode};
use crate::discover::pci::{PciAddress, parse_hex_byte, parse_id, parse_link_speed, parse_numa};
use crate::discover::{sharing, vgpu};
use crate::features::{FeatureSet, Instance, parse_snapshot};
use crate::labels::{Evaluated, evaluate_node};
use crate::rules::{RuleSet, RuleSource};
use crate::validate::{
    label_value, sanitize_value, validate_annotation, validate_extended_resource, validate_label,
    validate_taint,
};

/// The file name the fuzzed text is reported under.
const RULES_FILE: &str = "fuzz-rules.yaml";
const SNAPSHOT_FILE: &str = "fuzz-snapshot.json";
const SHARING_FILE: &str = "fuzz-sharing.yaml";
const CONFIG_FILE: &str = "fuzz-config.yaml";
const SYSFS_FILE: &str = "/fuzz/sys/bus/pci/devices/0000:00:00.0/attr";

/// A rule file: loaded as `gpu-labeler labels --rules FILE` loads it, checked as `rules check`
/// checks it, then evaluated (and explained) over a small fixed H100 node.
pub fn rules(data: &[u8]) {
    // A rule file that is not UTF-8 cannot be read (`read_to_string`), so it never gets here.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let sources = vec![RuleSource {
        name: RULES_FILE.to_string(),
        text: text.to_string(),
    }];
    let (set, errors) = RuleSet::load(sources.clone());
    for e in &errors {
        let shown = e.to_string();
        assert!(
            shown.starts_with(RULES_FILE),
            "error without its file: {shown}"
        );
    }
    let known: Vec<&str> = crate::features::CATALOG.iter().map(|(n, _)| *n).collect();
    let report = crate::rules::check(&sources, &known);
    // Whatever does not load is an error of `rules check` too.
    if !errors.is_empty() {
        assert!(
            !report.errors.is_empty(),
            "loading failed ({}) but `rules check` found nothing",
            errors[0]
        );
    }
    let features = fixed_node();
    let config = Config::default();
    let evaluated = evaluate_node(&features, &config, &set);
    assert_valid_output(&evaluated, &config);
    for e in &evaluated.errors {
        assert!(
            e.contains(RULES_FILE),
            "runtime error without its file: {e}"
        );
    }
    let _ = crate::rules::explain(&set, &features, None);
}

/// A feature snapshot (`--features FILE`): if it parses, it must read back the same from its
/// own JSON and YAML (`gpu-labeler features -o json|yaml`), and the default rules and the
/// `nvidia-gfd` profile over it must give only valid labels.
pub fn snapshot(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new(SNAPSHOT_FILE);
    let features = match parse_snapshot(path, text) {
        Ok(f) => f,
        Err(e) => {
            let shown = e.to_string();
            assert!(
                shown.starts_with(&format!("invalid snapshot {SNAPSHOT_FILE}:")),
                "error without its file: {shown}"
            );
            return;
        }
    };
    let json = features.to_json();
    match parse_snapshot(path, &json) {
        Ok(back) => assert_eq!(
            back, features,
            "JSON round trip changed the features:\n{json}"
        ),
        Err(e) => panic!("own JSON does not parse: {e}\n{json}"),
    }
    let yaml = features.to_yaml();
    match parse_snapshot(Path::new("fuzz-snapshot.yaml"), &yaml) {
        Ok(back) => assert_eq!(
            back, features,
            "YAML round trip changed the features:\n{yaml}"
        ),
        Err(e) => panic!("own YAML does not parse: {e}\n{yaml}"),
    }
    let config = Config {
        profiles: vec![Profile::NvidiaGfd],
        ..Config::default()
    };
    DEFAULT_RULES.with(|rules| {
        let evaluated = evaluate_node(&features, &config, rules);
        assert_valid_output(&evaluated, &config);
    });
}

thread_local! {
    /// The shipped rules, loaded once per thread (a fuzzer runs one).
    static DEFAULT_RULES: RuleSet = {
        let (set, errors) = RuleSet::load(crate::default_rules::sources());
        assert!(errors.is_empty(), "shipped rules do not load: {errors:?}");
        set
    };
}

/// One sysfs attribute file's bytes: read as every attribute is read (`text`), then parsed as
/// each kind of attribute discovery parses (ids, hex bytes, NUMA node, link speed, decimal
/// numbers, PCI addresses), and sanitised as a derived label value.
pub fn sysfs_attr(data: &[u8]) {
    let path = Path::new(SYSFS_FILE);
    let s = match crate::sysfs::text(data.to_vec(), path) {
        Ok(Some(s)) => s,
        Ok(None) => unreachable!("text() of bytes is never absent"),
        Err(e) => {
            assert_eq!(e.path(), path);
            assert!(e.to_string().starts_with(SYSFS_FILE));
            return;
        }
    };
    assert_eq!(s.trim(), s, "attribute text is not trimmed");
    assert!(!s.contains('\0'));

    for attr in crate::discover::pci::MANDATORY {
        if let Ok(id) = parse_id(attr, &s) {
            assert!((4..=6).contains(&id.digits), "{attr}: {id:?}");
            assert!(id.id < 1 << 24, "{attr}: {id:?}");
            assert!(
                id.value.len() == 4
                    && id
                        .value
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "{attr}: {s:?} -> {id:?}"
            );
        }
    }
    // NFD keeps optional attributes verbatim, `0x` stripped and trimmed.
    for attr in [
        "sriov_totalvfs",
        "iommu_group/type",
        "iommu/intel-iommu/version",
    ] {
        let v = crate::discover::pci::nfd_normalise(attr, &s);
        assert_eq!(v.trim(), v);
    }
    if let Ok(b) = parse_hex_byte(&s) {
        assert!(
            b.len() == 2 && u8::from_str_radix(&b, 16).is_ok(),
            "{s:?} -> {b:?}"
        );
    }
    if let Ok(Some(n)) = parse_numa(&s) {
        assert!(n.parse::<u64>().is_ok(), "{s:?} -> {n:?}");
    }
    if let Ok(Some(v)) = parse_link_speed(&s) {
        assert!(
            v.parse::<f64>().is_ok_and(|f| f.is_finite()),
            "{s:?} -> {v:?}"
        );
    }
    if let Ok(n) = crate::sysfs::parse_u64(&s) {
        let gfx = amd::gfx_target(n);
        assert!(gfx.starts_with("gfx"));
    }
    if let Some(a) = PciAddress::parse(&s) {
        let again = format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            a.domain, a.bus, a.device, a.function
        );
        assert_eq!(PciAddress::parse(&again), Some(a), "{s:?} -> {again:?}");
    }
    let v = sanitize_value(&s);
    assert!(
        v.is_empty() || label_value(&v).is_ok(),
        "sanitize_value({s:?}) = {v:?} is not a label value"
    );
}

/// PCI configuration space bytes (`<device>/config`), as the vGPU check reads them.
pub fn pci_config(data: &[u8]) {
    let parsed = vgpu::parse(data);
    match vgpu::vendor_specific_capability(data) {
        Err(len) => {
            assert_eq!(len, data.len());
            assert_eq!(parsed, vgpu::ConfigSpace::HeaderOnly { len });
        }
        Ok(None) => assert_eq!(parsed, vgpu::ConfigSpace::NotVgpu),
        Ok(Some(cap)) => {
            // The capability's bytes: at least its header (id, next, length), starting with its id.
            assert!(
                cap.len() >= 3,
                "capability shorter than its header: {cap:?}"
            );
            assert_eq!(cap[0], 0x09);
            let is_vgpu = vgpu::is_vgpu_capability(cap);
            assert_eq!(is_vgpu, matches!(parsed, vgpu::ConfigSpace::Vgpu(_)));
        }
    }
    if let vgpu::ConfigSpace::Vgpu(Some(h)) = &parsed {
        assert!(h.version.chars().count() <= 10 && h.branch.chars().count() <= 10);
    }
    // The record walk on its own, over bytes that need not start a capability.
    if let Some(h) = vgpu::host_driver(data) {
        assert!(h.version.chars().count() <= 10 && h.branch.chars().count() <= 10);
    }
    let _ = parsed.capability();
}

/// KFD topology `properties` files, NUL-separated (one per partition of a GPU): each parsed as
/// a node's and as a memory bank's properties, then added up as one GPU's partitions.
pub fn kfd_properties(data: &[u8]) {
    let mut nodes = Vec::new();
    for chunk in data.split(|&b| b == 0) {
        let Ok(text) = std::str::from_utf8(chunk) else {
            continue;
        };
        let bank = amd::parse_mem_bank(text);
        let Ok(Some(props)) = amd::parse_properties(text) else {
            continue;
        };
        assert!(props.simd_count > 0);
        if let Some(cu) = props.cu_count {
            assert!(cu <= props.simd_count);
        }
        assert!(props.slot < 32);
        if let Some(v) = props.gfx_target_version {
            let _ = amd::gfx_target(v);
        }
        nodes.push(props.into_node(Path::new("/fuzz/kfd"), bank.ok().flatten()));
    }
    let mine: Vec<&KfdNode> = nodes.iter().collect();
    match amd::totals(&mine) {
        None => {
            // Empty, or a sum that does not fit in 64 bits.
            let simd = mine
                .iter()
                .try_fold(0u64, |acc, n| acc.checked_add(n.simd_count));
            let cu = mine
                .iter()
                .try_fold(0u64, |acc, n| acc.checked_add(n.cu_count.unwrap_or(0)));
            let mem = mine
                .iter()
                .try_fold(0u64, |acc, n| acc.checked_add(n.memory_bytes.unwrap_or(0)));
            assert!(
                mine.is_empty() || simd.is_none() || cu.is_none() || mem.is_none(),
                "totals refused sums that fit"
            );
        }
        Some(t) => {
            assert!(mine.iter().all(|n| n.simd_count <= t.simd_count));
            assert_eq!(t.gfx_target_version, mine[0].gfx_target_version);
        }
    }
}

/// The NVIDIA device plugin's configuration file (`sources.sharing.configFile`): what parses
/// survives the `gpu.sharing` attributes (a snapshot), and the shipped rules over it give only
/// valid labels.
pub fn sharing_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let sharing = match sharing::parse(Path::new(SHARING_FILE), text) {
        Ok(s) => s,
        Err(e) => {
            let shown = e.to_string();
            assert!(
                shown.starts_with(&format!("invalid sharing config {SHARING_FILE}:")),
                "error without its file: {shown}"
            );
            return;
        }
    };
    let attributes = sharing.attributes();
    assert_eq!(sharing::Sharing::from_attributes(&attributes), sharing);
    let mut features = fixed_node();
    features.attributes.remove(sharing::GPU_SHARING);
    for (k, v) in attributes {
        features.insert_attribute(sharing::GPU_SHARING, k, v);
    }
    let config = Config {
        profiles: vec![Profile::NvidiaGfd],
        ..Config::default()
    };
    DEFAULT_RULES.with(|rules| {
        let evaluated = evaluate_node(&features, &config, rules);
        assert_valid_output(&evaluated, &config);
    });
}

/// The configuration file (`--config FILE`).
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::parse(Path::new(CONFIG_FILE), text) {
        Ok(config) => {
            // The label policy and PCI settings apply to any node.
            let features = fixed_node();
            DEFAULT_RULES.with(|rules| {
                let evaluated = evaluate_node(&features, &config, rules);
                assert_valid_output(&evaluated, &config);
            });
        }
        Err(e) => {
            let shown = e.to_string();
            assert!(
                shown.starts_with(&format!("invalid config {CONFIG_FILE}:")),
                "error without its file: {shown}"
            );
        }
    }
}

/// Every label, annotation, extended resource and taint of an evaluation passes the
/// validation nfd-master (and the API server) applies.
fn assert_valid_output(evaluated: &Evaluated, config: &Config) {
    let out = &evaluated.output;
    for (k, v) in &out.labels {
        assert_eq!(
            validate_label(k, v, &config.labels).as_ref(),
            Ok(k),
            "invalid label {k}={v}"
        );
    }
    for (k, v) in &out.annotations {
        assert_eq!(
            validate_annotation(k, v).as_ref(),
            Ok(k),
            "invalid annotation {k}={v}"
        );
    }
    for (k, v) in &out.extended_resources {
        assert_eq!(
            validate_extended_resource(k, v).as_ref(),
            Ok(k),
            "invalid extended resource {k}={v}"
        );
    }
    for t in &out.taints {
        assert_eq!(validate_taint(t), Ok(()), "invalid taint {t:?}");
    }
}

/// A small H100 node with a little of everything rules read.
fn fixed_node() -> FeatureSet {
    let mut f = FeatureSet::default();
    for m in ["nvidia", "nvidia_uvm", "amdgpu", "i915", "vfio_pci"] {
        f.insert_flag("kernel.loadedmodule", m);
    }
    for c in ["AVX2", "AVX512F", "AMXTILE"] {
        f.insert_flag("cpu.cpuid", c);
    }
    for (k, v) in [
        ("count", "8"),
        ("vendors", "nvidia"),
        ("vendor", "nvidia"),
        ("product", "NVIDIA H100 80GB HBM3"),
        ("family", "hopper"),
        ("memory_mib_min", "81559"),
        ("memory_mib_max", "81559"),
        ("memory_mib_total", "652472"),
        ("homogeneous", "true"),
        ("compute_major", "9"),
        ("compute_minor", "0"),
        ("driver_version", "535.161.08"),
        ("driver_major", "535"),
        ("driver_minor", "161"),
        ("cuda_major", "12"),
        ("cuda_minor", "2"),
        ("mig_capable", "true"),
        ("mig_enabled", "false"),
        ("vgpu_present", "false"),
        ("virtual", "false"),
        ("count_nvidia", "8"),
        ("nvml", "true"),
    ] {
        f.insert_attribute("gpu.node", k, v);
    }
    f.insert_attribute("gpu.driver", "nvidia", "535.161.08");
    f.insert_attribute("gpu.driver", "cuda", "12.2");
    f.insert_attribute("gpu.sharing", "strategy", "time-slicing");
    f.insert_attribute("gpu.sharing", "replicas", "4");
    f.insert_attribute("gpu.sharing", "rename_by_default", "false");
    f.insert_attribute("gpu.migprofile", "1g.10gb", "7");
    f.insert_attribute("system.dmiid", "sys_vendor", "Dell Inc.");
    f.insert_attribute("system.dmiid", "product_name", "PowerEdge XE9680");
    f.insert_attribute("kernel.version", "full", "5.15.0-91-generic");
    f.insert_attribute("kernel.version", "major", "5");
    f.insert_attribute("kernel.version", "minor", "15");
    f.push_instance(
        "pci.device",
        [
            ("class", "0302"),
            ("vendor", "10de"),
            ("device", "2330"),
            ("subsystem_vendor", "10de"),
            ("subsystem_device", "16c1"),
            ("sriov_totalvfs", "16"),
            ("address", "0000:18:00.0"),
            ("numa_node", "0"),
            ("driver", "nvidia"),
            ("link_speed", "32.0"),
            ("link_width", "16"),
        ]
        .into_iter()
        .collect::<Instance>(),
    );
    f.push_instance(
        "pci.device",
        [
            ("class", "0300"),
            ("vendor", "102b"),
            ("device", "0536"),
            ("subsystem_vendor", "1028"),
            ("subsystem_device", "0b1f"),
            ("address", "0000:03:00.0"),
        ]
        .into_iter()
        .collect::<Instance>(),
    );
    f.push_instance(
        "gpu.device",
        [
            ("index", "0"),
            ("address", "0000:18:00.0"),
            ("vendor", "nvidia"),
            ("product", "NVIDIA H100 80GB HBM3"),
            ("memory_mib", "81559"),
            ("compute_major", "9"),
            ("compute_minor", "0"),
            ("family", "hopper"),
            ("mig_capable", "true"),
            ("mig_enabled", "true"),
            ("uuid", "GPU-2b2c3a8e-7d1c-4f0e-9a51-0d6b3c2a1f00"),
        ]
        .into_iter()
        .collect::<Instance>(),
    );
    f.push_instance(
        "gpu.mig",
        [
            ("parent_index", "0"),
            ("profile", "1g.10gb"),
            ("memory_mib", "9984"),
            ("multiprocessors", "16"),
        ]
        .into_iter()
        .collect::<Instance>(),
    );
    f
}
