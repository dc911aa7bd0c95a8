#!/usr/bin/env bash
# Runs one fuzz target under AFL++ for a fixed time.
#
#   ci/fuzz.sh TARGET SECONDS      e.g. ci/fuzz.sh fields_fuzzer 60
#
# Builds build-afl/TARGET with afl-clang-fast (-fsanitize=fuzzer plus ASan
# and UBSan) from fuzz/TARGET.c and the core (src/*/*.c: all but main.c) when it is
# missing or older than its sources, fuzzes from
# fuzz/corpus/TARGET (with fuzz/TARGET.dict if there is one) into
# build-afl/out/TARGET, then prints execs/sec, total execs, edges and
# crashes. Exits 1 if AFL++ saved any crash (hangs are only reported: on a
# busy CI machine a timeout is not yet a bug). Copy the inputs from
# build-afl/out/TARGET/default/crashes into fuzz/regressions/TARGET once
# fixed, so the replay test keeps them fixed.
#
# Environment: SB_FUZZ_CC (default afl-clang-fast), AFL_FUZZ (default afl-fuzz).
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 TARGET SECONDS" >&2
    exit 2
fi
target=$1
seconds=$2
case $target in
    *_fuzzer) ;;
    *) echo "fuzz.sh: target must be named <module>_fuzzer" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
harness=$root/fuzz/$target.c
corpus=$root/fuzz/corpus/$target
dict=$root/fuzz/$target.dict
build=$root/build-afl
bin=$build/$target
out=$build/out/$target
cc=${SB_FUZZ_CC:-afl-clang-fast}
fuzz=${AFL_FUZZ:-afl-fuzz}

[ -f "$harness" ] || { echo "fuzz.sh: $harness not found" >&2; exit 2; }
core=()
floors=(base os cfg route bus daemon) # src/'s folders, lowest first (CMakeLists.txt)
includes=()
for floor in "${floors[@]}"; do
    core+=("$root"/src/"$floor"/*.c)
    includes+=(-I"$root/src/$floor")
done
[ -d "$corpus" ] || { echo "fuzz.sh: no seed corpus $corpus" >&2; exit 2; }

# Rebuild when the binary is missing or any source is newer.
rebuild=0
if [ ! -x "$bin" ]; then
    rebuild=1
else
    for f in "$harness" "${core[@]}" "$root"/src/*/*.h; do
        if [ "$f" -nt "$bin" ]; then rebuild=1; fi
    done
fi
if [ $rebuild -eq 1 ]; then
    mkdir -p "$build"
    # shellcheck disable=SC2046 # pkg-config output is meant to split
    AFL_QUIET=1 "$cc" -std=c11 -D_GNU_SOURCE \
        -DSB_VERSION='"fuzz"' -g -O1 -fno-omit-frame-pointer \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        "${includes[@]}" $(pkg-config --cflags libcjson) \
        "$harness" "${core[@]}" $(pkg-config --libs libcjson) -o "$bin"
fi

# CI runs as root on machines we do not tune: no CPU governor check, no
# core_pattern check, plain line output instead of the curses screen.
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
export AFL_NO_AFFINITY=1
# ASan needs these to report through abort() so AFL++ sees the crash.
export ASAN_OPTIONS="abort_on_error=1:symbolize=0:detect_leaks=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:symbolize=0"

rm -rf "$out"
mkdir -p "$out"
set -- -i "$corpus" -o "$out" -V "$seconds"
if [ -f "$dict" ]; then
    set -- "$@" -x "$dict"
fi
"$fuzz" "$@" -- "$bin" >"$out.log" 2>&1 || {
    echo "fuzz.sh: afl-fuzz failed; the last lines of $out.log:" >&2
    tail -n 30 "$out.log" >&2
    exit 1
}

stats=$out/default/fuzzer_stats
[ -f "$stats" ] || { echo "fuzz.sh: no $stats" >&2; exit 1; }
stat_of() {
    sed -n "s/^$1 *: *//p" "$stats"
}
crashes=$(stat_of saved_crashes)
[ -n "$crashes" ] || crashes=$(stat_of unique_crashes)
hangs=$(stat_of saved_hangs)
[ -n "$hangs" ] || hangs=$(stat_of unique_hangs)
echo "target:      $target (${seconds}s)"
echo "execs/sec:   $(stat_of execs_per_sec)"
echo "total execs: $(stat_of execs_done)"
echo "edges:       $(stat_of edges_found) of $(stat_of total_edges)"
echo "corpus:      $(stat_of corpus_count)"
echo "crashes:     $crashes"
echo "hangs:       $hangs"
if [ "${crashes:-0}" != 0 ]; then
    echo "fuzz.sh: see $out/default/crashes" >&2
    exit 1
fi
