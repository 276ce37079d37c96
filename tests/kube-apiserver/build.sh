#!/bin/sh
# Build the test API server (main.go) against the Go sources tests/debian-fetch.sh unpacked under
# $DEST/root (tests/go-env.sh: the toolchain and the GOPATH-mode environment). Writes
# $DEST/bin/testapiserver.
# Env: DEST (scratch dir), JOBS (parallel compiles, default 2).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../go-env.sh"
mkdir -p "$DEST/gopath/src/testapiserver"
cp "$HERE/main.go" "$DEST/gopath/src/testapiserver/main.go"
cd "$DEST/gopath/src/testapiserver"
V=k8s.io/component-base/version
nice -n 10 "$GO" build -p "${JOBS:-2}" -trimpath \
  -ldflags="-s -X $V.gitVersion=v1.36.4 -X $V.gitMajor=1 -X $V.gitMinor=36" \
  -o "$DEST/bin/testapiserver.new" .
mv "$DEST/bin/testapiserver.new" "$DEST/bin/testapiserver"
