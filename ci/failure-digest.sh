#!/usr/bin/env bash
# After a failed ctest run: the lines that say why, printed last, where a CI
# log viewer that keeps only the tail still shows them. Each long test prints a
# one-line verdict with its own prefix (run_indep:, same_verdict:, busy:, ...)
# and pytest a "FAILED" line per failing test; ctest --output-on-failure put
# them somewhere in the middle of a long log.
# usage: ci/failure-digest.sh CTEST_LOG
log=${1:?usage: ci/failure-digest.sh CTEST_LOG}
echo "== why it failed (from $log)"
grep -E '^(The following tests FAILED|[[:space:]]+[0-9]+ - )' "$log" || true
grep -E '^([a-z_]+: |FAILED |ERROR |[0-9]+ (passed|failed))' "$log" \
  | grep -vE '^(note|pace|judged|preflight|our interpretations|our extensions|spec v)' | tail -n 60 || true
