// The page: the controls and the engine's Web Worker (worker.js; protocol.js documents the
// messages) meet here. Handlers and worker replies only change the state (store.js);
// render() draws every view from it, each view a module with render(element, data). Nothing
// here runs the model, so the page stays responsive while it works.
// First: it may reload the page (under the service worker, for threads) before anything starts.
import {isolationNote} from './isolation.js';
import {startEngineWorker} from './boot.js';
import {hfCacheKey, hfChoice, kHfModels, kHfWeights} from './hf.js';
import {encodeNpy} from './npy.js';
import {checkAgainstModel, decodeShare, encodeShare, kSamplingFields} from './share.js';
import {ErrorKind, Msg, Phase} from './protocol.js';
import {createStore, renderIfChanged} from './store.js';
import {drawLegend, heatmapOf, mb, pieceAt, showPiece} from './viz.js';
import * as anatomyView from './view-anatomy.js';
import * as attentionView from './view-attention.js';
import * as attributionView from './view-attribution.js';
import * as experimentsView from './view-experiments.js';
import * as headsView from './view-heads.js';
import * as layerNormView from './view-layernorm.js';
import * as lensView from './view-lens.js';
import * as mlpView from './view-mlp.js';
import * as modelView from './view-model.js';
import * as patchingView from './view-patching.js';
import * as pathsView from './view-paths.js';
import * as probsView from './view-probs.js';
import * as quantView from './view-quant.js';
import * as residualView from './view-residual.js';
import * as sweepView from './view-sweep.js';
import * as atpView from './view-atp.js';
import * as saliencyView from './view-saliency.js';
import * as tokensView from './view-tokens.js';
import {createSaePanel, kSaeState} from './app-sae.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
// The engine's worker: started by boot.js already on a cross-origin isolated page.
const {worker, queued: earlyMessages} = startEngineWorker();

const kNoInterventions = {ablateHeads: [], meanAblation: false, skipAttn: [], skipMlp: [], noResidual: [], postNorm: false};

// The inputs start as index.html writes them (value, checked, the option marked selected), read
// once here: from then on the store holds what they show, their handlers update it, and
// render() writes it back to them.
function markupDefault(id) {
  const el = $(id);
  if (el.type === 'checkbox') return el.defaultChecked;
  if (el.tagName === 'SELECT') return ([...el.options].find((o) => o.defaultSelected) || el.options[0]).value;
  return el.defaultValue;
}
const kSamplingDefaults = Object.fromEntries(kSamplingFields.map(({name}) => [name, markupDefault(name)]));

const store = createStore({
  ready: false,
  threads: 1,       // threads running the kernels (the worker's plan, then the engine's count)
  isolated: false,  // cross-origin isolated: SharedArrayBuffer, so the threaded engine
  threadsNote: '',  // why the threaded engine is not used although the page is isolated
  relaxedSimd: false,  // the worker runs the relaxed SIMD build (web/relaxed-simd.js)
  isolationNote,    // why the page is not isolated (isolation.js), in words; '' when it is
  info: null,
  selectSizes: {blocks: 0, heads: 0},  // the block and head lists: the last model's, kept while another loads
  loading: false,
  generating: false,
  modelSource: '',  // the URL or file name being loaded, to name the model
  progress: {value: 0},       // {value, loaded, total, phase, source, cached ('true': a conversion is cached)}
  progressText: 'No model loaded.',
  statsText: '',
  statsData: {},
  cacheText: '',
  error: '',
  promptText: '',   // the prompt of the last generation
  ids: [],          // prompt + generated ids
  pieces: [],       // their text (null until known)
  promptLength: 0,
  sampled: [],
  generatedText: '',
  captured: 0,      // positions with activations
  picked: -1,
  focusSeq: 0,
  layer: 0,
  head: 0,
  acts: null,       // last 'activations' message
  attentionMap: null,
  lens: null,
  lensNote: '',
  lensOpen: null,   // {layer, position} of the logit-lens cell whose top 10 is shown
  // From Generate until the worker's 'prompt' reply, messages about the previous text (the
  // inspect it was still answering) are stale: the worker answers in order, so drop them.
  awaitingPrompt: false,
  interventions: kNoInterventions,
  knockMode: false,
  memoryBytes: 0,  // the engine's WebAssembly memory after the last load
  restoring: false, // a job ended and the worker runs the text again to capture it
  experimenting: false,
  experiment: null, // last 'experiment' reply
  target: null,     // the token id the heads are ranked for (null: the one that came next)
  sweep: {running: false},  // {running, done, total, result (the worker's 'sweep' reply)}
  attribution: null,        // the worker's 'attribution' reply
  saliency: null,           // the worker's 'saliency' reply
  atp: null,                // the worker's 'atp' reply (attribution patching of the patching prompts)
  attnKey: -1,              // the key column last clicked in the chosen head's map
  why: null,                // the worker's 'score-saliency' reply (why the chosen head attends there)
  atpRequest: null,         // {clean, corrupted} the 'atp' request was sent with (the worker's roles)
  atpExact: null,           // {results: {key: 'atp-exact' reply}, order: [key]} for the current atp
  patching: {running: false},  // {running, done, total, result (the worker's 'patching' reply)}
  heads: {running: false},     // {running, result (the worker's 'heads' reply)}
  quant: {running: false},     // {running, result (the worker's 'quant-lens' reply)}
  // {running, done, total, result (the worker's 'path-patch' reply), request (what it was sent),
  //  sender ([layer, head] clicked), pathsRunning, pathsDone, pathsTotal, paths (the worker's
  //  'path-patch-paths' reply)}
  pathPatch: {running: false},
  shareUrl: '',
  shareNote: '',    // what a shared link held that the page ignored
  // What the inputs hold (as typed: strings; sampling by input id, as share.js names them).
  modelUrlInput: markupDefault('model-url'),
  hfWeights: markupDefault('hf-weights'),
  hfModel: markupDefault('hf-model'),
  storageFree: undefined,  // bytes this origin may still store (navigator.storage.estimate)
  prompt: markupDefault('prompt'),
  sampling: kSamplingDefaults,
  capture: markupDefault('capture'),
  exportTensor: markupDefault('export-tensor'),
  patchClean: markupDefault('patch-clean'),
  patchCorrupted: markupDefault('patch-corrupted'),
  headsSource: markupDefault('heads-source'),
  quantWeights: markupDefault('quant-weights'),
  pathReceivers: markupDefault('path-patch-receivers'),
  saliencyMethod: markupDefault('saliency-method'),
  saliencySteps: markupDefault('saliency-steps'),
  sentPrompt: '',   // the prompt of the generation the worker is running
  exportFormat: '', // what the next 'export' reply is saved as ('npy' | 'json')
  modelUrl: '',     // the URL the model was loaded from ('' for a local file or a conversion)
  cachedUrls: [],   // what the worker's model cache holds
  autoLoadPending: true,  // a cached model may still load without a click
  sharedPending: true,    // the link's view is restored once, with the first model
  pendingPick: undefined, // the link's picked position, applied when its generation ends
  ...kSaeState,           // the SAE panel's (app-sae.js)
}, render);
const state = store.state;
// ?debug=1 lets tests read the state (e.g. every attention row) without it living in the DOM.
if (params.get('debug')) window.gpt2Page = store;

