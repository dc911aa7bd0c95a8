#!/bin/sh
# The interop agent, wherever it is run from (agent.toml names this file).
exec node "$(dirname "$0")/agent.mjs" "$@"
