//! A fake Kubernetes API server for the daemon's tests and the fleet bench (which includes this
//! file with `#[path]`), plus the helpers that run the real binary against it.
//!
//! It implements what the agent relies on, with the real semantics:
//! - `GET /api/v1/nodes?watch=true&fieldSelector=metadata.name=N`: a watch of that Node
//!   (ADDED, then MODIFIED on every change, until `timeoutSeconds`);
//! - `GET /api/v1/nodes` (a list, `limit` and `continue` paged, name order) and
//!   `GET /api/v1/nodes/{name}`: the Node with `metadata.labels`, `annotations`,
//!   `managedFields` (FieldsV1, per manager and operation) and `resourceVersion`;
//! - `PATCH` with `application/apply-patch+yaml` (JSON or YAML body), `fieldManager` and `force`:
//!   each manager owns the label and annotation keys it applies; a key it stops applying is
//!   removed unless another manager owns it too; a key owned by another manager with a different
//!   value is a 409 Conflict with a Status body like the real one (unless `force`);
//! - `PATCH` with `application/merge-patch+json` from another controller (operation `Update`);
//! - `resourceVersion` bumps on every change and not on a no-op apply;
//! - `GET`/apply `PATCH` of NFD `NodeFeature` objects under
//!   `/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{ns}/nodefeatures/{name}` (created by apply).
//!
//! Faults can be injected: N answers of 500, N of 409, N slow answers, N dropped connections,
//! and "down at start" (reserve a port, start the server on it later). Every request is
//! recorded (method, path, query, content type, body, the fault it got).
//!
//! In proxy mode ([`FakeApiServer::proxy_to`]) it holds no objects: it injects its faults and
//! forwards every other request to Kubernetes' own test API server (tests/kube), which is how
//! the daemon's fault tests meet real semantics. Its own imitation is left to the tests that
//! need numbers or shapes the real server cannot be made to produce here (the fleet and soak
//! benches' thousand agents, the health and event tests that count its recorded requests).
//!
//! Simplifications: apply does not create Nodes (kubelet does), ownership is tracked only for
//! `metadata.labels` and `metadata.annotations`, and NodeFeature objects have a single owner.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use serde_json::{Value, json};
use std::future::Future;
use std::pin::Pin;

pub const MANAGER: &str = "gpu-labeler";
const NFD_PREFIX: &str = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/";

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub body: String,
    /// The injected fault it got, if any: `500`, `409`, `slow`, `drop`.
    pub fault: Option<&'static str>,
    pub at: Instant,
}

impl Recorded {
    pub fn is_watch(&self) -> bool {
        self.method == "GET" && query_param(&self.query, "watch") == Some("true")
    }

    pub fn is_write(&self) -> bool {
        self.method == "PATCH" && self.fault.is_none()
    }

    pub fn body_json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// What one manager owns on a Node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Managed {
    /// `Apply` or `Update`.
    pub operation: String,
    pub labels: BTreeSet<String>,
    pub annotations: BTreeSet<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeObj {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// (manager, operation) -> owned keys.
    pub managers: BTreeMap<(String, String), Managed>,
    pub resource_version: u64,
    /// `spec` and `status` as kubelet and the node controller write them (taints,
    /// allocatable); `null` reads as `{}`.
    pub spec: Value,
    pub status: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeFeatureObj {
    pub object: Value,
    pub manager: String,
    pub resource_version: u64,
}

/// Faults to inject, each for the next N requests (drop first, then 500, 409, 429, huge,
/// endless, slow).
#[derive(Debug, Clone, Default)]
pub struct Faults {
    pub error_500: usize,
    /// "The object has been modified" (optimistic concurrency), not a field conflict.
    pub conflict_409: usize,
    /// 429 Too Many Requests with `Retry-After: retry_after_secs` (header and Status details,
    /// as the API server's max-in-flight filter answers).
    pub throttle_429: usize,
    pub retry_after_secs: u32,
    /// A 200 whose body is 64 MiB (a Node with an enormous annotation), sent as fast as the
    /// connection takes it.
    pub huge_body: usize,
    /// A 200 whose body is not JSON (a proxy's error page).
    pub garbage: usize,
    /// A 200 whose body starts and never ends (a byte every 50 ms).
    pub endless_body: usize,
    pub drop: usize,
    pub slow: usize,
    pub slow_for: Duration,
    /// Only requests with this method get faults (None: all).
    pub only_method: Option<String>,
    /// What every Node watch gets while set (the faults above are for the publish path).
    pub watch: Option<WatchFault>,
}

/// A misbehaving watch stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchFault {
    /// A 200 whose lines are not watch events, then the end of the stream (a proxy that
    /// answers with its own error page, a stream cut and garbled).
    Garbage,
    /// One event line of this many bytes (a Node with an enormous annotation), then nothing
    /// until the watch's timeout.
    Huge(usize),
}

#[derive(Debug, Default)]
pub struct State {
    pub nodes: BTreeMap<String, NodeObj>,
    pub nodefeatures: BTreeMap<(String, String), NodeFeatureObj>,
    pub requests: Vec<Recorded>,
    pub faults: Faults,
    /// When set, a proxy: a request without a fault goes to the API server of this kubeconfig
    /// (tests/kube: Kubernetes' own), and its answer, a watch's stream included, comes back as
    /// the server sent it. The faults are injected in front of real semantics.
    pub upstream: Option<PathBuf>,
    /// Bumped on any change, shared by all objects like etcd's revision.
    revision: u64,
}

type Reply = Response<UnsyncBoxBody<Bytes, std::io::Error>>;

fn full(bytes: impl Into<Bytes>) -> UnsyncBoxBody<Bytes, std::io::Error> {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn reply(code: u16, body: &Value) -> Reply {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(full(body.to_string()))
        .expect("valid response")
}

/// A body that starts like a Node and never ends: one space every 50 ms.
struct Endless {
    started: bool,
    next: Pin<Box<tokio::time::Sleep>>,
}

impl hyper::body::Body for Endless {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, std::io::Error>>> {
        if !self.started {
            self.started = true;
            let head =
                Bytes::from_static(b"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":");
            return std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(head))));
        }
        match self.next.as_mut().poll(cx) {
            std::task::Poll::Pending => std::task::Poll::Pending,
            std::task::Poll::Ready(()) => {
                let at = tokio::time::Instant::now() + Duration::from_millis(50);
                self.next.as_mut().reset(at);
                std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from_static(b" ")))))
            }
        }
    }
}

