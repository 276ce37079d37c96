//! `gpu-labeler inventory`: the fleet's GPUs from the nodes' labels, a row per kind of node
//! (product, memory, MIG layout, sharing), with totals.

use std::collections::BTreeMap;

use serde_json::json;

use super::objects::NodeInfo;
use super::report::table;
use crate::validate::FEATURE_NS;

/// What one kind of GPU node is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Kind {
    pub product: String,
    pub vendor: String,
    pub family: String,
    /// The smallest GPU's memory in MiB (`gpu.memory`), when labelled.
    pub memory_mib: Option<u64>,
    /// `-`, `capable`, or the MIG devices per profile (`4x 1g.10gb`).
    pub mig: String,
    /// `-`, or the strategy and replicas (`time-slicing x4`).
    pub sharing: String,
    /// `-` (no DRA facts), or whether the DRA driver's slices cover the GPUs
    /// (`gpu.dra.coverage`: `complete`, `partial`, `none`): a partial node is its own row.
    pub dra: String,
}

/// A row: the kind, its nodes and their GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub kind: Kind,
    pub nodes: Vec<String>,
    pub gpus: u64,
    /// The sum of `gpu.memory.total` over the nodes that have it, in MiB.
    pub memory_total_mib: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    pub groups: Vec<Group>,
    pub without_gpus: Vec<String>,
    /// The nodes whose `gpu.count` is below the most common count of their instance type.
    pub short: Vec<Short>,
}

/// A node with fewer GPUs than most nodes of its instance type: likely one that came up with
/// a GPU missing (docs/health.md#missing-gpus).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Short {
    pub node: String,
    pub instance_type: String,
    pub gpus: u64,
    /// The most common `gpu.count` of the type.
    pub usual: u64,
    /// How many nodes of the type have it, of how many labelled with a count.
    pub usual_nodes: usize,
    pub type_nodes: usize,
}

impl Short {
    /// `gpu-7 (p5.48xlarge): 7 GPUs, 8 on 12 of its 13 nodes`.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}): {} GPUs, {} on {} of its {} nodes",
            self.node, self.instance_type, self.gpus, self.usual, self.usual_nodes, self.type_nodes
        )
    }
}

/// The label that names a node's instance type (the cloud provider's, or the site's).
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";

/// The nodes below their instance type's most common `gpu.count`. A type whose most common
/// count is shared by two counts (two nodes, 8 and 7) has no consensus and names no node;
/// nodes without the label, or without `gpu.count`, are not compared.
pub fn short_nodes(nodes: &[NodeInfo]) -> Vec<Short> {
    let mut by_type: BTreeMap<&str, Vec<(&str, u64)>> = BTreeMap::new();
    for n in nodes {
        if let (Some(t), Some(c)) = (n.labels.get(INSTANCE_TYPE), number(n, "gpu.count")) {
            by_type.entry(t).or_default().push((&n.name, c));
        }
    }
    let mut out = Vec::new();
    for (t, members) in by_type {
        let mut tally: BTreeMap<u64, usize> = BTreeMap::new();
        for (_, c) in &members {
            *tally.entry(*c).or_default() += 1;
        }
        let top = tally.values().copied().max().unwrap_or(0);
        let modes: Vec<u64> = tally
            .iter()
            .filter(|(_, n)| **n == top)
            .map(|(c, _)| *c)
            .collect();
        let [usual] = modes[..] else {
            continue;
        };
        for (name, c) in &members {
            if *c < usual {
                out.push(Short {
                    node: name.to_string(),
                    instance_type: t.to_string(),
                    gpus: *c,
                    usual,
                    usual_nodes: top,
                    type_nodes: members.len(),
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.instance_type, &a.node).cmp(&(&b.instance_type, &b.node)));
    out
}

fn label<'a>(node: &'a NodeInfo, key: &str) -> Option<&'a str> {
    node.labels
        .get(&format!("{FEATURE_NS}/{key}"))
        .map(String::as_str)
}

fn number(node: &NodeInfo, key: &str) -> Option<u64> {
    label(node, key).and_then(|v| v.parse().ok())
}

/// `(name, count)` of the labels `feature.node.kubernetes.io/<prefix><name>.count`, by name.
fn counts<'a>(node: &'a NodeInfo, prefix: &str) -> Vec<(&'a str, &'a str)> {
    let prefix = format!("{FEATURE_NS}/{prefix}");
    node.labels
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.strip_suffix(".count")?, v.as_str())))
        .collect()
}

