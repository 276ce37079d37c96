//! The fake's objects and their semantics: Nodes with field ownership, NodeFeatures, the
//! injected faults, and every request recorded.

use super::*;

pub const MANAGER: &str = "gpu-labeler";
pub(crate) const NFD_PREFIX: &str = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/";

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
    pub(crate) revision: u64,
}

pub(crate) type Reply = Response<UnsyncBoxBody<Bytes, std::io::Error>>;

pub(crate) fn full(bytes: impl Into<Bytes>) -> UnsyncBoxBody<Bytes, std::io::Error> {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

pub(crate) fn reply(code: u16, body: &Value) -> Reply {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(full(body.to_string()))
        .expect("valid response")
}

/// What a streamed body has next: a frame, the end, or not yet.
pub(crate) type FramePoll =
    std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, std::io::Error>>>;

/// A body produced frame by frame (hyper's `Body` for it is [`Streamed`]).
pub(crate) trait Frames {
    fn next_frame(&mut self, cx: &mut std::task::Context<'_>) -> FramePoll;
}

/// The HTTP body of a [`Frames`].
pub(crate) struct Streamed<T>(pub(crate) T);

impl<T: Frames + Unpin> hyper::body::Body for Streamed<T> {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> FramePoll {
        self.get_mut().0.next_frame(cx)
    }
}

/// A body that starts like a Node and never ends: one space every 50 ms.
pub(crate) struct Endless {
    pub(crate) started: bool,
    pub(crate) next: Pin<Box<tokio::time::Sleep>>,
}

impl Frames for Endless {
    fn next_frame(&mut self, cx: &mut std::task::Context<'_>) -> FramePoll {
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
pub(crate) struct Watch {
    pub(crate) state: Arc<Mutex<State>>,
    pub(crate) node: String,
    pub(crate) sent: Option<u64>,
    pub(crate) end: tokio::time::Instant,
    pub(crate) tick: Pin<Box<tokio::time::Sleep>>,
}

impl Frames for Watch {
    fn next_frame(&mut self, cx: &mut std::task::Context<'_>) -> FramePoll {
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

pub(crate) fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Reply {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code});
    if let Some(d) = details {
        s["details"] = d;
    }
    reply(code, &s)
}

pub(crate) fn query_param<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

pub(crate) fn fields_v1(m: &Managed) -> Value {
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

pub(crate) fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn nullable_map(v: Option<&Value>) -> BTreeMap<String, Option<String>> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string)))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn parse_body(content_type: &str, body: &str) -> Option<Value> {
    serde_json::from_str(body).ok().or_else(|| {
        content_type
            .contains("yaml")
            .then(|| serde_saphyr::from_str::<Value>(body).ok())
            .flatten()
    })
}

impl State {
    pub(crate) fn bump(&mut self) -> u64 {
        self.revision += 1;
        self.revision
    }

    pub(crate) fn take_fault(&mut self, method: &str) -> Option<&'static str> {
        let f = &mut self.faults;
        if f.only_method.as_deref().is_some_and(|m| m != method) {
            return None;
        }
        // In this order: the first kind with answers left gets this request.
        let kinds: [(&mut usize, &'static str); 8] = [
            (&mut f.drop, "drop"),
            (&mut f.garbage, "garbage"),
            (&mut f.error_500, "500"),
            (&mut f.conflict_409, "409"),
            (&mut f.throttle_429, "429"),
            (&mut f.huge_body, "huge"),
            (&mut f.endless_body, "endless"),
            (&mut f.slow, "slow"),
        ];
        for (left, kind) in kinds {
            if *left > 0 {
                *left -= 1;
                return Some(kind);
            }
        }
        None
    }

    pub(crate) fn handle(
        &mut self,
        method: &str,
        path: &str,
        query: &str,
        ct: &str,
        body: &str,
    ) -> Reply {
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
pub(crate) fn apply_conflict(conflicts: &[(String, String)]) -> Reply {
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
