# Sourced by each tests/NAME/build.sh: the Go toolchain tests/debian-fetch.sh unpacked under
# $DEST/root, and an environment that builds in GOPATH mode against the unpacked sources only
# (no module proxy, no network, nothing installed). Sets GOROOT and GO; needs DEST.
: "${DEST:?set DEST to a scratch directory}"
GOROOT="$DEST/root/usr/lib/go-1.26"
GO="$GOROOT/bin/go"
[ -x "$GO" ] || { echo "build.sh: no Go toolchain in $GOROOT (run tests/debian-fetch.sh)" >&2; exit 1; }
# golang-1.26-src's files lie in /usr/share/go-1.26/src; the package's own install links them.
[ -e "$GOROOT/src" ] || ln -s ../../share/go-1.26/src "$GOROOT/src"
mkdir -p "$DEST/gocache" "$DEST/bin"
export GOROOT GO111MODULE=off GOPATH="$DEST/gopath:$DEST/root/usr/share/gocode" GOCACHE="$DEST/gocache" \
       GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 GOTELEMETRY=off HOME="$DEST"
