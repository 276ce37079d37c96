#!/bin/sh
# Fetch what a Go program of the tests is built from, without installing anything: the Debian
# packages of its packages.txt (Debian's Go toolchain, golang-1.26-go and golang-1.26-src, and
# the Go sources it imports, golang-*-dev; for the test API server also etcd-server), downloaded
# with `apt-get download` through a private apt configuration (bookworm + trixie + sid; /etc/apt
# and the system are untouched) and unpacked with `dpkg -x` under $DEST/root. One script for the
# test API server (tests/kube-apiserver), the template oracle (tests/sprig-oracle) and the
# scheduling oracle (tests/scheduling-oracle); the Rust side runs it (tests/go_build.rs).
#
# A package file another of them already fetched (a sibling of $DEST: target/*/debs) is copied
# from there, so the Go toolchain is downloaded once. After the download everything is offline.
#
# packages.txt pins the versions each was built and tested with. sid moves on and its mirror
# keeps only the newest version: a pinned version that is gone is replaced by the one sid has
# now, said on stderr and recorded in $DEST/versions.txt; a package sid no longer has at all is a
# clear error naming it and the packages.txt that pins it.
#
# Env: DEST (scratch dir, e.g. target/kube-apiserver), PACKAGES (its packages.txt),
# DEBIAN_MIRROR (default: the mirror /etc/apt already uses).
set -eu
: "${DEST:?set DEST to a scratch directory}"
: "${PACKAGES:?set PACKAGES to a packages.txt}"
[ -f "$PACKAGES" ] || { echo "debian-fetch.sh: no file $PACKAGES" >&2; exit 1; }
PACKAGES=$(cd "$(dirname "$PACKAGES")" && pwd)/$(basename "$PACKAGES")
A="$DEST/apt"
mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/etc/sources.list.d" "$A/etc/preferences.d"
K=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$K" ] || { echo "debian-fetch.sh: $K missing (package debian-archive-keyring)" >&2; exit 1; }
M=${DEBIAN_MIRROR:-$(cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | grep -v '^[[:space:]]*#' \
  | grep -o -E 'https?://[^ ]+/debian/?( |$)' | head -1 | tr -d ' ')}
[ -n "$M" ] || { echo "debian-fetch.sh: no Debian mirror found in /etc/apt; set DEBIAN_MIRROR" >&2; exit 1; }
for s in bookworm trixie sid; do echo "deb [signed-by=$K] $M $s main"; done >"$A/etc/sources.list"
cat >"$A/apt.conf" <<CONF
Dir::Etc::SourceList "$A/etc/sources.list";
Dir::Etc::SourceParts "$A/etc/sources.list.d";
Dir::Etc::PreferencesParts "$A/etc/preferences.d";
Dir::State::Lists "$A/lists";
Dir::Cache "$A/cache";
APT::Default-Release "sid";
CONF
export APT_CONFIG="$A/apt.conf"
apt-get update -q >"$A/update.log" 2>&1 || { echo "debian-fetch.sh: apt-get update failed:" >&2; tail -5 "$A/update.log" >&2; exit 1; }

mkdir -p "$DEST/debs"
pinned=$(grep -v '^[[:space:]]*\(#\|$\)' "$PACKAGES")
# One look-up for all: the versions each package has in the configured suites.
apt-cache madison $(echo "$pinned" | awk '{print $1}') 2>/dev/null \
  | awk -F'|' '{gsub(/ /,"",$1); gsub(/ /,"",$2); print $1, $2, ($3 ~ / sid\//) ? "sid" : "other"}' >"$A/madison.txt"
echo "$pinned" | while read -r name version; do
  if grep -qx "$name $version [a-z]*" "$A/madison.txt"; then
    echo "$name $version"
    continue
  fi
  have=$(awk -v n="$name" '$1 == n && $3 == "sid" {print $2; exit}' "$A/madison.txt")
  if [ -z "$have" ]; then
    echo "debian-fetch.sh: Debian sid no longer has package $name (pinned $version in $PACKAGES)" >&2
    exit 1
  fi
  echo "debian-fetch.sh: $name $version is gone from the mirror; using sid's $have" >&2
  echo "$name $have"
done >"$DEST/versions.txt.new"
cd "$DEST/debs"
want=""
while read -r name version; do
  f=$(ls "${name}_"*.deb 2>/dev/null | head -1 || true)
  [ -n "$f" ] && dpkg-deb -f "$f" Version | grep -qx "$version" && continue
  rm -f "${name}_"*.deb
  found=""
  for s in "$DEST"/../*/debs/"${name}"_*.deb; do
    [ -f "$s" ] && dpkg-deb -f "$s" Version | grep -qx "$version" || continue
    cp "$s" . && found=1 && break
  done
  [ -n "$found" ] || want="$want $name=$version"
done <"$DEST/versions.txt.new"
if [ -n "$want" ]; then
  # One apt-get call for all: each call loads sid's package lists again.
  apt-get download -q $want >/dev/null 2>"$A/download.log" \
    || { echo "debian-fetch.sh: could not download:$want:" >&2; grep -E '^(E|W):' "$A/download.log" >&2; exit 1; }
fi
# Only this list's packages are unpacked: a file left from an older list stays out of root.
rm -rf "$DEST/root"; mkdir -p "$DEST/root"
while read -r name version; do
  dpkg -x "$(ls "${name}_"*.deb | head -1)" "$DEST/root"
done <"$DEST/versions.txt.new"
mv "$DEST/versions.txt.new" "$DEST/versions.txt"
echo "fetched $(wc -l <"$DEST/versions.txt") packages ($(du -sh "$DEST/debs" | cut -f1)) into $DEST/root"
