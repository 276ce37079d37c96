//! The command line (docs/catalog.md#command-line): argument definitions and the commands that print. The only module
//! that knows clap: it turns flags into the options of the floors below and calls down.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, CommandFactory, Parser, Subcommand};

use clap::builder::PossibleValue;

use crate::config;
use crate::daemon::{self, PublishOptions};
use crate::discover::nvml::child as nvml_child;
use crate::error::{self, Error, exit};
use crate::labels;
use crate::nodetemplate::{self, PerNode, formats};
use crate::pipeline::{self, RuleFiles, Sources};
use crate::publish::sink::SinkKind;
use crate::publish::stdout::{LabelFormat, render};
use crate::rules::RuleSet;
use crate::scheduling::{self, NodeSource, inventory, report};

/// Boolean environment variables take clap's usual set (`1`/`0`, `yes`/`no`, `on`/`off`,
/// `true`/`false`, ...); anything else is a usage error.
fn boolish() -> clap::builder::BoolishValueParser {
    clap::builder::BoolishValueParser::new()
}

#[derive(Debug, Parser)]
#[command(
    name = "gpu-labeler",
    version,
    about = "Discovers GPUs and accelerators and labels the Kubernetes node (NFD-compatible)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the labels this node gets.
    Labels {
        #[command(flatten)]
        discovery: DiscoveryArgs,
        #[command(flatten)]
        rules: RulesArgs,
        /// This node's name: picks its slices from `--dra` (default: the one node they are for).
        #[arg(long, env = "NODE_NAME", value_parser = node_name_arg)]
        node_name: Option<String>,
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: LabelFormat,
    },
    /// What every node of this node's shape will carry, before it exists: the labels (as
    /// `labels`), the GPU extended resources its device plugin advertises and the rules'
    /// taints, for an autoscaler's scale-from-zero template (docs/autoscaling.md).
    Template {
        #[command(flatten)]
        discovery: DiscoveryArgs,
        #[command(flatten)]
        rules: RulesArgs,
        /// This node's name: picks its slices from `--dra`; labels carrying it are left out
        /// (default: the one node the slices are for).
        #[arg(long, env = "NODE_NAME", value_parser = node_name_arg)]
        node_name: Option<String>,
        /// `json` (labels, resources, taints), `cluster-autoscaler` (Auto Scaling group tags),
        /// `cluster-autoscaler-gce` (kube-env AUTOSCALER_ENV_VARS), `cluster-api` (capacity
        /// annotations), `karpenter` (NodePool and NodeOverlay), `resourceslice` (what the DRA
        /// driver publishes).
        #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
        output: TemplateFormat,
        /// Labels that differ from node to node: `healthy` (every GPU healthy; no timestamp,
        /// nothing from the node's name or GPU UUIDs), `leave-out` (the health labels too), or
        /// `keep` (exactly `labels`).
        #[arg(long = "per-node", value_enum, default_value = "healthy")]
        per_node: PerNode,
        /// Only the labels in these namespaces (comma-separated; `*.x` for the sub-domains of
        /// `x`): the ones the group's pods select on, where the autoscaler limits a template's
        /// size (50 tags on an Auto Scaling group). The node still gets every label.
        #[arg(long = "label-ns", value_name = "NS", value_delimiter = ',', value_parser = allowed_ns_arg)]
        label_ns: Vec<String>,
        /// `-o karpenter`: the NodePool's name (and its NodeOverlay's).
        #[arg(long, default_value = "gpu", value_parser = node_name_arg)]
        nodepool: String,
        /// `-o karpenter`: the NodePool's NodeClass, GROUP/KIND/NAME.
        #[arg(long, value_name = "GROUP/KIND/NAME", default_value = "karpenter.k8s.aws/EC2NodeClass/default", value_parser = node_class_arg)]
        node_class: String,
        /// `-o karpenter`: an instance type of this shape (repeatable, comma-separated).
        #[arg(long = "instance-type", value_name = "TYPE", value_delimiter = ',')]
        instance_types: Vec<String>,
    },
    /// Print the raw feature set (a snapshot that `--features` reads back).
    Features {
        #[command(flatten)]
        discovery: DiscoveryArgs,
        /// This node's name: picks its slices from `--dra` (default: the one node they are for).
        #[arg(long, env = "NODE_NAME", value_parser = node_name_arg)]
        node_name: Option<String>,
        #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
        output: FeatureFormat,
    },
    /// Per rule, per expression: matched or not, and why.
    Explain {
        #[command(flatten)]
        discovery: DiscoveryArgs,
        #[command(flatten)]
        rules: RulesArgs,
        /// This node's name: picks its slices from `--dra` (default: the one node they are for).
        #[arg(long, env = "NODE_NAME", value_parser = node_name_arg)]
        node_name: Option<String>,
        /// Only this rule (its `name`).
        #[arg(long, conflicts_with = "label")]
        rule: Option<String>,
        /// Why this label is on the node, or why not: NFD's built-in PCI labels, the profile
        /// and every rule that can give it (a bare name gets `feature.node.kubernetes.io/`).
        #[arg(long, value_name = "KEY", value_parser = label_key_arg)]
        label: Option<String>,
    },
    /// What this node's labels would become on its Node: added, changed, removed, in conflict
    /// with another field manager, and what other managers alone write; exit 4 when the Node
    /// differs from what the node sink would publish.
    Diff {
        #[command(flatten)]
        discovery: DiscoveryArgs,
        #[command(flatten)]
        rules: RulesArgs,
        /// A Node file (`kubectl get node NAME -o yaml --show-managed-fields`) instead of
        /// asking the cluster.
        #[arg(long = "node", value_name = "FILE", conflicts_with = "kubeconfig")]
        node: Option<PathBuf>,
        /// The Node to read from the cluster (this node).
        #[arg(long, env = "NODE_NAME", value_parser = node_name_arg)]
        node_name: Option<String>,
        /// kubeconfig file (else in-cluster config, else $KUBECONFIG).
        #[arg(long, env = "GPU_LABELER_KUBECONFIG", value_name = "FILE")]
        kubeconfig: Option<PathBuf>,
        /// A template (`template -o json`): the nodes (`--nodes`, else the cluster's) against
        /// it, each that differs named with what differs; exit 4 when any differs.
        #[arg(long, value_name = "FILE", conflicts_with = "node")]
        template: Option<PathBuf>,
        /// With `--template`: `kubectl get nodes -o json` (or `-o yaml`) output instead of
        /// asking the cluster.
        #[arg(
            long,
            value_name = "FILE",
            requires = "template",
            conflicts_with = "kubeconfig"
        )]
        nodes: Option<PathBuf>,
        /// With `--template`: only the nodes with these labels (`key=value` or `key`,
        /// comma-separated), e.g. the node group's `karpenter.sh/nodepool=gpu`.
        #[arg(short = 'l', long, value_name = "SELECTOR", requires = "template", value_parser = selector_arg)]
        selector: Option<String>,
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: ReportFormat,
    },
    /// Take gpu-labeler's labels and annotations off Nodes (only the keys its field manager
    /// owns; a key another manager owns too stays, theirs), with the taints and the GPUHealthy
    /// condition it wrote, and delete the NodeFeature objects it published: for an uninstall,
    /// or a switch between the node and nodefeature sinks.
    Prune {
        /// The Node to prune (this node).
        /// With `--all-nodes`, a `NODE_NAME` in the environment (a pod's, a shell's) is not an
        /// error; the flag itself is.
        #[arg(long, env = "NODE_NAME", value_parser = node_name_arg)]
        node_name: Option<String>,
        /// Every Node in the cluster (the uninstall Job: deploy/prune).
        #[arg(long)]
        all_nodes: bool,
        /// Also delete the NodeFeature named after each Node in this namespace, when
        /// gpu-labeler wrote it.
        #[arg(long, value_name = "NAMESPACE", value_parser = namespace_arg)]
        nodefeature_namespace: Option<String>,
        /// Only the NodeFeature objects, not the Node labels (a switch from the nodefeature
        /// sink to the node sink, whose agents now write the labels themselves).
        #[arg(long, requires = "nodefeature_namespace")]
        nodefeatures_only: bool,
        /// Say what would go, change nothing; exit 4 when something would.
        #[arg(long, env = "GPU_LABELER_DRY_RUN", value_parser = boolish())]
        dry_run: bool,
        /// kubeconfig file (else in-cluster config, else $KUBECONFIG).
        #[arg(long, env = "GPU_LABELER_KUBECONFIG", value_name = "FILE")]
        kubeconfig: Option<PathBuf>,
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: ReportFormat,
    },
    /// Work with rule files.
    Rules {
        #[command(subcommand)]
        command: RulesCommand,
    },
    /// Which nodes a workload fits, and why not (the scheduler's filters: labels, taints,
    /// GPUs); exit 1 when no node fits.
    Match {
        /// A Pod, or a Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob (several
        /// documents allowed; `-` reads standard input).
        #[arg(value_name = "WORKLOAD")]
        workload: PathBuf,
        #[command(flatten)]
        nodes: NodesArgs,
        /// DRA objects to allocate the workload's claims from (ResourceSlices, DeviceClasses,
        /// ResourceClaims with their allocations, ResourceClaimTemplates: `kubectl get
        /// resourceslices,deviceclasses,resourceclaims -A -o json`), instead of the cluster's.
        #[arg(long, value_name = "FILE")]
        dra: Option<PathBuf>,
        #[command(flatten)]
        rules: RulesArgs,
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: ReportFormat,
    },
    /// Work with DRA claims.
    Claims {
        #[command(subcommand)]
        command: ClaimsCommand,
    },
    /// The fleet's GPUs from the nodes' labels: nodes per product, memory, MIG and sharing.
    Inventory {
        #[command(flatten)]
        nodes: NodesArgs,
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: ReportFormat,
    },
    /// Run the daemon: discover, evaluate and publish every interval.
    Run {
        #[command(flatten)]
        discovery: DiscoveryArgs,
        #[command(flatten)]
        rules: RulesArgs,
        #[command(flatten)]
        publish: PublishArgs,
    },
    /// Print the version.
    Version,
    /// A shell completion script on standard output, e.g. `source <(gpu-labeler completions
    /// bash)`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The manual page (roff) on standard output, e.g. `gpu-labeler man | man -l -`; with
    /// COMMAND, that command's page (`man labels`, `man rules check`).
    Man {
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// NVML's child process (internal): answers scans of LIB on a pipe.
    #[command(name = "__nvml-child", hide = true)]
    NvmlChild {
        lib: PathBuf,
        /// `sources.health.criticalXids`, comma-separated (empty: no XID check).
        #[arg(long, default_value = "")]
        critical_xids: String,
        /// `sources.health.clearAfter` in milliseconds.
        #[arg(long)]
        clear_after_ms: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Validate rule files statically and strictly; exit 1 on any error.
    Check {
        /// Files or directories.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Warnings are errors too (an unknown feature or element name, a template that can
        /// write megabytes): for CI, where a typo must fail the build.
        #[arg(long)]
        strict: bool,
        /// `json`: one object with the counts and every finding (severity, file, line,
        /// column, object, rule, message), for CI annotations.
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: ReportFormat,
    },
}

#[derive(Debug, Subcommand)]
pub enum ClaimsCommand {
    /// Lint the selectors of ResourceClaims, ResourceClaimTemplates and DeviceClasses against
    /// what the cluster's DRA drivers publish: an attribute or capacity no driver publishes
    /// (did you mean), one read without has() where some devices lack it, a version compared
    /// with a string; exit 1 on any problem.
    Check {
        /// Files of claims, templates and classes (workloads beside them are skipped).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// The ResourceSlices to check against (`kubectl get resourceslices -o json`), instead
        /// of the cluster's.
        #[arg(long, value_name = "FILE", conflicts_with = "kubeconfig")]
        dra: Option<PathBuf>,
        /// kubeconfig of the cluster to list ResourceSlices from (else in-cluster, else
        /// $KUBECONFIG).
        #[arg(long, value_name = "FILE")]
        kubeconfig: Option<PathBuf>,
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: ReportFormat,
    },
}

// `--sink` and `-o` take the names the floors below define; clap learns them here.
impl clap::ValueEnum for SinkKind {
    fn value_variants<'a>() -> &'a [Self] {
        &SinkKind::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

impl clap::ValueEnum for LabelFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &LabelFormat::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

impl clap::ValueEnum for PerNode {
    fn value_variants<'a>() -> &'a [Self] {
        &PerNode::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TemplateFormat {
    Json,
    ClusterAutoscaler,
    ClusterAutoscalerGce,
    ClusterApi,
    Karpenter,
    #[value(name = "resourceslice")]
    Resourceslice,
}

#[derive(Debug, Clone, Args)]
pub struct PublishArgs {
    /// The Node to label (this node).
    #[arg(long, env = "NODE_NAME", value_parser = node_name_arg)]
    pub node_name: Option<String>,
    /// kubeconfig file (else in-cluster config, else $KUBECONFIG).
    #[arg(long, env = "GPU_LABELER_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Where labels go (default: the config's publish.sink, else node).
    #[arg(long, env = "GPU_LABELER_SINK", value_enum)]
    pub sink: Option<SinkKind>,
    /// Path of the features.d file for `--sink features-file`.
    #[arg(long, env = "GPU_LABELER_FEATURES_FILE", value_name = "FILE")]
    pub features_file: Option<PathBuf>,
    /// Time between scans, e.g. 60s, 5m (default: the config's publish.interval, else 60s).
    #[arg(long, env = "GPU_LABELER_INTERVAL", value_parser = interval_arg)]
    pub interval: Option<String>,
    /// Publish once and exit.
    #[arg(long, env = "GPU_LABELER_ONESHOT", value_parser = boolish())]
    pub oneshot: bool,
    /// Compute and log what would be published, but do not write.
    #[arg(long, env = "GPU_LABELER_DRY_RUN", value_parser = boolish())]
    pub dry_run: bool,
    /// Address for /healthz, /readyz and /metrics.
    #[arg(long, env = "GPU_LABELER_LISTEN", default_value = "0.0.0.0:8080", value_parser = listen_arg)]
    pub listen: String,
    /// Log as JSON lines.
    #[arg(long, env = "GPU_LABELER_LOG_JSON", value_parser = boolish())]
    pub log_json: bool,
    /// The agent's own cgroup, for its memory limit (tests point it elsewhere).
    #[arg(
        long,
        hide = true,
        default_value = "/sys/fs/cgroup",
        value_name = "DIR"
    )]
    pub cgroup_root: PathBuf,
    /// Relabel only every interval and on SIGHUP: no file, uevent, NVML or Node events.
    #[arg(long, env = "GPU_LABELER_NO_EVENTS", value_parser = boolish())]
    pub no_events: bool,
    /// Read no DRA objects from the cluster (this node's ResourceSlices, the DeviceClasses):
    /// no `gpu.dra.*` labels but from `--dra FILE` (docs/dra.md).
    #[arg(long, env = "GPU_LABELER_NO_DRA", value_parser = boolish())]
    pub no_dra: bool,
    /// The node sink applies the rules' taints, as the config's `publish.taints: true`
    /// (docs/taints.md).
    #[arg(long, env = "GPU_LABELER_PUBLISH_TAINTS", value_parser = boolish())]
    pub publish_taints: bool,
    /// The node sink sets the GPUHealthy condition, as the config's `publish.condition: true`
    /// (docs/taints.md).
    #[arg(long, env = "GPU_LABELER_PUBLISH_CONDITION", value_parser = boolish())]
    pub publish_condition: bool,
    /// A GPU with a held fault is taken out of DRA allocation by a DeviceTaintRule for its
    /// slice devices, as the config's `publish.deviceTaints: true` (docs/taints.md); with
    /// `--sink stdout` the rules are printed.
    #[arg(long, env = "GPU_LABELER_PUBLISH_DEVICE_TAINTS", value_parser = boolish())]
    pub publish_device_taints: bool,
    /// Read uevents from a Unix datagram socket bound here, not the kernel's (tests).
    #[arg(long, hide = true, value_name = "PATH")]
    pub uevent_socket: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
}

/// Where `match` and `inventory` read nodes: a file, else the cluster (read-only).
#[derive(Debug, Clone, Args)]
pub struct NodesArgs {
    /// `kubectl get nodes -o json` (or `-o yaml`) output, instead of asking the cluster.
    #[arg(long, value_name = "FILE", conflicts_with = "kubeconfig")]
    pub nodes: Option<PathBuf>,
    /// kubeconfig of the cluster to list nodes from (else in-cluster, else $KUBECONFIG).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

impl NodesArgs {
    fn source(&self) -> NodeSource {
        match &self.nodes {
            Some(f) => NodeSource::File(f.clone()),
            None => NodeSource::Cluster {
                kubeconfig: self.kubeconfig.clone(),
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FeatureFormat {
    Json,
    Yaml,
}

#[derive(Debug, Clone, Args)]
pub struct DiscoveryArgs {
    /// Root of sysfs.
    #[arg(long, env = "GPU_LABELER_SYSFS_ROOT", default_value = "/sys")]
    pub sysfs_root: PathBuf,
    /// Root of procfs.
    #[arg(long, env = "GPU_LABELER_PROC_ROOT", default_value = "/proc")]
    pub proc_root: PathBuf,
    /// NVML library to load instead of the loader's search for libnvidia-ml.so.1.
    #[arg(long, env = "GPU_LABELER_NVML_LIB", conflicts_with = "no_nvml")]
    pub nvml_lib: Option<PathBuf>,
    /// Do not use NVML.
    #[arg(long, env = "GPU_LABELER_NO_NVML", value_parser = boolish())]
    pub no_nvml: bool,
    /// How long one NVML scan may take before its child process is killed (default: the
    /// config's sources.nvml.timeout, else 10s).
    #[arg(long, env = "GPU_LABELER_NVML_TIMEOUT", value_name = "DURATION", value_parser = config::parse_duration)]
    pub nvml_timeout: Option<Duration>,
    /// Use a recorded snapshot (JSON or YAML, features object or NodeFeature) instead of discovering.
    #[arg(long = "features", env = "GPU_LABELER_FEATURES", value_name = "FILE")]
    pub features: Option<PathBuf>,
    /// Configuration file (docs/catalog.md#config).
    #[arg(long, env = "GPU_LABELER_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// DRA objects (`kubectl get resourceslices,deviceclasses -o json`, or YAML documents of
    /// ResourceSlices, DeviceClasses and this node's Node): this node's slices joined to its
    /// GPUs, as the `dra.*` features and the `gpu.dra.*` labels (docs/dra.md).
    #[arg(long, value_name = "FILE")]
    pub dra: Option<PathBuf>,
    /// A pci.ids file to read device names from (default: the embedded database, 2025.07.11).
    #[arg(long, env = "GPU_LABELER_PCI_IDS", value_name = "FILE")]
    pub pci_ids: Option<PathBuf>,
    /// A compatibility profile added to the config's `profiles` (repeatable): nvidia-gfd.
    #[arg(
        long = "profile",
        env = "GPU_LABELER_PROFILES",
        value_name = "NAME",
        value_delimiter = ',',
        value_parser = config::parse_profile
    )]
    pub profiles: Vec<config::Profile>,
    /// The only label namespaces written, instead of the config's `labels.allowedNs`
    /// (comma-separated; `*.x` for the sub-domains of `x`): a kustomize env patch rather than
    /// an edit inside the ConfigMap.
    #[arg(
        long = "allowed-ns",
        env = "GPU_LABELER_ALLOWED_NS",
        value_name = "NS",
        value_delimiter = ',',
        value_parser = allowed_ns_arg
    )]
    pub allowed_ns: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct RulesArgs {
    /// NodeFeatureRule file or directory (repeatable).
    #[arg(
        long = "rules",
        env = "GPU_LABELER_RULES",
        value_name = "PATH",
        value_delimiter = ','
    )]
    pub rules: Vec<PathBuf>,
    /// Leave out the rules shipped in the binary.
    #[arg(long, env = "GPU_LABELER_NO_DEFAULT_RULES", value_parser = boolish())]
    pub no_default_rules: bool,
}

impl DiscoveryArgs {
    /// The sources of a command that names its node (`--node-name`): it picks the node's
    /// slices from `--dra`.
    pub fn sources_for(&self, node_name: Option<String>) -> Sources {
        Sources {
            node_name,
            ..self.sources()
        }
    }

    pub fn sources(&self) -> Sources {
        Sources {
            sysfs_root: self.sysfs_root.clone(),
            proc_root: self.proc_root.clone(),
            nvml_lib: self.nvml_lib.clone(),
            no_nvml: self.no_nvml,
            nvml_timeout: self.nvml_timeout,
            features: self.features.clone(),
            config: self.config.clone(),
            dra: self.dra.clone(),
            node_name: None,
            pci_ids: self.pci_ids.clone(),
            profiles: self.profiles.clone(),
            allowed_ns: self
                .allowed_ns
                .iter()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect(),
        }
    }
}

impl RulesArgs {
    pub fn rule_files(&self) -> RuleFiles {
        RuleFiles {
            paths: self.rules.clone(),
            no_default_rules: self.no_default_rules,
        }
    }
}

impl PublishArgs {
    pub fn options(&self) -> PublishOptions {
        PublishOptions {
            node_name: self.node_name.clone(),
            kubeconfig: self.kubeconfig.clone(),
            sink: self.sink,
            features_file: self.features_file.clone(),
            interval: self.interval.clone(),
            oneshot: self.oneshot,
            dry_run: self.dry_run,
            listen: self.listen.clone(),
            cgroup_root: self.cgroup_root.clone(),
            uevent_socket: self.uevent_socket.clone(),
            no_events: self.no_events,
            no_dra: self.no_dra,
            publish_taints: self.publish_taints,
            publish_condition: self.publish_condition,
            publish_device_taints: self.publish_device_taints,
        }
    }
}

/// Parses the command line. An invalid value that came from an environment variable is said
/// with the variable's name: clap names the flag, which the user never typed.
pub fn parse() -> Cli {
    Cli::try_parse().unwrap_or_else(|e| name_the_variable(e).exit())
}

fn name_the_variable(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg).cloned() else {
        return e;
    };
    // `--no-nvml`, or `--nvml-timeout <DURATION>`.
    let flag = arg
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    fn env_of(cmd: &clap::Command, long: &str) -> Option<String> {
        cmd.get_arguments()
            .find(|a| a.get_long() == Some(long))
            .and_then(|a| a.get_env())
            .map(|v| v.to_string_lossy().into_owned())
            .or_else(|| cmd.get_subcommands().find_map(|c| env_of(c, long)))
    }
    let Some(env) = env_of(&Cli::command(), flag.trim_start_matches("--")) else {
        return e;
    };
    let name = given_as(&flag, &env);
    if name == env {
        e.insert(
            ContextKind::InvalidArg,
            ContextValue::String(format!("{env} (the environment variable of {flag})")),
        );
    }
    e
}

impl Command {
    /// Where the command discovers the node from, for the commands that do.
    fn discovery(&self) -> Option<&DiscoveryArgs> {
        match self {
            Command::Labels { discovery, .. }
            | Command::Template { discovery, .. }
            | Command::Explain { discovery, .. }
            | Command::Features { discovery, .. }
            | Command::Run { discovery, .. } => Some(discovery),
            _ => None,
        }
    }
}

/// The name a value came by: the flag when the command line has it, else its environment
/// variable.
fn given_as(flag: &str, env: &str) -> String {
    let on_line = std::env::args_os().skip(1).any(|a| {
        let a = a.to_string_lossy();
        a == flag || a.starts_with(&format!("{flag}="))
    });
    if !on_line && std::env::var_os(env).is_some() {
        env.to_string()
    } else {
        flag.to_string()
    }
}

impl DiscoveryArgs {
    /// A sysfs root that was given (not the default `/sys`) and is not one: a typo in a flag or
    /// a DaemonSet's environment would otherwise discover nothing, exit 0 and publish nothing.
    /// The default is left to the scan, which warns (a machine may have no PCI bus).
    fn check_sysfs_root(&self) -> Result<(), Error> {
        let root = &self.sysfs_root;
        if self.features.is_some() || root == Path::new("/sys") {
            return Ok(());
        }
        let problem = match std::fs::metadata(root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "does not exist",
            Err(_) => "cannot be read",
            Ok(m) if !m.is_dir() => "is not a directory",
            Ok(_) if !root.join("bus/pci").is_dir() => {
                "has no bus/pci: it is not the root of a sysfs tree (the kernel's is /sys; a \
                 recorded machine's, such as tests/fixtures/sysfs/dell-xe9680-8xh100, has bus/pci \
                 too)"
            }
            Ok(_) => return Ok(()),
        };
        let given = match given_as("--sysfs-root", "GPU_LABELER_SYSFS_ROOT") {
            flag if flag.starts_with("--") => format!("{flag} {}", root.display()),
            env => format!("{env}={}", root.display()),
        };
        Err(Error::Usage(format!("{given}: {problem}")))
    }
}

/// Runs a command; returns the process exit code.
pub fn run(cli: Cli) -> u8 {
    if let Some(Err(e)) = cli.command.discovery().map(DiscoveryArgs::check_sysfs_root) {
        error::print_error(&e);
        return e.exit_code();
    }
    let result = match cli.command {
        Command::Labels {
            discovery,
            rules,
            node_name,
            output,
        } => cmd_labels(&discovery.sources_for(node_name), &rules, output),
        Command::Template {
            discovery,
            rules,
            node_name,
            output,
            per_node,
            label_ns,
            nodepool,
            node_class,
            instance_types,
        } => {
            let mut class = node_class.splitn(3, '/').map(str::to_string);
            let mut next = || class.next().unwrap_or_default();
            let req = TemplateRequest {
                node_name: node_name.clone(),
                format: output,
                per_node,
                label_ns: label_ns
                    .iter()
                    .map(|n| n.trim().to_string())
                    .filter(|n| !n.is_empty())
                    .collect(),
                karpenter: formats::KarpenterOptions {
                    name: nodepool,
                    node_class: (next(), next(), next()),
                    instance_types,
                },
            };
            cmd_template(&discovery.sources_for(node_name), &rules, &req)
        }
        Command::Explain {
            discovery,
            rules,
            node_name,
            rule,
            label,
        } => cmd_explain(
            &discovery.sources_for(node_name),
            &rules,
            rule.as_deref(),
            label.as_deref(),
        ),
        Command::Diff {
            template: Some(template),
            nodes,
            selector,
            kubeconfig,
            output,
            ..
        } => cmd_diff_template(
            &template,
            &NodesArgs { nodes, kubeconfig },
            selector.as_deref(),
            output,
        ),
        Command::Diff {
            discovery,
            rules,
            node,
            node_name,
            kubeconfig,
            output,
            ..
        } => cmd_diff(
            &discovery,
            &rules,
            node.as_deref(),
            node_name.as_deref(),
            kubeconfig.as_deref(),
            output,
        ),
        Command::Prune {
            node_name,
            all_nodes,
            nodefeature_namespace,
            nodefeatures_only,
            dry_run,
            kubeconfig,
            output,
        } => cmd_prune(
            node_name,
            all_nodes,
            nodefeature_namespace,
            nodefeatures_only,
            dry_run,
            kubeconfig.as_deref(),
            output,
        ),
        Command::Rules {
            command:
                RulesCommand::Check {
                    paths,
                    strict,
                    output,
                },
        } => cmd_rules_check(&paths, strict, output),
        Command::Features {
            discovery,
            node_name,
            output,
        } => cmd_features(&discovery.sources_for(node_name), output),
        Command::Match {
            workload,
            nodes,
            dra,
            rules,
            output,
        } => cmd_match(&workload, &nodes, dra.as_deref(), &rules, output),
        Command::Inventory { nodes, output } => cmd_inventory(&nodes, output),
        Command::Claims {
            command:
                ClaimsCommand::Check {
                    files,
                    dra,
                    kubeconfig,
                    output,
                },
        } => cmd_claims_check(&files, dra.as_deref(), kubeconfig, output),
        Command::Run {
            discovery,
            rules,
            publish,
        } => daemon::run(daemon::Options {
            sources: discovery.sources_for(publish.node_name.clone()),
            rules: rules.rule_files(),
            publish: publish.options(),
        }),
        Command::NvmlChild {
            lib,
            critical_xids,
            clear_after_ms,
        } => Ok(nvml_child::serve_args(lib, &critical_xids, clear_after_ms)),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "gpu-labeler", &mut out);
            let mut script = String::from_utf8_lossy(&out).into_owned();
            if shell == clap_complete::Shell::Bash {
                // clap_complete 4.6 spells the dashed name two ways in its bash script: the
                // walk over the words says `gpu__labeler__subcmd__rules`, the cases
                // `gpu__subcmd__labeler__subcmd__rules`, so nothing below the first word
                // completed. One spelling (tests/cli.rs completes `rules` and `-o`).
                script = script.replace("gpu__subcmd__labeler", "gpu__labeler");
            }
            print(&script);
            Ok(exit::OK)
        }
        Command::Man { command } => cmd_man(&command),
        Command::Version => {
            print(&format!("gpu-labeler {}\n", env!("CARGO_PKG_VERSION")));
            Ok(exit::OK)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            error::print_error(&e);
            e.exit_code()
        }
    }
}

