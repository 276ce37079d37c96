//! The `node` sink: our labels (and annotations) on our own Node, by server-side apply with the
//! field manager `gpu-labeler`.
//!
//! Server-side apply does the bookkeeping that matters: the API server records which keys each
//! manager owns, a key we stop sending is removed unless someone else also owns it, and a key
//! someone else owns with another value is a conflict instead of an overwrite (we never force).
//!
//! No write when nothing changed: the sink remembers what it applied. After a start (and once an
//! hour, to notice keys that someone else removed) it reads the Node once and compares the keys
//! our manager owns there with what it wants, instead of applying blindly. What every sink
//! shares (the outcome of a publish, its errors) lives in `outcome` and `error`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint as NodeTaint};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, core::Status};
use serde_json::{Value, json};

use crate::output::{LabelMap, NodeOutput, Taint};

use super::error::{PublishError, Reason, bounded, within};
use super::outcome::{Conflict, FieldKind, LabelDiff, Outcome, OutcomeKind, Refused};
use super::taints;

/// Our field manager on every object we apply.
pub const FIELD_MANAGER: &str = "gpu-labeler";

/// How long an in-memory view of the Node is trusted before it is read again.
pub const RESYNC_AFTER: Duration = Duration::from_secs(3600);

/// How many times one publish re-applies after dropping conflicting keys.
const MAX_CONFLICT_ROUNDS: usize = 4;
/// How many times one publish reads the Node again after a 409 that is not a field conflict.
const MAX_STALE_ROUNDS: usize = 3;
/// How many times one publish writes the taints: a 409 (the Node changed since it was read)
/// reads it again and merges again.
pub const MAX_TAINT_ROUNDS: usize = 4;

/// Label and annotation key -> value: what we own on the Node, or want to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owned {
    pub labels: LabelMap,
    pub annotations: BTreeMap<String, String>,
}

impl Owned {
    pub fn from_output(o: &NodeOutput) -> Owned {
        Owned {
            labels: o.labels.clone(),
            annotations: o.annotations.clone(),
        }
    }

    fn remove(&mut self, c: &Conflict) {
        match c.kind {
            FieldKind::Label => self.labels.remove(&c.key),
            FieldKind::Annotation => self.annotations.remove(&c.key),
            FieldKind::Taint | FieldKind::Condition => None,
        };
    }
}

/// The policy's words in a denial by a ValidatingAdmissionPolicy (kube-apiserver's
/// `... is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: <why>`).
pub fn policy_denial(status: &Status) -> Option<String> {
    if !matches!(status.code, 403 | 422) || !status.message.contains("ValidatingAdmissionPolicy") {
        return None;
    }
    status
        .message
        .split_once(" denied request: ")
        .map(|(_, why)| why.to_string())
}

/// The conflicting keys of a server-side apply 409, from `details.causes`: `field` is
/// `.metadata.labels.<key>` and `message` is `conflict with "<manager>" ...`.
pub fn conflicts_of(status: &Status) -> Vec<Conflict> {
    let Some(details) = &status.details else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for cause in &details.causes {
        let (kind, key) = if let Some(k) = cause.field.strip_prefix(".metadata.labels.") {
            (FieldKind::Label, k)
        } else if let Some(k) = cause.field.strip_prefix(".metadata.annotations.") {
            (FieldKind::Annotation, k)
        } else {
            continue;
        };
        let manager = cause
            .message
            .split('"')
            .nth(1)
            .unwrap_or("unknown")
            .to_string();
        out.push(Conflict {
            kind,
            key: key.to_string(),
            manager,
        });
    }
    out.sort();
    out.dedup();
    out
}

/// Who owns which label and annotation keys, from `metadata.managedFields`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ownership {
    /// Keys our manager owns through Apply, with their values on the Node.
    pub ours: Owned,
    /// (kind, key) -> another manager that owns it.
    pub others: BTreeMap<(FieldKind, String), String>,
}

