#!/bin/sh
# Fetch what the Go template oracle is built from, without installing anything: Debian's Go
# toolchain and the Go sources of Sprig and its dependencies (packages.txt), downloaded with
# `apt-get download` through a private apt configuration (trixie + sid; /etc/apt and the system
# are untouched) and unpacked with `dpkg -x` under $ORACLE/root. A package file the test API
# server already fetched (target/kube-apiserver/debs: the Go toolchain) is taken from there.
#
# packages.txt pins the versions this was built and tested with; a pinned version gone from sid
# is replaced by sid's current one (said on stderr, recorded in $ORACLE/versions.txt); a package
# sid no longer has is a clear error naming it.
#
# Env: ORACLE (scratch dir, e.g. target/sprig-oracle), DEBIAN_MIRROR (default: the mirror
# /etc/apt already uses).
set -eu
: "${ORACLE:?set ORACLE to a scratch directory}"
HERE=$(cd "$(dirname "$0")" && pwd)
A="$ORACLE/apt"
mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/etc/sources.list.d" "$A/etc/preferences.d"
K=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$K" ] || { echo "fetch.sh: $K missing (package debian-archive-keyring)" >&2; exit 1; }
M=${DEBIAN_MIRROR:-$(cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | grep -v '^[[:space:]]*#' \
  | grep -o -E 'https?://[^ ]+/debian/?( |$)' | head -1 | tr -d ' ')}
[ -n "$M" ] || { echo "fetch.sh: no Debian mirror found in /etc/apt; set DEBIAN_MIRROR" >&2; exit 1; }
for s in trixie sid; do echo "deb [signed-by=$K] $M $s main"; done >"$A/etc/sources.list"
cat >"$A/apt.conf" <<CONF
Dir::Etc::SourceList "$A/etc/sources.list";
Dir::Etc::SourceParts "$A/etc/sources.list.d";
Dir::Etc::PreferencesParts "$A/etc/preferences.d";
Dir::State::Lists "$A/lists";
Dir::Cache "$A/cache";
APT::Default-Release "sid";
CONF
export APT_CONFIG="$A/apt.conf"
apt-get update -q >"$A/update.log" 2>&1 || { echo "fetch.sh: apt-get update failed:" >&2; tail -5 "$A/update.log" >&2; exit 1; }

mkdir -p "$ORACLE/debs"
pinned=$(grep -v '^[[:space:]]*\(#\|$\)' "$HERE/packages.txt")
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
    echo "fetch.sh: Debian sid no longer has package $name (pinned $version in tests/sprig-oracle/packages.txt)" >&2
    exit 1
  fi
  echo "fetch.sh: $name $version is gone from the mirror; using sid's $have" >&2
  echo "$name $have"
done >"$ORACLE/versions.txt.new"
cd "$ORACLE/debs"
shared="$ORACLE/../kube-apiserver/debs"
want=""
while read -r name version; do
  f=$(ls "${name}_"*.deb 2>/dev/null | head -1 || true)
  [ -n "$f" ] && dpkg-deb -f "$f" Version | grep -qx "$version" && continue
  rm -f "${name}_"*.deb
  s=$(ls "$shared/${name}_"*.deb 2>/dev/null | head -1 || true)
  if [ -n "$s" ] && dpkg-deb -f "$s" Version | grep -qx "$version"; then
    cp "$s" .
    continue
  fi
  want="$want $name=$version"
done <"$ORACLE/versions.txt.new"
if [ -n "$want" ]; then
  # One apt-get call for all: each call loads sid's package lists again.
  apt-get download -q $want >/dev/null 2>"$A/download.log" \
    || { echo "fetch.sh: could not download:$want:" >&2; grep -E '^(E|W):' "$A/download.log" >&2; exit 1; }
fi
rm -rf "$ORACLE/root"; mkdir -p "$ORACLE/root"
for d in *.deb; do dpkg -x "$d" "$ORACLE/root"; done
mv "$ORACLE/versions.txt.new" "$ORACLE/versions.txt"
echo "fetched $(wc -l <"$ORACLE/versions.txt") packages ($(du -sh "$ORACLE/debs" | cut -f1)) into $ORACLE/root"
