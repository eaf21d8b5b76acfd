#!/usr/bin/env bash
# Runs every test: native Catch2 suite (and again, whole, under AddressSanitizer and
# UndefinedBehaviorSanitizer), 30 s of each libFuzzer target, the same suite compiled to
# WebAssembly under Node (and the thread pool in the pthreads build), and the browser tests in
# headless Chromium. Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh

echo "== native tests"
build/native/gpt2_tests

echo "== native tests under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DGPT2_ASAN=ON >/dev/null
cmake --build build/asan -j"$(nproc)" --target gpt2_tests
start=$SECONDS
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 build/asan/gpt2_tests
echo "(the suite took $((SECONDS - start)) s under the sanitizers)"

echo "== fuzzers, 30 s each (ASan + UBSan)"
bash scripts/fuzz.sh 30

if [ -f build/wasm/gpt2_tests.js ]; then
  echo "== WebAssembly tests under Node"
  node --no-experimental-fetch build/wasm/gpt2_tests.js
  echo "== the kernel, golden and nano tests on its relaxed SIMD twin (FMA) under Node"
  node --no-experimental-fetch --experimental-wasm-relaxed-simd tests/run-relaxed.cjs \
    build/wasm/gpt2_tests.js "[kernels]~[plain],[golden],[nano],[relaxed]"
fi
if [ -f build/wasm/gpt2_thread_tests.js ]; then
  echo "== thread pool in the pthreads WebAssembly build under Node"
  node --no-experimental-fetch build/wasm/gpt2_thread_tests.js
fi

if [ -d tests/web ] && ls tests/web/*.test.mjs >/dev/null 2>&1; then
  echo "== browser tests (headless Chromium)"
  node --test tests/web/
fi
