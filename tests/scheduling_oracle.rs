//! `match` against Kubernetes' own scheduling code: 12,000 generated (pod, node) pairs, each
//! decided by gpu-labeler's reading of the workload and its per-node fit (what `match` prints)
//! and by kube-scheduler's helpers from `k8s.io/component-helpers` 0.36 (tests/scheduling-oracle:
//! `nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)` as the NodeAffinity plugin calls it,
//! `FindMatchingUntoleratedTaint` as the TaintToleration plugin calls it, the NodeUnschedulable
//! plugin's toleration check, the preferred score), with the API server's validation of those
//! fields beside them. Every verdict must be equal; a disagreement is printed by class with
//! examples. The oracle is built from Debian's packages once and cached under
//! `target/scheduling-oracle/`, as the test API server is (tests/go_build).

use std::collections::BTreeMap;
use std::path::PathBuf;

use gpu_labeler::scheduling::fit::{Reason, fit};
use gpu_labeler::scheduling::objects::{read_nodes, read_workloads};
use serde_json::{Value, json};

mod common;
mod go_build;

use common::Draw;

/// The oracle's sources (tests/scheduling-oracle) and cache (target/scheduling-oracle).
const ORACLE: go_build::GoProgram = go_build::GoProgram {
    name: "scheduling-oracle",
    what: "the scheduling oracle",
    build_inputs: &["build.sh", "main.go"],
    binary: "bin/oracle",
};

fn oracle() -> PathBuf {
    ORACLE.build()
}

/// The generator's seed: change it and the cases change (every run is the same otherwise).
const SEED: u64 = 0x5eed_0051;
const PODS: usize = 3_000;
const NODES_PER_POD: usize = 4;

/// SplitMix64: small, seeded, and the same on every platform.
struct Rng(u64);

impl common::Draw for Rng {
    fn next(&mut self) -> u64 {
        common::splitmix64(&mut self.0)
    }
}

