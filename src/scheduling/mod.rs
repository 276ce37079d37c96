//! "Why is my pod Pending?": `gpu-labeler match` evaluates workloads against nodes as the
//! scheduler's filters would (for labels, taints and capacity), and `gpu-labeler inventory`
//! summarises the fleet's GPUs from the labels. Nodes come from a file (`kubectl get nodes -o
//! json|yaml`) or from the cluster, read-only.
//!
//! - `objects`: workloads and nodes read from YAML/JSON, with positioned errors.
//! - `fit`: the scheduler's filters and the preferred score, one pod on one node.
//! - `report`: the match report (text, JSON) and its hints.
//! - `inventory`: the fleet table.
//! - `cluster`: listing nodes (and the DRA objects) through the API server.
//! - `dra`, `draobjects`, `cel`: DRA claims allocated as Kubernetes' structured allocator does,
//!   the `resource.k8s.io` objects it reads, and the CEL of device selectors.
//! - `claimlint`: `claims check`, the selectors against what the drivers publish.

pub mod cel;
pub mod claimlint;
pub mod cluster;
pub mod dra;
pub mod draobjects;
pub mod fit;
pub mod inventory;
pub mod objects;
pub mod report;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::Error;
use objects::{NodeInfo, Workload};

/// Where the nodes come from.
#[derive(Debug, Clone)]
pub enum NodeSource {
    /// A file of `kubectl get nodes -o json` or `-o yaml` output.
    File(PathBuf),
    /// The cluster of this kubeconfig (else in-cluster, else the default kubeconfig).
    Cluster { kubeconfig: Option<PathBuf> },
}

/// A large cluster's `kubectl get nodes -o json` is tens of megabytes.
const MAX_NODES_FILE: u64 = 512 << 20;
/// How long one request to the API server may take.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(30);

fn read(path: &Path, limit: u64) -> Result<String, Error> {
    crate::sysfs::read_regular_text(path, limit)
        .map_err(|e| Error::InvalidInput(format!("cannot read {}: {e}", path.display())))
}

/// The workloads of a file (`-` reads standard input), and the DRA claims, templates (and any
/// other DRA objects) beside them.
pub fn load_workloads(path: &Path) -> Result<(Vec<Workload>, draobjects::DraSet), Error> {
    let (name, text) = if path == Path::new("-") {
        let text = crate::sysfs::stdin_text(crate::sysfs::MAX_INPUT_BYTES)
            .map_err(|e| Error::InvalidInput(format!("cannot read standard input: {e}")))?;
        ("<stdin>".to_string(), text)
    } else {
        (
            path.display().to_string(),
            read(path, crate::sysfs::MAX_INPUT_BYTES)?,
        )
    };
    let workloads =
        objects::read_workloads(&name, &text).map_err(|e| Error::InvalidInput(e.to_string()))?;
    // A pod the API server refuses is never created, let alone scheduled: said for every field
    // it refuses, one line each, instead of an answer per node.
    let refused: Vec<String> = workloads
        .iter()
        .flat_map(|w| {
            w.refusals
                .iter()
                .map(move |e| format!("{e} (the API server refuses {} {})", w.kind, w.name))
        })
        .collect();
    if !refused.is_empty() {
        return Err(Error::InvalidInput(refused.join("\n")));
    }
    let dra = draobjects::read(&name, &text).map_err(|e| Error::InvalidInput(e.to_string()))?;
    Ok((workloads, dra))
}

/// The DRA objects `match` allocates from: a file (`--dra`), or the cluster's.
pub fn load_dra(file: Option<&Path>, source: &NodeSource) -> Result<draobjects::DraSet, Error> {
    match (file, source) {
        (Some(path), _) => {
            let text = read(path, MAX_NODES_FILE)?;
            draobjects::read(&path.display().to_string(), &text)
                .map_err(|e| Error::InvalidInput(e.to_string()))
        }
        (None, NodeSource::Cluster { kubeconfig }) => {
            cluster::list_dra(kubeconfig.as_deref(), CLUSTER_TIMEOUT)
        }
        (None, NodeSource::File(_)) => Ok(draobjects::DraSet::default()),
    }
}

/// The nodes, from a file or the cluster.
pub fn load_nodes(source: &NodeSource) -> Result<Vec<NodeInfo>, Error> {
    match source {
        NodeSource::File(path) => {
            let text = read(path, MAX_NODES_FILE)?;
            objects::read_nodes(&path.display().to_string(), &text)
                .map_err(|e| Error::InvalidInput(e.to_string()))
        }
        NodeSource::Cluster { kubeconfig } => {
            cluster::list_nodes(kubeconfig.as_deref(), CLUSTER_TIMEOUT)
        }
    }
}
