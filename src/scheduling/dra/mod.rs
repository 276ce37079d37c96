//! DRA in `match`: can a pod's ResourceClaims be allocated on a node, and if not, why.
//!
//! The verdict is Kubernetes' structured allocator's (`k8s.io/dynamic-resource-allocation/
//! structured`, its `stable` implementation at v0.36.2, with the PrioritizedList,
//! PartitionableDevices, DeviceTaints and AdminAccess features): the node's pools gathered as
//! `GatherPools` does, then the same depth-first search over claims, requests (a
//! `firstAvailable` list tried in order) and devices, with its backtracking for
//! `matchAttribute` constraints, counters and the 32-device limit of a claim, and its errors (a
//! CEL runtime error, an unknown class, "all" devices from an incomplete pool). Pools are taken
//! in (driver, pool) order, where upstream takes them in Go's map order: the verdict is the same
//! except where a CEL error is reached in one order and a solution first in the other.
//! `distinctAttribute` (DRAConsumableCapacity, beyond `stable`) is checked as the incubating
//! allocator does: every device of the constrained requests has the attribute, each value once.
//!
//! The reason is ours: after a failed search, the first claim that cannot be allocated (with the
//! claims before it) and, for it, the first request whose candidate devices run out, stage by
//! stage: the class's selectors, the request's, `count`, device taints, devices already
//! allocated; then the claim's constraints, then the pod's other claims.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use cel::Value;

use super::cel::{self as dracel, DeviceInput, Selector};
use super::draobjects::{
    ClaimInfo, ClaimSpec, Constraint, ConstraintKind, DraSet, Mode, NodeSelection, SubRequest,
};
use super::fit::label_miss;
use super::objects::{NodeInfo, Term};
use crate::dra::Attr;

mod explain;
pub mod resolve;

/// `resourceapi.AllocationResultsMaxSize`.
pub const MAX_RESULTS: usize = 32;
/// The search is exhaustive, and can take longer than anyone waits (a claim after one of nine
/// interchangeable GPUs of sixteen backtracks over every choice of them): upstream's scheduler
/// stops it after 10 s (DRASchedulerFilterTimeout) and takes the node as unschedulable; here it
/// stops after this many steps, about a second.
pub const MAX_STEPS: u64 = 500_000;

/// A device: driver, pool, name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// Why a claim cannot be allocated on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// The pod names a claim or template that is nowhere.
    Missing(String),
    /// No ResourceSlice offers a device to this node.
    NoDevices,
    /// A selector (of `class`, or of the request when `None`) that left no device: each
    /// candidate device with the values it has of what the selector reads.
    Selector {
        class: Option<String>,
        index: usize,
        expression: String,
        seen: Vec<(String, String)>,
    },
    /// Fewer matching devices than the request needs (`need` None: `All` and none).
    TooFew { need: Option<i64>, have: usize },
    /// Devices matched but carry a taint the request does not tolerate.
    Taint { devices: Vec<(String, String)> },
    /// Devices matched but are allocated to other claims: (device, claim), and how many are
    /// left free.
    Allocated {
        devices: Vec<(String, String)>,
        free: usize,
        need: Option<i64>,
    },
    /// Enough devices for each request, none that satisfy this constraint together.
    Constraint { kind: String, attribute: String },
    /// The claim fits alone, not with the pod's claims before it.
    OtherClaims,
    /// The claim is already allocated, to devices not on this node.
    AllocatedElsewhere,
    /// A selector failed at run time (an attribute or capacity the device does not publish):
    /// upstream aborts the allocation.
    Unpublished {
        class: Option<String>,
        index: usize,
        expression: String,
        device: String,
        error: String,
    },
    /// Not tried: a claim before it cannot be allocated (the allocator stops there).
    NotReached,
    /// The search gave up after `MAX_STEPS` steps.
    TimedOut,
    /// Another error of the allocator (a class that does not exist, an invalid pool).
    Error(String),
}

impl Why {
    pub fn describe(&self) -> String {
        let owner = |class: &Option<String>| match class {
            Some(c) => format!("class {c}"),
            None => "the request".to_string(),
        };
        match self {
            Why::Missing(what) => format!("{what} not found"),
            Why::NoDevices => "no ResourceSlice offers devices to this node".into(),
            Why::Selector {
                class,
                index,
                expression,
                seen,
            } => {
                let mut s = format!(
                    "selector #{index} of {} matched no device: {expression}",
                    owner(class)
                );
                // Devices with the same values once: `type absent (8 devices)`.
                let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
                for (d, v) in seen {
                    match groups.iter_mut().find(|(gv, _)| *gv == v.as_str()) {
                        Some((_, ds)) => ds.push(d),
                        None => groups.push((v, vec![d])),
                    }
                }
                let list: Vec<String> = groups
                    .iter()
                    .map(|(v, ds)| {
                        let who = match ds.as_slice() {
                            [one] => one.to_string(),
                            many => format!("{} devices", many.len()),
                        };
                        if v.is_empty() {
                            who
                        } else {
                            format!("{v} ({who})")
                        }
                    })
                    .collect();
                if !list.is_empty() {
                    s.push_str(&format!("; candidates: {}", list.join("; ")));
                }
                s
            }
            Why::TooFew {
                need: Some(n),
                have,
            } => {
                format!("needs {n} device(s), {have} match")
            }
            Why::TooFew { need: None, have } => {
                format!("asks for all matching devices, {have} match")
            }
            Why::Taint { devices } => {
                let list: Vec<String> = devices.iter().map(|(d, t)| format!("{d} {t}")).collect();
                format!("device taint not tolerated: {}", list.join(", "))
            }
            Why::Allocated {
                devices,
                free,
                need,
            } => {
                let mut by: Vec<(&str, Vec<&str>)> = Vec::new();
                for (d, c) in devices {
                    let short = d.rsplit('/').next().unwrap_or(d);
                    match by.iter_mut().find(|(bc, _)| *bc == c.as_str()) {
                        Some((_, ds)) => ds.push(short),
                        None => by.push((c, vec![short])),
                    }
                }
                let list: Vec<String> = by
                    .iter()
                    .map(|(c, ds)| format!("{} by {c}", ds.join(", ")))
                    .collect();
                let want = match need {
                    Some(n) => format!("{n} needed"),
                    None => "all needed".to_string(),
                };
                format!(
                    "devices already allocated: {} ({free} free, {want})",
                    list.join("; ")
                )
            }
            Why::Constraint { kind, attribute } => {
                format!("no devices satisfy {kind} {attribute} together")
            }
            Why::OtherClaims => "its devices are taken by the pod's claims before it".into(),
            Why::AllocatedElsewhere => "already allocated to devices of another node".into(),
            Why::Unpublished {
                class,
                index,
                expression,
                device,
                error,
            } => format!(
                "selector #{index} of {} fails on {device} ({error}): a capacity/attribute not \
                 published; the allocation is aborted: {expression}",
                owner(class)
            ),
            Why::NotReached => "not tried: a claim before it cannot be allocated".into(),
            Why::TimedOut => format!(
                "the allocator's search gave up after {MAX_STEPS} steps (the scheduler stops it \
                 after 10 s and takes the node as unschedulable)"
            ),
            Why::Error(e) => e.clone(),
        }
    }

