// MLP activations (after GELU) of the chosen block at the picked token: a histogram and the
// strongest neurons.
import {drawHistogram, fmt, viridisCss} from './viz.js';

// data: {mlp: {hist, lo, hi, min, max, mean, active, n, top}, layer, where (the token in words), hist (canvas)}
export function render(box, d) {
  const m = d.mlp;
  drawHistogram(d.hist, m.hist, {lo: m.lo, hi: m.hi, label: `block ${d.layer}, log count`});
  const summary = document.createElement('p');
  summary.textContent = `Block ${d.layer} at ${d.where}: ${m.active} of ${m.n} neurons positive ` +
      `(${((m.active / m.n) * 100).toFixed(1)}%), mean ${fmt(m.mean)}, max ${fmt(m.max)}, min ${fmt(m.min)}.`;
  const list = document.createElement('ol');
  list.className = 'neurons';
  const maxAbs = Math.max(...m.top.map((t) => Math.abs(t.value))) || 1;
  for (const {neuron, value} of m.top) {
    const li = document.createElement('li');
    li.dataset.neuron = neuron;
    li.dataset.value = value;
    const label = document.createElement('span');
    label.textContent = `neuron ${neuron}`;
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${(Math.abs(value) / maxAbs) * 60}%`;
    bar.style.background = viridisCss(0.3 + 0.7 * (Math.abs(value) / maxAbs));
    const v = document.createElement('span');
    v.className = 'num';
    v.textContent = fmt(value);
    li.append(label, bar, v);
    list.append(li);
  }
  const h = document.createElement('h4');
  h.textContent = 'Strongest neurons (largest |activation|)';
  box.replaceChildren(summary, h, list);
}
