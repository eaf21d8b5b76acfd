// Attribution patching beside activation patching: blocks x positions, each cell the first-order
// estimate of patching the clean stream entering that block at that position into the corrupted
// run (the worker's 'atp' reply for the corrupted prompt as the differentiated run and the clean
// one as the source). Once the exact patching has run (same answer and other token), the
// estimates are divided by the clean minus the corrupted logit difference, the exact map's unit,
// and the Pearson correlation of the two maps is stated.
import {Heatmap, fmt, showPiece} from './viz.js';

const maps = new WeakMap();

function pearson(a, b) {
  const n = a.length;
  const ma = a.reduce((s, x) => s + x, 0) / n, mb = b.reduce((s, x) => s + x, 0) / n;
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < n; ++i) {
    ab += (a[i] - ma) * (b[i] - mb);
    aa += (a[i] - ma) ** 2;
    bb += (b[i] - mb) ** 2;
  }
  return ab / Math.sqrt(aa * bb);
}

// data: {atp (the worker's reply), exact (the patching job's result or undefined), readout, status}
export function render(canvas, d) {
  let heat = maps.get(canvas);
  if (!heat) {
    heat = new Heatmap(canvas, d.readout);
    maps.set(canvas, heat);
  }
  const a = d.atp;
  canvas.hidden = !a;
  if (!a) return;
  const L = a.nLayer, T = a.positions;
  const e = d.exact;
  const comparable = e && e.positions === T && e.answer === a.target && e.other === a.contrast &&
      e.cleanDiff !== e.corruptedDiff;
  const unit = comparable ? e.cleanDiff - e.corruptedDiff : 1;
  const values = Float32Array.from(a.residPre, (v) => v / unit);
  let text = `Estimated in ${fmt(a.ms, 3)} ms from one backward pass.`;
  if (comparable) {
    const done = [];
    for (let i = 0; i < values.length; ++i) if (!Number.isNaN(e.recovered[i])) done.push(i);
    if (done.length > 1) {
      const r = pearson(done.map((i) => values[i]), done.map((i) => e.recovered[i]));
      text += ` Correlation with the exact patching: ${fmt(r, 3)}.`;
      canvas.dataset.correlation = r;
    }
  } else {
    delete canvas.dataset.correlation;
  }
  d.status.textContent = text;
  canvas.width = 64 + Math.max(160, Math.min(640, T * 40));
  canvas.height = Math.max(80, L * 20);
  heat.set({
    rows: L, cols: T, values, diverging: true, ...(comparable ? {min: -1, max: 1} : {}),
    rowLabels: Array.from({length: L}, (_, l) => `block ${l}`),
    describe: (row, c, v) => `Stream entering block ${row} at “${showPiece(a.pieces[c])}” (position ${c}) from the ` +
        `clean run, estimated: ` + (comparable ? `${fmt(v * 100, 3)}% of the logit difference` : `${v >= 0 ? '+' : ''}${fmt(v)}`),
  });
}