/// The manual page of the command at `path` (none: the whole program's).
fn cmd_man(path: &[String]) -> Result<u8, Error> {
    // Built, so that every subcommand has its display name (`gpu-labeler-rules-check`), which
    // the page's title and its list of subcommand pages use.
    let mut page = Cli::command();
    page.build();
    for name in path {
        let sub = page
            .get_subcommands()
            .find(|c| c.get_name() == name && !c.is_hide_set())
            .cloned();
        page = sub.ok_or_else(|| {
            Error::Usage(format!(
                "no command `{}` in `{}`",
                name,
                page.get_bin_name().unwrap_or(page.get_name())
            ))
        })?;
    }
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|e| Error::Runtime(format!("cannot render the manual page: {e}")))?;
    print(&String::from_utf8_lossy(&out));
    Ok(exit::OK)
}

/// What `labels` and `template` both evaluate: the same inputs, read the same way.
struct NodeEvaluation {
    config: config::Config,
    features: crate::features::FeatureSet,
    rule_set: RuleSet,
    evaluated: labels::Evaluated,
    rule_errors: Vec<String>,
    required: Vec<String>,
}

fn evaluate_node(sources: &Sources, rules: &RulesArgs) -> Result<NodeEvaluation, Error> {
    let rules = rules.rule_files();
    let config = sources.load_config()?;
    // Rules parse while the node is discovered: measured 2-3 ms (6%) off `labels` on a
    // 2,000-function machine, which the issue-2 target needs.
    let (features, (rule_set, rule_errors)) = std::thread::scope(|scope| {
        let rules = scope.spawn(|| rules.load());
        let features = sources.features(&config);
        let rules = rules
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (features, rules)
    });
    let (mut features, required) = features?;
    let mut rule_errors = rule_errors;
    rule_errors.extend(sources.add_dra(&mut features));
    let evaluated = labels::evaluate_node(&features, &config, &rule_set);
    pipeline::report(&evaluated);
    Ok(NodeEvaluation {
        config,
        features,
        rule_set,
        evaluated,
        rule_errors,
        required,
    })
}

