#!/usr/bin/env bash
# Fuzzes each target for SECONDS (default 600), one at a time, at low priority, in fork mode so
# that a crash is saved (artifacts/<target>/) and fuzzing goes on for the whole time.
# Usage: fuzz/run-all.sh [SECONDS] [TARGET...]   (from anywhere; logs go to fuzz/logs/)
# NO_BUILD=1 fuzzes the binaries already built (`cargo fuzz build`) instead of building each.
set -u
cd "$(dirname "$0")"
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(rules snapshot sharing_config config sysfs_attr pci_config kfd_properties)
bin=target/x86_64-unknown-linux-gnu/release
mkdir -p logs
for t in "${targets[@]}"; do
    # Built just before its run, so that library fixes made meanwhile are fuzzed too.
    if [ -z "${NO_BUILD:-}" ]; then
        RUSTC_BOOTSTRAP=1 nice -n 10 cargo fuzz build "$t" > "logs/$t.build.log" 2>&1 \
            || echo "build of $t failed; fuzzing the previous binary" >> "logs/$t.build.log"
    fi
    mkdir -p "generated/$t" "artifacts/$t"
    dict=()
    [ -f "dict/$t.dict" ] && dict=("-dict=dict/$t.dict")
    start=$(date -u +%FT%TZ)
    echo "$t: start $start" >> logs/runs.txt
    nice -n 10 "$bin/$t" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 "${dict[@]}" \
        -artifact_prefix="artifacts/$t/" "generated/$t" "corpus/$t" > "logs/$t.log" 2>&1
    rc=$?
    echo "$t: end $(date -u +%FT%TZ) rc=$rc last: $(grep -E '^#[0-9]+' "logs/$t.log" | tail -1)" >> logs/runs.txt
done
