// Groups of graph nodes (Neuronpedia's supernodes) in headless Chromium, on the hand-made graph
// file fixtures/graph-capital.json. A group made in the page is drawn as one node whose links are
// the sums of its members' links, worked out here from the file's links by their definition (not
// by the page's code); it opens back up; the export holds it in qParams.supernodes, Neuronpedia's
// form, and the exported file opens with it. A Neuronpedia-shaped file (members named by node_id or
// by jsNodeId, pinned ids and the other qParams beside) opens with its groups.
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
const kThreshold = kGraph.metadata.node_threshold;

// Three features along the file's busiest chain (2_4321_4 -> 5_1500_4 -> 8_300_5), each feeding
// 9_12345_5, fed by 0_1234_4 twice and by nodes the node threshold hides.
const kMembers = ['2_4321_4', '5_1500_4', '8_300_5'];

// Neuronpedia's rule for the node threshold t, a group's node always shown.
const shownAt = (id, t, groupIds) => {
  if (groupIds.includes(id)) return true;
  const n = byId.get(id);
  return n.feature_type === 'embedding' || n.feature_type === 'logit' || n.influence <= t;
};

// The links drawn for a pinned group: every file link with one end in it, the member replaced by
// the group's id, summed per pair of ends; links inside the group gone; both ends shown.
function expectedGroupLinks(groups, t) {
  const stand = (id) => groups.find((g) => g.members.includes(id))?.id ?? id;
  const sums = new Map();
  for (const l of kGraph.links) {
    const s = stand(l.source), d = stand(l.target);
    if (s === d) continue;
    sums.set(`${s}>${d}`, (sums.get(`${s}>${d}`) || 0) + l.weight);
  }
  const groupIds = groups.map((g) => g.id);
  return new Map([...sums].filter(([k]) => k.split('>').every((id) => shownAt(id, t, groupIds))));
}

