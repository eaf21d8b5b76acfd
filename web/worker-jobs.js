// The engine's jobs: generation, inspection (activations, logit lens, attention maps), the
// experiments (run again, head sweep, activation patching, attribution) and export. The
// dispatcher (worker.js) hands them the loaded engine (attach) and calls one handler per message
// (protocol.js documents the messages); stop() and cancel() are called the moment their message
// arrives, so a running job sees them at its next yield. The conversation the page shows lives
// here between jobs.

import {ErrorKind, Msg, errorMessage} from './protocol.js';

const kEndOfText = 50256;
// The logit lens costs n_layer * positions * n_embd * n_vocab multiply-adds; keep a window
// around ~3e9 (a few seconds of wasm SIMD) and at most this many positions.
const kLensBudget = 3e9;
const kLensMaxPositions = 64;

// post(msg, transfer): to the page; yieldToEvents(): lets queued messages (stop, cancel) arrive.
export function createJobs({post, yieldToEvents}) {
  let engine = null;
  let info = null;
  let stopRequested = false;
  let cancelJob = false;      // a head sweep or patching job is to stop
  let lastTokens = [];        // prompt + generated ids of the last generation
  let lastPrompt = [];        // the prompt ids of the last generation
  let conversation = [];      // the ids the engine has run (and captured) of the last generation

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

  async function handleGenerate(msg) {
    if (!info) { post({type: Msg.error, kind: ErrorKind.generate, message: 'Load a model first.'}); return; }
    stopRequested = false;
    conversation = [];
    const decoder = new TextDecoder('utf-8');
    let reason = 'max-tokens';
    let generated = 0;
    let prefillMs = 0;
    let blockMs = new Float64Array(0);  // each block's share of the prefill, ms
    let decodeMs = 0;
    let promptIds = [];
    try {
      promptIds = Array.from(engine.tokenize(msg.prompt));
      if (promptIds.length === 0) throw new Error('The prompt is empty: type at least one character.');
      if (promptIds.length > info.n_ctx) {
        throw new Error(`The prompt is ${promptIds.length} tokens long, longer than the model's context of ` +
                        `${info.n_ctx} tokens. Shorten it.`);
      }
      const spec = engineSpec(msg.interventions, promptIds);
      lastPrompt = promptIds;
      engine.reset();
      engine.setCapture(!!msg.capture);
      engine.setInterventions(spec);
      engine.setSampling(msg.temperature, msg.topK, msg.topP, msg.seed);
      post({type: Msg.prompt, ids: promptIds, pieces: bytesToPieces(promptIds)});
      lastTokens = promptIds.slice();
      const t0 = performance.now();
      engine.prefill(promptIds);
      prefillMs = performance.now() - t0;
      blockMs = engine.blockTimes();
      const maxTokens = Math.max(0, msg.maxTokens | 0);
      const t1 = performance.now();
      for (let i = 0; i < maxTokens; ++i) {
        const id = engine.sample();
        generated++;
        lastTokens.push(id);
        const text = decoder.decode(engine.tokenBytes(id), {stream: true});
        post({type: Msg.token, id, text, index: i});
        if (id === kEndOfText) { reason = 'end-of-text'; break; }
        await yieldToEvents();
        if (stopRequested) { engine.stop(); reason = 'stopped'; break; }
        if (engine.position() >= info.n_ctx) { reason = 'context-full'; break; }
        // The last token is fed too, so its activations can be inspected like the others.
        engine.step(id);
      }
      decodeMs = performance.now() - t1;
      conversation = lastTokens.slice(0, engine.position());
      const tail = decoder.decode();
      if (tail) post({type: Msg.token, id: -1, text: tail, index: -1});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.generate, message: errorMessage(e)});
      reason = 'error';
    }
    post({type: Msg.stats, promptTokens: promptIds.length, prefillMs, blockMs, generated,
          decodeMs, tokensPerSecond: generated > 0 && decodeMs > 0 ? generated / (decodeMs / 1000) : 0,
          reason, captured: engine.capturedPositions()});
  }

  // ---- Activations ----------------------------------------------------------------------------

  // Everything the page's views need for one picked token (position p), copied out of wasm
  // memory (views die when memory grows) and transferred.
  function inspect(position) {
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
    const transfer = [...attention.map((a) => a.buffer), residualNorms.buffer, lnStats.buffer, sublayerNorms.buffer];
    post({type: Msg.activations, position: p, positions: P, tokens: lastTokens.slice(0, P + 1),
          pieces: bytesToPieces(lastTokens.slice(0, Math.min(lastTokens.length, P + 1))),
          attention, residualNorms, lnStats, sublayerNorms, mlp, topIds: Array.from(top.ids), topProbs: Array.from(top.probs),
          topPieces: bytesToPieces(Array.from(top.ids).filter((i) => i >= 0))}, transfer);
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
    const order = Array.from({length: n}, (_, i) => i);
    order.sort((a, b) => Math.abs(view[b]) - Math.abs(view[a]) || a - b);
    const top = order.slice(0, 12).map((i) => ({neuron: i, value: view[i]}));
    return {hist, lo, hi, min, max, mean: sum / n, active, n, top};
  }

  async function lens(position) {
    const P = engine.capturedPositions();
    const p = Math.max(0, Math.min(P - 1, position | 0));
    const perPosition = info.n_layer * info.n_embd * info.n_vocab;
    const width = Math.max(1, Math.min(P, kLensMaxPositions, Math.floor(kLensBudget / perPosition)));
    // A window ending at the picked token (or starting at 0 when everything fits).
    const end = Math.min(P, Math.max(p + 1, width));
    const begin = Math.max(0, end - width);
    post({type: Msg.lensStart, begin, end});
    const topK = 10;
    const r = engine.logitLens(begin, end, topK);
    const ids = Array.from(r.ids);
    const uniq = [...new Set(ids.filter((i) => i >= 0))];
    const pieces = Object.fromEntries(uniq.map((id, k) => [id, bytesToPieces([id])[0]]));
    post({type: Msg.lens, begin, end, topK, nLayer: info.n_layer, ids, probs: Array.from(r.probs), pieces});
  }

  // [P, P] attention of one head (row = query, column = key; NaN above the diagonal).
  function attentionMap(layer, head) {
    const P = engine.capturedPositions();
    const H = info.n_head;
    const l = Math.max(0, Math.min(info.n_layer - 1, layer | 0));
    const h = Math.max(0, Math.min(H - 1, head | 0));
    const map = new Float32Array(P * P).fill(NaN);
    for (let q = 0; q < P; ++q) {
      map.set(engine.headAttention(l, h, q), q * P);  // a view: read before the next engine call
    }
    post({type: Msg.attentionMap, layer: l, head: h, positions: P, map}, [map.buffer]);
  }

  async function handleInspect(msg) {
    try {
      if (msg.layer !== undefined && engine.capturedPositions() > 0) attentionMap(msg.layer, msg.head);
      const p = inspect(msg.position);
      await yieldToEvents();
      if (msg.lens !== false) await lens(p);
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.inspect, message: errorMessage(e)});
    }
  }

  // ---- Experiments ------------------------------------------------------------------------------

  // Mean ablation: a knocked-out head outputs its mean over the prompt's positions in the plain
  // model instead of zero (TransformerLens's mean ablation over the one prompt there is). One
  // captured plain prefill of the prompt; leaves the engine reset.
  function promptHeadMeans(promptIds) {
    engine.setInterventions({});
    engine.reset();
    engine.setCapture(true);
    engine.prefill(promptIds);
    const means = engine.headMeans();
    engine.reset();
    return means;
  }

  // The engine's interventions for the page's: with meanAblation they carry the means (then the
  // engine is left reset).
  function engineSpec(iv, promptIds) {
    if (!iv?.meanAblation || !iv.ablateHeads?.length || !promptIds.length) return {...iv, meanAblation: false};
    return {...iv, meanAblation: false, headMeans: promptHeadMeans(promptIds)};
  }

  // The whole next-token distribution at a captured position (float64 for the sums below).
  function fullDistribution(p) {
    return Float64Array.from(engine.finalProbs(p));
  }

  function topOf(dist, k) {
    const order = Array.from(dist.keys()).sort((a, b) => dist[b] - dist[a] || a - b).slice(0, k);
    return {ids: order, probs: order.map((i) => dist[i])};
  }

  // KL(p || q) in nats; a token the intervened model gives no probability (underflow) is
  // floored at 1e-30 so a finite number is shown.
  function klDivergence(p, q) {
    let kl = 0;
    for (let i = 0; i < p.length; ++i) {
      if (p[i] > 0) kl += p[i] * Math.log(p[i] / Math.max(q[i], 1e-30));
    }
    return Math.max(0, kl);
  }

  // Generates from promptIds with the current interventions and sampling (capture off); returns
  // the sampled ids.
  async function sampleIds(promptIds, msg) {
    engine.reset();
    engine.setCapture(false);
    engine.setSampling(msg.temperature, msg.topK, msg.topP, msg.seed);
    engine.prefill(promptIds);
    const ids = [];
    for (let i = 0; i < msg.maxTokens; ++i) {
      const id = engine.sample();
      ids.push(id);
      if (id === kEndOfText || engine.position() >= info.n_ctx) break;
      engine.step(id);
      if (i % 8 === 7) await yieldToEvents();
    }
    return ids;
  }

  async function handleExperiment(msg) {
    try {
      if (!info || !conversation.length) throw new Error('Generate some text first, then run the experiment.');
      const promptIds = Array.from(engine.tokenize(msg.prompt));
      if (!promptIds.length) throw new Error('The prompt is empty: type at least one character.');
      const spec = engineSpec(msg.interventions, promptIds);
      engine.setInterventions({});
      const textBefore = await sampleIds(promptIds, msg);
      engine.setInterventions(spec);
      const textAfter = await sampleIds(promptIds, msg);
      // The conversation the page shows, plain, then re-run under the interventions: the re-run
      // reuses the cache and the stream before the first changed block.
      engine.setInterventions({});
      engine.reset();
      engine.setCapture(true);
      engine.prefill(conversation);
      const p = Math.max(0, Math.min(conversation.length - 1, msg.position | 0));
      const before = fullDistribution(p);
      engine.setInterventions(spec);
      const fromBlock = engine.rerun();
      const after = fullDistribution(p);
      const topBefore = topOf(before, 10), topAfter = topOf(after, 10);
      const ids = new Set([...topBefore.ids, ...topAfter.ids, ...textBefore, ...textAfter]);
      const pieces = Object.fromEntries([...ids].map((id) => [id, bytesToPieces([id])[0]]));
      post({type: Msg.experiment, position: p, nLayer: info.n_layer, fromBlock, kl: klDivergence(before, after),
            before: topBefore, after: {...topAfter, probsBefore: topAfter.ids.map((i) => before[i])},
            text: {before: textBefore, after: textAfter}, pieces});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.experiment, message: errorMessage(e)});
    }
  }

  // Splits items (in the order the job runs them) into consecutive groups of about `budget` work
  // each (workOf(item): its work in full re-runs of the prompt), at least one item per group:
  // each group is one engine call, so a call lasts about `budget` prefills, which bounds how long
  // a cancel or a progress update waits, while the probes of a call share the unembedding's pass.
  function groupsByWork(items, workOf, budget) {
    const groups = [];
    let group = [], work = 0;
    for (const item of items) {
      if (group.length && work + workOf(item) > budget) {
        groups.push(group);
        group = [];
        work = 0;
      }
      group.push(item);
      work += workOf(item);
    }
    if (group.length) groups.push(group);
    return groups;
  }
  const kCallBudget = 4;  // prefills of the prompt per engine call of a job (~0.6 s for GPT-2 small, 32 tokens)

  // Each head knocked out alone and the target's log-probability at `p` measured by the engine
  // (Engine::AblatedLogProbs: only positions 0..p run again, from the head's block, without
  // capture), ranked by how much it drops. The blocks go from the last down, so each probe's
  // block is the first its cache differs in and no block before it runs again.
  async function handleHeadSweep(msg) {
    const L = info?.n_layer, H = info?.n_head, total = L * H;
    const heads = [];
    const started = performance.now();
    let restore = {};
    try {
      if (!info || !conversation.length || engine.capturedPositions() !== conversation.length) {
        throw new Error('Generate some text with "capture activations" on first.');
      }
      const p = Math.max(0, Math.min(conversation.length - 1, msg.position | 0));
      const target = msg.target | 0;
      if (target < 0 || target >= info.n_vocab) throw new Error(`The target token id ${target} is not in the vocabulary.`);
      const spec = engineSpec(msg.interventions, lastPrompt);
      const means = msg.interventions?.meanAblation ? spec.headMeans || promptHeadMeans(lastPrompt) : new Float32Array(0);
      // The plain run of the conversation, captured: every probe starts from its stream.
      engine.setInterventions({});
      if (engine.capturedPositions() === conversation.length) {
        engine.rerun();
      } else {  // promptHeadMeans ran the prompt instead
        engine.reset();
        engine.setCapture(true);
        engine.prefill(conversation);
      }
      restore = spec;
      const base = engine.ablatedLogProb(L, 0, p, target, means);
      const order = [];
      for (let l = L - 1; l >= 0; --l) for (let h = 0; h < H; ++h) order.push([l, h]);
      for (const group of groupsByWork(order, ([l]) => (L - l) / L, kCallBudget)) {
        if (cancelJob) break;
        const logProbs = engine.ablatedLogProbs(group, p, target, means);
        group.forEach(([l, h], i) => heads.push({layer: l, head: h, logProb: logProbs[i], drop: base - logProbs[i]}));
        post({type: Msg.sweepProgress, done: heads.length, total});
        await yieldToEvents();
      }
      heads.sort((a, b) => b.drop - a.drop || a.layer - b.layer || a.head - b.head);
      post({type: Msg.sweep, position: p, target, base, heads, done: heads.length, total, cancelled: cancelJob,
            ms: performance.now() - started});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.sweep, message: errorMessage(e)});
    } finally {
      // Leave the engine as the page shows it: the conversation under the page's interventions.
      try {
        if (info && conversation.length && engine.capturedPositions() === conversation.length) {
          engine.setInterventions(restore);
          engine.rerun();
        }
      } catch (e) {
        post({type: Msg.error, kind: ErrorKind.sweep, message: errorMessage(e)});
      }
    }
  }

  // Activation patching: for every block l and position p, the corrupted prompt re-run with the
  // residual stream entering block l at p replaced by the clean run's. The engine re-runs only
  // positions p.. from block l (Engine::PatchedLogProbs); going down the positions, then down the
  // blocks, keeps each re-run to what the previous one changed. The logit difference of the two
  // runs' answers is log p(answer) - log p(other): the softmax's normaliser cancels.
  async function handlePatching(msg) {
    const started = performance.now();
    try {
      if (!info) throw new Error('Load a model first.');
      const clean = Array.from(engine.tokenize(msg.clean || '')), corrupted = Array.from(engine.tokenize(msg.corrupted || ''));
      if (!clean.length || !corrupted.length) throw new Error('Type a clean and a corrupted prompt.');
      if (clean.length !== corrupted.length) {
        throw new Error(`The clean prompt is ${clean.length} tokens and the corrupted one ${corrupted.length}: ` +
                        'patching needs the same number of tokens (change a word for another of one token).');
      }
      if (clean.length > info.n_ctx) throw new Error(`The prompts are longer than the model's context of ${info.n_ctx} tokens.`);
      const L = info.n_layer, T = clean.length, total = L * T;
      engine.setInterventions({});
      engine.reset();
      engine.setCapture(true);
      // Each prompt's top token, then the two log-probability differences measured as the
      // patched runs' are (in double, from the logits), so a patch that restores all gives 1.
      engine.prefill(corrupted);
      const other = engine.topProbs(T - 1).ids[0];
      const diff = (a) => engine.ablatedLogProb(L, 0, T - 1, a, false) -
                          engine.ablatedLogProb(L, 0, T - 1, other, false);
      engine.reset();
      engine.prefill(clean);
      const cleanResid = Array.from({length: L}, (_, l) => engine.residual(l).slice());
      const answer = engine.topProbs(T - 1).ids[0];
      if (answer === other) {
        throw new Error('Both prompts predict the same next token, so there is no difference to bring back: ' +
                        'choose a corrupted prompt whose most likely next token differs.');
      }
      const cleanDiff = diff(answer);
      engine.reset();
      engine.prefill(corrupted);
      const corruptedDiff = diff(answer);
      const recovered = new Float32Array(total).fill(NaN);
      let done = 0;
      const cells = [];
      for (let l = L - 1; l >= 0; --l) for (let p = T - 1; p >= 0; --p) cells.push([l, p]);
      // A group never spans two blocks: one engine call patches one block's stream.
      const groups = groupsByWork(cells, ([l, p]) => ((L - l) / L) * ((T - p) / T), kCallBudget)
          .flatMap((g) => [...new Set(g.map(([l]) => l))].map((l) => g.filter(([m]) => m === l)));
      for (const group of groups) {
        if (cancelJob) break;
        const l = group[0][0], positions = group.map(([, p]) => p);
        const logProbs = engine.patchedLogProbsAt(l, positions, cleanResid[l], [answer, other]);
        positions.forEach((p, i) => {
          recovered[l * T + p] = (logProbs[2 * i] - logProbs[2 * i + 1] - corruptedDiff) / (cleanDiff - corruptedDiff);
        });
        done += positions.length;
        post({type: Msg.patchingProgress, done, total});
        await yieldToEvents();
      }
      post({type: Msg.patching, nLayer: L, positions: T, answer, other, cleanDiff, corruptedDiff, recovered, done, total,
            cancelled: cancelJob, ms: performance.now() - started, pieces: bytesToPieces(corrupted), answerPieces: bytesToPieces([answer, other])},
           [recovered.buffer]);
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.patching, message: errorMessage(e)});
    } finally {
      // The engine held the two prompts: give it back the page's conversation.
      try {
        engine.setInterventions(engineSpec(msg.interventions, lastPrompt));
        if (conversation.length) {
          engine.reset();
          engine.setCapture(true);
          engine.prefill(conversation);
        }
      } catch (e) {
        post({type: Msg.error, kind: ErrorKind.patching, message: errorMessage(e)});
      }
    }
  }

  // The engine re-runs the conversation to attribute (capturing it again, under the same
  // interventions), so the views' data stay those of the same run.
  function handleAttribute(msg) {
    try {
      if (!info || !conversation.length) throw new Error('Generate some text first.');
      engine.setInterventions(engineSpec(msg.interventions, lastPrompt));
      const a = engine.attribute(conversation, msg.position | 0, msg.target | 0, -1);
      post({type: Msg.attribution, position: a.position, target: a.target, names: Array.from(a.names),
            values: a.values, logit: a.logit}, [a.values.buffer]);
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.attribute, message: errorMessage(e)});
    }
  }

  // ---- Export ----------------------------------------------------------------------------------

  // The captured tensors of block `layer` for every position, named and shaped as
  // TransformerLens's ActivationCache names them (batch dimension 1).
  function handleExport(msg) {
    try {
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
      post({type: Msg.exportBlock, layer: l, tensors}, tensors.map((t) => t.data.buffer));
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.exportBlock, message: errorMessage(e)});
    }
  }

  return {
    // The engine the jobs run on and its model's info (null while none is loaded).
    attach(newEngine, newInfo) {
      engine = newEngine;
      info = newInfo;
    },
    detach() {
      engine = null;
      info = null;
    },
    warmUp,
    stop() { stopRequested = true; },
    cancel() { cancelJob = true; },
    clearCancel() { cancelJob = false; },
    generate: handleGenerate,
    inspect: handleInspect,
    experiment: handleExperiment,
    headSweep: handleHeadSweep,
    patching: handlePatching,
    attribute: handleAttribute,
    exportBlock: handleExport,
    attentionMap(msg) {
      try { attentionMap(msg.layer, msg.head); } catch (e) {
        post({type: Msg.error, kind: ErrorKind.inspect, message: errorMessage(e)});
      }
    },
  };
}