    /// What the scheduler says: `cannot allocate all claims`, or the allocator's error, as
    /// `Allocate` words it.
    pub fn scheduler_text(&self, claim: &str) -> String {
        match self {
            Why::Unpublished {
                class,
                index,
                error,
                ..
            } => match class {
                Some(c) => format!("class {c}: selector #{index}: CEL runtime error: {error}"),
                None => format!("claim {claim}: selector #{index}: CEL runtime error: {error}"),
            },
            Why::Error(e) => e.clone(),
            _ => "cannot allocate all claims".into(),
        }
    }

    /// A short name for scripts.
    pub fn code(&self) -> &'static str {
        match self {
            Why::Missing(_) => "ClaimNotFound",
            Why::NoDevices => "NoDevices",
            Why::Selector { class: Some(_), .. } => "ClassSelector",
            Why::Selector { class: None, .. } => "RequestSelector",
            Why::TooFew { .. } => "TooFewDevices",
            Why::Taint { .. } => "DeviceTaint",
            Why::Allocated { .. } => "AlreadyAllocated",
            Why::Constraint { .. } => "Constraint",
            Why::OtherClaims => "OtherClaims",
            Why::AllocatedElsewhere => "AllocatedElsewhere",
            Why::Unpublished { .. } => "NotPublished",
            Why::NotReached => "NotReached",
            Why::TimedOut => "TimedOut",
            Why::Error(_) => "Error",
        }
    }
}

/// One request (or subrequest) on a node: the devices it got, or why it got none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestVerdict {
    /// `req` or `req/sub`.
    pub name: String,
    pub devices: Vec<String>,
    pub why: Option<Why>,
}

/// One claim on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimVerdict {
    /// The pod's name for it (`spec.resourceClaims[].name`).
    pub name: String,
    /// The ResourceClaim or ResourceClaimTemplate it is.
    pub source: String,
    pub why: Option<Why>,
    pub requests: Vec<RequestVerdict>,
}

/// Every claim of a pod on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVerdict {
    pub claims: Vec<ClaimVerdict>,
}

impl NodeVerdict {
    pub fn fits(&self) -> bool {
        self.claims.iter().all(|c| c.why.is_none())
    }

    /// The first claim that does not fit, and why.
    pub fn first(&self) -> Option<(&ClaimVerdict, &Why)> {
        self.claims
            .iter()
            .find_map(|c| c.why.as_ref().map(|w| (c, w)))
    }
}

// ---------------------------------------------------------------------------------------------
// Prepared cluster state: shared by every node.

/// Each device's CEL value, by (slice, device).
type ValueCache = RefCell<HashMap<(usize, usize), Rc<Result<Value, String>>>>;
/// Each device's selector results, by (slice, device) and expression.
type ResultCache = RefCell<HashMap<(usize, usize), HashMap<String, Result<bool, String>>>>;
/// Counter set -> counter -> amount.
type Counters = BTreeMap<String, BTreeMap<String, i128>>;

/// The DRA objects, indexed for allocating on many nodes.
pub struct Dra<'a> {
    set: &'a DraSet,
    /// Slices by `spec.nodeName`; the others are checked on every node.
    by_node: HashMap<&'a str, Vec<usize>>,
    other: Vec<usize>,
    /// Slices per pool.
    by_pool: HashMap<(&'a str, &'a str), Vec<usize>>,
    classes: HashMap<&'a str, usize>,
    /// Devices allocated to claims (not admin access).
    allocated: BTreeMap<DeviceId, String>,
    /// The same, as (slice, device) indexes of the slices that publish them.
    allocated_at: std::collections::HashSet<(usize, usize)>,
    selectors: RefCell<HashMap<String, Rc<Result<Selector, String>>>>,
    domains: RefCell<BTreeSet<String>>,
    /// The CEL value of each device (by slice and index), built on first use.
    values: ValueCache,
    /// A selector's result on a device: pure, so kept across nodes.
    results: ResultCache,
}