// ---- Small helpers ------------------------------------------------------------------------

function numberInput(text, {label, min, max, integer}) {
  let v = Number(text);
  if (!Number.isFinite(v)) throw new Error(`${label} must be a number.`);
  if (integer) v = Math.round(v);
  if (v < min || v > max) throw new Error(`${label} must be between ${min} and ${max}.`);
  return v;
}

// The sampling inputs as the worker names them ({temperature, topK, topP, seed, maxTokens}).
function sampling() {
  return Object.fromEntries(kSamplingFields.map(({name, key, label, min, max, integer}) =>
    [key, numberInput(state.sampling[name], {label, min, max: name === 'max-tokens' ? state.info.n_ctx : max, integer})]));
}

// The buttons that start work, enabled (render) and honoured (keyboard shortcuts) alike.
const busy = (s) => s.generating || s.loading || s.experimenting || s.sweep.running || s.patching.running ||
    s.heads.running || s.quant.running ||
    s.pathPatch.running || s.pathPatch.pathsRunning;
const canGenerate = (s) => !!s.info && !busy(s);
const canLoad = (s) => s.ready && !busy(s);

// Which engine runs, in words, e.g. "2 threads (cross-origin isolated)".
function threadMode() {
  const n = state.threads;
  return `${n} thread${n === 1 ? '' : 's'} (` +
      (state.isolated ? 'cross-origin isolated' : 'page not cross-origin isolated') +
      (state.threadsNote ? `; ${state.threadsNote}` : '') + ')';
}

// The engine in words for the stats line: its threads and which wasm build runs, e.g.
// "1 thread (page not cross-origin isolated), relaxed SIMD (FMA)".
const engineMode = () => `${threadMode()}, ${state.relaxedSimd ? 'relaxed SIMD (FMA)' : 'SIMD128'}`;

const label = (i) => pieceAt(state.pieces, state.ids, i);

// The token the heads are ranked for: the one picked in the probability list, else the token
// that came next, else the most probable one.
function targetOf(s) {
  if (s.target !== null) return s.target;
  const next = s.ids[s.picked + 1];
  return next !== undefined ? next : s.acts?.topIds[0];
}

function tokenWords(id) {
  const k = state.acts?.topIds.indexOf(id) ?? -1;
  const text = k >= 0 ? state.acts.topPieces[k] : state.pieces[state.ids.indexOf(id)];
  return text === undefined || text === null ? `id ${id}` : `“${showPiece(text)}” (id ${id})`;
}

// ---- The one render path ------------------------------------------------------------------

// Handlers given to views are the same functions every time, so an unchanged view's input stays
// unchanged (renderIfChanged) and a heat map keeps its keyboard cursor.
const pickFromMap = (position) => pick(position);
// A cell of the chosen head's map: its row is the token picked, its column the key asked about.
const pickPair = (position, key) => { store.set({attnKey: key}); pick(position); };
const pickAtpCell = (layer, position) => runAtpExact('resid', layer, position);
const pickAtpHead = (layer, head) => runAtpExact('head', layer, head);
const openAttributedHead = (l, h) => { if (h < state.info.n_head) chooseLayerHead(l, h); };

function render(s) {
  renderStatus(s);
  renderIfChanged((_, d) => modelView.render({name: $('model-name'), note: $('model-note'), info: $('model-info')}, d),
                  $('model-info'), {info: s.info, source: s.modelSource, threads: s.info ? threadMode() : '',
                                   memoryBytes: s.memoryBytes});
  renderIfChanged(renderOutput, $('output'), {prompt: s.promptText, text: s.generatedText});
  $('output-ids').textContent = s.sampled.join(' ');
  renderIfChanged(tokensView.render, $('tokens'), {ids: s.ids, pieces: s.pieces, promptLength: s.promptLength,
                                                   picked: s.picked, captured: s.captured, focusSeq: s.focusSeq});
  $('picked').textContent = s.picked >= 0 ? `Picked: position ${s.picked}` : '';
  renderInputs(s);
  const a = s.info && s.acts;
  const ablated = s.interventions.ablateHeads.map(([l, h]) => `${l}.${h}`);
  if (a) {
    const common = {pieces: s.pieces, ids: s.ids};
    renderIfChanged(attentionView.render, $('attention-grid'), {
      attention: a.attention, position: a.position, nLayer: s.info.n_layer, nHead: s.info.n_head,
      layer: s.layer, head: s.head, ablated: ablated.join(), knockMode: s.knockMode, ...common,
    });
    renderIfChanged(residualView.render, $('residual'), {
      norms: a.residualNorms, nLayer: s.info.n_layer, positions: a.positions, position: a.position,
      readout: $('residual-readout'), onPick: pickFromMap, ...common,
    });
    renderIfChanged(layerNormView.render, $('layernorm'), {
      lnStats: a.lnStats, nLayer: s.info.n_layer, nEmbd: s.info.n_embd, positions: a.positions, position: a.position,
    });
    renderIfChanged(mlpView.render, $('mlp'), {mlp: a.mlp[s.layer], layer: s.layer, where: label(a.position),
                                              hist: $('mlp-hist')});
    renderIfChanged(probsView.render, $('probs'), {topIds: a.topIds, topProbs: a.topProbs, topPieces: a.topPieces,
                                                   next: s.ids[a.position + 1], target: targetOf(s),
                                                   where: label(a.position)});
  }
  if (s.attentionMap && s.info) {
    renderIfChanged(attentionView.renderHead, $('attention-big'), {
      map: s.attentionMap, picked: s.picked, pieces: s.pieces, ids: s.ids, readout: $('attention-readout'),
      title: $('attn-big-title'), onPick: pickPair,
    });
  }
  const pair = s.attentionMap && s.picked >= 0 && s.attnKey >= 0 && s.attnKey <= s.picked;
  $('attn-why-run').disabled = !s.info || !pair || s.generating || s.sweep.running || s.patching.running;
  $('attn-why-pair').textContent = pair ? `Block ${s.attentionMap.layer}, head ${s.attentionMap.head}: query ` +
      `position ${s.picked}, key position ${s.attnKey}.` : '';
  if (s.why) {
    renderIfChanged(attentionView.renderWhy, $('attn-why'), {why: s.why, pieces: s.pieces, ids: s.ids,
                                                             summary: $('attn-why-summary'), readout: $('attn-why-readout')});
  }
  if (s.lens) {
    renderIfChanged(lensView.render, $('logit-lens'), {lens: s.lens, picked: s.picked, pieces: s.pieces, ids: s.ids,
                                                       open: s.lensOpen});
  } else if ($('logit-lens').firstChild) {
    $('logit-lens').replaceChildren();
  }
  renderIfChanged(lensView.renderDetail, $('lens-detail'), {lens: s.lens, note: s.lensNote, open: s.lensOpen,
                                                            pieces: s.pieces, ids: s.ids});
  renderExperiments(s);
  saePanel.render(s);
  $('heads-run').disabled = !s.info || busy(s);
  renderIfChanged(headsView.render, $('heads'), {heads: s.heads, layer: s.layer, head: s.head, status: $('heads-status')});
  $('quant-run').disabled = !s.info || busy(s);
  renderIfChanged(quantView.render, $('quant'), {quant: s.quant, status: $('quant-status')});
  if (s.info) {
    renderIfChanged(anatomyView.render, $('anatomy'), {config: s.info, tokens: Math.max(1, s.captured || s.ids.length),
                                                       blockMs: s.blockMs, prefillMs: s.statsData.prefillMs,
                                                       promptTokens: s.promptLength});
  }
  $('share-url').value = s.shareUrl;
  $('share-url').hidden = !s.shareUrl;
  $('share-note').textContent = s.shareNote;
  $('share-note').hidden = !s.shareNote;
  $('share').disabled = s.picked < 0;
  for (const id of ['export-npy', 'export-json']) $(id).disabled = s.captured === 0 || s.generating;
}

