//! `gpu.sharing`: time-slicing and MPS, read from the NVIDIA device plugin's configuration file
//! (`sources.sharing.configFile`, the file the plugin and GFD read with `--config-file`).
//!
//! Only the `sharing` section is read, with the plugin's own rules (api/config/v1 of
//! NVIDIA/k8s-device-plugin): `version` is `v1` or absent; `sharing.timeSlicing` and
//! `sharing.mps` each hold `renameByDefault`, `failRequestsGreaterThanOne` and a non-empty
//! `resources` list whose entries have a `name` (`nvidia.com/` is implied), `replicas` >= 2, an
//! optional `rename` and `devices` (`all`, a count, or a list of indices/UUIDs). The strategy is
//! `mps` when MPS replicates anything, else `time-slicing` when time-slicing does, else `none`;
//! replicas come from the MPS section when it exists, else from time-slicing (the plugin's
//! `Sharing.ReplicatedResources`). As GFD runs with `DisableResourceNamingInConfig`, a resource
//! counts as renamed exactly when `renameByDefault` is set. Other top-level keys (`flags`,
//! `resources`, `imex`) belong to the plugin and are ignored; unknown keys inside `sharing` are
//! errors, so a typo is reported with its line and column instead of silently meaning `none`.
//!
//! The attributes (all strings, as every feature value):
//!
//! | key | value |
//! |---|---|
//! | `strategy` | `none`, `time-slicing` or `mps` |
//! | `replicas` | replicas of `nvidia.com/gpu` (`1` when not listed) |
//! | `rename_by_default` | `true`/`false` |
//! | `replicas.<name>` | replicas of each listed resource, `nvidia.com/` left out (`replicas.mig-1g.5gb`) |
//!
//! For the daemon, [`SharingSource`] keeps the last good value: a file that turns bad while
//! running is reported and the previous value stays in force.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::config::SharingConfig;
use crate::features::FeatureSet;

use super::warnings::Warnings;

pub const GPU_SHARING: &str = "gpu.sharing";

/// The plugin's resource name prefix, implied when a name lacks it.
const RESOURCE_PREFIX: &str = "nvidia.com/";
/// The whole-GPU resource.
pub const FULL_GPU: &str = "gpu";

/// How GPUs are shared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Strategy {
    #[default]
    None,
    TimeSlicing,
    Mps,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::None => "none",
            Strategy::TimeSlicing => "time-slicing",
            Strategy::Mps => "mps",
        }
    }
}

/// The sharing configuration, reduced to what labels need.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sharing {
    pub strategy: Strategy,
    /// `renameByDefault` of the section replicas come from.
    pub rename_by_default: bool,
    /// Resource name without `nvidia.com/` -> replicas, from that section.
    pub replicas: BTreeMap<String, u32>,
}

impl Sharing {
    /// Replicas of a resource (`gpu`, `mig-1g.5gb`): 1 when not listed.
    pub fn replicas_of(&self, resource: &str) -> u32 {
        self.replicas.get(resource).copied().unwrap_or(1)
    }

    /// The `gpu.sharing` attributes (see the module docs).
    pub fn attributes(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        out.insert("strategy".to_string(), self.strategy.as_str().to_string());
        out.insert(
            "replicas".to_string(),
            self.replicas_of(FULL_GPU).to_string(),
        );
        out.insert(
            "rename_by_default".to_string(),
            self.rename_by_default.to_string(),
        );
        for (name, n) in &self.replicas {
            out.insert(format!("replicas.{name}"), n.to_string());
        }
        out
    }

