#!/usr/bin/env bash
# Resolve Pulsar's broker and its dependency tree from Maven Central into build/pulsar/lib (once; cached by a stamp
# that changes with pom.xml). Prints the directory.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
LIB="$ROOT/build/pulsar/lib"
STAMP="$LIB/.stamp"
WANT="$(sha256sum "$HERE/pom.xml" | cut -c1-16)"
mkdir -p "$ROOT/build/pulsar"
exec 9>"$ROOT/build/pulsar/.jars.lock"
flock 9  # one resolution at a time (test workers, several scripts)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  command -v mvn >/dev/null || { echo "jars.sh: need Maven (mvn) to resolve Pulsar's jars" >&2; exit 1; }
  rm -rf "$LIB"
  mvn -q -B -f "$HERE/pom.xml" package >&2
  echo "$WANT" > "$STAMP"
fi
echo "$LIB"