/// The keys under `f:metadata` -> `f:<field>` of one managedFields entry.
fn owned_keys(fields: &Value, field: &str) -> Vec<String> {
    fields
        .get("f:metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_object)
        .map(|m| {
            m.keys()
                .filter_map(|k| k.strip_prefix("f:").map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the ownership of the Node's labels and annotations.
pub fn ownership(node: &Node) -> Ownership {
    let meta = &node.metadata;
    let labels = meta.labels.clone().unwrap_or_default();
    let annotations = meta.annotations.clone().unwrap_or_default();
    let mut own = Ownership::default();
    for entry in meta.managed_fields.iter().flatten() {
        let Some(fields) = entry.fields_v1.as_ref().map(|f| &f.0) else {
            continue;
        };
        let manager = entry.manager.clone().unwrap_or_default();
        let ours = manager == FIELD_MANAGER && entry.operation.as_deref() == Some("Apply");
        for (kind, field, values) in [
            (FieldKind::Label, "f:labels", &labels),
            (FieldKind::Annotation, "f:annotations", &annotations),
        ] {
            for key in owned_keys(fields, field) {
                if ours {
                    if let Some(v) = values.get(&key) {
                        let map = match kind {
                            FieldKind::Label => &mut own.ours.labels,
                            _ => &mut own.ours.annotations,
                        };
                        map.insert(key, v.clone());
                    }
                } else {
                    own.others.entry((kind, key)).or_insert(manager.clone());
                }
            }
        }
    }
    own
}

/// Keys we want that another manager owns with another value: applying them would be a 409.
fn predicted_conflicts(node: &Node, own: &Ownership, want: &Owned) -> Vec<Conflict> {
    let meta = &node.metadata;
    let mut out = Vec::new();
    for (kind, wanted, current) in [
        (FieldKind::Label, &want.labels, meta.labels.as_ref()),
        (
            FieldKind::Annotation,
            &want.annotations,
            meta.annotations.as_ref(),
        ),
    ] {
        for (k, v) in wanted {
            let Some(cur) = current.and_then(|c| c.get(k)) else {
                continue;
            };
            if cur == v {
                continue;
            }
            if let Some(m) = own.others.get(&(kind, k.clone())) {
                out.push(Conflict {
                    kind,
                    key: k.clone(),
                    manager: m.clone(),
                });
            }
        }
    }
    out
}

/// The apply configuration: only the fields we own.
pub fn apply_body(node: &str, target: &Owned) -> Value {
    let mut meta = json!({ "name": node });
    if !target.labels.is_empty() {
        meta["labels"] = json!(target.labels);
    }
    if !target.annotations.is_empty() {
        meta["annotations"] = json!(target.annotations);
    }
    json!({ "apiVersion": "v1", "kind": "Node", "metadata": meta })
}

/// What the sink knows about the Node.
#[derive(Debug, Clone)]
struct Known {
    /// What the Node holds under our ownership.
    ours: Owned,
    /// The output last published in full (conflicting keys aside); `None` right after a read.
    wanted: Option<Owned>,
    /// Keys left out because of conflicts, found on the last read.
    excluded: Vec<Conflict>,
    read_at: Instant,
    /// The Node's resourceVersion as last read or written (a number on every API server).
    version: Option<String>,
    /// The Node's taints, tracking annotation and `GPUHealthy` condition as last read or
    /// written.
    extras: Extras,
}

/// What the sink (and `prune`) knows of the Node's taints and of its `GPUHealthy` condition.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Extras {
    /// `spec.taints`, everyone's.
    pub taints: Vec<NodeTaint>,
    /// The tracking annotation's value: the taints we put there.
    pub tracked: Option<String>,
    /// Another field manager that wrote the tracking annotation: then it is not ours
    /// (`taints::tracked`), and it is neither trusted nor written.
    pub tracked_by: Option<String>,
    pub condition: Option<NodeCondition>,
}

impl Extras {
    pub(crate) fn of(node: &Node) -> Extras {
        Extras {
            taints: node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default(),
            tracked: node
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(taints::TAINTS_ANNOTATION))
                .cloned(),
            tracked_by: taints::annotation_written_by(node, FIELD_MANAGER),
            condition: node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == taints::CONDITION_TYPE))
                .cloned(),
        }
    }
}

impl Extras {
    /// The taints of ours the tracking annotation lets the sink (or `prune`) remove.
    pub(crate) fn ours(&self) -> taints::Tracked {
        taints::tracked(self.tracked.as_deref(), self.tracked_by.as_deref())
    }

    /// Whether the tracking annotation is ours to write or remove: absent, or written by
    /// gpu-labeler alone.
    fn annotation_ours(&self) -> bool {
        self.tracked_by.is_none()
    }
}

/// What the sink has on the Node as it last left it, for the Node watch to guard
/// (`watch::NodeView`): our labels, our taints, our condition. A change someone else makes to
/// any of them wakes the daemon, which reads the Node and puts them back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guarded {
    pub labels: LabelMap,
    /// `key=value:effect` of each taint.
    pub taints: Vec<String>,
    /// `status/reason/message` of the `GPUHealthy` condition.
    pub condition: Option<String>,
}

fn condition_words(c: &NodeCondition) -> String {
    format!(
        "{}/{}/{}",
        c.status,
        c.reason.as_deref().unwrap_or(""),
        c.message.as_deref().unwrap_or("")
    )
}

fn taint_words(t: &NodeTaint) -> String {
    format!(
        "{}={}:{}",
        t.key,
        t.value.as_deref().unwrap_or(""),
        t.effect
    )
}

impl Guarded {
    /// The same parts of a Node, whole: all its labels, all its taints, its `GPUHealthy`.
    pub fn of_node(node: &Node) -> Guarded {
        let extras = Extras::of(node);
        Guarded {
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: extras.taints.iter().map(taint_words).collect(),
            condition: extras.condition.as_ref().map(condition_words),
        }
    }

