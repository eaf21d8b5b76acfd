// Features of a sparse autoencoder at the picked token (the worker's 'sae-features' reply): the
// share of the stream it explains, its most active features with their activation, each feature's
// label when a labels file is loaded, and the tokens its decoder direction promotes and suppresses
// most (W_dec[F] @ W_U, Neuronpedia's "logit weights"); and one feature's activation across the
// whole text as a strip of tokens (the 'sae-strip' reply).
//   data-testid="sae-explained"     data-explained: 1 - |x - x_hat|^2 / |x|^2
//   data-testid="sae-feature-F"     the button of feature F (data-feature, data-activation)
//   data-testid="sae-dashboard-F"   opens feature F's dashboard (data-dashboard)
//   data-testid="sae-strip-chips"   the strip, one chip per position (data-position, data-value)
import {el, fmt, showPiece, textOn, viridisCss} from './viz.js';

// data: {sae (the SAE's entry in the worker's 'saes' list), result (its 'sae-features' reply at
// the picked token, or null), labels (Map feature -> description, or null), selected (the feature
// whose strip is open, or -1), steered (this SAE's features steered or clamped, comma-separated),
// where (the picked token in words), changed (the features were read under interventions, named
// beside them)}
export function render(box, d) {
  const {sae, result} = d;
  if (!sae || !result) {
    box.replaceChildren(el('p', 'hint', sae ? 'Pick a token to read its features.' :
        'Load an SAE to read the features of the picked token.'));
    return;
  }
  const summary = el('p', 'sae-summary');
  summary.setAttribute('data-testid', 'sae-explained');
  summary.dataset.explained = result.explained;
  const n = result.features.length;
  summary.textContent = `${sae.hook} at ${d.where}: the SAE explains ${(result.explained * 100).toFixed(1)}% of the ` +
      `stream (1 − ‖x − x̂‖² / ‖x‖²)${d.changed ? ', read under the changes named below' : ''}. ` +
      `${n ? `Its ${n} most active feature${n > 1 ? 's' : ''}:` : 'No feature is active here.'}`;
  const list = el('ol', 'sae-features');
  list.setAttribute('aria-label', `Most active features at ${d.where}`);
  const max = Math.max(1e-30, ...result.activations);
  const steered = new Set(String(d.steered || '').split(',').filter(Boolean).map(Number));
  result.features.forEach((f, i) => {
    const a = result.activations[i];
    const li = el('li');
    li.dataset.feature = f;
    li.dataset.activation = a;
    const button = el('button', 'secondary feature-button');
    button.type = 'button';
    button.setAttribute('data-testid', `sae-feature-${f}`);
    button.dataset.feature = f;
    button.dataset.activation = a;
    button.setAttribute('aria-pressed', String(f === d.selected));
    const label = d.labels?.get(f);
    button.append(el('span', 'feature-id', `#${f}`));
    if (label) button.append(el('span', 'feature-label', label));
    if (steered.has(f)) button.append(el('span', 'feature-steered', 'steered'));
    button.title = `Feature ${f}${label ? `: ${label}` : ''}, activation ${fmt(a)}. Show its activation across the text ` +
        'and choose it to steer or clamp.';
    const bar = el('span', 'bar');
    bar.style.width = `${(a / max) * 100}%`;
    bar.style.background = viridisCss(a / max);
    const num = el('span', 'num', fmt(a, 3));
    const tokens = (ids, values, pieces) => Array.from(ids, (id, k) => `${showPiece(pieces[id])} (${fmt(values[k], 3)})`).join('  ');
    const w = result.logits[i];
    const logit = el('p', 'feature-logits');
    logit.append(el('span', 'up', `promotes ${tokens(w.promoted, w.promotedValues, result.pieces)}`),
                 el('span', 'down', `suppresses ${tokens(w.suppressed, w.suppressedValues, result.pieces)}`));
    const dash = el('button', 'secondary feature-dashboard', 'dashboard');
    dash.type = 'button';
    dash.setAttribute('data-testid', `sae-dashboard-${f}`);
    dash.dataset.dashboard = f;
    dash.title = `Feature ${f}'s dashboard: the text where it fires most (the dashboards panel)`;
    li.append(button, bar, num, dash, logit);
    list.append(li);
  });
  const parts = [summary, list];
  if (!d.labels) parts.push(el('p', 'hint', 'Load a labels file (Neuronpedia\'s export) to name the features.'));
  box.replaceChildren(...parts);
}

// data: {strip ('sae-strip' reply, or null), label (its feature's description or ''), pieces,
// picked (position), readout (element)}. Every chip states its value on hover and focus.
export function renderStrip(box, d) {
  const s = d.strip;
  if (!s) {
    box.replaceChildren(el('p', 'hint', 'Click a feature to see its activation across the whole text.'));
    return;
  }
  const values = Array.from(s.values);
  const max = Math.max(1e-30, ...values);
  const title = el('p', 'hint', `Feature #${s.feature}${d.label ? ` (${d.label})` : ''} at every position: ` +
      `darkest 0, brightest ${fmt(max, 3)}.`);
  const chips = el('div', 'tokens sae-strip');
  chips.setAttribute('role', 'list');
  chips.setAttribute('data-testid', 'sae-strip-chips');
  chips.dataset.feature = s.feature;
  chips.append(...values.map((v, p) => {
    const chip = el('span', `chip strip-chip${p === d.picked ? ' picked' : ''}`);
    chip.setAttribute('role', 'listitem');
    chip.tabIndex = 0;
    chip.dataset.position = p;
    chip.dataset.value = v;
    chip.style.background = viridisCss(v / max);
    chip.style.color = textOn(v / max);
    const piece = d.pieces[p];
    chip.textContent = piece !== null && piece !== undefined ? showPiece(piece) : '…';
    const text = `position ${p}: ${fmt(v)}`;
    chip.title = text;
    chip.setAttribute('aria-label', `${chip.textContent}, ${text}`);
    chip.addEventListener('focus', () => { d.readout.textContent = `${chip.textContent} (${text})`; });
    return chip;
  }));
  box.replaceChildren(title, chips);
}