impl Rng {
    /// True with probability `pct` percent.
    fn pct(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
}

/// Label keys the pods ask for and the nodes carry: valid ones, and (pods only) ones the API
/// server refuses.
const KEYS: &[&str] = &[
    "feature.node.kubernetes.io/gpu.count",
    "feature.node.kubernetes.io/gpu.memory",
    "nvidia.com/gpu.product",
    "zone",
    "Ab_c.d-e",
];
const BAD_KEYS: &[&str] = &[
    "",
    "bad key",
    "-x",
    "a/b/c",
    "/x",
    "Example.COM/x",
    "x/",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
];
/// Values: label values, integers with signs and leading zeros, non-integers, values the API
/// server refuses.
const VALUES: &[&str] = &[
    "",
    "a",
    "H100",
    "1",
    "8",
    "007",
    "80",
    "0",
    "12a",
    "1.5",
    "1e3",
    "A_b.c",
    "9223372036854775807",
    "9223372036854775808",
];
const BAD_VALUES: &[&str] = &[
    "-1",
    "+5",
    "-0",
    "x-",
    "-",
    "bad value",
    "ünï",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
];
/// `Gt`/`Lt` bounds: integers, non-integers, and integers that are not label values.
const BOUNDS: &[&str] = &["5", "007", "0", "80", "1.5", "x", "", "1e3", "12a"];
const BAD_BOUNDS: &[&str] = &["-1", "+5", "-0"];
const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
const ODD_OPERATORS: &[&str] = &["in", "Equals", "", "GreaterThan"];
const NODE_NAMES: &[&str] = &["node-a", "gpu-7", "n.example.com"];
const TAINT_KEYS: &[&str] = &[
    "nvidia.com/gpu",
    "t",
    "node.kubernetes.io/unschedulable",
    "gpu-labeler.feature.node.kubernetes.io/gpu-health",
];
const TAINT_VALUES: &[&str] = &["", "v", "1", "present"];
const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// The five classes the issue found `match` wrong on, counted so that the test shows it
/// generates each of them.
#[derive(Default, Debug)]
struct Coverage {
    bad_in_value: usize,
    bad_key: usize,
    integer_bound_not_label_value: usize,
    empty_terms: usize,
    other_field_key: usize,
}

fn value(rng: &mut Rng) -> String {
    if rng.pct(6) {
        rng.pick(BAD_VALUES).to_string()
    } else {
        rng.pick(VALUES).to_string()
    }
}

fn bound(rng: &mut Rng) -> String {
    if rng.pct(8) {
        rng.pick(BAD_BOUNDS).to_string()
    } else {
        rng.pick(BOUNDS).to_string()
    }
}

fn requirement(rng: &mut Rng, cov: &mut Coverage) -> Value {
    let key = if rng.pct(5) {
        cov.bad_key += 1;
        rng.pick(BAD_KEYS)
    } else {
        rng.pick(KEYS)
    };
    let op = if rng.pct(2) {
        rng.pick(ODD_OPERATORS)
    } else {
        rng.pick(OPERATORS)
    };
    let values: Vec<String> = match op {
        "Gt" | "Lt" => {
            let mut v = vec![bound(rng)];
            if rng.pct(4) {
                v.clear();
            } else if rng.pct(4) {
                v.push(bound(rng));
            }
            v
        }
        "Exists" | "DoesNotExist" if !rng.pct(4) => Vec::new(),
        _ => {
            let n = if rng.pct(4) { 0 } else { 1 + rng.below(3) };
            (0..n).map(|_| value(rng)).collect()
        }
    };
    let bad_value = values.iter().any(|v| BAD_VALUES.contains(&v.as_str()));
    if matches!(op, "In" | "NotIn") && bad_value {
        cov.bad_in_value += 1;
    }
    if matches!(op, "Gt" | "Lt") && values.len() == 1 && BAD_BOUNDS.contains(&values[0].as_str()) {
        cov.integer_bound_not_label_value += 1;
    }
    let mut r = json!({"key": key, "operator": op});
    if !values.is_empty() || rng.pct(30) {
        r["values"] = json!(values);
    }
    r
}

fn field_requirement(rng: &mut Rng, cov: &mut Coverage) -> Value {
    let key = if rng.pct(85) {
        "metadata.name"
    } else {
        cov.other_field_key += 1;
        rng.pick(&["metadata.namespace", "spec.unschedulable", ""])
    };
    let op = if rng.pct(5) {
        rng.pick(&["Exists", "Gt"])
    } else {
        rng.pick(&["In", "NotIn"])
    };
    let n = match rng.below(20) {
        0 => 0,
        1 => 2,
        _ => 1,
    };
    let values: Vec<&str> = (0..n)
        .map(|_| {
            if rng.pct(5) {
                rng.pick(&["", "Bad_Name"])
            } else {
                rng.pick(NODE_NAMES)
            }
        })
        .collect();
    json!({"key": key, "operator": op, "values": values})
}

fn term(rng: &mut Rng, cov: &mut Coverage) -> Value {
    let mut t = json!({});
    let exprs = rng.below(4);
    if exprs > 0 || rng.pct(15) {
        t["matchExpressions"] = (0..exprs).map(|_| requirement(rng, cov)).collect();
    }
    let fields = if rng.pct(25) { 1 + rng.below(2) } else { 0 };
    if fields > 0 || rng.pct(10) {
        t["matchFields"] = (0..fields).map(|_| field_requirement(rng, cov)).collect();
    }
    t
}

fn toleration(rng: &mut Rng) -> Value {
    let mut t = json!({});
    let key = if rng.pct(15) {
        ""
    } else if rng.pct(3) {
        rng.pick(BAD_KEYS)
    } else {
        rng.pick(TAINT_KEYS)
    };
    if !key.is_empty() || rng.pct(50) {
        t["key"] = json!(key);
    }
    // An empty key wants Exists; the comparison operators are off by default.
    let op = if key.is_empty() && rng.pct(85) {
        "Exists"
    } else if rng.pct(4) {
        rng.pick(&["Gt", "Lt", "exists"])
    } else {
        rng.pick(&["", "Equal", "Exists"])
    };
    if !op.is_empty() {
        t["operator"] = json!(op);
    }
    if op != "Exists" || rng.pct(10) {
        let v = if rng.pct(4) {
            rng.pick(BAD_VALUES)
        } else {
            rng.pick(TAINT_VALUES)
        };
        if !v.is_empty() || rng.pct(30) {
            t["value"] = json!(v);
        }
    }
    match rng.below(30) {
        0..=4 => {}
        5..=7 => t["effect"] = json!(""),
        8 => t["effect"] = json!("Bogus"),
        _ => t["effect"] = json!(rng.pick(EFFECTS)),
    }
    // Seconds go with NoExecute (else the API server refuses them), mostly.
    if t["effect"] == "NoExecute" && rng.pct(40) || rng.pct(3) {
        t["tolerationSeconds"] = json!(rng.pick(&["-5", "0", "300"]).parse::<i64>().unwrap());
    }
    t
}

fn pod(rng: &mut Rng, i: usize, cov: &mut Coverage) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
    if rng.pct(40) {
        let mut sel = serde_json::Map::new();
        for _ in 0..1 + rng.below(2) {
            let key = if rng.pct(4) {
                rng.pick(BAD_KEYS)
            } else {
                rng.pick(KEYS)
            };
            sel.insert(key.to_string(), json!(value(rng)));
        }
        spec["nodeSelector"] = Value::Object(sel);
    }
    let mut na = json!({});
    match rng.below(10) {
        0..=1 => {}
        2 => {
            cov.empty_terms += 1;
            na["requiredDuringSchedulingIgnoredDuringExecution"] = if rng.pct(50) {
                json!({"nodeSelectorTerms": []})
            } else {
                json!({})
            };
        }
        _ => {
            let terms: Vec<Value> = (0..1 + rng.below(3)).map(|_| term(rng, cov)).collect();
            na["requiredDuringSchedulingIgnoredDuringExecution"] =
                json!({"nodeSelectorTerms": terms});
        }
    }
    if rng.pct(25) {
        let prefs: Vec<Value> = (0..1 + rng.below(2))
            .map(|_| json!({"weight": 1 + rng.below(100), "preference": term(rng, cov)}))
            .collect();
        na["preferredDuringSchedulingIgnoredDuringExecution"] = json!(prefs);
    }
    if na.as_object().is_some_and(|m| !m.is_empty()) {
        spec["affinity"] = json!({ "nodeAffinity": na });
    }
    if rng.pct(60) {
        spec["tolerations"] = (0..1 + rng.below(3)).map(|_| toleration(rng)).collect();
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}")}, "spec": spec})
}

