// Direct logit attribution for the picked token and a target: what each head (and each
// block's MLP) wrote into the residual stream, read out as the target's logit. Blocks are rows,
// heads then the MLP are columns; orange raises the target, blue lowers it, white is zero.
import {Heatmap, fmt} from './viz.js';

const maps = new WeakMap();

// data: {attribution (the worker's reply), nLayer, nHead, targetWords, readout, summary, onPick}
export function render(canvas, d) {
  let heat = maps.get(canvas);
  if (!heat) {
    heat = new Heatmap(canvas, d.readout, {onPick: (r, c) => heat.pickHandler?.(r, c)});
    maps.set(canvas, heat);
  }
  heat.pickHandler = d.onPick;
  const a = d.attribution;
  const L = d.nLayer, H = d.nHead, cols = H + 1;
  const index = new Map(a.names.map((n, i) => [n, i]));
  const values = new Float32Array(L * cols);
  for (let l = 0; l < L; ++l) {
    for (let h = 0; h < H; ++h) values[l * cols + h] = a.values[index.get(`${l}.${h}`)];
    values[l * cols + H] = a.values[index.get(`mlp.${l}`)];
  }
  canvas.width = 64 + cols * 28;
  canvas.height = Math.max(80, L * 20);
  heat.set({
    rows: L, cols, values, diverging: true,
    rowLabels: Array.from({length: L}, (_, l) => `block ${l}`),
    describe: (r, c, v) => `${c < H ? `Block ${r}, head ${c}` : `Block ${r}, MLP`}: ${v >= 0 ? '+' : ''}${fmt(v)} ` +
        `to the logit of ${d.targetWords}` + (c < H ? ' (Enter opens its attention)' : ''),
  });
  const rest = a.values[index.get('embed')] + a.values[index.get('ln_f_bias')] +
      Array.from({length: L}, (_, l) => a.values[index.get(`attn_bias.${l}`)]).reduce((x, y) => x + y, 0);
  d.summary.textContent = `Logit of ${d.targetWords} at position ${a.position}: ${fmt(a.logit)}. ` +
      `The cells plus the embedding, the attention output biases and ln_f's bias (${fmt(rest)}) sum to it.`;
}
