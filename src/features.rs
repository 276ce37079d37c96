//! The feature model: what discovery produces and what rules read.
//!
//! The serialised form is exactly NFD's `NodeFeature.spec.features` (`flags`, `attributes`,
//! `instances`, each `{"<domain>.<feature>": {"elements": ...}}`), so a snapshot taken here can be
//! fed to NFD and a `kubectl get nodefeature -o yaml` can be fed here. Maps are ordered so that
//! every serialisation of the same features is byte-identical.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// NFD's `Nil`: a flag element carries no value. Serialises as `{}`; accepts anything (`{}`, `null`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Nil;

impl Serialize for Nil {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        s.serialize_map(Some(0))?.end()
    }
}

impl<'de> Deserialize<'de> for Nil {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Nil)
    }
}

/// A set of flag features of one feature name, e.g. `kernel.loadedmodule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagFeature {
    #[serde(default, deserialize_with = "null_as_default")]
    pub elements: BTreeMap<String, Nil>,
}

/// Key-value features of one feature name, e.g. `gpu.node`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeFeature {
    #[serde(default, deserialize_with = "null_as_default")]
    pub elements: BTreeMap<String, String>,
}

/// Instances of one feature name, e.g. one `pci.device` instance per PCI function.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceFeature {
    #[serde(default, deserialize_with = "null_as_default")]
    pub elements: Vec<Instance>,
}

/// An attribute name or value of an instance. Nearly all fit in 24 bytes (`subsystem_vendor`,
/// `0000:3b:00.0`, `10de`) and are stored inline: a node with thousands of PCI functions holds
/// tens of thousands of them, and an allocation each was a third of the scan's peak memory
/// (BENCHMARKS.md, "What was changed to meet the target").
pub type Text = compact_str::CompactString;

/// An instance's attributes, by name: a map kept as a vector sorted by name, allocated to its
/// size. A PCI function has 8 to 16 attributes; as a B-tree that was one 544-byte node up to 11
/// and three nodes (1.7 KB) above, which a host of thousands of functions holds until the
/// rules have run (BENCHMARKS.md, "Memory per PCI function").
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Attributes(Vec<(Text, Text)>);

impl Attributes {
    pub fn new() -> Self {
        Attributes(Vec::new())
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    pub fn get<Q: AsRef<str> + ?Sized>(&self, key: &Q) -> Option<&Text> {
        self.find(key.as_ref()).ok().map(|i| &self.0[i].1)
    }

    /// Sets `key` to `value`; the value it had, if any.
    pub fn insert(&mut self, key: Text, value: Text) -> Option<Text> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    /// In name order, as a `BTreeMap` would give them.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Text, &Text)> + ExactSizeIterator {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &Text> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| k)
    }

    /// Room for `n` attributes before the vector grows.
    pub fn with_capacity(n: usize) -> Self {
        Attributes(Vec::with_capacity(n))
    }

    /// Gives back the room past `extra` more attributes.
    pub fn shrink_to_len_plus(&mut self, extra: usize) {
        self.0.shrink_to(self.0.len() + extra);
    }
}

impl Extend<(Text, Text)> for Attributes {
    fn extend<I: IntoIterator<Item = (Text, Text)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl FromIterator<(Text, Text)> for Attributes {
    /// Sorted by name; of two pairs with one name the later wins, as in a `BTreeMap`.
    fn from_iter<I: IntoIterator<Item = (Text, Text)>>(iter: I) -> Self {
        let mut v: Vec<(Text, Text)> = iter.into_iter().collect();
        // Stable: equal names keep their order, and the last of them is kept below.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Text, Text)> = Vec::with_capacity(v.len());
        for pair in v {
            match out.last_mut() {
                Some(last) if last.0 == pair.0 => *last = pair,
                _ => out.push(pair),
            }
        }
        out.shrink_to_fit();
        Attributes(out)
    }
}

impl<'a> IntoIterator for &'a Attributes {
    type Item = (&'a Text, &'a Text);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Text, Text)>,
        fn(&'a (Text, Text)) -> (&'a Text, &'a Text),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl Serialize for Attributes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(BTreeMap::<Text, Text>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

/// One instance: a bag of attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    #[serde(default, deserialize_with = "null_as_default")]
    pub attributes: Attributes,
}

impl Instance {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(Text::as_str)
    }
}

