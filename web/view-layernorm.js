// LayerNorm inputs: mean and standard deviation of each LayerNorm's input at the picked token.
import {fmt, viridisCss} from './viz.js';

// data: {lnStats: Float32Array [(2L + 1) * P * 2], nLayer, nEmbd, positions, position}
export function render(box, d) {
  const L = d.nLayer, P = d.positions, p = d.position;
  const table = document.createElement('table');
  table.className = 'ln-table';
  const head = table.createTHead().insertRow();
  for (const t of ['LayerNorm', 'input mean', 'input std', '']) {
    const th = document.createElement('th');
    th.textContent = t;
    head.append(th);
  }
  let maxStd = 0;
  for (let r = 0; r < 2 * L + 1; ++r) maxStd = Math.max(maxStd, d.lnStats[(r * P + p) * 2 + 1]);
  const body = table.createTBody();
  for (let r = 0; r < 2 * L + 1; ++r) {
    const mean = d.lnStats[(r * P + p) * 2], std = d.lnStats[(r * P + p) * 2 + 1];
    const tr = body.insertRow();
    tr.dataset.mean = mean;
    tr.dataset.std = std;
    const name = r === 2 * L ? 'ln_f (final)' : `block ${r >> 1} ${r % 2 ? 'ln_2 (before MLP)' : 'ln_1 (before attention)'}`;
    tr.insertCell().textContent = name;
    tr.insertCell().textContent = fmt(mean);
    tr.insertCell().textContent = fmt(std);
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${maxStd ? (std / maxStd) * 100 : 0}%`;
    bar.style.background = viridisCss(maxStd ? std / maxStd : 0);
    tr.insertCell().append(bar);
    tr.title = `${name}: mean ${fmt(mean)}, standard deviation ${fmt(std)} over ${d.nEmbd} channels`;
  }
  box.replaceChildren(table);
}
