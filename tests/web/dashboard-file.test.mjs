// The dashboard file reader (web/shared/dashboard.js), which opens our files and Neuronpedia's
// exports in the page: the shapes it accepts, the errors it gives, and a fuzz of it: thousands of
// seeded corruptions of a valid file (bytes flipped, cut, values swapped for other types, huge and
// nested values) either read into a well-formed dashboard or fail with a DashboardFileError,
// never another exception, and a write and read back gives the same dashboards. Large files are
// indexed a piece at a time instead (ours as the engine writes it, a feature a line, or JSON
// Lines): the index reads back every feature the whole-file reader reads.
import assert from 'node:assert/strict';
import {gzipSync} from 'node:zlib';
import {describe, test} from 'node:test';
import {DashboardFileError, dashboardText, featureText, indexDashboardFile, openDashboardBytes, parseDashboardText,
        readIndexedFeature, splitWindows} from '../../web/shared/dashboard.js';

const window_ = (dataIndex, values, binMin = -1, binMax = -1, binContains = 3) => ({
  tokens: values.map((_, i) => ` t${i}`), values, maxValue: Math.max(...values),
  maxValueTokenIndex: values.indexOf(Math.max(...values)), dataIndex, binMin, binMax, binContains});
const feature = (layer, index) => ({
  layer, index, frac_nonzero: 0.25, maxActApprox: 3,
  pos_str: [' a', ' b'], pos_values: [0.5, 0.25], neg_str: [' c'], neg_values: [-0.5],
  freq_hist_data_bar_heights: [2, 1], freq_hist_data_bar_values: [0.75, 2.25],
  activations: [window_(4, [0, 3, 1]), window_(1, [2, 0]), window_(1, [2, 0], 1.5, 3, 2), window_(0, [1, 0], 0, 1.5, 1)]});
const ours = {metadata: {model: 'm.gguf', dictionary: 'transcoders', corpus: 'c.txt', context: 3, n_windows: 5,
                         n_tokens: 14},
              features: [feature(0, 1), feature(1, 7)]};

