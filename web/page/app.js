// The page: the controls and the engine's Web Worker (worker.js; protocol.js documents the
// messages) meet here. Handlers and worker replies only change the state (store.js);
// render() draws every view from it, each view a module with render(element, data). Nothing
// here runs the model, so the page stays responsive while it works. This module holds the store,
// the inputs and generation; each panel is an app-*.js module given the store, the worker and
// these helpers: app-load.js (the model), app-inspect.js (the views of the picked token),
// app-experiments.js (interventions, experiments, gradients, patching), app-circuits.js (head
// detection, the quantization lens), app-sae.js (sparse autoencoders), app-graph.js (attribution
// graphs), app-export.js, app-share.js.
// The interventions are the store's alone: compute() sends them with every request that computes
// on the model, and each result shows what the worker says it ran under (showUnder).
// First: it may reload the page (under the service worker, for threads) before anything starts.
import {isolationNote} from './isolation.js';
import {startEngineWorker} from './boot.js';
import {describeInterventions, kNoInterventions} from '../shared/interventions.js';
import {kSamplingFields} from './share.js';
import {ErrorKind, Msg} from '../shared/protocol.js';
import {createStore, renderIfChanged} from './store.js';
import {drawLegend, pieceAt, showPiece} from '../views/viz.js';
import * as anatomyView from '../views/view-anatomy.js';
import * as modelView from '../views/view-model.js';
import * as tokensView from '../views/view-tokens.js';
import {createCircuitsPanel} from './app-circuits.js';
import {createExperimentsPanel} from './app-experiments.js';
import {createDashboardPanel, kDashboardState} from './app-dashboard.js';
import {createExportPanel, download} from './app-export.js';
import {createGraphPanel, kGraphState} from './app-graph.js';
import {Kind} from './graph.js';
import {createInspectPanel} from './app-inspect.js';
import {createLoadPanel} from './app-load.js';
import {createSaePanel, kSaeState} from './app-sae.js';
import {createSharePanel} from './app-share.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
// The engine's worker: started by boot.js already on a cross-origin isolated page.
const {worker, queued: earlyMessages} = startEngineWorker();

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
  relaxedSimd: false,  // the worker runs the relaxed SIMD build (web/worker/relaxed-simd.js)
  relaxedError: '',    // why it does not, where the browser has relaxed SIMD
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
  interventions: kNoInterventions,  // the one owner of them (interventions.js): every request carries them
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
  ...kDashboardState,     // the dashboard panel's (app-dashboard.js)
  ...kGraphState,         // the attribution graph panel's (app-graph.js)
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
    s.pathPatch.running || s.pathPatch.pathsRunning || !!s.graphComputing || s.graphTranscodersLoading;
const canGenerate = (s) => !!s.info && !busy(s);
const canLoad = (s) => s.ready && !busy(s);

// Sends a request that computes on the model with the interventions it is to run under: the
// store's, so no tool runs under interventions the page no longer shows.
const compute = (msg) => worker.postMessage({...msg, interventions: state.interventions});

// "Computed under: …" beside a result, from what the worker says it ran under (its `under`), not
// from the interventions the page shows now; note: what to add, prefix: what to put before.
function showUnder(id, result, note = '', prefix = '') {
  const text = result?.under ? `Computed under: ${prefix}${describeInterventions(result.under, state.saes)}${note || ''}.` : '';
  if ($(id).textContent !== text) $(id).textContent = text;
}

// Which engine runs, in words, e.g. "2 threads (cross-origin isolated)".
function threadMode() {
  const n = state.threads;
  return `${n} thread${n === 1 ? '' : 's'} (` +
      (state.isolated ? 'cross-origin isolated' : 'page not cross-origin isolated') +
      (state.threadsNote ? `; ${state.threadsNote}` : '') + ')';
}