    /// Reads the attributes back (from a snapshot); absent or malformed values are defaults.
    pub fn from_attributes(a: &BTreeMap<String, String>) -> Sharing {
        let strategy = match a.get("strategy").map(String::as_str) {
            Some("mps") => Strategy::Mps,
            Some("time-slicing") => Strategy::TimeSlicing,
            _ => Strategy::None,
        };
        let mut replicas: BTreeMap<String, u32> = a
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("replicas.")?.to_string(), v.parse().ok()?)))
            .collect();
        if let Some(n) = a.get("replicas").and_then(|v| v.parse::<u32>().ok())
            && n > 1
        {
            replicas.entry(FULL_GPU.to_string()).or_insert(n);
        }
        Sharing {
            strategy,
            rename_by_default: a.get("rename_by_default").map(String::as_str) == Some("true"),
            replicas,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SharingError {
    #[error("cannot read sharing config {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid sharing config {path}:{line}:{column}: {message}")]
    Parse {
        path: PathBuf,
        line: u64,
        column: u64,
        message: String,
    },
}

// The plugin's file, as far as sharing goes.

#[derive(Deserialize)]
struct PluginConfig {
    #[serde(default)]
    version: Option<Spanned<String>>,
    #[serde(default)]
    sharing: Option<SharingSpec>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SharingSpec {
    #[serde(default)]
    time_slicing: Option<Replicated>,
    #[serde(default)]
    mps: Option<Replicated>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Replicated {
    #[serde(default)]
    rename_by_default: bool,
    #[serde(default)]
    #[allow(dead_code)]
    fail_requests_greater_than_one: Option<bool>,
    resources: Spanned<Vec<Resource>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Resource {
    name: Spanned<String>,
    #[serde(default)]
    #[allow(dead_code)]
    rename: Option<String>,
    #[serde(default)]
    devices: Option<Spanned<Devices>>,
    replicas: Spanned<i64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Devices {
    Count(i64),
    Text(String),
    List(Vec<DeviceRef>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum DeviceRef {
    Index(#[allow(dead_code)] u64),
    Text(String),
}

/// A problem found after parsing, at a place in the file.
struct Invalid {
    line: u64,
    column: u64,
    message: String,
}

fn invalid<T>(at: &Spanned<T>, message: impl Into<String>) -> Invalid {
    Invalid {
        line: at.referenced.line(),
        column: at.referenced.column(),
        message: message.into(),
    }
}

/// Parses the plugin's configuration file.
pub fn parse(path: &Path, text: &str) -> Result<Sharing, SharingError> {
    let parse_error = |line, column, message: String| SharingError::Parse {
        path: path.to_path_buf(),
        line,
        column,
        message,
    };
    if text.trim().is_empty() {
        return Ok(Sharing::default());
    }
    let file: PluginConfig = serde_saphyr::from_str(text).map_err(|e| {
        let (line, column) = crate::yaml::error_position(&e);
        parse_error(line, column, crate::yaml::error_message(&e))
    })?;
    validate(file).map_err(|i| parse_error(i.line, i.column, i.message))
}

fn validate(file: PluginConfig) -> Result<Sharing, Invalid> {
    if let Some(v) = &file.version
        && !v.value.is_empty()
        && v.value != "v1"
    {
        return Err(invalid(v, format!("unknown version: {}", v.value)));
    }
    let Some(spec) = file.sharing else {
        return Ok(Sharing::default());
    };
    let time_slicing = spec.time_slicing.map(read_section).transpose()?;
    let mps = spec.mps.map(read_section).transpose()?;
    let replicated = |s: &Option<(bool, BTreeMap<String, u32>)>| {
        s.as_ref().is_some_and(|(_, r)| r.values().any(|&n| n > 1))
    };
    let strategy = if replicated(&mps) {
        Strategy::Mps
    } else if replicated(&time_slicing) {
        Strategy::TimeSlicing
    } else {
        Strategy::None
    };
    let (rename_by_default, replicas) = mps.or(time_slicing).unwrap_or_default();
    Ok(Sharing {
        strategy,
        rename_by_default,
        replicas,
    })
}

fn read_section(r: Replicated) -> Result<(bool, BTreeMap<String, u32>), Invalid> {
    if r.resources.value.is_empty() {
        return Err(invalid(&r.resources, "no resources specified"));
    }
    let mut out = BTreeMap::new();
    for res in r.resources.value {
        let name = res
            .name
            .value
            .strip_prefix(RESOURCE_PREFIX)
            .unwrap_or(&res.name.value);
        if !is_dns_subdomain(name) {
            return Err(invalid(
                &res.name,
                format!("incorrect format for resource name {:?}", res.name.value),
            ));
        }
        let replicas = u32::try_from(res.replicas.value)
            .ok()
            .filter(|&n| n >= 2)
            .ok_or_else(|| invalid(&res.replicas, "number of replicas must be >= 2"))?;
        if let Some(d) = &res.devices {
            check_devices(d)?;
        }
        out.insert(name.to_string(), replicas);
    }
    Ok((r.rename_by_default, out))
}

fn check_devices(d: &Spanned<Devices>) -> Result<(), Invalid> {
    match &d.value {
        Devices::Text(s) if s == "all" => Ok(()),
        Devices::Text(s) => Err(invalid(
            d,
            format!("devices set as {s:?} but the only valid string input is 'all'"),
        )),
        Devices::Count(n) if *n > 0 => Ok(()),
        Devices::Count(n) => Err(invalid(
            d,
            format!("devices set as {n} but a count of devices must be > 0"),
        )),
        Devices::List(items) => {
            for item in items {
                if let DeviceRef::Text(s) = item
                    && !is_device_ref(s)
                {
                    return Err(invalid(
                        d,
                        format!("unsupported device in devices list: {s:?}"),
                    ));
                }
            }
            Ok(())
        }
    }
}

/// A GPU index, a MIG index (`0:1`), or a GPU/MIG UUID, as the plugin accepts them.
fn is_device_ref(s: &str) -> bool {
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    let uuid = |p: &str| {
        let groups: Vec<&str> = p.split('-').collect();
        groups.len() == 5
            && groups
                .iter()
                .zip([8, 4, 4, 4, 12])
                .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if digits(s) {
        return true;
    }
    if let Some((a, b)) = s.split_once(':') {
        return digits(a) && digits(b);
    }
    if let Some(u) = s.strip_prefix("GPU-") {
        return uuid(u);
    }
    if let Some(u) = s.strip_prefix("MIG-") {
        if uuid(u) {
            return true;
        }
        let mut parts = u.splitn(3, '/');
        return matches!(
            (parts.next(), parts.next(), parts.next()),
            (Some(g), Some(a), Some(b)) if g.strip_prefix("GPU-").is_some_and(uuid) && digits(a) && digits(b)
        );
    }
    false
}

/// Kubernetes' DNS subdomain rule for the part after `nvidia.com/`.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Reads and parses the file.
pub fn load(path: &Path) -> Result<Sharing, SharingError> {
    let text =
        crate::sysfs::read_regular_text(path, crate::sysfs::MAX_INPUT_BYTES).map_err(|source| {
            SharingError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
    parse(path, &text)
}

/// The sharing configuration across scans: the daemon keeps one and hands it to every
/// discovery (`discover::discover_with`), so that a file that turns bad keeps the last good
/// value in force; a one-shot run uses a fresh one (no previous value: `gpu.sharing` is left
/// out while the file is bad).
#[derive(Debug, Clone, Default)]
pub struct SharingSource {
    last_good: Option<(PathBuf, Sharing)>,
}

/// What one read of the sharing file gave.
#[derive(Debug)]
pub struct SharingRead {
    /// The value in force: the file's, or the last good one when the file is bad.
    pub sharing: Option<Sharing>,
    /// Why the file could not be used, if it could not.
    pub error: Option<SharingError>,
}

impl SharingSource {
    pub fn new() -> Self {
        SharingSource::default()
    }

    /// The last value read successfully, if any.
    pub fn last_good(&self) -> Option<&Sharing> {
        self.last_good.as_ref().map(|(_, s)| s)
    }

    /// Reads `path`; on failure the last good value read from the same path stays in force.
    pub fn read(&mut self, path: &Path) -> SharingRead {
        match load(path) {
            Ok(s) => {
                self.last_good = Some((path.to_path_buf(), s.clone()));
                SharingRead {
                    sharing: Some(s),
                    error: None,
                }
            }
            Err(e) => SharingRead {
                sharing: self
                    .last_good
                    .as_ref()
                    .filter(|(p, _)| p == path)
                    .map(|(_, s)| s.clone()),
                error: Some(e),
            },
        }
    }
}

/// Fills `gpu.sharing` when `sources.sharing.configFile` names a file.
pub fn discover(
    source: &mut SharingSource,
    config: &SharingConfig,
    features: &mut FeatureSet,
    warnings: &mut Warnings,
) {
    if config.config_file.is_empty() {
        return;
    }
    let read = source.read(Path::new(&config.config_file));
    if let Some(e) = read.error {
        let kept = if read.sharing.is_some() {
            "keeping the previous value"
        } else {
            "gpu.sharing left out"
        };
        warnings.push(format!("{e}; {kept}"));
    }
    if let Some(s) = read.sharing {
        for (k, v) in s.attributes() {
            features.insert_attribute(GPU_SHARING, k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Sharing, SharingError> {
        parse(Path::new("dp.yaml"), text)
    }

    fn replicas(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn time_slicing_from_the_plugin_docs() {
        let s = p("version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 10\n").unwrap();
        assert_eq!(
            s,
            Sharing {
                strategy: Strategy::TimeSlicing,
                rename_by_default: false,
                replicas: replicas(&[("gpu", 10)]),
            }
        );
        assert_eq!(
            s.attributes(),
            [
                ("rename_by_default", "false"),
                ("replicas", "10"),
                ("replicas.gpu", "10"),
                ("strategy", "time-slicing"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        );
        assert_eq!(Sharing::from_attributes(&s.attributes()), s);
    }

    #[test]
    fn mps_wins_over_time_slicing_and_names_get_the_prefix() {
        let s = p("sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 4}]\n  mps:\n    renameByDefault: true\n    resources:\n    - name: mig-1g.5gb\n      replicas: 2\n      devices: all\n").unwrap();
        assert_eq!(s.strategy, Strategy::Mps);
        assert!(s.rename_by_default);
        assert_eq!(s.replicas, replicas(&[("mig-1g.5gb", 2)]));
        assert_eq!(s.replicas_of("gpu"), 1);
    }

    #[test]
    fn no_sharing_section_is_none() {
        assert_eq!(p("version: v1\nflags: {}\n").unwrap(), Sharing::default());
        assert_eq!(p("").unwrap(), Sharing::default());
    }

    fn err(text: &str) -> (u64, u64, String) {
        match p(text).unwrap_err() {
            SharingError::Parse {
                line,
                column,
                message,
                ..
            } => (line, column, message),
            e => panic!("{e}"),
        }
    }

    #[test]
    fn errors_name_line_and_column() {
        let (line, _, m) =
            err("sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 1\n");
        assert_eq!((line, m.as_str()), (5, "number of replicas must be >= 2"));
        let (line, column, m) = err("sharing:\n  timeslicing:\n    resources: []\n");
        assert_eq!(
            (line, column, m.as_str()),
            (
                2,
                3,
                "unknown field `timeslicing`, expected one of timeSlicing, mps"
            )
        );
        let (line, _, m) = err("sharing:\n  mps:\n    resources: []\n");
        assert_eq!((line, m.as_str()), (3, "no resources specified"));
        let (line, _, m) = err("version: v2\n");
        assert_eq!((line, m.as_str()), (1, "unknown version: v2"));
        let (line, _, _) = err(
            "sharing:\n  mps:\n    resources:\n    - name: gpu\n      replicas: 2\n      devices: some\n",
        );
        assert_eq!(line, 6);
        let (line, _, _) =
            err("sharing:\n  mps:\n    resources:\n    - name: Bad_Name\n      replicas: 2\n");
        assert_eq!(line, 4);
        let (line, _, _) = err("sharing: [\n");
        assert!(line >= 1);
    }

    #[test]
    fn device_references() {
        for ok in [
            "0",
            "1:2",
            "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa",
            "MIG-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa",
            "MIG-GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa/1/0",
        ] {
            assert!(is_device_ref(ok), "{ok}");
        }
        for bad in ["", "x", "1:", "GPU-123", "MIG-GPU-x/1/0"] {
            assert!(!is_device_ref(bad), "{bad}");
        }
    }

    #[test]
    fn a_bad_file_keeps_the_last_good_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dp.yaml");
        let mut src = SharingSource::new();
        std::fs::write(
            &path,
            "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 3}]\n",
        )
        .unwrap();
        let good = src.read(&path);
        assert!(good.error.is_none());
        assert_eq!(good.sharing.as_ref().unwrap().replicas_of("gpu"), 3);
        std::fs::write(&path, "sharing:\n  timeSlicing:\n    resources: []\n").unwrap();
        let bad = src.read(&path);
        assert_eq!(bad.sharing, good.sharing);
        let msg = bad.error.unwrap().to_string();
        assert!(
            msg.starts_with(&format!("invalid sharing config {}:3:", path.display())),
            "{msg}"
        );
        std::fs::remove_file(&path).unwrap();
        let gone = src.read(&path);
        assert_eq!(gone.sharing, good.sharing);
        assert!(matches!(gone.error, Some(SharingError::Read { .. })));
        assert_eq!(src.last_good(), good.sharing.as_ref());
    }
}
