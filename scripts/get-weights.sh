#!/usr/bin/env bash
# Downloads GPT-2 small (openai-community/gpt2 on Hugging Face, MIT licence) and converts it to
# the GGUF files the CLI and the page load:
#   $kDir/hf/{model.safetensors,config.json,vocab.json,merges.txt}   the download (resumable,
#                                                                       verified)
#   weights/gpt2-q8_0.gguf, weights/gpt2-q4_0.gguf                      always
#   weights/gpt2-f16.gguf                                               with --f16
#   weights/gpt2-<type>.gguf.partN + weights/gpt2-<type>.manifest.json  with --split SIZE
#
# usage: scripts/get-weights.sh [--f16] [--split SIZE] [--force]
#   --split SIZE  also cut each GGUF into parts of at most SIZE bytes (K/M/G suffixes allowed,
#                 e.g. 95M for hosts with a 100 MB file limit) and write a manifest
#                 {"parts":["gpt2-q8_0.gguf.part0",...],"size":N} that web/worker/worker-load.js reads.
#   --force       convert again even if the .gguf files exist.
# Every download is checked against the size and SHA-256 the server states: Hugging Face answers a
# large (LFS) file with a redirect to its CDN whose headers carry X-Linked-Size and X-Linked-ETag
# (the file's SHA-256); for small files the size is the final Content-Length. A file that does not
# match is deleted, and nothing is converted. Where the server states nothing, the pinned sizes
# below are checked.
# Without network access it says so and exits with status 3 before creating or changing any file.
#
# Environment: GPT2_WEIGHTS_URL  a mirror laid out like .../resolve/main (or a file:// directory);
#                                the pinned sizes are then not checked, the stated ones still are.
#              GPT2_WEIGHTS_DIR  where to write (default weights/), e.g. for tests.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly kRepo="${GPT2_WEIGHTS_URL:-https://huggingface.co/openai-community/gpt2/resolve/main}"
readonly kDir="${GPT2_WEIGHTS_DIR:-weights}"
# Sizes of the files at huggingface.co/openai-community/gpt2 (main), for a server that states none.
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
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
https://huggingface.co/openai-community/gpt2 into $kDir/hf/ and run:
  build/native/gpt2-convert --input $kDir/hf --output $kDir/gpt2-q8_0.gguf --type q8_0
MSG
  exit 3
fi

file_size() { stat -c %s "$1" 2>/dev/null || echo 0; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }

