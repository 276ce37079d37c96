#!/bin/sh
# Builds the DRA allocator oracle (main.go) in GOPATH mode, nothing installed, no network:
# - Go and the Go sources of k8s.io/api, apimachinery, apiserver, cel-go, klog, utils from
#   Debian (the test API server's tree: tests/kube-apiserver/fetch.sh, under $KAPI/root);
# - k8s.io/component-helpers from Debian sid's golang-k8s-component-helpers-dev (downloaded
#   with `apt-get download` through a private apt configuration, unpacked with `dpkg -x`);
# - k8s.io/dynamic-resource-allocation at $DRA_REF (v0.36.2) from a clone of
#   kubernetes/dynamic-resource-allocation at $DRA_GIT (Debian has no package of it). Its
#   imports of github.com/google/cel-go are rewritten to cel.dev/cel-go, the path Debian's
#   cel-go and k8s.io/apiserver use (the same cel-go, renamed upstream).
# Writes $ORACLE/bin/dra-oracle and $ORACLE/provenance.txt.
# Env: KAPI (the test API server's scratch dir, fetched), ORACLE (scratch dir), DRA_GIT, DRA_REF.
set -eu
: "${KAPI:?set KAPI to the test API server's scratch dir (tests/kube-apiserver/fetch.sh)}"
: "${ORACLE:?set ORACLE to a scratch directory}"
: "${DRA_GIT:?set DRA_GIT to a git directory of kubernetes/dynamic-resource-allocation}"
DRA_REF=${DRA_REF:-v0.36.2}
HERE=$(cd "$(dirname "$0")" && pwd)
GOROOT="$KAPI/root/usr/lib/go-1.26"
[ -x "$GOROOT/bin/go" ] || { echo "build.sh: no Go toolchain in $GOROOT (run tests/kube-apiserver/fetch.sh)" >&2; exit 1; }
[ -e "$GOROOT/src" ] || ln -s ../../share/go-1.26/src "$GOROOT/src"

A="$ORACLE/apt"
mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/etc/sources.list.d" "$A/etc/preferences.d" "$ORACLE/debs" "$ORACLE/root"
cp "$KAPI/apt/etc/sources.list" "$A/etc/sources.list"
# The test API server's apt configuration (tests/debian-fetch.sh), moved to this directory.
sed "s#$KAPI/apt#$A#g" "$KAPI/apt/apt.conf" >"$A/apt.conf"
if ! ls "$ORACLE/debs"/golang-k8s-component-helpers-dev_*.deb >/dev/null 2>&1; then
  APT_CONFIG="$A/apt.conf" apt-get update -q >"$A/update.log" 2>&1
  (cd "$ORACLE/debs" && APT_CONFIG="$A/apt.conf" apt-get download -q golang-k8s-component-helpers-dev >/dev/null 2>"$A/download.log")
fi
for d in "$ORACLE/debs"/*.deb; do dpkg -x "$d" "$ORACLE/root"; done

SRC="$ORACLE/gopath/src"
rm -rf "$SRC/k8s.io/dynamic-resource-allocation" "$SRC/draoracle"
mkdir -p "$SRC/k8s.io/dynamic-resource-allocation" "$SRC/draoracle" "$ORACLE/gocache" "$ORACLE/bin"
git -C "$DRA_GIT" archive "$DRA_REF" | tar xf - -C "$SRC/k8s.io/dynamic-resource-allocation"
find "$SRC/k8s.io/dynamic-resource-allocation" -name '*.go' -exec sed -i 's#"github.com/google/cel-go/#"cel.dev/cel-go/#' {} +
cp "$HERE/main.go" "$SRC/draoracle/main.go"
export GOROOT GO111MODULE=off GOPATH="$ORACLE/gopath:$ORACLE/root/usr/share/gocode:$KAPI/root/usr/share/gocode" \
       GOCACHE="$ORACLE/gocache" GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GOTELEMETRY=off HOME="$ORACLE"
cd "$SRC/draoracle"
nice -n 10 "$GOROOT/bin/go" build -p "${JOBS:-2}" -trimpath -o "$ORACLE/bin/dra-oracle" .
{
  echo "allocator: k8s.io/dynamic-resource-allocation $DRA_REF $(git -C "$DRA_GIT" rev-list -n1 "$DRA_REF")"
  echo "go: $("$GOROOT/bin/go" version)"
  for d in "$ORACLE/debs"/*.deb; do echo "debian: $(dpkg-deb -f "$d" Package) $(dpkg-deb -f "$d" Version)"; done
  grep -E '^(golang-k8s-(api|apimachinery|apiserver)-dev|golang-cel-cel-go-dev) ' "$KAPI/versions.txt" | sed 's/^/debian: /'
} >"$ORACLE/provenance.txt"
cat "$ORACLE/provenance.txt"
