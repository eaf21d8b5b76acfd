// scripts/demo.sh as a new user meets it, on the build under test (GPT2_DEMO_NO_BUILD=1):
// - offline (Hugging Face unreachable, no weights): it serves the committed small model, the
//   page loads it without a click, names it and says why its text is odd;
// - online (a local server laid out like Hugging Face): it runs get-weights.sh itself and the
//   page opens the converted model.
import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {artifact, kRoot, launchBrowser, watchConsole} from './browser.mjs';
import {makeCheckpoint, startFakeHf} from './fake-hf.mjs';

const kTimeout = 120_000;
const kTiny = path.join(kRoot, 'weights/gpt2-tiny-q8_0.gguf');
const skip = (!fs.existsSync(path.join(kRoot, 'build/site/index.html')) && 'build/site not built') ||
    (!fs.existsSync(kTiny) && 'weights/gpt2-tiny-q8_0.gguf missing');

// Starts the demo; resolves once it serves, with its output so far and the page's address.
function startDemo(env) {
  const child = spawn('bash', [path.join(kRoot, 'scripts/demo.sh')], {
    env: {...process.env, PORT: '0', GPT2_DEMO_NO_BUILD: '1', ...env}, detached: true, stdio: ['ignore', 'pipe', 'pipe']});
  let out = '';
  const stop = () => { try { process.kill(-child.pid, 'SIGTERM'); } catch {} };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { stop(); reject(new Error(`demo did not start serving:\n${out}`)); }, kTimeout);
    const onData = (d) => {
      out += d;
      const served = out.match(/Serving .* at (http:\/\/\S+)/);
      const query = out.match(/with (\?model=\S+)/);
      if (served && query) {
        clearTimeout(timer);
        resolve({url: served[1], query: query[1], output: () => out, stop});
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`demo exited (${code}):\n${out}`)); });
  });
}

async function openPage(browser, url) {
  const page = await browser.context.newPage();
  const lines = watchConsole(page);
  await page.goto(url);
  await page.waitForFunction(() => document.querySelector('[data-testid=progress]').dataset.source ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
  assert.equal(await page.getByTestId('error').isVisible(), false,
               `${await page.getByTestId('error').textContent()}\n${lines.join('\n')}`);
  return page;
}

describe('scripts/demo.sh', {skip}, () => {
  let browser;
  const dirs = [];
  before(async () => { browser = await launchBrowser(); });
  after(async () => {
    await browser?.close();
    dirs.forEach((d) => fs.rmSync(d, {recursive: true, force: true}));
  });
  const emptyWeights = () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-demo-'));
    dirs.push(d);
    return d;
  };

  test('offline: serves the small trained model, and the page names it and says why; its dictionaries load and ' +
       'its graph computes with no request beyond the demo', async () => {
    const demo = await startDemo({GPT2_WEIGHTS_URL: 'http://127.0.0.1:9/openai-community/gpt2/resolve/main',
                                  GPT2_WEIGHTS_DIR: emptyWeights()});
    try {
      assert.match(demo.output(), /opening the small offline model/);
      assert.match(demo.query, new RegExp('^\\?model=weights/gpt2-tiny-q8_0\\.gguf&transcoders=weights/gpt2-tiny-transcoders\\.gguf' +
                                          '&sae=weights/gpt2-tiny-sae-blocks\\.2\\.hook_resid_pre\\.gguf&graph=\\S+$'));
      // The bare address (what the README says to open) redirects to the page with the model.
      const requests = [];
      browser.context.on('request', (r) => requests.push(r.url()));
      const page = await openPage(browser, demo.url);
      assert.ok(page.url().endsWith(demo.query), page.url());
      assert.equal(await page.getByTestId('progress').getAttribute('data-loaded'), String(fs.statSync(kTiny).size));
      assert.match(await page.getByTestId('model-name').textContent(), /gpt2-tiny.*not GPT-2 itself/);
      const note = page.getByTestId('model-note');
      assert.ok(await note.isVisible());
      assert.match(await note.textContent(), /English-like but odd/);
      // It writes text: a few greedy tokens.
      await page.getByTestId('temperature').fill('0');
      await page.getByTestId('max-tokens').fill('8');
      await page.getByTestId('generate').click();
      await page.waitForFunction(() => document.querySelector('[data-testid=stats]').dataset.reason, null, {timeout: kTimeout});
      assert.equal(await page.getByTestId('stats').getAttribute('data-generated'), '8');
      // The transcoders and the SAE came with the model; the graph of the link's prompt computes.
      await page.waitForFunction(() => document.querySelector('[data-testid=graph-view] [data-node-id]') ||
                                       !document.querySelector('[data-testid=graph-error]').hidden, null, {timeout: kTimeout});
      assert.equal(await page.getByTestId('graph-error').isVisible(), false, await page.getByTestId('graph-error').textContent());
      assert.match(await page.getByTestId('graph-transcoders-status').textContent(), /all 4 blocks/);
      await page.waitForFunction(() => /blocks\.2\.hook_resid_pre/.test(document.querySelector('[data-testid=sae-list]').textContent),
                                 null, {timeout: kTimeout});
      const origin = new URL(demo.url).origin;
      assert.deepEqual(requests.filter((u) => !u.startsWith(origin) && !u.startsWith('blob:') && !u.startsWith('data:')), [],
                       'no request leaves the demo\'s host');
      await page.screenshot({path: artifact('demo-offline.png')});
      await page.close();
    } finally {
      demo.stop();
    }
  });

  test('online: fetches the weights with get-weights.sh, then opens them', async () => {
    const hf = await startFakeHf({files: makeCheckpoint(kRoot)});
    const dir = emptyWeights();
    const demo = await startDemo({GPT2_WEIGHTS_URL: hf.url, GPT2_WEIGHTS_DIR: dir}).catch(async (e) => { await hf.close(); throw e; });
    try {
      assert.match(demo.output(), /Hugging Face is reachable, so downloading GPT-2 small/);
      assert.match(demo.output(), /model\.safetensors verified/);
      assert.equal(demo.query, '?model=weights/gpt2-q8_0.gguf');
      const page = await openPage(browser, demo.url);
      assert.equal(await page.getByTestId('progress').getAttribute('data-loaded'),
                   String(fs.statSync(path.join(dir, 'gpt2-q8_0.gguf')).size));
      assert.match(await page.getByTestId('model-name').textContent(), /GPT-2 small/);
      assert.equal(await page.getByTestId('model-note').isVisible(), false);
      await page.close();
    } finally {
      demo.stop();
      await hf.close();
    }
  });
});