/// The parts sorted and joined with ` + `, or `none` when there are none.
fn joined(parts: impl Iterator<Item = String>, none: &str) -> String {
    let mut parts: Vec<String> = parts.collect();
    parts.sort();
    if parts.is_empty() {
        none.to_string()
    } else {
        parts.join(" + ")
    }
}

fn kind_of(node: &NodeInfo) -> Kind {
    let product = label(node, "gpu.product")
        .or(node
            .labels
            .get("nvidia.com/gpu.product")
            .map(String::as_str))
        .unwrap_or("(mixed or unknown)")
        .to_string();
    let vendor = match label(node, "gpu.vendor") {
        Some(v) => v.to_string(),
        // Several vendors: each with its count (`gpu-<vendor>.count`; `gpu-model-*` and
        // `gpu-family-*` are counts of something else).
        None => joined(
            counts(node, "gpu-")
                .into_iter()
                .filter(|(name, _)| !name.contains('-'))
                .map(|(name, n)| format!("{name} {n}")),
            "-",
        ),
    };
    let mig = if label(node, "gpu.mig.enabled") == Some("true") {
        joined(
            counts(node, "gpu.mig-")
                .into_iter()
                .map(|(profile, n)| format!("{n}x {profile}")),
            "enabled",
        )
    } else if label(node, "gpu.mig.capable") == Some("true") {
        "capable".into()
    } else {
        "-".into()
    };
    let sharing = match (
        label(node, "gpu.sharing-strategy"),
        label(node, "gpu.replicas"),
    ) {
        (Some(s), Some(r)) => format!("{s} x{r}"),
        (Some(s), None) => s.to_string(),
        _ => "-".into(),
    };
    Kind {
        product,
        vendor,
        family: label(node, "gpu.family").unwrap_or("-").to_string(),
        memory_mib: number(node, "gpu.memory"),
        mig,
        sharing,
        dra: label(node, "gpu.dra.coverage").unwrap_or("-").to_string(),
    }
}

/// Groups the nodes with GPUs (`gpu.count` above 0) by kind.
pub fn inventory(nodes: &[NodeInfo]) -> Inventory {
    let mut groups: BTreeMap<Kind, Group> = BTreeMap::new();
    let mut without_gpus = Vec::new();
    for n in nodes {
        let count = number(n, "gpu.count").unwrap_or(0);
        if count == 0 {
            without_gpus.push(n.name.clone());
            continue;
        }
        let kind = kind_of(n);
        let g = groups.entry(kind.clone()).or_insert_with(|| Group {
            kind,
            nodes: Vec::new(),
            gpus: 0,
            memory_total_mib: 0,
        });
        g.nodes.push(n.name.clone());
        g.gpus += count;
        g.memory_total_mib += number(n, "gpu.memory.total").unwrap_or(0);
    }
    Inventory {
        groups: groups.into_values().collect(),
        without_gpus,
        short: short_nodes(nodes),
    }
}

