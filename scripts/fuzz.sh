#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzzer.cc: clang 14, -fsanitize=fuzzer,address,undefined)
# into build/sanitize and runs each in turn, starting from its committed seed corpus
# (fuzz/corpus/<target>/, never written to; new inputs go to build/sanitize/corpus/<target>/).
# build/sanitize is also where scripts/test.sh builds and runs the Catch2 suite under the
# sanitizers: one configuration, compiled once, for both.
#
#   bash scripts/fuzz.sh [seconds]      each target for `seconds` (default 30)
#   FUZZ_RUNS=10000000 bash scripts/fuzz.sh   each target for that many executions instead
#   FUZZ_TARGETS="tokenizer_fuzzer" ...      only these targets
#   FUZZ_BUILD_ONLY=1 bash scripts/fuzz.sh    build them, run nothing (scripts/test.sh builds
#                                             first, then runs them beside another suite)
#   FUZZ_ALSO_BUILD="gpt2_tests" ...          build these targets of build/sanitize as well
#
# A finding (crash, sanitizer report, leak, timeout, out-of-memory) is saved as
# build/sanitize/findings/<target>/<kind>-<sha1> and fails the run; reproduce it with
# `build/sanitize/<target> <file>`, then add it to the target's seed corpus with its fix.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
dir=build/sanitize
launcher=()  # as in build.sh
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_SLOPPINESS=pch_defines,time_macros  # as in build.sh
# Debug keeps assert() on; -O1 because clang's sanitized -O0 code compiles no faster and runs
# (fuzzes, tests) several times slower; -g1 gives stack traces their lines at a third of -g's
# cost.
cmake -S . -B "$dir" -DCMAKE_CXX_COMPILER="${FUZZ_CXX:-clang++-14}" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DGPT2_FUZZ=ON >/dev/null
targets=${FUZZ_TARGETS:-$(cd fuzz && ls *_fuzzer.cc | sed 's/\.cc$//')}
# shellcheck disable=SC2086
cmake --build "$dir" -j"$(nproc)" --target $targets ${FUZZ_ALSO_BUILD:-}
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

if [ -n "${FUZZ_RUNS:-}" ]; then
  limit=(-runs="$FUZZ_RUNS"); what="$FUZZ_RUNS runs"
else
  limit=(-max_total_time="$seconds"); what="$seconds s"
fi
# Options already set (e.g. malloc_context_size=0 for long runs) are kept and win.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for name in $targets; do
  work=$dir/corpus/$name
  findings=$dir/findings/$name
  mkdir -p "$work" "$findings"
  echo "== fuzz $name ($what)"
  log=$dir/$name.log
  # -timeout: one input may take 10 s (a fuzzed model's single forward step included);
  # -rss_limit_mb: the fuzzers cap models at 64 MB of buffers, so 2 GB means a leak or a bug.
  if "$dir/$name" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$findings/" "$work" "fuzz/corpus/$name" >"$log" 2>&1; then
    grep -E '^#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::peak_rss_mb' "$log" || tail -3 "$log"
  else
    status=1
    echo "fuzz: $name found a problem (input in $findings/):"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -20
  fi
done
exit $status
