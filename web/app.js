// The page: wires the controls to the engine's Web Worker (worker.js) and draws what it sends.
// Nothing here runs the model, so the page stays responsive while it works.
import {Heatmap, drawHistogram, drawLegend, fmt, textOn, viridisCss} from './viz.js';

const $ = (id) => document.getElementById(id);
// ?threads=N on the page's URL is passed on to the worker (it only matters when the page is
// cross-origin isolated; see worker.js).
const workerUrl = new URL('./worker.js', import.meta.url);
const askedThreads = new URLSearchParams(location.search).get('threads');
if (askedThreads) workerUrl.searchParams.set('threads', askedThreads);
const worker = new Worker(workerUrl, {type: 'module'});

const state = {
  ready: false,
  threads: 1,       // threads running the kernels (the worker's plan, then the engine's count)
  isolated: false,  // cross-origin isolated: SharedArrayBuffer, so the threaded engine
  threadsNote: '',  // why the threaded engine is not used although the page is isolated
  info: null,
  loading: false,
  generating: false,
  ids: [],          // prompt + generated ids
  pieces: [],       // their text
  promptLength: 0,
  sampled: [],
  captured: 0,      // positions with activations
  picked: -1,
  layer: 0,
  head: 0,
  acts: null,       // last 'activations' message
  lens: null,
  lensPick: null,
  // From Generate until the worker's 'prompt' reply, messages about the previous text (the
  // inspect it was still answering) are stale: the worker answers in order, so drop them.
  awaitingPrompt: false,
  modelSource: '',  // the URL or file name being loaded, to name the model
};

// ---- Small helpers ------------------------------------------------------------------------

function showError(message) {
  const box = $('error');
  box.textContent = message;
  box.hidden = !message;
}

function mb(bytes) {
  return (bytes / (1024 * 1024)).toFixed(1) + ' MB';
}

// How a token looks in a chip: spaces and line breaks made visible.
function showPiece(text) {
  if (text === undefined) return '';
  return text.replace(/\n/g, '⏎').replace(/\t/g, '⇥').replace(/ /g, '·') || '∅';
}

function setButtons() {
  const haveModel = !!state.info;
  $('generate').disabled = !haveModel || state.generating || state.loading;
  $('stop').disabled = !state.generating;
  $('load').disabled = !state.ready || state.loading || state.generating;
  $('model-file').disabled = !state.ready || state.loading || state.generating;
}

function numberInput(id, {min, max, integer}) {
  const el = $(id);
  let v = Number(el.value);
  if (!Number.isFinite(v)) throw new Error(`${el.closest('label').textContent.trim()} must be a number.`);
  if (integer) v = Math.round(v);
  if (v < min || v > max) {
    throw new Error(`${el.closest('label').textContent.trim()} must be between ${min} and ${max}.`);
  }
  return v;
}

// ---- Model loading --------------------------------------------------------------------------

function loadUrl(url) {
  url = url.trim();
  if (!url) { showError('Type the URL of a .gguf model file first.'); return; }
  showError('');
  state.loading = true;
  state.info = null;
  setButtons();
  resetProgress();
  state.modelSource = url;
  $('progress-text').textContent = `Connecting to ${url}…`;
  worker.postMessage({type: 'load', url});
}

function loadFile(file) {
  if (!file) return;
  showError('');
  state.loading = true;
  state.info = null;
  setButtons();
  resetProgress();
  state.modelSource = file.name;
  $('progress-text').textContent = `Reading ${file.name}…`;
  worker.postMessage({type: 'load', file});
}

function resetProgress() {
  const bar = $('progress');
  bar.value = 0;
  for (const k of ['source', 'loaded', 'total', 'phase']) delete bar.dataset[k];
  $('model-info').hidden = true;
  $('model-name').hidden = true;
  $('model-note').hidden = true;
}