// Each input shows the store's value; one a person just typed into already does (its handler
// stored it), so it is left alone and keeps its caret.
function renderInputs(s) {
  const show = (id, value) => { if ($(id).value !== value) $(id).value = value; };
  show('model-url', s.modelUrlInput);
  show('hf-weights', s.hfWeights);
  show('hf-model', s.hfModel);
  show('prompt', s.prompt);
  for (const {name} of kSamplingFields) show(name, s.sampling[name]);
  $('capture').checked = s.capture;
  show('export-tensor', s.exportTensor);
  show('patch-clean', s.patchClean);
  show('patch-corrupted', s.patchCorrupted);
  show('heads-source', s.headsSource);
  show('quant-weights', s.quantWeights);
  show('path-patch-receivers', s.pathReceivers);
  show('saliency-method', s.saliencyMethod);
  show('saliency-steps', s.saliencySteps);
  renderIfChanged(fillSelect, $('layer-select'), {n: s.selectSizes.blocks, text: blockText});
  renderIfChanged(fillSelect, $('head-select'), {n: s.selectSizes.heads, text: headText});
  $('layer-select').value = s.layer;
  $('head-select').value = s.head;
}

const blockText = (i) => `block ${i}`;
const headText = (i) => `head ${i}`;

function fillSelect(select, {n, text}) {
  select.replaceChildren(...Array.from({length: n}, (_, i) => {
    const o = document.createElement('option');
    o.value = i;
    o.textContent = text(i);
    return o;
  }));
}

function renderStatus(s) {
  const err = $('error');
  err.textContent = s.error;
  err.hidden = !s.error;
  const bar = $('progress');
  bar.value = s.progress.value;
  for (const k of ['source', 'loaded', 'total', 'phase', 'cached']) {
    if (s.progress[k] === undefined) delete bar.dataset[k];
    else bar.dataset[k] = s.progress[k];
  }
  $('progress-text').textContent = s.progressText;
  const stats = $('stats');
  stats.textContent = s.restoring ? 'The job is done; running the text again to show its activations…' : s.statsText;
  stats.dataset.restoring = s.restoring;
  for (const k of ['reason', 'generated', 'tokensPerSecond', 'prefillMs']) {
    if (s.statsData[k] === undefined) delete stats.dataset[k];
    else stats.dataset[k] = s.statsData[k];
  }
  $('threads-note').textContent = s.isolationNote;
  $('threads-note').hidden = !s.isolationNote;
  stats.dataset.threads = s.threads;
  stats.dataset.isolated = s.isolated;
  stats.title = s.isolated ? '' : 'Serve the page with the headers Cross-Origin-Opener-Policy: same-origin ' +
      'and Cross-Origin-Embedder-Policy: require-corp to let the engine use several threads.';
  $('cache-info').textContent = s.cacheText;
  const haveModel = !!s.info;
  $('generate').disabled = !canGenerate(s);
  $('stop').disabled = !s.generating;
  $('load').disabled = !canLoad(s);
  const choice = hfChoiceOf(s);
  $('get-gpt2').disabled = !canLoad(s) || !!choice.refusal;
  $('hf-need').textContent = choice.refusal || choice.text;
  $('hf-need').classList.toggle('refusal', !!choice.refusal);
  // The weight types this size fits in, on this device.
  for (const option of $('hf-weights').options) {
    option.disabled = !!hfChoice(s.hfModel, option.value, deviceFacts(s)).refusal;
  }
  $('model-file').disabled = !canLoad(s);
  $('exp-run-again').disabled = !haveModel || busy(s) || s.captured === 0;
  $('sweep-run').disabled = !haveModel || busy(s) || s.picked < 0;
  $('sweep-cancel').disabled = !s.sweep.running;
}

function renderOutput(box, d) {
  const span = document.createElement('span');
  span.className = 'prompt-text';
  span.textContent = d.prompt;
  const gen = document.createElement('span');
  gen.textContent = d.text;
  box.replaceChildren(span, gen);
}

// The stream's norm after block l's attention step, from ln_2's input statistics (biased std,
// so the sum of squares is n_embd · (std² + mean²)).
function midNorm(a, l) {
  if (!a || !state.info) return NaN;
  const P = a.positions, row = 2 * l + 1;
  const mean = a.lnStats[(row * P + a.position) * 2], std = a.lnStats[(row * P + a.position) * 2 + 1];
  return Math.sqrt(state.info.n_embd * (std * std + mean * mean));
}