impl<'a> Dra<'a> {
    pub fn new(set: &'a DraSet) -> Dra<'a> {
        let mut by_node: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut other = Vec::new();
        let mut by_pool: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
        for (i, s) in set.slices.iter().enumerate() {
            match (&s.nodes.node_name, s.shared_counters.is_empty()) {
                (Some(n), true) => by_node.entry(n.as_str()).or_default().push(i),
                _ => other.push(i),
            }
            by_pool
                .entry((s.driver.as_str(), s.pool.as_str()))
                .or_default()
                .push(i);
        }
        let classes = set
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_str(), i))
            .collect();
        let mut allocated = BTreeMap::new();
        for c in &set.claims {
            for d in c.allocation.iter().flatten() {
                if !d.admin_access {
                    allocated.insert(
                        DeviceId {
                            driver: d.driver.clone(),
                            pool: d.pool.clone(),
                            device: d.device.clone(),
                        },
                        claim_name(c),
                    );
                }
            }
        }
        let mut allocated_at = std::collections::HashSet::new();
        if !allocated.is_empty() {
            for (i, s) in set.slices.iter().enumerate() {
                for (j, d) in s.devices.iter().enumerate() {
                    let id = DeviceId {
                        driver: s.driver.clone(),
                        pool: s.pool.clone(),
                        device: d.name.clone(),
                    };
                    if allocated.contains_key(&id) {
                        allocated_at.insert((i, j));
                    }
                }
            }
        }
        let dra = Dra {
            set,
            allocated_at,
            by_node,
            other,
            by_pool,
            classes,
            allocated,
            selectors: RefCell::default(),
            domains: RefCell::default(),
            values: RefCell::default(),
            results: RefCell::default(),
        };
        // Every selector first, so that each device's value has every domain they index.
        for c in &set.classes {
            for s in &c.selectors {
                dra.selector(s);
            }
        }
        for spec in set
            .claims
            .iter()
            .map(|c| &c.spec)
            .chain(set.templates.iter().map(|t| &t.spec))
        {
            for r in &spec.requests {
                for s in r.exactly.iter().chain(&r.first_available) {
                    for x in &s.selectors {
                        dra.selector(x);
                    }
                }
            }
        }
        dra
    }

    fn selector(&self, text: &str) -> Rc<Result<Selector, String>> {
        if let Some(s) = self.selectors.borrow().get(text) {
            return s.clone();
        }
        let compiled = dracel::compile(text);
        if let Ok(s) = &compiled {
            let mut d = self.domains.borrow_mut();
            let before = d.len();
            d.extend(s.domains.iter().cloned());
            if d.len() != before {
                // A new domain: values built before lack it.
                self.values.borrow_mut().clear();
            }
        }
        let rc = Rc::new(compiled);
        self.selectors
            .borrow_mut()
            .insert(text.to_string(), rc.clone());
        rc
    }

    fn value(&self, slice: usize, index: usize) -> Rc<Result<Value, String>> {
        if let Some(v) = self.values.borrow().get(&(slice, index)) {
            return v.clone();
        }
        let s = &self.set.slices[slice];
        let d = &s.devices[index];
        let v = Rc::new(dracel::device_value(
            &DeviceInput {
                driver: &s.driver,
                attributes: &d.attributes,
                capacity: &d.capacity,
            },
            &self.domains.borrow(),
        ));
        self.values.borrow_mut().insert((slice, index), v.clone());
        v
    }

    /// One selector on one device: `Ok(bool)`, or the error upstream returns. The first time a
    /// device is asked about, every selector is evaluated on it (in one CEL scope); they are
    /// pure, so which of them the search reaches is unchanged.
    fn eval(&self, text: &str, slice: usize, index: usize) -> Result<bool, String> {
        if let Some(r) = self
            .results
            .borrow()
            .get(&(slice, index))
            .and_then(|m| m.get(text))
        {
            return r.clone();
        }
        let wanted = self.selector(text);
        let selectors: Vec<(String, Rc<Result<Selector, String>>)> = self
            .selectors
            .borrow()
            .iter()
            .map(|(t, s)| (t.clone(), s.clone()))
            .collect();
        let mut out: HashMap<String, Result<bool, String>> = HashMap::new();
        match &*self.value(slice, index) {
            Err(e) => {
                for (t, _) in &selectors {
                    out.insert(t.clone(), Err(e.clone()));
                }
            }
            Ok(v) => {
                let ok: Vec<(&String, &Selector)> = selectors
                    .iter()
                    .filter_map(|(t, s)| s.as_ref().as_ref().ok().map(|s| (t, s)))
                    .collect();
                let sels: Vec<&Selector> = ok.iter().map(|(_, s)| *s).collect();
                for ((t, _), r) in ok.iter().zip(dracel::eval_many(&sels, v)) {
                    out.insert((*t).clone(), r);
                }
                for (t, s) in &selectors {
                    if let Err(e) = &**s {
                        out.insert(t.clone(), Err(e.clone()));
                    }
                }
            }
        }
        let r = out.get(text).cloned().unwrap_or_else(|| match &*wanted {
            Err(e) => Err(e.clone()),
            Ok(_) => Ok(false),
        });
        self.results.borrow_mut().insert((slice, index), out);
        r
    }
}

