#!/usr/bin/env bash
# Checks that the C++ (src/, tests/, fuzz/) follows the repo's .clang-format, with Debian's
# clang-format-14 (other versions format some constructs differently). Lists each file that
# differs and the first lines of what clang-format would change; exits 1 if any does.
#   scripts/check-format.sh          check
#   scripts/check-format.sh --fix    rewrite the files in place
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=$(command -v clang-format-14 || true)
if [ -z "$clang_format" ]; then
  echo "check-format: clang-format-14 is missing (apt-get install clang-format-14)" >&2
  exit 2
fi
# Generated tables (.inc) keep their generator's layout.
mapfile -t files < <(git ls-files -- 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'fuzz/*.cc' 'fuzz/*.h')
if [ "${1:-}" = --fix ]; then
  "$clang_format" -i --style=file "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$clang_format" --style=file "$f" | cmp -s - "$f"; then
    echo "check-format: $f differs from .clang-format:"
    "$clang_format" --style=file "$f" | diff -u "$f" - | sed -n '3,14p' || true
    bad=$((bad + 1))
  fi
done
if [ "$bad" -gt 0 ]; then
  echo "check-format: $bad of ${#files[@]} files differ; run: bash scripts/check-format.sh --fix"
  exit 1
fi
echo "check-format: all ${#files[@]} C++ files follow .clang-format"
