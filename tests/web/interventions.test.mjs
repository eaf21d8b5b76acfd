// The Embind API's interventions and attribution under Node (build/wasm/web/gpt2-engine-node.cjs),
// against the native CLI's `inspect --ablate-heads ...` and `attribute` on the same model: the
// bindings only forward to src/model, so both builds must agree (the model itself is checked
// against PyTorch in tests/model/intervention_test.cc).
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {before, describe, test} from 'node:test';
import {closeTo, inspectLogProbs, kNative, kNodeModule, kPrompt, makeModels, nativeInspect, nodeEngine, tensor} from './fixtures.mjs';

const kGpt2 = path.join(kNative, 'gpt2');

describe('Embind interventions and attribution under Node',
         {skip: !fs.existsSync(kNodeModule) && 'build/wasm not built'}, () => {
  let Module, models, engine, info, ids;

  before(async () => {
    models = makeModels('node-interventions');
    ({Module, engine, info} = await nodeEngine(models.model));
    ids = Array.from(engine.tokenize(kPrompt));
  });

  test('a re-run under interventions reuses the cache and equals native inspect with the flags', () => {
    const T = ids.length;
    engine.reset();
    engine.setCapture(true);
    engine.setInterventions({});
    engine.prefill(ids);
    const clean = Array.from(engine.topProbs(T - 1).probs);
    engine.setInterventions({ablateHeads: [[1, 2]], skipMlp: [1]});
    assert.equal(engine.firstChangedBlock(), 1);
    assert.equal(engine.rerun(), 1);  // block 0 is reused
    const native = nativeInspect(models.model, kPrompt, ['--ablate-heads', '1.2', '--skip-mlp', '1']);
    const top = engine.topProbs(T - 1);
    assert.deepEqual(Array.from(top.ids).slice(0, 3), native.final[T - 1].top_ids.slice(0, 3));
    closeTo(top.probs[0], native.final[T - 1].top_probs[0], 2e-3, 'intervened top prob');
    assert.notDeepEqual(Array.from(top.probs), clean);
    const norms = engine.residualNorms();  // [L+1, T]: the intervened stream after block 1
    const resid = tensor(native, 'resid_out', 1);
    for (let p = 0; p < T; ++p) {
      const r = resid.data.slice(p * info.n_embd, (p + 1) * info.n_embd);
      closeTo(norms[2 * T + p], Math.sqrt(r.reduce((s, x) => s + x * x, 0)), 5e-3, `resid norm p${p}`);
    }
    // Back to the plain model: the re-run starts where the last run's cache differs.
    engine.setInterventions({});
    assert.equal(engine.rerun(), 1);
    closeTo(engine.topProbs(T - 1).probs[0], clean[0], 1e-5, 'clean again');
    // Mean ablation takes its means from the captured (clean) run; it changes the prediction
    // differently from zero ablation.
    engine.setInterventions({ablateHeads: [[0, 1]], meanAblation: true});
    assert.equal(engine.rerun(), 0);
    assert.ok(engine.topProbs(T - 1).probs[0] > 0);
  });

  test('finalProbs is the whole next-token distribution: the softmax of native inspect\'s logits', () => {
    const T = ids.length;
    engine.setInterventions({postNorm: true});
    engine.reset();
    engine.setCapture(true);
    engine.prefill(ids);
    const native = nativeInspect(models.model, kPrompt, ['--post-norm']);
    const t = native.tensors.find((x) => x.name === 'logits');
    const V = t.shape[1];
    for (const p of [0, T - 1]) {
      const probs = engine.finalProbs(p);
      assert.equal(probs.length, V);
      const row = t.data.slice(p * V, (p + 1) * V);
      const max = Math.max(...row);
      const sum = row.reduce((s, x) => s + Math.exp(x - max), 0);
      let total = 0;
      for (let i = 0; i < V; ++i) {
        total += probs[i];
        if (i % 97 === 0 || probs[i] > 1e-3) closeTo(probs[i], Math.exp(row[i] - max) / sum, 1e-3, `p${p} id ${i}`);
      }
      closeTo(total, 1, 1e-4, 'sums to 1');
    }
    assert.throws(() => engine.finalProbs(T), /valid positions are 0\.\./);
    engine.setInterventions({});
  });

  test('attribution equals the native CLI and sums to the logit', () => {
    engine.setInterventions({ablateHeads: [[0, 3]]});
    const a = engine.attribute(ids, -1, -1, -1);
    const out = execFileSync(kGpt2, ['attribute', '--model', models.model, '--prompt', kPrompt,
                                     '--threads', '1', '--activations', 'int8', '--ablate-heads', '0.3'],
                           {encoding: 'utf8'});
    const lines = out.trimEnd().split('\n').map((l) => l.split('\t'));
    assert.equal(lines.length, a.names.length + 1);
    let sum = 0;
    a.names.forEach((name, i) => {
      assert.equal(name, lines[i][0]);
      closeTo(a.values[i], Number(lines[i][1]), 1e-4, name);
      sum += a.values[i];
    });
    assert.equal(lines[lines.length - 1][0], 'logit');
    closeTo(a.logit, Number(lines[lines.length - 1][1]), 1e-4, 'logit');
    // The terms sum to the f32 product of ln_f's output with the unembedding row; this Q8_0
    // model's logit multiplies that output as int8 activations (kernels.h QuantActivations),
    // rounded in blocks of 32 to max/127 steps, which moves it by ~0.1 %. The sum is exact for
    // an F32 model (tests/model/intervention_test.cc, against PyTorch).
    closeTo(sum, a.logit, 5e-3, 'sum of components');
    assert.equal(a.position, ids.length - 1);
    assert.equal(engine.position(), ids.length);  // the conversation is the attributed prompt
    engine.setInterventions({});
  });

  test('patches forward to the engine: an identity patch changes nothing, a foreign one does', () => {
    const T = ids.length, C = info.n_embd, p = T - 1;
    engine.setInterventions({});
    engine.reset();
    engine.setCapture(true);
    engine.prefill(engine.tokenize('A completely different prompt goes right here, and on'));
    const foreign = engine.residual(1).slice(p * C, (p + 1) * C);  // entering block 1
    engine.reset();
    engine.prefill(ids);
    const own = engine.residual(1).slice(p * C, (p + 1) * C);
    const clean = Array.from(engine.topProbs(p).probs);
    engine.setInterventions({patches: [{layer: 1, position: p, value: own}]});
    assert.equal(engine.rerun(), 1);
    Array.from(engine.topProbs(p).probs).forEach((x, i) => closeTo(x, clean[i], 1e-5, `identity ${i}`));
    engine.setInterventions({patches: [{layer: 1, position: p, value: foreign}]});
    assert.equal(engine.rerun(), 1);
    assert.ok(Math.abs(engine.topProbs(p).probs[0] - clean[0]) > 1e-4);
    assert.throws(() => engine.setInterventions({patches: [{layer: 1, position: p, value: own.slice(1)}]}),
                  /residual vector has 63 values/);
    engine.setInterventions({});
  });

  test('probes (one step of the heads sweep or of patching) equal native inspect and full re-runs', () => {
    const T = ids.length, L = info.n_layer, C = info.n_embd, zero = new Float32Array(0);
    const logSoftmax = (inspect, p) => {
      const lp = inspectLogProbs(inspect, p);
      return (id) => lp[id];
    };
    engine.setInterventions({});
    engine.reset();
    engine.setCapture(true);
    engine.prefill(engine.tokenize('A completely different prompt goes right here, and on'));
    const foreign = engine.residual(1).slice(2 * C, 3 * C);  // entering block 1 at position 2
    engine.reset();
    engine.prefill(ids);
    const target = engine.topProbs(T - 1).ids[1];
    closeTo(engine.logProbs(T - 1, [target])[0], logSoftmax(nativeInspect(models.model, kPrompt, []), T - 1)(target),
            1e-4, 'baseline');
    // Mixed blocks and positions: each probe re-runs what the one before it changed.
    for (const [l, h, p] of [[1, 2, T - 1], [0, 3, 2], [1, 0, 4], [0, 1, T - 1], [1, 1, 0]]) {
      const want = logSoftmax(nativeInspect(models.model, kPrompt, ['--ablate-heads', `${l}.${h}`]), p)(target);
      closeTo(engine.ablatedLogProbs([[l, h]], p, target, zero)[0], want, 1e-4, `head ${l}.${h} at ${p}`);
    }
    assert.throws(() => engine.step(198), /call rerun\(\) before running on/);
    // A patch probe equals the same patch set as an intervention and re-run over every position.
    const stream = new Float32Array(T * C);  // only row 2 is read
    stream.set(foreign, 2 * C);
    const [got] = engine.patchedLogProbsAt(1, [2], stream, [target]);
    engine.setInterventions({patches: [{layer: 1, position: 2, value: foreign}]});
    engine.rerun();
    closeTo(got, Math.log(engine.finalProbs(T - 1)[target]), 1e-4, 'patch probe');
    assert.throws(() => engine.ablatedLogProbs([[0, 0]], 0, target, zero)[0], /captured run of the plain model/);
    // Mean ablation with the capture's means equals setInterventions({meanAblation}) re-run.
    engine.setInterventions({});
    engine.rerun();
    const means = engine.headMeans();
    assert.equal(means.length, L * C);
    const mean = engine.ablatedLogProbs([[0, 2]], T - 1, target, means)[0];
    engine.setInterventions({ablateHeads: [[0, 2]], meanAblation: true});
    engine.rerun();
    closeTo(mean, Math.log(engine.finalProbs(T - 1)[target]), 1e-4, 'mean-ablated probe');
    engine.setInterventions({ablateHeads: [[0, 2]], headMeans: means});  // the same, means given
    engine.rerun();
    closeTo(mean, Math.log(engine.finalProbs(T - 1)[target]), 1e-4, 'headMeans');
    assert.throws(() => engine.setInterventions({ablateHeads: [[0, 2]], headMeans: means.slice(1)}), /head means/);
    engine.setInterventions({});
    engine.rerun();
    engine.step(198);  // after a re-run the conversation goes on
    assert.throws(() => engine.ablatedLogProbs([[0, 0]], T + 5, target, zero)[0], /valid positions are 0\.\./);
    assert.throws(() => engine.ablatedLogProbs([[0, 4]], 0, target, zero)[0], /valid heads are 0\.\.3/);
    assert.throws(() => engine.ablatedLogProbs([[0, 0]], 0, -1, zero)[0], /not in the vocabulary/);
    assert.throws(() => engine.patchedLogProbsAt(0, [0], stream.slice(1), [target]), /the stream has/);
    assert.throws(() => engine.setInterventions({patches: [{layer: 0, position: 0, value: foreign.slice(1)}]}),
                  /residual vector has 63 values/);
  });

  test('batched probes (a heads sweep\'s group, a block of patching) equal native inspect and full re-runs', () => {
    const T = ids.length, L = info.n_layer, C = info.n_embd, zero = new Float32Array(0);
    engine.setInterventions({});
    engine.reset();
    engine.setCapture(true);
    engine.prefill(engine.tokenize('A completely different prompt goes right here, and on'));
    const foreign = Array.from({length: L}, (_, l) => engine.residual(l).slice(0, T * C));  // [T, C] per block
    engine.reset();
    engine.prefill(ids);
    const target = engine.topProbs(T - 1).ids[1], other = engine.topProbs(T - 1).ids[2];
    const logSoftmax = (x, p, id) => inspectLogProbs(x, p)[id];
    // A sweep's order (the last block down) at two positions, the baseline read in between.
    for (const p of [T - 1, 3]) {
      const heads = [[L - 1, 0], [L - 1, 3], [0, 1], [0, 2]];
      const got = engine.ablatedLogProbs(heads, p, target, zero);
      assert.equal(got.length, heads.length);
      heads.forEach(([l, h], i) => {
        const want = logSoftmax(nativeInspect(models.model, kPrompt, ['--ablate-heads', `${l}.${h}`]), p, target);
        closeTo(got[i], want, 1e-4, `head ${l}.${h} at ${p}`);
      });
      closeTo(engine.logProbs(p, [target])[0], logSoftmax(nativeInspect(models.model, kPrompt, []), p, target), 1e-4,
              `baseline at ${p}`);
    }
    // Patching block by block, positions going down (each probe re-runs only its rows and the
    // rows the block before left changed), equals each patch set alone and re-run everywhere.
    const got = [];
    for (let l = L - 1; l >= 0; --l) {
      const positions = Array.from({length: T}, (_, i) => T - 1 - i);
      const lp = engine.patchedLogProbsAt(l, positions, foreign[l], [target, other]);
      assert.equal(lp.length, 2 * T);
      positions.forEach((p, i) => got.push({l, p, a: lp[2 * i], o: lp[2 * i + 1]}));
    }
    for (const {l, p, a, o} of got) {
      engine.setInterventions({patches: [{layer: l, position: p, value: foreign[l].slice(p * C, (p + 1) * C)}]});
      engine.rerun();
      const probs = engine.finalProbs(T - 1);
      closeTo(a, Math.log(probs[target]), 1e-4, `patch ${l}.${p}, target`);
      closeTo(o, Math.log(probs[other]), 1e-4, `patch ${l}.${p}, other`);
    }
    assert.ok(got.some(({a}) => Math.abs(a - got[got.length - 1].a) > 1e-3), 'the patches differ');
    engine.setInterventions({});
    engine.rerun();
    assert.throws(() => engine.patchedLogProbsAt(0, [0], foreign[0].slice(C), [target]), /stream has .* values/);
    assert.throws(() => engine.patchedLogProbsAt(0, [T], foreign[0], [target]), /valid positions are 0\.\./);
    assert.throws(() => engine.patchedLogProbsAt(0, [0], foreign[0], []), /at least one token/);
    assert.throws(() => engine.ablatedLogProbs([[0, 9]], T - 1, target, zero), /valid heads are/);
    assert.throws(() => engine.ablatedLogProbs([[0]], T - 1, target, zero), /heads\[0\] must be a pair \[layer, head\]/);
    // A rejected call runs nothing: the cache is still the plain run's, so the conversation goes on.
    engine.step(198);
  });

  test('the CLI exits 2 naming the valid range for a layer or head out of range', () => {
    for (const [command, flags, message] of [
      ['generate', ['--skip-attn', '5'], '--skip-attn: layer 5 is out of range; valid layers are 0..1'],
      ['inspect', ['--ablate-heads', '0.4', '--json', path.join(path.dirname(models.model), 'x.json')],
       '--ablate-heads: head 4 is out of range; valid heads are 0..3'],
      ['attribute', ['--no-residual', '0,2'], '--no-residual: layer 2 is out of range; valid layers are 0..1'],
    ]) {
      try {
        execFileSync(kGpt2, [command, '--model', models.model, '--prompt', kPrompt, ...flags], {stdio: 'pipe'});
        assert.fail(`${command} accepted ${flags.join(' ')}`);
      } catch (e) {
        assert.equal(e.status, 2, `${command} exit status`);
        assert.match(e.stderr.toString(), new RegExp(message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
      }
    }
  });

  test('the CLI exits 2 naming the valid --activations values', () => {
    for (const command of ['generate', 'attribute']) {
      try {
        execFileSync(kGpt2, [command, '--model', models.model, '--prompt', kPrompt, '--activations', 'f16'],
                     {stdio: 'pipe'});
        assert.fail(`${command} accepted --activations f16`);
      } catch (e) {
        assert.equal(e.status, 2, `${command} exit status`);
        assert.match(e.stderr.toString(), /--activations must be int8, f32 or fastest, got 'f16'/);
      }
    }
  });

  test('bad interventions throw naming the valid range', () => {
    assert.throws(() => engine.setInterventions({skipAttn: [2]}), /valid layers are 0\.\.1/);
    assert.throws(() => engine.setInterventions({ablateHeads: [[0, 4]]}), /valid heads are 0\.\.3/);
    assert.throws(() => engine.attribute(ids, 99, -1, -1), /valid positions/);
  });

  // Requests are read by one table per struct (src/bindings/js_calls.h's Request): a field it does
  // not name, or a value of the wrong kind, is refused by name rather than run without.
  test('a misspelt or mistyped request is refused naming the field, and runs nothing', () => {
    engine.reset();
    engine.setInterventions({});
    engine.prefill(ids);
    const plain = Array.from(engine.finalProbs(ids.length - 1));
    const refused = [
      [{skipMLP: [1]}, /interventions has no field 'skipMLP' \(its fields: ablateHeads, .*skipMlp/],
      [{skipAttn: ['1']}, /interventions\.skipAttn\[0\] must be a number/],
      [{skipAttn: [0.5]}, /interventions\.skipAttn\[0\] must be a whole number/],
      [{skipAttn: 1}, /interventions\.skipAttn must be a list/],
      [{postNorm: 1}, /interventions\.postNorm must be true or false/],
      [{ablateHeads: [[0, 1, 2]]}, /interventions\.ablateHeads\[0\] must be a pair \[layer, head\]/],
      [{sae: [{id: 0, steer: [[3, 'x']]}]}, /interventions\.sae\[0\]\.steer\[0\]\[1\] must be a number/],
      [{sae: [{id: 0, stear: [[3, 1]]}]}, /interventions\.sae\[0\] has no field 'stear'/],
      [{patches: [{layer: 0, position: 0, value: new Float32Array(4), pos: 1}]}, /patches\[0\] has no field 'pos'/],
      [[1], /interventions must be an object/],
    ];
    for (const [spec, message] of refused) {
      assert.throws(() => engine.setInterventions(spec), message, JSON.stringify(spec));
      assert.throws(() => engine.attributeConversation(spec, 0, 0), message, JSON.stringify(spec));
    }
    assert.throws(() => engine.experiment(ids, {}, ids.length, {temperature: 0, maxTokens: 1, topk: 3}),
                  /sampling settings has no field 'topk'/);
    assert.throws(() => engine.startGeneration(ids, {seed: -1}, {}), /sampling settings\.seed must be a whole number >= 0/);
    assert.throws(() => engine.startGeneration(ids, {maxTokens: '2'}, {}), /sampling settings\.maxTokens must be a number/);
    assert.throws(() => engine.setSampling({temperature: 0, maxTokens: 3}), /sampling settings has no field 'maxTokens'/);
    // Nothing ran under any of them: the conversation is the plain one, and a page-form spec (every
    // field present, as interventions.js's canonical() writes it) is accepted.
    assert.deepEqual(Array.from(engine.finalProbs(ids.length - 1)), plain);
    engine.setInterventions({ablateHeads: [], meanAblation: false, skipAttn: [], skipMlp: [], noResidual: [],
                             postNorm: false, sae: []});
  });
});
