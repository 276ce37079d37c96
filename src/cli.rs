//! The command line (SPEC §2): argument definitions and the commands that print.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{Config, NvmlEnabled};
use crate::discover::nvml::{self, NvmlChoice, NvmlLibrary};
use crate::discover::{self, DiscoveryOptions};
use crate::features::{self, FeatureSet};
use crate::labels::{self, NodeOutput};
use crate::publish::stdout::{LabelFormat, render};
use crate::{Error, exit};

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
        #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
        output: LabelFormat,
    },
    /// Print the raw feature set (a snapshot that `--features` reads back).
    Features {
        #[command(flatten)]
        discovery: DiscoveryArgs,
        #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
        output: FeatureFormat,
    },
    /// Print the version.
    Version,
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
    #[arg(long, env = "GPU_LABELER_NO_NVML")]
    pub no_nvml: bool,
    /// Use a recorded snapshot (JSON or YAML, features object or NodeFeature) instead of discovering.
    #[arg(long = "features", env = "GPU_LABELER_FEATURES", value_name = "FILE")]
    pub features: Option<PathBuf>,
    /// Configuration file (SPEC §7).
    #[arg(long, env = "GPU_LABELER_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A pci.ids file to read device names from (default: the host's, else the embedded one).
    #[arg(long, env = "GPU_LABELER_PCI_IDS", value_name = "FILE")]
    pub pci_ids: Option<PathBuf>,
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
    #[arg(long, env = "GPU_LABELER_NO_DEFAULT_RULES")]
    pub no_default_rules: bool,
}

impl DiscoveryArgs {
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

    pub fn load_config(&self) -> Result<Config, Error> {
        match &self.config {
            Some(p) => Ok(Config::load(p)?),
            None => Ok(Config::default()),
        }
    }

    /// The feature set: from the snapshot when given, else discovered. Warnings go to the log.
    pub fn features(&self, config: &Config) -> Result<FeatureSet, Error> {
        if let Some(path) = &self.features {
            return Ok(features::load_snapshot(path)?);
        }
        let mut nvml = NvmlLibrary::new(self.nvml_choice(config));
        let d = discover::discover(
            &DiscoveryOptions {
                sysfs_root: self.sysfs_root.clone(),
                proc_root: self.proc_root.clone(),
                pci_ids: self.pci_ids.clone(),
                config: config.clone(),
            },
            &mut nvml,
        );
        for w in &d.warnings {
            tracing::warn!("{w}");
        }
        Ok(d.features)
    }
}

/// Runs a command; returns the process exit code.
pub fn run(cli: Cli) -> u8 {
    let result = match cli.command {
        Command::Labels {
            discovery,
            rules: _,
            output,
        } => cmd_labels(&discovery, output),
        Command::Features { discovery, output } => cmd_features(&discovery, output),
        Command::Version => {
            print(&format!("gpu-labeler {}\n", env!("CARGO_PKG_VERSION")));
            Ok(exit::OK)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

fn cmd_labels(args: &DiscoveryArgs, format: LabelFormat) -> Result<u8, Error> {
    let config = args.load_config()?;
    let features = args.features(&config)?;
    let (output, notes) = evaluate(&features, &config);
    for n in notes {
        tracing::info!("{n}");
    }
    print(&render(&output, format));
    Ok(exit::OK)
}

/// Features -> labels: the pure middle of the pipeline.
pub fn evaluate(features: &FeatureSet, config: &Config) -> (NodeOutput, Vec<String>) {
    let (labels, notes) = labels::pci::builtin_labels(features, &config.sources.pci);
    (
        NodeOutput {
            labels,
            ..NodeOutput::default()
        },
        notes,
    )
}

fn cmd_features(args: &DiscoveryArgs, format: FeatureFormat) -> Result<u8, Error> {
    let config = args.load_config()?;
    let features = args.features(&config)?;
    print(&match format {
        FeatureFormat::Json => features.to_json() + "\n",
        FeatureFormat::Yaml => features.to_yaml(),
    });
    Ok(exit::OK)
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic.
fn print(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|_| out.flush());
}
