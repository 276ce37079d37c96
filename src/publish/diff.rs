//! `gpu-labeler diff`: what the node sink would do to a Node, before it does it. Per label and
//! annotation: added, changed, removed, left alone because another field manager owns it with
//! another value (a conflict: the sink never forces), unchanged, and the keys in GPU and NFD
//! namespaces that only other managers write (what goes when NFD or GFD is turned off).
//!
//! Pure over a `Node` (its labels, annotations and `managedFields`) and the wanted output, with
//! the same ownership reading as the sink (`node::ownership`); reading the Node (a file or the
//! API server) is the caller's.

use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use serde::Serialize;

use super::node::{FIELD_MANAGER, Owned, ownership};
use super::outcome::FieldKind;
use crate::error::Error;

/// What applying the wanted output would do to one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Wanted, not on the Node.
    Add,
    /// Wanted with another value than the Node's, which no other manager owns.
    Change,
    /// Wanted with another value than the Node's, which another manager owns: not applied.
    Conflict,
    /// Ours on the Node, no longer wanted, and no other manager owns it: removed.
    Remove,
    /// Ours on the Node, no longer wanted, but another manager owns it too: it stays, theirs.
    Release,
    /// Wanted with the Node's value.
    Keep,
    /// On the Node in a GPU or NFD namespace, written only by other managers, not wanted: it
    /// stays while they write it, and goes when they stop.
    Foreign,
}

impl Status {
    /// Whether the Node does not already carry what is wanted.
    pub fn differs(self) -> bool {
        matches!(
            self,
            Status::Add | Status::Change | Status::Conflict | Status::Remove
        )
    }
}

/// One key of the diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub kind: &'static str,
    pub key: String,
    pub status: Status,
    /// The value wanted (none: not wanted).
    pub want: Option<String>,
    /// The value on the Node now.
    pub have: Option<String>,
    /// Another field manager that owns the key on the Node.
    pub manager: Option<String>,
}

/// The diff of one Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeDiff {
    pub node: String,
    /// Whether the Node carried `managedFields`: without them, nothing is known to be ours, so
    /// nothing shows as removed and no key as a conflict.
    #[serde(rename = "managedFields")]
    pub managed_fields: bool,
    pub rows: Vec<Row>,
}

/// Label namespaces where GPU tools write: NFD's (and its subdomains) and the vendors'.
/// Other managers' keys there are listed even though we do not write them.
const GPU_NAMESPACES: [&str; 6] = [
    "feature.node.kubernetes.io",
    "profile.node.kubernetes.io",
    "nvidia.com",
    "amd.com",
    "beta.amd.com",
    "gpu.intel.com",
];

fn in_gpu_namespace(key: &str) -> bool {
    let Some((ns, _)) = key.split_once('/') else {
        return false;
    };
    GPU_NAMESPACES
        .iter()
        .any(|g| ns == *g || ns.ends_with(&format!(".{g}")))
}

/// What applying `want` with our field manager would do to `node`.
pub fn diff(node: &Node, want: &Owned) -> NodeDiff {
    let own = ownership(node);
    let meta = &node.metadata;
    let empty = Default::default();
    let mut rows = Vec::new();
    for (kind, wanted, current, ours) in [
        (
            FieldKind::Label,
            &want.labels,
            meta.labels.as_ref().unwrap_or(&empty),
            &own.ours.labels,
        ),
        (
            FieldKind::Annotation,
            &want.annotations,
            meta.annotations.as_ref().unwrap_or(&empty),
            &own.ours.annotations,
        ),
    ] {
        let keys: std::collections::BTreeSet<&String> =
            wanted.keys().chain(current.keys()).collect();
        for key in keys {
            let (w, h) = (wanted.get(key), current.get(key));
            let manager = own.others.get(&(kind, key.clone())).cloned();
            let status = match (w, h) {
                (Some(_), None) => Status::Add,
                (Some(w), Some(h)) if w == h => Status::Keep,
                (Some(_), Some(_)) if manager.is_some() => Status::Conflict,
                (Some(_), Some(_)) => Status::Change,
                (None, Some(_)) if ours.contains_key(key) && manager.is_some() => Status::Release,
                (None, Some(_)) if ours.contains_key(key) => Status::Remove,
                (None, Some(_))
                    if kind == FieldKind::Label && manager.is_some() && in_gpu_namespace(key) =>
                {
                    Status::Foreign
                }
                _ => continue,
            };
            rows.push(Row {
                kind: if kind == FieldKind::Label {
                    "label"
                } else {
                    "annotation"
                },
                key: key.clone(),
                status,
                want: w.cloned(),
                have: h.cloned(),
                manager,
            });
        }
    }
    NodeDiff {
        node: meta.name.clone().unwrap_or_default(),
        managed_fields: meta.managed_fields.as_ref().is_some_and(|m| !m.is_empty()),
        rows,
    }
}

