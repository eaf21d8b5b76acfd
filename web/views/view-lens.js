// Logit lens: what each block's residual stream would predict (through ln_f and the
// unembedding), for a window of positions; and one cell's top 10.
import {fmt, pieceAt, probList, showPiece, textOn, viridisCss} from './viz.js';

const tables = new WeakMap();  // box -> {lens, pieces, ids} the table was built from

// data: {lens: {begin, end, topK, nLayer, ids, probs, pieces}, picked, pieces, ids, open: {layer, position}}.
// The table is built once per lens window; a new pick or open cell only moves the marks (at GPT-2
// XL a rebuild is ~600 buttons and their layout on every click).
export function render(box, d) {
  const last = tables.get(box);
  if (!last || last.lens !== d.lens || last.pieces !== d.pieces || last.ids !== d.ids || !box.firstChild) {
    build(box, d);
    tables.set(box, {lens: d.lens, pieces: d.pieces, ids: d.ids});
  }
  const {begin} = d.lens;
  box.querySelectorAll('thead th').forEach((th, i) => th.classList.toggle('picked', i > 0 && begin + i - 1 === d.picked));
  box.querySelector('.lens-cell.open')?.classList.remove('open');
  if (d.open) box.querySelector(`.lens-cell[data-layer="${d.open.layer}"][data-position="${d.open.position}"]`)?.classList.add('open');
}

function build(box, d) {
  const {begin, end, topK, nLayer: L, ids, probs, pieces} = d.lens;
  const T = end - begin;
  const table = document.createElement('table');
  table.className = 'lens-table';
  const head = table.createTHead().insertRow();
  const corner = document.createElement('th');
  corner.textContent = 'block \\ token';  // a header says what it heads (axe: empty-table-header)
  head.append(corner);
  for (let t = 0; t < T; ++t) {
    const th = document.createElement('th');
    th.textContent = showPiece(d.pieces[begin + t] ?? `#${d.ids[begin + t]}`);
    th.title = `position ${begin + t}`;
    head.append(th);
  }
  const body = table.createTBody();
  for (let l = 0; l < L; ++l) {
    const tr = body.insertRow();
    const th = document.createElement('th');
    th.textContent = `block ${l}`;
    tr.append(th);
    for (let t = 0; t < T; ++t) {
      const base = (l * T + t) * topK;
      const id = ids[base], prob = probs[base];
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'lens-cell';
      b.dataset.layer = l;
      b.dataset.position = begin + t;
      b.dataset.id = id;
      b.dataset.prob = prob;
      b.textContent = showPiece(pieces[id]);
      b.style.background = viridisCss(prob);
      b.style.color = textOn(prob);
      b.title = `after block ${l}, position ${begin + t}: ${showPiece(pieces[id])} (id ${id}) ${fmt(prob * 100, 3)}%`;
      b.setAttribute('aria-label', b.title);
      tr.insertCell().append(b);
    }
  }
  const hadFocus = box.contains(document.activeElement) && document.activeElement.dataset;
  box.replaceChildren(table);
  if (hadFocus) {
    box.querySelector(`.lens-cell[data-layer="${hadFocus.layer}"][data-position="${hadFocus.position}"]`)?.focus();
  }
}

// data: same as render's; draws the open cell's top K (or a hint when none is open).
export function renderDetail(box, d) {
  if (!d.lens) { box.textContent = d.note || ''; return; }
  const {begin, end, topK, ids, probs, pieces} = d.lens;
  const T = end - begin;
  const o = d.open;
  if (!o || o.position < begin || o.position >= end) { box.textContent = 'Click a cell for its top 10.'; return; }
  const base = (o.layer * T + (o.position - begin)) * topK;
  const h = document.createElement('h4');
  h.textContent = `After block ${o.layer}, at ${pieceAt(d.pieces, d.ids, o.position)} (position ${o.position}): top ${topK}`;
  const ol = document.createElement('ol');
  ol.className = 'probs';
  const items = [];
  for (let k = 0; k < topK; ++k) {
    const id = ids[base + k];
    if (id >= 0) items.push({id, prob: probs[base + k], piece: pieces[id]});
  }
  probList(ol, items);
  box.replaceChildren(h, ol);
}
