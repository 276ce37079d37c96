//! Applying GPU faults as DRA device taints (`publish.deviceTaints`, docs/taints.md#device-taints):
//! this node's `DeviceTaintRule`s made to match `dra::taints::wanted`, by server-side apply with
//! the agent's field manager, as `resource.k8s.io/v1` where the cluster serves the kind there and
//! `v1beta2` otherwise. What it costs: nothing while nothing changes (the rules as last listed or
//! written are remembered); one list by label before any change, and every [`RELIST`] to see a
//! rule deleted behind its back; one request per rule created, changed or deleted.
//!
//! A rule somebody else wrote is never touched: a rule is gpu-labeler's when its name is this
//! node's (`gpu-labeler-<node>-`), it carries gpu-labeler's apply entry and no other manager owns
//! a field of its spec. A rule whose device left the slices (a driver restarting) stays while its
//! GPU keeps a fault, so that the GPU comes back tainted.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::core::{ApiResource, DynamicObject};
use serde_json::Value;

use super::error::{PublishError, Reason, bounded};
use super::node::FIELD_MANAGER;
use crate::dra::taints::{self, GROUP, NAME_PREFIX, NODE_LABEL, Wanted};

/// How often the rules are listed again while nothing changes (one that someone deleted comes
/// back within this), and how often a cluster that served no `DeviceTaintRule` is asked again.
pub const RELIST: Duration = Duration::from_secs(600);

/// The kind's plural, as the API serves it.
const PLURAL: &str = "devicetaintrules";

/// One of this node's rules as the API server has it.
#[derive(Debug, Clone, PartialEq)]
struct Existing {
    spec: Value,
    resource_version: String,
    /// gpu-labeler applied it and nobody else owns a part of its spec.
    ours: bool,
    /// Who else owns a part of its spec (when not ours).
    others: Vec<String>,
    /// The GPU it is for (its annotation).
    gpu: String,
    driver: String,
    pool: String,
    device: String,
}

/// What one sync did, in the sink's words.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Synced {
    /// `+name (NoSchedule xid)`, `~name (...)`, `-name`.
    pub changes: Vec<String>,
    /// Said once per change by the daemon.
    pub warnings: Vec<String>,
    /// The rules in force afterwards.
    pub rules: usize,
}

/// This node's device taints, across cycles.
#[derive(Debug)]
pub struct DeviceTaints {
    node: String,
    /// `None`: not asked yet (or time to ask again); `Some(None)`: not served.
    version: Option<(Option<&'static str>, Instant)>,
    /// The node's rules as last listed, then as written.
    known: Option<(BTreeMap<String, Existing>, Instant)>,
    /// Rules the API server refused for good (a 4xx other than a conflict), with the spec that
    /// was refused: not asked again until what is wanted changes.
    refused: BTreeMap<String, Value>,
}

impl DeviceTaints {
    pub fn new(node: &str) -> DeviceTaints {
        DeviceTaints {
            node: node.to_string(),
            version: None,
            known: None,
            refused: BTreeMap::new(),
        }
    }

    /// Forget what is known of the API server (a Node read is due: read the rules too).
    pub fn forget(&mut self) {
        self.known = None;
    }

    /// The version of `resource.k8s.io` that serves `DeviceTaintRule` (asked once, and again
    /// every [`RELIST`] while it is not served).
    async fn version(
        &mut self,
        client: &Client,
        timeout: Duration,
    ) -> Result<Option<&'static str>, String> {
        if let Some((v, at)) = self.version
            && (v.is_some() || at.elapsed() < RELIST)
        {
            return Ok(v);
        }
        let found = super::slices::serving(client, PLURAL, timeout).await?;
        self.version = Some((found, Instant::now()));
        Ok(found)
    }