/// The label keys and values a pod asks for, so that nodes often carry them.
fn asked(pod: &Value, out: &mut Vec<(String, String)>) {
    match pod {
        Value::Object(m) => {
            if let (Some(Value::String(k)), Some(Value::Array(vs))) =
                (m.get("key"), m.get("values"))
            {
                for v in vs {
                    out.push((k.clone(), v.as_str().unwrap_or_default().to_string()));
                }
                if vs.is_empty() {
                    out.push((k.clone(), String::new()));
                }
            }
            if let Some(Value::Object(sel)) = m.get("nodeSelector") {
                for (k, v) in sel {
                    out.push((k.clone(), v.as_str().unwrap_or_default().to_string()));
                }
            }
            for v in m.values() {
                asked(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| asked(v, out)),
        _ => {}
    }
}

fn node(rng: &mut Rng, pod: &Value) -> Value {
    let mut want = Vec::new();
    asked(pod, &mut want);
    let mut labels = serde_json::Map::new();
    for (k, v) in &want {
        if rng.pct(60) {
            let v = match rng.below(4) {
                0 => value(rng),
                // Near a bound: one below, at, one above.
                1 => v
                    .parse::<i64>()
                    .map(|n| n.saturating_add(rng.below(3) as i64 - 1).to_string())
                    .unwrap_or_else(|_| v.clone()),
                _ => v.clone(),
            };
            labels.insert(k.clone(), json!(v));
        }
    }
    for _ in 0..rng.below(3) {
        labels.insert(rng.pick(KEYS).to_string(), json!(value(rng)));
    }
    let taints: Vec<Value> = (0..rng.below(4))
        .map(|_| {
            // Drawn in this order (key, effect, value) so that a seed's cases stay the same.
            let (key, effect) = (rng.pick(TAINT_KEYS), rng.pick(EFFECTS));
            common::taint(key, rng.pick(TAINT_VALUES), effect)
        })
        .collect();
    let mut spec = json!({});
    if !taints.is_empty() {
        spec["taints"] = json!(taints);
    }
    if rng.pct(15) {
        spec["unschedulable"] = json!(true);
    }
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": rng.pick(NODE_NAMES), "labels": labels}, "spec": spec})
}

/// One node's verdicts, as the oracle writes them and as `match` decides them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verdict {
    affinity: bool,
    taint: Option<String>,
    unschedulable: bool,
    score: Option<i64>,
}

/// The pod's verdicts: the refused fields' paths, then each node's.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    refused: Vec<String>,
    nodes: Vec<Verdict>,
}

