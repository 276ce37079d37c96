#!/usr/bin/env python3
"""Generates the (claims, slices) cases the DRA allocator oracle (main.go) decides and
tests/dra_allocator_oracle.rs replays through `match`.

Two parts:
- the examples of the NVIDIA, AMD and Intel DRA drivers' docs (their claims restated here with
  the file each is from), each against the drivers' ResourceSlices of tests/fixtures/dra (and
  tests/fixtures/template's MIG and partition slices), with none, some or most devices allocated;
- `--count` random cases from `random.Random(--seed)`: one node, one to three pools (a pool
  split over two slices, an incomplete or an outdated one, slices for another node, for all
  nodes or by node selector, a shared-counters slice), devices with and without the attributes
  and capacities the selectors read, device taints, devices already allocated, and one to
  three claims of one to three requests (ExactCount and All, firstAvailable, adminAccess,
  tolerations, matchAttribute and distinctAttribute constraints) with selectors over strings,
  ints, bools, versions (semver) and quantities, guarded or not.

Usage: generate.py [--seed N] [--count N] > cases.json   (run from the repository root)
"""
import argparse
import copy
import json
import random

FIXTURES = "tests/fixtures/dra/"

# ---------------------------------------------------------------------------------------------
# Objects.


def meta(name, namespace=None):
    m = {"name": name}
    if namespace:
        m["namespace"] = namespace
    return m


def device_class(name, *exprs):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": meta(name),
        "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]},
    }


def exact(cls, count=None, mode=None, selectors=(), tolerations=None, admin=None):
    """A request as the API server stores it: defaulted (ExactCount, count 1, operator Equal),
    as the scheduler then reads it."""
    e = {"deviceClassName": cls, "allocationMode": mode or "ExactCount"}
    if e["allocationMode"] == "ExactCount":
        e["count"] = 1 if count is None else count
    for t in tolerations or []:
        t.setdefault("operator", "Equal")
    if selectors:
        e["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if tolerations:
        e["tolerations"] = tolerations
    if admin is not None:
        e["adminAccess"] = admin
    return e


def claim(name, requests, constraints=None, namespace="default"):
    spec = {"devices": {"requests": requests}}
    if constraints:
        spec["devices"]["constraints"] = constraints
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta(name, namespace),
        "spec": spec,
    }


def allocated_claim(name, device_ids):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta(name, "other"),
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "any"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "r", "driver": d, "pool": p, "device": n}
                        for (d, p, n) in device_ids
                    ]
                }
            }
        },
    }


def node(name, labels):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def fixture_slices(path, node_name):
    """The slices of a fixture (a List or YAML-free JSON), moved onto `node_name`."""
    doc = json.load(open(path))
    items = doc["items"] if "items" in doc else [doc]
    out = []
    for i, s in enumerate(items):
        s = copy.deepcopy(s)
        s["metadata"] = meta(f"{node_name}-{s['spec']['driver']}-{i}")
        s["spec"]["nodeName"] = node_name
        s["spec"]["pool"] = {"name": node_name, "generation": 1, "resourceSliceCount": 1}
        out.append(s)
    return out


# ---------------------------------------------------------------------------------------------
# The drivers' docs.

NVIDIA = "kubernetes-sigs/dra-driver-nvidia-gpu@95932046"
AMD = "ROCm/k8s-gpu-dra-driver@2622427226"
INTEL = "intel/intel-resource-drivers-for-kubernetes"

CLASSES = [
    # NVIDIA deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-{gpu,mig}.yaml.
    device_class(
        "gpu.nvidia.com",
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    ),
    device_class(
        "mig.nvidia.com",
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    ),
    # AMD deployments/helm/k8s-gpu-dra-driver/templates/deviceclass.yaml.
    device_class("gpu.amd.com", "device.driver == 'gpu.amd.com'"),
    # Intel deployments/gpu/device-class.yaml.
    device_class("gpu.intel.com", "device.driver == 'gpu.intel.com'"),
]

PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"
AMD_PARTITION = 'device.attributes["gpu.amd.com"].type == "amdgpu-partition"'

