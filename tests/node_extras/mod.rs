//! What tests/taints.rs and tests/extras_guard.rs share: the node sink with the agent's token on
//! the test API server, and the Node's taints, tracking annotation and writes as they read them.
#![allow(dead_code)]

use std::time::Duration;

use gpu_labeler::publish::client::kube_client;
use gpu_labeler::publish::error::MAX_RESPONSE_BYTES;
use gpu_labeler::publish::node::{NodeSink, NodeWrites};
use gpu_labeler::publish::taints::TAINTS_ANNOTATION;
use serde_json::{Value, json};

use crate::kube::{KubeApiServer, Who};

pub const NODE: &str = "n1";
pub const UNHEALTHY: &str = "feature.node.kubernetes.io/gpu-unhealthy";

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An admin's taint (`kubectl taint`).
pub fn admin_taint() -> Value {
    json!({"key": "dedicated", "value": "ml", "effect": "NoSchedule"})
}

/// The health component's taint.
pub fn unhealthy() -> Value {
    json!({"key": UNHEALTHY, "value": "true", "effect": "NoSchedule"})
}

/// What a sink writes besides labels: taints, the GPUHealthy condition.
pub fn node_writes(taints: bool, condition: bool) -> NodeWrites {
    NodeWrites { taints, condition }
}

/// A node sink with the agent's token (as the daemon builds it).
pub fn sink(rt: &tokio::runtime::Runtime, s: &KubeApiServer, writes: NodeWrites) -> NodeSink {
    let kubeconfig = s.kubeconfig(&Who::agent(NODE));
    let client = rt
        .block_on(kube_client(
            Some(&kubeconfig),
            Duration::from_secs(10),
            MAX_RESPONSE_BYTES,
        ))
        .unwrap();
    let mut sink = NodeSink::new(client, NODE, Duration::from_secs(10));
    sink.set_writes(writes);
    sink
}

/// The Node's whole taint list (`[]` when it has none).
pub fn taints(s: &KubeApiServer) -> Value {
    match &s.node(NODE)["spec"]["taints"] {
        Value::Null => json!([]),
        t => t.clone(),
    }
}

/// The tracking annotation's value.
pub fn annotation(s: &KubeApiServer) -> Option<String> {
    s.node(NODE)["metadata"]["annotations"][TAINTS_ANNOTATION]
        .as_str()
        .map(str::to_string)
}

/// `gpu-labeler prune --all-nodes` as `who` (the Job's account, or an admin).
pub fn prune_all(s: &KubeApiServer, who: &Who) -> crate::common::Run {
    let kubeconfig = s.kubeconfig(who);
    crate::common::run([
        "prune",
        "--all-nodes",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ])
}

/// `prune --all-nodes` as `who`: it succeeds and prints `plan`, whole.
#[track_caller]
pub fn assert_pruned(s: &KubeApiServer, who: &Who, plan: &str) {
    let r = prune_all(s, who);
    assert_eq!((r.code, r.stdout.as_str()), (0, plan), "{}", r.stderr);
}

/// The agent's writes the server answered, as `verb uri code`.
pub fn agent_writes(s: &KubeApiServer) -> Vec<String> {
    s.requests()
        .into_iter()
        .filter(|r| r.user_agent.starts_with("gpu-labeler/") && r.is_write())
        .map(|r| format!("{} {} {}", r.verb, r.uri, r.code))
        .collect()
}
