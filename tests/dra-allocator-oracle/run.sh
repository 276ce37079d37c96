#!/bin/sh
# Regenerates recorded.json: the cases (generate.py, seed 51), the oracle's verdicts on them
# (main.go built by build.sh) and their provenance. Run from the repository root, in a session
# that can fetch kubernetes/dynamic-resource-allocation (CI cannot: it replays recorded.json).
# Env: KAPI, ORACLE, DRA_GIT, DRA_REF (build.sh); SEED, COUNT (generate.py).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
: "${ORACLE:?set ORACLE to a scratch directory}"
sh "$HERE/build.sh" >/dev/null
python3 "$HERE/generate.py" --seed "${SEED:-51}" --count "${COUNT:-1200}" >"$ORACLE/cases.json"
"$ORACLE/bin/dra-oracle" "$ORACLE/cases.json" >"$ORACLE/verdicts.json"
python3 "$HERE/record.py" "$ORACLE/cases.json" "$ORACLE/verdicts.json" "$ORACLE/provenance.txt" \
  >"$HERE/recorded.json"
echo "wrote $HERE/recorded.json"
