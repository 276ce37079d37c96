//! Taints from rules and the `GPUHealthy` condition (docs/taints.md), on the test API server
//! built from Kubernetes' own code (tests/kube-apiserver) with the shipped admission policy
//! enforced and the agent's token bound to its node: the node sink's read-modify-write of the
//! Node's atomic taint list beside another manager's taints, its 409 retry, its tracking
//! annotation across a restart, the policy's decisions on taint and status writes, and the real
//! `gpu-labeler run` process tainting and untainting its Node as its rules start and stop
//! matching.

mod apiserver;
mod common;
mod kube;
mod node_extras;
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use gpu_labeler::output::{GpuHealth, NodeOutput, Taint};
use gpu_labeler::publish::node::{NodeSink, NodeWrites};
use gpu_labeler::publish::outcome::OutcomeKind;
use kube::{KubeApiServer, Who};
use serde_json::{Value, json};

use node_extras::{
    NODE, UNHEALTHY, admin_taint, agent_writes, annotation, node_writes, runtime, sink, taints,
    unhealthy,
};

/// The shipped policy, our Node, and an admin's taint on it (`kubectl taint`, manager
/// `kubectl-taint`).
fn cluster() -> KubeApiServer {
    let s = KubeApiServer::with_shipped_node_policy();
    s.create_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    s.admin_patch(
        "kubectl-taint",
        &format!("/api/v1/nodes/{NODE}"),
        &json!({"spec": {"taints": [admin_taint()]}}),
    );
    s
}

fn taints_on() -> NodeWrites {
    node_writes(true, false)
}

fn output(labels: &[(&str, &str)], taints: &[(&str, &str, &str)]) -> NodeOutput {
    NodeOutput {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        taints: taints
            .iter()
            .map(|(k, v, e)| Taint {
                key: k.to_string(),
                value: v.to_string(),
                effect: e.to_string(),
            })
            .collect(),
        ..NodeOutput::default()
    }
}

fn gpu(taints: &[(&str, &str, &str)]) -> NodeOutput {
    output(&[("feature.node.kubernetes.io/gpu.count", "8")], taints)
}

const OURS: (&str, &str, &str) = (UNHEALTHY, "true", "NoSchedule");

