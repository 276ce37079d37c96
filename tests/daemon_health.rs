//! `/healthz`, `/readyz`, `/metrics` and the JSON logs of `gpu-labeler run`.

mod apiserver;
mod kube;
mod support;

use std::time::Duration;

use apiserver::*;
use support::{NODE, WAIT, agent, fake_server, status_kib, wait_ready};

#[test]
fn health_readiness_and_metrics_tell_what_happened() {
    let server = fake_server(&[]);
    let spec = agent();
    let rules = spec.dir().join("rules.yaml");
    std::fs::write(&rules, OUTCOME_RULES).unwrap();
    let mut agent = spec
        .args(&["--rules", rules.to_str().unwrap()])
        .start_fake(&server);
    let addr = agent.health_addr();
    assert_eq!(get(addr, "/healthz"), (200, "ok\n".to_string()));
    wait_ready(&agent);
    assert_eq!(
        server.labels(NODE),
        union(&[&fixture_pci_labels(), &rule_labels(&["test.nvidia"])])
    );
    // Let a few unchanged cycles pass.
    let ok = wait_for(WAIT, || {
        (metric(addr, "gpu_labeler_publishes_total{result=\"unchanged\"}")? >= 2.0).then_some(())
    });
    assert!(ok.is_some(), "{}", get(addr, "/metrics").1);

    let (code, text) = get(addr, "/metrics");
    assert_eq!(code, 200);
    let m = |series: &str| metric(addr, series);
    assert_eq!(
        m(&format!(
            "gpu_labeler_build_info{{version=\"{}\"}}",
            env!("CARGO_PKG_VERSION")
        )),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        m("gpu_labeler_publishes_total{result=\"written\"}"),
        Some(1.0)
    );
    let cycles = m("gpu_labeler_scan_duration_seconds_count").unwrap();
    assert!(cycles >= 3.0, "{text}");
    assert!(m("gpu_labeler_publish_duration_seconds_count").unwrap() >= 3.0);
    // One failing rule and one rejected label per cycle.
    let errors = m("gpu_labeler_rule_errors_total").unwrap();
    let rejected = m("gpu_labeler_rejected_labels_total").unwrap();
    assert!(errors >= 3.0 && rejected >= 3.0, "{text}");
    assert_eq!(
        m("gpu_labeler_gpus{vendor=\"nvidia\",product=\"NVIDIA H100 80GB HBM3\"}"),
        Some(8.0),
        "{text}"
    );
    assert_eq!(
        m("gpu_labeler_nvml_status{status=\"unavailable\"}"),
        Some(1.0)
    );
    assert_eq!(m("gpu_labeler_nvml_status{status=\"ok\"}"), Some(0.0));
    let last = m("gpu_labeler_last_publish_timestamp_seconds").unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - last).abs() < 30.0, "{last} vs {now}");
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(line.starts_with("gpu_labeler_"), "{line}");
    }
    assert_eq!(get(addr, "/nope").0, 404);

    assert_eq!(agent.stop(), 0);
}

#[test]
fn log_json_writes_one_json_object_per_line() {
    let server = fake_server(&[]);
    let mut agent = agent().args(&["--log-json"]).start_fake(&server);
    agent.wait_log("published to node", WAIT);
    assert_eq!(agent.stop(), 0);
    let lines = agent.log();
    assert!(lines.len() >= 3, "{lines:?}");
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(v["level"].is_string(), "{l}");
        assert!(v["fields"]["message"].is_string(), "{l}");
    }
}

/// 8,000 idle connections from any pod (an open `/metrics` port): the agent holds at most 256
/// at once (closing the quietest for a new one) and closes idle ones after the header timeout, so memory stays bounded (it went from 9 to
/// 104 MB before) and /healthz answers again as soon as the flood stops.
#[test]
fn a_flood_of_idle_connections_costs_bounded_memory() {
    let server = fake_server(&[]);
    let mut agent = agent().start_fake(&server);
    let addr = agent.health_addr();
    wait_ready(&agent);
    let before = status_kib(&agent, "VmRSS");
    let mut held = Vec::new();
    for _ in 0..8000 {
        if let Ok(s) = std::net::TcpStream::connect(addr) {
            held.push(s);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let during = status_kib(&agent, "VmRSS");
    assert!(
        during < before + 16 * 1024,
        "RSS {before} KiB before, {during} KiB with {} idle connections",
        held.len()
    );
    // Idle connections are closed by the header timeout (5 s); health answers again.
    drop(held);
    let ok = wait_for(WAIT, || (get(addr, "/healthz").0 == 200).then_some(()));
    assert!(ok.is_some());
    assert!(agent.child_alive());
    assert_eq!(agent.stop(), 0);
}
