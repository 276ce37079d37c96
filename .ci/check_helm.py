#!/usr/bin/env python3
"""Checks the Helm chart (deploy/helm/gpu-labeler) with Helm's own code: helm-python-sdk, the
Helm v4 Go SDK as a shared library (no helm binary).

- `helm lint --strict`, on the chart directory and on its package;
- every value of the chart (CASES; a check that none is left out) rendered in the namespace
  `gpu-labeler` and in another one, and each rendering equal, object by object, to the kustomize rendering that gives
  the same thing (deploy/base, its components, and a site patch where no component does): one
  source of truth, with Helm's own labels (helm.sh/chart, app.kubernetes.io/instance, /version,
  /managed-by) and kustomize's Namespace object aside;
- every rendering validated strictly against the Kubernetes 1.33 and 1.37 schemas, and through
  check_deploy.py's security checks;
- values of the wrong type or outside an enum refused with Helm's schema message, and hostile
  values (a newline that adds a privileged initContainer, a quote that ends the policies' CEL
  string) refused by the schema's name patterns, and inert or refused by the templates without
  the schema;
- the chart packaged (.tgz): it renders as the directory does, and `helm show values` is
  values.yaml;
- the `helm` commands of README.md and docs/helm.md run through the SDK (package, show values,
  install: rendered with their values, validated, checked);
- files kept in step with deploy/: the chart's copies of the PrometheusRule and the dashboard
  (files/), the renderings tests/deploy.rs runs the admission tables on
  (tests/fixtures/deploy/helm/), and the values table of docs/helm.md (from values.schema.json's
  descriptions).

Usage: check_helm.py KUBECTL KUBERNETES_VALIDATE [--write]   (run from the repository root)
--write rewrites those files instead of failing when they are stale. Exits 1 with one line per
problem."""

import copy
import difflib
import json
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import helm_python as helm
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_deploy as cd  # noqa: E402

CHART = Path("deploy/helm/gpu-labeler")
RELEASE = "gpu-labeler"
NAMESPACES = ["gpu-labeler", "my-gpu-ns"]
HELM_LABELS = {"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version",
               "app.kubernetes.io/managed-by"}
# The chart's copies of kustomize's data files (Helm reads no file outside the chart).
COPIES = {
    CHART / "files" / "prometheusrule.yaml": Path("deploy/components/prometheus/prometheusrule.yaml"),
    CHART / "files" / "gpu-labeler-dashboard.json": Path("deploy/components/grafana/gpu-labeler-dashboard.json"),
}
DOCS = Path("docs/helm.md")
DOC_COMMANDS = [Path("README.md"), DOCS]
TABLE_START = "<!-- values table: generated from values.schema.json by .ci/check_helm.py --write -->\n"
TABLE_END = "<!-- end of the values table -->\n"
FIXTURES = Path("tests/fixtures/deploy/helm")
problems = cd.problems
need = cd.need


def ds_patch(*ops, kind="DaemonSet", name=None):
    target = {"kind": kind} | ({"name": name} if name else {})
    return {"target": target, "patch": yaml.safe_dump(list(ops), sort_keys=False)}


def delete(api_version, kind, name, namespace="gpu-labeler"):
    """A strategic-merge patch that deletes an object (namespace: None for a cluster-scoped one)."""
    meta = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {"patch": yaml.safe_dump({"$patch": "delete", "apiVersion": api_version, "kind": kind,
                                     "metadata": meta}, sort_keys=False)}


def add(path, value):
    return {"op": "add", "path": path, "value": value}


def replace(path, value):
    return {"op": "replace", "path": path, "value": value}


def remove(path):
    return {"op": "remove", "path": path}


def component_data(component):
    """The `data` of the rules ConfigMap patch of a kustomize component, as the chart's `rules`."""
    doc = yaml.safe_load(Path(f"deploy/components/{component}/rules.yaml").read_text())
    return doc["data"]


RBAC = "rbac.authorization.k8s.io/v1"
VAP = "admissionregistration.k8s.io/v1"
SA_MATCH = "request.userInfo.username.matches('^system:serviceaccount:[^:]+:{}$')"


def renamed_service_account(sa, create):
    """The kustomize patches that a site writes to run the agent as service account `sa`."""
    patches = [
        ds_patch(replace("/spec/template/spec/serviceAccountName", sa)),
        ds_patch(replace("/subjects/0/name", sa), kind="ClusterRoleBinding"),
        ds_patch(replace("/spec/matchConditions/0/expression", SA_MATCH.format(sa)), kind="ValidatingAdmissionPolicy"),
    ]
    if create:
        patches.append(ds_patch(replace("/metadata/name", sa), kind="ServiceAccount"))
    else:
        patches.append(delete("v1", "ServiceAccount", "gpu-labeler"))
    return patches


TOLERATIONS = yaml.safe_load(Path("deploy/base/agent/daemonset.yaml").read_text())["spec"]["template"]["spec"]["tolerations"]
SITE_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}}}
PREFERRED = [{"weight": 1, "preference": {"matchExpressions": [{"key": "example.com/pool", "operator": "In", "values": ["gpu"]}]}}]

