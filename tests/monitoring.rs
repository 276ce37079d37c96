//! The monitoring components (`deploy/components/prometheus`, `deploy/components/grafana`)
//! against what the agent really exports: `gpu-labeler run` against the test API server, made
//! to produce every metric family (a failed publish, a rejected label, a failing rule, a label
//! another manager owns, an NVML child that dies, a rules edit and an invalid one), is scraped;
//! then every PromQL expression of the PrometheusRule and of the Grafana dashboard is parsed
//! (`promql-parser`) and each of its selectors checked against that scrape: the series exists,
//! its label matchers and groupings name labels it has (or the target labels the PodMonitor
//! gives), equality matchers name values it takes, counters are read only through
//! rate/increase/irate, histogram_quantile reads `_bucket` series and keeps `le`. The alerts'
//! runbooks are rows of docs/troubleshooting.md, and docs/metrics.md's alert table is the rule.

mod apiserver;
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use apiserver::*;
use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::{self, Expr, LabelModifier};
use serde_json::Value;

const NODE: &str = "gpu-node-1";
const WAIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// The scrape.

/// Replaces `path` atomically (as an editor or kubelet would), so no reload reads half a file.
fn replace_file(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The pid of `agent`'s NVML child, once there is one.
fn nvml_child(agent: &Agent) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{}/task", agent.pid())).ok()?;
    tasks.flatten().find_map(|t| {
        let children = std::fs::read_to_string(t.path().join("children")).ok()?;
        children.split_whitespace().next()?.parse().ok()
    })
}

/// Waits until the exposition has a sample of `series` (a name, or a name with some labels)
/// whose value is at least `min`.
fn wait_sample(agent: &Agent, addr: std::net::SocketAddr, prefix: &str, min: f64) {
    let ok = wait_for(WAIT, || {
        let (_, text) = get(addr, "/metrics");
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.rsplit_once(' '))
            .any(|(k, v)| {
                (k == prefix || k.starts_with(&format!("{prefix}{{")))
                    && v.parse::<f64>().is_ok_and(|v| v >= min)
            })
            .then_some(())
    });
    assert!(
        ok.is_some(),
        "no sample {prefix} >= {min}\n{}\nlog:\n{}",
        get(addr, "/metrics").1,
        agent.log_text()
    );
}

/// One real `/metrics` of an agent that went through everything the alerts are about.
fn scrape() -> &'static str {
    static SCRAPE: OnceLock<String> = OnceLock::new();
    SCRAPE.get_or_init(|| {
        let server = FakeApiServer::start();
        server.add_node(NODE, &[("kubernetes.io/os", "linux")]);
        // Another controller owns one of the agent's keys with another value: a conflict.
        server.merge_patch_labels(
            NODE,
            "ops-controller",
            &[(
                "feature.node.kubernetes.io/pci-0302_10de.present",
                Some("false"),
            )],
        );
        // The first request fails: a publish error.
        server.set_faults(Faults {
            error_500: 1,
            ..Faults::default()
        });
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = write_kubeconfig(dir.path(), &server.url());
        let rules = dir.path().join("rules.yaml");
        std::fs::write(&rules, OUTCOME_RULES).unwrap();
        let lib = common::fake_nvml_lib("nvidia_ml");
        let mut args: Vec<String> =
            run_args(&kubeconfig, NODE, &["--rules", rules.to_str().unwrap()])
                .into_iter()
                .filter(|a| a != "--no-nvml")
                .collect();
        args.extend(["--nvml-lib", lib.to_str().unwrap()].map(String::from));
        let fixture = common::nvml_fixture("h100-8x");
        let mut agent = Agent::start(&args, &[("FAKE_NVML_FIXTURE", fixture.to_str().unwrap())]);
        let addr = agent.health_addr();
        let ready = wait_for(WAIT, || (get(addr, "/readyz").0 == 200).then_some(()));
        assert!(ready.is_some(), "never ready; log:\n{}", agent.log_text());
        wait_sample(&agent, addr, "gpu_labeler_publish_errors_total", 1.0);
        wait_sample(&agent, addr, "gpu_labeler_label_conflicts_total", 1.0);
        wait_sample(&agent, addr, "gpu_labeler_rejected_labels_total", 1.0);
        wait_sample(&agent, addr, "gpu_labeler_rule_errors_total", 1.0);
        wait_sample(&agent, addr, "gpu_labeler_nvml_status{status=\"ok\"}", 1.0);
        // The NVML child dies (a driver that crashes it): an NVML failure; the next cycle
        // starts a new child.
        let child = nvml_child(&agent).expect("an NVML child runs");
        std::process::Command::new("kill")
            .args(["-KILL", &child.to_string()])
            .status()
            .unwrap();
        wait_sample(&agent, addr, "gpu_labeler_nvml_failures_total", 1.0);
        // A rules edit wakes the agent (an event) and is published (event-to-publish).
        replace_file(
            &rules,
            &OUTCOME_RULES.replace("test.nvidia", "test.nvidia2"),
        );
        wait_sample(&agent, addr, "gpu_labeler_events_total", 1.0);
        wait_sample(
            &agent,
            addr,
            "gpu_labeler_event_to_publish_seconds_count",
            1.0,
        );
        // An invalid edit: a reload error, the last good rules kept.
        replace_file(
            &rules,
            "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: [unclosed\n",
        );
        wait_sample(&agent, addr, "gpu_labeler_reload_errors_total", 1.0);
        let (code, text) = get(addr, "/metrics");
        assert_eq!(code, 200);
        assert_eq!(agent.stop(), 0);
        text
    })
}

