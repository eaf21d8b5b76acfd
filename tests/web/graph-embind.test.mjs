// The Embind API's attribution graphs under Node (build/wasm/web/gpt2-engine-node.cjs) against
// the native CLI on the same files: the tiny model, the test transcoders (tests/data/transcoders
// converted by gpt2-convert --transcoders) and the same prompt. graphJson equals `gpt2 graph
// --json` (pruned and --no-prune), checkGraph's two numbers equal `gpt2 graph --check`'s. The
// graph's math itself is checked against PyTorch in tests/graph/graph_test.cc.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {before, describe, test} from 'node:test';
import {kRoot} from './browser.mjs';
import {closeTo, kNative, kNodeModule, kPrompt, makeModels, modelDir, nodeEngine} from './fixtures.mjs';

// Native and WASM sum the int8 products in different orders (as sae-embind.test.mjs).
const kTolerance = 1e-3;

function tool(name, args) {
  return execFileSync(path.join(kNative, name), args, {encoding: 'utf8'});
}

// Nodes by node_id and links by "source>target", with every field the file has.
function indexed(json) {
  const g = JSON.parse(json);
  return {g, nodes: new Map(g.nodes.map((n) => [n.node_id, n])),
          links: new Map(g.links.map((l) => [`${l.source}>${l.target}`, l.weight]))};
}

function assertSameGraph(page, native, what) {
  const a = indexed(page), b = indexed(native);
  assert.deepEqual(a.g.metadata.prompt_tokens, b.g.metadata.prompt_tokens, what);
  assert.equal(a.g.metadata.prompt, b.g.metadata.prompt, what);
  closeTo(a.g.metadata.replacement_score, b.g.metadata.replacement_score, kTolerance, `${what} replacement score`);
  closeTo(a.g.metadata.completeness_score, b.g.metadata.completeness_score, kTolerance, `${what} completeness`);
  assert.deepEqual([...a.nodes.keys()], [...b.nodes.keys()], `${what}: the same nodes in the same order`);
  for (const [id, n] of b.nodes) {
    const m = a.nodes.get(id);
    for (const k of ['feature', 'layer', 'ctx_idx', 'feature_type', 'is_target_logit', 'jsNodeId', 'clerp']) {
      assert.equal(m[k], n[k], `${what} node ${id} ${k}`);
    }
    for (const k of ['activation', 'influence', 'token_prob']) {
      if (n[k] === null) assert.equal(m[k], null, `${what} node ${id} ${k}`);
      else closeTo(m[k], n[k], kTolerance, `${what} node ${id} ${k}`);
    }
  }
  assert.deepEqual([...a.links.keys()], [...b.links.keys()], `${what}: the same links in the same order`);
  for (const [k, w] of b.links) closeTo(a.links.get(k), w, kTolerance, `${what} link ${k}`);
}

// "check: ... predicted change P, exact change E"
function cliCheck(args) {
  const m = /predicted change (\S+), exact change (\S+)/.exec(tool('gpt2', args));
  assert.ok(m, 'gpt2 graph --check printed its numbers');
  return {predicted: Number(m[1]), exact: Number(m[2])};
}