function renderExperiments(s) {
  const iv = s.interventions, l = s.layer;
  const on = (list) => list.includes(l);
  $('exp-skip-attn').checked = on(iv.skipAttn);
  $('exp-skip-mlp').checked = on(iv.skipMlp);
  $('exp-no-residual').checked = on(iv.noResidual);
  $('exp-post-norm').checked = iv.postNorm;
  $('exp-knock-mode').checked = s.knockMode;
  $('exp-mean-ablation').checked = !!iv.meanAblation;
  for (const id of ['exp-skip-attn', 'exp-skip-mlp', 'exp-no-residual', 'exp-post-norm', 'exp-knock-mode', 'exp-mean-ablation',
                    'exp-reset']) {
    $(id).disabled = !s.info;
  }
  const words = [
    ...iv.ablateHeads.map(([a, h]) => `head ${a}.${h} knocked out${iv.meanAblation ? ' to its mean' : ''}`),
    ...iv.skipAttn.map((b) => `block ${b} attention skipped`), ...iv.skipMlp.map((b) => `block ${b} MLP skipped`),
    ...iv.noResidual.map((b) => `block ${b} without residual`), ...(iv.postNorm ? ['post-norm'] : []),
    ...saePanel.words(iv),
  ];
  $('exp-summary').textContent = words.length ? `Changes: ${words.join(', ')}.` : 'No changes: the plain model.';
  const a = s.acts, P = a?.positions;
  const norm = (row) => (a && s.picked >= 0 ? a.residualNorms[row * P + a.position] : NaN);
  const sub = (k) => (a && s.picked >= 0 ? a.sublayerNorms[l * 4 + k] : NaN);
  if (s.info) {
    renderIfChanged(experimentsView.render, $('exp-diagram'), {
      layer: l, skipAttn: on(iv.skipAttn), skipMlp: on(iv.skipMlp), noResidual: on(iv.noResidual),
      postNorm: iv.postNorm, normIn: norm(l), normMid: midNorm(a, l), normOut: norm(l + 1),
      normLn1: sub(0), normAttn: sub(1), normLn2: sub(2), normMlp: sub(3),
      where: a ? label(a.position) : 'the picked token',
    });
  }
  const target = targetOf(s);
  $('sweep-target').textContent = s.picked >= 0 && target !== undefined ? `Target: ${tokenWords(target)}.` : '';
  if (target !== undefined) $('sweep-target').dataset.id = target;
  renderIfChanged(sweepView.render, $('sweep'), {sweep: s.sweep,
                                                 targetWords: s.sweep.result ? tokenWords(s.sweep.result.target) : ''});
  $('attr-run').disabled = !s.info || s.generating || s.sweep.running || s.patching.running || s.picked < 0;
  $('saliency-run').disabled = !s.info || s.generating || s.sweep.running || s.patching.running || s.picked < 0;
  if (s.saliency) {
    renderIfChanged(saliencyView.render, $('saliency'), {
      saliency: s.saliency, pieces: s.pieces, targetWords: tokenWords(s.saliency.target),
      summary: $('saliency-summary'), readout: $('saliency-readout'),
    });
  }
  $('patch-run').disabled = !s.info || s.generating || s.sweep.running || s.patching.running || s.experimenting;
  $('patch-cancel').disabled = !s.patching.running;
  $('atp-run').disabled = !s.info || s.generating || s.sweep.running || s.patching.running || s.experimenting;
  renderIfChanged(atpView.render, $('atp'), {atp: s.atp, exact: s.patching.result, readout: $('atp-readout'),
                                             status: $('atp-status'), onPick: pickAtpCell});
  renderIfChanged(atpView.renderHeads, $('atp-heads'), {atp: s.atp, exact: s.patching.result,
                                                       readout: $('atp-heads-readout'),
                                                       onPick: pickAtpHead});
  renderIfChanged(atpView.renderExact, $('atp-exact'), {atp: s.atp, exact: s.atpExact});
  renderIfChanged(patchingView.render, $('patching'), {job: s.patching, readout: $('patching-readout'),
                                                       status: $('patching-status')});
  $('path-patch-run').disabled = $('patch-run').disabled || s.pathPatch.running || s.pathPatch.pathsRunning;
  $('path-patch-cancel').disabled = !s.pathPatch.running && !s.pathPatch.pathsRunning;
  renderIfChanged(pathsView.render, $('path-patch-grid'), {job: s.pathPatch, status: $('path-patch-status'),
                                                           progress: $('path-patch-progress'),
                                                           diagram: $('path-patch-paths')});
  if (s.attribution && s.info) {
    renderIfChanged(attributionView.render, $('attribution'), {
      attribution: s.attribution, nLayer: s.info.n_layer, nHead: s.info.n_head,
      targetWords: tokenWords(s.attribution.target), readout: $('attribution-readout'), summary: $('attribution-summary'),
      onPick: openAttributedHead,
    });
  }
  $('exp-status').textContent = s.experimenting ? 'Running the plain and the changed model…' : '';
  renderIfChanged((_, d) => experimentsView.renderResult({
    before: $('exp-before'), after: $('exp-after'), kl: $('exp-kl'), textBefore: $('exp-text-before'),
    textAfter: $('exp-text-after'),
  }, d.r), $('exp-results'), {r: s.experiment});
}

// ---- Model loading --------------------------------------------------------------------------

// What a person starts is drawn at once (store.flush), not at the next frame: the page answers
// input immediately, and a reader of the DOM never sees the last error next to a new action.
function startLoad(source, text) {
  // The last text's views belong to the last model.
  store.set({error: '', loading: true, info: null, modelSource: source, progress: {value: 0}, progressText: text,
             acts: null, attentionMap: null, lens: null, lensOpen: null, experiment: null, captured: 0, picked: -1,
             target: null, sweep: {running: false}, attribution: null, heads: {running: false},
             quant: {running: false},
             saliency: null, atp: null, attnKey: -1, why: null, atpExact: null});
  store.flush();
}

function loadUrl(url) {
  url = url.trim();
  if (!url) { store.set({error: 'Type the URL of a .gguf model file first.'}); return; }
  startLoad(url, `Connecting to ${url}…`);
  store.set({modelUrl: url});
  worker.postMessage({type: Msg.load, url});
}

function loadFile(file) {
  if (!file) return;
  startLoad(file.name, `Reading ${file.name}…`);
  store.set({modelUrl: ''});  // a local file cannot be shared by a link
  worker.postMessage({type: Msg.load, file});
}

// Get GPT-2: Hugging Face, or the server named by ?hf=BASE (tests use a local one).
const hfBase = params.get('hf') || 'https://huggingface.co';

// What this device tells a page about its memory and storage (either may be unknown).
const deviceFacts = (s) => ({deviceMemory: navigator.deviceMemory, storageFree: s.storageFree});
const hfChoiceOf = (s) => hfChoice(s.hfModel, s.hfWeights, deviceFacts(s));
navigator.storage?.estimate?.().then(({quota, usage}) => {
  if (Number.isFinite(quota) && Number.isFinite(usage)) store.set({storageFree: Math.max(0, quota - usage)});
}, () => {});

function getGpt2() {
  const {hfWeights: weights, hfModel: model} = state;
  const label = kHfModels.find((m) => m.id === model).label;
  startLoad(`${model}-${weights}.gguf`, `Getting ${label} (${weights.toUpperCase()})…`);
  store.set({modelUrl: ''});  // shared links name a model URL; this one is made in the browser
  worker.postMessage({type: Msg.getGpt2, hf: hfBase, weights, model});
}

function onProgress({phase, loaded, total, file}) {
  const pct = total ? Math.floor((loaded / total) * 100) : 0;
  const verb = {[Phase.download]: file ? `Downloading ${file}` : 'Downloading',
                [Phase.cache]: 'Reading from the browser cache', [Phase.file]: 'Reading the file',
                [Phase.parse]: 'Checking the file and preparing the model',
                [Phase.convert]: 'Converting to GGUF'}[phase] || phase;
  const amount = phase === Phase.convert ? `${loaded} of ${total} tensors` : `${mb(loaded)} of ${mb(total)}`;
  store.set({progress: {value: pct, loaded, total, phase},
             progressText: phase === Phase.parse || !total ? `${verb}…` : `${verb}: ${amount} (${pct}%)`});
}

function onModel({info, source, name, cacheWarning, storing, memoryBytes}) {
  const from = {network: 'downloaded and cached', cache: 'from the browser cache (no download)',
                file: `from ${name}`, hf: storing ? 'downloaded from Hugging Face and converted; saving it in this browser…'
                                                  : 'downloaded from Hugging Face and converted'}[source];
  if (info.threads) store.set({threads: info.threads});
  store.set({
    loading: false, info, memoryBytes: memoryBytes ?? state.memoryBytes, selectSizes: {blocks: info.n_layer, heads: info.n_head},
    progress: {...state.progress, value: 100, source},
    progressText: `Model ready (${mb(info.file_bytes)}, ${from}).`,
    statsText: state.generating ? state.statsText : `Engine: ${engineMode()}.`,
    layer: Math.min(state.layer, info.n_layer - 1), head: Math.min(state.head, info.n_head - 1),
    interventions: kNoInterventions, experiment: null,
    error: cacheWarning || state.error,
  });
  worker.postMessage({type: Msg.cacheInfo});
  restoreShared(info);
}

// The sampling inputs, or null with the reason shown when one is invalid.
function samplingOrError() {
  try {
    return sampling();
  } catch (e) {
    store.set({error: e.message});
    return null;
  }
}

