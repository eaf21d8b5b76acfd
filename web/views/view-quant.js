// The quantization lens (src/lab/compare.h, `gpt2 compare`): the loaded model against its
// re-encoded twin on the prompt, block by block: 1 - cos and rel of the residual stream, and the
// KL divergence of the two logit lenses, as bars; then the top-1 agreement, the heads whose
// attention patterns moved most and the attribution entries that moved most.
//   data-testid="quant-table"      rows quant-block-L with data-cos, data-rel, data-kl
//   data-testid="quant-chart"      the bars (SVG), one group per measure
//   data-testid="quant-top1"       data-agree, data-positions
//   data-testid="quant-heads"      li per head (data-layer, data-head, data-drift), most moved first
//   data-testid="quant-attribution" li per component (data-name, data-a, data-b), most moved first
import {fmt} from './viz.js';

const kShown = 8;
const kMeasures = [
  {key: 'cos', label: '1 − cos', value: (r, l) => 1 - r.cos[l], color: '#1f77b4'},
  {key: 'rel', label: 'rel', value: (r, l) => r.rel[l], color: '#2ca02c'},
  {key: 'kl', label: 'KL (nats)', value: (r, l) => r.kl[l], color: '#e66e0a'},
];

const svgNs = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, text) {
  const e = document.createElementNS(svgNs, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// One bar chart per measure, blocks left to right, each scaled to its own largest value.
function chart(r) {
  const L = r.nLayer, w = 220, h = 110, top = 18, bottom = 16, gap = 18;
  const root = svg('svg', {width: kMeasures.length * (w + gap), height: h, role: 'img',
                           'aria-label': 'Drift per block: 1 - cos, rel and KL', 'data-testid': 'quant-chart'});
  kMeasures.forEach((m, i) => {
    const g = svg('g', {transform: `translate(${i * (w + gap)}, 0)`, 'data-measure': m.key});
    const values = Array.from({length: L}, (_, l) => m.value(r, l));
    const max = Math.max(1e-12, ...values);
    g.append(svg('text', {x: 0, y: 12, 'font-size': 11}, `${m.label} (max ${fmt(max, 3)})`));
    const bw = w / L;
    values.forEach((v, l) => {
      const bh = Math.max(0, (v / max) * (h - top - bottom));
      const bar = svg('rect', {x: l * bw + 1, y: h - bottom - bh, width: Math.max(1, bw - 2), height: bh, fill: m.color});
      bar.append(svg('title', {}, `block ${l}: ${m.label} ${fmt(v, 4)}`));
      g.append(bar);
      if (L <= 16 || l % Math.ceil(L / 12) === 0) {
        g.append(svg('text', {x: l * bw + bw / 2, y: h - 3, 'font-size': 9, 'text-anchor': 'middle'}, String(l)));
      }
    });
    root.append(g);
  });
  return root;
}

function table(r) {
  const t = document.createElement('table');
  t.className = 'quant-table';
  t.setAttribute('data-testid', 'quant-table');
  const head = t.createTHead().insertRow();
  for (const text of ['block', 'cos', 'rel', 'KL']) {
    const th = document.createElement('th');
    th.textContent = text;
    head.append(th);
  }
  const body = t.createTBody();
  for (let l = 0; l < r.nLayer; ++l) {
    const row = body.insertRow();
    row.setAttribute('data-testid', `quant-block-${l}`);
    Object.assign(row.dataset, {layer: l, cos: r.cos[l], rel: r.rel[l], kl: r.kl[l]});
    for (const text of [String(l), r.cos[l].toFixed(6), fmt(r.rel[l], 4), fmt(r.kl[l], 4)]) row.insertCell().textContent = text;
  }
  return t;
}

// data: {quant: {running, result (the worker's 'quant-lens' reply)}, status (element)}
export function render(box, d) {
  const {running, result: r} = d.quant;
  d.status.textContent = running ? 'Re-encoding the model and running both on the prompt…' : r ?
      `${r.weights.toUpperCase()} twin (${(r.secondBytes / (1024 * 1024)).toFixed(1)} MB, kept until another model ` +
      `loads) against the loaded model on ${r.positions} tokens, ${(r.ms / 1000).toFixed(1)} s.` : '';
  if (!r) {
    box.replaceChildren();
    return;
  }
  const top1 = document.createElement('p');
  top1.setAttribute('data-testid', 'quant-top1');
  top1.dataset.agree = r.agree;
  top1.dataset.positions = r.positions;
  top1.textContent = `Next-token predictions agree at ${r.agree} of ${r.positions} positions.`;

  const heads = document.createElement('ol');
  heads.className = 'sweep-results';
  heads.setAttribute('data-testid', 'quant-heads');
  const order = Array.from(r.headDrift.keys()).sort((a, b) => r.headDrift[b] - r.headDrift[a] || a - b);
  const maxDrift = Math.max(1e-12, r.headDrift[order[0]] ?? 0);
  for (const i of order.slice(0, kShown)) {
    const l = Math.floor(i / r.nHead), h = i % r.nHead;
    const li = document.createElement('li');
    Object.assign(li.dataset, {layer: l, head: h, drift: r.headDrift[i]});
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'link';
    b.textContent = `block ${l}, head ${h}`;
    b.title = 'Open this head\'s attention (the loaded model, on the prompt)';
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${(r.headDrift[i] / maxDrift) * 100}%`;
    bar.style.background = '#1f77b4';
    const num = document.createElement('span');
    num.className = 'num';
    num.textContent = fmt(r.headDrift[i], 3);
    li.append(b, bar, num);
    heads.append(li);
  }

  const a = r.attribution;
  const attr = document.createElement('ol');
  attr.className = 'sweep-results quant-attr';
  attr.setAttribute('data-testid', 'quant-attribution');
  const moved = a.names.map((name, i) => ({name, a: a.a[i], b: a.b[i], d: a.b[i] - a.a[i]}))
      .sort((x, y) => Math.abs(y.d) - Math.abs(x.d) || (x.name < y.name ? -1 : 1));
  const maxMoved = Math.max(1e-12, Math.abs(moved[0]?.d ?? 0));
  for (const m of moved.slice(0, kShown)) {
    const li = document.createElement('li');
    Object.assign(li.dataset, {name: m.name, a: m.a, b: m.b});
    const name = document.createElement('span');
    name.textContent = m.name;
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${(Math.abs(m.d) / maxMoved) * 100}%`;
    bar.style.background = m.d >= 0 ? '#e66e0a' : '#1f77b4';
    const num = document.createElement('span');
    num.className = 'num';
    num.textContent = `${fmt(m.a, 3)} → ${fmt(m.b, 3)}`;
    li.append(name, bar, num);
    attr.append(li);
  }
  const h4 = (text) => {
    const e = document.createElement('h4');
    e.textContent = text;
    return e;
  };
  const headsNote = document.createElement('p');
  headsNote.className = 'hint';
  headsNote.textContent = r.headDrift.length ? '' :
      'This prompt is too long to keep every head\'s attention of one model while the other runs: shorten it to compare heads.';
  box.replaceChildren(chart(r), table(r), top1,
                      h4('Heads whose attention moved most (mean total variation over the positions)'), headsNote, heads,
                      h4(`Attribution entries that moved most (logit of “${r.targetPiece}”, id ${a.target}, at the ` +
                         'last position: loaded → re-encoded)'), attr);
}
