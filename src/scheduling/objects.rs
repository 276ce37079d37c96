//! Workloads and Nodes as `match` and `inventory` read them: Kubernetes objects in YAML or JSON
//! (several documents, or `kind: List`), reduced to what scheduling looks at. A document that is
//! not what was asked for is an error naming its file, line and column and the field's path.

use std::collections::BTreeMap;

pub use crate::kobject::{ObjectError, Quantity};
use crate::kobject::{Reader, Res, documents, join};
use crate::validate;
use crate::yaml::document::{self, Node, Pos, Val};

/// One `matchExpressions` (or `matchFields`) entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
    pub pos: Pos,
}

/// A `nodeSelectorTerm`: its expressions and fields, ANDed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Term {
    pub expressions: Vec<Requirement>,
    pub fields: Vec<Requirement>,
    pub pos: Pos,
}

impl Term {
    /// A term that asks for nothing selects no node (the scheduler's rule).
    pub fn is_empty(&self) -> bool {
        self.expressions.is_empty() && self.fields.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Toleration {
    pub key: String,
    pub operator: String,
    pub value: String,
    pub effect: String,
    pub seconds: Option<i64>,
}

/// What scheduling reads of a pod spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSpec {
    pub node_name: Option<String>,
    pub node_selector: Vec<(String, String)>,
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`, ORed; `None` when
    /// the pod has no required node affinity.
    pub required: Option<Vec<Term>>,
    /// `preferredDuringSchedulingIgnoredDuringExecution`: weight and term.
    pub preferred: Vec<(i64, Term)>,
    pub tolerations: Vec<Toleration>,
    /// The pod's effective requests (containers, init containers and overhead), per resource.
    pub requests: BTreeMap<String, Quantity>,
    /// `resourceClaims`: the DRA claims the pod needs allocated (src/scheduling/dra.rs).
    pub resource_claims: Vec<PodClaim>,
}

/// One of a pod's `resourceClaims`: a ResourceClaim by name, or one made from a template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodClaim {
    pub name: String,
    pub claim_name: Option<String>,
    pub template_name: Option<String>,
}

/// A Pod, or the pod template of a workload object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    /// `file:line:column` of the object.
    pub location: String,
    pub pod: PodSpec,
    /// What the API server's validation refuses in the fields scheduling reads (`nodeSelector`,
    /// node affinity, tolerations), in its order: such a pod is never created. `pod` still
    /// holds them, as the scheduler would read them.
    pub refusals: Vec<ObjectError>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// What scheduling reads of a Node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub allocatable: BTreeMap<String, Quantity>,
    /// The DRA device taints of the node's devices: the `DeviceTaintRule`s (beside the Nodes in
    /// a file, or the cluster's) that select a device in the pool named for the node.
    pub device_taints: Vec<DeviceTaintNote>,
}

/// One `DeviceTaintRule` on one of a node's devices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceTaintNote {
    pub rule: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// The GPU's PCI address, where gpu-labeler wrote the rule (its annotation).
    pub gpu: Option<String>,
    pub key: String,
    pub value: String,
    pub effect: String,
}

impl DeviceTaintNote {
    /// `GPU 0000:3b:00.0 (gpu.nvidia.com n1/gpu-1) is tainted out of DRA allocation by
    /// DeviceTaintRule gpu-labeler-n1-0000-3b-00-0 (NoSchedule: ecc)`.
    pub fn describe(&self) -> String {
        let what = match &self.gpu {
            Some(g) => format!("GPU {g} ({} {}/{})", self.driver, self.pool, self.device),
            None => format!("device {} {}/{}", self.driver, self.pool, self.device),
        };
        let how = if self.effect == "None" {
            "carries the informational taint of"
        } else {
            "is tainted out of DRA allocation by"
        };
        format!(
            "{what} {how} DeviceTaintRule {} ({}: {}={})",
            self.rule, self.effect, self.key, self.value
        )
    }
}

/// The `resource.k8s.io` kinds a workload's file may hold beside it (`draobjects` reads them).
pub const DRA_KINDS: &[&str] = &[
    "ResourceSlice",
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
];

/// The kinds with a pod template, and where it is.
const TEMPLATED: &[(&str, &[&str])] = &[
    ("Deployment", &["spec", "template", "spec"]),
    ("StatefulSet", &["spec", "template", "spec"]),
    ("DaemonSet", &["spec", "template", "spec"]),
    ("ReplicaSet", &["spec", "template", "spec"]),
    ("ReplicationController", &["spec", "template", "spec"]),
    ("Job", &["spec", "template", "spec"]),
    (
        "CronJob",
        &["spec", "jobTemplate", "spec", "template", "spec"],
    ),
    ("PodTemplate", &["template", "spec"]),
    ("Pod", &["spec"]),
];

/// The workloads of a file: every document a Pod or an object with a pod template, or a `List`
/// of them.
pub fn read_workloads(source: &str, text: &str) -> Res<Vec<Workload>> {
    let reader = Reader { source };
    let docs = documents(source, text)?;
    if docs.is_empty() {
        return Err(ObjectError {
            source: source.to_string(),
            pos: Pos::default(),
            path: String::new(),
            message: "no workload here (a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob)".into(),
        });
    }
    let mut out = Vec::new();
    for doc in &docs {
        reader.workloads(doc, "", &mut out)?;
    }
    Ok(out)
}

impl Reader<'_> {
    fn workloads(&self, doc: &Node, path: &str, out: &mut Vec<Workload>) -> Res<()> {
        let kind = self.kind(doc, path)?;
        if kind == "List" || kind.ends_with("List") {
            let items = self.field(doc, path, "items")?;
            let here = join(path, "items");
            for (i, item) in items
                .map(|n| self.seq(n, &here))
                .transpose()?
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                self.workloads(item, &format!("{here}[{i}]"), out)?;
            }
            return Ok(());
        }
        // The claims and templates a pod uses may stand beside it (read by `dra`).
        if DRA_KINDS.contains(&kind.as_str()) {
            return Ok(());
        }
        let Some((_, spec_path)) = TEMPLATED.iter().find(|(k, _)| *k == kind) else {
            let at = self.field(doc, path, "kind")?.unwrap_or(doc);
            return Err(self.err(
                at,
                &join(path, "kind"),
                format!(
                    "{kind} is not a workload (a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob)"
                ),
            ));
        };
        let (name, namespace) = match self.field(doc, path, "metadata")? {
            Some(meta) => {
                let here = join(path, "metadata");
                (
                    self.opt_string(meta, &here, "name")?.or(self.opt_string(
                        meta,
                        &here,
                        "generateName",
                    )?),
                    self.opt_string(meta, &here, "namespace")?,
                )
            }
            None => (None, None),
        };
        let mut node = doc;
        let mut here = path.to_string();
        for step in *spec_path {
            match self.field(node, &here, step)? {
                Some(n) => node = n,
                None => {
                    return Err(self.err(
                        node,
                        &here,
                        format!("{kind} without {}", join(&here, step)),
                    ));
                }
            }
            here = join(&here, step);
        }
        let mut refusals = Vec::new();
        let pod = self.pod_spec(node, &here, &mut refusals)?;
        out.push(Workload {
            kind,
            name: name.unwrap_or_default(),
            namespace,
            location: if doc.pos.is_known() {
                format!("{}:{}", self.source, doc.pos)
            } else {
                self.source.to_string()
            },
            pod,
            refusals,
        });
        Ok(())
    }

    /// The pod spec; what the API server would refuse in it goes to `refusals`.
    fn pod_spec(&self, spec: &Node, path: &str, refusals: &mut Vec<ObjectError>) -> Res<PodSpec> {
        let mut pod = PodSpec {
            node_name: self.opt_string(spec, path, "nodeName")?,
            ..PodSpec::default()
        };
        if let Some(sel) = self.field(spec, path, "nodeSelector")? {
            let here = join(path, "nodeSelector");
            pod.node_selector = self.string_map(sel, &here)?;
            // `ValidateLabels`: its errors name the map, not the key.
            for ((k, v), (key, value)) in self.map(sel, &here)?.iter().zip(&pod.node_selector) {
                if let Err(e) = validate::qualified_name(key) {
                    refusals.push(self.err(k, &here, format!("key {key:?}: {e}")));
                }
                if let Err(e) = validate::label_value(value) {
                    refusals.push(self.err(v, &here, format!("value {value:?}: {e}")));
                }
            }
        }
        let affinity = join(path, "affinity.nodeAffinity");
        if let Some(na) = self
            .field(spec, path, "affinity")?
            .map(|a| self.field(a, &join(path, "affinity"), "nodeAffinity"))
            .transpose()?
            .flatten()
        {
            let req_path = join(&affinity, "requiredDuringSchedulingIgnoredDuringExecution");
            if let Some(req) = self.field(
                na,
                &affinity,
                "requiredDuringSchedulingIgnoredDuringExecution",
            )? {
                let terms_path = join(&req_path, "nodeSelectorTerms");
                let (at, terms) = match self.field(req, &req_path, "nodeSelectorTerms")? {
                    Some(t) => (t, self.seq(t, &terms_path)?),
                    None => (req, &[][..]),
                };
                if terms.is_empty() {
                    refusals.push(self.err(
                        at,
                        &terms_path,
                        "required: there must be at least one node selector term",
                    ));
                }
                pod.required = Some(
                    terms
                        .iter()
                        .enumerate()
                        .map(|(i, t)| self.term(t, &format!("{terms_path}[{i}]"), refusals))
                        .collect::<Res<_>>()?,
                );
            }
            let pref_path = join(&affinity, "preferredDuringSchedulingIgnoredDuringExecution");
            if let Some(pref) = self.field(
                na,
                &affinity,
                "preferredDuringSchedulingIgnoredDuringExecution",
            )? {
                for (i, p) in self.seq(pref, &pref_path)?.iter().enumerate() {
                    let here = format!("{pref_path}[{i}]");
                    let weight = match self.field(p, &here, "weight")? {
                        Some(Node {
                            val: Val::Num(n), ..
                        }) if n.parse::<i64>().is_ok_and(|w| (1..=100).contains(&w)) => {
                            n.parse().unwrap_or_default()
                        }
                        Some(w) => {
                            return Err(self.err(
                                w,
                                &join(&here, "weight"),
                                "must be an integer from 1 to 100",
                            ));
                        }
                        None => {
                            return Err(self.err(p, &here, "weight is required (1 to 100)"));
                        }
                    };
                    let term = match self.field(p, &here, "preference")? {
                        Some(t) => self.term(t, &join(&here, "preference"), refusals)?,
                        None => Term::default(),
                    };
                    pod.preferred.push((weight, term));
                }
            }
        }
        if let Some(tols) = self.field(spec, path, "tolerations")? {
            let here = join(path, "tolerations");
            for (i, t) in self.seq(tols, &here)?.iter().enumerate() {
                let at = format!("{here}[{i}]");
                let seconds = match self.field(t, &at, "tolerationSeconds")? {
                    None => None,
                    Some(n) => match &n.val {
                        Val::Num(v) if v.parse::<i64>().is_ok() => v.parse().ok(),
                        _ => {
                            return Err(self.err(
                                n,
                                &join(&at, "tolerationSeconds"),
                                "expected an integer (seconds)",
                            ));
                        }
                    },
                };
                let toleration = Toleration {
                    key: self.opt_string(t, &at, "key")?.unwrap_or_default(),
                    operator: self.opt_string(t, &at, "operator")?.unwrap_or_default(),
                    value: self.opt_string(t, &at, "value")?.unwrap_or_default(),
                    effect: self.opt_string(t, &at, "effect")?.unwrap_or_default(),
                    seconds,
                };
                self.refuse_toleration(&toleration, t, &at, refusals)?;
                pod.tolerations.push(toleration);
            }
        }
        pod.requests = self.requests(spec, path)?;
        if let Some(rcs) = self.field(spec, path, "resourceClaims")? {
            let here = join(path, "resourceClaims");
            for (i, c) in self.seq(rcs, &here)?.iter().enumerate() {
                let at = format!("{here}[{i}]");
                pod.resource_claims.push(PodClaim {
                    name: self.opt_string(c, &at, "name")?.unwrap_or_default(),
                    claim_name: self.opt_string(c, &at, "resourceClaimName")?,
                    template_name: self.opt_string(c, &at, "resourceClaimTemplateName")?,
                });
            }
        }
        Ok(pod)
    }

    /// `ValidateTolerations` (the comparison operators' feature gate off, its default).
    fn refuse_toleration(
        &self,
        t: &Toleration,
        node: &Node,
        path: &str,
        refusals: &mut Vec<ObjectError>,
    ) -> Res<()> {
        let at = |field: &str| -> Res<(&Node, String)> {
            Ok((
                self.field(node, path, field)?.unwrap_or(node),
                join(path, field),
            ))
        };
        let mut refuse = |(n, p): (&Node, String), message: String| {
            refusals.push(self.err(n, &p, message));
        };
        if !t.key.is_empty()
            && let Err(e) = validate::qualified_name(&t.key)
        {
            refuse(at("key")?, format!("{:?}: {e}", t.key));
        }
        if t.key.is_empty() && t.operator != "Exists" {
            refuse(
                at("operator")?,
                format!(
                    "{:?}: operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
                    t.operator
                ),
            );
        }
        if t.seconds.is_some() && t.effect != "NoExecute" {
            refuse(
                at("effect")?,
                format!(
                    "{:?}: effect must be 'NoExecute' when `tolerationSeconds` is set",
                    t.effect
                ),
            );
        }
        match t.operator.as_str() {
            "" | "Equal" => {
                if let Err(e) = validate::label_value(&t.value) {
                    refuse(at("operator")?, format!("value {:?}: {e}", t.value));
                }
            }
            "Exists" => {
                if !t.value.is_empty() {
                    refuse(
                        at("operator")?,
                        "value must be empty when `operator` is 'Exists'".to_string(),
                    );
                }
            }
            other => refuse(
                at("operator")?,
                format!("{other:?}: supported values: \"Equal\", \"Exists\""),
            ),
        }
        if !t.effect.is_empty()
            && !matches!(
                t.effect.as_str(),
                "NoSchedule" | "PreferNoSchedule" | "NoExecute"
            )
        {
            refuse(
                at("effect")?,
                format!(
                    "{:?}: supported values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\"",
                    t.effect
                ),
            );
        }
        Ok(())
    }

    /// `ValidateNodeSelectorRequirement` (label values checked, as on create since 1.33) or,
    /// for a field, `ValidateNodeFieldSelectorRequirement`.
    fn refuse_requirement(
        &self,
        r: &Requirement,
        field: bool,
        node: &Node,
        path: &str,
        refusals: &mut Vec<ObjectError>,
    ) -> Res<()> {
        let at = |name: &str| -> Res<(&Node, String)> {
            Ok((
                self.field(node, path, name)?.unwrap_or(node),
                join(path, name),
            ))
        };
        let mut refuse = |(n, p): (&Node, String), message: String| {
            refusals.push(self.err(n, &p, message));
        };
        let op = r.operator.as_str();
        let n = r.values.len();
        let count = match (field, op) {
            (false, "In" | "NotIn") if n == 0 => {
                Some("required: must be specified when `operator` is 'In' or 'NotIn'")
            }
            (false, "Exists" | "DoesNotExist") if n > 0 => Some(
                "forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ),
            (false, "Gt" | "Lt") if n != 1 => {
                Some("required: must be specified single value when `operator` is 'Lt' or 'Gt'")
            }
            (false, "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt") => None,
            (true, "In" | "NotIn") if n != 1 => Some(
                "required: must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            ),
            (true, "In" | "NotIn") => None,
            _ => {
                refuse(
                    at("operator")?,
                    format!("{op:?}: not a valid selector operator"),
                );
                None
            }
        };
        if let Some(message) = count {
            refuse(at("values")?, message.to_string());
        }
        let values = self.field(node, path, "values")?;
        let value_at = |i: usize| -> Res<(&Node, String)> {
            let p = format!("{}[{i}]", join(path, "values"));
            Ok(match values.map(|v| self.seq(v, path)).transpose()? {
                Some(items) if i < items.len() => (&items[i], p),
                _ => (node, p),
            })
        };
        if field {
            if r.key != "metadata.name" {
                refuse(
                    at("key")?,
                    format!(
                        "{:?}: not a valid field selector key (only metadata.name)",
                        r.key
                    ),
                );
            } else {
                for (i, v) in r.values.iter().enumerate() {
                    if let Err(e) = validate::dns_subdomain(v) {
                        refuse(value_at(i)?, format!("{v:?}: a node name {e}"));
                    }
                }
            }
            return Ok(());
        }
        if let Err(e) = validate::qualified_name(&r.key) {
            refuse(at("key")?, format!("{:?}: {e}", r.key));
        }
        for (i, v) in r.values.iter().enumerate() {
            if let Err(e) = validate::label_value(v) {
                refuse(value_at(i)?, format!("{v:?}: {e}"));
            }
        }
        Ok(())
    }

    pub(crate) fn term(
        &self,
        node: &Node,
        path: &str,
        refusals: &mut Vec<ObjectError>,
    ) -> Res<Term> {
        let mut term = Term {
            pos: node.pos,
            ..Term::default()
        };
        for (field, out) in [
            ("matchExpressions", &mut term.expressions),
            ("matchFields", &mut term.fields),
        ] {
            let Some(list) = self.field(node, path, field)? else {
                continue;
            };
            let here = join(path, field);
            for (i, e) in self.seq(list, &here)?.iter().enumerate() {
                let at = format!("{here}[{i}]");
                let key = self
                    .opt_string(e, &at, "key")?
                    .ok_or_else(|| self.err(e, &at, "key is required"))?;
                let operator = self
                    .opt_string(e, &at, "operator")?
                    .ok_or_else(|| self.err(e, &at, "operator is required"))?;
                let mut values = Vec::new();
                if let Some(vs) = self.field(e, &at, "values")? {
                    let vp = join(&at, "values");
                    for (j, v) in self.seq(vs, &vp)?.iter().enumerate() {
                        values.push(self.string(v, &format!("{vp}[{j}]"))?);
                    }
                }
                let r = Requirement {
                    key,
                    operator,
                    values,
                    pos: e.pos,
                };
                self.refuse_requirement(&r, field == "matchFields", e, &at, refusals)?;
                out.push(r);
            }
        }
        Ok(term)
    }

    /// One container's requests: its `requests`, and its `limits` where a request is not given
    /// (the API server's defaulting).
    fn container_requests(&self, c: &Node, path: &str) -> Res<BTreeMap<String, Quantity>> {
        let Some(res) = self.field(c, path, "resources")? else {
            return Ok(BTreeMap::new());
        };
        let here = join(path, "resources");
        let mut out = match self.field(res, &here, "requests")? {
            Some(r) => self.quantities(r, &join(&here, "requests"))?,
            None => BTreeMap::new(),
        };
        if let Some(l) = self.field(res, &here, "limits")? {
            for (k, v) in self.quantities(l, &join(&here, "limits"))? {
                out.entry(k).or_insert(v);
            }
        }
        Ok(out)
    }

    /// The pod's effective requests, as the scheduler sums them: the containers' sum plus the
    /// restartable (sidecar) init containers, or an ordinary init container's own request plus
    /// the sidecars started before it when that is larger; then the pod's overhead.
    fn requests(&self, spec: &Node, path: &str) -> Res<BTreeMap<String, Quantity>> {
        let mut total: BTreeMap<String, i128> = BTreeMap::new();
        if let Some(cs) = self.field(spec, path, "containers")? {
            let here = join(path, "containers");
            for (i, c) in self.seq(cs, &here)?.iter().enumerate() {
                for (k, q) in self.container_requests(c, &format!("{here}[{i}]"))? {
                    *total.entry(k).or_default() += q.milli;
                }
            }
        }
        let mut sidecars: BTreeMap<String, i128> = BTreeMap::new();
        let mut init_peak: BTreeMap<String, i128> = BTreeMap::new();
        if let Some(cs) = self.field(spec, path, "initContainers")? {
            let here = join(path, "initContainers");
            for (i, c) in self.seq(cs, &here)?.iter().enumerate() {
                let at = format!("{here}[{i}]");
                let req = self.container_requests(c, &at)?;
                let sidecar =
                    self.opt_string(c, &at, "restartPolicy")?.as_deref() == Some("Always");
                for (k, q) in req {
                    if sidecar {
                        *sidecars.entry(k).or_default() += q.milli;
                    } else {
                        let with = q.milli + sidecars.get(&k).copied().unwrap_or(0);
                        let peak = init_peak.entry(k).or_default();
                        *peak = (*peak).max(with);
                    }
                }
            }
        }
        for (k, q) in sidecars {
            *total.entry(k).or_default() += q;
        }
        for (k, q) in init_peak {
            let t = total.entry(k).or_default();
            *t = (*t).max(q);
        }
        if let Some(o) = self.field(spec, path, "overhead")? {
            for (k, q) in self.quantities(o, &join(path, "overhead"))? {
                *total.entry(k).or_default() += q.milli;
            }
        }
        Ok(total
            .into_iter()
            .map(|(k, milli)| (k, Quantity { milli }))
            .collect())
    }
}

/// The Nodes of a file: `kubectl get nodes -o json` or `-o yaml` output (a `List`), one Node, or
/// several documents of them.
pub fn read_nodes(source: &str, text: &str) -> Res<Vec<NodeInfo>> {
    // `kubectl get nodes -o json` of a large cluster is megabytes: serde_json reads it many
    // times faster than the YAML parser. Its tree has no positions, so a file with a problem is
    // read again by the YAML parser, whose error names the line and column.
    if document::looks_like_json(text)
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(text)
        && let Ok(nodes) = nodes_of(source, &[document::from_json(&v)])
    {
        return Ok(nodes);
    }
    nodes_of(source, &documents(source, text)?)
}

/// Nodes from trees (the API server's list, turned into a tree, comes here too).
pub fn nodes_of(source: &str, docs: &[Node]) -> Res<Vec<NodeInfo>> {
    let reader = Reader { source };
    let mut out = Vec::new();
    let mut rules = Vec::new();
    for doc in docs {
        reader.nodes(doc, "", &mut out, &mut rules)?;
    }
    attach_device_taints(&mut out, rules);
    Ok(out)
}

/// DeviceTaintRules as trees (the API server's list), each to the node its pool is named for.
pub fn attach_device_taint_rules(source: &str, nodes: &mut [NodeInfo], docs: &[Node]) -> Res<()> {
    let reader = Reader { source };
    let mut rules = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        if let Some(r) = reader.device_taint_rule(doc, &format!("items[{i}]"))? {
            rules.push(r);
        }
    }
    attach_device_taints(nodes, rules);
    Ok(())
}