fn claim_name(c: &ClaimInfo) -> String {
    match &c.namespace {
        Some(ns) => format!("{ns}/{}", c.name),
        None => c.name.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// Node selection and pools (GatherPools).

fn terms_match(terms: &[Term], node: &NodeInfo) -> bool {
    terms.iter().any(|t| {
        !t.is_empty()
            && t.expressions
                .iter()
                .all(|r| label_miss(r, node.labels.get(&r.key).map(String::as_str)).is_none())
            && t.fields.iter().all(|r| {
                r.key == "metadata.name"
                    && r.values.len() == 1
                    && match r.operator.as_str() {
                        "In" => r.values[0] == node.name,
                        "NotIn" => r.values[0] != node.name,
                        _ => false,
                    }
            })
    })
}

/// `NodeMatches`.
fn node_matches(sel: &NodeSelection, node: &NodeInfo) -> bool {
    if let Some(n) = &sel.node_name {
        return *n == node.name;
    }
    if sel.all_nodes {
        return true;
    }
    match &sel.selector {
        Some(terms) => terms_match(terms, node),
        None => false,
    }
}

struct Pool {
    driver: String,
    pool: String,
    incomplete: bool,
    invalid: Option<String>,
    /// Device slices targeting the node, in order.
    slices: Vec<usize>,
    /// Device slices of the pool not targeting the node (their allocated devices consume
    /// counters too).
    other_slices: Vec<usize>,
    counters: BTreeMap<String, BTreeMap<String, i128>>,
}

impl Dra<'_> {
    fn gather_pools(&self, node: &NodeInfo) -> Vec<Pool> {
        let slices = &self.set.slices;
        let mut pools: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
        let mut add = |i: usize| {
            let s = &slices[i];
            let e = pools.entry((&s.driver, &s.pool)).or_default();
            match e.first().map(|&f| slices[f].generation) {
                Some(g) if s.generation < g => {}
                Some(g) if s.generation > g => *e = vec![i],
                _ => e.push(i),
            }
        };
        let mut candidates: Vec<usize> = self
            .by_node
            .get(node.name.as_str())
            .cloned()
            .unwrap_or_default();
        candidates.extend(&self.other);
        candidates.sort_unstable();
        for i in candidates {
            let s = &slices[i];
            if !s.shared_counters.is_empty() {
                add(i);
            } else if s.nodes.is_set() {
                if node_matches(&s.nodes, node) {
                    add(i);
                }
            } else if s.per_device_nodes && s.devices.iter().any(|d| node_matches(&d.nodes, node)) {
                add(i);
            }
        }
        let mut out = Vec::new();
        for ((driver, pool), list) in pools {
            let first = &slices[list[0]];
            let mut all = None;
            if list.len() as i64 != first.slice_count {
                // checkSlicesInPool over every slice of the pool.
                let mut same = Vec::new();
                let mut obsolete = false;
                for &j in self.by_pool.get(&(driver, pool)).into_iter().flatten() {
                    let g = slices[j].generation;
                    if g == first.generation {
                        same.push(j);
                    } else if g > first.generation {
                        obsolete = true;
                        break;
                    }
                }
                if obsolete {
                    continue;
                }
                if same.len() as i64 != first.slice_count {
                    out.push(Pool {
                        driver: driver.into(),
                        pool: pool.into(),
                        incomplete: true,
                        invalid: None,
                        slices: Vec::new(),
                        other_slices: Vec::new(),
                        counters: BTreeMap::new(),
                    });
                    continue;
                }
                all = Some(same);
            }
            out.push(self.build_pool(driver, pool, &list, all));
        }
        out
    }

    fn build_pool(
        &self,
        driver: &str,
        pool: &str,
        list: &[usize],
        all: Option<Vec<usize>>,
    ) -> Pool {
        let slices = &self.set.slices;
        let (counter_slices, device_slices): (Vec<usize>, Vec<usize>) = list
            .iter()
            .partition(|&&i| !slices[i].shared_counters.is_empty());
        let mut p = Pool {
            driver: driver.into(),
            pool: pool.into(),
            incomplete: false,
            invalid: None,
            slices: device_slices.clone(),
            other_slices: Vec::new(),
            counters: BTreeMap::new(),
        };
        let mut names = BTreeSet::new();
        for &i in &device_slices {
            for d in &slices[i].devices {
                if !names.insert(d.name.as_str()) {
                    p.invalid = Some(format!("duplicate device name {}", d.name));
                    return p;
                }
            }
        }
        for &i in &counter_slices {
            for (name, cs) in &slices[i].shared_counters {
                if p.counters.insert(name.clone(), cs.clone()).is_some() {
                    p.invalid = Some(format!("duplicate counter set name {name}"));
                    return p;
                }
            }
        }
        let check = |p: &Pool, ids: &[usize]| -> Option<String> {
            for &i in ids {
                for d in &slices[i].devices {
                    for (set, cs) in &d.consumes {
                        let Some(have) = p.counters.get(set) else {
                            return Some(format!("counter set {set} not found"));
                        };
                        for c in cs.keys() {
                            if !have.contains_key(c) {
                                return Some(format!("counter {c} not found in counter set {set}"));
                            }
                        }
                    }
                }
            }
            None
        };
        if let Some(e) = check(&p, list) {
            p.invalid = Some(e);
            return p;
        }
        if let Some(all) = all
            && all.len() != list.len()
        {
            let mine: BTreeSet<&str> = list.iter().map(|&i| slices[i].name.as_str()).collect();
            p.other_slices = all
                .into_iter()
                .filter(|&i| !mine.contains(slices[i].name.as_str()))
                .collect();
            if let Some(e) = check(&p, &p.other_slices) {
                p.invalid = Some(e);
            }
        }
        p
    }
}

// ---------------------------------------------------------------------------------------------
// The search (allocateOne).

/// A resolved claim of the pod, ready to allocate.
#[derive(Debug, Clone)]
pub struct PodClaimSpec {
    pub name: String,
    pub source: String,
    pub spec: ClaimSpec,
    /// Already allocated: its devices.
    pub allocated: Option<Vec<DeviceId>>,
}

/// A constraint's state during the search, as upstream keeps it: how many devices it holds;
/// `matchAttribute` the first one's value, `distinctAttribute` one value per request name (the
/// incubating allocator's map: a request's later device replaces its earlier one, and removing
/// one removes the request's entry).
#[derive(Debug, Clone, Default)]
struct CState {
    num: usize,
    first: Option<Attr>,
    by_request: Vec<(String, Attr)>,
}

struct ReqData<'s> {
    req: &'s SubRequest,
    /// `Some(parent name)` for a subrequest.
    parent: Option<&'s str>,
    num: usize,
    all: Vec<(usize, usize, usize)>,
    /// Whether each of the node's devices (by position) is selectable: upstream's
    /// `deviceMatchesRequest`, kept for the search.
    matches: Vec<Option<bool>>,
}

