#!/usr/bin/env bash
# The user-level benchmark, one command (BENCHMARKS.md, "Where users feel it"):
# builds the daemon and the relay (build-bench/, Release), installs the pinned
# npm software here if needed (package-lock.json), and runs bench.mjs.
#
# usage: bench/users/run.sh [--rounds N] [--only a,b] [--smoke]
# Results: build-bench/users-results/<time>/ (results.jsonl, report.md);
# the report is printed too. --smoke: correctness only, about 30 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bd=$root/build-bench
cmake -S "$root" -B "$bd" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-g >/dev/null
cmake --build "$bd" -j2 --target stdio_bus bench_relay >/dev/null
if [ ! -f "$here/node_modules/.package-lock.json" ] ||
   [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
out=$bd/users-results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
echo "bench/users: results in $out" >&2
node "$here/bench.mjs" --daemon "$bd/stdio_bus" --relay "$bd/bench/bench_relay" --out "$out" "$@"
