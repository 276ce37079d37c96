#!/usr/bin/env python3
"""Writes recorded.json: the generator's cases, the oracle's verdicts on them and their
provenance (the allocator's version and commit, Go and Debian package versions, the
generator's seed). A case the oracle calls unstable (its verdict depends on Go's map order) is
left out, and counted.

Usage: record.py CASES.json VERDICTS.json PROVENANCE.txt > recorded.json
"""
import json
import sys

MAX_STEPS = 20000

cases_file, verdicts_file, provenance_file = sys.argv[1:4]
cases = json.load(open(cases_file))
verdicts = json.load(open(verdicts_file))
assert len(cases["cases"]) == len(verdicts), "one verdict per case"
keep_cases, keep_verdicts, unstable, long = [], [], [], []
for c, v in zip(cases["cases"], verdicts):
    assert c["id"] == v["id"]
    if v["verdict"] == "unstable":
        unstable.append(c["id"])
        continue
    if v["steps"] > MAX_STEPS:
        long.append(f'{c["id"]} ({v["steps"]} steps)')
        continue
    keep_cases.append(c)
    keep_verdicts.append(v)
provenance = {
    "oracle": "tests/dra-allocator-oracle/main.go (build.sh), over generate.py's cases",
    "generator": {"seed": cases["seed"], "count": cases["count"]},
    "built": [line.strip() for line in open(provenance_file) if line.strip()],
    "leftOut": {"unstable": unstable, f"over {MAX_STEPS} steps": long},
}
json.dump({"provenance": provenance, "cases": keep_cases, "verdicts": keep_verdicts},
          sys.stdout, separators=(",", ":"), sort_keys=True)
sys.stdout.write("\n")
