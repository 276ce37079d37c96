//! The configuration file (docs/catalog.md#config): YAML, every key optional, unknown keys rejected so that a
//! typo is an error naming file, line and column instead of a silently ignored setting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub sources: SourcesConfig,
    #[serde(default)]
    pub labels: LabelPolicy,
    /// Compatibility profiles; an unknown name is an error, not a silently missing label set.
    #[serde(default)]
    pub profiles: Vec<Profile>,
    #[serde(default)]
    pub mig_strategy: MigStrategy,
    /// The nvidia-gfd profile on a node whose GPUs a DRA driver publishes (docs/dra.md).
    #[serde(default)]
    pub gfd_on_dra: GfdOnDra,
    #[serde(default)]
    pub publish: Publish,
}

/// `gfdOnDra`: what the nvidia-gfd profile labels where NVIDIA's DRA driver publishes the GPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GfdOnDra {
    /// The hardware's labels only: not those of the device plugin's view (`mig.strategy`,
    /// `gpu.replicas`, `gpu.sharing-strategy`, the `mig-*` resources; kubernetes-sigs/
    /// dra-driver-nvidia-gpu#1244), which describe resources such a node does not have.
    #[default]
    Hardware,
    /// Every label, as on a device-plugin node.
    All,
}

/// A compatibility profile: another tool's label set, computed from the same features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Profile {
    /// NVIDIA GPU Feature Discovery's `nvidia.com/*` labels (docs/nvidia-gfd.md).
    #[serde(rename = "nvidia-gfd")]
    NvidiaGfd,
}

impl Profile {
    pub const ALL: [Profile; 1] = [Profile::NvidiaGfd];

    /// The name the config and `--profile` use.
    pub fn name(self) -> &'static str {
        match self {
            Profile::NvidiaGfd => "nvidia-gfd",
        }
    }
}

/// A profile by name (`--profile`, `GPU_LABELER_PROFILES`).
pub fn parse_profile(s: &str) -> Result<Profile, String> {
    Profile::ALL
        .into_iter()
        .find(|p| p.name() == s)
        .ok_or_else(|| format!("unknown profile {s:?} (known: nvidia-gfd)"))
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourcesConfig {
    #[serde(default)]
    pub pci: PciConfig,
    #[serde(default)]
    pub nvml: NvmlConfig,
    #[serde(default)]
    pub sharing: SharingConfig,
    #[serde(default)]
    pub health: HealthConfig,
}

/// `sources.health`: which GPU faults count, and how long one is held after it is gone
/// (`gpu.device` `health`, docs/catalog.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthConfig {
    /// Report `pcie-link` when a GPU's PCIe link width trained below its maximum. Off for
    /// parts that narrow the link when idle.
    #[serde(default = "default_true")]
    pub pcie_link: bool,
    /// A fault clears only after it has been absent this long, so that an intermittent fault
    /// does not flap labels and taints (`0s`: at once).
    #[serde(default = "default_clear_after", deserialize_with = "any_duration")]
    pub clear_after: Duration,
    /// The XIDs that count as critical (`xid` fault), NVIDIA's documented defaults unless set.
    #[serde(default = "default_critical_xids", deserialize_with = "xid_list")]
    pub critical_xids: Vec<u32>,
    /// The node's cloud instance type, for the expected-GPU table (`missing` fault); empty:
    /// none given (on AWS the DMI product name says it).
    #[serde(default)]
    pub instance_type: String,
    /// The site's rows of the expected-GPU table, looked up before the shipped ones
    /// (data/expected-gpus.yaml).
    #[serde(default)]
    pub expected_gpus: Vec<ExpectedGpus>,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            pcie_link: true,
            clear_after: default_clear_after(),
            critical_xids: default_critical_xids(),
            instance_type: String::new(),
            expected_gpus: Vec::new(),
        }
    }
}

/// One row of the expected-GPU table: the GPUs (`count`) of a board (`productName`, and
/// `boardName` where one product covers several boards) or of a cloud instance type
/// (`instanceType`), and where the count comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawExpectedGpus")]
pub struct ExpectedGpus {
    pub key: ExpectedKey,
    pub count: usize,
    pub source: String,
}

/// What an expected-GPU row is looked up by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectedKey {
    Board {
        product_name: String,
        board_name: Option<String>,
    },
    InstanceType(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawExpectedGpus {
    product_name: Option<String>,
    board_name: Option<String>,
    instance_type: Option<String>,
    #[serde(deserialize_with = "count_number")]
    count: u32,
    #[serde(default)]
    source: String,
}

/// A GPU count, as YAML's number or (the config's second reading keeps numbers as their text:
/// `every_problem`) its text.
fn count_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Count {
        Number(u32),
        Text(String),
    }
    match Count::deserialize(d)? {
        Count::Number(n) => Ok(n),
        Count::Text(t) => t
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("count {t:?} is not a number"))),
    }
}

