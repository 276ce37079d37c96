#!/bin/sh
# Build the oracle (main.go, and nodefeaturerule/ with NFD's template data types) against the Go
# sources tests/debian-fetch.sh unpacked under $DEST/root (tests/go-env.sh: the toolchain and
# the GOPATH-mode environment). Writes $DEST/bin/oracle.
# Env: DEST (scratch dir), JOBS (parallel compiles, default 2).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../go-env.sh"
G="$DEST/gopath/src"
rm -rf "$G"
mkdir -p "$G/oracle/nodefeaturerule" "$G/github.com/Masterminds/semver"
cp "$HERE/main.go" "$G/oracle/main.go"
cp "$HERE/nodefeaturerule.go" "$G/oracle/nodefeaturerule/types.go"
# Debian ships semver v3 at github.com/Masterminds/semver; Sprig imports it as .../semver/v3.
ln -s "$DEST/root/usr/share/gocode/src/github.com/Masterminds/semver" "$G/github.com/Masterminds/semver/v3"
cd "$G/oracle"
nice -n 10 "$GO" build -p "${JOBS:-2}" -trimpath -ldflags=-s -o "$DEST/bin/oracle.new" .
mv "$DEST/bin/oracle.new" "$DEST/bin/oracle"