    /// Whether this view of the Node still carries everything of `ours`.
    pub fn carries(&self, ours: &Guarded) -> bool {
        ours.labels
            .iter()
            .all(|(k, v)| self.labels.get(k) == Some(v))
            && ours.taints.iter().all(|t| self.taints.contains(t))
            && (ours.condition.is_none() || self.condition == ours.condition)
    }
}

/// Whether a failed write may succeed when tried again: not a 4xx that says the request itself
/// is wrong (invalid, too large, forbidden), which is refused and not retried until what is
/// wanted changes.
fn retryable(e: &PublishError) -> bool {
    e.reason != Reason::Client
}

/// What the node sink writes besides labels and annotations (`publish.taints` and
/// `publish.condition` of the config).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeWrites {
    pub taints: bool,
    pub condition: bool,
}

/// Which keys the admission policy is known to admit.
pub type Admits = std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Publishes to one Node.
pub struct NodeSink {
    api: Api<Node>,
    node: String,
    timeout: Duration,
    known: Option<Known>,
    /// On a policy denial, the keys to publish without the others (`None`: a denial fails
    /// the publish whole).
    admits: Option<Admits>,
    writes: NodeWrites,
    /// The taints last left out for their namespace (reported when they change).
    refused_taints: Vec<Taint>,
    /// The tracking annotation's entries last ignored (reported when they change).
    ignored_entries: Vec<String>,
    /// The taints (condition) whose write the API server refused for good (a 4xx that is not
    /// a conflict): not tried again until they change or the Node is read again.
    taints_refused: Option<Vec<Taint>>,
    condition_refused: Option<Option<NodeCondition>>,
    /// Our taints and condition as the last publish left them on the Node (for `guarded`).
    extras_placed: (Vec<String>, Option<String>),
    /// The Node's `node.kubernetes.io/instance-type` as last read (the cloud's machine type:
    /// the expected GPU count's table, docs/health.md).
    instance_type: Option<String>,
}

