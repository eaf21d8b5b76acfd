// The page's SAE text formats in Node, without a browser: share links naming SAEs and their
// steering (web/page/share.js with web/shared/sae.js), Neuronpedia's labels export, the Hugging Face paths and
// the memory check. A malformed part of a link is named in `problems`, never thrown.
import assert from 'node:assert/strict';
import {describe, test} from 'node:test';
import zlib from 'node:zlib';
import {kWasmMaxBytes} from '../../web/shared/hf.js';
import {cfgShape, hfSaeUrl, labelsText, parseLabels, saeBytes, saeCacheKey, saeFolderUrls, saeInterventions,
        saeRefusal} from '../../web/shared/sae.js';
import {decodeShare, encodeShare} from '../../web/page/share.js';

const kView = {
  model: 'models/tiny.gguf', prompt: 'Hi', sampling: {temperature: 0.8, 'top-k': 40, 'top-p': 1, seed: 1, 'max-tokens': 5},
  interventions: {ablateHeads: [], skipAttn: [], skipMlp: [], noResidual: [], postNorm: false}, pick: 1, block: 0, head: 0,
};

describe('SAEs in share links', () => {
  test('sources and edits survive the round trip', () => {
    const q = new URLSearchParams(encodeShare({...kView, saes: ['hf:3', 'https://example.org/saes/l1'],
                                               saeSteer: [[0, 12, 4], [1, 7, -2.5]], saeClamp: [[1, 3, 0]]}));
    assert.deepEqual(q.getAll('sae'), ['hf:3', 'https://example.org/saes/l1']);
    assert.equal(q.get('sae-steer'), '0.12:4,1.7:-2.5');
    assert.equal(q.get('hf'), null);
    assert.equal(new URLSearchParams(encodeShare({...kView, saes: ['hf:1'], hf: 'http://127.0.0.1:9'})).get('hf'),
                 'http://127.0.0.1:9');
    const out = decodeShare(q);
    assert.deepEqual(out.problems, []);
    assert.deepEqual(out.saes, [{kind: 'hf', layer: 3}, {kind: 'url', folder: 'https://example.org/saes/l1'}]);
    assert.deepEqual(out.saeSteer, [[0, 12, 4], [1, 7, -2.5]]);
    assert.deepEqual(out.saeClamp, [[1, 3, 0]]);
  });

  test('a link without SAEs says none', () => {
    const out = decodeShare(new URLSearchParams(encodeShare(kView)));
    assert.deepEqual(out.saes, []);
    assert.equal(out.saeSteer, undefined);
  });

  test('malformed parts are named and left out', () => {
    const out = decodeShare(new URLSearchParams('sae=hf:12&sae=hf:1&sae-steer=0.3:x&sae-clamp=4.1:0&pick=0'));
    assert.deepEqual(out.saes, [{kind: 'hf', layer: 1}]);
    assert.equal(out.saeSteer, undefined);
    assert.equal(out.saeClamp, undefined);
    assert.equal(out.problems.length, 3, out.problems.join('\n'));
    assert.match(out.problems[0], /^sae=hf:12 \(GPT-2 small has SAEs for blocks 0\.\.11\)/);
    assert.match(out.problems[1], /^sae-steer=0\.3:x \(expected SAE\.FEATURE:NUMBER/);
    assert.match(out.problems[2], /^sae-clamp=4\.1:0 \(names SAE 4, but the link has 1\)/);
  });
});

describe('SAE files and sizes', () => {
  test('Hugging Face paths, folder URLs and cache keys', () => {
    assert.equal(hfSaeUrl('https://huggingface.co/', 5, 'cfg.json'),
                 'https://huggingface.co/jbloom/GPT2-Small-SAEs-Reformatted/resolve/main/blocks.5.hook_resid_pre/cfg.json');
    assert.deepEqual(saeFolderUrls('saes/l1', 'https://a.example/site/index.html'),
                     {cfg: 'https://a.example/site/saes/l1/cfg.json',
                      weights: 'https://a.example/site/saes/l1/sae_weights.safetensors'});
    assert.equal(saeCacheKey('https://a.example/x/sae_weights.safetensors?download=1'),
                 'https://a.example/x/sae_weights.safetensors.q8_0.gguf');
  });

  test('the memory check refuses what does not fit beside the model', () => {
    const jb = saeBytes(768, 24576);
    assert.equal(jb.checkpoint, (2 * 768 * 24576 + 2 * 24576 + 768) * 4);  // SAELens's f32 file, ~151 MB
    assert.ok(jb.loaded > 768 * 24576 * 5 && jb.loaded < 0.7 * jb.checkpoint, `${jb.loaded}`);  // W_enc Q8_0, W_dec f32
    assert.equal(saeRefusal({modelBytes: 180e6, loadedBytes: 4 * jb.loaded, needBytes: jb.peak, count: 4}), '');
    assert.match(saeRefusal({modelBytes: kWasmMaxBytes - jb.loaded, loadedBytes: 0, needBytes: jb.peak, count: 0}),
                 /more than a web page's engine can use/);
    assert.match(saeRefusal({modelBytes: 180e6, loadedBytes: 40e6, needBytes: jb.peak, count: 1, deviceMemory: 0.25}),
                 /the 1 SAE loaded.*about 0.25 GB/);
    assert.deepEqual(cfgShape('{"d_in": 64, "d_sae": 96}'), {dIn: 64, dSae: 96});
    assert.equal(cfgShape('{"d_in": "x"}'), null);
    assert.equal(cfgShape('not json'), null);
  });

  test('steering and clamping as the engine takes them', () => {
    assert.deepEqual(saeInterventions([{id: 2, feature: 5, mode: 'steer', value: 3}, {id: 0, feature: 1, mode: 'clamp', value: 0},
                                       {id: 2, feature: 9, mode: 'clamp', value: 1.5}]),
                     [{id: 2, steer: [[5, 3]], clamp: [[9, 1.5]]}, {id: 0, steer: [], clamp: [[1, 0]]}]);
  });
});

describe("Neuronpedia's labels export", () => {
  test('JSON lines and a JSON array; the first label of a feature is kept', () => {
    const lines = ['{"modelId":"gpt2-small","layer":"8-res-jb","index":"12","description":" the word cat ","typeName":"oai_token-act-pair"}',
                   '', '{"index": 3, "description": "numbers"}', '{"index": "12", "description": "a second label"}'].join('\n');
    const labels = parseLabels(lines);
    assert.deepEqual([...labels], [[12, 'the word cat'], [3, 'numbers']]);
    assert.deepEqual([...parseLabels('[{"index": 0, "description": "first"}]')], [[0, 'first']]);
  });

  test('gzipped as Neuronpedia publishes it, or plain', async () => {
    const text = '{"index": "7", "description": "seven"}\n';
    assert.equal(await labelsText(zlib.gzipSync(Buffer.from(text))), text);
    assert.equal(await labelsText(Buffer.from(text)), text);
  });

  test('anything else is a clear error', () => {
    assert.throws(() => parseLabels('{"index": 1, "description": "x"}\nnot json'), /Line 2 of the labels file is not JSON/);
    assert.throws(() => parseLabels('{"feature": 1, "label": "x"}'), /no feature labels/);
    assert.throws(() => parseLabels('[1, 2'), /not valid JSON/);
  });
});