// ---- Generation -------------------------------------------------------------------------------

function generate() {
  const s = samplingOrError();
  if (!s) return;
  const prompt = state.prompt;
  if (!prompt) { store.set({error: 'Type a prompt first.'}); return; }
  store.set({
    error: '', generating: true, promptText: '', generatedText: '', ids: [], pieces: [], sampled: [], captured: 0,
    picked: -1, acts: null, lens: null, lensNote: '', lensOpen: null, attentionMap: null, awaitingPrompt: true,
    experiment: null, statsText: 'Reading the prompt…', statsData: {}, blockMs: null, target: null, sweep: {running: false},
    attribution: null, saliency: null, attnKey: -1, why: null, sentPrompt: prompt,
  });
  store.flush();
  worker.postMessage({type: Msg.generate, prompt, capture: state.capture, interventions: state.interventions, ...s});
}

function onPrompt({ids, pieces}) {
  store.set({awaitingPrompt: false, attentionMap: null, ids: ids.slice(), pieces: pieces.slice(),
             promptLength: ids.length, promptText: state.sentPrompt});
}

function onToken({id, text}) {
  const patch = {generatedText: state.generatedText + text};
  if (id >= 0) {
    patch.ids = [...state.ids, id];
    patch.sampled = [...state.sampled, id];
    patch.pieces = [...state.pieces, null];  // filled when the worker decodes them (activations)
  }
  store.set(patch);
}

function onStats(s) {
  const why = {'max-tokens': 'reached max tokens', 'end-of-text': 'model wrote <|endoftext|>',
               stopped: 'stopped', 'context-full': 'context full', error: 'error'}[s.reason] || s.reason;
  store.set({
    generating: false, captured: s.captured, blockMs: s.blockMs,
    statsText: `Prompt ${s.promptTokens} tokens, prefill ${s.prefillMs.toFixed(0)} ms · ` +
        `${s.generated} tokens at ${s.tokensPerSecond.toFixed(1)} tokens/s · ${why} · ${engineMode()}`,
    statsData: {reason: s.reason, generated: s.generated, tokensPerSecond: s.tokensPerSecond, prefillMs: s.prefillMs},
  });
  // Pick the last prompt token so the views show the first prediction (or a shared link's pick).
  let position = Math.min(state.promptLength - 1, s.captured - 1);
  const pendingPick = state.pendingPick;
  if (pendingPick !== undefined) {
    if (pendingPick < s.captured) position = pendingPick;
    else addShareNote([`pick=${pendingPick} (the text has ${s.captured} tokens)`]);
    store.set({pendingPick: undefined});
  }
  if (s.captured > 0) pick(position);
}

// ---- Picking a token, a block, a head ------------------------------------------------------

function pick(position, {focus = false} = {}) {
  if (position < 0 || position >= state.captured) return;
  store.set({picked: position, focusSeq: state.focusSeq + (focus ? 1 : 0),
             target: position === state.picked ? state.target : null});
  worker.postMessage({type: Msg.inspect, position, layer: state.layer, head: state.head});
  saePanel.picked(position);
}

function chooseLayerHead(layer, head) {
  store.set({layer, head});
  worker.postMessage({type: Msg.attentionMap, layer, head});
}

function onActivations(a) {
  // The worker decoded every token's text: fill in the generated ones.
  const pieces = state.pieces.slice();
  a.pieces.forEach((p, i) => { pieces[i] = p; });
  store.set({acts: a, pieces});
}

function onLens(lens) {
  const last = {layer: lens.nLayer - 1, position: state.picked};
  store.set({lens, lensNote: '', lensOpen: state.picked >= lens.begin && state.picked < lens.end ? last : null});
}

// ---- Experiments ----------------------------------------------------------------------------

function toggled(list, x) {
  return list.includes(x) ? list.filter((y) => y !== x) : [...list, x].sort((a, b) => a - b);
}

function setInterventions(iv) {
  store.set({interventions: iv});
}

function knockOut(layer, head) {
  const heads = state.interventions.ablateHeads;
  const has = heads.some(([l, h]) => l === layer && h === head);
  setInterventions({...state.interventions, ablateHeads: has ? heads.filter(([l, h]) => l !== layer || h !== head) :
      [...heads, [layer, head]].sort((a, b) => a[0] - b[0] || a[1] - b[1])});
}

function runAgain() {
  const s = samplingOrError();
  if (!s) return;
  store.set({experimenting: true, error: ''});
  store.flush();
  worker.postMessage({type: Msg.experiment, interventions: state.interventions, position: state.picked,
                      prompt: state.promptText, ...s});
}

// ---- Export ---------------------------------------------------------------------------------

function download(name, blob) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}

function onExport({tensors}) {
  const t = tensors.find((x) => x.name.endsWith(state.exportTensor)) || tensors[0];
  if (state.exportFormat === 'npy') download(`${t.name}.npy`, new Blob([encodeNpy(t.shape, t.data)]));
  else download(`${t.name}.json`, new Blob([JSON.stringify({name: t.name, shape: t.shape, data: Array.from(t.data)})]));
}

// A heat map as the picture on screen (PNG) or as vector graphics (SVG).
function exportImage(button) {
  const canvas = $(button.dataset.exportFor);
  const heat = heatmapOf(canvas);
  if (!heat || !heat.rows) { store.set({error: 'Nothing to export yet: generate and pick a token first.'}); return; }
  const name = `gpt2-${button.dataset.exportFor}`;
  if (button.dataset.format === 'svg') download(`${name}.svg`, new Blob([heat.toSvg()], {type: 'image/svg+xml'}));
  else canvas.toBlob((blob) => download(`${name}.png`, blob), 'image/png');
}

function exportTensor(format) {
  store.set({exportFormat: format});
  if (state.exportTensor === 'saliency') exportSaliency(format);
  else worker.postMessage({type: Msg.exportBlock, layer: state.layer});
}

// The saliency computed last, [1, P] over the conversation's tokens like the hooks' batch
// dimension; the name says the method (no TransformerLens hook holds it), the JSON also the
// position, target and sums it was computed for.
function exportSaliency(format) {
  const s = state.saliency;
  if (!s) { store.set({error: 'Nothing to export yet: run Saliency first.'}); return; }
  const name = s.method === 'ig' ? `saliency.integrated_gradients_${s.steps}` : 'saliency.grad_x_input';
  const shape = [1, s.values.length];
  if (format === 'npy') { download(`${name}.npy`, new Blob([encodeNpy(shape, s.values)])); return; }
  download(`${name}.json`, new Blob([JSON.stringify({
    name, shape, data: Array.from(s.values), position: s.position, target: s.target, contrast: s.contrast,
    method: s.method, steps: s.steps, total: s.total, delta: s.delta,
  })]));
}

function runSweep() {
  const {n_layer: L, n_head: H} = state.info;
  store.set({sweep: {running: true, done: 0, total: L * H}, error: ''});
  store.flush();
  worker.postMessage({type: Msg.headSweep, position: state.picked, target: targetOf(state),
                      interventions: state.interventions});
}

// Head detection: the engine's conversation is now the repeated sequence, so the page shows it as
// the text, and a head's attention opens on it.
function runHeads() {
  store.set({heads: {running: true, result: state.heads.result}, error: ''});
  store.flush();
  worker.postMessage({type: Msg.heads, text: state.headsSource === 'prompt' ? state.prompt : ''});
}

