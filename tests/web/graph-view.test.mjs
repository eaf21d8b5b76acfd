// The attribution-graph panel in headless Chromium, on a hand-made graph file in circuit-tracer's
// format (fixtures/graph-capital.json: embeddings, transcoder features in several blocks, MLP
// error nodes, two logits, links of both signs). What the page shows is checked against counts
// and paths worked out here from the file itself, by other means than the page's (a filter over
// the JSON, every path enumerated), never against the page's own earlier output.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {kRoot, launchBrowser, serveSite, watchConsole} from './browser.mjs';

const kSite = path.join(kRoot, 'build/site');
const kFixture = path.join(kRoot, 'tests/web/fixtures/graph-capital.json');
const kText = fs.readFileSync(kFixture, 'utf8');
const kGraph = JSON.parse(kText);
const byId = new Map(kGraph.nodes.map((n) => [n.node_id, n]));

// Neuronpedia's rule for its pruning threshold t: embeddings and logits stay, any other node
// stays when its cumulative influence is at most t.
const expectedShown = (t) => kGraph.nodes.filter((n) => n.feature_type === 'embedding' || n.feature_type === 'logit' ||
                                                        n.influence <= t).map((n) => n.node_id);
const linksOf = (id, shown, edgeThreshold) => kGraph.links.filter((l) =>
  (l.source === id || l.target === id) && shown.includes(l.source) && shown.includes(l.target) &&
  Math.abs(l.weight) >= edgeThreshold);

// Every path from an embedding to `logit` over shown links, by depth-first enumeration; a path's
// strength is the product of its links' shares of their targets' input (|w| over the sum of |w|
// into the target, all the file's links). Per embedding the strongest path; the 3 best of those.
function strongestPathsByEnumeration(logit, shown, edgeThreshold) {
  const into = new Map();
  for (const l of kGraph.links) into.set(l.target, (into.get(l.target) || 0) + Math.abs(l.weight));
  const usable = kGraph.links.filter((l) => shown.includes(l.source) && shown.includes(l.target) &&
                                            Math.abs(l.weight) >= edgeThreshold);
  const best = [];
  for (const e of kGraph.nodes.filter((n) => n.feature_type === 'embedding')) {
    let top = null;
    const walk = (id, strength, links) => {
      if (id === logit) {
        if (!top || strength > top.strength) top = {strength, links: [...links]};
        return;
      }
      for (const l of usable.filter((x) => x.source === id)) {
        walk(l.target, strength * Math.abs(l.weight) / into.get(l.target), [...links, `${l.source}>${l.target}`]);
      }
    };
    walk(e.node_id, 1, []);
    if (top && top.strength > 0) best.push(top);
  }
  return best.sort((a, b) => b.strength - a.strength).slice(0, 3);
}

