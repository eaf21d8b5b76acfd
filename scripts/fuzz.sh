#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzzer.cc: clang 14, -fsanitize=fuzzer,address,undefined)
# into build/fuzz and runs each in turn, starting from its committed seed corpus
# (fuzz/corpus/<target>/, never written to; new inputs go to build/fuzz/corpus/<target>/).
#
#   bash scripts/fuzz.sh [seconds]      each target for `seconds` (default 30)
#   FUZZ_RUNS=10000000 bash scripts/fuzz.sh   each target for that many executions instead
#   FUZZ_TARGETS="tokenizer_fuzzer" ...      only these targets
#   FUZZ_BUILD_ONLY=1 bash scripts/fuzz.sh    build them, run nothing (scripts/test.sh builds
#                                             first, then runs them beside another suite)
#
# A finding (crash, sanitizer report, leak, timeout, out-of-memory) is saved as
# build/fuzz/findings/<target>/<kind>-<sha1> and fails the run; reproduce it with
# `build/fuzz/<target> <file>`, then add it to the target's seed corpus with its fix.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
launcher=()  # as in build.sh
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build/fuzz -DCMAKE_CXX_COMPILER="${FUZZ_CXX:-clang++-14}" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPT2_FUZZ=ON -DGPT2_BUILD_TESTS=OFF >/dev/null
targets=${FUZZ_TARGETS:-$(cd fuzz && ls *_fuzzer.cc | sed 's/\.cc$//')}
# shellcheck disable=SC2086
cmake --build build/fuzz -j"$(nproc)" --target $targets
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
  work=build/fuzz/corpus/$name
  findings=build/fuzz/findings/$name
  mkdir -p "$work" "$findings"
  echo "== fuzz $name ($what)"
  log=build/fuzz/$name.log
  # -timeout: one input may take 10 s (a fuzzed model's single forward step included);
  # -rss_limit_mb: the fuzzers cap models at 64 MB of buffers, so 2 GB means a leak or a bug.
  if build/fuzz/"$name" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$findings/" "$work" "fuzz/corpus/$name" >"$log" 2>&1; then
    grep -E '^#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::peak_rss_mb' "$log" || tail -3 "$log"
  else
    status=1
    echo "fuzz: $name found a problem (input in $findings/):"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -20
  fi
done
exit $status
