//! The configuration file (docs/catalog.md#config): YAML, every key optional, unknown keys rejected so that a
//! typo is an error naming file, line and column instead of a silently ignored setting.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub sources: Sources,
    #[serde(default)]
    pub labels: LabelPolicy,
    /// Compatibility profiles; an unknown name is an error, not a silently missing label set.
    #[serde(default)]
    pub profiles: Vec<Profile>,
    #[serde(default)]
    pub mig_strategy: MigStrategy,
    #[serde(default)]
    pub publish: Publish,
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
pub struct Sources {
    #[serde(default)]
    pub pci: PciConfig,
    #[serde(default)]
    pub nvml: NvmlConfig,
    #[serde(default)]
    pub sharing: SharingConfig,
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

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NvmlEnabled {
    #[default]
    Auto,
    True,
    False,
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
    /// How long the GPUs' NVML-only values are kept while NVML fails (`0s`: not at all).
    #[serde(default = "default_nvml_grace", deserialize_with = "any_duration")]
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

fn default_nvml_grace() -> Duration {
    Duration::from_secs(600)
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
            ConfigError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message: crate::yaml::error_message(&e),
            }
        })
    }
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
            "invalid config c.yaml:2:13: invalid duration \"soon\": expected e.g. 60s, 5m, 1h"
        );
        let e = Config::parse(Path::new("c.yaml"), "publish:\n  interval: 1ms\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid config c.yaml:2:13: invalid interval \"1ms\": at least 1s (how often the node is scanned)"
        );
        assert!(Config::parse(Path::new("c.yaml"), "publish:\n  interval: 1s\n").is_ok());
        let e = Config::parse(Path::new("c.yaml"), "publish: {sink: nowhere}\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid config c.yaml:1:17: unknown sink \"nowhere\", expected one of node, nodefeature, features-file, stdout"
        );
    }

    #[test]
    fn an_unknown_profile_is_an_error_with_position() {
        let e = Config::parse(Path::new("c.yaml"), "profiles: [nvidia-gdf]\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid config c.yaml:1:12: unknown variant `nvidia-gdf`, expected one of nvidia-gfd"
        );
    }

    #[test]
    fn typo_is_an_error_with_position() {
        let e = Config::parse(
            Path::new("c.yaml"),
            "sources:\n  pci:\n    deviceClassWhitelst: [\"03\"]\n",
        )
        .unwrap_err();
        let ConfigError::Parse { line, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(*line, 3, "{e}");
        assert!(e.to_string().starts_with("invalid config c.yaml:3:"), "{e}");
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