impl<K: Into<Text>, V: Into<Text>> FromIterator<(K, V)> for Instance {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Instance {
            attributes: iter
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

/// All features of a node: NFD's `spec.features`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureSet {
    #[serde(default, deserialize_with = "null_as_default")]
    pub flags: BTreeMap<String, FlagFeature>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub attributes: BTreeMap<String, AttributeFeature>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub instances: BTreeMap<String, InstanceFeature>,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

impl FeatureSet {
    /// Adds a flag element, creating the feature if needed.
    pub fn insert_flag(&mut self, feature: &str, element: impl Into<String>) {
        self.flags
            .entry(feature.to_string())
            .or_default()
            .elements
            .insert(element.into(), Nil);
    }

    /// Sets an attribute element, creating the feature if needed.
    pub fn insert_attribute(
        &mut self,
        feature: &str,
        key: impl Into<String>,
        value: impl Into<String>,
    ) {
        self.attributes
            .entry(feature.to_string())
            .or_default()
            .elements
            .insert(key.into(), value.into());
    }

    /// Appends an instance, creating the feature if needed.
    pub fn push_instance(&mut self, feature: &str, instance: Instance) {
        self.instances
            .entry(feature.to_string())
            .or_default()
            .elements
            .push(instance);
    }

    /// The instances of a feature (empty when absent).
    pub fn instances(&self, feature: &str) -> &[Instance] {
        self.instances
            .get(feature)
            .map(|f| f.elements.as_slice())
            .unwrap_or(&[])
    }

    /// One attribute element, when present.
    pub fn attribute(&self, feature: &str, key: &str) -> Option<&str> {
        self.attributes
            .get(feature)?
            .elements
            .get(key)
            .map(String::as_str)
    }

    /// Canonical JSON of the snapshot (pretty, sorted keys).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a FeatureSet always serialises")
    }

    /// Canonical YAML of the snapshot.
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).expect("a FeatureSet always serialises")
    }
}

