//! What the node sink writes besides labels, when the config asks for it (docs/taints.md):
//! the rules' taints in `spec.taints` (`publish.taints`, NFD's `enable-taints`) and a
//! `GPUHealthy` condition in `status.conditions` (`publish.condition`).
//!
//! Taints are an atomic list: the Node has one `spec.taints`, shared by every writer. The sink
//! takes the Node's list, drops the taints it put there before (the tracking annotation says
//! which), adds the ones the rules produce now, and writes the whole list back with the Node's
//! resourceVersion as a precondition, together with the annotation: a change someone made in
//! between is a 409, read again and merged, never overwritten. This module holds the pure part:
//! the annotation's format, the merge, the condition.

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint as NodeTaint};
use serde_json::{Value, json};

use crate::output::{GpuHealth, MAX_TAINTS, Taint};
use crate::validate::{FEATURE_NS, namespace, namespace_matches};

/// The annotation that records the taints the agent put on the Node (NFD's master keeps
/// `nfd.node.kubernetes.io/taints` for the same purpose, in the same format): a restart, or a
/// rule that stopped matching, knows which taints to remove. In a namespace the shipped
/// admission policy admits.
pub const TAINTS_ANNOTATION: &str = "gpu-labeler.feature.node.kubernetes.io/taints";

/// The condition type the sink sets on `nodes/status` with `publish.condition`.
pub const CONDITION_TYPE: &str = "GPUHealthy";

/// Whether the sink may write a taint with this key: NFD's taint namespace
/// `feature.node.kubernetes.io` and its sub-domains, which the shipped admission policy admits
/// (`allowedTaintKey`). NFD's master also applies taints in any namespace outside
/// `kubernetes.io`; the agent, whose policy admits only these, refuses the others.
pub fn allowed_taint_key(key: &str) -> bool {
    let ns = namespace(key);
    key.len() > ns.len() + 1
        && [FEATURE_NS, "*.feature.node.kubernetes.io"]
            .iter()
            .any(|p| namespace_matches(ns, p))
}

/// `key=value:effect`, or `key:effect` without a value: kubectl's and NFD's form.
pub fn taint_string(t: &Taint) -> String {
    if t.value.is_empty() {
        format!("{}:{}", t.key, t.effect)
    } else {
        format!("{}={}:{}", t.key, t.value, t.effect)
    }
}

/// The annotation's value for `taints` (`None`: no annotation).
pub fn annotation_value(taints: &[Taint]) -> Option<String> {
    if taints.is_empty() {
        return None;
    }
    Some(
        taints
            .iter()
            .map(taint_string)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// The taints of the tracking annotation that are gpu-labeler's to remove, and the entries
/// ignored, each with why (reported once, never acted on).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tracked {
    pub taints: Vec<Taint>,
    pub ignored: Vec<String>,
}

/// What the tracking annotation may make the agent (or `prune`) remove: only entries that are
/// taints it could have written (`allowed_taint_key`, a real effect), at most `MAX_TAINTS` of
/// them, and none at all when another field manager wrote the annotation (`written_by`): the
/// agent's token, an admin or another tool can write any value there, and a planted
/// `dedicated=ml:NoSchedule` must not take an admin's taint off the Node.
pub fn tracked(value: Option<&str>, written_by: Option<&str>) -> Tracked {
    let Some(value) = value else {
        return Tracked::default();
    };
    if let Some(other) = written_by {
        return Tracked {
            taints: Vec::new(),
            ignored: vec![format!(
                "annotation {TAINTS_ANNOTATION} was written by field manager {other:?}, not gpu-labeler: none of its entries is trusted, and it is left as it is"
            )],
        };
    }
    let (parsed, bad) = parse_annotation(value);
    let mut out = Tracked {
        taints: Vec::new(),
        ignored: bad
            .into_iter()
            .map(|b| {
                format!(
                    "annotation {TAINTS_ANNOTATION}: entry {:?} is not a taint (key=value:effect); ignored",
                    crate::validate::elide(&b, 100)
                )
            })
            .collect(),
    };
    for t in parsed {
        let why = if !allowed_taint_key(&t.key) {
            Some(
                "not in feature.node.kubernetes.io or a sub-domain, so not a taint gpu-labeler writes",
            )
        } else if !EFFECTS.contains(&t.effect.as_str()) {
            Some("not a taint effect (NoSchedule, PreferNoSchedule or NoExecute)")
        } else if out.taints.len() >= MAX_TAINTS {
            Some("more entries than the 64 taints gpu-labeler writes at most")
        } else {
            None
        };
        match why {
            Some(why) => out.ignored.push(format!(
                "annotation {TAINTS_ANNOTATION}: entry {:?} ignored: {why}",
                crate::validate::elide(&taint_string(&t), 100)
            )),
            None => out.taints.push(t),
        }
    }
    out
}

/// The field manager other than `ours` that wrote the tracking annotation on `node`, if any
/// (its managedFields entry lists the annotation's key).
pub fn annotation_written_by(node: &Node, ours: &str) -> Option<String> {
    let key = format!("f:{TAINTS_ANNOTATION}");
    node.metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|m| {
            m.manager.as_deref() != Some(ours)
                && m.fields_v1
                    .as_ref()
                    .and_then(|f| f.0.pointer("/f:metadata/f:annotations"))
                    .and_then(Value::as_object)
                    .is_some_and(|a| a.contains_key(&key))
        })
        .map(|m| m.manager.clone().unwrap_or_default())
}

