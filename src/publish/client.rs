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
    build(kubeconfig, timeout, None, Limit::Body(max_response_bytes)).await
}

/// How much of an answer is read before it is refused.
#[derive(Debug, Clone, Copy)]
enum Limit {
    /// The whole body (one object).
    Body(usize),
    /// Each line (a watch: one event a line, for as long as the watch lasts).
    Line(usize),
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
    max_line_bytes: usize,
) -> Result<Client, Error> {
    build(
        kubeconfig,
        timeout,
        Some(read_timeout),
        Limit::Line(max_line_bytes),
    )
    .await
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
    limit: Limit,
) -> Result<Client, Error> {
    let invalid = |e: &dyn std::error::Error| {
        Error::InvalidInput(format!(
            "Kubernetes client configuration: {}",
            super::error::error_chain(e)
        ))
    };
    let mut config = if let Some(path) = kubeconfig {
        let kc = Kubeconfig::read_from(path).map_err(|e| {
            Error::InvalidInput(format!(
                "cannot read kubeconfig {}: {}",
                path.display(),
                super::error::error_chain(&e)
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
                r.map(|body| -> Box<kube::client::DynBody> {
                    match limit {
                        Limit::Body(max) => Box::new(http_body_util::BodyExt::map_err(
                            http_body_util::Limited::new(body, max),
                            |e| e,
                        )),
                        Limit::Line(max) => Box::new(LineLimited::new(body, max)),
                    }
                })
            },
        )
    });
    Ok(kube::client::ClientBuilder::try_from(config)
        .map_err(|e| invalid(&e))?
        .with_layer(&limit)
        .build())
}

/// A body none of whose lines may be longer than `max` bytes: a watch stream, one event a line,
/// is read for minutes, so its whole length is not bounded, but one event is. Without it, one
/// huge event was buffered whole by the line decoder (a 60 MB event: 196 MB resident).
pub struct LineLimited<B> {
    inner: B,
    since_newline: usize,
    max: usize,
}

impl<B> LineLimited<B> {
    pub fn new(inner: B, max: usize) -> LineLimited<B> {
        LineLimited {
            inner,
            since_newline: 0,
            max,
        }
    }

    /// Counts `data` against the limit: `false` when a line is now longer than `max`.
    fn admit(&mut self, data: &[u8]) -> bool {
        let mut rest = data;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            if self.since_newline + i > self.max {
                return false;
            }
            self.since_newline = 0;
            rest = &rest[i + 1..];
        }
        self.since_newline += rest.len();
        self.since_newline <= self.max
    }
}

/// The error of a line over the limit (its words are those `Limited` uses, so that it is
/// classified the same way: `too_large`).
#[derive(Debug)]
pub struct LineTooLong(usize);

impl std::fmt::Display for LineTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "length limit exceeded: a line of the answer is longer than {} bytes",
            self.0
        )
    }
}

impl std::error::Error for LineTooLong {}

impl<B> hyper::body::Body for LineLimited<B>
where
    B: hyper::body::Body<Data = hyper::body::Bytes> + Unpin,
    B::Error: Into<tower::BoxError>,
{
    type Data = hyper::body::Bytes;
    type Error = tower::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<hyper::body::Bytes>, tower::BoxError>>>
    {
        use std::task::Poll;
        match std::pin::Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && !self.admit(data)
                {
                    return Poll::Ready(Some(Err(Box::new(LineTooLong(self.max)))));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
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
    fn a_line_longer_than_the_limit_is_refused_however_the_frames_cut_it() {
        let lines = |frames: &[&[u8]], max: usize| -> Vec<bool> {
            let mut l = LineLimited::new((), max);
            frames.iter().map(|f| l.admit(f)).collect()
        };
        // Short lines, as many as come: admitted.
        assert_eq!(
            lines(&[b"abc\nde", b"f\nghij\n", b"k"], 4),
            [true, true, true]
        );
        // A line that grows across frames past the limit.
        assert_eq!(lines(&[b"ab", b"cd", b"e"], 4), [true, true, false]);
        // A long line inside one frame, between two newlines.
        assert_eq!(lines(&[b"a\nbcdefg\nh"], 4), [false]);
        // Exactly the limit is fine; the newline does not count.
        assert_eq!(lines(&[b"abcd\nabcd\n"], 4), [true]);
    }

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
