// The threaded engine in headless Chromium. Served with COOP/COEP (serve.mjs --isolate) the page
// is cross-origin isolated, so its worker loads gpt2-engine-mt (pthreads) and splits matmul rows
// and attention heads over several threads; without the headers it must fall back to the
// single-threaded gpt2-engine and say so. Either way the sampled ids must equal the native CLI's:
// every output row is computed by one thread in the same order whatever the split, so the
// thread count may not change a single bit of the logits.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {artifact, kRoot, launchBrowser, serveSite} from './browser.mjs';
import {kPrompt, kSampling, loadAndGenerate, makeModels, modelDir, nativeGenerate, openPage} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kThreads = 3;  // more than 1 even on a one-core machine, where the default would be 1

// A copy of build/site without `missing` (a host given only part of the site).
function partialSite(name, missing) {
  const dir = path.join(modelDir('threads'), name);
  fs.rmSync(dir, {recursive: true, force: true});
  fs.cpSync(kSite, dir, {recursive: true});
  for (const f of missing) fs.rmSync(path.join(dir, f));
  return dir;
}

describe('threads in headless Chromium', {skip: !fs.existsSync(path.join(kSite, 'worker', 'gpt2-engine-mt.js')) && 'build/site has no threaded engine'}, () => {
  let models, expectedIds, browser;
  const consoleLines = [];

  before(async () => {
    models = makeModels('threads');
    expectedIds = nativeGenerate(models.model);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('the native CLI samples the same ids with 1 and 3 threads', () => {
    // The page's claim rests on this property of the engine; check it where it is cheapest.
    assert.deepEqual(nativeGenerate(models.model, kPrompt, kSampling, kThreads), expectedIds);
  });

  test('cross-origin isolated: the threaded engine, several threads, the native ids', async () => {
    const server = await serveSite({site: kSite, models: modelDir('threads'), isolate: true});
    try {
      // Default: min(hardwareConcurrency, 4) threads.
      let page = await openPage(browser, server.url, consoleLines);
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), true);
      const expectedDefault = await page.evaluate(() => Math.min(navigator.hardwareConcurrency, 4));
      let stats = page.getByTestId('stats');
      assert.equal(await stats.getAttribute('data-isolated'), 'true');
      assert.equal(Number(await stats.getAttribute('data-threads')), expectedDefault);
      await page.close();

      // An explicit count, so the test means "several threads" on any machine.
      page = await openPage(browser, server.url + `?threads=${kThreads}`, consoleLines);
      const ids = await loadAndGenerate(page);
      assert.deepEqual(ids, expectedIds, 'ids equal `gpt2 generate --threads 1` for the same seed');
      // The engine reports the threads its pool really started (the model info and the stats).
      stats = page.getByTestId('stats');
      assert.equal(Number(await stats.getAttribute('data-threads')), kThreads);
      const text = await stats.textContent();
      assert.match(text, new RegExp(`${kThreads} threads \\(cross-origin isolated\\)`));
      assert.match(text, /tokens\/s/);
      const threadsRow = page.locator('#model-info dd', {hasText: 'threads'});
      assert.equal(await threadsRow.textContent(), `${kThreads} threads (cross-origin isolated)`);
      // The pthreads module, not the single-threaded one, was fetched.
      // Chromium has relaxed SIMD: the threaded module's relaxed twin (web/worker/relaxed-simd.js).
      assert.ok(server.requests('/worker/gpt2-engine-mt-relaxed.wasm') >= 1, 'gpt2-engine-mt-relaxed.wasm was requested');
      assert.equal(server.requests('/worker/gpt2-engine.wasm') + server.requests('/worker/gpt2-engine-relaxed.wasm'), 0,
                   'the single-threaded engine was not loaded');
      await page.screenshot({path: artifact('threads-isolated.png'), fullPage: true});
      await page.close();
    } finally {
      await server.close();
    }
  });

  test('isolated, but the threaded engine cannot start: one thread, said why, the same ids', async () => {
    // A host given only part of the site: the pthread worker's script is missing.
    const partial = partialSite('site-without-pthread-worker', ['worker/gpt2-engine-mt.worker.js']);
    const server = await serveSite({site: partial, models: modelDir('threads'), isolate: true});
    try {
      const page = await openPage(browser, server.url, consoleLines);
      const ids = await loadAndGenerate(page);
      assert.deepEqual(ids, expectedIds);
      const stats = page.getByTestId('stats');
      assert.equal(await stats.getAttribute('data-threads'), '1');
      assert.match(await stats.textContent(),
                   /1 thread \(cross-origin isolated; the threaded engine could not start: gpt2-engine-mt\.worker\.js: 404/);
      assert.equal(await page.getByTestId('error').isVisible(), false);
      await page.close();
    } finally {
      await server.close();
    }
  });

  test('not isolated: one thread, said in words, and the same ids', async () => {
    const server = await serveSite({site: kSite, models: modelDir('threads')});
    try {
      const page = await openPage(browser, server.url + `?threads=${kThreads}`, consoleLines);
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), false);
      const ids = await loadAndGenerate(page);
      assert.deepEqual(ids, expectedIds);
      const stats = page.getByTestId('stats');
      assert.equal(await stats.getAttribute('data-isolated'), 'false');
      assert.equal(await stats.getAttribute('data-threads'), '1');
      assert.match(await stats.textContent(), /1 thread \(page not cross-origin isolated\), relaxed SIMD \(FMA\)/);
      assert.equal(server.requests('/worker/gpt2-engine-mt.wasm') + server.requests('/worker/gpt2-engine-mt-relaxed.wasm'), 0,
                   'the threaded engine was not loaded');
      await page.close();
    } finally {
      await server.close();
    }
  });

  test('a host without the relaxed SIMD twins: the plain engine, said so, the same ids', async () => {
    const partial = partialSite('site-without-relaxed', ['worker/gpt2-engine-relaxed.wasm', 'worker/gpt2-engine-mt-relaxed.wasm']);
    const server = await serveSite({site: partial, models: modelDir('threads')});
    try {
      const page = await openPage(browser, server.url, consoleLines);
      const ids = await loadAndGenerate(page);
      assert.deepEqual(ids, expectedIds);
      // ... and why: the page's f32 prompts run at about 0.6x without the twin.
      assert.match(await page.getByTestId('stats').textContent(),
                   /1 thread \(page not cross-origin isolated\), SIMD128 \(the relaxed SIMD build could not start: .+\)/);
      assert.ok(server.requests('/worker/gpt2-engine-relaxed.wasm') >= 1, 'the relaxed twin was tried first');
      assert.ok(server.requests('/worker/gpt2-engine.wasm') >= 1, 'then the plain module');
      assert.equal(await page.getByTestId('error').isVisible(), false);
      await page.close();
    } finally {
      await server.close();
    }
  });
});
