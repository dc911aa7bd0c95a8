#!/usr/bin/env bash
# Instructions per routed message (callgrind Ir of the daemon alone, the
# difference of a 12,000- and a 2,000-message run, so start-up cancels out),
# P = 100 B, stdio, W = 1 and 64, S = 0 and 1000: the figure that a change of
# the per-message path must keep (BENCHMARKS.md). Deterministic for one
# binary, so two builds compare in one run:
#
# usage: bench/ir.sh [DAEMON ...]    (default: build-bench/stdio_bus, built here)
set -euo pipefail
cd "$(dirname "$0")/.."
bd=build-bench
cmake -S . -B "$bd" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-g >/dev/null
cmake --build "$bd" -j2 --target stdio_bus bench_echo bench_load >/dev/null
[ $# -gt 0 ] || set -- "$bd/stdio_bus"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { # $1 daemon, $2 W, $3 S, $4 messages
  local cg=$tmp/cg.out
  "$bd/bench/bench_load" --worker "$bd/bench/bench_echo" --server "$1" --mode stdio \
    --inflight "$2" --payload 100 --messages "$4" --sessions "$3" --timeout 300 \
    --exit-timeout 300 --wrap "valgrind --tool=callgrind --callgrind-out-file=$cg" \
    2>/dev/null | grep -q 'status=ok' || { echo "ir.sh: run failed: $*" >&2; exit 1; }
  awk '/^totals:/{print $2}' "$cg"
}
for daemon in "$@"; do
  for w in 1 64; do
    for s in 0 1000; do
      small=$(ir "$daemon" $w $s 2000)
      large=$(ir "$daemon" $w $s 12000)
      echo "ir daemon=$daemon inflight=$w sessions=$s ir_per_message=$(( (large - small) / 10000 ))"
    done
  done
done
