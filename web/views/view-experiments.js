// The Experiments panel: the chosen block drawn as the lesson draws it, with the switches'
// effect on it, and the before/after of the last "Run again".
import {fmt, probList} from './viz.js';

// The steps of a block in order. Pre-norm (GPT-2): x + attn(ln_1(x)), then + mlp(ln_2(.)).
// Post-norm (the original Transformer): ln_1(x + attn(x)), then ln_2(. + mlp(.)).
function steps(postNorm) {
  return postNorm ?
      [['attn', 'attention'], ['add1', '+'], ['ln_1', 'ln_1'], ['mlp', 'MLP'], ['add2', '+'], ['ln_2', 'ln_2']] :
      [['ln_1', 'ln_1'], ['attn', 'attention'], ['add1', '+'], ['ln_2', 'ln_2'], ['mlp', 'MLP'], ['add2', '+']];
}

// data: {layer, skipAttn, skipMlp, noResidual, postNorm (booleans for this block), normIn,
// normMid, normOut (the picked token's residual norm entering the block, after attention's
// step, leaving it), normLn1, normAttn, normLn2, normMlp (the norms of ln_1's output, attention's
// output, ln_2's output, the MLP's output; NaN when unknown), where}
export function render(box, d) {
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const flow = el('ol', 'block-flow');
  flow.setAttribute('aria-label', `Block ${d.layer} in ${d.postNorm ? 'post-norm' : 'pre-norm'} order`);
  const io = (name, norm) => {
    const li = el('li', 'step io', `${name}`);
    li.dataset.step = name;
    li.append(el('small', '', Number.isFinite(norm) ? `‖x‖ ${fmt(norm, 3)}` : ''));
    if (Number.isFinite(norm)) li.dataset.norm = norm;
    return li;
  };
  flow.append(io(`x in`, d.normIn));
  for (const [name, label] of steps(d.postNorm)) {
    const li = el('li', 'step', label);
    li.dataset.step = name;
    const off = (name === 'attn' && d.skipAttn) || (name === 'mlp' && d.skipMlp) ||
        (name === 'add1' && (d.skipAttn || d.noResidual)) || (name === 'add2' && (d.skipMlp || d.noResidual)) ||
        (d.postNorm && ((name === 'ln_1' && d.skipAttn) || (name === 'ln_2' && d.skipMlp)));
    if (off) {
      li.classList.add('off');
      li.title = name.startsWith('add') && !(d.skipAttn || d.skipMlp) ? 'no residual: the sublayer output replaces the stream' :
          'skipped: the stream passes this step unchanged';
    }
    if (name.startsWith('add')) li.classList.add('add');
    // Under post-norm the captured sublayer inputs are the stream itself, not a LayerNorm's
    // output, and the stream after an add is not captured: only the sublayer outputs are shown.
    const shown = d.postNorm ? {attn: d.normAttn, mlp: d.normMlp} :
        {ln_1: d.normLn1, attn: d.normAttn, add1: d.normMid, ln_2: d.normLn2, mlp: d.normMlp, add2: d.normOut};
    if (Number.isFinite(shown[name])) {
      li.append(el('small', '', `‖${name.startsWith('add') ? 'x' : 'y'}‖ ${fmt(shown[name], 3)}`));
      li.dataset.norm = shown[name];
    }
    flow.append(li);
  }
  flow.append(io(`x out`, d.normOut));
  const caption = el('p', 'hint', `Block ${d.layer}, ${d.postNorm ? 'post-norm (every block)' : 'pre-norm, as GPT-2'}; ` +
      `‖x‖: the norm of ${d.where}'s vector in the residual stream at that point; ‖y‖: of the step's output.`);
  box.replaceChildren(flow, caption);
}

// r: the worker's 'experiment' reply (protocol.js), or null.
export function renderResult(els, r) {
  if (!r) {
    for (const k of ['before', 'after']) els[k].replaceChildren();
    els.kl.textContent = '';
    delete els.kl.dataset.kl;
    els.textBefore.replaceChildren();
    els.textAfter.replaceChildren();
    return;
  }
  const pct = (x) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(2)}`;
  probList(els.before, Array.from(r.topBefore, (id, i) => ({id, prob: r.topBeforeProbs[i], piece: r.pieces[id]})));
  probList(els.after, Array.from(r.topAfter, (id, i) => ({
    id, prob: r.topAfterProbs[i], piece: r.pieces[id],
    note: `(${pct(r.topAfterProbs[i] - r.topAfterProbsBefore[i])})`,
  })));
  els.kl.textContent = `KL(before ‖ after) = ${fmt(r.kl, 4)} nats at position ${r.position}` +
      (r.fromBlock < r.nLayer ? ` (re-run from block ${r.fromBlock}, the cache before it reused)` : ' (nothing changed)');
  els.kl.dataset.kl = r.kl;
  const text = (box, ids, partsAt) => {
    const same = document.createElement('span');
    same.textContent = Array.from(ids.slice(0, partsAt), (id) => r.pieces[id]).join('');
    const rest = document.createElement('mark');
    rest.textContent = Array.from(ids.slice(partsAt), (id) => r.pieces[id]).join('');
    box.replaceChildren(same, rest);
    box.dataset.ids = ids.join(' ');
    box.dataset.partsAt = partsAt;
    box.title = partsAt < ids.length ? `The texts part at generated token ${partsAt} (highlighted).` : 'Same text.';
  };
  let partsAt = 0;
  const a = r.textBefore, b = r.textAfter;
  while (partsAt < a.length && partsAt < b.length && a[partsAt] === b[partsAt]) partsAt++;
  text(els.textBefore, a, partsAt);
  text(els.textAfter, b, partsAt);
}