// ---------------------------------------------------------------------------------------------
// The exposition, as Prometheus stores it.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Type {
    Counter,
    Gauge,
    Histogram,
    Info,
}

/// A series name as PromQL selects it (`gpu_labeler_publishes_total`,
/// `gpu_labeler_scan_duration_seconds_bucket`), with its family and the labels it was seen with.
#[derive(Debug, Clone)]
struct Series {
    family: String,
    kind: Type,
    /// `_total`, `_bucket`, `_sum`, `_count`, `_info` or empty.
    suffix: &'static str,
    /// Label name -> every value the scrape shows.
    labels: BTreeMap<String, BTreeSet<String>>,
}

impl Series {
    /// Read through rate/increase/irate only: counters and a histogram's parts.
    fn is_counter(&self) -> bool {
        self.kind == Type::Counter || self.kind == Type::Histogram
    }
}

/// `k="v",k2="v2"` with OpenMetrics escapes.
fn parse_labels(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek() == Some(&',') || chars.peek() == Some(&' ') {
            chars.next();
        }
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if name.is_empty() {
            break;
        }
        assert_eq!(chars.next(), Some('"'), "label {name} in {s}");
        let mut value = String::new();
        loop {
            match chars
                .next()
                .unwrap_or_else(|| panic!("unterminated value in {s}"))
            {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(c) => value.push(c),
                    None => panic!("bad escape in {s}"),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((name, value));
    }
    out
}

/// The series of an OpenMetrics exposition, keyed by the name PromQL selects.
fn parse_exposition(text: &str) -> BTreeMap<String, Series> {
    let mut families: BTreeMap<String, Type> = BTreeMap::new();
    let mut series: BTreeMap<String, Series> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
            let kind = match kind {
                "counter" => Type::Counter,
                "gauge" => Type::Gauge,
                "histogram" => Type::Histogram,
                "info" => Type::Info,
                other => panic!("type {other} of {name}: not one the checks know"),
            };
            families.insert(name.to_string(), kind);
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (name, labels) = match line.split_once('{') {
            Some((name, rest)) => {
                let (labels, _) = rest.rsplit_once('}').expect("closing brace");
                (name, parse_labels(labels))
            }
            None => (line.split_once(' ').expect("name value").0, Vec::new()),
        };
        let (family, kind) = families
            .iter()
            .filter(|(f, _)| name.starts_with(f.as_str()))
            .max_by_key(|(f, _)| f.len())
            .unwrap_or_else(|| panic!("sample {name} before its # TYPE"));
        let suffix = match (kind, &name[family.len()..]) {
            (Type::Counter, "_total") => "_total",
            (Type::Counter, "_created") => continue,
            (Type::Gauge, "") => "",
            (Type::Histogram, "_bucket") => "_bucket",
            (Type::Histogram, "_sum") => "_sum",
            (Type::Histogram, "_count") => "_count",
            (Type::Info, "_info") => "_info",
            (kind, suffix) => panic!("{name}: suffix {suffix:?} of a {kind:?}"),
        };
        let entry = series.entry(name.to_string()).or_insert_with(|| Series {
            family: family.clone(),
            kind: *kind,
            suffix,
            labels: BTreeMap::new(),
        });
        for (k, v) in labels {
            entry.labels.entry(k).or_default().insert(v);
        }
    }
    series
}

/// Prometheus's own series of each target (a scrape that failed is `up == 0`): not in the
/// exposition, labelled with the target labels only.
fn with_synthetic(mut series: BTreeMap<String, Series>) -> BTreeMap<String, Series> {
    series.insert(
        "up".into(),
        Series {
            family: "up".into(),
            kind: Type::Gauge,
            suffix: "",
            labels: BTreeMap::new(),
        },
    );
    series
}

// ---------------------------------------------------------------------------------------------
// The manifests.

