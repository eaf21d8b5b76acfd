#!/usr/bin/env bash
# Assembles the static site build/site/ from web/ (its folders as they are: index.html, style.css,
# the icon and sw.js at the root, then page/, views/, worker/, shared/) and the WebAssembly engine
# built into build/wasm/web/ (by `cmake --build build/wasm`), which goes into worker/ beside
# worker.js, the one module that loads it. The folder is self-contained and uses only
# relative URLs, so it can be copied to any static host, also under a sub-path; its service
# worker (sw.js) makes it cross-origin isolated (threads) where the host sets no headers, and
# keeps the page's files for offline use, versioned by version.json (a hash of their content).
#
#   scripts/build-site.sh [--with-weights [GGUF]] [--part-size BYTES]
#
# Without --with-weights the model is not part of it: the page loads weights/gpt2-q8_0.gguf
# relative to itself when asked (copy the file there on your host, or pass --mount
# /weights=weights to scripts/serve.mjs), or any URL, or a local file.
# --with-weights copies GGUF (default: weights/gpt2-q8_0.gguf if present, else the small
# weights/gpt2-tiny-q8_0.gguf) into the site's weights/ as parts of at most --part-size bytes
# (default 24 MiB, under Cloudflare Pages' 25 MiB per file and GitHub's 100 MB) plus
# weights/<name>.manifest.json, and names it in version.json, so the page opens it by default:
# the folder alone is then the whole deployable site.
set -euo pipefail
cd "$(dirname "$0")/.."
wasm_dir=${GPT2_WASM_DIR:-build/wasm/web}
site=${GPT2_SITE_DIR:-build/site}

with_weights=0
gguf=""
part_size=$((24 * 1024 * 1024))
while [ $# -gt 0 ]; do
  case "$1" in
    --with-weights)
      with_weights=1
      if [ $# -gt 1 ] && [ "${2#--}" = "$2" ]; then gguf=$2; shift; fi ;;
    --part-size)
      [ $# -gt 1 ] || { echo "build-site: --part-size needs a number of bytes" >&2; exit 2; }
      part_size=$2; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-site: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if ! [[ "$part_size" =~ ^[0-9]+$ ]] || [ "$part_size" -lt 1024 ]; then
  echo "build-site: --part-size must be a whole number of bytes, at least 1024 (got $part_size)" >&2
  exit 2
fi
if [ "$with_weights" = 1 ]; then
  if [ -z "$gguf" ]; then
    if [ -f weights/gpt2-q8_0.gguf ]; then gguf=weights/gpt2-q8_0.gguf; else gguf=weights/gpt2-tiny-q8_0.gguf; fi
  fi
  if [ ! -f "$gguf" ]; then echo "build-site: $gguf does not exist" >&2; exit 1; fi
  if [ "$(head -c 4 "$gguf")" != GGUF ]; then echo "build-site: $gguf is not a GGUF file" >&2; exit 1; fi
fi

# gpt2-engine: single-threaded; gpt2-engine-mt (+ its pthread worker): used by worker.js when the
# page is cross-origin isolated (served with COOP/COEP, e.g. scripts/serve.mjs --isolate); each
# with its relaxed SIMD twin (-relaxed.wasm), which web/worker/relaxed-simd.js picks where it can run.
engine_files="gpt2-engine.js gpt2-engine.wasm gpt2-engine-relaxed.wasm gpt2-engine-mt.js gpt2-engine-mt.wasm
  gpt2-engine-mt-relaxed.wasm gpt2-engine-mt.worker.js"
for f in $engine_files; do
  if [ ! -f "$wasm_dir/$f" ]; then
    echo "build-site: $wasm_dir/$f is missing; build the wasm first:" >&2
    echo "  export NODE_PATH=/usr/share/nodejs; emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release && cmake --build build/wasm -j2" >&2
    exit 1
  fi
done

rm -rf "$site.tmp"
mkdir -p "$site.tmp"
# The page's code in folders by the thread it runs on (see README.md, "The page").
code_dirs="page views worker shared"
cp web/*.html web/*.js web/*.css web/*.svg "$site.tmp/"
for d in $code_dirs; do mkdir "$site.tmp/$d" && cp web/$d/*.js "$site.tmp/$d/"; done
for f in $engine_files; do cp "$wasm_dir/$f" "$site.tmp/worker/"; done
model=""
if [ "$with_weights" = 1 ]; then
  # Parts named by the file's hash: worker-load.js caches model files by URL, so a deploy with other
  # weights must not reuse the old parts' names.
  stem=$(basename "$gguf" .gguf)
  hash=$(sha256sum "$gguf" | cut -c1-12)
  mkdir -p "$site.tmp/weights"
  split -b "$part_size" -d -a 3 "$gguf" "$site.tmp/weights/$stem.$hash.gguf.part"
  parts=$(cd "$site.tmp/weights" && ls "$stem.$hash.gguf.part"* | sed 's/.*/"&"/' | paste -sd, -)
  printf '{"parts":[%s],"size":%s}\n' "$parts" "$(stat -c %s "$gguf")" > "$site.tmp/weights/$stem.manifest.json"
  model="weights/$stem.manifest.json?v=$hash"
fi
# version.json: which build this is (commit, time), and for the service worker (sw.js) the
# page's own files and a hash of their content, so a deploy that changes any of them replaces
# the offline copy. sw.js itself is updated by the browser; the model is cached by worker-load.js.
files=$(cd "$site.tmp" && find . -type f ! -path ./version.json ! -path ./sw.js ! -path './weights/*' -printf '%P\n' |
  LC_ALL=C sort)
version=$( (cd "$site.tmp" && sha256sum $files; echo "$model") | sha256sum | cut -c1-16)
{
  echo "{"
  echo "  \"commit\": \"$(git rev-parse --short HEAD 2>/dev/null || echo unknown)\","
  echo "  \"built\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  echo "  \"version\": \"$version\","
  [ -z "$model" ] || echo "  \"model\": \"$model\","
  echo "  \"files\": [$(echo "$files" | sed 's/.*/"&"/' | paste -sd, -)]"
  echo "}"
} > "$site.tmp/version.json"
# Absolute URLs would break under a sub-path; fail the build instead of shipping them. Every
# page script is checked (the worker's parts too), and the engine's pthread worker.
own_scripts=()
for f in web/*.js web/*/*.js; do own_scripts+=("$site.tmp/${f#web/}"); done
if grep -nE '(src|href)="/|fetch\(\s*["'\'']/|new URL\(["'\'']/' "$site.tmp"/*.html "${own_scripts[@]}" \
    "$site.tmp"/worker/gpt2-engine-mt.worker.js; then
  echo "build-site: absolute URL found above; the site must use relative URLs only" >&2
  exit 1
fi
rm -rf "$site"
mv "$site.tmp" "$site"
echo "build-site: $(du -sh "$site" | cut -f1) in $site ($(ls "$site" | tr '\n' ' '))"
[ -z "$model" ] || echo "build-site: the page opens $model ($gguf in parts of at most $part_size bytes)"