impl TryFrom<RawExpectedGpus> for ExpectedGpus {
    type Error = String;
    fn try_from(r: RawExpectedGpus) -> Result<Self, String> {
        let key = match (r.product_name, r.board_name, r.instance_type) {
            (Some(p), b, None) if !p.is_empty() => ExpectedKey::Board {
                product_name: p,
                board_name: b,
            },
            (None, None, Some(t)) if !t.is_empty() => ExpectedKey::InstanceType(t),
            _ => {
                return Err(
                    "an expected-GPU row names either a productName (with an optional boardName) or an instanceType".into(),
                );
            }
        };
        if r.count == 0 {
            return Err("an expected-GPU row's count is at least 1".into());
        }
        Ok(ExpectedGpus {
            key,
            count: r.count as usize,
            source: r.source,
        })
    }
}

fn default_clear_after() -> Duration {
    Duration::from_secs(300)
}

/// The XIDs whose immediate action in NVIDIA's Xid catalog
/// (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) is a GPU reset or a restart
/// of the node or VM (RESET_GPU, RESTART_BM, RESTART_VM), with 48 (double-bit ECC) and 74
/// (NVLink) whose workflows end in a reset. Not the RESTART_APP and IGNORE ones (13, 31, 43,
/// 63, 92, 94, ...), nor 144-150 and 154, whose action depends on a sub-code (docs/health.md).
/// A list of XIDs: each a whole number, as YAML's number or as its text (the config's error
/// walk, `every_problem`, hands every scalar over as text).
fn xid_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
    struct Xid(u32);
    impl<'de> Deserialize<'de> for Xid {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl serde::de::Visitor<'_> for V {
                type Value = Xid;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an XID (a whole number)")
                }
                fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Xid, E> {
                    u32::try_from(n)
                        .map(Xid)
                        .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(n), &self))
                }
                fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Xid, E> {
                    u64::try_from(n)
                        .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(n), &self))
                        .and_then(|n| self.visit_u64(n))
                }
                fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Xid, E> {
                    match s.parse::<u32>() {
                        Ok(n) => Ok(Xid(n)),
                        Err(_) => Err(E::invalid_value(serde::de::Unexpected::Str(s), &self)),
                    }
                }
            }
            d.deserialize_any(V)
        }
    }
    Ok(Vec::<Xid>::deserialize(d)?
        .into_iter()
        .map(|x| x.0)
        .collect())
}

pub fn default_critical_xids() -> Vec<u32> {
    vec![
        46, 48, 62, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 143, 151, 155, 156, 158,
    ]
}

/// NFD's `sources.pci` keys with NFD's defaults.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PciConfig {
    #[serde(default = "default_class_whitelist")]
    pub device_class_whitelist: Vec<String>,
    #[serde(default = "default_label_fields")]
    pub device_label_fields: Vec<String>,
}

impl Default for PciConfig {
    fn default() -> Self {
        PciConfig {
            device_class_whitelist: default_class_whitelist(),
            device_label_fields: default_label_fields(),
        }
    }
}

fn default_class_whitelist() -> Vec<String> {
    vec!["03".into(), "0b40".into(), "12".into()]
}

fn default_label_fields() -> Vec<String> {
    vec!["class".into(), "vendor".into()]
}

/// `sources.nvml.enabled`: `auto`, `true` or `false`, as text or as a YAML boolean (`true`,
/// and YAML 1.1's `yes`, which serde-saphyr reads as one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NvmlEnabled {
    #[default]
    Auto,
    True,
    False,
}

