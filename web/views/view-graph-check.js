// A computed graph's feature card (the worker's 'graph-card' reply: the feature's activation at
// each token of the graph's prompt, and the tokens its decoder promotes and suppresses through
// the unembedding) and the checks run on it (its 'graph-check' replies: the graph's predicted
// change of the top logit beside the exact change).
//   data-testid="graph-card-strip"   one chip per position (data-position, data-value)
//   data-testid="graph-check-row"    one per check (data-predicted, data-exact, data-group: the
//                                    group's name when a group's features were set, else '')
import {el, fmt, showPiece, table, textOn, viridisCss} from './viz.js';

const piece = (pieces, id) => showPiece(pieces[id] ?? `#${id}`);

function tokenList(title, ids, weights, pieces) {
  const box = el('div');
  box.append(el('h4', '', title));
  const list = el('ol', 'graph-card-tokens');
  ids.forEach((id, i) => list.append(el('li', '', `${piece(pieces, id)} ${fmt(weights[i], 3)}`)));
  box.append(list);
  return box;
}

// data: {card (the 'graph-card' reply or null), label (its Neuronpedia label, or ''), waiting}
export function renderCard(box, d) {
  const c = d.card;
  if (!c) {
    box.replaceChildren(...(d.waiting ? [el('p', 'hint', 'Reading the feature…')] : []));
    return;
  }
  const head = el('p', 'graph-card-title', `Feature ${c.feature} of block ${c.layer}'s transcoder` +
      (d.label ? `: ${d.label}` : '') + '. Its activation at each token of the prompt:');
  const strip = el('div', 'graph-card-strip');
  strip.setAttribute('data-testid', 'graph-card-strip');
  strip.setAttribute('role', 'list');
  const max = Math.max(1e-30, ...c.activations);
  c.ids.forEach((id, p) => {
    const a = c.activations[p];
    const chip = el('span', 'chip', piece(c.pieces, id));
    chip.setAttribute('role', 'listitem');
    chip.dataset.position = p;
    chip.dataset.value = a;
    chip.title = `position ${p}: ${fmt(a)}`;
    chip.setAttribute('aria-label', `${piece(c.pieces, id)}: ${fmt(a, 3)}`);
    const t = a > 0 ? a / max : 0;
    chip.style.background = viridisCss(t);
    chip.style.color = textOn(t);
    strip.append(chip);
  });
  const tokens = el('div', 'graph-card-logits');
  tokens.append(tokenList('Promotes', c.promoted, c.promotedWeights, c.pieces),
                tokenList('Suppresses', c.suppressed, c.suppressedWeights, c.pieces));
  box.replaceChildren(head, strip, tokens);
}

// data: {checks (the 'graph-check' replies, newest first), running}
export function renderChecks(box, d) {
  const rows = d.checks.map((c) => {
    const tr = el('tr');
    tr.setAttribute('data-testid', 'graph-check-row');
    tr.dataset.predicted = c.predicted;
    tr.dataset.exact = c.exact;
    const off = Math.abs(c.predicted - c.exact) / Math.max(Math.abs(c.exact), 1e-6);
    tr.dataset.group = c.group || '';
    tr.append(el('td', '', (c.group ? `group “${c.group}”: ` : '') + c.nodeIds.join(', ')), el('td', 'num', c.value === 0 ? '0 (ablated)' : fmt(c.value, 3)),
              el('td', 'num', fmt(c.predicted, 4)), el('td', 'num', fmt(c.exact, 4)),
              el('td', '', off <= 0.1 ? 'close' : off <= 0.5 ? 'partly' : 'far apart'));
    return tr;
  });
  if (!rows.length) {
    box.replaceChildren(...(d.running ? [el('caption', 'hint', 'Checking…')] : []));
    return;
  }
  table(box, 'Change of the top token\'s logit (minus the mean logit) at the last position' +
        (d.running ? '; checking…' : ''),
        ['Features (block_feature_position)', 'Set to', 'Predicted change', 'Exact change', 'Agreement'], rows);
}
