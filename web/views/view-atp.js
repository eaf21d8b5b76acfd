// Attribution patching beside activation patching: blocks x positions, each cell the first-order
// estimate of patching the clean stream entering that block at that position into the corrupted
// run (the worker's 'atp' reply for the corrupted prompt as the differentiated run and the clean
// one as the source). Once the exact patching has run (same answer and other token), the
// estimates are divided by the clean minus the corrupted logit difference, the exact map's unit,
// and the Pearson correlation of the two maps is stated. Beside it every head's estimate (its
// clean output at every position patched into the corrupted run). A click on a cell of either map
// runs that patch exactly (the worker's 'atp-exact'), shown next to its estimate.
import {Heatmap, fmt, showPiece} from './viz.js';

const maps = new WeakMap();

function heatmapOf(canvas, readout) {
  let heat = maps.get(canvas);
  if (!heat) {
    heat = new Heatmap(canvas, readout, {onPick: (r, c) => heat.pickHandler?.(r, c)});
    maps.set(canvas, heat);
  }
  return heat;
}

// The exact patch's key in data.exact.results.
export const exactKey = (kind, layer, index) => `${kind}:${layer}.${index}`;

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
// onPick(layer, position) runs that cell exactly.
export function render(canvas, d) {
  const heat = heatmapOf(canvas, d.readout);
  heat.pickHandler = d.onPick;
  const a = d.atp;
  canvas.hidden = !a;
  if (!a) return;
  const L = a.nLayer, T = a.tokens;
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

// The heads' estimates [nLayer, nHead], in the exact map's unit once that has run (as render).
// data: {atp, exact (the patching job's result or undefined), readout, onPick(layer, head)}
export function renderHeads(canvas, d) {
  const heat = heatmapOf(canvas, d.readout);
  heat.pickHandler = d.onPick;
  const a = d.atp;
  canvas.hidden = !a;
  if (!a) return;
  const e = d.exact;
  const comparable = e && e.positions === a.tokens && e.answer === a.target && e.other === a.contrast &&
      e.cleanDiff !== e.corruptedDiff;
  const unit = comparable ? e.cleanDiff - e.corruptedDiff : 1;
  const values = Float32Array.from(a.heads, (v) => v / unit);
  canvas.width = 64 + Math.max(160, Math.min(640, a.nHead * 40));
  canvas.height = Math.max(80, a.nLayer * 20);
  heat.set({
    rows: a.nLayer, cols: a.nHead, values, diverging: true, ...(comparable ? {min: -1, max: 1} : {}),
    rowLabels: Array.from({length: a.nLayer}, (_, l) => `block ${l}`),
    colLabels: Array.from({length: a.nHead}, (_, h) => `h${h}`),
    describe: (row, c, v) => `Head ${row}.${c}'s output at every position from the clean run, estimated: ` +
        (comparable ? `${fmt(v * 100, 3)}% of the logit difference` : `${v >= 0 ? '+' : ''}${fmt(v)}`),
  });
}

// The cells run exactly, the last clicked first: each exact change of the logit difference next to
// its estimate, and for the heads (when 3 or more have run) the correlation of the two.
// data: {atp, exact: {results: {key: 'atp-exact' reply}, order: [key]} or null, box}
export function renderExact(box, d) {
  const a = d.atp, x = d.exact;
  if (!a || !x || !x.order.length) {
    box.textContent = '';
    delete box.dataset.exact;
    delete box.dataset.headCorrelation;
    return;
  }
  const estimate = (r) => r.kind === 'head' ? a.heads[r.layer * a.nHead + r.index] : a.residPre[r.layer * a.tokens + r.index];
  const name = (r) => r.kind === 'head' ? `head ${r.layer}.${r.index} (its output at every position)`
      : `the stream entering block ${r.layer} at position ${r.index}`;
  const last = x.results[x.order[x.order.length - 1]];
  box.dataset.exact = last.value;
  let text = `Run exactly: ${name(last)} from the clean run patched into the corrupted run changes the logit ` +
      `difference by ${fmt(last.value)} (estimate ${fmt(estimate(last))}).`;
  const heads = x.order.map((k) => x.results[k]).filter((r) => r.kind === 'head');
  if (heads.length >= 3) {
    const r = pearson(heads.map(estimate), heads.map((h) => h.value));
    box.dataset.headCorrelation = r;
    text += ` Over the ${heads.length} heads run exactly, the estimates correlate with them at ${fmt(r, 3)}.`;
  } else {
    delete box.dataset.headCorrelation;
  }
  box.textContent = text;
}
