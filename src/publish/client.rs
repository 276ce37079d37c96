//! The Kubernetes client that `run` publishes with and `match`/`inventory` list nodes with: one
//! configuration order, one timeout for every step, one cap on an answer's size, no retries of
//! kube's own.

use std::path::Path;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::Error;

/// What every request of the agent and its commands says it is: `gpu-labeler/<version>`.
pub const USER_AGENT: &str = concat!("gpu-labeler/", env!("CARGO_PKG_VERSION"));

/// The Kubernetes client of every command that talks to the API server: `--kubeconfig`, else in-cluster, else `$KUBECONFIG` / `~/.kube/config`.
pub async fn kube_client(
    kubeconfig: Option<&Path>,
    timeout: Duration,
    max_response_bytes: usize,
) -> Result<Client, Error> {
    // No read timeout on the connection: every call is bounded by its own timeout
    // (`tokio::time::timeout` around each request), and a read timeout on the socket closes
    // an idle pooled connection after `timeout`, so that each cycle paid a new TCP and TLS
    // handshake (seen on the test API server: one connection per cycle).
    build(kubeconfig, timeout, None, max_response_bytes).await
}

/// Runs `f` with a [`kube_client`] on a runtime of its own, for the one-shot commands that ask
/// the API server something and exit (`diff`, `prune`, `match`/`inventory`).
pub fn block_on_client<T, F, Fut>(
    kubeconfig: Option<&Path>,
    timeout: Duration,
    max_response_bytes: usize,
    f: F,
) -> Result<T, Error>
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Runtime(format!("cannot start the client's runtime: {e}")))?;
    rt.block_on(async {
        let client = kube_client(kubeconfig, timeout, max_response_bytes).await?;
        f(client).await
    })
}

/// A client for a watch: `timeout` to connect and write, but a read may wait `read_timeout`
/// (longer than the watch's own server-side timeout), so that a quiet watch is not cut short.
pub async fn kube_watch_client(
    kubeconfig: Option<&Path>,
    timeout: Duration,
    read_timeout: Duration,
    max_response_bytes: usize,
) -> Result<Client, Error> {
    build(kubeconfig, timeout, Some(read_timeout), max_response_bytes).await
}

/// Whether `~/.kube/config` is there (kube's default when $KUBECONFIG is unset).
fn home_kubeconfig_exists() -> bool {
    std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .is_some_and(|h| h.join(".kube/config").exists())
}

async fn build(
    kubeconfig: Option<&Path>,
    timeout: Duration,
    read_timeout: Option<Duration>,
    max_response_bytes: usize,
) -> Result<Client, Error> {
    let invalid = |e: &dyn std::error::Error| {
        Error::InvalidInput(format!(
            "Kubernetes client configuration: {}",
            super::node::error_chain(e)
        ))
    };
    let mut config = if let Some(path) = kubeconfig {
        let kc = Kubeconfig::read_from(path).map_err(|e| {
            Error::InvalidInput(format!(
                "cannot read kubeconfig {}: {}",
                path.display(),
                super::node::error_chain(&e)
            ))
        })?;
        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| invalid(&e))?
    } else if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        kube::Config::incluster().map_err(|e| invalid(&e))?
    } else if std::env::var_os("KUBECONFIG").is_none() && !home_kubeconfig_exists() {
        return Err(Error::Usage(
            "no Kubernetes client configuration: not in a cluster (KUBERNETES_SERVICE_HOST is unset), and no --kubeconfig, $KUBECONFIG or ~/.kube/config".into(),
        ));
    } else {
        kube::Config::from_kubeconfig(&KubeConfigOptions::default())
            .await
            .map_err(|e| invalid(&e))?
    };
    // Audit logs and API Priority and Fairness key on the User-Agent; kube sends none.
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    config.connect_timeout = Some(timeout);
    config.read_timeout = read_timeout;
    config.write_timeout = Some(timeout);
    // One retry policy, the agent's own (capped at the interval, honouring Retry-After): kube's
    // would retry 429/503 inside each attempt, multiplying the load on a struggling server.
    config.default_retry = false;
    // An answer larger than a Node can be is cut off instead of buffered and parsed; every
    // query is well formed.
    type Service = tower::util::BoxService<
        http::Request<kube::client::Body>,
        http::Response<Box<kube::client::DynBody>>,
        tower::BoxError,
    >;
    let limit = tower::layer::layer_fn(move |service: Service| {
        tower::ServiceExt::map_response(
            tower::ServiceExt::map_request(service, well_formed_query),
            move |r: http::Response<Box<kube::client::DynBody>>| {
                r.map(|body| http_body_util::Limited::new(body, max_response_bytes))
            },
        )
    });
    Ok(kube::client::ClientBuilder::try_from(config)
        .map_err(|e| invalid(&e))?
        .with_layer(&limit)
        .build())
}

/// kube-core builds a patch's URI as `name?` followed by form-encoded parameters that start
/// with `&` (`/api/v1/nodes/n1?&fieldManager=gpu-labeler`): the API server tolerates it, audit
/// logs and proxies see a malformed query. The `&` right after `?` is dropped.
fn well_formed_query(
    mut request: http::Request<kube::client::Body>,
) -> http::Request<kube::client::Body> {
    let uri = request.uri();
    if let Some(q) = uri.query()
        && (q.starts_with('&') || q.is_empty())
    {
        let fixed = match q.trim_start_matches('&') {
            "" => uri.path().to_string(),
            rest => format!("{}?{rest}", uri.path()),
        };
        let mut parts = uri.clone().into_parts();
        if let Ok(pq) = http::uri::PathAndQuery::try_from(fixed) {
            parts.path_and_query = Some(pq);
            if let Ok(fixed) = http::Uri::from_parts(parts) {
                *request.uri_mut() = fixed;
            }
        }
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_that_starts_with_an_ampersand_is_made_well_formed() {
        for (given, sent) in [
            (
                "/api/v1/nodes/n1?&fieldManager=gpu-labeler",
                "/api/v1/nodes/n1?fieldManager=gpu-labeler",
            ),
            ("/api/v1/nodes/n1?&&a=1&b=2", "/api/v1/nodes/n1?a=1&b=2"),
            ("/api/v1/nodes/n1?", "/api/v1/nodes/n1"),
            ("/api/v1/nodes/n1?&", "/api/v1/nodes/n1"),
            (
                "/api/v1/nodes?watch=true&fieldSelector=x",
                "/api/v1/nodes?watch=true&fieldSelector=x",
            ),
            ("/api/v1/nodes/n1", "/api/v1/nodes/n1"),
            (
                "https://h:6443/api/v1/nodes/n1?&f=1",
                "https://h:6443/api/v1/nodes/n1?f=1",
            ),
        ] {
            let r = http::Request::builder()
                .uri(given)
                .body(kube::client::Body::empty())
                .unwrap();
            assert_eq!(well_formed_query(r).uri().to_string(), sent, "{given}");
        }
    }
}