fn cmd_labels(sources: &Sources, rules: &RulesArgs, format: LabelFormat) -> Result<u8, Error> {
    let e = evaluate_node(sources, rules)?;
    print(&render(&e.evaluated.output, format));
    // `key=value` lines have no place for the rules' taints: said beside them, not lost.
    let taints = &e.evaluated.output.taints;
    if format == LabelFormat::Text && !taints.is_empty() {
        let mut s = format!(
            "note: the rules also produce {} taint(s), which key=value output cannot show (-o json \
             shows them; the node sink applies them with publish.taints, docs/taints.md):\n",
            taints.len()
        );
        // As kubectl writes them: `key=value:Effect`, `key:Effect` without a value.
        for t in taints {
            let value = if t.value.is_empty() {
                String::new()
            } else {
                format!("={}", t.value)
            };
            s.push_str(&format!("  {}{value}:{}\n", t.key, t.effect));
        }
        eprint!("{s}");
    }
    // On the machine itself, not on a recorded tree someone chose to read.
    if sources.features.is_none() && sources.sysfs_root == Path::new("/sys") {
        eprint!("{}", nothing_found_hint(&e.features, &sources.sysfs_root));
    }
    // The process ends here: freeing thousands of feature maps would only delay the exit
    // (part of the same measured 2-3 ms).
    let (rule_errors, required) = (e.rule_errors.clone(), e.required.clone());
    std::mem::forget(e);
    // Labels from every good rule are printed; a rule file that did not load is still invalid
    // input, and a required source that failed a runtime failure.
    for e in rule_errors.iter().chain(&required) {
        error::print_error(&e);
    }
    Ok(exit_code(&rule_errors, &required))
}

