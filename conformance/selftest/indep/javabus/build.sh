#!/bin/bash
# Builds javabus into ./classes. Offline, idempotent (always a clean rebuild).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
rm -rf classes
mkdir -p classes
# The only expected warnings are about sun.misc.Signal (used for SIGTERM/SIGINT handling).
if ! out=$(javac -encoding UTF-8 --release 17 -d classes $(find src -name '*.java' | sort) 2>&1); then
  printf '%s\n' "$out" >&2
  exit 1
fi
test -f classes/javabus/Main.class
echo "build ok: $(pwd)/classes"
