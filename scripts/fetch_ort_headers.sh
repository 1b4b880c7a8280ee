#!/bin/sh
# Fetch the ONNX Runtime C/C++ headers (API 21) that the native kernel library compiles
# against, from Debian's libonnxruntime-dev package, into a project-local directory.
# The pip onnxruntime wheel ships no headers; a library built against API 21 loads in
# every onnxruntime from 1.21 on. Touches neither /etc/apt, /var/lib/apt nor dpkg's database.
#
# usage: scripts/fetch_ort_headers.sh [DEST]   (default: third_party/onnxruntime)
# result: DEST/include/onnxruntime_*.h, DEST/VERSION, DEST/COPYRIGHT.debian
set -eu

DEST=${1:-$(dirname "$0")/../third_party/onnxruntime}
PKG=libonnxruntime-dev
VERSION=1.21.0+dfsg-1
SUITE=trixie
# sha256 of the amd64 .deb (85340 bytes); the headers inside are architecture-independent.
SHA256=14f7d959d5deacbcf1504830d4189f91fc67382b399ed9ae9d3aa9c4050ced08
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

if [ -f "$DEST/include/onnxruntime_c_api.h" ]; then
  echo "ONNX Runtime headers already in $DEST"
  exit 0
fi
for tool in apt-get dpkg-deb sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || { echo "fetch_ort_headers: $tool not found" >&2; exit 1; }
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/lists/partial" "$WORK/cache/archives/partial"
# The Debian mirror is the one this machine's apt already uses (no host is written here).
MIRROR=$(
  { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | sed 's/^URIs:[[:space:]]*//' | tr ' ' '\n'
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | sed 's/\[[^]]*\]//' \
      | awk '{print $2}'
  } | grep -v -e security -e '^$' | head -n 1
)
[ -n "$MIRROR" ] || { echo "fetch_ort_headers: no Debian mirror in the apt sources" >&2; exit 1; }
echo "deb [arch=amd64 signed-by=$KEYRING] $MIRROR $SUITE main" > "$WORK/sources.list"
set -- -o Dir::Etc::SourceList="$WORK/sources.list" -o Dir::Etc::SourceParts=/dev/null \
       -o Dir::State::Lists="$WORK/lists" -o Dir::Cache="$WORK/cache" \
       -o APT::Architecture=amd64 -o APT::Sandbox::User="$(id -un)"
apt-get "$@" -qq update
(cd "$WORK" && apt-get "$@" -qq download "$PKG=$VERSION")
DEB=$(ls "$WORK"/"$PKG"_*.deb)
echo "$SHA256  $DEB" | sha256sum -c - >/dev/null || {
  echo "fetch_ort_headers: checksum mismatch for $DEB" >&2; exit 1; }
dpkg-deb -x "$DEB" "$WORK/root"

# Copy into a temporary sibling, then rename: a reader never sees half a directory.
mkdir -p "$(dirname "$DEST")"
STAGE=$(mktemp -d "$(dirname "$DEST")/.onnxruntime.XXXXXX")
mkdir -p "$STAGE/include"
cp "$WORK"/root/usr/include/onnxruntime/onnxruntime_*.h "$STAGE/include/"
cp "$WORK/root/usr/share/doc/$PKG/copyright" "$STAGE/COPYRIGHT.debian"
echo "$PKG $VERSION" > "$STAGE/VERSION"
if ! mv -T "$STAGE" "$DEST" 2>/dev/null; then
  rm -rf "$STAGE"   # another run won the race; its copy is identical
fi
grep -m1 '^#define ORT_API_VERSION' "$DEST/include/onnxruntime_c_api.h"