impl<'de> Deserialize<'de> for NvmlEnabled {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = NvmlEnabled;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("auto, true or false")
            }
            fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<NvmlEnabled, E> {
                Ok(if b {
                    NvmlEnabled::True
                } else {
                    NvmlEnabled::False
                })
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<NvmlEnabled, E> {
                match s {
                    "auto" => Ok(NvmlEnabled::Auto),
                    "true" => Ok(NvmlEnabled::True),
                    "false" => Ok(NvmlEnabled::False),
                    _ => Err(E::unknown_variant(s, &["auto", "true", "false"])),
                }
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NvmlConfig {
    #[serde(default)]
    pub enabled: NvmlEnabled,
    #[serde(default)]
    pub lib_path: String,
    /// How long one NVML scan (in its child process) may take before the child is killed.
    #[serde(
        default = "default_nvml_timeout",
        deserialize_with = "positive_duration"
    )]
    pub timeout: Duration,
    /// How long the GPUs' NVML-only values are kept while NVML fails (`0s`: not at all). The
    /// default, `forever`, keeps them while the GPUs they describe are on the PCI bus: a wedged
    /// NVML is not a reason for pods to lose their placement on GPUs that are fine.
    #[serde(default = "default_nvml_grace", deserialize_with = "grace_duration")]
    pub grace_period: Duration,
    /// How often `run` asks NVML (in its child) for the state that changes while a node runs
    /// (MIG mode and layout, GPUs lost), to relabel at once when it does (`0s`: never; the
    /// interval's full scan still sees it).
    #[serde(
        default = "default_nvml_check_interval",
        deserialize_with = "any_duration"
    )]
    pub check_interval: Duration,
}

impl Default for NvmlConfig {
    fn default() -> Self {
        NvmlConfig {
            enabled: NvmlEnabled::default(),
            lib_path: String::new(),
            timeout: default_nvml_timeout(),
            grace_period: default_nvml_grace(),
            check_interval: default_nvml_check_interval(),
        }
    }
}

fn default_nvml_check_interval() -> Duration {
    Duration::from_secs(5)
}

fn default_nvml_timeout() -> Duration {
    Duration::from_secs(10)
}

/// `gracePeriod: forever`.
pub const FOREVER: Duration = Duration::MAX;

fn default_nvml_grace() -> Duration {
    FOREVER
}

fn grace_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    match s.trim() {
        "forever" => Ok(FOREVER),
        "0" | "0s" => Ok(Duration::ZERO),
        _ => parse_duration(&s).map_err(serde::de::Error::custom),
    }
}

fn positive_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    parse_duration(&String::deserialize(d)?).map_err(serde::de::Error::custom)
}

fn any_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    if matches!(s.trim(), "0" | "0s") {
        return Ok(Duration::ZERO);
    }
    parse_duration(&s).map_err(serde::de::Error::custom)
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SharingConfig {
    #[serde(default)]
    pub config_file: String,
}

/// Label namespace policy, as nfd-master's `extraLabelNs` / `denyLabelNs`, plus the namespaces
/// this agent may write at all (`allowedNs`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelPolicy {
    #[serde(default)]
    pub extra_label_ns: Vec<String>,
    #[serde(default)]
    pub deny_label_ns: Vec<String>,
    /// The only label namespaces written (`*.x`: the sub-domains of `x`); a label in any other
    /// is refused and reported, so that one key the admission policy would refuse does not
    /// fail the whole apply. Unset: NFD's policy alone, except for `run` with the node sink,
    /// where it defaults to the shipped admission policy's (`POLICY_NAMESPACES`).
    #[serde(default)]
    pub allowed_ns: Option<Vec<String>>,
    /// Within `nvidia.com`, only the keys the `nvidia-gfd` profile writes ([`GFD_KEYS`]): what
    /// deploy/components/nvidia-gfd's policy admits. Set by the daemon for the node sink with
    /// that profile, never read from a file.
    #[serde(skip)]
    pub gfd_keys_only: bool,
}

/// The label namespaces the shipped admission policy (deploy/base/admission-policy.yaml,
/// `allowedKey`) lets the agent add; `nvidia.com` (GFD's keys) joins them with the
/// `nvidia-gfd` profile, as deploy/components/nvidia-gfd joins them in the policy.
pub const POLICY_NAMESPACES: [&str; 4] = [
    "feature.node.kubernetes.io",
    "*.feature.node.kubernetes.io",
    "profile.node.kubernetes.io",
    "*.profile.node.kubernetes.io",
];