// The engine in words for the stats line: its threads and which wasm build runs, e.g.
// "1 thread (page not cross-origin isolated), relaxed SIMD (FMA)".
const engineMode = () => `${threadMode()}, ${state.relaxedSimd ? 'relaxed SIMD (FMA)' : 'SIMD128'}` +
    (state.relaxedError ? ` (the relaxed SIMD build could not start: ${state.relaxedError})` : '');

const label = (i) => pieceAt(state.pieces, state.ids, i);

// The token the heads are ranked for: the one picked in the probability list, else the token
// that came next, else the most probable one.
function targetOf(s) {
  if (s.target !== null) return s.target;
  const next = s.ids[s.picked + 1];
  return next !== undefined ? next : s.acts?.top.ids[0];
}

function tokenWords(id) {
  const k = state.acts?.top.ids.indexOf(id) ?? -1;
  const text = k >= 0 ? state.acts.topPieces[k] : state.pieces[state.ids.indexOf(id)];
  return text === undefined || text === null ? `id ${id}` : `“${showPiece(text)}” (id ${id})`;
}

// ---- The one render path ------------------------------------------------------------------

function render(s) {
  renderStatus(s);
  renderIfChanged((_, d) => modelView.render({name: $('model-name'), note: $('model-note'), info: $('model-info')}, d),
                  $('model-info'), {info: s.info, source: s.modelSource, threads: s.info ? threadMode() : '',
                                   memoryBytes: s.memoryBytes});
  renderIfChanged(renderOutput, $('output'), {prompt: s.promptText, text: s.generatedText});
  $('output-ids').textContent = s.sampled.join(' ');
  renderIfChanged(tokensView.render, $('tokens'), {ids: s.ids, pieces: s.pieces, promptLength: s.promptLength,
                                                   picked: s.picked, captured: s.captured, focusSeq: s.focusSeq});
  renderInputs(s);
  for (const panel of panels) panel.render(s);
  if (s.info) {
    renderIfChanged(anatomyView.render, $('anatomy'), {config: s.info, tokens: Math.max(1, s.captured || s.ids.length),
                                                       blockMs: s.blockMs, prefillMs: s.statsData.prefillMs,
                                                       promptTokens: s.promptLength});
  }
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
  $('generate').disabled = !canGenerate(s);
  $('stop').disabled = !s.generating;
}

function renderOutput(box, d) {
  const span = document.createElement('span');
  span.className = 'prompt-text';
  span.textContent = d.prompt;
  const gen = document.createElement('span');
  gen.textContent = d.text;
  box.replaceChildren(span, gen);
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
  compute({type: Msg.generate, prompt, capture: state.capture, ...s});
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
    else sharePanel.addShareNote([`pick=${pendingPick} (the text has ${s.captured} tokens)`]);
    store.set({pendingPick: undefined});
  }
  if (s.captured > 0) pick(position);
}

// ---- The panels ---------------------------------------------------------------------------------

function modelReady(info) {
  store.set({layer: Math.min(state.layer, info.n_layer - 1), head: Math.min(state.head, info.n_head - 1),
             interventions: kNoInterventions, experiment: null});
  sharePanel.restoreShared(info);
  graphPanel.restoreLink(params);
}

const inspectPanel = createInspectPanel({store, $, on, compute, label, targetOf, showUnder,
                                         knockOut: (l, h) => experimentsPanel.knockOut(l, h),
                                         picked: (p) => saePanel.picked(p)});
const {pick, chooseLayerHead} = inspectPanel;
const loadPanel = createLoadPanel({store, worker, $, on, params, canLoad, engineMode, modelReady});
const saePanel = createSaePanel({store, worker, $, on, compute, hfBase: loadPanel.hfBase, canRun: (s) => !busy(s),
                                 runAgain: () => experimentsPanel.runAgain(), where: label, showUnder,
                                 addShareNote: (problems) => sharePanel.addShareNote(problems),
                                 showDashboard: (f) => dashboardPanel.showFeature(f)});