function onHeads(r) {
  const T = r.sequence.length;
  store.set({heads: {running: false, result: r}, ids: r.sequence.slice(), pieces: r.pieces.slice(), promptLength: T,
             captured: T, sampled: [], promptText: r.pieces.join(''), generatedText: '', picked: -1, acts: null,
             lens: null, lensNote: '', lensOpen: null, attentionMap: null, experiment: null, attribution: null,
             target: null, sweep: {running: false}});
  pick(T - 1);
}

// The quantization lens: the engine's conversation is then the prompt, captured (the loaded model).
function runQuantLens() {
  if (!state.prompt) { store.set({error: 'Type a prompt first.'}); return; }
  store.set({quant: {running: true, result: state.quant.result}, error: ''});
  store.flush();
  worker.postMessage({type: Msg.quantLens, weights: state.quantWeights, prompt: state.prompt});
}

function onQuantLens(r) {
  const T = r.ids.length;
  store.set({quant: {running: false, result: r}, ids: r.ids.slice(), pieces: r.pieces.slice(), promptLength: T,
             captured: T, sampled: [], promptText: r.pieces.join(''), generatedText: '', picked: -1, acts: null,
             lens: null, lensNote: '', lensOpen: null, attentionMap: null, experiment: null, attribution: null,
             target: null, sweep: {running: false}});
  pick(T - 1);
}

function onExperiment(r) {
  store.set({experimenting: false, experiment: r});
  // The engine now holds the changed model's run of the same text: show its insides.
  pick(state.picked);
  worker.postMessage({type: Msg.attentionMap, layer: state.layer, head: state.head});
}

// ---- Share ------------------------------------------------------------------------------------

const shared = decodeShare(params);  // the link's view, as opened

const saePanel = createSaePanel({store, worker, $, on, hfBase, canRun: (s) => !busy(s), runAgain, where: label,
                                 addShareNote});

function addShareNote(problems) {
  if (!problems.length) return;
  const before = state.shareNote ? state.shareNote.replace(/\.$/, '') + ', ' : 'Ignored from the link: ';
  store.set({shareNote: before + problems.join(', ') + '.'});
}

function restoreShared(info) {
  if (!state.sharedPending) return;
  store.set({sharedPending: false});
  const {view, problems} = checkAgainstModel(shared, info);
  addShareNote(problems);
  const sampling = {...state.sampling};
  for (const {name} of kSamplingFields) {
    // A value the model rules out (shown at startup) goes back to the page's default.
    if (view.sampling[name] !== undefined) sampling[name] = String(view.sampling[name]);
    else if (shared.sampling[name] !== undefined) sampling[name] = kSamplingDefaults[name];
  }
  store.set({sampling, interventions: view.interventions, layer: view.block ?? state.layer, head: view.head ?? state.head});
  // The link's SAEs load (and its steering is set) before its text is generated again.
  saePanel.restoreShared(view, () => {
    if (view.restore) {
      store.set({pendingPick: view.pick});
      generate();
    }
  });
}

function share() {
  const {problems: saeProblems, ...saes} = saePanel.shareView();
  const view = {
    model: state.modelUrl, prompt: state.promptText, interventions: state.interventions,
    sampling: {...state.sampling},
    pick: state.picked, block: state.layer, head: state.head, ...saes,
  };
  addShareNote(saeProblems);
  const url = new URL(location.href);
  url.search = encodeShare(view);
  history.replaceState(null, '', url);
  store.set({shareUrl: url.href});
  navigator.clipboard?.writeText(url.href).catch(() => {});  // a convenience; the field shows it anyway
}

// ---- Worker messages ------------------------------------------------------------------------------

worker.onmessage = ({data: msg}) => {
  switch (msg.type) {
    case Msg.ready:
      if (params.get('model')) store.set({autoLoadPending: false});
      store.set({ready: true, threads: msg.threads || 1, isolated: !!msg.isolated, threadsNote: msg.note || '',
                 relaxedSimd: !!msg.relaxed,
                 progressText: 'Engine ready. Load a model.'});
      store.set({statsText: `Engine: ${engineMode()}.`});
      worker.postMessage({type: Msg.cacheInfo});
      // A model named in the URL (the demo opens the page so) or shipped with the site loads at
      // once; otherwise the default one only if it is already cached (no unasked-for download).
      if (params.get('model')) loadUrl(state.modelUrlInput);
      else siteModel.then((url) => { if (url && !state.loading && !state.info) loadUrl(url); else autoLoadIfCached(); });
      break;
    case Msg.progress: onProgress(msg); break;
    case Msg.model: onModel(msg); break;
    case Msg.prompt: onPrompt(msg); break;
    case Msg.token: onToken(msg); break;
    case Msg.stats: onStats(msg); break;
    // The answers to a click on a token or a head are drawn when they arrive, not at the next
    // animation frame: the frame then only lays out and paints them.
    case Msg.activations: if (!state.awaitingPrompt) { onActivations(msg); store.flush(); } break;
    case Msg.attentionMap: if (!state.awaitingPrompt) { store.set({attentionMap: msg}); store.flush(); } break;
    case Msg.lensStart:
      if (!state.awaitingPrompt) store.set({lensNote: `Computing the logit lens for positions ${msg.begin}–${msg.end - 1}…`});
      break;
    case Msg.lens: if (!state.awaitingPrompt) onLens(msg); break;
    case Msg.restoring: store.set({restoring: msg.on}); store.flush(); break;
    case Msg.experiment: onExperiment(msg); break;
    case Msg.heads: onHeads(msg); break;
    case Msg.quantLens: onQuantLens(msg); break;
    case Msg.exportBlock: onExport(msg); break;
    case Msg.attribution: store.set({attribution: msg}); break;
    case Msg.saliency: store.set({saliency: msg}); break;
    case Msg.atp: store.set({atp: msg, atpExact: null}); break;
    case Msg.atpExact: {
      const key = atpView.exactKey(msg.kind, msg.layer, msg.index);
      const x = state.atpExact || {results: {}, order: []};
      store.set({atpExact: {results: {...x.results, [key]: msg}, order: [...x.order.filter((k) => k !== key), key]}});
      break;
    }
    case Msg.scoreSaliency: store.set({why: msg}); break;
    case Msg.patchingProgress: store.set({patching: {...state.patching, done: msg.done, total: msg.total}}); break;
    case Msg.patching: store.set({patching: {running: false, done: msg.done, total: msg.total, result: msg}}); break;
    case Msg.pathPatchProgress:
      store.set({pathPatch: {...state.pathPatch, ...(msg.paths ? {pathsDone: msg.done, pathsTotal: msg.total}
                                                                : {done: msg.done, total: msg.total})}});
      break;
    case Msg.pathPatch: store.set({pathPatch: {...state.pathPatch, running: false, done: msg.done, total: msg.total, result: msg}}); break;
    case Msg.pathPatchPaths: store.set({pathPatch: {...state.pathPatch, pathsRunning: false, paths: msg}}); break;
    case Msg.sweepProgress: store.set({sweep: {...state.sweep, done: msg.done, total: msg.total}}); break;
    case Msg.sweep: store.set({sweep: {running: false, done: msg.done, total: msg.total, result: msg}}); break;
    case Msg.cache: onCache(msg); break;
    case Msg.error:
      if (msg.kind === ErrorKind.load) {
        store.set({loading: false, info: null, progress: {value: 0}, progressText: 'No model loaded.'});
      }
      if (msg.kind === ErrorKind.generate) store.set({generating: false, awaitingPrompt: false});
      if (msg.kind === ErrorKind.experiment) store.set({experimenting: false});
      if (msg.kind === ErrorKind.sweep) store.set({sweep: {running: false}});
      if (msg.kind === ErrorKind.patching) store.set({patching: {running: false}});
      if (msg.kind === ErrorKind.heads) store.set({heads: {running: false, result: state.heads.result}});
      if (msg.kind === ErrorKind.quantLens) store.set({quant: {running: false, result: state.quant.result}});
      if (msg.kind === ErrorKind.pathPatch) store.set({pathPatch: {...state.pathPatch, running: false, pathsRunning: false}});
      if (msg.kind === ErrorKind.sae) saePanel.onError(msg.message);
      store.set({error: msg.message});
      break;
    default:
      saePanel.onMessage(msg);
      break;
  }
};
worker.onerror = (e) => {
  store.set({error: `The engine's worker failed: ${e.message || 'unknown error'}. Reload the page.`});
};