fn yaml(rel: &str) -> Value {
    let text = std::fs::read_to_string(common::repo().join(rel)).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn pod_monitor() -> Value {
    yaml("deploy/components/prometheus/podmonitor.yaml")
}

/// The labels every series of a PodMonitor target gets: the Prometheus operator's
/// (`namespace`, `container`, `pod` from the pod, `job`, `endpoint` the port's name; its
/// generated relabel configs), Prometheus's `instance`, and the PodMonitor's own relabelings.
fn target_labels() -> BTreeSet<String> {
    let mut labels: BTreeSet<String> = [
        "namespace",
        "container",
        "pod",
        "job",
        "endpoint",
        "instance",
    ]
    .map(String::from)
    .into();
    for e in pod_monitor()["spec"]["podMetricsEndpoints"]
        .as_array()
        .unwrap()
    {
        for r in e["relabelings"].as_array().into_iter().flatten() {
            labels.insert(r["targetLabel"].as_str().unwrap().to_string());
        }
    }
    labels
}

/// `job`'s value: the agent pods' label that the PodMonitor's `jobLabel` names.
fn job_value() -> String {
    let key = pod_monitor()["spec"]["jobLabel"]
        .as_str()
        .expect("jobLabel")
        .to_string();
    let ds = yaml("deploy/base/agent/daemonset.yaml");
    ds["spec"]["template"]["metadata"]["labels"][&key]
        .as_str()
        .unwrap_or_else(|| panic!("the pods have no label {key}"))
        .to_string()
}

/// The PrometheusRule's alerts, in order.
struct Alert {
    name: String,
    expr: String,
    for_: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

fn alerts() -> Vec<Alert> {
    let rule = yaml("deploy/components/prometheus/prometheusrule.yaml");
    let strings = |v: &Value| -> BTreeMap<String, String> {
        serde_json::from_value(v.clone()).expect("a map of strings")
    };
    rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| Alert {
            name: r["alert"].as_str().expect("alerting rules only").into(),
            expr: r["expr"].as_str().unwrap().into(),
            for_: r["for"].as_str().unwrap_or_default().into(),
            labels: strings(&r["labels"]),
            annotations: strings(&r["annotations"]),
        })
        .collect()
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(
        common::repo().join("deploy/components/grafana/gpu-labeler-dashboard.json"),
    )
    .unwrap();
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Grafana's variables as a query sees them once they are interpolated: the interval
/// variables as a range, the multi-value label variables as "All".
fn interpolate(expr: &str) -> String {
    let mut s = expr.to_string();
    for (var, value) in [
        ("$__rate_interval", "5m"),
        ("$__interval", "1m"),
        ("$__range", "6h"),
        ("$namespace", ".*"),
        ("$node", ".*"),
    ] {
        s = s.replace(var, value);
    }
    assert!(
        !s.contains('$'),
        "a variable the checks do not know in {expr}"
    );
    s
}

// ---------------------------------------------------------------------------------------------
// The checks of one expression.

struct Checker<'a> {
    series: &'a BTreeMap<String, Series>,
    targets: BTreeSet<String>,
    job: String,
    /// Every problem, `expression: what`.
    problems: Vec<String>,
    /// The series each expression selects.
    used: BTreeSet<String>,
}

/// Where a selector stands.
#[derive(Clone, Copy, Default)]
struct Ctx {
    /// Directly under rate/increase/irate.
    in_rate: bool,
    /// Inside histogram_quantile's vector argument (an aggregation there that drops `le` is
    /// reported where it stands).
    in_quantile: bool,
}

const RATES: [&str; 3] = ["rate", "increase", "irate"];

impl Checker<'_> {
    fn problem(&mut self, expr: &str, what: String) {
        self.problems.push(format!("{expr}: {what}"));
    }

    /// Parses `expr` and checks it whole; returns the series it selects.
    fn check(&mut self, expr: &str) -> BTreeSet<String> {
        self.used.clear();
        match parser::parse(expr) {
            Ok(ast) => {
                self.walk(expr, &ast, Ctx::default());
            }
            Err(e) => self.problem(expr, format!("does not parse: {e}")),
        }
        std::mem::take(&mut self.used)
    }

    /// The labels a selector's series carry: its own and the target labels.
    fn labels_of(&self, name: &str) -> BTreeSet<String> {
        let mut l = self.targets.clone();
        if let Some(s) = self.series.get(name) {
            l.extend(s.labels.keys().cloned());
        }
        l
    }

    /// Checks `e` under `ctx`; returns the labels its result has.
    fn walk(&mut self, src: &str, e: &Expr, ctx: Ctx) -> BTreeSet<String> {
        match e {
            Expr::VectorSelector(vs) => self.selector(src, vs, ctx),
            Expr::MatrixSelector(ms) => self.selector(src, &ms.vs, ctx),
            Expr::Call(call) => {
                let name = call.func.name;
                let args: Vec<&Expr> = call.args.args.iter().map(|a| a.as_ref()).collect();
                match name {
                    _ if RATES.contains(&name) => {
                        if !matches!(args[0], Expr::MatrixSelector(_)) {
                            self.problem(
                                src,
                                format!("{name} over something not a range selector"),
                            );
                        }
                        self.walk(
                            src,
                            args[0],
                            Ctx {
                                in_rate: true,
                                ..ctx
                            },
                        )
                    }
                    "histogram_quantile" => {
                        self.walk(src, args[0], Ctx::default());
                        let inner = Ctx {
                            in_rate: false,
                            in_quantile: true,
                        };
                        let mut l = self.walk(src, args[1], inner);
                        if !l.remove("le") {
                            self.problem(src, "histogram_quantile over series without le".into());
                        }
                        l
                    }
                    "time" | "vector" => {
                        for a in args {
                            self.walk(src, a, Ctx::default());
                        }
                        BTreeSet::new()
                    }
                    _ => {
                        self.problem(src, format!("function {name}: not one the checks know"));
                        BTreeSet::new()
                    }
                }
            }
            Expr::Aggregate(agg) => {
                let inner = self.walk(
                    src,
                    &agg.expr,
                    Ctx {
                        in_rate: false,
                        ..ctx
                    },
                );
                let (kept, grouping) = match &agg.modifier {
                    Some(LabelModifier::Include(l)) => {
                        let by: BTreeSet<String> = l.labels.iter().cloned().collect();
                        (by.clone(), by)
                    }
                    Some(LabelModifier::Exclude(l)) => {
                        let without: BTreeSet<String> = l.labels.iter().cloned().collect();
                        (inner.difference(&without).cloned().collect(), without)
                    }
                    None => (BTreeSet::new(), BTreeSet::new()),
                };
                for g in grouping.difference(&inner) {
                    self.problem(src, format!("{} by/without {g}: no such label", agg.op));
                }
                if ctx.in_quantile && !kept.contains("le") {
                    self.problem(src, format!("{} drops le under histogram_quantile", agg.op));
                }
                kept
            }
            Expr::Binary(b) => {
                let lhs = self.walk(src, &b.lhs, Ctx::default());
                let rhs = self.walk(src, &b.rhs, Ctx::default());
                if let Some(m) = b.modifier.as_ref().and_then(|m| m.matching.as_ref()) {
                    for l in m.labels().labels.iter() {
                        if !lhs.contains(l) || !rhs.contains(l) {
                            self.problem(
                                src,
                                format!("{} on/ignoring {l}: not on both sides", b.op),
                            );
                        }
                    }
                }
                let scalar = |e: &Expr| {
                    matches!(e, Expr::NumberLiteral(_))
                        || matches!(e, Expr::Call(c) if c.func.name == "time")
                };
                if scalar(&b.lhs) { rhs } else { lhs }
            }
            Expr::Paren(p) => self.walk(src, &p.expr, ctx),
            Expr::Unary(u) => self.walk(src, &u.expr, ctx),
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) => BTreeSet::new(),
            Expr::Subquery(_) | Expr::Extension(_) => {
                self.problem(
                    src,
                    "a subquery or extension: not one the checks know".into(),
                );
                BTreeSet::new()
            }
        }
    }

    fn selector(
        &mut self,
        src: &str,
        vs: &promql_parser::parser::VectorSelector,
        ctx: Ctx,
    ) -> BTreeSet<String> {
        let Some(name) = vs.name.clone() else {
            self.problem(src, "a selector without a metric name".into());
            return BTreeSet::new();
        };
        self.used.insert(name.clone());
        let Some(series) = self.series.get(&name).cloned() else {
            self.problem(src, format!("{name} is not in the scrape"));
            return BTreeSet::new();
        };
        if !vs.matchers.or_matchers.is_empty() {
            self.problem(src, format!("{name}: `or` matchers"));
        }
        let labels = self.labels_of(&name);
        for m in vs.matchers.matchers.iter().filter(|m| m.name != "__name__") {
            self.matcher(src, &name, &series, &labels, m);
        }
        if series.is_counter() && !ctx.in_rate {
            self.problem(
                src,
                format!("counter {name} read without rate/increase/irate"),
            );
        }
        if !series.is_counter() && ctx.in_rate {
            self.problem(
                src,
                format!("rate/increase/irate over the {:?} {name}", series.kind),
            );
        }
        if (series.suffix == "_bucket") != ctx.in_quantile {
            self.problem(
                src,
                format!("{name}: a _bucket series must be (only) histogram_quantile's argument"),
            );
        }
        labels
    }

    fn matcher(
        &mut self,
        src: &str,
        name: &str,
        series: &Series,
        labels: &BTreeSet<String>,
        m: &Matcher,
    ) {
        let l = &m.name;
        if !labels.contains(l) {
            self.problem(src, format!("{name} has no label {l}"));
            return;
        }
        let own = series.labels.get(l);
        match (&m.op, own) {
            // A label of the metric: the value is one the agent exports.
            (MatchOp::Equal | MatchOp::NotEqual, Some(values)) => {
                if !values.contains(&m.value) {
                    self.problem(
                        src,
                        format!("{name}{{{l}={:?}}}: the agent exports {values:?}", m.value),
                    );
                }
            }
            // `job`: what the PodMonitor's jobLabel gives.
            (MatchOp::Equal, None) if l == "job" => {
                if m.value != self.job {
                    self.problem(
                        src,
                        format!("{name}{{job={:?}}}: the job is {:?}", m.value, self.job),
                    );
                }
            }
            // Grafana's "All" of a target label.
            (MatchOp::Re(_), None) if m.value == ".*" => {}
            (op, _) => self.problem(
                src,
                format!(
                    "{name}: matcher {l}{op}{:?}: not a value the checks can verify",
                    m.value
                ),
            ),
        }
    }
}

