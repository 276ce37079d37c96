//! The `resource.k8s.io` objects `match` allocates with, read in full where the allocator looks:
//! ResourceSlices (pool, node selection, devices with attributes, capacity, taints and counters;
//! `v1`, `v1beta2`, and `v1beta1` with its `basic` wrapper), DeviceClasses (selectors),
//! ResourceClaims (requests, `firstAvailable`, constraints, and the devices already allocated)
//! and ResourceClaimTemplates. Errors name the file, line and column and the field.

use std::collections::BTreeMap;

use super::objects::Term;
use crate::dra::Attr;
use crate::kobject::{ObjectError, Quantity, Reader, Res, documents, join};
use crate::yaml::document::{self, Node, Val};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceTaint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceToleration {
    pub key: String,
    pub operator: String,
    pub value: String,
    pub effect: String,
}

impl DeviceToleration {
    /// `resourceclaim.ToleratesTaint`.
    pub fn tolerates(&self, t: &DeviceTaint) -> bool {
        (self.effect.is_empty() || self.effect == t.effect)
            && (self.key.is_empty() || self.key == t.key)
            && match self.operator.as_str() {
                "" | "Equal" => self.value == t.value,
                "Exists" => true,
                _ => false,
            }
    }
}

/// Where a slice's (or a device's) devices are available.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelection {
    pub node_name: Option<String>,
    pub all_nodes: bool,
    /// `nodeSelector.nodeSelectorTerms`.
    pub selector: Option<Vec<Term>>,
}

