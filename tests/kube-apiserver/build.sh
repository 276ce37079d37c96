#!/bin/sh
# Build the test API server (main.go) in GOPATH mode against the Go sources
# tests/debian-fetch.sh unpacked under $DEST/root, with the Go toolchain unpacked there too
# (nothing installed, no module proxy, no network). Writes $DEST/bin/testapiserver.
# Env: DEST (scratch dir), JOBS (parallel compiles, default 2).
set -eu
: "${DEST:?set DEST to a scratch directory}"
HERE=$(cd "$(dirname "$0")" && pwd)
GOROOT="$DEST/root/usr/lib/go-1.26"
[ -x "$GOROOT/bin/go" ] || { echo "build.sh: no Go toolchain in $GOROOT (run tests/debian-fetch.sh)" >&2; exit 1; }
# golang-1.26-src's files lie in /usr/share/go-1.26/src; the package's own install links them.
[ -e "$GOROOT/src" ] || ln -s ../../share/go-1.26/src "$GOROOT/src"
mkdir -p "$DEST/gopath/src/testapiserver" "$DEST/gocache" "$DEST/bin"
cp "$HERE/main.go" "$DEST/gopath/src/testapiserver/main.go"
export GOROOT GO111MODULE=off GOPATH="$DEST/gopath:$DEST/root/usr/share/gocode" GOCACHE="$DEST/gocache" \
       GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GOTELEMETRY=off HOME="$DEST"
cd "$DEST/gopath/src/testapiserver"
V=k8s.io/component-base/version
nice -n 10 "$GOROOT/bin/go" build -p "${JOBS:-2}" -trimpath \
  -ldflags="-s -X $V.gitVersion=v1.36.4 -X $V.gitMajor=1 -X $V.gitMinor=36" \
  -o "$DEST/bin/testapiserver.new" .
mv "$DEST/bin/testapiserver.new" "$DEST/bin/testapiserver"