/// The feature catalog (docs/catalog.md#features, with this project's documented extensions): every feature name
/// discovery produces and, where the set is fixed, its element names. `rules check` warns about
/// names outside it, so a typo (`memory_mib_mn`) is caught before it silently never matches.
pub const CATALOG: &[(&str, Option<&[&str]>)] = &[
    (
        "pci.device",
        Some(&[
            "class",
            "vendor",
            "device",
            "subsystem_vendor",
            "subsystem_device",
            "sriov_totalvfs",
            "iommu_group/type",
            "iommu/intel-iommu/version",
            "address",
            "revision",
            "numa_node",
            "driver",
            "sriov_numvfs",
            "is_vf",
            "link_speed",
            "link_width",
            "max_link_speed",
            "max_link_width",
            "vendor_name",
            "device_name",
        ]),
    ),
    (
        "gpu.device",
        Some(&[
            "index",
            "address",
            "vendor",
            "vendor_id",
            "device_id",
            "class",
            "product",
            "memory_mib",
            "numa_node",
            "driver",
            "is_vf",
            "physfn",
            "sriov_numvfs",
            "sriov_totalvfs",
            "source",
            "uuid",
            "compute_major",
            "compute_minor",
            "family",
            "mig_capable",
            "mig_enabled",
            "vgpu",
            "vgpu_capability",
            "vgpu_host_driver_version",
            "vgpu_host_driver_branch",
            "gfx_target",
            "simd_count",
            "cu_count",
            "compute_partition",
            "memory_partition",
            "tiles",
            "xgmi_links",
            "nvlinks",
            "clique",
            "pcie_root",
            "health",
            // and health_<kind> for every kind of HEALTH_FAULTS (`catalog_has`)
        ]),
    ),
    (
        "gpu.mig",
        Some(&[
            "parent_index",
            "parent_address",
            "profile",
            "memory_mib",
            "multiprocessors",
            "slices_gi",
            "slices_ci",
            "engines_copy",
            "engines_decoder",
            "engines_encoder",
            "engines_jpeg",
            "engines_ofa",
        ]),
    ),
    // Profile name -> number of MIG devices.
    ("gpu.migprofile", None),
    (
        "gpu.node",
        Some(&[
            "count",
            "vendors",
            "memory_mib_min",
            "memory_mib_max",
            "memory_mib_total",
            "homogeneous",
            "models",
            "interconnect",
            "clique",
            "numa_nodes",
            "numa_gpus_max",
            "pcie_roots",
            "rdma_nic_local",
            "nvml",
            "vendor",
            "product",
            "family",
            "compute_major",
            "compute_minor",
            "driver_version",
            "driver_major",
            "driver_minor",
            "cuda_major",
            "cuda_minor",
            "mig_capable",
            "mig_enabled",
            "vgpu_present",
            "virtual",
            "health",
            "healthy_count",
            "expected_count",
            "missing",
            "health_missing",
            // and count_<vendor> for every vendor of the catalogue (`catalog_has`)
            "count_nvidia",
            "count_amd",
            "count_intel",
        ]),
    ),
    (
        "gpu.driver",
        // and the catalogue's drivers (`catalog_has`)
        Some(&["nvidia", "cuda", "amdgpu", "i915", "xe"]),
    ),
    (
        "accel.device",
        Some(&[
            "index",
            "address",
            "vendor",
            "vendor_id",
            "device_id",
            "class",
            "kind",
            "product",
            "memory_mib",
            "numa_node",
            "driver",
            "driver_version",
            "is_vf",
            "accel",
        ]),
    ),
    (
        "accel.node",
        // and count_<vendor>, count_model_<product> (`catalog_has`)
        Some(&[
            "count",
            "vendors",
            "kinds",
            "vendor",
            "kind",
            "product",
            "memory_mib_min",
            "memory_mib_max",
            "memory_mib_total",
            "models",
            "driver_version",
        ]),
    ),
    // Driver (module) -> version, for the catalogue's drivers (`catalog_has`).
    ("accel.driver", Some(&[])),
    // strategy, replicas, rename_by_default, replicas.<resource>.
    ("gpu.sharing", None),
    // DRA (`--dra`, or the daemon's ResourceSlices): src/dra.
    (
        "dra.device",
        Some(&["driver", "pool", "device", "pciBusID", "gpu"]),
    ),
    ("dra.node", Some(&["coverage", "devices", "drivers"])),
    (
        "dra.mismatch",
        Some(&["reason", "pciBusID", "attribute", "published", "measured"]),
    ),
    ("kernel.loadedmodule", None),
    ("system.dmiid", Some(&["sys_vendor", "product_name"])),
    ("rule.matched", None),
];

/// The faults `gpu.device` `health` lists, in its order (`discover::health`); each carries its
/// detail in `health_<kind>` (`-` as `_`).
pub const HEALTH_FAULTS: [&str; 10] = [
    "lost",
    "unbound",
    "pcie-link",
    "ecc",
    "remap",
    "xid",
    "nvlink",
    "fabric",
    "thermal",
    "ras",
];

/// The node faults `gpu.node` carries beside its GPUs' (`discover::missing`): each a count in
/// `<kind>` and its detail in `health_<kind>`.
pub const NODE_FAULTS: [&str; 1] = ["missing"];