impl NodeSelection {
    pub fn is_set(&self) -> bool {
        self.node_name.is_some() || self.all_nodes || self.selector.is_some()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SliceDevice {
    pub name: String,
    pub attributes: BTreeMap<String, Attr>,
    pub capacity: BTreeMap<String, Quantity>,
    pub taints: Vec<DeviceTaint>,
    /// `consumesCounters`: counter set -> counter -> amount.
    pub consumes: Vec<(String, BTreeMap<String, i128>)>,
    /// Per-device node selection (`perDeviceNodeSelection` slices).
    pub nodes: NodeSelection,
    pub binding_conditions: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SliceInfo {
    pub name: String,
    pub driver: String,
    pub pool: String,
    pub generation: i64,
    pub slice_count: i64,
    pub nodes: NodeSelection,
    pub per_device_nodes: bool,
    /// `sharedCounters`: set name -> counter -> amount.
    pub shared_counters: Vec<(String, BTreeMap<String, i128>)>,
    pub devices: Vec<SliceDevice>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassInfo {
    pub name: String,
    pub selectors: Vec<String>,
    /// `file:line:column` of each selector's expression (for `claims check`).
    pub selector_at: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Exact(i64),
    All,
}

/// An exact request, or one of a `firstAvailable` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubRequest {
    pub name: String,
    pub class: String,
    pub mode: Mode,
    pub selectors: Vec<String>,
    pub selector_at: Vec<String>,
    pub tolerations: Vec<DeviceToleration>,
    pub admin_access: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub name: String,
    /// `exactly` (or v1beta1's request itself).
    pub exactly: Option<SubRequest>,
    pub first_available: Vec<SubRequest>,
}

impl Request {
    /// What may satisfy the request, in the order the allocator tries them: `exactly` alone, or
    /// each `firstAvailable` subrequest with its parent's name.
    pub fn alternatives(&self) -> Vec<(&SubRequest, Option<&str>)> {
        match &self.exactly {
            Some(e) => vec![(e, None)],
            None => self
                .first_available
                .iter()
                .map(|s| (s, Some(self.name.as_str())))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConstraintKind {
    MatchAttribute,
    DistinctAttribute,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub requests: Vec<String>,
    pub kind: ConstraintKind,
    pub attribute: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimSpec {
    pub requests: Vec<Request>,
    pub constraints: Vec<Constraint>,
}

/// A device of an allocation result.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AllocatedDevice {
    pub driver: String,
    pub pool: String,
    pub device: String,
    pub admin_access: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimInfo {
    pub name: String,
    pub namespace: Option<String>,
    pub spec: ClaimSpec,
    /// `status.allocation.devices.results` (`None`: not allocated).
    pub allocation: Option<Vec<AllocatedDevice>>,
    pub location: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateInfo {
    pub name: String,
    pub namespace: Option<String>,
    pub spec: ClaimSpec,
    pub location: String,
}

/// Everything DRA `match` reads, from the `--dra` file, the cluster, or beside the workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraSet {
    pub slices: Vec<SliceInfo>,
    pub classes: Vec<ClassInfo>,
    pub claims: Vec<ClaimInfo>,
    pub templates: Vec<TemplateInfo>,
}

impl DraSet {
    pub fn extend(&mut self, other: DraSet) {
        self.slices.extend(other.slices);
        self.classes.extend(other.classes);
        self.claims.extend(other.claims);
        self.templates.extend(other.templates);
    }
}

/// Reads the DRA objects of a file (a `List` or documents), skipping other kinds.
pub fn read(source: &str, text: &str) -> Res<DraSet> {
    let docs = if document::looks_like_json(text) {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v) => vec![document::from_json(&v)],
            Err(_) => documents(source, text)?,
        }
    } else {
        documents(source, text)?
    };
    read_docs(source, &docs)
}

/// Reads the DRA objects of parsed documents (an API server's list included).
pub fn read_docs(source: &str, docs: &[Node]) -> Res<DraSet> {
    let r = Reader { source };
    let mut out = DraSet::default();
    for d in docs {
        object(&r, d, "", &mut out)?;
    }
    Ok(out)
}

fn object(r: &Reader, doc: &Node, path: &str, out: &mut DraSet) -> Res<()> {
    if doc.val == Val::Null {
        return Ok(());
    }
    let kind = r.kind(doc, path)?;
    if kind == "List" || kind.ends_with("List") {
        let here = join(path, "items");
        if let Some(items) = r.field(doc, path, "items")? {
            for (i, item) in r.seq(items, &here)?.iter().enumerate() {
                object(r, item, &format!("{here}[{i}]"), out)?;
            }
        }
        return Ok(());
    }
    let (name, namespace) = match r.field(doc, path, "metadata")? {
        Some(m) => {
            let mp = join(path, "metadata");
            (
                r.opt_string(m, &mp, "name")?.unwrap_or_default(),
                r.opt_string(m, &mp, "namespace")?,
            )
        }
        None => (String::new(), None),
    };
    let location = if doc.pos.is_known() {
        format!("{}:{}", r.source, doc.pos)
    } else {
        r.source.to_string()
    };
    let spec = r.field(doc, path, "spec")?;
    let sp = join(path, "spec");
    match kind.as_str() {
        "ResourceSlice" => {
            let spec = spec.ok_or_else(|| r.err(doc, path, "a ResourceSlice without spec"))?;
            out.slices.push(slice(r, spec, &sp, name)?);
        }
        "DeviceClass" => {
            let mut c = ClassInfo {
                name,
                ..ClassInfo::default()
            };
            if let Some(spec) = spec {
                (c.selectors, c.selector_at) = selectors(r, spec, &sp)?;
            }
            out.classes.push(c);
        }
        "ResourceClaim" => {
            let claim_spec = match spec {
                Some(s) => claim_spec(r, s, &sp)?,
                None => ClaimSpec::default(),
            };
            let allocation = match r.field(doc, path, "status")? {
                Some(st) => allocation(r, st, &join(path, "status"))?,
                None => None,
            };
            out.claims.push(ClaimInfo {
                name,
                namespace,
                spec: claim_spec,
                allocation,
                location,
            });
        }
        "ResourceClaimTemplate" => {
            // The claim's spec is the template's `spec.spec`.
            let inner = match spec {
                Some(s) => match r.field(s, &sp, "spec")? {
                    Some(i) => claim_spec(r, i, &join(&sp, "spec"))?,
                    None => ClaimSpec::default(),
                },
                None => ClaimSpec::default(),
            };
            out.templates.push(TemplateInfo {
                name,
                namespace,
                spec: inner,
                location,
            });
        }
        _ => {}
    }
    Ok(())
}

fn int(r: &Reader, v: &Node, path: &str) -> Res<i64> {
    match &v.val {
        Val::Num(n) => n
            .parse()
            .map_err(|_| r.err(v, path, format!("{n} is not a 64-bit integer"))),
        other => Err(r.err(
            v,
            path,
            format!("expected an integer, found {}", other.kind()),
        )),
    }
}

fn boolean(r: &Reader, v: &Node, path: &str) -> Res<bool> {
    match &v.val {
        Val::Bool(b) => Ok(*b),
        other => Err(r.err(
            v,
            path,
            format!("expected a boolean, found {}", other.kind()),
        )),
    }
}

fn opt_bool(r: &Reader, n: &Node, path: &str, key: &str) -> Res<bool> {
    match r.field(n, path, key)? {
        Some(v) => boolean(r, v, &join(path, key)),
        None => Ok(false),
    }
}

fn quantity(r: &Reader, v: &Node, path: &str) -> Res<i128> {
    let text = match &v.val {
        Val::Str(s) | Val::Num(s) => s.clone(),
        other => {
            return Err(r.err(
                v,
                path,
                format!("expected a quantity, found {}", other.kind()),
            ));
        }
    };
    crate::validate::quantity_milli(&text).map_err(|e| r.err(v, path, format!("{text:?}: {e}")))
}

/// `{name: {value: Q}}` (counters) or `{name: Q}`.
fn counters(r: &Reader, n: &Node, path: &str) -> Res<BTreeMap<String, i128>> {
    let mut out = BTreeMap::new();
    for (k, v) in r.map(n, path)? {
        let key = k
            .key_text()
            .ok_or_else(|| r.err(k, path, "a key must be a string"))?;
        let at = join(path, &key);
        let q = match &v.val {
            Val::Map(_) => r
                .field(v, &at, "value")?
                .ok_or_else(|| r.err(v, &at, "a counter without value"))?,
            _ => v,
        };
        out.insert(key, quantity(r, q, &at)?);
    }
    Ok(out)
}

fn node_selection(r: &Reader, n: &Node, path: &str) -> Res<NodeSelection> {
    let selector = match r.field(n, path, "nodeSelector")? {
        Some(s) => {
            let here = join(path, "nodeSelector");
            let tp = join(&here, "nodeSelectorTerms");
            let terms = match r.field(s, &here, "nodeSelectorTerms")? {
                Some(t) => r.seq(t, &tp)?,
                None => &[],
            };
            // A slice is read as the API server stored it: what it would refuse of a pod's
            // terms is not asked of the slice's.
            let mut refusals = Vec::new();
            Some(
                terms
                    .iter()
                    .enumerate()
                    .map(|(i, t)| r.term(t, &format!("{tp}[{i}]"), &mut refusals))
                    .collect::<Res<_>>()?,
            )
        }
        None => None,
    };
    Ok(NodeSelection {
        node_name: r.opt_string(n, path, "nodeName")?,
        all_nodes: opt_bool(r, n, path, "allNodes")?,
        selector,
    })
}

fn slice(r: &Reader, spec: &Node, sp: &str, name: String) -> Res<SliceInfo> {
    let driver = r
        .opt_string(spec, sp, "driver")?
        .ok_or_else(|| r.err(spec, sp, "a ResourceSlice without spec.driver"))?;
    let mut s = SliceInfo {
        name,
        driver,
        slice_count: 1,
        nodes: node_selection(r, spec, sp)?,
        per_device_nodes: opt_bool(r, spec, sp, "perDeviceNodeSelection")?,
        ..SliceInfo::default()
    };
    if let Some(p) = r.field(spec, sp, "pool")? {
        let here = join(sp, "pool");
        s.pool = r.opt_string(p, &here, "name")?.unwrap_or_default();
        if let Some(g) = r.field(p, &here, "generation")? {
            s.generation = int(r, g, &join(&here, "generation"))?;
        }
        if let Some(c) = r.field(p, &here, "resourceSliceCount")? {
            s.slice_count = int(r, c, &join(&here, "resourceSliceCount"))?;
        }
    }
    if let Some(list) = r.field(spec, sp, "sharedCounters")? {
        let here = join(sp, "sharedCounters");
        for (i, c) in r.seq(list, &here)?.iter().enumerate() {
            let at = format!("{here}[{i}]");
            let name = r.opt_string(c, &at, "name")?.unwrap_or_default();
            let cs = match r.field(c, &at, "counters")? {
                Some(m) => counters(r, m, &join(&at, "counters"))?,
                None => BTreeMap::new(),
            };
            s.shared_counters.push((name, cs));
        }
    }
    if let Some(list) = r.field(spec, sp, "devices")? {
        let here = join(sp, "devices");
        for (i, d) in r.seq(list, &here)?.iter().enumerate() {
            s.devices.push(device(r, d, &format!("{here}[{i}]"))?);
        }
    }
    Ok(s)
}

fn device(r: &Reader, d: &Node, path: &str) -> Res<SliceDevice> {
    let name = r
        .opt_string(d, path, "name")?
        .ok_or_else(|| r.err(d, path, "a device without a name"))?;
    // v1beta1 keeps the rest under `basic`.
    let (body, bp) = match r.field(d, path, "basic")? {
        Some(b) => (b, join(path, "basic")),
        None => (d, path.to_string()),
    };
    let mut dev = SliceDevice {
        name,
        nodes: node_selection(r, body, &bp)?,
        binding_conditions: r.field(body, &bp, "bindingConditions")?.is_some(),
        ..SliceDevice::default()
    };
    if let Some(attrs) = r.field(body, &bp, "attributes")? {
        let here = join(&bp, "attributes");
        for (k, v) in r.map(attrs, &here)? {
            let key = k
                .key_text()
                .ok_or_else(|| r.err(k, &here, "a key must be a string"))?;
            let at = join(&here, &key);
            dev.attributes.insert(key, attribute(r, v, &at)?);
        }
    }
    if let Some(cap) = r.field(body, &bp, "capacity")? {
        let here = join(&bp, "capacity");
        for (k, v) in counters(r, cap, &here)? {
            dev.capacity.insert(k, Quantity { milli: v });
        }
    }
    if let Some(ts) = r.field(body, &bp, "taints")? {
        let here = join(&bp, "taints");
        for (i, t) in r.seq(ts, &here)?.iter().enumerate() {
            let at = format!("{here}[{i}]");
            dev.taints.push(DeviceTaint {
                key: r.opt_string(t, &at, "key")?.unwrap_or_default(),
                value: r.opt_string(t, &at, "value")?.unwrap_or_default(),
                effect: r.opt_string(t, &at, "effect")?.unwrap_or_default(),
            });
        }
    }
    if let Some(cc) = r.field(body, &bp, "consumesCounters")? {
        let here = join(&bp, "consumesCounters");
        for (i, c) in r.seq(cc, &here)?.iter().enumerate() {
            let at = format!("{here}[{i}]");
            let set = r.opt_string(c, &at, "counterSet")?.unwrap_or_default();
            let cs = match r.field(c, &at, "counters")? {
                Some(m) => counters(r, m, &join(&at, "counters"))?,
                None => BTreeMap::new(),
            };
            dev.consumes.push((set, cs));
        }
    }
    Ok(dev)
}

fn attribute(r: &Reader, v: &Node, path: &str) -> Res<Attr> {
    let mut found = None;
    for (k, val) in r.map(v, path)? {
        if val.val == Val::Null {
            continue;
        }
        let key = k.key_text().unwrap_or_default();
        let here = join(path, &key);
        let a = match key.as_str() {
            "int" => Attr::Int(int(r, val, &here)?),
            "bool" => Attr::Bool(boolean(r, val, &here)?),
            "string" => Attr::Str(r.string(val, &here)?),
            "version" => Attr::Version(r.string(val, &here)?),
            other => {
                return Err(r.err(
                    k,
                    &here,
                    format!("unknown attribute type {other:?} (one of int, bool, string, version)"),
                ));
            }
        };
        if found.is_some() {
            return Err(r.err(v, path, "an attribute with more than one value"));
        }
        found = Some(a);
    }
    found.ok_or_else(|| r.err(v, path, "an attribute without a value"))
}

fn selectors(r: &Reader, n: &Node, path: &str) -> Res<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    let mut at_list = Vec::new();
    if let Some(sel) = r.field(n, path, "selectors")? {
        let here = join(path, "selectors");
        for (i, s) in r.seq(sel, &here)?.iter().enumerate() {
            let at = format!("{here}[{i}]");
            let cel = r
                .field(s, &at, "cel")?
                .ok_or_else(|| r.err(s, &at, "a selector without cel.expression"))?;
            let cp = join(&at, "cel");
            let e = r
                .field(cel, &cp, "expression")?
                .ok_or_else(|| r.err(s, &at, "a selector without cel.expression"))?;
            out.push(r.string(e, &join(&cp, "expression"))?);
            at_list.push(if e.pos.is_known() {
                format!("{}:{}", r.source, e.pos)
            } else {
                format!("{}: {}", r.source, join(&cp, "expression"))
            });
        }
    }
    Ok((out, at_list))
}

fn tolerations(r: &Reader, n: &Node, path: &str) -> Res<Vec<DeviceToleration>> {
    let mut out = Vec::new();
    if let Some(ts) = r.field(n, path, "tolerations")? {
        let here = join(path, "tolerations");
        for (i, t) in r.seq(ts, &here)?.iter().enumerate() {
            let at = format!("{here}[{i}]");
            out.push(DeviceToleration {
                key: r.opt_string(t, &at, "key")?.unwrap_or_default(),
                operator: r.opt_string(t, &at, "operator")?.unwrap_or_default(),
                value: r.opt_string(t, &at, "value")?.unwrap_or_default(),
                effect: r.opt_string(t, &at, "effect")?.unwrap_or_default(),
            });
        }
    }
    Ok(out)
}

fn sub_request(r: &Reader, n: &Node, path: &str, name: String) -> Res<SubRequest> {
    let class = r
        .opt_string(n, path, "deviceClassName")?
        .ok_or_else(|| r.err(n, path, "a request without deviceClassName"))?;
    let mode = match r.opt_string(n, path, "allocationMode")?.as_deref() {
        None | Some("ExactCount") => Mode::Exact(match r.field(n, path, "count")? {
            Some(c) => int(r, c, &join(path, "count"))?,
            None => 1,
        }),
        Some("All") => Mode::All,
        Some(other) => {
            return Err(r.err(
                n,
                &join(path, "allocationMode"),
                format!("{other:?} is not ExactCount or All"),
            ));
        }
    };
    let (selectors, selector_at) = selectors(r, n, path)?;
    Ok(SubRequest {
        name,
        class,
        mode,
        selectors,
        selector_at,
        tolerations: tolerations(r, n, path)?,
        admin_access: opt_bool(r, n, path, "adminAccess")?,
    })
}

fn claim_spec(r: &Reader, spec: &Node, sp: &str) -> Res<ClaimSpec> {
    let mut out = ClaimSpec::default();
    let Some(devices) = r.field(spec, sp, "devices")? else {
        return Ok(out);
    };
    let dp = join(sp, "devices");
    if let Some(reqs) = r.field(devices, &dp, "requests")? {
        let here = join(&dp, "requests");
        for (i, q) in r.seq(reqs, &here)?.iter().enumerate() {
            let at = format!("{here}[{i}]");
            let name = r
                .opt_string(q, &at, "name")?
                .ok_or_else(|| r.err(q, &at, "a request without a name"))?;
            let mut req = Request {
                name: name.clone(),
                exactly: None,
                first_available: Vec::new(),
            };
            if let Some(e) = r.field(q, &at, "exactly")? {
                req.exactly = Some(sub_request(r, e, &join(&at, "exactly"), name.clone())?);
            } else if let Some(fa) = r.field(q, &at, "firstAvailable")? {
                let fp = join(&at, "firstAvailable");
                for (j, s) in r.seq(fa, &fp)?.iter().enumerate() {
                    let sat = format!("{fp}[{j}]");
                    let sname = r
                        .opt_string(s, &sat, "name")?
                        .ok_or_else(|| r.err(s, &sat, "a subrequest without a name"))?;
                    req.first_available.push(sub_request(r, s, &sat, sname)?);
                }
            } else {
                // v1beta1: the request is the exact request.
                req.exactly = Some(sub_request(r, q, &at, name)?);
            }
            out.requests.push(req);
        }
    }
    if let Some(cs) = r.field(devices, &dp, "constraints")? {
        let here = join(&dp, "constraints");
        for (i, c) in r.seq(cs, &here)?.iter().enumerate() {
            let at = format!("{here}[{i}]");
            let mut requests = Vec::new();
            if let Some(rs) = r.field(c, &at, "requests")? {
                let rp = join(&at, "requests");
                for (j, x) in r.seq(rs, &rp)?.iter().enumerate() {
                    requests.push(r.string(x, &format!("{rp}[{j}]"))?);
                }
            }
            let (kind, attribute) = if let Some(a) = r.opt_string(c, &at, "matchAttribute")? {
                (ConstraintKind::MatchAttribute, a)
            } else if let Some(a) = r.opt_string(c, &at, "distinctAttribute")? {
                (ConstraintKind::DistinctAttribute, a)
            } else {
                return Err(r.err(
                    c,
                    &at,
                    "a constraint without matchAttribute or distinctAttribute",
                ));
            };
            out.constraints.push(Constraint {
                requests,
                kind,
                attribute,
            });
        }
    }
    Ok(out)
}

fn allocation(r: &Reader, status: &Node, path: &str) -> Res<Option<Vec<AllocatedDevice>>> {
    let Some(a) = r.field(status, path, "allocation")? else {
        return Ok(None);
    };
    let ap = join(path, "allocation");
    let mut out = Vec::new();
    if let Some(d) = r.field(a, &ap, "devices")? {
        let dp = join(&ap, "devices");
        if let Some(results) = r.field(d, &dp, "results")? {
            let rp = join(&dp, "results");
            for (i, x) in r.seq(results, &rp)?.iter().enumerate() {
                let at = format!("{rp}[{i}]");
                out.push(AllocatedDevice {
                    driver: r.opt_string(x, &at, "driver")?.unwrap_or_default(),
                    pool: r.opt_string(x, &at, "pool")?.unwrap_or_default(),
                    device: r.opt_string(x, &at, "device")?.unwrap_or_default(),
                    admin_access: opt_bool(r, x, &at, "adminAccess")?,
                });
            }
        }
    }
    Ok(Some(out))
}

/// An error that names only the file.
pub fn file_error(source: &str, message: impl Into<String>) -> ObjectError {
    crate::dra::objects::file_error(source, message)
}
