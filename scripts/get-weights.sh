#!/usr/bin/env bash
# Downloads GPT-2 small (openai-community/gpt2 on Hugging Face, MIT licence) and converts it to
# the GGUF files the CLI and the page load:
#   weights/hf/{model.safetensors,config.json,vocab.json,merges.txt}   the download (resumable)
#   weights/gpt2-q8_0.gguf, weights/gpt2-q4_0.gguf                      always
#   weights/gpt2-f16.gguf                                               with --f16
#   weights/gpt2-<type>.gguf.partN + weights/gpt2-<type>.manifest.json  with --split SIZE
#
# usage: scripts/get-weights.sh [--f16] [--split SIZE] [--force]
#   --split SIZE  also cut each GGUF into parts of at most SIZE bytes (K/M/G suffixes allowed,
#                 e.g. 95M for hosts with a 100 MB file limit) and write a manifest
#                 {"parts":["gpt2-q8_0.gguf.part0",...],"size":N} that web/worker.js reads.
#   --force       convert again even if the .gguf files exist.
# Without network access it says so and exits with status 3 before creating or changing any file.
set -euo pipefail
cd "$(dirname "$0")/.."

# GPT2_WEIGHTS_URL points at a mirror (or a file:// directory, used to test this script offline);
# the pinned sizes below are then not checked.
readonly kRepo="${GPT2_WEIGHTS_URL:-https://huggingface.co/openai-community/gpt2/resolve/main}"
# Sizes of the files at huggingface.co/openai-community/gpt2 (main). A download of another size is
# truncated or not the expected revision, and is not converted.
declare -A kSize=(
  [model.safetensors]=548105171
  [vocab.json]=1042301
  [merges.txt]=456318
)
[ -n "${GPT2_WEIGHTS_URL:-}" ] && kSize=()
readonly kFiles=(config.json vocab.json merges.txt model.safetensors)

f16=0
split=""
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --f16) f16=1 ;;
    --split) split="${2:?--split needs a size, e.g. 95M}"; shift ;;
    --force) force=1 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "get-weights: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

split_bytes=0
if [ -n "$split" ]; then
  case "$split" in
    *[kK]) split_bytes=$(( ${split%[kK]} * 1024 )) ;;
    *[mM]) split_bytes=$(( ${split%[mM]} * 1024 * 1024 )) ;;
    *[gG]) split_bytes=$(( ${split%[gG]} * 1024 * 1024 * 1024 )) ;;
    *) split_bytes=$(( split )) ;;
  esac
  if [ "$split_bytes" -le 0 ]; then echo "get-weights: --split $split is not a positive size" >&2; exit 2; fi
fi

command -v curl >/dev/null || { echo "get-weights: curl is required (apt-get install curl)" >&2; exit 2; }

# Probe before touching anything: an offline machine must be left exactly as it was.
if ! probe=$(curl -sSfIL --max-time 20 -o /dev/null "$kRepo/config.json" 2>&1); then
  reason=$(printf '%s' "$probe" | tr -d '\r' | tail -n 1)
  cat >&2 <<MSG
get-weights: cannot reach huggingface.co (${reason:-no answer}).
This script downloads GPT-2 small (about 550 MB) from $kRepo
and needs internet access; nothing was downloaded or changed. Run it again on a connected machine,
or copy model.safetensors, config.json, vocab.json and merges.txt from
https://huggingface.co/openai-community/gpt2 into weights/hf/ and run:
  build/native/gpt2-convert --input weights/hf --output weights/gpt2-q8_0.gguf --type q8_0
MSG
  exit 3
fi

file_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

mkdir -p weights/hf
for name in "${kFiles[@]}"; do
  dest="weights/hf/$name"
  want="${kSize[$name]:-}"
  if [ -f "$dest" ] && { [ -z "$want" ] || [ "$(file_size "$dest")" = "$want" ]; }; then
    echo "get-weights: $dest present"
    continue
  fi
  echo "get-weights: downloading $name"
  # -C - resumes a previous partial download of the .part file.
  curl -fL --retry 3 --retry-delay 2 -C - -o "$dest.part" "$kRepo/$name"
  got=$(file_size "$dest.part")
  if [ -n "$want" ] && [ "$got" != "$want" ]; then
    echo "get-weights: $name is $got bytes, expected $want; run the script again to resume," \
         "or delete $dest.part if the file on Hugging Face changed" >&2
    exit 1
  fi
  if [ "$got" = 0 ]; then echo "get-weights: $name downloaded empty" >&2; exit 1; fi
  mv "$dest.part" "$dest"
done

if [ ! -x build/native/gpt2-convert ]; then
  echo "get-weights: building the converter"
  cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build/native -j"$(nproc)" --target gpt2-convert
fi

types=(q8_0 q4_0)
[ "$f16" = 1 ] && types+=(f16)
for type in "${types[@]}"; do
  out="weights/gpt2-$type.gguf"
  if [ -f "$out" ] && [ "$force" = 0 ]; then
    echo "get-weights: $out present (--force to convert again)"
  else
    build/native/gpt2-convert --input weights/hf --output "$out" --type "$type" --quiet
    echo "get-weights: wrote $out ($(file_size "$out") bytes)"
  fi
  if [ "$split_bytes" -gt 0 ]; then
    base=$(basename "$out")
    rm -f "weights/$base".part*
    size=$(file_size "$out")
    n_parts=$(( (size + split_bytes - 1) / split_bytes ))
    digits=${#n_parts}
    split -b "$split_bytes" -d -a "$digits" "$out" "weights/$base.part"
    parts=$(cd weights && ls "$base".part* | sort)
    json=$(echo "$parts" | sed 's/.*/"&"/' | paste -sd, -)
    manifest="weights/gpt2-$type.manifest.json"
    printf '{"parts":[%s],"size":%s}\n' "$json" "$(file_size "$out")" >"$manifest.tmp"
    mv "$manifest.tmp" "$manifest"
    echo "get-weights: wrote $manifest ($(echo "$parts" | wc -l) parts of at most $split_bytes bytes)"
  fi
done
echo "get-weights: done. Try: build/native/gpt2 generate --model weights/gpt2-q8_0.gguf --prompt \"Hello\" --n 40"