describe('Embind attribution graphs under Node', {skip: !fs.existsSync(kNodeModule) && 'build/wasm not built'}, () => {
  let Module, engine, models, tc, graphArgs;

  before(async () => {
    models = makeModels('node-graph');
    tc = path.join(modelDir('node-graph'), 'transcoders-f32.gguf');
    tool('gpt2-convert', ['--transcoders', path.join(kRoot, 'tests/data/transcoders'), '--output', tc, '--type', 'f32',
                          '--quiet']);
    ({Module, engine} = await nodeEngine(models.model));
    graphArgs = ['graph', '--model', models.model, '--transcoders', tc, '--prompt', kPrompt, '--threads', '1'];
  });

  // Every step moves forward: the blocks' features, then the rows.
  function computeGraph(options = {}) {
    let p = engine.startGraph(engine.tokenize(kPrompt), options), calls = 0;
    assert.deepEqual({...p}, {encoding: true, phase: 'encoding', done: 0, total: 2, finished: false});
    while (!p.finished) {
      const next = engine.continueGraph();
      const forward = next.encoding ? next.done === p.done + 1 : p.encoding || (next.done > p.done && next.done <= next.total);
      assert.ok(forward, `progress moves forward: ${JSON.stringify(p)} -> ${JSON.stringify(next)}`);
      p = next;
      ++calls;
    }
    assert.equal(p.done, p.total);
    return {total: p.total, calls};
  }

  test('before transcoders or a graph, the calls say what is missing', () => {
    assert.throws(() => engine.startGraph(engine.tokenize(kPrompt), {}), /Load transcoders first/);
    assert.throws(() => engine.graphJson(0.8, 0.98, true), /Compute a graph first/);
    assert.throws(() => engine.continueGraph(), /No graph is being computed/);
    assert.throws(() => engine.loadTranscoders(new Uint8Array([1, 2, 3, 4])), /GGUF|file/i);
  });

  test('graphJson equals gpt2 graph --json, pruned and --no-prune; re-pruning needs no recompute', () => {
    assert.deepEqual([...engine.loadTranscoders(fs.readFileSync(tc))], [0, 1]);
    const {total, calls} = computeGraph();
    assert.ok(calls >= 2, `the job runs in steps (${calls} calls for ${total} rows)`);
    const dir = modelDir('node-graph');
    tool('gpt2', [...graphArgs, '--json', path.join(dir, 'pruned.json')]);
    tool('gpt2', [...graphArgs, '--no-prune', '--json', path.join(dir, 'full.json')]);
    tool('gpt2', [...graphArgs, '--node-threshold', '0.5', '--edge-threshold', '0.9', '--json', path.join(dir, 'tight.json')]);
    assertSameGraph(engine.graphJson(0.8, 0.98, true), fs.readFileSync(path.join(dir, 'pruned.json'), 'utf8'), 'pruned');
    assertSameGraph(engine.graphJson(0.8, 0.98, false), fs.readFileSync(path.join(dir, 'full.json'), 'utf8'), 'no-prune');
    assertSameGraph(engine.graphJson(0.5, 0.9, true), fs.readFileSync(path.join(dir, 'tight.json'), 'utf8'), '0.5/0.9');
    assert.throws(() => engine.graphJson(1.5, 0.98, true), /threshold|between/i);
  });

  test('checkGraph equals gpt2 graph --check, ablated and clamped; bad node ids are refused', () => {
    const full = JSON.parse(engine.graphJson(0.8, 0.98, false));
    const features = full.nodes.filter((n) => n.feature_type === 'cross layer transcoder').map((n) => n.node_id);
    assert.ok(features.length >= 3, 'the tiny graph has feature nodes');
    for (const [ids, value] of [[[features[0]], 0], [features.slice(0, 3), 0], [[features[1]], 2.5]]) {
      const native = cliCheck([...graphArgs, '--check', ids.join(','), ...(value ? ['--clamp', String(value)] : [])]);
      const page = engine.checkGraph(ids, value);
      closeTo(page.predicted, native.predicted, kTolerance, `predicted for ${ids} at ${value}`);
      closeTo(page.exact, native.exact, kTolerance, `exact for ${ids} at ${value}`);
    }
    assert.throws(() => engine.checkGraph(['E_464_1'], 0), /not a feature node/);
    assert.throws(() => engine.checkGraph([], 0), /at least one/);
    assert.throws(() => engine.checkGraph([3], 0), /node ids\[0\] must be a string/);
  });

  test('graphFeatureCard: the activation at the node equals the file\'s; tokens ordered by weight', () => {
    const full = JSON.parse(engine.graphJson(0.8, 0.98, false));
    const nodes = full.nodes.filter((n) => n.feature_type === 'cross layer transcoder').slice(0, 5);
    for (const n of nodes) {
      const card = engine.graphFeatureCard(Number(n.layer), n.feature, 5);
      assert.equal(card.activations.length, full.metadata.prompt_tokens.length);
      closeTo(card.activations[n.ctx_idx], n.activation, kTolerance, `${n.node_id} activation`);
      assert.equal(card.promoted.length, 5);
      for (let i = 1; i < 5; ++i) {
        assert.ok(card.promotedWeights[i] <= card.promotedWeights[i - 1]);
        assert.ok(card.suppressedWeights[i] >= card.suppressedWeights[i - 1]);
      }
    }
    assert.throws(() => engine.graphFeatureCard(0, 48, 5), /feature|range/i);
    assert.throws(() => engine.graphFeatureCard(7, 0, 5), /no block 7/);
  });

  test('graphQk: each side\'s parts sum to the score; its attention is the capture\'s', () => {
    const ids = [50256, ...engine.tokenize(kPrompt)];  // the graph's
    const T = ids.length;
    const r = engine.graphQk(1, 2, T - 1, 1, 1000);
    const sum = (xs) => xs.reduce((a, b) => a + b, 0);
    assert.equal(r.queryRest, 0);
    assert.ok(r.queryParts.some((p) => p.kind === 'feature') && r.keyParts.some((p) => p.kind === 'error'));
    // The parts' products are f32; the forward's score rounds its inputs to int8 (Q8_0).
    const tol = 2e-2 * Math.max(1, Math.abs(r.score));
    assert.ok(Math.abs(sum(r.queryParts.map((p) => p.score)) - r.score) <= tol, 'query side sums to the score');
    assert.ok(Math.abs(sum(r.keyParts.map((p) => p.score)) - r.score) <= tol, 'key side sums to the score');
    assert.equal(r.pairs.length, Math.min(1000, r.queryParts.length * r.keyParts.length));
    const top = engine.graphQk(1, 2, T - 1, 1, 3);
    assert.equal(top.queryParts.length, 3);
    closeTo(top.queryParts[0].score, r.queryParts[0].score, 1e-9, 'the largest part');
    closeTo(sum(top.queryParts.map((p) => p.score)) + top.queryRest, sum(r.queryParts.map((p) => p.score)), 1e-6, 'the rest');
    engine.reset();
    engine.setCapture(true);
    engine.prefill(ids);
    closeTo(r.probability, engine.attention(1, T - 1)[2 * T + 1], 1e-6, 'the head\'s attention from query to key');
    assert.throws(() => engine.graphQk(1, 0, T - 1, T, 3), /key position/);
    assert.throws(() => engine.graphQk(9, 0, T - 1, 0, 3), /block 9/);
    assert.throws(() => engine.graphQk(1, 0, T - 1, 0, 0), /k must/);
  });

  test('a cancelled job leaves the last graph; under interventions the graph is refused', () => {
    const before = engine.graphJson(0.8, 0.98, true);
    engine.startGraph(engine.tokenize(kPrompt), {maxFeatureNodes: 10});
    engine.endJob();
    assert.throws(() => engine.continueGraph(), /No graph is being computed/);
    assert.equal(engine.graphJson(0.8, 0.98, true), before);
    engine.reset();
    engine.setInterventions({skipMlp: [0]});
    assert.throws(() => engine.startGraph(engine.tokenize(kPrompt), {}), /interventions/);
    engine.setInterventions({});
    const {total} = computeGraph({maxFeatureNodes: 10, targets: [262]});
    const g = JSON.parse(engine.graphJson(0.8, 0.98, false));
    assert.equal(total, 1 + 10);
    assert.deepEqual(g.nodes.filter((n) => n.feature_type === 'logit').map((n) => n.feature), [262]);
    assert.throws(() => engine.startGraph(engine.tokenize(kPrompt), {targets: [50257]}), /vocabulary|range/i);
  });
});