# Prints "SIZE SHA256" as the server states them for URL $1 ("-" for what it does not state):
# X-Linked-Size / X-Linked-ETag from any response of the redirect chain (Hugging Face sends them
# on the first, the 302 to its CDN), else the Content-Length of the final response.
stated() {
  local headers
  headers=$(curl -sSIL --max-time 30 "$1" 2>/dev/null | tr -d '\r') || { echo "- -"; return; }
  printf '%s\n' "$headers" | awk '
    tolower($1) ~ /^http\// { length_ = ""; status = $2 }
    tolower($1) == "content-length:" { length_ = $2 }
    tolower($1) == "x-linked-size:" && linked == "" { linked = $2 }
    tolower($1) == "x-linked-etag:" && etag == "" { etag = $2; gsub(/^W\/|"/, "", etag) }
    END {
      size = linked != "" ? linked : (status ~ /^2/ && length_ != "" ? length_ : "-")
      print size, (length(etag) == 64 && etag !~ /[^0-9a-f]/ ? etag : "-")  # mawk: no {64}
    }'
}

# Checks $1 (a file) against size $2 and SHA-256 $3 ("-" = not stated); prints why not, if not.
mismatch() {
  local got
  got=$(file_size "$1")
  if [ "$2" != - ] && [ "$got" != "$2" ]; then echo "it is $got bytes, the server states $2"; return; fi
  if [ "$got" = 0 ]; then echo "it is empty"; return; fi
  if [ "$3" != - ] && [ "$(sha256 "$1")" != "$3" ]; then
    echo "its SHA-256 is $(sha256 "$1"), the server states $3"
  fi
}

mkdir -p "$kDir/hf"
for name in "${kFiles[@]}"; do
  dest="$kDir/hf/$name"
  read -r want_size want_sha < <(stated "$kRepo/$name")
  if [ "$want_size" = - ] && [ -n "${kSize[$name]:-}" ]; then want_size=${kSize[$name]}; fi
  if [ -f "$dest" ]; then
    why=$(mismatch "$dest" "$want_size" "$want_sha")
    if [ -z "$why" ]; then echo "get-weights: $dest present and verified"; continue; fi
    echo "get-weights: $dest does not match the server ($why); downloading it again"
    rm -f "$dest"
  fi
  # A partial download larger than the file cannot be resumed.
  if [ "$want_size" != - ] && [ "$(file_size "$dest.part")" -gt "$want_size" ]; then rm -f "$dest.part"; fi
  if [ "$want_size" = - ]; then echo "get-weights: downloading $name"
  else echo "get-weights: downloading $name ($want_size bytes)"; fi
  # -C - resumes a previous partial download of the .part file; curl shows its progress meter.
  curl -fL --retry 3 --retry-delay 2 -C - -o "$dest.part" "$kRepo/$name"
  why=$(mismatch "$dest.part" "$want_size" "$want_sha")
  if [ -n "$why" ]; then
    if [ "$want_sha" != - ] && [ "$(file_size "$dest.part")" = "$want_size" ]; then
      rm -f "$dest.part"
      echo "get-weights: $name failed verification: $why. The download was deleted and no model" \
           "file was written; run the script again, or check the mirror (GPT2_WEIGHTS_URL)." >&2
    else
      echo "get-weights: $name failed verification: $why; run the script again to resume," \
           "or delete $dest.part if the file on the server changed. No model file was written." >&2
    fi
    exit 1
  fi
  mv "$dest.part" "$dest"
  if [ "$want_sha" != - ]; then echo "get-weights: $name verified (size and SHA-256 as stated)"
  elif [ "$want_size" != - ]; then echo "get-weights: $name verified (size as stated)"; fi
done

if [ ! -x build/native/gpt2-convert ]; then
  echo "get-weights: building the converter"
  cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build/native -j"$(nproc)" --target gpt2-convert
fi

types=(q8_0 q4_0)
[ "$f16" = 1 ] && types+=(f16)
for type in "${types[@]}"; do
  out="$kDir/gpt2-$type.gguf"
  if [ -f "$out" ] && [ "$force" = 0 ]; then
    echo "get-weights: $out present (--force to convert again)"
  else
    build/native/gpt2-convert --input $kDir/hf --output "$out" --type "$type" --quiet
    echo "get-weights: wrote $out ($(file_size "$out") bytes)"
  fi
  if [ "$split_bytes" -gt 0 ]; then
    base=$(basename "$out")
    rm -f "$kDir/$base".part*
    size=$(file_size "$out")
    n_parts=$(( (size + split_bytes - 1) / split_bytes ))
    digits=${#n_parts}
    split -b "$split_bytes" -d -a "$digits" "$out" "$kDir/$base.part"
    parts=$(cd "$kDir" && ls "$base".part* | sort)
    json=$(echo "$parts" | sed 's/.*/"&"/' | paste -sd, -)
    manifest="$kDir/gpt2-$type.manifest.json"
    printf '{"parts":[%s],"size":%s}\n' "$json" "$(file_size "$out")" >"$manifest.tmp"
    mv "$manifest.tmp" "$manifest"
    echo "get-weights: wrote $manifest ($(echo "$parts" | wc -l) parts of at most $split_bytes bytes)"
  fi
done
echo "get-weights: done. Try: build/native/gpt2 generate --model $kDir/gpt2-q8_0.gguf --prompt \"Hello\" --n 40"
