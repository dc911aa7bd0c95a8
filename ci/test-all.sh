#!/usr/bin/env bash
# Every test: set up, check the C formatting (ci/format-check.sh), then
#   1. build with -Werror and run every ctest label (unit, fuzz replays, mocks,
#      e2e, valgrind (e2e and the suite), conformance, the whole bite map, the foreign daemon and
#      its defects) but three that repeat others: the per-area split of the suite
#      (section-*), the fast part of the bite map (bite-fast) and the worker
#      suite's catches (worker-catches, run in stage 2);
#   2. build with ASan+UBSan and run unit, fuzz replays, e2e, the conformance
#      suite (once) and the worker suite again: any sanitizer report fails the run;
#   3. a short fuzzing smoke of every fuzz target (ci/fuzz.sh), if AFL++ is here.
# Both ctest runs take -j$(nproc)+2: the heavy tests (the suite and its
# self-tests, the bite map, the foreign and independent daemons, MCP and ACP
# interop, the packages, ci-example) each hold the lock of one of three lanes
# (cmake/Tests.cmake), so three run at once at most, the costliest first; they
# mostly wait on the software they judge, and their verdicts do not depend on
# its pace (issue 37). The light unlocked tests (unit, fuzz replays, mocks,
# e2e, valgrind, interop.bus, bench smoke) run in the slots left over.
# Extra arguments go to both ctest runs (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh
jobs=$(nproc)
ctest_jobs=$((jobs + 2))

echo "== format (ci/format-check.sh)"
ci/format-check.sh

echo "== build (Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSB_WERROR=ON >/dev/null
cmake --build build -j"$jobs"

echo "== build (ASan+UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSB_WERROR=ON -DSB_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"

if [ -x ci/fuzz.sh ] && command -v afl-clang-fast >/dev/null; then
  echo "== fuzz smoke"
  # one target per core at once: each build and afl-fuzz use one core
  for target in fuzz/*_fuzzer.c; do basename "$target" .c; done |
    xargs -P "$jobs" -I{} ci/fuzz.sh {} "${SB_FUZZ_SMOKE_SECONDS:-20}"
fi

echo "== tests under ASan+UBSan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# a failure prints, last, the lines that say why (ci/failure-digest.sh)
run_ctest() {
  local log=$1
  shift
  local rc=0
  ctest --output-on-failure "$@" 2>&1 | tee "$log" || rc=$?
  [ "$rc" -eq 0 ] || { "$root/ci/failure-digest.sh" "$log"; exit "$rc"; }
}
root=$PWD
(cd build-asan && run_ctest ctest.log -j"$ctest_jobs" -L 'unit|fuzz|e2e|conformance|worker-suite|worker-catches' "$@")
unset ASAN_OPTIONS UBSAN_OPTIONS

echo "== tests"
cd build
# -LE section-: the per-area ctests (section-routing...) re-run, split by area, the
# suite that `conformance` has just run whole (~145 s); run them with ctest -L section-.
# -LE bite-fast: the whole bite map (label bite) runs here, and its fast part
# (a subset, for a quick look: ctest -L bite-fast) would repeat it.
# -LE worker-catches: the worker suite against its broken workers judges no
# code of ours the sanitizers do not already watch: its ASan run above is the
# verdict, and a second one here cost 120 s of a lane.
# The whole suite against ours under valgrind (conformance.valgrind, label valgrind-suite)
# runs here too: the same verdict as quiet (issue 37), 327 s beside another CI run.
run_ctest ctest.log -j"$ctest_jobs" -LE 'section-|bite-fast|worker-catches' "$@"
