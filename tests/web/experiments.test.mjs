// The Experiments panel in headless Chromium, against the native CLI run with the same
// intervention flags (`gpt2 inspect/generate --ablate-heads/--post-norm/--no-residual`): the
// page forwards the switches to the engine, so its numbers must be the CLI's.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {kRoot, launchBrowser, serveSite, watchConsole} from './browser.mjs';
import {closeTo, kNative, kPrompt, kSampling, makeModels, modelDir, nativeGenerate, nativeInspect} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 60_000;
const kGpt2 = path.join(kNative, 'gpt2');

function nativeInspectWith(model, flags) {
  const json = path.join(path.dirname(model), `inspect-${flags.join('_')}.json`);
  execFileSync(kGpt2, ['inspect', '--model', model, '--prompt', kPrompt, '--json', json, '--threads', '1', ...flags],
               {stdio: 'pipe'});
  return JSON.parse(fs.readFileSync(json, 'utf8'));
}

function nativeGenerateWith(model, flags, s = kSampling) {
  const out = execFileSync(kGpt2, [
    'generate', '--model', model, '--prompt', kPrompt, '--n', String(s.maxTokens), '--temp', String(s.temperature),
    '--top-k', String(s.topK), '--top-p', String(s.topP), '--seed', String(s.seed), '--threads', '1', '--print-ids',
    ...flags], {encoding: 'utf8'});
  const lines = out.trimEnd().split('\n');
  return lines[lines.length - 1].trim().split(/\s+/).map(Number);
}

function nativeLogProbs(inspect, p) {
  const t = inspect.tensors.find((x) => x.name === 'logits');
  const V = t.shape[1];
  const row = t.data.slice(p * V, (p + 1) * V);
  const max = Math.max(...row);
  const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
  return row.map((x) => x - lse);
}

// KL(plain || changed) over the whole vocabulary at position p, from the CLI's logits (float64).
function nativeKl(plain, changed, p) {
  const probs = (inspect) => {
    const t = inspect.tensors.find((x) => x.name === 'logits');
    const V = t.shape[1];
    const row = t.data.slice(p * V, (p + 1) * V);
    const max = Math.max(...row);
    const e = row.map((x) => Math.exp(x - max));
    const sum = e.reduce((a, b) => a + b, 0);
    return e.map((x) => x / sum);
  };
  const a = probs(plain), b = probs(changed);
  return a.reduce((s, x, i) => s + (x > 0 ? x * Math.log(x / b[i]) : 0), 0);
}

async function listOf(page, testid) {
  return page.locator(`[data-testid=${testid}] li`).evaluateAll(
      (lis) => lis.map((li) => ({id: Number(li.dataset.id), prob: Number(li.dataset.prob)})));
}

// The page's top 10 equal the CLI's final distribution at the last prompt token.
function sameTop(list, fin, what) {
  assert.equal(list.length, 10, `${what}: 10 entries`);
  for (let k = 0; k < 5; ++k) {
    assert.equal(list[k].id, fin.top_ids[k], `${what}: top-${k} id`);
    closeTo(list[k].prob, fin.top_probs[k], 2e-3, `${what}: top-${k} prob`);
  }
}

async function runAgain(page) {
  await page.evaluate(() => { document.querySelector('[data-testid=exp-kl]').removeAttribute('data-kl'); });
  await page.getByTestId('exp-run-again').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=exp-kl]').dataset.kl !== undefined ||
                                   !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
  const err = page.getByTestId('error');
  if (await err.isVisible()) throw new Error(`page error: ${await err.textContent()}`);
  return Number(await page.getByTestId('exp-kl').getAttribute('data-kl'));
}