impl NodeDiff {
    pub fn differs(&self) -> bool {
        self.rows.iter().any(|r| r.status.differs())
    }

    fn count(&self, s: Status) -> usize {
        self.rows.iter().filter(|r| r.status == s).count()
    }

    /// One summary line, then a line per key that is not simply unchanged:
    /// `+` added, `~` changed, `!` conflict, `-` removed, `=` kept but shared with another
    /// manager (or released to it), `?` another manager's alone.
    pub fn render_text(&self) -> String {
        let mut out = format!(
            "node {}: {} to add, {} to change, {} to remove, {} in conflict, {} unchanged; {} written only by other managers\n",
            self.node,
            self.count(Status::Add),
            self.count(Status::Change),
            self.count(Status::Remove),
            self.count(Status::Conflict),
            self.count(Status::Keep),
            self.count(Status::Foreign),
        );
        if !self.managed_fields {
            out.push_str("note: the Node has no managedFields (`kubectl get node NAME -o yaml --show-managed-fields`): no key is known to be owned, so none shows as removed or in conflict\n");
        }
        for r in &self.rows {
            let (kind, key) = (r.kind, &r.key);
            let w = r.want.as_deref().unwrap_or_default();
            let h = r.have.as_deref().unwrap_or_default();
            let m = r.manager.as_deref().unwrap_or_default();
            let _ = match r.status {
                Status::Add => writeln!(out, "+ {kind} {key}={w}"),
                Status::Change => writeln!(out, "~ {kind} {key}: {h} -> {w}"),
                Status::Conflict => writeln!(
                    out,
                    "! {kind} {key}={h}: wanted {w}, but field manager {m:?} owns it: not applied"
                ),
                Status::Remove => writeln!(out, "- {kind} {key}={h}"),
                Status::Release => writeln!(
                    out,
                    "= {kind} {key}={h}: no longer written by {FIELD_MANAGER}; stays, owned by {m:?}"
                ),
                Status::Keep if !m.is_empty() => writeln!(
                    out,
                    "= {kind} {key}={h}: also owned by {m:?}; stays when it stops writing it"
                ),
                Status::Keep => Ok(()),
                Status::Foreign => writeln!(
                    out,
                    "? {kind} {key}={h}: written only by {m:?}; goes when it stops writing it"
                ),
            };
        }
        out
    }

    pub fn render_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }
}

/// Reads a Node from a file: `kubectl get node NAME -o yaml --show-managed-fields` (or
/// `-o json`), a Node or a List holding exactly one.
pub fn read_node_file(path: &Path) -> Result<Node, Error> {
    let bad = |m: String| Error::InvalidInput(format!("{}: {m}", path.display()));
    let bytes = crate::sysfs::read_regular_file(path, crate::sysfs::MAX_INPUT_BYTES)
        .map_err(|e| bad(format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
    let mut value: serde_json::Value = if crate::yaml::document::looks_like_json(&text) {
        serde_json::from_str(&text)
            .map_err(|e| bad(format!("line {}, column {}: {e}", e.line(), e.column())))?
    } else {
        serde_saphyr::from_str(&text).map_err(|e| {
            let (line, column) = crate::yaml::error_position(&e);
            bad(format!(
                "line {line}, column {column}: {}",
                crate::yaml::error_message(&e)
            ))
        })?
    };
    if value["kind"] == "List" {
        let items = value["items"].as_array().cloned().unwrap_or_default();
        if items.len() != 1 {
            return Err(bad(format!(
                "a List of {} items; diff takes one Node",
                items.len()
            )));
        }
        value = items[0].clone();
    }
    if value["kind"] != "Node" {
        return Err(bad(format!(
            "kind {}, not Node",
            value["kind"].as_str().unwrap_or("(none)")
        )));
    }
    serde_json::from_value(value).map_err(|e| bad(format!("not a valid Node: {e}")))
}

/// Reads the Node `name` from the API server (`get nodes`), bounded by `timeout`.
pub fn fetch_node(kubeconfig: Option<&Path>, name: &str, timeout: Duration) -> Result<Node, Error> {
    super::client::block_on_client(kubeconfig, timeout, 16 << 20, |client| async move {
        let api: Api<Node> = Api::all(client);
        super::error::bounded(&format!("reading Node {name}"), timeout, api.get(name))
            .await
            .map_err(|e| Error::Runtime(e.message))
    })
}