# (what, values, kustomize components, kustomization additions, kinds the kustomize side drops,
#  check_deploy flags). Every option of the chart, alone, and the combinations the kustomize
# overlays and the README's sites use.
CASES = [
    ("defaults", {}, [], {}, []),
    ("nvml.enabled", {"nvml": {"enabled": True}}, ["nvidia"], {}, []),
    ("sink: nodefeature", {"sink": "nodefeature"}, ["nodefeature"], {}, []),
    ("nvml.enabled, sink: nodefeature", {"nvml": {"enabled": True}, "sink": "nodefeature"},
     ["nvidia", "nodefeature"], {}, []),
    ("profiles: [nvidia-gfd]", {"profiles": ["nvidia-gfd"]}, ["nvidia-gfd"], {}, []),
    ("nvml.enabled, profiles: [nvidia-gfd], networkPolicy.enabled",
     {"nvml": {"enabled": True}, "profiles": ["nvidia-gfd"], "networkPolicy": {"enabled": True}},
     ["nvidia", "nvidia-gfd", "networkpolicy"], {}, []),
    ("networkPolicy.enabled", {"networkPolicy": {"enabled": True}}, ["networkpolicy"], {}, []),
    ("health.taint", {"health": {"taint": True}}, ["health"], {}, []),
    ("health.condition", {"health": {"condition": True}}, ["health-condition"], {}, []),
    ("health.deviceTaints.enabled", {"health": {"deviceTaints": {"enabled": True}}}, ["device-taints"], {}, []),
    ("health.deviceTaints.enabled, allowNoExecute", {"health": {"deviceTaints": {"enabled": True, "allowNoExecute": True}}},
     ["device-taints", "device-taints-noexecute"], {}, []),
    ("health.taint, health.condition, profiles: [nvidia-gfd]",
     {"health": {"taint": True, "condition": True}, "profiles": ["nvidia-gfd"]},
     ["nvidia-gfd", "health", "health-condition"], {}, []),
    ("prometheus.podMonitor, prometheus.rules, grafana.dashboard",
     {"prometheus": {"podMonitor": {"enabled": True}, "rules": {"enabled": True}}, "grafana": {"dashboard": {"enabled": True}}},
     ["prometheus", "grafana"], {}, []),
    ("nvml.enabled, networkPolicy, prometheus.podMonitor, prometheus.rules, grafana.dashboard",
     {"nvml": {"enabled": True}, "networkPolicy": {"enabled": True},
      "prometheus": {"podMonitor": {"enabled": True}, "rules": {"enabled": True}}, "grafana": {"dashboard": {"enabled": True}}},
     ["nvidia", "networkpolicy", "prometheus", "grafana"], {}, []),
    ("prometheus.podMonitor.enabled", {"prometheus": {"podMonitor": {"enabled": True}}}, ["prometheus"], {}, ["PrometheusRule"]),
    ("prometheus.rules.enabled", {"prometheus": {"rules": {"enabled": True}}}, ["prometheus"], {}, ["PodMonitor"]),
    ("grafana.dashboard.enabled", {"grafana": {"dashboard": {"enabled": True}}}, ["grafana"], {}, []),
    ("rules (the example-rules component's)", {"rules": component_data("example-rules")}, ["example-rules"], {}, []),
    ("rules (example-rules and nfd-vendor-labels)",
     {"rules": component_data("example-rules") | component_data("nfd-vendor-labels")},
     ["example-rules", "nfd-vendor-labels"], {}, []),
    ("config", {"config": "profiles: [nvidia-gfd]\nmigStrategy: single\n"}, [],
     {"patches": [{"patch": yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-labeler-config", "namespace": "gpu-labeler"},
                                            "data": {"config.yaml": "profiles: [nvidia-gfd]\nmigStrategy: single\n"}})}]}, []),
    ("image", {"image": {"repository": "registry.example.com/gpu-labeler", "tag": "0.2.0", "pullPolicy": "Always"}}, [],
     {"images": [{"name": "gpu-labeler", "newName": "registry.example.com/gpu-labeler", "newTag": "0.2.0"}],
      "patches": [ds_patch(replace("/spec/template/spec/containers/0/imagePullPolicy", "Always"))]}, []),
    ("imagePullSecrets", {"imagePullSecrets": [{"name": "regcred"}]}, [],
     {"patches": [ds_patch(add("/spec/template/spec/imagePullSecrets", [{"name": "regcred"}]))]}, []),
    ("priorityClassName: \"\"", {"priorityClassName": ""}, [],
     {"patches": [ds_patch(remove("/spec/template/spec/priorityClassName")), delete("v1", "ResourceQuota", "gpu-labeler-critical-pods")]}, []),
    ("priorityClassName: system-cluster-critical", {"priorityClassName": "system-cluster-critical"}, [],
     {"patches": [ds_patch(replace("/spec/template/spec/priorityClassName", "system-cluster-critical")),
                  ds_patch(replace("/spec/scopeSelector/matchExpressions/0/values", ["system-cluster-critical"]), kind="ResourceQuota")]}, []),
    ("nodeSelector", {"nodeSelector": {"kubernetes.io/os": "linux"}}, [],
     {"patches": [ds_patch(add("/spec/template/spec/nodeSelector", {"kubernetes.io/os": "linux"}))]}, []),
    ("tolerations", {"tolerations": TOLERATIONS + [SITE_TOLERATION]}, [],
     {"patches": [ds_patch(add("/spec/template/spec/tolerations/-", SITE_TOLERATION))]}, []),
    ("affinity", {"affinity": AFFINITY}, [], {"patches": [ds_patch(add("/spec/template/spec/affinity", AFFINITY))]}, []),
    ("affinity (preferred), nvml.enabled", {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": PREFERRED}},
                                            "nvml": {"enabled": True}}, ["nvidia"],
     {"patches": [ds_patch(add("/spec/template/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution", PREFERRED))]}, []),
    ("resources", {"resources": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}}, [],
     {"patches": [ds_patch(replace("/spec/template/spec/containers/0/resources",
                                   {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}))]}, []),
    ("podAnnotations", {"podAnnotations": {"example.com/team": "gpu"}}, [],
     {"patches": [ds_patch(add("/spec/template/metadata/annotations/example.com~1team", "gpu"))]}, []),
    ("podLabels", {"podLabels": {"example.com/team": "gpu"}}, [],
     {"patches": [ds_patch(add("/spec/template/metadata/labels/example.com~1team", "gpu"))]}, []),
    ("updateStrategy", {"updateStrategy": {"rollingUpdate": {"maxUnavailable": 1}}}, [],
     {"patches": [ds_patch(replace("/spec/updateStrategy/rollingUpdate/maxUnavailable", 1))]}, []),
    ("serviceAccount.name, serviceAccount.annotations",
     {"serviceAccount": {"name": "labeler", "annotations": {"example.com/owner": "gpu-team"}}}, [],
     {"patches": renamed_service_account("labeler", True)
      + [ds_patch(add("/metadata/annotations", {"example.com/owner": "gpu-team"}), kind="ServiceAccount")]}, []),
    # kustomize's `namespace:` moves the binding's subject only with a ServiceAccount it renders:
    # a site names the existing one's namespace itself.
    ("serviceAccount.create: false", {"serviceAccount": {"create": False, "name": "existing"}}, [],
     lambda ns: {"patches": renamed_service_account("existing", False)
                 + [ds_patch(replace("/subjects/0/namespace", ns), kind="ClusterRoleBinding")]}, []),
    ("rbac.create: false", {"rbac": {"create": False}}, [],
     {"patches": [delete(RBAC, "ClusterRole", "gpu-labeler", None), delete(RBAC, "ClusterRoleBinding", "gpu-labeler", None)]}, []),
    ("rbac.create: false, sink: nodefeature", {"rbac": {"create": False}, "sink": "nodefeature"}, ["nodefeature"],
     {"patches": [delete(RBAC, "Role", "gpu-labeler-nodefeatures"), delete(RBAC, "RoleBinding", "gpu-labeler-nodefeatures"),
                  delete(RBAC, "ClusterRole", "gpu-labeler-read-nodes", None), delete(RBAC, "ClusterRoleBinding", "gpu-labeler-read-nodes", None)]}, []),
    ("admissionPolicy.enabled: false", {"admissionPolicy": {"enabled": False}}, [],
     {"patches": [delete(VAP, "ValidatingAdmissionPolicy", "gpu-labeler-own-node", None),
                  delete(VAP, "ValidatingAdmissionPolicyBinding", "gpu-labeler-own-node", None)]}, []),
    ("admissionPolicy.enabled: false, sink: nodefeature", {"admissionPolicy": {"enabled": False}, "sink": "nodefeature"}, ["nodefeature"],
     {"patches": [delete(VAP, "ValidatingAdmissionPolicy", "gpu-labeler-own-nodefeature", None),
                  delete(VAP, "ValidatingAdmissionPolicyBinding", "gpu-labeler-own-nodefeature", None)]}, []),
    ("prune.enabled: false", {"prune": {"enabled": False}}, [], {}, []),
    ("extraArgs", {"extraArgs": ["--interval=30s"]}, [],
     {"patches": [ds_patch(add("/spec/template/spec/containers/0/args/-", "--interval=30s"))]}, []),
    ("extraArgs, sink: nodefeature", {"extraArgs": ["--interval=30s"], "sink": "nodefeature"}, ["nodefeature"],
     {"patches": [ds_patch(add("/spec/template/spec/containers/0/args/-", "--interval=30s"))]}, []),
    ("extraEnv", {"extraEnv": [{"name": "GPU_LABELER_LOG_JSON", "value": "true"}]}, [],
     {"patches": [ds_patch(add("/spec/template/spec/containers/0/env/-", {"name": "GPU_LABELER_LOG_JSON", "value": "true"}))]}, []),
    ("logLevel", {"logLevel": "debug"}, [],
     {"patches": [ds_patch(add("/spec/template/spec/containers/0/env/-", {"name": "GPU_LABELER_LOG", "value": "debug"}))]}, []),
    ("logLevel, extraEnv, profiles: [nvidia-gfd], nvml.enabled",
     {"logLevel": "debug", "extraEnv": [{"name": "GPU_LABELER_LOG_JSON", "value": "true"}], "profiles": ["nvidia-gfd"],
      "nvml": {"enabled": True}}, ["nvidia", "nvidia-gfd"],
     {"patches": [ds_patch(add("/spec/template/spec/containers/0/env/-", {"name": "GPU_LABELER_LOG", "value": "debug"}),
                           add("/spec/template/spec/containers/0/env/-", {"name": "GPU_LABELER_LOG_JSON", "value": "true"}))]}, []),
]

