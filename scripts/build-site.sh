#!/usr/bin/env bash
# Assembles the static site build/site/ from web/ and the WebAssembly engine built into
# build/wasm/web/ (by `cmake --build build/wasm`). The folder is self-contained and uses only
# relative URLs, so it can be copied to any static host, also under a sub-path. The model is not
# part of it: the page loads weights/gpt2-q8_0.gguf relative to itself by default (copy the file
# there on your host, or pass --mount /weights=weights to scripts/serve.mjs), or any URL, or a
# local file.
set -euo pipefail
cd "$(dirname "$0")/.."
wasm_dir=${GPT2_WASM_DIR:-build/wasm/web}
site=${GPT2_SITE_DIR:-build/site}

# gpt2-engine: single-threaded; gpt2-engine-mt (+ its pthread worker): used by worker.js when the
# page is cross-origin isolated (served with COOP/COEP, e.g. scripts/serve.mjs --isolate).
engine_files="gpt2-engine.js gpt2-engine.wasm gpt2-engine-mt.js gpt2-engine-mt.wasm gpt2-engine-mt.worker.js"
for f in $engine_files; do
  if [ ! -f "$wasm_dir/$f" ]; then
    echo "build-site: $wasm_dir/$f is missing; build the wasm first:" >&2
    echo "  export NODE_PATH=/usr/share/nodejs; emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release && cmake --build build/wasm -j2" >&2
    exit 1
  fi
done

rm -rf "$site.tmp"
mkdir -p "$site.tmp"
cp web/*.html web/*.js web/*.css "$site.tmp/"
for f in $engine_files; do cp "$wasm_dir/$f" "$site.tmp/"; done
# A version stamp, so a person (or a test) can tell which build a host serves.
{
  echo "{"
  echo "  \"commit\": \"$(git rev-parse --short HEAD 2>/dev/null || echo unknown)\","
  echo "  \"built\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\""
  echo "}"
} > "$site.tmp/version.json"
# Absolute URLs would break under a sub-path; fail the build instead of shipping them.
if grep -nE '(src|href)="/|fetch\(\s*["'\'']/|new URL\(["'\'']/' "$site.tmp"/*.html "$site.tmp"/app.js "$site.tmp"/worker.js \
    "$site.tmp"/gpt2-engine-mt.worker.js; then
  echo "build-site: absolute URL found above; the site must use relative URLs only" >&2
  exit 1
fi
rm -rf "$site"
mv "$site.tmp" "$site"
echo "build-site: $(du -sh "$site" | cut -f1) in $site ($(ls "$site" | tr '\n' ' '))"