/// Whether the catalog feature `feature` can have the element `key`; `None` when its set is
/// open. Beyond the fixed names: the per-vendor and per-model counts of `gpu.node` and
/// `accel.node` (`count_<vendor>`, `count_model_<name>`, `count_family_<name>`; an unknown
/// vendor by its 4-digit id) and the accelerator catalogue's drivers.
pub fn catalog_has(feature: &str, key: &str) -> Option<bool> {
    let elements = catalog_elements(feature)?;
    if elements.contains(&key) {
        return Some(true);
    }
    let cat = crate::catalogue::catalogue();
    Some(match feature {
        "gpu.node" | "accel.node" => key.strip_prefix("count_").is_some_and(|rest| {
            rest.starts_with("model_")
                || (feature == "gpu.node" && rest.starts_with("family_"))
                || cat.vendors.iter().any(|v| v.name == rest)
                || (rest.len() == 4 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
        }),
        "gpu.driver" | "accel.driver" => cat.version_keys().any(|k| k == key),
        "gpu.device" => key
            .strip_prefix("health_")
            .is_some_and(|k| HEALTH_FAULTS.iter().any(|f| f.replace('-', "_") == k)),
        _ => false,
    })
}

/// The element names of a catalog feature, when its set is fixed (see also `catalog_has`).
pub fn catalog_elements(feature: &str) -> Option<&'static [&'static str]> {
    CATALOG
        .iter()
        .find(|(name, _)| *name == feature)
        .and_then(|(_, elements)| *elements)
}

/// A snapshot file could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read snapshot {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid snapshot {path}:{line}:{column}: {message}")]
    Parse {
        path: PathBuf,
        line: u64,
        column: u64,
        message: String,
    },
}

/// The accepted top-level shapes: a bare features object, or a whole `NodeFeature`.
#[derive(Deserialize)]
#[serde(untagged)]
enum SnapshotDoc {
    NodeFeature { spec: NodeFeatureSpec },
    Bare(FeatureSet),
}

/// A whole `NodeFeature`: only its `spec.features` matter.
#[derive(Deserialize)]
struct NodeFeatureDoc {
    spec: NodeFeatureSpec,
}

#[derive(Deserialize)]
struct NodeFeatureSpec {
    #[serde(default, deserialize_with = "null_as_default")]
    features: FeatureSet,
}

/// Loads a snapshot: JSON or YAML; NFD's features object or a whole `NodeFeature`. `-` reads
/// standard input (`gpu-labeler features | gpu-labeler labels --features -`).
pub fn load_snapshot(path: &Path) -> Result<FeatureSet, SnapshotError> {
    let stdin = path == Path::new("-");
    let limit = crate::sysfs::MAX_INPUT_BYTES;
    let text = if stdin {
        crate::sysfs::stdin_text(limit)
    } else {
        crate::sysfs::read_regular_text(path, limit)
    };
    let name = if stdin { Path::new("<stdin>") } else { path };
    let text = text.map_err(|source| SnapshotError::Read {
        path: name.to_path_buf(),
        source,
    })?;
    parse_snapshot(name, &text)
}

/// A snapshot in its canonical shape (what `features -o json|yaml` writes: only the three known
/// keys, every attribute a string), read straight into its types.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StrictSet {
    #[serde(default, deserialize_with = "null_as_default")]
    flags: BTreeMap<String, FlagFeature>,
    #[serde(default, deserialize_with = "null_as_default")]
    attributes: BTreeMap<String, AttributeFeature>,
    #[serde(default, deserialize_with = "null_as_default")]
    instances: BTreeMap<String, InstanceFeature>,
}

impl From<StrictSet> for FeatureSet {
    fn from(s: StrictSet) -> Self {
        FeatureSet {
            flags: s.flags,
            attributes: s.attributes,
            instances: s.instances,
        }
    }
}

/// A whole `NodeFeature` whose features are in the canonical shape.
#[derive(Deserialize)]
struct StrictDoc {
    spec: StrictSpec,
}

#[derive(Deserialize)]
struct StrictSpec {
    #[serde(default)]
    features: Option<StrictSet>,
}

