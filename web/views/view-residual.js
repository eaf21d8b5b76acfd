// Residual stream: the norm of every position's vector after the embedding and each block.
import {Heatmap, fmt, pieceAt} from './viz.js';

const maps = new WeakMap();

// data: {norms: Float32Array [(L + 1) * P], nLayer, positions, position, pieces, ids, readout, onPick}
export function render(canvas, d) {
  let heat = maps.get(canvas);
  if (!heat) {
    heat = new Heatmap(canvas, d.readout, {onPick: (r, c) => heat.pickHandler?.(c)});
    maps.set(canvas, heat);
  }
  heat.pickHandler = d.onPick;
  const L = d.nLayer;
  canvas.height = Math.max(120, Math.min(320, (L + 1) * 20));
  heat.set({
    rows: L + 1, cols: d.positions, values: d.norms,
    rowLabels: ['embed', ...Array.from({length: L}, (_, l) => `block ${l}`)],
    highlightCol: d.position,
    describe: (r, c, v) => `${r === 0 ? 'Embedding' : `After block ${r - 1}`}, ${pieceAt(d.pieces, d.ids, c)} ` +
        `(position ${c}): norm ${fmt(v)}`,
  });
}
