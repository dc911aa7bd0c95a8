#!/usr/bin/env bash
# The stdio Bus benchmark matrix (BENCHMARKS.md): the daemon against
# bench_relay (the no-parse limit of the design), interleaved in rounds.
#
# usage: bench/run.sh [--quick] [--rounds N] [--no-build] [--no-write]
#   --quick     a one-minute smoke: one round, a tenth of the messages,
#               small callgrind counts; BENCHMARKS.md is left alone
#   --rounds N  rounds of the throughput/latency matrix (3)
#   --no-build  use the binaries already in build-bench/
#   --no-write  leave BENCHMARKS.md alone (the report is still written)
#
# Everything lands in build-bench/bench-results/<time>/: raw.txt (one
# key=value line per run), report.md, and the logs. Benchmarks report;
# they never fail on speed. The exit status is 1 only when some run lost,
# duplicated, misrouted or damaged an answer (or could not run at all).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0 rounds=3 build=1 write=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 rounds=1 write=0 ;;
    --rounds) rounds=$2; shift ;;
    --no-build) build=0 ;;
    --no-write) write=0 ;;
    *) sed -n '2,15p' "$0"; exit 2 ;;
  esac
  shift
done

bd=$root/build-bench
if [ $build = 1 ]; then
  # Release as the daemon ships, plus -g so callgrind_annotate can name lines.
  cmake -S . -B "$bd" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-g >/dev/null || exit 1
  cmake --build "$bd" -j2 --target stdio_bus bench_echo bench_relay bench_load \
    bench_malloc_count >/dev/null || exit 1
fi
daemon=$bd/stdio_bus relay=$bd/bench/bench_relay load=$bd/bench/bench_load
echo_worker=$bd/bench/bench_echo shim=$bd/bench/libbench_malloc_count.so
for f in "$daemon" "$relay" "$load" "$echo_worker" "$shim"; do
  [ -e "$f" ] || { echo "run.sh: $f is missing (build first)" >&2; exit 1; }
done

out=$bd/bench-results/$(date -u +%Y%m%dT%H%M%SZ)$([ $quick = 1 ] && echo -quick)
mkdir -p "$out"
raw=$out/raw.txt log=$out/servers.log
: >"$raw"
failures=0
started=$(date +%s)

facts() {
  echo "facts date=$(date -u +%Y-%m-%dT%H:%MZ) commit=$(git rev-parse --short HEAD 2>/dev/null || echo ?)" \
       "cpus=$(nproc) cpu=\"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')\"" \
       "kernel=$(uname -r) mem_mib=$(free -m | awk '/^Mem:/{print $2}')" \
       "load_$1=\"$(cut -d' ' -f1-3 /proc/loadavg)\" quick=$quick rounds=$rounds"
}
facts start >>"$raw"

# One bench_load run; its result line goes to raw.txt with the tags given.
# $1: tags ("exp=... round=... server=..."), the rest: bench_load options.
run() {
  local tags=$1; shift
  local line
  line=$("$load" --worker "$echo_worker" --tag "$tags" "$@" 2>>"$log" | grep '^bench_load ')
  if [ -z "$line" ]; then
    echo "bench_load could not run: $tags $*" >&2
    echo "bench_load status=ERROR $tags" >>"$raw"
    failures=$((failures + 1))
    return
  fi
  echo "$line" >>"$raw"
  case "$line" in *status=ok*) ;; *) failures=$((failures + 1)); echo "FAILED: $line" >&2 ;; esac
}

# Messages per run: one to three seconds of the slower server on this machine.
messages() { # $1 W, $2 P
  local m
  case "$1:$2" in
    1:100) m=60000 ;;    64:100) m=600000 ;;
    1:4096) m=40000 ;;   64:4096) m=120000 ;;
    1:65536) m=8000 ;;   64:65536) m=16000 ;;
    1:524288) m=1200 ;;  64:524288) m=2000 ;;
    *) m=1000 ;;
  esac
  [ $quick = 1 ] && m=$((m / 10))
  echo $m
}

server_path() { [ "$1" = daemon ] && echo "$daemon" || echo "$relay"; }