/// The canonical shape read without an intermediate tree: memory a small multiple of the text
/// (a 60 MB snapshot: 704 MB peak through a tree, BENCHMARKS.md). `None` when the text is not
/// in that shape; the general path then reads it (and says what is wrong, where).
fn parse_canonical(text: &str, is_json: bool) -> Option<FeatureSet> {
    fn read<T: serde::de::DeserializeOwned>(text: &str, is_json: bool) -> Option<T> {
        if is_json {
            serde_json::from_str(text).ok()
        } else {
            serde_saphyr::from_str(text).ok()
        }
    }
    // Through `Option`: an empty or null document is not an empty snapshot (the general path
    // refuses it).
    if let Some(Some(set)) = read::<Option<StrictSet>>(text, is_json) {
        return Some(set.into());
    }
    read::<Option<StrictDoc>>(text, is_json)
        .flatten()
        .map(|d| d.spec.features.map(Into::into).unwrap_or_default())
}

/// Parses snapshot text; `path` is only used in error messages.
pub fn parse_snapshot(path: &Path, text: &str) -> Result<FeatureSet, SnapshotError> {
    let parse_err = |line: u64, column: u64, message: String| SnapshotError::Parse {
        path: path.to_path_buf(),
        line,
        column,
        message,
    };
    let is_json = text.trim_start().starts_with('{');
    if let Some(set) = parse_canonical(text, is_json) {
        return Ok(set);
    }
    let yaml_err = |e: serde_saphyr::Error| {
        let (line, column) = crate::yaml::error_position(&e);
        parse_err(line, column, crate::yaml::error_message(&e))
    };
    let mut value: serde_json::Value = if is_json {
        serde_json::from_str(text)
            .map_err(|e| parse_err(e.line() as u64, e.column() as u64, e.to_string()))?
    } else {
        serde_saphyr::from_str(text).map_err(yaml_err)?
    };
    // A structural problem is reported where its feature is written.
    check_shape(&mut value).map_err(|(feature, message)| {
        let (line, column) = locate(text, &feature);
        parse_err(line, column, message)
    })?;
    if !is_json {
        // Read again with strings as the target, so that an unquoted scalar is the string it
        // spells: `class: 0302` is "0302" and `driver: 535.10` is "535.10" (through a number
        // they would be "302" and "535.1").
        return Ok(if value.get("spec").is_some() {
            serde_saphyr::from_str::<NodeFeatureDoc>(text)
                .map_err(yaml_err)?
                .spec
                .features
        } else {
            serde_saphyr::from_str::<FeatureSet>(text).map_err(yaml_err)?
        });
    }
    let doc: SnapshotDoc =
        serde_json::from_value(value).map_err(|e| parse_err(1, 1, e.to_string()))?;
    Ok(match doc {
        SnapshotDoc::NodeFeature { spec } => spec.features,
        SnapshotDoc::Bare(f) => f,
    })
}

/// 1-based line and column of the first occurrence of `needle` (a feature name) in `text`;
/// `(1, 1)` when it is not there.
fn locate(text: &str, needle: &str) -> (u64, u64) {
    if needle.is_empty() {
        return (1, 1);
    }
    text.lines()
        .enumerate()
        .find_map(|(i, line)| line.find(needle).map(|c| (i as u64 + 1, c as u64 + 1)))
        .unwrap_or((1, 1))
}