// The models this project makes, by file name, in words. The small one gets a note: its odd
// text is expected, not a bug.
const kGpt2Small = 'GPT-2 small (OpenAI, 2019; 124 M parameters)';
const kKnownModels = {
  'gpt2-q8_0.gguf': {name: `${kGpt2Small}, weights in 8 bits`},
  'gpt2-q4_0.gguf': {name: `${kGpt2Small}, weights in 4 bits`},
  'gpt2-f16.gguf': {name: `${kGpt2Small}, weights in 16-bit floats`},
  'gpt2-q8_0.manifest.json': {name: `${kGpt2Small}, weights in 8 bits`},
  'gpt2-q4_0.manifest.json': {name: `${kGpt2Small}, weights in 4 bits`},
  'gpt2-tiny-q8_0.gguf': {
    name: 'gpt2-tiny, the small offline model (4 blocks, 7 M parameters), not GPT-2 itself',
    note: 'This is the small model that ships with this project, opened because the real GPT-2 ' +
        'weights are not here (they need a one-time download: scripts/get-weights.sh, or the demo on a ' +
        'connected machine). It has GPT-2\'s design and vocabulary but is 17 times smaller, and it was ' +
        'trained for 43 minutes on one shared computer, on half a million tokens of software licences ' +
        'and Python documentation (GPT-2 read some 40 GB of web pages). So its text is English-like but ' +
        'odd: a stream of common words with little grammar or sense. Every view below works as for ' +
        'GPT-2, but its attention is still close to uniform: it has not trained long enough to grow the ' +
        'previous-token and copying heads that GPT-2 shows.',
  },
};