/// A watch of one Node (`GET /api/v1/nodes?watch=true&fieldSelector=metadata.name=N`), as the
/// real server streams it: from resourceVersion 0, an ADDED event with the Node as it is; then
/// a MODIFIED event (the whole object) each time its resourceVersion moves; the stream ends
/// after `timeoutSeconds`.
struct Watch {
    state: Arc<Mutex<State>>,
    node: String,
    sent: Option<u64>,
    end: tokio::time::Instant,
    tick: Pin<Box<tokio::time::Sleep>>,
}

impl hyper::body::Body for Watch {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, std::io::Error>>> {
        loop {
            if tokio::time::Instant::now() >= self.end {
                return std::task::Poll::Ready(None);
            }
            let event = {
                let st = self.state.lock().expect("state");
                st.nodes.get(&self.node).and_then(|n| {
                    let kind = match self.sent {
                        None => "ADDED",
                        Some(rv) if n.resource_version > rv => "MODIFIED",
                        Some(_) => return None,
                    };
                    Some((n.resource_version, kind, n.to_json(&self.node)))
                })
            };
            if let Some((rv, kind, object)) = event {
                self.sent = Some(rv);
                let line = json!({"type": kind, "object": object}).to_string() + "\n";
                return std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from(
                    line,
                )))));
            }
            match self.tick.as_mut().poll(cx) {
                std::task::Poll::Pending => return std::task::Poll::Pending,
                std::task::Poll::Ready(()) => {
                    let at = tokio::time::Instant::now() + Duration::from_millis(20);
                    self.tick.as_mut().reset(at);
                }
            }
        }
    }
}

/// 64 MiB of a Node: a valid object whose annotation no agent should ever buffer. Made once
/// (and cheaply: an unoptimised test build would take seconds per character loop).
pub fn huge_node() -> Bytes {
    static HUGE: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    HUGE.get_or_init(|| {
        let head =
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"huge","annotations":{"a":""#;
        let mut v = Vec::with_capacity((64 << 20) + 128);
        v.extend_from_slice(head.as_bytes());
        v.resize(v.len() + (64 << 20), b'x');
        v.extend_from_slice(br#""}}}"#);
        Bytes::from(v)
    })
    .clone()
}

fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Reply {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code});
    if let Some(d) = details {
        s["details"] = d;
    }
    reply(code, &s)
}

fn query_param<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

fn fields_v1(m: &Managed) -> Value {
    let mut meta = serde_json::Map::new();
    for (field, keys) in [("f:labels", &m.labels), ("f:annotations", &m.annotations)] {
        if !keys.is_empty() {
            let f: serde_json::Map<String, Value> =
                keys.iter().map(|k| (format!("f:{k}"), json!({}))).collect();
            meta.insert(field.to_string(), Value::Object(f));
        }
    }
    json!({ "f:metadata": meta })
}

