// The Experiments panel in headless Chromium, against the native CLI run with the same
// intervention flags (`gpt2 inspect/generate --ablate-heads/--post-norm/--no-residual`): the
// page forwards the switches to the engine, so its numbers must be the CLI's.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {generateIds, kRoot, openSite} from './browser.mjs';
import {closeTo, inspectLogProbs, inspectProbs, klDivergence, kNative, kPrompt, kSampling, makeModels, modelDir, nativeGenerate, nativeInspect, nodeEngine, norm, row, tensor} from './fixtures.mjs';

const kSite = path.join(kRoot, 'build/site');
const kTimeout = 60_000;
const kGpt2 = path.join(kNative, 'gpt2');

// KL(plain || changed) over the whole vocabulary at position p, from the CLI's logits (float64).
const nativeKl = (plain, changed, p) => klDivergence(inspectProbs(plain, p), inspectProbs(changed, p));

// A .npy file read the way numpy.lib.format does: magic, version 1.0, header dict, data.
function parseNpy(bytes) {
  assert.deepEqual([...bytes.subarray(0, 8)], [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0], 'magic and version');
  const headerLength = bytes.readUInt16LE(8);
  assert.equal((10 + headerLength) % 64, 0, 'data aligned to 64 bytes');
  const header = bytes.subarray(10, 10 + headerLength).toString('latin1');
  assert.match(header, /'descr': '<f4'/);
  assert.match(header, /'fortran_order': False/);
  assert.ok(header.endsWith('\n'));
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').map((x) => x.trim()).filter(Boolean).map(Number);
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  for (let i = 0; i < n; ++i) data[i] = bytes.readFloatLE(10 + headerLength + 4 * i);
  assert.equal(bytes.length, 10 + headerLength + 4 * n, 'no bytes after the data');
  return {shape, data};
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

// The page's engine built for Node, loaded with `model`, and the mean head outputs of a plain
// run of kPrompt (what the page's "knock out to the mean" uses).
async function nodeEngineWithMeans(model) {
  const {engine} = await nodeEngine(model);
  engine.setCapture(true);
  engine.prefill(engine.tokenize(kPrompt));
  return {engine, means: engine.headMeans()};
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
  let consoleLines = [];

  before(async () => {
    models = makeModels('experiments');
    plain = nativeInspect(models.model);
    T = plain.ids.length;
    ({server, browser, page, consoleLines} = await openSite({site: kSite, models: modelDir('experiments'), timeout: kTimeout}));
    await generateIds(page, kPrompt, kSampling, kTimeout);
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    if (consoleLines.length) console.log(consoleLines.join('\n'));
  });

  test('an exported .npy parses and equals the CLI\'s inspect tensor, named as TransformerLens names it', async () => {
    const {n_head: H, n_embd: C, n_ff: F} = plain.config;
    const P = await page.locator('[data-testid=tokens] .chip').count();
    await page.locator('#layer-select').selectOption('1');
    for (const [option, cli, width] of [['attn.hook_pattern', 'attn_probs', 0], ['hook_resid_post', 'resid_out', C],
                                        ['mlp.hook_post', 'mlp_act', F]]) {
      await page.getByTestId('export-tensor').selectOption(option);
      const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-npy').click()]);
      assert.equal(download.suggestedFilename(), `blocks.1.${option}.npy`);
      const npy = parseNpy(fs.readFileSync(await download.path()));
      const ref = tensor(plain, cli, 1);
      if (width === 0) {
        assert.deepEqual(npy.shape, [1, H, P, P]);
        for (let h = 0; h < H; ++h) {
          for (let q = 0; q < T; ++q) {
            for (let k = 0; k < T; ++k) {
              closeTo(npy.data[(h * P + q) * P + k], ref.data[(h * T + q) * T + k], 2e-3, `pattern h${h} q${q} k${k}`);
            }
          }
        }
      } else {
        assert.deepEqual(npy.shape, [1, P, width]);
        for (let i = 0; i < T * width; ++i) closeTo(npy.data[i], ref.data[i], 5e-3, `${option}[${i}]`);
      }
    }
    const [json] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-json').click()]);
    const parsed = JSON.parse(fs.readFileSync(await json.path(), 'utf8'));
    assert.equal(parsed.name, 'blocks.1.mlp.hook_post');
    assert.deepEqual(parsed.shape, [1, P, F]);
    await page.locator('#layer-select').selectOption('0');
  });

  test('the attribution heat map holds `gpt2 attribute`\'s values; a click on a head opens it', async () => {
    const target = Number(await page.getByTestId('sweep-target').getAttribute('data-id'));
    await page.getByTestId('attr-run').click();
    await page.waitForFunction(() => window.gpt2Page.state.attribution, null, {timeout: kTimeout});
    const a = await page.evaluate(() => {
      const x = window.gpt2Page.state.attribution;
      return {names: x.names, values: Array.from(x.values), logit: x.logit, target: x.target, position: x.position};
    });
    assert.equal(a.target, target);
    assert.equal(a.position, T - 1);
    const out = execFileSync(kGpt2, ['attribute', '--model', models.model, '--prompt', kPrompt, '--threads', '1',
                                     '--activations', 'int8',
                                     '--target', String(target), '--position', String(T - 1)], {encoding: 'utf8'});
    const lines = out.trimEnd().split('\n').map((l) => l.split('\t'));
    assert.deepEqual(a.names, lines.slice(0, -1).map((l) => l[0]));
    a.values.forEach((v, i) => closeTo(v, Number(lines[i][1]), 2e-3, a.names[i]));
    closeTo(a.logit, Number(lines[lines.length - 1][1]), 2e-3, 'logit');
    // The grid: rows are blocks, columns the heads then the MLP; the readout names each cell.
    // The store draws on the next animation frame after the reply, which a loaded machine delays.
    const canvas = page.getByTestId('attribution');
    await page.waitForFunction(() => document.querySelector('[data-testid="attribution"]')?.hasAttribute('data-rows'),
                               null, {timeout: kTimeout});
    assert.equal(await canvas.getAttribute('data-rows'), String(plain.config.n_layer));
    assert.equal(await canvas.getAttribute('data-cols'), String(plain.config.n_head + 1));
    await canvas.focus();
    await canvas.press('ArrowDown');
    await canvas.press('ArrowRight');
    const readout = page.locator('#attribution-readout');
    closeTo(await readout.getAttribute('data-value'), a.values[a.names.indexOf('1.1')], 1e-5, 'cell 1.1');
    await canvas.press('End');
    closeTo(await readout.getAttribute('data-value'), a.values[a.names.indexOf('mlp.1')], 1e-5, 'MLP column');
    // The heat map as SVG (one rect per cell, its value in a title) and as PNG (the canvas).
    const [svgFile] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-svg-attribution').click()]);
    assert.equal(svgFile.suggestedFilename(), 'gpt2-attribution.svg');
    const svg = fs.readFileSync(await svgFile.path(), 'utf8');
    assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    const rects = [...svg.matchAll(/<rect [^>]*><title>([^<]*)<\/title><\/rect>/g)].map((m) => m[1]);
    assert.equal(rects.length, plain.config.n_layer * (plain.config.n_head + 1));
    assert.match(rects[0], /^Block 0, head 0: /);
    closeTo(Number(rects[0].match(/: ([-+][^ ]+) /)[1]), a.values[a.names.indexOf('0.0')], 1e-3, 'SVG cell 0.0');
    const [pngFile] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-png-attribution').click()]);
    const png = fs.readFileSync(await pngFile.path());
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
    assert.equal(png.readUInt32BE(16), Number(await canvas.evaluate((c) => c.width)), 'PNG width');
    assert.equal(png.readUInt32BE(20), Number(await canvas.evaluate((c) => c.height)), 'PNG height');
    await canvas.focus();
    await canvas.press('Home');
    await canvas.press('Enter');
    await page.waitForFunction(() => document.querySelector('#layer-select').value === '1' &&
                                     document.querySelector('#head-select').value === '0');
    await page.locator('#layer-select').selectOption('0');
  });

  test('knocking a head out changes the probabilities and the text exactly as --ablate-heads does', async () => {
    await page.getByTestId('exp-knock-mode').check();
    const cell = page.locator('[data-testid=attention-grid] .attn-cell[data-layer="1"][data-head="2"]');
    await cell.click();
    await page.waitForSelector('[data-testid=attention-grid] .attn-cell.knocked-out[data-layer="1"][data-head="2"]');
    assert.match(await page.getByTestId('exp-summary').textContent(), /head 1\.2 knocked out/);
    const kl = await runAgain(page);
    const ablated = nativeInspect(models.model, kPrompt, ['--ablate-heads', '1.2']);
    sameTop(await listOf(page, 'exp-before'), plain.final[T - 1], 'before');
    sameTop(await listOf(page, 'exp-after'), ablated.final[T - 1], 'after');
    assert.ok(kl > 0, `KL ${kl} > 0`);
    closeTo(kl, nativeKl(plain, ablated, T - 1), 2e-3, 'KL divergence');
    // Same seed: the plain text is `gpt2 generate`'s, the changed one `gpt2 generate --ablate-heads 1.2`'s.
    const textIds = async (id) => (await page.getByTestId(id).getAttribute('data-ids')).split(' ').map(Number);
    assert.deepEqual(await textIds('exp-text-before'), nativeGenerate(models.model));
    const changed = nativeGenerate(models.model, kPrompt, kSampling, 1, ['--ablate-heads', '1.2']);
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

  test('knocking out to the mean equals the engine given the prompt\'s mean head outputs', async () => {
    await page.getByTestId('exp-knock-mode').check();
    await page.locator('[data-testid=attention-grid] .attn-cell[data-layer="1"][data-head="2"]').click();
    await page.getByTestId('exp-mean-ablation').check();
    assert.match(await page.getByTestId('exp-summary').textContent(), /head 1\.2 knocked out to its mean/);
    await runAgain(page);
    const shown = await listOf(page, 'exp-after');
    const conversation = await page.evaluate(() => window.gpt2Page.state.ids);
    // The reference: the same engine under Node, given the means of a plain run of the prompt.
    const {engine, means} = await nodeEngineWithMeans(models.model);
    const topWith = (iv) => {
      engine.setInterventions(iv);
      engine.reset();
      engine.prefill(conversation);
      return engine.topProbs(T - 1);
    };
    const mean = topWith({ablateHeads: [[1, 2]], headMeans: means}), zero = topWith({ablateHeads: [[1, 2]]});
    for (let k = 0; k < 5; ++k) {
      assert.equal(shown[k].id, mean.ids[k], `top-${k} id`);
      closeTo(shown[k].prob, mean.probs[k], 1e-4, `top-${k} prob`);
    }
    assert.ok(Math.abs(mean.probs[0] - zero.probs[0]) > 1e-4, 'the mean is not zero ablation');
    engine.delete();
    await page.getByTestId('exp-reset').click();
    await page.getByTestId('exp-knock-mode').uncheck();
    assert.equal(await page.getByTestId('exp-mean-ablation').isChecked(), false);
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
    // The KV cache takes the weights' precision: f32 for F32 models, f16 for F16, and for Q8_0
    // and Q4_0 8-bit rows, each head's numbers of a position in blocks of 32 quants and an f16
    // scale.
    const perToken = {f32: 2 * L * d * 4, f16: 2 * L * d * 2,
                      q8_0: 2 * L * info.n_head * Math.ceil(d / info.n_head / 32) * 34}[info.kv_cache];
    assert.equal(info.kv_cache, {f32: 'f32', f16: 'f16', q8_0: 'q8_0', q4_0: 'q8_0'}[info.weight_type]);
    assert.equal(await value('kv-bytes'), s * perToken);
    // The last prefill's measured time of each block: one time per block, together more than
    // nothing and no more than the prefill the page reports (the rest is embedding and
    // unembedding). A single block of this small model can read 0: a page that is not
    // cross-origin isolated gets performance.now() (wasm's clock) in 100 us steps.
    const ms = await page.locator('[data-testid=block-times] tr').evaluateAll((trs) => trs.map((tr) => Number(tr.dataset.ms)));
    assert.equal(ms.length, L);
    for (const t of ms) assert.ok(t >= 0, `block time ${t}`);
    assert.ok(ms.some((t) => t > 0), `block times ${ms}`);
    const prefillMs = await page.evaluate(() => window.gpt2Page.state.statsData.prefillMs);
    assert.ok(ms.reduce((a, b) => a + b, 0) <= prefillMs + 0.5, `blocks ${ms} within the prefill's ${prefillMs} ms`);
    // The same text again (same settings, so the later tests see the same conversation): the
    // table waits for the new prefill's times, then shows them.
    await page.getByTestId('generate').click();
    await page.waitForFunction(() => !window.gpt2Page.state.generating && window.gpt2Page.state.statsData.prefillMs !== undefined,
                               null, {timeout: kTimeout});
    await page.waitForSelector('[data-testid=tokens] .chip.picked');
    assert.equal(await page.locator('[data-testid=block-times] tr').count(), L);
    assert.equal(await page.getByTestId('error').isVisible(), false);
  });

  test('post-norm and no-residual match the CLI; the diagram redraws in post-norm order', async () => {
    const order = () => page.locator('[data-testid=exp-diagram] .step').evaluateAll((s) => s.map((e) => e.dataset.step));
    assert.deepEqual(await order(), ['x in', 'ln_1', 'attn', 'add1', 'ln_2', 'mlp', 'add2', 'x out']);
    // The picked token's norm at the block's three stream points (block 0, plain run).
    const C = plain.config.n_embd;
    const shownNorm = async (step) => Number(await page.locator(`[data-testid=exp-diagram] .step[data-step="${step}"]`)
        .getAttribute('data-norm'));
    closeTo(await shownNorm('x in'), norm(row(tensor(plain, 'embed', -1), T - 1, C)), 5e-3, 'norm entering block 0');
    closeTo(await shownNorm('add1'), norm(row(tensor(plain, 'resid_attn', 0), T - 1, C)), 5e-3, 'norm after attention');
    closeTo(await shownNorm('x out'), norm(row(tensor(plain, 'resid_out', 0), T - 1, C)), 5e-3, 'norm leaving block 0');
    // ... and every step's output in between.
    for (const [step, name] of [['ln_1', 'ln1'], ['attn', 'attn_out'], ['ln_2', 'ln2'], ['mlp', 'mlp_out'],
                                ['add2', 'resid_out']]) {
      closeTo(await shownNorm(step), norm(row(tensor(plain, name, 0), T - 1, C)), 5e-3, `norm of ${step}'s output`);
    }
    await page.getByTestId('exp-post-norm').check();
    await page.waitForFunction(() => document.querySelector('[data-testid=exp-diagram] .step:nth-child(2)').dataset.step === 'attn');
    assert.deepEqual(await order(), ['x in', 'attn', 'add1', 'ln_1', 'mlp', 'add2', 'ln_2', 'x out']);
    await runAgain(page);
    sameTop(await listOf(page, 'exp-after'), nativeInspect(models.model, kPrompt, ['--post-norm']).final[T - 1], 'post-norm');

    await page.getByTestId('exp-reset').click();
    await page.locator('#layer-select').selectOption('1');
    await page.getByTestId('exp-no-residual').check();
    assert.match(await page.getByTestId('exp-summary').textContent(), /block 1 without residual/);
    await page.waitForSelector('[data-testid=exp-diagram] .step.off[data-step="add1"]');
    await runAgain(page);
    sameTop(await listOf(page, 'exp-after'), nativeInspect(models.model, kPrompt, ['--no-residual', '1']).final[T - 1],
            'no residual');
    assert.deepEqual((await page.getByTestId('exp-text-after').getAttribute('data-ids')).split(' ').map(Number),
                     nativeGenerate(models.model, kPrompt, kSampling, 1, ['--no-residual', '1']));
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
    const base = inspectLogProbs(plain, T - 1)[target];
    const brute = [];
    for (let l = 0; l < L; ++l) {
      for (let h = 0; h < H; ++h) {
        const lp = inspectLogProbs(nativeInspect(models.model, kPrompt, ['--ablate-heads', `${l}.${h}`]), T - 1)[target];
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

  test('the heads ranking with "knock out to the mean" equals the engine\'s mean-ablated probes', async () => {
    const target = Number(await page.getByTestId('sweep-target').getAttribute('data-id'));
    await page.getByTestId('exp-mean-ablation').check();
    await page.getByTestId('sweep-run').click();  // its handler drops the last result at once
    await page.waitForFunction(() => window.gpt2Page.state.sweep.result && !window.gpt2Page.state.sweep.running, null,
                               {timeout: kTimeout});
    const result = await page.evaluate(() => window.gpt2Page.state.sweep.result);
    const conversation = await page.evaluate(() => window.gpt2Page.state.ids);
    const {engine, means} = await nodeEngineWithMeans(models.model);
    engine.reset();
    engine.prefill(conversation);
    const {n_layer: L, n_head: H} = plain.config;
    const base = engine.logProbs(T - 1, [target])[0];
    closeTo(result.base, base, 1e-5, 'baseline');
    assert.equal(result.heads.length, L * H);
    let differs = false;
    for (const x of result.heads) {
      closeTo(x.drop, base - engine.ablatedLogProbs([[x.layer, x.head]], T - 1, target, means)[0], 1e-5, `head ${x.layer}.${x.head}`);
      differs ||= Math.abs(x.drop - base + engine.ablatedLogProbs([[x.layer, x.head]], T - 1, target, new Float32Array(0))[0]) > 1e-4;
    }
    assert.ok(differs, 'mean ablation is not zero ablation');
    engine.delete();
    await page.getByTestId('exp-mean-ablation').uncheck();
  });

  test('the heads ranking can be cancelled and says so', async () => {
    // Both clicks in one task, so the cancel is sent right behind the run. The worker usually takes
    // it between the first heads, but the page's message can reach it after the small model's
    // last head (seen once on a loaded machine): then the ranking is whole and must not say it was
    // cancelled. Either way the page must agree with itself; some try must be cut short.
    const total = plain.config.n_layer * plain.config.n_head;
    let cut = 0;
    for (let attempt = 0; attempt < 5 && !cut; ++attempt) {
      await page.evaluate(() => {
        document.querySelector('[data-testid=sweep-run]').click();
        document.querySelector('[data-testid=sweep-cancel]').click();
      });
      await page.waitForFunction(() => window.gpt2Page.state.sweep.running === false, null, {timeout: kTimeout});
      const text = await page.getByTestId('sweep').textContent();
      const ranked = await page.evaluate(() => window.gpt2Page.state.sweep.result.heads.length);
      const said = /Cancelled after (\d+) of (\d+) heads/.exec(text);
      if (said) {
        ++cut;
        assert.ok(Number(said[1]) < total, text);
        assert.equal(Number(said[2]), total, text);
        assert.equal(ranked, Number(said[1]), `${ranked} heads ranked after: ${text}`);
      } else {
        assert.equal(ranked, total, `a ranking not cancelled has every head: ${text}`);
      }
    }
    assert.ok(cut > 0, 'no try of five was cancelled');
    assert.equal(await page.getByTestId('sweep-run').isDisabled(), false);
    assert.equal(await page.getByTestId('error').isVisible(), false);
  });

  test('activation patching: the embedding row brings back all at the changed token and nothing elsewhere', async () => {
    // A corrupted prompt of the same length whose answer differs (found with the CLI).
    const T0 = plain.ids.length;
    let corrupted, corruptInspect;
    for (const c of ['The quick brown cat jumps over', 'The slow brown fox jumps over', 'A quick brown fox jumps over',
                     'The quick red fox jumps over', 'The quick brown dog jumps over', 'The big brown fox jumps over']) {
      const x = nativeInspect(models.model, c);
      if (x.ids.length === T0 && x.final[T0 - 1].top_ids[0] !== plain.final[T0 - 1].top_ids[0]) {
        corrupted = c;
        corruptInspect = x;
        break;
      }
    }
    assert.ok(corrupted, 'a corrupted prompt with another answer');
    const changed = plain.ids.findIndex((id, i) => id !== corruptInspect.ids[i]);
    await page.getByTestId('patch-clean').fill(kPrompt);
    await page.getByTestId('patch-corrupted').fill(corrupted);
    await page.getByTestId('patch-run').click();
    await page.waitForFunction(() => window.gpt2Page.state.patching.result ||
                                     !document.querySelector('[data-testid=error]').hidden, null, {timeout: kTimeout});
    assert.equal(await page.getByTestId('error').isVisible(), false, await page.getByTestId('error').textContent());
    const r = await page.evaluate(() => {
      const x = window.gpt2Page.state.patching.result;
      return {...x, recovered: Array.from(x.recovered)};
    });
    const L = plain.config.n_layer;
    assert.equal(r.nLayer, L);
    assert.equal(r.positions, T0);
    assert.equal(r.answer, plain.final[T0 - 1].top_ids[0]);
    assert.equal(r.other, corruptInspect.final[T0 - 1].top_ids[0]);
    // The logit differences are the CLI's logits' differences.
    const logit = (x, id) => {
      const t = x.tensors.find((y) => y.name === 'logits');
      return t.data[(T0 - 1) * t.shape[1] + id];
    };
    closeTo(r.cleanDiff, logit(plain, r.answer) - logit(plain, r.other), 2e-3, 'clean logit difference');
    closeTo(r.corruptedDiff, logit(corruptInspect, r.answer) - logit(corruptInspect, r.other), 2e-3, 'corrupted');
    // Entering block 0 the stream is the embedding: the clean one at the changed token is the
    // whole clean run (1); elsewhere it equals the corrupted one (0). Before the changed token
    // both runs agree in every block (causal attention).
    for (let p = 0; p < T0; ++p) closeTo(r.recovered[p], p === changed ? 1 : 0, 1e-3, `block 0, position ${p}`);
    for (let l = 0; l < L; ++l) {
      for (let p = 0; p < changed; ++p) closeTo(r.recovered[l * T0 + p], 0, 1e-3, `block ${l}, position ${p}`);
    }
    // The conversation is back in the engine: the views still work.
    await page.locator('[data-testid=tokens] .chip[data-position="1"]').click();
    await page.waitForFunction(() => window.gpt2Page.state.acts.position === 1, null, {timeout: kTimeout});
    assert.equal(await page.getByTestId('patching').isVisible(), true);
  });
});
