//! What the agent writes beside its labels, under attack and drift (issue #44), on the test API
//! server built from Kubernetes' own code with the shipped policies: a tracking annotation
//! planted by someone else or listing an admin's taint, a rule asking for thousands of taints,
//! a taint or condition of ours changed by someone else, a taint write the server refuses for
//! good. Each scenario is the real node sink or the real `gpu-labeler run` process.

mod apiserver;
mod common;
mod kube;
mod node_extras;
mod support;

use std::time::{Duration, Instant};

use gpu_labeler::output::{GpuHealth, NodeOutput, Taint};
use gpu_labeler::publish::node::NodeWrites;
use gpu_labeler::publish::outcome::OutcomeKind;
use gpu_labeler::publish::taints::TAINTS_ANNOTATION;
use kube::{KubeApiServer, Who};
use node_extras::{
    NODE, UNHEALTHY, admin_taint, agent_writes, annotation, assert_pruned, node_writes, runtime,
    sink, taints, unhealthy,
};
use serde_json::json;

/// Our Node with an admin's taint (`kubectl taint`), on a server with `policy` in force (the
/// shipped Node policy with the health-condition component; none: no policy at all).
fn cluster(policy: bool) -> KubeApiServer {
    let s = if policy {
        KubeApiServer::with_policy(&kube::shipped_node_policy(Some("health-condition")))
    } else {
        KubeApiServer::start()
    };
    s.create_node(NODE, &[("kubernetes.io/hostname", NODE)]);
    s.admin_patch(
        "kubectl-taint",
        &format!("/api/v1/nodes/{NODE}"),
        &json!({"spec": {"taints": [admin_taint()]}}),
    );
    s
}

/// `who` writes the tracking annotation as field manager `manager`.
fn plant(s: &KubeApiServer, who: &Who, manager: &str, value: &str) {
    let a = s.merge_patch(
        who,
        manager,
        &format!("/api/v1/nodes/{NODE}"),
        &json!({"metadata": {"annotations": {TAINTS_ANNOTATION: value}}}),
    );
    assert!(a.ok(), "{}", a.body);
}

