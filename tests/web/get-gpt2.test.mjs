// "Get GPT-2 small from Hugging Face" in headless Chromium, against a local server laid out and
// answering like huggingface.co (tests/web/fake-hf.mjs: the 302 to a CDN path, CORS headers) on
// another origin than the page (?hf=BASE). The page downloads, converts in its worker with the
// engine's Converter, and generates the ids the native CLI generates from `gpt2-convert`'s file
// of the same checkpoint; a second visit loads the cached conversion with no request; a
// dropped connection is resumed with a Range request, or, where the server cannot resume, fails
// with a clear message and leaves nothing in the cache.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {generateIds, kRoot, launchBrowser, serveSite, waitCached, waitLoaded, watchConsole} from './browser.mjs';
import {makeCheckpoint, startFakeHf} from './fake-hf.mjs';
import {kNative, kPrompt, modelDir, nativeGenerate} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 120_000;
const kGreedy = {temperature: 0, topK: 0, topP: 1, seed: 1, maxTokens: 12};
const skip = (!fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built') ||
             (!fs.existsSync(path.join(kNative, 'gpt2-convert')) && 'build/native not built');

// The page's progress lines as drawn, and the worker's progress messages (a conversion of the
// small checkpoint is over within one frame, so its steps are read from the messages).
function recordProgress() {
  window.progressLog = [];
  window.progressMessages = [];
  const PageWorker = window.Worker;
  window.Worker = class extends PageWorker {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', ({data}) => { if (data.type === 'progress') window.progressMessages.push(data); });
    }
  };
  const watch = () => {
    const el = document.getElementById('progress-text');
    if (!el) { requestAnimationFrame(watch); return; }
    new MutationObserver(() => window.progressLog.push(el.textContent))
        .observe(el, {childList: true, characterData: true, subtree: true});
  };
  watch();
}

// A page of the site pointed at the fake Hugging Face (?hf=BASE), ready for a click.
async function openPage(browser, site, hf, consoleLines, query = '') {
  const page = await browser.context.newPage();
  consoleLines.push(...watchConsole(page));
  await page.addInitScript(recordProgress);
  await page.goto(`${site.url}?hf=${encodeURIComponent(new URL(hf.url).origin)}${query}`);
  await page.waitForFunction(() => !document.querySelector('[data-testid=get-gpt2]').disabled, null, {timeout: kTimeout});
  return page;
}

// What the page says the chosen size needs, once it matches re (the page draws at its next frame).
async function needText(page, re) {
  await page.waitForFunction((source) => new RegExp(source, 's').test(document.querySelector('[data-testid=hf-need]').textContent),
                             re.source, {timeout: 5000}).catch(() => {});
  return page.getByTestId('hf-need').textContent();
}

const generateGreedy = (page) => generateIds(page, kPrompt, kGreedy, kTimeout);
const cachedKeys = (page) => page.evaluate(async () => (await (await caches.open('gpt2-models-v1')).keys()).map((r) => r.url));
const modelGets = (hf) => hf.requests.filter((q) => /^GET \/cdn\/.*model\.safetensors/.test(q)).length;