/// Taints as kubectl shows them: `key=value:effect, ...`.
fn show_taints(taints: &[NodeTaint]) -> String {
    taints
        .iter()
        .map(|t| match &t.value {
            Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
            _ => format!("{}:{}", t.key, t.effect),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A Node's resourceVersion as a number (it is one on every API server), to order two views.
/// The Node's resourceVersion: opaque, compared by `kobject::compare_resource_versions`.
pub fn version_of(node: &Node) -> Option<String> {
    node.metadata
        .resource_version
        .clone()
        .filter(|v| !v.is_empty())
}

impl NodeSink {
    /// `timeout` bounds each request.
    pub fn new(client: Client, node: impl Into<String>, timeout: Duration) -> NodeSink {
        NodeSink {
            api: Api::all(client),
            node: node.into(),
            timeout,
            known: None,
            admits: None,
            writes: NodeWrites::default(),
            refused_taints: Vec::new(),
            ignored_entries: Vec::new(),
            taints_refused: None,
            condition_refused: None,
            extras_placed: (Vec::new(), None),
            instance_type: None,
        }
    }

    /// Whether the sink writes the rules' taints and the `GPUHealthy` condition (the config's
    /// `publish.taints` and `publish.condition`; both off unless set).
    pub fn set_writes(&mut self, writes: NodeWrites) {
        self.writes = writes;
    }

    /// When the admission policy denies an apply, publish the keys `admits` says it admits and
    /// report the others, instead of failing the whole publish.
    pub fn with_admitted(mut self, admits: Admits) -> NodeSink {
        self.admits = Some(admits);
        self
    }

    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// The client the sink talks through (the DRA objects are read with it).
    pub fn client(&self) -> Client {
        self.api.clone().into_client()
    }

    /// Forget what is known so that the next publish reads the Node again (and tries again a
    /// write the API server refused).
    pub fn forget(&mut self) {
        self.known = None;
        self.taints_refused = None;
        self.condition_refused = None;
    }

    /// What the Node holds of ours as the sink last left it: the labels under our ownership,
    /// and the taints and condition the config has us write (`None` right after `forget`).
    pub fn guarded(&self) -> Option<Guarded> {
        let known = self.known.as_ref()?;
        Some(Guarded {
            labels: known.ours.labels.clone(),
            taints: self.extras_placed.0.clone(),
            condition: self.extras_placed.1.clone(),
        })
    }

    /// The Node's resourceVersion when it was last read or written: a watch event older than
    /// that describes the Node before our write.
    pub fn known_version(&self) -> Option<String> {
        self.known.as_ref().and_then(|k| k.version.clone())
    }

    async fn get(&self) -> Result<Node, PublishError> {
        let what = format!("GET node {}", self.node);
        bounded(&what, self.timeout, self.api.get(&self.node)).await
    }

    /// Returns the written Node.
    async fn apply(&self, target: &Owned) -> Result<Node, ApplyError> {
        let what = format!("apply to node {}", self.node);
        let params = PatchParams::apply(FIELD_MANAGER);
        let body = apply_body(&self.node, target);
        let patch = Patch::Apply(&body);
        let call = self.api.patch(&self.node, &params, &patch);
        match within(&what, self.timeout, call).await {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(kube::Error::Api(s))) if s.code == 409 && !conflicts_of(&s).is_empty() => {
                Err(ApplyError::Conflicts(conflicts_of(&s)))
            }
            // "The object has been modified": not a field conflict; read it again and retry.
            Ok(Err(kube::Error::Api(s))) if s.code == 409 => Err(ApplyError::Stale(
                PublishError::from_kube(&what, &kube::Error::Api(s)),
            )),
            Ok(Err(kube::Error::Api(s))) if policy_denial(&s).is_some() => {
                let why = policy_denial(&s).unwrap_or_default();
                Err(ApplyError::Denied(
                    PublishError::from_kube(&what, &kube::Error::Api(s)),
                    why,
                ))
            }
            Ok(Err(e)) => Err(ApplyError::Failed(PublishError::from_kube(&what, &e))),
            Err(timeout) => Err(ApplyError::Failed(timeout)),
        }
    }

    /// Brings the Node's labels and annotations owned by us to `desired`; with `dry_run`, only
    /// says what would change.
    pub async fn publish(
        &mut self,
        desired: &NodeOutput,
        dry_run: bool,
    ) -> Result<Outcome, PublishError> {
        let want = Owned::from_output(desired);
        if self
            .known
            .as_ref()
            .is_some_and(|k| k.read_at.elapsed() > RESYNC_AFTER)
        {
            self.known = None;
        }
        for _ in 0..MAX_STALE_ROUNDS {
            let mut known = match self.known.take() {
                Some(k) => k,
                None => {
                    let (k, instance_type) = self.read(&want).await?;
                    self.instance_type = instance_type;
                    k
                }
            };
            let result = self.reconcile(&mut known, want.clone(), dry_run).await;
            match result {
                Err(ApplyError::Stale(e)) => {
                    tracing::debug!("{e}; reading the Node again");
                }
                Err(ApplyError::Conflicts(_)) => unreachable!("reconcile handles conflicts"),
                Err(ApplyError::Denied(e, _)) => {
                    self.known = Some(known);
                    return Err(e);
                }
                Err(ApplyError::Failed(e)) => {
                    self.known = Some(known);
                    return Err(e);
                }
                Ok(o) => {
                    let result = self
                        .publish_extras(&mut known, &want, desired, dry_run, o)
                        .await;
                    self.known = Some(known);
                    return result;
                }
            }
        }
        Err(PublishError::new(
            Reason::Conflict,
            format!(
                "apply to node {}: the Node kept changing under {MAX_STALE_ROUNDS} reads",
                self.node
            ),
        ))
    }

    /// The Node as it is, and its instance type.
    async fn read(&self, want: &Owned) -> Result<(Known, Option<String>), PublishError> {
        let node = self.get().await?;
        let own = ownership(&node);
        let labels = node.metadata.labels.as_ref();
        let instance_type = [
            "node.kubernetes.io/instance-type",
            "beta.kubernetes.io/instance-type",
        ]
        .iter()
        .find_map(|k| labels.and_then(|l| l.get(*k)))
        .filter(|t| !t.is_empty())
        .cloned();
        Ok((
            Known {
                excluded: predicted_conflicts(&node, &own, want),
                ours: own.ours,
                wanted: None,
                read_at: Instant::now(),
                version: version_of(&node),
                extras: Extras::of(&node),
            },
            instance_type,
        ))
    }

    /// The Node's `node.kubernetes.io/instance-type` (or its beta name) as last read.
    pub fn instance_type(&self) -> Option<&str> {
        self.instance_type.as_deref()
    }

    /// After the labels: the taints and the condition, when the config asks for them (and our
    /// taints removed once when it no longer does). Marks the outcome written when either was.
    /// Each goes on its own: a failure of the taints never keeps the condition from being
    /// written. A write the API server refuses for good is reported once, not retried; another
    /// failure is returned (the daemon retries with backoff) after the rest was written.
    async fn publish_extras(
        &mut self,
        known: &mut Known,
        want: &Owned,
        desired: &NodeOutput,
        dry_run: bool,
        mut outcome: Outcome,
    ) -> Result<Outcome, PublishError> {
        let written = if dry_run {
            OutcomeKind::DryRun
        } else {
            OutcomeKind::Written
        };
        let mut wanted_taints = Vec::new();
        if self.writes.taints {
            let (allowed, refused): (Vec<Taint>, Vec<Taint>) = desired
                .taints
                .iter()
                .cloned()
                .partition(|t| taints::allowed_taint_key(&t.key));
            if refused != self.refused_taints {
                outcome.refused.extend(refused.iter().map(|t| Refused {
                    kind: FieldKind::Taint,
                    key: taints::taint_string(t),
                    message: "not in feature.node.kubernetes.io or a sub-domain, the taint namespace the admission policy admits".into(),
                }));
                self.refused_taints = refused;
            }
            wanted_taints = allowed;
        }
        let ignored = known.extras.ours().ignored;
        if ignored != self.ignored_entries {
            outcome.warnings.extend(ignored.iter().cloned());
            self.ignored_entries = ignored;
        }
        let mut failed = None;
        // Off: only our own annotation is looked at, to take off what it validly lists.
        let ours_listed = known.extras.tracked.is_some() && known.extras.annotation_ours();
        if (self.writes.taints || ours_listed)
            && self.taints_refused.as_ref() != Some(&wanted_taints)
        {
            match self.sync_taints(known, want, &wanted_taints, dry_run).await {
                Ok(true) => outcome.kind = written,
                Ok(false) => {}
                Err(e) if !retryable(&e) => {
                    outcome.refused.push(Refused {
                        kind: FieldKind::Taint,
                        key: format!(
                            "[{}]",
                            taints::annotation_value(&wanted_taints).unwrap_or_default()
                        ),
                        message: format!("{e}; not tried again until the taints change"),
                    });
                    self.taints_refused = Some(wanted_taints.clone());
                }
                Err(e) => failed = Some(e),
            }
        }
        let mut condition = None;
        if self.writes.condition {
            condition = taints::desired_condition(desired.health.as_ref());
            if !taints::condition_current(known.extras.condition.as_ref(), condition.as_ref())
                && self.condition_refused.as_ref() != Some(&condition)
            {
                if dry_run {
                    tracing::info!(
                        "dry run: would set the {} condition",
                        taints::CONDITION_TYPE
                    );
                    known.extras.condition = condition.clone();
                    outcome.kind = written;
                } else {
                    let have = known.extras.condition.clone();
                    match self
                        .patch_condition(have.as_ref(), condition.as_ref())
                        .await
                    {
                        Ok(node) => {
                            known.version = version_of(&node).or(known.version.take());
                            known.extras = Extras::of(&node);
                            outcome.kind = written;
                        }
                        Err(e) if !retryable(&e) => {
                            outcome.refused.push(Refused {
                                kind: FieldKind::Condition,
                                key: taints::CONDITION_TYPE.into(),
                                message: format!("{e}; not tried again until it changes"),
                            });
                            self.condition_refused = Some(condition.clone());
                        }
                        Err(e) => failed = failed.or(Some(e)),
                    }
                }
            }
        }
        // What of ours is on the Node now, as we want it: what the Node watch guards.
        let on_node: Vec<String> = known.extras.taints.iter().map(taint_words).collect();
        self.extras_placed = (
            wanted_taints
                .iter()
                .map(|t| format!("{}={}:{}", t.key, t.value, t.effect))
                .filter(|t| on_node.contains(t))
                .collect(),
            condition
                .filter(|c| taints::condition_current(known.extras.condition.as_ref(), Some(c)))
                .as_ref()
                .map(condition_words),
        );
        match failed {
            Some(e) => Err(e),
            None => Ok(outcome),
        }
    }

    /// Brings our taints on the Node to `wanted` by a read-modify-write of `spec.taints` and
    /// the tracking annotation, in one merge patch guarded by the resourceVersion. Returns
    /// whether it wrote (or, with `dry_run`, would write).
    async fn sync_taints(
        &self,
        known: &mut Known,
        want: &Owned,
        wanted: &[Taint],
        dry_run: bool,
    ) -> Result<bool, PublishError> {
        for _ in 0..MAX_TAINT_ROUNDS {
            // Only what our own annotation validly lists is ours to take off (the sink reports
            // the rest); another manager's annotation is left as it is.
            let before = known.extras.ours().taints;
            let next = taints::merged(&known.extras.taints, &before, wanted);
            let annotation = if known.extras.annotation_ours() {
                taints::annotation_value(wanted)
            } else {
                known.extras.tracked.clone()
            };
            if next == known.extras.taints && annotation == known.extras.tracked {
                return Ok(false);
            }
            if dry_run {
                tracing::info!(
                    "dry run: would set the Node's taints to [{}]",
                    show_taints(&next)
                );
                // Said once, as the labels' dry run says each change once.
                known.extras.taints = next;
                known.extras.tracked = annotation;
                return Ok(true);
            }
            let Some(version) = known.version.clone() else {
                *known = self.read(want).await?.0;
                continue;
            };
            let body = taints::taints_patch(
                &version,
                (&known.extras.taints, known.extras.tracked.as_deref()),
                (&next, annotation.as_deref()),
            );
            let what = format!("write the taints of node {}", self.node);
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            };
            let patch = Patch::Merge(&body);
            let call = self.api.patch(&self.node, &params, &patch);
            match within(&what, self.timeout, call).await? {
                Ok(node) => {
                    tracing::info!(
                        "node {}: taints [{}] (ours: [{}])",
                        self.node,
                        show_taints(&next),
                        annotation.as_deref().unwrap_or("")
                    );
                    known.version = version_of(&node).or(known.version.take());
                    known.extras = Extras::of(&node);
                    return Ok(true);
                }
                // The Node changed since it was read: read it again and merge again.
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    tracing::debug!("{what}: {}; reading the Node again", s.message);
                    *known = self.read(want).await?.0;
                }
                Err(e) => return Err(PublishError::from_kube(&what, &e)),
            }
        }
        Err(PublishError::new(
            Reason::Conflict,
            format!(
                "write the taints of node {}: the Node kept changing under {MAX_TAINT_ROUNDS} reads",
                self.node
            ),
        ))
    }

    /// Takes our taints (those the tracking annotation lists) and the annotation off the Node
    /// by the read-modify-write `publish` uses, and, with `condition`, the `GPUHealthy`
    /// condition: `prune`, which has decided they are ours.
    pub async fn remove_extras(&mut self, condition: bool) -> Result<(), PublishError> {
        let want = Owned::default();
        let mut known = self.read(&want).await?.0;
        if known.extras.tracked.is_some() && known.extras.annotation_ours() {
            self.sync_taints(&mut known, &want, &[], false).await?;
        }
        if condition {
            self.patch_condition(known.extras.condition.as_ref(), None)
                .await?;
        }
        Ok(())
    }

    /// Sets (or, `want` `None`, removes) the `GPUHealthy` condition on `nodes/status` by a
    /// strategic merge patch keyed on the condition's type: the kubelet's conditions stay
    /// as they are. The transition time moves only when the status does.
    async fn patch_condition(
        &self,
        have: Option<&NodeCondition>,
        want: Option<&NodeCondition>,
    ) -> Result<Node, PublishError> {
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let body = taints::condition_patch(have, want, &now);
        let what = format!(
            "set the {} condition of node {}",
            taints::CONDITION_TYPE,
            self.node
        );
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let patch = Patch::Strategic(&body);
        let call = self.api.patch_status(&self.node, &params, &patch);
        match bounded(&what, self.timeout, call).await {
            Ok(node) => {
                tracing::info!(
                    "node {}: condition {} {}",
                    self.node,
                    taints::CONDITION_TYPE,
                    want.map(|w| format!("{} ({})", w.status, w.message.as_deref().unwrap_or("")))
                        .unwrap_or_else(|| "removed".into())
                );
                Ok(node)
            }
            Err(e) => Err(e),
        }
    }

    async fn reconcile(
        &self,
        known: &mut Known,
        want: Owned,
        dry_run: bool,
    ) -> Result<Outcome, ApplyError> {
        if known.wanted.as_ref() == Some(&want) {
            return Ok(Outcome::unchanged());
        }
        let mut target = want.clone();
        let mut conflicts = Vec::new();
        if known.wanted.is_none() {
            // Right after a read: leave out what would conflict, and say so once.
            for c in &known.excluded {
                target.remove(c);
            }
            conflicts = known.excluded.clone();
        }
        if target == known.ours {
            known.wanted = Some(want);
            return Ok(Outcome {
                conflicts,
                ..Outcome::unchanged()
            });
        }
        let diff = LabelDiff::between(&known.ours.labels, &target.labels);
        if dry_run {
            known.wanted = Some(want);
            return Ok(Outcome {
                kind: OutcomeKind::DryRun,
                diff,
                conflicts,
                ..Outcome::unchanged()
            });
        }
        let mut refused: Vec<Refused> = Vec::new();
        for _ in 0..MAX_CONFLICT_ROUNDS {
            match self.apply(&target).await {
                Ok(node) => {
                    let diff = LabelDiff::between(&known.ours.labels, &target.labels);
                    known.version = version_of(&node).or(known.version.take());
                    known.extras = Extras::of(&node);
                    known.ours = target;
                    known.wanted = Some(want);
                    known.excluded = conflicts.clone();
                    return Ok(Outcome {
                        kind: OutcomeKind::Written,
                        diff,
                        conflicts,
                        refused,
                        warnings: Vec::new(),
                    });
                }
                // Denied by the admission policy: once, publish only what it is known to
                // admit; a denial of that too (another node, a token without one) fails.
                Err(ApplyError::Denied(e, why)) => {
                    let Some(admits) = self.admits.as_ref().filter(|_| refused.is_empty()) else {
                        return Err(ApplyError::Failed(e));
                    };
                    for (kind, map) in [
                        (FieldKind::Label, &mut target.labels),
                        (FieldKind::Annotation, &mut target.annotations),
                    ] {
                        map.retain(|k, _| {
                            let keep = admits(k);
                            if !keep {
                                refused.push(Refused {
                                    kind,
                                    key: k.clone(),
                                    message: why.clone(),
                                });
                            }
                            keep
                        });
                    }
                    if refused.is_empty() {
                        return Err(ApplyError::Failed(e));
                    }
                }
                Err(ApplyError::Conflicts(found)) => {
                    // Apply the rest: another manager's keys stay theirs.
                    for c in &found {
                        target.remove(c);
                    }
                    conflicts.extend(found);
                    conflicts.sort();
                    conflicts.dedup();
                    if target == known.ours {
                        known.wanted = Some(want);
                        known.excluded = conflicts.clone();
                        return Ok(Outcome {
                            conflicts,
                            refused,
                            ..Outcome::unchanged()
                        });
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(ApplyError::Failed(PublishError::new(
            Reason::Conflict,
            format!(
                "apply to node {}: still conflicting after {MAX_CONFLICT_ROUNDS} rounds",
                self.node
            ),
        )))
    }
}

enum ApplyError {
    /// Keys another field manager owns.
    Conflicts(Vec<Conflict>),
    /// A 409 that is not about fields: what we know of the Node is out of date.
    Stale(PublishError),
    /// Denied by an admission policy, with its message.
    Denied(PublishError, String),
    Failed(PublishError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use hyper::{Request, Response};
    use kube::client::Body;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> LabelMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn output(pairs: &[(&str, &str)]) -> NodeOutput {
        NodeOutput {
            labels: labels(pairs),
            ..NodeOutput::default()
        }
    }

    /// A Node as the API server returns it: labels plus managedFields per manager.
    fn node_json(name: &str, labels: &[(&str, &str)], managers: &[(&str, &str, &[&str])]) -> Value {
        let mf: Vec<Value> = managers
            .iter()
            .map(|(m, op, keys)| {
                let ks: serde_json::Map<String, Value> =
                    keys.iter().map(|k| (format!("f:{k}"), json!({}))).collect();
                json!({"manager": m, "operation": op, "apiVersion": "v1",
                       "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": ks}}})
            })
            .collect();
        let l: BTreeMap<_, _> = labels.iter().cloned().collect();
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": name, "resourceVersion": "7", "labels": l, "managedFields": mf}})
    }

    fn respond(status: u16, body: &Value) -> Response<Body> {
        Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap()
    }

    struct Seen {
        method: String,
        uri: String,
        content_type: String,
        body: Value,
    }

    async fn seen(req: Request<Body>) -> Seen {
        let (parts, body) = req.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        Seen {
            method: parts.method.to_string(),
            uri: parts.uri.to_string(),
            content_type: parts
                .headers
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default(),
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }

    /// Runs `publish` against a mock API whose answers come from `script`, in order; returns
    /// the outcome and the requests seen.
    async fn with_mock<F, Fut, T>(script: Vec<(u16, Value)>, f: F) -> (T, Vec<Seen>)
    where
        F: FnOnce(Client) -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            let mut seen_all = Vec::new();
            for (status, body) in script {
                let Some((req, send)) = handle.next_request().await else {
                    break;
                };
                seen_all.push(seen(req).await);
                send.send_response(respond(status, &body));
            }
            seen_all
        });
        let client = Client::new(service, "default");
        let out = f(client).await;
        let requests = server.await.unwrap();
        (out, requests)
    }

    #[tokio::test]
    async fn first_publish_reads_the_node_then_applies_only_our_labels() {
        let before = node_json("n1", &[("team", "a")], &[("kubectl", "Update", &["team"])]);
        let after = node_json("n1", &[("team", "a"), ("gpu", "8")], &[]);
        let (out, reqs) = with_mock(vec![(200, before), (200, after)], |c| async move {
            let mut sink = NodeSink::new(c, "n1", Duration::from_secs(5));
            sink.publish(&output(&[("gpu", "8")]), false).await
        })
        .await;
        let out = out.unwrap();
        assert_eq!(out.kind, OutcomeKind::Written);
        assert_eq!(out.diff.added, labels(&[("gpu", "8")]));
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].method, "GET");
        assert_eq!(reqs[0].uri, "/api/v1/nodes/n1");
        assert_eq!(reqs[1].method, "PATCH");
        assert_eq!(reqs[1].uri, "/api/v1/nodes/n1?&fieldManager=gpu-labeler");
        assert_eq!(reqs[1].content_type, "application/apply-patch+yaml");
        assert_eq!(
            reqs[1].body,
            json!({"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": "n1", "labels": {"gpu": "8"}}})
        );
    }

    #[tokio::test]
    async fn nothing_changed_after_a_restart_means_one_get_and_no_patch() {
        let node = node_json(
            "n1",
            &[("team", "a"), ("gpu", "8")],
            &[
                ("kubectl", "Update", &["team"]),
                (FIELD_MANAGER, "Apply", &["gpu"]),
            ],
        );
        let (out, reqs) = with_mock(vec![(200, node)], |c| async move {
            let mut sink = NodeSink::new(c, "n1", Duration::from_secs(5));
            let first = sink.publish(&output(&[("gpu", "8")]), false).await;
            let second = sink.publish(&output(&[("gpu", "8")]), false).await;
            (first, second)
        })
        .await;
        assert_eq!(out.0.unwrap(), Outcome::unchanged());
        assert_eq!(out.1.unwrap(), Outcome::unchanged());
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].method, "GET");
    }

    #[tokio::test]
    async fn a_label_no_longer_produced_is_left_out_of_the_apply() {
        let node = node_json(
            "n1",
            &[("gpu", "8"), ("old", "x")],
            &[(FIELD_MANAGER, "Apply", &["gpu", "old"])],
        );
        let (out, reqs) = with_mock(vec![(200, node), (200, json!({}))], |c| async move {
            let mut sink = NodeSink::new(c, "n1", Duration::from_secs(5));
            sink.publish(&output(&[("gpu", "8")]), false).await
        })
        .await;
        let out = out.unwrap();
        assert_eq!(out.diff.removed, vec!["old".to_string()]);
        assert_eq!(
            reqs[1].body["metadata"],
            json!({"name": "n1", "labels": {"gpu": "8"}})
        );
    }

    #[tokio::test]
    async fn a_conflict_is_reported_and_the_rest_applied() {
        let node = node_json("n1", &[], &[]);
        let conflict = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure",
            "message": "Apply failed with 1 conflict: conflict with \"ops\" using v1: .metadata.labels.owned",
            "reason": "Conflict",
            "details": {"causes": [{"reason": "FieldManagerConflict",
                "message": "conflict with \"ops\" using v1", "field": ".metadata.labels.owned"}]},
            "code": 409});
        let (out, reqs) = with_mock(
            vec![(200, node), (409, conflict), (200, json!({}))],
            |c| async move {
                let mut sink = NodeSink::new(c, "n1", Duration::from_secs(5));
                let first = sink
                    .publish(&output(&[("gpu", "8"), ("owned", "ours")]), false)
                    .await;
                // Same output again: no request at all.
                let second = sink
                    .publish(&output(&[("gpu", "8"), ("owned", "ours")]), false)
                    .await;
                (first, second)
            },
        )
        .await;
        let first = out.0.unwrap();
        assert_eq!(first.kind, OutcomeKind::Written);
        assert_eq!(
            first.conflicts,
            vec![Conflict {
                kind: FieldKind::Label,
                key: "owned".into(),
                manager: "ops".into()
            }]
        );
        assert_eq!(out.1.unwrap(), Outcome::unchanged());
        assert_eq!(reqs.len(), 3);
        assert_eq!(
            reqs[1].body["metadata"]["labels"],
            json!({"gpu": "8", "owned": "ours"})
        );
        assert_eq!(reqs[2].body["metadata"]["labels"], json!({"gpu": "8"}));
    }

    #[tokio::test]
    async fn a_known_conflict_is_not_applied_after_a_restart() {
        let node = node_json(
            "n1",
            &[("gpu", "8"), ("owned", "theirs")],
            &[
                (FIELD_MANAGER, "Apply", &["gpu"]),
                ("ops", "Update", &["owned"]),
            ],
        );
        let (out, reqs) = with_mock(vec![(200, node)], |c| async move {
            let mut sink = NodeSink::new(c, "n1", Duration::from_secs(5));
            sink.publish(&output(&[("gpu", "8"), ("owned", "ours")]), false)
                .await
        })
        .await;
        let out = out.unwrap();
        assert_eq!(out.kind, OutcomeKind::Unchanged);
        assert_eq!(out.conflicts.len(), 1);
        assert_eq!(reqs.len(), 1);
    }

    #[tokio::test]
    async fn server_errors_are_classified_for_retry() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "etcdserver: leader changed", "reason": "InternalError", "code": 500});
        let (out, _) = with_mock(vec![(500, status)], |c| async move {
            let mut sink = NodeSink::new(c, "n1", Duration::from_secs(5));
            sink.publish(&output(&[("gpu", "8")]), false).await
        })
        .await;
        let e = out.unwrap_err();
        assert_eq!(e.reason, Reason::Server);
        assert!(e.message.contains("leader changed"), "{e}");
    }

    #[tokio::test]
    async fn dry_run_reads_but_never_writes() {
        let node = node_json("n1", &[], &[]);
        let (out, reqs) = with_mock(vec![(200, node)], |c| async move {
            let mut sink = NodeSink::new(c, "n1", Duration::from_secs(5));
            sink.publish(&output(&[("gpu", "8")]), true).await
        })
        .await;
        let out = out.unwrap();
        assert_eq!(out.kind, OutcomeKind::DryRun);
        assert_eq!(out.diff.added, labels(&[("gpu", "8")]));
        assert_eq!(reqs.len(), 1);
    }

    #[test]
    fn diff_lists_added_changed_and_removed() {
        let d = LabelDiff::between(
            &labels(&[("a", "1"), ("b", "2"), ("c", "3")]),
            &labels(&[("a", "1"), ("b", "9"), ("d", "4")]),
        );
        assert_eq!(d.to_string(), "+d=4 ~b=2->9 -c");
        assert!(LabelDiff::between(&labels(&[]), &labels(&[])).is_empty());
    }
}
