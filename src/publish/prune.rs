//! `gpu-labeler prune`: takes gpu-labeler's labels and annotations off Nodes, for an uninstall
//! or a switch from the node sink to the nodefeature sink, and deletes the NodeFeature objects
//! it published, for the switch back. With the labels go the taints the rules put there
//! (`publish.taints`: those the tracking annotation lists, and the annotation) and the
//! `GPUHealthy` condition gpu-labeler's field manager wrote (`publish.condition`), and the DRA
//! device taints of the Node's GPUs (`publish.deviceTaints`): an uninstall must not leave a
//! `NoSchedule` taint that nothing will ever clear.
//!
//! What goes is decided by ownership alone, as the sink reads it (`node::ownership`): a server-
//! side apply of an empty configuration under gpu-labeler's field manager. The API server then
//! removes each key that only gpu-labeler owns, and keeps each key another manager owns too
//! (theirs from then on). Labels written by anyone else, in any namespace, are never touched.
//! A NodeFeature is deleted only when gpu-labeler's field manager wrote it. Each Node is done on
//! its own: one that fails is reported and the rest go on.

use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject};
use kube::{Api, Client};
use serde::Serialize;

use super::error::bounded;
use super::node::{Extras, FIELD_MANAGER, NodeSink, Ownership, apply_body, ownership};
use super::nodefeature::{GROUP, KIND, VERSION};
use super::outcome::FieldKind;
use super::taints;
use crate::error::Error;

/// One key gpu-labeler owns on a Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Key {
    pub kind: &'static str,
    pub key: String,
    pub value: String,
    /// A taint's effect (`kind` "taint").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    /// Another manager that owns it too: it stays, theirs. `None`: it is removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_by: Option<String>,
}

/// What prune does (or would do) to one Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodePrune {
    pub node: String,
    pub keys: Vec<Key>,
    /// `namespace/name` of the NodeFeature gpu-labeler published for the Node, deleted.
    #[serde(rename = "nodeFeature")]
    pub node_feature: Option<String>,
    /// The DRA device taints gpu-labeler wrote for the Node's GPUs (`publish.deviceTaints`),
    /// deleted: `name (effect value)`.
    #[serde(rename = "deviceTaintRules", skip_serializing_if = "Vec::is_empty")]
    pub device_taint_rules: Vec<String>,
    /// Why the Node could not be pruned (the others still are).
    pub error: Option<String>,
}

impl NodePrune {
    fn empty(node: &str) -> NodePrune {
        NodePrune {
            node: node.to_string(),
            keys: Vec::new(),
            node_feature: None,
            device_taint_rules: Vec::new(),
            error: None,
        }
    }

    /// Whether there is anything of gpu-labeler's on this Node.
    pub fn has_work(&self) -> bool {
        !self.keys.is_empty() || self.node_feature.is_some() || !self.device_taint_rules.is_empty()
    }
}

/// The labels and annotations gpu-labeler's field manager applied (server-side apply), each
/// with whether another manager keeps it.
fn applied_keys(node: &Node) -> Vec<Key> {
    let Ownership { ours, others } = ownership(node);
    let mut keys = Vec::new();
    for (kind, map) in [
        (FieldKind::Label, &ours.labels),
        (FieldKind::Annotation, &ours.annotations),
    ] {
        for (k, v) in map {
            keys.push(Key {
                kind: kind.as_str(),
                key: k.clone(),
                value: v.clone(),
                effect: None,
                kept_by: others.get(&(kind, k.clone())).cloned(),
            });
        }
    }
    keys
}

