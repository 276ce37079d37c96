//! What went wrong talking to the API server, in the sinks' words: a `PublishError` with a
//! typed `Reason` (the `reason` label of `gpu_labeler_publish_errors_total`, and what callers
//! branch on), and `bounded`, the one way a request is given a deadline and its failure
//! classified.

use std::fmt;
use std::time::Duration;

/// The most an API answer may be: a Node (or NodeFeature) is a few KiB, a few MiB with huge
/// annotations. A larger body is a failed attempt, not something to buffer.
pub const MAX_RESPONSE_BYTES: usize = 4 << 20;

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// 409: the object changed since it was read, or a field another manager owns.
    Conflict,
    /// 5xx.
    Server,
    /// 429.
    Throttled,
    /// 404.
    NotFound,
    /// Another 4xx: the request itself is wrong (invalid, too large, forbidden); not retried
    /// until what is wanted changes.
    Client,
    /// No answer within the request's deadline.
    Timeout,
    /// The connection failed (refused, reset, TLS).
    Network,
    /// The answer was larger than `MAX_RESPONSE_BYTES`.
    TooLarge,
    /// The other end answered, but not a Kubernetes object in HTTP.
    Decode,
    /// A local file (the features-file sink).
    Io,
}

impl Reason {
    /// Every reason, in the order the metrics list them.
    pub const ALL: [Reason; 10] = [
        Reason::Conflict,
        Reason::Server,
        Reason::Throttled,
        Reason::NotFound,
        Reason::Client,
        Reason::Timeout,
        Reason::Network,
        Reason::TooLarge,
        Reason::Decode,
        Reason::Io,
    ];

    /// The metrics label and the word in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Conflict => "conflict",
            Reason::Server => "server",
            Reason::Throttled => "throttled",
            Reason::NotFound => "not_found",
            Reason::Client => "client",
            Reason::Timeout => "timeout",
            Reason::Network => "network",
            Reason::TooLarge => "too_large",
            Reason::Decode => "decode",
            Reason::Io => "io",
        }
    }

    /// Whether trying the same request again may succeed: the server or the way to it failed,
    /// not the request.
    pub fn transient(self) -> bool {
        matches!(
            self,
            Reason::Server | Reason::Throttled | Reason::Network | Reason::Timeout
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A publish that failed; the daemon retries it with backoff.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PublishError {
    pub reason: Reason,
    pub message: String,
    /// The API server asked to wait this long (a 429's `Retry-After`, as its Status body's
    /// `details.retryAfterSeconds` carries it).
    pub retry_after: Option<Duration>,
}

impl PublishError {
    pub fn new(reason: Reason, message: impl Into<String>) -> PublishError {
        PublishError {
            reason,
            message: message.into(),
            retry_after: None,
        }
    }

    /// Classifies a client error: what kind of failure, for logs and metrics.
    pub fn from_kube(what: &str, e: &kube::Error) -> PublishError {
        let reason = match e {
            kube::Error::Api(s) => match s.code {
                409 => Reason::Conflict,
                429 => Reason::Throttled,
                404 => Reason::NotFound,
                500..=599 => Reason::Server,
                _ => Reason::Client,
            },
            kube::Error::SerdeError(_) => Reason::Decode,
            other => {
                let chain = error_chain(other);
                if chain.contains("length limit exceeded") {
                    Reason::TooLarge
                } else if chain.contains("invalid HTTP")
                    || chain.contains(" parsed")
                    || chain.contains("message head is too large")
                {
                    // The other end answered, but not in HTTP (a port that is not the API
                    // server, a proxy's garbage): not the network's fault.
                    Reason::Decode
                } else if chain.contains("timed out") || chain.contains("deadline") {
                    Reason::Timeout
                } else {
                    Reason::Network
                }
            }
        };
        let detail = match e {
            kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
            _ if reason == Reason::TooLarge => format!(
                "the answer is larger than {} MiB; not read",
                MAX_RESPONSE_BYTES >> 20
            ),
            other => error_chain(other),
        };
        let retry_after = match e {
            kube::Error::Api(s) if s.code == 429 => Some(Duration::from_secs(
                s.details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|&n| n > 0)
                    .unwrap_or(1)
                    .into(),
            )),
            _ => None,
        };
        PublishError {
            retry_after,
            ..PublishError::new(reason, format!("{what}: {detail}"))
        }
    }

    pub fn timeout(what: &str, after: Duration) -> PublishError {
        PublishError::new(Reason::Timeout, format!("{what}: no answer in {after:?}"))
    }

    /// The API server answered 404.
    pub fn is_not_found(&self) -> bool {
        self.reason == Reason::NotFound
    }
}

/// Where only the words matter (prune's report, the DRA reads' warning).
impl From<PublishError> for String {
    fn from(e: PublishError) -> String {
        e.message
    }
}

/// `call` bounded by `timeout`, its failure classified: every request the sinks, prune,
/// `diff`, `match` and the DRA reads make goes through here (or `within`).
pub async fn bounded<T>(
    what: &str,
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, PublishError> {
    within(what, timeout, call)
        .await?
        .map_err(|e| PublishError::from_kube(what, &e))
}

/// `call` bounded by `timeout`, the API server's answer as it came, for a caller that reads its
/// Status (a server-side apply's field conflicts, an admission policy's words): no answer in
/// time is the only error here.
pub async fn within<T>(
    what: &str,
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<Result<T, kube::Error>, PublishError> {
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| PublishError::timeout(what, timeout))
}

/// An error and its sources on one line: "connection refused" is usually three levels down.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(inner) = cur {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = inner.source();
    }
    s
}