describe('the Experiments panel', {skip: !fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built'}, () => {
  let models, server, browser, page, plain, T;
  const consoleLines = [];

  before(async () => {
    models = makeModels('experiments');
    plain = nativeInspect(models.model);
    T = plain.ids.length;
    server = await serveSite({site: kSite, models: modelDir('experiments')});
    browser = await launchBrowser();
    page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await page.goto(server.url + '?model=models/tiny-q8_0.gguf&debug=1');
    await page.waitForFunction(() => document.querySelector('[data-testid=progress]').dataset.source ||
                                     !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
    for (const [id, v] of Object.entries({temperature: kSampling.temperature, 'top-k': kSampling.topK,
                                          'top-p': kSampling.topP, seed: kSampling.seed, 'max-tokens': kSampling.maxTokens})) {
      await page.getByTestId(id).fill(String(v));
    }
    await page.getByTestId('prompt').fill(kPrompt);
    await page.getByTestId('generate').click();
    await page.waitForSelector('[data-testid=probs] li', {timeout: kTimeout});
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('knocking a head out changes the probabilities and the text exactly as --ablate-heads does', async () => {
    await page.getByTestId('exp-knock-mode').check();
    const cell = page.locator('[data-testid=attention-grid] .attn-cell[data-layer="1"][data-head="2"]');
    await cell.click();
    await page.waitForSelector('[data-testid=attention-grid] .attn-cell.knocked-out[data-layer="1"][data-head="2"]');
    assert.match(await page.getByTestId('exp-summary').textContent(), /head 1\.2 knocked out/);
    const kl = await runAgain(page);
    const ablated = nativeInspectWith(models.model, ['--ablate-heads', '1.2']);
    sameTop(await listOf(page, 'exp-before'), plain.final[T - 1], 'before');
    sameTop(await listOf(page, 'exp-after'), ablated.final[T - 1], 'after');
    assert.ok(kl > 0, `KL ${kl} > 0`);
    closeTo(kl, nativeKl(plain, ablated, T - 1), 2e-3, 'KL divergence');
    // Same seed: the plain text is `gpt2 generate`'s, the changed one `gpt2 generate --ablate-heads 1.2`'s.
    const textIds = async (id) => (await page.getByTestId(id).getAttribute('data-ids')).split(' ').map(Number);
    assert.deepEqual(await textIds('exp-text-before'), nativeGenerate(models.model));
    const changed = nativeGenerateWith(models.model, ['--ablate-heads', '1.2']);
    assert.deepEqual(await textIds('exp-text-after'), changed);
    const plainIds = nativeGenerate(models.model);
    let parts = 0;
    while (parts < changed.length && changed[parts] === plainIds[parts]) parts++;
    assert.equal(Number(await page.getByTestId('exp-text-after').getAttribute('data-parts-at')), parts);
    // The views now show the changed model's run: the probabilities panel too.
    await page.waitForFunction((id) => Number(document.querySelector('[data-testid=probs] li').dataset.id) === id,
                               ablated.final[T - 1].top_ids[0], {timeout: kTimeout});
    sameTop(await listOf(page, 'probs'), ablated.final[T - 1], 'probs panel');

    // Reset: the plain model again, nothing changes.
    await page.getByTestId('exp-reset').click();
    await page.waitForFunction(() => !document.querySelector('.attn-cell.knocked-out'));
    assert.equal(await runAgain(page), 0);
    sameTop(await listOf(page, 'exp-after'), plain.final[T - 1], 'after reset');
  });

  test('the anatomy view equals the formulas and the engine\'s count of the file\'s tensors', async () => {
    const info = await page.evaluate(() => window.gpt2Page.state.info);
    const d = info.n_embd, f = info.n_ff, L = info.n_layer, s = await page.locator('[data-testid=tokens] .chip').count();
    const value = async (key) => Number(await page.locator(`[data-testid=anatomy] tr[data-key="${key}"]`).getAttribute('data-value'));
    assert.equal(await value('attention'), 4 * d * d + 4 * d);
    assert.equal(await value('mlp'), 2 * d * f + f + d);
    assert.equal(await value('block'), 4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d);
    assert.equal(await value('total'), info.parameters, 'the formulas count every tensor in the file');
    assert.equal(await value('flops'), L * (2 * s * (4 * d * d + 2 * d * f) + 4 * s * s * d));
    assert.equal(await value('kv-bytes'), 2 * L * s * d * 4);
  });

  test('post-norm and no-residual match the CLI; the diagram redraws in post-norm order', async () => {
    const order = () => page.locator('[data-testid=exp-diagram] .step').evaluateAll((s) => s.map((e) => e.dataset.step));
    assert.deepEqual(await order(), ['x in', 'ln_1', 'attn', 'add1', 'ln_2', 'mlp', 'add2', 'x out']);
    await page.getByTestId('exp-post-norm').check();
    await page.waitForFunction(() => document.querySelector('[data-testid=exp-diagram] .step:nth-child(2)').dataset.step === 'attn');
    assert.deepEqual(await order(), ['x in', 'attn', 'add1', 'ln_1', 'mlp', 'add2', 'ln_2', 'x out']);
    await runAgain(page);
    sameTop(await listOf(page, 'exp-after'), nativeInspectWith(models.model, ['--post-norm']).final[T - 1], 'post-norm');

    await page.getByTestId('exp-reset').click();
    await page.locator('#layer-select').selectOption('1');
    await page.getByTestId('exp-no-residual').check();
    assert.match(await page.getByTestId('exp-summary').textContent(), /block 1 without residual/);
    await page.waitForSelector('[data-testid=exp-diagram] .step.off[data-step="add1"]');
    await runAgain(page);
    sameTop(await listOf(page, 'exp-after'), nativeInspectWith(models.model, ['--no-residual', '1']).final[T - 1],
            'no residual');
    assert.deepEqual((await page.getByTestId('exp-text-after').getAttribute('data-ids')).split(' ').map(Number),
                     nativeGenerateWith(models.model, ['--no-residual', '1']));
    await page.getByTestId('exp-reset').click();
  });

  test('the heads ranking equals a brute-force loop of `gpt2 inspect --ablate-heads` over every head', async () => {
    const target = Number(await page.getByTestId('sweep-target').getAttribute('data-id'));
    const picked = Number(await page.locator('[data-testid=tokens] .chip.picked').getAttribute('data-position'));
    assert.equal(picked, T - 1);
    await page.getByTestId('sweep-run').click();
    await page.waitForSelector('[data-testid=sweep-results] li', {timeout: kTimeout});
    const shown = await page.locator('[data-testid=sweep-results] li').evaluateAll(
        (lis) => lis.map((li) => ({layer: Number(li.dataset.layer), head: Number(li.dataset.head), drop: Number(li.dataset.drop)})));
    const {n_layer: L, n_head: H} = plain.config;
    const base = nativeLogProbs(plain, T - 1)[target];
    const brute = [];
    for (let l = 0; l < L; ++l) {
      for (let h = 0; h < H; ++h) {
        const lp = nativeLogProbs(nativeInspectWith(models.model, ['--ablate-heads', `${l}.${h}`]), T - 1)[target];
        brute.push({layer: l, head: h, drop: base - lp});
      }
    }
    brute.sort((a, b) => b.drop - a.drop || a.layer - b.layer || a.head - b.head);
    assert.equal(shown.length, L * H);
    shown.forEach((x, i) => closeTo(x.drop, brute[i].drop, 2e-3, `drop of rank ${i}`));
    // Ranks may only swap where the CLI's drops are closer than the two builds' rounding.
    shown.forEach((x, i) => {
      const same = x.layer === brute[i].layer && x.head === brute[i].head;
      const tie = Math.abs(brute.find((b) => b.layer === x.layer && b.head === x.head).drop - brute[i].drop) < 1e-3;
      assert.ok(same || tie, `rank ${i}: page ${x.layer}.${x.head}, CLI ${brute[i].layer}.${brute[i].head}`);
    });
    assert.notEqual(brute[0].drop, brute[brute.length - 1].drop, 'the heads differ');
    // The views still show the conversation under the page's (now no) interventions.
    assert.equal(await page.getByTestId('sweep-run').isDisabled(), false);
  });

  test('the heads ranking can be cancelled and says so', async () => {
    // Both clicks in one task: the worker takes the cancel between the first and second head.
    await page.evaluate(() => {
      document.querySelector('[data-testid=sweep-run]').click();
      document.querySelector('[data-testid=sweep-cancel]').click();
    });
    await page.waitForFunction(() => /Cancelled after/.test(document.querySelector('[data-testid=sweep]').textContent),
                               null, {timeout: kTimeout});
    assert.ok(await page.locator('[data-testid=sweep-results] li').count() < plain.config.n_layer * plain.config.n_head);
    assert.equal(await page.getByTestId('sweep-run').isDisabled(), false);
    assert.equal(await page.getByTestId('error').isVisible(), false);
  });
});