describe('Get GPT-2 small from Hugging Face', {skip}, () => {
  let files, site, dir;
  const expected = {};
  const consoleLines = [];

  before(async () => {
    files = makeCheckpoint(kRoot);
    dir = modelDir('get-gpt2');
    fs.mkdirSync(dir, {recursive: true});
    for (const [name, bytes] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), bytes);
    // The reference: the native converter and CLI on the same checkpoint.
    for (const type of ['q8_0', 'f16']) {
      const out = path.join(dir, `gpt2-${type}.gguf`);
      execFileSync(path.join(kNative, 'gpt2-convert'), ['--input', dir, '--output', out, '--type', type, '--quiet']);
      expected[type] = nativeGenerate(out, kPrompt, kGreedy);
    }
    site = await serveSite({site: kSite, models: dir});
  });

  after(async () => {
    await site?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('converts in the page, generates the native ids; a second visit uses the cache, no request', async () => {
    const hf = await startFakeHf({files});
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, site, hf, consoleLines);
      assert.match(await page.getByTestId('get-gpt2-note').textContent(), /Only when pressed.*127\.0\.0\.1:\d+/s);
      assert.equal(hf.requests.length, 0, 'nothing is asked of Hugging Face before the button is pressed');
      assert.equal(await page.getByTestId('hf-weights').inputValue(), 'q8_0');
      await page.getByTestId('get-gpt2').click();
      await waitLoaded(page, kTimeout);
      assert.equal(await page.getByTestId('progress').getAttribute('data-source'), 'hf');
      const log = await page.evaluate(() => window.progressLog);
      assert.ok(log.some((l) => /Downloading model\.safetensors: .* of .* \(\d+%\)/.test(l)), log.join('\n'));
      const messages = await page.evaluate(() => window.progressMessages);
      const size = files['model.safetensors'].length;
      assert.ok(messages.some((m) => m.phase === 'download' && m.file === 'model.safetensors' && m.loaded === size &&
                                     m.total === size), JSON.stringify(messages));
      assert.ok(messages.some((m) => m.phase === 'convert' && m.loaded === 16 && m.total === 16), JSON.stringify(messages));
      for (const name of ['config.json', 'vocab.json', 'merges.txt']) {
        assert.ok(hf.requests.includes(`GET /openai-community/gpt2/resolve/main/${name}`), hf.requests.join('\n'));
      }
      // The page asks for the header's bytes first; this server ignores Range and sends the whole
      // file, which is then converted from memory.
      assert.ok(hf.requests.includes(`GET /openai-community/gpt2/resolve/main/model.safetensors (bytes=0-131071)`),
                hf.requests.join('\n'));
      assert.equal(modelGets(hf), 1, 'the weights came through the CDN redirect, once');
      assert.deepEqual(await generateGreedy(page), expected.q8_0, 'greedy ids equal `gpt2 generate` on gpt2-convert\'s file');
      await waitCached(page, kTimeout);
      assert.deepEqual(await cachedKeys(page), [`${hf.url}/gpt2-q8_0.gguf`]);
      await page.close();

      // Second visit: the cached conversion loads by itself, and Hugging Face hears nothing.
      const before = hf.requests.length;
      const again = await openPage(browser, site, hf, consoleLines);
      await waitLoaded(again, kTimeout);
      assert.equal(await again.getByTestId('progress').getAttribute('data-source'), 'cache');
      assert.deepEqual(await generateGreedy(again), expected.q8_0);
      assert.equal(hf.requests.length, before, hf.requests.slice(before).join('\n'));
      await again.close();
    } finally {
      await browser.close();
      await hf.close();
    }
  });

  test('a dropped download resumes with a Range request (F16 chosen, the checkpoint streamed)', async () => {
    const hf = await startFakeHf({files, drop: {'model.safetensors': 2_000_000}, ranges: true});
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, site, hf, consoleLines);
      await page.getByTestId('hf-weights').selectOption('f16');
      await page.getByTestId('get-gpt2').click();
      await waitLoaded(page, kTimeout);
      // Streamed: every request for the weights is a range; the read that dropped is asked for
      // again from where it stopped (2,000,000 bytes into it), not from its start.
      const ranges = hf.requests.filter((q) => /^GET \/cdn\/.*model\.safetensors/.test(q))
          .map((q) => /\(bytes=(\d+)-(\d*)\)$/.exec(q));
      assert.ok(ranges.every((r) => r), hf.requests.join('\n'));
      const starts = ranges.map((r) => Number(r[1]));
      assert.ok(ranges.some((r, i) => starts.includes(Number(r[1]) - 2_000_000) && i > 0), hf.requests.join('\n'));
      assert.deepEqual(await generateGreedy(page), expected.f16);
      await waitCached(page, kTimeout);
      assert.deepEqual(await cachedKeys(page), [`${hf.url}/gpt2-f16.gguf`]);
      await page.close();
    } finally {
      await browser.close();
      await hf.close();
    }
  });

  test('GPT-2 medium streams from its repository by Range requests, byte-equal to gpt2-convert', async () => {
    // The checkpoint is the small test one, served as openai-community/gpt2-medium: what is tested
    // is the page's way to it (the size picked, the repository, the streamed conversion); the
    // widths of the real sizes are tested natively against PyTorch (convert_golden_test.cc).
    const hf = await startFakeHf({files, ranges: true, repo: 'gpt2-medium'});
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, site, hf, consoleLines);
      await page.getByTestId('hf-model').selectOption('gpt2-medium');
      assert.match(await needText(page, /GPT-2 medium/),
                   /GPT-2 medium \(355M\) as Q8_0: a 1\.\d GB download, converted here as it streams into 3\d\d MB .* needs about 4\d\d MB of memory/);
      await page.getByTestId('get-gpt2').click();
      await waitLoaded(page, kTimeout);
      // Every request for the weights asks for a range, no preflight precedes them, and the
      // tensors come from one sequential read after the header's (not a request per tensor).
      const weights = hf.requests.filter((q) => /model\.safetensors/.test(q));
      assert.ok(weights.every((q) => /^GET .*\(bytes=\d+-\d*\)$/.test(q)), weights.join('\n'));
      assert.equal(weights.filter((q) => /^GET \/cdn\//.test(q)).length, 2, weights.join('\n'));
      const key = `${hf.url}/gpt2-medium-q8_0.gguf`;
      await waitCached(page, kTimeout);
      assert.deepEqual(await cachedKeys(page), [key]);
      const cached = await page.evaluate(async (k) => {
        const r = await (await caches.open('gpt2-models-v1')).match(k);
        return Array.from(new Uint8Array(await r.arrayBuffer()));
      }, key);
      const native = fs.readFileSync(path.join(dir, 'gpt2-q8_0.gguf'));
      assert.equal(cached.length, native.length);
      assert.ok(Buffer.from(cached).equals(native), 'the cached conversion equals gpt2-convert\'s file');
      assert.deepEqual(await generateGreedy(page), expected.q8_0);
      await page.close();
    } finally {
      await browser.close();
      await hf.close();
    }
  });

  test('the page says what each size needs and refuses one this device cannot hold', async () => {
    const hf = await startFakeHf({files});
    const browser = await launchBrowser();
    try {
      const page = await browser.context.newPage();
      consoleLines.push(...watchConsole(page));
      // A device with 2 GB of memory, as navigator.deviceMemory says it.
      await page.addInitScript(() => Object.defineProperty(Navigator.prototype, 'deviceMemory', {get: () => 2}));
      await page.goto(`${site.url}?hf=${encodeURIComponent(new URL(hf.url).origin)}`);
      await page.waitForFunction(() => !document.querySelector('[data-testid=get-gpt2]').disabled, null, {timeout: kTimeout});
      await page.getByTestId('hf-model').selectOption('gpt2-xl');
      assert.match(await needText(page, /as Q8_0 needs/),
                   /GPT-2 XL \(1\.5B\) as Q8_0 needs about 2\.\d GB of memory; this device has about 2 GB, too little/);
      assert.equal(await page.getByTestId('get-gpt2').isDisabled(), true);
      assert.equal(await page.locator('[data-testid=hf-weights] option[value=f16]').isDisabled(), true);
      assert.equal(await page.locator('[data-testid=hf-weights] option[value=q4_0]').isDisabled(), false);
      await page.getByTestId('hf-weights').selectOption('q4_0');
      assert.match(await needText(page, /as Q4_0:/), /GPT-2 XL \(1\.5B\) as Q4_0: a 6\.\d GB download/);
      assert.equal(await page.getByTestId('get-gpt2').isDisabled(), false);
      assert.equal(hf.requests.length, 0, 'nothing was asked of Hugging Face');
      await page.close();
    } finally {
      await browser.close();
      await hf.close();
    }
  });

  test('a dropped download the server cannot resume fails clearly and caches nothing', async () => {
    const hf = await startFakeHf({files, drop: {'model.safetensors': 2_000_000}});
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, site, hf, consoleLines);
      await page.getByTestId('get-gpt2').click();
      await page.getByTestId('error').waitFor({state: 'visible', timeout: kTimeout});
      assert.match(await page.getByTestId('error').textContent(),
                   /connection dropped after \d+ bytes of .*model\.safetensors.*could not be resumed/);
      assert.deepEqual(await cachedKeys(page), []);
      assert.equal(await page.getByTestId('get-gpt2').isDisabled(), false, 'the button can be pressed again');
      await page.close();
    } finally {
      await browser.close();
      await hf.close();
    }
  });

  test('the threaded engine (a cross-origin isolated page) converts the same way', async () => {
    const isolated = await serveSite({site: kSite, isolate: true});
    const hf = await startFakeHf({files});
    const browser = await launchBrowser();
    try {
      const page = await openPage(browser, isolated, hf, consoleLines, '&threads=2');
      await page.getByTestId('get-gpt2').click();
      await waitLoaded(page, kTimeout);
      assert.equal(await page.getByTestId('progress').getAttribute('data-source'), 'hf');
      assert.deepEqual(await generateGreedy(page), expected.q8_0);
      assert.equal(Number(await page.getByTestId('stats').getAttribute('data-threads')), 2);
      assert.ok(isolated.requests('/worker/gpt2-engine-mt-relaxed.wasm') >= 1, 'the pthreads module converted');
      assert.equal(isolated.requests('/worker/gpt2-engine.wasm') + isolated.requests('/worker/gpt2-engine-relaxed.wasm'), 0);
      await page.close();
    } finally {
      await browser.close();
      await hf.close();
      await isolated.close();
    }
  });

  test('the page names a model by its general.name when the file has one', async () => {
    // gpt2-convert --name; without it this checkpoint (not one of OpenAI's shapes) has no name.
    execFileSync(path.join(kNative, 'gpt2-convert'), ['--input', dir, '--output', path.join(dir, 'named.gguf'),
                                                      '--name', 'Tiny test GPT', '--quiet']);
    const browser = await launchBrowser();
    try {
      const page = await browser.context.newPage();
      consoleLines.push(...watchConsole(page));
      await page.goto(`${site.url}?model=models/named.gguf`);
      await waitLoaded(page, kTimeout);
      assert.match(await page.getByTestId('model-name').textContent(),
                   /^Running: Tiny test GPT \(1 blocks, 2 M parameters, q8_0 weights\)\.$/);
      await page.goto(`${site.url}?model=models/gpt2-f16.gguf`);
      await waitLoaded(page, kTimeout);
      assert.match(await page.getByTestId('model-name').textContent(), /^Running: GPT-2 small \(OpenAI, 2019/,
                   'an unnamed file is still named by its file name');
      await page.close();
    } finally {
      await browser.close();
    }
  });
});