impl ReqData<'_> {
    fn full_name(&self) -> String {
        match self.parent {
            Some(p) => format!("{p}/{}", self.req.name),
            None => self.req.name.clone(),
        }
    }
}

/// The search's failure: upstream's errors.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fail {
    /// A CEL error: (class or None, selector index, expression, device, error).
    Cel(Option<String>, usize, String, String, String),
    Other(String),
    MaxSize,
    TimedOut,
}

struct Search<'d, 's> {
    dra: &'d Dra<'d>,
    node: &'d NodeInfo,
    pools: &'d [Pool],
    claims: &'s [&'s PodClaimSpec],
    /// Per claim: per request: one entry (exact) or one per subrequest.
    reqs: Vec<Vec<Vec<ReqData<'s>>>>,
    /// Constraint state per claim: (constraint, devices' values added).
    constraints: Vec<Vec<(&'s Constraint, CState)>>,
    /// Devices (slice, index) being allocated, to the claims (indexes) they are for.
    allocating: HashMap<(usize, usize), BTreeSet<usize>>,
    consumed: BTreeMap<(String, String), BTreeMap<String, i128>>,
    available: RefCell<HashMap<usize, Counters>>,
    /// Per claim: (request, subrequest, slice, device) allocated so far.
    result: Vec<Vec<(usize, usize, usize, usize)>>,
    /// Per claim, per request: the subrequest picked.
    picked: Vec<BTreeMap<usize, usize>>,
    /// Matches cached for this search (upstream's deviceMatchesRequest).
    steps: u64,
}

/// The node's devices: (pool index, slice, device index), in pool order.
fn node_devices(pools: &[Pool], dra: &Dra) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    for (p, pool) in pools.iter().enumerate() {
        if pool.incomplete || pool.invalid.is_some() {
            continue;
        }
        for &s in &pool.slices {
            for d in 0..dra.set.slices[s].devices.len() {
                out.push((p, s, d));
            }
        }
    }
    out
}

/// Whether a constraint covers a request (or one of a `firstAvailable`'s subrequests): all
/// requests when it names none.
fn applies(c: &Constraint, base: &str, sub: Option<&str>) -> bool {
    c.requests.is_empty()
        || c.requests.iter().any(|r| {
            r == base
                || sub.is_some_and(|s| {
                    r.len() == base.len() + 1 + s.len()
                        && r.starts_with(base)
                        && r[base.len()..].starts_with('/')
                        && r.ends_with(s)
                })
        })
}

fn lookup_attr<'x>(
    attrs: &'x BTreeMap<String, Attr>,
    driver: &str,
    name: &str,
) -> Option<&'x Attr> {
    if let Some(a) = attrs.get(name) {
        return Some(a);
    }
    let (domain, id) = name.split_once('/')?;
    if domain != driver {
        return None;
    }
    attrs.get(id)
}

impl<'d, 's> Search<'d, 's> {
    fn id(&self, s: usize, d: usize) -> DeviceId {
        let slice = &self.dra.set.slices[s];
        DeviceId {
            driver: slice.driver.clone(),
            pool: slice.pool.clone(),
            device: slice.devices[d].name.clone(),
        }
    }

    /// `isSelectable`: the class's selectors, then the request's, then per-device nodes.
    fn selectable(&self, rd: &ReqData, s: usize, d: usize) -> Result<bool, Fail> {
        let slice = &self.dra.set.slices[s];
        let dev = &slice.devices[d];
        if dev.binding_conditions {
            return Ok(false);
        }
        let class = &self.dra.set.classes[self.dra.classes[rd.req.class.as_str()]];
        for (owner, list) in [
            (Some(class.name.clone()), &class.selectors),
            (None, &rd.req.selectors),
        ] {
            for (i, expr) in list.iter().enumerate() {
                match self.dra.eval(expr, s, d) {
                    Ok(true) => {}
                    Ok(false) => return Ok(false),
                    Err(e) => {
                        return Err(Fail::Cel(
                            owner,
                            i,
                            expr.clone(),
                            self.id(s, d).to_string(),
                            e,
                        ));
                    }
                }
            }
        }
        if slice.per_device_nodes && !node_matches(&dev.nodes, self.node) {
            return Ok(false);
        }
        Ok(true)
    }

    fn in_use(&self, s: usize, d: usize) -> bool {
        self.dra.allocated_at.contains(&(s, d))
            || self.allocating.get(&(s, d)).is_some_and(|c| !c.is_empty())
    }

    fn tainted(&self, rd: &ReqData, s: usize, d: usize) -> bool {
        self.dra.set.slices[s].devices[d].taints.iter().any(|t| {
            matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
                && !rd.req.tolerations.iter().any(|tol| tol.tolerates(t))
        })
    }

    fn available_counters(&self, p: usize) -> Counters {
        if let Some(a) = self.available.borrow().get(&p) {
            return a.clone();
        }
        let pool = &self.pools[p];
        let mut avail = pool.counters.clone();
        for &s in pool.slices.iter().chain(&pool.other_slices) {
            for (d, dev) in self.dra.set.slices[s].devices.iter().enumerate() {
                if !self.dra.allocated_at.contains(&(s, d)) {
                    continue;
                }
                for (set, cs) in &dev.consumes {
                    if let Some(a) = avail.get_mut(set) {
                        for (c, v) in cs {
                            if let Some(x) = a.get_mut(c) {
                                *x -= v;
                            }
                        }
                    }
                }
            }
        }
        self.available.borrow_mut().insert(p, avail.clone());
        avail
    }