impl NodeObj {
    pub fn to_json(&self, name: &str) -> Value {
        let managed: Vec<Value> = self
            .managers
            .iter()
            .map(|((manager, op), m)| {
                json!({"manager": manager, "operation": op, "apiVersion": "v1",
                       "time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                       "fieldsV1": fields_v1(m)})
            })
            .collect();
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": format!("uid-{name}"),
                "resourceVersion": self.resource_version.to_string(),
                "creationTimestamp": "2025-01-01T00:00:00Z",
                "labels": self.labels,
                "annotations": self.annotations,
                "managedFields": managed,
            },
            "spec": if self.spec.is_null() { json!({}) } else { self.spec.clone() },
            "status": if self.status.is_null() { json!({}) } else { self.status.clone() },
        })
    }

    /// The keys `manager` owns through Apply.
    pub fn applied_by(&self, manager: &str) -> BTreeSet<String> {
        self.managers
            .get(&(manager.to_string(), "Apply".to_string()))
            .map(|m| m.labels.clone())
            .unwrap_or_default()
    }

    fn owners(&self, annotations: bool, key: &str) -> Vec<(String, String)> {
        self.managers
            .iter()
            .filter(|(_, m)| {
                if annotations {
                    m.annotations.contains(key)
                } else {
                    m.labels.contains(key)
                }
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Server-side apply of labels and annotations by `manager`. Errors are the conflicts:
    /// (field path, other manager).
    pub fn apply(
        &mut self,
        manager: &str,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
        force: bool,
    ) -> Result<(), Vec<(String, String)>> {
        let me = (manager.to_string(), "Apply".to_string());
        let mut conflicts = Vec::new();
        for (is_ann, wanted) in [(false, labels), (true, annotations)] {
            let current = if is_ann {
                &self.annotations
            } else {
                &self.labels
            };
            for (k, v) in wanted {
                if current.get(k).is_some_and(|cur| cur != v) {
                    for owner in self.owners(is_ann, k) {
                        if owner != me {
                            let field = if is_ann { "annotations" } else { "labels" };
                            // Kubernetes names an Update manager with the version it wrote.
                            let who = if owner.1 == "Update" {
                                format!("{}\" using v1", owner.0)
                            } else {
                                format!("{}\"", owner.0)
                            };
                            conflicts.push((format!(".metadata.{field}.{k}"), who));
                        }
                    }
                }
            }
        }
        if !conflicts.is_empty() && !force {
            return Err(conflicts);
        }
        let previous = self.managers.remove(&me).unwrap_or_default();
        for (is_ann, wanted, prev) in [
            (false, labels, &previous.labels),
            (true, annotations, &previous.annotations),
        ] {
            for k in wanted.keys() {
                // force takes the key from everyone else whose value differs.
                for m in self.managers.values_mut() {
                    let set = if is_ann {
                        &mut m.annotations
                    } else {
                        &mut m.labels
                    };
                    let cur = if is_ann {
                        self.annotations.get(k)
                    } else {
                        self.labels.get(k)
                    };
                    if cur != wanted.get(k) {
                        set.remove(k);
                    }
                }
            }
            for k in prev {
                if !wanted.contains_key(k) && self.owners(is_ann, k).is_empty() {
                    if is_ann {
                        self.annotations.remove(k);
                    } else {
                        self.labels.remove(k);
                    }
                }
            }
            for (k, v) in wanted {
                if is_ann {
                    self.annotations.insert(k.clone(), v.clone());
                } else {
                    self.labels.insert(k.clone(), v.clone());
                }
            }
        }
        let mine = Managed {
            operation: "Apply".into(),
            labels: labels.keys().cloned().collect(),
            annotations: annotations.keys().cloned().collect(),
        };
        if !mine.labels.is_empty() || !mine.annotations.is_empty() {
            self.managers.insert(me, mine);
        }
        self.managers
            .retain(|_, m| !m.labels.is_empty() || !m.annotations.is_empty());
        Ok(())
    }

    /// A merge patch of labels/annotations by another controller (operation Update): a value
    /// sets the key and takes it over, null deletes it.
    pub fn merge(
        &mut self,
        manager: &str,
        labels: &BTreeMap<String, Option<String>>,
        annotations: &BTreeMap<String, Option<String>>,
    ) {
        let me = (manager.to_string(), "Update".to_string());
        let mut mine = self.managers.remove(&me).unwrap_or_default();
        mine.operation = "Update".into();
        for (is_ann, patch) in [(false, labels), (true, annotations)] {
            for (k, v) in patch {
                let map = if is_ann {
                    &mut self.annotations
                } else {
                    &mut self.labels
                };
                let changed = map.get(k) != v.as_ref();
                match v {
                    Some(v) => {
                        map.insert(k.clone(), v.clone());
                    }
                    None => {
                        map.remove(k);
                    }
                }
                if changed {
                    for m in self.managers.values_mut() {
                        if is_ann {
                            m.annotations.remove(k);
                        } else {
                            m.labels.remove(k);
                        }
                    }
                    let set = if is_ann {
                        &mut mine.annotations
                    } else {
                        &mut mine.labels
                    };
                    if v.is_some() {
                        set.insert(k.clone());
                    } else {
                        set.remove(k);
                    }
                }
            }
        }
        self.managers.insert(me, mine);
        self.managers
            .retain(|_, m| !m.labels.is_empty() || !m.annotations.is_empty());
    }
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn nullable_map(v: Option<&Value>) -> BTreeMap<String, Option<String>> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string)))
                .collect()
        })
        .unwrap_or_default()
}

fn parse_body(content_type: &str, body: &str) -> Option<Value> {
    serde_json::from_str(body).ok().or_else(|| {
        content_type
            .contains("yaml")
            .then(|| serde_saphyr::from_str::<Value>(body).ok())
            .flatten()
    })
}

impl State {
    fn bump(&mut self) -> u64 {
        self.revision += 1;
        self.revision
    }