# Names: the chart's objects are `<fullname>` and `<fullname>-<suffix>`, kustomize's
# `gpu-labeler[-<suffix>]`; these renderings are compared with the base once renamed back.
# (what, values, release, the full name, app.kubernetes.io/name)
NAMING = [
    ("fullnameOverride", {"fullnameOverride": "site-labeler"}, RELEASE, "site-labeler", "gpu-labeler"),
    ("release name without the chart's", {}, "site", "site-gpu-labeler", "gpu-labeler"),
    ("nameOverride", {"nameOverride": "labeler"}, "site", "site-labeler", "labeler"),
]

# Values the schema must refuse, and Helm's message for each.
SCHEMA_HEAD = "values don't meet the specifications of the schema(s) in the following chart(s):\ngpu-labeler:\n"
REFUSED = [
    ({"resources": "100m"}, "- at '/resources': got string, want object\n"),
    ({"sink": "bogus"}, "- at '/sink': value must be one of 'node', 'nodefeature'\n"),
    # (Helm also logs "skipped value for gpu-labeler.tolerations: Not a table" for this one.)
    ({"tolerations": {"key": "nvidia.com/gpu"}}, "- at '/tolerations': got object, want array\n"),
    ({"profiles": ["nvidia-gpu"]}, "- at '/profiles/0': value must be 'nvidia-gfd'\n"),
    ({"nvml": {"enabled": "yes"}}, "- at '/nvml/enabled': got string, want boolean\n"),
    ({"image": {"pullPolicy": "Sometimes"}}, "- at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'\n"),
    ({"extraArgs": "--interval=30s"}, "- at '/extraArgs': got string, want array\n"),
    ({"nodeSelector": {"gpu": True}}, "- at '/nodeSelector/gpu': got boolean, want string\n"),
    ({"prometheus": {"podmonitor": {"enabled": True}}}, "- at '/prometheus': additional properties 'podmonitor' not allowed\n"),
]