function onCache({entries, bytes, urls, cleared, stored}) {
  store.set({cachedUrls: urls || [], cacheText: (cleared ? 'Cache cleared. ' : '') +
      (entries ? `${entries} cached file${entries > 1 ? 's' : ''}, ${mb(bytes)}.` : 'Nothing cached.')});
  if (stored && state.info && state.progress.source === 'hf') {
    store.set({progress: {...state.progress, cached: 'true'},
               progressText: `Model ready (${mb(state.info.file_bytes)}, downloaded from Hugging Face, converted and cached).`});
  }
  if (state.autoLoadPending) autoLoadIfCached();
}

// A second visit loads the cached model without a click (and without any download).
function autoLoadIfCached() {
  const cachedUrls = state.cachedUrls;
  if (!state.ready || !cachedUrls.length || !state.autoLoadPending || state.loading || state.info) return;
  store.set({autoLoadPending: false});
  const url = new URL(state.modelUrlInput.trim(), document.baseURI).href;
  if (cachedUrls.includes(url)) { loadUrl(state.modelUrlInput); return; }
  // Else a GPT-2 converted on an earlier visit (the worker's cache key for it; no request).
  for (const {id} of kHfModels) {
    const converted = kHfWeights.find((w) => cachedUrls.includes(hfCacheKey(hfBase, w, id)));
    if (converted) {
      store.set({hfWeights: converted, hfModel: id});
      getGpt2();
      return;
    }
  }
}

// ---- Controls -----------------------------------------------------------------------------------

// A person's input is drawn at once, not at the next frame: the page answers immediately, and
// whoever reads the page right after a click (a person, a test) sees its effect.
function on(element, type, handler) {
  element.addEventListener(type, (e) => {
    handler(e);
    store.flush();
  });
}

// What a person types is stored as it is typed: the handlers below read the store, never an input.
const kept = (id, key, event = 'input') => $(id).addEventListener(event, (e) => store.set({[key]: e.target.value}));
kept('model-url', 'modelUrlInput');
kept('hf-weights', 'hfWeights', 'change');
kept('hf-model', 'hfModel', 'change');
kept('prompt', 'prompt');
kept('export-tensor', 'exportTensor', 'change');
kept('patch-clean', 'patchClean');
kept('patch-corrupted', 'patchCorrupted');
kept('heads-source', 'headsSource', 'change');
kept('quant-weights', 'quantWeights', 'change');
kept('path-patch-receivers', 'pathReceivers');
kept('saliency-method', 'saliencyMethod', 'change');
kept('saliency-steps', 'saliencySteps');
for (const {name} of kSamplingFields) {
  $(name).addEventListener('input', (e) => store.set({sampling: {...state.sampling, [name]: e.target.value}}));
}
$('capture').addEventListener('change', (e) => store.set({capture: e.target.checked}));

function loadClicked() {
  store.set({autoLoadPending: false});
  loadUrl(state.modelUrlInput);
}
on($('load'), 'click', loadClicked);
on($('get-gpt2'), 'click', () => { store.set({autoLoadPending: false}); getGpt2(); });
on($('model-url'), 'keydown', (e) => { if (e.key === 'Enter' && canLoad(state)) loadClicked(); });
on($('model-file'), 'change', (e) => { store.set({autoLoadPending: false}); loadFile(e.target.files[0]); });
on($('generate'), 'click', generate);
on($('stop'), 'click', () => worker.postMessage({type: Msg.stop}));
on($('prompt'), 'keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && canGenerate(state)) generate();
});
on($('clear-cache'), 'click', () => worker.postMessage({type: Msg.clearCache}));

on($('tokens'), 'click', (e) => {
  const chip = e.target.closest('.chip');
  if (chip) pick(Number(chip.dataset.position), {focus: true});
});
on($('tokens'), 'keydown', (e) => {
  let p = state.picked;
  if (e.key === 'ArrowRight') p++;
  else if (e.key === 'ArrowLeft') p--;
  else if (e.key === 'Home') p = 0;
  else if (e.key === 'End') p = state.captured - 1;
  else return;
  e.preventDefault();
  pick(Math.max(0, Math.min(state.captured - 1, p)), {focus: true});
});

on($('attention-grid'), 'click', (e) => {
  const cell = e.target.closest('.attn-cell');
  if (!cell) return;
  const l = Number(cell.dataset.layer), h = Number(cell.dataset.head);
  if (state.knockMode) knockOut(l, h);
  else chooseLayerHead(l, h);
});
// The grid cell an arrow key moves to from (row, col), or null for any other key; the
// attention grid (block x head) and the logit lens (block x position) move alike.
function arrowStep(e, row, col) {
  const moves = {ArrowRight: [0, 1], ArrowLeft: [0, -1], ArrowDown: [1, 0], ArrowUp: [-1, 0]};
  const m = moves[e.key];
  return m ? {row: row + m[0], col: col + m[1]} : null;
}
on($('attention-grid'), 'keydown', (e) => {
  const cell = e.target.closest('.attn-cell');
  if (!cell) return;
  const to = arrowStep(e, Number(cell.dataset.layer), Number(cell.dataset.head));
  if (!to) return;
  e.preventDefault();
  $('attention-grid').querySelector(`[data-layer="${to.row}"][data-head="${to.col}"]`)?.focus();
});
on($('layer-select'), 'change', (e) => chooseLayerHead(Number(e.target.value), state.head));
on($('head-select'), 'change', (e) => chooseLayerHead(state.layer, Number(e.target.value)));

on($('logit-lens'), 'click', (e) => {
  const cell = e.target.closest('.lens-cell');
  if (cell) store.set({lensOpen: {layer: Number(cell.dataset.layer), position: Number(cell.dataset.position)}});
});
on($('logit-lens'), 'keydown', (e) => {
  const cell = e.target.closest('.lens-cell');
  if (!cell) return;
  const to = arrowStep(e, Number(cell.dataset.layer), Number(cell.dataset.position));
  if (!to) return;
  e.preventDefault();
  $('logit-lens').querySelector(`.lens-cell[data-layer="${to.row}"][data-position="${to.col}"]`)?.focus();
});

