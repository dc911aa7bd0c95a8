#!/usr/bin/env bash
# Every test: set up, build with -Werror, then unit tests, fuzz corpus
# replays, the mock self-tests, the daemon's end-to-end tests and the
# conformance suite (ctest labels unit, fuzz, mocks, e2e, conformance).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSB_WERROR=ON >/dev/null
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure --timeout 900 "$@"