    fn consume(&mut self, p: usize, s: usize, d: usize, sign: i128) {
        let pool = self.pools[p].pool.clone();
        let driver = self.pools[p].driver.clone();
        for (set, cs) in &self.dra.set.slices[s].devices[d].consumes {
            let e = self
                .consumed
                .entry((format!("{driver}/{pool}"), set.clone()))
                .or_default();
            for (c, v) in cs {
                *e.entry(c.clone()).or_default() += sign * v;
            }
        }
    }

    fn counters_ok(&mut self, p: usize, s: usize, d: usize) -> bool {
        if self.dra.set.slices[s].devices[d].consumes.is_empty() {
            return true;
        }
        let avail = self.available_counters(p);
        self.consume(p, s, d, 1);
        let key = format!("{}/{}", self.pools[p].driver, self.pools[p].pool);
        for (set, cs) in &avail {
            let used = self.consumed.get(&(key.clone(), set.clone()));
            for (c, v) in cs {
                let u = used.and_then(|m| m.get(c)).copied().unwrap_or(0);
                if *v < u {
                    self.consume(p, s, d, -1);
                    return false;
                }
            }
        }
        true
    }

    /// `allocateDevice`: availability, counters, taints, constraints; true when taken.
    fn take(
        &mut self,
        ci: usize,
        ri: usize,
        si: usize,
        (p, s, d): (usize, usize, usize),
        must: bool,
    ) -> Result<bool, Fail> {
        let req: &'s SubRequest = self.reqs[ci][ri][si].req;
        let parent: Option<&'s str> = self.reqs[ci][ri][si].parent;
        let admin = req.admin_access;
        if admin
            && self
                .allocating
                .get(&(s, d))
                .is_some_and(|c| c.contains(&ci))
        {
            return Ok(false);
        }
        if !admin && self.in_use(s, d) {
            return Ok(false);
        }
        if !self.counters_ok(p, s, d) {
            return Ok(false);
        }
        let rd = &self.reqs[ci][ri][si];
        // Upstream returns here (and on a constraint below) without giving back the counters
        // the candidate just consumed: they stay consumed for the rest of the search, which
        // can make a later candidate short of counters. Kept, for the same verdicts.
        if self.tainted(rd, s, d) {
            return Ok(false);
        }
        let (base, sub): (&str, Option<&str>) = match parent {
            Some(parent) => (parent, Some(&req.name)),
            None => (&req.name, None),
        };
        let dra = self.dra;
        let device = &dra.set.slices[s].devices[d];
        let driver = &dra.set.slices[s].driver;
        let n = self.constraints[ci].len();
        for k in 0..n {
            let (c, st) = &mut self.constraints[ci][k];
            if !applies(c, base, sub) {
                continue;
            }
            let attr = lookup_attr(&device.attributes, driver, &c.attribute);
            let ok = match attr {
                None => false,
                Some(_) if st.num == 0 => true,
                Some(a) => match c.kind {
                    ConstraintKind::MatchAttribute => st.first.as_ref() == Some(a),
                    ConstraintKind::DistinctAttribute => !st.by_request.iter().any(|(_, v)| v == a),
                },
            };
            if !ok {
                if must {
                    return Err(Fail::Other(format!(
                        "claim {}, request {}: cannot add device {} because a claim constraint \
                         would not be satisfied",
                        self.claims[ci].name,
                        req.name,
                        dra.device_id(s, d)
                    )));
                }
                for j in 0..k {
                    self.unconstrain(ci, j, base, sub);
                }
                return Ok(false);
            }
            if let Some(a) = attr {
                if st.num == 0 {
                    st.first = Some(a.clone());
                }
                st.num += 1;
                match st.by_request.iter_mut().find(|(r, _)| r == base) {
                    Some(e) => e.1 = a.clone(),
                    None => st.by_request.push((base.to_string(), a.clone())),
                }
            }
        }
        self.allocating.entry((s, d)).or_default().insert(ci);
        self.result[ci].push((ri, si, s, d));
        Ok(true)
    }

    fn unconstrain(&mut self, ci: usize, k: usize, base: &str, sub: Option<&str>) {
        let (c, st) = &mut self.constraints[ci][k];
        if applies(c, base, sub) {
            st.num = st.num.saturating_sub(1);
            st.by_request.retain(|(r, _)| r != base);
        }
    }

    fn untake(&mut self, ci: usize, ri: usize, si: usize, (p, s, d): (usize, usize, usize)) {
        let req: &'s SubRequest = self.reqs[ci][ri][si].req;
        let (base, sub): (&str, Option<&str>) = match self.reqs[ci][ri][si].parent {
            Some(parent) => (parent, Some(&req.name)),
            None => (&req.name, None),
        };
        for k in 0..self.constraints[ci].len() {
            self.unconstrain(ci, k, base, sub);
        }
        if let Some(c) = self.allocating.get_mut(&(s, d)) {
            c.remove(&ci);
        }
        if !self.dra.set.slices[s].devices[d].consumes.is_empty() {
            self.consume(p, s, d, -1);
        }
        self.result[ci].pop();
    }