/// A degraded node: its labels, the health taint and the health the condition follows.
fn degraded() -> NodeOutput {
    NodeOutput {
        labels: [("feature.node.kubernetes.io/gpu.count", "8")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        taints: vec![Taint {
            key: UNHEALTHY.into(),
            value: "true".into(),
            effect: "NoSchedule".into(),
        }],
        health: Some(GpuHealth {
            health: "degraded".into(),
            healthy: Some("7".into()),
            count: Some("8".into()),
            missing: None,
        }),
        ..NodeOutput::default()
    }
}

/// Our condition as `status reason message` (`None`: there is none).
fn condition(s: &KubeApiServer) -> Option<String> {
    kube::gpu_healthy_condition(&s.node(NODE), " ")
}

const DEGRADED: &str = "False GPUsDegraded 7 of 8 GPUs healthy";

fn foreign(manager: &str) -> String {
    format!(
        "annotation {TAINTS_ANNOTATION} was written by field manager \"{manager}\", not gpu-labeler: none of its entries is trusted, and it is left as it is"
    )
}

/// An annotation someone else wrote that lists the admin's taint: before, with taints off and
/// no policy, the agent removed the admin's taint itself; with the policy, every write of the
/// taints and of the condition failed. Now nothing of it is trusted, the admin's taint stays,
/// the condition and the health taint are written, and the annotation is left as it is.
#[test]
fn a_planted_annotation_removes_nothing_and_stops_nothing() {
    for policy in [false, true] {
        let s = cluster(policy);
        plant(
            &s,
            &Who::admin(),
            "kubectl-annotate",
            "dedicated=ml:NoSchedule",
        );
        let rt = runtime();
        // Taints off: the annotation is not ours to act on.
        let mut off = sink(&rt, &s, node_writes(false, true));
        let out = rt.block_on(off.publish(&degraded(), false)).unwrap();
        assert_eq!(
            (out.kind, out.warnings, out.refused),
            (
                OutcomeKind::Written,
                vec![foreign("kubectl-annotate")],
                vec![]
            ),
            "policy {policy}"
        );
        assert_eq!(taints(&s), json!([admin_taint()]), "policy {policy}");
        assert_eq!(condition(&s).as_deref(), Some(DEGRADED));
        assert_eq!(
            annotation(&s).as_deref(),
            Some("dedicated=ml:NoSchedule"),
            "policy {policy}"
        );

        // Taints on: ours beside the admin's, the planted annotation still left alone.
        let mut on = sink(&rt, &s, node_writes(true, true));
        let out = rt.block_on(on.publish(&degraded(), false)).unwrap();
        assert_eq!(
            (out.kind, out.warnings),
            (OutcomeKind::Written, vec![foreign("kubectl-annotate")])
        );
        assert_eq!(taints(&s), json!([admin_taint(), unhealthy()]));
        assert_eq!(annotation(&s).as_deref(), Some("dedicated=ml:NoSchedule"));
        // Said once; nothing written again.
        let before = agent_writes(&s).len();
        let out = rt.block_on(on.publish(&degraded(), false)).unwrap();
        assert_eq!((out.kind, out.warnings), (OutcomeKind::Unchanged, vec![]));
        assert_eq!(agent_writes(&s).len(), before);
    }
}

/// The agent's own token may write the annotation under gpu-labeler's field manager: then it
/// is ours, and only the entries gpu-labeler could have written are acted on. The admin's
/// `dedicated` taint stays; our stale one goes.
#[test]
fn our_own_annotation_listing_an_admins_taint_removes_only_ours() {
    let s = cluster(true);
    let agent = Who::agent(NODE);
    let a = s.merge_patch(
        &agent,
        "gpu-labeler",
        &format!("/api/v1/nodes/{NODE}"),
        &json!({"spec": {"taints": [admin_taint(), unhealthy()]}}),
    );
    assert!(a.ok(), "{}", a.body);
    plant(
        &s,
        &agent,
        "gpu-labeler",
        &format!("dedicated=ml:NoSchedule,{UNHEALTHY}=true:NoSchedule"),
    );
    let rt = runtime();
    let mut off = sink(&rt, &s, NodeWrites::default());
    let healthy = NodeOutput {
        labels: degraded().labels,
        ..NodeOutput::default()
    };
    let out = rt.block_on(off.publish(&healthy, false)).unwrap();
    assert_eq!(
        (out.kind, out.warnings),
        (
            OutcomeKind::Written,
            vec![format!(
                "annotation {TAINTS_ANNOTATION}: entry \"dedicated=ml:NoSchedule\" ignored: not in feature.node.kubernetes.io or a sub-domain, so not a taint gpu-labeler writes"
            )]
        )
    );
    assert_eq!(taints(&s), json!([admin_taint()]));
    assert_eq!(annotation(&s), None);
}

/// `prune` (the uninstall Job, as the admin) leaves an annotation someone else wrote, and the
/// admin's taint it lists, as they are; the labels go.
#[test]
fn prune_trusts_no_planted_annotation() {
    let s = cluster(true);
    let rt = runtime();
    let mut sink = sink(&rt, &s, NodeWrites::default());
    rt.block_on(sink.publish(&degraded(), false)).unwrap();
    plant(
        &s,
        &Who::admin(),
        "kubectl-annotate",
        "dedicated=ml:NoSchedule",
    );
    assert_pruned(
        &s,
        &Who::admin(),
        "node n1:\n- label feature.node.kubernetes.io/gpu.count=8: removed\n1 node(s), 1 with something of gpu-labeler's\n",
    );
    assert_eq!(taints(&s), json!([admin_taint()]));
    assert_eq!(annotation(&s).as_deref(), Some("dedicated=ml:NoSchedule"));
    assert_eq!(
        s.labels(NODE).get("feature.node.kubernetes.io/gpu.count"),
        None
    );
}

fn health_snapshot(health: &str, healthy: &str) -> String {
    format!(
        "attributes:\n  gpu.node:\n    elements: {{health: {health}, count: \"8\", healthy_count: \"{healthy}\"}}\n"
    )
}

/// A rule file asking for `n` taints in one rule.
fn taint_bomb(n: usize) -> String {
    let mut s = String::from(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: bomb\nspec:\n  rules:\n    - name: many taints\n      taints:\n",
    );
    for i in 0..n {
        s.push_str(&format!(
            "        - {{key: feature.node.kubernetes.io/t{i}, value: \"{}\", effect: NoSchedule}}\n",
            "v".repeat(63)
        ));
    }
    s.push_str("      matchFeatures: []\n");
    s
}

/// 3,000 taints in one rule (an annotation over 256 KiB: a 422 retried 21 times in 20 s before,
/// and neither the health taint nor the condition written): the rule's taints are refused,
/// naming it, and the health component's taint and the condition are written by one
/// `run --oneshot` that succeeds.
#[test]
fn three_thousand_taints_in_a_rule_do_not_stop_the_health_taint_or_the_condition() {
    let s = cluster(true);
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).unwrap();
    std::fs::write(rules.join("a-bomb.yaml"), taint_bomb(3000)).unwrap();
    std::fs::copy(
        common::repo().join("deploy/components/health/rules.yaml"),
        rules.join("b-health.yaml"),
    )
    .unwrap();
    let snap = dir.path().join("snap.yaml");
    std::fs::write(&snap, health_snapshot("degraded", "7")).unwrap();
    let (rules_dir, snap) = (rules.to_str().unwrap(), snap.to_str().unwrap());
    let args = support::agent()
        .node(NODE)
        .default_rules()
        .args(&["--rules", rules_dir, "--features", snap, "--oneshot"])
        .command_line(&s.kubeconfig(&Who::agent(NODE)));
    let r = common::run_env(
        &args,
        &[
            ("GPU_LABELER_PUBLISH_TAINTS", "true"),
            ("GPU_LABELER_PUBLISH_CONDITION", "true"),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(taints(&s), json!([admin_taint(), unhealthy()]));
    assert_eq!(condition(&s).as_deref(), Some(DEGRADED));
    let refusals: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("rejected"))
        .map(|l| l.split_once("WARN").map_or(l, |(_, m)| m).trim())
        .collect();
    let at = rules.join("a-bomb.yaml");
    assert_eq!(
        refusals,
        vec![format!(
            "taint \"feature.node.kubernetes.io/t0={}:NoSchedule\" from rule \"many taints\" (NodeFeatureRule \"bomb\", {}:7:7) rejected: this rule's 3000 taint(s), this one first, with the 0 of the rules before it, are more than the 64 taints a rule set may ask for: all of this rule's refused",
            "v".repeat(63),
            at.display()
        )]
    );
}

/// The real `gpu-labeler run` with the agent's token on a degraded node (a snapshot in `dir`),
/// the built-in rules and the health component's, writing taints and the condition.
fn degraded_agent(s: &KubeApiServer, dir: &std::path::Path) -> apiserver::Agent {
    let snap = dir.join("snap.yaml");
    std::fs::write(&snap, health_snapshot("degraded", "7")).unwrap();
    let kubeconfig = s.kubeconfig(&Who::agent(NODE));
    let rules = common::repo().join("deploy/components/health/rules.yaml");
    let mut args = apiserver::run_args(
        &kubeconfig,
        NODE,
        &[
            "--rules",
            rules.to_str().unwrap(),
            "--features",
            snap.to_str().unwrap(),
        ],
    );
    args.retain(|a| a != "--no-default-rules");
    apiserver::Agent::start(
        &args,
        &[
            ("GPU_LABELER_PUBLISH_TAINTS", "true"),
            ("GPU_LABELER_PUBLISH_CONDITION", "true"),
        ],
    )
}

/// Waits up to `limit` for `f`; the time it took.
fn within(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let t = Instant::now();
    apiserver::wait_for(limit, || f().then_some(()))?;
    Some(t.elapsed())
}

/// Someone removes the agent's taint, or sets `GPUHealthy=True` on a degraded node: before,
/// not restored within 30 s (the agent trusted its cached Node for an hour). Now the Node watch
/// guards them: restored within two intervals (1 s here), and nothing written in between.
#[test]
fn a_taint_or_condition_of_ours_changed_by_someone_else_is_restored_within_two_intervals() {
    let s = cluster(true);
    let dir = tempfile::tempdir().unwrap();
    let mut agent = degraded_agent(&s, dir.path());
    let settled = || {
        taints(&s) == json!([admin_taint(), unhealthy()])
            && condition(&s).as_deref() == Some(DEGRADED)
    };
    within(Duration::from_secs(20), settled)
        .unwrap_or_else(|| panic!("never settled; log:\n{}", agent.log_text()));
    // Steady: three intervals, no write.
    std::thread::sleep(Duration::from_secs(2));
    let writes = agent_writes(&s).len();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(agent_writes(&s).len(), writes, "{}", agent.log_text());

    let admin = Who::admin();
    // The taint taken off by someone else.
    s.admin_patch(
        "kubectl-taint",
        &format!("/api/v1/nodes/{NODE}"),
        &json!({"spec": {"taints": [admin_taint()]}}),
    );
    let took = within(Duration::from_secs(10), settled);
    assert!(
        took.is_some_and(|t| t <= Duration::from_secs(2)),
        "taint restored after {took:?}; log:\n{}",
        agent.log_text()
    );
    // The condition set to True by someone else.
    let a = s.request(
        &admin,
        "PATCH",
        &format!("/api/v1/nodes/{NODE}/status?fieldManager=someone"),
        Some((
            "application/strategic-merge-patch+json",
            &json!({"status": {"conditions": [
                {"type": "GPUHealthy", "status": "True", "reason": "Fine", "message": "all good"}
            ]}}),
        )),
    );
    assert!(a.ok(), "{}", a.body);
    assert_eq!(condition(&s).as_deref(), Some("True Fine all good"));
    let took = within(Duration::from_secs(10), settled);
    assert!(
        took.is_some_and(|t| t <= Duration::from_secs(2)),
        "condition restored after {took:?}; log:\n{}",
        agent.log_text()
    );
    // Steady again: no write.
    std::thread::sleep(Duration::from_secs(2));
    let writes = agent_writes(&s).len();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(agent_writes(&s).len(), writes, "{}", agent.log_text());
    assert_eq!(agent.stop(), 0, "{}", agent.log_text());
}

/// A taint write the server refuses for good (here a site's own policy forbids the agent any
/// taint: a 422): tried once, reported once, not retried every few seconds; the condition is written
/// all the same and the agent stays ready.
#[test]
fn a_taint_write_refused_for_good_is_tried_once_and_the_condition_still_written() {
    let s = cluster(true);
    s.apply_yaml(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: no-agent-taints}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules:\n      - {apiGroups: [\"\"], apiVersions: [\"*\"], operations: [\"UPDATE\"], resources: [\"nodes\"]}\n  matchConditions:\n    - {name: agent, expression: \"request.userInfo.username.endsWith(':gpu-labeler')\"}\n  validations:\n    - expression: \"(has(object.spec.taints) ? object.spec.taints : []) == (has(oldObject.spec.taints) ? oldObject.spec.taints : [])\"\n      message: this site manages taints itself\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: no-agent-taints}\nspec: {policyName: no-agent-taints, validationActions: [Deny]}\n",
    );
    let agent_who = Who::agent(NODE);
    // A dry run, so that the probe changes nothing while the policy is not yet loaded.
    s.wait_enforced(|| {
        s.request(
            &agent_who,
            "PATCH",
            &format!("/api/v1/nodes/{NODE}?fieldManager=probe&dryRun=All"),
            Some((
                "application/merge-patch+json",
                &json!({"spec": {"taints": [admin_taint(), unhealthy()]}}),
            )),
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let mut agent = degraded_agent(&s, dir.path());
    within(Duration::from_secs(20), || {
        condition(&s).as_deref() == Some(DEGRADED)
    })
    .unwrap_or_else(|| panic!("no condition; log:\n{}", agent.log_text()));
    let addr = agent.health_addr();
    within(Duration::from_secs(10), || {
        apiserver::get(addr, "/readyz").0 == 200
    })
    .unwrap_or_else(|| panic!("never ready; log:\n{}", agent.log_text()));
    // Five intervals on: one attempt at the taints, no more.
    std::thread::sleep(Duration::from_secs(5));
    let taint_writes: Vec<String> = agent_writes(&s)
        .into_iter()
        .filter(|w| w.starts_with("PATCH") && w.ends_with(" 422") && !w.contains("/status"))
        .collect();
    assert_eq!(
        taint_writes.len(),
        1,
        "{taint_writes:?}\n{}",
        agent.log_text()
    );
    assert_eq!(taints(&s), json!([admin_taint()]));
    assert_eq!(apiserver::get(addr, "/readyz").0, 200);
    let log = agent.log_text();
    assert_eq!(
        agent.count_lines("this site manages taints itself"),
        1,
        "{log}"
    );
    assert_eq!(agent.stop(), 0, "{}", agent.log_text());
}

/// Someone edited the `GPUHealthy` condition the agent wrote (its fields are theirs too): the
/// prune account, under its own shipped policy, leaves it to them and says so, and takes the
/// rest off; before, prune tried to remove it and the policy refused the whole node.
#[test]
fn prune_leaves_a_condition_someone_else_edited() {
    let s = cluster(true);
    s.add_policy(&kube::shipped_prune_policy());
    let rt = runtime();
    let mut sink = sink(&rt, &s, node_writes(false, true));
    rt.block_on(sink.publish(&degraded(), false)).unwrap();
    assert_eq!(condition(&s).as_deref(), Some(DEGRADED));
    s.admin_status_patch(
        "someone",
        &format!("/api/v1/nodes/{NODE}/status"),
        &json!({"status": {"conditions": [
            {"type": "GPUHealthy", "status": "False", "reason": "GPUsDegraded",
             "message": "7 of 8 GPUs healthy; GPU 3 sent for RMA"}
        ]}}),
    );
    assert_pruned(
        &s,
        &Who::prune(),
        "node n1:\n- label feature.node.kubernetes.io/gpu.count=8: removed\n= condition GPUHealthy=False: stays, also owned by \"someone\"\n1 node(s), 1 with something of gpu-labeler's\n",
    );
    assert_eq!(
        condition(&s).as_deref(),
        Some("False GPUsDegraded 7 of 8 GPUs healthy; GPU 3 sent for RMA")
    );
    assert_eq!(taints(&s), json!([admin_taint()]));
    assert_eq!(
        s.labels(NODE).get("feature.node.kubernetes.io/gpu.count"),
        None
    );
}
