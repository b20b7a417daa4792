#!/usr/bin/env bash
# Formats every C++ and CUDA source of the tree with clang-format and the repository's .clang-format.
# Usage: scripts/format.sh [--check]   (--check: list the files that would change, exit 1 if any)
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = --check ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --dry-run --Werror "$f" > /dev/null 2>&1; then echo "needs formatting: $f"; bad=1; fi
  done
  exit $bad
fi
clang-format -i "${files[@]}"
