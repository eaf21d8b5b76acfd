// The Embind API's gradient experiments under Node (build/wasm/web/gpt2-engine-node.cjs) against
// the native CLI's `gpt2 saliency` and `gpt2 atp` on the same model: the bindings only forward
// to the lab, so both builds must agree (the gradients themselves are checked against PyTorch
// autograd in tests/model/backward_test.cc and tests/lab/gradients_test.cc).
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import {createRequire} from 'node:module';
import path from 'node:path';
import {before, describe, test} from 'node:test';
import {kRoot} from './browser.mjs';
import {closeTo, kNative, kPrompt, makeModels} from './fixtures.mjs';

const kModulePath = path.join(kRoot, 'build/wasm/web/gpt2-engine-node.cjs');
const kGpt2 = path.join(kNative, 'gpt2');
// Native (AVX2/AVX-512, FMA) and WASM sum the products in different orders; through a few
// blocks of int8 activations the gradients agree to ~1e-5 relative. The scale is the largest
// magnitude of a result, so near-zero entries are not held to a relative bound.
const kTolerance = 1e-3;

function cli(args) {
  const out = execFileSync(kGpt2, [...args, '--threads', '1', '--activations', 'int8'], {encoding: 'utf8'});
  return out.trimEnd().split('\n').map((l) => l.split('\t'));
}

function closeToScaled(actual, expected, scale, what) {
  closeTo(actual / scale, expected / scale, kTolerance, what);
}

describe('Embind gradients under Node', {skip: !fs.existsSync(kModulePath) && 'build/wasm not built'}, () => {
  let engine, info, ids, models;

  before(async () => {
    models = makeModels('node-gradients');
    const require = createRequire(import.meta.url);
    const factory = require(kModulePath);
    const Module = await factory({wasmBinary: fs.readFileSync(kModulePath.replace(/\.cjs$/, '.wasm'))});
    engine = new Module.Engine();
    const bytes = fs.readFileSync(models.model);
    engine.beginLoad(bytes.length);
    engine.appendChunk(bytes);
    info = engine.finishLoad(1);
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
