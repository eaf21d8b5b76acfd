// The engine's jobs: generation, inspection (activations, logit lens, attention maps), the
// experiments (run again, head sweep, activation patching, attribution) and export. The
// dispatcher (worker.js) hands them the loaded engine (attach) and calls one handler per message
// (protocol.js documents the messages); stop() and cancel() are called the moment their message
// arrives, so a running job sees them at its next yield. The engine owns the conversation, the
// generation loop and the experiments (src/lab/lab.h): each job is a short sequence of its calls,
// whose result it posts as declared (reply.js).

import {ErrorKind, Msg, errorMessage} from '../shared/protocol.js';
import {createCircuits} from './worker-circuits.js';
import {createUnder} from './worker-under.js';
import {canonical} from '../shared/interventions.js';
import {reply, tokenPieces} from './reply.js';
import {topIndices} from './top.js';

// The logit lens costs n_layer * positions * n_embd * n_vocab multiply-adds; keep a window
// around ~3e9 (a few seconds of wasm SIMD) and at most this many positions.
const kLensBudget = 3e9;
const kLensMaxPositions = 64;
// The window runs in pieces of about this many multiply-adds (one block of GPT-2 XL at one
// position), a message that arrives meanwhile first: a click on a head after a token pick waits
// for one piece, not the whole window (GPT-2 XL: 48 unembeddings of one position).
const kLensPiece = 1e8;
// What the jobs (head sweep, patching, path patching) run under: the plain model, whatever the
// page's interventions (which they give back at their end).
const kPlain = canonical({});

