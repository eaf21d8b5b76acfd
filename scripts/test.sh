#!/usr/bin/env bash
# Runs every test: native Catch2 suite (and again, whole, under AddressSanitizer and
# UndefinedBehaviorSanitizer), 30 s of each libFuzzer target, the same suite compiled to
# WebAssembly under Node (and the thread pool in the pthreads build), and the browser tests in
# headless Chromium, their core suite (tests/web/browsers.test.mjs) in Firefox ESR too. Installs
# what it needs first.
#
# Every configuration is built once (native, wasm + site, sanitizers, fuzzers), both cores at a
# time; then the suites, each of which keeps one core busy, run in two lanes side by side:
#   lane 1: native suite, sanitizer suite, WebAssembly suites under Node (at low priority, so
#           that the browser tests' timing checks, e.g. input latency, see the CPU they would
#           alone: lane 1 takes what the browser leaves)
#   lane 2: fuzzers, browser tests
# Each lane's output is printed whole when it ends (lane 2 last), so the log reads in order.
set -euo pipefail
cd "$(dirname "$0")/.."
start_all=$SECONDS
bash scripts/install-deps.sh
bash scripts/build.sh

echo "== building the sanitizer suite and the fuzzers (ASan + UBSan, clang)"
FUZZ_BUILD_ONLY=1 FUZZ_ALSO_BUILD=gpt2_tests bash scripts/fuzz.sh
echo "(builds took $((SECONDS - start_all)) s in all)"

logs=build/test-logs
mkdir -p "$logs"

lane1() {
  echo "== native tests"
  build/native/gpt2_tests

  echo "== native tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  local start=$SECONDS
  # Not [family]: GPT-2 XL's widths converted and run at -O0 cost half a minute here, and the
  # same code runs under the sanitizers at the other tests' widths (natively and in wasm too).
  # "~[.]" keeps the hidden profiles out, which a test spec would otherwise let in.
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 build/sanitize/gpt2_tests "~[.]~[family]"
  echo "(the suite took $((SECONDS - start)) s under the sanitizers)"

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
}

lane2() {
  echo "== fuzzers, 30 s each (ASan + UBSan)"
  bash scripts/fuzz.sh 30

  if [ -d tests/web ] && ls tests/web/*.test.mjs >/dev/null 2>&1; then
    echo "== browser tests (headless Chromium; the core suite in Firefox ESR too)"
    node --test tests/web/
  fi
}

(renice -n 15 -p $BASHPID >/dev/null; lane1) >"$logs/lane1.log" 2>&1 &
lane1_pid=$!
lane2_status=0
lane2 >"$logs/lane2.log" 2>&1 || lane2_status=$?
lane1_status=0
wait "$lane1_pid" || lane1_status=$?

cat "$logs/lane1.log"
[ "$lane1_status" = 0 ] || echo "test.sh: lane 1 (native, sanitizer, WebAssembly suites) FAILED"
echo "(test.sh took $((SECONDS - start_all)) s, installs and builds included)"
cat "$logs/lane2.log"
[ "$lane2_status" = 0 ] || echo "test.sh: lane 2 (fuzzers, browser tests) FAILED"
[ "$lane1_status" = 0 ] && [ "$lane2_status" = 0 ]
