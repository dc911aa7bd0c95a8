#!/usr/bin/env bash
# The C tree is formatted by .clang-format (clang-format 14): lists every
# tracked C file that clang-format would change and exits 1 if there is one.
# Fix with: clang-format-14 -i <files>
# (The bound of 500 lines per src/*.c file is gone: files were split to meet
# it rather than by concern. ci/src_cycles.py, ctest `layering`, checks
# what it stood for: no two files leaning on each other.)
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [ -z "$cf" ]; then
  echo "format-check: clang-format-14 not found (ci/install-deps.sh installs it)" >&2
  exit 2
fi
bad=0
while IFS= read -r f; do
  if ! "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "unformatted: $f"
    bad=1
  fi
done < <(git ls-files -- 'src/*.[ch]' 'tests/unit/*.[ch]' 'fuzz/*.[ch]' 'mock_workers/*.[ch]' \
           'bench/*.[ch]')
[ "$bad" = 0 ] || echo "format-check: run clang-format-14 -i on the files above" >&2
exit "$bad"