# Hostile values: YAML (a newline and a more-indented key: a privileged initContainer in the
# agents' pod spec) and CEL (a quote that ends the policy's string: a match condition true for
# every user). The schema refuses each with Helm's pattern message; without the schema (a chart
# whose values.schema.json a site deleted, or --skip-schema-validation), the templates keep
# each value inert: quoted in YAML, or refused where it would reach CEL.
PRIVILEGED = ("system-node-critical\n      initContainers:\n        - name: pwn\n          image: busybox\n"
              "          securityContext:\n            privileged: true")
CEL_ALL_USERS = "x') || true || (''=='"
# (values, the value's path in the schema, the rendered fields that hold it verbatim without the
# schema ([(kind, path, how it is written there)]), or None: the templates refuse it; the kinds
# the value leaves out (the ResourceQuota of the critical priority classes))
POD = ["spec", "template", "spec"]
HOSTILE = [
    ({"priorityClassName": PRIVILEGED}, "/priorityClassName",
     [("DaemonSet", POD + ["priorityClassName"], "{}")], {"ResourceQuota"}),
    ({"image": {"tag": "0.1.0\n      hostPID: true"}}, "/image/tag",
     [(k, POD + ["containers", 0, "image"], "gpu-labeler:{}") for k in ("DaemonSet", "Job")], set()),
    ({"image": {"repository": "gpu-labeler:0.1.0\n          securityContext: {privileged: true}\n          x"}}, "/image/repository",
     [(k, POD + ["containers", 0, "image"], "{}:0.1.0") for k in ("DaemonSet", "Job")], set()),
    ({"serviceAccount": {"name": CEL_ALL_USERS}}, "/serviceAccount/name", None, set()),
    ({"serviceAccount": {"name": "x\n  namespace: kube-system"}}, "/serviceAccount/name", None, set()),
    ({"nameOverride": "x') || true || ('"}, "/nameOverride", None, set()),
    ({"fullnameOverride": "x\nkind: Secret"}, "/fullnameOverride", None, set()),
    ({"namespaceOverride": "x\n  labels: {a: b}"}, "/namespaceOverride",
     [("DaemonSet", ["metadata", "namespace"], "{}")], set()),
    ({"imagePullSecrets": [{"name": "x\n  y: z"}]}, "/imagePullSecrets/0/name",
     [(k, POD + ["imagePullSecrets"], [{"name": "{}"}]) for k in ("DaemonSet", "Job")], set()),
]


def go_quoted(s):
    """A string as Helm's schema messages quote it."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def schema_at(schema, path):
    s = schema
    for part in path.strip("/").split("/"):
        s = s["items"] if part.isdigit() else s["properties"][part]
    return s


def value_at(values, path):
    v = values
    for part in path.strip("/").split("/"):
        v = v[int(part)] if part.isdigit() else v[part]
    return v


def check_hostile(chart, schema):
    """Each hostile value refused by the schema with Helm's message, and, with the schema left
    out, rendered inert (the rendering is the default's but for that one field, which holds the
    value as given) or refused by the templates where it would reach CEL."""
    for values, path, _, _ in HOSTILE:
        value = value_at(values, path)
        pattern = schema_at(schema, path).get("pattern")
        need(pattern is not None, f"{CHART}/values.schema.json: {path} has no pattern")
        message = f"- at '{path}': {go_quoted(value)} does not match pattern {go_quoted(pattern or '')}\n"
        try:
            chart.render(values, name=RELEASE, namespace="gpu-labeler")
            problems.append(f"helm: the schema accepts the hostile {values!r}")
        except helm.HelmValuesError as e:
            need(str(e) == SCHEMA_HEAD + message, f"helm: {values!r}: {e!r}, expected {SCHEMA_HEAD + message!r}")
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "gpu-labeler"
        shutil.copytree(CHART, bare)
        (bare / "values.schema.json").unlink()
        unchecked = helm.Chart.load(bare)
        default = [d for d in yaml.safe_load_all(helm_render(unchecked, {}) or "") if d]
        for values, path, fields, absent in HOSTILE:
            where = f"helm without its schema ({values!r})"
            try:
                out = unchecked.render(values, name=RELEASE, namespace="gpu-labeler")
            except helm.HelmError as e:
                need(fields is None and "is not a DNS-1123 subdomain" in str(e) and "reach the admission policies' CEL" in str(e),
                     f"{where}: {e}")
                continue
            if fields is None:
                problems.append(f"{where}: renders, the value reaching the admission policies' CEL")
                continue
            text = "\n---\n".join(out[k] for k in sorted(out) if not k.endswith("NOTES.txt"))
            try:
                docs = [d for d in yaml.safe_load_all(text) if d]
            except yaml.YAMLError as e:
                problems.append(f"{where}: the rendering is not YAML: {e}")
                continue
            value = value_at(values, path)
            namespace = value if path == "/namespaceOverride" else "gpu-labeler"
            for kind, keys, shape in fields:
                want = json.loads(json.dumps(shape).replace("{}", json.dumps(value)[1:-1]))
                found = [d for d in docs if d["kind"] == kind]
                for d in found:
                    theirs = next(x for x in default if identity(x) == (kind, "gpu-labeler", d["metadata"]["name"]))
                    v, w = d, theirs
                    for k in keys[:-1]:
                        v, w = v[k], w[k]
                    need(v[keys[-1]] == want, f"{where}: {kind} {'.'.join(map(str, keys))} is {v[keys[-1]]!r}, not {want!r}")
                    if keys[-1] in w:
                        v[keys[-1]] = w[keys[-1]]
                    else:
                        del v[keys[-1]]
                need(bool(found), f"{where}: no {kind}")
            for d in docs:
                # (namespaceOverride: every namespaced object and reference moved with it.)
                if d["metadata"].get("namespace") == namespace:
                    d["metadata"]["namespace"] = "gpu-labeler"
                for s in d.get("subjects") or []:
                    if s.get("namespace") == namespace:
                        s["namespace"] = "gpu-labeler"
                for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
                    c["args"] = [a.replace(f"={namespace}", "=gpu-labeler") for a in c.get("args", [])]
            need(docs == [d for d in default if d["kind"] not in absent],
                 f"{where}: renders more than the value's own field otherwise than the defaults")
    print(f"ok: {len(HOSTILE)} hostile values refused by the schema with Helm's message, and inert or refused without it")


def strip_helm_labels(value):
    """Helm's own labels out of every metadata.labels (the objects' and the pod template's)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "metadata" and isinstance(v, dict) and "labels" in v:
                v = dict(v)
                v["labels"] = {lk: lv for lk, lv in v["labels"].items() if lk not in HELM_LABELS}
                if not v["labels"]:
                    del v["labels"]
            out[k] = strip_helm_labels(v)
        return out
    if isinstance(value, list):
        return [strip_helm_labels(v) for v in value]
    return value


