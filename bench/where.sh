#!/usr/bin/env bash
# Where the cost of a routed message goes (BENCHMARKS.md, "Where the cost
# goes"): at W = 1, P = 100 B, S = 0, stdio, for our daemon and for the
# no-parse relay, and for the echo worker reached directly (no process in
# between), each measured as the difference of a large and a small run so
# start-up and shutdown cancel:
#   - callgrind Ir by function (the server process alone);
#   - syscalls by name (strace -c, the server process alone, no -f);
#   - user and system CPU time, context switches (perf stat; the server);
#   - messages/s and p50 latency without any tool attached.
# Counts are deterministic enough to compare across runs; times are not
# (the machine is shared): read them against each other, from one run.
#
# usage: bench/where.sh [OUTDIR]   (default build-bench/where-<time>); prints the report
set -euo pipefail
cd "$(dirname "$0")/.."
bd=build-bench
cmake -S . -B "$bd" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-g >/dev/null
cmake --build "$bd" -j2 --target stdio_bus bench_relay bench_echo bench_load >/dev/null
out=${1:-$bd/where-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# the worker as the server: what the client sees when it spawns the worker itself
printf '#!/bin/sh\nexec %s\n' "$PWD/$bd/bench/bench_echo" >"$out/direct.sh"
chmod +x "$out/direct.sh"
declare -A server=([daemon]=$bd/stdio_bus [relay]=$bd/bench/bench_relay [direct]=$out/direct.sh)

load() { # $1 server name, $2 messages, $3 wrap (may be empty); the result line
  local wrap=()
  [ -z "$3" ] || wrap=(--wrap "$3")
  "$bd/bench/bench_load" --worker "$PWD/$bd/bench/bench_echo" --server "${server[$1]}" --mode stdio \
    --inflight 1 --payload 100 --messages "$2" --sessions 0 --timeout 300 --exit-timeout 300 "${wrap[@]}" \
    2>/dev/null | grep 'status=' || { echo "where.sh: run failed: $*" >&2; exit 1; }
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/load.txt"
for s in daemon relay direct; do
  for m in 2000 12000; do
    [ "$s" = direct ] || load $s $m "valgrind --tool=callgrind --callgrind-out-file=$out/cg.$s.$m.out" >"$out/cg.$s.$m.line"
    load $s $m "strace -c -o $out/strace.$s.$m.txt" >"$out/strace.$s.$m.line"
  done
  for m in 5000 25000; do
    load $s $m "perf stat -i -e task-clock,context-switches,cpu-migrations -o $out/perf.$s.$m.txt" >"$out/perf.$s.$m.line"
  done
done
for round in 1 2 3; do # interleaved, no tool attached
  for s in direct relay daemon; do load $s 20000 "" | sed "s/^/round=$round who=$s /" >>"$out/plain.lines"; done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/load.txt"
for m in 2000 12000; do
  for s in daemon relay; do callgrind_annotate --auto=no --inclusive=no --threshold=100 "$out/cg.$s.$m.out" >"$out/cg.$s.$m.txt"; done
done
/usr/bin/python3 bench/where.py "$out" | tee "$out/report.md"