# (source, claims): each claim's requests and constraints as the example writes them.
DOC_EXAMPLES = [
    (f"{NVIDIA} demo/specs/quickstart/v1/gpu-test1.yaml (and gpu-test2, gpu-test3, gpu-test7)",
     [claim("single-gpu", [{"name": "gpu", "exactly": exact("gpu.nvidia.com")}])]),
    (f"{NVIDIA} demo/specs/quickstart/v1/gpu-test4.yaml",
     [claim("mig-devices", [
         {"name": "mig-1g-5gb-0", "exactly": exact("mig.nvidia.com", selectors=[PROFILE.format("1g.5gb")])},
         {"name": "mig-1g-5gb-1", "exactly": exact("mig.nvidia.com", selectors=[PROFILE.format("1g.5gb")])},
         {"name": "mig-2g-10gb", "exactly": exact("mig.nvidia.com", selectors=[PROFILE.format("2g.10gb")])},
         {"name": "mig-3g-20gb", "exactly": exact("mig.nvidia.com", selectors=[PROFILE.format("3g.20gb")])},
     ], [{"requests": [], "matchAttribute": "gpu.nvidia.com/parentUUID"}])]),
    (f"{NVIDIA} demo/specs/quickstart/v1/gpu-test5.yaml",
     [claim("multiple-gpus", [
         {"name": "ts-gpu", "exactly": exact("gpu.nvidia.com")},
         {"name": "mps-gpu", "exactly": exact("gpu.nvidia.com")},
     ])]),
    (f"{NVIDIA} demo/specs/quickstart/v1/gpu-test6.yaml",
     [claim("a100", [{"name": "gpu", "exactly": exact("gpu.nvidia.com", selectors=[
         "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')\n&&\n"
         "(device.attributes['gpu.nvidia.com'].index == 0 ||\n"
         "device.attributes['gpu.nvidia.com'].index == 2 ||\n"
         "device.attributes['gpu.nvidia.com'].index == 4 ||\n"
         "device.attributes['gpu.nvidia.com'].index == 6)\n"])}])]),
    (f"{AMD} example/example.yaml",
     [claim("single-gpu", [{"name": "gpu", "exactly": exact("gpu.amd.com")}])]),
    (f"{AMD} example/example-partitions-same-parent.yaml",
     [claim("two-partitions-same-parent", [
         {"name": "p0", "exactly": exact("gpu.amd.com", 1, "ExactCount", [AMD_PARTITION])},
         {"name": "p1", "exactly": exact("gpu.amd.com", 1, "ExactCount", [AMD_PARTITION])},
     ], [{"matchAttribute": "gpu.amd.com/deviceID", "requests": ["p0", "p1"]}])]),
    (f"{AMD} example/example-partitions-distinct-parents.yaml",
     [claim("two-partitions-distinct-parents", [
         {"name": "p0", "exactly": exact("gpu.amd.com", 1, "ExactCount", [AMD_PARTITION])},
         {"name": "p1", "exactly": exact("gpu.amd.com", 1, "ExactCount", [AMD_PARTITION])},
     ], [{"distinctAttribute": "gpu.amd.com/deviceID", "requests": ["p0", "p1"]}])]),
    (f"{INTEL}@b88b1393 deployments/gpu/examples/resource-claim-template.yaml",
     [claim("claim1", [{"name": "gpu", "exactly": exact("gpu.intel.com")}])]),
    (f"{INTEL}@320ecda3 deployments/gpu/examples/monitor-pod-inline.yaml",
     [claim("monitor-claim", [{"name": "gpu", "exactly": exact(
         "gpu.intel.com", mode="All", admin=True,
         tolerations=[{"effect": "NoExecute"}, {"effect": "NoSchedule"}])}])]),
]

# The machines the examples run against: (name, fixture files).
MACHINES = [
    ("h100", [FIXTURES + "dell-xe9680-8xh100.json"]),
    ("a100", [FIXTURES + "azure-nd-a100-v4.json"]),
    ("dgx2h", [FIXTURES + "nvidia-dgx2h.json"]),
    ("mi300x-cpx", [FIXTURES + "amd-mi300x-cpx.json"]),
    ("mi210", [FIXTURES + "amd-mi210-8x.json"]),
    ("tigerlake", [FIXTURES + "intel-tigerlake-igpu.json"]),
]