fn checker(series: &BTreeMap<String, Series>) -> Checker<'_> {
    Checker {
        series,
        targets: target_labels(),
        job: job_value(),
        problems: Vec::new(),
        used: BTreeSet::new(),
    }
}

/// Rows `NAME | METRIC METRIC...`: each name with the metric families it reads, in order.
fn uses<C: FromIterator<(String, BTreeSet<String>)>>(rows: &[&str]) -> C {
    rows.iter()
        .map(|row| {
            let (name, metrics) = row.split_once(" | ").expect("NAME | METRICS");
            (
                name.to_string(),
                metrics.split(' ').map(str::to_string).collect(),
            )
        })
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// The tests.

/// Every family the agent exports, with its type and labels, is in the scrape: the checks below
/// see all of them, not only those that happen to have a sample.
#[test]
fn the_scrape_has_every_family_with_its_labels() {
    let series = parse_exposition(scrape());
    let got: BTreeMap<String, (Type, BTreeSet<String>)> = series
        .iter()
        .map(|(name, s)| (name.clone(), (s.kind, s.labels.keys().cloned().collect())))
        .collect();
    let h = |base: &str| {
        [
            (format!("{base}_bucket"), (Type::Histogram, set(&["le"]))),
            (format!("{base}_count"), (Type::Histogram, set(&[]))),
            (format!("{base}_sum"), (Type::Histogram, set(&[]))),
        ]
    };
    let mut want: BTreeMap<String, (Type, BTreeSet<String>)> = [
        ("gpu_labeler_build_info", (Type::Info, set(&["version"]))),
        (
            "gpu_labeler_publishes_total",
            (Type::Counter, set(&["result"])),
        ),
        (
            "gpu_labeler_publish_errors_total",
            (Type::Counter, set(&["reason"])),
        ),
        (
            "gpu_labeler_label_conflicts_total",
            (Type::Counter, set(&[])),
        ),
        ("gpu_labeler_label_refused_total", (Type::Counter, set(&[]))),
        ("gpu_labeler_rule_errors_total", (Type::Counter, set(&[]))),
        (
            "gpu_labeler_rejected_labels_total",
            (Type::Counter, set(&[])),
        ),
        ("gpu_labeler_reload_errors_total", (Type::Counter, set(&[]))),
        (
            "gpu_labeler_gpus",
            (Type::Gauge, set(&["vendor", "product"])),
        ),
        ("gpu_labeler_gpu_faults", (Type::Gauge, set(&["kind"]))),
        (
            "gpu_labeler_dra_mismatches",
            (Type::Gauge, set(&["reason"])),
        ),
        ("gpu_labeler_device_taints", (Type::Gauge, set(&[]))),
        ("gpu_labeler_nvml_status", (Type::Gauge, set(&["status"]))),
        (
            "gpu_labeler_nvml_failures_total",
            (Type::Counter, set(&["reason"])),
        ),
        (
            "gpu_labeler_last_publish_timestamp_seconds",
            (Type::Gauge, set(&[])),
        ),
        (
            "gpu_labeler_events_total",
            (Type::Counter, set(&["source"])),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for base in [
        "gpu_labeler_scan_duration_seconds",
        "gpu_labeler_publish_duration_seconds",
        "gpu_labeler_event_to_publish_seconds",
    ] {
        want.extend(h(base));
    }
    assert_eq!(got, want, "{}", scrape());
    // The value sets the alerts' equality matchers rely on, as the agent exports them.
    let values = |name: &str, label: &str| series[name].labels[label].clone();
    assert_eq!(
        values("gpu_labeler_nvml_status", "status"),
        set(&["error", "ok", "stale", "unavailable"])
    );
    assert_eq!(
        values("gpu_labeler_gpus", "vendor"),
        set(&["nvidia"]),
        "the H100 fixture through the fake NVML"
    );
    // Every series of a labelled counter from the first scrape, at 0 until it counts.
    assert_eq!(
        values("gpu_labeler_publishes_total", "result"),
        set(&["dry_run", "unchanged", "written"])
    );
    assert_eq!(
        values("gpu_labeler_publish_errors_total", "reason"),
        set(&[
            "client",
            "conflict",
            "decode",
            "io",
            "network",
            "not_found",
            "server",
            "throttled",
            "timeout",
            "too_large"
        ])
    );
}

/// Every alert expression parses and reads the scrape as it is; each alert selects exactly
/// these series.
#[test]
fn every_alert_expression_selects_what_the_agent_exports() {
    let series = with_synthetic(parse_exposition(scrape()));
    let mut c = checker(&series);
    let used: BTreeMap<String, BTreeSet<String>> = alerts()
        .iter()
        .map(|a| (a.name.clone(), c.check(&a.expr)))
        .collect();
    assert_eq!(c.problems, Vec::<String>::new());
    let want: BTreeMap<String, BTreeSet<String>> = uses(&[
        "GpuLabelerDown | up",
        "GpuLabelerPublishBehind | gpu_labeler_last_publish_timestamp_seconds",
        "GpuLabelerPublishErrors | gpu_labeler_publish_errors_total",
        "GpuLabelerLabelsRejected | gpu_labeler_rejected_labels_total",
        "GpuLabelerLabelConflicts | gpu_labeler_label_conflicts_total",
        "GpuLabelerRuleErrors | gpu_labeler_rule_errors_total",
        "GpuLabelerReloadErrors | gpu_labeler_reload_errors_total",
        "GpuLabelerNvmlNotOk | gpu_labeler_gpus gpu_labeler_nvml_status",
        "GpuLabelerNvmlFailures | gpu_labeler_nvml_failures_total",
        "GpuLabelerGpuFaults | gpu_labeler_gpu_faults",
        "GpuLabelerLabelsChurning | gpu_labeler_publishes_total",
    ]);
    assert_eq!(used, want);
}

/// The checks themselves catch what they are for: each of these broken expressions is refused
/// with its reason.
#[test]
fn the_checks_refuse_broken_expressions() {
    let series = with_synthetic(parse_exposition(scrape()));
    let mut c = checker(&series);
    let broken = [
        "gpu_labeler_publishes_total > 0",
        "rate(gpu_labeler_gpus[5m])",
        "gpu_labeler_nvml_status{status=\"okay\"} == 0",
        "gpu_labeler_publish_errors_total_typo",
        "sum by (reason) (rate(gpu_labeler_publishes_total[5m]))",
        "histogram_quantile(0.9, sum(rate(gpu_labeler_scan_duration_seconds_bucket[5m])))",
        "histogram_quantile(0.9, rate(gpu_labeler_scan_duration_seconds_count[5m]))",
        "rate(gpu_labeler_scan_duration_seconds_bucket[5m])",
        "gpu_labeler_gpus{gpu=\"0\"}",
        "up{job=\"gpu-labeler/gpu-labeler\"} == 0",
        "gpu_labeler_gpus and on (status) gpu_labeler_nvml_status",
    ];
    for e in broken {
        c.check(e);
    }
    let problems = std::mem::take(&mut c.problems);
    assert_eq!(
        problems,
        vec![
            "gpu_labeler_publishes_total > 0: counter gpu_labeler_publishes_total read without rate/increase/irate".to_string(),
            "rate(gpu_labeler_gpus[5m]): rate/increase/irate over the Gauge gpu_labeler_gpus".into(),
            "gpu_labeler_nvml_status{status=\"okay\"} == 0: gpu_labeler_nvml_status{status=\"okay\"}: the agent exports {\"error\", \"ok\", \"stale\", \"unavailable\"}".into(),
            "gpu_labeler_publish_errors_total_typo: gpu_labeler_publish_errors_total_typo is not in the scrape".into(),
            "sum by (reason) (rate(gpu_labeler_publishes_total[5m])): sum by/without reason: no such label".into(),
            "histogram_quantile(0.9, sum(rate(gpu_labeler_scan_duration_seconds_bucket[5m]))): sum drops le under histogram_quantile".into(),
            "histogram_quantile(0.9, sum(rate(gpu_labeler_scan_duration_seconds_bucket[5m]))): histogram_quantile over series without le".into(),
            "histogram_quantile(0.9, rate(gpu_labeler_scan_duration_seconds_count[5m])): gpu_labeler_scan_duration_seconds_count: a _bucket series must be (only) histogram_quantile's argument".into(),
            "histogram_quantile(0.9, rate(gpu_labeler_scan_duration_seconds_count[5m])): histogram_quantile over series without le".into(),
            "rate(gpu_labeler_scan_duration_seconds_bucket[5m]): gpu_labeler_scan_duration_seconds_bucket: a _bucket series must be (only) histogram_quantile's argument".into(),
            "gpu_labeler_gpus{gpu=\"0\"}: gpu_labeler_gpus has no label gpu".into(),
            "up{job=\"gpu-labeler/gpu-labeler\"} == 0: up{job=\"gpu-labeler/gpu-labeler\"}: the job is \"gpu-labeler\"".into(),
            "gpu_labeler_gpus and on (status) gpu_labeler_nvml_status: and on/ignoring status: not on both sides".into(),
        ]
    );
}

/// The panels of the dashboard, each with the series it reads.
#[test]
fn every_dashboard_query_selects_what_the_agent_exports() {
    let series = with_synthetic(parse_exposition(scrape()));
    let mut c = checker(&series);
    let d = dashboard();
    let mut used: Vec<(String, BTreeSet<String>)> = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        let title = p["title"].as_str().unwrap().to_string();
        let mut names = BTreeSet::new();
        for t in p["targets"].as_array().unwrap() {
            names.extend(c.check(&interpolate(t["expr"].as_str().unwrap())));
        }
        used.push((title, names));
    }
    // The variables' queries: label_values(SELECTOR, LABEL).
    for v in d["templating"]["list"].as_array().unwrap() {
        if v["type"] != "query" {
            continue;
        }
        let q = v["query"]["query"].as_str().unwrap();
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{q}: not label_values(...)"));
        let (selector, label) = inner.rsplit_once(',').unwrap();
        let selector = interpolate(selector);
        let names = c.check(&selector);
        let label = label.trim();
        for n in &names {
            if !c.labels_of(n).contains(label) {
                c.problems.push(format!("{q}: {n} has no label {label}"));
            }
        }
        used.push((format!("variable {}", v["name"].as_str().unwrap()), names));
    }
    assert_eq!(c.problems, Vec::<String>::new());
    let want: Vec<(String, BTreeSet<String>)> = uses(&[
        "Agents | gpu_labeler_build_info",
        "GPUs | gpu_labeler_gpus",
        "NVIDIA nodes without NVML | gpu_labeler_gpus gpu_labeler_nvml_status",
        "Oldest last publish | gpu_labeler_last_publish_timestamp_seconds",
        "Publishes by result | gpu_labeler_publishes_total",
        "Publish errors by reason | gpu_labeler_publish_errors_total",
        "Scan duration | gpu_labeler_scan_duration_seconds_bucket",
        "Publish duration | gpu_labeler_publish_duration_seconds_bucket",
        "Event to publish latency | gpu_labeler_event_to_publish_seconds_bucket",
        "GPUs by vendor and product | gpu_labeler_gpus",
        "Agents by NVML status | gpu_labeler_nvml_status",
        "NVML failures by reason | gpu_labeler_nvml_failures_total",
        "Rejected, conflicting and refused labels, rule and reload errors | gpu_labeler_label_conflicts_total gpu_labeler_label_refused_total gpu_labeler_rejected_labels_total gpu_labeler_reload_errors_total gpu_labeler_rule_errors_total",
        "Events by source | gpu_labeler_events_total",
        "Last publish age by node | gpu_labeler_last_publish_timestamp_seconds",
        "GPU faults by kind | gpu_labeler_gpu_faults",
        "DRA mismatches by reason | gpu_labeler_dra_mismatches",
        "GPUs tainted out of DRA allocation by node | gpu_labeler_device_taints",
        "variable namespace | gpu_labeler_build_info",
        "variable node | gpu_labeler_build_info",
    ]);
    assert_eq!(used, want);
    // Every family the agent exports is on the dashboard (a histogram through its buckets).
    let families = |names: &mut dyn Iterator<Item = &String>| -> BTreeSet<String> {
        names
            .filter_map(|n| series.get(n))
            .filter(|s| s.family != "up")
            .map(|s| s.family.clone())
            .collect()
    };
    let shown = families(&mut used.iter().flat_map(|(_, n)| n));
    let exported = families(&mut parse_exposition(scrape()).keys());
    assert_eq!(shown, exported);
}

/// The dashboard as Grafana loads it: one data source variable used by every panel and query,
/// unique panel ids and query ids, panels on the 24-column grid without overlap.
#[test]
fn the_dashboard_is_well_formed() {
    let d = dashboard();
    assert_eq!(d["uid"], "gpu-labeler");
    let ds = serde_json::json!({"type": "prometheus", "uid": "${datasource}"});
    let vars: Vec<(&str, &str)> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        vars,
        [
            ("datasource", "datasource"),
            ("namespace", "query"),
            ("node", "query")
        ]
    );
    let panels = d["panels"].as_array().unwrap();
    let ids: BTreeSet<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    let mut cells = BTreeMap::new();
    for p in panels {
        let title = p["title"].as_str().unwrap();
        assert_eq!(p["datasource"], ds, "{title}");
        let refs: Vec<&str> = p["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                assert_eq!(t["datasource"], ds, "{title}");
                t["refId"].as_str().unwrap()
            })
            .collect();
        let unique: BTreeSet<&&str> = refs.iter().collect();
        assert_eq!(unique.len(), refs.len(), "{title}: refIds");
        let g = &p["gridPos"];
        let [x, y, w, h] = ["x", "y", "w", "h"].map(|k| g[k].as_u64().unwrap());
        assert!(x + w <= 24 && w > 0 && h > 0, "{title}: {g}");
        for cx in x..x + w {
            for cy in y..y + h {
                if let Some(other) = cells.insert((cx, cy), title) {
                    panic!("{title} overlaps {other} at ({cx}, {cy})");
                }
            }
        }
    }
}