// mulberry32 (as browsers.test.mjs): seeded, so a failure names its case.
function random(seed) {
  return () => {
    seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// What every dashboard the reader returns is, whatever its input.
function assertWellFormed({metadata, features}) {
  assert.ok(metadata === null || typeof metadata === 'object');
  for (const f of features) {
    assert.ok(Number.isInteger(f.layer) && f.layer >= 0 && Number.isInteger(f.index) && f.index >= 0);
    assert.equal(f.pos_str.length, f.pos_values.length);
    assert.equal(f.neg_str.length, f.neg_values.length);
    assert.equal(f.freq_hist_data_bar_heights.length, f.freq_hist_data_bar_values.length);
    for (const w of f.activations) {
      assert.equal(w.tokens.length, w.values.length);
      assert.ok(w.tokens.every((s) => typeof s === 'string'));
      assert.ok(w.tokens.length === 0 || (w.maxValueTokenIndex >= 0 && w.maxValueTokenIndex < w.tokens.length));
    }
    const {top, bands} = splitWindows(f);
    assert.equal(top.length + bands.reduce((n, b) => n + b.windows.length, 0), f.activations.length);
  }
}

describe('the dashboard file reader', () => {
  test('ours, a list, one feature and JSON Lines read the same; gzip opens; write and read back', async () => {
    const a = parseDashboardText(JSON.stringify(ours));
    assert.deepEqual(a.metadata, ours.metadata);
    assert.deepEqual(parseDashboardText(JSON.stringify(ours.features)).features, a.features);
    assert.deepEqual(parseDashboardText(ours.features.map((f) => JSON.stringify(f)).join('\n') + '\n').features, a.features);
    assert.deepEqual(parseDashboardText(JSON.stringify(ours.features[1])).features, [a.features[1]]);
    assert.deepEqual((await openDashboardBytes(gzipSync(JSON.stringify(ours)))).features, a.features);
    assert.deepEqual(parseDashboardText(dashboardText(a)), a);
    const {top, bands} = splitWindows(a.features[0]);
    assert.deepEqual(top.map((w) => w.dataIndex), [4, 1]);
    assert.deepEqual(bands.map((b) => [b.min, b.max, b.contains, b.windows.length]), [[0, 1.5, 1, 1], [1.5, 3, 2, 1]]);
  });

  test('Neuronpedia\'s keys: its source id as the layer, the index as text, its label, missing fields', () => {
    const np = {modelId: 'gpt2-small', layer: '8-res-jb', index: '1234', explanations: [{description: 'cats'}],
                activations: [{tokens: ['a', 'b'], values: [0, 1.5], maxValue: 1.5, minValue: 0}]};
    const [f] = parseDashboardText(JSON.stringify(np)).features;
    assert.deepEqual([f.layer, f.source, f.index, f.label, f.maxActApprox], [8, '8-res-jb', 1234, 'cats', 1.5]);
    assert.deepEqual([f.activations[0].maxValueTokenIndex, f.activations[0].binMin, f.activations[0].dataIndex], [1, -1, -1]);
    assert.ok(Number.isNaN(f.frac_nonzero));
  });

  test('malformed files fail with a message naming where', () => {
    const bad = [
      ['', /empty/],
      ['{"metadata": {}}', /not a dashboard/],
      ['[{"layer": "x", "index": 1}]', /feature 0: layer "x"/],
      ['[{"layer": 1, "index": -2}]', /index -2/],
      ['[{"layer": 1, "index": 2, "activations": [{"tokens": ["a"], "values": [1, 2]}]}]', /2 values for 1 tokens/],
      ['[{"layer": 1, "index": 2, "pos_str": ["a"], "pos_values": []}]', /0 pos_values for 1 pos_str/],
      ['{"layer": 1, "index": 2}\n{"layer": 1,', /line 2: not JSON/],
      ['[{"layer": 1, "index": 2, "activations": [{"tokens": ["a"], "values": [1], "maxValueTokenIndex": 5}]}]',
       /maxValueTokenIndex 5/],
    ];
    for (const [text, message] of bad) {
      assert.throws(() => parseDashboardText(text), (e) => e instanceof DashboardFileError && message.test(e.message), text);
    }
  });

  test('ours as the engine writes it and JSON Lines are indexed in pieces; other shapes are left to the whole reader', async () => {
    const whole = parseDashboardText(JSON.stringify(ours));
    // The engine's layout: the metadata on the first line, then a feature a line (é: bytes, not characters).
    const text = `{"metadata":${JSON.stringify({...ours.metadata, corpus: 'é.txt'})},"features":[\n` +
                 ours.features.map((f) => JSON.stringify(f)).join(',\n') + '\n]}\n';
    const lines = ours.features.map((f) => JSON.stringify({...f, explanations: [{description: 'é'}]})).join('\r\n');
    for (const piece of [1, 7, 1 << 20]) {
      const seen = [];
      const a = await indexDashboardFile(new Blob([text]), piece, (done, size) => seen.push([done, size]));
      assert.ok(a.ours);
      assert.deepEqual(seen.at(-1), [new Blob([text]).size, new Blob([text]).size], 'the progress ends at the size');
      assert.ok(seen.every(([done], i) => i === 0 || done > seen[i - 1][0]), 'the progress rises');
      assert.deepEqual(a.metadata, {...ours.metadata, corpus: 'é.txt'});
      assert.deepEqual(a.features.map((e) => [e.layer, e.index, e.maxActApprox]), [[0, 1, 3], [1, 7, 3]]);
      for (const [i, e] of a.features.entries()) {
        assert.deepEqual(await readIndexedFeature(new Blob([text]), e), whole.features[i], `piece ${piece}, feature ${i}`);
      }
      const b = await indexDashboardFile(new Blob([lines]), piece);
      assert.equal(b.metadata, null);
      assert.deepEqual(b.features.map((e) => e.label), ['é', 'é']);
      assert.deepEqual((await readIndexedFeature(new Blob([lines]), b.features[1])).activations, whole.features[1].activations);
      // What the page exports of an indexed file reads back the same.
      assert.deepEqual(parseDashboardText(featureText(whole.features[1])).features, [whole.features[1]]);
    }
    for (const other of [JSON.stringify(ours), JSON.stringify(ours.features), JSON.stringify(ours, null, 2), '[\n1]']) {
      assert.equal(await indexDashboardFile(new Blob([other]), 5), null, other.slice(0, 20));
    }
    await assert.rejects(indexDashboardFile(new Blob([lines + '\n{"index": ']), 3), /line 3: not JSON/);
    await assert.rejects(indexDashboardFile(new Blob([text.replace('\n]}\n', '\n')]), 3), /does not end/);
    await assert.rejects(indexDashboardFile(new Blob([`${text}{"layer": 0}\n`]), 3), /after the end/);
    await assert.rejects(indexDashboardFile(new Blob([`${JSON.stringify(ours.features[0])}\n{"layer": -1, "index": 2}`])),
                         /line 2.*layer/);
  });

  test('fuzz: 4,000 corruptions read well-formed or fail with a DashboardFileError, whole and indexed', async () => {
    let indexed = 0;
    const next = random(50);
    const base = JSON.stringify(ours);
    const others = [null, true, -1, 1e308, '', 'x', [], {}, [[]], {index: 1}, 'NaN', 2 ** 53, -0.5];
    const pick = (xs) => xs[Math.floor(next() * xs.length)];
    const mutateValue = (v, depth = 0) => {
      if (next() < 0.15 || depth > 6) return pick(others);
      if (Array.isArray(v)) {
        const out = v.map((x) => (next() < 0.3 ? mutateValue(x, depth + 1) : x));
        if (next() < 0.1) out.push(pick(others));
        if (next() < 0.1) out.pop();
        return out;
      }
      if (v !== null && typeof v === 'object') {
        const out = {};
        for (const [k, x] of Object.entries(v)) if (next() > 0.05) out[k] = next() < 0.3 ? mutateValue(x, depth + 1) : x;
        return out;
      }
      return v;
    };
    let read = 0;
    for (let i = 0; i < 4000; ++i) {
      let text;
      const kind = i % 4;
      if (kind === 0) text = JSON.stringify(mutateValue(JSON.parse(base)));
      else if (kind === 1) text = base.slice(0, Math.floor(next() * base.length));
      else if (kind === 2) {
        const chars = [...base];
        for (let k = 0; k < 1 + next() * 4; ++k) chars[Math.floor(next() * chars.length)] = String.fromCharCode(next() * 128 | 0);
        text = chars.join('');
      } else text = ours.features.map((f) => JSON.stringify(mutateValue(f))).join('\n');
      try {
        const d = parseDashboardText(text);
        assertWellFormed(d);
        ++read;
      } catch (e) {
        if (!(e instanceof DashboardFileError)) throw new Error(`case ${i}: ${e.stack}\n${text.slice(0, 300)}`);
      }
      // The indexer, over the JSON Lines as they are and the rest with a line break after each
      // '[' and '},': null, or entries whose bytes read back, or a DashboardFileError.
      if (i % 4 === 3 || i % 8 === 0) {
        const lined = new Blob([kind === 3 ? text : text.replace(/(\[|\},)/g, '$1\n')]);
        try {
          const index = await indexDashboardFile(lined, 1 + (i % 13));
          for (const e of index?.features ?? []) {
            const f = await readIndexedFeature(lined, e);
            assertWellFormed({metadata: null, features: [f]});
            assert.deepEqual([f.layer, f.index], [e.layer, e.index]);
            ++indexed;
          }
        } catch (e) {
          if (!(e instanceof DashboardFileError)) throw new Error(`case ${i} indexed: ${e.stack}\n${text.slice(0, 300)}`);
        }
      }
    }
    assert.ok(read > 100, `${read} of the corruptions still read`);  // the fuzz reaches the reader's checks
    assert.ok(indexed > 100, `${indexed} features of the corruptions indexed`);
  });
});
