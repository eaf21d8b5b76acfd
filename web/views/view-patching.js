// Activation patching: blocks x positions, the share of the clean run's logit difference that
// patching the clean residual stream (entering that block, at that position) into the corrupted
// run brings back. 1 (orange): all of it; 0 (white): none; blue: the wrong way.
import {Heatmap, fmt, showPiece} from './viz.js';

const maps = new WeakMap();

// data: {job: {running, done, total, result}, readout, status}
export function render(canvas, d) {
  let heat = maps.get(canvas);
  if (!heat) {
    heat = new Heatmap(canvas, d.readout);
    maps.set(canvas, heat);
  }
  const {running, done = 0, total = 0, result: r} = d.job;
  d.status.textContent = running ? `Patching ${done + 1} of ${total}…` : '';
  canvas.hidden = !r;
  if (!r) return;
  const [a, b] = r.answerPieces.map((x) => `“${showPiece(x)}”`);
  d.status.textContent = `${r.cancelled ? `Cancelled after ${r.done} of ${r.total}. ` : ''}Clean run: ${a} over ${b} ` +
      `by ${fmt(r.cleanDiff)} (logit difference); corrupted run: ${fmt(r.corruptedDiff)}.`;
  canvas.width = 64 + Math.max(160, Math.min(640, r.positions * 40));
  canvas.height = Math.max(80, r.nLayer * 20);
  heat.set({
    rows: r.nLayer, cols: r.positions, values: r.recovered, min: -1, max: 1, diverging: true,
    rowLabels: Array.from({length: r.nLayer}, (_, l) => `block ${l}`),
    describe: (row, c, v) => `Stream entering block ${row} at “${showPiece(r.pieces[c])}” (position ${c}) from the clean run: ` +
        (Number.isNaN(v) ? 'not run' : `brings back ${fmt(v * 100, 3)}% of the logit difference`),
  });
}
