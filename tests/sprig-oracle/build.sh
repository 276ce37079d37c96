#!/bin/sh
# Build the oracle (main.go, and nodefeaturerule/ with NFD's template data types) in GOPATH
# mode against the Go sources tests/debian-fetch.sh unpacked under $DEST/root, with the Go
# toolchain unpacked there too (nothing installed, no module proxy, no network). Writes
# $DEST/bin/oracle.
# Env: DEST (scratch dir), JOBS (parallel compiles, default 2).
set -eu
: "${DEST:?set DEST to a scratch directory}"
HERE=$(cd "$(dirname "$0")" && pwd)
GOROOT="$DEST/root/usr/lib/go-1.26"
[ -x "$GOROOT/bin/go" ] || { echo "build.sh: no Go toolchain in $GOROOT (run tests/debian-fetch.sh)" >&2; exit 1; }
# golang-1.26-src's files lie in /usr/share/go-1.26/src; the package's own install links them.
[ -e "$GOROOT/src" ] || ln -s ../../share/go-1.26/src "$GOROOT/src"
G="$DEST/gopath/src"
rm -rf "$G"
mkdir -p "$G/oracle/nodefeaturerule" "$G/github.com/Masterminds/semver" "$DEST/gocache" "$DEST/bin"
cp "$HERE/main.go" "$G/oracle/main.go"
cp "$HERE/nodefeaturerule.go" "$G/oracle/nodefeaturerule/types.go"
# Debian ships semver v3 at github.com/Masterminds/semver; Sprig imports it as .../semver/v3.
ln -s "$DEST/root/usr/share/gocode/src/github.com/Masterminds/semver" "$G/github.com/Masterminds/semver/v3"
export GOROOT GO111MODULE=off GOPATH="$DEST/gopath:$DEST/root/usr/share/gocode" GOCACHE="$DEST/gocache" \
       GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GOTELEMETRY=off HOME="$DEST"
cd "$G/oracle"
nice -n 10 "$GOROOT/bin/go" build -p "${JOBS:-2}" -trimpath -ldflags=-s -o "$DEST/bin/oracle.new" .
mv "$DEST/bin/oracle.new" "$DEST/bin/oracle"
