//! Proxy mode: the fake holds no objects, injects its faults and forwards every other request
//! to Kubernetes' own test API server (tests/kube) as the kubeconfig's identity.

use super::*;

/// Sends the request on to the upstream API server with the kubeconfig's identity, and its
/// answer back as it comes (status, content type, a body streamed as the server streams it).
pub(crate) async fn forward(
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
}