/// A first run on a machine without GPUs prints nothing at all: say what was read, and how to
/// see the agent at work without a GPU. Empty when a GPU or accelerator was found.
fn nothing_found_hint(features: &crate::features::FeatureSet, root: &Path) -> String {
    let found = |name: &str| !features.instances(name).is_empty();
    if found(crate::discover::gpu::GPU_DEVICE) || found(crate::discover::accel::ACCEL_DEVICE) {
        return String::new();
    }
    let functions = features.instances("pci.device").len();
    format!(
        "hint: no GPU or accelerator found ({functions} PCI function(s) read under {}, none of \
         them one). To see what gpu-labeler does on a GPU node, give it a recorded machine from \
         a clone of the repository: gpu-labeler labels --sysfs-root \
         tests/fixtures/sysfs/dell-xe9680-8xh100 (docs/try-without-a-gpu.md)\n",
        root.display()
    )
}

/// What `template` needs beside the evaluation's inputs.
struct TemplateRequest {
    node_name: Option<String>,
    format: TemplateFormat,
    per_node: PerNode,
    label_ns: Vec<String>,
    karpenter: formats::KarpenterOptions,
}

fn cmd_template(sources: &Sources, rules: &RulesArgs, req: &TemplateRequest) -> Result<u8, Error> {
    let e = evaluate_node(sources, rules)?;
    let node = req.node_name.as_deref();
    let mut t = nodetemplate::template(
        &e.features,
        &e.config,
        &e.rule_set,
        &e.evaluated.output,
        node,
        req.per_node,
    );
    if !req.label_ns.is_empty() {
        nodetemplate::keep_namespaces(&mut t, &req.label_ns);
    }
    let rendered = match req.format {
        TemplateFormat::Json => formats::Rendered {
            text: nodetemplate::render_json(&t),
            warnings: Vec::new(),
        },
        TemplateFormat::ClusterAutoscaler => formats::cluster_autoscaler(&t),
        TemplateFormat::ClusterAutoscalerGce => formats::cluster_autoscaler_gce(&t),
        TemplateFormat::ClusterApi => formats::cluster_api(&t),
        TemplateFormat::Karpenter => {
            formats::karpenter(&t, &req.karpenter).map_err(Error::InvalidInput)?
        }
        TemplateFormat::Resourceslice => {
            let text = nodetemplate::slices::render(
                &e.features,
                node.unwrap_or(nodetemplate::slices::PLACEHOLDER_NODE),
                req.per_node == PerNode::Keep,
            );
            let warnings = if text.is_empty() {
                vec![
                    "no GPU of a vendor with a DRA driver (NVIDIA, AMD, Intel): no ResourceSlice"
                        .to_string(),
                ]
            } else {
                Vec::new()
            };
            formats::Rendered { text, warnings }
        }
    };
    print(&rendered.text);
    for w in &rendered.warnings {
        eprintln!("warning: {w}");
    }
    for err in e.rule_errors.iter().chain(&e.required) {
        error::print_error(&err);
    }
    Ok(exit_code(&e.rule_errors, &e.required))
}

