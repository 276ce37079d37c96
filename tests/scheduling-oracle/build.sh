#!/bin/sh
# Build the scheduling oracle (main.go) against the Go sources tests/debian-fetch.sh unpacked
# under $DEST/root (k8s.io/component-helpers and what it imports; tests/go-env.sh: the toolchain
# and the GOPATH-mode environment). Writes $DEST/bin/oracle.
# Env: DEST (scratch dir), JOBS (parallel compiles, default 2).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../go-env.sh"
mkdir -p "$DEST/gopath/src/oracle"
cp "$HERE/main.go" "$DEST/gopath/src/oracle/main.go"
cd "$DEST/gopath/src/oracle"
nice -n 10 "$GO" build -p "${JOBS:-2}" -trimpath -ldflags=-s -o "$DEST/bin/oracle.new" .
mv "$DEST/bin/oracle.new" "$DEST/bin/oracle"