def helm_render(chart, values, release=RELEASE, namespace="gpu-labeler"):
    """The manifests, in template order, as one YAML stream (what `helm template` prints, less
    its `# Source:` comments), or None with a problem. As rendered: not read and written again
    here (PyYAML reads the policies' folded CEL otherwise than Go's YAML libraries)."""
    try:
        out = chart.render(values, name=release, namespace=namespace)
    except helm.HelmError as e:
        problems.append(f"helm: {values} in {namespace}: {e}")
        return None
    docs = []
    for path in sorted(out):
        if path.endswith("NOTES.txt"):
            continue
        for doc in out[path].split("\n---\n"):
            doc = doc.strip("\n")
            if doc.startswith("---\n"):
                doc = doc[4:]
            if any(line and not line.startswith("#") for line in doc.splitlines()):
                docs.append(f"# Source: {path}\n{doc}\n")
    return "---\n".join(docs)


def kustomize_render(tmp, i, namespace, components, additions, root="base"):
    d = Path(tmp) / f"case{i}-{namespace}"
    d.mkdir()
    k = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": [f"../../{root}"]}
    if namespace != "gpu-labeler":
        k["namespace"] = namespace
    if components:
        k["components"] = [f"../../components/{c}" for c in components]
    k.update(copy.deepcopy(additions(namespace) if callable(additions) else additions))
    (d / "kustomization.yaml").write_text(yaml.safe_dump(k, sort_keys=False))
    return cd.render(d)


CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                  "ValidatingAdmissionPolicyBinding"}


def through_kustomize(tmp, text):
    """The chart's rendering as kustomize reads and writes it: both sides then go through the
    same YAML library (kustomize's and PyYAML's readings of a folded scalar with more-indented
    lines, the policies' CEL, differ by a blank line)."""
    d = Path(tempfile.mkdtemp(dir=tmp))
    (d / "helm.yaml").write_text(text)
    (d / "kustomization.yaml").write_text("resources: [helm.yaml]\n")
    return cd.render(d)


def identity(d):
    return (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])


HOOK = "helm.sh/hook"
# The prune hook's annotations (the chart's "gpu-labeler.pruneHook"): its service account and
# RBAC first, its Job after them, all deleted once it succeeded.
PRUNE_HOOK = {HOOK: "post-delete", "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"}


def is_hook(d):
    return HOOK in (d["metadata"].get("annotations") or {})


def unhooked(d):
    """A hook object without Helm's hook annotations (as kustomize renders it)."""
    d = copy.deepcopy(d)
    notes = {k: v for k, v in d["metadata"]["annotations"].items() if not k.startswith("helm.sh/hook")}
    if notes:
        d["metadata"]["annotations"] = notes
    else:
        del d["metadata"]["annotations"]
    return d


def compare(tmp, where, helm_text, kustomize_text, drop_kinds=(), rename=None, hooks=False):
    """Object by object: the same objects, each equal, Helm's labels and kustomize's Namespace
    aside. `rename(value)` maps the Helm objects' names back to kustomize's. kustomize's
    `namespace:` also sets one on cluster-scoped kinds it does not know (the admission policies),
    which kubectl drops: so does this. The chart's hooks are compared on their own (`hooks`:
    only they, without their hook annotations; else all but they)."""
    helm_text = through_kustomize(tmp, helm_text)
    if helm_text is None:
        return
    ours = [strip_helm_labels(d) for d in yaml.safe_load_all(helm_text) if d]
    ours = [unhooked(d) for d in ours if is_hook(d)] if hooks else [d for d in ours if not is_hook(d)]
    if rename:
        ours = rename(ours)
    theirs = [strip_helm_labels(d) for d in yaml.safe_load_all(kustomize_text) if d
              and d["kind"] != "Namespace" and d["kind"] not in drop_kinds]
    for d in theirs:
        if d["kind"] in CLUSTER_SCOPED:
            d["metadata"].pop("namespace", None)
    a, b = {identity(d): d for d in ours}, {identity(d): d for d in theirs}
    need(len(a) == len(ours), f"{where}: the chart renders an object twice")
    need(sorted(a) == sorted(b), f"{where}: the chart renders {sorted(set(a) - set(b))} and not {sorted(set(b) - set(a))}, unlike kustomize")
    for key in sorted(set(a) & set(b)):
        if a[key] != b[key]:
            diff = difflib.unified_diff(yaml.safe_dump(b[key]).splitlines(), yaml.safe_dump(a[key]).splitlines(),
                                        "kustomize", "helm", lineterm="", n=2)
            problems.append(f"{where}: {key} differs from kustomize's:\n" + "\n".join(list(diff)[:40]))