/// The rows of docs/troubleshooting.md's table: the symptom column.
fn troubleshooting_rows(page: &str) -> Vec<String> {
    // The page's first table (its only one).
    page.lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .next()
                .unwrap()
                .trim()
                .to_string()
        })
        .collect()
}

/// A page of the book.
fn doc(name: &str) -> String {
    std::fs::read_to_string(common::repo().join("docs").join(name)).unwrap()
}

const RUNBOOK: &str = "Runbook: docs/troubleshooting.md, row: ";

/// Each alert has a `for`, a severity, a summary and a description whose last sentence names
/// its row of docs/troubleshooting.md, a row that exists.
#[test]
fn every_alert_names_its_troubleshooting_row() {
    let rows = troubleshooting_rows(&doc("troubleshooting.md"));
    let mut runbooks = BTreeMap::new();
    let mut problems = Vec::new();
    for a in alerts() {
        let duration = a.for_.trim_end_matches(['s', 'm', 'h']);
        if a.for_.is_empty() || duration.is_empty() || !duration.bytes().all(|b| b.is_ascii_digit())
        {
            problems.push(format!("{}: for {:?}", a.name, a.for_));
        }
        let severity = a.labels.get("severity").map(String::as_str);
        if !matches!(severity, Some("critical" | "warning" | "info")) || a.labels.len() != 1 {
            problems.push(format!("{}: labels {:?}", a.name, a.labels));
        }
        let keys: Vec<&str> = a.annotations.keys().map(String::as_str).collect();
        if keys != ["description", "summary"] {
            problems.push(format!("{}: annotations {keys:?}", a.name));
        }
        let description = a
            .annotations
            .get("description")
            .cloned()
            .unwrap_or_default();
        match description.split_once(RUNBOOK) {
            Some((what, row)) if !what.trim().is_empty() => {
                if !rows.iter().any(|r| r == row) {
                    problems.push(format!(
                        "{}: {row:?} is no row of docs/troubleshooting.md",
                        a.name
                    ));
                }
                runbooks.insert(a.name.clone(), row.to_string());
            }
            _ => problems.push(format!("{}: the description names no runbook", a.name)),
        }
    }
    assert_eq!(problems, Vec::<String>::new(), "rows: {rows:#?}");
    let want: BTreeMap<String, String> = [
        ("GpuLabelerDown", "alert `GpuLabelerDown`: Prometheus cannot scrape an agent"),
        ("GpuLabelerPublishBehind", "alert `GpuLabelerPublishBehind` or `GpuLabelerPublishErrors`"),
        ("GpuLabelerPublishErrors", "alert `GpuLabelerPublishBehind` or `GpuLabelerPublishErrors`"),
        (
            "GpuLabelerLabelsRejected",
            "log `label \"amd.com/...\" from rule ... rejected: namespace \"amd.com\" is not in labels.allowedNs ...`",
        ),
        (
            "GpuLabelerLabelConflicts",
            "log `label <key> is owned by field manager \"<manager>\" with another value; not applied`",
        ),
        ("GpuLabelerRuleErrors", "a label is missing"),
        (
            "GpuLabelerReloadErrors",
            "log `<file>:<line>:<col>: ...` then `invalid rules; keeping the last good rules`",
        ),
        ("GpuLabelerNvmlNotOk", "no `gpu.memory`, `gpu.compute.*`, `gpu.cuda.*` on NVIDIA nodes"),
        (
            "GpuLabelerNvmlFailures",
            "log `NVML: <lib>: timed out after 10s` or `killed by SIGSEGV`",
        ),
        (
            "GpuLabelerGpuFaults",
            "alert `GpuLabelerGpuFaults`, `gpu.health=degraded` or the `gpu-unhealthy` taint",
        ),
        ("GpuLabelerLabelsChurning", "labels every few minutes in the API audit log"),
    ]
    .into_iter()
    .map(|(a, r)| (a.to_string(), r.to_string()))
    .collect();
    assert_eq!(runbooks, want);
}

