#!/bin/sh
# Build the oracle (main.go, and nodefeaturerule/ with NFD's template data types) in GOPATH
# mode against the Go sources fetch.sh unpacked under $ORACLE/root, with the Go toolchain
# unpacked there too (nothing installed, no module proxy, no network). Writes $ORACLE/bin/oracle.
# Env: ORACLE (scratch dir), JOBS (parallel compiles, default 2).
set -eu
: "${ORACLE:?set ORACLE to a scratch directory}"
HERE=$(cd "$(dirname "$0")" && pwd)
GOROOT="$ORACLE/root/usr/lib/go-1.26"
[ -x "$GOROOT/bin/go" ] || { echo "build.sh: no Go toolchain in $GOROOT (run fetch.sh)" >&2; exit 1; }
# golang-1.26-src's files lie in /usr/share/go-1.26/src; the package's own install links them.
[ -e "$GOROOT/src" ] || ln -s ../../share/go-1.26/src "$GOROOT/src"
G="$ORACLE/gopath/src"
rm -rf "$G"
mkdir -p "$G/oracle/nodefeaturerule" "$G/github.com/Masterminds/semver" "$ORACLE/gocache" "$ORACLE/bin"
cp "$HERE/main.go" "$G/oracle/main.go"
cp "$HERE/nodefeaturerule.go" "$G/oracle/nodefeaturerule/types.go"
# Debian ships semver v3 at github.com/Masterminds/semver; Sprig imports it as .../semver/v3.
ln -s "$ORACLE/root/usr/share/gocode/src/github.com/Masterminds/semver" "$G/github.com/Masterminds/semver/v3"
export GOROOT GO111MODULE=off GOPATH="$ORACLE/gopath:$ORACLE/root/usr/share/gocode" GOCACHE="$ORACLE/gocache" \
       GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GOTELEMETRY=off HOME="$ORACLE"
cd "$G/oracle"
nice -n 10 "$GOROOT/bin/go" build -p "${JOBS:-2}" -trimpath -ldflags=-s -o "$ORACLE/bin/oracle.new" .
mv "$ORACLE/bin/oracle.new" "$ORACLE/bin/oracle"