/// Every `nvidia.com/` key the `nvidia-gfd` profile can write (src/labels/gfd.rs), as a regular
/// expression over the whole key (RE2 syntax, as the admission policy's CEL `matches` takes it).
/// The one list: deploy/components/nvidia-gfd's `allowedKey` is this pattern after NFD's
/// namespaces (tests/deploy.rs holds them equal, and runs the profile on every fixture,
/// strategy and sharing mode against the real admission plugin).
pub const GFD_KEYS: &str = r"nvidia\.com/(gpu\.(product|count|memory|family|machine|mode|replicas|sharing-strategy|clique|compute\.(major|minor)|multiprocessors|slices\.(gi|ci)|engines\.(copy|decoder|encoder|jpeg|ofa))|cuda\.(driver|runtime|driver-version|runtime-version)\.(major|minor|rev|revision|full)|mig\.(capable|strategy)|mps\.capable|vgpu\.(present|host-driver-version|host-driver-branch)|mig-[a-z0-9.]+\.(count|memory|multiprocessors|product|replicas|sharing-strategy|slices\.(gi|ci)|engines\.(copy|decoder|encoder|jpeg|ofa))|gfd\.timestamp)";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MigStrategy {
    #[default]
    None,
    Single,
    Mixed,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Publish {
    /// Checked when the file is read, so that a typo is reported with file:line:column by every
    /// command, not only by `run` and without a position.
    #[serde(default = "default_sink", deserialize_with = "sink_name")]
    pub sink: String,
    #[serde(default = "default_interval", deserialize_with = "duration_text")]
    pub interval: String,
    /// Relabel within seconds of a change (files, uevents, NVML's check), not only every
    /// interval.
    #[serde(default = "default_true")]
    pub events: bool,
    /// A relabel for a change of the rules or config files waits a random part of this first:
    /// a ConfigMap edit reaches a whole fleet's agents within a second, and would otherwise
    /// arrive at the API server as one write per node in that second. Node-local changes
    /// (uevents, NVML, the Node watch) are not delayed.
    /// `0s` turns it off; at most an hour.
    #[serde(default = "default_spread", deserialize_with = "spread_duration")]
    pub spread: Duration,
    /// The node sink applies the rules' `taints` (NFD's `enable-taints`), in the allowed
    /// namespaces only. Off by default.
    #[serde(default)]
    pub taints: bool,
    /// The node sink sets a `GPUHealthy` condition on `nodes/status`. Off by default.
    #[serde(default)]
    pub condition: bool,
    /// The node sink takes a GPU with a held fault out of DRA allocation: one
    /// `DeviceTaintRule` per slice device of that GPU (docs/taints.md#device-taints). Off by
    /// default.
    #[serde(default)]
    pub device_taints: bool,
    /// The effect of a device taint, by fault kind, over the defaults (`dra::taints`).
    #[serde(default, deserialize_with = "device_taint_effects")]
    pub device_taint_effects: BTreeMap<String, DeviceTaintEffect>,
}

/// The effect of a device taint for each fault kind a GPU can have (`features::HEALTH_FAULTS`,
/// docs/health.md), unless `publish.deviceTaintEffects` says otherwise: `NoSchedule` where the
/// GPU cannot be trusted with new work (gone, off its driver, memory errors, a critical XID, its
/// NVLink fabric failed, uncorrectable RAS errors); `None`, informational, where it still
/// computes correctly but slower (a narrowed link, an NVLink down, thermal slowdown).
/// `NoExecute` evicts running pods: only a site may choose it.
pub const DEVICE_TAINT_DEFAULTS: [(&str, DeviceTaintEffect); 10] = [
    ("lost", DeviceTaintEffect::NoSchedule),
    ("unbound", DeviceTaintEffect::NoSchedule),
    ("pcie-link", DeviceTaintEffect::None),
    ("ecc", DeviceTaintEffect::NoSchedule),
    ("remap", DeviceTaintEffect::NoSchedule),
    ("xid", DeviceTaintEffect::NoSchedule),
    ("nvlink", DeviceTaintEffect::None),
    ("fabric", DeviceTaintEffect::NoSchedule),
    ("thermal", DeviceTaintEffect::None),
    ("ras", DeviceTaintEffect::NoSchedule),
];

fn device_taint_effects<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, DeviceTaintEffect>, D::Error> {
    let map = BTreeMap::<String, DeviceTaintEffect>::deserialize(d)?;
    let kinds = DEVICE_TAINT_DEFAULTS.iter().map(|(k, _)| *k);
    for k in map.keys() {
        if !kinds.clone().any(|x| x == k) {
            let hint = crate::names::closest(k, kinds.clone())
                .map(|c| format!(" (did you mean {c:?}?)"))
                .unwrap_or_default();
            return Err(serde::de::Error::custom(format!(
                "unknown fault kind {k:?}{hint}, expected one of {}",
                kinds.collect::<Vec<_>>().join(", ")
            )));
        }
    }
    Ok(map)
}

/// What a device taint does to claims that do not tolerate it (`resource.k8s.io`
/// `DeviceTaint.effect`), weakest first: a rule for several faults takes the strongest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum DeviceTaintEffect {
    /// Informational: allocation goes on.
    None,
    /// No new allocation of the device.
    NoSchedule,
    /// No new allocation, and the pods using it are evicted.
    NoExecute,
}

impl DeviceTaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceTaintEffect::None => "None",
            DeviceTaintEffect::NoSchedule => "NoSchedule",
            DeviceTaintEffect::NoExecute => "NoExecute",
        }
    }
}