/// docs/metrics.md's alert table (between `<!-- alerts-table -->` markers) is the PrometheusRule: the
/// same alerts in the same order, with the same expression, `for` and severity.
#[test]
fn the_docs_alert_table_is_the_prometheus_rule() {
    let page = doc("metrics.md");
    let start = page
        .find("<!-- alerts-table -->")
        .expect("docs/metrics.md: <!-- alerts-table --> marker");
    let end = page
        .find("<!-- /alerts-table -->")
        .expect("docs/metrics.md: <!-- /alerts-table --> marker");
    let code = |c: &str| -> String {
        let c = c.trim();
        c.strip_prefix('`')
            .and_then(|c| c.strip_suffix('`'))
            .unwrap_or(c)
            .to_string()
    };
    let mut lines = page[start..end].lines().skip(1);
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .trim_matches('|')
        .split('|')
        .map(code)
        .collect();
    assert_eq!(
        header,
        ["alert", "expression", "for", "severity", "what it means"]
    );
    lines.next().expect("separator");
    let table: Vec<[String; 4]> = lines
        .map(|l| {
            let c: Vec<String> = l.trim().trim_matches('|').split('|').map(code).collect();
            assert_eq!(c.len(), 5, "{l}");
            [c[0].clone(), c[1].clone(), c[2].clone(), c[3].clone()]
        })
        .collect();
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let rule: Vec<[String; 4]> = alerts()
        .into_iter()
        .map(|a| {
            [
                a.name,
                squash(&a.expr),
                a.for_,
                a.labels["severity"].clone(),
            ]
        })
        .collect();
    assert_eq!(table, rule);
}
