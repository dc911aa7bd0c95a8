#!/usr/bin/env bash
# The CI smoke of the user-level benchmark (ctest -L bench-smoke): every
# system with two MCP SDK clients calling at once, a few calls each;
# correctness only (each answer once, to its own client, unchanged; our
# daemon leaves no server behind), no timing judged. About 30 s.
#
# usage: bench/users/smoke.sh DAEMON
# Exit 77 (ctest: skipped) when the pinned npm software is not installed
# here, unless CI is set: then it fails, since CI must run it
# (ci/install-deps.sh runs `npm ci` in this folder).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for m in @modelcontextprotocol/sdk @modelcontextprotocol/server-everything supergateway mcp-proxy; do
  if [ ! -f "$here/node_modules/$m/package.json" ]; then
    if [ -n "${CI:-}" ]; then
      echo "bench-smoke: $here/node_modules/$m is missing; in CI it must run (ci/install-deps.sh runs npm ci here)" >&2
      exit 1
    fi
    echo "bench-smoke: skipped: $here/node_modules/$m is missing (run npm ci in $here)"
    exit 77
  fi
done
exec node "$here/bench.mjs" --smoke --daemon "$1"