fn default_spread() -> Duration {
    Duration::from_secs(2)
}

fn spread_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let d = any_duration(d)?;
    if d > Duration::from_secs(3600) {
        return Err(serde::de::Error::custom(
            "invalid spread: at most 1h".to_string(),
        ));
    }
    Ok(d)
}

fn default_true() -> bool {
    true
}

/// The sinks `publish.sink` may name (`--sink`'s values).
pub const SINKS: [&str; 4] = ["node", "nodefeature", "features-file", "stdout"];

fn sink_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if SINKS.contains(&s.as_str()) {
        Ok(s)
    } else {
        Err(serde::de::Error::custom(format!(
            "unknown sink {s:?}, expected one of {}",
            SINKS.join(", ")
        )))
    }
}

fn duration_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    parse_interval(&s).map_err(serde::de::Error::custom)?;
    Ok(s)
}

/// The shortest publish interval. Below it the agent would rescan the node almost without pause
/// (`interval: 1ms`), which is never what was meant; relabelling on a change does not wait for
/// the interval anyway (the events).
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// A publish interval (`publish.interval`, `--interval`): a duration of at least
/// [`MIN_INTERVAL`].
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < MIN_INTERVAL {
        return Err(format!(
            "invalid interval {s:?}: at least 1s (how often the node is scanned)"
        ));
    }
    Ok(d)
}

/// Parses a duration: `90s`, `5m`, `1h30m`, `1.5s`, `500ms` (humantime's spans, which include
/// Go's); a bare number is seconds. Zero, negative and absurdly long durations are refused.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty duration".into());
    }
    let d = match t.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n <= MAX_DURATION_SECS => Duration::from_secs_f64(n),
        Ok(_) => return Err(format!("invalid duration {s:?}: must be positive")),
        Err(_) => humantime::parse_duration(t)
            .map_err(|_| format!("invalid duration {s:?}: expected e.g. 60s, 5m, 1h"))?,
    };
    if d.is_zero() || d.as_secs_f64() > MAX_DURATION_SECS {
        return Err(format!("invalid duration {s:?}: must be positive"));
    }
    Ok(d)
}

/// About 31 years: anything longer is a typo.
const MAX_DURATION_SECS: f64 = 1e9;

impl Default for Publish {
    fn default() -> Self {
        Publish {
            sink: default_sink(),
            interval: default_interval(),
            events: true,
            spread: default_spread(),
            taints: false,
            condition: false,
            device_taints: false,
            device_taint_effects: BTreeMap::new(),
        }
    }
}

fn default_sink() -> String {
    "node".into()
}

fn default_interval() -> String {
    "60s".into()
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid config {path}:{line}:{column}: {message}")]
    Parse {
        path: PathBuf,
        line: u64,
        column: u64,
        message: String,
    },
    /// Every problem of a file that parses as YAML, one line each, in file order.
    #[error("{}", problems.iter().map(|(l, c, m)| format!("invalid config {}:{l}:{c}: {m}", path.display())).collect::<Vec<_>>().join("\n"))]
    Invalid {
        path: PathBuf,
        /// (line, column, message)
        problems: Vec<(u64, u64, String)>,
    },
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = crate::sysfs::read_regular_text(path, crate::sysfs::MAX_INPUT_BYTES).map_err(
            |source| ConfigError::Read {
                path: path.to_path_buf(),
                source,
            },
        )?;
        Config::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        serde_saphyr::from_str::<Config>(text).map_err(|e| {
            let (line, column) = crate::yaml::error_position(&e);
            let first = ConfigError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message: crate::yaml::error_message(&e),
            };
            match every_problem(text) {
                Some(problems) if !problems.is_empty() => ConfigError::Invalid {
                    path: path.to_path_buf(),
                    problems,
                },
                _ => first,
            }
        })
    }
}