fn attach_device_taints(nodes: &mut [NodeInfo], mut rules: Vec<DeviceTaintNote>) {
    rules.sort_by(|a, b| (&a.pool, &a.device, &a.rule).cmp(&(&b.pool, &b.device, &b.rule)));
    for n in nodes.iter_mut() {
        n.device_taints = rules.iter().filter(|r| r.pool == n.name).cloned().collect();
    }
}

impl Reader<'_> {
    fn nodes(
        &self,
        doc: &Node,
        path: &str,
        out: &mut Vec<NodeInfo>,
        rules: &mut Vec<DeviceTaintNote>,
    ) -> Res<()> {
        let kind = self.kind(doc, path)?;
        match kind.as_str() {
            "List" | "NodeList" => {
                let here = join(path, "items");
                if let Some(items) = self.field(doc, path, "items")? {
                    for (i, item) in self.seq(items, &here)?.iter().enumerate() {
                        let at = format!("{here}[{i}]");
                        match self.kind(item, &at)?.as_str() {
                            "Node" => out.push(self.node(item, &at)?),
                            "DeviceTaintRule" => rules.extend(self.device_taint_rule(item, &at)?),
                            _ => {
                                let k = self.field(item, &at, "kind")?.unwrap_or(item);
                                return Err(self.err(
                                    k,
                                    &join(&at, "kind"),
                                    "not a Node or a DeviceTaintRule",
                                ));
                            }
                        }
                    }
                }
                Ok(())
            }
            "Node" => {
                out.push(self.node(doc, path)?);
                Ok(())
            }
            "DeviceTaintRule" => {
                rules.extend(self.device_taint_rule(doc, path)?);
                Ok(())
            }
            other => {
                let k = self.field(doc, path, "kind")?.unwrap_or(doc);
                Err(self.err(
                    k,
                    &join(path, "kind"),
                    format!("{other} is not a Node or a list of Nodes (kubectl get nodes -o json)"),
                ))
            }
        }
    }

    /// A `DeviceTaintRule` that selects one device of a pool (`None`: one that selects
    /// anything else, e.g. a whole driver, which names no node's device).
    fn device_taint_rule(&self, doc: &Node, path: &str) -> Res<Option<DeviceTaintNote>> {
        let meta_path = join(path, "metadata");
        let meta = self.field(doc, path, "metadata")?;
        let rule = match meta {
            Some(m) => self.opt_string(m, &meta_path, "name")?.unwrap_or_default(),
            None => String::new(),
        };
        let gpu = match meta
            .map(|m| self.field(m, &meta_path, "annotations"))
            .transpose()?
        {
            Some(Some(a)) => self
                .string_map(a, &join(&meta_path, "annotations"))?
                .into_iter()
                .find(|(k, _)| k == "gpu-labeler.feature.node.kubernetes.io/gpu")
                .map(|(_, v)| v),
            _ => None,
        };
        let spec_path = join(path, "spec");
        let Some(spec) = self.field(doc, path, "spec")? else {
            return Ok(None);
        };
        let sel_path = join(&spec_path, "deviceSelector");
        let taint_path = join(&spec_path, "taint");
        let (Some(sel), Some(taint)) = (
            self.field(spec, &spec_path, "deviceSelector")?,
            self.field(spec, &spec_path, "taint")?,
        ) else {
            return Ok(None);
        };
        let text = |n: &Node, p: &str, k: &str| self.opt_string(n, p, k);
        let (Some(pool), Some(device)) = (
            text(sel, &sel_path, "pool")?,
            text(sel, &sel_path, "device")?,
        ) else {
            return Ok(None);
        };
        Ok(Some(DeviceTaintNote {
            rule,
            driver: text(sel, &sel_path, "driver")?.unwrap_or_default(),
            pool,
            device,
            gpu,
            key: text(taint, &taint_path, "key")?.unwrap_or_default(),
            value: text(taint, &taint_path, "value")?.unwrap_or_default(),
            effect: text(taint, &taint_path, "effect")?.unwrap_or_default(),
        }))
    }

    fn node(&self, doc: &Node, path: &str) -> Res<NodeInfo> {
        let meta_path = join(path, "metadata");
        let meta = self
            .field(doc, path, "metadata")?
            .ok_or_else(|| self.err(doc, path, "a Node without metadata"))?;
        let name = self
            .opt_string(meta, &meta_path, "name")?
            .ok_or_else(|| self.err(meta, &meta_path, "a Node without a name"))?;
        let mut node = NodeInfo {
            name,
            ..NodeInfo::default()
        };
        if let Some(labels) = self.field(meta, &meta_path, "labels")? {
            node.labels = self
                .string_map(labels, &join(&meta_path, "labels"))?
                .into_iter()
                .collect();
        }
        if let Some(spec) = self.field(doc, path, "spec")? {
            let here = join(path, "spec");
            node.unschedulable = match self.field(spec, &here, "unschedulable")? {
                Some(Node {
                    val: Val::Bool(b), ..
                }) => *b,
                Some(other) => {
                    return Err(self.err(
                        other,
                        &join(&here, "unschedulable"),
                        format!("expected a boolean, found {}", other.val.kind()),
                    ));
                }
                None => false,
            };
            if let Some(taints) = self.field(spec, &here, "taints")? {
                let tp = join(&here, "taints");
                for (i, t) in self.seq(taints, &tp)?.iter().enumerate() {
                    let at = format!("{tp}[{i}]");
                    node.taints.push(Taint {
                        key: self
                            .opt_string(t, &at, "key")?
                            .ok_or_else(|| self.err(t, &at, "a taint without a key"))?,
                        value: self.opt_string(t, &at, "value")?.unwrap_or_default(),
                        effect: self
                            .opt_string(t, &at, "effect")?
                            .ok_or_else(|| self.err(t, &at, "a taint without an effect"))?,
                    });
                }
            }
        }
        if let Some(status) = self.field(doc, path, "status")? {
            let here = join(path, "status");
            if let Some(a) = self.field(status, &here, "allocatable")? {
                node.allocatable = self.quantities(a, &join(&here, "allocatable"))?;
            }
        }
        Ok(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployments_template_with_init_and_sidecar_containers_sums_as_the_scheduler() {
        let text = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ml}
spec:
  template:
    spec:
      initContainers:
        - name: sidecar
          restartPolicy: Always
          resources: {requests: {cpu: 100m}}
        - name: setup
          resources: {limits: {nvidia.com/gpu: 2, cpu: '1'}}
      containers:
        - name: a
          resources: {limits: {nvidia.com/gpu: 1}, requests: {cpu: 500m}}
        - name: b
          resources: {requests: {cpu: 250m, memory: 1Gi}}
      overhead: {cpu: 50m}
";
        let w = read_workloads("w.yaml", text).unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(
            (
                w[0].kind.as_str(),
                w[0].name.as_str(),
                w[0].namespace.as_deref()
            ),
            ("Deployment", "web", Some("ml"))
        );
        let shown: Vec<(String, String)> = w[0]
            .pod
            .requests
            .iter()
            .map(|(k, q)| (k.clone(), q.to_string()))
            .collect();
        // cpu: max(500m + 250m + 100m sidecar, 1 + 100m) + 50m overhead = 1150m.
        assert_eq!(
            shown,
            [
                ("cpu".to_string(), "1150m".to_string()),
                ("memory".to_string(), "1073741824".to_string()),
                ("nvidia.com/gpu".to_string(), "2".to_string()),
            ]
        );
    }

    #[test]
    fn a_number_where_the_api_wants_a_string_is_named_with_its_place() {
        let text = "kind: Pod\nmetadata: {name: p}\nspec:\n  nodeSelector:\n    feature.node.kubernetes.io/gpu.count: 8\n  containers: []\n";
        assert_eq!(
            read_workloads("p.yaml", text).unwrap_err().to_string(),
            "p.yaml:5:43: spec.nodeSelector.feature.node.kubernetes.io/gpu.count: expected a string, found number 8 (quote it: \"8\")"
        );
    }

    #[test]
    fn a_json_node_list_is_read_fast_and_its_problem_still_named_by_line_and_column() {
        let good = r#"{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n1",
            "labels": {"a": "1"}}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "memory": "1Ki"}}}]}"#;
        let nodes = read_nodes("n.json", good).unwrap();
        assert_eq!(
            nodes,
            [NodeInfo {
                name: "n1".into(),
                labels: [("a".to_string(), "1".to_string())].into(),
                taints: vec![Taint {
                    key: "k".into(),
                    value: String::new(),
                    effect: "NoSchedule".into()
                }],
                unschedulable: false,
                allocatable: [
                    ("memory".to_string(), Quantity { milli: 1_024_000 }),
                    ("nvidia.com/gpu".to_string(), Quantity { milli: 8000 }),
                ]
                .into(),
                device_taints: Vec::new(),
            }]
        );
        let bad = "{\"kind\": \"List\", \"items\": [\n  {\"kind\": \"Node\", \"metadata\": {\"name\": \"n1\"},\n   \"status\": {\"allocatable\": {\"cpu\": \"lots\"}}}]}";
        assert_eq!(
            read_nodes("n.json", bad).unwrap_err().to_string(),
            "n.json:3:38: items[0].status.allocatable.cpu: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }

    #[test]
    fn a_file_of_the_wrong_kind_says_so() {
        assert_eq!(
            read_workloads(
                "s.yaml",
                "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
            )
            .unwrap_err()
            .to_string(),
            "s.yaml:2:7: kind: Service is not a workload (a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob)"
        );
        assert_eq!(
            read_nodes(
                "n.json",
                "{\"kind\": \"Pod\", \"metadata\": {\"name\": \"p\"}}"
            )
            .unwrap_err()
            .to_string(),
            "n.json:1:10: kind: Pod is not a Node or a list of Nodes (kubectl get nodes -o json)"
        );
    }
}
