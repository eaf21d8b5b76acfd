#!/usr/bin/env bash
# Runs every test: first that the C++ follows .clang-format (scripts/check-format.sh), then the
# native Catch2 suite (and again, whole, under AddressSanitizer and UndefinedBehaviorSanitizer),
# 30 s of each libFuzzer target, the same suite compiled to WebAssembly under Node (and the
# thread pool in the pthreads build), and the browser tests in headless Chromium, their core
# suite (tests/web/browsers.test.mjs) in Firefox ESR too. Installs what it needs first.
#
# Every configuration is built once: scripts/build.sh (native, wasm + site) beside the sanitizer
# build (the sanitizer suite and the fuzzers, scripts/fuzz.sh), so that neither's links and
# single-threaded steps leave a core idle. Then the suites run in three lanes side by side:
#   lane 1: native suite, sanitizer suite, WebAssembly suites
#   lane 3: fuzzers and the tests/web files that start no browser
#   lane 2: the browser tests
# Lanes 1 and 3 run at low priority, so that the browser tests' timing checks (e.g. input
# latency) see the CPU they would alone: they take what the browser leaves. Each is a chain of
# single-threaded steps, and the browser tests leave about a third of the two cores idle, so
# the two low lanes end sooner side by side than one after the other. Each lane's output is
# printed whole when it ends (lane 2 last), so the log reads in order.
set -euo pipefail
cd "$(dirname "$0")/.."
start_all=$SECONDS
bash scripts/install-deps.sh
echo "== the C++ against .clang-format (clang-format-14)"
bash scripts/check-format.sh

logs=build/test-logs
mkdir -p "$logs"
echo "== building: native, WebAssembly and the site beside the sanitizer suite and the fuzzers (ASan + UBSan, clang)"
bash scripts/build.sh >"$logs/build.log" 2>&1 &
build_pid=$!
sanitize_status=0
FUZZ_BUILD_ONLY=1 FUZZ_ALSO_BUILD=gpt2_tests bash scripts/fuzz.sh >"$logs/build-sanitize.log" 2>&1 ||
  sanitize_status=$?
build_status=0
wait "$build_pid" || build_status=$?
cat "$logs/build.log" "$logs/build-sanitize.log"
[ "$build_status" = 0 ] || { echo "test.sh: scripts/build.sh FAILED"; exit 1; }
[ "$sanitize_status" = 0 ] || { echo "test.sh: the sanitizer build FAILED"; exit 1; }
echo "(builds took $((SECONDS - start_all)) s in all)"

# The tests/web files that start no browser (they drive the engine under Node, or scripts).
web_node=() web_browser=()
for f in tests/web/*.test.mjs; do
  if grep -qE 'launchBrowser|launch\(' "$f"; then web_browser+=("$f"); else web_node+=("$f"); fi
done

lane1() {
  local lane_start=$SECONDS
  echo "== native tests"
  build/native/gpt2_tests

  echo "== native tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  local start=$SECONDS
  # Not [family]: GPT-2 XL's widths converted and run under the sanitizers cost half a minute
  # here, and the same code runs under them at the other tests' widths (natively and in wasm too).
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

  echo "(lane 1 took $((SECONDS - lane_start)) s)"
}

lane3() {
  local lane_start=$SECONDS
  echo "== fuzzers, 20 s each (ASan + UBSan)"
  bash scripts/fuzz.sh 20

  echo "== the tests/web files that start no browser"
  node --test "${web_node[@]}"
  echo "(lane 3 took $((SECONDS - lane_start)) s)"
}

lane2() {
  local lane_start=$SECONDS status=0
  echo "== browser tests (headless Chromium; the core suite in Firefox ESR too)"
  node --test "${web_browser[@]}" || status=$?
  echo "(lane 2 took $((SECONDS - lane_start)) s)"
  return $status
}

(renice -n 15 -p $BASHPID >/dev/null; lane1) >"$logs/lane1.log" 2>&1 &
lane1_pid=$!
(renice -n 15 -p $BASHPID >/dev/null; lane3) >"$logs/lane3.log" 2>&1 &
lane3_pid=$!
lane2_status=0
lane2 >"$logs/lane2.log" 2>&1 || lane2_status=$?
lane1_status=0 lane3_status=0
wait "$lane1_pid" || lane1_status=$?
wait "$lane3_pid" || lane3_status=$?

cat "$logs/lane1.log"
[ "$lane1_status" = 0 ] || echo "test.sh: lane 1 (native, sanitizer and WebAssembly suites) FAILED"
cat "$logs/lane3.log"
[ "$lane3_status" = 0 ] || echo "test.sh: lane 3 (fuzzers, Node web tests) FAILED"
echo "(test.sh took $((SECONDS - start_all)) s, installs and builds included)"
cat "$logs/lane2.log"
[ "$lane2_status" = 0 ] || echo "test.sh: lane 2 (browser tests) FAILED"
[ "$lane1_status" = 0 ] && [ "$lane2_status" = 0 ] && [ "$lane3_status" = 0 ]