/// Every problem of a config that serde-saphyr refused, when the text is one YAML document: the
/// document is read into positioned nodes, deserialized again from them, and each error (with
/// its path, `serde_path_to_error`) is given its node's line and column, said in this project's
/// words, and that entry taken out before the next try. `None` when the text is not one
/// document (serde-saphyr's error says it best then).
fn every_problem(text: &str) -> Option<Vec<(u64, u64, String)>> {
    use crate::yaml::document::{Node, Val, parse_documents};
    let (mut docs, errors) = parse_documents(text);
    if !errors.is_empty() || docs.len() != 1 {
        return None;
    }
    let mut doc = docs.remove(0);
    let mut problems = Vec::new();
    // The list items taken out so far, by the path of their list: a later error's index counts
    // the items left, and is said as the index the file has.
    let mut taken: BTreeMap<Vec<String>, Vec<usize>> = BTreeMap::new();
    let original = |taken: &BTreeMap<Vec<String>, Vec<usize>>, list: &[String], index: usize| {
        let mut gone = taken.get(list).cloned().unwrap_or_default();
        gone.sort_unstable();
        gone.into_iter()
            .fold(index, |i, g| if g <= i { i + 1 } else { i })
    };
    // Each round takes one entry out: a file has far fewer keys than this.
    for _ in 0..200 {
        let value = to_json(&doc);
        let err = match serde_path_to_error::deserialize::<_, Config>(value) {
            Ok(_) => break,
            Err(e) => e,
        };
        let segments: Vec<String> = err
            .path()
            .iter()
            .map(|s| match s {
                serde_path_to_error::Segment::Map { key } => key.clone(),
                serde_path_to_error::Segment::Seq { index } => index.to_string(),
                _ => String::new(),
            })
            .collect();
        let mut at = String::new();
        let mut parent = String::new();
        for (j, seg) in err.path().iter().enumerate() {
            parent.clone_from(&at);
            match seg {
                serde_path_to_error::Segment::Seq { index } => {
                    at.push_str(&format!("[{}]", original(&taken, &segments[..j], *index)));
                }
                serde_path_to_error::Segment::Map { key } if at.is_empty() => at.push_str(key),
                serde_path_to_error::Segment::Map { key } => at.push_str(&format!(".{key}")),
                _ => {}
            }
        }
        let message = err.inner().to_string();
        // An unknown key is reported at the key, a bad value at the value.
        let at_key = message.starts_with("unknown field ");
        let Some((pos, removed, got)) = take(&mut doc, &segments, at_key) else {
            break;
        };
        if removed
            && let Some(serde_path_to_error::Segment::Seq { index }) = err.path().iter().next_back()
        {
            let list = segments[..segments.len() - 1].to_vec();
            let at = original(&taken, &list, *index);
            taken.entry(list).or_default().push(at);
        }
        problems.push((
            u64::from(pos.line),
            u64::from(pos.column),
            explain(&at, &parent, &message, got.as_deref()),
        ));
        if !removed {
            break;
        }
    }
    problems.sort();
    return Some(problems);

    /// Scalars as serde-saphyr gives them to this config's fields: every field that takes a
    /// number takes it as text (durations), so a number is kept as its text.
    fn to_json(n: &Node) -> serde_json::Value {
        match &n.val {
            Val::Null => serde_json::Value::Null,
            Val::Bool(b) => (*b).into(),
            Val::Num(t) | Val::Str(t) => t.clone().into(),
            Val::Seq(items) => items.iter().map(to_json).collect(),
            Val::Map(entries) => entries
                .iter()
                .map(|(k, v)| (k.key_text().unwrap_or_default(), to_json(v)))
                .collect::<serde_json::Map<_, _>>()
                .into(),
        }
    }

    /// What a value is, as YAML wrote it: `number 3`, `string "x"`, `list`.
    fn shown(n: &Node) -> String {
        match &n.val {
            Val::Num(t) => format!("number {t}"),
            Val::Str(t) => format!("string {t:?}"),
            Val::Bool(b) => format!("boolean {b}"),
            other => other.kind().to_string(),
        }
    }

    /// The position of the node at `path` (its key, for a map entry), whether it could be
    /// taken out, and what its value was; the deepest existing node when the path runs past
    /// the tree.
    fn take(
        doc: &mut Node,
        path: &[String],
        at_key: bool,
    ) -> Option<(crate::yaml::document::Pos, bool, Option<String>)> {
        let (last, parents) = path.split_last()?;
        let mut node = doc;
        for seg in parents {
            let next = match &mut node.val {
                Val::Map(entries) => entries
                    .iter_mut()
                    .find(|(k, _)| k.key_text().as_deref() == Some(seg.as_str()))
                    .map(|(_, v)| v),
                Val::Seq(items) => seg.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
                _ => None,
            };
            match next {
                Some(n) => node = n,
                None => return Some((node.pos, false, None)),
            }
        }
        let pos = node.pos;
        match &mut node.val {
            Val::Map(entries) => {
                let i = entries
                    .iter()
                    .position(|(k, _)| k.key_text().as_deref() == Some(last.as_str()))?;
                let (k, v) = entries.remove(i);
                let pos = if at_key { k.pos } else { v.pos };
                Some((pos, true, Some(shown(&v))))
            }
            Val::Seq(items) => {
                let i = last.parse::<usize>().ok().filter(|i| *i < items.len())?;
                let item = items.remove(i);
                let got = shown(&item);
                Some((item.pos, true, Some(got)))
            }
            _ => Some((pos, false, None)),
        }
    }
}

