//! The config and rules in force: read at start, re-read when their files' content changes,
//! the last good version kept when a new one is invalid.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use crate::config::{self, Config};
use crate::error::Error;
use crate::metrics::Health;
use crate::pipeline::{RuleFiles, Sources};
use crate::rules::RuleSet;

/// A digest of the files an input is read from, to notice changes by content (a ConfigMap
/// update swaps a `..data` symlink; mtimes say little). Directories contribute the files the
/// rules loader reads (`rules::rule_files`).
pub fn digest(paths: &[PathBuf]) -> u64 {
    let mut h = DefaultHasher::new();
    for p in paths {
        p.hash(&mut h);
        if p.is_dir() {
            match crate::rules::rule_files(p) {
                Ok(files) => {
                    for f in files {
                        f.hash(&mut h);
                        hash_file(&f, &mut h);
                    }
                }
                Err(e) => e.kind().hash(&mut h),
            }
        } else {
            hash_file(p, &mut h);
        }
    }
    h.finish()
}

fn hash_file(p: &Path, h: &mut DefaultHasher) {
    match crate::sysfs::read_regular_file(p, crate::sysfs::MAX_INPUT_BYTES) {
        Ok(bytes) => bytes.hash(h),
        Err(e) => e.kind().hash(h),
    }
}

/// The config and rules in force: the last good version of each, and the digests that say
/// when their files change.
pub(super) struct Inputs {
    /// The node sink writes under the admission policy: `labels.allowedNs` defaults to its
    /// namespaces.
    node_sink: bool,
    pub(super) sources: Sources,
    pub(super) rule_files: RuleFiles,
    pub(super) config: Config,
    pub(super) rules: RuleSet,
    config_digest: u64,
    rules_digest: u64,
}

impl Inputs {
    pub(super) fn config_paths(sources: &Sources) -> Vec<PathBuf> {
        sources.config.iter().cloned().collect()
    }

    /// Loads both at start: an invalid one is an error (exit 1), as for `labels`.
    pub(super) fn load(sources: Sources, rule_files: RuleFiles) -> Result<Inputs, Error> {
        let config_digest = digest(&Self::config_paths(&sources));
        let rules_digest = digest(&rule_files.paths);
        let config = sources.load_config()?;
        let (rules, errors) = rule_files.load();
        if !errors.is_empty() {
            return Err(Error::InvalidInput(errors.join("\n")));
        }
        Ok(Inputs {
            node_sink: false,
            sources,
            rule_files,
            config,
            rules,
            config_digest,
            rules_digest,
        })
    }

    /// The sink is known once the config is: the node sink's defaults apply from then on.
    pub(super) fn set_node_sink(&mut self, node_sink: bool) {
        self.node_sink = node_sink;
        self.config = with_defaults(std::mem::take(&mut self.config), node_sink);
    }

    /// Re-reads what changed (everything when `force`). An invalid new version is reported and
    /// the last good one kept; it is reported again only when it changes again. Returns whether
    /// something new is in force.
    pub(super) fn reload(&mut self, force: bool, health: &Health) -> bool {
        let mut changed = false;
        let d = digest(&Self::config_paths(&self.sources));
        if force || d != self.config_digest {
            self.config_digest = d;
            match self.sources.load_config() {
                Ok(c) => {
                    let c = with_defaults(c, self.node_sink);
                    if c != self.config {
                        tracing::info!("config reloaded");
                        self.config = c;
                        changed = true;
                    }
                }
                Err(e) => {
                    health.metrics.reload_errors.inc();
                    tracing::error!("{e}; keeping the last good config");
                }
            }
        }
        let d = digest(&self.rule_files.paths);
        if force || d != self.rules_digest {
            self.rules_digest = d;
            let (rules, errors) = self.rule_files.load();
            if errors.is_empty() {
                tracing::info!("rules reloaded: {} rules", rules.rule_count());
                self.rules = rules;
                changed = true;
            } else {
                health.metrics.reload_errors.inc();
                for e in &errors {
                    tracing::error!("{e}");
                }
                tracing::error!("invalid rules; keeping the last good rules");
            }
        }
        changed
    }
}

/// The config as the daemon uses it: for the node sink, `labels.allowedNs` defaults to the
/// admission policy's namespaces, and `nvidia.com` with the `nvidia-gfd` profile (whose
/// component admits GFD's keys).
pub fn with_defaults(mut config: Config, node_sink: bool) -> Config {
    if node_sink && config.labels.allowed_ns.is_none() {
        let mut ns = config::POLICY_NAMESPACES.map(String::from).to_vec();
        if config.profiles.contains(&config::Profile::NvidiaGfd) {
            ns.push("nvidia.com".into());
            config.labels.gfd_keys_only = true;
        }
        config.labels.allowed_ns = Some(ns);
    }
    config
}
