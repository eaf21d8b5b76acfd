// The anatomy table (anatomy.js) for the loaded model and the current text's length.
import {anatomy} from '../page/anatomy.js';

const n = (x) => Math.round(x).toLocaleString('en-US');
const bytes = (x) => (x >= 1 << 20 ? `${(x / (1 << 20)).toFixed(1)} MB` : `${(x / 1024).toFixed(1)} kB`);
const flops = (x) => (x >= 1e9 ? `${(x / 1e9).toFixed(2)} GFLOP` : `${(x / 1e6).toFixed(2)} MFLOP`);

// data: {config (the engine's info), tokens, blockMs (each block's time in the last prefill,
// or empty), prefillMs, promptTokens}
export function render(box, d) {
  const a = anatomy(d.config, d.tokens);
  const c = d.config;
  const rows = [
    ['attention', 'Attention per block (4d² + 4d)', n(a.attention), a.attention],
    ['mlp', `MLP per block (2·d·f + f + d${c.n_ff === 4 * c.n_embd ? ' = 8d² + 5d' : ''})`, n(a.mlp), a.mlp],
    ['layer-norms', 'LayerNorms per block (4d)', n(a.layerNorms), a.layerNorms],
    ['block', 'One block in all', n(a.block), a.block],
    ['blocks', `${c.n_layer} blocks`, n(a.blocks), a.blocks],
    ['embeddings', 'Token and position embeddings (V·d + n_ctx·d; the output reuses them)', n(a.embeddings), a.embeddings],
    ['total', 'Total parameters (with ln_f)', n(a.total), a.total],
    ['flops', `Forward FLOPs for ${a.tokens} tokens (per block 24·s·d² + 4·s²·d, all blocks)`, flops(a.flops), a.flops],
    ['attention-share', 'Share of those in the s² (attention) term', `${((a.attentionFlops / a.flopsPerLayer) * 100 || 0).toFixed(1)}%`,
     a.attentionFlops / a.flopsPerLayer || 0],
    ['crossover', `Length where the s² term takes over (s = 2d + f${c.n_ff === 4 * c.n_embd ? ' = 6d' : ''})`,
     `${n(a.crossover)} tokens${a.crossover > c.n_ctx ? ` (beyond the ${c.n_ctx}-token context)` : ''}`, a.crossover],
    ['kv-bytes', `KV cache for ${a.tokens} tokens (2·L·s·d values of ${a.kvValueBytes} bytes${c.kv_cache ? `, ${c.kv_cache}` : ''})`, bytes(a.kvBytes), a.kvBytes],
    ['kv-bytes-full', `KV cache for the full context of ${c.n_ctx}`, bytes(a.kvBytesFull), a.kvBytesFull],
  ];
  const table = document.createElement('table');
  table.className = 'anatomy-table';
  const body = table.createTBody();
  for (const [key, words, shown, value] of rows) {
    const tr = body.insertRow();
    tr.dataset.key = key;
    tr.dataset.value = value;
    tr.insertCell().textContent = words;
    const td = tr.insertCell();
    td.className = 'num';
    td.textContent = shown;
  }
  const p = document.createElement('p');
  p.className = 'hint';
  p.textContent = `d = ${c.n_embd}, f = ${c.n_ff}, L = ${c.n_layer}, V = ${c.n_vocab}, s = ${a.tokens} (the current text).`;
  box.replaceChildren(table, p, blockTimes(d));
}

// The measured time of each block in the last prefill, as a bar per block; the rest of the
// prefill (embedding, final LayerNorm, unembedding, the page's own calls) is named apart.
function blockTimes(d) {
  const box = document.createElement('div');
  box.className = 'block-times';
  box.dataset.testid = 'block-times';
  const ms = d.blockMs ? Array.from(d.blockMs) : [];
  if (!ms.length || !Number.isFinite(d.prefillMs)) {
    box.textContent = 'Per-block times appear after the next generation.';
    return box;
  }
  const sum = ms.reduce((s, x) => s + x, 0), max = Math.max(...ms);
  const title = document.createElement('p');
  title.textContent = `Measured time of each block in the last prefill (${d.promptTokens} tokens): ` +
      `${sum.toFixed(1)} ms of ${d.prefillMs.toFixed(1)} ms; the rest is embedding, the final LayerNorm and ` +
      'the unembedding.';
  const table = document.createElement('table');
  table.className = 'anatomy-table';
  const body = table.createTBody();
  ms.forEach((t, l) => {
    const tr = body.insertRow();
    tr.dataset.layer = l;
    tr.dataset.ms = t;
    tr.insertCell().textContent = `block ${l}`;
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${max > 0 ? (100 * t) / max : 0}%`;
    tr.insertCell().append(bar);
    const td = tr.insertCell();
    td.className = 'num';
    td.textContent = `${t.toFixed(2)} ms`;
  });
  box.append(title, table);
  return box;
}