/// Invalid input wins over a failed required source; both over success.
fn exit_code(rule_errors: &[String], required: &[String]) -> u8 {
    if !rule_errors.is_empty() {
        exit::INVALID_INPUT
    } else if !required.is_empty() {
        exit::RUNTIME
    } else {
        exit::OK
    }
}

fn cmd_explain(
    sources: &Sources,
    rules: &RulesArgs,
    rule: Option<&str>,
    label: Option<&str>,
) -> Result<u8, Error> {
    let config = sources.load_config()?;
    if let Some(key) = label {
        let (rule_set, rule_errors) = rules.rule_files().load();
        for e in &rule_errors {
            error::print_error(&e);
        }
        let (mut features, required) = sources.features(&config)?;
        let dra_errors = sources.add_dra(&mut features);
        print(&labels::explain::explain_label(
            key, &features, &config, &rule_set,
        ));
        for e in dra_errors.iter().chain(&required) {
            error::print_error(&e);
        }
        let rule_errors = [rule_errors, dra_errors].concat();
        return Ok(exit_code(&rule_errors, &required));
    }
    let (rule_set, rule_errors) = rules.rule_files().load();
    for e in &rule_errors {
        error::print_error(&e);
    }
    // A rule name that names no rule would explain nothing and look like success.
    let names = rule_set.rule_names();
    if let Some(name) = rule
        && !names.contains(&name)
    {
        let hint = crate::rules::closest(name, names.iter().copied())
            .map(|c| format!(" (did you mean {c:?}?)"))
            .unwrap_or_default();
        return Err(Error::InvalidInput(format!(
            "--rule {name:?}: no rule of that name is loaded{hint}"
        )));
    }
    let (mut features, required) = sources.features(&config)?;
    let dra_errors = sources.add_dra(&mut features);
    print(&crate::rules::explain(&rule_set, &features, rule));
    if rule.is_none() {
        print(&format!(
            "\n{}",
            labels::explain::explain_builtin(&features, &config)
        ));
    }
    for e in dra_errors.iter().chain(&required) {
        error::print_error(&e);
    }
    let rule_errors = [rule_errors, dra_errors].concat();
    Ok(exit_code(&rule_errors, &required))
}

