// Saliency on the prompt: each token coloured by its attribution to the target's logit at the
// picked position (the worker's 'saliency' reply, `gpt2 saliency`'s values), diverging: orange
// raises the logit, blue lowers it, white is zero, scaled by the largest |value|. Every chip
// states its value on hover (title) and to keyboard focus (aria-label, readout).
import {divergingCss, fmt, showPiece} from './viz.js';

// data: {saliency, pieces, targetWords, summary, readout}
export function render(box, d) {
  const s = d.saliency;
  renderChips(box, s.values, d.pieces, d.readout);
  const method = s.method === 'ig' ? `integrated gradients, ${s.steps} steps` : 'gradient × input';
  d.summary.textContent = `Attribution of each token to the logit of ${d.targetWords} at position ${s.position} ` +
      `(${method}): total ${fmt(s.total)}; ` +
      (s.method === 'ig' ? `m(x) − m(0) = ${fmt(s.delta)}.` : `the logit ${fmt(s.delta)}.`);
}

// One chip per token, coloured by values[p] (also the attention view's "why this head attends
// here").
export function renderChips(box, valuesIn, pieces, readout) {
  const values = Array.from(valuesIn);
  const scale = Math.max(1e-30, ...values.map(Math.abs));
  box.replaceChildren(...values.map((v, p) => {
    const chip = document.createElement('span');
    chip.className = 'chip saliency-chip';
    chip.setAttribute('role', 'listitem');
    chip.tabIndex = 0;
    chip.dataset.position = p;
    chip.dataset.value = v;
    chip.style.background = divergingCss(v / scale);
    const piece = pieces[p];
    chip.textContent = piece !== null && piece !== undefined ? showPiece(piece) : '…';
    const text = `position ${p}: ${v >= 0 ? '+' : ''}${fmt(v)}`;
    chip.title = text;
    chip.setAttribute('aria-label', `${chip.textContent}, ${text}`);
    chip.addEventListener('focus', () => { readout.textContent = `${chip.textContent} (${text})`; });
    return chip;
  }));
}