def renamer(fullname, name):
    """Maps a rendering's names back: `fullname[-x]` to `gpu-labeler[-x]`, the name label
    `name` to `gpu-labeler` (and the alerts' job), the policies' service account."""
    def walk(v):
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            if v == fullname or v.startswith(fullname + "-"):
                return "gpu-labeler" + v[len(fullname):]
            if v == name:
                return "gpu-labeler"
            return (v.replace(f":{fullname}$", ":gpu-labeler$")
                     .replace(f'job="{name}"', 'job="gpu-labeler"'))
        return v
    return lambda docs: [walk(d) for d in docs]


def without_hooks(text):
    """A rendering without the prune hook's objects (checked as deploy/prune is: they are it)."""
    docs = re.split(r"^---\n(?=# Source: )", text, flags=re.M)
    return "---\n".join(d for d in docs if not is_hook(yaml.safe_load(d) or {"metadata": {}}))


def security(where, text, values, name="gpu-labeler"):
    """check_deploy.py's checks, with what these values change (the agents' objects; the prune
    hook is deploy/prune, whose checks check_deploy.py makes)."""
    text = without_hooks(text)
    v = values
    nvidia = v.get("nvml", {}).get("enabled", False)
    nodefeature = v.get("sink") == "nodefeature"
    sa = v.get("serviceAccount", {}).get("name") or name
    docs = [d for d in yaml.safe_load_all(text) if d]
    if v.get("rbac", {}).get("create", True):
        cd.check(where, text, nvidia, nodefeature, name=name, service_account=sa, namespace=None,
                 expect_policy=v.get("admissionPolicy", {}).get("enabled", True))
    else:
        for ds in (d for d in docs if d["kind"] == "DaemonSet"):
            cd.check_daemonset(where, ds, ds["metadata"]["name"].endswith("-nvidia"), sa)
        need(not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")],
             f"{where}: no RBAC with rbac.create: false")
    cd.check_gfd(where, text, "nvidia-gfd" in v.get("profiles", []), name)
    cd.check_networkpolicy(where, text, v.get("networkPolicy", {}).get("enabled", False))
    monitoring = [v.get("prometheus", {}).get("podMonitor", {}).get("enabled", False),
                  v.get("prometheus", {}).get("rules", {}).get("enabled", False),
                  v.get("grafana", {}).get("dashboard", {}).get("enabled", False)]
    if len(set(monitoring)) == 1:
        cd.check_monitoring(where, text, monitoring[0], name)


def keep(path, text, write, how):
    """`path` must hold `text`; --write makes it so."""
    path = Path(path)
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path}")
    else:
        need(path.exists() and path.read_text() == text, f"{path} is stale: {how}")


def schema_leaves(schema, prefix=""):
    """The values' paths the table has a row for (`image.tag`, `nvml.enabled`, `rules`, ...)."""
    props = schema.get("properties")
    if prefix and not (props and all("description" in sub for sub in props.values())):
        return [prefix]
    return [leaf for k, sub in props.items() if k != "global"
            for leaf in schema_leaves(sub, f"{prefix}.{k}" if prefix else k)]


def value_paths(values, prefix=""):
    out = []
    for k, v in values.items():
        path = f"{prefix}.{k}" if prefix else k
        out += [path] + (value_paths(v, path) if isinstance(v, dict) else [])
    return out


def values_table(schema, values):
    """The values table: one row per leaf of values.schema.json, its type, its default (from
    values.yaml; a long one is left to values.yaml) and its description."""
    rows = ["| value | type | default | description |", "|---|---|---|---|"]

    def walk(prefix, s, default):
        props = s.get("properties")
        if props and all("description" in sub for sub in props.values()):
            for k, sub in props.items():
                walk(f"{prefix}.{k}", sub, (default or {}).get(k))
            return
        t = s.get("type", "object")
        t = " or ".join(t) if isinstance(t, list) else t
        shown = json.dumps(default, separators=(", ", ": "))
        if len(shown) > 40 or "\n" in str(default):
            shown = "see values.yaml"
        else:
            shown = f"`{shown}`"
        desc = s["description"].replace("|", "\\|")
        rows.append(f"| `{prefix}` | {t} | {shown} | {desc} |")

    for k, sub in schema["properties"].items():
        if k == "global":
            continue
        walk(k, sub, values.get(k))
    return "\n".join(rows) + "\n"


def doc_commands(path):
    """The `helm ...` commands of a document: its ```sh blocks' (continued lines joined) and
    its inline ones (`helm ...` in the text)."""
    out, fence, pending = [], None, ""
    for line in path.read_text().splitlines():
        text = line.strip()
        if text.startswith("```"):
            fence = None if fence is not None else text[3:]
            continue
        if fence is None:
            out += re.findall(r"`(helm [^`]+)`", text)
            continue
        if fence != "sh":
            continue
        text = f"{pending} {text}".strip() if pending else text
        pending = ""
        if text.endswith("\\"):
            pending = text[:-1].strip()
        elif text.startswith("helm "):
            out.append(text)
    return out


def merge(into, values):
    for k, v in values.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            merge(into[k], v)
        else:
            into[k] = v
    return into


