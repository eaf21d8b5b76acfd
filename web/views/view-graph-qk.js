// The QK attribution of one head's attention score on a computed graph's prompt (the worker's
// 'graph-qk' reply; src/graph/qk.h): the score, then each side's parts (largest first, the rest
// summed) and the pairs of a query part and a key part that add the most.
//   data-testid="graph-qk-title"       data-score, data-probability
//   data-testid="graph-qk-query-part"  one row per part (data-kind, data-score); the rest's row
//   data-testid="graph-qk-key-part"    has data-kind="rest"
//   data-testid="graph-qk-pair"        one row per pair (data-score)
import {el, fmt, showPiece, table} from './viz.js';

// A part in words, by its kind (src/graph/qk.h QkPartKindName); labels: block -> Map feature ->
// Neuronpedia label (app-graph.js's graphLabels).
const kPartWords = {
  embedding: (part, side, token) => `embedding of ${token}`,
  attention: (part) => `attention output of block ${part.layer}`,
  feature: (part, side, token, labels) => {
    const label = labels[part.layer]?.get(part.feature);
    return `feature ${part.layer}_${part.feature} (act ${fmt(part.activation, 3)})${label ? `: ${label}` : ''}`;
  },
  ['decoder bias']: (part) => `transcoder bias of block ${part.layer}`,
  error: (part) => `MLP error of block ${part.layer}`,
  bias: (part, side) => `LayerNorm and ${side} bias`,
};
const partName = (part, side, token, labels) => kPartWords[part.kind](part, side, token, labels);

function row(testid, cells, data) {
  const tr = el('tr');
  tr.setAttribute('data-testid', testid);
  Object.assign(tr.dataset, data);
  cells.forEach((c, i) => tr.append(el('td', i === cells.length - 1 ? 'num' : '', c)));
  return tr;
}

// data: {qk (the reply or null), waiting, labels}
export function renderQk(box, d) {
  const r = d.qk;
  if (!r) {
    box.replaceChildren(...(d.waiting ? [el('p', 'hint', 'Splitting the score…')] : []));
    return;
  }
  const token = (p) => `“${showPiece(r.pieces[r.ids[p]] ?? `#${r.ids[p]}`)}” (${p})`;
  const title = el('p', 'graph-card-title', `Head ${r.layer}.${r.head} from ${token(r.query)} to ${token(r.key)}: ` +
      `score ${fmt(r.score, 4)}, attention ${fmt(r.probability, 3)}.`);
  title.setAttribute('data-testid', 'graph-qk-title');
  title.dataset.score = r.score;
  title.dataset.probability = r.probability;
  const side = (which, parts, rest, p) => {
    const rows = parts.map((part) => row(`graph-qk-${which}-part`, [partName(part, which === 'query' ? 'query' : 'key',
        token(p), d.labels), fmt(part.score, 4)], {kind: part.kind, score: part.score}));
    rows.push(row(`graph-qk-${which}-part`, ['the other parts', fmt(rest, 4)], {kind: 'rest', score: rest}));
    return table(el('table', 'graph-checks'), `${which === 'query' ? 'Query' : 'Key'} side, at ${token(p)}`,
                 ['Part', 'Adds'], rows);
  };
  const pairs = r.pairs.map((pair) => row('graph-qk-pair', [
    partName(r.queryParts[pair.query], 'query', token(r.query), d.labels),
    partName(r.keyParts[pair.key], 'key', token(r.key), d.labels), fmt(pair.score, 4)], {score: pair.score}));
  const sides = el('div', 'graph-card-logits');
  sides.append(side('query', r.queryParts, r.queryRest, r.query), side('key', r.keyParts, r.keyRest, r.key));
  box.replaceChildren(title, sides,
                      table(el('table', 'graph-checks'), 'The pairs that add the most', ['Query part', 'Key part', 'Adds'], pairs));
}
