// Sharing the view as a link in headless Chromium: the link restores the prompt, the sampling
// settings, the interventions and the picked token, block and head once the model is loaded
// (the text regenerated equals `gpt2 generate` with the same flags); a link with garbage
// parameters opens anyway, names what it ignored and keeps the rest.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {kRoot, launchBrowser, serveSite, watchConsole} from './browser.mjs';
import {kNative, makeModels, modelDir} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 60_000;

async function waitGenerated(page) {
  await page.waitForFunction(() => document.querySelector('[data-testid=stats]').dataset.reason ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
  await page.waitForSelector('[data-testid=probs] li', {timeout: kTimeout});
}

const ids = async (page) => (await page.getByTestId('output-ids').textContent()).trim().split(/\s+/).map(Number);

describe('sharing the view as a link', {skip: !fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built'}, () => {
  let models, server, browser;
  const consoleLines = [];

  before(async () => {
    models = makeModels('share');
    server = await serveSite({site: kSite, models: modelDir('share')});
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('a shared link round-trips the prompt, settings, interventions and picks', async () => {
    const page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await page.goto(server.url + '?model=models/tiny-q8_0.gguf');
    await page.waitForFunction(() => document.querySelector('[data-testid=progress]').dataset.source, null, {timeout: kTimeout});
    const prompt = 'Sharing & restoring: a prompt with ?odd= characters';
    await page.getByTestId('prompt').fill(prompt);
    for (const [id, v] of [['temperature', '0.7'], ['top-k', '5'], ['top-p', '0.9'], ['seed', '42'], ['max-tokens', '9']]) {
      await page.getByTestId(id).fill(v);
    }
    // Interventions first, so the generation itself runs under them.
    await page.locator('#layer-select').waitFor();
    await page.locator('#layer-select').selectOption('1');
    await page.getByTestId('exp-skip-mlp').check();
    await page.getByTestId('exp-post-norm').check();
    await page.getByTestId('generate').click();
    await waitGenerated(page);
    await page.getByTestId('exp-knock-mode').check();
    await page.locator('.attn-cell[data-layer="0"][data-head="3"]').click();
    await page.getByTestId('exp-knock-mode').uncheck();
    await page.locator('[data-testid=tokens] .chip[data-position="4"]').click();
    await page.locator('.attn-cell[data-layer="1"][data-head="2"]').click();
    const summary = await page.getByTestId('exp-summary').textContent();
    assert.match(summary, /head 0\.3 knocked out.*block 1 MLP skipped.*post-norm/);
    await page.getByTestId('share').click();
    const link = await page.getByTestId('share-url').inputValue();
    assert.equal(link, page.url(), 'the address bar holds the link too');
    const q = new URL(link).searchParams;
    assert.equal(q.get('prompt'), prompt);
    assert.equal(q.get('ablate'), '0.3');
    assert.equal(q.get('pick'), '4');
    await page.close();

    // The same text under the same interventions, from the CLI.
    const native = execFileSync(path.join(kNative, 'gpt2'), [
      'generate', '--model', models.model, '--prompt', prompt, '--n', '9', '--temp', '0.7', '--top-k', '5',
      '--top-p', '0.9', '--seed', '42', '--threads', '1', '--print-ids', '--activations', 'int8',
      '--ablate-heads', '0.3', '--skip-mlp', '1',
      '--post-norm'], {encoding: 'utf8'}).trimEnd().split('\n').pop().trim().split(/\s+/).map(Number);

    const restored = await browser.context.newPage();
    consoleLines.push(...watchConsole(restored));
    await restored.goto(link);
    await waitGenerated(restored);
    await restored.waitForFunction(() => document.querySelector('[data-testid=tokens] .chip.picked')?.dataset.position === '4');
    assert.equal(await restored.getByTestId('prompt').inputValue(), prompt);
    for (const [id, v] of [['temperature', '0.7'], ['top-k', '5'], ['top-p', '0.9'], ['seed', '42'], ['max-tokens', '9']]) {
      assert.equal(await restored.getByTestId(id).inputValue(), v, id);
    }
    assert.equal(await restored.getByTestId('exp-summary').textContent(), summary);
    assert.deepEqual(await ids(restored), native, 'the regenerated text is the CLI\'s under the same flags');
    assert.equal(await restored.locator('#layer-select').inputValue(), '1');
    assert.equal(await restored.locator('#head-select').inputValue(), '2');
    await restored.waitForSelector('.attn-cell.chosen[data-layer="1"][data-head="2"]');
    await restored.waitForSelector('.attn-cell.knocked-out[data-layer="0"][data-head="3"]');
    assert.equal(await restored.getByTestId('share-note').isVisible(), false);
    assert.equal(await restored.getByTestId('error').isVisible(), false);
    await restored.close();
  });

  test('garbage parameters are ignored with a visible note, the rest still applies', async () => {
    const page = await browser.context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const q = new URLSearchParams({model: 'models/tiny-q8_0.gguf', prompt: 'Hello there', temperature: 'abc', 'top-k': '3',
                                   seed: '-5', 'max-tokens': '5000', ablate: '1.9,0.1', 'skip-attn': 'x', 'no-residual': '7',
                                   'post-norm': 'maybe', pick: '999', block: 'zz', head: '11'});
    await page.goto(`${server.url}?${q}`);
    const note = page.getByTestId('share-note');
    await note.waitFor({state: 'visible'});
    await waitGenerated(page);
    await page.waitForFunction(() => /pick=999/.test(document.querySelector('[data-testid=share-note]').textContent));
    const text = await note.textContent();
    for (const bad of ['temperature=abc', 'seed=-5', 'skip-attn=x', 'post-norm=maybe', 'block=zz', 'max-tokens=5000',
                       'ablate=1.9', 'no-residual=7', 'head=11', 'pick=999']) {
      assert.ok(text.includes(bad), `the note names ${bad}: ${text}`);
    }
    assert.ok(!text.includes('top-k'), 'a good parameter is not named');
    assert.equal(await page.getByTestId('top-k').inputValue(), '3', 'the good parameters apply');
    assert.equal(await page.getByTestId('prompt').inputValue(), 'Hello there');
    // The head that exists is knocked out; the one that does not is dropped.
    assert.match(await page.getByTestId('exp-summary').textContent(), /^Changes: head 0\.1 knocked out\.$/);
    assert.equal(await page.getByTestId('error').isVisible(), false);
    assert.ok((await ids(page)).length > 0, 'the text was generated');
    assert.deepEqual(errors, []);
    await page.close();
  });
});
