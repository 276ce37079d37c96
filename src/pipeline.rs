//! The inputs every command loads, above the stages it calls: where the config, the features
//! and the rules come from, and how they are read. The command line builds these from its flags;
//! the daemon keeps them to re-read on reload.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::{Config, NvmlEnabled, Profile};
use crate::default_rules;
use crate::discover::nvml::child::IsolatedNvml;
use crate::discover::nvml::{self, NvmlChoice};
use crate::discover::{self, DiscoveryOptions};
use crate::dra;
use crate::error::Error;
use crate::features::{self, FeatureSet};
use crate::labels::Evaluated;
use crate::rules::RuleSet;

/// Where the node's config and features come from.
#[derive(Debug, Clone)]
pub struct Sources {
    /// Root of sysfs.
    pub sysfs_root: PathBuf,
    /// Root of procfs.
    pub proc_root: PathBuf,
    /// NVML library to load instead of the loader's search for libnvidia-ml.so.1.
    pub nvml_lib: Option<PathBuf>,
    /// Do not use NVML.
    pub no_nvml: bool,
    /// Instead of the config's `sources.nvml.timeout`.
    pub nvml_timeout: Option<Duration>,
    /// A recorded snapshot to use instead of discovering.
    pub features: Option<PathBuf>,
    /// The configuration file.
    pub config: Option<PathBuf>,
    /// DRA objects to join to the node's GPUs (`--dra`).
    pub dra: Option<PathBuf>,
    /// This node's name, which picks its slices from `dra`.
    pub node_name: Option<String>,
    /// A pci.ids file to read device names from.
    pub pci_ids: Option<PathBuf>,
    /// Compatibility profiles added to the config's `profiles` (`--profile`).
    pub profiles: Vec<Profile>,
    /// Instead of the config's `labels.allowedNs` when not empty (`--allowed-ns`).
    pub allowed_ns: Vec<String>,
}

/// Which rule files are loaded.
#[derive(Debug, Clone)]
pub struct RuleFiles {
    /// NodeFeatureRule files or directories.
    pub paths: Vec<PathBuf>,
    /// Leave out the rules shipped in the binary.
    pub no_default_rules: bool,
}

impl Sources {
    /// Flags win over the config file; the default is the loader's search.
    pub fn nvml_choice(&self, config: &Config) -> NvmlChoice {
        if self.no_nvml || config.sources.nvml.enabled == NvmlEnabled::False {
            return NvmlChoice::Disabled;
        }
        let path = self.nvml_lib.clone().unwrap_or_else(|| {
            if config.sources.nvml.lib_path.is_empty() {
                PathBuf::from(nvml::DEFAULT_LIB)
            } else {
                PathBuf::from(&config.sources.nvml.lib_path)
            }
        });
        NvmlChoice::Library(path)
    }

    /// NVML as every command uses it: in a child process of this program, bounded by
    /// `--nvml-timeout` or the config's `sources.nvml.timeout`, its last good answer kept for
    /// `gracePeriod`, its health checks as `sources.health` says.
    pub fn nvml(&self, config: &Config) -> IsolatedNvml {
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
        IsolatedNvml::new(
            self.nvml_choice(config),
            exe,
            self.nvml_timeout.unwrap_or(config.sources.nvml.timeout),
            config.sources.nvml.grace_period,
        )
        .with_health(nvml::NvmlHealth::from(&config.sources.health))
    }

    pub fn load_config(&self) -> Result<Config, Error> {
        let mut config = match &self.config {
            Some(p) => Config::load(p)?,
            None => Config::default(),
        };
        for p in &self.profiles {
            if !config.profiles.contains(p) {
                config.profiles.push(*p);
            }
        }
        if !self.allowed_ns.is_empty() {
            config.labels.allowed_ns = Some(self.allowed_ns.clone());
        }
        Ok(config)
    }

    /// What discovery needs besides NVML.
    pub fn discovery_options(&self, config: &Config) -> DiscoveryOptions {
        DiscoveryOptions {
            sysfs_root: self.sysfs_root.clone(),
            proc_root: self.proc_root.clone(),
            pci_ids: self.pci_ids.clone(),
            config: config.clone(),
        }
    }

    /// The feature set: from the snapshot when given, else discovered. Warnings go to the log;
    /// the failures of required sources are returned (the features are whole otherwise).
    /// Adds the `dra.*` features of `--dra` (nothing without it). A file that cannot be read
    /// is invalid input, returned (one line) as a rule file's errors are; the features stay
    /// as they were.
    pub fn add_dra(&self, features: &mut FeatureSet) -> Vec<String> {
        match &self.dra {
            Some(path) => add_dra_file(features, path, self.node_name.as_deref())
                .err()
                .into_iter()
                .collect(),
            None => Vec::new(),
        }
    }

    pub fn features(&self, config: &Config) -> Result<(FeatureSet, Vec<String>), Error> {
        if let Some(path) = &self.features {
            return Ok((features::load_snapshot(path)?, Vec::new()));
        }
        // One scan in a process that ends after it watches no XIDs: NVML reports an XID only to
        // an event set that was open when it happened (the daemon's child keeps one open).
        let mut nvml = self.nvml(config).with_health(nvml::NvmlHealth {
            critical_xids: Vec::new(),
            ..nvml::NvmlHealth::from(&config.sources.health)
        });
        let d = discover::discover(&self.discovery_options(config), &mut nvml);
        for w in &d.warnings {
            tracing::warn!("{w}");
        }
        Ok((d.features, d.errors))
    }
}

/// Adds the `dra.*` features of a DRA file (`--dra`) for `node`, or for the one node its
/// slices are for. An error names the file (line and column where it has them); the features
/// stay as they were.
pub fn add_dra_file(
    features: &mut FeatureSet,
    path: &std::path::Path,
    node: Option<&str>,
) -> Result<(), String> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{source}: {e}"))?;
    let objects = dra::objects::read(&source, &text).map_err(|e| e.to_string())?;
    let node = match node {
        Some(n) => n.to_string(),
        None => match objects.slice_nodes().as_slice() {
            [] => String::new(),
            [one] => one.to_string(),
            many => {
                return Err(format!(
                    "{source}: slices of {} nodes ({}): say which is this one with --node-name (NODE_NAME)",
                    many.len(),
                    many.join(", ")
                ));
            }
        },
    };
    dra::add_features(features, &objects, &node);
    Ok(())
}

impl RuleFiles {
    /// Loads the shipped rules (unless `no_default_rules`) and the files at `paths`. A broken
    /// file never stops the others from loading; its errors are returned, one line each.
    pub fn load(&self) -> (RuleSet, Vec<String>) {
        let mut sources = if self.no_default_rules {
            Vec::new()
        } else {
            default_rules::sources()
        };
        let (files, mut errors) = RuleSet::load_paths(&self.paths);
        sources.extend(files);
        let (set, load_errors) = RuleSet::load(sources);
        errors.extend(load_errors);
        (set, errors.iter().map(ToString::to_string).collect())
    }
}

/// Logs what an evaluation has to report: failed rules and rejected labels are warnings.
pub fn report(e: &Evaluated) {
    for n in &e.notes {
        tracing::info!("{n}");
    }
    for m in e.errors.iter().chain(&e.rejected).chain(&e.warnings) {
        tracing::warn!("{m}");
    }
}
