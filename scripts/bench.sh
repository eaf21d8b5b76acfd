#!/usr/bin/env bash
# Benchmarks us (native and in Chromium) against wllama (llama.cpp's wasm) and ONNX Runtime Web
# (scripts/bench-ort.mjs; its ONNX models need python3-torch and python3-onnx) in one run; see
# scripts/bench.mjs for what is measured and BENCHMARKS.md for results. Builds first if needed.
#   bash scripts/bench.sh [--runs 5] [--types q8_0,q4_0,f32] [--skip-native] [--skip-browser] [--skip-ort]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x build/native/gpt2 ] || [ ! -x build/native/gpt2-make-model ] || [ ! -f build/wasm/web/gpt2-engine.js ]; then
  bash scripts/build.sh
fi
exec node scripts/bench.mjs "$@"
