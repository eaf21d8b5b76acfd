// LayerNorm inputs: mean and standard deviation of each LayerNorm's input at the picked token.
import {fmt, viridisCss} from './viz.js';

// data: {lnStats: Float32Array [(2L + 1) * P * 2], nLayer, nEmbd, positions, position}. The rows
// are made once per model depth and their numbers rewritten after: at GPT-2 XL a token pick
// would otherwise rebuild 97 rows.
export function render(box, d) {
  const L = d.nLayer, P = d.positions, p = d.position;
  let body = box.querySelector('tbody');
  if (!body || body.rows.length !== 2 * L + 1) body = build(box, L);
  let maxStd = 0;
  for (let r = 0; r < 2 * L + 1; ++r) maxStd = Math.max(maxStd, d.lnStats[(r * P + p) * 2 + 1]);
  for (let r = 0; r < 2 * L + 1; ++r) {
    const mean = d.lnStats[(r * P + p) * 2], std = d.lnStats[(r * P + p) * 2 + 1];
    const tr = body.rows[r];
    tr.dataset.mean = mean;
    tr.dataset.std = std;
    tr.cells[1].textContent = fmt(mean);
    tr.cells[2].textContent = fmt(std);
    const bar = tr.cells[3].firstChild;
    bar.style.width = `${maxStd ? (std / maxStd) * 100 : 0}%`;
    bar.style.background = viridisCss(maxStd ? std / maxStd : 0);
    tr.title = `${tr.cells[0].textContent}: mean ${fmt(mean)}, standard deviation ${fmt(std)} over ${d.nEmbd} channels`;
  }
}

function build(box, L) {
  const table = document.createElement('table');
  table.className = 'ln-table';
  const head = table.createTHead().insertRow();
  for (const t of ['LayerNorm', 'input mean', 'input std', 'std, scaled to the largest']) {
    const th = document.createElement('th');
    th.textContent = t;
    head.append(th);
  }
  const body = table.createTBody();
  for (let r = 0; r < 2 * L + 1; ++r) {
    const tr = body.insertRow();
    tr.insertCell().textContent = r === 2 * L ? 'ln_f (final)' :
        `block ${r >> 1} ${r % 2 ? 'ln_2 (before MLP)' : 'ln_1 (before attention)'}`;
    tr.insertCell();
    tr.insertCell();
    const bar = document.createElement('span');
    bar.className = 'bar';
    tr.insertCell().append(bar);
  }
  box.replaceChildren(table);
  return body;
}
