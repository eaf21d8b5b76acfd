#!/usr/bin/env bash
# The demo: builds everything (native engine, WebAssembly, build/site/), makes sure there is a
# model, prints a sample from the native CLI, then serves the page on http://127.0.0.1:8080/
# until Ctrl-C. The page opens with the model loaded (?model=...), no click needed.
#
# The model: weights/gpt2-q8_0.gguf (real GPT-2 small). Without it, and if Hugging Face answers
# within a few seconds, scripts/get-weights.sh downloads and converts it first (about 550 MB, with
# progress). Offline, the demo opens weights/gpt2-tiny-q8_0.gguf instead: a small GPT-2 trained
# here (scripts/train_tiny.py), whose text is English-like but odd, and the page says so.
#
# Environment: PORT (default 8080; 0 picks a free one), PROMPT (the CLI sample's prompt),
# GPT2_WEIGHTS_URL and GPT2_WEIGHTS_DIR as for scripts/get-weights.sh; GPT2_DEMO_NO_BUILD=1 skips
# installing and building (the tests run the demo on the build they test).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${GPT2_DEMO_NO_BUILD:-0}" != 1 ]; then
  bash scripts/install-deps.sh
  bash scripts/build.sh
fi
port=${PORT:-8080}
weights_dir=${GPT2_WEIGHTS_DIR:-weights}
repo_url=${GPT2_WEIGHTS_URL:-https://huggingface.co/openai-community/gpt2/resolve/main}
model=gpt2-q8_0.gguf
tiny=gpt2-tiny-q8_0.gguf

if [ ! -f "$weights_dir/$model" ]; then
  if curl -sSfIL --max-time 8 -o /dev/null "$repo_url/config.json" 2>/dev/null; then
    echo "demo: no $weights_dir/$model yet; Hugging Face is reachable, so downloading GPT-2 small"
    echo "demo: (about 550 MB, once; scripts/get-weights.sh)"
    bash scripts/get-weights.sh || echo "demo: the download did not complete (see above)."
  fi
fi
if [ ! -f "$weights_dir/$model" ]; then
  model=$tiny
  echo "demo: no real GPT-2 weights and no connection to Hugging Face: opening the small offline model"
  echo "demo: weights/$tiny (4 blocks, 7 M parameters, trained here on licence texts and the Python"
  echo "demo: documentation). Its text is English-like but odd. For GPT-2 itself, run"
  echo "demo: scripts/get-weights.sh on a connected machine, or this demo again."
  sample_model=weights/$tiny
else
  sample_model=$weights_dir/$model
fi
build/native/gpt2 generate --model "$sample_model" --prompt "${PROMPT:-The meaning of life is}" --n 20 --temp 0.8 --seed 1
echo
query="?model=weights/$model"
# The small model comes with its dictionaries (weights/README.md): the page loads its transcoders
# and computes a graph of a prompt that repeats a span (its induction heads read the repeat), and
# loads its SAE into the features panel; the dashboards panel reads its held-out text. Nothing is
# downloaded.
tc=weights/gpt2-tiny-transcoders.gguf
sae=weights/gpt2-tiny-sae-blocks.2.hook_resid_pre.gguf
if [ "$model" = "$tiny" ] && [ -f "$tc" ] && [ -f "$sae" ]; then
  graph_prompt=$(node -e 'process.stdout.write(encodeURIComponent(process.argv[1]))' \
    " GNU Free Software Foundation Boston GNU Free Software Foundation")
  query="$query&transcoders=$tc&sae=$sae&graph=$graph_prompt"
fi
# The bare address redirects to $query, so the page opens with the model loaded.
if [ "$port" = 0 ]; then echo "demo: the page below opens with $query"
else echo "demo: open http://127.0.0.1:$port/ (it opens with $query)"; fi
# /weights: the downloaded models first, then the committed small one.
exec node scripts/serve.mjs --dir build/site --port "$port" --isolate --root-query "$query" \
  --mount /weights="$weights_dir" --mount /weights=weights