/// A taint's effects, as the API server knows them.
const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// The taints an annotation value lists; an entry that does not parse is skipped (and
/// reported), so that a hand-edited annotation cannot stop the sink.
pub fn parse_annotation(value: &str) -> (Vec<Taint>, Vec<String>) {
    let mut taints = Vec::new();
    let mut bad = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parsed = entry.rsplit_once(':').and_then(|(kv, effect)| {
            let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
            (!key.is_empty() && !effect.is_empty()).then(|| Taint {
                key: key.to_string(),
                value: value.to_string(),
                effect: effect.to_string(),
            })
        });
        match parsed {
            Some(t) => taints.push(t),
            None => bad.push(entry.to_string()),
        }
    }
    (taints, bad)
}

/// A taint on the Node is one of `ours`: the same key and effect (a Node carries one taint per
/// key and effect, and that is how kubectl and NFD match them).
fn matches(t: &NodeTaint, ours: &Taint) -> bool {
    t.key == ours.key && t.effect == ours.effect
}

fn node_taint(t: &Taint) -> NodeTaint {
    NodeTaint {
        key: t.key.clone(),
        value: (!t.value.is_empty()).then(|| t.value.clone()),
        effect: t.effect.clone(),
        time_added: None,
    }
}

/// The Node's taints with ours brought to `want`: the others' taints as they are, in their
/// order; a taint of `before` (what we put there) that is no longer wanted removed; a wanted
/// taint updated in place, or appended. A taint someone else put there with the key and effect
/// of a wanted one becomes ours, as NFD's master does.
pub fn merged(node: &[NodeTaint], before: &[Taint], want: &[Taint]) -> Vec<NodeTaint> {
    let mut out: Vec<NodeTaint> = Vec::with_capacity(node.len() + want.len());
    let mut placed = vec![false; want.len()];
    for t in node {
        if let Some(i) = want.iter().position(|w| matches(t, w)) {
            if placed[i] {
                continue;
            }
            placed[i] = true;
            let w = &want[i];
            if t.value.as_deref().unwrap_or("") == w.value {
                out.push(t.clone());
            } else {
                out.push(node_taint(w));
            }
        } else if !before.iter().any(|b| matches(t, b)) {
            out.push(t.clone());
        }
    }
    for (w, done) in want.iter().zip(placed) {
        if !done {
            out.push(node_taint(w));
        }
    }
    out
}

