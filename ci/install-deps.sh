#!/usr/bin/env bash
# Installs everything the kit needs from Debian's archive. Safe to run twice:
# it installs only what is missing, and skips apt entirely when nothing is.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libcjson-dev libcriterion-dev
  python3 python3-pytest python3-pytest-xdist python3-pytest-timeout python3-hypothesis
  python3-yaml git
  valgrind clang afl++
  strace  # tests/e2e/test_hostile.py: which pids the daemon signals (skipped without it)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
