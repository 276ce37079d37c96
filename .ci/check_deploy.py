#!/usr/bin/env python3
"""Checks what an operator applies: every kustomization under deploy/, rendered with
`kubectl kustomize`, validated strictly against the Kubernetes schemas of the oldest supported
version (k8s-openapi's v1_33) and the newest, and checked for the security settings of issue 7.
The monitoring components (deploy/components/prometheus, deploy/components/grafana) are rendered
on the base and on the nvidia component; their Prometheus-operator objects (PodMonitor,
PrometheusRule: CRD kinds, not in kubernetes-validate's schemas) are checked against the part of
the operator's CRD schema they use (CRD_SCHEMAS below), strictly, and for what they must select.

Usage: check_deploy.py KUBECTL KUBERNETES_VALIDATE   (run from the repository root)
Exits 1 with one line per problem. .ci/check_helm.py imports it (render, validate, the checks),
after setting KUBECTL and VALIDATE."""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

KUBECTL = VALIDATE = None  # the programs: from the command line, or set by an importer
VERSIONS = ["1.33.0", "1.37.0"]
problems = []


def render(path):
    out = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        problems.append(f"{path}: kubectl kustomize failed: {out.stderr.strip()}")
        return None
    return out.stdout


def validate(name, text):
    """Core kinds through kubernetes-validate; the Prometheus operator's kinds through
    check_crd_object (kubernetes-validate has no schema for them, and only warns)."""
    docs = [d for d in yaml.safe_load_all(text) if d]
    core = [d for d in docs if (d["apiVersion"], d["kind"]) not in CRD_SCHEMAS]
    ok = all([check_crd_object(name, d) for d in docs if (d["apiVersion"], d["kind"]) in CRD_SCHEMAS])
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump_all(core, f, sort_keys=False)
    for v in VERSIONS:
        out = subprocess.run([VALIDATE, "--strict", "--quiet", "-k", v, f.name],
                             capture_output=True, text=True)
        said = (out.stdout + out.stderr).strip()
        # An object it has no schema for passes with a warning: not validated, so a failure here.
        if out.returncode != 0 or "Couldn't find schema" in said:
            ok = False
            problems.append(f"{name}: not valid for Kubernetes {v}: {said}")
    return ok


# The Prometheus operator's kinds: the part of their CRD schemas (openAPIV3Schema of
# monitoring.coreos.com_podmonitors.yaml and monitoring.coreos.com_prometheusrules.yaml in the
# operator's example/prometheus-operator-crd/, v1, operator 0.82 to 0.91) that these manifests
# use, with the CRD's types, patterns, enums and required fields. A field outside it is refused,
# as kubernetes-validate --strict refuses one for core kinds: the API server would prune an
# unknown field silently. `metadata` is only `type: object` in a CRD (the API server checks it
# as ObjectMeta): here a DNS-1123 name, a namespace and string label/annotation maps.
DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def _obj(props, required=()):
    return {"type": "object", "properties": props, "required": list(required)}


def _arr(items):
    return {"type": "array", "items": items}


S = {"type": "string"}
B = {"type": "boolean"}
I = {"type": "integer"}
STRING_MAP = {"type": "object", "additionalProperties": S}
METADATA = _obj({"name": {"type": "string", "pattern": DNS1123_SUBDOMAIN, "maxLength": 253},
                 "namespace": {"type": "string", "pattern": DNS1123_LABEL, "maxLength": 63},
                 "labels": STRING_MAP, "annotations": STRING_MAP}, ["name", "namespace"])