const experimentsPanel = createExperimentsPanel({store, worker, $, on, compute, busy, samplingOrError, label, tokenWords,
                                                 targetOf, pick, chooseLayerHead, showUnder, saeWords: saePanel.words});
const circuitsPanel = createCircuitsPanel({store, worker, $, on, busy, pick, chooseLayerHead, showUnder});
const exportPanel = createExportPanel({store, $, on, compute});
const graphPanel = createGraphPanel({store, worker, $, on, download, hfBase: loadPanel.hfBase, canRun: (s) => !busy(s),
                                     showUnder, showDashboard: (f) => dashboardPanel.showFeature(f)});
// The computed or opened graph's transcoder features, [[layer, feature], ...], once each.
const graphFeatures = () => {
  const nodes = state.graph?.model?.nodes || [];
  const seen = new Set();
  return nodes.filter((n) => n.kind === Kind.feature && n.feature !== null && n.block >= 0)
      .map((n) => [n.block, n.feature]).filter(([l, f]) => !seen.has(`${l}_${f}`) && seen.add(`${l}_${f}`));
};
const dashboardPanel = createDashboardPanel({store, worker, $, on, download, canRun: (s) => !busy(s), graphFeatures});
const sharePanel = createSharePanel({store, $, on, params, samplingDefaults: kSamplingDefaults, saePanel: () => saePanel,
                                     generate});
// Each draws its part of the page (render) and takes its worker replies (onMessage: true when
// the reply was its own); the experiments and circuits panels also end what waits on an error.
const panels = [inspectPanel, loadPanel, experimentsPanel, circuitsPanel, saePanel, exportPanel, sharePanel, graphPanel,
                dashboardPanel];

// ---- Worker messages ------------------------------------------------------------------------------

worker.onmessage = ({data: msg}) => {
  switch (msg.type) {
    case Msg.ready:
      if (params.get('model')) store.set({autoLoadPending: false});
      store.set({ready: true, threads: msg.threads || 1, isolated: !!msg.isolated, threadsNote: msg.note || '',
                 relaxedSimd: !!msg.relaxed, relaxedError: msg.relaxedError || '',
                 progressText: 'Engine ready. Load a model.'});
      store.set({statsText: `Engine: ${engineMode()}.`});
      loadPanel.engineReady();
      break;
    case Msg.prompt: onPrompt(msg); break;
    case Msg.token: onToken(msg); break;
    case Msg.stats: onStats(msg); break;
    case Msg.restoring: store.set({restoring: msg.on}); store.flush(); break;
    case Msg.error:
      if (msg.kind === ErrorKind.load) {
        store.set({loading: false, info: null, progress: {value: 0}, progressText: 'No model loaded.'});
      }
      if (msg.kind === ErrorKind.generate) store.set({generating: false, awaitingPrompt: false});
      experimentsPanel.onError(msg.kind);
      circuitsPanel.onError(msg.kind);
      if (msg.kind === ErrorKind.sae) saePanel.onError(msg.message);
      if (msg.kind === ErrorKind.dashboard) {
        dashboardPanel.onError(msg.message);  // shown in the panel
        break;
      }
      if (msg.kind === ErrorKind.graph) {
        graphPanel.onError(msg.message);  // shown in the panel, beside what failed
        break;
      }
      store.set({error: msg.message});
      break;
    default:
      panels.some((panel) => panel.onMessage?.(msg));
      break;
  }
};
worker.onerror = (e) => {
  store.set({error: `The engine's worker failed: ${e.message || 'unknown error'}. Reload the page.`});
};

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

on($('generate'), 'click', generate);
on($('stop'), 'click', () => worker.postMessage({type: Msg.stop}));
on($('prompt'), 'keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && canGenerate(state)) generate();
});

if (params.get('prompt')) store.set({prompt: params.get('prompt')});
drawLegend($('legend'));
store.flush();
// What the worker said before this module had run (it was started by boot.js), in order.
for (const event of earlyMessages) (event instanceof MessageEvent ? worker.onmessage : worker.onerror)(event);