/// The taints of ours on `node` (those our own tracking annotation validly lists that are
/// there, `Extras::ours`), the annotation itself, and a `GPUHealthy` condition our field
/// manager wrote. Another manager's annotation is not ours: neither it nor what it lists.
fn plan_extras(node: &Node) -> Vec<Key> {
    let extras = Extras::of(node);
    let mut keys = Vec::new();
    if let Some(tracked) = extras
        .tracked
        .as_ref()
        .filter(|_| extras.tracked_by.is_none())
    {
        let ours = extras.ours().taints;
        for t in &extras.taints {
            if ours.iter().any(|o| o.key == t.key && o.effect == t.effect) {
                keys.push(Key {
                    kind: FieldKind::Taint.as_str(),
                    key: t.key.clone(),
                    value: t.value.clone().unwrap_or_default(),
                    effect: Some(t.effect.clone()),
                    kept_by: None,
                });
            }
        }
        keys.push(Key {
            kind: FieldKind::Annotation.as_str(),
            key: taints::TAINTS_ANNOTATION.into(),
            value: tracked.clone(),
            effect: None,
            kept_by: None,
        });
    }
    if let Some(c) = &extras.condition
        && taints::condition_written_by(node, FIELD_MANAGER)
    {
        keys.push(Key {
            kind: FieldKind::Condition.as_str(),
            key: c.type_.clone(),
            value: c.status.clone(),
            effect: None,
            kept_by: taints::condition_kept_by(node, FIELD_MANAGER),
        });
    }
    keys
}

/// Which Nodes to prune.
#[derive(Debug, Clone)]
pub enum Nodes {
    One(String),
    All,
}

/// What to prune, and how.
#[derive(Debug, Clone)]
pub struct Request {
    pub nodes: Nodes,
    /// Where NodeFeature objects are looked for (`None`: not looked for).
    pub namespace: Option<String>,
    /// Whether the Nodes' labels and annotations go (else only the NodeFeature objects).
    pub node_labels: bool,
    pub dry_run: bool,
    /// Bounds each request.
    pub timeout: Duration,
}

/// Runs the prune; errors of single Nodes are in their `NodePrune`, an error here (no client,
/// the Node list unreadable) means nothing was done.
pub fn run(kubeconfig: Option<&Path>, req: &Request) -> Result<Vec<NodePrune>, Error> {
    super::client::block_on_client(kubeconfig, req.timeout, 16 << 20, |client| async move {
        let names = match &req.nodes {
            Nodes::One(n) => vec![n.clone()],
            Nodes::All => list_nodes(&client, req.timeout).await?,
        };
        // The DRA device taints gpu-labeler wrote: one list for all the Nodes.
        let rules = if req.node_labels {
            let one = match &req.nodes {
                Nodes::One(n) => Some(n.as_str()),
                Nodes::All => None,
            };
            super::device_taints::prune_list(&client, one, req.timeout)
                .await
                .map_err(|e| Error::Runtime(format!("reading the DeviceTaintRules: {e}")))?
        } else {
            None
        };
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let mut p = NodePrune::empty(&name);
            if let Err(e) = prune_node(&client, req, rules.as_ref(), &mut p).await {
                p.error = Some(e);
            }
            out.push(p);
        }
        Ok(out)
    })
}

/// Every Node's name, 500 at a time.
async fn list_nodes(client: &Client, timeout: Duration) -> Result<Vec<String>, Error> {
    let api: Api<Node> = Api::all(client.clone());
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = bounded("listing Nodes", timeout, api.list(&lp))
            .await
            .map_err(|e| Error::Runtime(e.message))?;
        names.extend(page.items.into_iter().filter_map(|n| n.metadata.name));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(names);
        }
    }
}

async fn prune_node(
    client: &Client,
    req: &Request,
    rules: Option<&super::device_taints::PruneList>,
    p: &mut NodePrune,
) -> Result<(), String> {
    if !req.node_labels {
        if let Some(ns) = &req.namespace {
            p.node_feature = prune_node_feature(client, ns, &p.node, req).await?;
        }
        return Ok(());
    }
    let api: Api<Node> = Api::all(client.clone());
    let node = bounded(
        &format!("reading Node {}", p.node),
        req.timeout,
        api.get(&p.node),
    )
    .await?;
    let applied = applied_keys(&node);
    let extras = plan_extras(&node);
    p.keys = [&applied[..], &extras[..]].concat();
    if !req.dry_run {
        if !applied.is_empty() {
            let body = apply_body(&p.node, &Default::default());
            let params = PatchParams::apply(FIELD_MANAGER);
            bounded(
                &format!("apply to Node {}", p.node),
                req.timeout,
                api.patch(&p.node, &params, &Patch::Apply(&body)),
            )
            .await?;
        }
        if !extras.is_empty() {
            // The sink's own read-modify-write: a change made in between is read again and
            // merged, never overwritten.
            let condition = extras
                .iter()
                .any(|k| k.kind == FieldKind::Condition.as_str() && k.kept_by.is_none());
            NodeSink::new(client.clone(), p.node.clone(), req.timeout)
                .remove_extras(condition)
                .await
                .map_err(|e| e.message)?;
        }
    }
    if let Some(rules) = rules {
        p.device_taint_rules =
            super::device_taints::prune(client, rules, &p.node, req.dry_run, req.timeout).await?;
    }
    if let Some(ns) = &req.namespace {
        p.node_feature = prune_node_feature(client, ns, &p.node, req).await?;
    }
    Ok(())
}