/// serde's message for the value at `at` (in `parent`), in this project's words: the key path, the closest
/// known name for an unknown one, `list`/`map` for serde's `sequence`/`map`.
fn explain(at: &str, parent: &str, message: &str, got: Option<&str>) -> String {
    let backticked = |s: &str| -> Vec<String> {
        s.split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, w)| w.to_string())
            .collect()
    };
    let within = if parent.is_empty() {
        "at the top level".to_string()
    } else {
        format!("in {parent}")
    };
    // serde's `unknown field `x`, expected one of `a`, `b`` (and `unknown variant ...`): the
    // name, the closest known one, the known ones.
    let named = |rest: &str| {
        let words = backticked(rest);
        let (name, known) = words
            .split_first()
            .map(|(n, k)| (n.clone(), k.to_vec()))
            .unwrap_or_default();
        let hint = crate::names::closest(&name, known.iter().map(String::as_str))
            .map(|c| format!(" (did you mean {c:?}?)"))
            .unwrap_or_default();
        (name, hint, known.join(", "))
    };
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (name, hint, known) = named(rest);
        return format!("unknown key {name:?} {within}{hint}; known: {known}");
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (name, hint, known) = named(rest);
        return format!("{at}: unknown value {name:?}{hint}; expected one of {known}");
    }
    if let Some(rest) = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
    {
        let (serde_got, want) = rest.split_once(", expected ").unwrap_or((rest, "?"));
        let words = |s: &str| {
            s.replace("a sequence", "a list")
                .replace("sequence", "list")
                .replace('`', "")
        };
        let got = got.map(str::to_string).unwrap_or_else(|| words(serde_got));
        return format!("{at}: expected {}, got {got}", words(want));
    }
    format!("{at}: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_all_defaults() {
        let c = Config::parse(Path::new("c.yaml"), "").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(
            c.sources.pci.device_class_whitelist,
            vec!["03", "0b40", "12"]
        );
        assert_eq!(c.sources.pci.device_label_fields, vec!["class", "vendor"]);
    }

    #[test]
    fn reads_the_spec_example() {
        let text = r#"
sources:
  pci:
    deviceClassWhitelist: ["0c"]
    deviceLabelFields: ["class"]
  nvml: {enabled: "false", libPath: "/x/libnvidia-ml.so.1"}
  sharing: {configFile: "/etc/dp/config.yaml"}
labels:
  extraLabelNs: [example.com]
  denyLabelNs: [bad.io]
profiles: [nvidia-gfd]
migStrategy: mixed
publish: {sink: stdout, interval: 30s}
"#;
        let c = Config::parse(Path::new("c.yaml"), text).unwrap();
        assert_eq!(c.sources.pci.device_class_whitelist, vec!["0c"]);
        assert_eq!(c.sources.nvml.enabled, NvmlEnabled::False);
        assert_eq!(c.sources.nvml.lib_path, "/x/libnvidia-ml.so.1");
        assert_eq!(c.sources.sharing.config_file, "/etc/dp/config.yaml");
        assert_eq!(c.labels.extra_label_ns, vec!["example.com"]);
        assert_eq!(c.profiles, vec![Profile::NvidiaGfd]);
        assert_eq!(c.mig_strategy, MigStrategy::Mixed);
        assert_eq!(c.publish.sink, "stdout");
    }

    #[test]
    fn a_bad_interval_or_sink_is_an_error_with_position() {
        let e = Config::parse(Path::new("c.yaml"), "publish:\n  interval: soon\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid config c.yaml:2:13: publish.interval: invalid duration \"soon\": expected e.g. 60s, 5m, 1h"
        );
        let e = Config::parse(Path::new("c.yaml"), "publish:\n  interval: 1ms\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid config c.yaml:2:13: publish.interval: invalid interval \"1ms\": at least 1s (how often the node is scanned)"
        );
        assert!(Config::parse(Path::new("c.yaml"), "publish:\n  interval: 1s\n").is_ok());
        let e = Config::parse(Path::new("c.yaml"), "publish: {sink: nowhere}\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid config c.yaml:1:17: publish.sink: unknown sink \"nowhere\", expected one of node, nodefeature, features-file, stdout"
        );
    }

    #[test]
    fn an_unknown_profile_is_an_error_with_position() {
        let e = Config::parse(Path::new("c.yaml"), "profiles: [nvidia-gdf]\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid config c.yaml:1:12: profiles[0]: unknown value \"nvidia-gdf\" (did you mean \"nvidia-gfd\"?); expected one of nvidia-gfd"
        );
    }

    #[test]
    fn typo_is_an_error_with_position() {
        let e = Config::parse(
            Path::new("c.yaml"),
            "sources:\n  pci:\n    deviceClassWhitelst: [\"03\"]\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid config c.yaml:3:5: unknown key \"deviceClassWhitelst\" in sources.pci (did you mean \"deviceClassWhitelist\"?); known: deviceClassWhitelist, deviceLabelFields"
        );
    }

    /// Each bad item of a list is named by the index the file gives it (the items before it
    /// that were bad too are no reason to count differently), and good numbers are not errors.
    #[test]
    fn every_bad_list_item_at_its_own_index() {
        let text = "sources:\n  health:\n    criticalXids: [48, x, 79, -2, 5000000000, 13]\n";
        let e = Config::parse(Path::new("c.yaml"), text).unwrap_err();
        assert_eq!(
            e.to_string(),
            [
                "invalid config c.yaml:3:24: sources.health.criticalXids[1]: expected an XID (a whole number), got string \"x\"",
                "invalid config c.yaml:3:31: sources.health.criticalXids[3]: expected an XID (a whole number), got number -2",
                "invalid config c.yaml:3:35: sources.health.criticalXids[4]: expected an XID (a whole number), got number 5000000000",
            ]
            .join("\n")
        );
        let c = Config::parse(
            Path::new("c.yaml"),
            "sources:\n  health:\n    criticalXids: [48, 79]\n",
        )
        .unwrap();
        assert_eq!(c.sources.health.critical_xids, vec![48, 79]);
    }

    /// `enabled` takes YAML's booleans (`true`, `yes`) as well as `auto`, `true`, `false` in
    /// text; anything else says what it takes.
    #[test]
    fn nvml_enabled_takes_booleans_and_names_its_values() {
        for (text, want) in [
            ("yes", NvmlEnabled::True),
            ("true", NvmlEnabled::True),
            ("false", NvmlEnabled::False),
            ("\"false\"", NvmlEnabled::False),
            ("auto", NvmlEnabled::Auto),
        ] {
            let c = Config::parse(
                Path::new("c.yaml"),
                &format!("sources:\n  nvml:\n    enabled: {text}\n"),
            )
            .unwrap();
            assert_eq!(c.sources.nvml.enabled, want, "{text}");
        }
        let e = Config::parse(
            Path::new("c.yaml"),
            "sources:\n  nvml:\n    enabled: maybe\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid config c.yaml:3:14: sources.nvml.enabled: unknown value \"maybe\"; expected one of auto, true, false"
        );
    }

    /// Every problem of the file in one run, each at its line and column, in file order; a
    /// syntax error stays one (nothing after it can be read).
    #[test]
    fn every_problem_at_once() {
        let text = "sources:\n  pci:\n    deviceClassWhitelist: 3\n  nvml: {enabld: auto}\nlabels:\n  allowedNS: []\npublish: {interval: 1ms, sink: nodes, events: maybe}\nmigStrategy: mixd\nprofiles: [nvidia-gfd, gfd]\n";
        let e = Config::parse(Path::new("c.yaml"), text).unwrap_err();
        assert_eq!(
            e.to_string(),
            [
                "invalid config c.yaml:3:27: sources.pci.deviceClassWhitelist: expected a list, got number 3",
                "invalid config c.yaml:4:10: unknown key \"enabld\" in sources.nvml (did you mean \"enabled\"?); known: enabled, libPath, timeout, gracePeriod, checkInterval",
                "invalid config c.yaml:6:3: unknown key \"allowedNS\" in labels (did you mean \"allowedNs\"?); known: extraLabelNs, denyLabelNs, allowedNs",
                "invalid config c.yaml:7:21: publish.interval: invalid interval \"1ms\": at least 1s (how often the node is scanned)",
                "invalid config c.yaml:7:32: publish.sink: unknown sink \"nodes\", expected one of node, nodefeature, features-file, stdout",
                "invalid config c.yaml:7:47: publish.events: expected a boolean, got string \"maybe\"",
                "invalid config c.yaml:8:14: migStrategy: unknown value \"mixd\" (did you mean \"mixed\"?); expected one of none, single, mixed",
                "invalid config c.yaml:9:24: profiles[1]: unknown value \"gfd\"; expected one of nvidia-gfd",
            ]
            .join("\n")
        );
        let e = Config::parse(Path::new("c.yaml"), "a: [\nb: 1\n").unwrap_err();
        assert!(matches!(e, ConfigError::Parse { .. }), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        for bad in ["", "0s", "-1s", "5x", "s", "1e400", "m5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