def run_doc_commands(tmp):
    """The `helm` commands of the README and docs/helm.md, run through the SDK: `helm package`
    of the chart, `helm show values` of it, and `helm install` / `helm upgrade --install` of the
    chart or its package, rendered with their --set values, validated and checked as above."""
    packages = {str(CHART): CHART}
    installs = {}
    for doc in DOC_COMMANDS:
        for command in doc_commands(doc):
            where = f"{doc}: `{command}`"
            args = shlex.split(command)[1:]
            if args[:1] == ["package"] and args[1:] == [str(CHART)]:
                tgz = Path(helm.package(CHART, destination=tmp))
                packages[tgz.name] = tgz
                continue
            if args[:2] == ["show", "values"] and len(args) == 3 and args[2] in packages:
                need(helm.show(str(packages[args[2]]), output_format="values") == (CHART / "values.yaml").read_text() + "\n",
                     f"{where}: not values.yaml")
                continue
            if args[:1] == ["uninstall"] and "--no-hooks" in args:
                print(f"ok: {where}: skips the hooks")
                continue
            if args[:1] == ["uninstall"]:
                # What it runs besides deleting: the chart's post-delete hook (compared with
                # deploy/prune above), there by default.
                text = helm_render(helm.Chart.load(CHART), {}) or ""
                hooks = [d for d in yaml.safe_load_all(text) if d and is_hook(d)]
                need([d["metadata"]["annotations"][HOOK] for d in hooks if d["kind"] == "Job"] == ["post-delete"],
                     f"{where}: the chart has no post-delete prune Job by default")
                print(f"ok: {where}: runs the chart's post-delete prune Job")
                continue
            if args[:1] == ["install"]:
                args = args[1:]
            elif args[:2] == ["upgrade", "--install"]:
                args = args[2:]
            else:
                problems.append(f"{where}: a helm command this check does not run")
                continue
            if len(args) < 2:
                problems.append(f"{where}: no release name and chart")
                continue
            release, ref, opts = args[0], args[1], args[2:]
            values, namespace, create = {}, None, False
            while opts:
                opt = opts.pop(0)
                if opt in ("-n", "--namespace"):
                    namespace = opts.pop(0)
                elif opt == "--create-namespace":
                    create = True
                elif opt == "--set":
                    merge(values, helm.parse_set_string(opts.pop(0)))
                else:
                    problems.append(f"{where}: option {opt} is not one this check runs")
            need(ref in packages, f"{where}: {ref} is neither {CHART} nor a package made above")
            need(namespace is not None and create, f"{where}: -n NAMESPACE --create-namespace (the chart makes no Namespace)")
            if ref not in packages or namespace is None:
                continue
            text = helm_render(helm.Chart.load(packages[ref]), values, release=release, namespace=namespace)
            if text is None:
                continue
            before = len(problems)
            cd.validate(where, text)
            security(where, text, values)
            installs[doc] = installs.get(doc, 0) + 1
            if len(problems) == before:
                print(f"ok: {where}: renders, valid, checked")
    need(installs.get(Path("README.md"), 0) > 0, "README.md: no `helm install` command")


