#!/usr/bin/env bash
# Installs everything the kit needs from Debian's archive, then the pinned MCP
# servers of tests/interop from npm (`npm ci`: package-lock.json decides every
# version). Safe to run twice: it installs only what is missing, skips apt
# entirely when nothing is, and runs `npm ci` only when node_modules is older
# than the lockfile.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config
  libcjson-dev libcriterion-dev
  python3 python3-pytest python3-pytest-xdist python3-pytest-timeout python3-hypothesis
  python3-yaml git
  valgrind clang afl++
  strace  # tests/e2e/test_hostile.py: which pids the daemon signals (skipped without it)
  nodejs
)
# npm: Debian's package, unless a `npm` command is already there (NodeSource's
# nodejs ships its own and conflicts with Debian's npm package).
command -v npm >/dev/null 2>&1 || packages+=(npm)

interop() {
  local dir=tests/interop
  [ -f "$dir/package-lock.json" ] || return 0
  if [ -f "$dir/node_modules/.package-lock.json" ] && \
     [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    echo "install-deps: $dir/node_modules up to date"
    return 0
  fi
  echo "install-deps: npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  interop
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
interop
echo "install-deps: done"