def doc_cases(rng):
    cases = []
    for source, claims in DOC_EXAMPLES:
        for mname, files in MACHINES:
            slices = []
            for f in files:
                slices.extend(fixture_slices(f, "node-1"))
            ids = [(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
                   for s in slices for d in s["spec"]["devices"]]
            for busy in (0, len(ids) // 2, max(len(ids) - 1, 0)):
                taken = rng.sample(ids, busy) if busy else []
                c = {
                    "id": f"docs {source} on {mname}, {busy} allocated",
                    "node": node("node-1", {}),
                    "slices": slices,
                    "classes": CLASSES,
                    "claims": copy.deepcopy(claims),
                    "allocated": [allocated_claim("busy", taken)] if taken else [],
                }
                if any("distinctAttribute" in k for cl in claims
                       for k in cl["spec"]["devices"].get("constraints", [])):
                    c["consumableCapacity"] = True
                cases.append(c)
    return cases


# ---------------------------------------------------------------------------------------------
# Random cases.

DRIVERS = ["gpu.example.com", "nic.example.com"]
MODELS = ["a100", "h100", "mi300x"]
VERSIONS = ["1.0.0", "1.2.3", "2.0.0-rc.1", "535.161.8", "550.54.15"]
MEMORY = ["16Gi", "40Gi", "80Gi", "81559Mi", "40960Mi"]


def random_device(rng, name, driver, complete):
    attrs, cap = {}, {}

    def maybe(p=0.85):
        return complete or rng.random() < p

    if maybe(0.95):
        attrs["model"] = {"string": rng.choice(MODELS)}
    if maybe(0.95):
        attrs["numa"] = {"int": rng.choice([0, 1])}
    if maybe(0.8):
        attrs["healthy"] = {"bool": rng.random() < 0.8}
    if maybe(0.95):
        attrs["driverVersion"] = {"version": rng.choice(VERSIONS)}
    if maybe(0.5):
        attrs["resource.kubernetes.io/pcieRoot"] = {"string": rng.choice(["pci0000:00", "pci0000:80"])}
    if maybe(0.95):
        cap["memory"] = {"value": rng.choice(MEMORY)}
    if maybe(0.5):
        cap["cores"] = {"value": str(rng.choice([64, 108, 132]))}
    d = {"name": name, "attributes": attrs, "capacity": cap}
    if rng.random() < 0.15:
        d["taints"] = [{
            "key": rng.choice(["example.com/xid", "example.com/maintenance"]),
            "value": rng.choice(["79", "true"]),
            "effect": rng.choice(["NoSchedule", "NoExecute", "None"]),
        }]
    return d


def selectors_for(rng, d, complete):
    """Selectors over `d`'s attributes; unguarded reads only where every device has them."""
    safe = [
        f'device.attributes["{d}"].model == "{rng.choice(MODELS)}"',
        f'device.attributes["{d}"].numa == {rng.choice([0, 1])}',
        f'device.capacity["{d}"].memory.compareTo(quantity("{rng.choice(MEMORY)}")) >= 0',
        f'device.attributes["{d}"].driverVersion.isGreaterThan(semver("{rng.choice(VERSIONS)}"))',
        f'device.attributes["{d}"].driverVersion.compareTo(semver("1.2.3")) <= 0',
        f'device.capacity["{d}"].memory.isLessThan(quantity("{rng.choice(MEMORY)}"))',
        f'device.attributes["{d}"].model.startsWith("{rng.choice(["a", "h", "m"])}")',
        f'device.driver == "{d}"',
        f'"model" in device.attributes["{d}"] && device.attributes["{d}"].model != "a100"',
        f'has(device.attributes["{d}"].healthy) && device.attributes["{d}"].healthy == true',
        f'!has(device.capacity["{d}"].cores) || device.capacity["{d}"].cores.compareTo(quantity("100")) > 0',
        f'cel.bind(a, device.attributes["{d}"], has(a.numa) && a.numa == 1)',
    ]
    risky = [
        f'device.attributes["{d}"].healthy == true',
        f'device.capacity["{d}"].cores.compareTo(quantity("100")) >= 0',
        f'device.attributes["{d}"].model == "h100" && device.attributes["{d}"].numa == 0',
        f'device.attributes["{d}"].productName == "x"',
    ]
    pool = safe * 2 + (risky if not complete else risky[:3])
    return [rng.choice(pool) for _ in range(rng.choice([0, 0, 1, 1, 2]))]


def random_case(rng, i):
    node_name = "node-1"
    labels = {"zone": rng.choice(["a", "b"])}
    # A case with more than one pool must not depend on the order pools are taken in (Go's map
    # order): there every device is of one driver and has what the selectors read, so no
    # selector can fail.
    npools = rng.choice([1, 1, 1, 2, 3])
    complete = npools > 1
    one_driver = rng.choice(DRIVERS)
    slices, ids = [], []
    for p in range(npools):
        driver = one_driver if complete else rng.choice(DRIVERS)
        pool = f"pool-{p}"
        where = rng.random()
        if where < 0.75:
            sel = {"nodeName": node_name}
        elif where < 0.82:
            sel = {"nodeName": "node-2"}
        elif where < 0.9:
            sel = {"allNodes": True}
        else:
            sel = {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": [rng.choice(["a", "b"])]}]}]}}
        nslices = 2 if rng.random() < 0.15 else 1
        count = nslices + (1 if rng.random() < 0.08 else 0)  # sometimes incomplete
        gen = 1
        counters = rng.random() < 0.12
        for s in range(nslices):
            devices = []
            for k in range(rng.randint(0 if rng.random() < 0.05 else 1, 6)):
                name = f"dev-{s}-{k}" if rng.random() > 0.03 else "dev-0-0"  # a duplicate: invalid
                dev = random_device(rng, name, driver, complete)
                if counters:
                    dev["consumesCounters"] = [{"counterSet": "gpu", "counters": {
                        "mem": {"value": rng.choice(["10Gi", "20Gi", "40Gi"])}}}]
                devices.append(dev)
                ids.append((driver, pool, name))
            spec = {"driver": driver, "pool": {"name": pool, "generation": gen,
                                               "resourceSliceCount": count},
                    "devices": devices}
            spec.update(sel)
            slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                           "metadata": meta(f"{pool}-{s}"), "spec": spec})
        if counters:
            spec = {"driver": driver, "pool": {"name": pool, "generation": gen,
                                               "resourceSliceCount": count + 1},
                    "sharedCounters": [{"name": "gpu", "counters": {"mem": {"value": "80Gi"}}}]}
            spec.update(sel)
            slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                           "metadata": meta(f"{pool}-counters"), "spec": spec})
            for s in slices:
                if s["spec"]["pool"]["name"] == pool and s["spec"]["driver"] == driver:
                    s["spec"]["pool"]["resourceSliceCount"] = count + 1
        if rng.random() < 0.05:
            # An outdated slice of a newer generation elsewhere.
            old = copy.deepcopy(slices[-1])
            old["metadata"]["name"] += "-old"
            old["spec"]["pool"]["generation"] = 0
            slices.append(old)
    classes = [device_class("any")]
    for d in DRIVERS:
        classes.append(device_class(d, f'device.driver == "{d}"'))
        exprs = selectors_for(rng, one_driver if complete else d, complete)
        classes.append(device_class(f"{d}-picky", *exprs))
    class_names = [c["metadata"]["name"] for c in classes]

    def sub(name):
        cls = rng.choice(class_names)
        d = cls.split("-picky")[0] if cls != "any" else rng.choice(DRIVERS)
        if complete:
            d = one_driver
        r = rng.random()
        mode, count = (("All", None) if r < 0.12 else
                       (None, None) if r < 0.45 else ("ExactCount", rng.randint(1, 4)))
        tol = None
        if rng.random() < 0.2:
            tol = [{"key": rng.choice(["example.com/xid", ""]),
                    "operator": rng.choice(["Exists", "Equal"]),
                    "value": rng.choice(["79", "true", ""]),
                    **({"effect": rng.choice(["NoSchedule", "NoExecute"])} if rng.random() < 0.5 else {})}]
            for t in tol:
                if t["operator"] == "Exists":
                    t.pop("value")
                if t["key"] == "":
                    t["operator"] = "Exists"
                    t.pop("value", None)
        admin = True if rng.random() < 0.05 and mode != "All" else None
        e = exact(cls, count, mode, selectors_for(rng, d, complete), tol, admin)
        return e

    claims = []
    distinct = False
    for c in range(rng.choice([1, 1, 2, 3])):
        reqs = []
        for r in range(rng.choice([1, 1, 2, 3])):
            if rng.random() < 0.2:
                subs = []
                for k in range(rng.choice([2, 3])):
                    e = sub(f"s{k}")
                    e.pop("adminAccess", None)
                    e["name"] = f"s{k}"
                    subs.append(e)
                reqs.append({"name": f"r{r}", "firstAvailable": subs})
            else:
                reqs.append({"name": f"r{r}", "exactly": sub(f"r{r}")})
        constraints = []
        if rng.random() < 0.3:
            names = [q["name"] for q in reqs]
            attr = rng.choice(["gpu.example.com/numa", "gpu.example.com/model",
                               "resource.kubernetes.io/pcieRoot", "nic.example.com/numa"])
            kind = "matchAttribute" if rng.random() < 0.75 else "distinctAttribute"
            distinct = distinct or kind == "distinctAttribute"
            k = {kind: attr}
            if rng.random() < 0.6:
                k["requests"] = rng.sample(names, rng.randint(1, len(names)))
            constraints.append(k)
        claims.append(claim(f"claim-{c}", reqs, constraints))
    taken = rng.sample(ids, rng.randint(0, min(len(ids), 4))) if ids and rng.random() < 0.4 else []
    case = {
        "id": f"random {i}",
        "node": node(node_name, labels),
        "slices": slices,
        "classes": classes,
        "claims": claims,
        "allocated": [allocated_claim("busy", taken)] if taken else [],
    }
    if distinct:
        case["consumableCapacity"] = True
    return case


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=51)
    ap.add_argument("--count", type=int, default=1200)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    cases = doc_cases(rng) + [random_case(rng, i) for i in range(a.count)]
    json.dump({"seed": a.seed, "count": a.count, "cases": cases}, __import__("sys").stdout,
              separators=(",", ":"), sort_keys=True)


if __name__ == "__main__":
    main()