/// The `GPUHealthy` condition the node's GPU health calls for (`None`: no GPU health on this
/// node, and no condition of ours): `True` when the `gpu.node` feature says `ok`, `False` when
/// `degraded` (reason `GPUsMissing` when GPUs are missing), `Unknown` for any other value; the message counts the healthy GPUs. From the
/// feature, not the labels: a site rule that writes `gpu.health: ok` does not hide a fault here.
pub fn desired_condition(health: Option<&GpuHealth>) -> Option<NodeCondition> {
    let GpuHealth {
        health,
        healthy,
        count,
        missing,
    } = health?;
    let (status, reason) = match health.as_str() {
        "ok" => ("True", "GPUsHealthy"),
        // GPUs the node should have and does not show (docs/health.md#missing-gpus).
        "degraded" if missing.is_some() => ("False", "GPUsMissing"),
        "degraded" => ("False", "GPUsDegraded"),
        _ => ("Unknown", "GPUHealthUnknown"),
    };
    let message = match (healthy, count) {
        (Some(h), Some(n)) => format!("{h} of {n} GPUs healthy"),
        (Some(h), None) => format!("{h} GPUs healthy"),
        _ => format!("GPU health {}", crate::validate::elide(health, 63)),
    };
    Some(NodeCondition {
        type_: CONDITION_TYPE.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message),
        last_heartbeat_time: None,
        last_transition_time: None,
    })
}

/// The merge patch that takes the Node's taints from `taints` to `next` and the tracking
/// annotation from `tracked` to `annotation` (`None`: removed), guarded by the Node's
/// `version`: a Node changed since it was read is a 409, never overwritten. Only what changes
/// is in it.
pub fn taints_patch(
    version: &str,
    (taints, tracked): (&[NodeTaint], Option<&str>),
    (next, annotation): (&[NodeTaint], Option<&str>),
) -> Value {
    let mut meta = json!({ "resourceVersion": version });
    if annotation != tracked {
        meta["annotations"] = json!({ TAINTS_ANNOTATION: annotation });
    }
    let mut body = json!({ "metadata": meta });
    if next != taints {
        body["spec"] = json!({ "taints": if next.is_empty() { Value::Null } else { json!(next) } });
    }
    body
}

/// The strategic merge patch of `nodes/status` that sets `want` (or, `None`, removes the
/// condition), keyed on the condition's type so that the kubelet's conditions stay as they are.
/// The transition time moves only when the status does (`have` is the condition on the Node;
/// `now` RFC 3339).
pub fn condition_patch(
    have: Option<&NodeCondition>,
    want: Option<&NodeCondition>,
    now: &str,
) -> Value {
    let condition = match want {
        None => json!({ "type": CONDITION_TYPE, "$patch": "delete" }),
        Some(w) => {
            let transition = have
                .filter(|h| h.status == w.status)
                .and_then(|h| h.last_transition_time.as_ref())
                .and_then(|t| serde_json::to_value(t).ok())
                .unwrap_or_else(|| json!(now));
            json!({
                "type": CONDITION_TYPE,
                "status": w.status,
                "reason": w.reason,
                "message": w.message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": transition,
            })
        }
    };
    json!({ "status": { "conditions": [condition] } })
}

/// The field managers whose managedFields on the status subresource name the `GPUHealthy`
/// condition's key.
fn condition_managers(node: &Node) -> impl Iterator<Item = &str> {
    let key = format!("k:{{\"type\":\"{CONDITION_TYPE}\"}}");
    node.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(move |m| {
            m.subresource.as_deref() == Some("status")
                && m.fields_v1
                    .as_ref()
                    .and_then(|f| f.0.pointer("/f:status/f:conditions"))
                    .and_then(Value::as_object)
                    .is_some_and(|c| c.contains_key(&key))
        })
        .map(|m| m.manager.as_deref().unwrap_or(""))
}

/// Whether the `GPUHealthy` condition on `node` was written by `manager` (its managedFields on
/// the status subresource name the condition's key): `prune` removes only a condition of ours.
pub fn condition_written_by(node: &Node, manager: &str) -> bool {
    condition_managers(node).any(|m| m == manager)
}

/// Another field manager that owns fields of the `GPUHealthy` condition too (someone edited
/// it): `prune` leaves it to them, as the prune policy would refuse its removal.
pub fn condition_kept_by(node: &Node, manager: &str) -> Option<String> {
    condition_managers(node)
        .find(|m| *m != manager)
        .map(str::to_string)
}