describe('attribution graph panel', {skip: !fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built'}, () => {
  let server, browser, page;
  const consoleLines = [];

  before(async () => {
    server = await serveSite({site: kSite});
    browser = await launchBrowser();
    page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    // No model: opening and reading a graph file needs none.
    await page.goto(server.url);
    await page.getByTestId('graph-panel').waitFor();
  });

  after(async () => {
    if (consoleLines.length) console.log(consoleLines.join('\n'));
    await browser?.close();
    await server?.close();
  });

  const openFixture = () => page.getByTestId('graph-open-file').setInputFiles(kFixture);
  const drawnIds = () => page.$$eval('[data-testid=graph-view] [data-node-id]', (els) => els.map((e) => e.dataset.nodeId));
  const drawnEdges = (role) => page.$$eval(`[data-testid=graph-view] [data-edge-role=${role}]`, (els) => els.map((e) => e.dataset.edge));
  async function setSlider(testid, value) {
    await page.getByTestId(testid).fill(String(value));
    // The slider snaps to its step: expectations use the value it holds.
    return Number(await page.getByTestId(testid).inputValue());
  }
  const focusedId = () => page.evaluate(() => document.activeElement?.dataset?.nodeId ?? null);
  // The numbers written in the details text.
  const detailNumbers = async () => ((await page.getByTestId('graph-node-details').textContent())
      .match(/-?\d+(\.\d+)?(e-?\d+)?/g) || []).map(Number);

  test('opens the file: one mark per node kept at the file\'s node threshold, with its id', async () => {
    await openFixture();
    await page.waitForSelector('[data-testid=graph-view] [data-node-id]');
    const shown = expectedShown(kGraph.metadata.node_threshold);
    assert.ok(shown.length < kGraph.nodes.length, 'the fixture has nodes above its threshold');
    assert.deepEqual((await drawnIds()).sort(), [...shown].sort());
    assert.equal(Number(await page.getByTestId('graph-node-threshold').inputValue()), kGraph.metadata.node_threshold);
    assert.ok(await page.getByTestId('graph-error').isHidden());
    // The prompt's tokens label the columns (a long one is cut; its title holds it whole).
    const titles = await page.$$eval('.graph-token-label title', (els) => els.map((e) => e.textContent));
    assert.deepEqual(titles, kGraph.metadata.prompt_tokens.map((t, p) => `“${t}”, position ${p}`));
  });

  test('the node threshold filters by stored influence, live', async () => {
    for (const asked of [0.1, 0.3, 0.62, 0.9, 1, 0]) {
      const t = await setSlider('graph-node-threshold', asked);
      assert.deepEqual((await drawnIds()).sort(), expectedShown(t).sort(), `node threshold ${t}`);
    }
    await setSlider('graph-node-threshold', 0.8);
  });

  test('a clicked node pins its links; the edge threshold filters them by |weight|', async () => {
    const id = '9_12345_5';  // the fixture's busiest feature: inputs from four blocks, two logits out
    await page.locator(`[data-testid=graph-view] [data-node-id="${id}"]`).click();
    assert.equal(await page.locator(`[data-node-id="${id}"]`).getAttribute('aria-pressed'), 'true');
    const shown = expectedShown(0.8);
    const edgeMax = Math.max(...kGraph.links.map((l) => Math.abs(l.weight)));
    assert.equal(Number(await page.getByTestId('graph-edge-threshold').getAttribute('max')), edgeMax);
    for (const asked of [0, 0.7, 1.3, 3, edgeMax]) {
      const t = await setSlider('graph-edge-threshold', asked);
      const expected = linksOf(id, shown, t).map((l) => `${l.source}>${l.target}`).sort();
      assert.deepEqual((await drawnEdges('pinned')).sort(), expected, `edge threshold ${t}`);
      // Coloured by sign: one colour for the negative links, another for the positive ones.
      const strokes = await page.$$eval('[data-edge-role=pinned]', (els) => els.map((e) => [Number(e.dataset.weight) < 0, e.getAttribute('stroke')]));
      const colours = (neg) => new Set(strokes.filter(([n]) => n === neg).map(([, c]) => c));
      assert.ok(colours(true).size <= 1 && colours(false).size <= 1);
      for (const c of colours(true)) assert.ok(!colours(false).has(c));
    }
    await setSlider('graph-edge-threshold', 0);
    // Clicking it again unpins it.
    await page.locator(`[data-testid=graph-view] [data-node-id="${id}"]`).click();
    assert.equal(await page.locator(`[data-node-id="${id}"]`).getAttribute('aria-pressed'), 'false');
    assert.deepEqual(await drawnEdges('pinned'), []);
  });

  test('the strongest paths to the chosen logit are drawn', async () => {
    const shown = expectedShown(0.8);
    const target = kGraph.nodes.find((n) => n.is_target_logit).node_id;
    const expected = strongestPathsByEnumeration(target, shown, 0).flatMap((p) => p.links);
    assert.ok(expected.length > 0);
    assert.deepEqual([...new Set(await drawnEdges('path'))].sort(), [...new Set(expected)].sort());
    // Choosing the other logit makes it the paths' end.
    const other = kGraph.nodes.find((n) => n.feature_type === 'logit' && !n.is_target_logit).node_id;
    await page.locator(`[data-testid=graph-view] [data-node-id="${other}"]`).click();
    const expectedOther = strongestPathsByEnumeration(other, shown, 0).flatMap((p) => p.links);
    assert.ok(expectedOther.some((e) => e.endsWith(`>${other}`)));
    assert.deepEqual([...new Set(await drawnEdges('path'))].sort(), [...new Set(expectedOther)].sort());
    await page.locator(`[data-testid=graph-view] [data-node-id="${target}"]`).click();
    await page.locator(`[data-testid=graph-view] [data-node-id="${target}"]`).click();  // unpin, keep it chosen
  });

  test('every node is reachable by keyboard, its numbers shown as text', async () => {
    await page.getByTestId('graph-export').focus();
    // Tab from the controls before the graph lands on its one tab stop.
    await page.getByTestId('graph-edge-threshold').focus();
    await page.keyboard.press('Tab');
    let id = await focusedId();
    assert.ok(id && byId.has(id), `Tab reached a node (${id})`);
    const shown = expectedShown(0.8);
    const rowOf = (n) => (n.layer === 'E' ? -1 : Number(n.layer));
    // Down from the top: each step lands in a lower row, until the embeddings.
    const visited = new Set([id]);
    for (let steps = 0; byId.get(id).layer !== 'E'; ++steps) {
      assert.ok(steps < 20, 'ArrowDown reaches the embeddings');
      const before = byId.get(id);
      await page.keyboard.press('ArrowDown');
      id = await focusedId();
      assert.ok(shown.includes(id), `${id} is a shown node`);
      assert.ok(rowOf(byId.get(id)) < rowOf(before), `${before.node_id} -> ${id} goes down`);
      visited.add(id);
    }
    // Along the embeddings' row, right from the leftmost, every position in turn.
    await page.keyboard.press('Home');
    const row = [await focusedId()];
    for (let i = 0; i < 10; ++i) {
      await page.keyboard.press('ArrowRight');
      const next = await focusedId();
      if (next === row.at(-1)) break;
      row.push(next);
    }
    assert.deepEqual(row.map((x) => byId.get(x).ctx_idx), kGraph.metadata.prompt_tokens.map((_, p) => p));
    // Up into the blocks: a feature's details show its activation and influence.
    for (let i = 0; i < 20; ++i) {
      await page.keyboard.press('ArrowUp');
      id = await focusedId();
      if (byId.get(id).feature_type === 'cross layer transcoder') break;
    }
    const node = byId.get(id);
    assert.equal(node.feature_type, 'cross layer transcoder');
    await page.waitForFunction((nid) => document.querySelector('[data-testid=graph-node-details]').textContent.includes(nid), id);
    const numbers = await detailNumbers();
    assert.ok(numbers.some((v) => Math.abs(v - node.activation) <= 1e-4 * Math.abs(node.activation)),
              `activation ${node.activation} in "${await page.getByTestId('graph-node-details').textContent()}"`);
    assert.ok(numbers.some((v) => Math.abs(v - node.influence) < 1e-4), `influence ${node.influence}`);
    // Enter pins it: its links are drawn and its strongest incoming link is named in the details.
    await page.keyboard.press('Enter');
    assert.equal(await page.locator(`[data-node-id="${id}"]`).getAttribute('aria-pressed'), 'true');
    const links = linksOf(id, shown, 0);
    assert.deepEqual((await drawnEdges('pinned')).sort(), links.map((l) => `${l.source}>${l.target}`).sort());
    const strongestIn = links.filter((l) => l.target === id).sort((a, b) => Math.abs(b.weight) - Math.abs(a.weight))[0];
    if (strongestIn) assert.ok((await detailNumbers()).some((v) => Math.abs(v - strongestIn.weight) < 1e-3));
    await page.keyboard.press('Escape');
    assert.equal(await page.locator(`[data-node-id="${id}"]`).getAttribute('aria-pressed'), 'false');
  });

  test('Export JSON writes the file as it was opened', async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('graph-export').click()]);
    assert.equal(download.suggestedFilename(), 'graph-capital.json');
    assert.equal(fs.readFileSync(await download.path(), 'utf8'), kText);
  });

  test('a malformed file shows graph-error and loses nothing else', async () => {
    const before = (await drawnIds()).sort();
    for (const [buffer, words] of [['{"metadata": {}, "nodes": [', /not JSON/],
                                   ['{"nodes": [{"node_id": "E_1_0"}], "links": []}', /feature_type/],
                                   ['{"nodes": []}', /links/]]) {
      await page.getByTestId('graph-open-file').setInputFiles({name: 'broken.json', mimeType: 'application/json',
                                                              buffer: Buffer.from(buffer)});
      await page.getByTestId('graph-error').waitFor({state: 'visible'});
      assert.match(await page.getByTestId('graph-error').textContent(), /broken\.json/);
      assert.match(await page.getByTestId('graph-error').textContent(), words);
      assert.deepEqual((await drawnIds()).sort(), before, 'the graph shown before stays');
    }
    // The page keeps working: the sliders still filter the graph shown, the export still has it.
    const t = await setSlider('graph-node-threshold', 0.3);
    assert.deepEqual((await drawnIds()).sort(), expectedShown(t).sort());
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('graph-export').click()]);
    assert.equal(fs.readFileSync(await download.path(), 'utf8'), kText);
    // A good file opens again and clears the error.
    await openFixture();
    await page.getByTestId('graph-error').waitFor({state: 'hidden'});
    assert.deepEqual((await drawnIds()).sort(), expectedShown(kGraph.metadata.node_threshold).sort());
    assert.ok(await page.getByTestId('generate').count() === 1);
  });

  test('a repeated node_id (circuit-tracer\'s error and block-0 feature ids can collide) keeps the first', async () => {
    const copy = JSON.parse(kText);
    const first = copy.nodes.find((n) => n.feature_type === 'cross layer transcoder');
    copy.nodes.push({...first, feature: first.feature + 1, influence: 0.01});
    await page.getByTestId('graph-open-file').setInputFiles({name: 'repeated.json', mimeType: 'application/json',
                                                            buffer: Buffer.from(JSON.stringify(copy))});
    await page.getByTestId('graph-status').filter({hasText: 'repeated.json'}).waitFor();
    assert.ok(await page.getByTestId('graph-error').isHidden());
    assert.match(await page.getByTestId('graph-status').textContent(), /1 nodes repeat an earlier node_id/);
    assert.deepEqual((await drawnIds()).sort(), expectedShown(kGraph.metadata.node_threshold).sort());
  });
});
