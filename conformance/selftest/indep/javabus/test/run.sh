#!/bin/bash
# Builds javabus and runs the end-to-end test suite. Exit 0 iff all tests pass.
set -euo pipefail
HERE="$(dirname "$(readlink -f "$0")")"
ROOT="$(dirname "$HERE")"
"$ROOT/build.sh" >/dev/null
rm -rf "$HERE/classes"
mkdir -p "$HERE/classes"
javac -encoding UTF-8 --release 17 -d "$HERE/classes" "$HERE/BusTest.java"
chmod +x "$HERE/worker.pl"
exec java -cp "$HERE/classes" BusTest "$ROOT" "$@"
