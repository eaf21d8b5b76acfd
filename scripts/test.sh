#!/usr/bin/env bash
# Runs every test: native Catch2 suite (and again under AddressSanitizer for the file parsers),
# the same suite compiled to WebAssembly under Node, and the browser tests in headless Chromium.
# Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh

echo "== native tests"
build/native/gpt2_tests

echo "== native tests under AddressSanitizer (formats, tokenizer)"
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DGPT2_ASAN=ON >/dev/null
cmake --build build/asan -j"$(nproc)" --target gpt2_tests
build/asan/gpt2_tests "[format],[tokenizer],[convert]"

if [ -f build/wasm/gpt2_tests.js ]; then
  echo "== WebAssembly tests under Node"
  node --no-experimental-fetch build/wasm/gpt2_tests.js
fi

if [ -d tests/web ] && ls tests/web/*.test.mjs >/dev/null 2>&1; then
  echo "== browser tests (headless Chromium)"
  node --test tests/web/
fi