/// Deletes `ns/node` when gpu-labeler's field manager wrote it; its `ns/name`, or `None` when
/// there is none of ours (a cluster without the NodeFeature API has none).
async fn prune_node_feature(
    client: &Client,
    ns: &str,
    node: &str,
    req: &Request,
) -> Result<Option<String>, String> {
    let resource = ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: KIND.into(),
        plural: "nodefeatures".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let what = format!("reading NodeFeature {ns}/{node}");
    let obj = match bounded(&what, req.timeout, api.get_opt(node)).await {
        Ok(o) => o,
        // No such resource: the NodeFeature API is not installed.
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e.message),
    };
    let ours = obj.is_some_and(|o| {
        o.metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|m| m.manager.as_deref() == Some(FIELD_MANAGER))
    });
    if !ours {
        return Ok(None);
    }
    if !req.dry_run {
        let what = format!("deleting NodeFeature {ns}/{node}");
        match bounded(
            &what,
            req.timeout,
            api.delete(node, &DeleteParams::default()),
        )
        .await
        {
            Err(e) if !e.is_not_found() => return Err(e.message),
            _ => {}
        }
    }
    Ok(Some(format!("{ns}/{node}")))
}

/// One block per Node: `-` a key removed, `=` a key that stays because another manager owns
/// it too; with `dry_run`, what would be.
pub fn render_text(report: &[NodePrune], dry_run: bool) -> String {
    let (removed, kept, deleted) = if dry_run {
        ("would be removed", "would stay", "would be deleted")
    } else {
        ("removed", "stays", "deleted")
    };
    let mut s = String::new();
    for p in report {
        let _ = writeln!(s, "node {}:", p.node);
        if let Some(e) = &p.error {
            let _ = writeln!(s, "! {e}");
        }
        for k in &p.keys {
            let h = &k.value;
            if let Some(effect) = &k.effect {
                let t = crate::output::Taint {
                    key: k.key.clone(),
                    value: k.value.clone(),
                    effect: effect.clone(),
                };
                let _ = writeln!(s, "- {} {}: {removed}", k.kind, taints::taint_string(&t));
                continue;
            }
            match &k.kept_by {
                None => {
                    let _ = writeln!(s, "- {} {}={h}: {removed}", k.kind, k.key);
                }
                Some(m) => {
                    let _ = writeln!(s, "= {} {}={h}: {kept}, also owned by {m:?}", k.kind, k.key);
                }
            }
        }
        for r in &p.device_taint_rules {
            let _ = writeln!(s, "- devicetaintrule {r}: {deleted}");
        }
        if let Some(nf) = &p.node_feature {
            let _ = writeln!(s, "- nodefeature {nf}: {deleted}");
        }
        if !p.has_work() && p.error.is_none() {
            let _ = writeln!(s, "  nothing of {FIELD_MANAGER}'s");
        }
    }
    let failed = report.iter().filter(|p| p.error.is_some()).count();
    let worked = report.iter().filter(|p| p.has_work()).count();
    let _ = writeln!(
        s,
        "{} node(s), {worked} with something of {FIELD_MANAGER}'s{}{}",
        report.len(),
        if dry_run {
            " (dry run: nothing changed)"
        } else {
            ""
        },
        if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        }
    );
    s
}

pub fn render_json(report: &[NodePrune], dry_run: bool) -> String {
    #[derive(Serialize)]
    struct Out<'a> {
        #[serde(rename = "dryRun")]
        dry_run: bool,
        nodes: &'a [NodePrune],
    }
    serde_json::to_string_pretty(&Out {
        dry_run,
        nodes: report,
    })
    .expect("serializable")
        + "\n"
}