    fn take_fault(&mut self, method: &str) -> Option<&'static str> {
        let f = &mut self.faults;
        if f.only_method.as_deref().is_some_and(|m| m != method) {
            return None;
        }
        if f.drop > 0 {
            f.drop -= 1;
            Some("drop")
        } else if f.garbage > 0 {
            f.garbage -= 1;
            Some("garbage")
        } else if f.error_500 > 0 {
            f.error_500 -= 1;
            Some("500")
        } else if f.conflict_409 > 0 {
            f.conflict_409 -= 1;
            Some("409")
        } else if f.throttle_429 > 0 {
            f.throttle_429 -= 1;
            Some("429")
        } else if f.huge_body > 0 {
            f.huge_body -= 1;
            Some("huge")
        } else if f.endless_body > 0 {
            f.endless_body -= 1;
            Some("endless")
        } else if f.slow > 0 {
            f.slow -= 1;
            Some("slow")
        } else {
            None
        }
    }

    fn handle(&mut self, method: &str, path: &str, query: &str, ct: &str, body: &str) -> Reply {
        if path == "/api/v1/nodes" && method == "GET" {
            return self.list_nodes(query);
        }
        if let Some(name) = path.strip_prefix("/api/v1/nodes/") {
            return self.handle_node(method, name, query, ct, body);
        }
        if let Some(rest) = path.strip_prefix(NFD_PREFIX) {
            let parts: Vec<&str> = rest.split('/').collect();
            if let [ns, "nodefeatures", name] = parts[..] {
                return self.handle_nodefeature(method, ns, name, query, ct, body);
            }
        }
        status(
            404,
            "NotFound",
            &format!("the server could not find {path}"),
            None,
        )
    }

    /// `GET /api/v1/nodes?limit=N&continue=T`: Nodes in name order, N at a time; the continue
    /// token resumes after the last one sent. Items carry no `kind` (as the real list).
    fn list_nodes(&mut self, query: &str) -> Reply {
        let limit = query_param(query, "limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0)
            .unwrap_or(usize::MAX);
        let after = query_param(query, "continue")
            .and_then(|t| t.strip_prefix("after-"))
            .map(str::to_string);
        let names: Vec<&String> = self
            .nodes
            .keys()
            .filter(|n| after.as_ref().is_none_or(|a| *n > a))
            .collect();
        let page = &names[..names.len().min(limit)];
        let items: Vec<Value> = page
            .iter()
            .map(|n| {
                let mut v = self.nodes[*n].to_json(n);
                if let Some(o) = v.as_object_mut() {
                    o.remove("kind");
                    o.remove("apiVersion");
                }
                v
            })
            .collect();
        let mut meta = json!({"resourceVersion": self.revision.to_string()});
        if names.len() > page.len()
            && let Some(last) = page.last()
        {
            meta["continue"] = json!(format!("after-{last}"));
        }
        reply(
            200,
            &json!({"kind": "NodeList", "apiVersion": "v1", "metadata": meta, "items": items}),
        )
    }

    fn handle_node(
        &mut self,
        method: &str,
        name: &str,
        query: &str,
        ct: &str,
        body: &str,
    ) -> Reply {
        let not_found = || {
            status(
                404,
                "NotFound",
                &format!("nodes \"{name}\" not found"),
                Some(json!({"name": name, "kind": "nodes"})),
            )
        };
        if !self.nodes.contains_key(name) {
            return not_found();
        }
        match method {
            "GET" => reply(200, &self.nodes[name].to_json(name)),
            "PATCH" => {
                let Some(patch) = parse_body(ct, body) else {
                    return status(400, "BadRequest", "cannot parse the patch body", None);
                };
                let before = self.nodes[name].clone();
                let manager = query_param(query, "fieldManager");
                if ct.starts_with("application/apply-patch+yaml") {
                    let Some(manager) = manager else {
                        return status(
                            400,
                            "BadRequest",
                            "PATCH /api/v1/nodes: fieldManager is required for apply patch",
                            None,
                        );
                    };
                    let force = query_param(query, "force") == Some("true");
                    let meta = patch.get("metadata");
                    let labels = string_map(meta.and_then(|m| m.get("labels")));
                    let annotations = string_map(meta.and_then(|m| m.get("annotations")));
                    let mut after = self.nodes[name].clone();
                    if let Err(conflicts) = after.apply(manager, &labels, &annotations, force) {
                        return apply_conflict(&conflicts);
                    }
                    self.nodes.insert(name.to_string(), after);
                } else if ct.starts_with("application/merge-patch+json") {
                    let meta = patch.get("metadata");
                    let labels = nullable_map(meta.and_then(|m| m.get("labels")));
                    let annotations = nullable_map(meta.and_then(|m| m.get("annotations")));
                    let node = self.nodes.get_mut(name).expect("checked");
                    node.merge(manager.unwrap_or("kubectl-edit"), &labels, &annotations);
                } else {
                    return status(
                        415,
                        "UnsupportedMediaType",
                        &format!("the body of the request was in an unknown format: {ct}"),
                        None,
                    );
                }
                let mut after = self.nodes[name].clone();
                after.resource_version = before.resource_version;
                if after != before {
                    let rv = self.bump();
                    self.nodes.get_mut(name).expect("checked").resource_version = rv;
                }
                reply(200, &self.nodes[name].to_json(name))
            }
            _ => status(405, "MethodNotAllowed", "method not allowed", None),
        }
    }

    fn handle_nodefeature(
        &mut self,
        method: &str,
        ns: &str,
        name: &str,
        query: &str,
        ct: &str,
        body: &str,
    ) -> Reply {
        let key = (ns.to_string(), name.to_string());
        match method {
            "GET" => match self.nodefeatures.get(&key) {
                Some(o) => reply(200, &o.to_json()),
                None => status(
                    404,
                    "NotFound",
                    &format!("nodefeatures.nfd.k8s-sigs.io \"{name}\" not found"),
                    Some(json!({"name": name, "group": "nfd.k8s-sigs.io", "kind": "nodefeatures"})),
                ),
            },
            "PATCH" if ct.starts_with("application/apply-patch+yaml") => {
                let Some(manager) = query_param(query, "fieldManager") else {
                    return status(400, "BadRequest", "fieldManager is required", None);
                };
                let Some(mut obj) = parse_body(ct, body) else {
                    return status(400, "BadRequest", "cannot parse the patch body", None);
                };
                if obj["metadata"]["name"] != json!(name)
                    || obj["metadata"]["namespace"] != json!(ns)
                {
                    return status(400, "BadRequest", "name or namespace does not match", None);
                }
                if let Some(existing) = self.nodefeatures.get(&key)
                    && existing.manager != manager
                    && existing.object["spec"] != obj["spec"]
                {
                    return apply_conflict(&[(".spec".to_string(), existing.manager.clone())]);
                }
                obj["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("resourceVersion"));
                let unchanged = self.nodefeatures.get(&key).is_some_and(|e| e.object == obj);
                if !unchanged {
                    let rv = self.bump();
                    self.nodefeatures.insert(
                        key.clone(),
                        NodeFeatureObj {
                            object: obj,
                            manager: manager.to_string(),
                            resource_version: rv,
                        },
                    );
                }
                reply(200, &self.nodefeatures[&key].to_json())
            }
            // As for a custom resource without finalizers: gone at once, answered with its
            // last state.
            "DELETE" => match self.nodefeatures.remove(&key) {
                Some(o) => {
                    self.bump();
                    reply(200, &o.to_json())
                }
                None => status(
                    404,
                    "NotFound",
                    &format!("nodefeatures.nfd.k8s-sigs.io \"{name}\" not found"),
                    Some(json!({"name": name, "group": "nfd.k8s-sigs.io", "kind": "nodefeatures"})),
                ),
            },
            _ => status(405, "MethodNotAllowed", "method not allowed", None),
        }
    }
}

impl NodeFeatureObj {
    /// The object as the API server answers it: its resourceVersion and its one manager.
    pub fn to_json(&self) -> Value {
        let mut o = self.object.clone();
        o["metadata"]["resourceVersion"] = json!(self.resource_version.to_string());
        o["metadata"]["managedFields"] = json!([{
            "manager": self.manager, "operation": "Apply", "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {}, "f:spec": {}},
        }]);
        o
    }
}

/// The real API server's answer to a conflicting apply (tests/daemon_apiserver.rs compares it
/// with Kubernetes' own).
fn apply_conflict(conflicts: &[(String, String)]) -> Reply {
    let message = if conflicts.len() == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with \"{}: {}",
            conflicts[0].1, conflicts[0].0
        )
    } else {
        // Grouped by manager, as structured-merge-diff words it.
        let mut by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (f, who) in conflicts {
            by.entry(who.as_str()).or_default().push(f.as_str());
        }
        let groups: Vec<String> = by
            .iter()
            .map(|(who, fields)| {
                let lines: Vec<String> = fields.iter().map(|f| format!("- {f}")).collect();
                format!("conflicts with \"{who}:\n{}", lines.join("\n"))
            })
            .collect();
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            groups.join("\n")
        )
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(f, who)| {
            json!({"reason": "FieldManagerConflict",
                   "message": format!("conflict with \"{who}"), "field": f})
        })
        .collect();
    status(409, "Conflict", &message, Some(json!({ "causes": causes })))
}