/// Checks the structure, naming the malformed feature (serde's untagged enums only say "did not
/// match any variant"), and turns unquoted numbers and booleans where NFD has strings (`count: 8`
/// in a hand-written YAML snapshot) into the strings they spell. Errors are (feature, message).
fn check_shape(value: &mut serde_json::Value) -> Result<(), (String, String)> {
    use serde_json::Value;
    let top = |m: &str| (String::new(), m.to_string());
    let is_nodefeature = value.get("spec").is_some();
    let features = if is_nodefeature {
        match value.get_mut("spec").and_then(|s| s.get_mut("features")) {
            Some(Value::Null) | None => return Ok(()),
            Some(f) => f,
        }
    } else {
        value
    };
    let features = features.as_object_mut().ok_or_else(|| {
        top("expected an object with flags/attributes/instances, or a NodeFeature")
    })?;
    for (kind, v) in features.iter_mut() {
        if !matches!(kind.as_str(), "flags" | "attributes" | "instances") {
            return Err((
                kind.clone(),
                format!("unknown key `{kind}` (expected flags, attributes, instances)"),
            ));
        }
        let map = match v {
            Value::Null => continue,
            Value::Object(m) => m,
            _ => return Err((kind.clone(), format!("`{kind}` must be an object"))),
        };
        for (name, set) in map.iter_mut() {
            let elements = set.get_mut("elements");
            let ok = match (kind.as_str(), elements) {
                (_, None | Some(Value::Null)) => true,
                ("flags", Some(Value::Object(_))) => true,
                ("attributes", Some(Value::Object(m))) => stringify(m),
                ("instances", Some(Value::Array(items))) => {
                    items.iter_mut().all(|i| match i.get_mut("attributes") {
                        None | Some(Value::Null) => true,
                        Some(Value::Object(m)) => stringify(m),
                        Some(_) => false,
                    })
                }
                _ => false,
            };
            if !ok {
                let want = match kind.as_str() {
                    "flags" => "a map of names",
                    "attributes" => "a map of string values",
                    _ => "a list of {attributes: {string: string}}",
                };
                return Err((
                    name.clone(),
                    format!("{kind}.{name}.elements must be {want}"),
                ));
            }
        }
    }
    Ok(())
}