    fn api(client: &Client, version: &str) -> Api<DynamicObject> {
        let resource = ApiResource {
            group: GROUP.into(),
            version: version.into(),
            api_version: format!("{GROUP}/{version}"),
            kind: "DeviceTaintRule".into(),
            plural: PLURAL.into(),
        };
        Api::all_with(client.clone(), &resource)
    }

    /// This node's rules (by the node label, then by name: a labelled rule named for another
    /// node is not this node's).
    async fn list(
        &self,
        api: &Api<DynamicObject>,
        timeout: Duration,
    ) -> Result<BTreeMap<String, Existing>, PublishError> {
        let selector = format!("{NODE_LABEL}={}", taints::node_label_value(&self.node));
        let what = "list this node's DeviceTaintRules";
        let list = bounded(
            what,
            timeout,
            api.list(&ListParams::default().labels(&selector)),
        )
        .await?;
        let prefix = format!("{NAME_PREFIX}{}-", self.node);
        Ok(list
            .items
            .iter()
            .filter_map(|o| Some((o.metadata.name.clone()?, existing(o))))
            .filter(|(n, _)| n.starts_with(&prefix))
            .collect())
    }

    /// Makes this node's rules those of `wanted` (and keeps a rule whose device left the slices
    /// while its GPU, in `faulty`, keeps a fault). `dry_run`: says what it would do.
    pub async fn sync(
        &mut self,
        client: &Client,
        wanted: &[Wanted],
        faulty: &BTreeMap<String, Vec<(String, String)>>,
        site: &BTreeMap<String, crate::config::DeviceTaintEffect>,
        dry_run: bool,
        timeout: Duration,
    ) -> Result<Synced, PublishError> {
        let mut out = Synced::default();
        let Some(version) = self
            .version(client, timeout)
            .await
            .map_err(|m| PublishError::new(Reason::Network, format!("device taints: {m}")))?
        else {
            out.warnings.push(NOT_SERVED.to_string());
            return Ok(out);
        };
        let api = Self::api(client, version);
        let stale = self
            .known
            .as_ref()
            .is_none_or(|(_, at)| at.elapsed() >= RELIST);
        let mut wanted: BTreeMap<String, Wanted> =
            wanted.iter().map(|w| (w.name.clone(), w.clone())).collect();
        let differs = |known: &BTreeMap<String, Existing>, wanted: &BTreeMap<String, Wanted>| {
            let ours: BTreeMap<&String, &Value> = known
                .iter()
                .filter(|(_, e)| e.ours)
                .map(|(n, e)| (n, &e.spec))
                .collect();
            let want: BTreeMap<&String, Value> =
                wanted.iter().map(|(n, w)| (n, w.spec())).collect();
            ours.len() != want.len() || want.iter().any(|(n, s)| ours.get(n) != Some(&s))
        };
        if stale
            || self
                .known
                .as_ref()
                .is_some_and(|(k, _)| differs(k, &wanted))
        {
            match self.list(&api, timeout).await {
                Ok(k) => self.known = Some((k, Instant::now())),
                Err(e) => {
                    self.known = None;
                    return Err(e);
                }
            }
        }
        let Some((known, _)) = self.known.as_mut() else {
            return Ok(out);
        };
        // A rule of ours whose device left the slices, for a GPU that still has a fault.
        for (name, e) in known.iter() {
            if e.ours
                && !wanted.contains_key(name)
                && let Some(faults) = faulty.get(&e.gpu)
                && !faults.is_empty()
            {
                let rule = Wanted::for_faults(
                    name.clone(),
                    (&e.driver, &e.pool, &e.device),
                    &e.gpu,
                    faults,
                    site,
                );
                wanted.insert(name.clone(), rule);
            }
        }
        self.refused
            .retain(|n, spec| wanted.get(n).is_some_and(|w| w.spec() == *spec));
        let mut failed: Option<PublishError> = None;
        for (name, w) in &wanted {
            let spec = w.spec();
            match known.get(name) {
                Some(e) if e.ours && e.spec == spec => continue,
                Some(e) if !e.ours => {
                    out.warnings.push(format!(
                        "DeviceTaintRule {name} is not gpu-labeler's (its spec is owned by {}): \
                         left as it is; GPU {} keeps its node-level taint and condition",
                        e.others.join(", "),
                        w.gpu
                    ));
                    continue;
                }
                _ => {}
            }
            if self.refused.contains_key(name) {
                continue;
            }
            let sign = if known.contains_key(name) { '~' } else { '+' };
            let change = format!("{sign}{name} ({} {})", w.effect.as_str(), w.value);
            if dry_run {
                out.changes.push(change);
                continue;
            }
            // A rule of that name no list showed (no label): another's, unless the API server
            // has none.
            if sign == '+' {
                match bounded("GET a DeviceTaintRule", timeout, api.get_opt(name)).await {
                    Ok(None) => {}
                    Ok(Some(o)) => {
                        let e = existing(&o);
                        if !e.ours {
                            out.warnings.push(format!(
                                "DeviceTaintRule {name} exists and is not gpu-labeler's (owned by \
                                 {}): left as it is",
                                e.others.join(", ")
                            ));
                            known.insert(name.clone(), e);
                            continue;
                        }
                    }
                    Err(e) => {
                        failed.get_or_insert(e);
                        continue;
                    }
                }
            }
            let params = PatchParams::apply(FIELD_MANAGER);
            let body = w.object(&format!("{GROUP}/{version}"), &self.node);
            let what = format!("apply DeviceTaintRule {name}");
            match bounded(
                &what,
                timeout,
                api.patch(name, &params, &Patch::Apply(&body)),
            )
            .await
            {
                Ok(o) => {
                    known.insert(name.clone(), existing(&o));
                    out.changes.push(change);
                }
                Err(e) if e.reason == Reason::Client => {
                    out.warnings
                        .push(format!("{}; not asked again until it changes", e.message));
                    self.refused.insert(name.clone(), spec);
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        let gone: Vec<(String, String)> = known
            .iter()
            .filter(|(n, e)| e.ours && !wanted.contains_key(*n))
            .map(|(n, e)| (n.clone(), e.resource_version.clone()))
            .collect();
        for (name, rv) in gone {
            if dry_run {
                out.changes.push(format!("-{name}"));
                continue;
            }
            // Only the rule as listed: one someone changed since is theirs to keep.
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(rv),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            let what = format!("delete DeviceTaintRule {name}");
            match bounded(&what, timeout, api.delete(&name, &dp)).await {
                Ok(_) => {
                    known.remove(&name);
                    out.changes.push(format!("-{name}"));
                }
                Err(e) if e.is_not_found() => {
                    known.remove(&name);
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        out.rules = known.values().filter(|e| e.ours).count();
        if let Some(e) = failed {
            // Read again before the next try.
            self.known = None;
            return Err(e);
        }
        Ok(out)
    }
}

/// Said once when the cluster serves no `DeviceTaintRule`.
pub const NOT_SERVED: &str = "this cluster serves no resource.k8s.io DeviceTaintRule (v1 or \
    v1beta2): GPU faults stay node-level (the taint and condition); asked again every 10 minutes";

/// A rule as the API server gave it.
fn existing(o: &DynamicObject) -> Existing {
    let spec = o.data.get("spec").cloned().unwrap_or(Value::Null);
    let managed = o.metadata.managed_fields.as_deref().unwrap_or_default();
    let ours_applied = managed.iter().any(|m| {
        m.manager.as_deref() == Some(FIELD_MANAGER) && m.operation.as_deref() == Some("Apply")
    });
    let others: Vec<String> = managed
        .iter()
        .filter(|m| m.manager.as_deref() != Some(FIELD_MANAGER))
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.get("f:spec").is_some())
        })
        .map(|m| m.manager.clone().unwrap_or_default())
        .collect();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let selector = &spec["deviceSelector"];
    Existing {
        // What gpu-labeler applies of it: `timeAdded` is the server's.
        spec: serde_json::json!({
            "deviceSelector": {
                "driver": selector["driver"],
                "pool": selector["pool"],
                "device": selector["device"],
            },
            "taint": {
                "key": spec["taint"]["key"],
                "value": spec["taint"]["value"],
                "effect": spec["taint"]["effect"],
            },
        }),
        resource_version: o.metadata.resource_version.clone().unwrap_or_default(),
        ours: ours_applied && others.is_empty(),
        others: if others.is_empty() && !ours_applied {
            vec!["a writer without managedFields".to_string()]
        } else {
            others
        },
        gpu: o
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("gpu-labeler.feature.node.kubernetes.io/gpu"))
            .cloned()
            .unwrap_or_default(),
        driver: text(&selector["driver"]),
        pool: text(&selector["pool"]),
        device: text(&selector["device"]),
    }
}

/// gpu-labeler's rules for `prune`, by the node they are for: those of `node`, or of every node
/// (one list either way, by label; a rule counts for node `n` when its name is `n`'s and it is
/// gpu-labeler's as [`DeviceTaints::sync`] tells it). `None`: the cluster serves no
/// `DeviceTaintRule`.
pub struct PruneList {
    version: &'static str,
    /// The node label's value -> (name, resourceVersion, `effect value`).
    by_node: BTreeMap<String, Vec<(String, String, String)>>,
}

pub async fn prune_list(
    client: &Client,
    node: Option<&str>,
    timeout: Duration,
) -> Result<Option<PruneList>, String> {
    let mut state = DeviceTaints::new(node.unwrap_or_default());
    let Some(version) = state.version(client, timeout).await? else {
        return Ok(None);
    };
    let api = DeviceTaints::api(client, version);
    let selector = match node {
        Some(n) => format!("{NODE_LABEL}={}", taints::node_label_value(n)),
        None => "app.kubernetes.io/managed-by=gpu-labeler".to_string(),
    };
    let what = "list gpu-labeler's DeviceTaintRules";
    let list = bounded(
        what,
        timeout,
        api.list(&ListParams::default().labels(&selector)),
    )
    .await
    .map_err(|e| e.message)?;
    let mut by_node: BTreeMap<String, Vec<(String, String, String)>> = BTreeMap::new();
    for o in &list.items {
        let (Some(name), Some(label)) = (
            o.metadata.name.clone(),
            o.metadata.labels.as_ref().and_then(|l| l.get(NODE_LABEL)),
        ) else {
            continue;
        };
        let e = existing(o);
        if !e.ours {
            continue;
        }
        let taint = &e.spec["taint"];
        let words = format!(
            "{} {}",
            taint["effect"].as_str().unwrap_or_default(),
            taint["value"].as_str().unwrap_or_default()
        );
        by_node
            .entry(label.clone())
            .or_default()
            .push((name, e.resource_version, words));
    }
    Ok(Some(PruneList { version, by_node }))
}

/// `prune`: deletes `node`'s rules of `list`; returns them as `name (effect value)`.
/// `dry_run`: says which it would delete.
pub async fn prune(
    client: &Client,
    list: &PruneList,
    node: &str,
    dry_run: bool,
    timeout: Duration,
) -> Result<Vec<String>, String> {
    let api = DeviceTaints::api(client, list.version);
    let prefix = format!("{NAME_PREFIX}{node}-");
    let mut out = Vec::new();
    let rules = list.by_node.get(&taints::node_label_value(node));
    for (name, rv, words) in rules.into_iter().flatten() {
        if !name.starts_with(&prefix) {
            continue;
        }
        if !dry_run {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(rv.clone()),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            let what = format!("delete DeviceTaintRule {name}");
            match bounded(&what, timeout, api.delete(name, &dp)).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e.message),
            }
        }
        out.push(format!("{name} ({words})"));
    }
    Ok(out)
}