/// The fake API server, serving on its own thread until dropped.
pub struct FakeApiServer {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

// Also loaded by tests/kube, where both are in a test: each walks its own range of ports.
#[allow(clippy::duplicate_mod)]
#[path = "../common/ports.rs"]
mod ports;

/// A free port on 127.0.0.1 (bound then released: "down at start"), for a server started on
/// it seconds later (tests/common/ports.rs says why not one `bind(0)` gives): 21,384-32,767
/// (tests/kube's are below).
pub fn reserve_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    ports::walk(21_384, 32_768, &NEXT)
}

async fn serve_one(state: Arc<Mutex<State>>, req: Request<Incoming>) -> Result<Reply, String> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let ct = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
        .unwrap_or_default();
    let (fault, slow_for) = {
        let mut s = state.lock().expect("state");
        // Injected faults are for the publish path; the Node watch does not use them up.
        let watch = method == "GET" && query_param(&query, "watch") == Some("true");
        let fault = if watch {
            match s.faults.watch {
                Some(WatchFault::Garbage) => Some("watch-garbage"),
                Some(WatchFault::Huge(_)) => Some("watch-huge"),
                None => None,
            }
        } else {
            s.take_fault(&method)
        };
        s.requests.push(Recorded {
            method: method.clone(),
            path: path.clone(),
            query: query.clone(),
            content_type: ct.clone(),
            body: body.clone(),
            fault,
            at: Instant::now(),
        });
        (fault, s.faults.slow_for)
    };
    match fault {
        // hyper closes the connection without an answer.
        Some("drop") => return Err("injected: connection dropped".into()),
        Some("500") => {
            return Ok(status(
                500,
                "InternalError",
                "Internal error occurred: injected fault",
                None,
            ));
        }
        Some("429") => {
            let secs = state.lock().expect("state").faults.retry_after_secs;
            let mut r = status(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
                Some(json!({"retryAfterSeconds": secs})),
            );
            r.headers_mut()
                .insert("retry-after", secs.to_string().parse().expect("header"));
            return Ok(r);
        }
        Some("huge") => {
            return Ok(Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(full(huge_node()))
                .expect("valid response"));
        }
        Some("endless") => {
            let body = Endless {
                started: false,
                next: Box::pin(tokio::time::sleep(Duration::from_millis(50))),
            };
            return Ok(Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(body.boxed_unsync())
                .expect("valid response"));
        }
        Some("garbage") => {
            return Ok(Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(full("<html><body>It works!</body></html>"))
                .expect("valid response"));
        }
        Some("watch-garbage") => {
            return Ok(Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(full(
                    "<html>502 Bad Gateway</html>\nnot a watch event\n{\"type\":\n",
                ))
                .expect("valid response"));
        }
        Some("watch-huge") => {
            let size = match state.lock().expect("state").faults.watch {
                Some(WatchFault::Huge(n)) => n,
                _ => 0,
            };
            let mut line = br#"{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"Node","metadata":{"name":"x","annotations":{"x":""#.to_vec();
            line.resize(line.len() + size, b'a');
            line.extend_from_slice(b"\"}}}}\n");
            use futures_util::StreamExt;
            let body = http_body_util::StreamBody::new(
                futures_util::stream::iter(
                    line.chunks(64 << 10)
                        .map(|c| {
                            Ok::<_, std::io::Error>(hyper::body::Frame::data(
                                Bytes::copy_from_slice(c),
                            ))
                        })
                        .collect::<Vec<_>>(),
                )
                .chain(futures_util::stream::once(async {
                    tokio::time::sleep(Duration::from_secs(300)).await;
                    Ok(hyper::body::Frame::data(Bytes::new()))
                })),
            );
            return Ok(Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(body.boxed_unsync())
                .expect("valid response"));
        }
        Some("409") => {
            return Ok(status(
                409,
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
                None,
            ));
        }
        Some(_) => tokio::time::sleep(slow_for).await,
        None => {}
    }
    let upstream = state.lock().expect("state").upstream.clone();
    if let Some(kubeconfig) = upstream {
        return forward(&kubeconfig, &method, &path, &query, &ct, body).await;
    }
    if method == "GET" && path == "/api/v1/nodes" && query_param(&query, "watch") == Some("true") {
        let field = query_param(&query, "fieldSelector")
            .unwrap_or_default()
            .replace("%3D", "=");
        let node = field
            .strip_prefix("metadata.name=")
            .unwrap_or_default()
            .to_string();
        let sent = query_param(&query, "resourceVersion")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0);
        let secs = query_param(&query, "timeoutSeconds")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(300);
        let body = Watch {
            state: state.clone(),
            node,
            sent,
            end: tokio::time::Instant::now() + Duration::from_secs(secs),
            tick: Box::pin(tokio::time::sleep(Duration::from_millis(20))),
        };
        return Ok(Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(body.boxed_unsync())
            .expect("valid response"));
    }
    Ok(state
        .lock()
        .expect("state")
        .handle(&method, &path, &query, &ct, &body))
}

