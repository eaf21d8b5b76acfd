// The page's view as URL parameters, and back. A shared link names the prompt, the sampling
// settings, the interventions and the picked token, block and head:
//   ?model=…&prompt=…&temperature=0.8&top-k=40&top-p=1&seed=1&max-tokens=40
//    &ablate=1.2,0.3&skip-attn=1&skip-mlp=0,2&no-residual=3&post-norm=1&pick=5&block=1&head=3
// Opening a link with `pick` generates the text again once the model is loaded and restores the
// view. Anything malformed or outside the loaded model is ignored and named (never thrown).
// Sparse autoencoders (sae.js): &sae=hf:1&sae=https://…/folder (each SAE's source, in order)
//    &sae-steer=0.12:4,1.7:-2&sae-clamp=0.3:0 (SAE.FEATURE:NUMBER, SAE: its place among the `sae`s);
// opening such a link loads the SAEs (from the cache, or their source) before generating; &hf=BASE
// is kept when the page has one and the link names a hf: SAE.

import {decodeSaeEdits, encodeSaeEdits, parseSaeSource} from '../shared/sae.js';

// The sampling settings: URL parameter (also the input's id), the worker's name, the input's
// label (index.html), valid range (max-tokens is further capped by the model's context). app.js
// checks its inputs with this too.
export const kSamplingFields = [
  {name: 'temperature', key: 'temperature', label: 'Temperature', min: 0, max: 100},
  {name: 'top-k', key: 'topK', label: 'Top-k', min: 0, max: 1e9, integer: true},
  {name: 'top-p', key: 'topP', label: 'Top-p', min: 0.0001, max: 1},
  {name: 'seed', key: 'seed', label: 'Seed', min: 0, max: Number.MAX_SAFE_INTEGER, integer: true},
  {name: 'max-tokens', key: 'maxTokens', label: 'Max tokens', min: 1, max: 1e6, integer: true},
];
const kLayerLists = [['skip-attn', 'skipAttn'], ['skip-mlp', 'skipMlp'], ['no-residual', 'noResidual']];

// view: {model, prompt, sampling: {temperature, 'top-k', ...} by parameter name, interventions,
// pick, block, head} -> the query string (without '?').
export function encodeShare(view) {
  const q = new URLSearchParams();
  if (view.model) q.set('model', view.model);
  q.set('prompt', view.prompt);
  for (const {name} of kSamplingFields) q.set(name, String(view.sampling[name]));
  const iv = view.interventions;
  if (iv.ablateHeads.length) q.set('ablate', iv.ablateHeads.map(([l, h]) => `${l}.${h}`).join(','));
  for (const [name, key] of kLayerLists) if (iv[key].length) q.set(name, iv[key].join(','));
  if (iv.postNorm) q.set('post-norm', '1');
  for (const source of view.saes || []) q.append('sae', source);
  if (view.hf) q.set('hf', view.hf);  // where hf:L SAEs come from, when not huggingface.co
  if (view.saeSteer?.length) q.set('sae-steer', encodeSaeEdits(view.saeSteer));
  if (view.saeClamp?.length) q.set('sae-clamp', encodeSaeEdits(view.saeClamp));
  q.set('pick', String(view.pick));
  q.set('block', String(view.block));
  q.set('head', String(view.head));
  return q.toString();
}

const isInt = (s) => /^\d+$/.test(s);