# ---- 1. throughput and latency matrix, daemon and relay interleaved --------
payloads="100 4096 65536 524288"
echo "== matrix: $rounds round(s)"
for round in $(seq 1 "$rounds"); do
  order="relay daemon"
  [ $((round % 2)) = 0 ] && order="daemon relay" # cancel drift within a round
  for mode in stdio unix; do
    clients=1
    [ $mode = unix ] && clients=8
    for w in 1 64; do
      for p in $payloads; do
        m=$(messages $w $p)
        for server in $order; do
          # The relay never reads sessionIds: its S=0 and S=1000 runs would
          # move the same bytes (P is the line length), so it runs once.
          sessions="0 1000"
          [ $server = relay ] && sessions=0
          for s in $sessions; do
            run "exp=matrix round=$round server=$server" --server "$(server_path $server)" \
              --mode $mode --clients $clients --inflight $w --payload $p --messages $m \
              --sessions $s
          done
        done
      done
    done
  done
  echo "   round $round done ($(($(date +%s) - started)) s)"
done

# ---- 2. payloads up to max_input_buffer, many in flight ---------------------
echo "== limit: lines of exactly max_input_buffer"
limit=1048576 m=400
[ $quick = 1 ] && m=80
for server in daemon relay; do
  run "exp=limit server=$server" --server "$(server_path $server)" --mode stdio --inflight 64 \
    --payload $limit --max-input-buffer $limit --messages $m --sessions 1000
  run "exp=limit server=$server" --server "$(server_path $server)" --mode unix --clients 8 \
    --inflight 64 --payload $limit --max-input-buffer $limit --messages $m --sessions 1000
done

# ---- 3. instructions per message (callgrind), start-up cancelled out --------
small=2000 large=12000
[ $quick = 1 ] && small=200 large=1200
echo "== callgrind: $small and $large messages"
for w in 1 64; do
  # S=1 against S=1000: the same line shapes, only the table size differs.
  for case_ in "relay 0" "daemon 0" "daemon 1" "daemon 1000"; do
    set -- $case_
    server=$1 s=$2
    for m in $small $large; do
      cg=$out/callgrind.$server.w$w.s$s.m$m.out
      run "exp=callgrind server=$server cg_messages=$m" --server "$(server_path $server)" \
        --mode stdio --inflight $w --payload 100 --messages $m --sessions $s --timeout 300 \
        --exit-timeout 300 --wrap "valgrind --tool=callgrind --callgrind-out-file=$cg"
      ir=$(awk '/^totals:/{print $2}' "$cg" 2>/dev/null)
      echo "callgrind server=$server inflight=$w sessions=$s messages=$m ir=${ir:-0} file=$(basename "$cg")" >>"$raw"
    done
  done
done

# ---- 4. allocations per message (LD_PRELOAD counting shim) ------------------
echo "== allocations: $small and $large messages"
for p in 100 4096 65536; do
  for w in 1 64; do
    for server in daemon relay; do
      for m in $small $large; do
        counts=$out/malloc.$server.p$p.w$w.m$m.txt
        rm -f "$counts"
        run "exp=alloc server=$server" --server "$(server_path $server)" --mode stdio \
          --inflight $w --payload $p --messages $m --sessions 1000 \
          --wrap "env LD_PRELOAD=$shim BENCH_MALLOC_COUNT_OUT=$counts"
        c=$(grep -m1 '^malloc_count' "$counts" 2>/dev/null | cut -d' ' -f3-)
        echo "alloc server=$server payload=$p inflight=$w messages=$m ${c:-malloc=-1}" >>"$raw"
      done
    done
  done
done

# ---- 5. resident memory: idle, 1,000 idle connections, 1,000 live sessions ---
echo "== memory"
for server in daemon relay; do
  run "exp=rss-idle server=$server" --server "$(server_path $server)" --mode unix --clients 1 \
    --messages 0 --idle-connections 1000 --idle-settle 3
  run "exp=rss-sessions server=$server" --server "$(server_path $server)" --mode unix \
    --clients 1 --inflight 64 --messages 1000 --sessions 1000
done

facts end >>"$raw"
elapsed=$(($(date +%s) - started))
echo "elapsed seconds=$elapsed" >>"$raw"

report_args=("$raw" "$out/report.md")
[ $write = 1 ] && report_args+=(--benchmarks "$root/BENCHMARKS.md")
/usr/bin/python3 "$root/bench/report.py" "${report_args[@]}" || failures=$((failures + 1))
echo "== done in ${elapsed} s: $out/report.md$([ $write = 1 ] && echo ', BENCHMARKS.md updated')"
[ $failures = 0 ] || { echo "run.sh: $failures run(s) with problems (see $raw)" >&2; exit 1; }
exit 0
