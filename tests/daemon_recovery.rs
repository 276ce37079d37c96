//! What an API server (or a proxy in front of it) can do to the daemon, end to end with the real
//! binary: an outage, answers too large to be a Node, answers that never end, slow headers, 429
//! with Retry-After, and a 409 that is not a field conflict. In each, the health endpoints keep
//! answering and the labels land as soon as the server answers properly again. The faults are
//! injected by a proxy (tests/apiserver in proxy mode) in front of Kubernetes' own API server
//! (tests/kube-apiserver): every request without a fault meets the real semantics.

mod apiserver;
mod kube;
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use apiserver::*;
use support::{Cluster, NODE, WAIT, agent, wait_labels};

fn want() -> BTreeMap<String, String> {
    union(&[
        &map(&[("kubernetes.io/os", "linux")]),
        &fixture_pci_labels(),
    ])
}

/// Kubernetes' own API server with our Node, and a fault proxy in front of it on `port` (0:
/// any) that forwards as the agent's token bound to its node, with `faults` set.
fn proxied_on(port: u16, faults: Faults) -> Cluster {
    let cluster = Cluster::with_node(&[("kubernetes.io/os", "linux")]).proxied_on(port);
    cluster.proxy().set_faults(faults);
    cluster
}

/// Health answers within a second, every time it is asked over `during`.
fn health_stays_up(agent: &Agent, during: Duration) {
    let addr = agent.health_addr();
    let start = Instant::now();
    while start.elapsed() < during {
        let asked = Instant::now();
        let (code, _) = get(addr, "/healthz");
        assert_eq!(code, 200, "healthz; log:\n{}", agent.log_text());
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "healthz took {:?}",
            asked.elapsed()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// At a 1 s interval, after an outage long enough for the old backoff to reach 16 s, the labels
/// land within 5 s of the API server answering again (three 500s and one 409 included).
#[test]
fn after_an_outage_labels_land_within_seconds() {
    let port = reserve_port();
    let mut agent = agent().start_at(&format!("http://127.0.0.1:{port}"));
    let addr = agent.health_addr();
    std::thread::sleep(Duration::from_secs(12));
    assert_eq!(get(addr, "/readyz").0, 503, "not ready while down");
    assert_eq!(get(addr, "/healthz").0, 200, "alive while down");

    let cluster = proxied_on(
        port,
        Faults {
            error_500: 3,
            conflict_409: 1,
            ..Faults::default()
        },
    );
    let took = wait_labels(&cluster, &agent, &want());
    assert!(
        took < Duration::from_secs(5),
        "labels landed {took:?} after the server came back; log:\n{}",
        agent.log_text()
    );
    let ok = wait_for(WAIT, || (get(addr, "/readyz").0 == 200).then_some(()));
    assert!(ok.is_some());
    assert_eq!(agent.stop(), 0);
}

/// A 64 MiB answer is cut at 4 MiB: a failed attempt, named, and the next one succeeds.
#[test]
fn a_huge_answer_is_refused_and_the_daemon_recovers() {
    let cluster = proxied_on(
        0,
        Faults {
            huge_body: 3,
            ..Faults::default()
        },
    );
    huge_node();
    let mut agent = agent().start(&cluster);
    health_stays_up(&agent, Duration::from_secs(2));
    wait_labels(&cluster, &agent, &want());
    agent.wait_log(
        &format!("GET node {NODE}: the answer is larger than 4 MiB; not read (too_large)"),
        WAIT,
    );
    let addr = agent.health_addr();
    // At least one attempt is cut as too large; a later one may instead meet the connection
    // reset while the server is still sending the first 64 MiB.
    let cut = metric(
        addr,
        "gpu_labeler_publish_errors_total{reason=\"too_large\"}",
    );
    assert!(cut.unwrap_or(0.0) >= 1.0, "{cut:?}");
    assert_eq!(agent.stop(), 0);
}

/// An answer that never ends, and headers that never come, are bounded by the request timeout
/// (2 s at a 1 s interval) while /healthz keeps answering.
#[test]
fn endless_bodies_and_slow_headers_time_out_while_health_answers() {
    let cluster = proxied_on(
        0,
        Faults {
            endless_body: 1,
            slow: 1,
            slow_for: Duration::from_secs(30),
            ..Faults::default()
        },
    );
    let server = cluster.proxy();
    let mut agent = agent().start(&cluster);
    health_stays_up(&agent, Duration::from_secs(4));
    wait_labels(&cluster, &agent, &want());
    let addr = agent.health_addr();
    assert_eq!(
        metric(addr, "gpu_labeler_publish_errors_total{reason=\"timeout\"}"),
        Some(2.0)
    );
    let faults: Vec<Option<&str>> = server.requests().iter().map(|r| r.fault).collect();
    assert_eq!(&faults[..2], &[Some("endless"), Some("slow")]);
    assert_eq!(agent.stop(), 0);
}

/// 429 with Retry-After: 3 s: the next attempt waits at least that, although the backoff alone
/// would retry within the 1 s interval; each attempt is one request (no retries inside it).
#[test]
fn too_many_requests_waits_for_retry_after() {
    let cluster = proxied_on(
        0,
        Faults {
            throttle_429: 1,
            retry_after_secs: 3,
            ..Faults::default()
        },
    );
    let server = cluster.proxy();
    let mut agent = agent().start(&cluster);
    wait_labels(&cluster, &agent, &want());
    let reqs = server.requests();
    assert_eq!(reqs[0].fault, Some("429"));
    let gap = reqs[1].at - reqs[0].at;
    assert!(
        gap >= Duration::from_secs(3) && gap < Duration::from_secs(5),
        "next request {gap:?} after the 429"
    );
    let addr = agent.health_addr();
    assert_eq!(
        metric(
            addr,
            "gpu_labeler_publish_errors_total{reason=\"throttled\"}"
        ),
        Some(1.0)
    );
    assert_eq!(agent.stop(), 0);
}

/// "The object has been modified" on apply is no field conflict: the agent reads the Node again
/// and applies at once, in the same cycle, and reports nothing.
#[test]
fn a_stale_409_on_apply_is_retried_at_once_after_a_read() {
    let cluster = proxied_on(
        0,
        Faults {
            conflict_409: 1,
            only_method: Some("PATCH".into()),
            ..Faults::default()
        },
    );
    let server = cluster.proxy();
    let mut agent = agent().start(&cluster);
    wait_labels(&cluster, &agent, &want());
    let reqs = server.requests();
    let seq: Vec<(&str, Option<&str>)> = reqs
        .iter()
        .take(4)
        .map(|r| (r.method.as_str(), r.fault))
        .collect();
    assert_eq!(
        seq,
        [
            ("GET", None),
            ("PATCH", Some("409")),
            ("GET", None),
            ("PATCH", None)
        ]
    );
    assert!(reqs[3].at - reqs[1].at < Duration::from_millis(500));
    let addr = agent.health_addr();
    let text = get(addr, "/metrics").1;
    assert!(
        metric(
            addr,
            "gpu_labeler_publish_errors_total{reason=\"conflict\"}"
        ) == Some(0.0),
        "{text}"
    );
    assert_eq!(agent.stop(), 0);
}