def main():
    cd.KUBECTL, cd.VALIDATE = sys.argv[1], sys.argv[2]
    write = "--write" in sys.argv[3:]
    for ours, theirs in COPIES.items():
        keep(ours, theirs.read_text(), write, f"a copy of {theirs}: run .ci/check_helm.py --write")
    chart = helm.Chart.load(CHART)
    schema = chart.schema if isinstance(chart.schema, dict) else json.loads(chart.schema)
    tested = {p for case in CASES for p in value_paths(case[1])} | {p for case in NAMING for p in value_paths(case[1])}
    tested.add("namespaceOverride")  # below: the release's namespace
    untested = [leaf for leaf in schema_leaves(schema) if leaf not in tested]
    need(untested == [], f"{CHART}: values no case renders: {untested}")
    lint = helm.lint(CHART, strict=True)
    need(lint["errors"] == [] and all(m["severity"] <= 1 for m in lint["messages"]),
         f"helm lint --strict {CHART}: {lint}")
    rendered = []  # (where, text) for one validation run
    with tempfile.TemporaryDirectory(dir="deploy") as tmp:
        i = 0
        for what, values, components, additions, drop in CASES:
            before = len(problems)
            for namespace in NAMESPACES:
                i += 1
                where = f"helm ({what}; namespace {namespace})"
                text = helm_render(chart, values, namespace=namespace)
                theirs = kustomize_render(tmp, i, namespace, components, additions)
                if text is None or theirs is None:
                    continue
                compare(tmp, where, text, theirs, drop)
                security(where, text, values)
                hooks = [d for d in yaml.safe_load_all(text) if d and is_hook(d)]
                need(bool(hooks) == values.get("prune", {}).get("enabled", True),
                     f"{where}: the prune hook is {'there' if hooks else 'missing'}")
                rendered.append((where, text))
            if len(problems) == before:
                print(f"ok: helm ({what}) = kustomize (base{''.join(' + ' + c for c in components)}"
                      f"{', a site patch' if additions else ''}), in {' and '.join(NAMESPACES)}")
        # The post-delete hook is deploy/prune (in another namespace, a site's patch of the
        # namespace where it looks for NodeFeatures), with Helm's hook annotations.
        before = len(problems)
        for namespace in NAMESPACES:
            where = f"helm (the prune hook; namespace {namespace})"
            text = helm_render(chart, {}, namespace=namespace)
            args = {"patches": [ds_patch(replace("/spec/template/spec/containers/0/args/2",
                                                 f"--nodefeature-namespace={namespace}"), kind="Job")]}
            theirs = kustomize_render(tmp, "-prune", namespace, [], args if namespace != "gpu-labeler" else {}, root="prune")
            if text is None or theirs is None:
                continue
            compare(tmp, where, text, theirs, hooks=True)
            for d in (d for d in yaml.safe_load_all(text) if d and is_hook(d)):
                notes = d["metadata"]["annotations"]
                weight = "0" if d["kind"] == "Job" else "-1"
                need(notes == PRUNE_HOOK | {"helm.sh/hook-weight": weight},
                     f"{where}: {d['kind']} {d['metadata']['name']}: hook annotations {notes}")
        if len(problems) == before:
            print(f"ok: helm (the prune hook) = kustomize (prune), post-delete, in {' and '.join(NAMESPACES)}")
        base = kustomize_render(tmp, "-base", "gpu-labeler", [], {})
        for what, values, release, fullname, name in NAMING:
            where = f"helm ({what}; release {release})"
            before = len(problems)
            text = helm_render(chart, values, release=release)
            if text is None or base is None:
                continue
            compare(tmp, where, text, base, rename=renamer(fullname, name))
            security(where, text, values, name=fullname)
            rendered.append((where, text))
            if len(problems) == before:
                print(f"ok: helm ({what}) = kustomize's base, {fullname}[-...] for gpu-labeler[-...]")
        # The comparison is strict: one changed field of one object fails it.
        text = helm_render(chart, {})
        if text is not None and base is not None:
            before = len(problems)
            changed = text.replace("periodSeconds: 30", "periodSeconds: 31", 1)
            need(changed != text, "the comparison's negative control: no periodSeconds: 30 in the rendering")
            compare(tmp, "(negative control)", changed, base)
            need(len(problems) == before + 1, "the comparison accepted a changed probe: it is not strict")
            problems[before:] = [p for p in problems[before:] if not p.startswith("(negative control)")]
        # namespaceOverride: as the release's namespace.
        text = helm_render(chart, {"namespaceOverride": "my-gpu-ns"})
        need(text == helm_render(chart, {}, namespace="my-gpu-ns"), "helm: namespaceOverride is not the release's namespace")
    # One validation run for every rendering; on a failure, one per rendering, to say which.
    before = len(problems)
    if not cd.validate("helm (every rendering)", "---\n".join(t for _, t in rendered)):
        del problems[before:]
        for where, text in rendered:
            cd.validate(where, text)
    else:
        print(f"ok: {len(rendered)} renderings valid for Kubernetes {' and '.join(cd.VERSIONS)}")
    # A nvml affinity the chart must refuse, and wrong values the schema must.
    try:
        chart.render({"nvml": {"enabled": True}, "affinity": AFFINITY}, name=RELEASE, namespace="gpu-labeler")
        problems.append("helm: nvml.enabled with a required node affinity renders")
    except helm.HelmError as e:
        need("affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: with nvml.enabled" in str(e),
             f"helm: nvml.enabled with a required node affinity: {e}")
    for values, message in REFUSED:
        try:
            chart.render(values, name=RELEASE, namespace="gpu-labeler")
            problems.append(f"helm: the schema accepts {values}")
        except helm.HelmValuesError as e:
            need(str(e) == SCHEMA_HEAD + message, f"helm: {values}: {e!r}, expected {SCHEMA_HEAD + message!r}")
    print(f"ok: the schema refuses {len(REFUSED)} wrong values with Helm's message")
    check_hostile(chart, schema)
    # The package: lints, renders as the directory does, shows values.yaml.
    with tempfile.TemporaryDirectory() as tmp:
        tgz = helm.package(CHART, destination=tmp)
        need(Path(tgz).name == f"gpu-labeler-{chart.version}.tgz", f"helm package: {tgz}")
        lint = helm.lint(tgz, strict=True)
        need(lint["errors"] == [] and all(m["severity"] <= 1 for m in lint["messages"]), f"helm lint --strict {tgz}: {lint}")
        packaged = helm.Chart.load(tgz)
        for values in ({}, {"nvml": {"enabled": True}, "sink": "nodefeature"}):
            need(helm_render(packaged, values) == helm_render(chart, values), f"helm: the package renders {values} otherwise")
        # `helm show values` prints the file and a newline.
        shown = helm.show(tgz, output_format="values")
        need(shown == (CHART / "values.yaml").read_text() + "\n",
             f"helm show values of the package is not values.yaml: {shown!r}")
        print(f"ok: helm package ({Path(tgz).name}): lints, renders as the chart directory, show values = values.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        run_doc_commands(tmp)
    # What tests/deploy.rs runs the admission tables on.
    for fixture, values, release, namespace in [
        ("defaults", {}, RELEASE, "gpu-labeler"),
        ("nvidia-gfd", {"profiles": ["nvidia-gfd"]}, RELEASE, "gpu-labeler"),
        ("nodefeature", {"sink": "nodefeature"}, RELEASE, "gpu-labeler"),
        ("health-condition", {"health": {"condition": True}}, RELEASE, "gpu-labeler"),
        ("renamed-site", {}, "site", "my-gpu-ns"),
    ]:
        keep(FIXTURES / f"{fixture}.rendered.yaml", helm_render(chart, values, release=release, namespace=namespace) or "",
             write, "render it again with .ci/check_helm.py --write")
    # The NOTES Helm prints after an install: how to see the labels (or the NodeFeatures).
    for fixture, values, release, namespace in [
        ("defaults", {}, RELEASE, "gpu-labeler"),
        ("nvml-gfd", {"nvml": {"enabled": True}, "profiles": ["nvidia-gfd"]}, RELEASE, "gpu-labeler"),
        ("nodefeature-site", {"sink": "nodefeature"}, "site", "my-gpu-ns"),
    ]:
        notes = chart.render(values, name=release, namespace=namespace)["gpu-labeler/templates/NOTES.txt"]
        keep(FIXTURES / f"NOTES.{fixture}.txt", notes, write, "render it again with .ci/check_helm.py --write")
    # docs/helm.md's values table.
    doc = DOCS.read_text() if DOCS.exists() else ""
    table = values_table(schema, chart.values)
    if TABLE_START in doc and TABLE_END in doc:
        before, rest = doc.split(TABLE_START, 1)
        after = rest.split(TABLE_END, 1)[1]
        keep(DOCS, before + TABLE_START + table + TABLE_END + after, write, "its values table: run .ci/check_helm.py --write")
    else:
        problems.append(f"{DOCS}: no values table between {TABLE_START.strip()} and {TABLE_END.strip()}")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