    /// `allocateOne`.
    fn one(
        &mut self,
        ci: usize,
        ri: usize,
        si: usize,
        di: usize,
        in_sub: bool,
        devices: &[(usize, usize, usize)],
    ) -> Result<bool, Fail> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(Fail::TimedOut);
        }
        if ci >= self.claims.len() {
            return Ok(true);
        }
        if ri >= self.reqs[ci].len() {
            return match self.one(ci + 1, 0, 0, 0, false, devices) {
                Err(Fail::MaxSize) => Ok(false),
                r => r,
            };
        }
        let is_sub = self.reqs[ci][ri][0].parent.is_some();
        if !in_sub && is_sub {
            let mut all_exceeded = true;
            for sub in 0..self.reqs[ci][ri].len() {
                match self.one(ci, ri, sub, di, true, devices) {
                    Err(Fail::MaxSize) => continue,
                    Err(e) => return Err(e),
                    Ok(true) => {
                        self.picked[ci].insert(ri, sub);
                        return Ok(true);
                    }
                    Ok(false) => all_exceeded = false,
                }
            }
            return if all_exceeded {
                Err(Fail::MaxSize)
            } else {
                Ok(false)
            };
        }
        let rd = &self.reqs[ci][ri][si];
        let all = rd.req.mode == Mode::All;
        if all && rd.all.is_empty() {
            return Ok(false);
        }
        if di >= rd.num {
            return self.one(ci, ri + 1, 0, 0, false, devices);
        }
        if self.result[ci].len() + rd.num - di > MAX_RESULTS {
            return Err(Fail::MaxSize);
        }
        if all {
            let dev = rd.all[di];
            if !self.take(ci, ri, si, dev, true)? {
                return Ok(false);
            }
            return match self.one(ci, ri, si, di + 1, in_sub, devices) {
                Ok(true) => Ok(true),
                r => {
                    self.untake(ci, ri, si, dev);
                    r
                }
            };
        }
        for (pos, &(p, s, d)) in devices.iter().enumerate() {
            let rd = &self.reqs[ci][ri][si];
            if rd.req.admin_access {
                if self
                    .allocating
                    .get(&(s, d))
                    .is_some_and(|c| c.contains(&ci))
                {
                    continue;
                }
            } else if self.in_use(s, d) {
                continue;
            }
            let selectable = match rd.matches[pos] {
                Some(m) => m,
                None => {
                    let m = self.selectable(rd, s, d)?;
                    self.reqs[ci][ri][si].matches[pos] = Some(m);
                    m
                }
            };
            if !selectable {
                continue;
            }
            if !self.take(ci, ri, si, (p, s, d), false)? {
                continue;
            }
            match self.one(ci, ri, si, di + 1, in_sub, devices) {
                Ok(true) => return Ok(true),
                Ok(false) => self.untake(ci, ri, si, (p, s, d)),
                Err(e) => {
                    self.untake(ci, ri, si, (p, s, d));
                    return Err(e);
                }
            }
        }
        Ok(false)
    }
}

/// What one search over a set of claims gave.
enum Outcome {
    Done(Vec<Vec<(String, DeviceId)>>),
    NotFound,
    Failed(Fail),
}