fn cmd_rules_check(paths: &[PathBuf], strict: bool, format: ReportFormat) -> Result<u8, Error> {
    let (sources, read_errors) = RuleSet::load_paths(paths);
    let known: Vec<&str> = crate::features::CATALOG.iter().map(|(n, _)| *n).collect();
    let mut report = crate::rules::check(&sources, &known);
    // A rule that writes a built-in label (gpu.health...): said here as the agent says it.
    let mut with_builtin = crate::default_rules::sources();
    with_builtin.extend(sources.iter().cloned());
    report
        .warnings
        .extend(RuleSet::load(with_builtin).0.builtin_overrides());
    let warning = if strict { "error" } else { "warning" };
    let findings: Vec<(&str, &crate::rules::RuleLoadError)> = read_errors
        .iter()
        .chain(&report.errors)
        .map(|e| ("error", e))
        .chain(report.warnings.iter().map(|w| (warning, w)))
        .collect();
    let errors = findings.iter().filter(|(s, _)| *s == "error").count();
    let warnings = findings.len() - errors;
    print(&match format {
        ReportFormat::Text => {
            let mut out = String::new();
            for (severity, f) in &findings {
                out.push_str(&format!("{severity}: {f}\n"));
            }
            out.push_str(&format!(
                "{} file(s) checked: {errors} error(s), {warnings} warning(s)\n",
                sources.len(),
            ));
            out
        }
        ReportFormat::Json => {
            let findings: Vec<serde_json::Value> = findings
                .iter()
                .map(|(severity, f)| {
                    let pos = |n: u32| (n > 0).then_some(n);
                    serde_json::json!({
                        "severity": severity,
                        "file": f.source,
                        "line": pos(f.line),
                        "column": pos(f.column),
                        "object": f.object,
                        "rule": f.rule,
                        "message": f.message,
                    })
                })
                .collect();
            let doc = serde_json::json!({
                "files": sources.len(),
                "errors": errors,
                "warnings": warnings,
                "findings": findings,
            });
            serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
        }
    });
    Ok(if errors == 0 {
        exit::OK
    } else {
        exit::INVALID_INPUT
    })
}