fn from_oracle(v: &Value) -> Answer {
    Answer {
        refused: v["refused"]
            .as_array()
            .expect("refused")
            .iter()
            .map(|p| p.as_str().unwrap().to_string())
            .collect(),
        nodes: v["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| Verdict {
                affinity: n["affinity"].as_bool().unwrap(),
                taint: n["taint"].as_str().map(str::to_string),
                unschedulable: n["unschedulable"].as_bool().unwrap(),
                score: n["score"].as_i64(),
            })
            .collect(),
    }
}

/// What `match` decides: the workload read as `match` reads a file (its refusals, the API
/// server's), and each node's fit.
fn from_match(i: usize, pod: &Value, nodes: &[Value], go_scores: &[Option<i64>]) -> Answer {
    let name = format!("case{i}.json");
    let w = read_workloads(&name, &serde_json::to_string_pretty(pod).unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(w.len(), 1);
    let mut refused: Vec<String> = w[0].refusals.iter().map(|e| e.path.clone()).collect();
    refused.sort();
    refused.dedup();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": nodes});
    let nodes = read_nodes("nodes.json", &list.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let verdicts = nodes
        .iter()
        .zip(go_scores)
        .map(|(n, go_score)| {
            let f = fit(&w[0].pod, n);
            Verdict {
                affinity: !f.reasons.iter().any(|r| {
                    matches!(
                        r,
                        Reason::Selector { .. } | Reason::NoTerms | Reason::Term { .. }
                    )
                }),
                taint: f.reasons.iter().find_map(|r| match r {
                    Reason::Taint(t) => Some(format!("{}: {}", t.key, t.value)),
                    _ => None,
                }),
                unschedulable: f.reasons.contains(&Reason::Cordoned),
                // Where the preferred terms do not parse the plugin fails the pod: no score.
                score: go_score.map(|_| f.score),
            }
        })
        .collect();
    Answer {
        refused,
        nodes: verdicts,
    }
}

/// A path with its indices left out: the class of a refusal.
fn shape(path: &str) -> String {
    let mut out = String::new();
    let mut skip = false;
    for c in path.chars() {
        match c {
            '[' => {
                skip = true;
                out.push_str("[]");
            }
            ']' => skip = false,
            _ if !skip => out.push(c),
            _ => {}
        }
    }
    out
}

#[test]
fn match_decides_as_kubernetes_own_scheduling_code_on_12000_generated_pairs() {
    let mut rng = Rng(SEED);
    let mut cov = Coverage::default();
    let cases: Vec<(Value, Vec<Value>)> = (0..PODS)
        .map(|i| {
            let p = pod(&mut rng, i, &mut cov);
            let nodes = (0..NODES_PER_POD).map(|_| node(&mut rng, &p)).collect();
            (p, nodes)
        })
        .collect();

    // One oracle process for every case, fed over a pipe by a thread while its answers are read.
    let input = cases
        .iter()
        .map(|(p, n)| json!({"pod": p, "nodes": n}).to_string())
        .collect();
    let answers: Vec<Value> = go_build::answers(&oracle(), input);
    assert_eq!(answers.len(), cases.len());

    let mut classes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    let (mut refused, mut fits, mut no_affinity, mut taints, mut pairs) = (0, 0, 0, 0, 0);
    for (i, ((p, nodes), answer)) in cases.iter().zip(&answers).enumerate() {
        let go = from_oracle(answer);
        let scores: Vec<Option<i64>> = go.nodes.iter().map(|v| v.score).collect();
        let ours = from_match(i, p, nodes, &scores);
        pairs += nodes.len();
        if !go.refused.is_empty() {
            refused += 1;
        }
        for p in &go.refused {
            *refusals.entry(shape(p)).or_default() += 1;
        }
        for v in &go.nodes {
            fits += usize::from(v.affinity && v.taint.is_none() && !v.unschedulable);
            no_affinity += usize::from(!v.affinity);
            taints += usize::from(v.taint.is_some());
        }
        let example = || {
            format!(
                "case {i}: pod {}\n  nodes {}\n  kubernetes {go:?}\n  match      {ours:?}",
                p["spec"],
                json!(nodes)
            )
        };
        if go.refused != ours.refused {
            let key = |r: &[String]| r.iter().map(|p| shape(p)).collect::<Vec<_>>().join(", ");
            classes
                .entry(format!(
                    "refused: kubernetes [{}], match [{}]",
                    key(&go.refused),
                    key(&ours.refused)
                ))
                .or_default()
                .push(example());
        }
        for (g, o) in go.nodes.iter().zip(&ours.nodes) {
            // The class: what differs, and which fields the API server refuses in the pod.
            let refusing: Vec<String> = go.refused.iter().map(|p| shape(p)).collect();
            let mut differ = |what: &str, g: String, o: String| {
                if g != o {
                    classes
                        .entry(format!(
                            "{what}: kubernetes {g}, match {o} (refused: {refusing:?})"
                        ))
                        .or_default()
                        .push(example());
                }
            };
            differ(
                "node affinity fits",
                g.affinity.to_string(),
                o.affinity.to_string(),
            );
            differ(
                "untolerated taint",
                format!("{:?}", g.taint.is_some()),
                format!("{:?}", o.taint.is_some()),
            );
            if g.taint.is_some() && o.taint.is_some() {
                differ(
                    "first untolerated taint",
                    format!("{:?}", g.taint),
                    format!("{:?}", o.taint),
                );
            }
            differ(
                "cordon not tolerated",
                g.unschedulable.to_string(),
                o.unschedulable.to_string(),
            );
            // The scores themselves are in the examples.
            if g.score != o.score {
                differ("preferred score", "one".into(), "another".into());
            }
        }
    }
    let report: Vec<String> = classes
        .iter()
        .map(|(class, examples)| {
            format!(
                "{} case(s): {class}\n{}",
                examples.len(),
                examples
                    .iter()
                    .take(2)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        })
        .collect();
    assert!(
        classes.is_empty(),
        "match and Kubernetes disagree in {} class(es):\n{}",
        classes.len(),
        report.join("\n\n")
    );
    // The cases reach every verdict and every class the issue named.
    eprintln!(
        "{pairs} pairs of {PODS} pods: {refused} pods refused; {fits} pairs fit, {no_affinity} \
         fail node affinity, {taints} on a taint; {cov:?}; the fields refused: {refusals:#?}"
    );
    assert!(pairs >= 12_000);
    for (what, n) in [
        ("refused pods", refused),
        ("accepted pods", PODS - refused),
        ("fitting pairs", fits),
        ("pairs failing node affinity", no_affinity),
        ("pairs failing on a taint", taints),
        (
            "In/NotIn values that are not label values",
            cov.bad_in_value,
        ),
        ("invalid label keys", cov.bad_key),
        (
            "Gt/Lt bounds that are integers but not label values",
            cov.integer_bound_not_label_value,
        ),
        ("empty nodeSelectorTerms", cov.empty_terms),
        (
            "matchFields keys other than metadata.name",
            cov.other_field_key,
        ),
    ] {
        assert!(n >= 100, "only {n} {what}");
    }
}
