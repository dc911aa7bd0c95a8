#!/usr/bin/env bash
# Installs everything the kit needs from Debian's archive, then the pinned
# npm packages of every committed package-lock.json (`npm ci`: the lockfile decides every
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
  python3-jsonschema  # harness self-tests: results.json against results.schema.json (full draft 2020-12)
  libxml2-utils       # harness self-tests: xmllint validates junit.xml against the Jenkins junit-10.xsd
  valgrind clang afl++
  clang-format-14  # ci/format-check.sh: the .clang-format of the C tree
  strace  # tests/e2e/test_hostile.py: which pids the daemon signals (skipped without it)
  openjdk-17-jdk-headless  # javac: javabus, the independent daemon in Java (conformance/selftest/indep)
  chromium  # conformance/browser: report.html and matrix.html in a headless browser (playwright-core drives it)
)
# Node.js and npm for the interop tests (tests/interop): Debian's, unless a
# node and an npm are already installed (another vendor's nodejs bundles npm
# and conflicts with Debian's npm package).
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: done"
fi

# The npm software of the interop tests and benchmarks (MCP and ACP SDKs,
# reference servers, peer tools) and of the report's browser test
# (playwright-core, no browser download: it drives Debian's chromium), one package per folder, each pinned by its
# committed lockfile (npm ci: package-lock.json decides every version);
# installed again only when the lockfile is newer than what npm installed.
while IFS= read -r lock; do
  dir=$(dirname "$lock")
  if [ ! -f "$dir/node_modules/.package-lock.json" ] ||
     [ "$lock" -nt "$dir/node_modules/.package-lock.json" ]; then
    echo "install-deps: npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  else
    echo "install-deps: $dir/node_modules up to date"
  fi
done < <(git ls-files '*package-lock.json' 2>/dev/null || echo tests/interop/package-lock.json)