// post(msg, transfer): to the page; yieldToEvents(): lets queued messages (stop, cancel) arrive;
// busy(): whether a message waits in the dispatcher's queue; lensPiece: kLensPiece (tests make
// the pieces one block); under: what the engine computes under (worker-under.js, shared with the
// SAEs' part).
export function createJobs({post, yieldToEvents, busy = () => false, lensPiece = kLensPiece, under = createUnder()}) {
  let engine = null;
  let info = null;
  let stopRequested = false;
  let cancelJob = false;      // a head sweep or patching job is to stop

  // A short throwaway run right after loading. The browser compiles wasm functions with a quick
  // baseline compiler first and optimises them once they are hot; without this the user's first
  // generation ran 2-3x slower than the next ones. Costs a few tokens' time at load.
  function warmUp() {
    try {
      engine.reset();
      engine.setCapture(false);
      const n = Math.min(8, info.n_ctx - 4);
      engine.prefill(Array.from({length: n}, (_, i) => (i * 101) % info.n_vocab));
      for (let i = 0; i < 4; ++i) engine.step((i * 37) % info.n_vocab);
    } catch (e) {
      // Warming up is only an optimisation; a real run reports any real problem.
    } finally {
      engine.reset();
    }
  }

  // ---- Generation -----------------------------------------------------------------------------

  function bytesToPieces(ids) {
    const d = new TextDecoder('utf-8');
    return Array.from(ids, (id) => d.decode(engine.tokenBytes(id)));
  }

  const sampling = (msg) => ({temperature: msg.temperature, topK: msg.topK, topP: msg.topP, seed: msg.seed,
                              maxTokens: Math.max(0, msg.maxTokens | 0), capture: !!msg.capture});

  async function handleGenerate(msg) {
    if (!info) { post({type: Msg.error, kind: ErrorKind.generate, message: 'Load a model first.'}); return; }
    stopRequested = false;
    const decoder = new TextDecoder('utf-8');
    let reason = 'error';
    let generated = 0;
    let prefillMs = 0;
    let blockMs = new Float64Array(0);  // each block's share of the prefill, ms
    let decodeMs = 0;
    let promptIds = [];
    try {
      promptIds = Array.from(engine.tokenize(msg.prompt));
      const t0 = performance.now();
      engine.startGeneration(promptIds, sampling(msg), msg.interventions || {});  // checks, runs the prompt
      under.ran(msg.interventions || {});
      prefillMs = performance.now() - t0;
      blockMs = engine.blockTimes();
      post({type: Msg.prompt, ids: promptIds, pieces: bytesToPieces(promptIds)});
      const t1 = performance.now();
      // The engine runs each token once the next call says not to stop (the last one too, so its
      // activations can be inspected like the others).
      for (let id = engine.nextToken(false); id >= 0; id = engine.nextToken(stopRequested)) {
        const text = decoder.decode(engine.tokenBytes(id), {stream: true});
        post({type: Msg.token, id, text, index: generated++});
        await yieldToEvents();
      }
      reason = engine.stopReason().replaceAll('_', '-');  // max-tokens, end-of-text, context-full, stopped
      decodeMs = performance.now() - t1;
      const tail = decoder.decode();
      if (tail) post({type: Msg.token, id: -1, text: tail, index: -1});
    } catch (e) {
      under.forget();
      post({type: Msg.error, kind: ErrorKind.generate, message: errorMessage(e)});
    }
    reply(post, Msg.stats, canonical(msg.interventions), {blockMs, captured: engine.capturedPositions()}, {
      promptTokens: promptIds.length, prefillMs, generated, decodeMs,
      tokensPerSecond: generated > 0 && decodeMs > 0 ? generated / (decodeMs / 1000) : 0, reason});
  }

  // ---- Activations ----------------------------------------------------------------------------

  // Everything the page's views need for one picked token (position p), copied out of wasm
  // memory (views die when memory grows) and transferred.
  function inspect(position, spec) {
    const P = engine.capturedPositions();
    if (P === 0) throw new Error('No activations were captured: tick "capture activations" and generate.');
    const p = Math.max(0, Math.min(P - 1, position | 0));
    const L = info.n_layer;
    const attention = [];       // [L] of Float32Array [H, p + 1]
    const mlp = [];             // [L] of {hist, top}
    for (let l = 0; l < L; ++l) {
      attention.push(engine.attention(l, p).slice());
      mlp.push(summariseMlp(engine.mlpActivations(l, p)));
    }
    const residualNorms = engine.residualNorms();
    const lnStats = engine.layerNormStats();
    // [L, 4] at p: ln_1 out, attention out, ln_2 out, MLP out (Engine::SublayerNorms)
    const all = engine.sublayerNorms(), sublayerNorms = new Float32Array(L * 4);
    for (let l = 0; l < L; ++l) sublayerNorms.set(all.subarray((l * P + p) * 4, (l * P + p + 1) * 4), l * 4);
    const top = engine.topProbs(p);
    const tokens = Array.from(engine.conversation().subarray(0, P + 1));
    reply(post, Msg.activations, spec, {attention, residualNorms, lnStats, sublayerNorms, top},
          {position: p, positions: P, tokens, pieces: bytesToPieces(tokens), mlp,
           topPieces: bytesToPieces(Array.from(top.ids).filter((i) => i >= 0))});
    return p;
  }

  // Histogram with fixed edges (GELU outputs lie in [-0.17, +inf)) and the strongest neurons.
  function summariseMlp(view) {
    const n = view.length;
    let min = Infinity, max = -Infinity, sum = 0, active = 0;
    for (let i = 0; i < n; ++i) {
      const v = view[i];
      if (v < min) min = v;
      if (v > max) max = v;
      sum += v;
      if (v > 0) active++;
    }
    const bins = 40;
    const lo = Math.min(-0.2, min), hi = Math.max(1, max);
    const hist = new Array(bins).fill(0);
    for (let i = 0; i < n; ++i) {
      const b = Math.min(bins - 1, Math.floor(((view[i] - lo) / (hi - lo)) * bins));
      hist[b]++;
    }
    const top = topIndices(n, 12, (i) => Math.abs(view[i])).map((i) => ({neuron: i, value: view[i]}));
    return {hist, lo, hi, min, max, mean: sum / n, active, n, top};
  }

  // The window being computed: {begin, end, topK, next (block), ids, probs}; null when none.
  let lensTask = null;

  async function lens(position, spec) {
    const P = engine.capturedPositions();
    const p = Math.max(0, Math.min(P - 1, position | 0));
    const perPosition = info.n_layer * info.n_embd * info.n_vocab;
    const width = Math.max(1, Math.min(P, kLensMaxPositions, Math.floor(kLensBudget / perPosition)));
    // A window ending at the picked token (or starting at 0 when everything fits).
    const end = Math.min(P, Math.max(p + 1, width));
    const begin = Math.max(0, end - width);
    if (!lensTask || lensTask.begin !== begin || lensTask.end !== end) {
      lensTask = {begin, end, topK: 10, next: 0, ids: [], probs: [], under: spec};
      post({type: Msg.lensStart, begin, end});
    }
    await continueLens();
  }

  // Runs the window's next pieces until it is done (then posts it) or a message waits (then it
  // goes on after that message, see background()).
  async function continueLens() {
    const t = lensTask;
    const step = Math.max(1, Math.floor(lensPiece / ((t.end - t.begin) * info.n_embd * info.n_vocab)));
    while (t.next < info.n_layer) {
      if (busy()) return;
      const to = Math.min(info.n_layer, t.next + step);
      const r = engine.logitLens(t.begin, t.end, t.topK, t.next, to);
      for (const id of r.ids) t.ids.push(id);
      for (const q of r.probs) t.probs.push(q);
      t.next = to;
      await yieldToEvents();
      if (lensTask !== t) return;
    }
    lensTask = null;
    const pieces = tokenPieces(engine, t.ids.filter((i) => i >= 0));
    reply(post, Msg.lens, t.under, {ids: t.ids, probs: t.probs},
          {begin: t.begin, end: t.end, topK: t.topK, nLayer: info.n_layer, pieces});
  }

  // [P, P] attention of one head (row = query, column = key; NaN above the diagonal).
  function attentionMap(layer, head, spec) {
    const P = engine.capturedPositions();
    const H = info.n_head;
    const l = Math.max(0, Math.min(info.n_layer - 1, layer | 0));
    const h = Math.max(0, Math.min(H - 1, head | 0));
    const map = new Float32Array(P * P).fill(NaN);
    for (let q = 0; q < P; ++q) {
      map.set(engine.headAttention(l, h, q), q * P);  // a view: read before the next engine call
    }
    reply(post, Msg.attentionMap, spec, {map}, {layer: l, head: h, positions: P});
  }

  // Reads of the capture run under the request's interventions: the conversation runs again under
  // them first when it was captured under others (which ends a logit lens window under way).
  function underCapture(msg) {
    const {under: spec, rerun} = under.ensure(msg.interventions, {capture: true});
    if (rerun) lensTask = null;
    return spec;
  }

  async function handleInspect(msg) {
    try {
      const spec = underCapture(msg);
      if (msg.layer !== undefined && engine.capturedPositions() > 0) attentionMap(msg.layer, msg.head, spec);
      const p = inspect(msg.position, spec);
      await yieldToEvents();
      if (msg.lens !== false) await lens(p, spec);
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.inspect, message: errorMessage(e)});
    }
  }

  // ---- Experiments ------------------------------------------------------------------------------

  // "Run again": the engine samples both texts and measures both distributions (their KL and top
  // lists, lab/experiment.h), then leaves the conversation re-run under the interventions
  // (reusing the cache and the stream before the first changed block).
  async function handleExperiment(msg) {
    try {
      if (!info) throw new Error('Generate some text first, then run the experiment.');
      const promptIds = Array.from(engine.tokenize(msg.prompt));
      const r = engine.experiment(promptIds, msg.interventions || {}, msg.position | 0, sampling(msg));
      under.ran(msg.interventions || {});
      const ids = [...r.topBefore, ...r.topAfter, ...r.textBefore, ...r.textAfter];
      reply(post, Msg.experiment, canonical(msg.interventions), r, {nLayer: info.n_layer, pieces: tokenPieces(engine, ids)});
    } catch (e) {
      under.forget();
      post({type: Msg.error, kind: ErrorKind.experiment, message: errorMessage(e)});
    }
  }

  // Runs the engine's started job (Lab::ContinueJob: about four prefills of work a call, so a
  // cancel or a progress update waits at most that long) until done or cancelled; onCells gets
  // each call's {layers, indices, values}. Always ends the job: the engine gives the page's
  // conversation back, captured under its interventions.
  // A cancel that lands after the last cell found the job finished: it is reported as finished.
  const cutShort = (done, total) => cancelJob && done < total;

  async function runJob(total, progress, onCells, extra = {}) {
    let done = 0;
    while (done < total && !cancelJob) {
      const next = engine.continueJob();
      onCells(engine.jobResults(done));
      done = next;
      post({type: progress, done, total, ...extra});
      await yieldToEvents();
    }
    return done;
  }

  // The lab gives the conversation back (runs it again to capture it: a prefill of the text,
  // seconds at GPT-2 XL), which the page says while it lasts.
  function endJob(kind, msg) {
    post({type: Msg.restoring, on: true});
    try {
      engine.endJob();
      under.ran(msg.interventions || {});
    } catch (e) {
      under.forget();
      post({type: Msg.error, kind, message: errorMessage(e)});
    } finally {
      post({type: Msg.restoring, on: false});
    }
  }

  // Each head knocked out alone and the target's log-probability at the position measured by the
  // engine (only positions 0..p run again, from the head's block, the blocks from the last down),
  // ranked by how much it drops.
  async function handleHeadSweep(msg) {
    const started = performance.now();
    try {
      if (!info) throw new Error('Generate some text with "capture activations" on first.');
      const s = engine.startHeadSweep(msg.position | 0, msg.target | 0, msg.interventions || {});
      const heads = [];
      const done = await runJob(s.total, Msg.sweepProgress, ({layers, indices, values}) => values.forEach((logProb, i) =>
        heads.push({layer: layers[i], head: indices[i], logProb, drop: s.base - logProb})));
      heads.sort((a, b) => b.drop - a.drop || a.layer - b.layer || a.head - b.head);
      reply(post, Msg.sweep, kPlain, s, {meanAblation: !!msg.interventions?.meanAblation, heads, done: heads.length,
                                         cancelled: cutShort(done, s.total), ms: performance.now() - started});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.sweep, message: errorMessage(e)});
    } finally {
      if (info) endJob(ErrorKind.sweep, msg);
    }
  }

  // Activation patching: for every block l and position p, the corrupted prompt re-run with the
  // residual stream entering block l at p replaced by the clean run's (the engine re-runs only
  // positions p.. from block l); recovered: the share of the clean run's logit difference
  // log p(answer) - log p(other) a patch brings back.
  async function handlePatching(msg) {
    const started = performance.now();
    try {
      if (!info) throw new Error('Load a model first.');
      const clean = Array.from(engine.tokenize(msg.clean || '')), corrupted = Array.from(engine.tokenize(msg.corrupted || ''));
      const s = engine.startPatching(clean, corrupted, msg.interventions || {});
      const L = info.n_layer, T = s.positions;
      const recovered = new Float32Array(s.total).fill(NaN);
      const done = await runJob(s.total, Msg.patchingProgress, ({layers, indices, values}) => values.forEach((v, i) => {
        recovered[layers[i] * T + indices[i]] = v;
      }));
      reply(post, Msg.patching, kPlain, s, {nLayer: L, recovered, done, cancelled: cutShort(done, s.total), ms: performance.now() - started,
                                            pieces: bytesToPieces(corrupted), answerPieces: bytesToPieces([s.answer, s.other])});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.patching, message: errorMessage(e)});
    } finally {
      if (info) endJob(ErrorKind.patching, msg);
    }
  }

  // Path patching's sweep (src/lab/path_patch.h): every head in turn the sender, from the corrupted
  // run to the receivers ('logits' or 'L.H.q|k|v,...'); values: m_patched - m_clean with m the clean
  // run's top token's logit at the last position, as `gpt2 path-patch --sweep` prints them.
  async function handlePathPatch(msg) {
    const started = performance.now();
    try {
      if (!info) throw new Error('Load a model first.');
      const clean = Array.from(engine.tokenize(msg.clean || '')), corrupted = Array.from(engine.tokenize(msg.corrupted || ''));
      const receivers = (msg.receivers || 'logits').trim();
      const s = engine.startPathPatch(clean, corrupted, receivers, -1, -1, msg.interventions || {});
      const values = new Float64Array(s.total).fill(NaN);
      const done = await runJob(s.total, Msg.pathPatchProgress, ({layers, indices, values: v}) => v.forEach((x, i) => {
        values[layers[i] * info.n_head + indices[i]] = x;
      }));
      reply(post, Msg.pathPatch, kPlain, s, {nLayer: info.n_layer, nHead: info.n_head, receivers,
                                             targetPiece: bytesToPieces([s.target])[0], values, done, cancelled: cutShort(done, s.total),
                                             ms: performance.now() - started});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.pathPatch, message: errorMessage(e)});
    } finally {
      if (info) endJob(ErrorKind.pathPatch, msg);
    }
  }

  // One sender's paths, each alone (Lab::StartSenderPaths): to the logits, then to every head of
  // a later block through its q, k and v, from the last block down.
  async function handlePathPatchPaths(msg) {
    try {
      if (!info) throw new Error('Load a model first.');
      const clean = Array.from(engine.tokenize(msg.clean || '')), corrupted = Array.from(engine.tokenize(msg.corrupted || ''));
      const s = engine.startSenderPaths(clean, corrupted, msg.layer, msg.head, -1, -1, msg.interventions || {});
      const paths = [];
      const done = await runJob(s.total, Msg.pathPatchProgress, ({layers, indices, values}) => values.forEach((value, i) =>
        paths.push({receiver: layers[i] === info.n_layer ? 'logits' : `${layers[i]}.${indices[i]}`, value})), {paths: true});
      reply(post, Msg.pathPatchPaths, kPlain, s, {layer: msg.layer, head: msg.head, paths, done, cancelled: cutShort(done, s.total)});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.pathPatch, message: errorMessage(e)});
    } finally {
      if (info) endJob(ErrorKind.pathPatch, msg);
    }
  }

  // The engine re-runs the conversation to attribute (capturing it again, under the page's
  // interventions), so the views' data stay those of the same run.
  function handleAttribute(msg) {
    try {
      if (!info) throw new Error('Generate some text first.');
      const a = engine.attributeConversation(msg.interventions || {}, msg.position | 0, msg.target | 0);
      under.ran(msg.interventions || {});
      reply(post, Msg.attribution, canonical(msg.interventions), a);
    } catch (e) {
      under.forget();
      post({type: Msg.error, kind: ErrorKind.attribute, message: errorMessage(e)});
    }
  }

  // Gradients of the conversation's metric (engine.saliency), and attribution patching of a
  // clean/corrupted pair, under the request's interventions; the engine runs the conversation
  // again after each, captured under them. Posts run()'s result as the reply `type` with extras.
  function gradient(msg, type, run, extras = {}) {
    const {under: spec} = under.ensure(msg.interventions);
    const result = run();
    under.ran(spec);
    reply(post, type, spec, result, typeof extras === 'function' ? extras(result) : extras);
  }

  function handleSaliency(msg) {
    try {
      if (!info) throw new Error('Generate some text first.');
      const method = msg.method === 'ig' ? 'ig' : 'grad';
      const steps = msg.steps === undefined ? 16 : msg.steps | 0;
      gradient(msg, Msg.saliency, () => engine.saliency(msg.position ?? -1, msg.target ?? -1, msg.contrast ?? -1, method, steps),
               {method, steps});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.saliency, message: errorMessage(e)});
    }
  }

  function handleScoreSaliency(msg) {
    try {
      if (!info) throw new Error('Generate some text first.');
      gradient(msg, Msg.scoreSaliency, () => engine.scoreSaliency(msg.layer | 0, msg.head | 0, msg.query | 0, msg.key | 0));
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.scoreSaliency, message: errorMessage(e)});
    }
  }

  function handleAtp(msg) {
    const started = performance.now();
    try {
      if (!info) throw new Error('Load a model first.');
      const clean = Array.from(engine.tokenize(msg.clean || '')), corrupted = Array.from(engine.tokenize(msg.corrupted || ''));
      gradient(msg, Msg.atp, () => engine.attributionPatching(clean, corrupted, msg.target ?? -1, msg.contrast ?? -1),
               () => ({nLayer: info.n_layer, nHead: info.n_head, pieces: bytesToPieces(clean), ms: performance.now() - started}));
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.atp, message: errorMessage(e)});
    }
  }

  function handleAtpExact(msg) {
    try {
      if (!info) throw new Error('Load a model first.');
      const clean = Array.from(engine.tokenize(msg.clean || '')), corrupted = Array.from(engine.tokenize(msg.corrupted || ''));
      const kind = msg.kind === 'head' ? 'head' : 'resid';
      gradient(msg, Msg.atpExact, () => engine.atpExact(clean, corrupted, kind, msg.layer | 0, msg.index | 0, msg.target ?? -1,
                                                        msg.contrast ?? -1),
               {kind, layer: msg.layer | 0, index: msg.index | 0});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.atpExact, message: errorMessage(e)});
    }
  }

  // ---- Export ----------------------------------------------------------------------------------

  // The captured tensors of block `layer` for every position, named and shaped as
  // TransformerLens's ActivationCache names them (batch dimension 1).
  function handleExport(msg) {
    try {
      const spec = underCapture(msg);
      const P = engine.capturedPositions();
      if (P === 0) throw new Error('Nothing to export: generate with "capture activations" on first.');
      const l = msg.layer | 0, H = info.n_head, C = info.n_embd, F = info.n_ff;
      if (l < 0 || l >= info.n_layer) throw new Error(`Block ${l} is out of range; valid blocks are 0..${info.n_layer - 1}.`);
      const pattern = new Float32Array(H * P * P);  // [head, query, key]; 0 above the diagonal, as TL
      const mlp = new Float32Array(P * F);
      for (let q = 0; q < P; ++q) {
        const row = engine.attention(l, q);  // view [H, q + 1]: copy before the next engine call
        for (let h = 0; h < H; ++h) pattern.set(row.subarray(h * (q + 1), (h + 1) * (q + 1)), (h * P + q) * P);
        mlp.set(engine.mlpActivations(l, q), q * F);
      }
      const tensors = [
        {name: `blocks.${l}.hook_resid_pre`, shape: [1, P, C], data: engine.residual(l).slice()},
        {name: `blocks.${l}.attn.hook_pattern`, shape: [1, H, P, P], data: pattern},
        {name: `blocks.${l}.mlp.hook_post`, shape: [1, P, F], data: mlp},
        {name: `blocks.${l}.hook_resid_post`, shape: [1, P, C], data: engine.residual(l + 1).slice()},
      ];
      reply(post, Msg.exportBlock, spec, {tensors}, {layer: l});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.exportBlock, message: errorMessage(e)});
    }
  }

  return {
    // The engine the jobs run on and its model's info (null while none is loaded).
    attach(newEngine, newInfo) {
      if (newEngine !== engine) under.attach(newEngine);
      engine = newEngine;
      info = newInfo;
    },
    detach() {
      engine = null;
      info = null;
    },
    warmUp,
    // Work left from a message that yielded to later ones (the logit lens window), run when the
    // queue is empty; dropped before a message that may change what the capture holds.
    async background() {
      if (!lensTask || !engine) return;
      try { await continueLens(); } catch (e) {
        lensTask = null;
        post({type: Msg.error, kind: ErrorKind.inspect, message: errorMessage(e)});
      }
    },
    dropBackground() { lensTask = null; },
    stop() { stopRequested = true; },
    cancel() { cancelJob = true; },
    clearCancel() { cancelJob = false; },
    generate: handleGenerate,
    inspect: handleInspect,
    experiment: handleExperiment,
    headSweep: handleHeadSweep,
    patching: handlePatching,
    pathPatch: handlePathPatch,
    pathPatchPaths: handlePathPatchPaths,
    attribute: handleAttribute,
    saliency: handleSaliency,
    atp: handleAtp,
    scoreSaliency: handleScoreSaliency,
    atpExact: handleAtpExact,
    exportBlock: handleExport,
    ...createCircuits({post, engine: () => engine, info: () => info, bytesToPieces, under}),
    attentionMap(msg) {
      try { attentionMap(msg.layer, msg.head, underCapture(msg)); } catch (e) {
        post({type: Msg.error, kind: ErrorKind.inspect, message: errorMessage(e)});
      }
    },
  };
}