/// Whether the condition on the Node already says what `want` says (times aside).
pub fn condition_current(have: Option<&NodeCondition>, want: Option<&NodeCondition>) -> bool {
    match (have, want) {
        (None, None) => true,
        (Some(h), Some(w)) => {
            h.status == w.status && h.reason == w.reason && h.message == w.message
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect: effect.into(),
        }
    }

    fn nt(key: &str, value: Option<&str>, effect: &str) -> NodeTaint {
        NodeTaint {
            key: key.into(),
            value: value.map(str::to_string),
            effect: effect.into(),
            time_added: None,
        }
    }

    #[test]
    fn the_annotation_round_trips_in_nfds_format() {
        let taints = vec![
            t(
                "feature.node.kubernetes.io/gpu-unhealthy",
                "true",
                "NoSchedule",
            ),
            t("feature.node.kubernetes.io/x", "", "NoExecute"),
        ];
        let v = annotation_value(&taints).unwrap();
        assert_eq!(
            v,
            "feature.node.kubernetes.io/gpu-unhealthy=true:NoSchedule,feature.node.kubernetes.io/x:NoExecute"
        );
        assert_eq!(parse_annotation(&v), (taints, vec![]));
        assert_eq!(annotation_value(&[]), None);
        assert_eq!(
            parse_annotation("a/b=1:NoSchedule, junk ,:x"),
            (
                vec![t("a/b", "1", "NoSchedule")],
                vec!["junk".to_string(), ":x".to_string()]
            )
        );
    }

    #[test]
    fn only_nfds_taint_namespace_is_allowed() {
        let got: Vec<bool> = [
            "feature.node.kubernetes.io/gpu-unhealthy",
            "gpu.feature.node.kubernetes.io/x",
            "profile.node.kubernetes.io/x",
            "example.com/x",
            "node.kubernetes.io/unschedulable",
            "xfeature.node.kubernetes.io/x",
            ".feature.node.kubernetes.io/x",
            "feature.node.kubernetes.io/",
            "unprefixed",
        ]
        .iter()
        .map(|k| allowed_taint_key(k))
        .collect();
        assert_eq!(
            got,
            [true, true, false, false, false, false, false, false, false]
        );
    }

    #[test]
    fn the_merge_keeps_the_others_and_replaces_ours() {
        let admin = nt("dedicated", Some("ml"), "NoSchedule");
        let old_ours = nt("feature.node.kubernetes.io/old", None, "NoSchedule");
        let ours = nt(
            "feature.node.kubernetes.io/gpu-unhealthy",
            Some("true"),
            "NoSchedule",
        );
        let node = vec![old_ours.clone(), admin.clone(), ours.clone()];
        let before = vec![
            t("feature.node.kubernetes.io/old", "", "NoSchedule"),
            t(
                "feature.node.kubernetes.io/gpu-unhealthy",
                "true",
                "NoSchedule",
            ),
        ];
        // Ours unchanged but one: the old one goes, the rest keeps its order.
        let want = vec![t(
            "feature.node.kubernetes.io/gpu-unhealthy",
            "true",
            "NoSchedule",
        )];
        assert_eq!(
            merged(&node, &before, &want),
            vec![admin.clone(), ours.clone()]
        );
        // A new value: updated in place.
        let want2 = vec![t(
            "feature.node.kubernetes.io/gpu-unhealthy",
            "false",
            "NoSchedule",
        )];
        assert_eq!(
            merged(&[admin.clone(), ours.clone()], &want, &want2),
            vec![
                admin.clone(),
                nt(
                    "feature.node.kubernetes.io/gpu-unhealthy",
                    Some("false"),
                    "NoSchedule"
                )
            ]
        );
        // Nothing wanted: only the others stay; a taint we never put there is not ours.
        assert_eq!(
            merged(&[admin.clone(), ours.clone()], &[], &[]),
            vec![admin.clone(), ours.clone()]
        );
        assert_eq!(merged(&[admin.clone(), ours], &want, &[]), vec![admin]);
    }

    #[test]
    fn the_condition_follows_the_gpu_node_health() {
        let h = |health: &str, healthy: Option<&str>, count: Option<&str>| GpuHealth {
            health: health.into(),
            healthy: healthy.map(Into::into),
            count: count.map(Into::into),
            missing: None,
        };
        let c = |s: &str, r: &str, m: &str| NodeCondition {
            type_: "GPUHealthy".into(),
            status: s.into(),
            reason: Some(r.into()),
            message: Some(m.into()),
            last_heartbeat_time: None,
            last_transition_time: None,
        };
        assert_eq!(desired_condition(None), None);
        assert_eq!(
            desired_condition(Some(&h("degraded", Some("7"), Some("8")))),
            Some(c("False", "GPUsDegraded", "7 of 8 GPUs healthy"))
        );
        let short = GpuHealth {
            missing: Some("1".into()),
            ..h("degraded", Some("7"), Some("8"))
        };
        assert_eq!(
            desired_condition(Some(&short)),
            Some(c("False", "GPUsMissing", "7 of 8 GPUs healthy"))
        );
        assert_eq!(
            desired_condition(Some(&h("ok", None, None))),
            Some(c("True", "GPUsHealthy", "GPU health ok"))
        );
        assert_eq!(
            desired_condition(Some(&h("odd", None, None))),
            Some(c("Unknown", "GPUHealthUnknown", "GPU health odd"))
        );
    }

    #[test]
    fn only_valid_entries_of_our_own_annotation_are_trusted() {
        // Another manager's annotation: nothing of it, whatever it lists.
        assert_eq!(
            tracked(
                Some("feature.node.kubernetes.io/x=1:NoSchedule"),
                Some("kubectl-annotate")
            ),
            Tracked {
                taints: vec![],
                ignored: vec![
                    "annotation gpu-labeler.feature.node.kubernetes.io/taints was written by field manager \"kubectl-annotate\", not gpu-labeler: none of its entries is trusted, and it is left as it is".into()
                ],
            }
        );
        // Ours: the entries gpu-labeler could have written, the rest ignored with why.
        assert_eq!(
            tracked(
                Some("dedicated=ml:NoSchedule,feature.node.kubernetes.io/x=1:NoSchedule,gpu.feature.node.kubernetes.io/y:Sometimes,junk"),
                None
            ),
            Tracked {
                taints: vec![t("feature.node.kubernetes.io/x", "1", "NoSchedule")],
                ignored: vec![
                    "annotation gpu-labeler.feature.node.kubernetes.io/taints: entry \"junk\" is not a taint (key=value:effect); ignored".into(),
                    "annotation gpu-labeler.feature.node.kubernetes.io/taints: entry \"dedicated=ml:NoSchedule\" ignored: not in feature.node.kubernetes.io or a sub-domain, so not a taint gpu-labeler writes".into(),
                    "annotation gpu-labeler.feature.node.kubernetes.io/taints: entry \"gpu.feature.node.kubernetes.io/y:Sometimes\" ignored: not a taint effect (NoSchedule, PreferNoSchedule or NoExecute)".into(),
                ],
            }
        );
        // At most MAX_TAINTS of them.
        let many: Vec<String> = (0..70)
            .map(|i| format!("feature.node.kubernetes.io/t{i}:NoSchedule"))
            .collect();
        let got = tracked(Some(&many.join(",")), None);
        assert_eq!(got.taints.len(), MAX_TAINTS);
        assert_eq!(
            got.taints[63],
            t("feature.node.kubernetes.io/t63", "", "NoSchedule")
        );
        assert_eq!(
            got.ignored,
            (64..70)
                .map(|i| format!("annotation gpu-labeler.feature.node.kubernetes.io/taints: entry \"feature.node.kubernetes.io/t{i}:NoSchedule\" ignored: more entries than the 64 taints gpu-labeler writes at most"))
                .collect::<Vec<_>>()
        );
        assert_eq!(tracked(None, None), Tracked::default());
    }
}
