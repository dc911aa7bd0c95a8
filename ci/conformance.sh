#!/usr/bin/env bash
# The main job: set up, build, and run the conformance suite against our
# daemon. Reports land in build/conformance-results/ (report.html, report.md, junit.xml,
# results.json, artifacts/ for failures).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
exec /usr/bin/python3 conformance/run.py \
  --daemon build/stdio_bus \
  --mock-worker build/mock_workers/mock_worker \
  --report-dir build/conformance-results "$@"
