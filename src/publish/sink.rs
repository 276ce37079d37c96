//! The sinks, one type: where labels go (`node`, `nodefeature`, `features-file`, `stdout`),
//! chosen by `--sink` or the config's `publish.sink` and built once at start.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::error::Error;
use crate::features::FeatureSet;
use crate::output::NodeOutput;

use super::client;
use super::error::{MAX_RESPONSE_BYTES, PublishError};
use super::features_file::{self, FeaturesFileSink};
use super::node::{self, NodeSink};
use super::nodefeature::{self, NodeFeatureSink};
use super::outcome::{LabelDiff, Outcome, OutcomeKind};

/// Where labels go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkKind {
    Node,
    Nodefeature,
    FeaturesFile,
    Stdout,
}

impl SinkKind {
    /// Every sink, in the order `--sink` lists them.
    pub const ALL: [SinkKind; 4] = [
        SinkKind::Node,
        SinkKind::Nodefeature,
        SinkKind::FeaturesFile,
        SinkKind::Stdout,
    ];

    /// The name `--sink` and `publish.sink` use.
    pub fn name(self) -> &'static str {
        match self {
            SinkKind::Node => "node",
            SinkKind::Nodefeature => "nodefeature",
            SinkKind::FeaturesFile => "features-file",
            SinkKind::Stdout => "stdout",
        }
    }
}

/// Where labels go.
pub enum Sink {
    Node(Box<NodeSink>),
    NodeFeature(Box<NodeFeatureSink>),
    File(FeaturesFileSink),
    /// The last output printed.
    Stdout(Option<NodeOutput>),
}

impl Sink {
    /// What the node sink has on the Node: its labels, taints and condition (what the Node
    /// watch guards).
    pub fn guarded(&self) -> Option<node::Guarded> {
        match self {
            Sink::Node(n) => n.guarded(),
            _ => None,
        }
    }

    /// The Node's resourceVersion as the node sink last read or wrote it.
    pub fn known_version(&self) -> Option<String> {
        match self {
            Sink::Node(n) => n.known_version(),
            _ => None,
        }
    }

    /// The Node changed under us: the next publish reads it again.
    pub fn forget(&mut self) {
        if let Sink::Node(n) = self {
            n.forget();
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Sink::Node(_) => "node",
            Sink::NodeFeature(_) => "nodefeature",
            Sink::File(_) => "features-file",
            Sink::Stdout(_) => "stdout",
        }
    }

    pub async fn publish(
        &mut self,
        features: &FeatureSet,
        output: &NodeOutput,
        dry_run: bool,
    ) -> Result<Outcome, PublishError> {
        match self {
            Sink::Node(s) => s.publish(output, dry_run).await,
            Sink::NodeFeature(s) => s.publish(features, output, dry_run).await,
            Sink::File(s) => s.publish(output, dry_run),
            Sink::Stdout(last) => {
                if last.as_ref() == Some(output) {
                    return Ok(Outcome::unchanged());
                }
                let diff = LabelDiff::between(
                    &last.as_ref().map(|l| l.labels.clone()).unwrap_or_default(),
                    &output.labels,
                );
                if !dry_run {
                    // One JSON object per line: easy to follow with a pipe.
                    let line = serde_json::to_string(output).unwrap_or_default();
                    let mut out = std::io::stdout().lock();
                    use std::io::Write;
                    let _ = writeln!(out, "{line}").and_then(|_| out.flush());
                }
                *last = Some(output.clone());
                let kind = if dry_run {
                    OutcomeKind::DryRun
                } else {
                    OutcomeKind::Written
                };
                Ok(Outcome::of(kind, diff))
            }
        }
    }
}

/// A request may take at most half the interval, within [2 s, 30 s].
pub fn request_timeout(interval: Duration) -> Duration {
    (interval / 2).clamp(Duration::from_secs(2), Duration::from_secs(30))
}

/// The sink in force: the flag, else the config's `publish.sink`.
pub fn sink_kind(flag: Option<SinkKind>, config: &Config) -> Result<SinkKind, Error> {
    if let Some(k) = flag {
        return Ok(k);
    }
    let name = config.publish.sink.as_str();
    SinkKind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "config publish.sink: unknown sink {name:?} (node, nodefeature, features-file, stdout)"
            ))
        })
}

fn node_name(to: &SinkTarget, sink: &str) -> Result<String, Error> {
    match to.node_name.as_deref().map(str::trim) {
        Some(n) if !n.is_empty() => Ok(n.to_string()),
        _ => Err(Error::Usage(format!(
            "--node-name (or NODE_NAME) is required for --sink {sink}"
        ))),
    }
}

/// Whom a sink writes to: the node sinks their Node, the features-file sink its file.
#[derive(Debug, Clone, Default)]
pub struct SinkTarget {
    pub node_name: Option<String>,
    pub kubeconfig: Option<PathBuf>,
    pub features_file: Option<PathBuf>,
}

impl Sink {
    pub async fn build(kind: SinkKind, to: &SinkTarget, timeout: Duration) -> Result<Sink, Error> {
        Ok(match kind {
            SinkKind::Node => {
                let node = node_name(to, "node")?;
                let client =
                    client::kube_client(to.kubeconfig.as_deref(), timeout, MAX_RESPONSE_BYTES)
                        .await?;
                // On a policy denial (a site's policy narrower than its allowedNs, a namespace
                // added to one and not the other), publish what the shipped policy admits.
                let admits: node::Admits = Arc::new(crate::validate::shipped_policy_admits);
                Sink::Node(Box::new(
                    NodeSink::new(client, node, timeout).with_admitted(admits),
                ))
            }
            SinkKind::Nodefeature => {
                let node = node_name(to, "nodefeature")?;
                let client =
                    client::kube_client(to.kubeconfig.as_deref(), timeout, MAX_RESPONSE_BYTES)
                        .await?;
                let ns = std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|s| !s.trim().is_empty())
                    .unwrap_or_else(|| nodefeature::DEFAULT_NAMESPACE.to_string());
                Sink::NodeFeature(Box::new(NodeFeatureSink::new(client, node, ns, timeout)))
            }
            SinkKind::FeaturesFile => Sink::File(FeaturesFileSink::new(
                to.features_file
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(features_file::DEFAULT_PATH)),
            )),
            SinkKind::Stdout => Sink::Stdout(None),
        })
    }
}