/// Numbers and booleans become strings; false when a value is a list, a map or null.
fn stringify(m: &mut serde_json::Map<String, serde_json::Value>) -> bool {
    use serde_json::Value;
    m.values_mut().all(|v| match v {
        Value::String(_) => true,
        Value::Number(n) => {
            *v = Value::String(n.to_string());
            true
        }
        Value::Bool(b) => {
            *v = Value::String(b.to_string());
            true
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attributes behave as the `BTreeMap` they replaced: name order, one value per name (the
    /// last one set), the same JSON.
    #[test]
    fn attributes_are_a_map_in_name_order() {
        let t = |s: &str| Text::from(s);
        let mut a: Attributes = [("vendor", "10de"), ("class", "0302"), ("vendor", "1002")]
            .iter()
            .map(|(k, v)| (t(k), t(v)))
            .collect();
        assert_eq!(
            a.iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
            [("class", "0302"), ("vendor", "1002")]
        );
        assert_eq!(a.insert(t("device"), t("2330")), None);
        assert_eq!(a.insert(t("class"), t("0300")), Some(t("0302")));
        assert_eq!(a.get("class").map(Text::as_str), Some("0300"));
        assert_eq!(a.get("driver"), None);
        a.extend([(t("address"), t("0000:19:00.0"))]);
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(
            json,
            r#"{"address":"0000:19:00.0","class":"0300","device":"2330","vendor":"1002"}"#
        );
        let back: Attributes = serde_json::from_str(&json).unwrap();
        assert_eq!(back, a);
        let map: BTreeMap<&Text, &Text> = a.iter().collect();
        assert_eq!(serde_json::to_string(&map).unwrap(), json);
    }

    /// `rules check` knows the per-vendor counts and the catalogue's drivers, and still catches
    /// a typo in them.
    #[test]
    fn catalog_has_the_catalogues_vendors_and_drivers() {
        let has = |f, k| catalog_has(f, k);
        assert_eq!(has("accel.node", "count_habana"), Some(true));
        assert_eq!(has("accel.node", "count_1fc9"), Some(true));
        assert_eq!(has("accel.node", "count_model_Wormhole"), Some(true));
        assert_eq!(has("accel.node", "count_habanna"), Some(false));
        assert_eq!(has("gpu.node", "count_mthreads"), Some(true));
        assert_eq!(has("gpu.node", "count_family_hopper"), Some(true));
        assert_eq!(has("accel.node", "count_family_hopper"), Some(false));
        assert_eq!(has("gpu.driver", "hydcu"), Some(true));
        assert_eq!(has("accel.driver", "habanalabs"), Some(true));
        assert_eq!(has("accel.driver", "neuron"), Some(true));
        assert_eq!(has("accel.driver", "nvidia"), Some(false));
        assert_eq!(has("accel.device", "kind"), Some(true));
        assert_eq!(has("gpu.sharing", "anything"), None);
    }

    fn sample() -> FeatureSet {
        let mut f = FeatureSet::default();
        f.insert_flag("kernel.loadedmodule", "nvidia");
        f.insert_attribute("gpu.node", "count", "8");
        f.push_instance(
            "pci.device",
            [("class", "0302"), ("vendor", "10de")]
                .into_iter()
                .collect(),
        );
        f
    }

    #[test]
    fn serialises_as_nfd_spec_features() {
        let json: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "flags": {"kernel.loadedmodule": {"elements": {"nvidia": {}}}},
                "attributes": {"gpu.node": {"elements": {"count": "8"}}},
                "instances": {"pci.device": {"elements": [{"attributes": {"class": "0302", "vendor": "10de"}}]}}
            })
        );
    }

    #[test]
    fn json_and_yaml_round_trip() {
        let f = sample();
        let p = Path::new("x");
        assert_eq!(parse_snapshot(p, &f.to_json()).unwrap(), f);
        assert_eq!(parse_snapshot(p, &f.to_yaml()).unwrap(), f);
    }

    #[test]
    fn accepts_whole_node_feature() {
        let text = r#"
apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeature
metadata:
  name: node-1
  labels:
    nfd.node.kubernetes.io/node-name: node-1
spec:
  features:
    flags:
      kernel.loadedmodule:
        elements:
          nvidia: {}
    attributes:
      gpu.node:
        elements:
          count: "8"
    instances:
      pci.device:
        elements:
        - attributes:
            class: "0302"
            vendor: "10de"
  labels:
    foo: bar
"#;
        assert_eq!(
            parse_snapshot(Path::new("nf.yaml"), text).unwrap(),
            sample()
        );
    }

    #[test]
    fn unquoted_numbers_and_booleans_are_the_strings_they_spell() {
        let f = parse_snapshot(
            Path::new("s.yaml"),
            "attributes:\n  gpu.node:\n    elements:\n      count: 8\n      homogeneous: true\n",
        )
        .unwrap();
        assert_eq!(f.attribute("gpu.node", "count"), Some("8"));
        assert_eq!(f.attribute("gpu.node", "homogeneous"), Some("true"));
    }

    #[test]
    fn unquoted_yaml_scalars_keep_their_spelling() {
        let text = "instances:\n  pci.device:\n    elements:\n      - attributes: {class: 0302, vendor: 10de, revision: 0x01}\nattributes:\n  gpu.driver:\n    elements: {nvidia: 535.10, cuda: 12.0}\n";
        let f = parse_snapshot(Path::new("s.yaml"), text).unwrap();
        assert_eq!(
            f.instances("pci.device")[0].attributes,
            [("class", "0302"), ("revision", "0x01"), ("vendor", "10de")]
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect::<Attributes>()
        );
        assert_eq!(f.attribute("gpu.driver", "nvidia"), Some("535.10"));
        assert_eq!(f.attribute("gpu.driver", "cuda"), Some("12.0"));
        let nf = format!(
            "apiVersion: v1alpha1\nkind: NodeFeature\nspec:\n  features:\n{}",
            text.lines()
                .map(|l| format!("    {l}\n"))
                .collect::<String>()
        );
        assert_eq!(parse_snapshot(Path::new("nf.yaml"), &nf).unwrap(), f);
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let e = parse_snapshot(Path::new("snap.yaml"), "flags:\n  a: [\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid snapshot snap.yaml:"), "{e}");
        let e = parse_snapshot(Path::new("snap.json"), "{\"flags\": {\n  \"a\": }")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid snapshot snap.json:2:"), "{e}");
        let e = parse_snapshot(
            Path::new("s.yaml"),
            "attributes:\n  gpu.node:\n    elements:\n      count: [8]\n",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "invalid snapshot s.yaml:2:3: attributes.gpu.node.elements must be a map of string values"
        );
    }
}
