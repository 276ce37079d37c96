//! The fake API server itself: a hyper server on its own thread that serves [`State`] (or,
//! in proxy mode, forwards to Kubernetes' own server: proxy.rs).

use super::*;

/// The fake API server, serving on its own thread until dropped.
pub struct FakeApiServer {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// A free port on 127.0.0.1 (bound then released: "down at start"), for a server started on
/// it seconds later (tests/common/ports.rs says why not one `bind(0)` gives): 21,384-32,767
/// (tests/kube's are below).
pub fn reserve_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    ports::walk(21_384, 32_768, &NEXT)
}

/// A 200 whose JSON body is streamed as `body` yields it (an endless answer, a watch).
fn streaming(body: UnsyncBoxBody<Bytes, std::io::Error>) -> Reply {
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(body)
        .expect("valid response")
}

pub(crate) async fn serve_one(
    state: Arc<Mutex<State>>,
    req: Request<Incoming>,
) -> Result<Reply, String> {
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
            return Ok(streaming(Streamed(body).boxed_unsync()));
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
            return Ok(streaming(body.boxed_unsync()));
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
        return Ok(streaming(Streamed(body).boxed_unsync()));
    }
    Ok(state
        .lock()
        .expect("state")
        .handle(&method, &path, &query, &ct, &body))
}

impl FakeApiServer {
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