LABEL_SELECTOR = _obj({
    "matchLabels": STRING_MAP,
    "matchExpressions": _arr(_obj({"key": S, "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                                   "values": _arr(S)}, ["key", "operator"]))})
RELABEL_ACTIONS = ["replace", "Replace", "keep", "Keep", "drop", "Drop", "hashmod", "HashMod", "labelmap",
                   "LabelMap", "labeldrop", "LabelDrop", "labelkeep", "LabelKeep", "lowercase", "Lowercase",
                   "uppercase", "Uppercase", "keepequal", "KeepEqual", "dropequal", "DropEqual"]
RELABEL = _obj({"action": {"type": "string", "enum": RELABEL_ACTIONS}, "sourceLabels": _arr(S), "targetLabel": S,
                "regex": S, "replacement": S, "separator": S, "modulus": I})
POD_METRICS_ENDPOINT = _obj({
    "port": S, "portNumber": {"type": "integer", "minimum": 1, "maximum": 65535}, "path": S,
    "scheme": {"type": "string", "enum": ["http", "https", "HTTP", "HTTPS"]},
    "interval": {"type": "string", "pattern": DURATION}, "scrapeTimeout": {"type": "string", "pattern": DURATION},
    "honorLabels": B, "relabelings": _arr(RELABEL), "metricRelabelings": _arr(RELABEL)})
RULE = _obj({"alert": S, "record": S, "expr": S, "for": {"type": "string", "pattern": DURATION},
             "keep_firing_for": {"type": "string", "pattern": DURATION, "minLength": 1},
             "labels": STRING_MAP, "annotations": STRING_MAP}, ["expr"])
RULE_GROUP = _obj({"name": {"type": "string", "minLength": 1}, "interval": {"type": "string", "pattern": DURATION},
                   "limit": I, "labels": STRING_MAP, "rules": _arr(RULE)}, ["name"])
CRD_SCHEMAS = {
    ("monitoring.coreos.com/v1", "PodMonitor"): _obj({
        "apiVersion": S, "kind": S, "metadata": METADATA,
        "spec": _obj({"jobLabel": S, "namespaceSelector": _obj({"any": B, "matchNames": _arr(S)}),
                      "podMetricsEndpoints": _arr(POD_METRICS_ENDPOINT), "podTargetLabels": _arr(S),
                      "sampleLimit": I, "selector": LABEL_SELECTOR}, ["selector"])}, ["spec"]),
    ("monitoring.coreos.com/v1", "PrometheusRule"): _obj({
        "apiVersion": S, "kind": S, "metadata": METADATA,
        "spec": _obj({"groups": _arr(RULE_GROUP)})}, ["spec"]),
}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


def conform(where, value, schema):
    """The problems of `value` against a schema of the subset above, one line each."""
    t = schema["type"]
    if t == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{where}: {value!r} is not an integer"]
        if not schema.get("minimum", value) <= value <= schema.get("maximum", value):
            return [f"{where}: {value} out of range"]
        return []
    if not isinstance(value, TYPES[t]):
        return [f"{where}: {value!r} is not a {t}"]
    out = []
    if t == "string":
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if "enum" in schema and value not in schema["enum"]:
            out.append(f"{where}: {value!r} is not one of {schema['enum']}")
        if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
            out.append(f"{where}: length {len(value)}")
    elif t == "array":
        for i, item in enumerate(value):
            out += conform(f"{where}[{i}]", item, schema["items"])
    elif "additionalProperties" in schema:
        for k, v in value.items():
            out += conform(f"{where}.{k}", v, schema["additionalProperties"])
    else:
        for k, v in value.items():
            if k not in schema["properties"]:
                out.append(f"{where}: unknown field {k!r}")
            else:
                out += conform(f"{where}.{k}", v, schema["properties"][k])
        out += [f"{where}: {k} is required" for k in schema["required"] if k not in value]
    return out


def check_crd_object(name, doc):
    found = conform(f"{doc['kind']} {doc.get('metadata', {}).get('name')}", doc,
                    CRD_SCHEMAS[(doc["apiVersion"], doc["kind"])])
    problems.extend(f"{name}: {p}" for p in found)
    return not found


def need(cond, what):
    if not cond:
        problems.append(what)


def check_daemonset(where, ds, nvidia, service_account="gpu-labeler"):
    name = ds["metadata"]["name"]
    w = f"{where}: DaemonSet {name}"
    spec = ds["spec"]["template"]["spec"]
    need(spec.get("serviceAccountName") == service_account, f"{w}: serviceAccountName")
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        need(not spec.get(host, False), f"{w}: {host} must be off")
    psc = spec.get("securityContext", {})
    need(psc.get("runAsNonRoot") is True, f"{w}: pod runAsNonRoot")
    need(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{w}: pod seccompProfile RuntimeDefault")
    need(ds["spec"]["updateStrategy"]["type"] == "RollingUpdate", f"{w}: RollingUpdate")
    need(str(ds["spec"]["updateStrategy"]["rollingUpdate"].get("maxSurge", 0)) == "0", f"{w}: maxSurge 0")
    tolerated = {t.get("key") for t in spec.get("tolerations", [])}
    for key in ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915"):
        need(key in tolerated, f"{w}: tolerates {key}")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    host_paths = {n: v["hostPath"]["path"] for n, v in volumes.items() if "hostPath" in v}
    need(sorted(host_paths.values()) == ["/proc/modules", "/sys"], f"{w}: hostPath volumes are exactly /sys and /proc/modules, got {host_paths}")
    (c,) = spec["containers"]
    sc = c.get("securityContext", {})
    need(sc.get("allowPrivilegeEscalation") is False, f"{w}: allowPrivilegeEscalation false")
    need(sc.get("readOnlyRootFilesystem") is True, f"{w}: readOnlyRootFilesystem")
    need(not sc.get("privileged", False), f"{w}: not privileged")
    need(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{w}: drop ALL capabilities")
    need(not sc.get("capabilities", {}).get("add"), f"{w}: no capabilities added")
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    for m in mounts.values():
        need(m.get("readOnly") is True, f"{w}: mount {m['mountPath']} read-only")
    args = c["args"]
    by_path = {host_paths[n]: mounts[n]["mountPath"] for n in host_paths if n in mounts}
    need(f"--sysfs-root={by_path.get('/sys')}" in args, f"{w}: host /sys passed with --sysfs-root")
    need(by_path.get("/proc/modules", "").endswith("/modules")
         and f"--proc-root={by_path['/proc/modules'][:-len('/modules')]}" in args,
         f"{w}: host /proc/modules passed with --proc-root")
    env = {e["name"]: e for e in c.get("env", [])}
    need(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
         f"{w}: NODE_NAME from spec.nodeName")
    res = c.get("resources", {})
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            need(r in res.get(kind, {}), f"{w}: resources.{kind}.{r}")
    need(c.get("livenessProbe", {}).get("httpGet", {}).get("path") == "/healthz", f"{w}: liveness /healthz")
    need(c.get("readinessProbe", {}).get("httpGet", {}).get("path") == "/readyz", f"{w}: readiness /readyz")
    if nvidia:
        need(spec.get("runtimeClassName") == "nvidia", f"{w}: runtimeClassName nvidia")
        need(env.get("NVIDIA_VISIBLE_DEVICES", {}).get("value") == "all", f"{w}: NVIDIA_VISIBLE_DEVICES=all")
        need(env.get("NVIDIA_DRIVER_CAPABILITIES", {}).get("value") == "utility", f"{w}: NVIDIA_DRIVER_CAPABILITIES=utility")
    else:
        need("runtimeClassName" not in spec, f"{w}: no runtimeClassName")
        need("NVIDIA_VISIBLE_DEVICES" not in env, f"{w}: no NVIDIA env")


def check_gfd(where, text, expect_gfd, name="gpu-labeler"):
    docs = [d for d in yaml.safe_load_all(text) if d]
    for ds in (d for d in docs if d["kind"] == "DaemonSet"):
        env = {e["name"]: e.get("value") for e in ds["spec"]["template"]["spec"]["containers"][0].get("env", [])}
        need((env.get("GPU_LABELER_PROFILES") == "nvidia-gfd") == expect_gfd,
             f"{where}: DaemonSet {ds['metadata']['name']}: GPU_LABELER_PROFILES")
    for vap in (d for d in docs if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == f"{name}-own-node"):
        key = next(v["expression"] for v in vap["spec"]["variables"] if v["name"] == "allowedKey")
        need(("nvidia\\.com/" in key) == expect_gfd, f"{where}: the Node policy's allowedKey and nvidia.com")


def check_networkpolicy(where, text, expected):
    docs = [d for d in yaml.safe_load_all(text) if d]
    nps = [d for d in docs if d["kind"] == "NetworkPolicy"]
    if not expected:
        need(nps == [], f"{where}: no NetworkPolicy")
        return
    need(len(nps) == 1, f"{where}: one NetworkPolicy, got {len(nps)}")
    if not nps:
        return
    spec = nps[0]["spec"]
    for ds in (d for d in docs if d["kind"] == "DaemonSet"):
        labels = ds["spec"]["template"]["metadata"]["labels"]
        need(all(labels.get(k) == v for k, v in spec["podSelector"]["matchLabels"].items()),
             f"{where}: the NetworkPolicy selects DaemonSet {ds['metadata']['name']}'s pods")
    need(spec["policyTypes"] == ["Ingress"], f"{where}: NetworkPolicy policyTypes")
    ports = [p for rule in spec["ingress"] for p in rule["ports"]]
    need(ports == [{"protocol": "TCP", "port": 8080}], f"{where}: NetworkPolicy admits only TCP 8080, got {ports}")
    need(all(rule.get("from") for rule in spec["ingress"]), f"{where}: NetworkPolicy ingress has a from")


MONITORING_KINDS = ("PodMonitor", "PrometheusRule")
# `kubectl apply` (client-side) keeps the whole object in an annotation of at most 256 KiB.
LAST_APPLIED_LIMIT = 256 * 1024


def check_monitoring(where, text, expected, name="gpu-labeler"):
    """deploy/components/prometheus and deploy/components/grafana: the PodMonitor scrapes every
    agent pod's metrics port, the PrometheusRule holds alerting rules an Alertmanager can route,
    the dashboard ConfigMap is one Grafana's sidecar loads. Without the components, none of it:
    the base must apply on a cluster without the operator's CRDs."""
    docs = [d for d in yaml.safe_load_all(text) if d]
    pms = [d for d in docs if d["kind"] == "PodMonitor"]
    prs = [d for d in docs if d["kind"] == "PrometheusRule"]
    dashboards = [d for d in docs if d["kind"] == "ConfigMap" and "grafana_dashboard" in d["metadata"].get("labels", {})]
    if not expected:
        need(pms == [] and prs == [] and dashboards == [], f"{where}: no monitoring objects without the components")
        return
    need(len(pms) == 1 and len(prs) == 1 and len(dashboards) == 1,
         f"{where}: one PodMonitor, one PrometheusRule, one dashboard ConfigMap, got {len(pms)}, {len(prs)}, {len(dashboards)}")
    if not (pms and prs and dashboards):
        return
    pm, pr, cm = pms[0], prs[0], dashboards[0]
    daemonsets = [d for d in docs if d["kind"] == "DaemonSet"]
    namespaces = {d["metadata"]["namespace"] for d in daemonsets}
    for o in (pm, pr, cm):
        need({o["metadata"]["namespace"]} == namespaces,
             f"{where}: {o['kind']} {o['metadata']['name']} in the agents' namespace {namespaces}")
    spec = pm["spec"]
    need("namespaceSelector" not in spec, f"{where}: the PodMonitor selects pods of its own namespace")
    match = spec["selector"].get("matchLabels", {})
    need(match and not spec["selector"].get("matchExpressions"), f"{where}: the PodMonitor selects by matchLabels")
    endpoints = spec.get("podMetricsEndpoints", [])
    need([e.get("path") for e in endpoints] == ["/metrics"], f"{where}: one endpoint, /metrics")
    for ds in daemonsets:
        pod = ds["spec"]["template"]
        labels = pod["metadata"]["labels"]
        ds_name = ds["metadata"]["name"]
        need(all(labels.get(k) == v for k, v in match.items()), f"{where}: the PodMonitor selects DaemonSet {ds_name}'s pods")
        need(spec.get("jobLabel") in labels, f"{where}: the PodMonitor's jobLabel is a label of {ds_name}'s pods")
        ports = {p.get("name"): p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        listen = [a.rsplit(":", 1)[1] for c in pod["spec"]["containers"] for a in c["args"] if a.startswith("--listen=")]
        for e in endpoints:
            need(e.get("port") in ports, f"{where}: the PodMonitor's port {e.get('port')!r} is a named port of {ds_name}")
            need([str(ports.get(e.get("port")))] == listen, f"{where}: {ds_name} listens on the port the PodMonitor scrapes")
    groups = pr["spec"]["groups"]
    rules = [r for g in groups for r in g.get("rules", [])]
    names = [r.get("alert") for r in rules]
    need(len({g["name"] for g in groups}) == len(groups), f"{where}: PrometheusRule group names unique")
    need(rules and all(names), f"{where}: the PrometheusRule holds alerting rules only")
    need(len(set(names)) == len(names), f"{where}: alert names unique, got {names}")
    for r in rules:
        a = r.get("alert")
        need(re.fullmatch(r"GpuLabeler[A-Z][A-Za-z]+", a or "") is not None, f"{where}: alert name {a}")
        need(r.get("for") not in (None, "", "0"), f"{where}: {a} has a for")
        need(set(r.get("labels", {})) == {"severity"} and r["labels"]["severity"] in ("critical", "warning", "info"),
             f"{where}: {a} has exactly a severity label")
        need(set(r.get("annotations", {})) == {"summary", "description"}, f"{where}: {a} has a summary and a description")
        need('Runbook: docs/troubleshooting.md, row: ' in r.get("annotations", {}).get("description", ""),
             f"{where}: {a}'s description names its runbook row")
    meta = cm["metadata"]
    need(meta["name"] == f"{name}-dashboard", f"{where}: the dashboard ConfigMap's name has no hash suffix, got {meta['name']}")
    need(meta["labels"].get("grafana_dashboard") == "1", f"{where}: grafana_dashboard: \"1\"")
    need(sorted(cm.get("data", {})) == ["gpu-labeler-dashboard.json"], f"{where}: the ConfigMap holds the dashboard alone")
    try:
        dash = json.loads(cm.get("data", {}).get("gpu-labeler-dashboard.json", ""))
    except ValueError as e:
        problems.append(f"{where}: the dashboard is not JSON: {e}")
        return
    need(dash.get("uid") == "gpu-labeler" and dash.get("title") and dash.get("panels"),
         f"{where}: the dashboard has its uid, a title and panels")
    exprs = [t.get("expr", "") for p in dash.get("panels", []) for t in p.get("targets", [])]
    need(exprs and all(exprs), f"{where}: every dashboard query has an expression")
    size = len(json.dumps(cm, separators=(",", ":")).encode())
    need(size < LAST_APPLIED_LIMIT, f"{where}: the dashboard ConfigMap is {size} bytes: kubectl apply's annotation takes 256 KiB")


def check(where, text, expect_nvidia, expect_nodefeature, name="gpu-labeler", service_account="gpu-labeler",
          namespace="gpu-labeler", expect_policy=True):
    """`name`: the objects' base name; `namespace`: the Namespace object expected, None for none
    (the Helm chart's renderings: `helm install --create-namespace` makes it)."""
    docs = [d for d in yaml.safe_load_all(text) if d]
    kinds = {}
    for d in docs:
        kinds.setdefault(d["kind"], []).append(d)
    daemonsets = kinds.get("DaemonSet", [])
    names = sorted(d["metadata"]["name"] for d in daemonsets)
    need(names == ([name, f"{name}-nvidia"] if expect_nvidia else [name]),
         f"{where}: DaemonSets {names}")
    for ds in daemonsets:
        check_daemonset(where, ds, ds["metadata"]["name"].endswith("-nvidia"), service_account)
        args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
        need(("--sink=nodefeature" in args) == expect_nodefeature, f"{where}: {ds['metadata']['name']} sink")
    if expect_nvidia:
        # The two DaemonSets split the nodes: one's required terms are the other's negation.
        terms = {d["metadata"]["name"].replace(name, "gpu-labeler", 1): d["spec"]["template"]["spec"]["affinity"]
                 ["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] for d in daemonsets}
        need(terms["gpu-labeler"] == [{"matchExpressions": [
            {"key": "feature.node.kubernetes.io/gpu-nvidia.count", "operator": "DoesNotExist"},
            {"key": "nvidia.com/gpu.present", "operator": "NotIn", "values": ["true"]}]}],
            f"{where}: gpu-labeler's node affinity")
        need(terms["gpu-labeler-nvidia"] == [
            {"matchExpressions": [{"key": "feature.node.kubernetes.io/gpu-nvidia.count", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}],
            f"{where}: gpu-labeler-nvidia's node affinity")
        sel = {d["metadata"]["name"]: d["spec"]["selector"]["matchLabels"] for d in daemonsets}
        need(sel[name] != sel[f"{name}-nvidia"], f"{where}: the DaemonSets' selectors overlap")
    rules = [r for cr in kinds.get("ClusterRole", []) for r in cr["rules"]]
    roles = [r for role in kinds.get("Role", []) for r in role["rules"]]
    if expect_nodefeature:
        need(rules == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
             f"{where}: cluster-wide, only reading Nodes (the NodeFeature's owner) with the nodefeature sink, got {rules}")
        need(roles == [{"apiGroups": ["nfd.k8s-sigs.io"], "resources": ["nodefeatures"],
                        "verbs": ["get", "create", "patch"]}], f"{where}: Role {roles}")
        vaps = sorted(v["metadata"]["name"] for v in kinds.get("ValidatingAdmissionPolicy", []))
        bindings = sorted(b["spec"]["policyName"] for b in kinds.get("ValidatingAdmissionPolicyBinding", [])
                          if b["spec"]["validationActions"] == ["Deny"])
        need(vaps == ([f"{name}-own-nodefeature"] if expect_policy else []) and bindings == vaps,
             f"{where}: the NodeFeature admission policy and its Deny binding, and no Node policy, got {vaps} {bindings}")
    else:
        # deploy/components/health-condition (Helm: health.condition) adds `patch nodes/status`,
        # and only together with the Node policy's allowedConditionType (that one condition).
        condition = [v["expression"] for p in kinds.get("ValidatingAdmissionPolicy", [])
                     for v in p["spec"]["variables"] if v["name"] == "allowedConditionType"]
        status_rule = {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}
        node_rule = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch", "patch"]}
        # deploy/components/device-taints (Helm: health.deviceTaints.enabled) adds writing
        # DeviceTaintRules, and only together with its own policy.
        vap = kinds.get("ValidatingAdmissionPolicy", [])
        binding = kinds.get("ValidatingAdmissionPolicyBinding", [])
        device_vap = [p for p in vap if p["metadata"]["name"].endswith("-device-taints")]
        rest = [r for r in rules if r != TAINT_RULE]
        need(rest == [node_rule, DRA_RULE]
             or (rest == [node_rule, DRA_RULE, status_rule] and condition == ["'GPUHealthy'"]),
             f"{where}: ClusterRole allows only get, watch and patch on nodes, reading the DRA objects "
             f"(and patch on nodes/status with the health-condition policy), got {rules}")
        need((TAINT_RULE in rules) == (len(device_vap) == 1) and rules.count(TAINT_RULE) <= 1,
             f"{where}: writing DeviceTaintRules only with the device-taints policy, got {rules}")
        need(roles == [], f"{where}: no Role, got {roles}")
        node_vap = [p for p in vap if p not in device_vap]
        bindings = sorted(b["spec"]["policyName"] for b in binding if b["spec"]["validationActions"] == ["Deny"])
        need((len(node_vap) == 1 and len(binding) == len(vap)
              and bindings == sorted(p["metadata"]["name"] for p in vap)) if expect_policy else vap == binding == [],
             f"{where}: the admission policy and its Deny binding")
    ns = kinds.get("Namespace", [])
    need([n["metadata"]["name"] for n in ns] == ([namespace] if namespace else []), f"{where}: Namespace")


# Device taints (deploy/components/device-taints) write DeviceTaintRules.
TAINT_RULE = {"apiGroups": ["resource.k8s.io"], "resources": ["devicetaintrules"],
              "verbs": ["get", "list", "create", "patch", "delete"]}

# The DRA source reads its node's ResourceSlices and the DeviceClasses (docs/dra.md), nothing more.
DRA_RULE = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "deviceclasses"],
            "verbs": ["get", "list", "watch"]}


def main():
    root = Path("deploy")
    cases = [
        (root, False, False),
        (root / "overlays" / "nvidia", True, False),
        (root / "overlays" / "nodefeature", False, True),
    ]
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        # A site overlay that takes both components.
        Path(tmp, "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            "resources: [../base]\ncomponents: [../components/nvidia, ../components/nodefeature]\n"
            "images:\n  - name: gpu-labeler\n    newName: registry.example.com/gpu-labeler\n    newTag: 0.1.0\n")
        cases.append((Path(tmp), True, True))
        gfd = Path(tmp) / "gfd"
        gfd.mkdir()
        (gfd / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            "resources: [../../base]\n"
            "components: [../../components/nvidia, ../../components/nvidia-gfd, ../../components/networkpolicy]\n")
        text = render(gfd)
        if text is not None:
            validate("deploy (nvidia + nvidia-gfd + networkpolicy components)", text)
            check("deploy (nvidia + nvidia-gfd + networkpolicy components)", text, True, False)
            check_gfd("deploy (nvidia + nvidia-gfd + networkpolicy components)", text, True)
            check_gfd("deploy", render(root) or "", False)
            check_networkpolicy("deploy (nvidia + nvidia-gfd + networkpolicy components)", text, True)
            check_networkpolicy("deploy", render(root) or "", False)
            print("ok: deploy (nvidia + nvidia-gfd + networkpolicy components)")
        # The monitoring components, on the base and with the nvidia and networkpolicy components.
        monitored = ""
        for sub, components in [
            ("monitoring", ["prometheus", "grafana"]),
            ("monitoring-nvidia", ["nvidia", "networkpolicy", "prometheus", "grafana"]),
        ]:
            nvidia = "nvidia" in components
            d = Path(tmp) / sub
            d.mkdir()
            (d / "kustomization.yaml").write_text(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                "resources: [../../base]\n"
                f"components: [{', '.join('../../components/' + c for c in components)}]\n")
            where = f"deploy ({' + '.join(components)} components)"
            text = render(d)
            if text is None:
                continue
            validate(where, text)
            check(where, text, nvidia, False)
            check_networkpolicy(where, text, "networkpolicy" in components)
            check_monitoring(where, text, True)
            kinds = sorted(doc["kind"] for doc in yaml.safe_load_all(text) if doc and doc["kind"] in MONITORING_KINDS)
            print(f"ok: {where}: {len([doc for doc in yaml.safe_load_all(text) if doc])} objects, {kinds} checked against their CRD schemas")
            if nvidia:
                monitored = text
        # A site in its own namespace: tests/deploy.rs evaluates the policy on this rendering.
        site = Path("tests/fixtures/deploy/renamed-site")
        text = render(site)
        kept = Path(str(site) + ".rendered.yaml").read_text()
        need(text == kept, f"{site}.rendered.yaml is stale: render it again with kubectl kustomize {site}")
        for path, nvidia, nodefeature in cases:
            text = render(path)
            if text is None:
                continue
            where = "deploy (nvidia + nodefeature components)" if path == Path(tmp) else str(path)
            validate(where, text)
            check(where, text, nvidia, nodefeature)
            check_monitoring(where, text, False)
            images = sorted({c["image"] for d in yaml.safe_load_all(text) if d and d["kind"] == "DaemonSet"
                             for c in d["spec"]["template"]["spec"]["containers"]})
            want = "registry.example.com/gpu-labeler:0.1.0" if path == Path(tmp) else "gpu-labeler:0.1.0"
            need(images == [want], f"{where}: images {images}, expected {want} (the README's site kustomization)")
            print(f"ok: {where}: {len([d for d in yaml.safe_load_all(text) if d])} objects")
        # The example rules are opt-in: the base ships none live, the component adds its key.
        ex = Path(tmp) / "example-rules"
        ex.mkdir()
        (ex / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            "resources: [../../base]\ncomponents: [../../components/example-rules]\n")
        def rules_keys(text):
            return [sorted(d.get("data", {})) for d in yaml.safe_load_all(text or "")
                    if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpu-labeler-rules"]
        text = render(ex)
        if text is not None:
            validate("deploy (example-rules component)", text)
            need(rules_keys(text) == [["example-gpu-classes.yaml", "site.yaml"]],
                 f"deploy (example-rules component): rules keys {rules_keys(text)}")
            need(rules_keys(render(root)) == [["site.yaml"]], f"deploy: rules keys {rules_keys(render(root))}")
            need("large-memory" not in render(root), "deploy: the base ships the example rule live")
            print("ok: deploy (example-rules component)")
        nv = Path(tmp) / "nfd-vendor-labels"
        nv.mkdir()
        (nv / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            "resources: [../../base]\ncomponents: [../../components/example-rules, ../../components/nfd-vendor-labels]\n")
        text = render(nv)
        if text is not None:
            validate("deploy (example-rules + nfd-vendor-labels components)", text)
            need(rules_keys(text) == [["example-gpu-classes.yaml", "nfd-vendor-labels.yaml", "site.yaml"]],
                 f"deploy (example-rules + nfd-vendor-labels components): rules keys {rules_keys(text)}")
            print("ok: deploy (example-rules + nfd-vendor-labels components)")
        # The health components (docs/taints.md): opt-in; the taint rule and the option, and for
        # the condition the nodes/status permission and the policy's allowedConditionType.
        for comps, keys, env, status in [
            (["health"], ["gpu-health.yaml", "site.yaml"], ["GPU_LABELER_PUBLISH_TAINTS"], False),
            (["health-condition"], ["site.yaml"], ["GPU_LABELER_PUBLISH_CONDITION"], True),
            (["health", "health-condition"], ["gpu-health.yaml", "site.yaml"],
             ["GPU_LABELER_PUBLISH_TAINTS", "GPU_LABELER_PUBLISH_CONDITION"], True),
        ]:
            where = f"deploy ({' + '.join(comps)} components)"
            d = Path(tmp) / "-".join(comps)
            d.mkdir()
            (d / "kustomization.yaml").write_text(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                f"resources: [../../base]\ncomponents: [{', '.join('../../components/' + c for c in comps)}]\n")
            text = render(d)
            if text is None:
                continue
            validate(where, text)
            docs = [x for x in yaml.safe_load_all(text) if x]
            need(rules_keys(text) == [keys], f"{where}: rules keys {rules_keys(text)}")
            got_env = [e["name"] for x in docs if x["kind"] == "DaemonSet"
                       for e in x["spec"]["template"]["spec"]["containers"][0].get("env", [])
                       if e["name"].startswith("GPU_LABELER_PUBLISH_")]
            need(got_env == env, f"{where}: env {got_env}, expected {env}")
            rules = [r for x in docs if x["kind"] == "ClusterRole" for r in x["rules"]]
            want_rules = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch", "patch"]},
                          DRA_RULE]
            if status:
                want_rules.append({"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]})
            need(rules == want_rules, f"{where}: ClusterRole rules {rules}")
            allowed = [v["expression"] for x in docs if x["kind"] == "ValidatingAdmissionPolicy"
                       for v in x["spec"]["variables"] if v["name"] == "allowedConditionType"]
            need(allowed == (["'GPUHealthy'"] if status else ["''"]),
                 f"{where}: allowedConditionType {allowed}")
            print(f"ok: {where}")
        # DRA device taints (docs/taints.md#device-taints): opt-in; the option, writing
        # DeviceTaintRules, and the policy that confines it (NoExecute only with its component).
        for comps, no_execute in [(["device-taints"], "false"),
                                  (["device-taints", "device-taints-noexecute"], "true")]:
            where = f"deploy ({' + '.join(comps)} components)"
            d = Path(tmp) / "-".join(comps)
            d.mkdir()
            (d / "kustomization.yaml").write_text(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                f"resources: [../../base]\ncomponents: [{', '.join('../../components/' + c for c in comps)}]\n")
            text = render(d)
            if text is None:
                continue
            validate(where, text)
            docs = [x for x in yaml.safe_load_all(text) if x]
            got_env = [e["name"] for x in docs if x["kind"] == "DaemonSet"
                       for e in x["spec"]["template"]["spec"]["containers"][0].get("env", [])
                       if e["name"].startswith("GPU_LABELER_PUBLISH_")]
            need(got_env == ["GPU_LABELER_PUBLISH_DEVICE_TAINTS"], f"{where}: env {got_env}")
            rules = [r for x in docs if x["kind"] == "ClusterRole" for r in x["rules"]]
            need(rules == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch", "patch"]},
                           DRA_RULE, TAINT_RULE], f"{where}: ClusterRole rules {rules}")
            vaps = sorted(x["metadata"]["name"] for x in docs if x["kind"] == "ValidatingAdmissionPolicy")
            bindings = sorted(x["spec"]["policyName"] for x in docs
                              if x["kind"] == "ValidatingAdmissionPolicyBinding"
                              and x["spec"]["validationActions"] == ["Deny"])
            need(vaps == bindings == ["gpu-labeler-device-taints", "gpu-labeler-own-node"],
                 f"{where}: policies {vaps}, Deny bindings {bindings}")
            allow = [v["expression"] for x in docs if x["kind"] == "ValidatingAdmissionPolicy"
                     for v in x["spec"]["variables"] if v["name"] == "allowNoExecute"]
            need(allow == [no_execute], f"{where}: allowNoExecute {allow}")
            print(f"ok: {where}")
        base = render(root)
        need("gpu-unhealthy" not in base and "GPU_LABELER_PUBLISH_" not in base,
             "deploy: the base ships the health taint or condition live")
        # The uninstall Job: valid, as locked down as the agents, on its own service account.
        prune = render(root / "prune")
        if prune is not None:
            validate("deploy/prune", prune)
            docs = [d for d in yaml.safe_load_all(prune) if d]
            jobs = [d for d in docs if d["kind"] == "Job"]
            need(len(jobs) == 1, f"deploy/prune: one Job, got {len(jobs)}")
            for job in jobs:
                spec = job["spec"]["template"]["spec"]
                w = f"deploy/prune: Job {job['metadata']['name']}"
                need(spec.get("serviceAccountName") == "gpu-labeler-prune", f"{w}: serviceAccountName gpu-labeler-prune")
                psc = spec.get("securityContext", {})
                need(psc.get("runAsNonRoot") is True, f"{w}: pod runAsNonRoot")
                need(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{w}: seccompProfile")
                need(not spec.get("volumes"), f"{w}: no volumes")
                for c in spec["containers"]:
                    sc = c.get("securityContext", {})
                    need(sc.get("allowPrivilegeEscalation") is False, f"{w}: allowPrivilegeEscalation false")
                    need(sc.get("readOnlyRootFilesystem") is True, f"{w}: readOnlyRootFilesystem")
                    need(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{w}: drop ALL")
                    need(c["args"][:2] == ["prune", "--all-nodes"], f"{w}: runs prune --all-nodes")
            need(not any(d["kind"] == "DaemonSet" for d in docs), "deploy/prune: no agent in it")
            # Its account confined by its own policy (tests/prune.rs runs its rules on the
            # test API server): the policy names the Job's service account, and is enforced.
            policies = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
            bindings = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
            match = "request.userInfo.username.matches('^system:serviceaccount:[^:]+:gpu-labeler-prune$')"
            need([(x["metadata"]["name"], [c["expression"] for c in x["spec"]["matchConditions"]], x["spec"]["failurePolicy"])
                  for x in policies] == [("gpu-labeler-prune", [match], "Fail"),
                                         ("gpu-labeler-prune-device-taints", [match], "Fail")],
                 f"deploy/prune: the policies gpu-labeler-prune and -device-taints matching its service account, failing closed: {policies}")
            need([(x["spec"]["policyName"], x["spec"]["validationActions"]) for x in bindings]
                 == [("gpu-labeler-prune", ["Deny"]), ("gpu-labeler-prune-device-taints", ["Deny"])],
                 f"deploy/prune: the policies bound with Deny: {bindings}")
            print(f"ok: deploy/prune: {len(docs)} objects")
        # The validator is strict: an unknown field must fail.
        broken = render(root).replace("readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true")
        if validate("(negative control)", broken):
            problems.append("kubernetes-validate accepted an unknown field: the check is not strict")
        else:
            problems[:] = [p for p in problems if not p.startswith("(negative control)")]
        # So is the CRD check: an unknown field, a bad duration, a missing required field.
        for good, bad in [("podMetricsEndpoints:", "podMetricEndpoints:"), ("for: 10m", "for: 10 minutes"),
                          ("groups:\n  - name: gpu-labeler\n", "groups:\n  - nom: gpu-labeler\n")]:
            need(good in monitored, f"the CRD check's negative control: {good!r} is not in the rendering")
            if validate("(negative control)", monitored.replace(good, bad, 1)):
                problems.append(f"the CRD check accepted {bad!r}: the check is not strict")
            else:
                problems[:] = [p for p in problems if not p.startswith("(negative control)")]
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    KUBECTL, VALIDATE = sys.argv[1], sys.argv[2]
    main()