/// Sends the request on to the upstream API server with the kubeconfig's identity, and its
/// answer back as it comes (status, content type, a body streamed as the server streams it).
async fn forward(
    kubeconfig: &Path,
    method: &str,
    path: &str,
    query: &str,
    content_type: &str,
    body: String,
) -> Result<Reply, String> {
    static CLIENTS: Mutex<BTreeMap<PathBuf, kube::Client>> = Mutex::new(BTreeMap::new());
    let cached = CLIENTS.lock().expect("clients").get(kubeconfig).cloned();
    let client = match cached {
        Some(c) => c,
        None => {
            let kc = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let c = kube::Client::try_from(config).map_err(|e| e.to_string())?;
            CLIENTS
                .lock()
                .expect("clients")
                .insert(kubeconfig.to_path_buf(), c.clone());
            c
        }
    };
    let uri = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    };
    let mut req = http::Request::builder().method(method).uri(uri);
    if !content_type.is_empty() {
        req = req.header("content-type", content_type);
    }
    let req = req
        .body(kube::client::Body::from(body.into_bytes()))
        .map_err(|e| e.to_string())?;
    let answer = client
        .send(req)
        .await
        .map_err(|e| format!("upstream: {e}"))?;
    let (parts, body) = answer.into_parts();
    let body = body.map_err(std::io::Error::other).boxed_unsync();
    Ok(Response::from_parts(parts, body))
}

impl FakeApiServer {
    /// A proxy in front of `upstream` (a kubeconfig of Kubernetes' own test API server, with
    /// the identity to forward as): the faults of [`Faults`] are injected here, every other
    /// request meets the real server.
    pub fn proxy_to(upstream: &Path) -> FakeApiServer {
        Self::proxy_on(0, upstream)
    }

    /// [`FakeApiServer::proxy_to`] on `port` (0: any).
    pub fn proxy_on(port: u16, upstream: &Path) -> FakeApiServer {
        let state = State {
            upstream: Some(upstream.to_path_buf()),
            ..State::default()
        };
        Self::start_with(port, Arc::new(Mutex::new(state)))
    }

    pub fn start() -> FakeApiServer {
        Self::start_on(0)
    }