impl Dra<'_> {
    /// `Allocate` for `claims` (none allocated) on `node`.
    fn allocate(
        &self,
        node: &NodeInfo,
        pools: &[Pool],
        claims: &[&PodClaimSpec],
        skip_constraints: bool,
    ) -> Outcome {
        let devices = node_devices(pools, self);
        let mut reqs = Vec::new();
        let mut constraints = Vec::new();
        for c in claims {
            let mut per = Vec::new();
            for r in &c.spec.requests {
                let subs = r.alternatives();
                let mut list = Vec::new();
                for (req, parent) in subs {
                    if !self.classes.contains_key(req.class.as_str()) {
                        return Outcome::Failed(Fail::Other(format!(
                            "claim {}, request {}: could not retrieve device class {}: \
                             deviceclass.resource.k8s.io \"{}\" not found",
                            c.name, req.name, req.class, req.class
                        )));
                    }
                    let mut rd = ReqData {
                        req,
                        parent,
                        num: 0,
                        all: Vec::new(),
                        matches: vec![None; devices.len()],
                    };
                    match req.mode {
                        Mode::Exact(n) => rd.num = n.max(0) as usize,
                        Mode::All => {
                            for pool in pools {
                                if pool.incomplete {
                                    return Outcome::Failed(Fail::Other(format!(
                                        "claim {}, request {}: asks for all devices, but resource \
                                         pool {}/{} is currently being updated",
                                        c.name, req.name, pool.driver, pool.pool
                                    )));
                                }
                                if pool.invalid.is_some() {
                                    return Outcome::Failed(Fail::Other(format!(
                                        "claim {}, request {}: asks for all devices, but resource \
                                         pool {}/{} is currently invalid",
                                        c.name, req.name, pool.driver, pool.pool
                                    )));
                                }
                            }
                            let probe = Search {
                                dra: self,
                                node,
                                pools,
                                claims,
                                reqs: Vec::new(),
                                constraints: Vec::new(),
                                allocating: HashMap::new(),
                                consumed: BTreeMap::new(),
                                available: RefCell::default(),
                                result: Vec::new(),
                                picked: Vec::new(),
                                steps: 0,
                            };
                            for &(p, s, d) in &devices {
                                match probe.selectable(&rd, s, d) {
                                    Ok(true) => rd.all.push((p, s, d)),
                                    Ok(false) => {}
                                    Err(e) => return Outcome::Failed(e),
                                }
                            }
                            rd.num = rd.all.len();
                        }
                    }
                    list.push(rd);
                }
                per.push(list);
            }
            let min: usize = per
                .iter()
                .map(|l| l.iter().map(|r| r.num).min().unwrap_or(0))
                .sum();
            if min > MAX_RESULTS {
                return Outcome::Failed(Fail::Other(format!(
                    "claim {}: number of requested devices {min} exceeds the claim limit of \
                     {MAX_RESULTS}",
                    c.name
                )));
            }
            reqs.push(per);
            constraints.push(if skip_constraints {
                Vec::new()
            } else {
                c.spec
                    .constraints
                    .iter()
                    .map(|k| (k, CState::default()))
                    .collect()
            });
        }
        let mut search = Search {
            dra: self,
            node,
            pools,
            claims,
            reqs,
            constraints,
            allocating: HashMap::new(),
            consumed: BTreeMap::new(),
            available: RefCell::default(),
            result: vec![Vec::new(); claims.len()],
            picked: vec![BTreeMap::new(); claims.len()],
            steps: 0,
        };
        match search.one(0, 0, 0, 0, false, &devices) {
            Ok(true) => Outcome::Done(
                search
                    .result
                    .iter()
                    .enumerate()
                    .map(|(ci, r)| {
                        r.iter()
                            .map(|&(ri, si, s, d)| {
                                (search.reqs[ci][ri][si].full_name(), self.device_id(s, d))
                            })
                            .collect()
                    })
                    .collect(),
            ),
            Ok(false) | Err(Fail::MaxSize) => {
                if let Some(p) = pools.iter().find(|p| p.invalid.is_some()) {
                    return Outcome::Failed(Fail::Other(format!(
                        "invalid resource pools were encountered ({}/{}: {})",
                        p.driver,
                        p.pool,
                        p.invalid.as_deref().unwrap_or_default()
                    )));
                }
                Outcome::NotFound
            }
            Err(e) => Outcome::Failed(e),
        }
    }

    /// Every claim of a pod on one node: the allocator's verdict and, where it fails, why.
    pub fn evaluate(
        &self,
        node: &NodeInfo,
        claims: &[Result<PodClaimSpec, (String, Box<Why>)>],
    ) -> NodeVerdict {
        let pools = self.gather_pools(node);
        let mut verdicts: Vec<ClaimVerdict> = Vec::new();
        let mut to_allocate: Vec<&PodClaimSpec> = Vec::new();
        let mut slots: Vec<usize> = Vec::new();
        for c in claims {
            match c {
                Err((name, why)) => verdicts.push(ClaimVerdict {
                    name: name.clone(),
                    source: String::new(),
                    why: Some((**why).clone()),
                    requests: Vec::new(),
                }),
                Ok(spec) => {
                    let mut v = ClaimVerdict {
                        name: spec.name.clone(),
                        source: spec.source.clone(),
                        why: None,
                        requests: Vec::new(),
                    };
                    if let Some(devs) = &spec.allocated {
                        // Allocated: its devices must be offered to this node.
                        let here: BTreeSet<DeviceId> = node_devices(&pools, self)
                            .into_iter()
                            .map(|(_, s, d)| self.device_id(s, d))
                            .collect();
                        if !devs.iter().all(|d| here.contains(d)) {
                            v.why = Some(Why::AllocatedElsewhere);
                        }
                    } else {
                        slots.push(verdicts.len());
                        to_allocate.push(spec);
                    }
                    verdicts.push(v);
                }
            }
        }
        if to_allocate.is_empty() {
            return NodeVerdict { claims: verdicts };
        }
        match self.allocate(node, &pools, &to_allocate, false) {
            Outcome::Done(results) => {
                for (k, r) in results.into_iter().enumerate() {
                    let v = &mut verdicts[slots[k]];
                    let mut by_req: BTreeMap<String, Vec<String>> = BTreeMap::new();
                    let mut order = Vec::new();
                    for (req, id) in r {
                        if !by_req.contains_key(&req) {
                            order.push(req.clone());
                        }
                        by_req.entry(req).or_default().push(id.to_string());
                    }
                    v.requests = order
                        .into_iter()
                        .map(|name| RequestVerdict {
                            devices: by_req.remove(&name).unwrap_or_default(),
                            name,
                            why: None,
                        })
                        .collect();
                }
            }
            Outcome::Failed(f) => {
                // Upstream aborts the whole allocation: named on the claim the error is of,
                // else on the first.
                let why = fail_why(&f);
                let k = match &f {
                    Fail::Other(m) => to_allocate
                        .iter()
                        .position(|c| {
                            m.starts_with(&format!("claim {},", c.name))
                                || m.starts_with(&format!("claim {}:", c.name))
                        })
                        .unwrap_or(0),
                    // The whole search gave up: named on the first claim.
                    Fail::TimedOut => 0,
                    _ => self
                        .claim_of_cel_error(node, &pools, &to_allocate)
                        .unwrap_or(0),
                };
                verdicts[slots[k]].why = Some(why);
                for &later in &slots[k + 1..] {
                    verdicts[later].why = Some(Why::NotReached);
                }
            }
            Outcome::NotFound => {
                self.explain(node, &pools, &to_allocate, &slots, &mut verdicts);
            }
        }
        NodeVerdict { claims: verdicts }
    }

    fn device_id(&self, s: usize, d: usize) -> DeviceId {
        let slice = &self.set.slices[s];
        DeviceId {
            driver: slice.driver.clone(),
            pool: slice.pool.clone(),
            device: slice.devices[d].name.clone(),
        }
    }

    /// The claim whose selector errs: the first prefix of claims that errs alone.
    fn claim_of_cel_error(
        &self,
        node: &NodeInfo,
        pools: &[Pool],
        claims: &[&PodClaimSpec],
    ) -> Option<usize> {
        (1..=claims.len()).find_map(|n| {
            matches!(
                self.allocate(node, pools, &claims[..n], false),
                Outcome::Failed(_)
            )
            .then_some(n - 1)
        })
    }
}

fn fail_why(f: &Fail) -> Why {
    match f {
        Fail::Cel(class, index, expression, device, error) => Why::Unpublished {
            class: class.clone(),
            index: *index,
            expression: expression.clone(),
            device: device.clone(),
            error: error.clone(),
        },
        Fail::Other(m) => Why::Error(m.clone()),
        Fail::MaxSize => Why::Error(format!("more than {MAX_RESULTS} devices")),
        Fail::TimedOut => Why::TimedOut,
    }
}