// URLSearchParams -> {sampling: {name: number}, interventions, pick, block, head, restore,
// problems: ["temperature=abc (…)"]}. Ranges that depend on the model are checked by
// checkAgainstModel.
export function decodeShare(q) {
  const out = {sampling: {}, interventions: {ablateHeads: [], skipAttn: [], skipMlp: [], noResidual: [], postNorm: false},
               problems: [], restore: q.has('pick')};
  const bad = (name, why) => out.problems.push(`${name}=${q.get(name)} (${why})`);
  for (const {name, min, max, integer} of kSamplingFields) {
    if (!q.has(name)) continue;
    const v = Number(q.get(name));
    if (q.get(name).trim() === '' || !Number.isFinite(v)) bad(name, 'not a number');
    else if (integer && !Number.isInteger(v)) bad(name, 'not a whole number');
    else if (v < min || v > max) bad(name, `not between ${min} and ${max}`);
    else out.sampling[name] = v;
  }
  if (q.has('ablate')) {
    const heads = q.get('ablate').split(',');
    if (heads.every((x) => /^\d+\.\d+$/.test(x))) {
      out.interventions.ablateHeads = heads.map((x) => x.split('.').map(Number));
    } else {
      bad('ablate', 'expected block.head pairs such as 1.2,0.3');
    }
  }
  for (const [name, key] of kLayerLists) {
    if (!q.has(name)) continue;
    const layers = q.get(name).split(',');
    if (layers.every(isInt)) out.interventions[key] = layers.map(Number);
    else bad(name, 'expected block numbers such as 0,2');
  }
  if (q.has('post-norm')) {
    if (q.get('post-norm') === '1' || q.get('post-norm') === '0') out.interventions.postNorm = q.get('post-norm') === '1';
    else bad('post-norm', 'expected 1 or 0');
  }
  out.saes = [];
  for (const source of q.getAll('sae')) {
    try { out.saes.push(parseSaeSource(source)); } catch (e) { out.problems.push(`sae=${source} (${e.message})`); }
  }
  for (const [name, key] of [['sae-steer', 'saeSteer'], ['sae-clamp', 'saeClamp']]) {
    if (!q.has(name)) continue;
    try {
      const edits = decodeSaeEdits(q.get(name));
      const outside = edits.filter(([s]) => s >= out.saes.length);
      if (outside.length) bad(name, `names SAE ${outside[0][0]}, but the link has ${out.saes.length}`);
      else out[key] = edits;
    } catch (e) {
      bad(name, e.message);
    }
  }
  for (const name of ['pick', 'block', 'head']) {
    if (!q.has(name)) continue;
    if (isInt(q.get(name))) out[name] = Number(q.get(name));
    else bad(name, 'not a whole number ≥ 0');
  }
  return out;
}

// Drops what the loaded model cannot have (a block or head it lacks, more tokens than its
// context), naming each in problems.
export function checkAgainstModel(shared, info) {
  const problems = [];
  const iv = shared.interventions;
  const layerOk = (l) => l < info.n_layer;
  const outHeads = iv.ablateHeads.filter(([l, h]) => !layerOk(l) || h >= info.n_head);
  if (outHeads.length) {
    problems.push(`ablate=${outHeads.map((x) => x.join('.')).join(',')} (this model has blocks 0..${info.n_layer - 1} ` +
                  `and heads 0..${info.n_head - 1})`);
  }
  const fixed = {...iv, ablateHeads: iv.ablateHeads.filter((x) => !outHeads.includes(x))};
  for (const [name, key] of kLayerLists) {
    const out = iv[key].filter((l) => !layerOk(l));
    if (out.length) problems.push(`${name}=${out.join(',')} (this model has blocks 0..${info.n_layer - 1})`);
    fixed[key] = [...new Set(iv[key].filter(layerOk))].sort((a, b) => a - b);
  }
  const sampling = {...shared.sampling};
  if (sampling['max-tokens'] > info.n_ctx) {
    problems.push(`max-tokens=${sampling['max-tokens']} (more than the model's context of ${info.n_ctx})`);
    delete sampling['max-tokens'];
  }
  const view = {...shared, sampling, interventions: fixed};
  if (view.block !== undefined && !layerOk(view.block)) {
    problems.push(`block=${view.block} (this model has blocks 0..${info.n_layer - 1})`);
    delete view.block;
  }
  if (view.head !== undefined && view.head >= info.n_head) {
    problems.push(`head=${view.head} (this model has heads 0..${info.n_head - 1})`);
    delete view.head;
  }
  return {view, problems};
}