    pub fn start_on(port: u16) -> FakeApiServer {
        Self::start_with(port, Arc::new(Mutex::new(State::default())))
    }

    /// Serves `state` on `port` (0: any).
    pub fn start_with(port: u16, state: Arc<Mutex<State>>) -> FakeApiServer {
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                loop {
                    let stream = tokio::select! {
                        _ = &mut stopped => break,
                        a = listener.accept() => match a {
                            Ok((s, _)) => s,
                            Err(_) => continue,
                        },
                    };
                    let st = st.clone();
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(move |req| serve_one(st.clone(), req));
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                            .await;
                    });
                }
            });
        });
        FakeApiServer {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().expect("state"))
    }

    /// Creates a Node (as kubelet would), with labels owned by `kubelet` through Update.
    pub fn add_node(&self, name: &str, kubelet_labels: &[(&str, &str)]) {
        self.with(|s| {
            let mut node = NodeObj::default();
            let patch = kubelet_labels
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect();
            node.merge("kubelet", &patch, &BTreeMap::new());
            node.resource_version = s.bump();
            s.nodes.insert(name.to_string(), node);
        });
    }

    /// Sets a Node's `spec` and `status` (taints, cordon, allocatable).
    pub fn set_spec_status(&self, name: &str, spec: Value, status: Value) {
        self.with(|s| {
            if let Some(n) = s.nodes.get_mut(name) {
                n.spec = spec;
                n.status = status;
            }
        });
    }

    pub fn node(&self, name: &str) -> NodeObj {
        self.with(|s| s.nodes.get(name).cloned().unwrap_or_default())
    }

    pub fn labels(&self, name: &str) -> BTreeMap<String, String> {
        self.node(name).labels
    }

    /// Every request but the watches (the agent's watch of its own Node is one long request
    /// beside the publish path these tests count; `watches` has them).
    pub fn requests(&self) -> Vec<Recorded> {
        self.with(|s| {
            s.requests
                .iter()
                .filter(|r| !r.is_watch())
                .cloned()
                .collect()
        })
    }

    /// The watch requests.
    pub fn watches(&self) -> Vec<Recorded> {
        self.with(|s| {
            s.requests
                .iter()
                .filter(|r| r.is_watch())
                .cloned()
                .collect()
        })
    }

    pub fn clear_requests(&self) {
        self.with(|s| s.requests.clear());
    }

    pub fn set_faults(&self, faults: Faults) {
        self.with(|s| s.faults = faults);
    }

    /// A merge patch of labels from another controller, over HTTP like any client.
    pub fn merge_patch_labels(&self, node: &str, manager: &str, labels: &[(&str, Option<&str>)]) {
        let l: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.map_or(Value::Null, Value::from)))
            .collect();
        let (code, body) = http(
            self.addr,
            "PATCH",
            &format!("/api/v1/nodes/{node}?fieldManager={manager}"),
            Some((
                "application/merge-patch+json",
                &json!({"metadata": {"labels": l}}).to_string(),
            )),
        )
        .expect("merge patch");
        assert_eq!(code, 200, "{body}");
    }

    /// Stops serving (the port closes).
    pub fn stop(mut self) -> Arc<Mutex<State>> {
        self.shutdown();
        self.state.clone()
    }

    fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A minimal HTTP/1.1 client: one request on a new connection. Returns (status, body).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some((ct, b)) = body {
        req.push_str(&format!(
            "Content-Type: {ct}\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    if let Some((_, b)) = body {
        req.push_str(b);
    }
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((code, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A kubeconfig pointing at `url` over plain HTTP.
pub fn write_kubeconfig(dir: &Path, url: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {url}\n\
             users:\n- name: fake\n  user:\n    token: test-token\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             current-context: fake\n"
        ),
    )
    .expect("write kubeconfig");
    path
}

// ---------------------------------------------------------------------------------------------
// Running the agent against it.

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub const MACHINE: &str = "dell-xe9680-8xh100";

/// The discovery flags of the Dell XE9680 fixture, without NVML.
pub fn fixture_args() -> Vec<String> {
    let f = repo().join("tests/fixtures");
    vec![
        "--sysfs-root".into(),
        f.join("sysfs").join(MACHINE).display().to_string(),
        "--proc-root".into(),
        f.join("proc").join(MACHINE).display().to_string(),
        "--pci-ids".into(),
        f.join("pci.ids").display().to_string(),
        "--no-nvml".into(),
    ]
}

/// Rules that make the agent report each kind of outcome on the fixture: one good label
/// (`test.nvidia`), one the validation rejects (`test.bad`), one rule that fails at evaluation
/// (`Gt` on a hex id). `tests/daemon_health.rs` and `tests/monitoring.rs` run the agent on them.
pub const OUTCOME_RULES: &str = r#"apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata:
  name: outcomes
spec:
  rules:
    - name: good
      labels: {test.nvidia: "true"}
      matchFeatures:
        - feature: pci.device
          matchExpressions:
            vendor: {op: In, value: ["10de"]}
    - name: rejected
      labels: {test.bad: "not a valid value!"}
      matchFeatures:
        - feature: pci.device
          matchExpressions:
            vendor: {op: In, value: ["10de"]}
    - name: failing
      labels: {test.never: "true"}
      matchFeatures:
        - feature: pci.device
          matchExpressions:
            vendor: {op: Gt, value: ["5"]}
"#;

/// NFD's built-in PCI labels of that fixture.
pub fn fixture_pci_labels() -> BTreeMap<String, String> {
    [
        "feature.node.kubernetes.io/pci-0300_102b.present",
        "feature.node.kubernetes.io/pci-0302_10de.present",
        "feature.node.kubernetes.io/pci-0302_10de.sriov.capable",
    ]
    .iter()
    .map(|k| (k.to_string(), "true".to_string()))
    .collect()
}

pub fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A running `gpu-labeler run`, its stderr collected line by line.
pub struct Agent {
    pub child: Child,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl Agent {
    /// Starts `gpu-labeler ARGS` with a clean environment (no `GPU_LABELER_*`, no `NODE_NAME`,
    /// no `KUBERNETES_SERVICE_HOST`) plus `env`.
    pub fn start(args: &[String], env: &[(&str, &str)]) -> Agent {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu-labeler"));
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("GPU_LABELER_")
                || k == "NODE_NAME"
                || k == "KUBERNETES_SERVICE_HOST"
                || k == "KUBECONFIG"
                || k == "POD_NAMESPACE"
            {
                cmd.env_remove(k);
            }
        }
        cmd.args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn gpu-labeler");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                l.lock().expect("log").push(line);
            }
        });
        Agent {
            child,
            log,
            reader: Some(reader),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Still running?
    pub fn child_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().expect("log").clone()
    }

    pub fn log_text(&self) -> String {
        self.log().join("\n")
    }

    /// Waits until a log line contains `needle`; panics with the log after `timeout`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> String {
        let found = wait_for(timeout, || {
            self.log().into_iter().find(|l| l.contains(needle))
        });
        found.unwrap_or_else(|| {
            panic!(
                "no log line with {needle:?} within {timeout:?}; log:\n{}",
                self.log_text()
            )
        })
    }

    /// The address the health server bound (from its log line).
    pub fn health_addr(&self) -> SocketAddr {
        let line = self.wait_log("serving /healthz", Duration::from_secs(10));
        let url = line
            .split("http://")
            .nth(1)
            .expect("address in the log line")
            .trim();
        url.parse().expect("socket address")
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([format!("-{sig}"), self.pid().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{sig}");
    }

    /// Waits for the process to exit; returns its code.
    pub fn wait_exit(&mut self, timeout: Duration) -> i32 {
        let code = wait_for(timeout, || {
            self.child
                .try_wait()
                .ok()
                .flatten()
                .map(|s| s.code().unwrap_or(-1))
        });
        let Some(code) = code else {
            let _ = self.child.kill();
            panic!("did not exit within {timeout:?}; log:\n{}", self.log_text());
        };
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        assert!(
            !self.log_text().contains("panicked"),
            "gpu-labeler panicked:\n{}",
            self.log_text()
        );
        code
    }

    /// SIGTERM, then the exit code.
    pub fn stop(&mut self) -> i32 {
        self.signal("TERM");
        self.wait_exit(Duration::from_secs(10))
    }

    pub fn stdout(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            let _ = out.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Polls `f` every 50 ms until it gives `Some`, or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `run` against `server` for node `node`: fixture discovery, `--no-default-rules`, 1 s interval,
/// health on a free port, plus `extra`.
pub fn run_args(kubeconfig: &Path, node: &str, extra: &[&str]) -> Vec<String> {
    let mut a = vec!["run".to_string()];
    a.extend(fixture_args());
    a.extend(
        [
            "--no-default-rules",
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--node-name",
            node,
            "--interval",
            "1s",
            "--listen",
            "127.0.0.1:0",
            // DRA's own tests read it (tests/daemon_dra.rs, the soak): the others count and
            // fault the Node's requests alone.
            "--no-dra",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// A NodeFeatureRule file whose rules each label NVIDIA nodes: `(rule name, label name)`; the
/// label gets NFD's prefix and the value `true`.
pub fn rule_file(rules: &[(&str, &str)]) -> String {
    let mut s = String::from(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: test-rules\nspec:\n  rules:\n",
    );
    for (name, label) in rules {
        s.push_str(&format!(
            "    - name: {name}\n      labels:\n        {label}: \"true\"\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {{op: In, value: [\"10de\"]}}\n"
        ));
    }
    s
}

/// `feature.node.kubernetes.io/<name>` = `true` for each name.
pub fn rule_labels(names: &[&str]) -> BTreeMap<String, String> {
    names
        .iter()
        .map(|n| {
            (
                format!("feature.node.kubernetes.io/{n}"),
                "true".to_string(),
            )
        })
        .collect()
}

/// Union of label maps.
pub fn union(maps: &[&BTreeMap<String, String>]) -> BTreeMap<String, String> {
    maps.iter()
        .flat_map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect()
}

/// The PATCH requests that reached the handler (faults excluded).
pub fn writes(reqs: &[Recorded]) -> Vec<&Recorded> {
    reqs.iter().filter(|r| r.is_write()).collect()
}

/// `GET path` on the agent's health server: (status, body).
pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    http(addr, "GET", path, None).unwrap_or((0, String::new()))
}

/// The value of one sample line of /metrics (`name{labels}` exactly as printed).
pub fn metric(addr: SocketAddr, series: &str) -> Option<f64> {
    let (_, body) = get(addr, "/metrics");
    body.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}