pub fn render_text(inv: &Inventory) -> String {
    let mut rows = vec![
        [
            "PRODUCT",
            "VENDOR",
            "FAMILY",
            "NODES",
            "GPUS",
            "MEMORY/GPU",
            "MIG",
            "SHARING",
            "DRA",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for g in &inv.groups {
        rows.push(vec![
            g.kind.product.clone(),
            g.kind.vendor.clone(),
            g.kind.family.clone(),
            g.nodes.len().to_string(),
            g.gpus.to_string(),
            g.kind.memory_mib.map_or("-".into(), |m| format!("{m} MiB")),
            g.kind.mig.clone(),
            g.kind.sharing.clone(),
            g.kind.dra.clone(),
        ]);
    }
    let nodes: usize = inv.groups.iter().map(|g| g.nodes.len()).sum();
    let gpus: u64 = inv.groups.iter().map(|g| g.gpus).sum();
    let memory: u64 = inv.groups.iter().map(|g| g.memory_total_mib).sum();
    rows.push(vec![
        "TOTAL".into(),
        String::new(),
        String::new(),
        nodes.to_string(),
        gpus.to_string(),
    ]);
    let mut out = table(&rows);
    out.push_str(&format!(
        "{nodes} node(s) with GPUs, {} without; {memory} MiB of GPU memory on the nodes that label it (gpu.memory.total)\n",
        inv.without_gpus.len()
    ));
    if !inv.short.is_empty() {
        out.push_str(&format!(
            "{} node(s) with fewer GPUs than most of their instance type:\n",
            inv.short.len()
        ));
        for s in &inv.short {
            out.push_str(&format!("  {}\n", s.describe()));
        }
    }
    out
}

pub fn render_json(inv: &Inventory) -> String {
    let groups: Vec<_> = inv
        .groups
        .iter()
        .map(|g| {
            json!({
                "product": g.kind.product, "vendor": g.kind.vendor, "family": g.kind.family,
                "memory_mib": g.kind.memory_mib, "mig": g.kind.mig, "sharing": g.kind.sharing,
                "dra": g.kind.dra,
                "nodes": g.nodes, "gpus": g.gpus, "memory_total_mib": g.memory_total_mib,
            })
        })
        .collect();
    let v = json!({
        "groups": groups,
        "totals": {
            "nodes_with_gpus": inv.groups.iter().map(|g| g.nodes.len()).sum::<usize>(),
            "gpus": inv.groups.iter().map(|g| g.gpus).sum::<u64>(),
            "memory_total_mib": inv.groups.iter().map(|g| g.memory_total_mib).sum::<u64>(),
        },
        "without_gpus": inv.without_gpus,
        "short": inv.short.iter().map(|s| json!({
            "node": s.node, "instance_type": s.instance_type, "gpus": s.gpus,
            "usual": s.usual, "usual_nodes": s.usual_nodes, "type_nodes": s.type_nodes,
        })).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node of two vendors (the MI210 server with an A10G, tests/nvml.rs): the vendor column
    /// counts vendors only, not the per-model or per-family counts beside them.
    #[test]
    fn a_node_of_two_vendors_is_counted_by_vendor() {
        let labels = [
            ("gpu-amd.count", "8"),
            ("gpu-family-ampere.count", "1"),
            ("gpu-family-gfx90a.count", "8"),
            ("gpu-nvidia.count", "1"),
            ("gpu.count", "9"),
            ("gpu.mig.capable", "false"),
        ];
        let node = NodeInfo {
            name: "mixed".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (format!("{FEATURE_NS}/{k}"), v.to_string()))
                .collect(),
            ..NodeInfo::default()
        };
        assert_eq!(
            kind_of(&node),
            Kind {
                product: "(mixed or unknown)".into(),
                vendor: "amd 8 + nvidia 1".into(),
                family: "-".into(),
                memory_mib: None,
                mig: "-".into(),
                sharing: "-".into(),
                dra: "-".into(),
            }
        );
    }

    /// Nodes whose DRA driver covers their GPUs and one it covers in part are two rows: the
    /// short one stands out, with its coverage.
    #[test]
    fn dra_coverage_is_a_column_and_splits_the_rows() {
        let node = |name: &str, coverage: &str| NodeInfo {
            name: name.into(),
            labels: [
                ("gpu.count", "8"),
                ("gpu.product", "NVIDIA-H100-80GB-HBM3"),
                ("gpu.dra.coverage", coverage),
            ]
            .iter()
            .map(|(k, v)| (format!("{FEATURE_NS}/{k}"), v.to_string()))
            .collect(),
            ..NodeInfo::default()
        };
        let inv = inventory(&[
            node("a", "complete"),
            node("b", "partial"),
            node("c", "complete"),
        ]);
        let rows: Vec<(String, Vec<String>)> = inv
            .groups
            .iter()
            .map(|g| (g.kind.dra.clone(), g.nodes.clone()))
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "complete".to_string(),
                    vec!["a".to_string(), "c".to_string()]
                ),
                ("partial".to_string(), vec!["b".to_string()]),
            ]
        );
        assert_eq!(
            render_text(&inv),
            "PRODUCT                VENDOR  FAMILY  NODES  GPUS  MEMORY/GPU  MIG  SHARING  DRA\n\
             NVIDIA-H100-80GB-HBM3  -       -       2      16    -           -    -        complete\n\
             NVIDIA-H100-80GB-HBM3  -       -       1      8     -           -    -        partial\n\
             TOTAL                                  3      24\n\
             3 node(s) with GPUs, 0 without; 0 MiB of GPU memory on the nodes that label it (gpu.memory.total)\n"
        );
    }
}