for (const [id, key] of [['exp-skip-attn', 'skipAttn'], ['exp-skip-mlp', 'skipMlp'], ['exp-no-residual', 'noResidual']]) {
  on($(id), 'change', () => {
    setInterventions({...state.interventions, [key]: toggled(state.interventions[key], state.layer)});
  });
}
on($('exp-post-norm'), 'change', (e) => setInterventions({...state.interventions, postNorm: e.target.checked}));
on($('exp-knock-mode'), 'change', (e) => store.set({knockMode: e.target.checked}));
on($('exp-mean-ablation'), 'change', (e) => setInterventions({...state.interventions, meanAblation: e.target.checked}));
on($('exp-reset'), 'click', () => setInterventions(kNoInterventions));
on($('exp-run-again'), 'click', runAgain);
on($('share'), 'click', share);
on($('export-npy'), 'click', () => exportTensor('npy'));
// Not on(): drawing at every click on the page would reset a checkbox before its change event.
document.body.addEventListener('click', (e) => {
  const button = e.target.closest('[data-export-for]');
  if (button) {
    exportImage(button);
    store.flush();
  }
});
on($('attr-run'), 'click', () => worker.postMessage({type: Msg.attribute, position: state.picked, target: targetOf(state),
                                                     interventions: state.interventions}));
on($('saliency-run'), 'click', () => worker.postMessage({
  type: Msg.saliency, position: state.picked, target: targetOf(state), contrast: -1, method: state.saliencyMethod,
  steps: Math.max(1, Math.min(4096, Number(state.saliencySteps) | 0 || 16)),
}));
on($('attn-why-run'), 'click', () => worker.postMessage({
  type: Msg.scoreSaliency, layer: state.attentionMap.layer, head: state.attentionMap.head, query: state.picked,
  key: state.attnKey,
}));
// The exact map patches the clean stream into the corrupted run, so the estimate differentiates
// the corrupted run (the CLI's --clean) with the clean prompt as the source (--corrupt), for the
// exact run's answer over its other token when it has run.
on($('atp-run'), 'click', () => {
  const request = {clean: state.patchCorrupted, corrupted: state.patchClean};
  store.set({atpRequest: request});
  worker.postMessage({type: Msg.atp, ...request, target: state.patching.result?.answer ?? -1,
                      contrast: state.patching.result?.other ?? -1});
});
// One estimated cell run exactly, on the prompts and for the target the estimate had.
function runAtpExact(kind, layer, index) {
  if (!state.atp || !state.atpRequest) return;
  worker.postMessage({type: Msg.atpExact, ...state.atpRequest, target: state.atp.target, contrast: state.atp.contrast,
                      kind, layer, index});
}
on($('export-json'), 'click', () => exportTensor('json'));
on($('sweep-run'), 'click', runSweep);
on($('sweep-cancel'), 'click', () => worker.postMessage({type: Msg.cancelJob}));
on($('patch-cancel'), 'click', () => worker.postMessage({type: Msg.cancelJob}));
on($('patch-run'), 'click', () => {
  store.set({patching: {running: true, done: 0, total: 0}, error: ''});
  worker.postMessage({type: Msg.patching, clean: state.patchClean, corrupted: state.patchCorrupted,
                      interventions: state.interventions});
});
on($('path-patch-cancel'), 'click', () => worker.postMessage({type: Msg.cancelJob}));
on($('path-patch-run'), 'click', () => {
  const request = {clean: state.patchClean, corrupted: state.patchCorrupted, receivers: state.pathReceivers};
  store.set({pathPatch: {running: true, done: 0, total: 0, request}, error: ''});
  worker.postMessage({type: Msg.pathPatch, ...request, interventions: state.interventions});
});
// A sender's paths to each receiver alone, measured for the prompts its sweep ran on.
on($('path-patch-grid'), 'click', (e) => {
  const b = e.target.closest('button[data-layer]');
  const job = state.pathPatch;
  if (!b || !job.result || busy(state)) return;
  const layer = Number(b.dataset.layer), head = Number(b.dataset.head);
  store.set({pathPatch: {...job, sender: [layer, head], paths: null, pathsRunning: true, pathsDone: 0, pathsTotal: 0},
             error: ''});
  worker.postMessage({type: Msg.pathPatchPaths, clean: job.request.clean, corrupted: job.request.corrupted, layer, head,
                      interventions: state.interventions});
});
on($('sweep'), 'click', (e) => {
  const li = e.target.closest('li[data-layer]');
  if (li) chooseLayerHead(Number(li.dataset.layer), Number(li.dataset.head));
});
on($('heads-run'), 'click', runHeads);
on($('quant-run'), 'click', runQuantLens);
on($('quant'), 'click', (e) => {
  const li = e.target.closest('li[data-head]');
  if (li) chooseLayerHead(Number(li.dataset.layer), Number(li.dataset.head));
});
on($('heads'), 'click', (e) => {
  const cell = e.target.closest('.head-cell');
  if (cell) chooseLayerHead(Number(cell.dataset.layer), Number(cell.dataset.head));
});
on($('probs'), 'click', (e) => {
  const li = e.target.closest('li[data-id]');
  if (li) store.set({target: Number(li.dataset.id)});
});

const drop = $('drop-zone');
for (const ev of ['dragenter', 'dragover']) {
  document.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.add('dragging'); });
}
for (const ev of ['dragleave', 'drop']) {
  document.addEventListener(ev, () => drop.classList.remove('dragging'));
}
document.addEventListener('drop', (e) => {
  e.preventDefault();
  const file = e.dataTransfer?.files?.[0];
  if (!file) return;
  if (state.loading || state.generating) {
    store.set({error: 'Wait for the current work to finish, then drop the file again.'});
    return;
  }
  store.set({autoLoadPending: false});
  loadFile(file);
});
drop.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); $('model-file').click(); }
});

if (params.get('model')) store.set({modelUrlInput: params.get('model')});
// A site built with `build-site.sh --with-weights` names the model it ships in version.json; the
// page opens that one at once (a link's ?model= still wins).
const siteModel = params.get('model') ? Promise.resolve('') :
  fetch(new URL('version.json', import.meta.url)).then((r) => (r.ok ? r.json() : {}))
      .then((v) => (typeof v.model === 'string' ? v.model : ''), () => '');
siteModel.then((url) => { if (url && !state.info && !state.loading) store.set({modelUrlInput: url}); });
try { $('hf-host').textContent = new URL(hfBase).host; } catch { /* the worker reports a bad URL */ }
if (params.get('prompt')) store.set({prompt: params.get('prompt')});
// The link's sampling settings show at once; its model-dependent parts wait for the model.
store.set({sampling: {...state.sampling, ...Object.fromEntries(kSamplingFields.filter(({name}) => shared.sampling[name] !== undefined)
    .map(({name}) => [name, String(shared.sampling[name])]))}});
addShareNote(shared.problems);
drawLegend($('legend'));
store.flush();
// What the worker said before this module had run (it was started by boot.js), in order.
for (const event of earlyMessages) (event instanceof MessageEvent ? worker.onmessage : worker.onerror)(event);