function showModelName(info) {
  const file = state.modelSource.split(/[?#]/)[0].split('/').pop();
  const known = kKnownModels[file];
  const words = known ? known.name : `${info.name || file || 'a GPT-2 model'} ` +
      `(${info.n_layer} blocks, ${(info.parameters / 1e6).toFixed(0)} M parameters)`;
  const el = $('model-name');
  el.textContent = `Running: ${words}.`;
  el.dataset.file = file;
  el.hidden = false;
  $('model-note').textContent = known?.note || '';
  $('model-note').hidden = !known?.note;
}

function onProgress({phase, loaded, total}) {
  const pct = total ? Math.floor((loaded / total) * 100) : 0;
  const bar = $('progress');
  bar.value = pct;
  bar.dataset.loaded = loaded;
  bar.dataset.total = total;
  bar.dataset.phase = phase;
  const verb = {download: 'Downloading', cache: 'Reading from the browser cache', file: 'Reading the file',
                parse: 'Checking the file and preparing the model'}[phase] || phase;
  $('progress-text').textContent = phase === 'parse' ? `${verb}…` :
      `${verb}: ${mb(loaded)} of ${mb(total)} (${pct}%)`;
}

// Which engine runs, in words, e.g. "2 threads (cross-origin isolated)".
function threadMode() {
  const n = state.threads;
  return `${n} thread${n === 1 ? '' : 's'} (` +
      (state.isolated ? 'cross-origin isolated' : 'page not cross-origin isolated') +
      (state.threadsNote ? `; ${state.threadsNote}` : '') + ')';
}

function showThreadMode() {
  const el = $('stats');
  el.dataset.threads = state.threads;
  el.dataset.isolated = state.isolated;
  el.title = state.isolated ? '' : 'Serve the page with the headers Cross-Origin-Opener-Policy: same-origin ' +
      'and Cross-Origin-Embedder-Policy: require-corp to let the engine use several threads.';
}

function onModel({info, source, name, cacheWarning}) {
  state.loading = false;
  state.info = info;
  if (info.threads) state.threads = info.threads;
  showThreadMode();
  if (!state.generating) $('stats').textContent = `Engine: ${threadMode()}.`;
  const bar = $('progress');
  bar.value = 100;
  bar.dataset.source = source;
  const from = {network: 'downloaded and cached', cache: 'from the browser cache (no download)',
                file: `from ${name}`}[source];
  $('progress-text').textContent = `Model ready (${mb(info.file_bytes)}, ${from}).`;
  showModelName(info);
  const dl = $('model-info');
  const rows = [
    ['Name', info.name || '(unnamed)'],
    ['Parameters', `${(info.parameters / 1e6).toFixed(1)} M`],
    ['Blocks × heads', `${info.n_layer} × ${info.n_head}`],
    ['Width (n_embd) / MLP', `${info.n_embd} / ${info.n_ff}`],
    ['Context', `${info.n_ctx} tokens`],
    ['Vocabulary', `${info.n_vocab} tokens`],
    ['Weights', info.weight_type],
    ['SIMD', info.simd],
    ['Threads', threadMode()],
  ];
  dl.replaceChildren(...rows.flatMap(([k, v]) => {
    const dt = document.createElement('dt'); dt.textContent = k;
    const dd = document.createElement('dd'); dd.textContent = v;
    return [dt, dd];
  }));
  dl.hidden = false;
  if (cacheWarning) showError(cacheWarning);
  fillSelect($('layer-select'), info.n_layer, (i) => `block ${i}`);
  fillSelect($('head-select'), info.n_head, (i) => `head ${i}`);
  state.layer = Math.min(state.layer, info.n_layer - 1);
  state.head = Math.min(state.head, info.n_head - 1);
  $('layer-select').value = state.layer;
  $('head-select').value = state.head;
  setButtons();
  refreshCacheInfo();
}

function fillSelect(select, n, label) {
  select.replaceChildren(...Array.from({length: n}, (_, i) => {
    const o = document.createElement('option');
    o.value = i;
    o.textContent = label(i);
    return o;
  }));
}

function refreshCacheInfo() {
  worker.postMessage({type: 'cache-info'});
}

// ---- Generation -------------------------------------------------------------------------------

let pendingText = '';
let textFlush = 0;

function generate() {
  let params;
  try {
    params = {
      temperature: numberInput('temperature', {min: 0, max: 100}),
      topK: numberInput('top-k', {min: 0, max: 1e9, integer: true}),
      topP: numberInput('top-p', {min: 0.0001, max: 1}),
      seed: numberInput('seed', {min: 0, max: Number.MAX_SAFE_INTEGER, integer: true}),
      maxTokens: numberInput('max-tokens', {min: 1, max: state.info.n_ctx, integer: true}),
    };
  } catch (e) {
    showError(e.message);
    return;
  }
  const prompt = $('prompt').value;
  if (!prompt) { showError('Type a prompt first.'); return; }
  showError('');
  state.generating = true;
  state.ids = [];
  state.pieces = [];
  state.sampled = [];
  state.captured = 0;
  state.picked = -1;
  state.acts = null;
  state.lens = null;
  state.attentionMap = null;
  state.awaitingPrompt = true;
  $('logit-lens').replaceChildren();
  $('lens-detail').textContent = '';
  $('output').replaceChildren();
  $('output-ids').textContent = '';
  $('stats').textContent = 'Reading the prompt…';
  setButtons();
  worker.postMessage({type: 'generate', prompt, capture: $('capture').checked, ...params});
}

function onPrompt({ids, pieces}) {
  state.awaitingPrompt = false;
  state.attentionMap = null;
  state.ids = ids.slice();
  state.pieces = pieces.slice();
  state.promptLength = ids.length;
  const span = document.createElement('span');
  span.className = 'prompt-text';
  span.textContent = $('prompt').value;
  $('output').replaceChildren(span, document.createElement('span'));
  renderTokens();
}

function onToken({id, text}) {
  if (id >= 0) {
    state.ids.push(id);
    state.sampled.push(id);
    state.pieces.push(null);  // filled from the text below when complete
  }
  pendingText += text;
  if (!textFlush) {
    // Batch DOM updates to one per frame, however fast tokens arrive.
    textFlush = requestAnimationFrame(() => {
      textFlush = 0;
      $('output').lastChild.textContent += pendingText;
      pendingText = '';
      $('output-ids').textContent = state.sampled.join(' ');
      appendNewChips();
    });
  }
}

function onStats(s) {
  state.generating = false;
  $('output-ids').textContent = state.sampled.join(' ');  // complete now, not at the next frame
  state.captured = s.captured;
  const why = {'max-tokens': 'reached max tokens', 'end-of-text': 'model wrote <|endoftext|>',
               stopped: 'stopped', 'context-full': 'context full', error: 'error'}[s.reason] || s.reason;
  const el = $('stats');
  el.textContent = `Prompt ${s.promptTokens} tokens, prefill ${s.prefillMs.toFixed(0)} ms · ` +
      `${s.generated} tokens at ${s.tokensPerSecond.toFixed(1)} tokens/s · ${why} · ${threadMode()}`;
  el.dataset.reason = s.reason;
  el.dataset.generated = s.generated;
  el.dataset.tokensPerSecond = s.tokensPerSecond;
  el.dataset.prefillMs = s.prefillMs;
  setButtons();
  // Chip text for generated tokens: ask the worker via the activations message; meanwhile
  // show ids. Pick the last prompt token so the views show the first prediction.
  if (state.captured > 0) pick(Math.min(state.promptLength - 1, state.captured - 1));
  else renderTokens();
}

// ---- Token chips ------------------------------------------------------------------------------

function makeChip(i) {
  const id = state.ids[i];
  const chip = document.createElement('span');
  chip.className = 'chip' + (i < state.promptLength ? ' prompt' : ' generated') +
      (i === state.picked ? ' picked' : '') + (i < state.captured ? '' : ' no-data');
  chip.setAttribute('role', 'option');
  chip.setAttribute('aria-selected', i === state.picked ? 'true' : 'false');
  chip.tabIndex = i === Math.max(0, state.picked) ? 0 : -1;
  chip.dataset.position = i;
  chip.dataset.id = id;
  const text = document.createElement('span');
  text.className = 'piece';
  text.textContent = state.pieces[i] !== null && state.pieces[i] !== undefined ? showPiece(state.pieces[i]) : '…';
  const small = document.createElement('small');
  small.textContent = id;
  chip.append(text, small);
  chip.title = `position ${i}, id ${id}` + (i < state.captured ? '' : ' (no activations captured)');
  return chip;
}

function renderTokens() {
  const box = $('tokens');
  const chips = state.ids.map((id, i) => makeChip(i));
  const hadFocus = box.contains(document.activeElement);
  box.replaceChildren(...chips);
  // Re-rendering replaces the chips: keep keyboard focus on the picked one.
  if (hadFocus) box.querySelector('.chip[tabindex="0"]')?.focus();
}

// While tokens stream in, only the new chips are added: rebuilding all of them every frame
// cost the page a third of a core, which on a 2-core machine is taken from the engine.
function appendNewChips() {
  const box = $('tokens');
  const fresh = [];
  for (let i = box.children.length; i < state.ids.length; i++) fresh.push(makeChip(i));
  box.append(...fresh);
}

function pick(position) {
  if (position < 0 || position >= state.captured) return;
  state.picked = position;
  renderTokens();
  const chip = $('tokens').querySelector(`[data-position="${position}"]`);
  // A long prompt's strip scrolls (style.css): bring the picked chip into it, not the page.
  const box = $('tokens');
  if (chip && (chip.offsetTop < box.scrollTop || chip.offsetTop + chip.offsetHeight > box.scrollTop + box.clientHeight)) {
    box.scrollTop = chip.offsetTop - box.clientHeight / 2;
  }
  $('picked').textContent = `Picked: position ${position}`;
  worker.postMessage({type: 'inspect', position, layer: state.layer, head: state.head});
  return chip;
}

$('tokens').addEventListener('click', (e) => {
  const chip = e.target.closest('.chip');
  if (chip) pick(Number(chip.dataset.position))?.focus();
});
$('tokens').addEventListener('keydown', (e) => {
  let p = state.picked;
  if (e.key === 'ArrowRight') p++;
  else if (e.key === 'ArrowLeft') p--;
  else if (e.key === 'Home') p = 0;
  else if (e.key === 'End') p = state.captured - 1;
  else return;
  e.preventDefault();
  p = Math.max(0, Math.min(state.captured - 1, p));
  pick(p)?.focus();
});

// ---- Views --------------------------------------------------------------------------------------

const bigAttention = new Heatmap($('attention-big'), $('attention-readout'), {
  onPick: (r) => pick(r),
});
const residual = new Heatmap($('residual'), $('residual-readout'), {onPick: (r, c) => pick(c)});

function pieceAt(i) {
  const s = state.acts?.pieces?.[i] ?? state.pieces[i];
  return s === undefined || s === null ? `#${state.ids[i]}` : `“${showPiece(s)}”`;
}

function onActivations(a) {
  state.acts = a;
  // Fill in chip text for generated tokens now that the worker decoded them.
  a.pieces.forEach((p, i) => { state.pieces[i] = p; });
  renderTokens();
  if (state.attentionMap) onAttentionMap(state.attentionMap);
  $('tokens').querySelector(`[data-position="${a.position}"]`);
  drawAttentionGrid();
  drawResidual();
  drawLayerNorm();
  drawMlp();
  drawProbs();
}

function drawAttentionGrid() {
  const a = state.acts;
  const {n_layer: L, n_head: H} = state.info;
  const p = a.position;
  const grid = $('attention-grid');
  grid.style.setProperty('--heads', H);
  const cells = [];
  const corner = document.createElement('div');
  corner.className = 'corner';
  cells.push(corner);
  for (let h = 0; h < H; ++h) {
    const d = document.createElement('div');
    d.className = 'col-label';
    d.textContent = `h${h}`;
    cells.push(d);
  }
  for (let l = 0; l < L; ++l) {
    const label = document.createElement('div');
    label.className = 'row-label';
    label.textContent = `block ${l}`;
    cells.push(label);
    const rows = a.attention[l];
    for (let h = 0; h < H; ++h) {
      const row = rows.subarray(h * (p + 1), (h + 1) * (p + 1));
      let best = 0;
      for (let k = 1; k <= p; ++k) if (row[k] > row[best]) best = k;
      const cell = document.createElement('button');
      cell.type = 'button';
      cell.className = 'attn-cell' + (l === state.layer && h === state.head ? ' chosen' : '');
      cell.dataset.layer = l;
      cell.dataset.head = h;
      cell.dataset.values = Array.from(row, (v) => v.toPrecision(6)).join(',');
      const label2 = `block ${l}, head ${h}: attends most to ${pieceAt(best)} (position ${best}) with ${fmt(row[best], 3)}`;
      cell.title = label2;
      cell.setAttribute('aria-label', label2);
      const c = document.createElement('canvas');
      c.width = Math.max(24, Math.min(96, (p + 1) * 4));
      c.height = 14;
      const ctx = c.getContext('2d');
      const w = c.width / (p + 1);
      for (let k = 0; k <= p; ++k) {
        ctx.fillStyle = viridisCss(row[k]);  // probabilities: absolute scale 0..1
        ctx.fillRect(k * w, 0, Math.ceil(w), c.height);
      }
      cell.append(c);
      cells.push(cell);
    }
  }
  grid.replaceChildren(...cells);
}

$('attention-grid').addEventListener('click', (e) => {
  const cell = e.target.closest('.attn-cell');
  if (!cell) return;
  chooseLayerHead(Number(cell.dataset.layer), Number(cell.dataset.head));
});
$('attention-grid').addEventListener('keydown', (e) => {
  const cell = e.target.closest('.attn-cell');
  if (!cell) return;
  let l = Number(cell.dataset.layer), h = Number(cell.dataset.head);
  if (e.key === 'ArrowRight') h++;
  else if (e.key === 'ArrowLeft') h--;
  else if (e.key === 'ArrowDown') l++;
  else if (e.key === 'ArrowUp') l--;
  else return;
  e.preventDefault();
  $('attention-grid').querySelector(`[data-layer="${l}"][data-head="${h}"]`)?.focus();
});

function chooseLayerHead(l, h) {
  state.layer = l;
  state.head = h;
  $('layer-select').value = l;
  $('head-select').value = h;
  document.querySelectorAll('.attn-cell.chosen').forEach((c) => c.classList.remove('chosen'));
  document.querySelector(`.attn-cell[data-layer="${l}"][data-head="${h}"]`)?.classList.add('chosen');
  worker.postMessage({type: 'attention-map', layer: l, head: h});
  if (state.acts) drawMlp();
}

$('layer-select').addEventListener('change', (e) => chooseLayerHead(Number(e.target.value), state.head));
$('head-select').addEventListener('change', (e) => chooseLayerHead(state.layer, Number(e.target.value)));

function onAttentionMap(msg) {
  state.attentionMap = msg;  // kept so the labels can be redrawn once token texts arrive
  const {layer, head, positions: P, map} = msg;
  $('attn-big-title').textContent = `Block ${layer}, head ${head}: attention of every token (rows) to earlier tokens (columns)`;
  const canvas = $('attention-big');
  const size = Math.max(160, Math.min(480, P * 24));
  canvas.width = size + 64;
  canvas.height = size;
  bigAttention.set({
    rows: P, cols: P, values: map, min: 0, max: 1,
    rowLabels: Array.from({length: P}, (_, i) => showPiece(state.pieces[i] ?? `#${state.ids[i]}`).slice(0, 8)),
    highlightRow: state.picked,
    cursor: state.picked >= 0 ? [state.picked, 0] : undefined,
    describe: (r, c, v) => Number.isNaN(v) ? `${pieceAt(r)} (position ${r}) cannot see position ${c} (later token)` :
        `${pieceAt(r)} (position ${r}) → ${pieceAt(c)} (position ${c}): ${fmt(v)}`,
  });
}

function drawResidual() {
  const a = state.acts;
  const L = state.info.n_layer, P = a.positions;
  const canvas = $('residual');
  canvas.height = Math.max(120, Math.min(320, (L + 1) * 20));
  residual.set({
    rows: L + 1, cols: P, values: a.residualNorms,
    rowLabels: ['embed', ...Array.from({length: L}, (_, l) => `block ${l}`)],
    highlightCol: a.position,
    describe: (r, c, v) => `${r === 0 ? 'Embedding' : `After block ${r - 1}`}, ${pieceAt(c)} (position ${c}): norm ${fmt(v)}`,
  });
}

function drawLayerNorm() {
  const a = state.acts;
  const L = state.info.n_layer, P = a.positions, p = a.position;
  const table = document.createElement('table');
  table.className = 'ln-table';
  const head = table.createTHead().insertRow();
  for (const t of ['LayerNorm', 'input mean', 'input std', '']) {
    const th = document.createElement('th');
    th.textContent = t;
    head.append(th);
  }
  let maxStd = 0;
  for (let r = 0; r < 2 * L + 1; ++r) maxStd = Math.max(maxStd, a.lnStats[(r * P + p) * 2 + 1]);
  const body = table.createTBody();
  for (let r = 0; r < 2 * L + 1; ++r) {
    const mean = a.lnStats[(r * P + p) * 2], std = a.lnStats[(r * P + p) * 2 + 1];
    const tr = body.insertRow();
    tr.dataset.mean = mean;
    tr.dataset.std = std;
    const name = r === 2 * L ? 'ln_f (final)' : `block ${r >> 1} ${r % 2 ? 'ln_2 (before MLP)' : 'ln_1 (before attention)'}`;
    tr.insertCell().textContent = name;
    tr.insertCell().textContent = fmt(mean);
    tr.insertCell().textContent = fmt(std);
    const barCell = tr.insertCell();
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${maxStd ? (std / maxStd) * 100 : 0}%`;
    bar.style.background = viridisCss(maxStd ? std / maxStd : 0);
    barCell.append(bar);
    tr.title = `${name}: mean ${fmt(mean)}, standard deviation ${fmt(std)} over ${state.info.n_embd} channels`;
  }
  $('layernorm').replaceChildren(table);
}

function drawMlp() {
  const a = state.acts;
  const m = a.mlp[state.layer];
  drawHistogram($('mlp-hist'), m.hist, {lo: m.lo, hi: m.hi, label: `block ${state.layer}, log count`});
  const box = $('mlp');
  const summary = document.createElement('p');
  summary.textContent = `Block ${state.layer} at ${pieceAt(a.position)}: ${m.active} of ${m.n} neurons positive ` +
      `(${((m.active / m.n) * 100).toFixed(1)}%), mean ${fmt(m.mean)}, max ${fmt(m.max)}, min ${fmt(m.min)}.`;
  const list = document.createElement('ol');
  list.className = 'neurons';
  const maxAbs = Math.max(...m.top.map((t) => Math.abs(t.value))) || 1;
  for (const {neuron, value} of m.top) {
    const li = document.createElement('li');
    li.dataset.neuron = neuron;
    li.dataset.value = value;
    const label = document.createElement('span');
    label.textContent = `neuron ${neuron}`;
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${(Math.abs(value) / maxAbs) * 60}%`;
    bar.style.background = viridisCss(0.3 + 0.7 * (Math.abs(value) / maxAbs));
    const v = document.createElement('span');
    v.className = 'num';
    v.textContent = fmt(value);
    li.append(label, bar, v);
    list.append(li);
  }
  const h = document.createElement('h4');
  h.textContent = 'Strongest neurons (largest |activation|)';
  box.replaceChildren(summary, h, list);
}

function drawProbs() {
  const a = state.acts;
  const next = state.ids[a.position + 1];
  const list = $('probs');
  const items = [];
  let k = 0;
  a.topIds.forEach((id, i) => {
    if (id < 0) return;
    const prob = a.topProbs[i];
    const li = document.createElement('li');
    li.dataset.id = id;
    li.dataset.prob = prob;
    if (id === next) li.classList.add('actual');
    const tok = document.createElement('span');
    tok.className = 'tok';
    tok.textContent = showPiece(a.topPieces[k++]);
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${prob * 100}%`;
    bar.style.background = viridisCss(prob);
    const num = document.createElement('span');
    num.className = 'num';
    num.textContent = `${(prob * 100).toFixed(2)}%`;
    li.append(tok, bar, num);
    li.title = `id ${id}${id === next ? ' (the token that came next)' : ''}`;
    items.push(li);
  });
  list.replaceChildren(...items);
  list.setAttribute('aria-label', `Most likely next tokens after ${pieceAt(a.position)}`);
}

function onLensStart({begin, end}) {
  $('lens-detail').textContent = `Computing the logit lens for positions ${begin}–${end - 1}…`;
}

function onLens(lens) {
  state.lens = lens;
  const {begin, end, topK, nLayer: L, ids, probs, pieces} = lens;
  const T = end - begin;
  const table = document.createElement('table');
  table.className = 'lens-table';
  const head = table.createTHead().insertRow();
  head.append(document.createElement('th'));
  for (let t = 0; t < T; ++t) {
    const th = document.createElement('th');
    th.textContent = showPiece(state.pieces[begin + t] ?? `#${state.ids[begin + t]}`);
    th.title = `position ${begin + t}`;
    if (begin + t === state.picked) th.className = 'picked';
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
      const td = tr.insertCell();
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
      td.append(b);
    }
  }
  $('logit-lens').replaceChildren(table);
  $('lens-detail').textContent = 'Click a cell for its top 10.';
  const pickedCell = table.querySelector(`.lens-cell[data-layer="${L - 1}"][data-position="${state.picked}"]`);
  if (pickedCell) showLensDetail(pickedCell);
}

function showLensDetail(cell) {
  const {begin, end, topK, ids, probs, pieces} = state.lens;
  const T = end - begin;
  const l = Number(cell.dataset.layer), p = Number(cell.dataset.position);
  document.querySelectorAll('.lens-cell.open').forEach((c) => c.classList.remove('open'));
  cell.classList.add('open');
  const base = (l * T + (p - begin)) * topK;
  const h = document.createElement('h4');
  h.textContent = `After block ${l}, at ${pieceAt(p)} (position ${p}): top ${topK}`;
  const ol = document.createElement('ol');
  ol.className = 'probs';
  for (let k = 0; k < topK; ++k) {
    const id = ids[base + k];
    if (id < 0) continue;
    const li = document.createElement('li');
    li.dataset.id = id;
    li.dataset.prob = probs[base + k];
    const tok = document.createElement('span');
    tok.className = 'tok';
    tok.textContent = showPiece(pieces[id]);
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${probs[base + k] * 100}%`;
    bar.style.background = viridisCss(probs[base + k]);
    const num = document.createElement('span');
    num.className = 'num';
    num.textContent = `${(probs[base + k] * 100).toFixed(2)}%`;
    li.append(tok, bar, num);
    ol.append(li);
  }
  $('lens-detail').replaceChildren(h, ol);
}

$('logit-lens').addEventListener('click', (e) => {
  const cell = e.target.closest('.lens-cell');
  if (cell) showLensDetail(cell);
});
$('logit-lens').addEventListener('keydown', (e) => {
  const cell = e.target.closest('.lens-cell');
  if (!cell) return;
  let l = Number(cell.dataset.layer), p = Number(cell.dataset.position);
  if (e.key === 'ArrowRight') p++;
  else if (e.key === 'ArrowLeft') p--;
  else if (e.key === 'ArrowDown') l++;
  else if (e.key === 'ArrowUp') l--;
  else return;
  e.preventDefault();
  $('logit-lens').querySelector(`.lens-cell[data-layer="${l}"][data-position="${p}"]`)?.focus();
});

// ---- Worker messages ------------------------------------------------------------------------------

worker.onmessage = ({data: msg}) => {
  switch (msg.type) {
    case 'ready':
      state.ready = true;
      if (params.get('model')) autoLoadPending = false;
      state.threads = msg.threads || 1;
      state.isolated = !!msg.isolated;
      state.threadsNote = msg.note || '';
      showThreadMode();
      $('stats').textContent = `Engine: ${threadMode()}.`;
      setButtons();
      $('progress-text').textContent = 'Engine ready. Load a model.';
      refreshCacheInfo();
      // A model named in the URL (the demo opens the page so) loads at once; otherwise the
      // default one only if it is already cached (no unasked-for download).
      if (params.get('model')) loadUrl($('model-url').value);
      else autoLoadIfCached();
      break;
    case 'progress': onProgress(msg); break;
    case 'model': onModel(msg); break;
    case 'prompt': onPrompt(msg); break;
    case 'token': onToken(msg); break;
    case 'stats': onStats(msg); break;
    case 'activations': if (!state.awaitingPrompt) onActivations(msg); break;
    case 'attention-map': if (!state.awaitingPrompt) onAttentionMap(msg); break;
    case 'lens-start': if (!state.awaitingPrompt) onLensStart(msg); break;
    case 'lens': if (!state.awaitingPrompt) onLens(msg); break;
    case 'cache': onCache(msg); break;
    case 'error':
      if (msg.kind === 'load') {
        state.loading = false;
        state.info = null;
        resetProgress();
        $('progress-text').textContent = 'No model loaded.';
        $('model-info').hidden = true;
      }
      if (msg.kind === 'generate') { state.generating = false; state.awaitingPrompt = false; }
      showError(msg.message);
      setButtons();
      break;
    default:
      break;
  }
};
worker.onerror = (e) => {
  showError(`The engine's worker failed: ${e.message || 'unknown error'}. Reload the page.`);
};

let cachedUrls = [];
let autoLoadPending = true;
function onCache({entries, bytes, urls, cleared}) {
  cachedUrls = urls || [];
  $('cache-info').textContent = (cleared ? 'Cache cleared. ' : '') +
      (entries ? `${entries} cached file${entries > 1 ? 's' : ''}, ${mb(bytes)}.` : 'Nothing cached.');
  if (autoLoadPending) autoLoadIfCached();
}

// A second visit loads the cached model without a click (and without any download).
function autoLoadIfCached() {
  if (!state.ready || !cachedUrls.length || !autoLoadPending || state.loading || state.info) return;
  autoLoadPending = false;
  const url = new URL($('model-url').value.trim(), document.baseURI).href;
  if (cachedUrls.includes(url)) loadUrl($('model-url').value);
}

// ---- Controls -----------------------------------------------------------------------------------

$('load').addEventListener('click', () => { autoLoadPending = false; loadUrl($('model-url').value); });
$('model-url').addEventListener('keydown', (e) => { if (e.key === 'Enter') $('load').click(); });
$('model-file').addEventListener('change', (e) => { autoLoadPending = false; loadFile(e.target.files[0]); });
$('generate').addEventListener('click', generate);
$('stop').addEventListener('click', () => worker.postMessage({type: 'stop'}));
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && !$('generate').disabled) generate();
});
$('clear-cache').addEventListener('click', () => worker.postMessage({type: 'clear-cache'}));

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
  if (state.loading || state.generating) { showError('Wait for the current work to finish, then drop the file again.'); return; }
  autoLoadPending = false;
  loadFile(file);
});
drop.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); $('model-file').click(); }
});

const params = new URLSearchParams(location.search);
if (params.get('model')) $('model-url').value = params.get('model');
if (params.get('prompt')) $('prompt').value = params.get('prompt');
drawLegend($('legend'));
setButtons();
