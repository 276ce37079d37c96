#!/bin/sh
# Build the test API server (main.go) in GOPATH mode against the Go sources fetch.sh unpacked
# under $KAPI/root, with the Go toolchain unpacked there too (nothing installed, no module
# proxy, no network). Writes $KAPI/bin/testapiserver.
# Env: KAPI (scratch dir), JOBS (parallel compiles, default 2).
set -eu
: "${KAPI:?set KAPI to a scratch directory}"
HERE=$(cd "$(dirname "$0")" && pwd)
GOROOT="$KAPI/root/usr/lib/go-1.26"
[ -x "$GOROOT/bin/go" ] || { echo "build.sh: no Go toolchain in $GOROOT (run fetch.sh)" >&2; exit 1; }
# golang-1.26-src's files lie in /usr/share/go-1.26/src; the package's own install links them.
[ -e "$GOROOT/src" ] || ln -s ../../share/go-1.26/src "$GOROOT/src"
mkdir -p "$KAPI/gopath/src/testapiserver" "$KAPI/gocache" "$KAPI/bin"
cp "$HERE/main.go" "$KAPI/gopath/src/testapiserver/main.go"
export GOROOT GO111MODULE=off GOPATH="$KAPI/gopath:$KAPI/root/usr/share/gocode" GOCACHE="$KAPI/gocache" \
       GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GOTELEMETRY=off HOME="$KAPI"
cd "$KAPI/gopath/src/testapiserver"
V=k8s.io/component-base/version
nice -n 10 "$GOROOT/bin/go" build -p "${JOBS:-2}" -trimpath \
  -ldflags="-s -X $V.gitVersion=v1.36.4 -X $V.gitMajor=1 -X $V.gitMinor=36" \
  -o "$KAPI/bin/testapiserver.new" .
mv "$KAPI/bin/testapiserver.new" "$KAPI/bin/testapiserver"