fn version(s: &KubeApiServer) -> String {
    s.node(NODE)["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_rules_taint_appears_beside_an_admins_and_clears_when_the_rule_stops_matching() {
    let s = cluster();
    let rt = runtime();
    let mut sink = sink(&rt, &s, taints_on());

    let out = rt.block_on(sink.publish(&gpu(&[OURS]), false)).unwrap();
    assert_eq!(out.kind, OutcomeKind::Written);
    assert_eq!(taints(&s), json!([admin_taint(), unhealthy()]));
    assert_eq!(
        annotation(&s).as_deref(),
        Some("feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule")
    );
    assert_eq!(
        s.labels(NODE),
        BTreeMap::from([
            ("kubernetes.io/hostname".to_string(), NODE.to_string()),
            (
                "feature.node.kubernetes.io/gpu.count".to_string(),
                "8".to_string()
            ),
        ])
    );

    // The same again: nothing written.
    let before = version(&s);
    let out = rt.block_on(sink.publish(&gpu(&[OURS]), false)).unwrap();
    assert_eq!(out.kind, OutcomeKind::Unchanged);
    assert_eq!(version(&s), before);

    // The rule stops matching: our taint goes, the admin's stays, and so does the annotation.
    let out = rt.block_on(sink.publish(&gpu(&[]), false)).unwrap();
    assert_eq!(out.kind, OutcomeKind::Written);
    assert_eq!(taints(&s), json!([admin_taint()]));
    assert_eq!(annotation(&s), None);
    let out = rt.block_on(sink.publish(&gpu(&[]), false)).unwrap();
    assert_eq!(out.kind, OutcomeKind::Unchanged);

    // Label apply, then one taint write each time, every one admitted by the policy.
    let writes = agent_writes(&s);
    assert_eq!(
        writes,
        [
            "APPLY /api/v1/nodes/n1?fieldManager=gpu-labeler 200",
            "PATCH /api/v1/nodes/n1?fieldManager=gpu-labeler 200",
            "PATCH /api/v1/nodes/n1?fieldManager=gpu-labeler 200",
        ],
        "{}",
        s.log()
    );
}

#[test]
fn a_change_of_the_node_between_read_and_write_is_read_again_and_merged() {
    let s = cluster();
    let rt = runtime();
    let mut sink = sink(&rt, &s, taints_on());
    rt.block_on(sink.publish(&gpu(&[]), false)).unwrap();
    assert_eq!(taints(&s), json!([admin_taint()]));

    // Someone taints the Node after the sink read it: the sink's view is now out of date.
    let drain = json!({"key": "example.com/drain", "effect": "NoExecute"});
    s.admin_patch(
        "kubectl-taint",
        &format!("/api/v1/nodes/{NODE}"),
        &json!({"spec": {"taints": [admin_taint(), drain.clone()]}}),
    );

    let out = rt.block_on(sink.publish(&gpu(&[OURS]), false)).unwrap();
    assert_eq!(out.kind, OutcomeKind::Written);
    let mut got = taints(&s);
    // (The server stamps a NoExecute taint with the time it was added.)
    got[1].as_object_mut().unwrap().remove("timeAdded");
    assert_eq!(got, json!([admin_taint(), drain, unhealthy()]));
    // The write on the old view was refused (409), the one on the new view went through.
    let writes = agent_writes(&s);
    assert_eq!(
        writes[1..],
        [
            "PATCH /api/v1/nodes/n1?fieldManager=gpu-labeler 409",
            "PATCH /api/v1/nodes/n1?fieldManager=gpu-labeler 200",
        ],
        "{}",
        s.log()
    );
}

#[test]
fn a_restart_knows_its_taints_from_the_annotation_and_removes_a_stale_one() {
    let s = cluster();
    let rt = runtime();
    let old = (
        "feature.node.kubernetes.io/old-rule",
        "",
        "PreferNoSchedule",
    );
    {
        let mut first = sink(&rt, &s, taints_on());
        rt.block_on(first.publish(&gpu(&[old, OURS]), false))
            .unwrap();
    }
    assert_eq!(
        taints(&s),
        json!([admin_taint(),
               {"key": "feature.node.kubernetes.io/old-rule", "effect": "PreferNoSchedule"},
               unhealthy()])
    );
    // A new process whose rules no longer produce `old-rule`.
    let mut second = sink(&rt, &s, taints_on());
    let out = rt.block_on(second.publish(&gpu(&[OURS]), false)).unwrap();
    assert_eq!(out.kind, OutcomeKind::Written);
    assert_eq!(taints(&s), json!([admin_taint(), unhealthy()]));
    assert_eq!(
        annotation(&s).as_deref(),
        Some("feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule")
    );
    // And a third with the same rules writes nothing.
    let before = version(&s);
    let mut third = sink(&rt, &s, taints_on());
    let out = rt.block_on(third.publish(&gpu(&[OURS]), false)).unwrap();
    assert_eq!(out.kind, OutcomeKind::Unchanged);
    assert_eq!(version(&s), before);
}

#[test]
fn with_taints_off_nothing_is_written_and_ours_are_removed_once() {
    let s = cluster();
    let rt = runtime();
    let off = NodeWrites::default();
    // Never on: the rules' taints are not published, no taint write at all.
    let mut never = sink(&rt, &s, off);
    rt.block_on(never.publish(&gpu(&[OURS]), false)).unwrap();
    assert_eq!(taints(&s), json!([admin_taint()]));
    assert_eq!(
        agent_writes(&s),
        ["APPLY /api/v1/nodes/n1?fieldManager=gpu-labeler 200"]
    );

    // On, then off (a config change, a restart with the option gone): ours removed once.
    let mut on = sink(&rt, &s, taints_on());
    rt.block_on(on.publish(&gpu(&[OURS]), false)).unwrap();
    assert_eq!(taints(&s), json!([admin_taint(), unhealthy()]));
    let mut later = sink(&rt, &s, off);
    let out = rt.block_on(later.publish(&gpu(&[OURS]), false)).unwrap();
    assert_eq!(out.kind, OutcomeKind::Written);
    assert_eq!(taints(&s), json!([admin_taint()]));
    assert_eq!(annotation(&s), None);
    let n = agent_writes(&s).len();
    for _ in 0..2 {
        let out = rt.block_on(later.publish(&gpu(&[OURS]), false)).unwrap();
        assert_eq!(out.kind, OutcomeKind::Unchanged);
    }
    let mut restarted = sink(&rt, &s, off);
    rt.block_on(restarted.publish(&gpu(&[OURS]), false))
        .unwrap();
    assert_eq!(agent_writes(&s).len(), n);
}

#[test]
fn a_taint_outside_nfds_namespace_is_refused_with_a_warning_and_the_rest_written() {
    let s = cluster();
    let rt = runtime();
    let mut sink = sink(&rt, &s, taints_on());
    let out = rt
        .block_on(sink.publish(&gpu(&[("example.com/x", "", "NoSchedule"), OURS]), false))
        .unwrap();
    assert_eq!(
        out.refused
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>(),
        [
            "taint example.com/x:NoSchedule left out: not in feature.node.kubernetes.io or a sub-domain, the taint namespace the admission policy admits"
        ]
    );
    assert_eq!(taints(&s), json!([admin_taint(), unhealthy()]));
    // Reported once.
    let out = rt
        .block_on(sink.publish(&gpu(&[("example.com/x", "", "NoSchedule"), OURS]), false))
        .unwrap();
    assert_eq!(out.refused, []);
}

/// The policy, on the agent's own writes of the Node's spec: its taints in NFD's namespace are
/// admitted; every other taint and every other spec field refused.
#[test]
fn the_policy_admits_the_agents_taints_and_nothing_else_of_the_spec() {
    let s = cluster();
    let agent = Who::agent(NODE);
    let path = format!("/api/v1/nodes/{NODE}");
    let send = |spec: Value| {
        s.merge_patch(&agent, "gpu-labeler", &path, &json!({ "spec": spec }))
            .decision()
    };
    const TAINTS: &str = "gpu-labeler may only add, change or remove taints in feature.node.kubernetes.io and its sub-domains";
    const SPEC: &str = "gpu-labeler never changes a Node's spec (but for its taints) or status";
    let sub =
        json!({"key": "gpu.feature.node.kubernetes.io/x", "value": "1", "effect": "NoExecute"});
    let rows: Vec<(&str, Value, Result<(), String>)> = vec![
        (
            "add ours",
            json!({"taints": [admin_taint(), unhealthy()]}),
            Ok(()),
        ),
        (
            "change ours",
            json!({"taints": [admin_taint(),
                              {"key": UNHEALTHY, "value": "false", "effect": "NoSchedule"}]}),
            Ok(()),
        ),
        (
            "a sub-domain's",
            json!({"taints": [admin_taint(), sub]}),
            Ok(()),
        ),
        ("remove ours", json!({"taints": [admin_taint()]}), Ok(())),
        (
            "remove the admin's",
            json!({"taints": []}),
            Err(TAINTS.into()),
        ),
        (
            "change the admin's",
            json!({"taints": [{"key": "dedicated", "value": "all", "effect": "NoSchedule"}]}),
            Err(TAINTS.into()),
        ),
        (
            "add one outside the namespace",
            json!({"taints": [admin_taint(), {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}),
            Err(TAINTS.into()),
        ),
        (
            "a profile.node.kubernetes.io taint (a label namespace, not a taint one)",
            json!({"taints": [admin_taint(), {"key": "profile.node.kubernetes.io/x", "effect": "NoSchedule"}]}),
            Err(TAINTS.into()),
        ),
        ("cordon", json!({"unschedulable": true}), Err(SPEC.into())),
        (
            "a provider ID",
            json!({"providerID": "aws:///x"}),
            Err(SPEC.into()),
        ),
        (
            "a pod CIDR, with our taint",
            json!({"podCIDR": "10.0.0.0/24", "taints": [admin_taint(), unhealthy()]}),
            Err(SPEC.into()),
        ),
    ];
    let got: Vec<(&str, Result<(), String>)> = rows
        .iter()
        .map(|(what, spec, _)| (*what, send(spec.clone())))
        .collect();
    let want: Vec<(&str, Result<(), String>)> = rows
        .iter()
        .map(|(what, _, expected)| (*what, expected.clone()))
        .collect();
    assert_eq!(got, want);
    // Only the admin's taint is left (the last admitted write removed ours).
    assert_eq!(taints(&s), json!([admin_taint()]));
    // The status subresource stays closed without the health-condition component.
    let a = s.merge_patch(
        &agent,
        "gpu-labeler",
        &format!("{path}/status"),
        &json!({"status": {"conditions": [{"type": "GPUHealthy", "status": "True"}]}}),
    );
    assert_eq!(
        a.decision(),
        Err("gpu-labeler only patches Nodes; it may not UPDATE a Node (status)".into())
    );
}

// ---------------------------------------------------------------------------------------------
// The GPUHealthy condition, with deploy/components/health-condition's policy.

fn condition_cluster() -> KubeApiServer {
    let s = KubeApiServer::with_policy(&kube::shipped_node_policy(Some("health-condition")));
    s.create_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    // The kubelet's own condition and capacity.
    s.admin_patch(
        "kubelet",
        &format!("/api/v1/nodes/{NODE}/status"),
        &json!({"status": {"capacity": {"nvidia.com/gpu": "8"},
                           "conditions": [ready()]}}),
    );
    s
}

fn ready() -> Value {
    json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
           "message": "kubelet is posting ready status",
           "lastHeartbeatTime": "2026-12-06T10:00:00Z",
           "lastTransitionTime": "2026-12-06T09:00:00Z"})
}

/// What the agent makes of a `gpu.node` with this health: the labels, and the health the
/// condition follows.
fn health(value: &str, healthy: &str) -> NodeOutput {
    NodeOutput {
        health: Some(GpuHealth {
            health: value.into(),
            healthy: Some(healthy.into()),
            count: Some("8".into()),
            missing: None,
        }),
        ..output(
            &[
                ("feature.node.kubernetes.io/gpu.count", "8"),
                ("feature.node.kubernetes.io/gpu.health", value),
                ("feature.node.kubernetes.io/gpu.healthy.count", healthy),
            ],
            &[],
        )
    }
}

/// The Node's conditions as `type status reason message` (a strategic merge patch puts a new
/// condition first), and ours' transition time.
fn conditions(s: &KubeApiServer) -> (Vec<String>, Option<String>) {
    let node = s.node(NODE);
    let list = node["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let shown = list
        .iter()
        .map(|c| {
            format!(
                "{} {} {} {}",
                c["type"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    let ours = list
        .iter()
        .find(|c| c["type"] == "GPUHealthy")
        .and_then(|c| c["lastTransitionTime"].as_str())
        .map(str::to_string);
    (shown, ours)
}

const KUBELET_READY: &str = "Ready True KubeletReady kubelet is posting ready status";

#[test]
fn the_condition_is_set_flipped_kept_and_removed() {
    let s = condition_cluster();
    let rt = runtime();
    let mut sink = sink(&rt, &s, node_writes(false, true));
    let out = rt
        .block_on(sink.publish(&health("ok", "8"), false))
        .unwrap();
    assert_eq!(out.kind, OutcomeKind::Written);
    let (shown, first) = conditions(&s);
    assert_eq!(
        shown,
        [
            "GPUHealthy True GPUsHealthy 8 of 8 GPUs healthy",
            KUBELET_READY
        ]
    );

    // Unchanged: no write (not even of the heartbeat), in this process or the next.
    let before = version(&s);
    let out = rt
        .block_on(sink.publish(&health("ok", "8"), false))
        .unwrap();
    assert_eq!(out.kind, OutcomeKind::Unchanged);
    let mut restarted = self::sink(&rt, &s, node_writes(false, true));
    let out = rt
        .block_on(restarted.publish(&health("ok", "8"), false))
        .unwrap();
    assert_eq!(out.kind, OutcomeKind::Unchanged);
    assert_eq!(version(&s), before);

    // Each step a second after the last (transition times have a second's resolution): our
    // condition as shown beside the kubelet's once `output` is published, and its transition
    // time.
    let step = |sink: &mut NodeSink, output: &NodeOutput, condition: &str| {
        std::thread::sleep(Duration::from_millis(1100));
        rt.block_on(sink.publish(output, false)).unwrap();
        let (shown, time) = conditions(&s);
        assert_eq!(shown, [condition, KUBELET_READY]);
        time
    };
    // Flipped: a new status, a new transition time.
    let degraded = "GPUHealthy False GPUsDegraded";
    let flipped = step(
        &mut sink,
        &health("degraded", "7"),
        &format!("{degraded} 7 of 8 GPUs healthy"),
    );
    assert_ne!(flipped, first);
    // Another message, the same status: the transition time stays.
    let same = step(
        &mut sink,
        &health("degraded", "6"),
        &format!("{degraded} 6 of 8 GPUs healthy"),
    );
    assert_eq!(same, flipped);
    // Another reason, the same status (the faulty GPU fixed, another never came up: 7 of the
    // 8 expected): the transition time stays, so that node repair's toleration counts on.
    let mut short = health("degraded", "7");
    if let Some(h) = short.health.as_mut() {
        h.missing = Some("1".into());
    }
    let reasoned = step(
        &mut sink,
        &short,
        "GPUHealthy False GPUsMissing 7 of 8 GPUs healthy",
    );
    assert_eq!(reasoned, flipped);

    // No GPU health any more: our condition goes, the kubelet's stays.
    rt.block_on(sink.publish(&gpu(&[]), false)).unwrap();
    assert_eq!(conditions(&s), (vec![KUBELET_READY.to_string()], None));
}

const CONDITION_DENIED: &str = "gpu-labeler may change only the GPUHealthy condition of a Node";
const STATUS_DENIED: &str = "gpu-labeler never changes a Node's status but for its own condition";
const CONDITION_BOUNDS: &str = "the GPUHealthy condition of gpu-labeler is one entry, its status True, False or Unknown, its reason and message at most 1024 bytes each";
const MANAGED_DENIED: &str = "gpu-labeler may not change the managedFields of other managers, nor claim keys outside its namespaces";

/// The health-condition component's policy on the agent's own `nodes/status` writes, each row
/// a real merge patch after the rows before it: the `GPUHealthy` entry, and nothing else of
/// the status (a field the policy names nowhere, `status.declaredFeatures` of Kubernetes 1.35,
/// included); the entry itself bounded.
#[test]
fn the_condition_policy_admits_only_that_condition() {
    let s = condition_cluster();
    let agent = Who::agent(NODE);
    let path = format!("/api/v1/nodes/{NODE}/status");
    let send = |patch: Value| {
        s.merge_patch(&agent, "gpu-labeler", &path, &patch)
            .decision()
    };
    let ours = json!({"type": "GPUHealthy", "status": "True", "reason": "GPUsHealthy"});
    let with = |field: &str, value: Value| {
        let mut c = ours.clone();
        c[field] = value;
        json!({"status": {"conditions": [ready(), c]}})
    };
    let mut not_ready = ready();
    not_ready["status"] = json!("False");
    let rows: Vec<(&str, Value, Result<(), String>)> = vec![
        (
            "GPUHealthy",
            json!({"status": {"conditions": [ready(), ours.clone()]}}),
            Ok(()),
        ),
        (
            "the kubelet's Ready",
            json!({"status": {"conditions": [not_ready, ours.clone()]}}),
            Err(CONDITION_DENIED.into()),
        ),
        (
            "a condition of another type",
            json!({"status": {"conditions": [ready(), ours.clone(),
                                             {"type": "MemoryPressure", "status": "True"}]}}),
            Err(CONDITION_DENIED.into()),
        ),
        (
            "the capacity",
            json!({"status": {"capacity": {"nvidia.com/gpu": "0"}}}),
            Err(STATUS_DENIED.into()),
        ),
        (
            "status.declaredFeatures (Kubernetes 1.35's, named by no rule)",
            json!({"status": {"declaredFeatures": ["InPlacePodVerticalScaling"]}}),
            Err(STATUS_DENIED.into()),
        ),
        (
            "a message of 1 KiB",
            with("message", json!("m".repeat(1024))),
            Ok(()),
        ),
        (
            "a message of 2 KiB",
            with("message", json!("m".repeat(2048))),
            Err(CONDITION_BOUNDS.into()),
        ),
        (
            "a reason of 513 characters, 1,026 bytes",
            with("reason", json!("é".repeat(513))),
            Err(CONDITION_BOUNDS.into()),
        ),
        (
            "a second GPUHealthy",
            json!({"status": {"conditions": [ready(), ours.clone(),
                                             {"type": "GPUHealthy", "status": "False"}]}}),
            Err(CONDITION_BOUNDS.into()),
        ),
        (
            "a status of Maybe",
            with("status", json!("Maybe")),
            Err(CONDITION_BOUNDS.into()),
        ),
        (
            "no status",
            json!({"status": {"conditions": [ready(), {"type": "GPUHealthy", "reason": "GPUsHealthy"}]}}),
            Err(CONDITION_BOUNDS.into()),
        ),
    ];
    let got: Vec<(&str, Result<(), String>)> =
        rows.iter().map(|(w, p, _)| (*w, send(p.clone()))).collect();
    let want: Vec<(&str, Result<(), String>)> =
        rows.iter().map(|(w, _, e)| (*w, e.clone())).collect();
    assert_eq!(got, want);

    // The kubelet's managedFields entry of the status dropped by a forged `managedFields`: a
    // Node write carries them as sent, and is refused; a status write's are ignored by the
    // server (a subresource keeps the live ownership), so that entry stays.
    let without_kubelets_status = || {
        let node = s.node(NODE);
        let kept: Vec<Value> = node["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| !(m["manager"] == "kubelet" && m["subresource"] == "status"))
            .cloned()
            .collect();
        assert_eq!(
            kept.len() + 1,
            node["metadata"]["managedFields"].as_array().unwrap().len(),
            "{node}"
        );
        kept
    };
    let node_write = json!({"metadata": {"managedFields": without_kubelets_status()}});
    assert_eq!(
        s.merge_patch(
            &agent,
            "gpu-labeler",
            &format!("/api/v1/nodes/{NODE}"),
            &node_write
        )
        .decision(),
        Err(MANAGED_DENIED.into())
    );
    let status_write = json!({"metadata": {"managedFields": without_kubelets_status()},
                              "status": {"conditions": [ready(), with("message", json!("m".repeat(1024)))["status"]["conditions"][1].clone()]}});
    assert_eq!(send(status_write), Ok(()));
    without_kubelets_status();

    // Someone else sets GPUHealthy (a drift): the agent writes it back, taking over those
    // fields as any writer does; the others' entries but for that condition stay whole.
    s.admin_status_patch(
        "kubectl-edit",
        &path,
        &json!({"status": {"conditions": [{"type": "GPUHealthy", "status": "False", "reason": "Edited"}]}}),
    );
    let a = s.request(
        &agent,
        "PATCH",
        &format!("{path}?fieldManager=gpu-labeler"),
        Some((
            "application/strategic-merge-patch+json",
            &json!({"status": {"conditions": [ours.clone()]}}),
        )),
    );
    assert_eq!(a.decision(), Ok(()));
    assert_eq!(
        conditions(&s).0,
        [
            "Ready True KubeletReady kubelet is posting ready status",
            "GPUHealthy True GPUsHealthy mmmm"
        ]
        .map(|c| c.replace("mmmm", &"m".repeat(1024)))
    );

    // The main resource's spec rules hold as shipped.
    let a = s.merge_patch(
        &agent,
        "gpu-labeler",
        &format!("/api/v1/nodes/{NODE}"),
        &json!({"spec": {"unschedulable": true}}),
    );
    assert_eq!(
        a.decision(),
        Err("gpu-labeler never changes a Node's spec (but for its taints) or status".into())
    );
}

// ---------------------------------------------------------------------------------------------
// The daemon: `gpu-labeler run` tainting its Node from a rule, as deploy/components/health does.

/// Waits until the Node's taints are `want`; fails with the agent's log after 20 s.
fn wait_for_taints(s: &KubeApiServer, agent: &apiserver::Agent, want: Value) {
    let ok = apiserver::wait_for(Duration::from_secs(20), || {
        (taints(s) == want).then_some(())
    });
    assert!(
        ok.is_some(),
        "taints {} never became {want}; log:\n{}",
        taints(s),
        agent.log_text()
    );
}

fn taint_rule(vendor: &str) -> String {
    format!(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: taint-test\nspec:\n  rules:\n    - name: nvidia taint\n      taints:\n        - key: {UNHEALTHY}\n          value: \"true\"\n          effect: NoSchedule\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {{op: In, value: [\"{vendor}\"]}}\n"
    )
}

#[test]
fn the_daemon_taints_its_node_while_the_rule_matches() {
    let s = cluster();
    let spec = support::agent().node(NODE);
    let rules = spec.dir().join("rules.yaml");
    std::fs::write(&rules, taint_rule("10de")).unwrap();
    let mut agent = spec
        .args(&["--rules", rules.to_str().unwrap()])
        .config("publish: {taints: true}\n")
        .start_with(&s.kubeconfig(&Who::agent(NODE)));
    let wait = |want: Value| wait_for_taints(&s, &agent, want);
    wait(json!([admin_taint(), unhealthy()]));
    assert_eq!(
        annotation(&s).as_deref(),
        Some("feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule")
    );
    // The rule stops matching (a vendor the node does not have).
    std::fs::write(&rules, taint_rule("1234")).unwrap();
    wait(json!([admin_taint()]));
    assert_eq!(annotation(&s), None);
    assert_eq!(agent.stop(), 0, "{}", agent.log_text());
}

/// The rule deploy/components/health ships (read in place, as `rules check` reads it), on a
/// snapshot of the integrator's `gpu.node` health attributes.
fn health_snapshot(health: &str, healthy: &str) -> String {
    format!(
        "attributes:\n  gpu.node:\n    elements: {{health: {health}, count: \"8\", healthy_count: \"{healthy}\"}}\n"
    )
}

const HEALTH_RULES: &str = "deploy/components/health/rules.yaml";

#[test]
fn the_shipped_health_rule_taints_a_degraded_node_only() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap.yaml");
    let mut got = Vec::new();
    for (health, healthy) in [("degraded", "7"), ("ok", "8")] {
        std::fs::write(&snap, health_snapshot(health, healthy)).unwrap();
        let rules = common::repo().join(HEALTH_RULES);
        let r = common::run([
            "labels",
            "--features",
            snap.to_str().unwrap(),
            "--no-default-rules",
            "--rules",
            rules.to_str().unwrap(),
            "-o",
            "json",
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        got.push(serde_json::from_str::<Value>(&r.stdout).unwrap());
    }
    assert_eq!(
        got,
        [
            json!({"labels": {}, "taints": [unhealthy()]}),
            json!({"labels": {}}),
        ]
    );
}

/// `gpu-labeler run` with the component's rule and option (`GPU_LABELER_PUBLISH_TAINTS=true`),
/// its features from a snapshot that turns degraded and then ok again.
#[test]
fn the_daemon_with_the_health_component_taints_while_degraded() {
    let s = cluster();
    let spec = support::agent().node(NODE);
    let snap = spec.dir().join("snap.yaml");
    std::fs::write(&snap, health_snapshot("ok", "8")).unwrap();
    let rules = common::repo().join(HEALTH_RULES);
    let (rules, snap_path) = (rules.to_str().unwrap(), snap.to_str().unwrap());
    let mut agent = spec
        .args(&["--rules", rules, "--features", snap_path])
        .env("GPU_LABELER_PUBLISH_TAINTS", "true")
        .start_with(&s.kubeconfig(&Who::agent(NODE)));
    let wait = |want: Value| wait_for_taints(&s, &agent, want);
    // A first cycle done (ready): no taint while healthy.
    support::wait_ready(&agent);
    assert_eq!(taints(&s), json!([admin_taint()]));
    std::fs::write(&snap, health_snapshot("degraded", "7")).unwrap();
    wait(json!([admin_taint(), unhealthy()]));
    std::fs::write(&snap, health_snapshot("ok", "8")).unwrap();
    wait(json!([admin_taint()]));
    assert_eq!(annotation(&s), None);
    assert_eq!(agent.stop(), 0, "{}", agent.log_text());
}

/// The real `gpu-labeler run` with `publish.condition` on, under the health-condition
/// component's policy and with the agent's own token: the `GPUHealthy` condition follows the
/// built-in health labels, beside the kubelet's `Ready`, and flips when the node degrades.
#[test]
fn the_daemon_keeps_the_condition_with_the_health_labels() {
    let s = condition_cluster();
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snap.yaml");
    std::fs::write(&snap, health_snapshot("ok", "8")).unwrap();
    let kubeconfig = s.kubeconfig(&Who::agent(NODE));
    let mut args = apiserver::run_args(&kubeconfig, NODE, &["--features", snap.to_str().unwrap()]);
    // The built-in rules make gpu.health and gpu.healthy.count, which the condition reads.
    args.retain(|a| a != "--no-default-rules");
    let agent = apiserver::Agent::start(&args, &[("GPU_LABELER_PUBLISH_CONDITION", "true")]);
    let wait = |want: [&str; 2]| {
        let ok = apiserver::wait_for(Duration::from_secs(20), || {
            (conditions(&s).0 == want).then_some(())
        });
        assert!(
            ok.is_some(),
            "conditions {:?} never became {want:?}; log:\n{}",
            conditions(&s).0,
            agent.log_text()
        );
    };
    wait([
        "GPUHealthy True GPUsHealthy 8 of 8 GPUs healthy",
        KUBELET_READY,
    ]);
    std::fs::write(&snap, health_snapshot("degraded", "7")).unwrap();
    wait([
        "GPUHealthy False GPUsDegraded 7 of 8 GPUs healthy",
        KUBELET_READY,
    ]);
    let mut agent = agent;
    assert_eq!(agent.stop(), 0, "{}", agent.log_text());
}

#[test]
fn a_dry_run_says_the_taints_once_and_writes_nothing() {
    let s = cluster();
    let rt = runtime();
    let mut sink = sink(&rt, &s, taints_on());
    let before = version(&s);
    let kinds: Vec<OutcomeKind> = (0..2)
        .map(|_| rt.block_on(sink.publish(&gpu(&[OURS]), true)).unwrap().kind)
        .collect();
    assert_eq!(kinds, [OutcomeKind::DryRun, OutcomeKind::Unchanged]);
    assert_eq!(taints(&s), json!([admin_taint()]));
    assert_eq!(version(&s), before);
    assert_eq!(agent_writes(&s), Vec::<String>::new());
}

/// The whole path on discovered facts: `gpu-labeler run` on a writable copy of the Dell tree
/// with the built-in rules, the health component's rule and taints on, against the test API
/// server. GPU 1's link narrows (`current_link_width` 8 of 16): `gpu.health=degraded`,
/// `gpu.healthy.count=7` and the `gpu-unhealthy` taint appear beside the admin's taint; the link
/// is fixed: both stay for `clearAfter` (the hold), then the labels go back to `ok`/8 and the
/// taint goes, the admin's untouched.
#[test]
fn a_narrowed_link_taints_the_node_and_the_taint_clears_after_the_hold() {
    let s = cluster();
    let tree = common::Tree::copy_of("dell-xe9680-8xh100");
    let rules = common::repo().join(HEALTH_RULES);
    let mut agent = support::agent()
        .node(NODE)
        .default_rules()
        .sysfs_root(tree.root())
        .args(&["--rules", rules.to_str().unwrap()])
        .config("sources: {health: {clearAfter: 4s}}\npublish: {taints: true}\n")
        .start_with(&s.kubeconfig(&Who::agent(NODE)));
    let health = |s: &KubeApiServer| -> Vec<String> {
        s.labels(NODE)
            .into_iter()
            .filter(|(k, _)| k.contains("/gpu.health"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    };
    let state = |labels: [&str; 2], taints: Value| {
        let labels = vec![
            format!("feature.node.kubernetes.io/gpu.health={}", labels[0]),
            format!("feature.node.kubernetes.io/gpu.healthy.count={}", labels[1]),
        ];
        (labels, taints)
    };
    let wait = |want: &(Vec<String>, Value)| {
        let ok = apiserver::wait_for(Duration::from_secs(20), || {
            ((health(&s), taints(&s)) == *want).then_some(std::time::Instant::now())
        });
        ok.unwrap_or_else(|| {
            panic!(
                "never {want:?}: {:?} {}; log:\n{}",
                health(&s),
                taints(&s),
                agent.log_text()
            )
        })
    };
    let healthy = state(["ok", "8"], json!([admin_taint()]));
    let degraded = state(["degraded", "7"], json!([admin_taint(), unhealthy()]));
    wait(&healthy);
    tree.write_attr("0000:3b:00.0", "current_link_width", b"8\n");
    wait(&degraded);
    // Seen by a scan just before the fix, then fixed: held for clearAfter, then clear.
    std::thread::sleep(Duration::from_millis(1500));
    tree.write_attr("0000:3b:00.0", "current_link_width", b"16\n");
    let fixed = std::time::Instant::now();
    // The last scan that saw it ran at most a cycle (1 s) before the fix: nothing clears for
    // 3 s after the fix. The time is taken when the clear is seen, so load only lengthens it.
    let cleared = wait(&healthy);
    assert!(
        cleared.duration_since(fixed) >= Duration::from_millis(2900),
        "cleared {:?} after the fix",
        cleared.duration_since(fixed)
    );
    assert_eq!(annotation(&s), None);
    assert_eq!(agent.stop(), 0, "{}", agent.log_text());
}

/// An uninstall must not leave a `NoSchedule` taint nothing will ever clear: `prune` takes off
/// the taints the tracking annotation lists, the annotation, and the `GPUHealthy` condition our
/// field manager wrote, with the labels; the admin's taint, the kubelet's condition and another
/// tool's `GPUHealthy` on another Node stay. It runs as the Job's own service account, under
/// its own policy.
#[test]
fn prune_takes_our_taints_and_condition_off_and_leaves_the_others() {
    let s = condition_cluster();
    let admin = Who::admin();
    s.admin_patch(
        "kubectl-taint",
        &format!("/api/v1/nodes/{NODE}"),
        &json!({"spec": {"taints": [admin_taint()]}}),
    );
    // Another Node, whose GPUHealthy another tool writes.
    s.create_node("n2", &[("kubernetes.io/hostname", "n2")]);
    let theirs = json!({"type": "GPUHealthy", "status": "False", "reason": "XidSeen"});
    let a = s.request(
        &admin,
        "PATCH",
        "/api/v1/nodes/n2/status?fieldManager=gpu-health-checker",
        Some((
            "application/strategic-merge-patch+json",
            &json!({"status": {"conditions": [theirs]}}),
        )),
    );
    assert!(a.ok(), "{}", a.body);

    let rt = runtime();
    let mut sink = sink(&rt, &s, node_writes(true, true));
    let mut degraded = health("degraded", "7");
    degraded.taints = gpu(&[OURS]).taints;
    rt.block_on(sink.publish(&degraded, false)).unwrap();
    assert_eq!(taints(&s), json!([admin_taint(), unhealthy()]));

    // The prune Job's own account, under its own policy (deploy/prune), as shipped.
    s.add_policy(&kube::shipped_prune_policy());
    let kubeconfig = s.kubeconfig(&Who::prune());
    let k = kubeconfig.to_str().unwrap();
    let prune = |extra: &[&str]| {
        common::run([&["prune", "--all-nodes", "--kubeconfig", k][..], extra].concat())
    };
    let dry = prune(&["--dry-run"]);
    let plan = "node n1:\n\
        - label feature.node.kubernetes.io/gpu.count=8: would be removed\n\
        - label feature.node.kubernetes.io/gpu.health=degraded: would be removed\n\
        - label feature.node.kubernetes.io/gpu.healthy.count=7: would be removed\n\
        - taint feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule: would be removed\n\
        - annotation gpu-labeler.feature.node.kubernetes.io/taints=feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule: would be removed\n\
        - condition GPUHealthy=False: would be removed\n\
        node n2:\n  nothing of gpu-labeler's\n\
        2 node(s), 1 with something of gpu-labeler's (dry run: nothing changed)\n";
    assert_eq!(
        (dry.code, dry.stdout.as_str(), dry.stderr.as_str()),
        (4, plan, "")
    );
    assert_eq!(taints(&s), json!([admin_taint(), unhealthy()]));

    let done = prune(&[]);
    let said = plan
        .replace("would be removed", "removed")
        .replace(" (dry run: nothing changed)", "");
    assert_eq!(
        (done.code, done.stdout.as_str(), done.stderr.as_str()),
        (0, said.as_str(), "")
    );
    assert_eq!(taints(&s), json!([admin_taint()]));
    assert_eq!(annotation(&s), None);
    assert_eq!(conditions(&s).0, [KUBELET_READY]);
    assert_eq!(
        s.labels(NODE),
        BTreeMap::from([("kubernetes.io/hostname".to_string(), NODE.to_string())])
    );
    // n2's conditions, whole: only the other tool's GPUHealthy, as it wrote it.
    let kept: Vec<(String, String, String)> = s.node("n2")["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let f = |k: &str| c[k].as_str().unwrap_or("").to_string();
            (f("type"), f("status"), f("reason"))
        })
        .collect();
    assert_eq!(
        kept,
        [("GPUHealthy".into(), "False".into(), "XidSeen".into())]
    );

    // Again: nothing left of ours, nothing written.
    let from = s.requests().len();
    let again = prune(&[]);
    assert_eq!(
        again.stdout,
        "node n1:\n  nothing of gpu-labeler's\nnode n2:\n  nothing of gpu-labeler's\n\
         2 node(s), 0 with something of gpu-labeler's\n"
    );
    assert!(s.requests()[from..].iter().all(|r| !r.is_write()));
}
