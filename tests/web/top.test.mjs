// web/worker/top.js against a full sort (descending score, ties to the lower index).
import assert from 'node:assert/strict';
import {test} from 'node:test';
import {topIndices} from '../../web/worker/top.js';

test('topIndices equals the head of a full sort, ties and all', () => {
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (const [n, k] of [[0, 3], [1, 1], [5, 12], [100, 1], [6400, 12], [997, 50]]) {
    // Few distinct values, so that many scores tie.
    const v = Array.from({length: n}, () => Math.floor(random() * 20) - 10);
    const want = Array.from(v.keys()).sort((a, b) => v[b] - v[a] || a - b).slice(0, k);
    assert.deepEqual(topIndices(n, k, (i) => v[i]), want, `n ${n}, k ${k}`);
    const abs = Array.from(v.keys()).sort((a, b) => Math.abs(v[b]) - Math.abs(v[a]) || a - b).slice(0, k);
    assert.deepEqual(topIndices(n, k, (i) => Math.abs(v[i])), abs, `|v|, n ${n}, k ${k}`);
  }
});
