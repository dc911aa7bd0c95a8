#!/bin/sh
# Minimal JSON-RPC worker in POSIX sh: answers numeric-id requests with {"result":"sh-ok"}.
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"result":"sh-ok","who":"%s"}\n' "$id" "$1"
done