fn cmd_diff(
    args: &DiscoveryArgs,
    rules: &RulesArgs,
    node_file: Option<&std::path::Path>,
    node_name: Option<&str>,
    kubeconfig: Option<&std::path::Path>,
    format: ReportFormat,
) -> Result<u8, Error> {
    use crate::publish::diff;
    let node = match (node_file, node_name) {
        (Some(f), _) => diff::read_node_file(f)?,
        (None, Some(name)) => diff::fetch_node(kubeconfig, name, DIFF_TIMEOUT)?,
        (None, None) => {
            return Err(Error::Usage(
                "diff needs a Node: --node FILE, or --node-name (NODE_NAME) to read it from the cluster".into(),
            ));
        }
    };
    let sources = args.sources();
    // What the node sink would publish: its namespace defaults included.
    let config = daemon::with_defaults(sources.load_config()?, true);
    let (rule_set, rule_errors) = rules.rule_files().load();
    let (features, required) = sources.features(&config)?;
    let evaluated = labels::evaluate_node(&features, &config, &rule_set);
    pipeline::report(&evaluated);
    let d = diff::diff(
        &node,
        &crate::publish::node::Owned::from_output(&evaluated.output),
    );
    print(&match format {
        ReportFormat::Text => d.render_text(),
        ReportFormat::Json => d.render_json(),
    });
    for e in rule_errors.iter().chain(&required) {
        error::print_error(&e);
    }
    Ok(match exit_code(&rule_errors, &required) {
        exit::OK if d.differs() => exit::DIFFERS,
        code => code,
    })
}

fn cmd_diff_template(
    template: &std::path::Path,
    nodes: &NodesArgs,
    selector: Option<&str>,
    format: ReportFormat,
) -> Result<u8, Error> {
    use nodetemplate::diff;
    let source = template.display().to_string();
    let text = crate::sysfs::read_regular_text(template, crate::sysfs::MAX_INPUT_BYTES)
        .map_err(|e| Error::InvalidInput(format!("cannot read {source}: {e}")))?;
    let t = diff::read_template(&source, &text).map_err(Error::InvalidInput)?;
    let selector = selector
        .map(diff::Selector::parse)
        .transpose()
        .map_err(|e| Error::Usage(format!("--selector: {e}")))?;
    let mut nodes = scheduling::load_nodes(&nodes.source())?;
    if let Some(sel) = &selector {
        nodes.retain(|n| sel.matches(&n.labels));
    }
    let diffs = diff::diff(&t, &nodes);
    // The fleet against itself too: a node with fewer GPUs than most of its instance type.
    let short = scheduling::inventory::short_nodes(&nodes);
    print(&match format {
        ReportFormat::Text => diff::render_text(&diffs, &short),
        ReportFormat::Json => diff::render_json(&diffs, &short),
    });
    Ok(
        if diffs.iter().any(|d| !d.differences.is_empty()) || !short.is_empty() {
            exit::DIFFERS
        } else {
            exit::OK
        },
    )
}

fn cmd_prune(
    node_name: Option<String>,
    all_nodes: bool,
    namespace: Option<String>,
    nodefeatures_only: bool,
    dry_run: bool,
    kubeconfig: Option<&std::path::Path>,
    format: ReportFormat,
) -> Result<u8, Error> {
    use crate::publish::prune;
    // `--node-name` and `--all-nodes` ask for different things; a `NODE_NAME` exported in the
    // environment (the value clap read from it) with `--all-nodes` asks for nothing.
    let from_env = std::env::var("NODE_NAME").ok();
    if all_nodes && node_name.is_some() && node_name != from_env {
        return Err(Error::Usage(
            "the argument '--node-name <NODE_NAME>' cannot be used with '--all-nodes'".into(),
        ));
    }
    let nodes = match (node_name, all_nodes) {
        (_, true) => prune::Nodes::All,
        (Some(n), false) => prune::Nodes::One(n),
        (None, false) => {
            return Err(Error::Usage(
                "prune needs --node-name (NODE_NAME) or --all-nodes".into(),
            ));
        }
    };
    let req = prune::Request {
        nodes,
        namespace,
        node_labels: !nodefeatures_only,
        dry_run,
        timeout: DIFF_TIMEOUT,
    };
    let report = prune::run(kubeconfig, &req)?;
    print(&match format {
        ReportFormat::Text => prune::render_text(&report, dry_run),
        ReportFormat::Json => prune::render_json(&report, dry_run),
    });
    // The report says which nodes failed; the errors themselves also go where errors go.
    for p in &report {
        if let Some(e) = &p.error {
            eprintln!("error: node {}: {e}", p.node);
        }
    }
    Ok(if report.iter().any(|p| p.error.is_some()) {
        exit::RUNTIME
    } else if dry_run && report.iter().any(prune::NodePrune::has_work) {
        exit::DIFFERS
    } else {
        exit::OK
    })
}

/// How long `diff` waits for the API server's answer.
const DIFF_TIMEOUT: Duration = Duration::from_secs(30);

