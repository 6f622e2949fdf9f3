#!/usr/bin/env bash
# Resolve Pulsar's broker and its dependency tree from Maven Central into a git-ignored lib directory (once; cached
# by a stamp that changes with pom.xml and the release). Prints the directory.
# PULSAR_VERSION (default 4.0.7, pom.xml's pulsar.version) picks the release: 4.0.7's jars go to build/pulsar/lib,
# any other release's to build/pulsar/lib-<release> (e.g. PULSAR_VERSION=3.0.7: build/pulsar/lib-3.0.7), so
# switching releases keeps each one's jars.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VERSION="${PULSAR_VERSION:-4.0.7}"
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[A-Za-z0-9.]+)?$ ]] || { echo "jars.sh: PULSAR_VERSION=$VERSION is no release" >&2; exit 2; }
LIB="$ROOT/build/pulsar/lib"; [ "$VERSION" = 4.0.7 ] || LIB="$ROOT/build/pulsar/lib-$VERSION"
STAMP="$LIB/.stamp"
WANT="$(sha256sum "$HERE/pom.xml" | cut -c1-16)"; [ "$VERSION" = 4.0.7 ] || WANT="$WANT-$VERSION"
mkdir -p "$ROOT/build/pulsar"
exec 9>"$ROOT/build/pulsar/.jars.lock"
flock 9  # one resolution at a time (test workers, several scripts)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  command -v mvn >/dev/null || { echo "jars.sh: need Maven (mvn) to resolve Pulsar's jars" >&2; exit 1; }
  rm -rf "$LIB"
  mvn -q -B -f "$HERE/pom.xml" -Dpulsar.version="$VERSION" -Djars.dir="$LIB" package >&2
  echo "$WANT" > "$STAMP"
fi
echo "$LIB"
