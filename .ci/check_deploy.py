#!/usr/bin/env python3
"""Checks what an operator applies: every kustomization under deploy/, rendered with
`kubectl kustomize`, validated strictly against the Kubernetes schemas of the oldest supported
version (k8s-openapi's v1_33) and the newest, and checked for the security settings of issue 7.

Usage: check_deploy.py KUBECTL KUBERNETES_VALIDATE   (run from the repository root)
Exits 1 with one line per problem."""

import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

KUBECTL, VALIDATE = sys.argv[1], sys.argv[2]
VERSIONS = ["1.33.0", "1.37.0"]
problems = []


def render(path):
    out = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        problems.append(f"{path}: kubectl kustomize failed: {out.stderr.strip()}")
        return None
    return out.stdout


def validate(name, text):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    ok = True
    for v in VERSIONS:
        out = subprocess.run([VALIDATE, "--strict", "--quiet", "-k", v, f.name],
                             capture_output=True, text=True)
        if out.returncode != 0:
            ok = False
            problems.append(f"{name}: not valid for Kubernetes {v}: {(out.stdout + out.stderr).strip()}")
    return ok


def need(cond, what):
    if not cond:
        problems.append(what)


def check_daemonset(where, ds, nvidia):
    name = ds["metadata"]["name"]
    w = f"{where}: DaemonSet {name}"
    spec = ds["spec"]["template"]["spec"]
    need(spec.get("serviceAccountName") == "gpu-labeler", f"{w}: serviceAccountName")
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


def check_gfd(where, text, expect_gfd):
    docs = [d for d in yaml.safe_load_all(text) if d]
    for ds in (d for d in docs if d["kind"] == "DaemonSet"):
        env = {e["name"]: e.get("value") for e in ds["spec"]["template"]["spec"]["containers"][0].get("env", [])}
        need((env.get("GPU_LABELER_PROFILES") == "nvidia-gfd") == expect_gfd,
             f"{where}: DaemonSet {ds['metadata']['name']}: GPU_LABELER_PROFILES")
    for vap in (d for d in docs if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == "gpu-labeler-own-node"):
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


def check(where, text, expect_nvidia, expect_nodefeature):
    docs = [d for d in yaml.safe_load_all(text) if d]
    kinds = {}
    for d in docs:
        kinds.setdefault(d["kind"], []).append(d)
    daemonsets = kinds.get("DaemonSet", [])
    names = sorted(d["metadata"]["name"] for d in daemonsets)
    need(names == (["gpu-labeler", "gpu-labeler-nvidia"] if expect_nvidia else ["gpu-labeler"]),
         f"{where}: DaemonSets {names}")
    for ds in daemonsets:
        check_daemonset(where, ds, ds["metadata"]["name"].endswith("-nvidia"))
        args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
        need(("--sink=nodefeature" in args) == expect_nodefeature, f"{where}: {ds['metadata']['name']} sink")
    if expect_nvidia:
        # The two DaemonSets split the nodes: one's required terms are the other's negation.
        terms = {d["metadata"]["name"]: d["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
                 ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] for d in daemonsets}
        need(terms["gpu-labeler"] == [{"matchExpressions": [
            {"key": "feature.node.kubernetes.io/gpu-nvidia.count", "operator": "DoesNotExist"},
            {"key": "nvidia.com/gpu.present", "operator": "NotIn", "values": ["true"]}]}],
            f"{where}: gpu-labeler's node affinity")
        need(terms["gpu-labeler-nvidia"] == [
            {"matchExpressions": [{"key": "feature.node.kubernetes.io/gpu-nvidia.count", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}],
            f"{where}: gpu-labeler-nvidia's node affinity")
        sel = {d["metadata"]["name"]: d["spec"]["selector"]["matchLabels"] for d in daemonsets}
        need(sel["gpu-labeler"] != sel["gpu-labeler-nvidia"], f"{where}: the DaemonSets' selectors overlap")
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
        need(vaps == ["gpu-labeler-own-nodefeature"] and bindings == vaps,
             f"{where}: the NodeFeature admission policy and its Deny binding, and no Node policy, got {vaps} {bindings}")
    else:
        need(rules == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch", "patch"]}],
             f"{where}: ClusterRole allows only get, watch and patch on nodes, got {rules}")
        need(roles == [], f"{where}: no Role, got {roles}")
        vap = kinds.get("ValidatingAdmissionPolicy", [])
        binding = kinds.get("ValidatingAdmissionPolicyBinding", [])
        need(len(vap) == 1 and len(binding) == 1
             and binding[0]["spec"]["policyName"] == vap[0]["metadata"]["name"]
             and binding[0]["spec"]["validationActions"] == ["Deny"],
             f"{where}: the admission policy and its Deny binding")
    ns = kinds.get("Namespace", [])
    need(len(ns) == 1 and ns[0]["metadata"]["name"] == "gpu-labeler", f"{where}: Namespace")


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
            images = sorted({c["image"] for d in yaml.safe_load_all(text) if d and d["kind"] == "DaemonSet"
                             for c in d["spec"]["template"]["spec"]["containers"]})
            want = "registry.example.com/gpu-labeler:0.1.0" if path == Path(tmp) else "gpu-labeler:0.1.0"
            need(images == [want], f"{where}: images {images}, expected {want} (the README's site kustomization)")
            print(f"ok: {where}: {len([d for d in yaml.safe_load_all(text) if d])} objects")
        # The validator is strict: an unknown field must fail.
        broken = render(root).replace("readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true")
        if validate("(negative control)", broken):
            problems.append("kubernetes-validate accepted an unknown field: the check is not strict")
        else:
            problems[:] = [p for p in problems if not p.startswith("(negative control)")]
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)


main()
