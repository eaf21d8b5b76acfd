// The Embind API's sparse autoencoders under Node (build/wasm/web/gpt2-engine-node.cjs) against
// the native tools on the same files: the converter binding writes the bytes `gpt2-convert --sae`
// writes, saeFeatures equals `gpt2 features`, steered generation equals `gpt2 generate --sae
// --steer`. The SAE math itself is checked against PyTorch in tests/sae/sae_test.cc.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {before, describe, test} from 'node:test';
import {kRoot} from './browser.mjs';
import {closeTo, kNative, kNodeModule, kPrompt, kSampling, makeModels, modelDir, nodeEngine} from './fixtures.mjs';

const kSaeDir = path.join(kRoot, 'tests/data/sae');
// Native and WASM sum the int8 products in different orders.
const kTolerance = 1e-3;

function tool(name, args) {
  return execFileSync(path.join(kNative, name), args, {encoding: 'utf8'});
}

describe('Embind SAEs under Node', {skip: !fs.existsSync(kNodeModule) && 'build/wasm not built'}, () => {
  let Module, engine, models, dir;
  const gguf = {};

  before(async () => {
    models = makeModels('node-sae');
    dir = modelDir('node-sae');
    ({Module, engine} = await nodeEngine(models.model));
    for (const name of ['standard', 'topk', 'layer_norm']) {
      gguf[name] = path.join(dir, `sae-${name}-q8_0.gguf`);
      tool('gpt2-convert', ['--sae', path.join(kSaeDir, name), '--output', gguf[name], '--type', 'q8_0', '--quiet']);
    }
  });

  function convertInWasm(name, type) {
    const c = new Module.Converter();
    c.setSaeConfig(fs.readFileSync(path.join(kSaeDir, name, 'cfg.json'), 'utf8'));
    const weights = fs.readFileSync(path.join(kSaeDir, name, 'sae_weights.safetensors'));
    c.beginCheckpoint(weights.length);
    c.appendChunk(weights.subarray(0, 1000));
    c.appendChunk(weights.subarray(1000));
    const {tensors, bytes} = c.planSae(type);
    let done = 0;
    while (done < tensors) done = c.convertNext();
    const out = c.takeOutput();
    assert.equal(out.length, bytes);
    c.delete();
    return out;
  }

  test('the converter binding writes the bytes gpt2-convert --sae writes', () => {
    for (const name of ['standard', 'topk', 'layer_norm']) {
      assert.deepEqual(Buffer.from(convertInWasm(name, 'q8_0')), fs.readFileSync(gguf[name]), name);
    }
    const c = new Module.Converter();
    assert.throws(() => c.setSaeConfig('{"architecture": "gated", "hook_name": "blocks.0.hook_resid_pre", "d_in": 64, "d_sae": 8}'),
                  /gated/);
    assert.throws(() => c.planSae('q8_0'), /setSaeConfig/);
    c.delete();
  });

  test('loadSae, saes, saeFeatures and saeStrip equal gpt2 features; dropSae', () => {
    for (const name of ['standard', 'topk', 'layer_norm']) {
      const info = engine.loadSae(fs.readFileSync(gguf[name]));
      const cfg = JSON.parse(fs.readFileSync(path.join(kSaeDir, name, 'cfg.json'), 'utf8'));
      assert.equal(info.hook, cfg.hook_name ?? cfg.hook_point);
      assert.equal(info.dSae, 96);
      assert.equal(info.architecture, cfg.architecture);
      assert.equal(info.normalize, cfg.normalize_activations);
      assert.ok(engine.saes().some((s) => s.id === info.id && s.point === info.point));
      const lines = tool('gpt2', ['features', '--model', models.model, '--sae', gguf[name], '--prompt', kPrompt,
                                  '--top', '4', '--bos', '--threads', '1'])
          .trimEnd().split('\n').map((l) => l.split('\t').map(Number));
      const ids = [Module.endOfTextId(), ...engine.tokenize(kPrompt)];
      engine.reset();
      engine.setCapture(true);
      engine.prefill(ids);
      let line = 0;
      for (let p = 0; p < ids.length; ++p) {
        const f = engine.saeFeatures(info.id, p, 4);
        assert.ok(f.features instanceof Int32Array && f.activations instanceof Float32Array);
        assert.ok(f.explained <= 1);
        for (let i = 0; i < f.features.length; ++i, ++line) {
          assert.equal(lines[line][0], p, `${name} line ${line}`);
          assert.equal(lines[line][1], f.features[i], `${name} position ${p} feature ${i}`);
          closeTo(f.activations[i], lines[line][2], kTolerance, `${name} position ${p} activation ${i}`);
          assert.equal(engine.saeStrip(info.id, f.features[i])[p], f.activations[i]);
        }
      }
      assert.equal(line, lines.length, `${name}: every line of gpt2 features`);
      const [w] = engine.saeLogitWeights(info.id, [7], 5);
      assert.equal(w.promoted.length, 5);
      for (let i = 1; i < 5; ++i) {
        assert.ok(w.promotedValues[i] <= w.promotedValues[i - 1]);
        assert.ok(w.suppressedValues[i] >= w.suppressedValues[i - 1]);
      }
      assert.throws(() => engine.saeStrip(info.id, 96), /0\.\.95/);
      engine.dropSae(info.id);
      assert.ok(!engine.saes().some((s) => s.id === info.id));
      assert.throws(() => engine.saeFeatures(info.id, 0, 4), /no SAE/);
    }
  });

  test('steered and clamped generation equals gpt2 generate --sae --steer --clamp', () => {
    const info = engine.loadSae(fs.readFileSync(gguf.standard));
    const s = {...kSampling, maxTokens: 8};
    const native = tool('gpt2', ['generate', '--model', models.model, '--prompt', kPrompt, '--n', String(s.maxTokens),
                                 '--temp', String(s.temperature), '--top-k', String(s.topK), '--top-p', String(s.topP),
                                 '--seed', String(s.seed), '--threads', '1', '--print-ids', '--activations', 'int8',
                                 '--sae', gguf.standard, '--steer', '3:4,17:-2.5', '--clamp', '5:0'])
        .trimEnd().split('\n').pop().trim().split(/\s+/).map(Number);
    const ids = Array.from(engine.tokenize(kPrompt));
    engine.startGeneration(ids, {...s, capture: true}, {sae: [{id: info.id, steer: [[3, 4], [17, -2.5]], clamp: [[5, 0]]}]});
    const got = [];
    for (let id = engine.nextToken(false); id >= 0; id = engine.nextToken(false)) got.push(id);
    assert.deepEqual(got, native);
    assert.equal(engine.firstChangedBlock(), info.layer);
    assert.throws(() => engine.setInterventions({sae: [{id: info.id, steer: [[96, 1]]}]}), /0\.\.95/);
    assert.throws(() => engine.setInterventions({sae: [{id: 999, steer: [[1, 1]]}]}), /no SAE/);
    engine.setInterventions({});
    engine.dropSae(info.id);
  });

  test('the CLI refuses bad SAE input with exit status 2 and a message', () => {
    const g = ['generate', '--model', models.model, '--prompt', kPrompt, '--n', '2'];
    for (const args of [[...g, '--steer', '3:1'],
                        [...g, '--sae', gguf.standard, '--steer', '96:1'],
                        [...g, '--sae', gguf.standard, '--clamp', '3'],
                        [...g, '--sae', gguf.standard, '--clamp', '3:x'],
                        [...g, '--sae', models.model, '--steer', '3:1'],
                        ['inspect', '--model', models.model, '--prompt', kPrompt, '--json', path.join(dir, 'x.json'),
                         '--sae', gguf.standard, '--steer', '-1:2'],
                        ['features', '--model', models.model, '--sae', gguf.standard, '--prompt', kPrompt, '--top', '0'],
                        ['features', '--model', models.model, '--sae', path.join(dir, 'missing.gguf'), '--prompt', kPrompt],
                        ['features', '--model', models.model, '--prompt', kPrompt]]) {
      let status = 0, stderr = '';
      try {
        execFileSync(path.join(kNative, 'gpt2'), args, {stdio: 'pipe'});
      } catch (e) {
        status = e.status;
        stderr = String(e.stderr);
      }
      assert.equal(status, 2, args.join(' '));
      assert.match(stderr, /gpt2: error: ./, args.join(' '));
    }
    // Steering and clamping are accepted by inspect and attribute too.
    const out = tool('gpt2', ['attribute', '--model', models.model, '--prompt', kPrompt, '--sae', gguf.standard,
                              '--steer', '3:4', '--clamp', '5:0', '--threads', '1']);
    assert.match(out, /stream_edits/);
  });
});