fn cmd_features(sources: &Sources, format: FeatureFormat) -> Result<u8, Error> {
    let config = sources.load_config()?;
    let (mut features, required) = sources.features(&config)?;
    let dra_errors = sources.add_dra(&mut features);
    print(&match format {
        FeatureFormat::Json => features.to_json() + "\n",
        FeatureFormat::Yaml => features.to_yaml(),
    });
    for e in dra_errors.iter().chain(&required) {
        error::print_error(&e);
    }
    Ok(exit_code(&dra_errors, &required))
}

fn cmd_match(
    workload: &std::path::Path,
    nodes: &NodesArgs,
    dra: Option<&std::path::Path>,
    rules: &RulesArgs,
    format: ReportFormat,
) -> Result<u8, Error> {
    let (workloads, mut dra_set) = scheduling::load_workloads(workload)?;
    let source = nodes.source();
    let nodes = scheduling::load_nodes(&source)?;
    // The DRA objects only where a pod has claims: the cluster is asked for nothing more.
    if workloads.iter().any(|w| !w.pod.resource_claims.is_empty()) {
        dra_set.extend(scheduling::load_dra(dra, &source)?);
    }
    // The rules only feed the hints: one that does not load is worth a warning, not the answer.
    let (rule_set, rule_errors) = rules.rule_files().load();
    for e in &rule_errors {
        tracing::warn!("{e}");
    }
    let producers = report::Producers {
        rules: rule_set.label_producers(),
        builtin: labels::builtin_producer,
    };
    let reports = report::match_fleet(workloads, &nodes, &producers, &dra_set);
    print(&match format {
        ReportFormat::Text => report::render_text(&reports),
        ReportFormat::Json => report::render_json(&reports),
    });
    Ok(if reports.iter().all(|r| r.available() > 0) {
        exit::OK
    } else {
        exit::NO_FIT
    })
}

fn cmd_claims_check(
    files: &[PathBuf],
    dra: Option<&std::path::Path>,
    kubeconfig: Option<PathBuf>,
    format: ReportFormat,
) -> Result<u8, Error> {
    let mut set = scheduling::draobjects::DraSet::default();
    for f in files {
        set.extend(scheduling::load_dra(
            Some(f),
            &scheduling::NodeSource::File(f.clone()),
        )?);
    }
    let cluster = scheduling::load_dra(dra, &scheduling::NodeSource::Cluster { kubeconfig })?;
    let findings = scheduling::claimlint::check(&set, &cluster);
    print(&match format {
        ReportFormat::Text => scheduling::claimlint::render_text(&findings),
        ReportFormat::Json => scheduling::claimlint::render_json(&findings),
    });
    Ok(if findings.is_empty() {
        exit::OK
    } else {
        exit::NO_FIT
    })
}

fn cmd_inventory(nodes: &NodesArgs, format: ReportFormat) -> Result<u8, Error> {
    let inv = inventory::inventory(&scheduling::load_nodes(&nodes.source())?);
    print(&match format {
        ReportFormat::Text => inventory::render_text(&inv),
        ReportFormat::Json => inventory::render_json(&inv),
    });
    Ok(exit::OK)
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic.
fn print(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|_| out.flush());
}

/// `--interval`: checked as the flag is parsed, so that a bad value is a usage error (exit 2)
/// as every other flag's; kept as written for the daemon.
fn interval_arg(s: &str) -> Result<String, String> {
    config::parse_interval(s).map(|_| s.to_string())
}

/// `--node-name` (`NODE_NAME`): a Node's name is a DNS-1123 subdomain; another value can name
/// no Node, so it is a usage error (exit 2), not a request the API server refuses.
fn node_name_arg(s: &str) -> Result<String, String> {
    crate::validate::dns_subdomain(s).map(|()| s.to_string())
}

/// `diff --selector`: `key=value` or `key`, comma-separated.
fn selector_arg(s: &str) -> Result<String, String> {
    nodetemplate::diff::Selector::parse(s).map(|_| s.to_string())
}

/// `--node-class`: `GROUP/KIND/NAME`, none empty.
fn node_class_arg(s: &str) -> Result<String, String> {
    let parts: Vec<&str> = s.split('/').collect();
    if parts.len() == 3 && parts.iter().all(|p| !p.is_empty()) {
        Ok(s.to_string())
    } else {
        Err("expected GROUP/KIND/NAME, e.g. karpenter.k8s.aws/EC2NodeClass/default".to_string())
    }
}

/// `--nodefeature-namespace`: a namespace's name is a DNS-1123 label.
fn namespace_arg(s: &str) -> Result<String, String> {
    if s.len() > 63 || s.contains('.') {
        return Err("a namespace must be a DNS-1123 label: at most 63 lower case alphanumeric characters or '-', starting and ending with an alphanumeric character".to_string());
    }
    crate::validate::dns_subdomain(s)
        .map(|()| s.to_string())
        .map_err(|_| "a namespace must be a DNS-1123 label: at most 63 lower case alphanumeric characters or '-', starting and ending with an alphanumeric character".to_string())
}

/// `--allowed-ns`: each entry a label namespace (a DNS-1123 subdomain), or `*.` and one for
/// its sub-domains; spaces around an entry are trimmed, as the
/// policy trims them.
fn allowed_ns_arg(s: &str) -> Result<String, String> {
    let ns = s.trim();
    if ns.is_empty() {
        return Ok(s.to_string()); // an empty entry (`a,,b`, a trailing comma) is skipped
    }
    crate::validate::dns_subdomain(ns.strip_prefix("*.").unwrap_or(ns))
        .map(|()| s.to_string())
        .map_err(|e| format!("a label namespace {e}, or `*.` and one for its sub-domains"))
}

/// `explain --label`: a label key (`[prefix/]name`, Kubernetes' qualified name).
fn label_key_arg(s: &str) -> Result<String, String> {
    crate::validate::qualified_name(s)
        .map(|()| s.to_string())
        .map_err(|e| format!("not a label key: {e}"))
}

/// `--listen`: `HOST:PORT` (an IP address or a name resolved when the server starts), or empty
/// for no server.
fn listen_arg(s: &str) -> Result<String, String> {
    if s.is_empty() || s.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(s.to_string());
    }
    match s.rsplit_once(':') {
        Some((host, port))
            if !host.is_empty()
                && !host.contains(|c: char| c.is_whitespace() || c == '/')
                && port.parse::<u16>().is_ok() =>
        {
            Ok(s.to_string())
        }
        _ => Err("expected HOST:PORT, e.g. 0.0.0.0:8080 (empty: no server)".to_string()),
    }
}
