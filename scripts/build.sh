#!/usr/bin/env bash
# Builds everything: the native engine, CLI, tools and tests (build/native), and, unless
# GPT2_NATIVE_ONLY=1, the WebAssembly build (build/wasm) and the static site (build/site).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

# ccache (when installed) keeps the native objects of unchanged sources between builds; the
# WebAssembly build compiles without it.
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The tests' precompiled header (CMakeLists.txt) is only cached by ccache with this sloppiness.
export CCACHE_SLOPPINESS=pch_defines,time_macros
cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build/native -j"$jobs"

if [ "${GPT2_NATIVE_ONLY:-0}" != 1 ] && [ -f src/bindings/CMakeLists.txt ]; then
  export NODE_PATH=/usr/share/nodejs  # Debian's emscripten needs acorn from here
  emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build/wasm -j"$jobs"
  if [ -x scripts/build-site.sh ]; then bash scripts/build-site.sh; fi
fi