describe('groups of graph nodes (supernodes)', {skip: !fs.existsSync(path.join(kSite, 'index.html')) && 'build/site not built'}, () => {
  let server, browser, page;
  const consoleLines = [];

  before(async () => {
    server = await serveSite({site: kSite});
    browser = await launchBrowser();
    page = await browser.context.newPage();
    consoleLines.push(...watchConsole(page));
    await page.goto(server.url);
    await page.getByTestId('graph-panel').waitFor();
  });

  after(async () => {
    if (consoleLines.length) console.log(consoleLines.join('\n'));
    await browser?.close();
    await server?.close();
  });

  const node = (id) => page.locator(`[data-testid=graph-view] [data-node-id="${id}"]`);
  const drawnIds = () => page.$$eval('[data-testid=graph-view] [data-node-id]', (els) => els.map((e) => e.dataset.nodeId));
  const pinnedEdges = () => page.$$eval('[data-testid=graph-view] [data-edge-role=pinned]',
                                        (els) => els.map((e) => [e.dataset.edge, Number(e.dataset.weight)]));
  const supernodes = () => page.$$eval('[data-testid=graph-supernode]',
                                       (els) => els.map((e) => ({id: e.dataset.nodeId, members: e.dataset.members.split(' ')})));
  async function exported() {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('graph-export').click()]);
    return fs.readFileSync(await download.path(), 'utf8');
  }
  async function openText(name, text) {
    await page.getByTestId('graph-open-file').setInputFiles({name, mimeType: 'application/json', buffer: Buffer.from(text)});
    await page.getByTestId('graph-status').filter({hasText: name}).waitFor();
  }
  function assertLinks(got, want) {
    assert.deepEqual(got.map(([k]) => k).sort(), [...want.keys()].sort());
    for (const [k, w] of got) assert.ok(Math.abs(w - want.get(k)) < 1e-9, `${k}: drawn ${w}, the members' sum ${want.get(k)}`);
  }

  test('picked nodes become one named node whose links are their links summed', async () => {
    await page.getByTestId('graph-open-file').setInputFiles(kFixture);
    await node(kMembers[0]).waitFor();
    assert.equal(await page.getByTestId('graph-group-make').isDisabled(), true, 'nothing picked yet');
    // Two pinned and added, the third by Shift+click; a fourth picked and unpicked by Shift+Enter.
    for (const id of kMembers.slice(0, 2)) {
      await node(id).click();  // pins it
      await page.getByTestId('graph-group-add').click();
    }
    await node(kMembers[2]).click({modifiers: ['Shift']});
    await node('9_12345_5').focus();
    await page.keyboard.press('Shift+Enter');
    assert.equal(await node('9_12345_5').getAttribute('data-picked'), 'true');
    await page.keyboard.press('Shift+Enter');
    assert.equal(await node('9_12345_5').getAttribute('data-picked'), 'false');
    for (const id of kMembers) assert.equal(await node(id).getAttribute('data-picked'), 'true', id);
    assert.match(await page.getByTestId('graph-group-picked').textContent(), new RegExp(kMembers.join(', ')));
    // No name: said so, nothing grouped.
    await page.getByTestId('graph-group-make').click();
    assert.match(await page.getByTestId('graph-error').textContent(), /Name the group/);
    await page.getByTestId('graph-group-name').fill('say Paris');
    await page.getByTestId('graph-group-make').click();
    await page.locator('[data-testid=graph-supernode]').waitFor();

    assert.deepEqual(await supernodes(), [{id: 'supernode-0', members: kMembers}]);
    const drawn = await drawnIds();
    for (const id of kMembers) assert.ok(!drawn.includes(id), `${id} is drawn inside the group only`);
    const others = kGraph.nodes.filter((n) => !kMembers.includes(n.node_id) && shownAt(n.node_id, kThreshold, []))
        .map((n) => n.node_id);
    assert.deepEqual(drawn.sort(), [...others, 'supernode-0'].sort());
    assert.match(await page.getByTestId('graph-group').textContent(), /say Paris.*3 nodes \(3 features\).*as one node/);
    assert.equal(await page.getByTestId('graph-error').isHidden(), true);

    // Its links, pinned (the pinned member became the group): in and out, each the sum of the
    // members' links with that other node.
    assert.equal(await node('supernode-0').getAttribute('aria-pressed'), 'true');
    const want = expectedGroupLinks([{id: 'supernode-0', members: kMembers}], kThreshold);
    const mine = new Map([...want].filter(([k]) => k.split('>').includes('supernode-0')));
    assert.ok(mine.get('supernode-0>9_12345_5') > 6, 'three members\' links into 9_12345_5 summed');
    assert.ok(mine.has('0_1234_4>supernode-0') && mine.has('supernode-0>11_7_5'));
    assertLinks(await pinnedEdges(), mine);
    assert.match(await page.getByTestId('graph-node-details').textContent(), /group “say Paris” of 3 nodes/);
    // At a lower node threshold the group stays, and the links to what it hides go.
    await page.getByTestId('graph-node-threshold').fill('0.2');
    const low = Number(await page.getByTestId('graph-node-threshold').inputValue());
    assertLinks(await pinnedEdges(), new Map([...expectedGroupLinks([{id: 'supernode-0', members: kMembers}], low)]
        .filter(([k]) => k.split('>').includes('supernode-0'))));
    await page.getByTestId('graph-node-threshold').fill(String(kThreshold));
  });

  test('a group opens back up and closes again', async () => {
    await page.getByTestId('graph-group-toggle').click();
    await node(kMembers[0]).waitFor();
    assert.deepEqual(await supernodes(), []);
    for (const id of kMembers) assert.equal(await node(id).getAttribute('data-group'), '0');
    // The members' own links are back: 2_4321_4 -> 5_1500_4 inside the group among them.
    await node(kMembers[1]).click();
    const edges = (await pinnedEdges()).map(([k]) => k);
    assert.ok(edges.includes('2_4321_4>5_1500_4') && edges.includes('5_1500_4>9_12345_5'), edges.join(' '));
    await page.getByTestId('graph-group-toggle').click();
    await page.locator('[data-testid=graph-supernode]').waitFor();
    assert.deepEqual(await supernodes(), [{id: 'supernode-0', members: kMembers}]);
  });

  test('the export holds the group in qParams.supernodes; the file opens with it', async () => {
    const text = await exported();
    const json = JSON.parse(text);
    assert.deepEqual(json.qParams.supernodes, [['say Paris', ...kMembers]]);
    // Everything else as it was.
    assert.deepEqual({...json, qParams: {...json.qParams, supernodes: []}}, kGraph);

    await openText('with-groups.json', text);
    await page.locator('[data-testid=graph-supernode]').waitFor();
    assert.deepEqual(await supernodes(), [{id: 'supernode-0', members: kMembers}]);
    assert.match(await page.getByTestId('graph-status').textContent(), /1 group/);
    await node('supernode-0').click();
    assertLinks(await pinnedEdges(), new Map([...expectedGroupLinks([{id: 'supernode-0', members: kMembers}], kThreshold)]
        .filter(([k]) => k.split('>').includes('supernode-0'))));
    // Unchanged, it exports byte for byte; ungrouped, with no group.
    assert.equal(await exported(), text);
    await page.getByTestId('graph-group-remove').click();
    await node(kMembers[0]).waitFor();
    assert.deepEqual(await supernodes(), []);
    assert.deepEqual(JSON.parse(await exported()).qParams.supernodes, []);
  });

  test('a Neuronpedia-shaped file opens with its groups: node_id or jsNodeId, the last group a node is in', async () => {
    const file = structuredClone(kGraph);
    file.qParams = {
      linkType: 'both', pinnedIds: ['9_12345_5', '10_42_5'], clickedId: '9_12345_5', sg_pos: '',
      supernodes: [
        ['say Paris', '9_12345-0', '10_42_5'],  // 9_12345_5 by its jsNodeId; 10_42_5 goes to "late"
        ['not a group', 3],
        ['ghost', 'nope_1_2'],
        ['late', '10_42_5', '11_7-0', 'gone_9_9'],
      ],
    };
    const text = JSON.stringify(file);
    await openText('neuronpedia.json', text);
    await page.locator('[data-testid=graph-supernode]').first().waitFor();
    assert.deepEqual(await supernodes(), [{id: 'supernode-0', members: ['9_12345_5']},
                                          {id: 'supernode-1', members: ['10_42_5', '11_7_5']}]);
    const names = await page.getByTestId('graph-group').allTextContents();
    assert.equal(names.length, 2);
    assert.match(names[0], /say Paris/);
    assert.match(names[1], /late/);
    const status = await page.getByTestId('graph-status').textContent();
    assert.match(status, /2 groups/);
    assert.match(status, /2 of the file's groups are left out \(not lists of node ids, or no member here\)/);
    assert.match(status, /2 group members name nodes not in the file/);
    // Both groups' links: the two logits are fed by both, each pair summed apart.
    const groups = [{id: 'supernode-0', members: ['9_12345_5']}, {id: 'supernode-1', members: ['10_42_5', '11_7_5']}];
    await node('supernode-1').click();
    assertLinks(await pinnedEdges(), new Map([...expectedGroupLinks(groups, kThreshold)]
        .filter(([k]) => k.split('>').includes('supernode-1'))));
    // Unchanged: byte for byte. A new group: written in node ids, the file's other qParams kept.
    assert.equal(await exported(), text);
    await node('8_300_5').click();
    await page.getByTestId('graph-group-add').click();
    await node('supernode-0').click();
    await page.getByTestId('graph-group-add').click();
    await page.getByTestId('graph-group-name').fill('merged');
    await page.getByTestId('graph-group-make').click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=graph-group]').length === 2 &&
                                     /merged/.test(document.querySelector('[data-testid=graph-groups]').textContent));
    const json = JSON.parse(await exported());
    // Picking a group's node takes its members; the group it was goes.
    assert.deepEqual(json.qParams.supernodes, [['late', '10_42_5', '11_7_5'], ['merged', '8_300_5', '9_12345_5']]);
    assert.deepEqual(json.qParams.pinnedIds, ['9_12345_5', '10_42_5']);
    assert.equal(json.qParams.linkType, 'both');
  });
});
